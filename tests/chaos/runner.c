/* runner.c: what the topologies of the fault harness's runner share (chaos.c, sentinel.c, cluster.c): the run's clock and harness failure, the seeded random numbers, planned pauses, a client's operation log and connection, keygate processes (their files, start, serving check, restart), counter replies, options, the schedule and its fault windows, the history file, the error summary, and the run of sentinel.c's and cluster.c's topologies (runner_main). */
#include "runner.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chaos_sentinel.h"
#include "procs.h"
#include "serverkit.h"

long long runner_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct runner_run runner;

long long runner_now_us(void)
{
    return runner_mono_us() - runner.t0_us;
}

void runner_fail(const char *fmt, ...)
{
    if (runner.failure[0] != '\0') return; /* the first one is the cause */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(runner.failure, sizeof runner.failure, fmt, ap);
    va_end(ap);
    fprintf(stderr, "chaos[SEED=%llu]: %s\n", runner.seed, runner.failure);
}

unsigned long long runner_splitmix(unsigned long long *s)
{
    unsigned long long z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int runner_rnd(unsigned long long *s, int n)
{
    return (int)(runner_splitmix(s) % (unsigned long long)n);
}

struct hist_op *runner_oplog_add(struct oplog *l)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4096;
        struct hist_op *np = realloc(l->ops, cap * sizeof *np);
        if (np == NULL) {
            fprintf(stderr, "chaos: out of memory for the history\n");
            abort();
        }
        l->ops = np;
        l->cap = cap;
    }
    struct hist_op *o = &l->ops[l->n++];
    memset(o, 0, sizeof *o);
    return o;
}

int runner_by_start_time(const void *a, const void *b)
{
    const struct hist_op *x = a, *y = b;
    return x->start_us < y->start_us ? -1 : x->start_us > y->start_us;
}

void runner_sleep_ms(int ms, const int *stop)
{
    long long end = runner_mono_us() + (long long)ms * 1000;
    while (runner_mono_us() < end) {
        if (stop != NULL && __atomic_load_n(stop, __ATOMIC_ACQUIRE)) return;
        long long left = (end - runner_mono_us()) / 1000;
        procs_nap_ms(left > 20 ? 20 : left > 0 ? (int)left : 1);
    }
}

int runner_kg_setup(struct runner_kg *k, int n, const char *const *names, const char *dir, int *extra, int nextra)
{
    int tls[n + nextra], plain[n + nextra];
    struct procs_port_ranges r = {.tls_low = 36000, .tls_high = 40999, .plain_low = 41000, .plain_high = 45999};
    if (procs_pick_ports(n + nextra, &r, tls, plain) != 0) {
        runner_fail("%s", procs_last_error());
        return -1;
    }
    for (int i = 0; i < nextra; i++) extra[i] = tls[n + i];
    for (int i = 0; i < n; i++) {
        snprintf(k[i].name, sizeof k[i].name, "%s", names[i]);
        k[i].port = tls[i];
        k[i].threads = i == 0 ? 1 : 2;
        snprintf(k[i].conf, sizeof k[i].conf, "%s/%s.conf", dir, k[i].name);
        snprintf(k[i].log, sizeof k[i].log, "%s/%s.log", dir, k[i].name);
        snprintf(k[i].registry, sizeof k[i].registry, "%s/%s.registry.conf", dir, k[i].name);
    }
    return 0;
}

int runner_kg_write_files(const struct runner_kg *k, const char *conf, const char *registry)
{
    if (serverkit_write_file(k->conf, conf, 0644) != 0 || serverkit_write_file(k->registry, registry, 0644) != 0) {
        runner_fail("writing %s's files: %s", k->name, strerror(errno));
        return -1;
    }
    return 0;
}

int runner_kg_spawn(struct runner_kg *k)
{
    char *argv[] = {(char *)runner.keygate_bin, "-c", k->conf, NULL};
    k->pid = procs_spawn(argv, k->log, NULL, getpid(), getpgrp(), &k->start);
    if (k->pid < 0) {
        k->pid = 0;
        runner_fail("cannot start %s: %s", k->name, strerror(errno));
        return -1;
    }
    return 0;
}

/* One try of probe p on keygate k: 1 when it is served, else 0 and the last answer in last. */
static int kg_probe(const struct runner_kg *k, const struct runner_kg_probe *p, char *last, size_t len)
{
    redisContext *c = redisConnectWithTimeout("127.0.0.1", k->port, (struct timeval){1, 0});
    int ok = c != NULL && !c->err, named = p->password != NULL || p->nkeys > 1;
    if (ok) {
        redisSetTimeout(c, (struct timeval){p->timeout_s, 0});
        if (p->password != NULL) {
            redisReply *r = redisCommand(c, "AUTH app %s", p->password);
            ok = r != NULL && r->type == REDIS_REPLY_STATUS;
            snprintf(last, len, "AUTH: %s", r != NULL ? serverkit_reply_text(r) : c->errstr);
            freeReplyObject(r);
        }
        for (int key = 0; key < p->nkeys && ok; key++) {
            redisReply *r = redisCommand(c, "GET %s", p->keys[key]);
            ok = r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL);
            snprintf(last, len, "%s%s%s%s", named ? "GET " : "", named ? p->keys[key] : "", named ? ": " : "",
                     r != NULL ? serverkit_reply_text(r) : c->errstr);
            freeReplyObject(r);
        }
    }
    redisFree(c);
    return ok;
}

int runner_kg_wait_serving(const struct runner_kg *k, const struct runner_kg_probe *p, int deadline_ms)
{
    long long deadline = procs_mono_ms() + deadline_ms;
    char last[160] = "no answer";
    for (;;) {
        if (kg_probe(k, p, last, sizeof last)) return 0;
        if (!procs_alive(k->pid, k->start) || procs_mono_ms() >= deadline) {
            serverkit_print_log_tail(k->name, k->log);
            runner_fail("%s (pid %d, port %d) %s: %s not served within %d ms (last: %s)", k->name, (int)k->pid, k->port,
                        procs_alive(k->pid, k->start) ? "runs" : "exited", p->what, deadline_ms, last);
            return -1;
        }
        procs_nap_ms(50);
    }
}

int runner_kg_start_all(struct runner_kg *k, int n, void (*conf)(int i, char *buf, size_t len), const char *registry,
                        const struct runner_kg_probe *p, int deadline_ms)
{
    char text[8 * PATH_MAX];
    for (int i = 0; i < n; i++) {
        conf(i, text, sizeof text);
        if (runner_kg_write_files(&k[i], text, registry) != 0 || runner_kg_spawn(&k[i]) != 0) return -1;
    }
    for (int i = 0; i < n; i++)
        if (runner_kg_wait_serving(&k[i], p, deadline_ms) != 0) return -1;
    return 0;
}

void runner_kg_check_running(struct runner_kg *k, int n, const struct runner_kg_probe *p, int deadline_ms)
{
    for (int i = 0; i < n && runner.failure[0] == '\0'; i++)
        if (!procs_alive(k[i].pid, k[i].start))
            runner_fail("%s is not running after the schedule: it exited by itself", k[i].name);
        else
            runner_kg_wait_serving(&k[i], p, deadline_ms);
}

void runner_kg_kill_all(struct runner_kg *k, int n)
{
    for (int i = 0; i < n; i++)
        if (k[i].pid > 0) {
            procs_kill_wait(k[i].pid, k[i].start, 1, k[i].name);
            k[i].pid = 0;
        }
}

int runner_kg_stop(struct runner_kg *k, int kill9, int shutdown_ms, char *why, size_t why_len)
{
    int rc = 0;
    if (kill9) {
        if (procs_kill_wait(k->pid, k->start, 1, k->name) != 0) {
            snprintf(why, why_len, "%s", procs_last_error());
            return -1;
        }
    } else {
        procs_signal(k->pid, k->start, SIGTERM);
        long long deadline = procs_mono_ms() + shutdown_ms;
        int status = 0;
        pid_t got = 0;
        while ((got = waitpid(k->pid, &status, WNOHANG)) == 0 && procs_mono_ms() < deadline) procs_nap_ms(5);
        if (got != k->pid) {
            snprintf(why, why_len, "%s did not exit within %d ms of SIGTERM", k->name, shutdown_ms);
            return -1;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            serverkit_print_log_tail(k->name, k->log);
            snprintf(why, why_len, "%s ended badly after SIGTERM (wait status 0x%x; its log above)", k->name,
                     (unsigned)status);
            rc = 1;
        }
    }
    procs_forget(k->pid);
    k->restarts++;
    return rc;
}

int runner_kg_restart(struct runner_kg *k, int kill9, int shutdown_ms, const struct runner_kg_probe *p, int start_ms)
{
    char why[256];
    int rc = runner_kg_stop(k, kill9, shutdown_ms, why, sizeof why);
    if (rc < 0) {
        runner_fail("%s", why);
        return -1;
    }
    if (rc > 0) { /* a keygate defect, not the harness's: said, kept for the verdict, and the schedule goes on */
        runner.crashes++;
        printf("chaos: DEFECT (SEED=%llu): %s\n", runner.seed, why);
    }
    return runner_kg_spawn(k) == 0 && runner_kg_wait_serving(k, p, start_ms) == 0 ? 0 : -1;
}

int runner_prepare(char *root, size_t len)
{
    if (getcwd(root, len) == NULL) {
        runner_fail("getcwd: %s", strerror(errno));
        return -1;
    }
    if (access(runner.keygate_bin, X_OK) != 0) {
        runner_fail("KEYGATE_BIN=%s is not an executable: build it with `make all`", runner.keygate_bin);
        return -1;
    }
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s/build/chaos", root);
    mkdir(tmp, 0755);
    setenv("TMPDIR", tmp, 1);
    return 0;
}

void runner_client_lower_priority(void)
{
    errno = 0;
    int now = getpriority(PRIO_PROCESS, (id_t)gettid());
    if (errno == 0) setpriority(PRIO_PROCESS, (id_t)gettid(), now + 4 > 19 ? 19 : now + 4);
}

int runner_client_connect(redisContext **c, int port, int timeout_ms, struct hist_op *ops, int n)
{
    struct timeval tv = {timeout_ms / 1000, 0};
    *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (*c == NULL || (*c)->err) {
        for (int i = 0; i < n; i++) {
            ops[i].end_us = runner_now_us();
            ops[i].status = HST_ERR_CONN;
            snprintf(ops[i].err, sizeof ops[i].err, "connect: %.90s", *c ? (*c)->errstr : "out of memory");
        }
        redisFree(*c);
        *c = NULL;
        return -1;
    }
    redisSetTimeout(*c, tv);
    return 0;
}

void runner_client_lost(redisContext **c, struct hist_op *ops, int n)
{
    int timeout = (*c)->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
    for (int i = 0; i < n; i++) {
        ops[i].end_us = runner_now_us();
        ops[i].status = timeout ? HST_ERR_TIMEOUT : HST_ERR_CONN;
        snprintf(ops[i].err, sizeof ops[i].err, "%.100s", (*c)->errstr[0] ? (*c)->errstr : "connection closed");
    }
    redisFree(*c);
    *c = NULL;
}

static struct runner_client *client_at(void *clients, size_t stride, int i)
{
    return (struct runner_client *)((char *)clients + (size_t)i * stride);
}

void runner_plan_make(struct runner_schedule *sc, unsigned long long s, const int *kinds, int nkinds, unsigned faults,
                      int duration_s, int (*draw)(unsigned long long *s, struct runner_planned *pl))
{
    int chosen[HF_NKINDS] = {0}, nk = 0;
    for (int i = 0; i < nkinds; i++)
        if (faults & (1u << kinds[i])) chosen[nk++] = kinds[i];
    long long t = 0, end = (long long)duration_s * 1000;
    while (nk > 0 && sc->nplan < RUNNER_MAX_PLANNED) {
        struct runner_planned pl = {0};
        pl.kind = chosen[runner_rnd(&s, nk)];
        pl.gap_ms = 500 + runner_rnd(&s, 1500);
        int cost = draw(&s, &pl);
        if (t == 0) pl.gap_ms += 1500; /* the first after 1.5 s of load without faults */
        if (sc->nplan > 0 && t + pl.gap_ms + pl.hold_ms + cost > end) break;
        t += pl.gap_ms + pl.hold_ms + cost;
        sc->plan[sc->nplan++] = pl;
    }
}

void runner_plan_describe(const struct runner_planned *pl, const char *const *names, char *buf, size_t len)
{
    if (pl->kind == HF_RESTART)
        snprintf(buf, len, "restart %s (%s)", names[pl->target], pl->param ? "SIGKILL" : "SIGTERM");
    else
        snprintf(buf, len, "%s", hist_fault_name(pl->kind));
}

void runner_plan_print(const struct runner_schedule *sc, const char *settles)
{
    printf("chaos: schedule of SEED=%llu: %d faults (each followed by %s settling)\n", runner.seed, sc->nplan, settles);
    for (int i = 0; i < sc->nplan; i++) {
        char what[160];
        sc->describe(&sc->plan[i], what, sizeof what);
        printf("  #%-3d after %4d ms %-13s %s\n", i, sc->plan[i].gap_ms, hist_fault_name(sc->plan[i].kind), what);
    }
    fflush(stdout);
}

void runner_nemesis(const struct runner_schedule *sc, int duration_s, int (*fault_run)(const struct runner_planned *pl),
                    void (*heal)(void))
{
    long long end_us = (long long)duration_s * 1000000;
    for (int i = 0; i < sc->nplan && runner.failure[0] == '\0'; i++) {
        runner_sleep_ms(sc->plan[i].gap_ms, NULL); /* the schedule's planned gap */
        if (runner_now_us() + (long long)sc->plan[i].hold_ms * 1000 > end_us) {
            printf("chaos: +%7.3fs schedule cut before fault #%d: DURATION is up\n", runner_now_us() / 1e6, i);
            break;
        }
        if (fault_run(&sc->plan[i]) != 0) {
            heal();
            break;
        }
    }
}

struct hist_fault *runner_fault_begin(struct runner_schedule *sc, const struct runner_planned *pl)
{
    struct hist_fault *f = &sc->faults[sc->nfaults];
    memset(f, 0, sizeof *f);
    f->kind = pl->kind;
    f->node = pl->kind == HF_RESTART ? pl->target : HIST_GLOBAL;
    sc->describe(pl, f->what, sizeof f->what);
    f->start_us = runner_now_us();
    return f;
}

void runner_fault_end(struct runner_schedule *sc, struct hist_fault *f)
{
    f->end_us = runner_now_us();
    sc->nfaults++;
    sc->count[f->kind]++;
    printf("chaos: +%7.3fs .. +%7.3fs %-13s %s\n", f->start_us / 1e6, f->end_us / 1e6, hist_fault_name(f->kind),
           f->what);
    fflush(stdout);
}

void runner_fault_note(struct hist_fault *f, const char *fmt, ...)
{
    size_t used = strlen(f->what);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->what + used, sizeof f->what - used, fmt, ap);
    va_end(ap);
}

struct hist_op *runner_final_op(struct runner_client *cl, int n, int key)
{
    struct hist_op *o = runner_oplog_add(&cl->log);
    o->thread = cl->id;
    o->node = cl->node = n;
    o->nkeys = 1;
    o->key[0] = key;
    o->kind = HOP_GET;
    redisFree(cl->c);
    cl->c = NULL;
    return o;
}

struct hist_op *runner_final_begin(struct oplog *l, int thread, int key)
{
    struct hist_op *o = runner_oplog_add(l);
    o->thread = thread;
    o->node = HIST_DIRECT;
    o->final = 1;
    o->nkeys = 1;
    o->key[0] = key;
    o->kind = HOP_GET;
    o->start_us = runner_now_us();
    return o;
}

void runner_final_get(struct hist_op *o, redisContext *c, int p, const char *name)
{
    redisReply *r = c ? redisCommand(c, "GET %s", name) : NULL;
    o->end_us = runner_now_us();
    if (r == NULL || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)) {
        o->status = HST_ERR_CONN;
        snprintf(o->err, sizeof o->err, "node %d: %.80s", p, r ? serverkit_reply_text(r) : "no answer");
    } else {
        o->value[0] = r->type == REDIS_REPLY_NIL ? 0 : atoll(r->str);
    }
    freeReplyObject(r);
    redisFree(c);
}

void runner_counter_reply(struct hist_op *o, const redisReply *r)
{
    if (r->type == REDIS_REPLY_ERROR) {
        o->status = HST_ERR_REPLY;
        snprintf(o->err, sizeof o->err, "%.100s", r->str);
    } else if (o->kind == HOP_INCR && r->type == REDIS_REPLY_INTEGER) {
        o->value[0] = r->integer;
    } else if (o->kind == HOP_GET && r->type == REDIS_REPLY_NIL) {
        o->value[0] = 0;
    } else if (o->kind == HOP_GET && r->type == REDIS_REPLY_STRING) {
        char *end;
        o->value[0] = strtoll(r->str, &end, 10);
        if (*end != '\0' || o->value[0] < 0) {
            o->status = HST_BAD;
            snprintf(o->err, sizeof o->err, "GET: not a counter: %.80s", r->str);
        }
    } else {
        o->status = HST_BAD;
        snprintf(o->err, sizeof o->err, "%s: unexpected reply type %d", hist_op_name(o->kind), r->type);
    }
}

void runner_write_history(const char *path, const struct history *h)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) return;
    fprintf(f, "# op\tstart_us\tend_us\tnode\tthread\tkind\tkey\tvalue\tstatus\tfinal\terror\n");
    for (size_t i = 0; i < h->nops; i++) {
        const struct hist_op *o = &h->ops[i];
        fprintf(f, "%zu\t%lld\t%lld\t%s\t%d\t%s\t%s\t%lld\t%s\t%d\t%s\n", i, o->start_us, o->end_us,
                o->node == HIST_DIRECT ? "backend" : h->node_names[o->node], o->thread, hist_op_name(o->kind),
                h->key_names[o->key[0]], o->value[0], hist_status_name(o->status), o->final, o->err);
    }
    fprintf(f, "# fault\tstart_us\tend_us\tnode\tkind\twhat\n");
    for (size_t i = 0; i < h->nfaults; i++)
        fprintf(f, "F%zu\t%lld\t%lld\t%s\t%s\t%s\n", i, h->faults[i].start_us, h->faults[i].end_us,
                h->faults[i].node == HIST_GLOBAL ? "all" : h->node_names[h->faults[i].node],
                hist_fault_name(h->faults[i].kind), h->faults[i].what);
    fclose(f);
}

void runner_print_error_texts(const struct history *h)
{
    enum { MAX_TEXTS = 64 };
    static char text[MAX_TEXTS][88];
    static long long count[MAX_TEXTS];
    int n = 0;
    long long other = 0;
    for (size_t i = 0; i < h->nops; i++) {
        const struct hist_op *o = &h->ops[i];
        if (o->status == HST_OK) continue;
        char t[88];
        ssize_t last = -1;
        for (size_t f = 0; f < h->nfaults; f++)
            if (h->faults[f].start_us <= o->end_us) last = (ssize_t)f;
        size_t k = (size_t)snprintf(t, sizeof t, "%-13s ", last >= 0 ? hist_fault_name(h->faults[last].kind) : "none");
        for (const char *c = o->err; *c && k + 1 < sizeof t; c++)
            if (!(*c >= '0' && *c <= '9') || k == 0 || t[k - 1] != 'N') t[k++] = *c >= '0' && *c <= '9' ? 'N' : *c;
        t[k] = '\0';
        int j = 0;
        while (j < n && strcmp(text[j], t) != 0) j++;
        if (j == n && n == MAX_TEXTS) {
            other++;
            continue;
        }
        if (j == n) snprintf(text[n++], sizeof text[0], "%s", t);
        count[j]++;
    }
    printf("chaos: client errors by the last fault before them and text (N: digits):%s\n", n ? "" : " none");
    for (int shown = 0; shown < 12 && shown < n; shown++) {
        int best = 0;
        for (int j = 1; j < n; j++)
            if (count[j] > count[best]) best = j;
        printf("  %8lld  %s\n", count[best], text[best]);
        count[best] = -1;
    }
    if (other) printf("  %8lld  (other texts)\n", other);
}

int runner_faults_parse(const char *text, const int *kinds, int n, unsigned opt_in, const char *topology,
                        const char *names, unsigned *faults, char *faults_text, size_t len)
{
    *faults = 0;
    if (text == NULL || *text == '\0' || strcmp(text, "all") == 0) {
        for (int i = 0; i < n; i++)
            if (!(opt_in & (1u << kinds[i]))) *faults |= 1u << kinds[i];
    } else if (strcmp(text, "none") != 0) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", text);
        for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
            int found = -1;
            for (int i = 0; i < n; i++)
                if (strcmp(w, hist_fault_name(kinds[i])) == 0) found = kinds[i];
            if (found < 0) {
                fprintf(stderr, "chaos: TOPOLOGY=%s: unknown fault '%s' (%s)\n", topology, w, names);
                return -1;
            }
            *faults |= 1u << found;
        }
    }
    size_t used = 0;
    faults_text[0] = '\0';
    for (int i = 0; i < n; i++)
        if (*faults & (1u << kinds[i]))
            used +=
                (size_t)snprintf(faults_text + used, len - used, "%s%s", used ? "," : "", hist_fault_name(kinds[i]));
    if (*faults == 0) snprintf(faults_text, len, "none");
    return 0;
}

/* The history of the n + 1 client logs (clients: stride bytes each, a struct runner_client first) with sc's
 * faults (h: the rest filled), its operations moved into one array sorted by start time (*ops_out: the caller
 * frees it), written to <dir>/history.tsv, checked (res: the caller frees it) and printed. The violations, or -1
 * (runner_fail). */
static ssize_t runner_judge(void *clients, size_t stride, int n, struct history *h, const struct runner_schedule *sc,
                            const char *dir, const struct check_params *params, long long load_end_us,
                            const char *load_extra, const int *kinds, int nkinds, unsigned faults,
                            const char *note_what, size_t max_print, struct check_result *res, struct hist_op **ops_out)
{
    size_t total = 0, k = 0;
    for (int i = 0; i <= n; i++) total += client_at(clients, stride, i)->log.n;
    struct hist_op *ops = malloc((total + 1) * sizeof *ops);
    if (ops == NULL) {
        runner_fail("out of memory for the history");
        return -1;
    }
    for (int i = 0; i <= n; i++) {
        struct oplog *l = &client_at(clients, stride, i)->log;
        memcpy(ops + k, l->ops, l->n * sizeof *ops);
        k += l->n;
        free(l->ops);
        l->ops = NULL;
    }
    *ops_out = ops;
    qsort(ops, k, sizeof *ops, runner_by_start_time);
    h->ops = ops;
    h->nops = k;
    h->faults = sc->faults;
    h->nfaults = (size_t)sc->nfaults;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/history.tsv", dir);
    runner_write_history(path, h);
    ssize_t nv = check_history(h, params, res);
    printf("chaos: load ran %.1f s: %zu operations, %.0f ops/s%s\n", load_end_us / 1e6, h->nops,
           h->nops / (load_end_us / 1e6), load_extra);
    printf("chaos: faults run:");
    for (int i = 0; i < nkinds; i++)
        if (faults & (1u << kinds[i])) printf(" %s %d", hist_fault_name(kinds[i]), sc->count[kinds[i]]);
    printf("\n");
    if (nv < 0) {
        runner_fail("the checker ran out of memory");
        return -1;
    }
    check_print_summary(stdout, h, res);
    runner_print_error_texts(h);
    long long planned = 0;
    for (int key = 0; res->counter != NULL && key < h->nkeys; key++)
        if (h->key_kind[key] == HIST_KEY_COUNTER_ASYNC) /* the replicated counters' losses are violations: below */
            planned += res->counter[key].lost_planned > res->counter[key].dup_planned ? res->counter[key].lost_planned
                                                                                      : res->counter[key].dup_planned;
    if (planned > 0)
        printf("chaos: NOTE (SEED=%llu): %lld acknowledged increments of %s: not a violation of the documented "
               "guarantee, but a planned failover should lose nothing; see the loss events above\n",
               runner.seed, planned, note_what);
    for (size_t i = 0; i < res->nviol && i < max_print; i++) {
        printf("--- violation %zu of %zu (SEED=%llu) ---\n", i + 1, res->nviol, runner.seed);
        check_print_violation(stdout, h, params, &res->viol[i]);
    }
    if (res->nviol > max_print) printf("--- and %zu more (the whole history: %s) ---\n", res->nviol - max_print, path);
    return nv;
}

/* Whether the run failed: failed (the checker's verdict), a harness failure, or keygates that ended badly after
 * SIGTERM (said). 1 or 0. */
static int runner_failed(int failed)
{
    if (runner.crashes > 0)
        printf("chaos: %d keygate%s ended badly after SIGTERM\n", runner.crashes, runner.crashes > 1 ? "s" : "");
    return failed || runner.failure[0] != '\0' || runner.crashes > 0;
}

/* The run's end after the deployment's stop: a server left running is a failure; then the time it took, the
 * verdict and "N passed, N failed". Returns failed (1 or 0). */
static int runner_report(int failed, const char *topology, int duration_s, const char *faults_text, size_t nviol,
                         const char *dir, long long wall0_ms)
{
    if (procs_leftovers() != 0) {
        runner_fail("servers still run after the stop");
        failed = 1;
    }
    printf("chaos: run took %.1f s\n", (procs_mono_ms() - wall0_ms) / 1000.0);
    if (failed) {
        if (runner.failure[0]) printf("chaos: HARNESS FAILURE: %s\n", runner.failure);
        printf("chaos: FAILED with SEED=%llu DURATION=%d FAULTS=%s: %zu violations (reproduce: make test-chaos "
               "TOPOLOGY=%s SEED=%llu DURATION=%d FAULTS=%s); files kept in %s\n",
               runner.seed, duration_s, faults_text, nviol, topology, runner.seed, duration_s, faults_text, dir);
    } else {
        printf("chaos: PASSED with SEED=%llu\n", runner.seed);
    }
    printf("%d passed, %d failed\n", failed ? 0 : 1, failed ? 1 : 0);
    return failed;
}

int runner_opts_read(struct runner_opts *o, const struct chaos_common *c, int clients, const int *kinds, int nkinds,
                     unsigned opt_in, const char *topology, const char *names)
{
    o->seed = runner.seed = c->seed;
    o->duration_s = c->duration_s;
    runner.keygate_bin = c->keygate_bin;
    o->keep = c->keep;
    o->p = c->p;
    const char *v = getenv("CHAOS_CLIENTS");
    o->clients = v != NULL && atoi(v) > 0 ? atoi(v) : clients;
    return runner_faults_parse(c->faults, kinds, nkinds, opt_in, topology, names, &o->faults, o->faults_text,
                               sizeof o->faults_text);
}

int runner_main(const struct runner_topology *t)
{
    runner_plan_make(t->sc, t->o->seed ^ t->salt, t->kinds, t->nkinds, t->o->faults, t->o->duration_s, t->draw);
    runner_plan_print(t->sc, t->settles);
    long long wall0 = procs_mono_ms();
    runner.t0_us = runner_mono_us();
    int failed = 1;
    struct check_result res = {0};
    struct hist_op *ops = NULL;
    if (t->start() == 0) {
        runner.t0_us = runner_mono_us();
        int n = t->nodes * t->o->clients;
        char *clients = calloc((size_t)n + 1, t->client_size);
        if (clients == NULL) {
            runner_fail("out of memory");
        } else {
            for (int i = 0; i < n; i++) {
                struct runner_client *cl = client_at(clients, t->client_size, i);
                cl->id = i;
                cl->node = i % t->nodes;
                cl->rng = runner.seed * 7919 + (unsigned long long)i;
                pthread_create(&cl->thread, NULL, t->client_main, cl);
            }
            struct runner_client *settler = client_at(clients, t->client_size, n);
            settler->id = n;
            /* in this thread: the servers it (re)starts are this thread's children (PR_SET_PDEATHSIG) */
            runner_nemesis(t->sc, t->o->duration_s, t->fault_run, t->heal);
            while (runner_now_us() < (long long)t->o->duration_s * 1000000 && runner.failure[0] == '\0')
                procs_nap_ms(50);
            __atomic_store_n(&runner.stop_clients, 1, __ATOMIC_RELEASE);
            for (int i = 0; i < n; i++) pthread_join(client_at(clients, t->client_size, i)->thread, NULL);
            long long load_end_us = runner_now_us();
            t->heal();
            t->finish(settler);
            char extra[64] = "";
            if (t->load_extra != NULL) t->load_extra(clients, n, extra, sizeof extra);
            struct history h = *t->keys;
            failed = runner_judge(clients, t->client_size, n, &h, t->sc, t->dir(), &t->o->p, load_end_us, extra,
                                  t->kinds, t->nkinds, t->o->faults, t->note_what, t->max_print, &res, &ops) != 0;
            free(clients);
        }
    }
    failed = runner_failed(failed);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", t->dir());
    t->stop(failed || t->o->keep);
    failed = runner_report(failed, t->name, t->o->duration_s, t->o->faults_text, res.nviol, dir, wall0);
    check_result_free(&res);
    free(ops);
    return failed ? 1 : 0;
}
