/* harness.c: starts real TLS redis-servers (durable, cache) and keygate on free loopback ports for integration tests, plus the Check helpers they share and the registry post-condition. */
#include "harness.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "procs.h"
#include "registry.h"
#include "resp.h"
#include "serverkit.h"

#define START_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS 5000
#define MAX_CHILDREN 64
#define RECONNECT_TIMEOUT_MS 10000 /* how long keygate gets to reconnect to a backend started again */
#define HEAL_PING_MS 2000          /* how long heal waits for a server's PONG before it counts as hung */

/* ---- processes: who owns the servers, and what every process of a suite sees alike ----
 *
 * Check runs every test in a forked child (CK_FORK), in a process group of its own that
 * it SIGKILLs when the test ends; the harness's unchecked fixtures run in the runner, the
 * process that called harness_start (the "owner"). A test may kill and restart servers,
 * so what a restart changes must outlive the test's process:
 *
 * - The state: the live harness's struct, the children table and the failure counter live
 *   in MAP_SHARED anonymous memory mapped by the owner before Check forks. Every function
 *   that starts or stops a server publishes the struct there; each test (in its child)
 *   and the teardown (in the runner) adopt it first, since a fork copies the runner's
 *   struct as it was before the earlier tests.
 * - The processes: the owner is a child subreaper (PR_SET_CHILD_SUBREAPER). A server
 *   started by a test child is double-forked: an intermediate process joins the owner's
 *   process group (Check's killpg of the test's group must miss it), forks the server and
 *   exits; the server, re-parented to the owner, sets PR_SET_PDEATHSIG only then, so it
 *   dies with the owner (the runner) and not with the intermediate or the test. PDEATHSIG
 *   fires on the death of the thread that is the parent *at that time*, hence the order:
 *   wait to be adopted, set it, check the parent is still the owner. So every server is
 *   the owner's child, dies with it (PDEATHSIG), and is stopped by its atexit and signal
 *   handlers (the shared children table) however it was started.
 * - A process that is not a server's parent cannot waitpid it: it sees it exit as a zombie
 *   in /proc/PID/stat (state Z, the wait status in field 52, and no thread left but the
 *   leader: proc_exited), and the owner reaps it later (children_reap, from the teardown
 *   and harness_stop).
 * - The published struct never loses a server that runs: see the invariant above
 *   children_check, checked on every publish.
 */

struct child {
    pid_t pid;  /* 0: free slot */
    int exited; /* seen as a zombie by a process that is not its parent; status holds its wait status */
    int status;
};

/* Who a pid was when the harness started it: pid numbers come back (pid_max is 32768 here,
 * and a busy machine wraps it in minutes), so a pid recorded for a server that has since
 * exited and been reaped may name another process by the time a stop, kill or heal looks
 * at it. Every signal the harness sends and every "has it exited?" checks the process's
 * start time (/proc/PID/stat field 22) against the one recorded at its fork: a server
 * killed twice must never become an unrelated process killed once (a stop_pid that waited
 * 5 s for a reused pid would SIGKILL whatever had taken it). */
struct ident {
    pid_t pid;
    unsigned long long start; /* clock ticks since boot, at fork */
};
#define MAX_IDENTS 1024

struct shared {
    struct harness h;                    /* the live harness as its last start, stop or restart left it */
    struct child children[MAX_CHILDREN]; /* every server the harness started and the owner has not reaped */
    struct ident idents[MAX_IDENTS];     /* every server forked, newest last (a ring) */
    unsigned nidents;
};

static struct shared *g_shared; /* the owner's mapping, inherited by every fork */
static struct harness *g_live;  /* the started harness, for atexit and the per-test fixtures */
static pid_t g_owner;           /* the process that started it (not a Check fork) */
static pid_t g_owner_pgid;      /* its process group: where servers started by test children go */

/* Record who pid is (start: procs_spawn's, read before anyone could reap it). */
static void ident_record(pid_t pid, unsigned long long start)
{
    if (g_shared == NULL) return;
    unsigned i = __sync_fetch_and_add(&g_shared->nidents, 1) % MAX_IDENTS;
    g_shared->idents[i].start = start;
    __atomic_store_n(&g_shared->idents[i].pid, pid, __ATOMIC_RELEASE);
}

/* Is pid still the process the harness forked under that number? 1 when it is (or when the
 * harness never recorded it: a pid it did not start is the caller's business), 0 when that
 * process is gone and the number is free or another process's. */
static int ident_same(pid_t pid)
{
    if (g_shared == NULL || pid <= 0) return pid > 0;
    unsigned n = __atomic_load_n(&g_shared->nidents, __ATOMIC_ACQUIRE);
    for (unsigned k = 0; k < MAX_IDENTS && k < n; k++) {
        const struct ident *id = &g_shared->idents[(n - 1 - k) % MAX_IDENTS]; /* the newest first */
        if (__atomic_load_n(&id->pid, __ATOMIC_ACQUIRE) != pid) continue;
        unsigned long long now = procs_stat(pid, NULL);
        return now != 0 && now == id->start;
    }
    return 1;
}

/* kill(2) for the harness's servers: never to a pid that no longer names the server it was
 * recorded for (ESRCH then, as for a process that is gone). */
static int server_signal(pid_t pid, int sig)
{
    if (pid <= 0 || !ident_same(pid)) {
        errno = ESRCH;
        return -1;
    }
    return kill(pid, sig);
}

static void children_add(pid_t pid, unsigned long long start)
{
    ident_record(pid, start);
    for (int i = 0; g_shared != NULL && i < MAX_CHILDREN; i++)
        if (__sync_bool_compare_and_swap(&g_shared->children[i].pid, 0, pid)) {
            g_shared->children[i].exited = 0;
            return;
        }
    fprintf(stderr,
            "harness: more than %d servers started: pid %d is not in the children table (PDEATHSIG "
            "still ends it with the runner)\n",
            MAX_CHILDREN, (int)pid);
}

static struct child *children_find(pid_t pid)
{
    for (int i = 0; g_shared != NULL && pid > 0 && i < MAX_CHILDREN; i++)
        if (g_shared->children[i].pid == pid) return &g_shared->children[i];
    return NULL;
}

static void children_remove(pid_t pid)
{
    struct child *c = children_find(pid);
    if (c != NULL) c->pid = 0;
}

/* The owner reaps every server that exited (zombies left by kills in test children). */
static void children_reap(void)
{
    if (g_shared == NULL || getpid() != g_owner) return;
    for (int i = 0; i < MAX_CHILDREN; i++) {
        pid_t pid = g_shared->children[i].pid;
        if (pid > 0 && waitpid(pid, NULL, WNOHANG) == pid) g_shared->children[i].pid = 0;
    }
}

static int child_exited(pid_t pid, int *status);
static void suite_failure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The invariant the shared state keeps: the published struct names every server the
 * harness started that still runs. A pid enters the children table when it is forked
 * (children_add) and the struct when its start returns; it leaves the struct only once the
 * process is gone (kill_pid or stop_pid returned its wait status, and "gone" means its
 * whole thread group, see proc_exited), never after a kill or stop that could not be
 * confirmed; and a start counts only when the server answering on the port is the pid it
 * forked (wait_ready), not an earlier one still there. So whenever a process publishes,
 * every child of the table that has not exited is keygate_pid or a backend's pid. (The one
 * exception, a server a test started and was killed before recording, heal() kills before
 * it publishes.) A broken invariant is a harness bug: said on stderr, counted as a suite
 * failure, never silent. Returns how many children break it. */
static int children_check(const struct harness *h, const char *where)
{
    int broken = 0;
    for (int i = 0; g_shared != NULL && i < MAX_CHILDREN; i++) {
        pid_t pid = g_shared->children[i].pid;
        int status;
        if (pid <= 0 || pid == h->keygate_pid || pid == h->backends[0].pid || pid == h->backends[1].pid ||
            pid == h->peer_pid || child_exited(pid, &status))
            continue;
        broken++;
        suite_failure("harness: INVARIANT BROKEN %s (pid %d): pid %d, a server the harness started, runs but the "
                      "published state names keygate %d, %s %d, %s %d\n",
                      where, (int)getpid(), (int)pid, (int)h->keygate_pid, h->backends[0].name, (int)h->backends[0].pid,
                      h->backends[1].name, (int)h->backends[1].pid);
    }
    return broken;
}

/* The shared copy of h, when h is the live harness (no check: harness_stop). */
static void publish_state(struct harness *h)
{
    if (g_shared != NULL && g_live == h) g_shared->h = *h;
}

/* publish_state, then children_check: every start, stop, kill and heal publishes this way. */
static void publish_at(struct harness *h, const char *where)
{
    publish_state(h);
    if (g_shared != NULL && g_live == h) children_check(h, where);
}
#define publish(h) publish_at(h, __func__)

/* The live harness as the last process that changed it left it. */
static void adopt(void)
{
    if (g_shared != NULL && g_live != NULL) *g_live = g_shared->h;
}

static void on_fatal_signal(int sig)
{
    if (getpid() == g_owner && g_shared != NULL)
        for (int i = 0; i < MAX_CHILDREN; i++)
            if (g_shared->children[i].pid > 0) server_signal(g_shared->children[i].pid, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_exit_cleanup(void)
{
    if (g_live == NULL || getpid() != g_owner) return;
    adopt(); /* the servers as the last test left them */
    harness_stop(g_live);
}

/* Make the calling process the owner of the servers it starts (once per process: a forked
 * process that starts a harness of its own becomes an owner too, with its own mapping). */
static int safety_net_install(void)
{
    static int atexit_done;
    if (g_owner == getpid()) return 0;
    struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) return -1;
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        munmap(s, sizeof *s);
        return -1;
    }
    g_shared = s;
    g_live = NULL; /* a harness inherited from the parent process is the parent's to stop */
    g_owner = getpid();
    /* A process group of its own, which its servers join: shared with the make and the
     * other suites above it, a test's SIGSTOPped keygate made that group an orphaned one
     * with a stopped member, and the first process of the group to exit then had the
     * kernel send SIGHUP to all of it (POSIX's orphaned process groups): make, the suite
     * runner and every suite beside it died of it with the suites run side by side.
     * Its parent (make, scripts/run-integration) is in another group of the same session,
     * so this group is never orphaned while the runner lives; and the runner ends with its
     * parent (SIGTERM: its handler stops the servers), as when they shared a group. */
    if (getpgrp() != getpid()) setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    g_owner_pgid = getpgrp();
    if (!atexit_done) atexit(on_exit_cleanup);
    atexit_done = 1;
    signal(SIGINT, on_fatal_signal);
    signal(SIGTERM, on_fatal_signal);
    signal(SIGABRT, on_fatal_signal);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

/* ---- small helpers ---- */

static void set_error(struct harness *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(struct harness *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->error, sizeof h->error, fmt, ap);
    va_end(ap);
}

void harness_write_secret(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    ck_assert_int_eq(fchmod(fd, mode), 0);
    close(fd);
}

void harness_sha256_hex(const char *s, char out[65])
{
    unsigned char d[32];
    unsigned int n = 0;
    ck_assert(EVP_Digest(s, strlen(s), d, &n, EVP_sha256(), NULL));
    for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

struct harness_http harness_admin_get(const struct harness *h, const char *path)
{
    ck_assert_msg(h->admin_port > 0, "harness_admin_get %s: keygate has no admin port (opts.admin)", path);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)h->admin_port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect admin: %s", strerror(errno));
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    for (;;) {
        if (cap - len < 4096) buf = realloc(buf, cap *= 2);
        ck_assert_ptr_nonnull(buf);
        ssize_t got = read(fd, buf + len, cap - len - 1);
        ck_assert_msg(got >= 0, "read admin %s: %s", path, strerror(errno));
        if (got == 0) break;
        len += (size_t)got;
    }
    close(fd);
    buf[len] = '\0';
    struct harness_http r = {0};
    ck_assert_msg(sscanf(buf, "HTTP/1.%*d %d", &r.status) == 1, "admin %s: bad status line: %.200s", path, buf);
    char *sep = strstr(buf, "\r\n\r\n");
    ck_assert_msg(sep != NULL, "admin %s: no end of headers", path);
    r.body = strdup(sep + 4);
    free(buf);
    return r;
}

void harness_raw_open(struct harness_raw *r, int port, const char *name)
{
    r->fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_msg(r->fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_msg(connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "%s: connect: %s", name, strerror(errno));
    r->len = 0;
    r->name = name;
}

void harness_raw_close(struct harness_raw *r)
{
    close(r->fd);
    r->fd = -1;
}

void harness_raw_sendv(struct harness_raw *r, int argc, const char **argv)
{
    char *out = NULL;
    int n = redisFormatCommandArgv(&out, argc, argv, NULL);
    ck_assert_int_gt(n, 0);
    for (int off = 0; off < n;) {
        ssize_t w = write(r->fd, out + off, (size_t)(n - off));
        ck_assert_msg(w > 0, "%s: write: %s", r->name, strerror(errno));
        off += (int)w;
    }
    free(out);
}

char *harness_raw_reply(struct harness_raw *r, size_t *len)
{
    struct resp_scanner sc;
    long long deadline = now_ms() + 5000;
    for (;;) {
        resp_scanner_reset(&sc); /* scan again from the start: simple, the replies are small */
        long long n = r->len ? resp_scan_reply(&sc, r->buf, r->len) : 0;
        ck_assert_msg(n >= 0, "%s: malformed reply: %.*s", r->name, (int)r->len, r->buf);
        if (n > 0) {
            char *out = malloc((size_t)n + 1);
            memcpy(out, r->buf, (size_t)n);
            out[n] = '\0';
            memmove(r->buf, r->buf + n, r->len - (size_t)n);
            r->len -= (size_t)n;
            if (len) *len = (size_t)n;
            return out;
        }
        ck_assert_msg(r->len < sizeof(r->buf), "%s: reply larger than the test's buffer", r->name);
        struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
        int left = (int)(deadline - now_ms());
        ck_assert_msg(left > 0 && poll(&pfd, 1, left) == 1, "%s: no reply within 5 s (have %zu bytes: %.*s)", r->name,
                      r->len, (int)r->len, r->buf);
        ssize_t got = read(r->fd, r->buf + r->len, sizeof(r->buf) - r->len);
        ck_assert_msg(got > 0, "%s: connection closed (have %zu bytes: %.*s)", r->name, r->len, (int)r->len, r->buf);
        r->len += (size_t)got;
    }
}

int harness_same_reply(const redisReply *a, const redisReply *b)
{
    if (a->type != b->type) return 0;
    switch (a->type) {
    case REDIS_REPLY_INTEGER:
        return a->integer == b->integer;
    case REDIS_REPLY_NIL:
        return 1;
    case REDIS_REPLY_ARRAY:
        if (a->elements != b->elements) return 0;
        for (size_t i = 0; i < a->elements; i++)
            if (!harness_same_reply(a->element[i], b->element[i])) return 0;
        return 1;
    default:
        return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
    }
}

static const char *keygate_bin(void);

int harness_run_keygate(const char *args, char *out, size_t outlen)
{
    char command[PATH_MAX + 1024];
    snprintf(command, sizeof command, "'%s' %s 2>&1", keygate_bin(), args);
    FILE *p = popen(command, "r");
    ck_assert_msg(p != NULL, "popen %s: %s", command, strerror(errno));
    size_t len = fread(out, 1, outlen - 1, p);
    out[len] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int harness_run_nested(Suite *(*make_suite)(void *arg), void *arg, const char *log_path, char *out, size_t len)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!freopen(log_path, "w", stdout) || dup2(fileno(stdout), 2) < 0) _exit(101);
        int failed = harness_run(make_suite(arg));
        fflush(stdout);
        fflush(stderr);
        _exit(failed > 100 ? 100 : failed); /* _exit: the runner owns the harness */
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    char *text = serverkit_read_file(log_path);
    snprintf(out, len, "%s", text ? text : "(no output)");
    free(text);
    ck_assert_msg(WIFEXITED(status), "the nested suite died (status %d):\n%s", status, out);
    return WEXITSTATUS(status);
}

void harness_wait_stopped(pid_t pid)
{
    char state = '?';
    for (long long end = now_ms() + 5000; state != 'T' && now_ms() < end;) {
        if (procs_stat(pid, &state) == 0) state = '?';
        if (state != 'T') sleep_ms(5);
    }
    ck_assert_msg(state == 'T', "pid %d is in state %c 5 s after SIGSTOP, not stopped (T)", (int)pid, state);
}

void harness_write_in(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_msg(serverkit_write_file(path, text, 0644) == 0, "write %s: %s", path, strerror(errno));
}

long long harness_cpu_ms(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "open %s: %s", path, strerror(errno));
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    ck_assert_ptr_nonnull(p);
    unsigned long long utime = 0, stime = 0;
    ck_assert_int_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime), 2);
    return (long long)(utime + stime) * 1000 / sysconf(_SC_CLK_TCK);
}

long long harness_status_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "open %s: %s", path, strerror(errno));
    long long kb = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') kb = atoll(line + n + 1);
    fclose(f);
    ck_assert_msg(kb >= 0, "%s has no %s", path, field);
    return kb;
}

redisReply *harness_direct_cmd(struct harness *h, const char *backend, const char *fmt, ...)
{
    redisContext *c = harness_must_direct(h, backend);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "%s: `%s`: connection error: %s", backend, fmt, c->errstr);
    redisFree(c);
    return r;
}

void harness_direct_ok(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "`%s`: %s", fmt, c->errstr);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "`%s`: %s", fmt, r->str);
    freeReplyObject(r);
}

#define RAW_MAXARGS 32
void harness_raw_send(struct harness_raw *r, const char *first, ...)
{
    const char *argv[RAW_MAXARGS];
    int argc = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a; a = va_arg(ap, const char *)) {
        ck_assert_int_lt(argc, RAW_MAXARGS);
        argv[argc++] = a;
    }
    va_end(ap);
    harness_raw_sendv(r, argc, argv);
}

void harness_raw_open_tracking(struct harness_raw *r, int port, const char *name, const char *user,
                               const char *password)
{
    harness_raw_open(r, port, name);
    if (user != NULL)
        harness_raw_send(r, "HELLO", "3", "AUTH", user, password, NULL);
    else
        harness_raw_send(r, "HELLO", "3", NULL);
    harness_raw_expect_prefix(r, "%", "HELLO 3");
    harness_raw_send(r, "CLIENT", "TRACKING", "ON", NULL);
    harness_raw_expect(r, "+OK\r\n", "CLIENT TRACKING ON");
}

const char *harness_shown(const char *s)
{
    static char buf[4][1200];
    static int k;
    char *o = buf[k++ % 4];
    size_t j = 0;
    for (; *s && j < sizeof(buf[0]) - 5; s++) {
        if (*s == '\r' || *s == '\n') {
            o[j++] = '\\';
            o[j++] = *s == '\r' ? 'r' : 'n';
        } else {
            o[j++] = *s;
        }
    }
    o[j] = '\0';
    return o;
}

void harness_raw_expect_at(int line, struct harness_raw *r, const char *want, const char *what)
{
    size_t n;
    char *got = harness_raw_reply(r, &n);
    ck_assert_msg(n == strlen(want) && memcmp(got, want, n) == 0, "line %d: %s: %s answered %s, want %s", line, what,
                  r->name, harness_shown(got), harness_shown(want));
    free(got);
}

void harness_raw_expect_prefix(struct harness_raw *r, const char *prefix, const char *what)
{
    char *got = harness_raw_reply(r, NULL);
    ck_assert_msg(strncmp(got, prefix, strlen(prefix)) == 0, "%s: %s answered %s, want %s...", what, r->name,
                  harness_shown(got), harness_shown(prefix));
    free(got);
}

void harness_raw_expect_quiet(struct harness_raw *r, int ms)
{
    struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
    ck_assert_msg(r->len == 0 && poll(&pfd, 1, ms) == 0, "%s: unexpected bytes", r->name);
}

long long now_ms(void)
{
    return procs_mono_ms();
}

void sleep_ms(int ms)
{
    procs_nap_ms(ms);
}

/* path + ".base" (a static buffer): the copy of a config file as harness_start wrote it. */
static const char *base_path(const char *path)
{
    static char buf[PATH_MAX + 8];
    snprintf(buf, sizeof buf, "%s.base", path);
    return buf;
}

/* Copy from's bytes to to (mode 0644). 0, or -1 (errno). */
static int copy_file(const char *from, const char *to)
{
    char *text = serverkit_read_file(from);
    if (text == NULL) return -1;
    int rc = serverkit_write_file(to, text, 0644);
    free(text);
    return rc;
}

/* Do files a and b hold the same text? (0 when either is unreadable.) */
static int same_file(const char *a, const char *b)
{
    char *x = serverkit_read_file(a), *y = serverkit_read_file(b);
    int same = x != NULL && y != NULL && strcmp(x, y) == 0;
    free(x);
    free(y);
    return same;
}

/* n pairs of free loopback ports, all different (ports[2k] and ports[2k+1]): each bound at
 * once (and held until all are found), then closed (procs_pick_ports). They are picked at
 * random below the kernel's ephemeral range (ip_local_port_range, 32768 and up on Debian), so
 * that no outgoing connection of this or another process (keygate's to its backends, a test's
 * clients) takes one between the pick and the server's bind; a suite running beside another
 * may still pick one the other just picked: harness_start tries again with other ports then. */
#define PORT_PICK_LOW 16384
#define PORT_PICK_HIGH 32767
static int free_port_pairs(int *ports, int pairs)
{
    static const struct procs_port_ranges range = {PORT_PICK_LOW, PORT_PICK_HIGH, PORT_PICK_LOW, PORT_PICK_HIGH, 0};
    int tls[4], plain[4];
    assert(pairs <= 4);
    if (procs_pick_ports(pairs, &range, tls, plain) != 0) return -1;
    for (int k = 0; k < pairs; k++) {
        ports[2 * k] = tls[k];
        ports[2 * k + 1] = plain[k];
    }
    return 0;
}

int harness_free_port(void)
{
    int pair[2];
    return free_port_pairs(pair, 1) == 0 ? pair[0] : -1;
}

/* Start argv (procs_spawn: stdout/stderr appended to log_path, no fd of ours) as the owner's
 * child (a double fork from a test's process), dying with the owner; recorded in the
 * children table. Its pid, or -1. */
static pid_t spawn(char *const argv[], const char *log_path)
{
    unsigned long long start = 0;
    pid_t pid = procs_spawn(argv, log_path, NULL, g_owner, g_owner_pgid, &start);
    if (pid > 0) children_add(pid, start);
    return pid;
}

/* A non-child's state from /proc/PID/stat: 1 exited (a zombie: *status its wait status,
 * field 52; or gone: *status 0), 0 running. A multi-threaded server (redis-server's bio
 * threads, keygate's workers) shows its leader as a zombie as soon as the leader has
 * exited, while its other threads are still exiting and hold its files: its listening
 * sockets stay bound until the last one is gone (measured: a bind of a SIGKILLed
 * redis-server's port failed with EADDRINUSE while its stat said Z and Threads: 2). So a
 * zombie counts as exited only once it is the last thread of its group, as waitpid(2)
 * would report it to its parent. */
static int proc_exited(pid_t pid, int *status)
{
    if (!ident_same(pid)) { /* gone, and its number taken again (or free) */
        *status = 0;
        return 1;
    }
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *status = 0;
    if (fd < 0) return 1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 1;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* after the command name, which may hold anything */
    if (p == NULL || p[1] != ' ') return 0;
    char state = p[2];
    if (state != 'Z' && state != 'X') return 0;
    /* the other threads still exit: not yet */
    if (procs_threads(pid) > 1) return 0;
    int field = 3; /* p + 2 is field 3 */
    for (p += 2; *p != '\0' && field < 52; p++)
        if (*p == ' ') field++;
    if (field == 52) *status = atoi(p);
    return 1;
}

/* Has pid (a server the harness started) exited? 1 with its wait status in *status (reaped
 * when we are its parent), 0 while it runs. */
static int child_exited(pid_t pid, int *status)
{
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
        children_remove(pid);
        *status = st;
        return 1;
    }
    if (r == 0) return 0;
    struct child *c = children_find(pid);
    if (c != NULL && c->exited) {
        *status = c->status;
        return 1;
    }
    if (!proc_exited(pid, &st)) return 0;
    if (c != NULL) {
        c->status = st;
        c->exited = 1; /* the owner reaps it */
    }
    *status = st;
    return 1;
}

/* Wait up to timeout_ms for pid to exit. Returns its status, or -1 if still running. */
static int wait_exit(pid_t pid, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        int status;
        if (child_exited(pid, &status)) return status;
        if (now_ms() >= deadline) return -1;
        sleep_ms(10);
    }
}

int harness_wait_exit(pid_t pid, int timeout_ms)
{
    return wait_exit(pid, timeout_ms);
}

/* SIGKILL pid and wait (STOP_TIMEOUT_MS) until it has exited. Returns its wait status, or
 * -1, said on stderr, when it still runs: the caller must then keep it recorded (see the
 * invariant above children_check). */
static int kill_pid(pid_t pid)
{
    server_signal(pid, SIGKILL);
    int status = wait_exit(pid, STOP_TIMEOUT_MS);
    if (status == -1)
        fprintf(stderr, "harness: pid %d still runs %d ms after SIGKILL: it stays recorded\n", (int)pid,
                STOP_TIMEOUT_MS);
    return status;
}

/* SIGTERM (and SIGCONT: a test may have stopped it), then SIGKILL after STOP_TIMEOUT_MS.
 * Returns the exit status, or -1 when it still runs (kill_pid). */
static int stop_pid(pid_t pid)
{
    server_signal(pid, SIGTERM);
    server_signal(pid, SIGCONT);
    int status = wait_exit(pid, STOP_TIMEOUT_MS);
    if (status == -1) {
        fprintf(stderr, "harness: pid %d ignored SIGTERM for %d ms; SIGKILL\n", (int)pid, STOP_TIMEOUT_MS);
        status = kill_pid(pid);
    }
    return status;
}

/* PING over c (after AUTH password when not NULL): 0 on PONG, or on NOAUTH (it answers). */
static int answers_ping(redisContext *c, const char *password)
{
    redisReply *r;
    if (password != NULL) {
        r = redisCommand(c, "AUTH %s", password);
        int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (!ok) return -1;
    }
    r = redisCommand(c, "PING");
    int ok = r != NULL && ((r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0) ||
                           (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0));
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* The inodes of the TCP sockets listening on 127.0.0.1:port or 0.0.0.0:port (from
 * /proc/net/tcp), at most max; returns how many. */
static int port_listeners(int port, unsigned long *inodes, int max)
{
    FILE *f = fopen("/proc/net/tcp", "re");
    if (f == NULL) return 0;
    char line[512];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f) != NULL) {
        unsigned long addr, inode;
        unsigned lport, state;
        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode; the address is the raw
         * network-order word printed as a host integer */
        if (sscanf(line, " %*d: %lX:%X %*X:%*X %X %*X:%*X %*X:%*X %*X %*d %*d %lu", &addr, &lport, &state, &inode) != 4)
            continue;
        if (state == 0x0A && (int)lport == port && (addr == htonl(INADDR_LOOPBACK) || addr == htonl(INADDR_ANY)))
            inodes[n++] = inode;
    }
    fclose(f);
    return n;
}

/* Does pid have the socket of inode open? 1 yes, 0 no, -1 cannot tell (its fds unreadable). */
static int pid_holds_socket(pid_t pid, unsigned long inode)
{
    char dir[64], path[64 + sizeof(((struct dirent *)0)->d_name)], link[64], want[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    DIR *d = opendir(dir);
    if (d == NULL) return errno == ENOENT ? 0 : -1;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n > 0) {
            link[n] = '\0';
            found = strcmp(link, want) == 0;
        }
    }
    closedir(d);
    return found;
}

/* The process holding the socket of inode (a scan of /proc), or 0 when none is found. */
static pid_t socket_holder(unsigned long inode)
{
    DIR *d = opendir("/proc");
    pid_t holder = 0;
    for (struct dirent *e; d != NULL && holder == 0 && (e = readdir(d)) != NULL;) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid > 0 && pid_holds_socket(pid, inode) == 1) holder = pid;
    }
    if (d != NULL) closedir(d);
    return holder;
}

/* Is every socket listening on port pid's? 1 yes, 0 one is another process's (*other: its
 * pid, or 0 when not found), -1 no listener seen (nothing to check). */
static int listener_is(pid_t pid, int port, pid_t *other)
{
    unsigned long inodes[16];
    int n = port_listeners(port, inodes, 16);
    *other = 0;
    for (int i = 0; i < n; i++)
        if (pid_holds_socket(pid, inodes[i]) == 0) {
            *other = socket_holder(inodes[i]);
            return 0;
        }
    return n > 0 ? 1 : -1;
}

/* Poll until the server on port answers PING, pid exits, or the timeout passes. The server
 * that answers must be pid: one still holding the port (a server not yet gone, or one the
 * harness lost track of) would answer for a pid that failed to bind and exits, and the
 * harness would record a dead pid while the live one goes unrecorded. Returns 0, -2 when
 * pid exited, -1 on a timeout or when another process holds the port (h->error says which). */
static int wait_ready(struct harness *h, const char *what, pid_t pid, int port, const char *password)
{
    long long deadline = now_ms() + START_TIMEOUT_MS;
    while (now_ms() < deadline) {
        int status;
        if (child_exited(pid, &status)) {
            set_error(h, "%s exited during start-up (%s %d)", what, WIFEXITED(status) ? "status" : "signal",
                      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            return -2;
        }
        redisContext *c = serverkit_connect(port, NULL, 200, 1000);
        int rc = c != NULL ? answers_ping(c, password) : -1;
        if (c != NULL) redisFree(c);
        pid_t other = 0;
        if (rc == 0 && listener_is(pid, port, &other) == 0) {
            fprintf(stderr, "harness: %s (pid %d): 127.0.0.1:%d is held by pid %d, not by it\n", what, (int)pid, port,
                    (int)other);
            set_error(h, "%s (pid %d): 127.0.0.1:%d answers from pid %d, a process this start did not make", what,
                      (int)pid, port, (int)other);
            return -1;
        }
        if (rc == 0) return 0;
        sleep_ms(50);
    }
    set_error(h, "%s did not answer PING on 127.0.0.1:%d within %d ms", what, port, START_TIMEOUT_MS);
    return -1;
}

/* ---- backends ---- */

struct harness_backend *harness_backend(struct harness *h, const char *name)
{
    for (int i = 0; i < 2; i++)
        if (strcmp(h->backends[i].name, name) == 0) return &h->backends[i];
    return NULL;
}

static int backend_spawn(struct harness *h, struct harness_backend *b)
{
    char *argv[] = {"redis-server", b->conf_file, NULL};
    b->pid = spawn(argv, b->log_file);
    if (b->pid < 0) {
        b->pid = 0;
        set_error(h, "fork for redis-server %s: %s", b->name, strerror(errno));
        return -1;
    }
    char what[64];
    snprintf(what, sizeof what, "redis-server %s", b->name);
    int rc = wait_ready(h, what, b->pid, b->plain_port, b->password);
    if (rc == -2) serverkit_print_log_tail(what, b->log_file); /* why it exited: a port, its AOF, ... */
    if (rc == -1 && stop_pid(b->pid) == -1) return -1;         /* still running: it stays recorded */
    if (rc != 0) {
        b->pid = 0; /* exited (-2), or stopped above */
        return -1;
    }
    return 0;
}

/* Write the backend's password file and redis.conf, then start it. */
static int backend_start(struct harness *h, int i, const char *name, int tls_port, int plain_port)
{
    struct harness_backend *b = &h->backends[i];
    int durable = strcmp(name, "durable") == 0;
    char data_dir[sizeof h->dir + 16], conf[4 * PATH_MAX];
    snprintf(b->name, sizeof b->name, "%s", name);
    b->tls_port = tls_port;
    b->plain_port = plain_port;
    serverkit_random_hex(b->password, 32);
    snprintf(b->pass_file, sizeof b->pass_file, "%s/%s.pass", h->dir, name);
    snprintf(b->conf_file, sizeof b->conf_file, "%s/%s.redis.conf", h->dir, name);
    snprintf(b->log_file, sizeof b->log_file, "%s/%s.log", h->dir, name);
    snprintf(data_dir, sizeof data_dir, "%s/%s", h->dir, name);
    snprintf(conf, sizeof conf,
             "bind 127.0.0.1\nport %d\ntls-port %d\n"
             "tls-cert-file \"%s/build/certs/server.crt\"\ntls-key-file \"%s/build/certs/server.key\"\n"
             "tls-ca-cert-file \"%s/build/certs/ca.crt\"\ntls-auth-clients optional\n"
             "requirepass %s\ndir \"%s\"\nsave \"\"\ndaemonize no\nlogfile \"\"\n%s",
             plain_port, tls_port, h->root, h->root, h->root, b->password, data_dir,
             durable ? "maxmemory 256mb\nmaxmemory-policy noeviction\nappendonly yes\n"
                     : "maxmemory 64mb\nmaxmemory-policy allkeys-lru\nappendonly no\n");
    char line[80];
    snprintf(line, sizeof line, "%s\n", b->password);
    if (mkdir(data_dir, 0700) != 0 || serverkit_write_file(b->pass_file, line, 0600) != 0 ||
        serverkit_write_file(b->conf_file, conf, 0600) != 0) {
        set_error(h, "writing %s's files in %s: %s", name, h->dir, strerror(errno));
        return -1;
    }
    return backend_spawn(h, b);
}

int harness_backend_kill(struct harness *h, const char *name)
{
    struct harness_backend *b = harness_backend(h, name);
    if (b == NULL || b->pid <= 0) return -1;
    if (kill_pid(b->pid) == -1) {
        set_error(h, "backend %s (pid %d) still runs %d ms after SIGKILL", name, (int)b->pid, STOP_TIMEOUT_MS);
        return -1; /* still recorded: the next heal kills it again */
    }
    b->pid = 0;
    publish(h);
    return 0;
}

int harness_backend_restart(struct harness *h, const char *name)
{
    struct harness_backend *b = harness_backend(h, name);
    if (b == NULL) return -1;
    if (b->pid > 0 && stop_pid(b->pid) == -1) {
        set_error(h, "backend %s (pid %d) does not stop", name, (int)b->pid);
        return -1; /* still recorded */
    }
    b->pid = 0;
    int rc = backend_spawn(h, b);
    publish(h);
    /* keygate is in its reconnect backoff (up to 2 s): a test's next request would meet
     * -UNAVAILABLE (issue 19: test_keyless's WAIT after test_dbsize_with_an_instance_down) */
    if (rc == 0 && h->keygate_pid > 0) rc = harness_wait_connected(h, name, RECONNECT_TIMEOUT_MS);
    return rc;
}

redisContext *harness_direct(struct harness *h, const char *name)
{
    struct harness_backend *b = harness_backend(h, name);
    if (b == NULL) return NULL;
    redisContext *c = serverkit_connect(b->plain_port, NULL, 5000, 10000);
    if (c == NULL) return NULL;
    redisReply *r = redisCommand(c, "AUTH %s", b->password);
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    if (!ok) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* ---- keygate ---- */

static const char *keygate_bin(void)
{
    const char *bin = getenv("KEYGATE_BIN");
    return bin != NULL && *bin != '\0' ? bin : "build/keygate";
}

static int write_keygate_files(struct harness *h, const struct harness_opts *o)
{
    char *registry = NULL;
    if (o->registry_text == NULL) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/conf/registry.conf", h->root);
        if ((registry = serverkit_read_file(path)) == NULL) {
            set_error(h, "cannot read %s: %s", path, strerror(errno));
            return -1;
        }
    }
    snprintf(h->registry_file, sizeof h->registry_file, "%s/registry.conf", h->dir);
    snprintf(h->conf_file, sizeof h->conf_file, "%s/keygate.conf", h->dir);
    int rc = serverkit_write_file(h->registry_file, registry != NULL ? registry : o->registry_text, 0644);
    free(registry);

    const char *certs = "build/certs";
    struct harness_backend *d = &h->backends[0], *c = &h->backends[1];
    /* keygate always has an admin listener: the harness reads /metrics there (harness_wait_connected);
     * a suite's own admin-listen line (extra_config) is the one it reads then */
    char admin[64] = "";
    if (o->extra_config == NULL || strstr(o->extra_config, "admin-listen") == NULL)
        snprintf(admin, sizeof admin, "admin-listen  127.0.0.1:%d\n", h->probe_port);
    char conf[8 * PATH_MAX], instances[4 * PATH_MAX];
    int n = snprintf(instances, sizeof instances,
                     "instance durable 127.0.0.1:%d tls ca=%s/%s/ca.crt cert=%s/%s/client.crt "
                     "key=%s/%s/client.key server-name=localhost password-file=%s\n"
                     "instance cache   127.0.0.1:%d tls ca=%s/%s/ca.crt server-name=localhost "
                     "password-file=%s\n",
                     d->tls_port, h->root, certs, h->root, certs, h->root, certs, d->pass_file, c->tls_port, h->root,
                     certs, c->pass_file);
    if (n < 0 || (size_t)n >= sizeof instances) rc = -1;
    n = snprintf(conf, sizeof conf,
                 "# keygate.conf written by tests/integration/harness.c\n"
                 "listen        127.0.0.1:%d\n%s"
                 "registry      registry.conf\n%s%s",
                 h->port, admin, o->instances_text != NULL ? o->instances_text : instances,
                 o->extra_config != NULL ? o->extra_config : "");
    if (rc != 0 || n < 0 || (size_t)n >= sizeof conf || serverkit_write_file(h->conf_file, conf, 0644) != 0) {
        set_error(h, "writing keygate.conf / registry.conf in %s failed", h->dir);
        return -1;
    }
    return 0;
}

static int keygate_start(struct harness *h)
{
    const char *bin = keygate_bin();
    if (access(bin, X_OK) != 0) {
        set_error(h, "KEYGATE_BIN=%s is not an executable (%s); build it with `make` and run from the repo root", bin,
                  strerror(errno));
        return -1;
    }
    char *argv[] = {(char *)bin, "-c", h->conf_file, NULL};
    h->keygate_pid = spawn(argv, h->log_file);
    if (h->keygate_pid < 0) {
        h->keygate_pid = 0;
        set_error(h, "fork for keygate: %s", strerror(errno));
        return -1;
    }
    int rc = wait_ready(h, "keygate", h->keygate_pid, h->port, NULL);
    if (rc == -2) h->keygate_pid = 0;
    if (rc != 0) {
        size_t len = strlen(h->error);
        snprintf(h->error + len, sizeof h->error - len, " (%s -c %s; log %s)", bin, h->conf_file, h->log_file);
    }
    return rc == 0 ? 0 : -1;
}

/* GET path from 127.0.0.1:port (HTTP/1.0, the whole answer until EOF) into buf, NUL-terminated;
 * 0 on a 200 answer, -1 otherwise (refused, timed out after io_ms, another status). */
static int http_get(int port, const char *path, char *buf, size_t len, int io_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct timeval tv = {io_ms / 1000, (io_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(0x7f000001)};
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    size_t got = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && write(fd, req, (size_t)n) == n) {
        ssize_t r;
        while (got + 1 < len && (r = read(fd, buf + got, len - got - 1)) > 0) got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    return strncmp(buf, "HTTP/1.1 200", 12) == 0 || strncmp(buf, "HTTP/1.0 200", 12) == 0 ? 0 : -1;
}

/* The integer value of the series `name{instance="inst"}` in a /metrics text, or -1. */
static long metric_of(const char *text, const char *name, const char *inst)
{
    char series[160];
    snprintf(series, sizeof series, "\n%s{backend=\"%s\"} ", name, inst);
    const char *at = strstr(text, series);
    return at != NULL ? strtol(at + strlen(series), NULL, 10) : -1;
}

/* One look at keygate's shared connections: 1 when every instance of keygate.conf (or only
 * `instance`) that points at a running harness backend has them all ready, 0 when not
 * (why says which), -1 when /metrics cannot be read (why says so). */
static int connections_ready(struct harness *h, const char *instance, char *why, size_t whylen)
{
    static char text[256 * 1024];
    snprintf(why, whylen, "nothing read yet");
    char *conf = serverkit_read_file(h->conf_file);
    if (conf == NULL) {
        snprintf(why, whylen, "cannot read the keygate.conf it runs");
        return -1;
    }
    const char *admin = strstr(conf, "\nadmin-listen");
    int port = 0;
    if (admin == NULL || sscanf(admin, "\nadmin-listen %*[^:]:%d", &port) != 1) {
        snprintf(why, whylen, "the keygate.conf it runs has no admin-listen line");
        free(conf);
        return -1;
    }
    if (http_get(port, "/metrics", text, sizeof text, 2000) != 0) {
        snprintf(why, whylen, "GET /metrics on 127.0.0.1:%d failed", port);
        free(conf);
        return -1;
    }
    int ready = 1;
    for (char *line = strtok(conf, "\n"); line != NULL && ready; line = strtok(NULL, "\n")) {
        char name[64];
        int port;
        if (sscanf(line, "instance %63s %*[^:]:%d", name, &port) != 2) continue;
        if (instance != NULL && strcmp(name, instance) != 0) continue;
        int ours = 0;
        for (int i = 0; i < 2; i++) ours |= h->backends[i].pid > 0 && h->backends[i].tls_port == port;
        if (!ours) continue;
        long total = metric_of(text, "keygate_instance_connections", name);
        long up = metric_of(text, "keygate_instance_connections_ready", name);
        if (total <= 0 || up != total) {
            snprintf(why, whylen, "instance %s: %ld of %ld shared connections ready", name, up, total);
            ready = 0;
        }
    }
    free(conf);
    return ready;
}

int harness_wait_connected(struct harness *h, const char *instance, int timeout_ms)
{
    char why[256];
    long long start = now_ms();
    for (;;) {
        if (connections_ready(h, instance, why, sizeof why) == 1) return 0;
        if (now_ms() - start >= timeout_ms) break;
        sleep_ms(20);
    }
    set_error(h, "keygate (pid %d) not reconnected %d ms after the wait began: %s", (int)h->keygate_pid, timeout_ms,
              why);
    return -1;
}

int harness_peer_start(struct harness *h, const char *extra)
{
    if (h->peer_pid > 0) {
        set_error(h, "a second keygate runs already (pid %d)", (int)h->peer_pid);
        return -1;
    }
    char *conf = serverkit_read_file(h->conf_file);
    if (conf == NULL) {
        set_error(h, "cannot read %s: %s", h->conf_file, strerror(errno));
        return -1;
    }
    h->peer_port = harness_free_port();
    snprintf(h->peer_conf_file, sizeof h->peer_conf_file, "%s/keygate-peer.conf", h->dir);
    snprintf(h->peer_log_file, sizeof h->peer_log_file, "%s/keygate-peer.log", h->dir);
    /* the same lines but listen (its own port) and admin-listen (none) */
    size_t cap = strlen(conf) + (extra ? strlen(extra) : 0) + 128, used = 0;
    char *out = malloc(cap);
    for (char *line = strtok(conf, "\n"); line != NULL && out != NULL; line = strtok(NULL, "\n")) {
        if (strncmp(line, "admin-listen", 12) == 0) continue;
        if (strncmp(line, "listen", 6) == 0 && (line[6] == ' ' || line[6] == '\t'))
            used += (size_t)snprintf(out + used, cap - used, "listen        127.0.0.1:%d\n", h->peer_port);
        else
            used += (size_t)snprintf(out + used, cap - used, "%s\n", line);
    }
    free(conf);
    if (out != NULL && extra != NULL) used += (size_t)snprintf(out + used, cap - used, "%s", extra);
    if (out == NULL || serverkit_write_file(h->peer_conf_file, out, 0644) != 0) {
        free(out);
        set_error(h, "cannot write %s", h->peer_conf_file);
        return -1;
    }
    free(out);
    char *argv[] = {(char *)keygate_bin(), "-c", h->peer_conf_file, NULL};
    pid_t pid = spawn(argv, h->peer_log_file);
    if (pid < 0) {
        set_error(h, "fork for the second keygate: %s", strerror(errno));
        return -1;
    }
    h->peer_pid = pid;
    publish(h);
    int rc = wait_ready(h, "second keygate", pid, h->peer_port, NULL);
    if (rc == -2) h->peer_pid = 0;
    if (rc != 0) {
        serverkit_print_log_tail("second keygate's log", h->peer_log_file);
        if (h->peer_pid > 0 && stop_pid(h->peer_pid) != -1) h->peer_pid = 0;
        publish(h);
        return -1;
    }
    return 0;
}

int harness_peer_stop(struct harness *h)
{
    if (h->peer_pid <= 0) return -1;
    int status = stop_pid(h->peer_pid);
    if (status != -1) h->peer_pid = 0; /* one that did not stop stays recorded */
    publish(h);
    return status;
}

redisContext *harness_must_peer_client(struct harness *h)
{
    redisContext *c = serverkit_connect(h->peer_port, NULL, 5000, 10000);
    ck_assert_msg(c != NULL, "cannot connect to the second keygate on 127.0.0.1:%d", h->peer_port);
    return c;
}

/* Run scripts/gen-certs build/certs unless every file the harness needs is there. */
static int ensure_certs(struct harness *h)
{
    static const char *files[] = {"ca.crt", "server.crt", "server.key", "client.crt", "client.key"};
    int missing = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/build/certs/%s", h->root, files[i]);
        if (access(path, R_OK) != 0) missing = 1;
    }
    if (!missing) return 0;
    char log[PATH_MAX + 16];
    snprintf(log, sizeof log, "%s/gen-certs.log", h->dir);
    char *argv[] = {"scripts/gen-certs", "build/certs", NULL};
    pid_t pid = spawn(argv, log);
    int status = pid > 0 ? wait_exit(pid, 30000) : -1;
    if (status == -1 && pid > 0) stop_pid(pid);
    if (status != 0) {
        serverkit_print_log_tail("gen-certs output", log);
        set_error(h, "scripts/gen-certs build/certs failed (run from the repo root)");
        return -1;
    }
    return 0;
}

static int harness_start_once(struct harness *h, const struct harness_opts *o)
{
    static const struct harness_opts defaults;
    if (o == NULL) o = &defaults;
    memset(h, 0, sizeof *h);
    h->keygate_status = -1;
    if (safety_net_install() != 0) {
        set_error(h, "shared memory or PR_SET_CHILD_SUBREAPER for the safety net: %s", strerror(errno));
        return -1;
    }
    if (getcwd(h->root, sizeof h->root) == NULL) {
        set_error(h, "getcwd: %s", strerror(errno));
        return -1;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(h->dir, sizeof h->dir, "%s/keygate-test-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(h->dir) == NULL) {
        set_error(h, "mkdtemp %s: %s", h->dir, strerror(errno));
        h->dir[0] = '\0';
        return -1;
    }
    snprintf(h->log_file, sizeof h->log_file, "%s/keygate.log", h->dir);
    g_live = h;

    int ports[6];
    int rc = ensure_certs(h);
    if (rc == 0 && free_port_pairs(ports, 3) != 0) {
        set_error(h, "%s", procs_last_error());
        rc = -1;
    }
    if (rc == 0) {
        h->port = ports[4];
        h->admin_port = o->admin ? ports[5] : 0;
        h->probe_port = ports[5];
        rc = backend_start(h, 0, "durable", ports[0], ports[1]);
    }
    if (rc == 0) rc = backend_start(h, 1, "cache", ports[2], ports[3]);
    if (rc == 0) rc = write_keygate_files(h, o);
    if (rc == 0 && (copy_file(h->conf_file, base_path(h->conf_file)) != 0 ||
                    copy_file(h->registry_file, base_path(h->registry_file)) != 0)) {
        set_error(h, "copying keygate.conf / registry.conf to *.base in %s: %s", h->dir, strerror(errno));
        rc = -1;
    }
    if (rc == 0) rc = keygate_start(h);
    if (rc == 0) publish(h);
    if (rc != 0) {
        char error[sizeof h->error];
        memcpy(error, h->error, sizeof error);
        fprintf(stderr, "harness_start: %s\n", error);
        serverkit_print_log_tail("keygate log", h->log_file);
        for (int i = 0; i < 2; i++)
            if (h->backends[i].pid == 0 && h->backends[i].log_file[0])
                serverkit_print_log_tail(h->backends[i].name, h->backends[i].log_file);
        harness_stop(h);
        memcpy(h->error, error, sizeof error);
    }
    return rc;
}

int harness_start(struct harness *h, const struct harness_opts *o)
{
    /* a port picked by a suite running beside this one makes a server exit at its bind:
     * other ports then, twice at most (every failure is printed by harness_start_once) */
    int rc = -1;
    for (int attempt = 1; attempt <= 3 && rc != 0; attempt++) {
        rc = harness_start_once(h, o);
        if (rc != 0 && attempt < 3)
            fprintf(stderr, "harness_start: attempt %d failed; again with other ports\n", attempt);
    }
    return rc;
}

/* Where the harness's own checks run: 0 in a test (a failure fails it), 1 in the teardown,
 * 2 healing before a test (Check would lose a failure in a teardown, and one before a test
 * would land on a test that did nothing wrong: both count with suite_failure instead). */
static int g_in_teardown;
static int g_local_failures;
static int *g_run_failures = &g_local_failures; /* harness_run's counter, shared with its test processes */

/* A failure outside a test: printed as POST-CONDITION FAILED, added to harness_run's result. */
static void suite_failure(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "POST-CONDITION FAILED %s: ", g_in_teardown == 1 ? "in the teardown" : "between tests");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    __sync_fetch_and_add(g_run_failures, 1);
}

/* keygate must end as it promises on SIGTERM: exit 0. A crash, an assert, a sanitizer
 * report (ASan exits 1) or an out-of-memory abort fails the suite, also from a teardown. */
static void keygate_exit_check(struct harness *h)
{
    int st = h->keygate_status;
    if (st == -1) return;
    char why[128] = "";
    if (WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL)
        snprintf(why, sizeof why, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
        snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(st));
    if (!why[0]) return;
    serverkit_print_log_tail("keygate log", h->log_file);
    if (!g_in_teardown) ck_abort_msg("keygate ended badly: %s (log above)", why);
    suite_failure("keygate ended badly: %s (log above)\n", why);
}

void harness_stop(struct harness *h)
{
    if (h->peer_pid > 0) (void)harness_peer_stop(h);
    pid_t keygate = h->keygate_pid;
    h->keygate_pid = 0;
    if (keygate > 0) h->keygate_status = stop_pid(keygate);
    for (int i = 1; i >= 0; i--) {
        if (h->backends[i].pid > 0) stop_pid(h->backends[i].pid);
        h->backends[i].pid = 0;
    }
    publish_state(h); /* what a test left unrecorded is killed just below */
    if (keygate > 0) keygate_exit_check(h);
    /* what a test left behind unpublished (killed while it restarted a server) */
    for (int i = 0; g_shared != NULL && getpid() == g_owner && g_live == h && i < MAX_CHILDREN; i++) {
        pid_t pid = g_shared->children[i].pid;
        if (pid <= 0) continue;
        server_signal(pid, SIGKILL);
        wait_exit(pid, STOP_TIMEOUT_MS);
        g_shared->children[i].pid = 0;
    }
    const char *keep = getenv("HARNESS_KEEP");
    if (h->dir[0] != '\0') {
        if (keep != NULL && strcmp(keep, "1") == 0)
            fprintf(stderr, "harness: kept %s\n", h->dir);
        else
            serverkit_remove_tree(h->dir);
    }
    h->dir[0] = '\0';
    if (g_live == h) g_live = NULL;
}

redisContext *harness_client(struct harness *h)
{
    return serverkit_connect(h->port, NULL, 5000, 10000);
}

int harness_keygate_restart(struct harness *h, const struct harness_opts *o)
{
    static const struct harness_opts defaults;
    if (o == NULL) o = &defaults;
    pid_t keygate = h->keygate_pid;
    if (keygate > 0) {
        int status = stop_pid(keygate);
        if (status == -1) {
            set_error(h, "keygate (pid %d) does not stop", (int)keygate);
            return -1; /* still recorded */
        }
        h->keygate_pid = 0;
        h->keygate_status = status;
        publish(h); /* a failing check below leaves the test: keygate is stopped, for the next one too */
        keygate_exit_check(h);
    }
    h->keygate_status = -1;
    if (truncate(h->log_file, 0) != 0 && errno != ENOENT) {
        set_error(h, "truncate %s: %s", h->log_file, strerror(errno));
        publish(h);
        return -1;
    }
    int rc = write_keygate_files(h, o) == 0 && keygate_start(h) == 0 ? 0 : -1;
    if (rc != 0) serverkit_print_log_tail("keygate log", h->log_file);
    publish(h);
    return rc;
}

char *harness_keygate_log(struct harness *h)
{
    return serverkit_read_file(h->log_file);
}

/* ---- between tests: no test runs on what an earlier one left behind ---- */

/* NULL when pid answers PING on port (after AUTH password when not NULL; NOAUTH counts)
 * within HEAL_PING_MS, and the port's listener is pid's (not another process answering for
 * it); else why not, with *status its wait status when it exited (else -1). */
static const char *server_health(pid_t pid, int port, const char *password, int *status)
{
    *status = -1;
    if (pid <= 0) return "is not running";
    for (long long deadline = now_ms() + HEAL_PING_MS;; sleep_ms(50)) {
        if (child_exited(pid, status)) return "exited";
        redisContext *c = serverkit_connect(port, NULL, 500, 1000);
        int rc = c != NULL ? answers_ping(c, password) : -1;
        if (c != NULL) redisFree(c);
        pid_t other = 0;
        if (rc == 0 && listener_is(pid, port, &other) == 0) {
            fprintf(stderr, "harness: 127.0.0.1:%d answers from pid %d, not from pid %d\n", port, (int)other, (int)pid);
            return "does not hold its port"; /* another process answers for it */
        }
        if (rc == 0) return NULL;
        if (now_ms() >= deadline) return "does not answer PING";
    }
}

/* Bring back what an earlier test left behind: servers it started but never recorded
 * (killed mid-restart) are killed; stopped servers (SIGSTOP) continued; a dead or hung
 * backend is started again (same ports, data dir); a keygate that is dead, hung, or runs
 * another keygate.conf / registry.conf than the suite's (a test restarted or rewrote it
 * and failed before putting it back) is restarted with the suite's files, and so is one
 * whose backend was started again (it would still be in its reconnect backoff, up to 2 s,
 * when the next test begins). keygate ending
 * badly or hanging counts as a suite failure (suite_failure), a test's SIGKILL does not.
 * Returns 0, or -1 with h->error when a server cannot be started. */
static int heal(struct harness *h)
{
    int saved = g_in_teardown, rc = 0, status;
    if (g_in_teardown == 0) g_in_teardown = 2;
    for (int i = 0; g_shared != NULL && i < MAX_CHILDREN; i++) {
        pid_t pid = g_shared->children[i].pid;
        if (pid <= 0 || pid == h->keygate_pid || pid == h->backends[0].pid || pid == h->backends[1].pid ||
            child_exited(pid, &status))
            continue;
        if (pid != h->peer_pid)
            fprintf(stderr, "harness: pid %d, started by an earlier test that ended before recording it: killed\n",
                    (int)pid);
        kill_pid(pid); /* a second keygate too: each test starts its own */
    }
    h->peer_pid = 0;
    pid_t pids[3] = {h->keygate_pid, h->backends[0].pid, h->backends[1].pid};
    for (int i = 0; i < 3; i++)
        if (pids[i] > 0) server_signal(pids[i], SIGCONT);
    int backend_restarted = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        struct harness_backend *b = &h->backends[i];
        const char *why = server_health(b->pid, b->plain_port, b->password, &status);
        if (why == NULL) continue;
        backend_restarted = 1;
        fprintf(stderr, "harness: backend %s (pid %d) %s after an earlier test: starting it again\n", b->name,
                (int)b->pid, why);
        if (b->pid > 0 && status == -1 && kill_pid(b->pid) == -1) {
            set_error(h, "backend %s (pid %d) still runs %d ms after SIGKILL", b->name, (int)b->pid, STOP_TIMEOUT_MS);
            rc = -1; /* it stays recorded */
            break;
        }
        b->pid = 0;
        rc = backend_spawn(h, b);
    }
    if (rc == 0) {
        const char *why = server_health(h->keygate_pid, h->port, NULL, &status);
        int reconfigured = !same_file(h->conf_file, base_path(h->conf_file)) ||
                           !same_file(h->registry_file, base_path(h->registry_file));
        if (why != NULL || reconfigured || backend_restarted) {
            pid_t pid = h->keygate_pid;
            fprintf(stderr, "harness: keygate (pid %d) %s after an earlier test: starting it again%s\n", (int)pid,
                    why != NULL    ? why
                    : reconfigured ? "runs another configuration"
                                   : "waits to reconnect to a backend started again",
                    reconfigured ? " with the suite's keygate.conf and registry.conf" : "");
            if (why == NULL) {
                status = stop_pid(pid);
                if (status == -1) rc = -1;
                h->keygate_status = status;
                keygate_exit_check(h);
            } else if (status != -1) {
                h->keygate_status = status;
                keygate_exit_check(h);
            } else if (pid > 0) {
                serverkit_print_log_tail("keygate log", h->log_file);
                suite_failure("keygate (pid %d) did not answer PING within %d ms (log above): killed\n", (int)pid,
                              HEAL_PING_MS);
                if (kill_pid(pid) == -1) rc = -1;
            }
            h->keygate_status = -1;
            if (rc != 0) {
                set_error(h, "keygate (pid %d) still runs %d ms after SIGKILL", (int)pid, STOP_TIMEOUT_MS);
            } else if (copy_file(base_path(h->conf_file), h->conf_file) != 0 ||
                       copy_file(base_path(h->registry_file), h->registry_file) != 0 ||
                       (truncate(h->log_file, 0) != 0 && errno != ENOENT)) {
                set_error(h, "restoring keygate.conf / registry.conf in %s: %s", h->dir, strerror(errno));
                rc = -1;
            } else {
                h->keygate_pid = 0; /* only now that it is gone (see children_check) */
                rc = keygate_start(h);
            }
        }
    }
    /* every test starts with keygate's connections up: one a test SIGSTOPped or restarted
     * may still be in its reconnect backoff */
    if (rc == 0 && h->keygate_pid > 0) rc = harness_wait_connected(h, NULL, RECONNECT_TIMEOUT_MS);
    publish(h);
    g_in_teardown = saved;
    return rc;
}

/* ---- shared test helpers (Check) ---- */

/* Check runs unchecked teardowns without reporting what fails there (and in CK_FORK mode a
 * failed assertion there would _exit the runner): harness_check_registry must not assert
 * there. These markers, fixtures of every harness_tcase, tell it where it runs. */

static void phase_tests(void)
{
    g_in_teardown = 0;
}

/* Checked fixture: the first thing in each test's process (the runner's fork). */
static void test_begin(void)
{
    if (getpid() != g_owner) prctl(PR_SET_PDEATHSIG, SIGKILL); /* the runner killed: the test ends too */
    adopt();
    if (g_live == NULL || g_live->dir[0] == '\0') return;
    ck_assert_msg(heal(g_live) == 0, "harness: cannot start again what an earlier test left down: %s", g_live->error);
}

static void phase_teardown(void)
{
    adopt();
    g_in_teardown = 1;
    children_reap();
    if (g_live != NULL && g_live->dir[0] != '\0' && heal(g_live) != 0)
        suite_failure("cannot start again what the last test left down: %s\n", g_live->error);
}

TCase *harness_tcase(Suite *s, const char *name, int timeout_s, void (*setup)(void), void (*teardown)(void))
{
    TCase *tc = tcase_create(name);
    if (timeout_s > 0) tcase_set_timeout(tc, timeout_s);
    /* setups run in the order added, teardowns in reverse: phase_tests before setup,
     * phase_teardown before teardown */
    tcase_add_unchecked_fixture(tc, phase_tests, NULL);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_unchecked_fixture(tc, NULL, phase_teardown);
    tcase_add_checked_fixture(tc, test_begin, NULL);
    suite_add_tcase(s, tc);
    return tc;
}

/* Is name one of the comma-separated fnmatch globs of list? */
static int name_listed(const char *list, const char *name)
{
    char glob[256];
    for (const char *p = list; *p != '\0';) {
        size_t len = strcspn(p, ",");
        if (len > 0 && len < sizeof glob) {
            memcpy(glob, p, len);
            glob[len] = '\0';
            if (fnmatch(glob, name, 0) == 0) return 1;
        }
        p += len + (p[len] == ',');
    }
    return 0;
}

void harness_add_test(TCase *tc, const TTest *test)
{
    const char *only = getenv("HARNESS_TEST");
    if (only == NULL || *only == '\0' || name_listed(only, test->name)) _tcase_add_test(tc, test, 0, 0, 0, 1);
}

void harness_add_case(Suite *s, const char *name, int timeout_s, void (*setup)(void), void (*teardown)(void),
                      const TTest *test)
{
    const char *only = getenv("HARNESS_TEST");
    if (only == NULL || *only == '\0' || name_listed(only, test->name))
        _tcase_add_test(harness_tcase(s, name, timeout_s, setup, teardown), test, 0, 0, 0, 1);
}

int harness_run(Suite *s)
{
    int *outside = mmap(NULL, sizeof *outside, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (outside == MAP_FAILED) {
        fprintf(stderr, "harness_run: mmap: %s\n", strerror(errno));
        return 1;
    }
    int *saved = g_run_failures;
    g_run_failures = outside; /* counted from the test processes too (heal) */
    SRunner *sr = srunner_create(s);
    /* no srunner_set_fork_status: Check's default, CK_FORK unless CK_FORK=no (see harness.h) */
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    int n = *outside;
    g_run_failures = saved;
    munmap(outside, sizeof *outside);
    if (n)
        fprintf(stderr,
                "harness: %d post-condition check(s) in a teardown or between tests FAILED (see POST-CONDITION "
                "above)\n",
                n);
    return failed + n;
}

/* ---- post-condition: nothing on the backends breaks the registry ---- */

#define MAX_PLANTED 16

struct scan_report {
    char *buf;
    size_t len, used;
    int bad, max_keys; /* keys that break the registry; how many to list */
    const char *const *planted;
    int skipped[MAX_PLANTED]; /* keys skipped per planted pattern */
    char first_skip[MAX_PLANTED][400];
};

static void report_add(struct scan_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report_add(struct scan_report *r, const char *fmt, ...)
{
    if (r->used + 1 >= r->len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->buf + r->used, r->len - r->used, fmt, ap);
    va_end(ap);
    if (n > 0) r->used = (size_t)n < r->len - r->used ? r->used + (size_t)n : r->len - 1;
}

/* key[0..len) printable into out (at most 120 key bytes; "\xHH" for the others). */
static void key_text(const char *key, size_t len, char *out, size_t size)
{
    size_t o = 0;
    for (size_t i = 0; i < len && i < 120 && o + 5 < size; i++) {
        unsigned char ch = (unsigned char)key[i];
        if (ch > 0x20 && ch < 0x7f && ch != '\\')
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, size - o, "\\x%02x", ch);
    }
    if (len > 120 && o + 4 < size) o += (size_t)snprintf(out + o, size - o, "...");
    out[o] = '\0';
}

/* The index of the first planted pattern key[0..len) matches (fnmatch), or -1. */
static int planted_index(const struct scan_report *r, const char *key, size_t len)
{
    if (memchr(key, '\0', len) != NULL) return -1; /* a NUL would hide the rest of the key from fnmatch */
    for (int i = 0; r->planted != NULL && r->planted[i] != NULL && i < MAX_PLANTED; i++)
        if (fnmatch(r->planted[i], key, 0) == 0) return i;
    return -1;
}

/* Check one key of backend `inst`, database db, with its PTTL (ms; -1 none, -2 gone). */
int harness_pttl_is_missing(long long pttl)
{
    return pttl == -1;
}

static void check_key(struct scan_report *r, const struct registry *reg, const char *const *names, int inst,
                      const char *where, int db, const char *key, size_t len, long long pttl)
{
    if (pttl == -2) return; /* expired or deleted since SCAN */
    char why[512];
    struct scan_report w = {.buf = why, .len = sizeof why};
    why[0] = '\0';
    if (db != 0) report_add(&w, "in db %d (keygate serves db 0 only)", db);
    /* a default line takes what matches no prefix; a report-mode line lets instance and TTL go */
    const struct namespace_entry *e = registry_resolve(reg, NS_KEY, key, len);
    if (e == NULL) {
        report_add(&w, "%smatches no namespace", w.used ? "; " : "");
    } else if (!registry_reports(e)) {
        if (e->instance != inst)
            report_add(&w, "%snamespace '%s' lives on %s", w.used ? "; " : "", e->prefix, names[e->instance]);
        if (e->ttl_ms > 0 && harness_pttl_is_missing(pttl))
            report_add(&w, "%sno TTL (namespace '%s' has ttl=%lldms)", w.used ? "; " : "",
                       e->is_default ? REGISTRY_DEFAULT_NAME : e->prefix, (long long)e->ttl_ms);
        if (e->max_ttl_ms > 0 && pttl > e->max_ttl_ms)
            report_add(&w, "%sTTL %lldms above max-ttl=%lldms of '%s'", w.used ? "; " : "", pttl,
                       (long long)e->max_ttl_ms, e->prefix);
    }
    if (w.used == 0) return;
    char text[600];
    key_text(key, len, text, sizeof text);
    int p = planted_index(r, key, len);
    if (p >= 0) {
        if (r->skipped[p]++ == 0)
            snprintf(r->first_skip[p], sizeof r->first_skip[p], "%s db%d %.200s: %.150s", where, db, text, why);
        return;
    }
    if (r->bad++ < r->max_keys) report_add(r, "  %s db%d %s: %s\n", where, db, text, why);
}

/* SCAN the selected database of c (the server `where`, of instance inst); PTTL each batch in one
 * pipeline. 0, or -1 (report says why). */
static int scan_db(struct scan_report *r, redisContext *c, const struct registry *reg, const char *const *names,
                   int inst, const char *where, int db)
{
    char cursor[32] = "0";
    do {
        redisReply *s = redisCommand(c, "SCAN %s COUNT 1000", cursor);
        if (s == NULL || s->type != REDIS_REPLY_ARRAY || s->elements != 2 ||
            s->element[0]->type != REDIS_REPLY_STRING || s->element[0]->len >= sizeof cursor ||
            s->element[1]->type != REDIS_REPLY_ARRAY) {
            report_add(r, "%s db%d: SCAN failed: %s\n", where, db, s != NULL ? describe(s) : c->errstr);
            freeReplyObject(s);
            return -1;
        }
        memcpy(cursor, s->element[0]->str, s->element[0]->len + 1);
        const redisReply *keys = s->element[1];
        for (size_t i = 0; i < keys->elements; i++)
            redisAppendCommand(c, "PTTL %b", keys->element[i]->str, keys->element[i]->len);
        int rc = 0;
        for (size_t i = 0; i < keys->elements; i++) {
            redisReply *t = NULL;
            if (redisGetReply(c, (void **)&t) != REDIS_OK || t == NULL || t->type != REDIS_REPLY_INTEGER) {
                report_add(r, "%s db%d: PTTL failed: %s\n", where, db, t != NULL ? describe(t) : c->errstr);
                freeReplyObject(t);
                rc = -1;
                if (t == NULL) break; /* the connection is gone */
                continue;
            }
            if (rc == 0)
                check_key(r, reg, names, inst, where, db, keys->element[i]->str, keys->element[i]->len, t->integer);
            freeReplyObject(t);
        }
        freeReplyObject(s);
        if (rc != 0) return -1;
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

/* Every database of backend inst. 0, or -1 (report says why). */
static int scan_backend(struct scan_report *r, struct harness *h, const struct registry *reg, const char *const *names,
                        int inst)
{
    redisContext *c = harness_direct(h, names[inst]);
    if (c == NULL) {
        report_add(r, "%s: cannot connect to its plain port %d\n", names[inst], h->backends[inst].plain_port);
        return -1;
    }
    redisReply *d = redisCommand(c, "CONFIG GET databases");
    long long ndb =
        d != NULL && d->type == REDIS_REPLY_ARRAY && d->elements == 2 && d->element[1]->type == REDIS_REPLY_STRING
            ? atoll(d->element[1]->str)
            : 0;
    int rc = 0;
    if (ndb <= 0) {
        report_add(r, "%s: CONFIG GET databases: %s\n", names[inst], d != NULL ? describe(d) : c->errstr);
        rc = -1;
    }
    freeReplyObject(d);
    for (long long db = 0; db < ndb && rc == 0; db++) {
        redisReply *sel = redisCommand(c, "SELECT %lld", db);
        if (sel == NULL || sel->type != REDIS_REPLY_STATUS) {
            report_add(r, "%s: SELECT %lld: %s\n", names[inst], db, sel != NULL ? describe(sel) : c->errstr);
            rc = -1;
        }
        freeReplyObject(sel);
        if (rc == 0) rc = scan_db(r, c, reg, names, inst, names[inst], (int)db);
    }
    redisFree(c);
    return rc;
}

/* The harness's registry file loaded with its instance names; NULL (report says why). */
static struct registry *registry_of(struct harness *h, struct scan_report *r, const char *const *names)
{
    struct diag errs = {0};
    struct registry *reg = registry_load(h->registry_file, names, 2, &errs);
    if (reg == NULL) {
        report_add(r, "cannot load the registry %s:\n", h->registry_file);
        for (size_t i = 0; i < errs.count; i++) report_add(r, "  %s\n", errs.lines[i]);
    }
    diag_free(&errs);
    return reg;
}

int harness_registry_violations(struct harness *h, const char *const *planted, int max_keys, char *report, size_t len)
{
    struct scan_report r = {.buf = report, .len = len, .planted = planted, .max_keys = max_keys};
    if (len > 0) report[0] = '\0';
    const char *names[2] = {h->backends[0].name, h->backends[1].name};
    struct registry *reg = registry_of(h, &r, names);
    if (reg == NULL) return -1;
    int rc = 0;
    for (int i = 0; i < 2; i++)
        if (scan_backend(&r, h, reg, names, i) != 0) rc = -1;
    registry_free(reg);
    for (int i = 0; planted != NULL && planted[i] != NULL && i < MAX_PLANTED; i++)
        fprintf(stderr, "harness_check_registry: SKIPPED %d key(s) planted on purpose matching '%s'%s%s\n",
                r.skipped[i], planted[i], r.skipped[i] ? ", e.g. " : "", r.first_skip[i]);
    if (rc != 0) return -1;
    if (r.bad > max_keys) report_add(&r, "  ... and %d more\n", r.bad - max_keys);
    return r.bad;
}

int harness_registry_violations_on(struct harness *h, const char *instance, const int *plain_ports, int nports,
                                   const char *password, int max_keys, char *report, size_t len)
{
    struct scan_report r = {.buf = report, .len = len, .max_keys = max_keys};
    if (len > 0) report[0] = '\0';
    const char *names[2] = {h->backends[0].name, h->backends[1].name};
    int inst = strcmp(instance, names[0]) == 0 ? 0 : strcmp(instance, names[1]) == 0 ? 1 : -1;
    if (inst < 0 || nports <= 0) {
        report_add(&r, "instance '%s' with %d server(s): nothing to scan\n", instance, nports);
        return -1;
    }
    struct registry *reg = registry_of(h, &r, names);
    if (reg == NULL) return -1;
    int rc = 0;
    for (int i = 0; i < nports; i++) {
        char where[64];
        snprintf(where, sizeof where, "%s 127.0.0.1:%d", instance, plain_ports[i]);
        redisContext *c = serverkit_connect(plain_ports[i], NULL, 2000, 10000);
        redisReply *a = c != NULL ? redisCommand(c, "AUTH %s", password) : NULL;
        if (a == NULL || a->type != REDIS_REPLY_STATUS) {
            report_add(&r, "%s: cannot connect and AUTH: %s\n", where,
                       a != NULL   ? describe(a)
                       : c != NULL ? c->errstr
                                   : "connect failed");
            rc = -1;
        } else if (scan_db(&r, c, reg, names, inst, where, 0) != 0) {
            rc = -1;
        }
        freeReplyObject(a);
        if (c != NULL) redisFree(c);
    }
    registry_free(reg);
    if (rc != 0) return -1;
    if (r.bad > max_keys) report_add(&r, "  ... and %d more\n", r.bad - max_keys);
    return r.bad;
}

/* n keys broke the registry (-1: the check could not run), report listing them: a test's
 * failure in a test, a suite failure in a teardown. */
static void registry_assert(int n, const char *report)
{
    if (n == 0) return;
    const char *what = n < 0 ? "could not run" : "keys that break the registry";
    if (!g_in_teardown) ck_abort_msg("harness_check_registry: %s (%d):\n%s", what, n, report);
    suite_failure("harness_check_registry: %s (%d):\n%s", what, n, report);
}

void harness_check_registry_except(struct harness *h, const char *const *planted)
{
    size_t n_planted = 0;
    while (planted != NULL && planted[n_planted] != NULL) n_planted++;
    char report[6144];
    int n = n_planted > MAX_PLANTED
                ? -1
                : harness_registry_violations(h, planted, HARNESS_REPORT_KEYS, report, sizeof report);
    if (n_planted > MAX_PLANTED) snprintf(report, sizeof report, "more than %d planted patterns\n", MAX_PLANTED);
    registry_assert(n, report);
}

void harness_check_registry(struct harness *h)
{
    harness_check_registry_except(h, NULL);
}

void harness_check_registry_on(struct harness *h, const char *instance, const int *plain_ports, int nports,
                               const char *password)
{
    char report[6144];
    registry_assert(harness_registry_violations_on(h, instance, plain_ports, nports, password, HARNESS_REPORT_KEYS,
                                                   report, sizeof report),
                    report);
}

redisContext *harness_must_client(struct harness *h)
{
    redisContext *c = harness_client(h);
    ck_assert_msg(c != NULL, "cannot connect to keygate on 127.0.0.1:%d", h->port);
    return c;
}

/* harness_connect_from to port. */
static int connect_port_from(int port, const char *source)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in from = {.sin_family = AF_INET};
    ck_assert_msg(inet_pton(AF_INET, source, &from.sin_addr) == 1, "not an IPv4 address: %s", source);
    ck_assert_msg(bind(fd, (struct sockaddr *)&from, sizeof from) == 0, "bind %s: %s", source, strerror(errno));
    struct timeval tv = {5, 0}; /* a blocking connect that cannot hang the test */
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_msg(connect(fd, (struct sockaddr *)&to, sizeof to) == 0, "connect to keygate from %s: %s", source,
                  strerror(errno));
    struct timeval none = {0, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
    return fd;
}

int harness_connect_from(struct harness *h, const char *source)
{
    return connect_port_from(h->port, source);
}

int harness_tcp_connect(int port)
{
    return connect_port_from(port, "127.0.0.1");
}

SSL *harness_tls_client(struct harness *h, int port, const char *source)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    ck_assert_ptr_nonnull(ctx);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/build/certs/ca.crt", h->root);
    ck_assert_msg(SSL_CTX_load_verify_locations(ctx, path, NULL) == 1, "cannot load %s", path);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    int fd = connect_port_from(port, source ? source : "127.0.0.1");
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    SSL *ssl = SSL_new(ctx);
    SSL_CTX_free(ctx); /* ssl holds its own reference */
    ck_assert_ptr_nonnull(ssl);
    SSL_set_fd(ssl, fd);
    SSL_set1_host(ssl, "localhost");
    ck_assert_msg(SSL_connect(ssl) == 1, "TLS handshake with keygate on port %d failed", port);
    return ssl;
}

void harness_tls_close(SSL *ssl)
{
    int fd = SSL_get_fd(ssl);
    ERR_clear_error();
    SSL_free(ssl);
    close(fd);
}

redisContext *harness_client_from(struct harness *h, const char *source)
{
    redisContext *c = redisConnectFd(harness_connect_from(h, source));
    ck_assert_msg(c != NULL && !c->err, "hiredis over a connection from %s", source);
    struct timeval tv = {10, 0};
    ck_assert_msg(redisSetTimeout(c, tv) == REDIS_OK, "redisSetTimeout");
    return c;
}

redisContext *harness_must_direct(struct harness *h, const char *backend)
{
    redisContext *c = harness_direct(h, backend);
    ck_assert_msg(c != NULL, "cannot connect directly to backend %s", backend);
    return c;
}

long long harness_direct_int(struct harness *h, const char *backend, const char *fmt, ...)
{
    redisContext *c = harness_must_direct(h, backend);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL && r->type == REDIS_REPLY_INTEGER, "%s: `%s`: want an integer, got %s", backend, fmt,
                  r != NULL ? describe(r) : c->errstr);
    long long v = r->integer;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

redisReply *cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "`%s`: connection error: %s", fmt, c->errstr);
    return r;
}

/* INFO `section` on c: the reply (a bulk string: anything else fails the test) and, in *at, the
 * value of field `name` (NULL: no such line). The caller frees the reply. */
static redisReply *info_field_at(redisContext *c, const char *section, const char *name, const char **at)
{
    redisReply *r = cmd(c, "INFO %s", section);
    ck_assert_msg(r->type == REDIS_REPLY_STRING, "INFO %s: %s", section, describe(r));
    char key[96];
    int n = snprintf(key, sizeof key, "\r\n%s:", name);
    ck_assert(n > 0 && (size_t)n < sizeof key);
    *at = strstr(r->str, key);
    if (*at) *at += n;
    return r;
}

long long harness_info_field(redisContext *c, const char *section, const char *name)
{
    const char *at;
    redisReply *r = info_field_at(c, section, name, &at);
    long long v = at ? atoll(at) : -1;
    freeReplyObject(r);
    return v;
}

long long harness_must_info_field(redisContext *c, const char *section, const char *name)
{
    const char *at;
    redisReply *r = info_field_at(c, section, name, &at);
    ck_assert_msg(at != NULL, "INFO %s has no %s:\n%s", section, name, r->str);
    long long v = atoll(at);
    freeReplyObject(r);
    return v;
}

long long harness_info_stat(redisContext *c, const char *name)
{
    return harness_info_field(c, "stats", name);
}

long long harness_must_info_stat(redisContext *c, const char *name)
{
    return harness_must_info_field(c, "stats", name);
}

long long harness_info_reloads(redisContext *c)
{
    return harness_must_info_field(c, "server", "reloads");
}

long long harness_blocked_clients(struct harness *h, const char *backend)
{
    redisContext *d = harness_must_direct(h, backend);
    long long n = harness_must_info_field(d, "clients", "blocked_clients");
    redisFree(d);
    return n;
}

redisReply *next_reply(redisContext *c)
{
    void *r = NULL;
    ck_assert_msg(redisGetReply(c, &r) == REDIS_OK && r != NULL, "reading a reply: %s", c->errstr);
    return r;
}

void send_appended(redisContext *c, const char *what)
{
    int done = 0;
    for (int tries = 0; !done && tries < 1000; tries++)
        ck_assert_msg(redisBufferWrite(c, &done) == REDIS_OK, "%s: write: %s", what, c->errstr);
    ck_assert_msg(done, "%s: not written", what);
}

void describe_into(const redisReply *r, char *buf, size_t len)
{
    if (r == NULL) {
        snprintf(buf, len, "(no reply)");
        return;
    }
    switch (r->type) {
    case REDIS_REPLY_STATUS:
        snprintf(buf, len, "+%.300s", r->str);
        break;
    case REDIS_REPLY_ERROR:
        snprintf(buf, len, "-%.300s", r->str);
        break;
    case REDIS_REPLY_STRING:
        snprintf(buf, len, "\"%.300s\"", r->str);
        break;
    case REDIS_REPLY_INTEGER:
        snprintf(buf, len, ":%lld", r->integer);
        break;
    case REDIS_REPLY_NIL:
        snprintf(buf, len, "(nil)");
        break;
    case REDIS_REPLY_ARRAY: {
        int n = snprintf(buf, len, "array of %zu [", r->elements);
        size_t used = n > 0 ? (size_t)n : 0;
        for (size_t i = 0; i < r->elements && used + 8 < len; i++) {
            char one[128];
            describe_into(r->element[i], one, sizeof one);
            n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", one);
            used = n > 0 && (size_t)n < len - used ? used + (size_t)n : len - 1;
        }
        if (used + 2 < len) snprintf(buf + used, len - used, "]");
        break;
    }
    default:
        snprintf(buf, len, "reply type %d", r->type);
    }
}

const char *describe(const redisReply *r)
{
    static char buf[512];
    describe_into(r, buf, sizeof buf);
    return buf;
}

/* "what: " for a message, or nothing when what is NULL: two %s arguments. */
#define WHAT(what) (what) != NULL ? (what) : "", (what) != NULL ? ": " : ""

void expect_status_at(int line, redisReply *r, const char *want, const char *what)
{
    ck_assert_msg(r->type == REDIS_REPLY_STATUS && strcmp(r->str, want) == 0, "line %d: %s%swant +%s, got %s", line,
                  WHAT(what), want, describe(r));
    freeReplyObject(r);
}

void expect_bulk_at(int line, redisReply *r, const char *want, const char *what)
{
    ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == strlen(want) && memcmp(r->str, want, r->len) == 0,
                  "line %d: %s%swant \"%s\", got %s", line, WHAT(what), want, describe(r));
    freeReplyObject(r);
}

void expect_int_at(int line, redisReply *r, long long want, const char *what)
{
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer == want, "line %d: %s%swant :%lld, got %s", line,
                  WHAT(what), want, describe(r));
    freeReplyObject(r);
}

void expect_nil_at(int line, redisReply *r, const char *what)
{
    ck_assert_msg(r->type == REDIS_REPLY_NIL, "line %d: %s%swant (nil), got %s", line, WHAT(what), describe(r));
    freeReplyObject(r);
}

void expect_error_at(int line, redisReply *r, const char *prefix, const char *what)
{
    ck_assert_msg(r->type == REDIS_REPLY_ERROR && strncmp(r->str, prefix, strlen(prefix)) == 0,
                  "line %d: %s%swant an error starting \"%s\", got %s", line, WHAT(what), prefix, describe(r));
    freeReplyObject(r);
}

void expect_array_at(int line, redisReply *r, const char *what, int n, ...)
{
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)n, "line %d: %s%swant an array of %d, got %s",
                  line, WHAT(what), n, describe(r));
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const char *want = va_arg(ap, const char *);
        const redisReply *e = r->element[i];
        int ok;
        if (strcmp(want, "nil") == 0)
            ok = e->type == REDIS_REPLY_NIL;
        else if (want[0] == '+')
            ok = e->type == REDIS_REPLY_STATUS && strcmp(e->str, want + 1) == 0;
        else if (want[0] == ':')
            ok = e->type == REDIS_REPLY_INTEGER && e->integer == atoll(want + 1);
        else if (want[0] == '-')
            ok = e->type == REDIS_REPLY_ERROR && strncmp(e->str, want + 1, strlen(want + 1)) == 0;
        else
            ok = e->type == REDIS_REPLY_STRING && strcmp(e->str, want) == 0;
        ck_assert_msg(ok, "line %d: %s%selement %d: want %s, got %s", line, WHAT(what), i, want, describe(e));
    }
    va_end(ap);
    freeReplyObject(r);
}
