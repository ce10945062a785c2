/* txn.c: a client's MULTI/EXEC transaction: queue its commands, send them whole at EXEC, DISCARD, end its WATCH. */
/*
 * Between MULTI and EXEC a client's commands are not sent: each is answered +QUEUED (or its
 * error, which makes EXEC answer EXECABORT) and written into c->multi_buf, which EXEC sends as
 * MULTI + the commands + EXEC in one write, to the instance (and on a cluster the slot) its
 * keys and its WATCHed keys share, on the WATCH pin when there is one (pins.c).
 */
#include "txn.h"

#include "nearcache.h"
#include "nodes.h"
#include "pins.h"
#include "request.h"
#include "router.h"
#include "tracker.h"

#include <stdint.h>

void txn_begin(struct client *c, struct request *req)
{
    c->multi_buf.len = 0;
    session_multi_begin(&c->session);
    request_complete(req, STR_AND_LEN("+OK\r\n"));
}

/* Reply +QUEUED/-error to a command inside the client's MULTI, buffering it for EXEC. */
void txn_queue(struct client *c, struct request *req, const struct plan *plan, const char *frame)
{
    if (plan->kind == PLAN_ERROR) {
        c->multi_dirty = 1;
        request_error(req, plan->error);
        return;
    }
    router_write_queued(&c->multi_buf, c, plan, frame, &c->multi_keep);
    if (plan->replicas > c->multi_replicas) c->multi_replicas = plan->replicas;
    nearcache_queued(c, plan);
    if (plan->nappend || plan->ttl.nfix) stats_ttl_injected(&c->worker->stats, &req->mark); /* counted when queued */
    session_multi_queued(&c->session, plan->instance, plan->slot);
    if ((int64_t)c->multi_buf.len > c->worker->cfg->max_request_bytes) {
        /* the transaction is held in keygate's memory: it counts as query buffer, and a
         * client past its limit is closed, as Redis closes one over client-query-buffer-limit */
        log_event(LOG_WARN, "client_query_limit", &(struct log_fields){.client = c->addr, .client_id = c->id},
                  "closing client %llu %s that reached max query buffer length: its MULTI holds %zu bytes "
                  "(max-request-size %lld)",
                  (unsigned long long)c->id, c->addr, c->multi_buf.len, (long long)c->worker->cfg->max_request_bytes);
        STAT_INC(&c->worker->stats, clients_query_limit);
        conn_close(c, "MULTI over max-request-size");
        return;
    }
    conn_account(c);
    request_complete(req, STR_AND_LEN("+QUEUED\r\n"));
}

void txn_reset(struct client *c)
{
    c->multi_buf.len = 0;
    if (c->multi_buf.cap > CLIENT_BUF_KEEP_BYTES) bytebuf_free(&c->multi_buf);
    conn_account(c);
    bytebuf_free(&c->multi_keep);
    c->nc_multi.len = 0;
    c->track_multi.len = 0;
    c->multi_dirty = 0;
    c->multi_replicas = 0;
    session_multi_end(&c->session);
}

/* WATCH state ends (EXEC, DISCARD, UNWATCH): the pin goes back once its replies are in. */
void txn_watch_end(struct client *c)
{
    if (!c->watch_pin) return;
    pins_watch_release(c);
    c->stall = 1; /* the next command may go to another connection: keep the order */
}

/* The slot of c's transaction on a cluster instance (-1: none, or a single server; PLAN_SLOT_SPANS:
 * its keys and the WATCHed ones are in two slots). */
int txn_slot(const struct client *c)
{
    const struct session *s = &c->session;
    if (s->multi_slot >= 0 && s->watch_slot >= 0 && s->multi_slot != s->watch_slot) return PLAN_SLOT_SPANS;
    return s->multi_slot >= 0 ? s->multi_slot : s->watch_slot;
}

/* The instance txn_exec sends c's transaction to. */
int txn_instance(const struct client *c)
{
    int instance = c->session.multi_instance >= 0 ? c->session.multi_instance : c->session.watch_instance;
    return instance < 0 ? 0 : instance; /* only keyless commands (PING, ECHO): any instance answers them */
}

/* EXEC: send MULTI + the buffered commands + EXEC in one write, or answer EXECABORT. */
void txn_exec(struct client *c, struct request *req)
{
    if (pins_watch_lost_take(c)) {
        int inst = c->session.watch_instance;                     /* >= 0: it had a WATCH connection */
        int moves = inst >= 0 && nodes_may_move(c->worker, inst); /* a cluster or sentinel instance */
        txn_reset(c);
        session_unwatch(&c->session);
        if (moves) /* its nodes change under it (a failover closes the old primary's clients): a broken WATCH */
            request_complete(req, c->resp3 ? "_\r\n" : "*-1\r\n", c->resp3 ? 3 : 5);
        else
            request_error(req, "UNAVAILABLE the WATCHed instance's connection was lost; transaction discarded");
        return;
    }
    if (c->multi_dirty) {
        txn_reset(c);
        if (c->watch_pin) {
            pins_watch_abandon(c); /* still WATCHing: never reuse */
            c->stall = 1;
        }
        request_error(req, "EXECABORT Transaction discarded because of previous errors.");
        return;
    }
    int slot = txn_slot(c);
    if (c->session.multi_crossslot || slot == PLAN_SLOT_SPANS) { /* a cluster runs one slot's transaction */
        txn_reset(c);
        txn_watch_end(c);
        request_error(req, PLAN_CROSSSLOT);
        return;
    }
    if (c->multi_keep.len == 0 && !c->watch_pin) {
        txn_reset(c);
        request_complete(req, STR_AND_LEN("*0\r\n"));
        return;
    }
    int instance = txn_instance(c);
    struct backend *b = c->watch_pin ? c->watch_pin : router_conn_for(c, instance, slot);
    if (!b && !nodes_may_move(c->worker, instance)) { /* a cluster's waits for its slot's owner */
        txn_reset(c);
        txn_watch_end(c);
        router_unavailable(c, req, instance);
        return;
    }
    nearcache_exec(c, req);
    tracker_exec(c, req);
    req->replicas = (uint8_t)c->multi_replicas;
    router_exec(c, b, req, instance, slot);
    txn_reset(c);
    txn_watch_end(c);
}

void txn_discard(struct client *c, struct request *req)
{
    txn_reset(c);
    (void)pins_watch_lost_take(c);
    if (!c->watch_pin) session_unwatch(&c->session); /* its connection is already gone */
    if (c->watch_pin) {
        /* DISCARD also unwatches: do it on the pin before it goes back */
        router_unwatch(c, req);
        txn_watch_end(c);
    }
    request_complete(req, STR_AND_LEN("+OK\r\n"));
}
