/* pins.h: a client's dedicated connections (WATCH, blocking, subscriber pins): set up, moved, dropped, here only. */
#ifndef KEYGATE_PINS_H
#define KEYGATE_PINS_H

#include <stdint.h>

#include "conn.h"
#include "policy.h"
#include "session.h"

/*
 * A pin is a backend connection that holds one client's state and so carries no other
 * client's commands (nodes_conn, pinned): the WATCH pin (c->watch_pin, from WATCH to EXEC, DISCARD,
 * UNWATCH or RESET), the blocking pin (c->block_pin, while a blocking command is in flight;
 * listed in the process's CLIENT UNBLOCK table, blocked.h), and one subscriber connection per
 * instance (c->pubsub.pin[]). This module is the only code that writes those fields and the
 * WATCH-lost flag; the router and the client ask it.
 */

/* What a request needs of its client's pins (pins_need). */
enum pins_need {
    PINS_NEED_NONE = 0,
    PINS_NEED_FRESH = 1,       /* a new dedicated connection to plan->instance (a blocking command, a WATCH
                                * without a WATCH pin, a SUBSCRIBE without a subscriber connection there) */
    PINS_NEED_EMPTY_QUEUE = 2, /* it waits until every earlier request of the client has its reply: it leaves
                                * on another connection than them, or it is a RESP3 (un)subscribe, whose
                                * confirmations are pushes that go to the client as they come (a RESP3 client
                                * subscribed may send any command: its subscriber connections carry only the
                                * (un)subscribes) */
};

/* What pins_need reads: the request's plan, and the client's pins and mode. */
struct pins_facts {
    enum plan_kind kind;
    enum plan_flow flow;
    int instance;           /* the plan's; -1 none */
    enum session_mode mode; /* the client's session */
    int watch_pinned;       /* the client holds a WATCH pin */
    int subscriber_pinned;  /* the client holds a subscriber connection on `instance` */
    int resp3;              /* the client speaks RESP3 */
};

/*
 * Does this request need a dedicated connection of its own, and must it wait for an empty
 * queue first? Pure: reads only f. A request queued inside MULTI (nothing is sent before EXEC)
 * or not forwarded needs neither. PINS_NEED_FRESH only with an instance (>= 0).
 */
static inline unsigned pins_need(const struct pins_facts *f)
{
    if (f->kind != PLAN_FORWARD || f->mode == SESSION_MULTI) return PINS_NEED_NONE;
    int own = f->flow == FLOW_BLOCK || (f->flow == FLOW_WATCH && !f->watch_pinned);
    int fresh = own || (f->flow == FLOW_SUBSCRIBE && !f->subscriber_pinned);
    int empty = own || (f->flow == FLOW_SUBSCRIBE && f->mode != SESSION_SUBSCRIBED) ||
                (f->resp3 && (f->flow == FLOW_SUBSCRIBE || f->flow == FLOW_UNSUBSCRIBE));
    return (fresh && f->instance >= 0 ? PINS_NEED_FRESH : 0u) | (empty ? PINS_NEED_EMPTY_QUEUE : 0u);
}

/* pins_need for c's request with this plan. */
static inline unsigned pins_need_of(const struct client *c, const struct plan *plan)
{
    if (__builtin_expect(plan->kind != PLAN_FORWARD, 0)) return PINS_NEED_NONE;
    struct pins_facts f = {
        .kind = plan->kind,
        .flow = plan->flow,
        .instance = plan->instance,
        .mode = c->session.mode,
        .watch_pinned = c->watch_pin != NULL,
        .subscriber_pinned = plan->instance >= 0 && c->pubsub.pin[plan->instance] != NULL,
        .resp3 = c->resp3,
    };
    return pins_need(&f);
}

/* ---- WATCH ---- */

/* c's WATCH pin, opened on (instance, slot)'s node, and the session watching it, when c has none.
 * NULL when none can be had now (max-pinned, the slot's owner not known). */
struct backend *pins_watch(struct client *c, int instance, int slot);

/* c's WATCH ends (EXEC, DISCARD, UNWATCH): the pin goes back to the idle list once its replies
 * are in, and the session watches nothing. Nothing when c has no WATCH pin. */
void pins_watch_release(struct client *c);

/* c's WATCH ends with its pin still WATCHing (EXECABORT): the pin is closed, never reused. */
void pins_watch_abandon(struct client *c);

/* 1 when c's WATCH pin was lost (pins_owner_lost) since its WATCH began, and forget it: the
 * next EXEC must not run as if nothing were watched. */
int pins_watch_lost_take(struct client *c);

/* ---- blocking commands ---- */

/* c's blocking pin for a command that blocks up to block_ms (0: for ever) on (instance, slot)'s
 * node: a new dedicated connection, listed for CLIENT UNBLOCK (blocked.h) and exempt from
 * backend-timeout for as long; a previous blocking pin of c (a command sent again after a
 * redirect) is dropped from the table first. The caller unpins it (backend_unpin) to send it
 * back to the idle list once it answered. NULL when none can be had now. */
struct backend *pins_block(struct client *c, int instance, int slot, int64_t block_ms);

/* c's blocking command answered (or failed): its pin is no longer c's, the table forgets it (a
 * CLIENT UNBLOCK that named it may still be on its way: that connection is then never reused),
 * and the session is no longer blocked. */
void pins_unblock(struct client *c);

/* ---- subscriber connections ---- */

/* c's subscriber connection on instance, opened on slot's node (a shard channel; -1: any);
 * RESP2: c is now in subscribed mode. NULL when none can be had now. */
struct backend *pins_subscriber(struct client *c, int instance, int slot);

/* Close c's subscriber connections (never reused: no other client may get their
 * subscriptions) and forget their subscriptions (RESET, a protocol switch). */
void pins_drop_subscribers(struct client *c);

/* ---- losing them ---- */

/* b, a pin of c, closed (backend_hooks.owner_lost): a blocking pin is forgotten (its request
 * got -UNAVAILABLE); a WATCH pin is marked lost (pins_watch_lost_take); a subscriber
 * connection's loss is told to c with -UNAVAILABLE, and c closes after it when it had
 * subscriptions there (never loses messages silently). */
void pins_owner_lost(struct backend *b, struct client *c);

/* c is torn down: every pin of c is closed (never reused), its blocking entry dropped. */
void pins_drop_all(struct client *c);

#endif
