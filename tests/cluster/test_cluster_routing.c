/* test_cluster_routing.c: keygate in front of a live TLS Redis Cluster (3 primaries + 3 replicas): keys routed to their slot's node with their TTL, multi-key commands split or refused per slot, transactions on one slot, and zero client-visible errors through a reshard, a held migration (ASK), a failover and a slot moved back and forth; every check made on the nodes directly. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_harness.h"
#include "harness.h"
#include "load.h"
#include "slotmap.h"

/*
 * Each test case starts its own cluster and a keygate whose one instance, `cache`, is that
 * cluster (seeds: nodes 0 and 1, over TLS). Registry: `c:` a TTL namespace (ttl=1h), `n:`
 * counters without a TTL. The teardown checks that every key on every primary matches the
 * registry (harness_check_registry_on), as the integration suites do on their backends.
 */

static struct cluster *C;
static struct harness h;

#define TTL_MS 3600000LL /* c:'s ttl=1h */

static const char registry_text[] =
    "namespace c: instance=cache ttl=1h max-ttl=1d owner=app purpose=\"TTL namespace on the cluster\"\n"
    "namespace n: instance=cache ttl=none owner=app purpose=\"counters on the cluster\"\n";

static void setup(void)
{
    long long t0 = now_ms();
    C = cluster_start();
    ck_assert_msg(C != NULL, "cluster_start: %s", cluster_last_error());
    long long t1 = now_ms();
    char instances[3 * PATH_MAX];
    snprintf(instances, sizeof instances,
             "instance cache cluster 127.0.0.1:%d,127.0.0.1:%d tls ca=%s/build/certs/ca.crt server-name=localhost "
             "password-file=%s\n",
             C->nodes[0].tls_port, C->nodes[1].tls_port, C->root, C->pass_file);
    struct harness_opts o = {.registry_text = registry_text, .instances_text = instances};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
    fprintf(stderr, "cluster up in %lld ms, keygate in front of it in %lld ms\n", t1 - t0, now_ms() - t1);
}

/* The registry post-condition on every primary that runs (a promoted replica too), then the
 * harness's own on its two backends (which keygate does not use here: nothing may be there). */
static void teardown(void)
{
    int idx[CLUSTER_NODES], ports[CLUSTER_NODES];
    int np = C != NULL ? cluster_primaries(C, idx) : -1;
    for (int k = 0; k < np; k++) ports[k] = C->nodes[idx[k]].plain_port;
    if (C != NULL) harness_check_registry_on(&h, "cache", ports, np > 0 ? np : 0, C->password);
    harness_check_registry(&h);
    harness_stop(&h);
    cluster_stop(C);
    C = NULL;
}

/* ---- helpers: nodes, slots, keygate's counters ---- */

static redisContext *node(int i)
{
    redisContext *c = cluster_connect(C, i);
    ck_assert_msg(c != NULL, "node %d (port %d) does not answer", i, C->nodes[i].plain_port);
    return c;
}

/* A running node's index (the first). */
static int any_running(void)
{
    for (int i = 0; i < CLUSTER_NODES; i++)
        if (cluster_node_alive(C, i)) return i;
    ck_abort_msg("no cluster node runs");
    return -1;
}

/* Every slot's owner now, as CLUSTER SHARDS of a running node says. */
static void owners_now(int owners[CLUSTER_SLOTS])
{
    ck_assert_msg(cluster_slot_owners(C, any_running(), owners) == 0, "%s", cluster_last_error());
}

/* The 3 primaries (node indexes, ascending). */
static void primaries3(int p[CLUSTER_NODES])
{
    int n = cluster_primaries(C, p);
    ck_assert_msg(n == 3, "%d primaries own slots, want 3: %s", n, cluster_last_error());
}

/* Slots of keys[0..n) as CLUSTER KEYSLOT of a running node answers (one pipeline). */
static void keyslots(char *const *keys, int n, unsigned *slots)
{
    redisContext *c = node(any_running());
    for (int k = 0; k < n; k++) redisAppendCommand(c, "CLUSTER KEYSLOT %s", keys[k]);
    for (int k = 0; k < n; k++) {
        redisReply *r = next_reply(c);
        ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "CLUSTER KEYSLOT %s: %s", keys[k], describe(r));
        slots[k] = (unsigned)r->integer;
        freeReplyObject(r);
    }
    redisFree(c);
}

/* One command `verb key` for each of keys[0..n), each sent directly to the primary owning the
 * key's slot now (CLUSTER KEYSLOT, CLUSTER SHARDS), pipelined; out[k] its reply (the caller
 * frees each). With asking, ASKING goes before each (a slot held mid-migration). */
static void nodes_each(const char *verb, char *const *keys, int n, redisReply **out)
{
    static int owners[CLUSTER_SLOTS];
    owners_now(owners);
    unsigned *slots = malloc(sizeof *slots * (size_t)(n > 0 ? n : 1));
    ck_assert(slots != NULL);
    keyslots(keys, n, slots);
    redisContext *conns[CLUSTER_NODES] = {0};
    for (int k = 0; k < n; k++) {
        int o = owners[slots[k]];
        ck_assert_msg(o >= 0, "slot %u has no owner", slots[k]);
        if (conns[o] == NULL) conns[o] = node(o);
        redisAppendCommand(conns[o], "%s %s", verb, keys[k]);
    }
    for (int k = 0; k < n; k++) out[k] = next_reply(conns[owners[slots[k]]]);
    for (int i = 0; i < CLUSTER_NODES; i++)
        if (conns[i] != NULL) redisFree(conns[i]);
    free(slots);
}

struct cluster_stats {
    long long redirects, retries, refreshes;
};

static struct cluster_stats stats_now(void)
{
    redisContext *c = harness_must_client(&h);
    struct cluster_stats s = {harness_info_stat(c, "cluster_redirects"), harness_info_stat(c, "cluster_retries"),
                              harness_info_stat(c, "cluster_refreshes")};
    redisFree(c);
    ck_assert_msg(s.redirects >= 0 && s.retries >= 0 && s.refreshes >= 0,
                  "INFO stats lacks cluster_redirects/_retries/_refreshes");
    return s;
}

/* A key "<prefix>{tagN}<suffix>" (into key) whose slot, CLUSTER KEYSLOT says, is owned by
 * primary `owner` (any owner: -1), other than the slots of avoid[0..navoid); *slot its slot. */
static void key_on(int owner, const char *prefix, const char *suffix, const unsigned *avoid, int navoid, char *key,
                   size_t len, unsigned *slot)
{
    static int owners[CLUSTER_SLOTS];
    owners_now(owners);
    static unsigned seq;
    for (;;) {
        char tag[32];
        snprintf(tag, sizeof tag, "t%u", seq++);
        unsigned s = slotmap_key_slot(tag, strlen(tag));
        int taken = 0;
        for (int k = 0; k < navoid; k++) taken |= avoid[k] == s;
        if (taken || (owner >= 0 && owners[s] != owner)) continue;
        snprintf(key, len, "%s{%s}%s", prefix, tag, suffix);
        char *one[] = {key};
        keyslots(one, 1, slot);
        ck_assert_msg(*slot == s, "CLUSTER KEYSLOT %s = %u, crc16 of its tag %u", key, *slot, s);
        return;
    }
}

/* The PTTL of key (on its primary) is within (0, TTL_MS]. */
static void expect_ttl_on_node(const char *key)
{
    char *keys[] = {(char *)key};
    redisReply *r;
    nodes_each("PTTL", keys, 1, &r);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer > 0 && r->integer <= TTL_MS,
                  "%s: PTTL on its node %s, want (0, %lld]", key, describe(r), TTL_MS);
    freeReplyObject(r);
}

/* GET key on its primary directly is the bulk `want` (NULL: the key does not exist). */
static void expect_on_node(const char *key, const char *want)
{
    char *keys[] = {(char *)key};
    redisReply *r;
    nodes_each("GET", keys, 1, &r);
    if (want == NULL)
        expect_nil(r, key);
    else
        expect_bulk(r, want, key);
}

/* ---- 1. routing of 10,000 keys ---- */

#define ROUTE_KEYS 10000

START_TEST(test_routing_10000_keys_on_their_slot_node_with_ttl)
{
    static char *keys[ROUTE_KEYS];
    static unsigned slots[ROUTE_KEYS];
    static int owners[CLUSTER_SLOTS];
    for (int k = 0; k < ROUTE_KEYS; k++) ck_assert(asprintf(&keys[k], "c:route:%d", k) > 0);

    redisContext *kg = harness_must_client(&h);
    long long t0 = now_ms();
    for (int k = 0; k < ROUTE_KEYS; k++) redisAppendCommand(kg, "SET %s v%d", keys[k], k);
    for (int k = 0; k < ROUTE_KEYS; k++) expect_status(next_reply(kg), "OK", keys[k]);
    long long t_set = now_ms() - t0;

    keyslots(keys, ROUTE_KEYS, slots);
    owners_now(owners);
    int p[CLUSTER_NODES];
    primaries3(p);
    int want[CLUSTER_NODES] = {0};
    for (int k = 0; k < ROUTE_KEYS; k++) want[owners[slots[k]]]++;
    /* each key on its slot's owner (EXISTS there), with its TTL; each primary holds exactly the
     * keys of its slots (DBSIZE: the cluster is this test's alone), so none is anywhere else */
    for (int j = 0; j < 3; j++) {
        redisContext *c = node(p[j]);
        for (int k = 0; k < ROUTE_KEYS; k++)
            if (owners[slots[k]] == p[j]) {
                redisAppendCommand(c, "EXISTS %s", keys[k]);
                redisAppendCommand(c, "PTTL %s", keys[k]);
            }
        for (int k = 0; k < ROUTE_KEYS; k++) {
            if (owners[slots[k]] != p[j]) continue;
            expect_int(next_reply(c), 1, keys[k]);
            redisReply *r = next_reply(c);
            ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer > 0 && r->integer <= TTL_MS,
                          "%s (slot %u, node %d): PTTL %s, want (0, %lld]", keys[k], slots[k], p[j], describe(r),
                          TTL_MS);
            freeReplyObject(r);
        }
        expect_int(cmd(c, "DBSIZE"), want[p[j]], "DBSIZE of the primary = the keys of its slots");
        redisFree(c);
    }
    t0 = now_ms();
    for (int k = 0; k < ROUTE_KEYS; k++) redisAppendCommand(kg, "GET %s", keys[k]);
    for (int k = 0; k < ROUTE_KEYS; k++) {
        char v[16];
        snprintf(v, sizeof v, "v%d", k);
        expect_bulk(next_reply(kg), v, keys[k]);
    }
    long long t_get = now_ms() - t0;
    redisFree(kg);
    struct cluster_stats s = stats_now();
    fprintf(stderr,
            "routing: %d pipelined SETs in %lld ms, GETs in %lld ms; keys per primary: node %d %d, node %d %d, node %d "
            "%d; each on its slot's owner with 0 < PTTL <= %lld; redirects %lld retries %lld refreshes %lld\n",
            ROUTE_KEYS, t_set, t_get, p[0], want[p[0]], p[1], want[p[1]], p[2], want[p[2]], TTL_MS, s.redirects,
            s.retries, s.refreshes);
    for (int k = 0; k < ROUTE_KEYS; k++) free(keys[k]);
}
END_TEST

/* ---- 2. multi-key commands and transactions ---- */

#define CROSSSLOT_TEXT "CROSSSLOT Keys in request don't hash to the same slot"

static void expect_crossslot(redisReply *r, const char *what)
{
    ck_assert_msg(r->type == REDIS_REPLY_ERROR && strcmp(r->str, CROSSSLOT_TEXT) == 0, "%s: %s, want -%s", what,
                  describe(r), CROSSSLOT_TEXT);
    freeReplyObject(r);
}

START_TEST(test_multikey_split_crossslot_and_transactions)
{
    redisContext *kg = harness_must_client(&h);
    int p[CLUSTER_NODES];
    primaries3(p);
    unsigned s;

    /* hash-tagged multi-key commands go through to the tag's node, with their TTLs */
    expect_status(cmd(kg, "MSET c:{t}a 1 c:{t}b 2"), "OK", "MSET on one tag");
    expect_on_node("c:{t}a", "1");
    expect_on_node("c:{t}b", "2");
    expect_ttl_on_node("c:{t}a");
    expect_ttl_on_node("c:{t}b");
    expect_int(cmd(kg, "SADD c:{u}s1 a b"), 2, "SADD");
    expect_int(cmd(kg, "SADD c:{u}s2 b c"), 2, "SADD");
    expect_int(cmd(kg, "SUNIONSTORE c:{u}dst c:{u}s1 c:{u}s2"), 3, "SUNIONSTORE on one tag");
    {
        char *keys[] = {"c:{u}dst"};
        redisReply *r;
        nodes_each("SCARD", keys, 1, &r);
        expect_int(r, 3, "SCARD c:{u}dst on its node");
        expect_ttl_on_node("c:{u}dst");
    }

    /* MSET across slots: Redis's CROSSSLOT text, and nothing written */
    char x1[64], x2[64];
    unsigned used[2];
    key_on(p[0], "c:x:", "", NULL, 0, x1, sizeof x1, &used[0]);
    key_on(p[1], "c:x:", "", used, 1, x2, sizeof x2, &used[1]);
    expect_crossslot(cmd(kg, "MSET %s 1 %s 2", x1, x2), "MSET across slots");
    expect_crossslot(cmd(kg, "SUNIONSTORE %s %s", x1, x2), "SUNIONSTORE across slots");
    expect_on_node(x1, NULL);
    expect_on_node(x2, NULL);

    /* a split MGET over keys of all three primaries: key order, nils for missing keys */
    enum { NM = 12 };
    char mk[NM][64];
    unsigned mslots[NM];
    int present[NM];
    for (int k = 0; k < NM; k++) {
        key_on(p[k % 3], "c:mget:", "", mslots, k, mk[k], sizeof mk[k], &mslots[k]);
        present[k] = (k / 3) % 2 == 0 || k == NM - 1; /* per primary: present, present, missing, ... */
        if (present[k]) expect_status(cmd(kg, "SET %s val%d", mk[k], k), "OK", mk[k]);
    }
    {
        const char *argv[NM + 1];
        argv[0] = "MGET";
        for (int k = 0; k < NM; k++) argv[k + 1] = mk[k];
        redisReply *r = redisCommandArgv(kg, NM + 1, argv, NULL);
        ck_assert_msg(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == NM, "MGET of %d keys: %s", NM,
                      describe(r));
        for (int k = 0; k < NM; k++) {
            char want[16];
            snprintf(want, sizeof want, "val%d", k);
            const redisReply *e = r->element[k];
            if (present[k])
                ck_assert_msg(e->type == REDIS_REPLY_STRING && strcmp(e->str, want) == 0,
                              "MGET element %d (%s, node %d): %s, want %s", k, mk[k], p[k % 3], describe(e), want);
            else
                ck_assert_msg(e->type == REDIS_REPLY_NIL, "MGET element %d (%s, missing): %s", k, mk[k], describe(e));
        }
        freeReplyObject(r);
    }

    /* DEL / EXISTS / UNLINK / TOUCH over several slots sum the parts */
    enum { ND = 6 };
    char dk[ND][64], miss[64];
    unsigned dslots[ND + 1];
    for (int k = 0; k < ND; k++) key_on(p[k % 3], "c:del:", "", dslots, k, dk[k], sizeof dk[k], &dslots[k]);
    key_on(p[1], "c:del:", ":missing", dslots, ND, miss, sizeof miss, &dslots[ND]);
    for (int k = 0; k < ND; k++) expect_status(cmd(kg, "SET %s x", dk[k]), "OK", dk[k]);
    expect_int(cmd(kg, "EXISTS %s %s %s %s %s %s %s %s", dk[0], dk[1], dk[2], dk[3], dk[4], dk[5], dk[0], miss), 7,
               "EXISTS of 6 keys on 3 primaries, one twice, one missing");
    expect_int(cmd(kg, "DEL %s %s %s %s %s", dk[0], dk[1], dk[2], miss, dk[3]), 4, "DEL of 4 keys + a missing one");
    for (int k = 0; k < 4; k++) expect_on_node(dk[k], NULL);
    expect_on_node(dk[4], "x");
    expect_on_node(dk[5], "x");
    expect_int(cmd(kg, "TOUCH %s %s %s %s", dk[4], dk[5], dk[0], miss), 2, "TOUCH over 3 slots");
    expect_int(cmd(kg, "UNLINK %s %s %s", dk[4], miss, dk[5]), 2, "UNLINK over 3 slots");
    expect_on_node(dk[4], NULL);
    expect_on_node(dk[5], NULL);
    expect_int(cmd(kg, "EXISTS %s %s %s", dk[4], dk[5], miss), 0, "EXISTS after UNLINK");

    /* MULTI/EXEC on one slot: the TTL engine's writes inside the client's transaction */
    expect_status(cmd(kg, "MULTI"), "OK", "MULTI");
    expect_status(cmd(kg, "SET c:{m}a x"), "QUEUED", "SET in MULTI");
    expect_status(cmd(kg, "INCR c:{m}n"), "QUEUED", "INCR in MULTI");
    expect_status(cmd(kg, "INCR n:{m}k"), "QUEUED", "INCR in MULTI");
    expect_array(cmd(kg, "EXEC"), "EXEC on one slot", 3, "+OK", ":1", ":1");
    expect_on_node("c:{m}a", "x");
    expect_on_node("c:{m}n", "1");
    expect_on_node("n:{m}k", "1");
    expect_ttl_on_node("c:{m}a");
    expect_ttl_on_node("c:{m}n");

    /* a transaction spanning slots: CROSSSLOT at EXEC, nothing runs */
    char t1[64], t2[64];
    unsigned ts[2];
    key_on(p[0], "c:tx:", "", NULL, 0, t1, sizeof t1, &ts[0]);
    key_on(p[2], "c:tx:", "", ts, 1, t2, sizeof t2, &ts[1]);
    expect_status(cmd(kg, "MULTI"), "OK", "MULTI");
    expect_status(cmd(kg, "SET %s 1", t1), "QUEUED", "SET in MULTI");
    expect_status(cmd(kg, "INCR %s", t2), "QUEUED", "INCR of another slot in MULTI");
    expect_crossslot(cmd(kg, "EXEC"), "EXEC of a transaction over two slots");
    expect_on_node(t1, NULL);
    expect_on_node(t2, NULL);
    expect_status(cmd(kg, "PING"), "PONG", "the connection serves after the CROSSSLOT EXEC");

    /* WATCH + MULTI/EXEC on one slot; a direct write to the watched key makes EXEC answer null */
    expect_status(cmd(kg, "WATCH c:{w}k"), "OK", "WATCH");
    expect_status(cmd(kg, "MULTI"), "OK", "MULTI");
    expect_status(cmd(kg, "SET c:{w}k mine"), "QUEUED", "SET in MULTI");
    expect_status(cmd(kg, "INCR c:{w}n"), "QUEUED", "INCR in MULTI");
    expect_array(cmd(kg, "EXEC"), "EXEC after an untouched WATCH", 2, "+OK", ":1");
    expect_on_node("c:{w}k", "mine");
    expect_ttl_on_node("c:{w}k");
    expect_status(cmd(kg, "WATCH c:{w}k"), "OK", "WATCH");
    {
        static int owners[CLUSTER_SLOTS];
        owners_now(owners);
        char *one[] = {"c:{w}k"};
        keyslots(one, 1, &s);
        redisContext *c = node(owners[s]);
        expect_status(cmd(c, "SET c:{w}k theirs PX %lld", TTL_MS), "OK", "the direct write to the watched key");
        redisFree(c);
    }
    expect_status(cmd(kg, "MULTI"), "OK", "MULTI");
    expect_status(cmd(kg, "SET c:{w}k mine2"), "QUEUED", "SET in MULTI");
    expect_nil(cmd(kg, "EXEC"), "EXEC after the watched key changed");
    expect_on_node("c:{w}k", "theirs");
    expect_bulk(cmd(kg, "GET c:{w}k"), "theirs", "GET through keygate after the aborted EXEC");
    redisFree(kg);
    struct cluster_stats st = stats_now();
    fprintf(stderr,
            "multi-key: MSET/SUNIONSTORE on one tag, CROSSSLOT x2, split MGET of %d keys over 3 primaries, "
            "EXISTS/DEL/TOUCH/UNLINK sums, MULTI/EXEC, cross-slot EXEC, WATCH: all as Redis; redirects %lld "
            "retries %lld refreshes %lld\n",
            NM, st.redirects, st.retries, st.refreshes);
}
END_TEST

/* ---- the load: 20 client threads through keygate (tests/common/load.h) ----
 *
 * Keys over all slots; the transaction's keys carry a hash tag (c:{mT}:ctr, c:{mT}:last), so
 * its two commands share a slot. */

static redisContext *load_client(void)
{
    return harness_client(&h);
}

/* The load's options: `reread` GETs of earlier keys; `lossy` for a failover. */
static void cluster_load_start(int reread, int lossy)
{
    struct load_opts o = {.connect = load_client, .multi_key = "c:{m%d}", .reread = reread, .lossy = lossy};
    load_start(&o);
}

/*
 * The load's keys read on their nodes directly (and through keygate when via_keygate): every
 * counter's value v is within [low, acknowledged + errored] where low is its acknowledged
 * count (exact: lossless) or the count of `snap` (a failover: what was acknowledged before
 * the snapshot the replica was known to have); every acknowledged SET has its value, except,
 * when snap is given, SETs of batches completed after the snapshot, which the failover may
 * have lost (counted into *lost_sets). Returns the counters' total shortfall against their
 * acknowledged counts (what asynchronous replication lost).
 */
static long long load_verify(const struct load_snap *snap, int via_keygate, long long *lost_sets, long long *checked)
{
    static char *ckeys[LOAD_THREADS * LOAD_NCOUNTERS];
    static redisReply *creps[LOAD_THREADS * LOAD_NCOUNTERS];
    int nc = 0;
    for (int k = 0; k < LOAD_THREADS; k++)
        for (int m = 0; m < LOAD_NCOUNTERS; m++) ckeys[nc++] = load_counter_key(k, m);
    nodes_each("GET", ckeys, nc, creps);
    long long shortfall = 0;
    for (int k = 0, x = 0; k < LOAD_THREADS; k++) {
        const struct load_thread *t = &load_threads[k];
        for (int m = 0; m < LOAD_NCOUNTERS; m++, x++) {
            long long acked = load_counter_acked(t, m), errs = load_counter_errors(t, m);
            long long low = snap == NULL ? acked : load_snap_counter(snap, k, m);
            const redisReply *r = creps[x];
            long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : r->type == REDIS_REPLY_NIL ? 0 : -1;
            ck_assert_msg(v >= low && v <= acked + errs,
                          "%s on its node: %s; acknowledged %lld, errored %lld, must be at least %lld", ckeys[x],
                          describe(r), acked, errs, low);
            if (v < acked) shortfall += acked - v;
            freeReplyObject(creps[x]);
            free(ckeys[x]);
        }
    }
    long long n;
    char **keys = load_acked_set_keys(&n);
    redisReply **reps = malloc(sizeof *reps * (size_t)(n + 1));
    ck_assert(reps != NULL);
    nodes_each("GET", keys, (int)n, reps);
    redisContext *kg = via_keygate ? harness_must_client(&h) : NULL;
    if (kg != NULL)
        for (long long x = 0; x < n; x++) redisAppendCommand(kg, "GET %s", keys[x]);
    *lost_sets = 0;
    for (long long x = 0; x < n; x++) {
        int id;
        long long i;
        ck_assert(sscanf(keys[x], "c:ld:%d:%lld", &id, &i) == 2);
        char want[48];
        snprintf(want, sizeof want, "v%d:%lld", id, i);
        int may_lose = snap != NULL && i >= snap->sets_done[id];
        if (reps[x]->type == REDIS_REPLY_NIL && may_lose)
            (*lost_sets)++;
        else
            ck_assert_msg(reps[x]->type == REDIS_REPLY_STRING && strcmp(reps[x]->str, want) == 0,
                          "acknowledged SET %s: on its node %s, want %s", keys[x], describe(reps[x]), want);
        freeReplyObject(reps[x]);
        if (kg != NULL) {
            redisReply *r = next_reply(kg);
            ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, want) == 0,
                          "acknowledged SET %s: GET through keygate %s, want %s", keys[x], describe(r), want);
            freeReplyObject(r);
        }
        free(keys[x]);
    }
    if (kg != NULL) redisFree(kg);
    free(keys);
    free(reps);
    *checked = n;
    return shortfall;
}

/* ---- 3. a reshard of 1,000 slots under load ---- */

START_TEST(test_reshard_1000_slots_under_load_no_client_error)
{
    static int before[CLUSTER_SLOTS], after[CLUSTER_SLOTS];
    int p[CLUSTER_NODES];
    primaries3(p);
    owners_now(before);
    struct cluster_stats s0 = stats_now();
    cluster_load_start(1, 0);
    load_wait_batches(20, 10000, "the load before the reshard");
    long long t0 = now_ms();
    ck_assert_msg(cluster_reshard(C, p[0], p[1], 1000, 90000) == 0, "%s", cluster_last_error());
    long long t_reshard = now_ms() - t0;
    load_wait_batches(20, 10000, "the load after the reshard");
    load_stop();
    long long t_load = load_elapsed_ms();
    struct cluster_stats s1 = stats_now();
    struct load_sum sum = load_sum();
    owners_now(after);
    int moved = 0;
    for (int sl = 0; sl < CLUSTER_SLOTS; sl++) moved += before[sl] != after[sl];
    fprintf(stderr,
            "reshard: %d slots moved from node %d to node %d in %lld ms under %d clients (%lld ms of load): %lld "
            "batches, %lld SETs (%lld acknowledged), %lld INCRs, %lld MULTI/EXEC, %lld GETs; %lld client-visible "
            "errors; keygate: %lld redirects, %lld retries, %lld refreshes\n",
            moved, p[0], p[1], t_reshard, LOAD_THREADS, t_load, sum.batches, sum.sets, sum.acked, sum.incrs, sum.multis,
            sum.gets, sum.errors, s1.redirects - s0.redirects, s1.retries - s0.retries, s1.refreshes - s0.refreshes);
    ck_assert_int_eq(moved, 1000);
    ck_assert_msg(sum.errors == 0 && sum.lost_reads == 0,
                  "%lld client-visible errors, %lld GETs of acknowledged "
                  "SETs answered nil (threads above)",
                  sum.errors, sum.lost_reads);
    ck_assert_msg(s1.redirects > s0.redirects, "no redirect was followed: the reshard did not meet the load");
    /* keys written in the moved slots during the reshard */
    long long in_moved = 0;
    {
        long long n = 0;
        for (int k = 0; k < LOAD_THREADS; k++) n += load_threads[k].sets;
        char **keys = malloc(sizeof *keys * (size_t)n);
        unsigned *slots = malloc(sizeof *slots * (size_t)n);
        ck_assert(keys != NULL && slots != NULL);
        long long x = 0;
        for (int k = 0; k < LOAD_THREADS; k++)
            for (long long i = 0; i < load_threads[k].sets; i++)
                ck_assert(asprintf(&keys[x++], "c:ld:%d:%lld", k, i) > 0);
        keyslots(keys, (int)n, slots);
        for (x = 0; x < n; x++) {
            in_moved += before[slots[x]] != after[slots[x]];
            free(keys[x]);
        }
        free(keys);
        free(slots);
    }
    long long lost = 0, checked = 0;
    long long t1 = now_ms();
    long long shortfall = load_verify(NULL, 1, &lost, &checked);
    fprintf(stderr,
            "reshard: %lld acknowledged SETs (%lld in moved slots) read back with their values on their nodes and "
            "through keygate, %d counters equal to their acknowledged counts (%lld ms)\n",
            checked, in_moved, LOAD_THREADS * LOAD_NCOUNTERS, now_ms() - t1);
    ck_assert_int_eq(shortfall, 0);
    ck_assert_int_eq(lost, 0);
    ck_assert_msg(in_moved > 0, "no key of the load landed in a moved slot");
    load_free();
}
END_TEST

/* ---- 4. a slot held mid-migration: ASK followed ---- */

/* The reply of `verb key` sent to node i directly, after ASKING when asking. */
static redisReply *node_cmd(int i, int asking, const char *verb, const char *key)
{
    redisContext *c = node(i);
    if (asking) expect_status(cmd(c, "ASKING"), "OK", "ASKING");
    redisReply *r = cmd(c, "%s %s", verb, key);
    redisFree(c);
    return r;
}

START_TEST(test_held_migration_reads_writes_follow_ask)
{
    enum { NK = 20, NNEW = 10 };
    int p[CLUSTER_NODES];
    primaries3(p);
    const int from = p[0], to = p[1];
    char probe[64], tag[32];
    unsigned slot;
    key_on(from, "c:", ":0", NULL, 0, probe, sizeof probe, &slot);
    ck_assert(sscanf(probe, "c:{%31[^}]}", tag) == 1);
    redisContext *kg = harness_must_client(&h);
    for (int k = 0; k < NK; k++) expect_status(cmd(kg, "SET c:{%s}:%d a%d", tag, k, k), "OK", "SET before");
    for (int k = 1; k <= 3; k++) {
        expect_int(cmd(kg, "INCR n:{%s}:ctr", tag), k, "INCR n: before");
        expect_int(cmd(kg, "INCR c:{%s}:ctr", tag), k, "INCR c: before");
    }
    const int total = NK + 2;
    struct cluster_stats s0 = stats_now();
    ck_assert_msg(cluster_migrate_begin(C, slot, from, to) == 0, "%s", cluster_last_error());
    int moved = 0;
    ck_assert_msg(cluster_migrate_keys(C, slot, from, to, total / 2, &moved) == 0, "%s", cluster_last_error());
    ck_assert_int_eq(moved, total / 2);
    {
        redisContext *c = node(to);
        expect_int(cmd(c, "CLUSTER COUNTKEYSINSLOT %u", slot), moved, "keys on the importing node");
        redisFree(c);
        c = node(from);
        expect_int(cmd(c, "CLUSTER COUNTKEYSINSLOT %u", slot), total - moved, "keys left on the migrating node");
        redisFree(c);
    }
    /* held: moved and not-yet-moved keys read and written, new keys made, through keygate */
    long long t0 = now_ms();
    char key[80], want[32];
    for (int k = 0; k < NK; k++) {
        snprintf(key, sizeof key, "c:{%s}:%d", tag, k);
        snprintf(want, sizeof want, "a%d", k);
        expect_bulk(cmd(kg, "GET %s", key), want, "GET while the slot migrates");
        expect_status(cmd(kg, "SET %s b%d", key, k), "OK", "SET while the slot migrates");
        snprintf(want, sizeof want, "b%d", k);
        expect_bulk(cmd(kg, "GET %s", key), want, "GET of the value just written");
    }
    expect_int(cmd(kg, "INCR n:{%s}:ctr", tag), 4, "INCR n: while the slot migrates");
    expect_int(cmd(kg, "INCR c:{%s}:ctr", tag), 4, "INCR c: (TTL-wrapped) while the slot migrates");
    for (int k = 0; k < NNEW; k++) {
        expect_status(cmd(kg, "SET c:{%s}:new%d w%d", tag, k, k), "OK", "SET of a new key while the slot migrates");
        snprintf(want, sizeof want, "w%d", k);
        expect_bulk(cmd(kg, "GET c:{%s}:new%d", tag, k), want, "GET of a new key");
    }
    long long t_held = now_ms() - t0;
    struct cluster_stats s1 = stats_now();
    /* on the nodes: each old key on exactly one of them with its new value; new keys on the target */
    int on_from = 0, on_to = 0;
    for (int k = 0; k < NK; k++) {
        snprintf(key, sizeof key, "c:{%s}:%d", tag, k);
        snprintf(want, sizeof want, "b%d", k);
        redisReply *a = node_cmd(from, 0, "GET", key), *b = node_cmd(to, 1, "GET", key);
        int at_from = a->type == REDIS_REPLY_STRING, at_to = b->type == REDIS_REPLY_STRING;
        ck_assert_msg(at_from != at_to && (at_from ? strcmp(a->str, want) : strcmp(b->str, want)) == 0,
                      "%s: on the source %s, on the target (ASKING) %s; want %s on one", key, describe(a),
                      at_from ? "-" : describe(b), want);
        on_from += at_from;
        on_to += at_to;
        freeReplyObject(a);
        freeReplyObject(b);
    }
    for (int k = 0; k < NNEW; k++) {
        snprintf(key, sizeof key, "c:{%s}:new%d", tag, k);
        snprintf(want, sizeof want, "w%d", k);
        expect_bulk(node_cmd(to, 1, "GET", key), want, "a new key on the importing node");
        redisReply *r = node_cmd(to, 1, "PTTL", key);
        ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer > 0 && r->integer <= TTL_MS, "%s: PTTL %s", key,
                      describe(r));
        freeReplyObject(r);
    }
    /* the rest of the keys, then the slot is the target's */
    int rest = 0;
    ck_assert_msg(cluster_migrate_keys(C, slot, from, to, 1000, &rest) == 0, "%s", cluster_last_error());
    ck_assert_int_eq(rest, total - moved);
    ck_assert_msg(cluster_migrate_end(C, slot, from, to) == 0, "%s", cluster_last_error());
    for (int k = 0; k < NK; k++) {
        snprintf(want, sizeof want, "b%d", k);
        expect_bulk(cmd(kg, "GET c:{%s}:%d", tag, k), want, "GET after the migration");
        expect_status(cmd(kg, "SET c:{%s}:%d c%d", tag, k, k), "OK", "SET after the migration");
    }
    for (int k = 0; k < NNEW; k++) {
        snprintf(want, sizeof want, "w%d", k);
        expect_bulk(cmd(kg, "GET c:{%s}:new%d", tag, k), want, "GET of a new key after the migration");
    }
    expect_int(cmd(kg, "INCR n:{%s}:ctr", tag), 5, "INCR n: after the migration");
    expect_int(cmd(kg, "INCR c:{%s}:ctr", tag), 5, "INCR c: after the migration");
    redisFree(kg);
    struct cluster_stats s2 = stats_now();
    ck_assert_int_eq(cluster_slot_owner(C, slot), to);
    {
        redisContext *c = node(from);
        expect_int(cmd(c, "CLUSTER COUNTKEYSINSLOT %u", slot), 0, "keys left on the source");
        redisFree(c);
        c = node(to);
        expect_int(cmd(c, "CLUSTER COUNTKEYSINSLOT %u", slot), total + NNEW, "keys on the target");
        redisFree(c);
    }
    for (int k = 0; k < NK; k++) {
        snprintf(key, sizeof key, "c:{%s}:%d", tag, k);
        snprintf(want, sizeof want, "c%d", k);
        expect_on_node(key, want);
        expect_ttl_on_node(key);
    }
    snprintf(key, sizeof key, "n:{%s}:ctr", tag);
    expect_on_node(key, "5");
    expect_int(node_cmd(to, 0, "PTTL", key), -1, "n: has no TTL");
    snprintf(key, sizeof key, "c:{%s}:ctr", tag);
    expect_on_node(key, "5");
    expect_ttl_on_node(key);
    fprintf(stderr,
            "held migration of slot %u (node %d -> %d): %d keys moved, %d left; %d GET+SET+GET of old keys (%d then "
            "on the source, %d on the target), 2 INCRs, %d new keys, in %lld ms: %lld redirects followed (%lld "
            "retries); after the end: %lld more redirects, all values as written\n",
            slot, from, to, moved, total - moved, NK, on_from, on_to, NNEW, t_held, s1.redirects - s0.redirects,
            s1.retries - s0.retries, s2.redirects - s1.redirects);
    ck_assert_msg(s1.redirects - s0.redirects >= on_to, "fewer ASK redirects (%lld) than keys read on the target (%d)",
                  s1.redirects - s0.redirects, on_to);
}
END_TEST

/* ---- 5. a primary SIGKILLed under load ---- */

START_TEST(test_primary_killed_under_load_errors_only_in_flight)
{
    int p[CLUSTER_NODES];
    primaries3(p);
    const int victim = p[0];
    static struct load_snap snap;
    struct cluster_stats s0 = stats_now();
    cluster_load_start(0, 1);
    load_wait_batches(20, 10000, "the load before the kill");
    /* what the replica is known to have: every write acknowledged before this snapshot ran on
     * the primary before the marker below, which WAIT says the replica has */
    load_snap_take(&snap);
    char marker[64];
    unsigned ms;
    key_on(victim, "c:", ":kill-marker", NULL, 0, marker, sizeof marker, &ms);
    {
        redisContext *c = node(victim);
        expect_status(cmd(c, "SET %s 1 PX %lld", marker, TTL_MS), "OK", "the marker on the primary");
        expect_int(cmd(c, "WAIT 1 5000"), 1, "the replica has the marker");
        redisFree(c);
    }
    long long t_kill = load_elapsed_ms();
    int heir = -1;
    long long failover_ms = 0;
    ck_assert_msg(cluster_kill_primary(C, victim, 20000, &heir, &failover_ms) == 0, "%s", cluster_last_error());
    load_mark();
    load_wait_batches(20, 15000, "the load after the promotion");
    load_stop();
    struct cluster_stats s1 = stats_now();
    struct load_sum sum = load_sum();
    long long window = 0;
    for (int k = 0; k < LOAD_THREADS; k++) {
        for (int m = 0; m < LOAD_NCOUNTERS; m++)
            window += load_counter_acked(&load_threads[k], m) - load_snap_counter(&snap, k, m);
    }
    fprintf(stderr,
            "failover: node %d SIGKILLed at %lld ms of load, node %d promoted, cluster ok %lld ms after the kill; "
            "%d clients: %lld batches, %lld SETs (%lld acknowledged), %lld INCRs, %lld MULTI/EXEC; %lld "
            "client-visible errors (bound %d), at most %lld failed batch per client, %lld after the promotion; "
            "keygate: %lld redirects, %lld retries, %lld refreshes\n",
            victim, t_kill, heir, failover_ms, LOAD_THREADS, sum.batches, sum.sets, sum.acked, sum.incrs, sum.multis,
            sum.errors, LOAD_THREADS * LOAD_MAX_BATCH, sum.max_error_batches, sum.errors_after_mark,
            s1.redirects - s0.redirects, s1.retries - s0.retries, s1.refreshes - s0.refreshes);
    long long lost_sets = 0, checked = 0;
    long long shortfall = load_verify(&snap, 0, &lost_sets, &checked);
    fprintf(stderr,
            "failover: counters on the nodes short of their acknowledged counts by %lld in all (async replication "
            "may lose up to %lld: the INCRs acknowledged after the replica was known to have the rest); %lld of "
            "%lld acknowledged SETs lost, %lld GETs of an acknowledged SET answered nil, %lld INCRs answered below "
            "the count\n",
            shortfall, window, lost_sets, checked, sum.lost_reads, sum.regressions);
    /* a GET answered nil after its batch's SET was acknowledged: a write the failover lost, or,
     * when the key is on its node now, a GET that ran before the SET sent ahead of it */
    long long reordered = 0;
    for (int k = 0; k < LOAD_THREADS; k++) {
        const struct load_thread *t = &load_threads[k];
        int n = t->lost_reads < 16 ? (int)t->lost_reads : 16;
        for (int x = 0; x < n; x++) {
            char key[48], *one[] = {key}, want[48];
            snprintf(key, sizeof key, "c:ld:%d:%lld", k, t->nil_reads[x]);
            snprintf(want, sizeof want, "v%d:%lld", k, t->nil_reads[x]);
            redisReply *r;
            nodes_each("GET", one, 1, &r);
            if (r->type == REDIS_REPLY_STRING && strcmp(r->str, want) == 0) {
                if (reordered++ < 5)
                    fprintf(stderr,
                            "  thread %d: SET %s answered +OK, the GET pipelined after it answered nil, and the "
                            "key is on its node with its value: the GET ran first\n",
                            k, key);
            }
            freeReplyObject(r);
        }
    }
    fprintf(stderr, "failover: %lld GETs ran before the SET the client sent ahead of them (same key, one connection)\n",
            reordered);
    ck_assert_msg(sum.errors <= LOAD_THREADS * LOAD_MAX_BATCH, "%lld errors: more than the requests in flight (%d)",
                  sum.errors, LOAD_THREADS * LOAD_MAX_BATCH);
    ck_assert_msg(sum.max_error_batches <= 1, "a client had %lld failed batches: only the one in flight may fail",
                  sum.max_error_batches);
    ck_assert_msg(sum.errors_after_mark == 0, "%lld errors in batches sent after the promotion", sum.errors_after_mark);
    ck_assert_msg(reordered == 0,
                  "%lld GETs answered nil although the SET of the same key sent before them on the same connection "
                  "was acknowledged and is on its node: requests waiting for the promotion were sent again out of "
                  "the client's order",
                  reordered);
    ck_assert_msg(shortfall <= window,
                  "counters lost %lld increments, more than the %lld acknowledged after the "
                  "replica had the rest",
                  shortfall, window);
    load_free();
}
END_TEST

/* ---- 6. a slot moved back and forth ---- */

struct pingpong {
    const char *tag;
    pthread_t thread;
    volatile int stop, held;
    long long batches; /* atomic */
    long long sent, sent_held, last_set, n_ctr, c_ctr, errors;
    char first_error[256];
};

static void pp_error(struct pingpong *pp, const char *what, const redisReply *r, const char *errstr)
{
    if (pp->errors++ == 0) {
        char d[100];
        if (r != NULL)
            describe_into(r, d, sizeof d);
        else
            snprintf(d, sizeof d, "connection: %.80s", errstr ? errstr : "(no error text)");
        snprintf(pp->first_error, sizeof pp->first_error, "%s: %s", what, d);
    }
}

static void *pp_main(void *arg)
{
    struct pingpong *pp = arg;
    redisContext *c = harness_client(&h);
    for (long long i = 1; !pp->stop && c != NULL && !c->err; i++) {
        int held = pp->held;
        redisAppendCommand(c, "SET c:{%s}:k %lld", pp->tag, i);
        redisAppendCommand(c, "GET c:{%s}:k", pp->tag);
        redisAppendCommand(c, "INCR n:{%s}:ctr", pp->tag);
        redisAppendCommand(c, "INCR c:{%s}:ctr", pp->tag);
        pp->sent += 4;
        if (held || pp->held) pp->sent_held += 4;
        redisReply *r[4] = {0};
        int k = 0;
        for (; k < 4; k++)
            if (redisGetReply(c, (void **)&r[k]) != REDIS_OK || r[k] == NULL) break;
        if (k < 4) {
            pp_error(pp, "reply", NULL, c->errstr);
        } else {
            char v[24];
            snprintf(v, sizeof v, "%lld", i);
            if (r[0]->type == REDIS_REPLY_STATUS && strcmp(r[0]->str, "OK") == 0)
                pp->last_set = i;
            else
                pp_error(pp, "SET", r[0], NULL);
            if (r[1]->type != REDIS_REPLY_STRING || strcmp(r[1]->str, v) != 0) pp_error(pp, "GET", r[1], NULL);
            if (r[2]->type == REDIS_REPLY_INTEGER && r[2]->integer == pp->n_ctr + 1)
                pp->n_ctr++;
            else
                pp_error(pp, "INCR n:", r[2], NULL);
            if (r[3]->type == REDIS_REPLY_INTEGER && r[3]->integer == pp->c_ctr + 1)
                pp->c_ctr++;
            else
                pp_error(pp, "INCR c: (TTL-wrapped)", r[3], NULL);
        }
        for (int j = 0; j < k; j++) freeReplyObject(r[j]);
        __atomic_store_n(&pp->batches, pp->batches + 1, __ATOMIC_RELEASE);
    }
    if (c == NULL || c->err) pp_error(pp, "connection", NULL, c != NULL ? c->errstr : "connect failed");
    if (c != NULL) redisFree(c);
    return NULL;
}

static void pp_wait(struct pingpong *pp, int more, const char *what)
{
    long long base = __atomic_load_n(&pp->batches, __ATOMIC_ACQUIRE), deadline = now_ms() + 10000;
    while (__atomic_load_n(&pp->batches, __ATOMIC_ACQUIRE) < base + more) {
        ck_assert_msg(now_ms() < deadline, "%s: the client completed %lld of %d batches in 10 s (errors %lld: %s)",
                      what, __atomic_load_n(&pp->batches, __ATOMIC_ACQUIRE) - base, more, pp->errors, pp->first_error);
        sleep_ms(2);
    }
}

START_TEST(test_slot_moved_back_and_forth_no_error_no_loop)
{
    enum { MOVES = 10 };
    int p[CLUSTER_NODES];
    primaries3(p);
    const int a = p[0], b = p[1];
    char probe[64], tag[32];
    unsigned slot;
    key_on(a, "c:", ":k", NULL, 0, probe, sizeof probe, &slot);
    ck_assert(sscanf(probe, "c:{%31[^}]}", tag) == 1);
    static struct pingpong pp;
    memset(&pp, 0, sizeof pp);
    pp.tag = tag;
    ck_assert_int_eq(pthread_create(&pp.thread, NULL, pp_main, &pp), 0);
    pp_wait(&pp, 5, "before the first move");
    struct cluster_stats s0 = stats_now();
    long long t0 = now_ms();
    int keys_moved = 0;
    for (int m = 0; m < MOVES; m++) {
        int from = m % 2 == 0 ? a : b, to = m % 2 == 0 ? b : a, n = 0;
        pp.held = 1;
        ck_assert_msg(cluster_migrate_begin(C, slot, from, to) == 0, "move %d: %s", m, cluster_last_error());
        pp_wait(&pp, 3, "slot migrating, no key moved yet");
        ck_assert_msg(cluster_migrate_keys(C, slot, from, to, 100, &n) == 0, "move %d: %s", m, cluster_last_error());
        keys_moved += n;
        pp_wait(&pp, 3, "slot migrating, its keys moved");
        ck_assert_msg(cluster_migrate_end(C, slot, from, to) == 0, "move %d: %s", m, cluster_last_error());
        pp.held = 0;
        pp_wait(&pp, 3, "slot moved");
    }
    long long elapsed = now_ms() - t0;
    struct cluster_stats s1 = stats_now();
    pp.stop = 1;
    pthread_join(pp.thread, NULL);
    long long redirects = s1.redirects - s0.redirects, refreshes = s1.refreshes - s0.refreshes;
    long long refresh_bound = elapsed / 500 + elapsed / 10000 + 3;
    fprintf(stderr,
            "ping-pong: slot %u moved %d times between nodes %d and %d in %lld ms (%d key moves); the client sent "
            "%lld commands (%lld while a migration was held): %lld errors; keygate: %lld redirects, %lld retries, "
            "%lld refreshes (bound %lld)\n",
            slot, MOVES, a, b, elapsed, keys_moved, pp.sent, pp.sent_held, pp.errors, redirects,
            s1.retries - s0.retries, refreshes, refresh_bound);
    ck_assert_msg(pp.errors == 0, "%lld client-visible errors, the first: %s", pp.errors, pp.first_error);
    ck_assert_msg(redirects <= pp.sent_held + 8 * MOVES,
                  "%lld redirects for %lld commands sent while held and %d moves: a redirect loop", redirects,
                  pp.sent_held, MOVES);
    ck_assert_msg(refreshes <= refresh_bound, "%lld slot-map refreshes in %lld ms: more than one per 500 ms", refreshes,
                  elapsed);
    ck_assert_int_eq(cluster_slot_owner(C, slot), a);
    char key[64], want[24];
    snprintf(key, sizeof key, "c:{%s}:k", tag);
    snprintf(want, sizeof want, "%lld", pp.last_set);
    expect_on_node(key, want);
    expect_ttl_on_node(key);
    snprintf(key, sizeof key, "n:{%s}:ctr", tag);
    snprintf(want, sizeof want, "%lld", pp.n_ctr);
    expect_on_node(key, want);
    snprintf(key, sizeof key, "c:{%s}:ctr", tag);
    snprintf(want, sizeof want, "%lld", pp.c_ctr);
    expect_on_node(key, want);
    expect_ttl_on_node(key);
}
END_TEST

/* ---- 7. host names: cluster-preferred-endpoint-type hostname (issue 30 item 3) ---- */

/* As setup, with every node announcing `localhost` (CLUSTER_HOSTNAMES=1), keygate's seeds named
 * `localhost` and no server-name=: each node's certificate is checked against the name. */
static void setup_hostnames(void)
{
    setenv("CLUSTER_HOSTNAMES", "1", 1);
    C = cluster_start();
    unsetenv("CLUSTER_HOSTNAMES");
    ck_assert_msg(C != NULL, "cluster_start: %s", cluster_last_error());
    char instances[3 * PATH_MAX];
    snprintf(instances, sizeof instances,
             "instance cache cluster localhost:%d,localhost:%d tls ca=%s/build/certs/ca.crt password-file=%s\n",
             C->nodes[0].tls_port, C->nodes[1].tls_port, C->root, C->pass_file);
    struct harness_opts o = {.registry_text = registry_text, .instances_text = instances};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

#define HOST_KEYS 1000

START_TEST(test_hostnames_routed_moved_and_asked)
{
    ck_assert(C->hostnames);
    {
        redisContext *n0 = node(0);
        redisReply *r = cmd(n0, "CLUSTER SLOTS");
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->elements >= 3 &&
                          r->element[0]->element[2]->type == REDIS_REPLY_ARRAY,
                      "CLUSTER SLOTS: %s", describe(r));
        ck_assert_str_eq(r->element[0]->element[2]->element[0]->str, "localhost");
        freeReplyObject(r);
        redisFree(n0);
    }
    /* routing: every key on its slot's node */
    redisContext *kg = harness_must_client(&h);
    static char *keys[HOST_KEYS];
    static redisReply *reps[HOST_KEYS];
    for (int k = 0; k < HOST_KEYS; k++) {
        ck_assert(asprintf(&keys[k], "c:h:%d", k) > 0);
        redisAppendCommand(kg, "SET %s v%d", keys[k], k);
    }
    for (int k = 0; k < HOST_KEYS; k++) expect_status(next_reply(kg), "OK", keys[k]);
    nodes_each("GET", keys, HOST_KEYS, reps);
    for (int k = 0; k < HOST_KEYS; k++) {
        char want[16];
        snprintf(want, sizeof want, "v%d", k);
        expect_bulk(reps[k], want, keys[k]);
        free(keys[k]);
    }
    expect_ttl_on_node("c:h:7");
    /* a slot moved behind keygate's back (its map is refreshed every 10 s): -ASK localhost:PORT
     * while it migrates, -MOVED localhost:PORT after; both followed */
    int p[CLUSTER_NODES];
    primaries3(p);
    char key[64];
    unsigned slot;
    key_on(p[0], "c:", ":m", NULL, 0, key, sizeof key, &slot);
    expect_status(cmd(kg, "SET %s one", key), "OK", "SET before the move");
    struct cluster_stats s0 = stats_now();
    int moved = 0;
    ck_assert_msg(cluster_migrate_begin(C, slot, p[0], p[1]) == 0, "%s", cluster_last_error());
    ck_assert_msg(cluster_migrate_keys(C, slot, p[0], p[1], 100, &moved) == 0, "%s", cluster_last_error());
    ck_assert_int_eq(moved, 1);
    expect_bulk(cmd(kg, "GET %s", key), "one", "GET while the slot migrates (-ASK localhost:PORT)");
    ck_assert_msg(cluster_migrate_end(C, slot, p[0], p[1]) == 0, "%s", cluster_last_error());
    expect_status(cmd(kg, "SET %s two", key), "OK", "SET after the move (-MOVED localhost:PORT)");
    expect_bulk(cmd(kg, "GET %s", key), "two", "GET after the move");
    struct cluster_stats s1 = stats_now();
    ck_assert_int_eq(cluster_slot_owner(C, slot), p[1]);
    expect_on_node(key, "two");
    ck_assert_msg(s1.redirects - s0.redirects >= 2, "%lld redirects followed, want the -ASK and the -MOVED",
                  s1.redirects - s0.redirects);
    redisFree(kg);
    char *log = harness_keygate_log(&h);
    ck_assert_msg(log != NULL && strstr(log, "not a numeric address") == NULL && strstr(log, "cannot resolve") == NULL,
                  "keygate refused or could not resolve a host name:\n%s", log ? log : "");
    free(log);
    fprintf(stderr,
            "hostnames: %d keys on their slot's node through nodes named localhost; slot %u moved: %lld redirects "
            "followed (-ASK, -MOVED with localhost:PORT)\n",
            HOST_KEYS, slot, s1.redirects - s0.redirects);
}
END_TEST

/* ---- 8. a blocking command sent again after a redirect keeps its pin ---- */

/*
 * k1's slot moves behind keygate's back (its map is read every 10 s): client a's BLPOP k1 goes to
 * the old owner, is redirected, and goes again on a pin of its own to the new one (an idle pinned
 * connection an earlier BLPOP left), where it blocks. That pin must stay a's while the BLPOP waits: client b's BLPOP of another key of the
 * same node, then a push to it, must answer b at once (b's BLPOP queued behind a's on a's
 * connection would wait for a's), and a is answered by a push to k1 in turn.
 */
START_TEST(test_redirected_blocking_command_keeps_its_pin)
{
    /* keygate's map read once a minute: the move below stays unknown to it until a redirect */
    char instances[3 * PATH_MAX];
    snprintf(instances, sizeof instances,
             "instance cache cluster 127.0.0.1:%d,127.0.0.1:%d tls ca=%s/build/certs/ca.crt server-name=localhost "
             "password-file=%s\n",
             C->nodes[0].tls_port, C->nodes[1].tls_port, C->root, C->pass_file);
    struct harness_opts o = {.registry_text = registry_text,
                             .instances_text = instances,
                             .extra_config = "cluster-refresh 60s\n"};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "%s", h.error);
    int p[CLUSTER_NODES];
    primaries3(p);
    char k1[64], k2[64];
    unsigned s1, s2;
    key_on(p[0], "c:", ":bl1", NULL, 0, k1, sizeof k1, &s1);
    key_on(p[1], "c:", ":bl2", &s1, 1, k2, sizeof k2, &s2);
    redisContext *a = harness_must_client(&h), *b = harness_must_client(&h), *w = harness_must_client(&h);
    /* keygate's map: k1 on p[0]; the shared connections of both nodes open (a blocking command
     * whose owner's is not yet makes keygate read the map again, which would learn the move) */
    expect_nil(cmd(w, "GET %s", k1), "k1 before the move");
    expect_nil(cmd(w, "GET %s", k2), "k2 before the move");
    int moved = 0;
    ck_assert_msg(cluster_migrate_begin(C, s1, p[0], p[1]) == 0, "%s", cluster_last_error());
    ck_assert_msg(cluster_migrate_keys(C, s1, p[0], p[1], 100, &moved) == 0, "%s", cluster_last_error());
    ck_assert_msg(cluster_migrate_end(C, s1, p[0], p[1]) == 0, "%s", cluster_last_error());
    /* a pinned connection to p[1] left idle by a blocking command that timed out: the re-sent
     * BLPOP takes it (a new one would still owe its AUTH when the re-send lets go of it) */
    redisReply *r0 = cmd(w, "BLPOP %s 0.1", k2);
    ck_assert_msg(r0->type == REDIS_REPLY_NIL, "BLPOP %s 0.1: %s", k2, describe(r0));
    freeReplyObject(r0);
    long long redirects = stats_now().redirects;
    redisAppendCommand(a, "BLPOP %s 30", k1);
    send_appended(a, "a's BLPOP");
    long long end = now_ms() + 10000;
    while (stats_now().redirects == redirects && now_ms() < end) sleep_ms(20);
    ck_assert_msg(stats_now().redirects > redirects, "a's BLPOP of %s was not redirected within 10 s", k1);
    redisContext *n1 = node(p[1]);
    for (long long blocked = 0; blocked < 1 && now_ms() < end; sleep_ms(20)) {
        redisReply *r = cmd(n1, "INFO clients");
        const char *at = r->type == REDIS_REPLY_STRING ? strstr(r->str, "blocked_clients:") : NULL;
        blocked = at ? atoll(at + strlen("blocked_clients:")) : 0;
        freeReplyObject(r);
    }
    redisAppendCommand(b, "BLPOP %s 20", k2);
    send_appended(b, "b's BLPOP");
    sleep_ms(200); /* b's BLPOP on its way (a pace: if it waits behind a's, nothing answers either way) */
    expect_int(cmd(w, "RPUSH %s x", k2), 1, "RPUSH k2");
    long long t0 = now_ms();
    redisSetTimeout(b, (struct timeval){5, 0});
    redisReply *rb = NULL;
    int rc = redisGetReply(b, (void **)&rb);
    ck_assert_msg(rc == REDIS_OK && rb && rb->type == REDIS_REPLY_ARRAY && rb->elements == 2,
                  "b's BLPOP %s after a push: %s within %lld ms (behind a's BLPOP on a's connection?)", k2,
                  rb ? describe(rb) : b->errstr, now_ms() - t0);
    freeReplyObject(rb);
    expect_int(cmd(w, "RPUSH %s y", k1), 1, "RPUSH k1");
    redisReply *ra = next_reply(a);
    ck_assert_msg(ra->type == REDIS_REPLY_ARRAY && ra->elements == 2 && strcmp(ra->element[1]->str, "y") == 0,
                  "a's BLPOP %s after a push: %s", k1, describe(ra));
    freeReplyObject(ra);
    expect_int(cmd(w, "DEL %s %s", k1, k2), 0, "nothing left");
    redisFree(n1);
    redisFree(a);
    redisFree(b);
    redisFree(w);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cluster_routing");
    harness_add_case(s, "routing", 60, setup, teardown, test_routing_10000_keys_on_their_slot_node_with_ttl);
    harness_add_case(s, "multikey", 60, setup, teardown, test_multikey_split_crossslot_and_transactions);
    harness_add_case(s, "reshard", 120, setup, teardown, test_reshard_1000_slots_under_load_no_client_error);
    harness_add_case(s, "held_migration", 60, setup, teardown, test_held_migration_reads_writes_follow_ask);
    harness_add_case(s, "failover", 90, setup, teardown, test_primary_killed_under_load_errors_only_in_flight);
    harness_add_case(s, "pingpong", 90, setup, teardown, test_slot_moved_back_and_forth_no_error_no_loop);
    harness_add_case(s, "hostnames", 60, setup_hostnames, teardown, test_hostnames_routed_moved_and_asked);
    harness_add_case(s, "repin", 60, setup, teardown, test_redirected_blocking_command_keeps_its_pin);
    int failed = harness_run(s);
    int left = cluster_leftovers();
    if (left) fprintf(stderr, "POST-CONDITION FAILED: %d redis-server(s) of this suite still run\n", left);
    return failed == 0 && left == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
