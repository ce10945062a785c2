/* backend.c: connections to the backend instances: socket, TLS, the FIFO of replies owed, batching, reconnect. */
/* About 1,000 lines: one connection's whole life (connect and resolve, TLS, write batching, reply
 * framing, timeouts, reconnect, pinning); the node model and the pools went to nodes.c (issue 29). */
#include "backend.h"

#include "replies.h"
#include "tls.h"
#include "topology.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
/* How often the connections are checked against backend-timeout. */
#define TIMEOUT_TICK_MS 250
/* The topology guard asks a loading instance's INFO again after this. */
#define TOPOLOGY_RECHECK_MS 1000
/* Keepalive probes on every backend socket: a peer gone without a FIN/RST (a half-open
 * connection) is found within KEEPIDLE + KEEPCNT x KEEPINTVL seconds, and TCP_USER_TIMEOUT
 * bounds how long written data may stay unacknowledged. */
#define KEEPALIVE_IDLE_S 10
#define KEEPALIVE_INTVL_S 5
#define KEEPALIVE_CNT 3
#define USER_TIMEOUT_DEFAULT_MS 30000 /* TCP_USER_TIMEOUT when backend-timeout is 0 */
/* Staged bytes past which a shared connection writes even with a batch in flight
 * (backend_holds): bounds how much a batch waits behind the one in flight. */
#define HOLD_MAX_BYTES 65536
/* Buffers past this size are given back once they are nearly empty again (a large
 * transfer ended); below it they are kept, so pipelined batches cause no realloc churn. */
#define BUF_KEEP_MAX (4 * 1024 * 1024)
/* A reply still arriving that holds more than this is checked against its client's
 * hard output limit (and dropped as it comes when nobody may keep it). */
#define PARTIAL_CHECK_BYTES (1024 * 1024)

static int backend_next_address(struct backend *b);
static void backend_make_idle(struct backend *b);
static void backend_unstage(struct backend *b);
static void backend_io_close(struct backend *b);

static void backend_do_write(struct backend *b);
static void backend_timer_cb(evutil_socket_t fd, short what, void *arg);

static const struct instance_conf *backend_conf(const struct backend *b)
{
    return &b->worker->cfg->instances[b->instance];
}

void backend_address(const struct backend *b, const char **host, int *port)
{
    *host = b->server->host;
    *port = b->server->port;
}

/* max-memory: count what b holds now (replies not yet framed, requests not yet written). */
static void backend_account(struct backend *b)
{
    size_t now = b->fd < 0 && !b->resolving ? 0 : b->rlen + b->out.len + (b->wbuf.len - b->woff);
    mem_set(b->worker, &b->mem_held, now);
}

/* A jitter seed that differs per connection and per process start. */
static uint32_t backend_seed(const struct backend *b)
{
    uint64_t x = clock_mono_ns() ^ ((uint64_t)(uintptr_t)b * 0x9E3779B97F4A7C15ull);
    uint32_t s = (uint32_t)(x ^ (x >> 32));
    return s ? s : 1;
}

/* xorshift32: the next value of b's jitter sequence. */
static uint32_t backend_random(struct backend *b)
{
    uint32_t x = b->rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b->rng = x;
    return x;
}

int backend_backoff_delay(int backoff_ms, uint32_t r)
{
    assert(backoff_ms > 0);
    return backoff_ms - (int)(r % (uint32_t)(backoff_ms / 5 + 1));
}

/* Has b's oldest written entry waited past backend-timeout? Then b is closed (its entries
 * fail "timed out") and, if shared, reconnects. A connection carrying a blocking command
 * (backend_exempt) waits its timeout more, or forever for one that blocks forever;
 * subscriber connections are not checked (their frames come unasked). */
void backend_check_timeout(struct backend *b, int64_t now, int64_t timeout_ms)
{
    if (b->fd < 0 || b->state != BACKEND_READY || b->subscriber || b->block_ms == 0) return;
    if (b->fifo_count <= b->unsent) return; /* nothing written is unanswered */
    if (b->block_ms > 0) timeout_ms += b->block_ms;
    if (now - b->waiting_since_ms < timeout_ms) return;
    char why[128];
    snprintf(why, sizeof(why), "no reply within backend-timeout (%lld ms): closed, its requests failed",
             (long long)timeout_ms);
    STAT_INC(&b->worker->stats, backend_timeouts);
    b->timed_out = 1;
    backend_close(b, why);
}

/* Fail and forget every entry owed on b (the router answers them). */
static void backend_fail_fifo(struct backend *b)
{
    size_t written = b->fifo_count - b->unsent; /* the entries after these were never written */
    b->unsent = 0;
    for (size_t i = 0; b->fifo_count > 0; i++) {
        struct pending pd = b->fifo[b->fifo_head];
        b->fifo_head = (b->fifo_head + 1) % b->fifo_cap;
        b->fifo_count--;
        pd.unsent = i >= written;
        if (pd.own == BACKEND_OWN_NONE) b->worker->hooks->fail(b, &pd);
    }
}

/* Close b's socket and TLS session and forget any partial write; the FIFO is left alone. */
static void backend_io_close(struct backend *b)
{
    if (b->addrs) evutil_freeaddrinfo(b->addrs);
    b->addrs = b->next_addr = NULL;
    if (b->resolving) { /* its callback runs now, told EVUTIL_EAI_CANCEL, and leaves b alone */
        struct evdns_getaddrinfo_request *req = b->resolving;
        b->resolving = NULL;
        evdns_getaddrinfo_cancel(req);
    }
    if (b->rev) event_free(b->rev);
    if (b->wev) event_free(b->wev);
    b->rev = b->wev = NULL;
    if (b->ssl) SSL_free(b->ssl); /* the socket BIO does not own fd */
    b->ssl = NULL;
    if (b->fd >= 0) close(b->fd);
    b->fd = -1;
    b->tcp_up = b->read_wants_write = b->write_wants_read = 0;
    b->wbuf.len = 0;
    b->woff = 0;
    if (b->timer) evtimer_del(b->timer);
    b->discarding = 0;
    backend_account(b);
}

void backend_dispose(struct backend *b)
{
    backend_io_close(b);
    backend_unstage(b);
    backend_fail_fifo(b);
    if (b->timer) event_free(b->timer);
    b->timer = NULL;
    bytebuf_free(&b->out);
    bytebuf_free(&b->wbuf);
    free(b->fifo);
    free(b->rbuf);
    b->fifo = NULL;
    b->rbuf = NULL;
}

void backend_worker_free(struct worker *w)
{
    if (w->dns) evdns_base_free(w->dns, 0); /* every lookup was cancelled with its connection */
    w->dns = NULL;
}

void backend_init(struct backend *b)
{
    b->fd = -1;
    b->backoff_ms = BACKOFF_MIN_MS;
    b->block_ms = -1;
    b->rng = backend_seed(b);
    if (!b->pinned) b->timer = xevtimer_new(b->worker->base, backend_timer_cb, b);
}

void backend_reopen(struct backend *b)
{
    b->backoff_ms = BACKOFF_MIN_MS;
    backend_connect(b);
}

void backend_retire(struct backend *b)
{
    backend_io_close(b); /* also stops a reconnect timer */
    b->state = BACKEND_DOWN;
    b->rlen = 0;
    resp_scanner_reset(&b->scan);
    b->warned_down = 0;
}

int backend_busy(const struct backend *b)
{
    return b->fifo_count || b->dirty || b->out.len;
}

void backend_expect(struct backend *b, struct pending pd)
{
    if (b->fifo_count == b->fifo_cap) {
        size_t cap = b->fifo_cap ? b->fifo_cap * 2 : 64;
        struct pending *f = xmalloc(cap * sizeof(*f));
        for (size_t i = 0; i < b->fifo_count; i++) f[i] = b->fifo[(b->fifo_head + i) % b->fifo_cap];
        free(b->fifo);
        b->fifo = f;
        b->fifo_head = 0;
        b->fifo_cap = cap;
    }
    assert(pd.own == BACKEND_OWN_NONE || pd.req == NULL); /* the connection's own have no request */
    b->fifo[(b->fifo_head + b->fifo_count) % b->fifo_cap] = pd;
    b->fifo_count++;
    b->unsent++;
    assert(b->unsent <= b->fifo_count);
}

struct bytebuf *backend_stage(struct backend *b)
{
    struct worker *w = b->worker;
    if (!b->dirty) {
        ptrvec_push(&w->dirty, b);
        b->dirty = 1;
        w->domain_tail[b->domain] = b;
    }
    /* also when b is listed already: it may have been kept back by the last flush */
    event_active(w->flush_ev, EV_TIMEOUT, 0);
    return &b->out;
}

/* Recompute w->domain_tail from the dirty list. */
static void backend_tails(struct worker *w)
{
    memset(w->domain_tail, 0, sizeof(w->domain_tail));
    for (size_t i = 0; i < w->dirty.n; i++) {
        struct backend *b = w->dirty.items[i];
        w->domain_tail[b->domain] = b;
    }
}

int backend_would_reorder(const struct worker *w, const struct backend *b)
{
    return b && b->dirty == 1 && w->domain_tail[b->domain] != b;
}

/* Forget b's staged bytes and take it off the flush list (it closed). */
static void backend_unstage(struct backend *b)
{
    b->out.len = 0;
    if (!b->dirty) return;
    ptrvec_remove(&b->worker->dirty, b);
    b->dirty = 0;
    backend_tails(b->worker);
    /* entries kept waiting behind b, and clients postponed behind them, may go now */
    if (b->worker->dirty.n > 0 || b->worker->postponed.n > 0) event_active(b->worker->flush_ev, EV_TIMEOUT, 0);
}

/*
 * A shared connection keeps one batch in flight: requests staged while earlier ones
 * are unanswered wait for those replies (or for HOLD_MAX_BYTES), then go as one write.
 * Under load this makes batches of many clients' requests, so Redis reads, decrypts
 * and answers once per batch instead of once per request; an idle connection writes
 * at once, so a lone request is not delayed. Dedicated connections never wait.
 */
static int backend_holds(const struct backend *b)
{
    return !b->pinned && b->fifo_count > b->unsent && b->out.len < HOLD_MAX_BYTES;
}

/*
 * Move b's staged batch into its write buffer and start writing it, unless a
 * write is still in progress or the connection is not ready (then the batch stays
 * staged; backend_do_write or the handshake stages it again). The buffers swap, so
 * no batch is copied and the old write buffer's memory is reused.
 */
static void backend_send_staged(struct backend *b)
{
    if (b->state != BACKEND_READY || b->woff < b->wbuf.len) return;
    if (b->fifo_count == b->unsent) b->waiting_since_ms = clock_mono_ms(); /* the oldest written entry starts waiting */
    if (b->fifo_count == b->unsent) b->sent_ns = stats_clock(&b->worker->stats); /* latency: from this write */
    struct bytebuf t = b->wbuf;
    b->wbuf = b->out;
    b->out = t;
    b->out.len = 0;
    b->woff = 0;
    b->unsent = 0;
    STAT_INC(&b->worker->stats, backend_writes);
    backend_do_write(b);
}

/*
 * The dirty list holds each backend at the place of its first staged request, so
 * walking it in order writes the requests of different clients in the order they
 * arrived (Redis serves a client that blocked first first, counts a subscriber that
 * unsubscribed before a PUBLISH as gone). Within one instance an entry that must wait
 * (connecting, a write still in progress) keeps every later entry of that instance
 * waiting behind it; one that only holds for batching writes anyway when a later entry
 * of its instance writes now. Entries that wait stay listed, in order; their backend
 * stages itself again (backend_stage) when it can write. A request that would join a
 * connection's batch after another connection of its instance was staged (A1 B1 A2,
 * which would leave as A1 A2 B1) is postponed by the client layer until this flush
 * (backend_would_reorder, client_postpone); the flush wakes those clients in order.
 */
void backend_flush_all(struct worker *w)
{
    struct ptrvec todo = w->dirty; /* writes may close backends (unstaging them) or stage more */
    w->dirty = w->flush_spare;
    w->dirty.n = 0;
    w->flush_spare = (struct ptrvec){0};
    /* decide first, in order: waits (0), writes (1), writes unless it holds (2) */
    int blocked[BACKEND_DOMAINS] = {0}, later_writes[BACKEND_DOMAINS] = {0};
    for (size_t i = 0; i < todo.n; i++) {
        struct backend *b = todo.items[i];
        b->dirty = 2; /* listed in todo: backend_stage leaves it there, backend_unstage zeroes it */
        if ((b->fd < 0 && !b->resolving) || b->out.len == 0) {
            b->flush_go = -1; /* nothing to write: off the list */
            continue;
        }
        int busy = b->state != BACKEND_READY || b->woff < b->wbuf.len;
        b->flush_go = blocked[b->domain] || busy ? 0 : 2;
        if (busy) blocked[b->domain] = 1;
    }
    for (size_t i = todo.n; i-- > 0;) {
        struct backend *b = todo.items[i];
        if (b->flush_go == 2) b->flush_go = !backend_holds(b) || later_writes[b->domain];
        if (b->flush_go == 1) later_writes[b->domain] = 1;
    }
    size_t kept = 0;
    for (size_t i = 0; i < todo.n; i++) {
        struct backend *b = todo.items[i];
        if (b->dirty != 2) continue; /* closed meanwhile */
        if (b->flush_go < 0 || (b->fd < 0 && !b->resolving) || b->out.len == 0) {
            b->out.len = 0;
            b->dirty = 0;
            continue;
        }
        if (b->flush_go == 0) {
            todo.items[kept++] = b; /* stays listed at its place */
            continue;
        }
        b->dirty = 0;
        backend_send_staged(b);
    }
    for (size_t i = 0; i < todo.n; i++) backend_account(todo.items[i]);
    /* the new list: the entries kept back, then those first staged during this walk */
    struct ptrvec added = w->dirty;
    todo.n = 0;
    for (size_t i = 0; i < kept; i++) {
        struct backend *b = todo.items[i];
        if (b->dirty != 2) continue;
        b->dirty = 1;
        todo.items[todo.n++] = b;
    }
    for (size_t i = 0; i < added.n; i++) ptrvec_push(&todo, added.items[i]);
    w->dirty = todo;
    added.n = 0;
    w->flush_spare = added;
    backend_tails(w);
}

/* Send one of keygate's own commands (AUTH, HELLO 3, INFO, CLUSTER SLOTS) formatted by hiredis. */
void backend_send_own(struct backend *b, enum backend_own own, int argc, const char **argv)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, NULL);
    if (len < 0) oom_abort(0); /* hiredis fails here only for memory */
    bytebuf_add(backend_stage(b), cmd, (size_t)len);
    free(cmd);
    backend_expect(b, (struct pending){.own = (uint8_t)own});
}

void backend_close(struct backend *b, const char *reason)
{
    const struct instance_conf *ic = backend_conf(b);
    const char *host;
    int port;
    backend_address(b, &host, &port);
    backend_unstage(b);
    if (b->pinned) {
        struct client *owner = b->owner;
        log_event(owner ? LOG_WARN : LOG_DEBUG, "backend_pinned_closed",
                  &(struct log_fields){.instance = ic->name, .backend_host = host, .backend_port = port},
                  "instance '%s' dedicated connection: %s", ic->name, reason);
        backend_io_close(b);
        b->state = BACKEND_DOWN;
        b->owner = NULL;
        backend_fail_fifo(b);
        if (b->in_idle) TAILQ_REMOVE(&b->pins->idle[b->resp3], b, link);
        b->in_idle = 0;
        assert(b->pins->npinned > 0);
        b->pins->npinned--;
        TAILQ_REMOVE(&b->pins->pinned, b, pinned_link);
        TAILQ_INSERT_TAIL(&b->worker->dead_backends, b, link);
        event_active(b->worker->reap_ev, EV_TIMEOUT, 0);
        if (owner) b->worker->hooks->owner_lost(b, owner);
        return;
    }
    if (!b->warned_down || b->state == BACKEND_READY || strncmp(b->down_reason, reason, sizeof b->down_reason - 1)) {
        log_event(LOG_WARN, "backend_down",
                  &(struct log_fields){.instance = ic->name, .backend_host = host, .backend_port = port},
                  "instance '%s' (%s:%d) connection %d: %s; retrying", ic->name, host, port, b->ordinal, reason);
        snprintf(b->down_reason, sizeof b->down_reason, "%s", reason);
    }
    b->warned_down = 1;
    STAT_INC(&b->worker->stats, backend_failures);
    backend_io_close(b);
    b->state = BACKEND_DOWN;
    b->rlen = 0;
    resp_scanner_reset(&b->scan);
    backend_fail_fifo(b);
    int delay_ms = backend_backoff_delay(b->backoff_ms, backend_random(b));
    struct timeval tv = {delay_ms / 1000, (delay_ms % 1000) * 1000};
    b->backoff_ms = b->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b->backoff_ms * 2;
    if (!b->worker->stopping && b->timer) evtimer_add(b->timer, &tv);
    b->worker->hooks->lost(b); /* its server may be gone: its slots may have a new owner (a failover) */
}

/* Reserve room for `more` received bytes. */
static void backend_rbuf_reserve(struct backend *b, size_t more)
{
    if (b->rlen + more <= b->rcap) return;
    size_t cap = b->rcap ? b->rcap : READ_CHUNK_BYTES;
    while (cap < b->rlen + more) cap *= 2;
    b->rbuf = xrealloc(b->rbuf, cap);
    b->rcap = cap;
}

/* One framed reply for the FIFO head: the connection's own, or the hooks'. Returns 0, or -1
 * when b was closed (a reply nothing was owed for, a refused AUTH). */
static int backend_deliver(struct backend *b, const char *reply, size_t len)
{
    if (b->fifo_count == 0) {
        backend_close(b, "reply with no request in flight");
        return -1;
    }
    struct pending pd = b->fifo[b->fifo_head];
    b->fifo_head = (b->fifo_head + 1) % b->fifo_cap;
    b->fifo_count--;
    switch (pd.own) {
    case BACKEND_OWN_AUTH:
    case BACKEND_OWN_HELLO: /* a RESP3 connection's HELLO 3 */
        if (reply[0] == '-') {
            char why[160];
            snprintf(why, sizeof(why), "%s refused: %.*s", pd.own == BACKEND_OWN_AUTH ? "AUTH" : "HELLO 3",
                     (int)(len > 120 ? 120 : len - 2), reply + 1);
            backend_close(b, why);
            return -1;
        }
        return 0;
    case BACKEND_OWN_ID: /* a dedicated connection's CLIENT ID (an error leaves it unknown: UNBLOCK answers :0) */
        if (reply[0] == ':') b->server_id = strtoll(reply + 1, NULL, 10);
        if (b->block_client && b->server_id > 0) /* its blocking command went out before the id came */
            blocked_set_server_id(&b->worker->proxy->blocked, b->block_client, b->server_id);
        return 0;
    case BACKEND_OWN_INFO:
        if (topology_on_info_reply(b->worker->proxy, b->instance, backend_conf(b)->name, reply, len)) {
            struct timeval tv = {TOPOLOGY_RECHECK_MS / 1000, (TOPOLOGY_RECHECK_MS % 1000) * 1000};
            evtimer_add(b->timer, &tv); /* still loading: INFO again (backend_timer_cb) */
        }
        return 0;
    case BACKEND_OWN_SLOTS:
        b->worker->hooks->slots(b, reply, len);
        return 0;
    default:
        b->worker->hooks->deliver(b, &pd, reply, len);
        return 0;
    }
}

/*
 * A reply still arriving holds `partial` bytes. Past PARTIAL_CHECK_BYTES the hooks say
 * whether anybody may keep it whole (may_keep: its client is gone, would pass its hard
 * output limit, or it only answers an injected command); if not, it is dropped as it
 * comes (b->discarding) and its entry gets "-ERR reply dropped" when it ends.
 */
static void backend_large_partial(struct backend *b, size_t partial)
{
    if (b->discarding || partial < PARTIAL_CHECK_BYTES) return;
    const struct pending *pd = NULL;
    if (!b->subscriber) {
        if (b->fifo_count == 0) return;
        pd = &b->fifo[b->fifo_head];
        if (pd->own != BACKEND_OWN_NONE) return; /* the connection's own AUTH / INFO */
    }
    if (!b->worker->hooks->may_keep(b, pd, partial)) {
        b->discarding = 1;
        log_event(LOG_DEBUG, "backend_reply_dropped", &(struct log_fields){.instance = backend_conf(b)->name},
                  "instance '%s': a reply of more than %zu bytes is dropped as it comes (no client keeps it)",
                  backend_conf(b)->name, partial);
    }
}

/*
 * Frame and deliver every whole reply in b->rbuf. Returns 0, or -1 when b closed
 * meanwhile (a malformed reply, a refused AUTH): the hooks never close it.
 */
static int backend_frame_replies(struct backend *b)
{
    size_t pos = 0;
    if (b->rlen > 0) stats_clock(&b->worker->stats); /* the replies' time: one clock read a batch */
    uint64_t nreplies = 0;                           /* replies for the hooks: one latency observation each */
    while (pos < b->rlen) {
        long long n = resp_scan_reply(&b->scan, b->rbuf + pos, b->rlen - pos);
        if (n == 0) {
            backend_large_partial(b, b->rlen - pos);
            if (b->discarding) pos += resp_scan_discard(&b->scan, b->rlen - pos);
            break;
        }
        if (n < 0) {
            backend_close(b, "malformed reply");
            return -1;
        }
        const char *reply = b->rbuf + pos;
        size_t len = (size_t)n;
        pos += (size_t)n;
        char dropped[32];
        if (b->discarding) {
            /* the end of a reply nobody keeps: its owner gets no bytes of it */
            b->discarding = 0;
            len = replies_error(dropped, sizeof(dropped), "ERR reply dropped");
            reply = dropped;
        }
        int own_head = b->fifo_count > 0 && b->fifo[b->fifo_head].own != BACKEND_OWN_NONE;
        nreplies += !b->subscriber && !own_head;
        if (b->subscriber && !own_head)
            b->worker->hooks->push(b, reply, len);
        else if (backend_deliver(b, reply, len) != 0)
            return -1;
        assert(b->fd >= 0); /* the hooks do not close the backend they are called for */
    }
    /* every reply of this read took as long: its batch's write to now */
    if (nreplies) stats_backend_latency(&b->worker->stats, b->instance, b->worker->stats.now_ns - b->sent_ns, nreplies);
    if (pos > 0) {
        b->waiting_since_ms =
            clock_mono_ms(); /* replies came: the next entry's wait begins now (one clock read a batch) */
        memmove(b->rbuf, b->rbuf + pos, b->rlen - pos);
        b->rlen -= pos;
    }
    if (b->rcap > BUF_KEEP_MAX && b->rlen < b->rcap / 8) {
        /* a large reply went through: give its buffer back */
        size_t cap = READ_CHUNK_BYTES;
        while (cap < b->rlen * 2) cap *= 2;
        b->rbuf = xrealloc(b->rbuf, cap);
        b->rcap = cap;
    }
    if (b->pinned && b->release_when_idle && b->fifo_count == 0 && !b->subscriber) {
        backend_make_idle(b);
        if (b->fd < 0) return -1; /* it was not reusable: make_idle closed it */
    }
    /* output kept back for this batch: written at the end of this iteration */
    if (b->out.len > 0 && b->fifo_count == b->unsent) backend_stage(b);
    return 0;
}

/* Why a TLS call failed, for the log: OpenSSL's first error and any certificate verdict. */
static void backend_tls_reason(struct backend *b, const char *what, char *why, size_t size)
{
    unsigned long err = ERR_get_error();
    ERR_clear_error();
    if (!err) {
        snprintf(why, size, "%s: %s", what, errno ? strerror(errno) : "connection closed by the server");
        return;
    }
    char ebuf[200];
    ERR_error_string_n(err, ebuf, sizeof(ebuf));
    long verify = SSL_get_verify_result(b->ssl);
    if (verify != X509_V_OK) /* say which check failed: CA, name, dates */
        snprintf(why, size, "TLS error: %s: server certificate: %s", ebuf, X509_verify_cert_error_string(verify));
    else
        snprintf(why, size, "TLS error: %s", ebuf);
}

/* Close b after SSL_read/SSL_write/SSL_connect returned r with SSL_get_error e, saying why. */
static void backend_tls_failed(struct backend *b, int e, int r, const char *what)
{
    char why[300];
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && (r == 0 || errno == 0)))
        snprintf(why, sizeof(why), "%sconnection closed by the server%s",
                 b->state == BACKEND_READY ? "" : "TLS handshake: ",
                 b->state == BACKEND_READY ? "" : " (is it speaking TLS on this port?)");
    else if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
        snprintf(why, sizeof(why), "%s: %s", what, strerror(errno));
    else
        backend_tls_reason(b, what, why, sizeof(why));
    backend_close(b, why);
}

/*
 * Read what the socket has and deliver the replies. With TLS read-ahead one read()
 * takes several records; SSL_has_pending says when decrypted-but-unread bytes are
 * left that epoll cannot report, so the loop goes on until both are drained.
 */
static void backend_do_read_some(struct backend *b)
{
    b->read_wants_write = 0;
    for (;;) {
        backend_rbuf_reserve(b, READ_CHUNK_BYTES);
        size_t room = b->rcap - b->rlen;
        ssize_t n;
        if (b->ssl) {
            ERR_clear_error();
            int r = SSL_read(b->ssl, b->rbuf + b->rlen, room > INT_MAX ? INT_MAX : (int)room);
            if (r <= 0) {
                int e = SSL_get_error(b->ssl, r);
                if (e == SSL_ERROR_WANT_READ) return;
                if (e == SSL_ERROR_WANT_WRITE) {
                    b->read_wants_write = 1;
                    event_add(b->wev, NULL);
                    return;
                }
                backend_tls_failed(b, e, r, "TLS read");
                return;
            }
            n = r;
        } else {
            n = read(b->fd, b->rbuf + b->rlen, room);
            if (n == 0) {
                backend_close(b, "connection closed by the server");
                return;
            }
            if (n < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) return;
                backend_close(b, strerror(errno));
                return;
            }
        }
        b->rlen += (size_t)n;
        if (backend_frame_replies(b) != 0) return;
        int more = b->ssl ? SSL_has_pending(b->ssl) : (size_t)n == room;
        if (!more) return; /* level-triggered: epoll reports what is still in the socket */
    }
}

/* backend_do_read_some, then count what b holds now (max-memory). */
static void backend_do_read(struct backend *b)
{
    backend_do_read_some(b);
    backend_account(b);
}

/* Write b->wbuf from b->woff; on a full socket wait for EV_WRITE. */
static void backend_do_write(struct backend *b)
{
    b->write_wants_read = 0;
    while (b->woff < b->wbuf.len) {
        size_t left = b->wbuf.len - b->woff;
        ssize_t n;
        if (b->ssl) {
            ERR_clear_error();
            int r = SSL_write(b->ssl, b->wbuf.p + b->woff, left > INT_MAX ? INT_MAX : (int)left);
            if (r <= 0) {
                int e = SSL_get_error(b->ssl, r);
                if (e == SSL_ERROR_WANT_WRITE) {
                    event_add(b->wev, NULL);
                    return;
                }
                if (e == SSL_ERROR_WANT_READ) {
                    b->write_wants_read = 1; /* the read event (always armed) resumes it */
                    return;
                }
                backend_tls_failed(b, e, r, "TLS write");
                return;
            }
            n = r;
        } else {
            n = write(b->fd, b->wbuf.p + b->woff, left);
            if (n < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    event_add(b->wev, NULL);
                    return;
                }
                backend_close(b, strerror(errno));
                return;
            }
        }
        b->woff += (size_t)n;
    }
    b->wbuf.len = 0;
    b->woff = 0;
    if (b->wbuf.cap > BUF_KEEP_MAX) bytebuf_free(&b->wbuf); /* a large batch went out */
    if (b->out.len == 0 && b->out.cap > BUF_KEEP_MAX) bytebuf_free(&b->out);
    backend_account(b);
    if (!b->read_wants_write) event_del(b->wev);
    if (b->out.len > 0) backend_stage(b); /* staged while this write waited */
}

/* The connection (and its TLS handshake) is up: send what was staged meanwhile. */
static void backend_ready(struct backend *b)
{
    const struct instance_conf *ic = backend_conf(b);
    const char *host;
    int port;
    backend_address(b, &host, &port);
    evtimer_del(b->timer);
    event_del(b->wev);
    event_add(b->rev, NULL);
    if (b->addrs) evutil_freeaddrinfo(b->addrs); /* connected: the other addresses are not needed */
    b->addrs = b->next_addr = NULL;
    b->state = BACKEND_READY;
    b->backoff_ms = BACKOFF_MIN_MS;
    if (b->warned_down)
        log_event(LOG_INFO, "backend_up",
                  &(struct log_fields){.instance = ic->name, .backend_host = host, .backend_port = port},
                  "instance '%s' connection %d is back", ic->name, b->ordinal);
    b->warned_down = 0;
    if (b->ssl)
        log_event(LOG_DEBUG, "backend_connected",
                  &(struct log_fields){.instance = ic->name, .backend_host = host, .backend_port = port},
                  "instance '%s' connection %d: %s %s", ic->name, b->ordinal, SSL_get_version(b->ssl),
                  SSL_get_cipher_name(b->ssl));
    STAT_INC(&b->worker->stats, backend_connects);
    if (b->out.len > 0) backend_stage(b);
}

/* Drive the TCP connect, then the TLS handshake, one readiness event at a time. */
static void backend_continue_connect(struct backend *b)
{
    if (!b->tcp_up) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(b->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        if (err == EINPROGRESS) return;
        if (err) {
            if (!backend_next_address(b)) backend_close(b, strerror(err));
            return;
        }
        b->tcp_up = 1;
    }
    if (!b->ssl) {
        backend_ready(b);
        return;
    }
    ERR_clear_error();
    int r = SSL_connect(b->ssl);
    if (r == 1) {
        backend_ready(b);
        return;
    }
    int e = SSL_get_error(b->ssl, r);
    if (e == SSL_ERROR_WANT_READ) {
        event_del(b->wev);
        event_add(b->rev, NULL);
        return;
    }
    if (e == SSL_ERROR_WANT_WRITE) {
        event_add(b->wev, NULL);
        return;
    }
    backend_tls_failed(b, e, r, "TLS handshake");
}

static void backend_io_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    struct backend *b = arg;
    if (b->state == BACKEND_CONNECTING) {
        backend_continue_connect(b);
        return;
    }
    int readable = (what & EV_READ) != 0, writable = (what & EV_WRITE) != 0;
    if (readable || (writable && b->read_wants_write)) {
        int resume_write = readable && b->write_wants_read;
        backend_do_read(b);
        if (b->fd < 0) return;
        if (resume_write) backend_do_write(b);
        if (b->fd < 0) return;
    }
    if (writable) {
        if (b->woff < b->wbuf.len)
            backend_do_write(b);
        else if (!b->read_wants_write)
            event_del(b->wev);
    }
}

/* DOWN: time to reconnect. CONNECTING: the connect or handshake took too long. */
static void backend_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct backend *b = arg;
    if (b->state == BACKEND_DOWN) {
        backend_connect(b);
        return;
    }
    if (b->state == BACKEND_READY) { /* the topology guard's INFO found it loading: ask again */
        const char *info[1] = {"INFO"};
        backend_send_own(b, BACKEND_OWN_INFO, 1, info);
        return;
    }
    if (b->state == BACKEND_CONNECTING && b->resolving) {
        const char *host;
        int port;
        backend_address(b, &host, &port);
        char why[128];
        snprintf(why, sizeof why, "cannot resolve %.60s: timed out", host);
        backend_close(b, why);
        return;
    }
    if (b->state == BACKEND_CONNECTING)
        backend_close(b, b->ssl && b->tcp_up ? "TLS handshake timed out (is the server speaking TLS on this port?)"
                                             : "connect timed out");
}

/* Open the socket to the address ss (a numeric address, or what b's host name resolved to) and start
 * the TCP connect and the TLS handshake (SNI and the certificate's name: the host as configured or
 * announced, never the address it resolved to). On failure b is closed. */
static void backend_open(struct backend *b, const struct sockaddr *sa, socklen_t salen);

/* The TCP connect to one address of b's host name failed: 1 when b now connects to the next
 * address of the answer (an IPv6 and an IPv4 one, a name with several records), 0 when none is
 * left (the caller closes b). Only the socket is closed: what is staged stays. */
static int backend_next_address(struct backend *b)
{
    struct evutil_addrinfo *ai = b->next_addr;
    if (!ai) return 0;
    struct evutil_addrinfo *keep = b->addrs;
    b->addrs = NULL; /* backend_io_close would free it */
    backend_io_close(b);
    b->addrs = keep;
    b->next_addr = ai->ai_next;
    backend_open(b, ai->ai_addr, (socklen_t)ai->ai_addrlen);
    return 1;
}

static void backend_open(struct backend *b, const struct sockaddr *sa, socklen_t salen)
{
    struct worker *w = b->worker;
    const struct instance_conf *ic = backend_conf(b);
    const char *host;
    int port;
    backend_address(b, &host, &port);
    b->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (b->fd < 0) {
        backend_close(b, strerror(errno));
        return;
    }
    int one = 1, idle = KEEPALIVE_IDLE_S, intvl = KEEPALIVE_INTVL_S, cnt = KEEPALIVE_CNT;
    unsigned int user_timeout =
        (unsigned int)(w->cfg->backend_timeout_ms > 0 ? w->cfg->backend_timeout_ms : USER_TIMEOUT_DEFAULT_MS);
    setsockopt(b->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(b->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(b->fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(b->fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(b->fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    setsockopt(b->fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
    b->rev = xevent_new(w->base, b->fd, EV_READ | EV_PERSIST, backend_io_cb, b);
    b->wev = xevent_new(w->base, b->fd, EV_WRITE | EV_PERSIST, backend_io_cb, b);
    if (b->ssl_ctx) {
        b->ssl = SSL_new(b->ssl_ctx);
        if (!b->ssl || tls_instance_expect_name(b->ssl, ic, host) != 0 || SSL_set_fd(b->ssl, b->fd) != 1) {
            backend_close(b, "cannot set up TLS (SSL_new / SSL_set1_host / SSL_set_fd failed)");
            return;
        }
        SSL_set_connect_state(b->ssl);
        SSL_set_mode(b->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE);
        SSL_set_read_ahead(b->ssl, 1);
    }
    if (connect(b->fd, sa, salen) != 0 && errno != EINPROGRESS) {
        int err = errno;
        if (!backend_next_address(b)) backend_close(b, strerror(err));
        return;
    }
    event_add(b->wev, NULL); /* writable: the TCP connect finished (or failed: SO_ERROR) */
    struct timeval tv = {w->cfg->connect_timeout_ms / 1000, (w->cfg->connect_timeout_ms % 1000) * 1000};
    evtimer_add(b->timer, &tv);
    backend_account(b); /* what was staged while the name resolved */
}

/* The worker's resolver, made on first use: libevent's evdns (/etc/hosts, then the name servers
 * of /etc/resolv.conf), so a lookup never blocks the loop. It keeps no cache: every lookup asks
 * again. NULL when it cannot be made. */
static struct evdns_base *backend_dns(struct worker *w)
{
    if (w->dns) return w->dns;
    w->dns = evdns_base_new(w->base, EVDNS_BASE_INITIALIZE_NAMESERVERS | EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    /* 0x20 case randomization drops answers from servers that do not echo the case */
    if (w->dns) evdns_base_set_option(w->dns, "randomize-case:", "0");
    return w->dns;
}

/* evdns's answer for b's host name: connect to its first address (the next ones when a connect
 * fails: backend_next_address), or close b with the reason. */
static void backend_resolved(int err, struct evutil_addrinfo *res, void *arg)
{
    struct backend *b = arg;
    if (err == EVUTIL_EAI_CANCEL) { /* b closed (backend_io_close) while asking: b is not touched */
        if (res) evutil_freeaddrinfo(res);
        return;
    }
    b->resolving = NULL;
    if (err != 0 || !res) {
        const char *host;
        int port;
        backend_address(b, &host, &port);
        char why[128];
        snprintf(why, sizeof why, "cannot resolve %.60s: %s", host, err != 0 ? evutil_gai_strerror(err) : "no address");
        if (res) evutil_freeaddrinfo(res);
        backend_close(b, why);
        return;
    }
    b->addrs = res;
    b->next_addr = res->ai_next;
    backend_open(b, res->ai_addr, (socklen_t)res->ai_addrlen);
}

/*
 * Connect b to its server: a numeric host is connected at once; a host name is resolved first
 * (evdns, off the loop; again for every new connection, so a name whose address changed is
 * followed by the next connection). Meanwhile b is CONNECTING without a socket, its AUTH / HELLO
 * and the requests routed to it staged; connect-timeout bounds the lookup, then the connect and
 * handshake. A name that resolves to nothing closes b with "cannot resolve NAME: why".
 */
void backend_connect(struct backend *b)
{
    struct worker *w = b->worker;
    const struct instance_conf *ic = backend_conf(b);
    const char *host;
    int port;
    backend_address(b, &host, &port);
    if (!b->timer) b->timer = xevtimer_new(w->base, backend_timer_cb, b);
    b->state = BACKEND_CONNECTING;
    b->timed_out = 0;

    struct sockaddr_storage ss;
    int sslen = sizeof(ss);
    char addr[300];
    snprintf(addr, sizeof(addr), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    if (evutil_parse_sockaddr_port(addr, (struct sockaddr *)&ss, &sslen) == 0) {
        backend_open(b, (struct sockaddr *)&ss, (socklen_t)sslen);
    } else {
        struct evdns_base *dns = backend_dns(w);
        if (!dns) {
            backend_close(b, "cannot start the name resolver");
            return;
        }
        struct timeval tv = {w->cfg->connect_timeout_ms / 1000, (w->cfg->connect_timeout_ms % 1000) * 1000};
        evtimer_add(b->timer, &tv); /* the lookup's timeout (backend_timer_cb) */
        char portstr[8];
        snprintf(portstr, sizeof portstr, "%d", port);
        struct evutil_addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_protocol = IPPROTO_TCP};
        /* the answer may come before this returns (/etc/hosts): then the request is NULL */
        struct evdns_getaddrinfo_request *req = evdns_getaddrinfo(dns, host, portstr, &hints, backend_resolved, b);
        if (req) b->resolving = req;
    }
    if (b->state == BACKEND_DOWN) return; /* closed: a dedicated one is queued for reaping */
    /* Pipelined behind the handshake: AUTH first, then the topology check. */
    if (ic->password) {
        const char *argv[3] = {"AUTH", ic->username ? ic->username : ic->password, ic->password};
        backend_send_own(b, BACKEND_OWN_AUTH, ic->username ? 3 : 2, argv);
    }
    /* a RESP3 connection: every reply from here on is what Redis sends a HELLO 3 client */
    if (b->resp3) {
        const char *hello[2] = {"HELLO", "3"};
        backend_send_own(b, BACKEND_OWN_HELLO, 2, hello);
    }
    /* a dedicated connection's id on the backend, for CLIENT UNBLOCK of the client it serves */
    if (b->pinned) {
        const char *id[2] = {"CLIENT", "ID"};
        backend_send_own(b, BACKEND_OWN_ID, 2, id);
    }
    /* topology guard (shared RESP2 connections only: every instance has them; its parser
     * reads RESP2's bulk): durable noeviction + AOF, cache evicting, Redis >= 7. Not for a
     * cluster's or a sentinel instance's node (b->guard 0): the INFO poller checks each by its address */
    if (!b->pinned && !b->resp3 && b->guard) {
        const char *info[1] = {"INFO"};
        backend_send_own(b, BACKEND_OWN_INFO, 1, info);
    }
}

/* Put a clean dedicated connection on its instance's idle list. */
static void backend_make_idle(struct backend *b)
{
    b->release_when_idle = 0;
    b->owner = NULL;
    b->block_ms = -1;
    if (b->unblocked || (b->state != BACKEND_READY && b->state != BACKEND_CONNECTING)) {
        backend_abandon(b);
        return;
    }
    if (!b->in_idle) {
        TAILQ_INSERT_TAIL(&b->pins->idle[b->resp3], b, link);
        b->in_idle = 1;
    }
}

void backend_exempt(struct backend *b, int64_t block_ms)
{
    assert(b->pinned && block_ms >= 0);
    b->block_ms = block_ms;
}

void backend_unblock_sent(struct backend *b)
{
    assert(b->pinned);
    b->unblocked = 1;
}

void backend_unpin(struct backend *b)
{
    b->owner = NULL;
    if (b->subscriber) {
        backend_abandon(b); /* still subscribed to something: never reuse */
        return;
    }
    if (b->fifo_count == 0)
        backend_make_idle(b);
    else
        b->release_when_idle = 1;
}

void backend_abandon(struct backend *b)
{
    b->owner = NULL;
    if (b->state == BACKEND_DOWN && b->fd < 0) return; /* already closed and queued for reaping */
    backend_close(b, "released");
}

void backend_reap(struct worker *w)
{
    struct backend *b;
    while ((b = TAILQ_FIRST(&w->dead_backends))) {
        TAILQ_REMOVE(&w->dead_backends, b, link);
        assert(b->pinned && b->fd < 0 && b->fifo_count == 0 && !b->dirty && !b->in_idle && b->mem_held == 0);
        if (b->timer) event_free(b->timer);
        bytebuf_free(&b->out);
        bytebuf_free(&b->wbuf);
        free(b->fifo);
        free(b->rbuf);
        free(b);
    }
}
