/* chaos.c: make test-chaos: three keygates over real TLS redis-servers, writers and readers on hot near-cached keys recorded into a history, faults from a seeded schedule, then the history checker (checker.h) and the lost-write check. */
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
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "chaos_cluster.h"
#include "chaos_sentinel.h"
#include "runner.h"
#include "checker.h"
#include "history.h"
#include "procs.h"
#include "proxy.h"
#include "serverkit.h"

/*
 * The deployment (all on 127.0.0.1, free ports, one temp dir under build/chaos/):
 *
 *   durable  redis-server 7.0, TLS + a plain port for the harness's own direct access
 *   cache    likewise
 *   kg0      keygate, threads 1
 *   kg1      keygate, threads 2, its durable instance through the delay proxy (proxy.h)
 *   kg2      keygate, threads 2
 *
 * Registry (the same for all three; a reload fault rewrites one keygate's copy):
 *
 *   kg:   durable owner=keygate       the near cache's streams on durable
 *   kc:   cache   owner=keygate       ... on cache
 *   hot:  durable near-cache=30s      the hot keys: hot:s:N strings, hot:h:N hashes, hot:t:N sets
 *   hc:   cache   near-cache=30s ttl=1h  one hot key of each type on cache
 *
 * One writer thread per key (sequential, sequence numbers 1, 2, ...; each write through a
 * keygate picked at random), CHAOS_READERS reader threads per keygate, every operation
 * recorded (history.h). A nemesis thread runs the schedule the seed made. Then the faults are
 * healed, the run settles (conditions polled with deadlines), every key is read through every
 * keygate and on its backend, and the checker judges the whole history.
 */

#define NNODES 3
#define PROXY_NODE 1 /* the keygate behind the delay proxy */
#define NKEYS 9
#define SET_SWEEP 16 /* a set write also removes the 16 members below n - W: those failed writes left */
#define ACK_RING 4096
#define START_MS 10000   /* deadline for a server to answer after its start */
#define RELOAD_MS 5000   /* deadline for a SIGHUP's reload to be taken by every worker */
#define SHUTDOWN_MS 8000 /* deadline for a SIGTERMed keygate to exit (shutdown-timeout 5 s + margin) */
#define MAX_PLANNED 512
#define MAX_FAULTS 512
#define PRINT_VIOLATIONS 25

enum key_type { T_STR, T_HASH, T_SET };

struct keydef {
    const char *name;
    int type;     /* enum key_type */
    int instance; /* 0 durable, 1 cache */
};

static const struct keydef g_keys[NKEYS] = {
    {"hot:s:0", T_STR, 0}, {"hot:s:1", T_STR, 0}, {"hot:h:0", T_HASH, 0}, {"hot:h:1", T_HASH, 0}, {"hot:t:0", T_SET, 0},
    {"hot:t:1", T_SET, 0}, {"hc:s:0", T_STR, 1},  {"hc:h:0", T_HASH, 1},  {"hc:t:0", T_SET, 1},
};
static const char *g_key_names[NKEYS];
static const char *const g_node_names[NNODES] = {"kg0", "kg1", "kg2"};
static const char *const g_streams[2] = {"kg:nc:{kg:}:stream", "kc:nc:{kc:}:stream"};
static const char *const g_instances[2] = {"durable", "cache"};

static const char g_registry[] =
    "# registry.conf written by tests/chaos/chaos.c\n"
    "namespace kg:  instance=durable ttl=none owner=keygate purpose=\"near-cache streams on durable\"\n"
    "namespace kc:  instance=cache   ttl=none owner=keygate purpose=\"near-cache streams on cache\"\n"
    "namespace hot: instance=durable ttl=none near-cache=30s owner=app purpose=\"chaos hot keys\"\n"
    "namespace hc:  instance=cache   ttl=1h   near-cache=30s owner=app purpose=\"chaos hot keys on cache\"\n";

/* ---- options (environment) ---- */

struct opts {
    unsigned long long seed;
    int duration_s;
    unsigned faults; /* bit per enum hist_fault_kind */
    char faults_text[256];
    struct check_params p;
    int settle_ms, client_timeout_ms, readers, keep;
    const char *keygate_bin;
};

static struct opts g_o;

static long long env_ll(const char *name, long long dflt)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') return dflt;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (*end != '\0' || x < 0) {
        fprintf(stderr, "chaos: %s=%s is not a non-negative integer\n", name, v);
        exit(2);
    }
    return x;
}

/* FAULTS=a,b,... into a mask; exits 2 naming an unknown or unavailable fault. */
static unsigned parse_faults(const char *text)
{
    unsigned mask = 0;
    if (text == NULL || *text == '\0' || strcmp(text, "all") == 0) {
        for (int k = 0; k < HF_NKINDS; k++)
            if (k < HF_FAILOVER && k != HF_WRONGTYPE_STREAM) mask |= 1u << k; /* the seven */
        return mask;
    }
    if (strcmp(text, "none") == 0) return 0; /* the control run: the load alone */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int k = 0; k < HF_NKINDS; k++)
            if (strcmp(w, hist_fault_name(k)) == 0) found = k;
        if (found >= HF_FAILOVER) {
            fprintf(stderr,
                    "chaos: FAULTS=%s needs the Sentinel or the cluster topology: TOPOLOGY=sentinel or cluster "
                    "(docs/testing.md, 'The "
                    "fault harness')\n",
                    w);
            exit(2);
        }
        if (found < 0) {
            fprintf(stderr,
                    "chaos: FAULTS: unknown fault '%s' (stop,kill-stream,del-stream,trim-stream,restart,"
                    "slow-link,reload,wrongtype-stream)\n",
                    w);
            exit(2);
        }
        mask |= 1u << found;
    }
    return mask;
}

static void opts_read(void)
{
    const char *seed = getenv("SEED");
    if (seed != NULL && *seed != '\0')
        g_o.seed = (unsigned long long)env_ll("SEED", 0);
    else
        g_o.seed = ((unsigned long long)time(NULL) * 1000003ull ^ (unsigned long long)getpid()) % 1000000000ull;
    runner.seed = g_o.seed;
    g_o.duration_s = (int)env_ll("DURATION", 30);
    if (g_o.duration_s < 5) g_o.duration_s = 5;
    const char *topology = getenv("TOPOLOGY");
    int own = topology != NULL && (strcmp(topology, "sentinel") == 0 || strcmp(topology, "cluster") == 0);
    g_o.faults = own ? 0 : parse_faults(getenv("FAULTS")); /* the Sentinel and cluster topologies read their own */
    size_t used = 0;
    g_o.faults_text[0] = '\0';
    for (int k = 0; k < HF_NKINDS; k++)
        if (g_o.faults & (1u << k))
            used += (size_t)snprintf(g_o.faults_text + used, sizeof g_o.faults_text - used, "%s%s", used ? "," : "",
                                     hist_fault_name(k));
    if (g_o.faults == 0) snprintf(g_o.faults_text, sizeof g_o.faults_text, "none");
    g_o.p = check_default_params();
    g_o.p.bound_us = env_ll("CHAOS_BOUND_MS", 100) * 1000;
    g_o.p.fault_bound_us = env_ll("CHAOS_FAULT_BOUND_MS", 1100) * 1000;
    g_o.p.fault_tail_us = env_ll("CHAOS_FAULT_TAIL_MS", 100) * 1000;
    g_o.p.error_grace_us = env_ll("CHAOS_ERROR_GRACE_MS", 1000) * 1000;
    g_o.p.same_keygate_bound_us = getenv("CHAOS_SAME_KEYGATE_BOUND_MS") && *getenv("CHAOS_SAME_KEYGATE_BOUND_MS")
                                      ? env_ll("CHAOS_SAME_KEYGATE_BOUND_MS", 0) * 1000
                                      : -1;
    g_o.settle_ms = (int)env_ll("CHAOS_SETTLE_MS", 15000);
    g_o.client_timeout_ms = (int)env_ll("CHAOS_CLIENT_TIMEOUT_MS", 1000);
    g_o.readers = (int)env_ll("CHAOS_READERS", 2);
    if (g_o.readers < 1) g_o.readers = 1;
    g_o.keep = (int)env_ll("CHAOS_KEEP", 0);
    const char *bin = getenv("KEYGATE_BIN");
    g_o.keygate_bin = bin != NULL && *bin != '\0' ? bin : "build/keygate";
}

/* ---- the deployment ---- */

struct server {
    char name[16];
    pid_t pid;
    unsigned long long start;
    int port, plain_port; /* keygate: port is its listen port */
    char conf[PATH_MAX], log[PATH_MAX];
};

struct node {
    struct server s;
    int threads;
    char registry[PATH_MAX];
    int restarts;
};

static struct {
    char root[256], dir[512]; /* short enough that every path below fits PATH_MAX */
    struct server backend[2];
    char password[2][65], pass_file[2][PATH_MAX];
    struct node node[NNODES];
    struct proxy *proxy;
    int proxy_port;
} g;

static int spawn(struct server *s, char *const argv[])
{
    s->pid = procs_spawn(argv, s->log, NULL, getpid(), getpgrp(), &s->start);
    if (s->pid < 0) {
        s->pid = 0;
        runner_fail("cannot start %s: %s", s->name, strerror(errno));
        return -1;
    }
    return 0;
}

/* A plain, AUTHed connection to backend i (1 s connect, io_ms I/O), or NULL. */
static redisContext *backend_conn(int i, int io_ms)
{
    return serverkit_connect(g.backend[i].plain_port, g.password[i], 1000, io_ms);
}

static int backend_start(int i)
{
    struct server *b = &g.backend[i];
    char conf[4 * PATH_MAX], data[PATH_MAX];
    snprintf(b->name, sizeof b->name, "%s", g_instances[i]);
    snprintf(b->conf, sizeof b->conf, "%s/%s.redis.conf", g.dir, b->name);
    snprintf(b->log, sizeof b->log, "%s/%s.log", g.dir, b->name);
    snprintf(data, sizeof data, "%s/%s", g.dir, b->name);
    serverkit_random_hex(g.password[i], 32);
    snprintf(g.pass_file[i], sizeof g.pass_file[i], "%s/%s.pass", g.dir, b->name);
    snprintf(conf, sizeof conf,
             "bind 127.0.0.1\nport %d\ntls-port %d\n"
             "tls-cert-file \"%s/build/certs/server.crt\"\ntls-key-file \"%s/build/certs/server.key\"\n"
             "tls-ca-cert-file \"%s/build/certs/ca.crt\"\ntls-auth-clients optional\n"
             "requirepass %s\ndir \"%s\"\nsave \"\"\ndaemonize no\nlogfile \"\"\n%s",
             b->plain_port, b->port, g.root, g.root, g.root, g.password[i], data,
             i == 0 ? "maxmemory 256mb\nmaxmemory-policy noeviction\nappendonly yes\n"
                    : "maxmemory 64mb\nmaxmemory-policy allkeys-lru\nappendonly no\n");
    char line[80];
    snprintf(line, sizeof line, "%s\n", g.password[i]);
    if (mkdir(data, 0700) != 0 || serverkit_write_file(g.pass_file[i], line, 0600) != 0 ||
        serverkit_write_file(b->conf, conf, 0600) != 0) {
        runner_fail("writing %s's files in %s: %s", b->name, g.dir, strerror(errno));
        return -1;
    }
    char *argv[] = {"redis-server", b->conf, NULL};
    if (spawn(b, argv) != 0) return -1;
    long long deadline = procs_mono_ms() + START_MS;
    for (;;) {
        redisContext *c = backend_conn(i, 1000);
        if (c != NULL) {
            redisFree(c);
            return 0;
        }
        if (!procs_alive(b->pid, b->start) || procs_mono_ms() >= deadline) {
            serverkit_print_log_tail(b->name, b->log);
            runner_fail("redis-server %s did not answer on port %d within %d ms", b->name, b->plain_port, START_MS);
            return -1;
        }
        procs_nap_ms(20);
    }
}

static int node_write_files(int n)
{
    struct node *k = &g.node[n];
    char conf[4 * PATH_MAX];
    int durable_port = n == PROXY_NODE ? g.proxy_port : g.backend[0].port;
    snprintf(conf, sizeof conf,
             "# keygate.conf written by tests/chaos/chaos.c\n"
             "listen 127.0.0.1:%d\n"
             "registry %s\n"
             "instance durable 127.0.0.1:%d tls ca=%s/build/certs/ca.crt cert=%s/build/certs/client.crt "
             "key=%s/build/certs/client.key server-name=localhost password-file=%s\n"
             "instance cache   127.0.0.1:%d tls ca=%s/build/certs/ca.crt server-name=localhost password-file=%s\n"
             "threads %d\n",
             k->s.port, k->registry, durable_port, g.root, g.root, g.root, g.pass_file[0], g.backend[1].port, g.root,
             g.pass_file[1], k->threads);
    if (serverkit_write_file(k->s.conf, conf, 0644) != 0 || serverkit_write_file(k->registry, g_registry, 0644) != 0) {
        runner_fail("writing %s's files: %s", k->s.name, strerror(errno));
        return -1;
    }
    return 0;
}

/* Does CLIENT LIST on backend i name a connection keygate-nearcache-<pid>? 1, 0, -1 (no answer). */
static int reader_connected(int i, pid_t pid)
{
    redisContext *c = backend_conn(i, 2000);
    if (c == NULL) return -1;
    redisReply *r = redisCommand(c, "CLIENT LIST");
    char want[64];
    snprintf(want, sizeof want, " name=keygate-nearcache-%d ", (int)pid);
    int found = r != NULL && r->type == REDIS_REPLY_STRING ? strstr(r->str, want) != NULL : -1;
    freeReplyObject(r);
    redisFree(c);
    return found;
}

/* Wait (deadline_ms) until keygate n answers PING and, with readers, its near-cache stream readers
 * are connected to both backends (CLIENT LIST names them). 0, or -1 (runner_fail says which). */
static int node_wait_ready(int n, int deadline_ms, int readers)
{
    struct node *k = &g.node[n];
    long long deadline = procs_mono_ms() + deadline_ms;
    const char *what = "PONG";
    for (;;) {
        int ok = 0;
        redisContext *c = redisConnectWithTimeout("127.0.0.1", k->s.port, (struct timeval){1, 0});
        if (c != NULL && !c->err) {
            redisSetTimeout(c, (struct timeval){1, 0});
            redisReply *r = redisCommand(c, "PING");
            ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
            freeReplyObject(r);
        }
        redisFree(c);
        if (ok && readers) {
            what = "its near-cache stream readers on durable and cache (CLIENT LIST name=keygate-nearcache-PID)";
            ok = reader_connected(0, k->s.pid) == 1 && reader_connected(1, k->s.pid) == 1;
        }
        if (ok) return 0;
        if (!procs_alive(k->s.pid, k->s.start) || procs_mono_ms() >= deadline) {
            serverkit_print_log_tail(k->s.name, k->s.log);
            runner_fail("%s (pid %d, port %d) %s: no %s within %d ms", k->s.name, (int)k->s.pid, k->s.port,
                        procs_alive(k->s.pid, k->s.start) ? "runs" : "exited", what, deadline_ms);
            return -1;
        }
        procs_nap_ms(20);
    }
}

static int node_spawn(int n)
{
    struct node *k = &g.node[n];
    char *argv[] = {(char *)g_o.keygate_bin, "-c", k->s.conf, NULL};
    return spawn(&k->s, argv);
}

/* Stop every server (SIGCONT + SIGKILL, waited for) and the proxy. Idempotent. */
static void deployment_stop(void)
{
    for (int n = 0; n < NNODES; n++)
        if (g.node[n].s.pid > 0) {
            procs_kill_wait(g.node[n].s.pid, g.node[n].s.start, 1, g.node[n].s.name);
            g.node[n].s.pid = 0;
        }
    proxy_stop(g.proxy);
    g.proxy = NULL;
    for (int i = 0; i < 2; i++)
        if (g.backend[i].pid > 0) {
            procs_kill_wait(g.backend[i].pid, g.backend[i].start, 1, g.backend[i].name);
            g.backend[i].pid = 0;
        }
    procs_reap_mine();
}

static int deployment_start(void)
{
    if (getcwd(g.root, sizeof g.root) == NULL) {
        runner_fail("getcwd: %s (the repo root must be shorter than %zu bytes)", strerror(errno), sizeof g.root);
        return -1;
    }
    char certs[PATH_MAX + 32];
    snprintf(certs, sizeof certs, "%s/build/certs/server.crt", g.root);
    if (access(certs, R_OK) != 0) {
        runner_fail("%s missing: run `make certs` (make test-chaos does) from the repo root", certs);
        return -1;
    }
    if (access(g_o.keygate_bin, X_OK) != 0) {
        runner_fail("KEYGATE_BIN=%s is not an executable: build it with `make all`", g_o.keygate_bin);
        return -1;
    }
    mkdir("build/chaos", 0755);
    snprintf(g.dir, sizeof g.dir, "%s/build/chaos/run-%llu-%d", g.root, g_o.seed, (int)getpid());
    if (mkdir(g.dir, 0700) != 0) {
        runner_fail("mkdir %s: %s", g.dir, strerror(errno));
        return -1;
    }
    int tls[6], plain[6];
    struct procs_port_ranges r = {.tls_low = 36000, .tls_high = 40999, .plain_low = 41000, .plain_high = 45999};
    if (procs_pick_ports(6, &r, tls, plain) != 0) {
        runner_fail("%s", procs_last_error());
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        g.backend[i].port = tls[i];
        g.backend[i].plain_port = plain[i];
        if (backend_start(i) != 0) return -1;
    }
    g.proxy_port = tls[5];
    char err[256];
    g.proxy = proxy_start(g.proxy_port, g.backend[0].port, err, sizeof err);
    if (g.proxy == NULL) {
        runner_fail("%s", err);
        return -1;
    }
    for (int n = 0; n < NNODES; n++) {
        struct node *k = &g.node[n];
        snprintf(k->s.name, sizeof k->s.name, "%s", g_node_names[n]);
        k->s.port = tls[2 + n];
        k->threads = n == 0 ? 1 : 2;
        snprintf(k->s.conf, sizeof k->s.conf, "%s/%s.conf", g.dir, k->s.name);
        snprintf(k->s.log, sizeof k->s.log, "%s/%s.log", g.dir, k->s.name);
        snprintf(k->registry, sizeof k->registry, "%s/%s.registry.conf", g.dir, k->s.name);
        if (node_write_files(n) != 0 || node_spawn(n) != 0) return -1;
    }
    for (int n = 0; n < NNODES; n++)
        if (node_wait_ready(n, START_MS, 1) != 0) return -1;
    return 0;
}

/* ---- the history: per-thread logs, merged at the end ---- */

/* What each key's writer had acknowledged, for the readers' SISMEMBER members. */
static struct {
    pthread_mutex_t lock;
    long long seq[ACK_RING], end_us[ACK_RING];
    unsigned long long n;
    long long last; /* the newest acknowledged sequence number */
} g_acks[NKEYS];

static void ack_record(int key, long long seq, long long end_us)
{
    pthread_mutex_lock(&g_acks[key].lock);
    unsigned long long i = g_acks[key].n++ % ACK_RING;
    g_acks[key].seq[i] = seq;
    g_acks[key].end_us[i] = end_us;
    if (seq > g_acks[key].last) g_acks[key].last = seq;
    pthread_mutex_unlock(&g_acks[key].lock);
}

/* The newest sequence number of key acknowledged before t (0: none known). */
static long long ack_before(int key, long long t)
{
    long long best = 0;
    pthread_mutex_lock(&g_acks[key].lock);
    unsigned long long n = g_acks[key].n;
    for (unsigned long long k = 0; k < n && k < ACK_RING; k++) {
        unsigned long long i = (n - 1 - k) % ACK_RING;
        if (g_acks[key].end_us[i] < t && g_acks[key].seq[i] > best) {
            best = g_acks[key].seq[i];
            break; /* one writer: the newest ack before t has the largest sequence number */
        }
    }
    pthread_mutex_unlock(&g_acks[key].lock);
    return best;
}

static long long ack_last(int key)
{
    pthread_mutex_lock(&g_acks[key].lock);
    long long v = g_acks[key].last;
    pthread_mutex_unlock(&g_acks[key].lock);
    return v;
}

/* ---- write lulls: moments without any write, seeded like the faults ----
 *
 * A stream that sees no entry for a while is read differently (the reader's XREAD BLOCK times out, a deleted
 * stream is seen missing rather than made again by the next write), and a value no write touches for a while
 * keeps whatever a missed invalidation left: every writer pauses during these windows. */

#define MAX_LULLS 256
static long long g_lull_start_us[MAX_LULLS], g_lull_end_us[MAX_LULLS];
static int g_nlulls;

static void lulls_make(void)
{
    unsigned long long s = g_o.seed ^ 0x6c756c6cull; /* "lull" */
    long long t = 2000, end = (long long)g_o.duration_s * 1000;
    while (g_nlulls < MAX_LULLS) {
        t += 1500 + runner_rnd(&s, 3501);
        long long len = 300 + runner_rnd(&s, 2201);
        if (t + len > end) break;
        g_lull_start_us[g_nlulls] = t * 1000;
        g_lull_end_us[g_nlulls++] = (t + len) * 1000;
        t += len;
    }
}

/* The end of the lull at time t, or 0 when t is in none. */
static long long lull_end(long long t)
{
    for (int i = 0; i < g_nlulls; i++)
        if (t >= g_lull_start_us[i] && t < g_lull_end_us[i]) return g_lull_end_us[i];
    return 0;
}

/* ---- client operations ---- */

struct client {
    int id;
    int writer_key; /* >= 0: this thread writes that key; -1: a reader */
    int node;       /* a reader's keygate */
    unsigned long long rng;
    redisContext *c[NNODES];
    struct oplog log;
    pthread_t thread;
};

/* A connection to keygate n for cl, connected when needed; NULL with o's status and err set. */
static redisContext *client_conn(struct client *cl, int n, struct hist_op *o)
{
    if (cl->c[n] != NULL) {
        /* an idle connection the server closed meanwhile (a restart long ago) is replaced before the operation, as a
         * client's pool would: its EOF or reset is no answer to this operation */
        char b;
        ssize_t r = recv(cl->c[n]->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) { /* EOF, an error, or bytes nobody asked for */
            redisFree(cl->c[n]);
            cl->c[n] = NULL;
        } else {
            return cl->c[n];
        }
    }
    int ms = g_o.client_timeout_ms;
    redisContext *c =
        redisConnectWithTimeout("127.0.0.1", g.node[n].s.port, (struct timeval){ms / 1000, (ms % 1000) * 1000});
    if (c == NULL || c->err) {
        o->status = HST_ERR_CONN;
        snprintf(o->err, sizeof o->err, "connect: %.90s", c ? c->errstr : "out of memory");
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, (struct timeval){ms / 1000, (ms % 1000) * 1000});
    cl->c[n] = c;
    return c;
}

/* The connection failed (r == NULL): classify it into o and drop the connection. */
static void conn_failed(struct client *cl, int n, struct hist_op *o)
{
    redisContext *c = cl->c[n];
    int timeout =
        c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK || strstr(c->errstr, "temporarily"));
    o->status = timeout ? HST_ERR_TIMEOUT : HST_ERR_CONN;
    snprintf(o->err, sizeof o->err, "%.100s", c->errstr[0] ? c->errstr : "connection closed");
    redisFree(c);
    cl->c[n] = NULL;
}

/* Parse a decimal sequence number (a whole string of digits); -1 when it is not one. */
static long long parse_seq(const char *s, size_t len)
{
    if (len == 0 || len > 18) return -1;
    long long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static void bad(struct hist_op *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bad(struct hist_op *o, const char *fmt, ...)
{
    o->status = HST_BAD;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->err, sizeof o->err, fmt, ap);
    va_end(ap);
}

/* A reply r of kind `kind` for key slot `slot` into o->value[slot] (or o's status). */
static void read_value(struct hist_op *o, int slot, const redisReply *r)
{
    if (r->type == REDIS_REPLY_ERROR) {
        o->status = HST_ERR_REPLY;
        snprintf(o->err, sizeof o->err, "%s", r->str);
        return;
    }
    switch (o->kind) {
    case HOP_GET:
    case HOP_HGET:
        if (r->type == REDIS_REPLY_NIL) {
            o->value[slot] = 0;
        } else if (r->type == REDIS_REPLY_STRING && (o->value[slot] = parse_seq(r->str, r->len)) >= 0) {
        } else {
            bad(o, "not a sequence number (reply type %d)", r->type);
        }
        break;
    case HOP_HGETALL: {
        long long v = -1, w = -1;
        if (r->type != REDIS_REPLY_ARRAY || r->elements % 2) {
            bad(o, "HGETALL: not a field/value array (type %d)", r->type);
            break;
        }
        for (size_t i = 0; i + 1 < r->elements; i += 2) {
            const redisReply *f = r->element[i], *x = r->element[i + 1];
            if (f->type != REDIS_REPLY_STRING || x->type != REDIS_REPLY_STRING) continue;
            if (strcmp(f->str, "v") == 0) v = parse_seq(x->str, x->len);
            if (strcmp(f->str, "w") == 0) w = parse_seq(x->str, x->len);
        }
        if (r->elements == 0)
            o->value[slot] = 0;
        else if (v < 0 || v != w || r->elements != 4)
            bad(o, "HGETALL: a torn or foreign hash: %zu elements, v=%lld w=%lld", r->elements / 2, v, w);
        else
            o->value[slot] = v;
        break;
    }
    case HOP_SMEMBERS: {
        if (r->type != REDIS_REPLY_ARRAY) {
            bad(o, "SMEMBERS: not an array (type %d)", r->type);
            break;
        }
        long long max = 0;
        for (size_t i = 0; i < r->elements; i++) {
            long long m =
                r->element[i]->type == REDIS_REPLY_STRING ? parse_seq(r->element[i]->str, r->element[i]->len) : -1;
            if (m < 0) {
                bad(o, "SMEMBERS: member %zu is not a sequence number", i);
                return;
            }
            if (m > max) max = m;
        }
        if ((long long)r->elements > g_o.p.set_window) {
            bad(o, "SMEMBERS: %zu members, more than the writer's window %lld", r->elements, g_o.p.set_window);
            break;
        }
        o->value[slot] = max;
        break;
    }
    case HOP_SISMEMBER:
        if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1))
            o->value[slot] = r->integer;
        else
            bad(o, "SISMEMBER: not 0 or 1 (type %d)", r->type);
        break;
    default:
        bad(o, "no reader for op kind %d", o->kind);
    }
}

/* Run read o (kind, node, keys, arg filled) through keygate o->node on cl, filling times and result. */
static void do_read(struct client *cl, struct hist_op *o)
{
    char argbuf[32];
    const char *argv[2 + HIST_MAX_OP_KEYS];
    int argc = 0;
    switch (o->kind) {
    case HOP_GET:
        argv[argc++] = "GET";
        break;
    case HOP_MGET:
        argv[argc++] = "MGET";
        break;
    case HOP_HGET:
        argv[argc++] = "HGET";
        break;
    case HOP_HGETALL:
        argv[argc++] = "HGETALL";
        break;
    case HOP_SISMEMBER:
        argv[argc++] = "SISMEMBER";
        break;
    default:
        argv[argc++] = "SMEMBERS";
    }
    for (int s = 0; s < o->nkeys; s++) argv[argc++] = g_keys[o->key[s]].name;
    if (o->kind == HOP_HGET) argv[argc++] = "v";
    if (o->kind == HOP_SISMEMBER) {
        snprintf(argbuf, sizeof argbuf, "%lld", o->arg);
        argv[argc++] = argbuf;
    }
    o->start_us = runner_now_us();
    redisContext *c = client_conn(cl, o->node, o);
    if (c == NULL) {
        o->end_us = runner_now_us();
        return;
    }
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    o->end_us = runner_now_us();
    if (r == NULL) {
        conn_failed(cl, o->node, o);
        return;
    }
    if (o->kind == HOP_MGET) {
        if (r->type == REDIS_REPLY_ERROR) {
            o->status = HST_ERR_REPLY;
            snprintf(o->err, sizeof o->err, "%s", r->str);
        } else if (r->type != REDIS_REPLY_ARRAY || (int)r->elements != o->nkeys) {
            bad(o, "MGET: not an array of %d", o->nkeys);
        } else {
            o->kind = HOP_GET; /* each element reads like a GET */
            for (int s = 0; s < o->nkeys && o->status == HST_OK; s++) read_value(o, s, r->element[s]);
            o->kind = HOP_MGET;
        }
    } else {
        read_value(o, 0, r);
    }
    freeReplyObject(r);
}

/* Write seq to key through keygate node: o filled with the write and its outcome. */
static void do_write(struct client *cl, struct hist_op *o, int key, long long seq)
{
    char v[24], olds[SET_SWEEP + 1][24];
    const char *srem_argv[3 + SET_SWEEP];
    snprintf(v, sizeof v, "%lld", seq);
    const char *name = g_keys[key].name;
    o->nkeys = 1;
    o->key[0] = key;
    o->value[0] = seq;
    o->start_us = runner_now_us();
    redisContext *c = client_conn(cl, o->node, o);
    if (c == NULL) {
        o->end_us = runner_now_us();
        return;
    }
    int want = 1;
    switch (g_keys[key].type) {
    case T_STR:
        o->kind = HOP_SET;
        redisAppendCommandArgv(c, 3, (const char *[]){"SET", name, v}, NULL);
        break;
    case T_HASH:
        o->kind = HOP_HSET;
        redisAppendCommandArgv(c, 6, (const char *[]){"HSET", name, "v", v, "w", v}, NULL);
        break;
    default:
        o->kind = HOP_SADD;
        redisAppendCommandArgv(c, 1, (const char *[]){"MULTI"}, NULL);
        redisAppendCommandArgv(c, 3, (const char *[]){"SADD", name, v}, NULL);
        /* n - W and the SET_SWEEP members below it: a write that failed did not remove its n - W, the next ones do,
         * so the set never holds more than W members (a partial transaction would make it hold more) */
        for (int i = 0; i <= SET_SWEEP; i++) {
            srem_argv[2 + i] = olds[i];
            snprintf(olds[i], sizeof olds[i], "%lld", seq - g_o.p.set_window - i);
        }
        srem_argv[0] = "SREM";
        srem_argv[1] = name;
        redisAppendCommandArgv(c, 3 + SET_SWEEP, srem_argv, NULL);
        redisAppendCommandArgv(c, 1, (const char *[]){"EXEC"}, NULL);
        want = 4;
    }
    for (int i = 0; i < want; i++) {
        void *rv = NULL;
        if (redisGetReply(c, &rv) != REDIS_OK) {
            o->end_us = runner_now_us();
            conn_failed(cl, o->node, o);
            return;
        }
        redisReply *r = rv;
        if (o->status == HST_OK && r->type == REDIS_REPLY_ERROR) {
            o->status = HST_ERR_REPLY;
            snprintf(o->err, sizeof o->err, "%s", r->str);
        } else if (o->status == HST_OK && i == want - 1) {
            int ok = o->kind == HOP_SET    ? r->type == REDIS_REPLY_STATUS
                     : o->kind == HOP_HSET ? r->type == REDIS_REPLY_INTEGER
                                           : r->type == REDIS_REPLY_ARRAY && r->elements == 2;
            if (!ok && o->kind == HOP_SADD && r->type == REDIS_REPLY_NIL) {
                o->status = HST_ERR_REPLY;
                snprintf(o->err, sizeof o->err, "EXEC answered nil (transaction aborted)");
            } else if (!ok) {
                bad(o, "unexpected write reply type %d", r->type);
            }
        }
        freeReplyObject(r);
    }
    o->end_us = runner_now_us();
}

static void *writer_main(void *arg)
{
    struct client *cl = arg;
    runner_client_lower_priority();
    long long seq = 0;
    while (!__atomic_load_n(&runner.stop_clients, __ATOMIC_ACQUIRE)) {
        long long lull = lull_end(runner_now_us());
        if (lull > 0) {
            runner_sleep_ms((int)((lull - runner_now_us()) / 1000) + 1, &runner.stop_clients); /* a planned lull */
            continue;
        }
        struct hist_op *o = runner_oplog_add(&cl->log);
        o->thread = cl->id;
        o->node = runner_rnd(&cl->rng, NNODES);
        do_write(cl, o, cl->writer_key, ++seq);
        if (o->status == HST_OK) ack_record(cl->writer_key, seq, o->end_us);
        if (o->status == HST_ERR_CONN) runner_sleep_ms(10, &runner.stop_clients); /* retry pacing: a keygate down */
        /* think time: mostly a few ms, and after one write in 8 (every other write for the odd keys: hot:s:1,
         * hot:h:1, hot:t:1, hc:h:0) a quiet spell of 0.1-1.5 s, so that a key keeps a value long enough for a
         * missed invalidation to outlive the bound */
        int quiet = runner_rnd(&cl->rng, cl->writer_key % 2 ? 2 : 8) == 0;
        runner_sleep_ms(quiet ? 100 + runner_rnd(&cl->rng, 1400) : 1 + runner_rnd(&cl->rng, 8), &runner.stop_clients);
    }
    for (int n = 0; n < NNODES; n++) redisFree(cl->c[n]);
    return NULL;
}

static void *reader_main(void *arg)
{
    struct client *cl = arg;
    runner_client_lower_priority();
    while (!__atomic_load_n(&runner.stop_clients, __ATOMIC_ACQUIRE)) {
        struct hist_op *o = runner_oplog_add(&cl->log);
        o->thread = cl->id;
        o->node = cl->node;
        int key = runner_rnd(&cl->rng, NKEYS), coin = runner_rnd(&cl->rng, 10);
        o->nkeys = 1;
        o->key[0] = key;
        switch (g_keys[key].type) {
        case T_STR:
            o->kind = HOP_GET;
            if (coin < 4 && g_keys[key].instance == 0) {
                o->kind = HOP_MGET;
                o->nkeys = 2;
                o->key[0] = coin % 2 ? 0 : 1;
                o->key[1] = coin % 2 ? 1 : 0;
            }
            break;
        case T_HASH:
            o->kind = coin < 5 ? HOP_HGET : HOP_HGETALL;
            break;
        default:
            o->kind = HOP_SMEMBERS;
            if (coin < 5) {
                /* the member the bound requires: the newest write acknowledged before now - L */
                long long x = ack_before(key, runner_now_us() - g_o.p.bound_us);
                if (x > 0) {
                    o->kind = HOP_SISMEMBER;
                    o->arg = x;
                }
            }
        }
        do_read(cl, o);
        /* think time; retry pacing after a connection error (a keygate restarting refuses at once) */
        runner_sleep_ms(o->status == HST_ERR_CONN ? 10 : runner_rnd(&cl->rng, 3), &runner.stop_clients);
    }
    for (int n = 0; n < NNODES; n++) redisFree(cl->c[n]);
    return NULL;
}

/* ---- faults ---- */

struct planned {
    int kind, node;
    int gap_ms;  /* planned pause after the previous fault's heal */
    int hold_ms; /* planned duration (stop, slow-link, reload) */
    int param;   /* slow-link: delay ms; restart: 1 SIGKILL, 0 SIGTERM; del/trim: instance; reload: variant */
};

static struct planned g_plan[MAX_PLANNED];
static int g_nplan;
static struct hist_fault g_faults[MAX_FAULTS];
static int g_nfaults; /* the nemesis thread's; read after it is joined */
static int g_fault_count[HF_NKINDS];

static void plan_describe(const struct planned *pl, char *buf, size_t len)
{
    switch (pl->kind) {
    case HF_STOP:
        snprintf(buf, len, "SIGSTOP %s for %d ms", g_node_names[pl->node], pl->hold_ms);
        break;
    case HF_KILL_STREAM:
        snprintf(buf, len, "CLIENT KILL %s's stream reader connections (keygate-nearcache-PID) on durable and cache",
                 g_node_names[pl->node]);
        break;
    case HF_DEL_STREAM:
        snprintf(buf, len, "DEL %s on %s", g_streams[pl->param], g_instances[pl->param]);
        break;
    case HF_TRIM_STREAM:
        snprintf(buf, len, "XTRIM %s MAXLEN 1 on %s", g_streams[pl->param], g_instances[pl->param]);
        break;
    case HF_RESTART:
        snprintf(buf, len, "restart %s (%s)", g_node_names[pl->node], pl->param ? "SIGKILL" : "SIGTERM");
        break;
    case HF_SLOW_LINK:
        snprintf(buf, len, "delay %s<->durable by %d ms each way for %d ms", g_node_names[pl->node], pl->param,
                 pl->hold_ms);
        break;
    case HF_WRONGTYPE_STREAM:
        snprintf(buf, len, "SET %s to a string on %s for %d ms (every XADD fails), then DEL", g_streams[pl->param],
                 g_instances[pl->param], pl->hold_ms);
        break;
    case HF_RELOAD:
        snprintf(buf, len, "%s reloads a registry with 'namespace hot:%c: ...%s' for %d ms", g_node_names[pl->node],
                 "sht"[pl->param % 3], pl -> param >= 3 ? " near-cache=30s" : "", pl->hold_ms);
        break;
    default:
        snprintf(buf, len, "%s", hist_fault_name(pl->kind));
    }
}

/* The schedule of this seed: only the seed and DURATION and FAULTS decide it. */
static void plan_make(void)
{
    unsigned long long s = g_o.seed ^ 0x63686173ull; /* "chas" */
    int kinds[HF_NKINDS], nk = 0;
    for (int k = 0; k < HF_NKINDS; k++)
        if (g_o.faults & (1u << k)) kinds[nk++] = k;
    long long t = 0, end = (long long)g_o.duration_s * 1000 - 1500;
    while (nk > 0 && g_nplan < MAX_PLANNED) {
        struct planned pl = {.kind = kinds[runner_rnd(&s, nk)],
                             .node = runner_rnd(&s, NNODES),
                             .gap_ms = 300 + runner_rnd(&s, 1200)};
        int cost = 0; /* what the fault's own steps are expected to take, for the plan only */
        switch (pl.kind) {
        case HF_STOP:
            pl.hold_ms = 100 + runner_rnd(&s, 3901);
            break;
        case HF_SLOW_LINK:
            pl.node = PROXY_NODE;
            pl.hold_ms = 500 + runner_rnd(&s, 2501);
            pl.param = 50 + runner_rnd(&s, 551);
            cost = pl.param;
            break;
        case HF_RELOAD:
            pl.hold_ms = 300 + runner_rnd(&s, 2201);
            pl.param = runner_rnd(&s, 6);
            cost = 200;
            break;
        case HF_RESTART:
            pl.param = runner_rnd(&s, 2);
            cost = 800;
            break;
        case HF_DEL_STREAM:
        case HF_TRIM_STREAM:
            pl.param = runner_rnd(&s, 2);
            break;
        case HF_WRONGTYPE_STREAM:
            pl.param = runner_rnd(&s, 2);
            pl.hold_ms = 200 + runner_rnd(&s, 1301);
            break;
        }
        if (t == 0) pl.gap_ms += 1000; /* the first after a second of load without faults */
        if (t + pl.gap_ms + pl.hold_ms + cost > end) break;
        t += pl.gap_ms + pl.hold_ms + cost;
        g_plan[g_nplan++] = pl;
    }
}

static void plan_print(void)
{
    printf("chaos: schedule of SEED=%llu: %d faults\n", g_o.seed, g_nplan);
    long long t = 0;
    for (int i = 0; i < g_nplan; i++) {
        char what[160];
        plan_describe(&g_plan[i], what, sizeof what);
        t += g_plan[i].gap_ms;
        printf("  #%-3d after %4d ms (~+%.1fs) %-11s %s\n", i, g_plan[i].gap_ms, t / 1000.0,
               hist_fault_name(g_plan[i].kind), what);
        t += g_plan[i].hold_ms;
    }
    fflush(stdout);
}

/* Run one command on backend i; 0 when it answered without an error, its integer in *out. */
static int backend_cmd(int i, long long *out, const char *fmt, ...)
{
    redisContext *c = backend_conn(i, 2000);
    if (c == NULL) {
        runner_fail("cannot connect to backend %s", g_instances[i]);
        return -1;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    int rc = r != NULL && r->type != REDIS_REPLY_ERROR ? 0 : -1;
    if (rc != 0) runner_fail("backend %s: `%s`: %s", g_instances[i], fmt, r ? r->str : c->errstr);
    if (out != NULL && r != NULL) *out = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    freeReplyObject(r);
    redisFree(c);
    return rc;
}

/* CLIENT KILL every connection of backend i named keygate-nearcache-<pid>; how many, or -1. */
static int kill_readers(int i, pid_t pid)
{
    redisContext *c = backend_conn(i, 2000);
    if (c == NULL) return -1;
    redisReply *r = redisCommand(c, "CLIENT LIST");
    char want[64];
    snprintf(want, sizeof want, " name=keygate-nearcache-%d ", (int)pid);
    int killed = 0;
    for (const char *line = r && r->type == REDIS_REPLY_STRING ? r->str : ""; *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s ", (int)(len < sizeof buf - 2 ? len : sizeof buf - 2), line);
        if (strstr(buf, want) != NULL && strncmp(buf, "id=", 3) == 0) {
            redisReply *k = redisCommand(c, "CLIENT KILL ID %lld", atoll(buf + 3));
            killed += k != NULL && k->type == REDIS_REPLY_INTEGER ? (int)k->integer : 0;
            freeReplyObject(k);
        }
        line += len + (eol ? 1 : 0);
    }
    freeReplyObject(r);
    redisFree(c);
    return killed;
}

/* INFO server's reloads:N of keygate n, or -1. */
static long long node_reloads(int n)
{
    redisContext *c = redisConnectWithTimeout("127.0.0.1", g.node[n].s.port, (struct timeval){1, 0});
    long long v = -1;
    if (c != NULL && !c->err) {
        redisSetTimeout(c, (struct timeval){2, 0});
        redisReply *r = redisCommand(c, "INFO server");
        const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "reloads:") : NULL;
        if (p) v = atoll(p + 8);
        freeReplyObject(r);
    }
    redisFree(c);
    return v;
}

/* Write registry text to keygate n's registry, SIGHUP it and wait (RELOAD_MS) until every worker took it. */
static int node_reload(int n, const char *text)
{
    struct node *k = &g.node[n];
    long long before = node_reloads(n);
    if (before < 0) {
        runner_fail("%s: no INFO server reloads: before a reload", k->s.name);
        return -1;
    }
    if (serverkit_write_file(k->registry, text, 0644) != 0 || procs_signal(k->s.pid, k->s.start, SIGHUP) != 0) {
        runner_fail("%s: cannot rewrite its registry or SIGHUP it: %s", k->s.name, strerror(errno));
        return -1;
    }
    long long deadline = procs_mono_ms() + RELOAD_MS, now = -1;
    while ((now = node_reloads(n)) <= before) {
        if (procs_mono_ms() >= deadline) {
            serverkit_print_log_tail(k->s.name, k->s.log);
            runner_fail("%s: INFO server reloads:%lld still (was %lld) %d ms after SIGHUP: the registry was refused "
                        "or not taken",
                        k->s.name, now, before, RELOAD_MS);
            return -1;
        }
        procs_nap_ms(10);
    }
    return 0;
}

static int g_reload_applied = -1; /* the node whose registry a reload fault changed and has not put back */

/* Apply planned fault pl, hold it, heal it; records the window. 0, or -1 (a harness failure). */
static int fault_run(const struct planned *pl)
{
    struct hist_fault *f = &g_faults[g_nfaults];
    memset(f, 0, sizeof *f);
    f->kind = pl->kind;
    f->node = pl->node;
    plan_describe(pl, f->what, sizeof f->what);
    struct node *k = &g.node[pl->node];
    int rc = 0;
    f->start_us = runner_now_us();
    switch (pl->kind) {
    case HF_STOP:
        if (procs_pause(k->s.pid, k->s.start, k->s.name) != 0) {
            runner_fail("%s", procs_last_error());
            return -1;
        }
        runner_sleep_ms(pl->hold_ms, NULL); /* the fault's planned duration */
        rc = procs_resume(k->s.pid, k->s.start, k->s.name);
        if (rc != 0) runner_fail("%s", procs_last_error());
        break;
    case HF_KILL_STREAM: {
        int a = kill_readers(0, k->s.pid), b = kill_readers(1, k->s.pid);
        snprintf(f->what + strlen(f->what), sizeof f->what - strlen(f->what), ": %d + %d killed", a, b);
        break;
    }
    case HF_DEL_STREAM:
        f->node = HIST_GLOBAL;
        rc = backend_cmd(pl->param, NULL, "DEL %s", g_streams[pl->param]);
        break;
    case HF_TRIM_STREAM:
        f->node = HIST_GLOBAL;
        rc = backend_cmd(pl->param, NULL, "XTRIM %s MAXLEN 1", g_streams[pl->param]);
        break;
    case HF_WRONGTYPE_STREAM:
        f->node = HIST_GLOBAL;
        rc = backend_cmd(pl->param, NULL, "SET %s not-a-stream", g_streams[pl->param]);
        if (rc == 0) runner_sleep_ms(pl->hold_ms, NULL); /* the fault's planned duration */
        if (rc == 0) rc = backend_cmd(pl->param, NULL, "DEL %s", g_streams[pl->param]);
        break;
    case HF_RESTART: {
        if (pl->param) {
            rc = procs_kill_wait(k->s.pid, k->s.start, 1, k->s.name);
        } else {
            /* a keygate stopped by SIGTERM must exit 0 (README, Signals): its status is read here, as its parent */
            procs_signal(k->s.pid, k->s.start, SIGTERM);
            long long deadline = procs_mono_ms() + SHUTDOWN_MS;
            int status = 0;
            pid_t got = 0;
            while ((got = waitpid(k->s.pid, &status, WNOHANG)) == 0 && procs_mono_ms() < deadline) procs_nap_ms(5);
            if (got != k->s.pid) {
                runner_fail("%s did not exit within %d ms of SIGTERM", k->s.name, SHUTDOWN_MS);
                rc = -1;
            } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                serverkit_print_log_tail(k->s.name, k->s.log);
                runner_fail("%s ended badly after SIGTERM (wait status 0x%x)", k->s.name, (unsigned)status);
                rc = -1;
            }
        }
        if (rc != 0) {
            if (runner.failure[0] == '\0') runner_fail("%s", procs_last_error());
            return -1;
        }
        procs_forget(k->s.pid);
        k->restarts++;
        rc = node_spawn(pl->node) == 0 && node_wait_ready(pl->node, START_MS, 0) == 0 ? 0 : -1;
        break;
    }
    case HF_SLOW_LINK: {
        proxy_set_delay(g.proxy, pl->param);
        runner_sleep_ms(pl->hold_ms, NULL); /* the fault's planned duration */
        proxy_set_delay(g.proxy, 0);
        long long deadline = procs_mono_ms() + pl->param + 5000;
        while (proxy_pending(g.proxy) > 0 && procs_mono_ms() < deadline) procs_nap_ms(5);
        if (proxy_pending(g.proxy) > 0) {
            runner_fail("the delay proxy still holds %lld bytes %d ms after the delay went to 0",
                        proxy_pending(g.proxy), pl->param + 5000);
            rc = -1;
        }
        break;
    }
    case HF_RELOAD: {
        f->node = HIST_GLOBAL;
        char text[sizeof g_registry + 256];
        snprintf(text, sizeof text,
                 "%snamespace hot:%c: instance=durable ttl=none%s owner=app purpose=\"chaos reload: a longer prefix "
                 "inside hot:\"\n",
                 g_registry, "sht"[pl->param % 3], pl -> param >= 3 ? " near-cache=30s" : "");
        g_reload_applied = pl->node;
        if (node_reload(pl->node, text) != 0) return -1;
        runner_sleep_ms(pl->hold_ms, NULL); /* the fault's planned duration */
        rc = node_reload(pl->node, g_registry);
        if (rc == 0) g_reload_applied = -1;
        break;
    }
    default:
        runner_fail("fault %s is not implemented", hist_fault_name(pl->kind));
        return -1;
    }
    f->end_us = runner_now_us();
    g_nfaults++;
    g_fault_count[pl->kind]++;
    printf("chaos: +%7.3fs .. +%7.3fs %-11s %s\n", f->start_us / 1e6, f->end_us / 1e6, hist_fault_name(f->kind),
           f->what);
    fflush(stdout);
    return rc;
}

/* Put back whatever a fault that failed half-way left: every keygate continued, no delay, the
 * registry of a reload restored. */
static void heal_all(void)
{
    for (int n = 0; n < NNODES; n++)
        if (g.node[n].s.pid > 0) procs_signal(g.node[n].s.pid, g.node[n].s.start, SIGCONT);
    if (g.proxy) proxy_set_delay(g.proxy, 0);
    if (g_reload_applied >= 0) {
        int n = g_reload_applied;
        g_reload_applied = -1;
        serverkit_write_file(g.node[n].registry, g_registry, 0644);
        if (g.node[n].s.pid > 0) procs_signal(g.node[n].s.pid, g.node[n].s.start, SIGHUP);
    }
}

/* Run the schedule (in the main thread: see main), until its end or DURATION minus a second. */
static void nemesis_run(void)
{
    long long end_us = (long long)g_o.duration_s * 1000000 - 1000000;
    for (int i = 0; i < g_nplan; i++) {
        runner_sleep_ms(g_plan[i].gap_ms, NULL); /* the schedule's planned gap */
        if (runner_now_us() + (long long)g_plan[i].hold_ms * 1000 > end_us) {
            printf("chaos: +%7.3fs schedule cut before fault #%d: DURATION is up (a slow machine)\n",
                   runner_now_us() / 1e6, i);
            break;
        }
        if (fault_run(&g_plan[i]) != 0) {
            heal_all();
            break;
        }
    }
}

/* ---- settling and the lost-write check ---- */

/* Wait until every keygate runs, answers PING and has its stream readers connected, and the proxy
 * holds nothing: the run has settled. 0, or -1 (runner_fail). */
static int settle(void)
{
    heal_all();
    for (int n = 0; n < NNODES; n++) {
        if (!procs_alive(g.node[n].s.pid, g.node[n].s.start)) {
            serverkit_print_log_tail(g.node[n].s.name, g.node[n].s.log);
            runner_fail("%s (pid %d) is not running after the schedule: it exited by itself", g.node[n].s.name,
                        (int)g.node[n].s.pid);
            return -1;
        }
        if (node_wait_ready(n, g_o.settle_ms, 1) != 0) return -1;
    }
    long long deadline = procs_mono_ms() + g_o.settle_ms;
    while (proxy_pending(g.proxy) > 0) {
        if (procs_mono_ms() >= deadline) {
            runner_fail("the delay proxy still holds %lld bytes after %d ms", proxy_pending(g.proxy), g_o.settle_ms);
            return -1;
        }
        procs_nap_ms(5);
    }
    return 0;
}

/* The full read of key (GET, HGETALL, SMEMBERS) on keygate n (or directly on its backend:
 * HIST_DIRECT) into a new op of l. */
static struct hist_op *final_read(struct client *cl, int n, int key)
{
    struct hist_op *o = runner_oplog_add(&cl->log);
    o->thread = cl->id;
    o->node = n;
    o->nkeys = 1;
    o->key[0] = key;
    o->kind = g_keys[key].type == T_STR ? HOP_GET : g_keys[key].type == T_HASH ? HOP_HGETALL : HOP_SMEMBERS;
    if (n != HIST_DIRECT) {
        do_read(cl, o);
        return o;
    }
    const char *cmd = o->kind == HOP_GET ? "GET" : o->kind == HOP_HGETALL ? "HGETALL" : "SMEMBERS";
    o->start_us = runner_now_us();
    redisContext *c = backend_conn(g_keys[key].instance, g_o.client_timeout_ms);
    if (c == NULL) {
        o->end_us = runner_now_us();
        o->status = HST_ERR_CONN;
        snprintf(o->err, sizeof o->err, "cannot connect to backend %s", g_instances[g_keys[key].instance]);
        return o;
    }
    redisReply *r = redisCommandArgv(c, 2, (const char *[]){cmd, g_keys[key].name}, NULL);
    o->end_us = runner_now_us();
    if (r == NULL) {
        o->status = HST_ERR_CONN;
        snprintf(o->err, sizeof o->err, "%.100s", c->errstr);
    } else {
        read_value(o, 0, r);
    }
    freeReplyObject(r);
    redisFree(c);
    return o;
}

/* Read every key through every keygate and on its backend, in rounds, until a round shows every
 * key at least at its last acknowledged write or settle_ms passed; the last round's reads are the
 * final ones (the checker's LOST rule). Every round is in the history (the STALE rule). */
static void final_reads(struct client *cl)
{
    long long deadline = procs_mono_ms() + g_o.settle_ms;
    int rounds = 0;
    for (;;) {
        size_t first = cl->log.n;
        int short_reads = 0;
        rounds++;
        for (int key = 0; key < NKEYS; key++)
            for (int n = HIST_DIRECT; n < NNODES; n++) {
                struct hist_op *o = final_read(cl, n, key);
                if (o->status != HST_OK || o->value[0] < ack_last(key)) short_reads++;
            }
        if (short_reads == 0 || procs_mono_ms() >= deadline) {
            for (size_t i = first; i < cl->log.n; i++) cl->log.ops[i].final = 1;
            printf("chaos: lost-write check: %d round%s of %d reads; the last %s\n", rounds, rounds > 1 ? "s" : "",
                   NKEYS * (NNODES + 1), short_reads ? "still short (see LOST below)" : "all at the last ack");
            return;
        }
        runner_sleep_ms(50, NULL); /* the poll's interval */
    }
}

/* INFO nearcache of keygate n, one line per namespace, printed (does the near cache serve at all?). */
static void print_nearcache(int n)
{
    redisContext *c = redisConnectWithTimeout("127.0.0.1", g.node[n].s.port, (struct timeval){1, 0});
    if (c != NULL && !c->err) {
        redisSetTimeout(c, (struct timeval){2, 0});
        redisReply *r = redisCommand(c, "INFO nearcache");
        if (r != NULL && r->type == REDIS_REPLY_STRING)
            for (char *save = NULL, *l = strtok_r(r->str, "\r\n", &save); l; l = strtok_r(NULL, "\r\n", &save))
                if (strncmp(l, "nc_", 3) == 0)
                    printf("chaos: %s (pid %d, %d restarts) %s\n", g.node[n].s.name, (int)g.node[n].s.pid,
                           g.node[n].restarts, l);
        freeReplyObject(r);
    }
    redisFree(c);
}

/* ---- the result ---- */

static void write_history(const char *path, const struct history *h)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) return;
    fprintf(f, "# op\tstart_us\tend_us\tnode\tthread\tkind\tkeys\tvalues\targ\tstatus\tfinal\terror\n");
    for (size_t i = 0; i < h->nops; i++) {
        const struct hist_op *o = &h->ops[i];
        fprintf(f, "%zu\t%lld\t%lld\t%s\t%d\t%s\t", i, o->start_us, o->end_us,
                o->node == HIST_DIRECT ? "backend" : g_node_names[o->node], o->thread, hist_op_name(o->kind));
        for (int s = 0; s < o->nkeys; s++) fprintf(f, "%s%s", s ? "," : "", g_key_names[o->key[s]]);
        fprintf(f, "\t");
        for (int s = 0; s < o->nkeys; s++) fprintf(f, "%s%lld", s ? "," : "", o->value[s]);
        fprintf(f, "\t%lld\t%s\t%d\t%s\n", o->arg, hist_status_name(o->status), o->final, o->err);
    }
    fprintf(f, "# fault\tstart_us\tend_us\tnode\tkind\twhat\n");
    for (size_t i = 0; i < h->nfaults; i++)
        fprintf(f, "F%zu\t%lld\t%lld\t%s\t%s\t%s\n", i, h->faults[i].start_us, h->faults[i].end_us,
                h->faults[i].node == HIST_GLOBAL ? "all" : g_node_names[h->faults[i].node],
                hist_fault_name(h->faults[i].kind), h->faults[i].what);
    fclose(f);
}

/* The incident a violation belongs to: the same rule on the same keygate and key showing the same write's value
 * (STALE, LOST, FUTURE), or the same rule, keygate and status (ERROR, BAD). */
static int same_incident(const struct history *h, const struct check_violation *a, const struct check_violation *b)
{
    const struct hist_op *x = &h->ops[a->op], *y = &h->ops[b->op];
    if (a->rule != b->rule || x->node != y->node) return 0;
    if (a->rule == CR_ERROR || a->rule == CR_BAD) return x->status == y->status && x->kind == y->kind;
    return x->key[a->slot] == y->key[b->slot] && a->got_op == b->got_op && a->got == b->got &&
           a->same_keygate == b->same_keygate;
}

/* Every violation grouped by incident (same_incident): the first of each printed in full with how many more there
 * were and until when, for the first PRINT_VIOLATIONS incidents. */
static void print_violations(const struct history *h, const struct check_result *r, const char *path)
{
    size_t n = r->nviol, nincidents = 0;
    size_t *first = malloc((n + 1) * sizeof *first), *count = calloc(n + 1, sizeof *count),
           *last = malloc((n + 1) * sizeof *last);
    if (first == NULL || count == NULL || last == NULL) abort();
    for (size_t i = 0; i < n; i++) {
        size_t g = 0;
        while (g < nincidents && !same_incident(h, &r->viol[first[g]], &r->viol[i])) g++;
        if (g == nincidents) first[nincidents++] = i;
        count[g]++;
        last[g] = i;
    }
    if (n > 0)
        printf("chaos: %zu violations in %zu incidents (same rule, keygate, key and value shown)\n", n, nincidents);
    for (size_t g = 0; g < nincidents && g < PRINT_VIOLATIONS; g++) {
        const struct hist_op *a = &h->ops[r->viol[first[g]].op], *b = &h->ops[r->viol[last[g]].op];
        printf("--- incident %zu of %zu (SEED=%llu): %zu violation%s from +%.3fs to +%.3fs ---\n", g + 1, nincidents,
               g_o.seed, count[g], count[g] > 1 ? "s" : "", a->start_us / 1e6, b->end_us / 1e6);
        check_print_violation(stdout, h, &g_o.p, &r->viol[first[g]]);
    }
    if (nincidents > PRINT_VIOLATIONS)
        printf("--- and %zu more incidents (the whole history: %s) ---\n", nincidents - PRINT_VIOLATIONS, path);
    free(first);
    free(count);
    free(last);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *topology = getenv("TOPOLOGY");
    int sentinel = topology != NULL && strcmp(topology, "sentinel") == 0,
        cluster = topology != NULL && strcmp(topology, "cluster") == 0;
    if (topology != NULL && *topology != '\0' && strcmp(topology, "nearcache") != 0 && !sentinel && !cluster) {
        fprintf(stderr, "chaos: TOPOLOGY=%s: nearcache (the default), sentinel or cluster\n", topology);
        return 2;
    }
    opts_read();
    if (sentinel || cluster) {
        if (procs_install("chaos", 1) != 0) {
            perror("chaos: procs_install");
            return 2;
        }
        struct chaos_common c = {.seed = g_o.seed,
                                 .duration_s = g_o.duration_s,
                                 .faults = getenv("FAULTS"),
                                 .p = g_o.p,
                                 .keep = g_o.keep,
                                 .keygate_bin = g_o.keygate_bin};
        return cluster ? chaos_cluster_main(&c) : chaos_sentinel_main(&c);
    }
    for (int k = 0; k < NKEYS; k++) {
        g_key_names[k] = g_keys[k].name;
        pthread_mutex_init(&g_acks[k].lock, NULL);
    }
    if (procs_install("chaos", 0) != 0) {
        perror("chaos: procs_install");
        return 2;
    }
    printf("chaos: SEED=%llu DURATION=%d FAULTS=%s\n", g_o.seed, g_o.duration_s, g_o.faults_text);
    printf("chaos: bounds: L=%lld ms (CHAOS_BOUND_MS); L=%lld ms in a fault window (CHAOS_FAULT_BOUND_MS), a window "
           "being a fault's start to %lld ms after its end (CHAOS_FAULT_TAIL_MS); client errors explained by "
           "stop/restart/slow-link on their keygate up to %lld ms after the fault (CHAOS_ERROR_GRACE_MS); client "
           "timeout %d ms; settle deadline %d ms\n",
           g_o.p.bound_us / 1000, g_o.p.fault_bound_us / 1000, g_o.p.fault_tail_us / 1000, g_o.p.error_grace_us / 1000,
           g_o.client_timeout_ms, g_o.settle_ms);
    if (g_o.p.same_keygate_bound_us >= 0)
        printf("chaos: and a read shows the writes its own keygate acknowledged before start - %lld ms "
               "(CHAOS_SAME_KEYGATE_BOUND_MS)\n",
               g_o.p.same_keygate_bound_us / 1000);
    plan_make();
    plan_print();
    lulls_make();
    printf("chaos: %d write lulls (every writer pauses):", g_nlulls);
    for (int i = 0; i < g_nlulls; i++) printf(" +%.1f..%.1fs", g_lull_start_us[i] / 1e6, g_lull_end_us[i] / 1e6);
    printf("\n");

    runner.t0_us = runner_mono_us();
    long long wall0 = procs_mono_ms();
    int started = deployment_start() == 0;
    struct client *clients = NULL;
    int nclients = NKEYS + NNODES * g_o.readers;
    struct client settler = {.id = nclients};
    struct check_result res = {0};
    struct history hist = {0};
    int failed = 1;
    if (started) {
        printf("chaos: kg0 :%d threads 1; kg1 :%d threads 2, durable through the delay proxy :%d; kg2 :%d threads "
               "2; durable :%d/%d, cache :%d/%d (tls/plain); dir %s\n",
               g.node[0].s.port, g.node[1].s.port, g.proxy_port, g.node[2].s.port, g.backend[0].port,
               g.backend[0].plain_port, g.backend[1].port, g.backend[1].plain_port, g.dir);
        runner.t0_us = runner_mono_us(); /* the run starts with the load */
        clients = calloc((size_t)nclients, sizeof *clients);
        for (int i = 0; i < nclients; i++) {
            struct client *cl = &clients[i];
            cl->id = i;
            cl->writer_key = i < NKEYS ? i : -1;
            cl->node = i < NKEYS ? 0 : (i - NKEYS) % NNODES;
            cl->rng = g_o.seed * 7919 + (unsigned long long)i;
            pthread_create(&cl->thread, NULL, i < NKEYS ? writer_main : reader_main, cl);
        }
        /* the nemesis runs in this thread: a keygate it restarts is this thread's child, and PR_SET_PDEATHSIG
         * (procs_spawn's safety net) fires when the thread that forked it ends, not the process */
        nemesis_run();
        long long end_us = (long long)g_o.duration_s * 1000000;
        while (runner_now_us() < end_us && runner.failure[0] == '\0') procs_nap_ms(50); /* the run's planned length */
        __atomic_store_n(&runner.stop_clients, 1, __ATOMIC_RELEASE);
        for (int i = 0; i < nclients; i++) pthread_join(clients[i].thread, NULL);
        long long load_end_us = runner_now_us();
        if (runner.failure[0] == '\0' && settle() == 0) {
            printf("chaos: +%7.3fs settled: every keygate answers and its stream readers are connected\n",
                   runner_now_us() / 1e6);
            final_reads(&settler);
        }
        for (int n = 0; n < NNODES; n++) print_nearcache(n);

        /* the history: every thread's operations by start time, the faults */
        size_t total = settler.log.n;
        for (int i = 0; i < nclients; i++) total += clients[i].log.n;
        struct hist_op *ops = malloc((total + 1) * sizeof *ops);
        size_t k = 0;
        for (int i = 0; i < nclients; i++) {
            memcpy(ops + k, clients[i].log.ops, clients[i].log.n * sizeof *ops);
            k += clients[i].log.n;
            free(clients[i].log.ops);
        }
        memcpy(ops + k, settler.log.ops, settler.log.n * sizeof *ops);
        k += settler.log.n;
        free(settler.log.ops);
        qsort(ops, k, sizeof *ops, runner_by_start_time);
        hist = (struct history){.ops = ops,
                                .nops = k,
                                .faults = g_faults,
                                .nfaults = (size_t)g_nfaults,
                                .nkeys = NKEYS,
                                .key_names = g_key_names,
                                .nnodes = NNODES,
                                .node_names = g_node_names};
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/history.tsv", g.dir);
        write_history(path, &hist);

        ssize_t nv = check_history(&hist, &g_o.p, &res);
        long long served = 0;
        for (size_t i = 0; i < hist.nops; i++)
            served += !hist_op_is_write(hist.ops[i].kind) && hist.ops[i].status == HST_OK;
        printf("chaos: load ran %.1f s: %zu operations, %.0f ops/s; %lld reads served\n", load_end_us / 1e6, hist.nops,
               hist.nops / (load_end_us / 1e6), served);
        printf("chaos: faults run:");
        for (int f = 0; f < HF_NKINDS; f++)
            if (g_o.faults & (1u << f)) printf(" %s %d", hist_fault_name(f), g_fault_count[f]);
        printf("\n");
        check_print_summary(stdout, &hist, &res);
        if (nv < 0) runner_fail("the checker ran out of memory");
        print_violations(&hist, &res, path);
        failed = nv != 0 || runner.failure[0] != '\0';
        free(clients);
    }
    deployment_stop();
    if (procs_leftovers() != 0) runner_fail("servers still run after the stop");
    failed = failed || runner.failure[0] != '\0';
    printf("chaos: run took %.1f s\n", (procs_mono_ms() - wall0) / 1000.0);
    if (failed) {
        if (runner.failure[0]) printf("chaos: HARNESS FAILURE: %s\n", runner.failure);
        printf(
            "chaos: FAILED with SEED=%llu DURATION=%d FAULTS=%s: %zu violations (reproduce: make test-chaos SEED=%llu "
            "DURATION=%d FAULTS=%s); files kept in %s\n",
            g_o.seed, g_o.duration_s, g_o.faults_text, res.nviol, g_o.seed, g_o.duration_s, g_o.faults_text, g.dir);
    } else {
        printf("chaos: PASSED with SEED=%llu\n", g_o.seed);
        if (!g_o.keep && g.dir[0]) serverkit_remove_tree(g.dir);
    }
    check_result_free(&res);
    free((void *)hist.ops);
    printf("%d passed, %d failed\n", failed ? 0 : 1, failed ? 1 : 0);
    return failed ? 1 : 0;
}
