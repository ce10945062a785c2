/* backend.h: connections to the backend instances: socket, TLS, the FIFO of replies owed, batching. */
#ifndef KEYGATE_BACKEND_H
#define KEYGATE_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/event.h>
#include <openssl/ssl.h>

#include "loop.h"
#include "resp.h"

/*
 * One reply owed on a connection. The backend module only counts and orders them; what a
 * reply means is the router's (kind, part): the backend hands each framed reply, with its
 * entry, to the hooks. Entries with `own` set are the connection's own commands at connect
 * (AUTH, HELLO 3 on a RESP3 connection, the topology INFO, a dedicated connection's CLIENT ID),
 * which the backend answers itself.
 */
enum backend_own {
    BACKEND_OWN_NONE = 0,
    BACKEND_OWN_AUTH,
    BACKEND_OWN_HELLO,
    BACKEND_OWN_INFO,
    BACKEND_OWN_ID,
    BACKEND_OWN_SLOTS /* a cluster node's CLUSTER SLOTS: the worker's slot map of its instance */
};

struct pending {
    struct request *req; /* the router's request (NULL for own entries, and the router's own: a replicas= WAIT) */
    uint8_t own;         /* enum backend_own */
    uint8_t kind;        /* the router's: how the reply is used */
    uint16_t part;       /* the router's: a split request's part */
    uint8_t unsent;      /* passed to the fail hook: the entry was staged, never written (Redis never saw it) */
};

/* What a backend reports to the layer above (the router). None of them may close, free or
 * write to the backend it is called for. */
struct backend_hooks {
    /* one framed reply for the FIFO entry pd (taken off the FIFO) */
    void (*deliver)(struct backend *b, const struct pending *pd, const char *reply, size_t len);
    /* b closed with pd still owed: pd's reply will never come */
    void (*fail)(struct backend *b, const struct pending *pd);
    /* a frame from a subscriber connection (messages, confirmations, marker answers) */
    void (*push)(struct backend *b, const char *frame, size_t len);
    /* a reply still arriving holds `partial` bytes: may it be kept whole (1), or must it be
     * dropped as it comes (0: its owner is gone, or would pass its output limit)?
     * pd is NULL on a subscriber connection */
    int (*may_keep)(struct backend *b, const struct pending *pd, size_t partial);
    /* the dedicated connection b closed under its owner, after every entry was failed */
    void (*owner_lost)(struct backend *b, struct client *owner);
};

enum backend_state { BACKEND_DOWN = 0, BACKEND_CONNECTING, BACKEND_READY };

/* One connection to a backend instance, shared and pipelined by many clients. */
struct backend {
    struct worker *worker;
    int instance;  /* config instance index */
    int slot;      /* index in the instance's pool */
    int node;      /* a cluster instance: index of its node in the worker's slot map; -1 otherwise */
    int domain;    /* ordering domain: one per server (backend_would_reorder) */
    uint8_t resp3; /* 1: a RESP3 connection (HELLO 3 sent at connect), for RESP3 clients only */
    enum backend_state state;
    int fd;                  /* -1 while closed */
    SSL *ssl;                /* TLS instances: the session on fd; NULL for plain */
    struct event *rev, *wev; /* fd readable (always armed while open) / writable (only while needed) */
    int tcp_up;              /* the TCP connect finished (a handshake may still be running) */
    struct evdns_getaddrinfo_request *resolving; /* CONNECTING: its host name's lookup (fd is -1 meanwhile) */
    struct evutil_addrinfo *addrs;               /* CONNECTING: the lookup's answer (owned), while connecting */
    struct evutil_addrinfo *next_addr;           /* the address of addrs to try when this connect fails */
    int read_wants_write;                        /* TLS: SSL_read asked for a writable socket */
    int write_wants_read;                        /* TLS: SSL_write asked for a readable socket */
    struct bytebuf wbuf;                         /* the batch being written (out is moved here whole) */
    size_t woff;                                 /* bytes of wbuf already written */
    struct pending *fifo;                        /* ring buffer of replies owed, oldest first */
    size_t fifo_head, fifo_count, fifo_cap;
    struct bytebuf out; /* staged requests: leave together when the connection may write (backend_flush_all) */
    int dirty;          /* on the worker's list of backends to flush (2: inside backend_flush_all) */
    int flush_go;       /* backend_flush_all's decision: -1 nothing to write, 0 wait, 1 write, 2 write unless holding */
    size_t unsent;      /* FIFO entries (at its tail) staged but not written yet */
    char *rbuf;         /* received bytes not yet framed */
    size_t rlen, rcap;
    struct resp_scanner scan;
    int discarding;      /* the reply being framed is dropped as it comes (nobody may keep it) */
    size_t mem_held;     /* bytes counted in the process total (max-memory) */
    struct event *timer; /* DOWN: reconnect backoff; CONNECTING: connect + handshake timeout */
    int backoff_ms;
    int warned_down;       /* "unreachable" logged once per outage and reason */
    char down_reason[128]; /* the reason last logged in this outage: a new one is logged again */
    /* dedicated (pinned) connections only */
    int pinned;            /* 1: not in the shared pool; freed, never reconnected */
    struct client *owner;  /* the client holding it (only passed to the hooks); NULL when idle or releasing */
    int subscriber;        /* pub/sub mode: frames go to the push hook, not the FIFO */
    int release_when_idle; /* back to the idle list once the FIFO is empty */
    int in_idle;
    int64_t block_ms;                 /* carries a blocking command that may block this long (0: forever); -1 none */
    long long server_id;              /* the backend's CLIENT ID of this connection (0 until its reply came) */
    uint64_t block_client;            /* the keygate client whose blocking command it carries (0: none) */
    int unblocked;                    /* a CLIENT UNBLOCK named it: closed when released, never reused (the
                                         UNBLOCK must not reach the next client's command) */
    TAILQ_ENTRY(backend) link;        /* idle list, or the worker's dead list */
    TAILQ_ENTRY(backend) pinned_link; /* the pool's list of live dedicated connections */
    /* backend-timeout */
    int64_t waiting_since_ms; /* monotonic: when the oldest written entry began to wait (its write, the last reply) */
    uint64_t sent_ns;         /* monotonic: the write of the batch in flight (keygate_backend_latency_seconds) */
    int timed_out;            /* closed by backend-timeout: its entries fail as "timed out" */
    uint32_t rng;             /* the reconnect jitter's state */
};

/*
 * A worker's pools, one per (instance, protocol): w->pools[backend_pool_index(i, resp3)].
 * The RESP2 pools (index i) are created at start; a RESP3 pool's shared connections open
 * the first time a RESP3 client needs the instance (backend_for3). Dedicated connections
 * of both protocols are counted (npinned, max-pinned) and listed (pinned) in the RESP2
 * pool; each protocol keeps its own idle list.
 */
#define BACKEND_NPOOLS (2 * CONFIG_MAX_INSTANCES)
static inline int backend_pool_index(int instance, int resp3)
{
    return instance + (resp3 ? CONFIG_MAX_INSTANCES : 0);
}

struct backend_pool {
    struct backend *conns;
    int nconns;
    SSL_CTX *ssl_ctx;           /* NULL for plain instances */
    struct backend_list idle;   /* clean dedicated connections ready for the next pin */
    struct backend_list pinned; /* every live dedicated connection (in use + idle), for backend-timeout */
    int npinned;                /* dedicated connections alive (in use + idle) */
    int retired;                /* a cluster node's pool, closed: the node left the slot map (not counted,
                                   not reconnected; opened again when a redirect or the map names it) */
};

/*
 * A cluster instance (instance NAME cluster SEEDS ...): each worker keeps its own slot map
 * (slotmap.h, from CLUSTER SLOTS of any node it reaches) and, per node and protocol, a pool
 * of shared connections opened on first use. The map is read at start, every
 * cluster-refresh, and soon after a -MOVED or a lost node connection (never more often than
 * every BACKEND_REFRESH_MIN_MS). A node that owns no slot in a map just read (a failed-over
 * primary, a node resharded empty, an ASK target) has its shared connections closed once
 * nothing is owed on them, and they are not reconnected until the node is named again. A
 * single-server instance has no map: slot arguments are ignored.
 */
#define BACKEND_REFRESH_MIN_MS 500

/*
 * A sentinel instance (instance NAME sentinel ...) is kept as a cluster of one node: every slot
 * belongs to the primary its watcher thread confirmed (sentinelwatch.h), read every
 * BACKEND_SENTINEL_POLL_MS and at each refresh (which also asks the watcher to check again, at
 * most once per BACKEND_SENTINEL_POLL_MS); while none is confirmed no node owns a slot, and
 * requests wait as for a cluster slot without an owner. The policy sees a single server (no
 * slots, no CROSSSLOT).
 */
#define BACKEND_SENTINEL_POLL_MS 100

/* Is `instance` a cluster (or a sentinel instance, kept as one)? */
int backend_is_cluster(const struct worker *w, int instance);

/* Is `instance` a sentinel instance? */
int backend_is_sentinel(const struct worker *w, int instance);

/* The shared connection of client_id for `slot` of `instance` (the slot's primary; slot -1: any
 * node, for keyless commands), in the pool of protocol resp3. NULL when the slot's owner is not
 * known yet or its connection is down. For a single-server instance: backend_for / backend_for3. */
struct backend *backend_for_slot(struct worker *w, int instance, int slot, uint64_t client_id, int resp3);

/*
 * The primaries of cluster `instance` as this worker's map has them, each named by one slot it
 * owns (its lowest), ordered by address (host, then port): the same order in every worker whose
 * map agrees, so a SCAN cursor's node rank (slotmap.h) keeps its meaning from call to call.
 * Fills slots[0..max) and returns how many; 0 when the map is not known yet.
 */
int backend_cluster_primaries(const struct worker *w, int instance, int *slots, int max);

/* The node (its index in this worker's map, as struct backend's `node`) owning `slot` of cluster
 * `instance`; -1 when not known, or `instance` is no cluster. */
int backend_cluster_owner(const struct worker *w, int instance, int slot);

/* The address of node `node` (backend_cluster_owner's) of cluster `instance`. */
void backend_cluster_node_address(const struct worker *w, int instance, int node, const char **host, int *port);

/* The shared connection to the cluster node host:port (a -ASK target), added to the map's
 * node table (with no slot) when new. NULL when down or the table is full. */
struct backend *backend_for_addr(struct worker *w, int instance, const char *host, int port, uint64_t client_id,
                                 int resp3);

/* A -MOVED: `slot` of `instance` is now host:port's (a map change), and the whole map is read again soon. */
void backend_cluster_moved(struct worker *w, int instance, unsigned slot, const char *host, int port);

/* Read the slot map of `instance` again: now, or when BACKEND_REFRESH_MIN_MS since the last read has passed. */
void backend_cluster_refresh(struct worker *w, int instance);

/* The host and port of b's server (a cluster node, or its instance's address). */
void backend_address(const struct backend *b, const char **host, int *port);

/* Create the pools of worker w, reporting to `hooks`, and start connecting. 0 on success. */
int backend_pools_start(struct worker *w, const struct backend_hooks *hooks) KG_MUST_CHECK;

/* Close every backend connection of w and free the pools. */
void backend_pools_free(struct worker *w);

/* What INFO and /metrics show of an instance's shared connections. */
struct backend_pool_status {
    int connections;  /* shared connections, both protocols (a RESP3 pool once opened) */
    int up;           /* of them READY */
    size_t in_flight; /* replies owed on them */
};
/* The shared connections of `instance` over every worker of p, RESP2 and RESP3 pools. Called
 * from any thread: the pools belong to the workers, so this is a snapshot (relaxed loads; a
 * RESP3 pool's nconns is published after its connections exist, see backend_pool_open). */
void backend_pool_status(const struct proxy *p, int instance, struct backend_pool_status *out);

/* The connection client `client_id` uses for `instance`: fixed, so one client's requests
 * to one instance keep their order. NULL when that connection is down. */
struct backend *backend_for(struct worker *w, int instance, uint64_t client_id);

/* The same for a RESP3 client: a connection of the instance's RESP3 pool, which is opened
 * (connections start connecting; requests are staged meanwhile) on the first call. */
struct backend *backend_for3(struct worker *w, int instance, uint64_t client_id);

/*
 * The staging buffer of b, for the caller to append a request's bytes to. Many clients'
 * requests collect there and go to the socket (and TLS) in one write at the end of the
 * loop iteration (backend_flush_all) or, on a shared connection with a batch in flight,
 * once that batch is answered.
 */
struct bytebuf *backend_stage(struct backend *b);

/* Why the instance's shared connections are down, when the clients' -UNAVAILABLE should say it:
 * its host name did not resolve ("cannot resolve NAME: why", the last such failure of a connection
 * not up). NULL for any other reason (refused, timed out, TLS), and while one is up. */
const char *backend_down_why(const struct worker *w, int instance);

/* One more reply is owed on b, for the entry pd; the caller staged the bytes. */
void backend_expect(struct backend *b, struct pending pd);

/* Write the staged output of every backend of w that may write now, in the order the
 * requests arrived; a shared connection with an unanswered batch keeps its output until
 * the replies come, unless a later request for the same instance goes now (the flush
 * step's first part; postponed clients are woken after it by the client layer). */
void backend_flush_all(struct worker *w);

/*
 * Would staging a request on b (NULL: a connection not listed) now let it overtake one that
 * arrived earlier? True when b already holds staged requests and another connection of its
 * domain (the same server) was staged after them (they leave as one write).
 * The client layer then postpones the request until after the next backend_flush_all.
 */
int backend_would_reorder(const struct worker *w, const struct backend *b);

/* The one close path of a backend connection: every entry owed is failed (the fail hook); a
 * shared connection reconnects with backoff, a dedicated one tells its owner (owner_lost)
 * and is freed at the next reap. */
void backend_close(struct backend *b, const char *reason);

/* A dedicated connection to `instance` for client c (idle or new), speaking RESP3 when resp3
 * is 1 (c's protocol); on a cluster, to the primary of `slot` (-1: any node). NULL at
 * max-pinned, when the slot's owner is not known, or when it cannot even start connecting. */
struct backend *backend_pin(struct worker *w, int instance, int slot, struct client *c, int resp3);

/* Are max-pinned dedicated connections to `instance` alive on w (a pin would fail for that)? */
int backend_pin_full(const struct worker *w, int instance);

/* b carries a blocking command (BLPOP, XREAD BLOCK ...) that may block block_ms (0: forever,
 * command_block_timeout_ms): until it is idle again, backend-timeout closes b only after the
 * command's own timeout plus backend-timeout, and never for one that blocks forever. */
void backend_exempt(struct backend *b, int64_t block_ms);

/*
 * The reconnect delay after a failure: `backoff_ms` less a random share of up to a fifth
 * (r is a random 32-bit value), so connections that failed together (every worker's, after
 * an instance restart) do not all reconnect in the same millisecond, and the delay still
 * doubles from attempt to attempt. Pure.
 */
int backend_backoff_delay(int backoff_ms, uint32_t r);

/* A CLIENT UNBLOCK for b's server_id was sent (another connection carries it): b is never reused. */
void backend_unblock_sent(struct backend *b);

/* c's state on b ended: b goes back to the idle list once its FIFO is empty. */
void backend_unpin(struct backend *b);

/* b's owner went away while b held its state (mid-block, WATCH, subscribed): close b, never reuse it. */
void backend_abandon(struct backend *b);

/* Free the dedicated connections closed since the last reap. */
void backend_reap(struct worker *w);

#endif
