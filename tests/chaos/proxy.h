/* proxy.h: the chaos run's slow link: a TCP proxy thread that forwards bytes unchanged (TLS passes through) between one keygate and a redis-server, each chunk held for a delay switchable at run time. */
#ifndef KEYGATE_CHAOS_PROXY_H
#define KEYGATE_CHAOS_PROXY_H

#include <stddef.h>

/*
 * One thread, one poll loop. Every connection accepted on 127.0.0.1:listen_port gets its own
 * connection to 127.0.0.1:upstream_port; the bytes read on either side are queued with a
 * release time (the time read + the delay in force then) and written, in order, once it has
 * come. A delay lowered meanwhile does not reorder anything: a chunk waits behind the ones read
 * before it. An EOF is passed on (shutdown) after what was queued before it; a reset or error on
 * either side closes both. So with delay 0 it is a plain byte forwarder.
 */

struct proxy;

/* Start the proxy thread listening on 127.0.0.1:listen_port. NULL (with why in err) when the
 * port cannot be bound or the thread cannot start. */
struct proxy *proxy_start(int listen_port, int upstream_port, char *err, size_t errlen);

/* Hold every chunk read from now on ms milliseconds (0: none) in both directions. Thread-safe. */
void proxy_set_delay(struct proxy *p, int ms);

/* Bytes read and not yet written (in either direction, on every connection). Thread-safe. */
long long proxy_pending(struct proxy *p);

/* Connections accepted so far. Thread-safe. */
long long proxy_accepted(struct proxy *p);

/* Stop the thread, close every connection and the listener, free p. NULL is a no-op. */
void proxy_stop(struct proxy *p);

#endif
