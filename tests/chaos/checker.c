/* checker.c: the chaos run's history checker (rules in checker.h): per-key indexes of acknowledged and invoked writes, then every operation judged against them. */
#include "checker.h"

#include <stdlib.h>
#include <string.h>

/* ---- names ---- */

const char *hist_op_name(int kind)
{
    static const char *const names[HOP_NKINDS] = {"SET",  "HSET",    "MULTI/SADD/SREM", "GET",     "MGET",
                                                  "HGET", "HGETALL", "SISMEMBER",       "SMEMBERS"};
    return kind >= 0 && kind < HOP_NKINDS ? names[kind] : "?";
}

const char *hist_status_name(int status)
{
    static const char *const names[HST_NKINDS] = {"ok", "error-reply", "timeout", "connection", "bad-reply"};
    return status >= 0 && status < HST_NKINDS ? names[status] : "?";
}

const char *hist_fault_name(int kind)
{
    static const char *const names[HF_NKINDS] = {"stop",        "kill-stream",      "del-stream",
                                                 "trim-stream", "restart",          "slow-link",
                                                 "reload",      "wrongtype-stream", "failover"};
    return kind >= 0 && kind < HF_NKINDS ? names[kind] : "?";
}

int hist_op_is_write(int kind)
{
    return kind == HOP_SET || kind == HOP_HSET || kind == HOP_SADD;
}

const char *check_rule_name(int rule)
{
    static const char *const names[CR_NRULES] = {"STALE", "FUTURE", "LOST", "ERROR", "BAD"};
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
            if (o->key[s] < 0 || o->key[s] >= h->nkeys) continue;
            rc = check_read_value(h, p, ks, ks_node, i, s, windowed, &l, out);
        }
    }
    for (int k = 0; k < built; k++) key_index_free(&ks[k]);
    for (int k = 0; k < built_node; k++) key_index_free(&ks_node[k]);
    free(ks);
    free(ks_node);
    if (rc != 0) {
        free(l.v);
        memset(out, 0, sizeof *out);
        return -1;
    }
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
    switch (v->rule) {
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
    default:
        fprintf(f, "%s: %s %s on %s: %s\n", check_rule_name(v->rule), hist_op_name(o->kind), key, node_name(h, o->node),
                o->err);
        break;
    }
    print_op(f, h, "read ", o, v->op);
    if (v->required_op >= 0 && (v->rule == CR_STALE || v->rule == CR_LOST))
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
    fprintf(
        f,
        "reads: %lld (%lld key values): %lld checked against an acknowledged write (%lld of them with the "
        "fault bound; %lld of them older values of indeterminate writes that may have landed late), %lld with nothing "
        "acknowledged yet, %lld SISMEMBER answers inconclusive\n",
        r->reads, r->read_values, r->checked, r->in_fault_window, r->late_applied, r->trivial, r->inconclusive);
    fprintf(f, "errors explained by faults:");
    for (int k = 0; k < HF_NKINDS; k++)
        if (r->explained_by_fault[k]) fprintf(f, " %s %lld", hist_fault_name(k), r->explained_by_fault[k]);
    fprintf(f, "\nviolations by rule:");
    for (int k = 0; k < CR_NRULES; k++) fprintf(f, " %s %lld", check_rule_name(k), r->viol_by_rule[k]);
    fprintf(f, "\nviolations by fault (active, else the last before):");
    for (int k = 0; k <= HF_NKINDS; k++)
        if (r->viol_by_fault[k])
            fprintf(f, " %s %lld", k < HF_NKINDS ? hist_fault_name(k) : "none", r->viol_by_fault[k]);
    fprintf(f, "\n");
    (void)h;
}
