/* fanout.h: the commands keygate sends to several instances or nodes at once: split MGET/DEL/..., DBSIZE, KEYS, SCRIPT LOAD, INFO, a cluster's SCAN. */
#ifndef KEYGATE_FANOUT_H
#define KEYGATE_FANOUT_H

#include <stddef.h>

#include "conn.h"
#include "policy.h"
#include "request.h"
#include "router.h"

/* A split plan (MGET/DEL/... across instances and a cluster's slots; DBSIZE, KEYS, SCRIPT LOAD/EXISTS to
 * every instance or primary; a cluster's SCAN to the primary its cursor names): one part per instance
 * (or node), merged by parts.c when all came. Takes plan->key_part. */
void fanout_split(struct client *c, struct request *req, struct plan *plan, const char *frame);

/* INFO naming instance sections: argv (the client's INFO) to every instance (every primary of a
 * cluster); req's reply is `local` (keygate's own sections, copied) followed by each instance's
 * keyspace, memory and replication sections, labelled (fanmerge_info). */
void fanout_info(struct client *c, struct request *req, size_t argc, const char *const *argv, const size_t *argvlen,
                 const char *local, size_t local_len);

#endif
