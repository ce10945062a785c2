/* replywin.h: a client's reply window: how many reply bytes it may have Redis build for it before it reads them (flow control toward the backends, as TCP's slow start). */
#ifndef KEYGATE_REPLYWIN_H
#define KEYGATE_REPLYWIN_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

/*
 * What keygate forwards, Redis answers, and Redis holds a reply it built until keygate has
 * read it: a client that pipelines large reads and never reads its replies would make
 * Redis build them all. The window bounds that per client. Each request is charged, when
 * it is queued, the client's estimate of a reply (`est`, learned from its replies: it
 * jumps to a larger reply at once and falls back by an eighth of the gap at each smaller
 * one); a client may have a new request taken while its charges still owed (`inflight`)
 * and the reply bytes keygate holds for it (queued on its output, or kept behind an
 * earlier request) stay under `window` (so one request is taken whenever nothing is owed or
 * held, however large its reply may be). The window starts at REPLYWIN_START (or the cap, if
 * lower) and grows by every byte the client takes off keygate (written to its socket), up to
 * a cap (client-output-limit): a client that reads grows it as fast as it reads, one that
 * never reads keeps what its socket took.
 */
struct replywin {
    uint64_t window;   /* bytes it may have owed or held */
    uint64_t est;      /* the charge of its next request */
    uint64_t inflight; /* charges of its queued requests whose reply has not come */
    uint64_t taken;    /* its reply bytes written to its socket, as last seen by replywin_taken */
};

#define REPLYWIN_START (256u * 1024u)            /* the first window */
#define REPLYWIN_EST_START (REPLYWIN_START / 4u) /* the charge before any reply was seen: 4 requests at first */
#define REPLYWIN_EST_MIN 16u                     /* the smallest charge (a reply is at least "+OK\r\n") */

/* A new client's window, for a cap (client-output-limit) of `cap` bytes. */
void replywin_init(struct replywin *w, uint64_t cap);

/* A request is queued: its charge (what replywin_reply gives back), added to `inflight`.
 * (This and the next two run for every request: inline.) */
static inline uint64_t replywin_charge(struct replywin *w)
{
    w->inflight += w->est;
    return w->est;
}

/* The reply of a request charged `charge` came, `len` bytes: the charge is given back and
 * the estimate learns the size. */
static inline void replywin_reply(struct replywin *w, uint64_t charge, size_t len)
{
    assert(charge <= w->inflight); /* every charge was added by replywin_charge */
    w->inflight -= charge;
    if (len >= w->est)
        w->est = len; /* a larger reply: the next ones may be as large */
    else
        w->est -= (w->est - len) / 8; /* a smaller one: back down slowly */
    if (w->est < REPLYWIN_EST_MIN) w->est = REPLYWIN_EST_MIN;
}

/* The client has taken `taken_total` reply bytes off keygate so far (a running total that
 * never decreases): the window grows by what is new, up to `cap`. */
void replywin_taken(struct replywin *w, uint64_t taken_total, uint64_t cap);

/* May a client with `held` reply bytes held by keygate (not yet read by it) have one more
 * request taken? Always when nothing is owed or held (so a reply larger than the window still
 * comes), never while what it has not read fills the window, queued requests or not: a
 * client that does not read takes nothing more. (The window only grows: a client may call
 * replywin_taken only when this says no, and get the same answers.) */
static inline int replywin_open(const struct replywin *w, size_t held)
{
    return w->inflight + held < w->window;
}

#endif
