/* load.c: the client load the cluster and Sentinel suites run through keygate (load.h). */
#include "load.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

struct load_thread load_threads[LOAD_THREADS];

static struct load_opts g_opts;
static volatile int g_stop;
static long long g_t0;
static long long g_mark = -1; /* errors in batches sent after this time count as errors_after_mark */

long long load_get(const long long *v)
{
    return __atomic_load_n(v, __ATOMIC_ACQUIRE);
}

static void load_set(long long *v, long long x)
{
    __atomic_store_n(v, x, __ATOMIC_RELEASE);
}

enum ld_kind { LD_SET, LD_INCR_N, LD_INCR_C, LD_GET, LD_GET_OLD, LD_MULTI, LD_QUEUED, LD_EXEC };

struct ld_cmd {
    enum ld_kind kind;
    long long i; /* the SET index a GET reads; the counter index of an INCR */
};

static void ld_error(struct load_thread *t, long long sent, int *batch_err, const char *what, const redisReply *r,
                     const char *errstr)
{
    t->errors++;
    if (r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "READONLY", 8) == 0) t->readonly++;
    if (!*batch_err && t->error_batches < 2) t->error_sent_ms[t->error_batches] = sent - g_t0;
    if (!*batch_err) t->error_batches++;
    *batch_err = 1;
    long long mark = __atomic_load_n(&g_mark, __ATOMIC_ACQUIRE);
    if (mark >= 0 && sent > mark) t->errors_after_mark++;
    if (t->first_error[0] == '\0') {
        char d[120];
        if (r != NULL)
            describe_into(r, d, sizeof d);
        else
            snprintf(d, sizeof d, "connection: %.80s", errstr);
        snprintf(t->first_error, sizeof t->first_error, "%s: %s", what, d);
        t->first_error_ms = now_ms() - g_t0;
    }
}

/* An INCR's answer: the count + 1, up to the errors that may have run; below it (from 1) is a
 * regression when the load is lossy, counted (the counter goes on from the count); then counted. */
static int ld_incr_ok(struct load_thread *t, long long *count, long long errs, const redisReply *r, const char *what)
{
    if (r->type != REDIS_REPLY_INTEGER || r->integer > *count + 1 + errs || r->integer < 1) return 0;
    if (r->integer < *count + 1) {
        if (!g_opts.lossy) return 0;
        if (t->regressions++ == 0)
            snprintf(t->first_regression, sizeof t->first_regression, "%s answered %lld after %lld acknowledged", what,
                     r->integer, *count);
    }
    load_set(count, *count + 1);
    return 1;
}

/* Append one batch for SET i to c; its commands in cmds. Returns how many. */
static int ld_batch(struct load_thread *t, redisContext *c, long long i, unsigned *seed, struct ld_cmd *cmds)
{
    int n = 0, j = (int)(i % LOAD_COUNTERS);
    redisAppendCommand(c, "SET c:ld:%d:%lld v%d:%lld", t->id, i, t->id, i);
    cmds[n++] = (struct ld_cmd){LD_SET, i};
    redisAppendCommand(c, "INCR n:ctr:%d:%d", t->id, j);
    cmds[n++] = (struct ld_cmd){LD_INCR_N, j};
    redisAppendCommand(c, "INCR c:ctr:%d:%d", t->id, j);
    cmds[n++] = (struct ld_cmd){LD_INCR_C, j};
    redisAppendCommand(c, "GET c:ld:%d:%lld", t->id, i);
    cmds[n++] = (struct ld_cmd){LD_GET, i};
    if (g_opts.reread && i > 0) {
        long long old = (long long)(rand_r(seed) % (unsigned)i);
        redisAppendCommand(c, "GET c:ld:%d:%lld", t->id, old);
        cmds[n++] = (struct ld_cmd){LD_GET_OLD, old};
    }
    if (i % 4 == 3) {
        char m[64];
        snprintf(m, sizeof m, g_opts.multi_key, t->id);
        redisAppendCommand(c, "MULTI");
        cmds[n++] = (struct ld_cmd){LD_MULTI, 0};
        redisAppendCommand(c, "INCR %s:ctr", m);
        cmds[n++] = (struct ld_cmd){LD_QUEUED, 0};
        redisAppendCommand(c, "SET %s:last %lld", m, i);
        cmds[n++] = (struct ld_cmd){LD_QUEUED, 0};
        redisAppendCommand(c, "EXEC");
        cmds[n++] = (struct ld_cmd){LD_EXEC, 0};
    }
    return n;
}

/* Check reply r of batch command cmd (sent at `sent`). *multi_bad: the transaction's MULTI or a
 * queued command failed. */
static void ld_check(struct load_thread *t, const struct ld_cmd *cmd, const redisReply *r, long long sent,
                     int *batch_err, int *multi_bad)
{
    char want[48];
    switch (cmd->kind) {
    case LD_SET:
        if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0)
            t->acked[cmd->i] = 1;
        else
            ld_error(t, sent, batch_err, "SET", r, NULL);
        break;
    case LD_INCR_N:
    case LD_INCR_C: {
        int w = cmd->kind == LD_INCR_C;
        long long *cnt = &t->incr[w][cmd->i], *err = &t->incr_err[w][cmd->i];
        const char *what = w ? "INCR c: (TTL-wrapped)" : "INCR n:";
        if (!ld_incr_ok(t, cnt, *err, r, what)) {
            if (r->type == REDIS_REPLY_ERROR) (*err)++;
            ld_error(t, sent, batch_err, what, r, NULL);
        }
        break;
    }
    case LD_GET:
    case LD_GET_OLD:
        t->gets++;
        snprintf(want, sizeof want, "v%d:%lld", t->id, cmd->i);
        if (r->type == REDIS_REPLY_STRING && strcmp(r->str, want) == 0) break;
        if (r->type == REDIS_REPLY_NIL && t->acked[cmd->i]) {
            if (t->lost_reads < 16) t->nil_reads[t->lost_reads] = cmd->i;
            t->lost_reads++; /* counted; the test decides (a failover may lose a write) */
        } else if (!(r->type == REDIS_REPLY_NIL && !t->acked[cmd->i]))
            ld_error(t, sent, batch_err, "GET", r, NULL);
        break;
    case LD_MULTI:
        if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "OK") != 0) {
            *multi_bad = 1;
            ld_error(t, sent, batch_err, "MULTI", r, NULL);
        }
        break;
    case LD_QUEUED:
        if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "QUEUED") != 0) {
            *multi_bad = 1;
            ld_error(t, sent, batch_err, "command in MULTI", r, NULL);
        }
        break;
    case LD_EXEC:
        if (!*multi_bad && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
            ld_incr_ok(t, &t->multi, t->multi_err, r->element[0], "EXEC's INCR") &&
            r->element[1]->type == REDIS_REPLY_STATUS)
            break;
        t->multi_err++;
        ld_error(t, sent, batch_err, "EXEC", r, NULL);
        break;
    }
}

static void *load_main(void *arg)
{
    struct load_thread *t = arg;
    unsigned seed = 7919u * (unsigned)t->id + 17u;
    redisContext *c = g_opts.connect();
    struct ld_cmd cmds[LOAD_MAX_BATCH];
    t->prev_done_ms = now_ms() - g_t0;
    while (!g_stop) {
        if (c == NULL || c->err) {
            if (c != NULL) redisFree(c);
            c = g_opts.connect();
            if (c == NULL) {
                int e = 0;
                ld_error(t, now_ms(), &e, "connect to keygate", NULL, "refused");
                sleep_ms(50);
                continue;
            }
        }
        long long i = t->sets;
        if ((size_t)i >= t->cap) {
            size_t cap = t->cap ? t->cap * 2 : 4096;
            unsigned char *a = realloc(t->acked, cap);
            if (a == NULL) break;
            memset(a + t->cap, 0, cap - t->cap);
            t->acked = a;
            t->cap = cap;
        }
        int n = ld_batch(t, c, i, &seed, cmds);
        t->sets++;
        long long sent = now_ms();
        int batch_err = 0, multi_bad = 0;
        for (int k = 0; k < n; k++) {
            redisReply *r = NULL;
            if (redisGetReply(c, (void **)&r) != REDIS_OK || r == NULL) {
                for (; k < n; k++) { /* the rest of the batch is lost with the connection */
                    if (cmds[k].kind == LD_INCR_N || cmds[k].kind == LD_INCR_C)
                        t->incr_err[cmds[k].kind == LD_INCR_C][cmds[k].i]++;
                    if (cmds[k].kind == LD_EXEC) t->multi_err++;
                    ld_error(t, sent, &batch_err, "reply", NULL, c->errstr);
                }
                break;
            }
            ld_check(t, &cmds[k], r, sent, &batch_err, &multi_bad);
            freeReplyObject(r);
        }
        long long done = now_ms() - g_t0;
        if (done - t->prev_done_ms > t->max_stall_ms) {
            t->max_stall_ms = done - t->prev_done_ms;
            t->stall_end_ms = done;
        }
        t->prev_done_ms = done;
        if (batch_err) t->last_error_done_ms = done;
        load_set(&t->sets_done, t->sets);
        load_set(&t->batches, t->batches + 1);
    }
    if (c != NULL) redisFree(c);
    return NULL;
}

void load_start(const struct load_opts *o)
{
    g_opts = *o;
    g_stop = 0;
    g_t0 = now_ms();
    __atomic_store_n(&g_mark, -1, __ATOMIC_RELEASE);
    for (int k = 0; k < LOAD_THREADS; k++) {
        memset(&load_threads[k], 0, sizeof load_threads[k]);
        load_threads[k].id = k;
        ck_assert_int_eq(pthread_create(&load_threads[k].thread, NULL, load_main, &load_threads[k]), 0);
    }
}

void load_wait_batches(int more, int timeout_ms, const char *what)
{
    long long base[LOAD_THREADS];
    for (int k = 0; k < LOAD_THREADS; k++) base[k] = load_get(&load_threads[k].batches);
    long long deadline = now_ms() + timeout_ms;
    for (int k = 0; k < LOAD_THREADS; k++) {
        while (load_get(&load_threads[k].batches) < base[k] + more) {
            ck_assert_msg(now_ms() < deadline, "%s: thread %d completed %lld of %d batches in %d ms", what, k,
                          load_get(&load_threads[k].batches) - base[k], more, timeout_ms);
            sleep_ms(5);
        }
    }
}

void load_mark(void)
{
    __atomic_store_n(&g_mark, now_ms(), __ATOMIC_RELEASE);
}

long long load_elapsed_ms(void)
{
    return now_ms() - g_t0;
}

void load_stop(void)
{
    g_stop = 1;
    for (int k = 0; k < LOAD_THREADS; k++) pthread_join(load_threads[k].thread, NULL);
}

void load_free(void)
{
    for (int k = 0; k < LOAD_THREADS; k++) {
        free(load_threads[k].acked);
        load_threads[k].acked = NULL;
        load_threads[k].cap = 0;
    }
}

struct load_sum load_sum(void)
{
    struct load_sum s = {0};
    for (int k = 0; k < LOAD_THREADS; k++) {
        struct load_thread *t = &load_threads[k];
        s.batches += t->batches;
        s.sets += t->sets;
        for (long long i = 0; i < t->sets; i++) s.acked += t->acked[i];
        for (int w = 0; w < 2; w++)
            for (int j = 0; j < LOAD_COUNTERS; j++) s.incrs += t->incr[w][j];
        s.multis += t->multi;
        s.gets += t->gets;
        s.lost_reads += t->lost_reads;
        s.regressions += t->regressions;
        s.readonly += t->readonly;
        s.errors += t->errors;
        s.errors_after_mark += t->errors_after_mark;
        if (t->error_batches > s.max_error_batches) s.max_error_batches = t->error_batches;
        if (t->max_stall_ms > s.max_stall_ms) {
            s.max_stall_ms = t->max_stall_ms;
            s.stall_end_ms = t->stall_end_ms;
        }
        if (t->last_error_done_ms > s.last_error_done_ms) s.last_error_done_ms = t->last_error_done_ms;
        if (t->errors > 0)
            fprintf(stderr,
                    "  thread %d: %lld error(s) in %lld batch(es) sent at %lld ms%s%.0lld, the first answered at %lld "
                    "ms: %s\n",
                    k, t->errors, t->error_batches, t->error_sent_ms[0], t->error_batches > 1 ? " and " : "",
                    t->error_batches > 1 ? t->error_sent_ms[1] : 0, t->first_error_ms, t->first_error);
        if (t->regressions > 0)
            fprintf(stderr, "  thread %d: %lld INCR(s) answered below the count, the first: %s\n", k, t->regressions,
                    t->first_regression);
    }
    return s;
}

void load_snap_take(struct load_snap *snap)
{
    for (int k = 0; k < LOAD_THREADS; k++) {
        snap->sets_done[k] = load_get(&load_threads[k].sets_done);
        snap->multi[k] = load_get(&load_threads[k].multi);
        for (int w = 0; w < 2; w++)
            for (int j = 0; j < LOAD_COUNTERS; j++) snap->incr[k][w][j] = load_get(&load_threads[k].incr[w][j]);
    }
}

char *load_counter_key(int id, int m)
{
    char *k;
    if (m == 2 * LOAD_COUNTERS) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, g_opts.multi_key, id);
        ck_assert(asprintf(&k, "%s:ctr", prefix) > 0);
    } else {
        ck_assert(asprintf(&k, "%s:ctr:%d:%d", m >= LOAD_COUNTERS ? "c" : "n", id, m % LOAD_COUNTERS) > 0);
    }
    return k;
}

long long load_counter_acked(const struct load_thread *t, int m)
{
    return m < 2 * LOAD_COUNTERS ? t->incr[m / LOAD_COUNTERS][m % LOAD_COUNTERS] : t->multi;
}

long long load_counter_errors(const struct load_thread *t, int m)
{
    return m < 2 * LOAD_COUNTERS ? t->incr_err[m / LOAD_COUNTERS][m % LOAD_COUNTERS] : t->multi_err;
}

long long load_snap_counter(const struct load_snap *snap, int k, int m)
{
    return m < 2 * LOAD_COUNTERS ? snap->incr[k][m / LOAD_COUNTERS][m % LOAD_COUNTERS] : snap->multi[k];
}

char **load_acked_set_keys(long long *n)
{
    long long total = 0;
    for (int k = 0; k < LOAD_THREADS; k++)
        for (long long i = 0; i < load_threads[k].sets; i++) total += load_threads[k].acked[i];
    char **keys = malloc(sizeof *keys * (size_t)(total + 1));
    ck_assert(keys != NULL);
    long long x = 0;
    for (int k = 0; k < LOAD_THREADS; k++)
        for (long long i = 0; i < load_threads[k].sets; i++)
            if (load_threads[k].acked[i]) ck_assert(asprintf(&keys[x++], "c:ld:%d:%lld", k, i) > 0);
    *n = x;
    return keys;
}
