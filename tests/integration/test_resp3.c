/* test_resp3.c: integration tests of RESP3 through keygate (issue 13): every reply shape byte for byte against a direct HELLO 3 connection to Redis, pub/sub pushes interleaved with replies, transactions, split MGET, blocking timeouts, HELLO rules, RESP2 clients unaffected. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "resp.h"

/*
 * One harness (two TLS redis-servers + keygate, the repo's conf/registry.conf). Every check
 * reads raw reply bytes (struct raw: a socket and keygate's own reply framer, resp_scan_reply)
 * from keygate and from the backend's plain port, both after HELLO 3, and compares them.
 * Keys: q:r3N:... (durable, ttl=none), rl:r3N:... (durable, ttl=1h), cache:r3N:... (cache,
 * ttl=1h), telegram:active-conv:r3N (cache, sliding: GET becomes GETEX), channels push:r3N.
 * keygate has one user, root (owners=* scripts=yes: EVAL makes the RESP3-only types).
 */

static struct harness h;

#define ROOT_PASS "resp3-root-pass"

static void setup(void)
{
    char hash[65], extra[200];
    harness_sha256_hex(ROOT_PASS, hash);
    snprintf(extra, sizeof(extra), "user root sha256=%s owners=* access=rw scripts=yes\n", hash);
    struct harness_opts o = {.extra_config = extra};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h);
    harness_stop(&h);
}

/* ---- a raw RESP connection ---- */

struct raw {
    int fd;
    char buf[1 << 16];
    size_t len;
    const char *name; /* for messages */
};

static void raw_open(struct raw *r, int port, const char *name)
{
    r->fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_msg(r->fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_msg(connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "%s: connect: %s", name, strerror(errno));
    r->len = 0;
    r->name = name;
}

static void raw_close(struct raw *r)
{
    close(r->fd);
    r->fd = -1;
}

/* Send one command (C strings). */
static void raw_sendv(struct raw *r, int argc, const char **argv)
{
    char *out = NULL;
    int n = redisFormatCommandArgv(&out, argc, argv, NULL);
    ck_assert_int_gt(n, 0);
    for (int off = 0; off < n;) {
        ssize_t w = write(r->fd, out + off, (size_t)(n - off));
        ck_assert_msg(w > 0, "%s: write: %s", r->name, strerror(errno));
        off += (int)w;
    }
    free(out);
}

#define RAW_MAXARGS 16
static void raw_send(struct raw *r, const char *first, ...)
{
    const char *argv[RAW_MAXARGS];
    int argc = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a; a = va_arg(ap, const char *)) {
        ck_assert_int_lt(argc, RAW_MAXARGS);
        argv[argc++] = a;
    }
    va_end(ap);
    raw_sendv(r, argc, argv);
}

/* The next whole reply's bytes (NUL-terminated, malloc'd; *len its length). Waits up to 5 s. */
static char *raw_reply(struct raw *r, size_t *len)
{
    struct resp_scanner sc;
    resp_scanner_reset(&sc);
    long long deadline = now_ms() + 5000;
    for (;;) {
        long long n = r->len ? resp_scan_reply(&sc, r->buf, r->len) : 0;
        ck_assert_msg(n >= 0, "%s: malformed reply: %.*s", r->name, (int)r->len, r->buf);
        if (n > 0) {
            char *out = malloc((size_t)n + 1);
            memcpy(out, r->buf, (size_t)n);
            out[n] = '\0';
            memmove(r->buf, r->buf + n, r->len - (size_t)n);
            r->len -= (size_t)n;
            if (len) *len = (size_t)n;
            return out;
        }
        ck_assert_msg(r->len < sizeof(r->buf), "%s: reply larger than the test's buffer", r->name);
        struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
        int left = (int)(deadline - now_ms());
        ck_assert_msg(left > 0 && poll(&pfd, 1, left) == 1, "%s: no reply within 5 s (have %zu bytes: %.*s)", r->name,
                      r->len, (int)r->len, r->buf);
        ssize_t got = read(r->fd, r->buf + r->len, sizeof(r->buf) - r->len);
        ck_assert_msg(got > 0, "%s: connection closed (have %zu bytes: %.*s)", r->name, r->len, (int)r->len, r->buf);
        r->len += (size_t)got;
        resp_scanner_reset(&sc); /* scan again from the start: simple, the replies are small */
    }
}

/* Nothing more arrives within ms. */
static void raw_expect_quiet(struct raw *r, int ms)
{
    struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
    ck_assert_msg(r->len == 0 && poll(&pfd, 1, ms) == 0, "%s: unexpected bytes", r->name);
}

/* Print bytes with CR LF visible, for messages. */
static const char *shown(const char *s)
{
    static char buf[4][600];
    static int k;
    char *o = buf[k++ % 4];
    size_t j = 0;
    for (; *s && j < sizeof(buf[0]) - 5; s++) {
        if (*s == '\r') {
            o[j++] = '\\';
            o[j++] = 'r';
        } else if (*s == '\n') {
            o[j++] = '\\';
            o[j++] = 'n';
        } else {
            o[j++] = *s;
        }
    }
    o[j] = '\0';
    return o;
}

/* The next reply is exactly `want`. */
#define expect_raw(r, want, what) expect_raw_at(__LINE__, r, want, what)
static void expect_raw_at(int line, struct raw *r, const char *want, const char *what)
{
    size_t n;
    char *got = raw_reply(r, &n);
    ck_assert_msg(n == strlen(want) && memcmp(got, want, n) == 0, "line %d: %s: %s answered %s, want %s", line, what,
                  r->name, shown(got), shown(want));
    free(got);
}

/* The next reply starts with `prefix`. */
static void expect_raw_prefix(struct raw *r, const char *prefix, const char *what)
{
    char *got = raw_reply(r, NULL);
    ck_assert_msg(strncmp(got, prefix, strlen(prefix)) == 0, "%s: %s answered %s, want %s...", what, r->name,
                  shown(got), shown(prefix));
    free(got);
}

/* A RESP3 connection to keygate (HELLO 3 answered with the map). */
static void kg3(struct raw *r)
{
    raw_open(r, h.port, "keygate");
    raw_send(r, "HELLO", "3", "AUTH", "root", ROOT_PASS, NULL);
    expect_raw_prefix(r, "%7\r\n$6\r\nserver\r\n$7\r\nkeygate\r\n", "HELLO 3");
}

/* A RESP2 connection to keygate. */
static void kg2(struct raw *r)
{
    raw_open(r, h.port, "keygate (RESP2)");
    raw_send(r, "AUTH", "root", ROOT_PASS, NULL);
    expect_raw(r, "+OK\r\n", "AUTH");
}

/* A direct connection to a backend's plain port, authenticated, in RESP3 (resp3) or RESP2. */
static void direct_raw(struct raw *r, const char *backend, int resp3)
{
    struct harness_backend *b = harness_backend(&h, backend);
    ck_assert_ptr_nonnull(b);
    raw_open(r, b->plain_port, resp3 ? "redis (HELLO 3)" : "redis (RESP2)");
    raw_send(r, "AUTH", b->password, NULL);
    expect_raw(r, "+OK\r\n", "AUTH");
    if (resp3) {
        raw_send(r, "HELLO", "3", NULL);
        expect_raw_prefix(r, "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n", "HELLO 3");
    }
}

/* The same command to both: the replies must be the same bytes. Returns keygate's reply. */
static char *same_bytes(struct raw *kg, struct raw *redis, const char *what, int argc, const char **argv)
{
    raw_sendv(kg, argc, argv);
    raw_sendv(redis, argc, argv);
    size_t n1, n2;
    char *a = raw_reply(kg, &n1), *b = raw_reply(redis, &n2);
    ck_assert_msg(n1 == n2 && memcmp(a, b, n1) == 0, "%s: keygate answered %s, Redis %s", what, shown(a), shown(b));
    free(b);
    return a;
}

#define SAME(kg, redis, want_prefix, ...)                                                                              \
    do {                                                                                                               \
        const char *argv_[] = {__VA_ARGS__};                                                                           \
        char *got_ = same_bytes(kg, redis, #__VA_ARGS__, (int)(sizeof(argv_) / sizeof(argv_[0])), argv_);              \
        ck_assert_msg(strncmp(got_, want_prefix, strlen(want_prefix)) == 0, "%s: %s is not the shape %s",              \
                      #__VA_ARGS__, shown(got_), shown(want_prefix));                                                  \
        free(got_);                                                                                                    \
    } while (0)

/* ---- every reply shape, byte for byte ---- */

/* Writes go through keygate (its TTL injection is transparent: the replies are the client's
 * command's); every read is sent to keygate and to Redis, and the bytes compared. The shape
 * is checked too, so a RESP2 answer from either side fails. */
START_TEST(test_reply_shapes_byte_for_byte)
{
    struct raw kg, dur, cache;
    kg3(&kg);
    direct_raw(&dur, "durable", 1);
    direct_raw(&cache, "cache", 1);
    const char *keys[][2] = {{"q:r3a:", "durable"}, {"rl:r3a:", "durable"}, {"cache:r3a:", "cache"}};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        struct raw *d = strcmp(keys[i][1], "durable") == 0 ? &dur : &cache;
        char str[64], h1[64], z[64], set[64], list[64], missing[64];
        snprintf(str, sizeof(str), "%sstr", keys[i][0]);
        snprintf(h1, sizeof(h1), "%shash", keys[i][0]);
        snprintf(z, sizeof(z), "%szset", keys[i][0]);
        snprintf(set, sizeof(set), "%sset", keys[i][0]);
        snprintf(list, sizeof(list), "%slist", keys[i][0]);
        snprintf(missing, sizeof(missing), "%smissing", keys[i][0]);
        raw_send(&kg, "SET", str, "value", NULL);
        expect_raw(&kg, "+OK\r\n", "SET");
        raw_send(&kg, "HSET", h1, "f1", "v1", "f2", "v2", NULL);
        expect_raw(&kg, ":2\r\n", "HSET");
        raw_send(&kg, "ZADD", z, "1.5", "m", "2", "n", NULL);
        expect_raw(&kg, ":2\r\n", "ZADD");
        raw_send(&kg, "ZINCRBY", z, "1", "m", NULL); /* a double from a write (TTL wrap: keygate's EXEC pick) */
        expect_raw(&kg, ",2.5\r\n", "ZINCRBY");
        raw_send(&kg, "SADD", set, "a", "b", "c", NULL);
        expect_raw(&kg, ":3\r\n", "SADD");
        raw_send(&kg, "RPUSH", list, "x", "y", NULL);
        expect_raw(&kg, ":2\r\n", "RPUSH");

        SAME(&kg, d, "$5\r\nvalue", "GET", str);                                     /* string */
        SAME(&kg, d, ":5", "STRLEN", str);                                           /* integer */
        SAME(&kg, d, ",2.5", "ZSCORE", z, "m");                                      /* double */
        SAME(&kg, d, "%2\r\n", "HGETALL", h1);                                       /* map */
        SAME(&kg, d, "~3\r\n", "SMEMBERS", set);                                     /* set */
        SAME(&kg, d, "*3\r\n$2\r\nv1\r\n_\r\n", "HMGET", h1, "f1", "nofield", "f2"); /* array with nulls */
        SAME(&kg, d, "*2\r\n$5\r\nvalue\r\n_\r\n", "MGET", str, missing);            /* one instance: not split */
        SAME(&kg, d, "_\r\n", "GET", missing);                                       /* null */
        SAME(&kg, d, "_\r\n", "ZSCORE", z, "nomember");
        SAME(&kg, d, "*2\r\n*2\r\n$1\r\nn\r\n,2\r\n", "ZRANGE", z, "0", "-1", "WITHSCORES"); /* nested doubles */
        SAME(&kg, d, "*2\r\n", "LRANGE", list, "0", "-1");
        SAME(&kg, d, "-WRONGTYPE", "GET", h1); /* error */
        SAME(&kg, d, "-ERR value is not an integer", "INCRBY", str, "x");
        SAME(&kg, d, "(1234567890123456789012345678901234567890", "EVAL",
             "redis.setresp(3); return {big_number='1234567890123456789012345678901234567890'}", "1",
             str); /* big number */
        SAME(&kg, d, "=15\r\ntxt:hello world", "EVAL", "return {verbatim_string={format='txt', string='hello world'}}",
             "1", str);                                                        /* verbatim string */
        SAME(&kg, d, "#t", "EVAL", "redis.setresp(3); return true", "1", str); /* boolean */
        SAME(&kg, d, ",3.25", "EVAL", "return {double=3.25}", "1", str);
        SAME(&kg, d, "%2\r\n", "EVAL", "redis.setresp(3); return redis.call('HGETALL', KEYS[1])", "1", h1);
        SAME(&kg, d, "-MYERR custom", "EVAL", "return {err='MYERR custom'}", "1", str);
    }
    raw_close(&kg);
    raw_close(&dur);
    raw_close(&cache);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("resp3");
    TCase *tc = harness_tcase(s, "resp3", 60, setup, teardown);
    harness_add_test(tc, test_reply_shapes_byte_for_byte);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
