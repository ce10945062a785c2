/* clientio.h: a client's socket: read (plain and TLS), write, pause and resume reading (backpressure). */
#ifndef KEYGATE_CLIENTIO_H
#define KEYGATE_CLIENTIO_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "conn.h"
#include "replywin.h"

/*
 * The one way up: parse and handle the whole frames of buf[0..len) for c and return the bytes
 * consumed (the rest is kept for the next read). It may close c (c->closed) or mark it closing.
 */
typedef size_t clientio_parse_fn(struct client *c, const char *buf, size_t len);

/* Watch c's socket (c->fd): a TLS server session over it when tls is not NULL (the handshake
 * runs in libevent's OpenSSL bufferevent), else plain read() and write(). The bytes read go to
 * parse. 0 when watched; -1 when it cannot be (c is closed: conn_close, its fd closes at the reap). */
int clientio_open(struct client *c, SSL_CTX *tls, clientio_parse_fn *parse) KG_MUST_CHECK;

/* Free c's socket side at its teardown: its events, its TLS session, its fd, its buffers. */
void clientio_close(struct client *c);

/* Write the queued replies of every plain client of w (the flush step, after the backends);
 * EV_WRITE is watched only for a client whose socket is full. */
void clientio_write_all(struct worker *w);

/* Service the clients of w woken since the last flush step (conn_wake): close the ones that
 * are closing and done, resume parsing where a stall ended, re-evaluate backpressure. */
void clientio_service_woken(struct worker *w);

/* Backpressure: stop reading c while too much is queued or held for it (max-pending, its
 * output limit and reply window, max-memory, a stall, a postponement, a held frame), watching
 * its socket for a close meanwhile; resume reading (and parsing what waits) when it is under. */
void clientio_update_reading(struct client *c);

/* Frames wait in c's buffer (backpressure, a stall, a postponement): they are parsed again from
 * a deferred callback, never from inside the parse loop that may be running now. */
void clientio_resume_parsing(struct client *c);

/* Waiting for its earlier replies (or subscription confirmations) before a switch of
 * connection: nothing more is parsed or read from c until they are in. */
static inline int clientio_stalled(const struct client *c)
{
    return c->stall && (c->nqueued > 0 || c->pubsub.markers_total > 0);
}

/* May c have one more request taken, by its reply window (replywin.h)? When not at once,
 * the window first grows by what c took off its output since it was last looked at. */
static inline int clientio_window_open(struct client *c)
{
    size_t pending = conn_out_pending(c);
    if (replywin_open(&c->win, pending + c->replies_held)) return 1;
    replywin_taken(&c->win, c->out_total - pending, (uint64_t)c->worker->cfg->client_output_limit);
    return replywin_open(&c->win, pending + c->replies_held);
}

#endif
