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

struct stats {
#define STATS_FIELD(name, help) uint64_t name;
    STATS_COUNTERS(STATS_FIELD)
#undef STATS_FIELD
};

/* Single writer (the owning worker), any reader: relaxed atomics, no lock. */
#define STAT_ADD(st, field, n)                                                                                         \
    __atomic_store_n(&(st)->field, __atomic_load_n(&(st)->field, __ATOMIC_RELAXED) + (n), __ATOMIC_RELAXED)
#define STAT_INC(st, field) STAT_ADD(st, field, 1)

/* Sum the counters of n stats blocks into out. */
void stats_sum(const struct stats *blocks, size_t stride, int n, struct stats *out);

/* Count an error reply by its code (the first word of `error`). */
void stats_count_error(struct stats *st, const char *error);

#endif
