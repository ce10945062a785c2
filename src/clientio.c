/* clientio.c: a client's socket: read (plain and TLS), write, pause and resume reading (backpressure). */
/*
 * Plain TCP and unix clients are read with read() into the worker's scratch buffer (a client
 * keeps bytes only for an unfinished frame) and written with write() from c->obuf once per
 * loop iteration (clientio_write_all), waiting for EV_WRITE only when the socket is full. TLS
 * clients go through libevent's OpenSSL bufferevent. The bytes read go up through one hook,
 * c->parse (client.c's parser, handed to clientio_open); nothing here calls client.c:
 *
 *   socket --read()/SSL--> scratch or c->qbuf --c->parse--> client.c (decide, dispatch)
 *                                   ^ unfinished frames kept (clientio_keep_rest)
 *   conn_out --> c->obuf / bev output --write()/SSL--> socket   (clientio_write_all, per loop)
 *   over a limit (queue, output, window, memory, a stall, a hold) --> EV_READ off, until
 *   clientio_service / clientio_update_reading finds it under again
 */
#include "clientio.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>

static void clientio_tls_read_cb(struct bufferevent *bev, void *arg);
static void clientio_tls_write_cb(struct bufferevent *bev, void *arg);
static void clientio_tls_event_cb(struct bufferevent *bev, short events, void *arg);
static void clientio_raw_read_cb(evutil_socket_t fd, short what, void *arg);
static void clientio_raw_write_cb(evutil_socket_t fd, short what, void *arg);
static void clientio_service(struct client *c);

int clientio_open(struct client *c, SSL_CTX *tls, clientio_parse_fn *parse)
{
    c->parse = parse;
    if (tls) {
        /* TLS clients: libevent's OpenSSL bufferevent does the handshake and records */
        SSL *ssl = SSL_new(tls);
        c->bev = ssl ? bufferevent_openssl_socket_new(c->worker->base, c->fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                      BEV_OPT_CLOSE_ON_FREE)
                     : NULL;
        if (!c->bev) {
            if (ssl) SSL_free(ssl);
            conn_close(c, "cannot set up TLS"); /* its fd closes at the reap */
            return -1;
        }
        c->tls_handshaking = 1; /* until BEV_EVENT_CONNECTED */
        bufferevent_setcb(c->bev, clientio_tls_read_cb, clientio_tls_write_cb, clientio_tls_event_cb, c);
        bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    } else {
        /* plain TCP and unix sockets: read() and write() on the fd, no buffer layer */
        c->rev = xevent_new(c->worker->base, c->fd, EV_READ | EV_PERSIST, clientio_raw_read_cb, c);
        c->wev = xevent_new(c->worker->base, c->fd, EV_WRITE | EV_PERSIST, clientio_raw_write_cb, c);
        if (event_add(c->rev, NULL) != 0) {
            conn_close(c, "cannot watch the socket");
            return -1;
        }
    }
    return 0;
}

void clientio_close(struct client *c)
{
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
    free(c->qbuf);
}

/* While paused: did the peer close or reset? Then c is closed (its pins released). */
static void clientio_paused_cb(evutil_socket_t fd, short what, void *arg)
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
 * a dup of fd reports each change once; clientio_paused_cb then asks poll() what it was.
 */
static void clientio_watch_close(struct client *c, int on)
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
        c->pev = xevent_new(c->worker->base, c->pfd, EV_READ | EV_CLOSED | EV_ET | EV_PERSIST, clientio_paused_cb, c);
    }
    event_add(c->pev, NULL);
}

static void clientio_set_reading(struct client *c, int on)
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
    clientio_watch_close(c, !on);
}

/* Frames may wait in qbuf (backpressure, a stall): parse them from a deferred callback,
 * never from inside the parse loop that may be running now. */
void clientio_resume_parsing(struct client *c)
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

/* Backpressure: stop reading while too much is queued; resume when it drains. */
void clientio_update_reading(struct client *c)
{
    const struct config *cfg = c->worker->cfg;
    size_t out = conn_out_held(c); /* queued and kept behind an earlier request */
    int over = c->nqueued >= cfg->max_pending || (int64_t)out > cfg->client_output_limit;
    if (!over && !clientio_window_open(c)) {
        over = 1;
        if (!c->read_paused) STAT_INC(&c->worker->stats, clients_window_waits);
    }
    if (c->closing) over = 1;
    if (clientio_stalled(c)) over = 1;
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
        clientio_set_reading(c, 0);
        c->read_paused = 1;
    } else if (!over && c->read_paused) {
        c->read_paused = 0;
        clientio_set_reading(c, 1);
        clientio_resume_parsing(c);
    }
}

/* Write c's queued replies now; EV_WRITE only when the socket is full. */
static void clientio_write_now(struct client *c)
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
    if (c->closing || c->read_paused) clientio_service(c);
}

void clientio_write_all(struct worker *w)
{
    while (w->dirty_clients.n > 0) {
        struct client *c = w->dirty_clients.items[--w->dirty_clients.n];
        c->out_dirty = 0;
        clientio_write_now(c);
    }
}

static void clientio_raw_write_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;
    (void)fd;
    (void)what;
    clientio_write_now(c);
}

/* After something changed for c: close it once it is closing and every reply is written,
 * resume parsing where a stall ended, re-evaluate backpressure. */
static void clientio_service(struct client *c)
{
    if (c->closing && TAILQ_EMPTY(&c->queue) && conn_out_pending(c) == 0) {
        conn_close(c, "closing");
        return;
    }
    if (c->stall && !clientio_stalled(c)) clientio_resume_parsing(c);
    clientio_update_reading(c);
}

void clientio_service_woken(struct worker *w)
{
    while (w->woken.n > 0) {
        struct client *c = w->woken.items[--w->woken.n];
        c->woken = 0;
        clientio_service(c);
    }
}

/* Make room for `more` bytes in the query buffer. */
static void clientio_qbuf_reserve(struct client *c, size_t more)
{
    if (c->qlen + more <= c->qcap) return;
    size_t cap = c->qcap ? c->qcap : 1024; /* small: most clients send small commands */
    while (cap < c->qlen + more) cap *= 2;
    c->qbuf = xrealloc(c->qbuf, cap);
    c->qcap = cap;
}

/* Keep buf[from..len) (an unfinished or postponed frame) in c->qbuf. */
static void clientio_keep_rest(struct client *c, const char *buf, size_t len, size_t from)
{
    size_t rest = len - from;
    if (buf == c->qbuf) {
        if (from > 0) memmove(c->qbuf, c->qbuf + from, rest);
        c->qlen = rest;
    } else {
        c->qlen = 0;
        if (rest > 0) { /* nothing to keep: qbuf may be NULL, and memcpy(NULL, ..., 0) is undefined */
            clientio_qbuf_reserve(c, rest);
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
static int clientio_can_parse(struct client *c)
{
    if (c->closing || c->read_paused || c->postponed || c->auth_held || c->owner_held || c->rate_held) return 0;
    if (c->nqueued >= c->worker->cfg->max_pending) return 0;
    if (!clientio_window_open(c)) return 0;
    if (clientio_stalled(c)) return 0;
    return 1;
}

/* Parse buf (the scratch buffer or c->qbuf) and keep what is left; -1 when c was closed. */
static int clientio_parse_and_keep(struct client *c, const char *buf, size_t len)
{
    size_t used = c->parse(c, buf, len);
    if (c->closed) return -1;
    if (c->closing) {
        c->qlen = 0;
        return 0;
    }
    clientio_keep_rest(c, buf, len, used);
    return 0;
}

static void clientio_raw_read_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;
    struct worker *w = c->worker;
    (void)what;
    stats_clock(&w->stats); /* the read time of the requests in this read (one clock read a batch) */
    /* first what is already buffered (resumed after backpressure or a stall) */
    if (c->qlen > 0 && !c->closing && clientio_parse_and_keep(c, c->qbuf, c->qlen) != 0) return;
    /* then read, but only while requests can be taken: backpressure bounds the buffer */
    for (int rounds = 0; rounds < 4 && (clientio_can_parse(c) || c->closing); rounds++) {
        const char *buf;
        size_t len;
        ssize_t n;
        if (c->qlen == 0) {
            /* the common case: whole frames straight from the worker's scratch buffer */
            n = read(fd, w->scratch, sizeof(w->scratch));
            buf = w->scratch;
            len = n > 0 ? (size_t)n : 0;
        } else {
            clientio_qbuf_reserve(c, READ_CHUNK_BYTES);
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
        if (len > 0 && clientio_parse_and_keep(c, buf, len) != 0) return;
        if (n <= 0 || (buf == w->scratch && (size_t)n < sizeof(w->scratch))) break; /* drained */
    }
    conn_account(c);
    clientio_update_reading(c);
}

/* TLS clients: the bufferevent decrypted the bytes into its input buffer. */
static void clientio_tls_read_cb(struct bufferevent *bev, void *arg)
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
        clientio_qbuf_reserve(c, avail);
        evbuffer_remove(in, c->qbuf + c->qlen, avail);
        c->qlen += avail;
        STAT_ADD(&c->worker->stats, bytes_from_clients, avail);
    }
    size_t used = c->parse(c, c->qbuf, c->qlen);
    if (c->closed) return;
    if (c->closing) {
        c->qlen = 0;
        return;
    }
    clientio_keep_rest(c, c->qbuf, c->qlen, used);
    conn_account(c);
    clientio_update_reading(c);
}

static void clientio_tls_write_cb(struct bufferevent *bev, void *arg)
{
    struct client *c = arg;
    (void)bev;
    conn_account(c);
    if (c->closing) {
        clientio_service(c);
        return;
    }
    if (c->read_paused) clientio_update_reading(c);
}

static void clientio_tls_event_cb(struct bufferevent *bev, short events, void *arg)
{
    struct client *c = arg;
    (void)bev;
    if (events & BEV_EVENT_CONNECTED) c->tls_handshaking = 0;
    if (events & BEV_EVENT_EOF)
        conn_close(c, "connection closed by client");
    else if (events & BEV_EVENT_ERROR)
        conn_close(c, "connection error");
}
