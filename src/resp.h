/* resp.h: incremental RESP2 request parser (multibulk + inline) and RESP2/RESP3 reply framer. */
#ifndef KEYGATE_RESP_H
#define KEYGATE_RESP_H

#include <stddef.h>
#include <stdint.h>

/* Redis's own limits (src/networking.c). */
#define RESP_MAX_INLINE 65536            /* PROTO_INLINE_MAX_SIZE */
#define RESP_MAX_MULTIBULK (1024 * 1024) /* largest accepted "*N" */
#define RESP_DEFAULT_MAX_BULK (512LL * 1024 * 1024)
#define RESP_UNAUTH_MAX_ARGS 10    /* before AUTH: at most 10 arguments (networking.c) */
#define RESP_UNAUTH_MAX_BULK 16384 /* before AUTH: bulks of at most 16 KiB */

enum resp_status {
    RESP_NEED_MORE = 0, /* frame incomplete: call again with the same start and more bytes */
    RESP_DONE = 1,      /* one whole request parsed: see parser fields, frame_len bytes used */
    RESP_ERROR = -1,    /* protocol error: p->error holds Redis's text (without "-ERR ") */
};

/* One argument: `off` is relative to the start of the frame (multibulk) or to
 * p->inline_buf (inline requests). */
struct resp_arg {
    size_t off;
    size_t len;
};

/*
 * Request parser. Resumable: state survives between calls, so feeding a frame
 * byte by byte gives the same result as feeding it whole, in O(n) total.
 *
 * Contract of a call: `buf` points at the first unconsumed byte of the client's
 * input (the start of the current frame) and `len` is every byte available.
 * Between two calls for the same frame the caller may move the buffer (realloc),
 * but must not drop or alter the bytes already given.
 */
struct resp_parser {
    /* limits, set by resp_parser_init; may be changed between frames */
    long long max_bulk;  /* largest bulk length accepted (proto-max-bulk-len) */
    size_t max_args;     /* largest multibulk count accepted */
    int unauthenticated; /* 1: Redis's pre-AUTH limits apply too (RESP_UNAUTH_MAX_*), with its
                              "unauthenticated multibulk/bulk length" errors */

    /* result, valid after RESP_DONE until the next call */
    int is_inline; /* 1: args index inline_buf; 0: args index the frame */
    size_t argc;
    struct resp_arg *args; /* argc entries */
    size_t header_len;     /* multibulk: bytes of the "*N\r\n" line; inline: 0 */
    size_t frame_len;      /* bytes of the whole frame (caller consumes them) */
    char *inline_buf;      /* unquoted inline arguments */
    char error[128];       /* set on RESP_ERROR, e.g. "Protocol error: invalid bulk length" */

    /* private state */
    int state;
    size_t pos;  /* bytes of the frame already examined (start of the current line) */
    size_t scan; /* where the search for the current line's end resumes */
    long long bulks_left;
    long long bulk_len;
    size_t args_cap;
    size_t inline_cap;
};

/* Initialise a parser with Redis's default limits. */
void resp_parser_init(struct resp_parser *p);

/* Free the parser's buffers (the struct itself belongs to the caller). */
void resp_parser_free(struct resp_parser *p);

/*
 * Semantics are Redis 7.0's processMultibulkBuffer/processInlineBuffer, error texts
 * included. The "too big" errors fire once a header line ("*N", "$N") or an inline line
 * runs past RESP_MAX_INLINE bytes without its terminator, judged on the line itself so
 * whole and split feeds always agree. Like Redis, the two bytes after each header's CR
 * and after each bulk payload are skipped unchecked.
 *
 * Parse from the frame start `buf` (len bytes available). On RESP_DONE the caller
 * consumes p->frame_len bytes and the next call starts a new frame. Empty
 * multibulk ("*0\r\n", "*-1\r\n") and blank inline lines are consumed silently:
 * RESP_DONE with argc == 0, which the caller skips. After RESP_ERROR the parser
 * must be reset (resp_parser_reset) before reuse; callers close the connection.
 */
enum resp_status resp_parse_request(struct resp_parser *p, const char *buf, size_t len);

/* Forget any partial frame (keeps limits and buffers). */
void resp_parser_reset(struct resp_parser *p);

/* Pointer to argument i of the frame just parsed, given the frame start. */
static inline const char *resp_arg_ptr(const struct resp_parser *p, const char *frame, size_t i)
{
    return (p->is_inline ? p->inline_buf : frame) + p->args[i].off;
}

/*
 * Reply framer: finds where one complete reply ends without building it: RESP2's types and
 * RESP3's (_ , # ( ! = ~ > %, and | attributes, which frame with the element they annotate).
 * Resumable like the request parser. Nesting costs no memory: one counter holds the
 * elements still expected across every open aggregate, so any legal depth frames.
 */
struct resp_scanner {
    size_t pos;          /* bytes of the reply already examined */
    size_t scan;         /* where the search for the current CRLF resumes */
    long long pending;   /* elements still expected (the reply itself at first) */
    long long bulk_left; /* >= 0 while inside a bulk payload (+CRLF) */
    char first;          /* first byte of the reply: + - : $ * (kept
                                                  after completion until the next reply) */
};

void resp_scanner_reset(struct resp_scanner *s);

/*
 * Scan from the reply start `buf` (len bytes available). Returns the reply's total
 * length (> 0) when complete, 0 when more bytes are needed, -1 on malformed input
 * (the backend connection is then unusable). After a complete reply the scanner is
 * reset for the next one.
 */
long long resp_scan_reply(struct resp_scanner *s, const char *buf, size_t len);

/*
 * For a reply too large to keep: the bytes at the start of buf (len bytes available, as
 * passed to resp_scan_reply) the scanner no longer needs, payload bytes included. The
 * caller drops them and passes what follows as buf from then on; the reply's length
 * returned at its end then counts from the new start. 0 when no reply is being scanned.
 */
size_t resp_scan_discard(struct resp_scanner *s, size_t len);

/*
 * For a complete array reply: its element count in *count (-1 for a nil array) and a
 * pointer to its first element (right after "*N\r\n"). NULL when reply is not an array.
 */
const char *resp_array_first(const char *reply, size_t len, long long *count);

/*
 * Reading one whole reply element by element, for the pure parsers of replies (slotmap,
 * sentinel): a cursor over the reply's bytes [p, end); each call reads the element at p and
 * moves p past it, or returns -1 (the reply is not the shape asked for: the caller gives up on
 * all of it, and p is then of no use).
 */
struct resp_cursor {
    const char *p, *end;
};

/* A bulk string read: s[0..n), or nil for a null bulk ($-1). */
struct resp_str {
    const char *s;
    size_t n;
    int nil;
};

/* One line "<type>text\r\n": its text in *s, *n. */
int resp_cursor_line(struct resp_cursor *r, char type, const char **s, size_t *n);

/* One line "<type><decimal>\r\n" (':' an integer, '*' an array's count, '$' a bulk's length). */
int resp_cursor_number(struct resp_cursor *r, char type, long long *v);

/* An array's header "*N" with N >= 0 (a null array is no array here). */
int resp_cursor_array(struct resp_cursor *r, long long *n);

/* A bulk string, null included. */
int resp_cursor_bulk(struct resp_cursor *r, struct resp_str *out);

/* Skip one element of any type, nested ones whole. */
int resp_cursor_skip(struct resp_cursor *r);

/* Is s (not nil) exactly the bytes of lit? */
int resp_str_is(struct resp_str s, const char *lit);

/* Parse a decimal integer of exactly len bytes (optional leading '-'). 0 on success. */
int resp_parse_ll(const char *s, size_t len, long long *out);

#endif
