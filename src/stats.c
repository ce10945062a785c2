/* stats.c: summing per-worker counters, error codes, report-mode counters, the namespace label table, the Prometheus and INFO texts. */
#include "stats.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Block i of the workers' stats, `stride` bytes apart. */
static const struct stats *block_at(const struct stats *blocks, size_t stride, int i)
{
    return (const struct stats *)((const char *)blocks + (size_t)i * stride);
}

void stats_sum(const struct stats *blocks, size_t stride, int n, struct stats *out)
{
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < n; i++) {
        const struct stats *s = block_at(blocks, stride, i);
#define STATS_SUM(name, help) out->name += __atomic_load_n(&s->name, __ATOMIC_RELAXED);
        STATS_COUNTERS(STATS_SUM)
#undef STATS_SUM
    }
}

static int starts_with(const char *s, const char *word)
{
    size_t n = strlen(word);
    return strncmp(s, word, n) == 0 && (s[n] == ' ' || s[n] == '\0');
}

static enum stats_refused refused_code(const char *error);

/* The global errors_* counter of a refusal code. */
static void count_refused(struct stats *st, enum stats_refused code)
{
    switch (code) {
    case STATS_REFUSED_NONAMESPACE:
        STAT_INC(st, errors_nonamespace);
        break;
    case STATS_REFUSED_CROSSINSTANCE:
        STAT_INC(st, errors_crossinstance);
        break;
    case STATS_REFUSED_DENIED:
        STAT_INC(st, errors_denied);
        break;
    case STATS_REFUSED_NOPERM:
        STAT_INC(st, errors_noperm);
        break;
    case STATS_REFUSED_NOAUTH: /* WRONGPASS too */
        STAT_INC(st, errors_noauth);
        break;
    case STATS_REFUSED_UNAVAILABLE:
        STAT_INC(st, errors_unavailable);
        break;
    default:
        STAT_INC(st, errors_other);
        break;
    }
}

/* ---- recording ---- */

void stats_flush(struct stats *st)
{
    struct stats_command_run *c = &st->commands;
    if (c->n) {
        struct stats_ns *n = &stats_ns_of(st)[STATS_KEY_SLOT(c->key)];
        STATS_BUMP(&n->commands[STATS_KEY_CLASS(c->key)], c->n);
        STATS_BUMP(&n->received_bytes, c->bytes);
    }
    c->n = 0;
    c->bytes = 0;
    struct stats_run *r = &st->run;
    if (r->n) {
        STATS_BUMP(&stats_ns_of(st)[STATS_KEY_SLOT(r->key)].sent_bytes, r->bytes);
        uint64_t now = st->now_ns;
        stats_hist_add(&st->request_duration[STATS_KEY_CLASS(r->key)], now > r->t0_ns ? now - r->t0_ns : 0, r->n);
    }
    *r = (struct stats_run){.t0_ns = UINT64_MAX};
}

void stats_command_more(struct stats *st, uint32_t key)
{
    STATS_BUMP(&stats_ns_of(st)[STATS_KEY_SLOT(key)].commands[STATS_KEY_CLASS(key)], 1);
}

uint64_t stats_clock(struct stats *st)
{
    if (st->run.n || st->commands.n) stats_flush(st);
    uint64_t now = clock_mono_ns();
    st->now_ns = now;
    return now;
}

struct stats_ns *stats_ns_alloc(struct stats *st)
{
    struct stats_ns *ns = xcalloc(STATS_NS_MAX, sizeof(*ns));
    __atomic_store_n(&st->ns, ns, __ATOMIC_RELEASE); /* the admin thread reads it */
    return ns;
}

void stats_free(struct stats *st)
{
    free(st->ns);
    st->ns = NULL;
}

static enum stats_refused refused_code(const char *error)
{
    static const char *const names[] = {
#define STATS_NAME(c) #c,
        STATS_REFUSED_CODES(STATS_NAME)
#undef STATS_NAME
    };
    for (int i = 0; i < STATS_REFUSED_OTHER; i++)
        if (starts_with(error, names[i])) return (enum stats_refused)i;
    if (starts_with(error, "WRONGPASS")) return STATS_REFUSED_NOAUTH;
    return STATS_REFUSED_OTHER;
}

void stats_refused(struct stats *st, const struct stats_mark *m, const char *error)
{
    enum stats_refused code = refused_code(error);
    count_refused(st, code);
    struct stats_ns *n = &stats_ns_of(st)[STATS_KEY_SLOT(m->key)];
    STATS_BUMP(&n->refused[code], 1);
    /* ttl.c's text for a client TTL over the namespace's max-ttl */
    if (code == STATS_REFUSED_DENIED && strstr(error, " is above max-ttl ")) STATS_BUMP(&n->ttl_refused, 1);
    if (code == STATS_REFUSED_OTHER && starts_with(error, STATS_BUDGET_ERROR)) STATS_BUMP(&n->budget_refused, 1);
}

enum stats_backend_code stats_backend_code(const char *word, size_t len)
{
    static const char *const names[] = {
#define STATS_NAME(c) #c,
        STATS_BACKEND_CODES(STATS_NAME)
#undef STATS_NAME
    };
    for (int i = 0; i < STATS_BACKEND_OTHER; i++)
        if (strlen(names[i]) == len && memcmp(names[i], word, len) == 0) return (enum stats_backend_code)i;
    return STATS_BACKEND_OTHER;
}

void stats_backend_error(struct stats *st, const struct stats_mark *m, const char *reply, size_t len)
{
    size_t w = 1;
    while (w < len && reply[w] != ' ' && reply[w] != '\r') w++;
    enum stats_backend_code code = stats_backend_code(reply + 1, w > 0 ? w - 1 : 0);
    if (code == STATS_BACKEND_OOM && len > sizeof(STATS_BUDGET_ERROR) &&
        memcmp(reply + 1, STATS_BUDGET_ERROR, sizeof(STATS_BUDGET_ERROR) - 1) == 0) {
        /* the budget check script's refusal: keygate's budget, not the backend's memory */
        STATS_BUMP(&stats_ns_of(st)[STATS_KEY_SLOT(m->key)].budget_refused, 1);
        return;
    }
    STATS_BUMP(&stats_ns_of(st)[STATS_KEY_SLOT(m->key)].backend_errors[code], 1);
    if (code == STATS_BACKEND_OOM && m->instance >= 0 && m->instance < STATS_MAX_INSTANCES)
        STATS_BUMP(&st->rejected_writes[m->instance], 1);
}

/* ---- the label table ---- */

struct ns_label {
    char *prefix, *instance, *owner;
    int channel;
};

static pthread_mutex_t labels_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ns_label labels[STATS_NS_MAX];
static unsigned nlabels; /* atomic: slots 0 .. nlabels-1 are bound (0 is always namespace="") */

unsigned stats_ns_slot(const char *prefix, int channel, const char *instance, const char *owner)
{
    pthread_mutex_lock(&labels_lock);
    if (nlabels == 0) {
        labels[0] = (struct ns_label){xstrdup(""), xstrdup(""), xstrdup(""), 0};
        __atomic_store_n(&nlabels, 1, __ATOMIC_RELEASE);
    }
    unsigned slot = 1;
    while (slot < nlabels && !(labels[slot].channel == channel && strcmp(labels[slot].prefix, prefix) == 0 &&
                               strcmp(labels[slot].instance, instance) == 0 && strcmp(labels[slot].owner, owner) == 0))
        slot++;
    if (slot == nlabels) {
        if (slot >= STATS_NS_OVERFLOW) {
            slot = STATS_NS_OVERFLOW;
            if (!labels[slot].prefix) {
                labels[slot] = (struct ns_label){xstrdup("(overflow)"), xstrdup(""), xstrdup(""), 0};
                log_event(LOG_WARN, "metrics_namespace_overflow", NULL,
                          "metrics: more than %d namespaces over the reloads: new ones share "
                          "namespace=\"(overflow)\"",
                          STATS_NS_OVERFLOW - 1);
            }
        } else {
            labels[slot] = (struct ns_label){xstrdup(prefix), xstrdup(instance), xstrdup(owner), channel};
            __atomic_store_n(&nlabels, slot + 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&labels_lock);
    return slot;
}

void stats_ns_reset(void)
{
    pthread_mutex_lock(&labels_lock);
    for (unsigned i = 0; i < STATS_NS_MAX; i++) {
        free(labels[i].prefix);
        free(labels[i].instance);
        free(labels[i].owner);
    }
    memset(labels, 0, sizeof(labels));
    __atomic_store_n(&nlabels, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&labels_lock);
}

/* The bound slots, in order (the overflow one last, when used). Returns how many. */
static unsigned bound_slots(unsigned *out)
{
    unsigned n = 0;
    pthread_mutex_lock(&labels_lock);
    for (unsigned i = 0; i < STATS_NS_MAX; i++)
        if (labels[i].prefix) out[n++] = i;
    pthread_mutex_unlock(&labels_lock);
    return n;
}

/* ---- reading ---- */

void stats_ns_sum(const struct stats *blocks, size_t stride, int n, unsigned slot, struct stats_ns *out)
{
    memset(out, 0, sizeof(*out));
    if (slot >= STATS_NS_MAX) return;
    for (int i = 0; i < n; i++) {
        const struct stats_ns *ns = __atomic_load_n(&block_at(blocks, stride, i)->ns, __ATOMIC_ACQUIRE);
        if (!ns) continue;
        const uint64_t *src = (const uint64_t *)&ns[slot];
        uint64_t *dst = (uint64_t *)out;
        for (size_t k = 0; k < sizeof(*out) / sizeof(uint64_t); k++)
            dst[k] += __atomic_load_n(&src[k], __ATOMIC_RELAXED);
    }
}

static void hist_sum(const struct stats_hist *h, struct stats_hist *out)
{
    for (int k = 0; k <= STATS_HIST_NBOUNDS; k++) out->bucket[k] += __atomic_load_n(&h->bucket[k], __ATOMIC_RELAXED);
    out->sum_ns += __atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED);
}

void stats_hist_sum_backend(const struct stats *blocks, size_t stride, int n, int instance, struct stats_hist *out)
{
    memset(out, 0, sizeof(*out));
    if (instance < 0 || instance >= STATS_MAX_INSTANCES) return;
    for (int i = 0; i < n; i++) hist_sum(&block_at(blocks, stride, i)->backend_latency[instance], out);
}

void stats_hist_sum_hold(const struct stats *blocks, size_t stride, int n, int instance, struct stats_hist *out)
{
    memset(out, 0, sizeof(*out));
    if (instance < 0 || instance >= STATS_MAX_INSTANCES) return;
    for (int i = 0; i < n; i++) hist_sum(&block_at(blocks, stride, i)->request_hold[instance], out);
}

void stats_hist_sum_request(const struct stats *blocks, size_t stride, int n, int cls, struct stats_hist *out)
{
    memset(out, 0, sizeof(*out));
    if (cls < 0 || cls >= STATS_NCLASSES) return;
    for (int i = 0; i < n; i++) hist_sum(&block_at(blocks, stride, i)->request_duration[cls], out);
}

double stats_hist_quantile_us(const struct stats_hist *h, double q)
{
    static const uint64_t bounds[STATS_HIST_NBOUNDS] = STATS_HIST_BOUNDS_NS;
    uint64_t total = 0;
    for (int k = 0; k <= STATS_HIST_NBOUNDS; k++) total += h->bucket[k];
    if (total == 0) return 0;
    double rank = q * (double)total, seen = 0;
    for (int k = 0; k < STATS_HIST_NBOUNDS; k++) {
        double c = (double)h->bucket[k];
        if (c > 0 && seen + c >= rank) {
            double lo = k == 0 ? 0 : (double)bounds[k - 1], hi = (double)bounds[k];
            return (lo + (hi - lo) * ((rank - seen) / c)) / 1000.0;
        }
        seen += c;
    }
    return (double)bounds[STATS_HIST_NBOUNDS - 1] / 1000.0;
}

static const char *const class_names[STATS_NCLASSES] = {"read", "write", "other"};

void stats_prom_label_value(struct bytebuf *out, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            bytebuf_add(out, "\\", 1);
        else if (*v == '\n') {
            bytebuf_add(out, "\\n", 2);
            continue;
        }
        bytebuf_add(out, v, 1);
    }
}

static void addf(struct bytebuf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(struct bytebuf *out, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof(line)) n = (int)sizeof(line) - 1;
    bytebuf_add(out, line, (size_t)n);
}

static void add_ns_labels(struct bytebuf *out, const struct ns_label *l)
{
    bytebuf_add(out, STR_AND_LEN("namespace=\""));
    stats_prom_label_value(out, l->prefix);
    bytebuf_add(out, STR_AND_LEN("\",backend=\""));
    stats_prom_label_value(out, l->instance);
    bytebuf_add(out, STR_AND_LEN("\",owner=\""));
    stats_prom_label_value(out, l->owner);
    bytebuf_add(out, "\"", 1);
}

/* The summed slots and their labels, for one formatting pass (labels copied under the lock). */
struct ns_snapshot {
    unsigned n;
    unsigned slot[STATS_NS_MAX];
    struct ns_label label[STATS_NS_MAX];
    struct stats_ns sum[STATS_NS_MAX];
};

static struct ns_snapshot *snapshot_take(const struct stats *blocks, size_t stride, int nblocks)
{
    struct ns_snapshot *s = xcalloc(1, sizeof(*s));
    s->n = bound_slots(s->slot);
    pthread_mutex_lock(&labels_lock);
    for (unsigned i = 0; i < s->n; i++) {
        const struct ns_label *l = &labels[s->slot[i]];
        s->label[i] = (struct ns_label){xstrdup(l->prefix), xstrdup(l->instance), xstrdup(l->owner), l->channel};
    }
    pthread_mutex_unlock(&labels_lock);
    for (unsigned i = 0; i < s->n; i++) stats_ns_sum(blocks, stride, nblocks, s->slot[i], &s->sum[i]);
    return s;
}

static void snapshot_free(struct ns_snapshot *s)
{
    for (unsigned i = 0; i < s->n; i++) {
        free(s->label[i].prefix);
        free(s->label[i].instance);
        free(s->label[i].owner);
    }
    free(s);
}

static void prom_header(struct bytebuf *out, const char *name, const char *type, const char *help)
{
    addf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One series per slot: value(sum) of each. */
#define NS_SERIES(out, s, name, help, expr)                                                                            \
    do {                                                                                                               \
        prom_header(out, name, "counter", help);                                                                       \
        for (unsigned i_ = 0; i_ < (s)->n; i_++) {                                                                     \
            const struct stats_ns *v_ = &(s)->sum[i_];                                                                 \
            bytebuf_add(out, STR_AND_LEN(name "{"));                                                                   \
            add_ns_labels(out, &(s)->label[i_]);                                                                       \
            addf(out, "} %llu\n", (unsigned long long)(expr));                                                         \
        }                                                                                                              \
    } while (0)

static void prom_hist(struct bytebuf *out, const char *name, const char *label, const char *value,
                      const struct stats_hist *h)
{
    static const uint64_t bounds[STATS_HIST_NBOUNDS] = STATS_HIST_BOUNDS_NS;
    uint64_t cum = 0;
    for (int k = 0; k < STATS_HIST_NBOUNDS; k++) {
        cum += h->bucket[k];
        addf(out, "%s_bucket{%s=\"%s\",le=\"%g\"} %llu\n", name, label, value, (double)bounds[k] / 1e9,
             (unsigned long long)cum);
    }
    cum += h->bucket[STATS_HIST_NBOUNDS];
    addf(out, "%s_bucket{%s=\"%s\",le=\"+Inf\"} %llu\n", name, label, value, (unsigned long long)cum);
    addf(out, "%s_sum{%s=\"%s\"} %.9f\n", name, label, value, (double)h->sum_ns / 1e9);
    addf(out, "%s_count{%s=\"%s\"} %llu\n", name, label, value, (unsigned long long)cum);
}

void stats_format_prometheus(const struct stats *blocks, size_t stride, int n, const char *const *instances,
                             size_t ninstances, struct bytebuf *out)
{
    static const char *const refused_names[] = {
#define STATS_NAME(c) #c,
        STATS_REFUSED_CODES(STATS_NAME)
#undef STATS_NAME
    };
    static const char *const backend_names[] = {
#define STATS_NAME(c) #c,
        STATS_BACKEND_CODES(STATS_NAME)
#undef STATS_NAME
    };
    struct ns_snapshot *s = snapshot_take(blocks, stride, n);

    prom_header(out, "keygate_namespace_commands_total", "counter", "client commands by namespace and class");
    for (unsigned i = 0; i < s->n; i++)
        for (int c = 0; c < STATS_NCLASSES; c++) {
            bytebuf_add(out, STR_AND_LEN("keygate_namespace_commands_total{"));
            add_ns_labels(out, &s->label[i]);
            addf(out, ",class=\"%s\"} %llu\n", class_names[c], (unsigned long long)s->sum[i].commands[c]);
        }
    prom_header(out, "keygate_namespace_refused_total", "counter",
                "commands keygate answered with its own error, by namespace and code");
    for (unsigned i = 0; i < s->n; i++)
        for (int c = 0; c < STATS_NREFUSED; c++) {
            bytebuf_add(out, STR_AND_LEN("keygate_namespace_refused_total{"));
            add_ns_labels(out, &s->label[i]);
            addf(out, ",code=\"%s\"} %llu\n", refused_names[c], (unsigned long long)s->sum[i].refused[c]);
        }
    NS_SERIES(out, s, "keygate_namespace_ttl_injected_total", "writes given the registry's TTL", v_->ttl_injected);
    NS_SERIES(out, s, "keygate_namespace_ttl_refused_total", "commands refused: a client TTL above max-ttl",
              v_->ttl_refused);
    NS_SERIES(out, s, "keygate_budget_refused_total",
              "writes refused -OOM: their namespace is over its max-keys= or max-memory= budget", v_->budget_refused);
    NS_SERIES(out, s, "keygate_namespace_received_bytes_total",
              "request bytes read from clients (a request's bytes go to its first key's namespace)",
              v_->received_bytes);
    NS_SERIES(out, s, "keygate_namespace_sent_bytes_total", "reply bytes queued to clients", v_->sent_bytes);
    prom_header(out, "keygate_namespace_backend_errors_total", "counter",
                "backend error replies passed through to clients, by namespace and code");
    for (unsigned i = 0; i < s->n; i++)
        for (int c = 0; c < STATS_NBACKEND_CODES; c++) {
            bytebuf_add(out, STR_AND_LEN("keygate_namespace_backend_errors_total{"));
            add_ns_labels(out, &s->label[i]);
            addf(out, ",code=\"%s\"} %llu\n", backend_names[c], (unsigned long long)s->sum[i].backend_errors[c]);
        }
    snapshot_free(s);

    struct stats_hist h;
    prom_header(out, "keygate_backend_latency_seconds", "histogram",
                "backend round trip: the request's batch written to the reply framed");
    for (size_t i = 0; i < ninstances && i < STATS_MAX_INSTANCES; i++) {
        stats_hist_sum_backend(blocks, stride, n, (int)i, &h);
        prom_hist(out, "keygate_backend_latency_seconds", "backend", instances[i], &h);
    }
    prom_header(out, "keygate_request_hold_seconds", "histogram",
                "requests held for a cluster slot's owner or a sentinel instance's primary: the wait (its count: "
                "requests held)");
    for (size_t i = 0; i < ninstances && i < STATS_MAX_INSTANCES; i++) {
        stats_hist_sum_hold(blocks, stride, n, (int)i, &h);
        prom_hist(out, "keygate_request_hold_seconds", "backend", instances[i], &h);
    }
    prom_header(out, "keygate_request_duration_seconds", "histogram",
                "time in keygate: the request read to its reply written, by command class");
    for (int c = 0; c < STATS_NCLASSES; c++) {
        stats_hist_sum_request(blocks, stride, n, c, &h);
        prom_hist(out, "keygate_request_duration_seconds", "class", class_names[c], &h);
    }
}

void stats_format_ns_gauge(const char *name, const char *help, const uint64_t *values, const unsigned char *present,
                           struct bytebuf *out)
{
    prom_header(out, name, "gauge", help);
    unsigned slots[STATS_NS_MAX];
    unsigned n = bound_slots(slots);
    pthread_mutex_lock(&labels_lock);
    for (unsigned i = 0; i < n; i++) {
        if (!present[slots[i]]) continue;
        addf(out, "%s{", name);
        add_ns_labels(out, &labels[slots[i]]);
        addf(out, "} %llu\n", (unsigned long long)values[slots[i]]);
    }
    pthread_mutex_unlock(&labels_lock);
}

/* An INFO value: the characters INFO's "k=v,k=v" lines cannot hold (, = CR LF and space)
 * become '_' (labels are the registry's words; this only guards the format). A ':' stays:
 * INFO lines split at their first one, as in the ns lines. */
static void add_info_value(struct bytebuf *out, const char *v)
{
    for (; *v; v++) {
        char c = (*v == ',' || *v == '=' || *v == '\r' || *v == '\n' || *v == ' ') ? '_' : *v;
        bytebuf_add(out, &c, 1);
    }
}

static void info_percentiles(struct bytebuf *out, const char *what, const char *name, const struct stats_hist *h)
{
    addf(out, "latency_percentiles_usec_%s_", what);
    add_info_value(out, name);
    addf(out, ":p50=%.3f,p99=%.3f,p99.9=%.3f\r\n", stats_hist_quantile_us(h, 0.5), stats_hist_quantile_us(h, 0.99),
         stats_hist_quantile_us(h, 0.999));
}

void stats_format_info(const struct stats *blocks, size_t stride, int n, const char *const *instances,
                       size_t ninstances, struct bytebuf *out)
{
    struct ns_snapshot *s = snapshot_take(blocks, stride, n);
    for (unsigned i = 0; i < s->n; i++) {
        const struct stats_ns *v = &s->sum[i];
        addf(out, "nsstat_%u:prefix=", s->slot[i]);
        add_info_value(out, s->label[i].prefix);
        bytebuf_add(out, STR_AND_LEN(",instance="));
        add_info_value(out, s->label[i].instance);
        bytebuf_add(out, STR_AND_LEN(",owner="));
        add_info_value(out, s->label[i].owner);
        addf(out, ",cmd_read=%llu,cmd_write=%llu,cmd_other=%llu", (unsigned long long)v->commands[STATS_READ],
             (unsigned long long)v->commands[STATS_WRITE], (unsigned long long)v->commands[STATS_OTHER]);
#define STATS_INFO_REFUSED(c) addf(out, ",refused_%s=%llu", #c, (unsigned long long)v->refused[STATS_REFUSED_##c]);
        STATS_REFUSED_CODES(STATS_INFO_REFUSED)
#undef STATS_INFO_REFUSED
        addf(out, ",ttl_injected=%llu,ttl_refused=%llu,received_bytes=%llu,sent_bytes=%llu",
             (unsigned long long)v->ttl_injected, (unsigned long long)v->ttl_refused,
             (unsigned long long)v->received_bytes, (unsigned long long)v->sent_bytes);
#define STATS_INFO_BACKEND(c)                                                                                          \
    addf(out, ",backend_%s=%llu", #c, (unsigned long long)v->backend_errors[STATS_BACKEND_##c]);
        STATS_BACKEND_CODES(STATS_INFO_BACKEND)
#undef STATS_INFO_BACKEND
        bytebuf_add(out, STR_AND_LEN("\r\n"));
    }
    snapshot_free(s);
    struct stats_hist h;
    for (size_t i = 0; i < ninstances && i < STATS_MAX_INSTANCES; i++) {
        stats_hist_sum_backend(blocks, stride, n, (int)i, &h);
        info_percentiles(out, "backend", instances[i], &h);
    }
    for (int c = 0; c < STATS_NCLASSES; c++) {
        stats_hist_sum_request(blocks, stride, n, c, &h);
        info_percentiles(out, "request", class_names[c], &h);
    }
}

/* ---- report mode and the default line (issue 13) ----------------------------------- */

/* Count n events into a pair's log state; the count to log now, or 0 within the interval. */
static uint32_t log_due(int64_t *logged_ms, uint32_t *unlogged, uint32_t n, int64_t now_ms)
{
    *unlogged += n;
    if (*logged_ms != 0 && now_ms - *logged_ms < STATS_REPORT_LOG_INTERVAL_MS) return 0;
    uint32_t due = *unlogged;
    *unlogged = 0;
    *logged_ms = now_ms ? now_ms : 1;
    return due;
}

uint32_t stats_report_note(struct stats *st, uint32_t index, enum stats_report_reason reason, int64_t now_ms)
{
    uint32_t slot = stats_report_slot(index);
    STAT_INC(&st->report, count[slot][reason]);
    return log_due(&st->report.logged_ms[slot][reason], &st->report.unlogged[slot][reason], 1, now_ms);
}

uint32_t stats_unregistered_note(struct stats *st, int kind, uint32_t n, int64_t now_ms)
{
    STAT_ADD(&st->report, unregistered[kind], n);
    return log_due(&st->report.unregistered_logged_ms[kind], &st->report.unregistered_unlogged[kind], n, now_ms);
}

uint64_t stats_report_sum(const struct stats *blocks, size_t stride, int n, uint32_t slot,
                          enum stats_report_reason reason)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        const struct stats *s = block_at(blocks, stride, i);
        sum += __atomic_load_n(&s->report.count[slot][reason], __ATOMIC_RELAXED);
    }
    return sum;
}

uint64_t stats_unregistered_sum(const struct stats *blocks, size_t stride, int n, int kind)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        const struct stats *s = block_at(blocks, stride, i);
        sum += __atomic_load_n(&s->report.unregistered[kind], __ATOMIC_RELAXED);
    }
    return sum;
}

const char *stats_report_code(enum stats_report_reason reason)
{
    static const char *const codes[] = {
#define STATS_REPORT_CODE(id, code, word) code,
        STATS_REPORT_REASONS(STATS_REPORT_CODE)
#undef STATS_REPORT_CODE
    };
    return reason < STATS_REPORT_NREASONS ? codes[reason] : "";
}

const char *stats_report_word(enum stats_report_reason reason)
{
    static const char *const words[] = {
#define STATS_REPORT_WORD(id, code, word) word,
        STATS_REPORT_REASONS(STATS_REPORT_WORD)
#undef STATS_REPORT_WORD
    };
    return reason < STATS_REPORT_NREASONS ? words[reason] : "";
}
