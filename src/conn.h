/* conn.h: one client connection's state, and the few things lower modules may do to it: queue reply
 * bytes, wake it, close it (deferred). Everything else a client does lives in client.c (its socket in
 * clientio.c, its transaction in txn.c). */
#ifndef KEYGATE_CONN_H
#define KEYGATE_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "loop.h"
#include "pubsub.h"
#include "replywin.h"
#include "resp.h"
#include "session.h"

struct client {
    TAILQ_ENTRY(client) link; /* on w->clients while open */
    struct worker *worker;
    /* socket and output */
    struct bufferevent *bev; /* TLS clients only */
    int fd;
    struct event *rev, *wev; /* plain clients: readable / writable (only while the socket is full) */
    struct event *pev;       /* while reading is paused: the peer's close or reset (on pfd, edge-triggered) */
    int pfd;                 /* dup of fd for pev (-1 until the first pause) */
    struct bytebuf obuf;     /* plain clients: replies not yet written */
    size_t obuf_off;         /* bytes of obuf already written */
    int out_dirty;           /* on w->dirty_clients */
    int wev_pending;
    /* identity */
    uint64_t id;
    char addr[64];
    char *name; /* CLIENT SETNAME */
    int64_t created_ms;
    int64_t last_active_ms;   /* wall clock of the last bytes read (client-timeout) */
    int64_t partial_since_ms; /* wall clock since an unfinished request waits for more bytes, 0 = none */
    int need_more;            /* the last parse stopped inside an unfinished request */
    int tls_handshaking;      /* a TLS client whose handshake has not finished (client-header-timeout) */
    const char *last_cmd;     /* name of the last command (the command table's string) */
    int resp3;                /* HELLO 3: replies are RESP3 (its backend connections are RESP3 ones) */
    /* input */
    char *qbuf; /* unparsed input */
    size_t qlen, qcap;
    struct resp_parser parser;
    const char **argv; /* argv scratch for the command being handled */
    size_t *argvlen;
    size_t argv_cap;
    int64_t now_ms;                                                 /* wall clock read once per batch of frames */
    size_t (*parse)(struct client *c, const char *buf, size_t len); /* client.c's parser: what clientio.c hands
                                                                       the bytes it read to (clientio_open) */
    /* requests, in arrival order (request.c) */
    struct request_queue queue;
    int nqueued;
    uint64_t next_seq;                /* the seq of its next request */
    struct request_send_list resends; /* its cluster sends waiting to go again, in request order (keptsend.c) */
    struct event *resend_timer;       /* the wait of the first of them */
    /* what policy knows, and the connections that hold the client's state */
    struct session session;
    struct backend *watch_pin;  /* WATCH: until EXEC/DISCARD/UNWATCH */
    struct backend *block_pin;  /* a blocking command in flight */
    struct pubsub pubsub;       /* subscriber connections and counts */
    int watch_lost;             /* the WATCH pin dropped: the next EXEC must not run unwatched */
    struct bytebuf multi_buf;   /* the transaction's commands, sent at EXEC */
    struct bytebuf multi_keep;  /* per backend reply inside EXEC: the client's (1) or injected (0) */
    int multi_dirty;            /* a queue-time error: EXEC answers EXECABORT */
    int multi_replicas;         /* the largest replicas=N of its queued writes: EXEC's reply waits for them */
    struct bytebuf nc_multi;    /* the near cache's: keys the queued writes invalidate (nearcache_queued) */
    struct bytebuf track_multi; /* CLIENT TRACKING's: keys the queued writes change (tracker_command) */
    uint32_t tracking_flags;    /* its CLIENT TRACKING flags (a copy of the table's, written by its worker) */
    int tracking_caching;       /* CLIENT CACHING YES|NO given: lasts one command */
    /* flow and lifecycle */
    int stall;           /* parse nothing more until every queued reply is written */
    int closing;         /* close once every queued reply is written */
    int closed;          /* conn_close ran: no more events; torn down at the next reap */
    int woken;           /* on w->woken */
    int read_paused;     /* backpressure: EV_READ is off */
    int mem_paused;      /* paused (also) for max-memory: looked at again by client_memory_tick */
    int postponed;       /* a frame waits for the next backend flush (arrival order) */
    size_t mem_held;     /* bytes counted in the process total (max-memory) */
    size_t replies_held; /* reply bytes kept on its queue behind an earlier request (request.c):
                            they count against its output limits (conn_out_held) */
    struct replywin win; /* its reply window: requests taken while their replies owed and held fit */
    uint64_t out_total;  /* reply bytes queued on its output so far (what it took: this less what is pending) */
    /* AUTH throttling (authgate.c) */
    int auth_held;                     /* an AUTH waits its address's turn, or a failed one's reply its delay:
                                          nothing more is parsed or read until c's timer fires */
    struct authgate_client *auth_gate; /* NULL until c's first AUTH waits or fails */
    /* a command that needs a dedicated connection to a cluster slot with no reachable owner yet
     * (client.c: client_waits_for_owner): nothing more is parsed or read until owner_timer fires */
    int owner_held;
    int owner_waits; /* how many times the frame waited so far */
    struct event *owner_timer;
    /* per-user limits (userlimit.h) */
    struct userlimit *ulimit; /* the user c is counted under (conn_user_login); NULL: none */
    int rate_held;            /* over its user's rate=: nothing more is parsed or read until rate_timer fires */
    int rate_paid;            /* the frame at the head of its input took its token and waits to be parsed again */
    uint32_t user_requests;   /* requests of a user without rate= parsed in this batch (userlimit_count at its end) */
    struct event *rate_timer;
};

/* Queue reply bytes for c (dropped once c is closed); checked against its hard limit
 * first (conn_output_over: past it c is closed and the bytes dropped), counted, written
 * at the flush step. */
void conn_out(struct client *c, const char *data, size_t len);

/* Reply bytes queued for c and not yet written. */
static inline size_t conn_out_pending(const struct client *c)
{
    if (c->bev) return evbuffer_get_length(bufferevent_get_output(c->bev));
    return c->obuf.len - c->obuf_off;
}

/* Every reply byte keygate holds for c: queued on its output, and kept on its request
 * queue until an earlier request's reply came. What its output limits compare. */
size_t conn_out_held(const struct client *c);

/* `arriving` more reply bytes for c (a reply being queued or kept, or the part of one the
 * backend has sent so far): when they and what c holds (conn_out_held) pass its hard
 * limit, c is closed. The hard limit is client-output-hard-limit, and client-output-limit
 * while keygate is over max-memory (a client that does not read is closed before the
 * process grows further). 1 when c is closed. */
int conn_output_over(struct client *c, size_t arriving);

/* max-memory: count what c holds now (unparsed input, its MULTI, unwritten replies). */
void conn_account(struct client *c);

/* c authenticated as u (max-clients=, userlimit_login): 0 when c now counts under u (and no
 * longer under its previous user); -1 when u has max-clients connections (c is unchanged). */
int conn_user_login(struct client *c, const struct user_conf *u) KG_MUST_CHECK;

/* c is no longer authenticated (closed, RESET, its user gone on a reload): its count goes. */
void conn_user_logout(struct client *c);

/* Something changed for c (a reply at the head of its queue, its subscriptions settled,
 * a dedicated connection lost): the worker services it at the next flush step. */
void conn_wake(struct client *c);

/* c closes once every reply queued for it is written (conn_close then, from its service
 * step; conn_wake it for that to be looked at): nothing more of its input is handled. */
static inline void conn_close_when_done(struct client *c)
{
    c->closing = 1;
}

/* The one close path of a client: c gets no more events and is torn down at the next reap
 * (its requests orphaned, its dedicated connections closed), outside every callback.
 * Closing a closed client does nothing. */
void conn_close(struct client *c, const char *reason);

#endif
