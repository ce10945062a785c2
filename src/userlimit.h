/* userlimit.h: per-user limits shared by every worker thread: connections at once (max-clients=) and requests a second (rate=), with their counters. */
#ifndef KEYGATE_USERLIMIT_H
#define KEYGATE_USERLIMIT_H

#include <pthread.h>
#include <stdint.h>

#include "util.h"

/*
 * rate=N is a token bucket shared by the user's connections on every worker, kept as GCRA
 * (one "theoretical arrival time" per user, moved with compare-and-swap: no lock on the
 * request path). It holds up to userlimit_burst(N) = max(1, N/10) tokens (100 ms of the
 * rate), full at start. A request takes a token when keygate parses it, before it is
 * decided (pipelined frames each take one); with none left the frame stays unparsed in the
 * client's buffer and keygate reads nothing more from that connection until the bucket has
 * userlimit_want(N) = max(1, N/100) tokens again (10 ms of the rate: about 100 wake-ups a
 * second a connection at most). No error is ever answered for the rate.
 *
 * A throttling episode starts with the first request held and ends when none was held for
 * USERLIMIT_EPISODE_GAP_MS (userlimit_tick): one log line at each end, its time summed into
 * the user's throttled seconds.
 */
#define USERLIMIT_EPISODE_GAP_MS 1000

/* ---- the pure decision (unit-tested) ---- */

/* Tokens the bucket of `rate` holds when full. */
int userlimit_burst(int rate);

/* Tokens a held connection waits for before it is read again. */
int userlimit_want(int rate);

/*
 * One request at `now` (ns, monotonic) against a bucket of `rate` (> 0) whose state is `tat`
 * (the theoretical arrival time in ns; 0: a new, full bucket). Allowed: returns 0 and sets
 * *next to the new state. Refused: returns the ns to wait until userlimit_want(rate) requests
 * would pass, and sets *next = tat (unchanged).
 */
uint64_t userlimit_decide(uint64_t tat, uint64_t now, int rate, uint64_t *next);

/* ---- the shared state, one per user name, kept for the process's life (reloads keep it) ---- */

struct userlimit {
    char *name;
    uint64_t tat;          /* atomic: the rate's bucket (userlimit_decide) */
    int clients;           /* atomic: connections authenticated as the user now */
    uint64_t requests;     /* atomic: requests parsed for it */
    uint64_t held;         /* atomic: times one of its connections was held for the rate */
    uint64_t refused;      /* atomic: AUTHs refused for max-clients */
    pthread_mutex_t lock;  /* the episodes below (taken only when a request is held, and by the tick) */
    uint64_t episodes;     /* throttling episodes started */
    uint64_t throttled_ns; /* the time of the episodes ended */
    uint64_t since_ns;     /* the current episode's start (0: none) */
    uint64_t until_ns;     /* the current episode's last hold ends then */
    uint64_t episode_held; /* holds in the current episode */
    int full;              /* in an episode of max-clients refusals (logged once) */
    struct userlimit *next;
};

struct userlimit_table {
    pthread_mutex_t lock; /* the list (AUTH, metrics, the tick) */
    struct userlimit *head;
};

void userlimit_init(struct userlimit_table *t);

/* Free every entry (at exit, after the workers stopped). */
void userlimit_free(struct userlimit_table *t);

/* The entry of user `name`, made on first use; valid until userlimit_free. */
struct userlimit *userlimit_get(struct userlimit_table *t, const char *name);

/*
 * A connection authenticates as u, whose line says max-clients=max (0: no limit): 0 when it
 * is counted; -1 when u has max already (counted as refused; the first refusal of an episode
 * is logged, the episode ending with the next connection let in).
 */
int userlimit_login(struct userlimit *u, int max) KG_MUST_CHECK;

/* A connection counted by userlimit_login closed, logged out or became another user. */
void userlimit_logout(struct userlimit *u);

/*
 * A request of u at `now` (ns, monotonic) under rate=rate (0: no limit, only counted): 0 when
 * it may go, else the ns to hold its connection (the first hold of an episode is logged).
 */
uint64_t userlimit_take(struct userlimit *u, int rate, uint64_t now);

/* n more requests of u with no rate= (counted only): a connection adds its count once per
 * batch of frames, not one shared atomic per request. */
void userlimit_count(struct userlimit *u, uint64_t n);

/* End (and log) the episodes with no hold for USERLIMIT_EPISODE_GAP_MS. Any thread. */
void userlimit_tick(struct userlimit_table *t, uint64_t now);

/* What the metrics show of a user. */
struct userlimit_view {
    int clients;
    uint64_t requests, held, refused, episodes;
    uint64_t throttled_ns; /* ended episodes plus the current one so far */
    int throttled;         /* in an episode now */
};

/* u's counters at `now` (zeros for NULL). */
void userlimit_read(struct userlimit *u, uint64_t now, struct userlimit_view *v);

/* The entry of `name` if one was made, else NULL. */
struct userlimit *userlimit_find(struct userlimit_table *t, const char *name);

#endif
