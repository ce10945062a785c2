/* test_sentinel_harness.c: the Sentinel harness's own guarantees, checked on the nodes and sentinels directly: the deployment comes up whole over TLS, SENTINEL FAILOVER / SIGKILL / SIGSTOP of the primary promote a replica every sentinel agrees on, two sentinels of three still fail over, and nothing outlives a stop. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sentinel_harness.h"
#include "procs.h"
#include "harness.h"

static struct ha *H;

static void setup(void)
{
    long long t0 = now_ms();
    H = ha_start();
    ck_assert_msg(H != NULL, "ha_start: %s", ha_last_error());
    fprintf(stderr, "deployment up in %lld ms\n", now_ms() - t0);
}

static void teardown(void)
{
    ha_stop(H);
    H = NULL;
}

static redisContext *must_connect(int i)
{
    redisContext *c = ha_connect(H, i);
    ck_assert_msg(c != NULL, "node %d (port %d) does not answer", i, H->nodes[i].plain_port);
    return c;
}

static redisContext *must_sentinel(int s)
{
    redisContext *c = ha_sentinel_connect(H, s);
    ck_assert_msg(c != NULL, "sentinel %d (port %d) does not answer", s, H->sentinels[s].plain_port);
    return c;
}

/* CONFIG GET name on c: the value (static buffer). */
static const char *config_get(redisContext *c, const char *name)
{
    static char value[256];
    redisReply *r = cmd(c, "CONFIG GET %s", name);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "CONFIG GET %s: %s", name, describe(r));
    snprintf(value, sizeof value, "%s", r->element[1]->str);
    freeReplyObject(r);
    return value;
}

/* Node i is a replica of node p over TLS with its link up. */
static void replica_of(int i, int p)
{
    int port, up;
    ck_assert_msg(ha_node_role(H, i, &port, &up) == HA_ROLE_REPLICA, "node %d is a replica", i);
    ck_assert_msg(port == H->nodes[p].tls_port && up, "node %d replicates from port %d (link %d), node %d is at %d", i,
                  port, up, p, H->nodes[p].tls_port);
}

/* Every running sentinel names node p. */
static void sentinels_name(int p)
{
    for (int s = 0; s < HA_SENTINELS; s++) {
        if (!ha_sentinel_alive(H, s)) continue;
        int q = ha_sentinel_primary(H, s);
        ck_assert_msg(q == p, "sentinel %d names node %d, not node %d (%s)", s, q, p, ha_last_error());
    }
}

/* SET key value on node i (the primary) and WAIT for `replicas` replicas (5 s). */
static void write_and_wait(int i, const char *key, const char *value, int replicas)
{
    redisContext *c = must_connect(i);
    expect_status(cmd(c, "SET %s %s", key, value), "OK", "SET on the primary");
    redisReply *r = cmd(c, "WAIT %d 5000", replicas);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer == replicas, "WAIT %d: %s", replicas, describe(r));
    freeReplyObject(r);
    redisFree(c);
}

static void expect_value(int i, const char *key, const char *value)
{
    redisContext *c = must_connect(i);
    expect_bulk(cmd(c, "GET %s", key), value, "GET");
    redisFree(c);
}

START_TEST(test_deployment_up)
{
    ck_assert_int_eq(H->nnodes, HA_START_NODES);
    for (int i = 0; i < HA_START_NODES; i++) {
        const struct ha_proc *n = &H->nodes[i];
        ck_assert_msg(ha_node_alive(H, i), "node %d runs", i);
        ck_assert_msg(n->plain_port < 45000 && n->tls_port < 45000, "node %d ports %d/%d", i, n->plain_port,
                      n->tls_port);
        redisContext *c = must_connect(i);
        ck_assert_str_eq(config_get(c, "appendonly"), "yes");
        ck_assert_str_eq(config_get(c, "maxmemory-policy"), "noeviction");
        ck_assert_str_eq(config_get(c, "tls-replication"), "yes");
        ck_assert_int_eq(atoi(config_get(c, "tls-port")), n->tls_port);
        redisFree(c);
        /* the password is required */
        redisContext *anon = redisConnect("127.0.0.1", n->plain_port);
        ck_assert(anon != NULL && !anon->err);
        expect_error(cmd(anon, "GET k"), "NOAUTH", "no AUTH");
        redisFree(anon);
    }
    ck_assert(ha_node_role(H, 0, NULL, NULL) == HA_ROLE_PRIMARY);
    replica_of(1, 0);
    replica_of(2, 0);
    ck_assert_int_eq(ha_primary(H), 0);
    for (int s = 0; s < HA_SENTINELS; s++) {
        const struct ha_proc *p = &H->sentinels[s];
        ck_assert_msg(p->plain_port < 45000 && p->tls_port < 45000, "sentinel %d ports", s);
        redisContext *c = must_sentinel(s);
        redisReply *r = cmd(c, "ROLE");
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && strcmp(r->element[0]->str, "sentinel") == 0, "%s", describe(r));
        freeReplyObject(r);
        r = cmd(c, "SENTINEL get-master-addr-by-name %s", H->master_name);
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                          strcmp(r->element[0]->str, "127.0.0.1") == 0 &&
                          atoi(r->element[1]->str) == H->nodes[0].tls_port,
                      "sentinel %d: %s", s, describe(r));
        freeReplyObject(r);
        r = cmd(c, "SENTINEL REPLICAS %s", H->master_name);
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "sentinel %d: %s", s, describe(r));
        freeReplyObject(r);
        r = cmd(c, "SENTINEL SENTINELS %s", H->master_name);
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "sentinel %d: %s", s, describe(r));
        for (size_t k = 0; k < r->elements; k++) {
            /* the other sentinels are known at their TLS ports: they talk TLS to each other */
            int port = -1;
            for (size_t f = 0; f + 1 < r->element[k]->elements; f += 2)
                if (strcmp(r->element[k]->element[f]->str, "port") == 0)
                    port = atoi(r->element[k]->element[f + 1]->str);
            int known = 0;
            for (int o = 0; o < HA_SENTINELS; o++) known |= o != s && H->sentinels[o].tls_port == port;
            ck_assert_msg(known, "sentinel %d knows a sentinel at port %d", s, port);
        }
        freeReplyObject(r);
        redisFree(c);
        /* without the sentinels' password: refused */
        redisContext *anon = redisConnect("127.0.0.1", p->plain_port);
        ck_assert(anon != NULL && !anon->err);
        expect_error(cmd(anon, "SENTINEL MASTERS"), "NOAUTH", "no AUTH on a sentinel");
        redisFree(anon);
    }
    write_and_wait(0, "probe", "v1", 2);
    expect_value(1, "probe", "v1");
    expect_value(2, "probe", "v1");
}
END_TEST

START_TEST(test_pause_resume_replica)
{
    redisContext *c = must_connect(2);
    struct timeval tv = {0, 300000};
    ck_assert_int_eq(redisSetTimeout(c, tv), REDIS_OK);
    ck_assert_msg(ha_node_pause(H, 2) == 0, "%s", ha_last_error());
    redisReply *r = redisCommand(c, "PING");
    ck_assert_msg(r == NULL, "a stopped node answers PING: %s", describe(r));
    ck_assert_msg(ha_node_resume(H, 2) == 0, "%s", ha_last_error());
    redisFree(c);
    ck_assert_msg(ha_wait_settled(H, 10000, NULL) == 0, "%s", ha_last_error());
}
END_TEST

START_TEST(test_replica_without_aof)
{
    int i = ha_replica_add(H, 0, 20000);
    ck_assert_msg(i == HA_START_NODES, "ha_replica_add: %d: %s", i, ha_last_error());
    redisContext *c = must_connect(i);
    ck_assert_str_eq(config_get(c, "appendonly"), "no");
    redisFree(c);
    replica_of(i, 0);
    write_and_wait(0, "probe", "v2", 3);
    expect_value(i, "probe", "v2");
    ck_assert_msg(ha_wait_settled(H, 5000, NULL) == 0, "%s", ha_last_error());
}
END_TEST

START_TEST(test_sentinel_failover)
{
    write_and_wait(0, "before", "failover", 2);
    int p = -1;
    long long confirmed, settled;
    ck_assert_msg(ha_failover(H, 40000, &p, &confirmed, &settled) == 0, "%s", ha_last_error());
    fprintf(stderr,
            "SENTINEL FAILOVER: node %d confirmed by every sentinel in %lld ms, old primary a replica in %lld ms\n", p,
            confirmed, settled);
    ck_assert_msg(p == 1 || p == 2, "promoted node %d", p);
    sentinels_name(p);
    ck_assert(ha_node_role(H, p, NULL, NULL) == HA_ROLE_PRIMARY);
    replica_of(0, p);
    replica_of(3 - p, p);
    expect_value(p, "before", "failover");
    write_and_wait(p, "after", "failover", 2);
    expect_value(0, "after", "failover");
}
END_TEST

START_TEST(test_kill_primary)
{
    write_and_wait(0, "before", "kill", 2);
    int old = -1, p = -1;
    long long ms;
    ck_assert_msg(ha_kill_primary(H, 30000, &old, &p, &ms) == 0, "%s", ha_last_error());
    fprintf(stderr, "SIGKILL of the primary: node %d promoted, every sentinel naming it %lld ms after the kill\n", p,
            ms);
    ck_assert_int_eq(old, 0);
    ck_assert_msg(!ha_node_alive(H, 0), "node 0 is dead");
    sentinels_name(p);
    replica_of(3 - p, p);
    expect_value(p, "before", "kill");
    /* the old primary restarted (from its AOF) is made a replica of the new one */
    long long t0 = now_ms();
    ck_assert_msg(ha_node_restart(H, 0) == 0, "%s", ha_last_error());
    int q;
    ck_assert_msg(ha_wait_settled(H, 30000, &q) == 0, "%s", ha_last_error());
    fprintf(stderr, "restarted old primary a replica in %lld ms\n", now_ms() - t0);
    ck_assert_int_eq(q, p);
    replica_of(0, p);
    write_and_wait(p, "after", "kill", 2);
    expect_value(0, "after", "kill");
}
END_TEST

START_TEST(test_sigstop_primary)
{
    long long t0 = now_ms();
    ck_assert_msg(ha_node_pause(H, 0) == 0, "%s", ha_last_error());
    int p = -1;
    ck_assert_msg(ha_wait_promoted(H, 0, 30000, &p) == 0, "%s", ha_last_error());
    fprintf(stderr, "SIGSTOP of the primary: node %d promoted in %lld ms\n", p, now_ms() - t0);
    sentinels_name(p);
    /* SIGCONT: the old primary still says master, until the sentinels demote it */
    t0 = now_ms();
    ck_assert_msg(ha_node_resume(H, 0) == 0, "%s", ha_last_error());
    int q;
    ck_assert_msg(ha_wait_settled(H, 40000, &q) == 0, "%s", ha_last_error());
    fprintf(stderr, "SIGCONT: the old primary a replica of node %d in %lld ms\n", q, now_ms() - t0);
    ck_assert_int_eq(q, p);
    replica_of(0, p);
    replica_of(3 - p, p);
}
END_TEST

START_TEST(test_two_sentinels_fail_over)
{
    ck_assert_msg(ha_sentinel_kill(H, 2) == 0, "%s", ha_last_error());
    ck_assert(!ha_sentinel_alive(H, 2));
    int old = -1, p = -1;
    long long ms;
    ck_assert_msg(ha_kill_primary(H, 30000, &old, &p, &ms) == 0, "%s", ha_last_error());
    fprintf(stderr, "2 sentinels of 3: node %d promoted %lld ms after the primary's SIGKILL\n", p, ms);
    sentinels_name(p);
    /* the killed sentinel, restarted, learns the new primary from the others */
    ck_assert_msg(ha_sentinel_restart(H, 2) == 0, "%s", ha_last_error());
    int q;
    ck_assert_msg(ha_wait_settled(H, 30000, &q) == 0, "%s", ha_last_error());
    ck_assert_int_eq(q, p);
    ck_assert_int_eq(ha_sentinel_primary(H, 2), p);
}
END_TEST

/* ---- nothing outlives a stop ---- */

/* A deployment of the test's own, stopped with a node and a sentinel SIGSTOPped: no server,
 * port or file of it is left. */
START_TEST(test_stop_leaves_nothing)
{
    struct ha *own = ha_start();
    ck_assert_msg(own != NULL, "ha_start: %s", ha_last_error());
    struct ha_proc procs[HA_START_NODES + HA_SENTINELS];
    memcpy(procs, own->nodes, sizeof(struct ha_proc) * HA_START_NODES);
    memcpy(procs + HA_START_NODES, own->sentinels, sizeof own->sentinels);
    char dir[sizeof own->dir];
    memcpy(dir, own->dir, sizeof dir);
    ck_assert_msg(ha_node_pause(own, 0) == 0, "%s", ha_last_error()); /* a stopped node goes too */
    ck_assert_msg(ha_sentinel_pause(own, 1) == 0, "%s", ha_last_error());
    ha_stop(own);
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
        errno = 0;
        ck_assert_msg(kill(procs[i].pid, 0) != 0 && errno == ESRCH, "server %zu (pid %d) is gone", i,
                      (int)procs[i].pid);
        ck_assert_msg(procs_port_free(procs[i].plain_port) && procs_port_free(procs[i].tls_port),
                      "server %zu's ports %d/%d free", i, procs[i].plain_port, procs[i].tls_port);
    }
    struct stat st;
    ck_assert_msg(stat(dir, &st) != 0 && errno == ENOENT, "%s removed", dir);
    ck_assert_int_eq(ha_leftovers(), 0);
}
END_TEST

/* A failed test leaves nothing either: a nested suite, run in a forked process, whose tests
 * fail, crash with a node stopped, and crash after restarting a sentinel from the test
 * process (a double-forked server). */

static char g_pids_file[64]; /* the nested suite's server pids, one a line */

static void record_pids(void)
{
    FILE *f = fopen(g_pids_file, "a");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < H->nnodes; i++) fprintf(f, "%d\n", (int)H->nodes[i].pid);
    for (int s = 0; s < HA_SENTINELS; s++) fprintf(f, "%d\n", (int)H->sentinels[s].pid);
    fclose(f);
}

static void nested_setup(void)
{
    setup();
    record_pids();
}

START_TEST(nested_fails)
{
    ck_abort_msg("a failed assertion (on purpose)");
}
END_TEST

START_TEST(nested_crashes_with_a_node_stopped)
{
    ck_assert_msg(ha_node_pause(H, 1) == 0, "%s", ha_last_error());
    abort();
}
END_TEST

START_TEST(nested_crashes_after_a_restart)
{
    ck_assert_msg(ha_sentinel_kill(H, 0) == 0, "%s", ha_last_error());
    ck_assert_msg(ha_sentinel_restart(H, 0) == 0, "%s", ha_last_error());
    record_pids(); /* the restarted sentinel's new pid */
    abort();
}
END_TEST

START_TEST(test_failed_tests_leave_nothing)
{
    snprintf(g_pids_file, sizeof g_pids_file, "/tmp/keygate-ha-pids-XXXXXX");
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
        tcase_add_test(tc, nested_crashes_after_a_restart);
        SRunner *sr = srunner_create(s);
        srunner_set_fork_status(sr, CK_FORK);
        srunner_run_all(sr, CK_SILENT);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        _exit(failed); /* no atexit: the teardown alone must have stopped the servers */
    }
    int status;
    ck_assert_int_eq(waitpid(nested, &status, 0), nested);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 3, "the nested suite's 3 tests failed (status %d)",
                  status);
    FILE *f = fopen(g_pids_file, "r");
    ck_assert_ptr_nonnull(f);
    int pid, n = 0;
    while (fscanf(f, "%d", &pid) == 1) {
        errno = 0;
        ck_assert_msg(pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH), "server pid %d of the nested suite is gone",
                      pid);
        n++;
    }
    fclose(f);
    unlink(g_pids_file);
    ck_assert_int_eq(n, 2 * (HA_START_NODES + HA_SENTINELS));
    ck_assert_int_eq(ha_leftovers(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sentinel_harness");
    TCase *tc = harness_tcase(s, "deployment", 60, setup, teardown);
    harness_add_test(tc, test_deployment_up);
    harness_add_test(tc, test_pause_resume_replica);
    harness_add_test(tc, test_replica_without_aof);
    tc = harness_tcase(s, "failover", 60, setup, teardown);
    harness_add_test(tc, test_sentinel_failover);
    tc = harness_tcase(s, "kill", 90, setup, teardown);
    harness_add_test(tc, test_kill_primary);
    tc = harness_tcase(s, "sigstop", 90, setup, teardown);
    harness_add_test(tc, test_sigstop_primary);
    tc = harness_tcase(s, "sentinel_down", 90, setup, teardown);
    harness_add_test(tc, test_two_sentinels_fail_over);
    tc = harness_tcase(s, "stop", 90, NULL, NULL);
    harness_add_test(tc, test_stop_leaves_nothing);
    harness_add_test(tc, test_failed_tests_leave_nothing);
    int failed = harness_run(s);
    /* the suite's post-condition: no server of any deployment still runs */
    int left = ha_leftovers();
    if (left) fprintf(stderr, "POST-CONDITION FAILED: %d server(s) of this suite still run\n", left);
    return failed == 0 && left == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
