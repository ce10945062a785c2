/* nearcache.h: the near cache in the request path (hits, fills, local writes) and its stream readers. */
#ifndef KEYGATE_NEARCACHE_H
#define KEYGATE_NEARCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "conn.h"
#include "policy.h"
#include "request.h"
#include "util.h"

/*
 *   client: policy_decide -> nearcache_hit_now --hit, nothing queued--> conn_out (no request made)
 *                         -> nearcache_try --hit--> request_complete (no backend round trip)
 *                                   |miss
 *                                   v
 *                 router_forward_fill: EVAL <fill script> 1 key  (ROUTE_FILL, the client's connection)
 *                                   v
 *                 nearcache_fill_reply: store (unless raced), render the reply of the command
 *
 *   write: nearcache_writes evicts the keys at once and moves the namespace's generation, at
 *          send and again when the write's reply comes (nearcache_write_replied)
 *
 *   reader thread per instance (a connection of its own, syncconn):
 *      HSET markers <group> "<cursor> <ms>"      (before any entry is served)
 *      MULTI / XINFO STREAM s... / XREAD COUNT 100 STREAMS s... cursors... / EXEC
 *          gap (stream gone, first entry above the cursor, last id below it) -> flush
 *          entries -> every worker's inbox -> nccore_stream_apply (cursor, then evict)
 *      caught up: XREAD BLOCK 1000 STREAMS s... cursors...  (a wake-up only)
 *      every near-cache-trim-interval: XTRIM s MINID <lowest live marker>
 *
 * One cache per worker thread (nccore, no lock on the hit path), each bounded to
 * near-cache-memory / threads: the process stays under near-cache-memory. A worker's local
 * write evicts its own cache at once; other workers' caches learn it from the stream.
 */

struct nearcache;

/* Start the near cache for the workers of p (already initialised, not yet running): per
 * worker a cache and an inbox on its event base, and a reader thread per instance holding a
 * near-cache namespace. NULL when the registry has none (then every call below is a no-op). */
struct nearcache *nearcache_start(const struct config *cfg, struct proxy *p);

/* Stop the readers (each within about a second) and free everything; after the workers
 * stopped, before their event bases are freed. NULL: no-op. */
void nearcache_stop(struct nearcache *nc);

/* A reload's config (main thread): the prefixes this process's writes announce on each instance
 * (published in the instance's writers hash by its reader). NULL nc: no-op. */
void nearcache_update(struct nearcache *nc, const struct config *cfg);

enum nearcache_verdict {
    NEARCACHE_PASS = 0, /* not a cached read: it goes on as usual */
    NEARCACHE_HIT,      /* answered from the cache (req is complete) */
    NEARCACHE_FILL,     /* a miss: the caller sends req as a fill (router_forward_fill of argv[1]) */
    NEARCACHE_PREFETCH, /* MGET with keys not cached: the caller forwards it, then router_forward_prefetch */
};

/* The fill's arguments after its key (ncpolicy.h's script): the largest value this worker caches,
 * and the row's mode ('n' for a prefetch). */
size_t nearcache_fill_limit(const struct request *req);
char nearcache_fill_mode(const struct request *req);

/* At most this many keys of one MGET are prefetched (a pending's part index is a byte). */
#define NEARCACHE_PREFETCH_MAX 255

/* MGET's keys to prefetch (NEARCACHE_PREFETCH): how many, and key i. */
size_t nearcache_prefetch_count(const struct request *req);
const char *nearcache_prefetch_key(const struct request *req, size_t i, size_t *len);

/* The fill of prefetched key i came (reply NULL: it failed): stored unless raced; nobody is answered. */
void nearcache_prefetch_reply(struct request *req, size_t i, const char *reply, size_t len);

/* A request's plan for client c (decided, counted, req made): what the near cache makes of it.
 * Worker thread. */
enum nearcache_verdict nearcache_try(struct client *c, struct request *req, const struct plan *plan,
                                     const struct policy_request *pr);

/*
 * A hit with no request (client.c, when c has nothing queued: its reply may go out at once): a
 * plain cached read (not MGET) whose key is cached and vouched for is rendered, *reply / *len
 * point at the bytes (the worker's buffer, valid until its next near-cache call), and 1 is
 * returned, the hit counted. 0: nothing was counted or changed; the caller makes the request and
 * calls nearcache_try, which decides as always (a miss looks up twice: ~200 instructions, before
 * a round trip to Redis).
 */
int nearcache_hit_now(struct client *c, const struct plan *plan, const struct policy_request *pr, const char **reply,
                      size_t *len);

/* A write about to be forwarded with plan (its invalidations): the keys are evicted from this
 * worker's cache now and again when req's reply comes. */
void nearcache_writes(struct client *c, struct request *req, const struct plan *plan);

/* A write queued in c's MULTI: evicted now, and again at EXEC (nearcache_exec). */
void nearcache_queued(struct client *c, const struct plan *plan);

/* c's EXEC (req) is being sent: its queued writes' keys are evicted now and at its reply. */
void nearcache_exec(struct client *c, struct request *req);

/* The reply of a request that carried writes came (or failed): evict their keys again. */
void nearcache_write_replied(struct request *req);

/* A fill's reply (or NULL, len 0: it failed with error text `fail`): stored unless raced, and
 * the client's reply rendered from it (an error reply goes on as it came). */
void nearcache_fill_reply(struct request *req, const char *reply, size_t len, const char *fail);

/* The INFO section "# Nearcache" (per namespace: hits, misses, fills, raced, entries, bytes,
 * evictions by cause) of every worker's counts, appended to out; nothing when no namespace has
 * near-cache=D. Any thread. */
void nearcache_info(const struct proxy *p, struct bytebuf *out);

/* The same as Prometheus series (keygate_near_cache_*), appended to out. Any thread. */
void nearcache_format_prometheus(const struct proxy *p, struct bytebuf *out);

#endif
