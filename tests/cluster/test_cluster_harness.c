/* test_cluster_harness.c: the cluster harness's own guarantees, checked on the nodes directly: the cluster comes up whole over TLS, a killed primary's replica is promoted, a reshard moves its slots, a held migration answers ASK, and nothing outlives a stop. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_harness.h"
#include "cluster_suite.h"
#include "procs.h"
#include "harness.h"
#include "slotmap.h"

/* The integer field `name` of a CLUSTER INFO text, or -1. */
static long long info_field(const char *text, const char *name)
{
    const char *p = strstr(text, name);
    return p != NULL && p[strlen(name)] == ':' ? atoll(p + strlen(name) + 1) : -1;
}

/* A key (written to key[]) that hashes to slot, of the form prefix:N. */
static void key_in_slot(unsigned slot, const char *prefix, char *key, size_t len)
{
    for (unsigned n = 0;; n++) {
        snprintf(key, len, "%s:%u", prefix, n);
        if (slotmap_key_slot(key, strlen(key)) == slot) return;
    }
}

/* How many slots each node owns, as node i's CLUSTER SHARDS says. */
static void slot_counts(int i, int counts[CLUSTER_NODES])
{
    static int owners[CLUSTER_SLOTS];
    ck_assert_msg(cluster_slot_owners(C, i, owners) == 0, "%s", cluster_last_error());
    for (int k = 0; k < CLUSTER_NODES; k++) counts[k] = 0;
    for (int s = 0; s < CLUSTER_SLOTS; s++) {
        ck_assert_msg(owners[s] >= 0, "node %d: slot %d has no owner", i, s);
        counts[owners[s]]++;
    }
}

START_TEST(test_cluster_up)
{
    int ports_seen = 0;
    for (int i = 0; i < CLUSTER_NODES; i++) {
        const struct cluster_node *n = &C->nodes[i];
        ck_assert_msg(cluster_node_alive(C, i), "node %d runs", i);
        ck_assert_msg(n->plain_port < 45000 && n->tls_port < 45000 && n->bus_port < 45000 &&
                          n->bus_port == n->tls_port + 10000,
                      "node %d ports %d/%d/%d", i, n->plain_port, n->tls_port, n->bus_port);
        redisContext *c = must_connect(i);
        redisReply *r = cmd(c, "CLUSTER INFO");
        ck_assert_msg(r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok") != NULL, "node %d: %s", i,
                      describe(r));
        ck_assert_int_eq(info_field(r->str, "cluster_slots_assigned"), 16384);
        ck_assert_int_eq(info_field(r->str, "cluster_slots_ok"), 16384);
        ck_assert_int_eq(info_field(r->str, "cluster_known_nodes"), 6);
        ck_assert_int_eq(info_field(r->str, "cluster_size"), 3);
        freeReplyObject(r);
        /* TLS everywhere: the bus, replication, and the ports the cluster announces */
        r = cmd(c, "CONFIG GET tls-*");
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY, "%s", describe(r));
        int cluster_tls = 0, repl_tls = 0;
        for (size_t k = 0; k + 1 < r->elements; k += 2) {
            if (strcmp(r->element[k]->str, "tls-cluster") == 0)
                cluster_tls = strcmp(r->element[k + 1]->str, "yes") == 0;
            if (strcmp(r->element[k]->str, "tls-replication") == 0)
                repl_tls = strcmp(r->element[k + 1]->str, "yes") == 0;
        }
        freeReplyObject(r);
        ck_assert_msg(cluster_tls && repl_tls, "node %d: tls-cluster %d tls-replication %d", i, cluster_tls, repl_tls);
        r = cmd(c, "CLUSTER SHARDS");
        for (size_t s = 0; s < r->elements; s++) {
            redisReply *shard = r->element[s];
            for (size_t k = 0; k + 1 < shard->elements; k += 2) {
                if (strcmp(shard->element[k]->str, "nodes") != 0) continue;
                redisReply *nodes = shard->element[k + 1];
                for (size_t j = 0; j < nodes->elements; j++) {
                    int port = -1, tls = -1;
                    for (size_t f = 0; f + 1 < nodes->element[j]->elements; f += 2) {
                        const char *name = nodes->element[j]->element[f]->str;
                        long long v = nodes->element[j]->element[f + 1]->integer;
                        if (strcmp(name, "port") == 0) port = (int)v;
                        if (strcmp(name, "tls-port") == 0) tls = (int)v;
                    }
                    int idx = cluster_node_by_port(C, tls);
                    ck_assert_msg(idx >= 0 && C->nodes[idx].plain_port == port, "node %d lists port %d tls-port %d", i,
                                  port, tls);
                    ports_seen++;
                }
            }
        }
        freeReplyObject(r);
        redisFree(c);
    }
    ck_assert_int_eq(ports_seen, CLUSTER_NODES * CLUSTER_NODES);
    /* every node agrees on every one of the 16384 slots */
    ck_assert_msg(cluster_wait_ok(C, 1000) == 0, "%s", cluster_last_error());
    int counts[CLUSTER_NODES], total = 0;
    slot_counts(0, counts);
    for (int k = 0; k < CLUSTER_NODES; k++) total += counts[k];
    ck_assert_int_eq(total, CLUSTER_SLOTS);
}
END_TEST

START_TEST(test_roles)
{
    int primaries[CLUSTER_NODES], np = cluster_primaries(C, primaries);
    ck_assert_msg(np == 3, "%d primaries", np);
    int replicas_of[CLUSTER_NODES] = {0}, nprimary = 0;
    for (int i = 0; i < CLUSTER_NODES; i++) {
        enum cluster_role role = cluster_node_role(C, i);
        ck_assert_msg(role != CLUSTER_ROLE_UNKNOWN, "node %d answers ROLE", i);
        if (role == CLUSTER_ROLE_PRIMARY) {
            nprimary++;
            continue;
        }
        redisContext *c = must_connect(i);
        redisReply *r = cmd(c, "INFO replication");
        const char *p = strstr(r->str, "master_port:");
        ck_assert_msg(p != NULL && strstr(r->str, "master_link_status:up") != NULL, "node %d: %s", i, r->str);
        int master = cluster_node_by_port(C, atoi(p + 12));
        ck_assert_msg(master >= 0 && cluster_node_role(C, master) == CLUSTER_ROLE_PRIMARY, "node %d replicates %d", i,
                      master);
        ck_assert_msg(atoi(p + 12) == C->nodes[master].tls_port, "replication runs over TLS (port %d)", atoi(p + 12));
        replicas_of[master]++;
        freeReplyObject(r);
        redisFree(c);
    }
    ck_assert_int_eq(nprimary, 3);
    for (int k = 0; k < np; k++)
        ck_assert_msg(replicas_of[primaries[k]] == 1, "primary %d: %d replicas", primaries[k],
                      replicas_of[primaries[k]]);
}
END_TEST

START_TEST(test_slot_owner)
{
    const char *key = "owner:{probe}";
    unsigned slot = slotmap_key_slot(key, strlen(key));
    int owner = cluster_slot_owner(C, slot);
    ck_assert_msg(owner >= 0, "%s", cluster_last_error());
    for (int i = 0; i < CLUSTER_NODES; i++) {
        if (cluster_node_role(C, i) != CLUSTER_ROLE_PRIMARY) continue;
        redisContext *c = must_connect(i);
        redisReply *r = cmd(c, "SET %s v", key);
        if (i == owner) {
            expect_status(r, "OK", "SET on the owner");
        } else {
            char want[64];
            snprintf(want, sizeof want, "MOVED %u 127.0.0.1:%d", slot, C->nodes[owner].plain_port);
            expect_error(r, want, "SET on another primary");
        }
        redisFree(c);
    }
}
END_TEST

START_TEST(test_pause_resume)
{
    int replica = -1;
    for (int i = 0; i < CLUSTER_NODES && replica < 0; i++)
        if (cluster_node_role(C, i) == CLUSTER_ROLE_REPLICA) replica = i;
    ck_assert_int_ge(replica, 0);
    redisContext *c = must_connect(replica);
    struct timeval tv = {0, 300000};
    ck_assert_int_eq(redisSetTimeout(c, tv), REDIS_OK);
    ck_assert_msg(cluster_node_pause(C, replica) == 0, "%s", cluster_last_error());
    redisReply *r = redisCommand(c, "PING");
    ck_assert_msg(r == NULL, "a stopped node answers PING: %s", describe(r));
    ck_assert_msg(cluster_node_resume(C, replica) == 0, "%s", cluster_last_error());
    redisFree(c);
    c = must_connect(replica);
    expect_status(cmd(c, "PING"), "PONG", "after SIGCONT");
    redisFree(c);
    ck_assert_msg(cluster_wait_ok(C, 10000) == 0, "%s", cluster_last_error());
}
END_TEST

/* A slot held mid-migration: the source serves the keys it still has and answers -ASK for the
 * others, the target answers -MOVED unless ASKING; SETSLOT NODE ends it. */
START_TEST(test_ask_held)
{
    const char *keys[] = {"ask:{held}:1", "ask:{held}:2", "ask:{held}:3"};
    unsigned slot = slotmap_key_slot(keys[0], strlen(keys[0]));
    int from = cluster_slot_owner(C, slot), to = -1;
    int primaries[CLUSTER_NODES], np = cluster_primaries(C, primaries);
    for (int k = 0; k < np && to < 0; k++)
        if (primaries[k] != from) to = primaries[k];
    ck_assert_msg(from >= 0 && to >= 0, "%s", cluster_last_error());
    redisContext *src = must_connect(from), *dst = must_connect(to);
    for (int k = 0; k < 3; k++) expect_status(cmd(src, "SET %s v%d", keys[k], k), "OK", "SET on the source");

    ck_assert_msg(cluster_migrate_begin(C, slot, from, to) == 0, "%s", cluster_last_error());
    int moved = 0;
    ck_assert_msg(cluster_migrate_keys(C, slot, from, to, 1, &moved) == 0, "%s", cluster_last_error());
    ck_assert_int_eq(moved, 1);
    int migrated = -1;
    for (int k = 0; k < 3; k++) {
        redisReply *r = cmd(src, "EXISTS %s", keys[k]);
        if (r->integer == 0) migrated = k;
        freeReplyObject(r);
    }
    ck_assert_msg(migrated >= 0, "no key left the source");
    char ask[64], moved_back[64];
    snprintf(ask, sizeof ask, "ASK %u 127.0.0.1:%d", slot, C->nodes[to].plain_port);
    snprintf(moved_back, sizeof moved_back, "MOVED %u 127.0.0.1:%d", slot, C->nodes[from].plain_port);
    for (int round = 0; round < 2; round++) { /* held: the same answers again after the others */
        for (int k = 0; k < 3; k++) {
            char want[8];
            snprintf(want, sizeof want, "v%d", k);
            if (k == migrated) {
                expect_error(cmd(src, "GET %s", keys[k]), ask, "source, a migrated key");
                expect_error(cmd(dst, "GET %s", keys[k]), moved_back, "target without ASKING");
                expect_status(cmd(dst, "ASKING"), "OK", NULL);
                expect_bulk(cmd(dst, "GET %s", keys[k]), want, "target after ASKING");
            } else {
                expect_bulk(cmd(src, "GET %s", keys[k]), want, "source, a key not yet migrated");
            }
        }
        expect_error(cmd(src, "GET ask:{held}:new"), ask, "source, a key it never had");
        ck_assert_int_eq(cluster_slot_owner(C, slot), from);
    }
    int more = 0;
    ck_assert_msg(cluster_migrate_keys(C, slot, from, to, 100, &more) == 0, "%s", cluster_last_error());
    ck_assert_int_eq(more, 2);
    ck_assert_msg(cluster_migrate_end(C, slot, from, to) == 0, "%s", cluster_last_error());
    ck_assert_int_eq(cluster_slot_owner(C, slot), to);
    char moved_to[64];
    snprintf(moved_to, sizeof moved_to, "MOVED %u 127.0.0.1:%d", slot, C->nodes[to].plain_port);
    for (int k = 0; k < 3; k++) {
        char want[8];
        snprintf(want, sizeof want, "v%d", k);
        expect_bulk(cmd(dst, "GET %s", keys[k]), want, "target after the migration");
        expect_error(cmd(src, "GET %s", keys[k]), moved_to, "source after the migration");
    }
    redisFree(src);
    redisFree(dst);
}
END_TEST

START_TEST(test_reshard_100)
{
    static int before[CLUSTER_SLOTS], after[CLUSTER_SLOTS];
    int primaries[CLUSTER_NODES], np = cluster_primaries(C, primaries);
    ck_assert_int_eq(np, 3);
    int from = primaries[0], to = primaries[1];
    ck_assert_msg(cluster_slot_owners(C, from, before) == 0, "%s", cluster_last_error());
    /* a key in every slot of `from` */
    redisContext *src = must_connect(from);
    int nkeys = 0;
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
        if (before[s] != from) continue;
        char key[64];
        key_in_slot(s, "reshard", key, sizeof key);
        redisAppendCommand(src, "SET %s %u", key, s);
        nkeys++;
    }
    for (int k = 0; k < nkeys; k++) expect_status(next_reply(src), "OK", "SET before the reshard");
    redisFree(src);
    int cb[CLUSTER_NODES];
    slot_counts(from, cb);

    long long t0 = now_ms();
    ck_assert_msg(cluster_reshard(C, from, to, 100, 60000) == 0, "%s", cluster_last_error());
    fprintf(stderr, "reshard of 100 slots: %lld ms\n", now_ms() - t0);

    for (int i = 0; i < CLUSTER_NODES; i++) {
        int ca[CLUSTER_NODES];
        slot_counts(i, ca);
        for (int k = 0; k < CLUSTER_NODES; k++) {
            int want = cb[k] + (k == to ? 100 : k == from ? -100 : 0);
            ck_assert_msg(ca[k] == want, "node %d says node %d owns %d slots, want %d", i, k, ca[k], want);
        }
    }
    ck_assert_msg(cluster_slot_owners(C, to, after) == 0, "%s", cluster_last_error());
    redisContext *a = must_connect(from), *b = must_connect(to);
    int moved = 0;
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
        ck_assert_msg(after[s] == before[s] || (before[s] == from && after[s] == to), "slot %u: %d -> %d", s, before[s],
                      after[s]);
        if (after[s] == before[s]) continue;
        moved++;
        expect_int(cmd(b, "CLUSTER COUNTKEYSINSLOT %u", s), 1, "the moved slot's key on the target");
        expect_int(cmd(a, "CLUSTER COUNTKEYSINSLOT %u", s), 0, "the moved slot's key left the source");
    }
    ck_assert_int_eq(moved, 100);
    redisFree(a);
    redisFree(b);
}
END_TEST

START_TEST(test_kill_primary)
{
    int primaries[CLUSTER_NODES], np = cluster_primaries(C, primaries);
    ck_assert_int_eq(np, 3);
    int victim = primaries[0], replica = -1;
    for (int i = 0; i < CLUSTER_NODES; i++) {
        if (cluster_node_role(C, i) != CLUSTER_ROLE_REPLICA) continue;
        redisContext *c = must_connect(i);
        redisReply *r = cmd(c, "ROLE");
        if (r->elements >= 3 && r->element[2]->integer == C->nodes[victim].tls_port) replica = i;
        freeReplyObject(r);
        redisFree(c);
    }
    ck_assert_msg(replica >= 0, "primary %d has a replica", victim);
    /* a key of the victim's, replicated before the kill (WAIT) */
    static int owners[CLUSTER_SLOTS];
    ck_assert_msg(cluster_slot_owners(C, victim, owners) == 0, "%s", cluster_last_error());
    unsigned slot = 0;
    while (owners[slot] != victim) slot++;
    char key[64];
    key_in_slot(slot, "failover", key, sizeof key);
    redisContext *c = must_connect(victim);
    expect_status(cmd(c, "SET %s kept", key), "OK", NULL);
    expect_int(cmd(c, "WAIT 1 5000"), 1, "the replica has the key");
    redisFree(c);

    int promoted = -1;
    long long ms = -1;
    ck_assert_msg(cluster_kill_primary(C, victim, 30000, &promoted, &ms) == 0, "%s", cluster_last_error());
    fprintf(stderr, "failover after SIGKILL of primary %d: replica %d promoted, cluster ok again in %lld ms\n", victim,
            promoted, ms);
    ck_assert_int_eq(promoted, replica);
    ck_assert_int_eq(cluster_node_role(C, promoted), CLUSTER_ROLE_PRIMARY);
    ck_assert(!cluster_node_alive(C, victim));
    ck_assert_int_eq(cluster_slot_owner(C, slot), promoted);
    c = must_connect(promoted);
    expect_bulk(cmd(c, "GET %s", key), "kept", "the promoted replica serves the key");
    redisFree(c);
    np = cluster_primaries(C, primaries);
    ck_assert_int_eq(np, 3);
}
END_TEST

/* A cluster of the test's own, stopped: no node, port or file of it is left. */
START_TEST(test_stop_leaves_nothing)
{
    struct cluster *own = cluster_start();
    ck_assert_msg(own != NULL, "cluster_start: %s", cluster_last_error());
    struct cluster_node nodes[CLUSTER_NODES];
    memcpy(nodes, own->nodes, sizeof nodes);
    char dir[sizeof own->dir];
    memcpy(dir, own->dir, sizeof dir);
    ck_assert_msg(cluster_node_pause(own, 0) == 0, "%s", cluster_last_error()); /* a stopped node goes too */
    cluster_stop(own);
    for (int i = 0; i < CLUSTER_NODES; i++) {
        errno = 0;
        ck_assert_msg(kill(nodes[i].pid, 0) != 0 && errno == ESRCH, "node %d (pid %d) is gone", i, (int)nodes[i].pid);
        ck_assert_msg(procs_port_free(nodes[i].plain_port) && procs_port_free(nodes[i].tls_port) &&
                          procs_port_free(nodes[i].bus_port),
                      "node %d's ports %d/%d/%d are free", i, nodes[i].plain_port, nodes[i].tls_port,
                      nodes[i].bus_port);
    }
    struct stat st;
    ck_assert_msg(stat(dir, &st) != 0 && errno == ENOENT, "%s removed", dir);
    ck_assert_int_eq(cluster_leftovers(), 0);
}
END_TEST

/* ---- a failed test leaves nothing either: a nested suite, run in a forked process ---- */

static char g_pids_file[64]; /* the nested suite's node pids, one a line */

static void nested_setup(void)
{
    setup();
    FILE *f = fopen(g_pids_file, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < CLUSTER_NODES; i++) fprintf(f, "%d\n", (int)C->nodes[i].pid);
    fclose(f);
}

START_TEST(nested_fails)
{
    ck_abort_msg("a failed assertion (on purpose)");
}
END_TEST

START_TEST(nested_crashes_with_a_node_stopped)
{
    ck_assert_msg(cluster_node_pause(C, 1) == 0, "%s", cluster_last_error());
    abort();
}
END_TEST

START_TEST(test_failed_tests_leave_nothing)
{
    snprintf(g_pids_file, sizeof g_pids_file, "/tmp/keygate-cluster-pids-XXXXXX");
    int fd = mkstemp(g_pids_file);
    ck_assert_int_ge(fd, 0);
    close(fd);
    pid_t nested = fork();
    ck_assert_int_ge(nested, 0);
    if (nested == 0) {
        Suite *s = suite_create("nested");
        TCase *tc = harness_tcase(s, "nested", 30, nested_setup, teardown);
        tcase_add_test(tc, nested_fails);
        tcase_add_test(tc, nested_crashes_with_a_node_stopped);
        SRunner *sr = srunner_create(s);
        srunner_set_fork_status(sr, CK_FORK);
        srunner_run_all(sr, CK_SILENT);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        _exit(failed); /* no atexit: the teardown alone must have stopped the nodes */
    }
    int status;
    ck_assert_int_eq(waitpid(nested, &status, 0), nested);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 2, "the nested suite's 2 tests failed (status %d)",
                  status);
    FILE *f = fopen(g_pids_file, "r");
    ck_assert_ptr_nonnull(f);
    int pid, n = 0;
    while (fscanf(f, "%d", &pid) == 1) {
        errno = 0;
        ck_assert_msg(kill(pid, 0) != 0 && errno == ESRCH, "node pid %d of the nested suite is gone", pid);
        n++;
    }
    fclose(f);
    unlink(g_pids_file);
    ck_assert_int_eq(n, CLUSTER_NODES);
    ck_assert_int_eq(cluster_leftovers(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cluster_harness");
    TCase *tc = harness_tcase(s, "cluster", 60, setup, teardown);
    harness_add_test(tc, test_cluster_up);
    harness_add_test(tc, test_roles);
    harness_add_test(tc, test_slot_owner);
    harness_add_test(tc, test_pause_resume);
    harness_add_test(tc, test_ask_held);
    tc = harness_tcase(s, "reshard", 90, setup, teardown);
    harness_add_test(tc, test_reshard_100);
    tc = harness_tcase(s, "failover", 60, setup, teardown);
    harness_add_test(tc, test_kill_primary);
    tc = harness_tcase(s, "stop", 60, NULL, NULL);
    harness_add_test(tc, test_stop_leaves_nothing);
    harness_add_test(tc, test_failed_tests_leave_nothing);
    int failed = harness_run(s);
    /* after every teardown: no node of any cluster of this suite still runs */
    int left = cluster_leftovers();
    if (left) fprintf(stderr, "POST-CONDITION FAILED: %d redis-server(s) of this suite still run\n", left);
    return failed == 0 && left == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
