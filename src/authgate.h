/* authgate.h: AUTH throttling on client connections: an AUTH waits its source address's turn, a failed one's reply waits its delay, a connection goes after a few failures. */
#ifndef KEYGATE_AUTHGATE_H
#define KEYGATE_AUTHGATE_H

#include <stddef.h>

#include "conn.h"
#include "policy.h"
#include "request.h"

/*
 * One table for the process (authfail.h: 1024 addresses, one failure forgotten per 30 s),
 * shared by every worker behind a mutex taken only for AUTH attempts, so an address's
 * attempts take turns across all its connections on all threads:
 *
 *   AUTH frame parsed --authgate_wait--> not its turn: c held, frame left in qbuf,
 *        |                               a timer on c's worker wakes it to try again
 *        v
 *   checked (local.c) --right--> authgate_passed (the turn is given back)
 *        |
 *      wrong --authgate_failed--> reply held for the delay (c parses nothing meanwhile),
 *                                 then sent; the AUTHFAIL_CLOSE_AFTER-th closes c after it
 *
 * Nothing blocks a worker: a held client is only a timer and a paused socket.
 */
struct authgate;

/* The process's table; freed with authgate_free after the workers stopped. */
struct authgate *authgate_new(void);
void authgate_free(struct authgate *g);

/* 1 when the request is an AUTH attempt: AUTH, or HELLO with an AUTH option (read as
 * local_hello reads HELLO's options). */
int authgate_is_attempt(const struct plan *plan, size_t argc, const char *const *argv, const size_t *argvlen);

/*
 * Before an AUTH attempt of c is checked (users configured): 0 when it may be checked now;
 * 1 when its address's turn has not come: c is held (c->auth_held: nothing more of it is
 * parsed or read) until a timer wakes it, and the caller leaves the frame to be parsed again.
 */
int authgate_wait(struct client *c);

/* c's AUTH attempt was right. */
void authgate_passed(struct client *c);

/*
 * c's AUTH attempt req was wrong; `text` (static storage, never holding the password) is its
 * error. Counted (auth_failures), logged once per episode of the address (auth_throttle:
 * address and count), and req's reply held for the address's delay (c->auth_held meanwhile);
 * after the AUTHFAIL_CLOSE_AFTER-th failure on c, c is closed once that reply is written.
 */
void authgate_failed(struct client *c, struct request *req, const char *text);

/* c is torn down: its timer goes (a held request is on c's queue, released with it). */
void authgate_client_free(struct client *c);

#endif
