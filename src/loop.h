/* loop.h: the state of one worker's event loop and of the process, shared by the connection modules. */
#ifndef KEYGATE_LOOP_H
#define KEYGATE_LOOP_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/ssl.h>

#include "blocked.h"
#include "config.h"
#include "scripts.h"
#include "sizes.h"
#include "stats.h"
#include "tracking.h"
#include "userlimit.h"
#include "util.h"

/*
 *  client socket                                              backend socket (TLS)
 *      |                                                              ^
 *      v                                                              |
 *  [client: qbuf] -> resp_parse_request -> policy_decide -> router -> [backend: out]
 *      ^                                                              |
 *      |                                                              v
 *  [client: queue of requests, in arrival order] <- router <- reply framer <- [backend: rbuf + FIFO]
 *
 * A request is appended to its client's queue when parsed. Local and error replies
 * complete it at once; forwarded ones complete when the router has interpreted their
 * backend reply. Replies are written only from the head of the queue (request.c), so
 * each client sees its replies in its request order whatever instance answered first.
 *
 * Nothing below the client module calls into it: a completed request, a subscription
 * that settled, a lost dedicated connection or a client to close *wake* the client
 * (conn_wake, conn_close); the worker's flush step then services the woken clients and
 * its reap step tears down the closed ones, outside every callback.
 */

struct client;
struct backend;
struct backend_pool;
struct nc_worker;
struct backend_hooks;
struct request;
struct accept_pause;
struct authgate;

struct nodes;

/* Ordering domains (backend_would_reorder): a single-server instance is domain `instance`; a
 * cluster node CONFIG_MAX_INSTANCES + node (mod the rest: two nodes sharing one only wait more). */
#define BACKEND_DOMAINS 64
static inline int backend_domain(int instance, int node)
{
    return node < 0 ? instance : CONFIG_MAX_INSTANCES + node % (BACKEND_DOMAINS - CONFIG_MAX_INSTANCES);
}

TAILQ_HEAD(client_list, client);
TAILQ_HEAD(backend_list, backend);
TAILQ_HEAD(request_queue, request);
struct request_send;
TAILQ_HEAD(request_send_list, request_send); /* a client's cluster sends waiting to go again, in request order */

/* One held replicas=N write (replcommit.c): a request's reply, or one part's of a split write. */
struct repl_hold {
    struct request *req;
    int16_t part;     /* -1: the request's reply (req->repl_reply); else that part's (req->parts[part].reply) */
    int16_t node;     /* the node that answered (a sentinel instance's primary then; -1: a single server) */
    uint8_t replicas; /* its N */
};

struct repl_holds {
    struct repl_hold *items;
    size_t n, cap;
};

/*
 * replicas=N (replcommit.c): one instance's writes whose replies came and are held until a WAIT says
 * enough replicas have them. `next` collects them while `covered`'s WAIT is out on `conn` (a
 * dedicated connection); once it answers, `covered` is answered and `next` gets its own WAIT.
 */
struct repl_group {
    struct repl_holds next;    /* held, for the next WAIT */
    struct repl_holds covered; /* held, covered by the WAIT on conn */
    struct backend *conn;      /* the dedicated connection carrying PUBLISH + WAIT; NULL: none out */
    int need;                  /* the WAIT's numreplicas: the largest replicas=N of `covered` */
    uint64_t gen;              /* a sentinel instance: its watcher's generation when the WAIT was sent */
};

struct worker {
    int id;
    struct event_base *base;
    const struct config *cfg;          /* current snapshot (swapped on reload) */
    const struct backend_hooks *hooks; /* what backends report replies and failures to (the router) */
    struct client_list clients;
    struct idmap clients_by_id;        /* the same clients by id (conn_close takes them out) */
    struct ptrvec woken;               /* clients to service at the next flush step (conn_wake) */
    struct ptrvec closing;             /* clients closed (conn_close), torn down at the next reap */
    struct backend_list dead_backends; /* closed dedicated connections, freed at the next reap */
    struct request *free_requests;     /* recycled requests (linked through link.tqe_next) */
    size_t nfree_requests;
    struct event *reap_ev;
    struct event
        *flush_ev;       /* end of each loop iteration: staged backend output goes out (or waits, see backend_holds) */
    struct ptrvec dirty; /* backends with staged output, in the order they were first staged */
    struct ptrvec flush_spare;                    /* backend_flush_all's second list (kept to reuse its memory) */
    struct backend *domain_tail[BACKEND_DOMAINS]; /* the last backend of each domain on the dirty list */
    int postponing[BACKEND_DOMAINS];              /* a request for the domain waits for the next flush */
    struct nodes *nodes[CONFIG_MAX_INSTANCES];    /* every instance's node table and pools (nodes.h) */
    struct ptrvec postponed;                      /* clients whose frame waits for the next flush, in arrival order */
    struct ptrvec dirty_clients;                  /* plain clients with replies to write */
    char scratch[CLIENT_SCRATCH_BYTES];           /* plain clients are read into this, one at a time */
    struct evconnlistener **listeners;
    size_t nlisteners;
    void **listen_ctxs; /* what each listener's callback gets; freed with w */
    size_t nlisten_ctxs;
    const struct config *next_cfg; /* posted by the main thread (atomic) */
    int stop_requested;            /* posted by the main thread (atomic) */
    int drain_left_ms;
    struct event *control_ev; /* woken by the main thread: reload, shutdown */
    int control_pipe[2];      /* the main thread writes a byte to wake the loop */
    struct event *drain_timer;
    struct event *backend_tick; /* backend-timeout checks (nodes.c) */
    struct evdns_base *dns;     /* resolves backend host names (backend.c), made on first use */
    struct event *client_tick;  /* client-timeout / client-header-timeout checks (client.c) */
    struct event *mem_timer;    /* while clients are paused for max-memory (client_memory_tick) */
    int64_t mem_over_since_ms;  /* max-memory: over it since (0: not over at the last tick) */
    int64_t mem_unpublished;    /* max-memory: this worker's change not yet in proxy->mem_used */
    int stopping;
    struct accept_pause *accept_pause; /* out of fds: accepting paused, retried on a timer (worker.c) */
    struct stats stats;
    struct proxy *proxy;
    struct nc_worker *nc;                         /* its near cache (nearcache.c), NULL without near-cache namespaces */
    struct tracker_inbox *tracker;                /* invalidations other workers hand it (tracker.c) */
    struct repl_group repl[CONFIG_MAX_INSTANCES]; /* replicas=N writes held per instance (replcommit.c) */
    int repl_stopped;                             /* router_stop ran: no new WAIT starts */
};

/* Process-wide state shared by the workers (read-only after start, but for counters). */
struct proxy {
    struct worker *workers;
    int nworkers;
    int64_t started_ms;
    int clients_now;         /* atomic: connected clients, all workers */
    uint64_t next_client_id; /* atomic */
    int reload_acks;         /* atomic: workers yet to take the new config */
    uint64_t reloads;        /* atomic: reloads every worker has taken (counted by the last to take one) */
    int64_t mem_used;        /* atomic: buffered request and reply bytes, all workers (max-memory) */
    SSL_CTX **listen_ssl;    /* one per listen entry (cfg->nlistens), NULL for plain */
    size_t nlisten_ssl;
    struct authgate *authgate;      /* the failed-AUTH table of every worker (authgate.h) */
    struct blocked_table blocked;   /* clients blocked on a dedicated connection (CLIENT UNBLOCK, any worker) */
    struct userlimit_table users;   /* per-user connection counts and rate buckets (max-clients=, rate=) */
    struct scripts_table scripts;   /* the scripts seen going to a cluster, for its nodes' -NOSCRIPT (router.c) */
    struct tracking_table tracking; /* CLIENT TRACKING: every client's state and the keys read (tracking.h) */
};

/* A worker adds its changes to the process total once they reach this (either way):
 * the total is exact to nworkers x this, and small replies cost no atomic operation. */
#define MEM_PUBLISH_BYTES (64 * 1024)

/* max-memory: w's buffers hold `delta` bytes more (or fewer); the process total follows. */
static inline void mem_add(struct worker *w, int64_t delta)
{
    w->mem_unpublished += delta;
    if (w->mem_unpublished > MEM_PUBLISH_BYTES || w->mem_unpublished < -MEM_PUBLISH_BYTES) {
        int64_t total = __atomic_add_fetch(&w->proxy->mem_used, w->mem_unpublished, __ATOMIC_RELAXED);
        /* each worker publishes what it holds at that moment (>= 0): the sum never goes below 0 */
        assert(total >= 0);
        (void)total;
        w->mem_unpublished = 0;
    }
}

/* max-memory: a buffer that held *held bytes now holds `now`. */
static inline void mem_set(struct worker *w, size_t *held, size_t now)
{
    if (now == *held) return;
    mem_add(w, (int64_t)now - (int64_t)*held);
    *held = now;
}

/* Is the process over max-memory (when one is set)? */
static inline int mem_over(const struct worker *w)
{
    return w->cfg->max_memory > 0 && __atomic_load_n(&w->proxy->mem_used, __ATOMIC_RELAXED) > w->cfg->max_memory;
}

#endif
