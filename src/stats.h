/* stats.h: per-worker counters from one X-macro list (INFO and /metrics read the same list). */
#ifndef KEYGATE_STATS_H
#define KEYGATE_STATS_H

#include <stdint.h>
#include <stdio.h>

/* X(field, help text) — every counter keygate keeps. */
#define STATS_COUNTERS(X)                                                                                              \
    X(connections_received, "client connections accepted")                                                             \
    X(connections_rejected, "client connections refused at max-clients")                                               \
    X(accept_paused, "times accepting paused: out of file descriptors")                                                \
    X(commands_processed, "client commands handled")                                                                   \
    X(commands_forwarded, "commands sent to a backend instance")                                                       \
    X(commands_local, "commands answered by keygate itself")                                                           \
    X(ttl_injected, "writes given the registry's TTL")                                                                 \
    X(errors_nonamespace, "commands refused: key in no namespace")                                                     \
    X(errors_crossinstance, "commands refused: keys on two instances")                                                 \
    X(errors_denied, "commands refused: never forwarded or TTL rules")                                                 \
    X(errors_noperm, "commands refused: user rights")                                                                  \
    X(errors_noauth, "commands refused: not authenticated")                                                            \
    X(errors_unavailable, "requests answered -UNAVAILABLE")                                                            \
    X(errors_protocol, "client protocol errors")                                                                       \
    X(errors_other, "other error replies made by keygate")                                                             \
    X(backend_connects, "backend connections established")                                                             \
    X(backend_failures, "backend connections lost or failed")                                                          \
    X(backend_writes, "batches of requests written to backend connections")                                            \
    X(backend_timeouts, "backend connections closed by backend-timeout")                                               \
    X(clients_output_limit, "clients closed over client-output-hard-limit")                                            \
    X(clients_query_limit, "clients closed: a MULTI over max-request-size")                                            \
    X(clients_evicted, "clients closed: the largest while over max-memory")                                            \
    X(clients_timed_out, "clients closed by client-timeout or client-header-timeout")                                  \
    X(bytes_from_clients, "bytes read from clients")                                                                   \
    X(bytes_to_clients, "bytes written to clients")

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
    struct stats_report report; /* issue 13: stats_report_* below (kept apart from the X list) */
};

/* Single writer (the owning worker), any reader: relaxed atomics, no lock. */
#define STAT_ADD(st, field, n)                                                                                         \
    __atomic_store_n(&(st)->field, __atomic_load_n(&(st)->field, __ATOMIC_RELAXED) + (n), __ATOMIC_RELAXED)
#define STAT_INC(st, field) STAT_ADD(st, field, 1)

/* Sum the counters of n stats blocks into out. */
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

/* Count an error reply by its code (the first word of `error`). */
void stats_count_error(struct stats *st, const char *error);

#endif
