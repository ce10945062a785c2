/* topology.h: the backend topology guard (DESIGN.md §4): INFO checks and the per-instance results. */
#ifndef KEYGATE_TOPOLOGY_H
#define KEYGATE_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct proxy;

/* Room for one instance's problem lines; longer lists are cut at a line boundary. */
#define TOPOLOGY_PROBLEMS_MAX 1024

/*
 * Check one instance's `INFO` reply text (the bulk string's contents, "field:value"
 * lines ending in CRLF or LF) against the rules for its role, chosen by name:
 *   every instance  redis_version 7.0 or newer
 *   "durable"       maxmemory_policy:noeviction and aof_enabled:1
 *   "cache"         maxmemory > 0 and maxmemory_policy allkeys-lru, allkeys-lfu,
 *                   allkeys-random or volatile-*
 * A field the rule needs and INFO lacks is a problem too. Writes one line per problem
 * ("instance 'cache' maxmemory-policy is noeviction, must evict ...\n") into
 * problems[0..len) (always NUL-terminated, "" when none) and returns how many there
 * are (also those that did not fit). Pure: no I/O, no state.
 */
int topology_check(const char *instance_name, const char *info_text, char *problems, size_t len);

/*
 * Record the result of the latest check of `instance` (config index): `problems` as
 * topology_check wrote it, "" when the instance is fine. Any thread may call it; a
 * mutex guards the table (not the hot path: once per backend connect). Logs each
 * problem as a warning when the result changed, and "ok" when problems went away.
 * The results are process-wide (one proxy per process); `p` names that proxy.
 */
void topology_record(struct proxy *p, int instance, const char *problems);

/*
 * The backend hook: `reply[0..len)` is the framed RESP reply to keygate's own `INFO`
 * at connect (a bulk string, or an error). Checks it with topology_check under the
 * instance's `name` and records the result with topology_record; an error reply or a
 * non-bulk reply is recorded as a problem ("instance 'cache' INFO failed: NOPERM ...").
 * Returns 1, recording nothing, when the instance is still loading its data (`loading:1`:
 * Redis then reports aof_enabled:0 and other fields it has not read yet): the caller asks
 * again later. Else 0.
 */
int topology_on_info_reply(struct proxy *p, int instance, const char *name, const char *reply, size_t len);

/*
 * The same for INFO's text (NUL-terminated) read another way (the INFO poller's own
 * connection, sampler.c): checked and recorded, with its capacity fields. Returns 1,
 * recording nothing, while the instance is loading; else 0.
 */
int topology_on_info_text(struct proxy *p, int instance, const char *name, const char *text);

/*
 * Copy the recorded problems of `instance` into buf[0..len) ("" when none or not yet
 * checked). Returns 1 when the instance was checked at least once, else 0.
 */
int topology_get(const struct proxy *p, int instance, char *buf, size_t len);

/* The capacity fields of one instance's INFO (keygate_backend_* gauges). */
struct topology_capacity {
    int valid;                  /* 1 once read from an INFO reply */
    int64_t read_ms;            /* monotonic ms of that reading (topology_get_capacity) */
    uint64_t used_memory;       /* used_memory */
    uint64_t maxmemory;         /* maxmemory (0: no limit) */
    uint64_t evicted_keys;      /* evicted_keys */
    uint64_t expired_keys;      /* expired_keys */
    uint64_t keyspace_hits;     /* keyspace_hits */
    uint64_t keyspace_misses;   /* keyspace_misses */
    uint64_t connected_clients; /* connected_clients */
    uint64_t ops_per_sec;       /* instantaneous_ops_per_sec */
    int aof_enabled;            /* aof_enabled:1 */
    int aof_last_write_ok;      /* aof_last_write_status:ok */
    int aof_last_rewrite_ok;    /* aof_last_bgrewrite_status:ok */
    char role[16];              /* role: master / slave ("" when INFO lacks it) */
};

/*
 * Read the capacity fields out of INFO text (as topology_check takes it) into *out
 * (read_ms left 0). A field INFO lacks reads 0 (role ""). Returns 0, or -1 when the
 * text has neither used_memory nor maxmemory (not an INFO memory section). Pure.
 */
int topology_parse_capacity(const char *info_text, struct topology_capacity *out) KG_MUST_CHECK;

/* The memory headroom ratio (maxmemory - used_memory) / maxmemory, 0 when used is over the
 * limit; -1 when there is no limit (maxmemory 0). Pure. */
double topology_headroom(const struct topology_capacity *c);

/* The last capacity reading of `instance` (valid 0 when none yet). Any thread. */
void topology_get_capacity(const struct proxy *p, int instance, struct topology_capacity *out);

/* Forget every recorded result (tests). */
void topology_reset(void);

#endif
