/* router.h: writes each request for a backend (a kept send is staged, and again, by keptsend.c) and interprets what the backend answers. */
#ifndef KEYGATE_ROUTER_H
#define KEYGATE_ROUTER_H

#include "backend.h"
#include "keptsend.h"
#include "conn.h"
#include "policy.h"
#include "request.h"

/*
 * Every reply a backend owes is one FIFO entry of a kind the router chose when it wrote the
 * bytes, and is interpreted here when it comes (the hooks):
 *
 *   PASS        the request's reply
 *   DROP        an injected command (MULTI, PEXPIRE, UNWATCH): swallowed
 *   QUEUED      the client's command inside keygate's MULTI: a queue-time error is kept
 *   EXEC_PICK   keygate's EXEC: the client's reply is element 0 (or the queued error)
 *   EXEC_FILTER the client's EXEC: the injected elements are dropped
 *   PART        one instance's part of a split command, merged once all came
 *   PART_PICK   a part in keygate's MULTI (it carries near-cache XADDs): element 0 of EXEC
 *   FILL        a near-cache fill (EVAL): stored, and the command's reply rendered from it
 *   PREFETCH    a near-cache fill of one of MGET's keys, after the MGET: stored, not answered
 *
 * Frames of subscriber connections go to the client's pub/sub state (pubsub.c) and output.
 * A connection that fails answers its entries -UNAVAILABLE; a dedicated one that fails
 * under its owner is told to pins.c (pins_owner_lost: WATCH lost, subscriptions gone), which
 * changes that client's pins and wakes it.
 */

/* The kinds (enum route_kind, the table above) are declared in keptsend.h, beneath the router: the
 * kept sends write and read them too. */

/* What the backends of a worker report to (nodes_start). */
const struct backend_hooks *router_hooks(void);

/* The connection for c's commands to `instance` (on a cluster, to `slot`'s primary; -1: keyless):
 * its WATCH pin there, else its shared one. NULL when that connection is down (or, on a
 * cluster, the slot's owner is not known: router_forward then waits for it). */
struct backend *router_conn_for(struct client *c, int instance, int slot);

/* Send a FORWARD plan's bytes (the command, its TTL rewrite) to backend b for req; b NULL or
 * down: req is answered -UNAVAILABLE. `frame` is the client's parsed frame (c->parser). On a
 * shared cluster connection the bytes are kept and sent again when Redis says they did not run
 * (resend.h's table: -MOVED, -ASK, -TRYAGAIN, -CLUSTERDOWN but "Hash slot not served", which
 * fails at once), bounded by ROUTE_MAX_HOPS (keptsend.c) and the request's deadline
 * (keptsend_hold_ms); b NULL waits for the slot's owner. A request lost after it was written is
 * never sent again. */
void router_forward(struct client *c, struct backend *b, struct request *req, const struct plan *plan,
                    const char *frame);

/* A near-cache fill for req (nearcache_try said NEARCACHE_FILL): EVAL <fill script> 1 <argv[1]> on
 * b, read as ROUTE_FILL (nearcache_fill_reply makes the client's reply); b NULL or down:
 * -UNAVAILABLE. */
void router_forward_fill(struct client *c, struct backend *b, struct request *req, const struct plan *plan,
                         const char *frame);

/* After an MGET forwarded for req (nearcache_try said NEARCACHE_PREFETCH): one fill per key not
 * cached, on the same connection b, read as ROUTE_PREFETCH (stored only). b NULL or down: none. */
void router_forward_prefetch(struct client *c, struct backend *b, struct request *req);

/* Write the plan's command (and its TTL fixes, no MULTI wrap) to out, for a client transaction.
 * Appends one keep flag per backend reply to keep (1 = the client's, 0 = injected). */
void router_write_queued(struct bytebuf *out, const struct client *c, const struct plan *plan, const char *frame,
                         struct bytebuf *keep);

/* EXEC: MULTI + c's buffered transaction + EXEC on b (a connection of `instance`; on a cluster,
 * of `slot`'s primary, and sent again whole after a redirect), in one write; req's reply is the
 * EXEC array without the injected elements. Takes c->multi_keep. */
void router_exec(struct client *c, struct backend *b, struct request *req, int instance, int slot);

/* DISCARD under a WATCH: UNWATCH on c's WATCH pin (its reply swallowed). */
void router_unwatch(struct client *c, struct request *req);

/* A (P|S)(UN)SUBSCRIBE frame to c's subscriber connection b on instance inst, followed by
 * the marker that tells when its confirmations are all in. */
void router_subscribe(struct client *c, struct backend *b, int inst, const char *frame, size_t len);

/* A command keygate made (whole RESP bytes) to b, a connection of `instance`, for req: its reply is
 * req's. b NULL or down: req is answered -UNAVAILABLE. */
void router_forward_bytes(struct client *c, struct backend *b, int instance, struct request *req, const char *bytes,
                          size_t len);

/* Answer req -UNAVAILABLE for `instance` (down, or no dedicated connection free). */
void router_unavailable(struct client *c, struct request *req, int instance);

/*
 * How fanout.c (split and fanned-out commands) writes each part of a request, as the router writes
 * its own: router_out gives the buffer for part `part` going to (instance, slot) on b (b's staging
 * buffer, or on a cluster's shared connection the part's kept send, which is sent again after a
 * redirect; b may then be NULL: it waits for the slot's owner); router_expect owes one more reply
 * of `kind` for it; router_out_done stages the part (or makes it wait). router_keeps: would a
 * part for `instance` on b be kept (a cluster's shared connection, or no connection known yet)?
 */
struct bytebuf *router_out(struct client *c, struct backend *b, struct request *req, int instance, int slot, int part);
int router_keeps(const struct client *c, const struct backend *b, int instance);
void router_expect(struct backend *b, struct request *req, enum route_kind kind, int part);
void router_out_done(struct request *req, struct backend *b);

/* Worker w stops: replicas=N writes held for a WAIT not sent yet get -NOREPLICAS (they ran), and no
 * WAIT starts from here on; those of a WAIT out are answered when nodes_free fails it (replcommit_stop,
 * with parts.c's merge for a split write's parts). replcommit_free frees the groups after nodes_free. */
void router_stop(struct worker *w);

#endif
