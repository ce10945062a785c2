/* proxy.h: the connection objects of one worker: clients, requests, backend connections. */
#ifndef KEYGATE_PROXY_H
#define KEYGATE_PROXY_H

/*
 *  client socket                                              backend socket (TLS)
 *      |                                                              ^
 *      v                                                              |
 *  [client: qbuf] -> resp_parse_request -> policy_decide -> router -> [backend: out]
 *      ^                                                              |
 *      |                                                              v
 *  [client: queue of requests, in arrival order] <- reply framer <- [backend: rbuf + FIFO]
 *
 * A request is appended to its client's queue when parsed. Local and error replies
 * complete it at once; forwarded ones complete when their backend reply is framed.
 * Replies are written only from the head of the queue (client_flush), so each
 * client sees its replies in its request order whatever instance answered first.
 */

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/ssl.h>

#include "config.h"
#include "policy.h"
#include "resp.h"
#include "sizes.h"
#include "stats.h"

struct worker;
struct client;

/* One client command waiting for its reply. */
struct request {
    TAILQ_ENTRY(request) link;
    struct worker *worker;
    struct client *client; /* NULL once the client closed (orphaned) */
    int waiting;           /* backend replies still expected */
    int done;              /* the reply is complete */
    char *reply;           /* stored reply bytes when not written straight through */
    size_t reply_len;
    char *queued_error;    /* wrapped in MULTI: the command's queue-time error, if any */
    size_t queued_error_len;
    uint8_t blocking;      /* sent on the client's blocking pin */
    /* the client's own transaction: which EXEC elements are the client's (1) or injected (0) */
    struct bytebuf exec_keep; /* one byte per reply inside EXEC: the client's (1) or injected (0) */
    /* split across instances: one reply part per instance, merged when all arrived */
    struct request_part *parts;
    int nparts, parts_left;
    int merge;             /* enum plan_merge */
    int8_t *key_instance;  /* moved from the plan */
    size_t argc;
};

struct request_part {
    int instance;
    char *reply;
    size_t len;
};
TAILQ_HEAD(request_queue, request);

/* What a backend reply is for. */
enum pending_kind {
    PENDING_PASS = 0, /* the reply is the request's reply */
    PENDING_DROP,     /* an injected command: swallow the reply */
    PENDING_AUTH,     /* keygate's own AUTH at connect */
    PENDING_INFO,     /* keygate's own INFO at connect (topology guard) */
    PENDING_QUEUED,   /* the client's command inside keygate's MULTI: keep a queue-time error */
    PENDING_EXEC_PICK,/* keygate's EXEC: the client's reply is element 0 (or the queued error) */
    PENDING_EXEC_FILTER, /* the client's EXEC: drop the injected elements (req->exec_keep) */
    PENDING_PART,     /* one instance's part of a split command */
};

struct pending {
    struct request *req;
    uint8_t kind;
    uint8_t part;     /* PENDING_PART: index in req->parts */
};

enum backend_state { BACKEND_DOWN = 0, BACKEND_CONNECTING, BACKEND_READY };

/* One connection to a backend instance, shared and pipelined by many clients. */
struct backend {
    struct worker *worker;
    int instance;             /* config instance index */
    int slot;                 /* index in the instance's pool */
    enum backend_state state;
    int fd;                   /* -1 while closed */
    SSL *ssl;                 /* TLS instances: the session on fd; NULL for plain */
    struct event *rev, *wev;  /* fd readable (always armed while open) / writable (only while needed) */
    int tcp_up;               /* the TCP connect finished (a handshake may still be running) */
    int read_wants_write;     /* TLS: SSL_read asked for a writable socket */
    int write_wants_read;     /* TLS: SSL_write asked for a readable socket */
    struct bytebuf wbuf;      /* the batch being written (out is moved here whole) */
    size_t woff;              /* bytes of wbuf already written */
    struct pending *fifo;     /* ring buffer of requests in flight, oldest first */
    size_t fifo_head, fifo_count, fifo_cap;
    struct bytebuf out;       /* staged requests: leave together when the connection may write (backend_flush_all) */
    int dirty;                /* on the worker's list of backends to flush (2: inside backend_flush_all) */
    int flush_go;             /* backend_flush_all's decision: -1 nothing to write, 0 wait, 1 write, 2 write unless holding */
    size_t unsent;            /* FIFO entries (at its tail) staged but not written yet */
    char *rbuf;               /* received bytes not yet framed */
    size_t rlen, rcap;
    struct resp_scanner scan;
    int discarding;           /* the reply being framed is dropped as it comes (nobody may keep it) */
    size_t mem_held;          /* bytes counted in the process total (max-memory) */
    struct event *timer;      /* DOWN: reconnect backoff; CONNECTING: connect + handshake timeout */
    int backoff_ms;
    int warned_down;          /* "unreachable" logged once per outage */
    /* dedicated (pinned) connections only */
    int pinned;               /* 1: not in the shared pool; freed, never reconnected */
    struct client *owner;     /* the client holding it; NULL when idle or releasing */
    int subscriber;           /* pub/sub mode: frames go straight to owner */
    int sub_normal, sub_shard;/* channels+patterns / shard channels subscribed, from the confirmations */
    int sub_markers;          /* marker PINGs sent and not yet answered */
    int release_when_idle;    /* back to the idle list once the FIFO is empty */
    int in_idle;
    TAILQ_ENTRY(backend) link; /* idle list, or the worker's dead list */
};
TAILQ_HEAD(backend_list, backend);

struct backend_pool {
    struct backend *conns;
    int nconns;
    SSL_CTX *ssl_ctx;         /* NULL for plain instances */
    struct backend_list idle; /* clean dedicated connections ready for the next pin */
    int npinned;              /* dedicated connections alive (in use + idle) */
};

struct client {
    TAILQ_ENTRY(client) link;
    struct worker *worker;
    struct bufferevent *bev;  /* TLS clients only */
    int fd;
    struct event *rev, *wev;  /* plain clients: readable / writable (only while the socket is full) */
    struct event *pev;        /* while reading is paused: the peer's close or reset (on pfd, edge-triggered) */
    int pfd;                  /* dup of fd for pev (-1 until the first pause) */
    struct bytebuf obuf;      /* plain clients: replies not yet written */
    size_t obuf_off;          /* bytes of obuf already written */
    int out_dirty;            /* on the worker's list of clients to write */
    int wev_pending;
    int in_list;              /* on the worker's client list */
    uint64_t id;
    char addr[64];
    char *name;               /* CLIENT SETNAME */
    int64_t created_ms;
    char *qbuf;               /* unparsed input */
    size_t qlen, qcap;
    struct resp_parser parser;
    struct request_queue queue;
    int nqueued;
    struct session session;
    int closing;              /* close once every queued reply is written */
    int closed;               /* client_close ran; memory freed by client_reap */
    int read_paused;          /* backpressure: EV_READ is off */
    int mem_paused;           /* paused (also) for max-memory: looked at again by client_memory_tick */
    int postponed;            /* a frame waits for the next backend flush (arrival order, backend_would_reorder) */
    size_t mem_held;          /* bytes counted in the process total (max-memory) */
    /* argv scratch for the command being handled */
    const char **argv;
    size_t *argvlen;
    size_t argv_cap;
    const char *last_cmd;     /* name of the last command (the command table's string) */
    int64_t now_ms;           /* wall clock read once per batch of frames */
    /* stateful commands */
    struct backend *watch_pin;                     /* WATCH: until EXEC/DISCARD/UNWATCH */
    struct backend *block_pin;                     /* a blocking command in flight */
    struct backend *sub_pin[CONFIG_MAX_INSTANCES]; /* subscriber connections */
    int stall;                /* parse nothing more until every queued reply is written */
    int sub_markers;          /* (un)subscribe commands whose confirmations are still coming */
    int watch_lost;           /* the WATCH pin dropped: the next EXEC must not run unwatched */
    struct bytebuf multi_buf; /* the transaction's commands, sent at EXEC */
    struct bytebuf multi_keep; /* per backend reply inside EXEC: the client's (1) or injected (0) */
    int multi_dirty;          /* a queue-time error: EXEC answers EXECABORT */
};
TAILQ_HEAD(client_list, client);

struct worker {
    int id;
    struct event_base *base;
    const struct config *cfg;           /* current snapshot (swapped on reload) */
    struct backend_pool pools[CONFIG_MAX_INSTANCES];
    struct client_list clients;
    struct client_list dead_clients;    /* closed, freed at the next reap */
    struct backend_list dead_backends;  /* closed dedicated connections, freed at the next reap */
    struct request *free_requests;      /* recycled requests (linked through link.tqe_next) */
    size_t nfree_requests;
    struct event *reap_ev;
    struct event *flush_ev;             /* end of each loop iteration: staged backend output goes out (or waits, see backend_holds) */
    struct ptrvec dirty;                /* backends with staged output, in the order they were first staged */
    struct ptrvec flush_spare;          /* backend_flush_all's second list (kept to reuse its memory) */
    struct backend *inst_tail[CONFIG_MAX_INSTANCES]; /* the last backend of each instance on the dirty list */
    int postponing[CONFIG_MAX_INSTANCES]; /* a request for the instance waits for the next flush */
    struct ptrvec postponed;            /* clients whose frame waits for the next flush, in arrival order */
    struct ptrvec dirty_clients;        /* plain clients with replies to write */
    char scratch[CLIENT_SCRATCH_BYTES]; /* plain clients are read into this, one at a time */
    struct evconnlistener **listeners;
    size_t nlisteners;
    void **listen_ctxs;                 /* what each listener's callback gets; freed with w */
    size_t nlisten_ctxs;
    const struct config *next_cfg;      /* posted by the main thread (atomic) */
    int stop_requested;                 /* posted by the main thread (atomic) */
    int drain_left_ms;
    struct event *control_ev;           /* woken by the main thread: reload, shutdown */
    int control_pipe[2];                /* the main thread writes a byte to wake the loop */
    struct event *drain_timer;
    struct event *mem_timer;            /* while clients are paused for max-memory (client_memory_tick) */
    int64_t mem_over_since_ms;          /* max-memory: over it since (0: not over at the last tick) */
    int64_t mem_unpublished;            /* max-memory: this worker's change not yet in proxy->mem_used */
    int stopping;
    struct stats stats;
    struct proxy *proxy;
};

/* Process-wide state shared by the workers (read-only after start, but for counters). */
struct proxy {
    struct worker *workers;
    int nworkers;
    int64_t started_ms;
    int clients_now;                    /* atomic: connected clients, all workers */
    uint64_t next_client_id;            /* atomic */
    int reload_acks;                    /* atomic: workers yet to take the new config */
    int64_t mem_used;                   /* atomic: buffered request and reply bytes, all workers (max-memory) */
    SSL_CTX **listen_ssl;               /* one per listen entry (cfg->nlistens), NULL for plain */
    size_t nlisten_ssl;
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

/* The reply (without '-' and CRLF) for requests whose instance is down. */
#define UNAVAILABLE_FMT "UNAVAILABLE instance '%s' is unreachable"

/* ---- client.c ---- */

/* Accept a new client socket on worker w (takes ownership of fd). */
void client_accept(struct worker *w, int fd, const struct sockaddr *sa, int salen, SSL_CTX *tls);

/* The one close path of a client: orphans requests still in flight, frees the rest. */
void client_close(struct client *c, const char *reason);

/* Free w's recycled requests (at worker exit). */
void request_pool_free(struct worker *w);

/* Free the clients closed since the last reap (runs from an event, outside their callbacks). */
void client_reap(struct worker *w);

/* max-memory timer of w: resumes the clients paused for memory once under it; when it
 * stays over, closes the client whose unfinished requests hold the most bytes. */
void client_memory_tick(evutil_socket_t fd, short what, void *arg);

/* The bytes of c's replies the backend is sending now reach `partial`: when they and
 * what c has queued pass client-output-hard-limit, c is closed. 1 when it was. */
int client_output_over(struct client *c, size_t partial);

/* Write the queued replies of every plain client of w (the flush event, after the backends). */
void client_write_all(struct worker *w);

/* Reply bytes queued for c and not yet written. */
size_t client_out_pending(const struct client *c);

/* c's frame for `instance` waits: parse it again after the next backend flush. */
void client_postpone(struct client *c, int instance);

/* After a backend flush: the postponed clients of w parse their frames again, in order. */
void client_wake_postponed(struct worker *w);

/* Write every complete reply at the head of c's queue; closes c if it is closing and done. */
void client_flush(struct client *c);

/* A backend reply owed to req was swallowed (injected command, or its backend failed):
 * frees req when it was its last reference. */
void request_reply_consumed(struct request *req);

/* The connection for c's commands to `instance`: its WATCH pin there, else its shared one.
 * NULL when that connection is down. */
struct backend *client_backend(struct client *c, int instance);

/* A frame from c's subscriber connection b: straight to the client; tracks the end of subscriptions. */
void client_push(struct client *c, struct backend *b, const char *frame, size_t len);

/* c's dedicated connection b closed under it: c loses its state, so c is closed too. */
void client_pin_lost(struct client *c, struct backend *b);

/* Complete req with a copy of reply[0..len) and flush its client (or free it if orphaned). */
void request_complete(struct request *req, const char *reply, size_t len);

/* ---- backend.c ---- */

/* Create the pools of worker w and start connecting. 0 on success. */
int backend_pools_start(struct worker *w) KG_MUST_CHECK;

/* Close every backend connection of w and free the pools. */
void backend_pools_free(struct worker *w);

/* The connection client `client_id` uses for `instance`: fixed, so one client's requests
 * to one instance keep their order. NULL when that connection is down. */
struct backend *backend_for(struct worker *w, int instance, uint64_t client_id);

/*
 * The staging buffer of b, for the caller to append a request's bytes to. Many clients'
 * requests collect there and go to the socket (and TLS) in one write at the end of the
 * loop iteration (backend_flush_all) or, on a shared connection with a batch in flight,
 * once that batch is answered.
 */
struct bytebuf *backend_stage(struct backend *b);

/* Append to a staging buffer (out of memory aborts: util.h's rule; the FIFO stays aligned). */
void stage_add(struct bytebuf *out, const void *data, size_t n);
void stage_add_bulk(struct bytebuf *out, const void *data, size_t n);

/* Write the staged output of every backend of w that may write now, in the order the
 * requests arrived; a shared connection with an unanswered batch keeps its output until
 * the replies come, unless a later request for the same instance goes now (the flush
 * event's callback). */
void backend_flush_all(struct worker *w);

/*
 * Would staging a request for `instance` on b (NULL: a connection not listed) now let it
 * overtake one that arrived earlier? True when b already holds staged requests and
 * another connection of the instance was staged after them (they leave as one write),
 * or when a request for the instance already waits for the flush. The caller then
 * postpones the request until the next backend_flush_all (client_postpone).
 */
int backend_would_reorder(const struct worker *w, int instance, const struct backend *b);

/* Queue bytes on b and expect one reply of `kind` for req. The caller wrote the bytes. */
void backend_expect(struct backend *b, struct request *req, enum pending_kind kind);

/* The one close path of a backend connection: fails its FIFO with -UNAVAILABLE; a shared
 * connection reconnects with backoff, a dedicated one tells its owner and is freed. */
void backend_close(struct backend *b, const char *reason);

/* A dedicated connection to `instance` for client c (idle or new). NULL at max-pinned. */
struct backend *backend_pin(struct worker *w, int instance, struct client *c);

/* c's state on b ended: b goes back to the idle list once its FIFO is empty. */
void backend_unpin(struct backend *b);

/* c went away while b held its state (mid-block, WATCH, subscribed): close b, never reuse it. */
void backend_abandon(struct backend *b);

/* Free the dedicated connections closed since the last reap. */
void backend_reap(struct worker *w);

/* ---- router.c ---- */

/* Send a FORWARD plan's bytes to backend b (NULL: the instance is down) for req. */
void router_forward(struct client *c, struct backend *b, struct request *req, const struct plan *plan,
                    const char *frame);

/* A split plan (MGET/DEL/... across instances): one part per instance, merged later. */
void router_forward_split(struct client *c, struct request *req, struct plan *plan, const char *frame);

/* Write the plan's command (and its TTL fixes, no MULTI wrap) to out, for a client transaction.
 * Appends one keep flag per backend reply to keep (1 = the client's, 0 = injected). */
void router_write_queued(struct bytebuf *out, const struct client *c, const struct plan *plan, const char *frame,
                         struct bytebuf *keep);

/* Merge a split request's parts into its reply (called when the last part arrived). */
void router_merge(struct request *req);

/* ---- local.c ---- */

/* Answer a PLAN_LOCAL request; writes the reply into req via request_complete. */
void local_execute(struct client *c, struct request *req, const struct plan *plan, size_t argc,
                   const char *const *argv, const size_t *argvlen);

/* ---- worker.c ---- */

/* Create worker w's event base, listeners and backend pools. 0 on success. */
int worker_init(struct worker *w, struct proxy *p, int id, const struct config *cfg) KG_MUST_CHECK;

/* Run w's event loop until it is stopped (thread entry point). */
void *worker_run(void *arg);

/* From any thread: ask w to swap in cfg (reload) or to stop (cfg == NULL). */
void worker_post(struct worker *w, const struct config *cfg, int stop);

void worker_free(struct worker *w);

/* Milliseconds and nanoseconds of the monotonic / wall clocks. */
int64_t clock_wall_ms(void);
uint64_t clock_mono_ns(void);

#endif
