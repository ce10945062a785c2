/* request.h: one client command waiting for its reply, the client's queue of them, the recycling pool. */
#ifndef KEYGATE_REQUEST_H
#define KEYGATE_REQUEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "loop.h"
#include "util.h"

struct client;

/* One part of a split command (an instance, and on a cluster one slot): its reply once it came. */
struct request_part {
    int instance;
    int slot;         /* -1: a single-server instance */
    int node;         /* a keyless command's part for one primary of a cluster: its node (nodes_owner), else -1 */
    uint8_t replicas; /* a split write's part: held until N replicas have it, as a request (replcommit.c) */
    char *reply;
    size_t len;
};

/* One reply a kept send owes: how the router reads it, and where its bytes end in `bytes`. */
struct request_entry {
    uint8_t kind;
    uint16_t part;
    uint32_t end;
};

/*
 * What the router sent to a cluster node for a request (or one part of a split request),
 * kept until every reply of it came, so that it can be sent again when Redis answers that
 * it did not run it (-MOVED, -ASK, -TRYAGAIN, -CLUSTERDOWN) or when no node owns its slot
 * yet (router.c).
 */
struct request_send {
    struct bytebuf bytes;          /* the requests, as staged */
    struct request_entry *entries; /* one per reply owed, in order */
    int nentries, cap;
    int instance, slot;
    int left; /* replies of the current attempt still owed */
    int redo; /* a reply said it did not run: send again from entry `from` */
    int from;
    int atomic; /* a MULTI ... EXEC: sent again whole (EXECABORT: nothing ran) */
    int wait;   /* the next attempt waits (TRYAGAIN, CLUSTERDOWN, no owner) */
    int hops, retries;
    int ask;         /* the next attempt goes to ask_host:ask_port, after ASKING */
    uint8_t script;  /* a lone EVALSHA's: 1 its -NOSCRIPT may load the script, 2 the next attempt loads it first,
                       3 it was loaded (once per request) (keptsend.h: enum route_sha); 0 any other send */
    uint8_t sha[20]; /* that script's name (scripts.h), while script > 0 */
    char ask_host[256];
    int ask_port;
    char *error; /* the last redirect, passed through when the bounds are reached */
    size_t error_len;
    int queued;             /* on its client's `resends` list (keptsend.c) */
    uint64_t held_since_ns; /* monotonic: its first wait on that list (0: none) */
    uint64_t deadline_ns;   /* monotonic: its first wait for the owner + the instance's hold (keptsend_hold_ms); past it
                             the send gives up (0: it never waited) */
    TAILQ_ENTRY(request_send) resend_link; /* that list's links */
    struct request *req;
};

/*
 * A request lives on its client's queue from the moment it is parsed until its reply is
 * handed to the client's output (in queue order). Backend replies owed to it are counted in
 * `waiting`; a request whose client went away (client NULL) lives on until they all came.
 */
struct request {
    TAILQ_ENTRY(request) link;
    struct worker *worker;
    struct client *client; /* NULL once the client let go of it (orphaned) */
    int waiting;           /* backend replies still owed to it */
    int done;              /* its reply is complete */
    char *reply;           /* the reply, kept while an earlier request of the client waits */
    size_t reply_len;
    size_t held; /* bytes of replies it keeps (its reply, its parts): counted in max-memory, and in
                    its client's replies_held while it is on the client's queue */
    /* the router's: how the backend replies make the client's reply */
    uint8_t blocking; /* sent on the client's blocking pin */
    uint8_t silent;   /* CLIENT REPLY OFF / SKIP: it completes in its turn, and no byte of it is written */
    uint8_t watching; /* a WATCH (a cluster's redirect of it is answered +OK: router.c) */
    uint8_t replicas; /* replicas=N: its reply is held until a WAIT says N replicas have the write (router.c) */
    uint16_t xadds;   /* keygate's MULTI wrap: near-cache XADDs at the end of its EXEC array (checked: router.c) */
    char *repl_reply; /* that reply, while held (request_keep_reply) */
    size_t repl_len;
    int64_t block_ms;   /* a blocking command: how long it may block (0: forever), for a new pin on a cluster */
    char *queued_error; /* keygate's MULTI wrap: the command's queue-time error, if any */
    size_t queued_error_len;
    struct bytebuf exec_keep;   /* the client's EXEC: one byte per reply inside it, the client's (1) or injected (0) */
    struct request_part *parts; /* split across instances: one part per instance, merged when all came */
    int nparts, parts_left;
    int merge;                  /* enum plan_merge */
    int16_t *key_part;          /* split: part of argv[i] (moved from the plan) */
    struct request_send *sends; /* cluster: kept sends, one per part (1 when not split: &send1) */
    int nsends;
    struct request_send send1;      /* the one send of a request that is not split; its buffers outlive a
                                   recycling (request_new), so a kept send allocates nothing */
    struct request_send *recording; /* the send the router is writing now (router_expect records) */
    size_t argc;
    uint16_t scan_rank, scan_nodes; /* SCAN on a cluster: the rank of the primary it reads, of how many */
    uint64_t seq;                   /* its place among its client's requests (request_new) */
    uint64_t win_charge;            /* what it was charged in its client's reply window until its reply came */
    struct stats_mark mark;         /* its namespace slot, class, instance and read time (stats.h) */
    void *nc;                       /* the near cache's (a fill, or the keys a write invalidates): one heap block */
    struct bytebuf track;           /* CLIENT TRACKING: the keys a write changes (tracker.c) */
};

/* A new request at the tail of c's queue. */
struct request *request_new(struct client *c);

/*
 * The one completion: req's reply is reply[0..len) (none for a silent request). At the head of its client's queue the
 * bytes go to the client's output at once (no copy), followed by every later request that
 * is already complete, and the client is woken; elsewhere they are kept until the head
 * reaches it. For an orphaned request the reply is dropped. A request completes once.
 */
void request_complete(struct request *req, const char *reply, size_t len);

/* Complete req with the error reply "-<text>\r\n" (replies_error), counted per code. */
void request_error(struct request *req, const char *text);

/* The backend reply owed to req (request_expect) is its reply, or fails it with text. */
void request_answer(struct request *req, const char *reply, size_t len);
void request_answer_error(struct request *req, const char *text);

/* One more backend reply is owed to req. */
void request_expect(struct request *req);

/* Keep reply[0..len) as part `part` of split request req (copied), counted as a reply held
 * for its client: past the client's hard limit the client is closed (conn_output_over). */
void request_part_keep(struct request *req, int part, const char *reply, size_t len);

/* Part `part` of req, kept, is replaced by reply[0..len) (copied, counted as request_part_keep; the
 * replaced bytes stop counting): a held part whose replication failed gets its error. */
void request_part_replace(struct request *req, int part, const char *reply, size_t len);

/* Keep reply[0..len) as req's reply while it is held (replicas=N, router.c), counted like a reply
 * kept behind an earlier one; freed with req. */
void request_keep_reply(struct request *req, const char *reply, size_t len);

/* A backend reply owed to req came and was taken (by the router, not as the reply). Frees an
 * orphaned request with nothing more owed. */
void request_reply_consumed(struct request *req);

/* req's client lets go of it (the client is torn down): freed now or when its last
 * backend reply came. */
void request_release(struct request *req);

/* Free w's recycled requests (at worker exit). */
void request_pool_free(struct worker *w);

#endif
