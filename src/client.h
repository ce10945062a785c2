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

/* What client_timed_out reads of one client (client.c's tick fills it from the client). */
struct client_timeout_facts {
    int64_t created_ms;       /* wall clock when it connected */
    int64_t last_active_ms;   /* wall clock of its last bytes read */
    int64_t partial_since_ms; /* since when an unfinished request waits for more bytes; 0: none */
    size_t qlen;              /* the bytes of that request so far */
    int nqueued;              /* its requests waiting for their replies */
    enum session_mode mode;   /* its session's */
    int resp3_subscribed;     /* a RESP3 client with subscriptions (its mode stays NORMAL) */
    int tls_handshaking;      /* its TLS handshake has not finished */
    int authenticated;        /* its session's */
};

/*
 * Why the client of `f` should be closed for a timeout at `now` (wall ms), or NULL; *since is
 * when the reason's clock started (for the log line). Pure. In the order looked at:
 *   client-timeout        idle that long, unless it waits for a reply, blocks, or is
 *                         subscribed (as Redis's `timeout` spares blocked and pub/sub clients);
 *   client-header-timeout a TLS handshake unfinished that long after connecting, or
 *                         not authenticated that long after connecting (users configured),
 *                         or an unfinished request pending that long that came slower than
 *                         READ_CHUNK_BYTES a second on average (a slowloris; a large upload
 *                         that moves goes on).
 * A timeout of 0 is off.
 */
const char *client_timed_out(const struct client_timeout_facts *f, const struct config *cfg, int64_t now,
                             int64_t *since);

/* max-memory timer of w: resumes the clients paused for memory once under it; when it
 * stays over, closes the client whose unfinished requests hold the most bytes. */
void client_memory_tick(evutil_socket_t fd, short what, void *arg);

#endif
