/* tracker.h: CLIENT TRACKING on the request path: the keys a tracking client reads, the keys a write changes, and the invalidation messages handed to the workers that own their receivers. */
#ifndef KEYGATE_TRACKER_H
#define KEYGATE_TRACKER_H

#include <stddef.h>

#include "policy.h"
#include "tracking.h"

struct client;
struct config;
struct request;
struct proxy;
struct worker;

/*
 *   read by a tracking client      write (a forwarded plan with keys)
 *        |                              |
 *   tracking_remember (at send)   req->track, or c->track_multi until EXEC
 *                                       |
 *                                 its reply came: tracking_invalidate (the table's lock)
 *                                       |
 *                          notes -> this worker: delivered now
 *                                -> another worker: its inbox (a mutex, a pipe byte)
 *                                       |
 *                   the receiver's reply queue: the message leaves after the replies queued
 *                   before it (a read's reply before the invalidation that follows it)
 *
 * Keys are remembered when the read is sent, not when its reply comes: a write answered
 * between the two then still invalidates it (a spare invalidation, never a missed one).
 */

/* Every worker's inbox, on its base before the workers run (main thread). */
void tracker_start(struct proxy *p);

/* Free the inboxes (after the workers stopped). */
void tracker_stop(struct proxy *p);

/* c's command, decided as plan, became req (before it is forwarded): a read of a tracking client
 * remembers its keys; a forwarded write keeps its keys on req (in MULTI: on c until EXEC); the
 * CLIENT CACHING flag lasts one command (not counting CLIENT ones, as Redis). */
void tracker_command(struct client *c, struct request *req, const struct plan *plan, const struct command_def *cmd,
                     size_t argc, const char *const *argv, const size_t *argvlen);

/* c's EXEC is req: the keys its queued writes change go with it. */
void tracker_exec(struct client *c, struct request *req);

/* A reply of req's write came (each part's, for a split one): its keys are invalidated. */
void tracker_write_replied(struct request *req);

/* Hand notes to their receivers through their workers' inboxes, from any thread; emptied. */
void tracker_post(struct proxy *p, struct tracking_notes *notes);

/* The near cache's stream source (its reader threads, nearcache.c): a stream entry of instance
 * inst named keys[0..n) (a write through some keygate): they are invalidated as a write is. */
void tracker_stream_keys(struct proxy *p, int inst, const char *const *keys, const size_t *lens, size_t n);

/* inst's stream reader vouches for all its namespaces (1) or not (0); gap: entries it had not
 * read were lost (tracking_stream_set). */
void tracker_stream_state(struct proxy *p, int inst, int vouched, int gap);

/* A reload's config (main thread): tracking-table-max-keys and max-memory applied now, the keys
 * past them invalidated (tracking_set_limits). */
void tracker_update(struct proxy *p, const struct config *cfg);

/* Hand notes to their receivers (this worker's now, others' through their inboxes); emptied. */
void tracker_send(struct worker *w, struct tracking_notes *notes);

#endif
