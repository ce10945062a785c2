/* test_sentinel_keygate.c: keygate in front of a live Sentinel-managed TLS primary (issue 22): keys routed to the primary the sentinels name with their TTLs, and through SENTINEL FAILOVER, a SIGKILLed primary, a SIGSTOPped one and dead sentinels, 20 clients' acknowledged writes found on the new primary; every check made on the nodes directly. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sentinel_harness.h"
#include "harness.h"
#include "load.h"
#include "procs.h"

/*
 * Each test case starts its own deployment (sentinel_harness.h: a TLS primary, 2 replicas, 3
 * sentinels) and the integration harness's two servers; each test then restarts keygate with
 * `instance durable sentinel <the 3 sentinels' TLS ports> master=<name> tls ...` in place of the
 * durable line (the sentinels listen on TLS with the same CA, so no sentinel-tls=no), the
 * harness's own single server staying `cache`. Registry: `c:` a TTL namespace (ttl=1h) and `n:`
 * counters without a TTL on durable, `k:` a TTL namespace on cache. The teardown checks that every
 * key on every running data node matches the registry (harness_check_registry_on).
 */

static struct ha *H;
static struct harness h;

#define TTL_MS 3600000LL /* c:'s and k:'s ttl=1h */

static const char registry_text[] =
    "namespace c: instance=durable ttl=1h max-ttl=1d owner=app purpose=\"TTL namespace on the Sentinel primary\"\n"
    "namespace n: instance=durable ttl=none owner=app purpose=\"counters on the Sentinel primary\"\n"
    "namespace k: instance=cache ttl=1h max-ttl=1d owner=app purpose=\"TTL namespace on the single server\"\n"
    "channel ev: instance=durable owner=app purpose=\"channels on the Sentinel primary\"\n";

/* The same with replicas=1 on durable's namespaces: a write is acknowledged once a replica has it. */
static const char registry_replicated[] =
    "namespace c: instance=durable ttl=1h max-ttl=1d owner=app replicas=1 purpose=\"TTL namespace, replicated\"\n"
    "namespace n: instance=durable ttl=none owner=app replicas=1 purpose=\"counters, replicated\"\n"
    "namespace k: instance=cache ttl=1h max-ttl=1d owner=app purpose=\"TTL namespace on the single server\"\n"
    "channel ev: instance=durable owner=app purpose=\"channels on the Sentinel primary\"\n";

/* The same with a near-cache namespace on the Sentinel primary (its stream in kg:). */
static const char registry_nearcache[] =
    "namespace n: instance=durable ttl=none owner=app purpose=\"counters on the Sentinel primary\"\n"
    "namespace u: instance=durable ttl=none near-cache=30s owner=app purpose=\"cached reads of the primary\"\n"
    "namespace kg: instance=durable ttl=none owner=keygate purpose=\"near-cache streams\"\n"
    "namespace k: instance=cache ttl=1h max-ttl=1d owner=app purpose=\"TTL namespace on the single server\"\n";

/* A user (and password) keygate_on_sentinels' probe logs in as, when the extra lines add users. */
static const char *g_probe_user, *g_probe_pass;

/* The registry keygate_on_sentinels runs keygate with (a test may switch to registry_replicated). */
static const char *g_registry = registry_text;

static void setup(void)
{
    long long t0 = now_ms();
    H = ha_start();
    ck_assert_msg(H != NULL, "ha_start: %s", ha_last_error());
    long long t1 = now_ms();
    struct harness_opts o = {.registry_text = registry_text, .admin = 1};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
    fprintf(stderr, "sentinel deployment up in %lld ms, the harness's servers and keygate in %lld ms\n", t1 - t0,
            now_ms() - t1);
}

/* The registry post-condition on every data node that runs (replicas hold the primary's keys),
 * then the harness's own on its two servers. */
static void teardown(void)
{
    int ports[HA_NODES], n = 0;
    for (int i = 0; H != NULL && i < H->nnodes; i++)
        if (ha_node_alive(H, i) && !H->nodes[i].stopped) ports[n++] = H->nodes[i].plain_port;
    if (H != NULL) harness_check_registry_on(&h, "durable", ports, n, H->password);
    harness_check_registry(&h);
    harness_stop(&h);
    ha_stop(H);
    H = NULL;
}

/* ---- helpers: keygate on the sentinels, the nodes ---- */

/* keygate restarted with durable behind the sentinels (their TLS ports) and the lines extra
 * (may be NULL); then wait until a write to durable through keygate is served. */
static void keygate_on_sentinels_after(const char *extra, int first_port);

static void keygate_on_sentinels(const char *extra)
{
    keygate_on_sentinels_after(extra, 0);
}

/* As keygate_on_sentinels, with the sentinel on first_port (when > 0) first in keygate's list. */
static void keygate_on_sentinels_after(const char *extra, int first_port)
{
    static char inst[6 * PATH_MAX];
    char first[32] = "";
    /* HA_HOSTNAMES: the seeds are named `localhost` too, and no server-name=: every certificate
     * is checked against the name keygate connects to (the seed's, the announced primary's) */
    const char *host = H->hostnames ? "localhost" : "127.0.0.1", *sn = H->hostnames ? "" : "server-name=localhost ";
    if (first_port > 0) snprintf(first, sizeof first, "%s:%d,", host, first_port);
    const struct harness_backend *c = harness_backend(&h, "cache");
    snprintf(inst, sizeof inst,
             "instance durable sentinel %s%s:%d,%s:%d,%s:%d master=%s tls "
             "ca=%s/build/certs/ca.crt %spassword-file=%s sentinel-password-file=%s\n"
             "instance cache 127.0.0.1:%d tls ca=%s/build/certs/ca.crt server-name=localhost password-file=%s\n",
             first, host, H->sentinels[0].tls_port, host, H->sentinels[1].tls_port, host, H->sentinels[2].tls_port,
             H->master_name, H->root, sn, H->pass_file, H->sentinel_pass_file, c->tls_port, h.root, c->pass_file);
    struct harness_opts o = {.registry_text = g_registry, .extra_config = extra, .instances_text = inst, .admin = 1};
    long long t0 = now_ms();
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "keygate on the sentinels: %s", h.error);
    long long t1 = now_ms(), deadline = t1 + 15000;
    redisContext *kg = harness_must_client(&h);
    if (g_probe_user) expect_status(cmd(kg, "AUTH %s %s", g_probe_user, g_probe_pass), "OK", "the probe's AUTH");
    for (;;) {
        redisReply *r = cmd(kg, "SET n:probe ready");
        int ok = r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
        char d[160];
        describe_into(r, d, sizeof d);
        freeReplyObject(r);
        if (ok) break;
        ck_assert_msg(now_ms() < deadline, "keygate does not serve durable 15 s after its start: SET answers %s", d);
        sleep_ms(50);
    }
    redisFree(kg);
    fprintf(stderr, "keygate on the sentinels: answers PING %lld ms after its start, serves durable %lld ms later\n",
            t1 - t0, now_ms() - t1);
}

static redisContext *node(int i)
{
    redisContext *c = ha_connect(H, i);
    ck_assert_msg(c != NULL, "node %d (port %d) does not answer", i, H->nodes[i].plain_port);
    return c;
}

/* The primary every sentinel names now. */
static int primary_now(void)
{
    int p = ha_primary(H);
    ck_assert_msg(p >= 0, "no primary: %s", ha_last_error());
    return p;
}

/* One command `verb key` for each of keys[0..n) on node i directly, pipelined; out[k] its
 * reply (the caller frees each). */
static void node_each(int i, const char *verb, char *const *keys, long long n, redisReply **out)
{
    redisContext *c = node(i);
    for (long long k = 0; k < n; k++) redisAppendCommand(c, "%s %s", verb, keys[k]);
    for (long long k = 0; k < n; k++) out[k] = next_reply(c);
    redisFree(c);
}

/* `verb key` on node i directly. */
static redisReply *node_cmd(int i, const char *verb, const char *key)
{
    redisContext *c = node(i);
    redisReply *r = cmd(c, "%s %s", verb, key);
    redisFree(c);
    return r;
}

static void expect_on_node(int i, const char *key, const char *want)
{
    redisReply *r = node_cmd(i, "GET", key);
    char what[160];
    snprintf(what, sizeof what, "%s on node %d", key, i);
    if (want == NULL)
        expect_nil(r, what);
    else
        expect_bulk(r, want, what);
}

static void expect_ttl_on_node(int i, const char *key)
{
    redisReply *r = node_cmd(i, "PTTL", key);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer > 0 && r->integer <= TTL_MS,
                  "%s: PTTL on node %d %s, want (0, %lld]", key, i, describe(r), TTL_MS);
    freeReplyObject(r);
}

/* Does node i's CLIENT LIST show a client that runs keygate's traffic (a normal client, not the
 * master link or a replica, whose last command is one of the load's writes or reads)? The
 * sentinels' links are named sentinel-<id>-cmd/-pubsub (their reconfigurations run in MULTI/EXEC);
 * our own connection runs CLIENT LIST. */
static int keygate_traffic_on(int i)
{
    redisContext *c = ha_connect(H, i);
    if (c == NULL) return 0;
    redisReply *r = redisCommand(c, "CLIENT LIST");
    int found = 0;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        static const char *cmds[] = {"set", "incr", "get", "exec", "multi", "pexpire", "lpush", "blpop"};
        for (char *line = strtok(r->str, "\n"); line != NULL && !found; line = strtok(NULL, "\n")) {
            const char *fl = strstr(line, " flags="), *cm = strstr(line, " cmd="), *nm = strstr(line, " name=");
            if (fl == NULL || cm == NULL || fl[7] != 'N' || (nm != NULL && strncmp(nm + 6, "sentinel-", 9) == 0))
                continue;
            for (size_t k = 0; k < sizeof cmds / sizeof cmds[0] && !found; k++) {
                size_t n = strlen(cmds[k]);
                found = strncmp(cm + 5, cmds[k], n) == 0 && (cm[5 + n] == ' ' || cm[5 + n] == '\0');
            }
        }
    }
    freeReplyObject(r);
    redisFree(c);
    return found;
}

/* Wait (timeout_ms) until a running, not stopped data node other than old carries keygate's
 * traffic; its index. */
static int wait_keygate_moved(int old, int timeout_ms, const char *what)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        for (int i = 0; i < H->nnodes; i++)
            if (i != old && ha_node_alive(H, i) && !H->nodes[i].stopped && keygate_traffic_on(i)) return i;
        ck_assert_msg(now_ms() < deadline, "%s: no node but node %d carries keygate's traffic %d ms later", what, old,
                      timeout_ms);
        sleep_ms(20);
    }
}

/* The length of keygate's log now. */
static size_t log_length(void)
{
    char *log = harness_keygate_log(&h);
    ck_assert_msg(log != NULL, "cannot read keygate's log");
    size_t n = strlen(log);
    free(log);
    return n;
}

/* Does keygate's log, past its first `from` bytes, name the port (as a number of its own)? */
static int log_names_port(int port, size_t from)
{
    char *log = harness_keygate_log(&h);
    ck_assert_msg(log != NULL, "cannot read keygate's log");
    char want[32];
    snprintf(want, sizeof want, "%d", port);
    size_t n = strlen(want);
    int found = 0;
    for (const char *p = log + (from < strlen(log) ? from : strlen(log)); !found && (p = strstr(p, want)) != NULL; p++)
        found = (p == log || p[-1] < '0' || p[-1] > '9') && (p[n] < '0' || p[n] > '9');
    free(log);
    return found;
}

/* Wait (timeout_ms) until keygate's log, past its first `from` bytes, names port. */
static void wait_log_names(int port, size_t from, int timeout_ms, const char *what)
{
    long long deadline = now_ms() + timeout_ms;
    while (!log_names_port(port, from)) {
        ck_assert_msg(now_ms() < deadline, "%s: keygate's log (%s) does not name port %d since the failure began", what,
                      h.log_file, port);
        sleep_ms(50);
    }
}

/* A client of keygate with a 30 s I/O timeout: a request may wait out a failover-hold of 15 s. */
static redisContext *long_client(void)
{
    redisContext *c = harness_client(&h);
    struct timeval tv = {30, 0};
    if (c != NULL && redisSetTimeout(c, tv) != REDIS_OK) {
        redisFree(c);
        c = NULL;
    }
    return c;
}

static redisContext *must_long_client(void)
{
    redisContext *c = long_client();
    ck_assert_msg(c != NULL, "cannot connect to keygate on 127.0.0.1:%d", h.port);
    return c;
}

/* keygate's log on stderr (a failing check's context: the heal before the next test truncates it). */
static void print_keygate_log(const char *why)
{
    char *log = harness_keygate_log(&h);
    fprintf(stderr, "---- keygate log (%s) ----\n%s---- end of keygate log ----\n", why, log ? log : "(unreadable)\n");
    free(log);
}

/* A SENTINEL FAILOVER sent to the first running sentinel. */
static void sentinel_failover(void)
{
    for (int s = 0; s < HA_SENTINELS; s++) {
        if (!ha_sentinel_alive(H, s)) continue;
        redisContext *c = ha_sentinel_connect(H, s);
        ck_assert_msg(c != NULL, "sentinel %d does not answer", s);
        expect_status(cmd(c, "SENTINEL FAILOVER %s", H->master_name), "OK", "SENTINEL FAILOVER");
        redisFree(c);
        return;
    }
    ck_abort_msg("no sentinel runs");
}

/* ---- 1. routing ---- */

#define ROUTE_KEYS 200

START_TEST(test_routing_to_the_named_primary_with_ttls)
{
    keygate_on_sentinels(NULL);
    int p = primary_now();
    ck_assert_int_eq(p, 0);
    redisContext *kg = harness_must_client(&h);
    long long t0 = now_ms();
    for (int k = 0; k < ROUTE_KEYS; k++) {
        redisAppendCommand(kg, "SET c:r:%d v%d", k, k);
        redisAppendCommand(kg, "SET n:r:%d w%d", k, k);
        redisAppendCommand(kg, "INCR n:cnt");
        redisAppendCommand(kg, "INCR c:cnt");
        redisAppendCommand(kg, "SET k:r:%d x%d", k, k);
    }
    for (int k = 0; k < ROUTE_KEYS; k++) {
        expect_status(next_reply(kg), "OK", "SET c:");
        expect_status(next_reply(kg), "OK", "SET n:");
        expect_int(next_reply(kg), k + 1, "INCR n:cnt");
        expect_int(next_reply(kg), k + 1, "INCR c:cnt (TTL-wrapped)");
        expect_status(next_reply(kg), "OK", "SET k: (cache)");
    }
    long long t_write = now_ms() - t0;
    /* on the primary directly: the values, c:'s TTL, n: without one */
    static char *ckeys[ROUTE_KEYS], *nkeys[ROUTE_KEYS];
    static redisReply *reps[ROUTE_KEYS];
    for (int k = 0; k < ROUTE_KEYS; k++) {
        ck_assert(asprintf(&ckeys[k], "c:r:%d", k) > 0);
        ck_assert(asprintf(&nkeys[k], "n:r:%d", k) > 0);
    }
    node_each(p, "GET", ckeys, ROUTE_KEYS, reps);
    for (int k = 0; k < ROUTE_KEYS; k++) {
        char want[16];
        snprintf(want, sizeof want, "v%d", k);
        expect_bulk(reps[k], want, ckeys[k]);
    }
    node_each(p, "PTTL", ckeys, ROUTE_KEYS, reps);
    for (int k = 0; k < ROUTE_KEYS; k++) {
        ck_assert_msg(reps[k]->type == REDIS_REPLY_INTEGER && reps[k]->integer > 0 && reps[k]->integer <= TTL_MS,
                      "%s: PTTL on the primary %s, want (0, %lld]", ckeys[k], describe(reps[k]), TTL_MS);
        freeReplyObject(reps[k]);
    }
    node_each(p, "GET", nkeys, ROUTE_KEYS, reps);
    for (int k = 0; k < ROUTE_KEYS; k++) {
        char want[16];
        snprintf(want, sizeof want, "w%d", k);
        expect_bulk(reps[k], want, nkeys[k]);
    }
    node_each(p, "PTTL", nkeys, ROUTE_KEYS, reps);
    for (int k = 0; k < ROUTE_KEYS; k++) expect_int(reps[k], -1, "PTTL of an n: key (ttl=none) on the primary");
    expect_on_node(p, "n:cnt", "200");
    expect_int(node_cmd(p, "PTTL", "n:cnt"), -1, "n:cnt has no TTL");
    expect_on_node(p, "c:cnt", "200");
    expect_ttl_on_node(p, "c:cnt");
    /* cache stays the single server: k: there with its TTL, on no data node; nothing of durable there */
    redisContext *cache = harness_must_direct(&h, "cache");
    expect_bulk(cmd(cache, "GET k:r:7"), "x7", "k:r:7 on the cache server");
    {
        redisReply *r = cmd(cache, "PTTL k:r:7");
        ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer > 0 && r->integer <= TTL_MS, "k:r:7 PTTL %s",
                      describe(r));
        freeReplyObject(r);
    }
    expect_int(cmd(cache, "EXISTS c:r:7 n:r:7 n:cnt"), 0, "no durable key on the cache server");
    redisFree(cache);
    expect_on_node(p, "k:r:7", NULL);
    redisContext *old = harness_must_direct(&h, "durable");
    expect_int(cmd(old, "DBSIZE"), 0, "the harness's own durable server, replaced by the sentinel line, is empty");
    redisFree(old);
    /* reads through keygate */
    t0 = now_ms();
    for (int k = 0; k < ROUTE_KEYS; k++) redisAppendCommand(kg, "GET c:r:%d", k);
    for (int k = 0; k < ROUTE_KEYS; k++) {
        char want[16];
        snprintf(want, sizeof want, "v%d", k);
        expect_bulk(next_reply(kg), want, ckeys[k]);
    }
    long long t_read = now_ms() - t0;
    /* the replicas have it all too (WAIT on the primary): keygate wrote on the primary only,
     * a replica refuses writes */
    {
        redisContext *c = node(p);
        redisReply *r = cmd(c, "WAIT 2 5000");
        ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer == 2, "WAIT 2: %s", describe(r));
        freeReplyObject(r);
        redisFree(c);
    }
    for (int i = 0; i < H->nnodes; i++)
        if (i != p) expect_on_node(i, "n:cnt", "200");
    ck_assert_msg(keygate_traffic_on(p), "keygate's connection is not on the primary");
    for (int k = 0; k < ROUTE_KEYS; k++) {
        free(ckeys[k]);
        free(nkeys[k]);
    }
    redisFree(kg);
    fprintf(stderr,
            "routing: %d x (SET c:, SET n:, INCR n:, INCR c:, SET k:) pipelined in %lld ms, %d GETs in %lld ms; all on "
            "node %d (the sentinels' primary), c: with 0 < PTTL <= %lld, n: without, k: on the cache server\n",
            ROUTE_KEYS, t_write, ROUTE_KEYS, t_read, p, TTL_MS);
}
END_TEST

/* ---- the load: 20 client threads through keygate (tests/common/load.h) ----
 *
 * Lossy: a counter answered below its count is counted as a regression (an acknowledged
 * increment lost), not an error: the test asserts on the count. Each thread also measures its
 * longest stall (the time between two batch completions) and when it ended. */

static void sentinel_load_start(void)
{
    struct load_opts o = {.connect = long_client, .multi_key = "c:m:%d", .lossy = 1};
    load_start(&o);
}

/* What the replicas are known to have: the load's counts when a marker written on the primary
 * afterwards was acknowledged by both replicas (WAIT 2). */
static void load_snapshot(struct load_snap *snap, int primary)
{
    load_snap_take(snap);
    redisContext *c = node(primary);
    expect_status(cmd(c, "SET c:marker 1 PX %lld", TTL_MS), "OK", "the marker on the primary");
    redisReply *r = cmd(c, "WAIT 2 5000");
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer == 2, "WAIT 2 after the marker: %s", describe(r));
    freeReplyObject(r);
    redisFree(c);
}

/*
 * The load's keys read on node p directly: each counter's value v within [low, acknowledged +
 * errored], low its count in snap (snap NULL: 0; the caller asserts on the shortfall); every
 * acknowledged SET has its value or is missing (counted into *lost_sets; with snap, only SETs of
 * batches completed after it may be); c: counters carry their TTL, n: ones none. Returns the counters' total shortfall against
 * their acknowledged counts; *short_counters: how many counters are short.
 */
static long long load_verify(int p, const struct load_snap *snap, long long *lost_sets, long long *checked,
                             long long *short_counters)
{
    static char *ckeys[LOAD_THREADS * LOAD_NCOUNTERS];
    static redisReply *creps[LOAD_THREADS * LOAD_NCOUNTERS], *ttls[LOAD_THREADS * LOAD_NCOUNTERS];
    int nc = 0;
    for (int k = 0; k < LOAD_THREADS; k++)
        for (int m = 0; m < LOAD_NCOUNTERS; m++) ckeys[nc++] = load_counter_key(k, m);
    node_each(p, "GET", ckeys, nc, creps);
    node_each(p, "PTTL", ckeys, nc, ttls);
    long long shortfall = 0;
    *short_counters = 0;
    for (int k = 0, x = 0; k < LOAD_THREADS; k++) {
        const struct load_thread *t = &load_threads[k];
        for (int m = 0; m < LOAD_NCOUNTERS; m++, x++) {
            long long acked = load_counter_acked(t, m), errs = load_counter_errors(t, m);
            long long low = snap == NULL ? 0 : load_snap_counter(snap, k, m);
            const redisReply *r = creps[x];
            long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : r->type == REDIS_REPLY_NIL ? 0 : -1;
            ck_assert_msg(v >= low && v <= acked + errs,
                          "%s on node %d: %s, want within [%lld, %lld] (acknowledged %lld, errored %lld)", ckeys[x], p,
                          describe(r), low, acked + errs, acked, errs);
            if (v < acked) {
                shortfall += acked - v;
                (*short_counters)++;
            }
            if (m >= LOAD_COUNTERS && v > 0)
                ck_assert_msg(ttls[x]->type == REDIS_REPLY_INTEGER && ttls[x]->integer > 0 &&
                                  ttls[x]->integer <= TTL_MS,
                              "%s on node %d: PTTL %s, want (0, %lld]", ckeys[x], p, describe(ttls[x]), TTL_MS);
            if (m < LOAD_COUNTERS && v > 0)
                expect_int(ttls[x], -1, "an n: counter has no TTL");
            else
                freeReplyObject(ttls[x]);
            freeReplyObject(creps[x]);
            free(ckeys[x]);
        }
    }
    long long n;
    char **keys = load_acked_set_keys(&n);
    redisReply **reps = malloc(sizeof *reps * (size_t)(n + 1));
    ck_assert(reps != NULL);
    node_each(p, "GET", keys, n, reps);
    *lost_sets = 0;
    for (long long x = 0; x < n; x++) {
        int id;
        long long i;
        ck_assert(sscanf(keys[x], "c:ld:%d:%lld", &id, &i) == 2);
        char want[48];
        snprintf(want, sizeof want, "v%d:%lld", id, i);
        if (reps[x]->type == REDIS_REPLY_NIL) {
            ck_assert_msg(snap == NULL || i >= snap->sets_done[id],
                          "acknowledged SET %s, before the snapshot the replicas had, is not on node %d", keys[x], p);
            (*lost_sets)++;
        } else {
            ck_assert_msg(reps[x]->type == REDIS_REPLY_STRING && strcmp(reps[x]->str, want) == 0,
                          "acknowledged SET %s: on node %d %s, want %s", keys[x], p, describe(reps[x]), want);
        }
        freeReplyObject(reps[x]);
        free(keys[x]);
    }
    free(keys);
    free(reps);
    *checked = n;
    return shortfall;
}

/* ---- 2. SENTINEL FAILOVER under load: zero client-visible errors, nothing acknowledged lost ---- */

START_TEST(test_sentinel_failover_under_load_no_error_nothing_lost)
{
    keygate_on_sentinels(NULL);
    int old = primary_now();
    sentinel_load_start();
    load_wait_batches(300, 10000, "the load before the failover");
    size_t log_from = log_length();
    long long t_failover = now_ms();
    long long at = load_elapsed_ms();
    sentinel_failover();
    int moved = wait_keygate_moved(old, 30000, "SENTINEL FAILOVER");
    long long t_moved = now_ms() - t_failover;
    int p = -1;
    ck_assert_msg(ha_wait_promoted(H, old, 30000, &p) == 0, "%s", ha_last_error());
    long long t_confirmed = now_ms() - t_failover;
    int q = -1;
    ck_assert_msg(ha_wait_settled(H, 40000, &q) == 0, "%s", ha_last_error());
    long long t_settled = now_ms() - t_failover;
    if (q != p) fprintf(stderr, "failover: the sentinels named node %d first, then settled on node %d\n", p, q);
    load_wait_batches(20, 15000, "the load after the failover settled");
    load_stop();
    struct load_sum sum = load_sum();
    wait_log_names(H->nodes[q].tls_port, log_from, 5000, "the switch to the new primary");
    fprintf(stderr,
            "SENTINEL FAILOVER at %lld ms of load: keygate's traffic on node %d %lld ms later, every sentinel naming "
            "node %d at %lld ms, settled (old primary node %d a replica of node %d) at %lld ms; longest client stall "
            "%lld ms (ended at %lld ms of load); %d clients: %lld batches, %lld SETs (%lld acknowledged), %lld INCRs, "
            "%lld MULTI/EXEC, %lld GETs; %lld client-visible errors (%lld -READONLY), %lld INCRs answered below the "
            "count, %lld GETs of an acknowledged SET answered nil\n",
            at, moved, t_moved, p, t_confirmed, old, q, t_settled, sum.max_stall_ms, sum.stall_end_ms, LOAD_THREADS,
            sum.batches, sum.sets, sum.acked, sum.incrs, sum.multis, sum.gets, sum.errors, sum.readonly,
            sum.regressions, sum.lost_reads);
    long long lost_sets = 0, checked = 0, short_counters = 0;
    long long shortfall = load_verify(q, NULL, &lost_sets, &checked, &short_counters);
    fprintf(stderr,
            "failover: on node %d %lld of %lld acknowledged SETs missing, %lld of %d counters short of their "
            "acknowledged counts by %lld in all\n",
            q, lost_sets, checked, short_counters, LOAD_THREADS * (2 * LOAD_COUNTERS + 1), shortfall);
    ck_assert_msg(sum.errors == 0, "%lld client-visible errors through a SENTINEL FAILOVER (threads above)",
                  sum.errors);
    ck_assert_msg(sum.regressions == 0 && sum.lost_reads == 0,
                  "%lld INCRs answered below their acknowledged count, %lld GETs of acknowledged SETs answered nil: "
                  "acknowledged writes lost in the failover",
                  sum.regressions, sum.lost_reads);
    ck_assert_msg(shortfall == 0 && lost_sets == 0,
                  "acknowledged writes missing on the new primary: %lld increments, %lld SETs", shortfall, lost_sets);
    load_free();
}
END_TEST

/* ---- 3. the primary SIGKILLed under load ---- */

/* The primary SIGKILLed under the load (with `replicated`: replicas=1 on the counters' namespaces,
 * and then no acknowledged INCR may be lost). */
static void kill_under_load(int replicated)
{
    g_registry = replicated ? registry_replicated : registry_text;
    keygate_on_sentinels(replicated ? "failover-hold 15s\nreplicas-timeout 2s\n" : "failover-hold 15s\n");
    int old = primary_now();
    static struct load_snap snap;
    sentinel_load_start();
    load_wait_batches(300, 10000, "the load before the kill");
    load_snapshot(&snap, old);
    size_t log_from = log_length();
    long long t_kill = now_ms(), at = load_elapsed_ms();
    ck_assert_msg(ha_node_kill(H, old) == 0, "%s", ha_last_error());
    int moved = wait_keygate_moved(old, 30000, "SIGKILL of the primary");
    long long t_moved = now_ms() - t_kill;
    /* keygate writes to the promoted replica: from here on, no batch sent may fail */
    load_mark();
    int p = -1;
    ck_assert_msg(ha_wait_promoted(H, old, 30000, &p) == 0, "%s", ha_last_error());
    long long t_confirmed = now_ms() - t_kill;
    int q = -1;
    ck_assert_msg(ha_wait_settled(H, 30000, &q) == 0, "%s", ha_last_error());
    if (q != p) fprintf(stderr, "kill: the sentinels named node %d first, then settled on node %d\n", p, q);
    wait_log_names(H->nodes[q].tls_port, log_from, 5000, "the switch to the promoted replica");
    load_wait_batches(20, 15000, "the load after the promotion");
    load_stop();
    struct load_sum sum = load_sum();
    long long window = 0;
    for (int k = 0; k < LOAD_THREADS; k++) {
        for (int m = 0; m < LOAD_NCOUNTERS; m++)
            window += load_counter_acked(&load_threads[k], m) - load_snap_counter(&snap, k, m);
    }
    long long service = sum.stall_end_ms > sum.last_error_done_ms ? sum.stall_end_ms : sum.last_error_done_ms;
    fprintf(stderr,
            "kill: node %d SIGKILLed at %lld ms of load; keygate's traffic on node %d %lld ms later, every sentinel "
            "naming node %d at %lld ms; longest client stall %lld ms, full service again %lld ms after the kill; "
            "%d clients: %lld batches, %lld SETs (%lld acknowledged), %lld INCRs, %lld MULTI/EXEC; %lld "
            "client-visible errors (bound %d), at most %lld failed batch per client, %lld in batches sent once keygate "
            "wrote to "
            "the promoted replica\n",
            old, at, moved, t_moved, p, t_confirmed, sum.max_stall_ms, service - at, LOAD_THREADS, sum.batches,
            sum.sets, sum.acked, sum.incrs, sum.multis, sum.errors, LOAD_THREADS * LOAD_MAX_BATCH,
            sum.max_error_batches, sum.errors_after_mark);
    long long lost_sets = 0, checked = 0, short_counters = 0;
    long long shortfall = load_verify(q, &snap, &lost_sets, &checked, &short_counters);
    fprintf(stderr,
            "kill: on node %d counters short of their acknowledged counts by %lld (%lld counters; async replication "
            "may lose up to %lld, the increments acknowledged after the replicas were known to have the rest); %lld "
            "of %lld acknowledged SETs lost; %lld INCRs answered below the count, %lld GETs of an acknowledged SET "
            "answered nil\n",
            q, shortfall, short_counters, window, lost_sets, checked, sum.regressions, sum.lost_reads);
    ck_assert_msg(sum.max_error_batches <= 1, "a client had %lld failed batches: only the one in flight may fail",
                  sum.max_error_batches);
    ck_assert_msg(sum.errors <= LOAD_THREADS * LOAD_MAX_BATCH, "%lld errors: more than the requests in flight (%d)",
                  sum.errors, LOAD_THREADS * LOAD_MAX_BATCH);
    ck_assert_msg(sum.errors_after_mark == 0, "%lld errors in batches sent after the promotion", sum.errors_after_mark);
    ck_assert_msg(shortfall <= window,
                  "counters lost %lld increments, more than the %lld acknowledged after the snapshot", shortfall,
                  window);
    if (replicated) /* acknowledged means a replica had it: the promoted one, the most advanced, has it */
        ck_assert_msg(shortfall == 0, "replicas=1: %lld acknowledged increments lost (%lld counters short)", shortfall,
                      short_counters);
    load_free();
}

START_TEST(test_primary_killed_under_load_errors_only_in_flight)
{
    kill_under_load(0);
}
END_TEST

START_TEST(test_primary_killed_with_replicas_1_nothing_acknowledged_lost)
{
    kill_under_load(1);
}
END_TEST

/* ---- 4. the primary SIGSTOPped until the sentinels fail it over, then SIGCONT ---- */

/* n writes through keygate on one connection, pipelined: INCR n:burst:<tag>, SET c:burst:<tag>:i;
 * every answer checked; the number of errors (-READONLY counted into *readonly). */
static long long burst(const char *tag, int n, long long *readonly, char *first, size_t len)
{
    redisContext *kg = must_long_client();
    for (int i = 0; i < n; i++) {
        redisAppendCommand(kg, "INCR n:burst:%s", tag);
        redisAppendCommand(kg, "SET c:burst:%s:%d %d", tag, i, i);
    }
    long long errors = 0;
    for (int i = 0; i < n; i++) {
        redisReply *a = next_reply(kg), *b = next_reply(kg);
        int ok = a->type == REDIS_REPLY_INTEGER && a->integer == i + 1 && b->type == REDIS_REPLY_STATUS &&
                 strcmp(b->str, "OK") == 0;
        if (!ok) {
            const redisReply *bad = a->type == REDIS_REPLY_INTEGER && a->integer == i + 1 ? b : a;
            if (bad->type == REDIS_REPLY_ERROR && strncmp(bad->str, "READONLY", 8) == 0 && readonly != NULL)
                (*readonly)++;
            if (errors++ == 0 && first != NULL) describe_into(bad, first, len);
        }
        freeReplyObject(a);
        freeReplyObject(b);
    }
    redisFree(kg);
    return errors;
}

/* The burst landed on node p: n:burst:<tag> is n there, c:burst:<tag>:0 and :n-1 with their TTL. */
static void burst_on(int p, const char *tag, int n)
{
    char key[64], want[16];
    snprintf(key, sizeof key, "n:burst:%s", tag);
    snprintf(want, sizeof want, "%d", n);
    expect_on_node(p, key, want);
    snprintf(key, sizeof key, "c:burst:%s:%d", tag, n - 1);
    snprintf(want, sizeof want, "%d", n - 1);
    expect_on_node(p, key, want);
    expect_ttl_on_node(p, key);
}

/* Probes: one INCR n:stop:K on a connection of its own, sent every 100 ms from the SIGSTOP on,
 * answers read as they come: when keygate serves writes again, and what the ones before got. */
#define PROBES 400

struct probe {
    redisContext *c;          /* NULL once answered */
    long long sent, answered; /* ms since the SIGSTOP */
    int ok;                   /* answered :1 */
    char reply[128];
};

static struct probe g_probes[PROBES];

/* Read the probe's answer if it came (wait: block until it does). */
static void probe_read(struct probe *pr, long long t0, int wait)
{
    if (pr->c == NULL) return;
    struct pollfd pfd = {.fd = pr->c->fd, .events = POLLIN};
    if (!wait && poll(&pfd, 1, 0) <= 0) return;
    redisReply *r = NULL;
    if (redisGetReply(pr->c, (void **)&r) != REDIS_OK || r == NULL) {
        snprintf(pr->reply, sizeof pr->reply, "connection: %.80s", pr->c->errstr);
    } else {
        pr->ok = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        describe_into(r, pr->reply, sizeof pr->reply);
        freeReplyObject(r);
    }
    pr->answered = now_ms() - t0;
    redisFree(pr->c);
    pr->c = NULL;
}

START_TEST(test_primary_sigstopped_keygate_follows_then_old_one_a_replica)
{
    keygate_on_sentinels("failover-hold 15s\n");
    int old = primary_now();
    redisContext *kg = must_long_client();
    long long t0 = now_ms();
    ck_assert_msg(ha_node_pause(H, old) == 0, "%s", ha_last_error());
    /* a probe every 100 ms until one is served, then every answer collected */
    int n = 0, first_ok = -1;
    long long next = 0, deadline = t0 + 45000;
    while (first_ok < 0) {
        long long now = now_ms();
        ck_assert_msg(now < deadline && n < PROBES,
                      "no write served within %lld ms of the primary's SIGSTOP (%d probes)", now - t0, n);
        if (now - t0 >= next) {
            struct probe *pr = &g_probes[n];
            pr->c = must_long_client();
            redisAppendCommand(pr->c, "INCR n:stop:%d", n);
            send_appended(pr->c, "a probe");
            pr->sent = now - t0;
            n++;
            next += 100;
        }
        for (int k = 0; k < n; k++) {
            probe_read(&g_probes[k], t0, 0);
            if (g_probes[k].ok && first_ok < 0) first_ok = k;
        }
        sleep_ms(5);
    }
    for (int k = 0; k < n; k++) probe_read(&g_probes[k], t0, 1);
    int errors = 0, errors_after = 0, earliest_ok = -1, last_error = -1;
    for (int k = 0; k < n; k++) {
        if (g_probes[k].ok && earliest_ok < 0) earliest_ok = k;
        if (!g_probes[k].ok) {
            errors++;
            last_error = k;
        }
    }
    for (int k = earliest_ok; k < n; k++) errors_after += !g_probes[k].ok;
    for (int k = 0; k < n; k++)
        if (!g_probes[k].ok && (k < 3 || k == last_error))
            fprintf(stderr, "  probe %d sent at %lld ms answered at %lld ms: %s\n", k, g_probes[k].sent,
                    g_probes[k].answered, g_probes[k].reply);
    long long first_ok_sent = g_probes[earliest_ok].sent, first_ok_answered = g_probes[first_ok].answered;
    int p = -1;
    ck_assert_msg(ha_wait_promoted(H, old, 30000, &p) == 0, "%s", ha_last_error());
    long long t_promoted = now_ms() - t0;
    ck_assert_msg(ha_node_role(H, p, NULL, NULL) == HA_ROLE_PRIMARY, "node %d is the primary", p);
    long long e2 = 0, ro = 0;
    char first2[160] = "";
    long long t1 = now_ms();
    e2 = burst("paused", 500, &ro, first2, sizeof first2);
    long long t_burst1 = now_ms() - t1;
    fprintf(stderr,
            "SIGSTOP of node %d: %d probes (one INCR each, every 100 ms): the first write served was answered %lld ms "
            "after the SIGSTOP, the earliest sent that was served was sent at %lld ms; %d probes failed (the last "
            "sent at %lld ms), %d of those sent after it; every sentinel naming node %d at %lld ms; a burst of 500 "
            "INCR+SET while the old primary is still stopped: %lld errors in %lld ms\n",
            old, n, first_ok_answered, first_ok_sent, errors, last_error >= 0 ? g_probes[last_error].sent : -1LL,
            errors_after, p, t_promoted, e2, t_burst1);
    ck_assert_msg(errors_after == 0, "%d probes sent after the earliest one served failed", errors_after);
    for (int k = 0; k < n; k++)
        if (g_probes[k].ok) {
            char key[32];
            snprintf(key, sizeof key, "n:stop:%d", k);
            expect_on_node(p, key, "1");
        }
    ck_assert_msg(e2 == 0, "%lld errors in a burst on the new primary (the old one stopped): %s", e2, first2);
    burst_on(p, "paused", 500);
    /* SIGCONT: the old primary is made a replica of the new one */
    long long t2 = now_ms();
    ck_assert_msg(ha_node_resume(H, old) == 0, "%s", ha_last_error());
    /* what keygate wrote to the stopped primary runs there now, before our EXISTS (read after it):
     * a probe answered by the new primary must not be among it (a write sent twice) */
    {
        int twice = 0, failed_ran = 0;
        redisContext *o = node(old);
        for (int k = 0; k < n; k++) redisAppendCommand(o, "EXISTS n:stop:%d", k);
        for (int k = 0; k < n; k++) {
            redisReply *r = next_reply(o);
            if (r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
                if (g_probes[k].ok && twice++ < 3)
                    fprintf(stderr, "  probe %d (sent at %lld ms) answered %s through keygate also ran on node %d\n", k,
                            g_probes[k].sent, g_probes[k].reply, old);
                failed_ran += !g_probes[k].ok;
            }
            freeReplyObject(r);
        }
        redisFree(o);
        fprintf(stderr, "SIGCONT of node %d: %d failed probes ran there once it woke, %d served probes ran there too\n",
                old, failed_ran, twice);
        ck_assert_msg(twice == 0, "%d probes served by the new primary also ran on the old primary: sent twice", twice);
    }
    /* writes while the old primary wakes up still saying master: they must land on the new one */
    long long e3 = 0, ro3 = 0;
    char first3[160] = "";
    e3 = burst("waking", 500, &ro3, first3, sizeof first3);
    int q = -1;
    ck_assert_msg(ha_wait_settled(H, 40000, &q) == 0, "%s", ha_last_error());
    long long t_settled = now_ms() - t2;
    int up = 0, from = -1;
    ck_assert_msg(ha_node_role(H, old, &from, &up) == HA_ROLE_REPLICA, "the old primary node %d is a replica", old);
    long long e4 = 0, ro4 = 0;
    char first4[160] = "";
    t1 = now_ms();
    e4 = burst("after", 1000, &ro4, first4, sizeof first4);
    long long t_burst2 = now_ms() - t1;
    fprintf(stderr,
            "SIGCONT of node %d: 500 INCR+SET sent at once: %lld errors (%lld -READONLY); node %d a replica of port %d "
            "%lld ms after the SIGCONT (primary node %d); a burst of 1000 INCR+SET: %lld errors (%lld -READONLY) in "
            "%lld ms\n",
            old, e3, ro3, old, from, t_settled, q, e4, ro4, t_burst2);
    ck_assert_msg(e3 == 0, "%lld errors in the burst sent at the SIGCONT (%lld -READONLY): %s", e3, ro3, first3);
    ck_assert_msg(e4 == 0, "%lld errors in the burst after the old primary became a replica (%lld -READONLY): %s", e4,
                  ro4, first4);
    if (q == p) burst_on(q, "waking", 500);
    burst_on(q, "after", 1000);
    redisFree(kg);
}
END_TEST

/* ---- 5. sentinels killed: no effect on traffic ---- */

START_TEST(test_sentinels_killed_traffic_unaffected)
{
    keygate_on_sentinels(NULL);
    int p = primary_now();
    char first[160] = "";
    long long t0 = now_ms();
    long long e0 = burst("base", 1000, NULL, first, sizeof first);
    ck_assert_msg(e0 == 0, "%lld errors with every sentinel up: %s", e0, first);
    ck_assert_msg(ha_sentinel_kill(H, 0) == 0, "%s", ha_last_error());
    long long t1 = now_ms();
    long long e1 = burst("one_down", 1000, NULL, first, sizeof first);
    long long t_one = now_ms() - t1;
    ck_assert_msg(e1 == 0, "%lld errors with sentinel 0 killed: %s", e1, first);
    burst_on(p, "one_down", 1000);
    /* the scenario, not a wait: 1.5 s of the checker's 1 s rounds and a listener's reconnects
     * without sentinel 0 (nothing of it is logged while another sentinel answers) */
    sleep_ms(1500);
    long long e1b = burst("one_down_later", 1000, NULL, first, sizeof first);
    ck_assert_msg(e1b == 0, "%lld errors 1.5 s after sentinel 0's kill: %s", e1b, first);
    size_t log_from = log_length();
    ck_assert_msg(ha_sentinel_kill(H, 1) == 0, "%s", ha_last_error());
    ck_assert_msg(ha_sentinel_kill(H, 2) == 0, "%s", ha_last_error());
    long long t2 = now_ms();
    long long e2 = burst("all_down", 1000, NULL, first, sizeof first);
    long long t_all = now_ms() - t2;
    ck_assert_msg(e2 == 0, "%lld errors with every sentinel killed: %s", e2, first);
    burst_on(p, "all_down", 1000);
    /* keygate has seen that no sentinel answers (its checker logs it once) */
    for (long long end = now_ms() + 10000;;) {
        char *log = harness_keygate_log(&h);
        int seen = log && strlen(log) > log_from && strstr(log + log_from, "no sentinel answers") != NULL;
        free(log);
        if (seen) break;
        ck_assert_msg(now_ms() < end, "keygate's log (%s) does not say within 10 s that no sentinel answers",
                      h.log_file);
        sleep_ms(50);
    }
    long long e3 = burst("all_down_later", 1000, NULL, first, sizeof first);
    ck_assert_msg(e3 == 0, "%lld errors once keygate saw no sentinel answer: %s", e3, first);
    burst_on(p, "all_down_later", 1000);
    /* keygate still runs and answers; the sentinels come back and nothing changes */
    for (int s = 0; s < HA_SENTINELS; s++) ck_assert_msg(ha_sentinel_restart(H, s) == 0, "%s", ha_last_error());
    int q = -1;
    ck_assert_msg(ha_wait_settled(H, 30000, &q) == 0, "%s", ha_last_error());
    ck_assert_int_eq(q, p);
    long long e4 = burst("back", 1000, NULL, first, sizeof first);
    ck_assert_msg(e4 == 0, "%lld errors after the sentinels came back: %s", e4, first);
    burst_on(p, "back", 1000);
    fprintf(stderr,
            "sentinels: 1000 INCR+SET bursts: %lld errors with all up, %lld with one killed (%lld ms), %lld 1.5 s "
            "later, %lld with all 3 killed (%lld ms), %lld once keygate logged that none answers, %lld once they were "
            "back; %lld ms in all\n",
            e0, e1, t_one, e1b, e2, t_all, e3, e4, now_ms() - t0);
}
END_TEST

/* ---- 6. a blocked BLPOP and a WATCH across a failover ---- */

/* A client sending BLPOP key 50 through keygate (60 s I/O timeout). */
static redisContext *blpop_client(const char *key)
{
    redisContext *c = harness_must_client(&h);
    struct timeval tv = {60, 0};
    ck_assert_int_eq(redisSetTimeout(c, tv), REDIS_OK);
    redisAppendCommand(c, "BLPOP %s 50", key);
    send_appended(c, "BLPOP");
    return c;
}

/* Wait (5 s) until node i has a client blocked in BLPOP (CLIENT LIST: cmd=blpop). */
static void wait_blocked_on(int i)
{
    redisContext *c = node(i);
    long long deadline = now_ms() + 5000;
    for (;;) {
        redisReply *r = cmd(c, "CLIENT LIST");
        int found = r->type == REDIS_REPLY_STRING && strstr(r->str, "cmd=blpop") != NULL;
        freeReplyObject(r);
        if (found) break;
        ck_assert_msg(now_ms() < deadline, "no client blocked in BLPOP on node %d", i);
        sleep_ms(20);
    }
    redisFree(c);
}

/* The BLPOP on c answers [key, want] (else its answer goes into bad, and 0 is returned); *took:
 * the milliseconds from `since`. */
static int popped(redisContext *c, const char *key, const char *want, long long since, long long *took, char *bad,
                  size_t len)
{
    redisReply *b = next_reply(c);
    *took = now_ms() - since;
    int ok = b->type == REDIS_REPLY_ARRAY && b->elements == 2 && b->element[1]->type == REDIS_REPLY_STRING &&
             strcmp(b->element[0]->str, key) == 0 && strcmp(b->element[1]->str, want) == 0;
    describe_into(b, bad, len);
    freeReplyObject(b);
    expect_status(cmd(c, "PING"), "PONG", "the BLPOP's connection serves after it");
    return ok;
}

/* SENTINEL FAILOVER, then wait until every sentinel names a new primary (*p, at *t_promoted ms),
 * call `during` (may be NULL), and wait until the old primary is its replica (*q, at *t_settled). */
static void failover_with(int old, void (*during)(void), int *p, long long *t_promoted, int *q, long long *t_settled)
{
    long long t0 = now_ms();
    sentinel_failover();
    ck_assert_msg(ha_wait_promoted(H, old, 30000, p) == 0, "%s", ha_last_error());
    *t_promoted = now_ms() - t0;
    if (during != NULL) during();
    ck_assert_msg(ha_wait_settled(H, 40000, q) == 0, "%s", ha_last_error());
    *t_settled = now_ms() - t0;
    if (*q != *p) fprintf(stderr, "the sentinels named node %d first, then settled on node %d\n", *p, *q);
}

static redisContext *g_during; /* the BLPOP sent during the failover */

static void send_blpop_during(void)
{
    g_during = blpop_client("n:blk:during");
}

/* A BLPOP blocked on the primary before a SENTINEL FAILOVER and one sent while it is under way
 * (every sentinel names the new primary, the old one not demoted yet: Sentinel waits some 8 s)
 * get the values pushed on the new primary directly. Sentinel demotes the old primary with
 * MULTI / REPLICAOF / CONFIG REWRITE / CLIENT KILL TYPE normal / EXEC: the blocked BLPOP's
 * connection is closed by the server, its -UNBLOCKED never sent, so keygate cannot tell whether
 * it popped: the BLPOP blocked before answers -UNAVAILABLE (never silence, never a value twice),
 * and its list keeps the value pushed on the new primary (README, High availability). */
START_TEST(test_blpop_across_a_failover_gets_the_value_pushed_on_the_new_primary)
{
    keygate_on_sentinels(NULL);
    int old = primary_now();
    redisContext *before = blpop_client("n:blk:before");
    wait_blocked_on(old);
    int p, q;
    long long t_promoted, t_settled;
    failover_with(old, send_blpop_during, &p, &t_promoted, &q, &t_settled);
    long long t_push = now_ms();
    {
        redisContext *c = node(q);
        expect_int(cmd(c, "LPUSH n:blk:before pushed-before"), 1, "LPUSH on the new primary");
        expect_int(cmd(c, "LPUSH n:blk:during pushed-during"), 1, "LPUSH on the new primary");
        redisFree(c);
    }
    long long t_before, t_during;
    char r_before[160], r_during[160];
    int got_before = popped(before, "n:blk:before", "pushed-before", t_push, &t_before, r_before, sizeof r_before);
    int ok_before = got_before || strstr(r_before, "UNAVAILABLE") != NULL;
    int ok_during = popped(g_during, "n:blk:during", "pushed-during", t_push, &t_during, r_during, sizeof r_during);
    redisFree(before);
    redisFree(g_during);
    redisReply *left_before = node_cmd(q, "LLEN", "n:blk:before"), *left_during = node_cmd(q, "LLEN", "n:blk:during");
    fprintf(stderr,
            "blocking: SENTINEL FAILOVER node %d -> %d (every sentinel naming it at %lld ms, settled at %lld ms): "
            "the BLPOP blocked before it answered %s (read %lld ms after the push; LLEN of its list on the new "
            "primary now %lld), the BLPOP sent during it %s (%lld ms; LLEN %lld)\n",
            old, q, t_promoted, t_settled, r_before, t_before, left_before->integer, r_during, t_during,
            left_during->integer);
    if (!ok_before || !ok_during) print_keygate_log("BLPOP across a failover");
    ck_assert_msg(ok_before,
                  "the BLPOP blocked before the failover answered %s, want -UNAVAILABLE (its connection closed by "
                  "the demotion) or [n:blk:before, pushed-before]",
                  r_before);
    ck_assert_msg(ok_during, "the BLPOP sent during the failover answered %s, want [n:blk:during, pushed-during]",
                  r_during);
    expect_int(left_before, got_before ? 0 : 1, "the list on the new primary: popped only by a BLPOP that answered");
    expect_int(left_during, 0, "the list was popped on the new primary");
}
END_TEST

/* WATCH and MULTI before a SENTINEL FAILOVER, EXEC after it: nil (the WATCH broke, nothing ran)
 * or the transaction's result (it ran, on the new primary), never an error. */
START_TEST(test_watch_across_a_failover_exec_nil_or_runs)
{
    keygate_on_sentinels(NULL);
    int old = primary_now();
    {
        redisContext *c = node(old);
        expect_status(cmd(c, "SET n:w 10"), "OK", "n:w on the primary");
        redisReply *r = cmd(c, "WAIT 2 5000");
        ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer == 2, "WAIT 2: %s", describe(r));
        freeReplyObject(r);
        redisFree(c);
    }
    redisContext *w = harness_must_client(&h);
    expect_status(cmd(w, "WATCH n:w"), "OK", "WATCH");
    expect_bulk(cmd(w, "GET n:w"), "10", "GET under WATCH");
    expect_status(cmd(w, "MULTI"), "OK", "MULTI");
    expect_status(cmd(w, "INCR n:w"), "QUEUED", "INCR in MULTI");
    int p, q;
    long long t_promoted, t_settled;
    failover_with(old, NULL, &p, &t_promoted, &q, &t_settled);
    redisReply *x = cmd(w, "EXEC");
    char exec_reply[160];
    describe_into(x, exec_reply, sizeof exec_reply);
    int ran = x->type == REDIS_REPLY_ARRAY;
    int exec_ok =
        x->type == REDIS_REPLY_NIL ||
        (ran && x->elements == 1 && x->element[0]->type == REDIS_REPLY_INTEGER && x->element[0]->integer == 11);
    freeReplyObject(x);
    expect_status(cmd(w, "PING"), "PONG", "the watcher's connection serves after EXEC");
    /* the retry a client makes after a nil EXEC runs on the new primary */
    expect_status(cmd(w, "WATCH n:w"), "OK", "WATCH again");
    expect_status(cmd(w, "MULTI"), "OK", "MULTI again");
    expect_status(cmd(w, "INCR n:w"), "QUEUED", "INCR in MULTI again");
    redisReply *y = cmd(w, "EXEC");
    char retry_reply[160];
    describe_into(y, retry_reply, sizeof retry_reply);
    freeReplyObject(y);
    redisFree(w);
    redisReply *nw = node_cmd(q, "GET", "n:w");
    char nw_value[64];
    describe_into(nw, nw_value, sizeof nw_value);
    fprintf(stderr,
            "watch: SENTINEL FAILOVER node %d -> %d (every sentinel naming it at %lld ms, settled at %lld ms): EXEC "
            "under a WATCH taken before it answered %s; the retried WATCH/MULTI/INCR/EXEC %s; n:w on the new primary "
            "%s\n",
            old, q, t_promoted, t_settled, exec_reply, retry_reply, nw_value);
    if (!exec_ok) print_keygate_log("WATCH across a failover");
    ck_assert_msg(exec_ok, "EXEC across the failover answered %s: want nil (the WATCH broke) or [11] (it ran)",
                  exec_reply);
    char want_retry[32];
    snprintf(want_retry, sizeof want_retry, "array of 1 [:%d]", ran ? 12 : 11);
    ck_assert_msg(strcmp(retry_reply, want_retry) == 0, "the retried transaction answered %s, want %s", retry_reply,
                  want_retry);
    ck_assert_msg(nw->type == REDIS_REPLY_STRING && atoi(nw->str) == (ran ? 12 : 11), "n:w on the new primary %s",
                  nw_value);
    freeReplyObject(nw);
}
END_TEST

/* ---- subscribers across a failover ---- */

static redisContext *g_sub_during; /* the SUBSCRIBE sent during the failover */

static void send_subscribe_during(void)
{
    g_sub_during = harness_must_client(&h);
    redisAppendCommand(g_sub_during, "SUBSCRIBE ev:during");
    send_appended(g_sub_during, "SUBSCRIBE");
}

static void expect_subscribed(redisContext *c, const char *channel)
{
    redisReply *r = next_reply(c);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[0]->type == REDIS_REPLY_STRING &&
                      strcmp(r->element[0]->str, "subscribe") == 0 && strcmp(r->element[1]->str, channel) == 0,
                  "SUBSCRIBE %s answered %s", channel, describe(r));
    freeReplyObject(r);
}

/* What a subscriber got within 5 s: 1 when the message `payload` on `channel`; else 0 and what came
 * instead (an error, the connection closed, nothing) in out. */
static int sub_got(redisContext *c, const char *channel, const char *payload, char *out, size_t len)
{
    struct timeval tv = {5, 0};
    redisSetTimeout(c, tv);
    redisReply *r = NULL;
    if (redisGetReply(c, (void **)&r) != REDIS_OK || r == NULL) {
        snprintf(out, len, "%s", c->err == REDIS_ERR_EOF ? "the connection closed" : c->errstr);
        if (c->err == REDIS_ERR_IO && strstr(c->errstr, "temporarily") != NULL)
            snprintf(out, len, "nothing within 5 s");
        return 0;
    }
    describe_into(r, out, len);
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements == 3 && strcmp(r->element[0]->str, "message") == 0 &&
             strcmp(r->element[1]->str, channel) == 0 && strcmp(r->element[2]->str, payload) == 0;
    freeReplyObject(r);
    return ok;
}

/* A subscriber on the primary before a SENTINEL FAILOVER, and one that subscribes while it is under
 * way: a message published on the new primary (directly) reaches the second; the first gets it
 * or is told (an error, its connection closed), never silence. Sentinel demotes the old primary
 * with CLIENT KILL TYPE normal and pubsub. */
START_TEST(test_subscribers_across_a_failover)
{
    keygate_on_sentinels(NULL);
    int old = primary_now();
    redisContext *before = harness_must_client(&h);
    redisAppendCommand(before, "SUBSCRIBE ev:before");
    send_appended(before, "SUBSCRIBE");
    expect_subscribed(before, "ev:before");
    {
        redisContext *c = node(old);
        long long deadline = now_ms() + 5000;
        for (;;) {
            redisReply *r = cmd(c, "PUBSUB NUMSUB ev:before");
            int n = r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? (int)r->element[1]->integer : -1;
            freeReplyObject(r);
            if (n == 1) break;
            ck_assert_msg(now_ms() < deadline, "the subscriber of ev:before is not on the primary (NUMSUB %d)", n);
            sleep_ms(20);
        }
        redisFree(c);
    }
    int p, q;
    long long t_promoted, t_settled;
    failover_with(old, send_subscribe_during, &p, &t_promoted, &q, &t_settled);
    expect_subscribed(g_sub_during, "ev:during");
    long long receivers_before, receivers_during;
    {
        redisContext *c = node(q);
        redisReply *r = cmd(c, "PUBLISH ev:during hello-during");
        receivers_during = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        freeReplyObject(r);
        r = cmd(c, "PUBLISH ev:before hello-before");
        receivers_before = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        freeReplyObject(r);
        redisFree(c);
    }
    char got_before[160], got_during[160];
    int ok_during = sub_got(g_sub_during, "ev:during", "hello-during", got_during, sizeof got_during);
    int ok_before = sub_got(before, "ev:before", "hello-before", got_before, sizeof got_before);
    int told_before = !ok_before && strcmp(got_before, "nothing within 5 s") != 0;
    fprintf(stderr,
            "subscribers: SENTINEL FAILOVER node %d -> %d (every sentinel naming it at %lld ms, settled at %lld ms): "
            "the one subscribed during it got %s (PUBLISH on the new primary: %lld receivers there); the one "
            "subscribed before it got %s (%lld receivers on the new primary)\n",
            old, q, t_promoted, t_settled, got_during, receivers_during, got_before, receivers_before);
    redisFree(before);
    redisFree(g_sub_during);
    if (!ok_during || !(ok_before || told_before)) print_keygate_log("subscribers across a failover");
    ck_assert_msg(ok_during, "the subscriber of ev:during got %s, want the message published on the new primary",
                  got_during);
    ck_assert_msg(ok_before || told_before,
                  "the subscriber of ev:before got %s: neither the message nor an error (silently lost)", got_before);
}
END_TEST

/* A replica without AOF joins the deployment: keygate's INFO poller reads the replicas the sentinels
 * list and reports it, naming the node, while its primary is still the same (before any failover
 * would promote it). */
START_TEST(test_replica_without_aof_reported_before_a_failover)
{
    keygate_on_sentinels("backend-info-interval 1s\n");
    int primary = primary_now();
    char *log = harness_keygate_log(&h);
    ck_assert_msg(log && !strstr(log, "has AOF off"), "a node without AOF reported before one was added:\n%s", log);
    free(log);
    int r = ha_replica_add(H, 0, 30000);
    ck_assert_msg(r >= 0, "ha_replica_add: %s", ha_last_error());
    char tls_want[128], plain_want[128];
    snprintf(tls_want, sizeof tls_want, "node 127.0.0.1:%d: has AOF off", H->nodes[r].tls_port);
    snprintf(plain_want, sizeof plain_want, "node 127.0.0.1:%d: has AOF off", H->nodes[r].plain_port);
    long long t0 = now_ms(), deadline = t0 + 20000;
    int found = 0;
    while (!found && now_ms() < deadline) {
        log = harness_keygate_log(&h);
        found = log && (strstr(log, tls_want) || strstr(log, plain_want));
        free(log);
        if (!found) sleep_ms(100);
    }
    if (!found) print_keygate_log("a replica without AOF");
    ck_assert_msg(found, "keygate's log does not say '%s' 20 s after the replica joined", tls_want);
    ck_assert_int_eq(primary_now(), primary); /* reported before any failover */
    fprintf(stderr, "guard: a replica without AOF (node %d) reported %lld ms after the sentinels listed it\n", r,
            now_ms() - t0);
}
END_TEST

/* A replica whose first sync has not finished (a diskless sync the primary delays 20 s) can be
 * promoted by Sentinel and would lose everything it lacks: keygate's guard reports it (log,
 * /healthz) while it syncs, before any failover. */
START_TEST(test_replica_in_first_sync_reported)
{
    keygate_on_sentinels("backend-info-interval 1s\n");
    int primary = primary_now();
    redisContext *p = node(primary);
    expect_status(cmd(p, "CONFIG SET repl-diskless-sync yes"), "OK", "diskless sync");
    expect_status(cmd(p, "CONFIG SET repl-diskless-sync-delay 20"), "OK", "its delay: the first sync lasts 20 s");
    redisFree(p);
    long long t0 = now_ms();
    int r = ha_replica_add(H, 1, 60000); /* returns once the sync is done and the sentinels list it */
    ck_assert_msg(r >= 0, "ha_replica_add: %s", ha_last_error());
    long long synced = now_ms() - t0;
    p = node(primary);
    expect_status(cmd(p, "CONFIG SET repl-diskless-sync-delay 5"), "OK", "the default again");
    redisFree(p);
    char *log = harness_keygate_log(&h);
    char want[128];
    /* during a delayed diskless sync Redis says master_link_status:down (and master_sync_in_progress:1
     * once the transfer runs): either is a replica that cannot take over */
    snprintf(want, sizeof want, "127.0.0.1:%d: is a replica whose ", H->nodes[r].tls_port);
    int found = log && strstr(log, want) != NULL;
    free(log);
    if (!found) print_keygate_log("a replica in its first sync");
    ck_assert_msg(found, "keygate's log does not say '%s' (the sync lasted %lld ms)", want, synced);
    ck_assert_int_eq(primary_now(), primary);
}
END_TEST

/* failover-hold shorter than the sentinels' down-after-milliseconds (1000 here) plus an election:
 * keygate reads the sentinels' timing and says so in its log and on /healthz (a note: still 200);
 * long enough, nothing is said. */
START_TEST(test_short_failover_hold_is_reported)
{
    keygate_on_sentinels("failover-hold 2s\n");
    long long end = now_ms() + 10000;
    int found = 0;
    while (!found) {
        char *log = harness_keygate_log(&h);
        found = log && strstr(log, "failover-hold 2000 ms cannot cover an unplanned failover") != NULL;
        free(log);
        if (!found) {
            ck_assert_msg(now_ms() < end, "keygate's log does not say failover-hold 2s is too short within 10 s");
            sleep_ms(50);
        }
    }
    struct harness_http r = harness_admin_get(&h, "/healthz");
    ck_assert_msg(r.status == 200 && strstr(r.body, "note: instance 'durable': failover-hold 2000 ms cannot cover"),
                  "/healthz: %d %s", r.status, r.body);
    free(r.body);
    keygate_on_sentinels("failover-hold 5s\n");
    r = harness_admin_get(&h, "/healthz");
    ck_assert_msg(r.status == 200 && !strstr(r.body, "note:"), "/healthz with failover-hold 5s: %d %s", r.status,
                  r.body);
    free(r.body);
    char *log = harness_keygate_log(&h);
    ck_assert_msg(log && !strstr(log, "cannot cover an unplanned failover"), "failover-hold 5s reported as too short");
    free(log);
}
END_TEST

/* A field of keygate's INFO nearcache line of namespace u: (-1 when absent). */
static long long nc_u(redisContext *kg, const char *field)
{
    redisReply *r = cmd(kg, "INFO nearcache");
    char want[64];
    snprintf(want, sizeof want, "%s=", field);
    const char *line = r->type == REDIS_REPLY_STRING ? strstr(r->str, "nc_u:") : NULL;
    const char *f = line ? strstr(line, want) : NULL;
    long long v = f ? atoll(f + strlen(want)) : -1;
    freeReplyObject(r);
    return v;
}

/* GET key through kg until a read of it is a hit with the value want, 10 s at most. */
static void wait_nc_hit(redisContext *kg, const char *key, const char *want)
{
    long long end = now_ms() + 10000;
    for (;;) {
        long long hits = nc_u(kg, "hits");
        redisReply *r = cmd(kg, "GET %s", key);
        int same = r->type == REDIS_REPLY_STRING && strcmp(r->str, want) == 0;
        char d[160];
        describe_into(r, d, sizeof d);
        freeReplyObject(r);
        if (same && nc_u(kg, "hits") > hits) return;
        ck_assert_msg(now_ms() < end, "GET %s through keygate: %s, no near-cache hit of %s within 10 s", key, d, want);
        sleep_ms(20);
    }
}

/* The near cache on a Sentinel instance: reads are served from keygate's memory; a SENTINEL
 * FAILOVER flushes the instance's namespaces (the new primary may lack writes the cache saw) and
 * the reader resumes from the new primary's stream: a write through keygate after it is read
 * back, then served from the cache again. No read returns a value older than the last write
 * acknowledged before it. */
/* ---- client-side caching (issue 32): the tracking feed follows the primary ---- */

/* Wait until n instances' tracking feeds are up (INFO tracking), 15 s. */
static void wait_tracking_feeds(int n)
{
    redisContext *kg = harness_must_client(&h);
    long long end = now_ms() + 15000, up = -1;
    while ((up = harness_info_field(kg, "tracking", "tracking_feeds_up")) != n && now_ms() < end) sleep_ms(20);
    redisFree(kg);
    ck_assert_msg(up == n, "tracking feeds up: %lld, want %d", up, n);
}

/* GET key on the raw RESP3 connection until keygate serves it (a null: the key is new). */
static void tracked_get(struct harness_raw *r, const char *key)
{
    long long end = now_ms() + 15000;
    for (;;) {
        const char *argv[] = {"GET", key};
        harness_raw_sendv(r, 2, argv);
        char *got = harness_raw_reply(r, NULL);
        int ok = strcmp(got, "_\r\n") == 0;
        ck_assert_msg(ok || got[0] == '-', "GET %s: %s", key, got);
        free(got);
        if (ok) return;
        ck_assert_msg(now_ms() < end, "keygate does not serve GET %s within 15 s", key);
        sleep_ms(50);
    }
}

/* A write made directly to the primary reaches a tracking client through keygate's feed; a
 * failover flushes it (keygate cannot vouch for the switch); the feed then follows the new
 * primary: a direct write there reaches the client too. */
START_TEST(test_tracking_follows_the_primary)
{
    keygate_on_sentinels(NULL);
    wait_tracking_feeds(2);
    struct harness_raw t;
    harness_raw_open_tracking(&t, h.port, "keygate (tracking)", NULL, NULL);
    tracked_get(&t, "c:tr1");
    redisContext *p = node(primary_now());
    freeReplyObject(cmd(p, "SET c:tr1 v EX 100"));
    redisFree(p);
    char *got = harness_raw_reply(&t, NULL);
    ck_assert_msg(strcmp(got, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$5\r\nc:tr1\r\n") == 0, "the push: %s", got);
    free(got);
    int old = primary_now(), promoted = -1;
    long long confirmed_ms = 0, settled_ms = 0;
    ck_assert_msg(ha_failover(H, 30000, &promoted, &confirmed_ms, &settled_ms) == 0, "failover: %s", ha_last_error());
    ck_assert_int_ne(promoted, old);
    got = harness_raw_reply(&t, NULL);
    ck_assert_msg(strcmp(got, ">2\r\n$10\r\ninvalidate\r\n_\r\n") == 0, "the flush after the failover: %s", got);
    free(got);
    wait_tracking_feeds(2);
    tracked_get(&t, "c:tr2");
    /* the feed may have come up before the read: no flush is owed for it, the next frame is the push */
    p = node(promoted);
    freeReplyObject(cmd(p, "SET c:tr2 v EX 100"));
    redisFree(p);
    got = harness_raw_reply(&t, NULL);
    ck_assert_msg(strcmp(got, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$5\r\nc:tr2\r\n") == 0,
                  "the push of a direct write on the new primary: %s", got);
    free(got);
    harness_raw_close(&t);
}
END_TEST

START_TEST(test_near_cache_follows_the_primary)
{
    g_registry = registry_nearcache;
    keygate_on_sentinels(NULL);
    g_registry = registry_text; /* the next keygate_on_sentinels: the suite's */
    redisContext *kg = harness_must_client(&h);
    expect_status(cmd(kg, "SET u:nc v1"), "OK", "SET");
    wait_nc_hit(kg, "u:nc", "v1");
    long long resets = nc_u(kg, "evicted_reset");
    int old = primary_now(), promoted = -1;
    long long confirmed_ms = 0, settled_ms = 0;
    ck_assert_msg(ha_failover(H, 30000, &promoted, &confirmed_ms, &settled_ms) == 0, "failover: %s", ha_last_error());
    ck_assert_int_ne(promoted, old);
    long long end = now_ms() + 15000;
    for (;;) { /* keygate's reader notices the new primary and flushes */
        char *log = harness_keygate_log(&h);
        int seen = log && strstr(log, "has a new primary") != NULL;
        free(log);
        if (seen) break;
        if (now_ms() >= end) print_keygate_log("near cache after a failover");
        ck_assert_msg(now_ms() < end, "keygate's near cache did not follow the new primary within 15 s");
        sleep_ms(50);
    }
    ck_assert_int_gt(nc_u(kg, "evicted_reset"), resets);
    end = now_ms() + 15000;
    for (int n = 2;; n++) { /* writes through keygate reach the new primary; each is read back at once */
        char val[16];
        snprintf(val, sizeof val, "v%d", n);
        redisReply *w = cmd(kg, "SET u:nc %s", val);
        int ok = w->type == REDIS_REPLY_STATUS;
        freeReplyObject(w);
        if (ok) {
            expect_bulk(cmd(kg, "GET u:nc"), val, "the write just acknowledged, read back");
            expect_on_node(promoted, "u:nc", val);
            break;
        }
        ck_assert_msg(now_ms() < end, "no write to the new primary went through within 15 s");
        sleep_ms(50);
    }
    redisReply *v = cmd(kg, "GET u:nc");
    ck_assert_int_eq(v->type, REDIS_REPLY_STRING);
    char last[16];
    snprintf(last, sizeof last, "%s", v->str);
    freeReplyObject(v);
    wait_nc_hit(kg, "u:nc", last);
    redisFree(kg);
    /* the teardown's post-condition reads the suite's registry: keygate without the near cache, and
     * the near cache's keys gone from the primary and its replicas */
    keygate_on_sentinels(NULL);
    redisContext *p = node(primary_now());
    freeReplyObject(cmd(p, "DEL u:nc kg:nc:{kg:}:stream kg:nc:{kg:}:markers kg:nc:{kg:}:writers"));
    freeReplyObject(cmd(p, "WAIT 2 5000"));
    redisFree(p);
}
END_TEST

/* ---- a sentinel that is behind, listed first ---- */

/* config-epoch of the master as real sentinel 0 says it now. */
static long long sentinel_epoch(void)
{
    redisContext *sc = ha_sentinel_connect(H, 0);
    ck_assert_msg(sc != NULL, "sentinel 0 does not answer");
    redisReply *r = cmd(sc, "SENTINEL MASTER %s", H->master_name);
    long long epoch = -1;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2)
        if (strcmp(r->element[i]->str, "config-epoch") == 0) epoch = atoll(r->element[i + 1]->str);
    freeReplyObject(r);
    redisFree(sc);
    ck_assert_msg(epoch >= 0, "sentinel 0's SENTINEL MASTER has no config-epoch");
    return epoch;
}

/* tests/ha/fake_sentinel.py on a free port, naming node `primary` at `epoch` for ever; its port. */
static int fake_sentinel_start(int primary, long long epoch, pid_t *pid, unsigned long long *start)
{
    int port = harness_free_port();
    ck_assert_int_gt(port, 0);
    static char log_path[PATH_MAX], script[PATH_MAX], cert[PATH_MAX], key[PATH_MAX];
    char sport[16], mport[16], sepoch[24];
    snprintf(log_path, sizeof log_path, "%s/fake-sentinel.log", H->dir);
    snprintf(script, sizeof script, "%s/tests/ha/fake_sentinel.py", H->root);
    snprintf(cert, sizeof cert, "%s/build/certs/server.crt", H->root);
    snprintf(key, sizeof key, "%s/build/certs/server.key", H->root);
    snprintf(sport, sizeof sport, "%d", port);
    snprintf(mport, sizeof mport, "%d", H->nodes[primary].tls_port);
    snprintf(sepoch, sizeof sepoch, "%lld", epoch);
    char *argv[] = {"python3", script, sport, cert, key, H->master_name, "127.0.0.1", mport, sepoch, NULL};
    *pid = procs_spawn(argv, log_path, NULL, H->owner, H->owner_pgid, start);
    ck_assert_msg(*pid > 0, "fake sentinel: %s", strerror(errno));
    long long end = now_ms() + 10000;
    for (;;) {
        FILE *f = fopen(log_path, "r");
        char line[64] = "";
        if (f) {
            if (!fgets(line, sizeof line, f)) line[0] = '\0';
            fclose(f);
        }
        if (strncmp(line, "ready", 5) == 0) return port;
        ck_assert_msg(now_ms() < end, "the fake sentinel did not say ready within 10 s");
        sleep_ms(20);
    }
}

/* A sentinel that is behind (the minority side of a partition, next to the old primary), first in
 * keygate's list, naming the old primary at the old config-epoch for ever; a SENTINEL FAILOVER
 * through the real ones under load: keygate follows the new primary and never goes back to the
 * old one (it answers master for some 8 s, until Sentinel demotes it), and no acknowledged
 * write is lost (150,160 of 343,616 increments were, with no error, when keygate trusted the
 * first sentinel that answered). */
START_TEST(test_stale_sentinel_listed_first_loses_nothing)
{
    int old = primary_now();
    pid_t fake;
    unsigned long long fake_start;
    int fake_port = fake_sentinel_start(old, sentinel_epoch(), &fake, &fake_start);
    keygate_on_sentinels_after(NULL, fake_port);
    sentinel_load_start();
    load_wait_batches(300, 10000, "the load before the failover");
    size_t log_from = log_length();
    sentinel_failover();
    int p = -1;
    ck_assert_msg(ha_wait_promoted(H, old, 30000, &p) == 0, "%s", ha_last_error());
    int q = -1;
    ck_assert_msg(ha_wait_settled(H, 40000, &q) == 0, "%s", ha_last_error());
    wait_log_names(H->nodes[q].tls_port, log_from, 10000, "the switch to the new primary");
    load_wait_batches(200, 15000, "the load after the failover settled");
    load_stop();
    struct load_sum sum = load_sum();
    /* never back to the old primary once it moved */
    char *log = harness_keygate_log(&h);
    ck_assert_ptr_nonnull(log);
    char back[64];
    snprintf(back, sizeof back, "the primary is now 127.0.0.1:%d", H->nodes[old].tls_port);
    int went_back = strstr(log + (log_from < strlen(log) ? log_from : strlen(log)), back) != NULL;
    if (went_back) print_keygate_log("switched back to the old primary");
    free(log);
    long long lost_sets = 0, checked = 0, short_counters = 0;
    long long shortfall = load_verify(q, NULL, &lost_sets, &checked, &short_counters);
    fprintf(stderr,
            "stale sentinel first: %lld batches, %lld INCRs, %lld errors; on node %d %lld of %lld acknowledged SETs "
            "missing, counters short by %lld\n",
            sum.batches, sum.incrs, sum.errors, q, lost_sets, checked, shortfall);
    procs_kill(fake, fake_start);
    ck_assert_msg(!went_back, "keygate went back to the old primary (node %d) after the failover", old);
    ck_assert_msg(sum.regressions == 0 && sum.lost_reads == 0,
                  "%lld INCRs answered below their acknowledged count, %lld GETs of acknowledged SETs answered nil",
                  sum.regressions, sum.lost_reads);
    ck_assert_msg(shortfall == 0 && lost_sets == 0,
                  "acknowledged writes missing on the new primary: %lld increments, %lld SETs", shortfall, lost_sets);
    load_free();
}
END_TEST

/* ha_start with sentinels that take a minute to call a primary down: a killed primary stays
 * named (and unconfirmed: ROLE does not answer), with no failover during the test. */
static void setup_no_failover(void)
{
    ck_assert_int_eq(setenv("HA_DOWN_AFTER_MS", "60000", 1), 0);
    setup();
    ck_assert_int_eq(unsetenv("HA_DOWN_AFTER_MS"), 0);
}

/* n GETs pipelined on kg while durable has no primary: each must answer -UNAVAILABLE; returns the
 * milliseconds until the last reply came. */
static long long pipelined_unavailable(redisContext *kg, int n)
{
    long long t0 = now_ms();
    for (int i = 0; i < n; i++) ck_assert_int_eq(redisAppendCommand(kg, "GET n:held%d", i), REDIS_OK);
    for (int i = 0; i < n; i++) {
        redisReply *r = next_reply(kg);
        ck_assert_msg(r->type == REDIS_REPLY_ERROR && strncmp(r->str, "UNAVAILABLE", 11) == 0,
                      "GET %d of %d pipelined with no primary answered %s after %lld ms", i + 1, n, describe(r),
                      now_ms() - t0);
        freeReplyObject(r);
    }
    return now_ms() - t0;
}

/* Requests waiting for a primary each carry their own deadline (held since + failover-hold): 8
 * pipelined GETs with the primary dead and no failover wait one hold together and fail together
 * (they waited 8 holds one after another when only the first of a client's waiting requests
 * advanced its retries: 18.2 s with failover-hold 2s). */
START_TEST(test_pipelined_requests_wait_one_hold_in_all)
{
    const long long hold = 2000;
    keygate_on_sentinels("failover-hold 2s\n");
    redisContext *kg = must_long_client();
    expect_status(cmd(kg, "SET n:held warm"), "OK", "SET before the kill");
    int p = primary_now();
    ck_assert_msg(ha_node_kill(H, p) == 0, "%s", ha_last_error());
    long long one = pipelined_unavailable(kg, 1); /* keygate saw the connection go */
    long long t1 = pipelined_unavailable(kg, 1), t4 = pipelined_unavailable(kg, 4), t8 = pipelined_unavailable(kg, 8);
    fprintf(stderr,
            "no primary, failover-hold %lld ms: the first GET answered in %lld ms; then 1, 4, 8 pipelined GETs "
            "in %lld, %lld, %lld ms\n",
            hold, one, t1, t4, t8);
    ck_assert_msg(t1 >= hold - 100, "a GET with no primary failed after %lld ms, before its hold of %lld ms", t1, hold);
    ck_assert_msg(t4 < 2 * hold && t8 < 2 * hold,
                  "pipelined GETs wait one after another: 4 in %lld ms, 8 in %lld ms (failover-hold %lld ms)", t4, t8,
                  hold);
    redisFree(kg);
}
END_TEST

/* `cmd` on c, pipelined with the others of argv-style lines, every reply +OK (a move's step). */
static void all_ok(redisContext *c, const char *what, int n, char *const *lines)
{
    for (int i = 0; i < n; i++) ck_assert_int_eq(redisAppendCommand(c, lines[i]), REDIS_OK);
    for (int i = 0; i < n; i++) {
        redisReply *r = next_reply(c);
        ck_assert_msg(r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0, "%s: '%s' answered %s", what,
                      lines[i], describe(r));
        freeReplyObject(r);
    }
}

/* Does keygate's log, from byte *from on, name port as a number of its own? *from moves past
 * the lines read (a partial last line is read again next time). */
static int log_tail_names_port(size_t *from, int port)
{
    FILE *f = fopen(h.log_file, "r");
    ck_assert_msg(f != NULL, "cannot open keygate's log %s", h.log_file);
    ck_assert_int_eq(fseek(f, (long)*from, SEEK_SET), 0);
    char want[16], line[2048];
    int n = snprintf(want, sizeof want, "%d", port), found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n') break; /* not whole yet */
        *from += len;
        for (const char *p = line; !found && (p = strstr(p, want)) != NULL; p++)
            found = (p == line || p[-1] < '0' || p[-1] > '9') && (p[n] < '0' || p[n] > '9');
    }
    fclose(f);
    return found;
}

/* Defect 1: each worker's node table was append-only (128 entries); the 129th distinct address a
 * Sentinel named left every slot without an owner, and every request answered -UNAVAILABLE
 * until a restart. The primary is moved to a new TLS port 1,000 times (CONFIG SET tls-port on the
 * running server, the one sentinel kept re-pointed with SENTINEL REMOVE / MONITOR, keygate's
 * connections killed so that it asks at once); once keygate's log names the new port, a GET
 * through keygate must be served there. */
START_TEST(test_thousand_primary_addresses_served)
{
    const int moves = 1000;
    keygate_on_sentinels("failover-hold 2s\n");
    int p = primary_now();
    for (int s = 1; s < HA_SENTINELS; s++) /* one sentinel to re-point; keygate asks the others after it */
        ck_assert_msg(ha_sentinel_kill(H, s) == 0, "%s", ha_last_error());
    redisContext *kg = must_long_client(), *n0 = node(p), *s0 = ha_sentinel_connect(H, 0);
    ck_assert_msg(s0 != NULL, "sentinel 0 does not answer");
    expect_status(cmd(kg, "SET n:moves 0"), "OK", "SET before the moves");
    int port = 32000 + (int)(now_ms() % 8000);
    long long t0 = now_ms(), slowest = 0, in_gets = 0;
    size_t log_at = log_length();
    for (int m = 0; m < moves; m++) {
        char set_port[64], monitor[128], auth[192];
        for (;;) { /* a port some other process holds is skipped */
            port++;
            snprintf(set_port, sizeof set_port, "CONFIG SET tls-port %d", port);
            redisReply *r = cmd(n0, set_port);
            int ok = r->type == REDIS_REPLY_STATUS;
            freeReplyObject(r);
            if (ok) break;
            ck_assert_msg(port < 60000, "no free port for move %d", m);
        }
        snprintf(monitor, sizeof monitor, "SENTINEL MONITOR %s 127.0.0.1 %d 1", H->master_name, port);
        snprintf(auth, sizeof auth, "SENTINEL SET %s auth-pass %s", H->master_name, H->password);
        char remove[64];
        snprintf(remove, sizeof remove, "SENTINEL REMOVE %s", H->master_name);
        char *lines[3] = {remove, monitor, auth};
        all_ok(s0, "re-pointing sentinel 0", 3, lines);
        redisReply *k = cmd(n0, "CLIENT KILL TYPE normal SKIPME yes"); /* keygate's connections: it asks again now */
        ck_assert_msg(k->type == REDIS_REPLY_INTEGER, "CLIENT KILL: %s", describe(k));
        freeReplyObject(k);
        long long t = now_ms();
        while (!log_tail_names_port(&log_at, port)) { /* keygate's watcher found the primary on its new port */
            ck_assert_msg(now_ms() - t < 10000, "move %d: keygate's log does not name port %d 10 s after the move",
                          m + 1, port);
            sleep_ms(2);
        }
        redisReply *r = cmd(kg, "GET n:moves");
        long long took = now_ms() - t; /* from the move */
        if (took > slowest) slowest = took;
        in_gets += took;
        if (!(r->type == REDIS_REPLY_STRING && strcmp(r->str, "0") == 0)) print_keygate_log("a move not served");
        ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, "0") == 0,
                      "move %d (primary now on port %d, %d distinct addresses so far): GET through keygate answered %s "
                      "after %lld ms",
                      m + 1, port, m + 2, describe(r), took);
        freeReplyObject(r);
    }
    fprintf(stderr,
            "%d primary addresses served in %lld ms (from the moves to their GET's reply: %lld ms in all, the slowest "
            "%lld ms)\n",
            moves, now_ms() - t0, in_gets, slowest);
    redisFree(s0);
    redisFree(n0);
    redisFree(kg);
}
END_TEST

/* ---- host names: Sentinel with resolve-hostnames and announce-hostnames (issue 30 item 3) ---- */

static void setup_hostnames(void)
{
    setenv("HA_HOSTNAMES", "1", 1);
    setup();
    unsetenv("HA_HOSTNAMES");
}

/* What sentinel 0 names as the primary's host now (static buffer). */
static const char *sentinel_primary_host(void)
{
    static char host[64];
    redisContext *s = ha_sentinel_connect(H, 0);
    ck_assert_msg(s != NULL, "sentinel 0 does not answer");
    redisReply *r = cmd(s, "SENTINEL get-master-addr-by-name %s", H->master_name);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "get-master-addr-by-name: %s", describe(r));
    snprintf(host, sizeof host, "%s", r->element[0]->str);
    freeReplyObject(r);
    redisFree(s);
    return host;
}

/* Write and read back n: and c: keys through keygate until one pair is served (timeout_ms),
 * then check them on node p directly. */
static void served_on(redisContext *kg, int p, const char *tag, int timeout_ms)
{
    long long end = now_ms() + timeout_ms;
    char key[64], val[64];
    snprintf(key, sizeof key, "n:host:%s", tag);
    snprintf(val, sizeof val, "v-%s", tag);
    for (;;) {
        redisReply *r = cmd(kg, "SET %s %s", key, val);
        int ok = r->type == REDIS_REPLY_STATUS;
        char d[200];
        describe_into(r, d, sizeof d);
        freeReplyObject(r);
        if (ok) break;
        if (now_ms() >= end) print_keygate_log("hostnames");
        ck_assert_msg(now_ms() < end, "%s: SET through keygate still answers %s after %d ms", tag, d, timeout_ms);
        sleep_ms(50);
    }
    expect_bulk(cmd(kg, "GET %s", key), val, "read back through keygate");
    char ckey[64];
    snprintf(ckey, sizeof ckey, "c:host:%s", tag);
    expect_status(cmd(kg, "SET %s x", ckey), "OK", "SET c: (TTL namespace)");
    expect_on_node(p, key, val);
    expect_ttl_on_node(p, ckey);
}

START_TEST(test_hostnames_primary_named_localhost_served_and_followed)
{
    ck_assert_msg(H->hostnames, "the deployment was not started with HA_HOSTNAMES=1");
    ck_assert_str_eq(sentinel_primary_host(), "localhost");
    keygate_on_sentinels(NULL); /* seeds localhost:PORT, no server-name=: certificates checked against `localhost` */
    int p = primary_now();
    redisContext *kg = harness_must_client(&h);
    served_on(kg, p, "primary", 5000);
    ck_assert_msg(keygate_traffic_on(p), "keygate's connection is not on the primary");
    /* a failover: +switch-master names `localhost` and the new port; keygate resolves it again */
    int promoted = -1;
    long long confirmed_ms = 0, settled_ms = 0;
    ck_assert_msg(ha_failover(H, 30000, &promoted, &confirmed_ms, &settled_ms) == 0, "failover: %s", ha_last_error());
    ck_assert_int_ne(promoted, p);
    ck_assert_str_eq(sentinel_primary_host(), "localhost");
    long long t0 = now_ms();
    served_on(kg, promoted, "promoted", 15000);
    long long took = now_ms() - t0;
    ck_assert_msg(wait_keygate_moved(p, 15000, "failover to a primary named localhost") == promoted,
                  "keygate's traffic is not on the promoted node %d", promoted);
    redisFree(kg);
    char *log = harness_keygate_log(&h);
    ck_assert_msg(log != NULL && strstr(log, "not a numeric address") == NULL, "keygate refused a host name:\n%s",
                  log ? log : "");
    free(log);
    fprintf(
        stderr,
        "hostnames: primary named localhost served (node %d); after SENTINEL FAILOVER (confirmed in %lld ms, settled "
        "in %lld ms) writes reached node %d %lld ms after the settle\n",
        p, confirmed_ms, settled_ms, promoted, took);
}
END_TEST

/* ---- scripts across a failover ---- */

/*
 * Redis 7.0 does not replicate scripts (SCRIPT LOAD, or EVAL's cache): a promoted replica lacks
 * the scripts its old primary had, and every EVALSHA-based rate limiter would get -NOSCRIPT after a
 * failover. keygate remembers what it saw (SCRIPT LOAD, EVAL) and answers the new primary's
 * -NOSCRIPT by loading the script and sending the EVALSHA again: the client never sees it.
 */
START_TEST(test_evalsha_across_a_failover_loads_the_script)
{
    char hash[65], users[256];
    harness_sha256_hex("scripts-pw", hash);
    snprintf(users, sizeof users, "user app sha256=%s owners=* access=rw scripts=yes\n", hash);
    g_probe_user = "app";
    g_probe_pass = "scripts-pw";
    keygate_on_sentinels(users);
    g_probe_user = g_probe_pass = NULL;
    redisContext *kg = harness_must_client(&h);
    expect_status(cmd(kg, "AUTH app scripts-pw"), "OK", "AUTH app (scripts=yes)");
    /* EVAL through keygate (which remembers its body; a user with namespaces on two instances may
     * not SCRIPT LOAD through keygate), its SHA1 as the primary names it */
    static const char body[] = "return redis.call('INCR', KEYS[1])";
    expect_int(cmd(kg, "EVAL %s 1 n:sc", body), 1, "EVAL before the failover");
    redisContext *o = node(primary_now());
    redisReply *r = cmd(o, "SCRIPT LOAD %s", body);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == 40, "SCRIPT LOAD: %s", describe(r));
    char sha[41];
    snprintf(sha, sizeof sha, "%s", r->str);
    freeReplyObject(r);
    redisFree(o);
    expect_int(cmd(kg, "EVALSHA %s 1 n:sc", sha), 2, "EVALSHA before the failover");
    expect_int(cmd(kg, "WAIT 2 5000"), 2, "the replicas have n:sc");
    int old = primary_now(), promoted = -1;
    long long confirmed_ms = 0, settled_ms = 0;
    ck_assert_msg(ha_failover(H, 30000, &promoted, &confirmed_ms, &settled_ms) == 0, "failover: %s", ha_last_error());
    ck_assert_int_ne(promoted, old);
    redisContext *p = node(promoted);
    r = cmd(p, "SCRIPT EXISTS %s", sha);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->integer == 0,
                  "the promoted node has the script already (SCRIPT EXISTS %s): the test proves nothing", describe(r));
    freeReplyObject(r);
    long long end = now_ms() + 15000, v = -1;
    while (v < 0) { /* keygate follows the new primary; an error of the failover's hold may come first */
        r = cmd(kg, "EVALSHA %s 1 n:sc", sha);
        ck_assert_msg(!(r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0),
                      "EVALSHA after the failover answered %s", r->str);
        if (r->type == REDIS_REPLY_INTEGER) v = r->integer;
        freeReplyObject(r);
        ck_assert_msg(v >= 0 || now_ms() < end, "no EVALSHA went through within 15 s of the failover");
        if (v < 0) sleep_ms(50);
    }
    ck_assert_msg(v >= 3, "EVALSHA on the new primary: %lld, want at least 3", v);
    r = cmd(p, "SCRIPT EXISTS %s", sha);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->integer == 1,
                  "keygate did not load the script on the new primary: %s", describe(r));
    freeReplyObject(r);
    expect_int(cmd(kg, "DEL n:sc"), 1, "clean up");
    redisFree(p);
    redisFree(kg);
    keygate_on_sentinels(NULL); /* the teardown's post-condition: the suite's keygate, no users */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sentinel_keygate");
    harness_add_case(s, "routing", 60, setup, teardown, test_routing_to_the_named_primary_with_ttls);
    harness_add_case(s, "failover", 120, setup, teardown, test_sentinel_failover_under_load_no_error_nothing_lost);
    harness_add_case(s, "kill", 120, setup, teardown, test_primary_killed_under_load_errors_only_in_flight);
    harness_add_case(s, "kill-replicated", 120, setup, teardown,
                     test_primary_killed_with_replicas_1_nothing_acknowledged_lost);
    harness_add_case(s, "sigstop", 150, setup, teardown,
                     test_primary_sigstopped_keygate_follows_then_old_one_a_replica);
    harness_add_case(s, "sentinels", 90, setup, teardown, test_sentinels_killed_traffic_unaffected);
    harness_add_case(s, "blocking", 90, setup, teardown,
                     test_blpop_across_a_failover_gets_the_value_pushed_on_the_new_primary);
    harness_add_case(s, "watch", 90, setup, teardown, test_watch_across_a_failover_exec_nil_or_runs);
    harness_add_case(s, "subscribers", 90, setup, teardown, test_subscribers_across_a_failover);
    harness_add_case(s, "guard", 90, setup, teardown, test_replica_without_aof_reported_before_a_failover);
    harness_add_case(s, "tracking", 120, setup, teardown, test_tracking_follows_the_primary);
    harness_add_case(s, "nearcache", 90, setup, teardown, test_near_cache_follows_the_primary);
    harness_add_case(s, "scripts", 120, setup, teardown, test_evalsha_across_a_failover_loads_the_script);
    harness_add_case(s, "stale-sentinel", 120, setup, teardown, test_stale_sentinel_listed_first_loses_nothing);
    harness_add_case(s, "first-sync", 120, setup, teardown, test_replica_in_first_sync_reported);
    harness_add_case(s, "hold", 90, setup, teardown, test_short_failover_hold_is_reported);
    harness_add_case(s, "pipelined-hold", 90, setup_no_failover, teardown,
                     test_pipelined_requests_wait_one_hold_in_all);
    harness_add_case(s, "thousand-addresses", 300, setup_no_failover, teardown, test_thousand_primary_addresses_served);
    harness_add_case(s, "hostnames", 120, setup_hostnames, teardown,
                     test_hostnames_primary_named_localhost_served_and_followed);
    int failed = harness_run(s);
    int left = ha_leftovers();
    if (left) fprintf(stderr, "POST-CONDITION FAILED: %d server(s) of this suite still run\n", left);
    return failed == 0 && left == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
