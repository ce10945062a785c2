/* test_limits.c: integration tests of keygate's resource limits and edge loads: listeners, deep replies, memory. */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

/*
 * One harness (two TLS redis-servers + keygate, the repo's conf/registry.conf) with one
 * user, `root` (owners=* access=rw scripts=yes); tests that need other limits restart
 * keygate with their own extra lines (harness_keygate_restart) and put the default back.
 * Registry facts used: q: durable ttl=none, cache: cache ttl=1h.
 */

#define ROOT_PW "limits-root-pw"

static struct harness h;
static char root_line[256];

static void sha256_hex(const char *s, char out[65]) {
    unsigned char d[32];
    unsigned int n = 0;
    ck_assert(EVP_Digest(s, strlen(s), d, &n, EVP_sha256(), NULL));
    for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

/* keygate.conf's extra lines: the root user plus `more` (may be ""). */
static const char *extra_with(const char *more) {
    static char buf[16384];
    snprintf(buf, sizeof buf, "%s%s", root_line, more);
    return buf;
}

static void setup(void) {
    char hash[65];
    sha256_hex(ROOT_PW, hash);
    snprintf(root_line, sizeof root_line, "user root sha256=%s owners=* access=rw scripts=yes\n", hash);
    struct harness_opts o = {.extra_config = extra_with("")};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void) {
    harness_stop(&h);
}

/* Restart keygate with the root user and `more` config lines. */
static void restart_with(const char *more) {
    struct harness_opts o = {.extra_config = extra_with(more)};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restarting keygate: %s", h.error);
}

static redisContext *login_to(int port) {
    struct timeval tv = {10, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    ck_assert_msg(c != NULL && !c->err, "connect to keygate port %d: %s", port, c ? c->errstr : "no memory");
    redisSetTimeout(c, tv);
    expect_status(cmd(c, "AUTH root %s", ROOT_PW), "OK", "AUTH root");
    return c;
}

static redisContext *login(void) {
    return login_to(h.port);
}

static int free_port(void) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* ---- issue 10 item 13: more than 16 listeners ---- */

START_TEST(test_issue10_item13_seventeen_listeners) {
    /* 19 listen lines in all (the harness's + 18 here) with 2 threads: every one serves */
    enum { MORE = 18 };
    int ports[MORE];
    char more[4096] = "threads 2\n";
    for (int i = 0; i < MORE; i++) {
        ports[i] = free_port();
        ck_assert_int_gt(ports[i], 0);
        size_t n = strlen(more);
        snprintf(more + n, sizeof more - n, "listen 127.0.0.1:%d\n", ports[i]);
    }
    restart_with(more);
    for (int round = 0; round < 2; round++) /* two connections a port: both threads accept */
        for (int i = 0; i < MORE; i++) {
            redisContext *c = login_to(ports[i]);
            expect_status(cmd(c, "SET cache:lim13:%d x", i), "OK", "SET on an extra listener");
            expect_bulk(cmd(c, "GET cache:lim13:%d", i), "x", "GET on an extra listener");
            redisFree(c);
        }
    restart_with("");
}
END_TEST

/* ---- issue 10 item 11: a Lua reply nested deeper than 64 levels ---- */

/* A raw socket to keygate's port (hiredis cannot read replies nested deeper than 7). */
static int raw_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_sec = 10};
    ck_assert_msg(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "raw connect: %s", strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Read exactly n bytes from fd into a malloc'd buffer (fails the test on EOF or timeout). */
static char *raw_read_n(int fd, size_t n) {
    char *buf = malloc(n + 1);
    size_t got = 0;
    ck_assert_ptr_nonnull(buf);
    while (got < n) {
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r <= 0) {
            buf[got] = '\0';
            for (size_t i = 0; i < got; i++)
                if (buf[i] == '\r' || buf[i] == '\n') buf[i] = ' ';
        }
        ck_assert_msg(r > 0, "raw read: %zu of %zu bytes (%.300s), then %s", got, n, buf, r == 0 ? "EOF" : strerror(errno));
        got += (size_t)r;
    }
    buf[n] = '\0';
    return buf;
}

START_TEST(test_issue10_item11_deep_lua_reply_keeps_the_connection) {
    /* A bystander's commands are in flight on the same shared connection while a script
     * answers a 300-deep nested table: all get their replies, no connection is dropped. */
    enum { DEPTH = 300 };
    static const char script[] = "local t = {'leaf'} for i = 1, tonumber(ARGV[1]) do t = {t} end return t";
    redisContext *bystander = login();
    int fd = raw_connect(h.port);
    char req[512];
    int n = snprintf(req, sizeof req, "*3\r\n$4\r\nAUTH\r\n$4\r\nroot\r\n$%zu\r\n%s\r\n*5\r\n$4\r\nEVAL\r\n$%zu\r\n%s\r\n"
                     "$1\r\n1\r\n$12\r\ncache:lim11k\r\n$3\r\n%d\r\n*1\r\n$4\r\nPING\r\n",
                     strlen(ROOT_PW), ROOT_PW, strlen(script), script, DEPTH);
    redisAppendCommand(bystander, "SET cache:lim11:b before");
    ck_assert_int_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    redisAppendCommand(bystander, "GET cache:lim11:b");
    send_appended(bystander, "bystander");
    size_t want_len = 5 + 4 * (DEPTH + 1) + 10 + 7;
    char *got = raw_read_n(fd, want_len);
    char *want = malloc(want_len + 1);
    strcpy(want, "+OK\r\n");
    for (int i = 0; i <= DEPTH; i++) strcat(want, "*1\r\n");
    strcat(want, "$4\r\nleaf\r\n+PONG\r\n");
    ck_assert_msg(strcmp(got, want) == 0, "deep EVAL through keygate: got %.200s...", got);
    free(got);
    free(want);
    close(fd);
    expect_status(next_reply(bystander), "OK", "bystander SET");
    expect_bulk(next_reply(bystander), "before", "bystander GET");
    char *log = harness_keygate_log(&h);
    ck_assert_msg(log && !strstr(log, "malformed reply"), "keygate dropped a connection:\n%s", log ? log : "");
    free(log);
    redisFree(bystander);
}
END_TEST

int main(void) {
    Suite *s = suite_create("limits");
    TCase *tc = harness_tcase(s, "limits", 120, setup, teardown);
    tcase_add_test(tc, test_issue10_item11_deep_lua_reply_keeps_the_connection);
    tcase_add_test(tc, test_issue10_item13_seventeen_listeners);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
