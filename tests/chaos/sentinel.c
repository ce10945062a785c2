/* sentinel.c: make test-chaos TOPOLOGY=sentinel: three keygates over a Sentinel-managed TLS primary (2 replicas, 3 sentinels, a stale fake sentinel listed first by kg1), clients INCRing counters in a replicas=1 namespace and one without, a seeded schedule of failovers, a history judged by the checker's counter rules. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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
#define SN_STALE_NODE 1 /* the keygate with the fake sentinel first in its list */
#define SN_MAX_PLANNED 256
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

static struct {
    unsigned long long seed;
    int duration_s;
    unsigned faults;
    char faults_text[256];
    struct check_params p;
    int keep;
    int clients, pipeline; /* CHAOS_CLIENTS (client threads per keygate), CHAOS_PIPELINE (commands sent at once) */
    const char *keygate_bin;
} g_o;

static long long g_t0_us;

static long long now_us(void)
{
    return runner_mono_us() - g_t0_us;
}

static const int g_kinds[] = {HF_FAILOVER, HF_KILL_PRIMARY, HF_STOP_PRIMARY, HF_STOP_SENTINEL, HF_RESTART};
#define SN_NKINDS ((int)(sizeof g_kinds / sizeof g_kinds[0]))

static int opts_read(const struct chaos_common *c)
{
    g_o.seed = c->seed;
    g_o.duration_s = c->duration_s;
    g_o.keygate_bin = c->keygate_bin;
    g_o.keep = c->keep;
    g_o.p = c->p;
    const char *v = getenv("CHAOS_CLIENTS");
    g_o.clients = v != NULL && atoi(v) > 0 ? atoi(v) : SN_CLIENTS;
    v = getenv("CHAOS_PIPELINE");
    g_o.pipeline = v != NULL && atoi(v) > 0 ? (atoi(v) > 1000 ? 1000 : atoi(v)) : 1;
    return runner_faults_parse(c->faults, g_kinds, SN_NKINDS, 0, "sentinel",
                               "failover,kill-primary,stop-primary,stop-sentinel,restart", &g_o.faults, g_o.faults_text,
                               sizeof g_o.faults_text);
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

static char g_failure[2048];
static int g_crashes; /* keygates that did not exit 0 after SIGTERM (a defect: the run fails, the schedule goes on) */

static void fail_harness(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail_harness(const char *fmt, ...)
{
    if (g_failure[0] != '\0') return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_failure, sizeof g_failure, fmt, ap);
    va_end(ap);
    fprintf(stderr, "chaos[SEED=%llu]: %s\n", g_o.seed, g_failure);
}

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
        fail_harness("sentinel 0 gives no config-epoch");
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
        fail_harness("cannot start the fake sentinel: %s", strerror(errno));
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
            fail_harness("the fake sentinel did not say ready within 10 s (%s)", g.fake_log);
            return -1;
        }
        procs_nap_ms(20);
    }
}

static int kg_write_files(int n)
{
    struct runner_kg *k = &g.node[n];
    char conf[8 * PATH_MAX], first[32] = "";
    if (n == SN_STALE_NODE) snprintf(first, sizeof first, "127.0.0.1:%d,", g.fake_port);
    snprintf(conf, sizeof conf,
             "# keygate.conf written by tests/chaos/sentinel.c\n"
             "listen 127.0.0.1:%d\n"
             "registry %s\n"
             "instance durable sentinel %s127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d master=%s tls "
             "ca=%s/build/certs/ca.crt server-name=localhost password-file=%s sentinel-password-file=%s\n"
             "failover-hold %ds\nreplicas-timeout 2s\nthreads %d\n",
             k->port, k->registry, first, g.h->sentinels[0].tls_port, g.h->sentinels[1].tls_port,
             g.h->sentinels[2].tls_port, g.h->master_name, g.root, g.h->pass_file, g.h->sentinel_pass_file,
             SN_FAILOVER_HOLD_S, k->threads);
    if (serverkit_write_file(k->conf, conf, 0644) != 0 || serverkit_write_file(k->registry, g_registry, 0644) != 0) {
        fail_harness("writing %s's files: %s", k->name, strerror(errno));
        return -1;
    }
    return 0;
}

static int kg_spawn(int n)
{
    struct runner_kg *k = &g.node[n];
    if (runner_kg_spawn(k, g_o.keygate_bin) != 0) {
        fail_harness("cannot start %s: %s", k->name, strerror(errno));
        return -1;
    }
    return 0;
}

/* Wait (deadline_ms) until keygate n answers a GET of a counter (it serves durable). 0, or -1. */
static int kg_wait_serving(int n, int deadline_ms)
{
    struct runner_kg *k = &g.node[n];
    long long deadline = procs_mono_ms() + deadline_ms;
    char last[160] = "no answer";
    for (;;) {
        redisContext *c = redisConnectWithTimeout("127.0.0.1", k->port, (struct timeval){1, 0});
        if (c != NULL && !c->err) {
            redisSetTimeout(c, (struct timeval){SN_FAILOVER_HOLD_S + 2, 0});
            redisReply *r = redisCommand(c, "GET r:c:0");
            int ok = r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL);
            snprintf(last, sizeof last, "%s", r != NULL ? serverkit_reply_text(r) : c->errstr);
            freeReplyObject(r);
            redisFree(c);
            if (ok) return 0;
        } else {
            redisFree(c);
        }
        if (!procs_alive(k->pid, k->start) || procs_mono_ms() >= deadline) {
            serverkit_print_log_tail(k->name, k->log);
            fail_harness("%s (pid %d, port %d) %s: GET r:c:0 not served within %d ms (last: %s)", k->name, (int)k->pid,
                         k->port, procs_alive(k->pid, k->start) ? "runs" : "exited", deadline_ms, last);
            return -1;
        }
        procs_nap_ms(50);
    }
}

static int deployment_start(void)
{
    if (getcwd(g.root, sizeof g.root) == NULL) {
        fail_harness("getcwd: %s", strerror(errno));
        return -1;
    }
    if (access(g_o.keygate_bin, X_OK) != 0) {
        fail_harness("KEYGATE_BIN=%s is not an executable: build it with `make all`", g_o.keygate_bin);
        return -1;
    }
    /* the harness's temp dir under build/chaos/, like the near-cache runs' */
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s/build/chaos", g.root);
    mkdir(tmp, 0755);
    setenv("TMPDIR", tmp, 1);
    g.h = ha_start();
    if (g.h == NULL) {
        fail_harness("ha_start: %s", ha_last_error());
        return -1;
    }
    int tls[SN_NODES + 1], plain[SN_NODES + 1];
    struct procs_port_ranges r = {.tls_low = 36000, .tls_high = 40999, .plain_low = 41000, .plain_high = 45999};
    if (procs_pick_ports(SN_NODES + 1, &r, tls, plain) != 0) {
        fail_harness("%s", procs_last_error());
        return -1;
    }
    g.fake_port = tls[SN_NODES];
    if (fake_start() != 0) return -1;
    for (int n = 0; n < SN_NODES; n++) {
        struct runner_kg *k = &g.node[n];
        snprintf(k->name, sizeof k->name, "%s", g_node_names[n]);
        k->port = tls[n];
        k->threads = n == 0 ? 1 : 2;
        snprintf(k->conf, sizeof k->conf, "%s/%s.conf", g.h->dir, k->name);
        snprintf(k->log, sizeof k->log, "%s/%s.log", g.h->dir, k->name);
        snprintf(k->registry, sizeof k->registry, "%s/%s.registry.conf", g.h->dir, k->name);
        if (kg_write_files(n) != 0 || kg_spawn(n) != 0) return -1;
    }
    for (int n = 0; n < SN_NODES; n++)
        if (kg_wait_serving(n, SN_START_MS) != 0) return -1;
    return 0;
}

static void deployment_stop(int keep)
{
    for (int n = 0; n < SN_NODES; n++)
        if (g.node[n].pid > 0) {
            procs_kill_wait(g.node[n].pid, g.node[n].start, 1, g.node[n].name);
            g.node[n].pid = 0;
        }
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

struct client {
    int id, node;
    unsigned long long rng;
    redisContext *c;
    struct oplog log;
    pthread_t thread;
};

static int g_stop_clients; /* atomic */

/* n INCRs or GETs (kind, key and node filled; one node) through keygate ops[0].node on cl's connection, pipelined:
 * each starts when the batch is sent and ends when its own reply is read. A lost connection or a timeout is every
 * unanswered one's status. */
static void client_batch(struct client *cl, struct hist_op *ops, int n)
{
    long long t = now_us();
    for (int i = 0; i < n; i++) ops[i].start_us = t;
    if (cl->c == NULL) {
        struct timeval tv = {SN_CLIENT_TIMEOUT_MS / 1000, 0};
        cl->c = redisConnectWithTimeout("127.0.0.1", g.node[ops[0].node].port, tv);
        if (cl->c == NULL || cl->c->err) {
            for (int i = 0; i < n; i++) {
                ops[i].end_us = now_us();
                ops[i].status = HST_ERR_CONN;
                snprintf(ops[i].err, sizeof ops[i].err, "connect: %.90s", cl->c ? cl->c->errstr : "out of memory");
            }
            redisFree(cl->c);
            cl->c = NULL;
            return;
        }
        redisSetTimeout(cl->c, tv);
    }
    for (int i = 0; i < n; i++)
        redisAppendCommandArgv(
            cl->c, 2, (const char *[]){ops[i].kind == HOP_INCR ? "INCR" : "GET", g_key_names[ops[i].key[0]]}, NULL);
    for (int i = 0; i < n; i++) {
        void *rv = NULL;
        if (redisGetReply(cl->c, &rv) != REDIS_OK || rv == NULL) {
            int timeout = cl->c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
            for (int j = i; j < n; j++) {
                ops[j].end_us = now_us();
                ops[j].status = timeout ? HST_ERR_TIMEOUT : HST_ERR_CONN;
                snprintf(ops[j].err, sizeof ops[j].err, "%.100s",
                         cl->c->errstr[0] ? cl->c->errstr : "connection closed");
            }
            redisFree(cl->c);
            cl->c = NULL;
            return;
        }
        ops[i].end_us = now_us();
        runner_counter_reply(&ops[i], rv);
        freeReplyObject(rv);
    }
}

static void client_op(struct client *cl, struct hist_op *o)
{
    client_batch(cl, o, 1);
}

static void *client_main(void *arg)
{
    struct client *cl = arg;
    errno = 0;
    int prio = getpriority(PRIO_PROCESS, (id_t)gettid());
    if (errno == 0) setpriority(PRIO_PROCESS, (id_t)gettid(), prio + 4 > 19 ? 19 : prio + 4);
    while (!__atomic_load_n(&g_stop_clients, __ATOMIC_ACQUIRE)) {
        size_t base = cl->log.n;
        for (int i = 0; i < g_o.pipeline; i++) runner_oplog_add(&cl->log); /* added first: oplog_add may move them */
        struct hist_op *ops = &cl->log.ops[base];
        for (int i = 0; i < g_o.pipeline; i++) {
            ops[i].thread = cl->id;
            ops[i].node = cl->node;
            ops[i].nkeys = 1;
            ops[i].key[0] = runner_rnd(&cl->rng, SN_KEYS);
            ops[i].kind = runner_rnd(&cl->rng, 4) < 3 ? HOP_INCR : HOP_GET;
        }
        client_batch(cl, ops, g_o.pipeline);
        if (ops[0].status == HST_ERR_CONN) runner_sleep_ms(10, &g_stop_clients); /* retry pacing: a keygate down */
    }
    redisFree(cl->c);
    return NULL;
}

/* ---- the faults ---- */

struct planned {
    int kind;
    int gap_ms, hold_ms;
    int target; /* stop-sentinel and failover: the sentinel; restart: the keygate */
    int param;  /* restart: 1 SIGKILL, 0 SIGTERM */
};

static struct planned g_plan[SN_MAX_PLANNED];
static int g_nplan;
static struct hist_fault g_faults[SN_MAX_PLANNED];
static int g_nfaults;
static int g_fault_count[HF_NKINDS];

static void plan_describe(const struct planned *pl, char *buf, size_t len)
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
    case HF_RESTART:
        snprintf(buf, len, "restart %s (%s)", g_node_names[pl->target], pl->param ? "SIGKILL" : "SIGTERM");
        break;
    default:
        snprintf(buf, len, "%s", hist_fault_name(pl->kind));
    }
}

/* The schedule: the seed, DURATION and FAULTS decide it. Each fault's cost is a guess (a failover and the
 * settling after it take seconds): the schedule is cut when DURATION is up. */
static void plan_make(void)
{
    unsigned long long s = g_o.seed ^ 0x73656e74ull; /* "sent" */
    int kinds[HF_NKINDS] = {0}, nk = 0;
    for (int i = 0; i < SN_NKINDS; i++)
        if (g_o.faults & (1u << g_kinds[i])) kinds[nk++] = g_kinds[i];
    long long t = 0, end = (long long)g_o.duration_s * 1000;
    while (nk > 0 && g_nplan < SN_MAX_PLANNED) {
        struct planned pl = {.kind = kinds[runner_rnd(&s, nk)], .gap_ms = 500 + runner_rnd(&s, 1500)};
        int cost = 0;
        switch (pl.kind) {
        case HF_FAILOVER:
            pl.target = runner_rnd(&s, HA_SENTINELS);
            cost = 4000;
            break;
        case HF_KILL_PRIMARY:
            cost = 6000;
            break;
        case HF_STOP_PRIMARY:
            pl.hold_ms = 300 + runner_rnd(&s, 4701);
            cost = pl.hold_ms > 1000 ? 4000 : 500;
            break;
        case HF_STOP_SENTINEL:
            pl.target = runner_rnd(&s, HA_SENTINELS);
            pl.hold_ms = 500 + runner_rnd(&s, 3501);
            break;
        case HF_RESTART:
            pl.target = runner_rnd(&s, SN_NODES);
            pl.param = runner_rnd(&s, 2);
            cost = 1000;
            break;
        }
        if (t == 0) pl.gap_ms += 1500; /* the first after 1.5 s of load without faults */
        if (g_nplan > 0 && t + pl.gap_ms + pl.hold_ms + cost > end) break;
        t += pl.gap_ms + pl.hold_ms + cost;
        g_plan[g_nplan++] = pl;
    }
}

static void plan_print(void)
{
    printf("chaos: schedule of SEED=%llu: %d faults (each followed by the deployment settling)\n", g_o.seed, g_nplan);
    for (int i = 0; i < g_nplan; i++) {
        char what[160];
        plan_describe(&g_plan[i], what, sizeof what);
        printf("  #%-3d after %4d ms %-13s %s\n", i, g_plan[i].gap_ms, hist_fault_name(g_plan[i].kind), what);
    }
    fflush(stdout);
}

/* Wait until the deployment is settled; *primary the node it settled on. 0, or -1 (fail_harness). */
static int settle_deployment(int *primary)
{
    if (ha_wait_settled(g.h, SN_SETTLE_MS, primary) != 0) {
        fail_harness("the deployment did not settle: %s", ha_last_error());
        return -1;
    }
    return 0;
}

/* Restart keygate n: SIGTERM (its exit status 0 checked) or SIGKILL, then the same config started again and
 * serving. 0, or -1. */
static int kg_restart(int n, int kill9)
{
    char why[256];
    int rc = runner_kg_stop(&g.node[n], kill9, SN_SHUTDOWN_MS, why, sizeof why);
    if (rc < 0) {
        fail_harness("%s", why);
        return -1;
    }
    if (rc > 0) { /* a keygate defect, not the harness's: said, kept for the verdict, and the schedule goes on */
        g_crashes++;
        printf("chaos: DEFECT (SEED=%llu): %s\n", g_o.seed, why);
    }
    return kg_spawn(n) == 0 && kg_wait_serving(n, SN_START_MS) == 0 ? 0 : -1;
}

/* Run planned fault pl and wait for the deployment to settle; records the window. 0, or -1 (a harness failure). */
static int fault_run(const struct planned *pl)
{
    struct hist_fault *f = &g_faults[g_nfaults];
    memset(f, 0, sizeof *f);
    f->kind = pl->kind;
    f->node = pl->kind == HF_RESTART ? pl->target : HIST_GLOBAL;
    plan_describe(pl, f->what, sizeof f->what);
    int old = ha_primary(g.h), rc = 0, settled = -1;
    if (old < 0) {
        fail_harness("no primary before a fault: %s", ha_last_error());
        return -1;
    }
    f->start_us = now_us();
    switch (pl->kind) {
    case HF_FAILOVER: {
        redisContext *c = ha_sentinel_connect(g.h, pl->target);
        redisReply *r = c ? redisCommand(c, "SENTINEL FAILOVER %s", g.h->master_name) : NULL;
        int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        if (!ok) /* -INPROG, -NOGOODSLAVE: Sentinel refused it; the fault still ran (a refused failover) */
            snprintf(f->what + strlen(f->what), sizeof f->what - strlen(f->what), ": refused (%.60s)",
                     r ? serverkit_reply_text(r) : "no answer");
        freeReplyObject(r);
        redisFree(c);
        /* Sentinel may abort it (-failover-abort-slave-timeout: the replica it chose, a node just started again,
         * was turned back into a replica by the other sentinels): noted, then the deployment settles as usual */
        if (ok && ha_wait_promoted(g.h, old, SN_PROMOTE_MS, NULL) != 0)
            snprintf(f->what + strlen(f->what), sizeof f->what - strlen(f->what),
                     ": no new primary within %d ms (aborted by Sentinel?)", SN_PROMOTE_MS);
        break;
    }
    case HF_KILL_PRIMARY:
        if (ha_node_kill(g.h, old) != 0 || ha_wait_promoted(g.h, old, SN_SETTLE_MS, NULL) != 0 ||
            ha_node_restart(g.h, old) != 0) {
            fail_harness("kill-primary of node %d: %s", old, ha_last_error());
            rc = -1;
        }
        break;
    case HF_STOP_PRIMARY:
        if (ha_node_pause(g.h, old) != 0) {
            fail_harness("%s", ha_last_error());
            return -1;
        }
        runner_sleep_ms(pl->hold_ms, NULL); /* the fault's planned duration */
        if (ha_node_resume(g.h, old) != 0) {
            fail_harness("%s", ha_last_error());
            rc = -1;
        }
        break;
    case HF_STOP_SENTINEL:
        if (ha_sentinel_pause(g.h, pl->target) != 0) {
            fail_harness("%s", ha_last_error());
            return -1;
        }
        runner_sleep_ms(pl->hold_ms, NULL); /* the fault's planned duration */
        if (ha_sentinel_resume(g.h, pl->target) != 0) {
            fail_harness("%s", ha_last_error());
            rc = -1;
        }
        break;
    case HF_RESTART:
        rc = kg_restart(pl->target, pl->param);
        break;
    default:
        fail_harness("fault %s is not implemented in TOPOLOGY=sentinel", hist_fault_name(pl->kind));
        return -1;
    }
    if (rc == 0) rc = settle_deployment(&settled);
    f->end_us = now_us();
    if (rc == 0 && settled != old)
        snprintf(f->what + strlen(f->what), sizeof f->what - strlen(f->what), ": node %d -> node %d", old, settled);
    g_nfaults++;
    g_fault_count[pl->kind]++;
    printf("chaos: +%7.3fs .. +%7.3fs %-13s %s\n", f->start_us / 1e6, f->end_us / 1e6, hist_fault_name(f->kind),
           f->what);
    fflush(stdout);
    return rc;
}

/* Continue whatever is stopped, start again a data node that is down. */
static void heal_all(void)
{
    for (int i = 0; g.h != NULL && i < g.h->nnodes; i++) {
        if (g.h->nodes[i].stopped && ha_node_resume(g.h, i) != 0) fail_harness("%s", ha_last_error());
        if (!ha_node_alive(g.h, i) && ha_node_restart(g.h, i) != 0) fail_harness("%s", ha_last_error());
    }
    for (int s = 0; g.h != NULL && s < HA_SENTINELS; s++)
        if (g.h->sentinels[s].stopped && ha_sentinel_resume(g.h, s) != 0) fail_harness("%s", ha_last_error());
}

static void nemesis_run(void)
{
    long long end_us = (long long)g_o.duration_s * 1000000;
    for (int i = 0; i < g_nplan && g_failure[0] == '\0'; i++) {
        runner_sleep_ms(g_plan[i].gap_ms, NULL); /* the schedule's planned gap */
        if (now_us() + (long long)g_plan[i].hold_ms * 1000 > end_us) {
            printf("chaos: +%7.3fs schedule cut before fault #%d: DURATION is up\n", now_us() / 1e6, i);
            break;
        }
        if (fault_run(&g_plan[i]) != 0) {
            heal_all();
            break;
        }
    }
}

/* ---- the end: final reads, the history, the verdict ---- */

/* GET every counter through every keygate (ordinary reads) and directly on primary p (the final reads). */
static void final_reads(struct client *cl, int p)
{
    for (int key = 0; key < SN_KEYS; key++) {
        for (int n = 0; n < SN_NODES; n++) {
            struct hist_op *o = runner_oplog_add(&cl->log);
            o->thread = cl->id;
            o->node = cl->node = n;
            o->nkeys = 1;
            o->key[0] = key;
            o->kind = HOP_GET;
            redisFree(cl->c);
            cl->c = NULL;
            client_op(cl, o);
        }
        struct hist_op *o = runner_oplog_add(&cl->log);
        o->thread = cl->id;
        o->node = HIST_DIRECT;
        o->final = 1;
        o->nkeys = 1;
        o->key[0] = key;
        o->kind = HOP_GET;
        o->start_us = now_us();
        redisContext *c = ha_connect(g.h, p);
        redisReply *r = c ? redisCommand(c, "GET %s", g_key_names[key]) : NULL;
        o->end_us = now_us();
        if (r == NULL || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)) {
            o->status = HST_ERR_CONN;
            snprintf(o->err, sizeof o->err, "node %d: %.80s", p, r ? serverkit_reply_text(r) : "no answer");
        } else {
            o->value[0] = r->type == REDIS_REPLY_NIL ? 0 : atoll(r->str);
        }
        freeReplyObject(r);
        redisFree(c);
    }
    redisFree(cl->c);
    cl->c = NULL;
}

int chaos_sentinel_main(const struct chaos_common *common)
{
    if (opts_read(common) != 0) return 2;
    printf("chaos: TOPOLOGY=sentinel SEED=%llu DURATION=%d FAULTS=%s\n", g_o.seed, g_o.duration_s, g_o.faults_text);
    printf("chaos: a TLS primary, 2 replicas, 3 sentinels (down-after-milliseconds 1000, failover-timeout 5000); "
           "keygates with failover-hold %ds, replicas-timeout 2s; %d clients per keygate (CHAOS_CLIENTS), each "
           "sending %d commands at once (CHAOS_PIPELINE): INCR 3 in 4, else GET; client timeout %d ms; errors "
           "explained by failover/kill-primary/stop-primary (every keygate) and restart "
           "(its keygate) up to %lld ms after the fault's window, which ends once the deployment is settled\n",
           SN_FAILOVER_HOLD_S, g_o.clients, g_o.pipeline, SN_CLIENT_TIMEOUT_MS, g_o.p.error_grace_us / 1000);
    plan_make();
    plan_print();
    long long wall0 = procs_mono_ms();
    g_t0_us = runner_mono_us();
    int started = deployment_start() == 0, failed = 1;
    struct check_result res = {0};
    struct hist_op *ops = NULL;
    if (started) {
        char path[PATH_MAX + 32];
        printf("chaos: nodes :%d :%d :%d (tls), sentinels :%d :%d :%d, fake sentinel :%d (first in kg1's list, names "
               "node 0 for ever); kg0 :%d kg1 :%d kg2 :%d; dir %s\n",
               g.h->nodes[0].tls_port, g.h->nodes[1].tls_port, g.h->nodes[2].tls_port, g.h->sentinels[0].tls_port,
               g.h->sentinels[1].tls_port, g.h->sentinels[2].tls_port, g.fake_port, g.node[0].port, g.node[1].port,
               g.node[2].port, g.h->dir);
        g_t0_us = runner_mono_us();
        int nclients = SN_NODES * g_o.clients;
        struct client *clients = calloc((size_t)nclients + 1, sizeof *clients);
        for (int i = 0; i < nclients; i++) {
            clients[i].id = i;
            clients[i].node = i % SN_NODES;
            clients[i].rng = g_o.seed * 7919 + (unsigned long long)i;
            pthread_create(&clients[i].thread, NULL, client_main, &clients[i]);
        }
        nemesis_run(); /* in this thread: the servers it (re)starts are this thread's children (PR_SET_PDEATHSIG) */
        while (now_us() < (long long)g_o.duration_s * 1000000 && g_failure[0] == '\0') procs_nap_ms(50);
        __atomic_store_n(&g_stop_clients, 1, __ATOMIC_RELEASE);
        for (int i = 0; i < nclients; i++) pthread_join(clients[i].thread, NULL);
        long long load_end_us = now_us();
        heal_all();
        struct client *settler = &clients[nclients];
        settler->id = nclients;
        int p = -1;
        if (g_failure[0] == '\0' && settle_deployment(&p) == 0) {
            for (int n = 0; n < SN_NODES && g_failure[0] == '\0'; n++)
                if (!procs_alive(g.node[n].pid, g.node[n].start))
                    fail_harness("%s is not running after the schedule: it exited by itself", g.node[n].name);
                else
                    kg_wait_serving(n, SN_START_MS);
            printf("chaos: +%7.3fs settled on node %d; the final reads there\n", now_us() / 1e6, p);
            if (g_failure[0] == '\0') final_reads(settler, p);
        }
        size_t total = 0, k = 0;
        for (int i = 0; i <= nclients; i++) total += clients[i].log.n;
        ops = malloc((total + 1) * sizeof *ops);
        for (int i = 0; i <= nclients; i++) {
            memcpy(ops + k, clients[i].log.ops, clients[i].log.n * sizeof *ops);
            k += clients[i].log.n;
            free(clients[i].log.ops);
        }
        free(clients);
        qsort(ops, k, sizeof *ops, runner_by_start_time);
        struct history hist = {.ops = ops,
                               .nops = k,
                               .faults = g_faults,
                               .nfaults = (size_t)g_nfaults,
                               .nkeys = SN_KEYS,
                               .key_names = g_key_names,
                               .key_kind = g_key_kind,
                               .nnodes = SN_NODES,
                               .node_names = g_node_names};
        snprintf(path, sizeof path, "%s/history.tsv", g.h->dir);
        runner_write_history(path, &hist);
        ssize_t nv = check_history(&hist, &g_o.p, &res);
        printf("chaos: load ran %.1f s: %zu operations, %.0f ops/s\n", load_end_us / 1e6, hist.nops,
               hist.nops / (load_end_us / 1e6));
        printf("chaos: faults run:");
        for (int i = 0; i < SN_NKINDS; i++)
            if (g_o.faults & (1u << g_kinds[i]))
                printf(" %s %d", hist_fault_name(g_kinds[i]), g_fault_count[g_kinds[i]]);
        printf("\n");
        if (nv < 0) fail_harness("the checker ran out of memory");
        check_print_summary(stdout, &hist, &res);
        runner_print_error_texts(&hist);
        if (res.counter != NULL) {
            long long planned = 0;
            for (int key = 0; key < SN_KEYS; key++)
                if (g_key_kind[key] == HIST_KEY_COUNTER_ASYNC) /* r:'s losses are violations: printed below */
                    planned += res.counter[key].lost_planned > res.counter[key].dup_planned
                                   ? res.counter[key].lost_planned
                                   : res.counter[key].dup_planned;
            if (planned > 0)
                printf("chaos: NOTE (SEED=%llu): %lld acknowledged increments of a namespace without replicas= lost "
                       "after a planned failover (SENTINEL FAILOVER): not a violation of the documented guarantee, "
                       "but a planned failover should lose nothing; see the loss events above\n",
                       g_o.seed, planned);
        }
        for (size_t i = 0; i < res.nviol && i < SN_PRINT_VIOLATIONS; i++) {
            printf("--- violation %zu of %zu (SEED=%llu) ---\n", i + 1, res.nviol, g_o.seed);
            check_print_violation(stdout, &hist, &g_o.p, &res.viol[i]);
        }
        if (res.nviol > SN_PRINT_VIOLATIONS)
            printf("--- and %zu more (the whole history: %s) ---\n", res.nviol - SN_PRINT_VIOLATIONS, path);
        failed = nv != 0;
    }
    if (g_crashes > 0) printf("chaos: %d keygate%s ended badly after SIGTERM\n", g_crashes, g_crashes > 1 ? "s" : "");
    failed = failed || g_failure[0] != '\0' || g_crashes > 0;
    char dir[sizeof g.h->dir] = "";
    if (g.h != NULL) snprintf(dir, sizeof dir, "%s", g.h->dir);
    deployment_stop(failed || g_o.keep);
    if (procs_leftovers() != 0) {
        fail_harness("servers still run after the stop");
        failed = 1;
    }
    printf("chaos: run took %.1f s\n", (procs_mono_ms() - wall0) / 1000.0);
    if (failed) {
        if (g_failure[0]) printf("chaos: HARNESS FAILURE: %s\n", g_failure);
        printf("chaos: FAILED with SEED=%llu DURATION=%d FAULTS=%s: %zu violations (reproduce: make test-chaos "
               "TOPOLOGY=sentinel SEED=%llu DURATION=%d FAULTS=%s); files kept in %s\n",
               g_o.seed, g_o.duration_s, g_o.faults_text, res.nviol, g_o.seed, g_o.duration_s, g_o.faults_text, dir);
    } else {
        printf("chaos: PASSED with SEED=%llu\n", g_o.seed);
    }
    check_result_free(&res);
    free(ops);
    printf("%d passed, %d failed\n", failed ? 0 : 1, failed ? 1 : 0);
    return failed ? 1 : 0;
}
