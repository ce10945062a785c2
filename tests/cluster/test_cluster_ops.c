/* test_cluster_ops.c: the background readers on a Redis Cluster instance: `keygate audit` SCANs every primary, the namespace sampler sums them, the INFO poller's capacity gauges and topology guard are per node; SCRIPT LOAD reaches every primary, and a node's -NOSCRIPT is answered by loading the script keygate saw. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cluster_harness.h"
#include "harness.h"
#include "serverkit.h"
#include "scripts.h"
#include "slotmap.h"

/*
 * One cluster (3 primaries + 3 replicas) and one harness (its durable and cache servers and
 * keygate) per test case, started in the unchecked setup. Each test runs keygate with
 * `instance cache cluster` over two of the cluster's nodes (durable stays the harness's server)
 * and first brings the cluster's primaries to a known state (FLUSHALL, maxmemory and an evicting
 * policy: what the guard wants of `cache`), so no test relies on another. Keys are planted
 * directly on the primary that owns their slot.
 */

static struct cluster *C;
static struct harness h;

#define REGISTRY                                                                                                       \
    "namespace q:      instance=durable ttl=none owner=queues\n"                                                       \
    "namespace cache:  instance=cache   ttl=1h max-ttl=7d owner=cache\n"                                               \
    "namespace job:    instance=cache   ttl=none depth owner=jobs\n"

static void setup(void)
{
    C = cluster_start();
    ck_assert_msg(C != NULL, "cluster_start: %s", cluster_last_error());
    struct harness_opts o = {.registry_text = REGISTRY, .admin = 1};
    ck_assert_msg(harness_start(&h, &o) == 0, "%s", h.error);
}

static void teardown(void)
{
    harness_stop(&h);
    cluster_stop(C);
    C = NULL;
}

/* The primaries (node indexes) and every slot's owner, as the cluster answers now. */
static int P[CLUSTER_NODES], NP;
static int owners[CLUSTER_SLOTS];

static redisContext *node(int i)
{
    redisContext *c = cluster_connect(C, i);
    ck_assert_msg(c != NULL, "node %d (port %d) does not answer", i, C->nodes[i].plain_port);
    return c;
}

/* The known state: primaries read, every primary empty with maxmemory (100mb + k mb, a value
 * per primary) and allkeys-lru. */
static void cluster_prepare(void)
{
    NP = cluster_primaries(C, P);
    ck_assert_msg(NP == 3, "primaries: %d (%s)", NP, cluster_last_error());
    ck_assert_msg(cluster_slot_owners(C, P[0], owners) == 0, "%s", cluster_last_error());
    for (int k = 0; k < NP; k++) {
        redisContext *c = node(P[k]);
        expect_status(cmd(c, "FLUSHALL"), "OK", "FLUSHALL");
        char mm[32];
        snprintf(mm, sizeof mm, "%d", (100 + k) * 1024 * 1024);
        expect_status(cmd(c, "CONFIG SET maxmemory %s", mm), "OK", "CONFIG SET maxmemory");
        expect_status(cmd(c, "CONFIG SET maxmemory-policy allkeys-lru"), "OK", "CONFIG SET maxmemory-policy");
        redisFree(c);
    }
    /* the replicas too: one the cluster promotes by itself (a node starved on a busy machine past its
     * cluster-node-timeout) is then as the guard wants, and the tests still see three good primaries */
    for (int i = 0; i < CLUSTER_NODES; i++) {
        int primary = 0;
        for (int k = 0; k < NP; k++) primary |= P[k] == i;
        if (primary || !cluster_node_alive(C, i)) continue;
        redisContext *c = node(i);
        expect_status(cmd(c, "CONFIG SET maxmemory 100mb"), "OK", "CONFIG SET maxmemory on a replica");
        expect_status(cmd(c, "CONFIG SET maxmemory-policy allkeys-lru"), "OK", "CONFIG SET maxmemory-policy");
        redisFree(c);
    }
}

/* "PREFIX{n}" for the first n whose slot primary P[k] owns, into buf. */
static void key_on(char *buf, size_t len, const char *prefix, int k, int nth)
{
    for (int n = 0, found = 0; n < 100000; n++) {
        snprintf(buf, len, "%s{%d}", prefix, n);
        if (owners[slotmap_key_slot(buf, strlen(buf))] == P[k] && found++ == nth) return;
    }
    ck_abort_msg("no key of %s on primary %d", prefix, P[k]);
}

/* keygate with `instance cache cluster` (seeds: nodes 0 and 1 over TLS) and the lines extra. */
static void keygate_on_cluster(const char *extra)
{
    static char inst[4 * PATH_MAX];
    const struct harness_backend *d = &h.backends[0];
    snprintf(inst, sizeof inst,
             "instance durable 127.0.0.1:%d tls ca=%s/build/certs/ca.crt cert=%s/build/certs/client.crt "
             "key=%s/build/certs/client.key server-name=localhost password-file=%s\n"
             "instance cache cluster 127.0.0.1:%d,127.0.0.1:%d tls ca=%s/build/certs/ca.crt server-name=localhost "
             "password-file=%s\n",
             d->tls_port, h.root, h.root, h.root, d->pass_file, C->nodes[0].tls_port, C->nodes[1].tls_port, h.root,
             C->pass_file);
    struct harness_opts o = {.registry_text = REGISTRY, .extra_config = extra, .admin = 1, .instances_text = inst};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "keygate on the cluster: %s", h.error);
}

/* The value of the series written exactly as `series` (name and labels), -1 when absent. */
static double series(const char *body, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = body; (p = strstr(p, name)) != NULL; p += n)
        if ((p == body || p[-1] == '\n') && p[n] == ' ') return strtod(p + n + 1, NULL);
    return -1;
}

static char *metrics(void)
{
    struct harness_http r = harness_admin_get(&h, "/metrics");
    ck_assert_int_eq(r.status, 200);
    return r.body;
}

/* `keygate audit -c` keygate's config: its exit code, its output (stdout and stderr) in out. */
static int audit_run(char *out, size_t len)
{
    const char *bin = getenv("KEYGATE_BIN") ? getenv("KEYGATE_BIN") : "build/keygate";
    char path[PATH_MAX], sh[3 * PATH_MAX];
    snprintf(path, sizeof path, "%s/audit.out", h.dir);
    snprintf(sh, sizeof sh, "timeout 60 %s audit -c %s > %s 2>&1", bin, h.conf_file, path);
    int rc = system(sh);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    fclose(f);
    ck_assert_msg(WIFEXITED(rc), "keygate audit did not exit (status %d): %s", rc, out);
    return WEXITSTATUS(rc);
}

static void expect_line(const char *out, const char *line)
{
    char want[1024];
    snprintf(want, sizeof want, "\n%s\n", line);
    ck_assert_msg(strstr(out, want) != NULL || strncmp(out, want + 1, strlen(want + 1)) == 0,
                  "no line '%s' in the audit's output:\n%s", line, out);
}

/* Keys planted on every primary, some breaking the registry, are all reported with their node,
 * and counted once (the replicas hold them too but are not scanned): exit 1. The clean cluster:
 * exit 0. */
START_TEST(test_audit_scans_every_primary)
{
    cluster_prepare();
    keygate_on_cluster(NULL);
    char out[16384], key[64], line[512];
    for (int k = 0; k < NP; k++) { /* a valid key on each primary */
        redisContext *c = node(P[k]);
        key_on(key, sizeof key, "cache:ok:", k, 0);
        expect_status(cmd(c, "SET %s v EX 3600", key), "OK", "SET valid");
        redisFree(c);
    }
    ck_assert_msg(audit_run(out, sizeof out) == 0, "a clean cluster: %s", out);
    expect_line(out, "audit: durable 0 keys, cache 3 keys (3 primaries); 0 violations");

    for (int k = 0; k < NP; k++) {
        redisContext *c = node(P[k]);
        key_on(key, sizeof key, "cache:nottl:", k, 0);
        expect_status(cmd(c, "SET %s v", key), "OK", "SET no TTL");
        key_on(key, sizeof key, "nope:", k, 0);
        expect_status(cmd(c, "SET %s v", key), "OK", "SET no namespace");
        key_on(key, sizeof key, "q:wrong:", k, 0);
        expect_status(cmd(c, "SET %s v", key), "OK", "SET wrong instance");
        key_on(key, sizeof key, "cache:long:", k, 0);
        expect_status(cmd(c, "SET %s v EX 2592000", key), "OK", "SET above max-ttl");
        redisFree(c);
    }
    ck_assert_msg(audit_run(out, sizeof out) == 1, "violations: %s", out);
    for (int k = 0; k < NP; k++) {
        int port = C->nodes[P[k]].tls_port;
        key_on(key, sizeof key, "cache:nottl:", k, 0);
        snprintf(line, sizeof line, "cache %s missing TTL: namespace 'cache:' requires ttl=1h (node 127.0.0.1:%d)", key,
                 port);
        expect_line(out, line);
        key_on(key, sizeof key, "nope:", k, 0);
        snprintf(line, sizeof line, "cache %s no namespace (node 127.0.0.1:%d)", key, port);
        expect_line(out, line);
        key_on(key, sizeof key, "q:wrong:", k, 0);
        snprintf(line, sizeof line, "cache %s wrong instance: namespace 'q:' lives on 'durable' (node 127.0.0.1:%d)",
                 key, port);
        expect_line(out, line);
        key_on(key, sizeof key, "cache:long:", k, 0);
        snprintf(line, sizeof line, "\ncache %s TTL above max-ttl: ", key);
        const char *at = strstr(out, line);
        ck_assert_msg(at != NULL, "no '%s' line:\n%s", line + 1, out);
        snprintf(line, sizeof line, "s left, namespace 'cache:' allows max-ttl=7d (node 127.0.0.1:%d)\n", port);
        const char *end = strchr(at + 1, '\n');
        ck_assert_msg(end && (size_t)(end + 1 - at) > strlen(line) &&
                          strncmp(end + 1 - strlen(line), line, strlen(line)) == 0,
                      "the TTL line of %s does not end in '%s':\n%s", key, line, out);
    }
    expect_line(out, "audit: durable 0 keys, cache 15 keys (3 primaries); 12 violations (no namespace 3, wrong "
                     "instance 3, missing TTL 3, TTL above max-ttl 3)");
}
END_TEST

/* Keys and queue depth per namespace: the sampler's count is the sum over every primary, equal
 * to the keys counted directly on each. */
START_TEST(test_sampler_sums_every_primary)
{
    cluster_prepare();
    static const int counts[3] = {5, 7, 11}, lens[3] = {2, 3, 4};
    char key[64];
    for (int k = 0; k < NP; k++) {
        redisContext *c = node(P[k]);
        for (int i = 0; i < counts[k]; i++) {
            key_on(key, sizeof key, "cache:s:", k, i);
            expect_status(cmd(c, "SET %s v EX 3600", key), "OK", "SET");
        }
        key_on(key, sizeof key, "job:", k, 0);
        for (int i = 0; i < lens[k]; i++) freeReplyObject(cmd(c, "RPUSH %s x", key));
        redisFree(c);
    }
    long long direct = 0;
    for (int k = 0; k < NP; k++) { /* counted directly: SCAN MATCH on each primary */
        redisContext *c = node(P[k]);
        char cursor[32] = "0";
        do {
            redisReply *r = cmd(c, "SCAN %s MATCH cache:* COUNT 100", cursor);
            ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
            snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
            direct += (long long)r->element[1]->elements;
            freeReplyObject(r);
        } while (strcmp(cursor, "0") != 0);
        redisFree(c);
    }
    ck_assert_int_eq(direct, 5 + 7 + 11);

    keygate_on_cluster("namespace-scan-interval 200ms\n");
    const char *keys = "keygate_namespace_keys{namespace=\"cache:\",backend=\"cache\",owner=\"cache\"}";
    const char *jobs = "keygate_namespace_keys{namespace=\"job:\",backend=\"cache\",owner=\"jobs\"}";
    const char *depth = "keygate_namespace_depth{namespace=\"job:\",backend=\"cache\",owner=\"jobs\"}";
    long long deadline = now_ms() + 15000;
    for (;;) {
        char *body = metrics();
        double got = series(body, keys), gotj = series(body, jobs), gotd = series(body, depth);
        if (got == (double)direct && gotj == 3 && gotd == 2 + 3 + 4) {
            ck_assert_msg(series(body, "keygate_namespace_scan_age_seconds{backend=\"cache\"}") >= 0, "%.1500s", body);
            free(body);
            break;
        }
        ck_assert_msg(now_ms() < deadline,
                      "within 15 s (namespace-scan-interval 200ms) the sampler's keys of cache: are %g (want %lld, "
                      "counted on the primaries), of job: %g (want 3), depth %g (want 9):\n%s",
                      got, direct, gotj, gotd, body);
        free(body);
        sleep_ms(100);
    }
}
END_TEST

/* The primary's own INFO field, read directly. */
static long long node_info(int i, const char *field)
{
    redisContext *c = node(i);
    redisReply *r = cmd(c, "INFO everything");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    char pat[64];
    snprintf(pat, sizeof pat, "\r\n%s:", field);
    const char *p = strstr(r->str, pat);
    ck_assert_msg(p != NULL, "INFO of node %d has no %s", i, field);
    long long v = strtoll(p + strlen(pat), NULL, 10);
    freeReplyObject(r);
    redisFree(c);
    return v;
}

/* The capacity gauges carry node="host:port" per primary, with each node's own INFO values;
 * the single-server durable keeps its unlabelled series; promtool accepts the text. */
START_TEST(test_capacity_per_node)
{
    cluster_prepare();
    keygate_on_cluster("backend-info-interval 200ms\n");
    long long want[3];
    for (int k = 0; k < NP; k++) want[k] = node_info(P[k], "maxmemory");
    ck_assert_int_eq(want[0], 100LL * 1024 * 1024); /* the values differ per node */
    ck_assert_int_eq(want[2], 102LL * 1024 * 1024);
    long long deadline = now_ms() + 10000;
    char *body = NULL, name[256];
    for (;;) {
        body = metrics();
        int ok = 1;
        for (int k = 0; k < NP; k++) {
            snprintf(name, sizeof name, "keygate_backend_maxmemory_bytes{backend=\"cache\",node=\"127.0.0.1:%d\"}",
                     C->nodes[P[k]].tls_port);
            ok &= series(body, name) == (double)want[k];
        }
        if (ok) break;
        ck_assert_msg(now_ms() < deadline, "no per-node maxmemory equal to the nodes' INFO within 10 s:\n%.1500s",
                      body);
        free(body);
        sleep_ms(100);
    }
    for (int k = 0; k < NP; k++) {
        int port = C->nodes[P[k]].tls_port;
        snprintf(name, sizeof name, "keygate_backend_role{backend=\"cache\",node=\"127.0.0.1:%d\",role=\"master\"}",
                 port);
        ck_assert_msg(series(body, name) == 1, "%s missing:\n%.1500s", name, body);
        snprintf(name, sizeof name, "keygate_backend_node_up{backend=\"cache\",node=\"127.0.0.1:%d\"}", port);
        ck_assert_msg(series(body, name) == 1, "%s missing:\n%.1500s", name, body);
        snprintf(name, sizeof name, "keygate_backend_memory_headroom_ratio{backend=\"cache\",node=\"127.0.0.1:%d\"}",
                 port);
        ck_assert_msg(series(body, name) > 0, "%s missing:\n%.1500s", name, body);
    }
    /* the replicas are not read; the cluster has no per-instance series; durable keeps its own */
    int labelled = 0;
    for (const char *p = body; (p = strstr(p, "\nkeygate_backend_used_memory_bytes{backend=\"cache\",node=")); p++)
        labelled++;
    ck_assert_msg(labelled == NP, "%d per-node used_memory series, want %d:\n%.1500s", labelled, NP, body);
    ck_assert_msg(series(body, "keygate_backend_maxmemory_bytes{backend=\"cache\"}") < 0, "%.1500s", body);
    ck_assert_msg(series(body, "keygate_backend_maxmemory_bytes{backend=\"durable\"}") >= 0, "%.1500s", body);
    ck_assert_msg(series(body, "keygate_topology_ok{backend=\"cache\"}") == 1, "%.1500s", body);

    char why[8192];
    int rc = serverkit_promtool_check(body, h.dir, why, sizeof why);
    free(body);
    ck_assert_msg(rc == 0, "%.1500s", why);
}
END_TEST

/* /healthz until its body does (want 1) or does not (want 0) hold `line`; the body. */
static char *healthz_until(const char *line, int want, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        struct harness_http r = harness_admin_get(&h, "/healthz");
        int has = strstr(r.body, line) != NULL;
        if (has == want) return r.body;
        ck_assert_msg(now_ms() < deadline, "/healthz (%d) %s '%s' after %d ms:\n%.1500s", r.status,
                      want ? "still lacks" : "still has", line, timeout_ms, r.body); /* Check's messages are short */
        free(r.body);
        sleep_ms(100);
    }
}

/* /metrics until series `name` is `want`, timeout_ms at most (the guard reads INFO on its own
 * interval: a /healthz without a line may come before its first check). */
static void series_until(const char *name, double want, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        char *m = metrics();
        double v = series(m, name);
        free(m);
        if (v == want) return;
        ck_assert_msg(now_ms() < deadline, "%s is %g, not %g, after %d ms", name, v, want, timeout_ms);
        sleep_ms(50);
    }
}

/* A primary whose maxmemory-policy is changed to one the guard refuses for `cache` is named in
 * /healthz and turns keygate_topology_ok to 0; set back, the line goes. */
START_TEST(test_guard_names_the_node)
{
    cluster_prepare();
    keygate_on_cluster("backend-info-interval 200ms\n");
    int bad = P[1], port = C->nodes[bad].tls_port;
    char line[512];
    snprintf(line, sizeof line,
             "instance 'cache' node 127.0.0.1:%d: maxmemory-policy is noeviction, must evict (allkeys-lru, "
             "allkeys-lfu, allkeys-random or volatile-*)\n",
             port);
    char *body = healthz_until("instance 'cache' node", 0, 10000); /* every node as the guard wants */
    free(body);
    /* checked once, and found as the guard wants (before, a /healthz from before the first check
     * let this run early: flaky under load, and its message, all of /metrics, too long for Check) */
    series_until("keygate_topology_checked{backend=\"cache\"}", 1, 10000);
    series_until("keygate_topology_ok{backend=\"cache\"}", 1, 10000);

    redisContext *c = node(bad);
    expect_status(cmd(c, "CONFIG SET maxmemory-policy noeviction"), "OK", "CONFIG SET");
    body = healthz_until(line, 1, 10000);
    for (int k = 0; k < NP; k++) { /* only that node is named */
        if (P[k] == bad) continue;
        char other[64];
        snprintf(other, sizeof other, "node 127.0.0.1:%d", C->nodes[P[k]].tls_port);
        ck_assert_msg(strstr(body, other) == NULL, "%s named too:\n%s", other, body);
    }
    free(body);
    series_until("keygate_topology_ok{backend=\"cache\"}", 0, 10000);

    expect_status(cmd(c, "CONFIG SET maxmemory-policy allkeys-lfu"), "OK", "CONFIG SET");
    redisFree(c);
    body = healthz_until("instance 'cache' node", 0, 10000);
    free(body);
    char *log = harness_keygate_log(&h);
    ck_assert_ptr_nonnull(log);
    snprintf(line, sizeof line, "topology: instance 'cache' node 127.0.0.1:%d: maxmemory-policy is noeviction", port);
    ck_assert_msg(strstr(log, line) != NULL, "the log lacks '%s':\n%.1500s", line,
                  log); /* Check's messages are short */
    free(log);
}
END_TEST

/* A primary killed: before its replica takes over, the poller reports it unreachable (log, node_up
 * 0 while it lasts); after the failover its series go and the promoted replica's come, with the
 * guard clean again. */
START_TEST(test_failover_moves_the_node_series)
{
    cluster_prepare();
    /* the replicas get the guard's settings too: one is about to become a primary */
    for (int i = 0; i < CLUSTER_NODES; i++) {
        redisContext *c = node(i);
        expect_status(cmd(c, "CONFIG SET maxmemory 100mb"), "OK", "CONFIG SET maxmemory");
        expect_status(cmd(c, "CONFIG SET maxmemory-policy allkeys-lru"), "OK", "CONFIG SET maxmemory-policy");
        redisFree(c);
    }
    keygate_on_cluster("backend-info-interval 200ms\n");
    int victim = P[2], dead = C->nodes[victim].tls_port, promoted = -1;
    char name[256];
    snprintf(name, sizeof name, "keygate_backend_node_up{backend=\"cache\",node=\"127.0.0.1:%d\"}", dead);
    long long deadline = now_ms() + 10000;
    for (;;) { /* the poller has read the victim */
        char *body = metrics();
        int up = series(body, name) == 1;
        free(body);
        if (up) break;
        ck_assert_msg(now_ms() < deadline, "no %s 1 within 10 s", name);
        sleep_ms(100);
    }
    long long ms = 0;
    ck_assert_msg(cluster_kill_primary(C, victim, 20000, &promoted, &ms) == 0, "%s", cluster_last_error());
    char fresh[256];
    snprintf(fresh, sizeof fresh, "keygate_backend_node_up{backend=\"cache\",node=\"127.0.0.1:%d\"}",
             C->nodes[promoted].tls_port);
    deadline = now_ms() + 10000;
    for (;;) {
        char *body = metrics();
        int done = series(body, name) < 0 && series(body, fresh) == 1 &&
                   series(body, "keygate_topology_ok{backend=\"cache\"}") == 1;
        if (done) {
            free(body);
            break;
        }
        ck_assert_msg(now_ms() < deadline,
                      "10 s after the failover (%lld ms) /metrics still has the killed primary or lacks node %d:\n%s",
                      ms, promoted, body);
        free(body);
        sleep_ms(100);
    }
    char *log = harness_keygate_log(&h);
    ck_assert_ptr_nonnull(log);
    snprintf(name, sizeof name, "topology: instance 'cache' node 127.0.0.1:%d: unreachable (", dead);
    ck_assert_msg(strstr(log, name) != NULL, "the log never said '%s' (failover took %lld ms):\n%s", name, ms, log);
    free(log);
}
END_TEST

/* The replica of primary P[k] (a node index), from the primary's ROLE. */
static int replica_of(int k)
{
    redisContext *c = node(P[k]);
    redisReply *r = cmd(c, "ROLE");
    int found = -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[2]->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; found < 0 && i < r->element[2]->elements; i++) {
            const redisReply *rep = r->element[2]->element[i];
            if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2)
                found = cluster_node_by_port(C, atoi(rep->element[1]->str));
        }
    freeReplyObject(r);
    redisFree(c);
    ck_assert_msg(found >= 0, "primary node %d lists no replica in ROLE", P[k]);
    return found;
}

/* A client's own WAIT goes to the node of its last write: with that node's replica frozen,
 * WAIT 1 1000 answers 0 after the timeout (it went to slot 0's node before, whose replica is up,
 * and answered 1 at once: a false acknowledgement); with the replica back, 1. */
START_TEST(test_wait_goes_to_the_node_of_the_last_write)
{
    cluster_prepare();
    keygate_on_cluster(NULL);
    int k = 0;
    while (k < NP && P[k] == owners[0]) k++;
    ck_assert_int_lt(k, NP);
    char key[64];
    key_on(key, sizeof key, "cache:w", k, 0);
    int rep = replica_of(k);
    redisContext *c = harness_must_client(&h);
    expect_status(cmd(c, "SET %s v0", key), "OK", "SET");
    expect_int(cmd(c, "WAIT 1 5000"), 1, "WAIT with the write's replica up");
    ck_assert_msg(cluster_node_pause(C, rep) == 0, "%s", cluster_last_error());
    expect_status(cmd(c, "SET %s v1", key), "OK", "SET with the replica frozen");
    long long t0 = now_ms();
    redisReply *r = cmd(c, "WAIT 1 1000");
    long long took = now_ms() - t0;
    ck_assert_msg(cluster_node_resume(C, rep) == 0, "%s", cluster_last_error());
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer == 0,
                  "WAIT 1 1000 with the write's replica (node %d) frozen: %s after %lld ms (slot 0's node is %d, "
                  "the write's %d)",
                  rep, describe(r), took, owners[0], P[k]);
    freeReplyObject(r);
    expect_int(cmd(c, "WAIT 1 5000"), 1, "WAIT once the replica is back");
    redisFree(c);
}
END_TEST

/* SCRIPT LOAD through keygate loads the script on every primary, so EVALSHA runs on the keys of
 * any of them (it reached slot 0's node only: EVALSHA on the others answered NOSCRIPT); SCRIPT
 * EXISTS answers 1 only where every primary has the script. */
START_TEST(test_script_load_reaches_every_primary)
{
    cluster_prepare();
    char hash[65], extra[256];
    harness_sha256_hex("scripts-pw", hash);
    snprintf(extra, sizeof extra, "user app sha256=%s owners=cache access=rw scripts=yes\n", hash);
    keygate_on_cluster(extra);
    redisContext *c = harness_must_client(&h);
    expect_status(cmd(c, "AUTH app scripts-pw"), "OK", "AUTH");
    redisReply *r = cmd(c, "SCRIPT LOAD %s", "return redis.call('INCR', KEYS[1])");
    ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == 40, "SCRIPT LOAD: %s", describe(r));
    char sha[41];
    snprintf(sha, sizeof sha, "%s", r->str);
    freeReplyObject(r);
    for (int k = 0; k < NP; k++) { /* on every primary, read directly */
        redisContext *n = node(P[k]);
        expect_array(cmd(n, "SCRIPT EXISTS %s", sha), "SCRIPT EXISTS on the primary", 1, ":1");
        redisFree(n);
        char key[64];
        key_on(key, sizeof key, "cache:sc", k, 0);
        expect_int(cmd(c, "EVALSHA %s 1 %s", sha, key), 1, "EVALSHA on a key of this primary");
    }
    expect_array(cmd(c, "SCRIPT EXISTS %s 0000000000000000000000000000000000000000", sha), "SCRIPT EXISTS", 2, ":1",
                 ":0");
    redisContext *n = node(P[NP - 1]);
    expect_status(cmd(n, "SCRIPT FLUSH"), "OK", "one primary forgets it");
    redisFree(n);
    expect_array(cmd(c, "SCRIPT EXISTS %s", sha), "SCRIPT EXISTS after one primary's SCRIPT FLUSH", 1, ":0");
    redisFree(c);
}
END_TEST

/* ---- -NOSCRIPT answered by loading the script keygate saw (issue 30, item 4) ---- */

/* keygate on the cluster with user app (scripts=yes, password scripts-pw) and user plain (no
 * scripts, password plain-pw), at log-level debug; a client logged in as app. */
static redisContext *scripts_client(void)
{
    char app[65], plain[65], extra[512];
    harness_sha256_hex("scripts-pw", app);
    harness_sha256_hex("plain-pw", plain);
    snprintf(extra, sizeof extra,
             "user app sha256=%s owners=cache,jobs access=rw scripts=yes\n"
             "user plain sha256=%s owners=cache access=rw\n"
             "log-level debug\n",
             app, plain);
    keygate_on_cluster(extra);
    redisContext *c = harness_must_client(&h);
    expect_status(cmd(c, "AUTH app scripts-pw"), "OK", "AUTH app");
    return c;
}

/* SCRIPT FLUSH on primary P[k] itself (not through keygate): its script cache is empty. */
static void flush_scripts_on(int k)
{
    redisContext *n = node(P[k]);
    expect_status(cmd(n, "SCRIPT FLUSH"), "OK", "SCRIPT FLUSH on the node");
    redisFree(n);
}

/* Does primary P[k] hold the script sha (SCRIPT EXISTS, asked directly)? */
static int node_has_script(int k, const char *sha)
{
    redisContext *n = node(P[k]);
    redisReply *r = cmd(n, "SCRIPT EXISTS %s", sha);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1, "SCRIPT EXISTS on node %d: %s", P[k], describe(r));
    int has = (int)r->element[0]->integer;
    freeReplyObject(r);
    redisFree(n);
    return has;
}

/* keygate_cluster_scripts_loaded_total, waited for (5 s) until it is at least `want`; its value. */
static double scripts_loaded_at_least(double want)
{
    long long deadline = now_ms() + 5000;
    for (;;) {
        char *body = metrics();
        double v = series(body, "keygate_cluster_scripts_loaded_total");
        free(body);
        if (v >= want) return v;
        ck_assert_msg(now_ms() < deadline, "keygate_cluster_scripts_loaded_total is %g after 5 s, %g expected", v,
                      want);
        sleep_ms(50);
    }
}

/* (a) A script loaded through keygate (SCRIPT LOAD), then one primary's cache flushed on the node
 * itself (a restart, a node that joined): EVALSHA through keygate on a key of that primary answers
 * as the script does; keygate loaded it there (-NOSCRIPT before: the client got it). Inside a
 * MULTI the NOSCRIPT is an element of EXEC's array, and passes as Redis answers it. */
START_TEST(test_noscript_loads_the_script_seen)
{
    cluster_prepare();
    redisContext *c = scripts_client();
    redisReply *r = cmd(c, "SCRIPT LOAD %s", "return redis.call('INCR', KEYS[1])");
    ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == 40, "SCRIPT LOAD: %s", describe(r));
    char sha[41];
    snprintf(sha, sizeof sha, "%s", r->str);
    freeReplyObject(r);
    int k = NP - 1;
    char key[64];
    key_on(key, sizeof key, "cache:ns", k, 0);
    flush_scripts_on(k);
    ck_assert_int_eq(node_has_script(k, sha), 0);
    expect_int(cmd(c, "EVALSHA %s 1 %s", sha, key), 1, "EVALSHA on a key of the flushed primary");
    ck_assert_int_eq(node_has_script(k, sha), 1);
    expect_int(cmd(c, "EVALSHA %s 1 %s", sha, key), 2, "EVALSHA again (the node has it now)");
    ck_assert_double_eq(scripts_loaded_at_least(1), 1);
    /* the upper-case name a client may send: Redis lowers it, and so does keygate */
    flush_scripts_on(k);
    char upper[41];
    for (int i = 0; i < 41; i++) upper[i] = (char)(sha[i] >= 'a' && sha[i] <= 'f' ? sha[i] - 'a' + 'A' : sha[i]);
    expect_int(cmd(c, "EVALSHA %s 1 %s", upper, key), 3, "EVALSHA (upper-case name) on the flushed primary");
    ck_assert_double_eq(scripts_loaded_at_least(2), 2);
    /* pipelined, behind and ahead of other commands: each reply in its place */
    flush_scripts_on(k);
    redisAppendCommand(c, "SET %s:x a", key);
    redisAppendCommand(c, "EVALSHA %s 1 %s", sha, key);
    redisAppendCommand(c, "GET %s:x", key);
    redisAppendCommand(c, "EVALSHA %s 1 %s", sha, key);
    expect_status(next_reply(c), "OK", "SET before");
    expect_int(next_reply(c), 4, "pipelined EVALSHA on the flushed primary");
    r = next_reply(c);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, "a") == 0, "GET after: %s", describe(r));
    freeReplyObject(r);
    expect_int(next_reply(c), 5, "the EVALSHA after it");
    /* both EVALSHAs were written before the first NOSCRIPT came (one read of the pipeline, as a rule):
     * each loads the script, once */
    double loaded = scripts_loaded_at_least(3);
    ck_assert_msg(loaded == 3 || loaded == 4, "%g scripts loaded", loaded);
    /* a namespace without a TTL: the EVALSHA goes alone, not in keygate's MULTI wrap with a PEXPIRE */
    char jkey[64];
    key_on(jkey, sizeof jkey, "job:ns", k, 0);
    flush_scripts_on(k);
    expect_int(cmd(c, "EVALSHA %s 1 %s", sha, jkey), 1, "EVALSHA on a key without a TTL, on the flushed primary");
    ck_assert_double_eq(scripts_loaded_at_least(loaded + 1), loaded + 1);
    /* inside MULTI: passes, as documented */
    flush_scripts_on(k);
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "EVALSHA %s 1 %s", sha, key), "QUEUED", "EVALSHA in MULTI");
    r = cmd(c, "EXEC");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_ERROR &&
                      strncmp(r->element[0]->str, "NOSCRIPT", 8) == 0,
                  "EXEC with an EVALSHA the node lacks: %s", describe(r));
    freeReplyObject(r);
    char *log = harness_keygate_log(&h);
    ck_assert_ptr_nonnull(log);
    char want[128];
    snprintf(want, sizeof want, "answered -NOSCRIPT for script %s: loading the script keygate saw", sha);
    ck_assert_msg(strstr(log, want) != NULL, "the log never said '%s':\n%s", want, log);
    free(log);
    redisFree(c);
}
END_TEST

/* (a') During a slot's migration, an EVALSHA of a key already moved goes by -ASK to the target,
 * which lacks the script: keygate loads it there and sends the EVALSHA there again after ASKING
 * (wrapped with its PEXPIRE, and alone). It went to the slot's owner before, which sent it back
 * by -ASK, and the target's second -NOSCRIPT reached the client. */
START_TEST(test_noscript_on_an_ask_target)
{
    cluster_prepare();
    redisContext *c = scripts_client();
    redisReply *r = cmd(c, "SCRIPT LOAD %s", "return redis.call('INCR', KEYS[1])");
    ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == 40, "SCRIPT LOAD: %s", describe(r));
    char sha[41];
    snprintf(sha, sizeof sha, "%s", r->str);
    freeReplyObject(r);
    char key[64], jkey[64];
    key_on(key, sizeof key, "cache:mig", 0, 0); /* cache:mig{n} and job:mig{n}: one slot */
    snprintf(jkey, sizeof jkey, "job:mig%s", strchr(key, '{'));
    unsigned slot = (unsigned)slotmap_key_slot(key, strlen(key));
    expect_status(cmd(c, "SET %s 10", key), "OK", "SET");
    expect_status(cmd(c, "SET %s 20", jkey), "OK", "SET");
    int moved = 0;
    ck_assert_msg(cluster_migrate_begin(C, slot, P[0], P[1]) == 0, "%s", cluster_last_error());
    ck_assert_msg(cluster_migrate_keys(C, slot, P[0], P[1], 100, &moved) == 0, "%s", cluster_last_error());
    ck_assert_int_eq(moved, 2);
    flush_scripts_on(1);
    expect_int(cmd(c, "EVALSHA %s 1 %s", sha, key), 11, "EVALSHA (wrapped) of a moved key, the target flushed");
    flush_scripts_on(1);
    expect_int(cmd(c, "EVALSHA %s 1 %s", sha, jkey), 21, "EVALSHA (alone) of a moved key, the target flushed");
    ck_assert_int_eq(node_has_script(1, sha), 1);
    ck_assert_double_eq(scripts_loaded_at_least(2), 2);
    ck_assert_msg(cluster_migrate_end(C, slot, P[0], P[1]) == 0, "%s", cluster_last_error());
    redisFree(c);
}
END_TEST

/* A primary killed and its replica promoted: an EVALSHA of a script loaded through keygate before
 * runs on a key of the promoted node, whether or not that node has the script (Redis 7.0's
 * replicas do not get SCRIPT LOAD: keygate loads it there; the count says which it was). */
START_TEST(test_noscript_after_failover)
{
    cluster_prepare();
    redisContext *c = scripts_client();
    redisReply *r = cmd(c, "SCRIPT LOAD %s", "return redis.call('INCR', KEYS[1])");
    ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == 40, "SCRIPT LOAD: %s", describe(r));
    char sha[41];
    snprintf(sha, sizeof sha, "%s", r->str);
    freeReplyObject(r);
    char key[64];
    key_on(key, sizeof key, "cache:fo", 2, 0);
    expect_int(cmd(c, "EVALSHA %s 1 %s", sha, key), 1, "EVALSHA before the failover");
    /* WAIT goes to the node of the client's last write, the EVALSHA's (a script counts as a write:
     * before, it did not, and WAIT went to slot 0's node, answering 0 after 5 s) */
    expect_int(cmd(c, "WAIT 1 5000"), 1, "WAIT: the replica has the EVALSHA's write");
    int promoted = -1;
    long long ms = 0;
    ck_assert_msg(cluster_kill_primary(C, P[2], 20000, &promoted, &ms) == 0, "%s", cluster_last_error());
    redisContext *n = node(promoted);
    r = cmd(n, "SCRIPT EXISTS %s", sha);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1, "SCRIPT EXISTS: %s", describe(r));
    long long had = r->element[0]->integer;
    freeReplyObject(r);
    redisFree(n);
    expect_int(cmd(c, "EVALSHA %s 1 %s", sha, key), 2, "EVALSHA on the promoted node");
    double loaded = scripts_loaded_at_least(had ? 0 : 1);
    ck_assert_msg(loaded == (had ? 0 : 1), "the promoted node %s the script, and keygate loaded it %g times",
                  had ? "had" : "lacked", loaded);
    fprintf(stderr, "failover (%lld ms): the promoted node %s the script; keygate loaded it %g time(s)\n", ms,
            had ? "had" : "lacked", loaded);
    redisFree(c);
}
END_TEST

/* (b) EVAL through keygate remembers its script: with every primary's cache flushed directly,
 * EVALSHA through keygate still runs it on a key of each primary. */
START_TEST(test_eval_remembers_the_script)
{
    cluster_prepare();
    redisContext *c = scripts_client();
    static const char body[] = "return redis.call('INCRBY', KEYS[1], 2)";
    char key[CLUSTER_NODES][64];
    for (int k = 0; k < NP; k++) key_on(key[k], sizeof key[k], "cache:ev", k, 0);
    expect_int(cmd(c, "EVAL %s 1 %s", body, key[0]), 2, "EVAL");
    uint8_t bin[SCRIPTS_SHA_LEN];
    scripts_sha1(body, strlen(body), bin);
    char sha[41];
    for (int i = 0; i < SCRIPTS_SHA_LEN; i++) snprintf(sha + 2 * i, 3, "%02x", bin[i]);
    for (int k = 0; k < NP; k++) flush_scripts_on(k);
    for (int k = 0; k < NP; k++) {
        expect_int(cmd(c, "EVALSHA %s 1 %s", sha, key[k]), k == 0 ? 4 : 2, "EVALSHA on a flushed primary");
        ck_assert_int_eq(node_has_script(k, sha), 1);
    }
    ck_assert_double_eq(scripts_loaded_at_least(NP), NP);
    /* EVAL_RO too */
    static const char ro[] = "return redis.call('GET', KEYS[1])";
    redisReply *r = cmd(c, "EVAL_RO %s 1 %s", ro, key[1]);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, "2") == 0, "EVAL_RO: %s", describe(r));
    freeReplyObject(r);
    scripts_sha1(ro, strlen(ro), bin);
    for (int i = 0; i < SCRIPTS_SHA_LEN; i++) snprintf(sha + 2 * i, 3, "%02x", bin[i]);
    flush_scripts_on(1);
    r = cmd(c, "EVALSHA_RO %s 1 %s", sha, key[1]);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, "2") == 0, "EVALSHA_RO: %s", describe(r));
    freeReplyObject(r);
    redisFree(c);
}
END_TEST

/* (c) A script keygate never saw (loaded on a node directly, or unknown anywhere) cannot be
 * loaded: the NOSCRIPT passes, word for word as the node answers it. */
START_TEST(test_noscript_of_an_unknown_script_passes)
{
    cluster_prepare();
    redisContext *c = scripts_client();
    char key[64];
    key_on(key, sizeof key, "cache:un", 0, 0);
    static const char unknown[] = "ffffffffffffffffffffffffffffffffffffffff";
    redisContext *n = node(P[0]);
    redisReply *want = cmd(n, "EVALSHA %s 1 %s", unknown, key);
    ck_assert_msg(want->type == REDIS_REPLY_ERROR && strncmp(want->str, "NOSCRIPT", 8) == 0, "on the node: %s",
                  describe(want));
    redisReply *r = cmd(c, "EVALSHA %s 1 %s", unknown, key);
    ck_assert_msg(r->type == REDIS_REPLY_ERROR && strcmp(r->str, want->str) == 0,
                  "EVALSHA of an unknown script through keygate: %s, the node says '%s'", describe(r), want->str);
    freeReplyObject(r);
    /* loaded on the node directly, bypassing keygate, then flushed: keygate never saw its body */
    r = cmd(n, "SCRIPT LOAD %s", "return 'direct'");
    ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == 40, "SCRIPT LOAD on the node: %s", describe(r));
    char sha[41];
    snprintf(sha, sizeof sha, "%s", r->str);
    freeReplyObject(r);
    expect_status(cmd(n, "SCRIPT FLUSH"), "OK", "SCRIPT FLUSH on the node");
    r = cmd(c, "EVALSHA %s 1 %s", sha, key);
    ck_assert_msg(r->type == REDIS_REPLY_ERROR && strcmp(r->str, want->str) == 0,
                  "EVALSHA of a script keygate never saw: %s, the node says '%s'", describe(r), want->str);
    freeReplyObject(r);
    freeReplyObject(want);
    redisFree(n);
    ck_assert_double_eq(scripts_loaded_at_least(0), 0);
    redisFree(c);
}
END_TEST

/* (d) A user without scripts=yes is refused EVAL, EVALSHA and SCRIPT LOAD as before, and a refused
 * EVAL teaches keygate nothing: its script is not loaded for another user's EVALSHA. */
START_TEST(test_scripts_refused_without_scripts_yes)
{
    cluster_prepare();
    redisContext *c = scripts_client();
    redisContext *p = harness_must_client(&h);
    expect_status(cmd(p, "AUTH plain plain-pw"), "OK", "AUTH plain");
    static const char body[] = "return 'refused'";
    char key[64];
    key_on(key, sizeof key, "cache:rf", 0, 0);
    expect_error(cmd(p, "EVAL %s 1 %s", body, key), "DENIED scripts are refused", "EVAL without scripts=yes");
    expect_error(cmd(p, "SCRIPT LOAD %s", body), "DENIED scripts are refused", "SCRIPT LOAD without scripts=yes");
    uint8_t bin[SCRIPTS_SHA_LEN];
    scripts_sha1(body, strlen(body), bin);
    char sha[41];
    for (int i = 0; i < SCRIPTS_SHA_LEN; i++) snprintf(sha + 2 * i, 3, "%02x", bin[i]);
    expect_error(cmd(p, "EVALSHA %s 1 %s", sha, key), "DENIED scripts are refused", "EVALSHA without scripts=yes");
    expect_error(cmd(c, "EVALSHA %s 1 %s", sha, key), "NOSCRIPT", "EVALSHA of the refused EVAL's script");
    ck_assert_double_eq(scripts_loaded_at_least(0), 0);
    redisFree(p);
    redisFree(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cluster_ops");
    TCase *tc = harness_tcase(s, "ops", 90, setup, teardown);
    harness_add_test(tc, test_audit_scans_every_primary);
    harness_add_test(tc, test_sampler_sums_every_primary);
    harness_add_test(tc, test_capacity_per_node);
    harness_add_test(tc, test_guard_names_the_node);
    harness_add_test(tc, test_wait_goes_to_the_node_of_the_last_write);
    harness_add_test(tc, test_script_load_reaches_every_primary);
    harness_add_test(tc, test_noscript_loads_the_script_seen);
    harness_add_test(tc, test_noscript_on_an_ask_target);
    harness_add_test(tc, test_eval_remembers_the_script);
    harness_add_test(tc, test_noscript_of_an_unknown_script_passes);
    harness_add_test(tc, test_scripts_refused_without_scripts_yes);
    /* a cluster of its own: the failover leaves it with a dead node */
    TCase *tf = harness_tcase(s, "failover", 90, setup, teardown);
    harness_add_test(tf, test_failover_moves_the_node_series);
    TCase *ts = harness_tcase(s, "script-failover", 90, setup, teardown); /* its own cluster too */
    harness_add_test(ts, test_noscript_after_failover);
    int failed = harness_run(s);
    int left = cluster_leftovers();
    if (left) fprintf(stderr, "POST-CONDITION FAILED: %d redis-server(s) of this suite still run\n", left);
    return failed == 0 && left == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
