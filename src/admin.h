/* admin.h: the admin HTTP endpoint (admin-listen): /metrics, /healthz, /registry. */
#ifndef KEYGATE_ADMIN_H
#define KEYGATE_ADMIN_H

#include <event2/event.h>

#include "util.h"

struct proxy;
struct config;
struct admin;

/*
 * Serve HTTP on host:port from `base`, which must be the main thread's event base
 * (the one that swaps the config on reload: *cfgp is read there, never elsewhere).
 *   GET /metrics   Prometheus text: every STATS_COUNTERS counter summed over the
 *                  workers as keygate_<name>_total, plus gauges (clients, instances,
 *                  registry size, topology guard)
 *   GET /healthz   200 "ok" when every instance has a READY connection and the
 *                  topology guard found nothing, else 503 and one line per problem
 *   GET /registry  the current registry as a Markdown table
 *   anything else  404; methods other than GET and HEAD: 405
 * Worker state is read without locks (relaxed loads): a snapshot, not a transaction.
 * Returns NULL (logged) when the address cannot be bound.
 */
struct admin *admin_start(struct event_base *base, const char *host, int port, struct proxy *p,
                          struct config *const *cfgp) KG_MUST_CHECK;

/* Close the listener and free a (NULL is a no-op). Call before freeing base. */
void admin_stop(struct admin *a);

#endif
