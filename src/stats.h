/* stats.h: per-worker counters (an X-macro list), per-namespace series and latency histograms, and their text forms. */
#ifndef KEYGATE_STATS_H
#define KEYGATE_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

/* X(field, help text) — every counter keygate keeps. */
#define STATS_COUNTERS(X)                                                                                              \
    X(connections_received, "client connections accepted")                                                             \
    X(connections_rejected, "client connections refused at max-clients")                                               \
    X(accept_paused, "times accepting paused: out of file descriptors")                                                \
    X(commands_processed, "client commands handled")                                                                   \
    X(commands_forwarded, "commands sent to a backend instance")                                                       \
    X(commands_local, "commands answered by keygate itself")                                                           \
    X(tracking_messages, "client-side caching invalidation messages written to clients (CLIENT TRACKING)")             \
    X(ttl_injected, "writes given the registry's TTL")                                                                 \
    X(errors_nonamespace, "commands refused: key in no namespace")                                                     \
    X(errors_crossinstance, "commands refused: keys on two instances")                                                 \
    X(errors_denied, "commands refused: never forwarded or TTL rules")                                                 \
    X(errors_noperm, "commands refused: user rights")                                                                  \
    X(errors_noauth, "commands refused: not authenticated")                                                            \
    X(errors_unavailable, "requests answered -UNAVAILABLE")                                                            \
    X(errors_protocol, "client protocol errors")                                                                       \
    X(errors_other, "other error replies made by keygate")                                                             \
    X(auth_failures, "failed AUTH attempts (AUTH and HELLO ... AUTH with a wrong password)")                           \
    X(backend_connects, "backend connections established")                                                             \
    X(backend_failures, "backend connections lost or failed")                                                          \
    X(backend_writes, "batches of requests written to backend connections")                                            \
    X(backend_timeouts, "backend connections closed by backend-timeout")                                               \
    X(cluster_redirects, "requests sent again after a cluster -MOVED or -ASK")                                         \
    X(cluster_retries, "requests sent again after -TRYAGAIN, -CLUSTERDOWN or no reachable slot owner")                 \
    X(cluster_refreshes, "cluster slot maps read (CLUSTER SLOTS)")                                                     \
    X(cluster_scripts_loaded, "SCRIPT LOADs sent to a cluster node after its -NOSCRIPT to an EVALSHA (sent again)")    \
    X(cluster_nodes_full, "node addresses left without an owner entry: the worker's node table was full")              \
    X(replicas_waits, "WAITs sent for replicas=N writes (one per group of held writes)")                               \
    X(replicas_timeouts, "replicas=N writes answered -NOREPLICAS (too few replicas confirmed, or no check)")           \
    X(switch_failures, "requests of a sentinel instance failed -UNAVAILABLE by a lost primary connection")             \
    X(near_cache_xadd_failures, "near-cache writes that ran but whose invalidation XADD failed (-INVALIDATION)")       \
    X(clients_output_limit, "clients closed over their output limit")                                                  \
    X(clients_window_waits, "times a client's requests waited for its reply window")                                   \
    X(clients_query_limit, "clients closed: a MULTI over max-request-size")                                            \
    X(clients_evicted, "clients closed: the largest while over max-memory")                                            \
    X(clients_timed_out, "clients closed by client-timeout or client-header-timeout")                                  \
    X(bytes_from_clients, "bytes read from clients")                                                                   \
    X(bytes_to_clients, "bytes written to clients")

/* ---- per-namespace series ----
 * Each registry entry is given a slot (stats_ns_slot, at config load) in a process-wide,
 * append-only label table: a reload keeps the slots of unchanged entries and appends new
 * ones, so a worker's per-slot array stays valid and its counters monotonic. Slot 0 is
 * namespace="" (a command naming no key, NONAMESPACE); past STATS_NS_MAX labels every new
 * entry shares the last slot, namespace="(overflow)". No label value ever comes from a
 * client: keys are never labels. */
#define STATS_NS_MAX 1024
#define STATS_NS_NONE 0
#define STATS_NS_OVERFLOW (STATS_NS_MAX - 1)

/* Command classes: by the command table's write / readonly flags; the rest (no key,
 * local, pub/sub, scripts without flags) are "other". */
enum stats_class { STATS_READ = 0, STATS_WRITE, STATS_OTHER, STATS_NCLASSES };

/* Codes of keygate's own error replies, counted per namespace (bounded). */
#define STATS_REFUSED_CODES(X) X(NONAMESPACE) X(CROSSINSTANCE) X(DENIED) X(NOPERM) X(NOAUTH) X(UNAVAILABLE) X(OTHER)
/* Codes of the backend's error replies passed through (bounded: never the raw word). */
#define STATS_BACKEND_CODES(X)                                                                                         \
    X(OOM) X(WRONGTYPE) X(BUSY) X(NOSCRIPT) X(READONLY) X(MISCONF) X(LOADING) X(EXECABORT) X(NOPERM) X(ERR) X(OTHER)

#define STATS_ENUM_REFUSED(c) STATS_REFUSED_##c,
enum stats_refused { STATS_REFUSED_CODES(STATS_ENUM_REFUSED) STATS_NREFUSED };
#undef STATS_ENUM_REFUSED
#define STATS_ENUM_BACKEND(c) STATS_BACKEND_##c,
enum stats_backend_code { STATS_BACKEND_CODES(STATS_ENUM_BACKEND) STATS_NBACKEND_CODES };
#undef STATS_ENUM_BACKEND

struct stats_ns {
    uint64_t commands[STATS_NCLASSES];
    uint64_t refused[STATS_NREFUSED];
    uint64_t ttl_injected;
    uint64_t ttl_refused; /* client TTLs over max-ttl (-DENIED ... above max-ttl) */
    uint64_t received_bytes;
    uint64_t sent_bytes;
    uint64_t backend_errors[STATS_NBACKEND_CODES];
    uint64_t budget_refused; /* writes refused -OOM namespace '...' is over its budget (budget.h): by keygate
                                or by its check script (then not among the backend's OOM errors) */
};

/* The first words of a budget refusal (budget.h's BUDGET_ERROR_PREFIX, without the '-'). */
#define STATS_BUDGET_ERROR "OOM namespace '"

/* ---- latency histograms: upper bounds 50 us .. 5 s (ns), plus +Inf ---- */
#define STATS_HIST_BOUNDS_LIST                                                                                         \
    50000ull, 100000ull, 250000ull, 500000ull, 1000000ull, 2500000ull, 5000000ull, 10000000ull, 25000000ull,           \
        50000000ull, 100000000ull, 250000000ull, 500000000ull, 1000000000ull, 2500000000ull, 5000000000ull
#define STATS_HIST_BOUNDS_NS                                                                                           \
    {                                                                                                                  \
        STATS_HIST_BOUNDS_LIST                                                                                         \
    }
#define STATS_HIST_NBOUNDS 16

/* bucket[i]: observations in (bound[i-1], bound[i]]; bucket[NBOUNDS]: above the last.
 * Not cumulative (one increment an observation); the count is their sum. */
struct stats_hist {
    uint64_t bucket[STATS_HIST_NBOUNDS + 1];
    uint64_t sum_ns;
};

/* Instances a histogram array holds (config.h's CONFIG_MAX_INSTANCES fits: asserted there). */
#define STATS_MAX_INSTANCES 8

/* A namespace slot and a command class in one number: slot << 2 | class. */
static inline uint32_t stats_key(unsigned slot, enum stats_class cls)
{
    return (uint32_t)slot << 2 | (uint32_t)cls;
}
#define STATS_KEY_SLOT(key) ((key) >> 2)
#define STATS_KEY_CLASS(key) ((key)&3u)

/* Replies that went out back to back with the same read time and key (namespace, class):
 * counted as one run (the sum of their bytes, one histogram update for n) when it ends. */
struct stats_run {
    uint64_t t0_ns; /* UINT64_MAX: no run */
    uint64_t bytes;
    uint32_t n;
    uint32_t key;
};

/* Commands parsed back to back with the same key: one counter update for n. */
struct stats_command_run {
    uint64_t bytes;
    uint32_t n;
    uint32_t key;
};

/* What a request carries for its stats: when it was read, its key (namespace slot and
 * class), the instance it went to (-1: none). */
struct stats_mark {
    uint64_t t0_ns;
    uint32_t key;
    int32_t instance;
};

/*
 * Report mode and the default line (issue 13): what enforcement would refuse or change, per
 * registry entry (its index; the default line's is the registry's count) and reason.
 * X(id, the code label of keygate_report_would_refuse_total ("" for would-inject-ttl), log word)
 */
#define STATS_REPORT_REASONS(X)                                                                                        \
    X(NONAMESPACE, "NONAMESPACE", "would-refuse NONAMESPACE")                                                          \
    X(CROSSINSTANCE, "CROSSINSTANCE", "would-refuse CROSSINSTANCE")                                                    \
    X(MAXTTL, "MAXTTL", "would-refuse max-ttl")                                                                        \
    X(PERSIST, "PERSIST", "would-refuse PERSIST")                                                                      \
    X(NOPERM, "NOPERM", "would-refuse NOPERM")                                                                         \
    X(INJECT_TTL, "", "would-inject-ttl")

enum stats_report_reason {
#define STATS_REPORT_ENUM(id, code, word) STATS_REPORT_##id,
    STATS_REPORT_REASONS(STATS_REPORT_ENUM)
#undef STATS_REPORT_ENUM
        STATS_REPORT_NREASONS
};

/* Registry entries with their own report counters; entries at or past the last slot share it. */
#define STATS_REPORT_SLOTS 512

/* The report block of one worker: counters (read by admin: relaxed atomics) and the
 * worker-private state of its rate-limited log lines. */
struct stats_report {
    uint64_t count[STATS_REPORT_SLOTS][STATS_REPORT_NREASONS];
    uint64_t unregistered[2]; /* keys [0] and channels [1] taken by the default line */
    /* rate-limited logging, the worker's own: per slot and reason, and per kind of unregistered */
    int64_t logged_ms[STATS_REPORT_SLOTS][STATS_REPORT_NREASONS];
    uint32_t unlogged[STATS_REPORT_SLOTS][STATS_REPORT_NREASONS];
    int64_t unregistered_logged_ms[2];
    uint32_t unregistered_unlogged[2];
};

struct stats {
#define STATS_FIELD(name, help) uint64_t name;
    STATS_COUNTERS(STATS_FIELD)
#undef STATS_FIELD
    uint64_t now_ns;     /* the worker's cached monotonic clock (stats_clock: once a read batch) */
    struct stats_ns *ns; /* STATS_NS_MAX slots, allocated at the first command (atomic pointer) */
    struct stats_hist backend_latency[STATS_MAX_INSTANCES]; /* request written -> reply framed */
    struct stats_hist request_hold[STATS_MAX_INSTANCES];    /* a request's wait for its owner (cluster) or primary
                                                               (sentinel): first wait -> sent again, or given up */
    struct stats_hist request_duration[STATS_NCLASSES];     /* request read -> reply written */
    uint64_t rejected_writes[STATS_MAX_INSTANCES];          /* -OOM replies seen per instance */
    struct stats_run run;                                   /* replies not yet counted (stats_reply_out) */
    struct stats_command_run commands;                      /* commands not yet counted (stats_command) */
    struct stats_report report; /* issue 13: stats_report_* below (kept apart from the X list) */
};

/* Single writer (the owning worker), any reader: relaxed atomics, no lock. */
#define STAT_ADD(st, field, n)                                                                                         \
    __atomic_store_n(&(st)->field, __atomic_load_n(&(st)->field, __ATOMIC_RELAXED) + (n), __ATOMIC_RELAXED)
#define STAT_INC(st, field) STAT_ADD(st, field, 1)
#define STATS_BUMP(p, n) __atomic_store_n((p), __atomic_load_n((p), __ATOMIC_RELAXED) + (n), __ATOMIC_RELAXED)

/* Sum the counters of n stats blocks into out (the STATS_COUNTERS fields; the rest is zeroed). */
void stats_sum(const struct stats *blocks, size_t stride, int n, struct stats *out);

/* How often one (namespace, reason) pair, or one kind of unregistered name, is logged. */
#define STATS_REPORT_LOG_INTERVAL_MS 10000

/* The slot of registry entry `index` (the last slot is shared past it). */
static inline uint32_t stats_report_slot(uint32_t index)
{
    return index < STATS_REPORT_SLOTS ? index : STATS_REPORT_SLOTS - 1;
}

/*
 * Count one report event of entry `index` (its slot) for `reason`, and say whether to log it:
 * returns the number of events the log line must carry (this one and those not logged since
 * the last line) when the last line of this pair is STATS_REPORT_LOG_INTERVAL_MS old (or
 * there was none), else 0. Owning worker only.
 */
uint32_t stats_report_note(struct stats *st, uint32_t index, enum stats_report_reason reason, int64_t now_ms);

/* The same for n names taken by the default line (kind 0 keys, 1 channels). */
uint32_t stats_unregistered_note(struct stats *st, int kind, uint32_t n, int64_t now_ms);

/* Sum of one report counter over n stats blocks `stride` bytes apart (any thread). */
uint64_t stats_report_sum(const struct stats *blocks, size_t stride, int n, uint32_t slot,
                          enum stats_report_reason reason);

/* Sum of the unregistered counter of `kind` over n stats blocks (any thread). */
uint64_t stats_unregistered_sum(const struct stats *blocks, size_t stride, int n, int kind);

/* The code label and the log words of a reason. */
const char *stats_report_code(enum stats_report_reason reason);
const char *stats_report_word(enum stats_report_reason reason);

/* Append v as a Prometheus label value (the text between the quotes): \ " and newline escaped. */
void stats_prom_label_value(struct bytebuf *out, const char *v);

/* ---- recording (the owning worker only) ---- */

/* Count the pending runs: of commands (stats_command), and of replies (stats_reply_out) at
 * st->now_ns, the time they went out. */
void stats_flush(struct stats *st);

/* Read the monotonic clock into st->now_ns and return it (once per read batch); the pending
 * runs, the replies of which went out at the old now, are counted first. */
uint64_t stats_clock(struct stats *st);

/* st->ns, allocated on first use (STATS_NS_MAX zeroed slots, freed by stats_free). */
struct stats_ns *stats_ns_alloc(struct stats *st);

static inline struct stats_ns *stats_ns_of(struct stats *st)
{
    struct stats_ns *ns = st->ns;
    return __builtin_expect(ns != NULL, 1) ? ns : stats_ns_alloc(st);
}

/* Free what st allocated (at worker exit). */
void stats_free(struct stats *st);

/* The bucket of an observation of `ns` nanoseconds: the first i with ns <= bound[i], or
 * STATS_HIST_NBOUNDS (+Inf). Constant time: consecutive bounds are at least 2x apart, so
 * [2^k, 2^(k+1)) holds at most one of them; first[k] is the first bound >= 2^k, and one
 * comparison settles it (the UINT64_MAX sentinel closes +Inf). Pure. */
static inline int stats_hist_bucket(uint64_t ns)
{
    static const uint8_t first[64] = {0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
                                      1,  2,  3,  4,  5,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 14,
                                      15, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
                                      16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16};
    static const uint64_t bounds[STATS_HIST_NBOUNDS + 1] = {STATS_HIST_BOUNDS_LIST, UINT64_MAX};
    int i = first[63 - __builtin_clzll(ns | 1)];
    return i + (ns > bounds[i]);
}

/* n observations of `ns` each. */
static inline void stats_hist_add(struct stats_hist *h, uint64_t ns, uint64_t n)
{
    STATS_BUMP(&h->bucket[stats_hist_bucket(ns)], n);
    STATS_BUMP(&h->sum_ns, ns * n);
}

/*
 * A command was parsed: count it under `key` (stats_key: its namespace and class), with its
 * request bytes, and return the mark its request carries (read time = st->now_ns).
 * `instance` is the instance it goes to, -1 for none. Commands of one pipeline share the
 * key: they join the pending run, counted by stats_flush (as replies, see stats_reply_out).
 */
static inline struct stats_mark stats_command(struct stats *st, uint32_t key, int instance, size_t bytes)
{
    struct stats_command_run *r = &st->commands;
    if (key != r->key) {
        stats_flush(st);
        r->key = key;
    }
    r->n++;
    r->bytes += bytes;
    return (struct stats_mark){.t0_ns = st->now_ns, .key = key, .instance = instance};
}

/* The same command counted once more, under another namespace of its keys (`key`): its
 * commands counter only (bytes and the rest go to the first key's namespace). */
void stats_command_more(struct stats *st, uint32_t key);

/* The request's reply (len bytes) goes to its client now: sent bytes, and its duration
 * from read to now (st->now_ns) in the class histogram. A pipeline's replies share read time,
 * namespace, class and now: they join the pending run, counted by stats_flush (at the next
 * stats_clock, or in the worker's flush step, before the iteration's replies are written). */
static inline void stats_reply_out(struct stats *st, const struct stats_mark *m, size_t len)
{
    struct stats_run *r = &st->run;
    if (m->t0_ns != r->t0_ns || m->key != r->key) {
        stats_flush(st);
        r->t0_ns = m->t0_ns;
        r->key = m->key;
    }
    r->n++;
    r->bytes += len;
}

/* n backend replies were framed on `instance`, `ns` after the write of their batch. */
static inline void stats_request_hold(struct stats *st, int instance, uint64_t ns)
{
    if (instance >= 0 && instance < STATS_MAX_INSTANCES) stats_hist_add(&st->request_hold[instance], ns, 1);
}

static inline void stats_backend_latency(struct stats *st, int instance, uint64_t ns, uint64_t n)
{
    if (instance >= 0 && instance < STATS_MAX_INSTANCES) stats_hist_add(&st->backend_latency[instance], ns, n);
}

/* keygate refuses the request with `error` ("CODE message"): its errors_* counter, plus the
 * namespace's refused-by-code counter and, for a client TTL above max-ttl, ttl_refused. */
void stats_refused(struct stats *st, const struct stats_mark *m, const char *error);

/* The backend's reply to the request is the error reply[0..len) ("-CODE ..."): counted per
 * namespace by code, and an -OOM as a rejected write of the mark's instance. */
void stats_backend_error(struct stats *st, const struct stats_mark *m, const char *reply, size_t len)
    __attribute__((cold));

/* The request was given the registry's TTL (keygate_namespace_ttl_injected_total). */
static inline void stats_ttl_injected(struct stats *st, const struct stats_mark *m)
{
    STAT_INC(st, ttl_injected);
    STATS_BUMP(&stats_ns_of(st)[STATS_KEY_SLOT(m->key)].ttl_injected, 1);
}

/* The fixed code of an error reply's first word (without '-'): an index of STATS_BACKEND_CODES. Pure. */
enum stats_backend_code stats_backend_code(const char *word, size_t len);

/* ---- labels (the main thread, at config load) ---- */

/* The slot of the namespace (prefix, kind, instance name, owner): an existing one when the
 * same labels were bound before, else a new one (STATS_NS_OVERFLOW once the table is full). */
unsigned stats_ns_slot(const char *prefix, int channel, const char *instance, const char *owner);

/* Forget every label (tests). */
void stats_ns_reset(void);

/* ---- reading: sums over n blocks (`stride` bytes apart), any thread ---- */

/* Slot `slot` summed over the workers. */
void stats_ns_sum(const struct stats *blocks, size_t stride, int n, unsigned slot, struct stats_ns *out);

/* Histogram sums: the backend latency of `instance`, the request duration of `cls`. */
void stats_hist_sum_backend(const struct stats *blocks, size_t stride, int n, int instance, struct stats_hist *out);

/* The same for the request-hold histograms of `instance`. */
void stats_hist_sum_hold(const struct stats *blocks, size_t stride, int n, int instance, struct stats_hist *out);
void stats_hist_sum_request(const struct stats *blocks, size_t stride, int n, int cls, struct stats_hist *out);

/* The value below which `q` (0..1) of the observations fall, in microseconds, read from the
 * buckets as Prometheus's histogram_quantile does (linear within a bucket; the last bound
 * for +Inf). 0 with no observations. Pure. */
double stats_hist_quantile_us(const struct stats_hist *h, double q);

/*
 * The Prometheus text of the per-namespace series (keygate_namespace_*) and the two
 * histograms (keygate_backend_latency_seconds{backend}, keygate_request_duration_seconds
 * {class}), appended to out. `instances` names the instances, the backend label (ninstances).
 */
void stats_format_prometheus(const struct stats *blocks, size_t stride, int n, const char *const *instances,
                             size_t ninstances, struct bytebuf *out);

/* A per-namespace gauge: `name{namespace,backend,owner} values[slot]` for each bound slot
 * with present[slot] set (values and present index slots, STATS_NS_MAX of each). */
void stats_format_ns_gauge(const char *name, const char *help, const uint64_t *values, const unsigned char *present,
                           struct bytebuf *out);

/*
 * INFO's lines for the namespaces section (CRLF-ended): one "nsstat_<slot>:prefix=P,
 * instance=I,owner=O,cmd_read=..,..." line per bound slot, then latency percentiles
 * (as INFO latencystats): "latency_percentiles_usec_backend_<instance>:p50=..,p99=..,p99.9=.."
 * and "latency_percentiles_usec_request_<class>:...".
 */
void stats_format_info(const struct stats *blocks, size_t stride, int n, const char *const *instances,
                       size_t ninstances, struct bytebuf *out);

#endif
