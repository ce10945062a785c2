/* test_enforce.c: integration regression tests of issue 10's enforcement items, each checked on the backends and against Redis's own answers. */
#include <check.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/*
 * One harness: the repo's conf/registry.conf plus `channel push:tenant- owner=tenants`,
 * and three users (sha256= passwords):
 *   app     owners=cache,notifications,queues access=rw scripts=yes
 *   tenant  owners=tenants                   access=rw
 *   root    owners=*                         access=rw scripts=yes
 * Every test uses its own keys (cache:eN:..., q:eN:...). Where keygate must answer as
 * Redis does, the same command is sent to the cache backend directly (keys
 * cache:eN:oracle:..., deleted again) and the replies are compared.
 */

#define APP_PW "app-pw-1"
#define TENANT_PW "tenant-pw-2"
#define ROOT_PW "root-pw-3"

static struct harness h;
static char extra[2048];
static char *registry_text;

static void setup(void)
{
    FILE *f = fopen("conf/registry.conf", "r");
    ck_assert_ptr_nonnull(f);
    static char base[16384];
    size_t n = fread(base, 1, sizeof(base) - 1, f);
    fclose(f);
    base[n] = '\0';
    const char *more = "channel push:tenant- instance=cache owner=tenants purpose=\"a tenant's own signal\"\n"
                       "namespace capped: instance=durable ttl=none max-ttl=1h owner=queues purpose=\"no TTL needed, "
                       "none above 1h\"\n";
    registry_text = malloc(n + strlen(more) + 2);
    ck_assert_ptr_nonnull(registry_text);
    sprintf(registry_text, "%s\n%s", base, more);
    char app[65], tenant[65], root[65];
    harness_sha256_hex(APP_PW, app);
    harness_sha256_hex(TENANT_PW, tenant);
    harness_sha256_hex(ROOT_PW, root);
    snprintf(extra, sizeof extra,
             "user app sha256=%s owners=cache,notifications,queues access=rw scripts=yes\n"
             "user tenant sha256=%s owners=tenants access=rw\n"
             "user root sha256=%s owners=* access=rw scripts=yes\n",
             app, tenant, root);
    struct harness_opts o = {.extra_config = extra, .registry_text = registry_text};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h);
    harness_stop(&h);
    free(registry_text);
    registry_text = NULL;
}

static redisContext *login(const char *user, const char *pass)
{
    redisContext *c = harness_must_client(&h);
    expect_status(cmd(c, "AUTH %s %s", user, pass), "OK", "AUTH");
    return c;
}

static redisContext *app(void)
{
    return login("app", APP_PW);
}

/* A reply to argv (binary-safe: arguments may hold NUL bytes); never NULL. */
static redisReply *cmd_argv(redisContext *c, int argc, const char **argv, const size_t *len)
{
    redisReply *r = redisCommandArgv(c, argc, argv, len);
    ck_assert_msg(r != NULL, "connection error: %s", c->errstr);
    return r;
}

/* Run the same command line through keygate (as c) and on the cache backend directly;
 * the replies must be equal. */
static void expect_like_redis(redisContext *c, redisContext *direct, const char *what, int argc, const char **argv,
                              const size_t *len)
{
    redisReply *mine = cmd_argv(c, argc, argv, len);
    redisReply *want = cmd_argv(direct, argc, argv, len);
    char a[256], b[256];
    describe_into(mine, a, sizeof a);
    describe_into(want, b, sizeof b);
    ck_assert_msg(harness_same_reply(mine, want), "%s: keygate answered %s, Redis %s", what, a, b);
    freeReplyObject(mine);
    freeReplyObject(want);
}

START_TEST(test_issue10_item1_repeated_set_ttl_option)
{
    redisContext *c = app();
    static const char *const forms[][2] = {
        {"EX", "EX"}, {"PX", "PX"}, {"ex", "Ex"}, {"EXAT", "EXAT"}, {"PXAT", "pxat"},
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        int exat = strcasecmp(forms[i][0], "EXAT") == 0, pxat = strcasecmp(forms[i][0], "PXAT") == 0;
        long long now_s = (long long)time(NULL);
        char small[32], big[32];
        snprintf(small, sizeof small, "%lld", exat ? now_s + 10 : pxat ? (now_s + 10) * 1000 : 10);
        snprintf(big, sizeof big, "%lld", exat ? now_s + 99999999 : pxat ? (now_s + 99999999) * 1000 : 99999999000LL);
        expect_error(cmd(c, "SET cache:e1:a v %s %s %s %s", forms[i][0], small, forms[i][1], big), "DENIED TTL of",
                     "SET with a repeated TTL option, the last above max-ttl");
        ck_assert_int_eq(harness_direct_int(&h, "cache", "EXISTS cache:e1:a"), 0);
    }
    expect_error(cmd(c, "GETEX cache:e1:a EX 10 EX 99999999"), "DENIED TTL of", "GETEX EX 10 EX 99999999");
    /* the last one is what Redis sets: a small last value is the client's own TTL, kept */
    expect_status(cmd(c, "SET cache:e1:b v EX 99999999 EX 10"), "OK", "SET EX big EX 10");
    long long pttl = harness_direct_int(&h, "cache", "PTTL cache:e1:b");
    ck_assert_msg(pttl > 0 && pttl <= 10000, "PTTL %lld", pttl);
    /* conflicting options: Redis's syntax error, and nothing written */
    expect_error(cmd(c, "SET cache:e1:c v EX 10 PX 10"), "ERR syntax error", "SET EX PX");
    ck_assert_int_eq(harness_direct_int(&h, "cache", "EXISTS cache:e1:c"), 0);
    redisFree(c);
}
END_TEST

START_TEST(test_issue10_item2_nul_suffixed_option_words)
{
    redisContext *c = app();
    const char *set[] = {"SET", "cache:e2:a", "v", "EX\0", "99999999"};
    const size_t set_len[] = {3, 10, 1, 3, 8};
    redisReply *r = cmd_argv(c, 5, set, set_len);
    expect_error(r, "DENIED TTL of", "SET ... \"EX\\0\" 99999999");
    ck_assert_int_eq(harness_direct_int(&h, "cache", "EXISTS cache:e2:a"), 0);

    expect_status(cmd(c, "SET q:e2:a v"), "OK", "SET q:e2:a");
    const char *copy[] = {"COPY", "q:e2:a", "q:e2:b", "DB\0", "1"};
    const size_t copy_len[] = {4, 6, 6, 3, 1};
    expect_error(cmd_argv(c, 5, copy, copy_len), "DENIED keygate serves database 0 only", "COPY ... \"DB\\0\" 1");
    redisContext *d = harness_must_direct(&h, "durable");
    expect_status(cmd(d, "SELECT 1"), "OK", "SELECT 1");
    expect_int(cmd(d, "DBSIZE"), 0, "durable db 1 stays empty");
    redisFree(d);
    redisFree(c);
}
END_TEST

START_TEST(test_issue10_item4_pubsub_listing_respects_owners)
{
    redisContext *t = login("tenant", TENANT_PW);
    redisReply *r = cmd(t, "SUBSCRIBE push:tenant-42");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 3, "SUBSCRIBE: %s", describe(r));
    freeReplyObject(r);
    redisContext *c = app();
    expect_error(cmd(c, "PUBSUB CHANNELS"), "NOPERM", "PUBSUB CHANNELS without a pattern");
    expect_error(cmd(c, "PUBSUB NUMPAT"), "NOPERM", "PUBSUB NUMPAT");
    expect_error(cmd(c, "PUBSUB CHANNELS push:*"), "NOPERM", "PUBSUB CHANNELS push:*");
    expect_error(cmd(c, "PSUBSCRIBE push:*"), "NOPERM", "PSUBSCRIBE push:* reaches push:tenant-");
    redisContext *root = login("root", ROOT_PW);
    r = cmd(root, "PUBSUB CHANNELS");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && strcmp(r->element[0]->str, "push:tenant-42") == 0,
                  "root's PUBSUB CHANNELS: %s", describe(r));
    freeReplyObject(r);
    redisFree(root);
    redisFree(c);
    redisFree(t);
}
END_TEST

START_TEST(test_issue10_item5_eval_keys_get_ttl)
{
    redisContext *c = app();
    expect_status(cmd(c, "EVAL %s 1 %s", "return redis.call('SET',KEYS[1],'1')", "cache:e5:a"), "OK", "EVAL SET");
    long long pttl = harness_direct_int(&h, "cache", "PTTL cache:e5:a");
    ck_assert_msg(pttl > 0 && pttl <= 3600000, "a key written by a script: PTTL %lld", pttl);
    /* a script that sets a TTL above max-ttl itself: cut to max-ttl (cache: 7d) */
    expect_status(cmd(c, "EVAL %s 1 %s", "return redis.call('SET',KEYS[1],'1','EX','99999999')", "cache:e5:long"), "OK",
                  "EVAL SET EX 99999999");
    pttl = harness_direct_int(&h, "cache", "PTTL cache:e5:long");
    ck_assert_msg(pttl > 0 && pttl <= 7LL * 86400000, "a script's own TTL above max-ttl: PTTL %lld", pttl);
    redisFree(c);
    c = login("root", ROOT_PW);
    expect_int(cmd(c, "EVAL %s 1 %s", "return redis.call('HSET',KEYS[1],'f','v')", "cache:mattermost:listener:e5"), 1,
               "EVAL HSET");
    pttl = harness_direct_int(&h, "cache", "PTTL cache:mattermost:listener:e5");
    ck_assert_msg(pttl > 0 && pttl <= 90000, "PTTL %lld", pttl);
    redisFree(c);
}
END_TEST

START_TEST(test_issue10_item6_client_list_shows_own_user)
{
    redisContext *t = login("tenant", TENANT_PW);
    expect_status(cmd(t, "CLIENT SETNAME tenant-e6"), "OK", "CLIENT SETNAME");
    redisContext *c = app();
    expect_status(cmd(c, "CLIENT SETNAME app-e6"), "OK", "CLIENT SETNAME");
    redisReply *r = cmd(c, "CLIENT LIST");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    ck_assert_msg(strstr(r->str, "name=app-e6") && !strstr(r->str, "tenant-e6") && !strstr(r->str, "user=tenant"),
                  "app's CLIENT LIST: %s", r->str);
    freeReplyObject(r);
    redisContext *root = login("root", ROOT_PW);
    r = cmd(root, "CLIENT LIST");
    ck_assert_msg(strstr(r->str, "name=app-e6") && strstr(r->str, "name=tenant-e6"), "root's CLIENT LIST: %s", r->str);
    freeReplyObject(r);
    redisFree(root);
    redisFree(c);
    redisFree(t);
}
END_TEST

START_TEST(test_issue10_item7_pubsub_numsub_without_channel)
{
    redisContext *c = harness_must_client(&h);
    redisContext *d = harness_must_direct(&h, "cache");
    const char *forms[][2] = {{"PUBSUB", "NUMSUB"}, {"PUBSUB", "SHARDNUMSUB"}};
    const size_t len[][2] = {{6, 6}, {6, 11}};
    for (int i = 0; i < 2; i++) {
        const char *argv[2] = {forms[i][0], forms[i][1]};
        expect_status(cmd(c, "AUTH app %s", APP_PW), "OK", "AUTH");
        expect_like_redis(c, d, "PUBSUB NUMSUB without a channel", 2, argv, len[i]);
    }
    expect_status(cmd(c, "PING"), "PONG", "keygate is still up");
    redisFree(d);
    redisFree(c);
}
END_TEST

/* Issue 10 item 9: WATCH keeps Redis's semantics exactly around writes keygate gives a TTL. */
START_TEST(test_issue10_item9_watch_with_ttl_writes)
{
    redisContext *c = app(), *other = app();
    /* a watched key changed after a TTL write: EXEC fails, as on Redis */
    expect_status(cmd(c, "WATCH cache:e9:w"), "OK", "WATCH");
    expect_int(cmd(c, "HSET cache:e9:h f v"), 1, "HSET under WATCH");
    expect_status(cmd(other, "SET cache:e9:w 2"), "OK", "another client's SET");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET cache:e9:w 3"), "QUEUED", "SET queued");
    expect_nil(cmd(c, "EXEC"), "EXEC after the watched key changed");
    ck_assert(harness_direct_int(&h, "cache", "PTTL cache:e9:h") > 0);

    /* a watched key changed before a TTL write: the write still happens (with its TTL), EXEC fails */
    expect_status(cmd(c, "WATCH cache:e9:w"), "OK", "WATCH");
    expect_status(cmd(other, "SET cache:e9:w 4"), "OK", "another client's SET");
    expect_int(cmd(c, "HSET cache:e9:h2 f v"), 1, "HSET after the watch got dirty");
    long long pttl = harness_direct_int(&h, "cache", "PTTL cache:e9:h2");
    ck_assert_msg(pttl > 0 && pttl <= 3600000, "PTTL %lld", pttl);
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET cache:e9:w 5"), "QUEUED", "SET queued");
    expect_nil(cmd(c, "EXEC"), "EXEC of a dirty watch");

    /* nothing changed: EXEC runs */
    expect_status(cmd(c, "WATCH cache:e9:w"), "OK", "WATCH");
    expect_int(cmd(c, "HSET cache:e9:h3 f v"), 1, "HSET under WATCH");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET cache:e9:w 6"), "QUEUED", "SET queued");
    expect_array(cmd(c, "EXEC"), "EXEC of a clean watch", 1, "+OK");
    redisReply *r = cmd(other, "GET cache:e9:w");
    expect_bulk(r, "6", "the transaction ran");

    /* the client's own TTL write of a watched key makes its EXEC fail, as on Redis */
    expect_status(cmd(c, "WATCH cache:e9:h4"), "OK", "WATCH");
    expect_int(cmd(c, "HSET cache:e9:h4 f v"), 1, "HSET of the watched key itself");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET cache:e9:w 7"), "QUEUED", "SET queued");
    expect_nil(cmd(c, "EXEC"), "EXEC after writing the watched key");
    redisFree(other);
    redisFree(c);
}
END_TEST

START_TEST(test_issue10_item10_int64_min_absolute_ttls)
{
    redisContext *c = app();
    redisContext *d = harness_must_direct(&h, "cache");
    expect_status(cmd(c, "SET cache:e10:a v"), "OK", "SET");
    expect_int(cmd(c, "PEXPIREAT cache:e10:a -9223372036854775808"), 1, "PEXPIREAT INT64_MIN deletes, as Redis");
    ck_assert_int_eq(harness_direct_int(&h, "cache", "EXISTS cache:e10:a"), 0);
    expect_status(cmd(c, "SET cache:e10:b v"), "OK", "SET");
    expect_error(cmd(c, "EXPIREAT cache:e10:b -9223372036854775808"), "ERR invalid expire time in 'expireat' command",
                 "EXPIREAT INT64_MIN: Redis's own error (seconds below LLONG_MIN / 1000)");
    const char *set[] = {"SET", "cache:e10:c", "v", "PXAT", "-9223372036854775808"};
    const size_t set_len[] = {3, 11, 1, 4, 20};
    redisReply *mine = cmd_argv(c, 5, set, set_len);
    set[1] = "cache:e10:oracle";
    redisReply *want = cmd_argv(d, 5, set, set_len);
    ck_assert_msg(mine->type == REDIS_REPLY_ERROR && want->type == REDIS_REPLY_ERROR &&
                      strcmp(mine->str, want->str) == 0,
                  "SET PXAT INT64_MIN: keygate %s", mine->str);
    freeReplyObject(mine);
    freeReplyObject(want);
    redisFree(d);
    redisFree(c);
}
END_TEST

START_TEST(test_issue10_item14_keys_inside_multi)
{
    redisContext *c = app();
    expect_status(cmd(c, "SET q:e14:k 1"), "OK", "SET q:");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET cache:e14:m 1"), "QUEUED", "SET cache:");
    expect_error(cmd(c, "KEYS q:e14:*"), "CROSSINSTANCE", "KEYS of the other instance inside MULTI");
    expect_error(cmd(c, "EXEC"), "EXECABORT", "EXEC");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET cache:e14:m 1"), "QUEUED", "SET cache:");
    expect_status(cmd(c, "KEYS cache:e14:*"), "QUEUED", "KEYS cache:");
    redisReply *r = cmd(c, "EXEC");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_ARRAY &&
                      r->element[1]->elements == 1 && strcmp(r->element[1]->element[0]->str, "cache:e14:m") == 0,
                  "EXEC: %s", describe(r));
    freeReplyObject(r);
    redisFree(c);
}
END_TEST

START_TEST(test_issue10_item15_integers_as_redis_reads_them)
{
    redisContext *c = app();
    redisContext *d = harness_must_direct(&h, "cache");
    static const char *const selects[] = {"00", "-0", "+0", " 0"};
    for (size_t i = 0; i < sizeof selects / sizeof selects[0]; i++) {
        const char *argv[] = {"SELECT", selects[i]};
        const size_t len[] = {6, strlen(selects[i])};
        expect_like_redis(c, d, "SELECT", 2, argv, len);
    }
    expect_status(cmd(c, "SET cache:e15:a v"), "OK", "SET");
    expect_status(cmd(d, "SET cache:e15:oracle v"), "OK", "SET");
    const char *exp[] = {"EXPIRE", "cache:e15:a", " 99999999"};
    size_t exp_len[] = {6, 11, 9};
    redisReply *mine = cmd_argv(c, 3, exp, exp_len);
    exp[1] = "cache:e15:oracle";
    exp_len[1] = 16;
    redisReply *want = cmd_argv(d, 3, exp, exp_len);
    ck_assert_msg(mine->type == REDIS_REPLY_ERROR && strcmp(mine->str, want->str) == 0, "EXPIRE ' 99999999': %s vs %s",
                  describe(mine), want->str);
    freeReplyObject(mine);
    freeReplyObject(want);
    expect_int(cmd(d, "DEL cache:e15:oracle"), 1, "cleanup");
    redisFree(d);
    redisFree(c);
}
END_TEST

START_TEST(test_issue10_item16_auth_as_redis)
{
    redisContext *c = harness_must_client(&h);
    expect_error(cmd(c, "AUTH APP %s", APP_PW), "WRONGPASS", "user names are case-sensitive");
    expect_error(cmd(c, "GET"), "ERR wrong number of arguments for 'get' command", "arity before NOAUTH");
    expect_error(cmd(c, "GET cache:e16:x"), "NOAUTH", "NOAUTH");
    expect_error(cmd(c, "HELLO 2 SETNAME e16name"), "NOAUTH", "HELLO without AUTH");
    expect_status(cmd(c, "AUTH app %s", APP_PW), "OK", "AUTH");
    expect_nil(cmd(c, "CLIENT GETNAME"), "an unauthenticated HELLO set no name");
    redisReply *r = cmd(c, "HELLO 2 AUTH app %s SETNAME first SETNAME second", APP_PW);
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    expect_bulk(cmd(c, "CLIENT GETNAME"), "second", "the last SETNAME wins");
    redisFree(c);
}
END_TEST

/* A blocking command on `blocker` must not hold up another client's commands on its instance. */
static void expect_other_clients_served(const char *key, const char *what)
{
    redisContext *other = app();
    long long t0 = now_ms();
    expect_status(cmd(other, "SET %s 1", key), "OK", what);
    long long took = now_ms() - t0;
    ck_assert_msg(took < 1000, "%s: another client's SET took %lld ms (the shared connection is blocked)", what, took);
    redisFree(other);
}

/* c's blocking read of `stream` (on backend, which had `blocked` blocked clients before)
 * was just sent: once it blocks there, it holds its own connection (another client is
 * served at once, see above), and an XADD to the stream wakes it. Frees c. */
static void expect_blocked_until_woken(redisContext *c, const char *backend, long long blocked, const char *other_key,
                                       const char *stream, const char *what)
{
    long long now = harness_blocked_clients(&h, backend);
    for (long long end = now_ms() + 5000; now <= blocked && now_ms() < end; now = harness_blocked_clients(&h, backend))
        sleep_ms(10);
    ck_assert_msg(now > blocked, "%s: %s's blocked_clients stayed %lld for 5 s: the read never blocked there", what,
                  backend, now);
    expect_other_clients_served(other_key, what);
    redisContext *p = app();
    redisReply *r = cmd(p, "XADD %s * f v", stream);
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    r = next_reply(c);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1, "%s: %s", what, describe(r));
    freeReplyObject(r);
    redisFree(p);
    redisFree(c);
}

START_TEST(test_issue10_item3_xreadgroup_group_named_streams_blocks_on_its_own_connection)
{
    redisContext *c = app();
    expect_status(cmd(c, "XGROUP CREATE q:e3:s STREAMS $ MKSTREAM"), "OK", "XGROUP CREATE");
    /* the group is named STREAMS: the real STREAMS comes after BLOCK */
    long long blocked = harness_blocked_clients(&h, "durable");
    ck_assert_int_eq(redisAppendCommand(c, "XREADGROUP GROUP STREAMS c1 BLOCK 0 STREAMS q:e3:s >"), REDIS_OK);
    send_appended(c, "XREADGROUP GROUP STREAMS ... BLOCK 0");
    expect_blocked_until_woken(c, "durable", blocked, "q:e3:other", "q:e3:s", "XREADGROUP");
}
END_TEST

START_TEST(test_issue10_item2_xread_nul_block_blocks_on_its_own_connection)
{
    redisContext *c = app();
    const char *argv[] = {"XREAD", "BLOCK\0", "0", "STREAMS", "cache:e2x:s", "$"};
    const size_t len[] = {5, 6, 1, 7, 11, 1};
    long long blocked = harness_blocked_clients(&h, "cache");
    ck_assert_int_eq(redisAppendCommandArgv(c, 6, argv, len), REDIS_OK);
    send_appended(c, "XREAD \"BLOCK\\0\" 0 STREAMS");
    expect_blocked_until_woken(c, "cache", blocked, "cache:e2x:other", "cache:e2x:s", "XREAD \"BLOCK\\0\"");
}
END_TEST

/* Issue 10 item 18: where keygate refuses for the key arguments' syntax, the text is Redis's. */
START_TEST(test_issue10_item18_key_argument_errors_are_redis_texts)
{
    redisContext *c = app();
    redisContext *d = harness_must_direct(&h, "cache");
    static const char *const forms[] = {
        "LMPOP -1 LEFT cache:e18:a",
        "LMPOP 0 LEFT cache:e18:a",
        "XREAD COUNT 1 STREAMS cache:e18:a",
        "ZUNIONSTORE cache:e18:d 0 cache:e18:a",
        "ZUNIONSTORE cache:e18:d 5 cache:e18:a",
        "EVAL x -1",
        "EVAL x 3 cache:e18:a",
        "SINTERCARD 0 cache:e18:a",
        "ZMPOP 01 MIN cache:e18:a",
        "GEORADIUS cache:e18:g 15 37 200 km STORE",
        /* TTL values Redis refuses itself */
        "GETEX cache:e18:a EXAT 9223372036854775807",
        "PEXPIRE cache:e18:a 9223372036854775807",
        "SET cache:e18:a v EX 0",
        "EXPIRE cache:e18:a 99999999999999999",
    };
    expect_status(cmd(c, "SET cache:e18:a v"), "OK", "GETEX reads an existing key first");
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        redisReply *mine = cmd(c, forms[i]);
        redisReply *want = cmd(d, forms[i]);
        ck_assert_msg(want->type == REDIS_REPLY_ERROR, "%s: Redis answered %s", forms[i], describe(want));
        ck_assert_msg(mine->type == REDIS_REPLY_ERROR && strcmp(mine->str, want->str) == 0,
                      "%s: keygate '%s', Redis '%s'", forms[i],
                      mine->type == REDIS_REPLY_ERROR ? mine->str : describe(mine), want->str);
        freeReplyObject(mine);
        freeReplyObject(want);
    }
    redisFree(d);
    redisFree(c);
}
END_TEST

/* Found by fuzz_policy: a TTL carried into a ttl=none namespace with a max-ttl is cut to it;
 * a key without a TTL is given none. */
START_TEST(test_fuzz_policy_carried_ttl_into_ttl_none_max_ttl)
{
    redisContext *c = app();
    expect_status(cmd(c, "SET q:e19:a v EX 99999"), "OK", "SET with a long TTL (q: has no max-ttl)");
    expect_status(cmd(c, "RENAME q:e19:a capped:e19:a"), "OK", "RENAME into capped:");
    long long pttl = harness_direct_int(&h, "durable", "PTTL capped:e19:a");
    ck_assert_msg(pttl > 0 && pttl <= 3600000, "carried TTL cut to max-ttl: PTTL %lld", pttl);
    expect_status(cmd(c, "SET q:e19:b v EX 99999"), "OK", "SET");
    expect_int(cmd(c, "COPY q:e19:b capped:e19:b"), 1, "COPY into capped:");
    pttl = harness_direct_int(&h, "durable", "PTTL capped:e19:b");
    ck_assert_msg(pttl > 0 && pttl <= 3600000, "COPY: PTTL %lld", pttl);
    expect_status(cmd(c, "SET q:e19:c v"), "OK", "SET without TTL");
    expect_int(cmd(c, "RENAMENX q:e19:c capped:e19:c"), 1, "RENAMENX into capped:");
    ck_assert_int_eq(harness_direct_int(&h, "durable", "PTTL capped:e19:c"), -1); /* ttl=none: none given */
    redisFree(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("enforce");
    TCase *tc = harness_tcase(s, "enforce", 120, setup, teardown);
    harness_add_test(tc, test_issue10_item1_repeated_set_ttl_option);
    harness_add_test(tc, test_issue10_item2_nul_suffixed_option_words);
    harness_add_test(tc, test_issue10_item4_pubsub_listing_respects_owners);
    harness_add_test(tc, test_issue10_item5_eval_keys_get_ttl);
    harness_add_test(tc, test_issue10_item6_client_list_shows_own_user);
    harness_add_test(tc, test_issue10_item7_pubsub_numsub_without_channel);
    harness_add_test(tc, test_issue10_item9_watch_with_ttl_writes);
    harness_add_test(tc, test_issue10_item10_int64_min_absolute_ttls);
    harness_add_test(tc, test_issue10_item14_keys_inside_multi);
    harness_add_test(tc, test_issue10_item15_integers_as_redis_reads_them);
    harness_add_test(tc, test_issue10_item16_auth_as_redis);
    harness_add_test(tc, test_issue10_item3_xreadgroup_group_named_streams_blocks_on_its_own_connection);
    harness_add_test(tc, test_issue10_item2_xread_nul_block_blocks_on_its_own_connection);
    harness_add_test(tc, test_issue10_item18_key_argument_errors_are_redis_texts);
    harness_add_test(tc, test_fuzz_policy_carried_ttl_into_ttl_none_max_ttl);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
