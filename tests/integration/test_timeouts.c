/* test_timeouts.c: integration tests of keygate's timeouts: idle clients, slow or unauthenticated clients, frozen backends, reconnect jitter. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/*
 * One harness (two TLS redis-servers + keygate, the repo's conf/registry.conf) with the
 * user `root` and every timeout short: client-timeout 1s, client-header-timeout 1s,
 * backend-timeout 1s. Registry facts used: q: durable ttl=none, cache: cache ttl=1h,
 * channel push: on cache.
 */

#define ROOT_PW "timeouts-root-pw"
#define TIMEOUTS "client-timeout 1s\nclient-header-timeout 1s\nbackend-timeout 1s\n"

static struct harness h;
static char extra[512];

static void setup(void)
{
    char hash[65];
    harness_sha256_hex(ROOT_PW, hash);
    snprintf(extra, sizeof extra, "user root sha256=%s owners=* access=rw scripts=yes\n" TIMEOUTS, hash);
    struct harness_opts o = {.extra_config = extra};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h);
    harness_stop(&h);
}

static redisContext *login(void)
{
    struct timeval tv = {10, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", h.port, tv);
    ck_assert_msg(c != NULL && !c->err, "connect to keygate: %s", c ? c->errstr : "no memory");
    redisSetTimeout(c, tv);
    expect_status(cmd(c, "AUTH root %s", ROOT_PW), "OK", "AUTH root");
    return c;
}

/* A plain socket to keygate. */
static int raw_connect(void)
{
    return harness_tcp_connect(h.port);
}

/* Wait up to ms for fd to be closed by keygate (EOF); returns the ms it took, or -1. */
static long long wait_eof(int fd, int ms)
{
    long long start = now_ms();
    char buf[256];
    while (now_ms() - start < ms) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) return now_ms() - start;
    }
    return -1;
}

static long long stat_of(const char *name)
{
    redisContext *c = login();
    redisReply *r = cmd(c, "INFO stats");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    char key[64];
    snprintf(key, sizeof key, "%s:", name);
    const char *p = strstr(r->str, key);
    ck_assert_msg(p != NULL, "INFO stats has no %s", name);
    long long v = atoll(p + strlen(key));
    freeReplyObject(r);
    redisFree(c);
    return v;
}

/* Send all of s on fd. */
static void send_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, s, n);
        ck_assert_msg(k > 0, "write: %s", strerror(errno));
        s += k;
        n -= (size_t)k;
    }
}

/* AUTH root on a raw socket, reading its +OK. */
static void raw_auth(int fd)
{
    char auth[128], buf[64];
    int n = snprintf(auth, sizeof auth, "*3\r\n$4\r\nAUTH\r\n$4\r\nroot\r\n$%zu\r\n%s\r\n", strlen(ROOT_PW), ROOT_PW);
    send_all(fd, auth, (size_t)n);
    ssize_t k = read(fd, buf, sizeof buf - 1);
    ck_assert_msg(k >= 5 && memcmp(buf, "+OK\r\n", 5) == 0, "AUTH on a raw socket: %zd bytes", k);
}

/* ---- client-timeout ---- */

START_TEST(test_idle_client_is_closed_after_client_timeout)
{
    long long before = stat_of("clients_timed_out");
    redisContext *idle = login(), *busy = login();
    /* busy keeps talking for 2 s: never idle for 1 s */
    for (int i = 0; i < 8; i++) {
        expect_status(cmd(busy, "PING"), "PONG", "PING from a busy client");
        sleep_ms(250); /* the scenario, not a wait: a PING every 250 ms for 2 s */
    }
    /* idle said nothing for 2 s: closed */
    redisReply *r = redisCommand(idle, "PING");
    ck_assert_msg(r == NULL && idle->err, "an idle client was not closed after client-timeout 1s: %s",
                  r ? describe(r) : "");
    expect_status(cmd(busy, "PING"), "PONG", "PING from the busy client after 2 s");
    ck_assert_msg(stat_of("clients_timed_out") > before, "clients_timed_out did not count it");
    char *log = harness_keygate_log(&h);
    ck_assert_msg(log && strstr(log, "idle past client-timeout"), "no log line for the idle client");
    free(log);
    redisFree(idle);
    redisFree(busy);
}
END_TEST

START_TEST(test_blocked_and_subscribed_clients_are_spared)
{
    redisContext *blocked = login(), *sub = login();
    expect_array(cmd(sub, "SUBSCRIBE push:t:ch"), "SUBSCRIBE", 3, "subscribe", "push:t:ch", ":1");
    /* a blocking command waits 2.5 s on durable: longer than client-timeout and backend-timeout */
    long long t0 = now_ms();
    expect_nil(cmd(blocked, "BLPOP q:t:never 2.5"), "BLPOP that times out by itself");
    long long took = now_ms() - t0;
    ck_assert_msg(took >= 2400, "BLPOP answered after %lld ms: cut short by a timeout", took);
    expect_status(cmd(blocked, "PING"), "PONG", "the blocked client is still open");
    /* the subscriber was quiet for 2.5 s: still subscribed, and hears */
    redisContext *pub = login();
    expect_int(cmd(pub, "PUBLISH push:t:ch hello"), 1, "PUBLISH to the quiet subscriber");
    expect_array(next_reply(sub), "message after 2.5 s of silence", 3, "message", "push:t:ch", "hello");
    redisFree(blocked);
    redisFree(sub);
    redisFree(pub);
}
END_TEST

/* ---- client-header-timeout ---- */

START_TEST(test_unauthenticated_client_is_closed_after_header_timeout)
{
    int fd = raw_connect();
    long long took = wait_eof(fd, 3000);
    ck_assert_msg(took >= 900 && took < 2500, "a client that never AUTHs was closed after %lld ms (want ~1 s)", took);
    close(fd);
    /* one that AUTHs in time stays */
    fd = raw_connect();
    raw_auth(fd);
    ck_assert_msg(wait_eof(fd, 600) < 0, "an authenticated client was closed within 0.6 s");
    close(fd);
}
END_TEST

START_TEST(test_slowloris_is_closed_but_a_moving_upload_is_not)
{
    /* one byte every 300 ms of an unfinished PING: closed about 1 s after it began */
    int fd = raw_connect();
    raw_auth(fd);
    const char *drip = "*1\r\n$4\r\nPING\r\n";
    long long start = now_ms(), closed_at = -1;
    for (size_t i = 0; i + 1 < strlen(drip) && closed_at < 0; i++) {
        send(fd, drip + i, 1, MSG_NOSIGNAL);
        long long t = wait_eof(fd, 300);
        if (t >= 0) closed_at = now_ms() - start;
    }
    ck_assert_msg(closed_at >= 900 && closed_at < 2500, "a slowloris was closed after %lld ms (want ~1 s)", closed_at);
    close(fd);

    /* a 2 MiB SET sent in 64 KiB pieces every 60 ms (~1 MiB/s, ~1.9 s in all): answered */
    enum { SIZE = 2 * 1024 * 1024, PIECE = 64 * 1024 };
    char *frame = malloc(SIZE + 128);
    ck_assert_ptr_nonnull(frame);
    int hdr = snprintf(frame, 128, "*3\r\n$3\r\nSET\r\n$12\r\ncache:t:big1\r\n$%d\r\n", SIZE);
    memset(frame + hdr, 'v', SIZE);
    memcpy(frame + hdr + SIZE, "\r\n", 2);
    size_t total = (size_t)hdr + SIZE + 2;
    fd = raw_connect();
    raw_auth(fd);
    start = now_ms();
    for (size_t off = 0; off < total; off += PIECE) {
        size_t n = total - off < PIECE ? total - off : PIECE;
        ssize_t k = send(fd, frame + off, n, MSG_NOSIGNAL);
        ck_assert_msg(k == (ssize_t)n, "the upload was cut after %zu bytes, %lld ms: %s", off, now_ms() - start,
                      strerror(errno));
        sleep_ms(60); /* the scenario, not a wait: the upload's pace */
    }
    free(frame);
    char buf[16] = "";
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t k = read(fd, buf, sizeof buf - 1);
    ck_assert_msg(k >= 5 && memcmp(buf, "+OK\r\n", 5) == 0, "a moving 2 MiB upload (%lld ms) got %zd bytes: '%s'",
                  now_ms() - start, k, buf);
    close(fd);
    redisContext *d = harness_must_direct(&h, "cache");
    expect_int(cmd(d, "STRLEN cache:t:big1"), SIZE, "the uploaded value on cache");
    expect_int(cmd(d, "DEL cache:t:big1"), 1, "DEL");
    redisFree(d);
}
END_TEST

START_TEST(test_stalled_tls_handshake_is_closed_after_header_timeout)
{
    /* no users (so no AUTH deadline): a TLS client that never finishes its handshake is
     * closed by client-header-timeout; one that finished it and idles is not */
    int port = harness_free_port();
    char conf[2 * PATH_MAX + 256];
    snprintf(conf, sizeof conf,
             "client-header-timeout 1s\nlisten 127.0.0.1:%d tls cert=%s/build/certs/server.crt "
             "key=%s/build/certs/server.key\n",
             port, h.root, h.root);
    struct harness_opts o = {.extra_config = conf};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart with a TLS listener: %s", h.error);
    int silent = harness_tcp_connect(port); /* TCP up, no ClientHello */
    int partial = harness_tcp_connect(port);
    send_all(partial, "\x16\x03\x01", 3); /* the first bytes of a TLS record, then nothing */

    SSL *ssl = harness_tls_client(&h, port, NULL);

    long long took = wait_eof(silent, 4000), took_partial = wait_eof(partial, 4000);
    ck_assert_msg(took >= 700 && took < 2600, "a TLS client that sent nothing was closed after %lld ms (want ~1 s)",
                  took);
    ck_assert_msg(took_partial >= 0 && took_partial < 2600,
                  "a TLS client stuck in its ClientHello was closed after %lld ms (want ~1 s)", took_partial);
    /* the finished handshake stayed: it is served (2 s and more after connecting) */
    ck_assert_int_eq(SSL_write(ssl, "*1\r\n$4\r\nPING\r\n", 14), 14);
    char buf[16] = "";
    int n = SSL_read(ssl, buf, sizeof buf - 1);
    ck_assert_msg(n >= 7 && memcmp(buf, "+PONG\r\n", 7) == 0, "PING on the finished TLS connection: %d bytes", n);
    harness_tls_close(ssl);
    close(silent);
    close(partial);
    char *log = harness_keygate_log(&h);
    ck_assert_msg(log && strstr(log, "TLS handshake unfinished within client-header-timeout"),
                  "keygate's log does not say why the TLS clients were closed");
    free(log);
}
END_TEST

/* Kill cache and listen on its port (the kernel frees it with the process's last thread:
 * bind is retried for 5 s); the listening socket, which accepts and never speaks. */
static int cache_port_taken_over(int port)
{
    ck_assert_int_eq(harness_backend_kill(&h, "cache"), 0);
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int bound = -1;
    for (long long until = now_ms() + 5000; bound != 0 && now_ms() < until; sleep_ms(20))
        bound = bind(lfd, (struct sockaddr *)&sa, sizeof sa);
    ck_assert_msg(bound == 0 && listen(lfd, 64) == 0, "listen on cache's port %d: %s", port, strerror(errno));
    return lfd;
}

/* ---- backend-timeout ---- */

START_TEST(test_frozen_backend_times_out_and_comes_back)
{
    long long before = stat_of("backend_timeouts");
    redisContext *c = login();
    pid_t durable = harness_backend(&h, "durable")->pid;
    ck_assert_int_eq(kill(durable, SIGSTOP), 0);
    long long t0 = now_ms();
    redisReply *r = cmd(c, "SET q:t:frozen 1");
    long long took = now_ms() - t0;
    kill(durable, SIGCONT);
    expect_error(r, "UNAVAILABLE instance 'durable' timed out (the command may have run)", "SET to a frozen durable");
    ck_assert_msg(took >= 900 && took < 2600, "the frozen backend's request failed after %lld ms (want ~1 s)", took);
    /* the connection was closed and reconnects: the next request is served */
    for (long long deadline = now_ms() + 5000;; sleep_ms(100)) {
        r = cmd(c, "SET q:t:frozen 2");
        if (r->type == REDIS_REPLY_STATUS || now_ms() > deadline) break;
        freeReplyObject(r);
    }
    expect_status(r, "OK", "SET after the backend resumed");
    ck_assert_msg(stat_of("backend_timeouts") > before, "backend_timeouts did not count it");
    /* a blocking command on a frozen backend waits its own timeout more: BLPOP 1 fails after ~2 s */
    redisContext *b = login();
    /* a dedicated connection to durable made while it answers (back in the pool after the
     * timeout): the frozen BLPOP then waits on a connection, not on a connect */
    r = cmd(b, "BLPOP q:t:frozen-list 0.01");
    ck_assert_msg(r->type == REDIS_REPLY_NIL, "BLPOP 0.01 before the freeze: %s", describe(r));
    freeReplyObject(r);
    ck_assert_int_eq(kill(durable, SIGSTOP), 0);
    t0 = now_ms();
    r = cmd(b, "BLPOP q:t:frozen-list 1");
    took = now_ms() - t0;
    kill(durable, SIGCONT);
    expect_error(r, "UNAVAILABLE instance 'durable' timed out", "BLPOP 1 on a frozen durable");
    ck_assert_msg(took >= 1900 && took < 3600, "BLPOP 1 on a frozen backend failed after %lld ms (want ~2 s)", took);
    redisFree(b);
    /* the command may have run (Redis had it in its socket): it did, and the second one too */
    redisContext *direct = harness_must_direct(&h, "durable");
    expect_bulk(cmd(direct, "GET q:t:frozen"), "2", "the key on durable");
    expect_int(cmd(direct, "DEL q:t:frozen"), 1, "DEL");
    redisFree(direct);
    redisFree(c);
}
END_TEST

/* ---- connect-timeout: a port that accepts TCP and never answers TLS ---- */

START_TEST(test_tls_handshake_to_a_silent_port_is_bounded_by_connect_timeout)
{
    /* cache's port taken by a listener that accepts and never speaks: every connection
     * keygate opens must be given up after connect-timeout (1 s here), a client's request
     * to cache must be answered -UNAVAILABLE meanwhile, not left waiting */
    char more[1024];
    snprintf(more, sizeof more, "%sconnect-timeout 1s\n", extra);
    struct harness_opts o = {.extra_config = more};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart with connect-timeout 1s: %s", h.error);
    int port = h.backends[1].tls_port;
    int lfd = cache_port_taken_over(port);

    /* accept keygate's attempts for 4 s, keep each open and time how long keygate holds it */
    enum { MAX_HELD = 64 };
    int fds[MAX_HELD];
    long long opened[MAX_HELD], held[MAX_HELD];
    int n = 0, closed = 0;
    redisContext *c = login();
    long long t0 = now_ms();
    ck_assert_int_eq(redisAppendCommand(c, "GET cache:t:tarpit"), REDIS_OK);
    int dummy;
    ck_assert_int_eq(redisBufferWrite(c, &dummy), REDIS_OK);
    long long answered = -1;
    redisReply *r = NULL;
    for (long long end = now_ms() + 4000; now_ms() < end;) {
        struct pollfd p[MAX_HELD + 2];
        int np = 0;
        p[np++] = (struct pollfd){.fd = lfd, .events = POLLIN};
        p[np++] = (struct pollfd){.fd = c->fd, .events = answered < 0 ? POLLIN : 0};
        for (int i = 0; i < n; i++) p[np++] = (struct pollfd){.fd = fds[i], .events = fds[i] >= 0 ? POLLIN : 0};
        if (poll(p, (nfds_t)np, 20) <= 0) continue;
        if ((p[0].revents & POLLIN) && n < MAX_HELD) {
            int cfd = accept(lfd, NULL, NULL);
            if (cfd >= 0) {
                fds[n] = cfd;
                opened[n] = now_ms();
                held[n++] = -1;
            }
        }
        if (answered < 0 && (p[1].revents & (POLLIN | POLLHUP))) {
            ck_assert_int_eq(redisBufferRead(c), REDIS_OK);
            void *reply = NULL;
            ck_assert_int_eq(redisGetReplyFromReader(c, &reply), REDIS_OK);
            if (reply) {
                r = reply;
                answered = now_ms() - t0;
            }
        }
        for (int i = 0; i + 2 < np && i < n; i++) {
            if (fds[i] < 0 || !(p[i + 2].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[4096];
            ssize_t k = read(fds[i], buf, sizeof buf); /* the TLS ClientHello, then EOF */
            if (k > 0) continue;
            held[i] = now_ms() - opened[i];
            close(fds[i]);
            fds[i] = -1;
            closed++;
        }
    }
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) close(fds[i]);
    close(lfd);
    char *log = harness_keygate_log(&h);
    int logged = log && strstr(log, "TLS handshake timed out") != NULL;
    free(log);
    ck_assert_msg(harness_backend_restart(&h, "cache") == 0, "restarting cache: %s", h.error);

    ck_assert_msg(n >= 1, "keygate never connected to the silent port");
    ck_assert_msg(closed >= 1, "keygate held all %d connections to the silent port for 4 s", n);
    for (int i = 0; i < n; i++)
        if (held[i] >= 0)
            ck_assert_msg(held[i] >= 800 && held[i] < 2500,
                          "connection %d to the silent port was given up after %lld ms (connect-timeout 1 s)", i,
                          held[i]);
    ck_assert_msg(logged, "keygate's log does not say the TLS handshake timed out");
    ck_assert_msg(answered >= 0 && answered < 2500, "GET to cache answered after %lld ms (want < 2.5 s)", answered);
    expect_error(r, "UNAVAILABLE instance 'cache'", "GET while cache's port never answers TLS");
    redisFree(c);
}
END_TEST

/* ---- shutdown while a backend never answers TLS ---- */

/* The INFO poller talks to each instance on a blocking connection of its own (syncconn); one
 * to a port that accepts and never answers TLS sat in its handshake for syncconn's 10 s I/O
 * timeout, and SIGTERM waited for it, past shutdown-timeout. Stopping must cut it short. */
START_TEST(test_shutdown_is_not_held_by_a_backend_that_never_answers_tls)
{
    char more[1024];
    snprintf(more, sizeof more, "%sbackend-info-interval 1s\nconnect-timeout 1s\n", extra);
    struct harness_opts o = {.extra_config = more};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart with backend-info-interval 1s: %s", h.error);
    int lfd = cache_port_taken_over(h.backends[1].tls_port);
    /* accept keygate's connections until one is held past connect-timeout (1 s): the workers'
     * give up at 1 s, so that one is the poller's blocking handshake */
    enum { MAX_HELD = 64 };
    int fds[MAX_HELD], n = 0, found = 0;
    long long opened[MAX_HELD];
    for (long long end = now_ms() + 8000; !found && now_ms() < end;) {
        struct pollfd p[MAX_HELD + 1];
        p[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (int i = 0; i < n; i++) p[i + 1] = (struct pollfd){.fd = fds[i], .events = fds[i] >= 0 ? POLLIN : 0};
        if (poll(p, (nfds_t)n + 1, 20) > 0) {
            if ((p[0].revents & POLLIN) && n < MAX_HELD) {
                int cfd = accept(lfd, NULL, NULL);
                if (cfd >= 0) {
                    fds[n] = cfd;
                    opened[n++] = now_ms();
                }
            }
            for (int i = 0; i < n; i++) {
                if (fds[i] < 0 || !(p[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                char buf[4096];
                if (read(fds[i], buf, sizeof buf) > 0) continue; /* the ClientHello */
                close(fds[i]);
                fds[i] = -1;
            }
        }
        for (int i = 0; i < n; i++) found |= fds[i] >= 0 && now_ms() - opened[i] > 2000;
    }
    pid_t pid = h.keygate_pid;
    long long t0 = now_ms();
    int sent = found ? kill(pid, SIGTERM) : -1;
    int status = sent == 0 ? harness_wait_exit(pid, 15000) : -1;
    long long took = now_ms() - t0;
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) close(fds[i]);
    close(lfd);
    /* keygate first (cache down is fine for it), then cache, which waits for its connections */
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "starting keygate again: %s", h.error);
    ck_assert_msg(harness_backend_restart(&h, "cache") == 0, "restarting cache: %s", h.error);
    ck_assert_msg(found, "no connection to the silent port was held past connect-timeout (no INFO poller handshake?)");
    ck_assert_msg(sent == 0 && status != -1, "keygate still runs 15 s after SIGTERM");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "keygate ended with wait status %d after SIGTERM",
                  status);
    ck_assert_msg(took < 2000, "keygate took %lld ms to stop while its INFO poller waited on a silent port", took);
}
END_TEST

/* ---- reconnect jitter ---- */

START_TEST(test_connections_do_not_reconnect_in_the_same_millisecond)
{
    /* 2 threads x 4 connections to cache; kill cache and listen on its port: the first
     * attempts of the 8 connections spread over the jitter window, not one millisecond */
    char more[1024], lines[16384];
    const struct harness_backend *d = &h.backends[0], *cb = &h.backends[1];
    snprintf(lines, sizeof lines,
             "instance durable 127.0.0.1:%d tls ca=%s/build/certs/ca.crt cert=%s/build/certs/client.crt "
             "key=%s/build/certs/client.key server-name=localhost password-file=%s\n"
             "instance cache   127.0.0.1:%d tls ca=%s/build/certs/ca.crt server-name=localhost "
             "password-file=%s connections=4\n",
             d->tls_port, h.root, h.root, h.root, d->pass_file, cb->tls_port, h.root, cb->pass_file);
    snprintf(more, sizeof more, "%sthreads 2\n", extra);
    struct harness_opts o = {.extra_config = more, .instances_text = lines};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart with 2x4 cache connections: %s", h.error);
    int port = cb->tls_port;
    int lfd = cache_port_taken_over(port);
    long long at[8];
    int n = 0;
    for (long long end = now_ms() + 1500; n < 8 && now_ms() < end;) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0) continue;
        int cfd = accept(lfd, NULL, NULL);
        if (cfd < 0) continue;
        at[n++] = now_ms();
        close(cfd);
    }
    close(lfd);
    ck_assert_msg(harness_backend_restart(&h, "cache") == 0, "restarting cache: %s", h.error);
    struct harness_opts back = {.extra_config = extra};
    ck_assert_msg(harness_keygate_restart(&h, &back) == 0, "restart: %s", h.error);
    ck_assert_msg(n == 8, "%d of the 8 connections retried within 1.5 s", n);
    long long lo = at[0], hi = at[0];
    for (int i = 1; i < n; i++) {
        if (at[i] < lo) lo = at[i];
        if (at[i] > hi) hi = at[i];
    }
    ck_assert_msg(hi - lo >= 2, "the 8 connections' first retries all came within %lld ms: no jitter", hi - lo);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("timeouts");
    TCase *tc = harness_tcase(s, "timeouts", 60, setup, teardown);
    harness_add_test(tc, test_idle_client_is_closed_after_client_timeout);
    harness_add_test(tc, test_blocked_and_subscribed_clients_are_spared);
    harness_add_test(tc, test_unauthenticated_client_is_closed_after_header_timeout);
    harness_add_test(tc, test_slowloris_is_closed_but_a_moving_upload_is_not);
    harness_add_test(tc, test_stalled_tls_handshake_is_closed_after_header_timeout);
    harness_add_test(tc, test_frozen_backend_times_out_and_comes_back);
    harness_add_test(tc, test_connections_do_not_reconnect_in_the_same_millisecond);
    harness_add_test(tc, test_tls_handshake_to_a_silent_port_is_bounded_by_connect_timeout);
    harness_add_test(tc, test_shutdown_is_not_held_by_a_backend_that_never_answers_tls);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
