/* test_replicas.c: integration tests of replicas=N (issue 22): a write acknowledged only once a real replica of durable has it, -NOREPLICAS past replicas-timeout, one WAIT per group of writes. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/*
 * One harness (two TLS redis-servers + keygate) with its own registry:
 *   rq:  instance=durable ttl=none replicas=1   (the namespace under test)
 *   q:   instance=durable ttl=none              (the same instance, acknowledged at once)
 *   cache: on cache
 * and `replicas-timeout 300ms`. Each test starts a real replica of durable (plain replication
 * from durable's plain port) and reads it directly.
 */

static struct harness h;

#define REGISTRY                                                                                                       \
    "namespace rq:    instance=durable ttl=none owner=app replicas=1\n"                                                \
    "namespace q:     instance=durable ttl=none owner=app\n"                                                           \
    "namespace cache: instance=cache   ttl=1h   owner=app\n"

static void setup(void)
{
    struct harness_opts o = {.registry_text = REGISTRY, .extra_config = "replicas-timeout 300ms\n"};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h);
    harness_stop(&h);
}

struct replica {
    pid_t pid;
    int port;
    char dir[64];
};

/* A replica of durable, dying with the test's process; waits (10 s) until durable reports it online. */
static void replica_start(struct replica *rp)
{
    snprintf(rp->dir, sizeof rp->dir, "/tmp/kg-replica-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(rp->dir));
    rp->port = harness_free_port();
    ck_assert_int_gt(rp->port, 0);
    char sport[16], mport[16], log[300];
    snprintf(sport, sizeof sport, "%d", rp->port);
    snprintf(mport, sizeof mport, "%d", h.backends[0].plain_port);
    snprintf(log, sizeof log, "%s/replica.log", rp->dir);
    rp->pid = fork();
    ck_assert_int_ge(rp->pid, 0);
    if (rp->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execlp("redis-server", "redis-server", "--bind", "127.0.0.1", "--port", sport, "--replicaof", "127.0.0.1",
               mport, "--masterauth", h.backends[0].password, "--save", "", "--appendonly", "no", "--dir", rp->dir,
               "--logfile", log, (char *)NULL);
        _exit(127);
    }
    for (long long end = now_ms() + 10000; now_ms() < end; sleep_ms(50)) {
        redisContext *d = harness_must_direct(&h, "durable");
        redisReply *r = cmd(d, "INFO replication");
        char want[64]; /* this replica: an earlier test's, killed, may still be listed online */
        snprintf(want, sizeof want, "port=%d,state=online", rp->port);
        int online = r->type == REDIS_REPLY_STRING && strstr(r->str, want);
        freeReplyObject(r);
        redisFree(d);
        if (online) {
            /* after a diskless sync the primary streams writes to the replica only after its
             * first REPLCONF ACK (up to 1 s later): wait until a write of its own is acknowledged */
            redisContext *d2 = harness_must_direct(&h, "durable");
            expect_status(cmd(d2, "SET q:replica:warm 1"), "OK", "a direct write");
            expect_int(cmd(d2, "WAIT 1 10000"), 1, "the new replica acknowledges a direct write");
            redisFree(d2);
            return;
        }
    }
    kill(rp->pid, SIGKILL);
    ck_abort_msg("the replica of durable did not come online within 10 s (log %s)", log);
}

static void replica_stop(struct replica *rp)
{
    kill(rp->pid, SIGCONT);
    kill(rp->pid, SIGKILL);
    waitpid(rp->pid, NULL, 0);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", rp->dir);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", rp->dir);
}

/* SIGSTOP the replica and wait (5 s) until it is stopped: it acks nothing more. */
static void replica_pause(const struct replica *rp)
{
    ck_assert_int_eq(kill(rp->pid, SIGSTOP), 0);
    char path[64], state = '?';
    snprintf(path, sizeof path, "/proc/%d/stat", (int)rp->pid);
    for (long long end = now_ms() + 5000; state != 'T' && now_ms() < end;) {
        FILE *f = fopen(path, "r");
        char line[512] = "";
        if (f && fgets(line, sizeof line, f) && strrchr(line, ')')) state = strrchr(line, ')')[2];
        if (f) fclose(f);
        if (state != 'T') sleep_ms(5);
    }
    ck_assert_msg(state == 'T', "replica pid %d is in state %c 5 s after SIGSTOP", (int)rp->pid, state);
}

static redisContext *replica_conn(const struct replica *rp)
{
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", rp->port, tv);
    ck_assert_msg(c && !c->err, "connect to the replica: %s", c ? c->errstr : "?");
    ck_assert_int_eq(redisSetTimeout(c, tv), REDIS_OK);
    return c;
}

/* durable's INFO commandstats calls of `command` (0 when never called), read directly. */
static long long durable_calls(const char *command)
{
    redisContext *d = harness_must_direct(&h, "durable");
    redisReply *r = cmd(d, "INFO commandstats");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    char field[64];
    snprintf(field, sizeof field, "cmdstat_%s:calls=", command);
    const char *at = strstr(r->str, field);
    long long n = at ? atoll(at + strlen(field)) : 0;
    freeReplyObject(r);
    redisFree(d);
    return n;
}

START_TEST(test_replicas_ok_means_the_replica_has_it)
{
    struct replica rp;
    replica_start(&rp);
    redisContext *kg = harness_must_client(&h), *rep = replica_conn(&rp);
    for (int i = 0; i < 50; i++) {
        char key[32], val[32];
        snprintf(key, sizeof key, "rq:ok:%d", i);
        snprintf(val, sizeof val, "v%d", i);
        expect_status(cmd(kg, "SET %s %s", key, val), "OK", "SET in a replicas=1 namespace");
        /* acknowledged means replicated: the replica has it the moment the client has OK */
        expect_bulk(cmd(rep, "GET %s", key), val, "the replica, read right after the OK");
    }
    expect_int(cmd(kg, "INCR rq:ok:n"), 1, "INCR: its integer reply, held then passed");
    expect_bulk(cmd(rep, "GET rq:ok:n"), "1", "the replica has the INCR");
    /* a transaction of the client's: EXEC's reply waits for the replicas too */
    expect_status(cmd(kg, "MULTI"), "OK", "MULTI");
    expect_status(cmd(kg, "SET rq:ok:m x"), "QUEUED", "SET queued");
    expect_status(cmd(kg, "SET q:ok:m y"), "QUEUED", "SET queued");
    expect_array(cmd(kg, "EXEC"), "EXEC", 2, "+OK", "+OK");
    expect_bulk(cmd(rep, "GET rq:ok:m"), "x", "the replica has the transaction's write");
    expect_bulk(cmd(kg, "GET rq:ok:m"), "x", "a read is answered as usual");
    redisFree(rep);
    redisFree(kg);
    replica_stop(&rp);
}
END_TEST

/* keygate's replicas_waits (INFO stats: the WAITs it sent), asked through c. */
static long long replicas_waits(redisContext *c)
{
    redisReply *r = cmd(c, "INFO stats");
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strstr(r->str, "replicas_waits:"), "INFO stats: %s", describe(r));
    long long n = atoll(strstr(r->str, "replicas_waits:") + 15);
    freeReplyObject(r);
    return n;
}

/* Wait (5 s) until keygate's replicas_waits is past `before`: a held write's WAIT is out. */
static void wait_for_wait_sent(redisContext *probe, long long before)
{
    for (long long end = now_ms() + 5000; replicas_waits(probe) == before;) {
        ck_assert_msg(now_ms() < end, "no WAIT sent for the held write within 5 s");
        sleep_ms(5);
    }
}

START_TEST(test_replicas_not_confirmed_answers_noreplicas)
{
    struct replica rp;
    replica_start(&rp);
    redisContext *kg = harness_must_client(&h), *other = harness_must_client(&h);
    expect_status(cmd(kg, "SET rq:nr:0 v"), "OK", "a write the replica confirms");
    expect_status(cmd(other, "SET q:nr:plain v"), "OK", "a plain write");
    long long waits = replicas_waits(other);
    replica_pause(&rp);

    /* the write is sent; while its WAIT is out, another client's requests to durable go as usual */
    long long t0 = now_ms();
    redisAppendCommand(kg, "SET rq:nr:1 v1");
    send_appended(kg, "SET rq:nr:1");
    wait_for_wait_sent(other, waits); /* its reply is held, the WAIT for it pending */
    for (int i = 0; i < 5; i++) {
        long long t1 = now_ms();
        expect_bulk(cmd(other, "GET q:nr:plain"), "v", "another client's GET while the WAIT is pending");
        expect_status(cmd(other, "SET q:nr:plain v"), "OK", "another client's plain write while the WAIT is pending");
        ck_assert_msg(now_ms() - t1 < 100, "another client's GET + SET took %lld ms behind a pending WAIT",
                      now_ms() - t1);
    }
    redisReply *r = next_reply(kg);
    long long took = now_ms() - t0;
    ck_assert_msg(r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOREPLICAS ", 11) == 0 &&
                      strstr(r->str, "the write ran on the primary of instance 'durable'") &&
                      strstr(r->str, "0 of 1 replicas confirmed it within replicas-timeout (300ms)"),
                  "a write the stopped replica cannot confirm: %s", describe(r));
    freeReplyObject(r);
    ck_assert_msg(took >= 280 && took < 3000, "-NOREPLICAS after %lld ms (replicas-timeout 300ms)", took);
    /* it did run on the primary */
    redisContext *d = harness_must_direct(&h, "durable");
    expect_bulk(cmd(d, "GET rq:nr:1"), "v1", "the primary has the write");
    /* an error reply is not held: nothing was written */
    t0 = now_ms();
    expect_error(cmd(kg, "LPUSH rq:nr:1 x"), "WRONGTYPE", "an error reply passes at once");
    ck_assert_msg(now_ms() - t0 < 200, "an error reply took %lld ms", now_ms() - t0);
    /* reads are never held */
    expect_bulk(cmd(kg, "GET rq:nr:1"), "v1", "a read");
    /* a pipeline: every write of it answered -NOREPLICAS, in order, a read among them as usual */
    redisAppendCommand(kg, "SET rq:nr:2 a");
    redisAppendCommand(kg, "GET q:nr:plain");
    redisAppendCommand(kg, "SET rq:nr:3 b");
    send_appended(kg, "pipeline");
    expect_error(next_reply(kg), "NOREPLICAS", "first write of the pipeline");
    expect_bulk(next_reply(kg), "v", "the read between them, in order");
    expect_error(next_reply(kg), "NOREPLICAS", "second write of the pipeline");
    expect_bulk(cmd(d, "GET rq:nr:3"), "b", "the primary has the pipeline's write");
    /* the three -NOREPLICAS are counted (INFO stats replicas_timeouts, keygate_replicas_timeouts_total) */
    r = cmd(kg, "INFO stats");
    const char *at = r->type == REDIS_REPLY_STRING ? strstr(r->str, "replicas_timeouts:") : NULL;
    ck_assert_msg(at && atoll(at + 18) >= 3, "INFO stats replicas_timeouts: %s", describe(r));
    freeReplyObject(r);
    /* once the replica runs again, writes are acknowledged again */
    ck_assert_int_eq(kill(rp.pid, SIGCONT), 0);
    int ok = 0;
    for (long long end = now_ms() + 10000; !ok && now_ms() < end;) {
        r = cmd(kg, "SET rq:nr:4 v");
        ok = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
    }
    ck_assert_msg(ok, "no write acknowledged within 10 s of the replica's SIGCONT");
    redisFree(d);
    redisFree(other);
    redisFree(kg);
    replica_stop(&rp);
}
END_TEST

START_TEST(test_replicas_one_wait_per_group)
{
    struct replica rp;
    replica_start(&rp);
    redisContext *kg = harness_must_client(&h), *rep = replica_conn(&rp);
    expect_status(cmd(kg, "SET rq:g:warm v"), "OK", "warm up: the dedicated connection exists");
    long long before = durable_calls("wait");
    for (int i = 0; i < 100; i++) redisAppendCommand(kg, "SET rq:g:%d v%d", i, i);
    send_appended(kg, "100 SETs");
    for (int i = 0; i < 100; i++) expect_status(next_reply(kg), "OK", "pipelined SET");
    long long waits = durable_calls("wait") - before;
    printf("replicas: 100 pipelined SETs in a replicas=1 namespace took %lld WAITs\n", waits);
    ck_assert_msg(waits >= 1 && waits <= 20, "100 pipelined SETs took %lld WAITs on the primary", waits);
    for (int i = 0; i < 100; i += 11) {
        char key[32], val[32];
        snprintf(key, sizeof key, "rq:g:%d", i);
        snprintf(val, sizeof val, "v%d", i);
        expect_bulk(cmd(rep, "GET %s", key), val, "the replica has every acknowledged write");
    }
    /* writes to a namespace without replicas= send no WAIT */
    before = durable_calls("wait");
    for (int i = 0; i < 20; i++) expect_status(cmd(kg, "SET q:g:%d v", i), "OK", "a plain write");
    ck_assert_int_eq(durable_calls("wait") - before, 0);
    redisFree(rep);
    redisFree(kg);
    replica_stop(&rp);
}
END_TEST

/* keygate's INFO counts the WAITs it sent (replicas_waits) */
START_TEST(test_replicas_waits_counted)
{
    struct replica rp;
    replica_start(&rp);
    redisContext *kg = harness_must_client(&h);
    expect_status(cmd(kg, "SET rq:c:1 v"), "OK", "a replicas=1 write");
    ck_assert_int_ge(replicas_waits(kg), 1);
    redisFree(kg);
    replica_stop(&rp);
}
END_TEST

/* A DEL split over two instances (rq: on durable, replicas=1; cache: on cache) waits for durable's
 * replica too: answered once the replica has its part, -NOREPLICAS when the replica cannot say so
 * (the cache part ran, as the durable part did: the write is not undone). */
START_TEST(test_replicas_split_del_waits_for_its_part)
{
    struct replica rp;
    replica_start(&rp);
    redisContext *kg = harness_must_client(&h), *rep = replica_conn(&rp);
    for (int i = 0; i < 20; i++) {
        expect_status(cmd(kg, "SET rq:sp:%d v", i), "OK", "SET in a replicas=1 namespace");
        expect_status(cmd(kg, "SET cache:sp:%d v", i), "OK", "SET in cache");
        expect_int(cmd(kg, "DEL rq:sp:%d cache:sp:%d", i, i), 2, "DEL over durable and cache (split)");
        /* acknowledged means replicated: the replica has the DEL the moment the client has :2 */
        expect_int(cmd(rep, "EXISTS rq:sp:%d", i), 0, "the replica, read right after the split DEL's reply");
    }
    expect_status(cmd(kg, "SET rq:sp:x v"), "OK", "SET in a replicas=1 namespace");
    expect_int(cmd(kg, "UNLINK cache:sp:none q:sp:none"), 0, "UNLINK split over cache and durable, no replicas= key");
    replica_pause(&rp);
    long long t0 = now_ms();
    redisReply *r = cmd(kg, "UNLINK cache:sp:none rq:sp:x");
    long long took = now_ms() - t0;
    ck_assert_msg(r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOREPLICAS ", 11) == 0 &&
                      strstr(r->str, "0 of 1 replicas confirmed it within replicas-timeout (300ms)"),
                  "a split UNLINK whose durable part the stopped replica cannot confirm: %s", describe(r));
    freeReplyObject(r);
    ck_assert_msg(took >= 280, "-NOREPLICAS after %lld ms (replicas-timeout 300ms)", took);
    redisContext *d = harness_must_direct(&h, "durable");
    expect_int(cmd(d, "EXISTS rq:sp:x"), 0, "the UNLINK ran on the primary");
    redisFree(d);
    expect_int(cmd(kg, "DEL cache:sp:none q:sp:none"), 0, "a split DEL without a replicas= key: not held");
    redisFree(rep);
    redisFree(kg);
    replica_stop(&rp);
}
END_TEST

/* keygate stopping (SIGTERM) while a write is held: its client still gets its answer (the WAIT's,
 * within the drain), and keygate exits 0 (the harness fails the suite otherwise) */
START_TEST(test_replicas_held_write_at_shutdown)
{
    struct replica rp;
    replica_start(&rp);
    redisContext *kg = harness_must_client(&h);
    expect_status(cmd(kg, "SET rq:sd:0 v"), "OK", "a confirmed write");
    redisContext *probe = harness_must_client(&h);
    long long waits = replicas_waits(probe);
    replica_pause(&rp);
    redisAppendCommand(kg, "SET rq:sd:1 v");
    send_appended(kg, "SET rq:sd:1");
    /* held once its WAIT is out (a SIGTERM before keygate read the SET would close kg unanswered) */
    wait_for_wait_sent(probe, waits);
    redisFree(probe);
    pid_t kpid = h.keygate_pid;
    ck_assert_int_gt(kpid, 0);
    ck_assert_int_eq(kill(kpid, SIGTERM), 0);
    expect_error(next_reply(kg), "NOREPLICAS", "the held write, answered while keygate stops");
    /* it exits (a zombie until the runner reaps it; the heal then checks its exit status) */
    char path[64], state = 'R';
    snprintf(path, sizeof path, "/proc/%d/stat", (int)kpid);
    for (long long end = now_ms() + 10000; state != 'Z' && state != '?' && now_ms() < end;) {
        FILE *f = fopen(path, "r");
        char line[512] = "";
        state = f && fgets(line, sizeof line, f) && strrchr(line, ')') ? strrchr(line, ')')[2] : '?';
        if (f) fclose(f);
        if (state != 'Z' && state != '?') sleep_ms(20);
    }
    ck_assert_msg(state == 'Z' || state == '?', "keygate still runs 10 s after SIGTERM (state %c)", state);
    redisFree(kg);
    replica_stop(&rp);
}
END_TEST

/* The same with the write's client gone before the SIGTERM: nobody waits for the held write, so
 * the drain ends at once while its WAIT is still out on keygate's connection for it. keygate
 * exits 0 (the harness fails the suite otherwise): before, router_free found the WAIT's group
 * still covered and aborted (exit 134; found by the Sentinel fault harness, SEED=14). */
START_TEST(test_replicas_wait_out_at_shutdown_with_its_client_gone)
{
    struct replica rp;
    replica_start(&rp);
    redisContext *kg = harness_must_client(&h);
    expect_status(cmd(kg, "SET rq:sd:2 v"), "OK", "a confirmed write");
    redisContext *probe = harness_must_client(&h);
    long long waits = replicas_waits(probe);
    replica_pause(&rp);
    redisAppendCommand(kg, "SET rq:sd:3 v");
    send_appended(kg, "SET rq:sd:3");
    wait_for_wait_sent(probe, waits);
    redisFree(probe);
    redisFree(kg); /* the held write's client leaves: its request lives on, orphaned */
    pid_t kpid = h.keygate_pid;
    ck_assert_int_gt(kpid, 0);
    ck_assert_int_eq(kill(kpid, SIGTERM), 0);
    int status = harness_wait_exit(kpid, 10000);
    ck_assert_msg(status != -1, "keygate still runs 10 s after SIGTERM");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "keygate ended with wait status 0x%x after SIGTERM",
                  (unsigned)status);
    replica_stop(&rp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("replicas");
    TCase *tc = harness_tcase(s, "replicas", 60, setup, teardown);
    harness_add_test(tc, test_replicas_ok_means_the_replica_has_it);
    harness_add_test(tc, test_replicas_not_confirmed_answers_noreplicas);
    harness_add_test(tc, test_replicas_one_wait_per_group);
    harness_add_test(tc, test_replicas_waits_counted);
    harness_add_test(tc, test_replicas_split_del_waits_for_its_part);
    harness_add_test(tc, test_replicas_held_write_at_shutdown);
    harness_add_test(tc, test_replicas_wait_out_at_shutdown_with_its_client_gone);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
