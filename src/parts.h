/* parts.h: a split request's parts: each kept as its instance or node answers, merged into the request's reply when the last came. */
#ifndef KEYGATE_PARTS_H
#define KEYGATE_PARTS_H

#include <stddef.h>

#include "loop.h"
#include "request.h"

/* One instance's reply (or failure) for part `part` of split request req, kept (counted against the
 * client's limits as it comes); the last part due merges them (plan_merge) and answers req. */
void parts_answer(struct request *req, int part, const char *reply, size_t len);

/* One more part of req was kept (request_part_keep, or a held replicas=N part answered): the merge
 * answers once it was the last part due. */
void parts_kept(struct request *req);

/* Part k of req has no connection (its instance is down): it fails at once with -UNAVAILABLE, and
 * the merge answers when it was the last part due. */
void parts_unavailable(struct worker *w, struct request *req, int k);

#endif
