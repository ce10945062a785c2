/* fuzz_reply.c: libFuzzer target: the reply framer resp_scan_reply, differentially against hiredis's redisReader. */
/*
 * Input: byte 0 flags (bit 0: the incremental feed calls resp_scan_discard after every 0, as
 * backend.c does for a reply nobody keeps), bytes 1-2 a split point, the rest a stream of replies.
 *
 * Three framers read the stream reply by reply:
 *  - keygate's resp_scan_reply, fed the whole rest of the stream from the reply's start;
 *  - hiredis 0.14.1's redisReader (Debian's, which validates "$N" and "*N" with string2ll),
 *    created without reply functions, so it builds no objects and "*2147483647" costs nothing;
 *    a reply's length is how many bytes it consumed;
 *  - walk(), below: a strict walker of RESP2 as Redis sends it, with an explicit stack, which
 *    knows where hiredis and keygate legitimately differ and says so.
 * For each reply, while the walker sees nothing either side treats differently, all three must
 * give the same result: the same length for a whole reply, "wants more" (keygate 0, hiredis no
 * reply) for an incomplete one, an error (keygate -1, hiredis REDIS_ERR) for a malformed one.
 *
 * The differences, each checked as stated (each ends the comparison of the stream there):
 *  D1 RESP3 type bytes  _ , # ( ! = ~ > % |  : keygate frames them (its RESP3 backend connections,
 *     for RESP3 clients, receive them), hiredis 0.14 answers "Protocol error, got X as reply
 *     type byte". Required: hiredis errors. (RESP3 framing itself: tests/unit/test_resp.c.)
 *  D2 ":" lines: hiredis takes any bytes up to CRLF as an integer reply; keygate requires
 *     Redis's string2ll form (resp_parse_ll). Required: keygate -1. Redis sends only that form.
 *  D3 the two bytes after a bulk payload: hiredis skips them unchecked; keygate requires CRLF.
 *     Required: keygate -1. Redis always ends a payload with CRLF.
 *  D4 bulk length LLONG_MAX-1 or LLONG_MAX: keygate -1 (its byte count n+2 must fit), hiredis
 *     waits for the payload. Required: keygate -1. Ends the comparison.
 *  D5 array count above INT_MAX: hiredis "Multi-bulk length out of range" (its task's count is
 *     an int), keygate frames it. Required: hiredis errors; keygate must still frame as the walker.
 *  D6 nesting: hiredis refuses the ninth nested array as soon as it sees its '*' ("No support for
 *     nested multi bulk replies with depth > 7"); keygate frames any depth (Redis sends deeper
 *     replies, e.g. from Lua: test_limits's 300-deep one). Required: hiredis errors; keygate must
 *     still frame exactly as the walker (length, 0 or -1).
 *  D7 elements still expected across all open arrays above LLONG_MAX (e.g. "*2^62+1" holding
 *     "*2^62+1"): keygate keeps them in one counter (resp.h) and answers -1; the walker's stack
 *     and hiredis (D5 first) go on. Required: keygate -1. No reply has 2^63 elements.
 *
 * Then the same stream is fed to one scanner incrementally, as backend_frame_replies does:
 * first the bytes before the split point, then all, each call on a fresh heap copy starting
 * at the reply's start (or, after resp_scan_discard, at the first byte not dropped), with the
 * scanner's state carried. Every reply's length (dropped bytes included) and the final result
 * must equal the whole feed's. For inputs up to 1 KiB the same is done byte by byte.
 */
#include "resp.h"

#include <hiredis/read.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RESULTS 4096

/* Walker verdicts beyond a length (> 0), WANT (0) and ERR (-1). */
enum {
    W_WANT = 0,
    W_ERR = -1,
    W_RESP3 = -2,  /* D1 */
    W_KSTRICT = -3 /* D2, D3, D4, D7: keygate errors, hiredis (or the walker) does not */
};

__attribute__((noreturn)) static void fail(const char *what, size_t off, long long k, long long h, long long w)
{
    fprintf(stderr, "fuzz_reply: %s at stream offset %zu: keygate %lld, hiredis %lld, walker %lld\n", what, off, k, h,
            w);
    abort();
}

/* Find CRLF ending the line starting at buf[from] (the type byte); its index or -1. */
static long long find_crlf(const char *buf, size_t len, size_t from)
{
    for (size_t i = from + 1; i + 1 < len; i++)
        if (buf[i] == '\r' && buf[i + 1] == '\n') return (long long)i;
    return -1;
}

/* Redis's string2ll on exactly len bytes, written out again here (not resp_parse_ll). */
static int walk_ll(const char *s, size_t len, long long *out)
{
    unsigned long long v = 0, lim;
    size_t i = 0;
    int neg = 0;

    if (len == 0 || len > 20) return -1;
    if (len == 1 && s[0] == '0') {
        *out = 0;
        return 0;
    }
    if (s[0] == '-') neg = i = 1;
    if (i == len || s[i] < '1' || s[i] > '9') return -1;
    lim = neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        if (v > (lim - (unsigned)(s[i] - '0')) / 10) return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    *out = neg ? (long long)(0 - v) : (long long)v;
    return 0;
}

/*
 * Walk one reply at buf (len bytes). Returns its length, W_WANT, W_ERR, W_RESP3 or W_KSTRICT;
 * *hiredis_fails is set when D5 or D6 was seen on the way.
 */
static long long walk(const char *buf, size_t len, int *hiredis_fails)
{
    /* open[i]: elements still expected by the i-th open array */
    size_t cap = 16, depth = 0, pos = 0;
    long long *open = malloc(cap * sizeof(*open)), result;
    long long expected = 1; /* elements still expected in all, this one included (D7) */

    if (open == NULL) abort();
    *hiredis_fails = 0;
    for (;;) {
        long long crlf, n;
        char type;

        if (pos >= len) {
            result = W_WANT;
            break;
        }
        type = buf[pos];
        if (type != '\0' && strchr("_,#(!=~>%|", type)) {
            result = W_RESP3;
            break;
        }
        if (type == '\0' || !strchr("+-:$*", type)) {
            result = W_ERR;
            break;
        }
        if (type == '*' && depth >= 8) *hiredis_fails = 1; /* D6: judged on the type byte */
        crlf = find_crlf(buf, len, pos);
        if (crlf < 0) {
            result = W_WANT;
            break;
        }
        const char *num = buf + pos + 1;
        size_t numlen = (size_t)crlf - pos - 1;
        pos = (size_t)crlf + 2;
        if (type == ':' && walk_ll(num, numlen, &n) != 0) {
            result = W_KSTRICT; /* D2 */
            break;
        }
        if (type == '$') {
            if (walk_ll(num, numlen, &n) != 0 || n < -1) {
                result = W_ERR;
                break;
            }
            if (n > LLONG_MAX - 2) {
                result = W_KSTRICT; /* D4 */
                break;
            }
            if (n >= 0) {
                if ((unsigned long long)n + 2 > len - pos) {
                    result = W_WANT;
                    break;
                }
                pos += (size_t)n;
                if (buf[pos] != '\r' || buf[pos + 1] != '\n') {
                    result = W_KSTRICT; /* D3 */
                    break;
                }
                pos += 2;
            }
        }
        if (type == '*') {
            if (walk_ll(num, numlen, &n) != 0 || n < -1) {
                result = W_ERR;
                break;
            }
            if (n > INT_MAX) *hiredis_fails = 1; /* D5 */
            if (n > 0 && n - 1 > LLONG_MAX - expected) {
                result = W_KSTRICT; /* D7 */
                break;
            }
            if (n > 0) {
                expected += n - 1;
                if (depth == cap) {
                    cap *= 2;
                    open = realloc(open, cap * sizeof(*open));
                    if (open == NULL) abort();
                }
                open[depth++] = n;
                continue;
            }
        }
        /* one element done: close every array it completes */
        expected--;
        while (depth > 0 && --open[depth - 1] == 0) depth--;
        if (depth == 0) {
            result = (long long)pos;
            break;
        }
    }
    free(open);
    return result;
}

/* hiredis's next reply: its length, 0 (wants more) or -1 (error). *consumed tracks the stream. */
static long long hiredis_next(redisReader *r, size_t fed, size_t *consumed)
{
    void *reply = NULL;
    size_t before = *consumed;

    if (redisReaderGetReply(r, &reply) != REDIS_OK) return -1;
    if (reply == NULL) return 0;
    *consumed = fed - (r->len - r->pos);
    return (long long)(*consumed - before);
}

/* Whole feeds, reply by reply. Fills res[] with keygate's results (ending with 0 or -1). */
static size_t compare_whole(const uint8_t *in, size_t n, long long *res)
{
    redisReader *r = redisReaderCreateWithFunctions(NULL);
    size_t off = 0, consumed = 0, nres = 0;
    int hiredis_live = 1;

    if (r == NULL || (n && redisReaderFeed(r, (const char *)in, n) != REDIS_OK)) abort();
    for (;;) {
        struct resp_scanner s;
        int hfails;
        long long k, h = 0, w;

        resp_scanner_reset(&s);
        k = resp_scan_reply(&s, (const char *)in + off, n - off);
        if (k > 0 && ((size_t)k > n - off || s.first != (char)in[off])) fail("bad length or first", off, k, 0, 0);
        if (k > 0 && s.pending != 0) fail("scanner not reset after a reply", off, k, 0, 0);
        if (nres < MAX_RESULTS) res[nres++] = k;
        if (!hiredis_live) {
            if (k <= 0 || nres == MAX_RESULTS) break;
            off += (size_t)k;
            continue;
        }
        w = walk((const char *)in + off, n - off, &hfails);
        if (n > off) h = hiredis_next(r, n, &consumed); /* hiredis with no bytes: no reply, no error */
        if (w == W_RESP3) {
            if (h != -1) fail("D1: hiredis took a RESP3 type byte", off, k, h, w);
            hiredis_live = 0;
        } else if (w == W_KSTRICT) {
            if (k != -1) fail("D2/D3/D4: keygate accepted what it must refuse", off, k, h, w);
            hiredis_live = 0;
        } else if (hfails) {
            if (h != -1) fail("D5/D6: hiredis framed what it refuses", off, k, h, w);
            if (k != w) fail("D5/D6: keygate and the walker disagree", off, k, h, w);
            hiredis_live = 0;
        } else if (k != h || k != w) {
            fail("keygate, hiredis and the walker disagree", off, k, h, w);
        }
        if (k <= 0 || nres == MAX_RESULTS) break;
        off += (size_t)k;
        if (hiredis_live && consumed != off) fail("hiredis consumed other bytes", off, k, h, w);
    }
    redisReaderFree(r);
    return nres;
}

/* Visible bytes: split mode the first `split` then all; byte mode one more each call. */
static size_t next_avail(int bytewise, size_t avail, size_t split, size_t n)
{
    if (!bytewise) return avail < split ? split : n;
    return avail + 1 > n ? n : avail + 1;
}

/* The incremental feed of backend_frame_replies; must reproduce res[0..nres). */
static void compare_incremental(const uint8_t *in, size_t n, int bytewise, size_t split, int discard,
                                const long long *res, size_t nres)
{
    struct resp_scanner s;
    size_t start = 0, frame = 0, avail = next_avail(bytewise, 0, split, n), i = 0;

    resp_scanner_reset(&s);
    for (;;) {
        size_t have = avail - start;
        char *copy = malloc(have + 1);
        long long r;

        if (copy == NULL) abort();
        memcpy(copy, in + start, have);
        r = resp_scan_reply(&s, copy, have);
        if (r == 0 && discard && avail < n) {
            size_t drop = resp_scan_discard(&s, have);
            if (drop > have) fail("discard beyond the bytes given", start, (long long)drop, 0, 0);
            start += drop;
        }
        free(copy);
        if (r > 0) {
            long long whole = (long long)(start - frame) + r;
            if (i >= nres || res[i] != whole) fail("incremental length differs", frame, whole, 0, 0);
            i++;
            if (i == nres) return; /* MAX_RESULTS reached */
            start = frame = frame + (size_t)whole;
            if (start > avail) fail("reply past the bytes given", frame, whole, 0, 0);
        } else if (r < 0 || avail == n) {
            if (i + 1 != nres || res[i] != r) fail("incremental end differs", frame, r, 0, i < nres ? res[i] : 99);
            return;
        } else {
            avail = next_avail(bytewise, avail, split, n);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static long long res[MAX_RESULTS];
    size_t split, nres;
    int discard;

    if (size < 3) return 0;
    discard = data[0] & 1;
    split = (size_t)(data[1] | data[2] << 8);
    data += 3;
    size -= 3;
    split %= size + 1;

    nres = compare_whole(data, size, res);
    compare_incremental(data, size, 0, split, discard, res, nres);
    if (size <= 1024) compare_incremental(data, size, 1, split, discard, res, nres);
    return 0;
}
