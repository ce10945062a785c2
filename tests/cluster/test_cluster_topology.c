/* test_cluster_pins.c: a WATCH through keygate on a cluster whose slot moves: EXEC answers the null reply (nothing ran, checked on the nodes), commands under the WATCH follow the move, and the retried transaction runs on the new owner. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_harness.h"
#include "harness.h"

static struct cluster *C;
static struct harness h;

/* cache is the cluster; durable stays the harness's single server */
static const char registry[] = "namespace  cache:  instance=cache   ttl=1h owner=app\n"
                               "namespace  other: instance=cache   ttl=1h owner=app\n"
                               "namespace  q:     instance=durable ttl=none owner=app\n";

static void setup(void)
{
    C = cluster_start();
    ck_assert_msg(C != NULL, "cluster_start: %s", cluster_last_error());
    struct harness_opts o = {.registry_text = registry};
    ck_assert_msg(harness_start(&h, &o) == 0, "%s", h.error);
}

static void teardown(void)
{
    harness_stop(&h);
    cluster_stop(C);
    C = NULL;
}

/* keygate with `cache` as the cluster (every test starts it: the heal puts the suite's files back). */
static void keygate_on_cluster(void)
{
    static char lines[3 * PATH_MAX];
    const struct harness_backend *d = &h.backends[0];
    snprintf(lines, sizeof lines,
             "instance durable 127.0.0.1:%d tls ca=%s/build/certs/ca.crt server-name=localhost password-file=%s\n"
             "instance cache cluster 127.0.0.1:%d,127.0.0.1:%d tls ca=%s/build/certs/ca.crt server-name=localhost "
             "password-file=%s\n",
             d->tls_port, h.root, d->pass_file, C->nodes[0].tls_port, C->nodes[1].tls_port, h.root, C->pass_file);
    struct harness_opts o = {.registry_text = registry, .instances_text = lines};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "keygate on the cluster: %s", h.error);
}

/* The slot of key (CLUSTER KEYSLOT of node 0), its owner, and another primary. */
static void slot_and_nodes(const char *key, unsigned *slot, int *owner, int *other)
{
    redisContext *n0 = cluster_connect(C, 0);
    ck_assert_msg(n0 != NULL, "node 0 does not answer");
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

int main(void)
{
    Suite *s = suite_create("cluster_pins");
    TCase *tc = harness_tcase(s, "pins", 120, setup, teardown);
    harness_add_test(tc, watched_slot_moving_after_watch_nils_exec);
    harness_add_test(tc, watch_on_a_slot_moved_before_nils_exec);
    int failed = harness_run(s);
    return failed == 0 && cluster_leftovers() == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
