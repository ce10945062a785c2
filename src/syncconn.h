/* syncconn.h: a small blocking Redis client over TLS or TCP for one-shot tools (`keygate audit`) and background threads. */
#ifndef KEYGATE_SYNCCONN_H
#define KEYGATE_SYNCCONN_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#include "config.h"
#include "sentinel.h"
#include "slotmap.h"
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

/* syncconn_open_stoppable to host:port (a cluster node) instead of the instance's address, with
 * the instance's options: TLS (the certificate must carry server-name=, or host when there is
 * none), client certificate, AUTH. */
struct syncconn *syncconn_open_node(const struct instance_conf *ic, const char *host, int port, int timeout_ms,
                                    struct syncconn_stop *st, char *err, size_t errlen) KG_MUST_CHECK;

/*
 * A connection to sentinel i (ic->seed_host[i]) of a sentinel instance, with the sentinels'
 * options: TLS when ic->sentinel_tls (the line's ca=, cert=/key= and server-name=), AUTH with
 * sentinel-password-file's password when there is one. As syncconn_open_node otherwise, but
 * every read and write (the handshake and AUTH included) is bounded by io_ms.
 */
struct syncconn *syncconn_open_sentinel(const struct instance_conf *ic, int i, int timeout_ms, int io_ms,
                                        struct syncconn_stop *st, char *err, size_t errlen) KG_MUST_CHECK;

/*
 * The primary of a sentinel instance: every sentinel is asked at once (SENTINEL MASTER
 * ic->master_name, a thread each), and the answer followed is sentinel_pick's: the highest
 * config-epoch, the address most sentinels of that epoch name; never an epoch below *epoch (the
 * one followed last) unless most of the configured sentinels say it (epoch NULL: no such rule). Its node must answer ROLE as a primary (the data nodes' options).
 * Every read and write, with the sentinels and the node, is bounded by timeout_ms (a frozen
 * node or sentinel does not hold the caller for SYNCCONN_IO_TIMEOUT_MS). An address equal to
 * not_this (may be NULL: a primary the caller knows is down) is not taken. 0 with *out and
 * *epoch filled (*asked: the index of a sentinel that named it, *chosen: its whole answer; both
 * may be NULL); -1 when no
 * sentinel named a primary (unreachable, no such master); -2 when one did but none may be
 * followed (behind the epoch followed) or ROLE did not confirm it (not a primary, unreachable,
 * or not_this); err says why.
 */
int syncconn_sentinel_primary(const struct instance_conf *ic, int timeout_ms, struct syncconn_stop *st,
                              const struct slotmap_node *not_this, long long *epoch, struct slotmap_node *out,
                              int *asked, struct sentinel_master *chosen, char *err, size_t errlen) KG_MUST_CHECK;

/*
 * The replicas of a sentinel instance as the first sentinel that answers SENTINEL REPLICAS
 * ic->master_name lists them (down or not), into out[0..max). Returns how many (at most max),
 * or -1 with err (no sentinel answered). Bounded by timeout_ms as syncconn_sentinel_primary.
 */
int syncconn_sentinel_replicas(const struct instance_conf *ic, int timeout_ms, struct syncconn_stop *st,
                               struct slotmap_node *out, int max, char *err, size_t errlen) KG_MUST_CHECK;

/*
 * The servers a background reader walks for an instance, into out[0..max): a single-server
 * instance is its own address (returns 1, no I/O); a sentinel instance its primary as the
 * sentinels name it and ROLE confirms (syncconn_sentinel_primary); for a cluster, the seeds are asked in turn
 * (syncconn_open_node, CLUSTER SLOTS) until one answers, and its primaries, the nodes owning at
 * least one slot, are listed in the order the reply names them (syncconn_primaries_from_slots).
 * Returns how many, or -1 with err saying why (no seed reachable or answering: the last seed's
 * reason). st as syncconn_open_stoppable.
 */
int syncconn_primaries(const struct instance_conf *ic, int timeout_ms, struct syncconn_stop *st,
                       struct slotmap_node *out, int max, char *err, size_t errlen) KG_MUST_CHECK;

/*
 * Pure: the primaries (nodes owning >= 1 slot) of a parsed CLUSTER SLOTS reply r (slotmap_parse_slots
 * on its RESP2 bytes, syncconn_reply_encode), asked of asked_host (a node whose endpoint Redis does
 * not know is that address), in the order the reply names them, into out[0..max). Returns how
 * many (at most max), or -1 with err (an error reply, a malformed one, no slot served).
 */
int syncconn_primaries_from_slots(const redisReply *r, const char *asked_host, struct slotmap_node *out, int max,
                                  char *err, size_t errlen) KG_MUST_CHECK;

/* Pure: append r as RESP2 bytes (what the server sent, for the parsers that read bytes: slotmap). */
void syncconn_reply_encode(const redisReply *r, struct bytebuf *out);

/* Queue one command (formatted with redisFormatCommandArgv); sent by the next flush. */
int syncconn_append(struct syncconn *c, int argc, const char **argv, const size_t *argvlen) KG_MUST_CHECK;

/* Write every queued command. 0, or -1 (see syncconn_error). */
int syncconn_flush(struct syncconn *c) KG_MUST_CHECK;

/* Block for the next reply (parsed by hiredis's redisReader); the caller frees it with
 * freeReplyObject. NULL on a connection or protocol error (see syncconn_error). */
redisReply *syncconn_read(struct syncconn *c) KG_MUST_CHECK;

/* Wait up to timeout_ms for a reply to read: 1 when syncconn_read has bytes to start on (parsed
 * or buffered already, or the socket is readable), 0 when none came, -1 on a poll error. For a
 * connection that receives pushes with nothing asked (CLIENT TRACKING's). */
int syncconn_wait(struct syncconn *c, int timeout_ms) KG_MUST_CHECK;

/* The next whole reply as the bytes that came (framed by resp_scan_reply: RESP3 too, pushes
 * included; hiredis's reader here speaks RESP2 only): 1 with *frame (valid until the next call)
 * and *len, or -1 (see syncconn_error). Not to be mixed with syncconn_read on one connection. */
int syncconn_read_raw(struct syncconn *c, const char **frame, size_t *len) KG_MUST_CHECK;

/* The connection's socket, for a caller polling several (syncconn_wait(c, 0) first: bytes may
 * be buffered already). */
int syncconn_fd(const struct syncconn *c);

/* append + flush + read. */
redisReply *syncconn_command(struct syncconn *c, int argc, const char **argv, const size_t *argvlen) KG_MUST_CHECK;

/* Why the last call failed. */
const char *syncconn_error(const struct syncconn *c);

void syncconn_close(struct syncconn *c);

#endif
