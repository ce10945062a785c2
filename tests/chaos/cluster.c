/* cluster.c: make test-chaos TOPOLOGY=cluster: three keygates in front of a real TLS Redis Cluster (3 primaries, 1 replica each), clients INCRing counters spread over every slot range (some by EVALSHA), a seeded schedule of reshards, nodes added and removed, failovers, frozen and killed primaries and dead slot ranges, a history judged by the checker's counter rules. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static struct runner_opts g_o;

static int opts_read(const struct chaos_common *c)
{
    /* add-node is opt-in (FAULTS=add-node, or a list naming it): when its slot is moved back, the emptied
     * primary turns itself into a replica (Redis 7.0's replica migration), and a client whose last write
     * ran there gets 0 for its WAIT (its slot's owner changed since the write), or Redis's error while
     * keygate's map still names the emptied node (-UNBLOCKED ... master -> replica, or -ERR WAIT cannot be
     * used with replica instances), which no fault of the rules explains (SEED=5: keygate cannot tell this
     * demotion from a failover's, after which a confirmation could be of writes the failover lost).
     * docs/testing.md, "The cluster topology". */
    return runner_opts_read(&g_o, c, CC_CLIENTS, g_kinds, CC_NKINDS, 1u << HF_ADD_NODE, "cluster",
                            "reshard,failover,kill-primary,stop-primary,dead-slots,restart; add-node opt-in");
}

/* ---- the deployment ---- */

static struct {
    char root[PATH_MAX];
    struct cluster *c;
    struct runner_kg node[CC_NODES];
    char password[65], pass_file[PATH_MAX + 32];
} g;

/* Counter names: counter i of each namespace in the i-th sixth of the slots (CLUSTER KEYSLOT on node 0). */
static int keys_pick(void)
{
    redisContext *c = cluster_connect(g.c, 0);
    if (c == NULL) {
        runner_fail("node 0 does not answer");
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
                    runner_fail("CLUSTER KEYSLOT %s: no answer", g_key_buf[k]);
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

/* What keygate n serving answers: AUTH as app, then a GET of every counter (it serves each slot range). */
static struct runner_kg_probe g_probe = {
    .keys = g_key_names, .nkeys = CC_KEYS, .timeout_s = CC_CLIENT_TIMEOUT_MS / 1000, .what = "the counters"};

static const char g_registry[] =
    "# registry.conf written by tests/chaos/cluster.c\n"
    "namespace w: instance=kv ttl=none owner=app purpose=\"chaos counters, each INCR followed by the client's WAIT "
    "1\"\n"
    "namespace a: instance=kv ttl=none owner=app purpose=\"chaos counters, not replicated\"\n";

static void kg_conf(int n, char *conf, size_t len)
{
    struct runner_kg *k = &g.node[n];
    snprintf(conf, len,
             "# keygate.conf written by tests/chaos/cluster.c\n"
             "listen 127.0.0.1:%d\n"
             "registry %s\n"
             "instance kv cluster 127.0.0.1:%d,127.0.0.1:%d tls ca=%s/build/certs/ca.crt server-name=localhost "
             "password-file=%s\n"
             "cluster-refresh 1s\nthreads %d\n"
             "user app password-file=%s owners=app access=rw scripts=yes\n",
             k->port, k->registry, g.c->nodes[0].tls_port, g.c->nodes[1].tls_port, g.root, g.c->pass_file, k->threads,
             g.pass_file);
}

static int deployment_start(void)
{
    if (runner_prepare(g.root, sizeof g.root) != 0) return -1;
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", CC_NODE_TIMEOUT_MS);
    setenv("CLUSTER_NODE_TIMEOUT_MS", timeout, 1);
    g.c = cluster_start();
    if (g.c == NULL) {
        runner_fail("cluster_start: %s", cluster_last_error());
        return -1;
    }
    serverkit_random_hex(g.password, 32);
    g_probe.password = g.password;
    snprintf(g.pass_file, sizeof g.pass_file, "%s/app.pass", g.c->dir);
    char line[80];
    snprintf(line, sizeof line, "%s\n", g.password);
    if (serverkit_write_file(g.pass_file, line, 0600) != 0) {
        runner_fail("writing %s: %s", g.pass_file, strerror(errno));
        return -1;
    }
    if (keys_pick() != 0 || runner_kg_setup(g.node, CC_NODES, g_node_names, g.c->dir, NULL, 0) != 0) return -1;
    return runner_kg_start_all(g.node, CC_NODES, kg_conf, g_registry, &g_probe, CC_START_MS);
}

static void deployment_stop(int keep)
{
    runner_kg_kill_all(g.node, CC_NODES);
    if (keep) setenv("CLUSTER_KEEP", "1", 1);
    cluster_stop(g.c);
    g.c = NULL;
    procs_reap_mine();
}

/* ---- the clients ---- */

struct client {
    struct runner_client r; /* first: runner_load's and runner_judge's */
    char sha[41];
    long long evalshas; /* increments sent by EVALSHA */
    struct oplog log;
    pthread_t thread;
};

/* Connect cl to keygate o->node: AUTH, then SCRIPT LOAD of the increment script (its SHA1 into cl->sha). 0, or -1
 * with o's status and end set. */
static int client_connect(struct client *cl, struct hist_op *o)
{
    if (runner_client_connect(&cl->r.c, g.node[o->node].port, CC_CLIENT_TIMEOUT_MS, o, 1) != 0) return -1;
    redisAppendCommand(cl->r.c, "AUTH app %s", g.password);
    redisAppendCommand(cl->r.c, "SCRIPT LOAD %s", g_script);
    for (int i = 0; i < 2; i++) {
        void *rv = NULL;
        if (redisGetReply(cl->r.c, &rv) != REDIS_OK || rv == NULL) {
            runner_client_lost(&cl->r.c, o, 1);
            return -1;
        }
        redisReply *r = rv;
        int ok = i == 0 ? r->type == REDIS_REPLY_STATUS : r->type == REDIS_REPLY_STRING && r->len == 40;
        if (ok && i == 1) memcpy(cl->sha, r->str, 41);
        if (!ok) {
            o->end_us = runner_now_us();
            o->status = r->type == REDIS_REPLY_ERROR ? HST_ERR_REPLY : HST_BAD;
            snprintf(o->err, sizeof o->err, "%s: %.90s", i == 0 ? "AUTH" : "SCRIPT LOAD", serverkit_reply_text(r));
        }
        freeReplyObject(r);
        if (!ok) {
            /* the other reply is still owed: the connection is dropped */
            redisFree(cl->r.c);
            cl->r.c = NULL;
            return -1;
        }
    }
    return 0;
}

/* One operation o (kind, key, node filled) on cl's connection: GET; INCR or EVALSHA, followed by WAIT 1 on a w:
 * counter (acknowledged only when it answers >= 1). */
static void client_op(struct client *cl, struct hist_op *o, int by_script)
{
    o->start_us = runner_now_us();
    if (cl->r.c == NULL && client_connect(cl, o) != 0) return;
    const char *key = g_key_names[o->key[0]];
    int wait = o->kind == HOP_INCR && g_key_kind[o->key[0]] == HIST_KEY_COUNTER_REPLICATED;
    if (o->kind == HOP_GET)
        redisAppendCommand(cl->r.c, "GET %s", key);
    else if (by_script)
        redisAppendCommand(cl->r.c, "EVALSHA %s 1 %s", cl->sha, key);
    else
        redisAppendCommand(cl->r.c, "INCR %s", key);
    if (wait) redisAppendCommand(cl->r.c, "WAIT 1 %d", CC_WAIT_MS);
    if (by_script) cl->evalshas++;
    void *rv = NULL;
    if (redisGetReply(cl->r.c, &rv) != REDIS_OK || rv == NULL) {
        runner_client_lost(&cl->r.c, o, 1);
        return;
    }
    runner_counter_reply(o, rv);
    freeReplyObject(rv);
    if (wait) {
        if (redisGetReply(cl->r.c, &rv) != REDIS_OK || rv == NULL) {
            runner_client_lost(&cl->r.c, o, 1); /* the INCR's reply came, its WAIT's did not: not acknowledged */
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
    o->end_us = runner_now_us();
}

static void *client_main(void *arg)
{
    struct client *cl = arg;
    runner_client_lower_priority();
    while (!__atomic_load_n(&runner.stop_clients, __ATOMIC_ACQUIRE)) {
        struct hist_op *o = runner_oplog_add(&cl->r.log);
        o->thread = cl->r.id;
        o->node = cl->r.node;
        o->nkeys = 1;
        o->key[0] = runner_rnd(&cl->r.rng, CC_KEYS);
        o->kind = runner_rnd(&cl->r.rng, 4) < 3 ? HOP_INCR : HOP_GET;
        client_op(cl, o, o->kind == HOP_INCR && runner_rnd(&cl->r.rng, 8) == 0);
        if (o->status == HST_ERR_CONN) runner_sleep_ms(10, &runner.stop_clients); /* retry pacing: a keygate down */
    }
    redisFree(cl->r.c);
    return NULL;
}

/* ---- the faults ---- */

/* struct runner_planned here: target, but for restart, a pick among the primaries (index mod their count); param,
 * but for restart, the counters reshard and add-node move (1..CC_MAX_MOVE); pick, reshard's primary the slots go
 * to (index mod the other primaries' count) and a key pick */
static void plan_describe(const struct runner_planned *pl, char *buf, size_t len)
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
    default:
        runner_plan_describe(pl, g_node_names, buf, len);
    }
}

static struct runner_schedule g_sched = {.describe = plan_describe};

/* The schedule (the seed, DURATION and FAULTS decide it): the rest of planned fault pl after its kind and gap
 * (runner_plan_make), and its cost, a guess (the schedule is cut when DURATION is up). */
static int plan_draw(unsigned long long *s, struct runner_planned *pl)
{
    pl->target = runner_rnd(s, 1000);
    pl->pick = runner_rnd(s, 1000);
    int cost = 0;
    switch (pl->kind) {
    case HF_RESHARD:
        pl->param = 1 + runner_rnd(s, CC_MAX_MOVE);
        pl->hold_ms = 100 + runner_rnd(s, 900);
        cost = 2500 * pl->param;
        break;
    case HF_ADD_NODE: /* one counter's slot: each move takes seconds here (every node must agree) */
        pl->param = 1;
        pl->hold_ms = 500 + runner_rnd(s, 2500);
        cost = 15000;
        break;
    case HF_FAILOVER:
        cost = 3000;
        break;
    case HF_KILL_PRIMARY:
        cost = 6000;
        break;
    case HF_STOP_PRIMARY:
        pl->hold_ms = 300 + runner_rnd(s, 5701);
        cost = pl->hold_ms > 2500 ? 5000 : 1000;
        break;
    case HF_DEAD_SLOTS:
        pl->hold_ms = 1500 + runner_rnd(s, 3501);
        cost = 5000;
        break;
    case HF_RESTART:
        pl->target = runner_rnd(s, CC_NODES);
        pl->param = runner_rnd(s, 2);
        cost = 1000;
        break;
    }
    return cost;
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

static int fault_body(const struct runner_planned *pl, struct hist_fault *f)
{
    int primaries[CLUSTER_MAX_NODES], np = cluster_primaries(g.c, primaries);
    if (np < 1) {
        runner_fail("no primary before a fault: %s", cluster_last_error());
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
        runner_fault_note(f, ": %d slots to node %d", n, to);
        return move_slots(keys, from, n, to, pl->hold_ms);
    }
    case HF_ADD_NODE: {
        int np2 = -1, nr = -1, keys[CC_MAX_MOVE], from[CC_MAX_MOVE];
        if (cluster_node_add(g.c, -1, &np2) != 0 || cluster_node_add(g.c, np2, &nr) != 0) break;
        int n = counters_pick(pl->pick, pl->param, np2, keys, from);
        runner_fault_note(f, ": nodes %d (primary) and %d, %d slots", np2, nr, n);
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
            runner_fail("primary node %d has no replica to fail over to", p);
            return -1;
        }
        runner_fault_note(f, ": node %d -> node %d", p, r);
        if (cluster_failover(g.c, r, CC_SETTLE_MS) != 0) break;
        return 0;
    case HF_KILL_PRIMARY: {
        int heir = -1;
        if (cluster_kill_primary(g.c, p, CC_SETTLE_MS, &heir, NULL) != 0) break;
        runner_fault_note(f, ": node %d -> node %d", p, heir);
        if (cluster_node_restart(g.c, p) != 0) break;
        return 0;
    }
    case HF_STOP_PRIMARY:
        runner_fault_note(f, ": node %d", p);
        if (cluster_node_pause(g.c, p) != 0) break;
        runner_sleep_ms(pl->hold_ms, NULL); /* the fault's planned duration */
        if (cluster_node_resume(g.c, p) != 0) break;
        return 0;
    case HF_DEAD_SLOTS:
        r = replica_of(p);
        runner_fault_note(f, ": nodes %d and %d", p, r);
        if (r < 0 || cluster_node_pause(g.c, p) != 0 || cluster_node_pause(g.c, r) != 0) break;
        runner_sleep_ms(pl->hold_ms, NULL); /* the fault's planned duration */
        if (cluster_node_resume(g.c, p) != 0 || cluster_node_resume(g.c, r) != 0) break;
        return 0;
    case HF_RESTART:
        return runner_kg_restart(&g.node[pl->target], pl->param, CC_SHUTDOWN_MS, &g_probe, CC_START_MS);
    default:
        runner_fail("fault %s is not implemented in TOPOLOGY=cluster", hist_fault_name(pl->kind));
        return -1;
    }
    runner_fail("%s: %s", hist_fault_name(pl->kind), cluster_last_error());
    return -1;
}

/* Run planned fault pl and wait for the cluster to settle; records the window. 0, or -1 (a harness failure). */
static int fault_run(const struct runner_planned *pl)
{
    struct hist_fault *f = runner_fault_begin(&g_sched, pl);
    int rc = fault_body(pl, f);
    if (rc == 0 && cluster_wait_settled(g.c, CC_SETTLE_MS) != 0) {
        runner_fail("the cluster did not settle after %s: %s", hist_fault_name(pl->kind), cluster_last_error());
        rc = -1;
    }
    runner_fault_end(&g_sched, f);
    return rc;
}

/* Continue whatever is stopped, start again a node that is down (not one removed). */
static void heal_all(void)
{
    for (int i = 0; g.c != NULL && i < g.c->nnodes; i++) {
        if (g.c->nodes[i].removed) continue;
        if (g.c->nodes[i].stopped && cluster_node_resume(g.c, i) != 0) runner_fail("%s", cluster_last_error());
        if (!cluster_node_alive(g.c, i) && cluster_node_restart(g.c, i) != 0) runner_fail("%s", cluster_last_error());
    }
}

/* ---- the end: final reads, the history, the verdict ---- */

/* GET every counter through every keygate (ordinary reads) and directly on its slot's owner (the final reads). */
static void final_reads(struct client *cl)
{
    for (int key = 0; key < CC_KEYS; key++) {
        for (int n = 0; n < CC_NODES; n++) client_op(cl, runner_final_op(&cl->r, n, key), 0);
        struct hist_op *o = runner_final_begin(&cl->r.log, cl->r.id, key);
        int p = cluster_slot_owner(g.c, g_key_slot[key]);
        runner_final_get(o, p >= 0 ? cluster_connect(g.c, p) : NULL, p, g_key_names[key]);
    }
    redisFree(cl->r.c);
    cl->r.c = NULL;
}

/* The deployment started and its ports and counters said. */
static int start(void)
{
    if (deployment_start() != 0) return -1;
    printf("chaos: nodes");
    for (int i = 0; i < CLUSTER_NODES; i++) printf(" :%d", g.c->nodes[i].tls_port);
    printf(" (tls); kg0 :%d kg1 :%d kg2 :%d; counters", g.node[0].port, g.node[1].port, g.node[2].port);
    for (int k = 0; k < CC_KEYS; k++) printf(" %s (slot %u)", g_key_names[k], g_key_slot[k]);
    printf("; dir %s\n", g.c->dir);
    return 0;
}

/* After the load: the cluster settled, every keygate running and serving, the final reads on the slots' owners. */
static void finish(struct runner_client *settler)
{
    if (runner.failure[0] == '\0' && cluster_wait_settled(g.c, CC_SETTLE_MS) != 0)
        runner_fail("the cluster did not settle after the schedule: %s", cluster_last_error());
    runner_kg_check_running(g.node, CC_NODES, &g_probe, CC_START_MS);
    if (runner.failure[0] == '\0') {
        printf("chaos: +%7.3fs settled; the final reads\n", runner_now_us() / 1e6);
        final_reads((struct client *)settler);
    }
}

/* The load line's end: the increments sent by EVALSHA. */
static void load_extra(void *clients, int n, char *buf, size_t len)
{
    long long evalshas = 0;
    for (int i = 0; i < n; i++) evalshas += ((struct client *)clients)[i].evalshas;
    snprintf(buf, len, "; %lld increments by EVALSHA", evalshas);
}

static const char *deployment_dir(void)
{
    return g.c != NULL ? g.c->dir : "";
}

static const struct history g_keys = {
    .nkeys = CC_KEYS, .key_names = g_key_names, .key_kind = g_key_kind, .nnodes = CC_NODES, .node_names = g_node_names};

static const struct runner_topology g_topology = {
    .name = "cluster",
    .settles = "the cluster",
    .note_what = "a: lost after a CLUSTER FAILOVER",
    .o = &g_o,
    .sc = &g_sched,
    .salt = 0x636c7573ull, /* "clus" */
    .kinds = g_kinds,
    .nkinds = CC_NKINDS,
    .draw = plan_draw,
    .nodes = CC_NODES,
    .client_size = sizeof(struct client),
    .client_main = client_main,
    .start = start,
    .fault_run = fault_run,
    .heal = heal_all,
    .finish = finish,
    .load_extra = load_extra,
    .dir = deployment_dir,
    .stop = deployment_stop,
    .keys = &g_keys,
    .max_print = CC_PRINT_VIOLATIONS,
};

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
    return runner_main(&g_topology);
}
