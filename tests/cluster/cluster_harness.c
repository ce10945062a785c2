/* cluster_harness.c: starts a real local TLS Redis Cluster (3 primaries + 3 replicas) on free loopback ports for the cluster suites, and drives it: failover, SIGSTOP, reshard, a held slot migration. */
#include "cluster_harness.h"
#include "procs.h"
#include "serverkit.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define START_MS 10000  /* a node answers PING */
#define FORM_MS 30000   /* the cluster is formed after --cluster create */
#define CREATE_MS 60000 /* redis-cli --cluster create runs */
#define POLL_MS 50      /* between two looks at a condition */

/* Ports: TLS ports in [TLS_LOW, TLS_HIGH] so that the bus port (+10000) stays below the
 * kernel's ephemeral range (32768 and up on Debian: no outgoing connection takes it between
 * the pick and the bind), plain ports in their own range; all below 45000. */
#define TLS_LOW 20000
#define TLS_HIGH 22767
#define PLAIN_LOW 23000
#define PLAIN_HIGH 29999
#define BUS_OFFSET 10000

const char *cluster_last_error(void)
{
    return procs_last_error();
}

int cluster_leftovers(void)
{
    return procs_leftovers();
}

/* "node i", as the errors name node i. */
static const char *node_name(int i)
{
    static char names[CLUSTER_MAX_NODES][16];
    assert(i >= 0 && i < CLUSTER_MAX_NODES);
    snprintf(names[i], sizeof names[i], "node %d", i);
    return names[i];
}

/* ---- ports ---- */

/* Pick every node's plain, TLS and bus ports, all free and different. */
static int pick_ports(struct cluster *c)
{
    static const struct procs_port_ranges ranges = {TLS_LOW, TLS_HIGH, PLAIN_LOW, PLAIN_HIGH, BUS_OFFSET};
    int tls[CLUSTER_NODES], plain[CLUSTER_NODES];
    if (procs_pick_ports(CLUSTER_NODES, &ranges, tls, plain) != 0) return -1;
    for (int i = 0; i < CLUSTER_NODES; i++) {
        c->nodes[i].tls_port = tls[i];
        c->nodes[i].bus_port = tls[i] + BUS_OFFSET;
        c->nodes[i].plain_port = plain[i];
    }
    return 0;
}

/* ---- connections and replies ---- */

redisContext *cluster_connect(const struct cluster *c, int i)
{
    assert(i >= 0 && i < c->nnodes);
    return serverkit_connect(c->nodes[i].plain_port, c->password, 2000, 10000);
}

/* One command on a new connection to node i; NULL (the last error says why) when it cannot
 * connect or gets no reply. io_ms bounds the wait. */
static redisReply *node_command(const struct cluster *c, int i, int io_ms, const char *fmt, ...)
{
    redisContext *ctx = serverkit_connect(c->nodes[i].plain_port, c->password, 1000, io_ms);
    if (ctx == NULL) {
        procs_set_err("node %d (port %d) does not answer", i, c->nodes[i].plain_port);
        return NULL;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    if (r == NULL) procs_set_err("node %d (port %d): %s", i, c->nodes[i].plain_port, ctx->errstr);
    redisFree(ctx);
    return r;
}

int cluster_node_by_port(const struct cluster *c, int port)
{
    for (int i = 0; i < c->nnodes; i++)
        if (c->nodes[i].plain_port == port || c->nodes[i].tls_port == port) return i;
    return -1;
}

int cluster_node_by_id(const struct cluster *c, const char *id)
{
    for (int i = 0; i < c->nnodes; i++)
        if (c->nodes[i].id[0] != '\0' && strcmp(c->nodes[i].id, id) == 0) return i;
    return -1;
}

int cluster_node_alive(const struct cluster *c, int i)
{
    assert(i >= 0 && i < CLUSTER_MAX_NODES);
    return procs_alive(c->nodes[i].pid, c->nodes[i].start);
}

/* Can node i answer now (running and not SIGSTOPped)? */
static int node_answers(const struct cluster *c, int i)
{
    return cluster_node_alive(c, i) && !c->nodes[i].stopped;
}

enum cluster_role cluster_node_role(const struct cluster *c, int i)
{
    if (!node_answers(c, i)) return CLUSTER_ROLE_UNKNOWN;
    redisReply *r = node_command(c, i, 2000, "ROLE");
    enum cluster_role role = CLUSTER_ROLE_UNKNOWN;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->type == REDIS_REPLY_STRING) {
        if (strcmp(r->element[0]->str, "master") == 0) role = CLUSTER_ROLE_PRIMARY;
        if (strcmp(r->element[0]->str, "slave") == 0) role = CLUSTER_ROLE_REPLICA;
    }
    freeReplyObject(r);
    return role;
}

/* owners[] from a CLUSTER SHARDS reply: per shard with slots, its primary (role master,
 * the online one first) as a node index; -1 for slots no shard names. */
static int shards_owners(const struct cluster *c, const redisReply *r, int owners[CLUSTER_SLOTS])
{
    for (int s = 0; s < CLUSTER_SLOTS; s++) owners[s] = -1;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        procs_set_err("CLUSTER SHARDS: %s", serverkit_reply_text(r));
        return -1;
    }
    for (size_t k = 0; k < r->elements; k++) {
        const redisReply *slots = serverkit_map_get(r->element[k], "slots"),
                         *nodes = serverkit_map_get(r->element[k], "nodes");
        if (slots == NULL || nodes == NULL || slots->type != REDIS_REPLY_ARRAY || nodes->type != REDIS_REPLY_ARRAY) {
            procs_set_err("CLUSTER SHARDS: shard %zu has no slots or nodes", k);
            return -1;
        }
        if (slots->elements == 0) continue;
        int primary = -1;
        for (int pass = 0; pass < 2 && primary < 0; pass++)
            for (size_t j = 0; j < nodes->elements && primary < 0; j++) {
                const redisReply *n = nodes->element[j];
                if (serverkit_str_is(serverkit_map_get(n, "role"), "master") &&
                    (pass == 1 || serverkit_str_is(serverkit_map_get(n, "health"), "online"))) {
                    const redisReply *id = serverkit_map_get(n, "id");
                    primary = id != NULL && id->type == REDIS_REPLY_STRING ? cluster_node_by_id(c, id->str) : -1;
                }
            }
        for (size_t j = 0; j + 1 < slots->elements; j += 2) {
            long long a = slots->element[j]->integer, b = slots->element[j + 1]->integer;
            if (slots->element[j]->type != REDIS_REPLY_INTEGER || a < 0 || b >= CLUSTER_SLOTS || a > b) {
                procs_set_err("CLUSTER SHARDS: bad slot range in shard %zu", k);
                return -1;
            }
            for (long long s = a; s <= b; s++) owners[s] = primary;
        }
    }
    return 0;
}

int cluster_slot_owners(const struct cluster *c, int i, int owners[CLUSTER_SLOTS])
{
    redisReply *r = node_command(c, i, 5000, "CLUSTER SHARDS");
    if (r == NULL) return -1;
    int rc = shards_owners(c, r, owners);
    freeReplyObject(r);
    return rc;
}

/* The first node that answers, or -1. */
static int any_node(const struct cluster *c)
{
    for (int i = 0; i < c->nnodes; i++)
        if (node_answers(c, i)) return i;
    return -1;
}

int cluster_slot_owner(const struct cluster *c, unsigned slot)
{
    static int owners[CLUSTER_SLOTS];
    assert(slot < CLUSTER_SLOTS);
    int i = any_node(c);
    if (i < 0 || cluster_slot_owners(c, i, owners) != 0) return -1;
    return owners[slot];
}

int cluster_primaries(const struct cluster *c, int *out)
{
    static int owners[CLUSTER_SLOTS];
    int i = any_node(c);
    if (i < 0 || cluster_slot_owners(c, i, owners) != 0) return -1;
    int seen[CLUSTER_MAX_NODES] = {0}, n = 0;
    for (int s = 0; s < CLUSTER_SLOTS; s++)
        if (owners[s] >= 0 && !seen[owners[s]]) seen[owners[s]] = 1;
    for (int k = 0; k < c->nnodes; k++)
        if (seen[k] && cluster_node_alive(c, k)) out[n++] = k;
    return n;
}

/* Is the cluster ok as every answering node sees it? 1 yes, 0 not yet (the last error: why). */
static int cluster_ok_now(struct cluster *c)
{
    static int first[CLUSTER_SLOTS], other[CLUSTER_SLOTS];
    int base = -1;
    for (int i = 0; i < c->nnodes; i++) {
        if (!node_answers(c, i)) continue;
        redisReply *r = node_command(c, i, 2000, "CLUSTER INFO");
        if (r == NULL) return 0;
        int ok = r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok") != NULL &&
                 strstr(r->str, "cluster_slots_ok:16384") != NULL;
        if (!ok) procs_set_err("node %d: CLUSTER INFO: %.200s", i, serverkit_reply_text(r));
        freeReplyObject(r);
        if (!ok) return 0;
        int *owners = base < 0 ? first : other;
        if (cluster_slot_owners(c, i, owners) != 0) return 0;
        for (int s = 0; s < CLUSTER_SLOTS; s++) {
            if (owners[s] < 0 || !cluster_node_alive(c, owners[s])) {
                procs_set_err("node %d: slot %d is owned by %s", i, s, owners[s] < 0 ? "no known node" : "a dead node");
                return 0;
            }
            if (base >= 0 && owners[s] != first[s]) {
                procs_set_err("nodes %d and %d disagree on slot %d: node %d vs node %d", base, i, s, first[s],
                              owners[s]);
                return 0;
            }
        }
        if (base < 0) base = i;
    }
    if (base < 0) procs_set_err("no node answers");
    return base >= 0;
}

int cluster_wait_ok(struct cluster *c, int timeout_ms)
{
    long long deadline = procs_mono_ms() + timeout_ms;
    for (;;) {
        if (cluster_ok_now(c)) return 0;
        if (procs_mono_ms() >= deadline) {
            procs_wrap_err("cluster not ok within %d ms", timeout_ms);
            return -1;
        }
        procs_nap_ms(POLL_MS);
    }
}

/* Every primary owning slots (`primaries` of them: 3 at the start, -1 any number) has exactly one replica whose link
 * is up, and every other running node is such a replica (ROLE on the replicas)? */
static int replicas_ok_now(struct cluster *c, int primaries_wanted)
{
    int primaries[CLUSTER_MAX_NODES], np = cluster_primaries(c, primaries);
    if (np < 1 || (primaries_wanted >= 0 && np != primaries_wanted)) {
        procs_set_err("%d primaries own slots, not %d", np, primaries_wanted);
        return 0;
    }
    int replicas_of[CLUSTER_MAX_NODES] = {0};
    for (int i = 0; i < c->nnodes; i++) {
        int is_primary = 0;
        for (int k = 0; k < np; k++) is_primary |= primaries[k] == i;
        if (is_primary || c->nodes[i].removed || !cluster_node_alive(c, i)) continue;
        redisReply *r = node_command(c, i, 2000, "ROLE");
        int ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 5 &&
                 serverkit_str_is(r->element[0], "slave") && serverkit_str_is(r->element[3], "connected") &&
                 r->element[2]->type == REDIS_REPLY_INTEGER;
        int master = ok ? cluster_node_by_port(c, (int)r->element[2]->integer) : -1;
        freeReplyObject(r);
        if (!ok || master < 0) {
            procs_set_err("node %d is not a connected replica of a node of the cluster yet", i);
            return 0;
        }
        replicas_of[master]++;
    }
    for (int k = 0; k < np; k++)
        if (replicas_of[primaries[k]] != 1) {
            procs_set_err("primary node %d has %d replicas", primaries[k], replicas_of[primaries[k]]);
            return 0;
        }
    return 1;
}

/* ---- start and stop ---- */

static int node_write_files(struct cluster *c, int i)
{
    struct cluster_node *n = &c->nodes[i];
    char conf[4 * PATH_MAX + 1024];
    char dir[sizeof c->dir + 16];
    snprintf(dir, sizeof dir, "%s/node%d", c->dir, i);
    snprintf(n->dir, sizeof n->dir, "%s", dir);
    snprintf(n->conf_file, sizeof n->conf_file, "%s/redis.conf", dir);
    snprintf(n->log_file, sizeof n->log_file, "%s/redis.log", dir);
    snprintf(conf, sizeof conf,
             "bind 127.0.0.1\nport %d\ntls-port %d\ncluster-port %d\n"
             "tls-cert-file \"%s/build/certs/server.crt\"\ntls-key-file \"%s/build/certs/server.key\"\n"
             "tls-ca-cert-file \"%s/build/certs/ca.crt\"\ntls-auth-clients optional\n"
             "tls-cluster yes\ntls-replication yes\n"
             "cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-node-timeout %d\n"
             /* a replica is always allowed to fail over, however long its link was down */
             "cluster-replica-validity-factor 0\n"
             /* a replica syncs at once (7.0 waits 5 s for more replicas before a diskless sync) */
             "repl-diskless-sync-delay 0\n"
             "requirepass %s\nmasterauth %s\ndir \"%s\"\nsave \"\"\nappendonly no\ndaemonize no\nlogfile \"\"\n%s",
             n->plain_port, n->tls_port, n->bus_port, c->root, c->root, c->root, c->node_timeout_ms, c->password,
             c->password, n->dir,
             c->hostnames ? "cluster-announce-hostname localhost\ncluster-preferred-endpoint-type hostname\n" : "");
    if (mkdir(n->dir, 0700) != 0 || serverkit_write_file(n->conf_file, conf, 0600) != 0) {
        procs_set_err("writing node %d's files in %s: %s", i, n->dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Wait until node i answers PING on its plain port; -2 when it exited (a port taken). */
static int node_wait_ready(struct cluster *c, int i)
{
    struct cluster_node *n = &c->nodes[i];
    long long deadline = procs_mono_ms() + START_MS;
    while (procs_mono_ms() < deadline) {
        if (!cluster_node_alive(c, i)) {
            procs_set_err("node %d (ports %d/%d) exited during start-up", i, n->plain_port, n->tls_port);
            return -2;
        }
        redisContext *ctx = serverkit_connect(n->plain_port, c->password, 200, 1000);
        if (ctx != NULL) {
            redisReply *r = redisCommand(ctx, "CLUSTER MYID");
            int ok = r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40;
            if (ok) memcpy(n->id, r->str, 41);
            freeReplyObject(r);
            redisFree(ctx);
            if (ok) return 0;
        }
        procs_nap_ms(POLL_MS);
    }
    procs_set_err("node %d did not answer on 127.0.0.1:%d within %d ms", i, n->plain_port, START_MS);
    return -1;
}

/* Start node i's redis-server with its config (its dir and files written). */
static int node_spawn(struct cluster *c, int i)
{
    struct cluster_node *n = &c->nodes[i];
    char *argv[] = {"redis-server", n->conf_file, NULL};
    n->pid = procs_spawn(argv, n->log_file, NULL, getpid(), getpgrp(), &n->start);
    if (n->pid < 0) {
        n->pid = 0;
        procs_set_err("fork for redis-server: %s", strerror(errno));
        return -1;
    }
    n->stopped = 0;
    return 0;
}

static void certs_path(const struct cluster *c, const char *file, char *out, size_t len)
{
    snprintf(out, len, "%s/build/certs/%s", c->root, file);
}

/* Run redis-cli over TLS with argv[] after the TLS options; its output goes to the cluster's
 * redis-cli.log. 0 when it exits 0 within timeout_ms. */
static int run_redis_cli(struct cluster *c, const char *what, const char *const *args, int nargs, int timeout_ms)
{
    char ca[PATH_MAX + 32], log[sizeof c->dir + 32];
    certs_path(c, "ca.crt", ca, sizeof ca);
    snprintf(log, sizeof log, "%s/redis-cli.log", c->dir);
    const char *argv[64];
    int n = 0;
    argv[n++] = "redis-cli";
    argv[n++] = "--tls";
    argv[n++] = "--cacert";
    argv[n++] = ca;
    assert(nargs + n < 63);
    for (int k = 0; k < nargs; k++) argv[n++] = args[k];
    argv[n] = NULL;
    unsigned long long start;
    long long t0 = procs_mono_ms();
    pid_t pid = procs_spawn((char *const *)argv, log, c->password, getpid(), getpgrp(), &start);
    if (pid < 0) {
        procs_set_err("fork for redis-cli %s: %s", what, strerror(errno));
        return -1;
    }
    int status = procs_wait_child(pid, timeout_ms);
    if (status != 0) {
        serverkit_print_log_tail("redis-cli", log);
        procs_set_err("redis-cli %s: %s %d after %lld ms (log %s)", what,
                      status == -1        ? "timed out, killed:"
                      : WIFEXITED(status) ? "exit status"
                                          : "signal",
                      status == -1        ? timeout_ms
                      : WIFEXITED(status) ? WEXITSTATUS(status)
                                          : WTERMSIG(status),
                      procs_mono_ms() - t0, log);
        return -1;
    }
    return 0;
}

static int cluster_create(struct cluster *c)
{
    char addrs[CLUSTER_NODES][32];
    const char *args[CLUSTER_NODES + 8];
    int n = 0;
    args[n++] = "--cluster";
    args[n++] = "create";
    for (int i = 0; i < CLUSTER_NODES; i++) {
        snprintf(addrs[i], sizeof addrs[i], "127.0.0.1:%d", c->nodes[i].tls_port);
        args[n++] = addrs[i];
    }
    args[n++] = "--cluster-replicas";
    args[n++] = "1";
    args[n++] = "--cluster-yes";
    return run_redis_cli(c, "--cluster create", args, n, CREATE_MS);
}

static void kill_all(struct cluster *c)
{
    for (int i = 0; i < c->nnodes; i++) procs_kill(c->nodes[i].pid, c->nodes[i].start);
    long long deadline = procs_mono_ms() + PROCS_GONE_MS;
    for (int i = 0; i < c->nnodes; i++) {
        struct cluster_node *n = &c->nodes[i];
        if (procs_reap(n->pid, n->start, deadline, node_name(i))) {
            procs_forget(n->pid);
            n->pid = 0;
        }
    }
}

void cluster_stop(struct cluster *c)
{
    if (c == NULL) return;
    kill_all(c);
    const char *keep = getenv("CLUSTER_KEEP");
    if (keep != NULL && strcmp(keep, "1") == 0)
        fprintf(stderr, "cluster_harness: kept %s\n", c->dir);
    else if (c->dir[0] != '\0')
        serverkit_remove_tree(c->dir);
    munmap(c, sizeof *c);
}

static int start_once(struct cluster *c)
{
    int rc = pick_ports(c);
    for (int i = 0; i < CLUSTER_NODES && rc == 0; i++) rc = node_write_files(c, i);
    for (int i = 0; i < CLUSTER_NODES && rc == 0; i++) rc = node_spawn(c, i);
    for (int i = 0; i < CLUSTER_NODES && rc == 0; i++) rc = node_wait_ready(c, i);
    if (rc == 0) rc = cluster_create(c);
    long long deadline = procs_mono_ms() + FORM_MS;
    if (rc == 0) rc = cluster_wait_ok(c, FORM_MS);
    while (rc == 0 && !replicas_ok_now(c, 3)) {
        if (procs_mono_ms() >= deadline) {
            procs_wrap_err("replicas not connected within %d ms", FORM_MS);
            rc = -1;
        }
        procs_nap_ms(POLL_MS);
    }
    if (rc != 0) {
        char why[PROCS_ERR_MAX];
        snprintf(why, sizeof why, "%s", procs_last_error());
        fprintf(stderr, "cluster_start: %s\n", why);
        for (int i = 0; i < CLUSTER_NODES; i++)
            if (c->nodes[i].log_file[0] != '\0') {
                char title[32];
                snprintf(title, sizeof title, "node %d", i);
                serverkit_print_log_tail(title, c->nodes[i].log_file);
            }
        kill_all(c);
        procs_set_err("%s", why);
    }
    return rc;
}

struct cluster *cluster_start(void)
{
    if (procs_install("cluster_harness", 0) != 0) {
        procs_set_err("mmap: %s", strerror(errno));
        return NULL;
    }
    struct cluster *c = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED) {
        procs_set_err("mmap: %s", strerror(errno));
        return NULL;
    }
    memset(c, 0, sizeof *c);
    c->owner = getpid();
    c->nnodes = CLUSTER_NODES;
    const char *hostnames = getenv("CLUSTER_HOSTNAMES");
    c->hostnames = hostnames != NULL && strcmp(hostnames, "1") == 0;
    const char *timeout = getenv("CLUSTER_NODE_TIMEOUT_MS");
    c->node_timeout_ms = timeout != NULL && atoi(timeout) > 0 ? atoi(timeout) : 1000;
    char ca[PATH_MAX + 32];
    if (getcwd(c->root, sizeof c->root) == NULL) {
        procs_set_err("getcwd: %s", strerror(errno));
        munmap(c, sizeof *c);
        return NULL;
    }
    certs_path(c, "server.key", ca, sizeof ca);
    if (access(ca, R_OK) != 0) {
        procs_set_err("%s missing: run scripts/gen-certs build/certs from the repo root (make certs)", ca);
        munmap(c, sizeof *c);
        return NULL;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(c->dir, sizeof c->dir, "%s/keygate-cluster-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(c->dir) == NULL) {
        procs_set_err("mkdtemp %s: %s", c->dir, strerror(errno));
        munmap(c, sizeof *c);
        return NULL;
    }
    serverkit_random_hex(c->password, 32);
    snprintf(c->pass_file, sizeof c->pass_file, "%s/cluster.pass", c->dir);
    char line[80];
    snprintf(line, sizeof line, "%s\n", c->password);
    if (serverkit_write_file(c->pass_file, line, 0600) != 0) {
        procs_set_err("writing %s: %s", c->pass_file, strerror(errno));
        cluster_stop(c);
        return NULL;
    }
    for (int attempt = 1; attempt <= 3; attempt++) {
        if (start_once(c) == 0) return c;
        if (attempt < 3) {
            fprintf(stderr, "cluster_start: attempt %d failed; again with other ports\n", attempt);
            /* a fresh set of node dirs: the failed attempt's nodes.conf must not be reused */
            for (int i = 0; i < CLUSTER_NODES; i++)
                if (c->nodes[i].dir[0] != '\0') serverkit_remove_tree(c->nodes[i].dir);
            memset(c->nodes, 0, sizeof c->nodes);
            c->nnodes = CLUSTER_NODES;
        }
    }
    char why[PROCS_ERR_MAX];
    snprintf(why, sizeof why, "%s", procs_last_error());
    cluster_stop(c);
    procs_set_err("%s", why);
    return NULL;
}

/* ---- operations ---- */

int cluster_node_kill(struct cluster *c, int i)
{
    assert(i >= 0 && i < c->nnodes);
    struct cluster_node *n = &c->nodes[i];
    if (procs_kill_wait(n->pid, n->start, 0, node_name(i)) != 0) return -1;
    n->stopped = 0;
    /* the pid stays recorded: the runner reaps it (cluster_stop); procs_alive says it is dead */
    return 0;
}

int cluster_kill_primary(struct cluster *c, int i, int timeout_ms, int *promoted, long long *ms)
{
    static int before[CLUSTER_SLOTS], after[CLUSTER_SLOTS];
    if (cluster_slot_owners(c, i, before) != 0) return -1;
    int nslots = 0;
    for (int s = 0; s < CLUSTER_SLOTS; s++) nslots += before[s] == i;
    if (nslots == 0) {
        procs_set_err("node %d owns no slot", i);
        return -1;
    }
    long long t0 = procs_mono_ms();
    if (cluster_node_kill(c, i) != 0 || cluster_wait_ok(c, timeout_ms) != 0) return -1;
    long long took = procs_mono_ms() - t0;
    int k = any_node(c);
    if (k < 0 || cluster_slot_owners(c, k, after) != 0) return -1;
    int heir = -1;
    for (int s = 0; s < CLUSTER_SLOTS; s++) {
        if (before[s] != i) continue;
        if (heir < 0) heir = after[s];
        if (after[s] != heir || heir == i || heir < 0) {
            procs_set_err("slot %d of killed node %d is owned by node %d after the failover, not by one heir (%d)", s,
                          i, after[s], heir);
            return -1;
        }
    }
    if (promoted != NULL) *promoted = heir;
    if (ms != NULL) *ms = took;
    return 0;
}

int cluster_node_pause(struct cluster *c, int i)
{
    assert(i >= 0 && i < c->nnodes);
    struct cluster_node *n = &c->nodes[i];
    if (procs_pause(n->pid, n->start, node_name(i)) != 0) return -1;
    n->stopped = 1;
    return 0;
}

int cluster_node_resume(struct cluster *c, int i)
{
    struct cluster_node *n = &c->nodes[i];
    if (procs_resume(n->pid, n->start, node_name(i)) != 0) return -1;
    n->stopped = 0;
    return 0;
}

int cluster_reshard(struct cluster *c, int from, int to, int n, int timeout_ms)
{
    char addr[32], slots[16];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", c->nodes[from].tls_port);
    snprintf(slots, sizeof slots, "%d", n);
    const char *args[] = {
        "--cluster",     "reshard",         addr,  "--cluster-from", c->nodes[from].id, "--cluster-to",
        c->nodes[to].id, "--cluster-slots", slots, "--cluster-yes"};
    long long deadline = procs_mono_ms() + timeout_ms;
    if (run_redis_cli(c, "--cluster reshard", args, (int)(sizeof args / sizeof args[0]), timeout_ms) != 0) return -1;
    long long left = deadline - procs_mono_ms();
    return cluster_wait_ok(c, left > 1000 ? (int)left : 1000);
}

/* CLUSTER SETSLOT slot <how> [id] on node i; 0 on +OK. */
static int setslot(struct cluster *c, int i, unsigned slot, const char *how, const char *id)
{
    redisReply *r = id != NULL ? node_command(c, i, 5000, "CLUSTER SETSLOT %u %s %s", slot, how, id)
                               : node_command(c, i, 5000, "CLUSTER SETSLOT %u %s", slot, how);
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (r != NULL && !ok) procs_set_err("node %d: CLUSTER SETSLOT %u %s: %s", i, slot, how, serverkit_reply_text(r));
    freeReplyObject(r);
    return ok ? 0 : -1;
}

int cluster_migrate_begin(struct cluster *c, unsigned slot, int from, int to)
{
    assert(slot < CLUSTER_SLOTS && from != to);
    int owner = cluster_slot_owner(c, slot);
    if (owner != from) {
        procs_set_err("slot %u is owned by node %d, not by node %d", slot, owner, from);
        return -1;
    }
    if (setslot(c, to, slot, "IMPORTING", c->nodes[from].id) != 0) return -1;
    return setslot(c, from, slot, "MIGRATING", c->nodes[to].id);
}

int cluster_migrate_keys(struct cluster *c, unsigned slot, int from, int to, int max, int *moved)
{
    *moved = 0;
    redisContext *ctx = cluster_connect(c, from);
    if (ctx == NULL) {
        procs_set_err("node %d does not answer", from);
        return -1;
    }
    redisReply *keys = redisCommand(ctx, "CLUSTER GETKEYSINSLOT %u %d", slot, max);
    int rc = keys != NULL && keys->type == REDIS_REPLY_ARRAY ? 0 : -1;
    if (rc != 0) procs_set_err("node %d: CLUSTER GETKEYSINSLOT: %s", from, serverkit_reply_text(keys));
    if (rc == 0 && keys->elements > 0) {
        /* MIGRATE host port "" 0 timeout AUTH password KEYS k...: the source connects to the
         * target's TLS port (tls-cluster yes: Redis migrates over TLS) */
        size_t argc = 9 + keys->elements;
        const char **argv = calloc(argc, sizeof *argv);
        size_t *lens = calloc(argc, sizeof *lens);
        char port[16];
        snprintf(port, sizeof port, "%d", c->nodes[to].tls_port);
        const char *head[] = {"MIGRATE", "127.0.0.1", port, "", "0", "5000", "AUTH", c->password, "KEYS"};
        assert(argv != NULL && lens != NULL);
        for (size_t k = 0; k < 9; k++) {
            argv[k] = head[k];
            lens[k] = strlen(head[k]);
        }
        for (size_t k = 0; k < keys->elements; k++) {
            argv[9 + k] = keys->element[k]->str;
            lens[9 + k] = keys->element[k]->len;
        }
        redisReply *r = redisCommandArgv(ctx, (int)argc, argv, lens);
        if (r == NULL || r->type != REDIS_REPLY_STATUS) {
            procs_set_err("node %d: MIGRATE to node %d: %s", from, to,
                          r != NULL ? serverkit_reply_text(r) : ctx->errstr);
            rc = -1;
        } else {
            *moved = (int)keys->elements;
        }
        freeReplyObject(r);
        free(argv);
        free(lens);
    }
    freeReplyObject(keys);
    redisFree(ctx);
    return rc;
}

int cluster_migrate_end(struct cluster *c, unsigned slot, int from, int to)
{
    if (setslot(c, to, slot, "NODE", c->nodes[to].id) != 0) return -1;
    /* a source that gave its last slot may have learnt it from `to` already and turned itself into a replica of
     * `to` (cluster-allow-replica-migration): it refuses SETSLOT then, and needs none */
    if (setslot(c, from, slot, "NODE", c->nodes[to].id) != 0 && cluster_node_role(c, from) != CLUSTER_ROLE_REPLICA)
        return -1;
    int primaries[CLUSTER_MAX_NODES], np = cluster_primaries(c, primaries);
    for (int k = 0; k < np; k++)
        if (primaries[k] != from && primaries[k] != to && setslot(c, primaries[k], slot, "NODE", c->nodes[to].id) != 0)
            return -1;
    return cluster_wait_ok(c, 10000);
}

/* ---- nodes added, removed, started again, failed over ---- */

/* Does every running node other than i list node i's id in CLUSTER NODES without a handshake or fail flag? */
static int node_known_now(struct cluster *c, int i)
{
    for (int k = 0; k < c->nnodes; k++) {
        if (k == i || c->nodes[k].removed || !node_answers(c, k)) continue;
        redisReply *r = node_command(c, k, 2000, "CLUSTER NODES");
        const char *line = r != NULL && r->type == REDIS_REPLY_STRING ? strstr(r->str, c->nodes[i].id) : NULL;
        const char *eol = line != NULL ? strchr(line, '\n') : NULL;
        int ok = line != NULL;
        if (ok) {
            char text[512];
            snprintf(text, sizeof text, "%.*s", eol != NULL ? (int)(eol - line) : 500, line);
            ok = strstr(text, "handshake") == NULL && strstr(text, "fail") == NULL && strstr(text, "noaddr") == NULL;
        }
        if (!ok) procs_set_err("node %d does not know node %d yet", k, i);
        freeReplyObject(r);
        if (!ok) return 0;
    }
    return 1;
}

/* Is node i a replica of node p with its link up? */
static int replica_linked_now(struct cluster *c, int i, int p)
{
    redisReply *r = node_command(c, i, 2000, "ROLE");
    int ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 5 &&
             serverkit_str_is(r->element[0], "slave") && serverkit_str_is(r->element[3], "connected") &&
             r->element[2]->type == REDIS_REPLY_INTEGER && r->element[2]->integer == c->nodes[p].tls_port;
    if (!ok) procs_set_err("node %d is not a connected replica of node %d (ROLE: %s)", i, p, serverkit_reply_text(r));
    freeReplyObject(r);
    return ok;
}

/* Wait (timeout_ms) until cond(c, i, arg) holds; its last error says why not. */
static int wait_for(struct cluster *c, int i, int arg, int (*cond)(struct cluster *, int, int), int timeout_ms,
                    const char *what)
{
    long long deadline = procs_mono_ms() + timeout_ms;
    for (;;) {
        if (cond(c, i, arg)) return 0;
        if (procs_mono_ms() >= deadline) {
            procs_wrap_err("%s not within %d ms", what, timeout_ms);
            return -1;
        }
        procs_nap_ms(POLL_MS);
    }
}

static int known_cond(struct cluster *c, int i, int arg)
{
    (void)arg;
    return node_known_now(c, i);
}

int cluster_node_add(struct cluster *c, int replica_of, int *index)
{
    int i = 0;
    while (i < c->nnodes && !c->nodes[i].removed) i++;
    if (i == CLUSTER_MAX_NODES) {
        procs_set_err("no free node entry (%d in use)", CLUSTER_MAX_NODES);
        return -1;
    }
    struct cluster_node *n = &c->nodes[i];
    if (n->dir[0] != '\0') serverkit_remove_tree(n->dir);
    memset(n, 0, sizeof *n);
    if (i == c->nnodes) c->nnodes++;
    static const struct procs_port_ranges ranges = {TLS_LOW, TLS_HIGH, PLAIN_LOW, PLAIN_HIGH, BUS_OFFSET};
    int tls, plain;
    if (procs_pick_ports(1, &ranges, &tls, &plain) != 0) return -1;
    n->tls_port = tls;
    n->bus_port = tls + BUS_OFFSET;
    n->plain_port = plain;
    if (node_write_files(c, i) != 0 || node_spawn(c, i) != 0 || node_wait_ready(c, i) != 0) return -1;
    int k = 0;
    while (k < c->nnodes && (k == i || c->nodes[k].removed || !node_answers(c, k))) k++;
    if (k >= c->nnodes) {
        procs_set_err("no running node to meet node %d", i);
        return -1;
    }
    redisReply *r =
        node_command(c, i, 5000, "CLUSTER MEET 127.0.0.1 %d %d", c->nodes[k].tls_port, c->nodes[k].bus_port);
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (r != NULL && !ok) procs_set_err("node %d: CLUSTER MEET: %s", i, serverkit_reply_text(r));
    freeReplyObject(r);
    if (!ok || wait_for(c, i, 0, known_cond, FORM_MS, "the new node known to every node") != 0 ||
        cluster_wait_ok(c, FORM_MS) != 0) /* the new node too: it knows every slot's owner */
        return -1;
    if (replica_of >= 0) {
        r = node_command(c, i, 5000, "CLUSTER REPLICATE %s", c->nodes[replica_of].id);
        ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        if (r != NULL && !ok) procs_set_err("node %d: CLUSTER REPLICATE: %s", i, serverkit_reply_text(r));
        freeReplyObject(r);
        if (!ok || wait_for(c, i, replica_of, replica_linked_now, FORM_MS, "the new replica's link up") != 0) return -1;
    }
    if (index != NULL) *index = i;
    return 0;
}

/* Has no running node but i node i's id in CLUSTER NODES any more? */
static int forgotten_cond(struct cluster *c, int i, int arg)
{
    (void)arg;
    for (int k = 0; k < c->nnodes; k++) {
        if (k == i || c->nodes[k].removed || !node_answers(c, k)) continue;
        redisReply *r = node_command(c, k, 2000, "CLUSTER NODES");
        int known = r == NULL || r->type != REDIS_REPLY_STRING || strstr(r->str, c->nodes[i].id) != NULL;
        freeReplyObject(r);
        if (known) {
            procs_set_err("node %d still knows node %d", k, i);
            return 0;
        }
    }
    return 1;
}

int cluster_node_remove(struct cluster *c, int i)
{
    assert(i >= 0 && i < c->nnodes);
    static int owners[CLUSTER_SLOTS];
    int k = any_node(c);
    if (k < 0 || cluster_slot_owners(c, k, owners) != 0) return -1;
    for (int s = 0; s < CLUSTER_SLOTS; s++)
        if (owners[s] == i) {
            procs_set_err("node %d still owns slot %d", i, s);
            return -1;
        }
    /* killed first: a node that still runs would tell the others about itself again (gossip) */
    if (cluster_node_kill(c, i) != 0) return -1;
    for (k = 0; k < c->nnodes; k++) {
        if (k == i || c->nodes[k].removed || !node_answers(c, k)) continue;
        redisReply *r = node_command(c, k, 5000, "CLUSTER FORGET %s", c->nodes[i].id);
        int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        if (r != NULL && !ok) procs_set_err("node %d: CLUSTER FORGET node %d: %s", k, i, serverkit_reply_text(r));
        freeReplyObject(r);
        if (!ok) return -1;
    }
    if (wait_for(c, i, 0, forgotten_cond, FORM_MS, "the removed node forgotten by every node") != 0) return -1;
    procs_reap(c->nodes[i].pid, c->nodes[i].start, procs_mono_ms() + PROCS_GONE_MS, node_name(i));
    procs_forget(c->nodes[i].pid);
    c->nodes[i].pid = 0;
    c->nodes[i].removed = 1;
    return 0;
}

int cluster_node_restart(struct cluster *c, int i)
{
    assert(i >= 0 && i < c->nnodes && !c->nodes[i].removed);
    if (cluster_node_alive(c, i)) {
        procs_set_err("node %d still runs", i);
        return -1;
    }
    procs_reap(c->nodes[i].pid, c->nodes[i].start, procs_mono_ms() + PROCS_GONE_MS, node_name(i));
    procs_forget(c->nodes[i].pid);
    return node_spawn(c, i) == 0 && node_wait_ready(c, i) == 0 ? 0 : -1;
}

static int primary_cond(struct cluster *c, int i, int arg)
{
    (void)arg;
    if (cluster_node_role(c, i) == CLUSTER_ROLE_PRIMARY && cluster_slot_owner(c, 0) >= 0) {
        int primaries[CLUSTER_MAX_NODES], np = cluster_primaries(c, primaries);
        for (int k = 0; k < np; k++)
            if (primaries[k] == i) return 1;
    }
    procs_set_err("node %d does not own slots as a primary yet", i);
    return 0;
}

int cluster_failover(struct cluster *c, int i, int timeout_ms)
{
    assert(i >= 0 && i < c->nnodes);
    long long deadline = procs_mono_ms() + timeout_ms;
    redisReply *r = node_command(c, i, 5000, "CLUSTER FAILOVER");
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (r != NULL && !ok) procs_set_err("node %d: CLUSTER FAILOVER: %s", i, serverkit_reply_text(r));
    freeReplyObject(r);
    if (!ok || wait_for(c, i, 0, primary_cond, timeout_ms, "the replica promoted") != 0) return -1;
    long long left = deadline - procs_mono_ms();
    return cluster_wait_ok(c, left > 1000 ? (int)left : 1000);
}

int cluster_wait_settled(struct cluster *c, int timeout_ms)
{
    long long deadline = procs_mono_ms() + timeout_ms;
    if (cluster_wait_ok(c, timeout_ms) != 0) return -1;
    while (!replicas_ok_now(c, -1)) {
        if (procs_mono_ms() >= deadline) {
            procs_wrap_err("replicas not settled within %d ms", timeout_ms);
            return -1;
        }
        procs_nap_ms(POLL_MS);
    }
    return 0;
}
