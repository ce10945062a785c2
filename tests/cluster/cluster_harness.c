/* cluster_harness.c: starts a real local TLS Redis Cluster (3 primaries + 3 replicas) on free loopback ports for the cluster suites, and drives it: failover, SIGSTOP, reshard, a held slot migration. */
#include "cluster_harness.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_MS 10000  /* a node answers PING */
#define FORM_MS 30000   /* the cluster is formed after --cluster create */
#define CREATE_MS 60000 /* redis-cli --cluster create runs */
#define GONE_MS 5000    /* a SIGKILLed node's threads are gone */
#define POLL_MS 50      /* between two looks at a condition */
#define MAX_SPAWNED 256

/* Ports: TLS ports in [TLS_LOW, TLS_HIGH] so that the bus port (+10000) stays below the
 * kernel's ephemeral range (32768 and up on Debian: no outgoing connection takes it between
 * the pick and the bind), plain ports in their own range; all below 45000. */
#define TLS_LOW 20000
#define TLS_HIGH 22767
#define PLAIN_LOW 23000
#define PLAIN_HIGH 29999
#define BUS_OFFSET 10000

static char g_err[2048];

const char *cluster_last_error(void)
{
    return g_err;
}

static void set_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
}

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- processes: every server this process tree started, with who it was ---- */

struct spawned {
    pid_t pid; /* 0: free */
    pid_t owner;
    unsigned long long start;
};

static struct spawned *g_spawned; /* MAP_SHARED: test processes see what the runner started and the reverse */

/* pid's start time (field 22 of /proc/PID/stat) and state letter; 0 when there is no such
 * process. Only open/read/close: safe in a signal handler. */
static unsigned long long proc_stat(pid_t pid, char *state)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* after the command name, which may hold anything */
    if (p == NULL || p[1] != ' ') return 0;
    if (state != NULL) *state = p[2];
    int field = 2;
    for (; *p != '\0' && field < 22; p++)
        if (*p == ' ') field++;
    return field == 22 ? strtoull(p, NULL, 10) : 0;
}

/* Threads left in pid's group ("Threads:" of /proc/PID/status); 0 when gone. A SIGKILLed
 * redis-server's leader is a zombie while its bio threads still exit and hold its ports. */
static int proc_threads(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL) return 0;
    int threads = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "Threads:", 8) == 0) threads = atoi(line + 8);
    fclose(f);
    return threads;
}

/* Is the process recorded as (pid, start) still running (not a zombie)? */
static int proc_alive(pid_t pid, unsigned long long start)
{
    char state = '?';
    if (pid <= 0) return 0;
    unsigned long long now = proc_stat(pid, &state);
    return now != 0 && now == start && state != 'Z' && state != 'X';
}

/* Is it gone for good: reaped, or (seen from a process that is not its parent) a zombie
 * whose last thread has exited? Reaps it when we are its parent. */
static int proc_gone(pid_t pid, unsigned long long start)
{
    if (pid <= 0) return 1;
    if (waitpid(pid, NULL, WNOHANG) == pid) return 1;
    char state = '?';
    unsigned long long now = proc_stat(pid, &state);
    if (now == 0 || now != start) return 1;
    return (state == 'Z' || state == 'X') && proc_threads(pid) <= 1;
}

static int signal_if_same(pid_t pid, unsigned long long start, int sig)
{
    if (pid <= 0 || proc_stat(pid, NULL) != start) {
        errno = ESRCH;
        return -1;
    }
    return kill(pid, sig);
}

static void spawned_add(pid_t pid, unsigned long long start)
{
    for (int i = 0; g_spawned != NULL && i < MAX_SPAWNED; i++)
        if (__sync_bool_compare_and_swap(&g_spawned[i].pid, 0, -1)) {
            g_spawned[i].owner = getpid();
            g_spawned[i].start = start;
            __atomic_store_n(&g_spawned[i].pid, pid, __ATOMIC_RELEASE);
            return;
        }
    fprintf(stderr, "cluster_harness: more than %d servers: pid %d not recorded (PDEATHSIG still ends it)\n",
            MAX_SPAWNED, (int)pid);
}

/* Drop pid's entry once the process is gone (reaped): the table only holds what may still run. */
static void spawned_forget(pid_t pid)
{
    for (int i = 0; g_spawned != NULL && pid > 0 && i < MAX_SPAWNED; i++)
        if (__sync_bool_compare_and_swap(&g_spawned[i].pid, pid, 0)) return;
}

/* SIGKILL every server this process started (atexit, fatal signals): a test process that
 * exits must not kill the runner's cluster, hence the owner check. */
static void spawned_kill_mine(void)
{
    for (int i = 0; g_spawned != NULL && i < MAX_SPAWNED; i++) {
        pid_t pid = g_spawned[i].pid;
        if (pid <= 0 || g_spawned[i].owner != getpid()) continue;
        signal_if_same(pid, g_spawned[i].start, SIGCONT);
        signal_if_same(pid, g_spawned[i].start, SIGKILL);
    }
}

static void on_fatal_signal(int sig)
{
    spawned_kill_mine();
    signal(sig, SIG_DFL);
    raise(sig);
}

static int safety_net_install(void)
{
    static pid_t installed;
    if (installed == getpid()) return 0;
    if (g_spawned == NULL) {
        void *m =
            mmap(NULL, sizeof(struct spawned) * MAX_SPAWNED, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return -1;
        g_spawned = m;
    }
    /* A process group of its own (a Check test process has one already): a SIGSTOPped node
     * in the group make runs in would make that group orphaned with a stopped member, and
     * the kernel would SIGHUP all of it when one of its processes exits (see harness.c). */
    if (getpgrp() != getpid()) setpgid(0, 0);
    if (installed == 0) atexit(spawned_kill_mine); /* inherited by forks: spawned_kill_mine checks the owner */
    installed = getpid();
    signal(SIGINT, on_fatal_signal);
    signal(SIGTERM, on_fatal_signal);
    signal(SIGABRT, on_fatal_signal);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

int cluster_leftovers(void)
{
    int n = 0;
    for (int i = 0; g_spawned != NULL && i < MAX_SPAWNED; i++) {
        pid_t pid = g_spawned[i].pid;
        if (pid <= 0) continue;
        if (proc_gone(pid, g_spawned[i].start)) {
            __sync_bool_compare_and_swap(&g_spawned[i].pid, pid, 0);
            continue;
        }
        fprintf(stderr, "cluster_harness: LEFTOVER: pid %d (started by %d) still runs\n", (int)pid,
                (int)g_spawned[i].owner);
        n++;
    }
    return n;
}

/* fork + exec argv, stdout and stderr appended to log_path, REDISCLI_AUTH=auth when not
 * NULL; the child dies with us (PDEATHSIG) and keeps no fd of ours. Returns its pid, or -1. */
static pid_t spawn(char *const argv[], const char *log_path, const char *auth, unsigned long long *start)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGABRT, SIG_DFL);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        int out = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int in = open("/dev/null", O_RDONLY);
        if (out < 0 || in < 0) _exit(127);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        closefrom(3); /* no test's client sockets in a server */
        if (auth != NULL) setenv("REDISCLI_AUTH", auth, 1);
        execvp(argv[0], argv);
        dprintf(2, "cluster_harness: cannot exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (pid < 0) return -1;
    /* the child cannot exec before its stat exists; read it at once, before anyone can reap it */
    *start = proc_stat(pid, NULL);
    spawned_add(pid, *start);
    return pid;
}

/* Wait for a child we forked to exit (timeout_ms); its wait status, or -1 (then SIGKILLed and reaped). */
static int wait_child(pid_t pid, int timeout_ms)
{
    long long deadline = mono_ms() + timeout_ms;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            spawned_forget(pid);
            return status;
        }
        if (r < 0 && errno != EINTR) return -1;
        if (mono_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            spawned_forget(pid);
            return -1;
        }
        nap_ms(20);
    }
}

/* ---- files ---- */

static int write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return -1;
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)n;
    }
    return close(fd);
}

static void print_log_tail(const char *title, const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) return;
    char buf[4097];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > 4096 ? size - 4096 : 0, SEEK_SET);
    size_t n = fread(buf, 1, 4096, f);
    fclose(f);
    buf[n] = '\0';
    fprintf(stderr, "---- %s (%s, last 4 KiB) ----\n%s\n---- end of %s ----\n", title, path, buf, title);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void random_hex(char *out, size_t bytes)
{
    unsigned char raw[32];
    assert(bytes <= sizeof raw);
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, raw, bytes) : -1;
    if (fd >= 0) close(fd);
    for (size_t i = 0; i < bytes; i++) sprintf(out + 2 * i, "%02x", (n == (ssize_t)bytes ? raw[i] : rand()) & 0xff);
}

/* ---- ports ---- */

static int bind_loopback(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Pick every node's plain, TLS and bus ports, all free and different: each bound at once
 * and held until all are found. */
static int pick_ports(struct cluster *c)
{
    static unsigned seed;
    if (seed == 0) seed = (unsigned)getpid() * 2654435761u ^ (unsigned)mono_ms();
    int fds[3 * CLUSTER_NODES], nfds = 0, rc = 0;
    for (int i = 0; i < CLUSTER_NODES && rc == 0; i++) {
        struct cluster_node *n = &c->nodes[i];
        int found = 0;
        for (int tries = 0; tries < 500 && !found; tries++) {
            int tls = TLS_LOW + (int)(rand_r(&seed) % (TLS_HIGH - TLS_LOW + 1));
            int plain = PLAIN_LOW + (int)(rand_r(&seed) % (PLAIN_HIGH - PLAIN_LOW + 1));
            int a = bind_loopback(tls), b = bind_loopback(tls + BUS_OFFSET), p = bind_loopback(plain);
            if (a >= 0 && b >= 0 && p >= 0) {
                fds[nfds++] = a;
                fds[nfds++] = b;
                fds[nfds++] = p;
                n->tls_port = tls;
                n->bus_port = tls + BUS_OFFSET;
                n->plain_port = plain;
                found = 1;
            } else {
                if (a >= 0) close(a);
                if (b >= 0) close(b);
                if (p >= 0) close(p);
            }
        }
        if (!found) rc = -1;
    }
    for (int i = 0; i < nfds; i++) close(fds[i]);
    if (rc != 0) set_err("no free loopback ports in %d..%d / %d..%d", TLS_LOW, TLS_HIGH, PLAIN_LOW, PLAIN_HIGH);
    return rc;
}

/* ---- connections and replies ---- */

static redisContext *connect_port(int port, const char *password, int connect_ms, int io_ms)
{
    struct timeval ct = {connect_ms / 1000, (connect_ms % 1000) * 1000};
    struct timeval it = {io_ms / 1000, (io_ms % 1000) * 1000};
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", port, ct);
    if (ctx == NULL) return NULL;
    if (ctx->err || redisSetTimeout(ctx, it) != REDIS_OK) {
        redisFree(ctx);
        return NULL;
    }
    redisReply *r = redisCommand(ctx, "AUTH %s", password);
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    if (!ok) {
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

redisContext *cluster_connect(const struct cluster *c, int i)
{
    assert(i >= 0 && i < CLUSTER_NODES);
    return connect_port(c->nodes[i].plain_port, c->password, 2000, 10000);
}

/* One command on a new connection to node i; NULL (g_err says why) when it cannot connect or
 * gets no reply. io_ms bounds the wait. */
static redisReply *node_command(const struct cluster *c, int i, int io_ms, const char *fmt, ...)
{
    redisContext *ctx = connect_port(c->nodes[i].plain_port, c->password, 1000, io_ms);
    if (ctx == NULL) {
        set_err("node %d (port %d) does not answer", i, c->nodes[i].plain_port);
        return NULL;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    if (r == NULL) set_err("node %d (port %d): %s", i, c->nodes[i].plain_port, ctx->errstr);
    redisFree(ctx);
    return r;
}

static const char *reply_text(const redisReply *r)
{
    if (r == NULL) return "(no reply)";
    if (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STRING) return r->str;
    return "(not a string)";
}

int cluster_node_by_port(const struct cluster *c, int port)
{
    for (int i = 0; i < CLUSTER_NODES; i++)
        if (c->nodes[i].plain_port == port || c->nodes[i].tls_port == port) return i;
    return -1;
}

int cluster_node_by_id(const struct cluster *c, const char *id)
{
    for (int i = 0; i < CLUSTER_NODES; i++)
        if (c->nodes[i].id[0] != '\0' && strcmp(c->nodes[i].id, id) == 0) return i;
    return -1;
}

int cluster_node_alive(const struct cluster *c, int i)
{
    assert(i >= 0 && i < CLUSTER_NODES);
    return proc_alive(c->nodes[i].pid, c->nodes[i].start);
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

/* The value of field `name` in a RESP2 flat map (array of name, value, ...), or NULL. */
static const redisReply *map_get(const redisReply *m, const char *name)
{
    if (m == NULL || m->type != REDIS_REPLY_ARRAY) return NULL;
    for (size_t k = 0; k + 1 < m->elements; k += 2)
        if (m->element[k]->type == REDIS_REPLY_STRING && strcmp(m->element[k]->str, name) == 0)
            return m->element[k + 1];
    return NULL;
}

static int str_is(const redisReply *r, const char *s)
{
    return r != NULL && r->type == REDIS_REPLY_STRING && strcmp(r->str, s) == 0;
}

/* owners[] from a CLUSTER SHARDS reply: per shard with slots, its primary (role master,
 * the online one first) as a node index; -1 for slots no shard names. */
static int shards_owners(const struct cluster *c, const redisReply *r, int owners[CLUSTER_SLOTS])
{
    for (int s = 0; s < CLUSTER_SLOTS; s++) owners[s] = -1;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        set_err("CLUSTER SHARDS: %s", reply_text(r));
        return -1;
    }
    for (size_t k = 0; k < r->elements; k++) {
        const redisReply *slots = map_get(r->element[k], "slots"), *nodes = map_get(r->element[k], "nodes");
        if (slots == NULL || nodes == NULL || slots->type != REDIS_REPLY_ARRAY || nodes->type != REDIS_REPLY_ARRAY) {
            set_err("CLUSTER SHARDS: shard %zu has no slots or nodes", k);
            return -1;
        }
        if (slots->elements == 0) continue;
        int primary = -1;
        for (int pass = 0; pass < 2 && primary < 0; pass++)
            for (size_t j = 0; j < nodes->elements && primary < 0; j++) {
                const redisReply *n = nodes->element[j];
                if (str_is(map_get(n, "role"), "master") && (pass == 1 || str_is(map_get(n, "health"), "online"))) {
                    const redisReply *id = map_get(n, "id");
                    primary = id != NULL && id->type == REDIS_REPLY_STRING ? cluster_node_by_id(c, id->str) : -1;
                }
            }
        for (size_t j = 0; j + 1 < slots->elements; j += 2) {
            long long a = slots->element[j]->integer, b = slots->element[j + 1]->integer;
            if (slots->element[j]->type != REDIS_REPLY_INTEGER || a < 0 || b >= CLUSTER_SLOTS || a > b) {
                set_err("CLUSTER SHARDS: bad slot range in shard %zu", k);
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
    for (int i = 0; i < CLUSTER_NODES; i++)
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
    int seen[CLUSTER_NODES] = {0}, n = 0;
    for (int s = 0; s < CLUSTER_SLOTS; s++)
        if (owners[s] >= 0 && !seen[owners[s]]) seen[owners[s]] = 1;
    for (int k = 0; k < CLUSTER_NODES; k++)
        if (seen[k] && cluster_node_alive(c, k)) out[n++] = k;
    return n;
}

/* Is the cluster ok as every answering node sees it? 1 yes, 0 not yet (g_err: why). */
static int cluster_ok_now(struct cluster *c)
{
    static int first[CLUSTER_SLOTS], other[CLUSTER_SLOTS];
    int base = -1;
    for (int i = 0; i < CLUSTER_NODES; i++) {
        if (!node_answers(c, i)) continue;
        redisReply *r = node_command(c, i, 2000, "CLUSTER INFO");
        if (r == NULL) return 0;
        int ok = r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok") != NULL &&
                 strstr(r->str, "cluster_slots_ok:16384") != NULL;
        if (!ok) set_err("node %d: CLUSTER INFO: %.200s", i, reply_text(r));
        freeReplyObject(r);
        if (!ok) return 0;
        int *owners = base < 0 ? first : other;
        if (cluster_slot_owners(c, i, owners) != 0) return 0;
        for (int s = 0; s < CLUSTER_SLOTS; s++) {
            if (owners[s] < 0 || !cluster_node_alive(c, owners[s])) {
                set_err("node %d: slot %d is owned by %s", i, s, owners[s] < 0 ? "no known node" : "a dead node");
                return 0;
            }
            if (base >= 0 && owners[s] != first[s]) {
                set_err("nodes %d and %d disagree on slot %d: node %d vs node %d", base, i, s, first[s], owners[s]);
                return 0;
            }
        }
        if (base < 0) base = i;
    }
    if (base < 0) set_err("no node answers");
    return base >= 0;
}

int cluster_wait_ok(struct cluster *c, int timeout_ms)
{
    long long deadline = mono_ms() + timeout_ms;
    for (;;) {
        if (cluster_ok_now(c)) return 0;
        if (mono_ms() >= deadline) {
            char why[sizeof g_err];
            snprintf(why, sizeof why, "%s", g_err);
            set_err("cluster not ok within %d ms: %s", timeout_ms, why);
            return -1;
        }
        nap_ms(POLL_MS);
    }
}

/* Every primary has exactly one replica whose link is up (ROLE on the replicas)? */
static int replicas_ok_now(struct cluster *c)
{
    int primaries[CLUSTER_NODES], np = cluster_primaries(c, primaries);
    if (np != 3) {
        set_err("%d primaries own slots, not 3", np);
        return 0;
    }
    int replicas_of[CLUSTER_NODES] = {0};
    for (int i = 0; i < CLUSTER_NODES; i++) {
        int is_primary = 0;
        for (int k = 0; k < np; k++) is_primary |= primaries[k] == i;
        if (is_primary) continue;
        redisReply *r = node_command(c, i, 2000, "ROLE");
        int ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 5 && str_is(r->element[0], "slave") &&
                 str_is(r->element[3], "connected") && r->element[2]->type == REDIS_REPLY_INTEGER;
        int master = ok ? cluster_node_by_port(c, (int)r->element[2]->integer) : -1;
        freeReplyObject(r);
        if (!ok || master < 0) {
            set_err("node %d is not a connected replica of a node of the cluster yet", i);
            return 0;
        }
        replicas_of[master]++;
    }
    for (int k = 0; k < np; k++)
        if (replicas_of[primaries[k]] != 1) {
            set_err("primary node %d has %d replicas", primaries[k], replicas_of[primaries[k]]);
            return 0;
        }
    return 1;
}

/* ---- start and stop ---- */

static int node_write_files(struct cluster *c, int i)
{
    struct cluster_node *n = &c->nodes[i];
    char conf[4 * PATH_MAX + 1024];
    snprintf(n->dir, sizeof n->dir, "%s/node%d", c->dir, i);
    snprintf(n->conf_file, sizeof n->conf_file, "%s/redis.conf", n->dir);
    snprintf(n->log_file, sizeof n->log_file, "%s/redis.log", n->dir);
    snprintf(conf, sizeof conf,
             "bind 127.0.0.1\nport %d\ntls-port %d\ncluster-port %d\n"
             "tls-cert-file \"%s/build/certs/server.crt\"\ntls-key-file \"%s/build/certs/server.key\"\n"
             "tls-ca-cert-file \"%s/build/certs/ca.crt\"\ntls-auth-clients optional\n"
             "tls-cluster yes\ntls-replication yes\n"
             "cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-node-timeout 1000\n"
             /* a replica is always allowed to fail over, however long its link was down */
             "cluster-replica-validity-factor 0\n"
             /* a replica syncs at once (7.0 waits 5 s for more replicas before a diskless sync) */
             "repl-diskless-sync-delay 0\n"
             "requirepass %s\nmasterauth %s\ndir \"%s\"\nsave \"\"\nappendonly no\ndaemonize no\nlogfile \"\"\n",
             n->plain_port, n->tls_port, n->bus_port, c->root, c->root, c->root, c->password, c->password, n->dir);
    if (mkdir(n->dir, 0700) != 0 || write_file(n->conf_file, conf, 0600) != 0) {
        set_err("writing node %d's files in %s: %s", i, n->dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Wait until node i answers PING on its plain port; -2 when it exited (a port taken). */
static int node_wait_ready(struct cluster *c, int i)
{
    struct cluster_node *n = &c->nodes[i];
    long long deadline = mono_ms() + START_MS;
    while (mono_ms() < deadline) {
        if (!cluster_node_alive(c, i)) {
            set_err("node %d (ports %d/%d) exited during start-up", i, n->plain_port, n->tls_port);
            return -2;
        }
        redisContext *ctx = connect_port(n->plain_port, c->password, 200, 1000);
        if (ctx != NULL) {
            redisReply *r = redisCommand(ctx, "CLUSTER MYID");
            int ok = r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40;
            if (ok) memcpy(n->id, r->str, 41);
            freeReplyObject(r);
            redisFree(ctx);
            if (ok) return 0;
        }
        nap_ms(POLL_MS);
    }
    set_err("node %d did not answer on 127.0.0.1:%d within %d ms", i, n->plain_port, START_MS);
    return -1;
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
    long long t0 = mono_ms();
    pid_t pid = spawn((char *const *)argv, log, c->password, &start);
    if (pid < 0) {
        set_err("fork for redis-cli %s: %s", what, strerror(errno));
        return -1;
    }
    int status = wait_child(pid, timeout_ms);
    if (status != 0) {
        print_log_tail("redis-cli", log);
        set_err("redis-cli %s: %s %d after %lld ms (log %s)", what,
                status == -1        ? "timed out, killed:"
                : WIFEXITED(status) ? "exit status"
                                    : "signal",
                status == -1        ? timeout_ms
                : WIFEXITED(status) ? WEXITSTATUS(status)
                                    : WTERMSIG(status),
                mono_ms() - t0, log);
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
    for (int i = 0; i < CLUSTER_NODES; i++) {
        struct cluster_node *n = &c->nodes[i];
        if (n->pid <= 0) continue;
        signal_if_same(n->pid, n->start, SIGCONT);
        signal_if_same(n->pid, n->start, SIGKILL);
    }
    long long deadline = mono_ms() + GONE_MS;
    for (int i = 0; i < CLUSTER_NODES; i++) {
        struct cluster_node *n = &c->nodes[i];
        while (n->pid > 0 && !proc_gone(n->pid, n->start) && mono_ms() < deadline) nap_ms(10);
        if (n->pid > 0 && !proc_gone(n->pid, n->start))
            fprintf(stderr, "cluster_harness: node %d (pid %d) still runs %d ms after SIGKILL\n", i, (int)n->pid,
                    GONE_MS);
        else {
            spawned_forget(n->pid);
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
        nftw(c->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    munmap(c, sizeof *c);
}

static int start_once(struct cluster *c)
{
    int rc = pick_ports(c);
    for (int i = 0; i < CLUSTER_NODES && rc == 0; i++) rc = node_write_files(c, i);
    for (int i = 0; i < CLUSTER_NODES && rc == 0; i++) {
        struct cluster_node *n = &c->nodes[i];
        char *argv[] = {"redis-server", n->conf_file, NULL};
        n->pid = spawn(argv, n->log_file, NULL, &n->start);
        if (n->pid < 0) {
            n->pid = 0;
            set_err("fork for redis-server: %s", strerror(errno));
            rc = -1;
        }
    }
    for (int i = 0; i < CLUSTER_NODES && rc == 0; i++) rc = node_wait_ready(c, i);
    if (rc == 0) rc = cluster_create(c);
    long long deadline = mono_ms() + FORM_MS;
    if (rc == 0) rc = cluster_wait_ok(c, FORM_MS);
    while (rc == 0 && !replicas_ok_now(c)) {
        if (mono_ms() >= deadline) {
            char why[sizeof g_err];
            snprintf(why, sizeof why, "%s", g_err);
            set_err("replicas not connected within %d ms: %s", FORM_MS, why);
            rc = -1;
        }
        nap_ms(POLL_MS);
    }
    if (rc != 0) {
        char why[sizeof g_err];
        snprintf(why, sizeof why, "%s", g_err);
        fprintf(stderr, "cluster_start: %s\n", why);
        for (int i = 0; i < CLUSTER_NODES; i++)
            if (c->nodes[i].log_file[0] != '\0') {
                char title[32];
                snprintf(title, sizeof title, "node %d", i);
                print_log_tail(title, c->nodes[i].log_file);
            }
        kill_all(c);
        snprintf(g_err, sizeof g_err, "%s", why);
    }
    return rc;
}

struct cluster *cluster_start(void)
{
    if (safety_net_install() != 0) {
        set_err("mmap: %s", strerror(errno));
        return NULL;
    }
    struct cluster *c = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED) {
        set_err("mmap: %s", strerror(errno));
        return NULL;
    }
    memset(c, 0, sizeof *c);
    c->owner = getpid();
    char ca[PATH_MAX + 32];
    if (getcwd(c->root, sizeof c->root) == NULL) {
        set_err("getcwd: %s", strerror(errno));
        munmap(c, sizeof *c);
        return NULL;
    }
    certs_path(c, "server.key", ca, sizeof ca);
    if (access(ca, R_OK) != 0) {
        set_err("%s missing: run scripts/gen-certs build/certs from the repo root (make certs)", ca);
        munmap(c, sizeof *c);
        return NULL;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(c->dir, sizeof c->dir, "%s/keygate-cluster-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(c->dir) == NULL) {
        set_err("mkdtemp %s: %s", c->dir, strerror(errno));
        munmap(c, sizeof *c);
        return NULL;
    }
    random_hex(c->password, 32);
    snprintf(c->pass_file, sizeof c->pass_file, "%s/cluster.pass", c->dir);
    char line[80];
    snprintf(line, sizeof line, "%s\n", c->password);
    if (write_file(c->pass_file, line, 0600) != 0) {
        set_err("writing %s: %s", c->pass_file, strerror(errno));
        cluster_stop(c);
        return NULL;
    }
    for (int attempt = 1; attempt <= 3; attempt++) {
        if (start_once(c) == 0) return c;
        if (attempt < 3) {
            fprintf(stderr, "cluster_start: attempt %d failed; again with other ports\n", attempt);
            /* a fresh set of node dirs: the failed attempt's nodes.conf must not be reused */
            for (int i = 0; i < CLUSTER_NODES; i++)
                if (c->nodes[i].dir[0] != '\0') nftw(c->nodes[i].dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
            memset(c->nodes, 0, sizeof c->nodes);
        }
    }
    char why[sizeof g_err];
    snprintf(why, sizeof why, "%s", g_err);
    cluster_stop(c);
    snprintf(g_err, sizeof g_err, "%s", why);
    return NULL;
}

/* ---- operations ---- */

int cluster_node_kill(struct cluster *c, int i)
{
    assert(i >= 0 && i < CLUSTER_NODES);
    struct cluster_node *n = &c->nodes[i];
    if (!cluster_node_alive(c, i)) {
        set_err("node %d is not running", i);
        return -1;
    }
    signal_if_same(n->pid, n->start, SIGKILL);
    long long deadline = mono_ms() + GONE_MS;
    while (!proc_gone(n->pid, n->start)) {
        if (mono_ms() >= deadline) {
            set_err("node %d (pid %d) still runs %d ms after SIGKILL", i, (int)n->pid, GONE_MS);
            return -1;
        }
        nap_ms(5);
    }
    n->stopped = 0;
    /* the pid stays recorded: the runner reaps it (cluster_stop); proc_alive says it is dead */
    return 0;
}

int cluster_kill_primary(struct cluster *c, int i, int timeout_ms, int *promoted, long long *ms)
{
    static int before[CLUSTER_SLOTS], after[CLUSTER_SLOTS];
    if (cluster_slot_owners(c, i, before) != 0) return -1;
    int nslots = 0;
    for (int s = 0; s < CLUSTER_SLOTS; s++) nslots += before[s] == i;
    if (nslots == 0) {
        set_err("node %d owns no slot", i);
        return -1;
    }
    long long t0 = mono_ms();
    if (cluster_node_kill(c, i) != 0 || cluster_wait_ok(c, timeout_ms) != 0) return -1;
    long long took = mono_ms() - t0;
    int k = any_node(c);
    if (k < 0 || cluster_slot_owners(c, k, after) != 0) return -1;
    int heir = -1;
    for (int s = 0; s < CLUSTER_SLOTS; s++) {
        if (before[s] != i) continue;
        if (heir < 0) heir = after[s];
        if (after[s] != heir || heir == i || heir < 0) {
            set_err("slot %d of killed node %d is owned by node %d after the failover, not by one heir (%d)", s, i,
                    after[s], heir);
            return -1;
        }
    }
    if (promoted != NULL) *promoted = heir;
    if (ms != NULL) *ms = took;
    return 0;
}

int cluster_node_pause(struct cluster *c, int i)
{
    struct cluster_node *n = &c->nodes[i];
    if (!cluster_node_alive(c, i) || signal_if_same(n->pid, n->start, SIGSTOP) != 0) {
        set_err("node %d: SIGSTOP: not running", i);
        return -1;
    }
    long long deadline = mono_ms() + GONE_MS;
    char state = '?';
    while (proc_stat(n->pid, &state) == n->start && state != 'T') {
        if (mono_ms() >= deadline) {
            set_err("node %d not stopped %d ms after SIGSTOP (state %c)", i, GONE_MS, state);
            return -1;
        }
        nap_ms(5);
    }
    n->stopped = 1;
    return 0;
}

int cluster_node_resume(struct cluster *c, int i)
{
    struct cluster_node *n = &c->nodes[i];
    if (signal_if_same(n->pid, n->start, SIGCONT) != 0) {
        set_err("node %d: SIGCONT: not running", i);
        return -1;
    }
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
    long long deadline = mono_ms() + timeout_ms;
    if (run_redis_cli(c, "--cluster reshard", args, (int)(sizeof args / sizeof args[0]), timeout_ms) != 0) return -1;
    long long left = deadline - mono_ms();
    return cluster_wait_ok(c, left > 1000 ? (int)left : 1000);
}

/* CLUSTER SETSLOT slot <how> [id] on node i; 0 on +OK. */
static int setslot(struct cluster *c, int i, unsigned slot, const char *how, const char *id)
{
    redisReply *r = id != NULL ? node_command(c, i, 5000, "CLUSTER SETSLOT %u %s %s", slot, how, id)
                               : node_command(c, i, 5000, "CLUSTER SETSLOT %u %s", slot, how);
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (r != NULL && !ok) set_err("node %d: CLUSTER SETSLOT %u %s: %s", i, slot, how, reply_text(r));
    freeReplyObject(r);
    return ok ? 0 : -1;
}

int cluster_migrate_begin(struct cluster *c, unsigned slot, int from, int to)
{
    assert(slot < CLUSTER_SLOTS && from != to);
    int owner = cluster_slot_owner(c, slot);
    if (owner != from) {
        set_err("slot %u is owned by node %d, not by node %d", slot, owner, from);
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
        set_err("node %d does not answer", from);
        return -1;
    }
    redisReply *keys = redisCommand(ctx, "CLUSTER GETKEYSINSLOT %u %d", slot, max);
    int rc = keys != NULL && keys->type == REDIS_REPLY_ARRAY ? 0 : -1;
    if (rc != 0) set_err("node %d: CLUSTER GETKEYSINSLOT: %s", from, reply_text(keys));
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
            set_err("node %d: MIGRATE to node %d: %s", from, to, r != NULL ? reply_text(r) : ctx->errstr);
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
    if (setslot(c, to, slot, "NODE", c->nodes[to].id) != 0 || setslot(c, from, slot, "NODE", c->nodes[to].id) != 0)
        return -1;
    int primaries[CLUSTER_NODES], np = cluster_primaries(c, primaries);
    for (int k = 0; k < np; k++)
        if (primaries[k] != from && primaries[k] != to && setslot(c, primaries[k], slot, "NODE", c->nodes[to].id) != 0)
            return -1;
    return cluster_wait_ok(c, 10000);
}
