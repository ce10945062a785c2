/* client.c: client connections: accept, read, parse, decide, dispatch; service woken clients; tear down closed ones. */
/* Over 1,000 lines (about 1,300): one connection's life from accept to teardown, with its socket
 * I/O, its backpressure, its MULTI/EXEC and its dispatch. The pins and the "needs a dedicated
 * connection" decision are in pins.c (issue 29, item 3); what could leave next is the
 * transaction (client_exec, client_discard, client_multi_*, about 150 lines) and the socket I/O
 * (read, write, TLS, pause: about 300), each a concern of its own, not done in that change. */
#include "client.h"

#include "authgate.h"
#include "backend.h"
#include "nodes.h"
#include "local.h"
#include "pubsub.h"
#include "replies.h"
#include "report.h"
#include "request.h"
#include "ncpolicy.h"
#include "nearcache.h"
#include "pins.h"
#include "tracker.h"
#include "fanout.h"
#include "router.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>

static void client_read_cb(struct bufferevent *bev, void *arg);
static void client_write_cb(struct bufferevent *bev, void *arg);
static void client_event_cb(struct bufferevent *bev, short events, void *arg);
static void client_raw_read_cb(evutil_socket_t fd, short what, void *arg);
static void client_raw_write_cb(evutil_socket_t fd, short what, void *arg);
static void client_service(struct client *c);
static void client_tick_cb(evutil_socket_t fd, short what, void *arg);

#define CLIENT_TICK_MS 250 /* how often the clients are checked against the timeouts */

static void addr_format(const struct sockaddr *sa, char *out, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        snprintf(out, len, "%s:%d", host, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        snprintf(out, len, "[%s]:%d", host, ntohs(in6->sin6_port));
    } else {
        snprintf(out, len, "unix");
    }
}

void client_accept(struct worker *w, int fd, const struct sockaddr *sa, int salen, SSL_CTX *tls)
{
    const struct config *cfg = w->cfg;
    int now = __atomic_add_fetch(&w->proxy->clients_now, 1, __ATOMIC_RELAXED);
    if (now > cfg->max_clients) {
        __atomic_sub_fetch(&w->proxy->clients_now, 1, __ATOMIC_RELAXED);
        STAT_INC(&w->stats, connections_rejected);
        if (!tls) {
            char msg[64];
            size_t len = replies_error(msg, sizeof(msg), "ERR max number of clients reached");
            ssize_t n = write(fd, msg, len);
            (void)n;
        }
        close(fd);
        return;
    }
    if (sa->sa_family != AF_UNIX) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    struct client *c = xcalloc(1, sizeof(*c));
    c->worker = w;
    c->id = __atomic_add_fetch(&w->proxy->next_client_id, 1, __ATOMIC_RELAXED);
    c->created_ms = clock_wall_ms();
    c->last_active_ms = c->created_ms;
    addr_format(sa, c->addr, sizeof(c->addr));
    (void)salen;
    TAILQ_INIT(&c->queue);
    TAILQ_INIT(&c->resends);
    resp_parser_init(&c->parser);
    c->parser.max_bulk = cfg->max_request_bytes;
    replywin_init(&c->win, (uint64_t)cfg->client_output_limit);
    session_init(&c->session, cfg->nusers == 0);
    c->parser.unauthenticated = !c->session.authenticated; /* Redis's pre-AUTH request limits */
    c->fd = fd;
    c->pfd = -1;
    TAILQ_INSERT_TAIL(&w->clients, c, link);
    idmap_put(&w->clients_by_id, c->id, c);
    tracking_client_add(&w->proxy->tracking, c->id, w->id); /* a REDIRECT may name it */
    if (tls) {
        /* TLS clients: libevent's OpenSSL bufferevent does the handshake and records */
        SSL *ssl = SSL_new(tls);
        c->bev =
            ssl ? bufferevent_openssl_socket_new(w->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE)
                : NULL;
        if (!c->bev) {
            if (ssl) SSL_free(ssl);
            conn_close(c, "cannot set up TLS"); /* its fd closes at the reap */
            return;
        }
        c->tls_handshaking = 1; /* until BEV_EVENT_CONNECTED */
        bufferevent_setcb(c->bev, client_read_cb, client_write_cb, client_event_cb, c);
        bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    } else {
        /* plain TCP and unix sockets: read() and write() on the fd, no buffer layer */
        c->rev = xevent_new(w->base, fd, EV_READ | EV_PERSIST, client_raw_read_cb, c);
        c->wev = xevent_new(w->base, fd, EV_WRITE | EV_PERSIST, client_raw_write_cb, c);
        if (event_add(c->rev, NULL) != 0) {
            conn_close(c, "cannot watch the socket");
            return;
        }
    }
    STAT_INC(&w->stats, connections_received);
    if (!w->client_tick) { /* the timeouts' check, from the first client on */
        w->client_tick = xevent_new(w->base, -1, EV_PERSIST, client_tick_cb, w);
        struct timeval tv = {0, CLIENT_TICK_MS * 1000};
        event_add(w->client_tick, &tv);
    }
}

/* Tear down a closed client: orphan its requests (replies still due from backends free
 * them when they come), close the dedicated connections holding its state (never reused),
 * close the socket, free it. */
static void client_teardown(struct client *c)
{
    struct worker *w = c->worker;
    assert(c->closed && !c->out_dirty && !c->postponed && !c->woken);
    struct request *req;
    int released = 0;
    size_t held = 0;
    while ((req = TAILQ_FIRST(&c->queue))) {
        TAILQ_REMOVE(&c->queue, req, link);
        held += req->held;
        request_release(req);
        released++;
    }
    assert(released == c->nqueued);  /* nqueued counts the queue */
    assert(held == c->replies_held); /* replies_held counts what its requests keep */
    c->nqueued = 0;
    pins_drop_all(c);
    authgate_client_free(c);
    router_client_gone(c); /* after its requests were released: they are not sent again */
    if (c->owner_timer) event_free(c->owner_timer);
    if (c->rate_timer) event_free(c->rate_timer);
    conn_user_logout(c);
    if (c->pev) event_free(c->pev);
    if (c->pfd >= 0) close(c->pfd);
    if (c->bev) {
        bufferevent_free(c->bev); /* closes the fd */
    } else {
        if (c->rev) event_free(c->rev);
        if (c->wev) event_free(c->wev);
        close(c->fd);
    }
    bytebuf_free(&c->obuf);
    bytebuf_free(&c->multi_buf);
    bytebuf_free(&c->multi_keep);
    bytebuf_free(&c->nc_multi);
    bytebuf_free(&c->track_multi);
    mem_set(w, &c->mem_held, 0);
    resp_parser_free(&c->parser);
    free(c->qbuf);
    free(c->argv);
    free(c->argvlen);
    free(c->name);
    free(c);
}

void client_reap(struct worker *w)
{
    while (w->closing.n > 0) client_teardown(w->closing.items[--w->closing.n]);
}

/*
 * Client I/O. Plain TCP and unix clients are read with read() into the worker's scratch
 * buffer (a client keeps bytes only for an unfinished frame) and written with write()
 * from c->obuf once per loop iteration (client_write_all), waiting for EV_WRITE only when
 * the socket is full. TLS clients go through libevent's OpenSSL bufferevent.
 */

/* While paused: did the peer close or reset? Then c is closed (its pins released). */
static void client_paused_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;
    (void)fd;
    (void)what;
    struct pollfd p = {.fd = c->fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)))
        conn_close(c, p.revents & POLLRDHUP && !(p.revents & POLLERR) ? "connection closed by client"
                                                                      : "connection reset by client");
}

/*
 * A paused client must still be closed when its peer goes away (a client that leaves
 * while its BLPOP blocks releases its dedicated connection). A level-triggered watch
 * on fd cannot do it: with reading paused only EV_CLOSED would be registered, and
 * libevent's epoll backend reports a reset (EPOLLERR/HUP) as EV_READ|EV_WRITE, which
 * nothing takes, so the loop spins on it. An edge-triggered EV_READ|EV_CLOSED event on
 * a dup of fd reports each change once; client_paused_cb then asks poll() what it was.
 */
static void client_watch_close(struct client *c, int on)
{
    if (!on) {
        if (c->pev) event_del(c->pev);
        return;
    }
    if (!c->pev) {
        c->pfd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
        if (c->pfd < 0) {
            log_event(LOG_WARN, "client_pause_failed", &(struct log_fields){.client = c->addr, .client_id = c->id},
                      "client %llu: cannot watch its socket while paused: %s", (unsigned long long)c->id,
                      strerror(errno));
            return;
        }
        c->pev = xevent_new(c->worker->base, c->pfd, EV_READ | EV_CLOSED | EV_ET | EV_PERSIST, client_paused_cb, c);
    }
    event_add(c->pev, NULL);
}

static void client_set_reading(struct client *c, int on)
{
    if (c->bev) {
        if (on)
            bufferevent_enable(c->bev, EV_READ);
        else
            bufferevent_disable(c->bev, EV_READ);
    } else if (c->rev) {
        if (on)
            event_add(c->rev, NULL);
        else
            event_del(c->rev);
    }
    client_watch_close(c, !on);
}

/* Frames may wait in qbuf (backpressure, a stall): parse them from a deferred callback,
 * never from inside the parse loop that may be running now. */
static void client_resume_parsing(struct client *c)
{
    if (c->bev) {
        if (c->qlen > 0 || evbuffer_get_length(bufferevent_get_input(c->bev)) > 0)
            bufferevent_trigger(c->bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
    } else if (c->rev && c->qlen > 0 && !c->read_paused) {
        /* never while paused: libevent's event_add() skips the epoll registration of an
         * event that sits in the active queue, so un-pausing adds first, then activates */
        event_active(c->rev, EV_READ, 0);
    }
}

/* Waiting for its earlier replies (or subscription confirmations) before a switch of
 * connection: nothing more is parsed or read from c until they are in. */
static int client_stalled(const struct client *c)
{
    return c->stall && (c->nqueued > 0 || c->pubsub.markers_total > 0);
}

/* May c have one more request taken, by its reply window (replywin.h)? When not at once,
 * the window first grows by what c took off its output since it was last looked at. */
static inline int client_window_open(struct client *c)
{
    size_t pending = conn_out_pending(c);
    if (replywin_open(&c->win, pending + c->replies_held)) return 1;
    replywin_taken(&c->win, c->out_total - pending, (uint64_t)c->worker->cfg->client_output_limit);
    return replywin_open(&c->win, pending + c->replies_held);
}

/* Backpressure: stop reading while too much is queued; resume when it drains. */
static void client_update_reading(struct client *c)
{
    const struct config *cfg = c->worker->cfg;
    size_t out = conn_out_held(c); /* queued and kept behind an earlier request */
    int over = c->nqueued >= cfg->max_pending || (int64_t)out > cfg->client_output_limit;
    if (!over && !client_window_open(c)) {
        over = 1;
        if (!c->read_paused) STAT_INC(&c->worker->stats, clients_window_waits);
    }
    if (c->closing) over = 1;
    if (client_stalled(c)) over = 1;
    if (c->postponed) over = 1;
    if (c->auth_held || c->owner_held || c->rate_held) over = 1;
    if (!over && mem_over(c->worker)) {
        /* max-memory: read nothing more until the process is back under it */
        over = 1;
        if (!c->mem_paused) {
            c->mem_paused = 1;
            struct worker *w = c->worker;
            if (w->mem_timer && !evtimer_pending(w->mem_timer, NULL)) {
                struct timeval tv = {0, 20 * 1000};
                evtimer_add(w->mem_timer, &tv);
            }
        }
    }
    if (!over) c->mem_paused = 0;
    if (over && !c->read_paused) {
        client_set_reading(c, 0);
        c->read_paused = 1;
    } else if (!over && c->read_paused) {
        c->read_paused = 0;
        client_set_reading(c, 1);
        client_resume_parsing(c);
    }
}

/* Write c's queued replies now; EV_WRITE only when the socket is full. */
static void client_write_now(struct client *c)
{
    while (c->obuf_off < c->obuf.len) {
        ssize_t n = write(c->fd, c->obuf.p + c->obuf_off, c->obuf.len - c->obuf_off);
        if (n > 0) {
            c->obuf_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!c->wev_pending && event_add(c->wev, NULL) == 0) c->wev_pending = 1;
            return;
        }
        conn_close(c, "write error");
        return;
    }
    c->obuf.len = c->obuf_off = 0;
    if (c->obuf.cap > CLIENT_BUF_KEEP_BYTES) bytebuf_free(&c->obuf); /* a big reply came and went */
    conn_account(c);
    if (c->wev_pending) {
        event_del(c->wev);
        c->wev_pending = 0;
    }
    if (c->closing || c->read_paused) client_service(c);
}

void client_write_all(struct worker *w)
{
    while (w->dirty_clients.n > 0) {
        struct client *c = w->dirty_clients.items[--w->dirty_clients.n];
        c->out_dirty = 0;
        client_write_now(c);
    }
}

static void client_raw_write_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;
    (void)fd;
    (void)what;
    client_write_now(c);
}

/* After something changed for c: close it once it is closing and every reply is written,
 * resume parsing where a stall ended, re-evaluate backpressure. */
static void client_service(struct client *c)
{
    if (c->closing && TAILQ_EMPTY(&c->queue) && conn_out_pending(c) == 0) {
        conn_close(c, "closing");
        return;
    }
    if (c->stall && !client_stalled(c)) client_resume_parsing(c);
    client_update_reading(c);
}

void client_service_woken(struct worker *w)
{
    while (w->woken.n > 0) {
        struct client *c = w->woken.items[--w->woken.n];
        c->woken = 0;
        client_service(c);
    }
}

/* Grow the argv scratch arrays to hold n arguments. */
static void client_argv_reserve(struct client *c, size_t n)
{
    if (n <= c->argv_cap) return;
    size_t cap = c->argv_cap ? c->argv_cap : 16;
    while (cap < n) cap *= 2;
    c->argv = xrealloc(c->argv, cap * sizeof(*c->argv));
    c->argvlen = xrealloc(c->argvlen, cap * sizeof(*c->argvlen));
    c->argv_cap = cap;
}

/* Reply +QUEUED/-error to a command inside the client's MULTI, buffering it for EXEC. */
static void client_multi_queue(struct client *c, struct request *req, const struct plan *plan, const char *frame)
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

static void client_multi_reset(struct client *c)
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
static void client_watch_end(struct client *c)
{
    if (!c->watch_pin) return;
    pins_watch_release(c);
    c->stall = 1; /* the next command may go to another connection: keep the order */
}

/* The slot of c's transaction on a cluster instance (-1: none, or a single server; PLAN_SLOT_SPANS:
 * its keys and the WATCHed ones are in two slots). */
static int client_exec_slot(const struct client *c)
{
    const struct session *s = &c->session;
    if (s->multi_slot >= 0 && s->watch_slot >= 0 && s->multi_slot != s->watch_slot) return PLAN_SLOT_SPANS;
    return s->multi_slot >= 0 ? s->multi_slot : s->watch_slot;
}

/* The instance client_exec sends c's transaction to. */
static int client_exec_instance(const struct client *c)
{
    int instance = c->session.multi_instance >= 0 ? c->session.multi_instance : c->session.watch_instance;
    return instance < 0 ? 0 : instance; /* only keyless commands (PING, ECHO): any instance answers them */
}

/* EXEC: send MULTI + the buffered commands + EXEC in one write, or answer EXECABORT. */
static void client_exec(struct client *c, struct request *req)
{
    if (pins_watch_lost_take(c)) {
        int inst = c->session.watch_instance;                     /* >= 0: it had a WATCH connection */
        int moves = inst >= 0 && nodes_may_move(c->worker, inst); /* a cluster or sentinel instance */
        client_multi_reset(c);
        session_unwatch(&c->session);
        if (moves) /* its nodes change under it (a failover closes the old primary's clients): a broken WATCH */
            request_complete(req, c->resp3 ? "_\r\n" : "*-1\r\n", c->resp3 ? 3 : 5);
        else
            request_error(req, "UNAVAILABLE the WATCHed instance's connection was lost; transaction discarded");
        return;
    }
    if (c->multi_dirty) {
        client_multi_reset(c);
        if (c->watch_pin) {
            pins_watch_abandon(c); /* still WATCHing: never reuse */
            c->stall = 1;
        }
        request_error(req, "EXECABORT Transaction discarded because of previous errors.");
        return;
    }
    int slot = client_exec_slot(c);
    if (c->session.multi_crossslot || slot == PLAN_SLOT_SPANS) { /* a cluster runs one slot's transaction */
        client_multi_reset(c);
        client_watch_end(c);
        request_error(req, PLAN_CROSSSLOT);
        return;
    }
    if (c->multi_keep.len == 0 && !c->watch_pin) {
        client_multi_reset(c);
        request_complete(req, STR_AND_LEN("*0\r\n"));
        return;
    }
    int instance = client_exec_instance(c);
    struct backend *b = c->watch_pin ? c->watch_pin : router_conn_for(c, instance, slot);
    if (!b && !nodes_may_move(c->worker, instance)) { /* a cluster's waits for its slot's owner */
        client_multi_reset(c);
        client_watch_end(c);
        router_unavailable(c, req, instance);
        return;
    }
    nearcache_exec(c, req);
    tracker_exec(c, req);
    req->replicas = (uint8_t)c->multi_replicas;
    router_exec(c, b, req, instance, slot);
    client_multi_reset(c);
    client_watch_end(c);
}

static void client_discard(struct client *c, struct request *req)
{
    client_multi_reset(c);
    (void)pins_watch_lost_take(c);
    if (!c->watch_pin) session_unwatch(&c->session); /* its connection is already gone */
    if (c->watch_pin) {
        /* DISCARD also unwatches: do it on the pin before it goes back */
        router_unwatch(c, req);
        client_watch_end(c);
    }
    request_complete(req, STR_AND_LEN("+OK\r\n"));
}

/*
 * RESET, as Redis's clearClientConnectionState: the transaction is dropped, the WATCH pin
 * gets UNWATCH and goes back to the idle list once its replies are in, the subscriber
 * connections are closed (never reused: nothing of another client's subscriptions can
 * leak; Redis sends no unsubscribe confirmations either), the name is forgotten, the
 * session is NORMAL and logged out when users are configured. Answers +RESET.
 */
static void client_reset(struct client *c, struct request *req)
{
    if (c->session.mode == SESSION_MULTI) client_multi_reset(c);
    (void)pins_watch_lost_take(c);
    if (c->watch_pin) {
        router_unwatch(c, req); /* its reply is req's to swallow */
        client_watch_end(c);
    }
    pins_drop_subscribers(c);
    session_reset(&c->session, c->worker->cfg->nusers == 0);
    if (!c->session.authenticated) conn_user_logout(c);
    free(c->name);
    c->name = NULL;
    c->resp3 = 0; /* RESET returns to RESP2, as Redis (its dedicated connections are gone or idle) */
    request_complete(req, STR_AND_LEN("+RESET\r\n"));
}

/* A write was forwarded (or queued in c's MULTI): WAIT goes to its instance. */
static void client_note_write(struct client *c, const struct plan *plan, const struct policy_request *pr)
{
    /* a script may write (EVAL, EVALSHA, FCALL: ncpolicy_writes): a WAIT after it goes to its node */
    if (plan->kind == PLAN_FORWARD && (plan->writes || (pr->cmd && ncpolicy_writes(pr->cmd))) && plan->instance >= 0)
        session_wrote(&c->session, plan->instance, plan->slot, nodes_owner_id(c->worker, plan->instance, plan->slot));
}

static void request_pin_full(struct client *c, struct request *req, int instance)
{
    if (!nodes_pin_full(c->worker, instance)) {
        router_unavailable(c, req, instance);
        return;
    }
    char msg[200];
    snprintf(msg, sizeof(msg), "UNAVAILABLE no dedicated connection free for instance '%s' (max-pinned %d)",
             c->worker->cfg->instance_names[instance], c->worker->cfg->max_pinned);
    request_error(req, msg);
}

/*
 * A cluster's shard channel lives on its slot's node; a client's subscriptions on one instance
 * share one subscriber connection, opened on the node of the first. An SSUBSCRIBE or SUNSUBSCRIBE
 * whose slot is another node's is refused (1) rather than answered -MOVED.
 */
static int client_shard_elsewhere(struct client *c, const struct backend *b, const struct plan *plan)
{
    int owner = nodes_owner(c->worker, plan->instance, plan->slot);
    if (owner < 0 || owner == b->node) return 0;
    const char *host, *pin_host;
    int port, pin_port;
    backend_address(b, &pin_host, &pin_port);
    nodes_address(c->worker, plan->instance, owner, &host, &port);
    char text[ERROR_TEXT_MAX];
    snprintf(text, sizeof(text),
             "DENIED this shard channel lives on node %s:%d of cluster instance '%s', and this connection's "
             "subscriptions there are on node %s:%d; subscribe to it on another connection",
             host, port, c->worker->cfg->instance_names[plan->instance], pin_host, pin_port);
    request_error(request_new(c), text);
    return 1;
}

/* (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE: written to the subscriber connection, whose frames
 * go straight to the client (client_push); no reply is matched to a request. */
static void client_subscribe(struct client *c, const struct plan *plan, const char *frame)
{
    struct worker *w = c->worker;
    for (int i = 0; i < (int)w->cfg->ninstances; i++) {
        int wanted = plan->flow == FLOW_SUBSCRIBE ? i == plan->instance : (plan->all_instances || i == plan->instance);
        if (!wanted) continue;
        struct backend *b = c->pubsub.pin[i];
        if (b && plan->slot >= 0 && client_shard_elsewhere(c, b, plan)) return;
        if (!b && plan->flow == FLOW_SUBSCRIBE) {
            b = pins_subscriber(c, i, plan->slot); /* a shard channel: its slot's node */
            if (!b) {
                request_pin_full(c, request_new(c), i);
                return;
            }
        }
        if (!b) continue;
        router_subscribe(c, b, i, frame, c->parser.frame_len);
        c->stall = 1;
    }
}

/* 1 when the client holds no subscriber connection (UNSUBSCRIBE then answers locally). */
static int client_has_no_subscription(const struct client *c, const struct plan *plan)
{
    if (plan->all_instances) return !pubsub_holds_any(&c->pubsub);
    return c->pubsub.pin[plan->instance] == NULL;
}

/*
 * Would forwarding this plan now let it overtake an earlier request of another client
 * (backend_would_reorder)? Looks at the connection it would be staged on; split plans
 * and commands queued inside MULTI (nothing is sent before EXEC) are not looked at. `need` is
 * pins_need's answer for it.
 */
static int client_would_reorder(struct client *c, const struct plan *plan, unsigned need, int *domain)
{
    struct worker *w = c->worker;
    struct backend *b;
    int instance;
    if (plan->kind == PLAN_LOCAL && plan->local == LOCAL_EXEC && !c->multi_dirty && !c->watch_lost) {
        instance = client_exec_instance(c);
        int slot = client_exec_slot(c);
        b = c->watch_pin ? c->watch_pin : router_conn_for(c, instance, slot < 0 ? -1 : slot);
    } else {
        if (plan->kind != PLAN_FORWARD || c->session.mode == SESSION_MULTI || plan->merge != MERGE_NONE ||
            plan->instance < 0 || plan->all_instances)
            return 0;
        instance = plan->instance;
        if (need & PINS_NEED_FRESH)
            b = NULL; /* a fresh pin */
        else if (plan->flow == FLOW_SUBSCRIBE || plan->flow == FLOW_UNSUBSCRIBE)
            b = c->pubsub.pin[plan->instance];
        else
            b = router_conn_for(c, plan->instance, plan->slot);
    }
    *domain = b ? b->domain : backend_domain(instance, -1);
    return w->postponing[*domain] || backend_would_reorder(w, b);
}

/* c's frame for ordering domain `domain` waits: it is parsed again after the next backend flush. */
static void client_postpone(struct client *c, int domain)
{
    struct worker *w = c->worker;
    w->postponing[domain] = 1;
    if (!c->postponed) {
        ptrvec_push(&w->postponed, c);
        c->postponed = 1;
    }
    client_update_reading(c);
    /* no flush is asked for: what it waits behind is listed, and a flush comes when that
     * can write (asking here would wake it, postpone it again, ask again...) */
}

void client_wake_postponed(struct worker *w)
{
    /* requests postponed so as not to overtake the ones just flushed go now, in their order */
    memset(w->postponing, 0, sizeof(w->postponing));
    if (w->postponed.n == 0) return;
    struct ptrvec v = w->postponed;
    w->postponed = (struct ptrvec){0};
    for (size_t i = 0; i < v.n; i++) {
        struct client *c = v.items[i];
        c->postponed = 0;
        client_update_reading(c);
        client_resume_parsing(c);
    }
    free(v.items);
}

/* ---- metrics (stats.h) ---- */

/* A command's class for the per-namespace series: by the table's write / readonly flags. */
static enum stats_class client_stats_class(const struct command_def *cmd)
{
    _Static_assert(CMD_WRITE == 1 && CMD_READONLY == 2, "the class table is indexed by these two flags");
    static const uint8_t by_flags[4] = {STATS_OTHER, STATS_WRITE, STATS_READ, STATS_WRITE}; /* write wins */
    return cmd ? (enum stats_class)by_flags[cmd->flags & 3] : STATS_OTHER;
}

/* Count the parsed command in the per-namespace series (stats.h); the mark its request carries. */
static inline struct stats_mark client_stats_command(struct client *c, const struct policy_request *pr,
                                                     const struct plan *plan)
{
    enum stats_class cls = client_stats_class(pr->cmd);
    /* a command with keys in several namespaces counts once under each (policy listed the others) */
    for (uint32_t i = 0; plan->ns && i < plan->nmore_ns; i++)
        stats_command_more(&c->worker->stats, stats_key(plan->more_ns[i]->stats_slot, cls));
    return stats_command(&c->worker->stats, stats_key(plan->ns ? plan->ns->stats_slot : STATS_NS_NONE, cls),
                         plan->kind == PLAN_FORWARD ? plan->instance : -1, c->parser.frame_len);
}

/*
 * RESP3: COMMAND, COMMAND INFO and COMMAND DOCS answer in sets and maps that keygate's table
 * (the raw RESP2 bytes of Redis 7.0's answers) does not hold; they go to the first instance's
 * RESP3 connection, whose Redis answers them in its own RESP3 shape. COMMAND COUNT / LIST
 * (an integer, an array of names) stay local.
 */
static void client_resp3_plan(const struct client *c, struct plan *plan)
{
    if (plan->kind != PLAN_LOCAL || c->session.mode == SESSION_MULTI) return;
    if (plan->local != LOCAL_COMMAND && plan->local != LOCAL_COMMAND_INFO && plan->local != LOCAL_COMMAND_DOCS) return;
    plan->kind = PLAN_FORWARD;
    plan->instance = 0;
}

static void client_owner_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;
    (void)fd;
    (void)what;
    if (c->closed) return; /* its teardown frees the timer */
    c->owner_held = 0;
    conn_wake(c); /* the held frame is parsed again */
}

/*
 * A command that needs a new dedicated connection (WATCH, a blocking command, a first SUBSCRIBE)
 * to a cluster slot whose owner keygate cannot reach yet (its map is not read, or a failover is
 * under way: the owner's shared connection is not ready) waits, as a shared request does, instead of
 * failing: c is held (nothing more of it is parsed or read), the map is asked again, and the
 * frame is parsed again when the timer fires (25 ms doubling to 500 ms), as often as the router
 * waits (router_max_waits: about 6.3 s on a cluster, failover-hold on a sentinel instance). Past
 * the bound it goes on, and fails as before (-UNAVAILABLE). `need` is pins_need's answer for the
 * command. 1 when c is held.
 */
static int client_waits_for_owner(struct client *c, const struct plan *plan, unsigned need)
{
    struct worker *w = c->worker;
    if (__builtin_expect(!(need & PINS_NEED_FRESH) || !nodes_may_move(w, plan->instance), 1) ||
        c->owner_waits >= router_max_waits(w, plan->instance)) {
        c->owner_waits = 0;
        return 0;
    }
    const struct backend *shared =
        nodes_conn(w, plan->instance, &(struct node_want){.slot = plan->slot, .client_id = c->id});
    if (shared && shared->state == BACKEND_READY) { /* the owner answers: a pin to it can be opened */
        c->owner_waits = 0;
        return 0;
    }
    nodes_refresh(w, plan->instance);
    int ms = router_wait_ms(c->owner_waits++);
    if (!c->owner_timer) c->owner_timer = xevtimer_new(w->base, client_owner_timer_cb, c);
    struct timeval tv = {0, ms * 1000};
    evtimer_add(c->owner_timer, &tv);
    c->owner_held = 1;
    return 1;
}

/*
 * Why a whole frame is left in c's buffer, to be parsed again later (client_parse stops there;
 * the frame is decided again when it is). Each reason has its own wake-up.
 */
enum client_later {
    CLIENT_NOW = 0,     /* handled: the next frame may follow */
    CLIENT_LATER_RATE,  /* its user is over rate= (client_rate_hold): c's rate timer */
    CLIENT_LATER_QUEUE, /* it needs an empty queue (pins_need): c stalls until every reply is written */
    CLIENT_LATER_OWNER, /* its new pin's cluster slot has no reachable owner yet (client_waits_for_owner): c's owner
                           timer */
    CLIENT_LATER_ORDER, /* it would overtake an earlier request of another client (client_would_reorder): the next
                           backend flush */
    CLIENT_LATER_AUTH,  /* an AUTH that is not its address's turn (authgate_wait): c's AUTH timer */
};

/* Must c's frame, decided as `plan` (pins_need's answer `need`), wait? Sets up the reason's
 * wake-up (the stall, the owner timer, the postponement, the AUTH turn) when it must. */
static enum client_later client_frame_later(struct client *c, const struct plan *plan, unsigned need)
{
    if ((need & PINS_NEED_EMPTY_QUEUE) && c->nqueued > 0) {
        c->stall = 1;
        return CLIENT_LATER_QUEUE;
    }
    if (__builtin_expect(client_waits_for_owner(c, plan, need), 0)) return CLIENT_LATER_OWNER;
    int domain = 0;
    if (client_would_reorder(c, plan, need, &domain)) {
        client_postpone(c, domain); /* it would leave before a request read earlier: wait for the next flush */
        return CLIENT_LATER_ORDER;
    }
    if (plan->kind == PLAN_LOCAL && (plan->local == LOCAL_AUTH || plan->local == LOCAL_HELLO) &&
        authgate_is_attempt(plan, c->parser.argc, c->argv, c->argvlen) && authgate_wait(c))
        return CLIENT_LATER_AUTH;
    return CLIENT_NOW;
}

/*
 * Handle one parsed frame: decide, then answer, refuse, buffer or forward. Returns why the
 * frame must wait instead (client_frame_later): the caller leaves it unconsumed and parses it
 * again then.
 */
static enum client_later client_handle_frame(struct client *c, const char *frame)
{
    struct worker *w = c->worker;
    struct resp_parser *p = &c->parser;

    client_argv_reserve(c, p->argc);
    for (size_t i = 0; i < p->argc; i++) {
        c->argv[i] = resp_arg_ptr(p, frame, i);
        c->argvlen[i] = p->args[i].len;
    }
    struct policy_request pr = {
        .argc = p->argc,
        .argv = c->argv,
        .argvlen = c->argvlen,
        .now_ms = c->now_ms,
    };
    pr.cmd = command_lookup(p->argc, c->argv, c->argvlen, &pr.unknown_subcommand);

    struct plan plan;
    policy_decide(w->cfg, w->cfg->registry, &c->session, &pr, &plan);
    if (c->resp3) client_resp3_plan(c, &plan);
    enum client_later later = client_frame_later(c, &plan, pins_need_of(c, &plan));
    if (__builtin_expect(later != CLIENT_NOW, 0)) {
        plan_release(&plan);
        return later;
    }
    STAT_INC(&w->stats, commands_processed);
    if (pr.cmd) c->last_cmd = pr.cmd->name;
    client_note_write(c, &plan, &pr);
    report_note(w, &plan, &pr); /* issue 13: report mode and the default line, counted and logged */

    if (plan.kind == PLAN_FORWARD && plan.flow == FLOW_UNSUBSCRIBE && client_has_no_subscription(c, &plan)) {
        plan.kind = PLAN_LOCAL; /* nothing subscribed: Redis's empty confirmation */
        plan.local = LOCAL_UNSUBSCRIBE_NONE;
    } else if (plan.kind == PLAN_FORWARD && (plan.flow == FLOW_SUBSCRIBE || plan.flow == FLOW_UNSUBSCRIBE)) {
        client_stats_command(c, &pr, &plan);
        client_subscribe(c, &plan, frame);
        plan_release(&plan);
        return CLIENT_NOW;
    }
    struct stats_mark mark = client_stats_command(c, &pr, &plan);
    const char *hit;
    size_t hit_len;
    if (c->nqueued == 0 && !(c->session.reply_off | c->session.reply_skip) && !c->tracking_flags &&
        !c->tracking_caching && nearcache_hit_now(c, &plan, &pr, &hit, &hit_len)) {
        /* a near-cache hit with nothing ahead of it: its reply goes out now, no request made (not
         * for a tracking client: tracker_command remembers what it reads) */
        stats_reply_out(&w->stats, &mark, hit_len);
        conn_out(c, hit, hit_len);
        plan_release(&plan);
        return CLIENT_NOW;
    }
    struct request *req = request_new(c);
    req->mark = mark;
    /* CLIENT REPLY OFF / SKIP (without either, only their own replies are dropped, and they are empty) */
    if (__builtin_expect(c->session.reply_off | c->session.reply_skip, 0))
        req->silent = (uint8_t)policy_reply_dropped(&c->session, &plan);
    tracker_command(c, req, &plan, pr.cmd, p->argc, c->argv, c->argvlen);
    if (c->session.mode == SESSION_MULTI &&
        (plan.kind == PLAN_FORWARD || (plan.kind == PLAN_ERROR && !plan.keeps_transaction))) {
        client_multi_queue(c, req, &plan, frame);
        plan_release(&plan);
        return CLIENT_NOW;
    }
    enum nearcache_verdict nv = nearcache_try(c, req, &plan, &pr);
    if (nv != NEARCACHE_PASS) {
        struct backend *nb = nv == NEARCACHE_HIT ? NULL : router_conn_for(c, plan.instance, plan.slot);
        if (nv == NEARCACHE_FILL) router_forward_fill(c, nb, req, &plan, frame);
        if (nv == NEARCACHE_PREFETCH) router_forward(c, nb, req, &plan, frame), router_forward_prefetch(c, nb, req);
        plan_release(&plan);
        return CLIENT_NOW;
    }
    if (plan.kind == PLAN_FORWARD) nearcache_writes(c, req, &plan);
    switch (plan.kind) {
    case PLAN_ERROR:
        request_error(req, plan.error);
        break;
    case PLAN_LOCAL:
        STAT_INC(&w->stats, commands_local);
        if (plan.local == LOCAL_MULTI) {
            c->multi_buf.len = 0;
            session_multi_begin(&c->session);
            request_complete(req, STR_AND_LEN("+OK\r\n"));
        } else if (plan.local == LOCAL_EXEC) {
            client_exec(c, req);
        } else if (plan.local == LOCAL_DISCARD) {
            client_discard(c, req);
        } else if (plan.local == LOCAL_RESET) {
            client_reset(c, req);
        } else {
            local_execute(c, req, &plan, p->argc, c->argv, c->argvlen);
        }
        break;
    case PLAN_FORWARD:
        if (plan.merge != MERGE_NONE) {
            fanout_split(c, req, &plan, frame);
        } else if (plan.flow == FLOW_WATCH) {
            struct backend *b = pins_watch(c, plan.instance, plan.slot);
            if (!b) {
                request_pin_full(c, req, plan.instance);
                break;
            }
            router_forward(c, b, req, &plan, frame);
        } else if (plan.flow == FLOW_UNWATCH && !c->watch_pin) {
            (void)pins_watch_lost_take(c); /* its connection is already gone: nothing is watched */
            session_unwatch(&c->session);
            request_complete(req, STR_AND_LEN("+OK\r\n"));
        } else if (plan.flow == FLOW_UNWATCH) {
            router_forward(c, c->watch_pin, req, &plan, frame);
            client_watch_end(c);
        } else if (plan.flow == FLOW_BLOCK && plan.wait_sync &&
                   nodes_owner_id(w, plan.instance, plan.slot) != c->session.write_node &&
                   !nodes_id_serves(w, plan.instance, c->session.write_node)) {
            /* a WAIT whose write went to a node that owns no slot now (a failover demoted it, a
             * frozen primary woke as a replica, it was emptied): the slot's new owner's replicas
             * cannot vouch for it, and the write may be lost; none is known to have it. (A slot
             * moved by a reshard leaves its old owner serving others: the WAIT goes to the new
             * owner, which has the write by MIGRATE.) */
            request_complete(req, STR_AND_LEN(":0\r\n"));
        } else if (plan.flow == FLOW_BLOCK) {
            int64_t block_ms = command_block_timeout_ms(pr.cmd, p->argc, c->argv, c->argvlen);
            struct backend *b = pins_block(c, plan.instance, plan.slot, block_ms);
            if (!b) {
                request_pin_full(c, req, plan.instance);
                break;
            }
            req->blocking = 1;
            req->block_ms = block_ms;
            session_block(&c->session);
            router_forward(c, b, req, &plan, frame);
            backend_unpin(b); /* back to the idle list once it answered */
            c->stall = 1;     /* later commands wait for it, as they would on Redis */
        } else {
            router_forward(c, router_conn_for(c, plan.instance, plan.slot), req, &plan, frame);
        }
        break;
    }
    plan_release(&plan);
    return CLIENT_NOW;
}

static void client_rate_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;
    (void)fd;
    (void)what;
    if (c->closed) return; /* its teardown frees the timer */
    c->rate_held = 0;
    conn_wake(c); /* the held frame is parsed again */
}

/*
 * The frame just parsed is one request of c's user (userlimit.h): it takes a token of the
 * user's rate= bucket, once (rate_paid: a frame parsed again after a stall or a postponement
 * is not counted twice). With none left c is held: the frame and every one after it stay in
 * its buffer, nothing more is read from it (client_update_reading), until the timer fires
 * when the bucket has refilled. 1 when c is held.
 */
static int client_rate_hold(struct client *c)
{
    if (!c->ulimit || c->rate_paid) return 0;
    int rate = c->session.user ? c->session.user->rate : 0;
    if (!rate) {
        c->user_requests++; /* counted at the end of the batch (client_parse) */
        c->rate_paid = 1;
        return 0;
    }
    uint64_t wait = userlimit_take(c->ulimit, rate, clock_mono_ns());
    if (!wait) {
        c->rate_paid = 1;
        return 0;
    }
    if (!c->rate_timer) c->rate_timer = xevtimer_new(c->worker->base, client_rate_timer_cb, c);
    uint64_t us = (wait + 999) / 1000; /* rounded up: a timer a little early would only find none again */
    struct timeval tv = {(time_t)(us / 1000000u), (suseconds_t)(us % 1000000u)};
    evtimer_add(c->rate_timer, &tv);
    c->rate_held = 1;
    return 1;
}

/* Make room for `more` bytes in the query buffer. */
static void client_qbuf_reserve(struct client *c, size_t more)
{
    if (c->qlen + more <= c->qcap) return;
    size_t cap = c->qcap ? c->qcap : 1024; /* small: most clients send small commands */
    while (cap < c->qlen + more) cap *= 2;
    c->qbuf = xrealloc(c->qbuf, cap);
    c->qcap = cap;
}

static void client_protocol_error(struct client *c, const char *text)
{
    struct request *req = request_new(c);
    req->silent = c->session.reply_off || c->session.reply_skip; /* as Redis: no reply under CLIENT REPLY OFF */
    STAT_INC(&c->worker->stats, errors_protocol);
    log_event(LOG_INFO, "client_protocol_error", &(struct log_fields){.client = c->addr, .client_id = c->id},
              "client %llu %s: %s", (unsigned long long)c->id, c->addr, text);
    c->closing = 1;
    c->qlen = 0;
    char buf[200];
    snprintf(buf, sizeof(buf), "ERR %s", text);
    request_error(req, buf); /* closed once it is written */
}

/*
 * Parse and handle every whole frame of buf[0..len); returns the bytes consumed. Stops at
 * an unfinished frame, a stall, backpressure, or a protocol error (which closes c).
 */
static size_t client_parse(struct client *c, const char *buf, size_t len)
{
    size_t pos = 0;
    const struct config *cfg = c->worker->cfg;
    c->now_ms = clock_wall_ms();
    c->last_active_ms = c->now_ms;
    c->need_more = 0;
    while (pos < len && !c->closing && !c->auth_held && !c->owner_held && !c->rate_held &&
           c->nqueued < cfg->max_pending && client_window_open(c)) {
        enum resp_status st = resp_parse_request(&c->parser, buf + pos, len - pos);
        if (st == RESP_NEED_MORE) {
            if ((int64_t)(len - pos) > cfg->max_request_bytes + REQUEST_FRAMING_SLACK) {
                client_protocol_error(c, "Protocol error: request larger than max-request-size");
                return len;
            }
            c->need_more = 1;
            break;
        }
        if (st == RESP_ERROR) {
            client_protocol_error(c, c->parser.error);
            return len;
        }
        const char *frame = buf + pos;
        if (c->parser.argc > 0 && client_stalled(c)) break; /* parsed again later */
        c->stall = 0;
        if (c->parser.argc > 0) {
            enum client_later later = client_rate_hold(c) ? CLIENT_LATER_RATE : client_handle_frame(c, frame);
            if (later != CLIENT_NOW) break; /* parsed again at its reason's wake-up */
            c->rate_paid = 0;
            session_command_done(&c->session); /* CLIENT REPLY SKIP's window moves on */
        }
        if (c->closed) return len; /* a closed client takes no more input */
        pos += c->parser.frame_len;
        if (c->parser.argc > 0) c->parser.unauthenticated = !c->session.authenticated; /* AUTH lifts the limits */
    }
    if (c->user_requests) { /* its user's count: once a batch */
        assert(c->ulimit);  /* a logout mid-batch counted them and cleared them (conn_user_logout) */
        userlimit_count(c->ulimit, c->user_requests);
        c->user_requests = 0;
    }
    return pos;
}

/* Keep buf[from..len) (an unfinished or postponed frame) in c->qbuf. */
static void client_keep_rest(struct client *c, const char *buf, size_t len, size_t from)
{
    size_t rest = len - from;
    if (buf == c->qbuf) {
        if (from > 0) memmove(c->qbuf, c->qbuf + from, rest);
        c->qlen = rest;
    } else {
        c->qlen = 0;
        if (rest > 0) { /* nothing to keep: qbuf may be NULL, and memcpy(NULL, ..., 0) is undefined */
            client_qbuf_reserve(c, rest);
            memcpy(c->qbuf, buf + from, rest);
            c->qlen = rest;
        }
    }
    if (c->qlen == 0 || !c->need_more)
        c->partial_since_ms = 0; /* nothing unfinished (a whole frame may wait) */
    else if (from > 0 || c->partial_since_ms == 0)
        c->partial_since_ms = c->now_ms; /* a new unfinished request */
    if (c->qlen == 0 && c->qcap > 0) {
        /* nothing pending: an idle client keeps no query buffer */
        free(c->qbuf);
        c->qbuf = NULL;
        c->qcap = 0;
    }
}

/* Can c take more requests now? While it cannot, keygate reads nothing more from it. */
static int client_can_parse(struct client *c)
{
    if (c->closing || c->read_paused || c->postponed || c->auth_held || c->owner_held || c->rate_held) return 0;
    if (c->nqueued >= c->worker->cfg->max_pending) return 0;
    if (!client_window_open(c)) return 0;
    if (client_stalled(c)) return 0;
    return 1;
}

/* Parse buf (the scratch buffer or c->qbuf) and keep what is left; -1 when c was closed. */
static int client_parse_and_keep(struct client *c, const char *buf, size_t len)
{
    size_t used = client_parse(c, buf, len);
    if (c->closed) return -1;
    if (c->closing) {
        c->qlen = 0;
        return 0;
    }
    client_keep_rest(c, buf, len, used);
    return 0;
}

static void client_raw_read_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;
    struct worker *w = c->worker;
    (void)what;
    stats_clock(&w->stats); /* the read time of the requests in this read (one clock read a batch) */
    /* first what is already buffered (resumed after backpressure or a stall) */
    if (c->qlen > 0 && !c->closing && client_parse_and_keep(c, c->qbuf, c->qlen) != 0) return;
    /* then read, but only while requests can be taken: backpressure bounds the buffer */
    for (int rounds = 0; rounds < 4 && (client_can_parse(c) || c->closing); rounds++) {
        const char *buf;
        size_t len;
        ssize_t n;
        if (c->qlen == 0) {
            /* the common case: whole frames straight from the worker's scratch buffer */
            n = read(fd, w->scratch, sizeof(w->scratch));
            buf = w->scratch;
            len = n > 0 ? (size_t)n : 0;
        } else {
            client_qbuf_reserve(c, READ_CHUNK_BYTES);
            n = read(fd, c->qbuf + c->qlen, c->qcap - c->qlen);
            if (n > 0) c->qlen += (size_t)n;
            buf = c->qbuf;
            len = c->qlen;
        }
        if (n == 0) {
            conn_close(c, "connection closed by client");
            return;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            conn_close(c, "read error");
            return;
        }
        if (n > 0) STAT_ADD(&w->stats, bytes_from_clients, (size_t)n);
        if (c->closing) { /* a protocol error or QUIT: the rest is ignored */
            c->qlen = 0;
            if (n < 0) return;
            continue;
        }
        if (len > 0 && client_parse_and_keep(c, buf, len) != 0) return;
        if (n <= 0 || (buf == w->scratch && (size_t)n < sizeof(w->scratch))) break; /* drained */
    }
    conn_account(c);
    client_update_reading(c);
}

/* TLS clients: the bufferevent decrypted the bytes into its input buffer. */
static void client_read_cb(struct bufferevent *bev, void *arg)
{
    struct client *c = arg;
    stats_clock(&c->worker->stats); /* the read time of the requests in this read */
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t avail = evbuffer_get_length(in);
    c->tls_handshaking = 0; /* decrypted bytes: the handshake is done */
    if (c->closing) {
        evbuffer_drain(in, avail);
        return;
    }
    if (avail) {
        client_qbuf_reserve(c, avail);
        evbuffer_remove(in, c->qbuf + c->qlen, avail);
        c->qlen += avail;
        STAT_ADD(&c->worker->stats, bytes_from_clients, avail);
    }
    size_t used = client_parse(c, c->qbuf, c->qlen);
    if (c->closed) return;
    if (c->closing) {
        c->qlen = 0;
        return;
    }
    client_keep_rest(c, c->qbuf, c->qlen, used);
    conn_account(c);
    client_update_reading(c);
}

static void client_write_cb(struct bufferevent *bev, void *arg)
{
    struct client *c = arg;
    (void)bev;
    conn_account(c);
    if (c->closing) {
        client_service(c);
        return;
    }
    if (c->read_paused) client_update_reading(c);
}

static void client_event_cb(struct bufferevent *bev, short events, void *arg)
{
    struct client *c = arg;
    (void)bev;
    if (events & BEV_EVENT_CONNECTED) c->tls_handshaking = 0;
    if (events & BEV_EVENT_EOF)
        conn_close(c, "connection closed by client");
    else if (events & BEV_EVENT_ERROR)
        conn_close(c, "connection error");
}

/* The client of w holding the most bytes (input, transaction, replies queued or kept), if
 * it holds at least `least`; else NULL. */
static struct client *client_largest(struct worker *w, size_t least)
{
    struct client *c, *best = NULL;
    size_t most = least;
    TAILQ_FOREACH(c, &w->clients, link) {
        if (c->mem_held + c->replies_held >= most) {
            most = c->mem_held + c->replies_held;
            best = c;
        }
    }
    return best;
}

#define MEM_EVICT_AFTER_MS 500 /* over max-memory this long: evict the largest client */

/*
 * Why c should be closed for a timeout at `now` (wall ms), or NULL:
 *   client-timeout        idle that long, unless it waits for a reply, blocks, or is
 *                         subscribed (as Redis's `timeout` spares blocked and pub/sub clients);
 *   client-header-timeout a TLS handshake unfinished that long after connecting, or
 *                         not authenticated that long after connecting (users configured),
 *                         or an unfinished request pending that long that came slower than
 *                         READ_CHUNK_BYTES a second on average (a slowloris; a large upload
 *                         that moves goes on).
 */
static const char *client_timed_out(const struct client *c, const struct config *cfg, int64_t now, int64_t *since)
{
    int64_t idle = cfg->client_timeout_ms, header = cfg->client_header_timeout_ms;
    *since = c->last_active_ms;
    if (idle > 0 && c->nqueued == 0 && c->session.mode != SESSION_BLOCKED && c->session.mode != SESSION_SUBSCRIBED &&
        !(c->resp3 && pubsub_subscribed(&c->pubsub)) && now - c->last_active_ms >= idle)
        return "idle past client-timeout";
    if (header <= 0) return NULL;
    *since = c->created_ms;
    if (c->tls_handshaking && now - c->created_ms >= header)
        return "TLS handshake unfinished within client-header-timeout";
    if (cfg->nusers > 0 && !c->session.authenticated && now - c->created_ms >= header)
        return "not authenticated within client-header-timeout";
    *since = c->partial_since_ms;
    if (c->partial_since_ms > 0 && now - c->partial_since_ms >= header &&
        (int64_t)c->qlen < (now - c->partial_since_ms) / 1000 * READ_CHUNK_BYTES)
        return "a request unfinished past client-header-timeout";
    return NULL;
}

/* Every CLIENT_TICK_MS: the clients of w against the timeouts. */
static void client_tick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    (void)fd;
    (void)what;
    const struct config *cfg = w->cfg;
    userlimit_tick(&w->proxy->users, clock_mono_ns()); /* rate= throttling episodes that ended */
    if (cfg->client_timeout_ms <= 0 && cfg->client_header_timeout_ms <= 0) return;
    int64_t now = clock_wall_ms();
    struct client *c, *next;
    for (c = TAILQ_FIRST(&w->clients); c; c = next) {
        next = TAILQ_NEXT(c, link); /* a closed client leaves the list */
        int64_t since;
        const char *why = client_timed_out(c, cfg, now, &since);
        if (!why) continue;
        log_event(LOG_INFO, "client_timed_out", &(struct log_fields){.client = c->addr, .client_id = c->id},
                  "client %llu %s closed: %s (%lld ms)", (unsigned long long)c->id, c->addr, why,
                  (long long)(now - since));
        STAT_INC(&w->stats, clients_timed_out);
        conn_close(c, why);
    }
}

void client_memory_tick(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    (void)fd;
    (void)what;
    if (mem_over(w)) {
        int64_t now = clock_wall_ms();
        if (!w->mem_over_since_ms) w->mem_over_since_ms = now;
        if (now - w->mem_over_since_ms >= MEM_EVICT_AFTER_MS) {
            /* nothing is read while over, so unfinished requests never finish: as Redis's
             * client eviction (maxmemory-clients) does, the client holding the most goes */
            struct client *c = client_largest(w, (size_t)(w->cfg->max_memory / 64));
            if (c) {
                log_event(LOG_WARN, "client_evicted", &(struct log_fields){.client = c->addr, .client_id = c->id},
                          "client %llu %s closed: keygate is over max-memory (%lld bytes) and this client "
                          "holds %zu bytes (input %zu, transaction %zu)",
                          (unsigned long long)c->id, c->addr, (long long)w->cfg->max_memory,
                          c->mem_held + c->replies_held, c->qlen, c->multi_buf.len);
                STAT_INC(&w->stats, clients_evicted);
                conn_close(c, "evicted: over max-memory");
            }
            w->mem_over_since_ms = now;
        }
    } else {
        w->mem_over_since_ms = 0;
        struct client *c, *next;
        for (c = TAILQ_FIRST(&w->clients); c; c = next) {
            next = TAILQ_NEXT(c, link);
            if (!c->mem_paused) continue;
            c->mem_paused = 0;
            client_update_reading(c); /* may pause it again (and re-arm the timer) */
            if (mem_over(w)) break;
        }
    }
    int waiting = 0;
    struct client *c;
    TAILQ_FOREACH(c, &w->clients, link) waiting |= c->mem_paused;
    if (waiting && !evtimer_pending(w->mem_timer, NULL)) {
        struct timeval tv = {0, 20 * 1000};
        evtimer_add(w->mem_timer, &tv);
    }
}
