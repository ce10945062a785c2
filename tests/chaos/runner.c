/* runner.c: what the topologies of the fault harness's runner share: the clock, the seeded random numbers, planned pauses, a client's operation log, keygate processes, counter replies, the history file and the error summary. */
#include "runner.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "procs.h"
#include "serverkit.h"

long long runner_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
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

int runner_kg_spawn(struct runner_kg *k, const char *bin)
{
    char *argv[] = {(char *)bin, "-c", k->conf, NULL};
    k->pid = procs_spawn(argv, k->log, NULL, getpid(), getpgrp(), &k->start);
    if (k->pid < 0) {
        k->pid = 0;
        return -1;
    }
    return 0;
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
