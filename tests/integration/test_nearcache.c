/* test_nearcache.c: integration tests of the near cache (issue 20): every write's XADD on the real backends. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

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
 * namespace's stream kg:nc:{u:}:stream (read DIRECTLY on the backend), in the same
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
    snprintf(extra, sizeof extra, "user root sha256=%s owners=* access=rw scripts=yes\n", hash);
    struct harness_opts o = {.registry_text = registry_text, .extra_config = extra};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
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

#define U_STREAM "kg:nc:{u:}:stream"
#define T_STREAM "kg:nc:{t:}:stream"
#define UC_STREAM "kc:nc:{uc:}:stream"

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

int main(void)
{
    Suite *s = suite_create("nearcache");
    TCase *tc = harness_tcase(s, "nearcache", 60, setup, teardown);
    harness_add_test(tc, every_write_leaves_its_xadd);
    harness_add_test(tc, multi_and_scripts_leave_their_xadd);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
