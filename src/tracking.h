/* tracking.h: CLIENT TRACKING's state and decisions as Redis 7.0 keeps them, and the process-wide table of tracked keys and clients. */
#ifndef KEYGATE_TRACKING_H
#define KEYGATE_TRACKING_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/*
 * One table per process, one lock (docs/architecture.md "Client-side caching"). Every client
 * is registered at accept (a REDIRECT may name any client, as Redis's lookupClientByID), with
 * the worker that owns it and its tracking state. A tracking client's read remembers its keys
 * (key -> client ids, as Redis's TrackingTable); a write through keygate takes the key's ids
 * out (one-shot) and says, per id, which client of which worker gets which message: the
 * caller hands those to the workers (tracker.c). The lock is taken by a tracking client's read
 * and by every write while some client tracks (tracking_active), never otherwise.
 */

/* Flags of a client's tracking state, as Redis's CLIENT_TRACKING_* (TRACKINGINFO prints them). */
enum {
    TRACKING_ON = 1u << 0,
    TRACKING_BCAST = 1u << 1,
    TRACKING_OPTIN = 1u << 2,
    TRACKING_OPTOUT = 1u << 3,
    TRACKING_NOLOOP = 1u << 4,
    TRACKING_BROKEN_REDIR = 1u << 5,
};

#define TRACKING_CHANNEL "__redis__:invalidate" /* RESP2 REDIRECT clients hear it there */

#define TRACKING_MAX_PREFIXES 64 /* per client (Redis has no bound; keygate's is checked) */

/* A client's tracking state (CLIENT TRACKING's effect). */
struct tracking_state {
    uint32_t flags;
    uint64_t redirect; /* 0: none */
    size_t nprefixes;  /* BCAST: sorted bytewise, as Redis's rax iterates them */
    char *prefix[TRACKING_MAX_PREFIXES];
    size_t prefix_len[TRACKING_MAX_PREFIXES];
};

/* What CLIENT TRACKING asks (parsed, checked against the current state). */
struct tracking_request {
    int on;
    uint32_t options; /* TRACKING_BCAST | OPTIN | OPTOUT | NOLOOP */
    uint64_t redirect;
    size_t nprefixes;
    const char *prefix[TRACKING_MAX_PREFIXES]; /* into argv */
    size_t prefix_len[TRACKING_MAX_PREFIXES];
};

/*
 * Pure: CLIENT TRACKING ON|OFF [options] (argv[0] = CLIENT) against `cur`, in Redis 7.0's order
 * (clientCommand: options left to right, a REDIRECT's id checked with exists(ctx, id) where it
 * stands; then ON's compatibility checks; then the prefixes' collisions). 0 with *out filled,
 * else -1 with Redis's error text in err (without the leading '-').
 */
int tracking_parse(const struct tracking_state *cur, size_t argc, const char *const *argv, const size_t *argvlen,
                   int (*exists)(void *ctx, uint64_t id), void *ctx, struct tracking_request *out, char *err,
                   size_t errlen) KG_MUST_CHECK;

/* Pure: apply a parsed request to a state (Redis's enableTracking / disableTracking). */
void tracking_apply(struct tracking_state *st, const struct tracking_request *rq);

/* Free a state's prefixes (the state is off afterwards). */
void tracking_state_clear(struct tracking_state *st);

/* Pure: CLIENT TRACKINGINFO's reply for st in RESP3 or RESP2, with `caching` (CLIENT CACHING
 * given for the next command), appended to out. */
void tracking_info_reply(const struct tracking_state *st, int caching, int resp3, struct bytebuf *out);

/* Pure: should a read by a client in state `flags` with CLIENT CACHING `caching` remember its keys? */
int tracking_remembers(uint32_t flags, int caching);

/* Pure: the message bytes for an invalidation of keys[0..n) (n == 0: a null, "flush everything")
 * on a connection speaking RESP3 (a push) or RESP2 (a __redis__:invalidate pub/sub message),
 * appended to out. */
void tracking_message(int resp3, const char *const *keys, const size_t *lens, size_t n, struct bytebuf *out);

/* Pure: a frame from a RESP3 connection with CLIENT TRACKING on: 1 for ">2 invalidate [keys]"
 * (*n keys into keys/lens, pointing into f; room for len / 6 + 1 of them is enough), 2 for
 * ">2 invalidate _" (a flush), 0 for any other frame, -1 for an invalidate push not so shaped. */
int tracking_parse_push(const char *f, size_t len, const char **keys, size_t *lens, size_t *n);

/* What a write tells one client (tracking_invalidate's output). */
enum tracking_note_kind {
    TRACKING_NOTE_KEY = 0, /* invalidate `key` (a RESP3 push, or the RESP2 message when redirected) */
    TRACKING_NOTE_BROKEN,  /* its REDIRECT client is gone: "tracking-redir-broken" (RESP3 only) */
    TRACKING_NOTE_FLUSH,   /* invalidate everything (a null) */
};

struct tracking_note {
    uint8_t kind;
    uint8_t redirected; /* sent to a REDIRECT client: RESP2 gets the pub/sub form */
    int worker;         /* the worker that owns `client` */
    uint64_t client;    /* who receives it */
    uint64_t about;     /* BROKEN: the missing redirect id */
    char *key;          /* KEY: heap, the receiver frees it */
    size_t key_len;
};

struct tracking_notes {
    struct tracking_note *v;
    size_t n, cap;
};

/* Invalidations sent, by cause (the metrics' label). */
enum tracking_cause {
    TRACKING_CAUSE_WRITE = 0, /* a write through this keygate */
    TRACKING_CAUSE_EVICT,     /* tracking-table-max-keys pushed a key out */
    TRACKING_CAUSE_FLUSH,     /* keygate could not vouch: flush everything */
    TRACKING_CAUSES
};

struct tracking_client;
struct tracking_key;

struct tracking_table {
    pthread_mutex_t lock;
    struct tracking_client **clients; /* by id */
    size_t nclient_buckets;
    struct tracking_key **keys; /* by key bytes */
    size_t nkey_buckets, nkeys;
    size_t evict_cursor;
    struct ptrvec bcast;            /* struct tracking_client *: the clients in BCAST mode */
    size_t max_keys;                /* tracking-table-max-keys (0: no bound) */
    int tracking_clients;           /* atomic: clients with tracking on */
    uint32_t feed_up;               /* a bit per instance whose feed is live (under lock) */
    uint32_t stream_up;             /* a bit per instance whose near-cache stream reader vouches (under lock) */
    uint64_t flush_seq;             /* flushes sent so far (under lock) */
    int64_t mem;                    /* bytes held for the clients: their entries, prefixes, keys read (under lock) */
    int64_t *mem_total;             /* the process's max-memory total, mem included (NULL: not counted) */
    int64_t mem_limit;              /* max-memory (0: none): past it keys go, as past max_keys */
    uint64_t sent[TRACKING_CAUSES]; /* atomic: invalidation messages handed to workers */
};

/* An empty table remembering at most max_keys keys (0: no bound). */
void tracking_init(struct tracking_table *t, size_t max_keys);

/* Free everything (at exit, after the workers stopped). */
void tracking_free(struct tracking_table *t);

/* Client id, owned by worker `worker`, connected / gone (its state goes with it). */
void tracking_client_add(struct tracking_table *t, uint64_t id, int worker);
void tracking_client_remove(struct tracking_table *t, uint64_t id);

/* Is any client tracking (a relaxed read: a write need not take the lock when none)? */
static inline int tracking_active(struct tracking_table *t)
{
    return __atomic_load_n(&t->tracking_clients, __ATOMIC_RELAXED) > 0;
}

/* CLIENT TRACKING for client id: tracking_parse against its state, then (ON BCAST) every new
 * prefix ("" when none is given) must pass allow(ctx, prefix, len, err, errlen) == 0 (the
 * registry's rule; allow NULL: any), then tracking_apply, under the lock. 0 ok; -1 with the
 * error in err. *flags gets its flags after it. */
int tracking_command(struct tracking_table *t, uint64_t id, size_t argc, const char *const *argv, const size_t *argvlen,
                     int (*allow)(void *ctx, const char *p, size_t len, char *err, size_t errlen), void *ctx,
                     uint32_t *flags, char *err, size_t errlen) KG_MUST_CHECK;

/* A copy of client id's state (for TRACKINGINFO and GETREDIR; free with tracking_state_clear). */
void tracking_state_get(struct tracking_table *t, uint64_t id, struct tracking_state *out);

/* Client id read keys[0..n): remembered for it. `instances` has a bit per instance it read a key
 * of outside near-cache namespaces; streamed[i] (NULL: none) is key i's instance when it lies in
 * a near-cache namespace (its writes through keygates are also told by that instance's stream),
 * else 255. Keys pushed out past max-keys or max-memory add their invalidations (cause EVICT). */
void tracking_remember(struct tracking_table *t, uint64_t id, const char *const *keys, const size_t *lens, size_t n,
                       uint32_t instances, const uint8_t *streamed, struct tracking_notes *notes);

/* Client id (NOLOOP) sends a write of keys[0..n): it is no longer told of them (Redis forgets a
 * key's readers at any write; the feed's message for this write, which may come before the
 * write's reply, must not reach it). */
void tracking_forget(struct tracking_table *t, uint64_t id, const char *const *keys, const size_t *lens, size_t n);

/* Client `writer` (0: not a client of this keygate) wrote keys[0..n) of instances inst[0..n):
 * the notes for every client that remembered one (each key is forgotten: one-shot), and for
 * every BCAST client whose prefix matches, NOLOOP honoured. BCAST clients hear a write through
 * keygate (from_feed 0) only when the key's instance has no live feed: else they hear it from
 * the feed (from_feed 1, writer 0, inst NULL), once. */
void tracking_invalidate(struct tracking_table *t, uint64_t writer, const char *const *keys, const size_t *lens,
                         const uint8_t *inst, size_t n, int from_feed, struct tracking_notes *notes);

/*
 * What keygate can vouch for, per instance (README "Client-side caching"): while its feed (Redis's
 * own BCAST tracking) is live, every write; while it is down, the writes through keygates to
 * near-cache namespaces, which the near cache's stream names, as long as its reader vouches
 * (caught up, no gap). Each function below sends the flush-all (cause FLUSH) only to the clients
 * whose reads it can no longer vouch for; a flushed client's bits for the instance go.
 */

/* Redis flushed instance inst (a null push): every client that read a key of it since its last
 * flush (every BCAST client) gets a flush. */
void tracking_flush_instance(struct tracking_table *t, int inst, struct tracking_notes *notes);

/* inst's feed dropped: a flush to the clients that read keys of it outside near-cache namespaces
 * (every BCAST client), and to those that read near-cache keys of it when its stream does not
 * vouch; the others keep their caches (the stream tells them of writes through keygates). */
void tracking_feed_lost(struct tracking_table *t, int inst, struct tracking_notes *notes);

/* inst's feed is live (again, or for the first time): what happened while it was not is unknown
 * but for what the stream told. A flush to the clients that read keys of it outside near-cache
 * namespaces; every remembered near-cache key of it is invalidated, one push per key and reader
 * (its expiry, eviction or a write without keygate may have gone unseen), then forgotten. */
void tracking_feed_back(struct tracking_table *t, int inst, struct tracking_notes *notes);

/* inst's near-cache stream reader vouches (1: caught up, no gap) or not (0); gap: it found
 * entries it had not read gone. While the feed is down, a gap or a reader that stops vouching
 * flushes the clients that read near-cache keys of inst. */
void tracking_stream_set(struct tracking_table *t, int inst, int vouched, int gap, struct tracking_notes *notes);

/* inst's feed has been down a while (trackfeed.c: every 5 s while it is): a flush to the clients
 * that read keys of it since their last flush, near-cache ones included (the stream does not see
 * expiry, eviction or writes without keygate), and to every BCAST client: what may have changed
 * unseen stays cached for a bounded time. */
void tracking_feed_still_down(struct tracking_table *t, int inst, struct tracking_notes *notes);

/* tracking-table-max-keys and max-memory (0: none), at start and on a reload: keys past either go
 * now, their readers told (cause EVICT), as Redis's CONFIG SET does. mem_total (NULL: keep the
 * one set before): the process's max-memory total, which the table's bytes are counted in from
 * now on. */
void tracking_set_limits(struct tracking_table *t, size_t max_keys, int64_t *mem_total, int64_t mem_limit,
                         struct tracking_notes *notes);

/* Notes' keys freed, the array emptied (kept for reuse). */
void tracking_notes_reset(struct tracking_notes *notes);
void tracking_notes_free(struct tracking_notes *notes);

/* Keys remembered now. */
size_t tracking_keys(struct tracking_table *t);

/* What INFO's tracking section and /metrics show. */
struct tracking_info {
    int clients;    /* clients with tracking on */
    size_t keys;    /* keys remembered */
    int feeds_up;   /* instances whose feed is live */
    int streams_up; /* instances whose near-cache stream reader vouches */
    int64_t memory; /* bytes held for the clients (counted in max-memory) */
    uint64_t sent[TRACKING_CAUSES];
};
void tracking_info(struct tracking_table *t, struct tracking_info *out);

#endif
