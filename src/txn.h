/* txn.h: a client's MULTI/EXEC transaction: queue its commands, send them whole at EXEC, DISCARD, end its WATCH. */
#ifndef KEYGATE_TXN_H
#define KEYGATE_TXN_H

#include "conn.h"
#include "policy.h"

struct request;

/* MULTI: c's transaction starts empty (session_multi_begin); req is answered +OK. */
void txn_begin(struct client *c, struct request *req);

/* A command inside c's MULTI, decided as `plan` (frame: its bytes): an error plan marks the
 * transaction dirty (EXEC answers EXECABORT) and is req's reply; else the command is written
 * into c->multi_buf for EXEC and req is answered +QUEUED. A transaction past max-request-size
 * closes c (conn_close), as Redis closes a client over its query buffer limit. */
void txn_queue(struct client *c, struct request *req, const struct plan *plan, const char *frame);

/* c's transaction is dropped: its buffers emptied, its session out of MULTI. */
void txn_reset(struct client *c);

/* c's WATCH ends (EXEC, DISCARD, UNWATCH, RESET): its pin goes back once its replies are in, and
 * c stalls until then (the next command may go to another connection: the order is kept). */
void txn_watch_end(struct client *c);

/* The slot of c's transaction on a cluster instance: -1 none (or a single server),
 * PLAN_SLOT_SPANS when its keys and its WATCHed keys are in two slots. */
int txn_slot(const struct client *c);

/* The instance c's EXEC goes to: its keys', else its WATCHed keys', else 0 (keyless commands). */
int txn_instance(const struct client *c);

/* EXEC: sends MULTI + the queued commands + EXEC in one write (on the WATCH pin when c has one),
 * with req waiting for the reply; or answers EXECABORT (a queue-time error), a null array (a
 * WATCH connection lost on an instance whose nodes move), -UNAVAILABLE, -CROSSSLOT or an empty
 * array. c's transaction and WATCH end either way. */
void txn_exec(struct client *c, struct request *req);

/* DISCARD: c's transaction is dropped and its WATCH ends (UNWATCH sent on its pin first, its
 * reply req's to swallow); req is answered +OK. */
void txn_discard(struct client *c, struct request *req);

#endif
