/* syncconn.h: a small blocking Redis client over TLS or TCP for one-shot tools (`keygate audit`) and background threads. */
#ifndef KEYGATE_SYNCCONN_H
#define KEYGATE_SYNCCONN_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#include "config.h"
#include "util.h"

struct syncconn;

#define SYNCCONN_IO_TIMEOUT_MS 10000

/*
 * Connect to an instance as the daemon does: TCP (getaddrinfo on host), then for
 * `tls` instances a TLS 1.2+ handshake verifying the certificate against ca= and
 * its name against server-name= (or the host), with the client certificate when
 * cert=/key= are given; then AUTH [user] password when the instance has one.
 * The connect is bounded by timeout_ms, each later read and write by the longer of
 * timeout_ms and SYNCCONN_IO_TIMEOUT_MS.
 * Returns the connection, or NULL with the reason in err[0..errlen).
 */
struct syncconn *syncconn_open(const struct instance_conf *ic, int timeout_ms, char *err, size_t errlen) KG_MUST_CHECK;

/*
 * A stop for other threads' connections: syncconn_stop_trip (from any thread) shuts down
 * (shutdown(2)) the socket of every connection opened with the stop, so a read, a write or
 * a TLS handshake blocked on it returns at once with an error, and makes every later open
 * with it fail. A daemon's background thread opens its connections with one, and its
 * stopper trips it before joining the thread. syncconn_stop_free once no connection opened
 * with it is left.
 */
struct syncconn_stop;
struct syncconn_stop *syncconn_stop_new(void);
void syncconn_stop_trip(struct syncconn_stop *st);
void syncconn_stop_free(struct syncconn_stop *st);

/* syncconn_open with a stop (NULL: none). Fails, saying so, once st was tripped. */
struct syncconn *syncconn_open_stoppable(const struct instance_conf *ic, int timeout_ms, struct syncconn_stop *st,
                                         char *err, size_t errlen) KG_MUST_CHECK;

/* Queue one command (formatted with redisFormatCommandArgv); sent by the next flush. */
int syncconn_append(struct syncconn *c, int argc, const char **argv, const size_t *argvlen) KG_MUST_CHECK;

/* Write every queued command. 0, or -1 (see syncconn_error). */
int syncconn_flush(struct syncconn *c) KG_MUST_CHECK;

/* Block for the next reply (parsed by hiredis's redisReader); the caller frees it with
 * freeReplyObject. NULL on a connection or protocol error (see syncconn_error). */
redisReply *syncconn_read(struct syncconn *c) KG_MUST_CHECK;

/* append + flush + read. */
redisReply *syncconn_command(struct syncconn *c, int argc, const char **argv, const size_t *argvlen) KG_MUST_CHECK;

/* Why the last call failed. */
const char *syncconn_error(const struct syncconn *c);

void syncconn_close(struct syncconn *c);

#endif
