/* keptsend.h: a cluster or Sentinel request's kept send: staged on its node, read back through the re-send table, sent again or held until its deadline. */
#ifndef KEYGATE_KEPTSEND_H
#define KEYGATE_KEPTSEND_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "conn.h"
#include "request.h"

/*
 * A request for an instance whose nodes move (a cluster; a Sentinel instance, a cluster of one
 * node that moves) is written by the router into its struct request_send (the bytes, one entry a
 * reply owed) and staged from there, so that it can go again when Redis says it did not run
 * (resend.h's table). This module owns what happens to a send after it was written: staging an
 * attempt (keptsend_stage), reading each reply of it first (keptsend_intercept), going again or
 * waiting on its client's list with its own deadline (keptsend_again), and giving up (its last
 * answer, or -UNAVAILABLE, answers its request or its part: parts.h). It never calls the router.
 */

/* How a backend reply is used (struct pending's kind; router.h's table says what each does). */
enum route_kind {
    ROUTE_PASS = 0,
    ROUTE_DROP,
    ROUTE_QUEUED,
    ROUTE_EXEC_PICK,
    ROUTE_EXEC_FILTER,
    ROUTE_PART,
    ROUTE_PART_PICK,   /* a split part in keygate's MULTI (its invalidations): element 0 of EXEC is the part */
    ROUTE_FILL,        /* a near-cache fill: stored, and the command's reply rendered from it (nearcache.c) */
    ROUTE_PREFETCH,    /* a near-cache fill of one of MGET's keys (part = its index): stored, not answered */
    ROUTE_ASKING,      /* the ASKING before a command sent again after -ASK: swallowed */
    ROUTE_SCRIPT_LOAD, /* the SCRIPT LOAD before an EVALSHA sent again after -NOSCRIPT: swallowed */
    /* the router's own entries (no request; part = the instance): replicas=N's group commit */
    ROUTE_REPL_SYNC, /* the replicated no-op before the WAIT: swallowed */
    ROUTE_REPL_WAIT, /* WAIT need timeout: answers the writes of its group (replcommit.c) */
};

/* A lone EVALSHA's send (request_send.script): what its -NOSCRIPT may do (router_forward notes it). */
enum route_sha {
    ROUTE_SHA_NONE = 0, /* not an EVALSHA (or one inside the client's MULTI) */
    ROUTE_SHA_EVALSHA,  /* its -NOSCRIPT may load the script (resend_decide_load) */
    ROUTE_SHA_LOAD,     /* its next attempt loads the script first (keptsend_stage) */
    ROUTE_SHA_LOADED,   /* loaded once: a second -NOSCRIPT passes */
};

/* Stage s's entries from s->from on b (after SCRIPT LOAD when a -NOSCRIPT asked for it, after ASKING
 * when s->ask): one attempt; its replies are owed to req from now on. */
void keptsend_stage(struct request *req, struct request_send *s, struct backend *b);

/* s's attempt ended without running, or s was just written with no connection to stage it on (one
 * reply owed to req stands for it until it goes): staged again now, or it waits on its client's
 * list (its deadline starts with its first wait), or gives up. A request whose client left is not
 * sent again. */
void keptsend_again(struct request *req, struct request_send *s);

/* The send of req that the entry pd belongs to (NULL: none kept: every request on a single server). */
static inline struct request_send *keptsend_of(struct request *req, const struct pending *pd)
{
    if (__builtin_expect(req->sends == NULL, 1) || pd->kind == ROUTE_ASKING || pd->kind == ROUTE_SCRIPT_LOAD)
        return NULL;
    int k = req->nsends > 1 ? pd->part : 0;
    return k < req->nsends && req->sends[k].nentries > 0 ? &req->sends[k] : NULL;
}

/* A reply (reply NULL: a failure; unsent: of an entry never written) for an entry of s. Returns 1
 * when it was taken here (the send goes again, or waits), 0 when the router reads it as usual. */
int keptsend_intercept(struct backend *b, struct request_send *s, const char *reply, size_t len, int unsent);

/* The n-th wait (from 0) for an owner keygate cannot reach: 25 ms doubling, at most 500 ms. */
int keptsend_wait_ms(int n);

/* How many waits (25 ms doubling to 500 ms) a request for `instance` makes for an owner it cannot
 * reach before it fails: about 6.3 s on a cluster, failover-hold on a sentinel instance. */
int keptsend_max_waits(const struct worker *w, int instance);

/* How long a request for `instance` waits for an owner it cannot reach, from its first wait, before
 * it fails (its deadline): the sum of ROUTE_MAX_RETRIES waits (about 6.3 s) on a cluster,
 * failover-hold on a sentinel instance. */
int64_t keptsend_hold_ms(const struct worker *w, int instance);

/* c is torn down: its sends that wait to go again are dropped (their requests, orphaned, are freed
 * once nothing else is owed to them), and its timer freed. */
void keptsend_client_gone(struct client *c);

#endif
