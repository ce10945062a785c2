/* replies.c: the pure byte work on backend replies: EXEC pick and filter, split-reply merge, error lines. */
#include "replies.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "resp.h"

/* The length of the one reply at p (at most len bytes), or 0 when it is not whole. */
static size_t reply_length(const char *p, size_t len)
{
    struct resp_scanner sc;
    resp_scanner_reset(&sc);
    long long n = resp_scan_reply(&sc, p, len);
    return n > 0 ? (size_t)n : 0;
}

void replies_exec_pick(const char *reply, size_t len, const char *queued_error, size_t queued_error_len,
                       const char **out, size_t *out_len)
{
    assert(len > 0);
    if ((reply[0] == '-' || reply[0] == '!') && queued_error) {
        *out = queued_error;
        *out_len = queued_error_len;
        return;
    }
    long long count = 0;
    const char *elem = resp_array_first(reply, len, &count);
    if (elem && count > 0) {
        size_t n = reply_length(elem, len - (size_t)(elem - reply));
        if (n > 0) {
            *out = elem;
            *out_len = n;
            return;
        }
    }
    *out = reply; /* nil (aborted by WATCH) or an error: as it came */
    *out_len = len;
}

/* Append "<type><n>\r\n". */
static void add_header(struct bytebuf *out, char type, long long n)
{
    char hdr[32];
    hdr[0] = type;
    size_t k = 1 + format_ll(hdr + 1, n);
    hdr[k++] = '\r';
    hdr[k++] = '\n';
    bytebuf_add(out, hdr, k);
}

int replies_exec_filter(const char *reply, size_t len, const uint8_t *keep, size_t nkeep, struct bytebuf *out)
{
    long long count = -1;
    const char *elem = resp_array_first(reply, len, &count);
    if (!elem || count < 0 || (size_t)count != nkeep) return -1;
    const char *end = reply + len;
    /* check the elements first: nothing is appended for a reply that is not what was sent */
    size_t kept = 0;
    const char *p = elem;
    for (size_t i = 0; i < nkeep; i++) {
        size_t n = reply_length(p, (size_t)(end - p));
        if (n == 0) return -1;
        kept += keep[i] == REPLIES_KEEP_CLIENT;
        p += n;
    }
    add_header(out, '*', (long long)kept);
    for (size_t i = 0; i < nkeep; i++) {
        size_t n = reply_length(elem, (size_t)(end - elem));
        if (keep[i] == REPLIES_KEEP_CLIENT) bytebuf_add(out, elem, n);
        elem += n;
    }
    return 0;
}

int replies_exec_xadd_failed(const char *reply, size_t len, const uint8_t *keep, size_t nkeep, size_t tail,
                             const char **err, size_t *err_len)
{
    long long count = -1;
    const char *elem = resp_array_first(reply, len, &count);
    if (!elem || count < 0 || (keep && (size_t)count != nkeep) || (!keep && (size_t)count < tail)) return 0;
    const char *end = reply + len;
    for (long long i = 0; i < count; i++) {
        size_t n = reply_length(elem, (size_t)(end - elem));
        if (n == 0) return 0;
        int xadd = keep ? keep[i] == REPLIES_KEEP_XADD : (size_t)i >= (size_t)count - tail;
        if (xadd && (elem[0] == '-' || elem[0] == '!')) {
            const char *cr = memchr(elem, '\r', n);
            *err = elem + 1;
            *err_len = cr ? (size_t)(cr - elem - 1) : n - 1;
            if (elem[0] == '!') { /* RESP3 blob error: !<len>\r\n<text>\r\n */
                *err = cr ? cr + 2 : elem;
                *err_len = cr && (size_t)(cr + 2 - elem) < n ? n - (size_t)(cr + 2 - elem) - 2 : 0;
            }
            return 1;
        }
        elem += n;
    }
    return 0;
}

/* Every part's array elements in one array, part by part; -1 (nothing appended) when a part is not an array. */
static int merge_concat(const struct replies_part *parts, int nparts, struct bytebuf *out)
{
    long long total = 0;
    for (int k = 0; k < nparts; k++) {
        long long n = -1;
        const char *elem = resp_array_first(parts[k].reply, parts[k].len, &n);
        if (!elem || n < 0 || reply_length(parts[k].reply, parts[k].len) != parts[k].len) return -1;
        total += n;
    }
    add_header(out, '*', total);
    for (int k = 0; k < nparts; k++) {
        long long n;
        const char *elem = resp_array_first(parts[k].reply, parts[k].len, &n);
        bytebuf_add(out, elem, parts[k].len - (size_t)(elem - parts[k].reply));
    }
    return 0;
}

/* Arrays of integers, element by element: 1 where every part has 1; -1 (nothing appended) when a part
 * is not such an array of the first's length. */
static int merge_and(const struct replies_part *parts, int nparts, struct bytebuf *out)
{
    long long n0 = -1;
    if (!resp_array_first(parts[0].reply, parts[0].len, &n0) || n0 < 0) return -1;
    const char *cur[REPLIES_MAX_PARTS];
    for (int k = 0; k < nparts; k++) {
        long long n = -1;
        cur[k] = resp_array_first(parts[k].reply, parts[k].len, &n);
        if (!cur[k] || n != n0) return -1;
    }
    size_t start = out->len;
    add_header(out, '*', n0);
    for (long long i = 0; i < n0; i++) {
        long long all = 1;
        for (int k = 0; k < nparts; k++) {
            const char *end = parts[k].reply + parts[k].len;
            size_t n = reply_length(cur[k], (size_t)(end - cur[k]));
            long long v = 0;
            if (n < 4 || cur[k][0] != ':' || resp_parse_ll(cur[k] + 1, n - 3, &v) != 0) {
                out->len = start;
                return -1;
            }
            if (v != 1) all = 0;
            cur[k] += n;
        }
        add_header(out, ':', all);
    }
    return 0;
}

int replies_merge(enum replies_merge_kind kind, const struct replies_part *parts, int nparts, const int16_t *key_part,
                  size_t argc, struct bytebuf *out)
{
    assert(nparts > 0);
    /* any failed part: the client gets that error, never a silent partial result */
    for (int k = 0; k < nparts; k++) {
        assert(parts[k].reply && parts[k].len > 0);                 /* every part holds a framed reply or its error */
        if (parts[k].reply[0] == '-' || parts[k].reply[0] == '!') { /* RESP3's blob error too */
            bytebuf_add(out, parts[k].reply, parts[k].len);
            return 0;
        }
    }
    if (kind == REPLIES_MERGE_SUM) {
        long long sum = 0;
        for (int k = 0; k < nparts; k++) {
            long long v = 0;
            if (parts[k].reply[0] == ':' && parts[k].len > 3)
                (void)resp_parse_ll(parts[k].reply + 1, parts[k].len - 3, &v);
            sum += v;
        }
        add_header(out, ':', sum);
        return 0;
    }
    if (kind == REPLIES_MERGE_CONCAT) return merge_concat(parts, nparts, out);
    if (kind == REPLIES_MERGE_SAME) {
        for (int k = 1; k < nparts; k++)
            if (parts[k].len != parts[0].len || memcmp(parts[k].reply, parts[0].reply, parts[0].len) != 0) {
                bytebuf_add(out, STR_AND_LEN("-ERR the primaries of the cluster answered differently\r\n"));
                return 0;
            }
        bytebuf_add(out, parts[0].reply, parts[0].len);
        return 0;
    }
    if (kind == REPLIES_MERGE_AND) return merge_and(parts, nparts, out);
    static _Thread_local const char *cursor[REPLIES_MAX_PARTS], *end[REPLIES_MAX_PARTS];
    static _Thread_local int part_of[REPLIES_MAX_PARTS];
    assert(nparts <= REPLIES_MAX_PARTS);
    for (int i = 0; i < REPLIES_MAX_PARTS; i++) part_of[i] = -1;
    for (int k = 0; k < nparts; k++) {
        long long n = 0;
        assert(parts[k].instance >= 0 && parts[k].instance < REPLIES_MAX_PARTS);
        cursor[k] = resp_array_first(parts[k].reply, parts[k].len, &n);
        end[k] = parts[k].reply + parts[k].len;
        part_of[parts[k].instance] = k;
    }
    size_t start = out->len;
    add_header(out, '*', (long long)(argc - 1));
    for (size_t i = 1; i < argc; i++) {
        int inst = key_part[i];
        int k = inst >= 0 && inst < REPLIES_MAX_PARTS ? part_of[inst] : -1;
        size_t n = k >= 0 && cursor[k] ? reply_length(cursor[k], (size_t)(end[k] - cursor[k])) : 0;
        if (n == 0) {
            out->len = start;
            return -1;
        }
        bytebuf_add(out, cursor[k], n);
        cursor[k] += n;
    }
    return 0;
}

/* SCAN's reply: its cursor (digits at *digits, n of them) and where the keys' array starts; -1 when not that shape. */
static int scan_reply_split(const char *reply, size_t len, uint64_t *cursor, size_t *keys_at)
{
    long long count = 0, blen = -1;
    const char *elem = resp_array_first(reply, len, &count);
    if (!elem || count != 2) return -1;
    const char *end = reply + len, *crlf = memchr(elem, '\r', (size_t)(end - elem));
    if (elem[0] != '$' || !crlf || resp_parse_ll(elem + 1, (size_t)(crlf - elem - 1), &blen) != 0 || blen <= 0 ||
        blen > 20 || end - (crlf + 2) < blen + 2)
        return -1;
    const char *digits = crlf + 2;
    uint64_t v = 0;
    for (long long i = 0; i < blen; i++) {
        unsigned d = (unsigned)(digits[i] - '0');
        if (d > 9 || v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    const char *keys = digits + blen + 2;
    if (reply_length(keys, (size_t)(end - keys)) != (size_t)(end - keys)) return -1;
    *cursor = v;
    *keys_at = (size_t)(keys - reply);
    return 0;
}

int replies_scan_cursor(const char *reply, size_t len, uint64_t *cursor)
{
    size_t keys_at;
    return scan_reply_split(reply, len, cursor, &keys_at);
}

int replies_scan_with_cursor(const char *reply, size_t len, uint64_t cursor, struct bytebuf *out)
{
    uint64_t old;
    size_t keys_at;
    if (scan_reply_split(reply, len, &old, &keys_at) != 0) return -1;
    char digits[24];
    int n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)cursor);
    bytebuf_add(out, STR_AND_LEN("*2\r\n"));
    bytebuf_add_bulk(out, digits, (size_t)n);
    bytebuf_add(out, reply + keys_at, len - keys_at);
    return 0;
}

void replies_verbatim(const char *reply, size_t len, struct bytebuf *out)
{
    const char *crlf = len > 3 && reply[0] == '$' ? memchr(reply, '\r', len) : NULL;
    long long n = -1;
    if (!crlf || resp_parse_ll(reply + 1, (size_t)(crlf - reply - 1), &n) != 0 || n < 0 ||
        (size_t)(crlf - reply) + 2 + (size_t)n + 2 != len) {
        bytebuf_add(out, reply, len);
        return;
    }
    add_header(out, '=', n + 4);
    bytebuf_add(out, STR_AND_LEN("txt:"));
    bytebuf_add(out, crlf + 2, (size_t)n + 2);
}

size_t replies_error(char *buf, size_t size, const char *text)
{
    assert(size >= 4);
    size_t n = strlen(text);
    if (n > size - 4) n = size - 4;
    buf[0] = '-';
    memcpy(buf + 1, text, n);
    buf[1 + n] = '\r';
    buf[2 + n] = '\n';
    buf[3 + n] = '\0';
    return n + 3;
}

void replies_unavailable(char *buf, size_t size, const char *instance_name)
{
    snprintf(buf, size, "UNAVAILABLE instance '%s' is unreachable", instance_name);
}

void replies_unavailable_why(char *buf, size_t size, const char *instance_name, const char *why)
{
    if (!why) {
        replies_unavailable(buf, size, instance_name);
        return;
    }
    snprintf(buf, size, "UNAVAILABLE instance '%s' is unreachable (%s)", instance_name, why);
}

void replies_timed_out(char *buf, size_t size, const char *instance_name)
{
    snprintf(buf, size, "UNAVAILABLE instance '%s' timed out (the command may have run)", instance_name);
}
