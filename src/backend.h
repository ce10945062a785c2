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
#include "slotmap.h"

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
    BACKEND_OWN_SLOTS /* a cluster node's CLUSTER SLOTS: answered to the slots hook (the node model's) */
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
    /* the shared connection b closed, after every entry was failed: its server may be gone */
    void (*lost)(struct backend *b);
    /* the reply to a BACKEND_OWN_SLOTS command sent on b (backend_send_own) */
    void (*slots)(struct backend *b, const char *reply, size_t len);
};

enum backend_state { BACKEND_DOWN = 0, BACKEND_CONNECTING, BACKEND_READY };

/* One connection to a backend instance, shared and pipelined by many clients. */
struct backend {
    struct worker *worker;
    int instance;                      /* config instance index */
    int ordinal;                       /* its number in its pool (-1: a dedicated connection) */
    int node;                          /* its server's index in the instance's node table (nodes.h) */
    int domain;                        /* ordering domain: one per server (backend_would_reorder) */
    uint8_t resp3;                     /* 1: a RESP3 connection (HELLO 3 sent at connect), for RESP3 clients only */
    uint8_t guard;                     /* the topology guard's INFO is sent at connect */
    const struct slotmap_node *server; /* its server's address (an entry of the node table) */
    SSL_CTX *ssl_ctx;                  /* the instance's TLS context; NULL for plain */
    struct backend_pins *pins;         /* the instance's dedicated connections (counted, listed, idle) */
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

/* A pool of shared connections to one server in one protocol (the node model keeps them). */
struct backend_pool {
    struct backend *conns;
    int nconns;
    int retired; /* closed: the node left the slot map (not counted, not reconnected until named again) */
};

/* An instance's dedicated connections, of every node and protocol (max-pinned is per instance). */
struct backend_pins {
    struct backend_list idle[2]; /* clean ones ready for the next pin, per protocol (RESP2, RESP3) */
    struct backend_list pinned;  /* every live one (in use + idle), for backend-timeout */
    int npinned;                 /* alive (in use + idle) */
};

/* Make b (zeroed, its place fields set: worker, instance, ordinal, node, domain, resp3, guard,
 * server, ssl_ctx, pins, pinned) a closed connection, ready for backend_connect. */
void backend_init(struct backend *b);

/* Connect b to its server: AUTH, HELLO 3, CLIENT ID and the topology INFO are staged behind
 * the handshake. A failure closes b (a shared one reconnects with backoff). */
void backend_connect(struct backend *b);

/* Connect again now (backoff reset): a retired connection whose node is named again. */
void backend_reopen(struct backend *b);

/* Close the shared connection b with nothing owed on it, and do not reconnect (its node left the map). */
void backend_retire(struct backend *b);

/* Close the shared connection b (its entries failed) and free its buffers: the worker stops. */
void backend_dispose(struct backend *b);

/* Does b hold something: a reply owed, bytes staged, a flush due? */
int backend_busy(const struct backend *b);

/* Has b's oldest written entry waited past timeout_ms (now: monotonic ms)? Then b is closed,
 * its entries failing "timed out" (backend_exempt: a blocking command's own timeout is added). */
void backend_check_timeout(struct backend *b, int64_t now, int64_t timeout_ms);

/* Stage one of keygate's own commands on b (its reply is the connection's own: `own`). */
void backend_send_own(struct backend *b, enum backend_own own, int argc, const char **argv);

/* Free what the backend module keeps per worker (its resolver). */
void backend_worker_free(struct worker *w);

/* The host and port of b's server (a cluster node, or its instance's address). */
void backend_address(const struct backend *b, const char **host, int *port);

/*
 * The staging buffer of b, for the caller to append a request's bytes to. Many clients'
 * requests collect there and go to the socket (and TLS) in one write at the end of the
 * loop iteration (backend_flush_all) or, on a shared connection with a batch in flight,
 * once that batch is answered.
 */
struct bytebuf *backend_stage(struct backend *b);

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
