/* cluster.c: make test-chaos TOPOLOGY=cluster: three keygates in front of a real TLS Redis Cluster (3 primaries, 1 replica each), clients INCRing counters spread over every slot range (some by EVALSHA), a seeded schedule of reshards, nodes added and removed, failovers, frozen and killed primaries and dead slot ranges, a history judged by the checker's counter rules. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "chaos_cluster.h"
#include "checker.h"
#include "cluster_harness.h"
#include "history.h"
#include "procs.h"
#include "runner.h"
#include "serverkit.h"

/*
 * The deployment (127.0.0.1, free ports; build/chaos/keygate-cluster-XXXXXX/, kept on failure):
 *
 *   node 0..5    redis-server 7.0, cluster-enabled, TLS (clients, bus, replication), no persistence,
 *                cluster-node-timeout 2000: 3 primaries with 1 replica each (tests/cluster/cluster_harness.c
 *                starts and drives them; nodes 6 and 7 are the add-node fault's pair)
 *   kg0 kg1 kg2  keygate, threads 1 / 2 / 2: `instance kv cluster <node 0>,<node 1> tls ...`, cluster-refresh 1s,
 *                a user `app` with scripts=yes
 *
 * Registry: w: and a:, both on kv, ttl=none. replicas= is refused on a cluster instance (`--check`: WAIT counts
 * one node's replicas), so the replicated namespace is the client's own: every INCR of a w: counter is followed,
 * on the same connection, by `WAIT 1 2000`, which keygate sends to the node of the client's last write, and is
 * acknowledged only when the WAIT answers >= 1 (0: the INCR ran but is not confirmed: an error, indeterminate). The
 * a: counters are written without WAIT: an unplanned failover may lose their last increments (counted, not
 * failed). Six counters a namespace (w:c:<i>:<j>, a:c:<i>:<j>), counter i in the i-th sixth of the slots: every
 * primary holds some of each.
 *
 * CC_CLIENTS (CHAOS_CLIENTS) client threads per keygate, one command at a time on one connection (AUTH and
 * SCRIPT LOAD of the increment script at each connect, as a client library loads its scripts): an INCR (3 in 4;
 * one in 8 of them `EVALSHA <sha> 1 key`, the script `return redis.call('INCR', KEYS[1])`) or a GET of a random
 * counter; client timeout 10 s (keygate holds a request up to about 6.3 s for a slot's owner). The nemesis (this
 * thread) runs the seed's schedule, one fault at a time, each ending once the cluster is settled again (every node
 * ok, agreeing on every slot's owner, each primary with one connected replica). Then everything is healed and
 * settled, each counter is read through every keygate and directly on its slot's owner (the final reads), and the
 * checker judges the history (checker.h, the counter rules).
 */

#define CC_NODES 3   /* keygates */
#define CC_CLIENTS 3 /* client threads per keygate */
#define CC_KEYS_NS 6 /* counters a namespace */
#define CC_KEYS (2 * CC_KEYS_NS)
#define CC_MAX_PLANNED 256
#define CC_START_MS 15000  /* a keygate serves after its start */
#define CC_SETTLE_MS 45000 /* the cluster settles after a fault */
#define CC_SHUTDOWN_MS 8000
#define CC_PRINT_VIOLATIONS 25
#define CC_CLIENT_TIMEOUT_MS 10000
#define CC_WAIT_MS 3000 /* the w: INCRs' WAIT 1 timeout */
/* cluster-node-timeout: 2000 ms, not the cluster suites' 1000: on the shared 2-core machine a 1 s stall of every
 * process (seen: another suite's deployment starting) made the nodes mark each other failing with no fault run */
#define CC_NODE_TIMEOUT_MS 2000
#define CC_MAX_MOVE 3 /* counters whose slots one reshard or add-node moves */

static const char g_script[] = "return redis.call('INCR', KEYS[1])";
static char g_key_buf[CC_KEYS][32];
static const char *g_key_names[CC_KEYS];
static int g_key_kind[CC_KEYS];
static unsigned g_key_slot[CC_KEYS];
static const char *const g_node_names[CC_NODES] = {"kg0", "kg1", "kg2"};

/* ---- options ---- */

static const int g_kinds[] = {HF_RESHARD,      HF_ADD_NODE,   HF_FAILOVER, HF_KILL_PRIMARY,
                              HF_STOP_PRIMARY, HF_DEAD_SLOTS, HF_RESTART};
#define CC_NKINDS ((int)(sizeof g_kinds / sizeof g_kinds[0]))

static struct {
    unsigned long long seed;
    int duration_s;
    unsigned faults;
    char faults_text[256];
    struct check_params p;
    int keep;
    int clients;
    const char *keygate_bin;
} g_o;

static long long g_t0_us;

static long long now_us(void)
{
    return runner_mono_us() - g_t0_us;
}

static int opts_read(const struct chaos_common *c)
{
    g_o.seed = c->seed;
    g_o.duration_s = c->duration_s;
    g_o.keygate_bin = c->keygate_bin;
    g_o.keep = c->keep;
    g_o.p = c->p;
    const char *v = getenv("CHAOS_CLIENTS");
    g_o.clients = v != NULL && atoi(v) > 0 ? atoi(v) : CC_CLIENTS;
    /* add-node is opt-in (FAULTS=add-node, or a list naming it): when its slot is moved back, the emptied
     * primary turns itself into a replica (Redis 7.0's replica migration), and a client whose last write
     * ran there gets 0 for its WAIT (its slot's owner changed since the write), or Redis's error while
     * keygate's map still names the emptied node (-UNBLOCKED ... master -> replica, or -ERR WAIT cannot be
     * used with replica instances), which no fault of the rules explains (SEED=5: keygate cannot tell this
     * demotion from a failover's, after which a confirmation could be of writes the failover lost).
     * docs/testing.md, "The cluster topology". */
    return runner_faults_parse(c->faults, g_kinds, CC_NKINDS, 1u << HF_ADD_NODE, "cluster",
                               "reshard,failover,kill-primary,stop-primary,dead-slots,restart; add-node opt-in",
                               &g_o.faults, g_o.faults_text, sizeof g_o.faults_text);
}

/* ---- the deployment ---- */

static struct {
    char root[PATH_MAX];
    struct cluster *c;
    struct runner_kg node[CC_NODES];
    char password[65], pass_file[PATH_MAX + 32];
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

/* Counter names: counter i of each namespace in the i-th sixth of the slots (CLUSTER KEYSLOT on node 0). */
static int keys_pick(void)
{
    redisContext *c = cluster_connect(g.c, 0);
    if (c == NULL) {
        fail_harness("node 0 does not answer");
        return -1;
    }
    static const char *const ns[2] = {"w", "a"};
    for (int n = 0; n < 2; n++)
        for (int i = 0; i < CC_KEYS_NS; i++) {
            int k = n * CC_KEYS_NS + i;
            unsigned lo = (unsigned)(CLUSTER_SLOTS * i / CC_KEYS_NS),
                     hi = (unsigned)(CLUSTER_SLOTS * (i + 1) / CC_KEYS_NS);
            for (int j = 0;; j++) {
                snprintf(g_key_buf[k], sizeof g_key_buf[k], "%s:c:%d:%d", ns[n], i, j);
                redisReply *r = redisCommand(c, "CLUSTER KEYSLOT %s", g_key_buf[k]);
                long long slot = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
                freeReplyObject(r);
                if (slot < 0) {
                    fail_harness("CLUSTER KEYSLOT %s: no answer", g_key_buf[k]);
                    redisFree(c);
                    return -1;
                }
                if ((unsigned)slot >= lo && (unsigned)slot < hi) {
                    g_key_slot[k] = (unsigned)slot;
                    break;
                }
            }
            g_key_names[k] = g_key_buf[k];
            g_key_kind[k] = n == 0 ? HIST_KEY_COUNTER_REPLICATED : HIST_KEY_COUNTER_ASYNC;
        }
    redisFree(c);
    return 0;
}

static int kg_write_files(int n)
{
    struct runner_kg *k = &g.node[n];
    char conf[8 * PATH_MAX];
    snprintf(conf, sizeof conf,
             "# keygate.conf written by tests/chaos/cluster.c\n"
             "listen 127.0.0.1:%d\n"
             "registry %s\n"
             "instance kv cluster 127.0.0.1:%d,127.0.0.1:%d tls ca=%s/build/certs/ca.crt server-name=localhost "
             "password-file=%s\n"
             "cluster-refresh 1s\nthreads %d\n"
             "user app password-file=%s owners=app access=rw scripts=yes\n",
             k->port, k->registry, g.c->nodes[0].tls_port, g.c->nodes[1].tls_port, g.root, g.c->pass_file, k->threads,
             g.pass_file);
    static const char registry[] =
        "# registry.conf written by tests/chaos/cluster.c\n"
        "namespace w: instance=kv ttl=none owner=app purpose=\"chaos counters, each INCR followed by the client's WAIT "
        "1\"\n"
        "namespace a: instance=kv ttl=none owner=app purpose=\"chaos counters, not replicated\"\n";
    if (serverkit_write_file(k->conf, conf, 0644) != 0 || serverkit_write_file(k->registry, registry, 0644) != 0) {
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

/* Wait (deadline_ms) until keygate n answers a GET of every counter (it serves each slot range). 0, or -1. */
static int kg_wait_serving(int n, int deadline_ms)
{
    struct runner_kg *k = &g.node[n];
    long long deadline = procs_mono_ms() + deadline_ms;
    char last[160] = "no answer";
    for (;;) {
        redisContext *c = redisConnectWithTimeout("127.0.0.1", k->port, (struct timeval){1, 0});
        int ok = c != NULL && !c->err;
        if (ok) {
            redisSetTimeout(c, (struct timeval){CC_CLIENT_TIMEOUT_MS / 1000, 0});
            redisReply *r = redisCommand(c, "AUTH app %s", g.password);
            ok = r != NULL && r->type == REDIS_REPLY_STATUS;
            snprintf(last, sizeof last, "AUTH: %s", r != NULL ? serverkit_reply_text(r) : c->errstr);
            freeReplyObject(r);
            for (int key = 0; key < CC_KEYS && ok; key++) {
                r = redisCommand(c, "GET %s", g_key_names[key]);
                ok = r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL);
                snprintf(last, sizeof last, "GET %s: %s", g_key_names[key],
                         r != NULL ? serverkit_reply_text(r) : c->errstr);
                freeReplyObject(r);
            }
        }
        redisFree(c);
        if (ok) return 0;
        if (!procs_alive(k->pid, k->start) || procs_mono_ms() >= deadline) {
            serverkit_print_log_tail(k->name, k->log);
            fail_harness("%s (pid %d, port %d) %s: the counters not served within %d ms (last: %s)", k->name,
                         (int)k->pid, k->port, procs_alive(k->pid, k->start) ? "runs" : "exited", deadline_ms, last);
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
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s/build/chaos", g.root);
    mkdir(tmp, 0755);
    setenv("TMPDIR", tmp, 1);
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", CC_NODE_TIMEOUT_MS);
    setenv("CLUSTER_NODE_TIMEOUT_MS", timeout, 1);
    g.c = cluster_start();
    if (g.c == NULL) {
        fail_harness("cluster_start: %s", cluster_last_error());
        return -1;
    }
    serverkit_random_hex(g.password, 32);
    snprintf(g.pass_file, sizeof g.pass_file, "%s/app.pass", g.c->dir);
    char line[80];
    snprintf(line, sizeof line, "%s\n", g.password);
    if (serverkit_write_file(g.pass_file, line, 0600) != 0) {
        fail_harness("writing %s: %s", g.pass_file, strerror(errno));
        return -1;
    }
    if (keys_pick() != 0) return -1;
    int tls[CC_NODES], plain[CC_NODES];
    struct procs_port_ranges r = {.tls_low = 36000, .tls_high = 40999, .plain_low = 41000, .plain_high = 45999};
    if (procs_pick_ports(CC_NODES, &r, tls, plain) != 0) {
        fail_harness("%s", procs_last_error());
        return -1;
    }
    for (int n = 0; n < CC_NODES; n++) {
        struct runner_kg *k = &g.node[n];
        snprintf(k->name, sizeof k->name, "%s", g_node_names[n]);
        k->port = tls[n];
        k->threads = n == 0 ? 1 : 2;
        snprintf(k->conf, sizeof k->conf, "%s/%s.conf", g.c->dir, k->name);
        snprintf(k->log, sizeof k->log, "%s/%s.log", g.c->dir, k->name);
        snprintf(k->registry, sizeof k->registry, "%s/%s.registry.conf", g.c->dir, k->name);
        if (kg_write_files(n) != 0 || kg_spawn(n) != 0) return -1;
    }
    for (int n = 0; n < CC_NODES; n++)
        if (kg_wait_serving(n, CC_START_MS) != 0) return -1;
    return 0;
}

static void deployment_stop(int keep)
{
    for (int n = 0; n < CC_NODES; n++)
        if (g.node[n].pid > 0) {
            procs_kill_wait(g.node[n].pid, g.node[n].start, 1, g.node[n].name);
            g.node[n].pid = 0;
        }
    if (keep) setenv("CLUSTER_KEEP", "1", 1);
    cluster_stop(g.c);
    g.c = NULL;
    procs_reap_mine();
}

/* ---- the clients ---- */

struct client {
    int id, node;
    unsigned long long rng;
    redisContext *c;
    char sha[41];
    long long evalshas; /* increments sent by EVALSHA */
    struct oplog log;
    pthread_t thread;
};

static int g_stop_clients; /* atomic */

/* o's status from cl's lost connection (a timeout or another I/O error); the connection is dropped. */
static void client_lost(struct client *cl, struct hist_op *o)
{
    int timeout = cl->c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
    o->end_us = now_us();
    o->status = timeout ? HST_ERR_TIMEOUT : HST_ERR_CONN;
    snprintf(o->err, sizeof o->err, "%.100s", cl->c->errstr[0] ? cl->c->errstr : "connection closed");
    redisFree(cl->c);
    cl->c = NULL;
}

/* Connect cl to keygate o->node: AUTH, then SCRIPT LOAD of the increment script (its SHA1 into cl->sha). 0, or -1
 * with o's status and end set. */
static int client_connect(struct client *cl, struct hist_op *o)
{
    struct timeval tv = {CC_CLIENT_TIMEOUT_MS / 1000, 0};
    cl->c = redisConnectWithTimeout("127.0.0.1", g.node[o->node].port, tv);
    if (cl->c == NULL || cl->c->err) {
        o->end_us = now_us();
        o->status = HST_ERR_CONN;
        snprintf(o->err, sizeof o->err, "connect: %.90s", cl->c ? cl->c->errstr : "out of memory");
        redisFree(cl->c);
        cl->c = NULL;
        return -1;
    }
    redisSetTimeout(cl->c, tv);
    redisAppendCommand(cl->c, "AUTH app %s", g.password);
    redisAppendCommand(cl->c, "SCRIPT LOAD %s", g_script);
    for (int i = 0; i < 2; i++) {
        void *rv = NULL;
        if (redisGetReply(cl->c, &rv) != REDIS_OK || rv == NULL) {
            client_lost(cl, o);
            return -1;
        }
        redisReply *r = rv;
        int ok = i == 0 ? r->type == REDIS_REPLY_STATUS : r->type == REDIS_REPLY_STRING && r->len == 40;
        if (ok && i == 1) memcpy(cl->sha, r->str, 41);
        if (!ok) {
            o->end_us = now_us();
            o->status = r->type == REDIS_REPLY_ERROR ? HST_ERR_REPLY : HST_BAD;
            snprintf(o->err, sizeof o->err, "%s: %.90s", i == 0 ? "AUTH" : "SCRIPT LOAD", serverkit_reply_text(r));
        }
        freeReplyObject(r);
        if (!ok) {
            /* the other reply is still owed: the connection is dropped */
            redisFree(cl->c);
            cl->c = NULL;
            return -1;
        }
    }
    return 0;
}

/* One operation o (kind, key, node filled) on cl's connection: GET; INCR or EVALSHA, followed by WAIT 1 on a w:
 * counter (acknowledged only when it answers >= 1). */
static void client_op(struct client *cl, struct hist_op *o, int by_script)
{
    o->start_us = now_us();
    if (cl->c == NULL && client_connect(cl, o) != 0) return;
    const char *key = g_key_names[o->key[0]];
    int wait = o->kind == HOP_INCR && g_key_kind[o->key[0]] == HIST_KEY_COUNTER_REPLICATED;
    if (o->kind == HOP_GET)
        redisAppendCommand(cl->c, "GET %s", key);
    else if (by_script)
        redisAppendCommand(cl->c, "EVALSHA %s 1 %s", cl->sha, key);
    else
        redisAppendCommand(cl->c, "INCR %s", key);
    if (wait) redisAppendCommand(cl->c, "WAIT 1 %d", CC_WAIT_MS);
    if (by_script) cl->evalshas++;
    void *rv = NULL;
    if (redisGetReply(cl->c, &rv) != REDIS_OK || rv == NULL) {
        client_lost(cl, o);
        return;
    }
    runner_counter_reply(o, rv);
    freeReplyObject(rv);
    if (wait) {
        if (redisGetReply(cl->c, &rv) != REDIS_OK || rv == NULL) {
            client_lost(cl, o); /* the INCR's reply came, its WAIT's did not: not acknowledged */
            o->value[0] = 0;
            return;
        }
        const redisReply *r = rv;
        if (o->status == HST_OK && (r->type != REDIS_REPLY_INTEGER || r->integer < 1)) {
            o->status = HST_ERR_REPLY; /* the INCR ran, its replication is not confirmed: indeterminate */
            snprintf(o->err, sizeof o->err, "WAIT 1 %d answered %.80s", CC_WAIT_MS, serverkit_reply_text(r));
        }
        freeReplyObject(rv);
    }
    if (o->status != HST_OK) o->value[0] = 0;
    o->end_us = now_us();
}

static void *client_main(void *arg)
{
    struct client *cl = arg;
    errno = 0;
    int prio = getpriority(PRIO_PROCESS, (id_t)gettid());
    if (errno == 0) setpriority(PRIO_PROCESS, (id_t)gettid(), prio + 4 > 19 ? 19 : prio + 4);
    while (!__atomic_load_n(&g_stop_clients, __ATOMIC_ACQUIRE)) {
        struct hist_op *o = runner_oplog_add(&cl->log);
        o->thread = cl->id;
        o->node = cl->node;
        o->nkeys = 1;
        o->key[0] = runner_rnd(&cl->rng, CC_KEYS);
        o->kind = runner_rnd(&cl->rng, 4) < 3 ? HOP_INCR : HOP_GET;
        client_op(cl, o, o->kind == HOP_INCR && runner_rnd(&cl->rng, 8) == 0);
        if (o->status == HST_ERR_CONN) runner_sleep_ms(10, &g_stop_clients); /* retry pacing: a keygate down */
    }
    redisFree(cl->c);
    return NULL;
}

/* ---- the faults ---- */

struct planned {
    int kind;
    int gap_ms, hold_ms;
    int target; /* restart: the keygate; the others: a pick among the primaries (index mod their count) */
    int param;  /* restart: 1 SIGKILL, 0 SIGTERM; reshard / add-node: the counters moved (1..CC_MAX_MOVE) */
    int pick;   /* reshard: the primary the slots go to (index mod the other primaries' count); a key pick */
};

static struct planned g_plan[CC_MAX_PLANNED];
static int g_nplan;
static struct hist_fault g_faults[CC_MAX_PLANNED];
static int g_nfaults;
static int g_fault_count[HF_NKINDS];

static void plan_describe(const struct planned *pl, char *buf, size_t len)
{
    switch (pl->kind) {
    case HF_RESHARD:
        snprintf(buf, len, "move the slots of %d counters to another primary, each held %d ms in MIGRATING", pl->param,
                 pl->hold_ms);
        break;
    case HF_ADD_NODE:
        snprintf(buf, len, "add a primary and its replica, move %d counter's slot to it for %d ms, back, remove both",
                 pl->param, pl->hold_ms);
        break;
    case HF_FAILOVER:
        snprintf(buf, len, "CLUSTER FAILOVER on a primary's replica");
        break;
    case HF_KILL_PRIMARY:
        snprintf(buf, len, "SIGKILL a primary, start it again once its replica is promoted");
        break;
    case HF_STOP_PRIMARY:
        snprintf(buf, len, "SIGSTOP a primary for %d ms%s", pl->hold_ms,
                 pl->hold_ms > 3000 ? "" : " (about cluster-node-timeout: a failover is not certain)");
        break;
    case HF_DEAD_SLOTS:
        snprintf(buf, len, "SIGSTOP a primary and its replica for %d ms: its slots dead", pl->hold_ms);
        break;
    case HF_RESTART:
        snprintf(buf, len, "restart %s (%s)", g_node_names[pl->target], pl->param ? "SIGKILL" : "SIGTERM");
        break;
    default:
        snprintf(buf, len, "%s", hist_fault_name(pl->kind));
    }
}

/* The schedule: the seed, DURATION and FAULTS decide it (each fault's cost a guess: cut when DURATION is up). */
static void plan_make(void)
{
    unsigned long long s = g_o.seed ^ 0x636c7573ull; /* "clus" */
    int kinds[HF_NKINDS] = {0}, nk = 0;
    for (int i = 0; i < CC_NKINDS; i++)
        if (g_o.faults & (1u << g_kinds[i])) kinds[nk++] = g_kinds[i];
    long long t = 0, end = (long long)g_o.duration_s * 1000;
    while (nk > 0 && g_nplan < CC_MAX_PLANNED) {
        struct planned pl = {.kind = kinds[runner_rnd(&s, nk)],
                             .gap_ms = 500 + runner_rnd(&s, 1500),
                             .target = runner_rnd(&s, 1000),
                             .pick = runner_rnd(&s, 1000)};
        int cost = 0;
        switch (pl.kind) {
        case HF_RESHARD:
            pl.param = 1 + runner_rnd(&s, CC_MAX_MOVE);
            pl.hold_ms = 100 + runner_rnd(&s, 900);
            cost = 2500 * pl.param;
            break;
        case HF_ADD_NODE: /* one counter's slot: each move takes seconds here (every node must agree) */
            pl.param = 1;
            pl.hold_ms = 500 + runner_rnd(&s, 2500);
            cost = 15000;
            break;
        case HF_FAILOVER:
            cost = 3000;
            break;
        case HF_KILL_PRIMARY:
            cost = 6000;
            break;
        case HF_STOP_PRIMARY:
            pl.hold_ms = 300 + runner_rnd(&s, 5701);
            cost = pl.hold_ms > 2500 ? 5000 : 1000;
            break;
        case HF_DEAD_SLOTS:
            pl.hold_ms = 1500 + runner_rnd(&s, 3501);
            cost = 5000;
            break;
        case HF_RESTART:
            pl.target = runner_rnd(&s, CC_NODES);
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
    printf("chaos: schedule of SEED=%llu: %d faults (each followed by the cluster settling)\n", g_o.seed, g_nplan);
    for (int i = 0; i < g_nplan; i++) {
        char what[160];
        plan_describe(&g_plan[i], what, sizeof what);
        printf("  #%-3d after %4d ms %-13s %s\n", i, g_plan[i].gap_ms, hist_fault_name(g_plan[i].kind), what);
    }
    fflush(stdout);
}

static void fault_note(struct hist_fault *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fault_note(struct hist_fault *f, const char *fmt, ...)
{
    size_t used = strlen(f->what);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->what + used, sizeof f->what - used, fmt, ap);
    va_end(ap);
}

/* The running node that replicates primary p, or -1. */
static int replica_of(int p)
{
    for (int i = 0; i < g.c->nnodes; i++) {
        if (i == p || g.c->nodes[i].removed || !cluster_node_alive(g.c, i) || g.c->nodes[i].stopped) continue;
        redisContext *c = cluster_connect(g.c, i);
        redisReply *r = c != NULL ? redisCommand(c, "ROLE") : NULL;
        int yes = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
                  serverkit_str_is(r->element[0], "slave") && r->element[2]->type == REDIS_REPLY_INTEGER &&
                  r->element[2]->integer == g.c->nodes[p].tls_port;
        freeReplyObject(r);
        redisFree(c);
        if (yes) return i;
    }
    return -1;
}

/* Move the slot of each counter in keys[0..n) (owned by from[k]) to `to`, each held hold_ms in MIGRATING with its
 * keys still on the source (requests meet -ASK), then its keys moved and the slot given to `to`. 0, or -1. */
static int move_slots(const int *keys, const int *from, int n, int to, int hold_ms)
{
    for (int k = 0; k < n; k++) {
        unsigned slot = g_key_slot[keys[k]];
        if (from[k] == to) continue;
        int moved = 0;
        if (cluster_migrate_begin(g.c, slot, from[k], to) != 0) return -1;
        runner_sleep_ms(hold_ms, NULL); /* the fault's planned duration: the slot migrating, its key on the source */
        if (cluster_migrate_keys(g.c, slot, from[k], to, 100, &moved) != 0 ||
            cluster_migrate_end(g.c, slot, from[k], to) != 0)
            return -1;
    }
    return 0;
}

/* Up to n counters owned by primaries other than `to` (the first from key pick), into keys[] with their owners. */
static int counters_pick(int pick, int n, int to, int *keys, int *from)
{
    int got = 0;
    for (int j = 0; j < CC_KEYS && got < n; j++) {
        int key = (pick + j) % CC_KEYS, owner = cluster_slot_owner(g.c, g_key_slot[key]);
        int dup = 0;
        for (int k = 0; k < got; k++) dup |= g_key_slot[keys[k]] == g_key_slot[key];
        if (owner < 0 || owner == to || dup) continue;
        keys[got] = key;
        from[got++] = owner;
    }
    return got;
}

static int fault_body(const struct planned *pl, struct hist_fault *f)
{
    int primaries[CLUSTER_MAX_NODES], np = cluster_primaries(g.c, primaries);
    if (np < 1) {
        fail_harness("no primary before a fault: %s", cluster_last_error());
        return -1;
    }
    int p = primaries[pl->target % np], r = -1;
    switch (pl->kind) {
    case HF_RESHARD: {
        int others[CLUSTER_MAX_NODES], no = 0;
        for (int k = 0; k < np; k++)
            if (primaries[k] != p) others[no++] = primaries[k];
        int to = no > 0 ? others[pl->pick % no] : p, keys[CC_MAX_MOVE], from[CC_MAX_MOVE];
        int n = counters_pick(pl->pick, pl->param, to, keys, from);
        fault_note(f, ": %d slots to node %d", n, to);
        return move_slots(keys, from, n, to, pl->hold_ms);
    }
    case HF_ADD_NODE: {
        int np2 = -1, nr = -1, keys[CC_MAX_MOVE], from[CC_MAX_MOVE];
        if (cluster_node_add(g.c, -1, &np2) != 0 || cluster_node_add(g.c, np2, &nr) != 0) break;
        int n = counters_pick(pl->pick, pl->param, np2, keys, from);
        fault_note(f, ": nodes %d (primary) and %d, %d slots", np2, nr, n);
        if (move_slots(keys, from, n, np2, 0) != 0) break;
        runner_sleep_ms(pl->hold_ms, NULL); /* the fault's planned duration: the new node serving */
        int back = 0;
        while (back < n && move_slots(&keys[back], &np2, 1, from[back], 0) == 0) back++;
        if (back < n) break;
        /* an emptied primary turns into a replica of the node that took its last slot (Redis 7.0's
         * cluster-allow-replica-migration): either way it owns nothing now, and goes */
        if (cluster_node_remove(g.c, nr) != 0 || cluster_node_remove(g.c, np2) != 0) break;
        return 0;
    }
    case HF_FAILOVER:
        r = replica_of(p);
        if (r < 0) {
            fail_harness("primary node %d has no replica to fail over to", p);
            return -1;
        }
        fault_note(f, ": node %d -> node %d", p, r);
        if (cluster_failover(g.c, r, CC_SETTLE_MS) != 0) break;
        return 0;
    case HF_KILL_PRIMARY: {
        int heir = -1;
        if (cluster_kill_primary(g.c, p, CC_SETTLE_MS, &heir, NULL) != 0) break;
        fault_note(f, ": node %d -> node %d", p, heir);
        if (cluster_node_restart(g.c, p) != 0) break;
        return 0;
    }
    case HF_STOP_PRIMARY:
        fault_note(f, ": node %d", p);
        if (cluster_node_pause(g.c, p) != 0) break;
        runner_sleep_ms(pl->hold_ms, NULL); /* the fault's planned duration */
        if (cluster_node_resume(g.c, p) != 0) break;
        return 0;
    case HF_DEAD_SLOTS:
        r = replica_of(p);
        fault_note(f, ": nodes %d and %d", p, r);
        if (r < 0 || cluster_node_pause(g.c, p) != 0 || cluster_node_pause(g.c, r) != 0) break;
        runner_sleep_ms(pl->hold_ms, NULL); /* the fault's planned duration */
        if (cluster_node_resume(g.c, p) != 0 || cluster_node_resume(g.c, r) != 0) break;
        return 0;
    case HF_RESTART: {
        char why[256];
        int rc = runner_kg_stop(&g.node[pl->target], pl->param, CC_SHUTDOWN_MS, why, sizeof why);
        if (rc < 0) {
            fail_harness("%s", why);
            return -1;
        }
        if (rc > 0) { /* a keygate defect, not the harness's: said, kept for the verdict, and the schedule goes on */
            g_crashes++;
            printf("chaos: DEFECT (SEED=%llu): %s\n", g_o.seed, why);
        }
        return kg_spawn(pl->target) == 0 && kg_wait_serving(pl->target, CC_START_MS) == 0 ? 0 : -1;
    }
    default:
        fail_harness("fault %s is not implemented in TOPOLOGY=cluster", hist_fault_name(pl->kind));
        return -1;
    }
    fail_harness("%s: %s", hist_fault_name(pl->kind), cluster_last_error());
    return -1;
}

/* Run planned fault pl and wait for the cluster to settle; records the window. 0, or -1 (a harness failure). */
static int fault_run(const struct planned *pl)
{
    struct hist_fault *f = &g_faults[g_nfaults];
    memset(f, 0, sizeof *f);
    f->kind = pl->kind;
    f->node = pl->kind == HF_RESTART ? pl->target : HIST_GLOBAL;
    plan_describe(pl, f->what, sizeof f->what);
    f->start_us = now_us();
    int rc = fault_body(pl, f);
    if (rc == 0 && cluster_wait_settled(g.c, CC_SETTLE_MS) != 0) {
        fail_harness("the cluster did not settle after %s: %s", hist_fault_name(pl->kind), cluster_last_error());
        rc = -1;
    }
    f->end_us = now_us();
    g_nfaults++;
    g_fault_count[pl->kind]++;
    printf("chaos: +%7.3fs .. +%7.3fs %-13s %s\n", f->start_us / 1e6, f->end_us / 1e6, hist_fault_name(f->kind),
           f->what);
    fflush(stdout);
    return rc;
}

/* Continue whatever is stopped, start again a node that is down (not one removed). */
static void heal_all(void)
{
    for (int i = 0; g.c != NULL && i < g.c->nnodes; i++) {
        if (g.c->nodes[i].removed) continue;
        if (g.c->nodes[i].stopped && cluster_node_resume(g.c, i) != 0) fail_harness("%s", cluster_last_error());
        if (!cluster_node_alive(g.c, i) && cluster_node_restart(g.c, i) != 0) fail_harness("%s", cluster_last_error());
    }
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

/* GET every counter through every keygate (ordinary reads) and directly on its slot's owner (the final reads). */
static void final_reads(struct client *cl)
{
    for (int key = 0; key < CC_KEYS; key++) {
        for (int n = 0; n < CC_NODES; n++) {
            struct hist_op *o = runner_oplog_add(&cl->log);
            o->thread = cl->id;
            o->node = cl->node = n;
            o->nkeys = 1;
            o->key[0] = key;
            o->kind = HOP_GET;
            redisFree(cl->c);
            cl->c = NULL;
            client_op(cl, o, 0);
        }
        struct hist_op *o = runner_oplog_add(&cl->log);
        o->thread = cl->id;
        o->node = HIST_DIRECT;
        o->final = 1;
        o->nkeys = 1;
        o->key[0] = key;
        o->kind = HOP_GET;
        o->start_us = now_us();
        int p = cluster_slot_owner(g.c, g_key_slot[key]);
        redisContext *c = p >= 0 ? cluster_connect(g.c, p) : NULL;
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

/* The history of every client's log (sorted by start time), checked and printed; returns the violations (-1: out of
 * memory) and *ops_out the operations (the caller frees them). */
static ssize_t judge(struct client *clients, int nclients, long long load_end_us, struct check_result *res,
                     struct hist_op **ops_out)
{
    size_t total = 0, k = 0;
    long long evalshas = 0;
    for (int i = 0; i <= nclients; i++) total += clients[i].log.n;
    struct hist_op *ops = malloc((total + 1) * sizeof *ops);
    if (ops == NULL) return -1;
    for (int i = 0; i <= nclients; i++) {
        memcpy(ops + k, clients[i].log.ops, clients[i].log.n * sizeof *ops);
        k += clients[i].log.n;
        evalshas += clients[i].evalshas;
        free(clients[i].log.ops);
        clients[i].log.ops = NULL;
    }
    *ops_out = ops;
    qsort(ops, k, sizeof *ops, runner_by_start_time);
    struct history hist = {.ops = ops,
                           .nops = k,
                           .faults = g_faults,
                           .nfaults = (size_t)g_nfaults,
                           .nkeys = CC_KEYS,
                           .key_names = g_key_names,
                           .key_kind = g_key_kind,
                           .nnodes = CC_NODES,
                           .node_names = g_node_names};
    char path[sizeof g.c->dir + 32];
    snprintf(path, sizeof path, "%s/history.tsv", g.c->dir);
    runner_write_history(path, &hist);
    ssize_t nv = check_history(&hist, &g_o.p, res);
    printf("chaos: load ran %.1f s: %zu operations, %.0f ops/s; %lld increments by EVALSHA\n", load_end_us / 1e6,
           hist.nops, hist.nops / (load_end_us / 1e6), evalshas);
    printf("chaos: faults run:");
    for (int i = 0; i < CC_NKINDS; i++)
        if (g_o.faults & (1u << g_kinds[i])) printf(" %s %d", hist_fault_name(g_kinds[i]), g_fault_count[g_kinds[i]]);
    printf("\n");
    if (nv < 0) {
        fail_harness("the checker ran out of memory");
        return -1;
    }
    check_print_summary(stdout, &hist, res);
    runner_print_error_texts(&hist);
    long long planned = 0;
    for (int key = 0; res->counter != NULL && key < CC_KEYS; key++)
        if (g_key_kind[key] == HIST_KEY_COUNTER_ASYNC) /* w:'s losses are violations: printed below */
            planned += res->counter[key].lost_planned > res->counter[key].dup_planned ? res->counter[key].lost_planned
                                                                                      : res->counter[key].dup_planned;
    if (planned > 0)
        printf("chaos: NOTE (SEED=%llu): %lld acknowledged increments of a: lost after a CLUSTER FAILOVER: not a "
               "violation of the documented guarantee, but a planned failover should lose nothing; see the loss "
               "events above\n",
               g_o.seed, planned);
    for (size_t i = 0; i < res->nviol && i < CC_PRINT_VIOLATIONS; i++) {
        printf("--- violation %zu of %zu (SEED=%llu) ---\n", i + 1, res->nviol, g_o.seed);
        check_print_violation(stdout, &hist, &g_o.p, &res->viol[i]);
    }
    if (res->nviol > CC_PRINT_VIOLATIONS)
        printf("--- and %zu more (the whole history: %s) ---\n", res->nviol - CC_PRINT_VIOLATIONS, path);
    return nv;
}

int chaos_cluster_main(const struct chaos_common *common)
{
    if (opts_read(common) != 0) return 2;
    printf("chaos: TOPOLOGY=cluster SEED=%llu DURATION=%d FAULTS=%s\n", g_o.seed, g_o.duration_s, g_o.faults_text);
    printf("chaos: a TLS Redis Cluster of 3 primaries with 1 replica each (cluster-node-timeout %d); keygates with "
           "cluster-refresh 1s; %d clients per keygate (CHAOS_CLIENTS): INCR 3 in 4 (1 in 8 of them by EVALSHA; on "
           "w: followed by WAIT 1 %d, acknowledged at >= 1), else GET; client timeout %d ms; errors explained by "
           "failover/kill-primary/stop-primary/dead-slots (every keygate) and restart (its keygate) up to %lld ms "
           "after the fault's window, which ends once the cluster is settled; reshard and add-node explain none\n",
           CC_NODE_TIMEOUT_MS, g_o.clients, CC_WAIT_MS, CC_CLIENT_TIMEOUT_MS, g_o.p.error_grace_us / 1000);
    plan_make();
    plan_print();
    long long wall0 = procs_mono_ms();
    g_t0_us = runner_mono_us();
    int failed = 1;
    struct check_result res = {0};
    struct hist_op *ops = NULL;
    if (deployment_start() == 0) {
        printf("chaos: nodes");
        for (int i = 0; i < CLUSTER_NODES; i++) printf(" :%d", g.c->nodes[i].tls_port);
        printf(" (tls); kg0 :%d kg1 :%d kg2 :%d; counters", g.node[0].port, g.node[1].port, g.node[2].port);
        for (int k = 0; k < CC_KEYS; k++) printf(" %s (slot %u)", g_key_names[k], g_key_slot[k]);
        printf("; dir %s\n", g.c->dir);
        g_t0_us = runner_mono_us();
        int nclients = CC_NODES * g_o.clients;
        struct client *clients = calloc((size_t)nclients + 1, sizeof *clients);
        if (clients == NULL) {
            fail_harness("out of memory");
        } else {
            for (int i = 0; i < nclients; i++) {
                clients[i].id = i;
                clients[i].node = i % CC_NODES;
                clients[i].rng = g_o.seed * 7919 + (unsigned long long)i;
                pthread_create(&clients[i].thread, NULL, client_main, &clients[i]);
            }
            nemesis_run(); /* in this thread: the nodes it (re)starts are this thread's children (PR_SET_PDEATHSIG) */
            while (now_us() < (long long)g_o.duration_s * 1000000 && g_failure[0] == '\0') procs_nap_ms(50);
            __atomic_store_n(&g_stop_clients, 1, __ATOMIC_RELEASE);
            for (int i = 0; i < nclients; i++) pthread_join(clients[i].thread, NULL);
            long long load_end_us = now_us();
            heal_all();
            struct client *settler = &clients[nclients];
            settler->id = nclients;
            if (g_failure[0] == '\0' && cluster_wait_settled(g.c, CC_SETTLE_MS) != 0)
                fail_harness("the cluster did not settle after the schedule: %s", cluster_last_error());
            for (int n = 0; n < CC_NODES && g_failure[0] == '\0'; n++)
                if (!procs_alive(g.node[n].pid, g.node[n].start))
                    fail_harness("%s is not running after the schedule: it exited by itself", g.node[n].name);
                else
                    kg_wait_serving(n, CC_START_MS);
            if (g_failure[0] == '\0') {
                printf("chaos: +%7.3fs settled; the final reads\n", now_us() / 1e6);
                final_reads(settler);
            }
            failed = judge(clients, nclients, load_end_us, &res, &ops) != 0;
            free(clients);
        }
    }
    if (g_crashes > 0) printf("chaos: %d keygate%s ended badly after SIGTERM\n", g_crashes, g_crashes > 1 ? "s" : "");
    failed = failed || g_failure[0] != '\0' || g_crashes > 0;
    char dir[256] = "";
    if (g.c != NULL) snprintf(dir, sizeof dir, "%s", g.c->dir);
    deployment_stop(failed || g_o.keep);
    if (procs_leftovers() != 0) {
        fail_harness("servers still run after the stop");
        failed = 1;
    }
    printf("chaos: run took %.1f s\n", (procs_mono_ms() - wall0) / 1000.0);
    if (failed) {
        if (g_failure[0]) printf("chaos: HARNESS FAILURE: %s\n", g_failure);
        printf("chaos: FAILED with SEED=%llu DURATION=%d FAULTS=%s: %zu violations (reproduce: make test-chaos "
               "TOPOLOGY=cluster SEED=%llu DURATION=%d FAULTS=%s); files kept in %s\n",
               g_o.seed, g_o.duration_s, g_o.faults_text, res.nviol, g_o.seed, g_o.duration_s, g_o.faults_text, dir);
    } else {
        printf("chaos: PASSED with SEED=%llu\n", g_o.seed);
    }
    check_result_free(&res);
    free(ops);
    printf("%d passed, %d failed\n", failed ? 0 : 1, failed ? 1 : 0);
    return failed ? 1 : 0;
}
