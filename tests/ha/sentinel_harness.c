/* sentinel_harness.c: starts a real local Sentinel-managed deployment (a TLS primary, two replicas, three sentinels) on free loopback ports for the HA suites, and drives it: failover, SIGKILL, SIGSTOP, sentinel restarts. */
#include "sentinel_harness.h"
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

#define START_MS 10000 /* a server answers PING */
#define REPL_MS 20000  /* the replicas are online before the sentinels start */
#define FORM_MS 30000  /* the sentinels know the primary, the replicas and each other */
#define POLL_MS 50     /* between two looks at a condition */
#define PORT_LOW 20000 /* every port: below the ephemeral range (32768) and 45000 */
#define PORT_HIGH 31999

const char *ha_last_error(void)
{
    return procs_last_error();
}

int ha_leftovers(void)
{
    return procs_leftovers();
}

/* Start a server of h (argv, log) as the owner's child (procs_spawn); its pid and start time
 * in p. 0, or -1 (the last error says why). */
static int spawn(struct ha *h, struct ha_proc *p, char *const argv[])
{
    unsigned long long start;
    pid_t pid = procs_spawn(argv, p->log_file, NULL, h->owner, h->owner_pgid, &start);
    if (pid < 0) {
        procs_set_err("fork for %s: %s", argv[0], strerror(errno));
        return -1;
    }
    p->pid = pid;
    p->start = start;
    p->stopped = 0;
    return 0;
}

/* ---- logs ---- */

static void print_logs(const struct ha *h)
{
    char title[32];
    for (int i = 0; i < h->nnodes; i++) {
        snprintf(title, sizeof title, "node %d", i);
        if (h->nodes[i].log_file[0] != '\0') serverkit_print_log_tail(title, h->nodes[i].log_file);
    }
    for (int s = 0; s < HA_SENTINELS; s++) {
        snprintf(title, sizeof title, "sentinel %d", s);
        if (h->sentinels[s].log_file[0] != '\0') serverkit_print_log_tail(title, h->sentinels[s].log_file);
    }
}

/* ---- ports ---- */

/* Pick a plain and a TLS port for each of the n processes, all free and different. */
static int pick_ports(struct ha_proc *const *procs, int n)
{
    static const struct procs_port_ranges ranges = {PORT_LOW, PORT_HIGH, PORT_LOW, PORT_HIGH, 0};
    int tls[HA_NODES + HA_SENTINELS], plain[HA_NODES + HA_SENTINELS];
    assert(n <= HA_NODES + HA_SENTINELS);
    if (procs_pick_ports(n, &ranges, tls, plain) != 0) return -1;
    for (int i = 0; i < n; i++) {
        procs[i]->plain_port = plain[i];
        procs[i]->tls_port = tls[i];
    }
    return 0;
}

/* ---- connections and replies ---- */

redisContext *ha_connect(const struct ha *h, int i)
{
    assert(i >= 0 && i < HA_NODES);
    return serverkit_connect(h->nodes[i].plain_port, h->password, 2000, 10000);
}

redisContext *ha_sentinel_connect(const struct ha *h, int s)
{
    assert(s >= 0 && s < HA_SENTINELS);
    return serverkit_connect(h->sentinels[s].plain_port, h->sentinel_password, 2000, 10000);
}

/* One command on a new connection to p (its password pw); NULL (the last error says why)
 * when it cannot connect or gets no reply. io_ms bounds the wait. */
static redisReply *proc_command(const struct ha_proc *p, const char *pw, const char *who, int io_ms, const char *fmt,
                                ...) __attribute__((format(printf, 5, 6)));
static redisReply *proc_command(const struct ha_proc *p, const char *pw, const char *who, int io_ms, const char *fmt,
                                ...)
{
    redisContext *ctx = serverkit_connect(p->plain_port, pw, 1000, io_ms);
    if (ctx == NULL) {
        procs_set_err("%s (port %d) does not answer", who, p->plain_port);
        return NULL;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    if (r == NULL) procs_set_err("%s (port %d): %s", who, p->plain_port, ctx->errstr);
    redisFree(ctx);
    return r;
}

#define NODE_CMD(h, i, io_ms, ...) proc_command(&(h)->nodes[i], (h)->password, node_name(i), io_ms, __VA_ARGS__)
#define SENTINEL_CMD(h, s, io_ms, ...)                                                                                 \
    proc_command(&(h)->sentinels[s], (h)->sentinel_password, sentinel_name(s), io_ms, __VA_ARGS__)

static const char *node_name(int i)
{
    static const char *names[] = {"node 0", "node 1", "node 2", "node 3"};
    return i >= 0 && i < HA_NODES ? names[i] : "node ?";
}

static const char *sentinel_name(int s)
{
    static const char *names[] = {"sentinel 0", "sentinel 1", "sentinel 2"};
    return s >= 0 && s < HA_SENTINELS ? names[s] : "sentinel ?";
}

static const char *map_str(const redisReply *m, const char *name)
{
    const redisReply *v = serverkit_map_get(m, name);
    return v != NULL && v->type == REDIS_REPLY_STRING ? v->str : "";
}

int ha_node_by_port(const struct ha *h, int port)
{
    for (int i = 0; i < h->nnodes; i++)
        if (h->nodes[i].plain_port == port || h->nodes[i].tls_port == port) return i;
    return -1;
}

int ha_node_alive(const struct ha *h, int i)
{
    assert(i >= 0 && i < HA_NODES);
    return procs_alive(h->nodes[i].pid, h->nodes[i].start);
}

int ha_sentinel_alive(const struct ha *h, int s)
{
    assert(s >= 0 && s < HA_SENTINELS);
    return procs_alive(h->sentinels[s].pid, h->sentinels[s].start);
}

/* Can the process answer now (running and not SIGSTOPped)? */
static int proc_answers(const struct ha_proc *p)
{
    return procs_alive(p->pid, p->start) && !p->stopped;
}

enum ha_role ha_node_role(const struct ha *h, int i, int *primary_port, int *link_up)
{
    if (primary_port != NULL) *primary_port = -1;
    if (link_up != NULL) *link_up = 0;
    if (!proc_answers(&h->nodes[i])) return HA_ROLE_UNKNOWN;
    redisReply *r = NODE_CMD(h, i, 2000, "ROLE");
    enum ha_role role = HA_ROLE_UNKNOWN;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0) {
        if (serverkit_str_is(r->element[0], "master")) role = HA_ROLE_PRIMARY;
        if (serverkit_str_is(r->element[0], "sentinel")) role = HA_ROLE_SENTINEL;
        if (serverkit_str_is(r->element[0], "slave") && r->elements >= 5 &&
            r->element[2]->type == REDIS_REPLY_INTEGER) {
            role = HA_ROLE_REPLICA;
            if (primary_port != NULL) *primary_port = (int)r->element[2]->integer;
            if (link_up != NULL) *link_up = serverkit_str_is(r->element[3], "connected");
        }
    }
    freeReplyObject(r);
    return role;
}

int ha_sentinel_primary(const struct ha *h, int s)
{
    if (!proc_answers(&h->sentinels[s])) {
        procs_set_err("sentinel %d is not running", s);
        return -1;
    }
    redisReply *r = SENTINEL_CMD(h, s, 2000, "SENTINEL get-master-addr-by-name %s", h->master_name);
    int node = -1;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING) {
        node = ha_node_by_port(h, atoi(r->element[1]->str));
        if (node < 0 || h->nodes[node].tls_port != atoi(r->element[1]->str))
            procs_set_err("sentinel %d names %s:%s, not a node's TLS port", s, serverkit_reply_text(r->element[0]),
                          r->element[1]->str);
    } else if (r != NULL) {
        procs_set_err("sentinel %d: get-master-addr-by-name: %s", s, serverkit_reply_text(r));
    }
    freeReplyObject(r);
    return node;
}

int ha_primary(const struct ha *h)
{
    int agreed = -1, asked = 0;
    for (int s = 0; s < HA_SENTINELS; s++) {
        if (!proc_answers(&h->sentinels[s])) continue;
        int p = ha_sentinel_primary(h, s);
        if (p < 0) return -1;
        if (asked > 0 && p != agreed) {
            procs_set_err("the sentinels disagree: node %d, then node %d (sentinel %d)", agreed, p, s);
            return -1;
        }
        agreed = p;
        asked++;
    }
    if (asked == 0) procs_set_err("no sentinel answers");
    return agreed;
}

/* Does every answering sentinel name one primary other than `other` in SENTINEL MASTER,
 * with flags just "master" when want_idle? Its index, or -1 (the last error says why). */
static int sentinels_agree(const struct ha *h, int other, int want_idle)
{
    int agreed = -1, asked = 0;
    for (int s = 0; s < HA_SENTINELS; s++) {
        if (!proc_answers(&h->sentinels[s])) continue;
        int p = ha_sentinel_primary(h, s);
        if (p < 0) return -1;
        if (p == other) {
            procs_set_err("sentinel %d still names node %d", s, p);
            return -1;
        }
        if (asked > 0 && p != agreed) {
            procs_set_err("the sentinels disagree: node %d, then node %d (sentinel %d)", agreed, p, s);
            return -1;
        }
        agreed = p;
        asked++;
        if (!want_idle) continue;
        redisReply *r = SENTINEL_CMD(h, s, 2000, "SENTINEL MASTER %s", h->master_name);
        int idle =
            r != NULL && strcmp(map_str(r, "flags"), "master") == 0 && atoi(map_str(r, "port")) == h->nodes[p].tls_port;
        if (r != NULL && !idle)
            procs_set_err("sentinel %d: SENTINEL MASTER: port %s flags %s", s, map_str(r, "port"), map_str(r, "flags"));
        freeReplyObject(r);
        if (!idle) return -1;
    }
    if (asked == 0) procs_set_err("no sentinel answers");
    return agreed;
}

/* Is every other answering data node a replica of p with its link up? */
static int replicas_follow(const struct ha *h, int p)
{
    for (int i = 0; i < h->nnodes; i++) {
        if (i == p || !proc_answers(&h->nodes[i])) continue;
        int port, up;
        enum ha_role role = ha_node_role(h, i, &port, &up);
        if (role != HA_ROLE_REPLICA || port != h->nodes[p].tls_port || !up) {
            procs_set_err("node %d: role %s, replicating from port %d (node %d is at %d), link %s", i,
                          role == HA_ROLE_PRIMARY   ? "master"
                          : role == HA_ROLE_REPLICA ? "replica"
                                                    : "unknown",
                          port, p, h->nodes[p].tls_port, up ? "up" : "down");
            return 0;
        }
    }
    return 1;
}

int ha_wait_settled(struct ha *h, int timeout_ms, int *primary)
{
    long long deadline = procs_mono_ms() + timeout_ms;
    for (;;) {
        int p = sentinels_agree(h, -1, 1);
        if (p >= 0) {
            if (ha_node_role(h, p, NULL, NULL) != HA_ROLE_PRIMARY)
                procs_set_err("node %d, the sentinels' primary, does not answer ROLE master", p);
            else if (replicas_follow(h, p)) {
                if (primary != NULL) *primary = p;
                return 0;
            }
        }
        if (procs_mono_ms() >= deadline) {
            procs_wrap_err("not settled within %d ms", timeout_ms);
            print_logs(h);
            return -1;
        }
        procs_nap_ms(POLL_MS);
    }
}

int ha_wait_promoted(struct ha *h, int old, int timeout_ms, int *promoted)
{
    long long deadline = procs_mono_ms() + timeout_ms;
    for (;;) {
        int p = sentinels_agree(h, old, 0);
        if (p >= 0) {
            if (ha_node_role(h, p, NULL, NULL) == HA_ROLE_PRIMARY) {
                if (promoted != NULL) *promoted = p;
                return 0;
            }
            procs_set_err("node %d, the sentinels' new primary, does not answer ROLE master", p);
        }
        if (procs_mono_ms() >= deadline) {
            procs_wrap_err("no new primary (other than node %d) within %d ms", old, timeout_ms);
            print_logs(h);
            return -1;
        }
        procs_nap_ms(POLL_MS);
    }
}

/* ---- start and stop ---- */

static void certs_path(const struct ha *h, const char *file, char *out, size_t len)
{
    snprintf(out, len, "%s/build/certs/%s", h->root, file);
}

/* The TLS lines every server's config has. */
static void tls_lines(const struct ha *h, const struct ha_proc *p, char *out, size_t len)
{
    snprintf(out, len,
             "bind 127.0.0.1\nport %d\ntls-port %d\n"
             "tls-cert-file \"%s/build/certs/server.crt\"\ntls-key-file \"%s/build/certs/server.key\"\n"
             "tls-ca-cert-file \"%s/build/certs/ca.crt\"\ntls-auth-clients optional\ntls-replication yes\n"
             "dir \"%s\"\ndaemonize no\nlogfile \"\"\n",
             p->plain_port, p->tls_port, h->root, h->root, h->root, p->dir);
}

/* Data node i's dir and config: a replica of primary_tls_port when > 0. */
static int node_write_files(struct ha *h, int i, int primary_tls_port)
{
    struct ha_proc *n = &h->nodes[i];
    char conf[4 * PATH_MAX + 2048], common[4 * PATH_MAX + 512], replicaof[64] = "";
    snprintf(n->dir, sizeof n->dir, "%s/node%d", h->dir, i);
    snprintf(n->conf_file, sizeof n->conf_file, "%s/node%d/redis.conf", h->dir, i);
    snprintf(n->log_file, sizeof n->log_file, "%s/node%d/redis.log", h->dir, i);
    tls_lines(h, n, common, sizeof common);
    if (primary_tls_port > 0)
        snprintf(replicaof, sizeof replicaof, "replicaof %s %d\n", h->hostnames ? "localhost" : "127.0.0.1",
                 primary_tls_port);
    snprintf(conf, sizeof conf,
             "%srequirepass %s\nmasterauth %s\n"
             "appendonly %s\nappendfsync everysec\nsave \"\"\nmaxmemory-policy noeviction\n"
             /* a replica syncs at once (7.0 waits 5 s for more replicas before a diskless sync) */
             "repl-diskless-sync-delay 0\n%s%s",
             common, h->password, h->password, n->aof ? "yes" : "no", replicaof,
             h->hostnames ? "replica-announce-ip localhost\n" : "");
    if (mkdir(n->dir, 0700) != 0 || serverkit_write_file(n->conf_file, conf, 0600) != 0) {
        procs_set_err("writing node %d's files in %s: %s", i, n->dir, strerror(errno));
        return -1;
    }
    return 0;
}

static int sentinel_write_files(struct ha *h, int s)
{
    struct ha_proc *p = &h->sentinels[s];
    char conf[4 * PATH_MAX + 2048], common[4 * PATH_MAX + 512];
    snprintf(p->dir, sizeof p->dir, "%s/sentinel%d", h->dir, s);
    snprintf(p->conf_file, sizeof p->conf_file, "%s/sentinel%d/sentinel.conf", h->dir, s);
    snprintf(p->log_file, sizeof p->log_file, "%s/sentinel%d/sentinel.log", h->dir, s);
    tls_lines(h, p, common, sizeof common);
    const char *m = h->master_name;
    snprintf(conf, sizeof conf,
             "%srequirepass %s\nsentinel sentinel-pass %s\n"
             "%ssentinel monitor %s %s %d %d\nsentinel auth-pass %s %s\n"
             "sentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s 5000\n"
             "sentinel parallel-syncs %s 2\n",
             common, h->sentinel_password, h->sentinel_password,
             h->hostnames ? "sentinel resolve-hostnames yes\nsentinel announce-hostnames yes\n" : "", m,
             h->hostnames ? "localhost" : "127.0.0.1", h->nodes[0].tls_port, HA_QUORUM, m, h->password, m,
             h->down_after_ms, m, m);
    if (mkdir(p->dir, 0700) != 0 || serverkit_write_file(p->conf_file, conf, 0600) != 0) {
        procs_set_err("writing sentinel %d's files in %s: %s", s, p->dir, strerror(errno));
        return -1;
    }
    return 0;
}

static int node_spawn(struct ha *h, int i)
{
    char *argv[] = {"redis-server", h->nodes[i].conf_file, NULL};
    return spawn(h, &h->nodes[i], argv);
}

static int sentinel_spawn(struct ha *h, int s)
{
    char *argv[] = {"redis-server", h->sentinels[s].conf_file, "--sentinel", NULL};
    return spawn(h, &h->sentinels[s], argv);
}

/* Wait until p answers PING on its plain port; -2 when it exited (a port taken). */
static int wait_ready(const struct ha_proc *p, const char *pw, const char *who)
{
    long long deadline = procs_mono_ms() + START_MS;
    while (procs_mono_ms() < deadline) {
        if (!procs_alive(p->pid, p->start)) {
            procs_set_err("%s (ports %d/%d) exited during start-up (log %s)", who, p->plain_port, p->tls_port,
                          p->log_file);
            return -2;
        }
        redisContext *ctx = serverkit_connect(p->plain_port, pw, 200, 1000);
        if (ctx != NULL) {
            redisReply *r = redisCommand(ctx, "PING");
            int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
            freeReplyObject(r);
            redisFree(ctx);
            if (ok) return 0;
        }
        procs_nap_ms(POLL_MS);
    }
    procs_set_err("%s did not answer on 127.0.0.1:%d within %d ms", who, p->plain_port, START_MS);
    return -1;
}

/* Does the primary list `want` replicas with state=online (INFO replication)? */
static int primary_has_replicas(const struct ha *h, int p, int want)
{
    redisReply *r = NODE_CMD(h, p, 2000, "INFO replication");
    int online = 0;
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        for (const char *q = r->str; (q = strstr(q, ",state=online,")) != NULL; q++) online++;
    if (r != NULL && online != want) procs_set_err("node %d lists %d replicas online, not %d", p, online, want);
    freeReplyObject(r);
    return online == want;
}

/* Does sentinel s know the primary p (flags "master"), `replicas` replicas flagged just
 * "slave" that are nodes of h, and the other sentinels (flags "sentinel")? */
static int sentinel_knows_all(const struct ha *h, int s, int p, int replicas)
{
    if (ha_sentinel_primary(h, s) != p) {
        if (procs_last_error()[0] == '\0') procs_set_err("sentinel %d does not name node %d", s, p);
        return 0;
    }
    redisReply *r = SENTINEL_CMD(h, s, 2000, "SENTINEL REPLICAS %s", h->master_name);
    int ok = r != NULL && r->type == REDIS_REPLY_ARRAY && (int)r->elements == replicas;
    for (size_t k = 0; ok && k < r->elements; k++)
        ok = strcmp(map_str(r->element[k], "flags"), "slave") == 0 &&
             ha_node_by_port(h, atoi(map_str(r->element[k], "port"))) >= 0;
    if (r != NULL && !ok)
        procs_set_err("sentinel %d lists %zu replicas (want %d, each flagged just \"slave\")", s,
                      r->type == REDIS_REPLY_ARRAY ? r->elements : 0, replicas);
    freeReplyObject(r);
    if (!ok) return 0;
    r = SENTINEL_CMD(h, s, 2000, "SENTINEL SENTINELS %s", h->master_name);
    ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == HA_SENTINELS - 1;
    for (size_t k = 0; ok && k < r->elements; k++) ok = strcmp(map_str(r->element[k], "flags"), "sentinel") == 0;
    if (r != NULL && !ok)
        procs_set_err("sentinel %d knows %zu other sentinels (want %d, each flagged just \"sentinel\")", s,
                      r->type == REDIS_REPLY_ARRAY ? r->elements : 0, HA_SENTINELS - 1);
    freeReplyObject(r);
    return ok;
}

/* Does sentinel s list data node i among the replicas, flagged just "slave"? */
static int sentinel_lists_replica(const struct ha *h, int s, int i)
{
    redisReply *r = SENTINEL_CMD(h, s, 2000, "SENTINEL REPLICAS %s", h->master_name);
    int found = 0;
    for (size_t k = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++)
        found |= atoi(map_str(r->element[k], "port")) == h->nodes[i].tls_port &&
                 strcmp(map_str(r->element[k], "flags"), "slave") == 0;
    if (r != NULL && !found)
        procs_set_err("sentinel %d does not list node %d (port %d) as a replica", s, i, h->nodes[i].tls_port);
    freeReplyObject(r);
    return found;
}

static void reap_proc(struct ha_proc *p, const char *who, long long deadline)
{
    if (p->pid <= 0 || !procs_reap(p->pid, p->start, deadline, who)) return;
    /* reaped (no /proc entry left): forget it; a zombie another process must reap keeps its
     * entry until the owner's procs_reap_mine */
    if (procs_stat(p->pid, NULL) != p->start) procs_forget(p->pid);
    p->pid = 0;
    p->stopped = 0;
}

static void kill_all(struct ha *h)
{
    for (int s = 0; s < HA_SENTINELS; s++) procs_kill(h->sentinels[s].pid, h->sentinels[s].start);
    for (int i = 0; i < HA_NODES; i++) procs_kill(h->nodes[i].pid, h->nodes[i].start);
    long long deadline = procs_mono_ms() + PROCS_GONE_MS;
    for (int s = 0; s < HA_SENTINELS; s++) reap_proc(&h->sentinels[s], sentinel_name(s), deadline);
    for (int i = 0; i < HA_NODES; i++) reap_proc(&h->nodes[i], node_name(i), deadline);
    if (getpid() == h->owner) procs_reap_mine();
}

void ha_stop(struct ha *h)
{
    if (h == NULL) return;
    kill_all(h);
    const char *keep = getenv("HA_KEEP");
    if (keep != NULL && strcmp(keep, "1") == 0)
        fprintf(stderr, "sentinel_harness: kept %s\n", h->dir);
    else if (h->dir[0] != '\0')
        serverkit_remove_tree(h->dir);
    munmap(h, sizeof *h);
}

static int start_once(struct ha *h)
{
    struct ha_proc *procs[HA_START_NODES + HA_SENTINELS];
    for (int i = 0; i < HA_START_NODES; i++) procs[i] = &h->nodes[i];
    for (int s = 0; s < HA_SENTINELS; s++) procs[HA_START_NODES + s] = &h->sentinels[s];
    int rc = pick_ports(procs, HA_START_NODES + HA_SENTINELS);
    h->nnodes = HA_START_NODES;
    for (int i = 0; i < HA_START_NODES && rc == 0; i++) {
        h->nodes[i].aof = 1;
        rc = node_write_files(h, i, i == 0 ? 0 : h->nodes[0].tls_port);
    }
    for (int s = 0; s < HA_SENTINELS && rc == 0; s++) rc = sentinel_write_files(h, s);
    for (int i = 0; i < HA_START_NODES && rc == 0; i++) rc = node_spawn(h, i);
    for (int i = 0; i < HA_START_NODES && rc == 0; i++) rc = wait_ready(&h->nodes[i], h->password, node_name(i));
    /* the replicas online before the sentinels start: a sentinel learns them from the
     * primary's INFO, which it reads at once on connecting and then every 10 s */
    long long deadline = procs_mono_ms() + REPL_MS;
    while (rc == 0 && !(primary_has_replicas(h, 0, 2) && replicas_follow(h, 0))) {
        if (procs_mono_ms() >= deadline) {
            procs_wrap_err("replicas not online within %d ms", REPL_MS);
            rc = -1;
        }
        procs_nap_ms(POLL_MS);
    }
    for (int s = 0; s < HA_SENTINELS && rc == 0; s++) rc = sentinel_spawn(h, s);
    for (int s = 0; s < HA_SENTINELS && rc == 0; s++)
        rc = wait_ready(&h->sentinels[s], h->sentinel_password, sentinel_name(s));
    deadline = procs_mono_ms() + FORM_MS;
    for (int s = 0; s < HA_SENTINELS && rc == 0;) {
        procs_clear_err();
        if (sentinel_knows_all(h, s, 0, 2)) {
            s++;
            continue;
        }
        if (procs_mono_ms() >= deadline) {
            procs_wrap_err("the sentinels did not know the deployment within %d ms", FORM_MS);
            rc = -1;
        }
        procs_nap_ms(POLL_MS);
    }
    if (rc != 0) {
        char why[PROCS_ERR_MAX];
        snprintf(why, sizeof why, "%s", procs_last_error());
        fprintf(stderr, "ha_start: %s\n", why);
        print_logs(h);
        kill_all(h);
        procs_set_err("%s", why);
    }
    return rc;
}

struct ha *ha_start(void)
{
    struct ha *h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (h == MAP_FAILED || procs_install("sentinel_harness", 1) != 0) {
        procs_set_err("mmap or PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
        if (h != MAP_FAILED) munmap(h, sizeof *h);
        return NULL;
    }
    memset(h, 0, sizeof *h);
    h->owner = getpid();
    h->owner_pgid = getpgrp();
    snprintf(h->master_name, sizeof h->master_name, "keygate-ha");
    const char *down_after = getenv("HA_DOWN_AFTER_MS");
    h->down_after_ms = down_after != NULL && atoi(down_after) > 0 ? atoi(down_after) : 1000;
    const char *hostnames = getenv("HA_HOSTNAMES");
    h->hostnames = hostnames != NULL && strcmp(hostnames, "1") == 0;
    char path[PATH_MAX + 32];
    if (getcwd(h->root, sizeof h->root) == NULL) {
        procs_set_err("getcwd: %s", strerror(errno));
        munmap(h, sizeof *h);
        return NULL;
    }
    certs_path(h, "server.key", path, sizeof path);
    if (access(path, R_OK) != 0) {
        procs_set_err("%s missing: run scripts/gen-certs build/certs from the repo root (make certs)", path);
        munmap(h, sizeof *h);
        return NULL;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(h->dir, sizeof h->dir, "%s/keygate-ha-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(h->dir) == NULL) {
        procs_set_err("mkdtemp %s: %s", h->dir, strerror(errno));
        munmap(h, sizeof *h);
        return NULL;
    }
    serverkit_random_hex(h->password, 32);
    serverkit_random_hex(h->sentinel_password, 32);
    snprintf(h->pass_file, sizeof h->pass_file, "%s/nodes.pass", h->dir);
    snprintf(h->sentinel_pass_file, sizeof h->sentinel_pass_file, "%s/sentinels.pass", h->dir);
    char line[80], line2[80];
    snprintf(line, sizeof line, "%s\n", h->password);
    snprintf(line2, sizeof line2, "%s\n", h->sentinel_password);
    if (serverkit_write_file(h->pass_file, line, 0600) != 0 ||
        serverkit_write_file(h->sentinel_pass_file, line2, 0600) != 0) {
        procs_set_err("writing %s: %s", h->pass_file, strerror(errno));
        ha_stop(h);
        return NULL;
    }
    for (int attempt = 1; attempt <= 3; attempt++) {
        if (start_once(h) == 0) return h;
        if (attempt < 3) {
            fprintf(stderr, "ha_start: attempt %d failed; again with other ports\n", attempt);
            /* fresh dirs: the failed attempt's AOF and rewritten configs must not be reused */
            for (int i = 0; i < HA_NODES; i++)
                if (h->nodes[i].dir[0] != '\0') serverkit_remove_tree(h->nodes[i].dir);
            for (int s = 0; s < HA_SENTINELS; s++)
                if (h->sentinels[s].dir[0] != '\0') serverkit_remove_tree(h->sentinels[s].dir);
            memset(h->nodes, 0, sizeof h->nodes);
            memset(h->sentinels, 0, sizeof h->sentinels);
        }
    }
    char why[PROCS_ERR_MAX];
    snprintf(why, sizeof why, "%s", procs_last_error());
    ha_stop(h);
    procs_set_err("%s", why);
    return NULL;
}

/* ---- operations ---- */

static int proc_kill(struct ha_proc *p, const char *who)
{
    if (procs_kill_wait(p->pid, p->start, 1, who) != 0) return -1;
    p->stopped = 0;
    /* the pid stays recorded: the owner reaps it (ha_stop); proc_alive says it is dead */
    return 0;
}

int ha_node_kill(struct ha *h, int i)
{
    assert(i >= 0 && i < h->nnodes);
    return proc_kill(&h->nodes[i], node_name(i));
}

int ha_sentinel_kill(struct ha *h, int s)
{
    assert(s >= 0 && s < HA_SENTINELS);
    return proc_kill(&h->sentinels[s], sentinel_name(s));
}

static int proc_pause(struct ha_proc *p, const char *who)
{
    if (procs_pause(p->pid, p->start, who) != 0) return -1;
    p->stopped = 1;
    return 0;
}

static int proc_resume(struct ha_proc *p, const char *who)
{
    if (procs_resume(p->pid, p->start, who) != 0) return -1;
    p->stopped = 0;
    return 0;
}

int ha_node_pause(struct ha *h, int i)
{
    assert(i >= 0 && i < h->nnodes);
    return proc_pause(&h->nodes[i], node_name(i));
}

int ha_node_resume(struct ha *h, int i)
{
    assert(i >= 0 && i < h->nnodes);
    return proc_resume(&h->nodes[i], node_name(i));
}

int ha_sentinel_pause(struct ha *h, int s)
{
    assert(s >= 0 && s < HA_SENTINELS);
    return proc_pause(&h->sentinels[s], sentinel_name(s));
}

int ha_sentinel_resume(struct ha *h, int s)
{
    assert(s >= 0 && s < HA_SENTINELS);
    return proc_resume(&h->sentinels[s], sentinel_name(s));
}

/* Before a process's slot is reused: reap it when we are its parent (the owner). Otherwise
 * its entry stays in the table until the owner reaps it (procs_reap_mine). */
static void proc_forget_dead(const struct ha *h, struct ha_proc *p)
{
    if (p->pid > 0 && getpid() == h->owner && waitpid(p->pid, NULL, WNOHANG) == p->pid) procs_forget(p->pid);
}

int ha_node_restart(struct ha *h, int i)
{
    assert(i >= 0 && i < h->nnodes);
    struct ha_proc *n = &h->nodes[i];
    if (procs_alive(n->pid, n->start)) {
        procs_set_err("node %d still runs", i);
        return -1;
    }
    proc_forget_dead(h, n);
    if (node_spawn(h, i) != 0) return -1;
    return wait_ready(n, h->password, node_name(i)) == 0 ? 0 : -1;
}

int ha_sentinel_restart(struct ha *h, int s)
{
    assert(s >= 0 && s < HA_SENTINELS);
    struct ha_proc *p = &h->sentinels[s];
    if (procs_alive(p->pid, p->start)) {
        procs_set_err("sentinel %d still runs", s);
        return -1;
    }
    proc_forget_dead(h, p);
    if (sentinel_spawn(h, s) != 0) return -1;
    return wait_ready(p, h->sentinel_password, sentinel_name(s)) == 0 ? 0 : -1;
}

/* Sentinel may switch twice for one failure: a sentinel whose own attempt (a later epoch) was
 * voted for after another's promotion had been agreed on promotes another replica. Not an
 * error of the harness; said on stderr, since a test measuring the first switch sees it. */
static void note_second_switch(int first, int settled)
{
    fprintf(stderr, "sentinel_harness: every sentinel named node %d first, then settled on node %d (a second switch)\n",
            first, settled);
}

int ha_failover(struct ha *h, int timeout_ms, int *promoted, long long *confirmed_ms, long long *settled_ms)
{
    int old = ha_primary(h);
    if (old < 0) return -1;
    int s = 0;
    while (s < HA_SENTINELS && !proc_answers(&h->sentinels[s])) s++;
    if (s == HA_SENTINELS) {
        procs_set_err("no sentinel runs");
        return -1;
    }
    long long t0 = procs_mono_ms(), deadline = t0 + timeout_ms;
    redisReply *r = SENTINEL_CMD(h, s, 5000, "SENTINEL FAILOVER %s", h->master_name);
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (r != NULL && !ok) procs_set_err("sentinel %d: SENTINEL FAILOVER: %s", s, serverkit_reply_text(r));
    freeReplyObject(r);
    if (!ok) return -1;
    int p;
    if (ha_wait_promoted(h, old, timeout_ms, &p) != 0) return -1;
    long long confirmed = procs_mono_ms() - t0;
    long long left = deadline - procs_mono_ms();
    int settled_on;
    if (ha_wait_settled(h, left > 1000 ? (int)left : 1000, &settled_on) != 0) return -1;
    if (settled_on != p) note_second_switch(p, settled_on);
    if (promoted != NULL) *promoted = settled_on;
    if (confirmed_ms != NULL) *confirmed_ms = confirmed;
    if (settled_ms != NULL) *settled_ms = procs_mono_ms() - t0;
    return 0;
}

int ha_kill_primary(struct ha *h, int timeout_ms, int *old, int *promoted, long long *ms)
{
    int was = ha_primary(h);
    if (was < 0) return -1;
    long long t0 = procs_mono_ms(), deadline = t0 + timeout_ms;
    if (ha_node_kill(h, was) != 0) return -1;
    int p;
    if (ha_wait_promoted(h, was, timeout_ms, &p) != 0) return -1;
    long long took = procs_mono_ms() - t0;
    long long left = deadline - procs_mono_ms();
    int settled_on;
    if (ha_wait_settled(h, left > 1000 ? (int)left : 1000, &settled_on) != 0) return -1;
    if (settled_on != p) note_second_switch(p, settled_on);
    if (old != NULL) *old = was;
    if (promoted != NULL) *promoted = settled_on;
    if (ms != NULL) *ms = took;
    return 0;
}

int ha_replica_add(struct ha *h, int aof, int timeout_ms)
{
    if (h->nnodes >= HA_NODES) {
        procs_set_err("no room for another data node (%d)", HA_NODES);
        return -1;
    }
    int p = ha_primary(h);
    if (p < 0) return -1;
    int i = h->nnodes;
    struct ha_proc *n = &h->nodes[i];
    struct ha_proc *procs[] = {n};
    memset(n, 0, sizeof *n);
    n->aof = aof;
    if (pick_ports(procs, 1) != 0 || node_write_files(h, i, h->nodes[p].tls_port) != 0) return -1;
    h->nnodes++;
    if (node_spawn(h, i) != 0 || wait_ready(n, h->password, node_name(i)) != 0) return -1;
    long long deadline = procs_mono_ms() + timeout_ms;
    for (int s = 0; s < HA_SENTINELS;) {
        int up = 0;
        if (!proc_answers(&h->sentinels[s]) ||
            (ha_node_role(h, i, NULL, &up) == HA_ROLE_REPLICA && up && sentinel_lists_replica(h, s, i))) {
            s++;
            continue;
        }
        if (!up) procs_set_err("node %d's replication link is not up", i);
        if (procs_mono_ms() >= deadline) {
            procs_wrap_err("node %d (appendonly %s) not known to every sentinel as a replica within %d ms", i,
                           aof ? "yes" : "no", timeout_ms);
            return -1;
        }
        procs_nap_ms(POLL_MS);
    }
    return i;
}
