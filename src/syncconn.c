/* syncconn.c: a small blocking Redis client (TLS via OpenSSL or plain TCP; hiredis formats and parses). */
#include "syncconn.h"

#include "resp.h"
#include "sentinel.h"
#include "sizes.h"
#include "tls.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct syncconn_stop {
    pthread_mutex_t lock;
    int tripped;            /* under lock */
    struct syncconn *conns; /* under lock: the connections opened with it, linked by stop_next */
};

struct syncconn {
    int fd;                     /* under stop->lock when stop is set (the tripping thread reads it) */
    struct syncconn_stop *stop; /* NULL: none */
    struct syncconn *stop_next; /* in stop->conns */
    SSL_CTX *ctx;
    SSL *ssl;
    redisReader *reader;
    char *out; /* queued command bytes */
    size_t outlen, outcap;
    struct bytebuf raw; /* syncconn_read_raw's bytes, from raw_off on not handed out yet */
    size_t raw_off;
    struct resp_scanner scan;
    char err[256];
};

static void set_err(struct syncconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(struct syncconn *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
}

/* The OpenSSL error queue's oldest entry, or the socket errno, as text. */
static void set_ssl_err(struct syncconn *c, const char *what, int ret)
{
    unsigned long e = ERR_get_error();
    int sslerr = SSL_get_error(c->ssl, ret);
    if (e) {
        char buf[200];
        ERR_error_string_n(e, buf, sizeof(buf));
        set_err(c, "%s: %s", what, buf);
    } else if (sslerr == SSL_ERROR_ZERO_RETURN || (sslerr == SSL_ERROR_SYSCALL && errno == 0)) {
        set_err(c, "%s: connection closed by the server", what);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        set_err(c, "%s: timed out", what);
    } else {
        set_err(c, "%s: %s", what, strerror(errno));
    }
    ERR_clear_error();
}

/* 1 when an SSL call's failure (ret) is a system call interrupted by a signal: a process stopped
 * and continued (SIGSTOP, SIGCONT) sees its timed recv/send fail with EINTR although nothing
 * happened to the connection (signal(7)); the call is made again. */
static int ssl_interrupted(struct syncconn *c, int ret)
{
    int e = SSL_get_error(c->ssl, ret); /* OpenSSL's socket BIO reads EINTR as "retry": WANT_READ/WRITE */
    if (errno != EINTR || ERR_peek_error() != 0 ||
        (e != SSL_ERROR_SYSCALL && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE))
        return 0;
    ERR_clear_error();
    return 1;
}

struct syncconn_stop *syncconn_stop_new(void)
{
    struct syncconn_stop *st = xcalloc(1, sizeof(*st));
    pthread_mutex_init(&st->lock, NULL);
    return st;
}

void syncconn_stop_trip(struct syncconn_stop *st)
{
    pthread_mutex_lock(&st->lock);
    st->tripped = 1;
    for (struct syncconn *c = st->conns; c; c = c->stop_next)
        if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_unlock(&st->lock);
}

void syncconn_stop_free(struct syncconn_stop *st)
{
    if (!st) return;
    assert(st->conns == NULL); /* every connection opened with it was closed */
    pthread_mutex_destroy(&st->lock);
    free(st);
}

/* c's socket becomes fd (-1: none), closing the one it had; with a stop, under its lock, so a
 * trip never shuts down a number the socket no longer owns. A socket set after a trip is shut
 * down at once. */
static void set_fd(struct syncconn *c, int fd)
{
    if (c->stop) pthread_mutex_lock(&c->stop->lock);
    if (c->fd >= 0) close(c->fd);
    c->fd = fd;
    if (c->stop && c->stop->tripped && fd >= 0) shutdown(fd, SHUT_RDWR);
    if (c->stop) pthread_mutex_unlock(&c->stop->lock);
}

/* Non-blocking connect bounded by timeout_ms, then back to blocking with I/O timeouts of io_ms
 * (0: the longer of timeout_ms and SYNCCONN_IO_TIMEOUT_MS). */
static int tcp_connect(struct syncconn *c, const char *host, int port, int timeout_ms, int io_ms)
{
    char portstr[16];
    snprintf(portstr, sizeof(portstr), "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int gai = getaddrinfo(host, portstr, &hints, &res);
    if (gai != 0) {
        set_err(c, "cannot resolve %s: %s", host, gai_strerror(gai));
        return -1;
    }
    int rc = -1;
    for (struct addrinfo *ai = res; ai && rc != 0; ai = ai->ai_next) {
        set_fd(c, socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
        if (c->fd < 0) {
            set_err(c, "socket: %s", strerror(errno));
            continue;
        }
        if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            if (errno != EINPROGRESS) {
                set_err(c, "connect: %s", strerror(errno));
                continue;
            }
            struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
            int n = poll(&pfd, 1, timeout_ms);
            int soerr = 0;
            socklen_t sl = sizeof(soerr);
            if (n == 0) {
                set_err(c, "connect: timed out after %d ms", timeout_ms);
                continue;
            }
            if (n < 0 || getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
                set_err(c, "connect: %s", strerror(n < 0 ? errno : soerr));
                continue;
            }
        }
        rc = 0;
    }
    freeaddrinfo(res);
    if (rc != 0) return -1;
    int flags = fcntl(c->fd, F_GETFL);
    fcntl(c->fd, F_SETFL, flags & ~O_NONBLOCK);
    if (io_ms <= 0) io_ms = timeout_ms > SYNCCONN_IO_TIMEOUT_MS ? timeout_ms : SYNCCONN_IO_TIMEOUT_MS;
    struct timeval tv = {io_ms / 1000, (io_ms % 1000) * 1000};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return 0;
}

static int tls_handshake(struct syncconn *c, const struct instance_conf *ic, const char *host)
{
    char err[300];
    c->ctx = tls_instance_ctx(ic, err, sizeof(err));
    if (!c->ctx) {
        set_err(c, "%s", err);
        return -1;
    }
    c->ssl = SSL_new(c->ctx);
    if (!c->ssl) {
        set_err(c, "SSL_new failed");
        return -1;
    }
    if (tls_instance_expect_name(c->ssl, ic, host) != 0 || !SSL_set_fd(c->ssl, c->fd)) {
        set_err(c, "TLS set-up failed");
        return -1;
    }
    ERR_clear_error();
    errno = 0;
    int ret = SSL_connect(c->ssl);
    if (ret != 1) {
        long v = SSL_get_verify_result(c->ssl);
        if (v != X509_V_OK) {
            set_err(c, "TLS: certificate verification failed: %s", X509_verify_cert_error_string(v));
            ERR_clear_error();
        } else {
            set_ssl_err(c, "TLS handshake", ret);
        }
        return -1;
    }
    return 0;
}

struct syncconn *syncconn_open(const struct instance_conf *ic, int timeout_ms, char *err, size_t errlen)
{
    return syncconn_open_stoppable(ic, timeout_ms, NULL, err, errlen);
}

struct syncconn *syncconn_open_stoppable(const struct instance_conf *ic, int timeout_ms, struct syncconn_stop *st,
                                         char *err, size_t errlen)
{
    return syncconn_open_node(ic, ic->host, ic->port, timeout_ms, st, err, errlen);
}

/* syncconn_open_node with its reads and writes (the TLS handshake and AUTH included) bounded by
 * io_ms (0: as syncconn_open_node). */
static struct syncconn *open_node(const struct instance_conf *ic, const char *host, int port, int timeout_ms, int io_ms,
                                  struct syncconn_stop *st, char *err, size_t errlen)
{
    struct syncconn *c = xcalloc(1, sizeof(*c));
    c->fd = -1;
    c->reader = redisReaderCreate();
    resp_scanner_reset(&c->scan);
    if (!c->reader) oom_abort(sizeof(redisReader)); /* it fails only for memory */
    int rc = 0;
    if (st) {
        pthread_mutex_lock(&st->lock);
        if (st->tripped) {
            set_err(c, "stopping");
            rc = -1;
        } else {
            c->stop = st;
            c->stop_next = st->conns;
            st->conns = c;
        }
        pthread_mutex_unlock(&st->lock);
    }
    if (rc == 0) rc = tcp_connect(c, host, port, timeout_ms > 0 ? timeout_ms : 2000, io_ms);
    if (rc == 0 && st) {
        /* a trip while connecting may not reach the socket (shutdown(2) of an unconnected one does
         * nothing): look again before the blocking handshake; a later trip shuts it down */
        pthread_mutex_lock(&st->lock);
        if (st->tripped) {
            set_err(c, "stopping");
            rc = -1;
        }
        pthread_mutex_unlock(&st->lock);
    }
    if (rc == 0 && ic->tls) rc = tls_handshake(c, ic, host);
    if (rc == 0 && ic->password) {
        /* AUTH password, or AUTH user password */
        const char *argv[3] = {"AUTH", ic->username ? ic->username : ic->password, ic->password};
        size_t argvlen[3] = {4, strlen(argv[1]), strlen(argv[2])};
        redisReply *r = syncconn_command(c, ic->username ? 3 : 2, argv, argvlen);
        if (!r) {
            rc = -1;
        } else if (r->type == REDIS_REPLY_ERROR) {
            set_err(c, "AUTH refused: %s", r->str);
            rc = -1;
        }
        freeReplyObject(r);
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s", c->err);
        syncconn_close(c);
        return NULL;
    }
    return c;
}

struct syncconn *syncconn_open_node(const struct instance_conf *ic, const char *host, int port, int timeout_ms,
                                    struct syncconn_stop *st, char *err, size_t errlen)
{
    return open_node(ic, host, port, timeout_ms, 0, st, err, errlen);
}

void syncconn_reply_encode(const redisReply *r, struct bytebuf *out)
{
    char head[48];
    int n;
    switch (r->type) {
    case REDIS_REPLY_STRING:
        bytebuf_add_bulk(out, r->str, r->len);
        return;
    case REDIS_REPLY_ARRAY:
        n = snprintf(head, sizeof(head), "*%zu\r\n", r->elements);
        bytebuf_add(out, head, (size_t)n);
        for (size_t i = 0; i < r->elements; i++) syncconn_reply_encode(r->element[i], out);
        return;
    case REDIS_REPLY_INTEGER:
        n = snprintf(head, sizeof(head), ":%lld\r\n", r->integer);
        bytebuf_add(out, head, (size_t)n);
        return;
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        bytebuf_add(out, r->type == REDIS_REPLY_STATUS ? "+" : "-", 1);
        bytebuf_add(out, r->str, r->len);
        bytebuf_add(out, STR_AND_LEN("\r\n"));
        return;
    default: /* REDIS_REPLY_NIL */
        bytebuf_add(out, STR_AND_LEN("$-1\r\n"));
        return;
    }
}

int syncconn_primaries_from_slots(const redisReply *r, const char *asked_host, struct slotmap_node *out, int max,
                                  char *err, size_t errlen)
{
    struct bytebuf raw = {0};
    syncconn_reply_encode(r, &raw);
    struct slotmap *m = xmalloc(sizeof(*m));
    int n = -1;
    if (slotmap_parse_slots(m, raw.p, raw.len, asked_host, err, errlen) == 0) {
        unsigned char owns[SLOTMAP_MAX_NODES] = {0};
        for (unsigned slot = 0; slot < SLOTMAP_SLOTS; slot++) {
            int o = slotmap_owner(m, slot);
            if (o >= 0) owns[o] = 1;
        }
        n = 0;
        for (int i = 0; i < m->nnodes && n < max; i++)
            if (owns[i]) out[n++] = m->nodes[i];
        if (n == 0) {
            snprintf(err, errlen, "CLUSTER SLOTS: no slot is served");
            n = -1;
        }
    }
    free(m);
    bytebuf_free(&raw);
    return n;
}

struct syncconn *syncconn_open_sentinel(const struct instance_conf *ic, int i, int timeout_ms, int io_ms,
                                        struct syncconn_stop *st, char *err, size_t errlen)
{
    assert(ic->sentinel && i >= 0 && i < ic->nseeds);
    struct instance_conf sc = *ic; /* the data nodes' options but for TLS and AUTH */
    sc.tls = ic->sentinel_tls;
    sc.password = ic->sentinel_password;
    sc.username = NULL;
    if (!sc.tls) sc.ca = sc.cert = sc.key = sc.server_name = NULL;
    return open_node(&sc, ic->seed_host[i], ic->seed_port[i], timeout_ms, io_ms, st, err, errlen);
}

/* One command's reply on c as RESP2 bytes into out; 0, or -1 with why. */
static int command_bytes(struct syncconn *c, int argc, const char **argv, struct bytebuf *out, char *why, size_t len)
{
    size_t argvlen[4];
    assert(argc <= 4);
    for (int k = 0; k < argc; k++) argvlen[k] = strlen(argv[k]);
    redisReply *r = syncconn_command(c, argc, argv, argvlen);
    if (!r) {
        snprintf(why, len, "%s: %.150s", argv[0], syncconn_error(c));
        return -1;
    }
    syncconn_reply_encode(r, out);
    freeReplyObject(r);
    return 0;
}

/* Does the node at a answer ROLE as a primary? 0, or -1 with why. */
static int node_is_primary(const struct instance_conf *ic, const struct sentinel_addr *a, int timeout_ms,
                           struct syncconn_stop *st, char *why, size_t len)
{
    char e[200];
    struct syncconn *c = open_node(ic, a->host, a->port, timeout_ms, timeout_ms, st, e, sizeof(e));
    if (!c) {
        snprintf(why, len, "its primary %s:%d: %s", a->host, a->port, e);
        return -1;
    }
    struct bytebuf b = {0};
    const char *argv[1] = {"ROLE"};
    struct sentinel_role role;
    int rc = command_bytes(c, 1, argv, &b, e, sizeof(e));
    if (rc == 0) rc = sentinel_parse_role(b.p, b.len, &role, e, sizeof(e));
    if (rc == 0 && role.kind != SENTINEL_ROLE_PRIMARY) {
        snprintf(e, sizeof(e), "ROLE says it is not a primary");
        rc = -1;
    }
    if (rc != 0) snprintf(why, len, "its primary %s:%d: %s", a->host, a->port, e);
    bytebuf_free(&b);
    syncconn_close(c);
    return rc;
}

/* One sentinel asked SENTINEL MASTER, on a thread of its own (syncconn_sentinel_primary). */
struct sentinel_query {
    const struct instance_conf *ic;
    int i, timeout_ms;
    struct syncconn_stop *st;
    int rc; /* 1: it answered (m), 0: it monitors no such master, -1: unreachable or bad (why) */
    struct sentinel_master m;
    char why[800];
    pthread_t thread;
    int started;
};

static void *sentinel_query_run(void *arg)
{
    struct sentinel_query *q = arg;
    q->rc = -1;
    struct syncconn *c =
        syncconn_open_sentinel(q->ic, q->i, q->timeout_ms, q->timeout_ms, q->st, q->why, sizeof(q->why));
    if (!c) return NULL;
    struct bytebuf b = {0};
    const char *argv[3] = {"SENTINEL", "MASTER", q->ic->master_name};
    if (command_bytes(c, 3, argv, &b, q->why, sizeof(q->why)) == 0) {
        q->rc = sentinel_parse_master(b.p, b.len, &q->m, q->why, sizeof(q->why));
        if (q->rc == 0) snprintf(q->why, sizeof(q->why), "it monitors no master named '%s'", q->ic->master_name);
    }
    bytebuf_free(&b);
    syncconn_close(c);
    return NULL;
}

int syncconn_sentinel_primary(const struct instance_conf *ic, int timeout_ms, struct syncconn_stop *st,
                              const struct slotmap_node *not_this, long long *epoch, struct slotmap_node *out,
                              int *asked, struct sentinel_master *chosen, char *err, size_t errlen)
{
    snprintf(err, errlen, "no sentinel");
    /* every sentinel at once: a frozen one costs timeout_ms, not timeout_ms per sentinel after it */
    struct sentinel_query q[CONFIG_MAX_SEEDS];
    int n = ic->nseeds < CONFIG_MAX_SEEDS ? ic->nseeds : CONFIG_MAX_SEEDS;
    for (int i = 0; i < n; i++) {
        q[i] = (struct sentinel_query){.ic = ic, .i = i, .timeout_ms = timeout_ms, .st = st, .rc = -1};
        q[i].started = pthread_create(&q[i].thread, NULL, sentinel_query_run, &q[i]) == 0;
        if (!q[i].started) sentinel_query_run(&q[i]);
    }
    struct sentinel_master answers[CONFIG_MAX_SEEDS];
    int from[CONFIG_MAX_SEEDS], na = 0;
    for (int i = 0; i < n; i++) {
        if (q[i].started) pthread_join(q[i].thread, NULL);
        if (q[i].rc == 1) {
            answers[na] = q[i].m;
            from[na++] = i;
        } else {
            snprintf(err, errlen, "sentinel %s:%d: %s", ic->seed_host[i], ic->seed_port[i], q[i].why);
        }
    }
    if (na == 0) return -1;
    int k = sentinel_pick(answers, na, epoch ? *epoch : -1, ic->nseeds);
    if (k < 0) {
        snprintf(err, errlen,
                 "the sentinels that answer are behind the configuration followed (config-epoch %lld): sentinel "
                 "%s:%d names %s:%d at epoch %lld",
                 epoch ? *epoch : -1LL, ic->seed_host[from[0]], ic->seed_port[from[0]], answers[0].addr.host,
                 answers[0].addr.port, answers[0].config_epoch);
        return -2;
    }
    const struct sentinel_addr *a = &answers[k].addr;
    char why[800];
    int rc;
    if (not_this && not_this->port == a->port && strcmp(not_this->host, a->host) == 0) {
        snprintf(why, sizeof(why), "it still names %s:%d, which is down or being replaced", a->host, a->port);
        rc = -1;
    } else {
        rc = node_is_primary(ic, a, timeout_ms, st, why, sizeof(why));
    }
    if (rc != 0) {
        snprintf(err, errlen, "sentinel %s:%d: %s", ic->seed_host[from[k]], ic->seed_port[from[k]], why);
        return -2;
    }
    snprintf(out->host, sizeof(out->host), "%s", a->host);
    out->port = a->port;
    if (epoch) *epoch = answers[k].config_epoch;
    if (asked) *asked = from[k];
    if (chosen) *chosen = answers[k];
    return 0;
}

int syncconn_sentinel_replicas(const struct instance_conf *ic, int timeout_ms, struct syncconn_stop *st,
                               struct slotmap_node *out, int max, char *err, size_t errlen)
{
    snprintf(err, errlen, "no sentinel");
    enum { MAX_LISTED = 64 };
    struct sentinel_replica *listed = xmalloc(MAX_LISTED * sizeof(*listed));
    int n = -1;
    for (int i = 0; i < ic->nseeds && n < 0; i++) {
        char why[400];
        struct syncconn *c = syncconn_open_sentinel(ic, i, timeout_ms, timeout_ms, st, why, sizeof(why));
        if (c) {
            struct bytebuf b = {0};
            const char *argv[3] = {"SENTINEL", "REPLICAS", ic->master_name};
            int count = 0;
            if (command_bytes(c, 3, argv, &b, why, sizeof(why)) == 0 &&
                sentinel_parse_replicas(b.p, b.len, listed, MAX_LISTED, &count, why, sizeof(why)) == 0)
                n = count < MAX_LISTED ? count : MAX_LISTED;
            bytebuf_free(&b);
            syncconn_close(c);
        }
        if (n < 0) snprintf(err, errlen, "sentinel %s:%d: %s", ic->seed_host[i], ic->seed_port[i], why);
    }
    if (n > max) n = max;
    for (int k = 0; k < n; k++) {
        snprintf(out[k].host, sizeof(out[k].host), "%s", listed[k].addr.host);
        out[k].port = listed[k].addr.port;
    }
    free(listed);
    return n;
}

int syncconn_primaries(const struct instance_conf *ic, int timeout_ms, struct syncconn_stop *st,
                       struct slotmap_node *out, int max, char *err, size_t errlen)
{
    if (ic->sentinel) {
        if (max < 1) return 0;
        out[0].port = 0;
        return syncconn_sentinel_primary(ic, timeout_ms, st, NULL, NULL, &out[0], NULL, NULL, err, errlen) == 0 ? 1
                                                                                                                : -1;
    }
    if (!ic->cluster) {
        if (max < 1) return 0;
        snprintf(out[0].host, sizeof(out[0].host), "%s", ic->host);
        out[0].port = ic->port;
        return 1;
    }
    int n = -1;
    snprintf(err, errlen, "no seed node");
    for (int i = 0; i < ic->nseeds && n < 0; i++) {
        char why[300];
        struct syncconn *c =
            syncconn_open_node(ic, ic->seed_host[i], ic->seed_port[i], timeout_ms, st, why, sizeof(why));
        if (c) {
            const char *argv[2] = {"CLUSTER", "SLOTS"};
            size_t argvlen[2] = {7, 5};
            redisReply *r = syncconn_command(c, 2, argv, argvlen);
            if (!r)
                snprintf(why, sizeof(why), "CLUSTER SLOTS: %s", syncconn_error(c));
            else
                n = syncconn_primaries_from_slots(r, ic->seed_host[i], out, max, why, sizeof(why));
            if (r) freeReplyObject(r);
            syncconn_close(c);
        }
        if (n < 0)
            snprintf(err, errlen, "no seed gave the slot map (seed %s:%d: %s)", ic->seed_host[i], ic->seed_port[i],
                     why);
    }
    return n;
}

int syncconn_append(struct syncconn *c, int argc, const char **argv, const size_t *argvlen)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
    if (len < 0) oom_abort(0); /* hiredis fails here only for memory */
    if (c->outlen + (size_t)len > c->outcap) {
        size_t cap = c->outcap ? c->outcap : 4096;
        while (cap < c->outlen + (size_t)len) cap *= 2;
        c->out = xrealloc(c->out, cap);
        c->outcap = cap;
    }
    memcpy(c->out + c->outlen, cmd, (size_t)len);
    c->outlen += (size_t)len;
    free(cmd);
    return 0;
}

int syncconn_flush(struct syncconn *c)
{
    size_t off = 0;
    while (off < c->outlen) {
        ssize_t n;
        errno = 0;
        if (c->ssl) {
            ERR_clear_error();
            int want = c->outlen - off > (size_t)1 << 30 ? 1 << 30 : (int)(c->outlen - off);
            int r = SSL_write(c->ssl, c->out + off, want);
            if (r <= 0 && ssl_interrupted(c, r)) continue;
            if (r <= 0) {
                set_ssl_err(c, "write", r);
                return -1;
            }
            n = r;
        } else {
            n = send(c->fd, c->out + off, c->outlen - off, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                set_err(c, "write: %s", errno == EAGAIN ? "timed out" : strerror(errno));
                return -1;
            }
        }
        off += (size_t)n;
    }
    c->outlen = 0;
    return 0;
}

/* Read what the socket has (at least one byte, blocking) into buf: its count, or -1 (c->err). */
static ssize_t read_some(struct syncconn *c, char *buf, size_t size)
{
    for (;;) {
        errno = 0;
        if (c->ssl) {
            ERR_clear_error();
            int r = SSL_read(c->ssl, buf, (int)size);
            if (r <= 0 && ssl_interrupted(c, r)) continue;
            if (r <= 0) {
                set_ssl_err(c, "read", r);
                return -1;
            }
            return r;
        }
        ssize_t n = recv(c->fd, buf, size, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) {
            set_err(c, "read: connection closed by the server");
            return -1;
        }
        if (n < 0) {
            set_err(c, "read: %s", errno == EAGAIN ? "timed out" : strerror(errno));
            return -1;
        }
        return n;
    }
}

int syncconn_read_raw(struct syncconn *c, const char **frame, size_t *len)
{
    if (c->raw_off == c->raw.len) c->raw.len = c->raw_off = 0; /* everything handed out: start over */
    for (;;) {
        if (c->raw_off < c->raw.len) {
            long long n = resp_scan_reply(&c->scan, c->raw.p + c->raw_off, c->raw.len - c->raw_off);
            if (n < 0) {
                set_err(c, "protocol error: not RESP");
                return -1;
            }
            if (n > 0) {
                *frame = c->raw.p + c->raw_off;
                *len = (size_t)n;
                c->raw_off += (size_t)n;
                return 1;
            }
        }
        char buf[READ_CHUNK_BYTES];
        ssize_t n = read_some(c, buf, sizeof(buf));
        if (n < 0) return -1;
        bytebuf_add(&c->raw, buf, (size_t)n);
    }
}

redisReply *syncconn_read(struct syncconn *c)
{
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
            set_err(c, "protocol error: %s", c->reader->errstr);
            return NULL;
        }
        if (reply) return reply;
        char buf[READ_CHUNK_BYTES];
        ssize_t n;
        errno = 0;
        if (c->ssl) {
            ERR_clear_error();
            int r = SSL_read(c->ssl, buf, (int)sizeof(buf));
            if (r <= 0 && ssl_interrupted(c, r)) continue;
            if (r <= 0) {
                set_ssl_err(c, "read", r);
                return NULL;
            }
            n = r;
        } else {
            n = recv(c->fd, buf, sizeof(buf), 0);
            if (n < 0 && errno == EINTR) continue;
            if (n == 0) {
                set_err(c, "read: connection closed by the server");
                return NULL;
            }
            if (n < 0) {
                set_err(c, "read: %s", errno == EAGAIN ? "timed out" : strerror(errno));
                return NULL;
            }
        }
        if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK) {
            set_err(c, "protocol error: %s", c->reader->errstr);
            return NULL;
        }
    }
}

int syncconn_fd(const struct syncconn *c)
{
    return c->fd;
}

int syncconn_wait(struct syncconn *c, int timeout_ms)
{
    if (c->reader->pos < c->reader->len || c->raw_off < c->raw.len) return 1; /* bytes not parsed yet */
    if (c->ssl && SSL_pending(c->ssl) > 0) return 1;
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    int n;
    do {
        n = poll(&pfd, 1, timeout_ms);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        set_err(c, "poll: %s", strerror(errno));
        return -1;
    }
    return n > 0;
}

redisReply *syncconn_command(struct syncconn *c, int argc, const char **argv, const size_t *argvlen)
{
    if (syncconn_append(c, argc, argv, argvlen) != 0 || syncconn_flush(c) != 0) return NULL;
    return syncconn_read(c);
}

const char *syncconn_error(const struct syncconn *c)
{
    return c->err;
}

void syncconn_close(struct syncconn *c)
{
    if (!c) return;
    if (c->ssl) {
        SSL_shutdown(c->ssl);
        SSL_free(c->ssl);
    }
    if (c->ctx) SSL_CTX_free(c->ctx);
    set_fd(c, -1);
    if (c->stop) { /* off the stop's list */
        pthread_mutex_lock(&c->stop->lock);
        struct syncconn **p = &c->stop->conns;
        while (*p != c) p = &(*p)->stop_next;
        *p = c->stop_next;
        pthread_mutex_unlock(&c->stop->lock);
    }
    if (c->reader) redisReaderFree(c->reader);
    free(c->out);
    bytebuf_free(&c->raw);
    free(c);
}
