/* test_stateful.c: integration tests of keygate's stateful commands (issue #4): transactions, WATCH, blocking commands, pub/sub, split MGET/DEL, max-pinned. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/*
 * One harness (two TLS redis-servers + keygate, the repo's conf/registry.conf) serves
 * the "stateful" case; the "max-pinned" case starts its own with `max-pinned 2`.
 * Both use unchecked fixtures, each test in its own process (see harness.h). Tests stay independent
 * with distinct keys (q:sN:..., cache:sN:..., push:sN:...). Registry facts used:
 *   q:      instance=durable ttl=none
 *   cache:  instance=cache   ttl=1h
 *   push:   channel on cache
 *
 * Tests named test_bug_* reproduce keygate bugs found while writing this suite; they
 * fail until the bug is fixed (the comment above each says what Redis does).
 */

static struct harness h;

static void setup(void)
{
    ck_assert_msg(harness_start(&h, NULL) == 0, "harness_start: %s", h.error);
}

static void setup_max_pinned(void)
{
    struct harness_opts o = {.extra_config = "max-pinned 2\n"};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start (max-pinned 2): %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h); /* post-condition: no key on the backends breaks the registry */
    harness_stop(&h);
}

/* ---- helpers (cmd, next_reply and the expect_* reply checks are in harness.h) ---- */

static redisContext *client(void)
{
    return harness_must_client(&h);
}

static redisContext *direct(const char *backend)
{
    return harness_must_direct(&h, backend);
}

/* next_reply, saying what was awaited when nothing comes (timeout, close). */
static redisReply *read_reply(redisContext *c, const char *what)
{
    void *r = NULL;
    ck_assert_msg(redisGetReply(c, &r) == REDIS_OK && r != NULL, "%s: no reply: %s", what, c->errstr);
    return r;
}

/* An integer reply of one command run directly on a backend. */
#define direct_int(...) harness_direct_int(&h, __VA_ARGS__)

/* Backend clients (CLIENT LIST on the backend itself) whose line holds both substrings. */
static int backend_clients(const char *backend, const char *a, const char *b)
{
    redisContext *c = direct(backend);
    redisReply *r = cmd(c, "CLIENT LIST");
    ck_assert_msg(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS, "CLIENT LIST: got %s", describe(r));
    int n = 0;
    for (char *line = r->str; line && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        if (strstr(line, a) && (!b || strstr(line, b))) n++;
        line = end ? end + 1 : NULL;
    }
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* Poll until backend_clients(backend, a, b) == want (timeout_ms at most); returns the last count. */
static int wait_backend_clients(const char *backend, const char *a, const char *b, int want, int timeout_ms)
{
    int n = -1;
    for (long long deadline = now_ms() + timeout_ms; now_ms() < deadline; sleep_ms(20))
        if ((n = backend_clients(backend, a, b)) == want) return n;
    return n;
}

/* Blocked clients on a backend running `cmdname` (CLIENT LIST flags=b). */
static int blocked_on(const char *backend, const char *cmdname)
{
    char want[64];
    snprintf(want, sizeof want, "cmd=%s ", cmdname);
    return backend_clients(backend, " flags=b ", want);
}

static int wait_blocked(const char *backend, const char *cmdname, int want, int timeout_ms)
{
    int n = -1;
    for (long long deadline = now_ms() + timeout_ms; now_ms() < deadline; sleep_ms(20))
        if ((n = blocked_on(backend, cmdname)) == want) return n;
    return n;
}

/* ---- 1. WATCH: two clients race on one key ---- */

START_TEST(test_watch_race_exactly_one_exec_wins)
{
    enum { ROUNDS = 50 };
    redisContext *a = client(), *b = client();
    /* 50 rounds pin 100 WATCH connections in turn: a leaked pin would hit max-pinned 64 */
    for (int round = 0; round < ROUNDS; round++) {
        redisContext *first = round % 2 ? b : a, *second = round % 2 ? a : b;
        expect_status(cmd(a, "WATCH q:s1:counter"), "OK", "A WATCH");
        expect_status(cmd(b, "WATCH q:s1:counter"), "OK", "B WATCH");
        redisReply *ra = cmd(a, "GET q:s1:counter"), *rb = cmd(b, "GET q:s1:counter");
        ck_assert_msg(harness_same_reply(ra, rb), "round %d: A and B read different values", round);
        freeReplyObject(ra);
        freeReplyObject(rb);
        expect_status(cmd(a, "MULTI"), "OK", "A MULTI");
        expect_status(cmd(a, "INCR q:s1:counter"), "QUEUED", "A INCR");
        expect_status(cmd(b, "MULTI"), "OK", "B MULTI");
        expect_status(cmd(b, "INCR q:s1:counter"), "QUEUED", "B INCR");
        redisReply *r = cmd(first, "EXEC");
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_INTEGER &&
                          r->element[0]->integer == round + 1,
                      "round %d: first EXEC: want [:%d], got %s", round, round + 1, describe(r));
        freeReplyObject(r);
        r = cmd(second, "EXEC");
        ck_assert_msg(r->type == REDIS_REPLY_NIL, "round %d: second EXEC after the key changed: want nil, got %s",
                      round, describe(r));
        freeReplyObject(r);
    }
    expect_bulk(cmd(a, "GET q:s1:counter"), "50", "counter after 50 rounds");
    redisContext *d = direct("durable");
    expect_bulk(cmd(d, "GET q:s1:counter"), "50", "counter on the backend");
    redisFree(d);

    /* the same race on a TTL namespace: the EXEC array holds only the client's reply */
    for (int round = 0; round < 10; round++) {
        redisContext *first = round % 2 ? b : a, *second = round % 2 ? a : b;
        expect_status(cmd(a, "WATCH cache:s1:counter"), "OK", "A WATCH cache:");
        expect_status(cmd(b, "WATCH cache:s1:counter"), "OK", "B WATCH cache:");
        expect_status(cmd(a, "MULTI"), "OK", "A MULTI");
        expect_status(cmd(a, "INCR cache:s1:counter"), "QUEUED", "A INCR cache:");
        expect_status(cmd(b, "MULTI"), "OK", "B MULTI");
        expect_status(cmd(b, "INCR cache:s1:counter"), "QUEUED", "B INCR cache:");
        char want[16];
        snprintf(want, sizeof want, ":%d", round + 1);
        expect_array(cmd(first, "EXEC"), "first EXEC on cache:", 1, want);
        expect_nil(cmd(second, "EXEC"), "second EXEC on cache:");
    }
    long long ttl = direct_int("cache", "TTL cache:s1:counter");
    ck_assert_msg(ttl > 0 && ttl <= 3600, "cache:s1:counter: TTL %lld, want (0, 3600]", ttl);
    redisFree(a);
    redisFree(b);
}
END_TEST

START_TEST(test_watch_semantics_match_redis)
{
    redisContext *c = client(), *other = client();
    /* a watched key changed by another client aborts EXEC */
    expect_status(cmd(c, "SET q:s1b:k 1"), "OK", "SET");
    expect_status(cmd(c, "WATCH q:s1b:k"), "OK", "WATCH");
    expect_status(cmd(other, "SET q:s1b:k 2"), "OK", "other SET");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET q:s1b:k 3"), "QUEUED", "SET in MULTI");
    expect_nil(cmd(c, "EXEC"), "EXEC after a watched key changed");
    expect_bulk(cmd(c, "GET q:s1b:k"), "2", "the aborted SET wrote nothing");

    /* UNWATCH forgets it */
    expect_status(cmd(c, "WATCH q:s1b:k"), "OK", "WATCH");
    expect_status(cmd(c, "UNWATCH"), "OK", "UNWATCH");
    expect_status(cmd(other, "SET q:s1b:k 4"), "OK", "other SET after UNWATCH");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET q:s1b:k 5"), "QUEUED", "SET in MULTI");
    expect_array(cmd(c, "EXEC"), "EXEC after UNWATCH", 1, "+OK");

    /* DISCARD forgets it too */
    expect_status(cmd(c, "WATCH q:s1b:k"), "OK", "WATCH");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "DISCARD"), "OK", "DISCARD");
    expect_status(cmd(other, "SET q:s1b:k 6"), "OK", "other SET after DISCARD");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "INCR q:s1b:k"), "QUEUED", "INCR in MULTI");
    expect_array(cmd(c, "EXEC"), "EXEC after DISCARD", 1, ":7");

    /* an aborted (EXECABORT) transaction ends the WATCH as well */
    expect_status(cmd(c, "WATCH q:s1b:k"), "OK", "WATCH");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_error(cmd(c, "SET nope:s1b 1"), "NONAMESPACE", "SET nope in MULTI");
    expect_error(cmd(c, "EXEC"), "EXECABORT Transaction discarded because of previous errors.", "EXEC");
    expect_status(cmd(other, "SET q:s1b:k 10"), "OK", "other SET after EXECABORT");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "INCR q:s1b:k"), "QUEUED", "INCR in MULTI");
    expect_array(cmd(c, "EXEC"), "EXEC after EXECABORT", 1, ":11");

    /* WATCH then EXEC with nothing queued: an empty array; commands of the watch's instance
     * before MULTI see the data */
    expect_status(cmd(c, "WATCH q:s1b:k q:s1b:j"), "OK", "WATCH two keys");
    expect_bulk(cmd(c, "GET q:s1b:k"), "11", "GET while watching");
    expect_status(cmd(c, "SET cache:s1b:x y"), "OK", "a cache: write while watching durable keys");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_array(cmd(c, "EXEC"), "empty EXEC while watching", 0);

    /* across instances */
    expect_error(cmd(c, "WATCH q:s1b:k cache:s1b:k"), "CROSSINSTANCE", "WATCH across instances");
    expect_status(cmd(c, "WATCH q:s1b:k"), "OK", "WATCH durable");
    expect_error(cmd(c, "WATCH cache:s1b:k"), "CROSSINSTANCE", "then WATCH cache");
    expect_status(cmd(c, "UNWATCH"), "OK", "UNWATCH");
    expect_status(cmd(c, "UNWATCH"), "OK", "UNWATCH with nothing watched");
    expect_error(cmd(c, "WATCH nope:s1b"), "NONAMESPACE", "WATCH of a key in no namespace");
    expect_status(cmd(c, "PING"), "PONG", "PING at the end");
    redisFree(c);
    redisFree(other);
}
END_TEST

/* ---- 2. MULTI on a TTL namespace: exactly Redis's replies, and the TTLs are there ---- */

START_TEST(test_multi_on_ttl_namespace_replies_like_redis)
{
    redisContext *c = client();
    redisContext *d = direct("cache");
    const char *kg[] = {"cache:s2:a", "cache:s2:n", "cache:s2:h", "cache:s2:l", "cache:s2:z"};
    const char *dr[] = {"cache:s2d:a", "cache:s2d:n", "cache:s2d:h", "cache:s2d:l", "cache:s2d:z"};
    redisContext *conns[2] = {c, d};
    const char **keys[2] = {kg, dr};
    redisReply *exec[2];
    for (int k = 0; k < 2; k++) {
        redisContext *x = conns[k];
        const char **K = keys[k];
        expect_status(cmd(x, "MULTI"), "OK", "MULTI");
        expect_status(cmd(x, "SET %s v", K[0]), "QUEUED", "SET");
        expect_status(cmd(x, "INCR %s", K[1]), "QUEUED", "INCR");
        expect_status(cmd(x, "INCRBY %s 5", K[1]), "QUEUED", "INCRBY");
        expect_status(cmd(x, "HSET %s f v g w", K[2]), "QUEUED", "HSET");
        expect_status(cmd(x, "GET %s", K[0]), "QUEUED", "GET");
        expect_status(cmd(x, "RPUSH %s a b", K[3]), "QUEUED", "RPUSH");
        expect_status(cmd(x, "LPOP %s", K[3]), "QUEUED", "LPOP");
        expect_status(cmd(x, "ZADD %s 1 m", K[4]), "QUEUED", "ZADD");
        expect_status(cmd(x, "HGET %s f", K[2]), "QUEUED", "HGET");
        expect_status(cmd(x, "INCR %s", K[0]), "QUEUED", "INCR of a string (exec-time error)");
        expect_status(cmd(x, "PING"), "QUEUED", "PING");
        expect_status(cmd(x, "ECHO e"), "QUEUED", "ECHO");
        exec[k] = cmd(x, "EXEC");
    }
    /* the direct twins have no TTL: gone before any assertion, so that the suite's post-condition
     * holds whatever runs after this test (it held only because a later test restarted cache) */
    expect_int(cmd(d, "DEL %s %s %s %s %s", dr[0], dr[1], dr[2], dr[3], dr[4]), 5, "DEL the direct twins");
    ck_assert_msg(exec[1]->type == REDIS_REPLY_ARRAY && exec[1]->elements == 12, "direct EXEC: got %s",
                  describe(exec[1]));
    ck_assert_msg(exec[0]->type == REDIS_REPLY_ARRAY && exec[0]->elements == exec[1]->elements,
                  "keygate EXEC: want an array of %zu (the client's replies only), got %s", exec[1]->elements,
                  describe(exec[0]));
    for (size_t i = 0; i < exec[1]->elements; i++) {
        char want[320];
        snprintf(want, sizeof want, "%s", describe(exec[1]->element[i]));
        ck_assert_msg(harness_same_reply(exec[0]->element[i], exec[1]->element[i]),
                      "EXEC element %zu: Redis %s, keygate %s", i, want, describe(exec[0]->element[i]));
    }
    freeReplyObject(exec[0]);
    freeReplyObject(exec[1]);
    for (int i = 0; i < 5; i++) {
        long long ttl = direct_int("cache", "TTL %s", kg[i]);
        ck_assert_msg(ttl > 0 && ttl <= 3600, "%s written in MULTI: TTL %lld, want (0, 3600]", kg[i], ttl);
    }
    /* a client TTL set inside the transaction is kept */
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET cache:s2:e v EX 100"), "QUEUED", "SET EX 100");
    expect_status(cmd(c, "HSET cache:s2:eh f v"), "QUEUED", "HSET");
    expect_status(cmd(c, "EXPIRE cache:s2:eh 200"), "QUEUED", "EXPIRE 200");
    expect_array(cmd(c, "EXEC"), "EXEC with client TTLs", 3, "+OK", ":1", ":1");
    long long ttl = direct_int("cache", "TTL cache:s2:e");
    ck_assert_msg(ttl > 90 && ttl <= 100, "SET EX 100 in MULTI: TTL %lld", ttl);
    ttl = direct_int("cache", "TTL cache:s2:eh");
    ck_assert_msg(ttl > 190 && ttl <= 200, "EXPIRE 200 in MULTI: TTL %lld", ttl);

    /* durable (ttl=none): nothing injected, no TTL */
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "HSET q:s2:h f v"), "QUEUED", "HSET q:");
    expect_status(cmd(c, "INCR q:s2:n"), "QUEUED", "INCR q:");
    expect_array(cmd(c, "EXEC"), "EXEC on durable", 2, ":1", ":1");
    ck_assert_int_eq(direct_int("durable", "TTL q:s2:h"), -1);
    ck_assert_int_eq(direct_int("durable", "TTL q:s2:n"), -1);

    /* MULTI / EXEC with nothing queued */
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_array(cmd(c, "EXEC"), "empty transaction", 0);
    redisFree(d);
    redisFree(c);
}
END_TEST

/* ---- 3. EXECABORT, DISCARD, nesting ---- */

START_TEST(test_execabort_cases)
{
    redisContext *c = client();
    struct {
        const char *bad;
        const char *error;
    } cases[] = {
        {"SET cache:s3:x 1", "CROSSINSTANCE"},
        {"SET nope:s3 1", "NONAMESPACE key 'nope:s3' matches no namespace in the registry"},
        {"CONFIG GET x", "DENIED"},
        {"FLUSHALL", "DENIED"},
        {"FOOBAR q:s3:a", "ERR unknown command 'FOOBAR', with args beginning with: 'q:s3:a' "},
        {"GET", "ERR wrong number of arguments for 'get' command"},
        {"MGET q:s3:a cache:s3:b", "CROSSINSTANCE"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[128];
        snprintf(what, sizeof what, "case %zu: %s", i, cases[i].bad);
        expect_status(cmd(c, "MULTI"), "OK", "MULTI");
        expect_status(cmd(c, "SET q:s3:a %d", (int)i), "QUEUED", "SET q:s3:a");
        expect_error(cmd(c, cases[i].bad), cases[i].error, what);
        expect_status(cmd(c, "INCR q:s3:n"), "QUEUED", "INCR after the error");
        expect_error(cmd(c, "EXEC"), "EXECABORT Transaction discarded because of previous errors.", what);
        ck_assert_msg(direct_int("durable", "EXISTS q:s3:a") == 0 && direct_int("durable", "EXISTS q:s3:n") == 0,
                      "%s: the aborted transaction wrote", what);
        expect_error(cmd(c, "EXEC"), "ERR EXEC without MULTI", "EXEC after EXECABORT");
    }
    /* the error first, then commands of another instance: still one EXECABORT */
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_error(cmd(c, "SET nope:s3 1"), "NONAMESPACE", "first command refused");
    expect_status(cmd(c, "SET cache:s3:c 1"), "QUEUED", "cache: command after the refusal");
    expect_error(cmd(c, "SET q:s3:c 1"), "CROSSINSTANCE", "durable command in a cache transaction");
    expect_error(cmd(c, "EXEC"), "EXECABORT", "EXEC");
    ck_assert_int_eq(direct_int("cache", "EXISTS cache:s3:c"), 0);

    /* DISCARD */
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET q:s3:d 1"), "QUEUED", "SET");
    expect_status(cmd(c, "DISCARD"), "OK", "DISCARD");
    ck_assert_int_eq(direct_int("durable", "EXISTS q:s3:d"), 0);
    expect_error(cmd(c, "EXEC"), "ERR EXEC without MULTI", "EXEC after DISCARD");
    expect_error(cmd(c, "DISCARD"), "ERR DISCARD without MULTI", "DISCARD without MULTI");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_error(cmd(c, "SET nope:s3 1"), "NONAMESPACE", "refused");
    expect_status(cmd(c, "DISCARD"), "OK", "DISCARD of a dirty transaction");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI after DISCARD of a dirty transaction");
    expect_status(cmd(c, "SET q:s3:d 2"), "QUEUED", "SET");
    expect_array(cmd(c, "EXEC"), "clean transaction after a discarded dirty one", 1, "+OK");

    /* nested MULTI: an error, the transaction goes on (as Redis) */
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_error(cmd(c, "MULTI"), "ERR MULTI calls can not be nested", "nested MULTI");
    expect_status(cmd(c, "INCR q:s3:e"), "QUEUED", "INCR");
    expect_array(cmd(c, "EXEC"), "EXEC after a nested MULTI", 1, ":1");

    /* a later transaction after all this works; the connection is fine */
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "INCR q:s3:e"), "QUEUED", "INCR");
    expect_status(cmd(c, "GET q:s3:e"), "QUEUED", "GET");
    expect_array(cmd(c, "EXEC"), "last EXEC", 2, ":2", "2");
    expect_status(cmd(c, "PING"), "PONG", "PING");
    redisFree(c);
}
END_TEST

/* BUG: Redis 7 answers WATCH inside MULTI with an error but does not flag the
 * transaction: MULTI / WATCH k / INCR k / EXEC -> -ERR WATCH inside MULTI..., +QUEUED, [1].
 * keygate counts it as a queue-time error and answers EXEC with -EXECABORT. */
START_TEST(test_bug_watch_inside_multi_does_not_abort_transaction)
{
    const char *who[] = {"durable (direct)", "keygate"};
    for (int k = 0; k < 2; k++) {
        redisContext *c = k == 0 ? direct("durable") : client();
        const char *key = k == 0 ? "q:s3w:direct" : "q:s3w:keygate";
        expect_status(cmd(c, "MULTI"), "OK", who[k]);
        expect_error(cmd(c, "WATCH %s", key), "ERR WATCH inside MULTI is not allowed", who[k]);
        expect_status(cmd(c, "INCR %s", key), "QUEUED", who[k]);
        expect_array(cmd(c, "EXEC"), who[k], 1, ":1");
        redisFree(c);
    }
}
END_TEST

/* ---- 4. blocking commands run on their own connection ---- */

START_TEST(test_blpop_does_not_delay_other_clients)
{
    redisContext *a = client(), *b = client();
    expect_status(cmd(b, "SET q:s4:k hello"), "OK", "SET");
    redisAppendCommand(a, "BLPOP q:s4:list 10");
    send_appended(a, "pipeline");
    ck_assert_int_eq(wait_blocked("durable", "blpop", 1, 3000), 1);

    long long start = now_ms();
    for (int i = 0; i < 1000; i++) redisAppendCommand(b, "GET q:s4:k");
    for (int i = 0; i < 1000; i++) expect_bulk(next_reply(b), "hello", "pipelined GET while A blocks");
    long long took = now_ms() - start;
    ck_assert_msg(took < 1000, "1000 GETs on durable while another client blocks took %lld ms", took);

    expect_int(cmd(b, "RPUSH q:s4:list x"), 1, "RPUSH");
    expect_array(next_reply(a), "BLPOP after RPUSH", 2, "q:s4:list", "x");
    expect_int(cmd(b, "LLEN q:s4:list"), 0, "the element was consumed by BLPOP");
    /* A is usable again, on the shared connection */
    expect_bulk(cmd(a, "GET q:s4:k"), "hello", "A after BLPOP");

    /* timeout expiry */
    start = now_ms();
    expect_nil(cmd(a, "BLPOP q:s4:empty 1"), "BLPOP timeout 1 on an empty list");
    took = now_ms() - start;
    ck_assert_msg(took >= 900 && took < 3000, "BLPOP 1 returned after %lld ms", took);

    /* BRPOP / BLMOVE / BZPOPMIN on data that is already there: no blocking */
    expect_int(cmd(b, "RPUSH q:s4:l2 a b c"), 3, "RPUSH");
    expect_array(cmd(a, "BRPOP q:s4:l2 1"), "BRPOP", 2, "q:s4:l2", "c");
    expect_bulk(cmd(a, "BLMOVE q:s4:l2 q:s4:l3 LEFT RIGHT 1"), "a", "BLMOVE");
    expect_bulk(cmd(a, "BRPOPLPUSH q:s4:l2 q:s4:l3 1"), "b", "BRPOPLPUSH");
    expect_int(cmd(b, "ZADD q:s4:z 1 m 2 n"), 2, "ZADD");
    expect_array(cmd(a, "BZPOPMIN q:s4:z 1"), "BZPOPMIN", 3, "q:s4:z", "m", "1");
    expect_array(cmd(a, "BZPOPMAX q:s4:z 1"), "BZPOPMAX", 3, "q:s4:z", "n", "2");
    redisReply *r = cmd(a, "BLMPOP 1 1 q:s4:l3 LEFT");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_STRING &&
                      strcmp(r->element[0]->str, "q:s4:l3") == 0,
                  "BLMPOP: got %s", describe(r));
    freeReplyObject(r);

    /* a blocked client's own next commands wait for it (as on Redis) */
    redisAppendCommand(a, "BLPOP q:s4:empty2 1");
    redisAppendCommand(a, "GET q:s4:k");
    start = now_ms();
    send_appended(a, "pipeline");
    expect_nil(next_reply(a), "pipelined BLPOP timeout");
    expect_bulk(next_reply(a), "hello", "GET pipelined after BLPOP");
    took = now_ms() - start;
    ck_assert_msg(took >= 900, "pipelined BLPOP 1 + GET answered after %lld ms", took);
    redisFree(a);
    redisFree(b);
}
END_TEST

START_TEST(test_xread_block)
{
    redisContext *a = client(), *b = client();
    expect_status(cmd(b, "SET q:s4x:k v"), "OK", "SET");
    redisAppendCommand(a, "XREAD COUNT 10 BLOCK 5000 STREAMS q:s4x:stream $");
    send_appended(a, "pipeline");
    ck_assert_int_eq(wait_blocked("durable", "xread", 1, 3000), 1);
    long long start = now_ms();
    for (int i = 0; i < 200; i++) redisAppendCommand(b, "GET q:s4x:k");
    for (int i = 0; i < 200; i++) expect_bulk(next_reply(b), "v", "GET while XREAD blocks");
    ck_assert_msg(now_ms() - start < 1000, "GETs delayed by a blocked XREAD");
    redisReply *id = cmd(b, "XADD q:s4x:stream * f hello");
    ck_assert_msg(id->type == REDIS_REPLY_STRING, "XADD: %s", describe(id));
    redisReply *r = next_reply(a);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY &&
                      r->element[0]->elements == 2 && strcmp(r->element[0]->element[0]->str, "q:s4x:stream") == 0 &&
                      r->element[0]->element[1]->elements == 1 &&
                      strcmp(r->element[0]->element[1]->element[0]->element[0]->str, id->str) == 0,
                  "XREAD BLOCK after XADD: got %s", describe(r));
    freeReplyObject(r);
    freeReplyObject(id);

    start = now_ms();
    expect_nil(cmd(a, "XREAD BLOCK 500 STREAMS q:s4x:stream $"), "XREAD BLOCK 500 timeout");
    long long took = now_ms() - start;
    ck_assert_msg(took >= 400 && took < 3000, "XREAD BLOCK 500 answered after %lld ms", took);

    /* XREADGROUP ... BLOCK */
    expect_status(cmd(b, "XGROUP CREATE q:s4x:stream g $"), "OK", "XGROUP CREATE");
    redisAppendCommand(a, "XREADGROUP GROUP g c1 BLOCK 5000 STREAMS q:s4x:stream >");
    send_appended(a, "pipeline");
    ck_assert_int_eq(wait_blocked("durable", "xreadgroup", 1, 3000), 1);
    r = cmd(b, "XADD q:s4x:stream * f two");
    freeReplyObject(r);
    r = next_reply(a);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1, "XREADGROUP BLOCK after XADD: got %s", describe(r));
    freeReplyObject(r);
    redisFree(a);
    redisFree(b);
}
END_TEST

/* BUG: a blocking command on a TTL namespace key never blocks. keygate wraps the write
 * with its TTL fix in MULTI ... EXEC, and Redis runs blocking commands inside MULTI
 * as non-blocking: BLPOP cache:k 2 on an empty list answers nil at once instead of
 * after 2 s, and never sees a later RPUSH. Same for BLMOVE to a cache: destination. */
START_TEST(test_bug_blpop_on_ttl_namespace_blocks)
{
    redisContext *a = client(), *b = client();
    long long start = now_ms();
    expect_nil(cmd(a, "BLPOP cache:s4c:empty 2"), "BLPOP cache: timeout");
    long long took = now_ms() - start;
    ck_assert_msg(took >= 1800, "BLPOP cache:s4c:empty 2 answered nil after %lld ms: it did not block", took);

    redisAppendCommand(a, "BLPOP cache:s4c:list 5");
    send_appended(a, "pipeline");
    ck_assert_msg(wait_blocked("cache", "blpop", 1, 2000) == 1,
                  "BLPOP cache:s4c:list 5 is not blocked on the cache backend");
    expect_int(cmd(b, "RPUSH cache:s4c:list x"), 1, "RPUSH cache:");
    expect_array(next_reply(a), "BLPOP cache: after RPUSH", 2, "cache:s4c:list", "x");

    redisAppendCommand(a, "BLMOVE cache:s4c:src cache:s4c:dst LEFT RIGHT 5");
    send_appended(a, "pipeline");
    ck_assert_msg(wait_blocked("cache", "blmove", 1, 2000) == 1, "BLMOVE to cache: is not blocked on the backend");
    expect_int(cmd(b, "RPUSH cache:s4c:src y"), 1, "RPUSH src");
    expect_bulk(next_reply(a), "y", "BLMOVE after RPUSH");
    long long ttl = direct_int("cache", "TTL cache:s4c:dst");
    ck_assert_msg(ttl > 0 && ttl <= 3600, "BLMOVE destination: TTL %lld", ttl);
    redisFree(a);
    redisFree(b);
}
END_TEST

/* ---- 5. a client that leaves while blocked ---- */

START_TEST(test_disconnect_while_blocked_closes_the_connection)
{
    ck_assert_int_eq(wait_blocked("durable", "blpop", 0, 3000), 0);
    redisContext *a = client();
    redisAppendCommand(a, "BLPOP q:s5:list 30");
    send_appended(a, "pipeline");
    ck_assert_msg(wait_blocked("durable", "blpop", 1, 3000) == 1, "A's BLPOP is not blocked on the backend");
    redisFree(a);
    int left = wait_blocked("durable", "blpop", 0, 2000);
    ck_assert_msg(left == 0, "2 s after the client left, %d blocked BLPOP connection(s) remain on durable", left);

    /* the element goes to a live client, not to a dead blocked connection */
    redisContext *b = client(), *c = client();
    expect_int(cmd(c, "RPUSH q:s5:list x"), 1, "RPUSH after the blocked client left");
    ck_assert_int_eq(direct_int("durable", "LLEN q:s5:list"), 1);
    expect_array(cmd(b, "BLPOP q:s5:list 5"), "BLPOP by another client", 2, "q:s5:list", "x");

    /* and again with B blocked first, then the push */
    redisAppendCommand(b, "BLPOP q:s5:list 5");
    send_appended(b, "pipeline");
    ck_assert_int_eq(wait_blocked("durable", "blpop", 1, 3000), 1);
    expect_int(cmd(c, "RPUSH q:s5:list y"), 1, "RPUSH");
    expect_array(next_reply(b), "B's BLPOP", 2, "q:s5:list", "y");

    /* a client leaving mid-WATCH and mid-SUBSCRIBE: its dedicated connections are closed */
    int watching = backend_clients("durable", "cmd=watch ", NULL);
    redisContext *w = client();
    expect_status(cmd(w, "WATCH q:s5:w"), "OK", "WATCH");
    ck_assert_int_eq(backend_clients("durable", "cmd=watch ", NULL), watching + 1);
    redisFree(w);
    ck_assert_msg(wait_backend_clients("durable", "cmd=watch ", NULL, watching, 2000) == watching,
                  "the WATCH connection of a client that left is still open");

    int subs = backend_clients("cache", " sub=1 ", NULL);
    redisContext *s = client();
    expect_array(cmd(s, "SUBSCRIBE push:s5:ch"), "SUBSCRIBE", 3, "subscribe", "push:s5:ch", ":1");
    ck_assert_int_eq(backend_clients("cache", " sub=1 ", NULL), subs + 1);
    redisFree(s);
    ck_assert_msg(wait_backend_clients("cache", " sub=1 ", NULL, subs, 2000) == subs,
                  "the subscriber connection of a client that left is still open");
    expect_int(cmd(c, "PUBLISH push:s5:ch m"), 0, "PUBLISH to nobody");
    redisFree(b);
    redisFree(c);
}
END_TEST

/* ---- 6. pub/sub ---- */

START_TEST(test_pubsub_fan_out_and_rules)
{
    enum { SUBS = 3 };
    redisContext *subs[SUBS], *pub = client();
    for (int i = 0; i < SUBS; i++) {
        subs[i] = client();
        expect_array(cmd(subs[i], "SUBSCRIBE push:s6:feed"), "SUBSCRIBE", 3, "subscribe", "push:s6:feed", ":1");
    }
    expect_int(cmd(pub, "PUBLISH push:s6:feed hello"), SUBS, "PUBLISH to 3 subscribers");
    for (int i = 0; i < SUBS; i++) expect_array(next_reply(subs[i]), "message", 3, "message", "push:s6:feed", "hello");

    redisContext *p = client();
    expect_array(cmd(p, "PSUBSCRIBE push:s6:*"), "PSUBSCRIBE", 3, "psubscribe", "push:s6:*", ":1");
    expect_int(cmd(pub, "PUBLISH push:s6:other hi"), 1, "PUBLISH matching the pattern only");
    expect_array(next_reply(p), "pmessage", 4, "pmessage", "push:s6:*", "push:s6:other", "hi");
    expect_int(cmd(pub, "PUBLISH push:s6:feed again"), SUBS + 1, "PUBLISH to 3 + the pattern");
    expect_array(next_reply(p), "pmessage", 4, "pmessage", "push:s6:*", "push:s6:feed", "again");
    for (int i = 0; i < SUBS; i++)
        expect_array(next_reply(subs[i]), "second message", 3, "message", "push:s6:feed", "again");

    /* PUBSUB introspection */
    expect_array(cmd(pub, "PUBSUB NUMSUB push:s6:feed push:s6:none"), "PUBSUB NUMSUB", 4, "push:s6:feed", ":3",
                 "push:s6:none", ":0");
    redisReply *r = cmd(pub, "PUBSUB CHANNELS push:s6:*");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && strcmp(r->element[0]->str, "push:s6:feed") == 0,
                  "PUBSUB CHANNELS push:s6:*: got %s", describe(r));
    freeReplyObject(r);
    r = cmd(pub, "PUBSUB NUMPAT");
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer >= 1, "PUBSUB NUMPAT: got %s", describe(r));
    freeReplyObject(r);

    /* channels outside the registry */
    expect_error(cmd(pub, "SUBSCRIBE q:x"), "NONAMESPACE", "SUBSCRIBE to a key namespace");
    expect_error(cmd(pub, "PUBLISH q:x m"), "NONAMESPACE", "PUBLISH to a key namespace");
    expect_error(cmd(pub, "PSUBSCRIBE *"), "NONAMESPACE", "PSUBSCRIBE *");
    expect_error(cmd(pub, "PSUBSCRIBE pu*"), "NONAMESPACE", "PSUBSCRIBE with a prefix shorter than push:");
    expect_error(cmd(pub, "SUBSCRIBE push:s6:ok nope"), "NONAMESPACE", "SUBSCRIBE with one bad channel");
    expect_status(cmd(pub, "SET q:s6:k v"), "OK", "the refused SUBSCRIBEs left pub in normal mode");

    /* subscribed mode: Redis's rules */
    redisContext *s = subs[0];
    expect_error(cmd(s, "GET q:s6:k"),
                 "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in "
                 "this context",
                 "GET in subscribed mode");
    expect_error(cmd(s, "MULTI"), "ERR Can't execute 'multi'", "MULTI in subscribed mode");
    expect_array(cmd(s, "PING"), "PING in subscribed mode", 2, "pong", "");
    expect_array(cmd(s, "PING hi"), "PING hi in subscribed mode", 2, "pong", "hi");
    expect_array(cmd(s, "SUBSCRIBE push:s6:two"), "second SUBSCRIBE", 3, "subscribe", "push:s6:two", ":2");
    expect_array(cmd(s, "PSUBSCRIBE push:s6:p*"), "PSUBSCRIBE while subscribed", 3, "psubscribe", "push:s6:p*", ":3");
    expect_error(cmd(s, "SUBSCRIBE q:x"), "NONAMESPACE", "bad SUBSCRIBE while subscribed");
    expect_array(cmd(s, "UNSUBSCRIBE push:s6:feed"), "UNSUBSCRIBE one", 3, "unsubscribe", "push:s6:feed", ":2");
    expect_int(cmd(pub, "PUBLISH push:s6:feed x"), SUBS - 1 + 1, "PUBLISH after one unsubscribed");
    expect_array(cmd(s, "UNSUBSCRIBE"), "UNSUBSCRIBE all channels", 3, "unsubscribe", "push:s6:two", ":1");
    expect_array(cmd(s, "PUNSUBSCRIBE"), "PUNSUBSCRIBE all", 3, "punsubscribe", "push:s6:p*", ":0");
    /* back to normal */
    expect_bulk(cmd(s, "GET q:s6:k"), "v", "GET after unsubscribing everything");
    expect_status(cmd(s, "PING"), "PONG", "PING after unsubscribing everything");
    expect_array(cmd(s, "UNSUBSCRIBE"), "UNSUBSCRIBE with nothing subscribed", 3, "unsubscribe", "nil", ":0");
    expect_status(cmd(s, "MULTI"), "OK", "MULTI after unsubscribing");
    expect_status(cmd(s, "INCR q:s6:n"), "QUEUED", "INCR");
    expect_array(cmd(s, "EXEC"), "EXEC after unsubscribing", 1, ":1");

    for (int i = 1; i < SUBS; i++) expect_array(next_reply(subs[i]), "message x", 3, "message", "push:s6:feed", "x");
    expect_array(next_reply(p), "pmessage x", 4, "pmessage", "push:s6:*", "push:s6:feed", "x");
    for (int i = 0; i < SUBS; i++) redisFree(subs[i]);
    redisFree(p);
    redisFree(pub);
}
END_TEST

/* BUG: replies must keep request order across the subscriber connection and keygate's
 * own answers. Redis, pipelined SUBSCRIBE ch + PING: [subscribe ch 1] then [pong ""].
 * keygate answers PING locally at once, before the backend's subscribe confirmation. */
START_TEST(test_bug_subscribe_then_ping_pipelined_keeps_order)
{
    for (int round = 0; round < 20; round++) {
        redisContext *s = client();
        redisAppendCommand(s, "SUBSCRIBE push:s6o:%d", round);
        redisAppendCommand(s, "PING");
        redisAppendCommand(s, "GET q:s6o:k");
        send_appended(s, "pipeline");
        redisReply *r = next_reply(s);
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 3 && strcmp(r->element[0]->str, "subscribe") == 0,
                      "round %d: first reply of SUBSCRIBE+PING+GET: want [subscribe ...], got %s", round, describe(r));
        freeReplyObject(r);
        expect_array(next_reply(s), "PING after SUBSCRIBE", 2, "pong", "");
        expect_error(next_reply(s), "ERR Can't execute 'get'", "GET after SUBSCRIBE");
        redisFree(s);
    }
}
END_TEST

/* BUG: Redis leaves subscribed mode as soon as it processes the UNSUBSCRIBE that ends the
 * last subscription: pipelined UNSUBSCRIBE + GET k answers [unsubscribe ch 0] then the
 * value. keygate decides GET while the confirmation is still on its way and refuses it. */
START_TEST(test_bug_unsubscribe_then_get_pipelined)
{
    redisContext *s = client();
    expect_status(cmd(s, "SET q:s6u:k v"), "OK", "SET");
    expect_array(cmd(s, "SUBSCRIBE push:s6u:a"), "SUBSCRIBE", 3, "subscribe", "push:s6u:a", ":1");
    redisAppendCommand(s, "UNSUBSCRIBE push:s6u:a");
    redisAppendCommand(s, "GET q:s6u:k");
    redisAppendCommand(s, "PING");
    send_appended(s, "pipeline");
    expect_array(next_reply(s), "UNSUBSCRIBE", 3, "unsubscribe", "push:s6u:a", ":0");
    expect_bulk(next_reply(s), "v", "GET pipelined after the last UNSUBSCRIBE");
    expect_status(next_reply(s), "PONG", "PING pipelined after the last UNSUBSCRIBE");
    redisFree(s);
}
END_TEST

/* ---- 7. MGET / DEL / EXISTS / UNLINK / TOUCH across instances ---- */

static void key_s7(char *out, size_t len, int i)
{
    snprintf(out, len, i % 2 == 0 ? "q:s7:%d" : "cache:s7:%d", i);
}

START_TEST(test_split_commands_merge_in_order)
{
    enum { N = 100 };
    redisContext *c = client();
    for (int i = 0; i < N; i++) {
        char key[32];
        key_s7(key, sizeof key, i);
        if (i % 3 != 0) redisAppendCommand(c, "SET %s v%d", key, i);
    }
    for (int i = 0; i < N; i++)
        if (i % 3 != 0) expect_status(next_reply(c), "OK", "SET");

    const char *argv[N + 1];
    char keys[N][32];
    argv[0] = "MGET";
    for (int i = 0; i < N; i++) {
        key_s7(keys[i], sizeof keys[i], i);
        argv[i + 1] = keys[i];
    }
    redisReply *r = redisCommandArgv(c, N + 1, argv, NULL);
    ck_assert_msg(r != NULL, "MGET: %s", c->errstr);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == N, "MGET of 100 keys: got %s", describe(r));
    for (int i = 0; i < N; i++) {
        const redisReply *e = r->element[i];
        if (i % 3 == 0) {
            ck_assert_msg(e->type == REDIS_REPLY_NIL, "MGET element %d (%s, missing): got %s", i, keys[i], describe(e));
        } else {
            char want[16];
            snprintf(want, sizeof want, "v%d", i);
            ck_assert_msg(e->type == REDIS_REPLY_STRING && strcmp(e->str, want) == 0,
                          "MGET element %d (%s): want %s, got %s", i, keys[i], want, describe(e));
        }
    }
    freeReplyObject(r);

    /* repeated keys, the same key on both sides */
    expect_array(cmd(c, "MGET cache:s7:1 q:s7:2 cache:s7:1 q:s7:0 q:s7:2"), "MGET with repeats", 5, "v1", "v2", "v1",
                 "nil", "v2");
    /* one instance only: not split */
    expect_array(cmd(c, "MGET q:s7:2 q:s7:4"), "MGET on durable only", 2, "v2", "v4");

    /* integer sums */
    expect_int(cmd(c, "EXISTS q:s7:2 cache:s7:1 q:s7:0 cache:s7:3 cache:s7:1"), 3, "EXISTS (repeat counted)");
    expect_int(cmd(c, "TOUCH q:s7:2 cache:s7:1 q:s7:0"), 2, "TOUCH");
    expect_int(cmd(c, "UNLINK q:s7:2 cache:s7:1 cache:s7:3"), 2, "UNLINK");
    ck_assert_int_eq(direct_int("durable", "EXISTS q:s7:2"), 0);
    ck_assert_int_eq(direct_int("cache", "EXISTS cache:s7:1"), 0);
    expect_int(cmd(c, "DEL q:s7:4 cache:s7:5 q:s7:6 cache:s7:7 q:s7:2"), 3, "DEL (q:s7:6 was never set)");
    ck_assert_int_eq(direct_int("durable", "EXISTS q:s7:4"), 0);
    ck_assert_int_eq(direct_int("cache", "EXISTS cache:s7:5"), 0);
    ck_assert_int_eq(direct_int("cache", "EXISTS cache:s7:7"), 0);
    expect_bulk(cmd(c, "GET q:s7:8"), "v8", "untouched key");

    /* not splittable */
    expect_error(cmd(c, "MSET q:s7:x 1 cache:s7:y 2"), "CROSSINSTANCE", "MSET across instances");
    expect_error(cmd(c, "MSETNX q:s7:x 1 cache:s7:y 2"), "CROSSINSTANCE", "MSETNX across instances");
    expect_error(cmd(c, "SUNIONSTORE q:s7:d q:s7:a cache:s7:b"), "CROSSINSTANCE", "SUNIONSTORE across instances");
    ck_assert_int_eq(direct_int("durable", "EXISTS q:s7:x"), 0);
    ck_assert_int_eq(direct_int("cache", "EXISTS cache:s7:y"), 0);
    expect_error(cmd(c, "MGET q:s7:8 nope:s7"), "NONAMESPACE", "MGET with a key in no namespace");
    expect_error(cmd(c, "DEL q:s7:8 nope:s7"), "NONAMESPACE", "DEL with a key in no namespace");
    ck_assert_int_eq(direct_int("durable", "EXISTS q:s7:8"), 1);
    redisFree(c);
}
END_TEST

/* ---- 8. one pipeline through every path: order and values ---- */

START_TEST(test_mixed_pipeline_keeps_order)
{
    redisContext *c = client();
    for (int round = 0; round < 20; round++) {
        redisAppendCommand(c, "SET q:s8:%d:a 1", round);     /* OK */
        redisAppendCommand(c, "SET cache:s8:%d:b x", round); /* OK */
        redisAppendCommand(c, "MULTI");                      /* OK */
        redisAppendCommand(c, "INCR q:s8:%d:a", round);      /* QUEUED */
        redisAppendCommand(c, "GET q:s8:%d:a", round);       /* QUEUED */
        redisAppendCommand(c, "EXEC");                       /* [2, "2"] */
        redisAppendCommand(c, "MGET q:s8:%d:a cache:s8:%d:b q:s8:%d:none cache:s8:%d:none", round, round, round,
                           round);                           /* ["2", "x", nil, nil] */
        redisAppendCommand(c, "GET cache:s8:%d:b", round);   /* "x" */
        redisAppendCommand(c, "WATCH q:s8:%d:a", round);     /* OK */
        redisAppendCommand(c, "GET q:s8:%d:a", round);       /* "2" */
        redisAppendCommand(c, "GET cache:s8:%d:b", round);   /* "x" */
        redisAppendCommand(c, "UNWATCH");                    /* OK */
        redisAppendCommand(c, "PING");                       /* PONG */
        redisAppendCommand(c, "WATCH q:s8:%d:a", round);     /* OK */
        redisAppendCommand(c, "MULTI");                      /* OK */
        redisAppendCommand(c, "INCR q:s8:%d:a", round);      /* QUEUED */
        redisAppendCommand(c, "EXEC");                       /* [3] */
        redisAppendCommand(c, "MULTI");                      /* OK */
        redisAppendCommand(c, "SET cache:s8:%d:c 1", round); /* QUEUED */
        redisAppendCommand(c, "EXEC");                       /* [OK] */
        redisAppendCommand(c, "RPUSH q:s8:%d:l z", round);   /* 1 */
        redisAppendCommand(c, "BLPOP q:s8:%d:l 1", round);   /* [l, z] */
        redisAppendCommand(c, "ECHO e%d", round);            /* "e<round>" */
        redisAppendCommand(c, "EXISTS q:s8:%d:a cache:s8:%d:b cache:s8:%d:c", round, round, round); /* 3 */
        redisAppendCommand(c, "DEL q:s8:%d:a cache:s8:%d:b", round, round);                         /* 2 */
        redisAppendCommand(c, "GET q:s8:%d:a", round);                                              /* nil */
        redisAppendCommand(c, "PING");                                                              /* PONG */
        send_appended(c, "pipeline");
        char what[64], key[48], echo[16];
        snprintf(what, sizeof what, "round %d", round);
        expect_status(next_reply(c), "OK", what);
        expect_status(next_reply(c), "OK", what);
        expect_status(next_reply(c), "OK", what);
        expect_status(next_reply(c), "QUEUED", what);
        expect_status(next_reply(c), "QUEUED", what);
        expect_array(next_reply(c), what, 2, ":2", "2");
        expect_array(next_reply(c), what, 4, "2", "x", "nil", "nil");
        expect_bulk(next_reply(c), "x", what);
        expect_status(next_reply(c), "OK", what);
        expect_bulk(next_reply(c), "2", what);
        expect_bulk(next_reply(c), "x", what);
        expect_status(next_reply(c), "OK", what);
        expect_status(next_reply(c), "PONG", what);
        expect_status(next_reply(c), "OK", what);
        expect_status(next_reply(c), "OK", what);
        expect_status(next_reply(c), "QUEUED", what);
        expect_array(next_reply(c), what, 1, ":3");
        expect_status(next_reply(c), "OK", what);
        expect_status(next_reply(c), "QUEUED", what);
        expect_array(next_reply(c), what, 1, "+OK");
        expect_int(next_reply(c), 1, what);
        snprintf(key, sizeof key, "q:s8:%d:l", round);
        expect_array(next_reply(c), what, 2, key, "z");
        snprintf(echo, sizeof echo, "e%d", round);
        expect_bulk(next_reply(c), echo, what);
        expect_int(next_reply(c), 3, what);
        expect_int(next_reply(c), 2, what);
        expect_nil(next_reply(c), what);
        expect_status(next_reply(c), "PONG", what);
    }
    redisFree(c);
}
END_TEST

/* A blocking command inside MULTI runs without blocking, as on Redis. */
START_TEST(test_blocking_command_inside_multi_does_not_block)
{
    redisContext *c = client();
    long long start = now_ms();
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "BLPOP q:s15:empty 5"), "QUEUED", "BLPOP in MULTI");
    expect_status(cmd(c, "RPUSH q:s15:l a"), "QUEUED", "RPUSH in MULTI");
    expect_status(cmd(c, "BLPOP q:s15:l 5"), "QUEUED", "BLPOP in MULTI");
    redisReply *r = cmd(c, "EXEC");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[0]->type == REDIS_REPLY_NIL &&
                      r->element[1]->type == REDIS_REPLY_INTEGER && r->element[1]->integer == 1 &&
                      r->element[2]->type == REDIS_REPLY_ARRAY && r->element[2]->elements == 2 &&
                      strcmp(r->element[2]->element[1]->str, "a") == 0,
                  "EXEC of BLPOP empty / RPUSH / BLPOP: want [nil :1 [q:s15:l a]], got %s", describe(r));
    freeReplyObject(r);
    ck_assert_msg(now_ms() - start < 1000, "MULTI with BLPOP took %lld ms", now_ms() - start);
    redisFree(c);
}
END_TEST

/* BUG: while a client WATCHes, its commands on the watched instance go to the WATCH
 * connection but a split MGET/DEL/EXISTS goes to the shared connection, so two of its
 * commands can run out of order on Redis. Pipelined on one client:
 *   WATCH q:k / SET q:k v / MGET q:k cache:x / DEL q:k cache:x / GET q:k / UNWATCH
 * Redis: OK OK [v nil] 1 nil OK. keygate sometimes: MGET [nil nil] (ran before the SET)
 * or GET v (ran before the DEL). */
START_TEST(test_bug_split_while_watching_keeps_execution_order)
{
    redisContext *c = client();
    int bad = 0;
    char first[400] = "";
    for (int i = 0; i < 300; i++) {
        redisAppendCommand(c, "WATCH q:s14:%d", i);
        redisAppendCommand(c, "SET q:s14:%d v", i);
        redisAppendCommand(c, "MGET q:s14:%d cache:s14:x", i);
        redisAppendCommand(c, "DEL q:s14:%d cache:s14:x", i);
        redisAppendCommand(c, "GET q:s14:%d", i);
        redisAppendCommand(c, "UNWATCH");
    }
    send_appended(c, "pipeline");
    for (int i = 0; i < 300; i++) {
        expect_status(next_reply(c), "OK", "WATCH");
        expect_status(next_reply(c), "OK", "SET");
        redisReply *m = next_reply(c), *d = next_reply(c), *g = next_reply(c);
        int ok = m->type == REDIS_REPLY_ARRAY && m->elements == 2 && m->element[0]->type == REDIS_REPLY_STRING &&
                 d->type == REDIS_REPLY_INTEGER && d->integer == 1 && g->type == REDIS_REPLY_NIL;
        if (!ok && !bad++) {
            int n = snprintf(first, sizeof first, "round %d: MGET %s", i, describe(m));
            n += snprintf(first + n, sizeof first - (size_t)n, ", DEL %s", describe(d));
            snprintf(first + n, sizeof first - (size_t)n, ", GET %s", describe(g));
        }
        freeReplyObject(m);
        freeReplyObject(d);
        freeReplyObject(g);
        expect_status(next_reply(c), "OK", "UNWATCH");
    }
    ck_assert_msg(bad == 0, "%d of 300 rounds ran out of order; first: %s (want MGET [\"v\" nil], DEL :1, GET nil)",
                  bad, first);
    redisFree(c);
}
END_TEST

/* ---- 7b. a backend down: a split command fails as a whole ---- */

START_TEST(test_split_with_a_backend_down_is_an_error)
{
    redisContext *c = client();
    expect_status(cmd(c, "SET q:s7k:a 1"), "OK", "SET q:");
    expect_status(cmd(c, "SET cache:s7k:b 2"), "OK", "SET cache:");
    expect_array(cmd(c, "MGET q:s7k:a cache:s7k:b"), "MGET before the kill", 2, "1", "2");
    ck_assert_msg(harness_backend_kill(&h, "cache") == 0, "could not kill the cache backend");

    expect_error(cmd(c, "MGET q:s7k:a cache:s7k:b"), "UNAVAILABLE", "MGET across with cache down");
    expect_error(cmd(c, "MGET cache:s7k:b q:s7k:a"), "UNAVAILABLE", "MGET across with cache down, cache first");
    expect_error(cmd(c, "EXISTS q:s7k:a cache:s7k:b"), "UNAVAILABLE", "EXISTS across with cache down");
    expect_error(cmd(c, "DEL q:s7k:zz cache:s7k:zz"), "UNAVAILABLE", "DEL across with cache down");
    expect_bulk(cmd(c, "GET q:s7k:a"), "1", "durable alone still works");
    expect_array(cmd(c, "MGET q:s7k:a q:s7k:none"), "MGET on durable only", 2, "1", "nil");
    /* a transaction on the dead instance answers (WATCH / SUBSCRIBE: see test_bug_pin_on_down_instance_*) */
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET cache:s7k:c 1"), "QUEUED", "SET cache: in MULTI");
    expect_error(cmd(c, "EXEC"), "UNAVAILABLE", "EXEC on the dead instance");
    expect_error(cmd(c, "BLPOP cache:s7k:l 1"), "UNAVAILABLE", "BLPOP on the dead instance");
    expect_bulk(cmd(c, "GET q:s7k:a"), "1", "the client is fine after all that");

    ck_assert_msg(harness_backend_restart(&h, "cache") == 0, "restarting cache: %s", h.error);
    int recovered = 0;
    for (long long deadline = now_ms() + 10000; !recovered && now_ms() < deadline;) {
        redisReply *r = cmd(c, "MGET q:s7k:a cache:s7k:b");
        recovered = r->type == REDIS_REPLY_ARRAY;
        if (recovered) {
            /* cache has no persistence: its key is gone */
            expect_array(r, "MGET after the restart", 2, "1", "nil");
        } else {
            expect_error(r, "UNAVAILABLE", "MGET while cache restarts");
            sleep_ms(100);
        }
    }
    ck_assert_msg(recovered, "MGET across instances still fails 10 s after cache restarted");
    /* the pinned paths recover too */
    expect_status(cmd(c, "WATCH cache:s7k:b"), "OK", "WATCH after recovery");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET cache:s7k:b 3"), "QUEUED", "SET");
    expect_array(cmd(c, "EXEC"), "EXEC after recovery", 1, "+OK");
    expect_array(cmd(c, "SUBSCRIBE push:s7k:ch"), "SUBSCRIBE after recovery", 3, "subscribe", "push:s7k:ch", ":1");
    expect_array(cmd(c, "UNSUBSCRIBE"), "UNSUBSCRIBE", 3, "unsubscribe", "push:s7k:ch", ":0");
    redisFree(c);
}
END_TEST

/* Wait (10 s at most) until cache answers through keygate again after a restart. */
static int cache_back(void)
{
    for (long long deadline = now_ms() + 10000; now_ms() < deadline; sleep_ms(100)) {
        redisContext *c = client();
        redisReply *r = redisCommand(c, "SET cache:back 1");
        int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        redisFree(c);
        if (ok) return 1;
    }
    return 0;
}

/* "reply" or "connection closed: why" for a command on its own new client. */
static void one_shot(const char *command, char *out, size_t len)
{
    redisContext *c = client();
    redisReply *r = redisCommand(c, command);
    if (r == NULL)
        snprintf(out, len, "no reply, connection error: %s", c->errstr);
    else
        snprintf(out, len, "%s", describe(r));
    freeReplyObject(r);
    redisFree(c);
}

/* BUG: a WATCH or SUBSCRIBE while its instance is down must answer -UNAVAILABLE (DESIGN §3:
 * "never a silent drop"). keygate opens a dedicated connection, the connect fails,
 * the pin-lost path (now router.c route_owner_lost) closed the client, and the -UNAVAILABLE reply queued a moment
 * earlier is freed with the bufferevent: the client sees the connection closed, no reply.
 * (BLPOP and EXEC on the dead instance do answer -UNAVAILABLE.) */
START_TEST(test_bug_pin_on_down_instance_replies_unavailable)
{
    char watch[400], sub[400], blpop[400];
    ck_assert_msg(harness_backend_kill(&h, "cache") == 0, "could not kill the cache backend");
    one_shot("WATCH cache:s13:k", watch, sizeof watch);
    one_shot("SUBSCRIBE push:s13:ch", sub, sizeof sub);
    one_shot("BLPOP cache:s13:l 1", blpop, sizeof blpop);
    ck_assert_msg(harness_backend_restart(&h, "cache") == 0, "restarting cache: %s", h.error);
    ck_assert_msg(cache_back(), "cache not back through keygate 10 s after its restart");
    ck_assert_msg(strncmp(blpop, "-UNAVAILABLE", 12) == 0, "BLPOP with cache down: got %s", blpop);
    ck_assert_msg(strncmp(watch, "-UNAVAILABLE", 12) == 0, "WATCH with cache down: want -UNAVAILABLE, got %s", watch);
    ck_assert_msg(strncmp(sub, "-UNAVAILABLE", 12) == 0, "SUBSCRIBE with cache down: want -UNAVAILABLE, got %s", sub);
}
END_TEST

/* BUG: MULTI / PING / SET cache:k 1 / EXEC: Redis answers [PONG, OK]. keygate pins the
 * transaction to instance 0 (durable) at the PING (decide_local_in_multi), so the cache:
 * command is refused with -CROSSINSTANCE and EXEC with -EXECABORT. */
START_TEST(test_bug_multi_starting_with_ping_then_cache_key)
{
    redisContext *c = client();
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "PING"), "QUEUED", "PING first");
    expect_status(cmd(c, "SET cache:s10:x 1"), "QUEUED", "SET cache: after PING");
    expect_array(cmd(c, "EXEC"), "EXEC", 2, "+PONG", "+OK");
    redisFree(c);
}
END_TEST

/* BUG: SSUBSCRIBE's count is of shard channels only. Redis: SUBSCRIBE a / SSUBSCRIBE b /
 * SUNSUBSCRIBE b -> [sunsubscribe b 0] and the client is still subscribed to a (PING
 * answers [pong ""], messages on a arrive). keygate (then client_push, now pubsub_on_frame) saw ":0", thinks the
 * last subscription ended and puts the still-subscribed connection back on the idle list. */
START_TEST(test_bug_sunsubscribe_keeps_other_subscriptions)
{
    redisContext *s = client(), *pub = client();
    expect_array(cmd(s, "SUBSCRIBE push:s11:a"), "SUBSCRIBE", 3, "subscribe", "push:s11:a", ":1");
    expect_array(cmd(s, "SSUBSCRIBE push:s11:b"), "SSUBSCRIBE", 3, "ssubscribe", "push:s11:b", ":1");
    expect_array(cmd(s, "SUNSUBSCRIBE push:s11:b"), "SUNSUBSCRIBE", 3, "sunsubscribe", "push:s11:b", ":0");
    /* another client's first SUBSCRIBE must get a clean connection, not s's */
    redisContext *x = client();
    expect_array(cmd(x, "SUBSCRIBE push:s11:c"),
                 "another client's SUBSCRIBE (count 2 = it got s's connection, still subscribed to push:s11:a)", 3,
                 "subscribe", "push:s11:c", ":1");
    redisFree(x);
    expect_array(cmd(s, "PING"), "PING: still subscribed to push:s11:a", 2, "pong", "");
    expect_int(cmd(pub, "PUBLISH push:s11:a m"), 1, "PUBLISH to the remaining subscription");
    struct timeval tv = {2, 0};
    redisSetTimeout(s, tv);
    expect_array(read_reply(s, "message on the remaining channel"), "message on the remaining channel", 3, "message",
                 "push:s11:a", "m");
    redisFree(s);
    redisFree(pub);
}
END_TEST

/* BUG: pipelined SUBSCRIBE a / UNSUBSCRIBE a / SUBSCRIBE b: Redis confirms all three and
 * the client then gets messages on b. keygate writes all three to the subscriber
 * connection, releases it when [unsubscribe a 0] comes back, and [subscribe b 1] then
 * arrives on an idle connection: b's subscription is lost (the connection is closed as
 * "reply with no request in flight", or worse handed to another client). */
START_TEST(test_bug_resubscribe_pipelined)
{
    redisContext *s = client(), *pub = client();
    redisAppendCommand(s, "SUBSCRIBE push:s12:a");
    redisAppendCommand(s, "UNSUBSCRIBE push:s12:a");
    redisAppendCommand(s, "SUBSCRIBE push:s12:b");
    send_appended(s, "pipeline");
    struct timeval tv = {2, 0};
    redisSetTimeout(s, tv);
    expect_array(read_reply(s, "SUBSCRIBE a"), "SUBSCRIBE a", 3, "subscribe", "push:s12:a", ":1");
    expect_array(read_reply(s, "UNSUBSCRIBE a"), "UNSUBSCRIBE a", 3, "unsubscribe", "push:s12:a", ":0");
    expect_array(read_reply(s, "SUBSCRIBE b"), "SUBSCRIBE b", 3, "subscribe", "push:s12:b", ":1");
    expect_int(cmd(pub, "PUBLISH push:s12:b m"), 1, "PUBLISH to b");
    expect_array(read_reply(s, "message on b"), "message on b", 3, "message", "push:s12:b", "m");
    redisFree(s);
    redisFree(pub);
}
END_TEST

/* ---- 9. max-pinned (own harness: max-pinned 2) ---- */

START_TEST(test_max_pinned_limit)
{
    redisContext *a = client(), *b = client(), *c = client(), *d = client();
    redisAppendCommand(a, "BLPOP q:s9:list 10");
    send_appended(a, "pipeline");
    ck_assert_int_eq(wait_blocked("durable", "blpop", 1, 3000), 1);
    redisAppendCommand(b, "BLPOP q:s9:list 10");
    send_appended(b, "pipeline");
    ck_assert_int_eq(wait_blocked("durable", "blpop", 2, 3000), 2);

    long long start = now_ms();
    expect_error(cmd(c, "BLPOP q:s9:list 10"),
                 "UNAVAILABLE no dedicated connection free for instance 'durable' (max-pinned 2)", "third BLPOP");
    ck_assert_msg(now_ms() - start < 1000, "the refusal took %lld ms", now_ms() - start);
    expect_error(cmd(c, "WATCH q:s9:w"), "UNAVAILABLE no dedicated connection free", "WATCH past the limit");
    /* shared paths and the other instance are not affected */
    expect_status(cmd(c, "SET q:s9:k v"), "OK", "SET on durable while pins are exhausted");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "INCR q:s9:n"), "QUEUED", "INCR");
    expect_array(cmd(c, "EXEC"), "EXEC without WATCH needs no pin", 1, ":1");
    expect_status(cmd(d, "WATCH cache:s9:w"), "OK", "WATCH on cache");
    expect_status(cmd(d, "UNWATCH"), "OK", "UNWATCH on cache");

    /* A is served: its connection goes back and C gets it */
    expect_int(cmd(d, "RPUSH q:s9:list x"), 1, "RPUSH");
    expect_array(next_reply(a), "A's BLPOP", 2, "q:s9:list", "x");
    start = now_ms();
    expect_nil(cmd(c, "BLPOP q:s9:empty 1"), "BLPOP once a pin is free again");
    ck_assert_msg(now_ms() - start >= 900, "C's BLPOP did not block (%lld ms)", now_ms() - start);

    /* a client that leaves while blocked frees its slot */
    redisFree(b);
    ck_assert_int_eq(wait_blocked("durable", "blpop", 0, 2000), 0);
    redisAppendCommand(a, "BLPOP q:s9:l2 10");
    send_appended(a, "pipeline");
    ck_assert_int_eq(wait_blocked("durable", "blpop", 1, 3000), 1);
    expect_status(cmd(c, "WATCH q:s9:w"), "OK", "WATCH with one pin free");
    expect_error(cmd(d, "BLPOP q:s9:l3 10"), "UNAVAILABLE no dedicated connection free",
                 "BLPOP with A blocked + C watching");
    expect_status(cmd(c, "UNWATCH"), "OK", "UNWATCH");
    expect_int(cmd(d, "RPUSH q:s9:l3 y"), 1, "RPUSH");
    expect_array(cmd(d, "BLPOP q:s9:l3 1"), "BLPOP after UNWATCH freed a pin", 2, "q:s9:l3", "y");

    /* 20 WATCH / EXEC cycles on the two pins: none leaks */
    for (int i = 0; i < 20; i++) {
        expect_status(cmd(c, "WATCH q:s9:w"), "OK", "WATCH cycle");
        expect_status(cmd(c, "MULTI"), "OK", "MULTI cycle");
        expect_status(cmd(c, "INCR q:s9:w"), "QUEUED", "INCR cycle");
        char want[16];
        snprintf(want, sizeof want, ":%d", i + 1);
        expect_array(cmd(c, "EXEC"), "EXEC cycle", 1, want);
    }
    expect_int(cmd(d, "RPUSH q:s9:l2 z"), 1, "RPUSH to release A");
    expect_array(next_reply(a), "A's second BLPOP", 2, "q:s9:l2", "z");
    redisFree(a);
    redisFree(c);
    redisFree(d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stateful");
    TCase *tc = harness_tcase(s, "stateful", 120, setup, teardown);
    harness_add_test(tc, test_watch_race_exactly_one_exec_wins);
    harness_add_test(tc, test_watch_semantics_match_redis);
    harness_add_test(tc, test_multi_on_ttl_namespace_replies_like_redis);
    harness_add_test(tc, test_execabort_cases);
    harness_add_test(tc, test_bug_watch_inside_multi_does_not_abort_transaction);
    harness_add_test(tc, test_blpop_does_not_delay_other_clients);
    harness_add_test(tc, test_xread_block);
    harness_add_test(tc, test_bug_blpop_on_ttl_namespace_blocks);
    harness_add_test(tc, test_disconnect_while_blocked_closes_the_connection);
    harness_add_test(tc, test_pubsub_fan_out_and_rules);
    harness_add_test(tc, test_bug_subscribe_then_ping_pipelined_keeps_order);
    harness_add_test(tc, test_bug_unsubscribe_then_get_pipelined);
    harness_add_test(tc, test_split_commands_merge_in_order);
    harness_add_test(tc, test_mixed_pipeline_keeps_order);
    harness_add_test(tc, test_blocking_command_inside_multi_does_not_block);
    harness_add_test(tc, test_bug_split_while_watching_keeps_execution_order);
    harness_add_test(tc, test_bug_multi_starting_with_ping_then_cache_key);
    harness_add_test(tc, test_bug_resubscribe_pipelined);
    harness_add_test(tc, test_bug_sunsubscribe_keeps_other_subscriptions); /* its bug leaks a subscribed connection */
    harness_add_test(tc, test_split_with_a_backend_down_is_an_error);      /* last two: kill and restart cache */
    harness_add_test(tc, test_bug_pin_on_down_instance_replies_unavailable);

    TCase *tp = harness_tcase(s, "max-pinned", 60, setup_max_pinned, teardown);
    harness_add_test(tp, test_max_pinned_limit);

    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
