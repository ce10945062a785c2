/* sampler.h: the background readers: INFO every backend-info-interval, and the namespace sampler (namespace-scan-interval). */
#ifndef KEYGATE_SAMPLER_H
#define KEYGATE_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct proxy;
#include "util.h"

/*
 *  every namespace-scan-interval, one pass, instance after instance (a cluster: primary after
 *  primary, the slot map from the first seed that answers; the counts summed), on its own
 *  connection (syncconn: TLS, AUTH, as `keygate audit` connects):
 *    SCAN cursor COUNT SAMPLER_SCAN_COUNT      (then a SAMPLER_PAUSE_MS pause: rate-limited)
 *      key -> registry_lookup -> its namespace, when that lives on this instance: keys + 1
 *      key of a `depth` namespace -> TYPE (pipelined) -> list/stream/zset: LLEN/XLEN/ZCARD
 *                                    (pipelined) -> depth + length
 *      key of a max-memory namespace (its first BUDGET_MEMORY_SAMPLES) -> MEMORY USAGE (pipelined)
 *    until the cursor is 0 (on every primary of a cluster): the instance's counts replace its
 *    previous ones (and the budgets' estimates: budget_publish); a pass that fails anywhere keeps them
 */
#define SAMPLER_SCAN_COUNT "1000"
#define SAMPLER_PAUSE_MS 50 /* between SCAN calls: at most ~20,000 keys a second per instance */

struct sampler;

/*
 * Start the background readers for cfg: the INFO poller (every backend-info-interval, INFO on
 * a connection of its own per instance, per primary of a cluster instance: the topology guard
 * and the capacity gauges, see sampler.c) and, when namespace-scan-interval is > 0, the namespace sampler (its first pass
 * begins at once). They keep their own copies of the instances and of the registry (read
 * again from cfg's registry file). p is the proxy the topology results are recorded for.
 * Returns NULL when they could not start (logged).
 */
struct sampler *sampler_start(const struct config *cfg, struct proxy *p) KG_MUST_CHECK;

/* The namespace sampler's interval under cfg: namespace-scan-interval, or BUDGET_SCAN_INTERVAL_MS
 * when it is 0 and the registry has a budget (budgets need counts), else 0 (off). */
int64_t sampler_scan_interval(const struct config *cfg);

/* A reload: the next pass uses cfg's registry and interval (sampler_scan_interval; 0 pauses the
 * passes); a sampler whose passes were off starts them. s NULL: no-op. Main thread. */
void sampler_update(struct sampler *s, const struct config *cfg);

/* Stop the thread (a pass in progress ends at its next SCAN call, or when its I/O times out)
 * and free s. NULL is a no-op. */
void sampler_stop(struct sampler *s);

/* The depth command for a TYPE reply (`list`, `stream`, `zset`), NULL for other types. Pure. */
const char *sampler_depth_command(const char *type);

/*
 * Append the sampler's series to out (Prometheus text): keygate_namespace_keys and
 * keygate_namespace_depth (`depth` namespaces) per namespace counted by the last completed
 * pass of its instance, keygate_namespace_scan_age_seconds{instance} (since that pass ended)
 * and keygate_namespace_scan_duration_seconds{instance}. Nothing before a first pass. Any thread.
 */
void sampler_format_prometheus(const char *const *instances, size_t ninstances, struct bytebuf *out);

/* Forget every result (tests). */
void sampler_reset(void);

#endif
