/* topology.h: the backend topology guard (DESIGN.md §4): INFO checks and the per-instance results. */
#ifndef KEYGATE_TOPOLOGY_H
#define KEYGATE_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>

#include "slotmap.h"
#include "util.h"

struct proxy;

/* Room for one instance's problem lines (a cluster's: every node's); longer lists are cut at a
 * line boundary. */
#define TOPOLOGY_PROBLEMS_MAX 4096
/* Room for one cluster node's problem lines. */
#define TOPOLOGY_NODE_PROBLEMS_MAX 1024
/* "host:port" of a cluster node (SLOTMAP_HOST_MAX - 1 bytes of host, ':', 5 digits, NUL) */
#define TOPOLOGY_NODE_ADDR_MAX (SLOTMAP_HOST_MAX + 8)

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

/* topology_check for one node (addr "host:port") of a cluster instance: its role's rules, each
 * line naming the node ("instance 'cache' node 127.0.0.1:7001: maxmemory-policy is ..."). Pure. */
int topology_check_node(const char *instance_name, const char *addr, const char *info_text, char *problems, size_t len);

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
 * again later. Else 0. An INFO saying `cluster_enabled:1` (a node of a cluster instance: the
 * hook does not say which) records nothing: the INFO poller checks every primary of a
 * cluster, naming each (topology_record_cluster).
 */
int topology_on_info_reply(struct proxy *p, int instance, const char *name, const char *reply, size_t len);

/*
 * The same for INFO's text (NUL-terminated) read another way (the INFO poller's own
 * connection, sampler.c): checked and recorded, with its capacity fields. Returns 1,
 * recording nothing, while the instance is loading; else 0.
 */
int topology_on_info_text(struct proxy *p, int instance, const char *name, const char *text);

/* Does INFO text say the server is still loading its data (`loading:1`)? Its fields are then not
 * final (aof_enabled:0 whatever the config): not judged, asked again. Pure. */
int topology_info_loading(const char *text);

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

/* The last capacity reading of `instance` (valid 0 when none yet; always 0 for a cluster
 * instance, whose readings are per node: topology_get_nodes). Any thread. */
void topology_get_capacity(const struct proxy *p, int instance, struct topology_capacity *out);

/* One primary of a cluster instance as the INFO poller last read it. */
struct topology_node {
    char addr[TOPOLOGY_NODE_ADDR_MAX]; /* "host:port", as CLUSTER SLOTS names it */
    int up;                            /* 1 when its last INFO was read; 0: unreachable or INFO failed */
    struct topology_capacity capacity; /* its last reading (valid 0 before a first one) */
};

/*
 * Record the INFO poller's round over cluster instance `instance`: its primaries nodes[0..n)
 * (n <= SLOTMAP_MAX_NODES; they replace the previous list) and `problems`, the lines of every
 * node (each naming it) and of the slot map, "" when none: the instance's topology result
 * (topology_get, /healthz, keygate_topology_ok), logged as topology_record logs. Any thread.
 */
void topology_record_cluster(struct proxy *p, int instance, const struct topology_node *nodes, int n,
                             const char *problems);

/* Copy the primaries recorded for cluster instance `instance` into out[0..max); returns how many
 * (0 for a single-server instance or before a first round). Any thread. */
int topology_get_nodes(const struct proxy *p, int instance, struct topology_node *out, int max);

/* Forget every recorded result (tests). */
void topology_reset(void);

#endif
