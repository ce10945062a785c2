/* sentinel.c: make test-chaos TOPOLOGY=sentinel: three keygates over a Sentinel-managed TLS primary (2 replicas, 3 sentinels, a stale fake sentinel listed first by kg1), clients INCRing counters in a replicas=1 namespace and one without, a seeded schedule of failovers, a history judged by the checker's counter rules. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "checker.h"
#include "chaos_sentinel.h"
#include "runner.h"
#include "history.h"
#include "procs.h"
#include "sentinel_harness.h"
#include "serverkit.h"

/*
 * The deployment (127.0.0.1, free ports; build/chaos/keygate-ha-XXXXXX/, kept on failure):
 *
 *   node 0..2      redis-server 7.0, TLS, appendonly: node 0 the first primary, 1 and 2 its replicas
 *   sentinel 0..2  redis-server --sentinel, quorum 2, down-after-milliseconds 1000, failover-timeout 5000
 *                  (tests/ha/sentinel_harness.c starts and drives all six)
 *   fake           tests/ha/fake_sentinel.py: names node 0 at the first config-epoch for ever (stale after the
 *                  first failover); first in kg1's sentinel list only
 *   kg0 kg1 kg2    keygate, threads 1 / 2 / 2: `instance durable sentinel ... failover-hold 8s`, replicas-timeout 2s
 *
 * Registry: r: (replicas=1) and a: (no replicas=), both durable, ttl=none. Counters r:c:0 r:c:1 a:c:0 a:c:1.
 *
 * SN_CLIENTS (CHAOS_CLIENTS) client threads per keygate: each operation an INCR (3 in 4) or a GET of a random
 * counter, CHAOS_PIPELINE of them sent at once (default 1), on one connection (client timeout 10 s: longer than failover-hold, so a held request is answered, not abandoned).
 * The nemesis (this thread) runs the seed's schedule, one fault at a time, each ending when the deployment is
 * settled again (the sentinels agree, the primary answers ROLE master, the other nodes replicate from it). Then
 * everything is healed and settled, each counter is read through every keygate and directly on the final
 * primary (the final reads), and the checker judges the history (checker.h, the counter rules).
 */

#define SN_NODES 3   /* keygates */
#define SN_CLIENTS 3 /* client threads per keygate */
#define SN_KEYS 4
#define SN_STALE_NODE 1     /* the keygate with the fake sentinel first in its list */
#define SN_START_MS 15000   /* a keygate serves durable after its start */
#define SN_SETTLE_MS 45000  /* the deployment settles after a fault */
#define SN_PROMOTE_MS 15000 /* a SENTINEL FAILOVER promotes a replica (failover-timeout 5000 + the demotion) */
#define SN_SHUTDOWN_MS 8000
#define SN_PRINT_VIOLATIONS 25
#define SN_FAILOVER_HOLD_S 8
#define SN_CLIENT_TIMEOUT_MS 10000

static const char *const g_key_names[SN_KEYS] = {"r:c:0", "r:c:1", "a:c:0", "a:c:1"};
static const int g_key_kind[SN_KEYS] = {HIST_KEY_COUNTER_REPLICATED, HIST_KEY_COUNTER_REPLICATED,
                                        HIST_KEY_COUNTER_ASYNC, HIST_KEY_COUNTER_ASYNC};
static const char *const g_node_names[SN_NODES] = {"kg0", "kg1", "kg2"};

static const char g_registry[] =
    "# registry.conf written by tests/chaos/sentinel.c\n"
    "namespace r: instance=durable ttl=none replicas=1 owner=app purpose=\"chaos counters, replicated\"\n"
    "namespace a: instance=durable ttl=none owner=app purpose=\"chaos counters, not replicated\"\n";

/* ---- options, time, randomness ---- */

static struct runner_opts g_o;
static int g_pipeline; /* CHAOS_PIPELINE: commands a client sends at once */

static const int g_kinds[] = {HF_FAILOVER, HF_KILL_PRIMARY, HF_STOP_PRIMARY, HF_STOP_SENTINEL, HF_RESTART};
#define SN_NKINDS ((int)(sizeof g_kinds / sizeof g_kinds[0]))

static int opts_read(const struct chaos_common *c)
{
    const char *v = getenv("CHAOS_PIPELINE");
    g_pipeline = v != NULL && atoi(v) > 0 ? (atoi(v) > 1000 ? 1000 : atoi(v)) : 1;
    return runner_opts_read(&g_o, c, SN_CLIENTS, g_kinds, SN_NKINDS, 0, "sentinel",
                            "failover,kill-primary,stop-primary,stop-sentinel,restart");
}

/* ---- the deployment ---- */

static struct {
    char root[PATH_MAX];
    struct ha *h;
    struct runner_kg node[SN_NODES];
    pid_t fake_pid;
    unsigned long long fake_start;
    int fake_port;
    char fake_log[PATH_MAX];
} g;

/* The config-epoch sentinel 0 gives the master now, or -1. */
static long long sentinel_epoch(void)
{
    redisContext *c = ha_sentinel_connect(g.h, 0);
    if (c == NULL) return -1;
    redisReply *r = redisCommand(c, "SENTINEL MASTER %s", g.h->master_name);
    const redisReply *e = serverkit_map_get(r, "config-epoch");
    long long epoch = e != NULL && e->type == REDIS_REPLY_STRING ? atoll(e->str) : -1;
    freeReplyObject(r);
    redisFree(c);
    return epoch;
}

/* fake_sentinel.py on g.fake_port naming node 0 at the current epoch for ever. 0, or -1. */
static int fake_start(void)
{
    char script[PATH_MAX + 32], cert[PATH_MAX + 32], key[PATH_MAX + 32], sport[16], mport[16], sepoch[24];
    long long epoch = sentinel_epoch();
    if (epoch < 0) {
        runner_fail("sentinel 0 gives no config-epoch");
        return -1;
    }
    snprintf(g.fake_log, sizeof g.fake_log, "%s/fake-sentinel.log", g.h->dir);
    snprintf(script, sizeof script, "%s/tests/ha/fake_sentinel.py", g.root);
    snprintf(cert, sizeof cert, "%s/build/certs/server.crt", g.root);
    snprintf(key, sizeof key, "%s/build/certs/server.key", g.root);
    snprintf(sport, sizeof sport, "%d", g.fake_port);
    snprintf(mport, sizeof mport, "%d", g.h->nodes[0].tls_port);
    snprintf(sepoch, sizeof sepoch, "%lld", epoch);
    char *argv[] = {"python3", script, sport, cert, key, g.h->master_name, "127.0.0.1", mport, sepoch, NULL};
    g.fake_pid = procs_spawn(argv, g.fake_log, NULL, getpid(), getpgrp(), &g.fake_start);
    if (g.fake_pid < 0) {
        g.fake_pid = 0;
        runner_fail("cannot start the fake sentinel: %s", strerror(errno));
        return -1;
    }
    long long deadline = procs_mono_ms() + 10000;
    for (;;) {
        FILE *f = fopen(g.fake_log, "r");
        char line[64] = "";
        if (f != NULL) {
            if (fgets(line, sizeof line, f) == NULL) line[0] = '\0';
            fclose(f);
        }
        if (strncmp(line, "ready", 5) == 0) return 0;
        if (procs_mono_ms() >= deadline) {
            runner_fail("the fake sentinel did not say ready within 10 s (%s)", g.fake_log);
            return -1;
        }
        procs_nap_ms(20);
    }
}

/* What keygate n serving durable answers: a GET of a counter (within the failover hold and 2 s). */
static const struct runner_kg_probe g_probe = {
    .keys = g_key_names, .nkeys = 1, .timeout_s = SN_FAILOVER_HOLD_S + 2, .what = "GET r:c:0"};

/* Keygate n's config: kg1's sentinel list starts with the fake sentinel. */
static void kg_conf(int n, char *conf, size_t len)
{
    struct runner_kg *k = &g.node[n];
    char first[32] = "";
    if (n == SN_STALE_NODE) snprintf(first, sizeof first, "127.0.0.1:%d,", g.fake_port);
    snprintf(conf, len,
             "# keygate.conf written by tests/chaos/sentinel.c\n"
             "listen 127.0.0.1:%d\n"
             "registry %s\n"
             "instance durable sentinel %s127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d master=%s tls "
             "ca=%s/build/certs/ca.crt server-name=localhost password-file=%s sentinel-password-file=%s\n"
             "failover-hold %ds\nreplicas-timeout 2s\nthreads %d\n",
             k->port, k->registry, first, g.h->sentinels[0].tls_port, g.h->sentinels[1].tls_port,
             g.h->sentinels[2].tls_port, g.h->master_name, g.root, g.h->pass_file, g.h->sentinel_pass_file,
             SN_FAILOVER_HOLD_S, k->threads);
}

static int deployment_start(void)
{
    if (runner_prepare(g.root, sizeof g.root) != 0) return -1;
    g.h = ha_start();
    if (g.h == NULL) {
        runner_fail("ha_start: %s", ha_last_error());
        return -1;
    }
    if (runner_kg_setup(g.node, SN_NODES, g_node_names, g.h->dir, &g.fake_port, 1) != 0 || fake_start() != 0) return -1;
    return runner_kg_start_all(g.node, SN_NODES, kg_conf, g_registry, &g_probe, SN_START_MS);
}

static void deployment_stop(int keep)
{
    runner_kg_kill_all(g.node, SN_NODES);
    if (g.fake_pid > 0) {
        procs_kill_wait(g.fake_pid, g.fake_start, 1, "fake sentinel");
        g.fake_pid = 0;
    }
    if (keep) setenv("HA_KEEP", "1", 1);
    ha_stop(g.h);
    g.h = NULL;
    procs_reap_mine();
}

/* ---- the clients ---- */

/* n INCRs or GETs (kind, key and node filled; one node) through keygate ops[0].node on cl's connection, pipelined:
 * each starts when the batch is sent and ends when its own reply is read. A lost connection or a timeout is every
 * unanswered one's status. */
static void client_batch(struct runner_client *cl, struct hist_op *ops, int n)
{
    long long t = runner_now_us();
    for (int i = 0; i < n; i++) ops[i].start_us = t;
    if (cl->c == NULL && runner_client_connect(&cl->c, g.node[ops[0].node].port, SN_CLIENT_TIMEOUT_MS, ops, n) != 0)
        return;
    for (int i = 0; i < n; i++)
        redisAppendCommandArgv(
            cl->c, 2, (const char *[]){ops[i].kind == HOP_INCR ? "INCR" : "GET", g_key_names[ops[i].key[0]]}, NULL);
    for (int i = 0; i < n; i++) {
        void *rv = NULL;
        if (redisGetReply(cl->c, &rv) != REDIS_OK || rv == NULL) {
            runner_client_lost(&cl->c, &ops[i], n - i);
            return;
        }
        ops[i].end_us = runner_now_us();
        runner_counter_reply(&ops[i], rv);
        freeReplyObject(rv);
    }
}

static void client_op(struct runner_client *cl, struct hist_op *o)
{
    client_batch(cl, o, 1);
}

static void *client_main(void *arg)
{
    struct runner_client *cl = arg;
    runner_client_lower_priority();
    while (!__atomic_load_n(&runner.stop_clients, __ATOMIC_ACQUIRE)) {
        size_t base = cl->log.n;
        for (int i = 0; i < g_pipeline; i++) runner_oplog_add(&cl->log); /* added first: oplog_add may move them */
        struct hist_op *ops = &cl->log.ops[base];
        for (int i = 0; i < g_pipeline; i++) {
            ops[i].thread = cl->id;
            ops[i].node = cl->node;
            ops[i].nkeys = 1;
            ops[i].key[0] = runner_rnd(&cl->rng, SN_KEYS);
            ops[i].kind = runner_rnd(&cl->rng, 4) < 3 ? HOP_INCR : HOP_GET;
        }
        client_batch(cl, ops, g_pipeline);
        if (ops[0].status == HST_ERR_CONN) runner_sleep_ms(10, &runner.stop_clients); /* retry pacing: a keygate down */
    }
    redisFree(cl->c);
    return NULL;
}

/* ---- the faults ---- */

/* struct runner_planned: target is the sentinel of stop-sentinel and failover */
static void plan_describe(const struct runner_planned *pl, char *buf, size_t len)
{
    switch (pl->kind) {
    case HF_FAILOVER:
        snprintf(buf, len, "SENTINEL FAILOVER sent to sentinel %d", pl->target);
        break;
    case HF_KILL_PRIMARY:
        snprintf(buf, len, "SIGKILL the primary, start it again once another is promoted");
        break;
    case HF_STOP_PRIMARY:
        snprintf(buf, len, "SIGSTOP the primary for %d ms%s", pl->hold_ms,
                 pl->hold_ms > 1000 ? "" : " (below down-after-milliseconds: no failover expected)");
        break;
    case HF_STOP_SENTINEL:
        snprintf(buf, len, "SIGSTOP sentinel %d for %d ms", pl->target, pl->hold_ms);
        break;
    default:
        runner_plan_describe(pl, g_node_names, buf, len);
    }
}

static struct runner_schedule g_sched = {.describe = plan_describe};

/* The schedule (the seed, DURATION and FAULTS decide it): the rest of planned fault pl after its kind and gap
 * (runner_plan_make), and its cost, a guess (a failover and the settling after it take seconds): the schedule is
 * cut when DURATION is up. */
static int plan_draw(unsigned long long *s, struct runner_planned *pl)
{
    int cost = 0;
    switch (pl->kind) {
    case HF_FAILOVER:
        pl->target = runner_rnd(s, HA_SENTINELS);
        cost = 4000;
        break;
    case HF_KILL_PRIMARY:
        cost = 6000;
        break;
    case HF_STOP_PRIMARY:
        pl->hold_ms = 300 + runner_rnd(s, 4701);
        cost = pl->hold_ms > 1000 ? 4000 : 500;
        break;
    case HF_STOP_SENTINEL:
        pl->target = runner_rnd(s, HA_SENTINELS);
        pl->hold_ms = 500 + runner_rnd(s, 3501);
        break;
    case HF_RESTART:
        pl->target = runner_rnd(s, SN_NODES);
        pl->param = runner_rnd(s, 2);
        cost = 1000;
        break;
    }
    return cost;
}

/* Wait until the deployment is settled; *primary the node it settled on. 0, or -1 (runner_fail). */
static int settle_deployment(int *primary)
{
    if (ha_wait_settled(g.h, SN_SETTLE_MS, primary) != 0) {
        runner_fail("the deployment did not settle: %s", ha_last_error());
        return -1;
    }
    return 0;
}

/* Run planned fault pl and wait for the deployment to settle; records the window. 0, or -1 (a harness failure). */
static int fault_run(const struct runner_planned *pl)
{
    int old = ha_primary(g.h), rc = 0, settled = -1;
    if (old < 0) {
        runner_fail("no primary before a fault: %s", ha_last_error());
        return -1;
    }
    struct hist_fault *f = runner_fault_begin(&g_sched, pl);
    switch (pl->kind) {
    case HF_FAILOVER: {
        redisContext *c = ha_sentinel_connect(g.h, pl->target);
        redisReply *r = c ? redisCommand(c, "SENTINEL FAILOVER %s", g.h->master_name) : NULL;
        int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        if (!ok) /* -INPROG, -NOGOODSLAVE: Sentinel refused it; the fault still ran (a refused failover) */
            runner_fault_note(f, ": refused (%.60s)", r ? serverkit_reply_text(r) : "no answer");
        freeReplyObject(r);
        redisFree(c);
        /* Sentinel may abort it (-failover-abort-slave-timeout: the replica it chose, a node just started again,
         * was turned back into a replica by the other sentinels): noted, then the deployment settles as usual */
        if (ok && ha_wait_promoted(g.h, old, SN_PROMOTE_MS, NULL) != 0)
            runner_fault_note(f, ": no new primary within %d ms (aborted by Sentinel?)", SN_PROMOTE_MS);
        break;
    }
    case HF_KILL_PRIMARY:
        if (ha_node_kill(g.h, old) != 0 || ha_wait_promoted(g.h, old, SN_SETTLE_MS, NULL) != 0 ||
            ha_node_restart(g.h, old) != 0) {
            runner_fail("kill-primary of node %d: %s", old, ha_last_error());
            rc = -1;
        }
        break;
    case HF_STOP_PRIMARY:
        if (ha_node_pause(g.h, old) != 0) {
            runner_fail("%s", ha_last_error());
            return -1;
        }
        runner_sleep_ms(pl->hold_ms, NULL); /* the fault's planned duration */
        if (ha_node_resume(g.h, old) != 0) {
            runner_fail("%s", ha_last_error());
            rc = -1;
        }
        break;
    case HF_STOP_SENTINEL:
        if (ha_sentinel_pause(g.h, pl->target) != 0) {
            runner_fail("%s", ha_last_error());
            return -1;
        }
        runner_sleep_ms(pl->hold_ms, NULL); /* the fault's planned duration */
        if (ha_sentinel_resume(g.h, pl->target) != 0) {
            runner_fail("%s", ha_last_error());
            rc = -1;
        }
        break;
    case HF_RESTART:
        rc = runner_kg_restart(&g.node[pl->target], pl->param, SN_SHUTDOWN_MS, &g_probe, SN_START_MS);
        break;
    default:
        runner_fail("fault %s is not implemented in TOPOLOGY=sentinel", hist_fault_name(pl->kind));
        return -1;
    }
    if (rc == 0) rc = settle_deployment(&settled);
    if (rc == 0 && settled != old) runner_fault_note(f, ": node %d -> node %d", old, settled);
    runner_fault_end(&g_sched, f);
    return rc;
}

/* Continue whatever is stopped, start again a data node that is down. */
static void heal_all(void)
{
    for (int i = 0; g.h != NULL && i < g.h->nnodes; i++) {
        if (g.h->nodes[i].stopped && ha_node_resume(g.h, i) != 0) runner_fail("%s", ha_last_error());
        if (!ha_node_alive(g.h, i) && ha_node_restart(g.h, i) != 0) runner_fail("%s", ha_last_error());
    }
    for (int s = 0; g.h != NULL && s < HA_SENTINELS; s++)
        if (g.h->sentinels[s].stopped && ha_sentinel_resume(g.h, s) != 0) runner_fail("%s", ha_last_error());
}

/* ---- the end: final reads, the history, the verdict ---- */

/* GET every counter through every keygate (ordinary reads) and directly on primary p (the final reads). */
static void final_reads(struct runner_client *cl, int p)
{
    for (int key = 0; key < SN_KEYS; key++) {
        for (int n = 0; n < SN_NODES; n++) client_op(cl, runner_final_op(cl, n, key));
        struct hist_op *o = runner_final_begin(&cl->log, cl->id, key);
        runner_final_get(o, ha_connect(g.h, p), p, g_key_names[key]);
    }
    redisFree(cl->c);
    cl->c = NULL;
}

/* The deployment started and its ports said. */
static int start(void)
{
    if (deployment_start() != 0) return -1;
    printf("chaos: nodes :%d :%d :%d (tls), sentinels :%d :%d :%d, fake sentinel :%d (first in kg1's list, names "
           "node 0 for ever); kg0 :%d kg1 :%d kg2 :%d; dir %s\n",
           g.h->nodes[0].tls_port, g.h->nodes[1].tls_port, g.h->nodes[2].tls_port, g.h->sentinels[0].tls_port,
           g.h->sentinels[1].tls_port, g.h->sentinels[2].tls_port, g.fake_port, g.node[0].port, g.node[1].port,
           g.node[2].port, g.h->dir);
    return 0;
}

/* After the load: the deployment settled, every keygate running and serving, the final reads on the primary. */
static void finish(struct runner_client *settler)
{
    int p = -1;
    if (runner.failure[0] == '\0' && settle_deployment(&p) == 0) {
        runner_kg_check_running(g.node, SN_NODES, &g_probe, SN_START_MS);
        printf("chaos: +%7.3fs settled on node %d; the final reads there\n", runner_now_us() / 1e6, p);
        if (runner.failure[0] == '\0') final_reads(settler, p);
    }
}

static const char *deployment_dir(void)
{
    return g.h != NULL ? g.h->dir : "";
}

static const struct history g_keys = {
    .nkeys = SN_KEYS, .key_names = g_key_names, .key_kind = g_key_kind, .nnodes = SN_NODES, .node_names = g_node_names};

static const struct runner_topology g_topology = {
    .name = "sentinel",
    .settles = "the deployment",
    .note_what = "a namespace without replicas= lost after a planned failover (SENTINEL FAILOVER)",
    .o = &g_o,
    .sc = &g_sched,
    .salt = 0x73656e74ull, /* "sent" */
    .kinds = g_kinds,
    .nkinds = SN_NKINDS,
    .draw = plan_draw,
    .nodes = SN_NODES,
    .client_size = sizeof(struct runner_client),
    .client_main = client_main,
    .start = start,
    .fault_run = fault_run,
    .heal = heal_all,
    .finish = finish,
    .dir = deployment_dir,
    .stop = deployment_stop,
    .keys = &g_keys,
    .max_print = SN_PRINT_VIOLATIONS,
};

int chaos_sentinel_main(const struct chaos_common *common)
{
    if (opts_read(common) != 0) return 2;
    printf("chaos: TOPOLOGY=sentinel SEED=%llu DURATION=%d FAULTS=%s\n", g_o.seed, g_o.duration_s, g_o.faults_text);
    printf("chaos: a TLS primary, 2 replicas, 3 sentinels (down-after-milliseconds 1000, failover-timeout 5000); "
           "keygates with failover-hold %ds, replicas-timeout 2s; %d clients per keygate (CHAOS_CLIENTS), each "
           "sending %d commands at once (CHAOS_PIPELINE): INCR 3 in 4, else GET; client timeout %d ms; errors "
           "explained by failover/kill-primary/stop-primary (every keygate) and restart "
           "(its keygate) up to %lld ms after the fault's window, which ends once the deployment is settled\n",
           SN_FAILOVER_HOLD_S, g_o.clients, g_pipeline, SN_CLIENT_TIMEOUT_MS, g_o.p.error_grace_us / 1000);
    return runner_main(&g_topology);
}
