/* client.c: client connections: read, parse, decide, queue, and write replies in request order. */
#include "proxy.h"

#include <errno.h>
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
    struct client *c = calloc(1, sizeof(*c));
    if (!c) {
        __atomic_sub_fetch(&w->proxy->clients_now, 1, __ATOMIC_RELAXED);
        close(fd);
        return;
    }
    c->worker = w;
    c->id = __atomic_add_fetch(&w->proxy->next_client_id, 1, __ATOMIC_RELAXED);
    c->created_ms = clock_wall_ms();
    addr_format(sa, c->addr, sizeof(c->addr));
    (void)salen;
    TAILQ_INIT(&c->queue);
    resp_parser_init(&c->parser);
    c->parser.max_bulk = cfg->max_request_bytes;
    c->session.authenticated = cfg->nusers == 0;
    if (tls) {
        SSL *ssl = SSL_new(tls);
        if (!ssl) {
            close(fd);
            client_close(c, "SSL_new failed");
            return;
        }
        c->bev = bufferevent_openssl_socket_new(w->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                BEV_OPT_CLOSE_ON_FREE);
    } else {
        c->bev = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
    }
    if (!c->bev) {
        close(fd);
        client_close(c, "bufferevent failed");
        return;
    }
    TAILQ_INSERT_TAIL(&w->clients, c, link);
    STAT_INC(&w->stats, connections_received);
    bufferevent_setcb(c->bev, client_read_cb, client_write_cb, client_event_cb, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void request_free(struct request *req)
{
    free(req->queued_error);
    free(req->reply);
    free(req);
}

/* Detach req from its client; free it unless backend replies for it are still due. */
static void request_release(struct request *req)
{
    req->client = NULL;
    if (req->waiting == 0) request_free(req);
}

void request_reply_consumed(struct request *req)
{
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
    while ((req = TAILQ_FIRST(&c->queue))) {
        TAILQ_REMOVE(&c->queue, req, link);
        request_release(req); /* replies still due from backends free it when they come */
    }
    c->nqueued = 0;
    if (c->bev) {
        TAILQ_REMOVE(&w->clients, c, link);
        bufferevent_free(c->bev);
        c->bev = NULL;
    }
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
        resp_parser_free(&c->parser);
        free(c->qbuf);
        free(c->argv);
        free(c->argvlen);
        free(c->name);
        free(c);
    }
}

/* Backpressure: stop reading while too much is queued; resume when it drains. */
static void client_update_reading(struct client *c)
{
    const struct config *cfg = c->worker->cfg;
    size_t out = evbuffer_get_length(bufferevent_get_output(c->bev));
    int over = c->nqueued >= cfg->max_pending || (int64_t)out > cfg->client_output_limit;
    if (c->closing) over = 1;
    if (over && !c->read_paused) {
        bufferevent_disable(c->bev, EV_READ);
        c->read_paused = 1;
    } else if (!over && c->read_paused) {
        c->read_paused = 0;
        bufferevent_enable(c->bev, EV_READ);
        /* input may already hold frames we stopped parsing */
        if (c->qlen > 0 || evbuffer_get_length(bufferevent_get_input(c->bev)) > 0)
            client_read_cb(c->bev, c);
    }
}

void client_flush(struct client *c)
{
    struct request *req;
    if (c->closed) return;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    while ((req = TAILQ_FIRST(&c->queue)) && req->done) {
        TAILQ_REMOVE(&c->queue, req, link);
        c->nqueued--;
        if (req->reply_len) {
            evbuffer_add(out, req->reply, req->reply_len);
            STAT_ADD(&c->worker->stats, bytes_to_clients, req->reply_len);
        }
        request_release(req);
    }
    if (c->closing && TAILQ_EMPTY(&c->queue) && evbuffer_get_length(out) == 0) {
        client_close(c, "closing");
        return;
    }
    client_update_reading(c);
}

void request_complete(struct request *req, const char *reply, size_t len)
{
    struct client *c = req->client;
    req->done = 1;
    if (!c || c->closed) {
        if (req->waiting == 0) request_free(req);
        return;
    }
    if (req == TAILQ_FIRST(&c->queue)) {
        /* the head: straight to the socket, no copy into the request */
        TAILQ_REMOVE(&c->queue, req, link);
        c->nqueued--;
        bufferevent_write(c->bev, reply, len);
        STAT_ADD(&c->worker->stats, bytes_to_clients, len);
        request_release(req);
        client_flush(c);
        return;
    }
    req->reply = malloc(len ? len : 1);
    if (!req->reply) {
        client_close(c, "out of memory");
        return;
    }
    memcpy(req->reply, reply, len);
    req->reply_len = len;
}

static struct request *request_new(struct client *c)
{
    struct request *req = calloc(1, sizeof(*req));
    if (!req) return NULL;
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
static int client_argv_reserve(struct client *c, size_t n)
{
    if (n <= c->argv_cap) return 0;
    size_t cap = c->argv_cap ? c->argv_cap : 16;
    while (cap < n) cap *= 2;
    const char **argv = realloc(c->argv, cap * sizeof(*argv));
    if (!argv) return -1;
    c->argv = argv;
    size_t *lens = realloc(c->argvlen, cap * sizeof(*lens));
    if (!lens) return -1;
    c->argvlen = lens;
    c->argv_cap = cap;
    return 0;
}

/* Handle one parsed frame: decide, then answer, refuse or forward. */
static void client_handle_frame(struct client *c, const char *frame)
{
    struct worker *w = c->worker;
    struct resp_parser *p = &c->parser;
    STAT_INC(&w->stats, commands_processed);

    struct request *req = request_new(c);
    if (!req || client_argv_reserve(c, p->argc) != 0) {
        if (req) request_error(c, req, "OOM keygate is out of memory");
        return;
    }
    req->start_ns = clock_mono_ns();
    for (size_t i = 0; i < p->argc; i++) {
        c->argv[i] = resp_arg_ptr(p, frame, i);
        c->argvlen[i] = p->args[i].len;
    }
    struct policy_request pr = {
        .argc = p->argc,
        .argv = c->argv,
        .argvlen = c->argvlen,
        .now_ms = clock_wall_ms(),
    };
    pr.cmd = command_lookup(p->argc, c->argv, c->argvlen, &pr.unknown_subcommand);
    if (pr.cmd) snprintf(c->last_cmd, sizeof(c->last_cmd), "%s", pr.cmd->name);

    struct plan plan;
    policy_decide(w->cfg, w->cfg->registry, &c->session, &pr, &plan);
    switch (plan.kind) {
    case PLAN_ERROR:
        request_error(c, req, plan.error);
        break;
    case PLAN_LOCAL:
        STAT_INC(&w->stats, commands_local);
        local_execute(c, req, &plan, p->argc, c->argv, c->argvlen);
        break;
    case PLAN_FORWARD:
        router_forward(c, req, &plan, frame);
        break;
    }
    plan_release(&plan);
}

/* Make room for `more` bytes in the query buffer. */
static int client_qbuf_reserve(struct client *c, size_t more)
{
    if (c->qlen + more <= c->qcap) return 0;
    size_t cap = c->qcap ? c->qcap : 16384;
    while (cap < c->qlen + more) cap *= 2;
    char *q = realloc(c->qbuf, cap);
    if (!q) return -1;
    c->qbuf = q;
    c->qcap = cap;
    return 0;
}

static void client_protocol_error(struct client *c, const char *text)
{
    struct request *req = request_new(c);
    STAT_INC(&c->worker->stats, errors_protocol);
    log_msg(LOG_INFO, "client %llu %s: %s", (unsigned long long)c->id, c->addr, text);
    c->closing = 1;
    c->qlen = 0;
    if (!req) {
        client_close(c, "out of memory");
        return;
    }
    char buf[200];
    int n = snprintf(buf, sizeof(buf), "-ERR %s\r\n", text);
    request_complete(req, buf, (size_t)n);
}

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
        if (client_qbuf_reserve(c, avail) != 0) {
            client_close(c, "out of memory for the query buffer");
            return;
        }
        evbuffer_remove(in, c->qbuf + c->qlen, avail);
        c->qlen += avail;
        STAT_ADD(&c->worker->stats, bytes_from_clients, avail);
    }

    size_t pos = 0;
    const struct config *cfg = c->worker->cfg;
    while (pos < c->qlen && !c->closing && c->nqueued < cfg->max_pending) {
        enum resp_status st = resp_parse_request(&c->parser, c->qbuf + pos, c->qlen - pos);
        if (st == RESP_NEED_MORE) {
            if ((int64_t)(c->qlen - pos) > cfg->max_request_bytes + 65536) {
                client_protocol_error(c, "Protocol error: request larger than max-request-size");
                return;
            }
            break;
        }
        if (st == RESP_ERROR) {
            client_protocol_error(c, c->parser.error);
            return;
        }
        const char *frame = c->qbuf + pos;
        pos += c->parser.frame_len;
        if (c->parser.argc > 0) {
            client_handle_frame(c, frame);
            if (c->closed) return;
        }
    }
    if (pos > 0) {
        memmove(c->qbuf, c->qbuf + pos, c->qlen - pos);
        c->qlen -= pos;
    }
    client_update_reading(c);
}

static void client_write_cb(struct bufferevent *bev, void *arg)
{
    struct client *c = arg;
    (void)bev;
    if (c->closed) return;
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
