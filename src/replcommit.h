/* replcommit.h: replicas=N's group commit: writes held until one WAIT per group says enough replicas have them. */
#ifndef KEYGATE_REPLCOMMIT_H
#define KEYGATE_REPLCOMMIT_H

#include <stddef.h>

#include "backend.h"
#include "loop.h"
#include "request.h"

/*
 * WAIT waits for the replication offset of the connection it runs on, and it runs on a
 * dedicated connection, not the one that carried the client's write: a PUBLISH first (Redis
 * replicates every PUBLISH, to a channel nobody subscribes to) moves that offset to the
 * primary's current one, past the client's earlier write. Its reply is swallowed. The router
 * writes it too, ahead of a command whose plan asks for it (plan->wait_sync).
 */
#define REPLCOMMIT_SYNC "*3\r\n$7\r\nPUBLISH\r\n$14\r\nkeygate:wait:0\r\n$0\r\n\r\n"

/* The kinds of this module's own backend entries (struct pending with req NULL): the PUBLISH, swallowed,
 * and the WAIT, which answers its group. The values are router.c's ROUTE_REPL_SYNC and ROUTE_REPL_WAIT
 * (it asserts so): one numbering for every entry the router reads. */
enum replcommit_kind {
    REPLCOMMIT_KIND_SYNC = 11,
    REPLCOMMIT_KIND_WAIT = 12,
};

/*
 * The reply of req (part -1), or of its part `part`, a write that `replicas` replicas must have,
 * came from b: held (returns 1; a part answered later goes to parts_kept, whose merge answers the request once its last
 * part came), or 0 when it is answered
 * as usual (an error: nothing to replicate; an orphaned request: nobody waits for it). The first
 * write held for an instance with no WAIT out starts one.
 */
int replcommit_hold(struct backend *b, struct request *req, int part, int replicas, const char *reply, size_t len);

/* A reply (reply NULL: its connection was lost) to one of this module's own entries (pd->req NULL,
 * pd->kind a REPLCOMMIT_KIND_*): a WAIT's answers its group (each write its kept reply, or
 * -NOREPLICAS), and the writes held since get their own WAIT. */
void replcommit_reply(struct backend *b, const struct pending *pd, const char *reply, size_t len);

/* Worker w stops: writes held for a WAIT not sent yet get -NOREPLICAS (they ran), and no WAIT
 * starts from here on; those of a WAIT out are answered when its connection fails. */
void replcommit_stop(struct worker *w);

/* Free w's groups (after nodes_free: nothing is held any more). */
void replcommit_free(struct worker *w);

#endif
