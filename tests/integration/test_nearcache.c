/* test_nearcache.c: integration tests of the near cache (issue 20): every write's XADD on the real backends. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "resp.h"

/*
 * One harness (two TLS redis-servers + keygate) with this registry:
 *
 *   kg:  durable  owner=keygate         the near cache's streams on durable
 *   kc:  cache    owner=keygate         ... on cache
 *   u:   durable  near-cache=30s        cached reads, ttl=none
 *   t:   durable  ttl=1h near-cache=30s cached reads with a TTL
 *   p:   durable  ttl=none              not cached
 *   uc:  cache    near-cache=30s        cached on the other instance
 *
 * Every write through keygate to u:/t:/uc: must leave its XADD (field k = the key) in the
 * instance stream kg:nc:{kg:}:stream (read DIRECTLY on the backend), in the same
 * MULTI/EXEC as the write.
 */

static const char registry_text[] =
    "namespace kg: instance=durable ttl=none owner=keygate purpose=\"near-cache streams\"\n"
    "namespace kc: instance=cache   ttl=none owner=keygate purpose=\"near-cache streams\"\n"
    "namespace u:  instance=durable ttl=none near-cache=30s owner=t\n"
    "namespace t:  instance=durable ttl=1h near-cache=30s owner=t\n"
    "namespace p:  instance=durable ttl=none owner=t\n"
    "namespace uc: instance=cache   ttl=none near-cache=30s owner=t\n";

static struct harness h;

#define ROOT_PW "nearcache-root-pw"

static void setup(void)
{
    static char extra[256];
    char hash[65];
    harness_sha256_hex(ROOT_PW, hash);
    snprintf(extra, sizeof extra,
             "user root sha256=%s owners=* access=rw scripts=yes\nnear-cache-trim-interval 1s\n"
             "near-cache-marker-timeout 5s\n",
             hash);
    struct harness_opts o = {.registry_text = registry_text, .extra_config = extra, .admin = 1};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    /* a test that failed half-way leaves the backend as the next test needs it */
    redisContext *d = harness_direct(&h, "durable");
    if (d) {
        freeReplyObject(redisCommand(d, "CONFIG SET min-replicas-to-write 0"));
        freeReplyObject(redisCommand(d, "CLIENT UNPAUSE"));
        redisFree(d);
    }
    harness_check_registry(&h);
    harness_stop(&h);
}

/* The keys of the entries of `stream` on backend after id `after` ("0": all), as "k1,k2,". */
/* A client of keygate logged in as root (owners=*, scripts=yes). */
static redisContext *client(void)
{
    redisContext *c = harness_must_client(&h);
    expect_status(cmd(c, "AUTH root %s", ROOT_PW), "OK", "AUTH root");
    return c;
}

static char *stream_keys(const char *backend, const char *stream, const char *after)
{
    static char buf[4096];
    redisContext *d = harness_must_direct(&h, backend);
    redisReply *r = cmd(d, "XRANGE %s (%s +", stream, after);
    buf[0] = '\0';
    size_t used = 0;
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY, "XRANGE %s: %s", stream, describe(r));
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *e = r->element[i], *f = e->element[1];
        ck_assert_msg(f->elements == 2 && strcmp(f->element[0]->str, "k") == 0, "entry %zu of %s: %s", i, stream,
                      describe(e));
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s,", f->element[1]->str);
    }
    freeReplyObject(r);
    redisFree(d);
    return buf;
}

/* The id of the last entry of stream on backend ("0" when none): later checks read past it. */
static void stream_last(const char *backend, const char *stream, char *id, size_t len)
{
    redisContext *d = harness_must_direct(&h, backend);
    redisReply *r = cmd(d, "XREVRANGE %s + - COUNT 1", stream);
    snprintf(id, len, "%s", r->type == REDIS_REPLY_ARRAY && r->elements ? r->element[0]->element[0]->str : "0-0");
    freeReplyObject(r);
    redisFree(d);
}

/* ---- the near cache's counters (INFO nearcache) ---- */

/* Field `field` of namespace prefix's line in keygate's INFO nearcache (-1 when absent). */
static long long nc_counter(redisContext *c, const char *prefix, const char *field)
{
    redisReply *r = cmd(c, "INFO nearcache");
    ck_assert_msg(r->type == REDIS_REPLY_STRING, "INFO nearcache: %s", describe(r));
    char head[64], want[64];
    snprintf(head, sizeof head, "nc_%s:", prefix);
    snprintf(want, sizeof want, "%s=", field);
    long long v = -1;
    const char *line = strstr(r->str, head);
    if (line) {
        const char *end = strstr(line, "\r\n"), *f = strstr(line, want);
        if (f && (!end || f < end)) v = atoll(f + strlen(want));
    }
    freeReplyObject(r);
    return v;
}

/* Read `key` through c until a read of it is a hit (the namespace serves: its reader caught up
 * once), 5 s at most. */
static void wait_hit(redisContext *c, const char *prefix, const char *key)
{
    long long deadline = now_ms() + 5000;
    for (;;) {
        long long before = nc_counter(c, prefix, "hits");
        freeReplyObject(cmd(c, "GET %s", key));
        if (nc_counter(c, prefix, "hits") > before) return;
        ck_assert_msg(now_ms() < deadline, "no near-cache hit for %s within 5 s (hits %lld)", key, before);
        sleep_ms(10);
    }
}

/* calls=N of `cmdstat_<name>` in the backend's INFO commandstats (0 when never called). */
static long long cmdstat_calls(const char *backend, const char *name)
{
    redisContext *d = harness_must_direct(&h, backend);
    redisReply *r = cmd(d, "INFO commandstats");
    char head[64];
    snprintf(head, sizeof head, "cmdstat_%s:calls=", name);
    const char *p = strstr(r->str, head);
    long long v = p ? atoll(p + strlen(head)) : 0;
    freeReplyObject(r);
    redisFree(d);
    return v;
}

/* ---- raw RESP connections (struct harness_raw, harness.h): replies compared byte for byte ---- */

static char *raw_command(struct harness_raw *r, size_t *len, int argc, const char **argv)
{
    harness_raw_sendv(r, argc, argv);
    return harness_raw_reply(r, len);
}

/* Printable bytes (CR LF shown), for messages. */
static const char *shown(const char *s, size_t n)
{
    static char buf[4][700];
    static int k;
    char *o = buf[k++ % 4];
    size_t j = 0;
    for (size_t i = 0; i < n && j < sizeof(buf[0]) - 5; i++) {
        if (s[i] == '\r' || s[i] == '\n') {
            o[j++] = '\\';
            o[j++] = s[i] == '\r' ? 'r' : 'n';
        } else {
            o[j++] = s[i];
        }
    }
    o[j] = '\0';
    return o;
}

/* keygate (logged in, RESP3 when resp3) and a direct connection to backend in the same protocol. */
static void raw_pair(struct harness_raw *kg, struct harness_raw *redis, const char *backend, int resp3)
{
    size_t n;
    harness_raw_open(kg, h.port, "keygate");
    const char *auth3[] = {"HELLO", "3", "AUTH", "root", ROOT_PW}, *auth2[] = {"AUTH", "root", ROOT_PW};
    free(resp3 ? raw_command(kg, &n, 5, auth3) : raw_command(kg, &n, 3, auth2));
    struct harness_backend *b = harness_backend(&h, backend);
    harness_raw_open(redis, b->plain_port, "redis");
    const char *a[] = {"AUTH", b->password}, *hello[] = {"HELLO", "3"};
    free(raw_command(redis, &n, 2, a));
    if (resp3) free(raw_command(redis, &n, 2, hello));
}

#define U_STREAM "kg:nc:{kg:}:stream"
#define T_STREAM "kg:nc:{kg:}:stream"
#define UC_STREAM "kc:nc:{kc:}:stream"

/* Run `line` (hiredis format without arguments) through keygate; then the u: stream holds `want`. */
static void expect_xadds(redisContext *c, const char *stream, const char *backend, const char *want,
                         const char *command)
{
    char from[64];
    stream_last(backend, stream, from, sizeof from);
    redisReply *r = cmd(c, command);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "%s: %s", command, describe(r));
    freeReplyObject(r);
    const char *got = stream_keys(backend, stream, from);
    ck_assert_msg(strcmp(got, want) == 0, "%s: stream %s got '%s', want '%s'", command, stream, got, want);
}

START_TEST(every_write_leaves_its_xadd)
{
    redisContext *c = client();
    expect_xadds(c, U_STREAM, "durable", "u:w1,", "SET u:w1 v");
    expect_xadds(c, U_STREAM, "durable", "", "GET u:w1");
    expect_xadds(c, U_STREAM, "durable", "", "SET p:w1 v");
    expect_xadds(c, T_STREAM, "durable", "t:w1,", "SET t:w1 v");
    expect_xadds(c, U_STREAM, "durable", "u:w2,", "SADD u:w2 a b");
    expect_xadds(c, U_STREAM, "durable", "u:w3,", "HSET u:w3 f v");
    expect_xadds(c, U_STREAM, "durable", "u:w1,", "EXPIRE u:w1 100");
    expect_xadds(c, U_STREAM, "durable", "u:w1,u:w4,", "RENAME u:w1 u:w4");
    expect_xadds(c, U_STREAM, "durable", "u:w4,u:w5,", "COPY u:w4 u:w5");
    expect_xadds(c, U_STREAM, "durable", "u:w6,u:w2,", "SUNIONSTORE u:w6 u:w2 p:none");
    expect_xadds(c, U_STREAM, "durable", "u:w4,u:w5,", "DEL u:w4 p:w1 u:w5");
    expect_xadds(c, UC_STREAM, "cache", "uc:w1,", "SET uc:w1 v");
    /* the write's own reply is unchanged (element 0 of keygate's EXEC) */
    expect_int(cmd(c, "SADD u:w2 c"), 1, "SADD's reply through the wrap");
    expect_bulk(cmd(c, "GET t:w1"), "v", "GET");
    long long pttl = harness_direct_int(&h, "durable", "PTTL t:w1");
    ck_assert_msg(pttl > 3500000 && pttl <= 3600000, "SET t: keeps its EX 3600 inside the wrap: PTTL %lld", pttl);
    /* a DEL split across instances: each part carries its own keys' XADDs */
    char from_u[64], from_uc[64];
    stream_last("durable", U_STREAM, from_u, sizeof from_u);
    stream_last("cache", UC_STREAM, from_uc, sizeof from_uc);
    expect_int(cmd(c, "DEL u:w6 uc:w1 u:w2"), 3, "split DEL's summed reply");
    ck_assert_str_eq(stream_keys("durable", U_STREAM, from_u), "u:w6,u:w2,");
    ck_assert_str_eq(stream_keys("cache", UC_STREAM, from_uc), "uc:w1,");
    redisFree(c);
}
END_TEST

START_TEST(multi_and_scripts_leave_their_xadd)
{
    redisContext *c = client();
    char from[64];
    stream_last("durable", U_STREAM, from, sizeof from);
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET u:m1 a"), "QUEUED", "queued SET");
    expect_status(cmd(c, "INCR u:m2"), "QUEUED", "queued INCR");
    expect_array(cmd(c, "EXEC"), "EXEC without the injected XADDs' replies", 2, "+OK", ":1");
    ck_assert_str_eq(stream_keys("durable", U_STREAM, from), "u:m1,u:m2,");
    /* EVAL with its declared keys */
    stream_last("durable", U_STREAM, from, sizeof from);
    expect_bulk(cmd(c, "EVAL %s 2 u:m1 p:m3", "redis.call('SET', KEYS[1], 'b') return 'ok'"), "ok", "EVAL");
    ck_assert_str_eq(stream_keys("durable", U_STREAM, from), "u:m1,");
    expect_int(cmd(c, "DEL u:m1 u:m2"), 2, "clean-up");
    redisFree(c);
}
END_TEST

/* The cached reads give Redis's bytes, in RESP2 and RESP3, on a fill (the first read) and on a
 * hit (the second): strings, sets, hashes, absent keys and a key of another type. */
START_TEST(cached_reads_are_redis_byte_for_byte)
{
    redisContext *c = client();
    expect_status(cmd(c, "SET u:r:s hello"), "OK", "SET");
    expect_int(cmd(c, "SADD u:r:set a b c 10"), 4, "SADD");
    expect_int(cmd(c, "HSET u:r:h f1 v1 f2 v2 f3 ''"), 3, "HSET");
    expect_int(cmd(c, "RPUSH u:r:l x"), 1, "RPUSH");
    wait_hit(c, "u:", "u:r:s");
    static const char *const reads[][5] = {
        {"GET", "u:r:s"},
        {"GET", "u:r:none"},
        {"GET", "u:r:set"},
        {"SMEMBERS", "u:r:set"},
        {"SMEMBERS", "u:r:none"},
        {"SMEMBERS", "u:r:s"},
        {"SISMEMBER", "u:r:set", "b"},
        {"SISMEMBER", "u:r:set", "z"},
        {"SISMEMBER", "u:r:none", "z"},
        {"SMISMEMBER", "u:r:set", "a", "z", "10"},
        {"SCARD", "u:r:set"},
        {"SCARD", "u:r:none"},
        {"HGET", "u:r:h", "f1"},
        {"HGET", "u:r:h", "nope"},
        {"HGET", "u:r:none", "f1"},
        {"HMGET", "u:r:h", "f1", "x", "f3"},
        {"HGETALL", "u:r:h"},
        {"HGETALL", "u:r:none"},
        {"HEXISTS", "u:r:h", "f2"},
        {"HEXISTS", "u:r:h", "z"},
        {"HLEN", "u:r:h"},
        {"HSTRLEN", "u:r:h", "f1"},
        {"HSTRLEN", "u:r:h", "z"},
        {"HGETALL", "u:r:l"},
        {"SCARD", "u:r:l"},
        {"HGET", "u:r:s", "f"},
    };
    for (int resp3 = 0; resp3 <= 1; resp3++) {
        struct harness_raw kg, redis;
        raw_pair(&kg, &redis, "durable", resp3);
        for (int pass = 0; pass < 2; pass++) { /* a fill (or an earlier pass's hit), then a hit */
            for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
                int argc = 0;
                while (argc < 5 && reads[i][argc]) argc++;
                size_t n1, n2;
                char *a = raw_command(&kg, &n1, argc, (const char **)reads[i]);
                char *b = raw_command(&redis, &n2, argc, (const char **)reads[i]);
                ck_assert_msg(n1 == n2 && memcmp(a, b, n1) == 0, "RESP%d pass %d %s %s: keygate %s, Redis %s",
                              resp3 ? 3 : 2, pass, reads[i][0], reads[i][1], shown(a, n1), shown(b, n2));
                free(a);
                free(b);
            }
        }
        /* MGET of cached keys (every one a hit): a string is its bulk, anything else nil */
        const char *mget[] = {"MGET", "u:r:s", "u:r:none", "u:r:set"};
        size_t n1, n2;
        char *a = raw_command(&kg, &n1, 4, mget), *b = raw_command(&redis, &n2, 4, mget);
        ck_assert_msg(n1 == n2 && memcmp(a, b, n1) == 0, "RESP%d MGET: keygate %s, Redis %s", resp3 ? 3 : 2,
                      shown(a, n1), shown(b, n2));
        free(a);
        free(b);
        close(kg.fd);
        close(redis.fd);
    }
    ck_assert_int_gt(nc_counter(c, "u:", "hits"), 2 * 26);
    expect_int(cmd(c, "DEL u:r:s u:r:set u:r:h u:r:l"), 4, "clean-up");
    redisFree(c);
}
END_TEST

/* 1,000 hits make no backend round trip: the backend's GET and EVAL counts do not move. */
START_TEST(hits_make_no_backend_round_trip)
{
    redisContext *c = client();
    expect_status(cmd(c, "SET u:hot v1"), "OK", "SET");
    wait_hit(c, "u:", "u:hot");
    long long get0 = cmdstat_calls("durable", "get"), eval0 = cmdstat_calls("durable", "eval"),
              hits0 = nc_counter(c, "u:", "hits");
    for (int i = 0; i < 1000; i++) redisAppendCommand(c, "GET u:hot");
    for (int i = 0; i < 1000; i++) expect_bulk(next_reply(c), "v1", "a hit");
    ck_assert_int_eq(cmdstat_calls("durable", "get"), get0);
    ck_assert_int_eq(cmdstat_calls("durable", "eval"), eval0);
    ck_assert_int_eq(nc_counter(c, "u:", "hits") - hits0, 1000);
    expect_int(cmd(c, "DEL u:hot"), 1, "clean-up");
    redisFree(c);
}
END_TEST

/* An absent key is cached (seed step 1); a SET through keygate is read back at once. */
START_TEST(cached_miss_then_own_write_is_read)
{
    redisContext *c = client();
    expect_status(cmd(c, "SET u:probe x"), "OK", "SET");
    wait_hit(c, "u:", "u:probe");
    expect_nil(cmd(c, "GET u:miss1"), "absent (a fill)");
    long long hits = nc_counter(c, "u:", "hits");
    expect_nil(cmd(c, "GET u:miss1"), "absent (a hit)");
    ck_assert_int_eq(nc_counter(c, "u:", "hits"), hits + 1);
    expect_status(cmd(c, "SET u:miss1 now"), "OK", "SET");
    expect_bulk(cmd(c, "GET u:miss1"), "now", "read your own write");
    expect_int(cmd(c, "HSET u:miss2 f v"), 1, "HSET");
    expect_bulk(cmd(c, "HGET u:miss2 f"), "v", "HGET");
    expect_int(cmd(c, "HSET u:miss2 f w"), 0, "HSET again");
    expect_bulk(cmd(c, "HGET u:miss2 f"), "w", "HGET after the write");
    expect_int(cmd(c, "DEL u:miss1 u:miss2 u:probe"), 3, "clean-up");
    redisFree(c);
}
END_TEST

/* An entry never outlives its key: a 2 s TTL under near-cache=30s reads absent once Redis
 * expired the key. */
START_TEST(entry_ends_with_its_keys_ttl)
{
    redisContext *c = client();
    expect_status(cmd(c, "SET u:probe2 x"), "OK", "SET");
    wait_hit(c, "u:", "u:probe2");
    expect_status(cmd(c, "SET u:ttl2 v PX 2000"), "OK", "SET PX 2000");
    wait_hit(c, "u:", "u:ttl2"); /* cached (the SET's own invalidation may evict the first fill) */
    ck_assert_msg(harness_direct_int(&h, "durable", "PTTL u:ttl2") > 0, "u:ttl2 expired before it was cached");
    long long deadline = now_ms() + 5000;
    while (harness_direct_int(&h, "durable", "EXISTS u:ttl2") == 1) {
        ck_assert_msg(now_ms() < deadline, "u:ttl2 did not expire on Redis within 5 s");
        sleep_ms(5);
    }
    expect_nil(cmd(c, "GET u:ttl2"), "expired on Redis: absent through keygate");
    expect_int(cmd(c, "DEL u:probe2"), 1, "clean-up");
    redisFree(c);
}
END_TEST

/* A value over a sixteenth of near-cache-memory (64mb: 4 MiB) is not cached: after one fill its
 * reads go to Redis as the client sent them (GET), not as fills of the whole value again. */
START_TEST(large_value_is_not_cached)
{
    redisContext *c = client();
    expect_status(cmd(c, "SET u:probe4 x"), "OK", "SET");
    wait_hit(c, "u:", "u:probe4");
    size_t n = 5u << 20;
    char *big = malloc(n);
    memset(big, 'b', n);
    expect_status(cmd(c, "SET u:big %b", big, n), "OK", "SET 5 MiB");
    redisReply *r = cmd(c, "GET u:big");
    ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == n, "GET u:big (the fill): %s", describe(r));
    freeReplyObject(r);
    long long end = now_ms() + 3000, get0, eval0;
    for (;;) { /* the SET's own invalidation may pass the first fill: read until GETs reach Redis */
        get0 = cmdstat_calls("durable", "get"), eval0 = cmdstat_calls("durable", "eval");
        r = cmd(c, "GET u:big");
        ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == n && memcmp(r->str, big, n) == 0, "GET u:big");
        freeReplyObject(r);
        if (cmdstat_calls("durable", "get") == get0 + 1 && cmdstat_calls("durable", "eval") == eval0) break;
        ck_assert_msg(now_ms() < end, "GET of a 5 MiB value is still sent as a fill");
    }
    ck_assert_int_lt(nc_counter(c, "u:", "bytes"), 1 << 20); /* not in the cache */
    free(big);
    expect_int(cmd(c, "DEL u:big u:probe4"), 2, "clean-up");
    redisFree(c);
}
END_TEST

/* /metrics (the admin port) body, malloc'd. */
static char *metrics_body(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)h.admin_port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect admin: %s", strerror(errno));
    const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    ck_assert_int_eq(write(fd, req, sizeof req - 1), (ssize_t)(sizeof req - 1));
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (cap - len < 4096) buf = realloc(buf, cap *= 2);
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ck_assert_msg(poll(&pfd, 1, 5000) == 1, "no /metrics within 5 s");
        ssize_t got = read(fd, buf + len, cap - len - 1);
        ck_assert_msg(got >= 0, "read admin: %s", strerror(errno));
        if (got == 0) break;
        len += (size_t)got;
    }
    close(fd);
    buf[len] = '\0';
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "/metrics: %.40s", buf);
    return buf;
}

/* The value of series `name` (labels as printed) in body, -1 when absent. */
static long long series(const char *body, const char *name)
{
    size_t n = strlen(name);
    for (const char *line = strstr(body, "\r\n\r\n"); line && *line; line = strchr(line, '\n')) {
        line++;
        if (strncmp(line, name, n) == 0 && line[n] == ' ') return atoll(line + n + 1);
    }
    return -1;
}

/* /metrics says what INFO nearcache says, and moves with the traffic. */
START_TEST(metrics_follow_the_traffic)
{
    redisContext *c = client();
    expect_status(cmd(c, "SET u:met v"), "OK", "SET");
    wait_hit(c, "u:", "u:met");
    char *m0 = metrics_body();
    long long hits0 = series(m0, "keygate_near_cache_hits_total{namespace=\"u:\"}"),
              writes0 = series(m0, "keygate_near_cache_evictions_total{namespace=\"u:\",cause=\"write\"}");
    ck_assert_int_ge(hits0, 1);
    free(m0);
    for (int i = 0; i < 10; i++) expect_bulk(cmd(c, "GET u:met"), "v", "a hit");
    long long inval0 = nc_counter(c, "u:", "invalidations");
    expect_status(cmd(c, "SET u:met w"), "OK", "a write through this keygate evicts its entry");
    long long end = now_ms() + 3000;
    while (nc_counter(c, "u:", "invalidations") <= inval0) { /* its own XADD, read back from the stream */
        ck_assert_msg(now_ms() < end, "the SET's invalidation never came back from the stream");
        sleep_ms(5);
    }
    char *m1 = metrics_body();
    ck_assert_int_eq(series(m1, "keygate_near_cache_hits_total{namespace=\"u:\"}"), hits0 + 10);
    ck_assert_int_eq(series(m1, "keygate_near_cache_hits_total{namespace=\"u:\"}"), nc_counter(c, "u:", "hits"));
    ck_assert_int_ge(series(m1, "keygate_near_cache_evictions_total{namespace=\"u:\",cause=\"write\"}"), writes0 + 1);
    ck_assert_int_eq(series(m1, "keygate_near_cache_entries{namespace=\"u:\"}"), nc_counter(c, "u:", "entries"));
    ck_assert_int_ge(series(m1, "keygate_near_cache_invalidation_lag_seconds_count{namespace=\"u:\"}"), inval0 + 1);
    ck_assert_int_ge(series(m1, "keygate_near_cache_invalidation_lag_seconds_bucket{namespace=\"u:\",le=\"+Inf\"}"), 1);
    free(m1);
    expect_int(cmd(c, "DEL u:met"), 1, "clean-up");
    redisFree(c);
}
END_TEST

/* MGET of keys not cached is Redis's MGET, and prefetches them (fills after it, stored only):
 * the same MGET again is answered from the cache, with no MGET on the backend. */
START_TEST(mget_prefetches_then_hits)
{
    redisContext *c = client();
    expect_status(cmd(c, "SET u:probe5 x"), "OK", "SET");
    wait_hit(c, "u:", "u:probe5");
    expect_status(cmd(c, "MSET u:mg1 one u:mg2 two"), "OK", "MSET");
    long long end = now_ms() + 3000;
    for (;;) { /* MSET's own invalidations may pass the first prefetch: until a MGET is a hit */
        long long mget0 = cmdstat_calls("durable", "mget");
        expect_array(cmd(c, "MGET u:mg1 u:mg3 u:mg2"), "MGET", 3, "one", "nil", "two");
        if (cmdstat_calls("durable", "mget") == mget0) break;
        ck_assert_msg(now_ms() < end, "MGET of prefetched keys is never answered from the cache");
        sleep_ms(20);
    }
    expect_status(cmd(c, "SET u:mg2 deux"), "OK", "a write to one of them");
    expect_array(cmd(c, "MGET u:mg1 u:mg3 u:mg2"), "MGET after the write", 3, "one", "nil", "deux");
    expect_int(cmd(c, "DEL u:mg1 u:mg2 u:probe5"), 3, "clean-up");
    redisFree(c);
}
END_TEST

/* ---- two keygates over the same backends ---- */

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A client of the second keygate, logged in as root. */
static redisContext *peer_client(void)
{
    redisContext *c = harness_must_peer_client(&h);
    expect_status(cmd(c, "AUTH root %s", ROOT_PW), "OK", "AUTH root (B)");
    return c;
}

static void start_peer_with(const char *extra)
{
    ck_assert_msg(harness_peer_start(&h, extra) == 0, "second keygate: %s", h.error);
}

static void start_peer(void)
{
    start_peer_with(NULL);
}

/* GET key through c until it reads `want`, at most deadline_ms; returns how long it took (us).
 * Every read before must be one of the values allowed (`old`, or NULL for nil). */
static long long read_until(redisContext *c, const char *key, const char *want, const char *old, int deadline_ms)
{
    long long t0 = now_us(), end = now_ms() + deadline_ms;
    for (;;) {
        redisReply *r = cmd(c, "GET %s", key);
        if (r->type == REDIS_REPLY_STRING && strcmp(r->str, want) == 0) {
            freeReplyObject(r);
            return now_us() - t0;
        }
        int allowed = old ? r->type == REDIS_REPLY_STRING && strcmp(r->str, old) == 0 : r->type == REDIS_REPLY_NIL;
        ck_assert_msg(allowed, "GET %s: %s (waiting for %s after %s)", key, describe(r), want, old ? old : "nil");
        freeReplyObject(r);
        ck_assert_msg(now_ms() < end, "GET %s still not %s after %d ms", key, want, deadline_ms);
    }
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* A write through A reaches B's cache within milliseconds, and B never reads the old value
 * again once it read the new one: 1,000 writes, the lag printed (p50/p99). */
START_TEST(write_via_a_is_seen_by_b)
{
    start_peer();
    redisContext *a = client(), *b = peer_client();
    expect_status(cmd(a, "SET u:lag 0"), "OK", "SET");
    wait_hit(b, "u:", "u:lag");
    enum { N = 1000 };
    static long long lag[N];
    char prev[32] = "0", val[32];
    for (int i = 0; i < N; i++) {
        snprintf(val, sizeof val, "%d", i + 1);
        expect_status(cmd(a, "SET u:lag %s", val), "OK", "SET via A");
        lag[i] = read_until(b, "u:lag", val, prev, 2000);
        expect_bulk(cmd(b, "GET u:lag"), val, "B never goes back to the old value");
        snprintf(prev, sizeof prev, "%s", val);
    }
    qsort(lag, N, sizeof lag[0], cmp_ll);
    fprintf(stderr, "near cache: invalidation lag A -> B over %d writes: p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", N,
            lag[N / 2] / 1000.0, lag[N * 99 / 100] / 1000.0, lag[N - 1] / 1000.0);
    ck_assert_int_gt(nc_counter(b, "u:", "evicted_stream"), N / 2); /* B learnt them from the stream */
    expect_int(cmd(a, "DEL u:lag"), 1, "clean-up");
    redisFree(a);
    redisFree(b);
}
END_TEST

/* B caches `key` (read until a hit), A runs `write`, B reads `check` until it answers `want`. */
static void invalidates(redisContext *a, redisContext *b, const char *check, const char *want, const char *write)
{
    long long until = now_ms() + 3000; /* the set-up write's own invalidation may evict B's first fill */
    for (;;) {
        long long hits = nc_counter(b, "u:", "hits");
        freeReplyObject(cmd(b, check));
        if (nc_counter(b, "u:", "hits") > hits) break;
        ck_assert_msg(now_ms() < until, "'%s' is never a hit on B", check);
    }
    redisReply *w = cmd(a, write);
    ck_assert_msg(w->type != REDIS_REPLY_ERROR, "%s: %s", write, describe(w));
    freeReplyObject(w);
    long long end = now_ms() + 2000;
    for (;;) {
        redisReply *r = cmd(b, check);
        char got[256];
        describe_into(r, got, sizeof got);
        freeReplyObject(r);
        if (strcmp(got, want) == 0) return;
        ck_assert_msg(now_ms() < end, "after '%s' via A, B's '%s' is still %s (want %s)", write, check, got, want);
    }
}

START_TEST(every_kind_of_write_invalidates_b)
{
    start_peer();
    redisContext *a = client(), *b = peer_client();
    expect_status(cmd(a, "SET u:probe3 x"), "OK", "SET");
    wait_hit(b, "u:", "u:probe3");
    freeReplyObject(cmd(a, "DEL u:k:s u:k:h u:k:d u:k:r1 u:k:r2 u:k:e u:k:c1 u:k:c2 u:k:m u:k:v u:k:n"));
    expect_int(cmd(a, "SADD u:k:s a"), 1, "SADD");
    invalidates(a, b, "SCARD u:k:s", ":2", "SADD u:k:s b");
    expect_int(cmd(a, "HSET u:k:h f 1"), 1, "HSET");
    invalidates(a, b, "HGET u:k:h f", "\"2\"", "HSET u:k:h f 2");
    invalidates(a, b, "GET u:k:n", "\"set\"", "SET u:k:n set"); /* a cached miss */
    expect_status(cmd(a, "SET u:k:d 1"), "OK", "SET");
    invalidates(a, b, "GET u:k:d", "(nil)", "DEL u:k:d");
    expect_status(cmd(a, "SET u:k:r1 one"), "OK", "SET");
    invalidates(a, b, "GET u:k:r2", "\"one\"", "RENAME u:k:r1 u:k:r2"); /* the destination */
    expect_status(cmd(a, "SET u:k:r1 two"), "OK", "SET");
    invalidates(a, b, "GET u:k:r1", "(nil)", "RENAME u:k:r1 u:k:r3"); /* the source */
    expect_status(cmd(a, "SET u:k:e 1"), "OK", "SET");
    invalidates(a, b, "GET u:k:e", "(nil)", "PEXPIRE u:k:e 1"); /* an expiry that ends it */
    expect_status(cmd(a, "SET u:k:c1 copied"), "OK", "SET");
    invalidates(a, b, "GET u:k:c2", "\"copied\"", "COPY u:k:c1 u:k:c2");
    expect_status(cmd(a, "SET u:k:m 1"), "OK", "SET");
    expect_status(cmd(a, "MULTI"), "OK", "MULTI");
    expect_status(cmd(a, "INCR u:k:m"), "QUEUED", "queued");
    invalidates(a, b, "GET u:k:m", "\"2\"", "EXEC");
    expect_status(cmd(a, "SET u:k:v 1"), "OK", "SET");
    invalidates(a, b, "GET u:k:v", "\"lua\"", "EVAL redis.call('SET',KEYS[1],'lua') 1 u:k:v");
    freeReplyObject(cmd(a, "DEL u:k:s u:k:h u:k:r2 u:k:r3 u:k:c1 u:k:c2 u:k:m u:k:v u:k:n u:probe3"));
    redisFree(a);
    redisFree(b);
}
END_TEST

/* The id of the durable connection named `name` in CLIENT LIST (-1 when none). */
static long long client_id_named(const char *backend, const char *name)
{
    redisContext *d = harness_must_direct(&h, backend);
    redisReply *r = cmd(d, "CLIENT LIST");
    char want[96];
    snprintf(want, sizeof want, " name=%s ", name);
    long long id = -1;
    for (const char *line = r->str; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *end = strchr(line, '\n'), *m = strstr(line, want);
        if (m && (!end || m < end) && strncmp(line, "id=", 3) == 0) {
            id = atoll(line + 3);
            break;
        }
    }
    freeReplyObject(r);
    redisFree(d);
    return id;
}

/* B's stream connection killed while A writes: B resumes from its cursor and never serves the
 * value the write replaced (with a resume from the stream's end it would, for near-cache=30s). */
START_TEST(stream_connection_killed_resumes_from_cursor)
{
    start_peer();
    redisContext *a = client(), *b = peer_client();
    expect_status(cmd(a, "SET u:kill v0"), "OK", "SET");
    wait_hit(b, "u:", "u:kill");
    char name[64];
    snprintf(name, sizeof name, "keygate-nearcache-%d", (int)h.peer_pid);
    for (int round = 1; round <= 5; round++) {
        long long id = client_id_named("durable", name);
        ck_assert_msg(id > 0, "B's stream connection (%s) is not in durable's CLIENT LIST", name);
        long long killed = harness_direct_int(&h, "durable", "CLIENT KILL ID %lld", id);
        ck_assert_int_eq(killed, 1);
        char val[16], old[16];
        snprintf(val, sizeof val, "v%d", round);
        snprintf(old, sizeof old, "v%d", round - 1);
        expect_status(cmd(a, "SET u:kill %s", val), "OK", "SET via A while B is disconnected");
        read_until(b, "u:kill", val, old, 3000);
        for (int i = 0; i < 50; i++) expect_bulk(cmd(b, "GET u:kill"), val, "no stale read after");
        /* B caches it again once its reader is back */
        wait_hit(b, "u:", "u:kill");
    }
    expect_int(cmd(a, "DEL u:kill"), 1, "clean-up");
    redisFree(a);
    redisFree(b);
}
END_TEST

/* How many times B's log says its reader found a gap (the reader's own word, whatever B's
 * cache held at that moment: evicted_gap counts entries, and under load B's first read after
 * SIGCONT may be a fill that left nothing of the namespace to flush). */
static int peer_gap_lines(void)
{
    FILE *f = fopen(h.peer_log_file, "r");
    if (f == NULL) return -1;
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "has a gap past the cursor") != NULL) n++;
    fclose(f);
    return n;
}

/* B frozen (SIGSTOP) while A writes and trims past B's marker (both in group `default`: A's
 * marker overwrites B's, seed step 4's trade): after SIGCONT B reads no stale value; it found
 * the gap and flushed. */
START_TEST(frozen_b_finds_the_gap)
{
    start_peer();
    redisContext *a = client(), *b = peer_client();
    expect_status(cmd(a, "SET u:frozen old"), "OK", "SET");
    wait_hit(b, "u:", "u:frozen");
    int gap_lines = peer_gap_lines();
    ck_assert_int_ge(gap_lines, 0);
    ck_assert_int_eq(kill(h.peer_pid, SIGSTOP), 0);
    expect_status(cmd(a, "SET u:frozen new"), "OK", "SET via A while B is frozen");
    char last[64];
    stream_last("durable", U_STREAM, last, sizeof last);
    /* A's trimmer (near-cache-trim-interval 1s) removes the entry B has not read */
    long long end = now_ms() + 5000;
    for (;;) {
        for (int i = 0; i < 5; i++) expect_status(cmd(a, "SET u:frozen:other %d", i), "OK", "more writes");
        redisContext *d = harness_must_direct(&h, "durable");
        redisReply *r = cmd(d, "XRANGE %s %s %s", U_STREAM, last, last);
        int gone = r->type == REDIS_REPLY_ARRAY && r->elements == 0;
        freeReplyObject(r);
        redisFree(d);
        if (gone) break;
        ck_assert_msg(now_ms() < end, "A did not trim the stream past %s within 5 s", last);
        sleep_ms(100);
    }
    sleep_ms(3100); /* longer than B's vouch: what it cached before is not served on trust */
    ck_assert_int_eq(kill(h.peer_pid, SIGCONT), 0);
    expect_bulk(cmd(b, "GET u:frozen"), "new", "B after SIGCONT: not the trimmed-away old value");
    end = now_ms() + 5000;
    while (peer_gap_lines() <= gap_lines) {
        ck_assert_msg(now_ms() < end, "B's reader did not find the gap within 5 s of SIGCONT");
        sleep_ms(20);
    }
    expect_bulk(cmd(b, "GET u:frozen"), "new", "B after the flush");
    freeReplyObject(cmd(a, "DEL u:frozen u:frozen:other"));
    redisFree(a);
    redisFree(b);
}
END_TEST

/* B in a group of its own: frozen for less than near-cache-marker-timeout, its marker pins the
 * stream (A trims only to it) and B applies the invalidation it missed; frozen for longer, its
 * marker stops pinning, A trims past it, and B flushes on the gap. */
START_TEST(trim_respects_another_groups_marker)
{
    start_peer_with("near-cache-group b-group\n");
    redisContext *a = client(), *b = peer_client();
    expect_status(cmd(a, "SET u:grp old"), "OK", "SET");
    char read_by_b[64]; /* the last entry B reads before it is frozen: its marker's id */
    stream_last("durable", U_STREAM, read_by_b, sizeof read_by_b);
    wait_hit(b, "u:", "u:grp");
    long long end = now_ms() + 3000;
    for (;;) { /* both groups' markers are in the hash */
        redisContext *d = harness_must_direct(&h, "durable");
        redisReply *r = cmd(d, "HLEN kg:nc:{kg:}:markers");
        long long n = r->integer;
        freeReplyObject(r);
        redisFree(d);
        if (n >= 2) break;
        ck_assert_msg(now_ms() < end, "B's group marker is not in the markers hash");
        sleep_ms(20);
    }
    long long gaps = nc_counter(b, "u:", "evicted_gap");
    int gap_lines = peer_gap_lines();
    ck_assert_int_ge(gap_lines, 0);
    ck_assert_int_eq(kill(h.peer_pid, SIGSTOP), 0);
    expect_status(cmd(a, "SET u:grp new"), "OK", "SET via A while B is frozen");
    char last[64];
    stream_last("durable", U_STREAM, last, sizeof last);
    sleep_ms(2500); /* two trim intervals of A; B's marker is 2.5 s old, under the 5 s timeout */
    redisContext *d = harness_must_direct(&h, "durable");
    redisReply *r = cmd(d, "XRANGE %s %s %s", U_STREAM, read_by_b, read_by_b);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1, "A trimmed past B's marker (%s): %s", read_by_b,
                  describe(r));
    freeReplyObject(r);
    ck_assert_int_eq(kill(h.peer_pid, SIGCONT), 0);
    read_until(b, "u:grp", "new", "old", 3000);
    wait_hit(b, "u:", "u:grp");
    ck_assert_int_eq(nc_counter(b, "u:", "evicted_gap"), gaps); /* nothing lost: no flush */
    ck_assert_int_eq(peer_gap_lines(), gap_lines);
    /* frozen past the marker timeout: the stream is trimmed past B, which flushes */
    ck_assert_int_eq(kill(h.peer_pid, SIGSTOP), 0);
    expect_status(cmd(a, "SET u:grp newer"), "OK", "SET via A while B is frozen again");
    stream_last("durable", U_STREAM, last, sizeof last);
    end = now_ms() + 10000;
    for (;;) {
        expect_status(cmd(a, "SET u:grp:other x"), "OK", "more writes");
        r = cmd(d, "XRANGE %s %s %s", U_STREAM, last, last);
        int gone = r->type == REDIS_REPLY_ARRAY && r->elements == 0;
        freeReplyObject(r);
        if (gone) break;
        if (now_ms() >= end) {
            redisReply *m = cmd(d, "HGETALL kg:nc:{kg:}:markers"), *x = cmd(d, "XRANGE %s - + COUNT 3", U_STREAM);
            char mm[512];
            describe_into(m, mm, sizeof mm);
            ck_abort_msg("a marker older than near-cache-marker-timeout still pins the stream: markers %s, last %s, "
                         "stream %s",
                         mm, last, describe(x));
        }
        sleep_ms(200);
    }
    ck_assert_int_eq(kill(h.peer_pid, SIGCONT), 0);
    expect_bulk(cmd(b, "GET u:grp"), "newer", "B after the trim past it");
    end = now_ms() + 5000;
    while (peer_gap_lines() <= gap_lines) {
        ck_assert_msg(now_ms() < end, "B's reader did not find the gap within 5 s of SIGCONT");
        sleep_ms(20);
    }
    redisFree(d);
    freeReplyObject(cmd(a, "DEL u:grp u:grp:other"));
    redisFree(a);
    redisFree(b);
}
END_TEST

/* The stream deleted on the backend: B cannot vouch for anything it cached, and flushes. */
START_TEST(stream_deleted_flushes)
{
    start_peer();
    redisContext *a = client(), *b = peer_client();
    expect_status(cmd(a, "SET u:del1 v"), "OK", "SET");
    wait_hit(b, "u:", "u:del1");
    long long gaps = nc_counter(b, "u:", "evicted_gap");
    ck_assert_int_eq(harness_direct_int(&h, "durable", "DEL %s", U_STREAM), 1);
    long long end = now_ms() + 3000;
    while (nc_counter(b, "u:", "evicted_gap") <= gaps) {
        ck_assert_msg(now_ms() < end, "B did not flush when its stream vanished");
        sleep_ms(20);
    }
    long long misses = nc_counter(b, "u:", "misses");
    expect_bulk(cmd(b, "GET u:del1"), "v", "read again after the flush");
    ck_assert_int_eq(nc_counter(b, "u:", "misses"), misses + 1);
    expect_int(cmd(a, "DEL u:del1"), 1, "clean-up");
    redisFree(a);
    redisFree(b);
}
END_TEST

/* Seed step 5 forced: B's fill is held (KEYGATE_NEAR_CACHE_FILL_DELAY_MS, the test hook) while A's
 * write and its invalidation pass it; the fill's old value is B's answer, but not cached. */
START_TEST(fill_crossed_by_an_invalidation_is_not_cached)
{
    setenv("KEYGATE_NEAR_CACHE_FILL_DELAY_MS", "400", 1);
    start_peer();
    unsetenv("KEYGATE_NEAR_CACHE_FILL_DELAY_MS");
    redisContext *a = client(), *b = peer_client();
    expect_status(cmd(a, "SET u:race old"), "OK", "SET");
    wait_hit(b, "u:", "u:probe-race"); /* B serves (an absent key's fill) */
    long long raced = nc_counter(b, "u:", "raced");
    redisAppendCommand(b, "GET u:race"); /* a fill, held 400 ms in B once its reply is in */
    send_appended(b, "GET on B");
    sleep_ms(100);
    expect_status(cmd(a, "SET u:race new"), "OK", "SET via A while B's fill is held");
    expect_bulk(next_reply(b), "old", "the held fill's answer: the value it read");
    expect_bulk(cmd(b, "GET u:race"), "new", "not the raced value from B's cache");
    ck_assert_int_eq(nc_counter(b, "u:", "raced"), raced + 1);
    expect_int(cmd(a, "DEL u:race"), 1, "clean-up");
    redisFree(a);
    redisFree(b);
}
END_TEST

/* ASan keeps freed memory in quarantine and adds shadow memory: under it the RSS bound is not
 * checked (the byte bound still is); the plain build checks it. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_CHECKED 0
#else
#define RSS_CHECKED 1
#endif

/* keygate restarted with near-cache-memory 16mb; a client once uc:'s reader serves (probe, a key
 * of uc:, set and read until a hit). */
static redisContext *restart_with_16mb(const char *probe)
{
    static char extra[512];
    char hash[65];
    harness_sha256_hex(ROOT_PW, hash);
    snprintf(extra, sizeof extra, "user root sha256=%s owners=* access=rw scripts=yes\nnear-cache-memory 16mb\n", hash);
    struct harness_opts o = {.registry_text = registry_text, .extra_config = extra};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart: %s", h.error);
    redisContext *c = client();
    expect_status(cmd(c, "SET %s x", probe), "OK", "SET");
    long long end = now_ms() + 5000;
    for (;;) { /* uc:'s reader caught up */
        long long hits = nc_counter(c, "uc:", "hits");
        freeReplyObject(cmd(c, "GET %s", probe));
        if (nc_counter(c, "uc:", "hits") > hits) return c;
        ck_assert_msg(now_ms() < end, "uc: never serves");
        sleep_ms(10);
    }
}

/* near-cache-memory bounds the process: 200,000 distinct 1 KiB values read through a keygate
 * with near-cache-memory 16mb. The values are written directly on cache in batches and deleted
 * there after being read (directly: no invalidation), so Redis holds one batch at a time. */
START_TEST(memory_is_bounded)
{
    redisContext *c = restart_with_16mb("uc:mem:probe");
    long long rss0 = harness_status_kib(h.keygate_pid, "VmRSS");
    char val[1024];
    memset(val, 'v', sizeof val);
    redisContext *d = harness_must_direct(&h, "cache");
    enum { TOTAL = 200000, BATCH = 10000 };
    for (int base = 0; base < TOTAL; base += BATCH) {
        for (int i = base; i < base + BATCH; i++) redisAppendCommand(d, "SET uc:mem:%d %b", i, val, sizeof val);
        for (int i = base; i < base + BATCH; i++) freeReplyObject(next_reply(d));
        for (int i = base; i < base + BATCH; i++) redisAppendCommand(c, "GET uc:mem:%d", i);
        for (int i = base; i < base + BATCH; i++) {
            redisReply *r = next_reply(c);
            ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == sizeof val, "GET uc:mem:%d: %s", i, describe(r));
            freeReplyObject(r);
        }
        for (int i = base; i < base + BATCH; i++) redisAppendCommand(d, "UNLINK uc:mem:%d", i);
        for (int i = base; i < base + BATCH; i++) freeReplyObject(next_reply(d));
    }
    long long rss1 = harness_status_kib(h.keygate_pid, "VmRSS"), bytes = nc_counter(c, "uc:", "bytes"),
              lru = nc_counter(c, "uc:", "evicted_lru"), entries = nc_counter(c, "uc:", "entries");
    fprintf(stderr,
            "near cache: 200,000 x 1 KiB through near-cache-memory 16mb: RSS %lld -> %lld KiB (+%lld KiB), "
            "cached %lld bytes in %lld entries, %lld LRU evictions\n",
            rss0, rss1, rss1 - rss0, bytes, entries, lru);
    ck_assert_int_le(bytes, 16LL * 1024 * 1024);
    ck_assert_int_gt(lru, TOTAL / 2);
    ck_assert_msg(!RSS_CHECKED || rss1 - rss0 < 40 * 1024, "RSS grew by %lld KiB: more than 16 MiB of entries + 24 MiB",
                  rss1 - rss0);
    redisFree(d);
    expect_int(cmd(c, "DEL uc:mem:probe"), 1, "clean-up");
    redisFree(c);
}
END_TEST

/* Every byte the cache holds is counted against near-cache-memory: 200,000 absent keys (small
 * entries, where malloc's rounding and the bucket array weigh most) grow RSS by no more than the
 * bound and 1 MiB (it grew 19.0 MiB before malloc's block sizes and the bucket array counted). */
START_TEST(memory_bound_counts_every_byte)
{
    redisContext *c = restart_with_16mb("uc:abs:probe");
    for (int i = 0; i < 2000; i++) redisAppendCommand(c, "GET uc:warm:%d", i); /* buffers at their size */
    for (int i = 0; i < 2000; i++) freeReplyObject(next_reply(c));
    long long rss0 = harness_status_kib(h.keygate_pid, "VmRSS");
    enum { TOTAL = 200000, BATCH = 10000 };
    for (int base = 0; base < TOTAL; base += BATCH) {
        for (int i = base; i < base + BATCH; i++) redisAppendCommand(c, "GET uc:abs:%d", i);
        for (int i = base; i < base + BATCH; i++) {
            redisReply *r = next_reply(c);
            ck_assert_msg(r->type == REDIS_REPLY_NIL, "GET uc:abs:%d: %s", i, describe(r));
            freeReplyObject(r);
        }
    }
    long long rss1 = harness_status_kib(h.keygate_pid, "VmRSS"), bytes = nc_counter(c, "uc:", "bytes"),
              entries = nc_counter(c, "uc:", "entries");
    fprintf(stderr,
            "near cache: 200,000 absent keys through near-cache-memory 16mb: RSS %lld -> %lld KiB (+%lld KiB), "
            "%lld bytes counted in %lld entries\n",
            rss0, rss1, rss1 - rss0, bytes, entries);
    ck_assert_int_le(bytes, 16LL * 1024 * 1024);
    ck_assert_msg(!RSS_CHECKED || rss1 - rss0 <= 17 * 1024,
                  "RSS grew by %lld KiB for a 16 MiB near cache of absent keys (%lld entries counted as %lld bytes)",
                  rss1 - rss0, entries, bytes);
    expect_int(cmd(c, "DEL uc:abs:probe"), 1, "clean-up");
    redisFree(c);
}
END_TEST

/* A miss on a hash too large to cache reads only what the command names: HGET of one field of a
 * 100,000-field hash right after a write runs HMGET inside the fill (HGETALL before: ~230 ms of
 * Redis's thread), and marks the key too large, so the next reads are forwarded as they came;
 * HLEN's fill reads HLEN only; the answers are Redis's. */
/* 64 bytes: 100,000 fields of ~80 bytes are ~10 MB, well above the 4 MiB a value may have to be
 * cached (64mb / 16), whatever MEMORY USAGE's sampling estimates */
#define PAD64 "0123456789012345678901234567890123456789012345678901234567890123"

START_TEST(fill_of_a_large_value_reads_only_what_the_command_needs)
{
    redisContext *c = client(), *d = harness_must_direct(&h, "durable");
    enum { FIELDS = 100000, BATCH = 10000 };
    for (int base = 0; base < FIELDS; base += BATCH) {
        for (int i = base; i < base + BATCH; i++) redisAppendCommand(d, "HSET u:bigh f%d value-%d-%s", i, i, PAD64);
        for (int i = base; i < base + BATCH; i++) freeReplyObject(next_reply(d));
    }
    freeReplyObject(cmd(d, "CONFIG RESETSTAT"));
    expect_int(cmd(c, "HSET u:bigh f1 changed"), 0, "a write: the key is evicted");
    expect_bulk(cmd(c, "HGET u:bigh f1"), "changed", "HGET of one field");
    /* the fill read the named field (HMGET inside it), not the whole hash (keygate's own stream
     * reader runs HGETALL of its small hashes every second: hgetall's count says nothing here) */
    ck_assert_int_eq(cmdstat_calls("durable", "hmget"), 1);
    ck_assert_int_eq(cmdstat_calls("durable", "hlen"), 1); /* the partial reply's count */
    /* marked too large (unless the write's own invalidation crossed the fill: then a fill again,
     * as partial): the next reads answer as Redis does */
    expect_bulk(cmd(c, "HGET u:bigh f77777"), "value-77777-" PAD64, "HGET of another");
    expect_nil(cmd(c, "HGET u:bigh nosuch"), "HGET of a field it lacks");
    expect_int(cmd(c, "HLEN u:bigh"), FIELDS, "HLEN");
    /* after a write, HLEN's fill reads the count only: no HMGET, and the reply is the count */
    long long hmget = cmdstat_calls("durable", "hmget");
    expect_int(cmd(c, "HSET u:bigh f2 changed"), 0, "another write");
    expect_int(cmd(c, "HLEN u:bigh"), FIELDS, "HLEN after the write");
    ck_assert_int_eq(cmdstat_calls("durable", "hmget"), hmget);
    redisReply *all = cmd(c, "HGETALL u:bigh");
    ck_assert_msg(all->type == REDIS_REPLY_ARRAY && all->elements == 2 * FIELDS, "HGETALL: %s", describe(all));
    freeReplyObject(all);
    /* more fields named than the fill script may unpack (Lua's stack): answered as Redis does */
    expect_int(cmd(c, "HSET u:bigh f3 changed"), 0, "a write: the key is evicted");
    enum { NAMED = 9000 };
    static char names[NAMED][16];
    static const char *argv[NAMED + 2];
    static size_t argvlen[NAMED + 2];
    argv[0] = "HMGET", argv[1] = "u:bigh";
    for (int i = 0; i < NAMED; i++) {
        snprintf(names[i], sizeof names[i], "f%d", i);
        argv[i + 2] = names[i];
    }
    for (int i = 0; i < NAMED + 2; i++) argvlen[i] = strlen(argv[i]);
    redisReply *many = redisCommandArgv(c, NAMED + 2, argv, argvlen);
    ck_assert_msg(many && many->type == REDIS_REPLY_ARRAY && many->elements == NAMED, "HMGET of %d fields: %s", NAMED,
                  describe(many));
    ck_assert_str_eq(many->element[3]->str, "changed");
    ck_assert_str_eq(many->element[4]->str, "value-4-" PAD64);
    freeReplyObject(many);
    expect_int(cmd(c, "DEL u:bigh"), 1, "clean-up");
    redisFree(d);
    redisFree(c);
}
END_TEST

/* MGET hits while invalidations arrive, with threads 2 (run under SANITIZE=1 by make check): the
 * hit path vouches once before it looks at any entry; it drained the inbox between two keys
 * before, freeing an entry the reply was then rendered from (ASan: heap-use-after-free in
 * ncpolicy_render_mget). Every MGET answers the values of a write not older than the last one
 * acknowledged before it was sent. */
START_TEST(mget_hits_under_invalidations_threads_2)
{
    start_peer_with("threads 2\n");
    redisContext *a = peer_client(), *b[3]; /* the writes through B too: acknowledged means evicted in B */
    for (int i = 0; i < 3; i++) b[i] = peer_client();
    for (int k = 0; k < 8; k++) expect_status(cmd(a, "SET u:mg%d 0", k), "OK", "SET");
    wait_hit(b[0], "u:", "u:mg0");
    long long end = now_ms() + 3000, mgets = 0;
    for (int n = 1; now_ms() < end; n++) {
        for (int k = 0; k < 8; k++) redisAppendCommand(a, "SET u:mg%d %d", k, n);
        for (int k = 0; k < 8; k++) freeReplyObject(next_reply(a)); /* every one acknowledged: n */
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                redisAppendCommand(b[i], "MGET u:mg0 u:mg1 u:mg2 u:mg3 u:mg4 u:mg5 u:mg6 u:mg7");
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) {
                redisReply *r = next_reply(b[i]);
                ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 8, "MGET: %s", describe(r));
                for (int k = 0; k < 8; k++)
                    ck_assert_msg(r->element[k]->type == REDIS_REPLY_STRING && atoi(r->element[k]->str) >= n,
                                  "MGET after write %d was acknowledged: u:mg%d is %s", n, k, describe(r->element[k]));
                freeReplyObject(r);
                mgets++;
            }
    }
    fprintf(stderr, "near cache: %lld MGETs under invalidations, threads 2\n", mgets);
    for (int i = 0; i < 3; i++) redisFree(b[i]);
    freeReplyObject(cmd(a, "DEL u:mg0 u:mg1 u:mg2 u:mg3 u:mg4 u:mg5 u:mg6 u:mg7"));
    redisFree(a);
}
END_TEST

/* A trim that removes only entries B has read is no gap: B frozen with its cursor at X, A writes
 * Z, the stream trimmed to Z alone (X and all before it go), B continued: it applies Z and
 * flushes nothing (the first entry above its cursor made it declare a gap before;
 * max-deleted-entry-id says nothing it had not read was lost). */
START_TEST(trim_of_read_entries_is_no_gap)
{
    start_peer();
    redisContext *a = client(), *b = peer_client();
    expect_status(cmd(a, "SET u:tr old"), "OK", "SET");
    wait_hit(b, "u:", "u:tr");
    wait_hit(b, "u:", "u:tr:other"); /* B caches its absence */
    expect_status(cmd(a, "SET u:tr:other x"), "OK", "another write: B reads it before it is frozen");
    /* B answers x once its reader took the write's entry in (until then it serves the cached
     * absence): its reader caught up with both entries (a hit on u:tr alone did not show it: a
     * read sent before the entry vouches for u:tr too, and under load the test froze B first) */
    read_until(b, "u:tr:other", "x", NULL, 3000);
    wait_hit(b, "u:", "u:tr");
    int gap_lines = peer_gap_lines();
    ck_assert_int_ge(gap_lines, 0);
    ck_assert_int_eq(kill(h.peer_pid, SIGSTOP), 0);
    expect_status(cmd(a, "SET u:tr new"), "OK", "SET via A while B is frozen");
    redisContext *d = harness_must_direct(&h, "durable");
    freeReplyObject(cmd(d, "XTRIM %s MAXLEN 1", U_STREAM));
    redisReply *r = cmd(d, "XLEN %s", U_STREAM);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    redisFree(d);
    ck_assert_int_eq(kill(h.peer_pid, SIGCONT), 0);
    read_until(b, "u:tr", "new", "old", 3000);
    wait_hit(b, "u:", "u:tr");
    ck_assert_msg(peer_gap_lines() == gap_lines, "B declared a gap although it had read every trimmed entry");
    freeReplyObject(cmd(a, "DEL u:tr u:tr:other"));
    redisFree(a);
    redisFree(b);
}
END_TEST

/* A stream reader waiting on a frozen backend does not hold keygate's exit: SIGTERM cuts its
 * blocking read short (it waited out syncconn's 10 s I/O timeout before). */
START_TEST(shutdown_is_not_held_by_a_frozen_stream)
{
    redisContext *c = client();
    expect_nil(cmd(c, "GET u:shutdown:1"), "a read: the reader follows u: on durable");
    redisFree(c);
    pid_t durable = harness_backend(&h, "durable")->pid;
    ck_assert_int_eq(kill(durable, SIGSTOP), 0);
    /* the scenario, not a wait: frozen for 1.5 s, past the reader's XREAD BLOCK 1000, so its
     * next request waits on the frozen backend */
    sleep_ms(1500);
    pid_t pid = h.keygate_pid;
    long long t0 = now_ms();
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    int status = harness_wait_exit(pid, 15000);
    long long took = now_ms() - t0;
    kill(durable, SIGCONT);
    ck_assert_msg(status != -1, "keygate still runs 15 s after SIGTERM");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "keygate ended with wait status %d after SIGTERM",
                  status);
    ck_assert_msg(took < 2000, "keygate took %lld ms to stop while its stream reader waited on a frozen durable", took);
}
END_TEST

/* ---- the guarantee's corners: each failed before its fix ---- */

/* The first invalidation of a stream that does not exist yet (a fresh deployment), and the first
 * after the stream was deleted, reach B: the cursor 0 means "read from the start", not "new reader". */
START_TEST(first_invalidation_of_a_new_or_deleted_stream_reaches_b)
{
    start_peer();
    redisContext *a = client(), *b = peer_client();
    redisContext *d = harness_must_direct(&h, "durable");
    freeReplyObject(cmd(d, "DEL %s", U_STREAM));
    long long end = now_ms() + 5000;
    for (;;) { /* B caches u:fresh as absent */
        long long hits = nc_counter(b, "u:", "hits");
        expect_nil(cmd(b, "GET u:fresh"), "B: absent");
        if (nc_counter(b, "u:", "hits") > hits) break;
        ck_assert_msg(now_ms() < end, "B never served u:fresh from its cache");
        sleep_ms(10);
    }
    expect_status(cmd(a, "SET u:fresh v1"), "OK", "the namespace's first write: it makes the stream");
    read_until(b, "u:fresh", "v1", NULL, 2000);
    wait_hit(b, "u:", "u:fresh");
    int gaps = peer_gap_lines();
    ck_assert_int_ge(gaps, 0);
    expect_int(cmd(d, "DEL %s", U_STREAM), 1, "the stream deleted");
    /* B's reader sees it missing (its blocking read wakes every 200 ms) before the next write
     * makes it again: a stream deleted and made again within one millisecond with as many
     * entries cannot be told from the old one (docs/guide.md, "What it does not cover") */
    end = now_ms() + 5000;
    while (peer_gap_lines() <= gaps) {
        ck_assert_msg(now_ms() < end, "B's reader did not see the deleted stream within 5 s");
        sleep_ms(10);
    }
    expect_status(cmd(a, "SET u:fresh v2"), "OK", "the first write after the stream was deleted");
    read_until(b, "u:fresh", "v2", "v1", 2000);
    freeReplyObject(cmd(a, "DEL u:fresh"));
    redisFree(d);
    redisFree(a);
    redisFree(b);
}
END_TEST

/* A near-cache read answers what the same read of a plain namespace answers while the primary
 * refuses writes (min-replicas-to-write unmet), and is not held by CLIENT PAUSE WRITE: the fill
 * script is a read (no-writes). */
START_TEST(reads_answer_as_redis_when_the_primary_refuses_writes)
{
    redisContext *c = client(), *d = harness_must_direct(&h, "durable");
    expect_status(cmd(d, "CONFIG SET min-replicas-to-write 1"), "OK", "no replica: writes refused");
    expect_nil(cmd(c, "GET p:nr"), "a plain namespace's GET");
    expect_nil(cmd(c, "GET u:nr"), "a near-cache GET (a fill) answers the same");
    expect_int(cmd(c, "SISMEMBER u:nrs m"), 0, "SISMEMBER");
    expect_array(cmd(c, "HGETALL u:nrh"), "HGETALL", 0);
    expect_status(cmd(d, "CONFIG SET min-replicas-to-write 0"), "OK", "restored");
    expect_status(cmd(d, "CLIENT PAUSE 3000 WRITE"), "OK", "writes paused, as a failover does");
    long long t0 = now_ms();
    expect_nil(cmd(c, "GET u:paused"), "a near-cache miss under CLIENT PAUSE WRITE");
    long long took = now_ms() - t0;
    expect_status(cmd(d, "CLIENT UNPAUSE"), "OK", "unpaused");
    ck_assert_msg(took < 1000, "a near-cache miss was held %lld ms by CLIENT PAUSE WRITE", took);
    redisFree(d);
    redisFree(c);
}
END_TEST

/* With threads 2, a write acknowledged by B is evicted in every worker of B before the ack: no
 * other connection of B reads the old value after it (readers spread over both workers). */
START_TEST(threads_2_no_connection_reads_the_old_value_after_the_ack)
{
    start_peer_with("threads 2\n");
    redisContext *w = peer_client(), *r[4];
    for (int i = 0; i < 4; i++) r[i] = peer_client();
    expect_status(cmd(w, "SET u:t2 0"), "OK", "SET");
    for (int i = 0; i < 4; i++) wait_hit(r[i], "u:", "u:t2");
    int stale = 0, reads = 0;
    char first[160] = "";
    for (int n = 1; n <= 300; n++) {
        char val[16];
        snprintf(val, sizeof val, "%d", n);
        expect_status(cmd(w, "SET u:t2 %s", val), "OK", "SET via B");
        for (int i = 0; i < 4; i++) {
            redisReply *x = cmd(r[i], "GET u:t2");
            reads++;
            if (x->type != REDIS_REPLY_STRING || strcmp(x->str, val) != 0) {
                if (!stale++)
                    snprintf(first, sizeof first, "write %s acknowledged, connection %d then read %s", val, i,
                             describe(x));
            }
            freeReplyObject(x);
        }
    }
    ck_assert_msg(stale == 0, "%d of %d reads after the ack returned an older value (first: %s)", stale, reads, first);
    ck_assert_int_gt(nc_counter(r[0], "u:", "hits"), 0);
    for (int i = 0; i < 4; i++) redisFree(r[i]);
    redisFree(w);
}
END_TEST

/* B frozen longer than its vouch (1 s) while A writes: the GET sent to it meanwhile is answered,
 * on SIGCONT, with the new value: the vouch is judged when the reply is built (monotonic clock). */
START_TEST(frozen_b_does_not_serve_what_it_cannot_vouch_for)
{
    start_peer();
    redisContext *a = client(), *b = peer_client();
    expect_status(cmd(a, "SET u:fz old"), "OK", "SET");
    wait_hit(b, "u:", "u:fz");
    ck_assert_int_eq(kill(h.peer_pid, SIGSTOP), 0);
    expect_status(cmd(a, "SET u:fz new"), "OK", "SET via A while B is frozen");
    sleep_ms(1500); /* the scenario: B stays frozen past its vouch */
    ck_assert_int_eq(redisAppendCommand(b, "GET u:fz"), REDIS_OK);
    int done = 0;
    while (!done) ck_assert_int_eq(redisBufferWrite(b, &done), REDIS_OK); /* in B's socket before it wakes */
    ck_assert_int_eq(kill(h.peer_pid, SIGCONT), 0);
    expect_bulk(next_reply(b), "new", "B's answer to the GET sent while it was frozen");
    freeReplyObject(cmd(a, "DEL u:fz"));
    redisFree(a);
    redisFree(b);
}
END_TEST

/* The stream key turned into a string: a near-cache write still runs, and its client is told its
 * invalidation failed (not +OK); B serves nothing of the instance from its cache until the key is
 * repaired, then serves again. */
START_TEST(failed_xadd_is_an_error_that_says_the_write_ran)
{
    start_peer();
    redisContext *a = client(), *b = peer_client(), *d = harness_must_direct(&h, "durable");
    expect_status(cmd(a, "SET u:x9 old"), "OK", "SET");
    wait_hit(b, "u:", "u:x9");
    freeReplyObject(cmd(d, "DEL %s", U_STREAM));
    expect_status(cmd(d, "SET %s not-a-stream", U_STREAM), "OK", "the stream key broken");
    expect_error(cmd(a, "SET u:x9 new"), "INVALIDATION the write ran", "the write's reply");
    expect_bulk(cmd(d, "GET u:x9"), "new", "the write ran");
    read_until(b, "u:x9", "new", "old", 2000);
    long long hits = nc_counter(b, "u:", "hits");
    for (int i = 0; i < 5; i++) expect_bulk(cmd(b, "GET u:x9"), "new", "B: forwarded");
    ck_assert_int_eq(nc_counter(b, "u:", "hits"), hits); /* nothing served from the cache */
    expect_int(cmd(d, "DEL %s", U_STREAM), 1, "repaired");
    wait_hit(b, "u:", "u:x9");
    expect_status(cmd(a, "SET u:x9 newer"), "OK", "a write after the repair");
    read_until(b, "u:x9", "newer", "new", 2000);
    freeReplyObject(cmd(a, "DEL u:x9"));
    redisFree(d);
    redisFree(a);
    redisFree(b);
}
END_TEST

/* A (the suite's keygate) only: its registry file rewritten, SIGHUP, every worker took it. */
static void reload_a(redisContext *a, const char *text)
{
    FILE *f = fopen(h.registry_file, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    long long before = harness_info_reloads(a), got = before;
    ck_assert_int_eq(kill(h.keygate_pid, SIGHUP), 0);
    for (long long end = now_ms() + 5000; got == before && now_ms() < end; got = harness_info_reloads(a)) sleep_ms(20);
    ck_assert_msg(got == before + 1, "A's reloads: %lld 5 s after SIGHUP, want %lld", got, before + 1);
}

/* Does B's log say `text` (count of lines)? */
static int peer_log_lines(const char *text)
{
    FILE *f = fopen(h.peer_log_file, "r");
    if (f == NULL) return -1;
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, text) != NULL) n++;
    fclose(f);
    return n;
}

/* Keygates with different registries: A alone reloaded with a prefix carved out of u: (with
 * and without near-cache) still invalidates B's entries of u:; A reloaded with no near-cache on
 * u: makes B stop serving u: (it would miss A's writes), and serve again once A announces it. */
START_TEST(keygates_with_different_registries_do_not_go_stale)
{
    start_peer();
    redisContext *a = client(), *b = peer_client();
    expect_status(cmd(a, "SET u:sub:x old"), "OK", "SET");
    wait_hit(b, "u:", "u:sub:x");
    static char carved[2048], carved_nc[2048], uncached[2048];
    snprintf(carved, sizeof carved, "%snamespace u:sub: instance=durable ttl=none owner=t\n", registry_text);
    snprintf(carved_nc, sizeof carved_nc, "%snamespace u:sub: instance=durable ttl=none near-cache=10s owner=t\n",
             registry_text);
    reload_a(a, carved);
    expect_status(cmd(a, "SET u:sub:x new"), "OK", "A's write under its carve-out (no near-cache)");
    read_until(b, "u:sub:x", "new", "old", 2000);
    wait_hit(b, "u:", "u:sub:x");
    reload_a(a, carved_nc);
    expect_status(cmd(a, "SET u:sub:x newer"), "OK", "A's write under its carve-out (near-cache)");
    read_until(b, "u:sub:x", "newer", "new", 2000);
    /* A stops near-caching u: altogether: its writes there carry no XADD; B must stop serving u: */
    const char *from = strstr(registry_text, "namespace u:");
    const char *eol = strchr(from, '\n');
    snprintf(uncached, sizeof uncached, "%.*snamespace u:  instance=durable ttl=none owner=t%s",
             (int)(from - registry_text), registry_text, eol);
    int skew = peer_log_lines("does not announce writes to 'u:'");
    reload_a(a, uncached);
    long long end = now_ms() + 5000;
    while (peer_log_lines("does not announce writes to 'u:'") <= skew) {
        ck_assert_msg(now_ms() < end, "B did not see within 5 s that A no longer announces u:");
        sleep_ms(20);
    }
    expect_status(cmd(a, "SET u:sub:x newest"), "OK", "A's write without an XADD");
    expect_bulk(cmd(b, "GET u:sub:x"), "newest", "B, which no longer serves u: from its cache");
    reload_a(a, registry_text);
    wait_hit(b, "u:", "u:sub:x");
    expect_bulk(cmd(b, "GET u:sub:x"), "newest", "B serving again");
    freeReplyObject(cmd(a, "DEL u:sub:x"));
    redisFree(a);
    redisFree(b);
}
END_TEST

/* A CLIENT TRACKING client whose read of a cached key is a near-cache hit is told of the key's
 * next write (issue 32 with the near cache): the hit remembers the key as a forwarded read does.
 * (A hit with nothing queued is answered before a request is made; for a tracking client it goes
 * through the request, where the tracker remembers its keys: without that, no push came.) */
START_TEST(tracking_client_is_told_of_a_key_it_read_from_the_cache)
{
    redisContext *c = client();
    expect_status(cmd(c, "SET u:trk:1 v1"), "OK", "SET");
    wait_hit(c, "u:", "u:trk:1"); /* cached, and served: the tracker's read below is a hit */
    struct harness_raw t;
    harness_raw_open_tracking(&t, h.port, "tracker", "root", ROOT_PW);
    char *r;
    long long hits = nc_counter(c, "u:", "hits");
    const char *get[] = {"GET", "u:trk:1"};
    harness_raw_sendv(&t, 2, get);
    r = harness_raw_reply(&t, NULL);
    ck_assert_str_eq(r, "$2\r\nv1\r\n");
    free(r);
    ck_assert_msg(nc_counter(c, "u:", "hits") == hits + 1, "the tracker's GET was not a near-cache hit");
    expect_status(cmd(c, "SET u:trk:1 v2"), "OK", "a write by another client");
    r = harness_raw_reply(&t, NULL);
    ck_assert_msg(strcmp(r, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$7\r\nu:trk:1\r\n") == 0,
                  "the tracking client got %s, not the key's invalidation", r);
    free(r);
    harness_raw_close(&t);
    expect_int(cmd(c, "DEL u:trk:1"), 1, "clean-up");
    redisFree(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nearcache");
    TCase *tc = harness_tcase(s, "nearcache", 120, setup, teardown);
    harness_add_test(tc, every_write_leaves_its_xadd);
    harness_add_test(tc, tracking_client_is_told_of_a_key_it_read_from_the_cache);
    harness_add_test(tc, multi_and_scripts_leave_their_xadd);
    harness_add_test(tc, cached_reads_are_redis_byte_for_byte);
    harness_add_test(tc, hits_make_no_backend_round_trip);
    harness_add_test(tc, cached_miss_then_own_write_is_read);
    harness_add_test(tc, entry_ends_with_its_keys_ttl);
    harness_add_test(tc, large_value_is_not_cached);
    harness_add_test(tc, metrics_follow_the_traffic);
    harness_add_test(tc, mget_prefetches_then_hits);
    harness_add_test(tc, write_via_a_is_seen_by_b);
    harness_add_test(tc, every_kind_of_write_invalidates_b);
    harness_add_test(tc, stream_connection_killed_resumes_from_cursor);
    harness_add_test(tc, frozen_b_finds_the_gap);
    harness_add_test(tc, trim_respects_another_groups_marker);
    harness_add_test(tc, stream_deleted_flushes);
    harness_add_test(tc, fill_crossed_by_an_invalidation_is_not_cached);
    harness_add_test(tc, shutdown_is_not_held_by_a_frozen_stream);
    harness_add_test(tc, memory_is_bounded);
    harness_add_test(tc, memory_bound_counts_every_byte);
    harness_add_test(tc, fill_of_a_large_value_reads_only_what_the_command_needs);
    harness_add_test(tc, mget_hits_under_invalidations_threads_2);
    harness_add_test(tc, trim_of_read_entries_is_no_gap);
    harness_add_test(tc, first_invalidation_of_a_new_or_deleted_stream_reaches_b);
    harness_add_test(tc, reads_answer_as_redis_when_the_primary_refuses_writes);
    harness_add_test(tc, threads_2_no_connection_reads_the_old_value_after_the_ack);
    harness_add_test(tc, frozen_b_does_not_serve_what_it_cannot_vouch_for);
    harness_add_test(tc, failed_xadd_is_an_error_that_says_the_write_ran);
    harness_add_test(tc, keygates_with_different_registries_do_not_go_stale);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
