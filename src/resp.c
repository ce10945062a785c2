/* resp.c: resumable RESP request parser (Redis 7.0 multibulk + inline semantics) and reply framer. */
#include "resp.h"
#include "util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Request parser states. A frame is a sequence of lines and payloads:
 *
 *   PS_START --'*'--> PS_MBULK_LEN --"*N\r\n"--> PS_BULK_LEN --"$L\r\n"--> PS_BULK_DATA --+
 *      |                                              ^                                   |
 *      |                                              +------- more bulks expected -------+
 *      +--other--> PS_INLINE --"...\n"--> done
 *
 * p->pos is always the start of the line (or payload) being waited for, so every
 * decision is taken on complete lines only: the outcome never depends on how the
 * bytes were split between calls.
 */
enum parse_state { PS_START = 0, PS_MBULK_LEN, PS_BULK_LEN, PS_BULK_DATA, PS_INLINE, PS_ERROR };

#define STEP_AGAIN 2 /* internal: a state transition happened, keep going */

/* ---------------------------------------------------------------------------------------------
 * Integers
 * ------------------------------------------------------------------------------------------- */

/* Redis's string2ll: optional '-', no '+', no spaces, no leading zeros, no "-0", no overflow. */
int resp_parse_ll(const char *s, size_t len, long long *out)
{
    unsigned long long v = 0;
    size_t i = 0;
    int neg = 0;

    if (len == 0) return -1;
    if (len == 1 && s[0] == '0') {
        *out = 0;
        return 0;
    }
    if (s[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (i >= len || s[i] < '1' || s[i] > '9') return -1;
    for (; i < len; i++) {
        unsigned d;
        if (s[i] < '0' || s[i] > '9') return -1;
        d = (unsigned)(s[i] - '0');
        if (v > (ULLONG_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (unsigned long long)LLONG_MAX + 1) return -1;
        *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
    } else {
        if (v > (unsigned long long)LLONG_MAX) return -1;
        *out = (long long)v;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Request parser: lifecycle and buffers
 * ------------------------------------------------------------------------------------------- */

void resp_parser_init(struct resp_parser *p)
{
    memset(p, 0, sizeof(*p));
    p->max_bulk = RESP_DEFAULT_MAX_BULK;
    p->max_args = RESP_MAX_MULTIBULK;
}

void resp_parser_free(struct resp_parser *p)
{
    free(p->args);
    free(p->inline_buf);
    p->args = NULL;
    p->inline_buf = NULL;
    p->args_cap = p->inline_cap = 0;
    resp_parser_reset(p);
}

void resp_parser_reset(struct resp_parser *p)
{
    p->state = PS_START;
    p->pos = p->scan = 0;
    p->bulks_left = p->bulk_len = 0;
    p->argc = p->header_len = p->frame_len = 0;
    p->error[0] = '\0';
}

static enum resp_status parser_fail(struct resp_parser *p, const char *msg)
{
    snprintf(p->error, sizeof(p->error), "%s", msg);
    p->state = PS_ERROR;
    return RESP_ERROR;
}

/* args_reserve's slow path: grow geometrically; the array is kept across frames. */
static void __attribute__((noinline)) args_grow(struct resp_parser *p, size_t need)
{
    size_t cap = p->args_cap ? p->args_cap : 8;

    while (cap < need) cap *= 2;
    p->args = xrealloc(p->args, cap * sizeof(*p->args));
    p->args_cap = cap;
}

/* Make room for `need` args (once per argument: the check stays inline). */
static inline void args_reserve(struct resp_parser *p, size_t need)
{
    if (need > p->args_cap) args_grow(p, need);
}

static void inline_reserve(struct resp_parser *p, size_t need)
{
    size_t cap = p->inline_cap ? p->inline_cap : 64;

    if (need <= p->inline_cap) return;
    while (cap < need) cap *= 2;
    p->inline_buf = xrealloc(p->inline_buf, cap);
    p->inline_cap = cap;
}

/*
 * Find byte `ch` ending the line that starts at p->pos, resuming at p->scan so that
 * feeding byte by byte stays O(n). Returns 1 (index in *at), 0 (need more) or -1
 * when RESP_MAX_INLINE bytes of the line went by without it: Redis's "too big" rule
 * (more than PROTO_INLINE_MAX_SIZE bytes buffered without a line end), applied to
 * the line itself so the answer does not depend on how the bytes arrived.
 */
static int line_find(struct resp_parser *p, const char *buf, size_t len, char ch, size_t *at)
{
    size_t limit = p->pos + RESP_MAX_INLINE + 1;
    size_t end = len < limit ? len : limit;

    if (p->scan < p->pos) p->scan = p->pos;
    if (p->scan < end) {
        const char *hit = memchr(buf + p->scan, ch, end - p->scan);
        if (hit != NULL) {
            p->scan = (size_t)(hit - buf);
            *at = p->scan;
            return 1;
        }
        p->scan = end;
    }
    return len - p->pos > RESP_MAX_INLINE ? -1 : 0;
}

static enum resp_status frame_done(struct resp_parser *p)
{
    p->frame_len = p->pos;
    p->state = PS_START;
    p->pos = p->scan = 0;
    return RESP_DONE;
}

/* ---------------------------------------------------------------------------------------------
 * Multibulk: "*N\r\n" then N times "$L\r\n" + L bytes + 2 bytes (Redis skips the last two
 * bytes of each line without checking them, and so do we: the backend parses alike).
 * ------------------------------------------------------------------------------------------- */

static int parse_mbulk_len(struct resp_parser *p, const char *buf, size_t len)
{
    size_t cr;
    long long ll;
    int r = line_find(p, buf, len, '\r', &cr);

    if (r < 0) return parser_fail(p, "Protocol error: too big mbulk count string");
    if (r == 0 || cr + 1 >= len) return RESP_NEED_MORE;
    if (resp_parse_ll(buf + 1, cr - 1, &ll) != 0) return parser_fail(p, "Protocol error: invalid multibulk length");
    if (p->unauthenticated && ll > RESP_UNAUTH_MAX_ARGS && ll <= INT_MAX)
        return parser_fail(p, "Protocol error: unauthenticated multibulk length");
    if (ll > 0 && (unsigned long long)ll > p->max_args)
        return parser_fail(p, "Protocol error: invalid multibulk length");
    p->pos = p->header_len = cr + 2;
    if (ll <= 0) return frame_done(p); /* "*0", "*-1", "*-10": consumed, nothing to run */
    p->bulks_left = ll;
    p->state = PS_BULK_LEN;
    return STEP_AGAIN;
}

static int parse_bulk_len(struct resp_parser *p, const char *buf, size_t len)
{
    size_t cr;
    long long ll;
    int r = line_find(p, buf, len, '\r', &cr);

    if (r < 0) return parser_fail(p, "Protocol error: too big bulk count string");
    if (r == 0 || cr + 1 >= len) return RESP_NEED_MORE;
    if (buf[p->pos] != '$') {
        size_t i;
        /* As Redis's addReplyErrorFormat: a NUL cuts the text, CR/LF become spaces. */
        snprintf(p->error, sizeof(p->error), "Protocol error: expected '$', got '%c'", buf[p->pos]);
        for (i = 0; p->error[i] != '\0'; i++)
            if (p->error[i] == '\r' || p->error[i] == '\n') p->error[i] = ' ';
        p->state = PS_ERROR;
        return RESP_ERROR;
    }
    if (resp_parse_ll(buf + p->pos + 1, cr - p->pos - 1, &ll) != 0 || ll < 0 || ll > p->max_bulk)
        return parser_fail(p, "Protocol error: invalid bulk length");
    if (p->unauthenticated && ll > RESP_UNAUTH_MAX_BULK)
        return parser_fail(p, "Protocol error: unauthenticated bulk length");
    p->bulk_len = ll;
    p->pos = cr + 2;
    p->state = PS_BULK_DATA;
    return STEP_AGAIN;
}

static int parse_bulk_data(struct resp_parser *p, size_t len)
{
    if (len - p->pos < (size_t)p->bulk_len + 2) return RESP_NEED_MORE;
    args_reserve(p, p->argc + 1);
    p->args[p->argc].off = p->pos;
    p->args[p->argc].len = (size_t)p->bulk_len;
    p->argc++;
    p->pos += (size_t)p->bulk_len + 2;
    if (--p->bulks_left == 0) return frame_done(p);
    p->state = PS_BULK_LEN;
    return STEP_AGAIN;
}

/* ---------------------------------------------------------------------------------------------
 * Inline: one line split like Redis's sdssplitargs().
 * ------------------------------------------------------------------------------------------- */

static int is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static int hex_value(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/*
 * Split line[0..n) into p->args / p->inline_buf. Reading past the end (or an embedded
 * NUL, as sdssplitargs works on a C string) yields 0. Output never exceeds input.
 * Returns 0, or -1 on unbalanced quotes.
 */
static int split_args(struct resp_parser *p, const char *line, size_t n)
{
#define AT(k) ((k) < n ? (unsigned char)line[k] : 0)
    size_t i = 0, out = 0;
    char *dst;

    inline_reserve(p, n + 1);
    dst = p->inline_buf;
    for (;;) {
        while (AT(i) != 0 && is_space(AT(i))) i++;
        if (AT(i) == 0) return 0;
        size_t start = out;
        int inq = 0, insq = 0, done = 0;
        while (!done) {
            int c = AT(i);
            if (inq) {
                if (c == '\\' && AT(i + 1) == 'x' && hex_value(AT(i + 2)) >= 0 && hex_value(AT(i + 3)) >= 0) {
                    dst[out++] = (char)(hex_value(AT(i + 2)) * 16 + hex_value(AT(i + 3)));
                    i += 3;
                } else if (c == '\\' && AT(i + 1) != 0) {
                    i++;
                    switch (AT(i)) {
                    case 'n':
                        dst[out++] = '\n';
                        break;
                    case 'r':
                        dst[out++] = '\r';
                        break;
                    case 't':
                        dst[out++] = '\t';
                        break;
                    case 'b':
                        dst[out++] = '\b';
                        break;
                    case 'a':
                        dst[out++] = '\a';
                        break;
                    default:
                        dst[out++] = (char)AT(i);
                        break;
                    }
                } else if (c == '"') {
                    if (AT(i + 1) != 0 && !is_space(AT(i + 1)))
                        return -1; /* closing quote must be followed by a space or the end */
                    done = 1;
                } else if (c == 0) {
                    return -1;
                } else {
                    dst[out++] = (char)c;
                }
            } else if (insq) {
                if (c == '\\' && AT(i + 1) == '\'') {
                    i++;
                    dst[out++] = '\'';
                } else if (c == '\'') {
                    if (AT(i + 1) != 0 && !is_space(AT(i + 1))) return -1;
                    done = 1;
                } else if (c == 0) {
                    return -1;
                } else {
                    dst[out++] = (char)c;
                }
            } else {
                switch (c) {
                case ' ':
                case '\n':
                case '\r':
                case '\t':
                case 0:
                    done = 1;
                    break;
                case '"':
                    inq = 1;
                    break;
                case '\'':
                    insq = 1;
                    break;
                default:
                    dst[out++] = (char)c;
                    break;
                }
            }
            if (AT(i) != 0) i++;
        }
        args_reserve(p, p->argc + 1);
        p->args[p->argc].off = start;
        p->args[p->argc].len = out - start;
        p->argc++;
    }
#undef AT
}

static int parse_inline(struct resp_parser *p, const char *buf, size_t len)
{
    size_t nl, line_len;
    int r = line_find(p, buf, len, '\n', &nl);

    if (r < 0) return parser_fail(p, "Protocol error: too big inline request");
    if (r == 0) return RESP_NEED_MORE;
    /* Redis finds the '\n' with strchr() (a NUL before it stalls the client); memchr here,
     * and split_args() stops at a NUL as sdssplitargs() does. */
    line_len = nl > 0 && buf[nl - 1] == '\r' ? nl - 1 : nl;
    r = split_args(p, buf, line_len);
    if (r != 0) return parser_fail(p, "Protocol error: unbalanced quotes in request");
    p->pos = nl + 1;
    return frame_done(p);
}

/* ---------------------------------------------------------------------------------------------
 * Request parser: entry point
 * ------------------------------------------------------------------------------------------- */

enum resp_status resp_parse_request(struct resp_parser *p, const char *buf, size_t len)
{
    int r;

    if (p->state != PS_START && p->state != PS_ERROR && len < p->pos)
        return parser_fail(p, "internal error: frame bytes were dropped between calls");
    for (;;) {
        switch (p->state) {
        case PS_START:
            if (len == 0) return RESP_NEED_MORE;
            p->argc = p->header_len = p->frame_len = 0;
            p->pos = p->scan = 0;
            p->is_inline = buf[0] != '*';
            p->state = p->is_inline ? PS_INLINE : PS_MBULK_LEN;
            r = STEP_AGAIN;
            break;
        case PS_MBULK_LEN:
            r = parse_mbulk_len(p, buf, len);
            break;
        case PS_BULK_LEN:
            r = parse_bulk_len(p, buf, len);
            break;
        case PS_BULK_DATA:
            r = parse_bulk_data(p, len);
            break;
        case PS_INLINE:
            r = parse_inline(p, buf, len);
            break;
        default:
            return RESP_ERROR;
        }
        if (r != STEP_AGAIN) return (enum resp_status)r;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Reply framer
 *
 *   line types  + - :            (RESP3: _ , # ( )        one "...\r\n" line
 *   bulk types  $                (RESP3: ! =)             "$L\r\n" + L bytes + "\r\n", $-1 null
 *   aggregates  *                (RESP3: ~ > and % x2)    "*N\r\n" + N replies, *-1 null
 *   attribute   (RESP3: |)                               "|N\r\n" + N key/value pairs, then the
 *                                                        element it annotates (which it does not count as)
 *
 * s->pending counts the elements still expected: 1 for the reply itself, and each
 * aggregate header adds its N (its own slot is used up). The reply is complete when it
 * reaches 0, however deep the nesting: no stack, no recursion.
 * ------------------------------------------------------------------------------------------- */

void resp_scanner_reset(struct resp_scanner *s)
{
    memset(s, 0, sizeof(*s));
    s->bulk_left = -1;
}

/* Find "\r\n" ending the line that starts at s->pos (a lone CR is content, as hiredis). */
static int scan_line(struct resp_scanner *s, const char *buf, size_t len, size_t *cr)
{
    if (s->scan < s->pos + 1) s->scan = s->pos + 1; /* the type byte is never the terminator */
    while (s->scan < len) {
        const char *hit = memchr(buf + s->scan, '\r', len - s->scan);
        if (hit == NULL) {
            s->scan = len;
            return 0;
        }
        s->scan = (size_t)(hit - buf);
        if (s->scan + 1 >= len) return 0;
        if (buf[s->scan + 1] == '\n') {
            *cr = s->scan;
            return 1;
        }
        s->scan++;
    }
    return 0;
}

/* One element ended. 1 when the whole reply is done. */
static int scan_element_done(struct resp_scanner *s)
{
    return --s->pending <= 0;
}

/* Reset for the next reply, keeping `first` for the caller. */
static long long scan_finish(struct resp_scanner *s, long long result)
{
    char first = s->first;

    resp_scanner_reset(s);
    s->first = first;
    return result;
}

long long resp_scan_reply(struct resp_scanner *s, const char *buf, size_t len)
{
    size_t cr;
    long long n;
    char type;
    int opened;

    if (s->pending == 0) { /* a new reply (a zeroed scanner works too) */
        if (len == 0) return 0;
        s->pos = s->scan = 0;
        s->bulk_left = -1;
        s->pending = 1;
        s->first = buf[0];
    }
    if (len < s->pos) return scan_finish(s, -1);
    for (;;) {
        if (s->bulk_left >= 0) {
            size_t end = s->pos + (size_t)s->bulk_left;
            if (len < end) return 0;
            if (buf[end - 2] != '\r' || buf[end - 1] != '\n') return scan_finish(s, -1);
            s->pos = end;
            s->bulk_left = -1;
            if (scan_element_done(s)) return scan_finish(s, (long long)end);
            continue;
        }
        if (s->pos >= len) return 0;
        type = buf[s->pos];
        if (strchr("+-:$*_,#(!=~>%|", type) == NULL || type == '\0')
            return scan_finish(s, -1); /* judged as soon as it is seen */
        if (!scan_line(s, buf, len, &cr)) return 0;
        opened = 0;
        switch (type) {
        case '+':
        case '-':
        case '_':
        case ',':
        case '#':
        case '(':
            break;
        case ':':
            if (resp_parse_ll(buf + s->pos + 1, cr - s->pos - 1, &n) != 0) return scan_finish(s, -1);
            break;
        case '$':
        case '!':
        case '=':
            if (resp_parse_ll(buf + s->pos + 1, cr - s->pos - 1, &n) != 0 || n < -1 || n > LLONG_MAX - 2)
                return scan_finish(s, -1);
            if (n >= 0) s->bulk_left = n + 2;
            break;
        case '*':
        case '~':
        case '>':
        case '%':
            if (resp_parse_ll(buf + s->pos + 1, cr - s->pos - 1, &n) != 0 || n < -1 ||
                (type == '%' && n > LLONG_MAX / 2))
                return scan_finish(s, -1);
            if (type == '%' && n > 0) n *= 2;
            if (n > 0) {
                /* its own slot becomes its n elements */
                if (n - 1 > LLONG_MAX - s->pending) return scan_finish(s, -1);
                s->pending += n - 1;
                opened = 1;
            }
            break;
        case '|':
            /* 2N elements more; its own slot stays for the element it annotates */
            if (resp_parse_ll(buf + s->pos + 1, cr - s->pos - 1, &n) != 0 || n < 0 || n > LLONG_MAX / 2 ||
                2 * n > LLONG_MAX - s->pending)
                return scan_finish(s, -1);
            s->pending += 2 * n;
            opened = 1;
            break;
        default:
            return scan_finish(s, -1);
        }
        s->pos = cr + 2;
        if (s->bulk_left >= 0 || opened) continue; /* a payload or elements follow */
        if (scan_element_done(s)) return scan_finish(s, (long long)s->pos);
    }
}

size_t resp_scan_discard(struct resp_scanner *s, size_t len)
{
    if (s->pending == 0 || len < s->pos) return 0;
    if (s->bulk_left > 2) {
        /* inside a payload: what has come of it can go too, but for its final CRLF */
        size_t have = len - s->pos, take = (size_t)s->bulk_left - 2;
        if (have < take) take = have;
        s->pos += take;
        s->bulk_left -= (long long)take;
    }
    size_t drop = s->pos;
    s->scan = s->scan > drop ? s->scan - drop : 0;
    s->pos = 0;
    return drop;
}

const char *resp_array_first(const char *reply, size_t len, long long *count)
{
    if (len < 4 || reply[0] != '*') return NULL;
    const char *crlf = memchr(reply, '\n', len);
    if (!crlf || crlf - reply < 3 || resp_parse_ll(reply + 1, (size_t)(crlf - reply) - 2, count) != 0) return NULL;
    return crlf + 1;
}

int resp_cursor_line(struct resp_cursor *r, char type, const char **s, size_t *n)
{
    if (r->p >= r->end || *r->p != type) return -1;
    const char *cr = memchr(r->p, '\r', (size_t)(r->end - r->p));
    if (!cr || cr + 1 >= r->end || cr[1] != '\n') return -1;
    *s = r->p + 1;
    *n = (size_t)(cr - r->p) - 1;
    r->p = cr + 2;
    return 0;
}

int resp_cursor_number(struct resp_cursor *r, char type, long long *v)
{
    const char *s;
    size_t n;
    return resp_cursor_line(r, type, &s, &n) == 0 && resp_parse_ll(s, n, v) == 0 ? 0 : -1;
}

int resp_cursor_array(struct resp_cursor *r, long long *n)
{
    return resp_cursor_number(r, '*', n) == 0 && *n >= 0 ? 0 : -1;
}

int resp_cursor_bulk(struct resp_cursor *r, struct resp_str *out)
{
    long long n;
    if (resp_cursor_number(r, '$', &n) != 0 || n < -1) return -1;
    out->nil = n == -1;
    out->s = r->p;
    out->n = 0;
    if (out->nil) return 0;
    if ((unsigned long long)n + 2 > (unsigned long long)(r->end - r->p)) return -1;
    if (r->p[n] != '\r' || r->p[n + 1] != '\n') return -1;
    out->n = (size_t)n;
    r->p += n + 2;
    return 0;
}

int resp_cursor_skip(struct resp_cursor *r)
{
    struct resp_scanner sc;
    resp_scanner_reset(&sc);
    long long n = resp_scan_reply(&sc, r->p, (size_t)(r->end - r->p));
    if (n <= 0) return -1;
    r->p += n;
    return 0;
}

int resp_str_is(struct resp_str s, const char *lit)
{
    return !s.nil && s.n == strlen(lit) && memcmp(s.s, lit, s.n) == 0;
}
