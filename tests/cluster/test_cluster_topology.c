/* test_cluster_topology.c: keygate's connections as the cluster changes under them: a WATCHed slot that moves (EXEC answers the null reply, nothing ran, the retry runs on the new owner) and a failed-over primary's connections closed. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_keygate.h"

/* The slot of key (CLUSTER KEYSLOT of a running node), its owner, and another primary. */
static void slot_and_nodes(const char *key, unsigned *slot, int *owner, int *other)
{
    int any = 0; /* an earlier test may have killed a node */
    while (any < CLUSTER_NODES - 1 && !cluster_node_alive(C, any)) any++;
    redisContext *n0 = cluster_connect(C, any);
    ck_assert_msg(n0 != NULL, "node %d does not answer", any);
    redisReply *r = cmd(n0, "CLUSTER KEYSLOT %s", key);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "CLUSTER KEYSLOT: %s", describe(r));
    *slot = (unsigned)r->integer;
    freeReplyObject(r);
    redisFree(n0);
    *owner = cluster_slot_owner(C, *slot);
    ck_assert_msg(*owner >= 0, "slot %u has no owner", *slot);
    int idx[CLUSTER_NODES], n = cluster_primaries(C, idx);
    *other = -1;
    for (int k = 0; k < n && *other < 0; k++)
        if (idx[k] != *owner) *other = idx[k];
    ck_assert_msg(*other >= 0, "no second primary");
}

/* Move slot from `from` to `to` with its keys (MIGRATE), directly on the nodes. */
static void move_slot(unsigned slot, int from, int to)
{
    ck_assert_msg(cluster_migrate_begin(C, slot, from, to) == 0, "%s", cluster_last_error());
    int moved = 0;
    ck_assert_msg(cluster_migrate_keys(C, slot, from, to, 1000, &moved) == 0, "%s", cluster_last_error());
    ck_assert_msg(cluster_migrate_end(C, slot, from, to) == 0, "%s", cluster_last_error());
}

/* The value of key on node i, asked directly (NULL: none); the caller frees it. */
static char *node_get(int i, const char *key)
{
    redisContext *n = cluster_connect(C, i);
    ck_assert_msg(n != NULL, "node %d does not answer", i);
    redisReply *r = cmd(n, "GET %s", key);
    char *v = r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
    ck_assert_msg(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL, "GET on node %d: %s", i, describe(r));
    freeReplyObject(r);
    redisFree(n);
    return v;
}

static void expect_node_value(int i, const char *key, const char *want, const char *what)
{
    char *v = node_get(i, key);
    ck_assert_msg(v && strcmp(v, want) == 0, "%s: %s on node %d is %s, want %s", what, key, i, v ? v : "(nil)", want);
    free(v);
}

/* A transaction under WATCH, the client's way: WATCH, GET, MULTI, SET, EXEC; returns EXEC's reply. */
static redisReply *watched_set(redisContext *kg, const char *key, const char *value, const char *want_get)
{
    expect_status(cmd(kg, "WATCH %s", key), "OK", "WATCH");
    expect_bulk(cmd(kg, "GET %s", key), want_get, "GET under WATCH");
    expect_status(cmd(kg, "MULTI"), "OK", "MULTI");
    expect_status(cmd(kg, "SET %s %s", key, value), "QUEUED", "SET queued");
    return cmd(kg, "EXEC");
}

/* The slot moves after the WATCH: EXEC answers nil and nothing ran; the retry runs on the new owner. */
START_TEST(watched_slot_moving_after_watch_nils_exec)
{
    keygate_on_cluster();
    redisContext *kg = harness_must_client(&h);
    const char *key = "cache:{pin1}k";
    unsigned slot;
    int owner, other;
    slot_and_nodes(key, &slot, &owner, &other);
    expect_status(cmd(kg, "SET %s 1", key), "OK", "SET");
    expect_status(cmd(kg, "WATCH %s", key), "OK", "WATCH");
    expect_bulk(cmd(kg, "GET %s", key), "1", "GET under WATCH");
    move_slot(slot, owner, other);
    expect_bulk(cmd(kg, "GET %s", key), "1", "GET under WATCH after the move (follows it)");
    expect_status(cmd(kg, "MULTI"), "OK", "MULTI");
    expect_status(cmd(kg, "SET %s 2", key), "QUEUED", "SET queued");
    expect_nil(cmd(kg, "EXEC"), "EXEC after the WATCHed slot moved");
    expect_node_value(other, key, "1", "nothing ran");
    /* the client retries: the WATCH goes to the new owner now */
    redisReply *r = watched_set(kg, key, "3", "1");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1, "the retried EXEC: %s", describe(r));
    freeReplyObject(r);
    expect_node_value(other, key, "3", "the retried transaction");
    redisFree(kg);
}
END_TEST

/* The slot moved before the WATCH (keygate's map not told yet): WATCH answers OK, EXEC nil; the retry runs. */
START_TEST(watch_on_a_slot_moved_before_nils_exec)
{
    keygate_on_cluster();
    redisContext *kg = harness_must_client(&h);
    const char *key = "cache:{pin2}k";
    unsigned slot;
    int owner, other;
    slot_and_nodes(key, &slot, &owner, &other);
    expect_status(cmd(kg, "SET %s 1", key), "OK", "SET");
    move_slot(slot, owner, other);
    redisReply *r = watched_set(kg, key, "2", "1");
    int nil = r->type == REDIS_REPLY_NIL;
    int ran = r->type == REDIS_REPLY_ARRAY && r->elements == 1;
    /* keygate may have learnt the move already (a MOVED on another connection, a refresh) */
    ck_assert_msg(nil || ran, "EXEC: %s", describe(r));
    freeReplyObject(r);
    if (nil) {
        expect_node_value(other, key, "1", "nothing ran");
        r = watched_set(kg, key, "2", "1");
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1, "the retried EXEC: %s", describe(r));
        freeReplyObject(r);
    }
    expect_node_value(other, key, "2", "the transaction");
    fprintf(stderr, "WATCH on a slot moved before: the first EXEC answered %s\n", nil ? "nil" : "the array");
    redisFree(kg);
}
END_TEST

/* keygate's /metrics value of `metric` for instance cache, or -1. */
static long long cache_gauge(const char *metric)
{
    struct harness_http r = harness_admin_get(&h, "/metrics");
    char needle[128];
    snprintf(needle, sizeof needle, "%s{backend=\"cache\"} ", metric);
    const char *at = r.body ? strstr(r.body, needle) : NULL;
    long long v = at ? atoll(at + strlen(needle)) : -1;
    free(r.body);
    return v;
}

/* A primary killed and failed over: keygate's connections to it are closed once its replica owns
 * its slots (no reconnect loop to a node that is not in the map), so every connection keygate
 * counts for the instance is ready again; traffic to the moved slots is served. */
START_TEST(failed_over_primary_is_disconnected)
{
    keygate_on_cluster();
    redisContext *kg = harness_must_client(&h);
    for (int i = 0; i < 300; i++) redisAppendCommand(kg, "SET cache:f:%d v", i); /* every primary gets connections */
    for (int i = 0; i < 300; i++) expect_status(next_reply(kg), "OK", "SET");
    int idx[CLUSTER_NODES];
    ck_assert_int_eq(cluster_primaries(C, idx), 3);
    int victim = idx[0], promoted = -1;
    long long ms = 0;
    ck_assert_msg(cluster_kill_primary(C, victim, 20000, &promoted, &ms) == 0, "%s", cluster_last_error());
    long long start = now_ms(), conns = -1, ready = -2;
    while (now_ms() - start < 15000) {
        conns = cache_gauge("keygate_instance_connections");
        ready = cache_gauge("keygate_instance_connections_ready");
        if (conns > 0 && conns == ready) break;
        sleep_ms(100);
    }
    ck_assert_msg(conns > 0 && conns == ready,
                  "15 s after the failover keygate counts %lld connections to cache, %lld ready (the dead node's "
                  "connections were not closed)",
                  conns, ready);
    char *log = harness_keygate_log(&h);
    char needle[64];
    snprintf(needle, sizeof needle, "node 127.0.0.1:%d owns no slot", C->nodes[victim].tls_port);
    ck_assert_msg(log && strstr(log, needle), "keygate's log does not say '%s'", needle);
    free(log);
    for (int i = 0; i < 300; i++) redisAppendCommand(kg, "GET cache:f:%d", i);
    int served = 0;
    for (int i = 0; i < 300; i++) {
        redisReply *r = next_reply(kg);
        served += r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL; /* the lost writes: nil */
        freeReplyObject(r);
    }
    ck_assert_int_eq(served, 300);
    fprintf(stderr, "failover in %lld ms; keygate's connections all ready %lld ms after it\n", ms, now_ms() - start);
    redisFree(kg);
}
END_TEST

/* The next frame from a subscribed connection must be [kind, channel, ...]; its third element's integer or -1. */
static long long expect_push(redisContext *c, const char *kind, const char *channel, const char *what)
{
    redisReply *r = next_reply(c);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 3 && strcmp(r->element[0]->str, kind) == 0 &&
                      strcmp(r->element[1]->str, channel) == 0,
                  "%s: want [%s, %s, ...], got %s", what, kind, channel, describe(r));
    long long n = r->element[2]->type == REDIS_REPLY_INTEGER ? r->element[2]->integer : -1;
    freeReplyObject(r);
    return n;
}

/* PUBSUB SHARDNUMSUB channel on node i, asked directly. */
static long long node_shardnumsub(int i, const char *channel)
{
    redisContext *n = cluster_connect(C, i);
    ck_assert_msg(n != NULL, "node %d does not answer", i);
    redisReply *r = cmd(n, "PUBSUB SHARDNUMSUB %s", channel);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "SHARDNUMSUB on node %d: %s", i, describe(r));
    long long v = r->element[1]->integer;
    freeReplyObject(r);
    redisFree(n);
    return v;
}

/* SSUBSCRIBE and SPUBLISH through keygate reach the shard channel's node; a second shard channel on
 * another node is refused on that connection; when the slot moves, Redis's own sunsubscribe reaches
 * the client. */
START_TEST(shard_channels_live_on_their_node)
{
    keygate_on_cluster();
    const char *ch = "push:{sh1}feed";
    unsigned slot;
    int owner, other;
    slot_and_nodes(ch, &slot, &owner, &other);
    redisContext *sub = harness_must_client(&h), *pub = harness_must_client(&h);
    redisAppendCommand(sub, "SSUBSCRIBE %s", ch);
    ck_assert_int_eq(expect_push(sub, "ssubscribe", ch, "SSUBSCRIBE"), 1);
    ck_assert_msg(node_shardnumsub(owner, ch) == 1, "the subscription is not on the slot's owner (node %d)", owner);
    expect_int(cmd(pub, "SPUBLISH %s hello", ch), 1, "SPUBLISH through keygate");
    redisReply *m = next_reply(sub);
    ck_assert_msg(m->type == REDIS_REPLY_ARRAY && m->elements == 3 && strcmp(m->element[0]->str, "smessage") == 0 &&
                      strcmp(m->element[2]->str, "hello") == 0,
                  "the message: %s", describe(m));
    freeReplyObject(m);

    /* a shard channel of another node, on the same connection: refused, the first one kept */
    char far[64];
    unsigned far_slot = slot;
    int far_owner = owner;
    for (int i = 0; i < 1000 && far_owner == owner; i++) {
        snprintf(far, sizeof far, "push:{sh%d}x", i);
        int o2;
        slot_and_nodes(far, &far_slot, &far_owner, &o2);
    }
    ck_assert_msg(far_owner != owner, "no channel on another node found");
    redisAppendCommand(sub, "SSUBSCRIBE %s", far);
    expect_error(next_reply(sub), "DENIED this shard channel lives on node", "SSUBSCRIBE on another node");
    expect_int(cmd(pub, "SPUBLISH %s again", ch), 1, "SPUBLISH after the refusal");
    m = next_reply(sub);
    ck_assert_msg(m->type == REDIS_REPLY_ARRAY && m->elements == 3 && strcmp(m->element[2]->str, "again") == 0,
                  "the second message: %s", describe(m));
    freeReplyObject(m);

    /* the slot moves: the old owner unsubscribes its clients from the slot's shard channels */
    move_slot(slot, owner, other);
    ck_assert_int_eq(expect_push(sub, "sunsubscribe", ch, "after the slot moved"), 0);
    fprintf(stderr, "shard channel %s: served by node %d, sunsubscribe after its slot moved to node %d\n", ch, owner,
            other);
    redisFree(sub);
    redisFree(pub);
}
END_TEST

/* INFO clients' blocked_clients of node i, asked directly. */
static long long node_blocked(int i)
{
    redisContext *n = cluster_connect(C, i);
    ck_assert_msg(n != NULL, "node %d does not answer", i);
    redisReply *r = cmd(n, "INFO clients");
    const char *at = r->type == REDIS_REPLY_STRING ? strstr(r->str, "blocked_clients:") : NULL;
    long long v = at ? atoll(at + strlen("blocked_clients:")) : -1;
    freeReplyObject(r);
    redisFree(n);
    return v;
}

/* Wait (5 s) until node i has `want` blocked clients. */
static void wait_blocked(int i, long long want, const char *what)
{
    long long start = now_ms(), v = -1;
    while (now_ms() - start < 5000 && (v = node_blocked(i)) != want) sleep_ms(20);
    ck_assert_msg(v == want, "%s: node %d has %lld blocked clients, want %lld", what, i, v, want);
}

/* A blocking pop whose slot moved, before it was sent (keygate's map not told yet) and while it
 * waits (Redis unblocks it with -MOVED): keygate sends it again on a dedicated connection to the
 * new owner, and the client gets the value pushed there, never the redirect. */
START_TEST(blocking_pop_follows_its_slot)
{
    keygate_on_cluster();
    redisContext *waiter = harness_must_client(&h), *pusher = harness_must_client(&h);
    /* moved before */
    const char *k1 = "cache:{bl1}q";
    unsigned slot;
    int owner, other;
    slot_and_nodes(k1, &slot, &owner, &other);
    move_slot(slot, owner, other);
    redisAppendCommand(waiter, "BLPOP %s 10", k1);
    ck_assert_int_eq(redisBufferWrite(waiter, &(int){0}), REDIS_OK);
    wait_blocked(other, 1, "BLPOP sent after the move");
    expect_int(cmd(pusher, "LPUSH %s one", k1), 1, "LPUSH");
    expect_array(next_reply(waiter), "BLPOP after the move", 2, k1, "one");

    /* moved while it waits */
    const char *k2 = "cache:{bl2}q";
    slot_and_nodes(k2, &slot, &owner, &other);
    redisAppendCommand(waiter, "BLPOP %s 10", k2);
    ck_assert_int_eq(redisBufferWrite(waiter, &(int){0}), REDIS_OK);
    wait_blocked(owner, 1, "BLPOP before the move");
    move_slot(slot, owner, other);
    wait_blocked(other, 1, "BLPOP after its slot moved");
    expect_int(cmd(pusher, "LPUSH %s two", k2), 1, "LPUSH");
    expect_array(next_reply(waiter), "BLPOP moved while waiting", 2, k2, "two");
    redisFree(waiter);
    redisFree(pusher);
}
END_TEST

/* A blocking pop sent while its slot's primary is dead and not yet replaced waits for the
 * promotion (as a shared request does) instead of failing, then blocks on the new primary and
 * gets the value pushed there. */
START_TEST(blocking_pop_waits_for_a_failover)
{
    keygate_on_cluster();
    redisContext *waiter = harness_must_client(&h), *pusher = harness_must_client(&h);
    const char *key = "cache:{blf}q";
    unsigned slot;
    int owner, other;
    slot_and_nodes(key, &slot, &owner, &other);
    expect_int(cmd(pusher, "RPUSH %s warm", key), 1, "RPUSH"); /* keygate's connection to the owner is up */
    expect_array(cmd(pusher, "BLPOP %s 1", key), "BLPOP", 2, key, "warm");
    ck_assert_msg(cluster_node_kill(C, owner) == 0, "%s", cluster_last_error());
    long long start = now_ms(), conns = 0, ready = 0;
    while (now_ms() - start < 5000) { /* keygate saw the connection go */
        conns = cache_gauge("keygate_instance_connections");
        ready = cache_gauge("keygate_instance_connections_ready");
        if (ready < conns) break;
        sleep_ms(10);
    }
    ck_assert_msg(ready < conns, "keygate still counts %lld of %lld connections ready after the kill", ready, conns);
    long long sent = now_ms();
    redisAppendCommand(waiter, "BLPOP %s 20", key);
    ck_assert_int_eq(redisBufferWrite(waiter, &(int){0}), REDIS_OK);
    ck_assert_msg(cluster_wait_ok(C, 20000) == 0, "%s", cluster_last_error());
    int promoted = cluster_slot_owner(C, slot);
    ck_assert_msg(promoted >= 0 && promoted != owner, "slot %u owner after the failover: %d", slot, promoted);
    wait_blocked(promoted, 1, "BLPOP after the promotion");
    expect_int(cmd(pusher, "LPUSH %s after", key), 1, "LPUSH after the promotion");
    expect_array(next_reply(waiter), "BLPOP sent during the failover", 2, key, "after");
    fprintf(stderr, "BLPOP sent during the failover blocked on the promoted node %lld ms later\n", now_ms() - sent);
    redisFree(waiter);
    redisFree(pusher);
}
END_TEST

/* CONFIG SET name value on every running node. */
static void config_set_all(const char *name, const char *value)
{
    for (int i = 0; i < CLUSTER_NODES; i++) {
        if (!cluster_node_alive(C, i)) continue;
        redisContext *n = cluster_connect(C, i);
        ck_assert_msg(n != NULL, "node %d does not answer", i);
        expect_status(cmd(n, "CONFIG SET %s %s", name, value), "OK", "CONFIG SET");
        redisFree(n);
    }
}

/* A key (cache:{live<k>}v) whose slot another primary than `owner` owns. */
static void key_not_on(int owner, char *key, size_t len)
{
    for (int k = 0; k < 100; k++) {
        snprintf(key, len, "cache:{live%d}v", k);
        unsigned slot;
        int o, other;
        slot_and_nodes(key, &slot, &o, &other);
        if (o != owner) return;
    }
    ck_abort_msg("no key of 100 lives off node %d", owner);
}

/* Requests waiting for a slot's owner each carry their own deadline: with a primary dead and no
 * failover (its replica may not take over), 5 GETs for its slots pipelined with a GET for a live
 * slot behind them all fail together after one wait (about 6.3 s), and the live GET is answered
 * then (they waited 6.3 s each, one after another, and the live GET behind them 31 s, when only
 * the first of a client's waiting requests advanced its retries). */
START_TEST(dead_range_pipelined_gets_wait_one_hold_in_all)
{
    keygate_on_cluster();
    redisContext *kg = harness_must_client(&h);
    struct timeval tv = {60, 0};
    ck_assert_int_eq(redisSetTimeout(kg, tv), REDIS_OK);
    const char *dead = "cache:{dead}k";
    char live[64];
    unsigned slot;
    int owner, other;
    slot_and_nodes(dead, &slot, &owner, &other);
    key_not_on(owner, live, sizeof live);
    expect_status(cmd(kg, "SET %s d", dead), "OK", "SET dead");
    expect_status(cmd(kg, "SET %s l", live), "OK", "SET live");
    config_set_all("cluster-replica-no-failover", "yes");
    config_set_all("cluster-require-full-coverage", "no");
    ck_assert_msg(cluster_node_kill(C, owner) == 0, "%s", cluster_last_error());
    long long start = now_ms(), conns = 0, ready = 0;
    while (now_ms() - start < 5000) { /* keygate saw the connection go */
        conns = cache_gauge("keygate_instance_connections");
        ready = cache_gauge("keygate_instance_connections_ready");
        if (ready < conns) break;
        sleep_ms(10);
    }
    ck_assert_msg(ready < conns, "keygate still counts %lld of %lld connections ready after the kill", ready, conns);
    const int n = 5;
    long long t0 = now_ms(), took[6];
    for (int i = 0; i < n; i++) ck_assert_int_eq(redisAppendCommand(kg, "GET %s", dead), REDIS_OK);
    ck_assert_int_eq(redisAppendCommand(kg, "GET %s", live), REDIS_OK);
    for (int i = 0; i < n; i++) {
        redisReply *r = next_reply(kg);
        took[i] = now_ms() - t0;
        ck_assert_msg(r->type == REDIS_REPLY_ERROR, "GET %d of the dead range answered %s after %lld ms", i + 1,
                      describe(r), took[i]);
        freeReplyObject(r);
    }
    expect_bulk(next_reply(kg), "l", "the live GET behind them");
    took[n] = now_ms() - t0;
    fprintf(stderr,
            "dead range: 5 pipelined GETs failed after %lld %lld %lld %lld %lld ms, the live GET behind "
            "them answered after %lld ms\n",
            took[0], took[1], took[2], took[3], took[4], took[5]);
    ck_assert_msg(took[0] >= 3000, "the first GET of the dead range failed after %lld ms, before its wait", took[0]);
    ck_assert_msg(took[n] < 10000,
                  "5 GETs of a dead range and a live GET behind them took %lld ms: they waited "
                  "one after another",
                  took[n]);
    redisFree(kg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cluster_topology");
    TCase *tc = harness_tcase(s, "topology", 120, setup, teardown);
    harness_add_test(tc, watched_slot_moving_after_watch_nils_exec);
    harness_add_test(tc, watch_on_a_slot_moved_before_nils_exec);
    harness_add_test(tc, failed_over_primary_is_disconnected);
    harness_add_test(tc, shard_channels_live_on_their_node);
    harness_add_test(tc, blocking_pop_follows_its_slot);
    harness_add_test(tc, blocking_pop_waits_for_a_failover);
    /* a cluster of its own: the test leaves a primary dead with its slots */
    TCase *dead = harness_tcase(s, "dead-range", 120, setup, teardown);
    harness_add_test(dead, dead_range_pipelined_gets_wait_one_hold_in_all);
    int failed = harness_run(s);
    return failed == 0 && cluster_leftovers() == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
