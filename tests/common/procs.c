/* procs.c: the process handling the cluster and Sentinel harnesses share: servers started as the owner's children and recorded (pid and start time) in a table shared across forks, signalled, killed and reaped with deadlines, safety nets so that none outlives the runner; free loopback ports; the last-error buffer. */
#include "procs.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SPAWNED 256
#define PICK_MAX 16 /* servers procs_pick_ports finds ports for in one call */

/* ---- the last error ---- */

static char g_err[PROCS_ERR_MAX];

const char *procs_last_error(void)
{
    return g_err;
}

void procs_set_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
}

void procs_wrap_err(const char *fmt, ...)
{
    char why[sizeof g_err], what[512];
    snprintf(why, sizeof why, "%s", g_err);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    procs_set_err("%s: %s", what, why);
}

void procs_clear_err(void)
{
    g_err[0] = '\0';
}

/* ---- time ---- */

long long procs_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void procs_nap_ms(int ms)
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

static struct spawned *g_spawned;   /* MAP_SHARED: test processes see what the owner started and the reverse */
static const char *g_who = "procs"; /* the prefix of what we print: procs_install's who */

unsigned long long procs_stat(pid_t pid, char *state)
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

int procs_threads(pid_t pid)
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

int procs_alive(pid_t pid, unsigned long long start)
{
    char state = '?';
    if (pid <= 0) return 0;
    unsigned long long now = procs_stat(pid, &state);
    return now != 0 && now == start && state != 'Z' && state != 'X';
}

int procs_gone(pid_t pid, unsigned long long start)
{
    if (pid <= 0) return 1;
    if (waitpid(pid, NULL, WNOHANG) == pid) return 1;
    char state = '?';
    unsigned long long now = procs_stat(pid, &state);
    if (now == 0 || now != start) return 1;
    return (state == 'Z' || state == 'X') && procs_threads(pid) <= 1;
}

int procs_signal(pid_t pid, unsigned long long start, int sig)
{
    if (pid <= 0 || procs_stat(pid, NULL) != start) {
        errno = ESRCH;
        return -1;
    }
    return kill(pid, sig);
}

static void spawned_add(pid_t pid, pid_t owner, unsigned long long start)
{
    if (g_spawned == NULL) return; /* no procs_install: the caller keeps its own table (tests/integration/harness.c) */
    for (int i = 0; g_spawned != NULL && i < MAX_SPAWNED; i++)
        if (__sync_bool_compare_and_swap(&g_spawned[i].pid, 0, -1)) {
            g_spawned[i].owner = owner;
            g_spawned[i].start = start;
            __atomic_store_n(&g_spawned[i].pid, pid, __ATOMIC_RELEASE);
            return;
        }
    fprintf(stderr, "%s: more than %d servers: pid %d not recorded (PDEATHSIG still ends it)\n", g_who, MAX_SPAWNED,
            (int)pid);
}

void procs_forget(pid_t pid)
{
    for (int i = 0; g_spawned != NULL && pid > 0 && i < MAX_SPAWNED; i++)
        if (__sync_bool_compare_and_swap(&g_spawned[i].pid, pid, 0)) return;
}

void procs_reap_mine(void)
{
    for (int i = 0; g_spawned != NULL && i < MAX_SPAWNED; i++) {
        pid_t pid = g_spawned[i].pid;
        if (pid <= 0 || g_spawned[i].owner != getpid()) continue;
        if (waitpid(pid, NULL, WNOHANG) == pid) __sync_bool_compare_and_swap(&g_spawned[i].pid, pid, 0);
    }
}

/* SIGKILL every server this process owns (atexit, fatal signals): a test process that exits
 * must not kill the runner's servers, hence the owner check. */
static void spawned_kill_mine(void)
{
    for (int i = 0; g_spawned != NULL && i < MAX_SPAWNED; i++) {
        pid_t pid = g_spawned[i].pid;
        if (pid <= 0 || g_spawned[i].owner != getpid()) continue;
        procs_signal(pid, g_spawned[i].start, SIGCONT);
        procs_signal(pid, g_spawned[i].start, SIGKILL);
    }
}

static void on_fatal_signal(int sig)
{
    spawned_kill_mine();
    signal(sig, SIG_DFL);
    raise(sig);
}

int procs_install(const char *who, int subreaper)
{
    static pid_t installed;
    g_who = who;
    if (installed == getpid()) return 0;
    if (g_spawned == NULL) {
        void *m =
            mmap(NULL, sizeof(struct spawned) * MAX_SPAWNED, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return -1;
        g_spawned = m;
    }
    /* a server a test process starts is double-forked and re-parented to us (procs_spawn) */
    if (subreaper && prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return -1;
    /* A process group of its own (a Check test process has one already): a SIGSTOPped server
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

int procs_leftovers(void)
{
    int n = 0;
    for (int i = 0; g_spawned != NULL && i < MAX_SPAWNED; i++) {
        pid_t pid = g_spawned[i].pid;
        if (pid <= 0) continue;
        if (procs_gone(pid, g_spawned[i].start)) {
            __sync_bool_compare_and_swap(&g_spawned[i].pid, pid, 0);
            continue;
        }
        fprintf(stderr, "%s: LEFTOVER: pid %d (owner %d) still runs\n", g_who, (int)pid, (int)g_spawned[i].owner);
        n++;
    }
    return n;
}

/* In the forked child: the owner's child now (PDEATHSIG against it, checked after setting
 * it), exec argv with stdout and stderr appended to log_path, no fd of ours. */
static void exec_child(char *const argv[], const char *log_path, const char *auth, pid_t owner)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGABRT, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != owner) _exit(127);
    int out = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    int in = open("/dev/null", O_RDONLY);
    if (out < 0 || in < 0) _exit(127);
    dup2(in, 0);
    dup2(out, 1);
    dup2(out, 2);
    closefrom(3); /* no test's client sockets in a server */
    if (auth != NULL) setenv("REDISCLI_AUTH", auth, 1);
    execvp(argv[0], argv);
    dprintf(2, "%s: cannot exec %s: %s\n", g_who, argv[0], strerror(errno));
    _exit(127);
}

/* From a process other than the owner (a test's child): double fork, so that the server is
 * the owner's child (it is our subreaper) and out of the test's process group (Check's
 * killpg of a timed-out test must miss it). Returns its pid, or -1. */
static pid_t spawn_for_owner(char *const argv[], const char *log_path, const char *auth, pid_t owner, pid_t owner_pgid)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    pid_t mid = fork();
    if (mid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (mid == 0) {
        setpgid(0, owner_pgid);
        pid_t self = getpid();
        pid_t pid = fork();
        if (pid == 0) {
            /* PDEATHSIG fires for the parent at the time it is set: wait to be adopted first */
            for (int i = 0; i < 5000; i++) {
                pid_t pp = getppid();
                if (pp == owner) break;
                if (pp != self) _exit(127); /* adopted by another reaper: the owner is gone */
                usleep(1000);
            }
            exec_child(argv, log_path, auth, owner);
        }
        ssize_t n = write(fds[1], &pid, sizeof pid);
        _exit(n == (ssize_t)sizeof pid ? 0 : 1);
    }
    close(fds[1]);
    pid_t pid = -1;
    if (read(fds[0], &pid, sizeof pid) != (ssize_t)sizeof pid) pid = -1;
    close(fds[0]);
    while (waitpid(mid, NULL, 0) < 0 && errno == EINTR) {
    }
    return pid;
}

pid_t procs_spawn(char *const argv[], const char *log_path, const char *auth, pid_t owner, pid_t owner_pgid,
                  unsigned long long *start)
{
    pid_t pid;
    if (getpid() == owner) {
        pid = fork();
        if (pid == 0) exec_child(argv, log_path, auth, owner);
    } else {
        pid = spawn_for_owner(argv, log_path, auth, owner, owner_pgid);
    }
    if (pid < 0) return -1;
    /* the child cannot exec before its stat exists; read it at once, before anyone can reap it */
    *start = procs_stat(pid, NULL);
    spawned_add(pid, owner, *start);
    return pid;
}

int procs_wait_child(pid_t pid, int timeout_ms)
{
    long long deadline = procs_mono_ms() + timeout_ms;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            procs_forget(pid);
            return status;
        }
        if (r < 0 && errno != EINTR) return -1;
        if (procs_mono_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            procs_forget(pid);
            return -1;
        }
        procs_nap_ms(20);
    }
}

void procs_kill(pid_t pid, unsigned long long start)
{
    if (pid <= 0) return;
    procs_signal(pid, start, SIGCONT);
    procs_signal(pid, start, SIGKILL);
}

int procs_reap(pid_t pid, unsigned long long start, long long deadline, const char *who)
{
    if (pid <= 0) return 1;
    while (!procs_gone(pid, start) && procs_mono_ms() < deadline) procs_nap_ms(10);
    if (procs_gone(pid, start)) return 1;
    fprintf(stderr, "%s: %s (pid %d) still runs %d ms after SIGKILL\n", g_who, who, (int)pid, PROCS_GONE_MS);
    return 0;
}

int procs_kill_wait(pid_t pid, unsigned long long start, int sigcont_first, const char *who)
{
    if (!procs_alive(pid, start)) {
        procs_set_err("%s is not running", who);
        return -1;
    }
    if (sigcont_first) procs_signal(pid, start, SIGCONT);
    procs_signal(pid, start, SIGKILL);
    long long deadline = procs_mono_ms() + PROCS_GONE_MS;
    while (!procs_gone(pid, start)) {
        if (procs_mono_ms() >= deadline) {
            procs_set_err("%s (pid %d) still runs %d ms after SIGKILL", who, (int)pid, PROCS_GONE_MS);
            return -1;
        }
        procs_nap_ms(5);
    }
    return 0;
}

int procs_pause(pid_t pid, unsigned long long start, const char *who)
{
    if (!procs_alive(pid, start) || procs_signal(pid, start, SIGSTOP) != 0) {
        procs_set_err("%s: SIGSTOP: not running", who);
        return -1;
    }
    long long deadline = procs_mono_ms() + PROCS_GONE_MS;
    char state = '?';
    while (procs_stat(pid, &state) == start && state != 'T') {
        if (procs_mono_ms() >= deadline) {
            procs_set_err("%s not stopped %d ms after SIGSTOP (state %c)", who, PROCS_GONE_MS, state);
            return -1;
        }
        procs_nap_ms(5);
    }
    return 0;
}

int procs_resume(pid_t pid, unsigned long long start, const char *who)
{
    if (procs_signal(pid, start, SIGCONT) != 0) {
        procs_set_err("%s: SIGCONT: not running", who);
        return -1;
    }
    return 0;
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

int procs_pick_ports(int n, const struct procs_port_ranges *r, int *tls, int *plain)
{
    static unsigned seed;
    if (seed == 0) seed = (unsigned)getpid() * 2654435761u ^ (unsigned)procs_mono_ms();
    int fds[3 * PICK_MAX], nfds = 0, rc = 0;
    int per = r->bus_offset > 0 ? 3 : 2; /* ports a server */
    assert(n <= PICK_MAX);
    for (int i = 0; i < n && rc == 0; i++) {
        int found = 0;
        for (int tries = 0; tries < 500 && !found; tries++) {
            int t = r->tls_low + (int)(rand_r(&seed) % (unsigned)(r->tls_high - r->tls_low + 1));
            int p = r->plain_low + (int)(rand_r(&seed) % (unsigned)(r->plain_high - r->plain_low + 1));
            int want[3] = {t, p, t + r->bus_offset}, got[3], k = 0;
            while (k < per && (got[k] = bind_loopback(want[k])) >= 0) k++;
            if (k == per) {
                for (int j = 0; j < per; j++) fds[nfds++] = got[j];
                tls[i] = t;
                plain[i] = p;
                found = 1;
            } else {
                while (k > 0) close(got[--k]);
            }
        }
        if (!found) rc = -1;
    }
    for (int i = 0; i < nfds; i++) close(fds[i]);
    if (rc != 0 && r->tls_low == r->plain_low && r->tls_high == r->plain_high)
        procs_set_err("no free loopback ports in %d..%d", r->tls_low, r->tls_high);
    else if (rc != 0)
        procs_set_err("no free loopback ports in %d..%d / %d..%d", r->tls_low, r->tls_high, r->plain_low,
                      r->plain_high);
    return rc;
}

int procs_port_free(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    int ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
             bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    if (fd >= 0) close(fd);
    return ok;
}
