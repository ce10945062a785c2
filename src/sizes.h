/* sizes.h: the buffer sizes shared by several modules, one name per meaning. */
#ifndef KEYGATE_SIZES_H
#define KEYGATE_SIZES_H

/*
 * Several sizes happen to be 64 KiB; each is its own knob with its own name:
 *   CLIENT_SCRATCH_BYTES   here    one read() from a plain client
 *   CLIENT_BUF_KEEP_BYTES  here    a client's reply / MULTI buffer kept once empty
 *   REQUEST_FRAMING_SLACK  here    header room over max-request-size for one request
 *   HOLD_MAX_BYTES         backend.c  staged bytes that write despite a batch in flight
 *   MEM_PUBLISH_BYTES      loop.h     a worker's max-memory change before it is published
 *   RESP_MAX_INLINE        resp.h     Redis's PROTO_INLINE_MAX_SIZE (an inline request line)
 * and two are 16 KiB: READ_CHUNK_BYTES (here) and RESP_UNAUTH_MAX_BULK (resp.h, Redis's
 * limit on a bulk before AUTH).
 */

/* Free room asked of a buffer before each read from a socket: the payload of one TLS
 * record at most (16 KiB), so one SSL_read fills it from one record. Backend replies,
 * a client's unfinished frame, keygate audit's replies. */
#define READ_CHUNK_BYTES 16384

/* The worker's scratch buffer: plain clients are read into it one read() at a time,
 * so a client keeps bytes of its own only for an unfinished frame. */
#define CLIENT_SCRATCH_BYTES 65536

/* A client's reply buffer (plain clients) or MULTI buffer past this capacity is freed
 * once empty: a big reply or transaction came and went; smaller ones are kept. */
#define CLIENT_BUF_KEEP_BYTES 65536

/* An unfinished request may hold max-request-size plus this before it is refused as too
 * large: room for its "*N" and "$len" lines around bulks of up to max-request-size. */
#define REQUEST_FRAMING_SLACK 65536

/* One error reply line, "-" + "CODE message" + CRLF: room for policy's longest text
 * (PLAN_ERROR_MAX, 512) and its framing; a longer text is cut (replies_error). */
#define ERROR_REPLY_MAX 520

#endif
