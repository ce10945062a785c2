/* test_keyless.c: integration tests of RESET, the keyless commands keygate forwards (TIME, LASTSAVE, DBSIZE, WAIT) and the commands clients send at start-up, against Redis's own bytes. */
#include <check.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/*
 * One harness (two TLS redis-servers + keygate, the repo's conf/registry.conf) with one user,
 * `app` (owners=*, access=rw, sha256= so no file), so that RESET's logging out is visible.
 * Registry facts used:
 *   q:      instance=durable ttl=none
 *   cache:  instance=cache   ttl=1h
 *   push:   channel on cache
 * Keys and channels are q:kl*, cache:kl*, push:kl*.
 *
 * Redis is the oracle: a sequence is sent as raw bytes to keygate and to a backend directly
 * (the harness's plain, authenticated connection), and the reply bytes must be the same.
 */

#define APP_PW "keyless-app-password"

static struct harness h;

static void setup(void)
{
    static char extra[256];
    char hash[65];
    harness_sha256_hex(APP_PW, hash);
    snprintf(extra, sizeof extra, "user app sha256=%s owners=* access=rw\n", hash);
    struct harness_opts o = {.extra_config = extra};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h); /* post-condition: no key on the backends breaks the registry */
    harness_stop(&h);
}

/* ---- helpers ---- */

/* A keygate connection logged in as app. */
static redisContext *app(void)
{
    redisContext *c = harness_must_client(&h);
    expect_status(cmd(c, "AUTH app %s", APP_PW), "OK", "AUTH app");
    return c;
}

/* Append one command (hiredis format) to a raw byte sequence. */
static void seq_add(char *seq, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *one = NULL;
    int n = redisvFormatCommand(&one, fmt, ap);
    va_end(ap);
    ck_assert_int_gt(n, 0);
    ck_assert_uint_lt(strlen(seq) + (size_t)n, cap);
    strcat(seq, one);
    redisFreeCommand(one);
}

/*
 * Write seq on c's socket and read the raw bytes of exactly `nreplies` replies into out
 * (NUL-terminated); returns their length. A reply missing after 5 s fails the test.
 */
static size_t exchange(redisContext *c, const char *seq, int nreplies, char *out, size_t cap, const char *what)
{
    size_t len = strlen(seq), off = 0;
    while (off < len) {
        ssize_t n = write(c->fd, seq + off, len - off);
        ck_assert_msg(n > 0, "%s: write failed", what);
        off += (size_t)n;
    }
    redisReader *rd = redisReaderCreate();
    size_t got = 0;
    int replies = 0;
    while (replies < nreplies) {
        void *r = NULL;
        ck_assert_int_eq(redisReaderGetReply(rd, &r), REDIS_OK);
        if (r) {
            freeReplyObject(r);
            replies++;
            continue;
        }
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        ck_assert_msg(poll(&p, 1, 5000) == 1, "%s: %d of %d replies after 5 s: '%.*s'", what, replies, nreplies,
                      (int)got, out);
        ck_assert_uint_lt(got, cap - 1);
        ssize_t n = read(c->fd, out + got, cap - 1 - got);
        ck_assert_msg(n > 0, "%s: connection closed after %d replies", what, replies);
        redisReaderFeed(rd, out + got, (size_t)n);
        got += (size_t)n;
    }
    redisReaderFree(rd);
    out[got] = '\0';
    return got;
}

/* keygate and Redis answer seq with the same bytes (nreplies replies). */
static void expect_same_bytes(redisContext *kg, redisContext *redis, const char *seq, int nreplies, const char *what)
{
    static char want[65536], got[65536];
    size_t nw = exchange(redis, seq, nreplies, want, sizeof want, what);
    size_t ng = exchange(kg, seq, nreplies, got, sizeof got, what);
    ck_assert_msg(nw == ng && memcmp(want, got, nw) == 0, "%s: Redis answered\n%s\nkeygate answered\n%s", what, want,
                  got);
}

/* The same commands for keygate and for Redis, but for AUTH (keygate's user app, the backend's password). */
struct seqs {
    char kg[2048], redis[2048];
    int n;
};

#define BOTH(q, ...)                                                                                                   \
    do {                                                                                                               \
        seq_add((q)->kg, sizeof((q)->kg), __VA_ARGS__);                                                                \
        seq_add((q)->redis, sizeof((q)->redis), __VA_ARGS__);                                                          \
        (q)->n++;                                                                                                      \
    } while (0)

/* AUTH again (RESET logged both out): keygate as app, Redis with the backend's password. */
static void both_auth(struct seqs *q, const char *backend)
{
    seq_add(q->kg, sizeof(q->kg), "AUTH app %s", APP_PW);
    seq_add(q->redis, sizeof(q->redis), "AUTH %s", harness_backend(&h, backend)->password);
    q->n++;
}

/* keygate answers q->kg with the bytes Redis answers q->redis with; q is emptied. */
static void expect_same_seqs(redisContext *kg, redisContext *redis, struct seqs *q, const char *what)
{
    static char want[65536], got[65536];
    size_t nw = exchange(redis, q->redis, q->n, want, sizeof want, what);
    size_t ng = exchange(kg, q->kg, q->n, got, sizeof got, what);
    ck_assert_msg(nw == ng && memcmp(want, got, nw) == 0, "%s: Redis answered\n%s\nkeygate answered\n%s", what, want,
                  got);
    q->kg[0] = q->redis[0] = '\0';
    q->n = 0;
}

/* The value of `field` (e.g. "cmdstat_wait:calls") in INFO `section` of a backend, 0 when absent. */
static long long backend_info_field(const char *backend, const char *section, const char *field)
{
    redisContext *d = harness_must_direct(&h, backend);
    redisReply *r = cmd(d, "INFO %s", section);
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    long long v = 0;
    const char *at = strstr(r->str, field);
    if (at) v = atoll(at + strlen(field) + 1);
    freeReplyObject(r);
    redisFree(d);
    return v;
}

/* PUBSUB NUMSUB channel on a backend, asked until it is `want` (closing is asynchronous), 2 s. */
static long long wait_numsub(const char *backend, const char *channel, long long want)
{
    long long n = -1;
    for (long long end = now_ms() + 2000; now_ms() < end; sleep_ms(20)) {
        redisContext *d = harness_must_direct(&h, backend);
        redisReply *r = cmd(d, "PUBSUB NUMSUB %s", channel);
        ck_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
        n = r->element[1]->integer;
        freeReplyObject(r);
        redisFree(d);
        if (n == want) break;
    }
    return n;
}

/* ---- RESET in every state, against Redis ---- */

START_TEST(test_reset_in_normal_state)
{
    redisContext *kg = app(), *redis = harness_must_direct(&h, "durable");
    char seq[1024] = "";
    seq_add(seq, sizeof seq, "RESET");
    seq_add(seq, sizeof seq, "RESET");
    expect_same_bytes(kg, redis, seq, 2, "RESET twice");
    redisFree(kg);
    redisFree(redis);
}
END_TEST

START_TEST(test_reset_leaves_multi)
{
    redisContext *kg = app(), *redis = harness_must_direct(&h, "durable");
    char seq[1024] = "";
    struct seqs q = {0};
    BOTH(&q, "MULTI");
    BOTH(&q, "SET q:kl:m1 queued");
    BOTH(&q, "RESET");
    both_auth(&q, "durable");
    BOTH(&q, "EXEC");
    BOTH(&q, "GET q:kl:m1");
    BOTH(&q, "MULTI"); /* a new transaction may start: the old one is gone */
    BOTH(&q, "DISCARD");
    expect_same_seqs(kg, redis, &q, "MULTI, SET, RESET, AUTH, EXEC, GET, MULTI, DISCARD");
    (void)seq;
    ck_assert_int_eq(harness_direct_int(&h, "durable", "EXISTS q:kl:m1"), 0);
    redisFree(kg);
    redisFree(redis);
}
END_TEST

/* The durable backend's connection whose last command was `name` (CLIENT LIST cmd=), its id
 * or 0. */
static long long backend_conn_with_cmd(const char *name)
{
    redisContext *d = harness_must_direct(&h, "durable");
    redisReply *r = cmd(d, "CLIENT LIST");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    long long id = 0;
    char want[64];
    snprintf(want, sizeof want, " cmd=%s ", name);
    for (char *line = strtok(r->str, "\n"); line && !id; line = strtok(NULL, "\n"))
        if (strstr(line, want)) id = atoll(line + 3);
    freeReplyObject(r);
    redisFree(d);
    return id;
}

/* The last command of the durable backend's connection `id` (CLIENT LIST cmd=) into out, "" when gone. */
static void backend_conn_cmd(long long id, char *out, size_t len)
{
    redisContext *d = harness_must_direct(&h, "durable");
    redisReply *r = cmd(d, "CLIENT LIST ID %lld", id);
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    out[0] = '\0';
    const char *at = strstr(r->str, " cmd=");
    if (at) sscanf(at + 5, "%63s", out);
    freeReplyObject(r);
    redisFree(d);
}

START_TEST(test_reset_drops_watch_and_releases_the_pin)
{
    redisContext *kg = app(), *redis = harness_must_direct(&h, "durable");
    freeReplyObject(cmd(redis, "SET q:kl:w1 before"));
    expect_status(cmd(kg, "WATCH q:kl:w1"), "OK", "WATCH through keygate");
    long long pin = backend_conn_with_cmd("watch"); /* before the test's own WATCH on Redis */
    ck_assert_msg(pin > 0, "no backend connection ran keygate's WATCH");
    expect_status(cmd(redis, "WATCH q:kl:w1"), "OK", "WATCH on Redis");
    struct seqs q = {0};
    BOTH(&q, "RESET");
    both_auth(&q, "durable");
    expect_same_seqs(kg, redis, &q, "RESET under WATCH, AUTH");
    /* a write by someone else: under a WATCH left over, the EXEC below would answer nil */
    redisContext *other = app();
    expect_status(cmd(other, "SET q:kl:w1 other"), "OK", "the other client's write");
    redisFree(other);
    BOTH(&q, "MULTI");
    BOTH(&q, "SET q:kl:w1 after");
    BOTH(&q, "EXEC");
    expect_same_seqs(kg, redis, &q, "MULTI, SET, EXEC after RESET: no WATCH left");
    /* the pin got UNWATCH and went back clean (or was closed) */
    char last[64];
    backend_conn_cmd(pin, last, sizeof last);
    ck_assert_msg(strcmp(last, "unwatch") == 0 || last[0] == '\0',
                  "the WATCH pin's last command on the backend is '%s', not unwatch", last);
    redisFree(kg);
    redisFree(redis);
}
END_TEST

START_TEST(test_reset_unsubscribes)
{
    redisContext *kg = app(), *redis = harness_must_direct(&h, "cache");
    char seq[1024] = "";
    seq_add(seq, sizeof seq, "SUBSCRIBE push:kl:s1 push:kl:s2");
    seq_add(seq, sizeof seq, "PSUBSCRIBE push:kl:p*");
    expect_same_bytes(kg, redis, seq, 3, "SUBSCRIBE two, PSUBSCRIBE one");
    ck_assert_int_eq(wait_numsub("cache", "push:kl:s1", 2), 2);
    struct seqs q = {0};
    BOTH(&q, "RESET");
    both_auth(&q, "cache");
    BOTH(&q, "PING"); /* not subscribed any more: +PONG, not ["pong", ""] */
    BOTH(&q, "GET cache:kl:s1");
    expect_same_seqs(kg, redis, &q, "RESET in subscribed mode, AUTH, PING, GET");
    redisFree(redis);
    ck_assert_int_eq(wait_numsub("cache", "push:kl:s1", 0), 0);
    ck_assert_int_eq(wait_numsub("cache", "push:kl:s2", 0), 0);
    ck_assert_int_eq(harness_direct_int(&h, "cache", "PUBSUB NUMPAT"), 0);
    /* nothing published now reaches the client */
    redisContext *pub = app();
    expect_int(cmd(pub, "PUBLISH push:kl:s1 late"), 0, "PUBLISH after RESET");
    redisFree(pub);
    expect_status(cmd(kg, "PING"), "PONG", "PING after the PUBLISH: no message before it");
    redisFree(kg);
}
END_TEST

START_TEST(test_reset_pipelined_behind_watch_and_subscribe)
{
    /* one write each: RESET arrives while the WATCH pin's GET and the subscriptions'
     * confirmations are still due, and must answer after them, as on Redis */
    redisContext *kg = app(), *redis = harness_must_direct(&h, "durable");
    freeReplyObject(cmd(redis, "SET q:kl:p1 v"));
    struct seqs q = {0};
    BOTH(&q, "WATCH q:kl:p1");
    BOTH(&q, "GET q:kl:p1");
    BOTH(&q, "MULTI");
    BOTH(&q, "INCR q:kl:p2");
    BOTH(&q, "RESET");
    both_auth(&q, "durable");
    BOTH(&q, "EXEC");
    BOTH(&q, "GET q:kl:p2");
    expect_same_seqs(kg, redis, &q, "WATCH, GET, MULTI, INCR, RESET, AUTH, EXEC, GET in one write");
    redisFree(redis);
    redis = harness_must_direct(&h, "cache");
    BOTH(&q, "SUBSCRIBE push:kl:p1");
    BOTH(&q, "SSUBSCRIBE push:kl:p2");
    BOTH(&q, "RESET");
    both_auth(&q, "cache");
    BOTH(&q, "PING");
    expect_same_seqs(kg, redis, &q, "SUBSCRIBE, SSUBSCRIBE, RESET, AUTH, PING in one write");
    redisFree(redis);
    ck_assert_int_eq(wait_numsub("cache", "push:kl:p1", 0), 0);
    redisContext *d = harness_must_direct(&h, "cache");
    long long shard = -1;
    for (long long end = now_ms() + 2000; now_ms() < end && shard != 0; sleep_ms(20)) {
        redisReply *r = cmd(d, "PUBSUB SHARDNUMSUB push:kl:p2");
        ck_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
        shard = r->element[1]->integer;
        freeReplyObject(r);
    }
    ck_assert_msg(shard == 0, "a shard subscription is left after RESET: %lld", shard);
    redisFree(d);
    redisFree(kg);
}
END_TEST

START_TEST(test_reset_logs_out_and_forgets_the_name)
{
    redisContext *kg = app(), *redis = harness_must_direct(&h, "durable");
    char seq[1024] = "";
    seq_add(seq, sizeof seq, "CLIENT SETNAME kl-name");
    seq_add(seq, sizeof seq, "CLIENT GETNAME");
    seq_add(seq, sizeof seq, "SELECT 0");
    seq_add(seq, sizeof seq, "RESET");
    seq_add(seq, sizeof seq, "GET q:kl:a1"); /* the backend requires a password: NOAUTH, as keygate */
    seq_add(seq, sizeof seq, "CLIENT GETNAME");
    expect_same_bytes(kg, redis, seq, 6, "SETNAME, GETNAME, SELECT 0, RESET, GET, GETNAME");
    struct seqs q = {0};
    both_auth(&q, "durable");
    BOTH(&q, "CLIENT GETNAME");
    BOTH(&q, "GET q:kl:a1");
    expect_same_seqs(kg, redis, &q, "AUTH, GETNAME and GET after logging in again");
    redisFree(kg);
    redisFree(redis);
}
END_TEST

START_TEST(test_reset_after_a_blocking_command)
{
    /* RESET cannot reach a blocked client: it runs after the BLPOP answers, as on Redis */
    redisContext *kg = app(), *redis = harness_must_direct(&h, "durable");
    char seq[1024] = "";
    seq_add(seq, sizeof seq, "BLPOP q:kl:b1 0.2");
    seq_add(seq, sizeof seq, "RESET");
    expect_same_bytes(kg, redis, seq, 2, "BLPOP that times out, then RESET");
    struct seqs q = {0};
    both_auth(&q, "durable");
    BOTH(&q, "RPUSH q:kl:b2 x");
    BOTH(&q, "BLPOP q:kl:b2 1"); /* answers at once: RESET right after it */
    BOTH(&q, "RESET");
    expect_same_seqs(kg, redis, &q, "AUTH, RPUSH, BLPOP that answers, RESET");
    redisFree(kg);
    redisFree(redis);
}
END_TEST

START_TEST(test_reset_before_auth)
{
    redisContext *kg = harness_must_client(&h), *redis = harness_must_direct(&h, "durable");
    char seq[1024] = "";
    seq_add(seq, sizeof seq, "RESET");
    expect_status(cmd(redis, "RESET"), "RESET", "RESET on Redis logs the direct connection out");
    seq_add(seq, sizeof seq, "RESET"); /* Redis: RESET needs no AUTH */
    seq_add(seq, sizeof seq, "GET q:kl:a1");
    expect_same_bytes(kg, redis, seq, 3, "RESET, RESET, GET before AUTH");
    redisFree(kg);
    redisFree(redis);
}
END_TEST

/* ---- keyless commands ---- */

START_TEST(test_time_and_lastsave_come_from_the_first_instance)
{
    redisContext *kg = app(), *d = harness_must_direct(&h, "durable");
    redisReply *r = cmd(kg, "TIME"), *want = cmd(d, "TIME");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "TIME: %s", describe(r));
    long long s = atoll(r->element[0]->str), ws = atoll(want->element[0]->str);
    ck_assert_msg(s >= ws - 1 && s <= ws + 1, "TIME %lld, durable's %lld", s, ws);
    freeReplyObject(r);
    freeReplyObject(want);
    expect_int(cmd(kg, "LASTSAVE"), harness_direct_int(&h, "durable", "LASTSAVE"), "LASTSAVE is durable's");
    expect_error(cmd(kg, "TIME x"), "ERR wrong number of arguments for 'time' command", "TIME with an argument");
    redisFree(kg);
    redisFree(d);
}
END_TEST

START_TEST(test_dbsize_sums_the_instances)
{
    redisContext *kg = app();
    expect_status(cmd(kg, "SET q:kl:d1 1"), "OK", "a durable key");
    expect_status(cmd(kg, "SET cache:kl:d1 1"), "OK", "a cache key");
    long long want = harness_direct_int(&h, "durable", "DBSIZE") + harness_direct_int(&h, "cache", "DBSIZE");
    ck_assert_int_gt(harness_direct_int(&h, "cache", "DBSIZE"), 0);
    expect_int(cmd(kg, "DBSIZE"), want, "DBSIZE = durable's + cache's");
    expect_status(cmd(kg, "MULTI"), "OK", "MULTI");
    expect_error(cmd(kg, "DBSIZE"), "DENIED DBSIZE inside MULTI", "DBSIZE queued");
    expect_error(cmd(kg, "EXEC"), "EXECABORT", "EXEC after the refused DBSIZE");
    redisFree(kg);
}
END_TEST

START_TEST(test_dbsize_with_an_instance_down)
{
    ck_assert_int_eq(harness_backend_kill(&h, "cache"), 0);
    redisContext *kg = app();
    redisReply *r = NULL;
    for (long long end = now_ms() + 5000; now_ms() < end; sleep_ms(50)) { /* until keygate saw it go */
        freeReplyObject(r);
        r = cmd(kg, "DBSIZE");
        if (r->type == REDIS_REPLY_ERROR) break;
    }
    expect_error(r, "UNAVAILABLE instance 'cache'", "DBSIZE with cache down: never a partial count");
    expect_error(cmd(kg, "INFO keyspace"), "UNAVAILABLE instance 'cache'", "INFO keyspace with cache down");
    redisFree(kg);
    ck_assert_int_eq(harness_backend_restart(&h, "cache"), 0);
}
END_TEST

START_TEST(test_refused_keyless_commands_stay_refused)
{
    redisContext *kg = app();
    expect_error(cmd(kg, "RANDOMKEY"), "DENIED", "RANDOMKEY");
    expect_error(cmd(kg, "FLUSHDB"), "DENIED", "FLUSHDB");
    expect_error(cmd(kg, "FLUSHALL"), "DENIED", "FLUSHALL");
    expect_error(cmd(kg, "SAVE"), "DENIED", "SAVE");
    expect_error(cmd(kg, "CLIENT NO-EVICT on"), "DENIED", "CLIENT NO-EVICT");
    expect_error(cmd(kg, "CLIENT NO-TOUCH on"), "DENIED CLIENT NO-TOUCH", "CLIENT NO-TOUCH");
    redisFree(kg);
}
END_TEST

START_TEST(test_wait_goes_to_the_instance_of_the_last_write)
{
    redisContext *kg = app();
    long long cache0 = backend_info_field("cache", "commandstats", "cmdstat_wait:calls");
    long long durable0 = backend_info_field("durable", "commandstats", "cmdstat_wait:calls");
    long long publish0 = backend_info_field("cache", "commandstats", "cmdstat_publish:calls");
    expect_int(cmd(kg, "WAIT 0 0"), 0, "WAIT with no write yet: no replica");
    ck_assert_int_eq(backend_info_field("durable", "commandstats", "cmdstat_wait:calls"), durable0 + 1);
    expect_status(cmd(kg, "SET cache:kl:w1 v"), "OK", "a write to cache");
    expect_int(cmd(kg, "WAIT 0 0"), 0, "WAIT after the write");
    ck_assert_int_eq(backend_info_field("cache", "commandstats", "cmdstat_wait:calls"), cache0 + 1);
    /* the no-op that brings the dedicated connection's offset past the write */
    ck_assert_int_eq(backend_info_field("cache", "commandstats", "cmdstat_publish:calls"), publish0 + 1);
    expect_error(cmd(kg, "WAIT x 0"), "ERR value is not an integer or out of range", "WAIT x: Redis's error");
    expect_status(cmd(kg, "MULTI"), "OK", "MULTI");
    expect_status(cmd(kg, "SET cache:kl:w2 v"), "QUEUED", "SET queued");
    expect_status(cmd(kg, "WAIT 1 5000"), "QUEUED", "WAIT queued");
    long long t0 = now_ms();
    redisReply *r = cmd(kg, "EXEC");
    ck_assert_msg(now_ms() - t0 < 1000, "WAIT inside EXEC took %lld ms: Redis answers it at once", now_ms() - t0);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_INTEGER,
                  "EXEC: %s", describe(r));
    freeReplyObject(r);
    redisFree(kg);
}
END_TEST

START_TEST(test_wait_blocks_only_its_client)
{
    /* WAIT 1 1000 with no replica times out after 1 s; clients that share the durable
     * connections meanwhile must not wait behind it */
    enum { BYSTANDERS = 8 };
    redisContext *kg = app(), *by[BYSTANDERS];
    for (int i = 0; i < BYSTANDERS; i++) by[i] = app();
    expect_status(cmd(kg, "SET q:kl:wb v"), "OK", "a write to durable");
    long long blocked = backend_info_field("durable", "clients", "blocked_clients");
    ck_assert_int_eq(redisAppendCommand(kg, "WAIT 1 1000"), REDIS_OK);
    send_appended(kg, "WAIT 1 1000");
    long long t0 = now_ms();
    /* WAIT is blocking on durable (Redis counts a client in WAIT in blocked_clients) */
    long long now = blocked;
    while (now == blocked && now_ms() - t0 < 800) now = backend_info_field("durable", "clients", "blocked_clients");
    ck_assert_msg(now > blocked, "durable's blocked_clients stayed %lld for 800 ms after WAIT 1 1000 was sent", now);
    for (int i = 0; i < BYSTANDERS; i++) {
        long long t = now_ms();
        expect_nil(cmd(by[i], "GET q:kl:wb-none-%d", i), "a bystander's GET on durable");
        ck_assert_msg(now_ms() - t < 300, "bystander %d waited %lld ms behind WAIT", i, now_ms() - t);
    }
    redisReply *r = next_reply(kg);
    long long took = now_ms() - t0;
    expect_int(r, 0, "WAIT 1 1000 with no replica");
    ck_assert_msg(took >= 900 && took < 3000, "WAIT 1 1000 answered after %lld ms", took);
    expect_status(cmd(kg, "PING"), "PONG", "the waiting client goes on");
    for (int i = 0; i < BYSTANDERS; i++) redisFree(by[i]);
    redisFree(kg);
}
END_TEST

/* The lines of section `header` ("# Keyspace") in an INFO text, up to the blank line or the end. */
static void info_section(const char *text, const char *header, char *out, size_t len)
{
    out[0] = '\0';
    const char *at = strstr(text, header);
    if (!at) return;
    at = strchr(at, '\n');
    if (!at) return;
    at++;
    const char *end = strstr(at, "\r\n\r\n");
    size_t n = end ? (size_t)(end - at) + 2 : strlen(at);
    snprintf(out, len, "%.*s", (int)n, at);
}

START_TEST(test_info_keyspace_memory_replication_per_instance)
{
    redisContext *kg = app();
    expect_status(cmd(kg, "SET q:kl:i1 1"), "OK", "a durable key");
    expect_status(cmd(kg, "SET cache:kl:i1 1"), "OK", "a cache key");
    redisReply *r = cmd(kg, "INFO keyspace");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    static const char *const names[] = {"durable", "cache"};
    for (int i = 0; i < 2; i++) {
        redisContext *d = harness_must_direct(&h, names[i]);
        redisReply *own = cmd(d, "INFO keyspace");
        char header[64], got[1024], want[1024];
        snprintf(header, sizeof header, "# Keyspace (instance %s)\r\n", names[i]);
        ck_assert_msg(strstr(r->str, header), "INFO keyspace has no '%s': %s", header, r->str);
        info_section(r->str, header, got, sizeof got);
        info_section(own->str, "# Keyspace\r\n", want, sizeof want);
        char *ttl = strstr(got, ",avg_ttl="); /* the average TTL moves between the two INFOs */
        if (ttl) *ttl = '\0';
        ttl = strstr(want, ",avg_ttl=");
        if (ttl) *ttl = '\0';
        ck_assert_msg(strcmp(got, want) == 0 && strstr(want, "db0:keys="), "%s's keyspace: '%s', its own INFO: '%s'",
                      names[i], got, want);
        freeReplyObject(own);
        redisFree(d);
    }
    ck_assert_msg(!strstr(r->str, "# Server"), "INFO keyspace shows a server section: %s", r->str);
    freeReplyObject(r);
    r = cmd(kg, "INFO server memory replication");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    ck_assert_msg(strstr(r->str, "# Server\r\nredis_version:") && strstr(r->str, "keygate_version:"),
                  "keygate's own server section: %s", r->str);
    ck_assert_msg(!strstr(r->str, "# Server (instance"), "an instance's server section: %s", r->str);
    ck_assert_msg(strstr(r->str, "# Memory (instance durable)\r\nused_memory:") &&
                      strstr(r->str, "# Memory (instance cache)\r\nused_memory:"),
                  "memory per instance: %s", r->str);
    ck_assert_msg(strstr(r->str, "# Replication (instance durable)\r\nrole:master") &&
                      strstr(r->str, "# Replication (instance cache)\r\nrole:master"),
                  "replication per instance: %s", r->str);
    ck_assert_msg(r->len >= 2 && memcmp(r->str + r->len - 2, "\r\n", 2) == 0 &&
                      (r->len < 4 || memcmp(r->str + r->len - 4, "\r\n\r\n", 4) != 0),
                  "INFO must end as Redis's: the last line's CRLF, no blank line");
    freeReplyObject(r);
    r = cmd(kg, "INFO");
    ck_assert_msg(r->type == REDIS_REPLY_STRING && !strstr(r->str, "(instance "), "plain INFO stays keygate's: %s",
                  describe(r));
    freeReplyObject(r);
    expect_status(cmd(kg, "MULTI"), "OK", "MULTI");
    expect_error(cmd(kg, "INFO keyspace"), "DENIED", "INFO keyspace inside MULTI");
    expect_error(cmd(kg, "EXEC"), "EXECABORT", "EXEC");
    redisFree(kg);
}
END_TEST

/* A replica of durable (plain replication from its plain port) started by this test, dying
 * with the test's process; its pid. Waits until durable reports it online (10 s). */
static pid_t replica_start(char *dir, size_t dirlen)
{
    snprintf(dir, dirlen, "/tmp/kl-replica-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    int port = harness_free_port();
    ck_assert_int_gt(port, 0);
    char sport[16], mport[16], log[300];
    snprintf(sport, sizeof sport, "%d", port);
    snprintf(mport, sizeof mport, "%d", h.backends[0].plain_port);
    snprintf(log, sizeof log, "%s/replica.log", dir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execlp("redis-server", "redis-server", "--bind", "127.0.0.1", "--port", sport, "--replicaof", "127.0.0.1",
               mport, "--masterauth", h.backends[0].password, "--save", "", "--appendonly", "no", "--dir", dir,
               "--logfile", log, (char *)NULL);
        _exit(127);
    }
    for (long long end = now_ms() + 10000; now_ms() < end; sleep_ms(50)) {
        redisContext *d = harness_must_direct(&h, "durable");
        redisReply *r = cmd(d, "INFO replication");
        int online = r->type == REDIS_REPLY_STRING && strstr(r->str, "state=online");
        freeReplyObject(r);
        redisFree(d);
        if (online) return pid;
    }
    kill(pid, SIGKILL);
    ck_abort_msg("the replica of durable did not come online within 10 s (log %s)", log);
    return -1;
}

static void replica_stop(pid_t pid, const char *dir)
{
    kill(pid, SIGCONT);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", dir);
    /* durable drops the replica at its next write or ping; nothing else in this suite waits on it */
}

START_TEST(test_wait_counts_the_replica_that_has_the_write)
{
    /* WAIT runs on a dedicated connection: without keygate's replicated no-op first, that
     * connection's offset would not cover the write and a stopped replica would still count */
    char dir[64];
    pid_t replica = replica_start(dir, sizeof dir);
    redisContext *kg = app();
    expect_status(cmd(kg, "SET q:kl:r1 v"), "OK", "a write to durable");
    expect_int(cmd(kg, "WAIT 1 5000"), 1, "WAIT 1 with the replica online");
    ck_assert_int_eq(kill(replica, SIGSTOP), 0); /* it acks nothing more */
    harness_wait_stopped(replica);
    expect_status(cmd(kg, "SET q:kl:r2 v"), "OK", "a write the replica cannot ack");
    long long t0 = now_ms();
    expect_int(cmd(kg, "WAIT 1 500"), 0, "WAIT 1 500 with the replica stopped: the write is not acknowledged");
    ck_assert_msg(now_ms() - t0 >= 450, "WAIT 1 500 answered after %lld ms", now_ms() - t0);
    ck_assert_int_eq(kill(replica, SIGCONT), 0);
    expect_int(cmd(kg, "WAIT 1 5000"), 1, "WAIT 1 once the replica runs again");
    redisFree(kg);
    replica_stop(replica, dir);
}
END_TEST

/* ---- the commands clients send at start-up ---- */

START_TEST(test_start_up_commands_as_redis)
{
    redisContext *kg = app(), *redis = harness_must_direct(&h, "durable");
    char seq[2048] = "";
    seq_add(seq, sizeof seq, "CLIENT SETNAME kl-start");
    seq_add(seq, sizeof seq, "SELECT 0");
    seq_add(seq, sizeof seq, "ECHO %s", "hello\r\nworld");
    seq_add(seq, sizeof seq, "PING %s", "with a message");
    seq_add(seq, sizeof seq, "PING");
    seq_add(seq, sizeof seq, "COMMAND DOCS GET SET");
    seq_add(seq, sizeof seq, "COMMAND INFO GET");
    seq_add(seq, sizeof seq, "CLIENT GETNAME");
    expect_same_bytes(kg, redis, seq, 8,
                      "SETNAME, SELECT 0, ECHO, PING msg, PING, COMMAND DOCS, COMMAND INFO, GETNAME");
    /* Redis 7.2's, which 7.0 lacks: answered by keygate */
    expect_status(cmd(kg, "CLIENT SETINFO LIB-NAME redis-py"), "OK", "CLIENT SETINFO LIB-NAME");
    expect_status(cmd(kg, "CLIENT SETINFO LIB-VER 5.0.1"), "OK", "CLIENT SETINFO LIB-VER");
    expect_error(cmd(kg, "CLIENT SETINFO LIB-NAME %s", "has space"),
                 "ERR LIB-NAME cannot contain spaces, newlines or special characters.", "SETINFO with a space");
    expect_error(cmd(kg, "CLIENT SETINFO LIB-X y"), "ERR Unrecognized option 'LIB-X'", "SETINFO LIB-X");
    expect_status(cmd(kg, "READONLY"), "OK", "READONLY");
    expect_status(cmd(kg, "READWRITE"), "OK", "READWRITE");
    redisReply *r = cmd(kg, "INFO server");
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strstr(r->str, "# Server\r\nredis_version:"), "INFO server: %s",
                  describe(r));
    freeReplyObject(r);
    redisFree(kg);
    redisFree(redis);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("keyless");
    TCase *tc = harness_tcase(s, "keyless", 120, setup, teardown);
    harness_add_test(tc, test_reset_in_normal_state);
    harness_add_test(tc, test_reset_leaves_multi);
    harness_add_test(tc, test_reset_drops_watch_and_releases_the_pin);
    harness_add_test(tc, test_reset_unsubscribes);
    harness_add_test(tc, test_reset_pipelined_behind_watch_and_subscribe);
    harness_add_test(tc, test_reset_logs_out_and_forgets_the_name);
    harness_add_test(tc, test_reset_after_a_blocking_command);
    harness_add_test(tc, test_reset_before_auth);
    harness_add_test(tc, test_time_and_lastsave_come_from_the_first_instance);
    harness_add_test(tc, test_dbsize_sums_the_instances);
    harness_add_test(tc, test_dbsize_with_an_instance_down);
    harness_add_test(tc, test_refused_keyless_commands_stay_refused);
    harness_add_test(tc, test_wait_goes_to_the_instance_of_the_last_write);
    harness_add_test(tc, test_wait_blocks_only_its_client);
    harness_add_test(tc, test_wait_counts_the_replica_that_has_the_write);
    harness_add_test(tc, test_info_keyspace_memory_replication_per_instance);
    harness_add_test(tc, test_start_up_commands_as_redis);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
