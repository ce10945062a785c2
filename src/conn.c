/* conn.c: what lower modules may do to a client connection: queue reply bytes, wake it, close it (deferred). */
#include "conn.h"

#include <assert.h>

#include <event2/buffer.h>

void conn_out(struct client *c, const char *data, size_t len)
{
    if (conn_output_over(c, len)) return; /* closed (now or before): never queued */
    STAT_ADD(&c->worker->stats, bytes_to_clients, len);
    c->out_total += len;
    if (c->bev) {
        bufferevent_write(c->bev, data, len);
        conn_account(c);
        event_active(c->worker->flush_ev, EV_TIMEOUT, 0); /* its stats are flushed before it goes */
        return;
    }
    bytebuf_add(&c->obuf, data, len);
    conn_account(c);
    if (!c->out_dirty) {
        ptrvec_push(&c->worker->dirty_clients, c);
        c->out_dirty = 1;
        event_active(c->worker->flush_ev, EV_TIMEOUT, 0);
    }
}

void conn_account(struct client *c)
{
    size_t now = c->closed ? 0 : c->qlen + c->multi_buf.len + conn_out_pending(c);
    mem_set(c->worker, &c->mem_held, now);
}

size_t conn_out_held(const struct client *c)
{
    return conn_out_pending(c) + c->replies_held;
}

int conn_output_over(struct client *c, size_t arriving)
{
    if (c->closed) return 1;
    const struct config *cfg = c->worker->cfg;
    size_t held = conn_out_held(c);
    if ((int64_t)(held + arriving) <= cfg->client_output_limit) return 0; /* the common case: no atomic read */
    int mem = mem_over(c->worker);
    if ((int64_t)(held + arriving) <= (mem ? cfg->client_output_limit : cfg->client_output_hard_limit)) return 0;
    log_event(LOG_WARN, "client_output_limit", &(struct log_fields){.client = c->addr, .client_id = c->id},
              "client %llu %s closed: its replies (%zu bytes held, %zu arriving) passed %s", (unsigned long long)c->id,
              c->addr, held, arriving,
              mem ? "client-output-limit while keygate is over max-memory" : "client-output-hard-limit");
    STAT_INC(&c->worker->stats, clients_output_limit);
    conn_close(c, "over client-output-hard-limit");
    return 1;
}

int conn_user_login(struct client *c, const struct user_conf *u)
{
    struct userlimit *next = userlimit_get(&c->worker->proxy->users, u->name);
    if (next == c->ulimit) return 0; /* AUTH again as the same user: counted once */
    if (userlimit_login(next, u->max_clients) != 0) return -1;
    conn_user_logout(c);
    c->ulimit = next;
    return 0;
}

void conn_user_logout(struct client *c)
{
    if (!c->ulimit) return;
    if (c->user_requests) userlimit_count(c->ulimit, c->user_requests); /* what its last batch counted so far */
    c->user_requests = 0;
    userlimit_logout(c->ulimit);
    c->ulimit = NULL;
}

void conn_wake(struct client *c)
{
    if (c->woken || c->closed) return;
    c->woken = 1;
    ptrvec_push(&c->worker->woken, c);
    event_active(c->worker->flush_ev, EV_TIMEOUT, 0);
}

void conn_close(struct client *c, const char *reason)
{
    struct worker *w = c->worker;
    if (c->closed) return;
    c->closed = 1;
    log_event(LOG_DEBUG, "client_closed", &(struct log_fields){.client = c->addr, .client_id = c->id},
              "client %llu %s closed: %s", (unsigned long long)c->id, c->addr, reason);
    /* no callback of c runs from here on: its events go, its socket closes at the reap */
    if (c->bev) {
        bufferevent_setcb(c->bev, NULL, NULL, NULL, NULL);
        bufferevent_disable(c->bev, EV_READ | EV_WRITE);
    }
    if (c->rev) event_del(c->rev);
    if (c->wev) event_del(c->wev);
    if (c->pev) event_del(c->pev);
    TAILQ_REMOVE(&w->clients, c, link);
    idmap_del(&w->clients_by_id, c->id);
    tracking_client_remove(&w->proxy->tracking, c->id);
    /* off every list of the loop but the one of clients to tear down */
    if (c->out_dirty) ptrvec_remove(&w->dirty_clients, c);
    if (c->postponed) ptrvec_remove(&w->postponed, c);
    if (c->woken) ptrvec_remove(&w->woken, c);
    c->out_dirty = c->postponed = c->woken = 0;
    __atomic_sub_fetch(&w->proxy->clients_now, 1, __ATOMIC_RELAXED);
    ptrvec_push(&w->closing, c);
    event_active(w->reap_ev, EV_TIMEOUT, 0);
}
