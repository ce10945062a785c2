/* checker.c: the chaos run's history checker (rules in checker.h): per-key indexes of acknowledged and invoked writes, then every operation judged against them. */
#include "checker.h"

#include <stdlib.h>
#include <string.h>

/* ---- names ---- */

const char *hist_op_name(int kind)
{
    static const char *const names[HOP_NKINDS] = {"SET",  "HSET",    "MULTI/SADD/SREM", "GET",      "MGET",
                                                  "HGET", "HGETALL", "SISMEMBER",       "SMEMBERS", "INCR"};
    return kind >= 0 && kind < HOP_NKINDS ? names[kind] : "?";
}

const char *hist_status_name(int status)
{
    static const char *const names[HST_NKINDS] = {"ok", "error-reply", "timeout", "connection", "bad-reply"};
    return status >= 0 && status < HST_NKINDS ? names[status] : "?";
}

const char *hist_fault_name(int kind)
{
    static const char *const names[HF_NKINDS] = {"stop",     "kill-stream",  "del-stream",   "trim-stream",
                                                 "restart",  "slow-link",    "reload",       "wrongtype-stream",
                                                 "failover", "kill-primary", "stop-primary", "stop-sentinel",
                                                 "reshard",  "add-node",     "dead-slots"};
    return kind >= 0 && kind < HF_NKINDS ? names[kind] : "?";
}

int hist_op_is_write(int kind)
{
    return kind == HOP_SET || kind == HOP_HSET || kind == HOP_SADD || kind == HOP_INCR;
}

const char *check_rule_name(int rule)
{
    static const char *const names[CR_NRULES] = {"STALE", "FUTURE", "LOST", "ERROR", "BAD", "DUP"};
    return rule >= 0 && rule < CR_NRULES ? names[rule] : "?";
}

struct check_params check_default_params(void)
{
    struct check_params p = {.bound_us = 100000,
                             .fault_bound_us = 1100000,
                             .fault_tail_us = 100000,
                             .error_grace_us = 1000000,
                             .same_keygate_bound_us = -1,
                             .set_window = 64};
    return p;
}

int check_fault_explains(int fault_kind, int status)
{
    if (status == HST_OK || status == HST_BAD) return 0;
    switch (fault_kind) {
    case HF_STOP:
        return status == HST_ERR_TIMEOUT || status == HST_ERR_CONN;
    case HF_RESTART:
    case HF_FAILOVER:
    case HF_KILL_PRIMARY:
    case HF_STOP_PRIMARY:
    case HF_DEAD_SLOTS:
        return 1;
    case HF_SLOW_LINK:
        return status == HST_ERR_TIMEOUT;
    case HF_WRONGTYPE_STREAM:
        return status == HST_ERR_REPLY; /* a write whose XADD failed may be refused */
    default:
        return 0;
    }
}

/* ---- per-key indexes ---- */

/* One key's writes: the acknowledged ones by end time (with the running maximum of their
 * sequence numbers), all of them by start time (likewise), and all of them by sequence number. */
struct key_index {
    size_t nacked, nall;
    long long *acked_end, *acked_max;
    size_t *acked_max_op;
    long long *all_start, *all_max;
    size_t *by_seq; /* op indexes sorted by value[0] */
};

static const struct hist_op *g_sort_ops; /* qsort's context: the history being indexed */

static int by_end(const void *a, const void *b)
{
    const struct hist_op *x = &g_sort_ops[*(const size_t *)a], *y = &g_sort_ops[*(const size_t *)b];
    return x->end_us < y->end_us ? -1 : x->end_us > y->end_us;
}

static int by_start(const void *a, const void *b)
{
    const struct hist_op *x = &g_sort_ops[*(const size_t *)a], *y = &g_sort_ops[*(const size_t *)b];
    return x->start_us < y->start_us ? -1 : x->start_us > y->start_us;
}

static int by_seq(const void *a, const void *b)
{
    const struct hist_op *x = &g_sort_ops[*(const size_t *)a], *y = &g_sort_ops[*(const size_t *)b];
    return x->value[0] < y->value[0] ? -1 : x->value[0] > y->value[0];
}

static void key_index_free(struct key_index *k)
{
    free(k->acked_end);
    free(k->acked_max);
    free(k->acked_max_op);
    free(k->all_start);
    free(k->all_max);
    free(k->by_seq);
}

#define ANY_NODE (-2)

/* Build the index of key `key`'s writes through keygate `node` (ANY_NODE: all). 0, or -1 when out of memory.
 * (Not thread-safe: qsort's context.) */
static int key_index_build(const struct history *h, int key, int node, struct key_index *k)
{
    memset(k, 0, sizeof *k);
    for (size_t i = 0; i < h->nops; i++) {
        const struct hist_op *o = &h->ops[i];
        if (!hist_op_is_write(o->kind) || o->nkeys < 1 || o->key[0] != key) continue;
        if (node != ANY_NODE && o->node != node) continue;
        k->nall++;
        if (o->status == HST_OK) k->nacked++;
    }
    size_t *acked = malloc((k->nacked + 1) * sizeof *acked), *all = malloc((k->nall + 1) * sizeof *all);
    k->acked_end = malloc((k->nacked + 1) * sizeof *k->acked_end);
    k->acked_max = malloc((k->nacked + 1) * sizeof *k->acked_max);
    k->acked_max_op = malloc((k->nacked + 1) * sizeof *k->acked_max_op);
    k->all_start = malloc((k->nall + 1) * sizeof *k->all_start);
    k->all_max = malloc((k->nall + 1) * sizeof *k->all_max);
    k->by_seq = malloc((k->nall + 1) * sizeof *k->by_seq);
    if (!acked || !all || !k->acked_end || !k->acked_max || !k->acked_max_op || !k->all_start || !k->all_max ||
        !k->by_seq) {
        free(acked);
        free(all);
        key_index_free(k);
        return -1;
    }
    size_t na = 0, nl = 0;
    for (size_t i = 0; i < h->nops; i++) {
        const struct hist_op *o = &h->ops[i];
        if (!hist_op_is_write(o->kind) || o->nkeys < 1 || o->key[0] != key) continue;
        if (node != ANY_NODE && o->node != node) continue;
        all[nl++] = i;
        if (o->status == HST_OK) acked[na++] = i;
    }
    g_sort_ops = h->ops;
    qsort(acked, na, sizeof *acked, by_end);
    qsort(all, nl, sizeof *all, by_start);
    memcpy(k->by_seq, all, nl * sizeof *all);
    qsort(k->by_seq, nl, sizeof *k->by_seq, by_seq);
    long long max = 0;
    size_t max_op = 0;
    for (size_t i = 0; i < na; i++) {
        const struct hist_op *o = &h->ops[acked[i]];
        if (o->value[0] > max) {
            max = o->value[0];
            max_op = acked[i];
        }
        k->acked_end[i] = o->end_us;
        k->acked_max[i] = max;
        k->acked_max_op[i] = max_op;
    }
    max = 0;
    for (size_t i = 0; i < nl; i++) {
        const struct hist_op *o = &h->ops[all[i]];
        if (o->value[0] > max) max = o->value[0];
        k->all_start[i] = o->start_us;
        k->all_max[i] = max;
    }
    free(acked);
    free(all);
    return 0;
}

/* How many of the n sorted times t[] are < bound. */
static size_t count_below(const long long *t, size_t n, long long bound)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid] < bound)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The newest sequence number acknowledged before time t (0: none), and its write in *op (-1). */
static long long required_before(const struct key_index *k, long long t, ssize_t *op)
{
    size_t n = count_below(k->acked_end, k->nacked, t);
    *op = n == 0 ? -1 : (ssize_t)k->acked_max_op[n - 1];
    return n == 0 ? 0 : k->acked_max[n - 1];
}

/* The newest sequence number acknowledged at all (0: none). */
static long long last_acked(const struct key_index *k, ssize_t *op)
{
    *op = k->nacked == 0 ? -1 : (ssize_t)k->acked_max_op[k->nacked - 1];
    return k->nacked == 0 ? 0 : k->acked_max[k->nacked - 1];
}

/* The largest sequence number of a write invoked (sent) before time t (0: none). */
static long long invoked_before(const struct key_index *k, long long t)
{
    size_t n = count_below(k->all_start, k->nall, t);
    return n == 0 ? 0 : k->all_max[n - 1];
}

/* The write of sequence number seq, or -1. */
static ssize_t write_of(const struct history *h, const struct key_index *k, long long seq)
{
    size_t lo = 0, hi = k->nall;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        long long v = h->ops[k->by_seq[mid]].value[0];
        if (v == seq) return (ssize_t)k->by_seq[mid];
        if (v < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* ---- faults ---- */

static int touches(const struct hist_fault *f, int node)
{
    return f->node == HIST_GLOBAL || f->node == node;
}

/* Does [s, e] overlap fault f's window, extended `after` past its end? */
static int overlaps(const struct hist_fault *f, long long s, long long e, long long after)
{
    return f->start_us <= e && f->end_us + after >= s;
}

static int in_fault_window(const struct history *h, const struct check_params *p, const struct hist_op *o)
{
    for (size_t i = 0; i < h->nfaults; i++)
        if (touches(&h->faults[i], o->node) && overlaps(&h->faults[i], o->start_us, o->end_us, p->fault_tail_us))
            return 1;
    return 0;
}

/* The fault a violation of o is attributed to (see struct check_violation), *active set. */
static ssize_t attribute(const struct history *h, const struct check_params *p, const struct hist_op *o, int *active)
{
    ssize_t last = -1;
    *active = 0;
    for (size_t i = 0; i < h->nfaults; i++) {
        const struct hist_fault *f = &h->faults[i];
        if (!touches(f, o->node)) continue;
        if (overlaps(f, o->start_us, o->end_us, p->fault_tail_us)) {
            *active = 1;
            return (ssize_t)i;
        }
        if (f->end_us < o->start_us && (last < 0 || f->end_us > h->faults[last].end_us)) last = (ssize_t)i;
    }
    return last;
}

/* ---- the check ---- */

struct viol_list {
    struct check_violation *v;
    size_t n, cap;
};

static int add_viol(struct viol_list *l, const struct check_violation *v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        struct check_violation *nv = realloc(l->v, cap * sizeof *nv);
        if (nv == NULL) return -1;
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = *v;
    return 0;
}

/* The latest time write w may have taken effect: its end when acknowledged; for an indeterminate one (an error
 * or a timeout), the end of the window of the fault that explains its error (or its own end, when none does), plus
 * error_grace_us: a request a frozen keygate still holds is executed when it is continued, after the client gave up
 * and its writer moved on. */
static long long apply_deadline(const struct history *h, const struct check_params *p, size_t w)
{
    const struct hist_op *o = &h->ops[w];
    if (o->status == HST_OK) return o->end_us;
    long long d = o->end_us;
    for (size_t f = 0; f < h->nfaults; f++) {
        const struct hist_fault *x = &h->faults[f];
        if (touches(x, o->node) && check_fault_explains(x->kind, o->status) &&
            overlaps(x, o->start_us, o->end_us, p->error_grace_us) && x->end_us > d)
            d = x->end_us;
    }
    return d + p->error_grace_us;
}

/* May indeterminate write w have taken effect after write r began (so that its older value is the newest)? */
static int applied_late(const struct history *h, const struct check_params *p, ssize_t w, ssize_t r)
{
    return w >= 0 && r >= 0 && h->ops[w].status != HST_OK && apply_deadline(h, p, (size_t)w) >= h->ops[r].start_us;
}

/* Judge the value in slot `slot` of read o (index i); appends a violation to l when one is found. */
static int check_read_value(const struct history *h, const struct check_params *p, const struct key_index *ks,
                            const struct key_index *ks_node, size_t i, int slot, int windowed, struct viol_list *l,
                            struct check_result *r)
{
    const struct hist_op *o = &h->ops[i];
    const struct key_index *k = &ks[o->key[slot]];
    long long bound = windowed ? p->fault_bound_us : p->bound_us;
    struct check_violation v =
        {.op = i, .slot = slot, .got = o->value[slot], .bound_us = bound, .required_op = -1, .got_op = -1, .fault = -1};
    long long invoked = invoked_before(k, o->end_us);
    r->read_values++;
    if (o->kind == HOP_SISMEMBER) {
        long long x = o->arg;
        v.required = required_before(k, o->start_us - bound, &v.required_op);
        if (o->value[slot] == 1) {
            v.got_op = write_of(h, k, x);
            if (x > invoked) {
                v.rule = CR_FUTURE;
            } else if (x >= v.required) {
                r->checked += v.required > 0;
                r->trivial += v.required == 0;
                if (windowed) r->in_fault_window++;
                return 0;
            } else {
                r->inconclusive++;
                return 0;
            }
        } else {
            if (invoked >= x + p->set_window || x > v.required) {
                r->inconclusive++;
                return 0;
            }
            ssize_t wx = write_of(h, k, x);
            for (size_t j = 0; j < k->nall; j++) {
                size_t w = k->by_seq[j];
                if (h->ops[w].value[0] >= x) break;
                if (applied_late(h, p, (ssize_t)w, wx)) {
                    r->late_applied++; /* an older indeterminate write may have landed after x */
                    return 0;
                }
            }
            r->checked++;
            if (windowed) r->in_fault_window++;
            v.rule = CR_STALE; /* the set is older than x, and x <= required */
        }
    } else {
        long long got = o->value[slot];
        v.got_op = got > 0 ? write_of(h, k, got) : -1;
        if (got > invoked || (got > 0 && v.got_op < 0)) {
            v.rule = CR_FUTURE;
        } else if (o->final) {
            v.required = last_acked(k, &v.required_op);
            v.bound_us = 0;
            r->checked += v.required > 0;
            r->trivial += v.required == 0;
            if (got >= v.required) return 0;
            if (applied_late(h, p, v.got_op, v.required_op)) {
                r->late_applied++;
                return 0;
            }
            v.rule = CR_LOST;
        } else {
            v.required = required_before(k, o->start_us - bound, &v.required_op);
            r->checked += v.required > 0;
            r->trivial += v.required == 0;
            if (windowed) r->in_fault_window++;
            if (got >= v.required && ks_node != NULL && !windowed && o->node >= 0 && o->node < h->nnodes) {
                /* the optional rule: the writes this keygate acknowledged itself, with their own bound */
                const struct key_index *kn = &ks_node[o->key[slot] * h->nnodes + o->node];
                v.bound_us = p->same_keygate_bound_us;
                v.required = required_before(kn, o->start_us - v.bound_us, &v.required_op);
                if (got < v.required) v.same_keygate = 1;
            }
            if (got >= v.required) return 0;
            if (applied_late(h, p, v.got_op, v.required_op)) {
                r->late_applied++;
                return 0;
            }
            v.rule = CR_STALE;
        }
    }
    v.fault = attribute(h, p, o, &v.fault_active);
    return add_viol(l, &v);
}

/* ---- counter keys (the Sentinel topology: INCR, GET) ---- */

static int by_viol_op(const void *a, const void *b)
{
    const struct check_violation *x = a, *y = b;
    if (x->op != y->op) return x->op < y->op ? -1 : 1;
    if (x->slot != y->slot) return x->slot < y->slot ? -1 : 1;
    return x->required > y->required ? -1 : x->required < y->required; /* qsort is not stable: one order */
}

static int is_counter(const struct history *h, int key)
{
    return h->key_kind != NULL && key >= 0 && key < h->nkeys && h->key_kind[key] != HIST_KEY_SEQ;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

static int by_reply_then_start(const void *a, const void *b)
{
    const struct hist_op *x = &g_sort_ops[*(const size_t *)a], *y = &g_sort_ops[*(const size_t *)b];
    if (x->value[0] != y->value[0]) return x->value[0] < y->value[0] ? -1 : 1;
    return x->start_us < y->start_us ? -1 : x->start_us > y->start_us;
}

/* The last fault that started before t, or -1. */
static ssize_t last_started_before(const struct history *h, long long t)
{
    ssize_t last = -1;
    for (size_t i = 0; i < h->nfaults; i++)
        if (h->faults[i].start_us < t && (last < 0 || h->faults[i].start_us >= h->faults[last].start_us))
            last = (ssize_t)i;
    return last;
}

/* Is a loss of acknowledged increments on a key without replicas= expected after a fault of this kind? */
static int loss_expected_after(int fault_kind)
{
    return fault_kind == HF_KILL_PRIMARY || fault_kind == HF_STOP_PRIMARY || fault_kind == HF_DEAD_SLOTS;
}

/* The counter rules (checker.h) for counter key `key`: its sums into r->counter[key], its loss events into r,
 * violations into l. 0, or -1 when out of memory. */
static int check_counter(const struct history *h, const struct check_params *p, int key, struct viol_list *l,
                         struct check_result *r)
{
    struct check_counter_sum *c = &r->counter[key];
    size_t n = 0, nacked = 0, ninv = 0;
    for (size_t i = 0; i < h->nops; i++) {
        const struct hist_op *o = &h->ops[i];
        if (o->nkeys < 1 || o->key[0] != key || (o->kind != HOP_INCR && o->kind != HOP_GET)) continue;
        n++;
        if (o->kind == HOP_INCR) {
            ninv++;
            nacked += o->status == HST_OK;
        }
    }
    size_t *ops = malloc((n + 1) * sizeof *ops);
    long long *acked_end = malloc((nacked + 1) * sizeof *acked_end),
              *inv_start = malloc((ninv + 1) * sizeof *inv_start), *replies = malloc((nacked + 1) * sizeof *replies);
    size_t *acked_ops = malloc((nacked + 1) * sizeof *acked_ops);
    if (ops == NULL || acked_end == NULL || inv_start == NULL || replies == NULL || acked_ops == NULL) {
        free(acked_ops);
        free(ops);
        free(acked_end);
        free(inv_start);
        free(replies);
        return -1;
    }
    size_t k = 0, a = 0, v = 0;
    for (size_t i = 0; i < h->nops; i++) {
        const struct hist_op *o = &h->ops[i];
        if (o->nkeys < 1 || o->key[0] != key || (o->kind != HOP_INCR && o->kind != HOP_GET)) continue;
        ops[k++] = i;
        if (o->kind != HOP_INCR) continue;
        inv_start[v++] = o->start_us;
        if (o->status == HST_OK) {
            acked_end[a] = o->end_us;
            acked_ops[a] = i;
            replies[a++] = o->value[0];
        }
    }
    g_sort_ops = h->ops;
    qsort(ops, n, sizeof *ops, by_start);
    qsort(acked_end, nacked, sizeof *acked_end, cmp_ll);
    qsort(inv_start, ninv, sizeof *inv_start, cmp_ll);
    qsort(replies, nacked, sizeof *replies, cmp_ll);
    c->acked = (long long)nacked;
    c->indeterminate = (long long)(ninv - nacked);
    c->final_value = -1;
    int replicated = h->key_kind[key] == HIST_KEY_COUNTER_REPLICATED, rc = 0;
    /* two acknowledged INCRs with one reply: the counter passed that value twice, one increment was lost between */
    for (size_t i = 1; i < nacked; i++) c->dup_replies += replies[i] == replies[i - 1];
    /* and the ones whose later INCR followed a planned failover */
    qsort(acked_ops, nacked, sizeof *acked_ops, by_reply_then_start);
    for (size_t i = 1; i < nacked; i++) {
        const struct hist_op *x = &h->ops[acked_ops[i - 1]], *y = &h->ops[acked_ops[i]];
        if (x->value[0] != y->value[0]) continue;
        ssize_t f = last_started_before(h, y->start_us);
        c->dup_planned += f >= 0 && h->faults[f].kind == HF_FAILOVER;
    }
    /* the final reads last (they run after the load, but a slow client's op may start later than the first) */
    long long running = 0; /* D's running maximum */
    for (int pass = 0; pass < 2 && rc == 0; pass++)
        for (size_t j = 0; j < n && rc == 0; j++) {
            size_t i = ops[j];
            const struct hist_op *o = &h->ops[i];
            if (o->final != pass || o->status != HST_OK) continue;
            long long shown = o->value[0];
            long long state = o->kind == HOP_INCR ? shown - 1 : shown;
            long long acked_before = (long long)count_below(acked_end, nacked, o->start_us);
            long long invoked = (long long)count_below(inv_start, ninv, o->end_us);
            c->checked++;
            if (o->final) c->final_value = shown;
            struct check_violation x = {.op = i, .got = shown, .required_op = -1, .got_op = -1, .fault = -1};
            long long upper = o->final ? c->acked + c->indeterminate : invoked;
            if (shown > upper) {
                x.rule = CR_DUP;
                x.required = upper;
                x.fault = attribute(h, p, o, &x.fault_active);
                rc = add_viol(l, &x);
                continue;
            }
            long long d = acked_before - state;
            if (d <= running) continue;
            struct check_loss_event e = {.key = key,
                                         .op = i,
                                         .lost = d - running,
                                         .acked = acked_before,
                                         .seen = state,
                                         .fault = last_started_before(h, o->start_us)};
            running = d;
            if (r->nloss < CHECK_MAX_LOSS_EVENTS) r->loss[r->nloss] = e;
            r->nloss++;
            int kind = e.fault >= 0 ? h->faults[e.fault].kind : HF_NKINDS;
            r->lost_by_fault[kind] += e.lost;
            if (kind == HF_FAILOVER) c->lost_planned += e.lost;
            if (!replicated && (loss_expected_after(kind) || kind == HF_FAILOVER)) continue;
            x.rule = CR_LOST;
            x.required = acked_before;
            x.bound_us = 0;
            x.fault = attribute(h, p, o, &x.fault_active);
            rc = add_viol(l, &x);
        }
    /* a counter truncated back below v loses every increment applied at or after v: the first of two acknowledged
     * INCRs answered v is one of them, so the replies given twice are a lower bound too (indeterminate INCRs that ran
     * can hide a loss from D, not from them) */
    c->lost = running > c->dup_replies ? running : c->dup_replies;
    if (replicated && c->dup_replies > 0 && rc == 0) {
        /* one violation: the first reply two acknowledged INCRs got, at the later of the two */
        long long twice = 0;
        for (size_t i = 1; i < nacked && twice == 0; i++)
            if (replies[i] == replies[i - 1]) twice = replies[i];
        ssize_t first = -1;
        for (size_t j = 0; j < n && rc == 0; j++) {
            const struct hist_op *o = &h->ops[ops[j]];
            if (o->kind != HOP_INCR || o->status != HST_OK || o->value[0] != twice) continue;
            if (first < 0) {
                first = (ssize_t)ops[j];
                continue;
            }
            struct check_violation x =
                {.rule = CR_LOST, .op = ops[j], .got = twice, .required = -1, .required_op = first, .got_op = -1};
            x.fault = attribute(h, p, o, &x.fault_active);
            rc = add_viol(l, &x);
            break;
        }
    }
    free(ops);
    free(acked_end);
    free(inv_start);
    free(replies);
    free(acked_ops);
    return rc;
}

ssize_t check_history(const struct history *h, const struct check_params *p, struct check_result *out)
{
    memset(out, 0, sizeof *out);
    struct key_index *ks = calloc((size_t)(h->nkeys > 0 ? h->nkeys : 1), sizeof *ks);
    if (ks == NULL) return -1;
    int built = 0, rc = 0, nodes = p->same_keygate_bound_us >= 0 && h->nnodes > 0 ? h->nnodes : 0, built_node = 0;
    for (; built < h->nkeys && rc == 0; built++) rc = key_index_build(h, built, ANY_NODE, &ks[built]);
    if (rc != 0) built--; /* the failed one freed itself */
    struct key_index *ks_node = nodes ? calloc((size_t)(h->nkeys * nodes) + 1, sizeof *ks_node) : NULL;
    if (nodes && ks_node == NULL) rc = -1;
    for (; ks_node != NULL && built_node < h->nkeys * nodes && rc == 0; built_node++)
        rc = key_index_build(h, built_node / nodes, built_node % nodes, &ks_node[built_node]);
    if (rc != 0 && built_node > 0) built_node--;
    struct viol_list l = {0};
    int counters = 0;
    for (int k = 0; k < h->nkeys; k++) counters |= is_counter(h, k);
    if (counters && rc == 0 && (out->counter = calloc((size_t)h->nkeys, sizeof *out->counter)) == NULL) rc = -1;
    for (size_t i = 0; i < h->nops && rc == 0; i++) {
        const struct hist_op *o = &h->ops[i];
        if (o->kind < 0 || o->kind >= HOP_NKINDS || o->status < 0 || o->status >= HST_NKINDS) continue;
        out->ops_by_kind[o->kind]++;
        out->status_by_kind[o->kind][o->status]++;
        int write = hist_op_is_write(o->kind);
        if (write) {
            if (o->status == HST_OK)
                out->writes_acked++;
            else
                out->writes_indeterminate++;
        } else {
            out->reads++;
        }
        struct check_violation v = {.op = i, .required_op = -1, .got_op = -1, .fault = -1};
        if (o->status == HST_BAD) {
            v.rule = CR_BAD;
            v.fault = attribute(h, p, o, &v.fault_active);
            rc = add_viol(&l, &v);
            continue;
        }
        if (o->status != HST_OK) {
            ssize_t why = -1;
            for (size_t f = 0; f < h->nfaults && why < 0; f++)
                if (touches(&h->faults[f], o->node) && check_fault_explains(h->faults[f].kind, o->status) &&
                    overlaps(&h->faults[f], o->start_us, o->end_us, p->error_grace_us))
                    why = (ssize_t)f;
            if (why >= 0) {
                out->explained_by_fault[h->faults[why].kind]++;
                continue;
            }
            v.rule = CR_ERROR;
            v.fault = attribute(h, p, o, &v.fault_active);
            rc = add_viol(&l, &v);
            continue;
        }
        if (write) continue;
        int windowed = !o->final && in_fault_window(h, p, o);
        for (int s = 0; s < o->nkeys && s < HIST_MAX_OP_KEYS && rc == 0; s++) {
            if (o->key[s] < 0 || o->key[s] >= h->nkeys || is_counter(h, o->key[s])) continue;
            rc = check_read_value(h, p, ks, ks_node, i, s, windowed, &l, out);
        }
    }
    for (int k = 0; k < h->nkeys && rc == 0; k++)
        if (is_counter(h, k)) rc = check_counter(h, p, k, &l, out);
    for (int k = 0; k < built; k++) key_index_free(&ks[k]);
    for (int k = 0; k < built_node; k++) key_index_free(&ks_node[k]);
    free(ks);
    free(ks_node);
    if (rc != 0) {
        free(l.v);
        free(out->counter);
        memset(out, 0, sizeof *out);
        return -1;
    }
    qsort(l.v, l.n, sizeof *l.v, by_viol_op); /* the counter rules' come after the rest: history order again */
    out->viol = l.v;
    out->nviol = l.n;
    for (size_t i = 0; i < l.n; i++) {
        out->viol_by_rule[l.v[i].rule]++;
        out->viol_by_fault[l.v[i].fault >= 0 ? h->faults[l.v[i].fault].kind : HF_NKINDS]++;
    }
    return (ssize_t)l.n;
}

void check_result_free(struct check_result *r)
{
    free(r->counter);
    r->counter = NULL;
    free(r->viol);
    r->viol = NULL;
    r->nviol = 0;
}

/* ---- messages ---- */

static const char *node_name(const struct history *h, int node)
{
    if (node == HIST_DIRECT) return "backend";
    return node >= 0 && node < h->nnodes ? h->node_names[node] : "?";
}

static const char *key_name(const struct history *h, int key)
{
    return key >= 0 && key < h->nkeys ? h->key_names[key] : "?";
}

static void print_op(FILE *f, const struct history *h, const char *label, const struct hist_op *o, size_t index)
{
    fprintf(f, "    %s op#%zu: %s %s", label, index, node_name(h, o->node), hist_op_name(o->kind));
    for (int s = 0; s < o->nkeys && s < HIST_MAX_OP_KEYS; s++) fprintf(f, " %s", key_name(h, o->key[s]));
    if (o->kind == HOP_SISMEMBER) fprintf(f, " %lld", o->arg);
    if (hist_op_is_write(o->kind)) fprintf(f, " (seq %lld)", o->value[0]);
    fprintf(f, " [+%.3fs .. +%.3fs] thread %d -> ", o->start_us / 1e6, o->end_us / 1e6, o->thread);
    if (o->status != HST_OK) {
        fprintf(f, "%s: %s\n", hist_status_name(o->status), o->err);
    } else if (hist_op_is_write(o->kind)) {
        fprintf(f, "acknowledged\n");
    } else {
        for (int s = 0; s < o->nkeys && s < HIST_MAX_OP_KEYS; s++) fprintf(f, "%s%lld", s ? "," : "", o->value[s]);
        fprintf(f, "%s", o->final ? " (final read)\n" : "\n");
    }
}

static void print_fault(FILE *f, const struct history *h, const char *label, const struct hist_fault *x, size_t index)
{
    fprintf(f, "    %s fault#%zu %s on %s [+%.3fs .. +%.3fs]: %s\n", label, index, hist_fault_name(x->kind),
            x->node == HIST_GLOBAL ? "all keygates" : node_name(h, x->node), x->start_us / 1e6, x->end_us / 1e6,
            x->what);
}

void check_print_violation(FILE *f, const struct history *h, const struct check_params *p,
                           const struct check_violation *v)
{
    const struct hist_op *o = &h->ops[v->op];
    const char *key = key_name(h, o->key[v->slot]);
    int counter = is_counter(h, o->key[v->slot]);
    switch (counter ? v->rule + CR_NRULES : v->rule) {
    case CR_LOST + CR_NRULES:
        if (v->required < 0)
            fprintf(f, "%s: counter %s: two acknowledged INCRs answered %lld (an increment was lost between them)\n",
                    check_rule_name(v->rule), key, v->got);
        else
            fprintf(f,
                    "%s: counter %s on %s showed %lld%s, but %lld INCRs had been acknowledged before it began (%s)\n",
                    check_rule_name(v->rule), key, node_name(h, o->node), o->kind == HOP_INCR ? v->got - 1 : v->got,
                    o->kind == HOP_INCR ? " before its INCR" : "", v->required,
                    h->key_kind[o->key[v->slot]] == HIST_KEY_COUNTER_REPLICATED
                        ? "a replicas=N namespace: nothing acknowledged may be lost"
                        : "no failover explains the loss");
        break;
    case CR_DUP + CR_NRULES:
        fprintf(f, "%s: counter %s on %s showed %lld, but only %lld INCRs had been sent%s\n", check_rule_name(v->rule),
                key, node_name(h, o->node), v->got, v->required,
                o->final ? " in all, acknowledged or not (an increment applied twice?)" : " before it ended");
        break;
    case CR_STALE:
        if (o->kind == HOP_SISMEMBER)
            fprintf(f,
                    "%s: %s on %s answered 0 for member %lld: the set is older than write %lld, but write %lld "
                    "was acknowledged before start - L (L = %lld ms%s)\n",
                    check_rule_name(v->rule), key, node_name(h, o->node), o->arg, o->arg, v->required,
                    v->bound_us / 1000, v->bound_us == p->fault_bound_us ? ", in a fault window" : "");
        else
            fprintf(f,
                    "%s: %s on %s showed seq %lld, but seq %lld was acknowledged %sbefore start - L (L = %lld ms%s)\n",
                    check_rule_name(v->rule), key, node_name(h, o->node), v->got, v->required,
                    v->same_keygate ? "by this same keygate " : "", v->bound_us / 1000,
                    v->same_keygate                    ? ", CHAOS_SAME_KEYGATE_BOUND_MS"
                    : v->bound_us == p->fault_bound_us ? ", in a fault window"
                                                       : "");
        break;
    case CR_LOST:
        fprintf(f, "%s: the final read of %s on %s showed seq %lld, the last acknowledged write is seq %lld\n",
                check_rule_name(v->rule), key, node_name(h, o->node), v->got, v->required);
        break;
    case CR_FUTURE:
        fprintf(f, "%s: %s on %s showed seq %lld, which no write had been sent for before the read ended\n",
                check_rule_name(v->rule), key, node_name(h, o->node), o->kind == HOP_SISMEMBER ? o->arg : v->got);
        break;
    case CR_ERROR:
        fprintf(f, "%s: %s %s on %s failed (%s) and no fault explains it (grace %lld ms)\n", check_rule_name(v->rule),
                hist_op_name(o->kind), key, node_name(h, o->node), hist_status_name(o->status),
                p->error_grace_us / 1000);
        break;
    case CR_ERROR + CR_NRULES:
        fprintf(f, "%s: %s %s on %s failed (%s) and no fault explains it (grace %lld ms)\n", check_rule_name(v->rule),
                hist_op_name(o->kind), key, node_name(h, o->node), hist_status_name(o->status),
                p->error_grace_us / 1000);
        break;
    default:
        fprintf(f, "%s: %s %s on %s: %s\n", check_rule_name(v->rule), hist_op_name(o->kind), key, node_name(h, o->node),
                o->err);
        break;
    }
    print_op(f, h, "read ", o, v->op);
    if (counter && v->required_op >= 0)
        print_op(f, h, "same  ", &h->ops[v->required_op], (size_t)v->required_op);
    else if (v->required_op >= 0 && (v->rule == CR_STALE || v->rule == CR_LOST))
        print_op(f, h, "needed", &h->ops[v->required_op], (size_t)v->required_op);
    if (v->got_op >= 0 && v->rule != CR_ERROR && v->rule != CR_BAD)
        print_op(f, h, "shown ", &h->ops[v->got_op], (size_t)v->got_op);
    int any = 0;
    for (size_t i = 0; i < h->nfaults; i++) {
        const struct hist_fault *x = &h->faults[i];
        if (touches(x, o->node) && overlaps(x, o->start_us - p->fault_bound_us, o->end_us, p->fault_tail_us)) {
            print_fault(f, h, overlaps(x, o->start_us, o->end_us, p->fault_tail_us) ? "active" : "recent", x, i);
            any = 1;
        }
    }
    if (v->fault >= 0 && !v->fault_active &&
        !overlaps(&h->faults[v->fault], o->start_us - p->fault_bound_us, o->end_us, p->fault_tail_us)) {
        print_fault(f, h, "last  ", &h->faults[v->fault], (size_t)v->fault);
        any = 1;
    }
    if (!any) fprintf(f, "    no fault touching %s before it\n", node_name(h, o->node));
}

void check_print_summary(FILE *f, const struct history *h, const struct check_result *r)
{
    fprintf(f, "operations by kind (ok / error-reply / timeout / connection / bad-reply):\n");
    for (int k = 0; k < HOP_NKINDS; k++) {
        if (r->ops_by_kind[k] == 0) continue;
        fprintf(f, "  %-16s %8lld:", hist_op_name(k), r->ops_by_kind[k]);
        for (int s = 0; s < HST_NKINDS; s++)
            fprintf(f, " %lld%s", r->status_by_kind[k][s], s + 1 < HST_NKINDS ? " /" : "");
        fprintf(f, "\n");
    }
    fprintf(f, "writes: %lld acknowledged, %lld indeterminate\n", r->writes_acked, r->writes_indeterminate);
    if (r->read_values > 0 || r->counter == NULL)
        fprintf(f,
                "reads: %lld (%lld key values): %lld checked against an acknowledged write (%lld of them with the "
                "fault bound; %lld of them older values of indeterminate writes that may have landed late), %lld with "
                "nothing "
                "acknowledged yet, %lld SISMEMBER answers inconclusive\n",
                r->reads, r->read_values, r->checked, r->in_fault_window, r->late_applied, r->trivial, r->inconclusive);
    fprintf(f, "errors explained by faults:");
    for (int k = 0; k < HF_NKINDS; k++)
        if (r->explained_by_fault[k]) fprintf(f, " %s %lld", hist_fault_name(k), r->explained_by_fault[k]);
    fprintf(f, "\nviolations by rule:");
    for (int k = 0; k < CR_NRULES; k++)
        if (k != CR_DUP || r->counter != NULL) fprintf(f, " %s %lld", check_rule_name(k), r->viol_by_rule[k]);
    fprintf(f, "\nviolations by fault (active, else the last before):");
    for (int k = 0; k <= HF_NKINDS; k++)
        if (r->viol_by_fault[k])
            fprintf(f, " %s %lld", k < HF_NKINDS ? hist_fault_name(k) : "none", r->viol_by_fault[k]);
    fprintf(f, "\n");
    if (r->counter != NULL) check_print_counters(f, h, r);
}

void check_print_counters(FILE *f, const struct history *h, const struct check_result *r)
{
    for (int k = 0; k < h->nkeys && r->counter != NULL; k++) {
        if (!is_counter(h, k)) continue;
        const struct check_counter_sum *c = &r->counter[k];
        fprintf(f,
                "counter %s (%s): %lld INCRs acknowledged, %lld indeterminate; final value %lld (%+lld against the "
                "acknowledged); %lld states checked; %lld acknowledged increments proven lost (%lld of them after a "
                "planned failover); %lld acknowledged INCRs answered a value another one also got (%lld of them after "
                "a planned failover)\n",
                key_name(h, k), h->key_kind[k] == HIST_KEY_COUNTER_REPLICATED ? "replicas=1" : "no replicas=", c->acked,
                c->indeterminate, c->final_value, c->final_value - c->acked, c->checked, c->lost, c->lost_planned,
                c->dup_replies, c->dup_planned);
    }
    fprintf(f, "acknowledged increments lost, by the fault before them:");
    int any = 0;
    for (int k = 0; k <= HF_NKINDS; k++)
        if (r->lost_by_fault[k]) {
            fprintf(f, " %s %lld", k < HF_NKINDS ? hist_fault_name(k) : "none", r->lost_by_fault[k]);
            any = 1;
        }
    fprintf(f, "%s\n", any ? "" : " none");
    for (size_t i = 0; i < r->nloss && i < CHECK_MAX_LOSS_EVENTS; i++) {
        const struct check_loss_event *e = &r->loss[i];
        const struct hist_op *o = &h->ops[e->op];
        fprintf(f, "  loss event: %s: %lld acknowledged INCRs before +%.3fs, %s %s on %s showed %lld: %lld more lost",
                key_name(h, e->key), e->acked, o->start_us / 1e6, o->final ? "the final" : "then",
                hist_op_name(o->kind), node_name(h, o->node), e->seen, e->lost);
        if (e->fault >= 0)
            fprintf(f, "; after fault#%zd %s [+%.3fs .. +%.3fs] %s\n", e->fault,
                    hist_fault_name(h->faults[e->fault].kind), h->faults[e->fault].start_us / 1e6,
                    h->faults[e->fault].end_us / 1e6, h->faults[e->fault].what);
        else
            fprintf(f, "; no fault before it\n");
    }
    if (r->nloss > CHECK_MAX_LOSS_EVENTS) fprintf(f, "  and %zu more loss events\n", r->nloss - CHECK_MAX_LOSS_EVENTS);
}
