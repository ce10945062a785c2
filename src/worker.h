/* worker.h: one event loop per thread: listeners (SO_REUSEPORT), clients, backend pools, control. */
#ifndef KEYGATE_WORKER_H
#define KEYGATE_WORKER_H

#include "loop.h"

/* Create worker w's event base, listeners and backend pools. 0 on success. */
int worker_init(struct worker *w, struct proxy *p, int id, const struct config *cfg) KG_MUST_CHECK;

/* Run w's event loop until it is stopped (thread entry point). */
void *worker_run(void *arg);

/* From any thread: ask w to swap in cfg (reload) or to stop (cfg == NULL). */
void worker_post(struct worker *w, const struct config *cfg, int stop);

/* Free what worker_init made (after worker_run returned, or after a failed init). */
void worker_free(struct worker *w);

#endif
