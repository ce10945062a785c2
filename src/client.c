/* client.c: client connections: read, parse, decide, queue, and write replies in request order. */
#include "proxy.h"

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
static void client_account(struct client *c);

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
        static const char msg[] = "-ERR max number of clients reached\r\n";
        __atomic_sub_fetch(&w->proxy->clients_now, 1, __ATOMIC_RELAXED);
        STAT_INC(&w->stats, connections_rejected);
        if (!tls) {
            ssize_t n = write(fd, msg, sizeof(msg) - 1);
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
    addr_format(sa, c->addr, sizeof(c->addr));
    (void)salen;
    TAILQ_INIT(&c->queue);
    resp_parser_init(&c->parser);
    c->parser.max_bulk = cfg->max_request_bytes;
    c->session.authenticated = cfg->nusers == 0;
    c->session.multi_instance = -1;
    c->session.watch_instance = -1;
    c->parser.unauthenticated = !c->session.authenticated; /* Redis's pre-AUTH request limits */
    c->fd = fd;
    c->pfd = -1;
    if (tls) {
        /* TLS clients: libevent's OpenSSL bufferevent does the handshake and records */
        SSL *ssl = SSL_new(tls);
        c->bev = ssl ? bufferevent_openssl_socket_new(w->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                      BEV_OPT_CLOSE_ON_FREE)
                     : NULL;
        if (!c->bev) {
            if (ssl) SSL_free(ssl);
            client_close(c, "cannot set up TLS"); /* closes fd */
            return;
        }
        bufferevent_setcb(c->bev, client_read_cb, client_write_cb, client_event_cb, c);
        bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    } else {
        /* plain TCP and unix sockets: read() and write() on the fd, no buffer layer */
        c->rev = xevent_new(w->base, fd, EV_READ | EV_PERSIST, client_raw_read_cb, c);
        c->wev = xevent_new(w->base, fd, EV_WRITE | EV_PERSIST, client_raw_write_cb, c);
        if (event_add(c->rev, NULL) != 0) {
            client_close(c, "cannot watch the socket");
            return;
        }
    }
    c->in_list = 1;
    TAILQ_INSERT_TAIL(&w->clients, c, link);
    STAT_INC(&w->stats, connections_received);
}

#define FREE_REQUESTS_MAX 4096 /* recycled per worker; beyond that they go back to malloc */

static void request_free(struct request *req)
{
    struct worker *w = req->worker;
    assert(req->waiting == 0); /* no backend reply is still owed to it */
    for (int i = 0; i < req->nparts; i++) free(req->parts[i].reply);
    free(req->parts);
    free(req->key_instance);
    bytebuf_free(&req->exec_keep);
    free(req->queued_error);
    if (req->reply) mem_add(w, -(int64_t)req->reply_len); /* a reply kept behind an earlier one */
    free(req->reply);
    if (w->nfree_requests >= FREE_REQUESTS_MAX) {
        free(req);
        return;
    }
    req->link.tqe_next = w->free_requests;
    w->free_requests = req;
    w->nfree_requests++;
}

void request_pool_free(struct worker *w)
{
    struct request *req;
    while ((req = w->free_requests)) {
        w->free_requests = req->link.tqe_next;
        free(req);
    }
    w->nfree_requests = 0;
}

/* Detach req from its client; free it unless backend replies for it are still due. */
static void request_release(struct request *req)
{
    req->client = NULL;
    if (req->waiting == 0) request_free(req);
}

void request_reply_consumed(struct request *req)
{
    assert(req->waiting > 0);
    req->waiting--;
    if (req->waiting == 0 && !req->client) request_free(req);
}

void client_close(struct client *c, const char *reason)
{
    struct worker *w = c->worker;
    if (c->closed) return;
    c->closed = 1;
    log_msg(LOG_DEBUG, "client %llu %s closed: %s", (unsigned long long)c->id, c->addr, reason);
    struct request *req;
    int released = 0;
    while ((req = TAILQ_FIRST(&c->queue))) {
        TAILQ_REMOVE(&c->queue, req, link);
        request_release(req); /* replies still due from backends free it when they come */
        released++;
    }
    assert(released == c->nqueued); /* nqueued counts the queue */
    c->nqueued = 0;
    /* dedicated connections holding this client's state are closed, never reused */
    if (c->watch_pin) backend_abandon(c->watch_pin);
    if (c->block_pin) backend_abandon(c->block_pin);
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++)
        if (c->sub_pin[i]) backend_abandon(c->sub_pin[i]);
    c->watch_pin = c->block_pin = NULL;
    memset(c->sub_pin, 0, sizeof(c->sub_pin));
    bytebuf_free(&c->multi_buf);
    if (c->in_list) {
        TAILQ_REMOVE(&w->clients, c, link);
        c->in_list = 0;
    }
    if (c->pev) event_free(c->pev);
    c->pev = NULL;
    if (c->pfd >= 0) close(c->pfd);
    c->pfd = -1;
    if (c->bev) {
        bufferevent_free(c->bev); /* closes the fd */
        c->bev = NULL;
    } else if (c->fd >= 0) {
        if (c->rev) event_free(c->rev);
        if (c->wev) event_free(c->wev);
        c->rev = c->wev = NULL;
        close(c->fd);
    }
    c->fd = -1;
    if (c->out_dirty) {
        ptrvec_remove(&w->dirty_clients, c);
        c->out_dirty = 0;
    }
    if (c->postponed) {
        ptrvec_remove(&w->postponed, c);
        c->postponed = 0;
    }
    bytebuf_free(&c->obuf);
    c->qlen = 0;
    mem_set(w, &c->mem_held, 0);
    __atomic_sub_fetch(&w->proxy->clients_now, 1, __ATOMIC_RELAXED);
    /* freed by client_reap once no callback of this loop iteration can hold it */
    TAILQ_INSERT_TAIL(&w->dead_clients, c, link);
    event_active(w->reap_ev, EV_TIMEOUT, 0);
}

void client_reap(struct worker *w)
{
    struct client *c;
    while ((c = TAILQ_FIRST(&w->dead_clients))) {
        TAILQ_REMOVE(&w->dead_clients, c, link);
        assert(c->closed && c->nqueued == 0 && c->mem_held == 0 && !c->out_dirty && !c->postponed);
        resp_parser_free(&c->parser);
        free(c->qbuf);
        free(c->argv);
        free(c->argvlen);
        free(c->name);
        bytebuf_free(&c->multi_keep);
        free(c);
    }
}

/*
 * Client I/O. Plain TCP and unix clients are read with read() into the worker's scratch
 * buffer (a client keeps bytes only for an unfinished frame) and written with write()
 * from c->obuf once per loop iteration (client_write_all), waiting for EV_WRITE only when
 * the socket is full. TLS clients go through libevent's OpenSSL bufferevent.
 */

/* Queue reply bytes for c. */
static void client_out(struct client *c, const char *data, size_t len)
{
    if (c->bev) {
        bufferevent_write(c->bev, data, len);
        if (!client_output_over(c, 0)) client_account(c);
        return;
    }
    bytebuf_add(&c->obuf, data, len);
    if (client_output_over(c, 0)) return;
    client_account(c);
    if (!c->out_dirty) {
        ptrvec_push(&c->worker->dirty_clients, c);
        c->out_dirty = 1;
        event_active(c->worker->flush_ev, EV_TIMEOUT, 0);
    }
}

size_t client_out_pending(const struct client *c)
{
    if (c->bev) return evbuffer_get_length(bufferevent_get_output(c->bev));
    return c->obuf.len - c->obuf_off;
}

/* max-memory: count what c holds now (unparsed input, its MULTI, unwritten replies). */
static void client_account(struct client *c)
{
    size_t now = c->closed ? 0 : c->qlen + c->multi_buf.len + client_out_pending(c);
    mem_set(c->worker, &c->mem_held, now);
}

int client_output_over(struct client *c, size_t partial)
{
    if (c->closed) return 1;
    if ((int64_t)(client_out_pending(c) + partial) <= c->worker->cfg->client_output_hard_limit) return 0;
    log_msg(LOG_WARN, "client %llu %s closed: its replies (%zu bytes queued, %zu arriving) passed client-output-hard-limit",
            (unsigned long long)c->id, c->addr, client_out_pending(c), partial);
    STAT_INC(&c->worker->stats, clients_output_limit);
    client_close(c, "over client-output-hard-limit");
    return 1;
}

/* While paused: did the peer close or reset? Then c is closed (its pins released). */
static void client_paused_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;
    (void)fd;
    (void)what;
    if (c->closed) return;
    struct pollfd p = {.fd = c->fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)))
        client_close(c, p.revents & POLLRDHUP && !(p.revents & POLLERR) ? "connection closed by client"
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
            log_msg(LOG_WARN, "client %llu: cannot watch its socket while paused: %s", (unsigned long long)c->id,
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
        if (on) bufferevent_enable(c->bev, EV_READ);
        else bufferevent_disable(c->bev, EV_READ);
    } else if (c->rev) {
        if (on) event_add(c->rev, NULL);
        else event_del(c->rev);
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
    return c->stall && (c->nqueued > 0 || c->sub_markers > 0);
}

/* Backpressure: stop reading while too much is queued; resume when it drains. */
static void client_update_reading(struct client *c)
{
    const struct config *cfg = c->worker->cfg;
    size_t out = client_out_pending(c);
    int over = c->nqueued >= cfg->max_pending || (int64_t)out > cfg->client_output_limit;
    if (c->closing) over = 1;
    if (client_stalled(c)) over = 1;
    if (c->postponed) over = 1;
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
        client_close(c, "write error");
        return;
    }
    c->obuf.len = c->obuf_off = 0;
    if (c->obuf.cap > CLIENT_BUF_KEEP_BYTES) bytebuf_free(&c->obuf); /* a big reply came and went */
    client_account(c);
    if (c->wev_pending) {
        event_del(c->wev);
        c->wev_pending = 0;
    }
    if (c->closing || c->read_paused) client_flush(c);
}

void client_write_all(struct worker *w)
{
    while (w->dirty_clients.n > 0) {
        struct client *c = w->dirty_clients.items[--w->dirty_clients.n];
        c->out_dirty = 0;
        if (!c->closed) client_write_now(c);
    }
}

static void client_raw_write_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;
    (void)fd;
    (void)what;
    if (!c->closed) client_write_now(c);
}

void client_flush(struct client *c)
{
    struct request *req;
    if (c->closed) return;
    while ((req = TAILQ_FIRST(&c->queue)) && req->done) {
        TAILQ_REMOVE(&c->queue, req, link);
        assert(c->nqueued > 0);
        c->nqueued--;
        if (req->reply_len) {
            client_out(c, req->reply, req->reply_len);
            STAT_ADD(&c->worker->stats, bytes_to_clients, req->reply_len);
        }
        request_release(req);
        if (c->closed) return;
    }
    if (c->closing && TAILQ_EMPTY(&c->queue) && client_out_pending(c) == 0) {
        client_close(c, "closing");
        return;
    }
    if (c->stall && TAILQ_EMPTY(&c->queue)) client_resume_parsing(c);
    client_update_reading(c);
}

void request_complete(struct request *req, const char *reply, size_t len)
{
    struct client *c = req->client;
    assert(!req->done); /* one reply per request */
    req->done = 1;
    if (c && req->blocking) c->block_pin = NULL; /* it answered: the pin is back in the pool */
    if (!c || c->closed) {
        if (req->waiting == 0) request_free(req);
        return;
    }
    if (req == TAILQ_FIRST(&c->queue)) {
        /* the head: straight to the socket, no copy into the request */
        TAILQ_REMOVE(&c->queue, req, link);
        assert(c->nqueued > 0);
        c->nqueued--;
        client_out(c, reply, len);
        STAT_ADD(&c->worker->stats, bytes_to_clients, len);
        request_release(req);
        client_flush(c);
        return;
    }
    req->reply = xmalloc(len);
    memcpy(req->reply, reply, len);
    req->reply_len = len;
    mem_add(req->worker, (int64_t)len);
}

static struct request *request_new(struct client *c)
{
    struct worker *w = c->worker;
    struct request *req = w->free_requests;
    if (req) {
        w->free_requests = req->link.tqe_next;
        w->nfree_requests--;
        memset(req, 0, sizeof(*req));
    } else {
        req = xcalloc(1, sizeof(*req));
    }
    req->worker = w;
    req->client = c;
    TAILQ_INSERT_TAIL(&c->queue, req, link);
    c->nqueued++;
    return req;
}

/* Complete req with "-<error>\r\n" and count it. */
static void request_error(struct client *c, struct request *req, const char *error)
{
    char buf[PLAN_ERROR_MAX + 4];
    int n = snprintf(buf, sizeof(buf), "-%s\r\n", error);
    if (n < 0 || (size_t)n >= sizeof(buf)) n = (int)sizeof(buf) - 1;
    stats_count_error(&c->worker->stats, error);
    request_complete(req, buf, (size_t)n);
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
        request_error(c, req, plan->error);
        return;
    }
    router_write_queued(&c->multi_buf, c, plan, frame, &c->multi_keep);
    if (c->session.multi_instance < 0 && plan->instance >= 0) c->session.multi_instance = plan->instance;
    if ((int64_t)c->multi_buf.len > c->worker->cfg->max_request_bytes) {
        /* the transaction is held in keygate's memory: it counts as query buffer, and a
         * client past its limit is closed, as Redis closes one over client-query-buffer-limit */
        log_msg(LOG_WARN, "closing client %llu %s that reached max query buffer length: its MULTI holds %zu bytes "
                "(max-request-size %lld)", (unsigned long long)c->id, c->addr, c->multi_buf.len,
                (long long)c->worker->cfg->max_request_bytes);
        STAT_INC(&c->worker->stats, clients_query_limit);
        client_close(c, "MULTI over max-request-size");
        return;
    }
    client_account(c);
    request_complete(req, STR_AND_LEN("+QUEUED\r\n"));
}

static void client_multi_reset(struct client *c)
{
    c->multi_buf.len = 0;
    if (c->multi_buf.cap > CLIENT_BUF_KEEP_BYTES) bytebuf_free(&c->multi_buf);
    client_account(c);
    bytebuf_free(&c->multi_keep);
    c->multi_dirty = 0;
    c->session.in_multi = 0;
    c->session.multi_instance = -1;
}

/* WATCH state ends (EXEC, DISCARD, UNWATCH): the pin goes back once its replies are in. */
static void client_watch_end(struct client *c)
{
    if (!c->watch_pin) return;
    backend_unpin(c->watch_pin);
    c->watch_pin = NULL;
    c->session.watch_instance = -1;
    c->stall = 1; /* the next command may go to another connection: keep the order */
}

/* EXEC: send MULTI + the buffered commands + EXEC in one write, or answer EXECABORT. */
static void client_exec(struct client *c, struct request *req)
{
    struct worker *w = c->worker;
    if (c->watch_lost) {
        c->watch_lost = 0;
        client_multi_reset(c);
        c->session.watch_instance = -1;
        request_error(c, req, "UNAVAILABLE the WATCHed instance's connection was lost; transaction discarded");
        return;
    }
    if (c->multi_dirty) {
        client_multi_reset(c);
        if (c->watch_pin) {
            backend_abandon(c->watch_pin); /* still WATCHing: never reuse */
            c->watch_pin = NULL;
            c->session.watch_instance = -1;
            c->stall = 1;
        }
        request_error(c, req, "EXECABORT Transaction discarded because of previous errors.");
        return;
    }
    if (c->multi_keep.len == 0 && !c->watch_pin) {
        client_multi_reset(c);
        request_complete(req, STR_AND_LEN("*0\r\n"));
        return;
    }
    int instance = c->session.multi_instance >= 0 ? c->session.multi_instance : c->session.watch_instance;
    if (instance < 0) instance = 0; /* only keyless commands (PING, ECHO): any instance answers them */
    struct backend *b = c->watch_pin ? c->watch_pin : backend_for(w, instance, c->id);
    if (!b) {
        char msg[128];
        snprintf(msg, sizeof(msg), UNAVAILABLE_FMT, w->cfg->instance_names[instance]);
        client_multi_reset(c);
        client_watch_end(c);
        request_error(c, req, msg);
        return;
    }
    struct bytebuf *out = backend_stage(b);
    stage_add(out, STR_AND_LEN("*1\r\n$5\r\nMULTI\r\n"));
    backend_expect(b, req, PENDING_DROP);
    stage_add(out, c->multi_buf.p, c->multi_buf.len);
    for (size_t i = 0; i < c->multi_keep.len; i++) backend_expect(b, req, PENDING_DROP);
    stage_add(out, STR_AND_LEN("*1\r\n$4\r\nEXEC\r\n"));
    backend_expect(b, req, PENDING_EXEC_FILTER);
    req->exec_keep = c->multi_keep; /* the request owns the flags now */
    memset(&c->multi_keep, 0, sizeof(c->multi_keep));
    client_multi_reset(c);
    client_watch_end(c);
    STAT_INC(&w->stats, commands_forwarded);
}

static void client_discard(struct client *c, struct request *req)
{
    client_multi_reset(c);
    c->watch_lost = 0;
    c->session.watch_instance = c->watch_pin ? c->session.watch_instance : -1;
    if (c->watch_pin) {
        /* DISCARD also unwatches: do it on the pin before it goes back */
        stage_add(backend_stage(c->watch_pin), STR_AND_LEN("*1\r\n$7\r\nUNWATCH\r\n"));
        backend_expect(c->watch_pin, req, PENDING_DROP);
        client_watch_end(c);
    }
    request_complete(req, STR_AND_LEN("+OK\r\n"));
}

struct backend *client_backend(struct client *c, int instance)
{
    if (c->watch_pin && c->session.watch_instance == instance) return c->watch_pin;
    return backend_for(c->worker, instance, c->id);
}

static void request_pin_full(struct client *c, struct request *req, int instance)
{
    char msg[200];
    if (c->worker->pools[instance].npinned < c->worker->cfg->max_pinned)
        snprintf(msg, sizeof(msg), UNAVAILABLE_FMT, c->worker->cfg->instance_names[instance]);
    else
        snprintf(msg, sizeof(msg), "UNAVAILABLE no dedicated connection free for instance '%s' (max-pinned %d)",
                 c->worker->cfg->instance_names[instance], c->worker->cfg->max_pinned);
    request_error(c, req, msg);
}

/*
 * After each (P|S)(UN)SUBSCRIBE keygate sends PING with this argument on the subscriber
 * connection. Redis answers it after every confirmation of that command, so its answer
 * (["pong", marker] when subscribed, a bulk when not) tells keygate the counts are final:
 * only then are the client's next commands parsed, in Redis's order.
 */
#define SUB_MARKER "keygate-subscription-marker"
#define SUB_MARKER_CMD "*2\r\n$4\r\nPING\r\n$27\r\n" SUB_MARKER "\r\n"
_Static_assert(sizeof(SUB_MARKER) - 1 == 27, "SUB_MARKER_CMD's $27 is the marker's length");
/* What a subscribed connection answers PING <arg> with, before the bulk of <arg>. */
#define SUBSCRIBED_PONG_HEAD "*2\r\n$4\r\npong\r\n"

/* (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE: written to the subscriber connection, whose frames
 * go straight to the client (client_push); no reply is matched to a request. */
static void client_subscribe(struct client *c, const struct plan *plan, const char *frame)
{
    struct worker *w = c->worker;
    for (int i = 0; i < (int)w->cfg->ninstances; i++) {
        int wanted = plan->flow == FLOW_SUBSCRIBE ? i == plan->instance
                                                  : (plan->all_instances || i == plan->instance);
        if (!wanted) continue;
        struct backend *b = c->sub_pin[i];
        if (!b && plan->flow == FLOW_SUBSCRIBE) {
            b = backend_pin(w, i, c);
            if (!b) {
                request_pin_full(c, request_new(c), i);
                return;
            }
            b->subscriber = 1;
            c->sub_pin[i] = b;
            c->session.subscribed = 1;
        }
        if (!b) continue;
        struct bytebuf *out = backend_stage(b);
        stage_add(out, frame, c->parser.frame_len);
        /* its answer marks the end of this command's confirmations (client_push) */
        stage_add(out, STR_AND_LEN(SUB_MARKER_CMD));
        b->sub_markers++;
        c->sub_markers++;
        c->stall = 1;
        STAT_INC(&w->stats, commands_forwarded);
    }
}

/* 1 when the client holds no subscriber connection (UNSUBSCRIBE then answers locally). */
static int client_has_no_subscription(const struct client *c, const struct plan *plan)
{
    if (plan->all_instances) {
        for (int i = 0; i < CONFIG_MAX_INSTANCES; i++)
            if (c->sub_pin[i]) return 0;
        return 1;
    }
    return c->sub_pin[plan->instance] == NULL;
}

/* The instance client_exec sends c's transaction to. */
static int client_exec_instance(const struct client *c)
{
    int instance = c->session.multi_instance >= 0 ? c->session.multi_instance : c->session.watch_instance;
    return instance < 0 ? 0 : instance;
}

/*
 * Would forwarding this plan now let it overtake an earlier request of another client
 * (backend_would_reorder)? Looks at the connection it would be staged on; split plans
 * and commands queued inside MULTI (nothing is sent before EXEC) are not looked at.
 */
static int client_would_reorder(struct client *c, const struct plan *plan)
{
    struct worker *w = c->worker;
    if (plan->kind == PLAN_LOCAL && plan->local == LOCAL_EXEC && !c->multi_dirty && !c->watch_lost) {
        int instance = client_exec_instance(c);
        struct backend *b = c->watch_pin ? c->watch_pin : backend_for(w, instance, c->id);
        return backend_would_reorder(w, instance, b);
    }
    if (plan->kind != PLAN_FORWARD || c->session.in_multi || plan->merge != MERGE_NONE || plan->instance < 0 ||
        plan->all_instances)
        return 0;
    struct backend *b;
    if (plan->flow == FLOW_BLOCK || (plan->flow == FLOW_WATCH && !c->watch_pin)) b = NULL; /* a fresh pin */
    else if (plan->flow == FLOW_SUBSCRIBE || plan->flow == FLOW_UNSUBSCRIBE) b = c->sub_pin[plan->instance];
    else b = client_backend(c, plan->instance);
    return backend_would_reorder(w, plan->instance, b);
}

void client_postpone(struct client *c, int instance)
{
    struct worker *w = c->worker;
    w->postponing[instance] = 1;
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

/*
 * Handle one parsed frame: decide, then answer, refuse, buffer or forward.
 * Returns 1 when the frame must wait (a switch of connection while earlier replies
 * are due): the caller leaves it unconsumed and parses it again once the queue is empty.
 */
static int client_handle_frame(struct client *c, const char *frame)
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
    int needs_empty_queue = plan.kind == PLAN_FORWARD && !c->session.in_multi &&
                            (plan.flow == FLOW_BLOCK || (plan.flow == FLOW_WATCH && !c->watch_pin) ||
                             (plan.flow == FLOW_SUBSCRIBE && !c->session.subscribed));
    if (needs_empty_queue && c->nqueued > 0) {
        plan_release(&plan);
        c->stall = 1;
        return 1;
    }
    if (client_would_reorder(c, &plan)) {
        /* it would leave before a request read earlier: wait for the next flush */
        plan_release(&plan);
        client_postpone(c, plan.kind == PLAN_FORWARD ? plan.instance : client_exec_instance(c));
        return 1;
    }
    STAT_INC(&w->stats, commands_processed);
    if (pr.cmd) c->last_cmd = pr.cmd->name;

    if (plan.kind == PLAN_FORWARD && plan.flow == FLOW_UNSUBSCRIBE && client_has_no_subscription(c, &plan)) {
        plan.kind = PLAN_LOCAL; /* nothing subscribed: Redis's empty confirmation */
        plan.local = LOCAL_UNSUBSCRIBE_NONE;
    } else if (plan.kind == PLAN_FORWARD && (plan.flow == FLOW_SUBSCRIBE || plan.flow == FLOW_UNSUBSCRIBE)) {
        client_subscribe(c, &plan, frame);
        plan_release(&plan);
        return 0;
    }
    struct request *req = request_new(c);
    if (c->session.in_multi && (plan.kind == PLAN_FORWARD || (plan.kind == PLAN_ERROR && !plan.keeps_transaction))) {
        client_multi_queue(c, req, &plan, frame);
        plan_release(&plan);
        return 0;
    }
    switch (plan.kind) {
    case PLAN_ERROR:
        request_error(c, req, plan.error);
        break;
    case PLAN_LOCAL:
        STAT_INC(&w->stats, commands_local);
        if (plan.local == LOCAL_MULTI) {
            c->multi_buf.len = 0;
            c->session.in_multi = 1;
            c->session.multi_instance = -1;
            request_complete(req, STR_AND_LEN("+OK\r\n"));
        } else if (plan.local == LOCAL_EXEC) {
            client_exec(c, req);
        } else if (plan.local == LOCAL_DISCARD) {
            client_discard(c, req);
        } else {
            local_execute(c, req, &plan, p->argc, c->argv, c->argvlen);
        }
        break;
    case PLAN_FORWARD:
        if (plan.merge != MERGE_NONE) {
            router_forward_split(c, req, &plan, frame);
        } else if (plan.flow == FLOW_WATCH) {
            if (!c->watch_pin) {
                c->watch_pin = backend_pin(w, plan.instance, c);
                if (!c->watch_pin) {
                    request_pin_full(c, req, plan.instance);
                    break;
                }
                c->session.watch_instance = plan.instance;
            }
            router_forward(c, c->watch_pin, req, &plan, frame);
        } else if (plan.flow == FLOW_UNWATCH && !c->watch_pin) {
            c->watch_lost = 0; /* its connection is already gone: nothing is watched */
            c->session.watch_instance = -1;
            request_complete(req, STR_AND_LEN("+OK\r\n"));
        } else if (plan.flow == FLOW_UNWATCH) {
            router_forward(c, c->watch_pin, req, &plan, frame);
            client_watch_end(c);
        } else if (plan.flow == FLOW_BLOCK) {
            struct backend *b = backend_pin(w, plan.instance, c);
            if (!b) {
                request_pin_full(c, req, plan.instance);
                break;
            }
            req->blocking = 1;
            c->block_pin = b;
            router_forward(c, b, req, &plan, frame);
            backend_unpin(b); /* back to the idle list once it answered */
            c->stall = 1;     /* later commands wait for it, as they would on Redis */
        } else {
            router_forward(c, client_backend(c, plan.instance), req, &plan, frame);
        }
        break;
    }
    plan_release(&plan);
    return 0;
}

/* Is c subscribed to anything on any instance (from the confirmed counts)? */
static int client_any_subscription(const struct client *c)
{
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++)
        if (c->sub_pin[i] && c->sub_pin[i]->sub_normal + c->sub_pin[i]->sub_shard > 0) return 1;
    return 0;
}

/* The bulk that ends at `p` (len bytes): "$n\r\n<n bytes>\r\n" equal to word? */
static int bulk_is(const char *p, size_t len, const char *word)
{
    size_t wl = strlen(word);
    char hdr[16];
    int n = snprintf(hdr, sizeof(hdr), "$%zu\r\n", wl);
    return len == (size_t)n + wl + 2 && memcmp(p, hdr, (size_t)n) == 0 && memcmp(p + n, word, wl) == 0;
}

/* Parse a confirmation ["(p|s)(un)subscribe", channel, count]; 1 when it is one. */
static int confirmation_parse(const char *frame, size_t len, int *shard, long long *count)
{
    static const char head[] = "*3\r\n$";
    if (len < 20 || memcmp(frame, head, sizeof(head) - 1) != 0) return 0;
    const char *p = frame + sizeof(head) - 1, *end = frame + len;
    long long wl;
    const char *crlf = memchr(p, '\r', (size_t)(end - p));
    static const char tail[] = "subscribe"; /* the shortest word, and how every one ends */
    const long long tl = (long long)sizeof(tail) - 1, longest = (long long)sizeof("punsubscribe") - 1;
    if (!crlf || resp_parse_ll(p, (size_t)(crlf - p), &wl) != 0 || wl < tl || wl > longest) return 0;
    const char *word = crlf + 2;
    if (word + wl + 2 > end) return 0;
    if (memcmp(word + wl - tl, tail, (size_t)tl) != 0) return 0;
    /* ssubscribe / sunsubscribe, not subscribe */
    *shard = word[0] == 's' && (wl == (long long)sizeof("ssubscribe") - 1 || wl == (long long)sizeof("sunsubscribe") - 1);
    const char *colon = end - 3;
    while (colon > word && *colon != ':') colon--;
    return colon > word && resp_parse_ll(colon + 1, (size_t)(end - 2 - colon - 1), count) == 0;
}

void client_push(struct client *c, struct backend *b, const char *frame, size_t len)
{
    if (c->closed) return;
    /* the marker's answer: this command's confirmations are all in */
    if (bulk_is(frame, len, SUB_MARKER) ||
        (len > sizeof(SUBSCRIBED_PONG_HEAD) - 1 && memcmp(frame, STR_AND_LEN(SUBSCRIBED_PONG_HEAD)) == 0 &&
         bulk_is(frame + sizeof(SUBSCRIBED_PONG_HEAD) - 1, len - (sizeof(SUBSCRIBED_PONG_HEAD) - 1), SUB_MARKER))) {
        /* only keygate sends the marker (a client's PING while subscribed is answered
         * locally), once per counted (un)subscribe: never more answers than sent */
        assert(b->sub_markers > 0 && c->sub_markers >= b->sub_markers);
        b->sub_markers--;
        c->sub_markers--;
        if (c->sub_markers == 0) {
            c->session.subscribed = client_any_subscription(c);
            client_resume_parsing(c);
            client_update_reading(c);
        }
        return;
    }
    int shard = 0;
    long long count = 0;
    if (confirmation_parse(frame, len, &shard, &count)) {
        if (shard) b->sub_shard = (int)count;
        else b->sub_normal = (int)count;
    }
    client_out(c, frame, len);
    STAT_ADD(&c->worker->stats, bytes_to_clients, len);
}

void client_pin_lost(struct client *c, struct backend *b)
{
    if (c->block_pin == b) {
        c->block_pin = NULL; /* its request got -UNAVAILABLE; no other state */
        return;
    }
    if (c->watch_pin == b) {
        /* the WATCH is gone: EXEC must not run as if nothing were watched */
        c->watch_pin = NULL;
        c->watch_lost = 1;
        return;
    }
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++) {
        if (c->sub_pin[i] != b) continue;
        int had = b->sub_normal + b->sub_shard > 0;
        c->sub_pin[i] = NULL;
        assert(b->sub_markers >= 0 && c->sub_markers >= b->sub_markers); /* c's count sums its pins' */
        c->sub_markers -= b->sub_markers;
        char msg[128];
        int n = snprintf(msg, sizeof(msg), "-" UNAVAILABLE_FMT "\r\n", c->worker->cfg->instance_names[i]);
        client_out(c, msg, (size_t)n);
        c->session.subscribed = client_any_subscription(c);
        if (had) {
            /* its subscriptions are gone: close after the error, never lose messages silently */
            c->closing = 1;
            client_flush(c);
        } else if (c->sub_markers == 0) {
            client_resume_parsing(c);
        }
    }
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
    STAT_INC(&c->worker->stats, errors_protocol);
    log_msg(LOG_INFO, "client %llu %s: %s", (unsigned long long)c->id, c->addr, text);
    c->closing = 1;
    c->qlen = 0;
    char buf[200];
    int n = snprintf(buf, sizeof(buf), "-ERR %s\r\n", text);
    request_complete(req, buf, (size_t)n);
    if (!c->closed) client_flush(c); /* close once the error is written */
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
    while (pos < len && !c->closing && c->nqueued < cfg->max_pending) {
        enum resp_status st = resp_parse_request(&c->parser, buf + pos, len - pos);
        if (st == RESP_NEED_MORE) {
            if ((int64_t)(len - pos) > cfg->max_request_bytes + REQUEST_FRAMING_SLACK) {
                client_protocol_error(c, "Protocol error: request larger than max-request-size");
                return len;
            }
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
            if (client_handle_frame(c, frame)) break;
            if (c->closed) return len;
        }
        pos += c->parser.frame_len;
        if (c->parser.argc > 0) c->parser.unauthenticated = !c->session.authenticated; /* AUTH lifts the limits */
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
    if (c->qlen == 0 && c->qcap > 0) {
        /* nothing pending: an idle client keeps no query buffer */
        free(c->qbuf);
        c->qbuf = NULL;
        c->qcap = 0;
    }
}

/* Can c take more requests now? While it cannot, keygate reads nothing more from it. */
static int client_can_parse(const struct client *c)
{
    if (c->closing || c->read_paused || c->postponed) return 0;
    if (c->nqueued >= c->worker->cfg->max_pending) return 0;
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
    if (c->closed) return;
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
            client_close(c, "connection closed by client");
            return;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            client_close(c, "read error");
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
    client_account(c);
    client_update_reading(c);
}

/* TLS clients: the bufferevent decrypted the bytes into its input buffer. */
static void client_read_cb(struct bufferevent *bev, void *arg)
{
    struct client *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t avail = evbuffer_get_length(in);
    if (c->closed) return;
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
    client_account(c);
    client_update_reading(c);
}

static void client_write_cb(struct bufferevent *bev, void *arg)
{
    struct client *c = arg;
    (void)bev;
    if (c->closed) return;
    client_account(c);
    if (c->closing) {
        client_flush(c);
        return;
    }
    if (c->read_paused) client_update_reading(c);
}

static void client_event_cb(struct bufferevent *bev, short events, void *arg)
{
    struct client *c = arg;
    (void)bev;
    if (events & BEV_EVENT_EOF) client_close(c, "connection closed by client");
    else if (events & BEV_EVENT_ERROR) client_close(c, "connection error");
}

/* The client of w holding the most bytes (input, transaction, replies), if it holds at
 * least `least`; else NULL. */
static struct client *client_largest(struct worker *w, size_t least)
{
    struct client *c, *best = NULL;
    size_t most = least;
    TAILQ_FOREACH(c, &w->clients, link) {
        if (c->mem_held >= most) {
            most = c->mem_held;
            best = c;
        }
    }
    return best;
}

#define MEM_EVICT_AFTER_MS 500 /* over max-memory this long: evict the largest client */

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
                log_msg(LOG_WARN, "client %llu %s closed: keygate is over max-memory (%lld bytes) and this client "
                        "holds %zu bytes (input %zu, transaction %zu)", (unsigned long long)c->id, c->addr,
                        (long long)w->cfg->max_memory, c->mem_held, c->qlen, c->multi_buf.len);
                STAT_INC(&w->stats, clients_evicted);
                client_close(c, "evicted: over max-memory");
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
