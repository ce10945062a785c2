/* nodes.h: each worker's node model of every instance: which server owns a slot, and the pools of connections to each. */
#ifndef KEYGATE_NODES_H
#define KEYGATE_NODES_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "slotmap.h"

/*
 * Every instance is a table of nodes (servers) and a slot map over them, the same for every
 * kind: a single-server instance is one node owning every slot, never read again; a sentinel
 * instance one node that moves (every slot belongs to the primary its watcher confirmed,
 * sentinelwatch.h, none while it confirms none); a cluster its slot map (CLUSTER SLOTS of any
 * node, read at start, every cluster-refresh, and soon after a -MOVED or a lost node
 * connection, never more often than every NODES_REFRESH_MIN_MS). Each node has a pool of shared
 * connections per protocol (RESP2 / RESP3), opened on first use; dedicated (pinned)
 * connections of the instance are counted (max-pinned) and listed in the table's pins.
 *
 * A node that owns no slot in a map just adopted (a failed-over primary, a node resharded
 * empty, an ASK target) has its shared connections closed once nothing is owed on them, and
 * they are not reconnected until the node is named again. A full table reuses the entry of a
 * node that left the map with nothing pending or pinned on it; when none is free the address
 * is left without an entry, logged and counted (cluster_nodes_full), never silent.
 *
 * The backend module knows connections only: it reports a lost shared connection and the
 * answer to the table's CLUSTER SLOTS through struct backend_hooks (nodes_lost,
 * nodes_slots_reply, which the router's hooks point at), never by calling up.
 */
#define NODES_REFRESH_MIN_MS 500
#define NODES_SENTINEL_POLL_MS 100

enum nodes_kind {
    NODES_ONE = 0, /* one server, owning every slot */
    NODES_MOVES,   /* a sentinel instance: one primary at a time, which may move */
    NODES_MAP      /* a cluster: slots spread over primaries, redirects */
};

struct nodes {
    struct worker *worker;
    int instance;
    enum nodes_kind kind;
    SSL_CTX *ssl_ctx;                                /* the instance's (NULL: plain TCP) */
    struct slotmap map;                              /* node entries (indexes are stable: they index pools) */
    struct slotmap *parsed;                          /* NODES_MAP: the CLUSTER SLOTS reply being adopted */
    struct backend_pool pools[SLOTMAP_MAX_NODES][2]; /* shared connections per node, RESP2 / RESP3 */
    struct backend_pins pins;                        /* the instance's dedicated connections */
    int refreshing;                                  /* a CLUSTER SLOTS is in flight (on `asking`) */
    struct backend *asking;                          /* the connection carrying it */
    int next_seed;                                   /* the seed node asked when no node is up */
    int64_t last_refresh_ms;                         /* monotonic: when the map was last asked for */
    struct event *soon;                              /* a refresh held back by NODES_REFRESH_MIN_MS */
    struct event *periodic;                          /* every cluster-refresh (sentinel: SENTINEL_POLL_MS) */
    uint64_t generation;                             /* NODES_MOVES: the watcher's state last adopted */
    int adopted;                                     /* generation holds one */
    int full_logged;                                 /* the table's being full is logged (until it is not) */
};

/*
 * What a caller wants a connection for (nodes_conn): the node owning `slot` (-1: any node, for
 * keyless commands; slot 0's owner) or, with host set, the node host:port (a -ASK target, added
 * to the table with no slot when new); in the pool of protocol resp3; shared (client_id picks
 * the pool's connection, fixed per client so one client's requests keep their order) or, with
 * `pinned`, a dedicated connection for `owner` (NULL: keygate's own, as a replicas= WAIT).
 */
struct node_want {
    int slot;
    const char *host; /* NULL: by slot */
    int port;
    int resp3;
    int pinned;
    struct client *owner;
    uint64_t client_id;
};

/*
 * The one getter of a connection. Shared: NULL when the node is not known yet (a slot with no
 * owner, a full table) or its connection is down (it keeps reconnecting; requests are staged on
 * a connection still connecting). Pinned: an idle dedicated connection of that node and
 * protocol, or a new one; NULL at max-pinned, when the slot's owner is not known, or when it
 * cannot even start connecting. (nodes_conn_open is its out-of-line half: pins, ASK targets,
 * pools to open; callers use nodes_conn.)
 */
struct backend *nodes_conn_open(struct worker *w, int instance, const struct node_want *want);
static inline struct backend *nodes_conn(struct worker *w, int instance, const struct node_want *want)
{
    /* the common case inline (a shared connection of an open pool): every request asks */
    struct nodes *t = w->nodes[instance];
    if (__builtin_expect(!t || want->host || want->pinned, 0)) return nodes_conn_open(w, instance, want);
    int node = t->map.owner[want->slot >= 0 ? want->slot : 0];
    if (node < 0) return NULL; /* the slot's owner is not known yet */
    const struct backend_pool *pool = &t->pools[node][want->resp3 ? 1 : 0];
    if (__builtin_expect(pool->nconns == 0 || pool->retired, 0)) return nodes_conn_open(w, instance, want);
    struct backend *b = &pool->conns[want->client_id % (uint64_t)pool->nconns];
    return b->state == BACKEND_DOWN ? NULL : b;
}

/* May requests for `instance` be told to go elsewhere, or find their slot's owner unknown for a
 * while (a cluster, a sentinel instance)? Then they carry a slot, wait for an owner instead of
 * failing at once, and keep their bytes to be sent again. */
int nodes_may_move(const struct worker *w, int instance);

/* Is `instance`'s one primary chosen by sentinels (its failovers are followed: requests wait
 * failover-hold, a -READONLY from a demoted primary is sent again)? */
int nodes_follow_failover(const struct worker *w, int instance);

/* Does `instance` spread its slots over several primaries (a cluster: per-node commands,
 * redirects, CROSSSLOT)? */
int nodes_sharded(const struct worker *w, int instance);

/* The node owning `slot` of `instance` (its index, as struct backend's `node`); -1 when not known,
 * and for a single server (whose one node owns every slot: nothing to compare). */
int nodes_owner(const struct worker *w, int instance, int slot);

/* Who owns `slot` of `instance` now, as one number for a node's address (its entry's id, set with
 * the address: slotmap_node_set), for comparing later (a WAIT after a write); 0 for a single server, which
 * never moves; ~0 when the owner is not known. */
uint64_t nodes_owner_id(const struct worker *w, int instance, int slot);

/* Does the node of address number `id` (nodes_owner_id) own some slot of `instance` in the map
 * now? 0 when it owns none (it left, was demoted by a failover, or was emptied), or is unknown. */
int nodes_id_serves(const struct worker *w, int instance, uint64_t id);

/* The address of node `node` of `instance`. */
void nodes_address(const struct worker *w, int instance, int node, const char **host, int *port);

/*
 * The primaries of `instance` as this worker's map has them, each named by one slot it owns
 * (its lowest), ordered by address (host, then port): the same order in every worker whose map
 * agrees, so a SCAN cursor's node rank (slotmap.h) keeps its meaning from call to call. Fills
 * slots[0..max) and returns how many; 0 when the map is not known yet or `instance` is not sharded.
 */
int nodes_primaries(const struct worker *w, int instance, int *slots, int max);

/* A -MOVED: `slot` of `instance` is now host:port's, and the whole map is read again soon. */
void nodes_moved(struct worker *w, int instance, unsigned slot, const char *host, int port);

/* Where `instance`'s slots are may have changed (a lost node, a demoted primary): read the map
 * again now, or once NODES_REFRESH_MIN_MS since the last read passed; a sentinel instance asks
 * its watcher to check and adopts what it knows. Nothing for a single server. */
void nodes_refresh(struct worker *w, int instance);

/* Hooks (struct backend_hooks): the shared connection b closed; the answer to a CLUSTER SLOTS. */
void nodes_lost(struct backend *b);
void nodes_slots_reply(struct backend *b, const char *reply, size_t len);

/* Build every instance's table of worker w, reporting to `hooks`, and start connecting. 0 on success. */
int nodes_start(struct worker *w, const struct backend_hooks *hooks) KG_MUST_CHECK;

/* Close every connection of w and free the tables. */
void nodes_free(struct worker *w);

/* What INFO and /metrics show of an instance's shared connections. */
struct nodes_status {
    int connections;  /* shared connections, both protocols (a RESP3 pool once opened), of nodes in the map */
    int up;           /* of them READY */
    size_t in_flight; /* replies owed on them */
};
/* The shared connections of `instance` over every worker of p. Called from any thread: the
 * tables belong to the workers, so this is a snapshot (relaxed loads; a pool's nconns is
 * published after its connections exist). */
void nodes_status(const struct proxy *p, int instance, struct nodes_status *out);

/* Why a single-server instance's shared connections are down, when the clients' -UNAVAILABLE
 * should say it: its host name did not resolve ("cannot resolve NAME: why"). NULL for any other
 * reason, while one is up, and for other kinds. */
const char *nodes_down_why(const struct worker *w, int instance);

/* Are max-pinned dedicated connections to `instance` alive on w (a pin would fail for that)? */
int nodes_pin_full(const struct worker *w, int instance);

/* ---- the table itself, without connections or a loop (unit-tested) ---- */

/* An empty table of `kind` for `instance` of w (NODES_ONE: its one node owning every slot). */
struct nodes *nodes_new(struct worker *w, int instance, enum nodes_kind kind);

/* Free t's memory (its connections must be closed: nodes_free). */
void nodes_delete(struct nodes *t);

/*
 * The index of node host:port in t, added (with no slot) when new: in a free entry or, when the
 * table is full, in the entry of a node that owns no slot, has no open shared connection (never
 * opened, or retired) and no dedicated one, and is not in keep (may be NULL: entries the caller
 * hands out meanwhile). -1 when none is free: logged once until one is, and counted.
 */
int nodes_index(struct nodes *t, const char *host, int port, const unsigned char *keep);

/* t's map takes the owners of *parsed (a CLUSTER SLOTS reply); nodes left with no slot are
 * retired (but `asked`, the node whose connection delivers the reply; -1: none). */
void nodes_adopt_map(struct nodes *t, const struct slotmap *parsed, int asked);

/* A sentinel instance's primary is host:port (confirmed) or none (confirmed 0): every slot is
 * its. Returns its node, -1 for none (or a full table). */
int nodes_adopt_primary(struct nodes *t, int confirmed, const char *host, int port);

#endif
