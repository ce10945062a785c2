/* resend.h: "did it run?": what a backend reply (or a lost connection) says of a request a cluster or Sentinel instance was sent, and what the router does about it: one pure table. */
#ifndef KEYGATE_RESEND_H
#define KEYGATE_RESEND_H

#include <stddef.h>

/* What a reply to a kept send (router.c) is, as far as "did it run?" goes. */
enum resend_kind {
    RESEND_OTHER = 0,    /* any other reply: the command ran (or failed on its own) */
    RESEND_MOVED,        /* -MOVED slot host:port: not run, the slot is elsewhere */
    RESEND_ASK,          /* -ASK slot host:port: not run, the key is being migrated there */
    RESEND_TRYAGAIN,     /* -TRYAGAIN: not run (a multi-key command during a migration) */
    RESEND_CLUSTERDOWN,  /* -CLUSTERDOWN (the cluster is down, or reads are refused for now): not run */
    RESEND_UNSERVED,     /* -CLUSTERDOWN Hash slot not served: not run, and no node is assigned the slot */
    RESEND_READONLY,     /* -READONLY: a write on a replica (a demoted primary) */
    RESEND_LOADING,      /* -LOADING: a restarting node */
    RESEND_UNBLOCKED,    /* -UNBLOCKED: a blocking wait ended by the node turning replica */
    RESEND_LOST_UNSENT,  /* no reply: the connection was lost before the request was written */
    RESEND_LOST_WRITTEN, /* no reply: the connection was lost after the request was written */
    RESEND_NOSCRIPT,     /* -NOSCRIPT: an EVALSHA did not run, its node does not have the script */
};

/* What the router does with it. */
enum resend_action {
    RESEND_PASS = 0, /* read as usual: the reply (or -UNAVAILABLE for a lost one) is the request's */
    RESEND_GO,       /* taken: it did not run; go again now (MOVED: to the new owner, ASK: to the target) */
    RESEND_WAIT,     /* taken: it did not run; go again after a wait, within the request's deadline */
    RESEND_GIVE_UP,  /* it did not run and will not: the reply is the request's answer now */
    RESEND_LOAD,     /* taken: it did not run; SCRIPT LOAD the script keygate saw on that node, then go again
                        now (only as resend_decide_load allows; else it passes) */
};

/* The kind of reply[0..len) (reply NULL: the connection was lost; `written` says whether the
 * request had been written to it). A reply that is not an error is RESEND_OTHER. */
enum resend_kind resend_classify(const char *reply, size_t len, int written);

/*
 * The table: what a reply of `kind` means for a kept send to an instance that is a cluster
 * (sentinel 0) or a Sentinel-managed one (sentinel 1, kept as a cluster of one node), of a
 * blocking command or not. READONLY and LOADING, and UNBLOCKED for a blocking command, are
 * taken only on a Sentinel instance (its node is no longer the primary, or not yet); on a
 * cluster they pass. A lost connection is taken only when nothing was written. NOSCRIPT is
 * RESEND_LOAD (a cluster's node that joined, or restarted, or was flushed lacks a script the
 * others have; a promoted replica lacks what its old primary loaded: Redis 7.0 does not
 * replicate SCRIPT LOAD), subject to resend_decide_load.
 */
enum resend_action resend_decide(enum resend_kind kind, int sentinel, int blocking);

/*
 * RESEND_LOAD (a -NOSCRIPT) for a send: taken (RESEND_LOAD) only when it is an
 * EVALSHA or EVALSHA_RO of its own (evalsha: the reply is the client's, alone or as element 0 of
 * keygate's MULTI wrap; inside the client's MULTI the NOSCRIPT is one element of its EXEC's array
 * and passes), keygate holds the script's body (known: seen through
 * SCRIPT LOAD or EVAL, scripts.h) and the send did not load it already (loaded: once per
 * request, so a node that refuses the script cannot loop). Otherwise RESEND_PASS: the client
 * gets the NOSCRIPT as Redis answered it (its library then sends EVAL).
 */
enum resend_action resend_decide_load(int evalsha, int known, int loaded);

/* Is kind one of a cluster's "not run here" answers (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, UNSERVED)? */
static inline int resend_is_cluster_refusal(enum resend_kind kind)
{
    return kind >= RESEND_MOVED && kind <= RESEND_UNSERVED;
}

#endif
