/* replies.h: the pure byte work on backend replies: EXEC pick and filter, split-reply merge, error lines. */
#ifndef KEYGATE_REPLIES_H
#define KEYGATE_REPLIES_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

/*
 * keygate's own MULTI <command> <fixes> EXEC around one client command: the client's reply
 * is element 0 of the EXEC array. When EXEC was refused (an error reply) and the command had
 * a queue-time error, that error is the reply. Otherwise (nil from a WATCH, any malformed
 * array) the reply is passed on as it came. Sets *out / *out_len to a slice of `reply` or
 * of `queued_error` (NULL when none); no copy.
 */
void replies_exec_pick(const char *reply, size_t len, const char *queued_error, size_t queued_error_len,
                       const char **out, size_t *out_len);

/*
 * The client's own transaction: its EXEC array holds one element per command keygate sent
 * inside it, keep[i] = REPLIES_KEEP_CLIENT for the client's own (else injected: a TTL command or
 * a near-cache XADD). Appends to
 * `out` the array of the kept elements and returns 0; returns -1 (nothing appended) when the
 * reply is not an array of nkeep elements (nil after a WATCH, EXECABORT): pass it on as it came.
 */
int replies_exec_filter(const char *reply, size_t len, const uint8_t *keep, size_t nkeep, struct bytebuf *out);

/* keep[i]'s values in the client's own transaction: an element for the client, an injected TTL
 * command's, an injected near-cache XADD's. */
enum { REPLIES_KEEP_INJECTED = 0, REPLIES_KEEP_CLIENT = 1, REPLIES_KEEP_XADD = 2 };

/*
 * A near-cache write's EXEC array: 1 when one of its XADD elements is an error (its first line,
 * CR LF excluded, in *err, *err_len; no copy). The XADDs are the elements marked
 * REPLIES_KEEP_XADD in keep[0..nkeep), or with keep NULL the last `tail` elements (keygate's
 * own MULTI around one command). 0 otherwise, also when the reply is not an array.
 */
int replies_exec_xadd_failed(const char *reply, size_t len, const uint8_t *keep, size_t nkeep, size_t tail,
                             const char **err, size_t *err_len);

/* How a split command's per-instance replies are put together (enum plan_merge's values). */
enum replies_merge_kind {
    REPLIES_MERGE_VALUES = 1,
    REPLIES_MERGE_SUM = 2,
    REPLIES_MERGE_CONCAT = 4,
    REPLIES_MERGE_SAME = 6, /* every part the same reply: that reply (SCRIPT LOAD on every primary) */
    REPLIES_MERGE_AND = 7,  /* arrays of 0/1 integers: 1 where every part has 1 (SCRIPT EXISTS) */
};

/* The most parts a split command has (policy.h's PLAN_MAX_PARTS). */
#define REPLIES_MAX_PARTS 1024

/* One part's reply to a split command, and the id key_part names it by. */
struct replies_part {
    int instance;
    const char *reply;
    size_t len;
};

/*
 * Merge the replies of a command split across instances (MGET, DEL, UNLINK, EXISTS, TOUCH)
 * into the reply Redis would give for the whole command, appended to `out`:
 *   - any part that is an error: that error (the first such part), never a partial result;
 *   - REPLIES_MERGE_SUM: one integer, the sum of the parts' integers;
 *   - REPLIES_MERGE_SAME: the first part's reply when every part's is the same bytes, else an
 *     -ERR saying the primaries disagree;
 *   - REPLIES_MERGE_AND: one array of integers, element i 1 when every part's element i is 1
 *     (every part an array of the same length of integers, else -1);
 *   - REPLIES_MERGE_CONCAT: one array of every part's elements, part by part (KEYS over the
 *     primaries of a cluster); key_part and argc are not read;
 *   - REPLIES_MERGE_VALUES: one array of argc-1 elements, element i-1 taken in order from the part
 *     of id key_part[i] (argv[i]'s part: the part whose `instance` field is that id).
 * Returns 0, or -1 when the parts do not hold the elements key_part asks for (nothing
 * appended; the caller answers an error).
 */
int replies_merge(enum replies_merge_kind kind, const struct replies_part *parts, int nparts, const int16_t *key_part,
                  size_t argc, struct bytebuf *out);

/*
 * SCAN's reply: "*2", the cursor as a bulk string of decimal digits, then the array of keys.
 * replies_scan_cursor reads the cursor into *cursor; replies_scan_with_cursor appends to out
 * the same reply with the cursor replaced by `cursor`. Both return 0, or -1 (nothing
 * appended) when the reply is not that shape (an error reply is not).
 */
int replies_scan_cursor(const char *reply, size_t len, uint64_t *cursor) __attribute__((warn_unused_result));
int replies_scan_with_cursor(const char *reply, size_t len, uint64_t cursor, struct bytebuf *out)
    __attribute__((warn_unused_result));

/*
 * RESP3's form of text for a human (INFO, as Redis's addReplyVerbatim): the bulk reply
 * "$N\r\n<body>\r\n" as "=N+4\r\ntxt:<body>\r\n", appended to out. Any other reply (an
 * error) is appended as it is.
 */
void replies_verbatim(const char *reply, size_t len, struct bytebuf *out);

/*
 * The one formatter of error replies: "-<text>\r\n" into buf (text is "CODE message", no
 * '-', no CRLF; cut to fit). Returns the length written (< size). size must be >= 4.
 */
size_t replies_error(char *buf, size_t size, const char *text);

/* The text of -UNAVAILABLE for an instance that is down (no '-', no CRLF) into buf. */
void replies_unavailable(char *buf, size_t size, const char *instance_name);

/* As replies_unavailable, followed by " (why)" when why is not NULL: a reason the client can act
 * on (a host name that does not resolve), e.g. "UNAVAILABLE instance 'durable' is unreachable
 * (cannot resolve redis-a.example: name or service not known)". */
void replies_unavailable_why(char *buf, size_t size, const char *instance_name, const char *why);

/* The text of -UNAVAILABLE for a request whose connection was closed by backend-timeout: the
 * command reached the instance and may have run. */
void replies_timed_out(char *buf, size_t size, const char *instance_name);

#endif
