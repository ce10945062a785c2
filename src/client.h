/* client.h: client connections: accept, parse, decide, dispatch; service woken clients; tear down closed ones. */
#ifndef KEYGATE_CLIENT_H
#define KEYGATE_CLIENT_H

#include <sys/socket.h>

#include <event2/event.h>
#include <openssl/ssl.h>

#include "clientio.h"
#include "conn.h"

/* Accept a new client socket on worker w (takes ownership of fd). */
void client_accept(struct worker *w, int fd, const struct sockaddr *sa, int salen, SSL_CTX *tls);

/* Service the clients woken since the last flush step (conn_wake): close the ones that are
 * closing and done, resume parsing where a stall ended, re-evaluate backpressure. The socket
 * side does it (clientio.h); inline, so that the worker's flush step costs no extra call. */
static inline void client_service_woken(struct worker *w)
{
    clientio_service_woken(w);
}

/* Write the queued replies of every plain client of w (the flush step, after the backends):
 * clientio.h's, inline as client_service_woken. */
static inline void client_write_all(struct worker *w)
{
    clientio_write_all(w);
}

/* After a backend flush: the postponed clients of w parse their frames again, in order. */
void client_wake_postponed(struct worker *w);

/* Tear down the clients closed since the last reap (conn_close): orphan their requests,
 * close the dedicated connections that hold their state, free them. Runs from the reap
 * event, outside every callback of theirs. */
void client_reap(struct worker *w);

/* max-memory timer of w: resumes the clients paused for memory once under it; when it
 * stays over, closes the client whose unfinished requests hold the most bytes. */
void client_memory_tick(evutil_socket_t fd, short what, void *arg);

#endif
