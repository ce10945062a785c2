/* test_resp.c: Check tests for the RESP request parser and reply framer, every input fed whole, byte by byte and in random splits. */
#include "resp.h"

#include <check.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Harness: a feed schedule turns an input into a transcript string, one token per result:
 *   D<i|m> h<header_len> f<frame_len> [arg|arg]   a parsed frame (i = inline, m = multibulk)
 *   E<error text>                                  RESP_ERROR (feeding stops)
 *   M                                              input ended inside a frame (or at its end)
 * Every test states the transcript once; check_req() demands it from every schedule.
 * ------------------------------------------------------------------------------------------- */

enum feed_mode { FEED_WHOLE, FEED_BYTES, FEED_RANDOM };

struct text {
    char *s;
    size_t len, cap;
};

static void text_add(struct text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        ck_assert_ptr_nonnull(t->s);
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static void text_printf(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_printf(struct text *t, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    text_add(t, tmp, (size_t)n);
}

/* Printable bytes as they are; '\\', '|', ']' and the rest as \xHH. */
static void text_escaped(struct text *t, const char *s, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '|' && c != ']') {
            text_add(t, (const char *)&c, 1);
        } else {
            char hex[8];
            snprintf(hex, sizeof(hex), "\\x%02x", c);
            text_add(t, hex, 4);
        }
    }
}

static size_t rand_next(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (*seed >> 16) & 0x7fff;
}

/* Next amount of input to make visible after `avail` bytes. */
static size_t next_avail(enum feed_mode mode, size_t avail, size_t n, unsigned *seed)
{
    if (mode == FEED_WHOLE) return n;
    if (mode == FEED_BYTES) return avail + 1;
    avail += 1 + rand_next(seed) % (n / 64 > 7 ? n / 64 : 7); /* ~64 steps for big inputs */
    return avail > n ? n : avail;
}

struct limits {
    size_t max_args;     /* 0: default */
    long long max_bulk;  /* 0: default */
    int unauthenticated; /* Redis's pre-AUTH limits */
};

/* Parse every frame of in[0..n) under one feed schedule; returns the transcript (malloc'd). */
static char *run_parser(const char *in, size_t n, enum feed_mode mode, unsigned seed, const struct limits *lim)
{
    struct resp_parser p;
    struct text t = {0};
    size_t off = 0, avail = next_avail(mode, 0, n, &seed);
    size_t i;

    resp_parser_init(&p);
    if (lim && lim->max_args) p.max_args = lim->max_args;
    if (lim && lim->max_bulk) p.max_bulk = lim->max_bulk;
    if (lim) p.unauthenticated = lim->unauthenticated;
    text_add(&t, "", 0);
    for (;;) {
        /* random mode hands the parser a fresh copy each call: the buffer may move */
        char *copy = NULL;
        const char *buf = in + off;
        enum resp_status st;
        if (mode == FEED_RANDOM) {
            copy = malloc(avail - off + 1);
            ck_assert_ptr_nonnull(copy);
            memcpy(copy, in + off, avail - off);
            buf = copy;
        }
        st = resp_parse_request(&p, buf, avail - off);
        if (st == RESP_DONE) {
            ck_assert_uint_le(p.frame_len, avail - off);
            ck_assert_uint_gt(p.frame_len, 0);
            text_add(&t, p.is_inline ? "Di" : "Dm", 2);
            text_printf(&t, " h%zu f%zu [", p.header_len, p.frame_len);
            for (i = 0; i < p.argc; i++) {
                if (!p.is_inline) ck_assert_uint_le(p.args[i].off + p.args[i].len, p.frame_len);
                if (i > 0) text_add(&t, "|", 1);
                text_escaped(&t, resp_arg_ptr(&p, buf, i), p.args[i].len);
            }
            text_add(&t, "] ", 2);
            off += p.frame_len;
        } else if (st == RESP_ERROR) {
            text_add(&t, "E", 1);
            text_add(&t, p.error, strlen(p.error));
            free(copy);
            break;
        } else {
            ck_assert_int_eq(st, RESP_NEED_MORE);
            if (avail == n) {
                if (off < n) text_add(&t, "M", 1);
                free(copy);
                break;
            }
            avail = next_avail(mode, avail, n, &seed);
        }
        free(copy);
    }
    resp_parser_free(&p);
    if (t.len > 0 && t.s[t.len - 1] == ' ') t.s[--t.len] = '\0';
    return t.s;
}

/* Same transcript whole, byte by byte and in 25 random splits; equal to `want`. */
static void check_req_lim(const char *in, size_t n, const char *want, const struct limits *lim)
{
    char *got = run_parser(in, n, FEED_WHOLE, 0, lim);
    char *bytes = run_parser(in, n, FEED_BYTES, 0, lim);
    unsigned seed;

    ck_assert_str_eq(got, want);
    ck_assert_str_eq(bytes, want);
    for (seed = 1; seed <= 25; seed++) {
        char *r = run_parser(in, n, FEED_RANDOM, seed, lim);
        ck_assert_msg(strcmp(r, want) == 0, "seed %u: got '%s' want '%s'", seed, r, want);
        free(r);
    }
    free(got);
    free(bytes);
}

#define check_req(lit, want) check_req_lim((lit), sizeof(lit) - 1, (want), NULL)

/* ---------------------------------------------------------------------------------------------
 * Pre-AUTH limits (Redis 7.0: at most 10 arguments, bulks of at most 16 KiB)
 * ------------------------------------------------------------------------------------------- */

START_TEST(test_array_first)
{
    long long n = 0;
    static const char exec[] = "*2\r\n:1\r\n$1\r\nx\r\n";
    const char *first = resp_array_first(exec, sizeof(exec) - 1, &n);
    ck_assert_ptr_eq(first, exec + 4);
    ck_assert_int_eq(n, 2);
    ck_assert_ptr_nonnull(resp_array_first("*-1\r\n", 5, &n));
    ck_assert_int_eq(n, -1);
    ck_assert_ptr_null(resp_array_first("+OK\r\n", 5, &n));
    ck_assert_ptr_null(resp_array_first("-EXECABORT x\r\n", 15, &n));
    ck_assert_ptr_null(resp_array_first("*x\r\n", 5, &n));
}
END_TEST

START_TEST(test_unauthenticated_limits)
{
    static const struct limits unauth = {.unauthenticated = 1};
    check_req_lim("*10\r\n", 5, "M", &unauth);
    check_req_lim("*11\r\n", 5, "EProtocol error: unauthenticated multibulk length", &unauth);
    check_req_lim("*abc\r\n", 6, "EProtocol error: invalid multibulk length", &unauth);
    check_req_lim("*1\r\n$16384\r\n", 13, "M", &unauth);
    check_req_lim("*1\r\n$16385\r\n", 13, "EProtocol error: unauthenticated bulk length", &unauth);
    check_req_lim("*11\r\n", 5, "M", NULL); /* authenticated: Redis's ordinary limits */
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Multibulk
 * ------------------------------------------------------------------------------------------- */

START_TEST(test_multibulk_basic)
{
    check_req("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n", "Dm h4 f31 [SET|k|value]");
    check_req("*1\r\n$4\r\nPING\r\n", "Dm h4 f14 [PING]");
    check_req("*2\r\n$0\r\n\r\n$3\r\nabc\r\n", "Dm h4 f19 [|abc]");
}
END_TEST

START_TEST(test_multibulk_offsets)
{
    const char in[] = "*2\r\n$3\r\nGET\r\n$10\r\nabcdefghij\r\n";
    struct resp_parser p;

    resp_parser_init(&p);
    ck_assert_int_eq(resp_parse_request(&p, in, sizeof(in) - 1), RESP_DONE);
    ck_assert_int_eq(p.is_inline, 0);
    ck_assert_uint_eq(p.argc, 2);
    ck_assert_uint_eq(p.header_len, 4);
    ck_assert_uint_eq(p.frame_len, sizeof(in) - 1);
    ck_assert_uint_eq(p.args[0].off, 8);
    ck_assert_uint_eq(p.args[0].len, 3);
    ck_assert_uint_eq(p.args[1].off, 18);
    ck_assert_uint_eq(p.args[1].len, 10);
    ck_assert(memcmp(resp_arg_ptr(&p, in, 1), "abcdefghij", 10) == 0);
    resp_parser_free(&p);
}
END_TEST

START_TEST(test_multibulk_pipelined)
{
    check_req("*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nx\r\nPING\r\n*1\r\n$4\r\nQUIT\r\n",
              "Dm h4 f14 [PING] Dm h4 f20 [GET|x] Di h0 f6 [PING] Dm h4 f14 [QUIT]");
}
END_TEST

START_TEST(test_multibulk_binary_safe)
{
    static const char in[] = "*2\r\n$3\r\nSET\r\n$6\r\na\r\n\0b\n\r\n";
    check_req_lim(in, sizeof(in) - 1, "Dm h4 f25 [SET|a\\x0d\\x0a\\x00b\\x0a]", NULL);
}
END_TEST

START_TEST(test_multibulk_incomplete)
{
    check_req("*", "M");
    check_req("*3", "M");
    check_req("*3\r", "M");
    check_req("*3\r\n", "M");
    check_req("*3\r\n$3\r\nSE", "M");
    check_req("*1\r\n$3\r\nSET\r", "M");
    check_req("*1\r\n$3\r\nSET", "M");
    check_req("*1\r\nx", "M"); /* Redis waits for the line end before judging it */
}
END_TEST

START_TEST(test_multibulk_empty)
{
    check_req("*0\r\n", "Dm h4 f4 []");
    check_req("*-1\r\n", "Dm h5 f5 []");
    check_req("*-10\r\n*1\r\n$4\r\nPING\r\n", "Dm h6 f6 [] Dm h4 f14 [PING]");
}
END_TEST

/* Redis skips the two bytes after a line's CR and after a payload without looking at them. */
START_TEST(test_multibulk_crlf_not_checked_like_redis)
{
    check_req("*1\rX$3\rYabcZW", "Dm h4 f13 [abc]");
}
END_TEST

START_TEST(test_error_invalid_multibulk_length)
{
    check_req("*x\r\n", "EProtocol error: invalid multibulk length");
    check_req("*\r\n", "EProtocol error: invalid multibulk length");
    check_req("*+1\r\n", "EProtocol error: invalid multibulk length");
    check_req("*01\r\n", "EProtocol error: invalid multibulk length");
    check_req("*1 \r\n", "EProtocol error: invalid multibulk length");
    check_req("*20000000\r\n", "EProtocol error: invalid multibulk length");
    check_req("*99999999999999999999\r\n", "EProtocol error: invalid multibulk length");
    check_req("*1048576\r\n", "M"); /* RESP_MAX_MULTIBULK itself is fine */
    check_req("*1048577\r\n", "EProtocol error: invalid multibulk length");
}
END_TEST

START_TEST(test_error_invalid_bulk_length)
{
    check_req("*1\r\n$-1\r\n", "EProtocol error: invalid bulk length");
    check_req("*1\r\n$x\r\n", "EProtocol error: invalid bulk length");
    check_req("*1\r\n$\r\n", "EProtocol error: invalid bulk length");
    check_req("*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$blabla\r\n", "EProtocol error: invalid bulk length");
    check_req("*1\r\n$536870912\r\n", "M"); /* 512 MB: Redis's default proto-max-bulk-len */
    check_req("*1\r\n$536870913\r\n", "EProtocol error: invalid bulk length");
}
END_TEST

START_TEST(test_error_expected_dollar)
{
    check_req("*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n", "EProtocol error: expected '$', got 'f'");
    check_req("*1\r\n:1\r\n", "EProtocol error: expected '$', got ':'");
    /* as Redis formats it: CR and LF become spaces, a NUL ends the text */
    check_req("*1\r\n\r\n", "EProtocol error: expected '$', got ' '");
    static const char nul[] = "*1\r\n\0\r\n";
    check_req_lim(nul, sizeof(nul) - 1, "EProtocol error: expected '$', got '", NULL);
}
END_TEST

static char *repeat(const char *head, char c, size_t count, const char *tail, size_t *n)
{
    size_t h = strlen(head), tl = strlen(tail);
    char *s = malloc(h + count + tl + 1);
    ck_assert_ptr_nonnull(s);
    memcpy(s, head, h);
    memset(s + h, c, count);
    memcpy(s + h + count, tail, tl + 1);
    *n = h + count + tl;
    return s;
}

START_TEST(test_error_too_big_count_strings)
{
    size_t n;
    char *s;

    /* "*" + 65535 digits is 65536 bytes: still waiting; one more byte is too big */
    s = repeat("*", '1', RESP_MAX_INLINE - 1, "", &n);
    check_req_lim(s, n, "M", NULL);
    free(s);
    s = repeat("*", '1', RESP_MAX_INLINE, "", &n);
    check_req_lim(s, n, "EProtocol error: too big mbulk count string", NULL);
    free(s);
    s = repeat("*1\r\n$", '1', RESP_MAX_INLINE, "", &n);
    check_req_lim(s, n, "EProtocol error: too big bulk count string", NULL);
    free(s);
    s = repeat("*1\r\n$", '1', RESP_MAX_INLINE - 1, "", &n);
    check_req_lim(s, n, "M", NULL);
    free(s);
}
END_TEST

START_TEST(test_limits_max_args_max_bulk)
{
    struct limits lim = {.max_args = 2, .max_bulk = 5};

    check_req_lim("*2\r\n$5\r\nhello\r\n$0\r\n\r\n", 21, "Dm h4 f21 [hello|]", &lim);
    check_req_lim("*3\r\n", 4, "EProtocol error: invalid multibulk length", &lim);
    check_req_lim("*1\r\n$6\r\n", 8, "EProtocol error: invalid bulk length", &lim);
}
END_TEST

START_TEST(test_reset_after_error)
{
    struct resp_parser p;

    resp_parser_init(&p);
    ck_assert_int_eq(resp_parse_request(&p, "*x\r\n", 4), RESP_ERROR);
    ck_assert_int_eq(resp_parse_request(&p, "*x\r\n", 4), RESP_ERROR);
    resp_parser_reset(&p);
    ck_assert_int_eq(resp_parse_request(&p, "*1\r\n$1\r\na\r\n", 11), RESP_DONE);
    ck_assert_uint_eq(p.argc, 1);
    resp_parser_free(&p);
}
END_TEST

/* Large frames, byte by byte, must finish quickly (the parser resumes, never rescans). */
START_TEST(test_bytewise_is_linear)
{
    size_t n, i, off = 0, frames = 0, errors = 0;
    char *s = repeat("*2\r\n$3\r\nSET\r\n$2000000\r\n", 'v', 2000000, "\r\n", &n);
    struct resp_parser p;

    /* plain ifs in the loop: a Check assertion per byte would dominate the run time */
    resp_parser_init(&p);
    for (i = 1; i <= n; i++) {
        enum resp_status st = resp_parse_request(&p, s + off, i - off);
        errors += st == RESP_ERROR;
        if (st == RESP_DONE) {
            off += p.frame_len;
            frames++;
        }
    }
    ck_assert_uint_eq(errors, 0);
    ck_assert_uint_eq(frames, 1);
    ck_assert_uint_eq(off, n);
    free(s);
    resp_parser_free(&p);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Inline
 * ------------------------------------------------------------------------------------------- */

START_TEST(test_inline_basic)
{
    check_req("PING\r\n", "Di h0 f6 [PING]");
    check_req("PING\n", "Di h0 f5 [PING]");
    check_req("  SET  k \t v  \r\n", "Di h0 f16 [SET|k|v]");
    check_req("GET k", "M");
    check_req("GET k\r", "M");
    check_req("a\r\r\n", "Di h0 f4 [a]");
}
END_TEST

START_TEST(test_inline_blank)
{
    check_req("\r\n", "Di h0 f2 []");
    check_req("\n", "Di h0 f1 []");
    check_req("   \r\n\nPING\n", "Di h0 f5 [] Di h0 f1 [] Di h0 f5 [PING]");
}
END_TEST

START_TEST(test_inline_quotes)
{
    check_req("SET \"a b\" 'c d'\r\n", "Di h0 f17 [SET|a b|c d]");
    check_req("SET k \"\\x41\\x4a\\n\\r\\t\\b\\a\\\\\\\"\\q\"\n",
              "Di h0 f33 [SET|k|AJ\\x0a\\x0d\\x09\\x08\\x07\\x5c\"q]");
    check_req("SET k 'it\\'s \\n'\n", "Di h0 f17 [SET|k|it's \\x5cn]");
    check_req("SET k \"\\x4\"\n", "Di h0 f12 [SET|k|x4]");
    check_req("SET k \"\"\n", "Di h0 f9 [SET|k|]");
    check_req("a\"b c\"d\n", "EProtocol error: unbalanced quotes in request");
    check_req("a\"b c\" d\n", "Di h0 f9 [ab c|d]");
    check_req("a\"b\x0b\" \n", "Di h0 f7 [ab\\x0b]");
}
END_TEST

START_TEST(test_inline_unbalanced)
{
    check_req("SET \"k\r\n", "EProtocol error: unbalanced quotes in request");
    check_req("SET 'k\n", "EProtocol error: unbalanced quotes in request");
    check_req("SET \"k\"x\n", "EProtocol error: unbalanced quotes in request");
    check_req("SET 'k'x\n", "EProtocol error: unbalanced quotes in request");
    check_req("SET \"k\\\"\n", "EProtocol error: unbalanced quotes in request");
}
END_TEST

START_TEST(test_inline_args_in_inline_buf)
{
    struct resp_parser p;
    const char in[] = "SET \"a\\x00b\" v\r\n";

    resp_parser_init(&p);
    ck_assert_int_eq(resp_parse_request(&p, in, sizeof(in) - 1), RESP_DONE);
    ck_assert_int_eq(p.is_inline, 1);
    ck_assert_uint_eq(p.header_len, 0);
    ck_assert_uint_eq(p.argc, 3);
    ck_assert_uint_eq(p.args[1].len, 3);
    ck_assert(memcmp(resp_arg_ptr(&p, in, 1), "a\0b", 3) == 0);
    ck_assert(memcmp(p.inline_buf + p.args[2].off, "v", 1) == 0);
    resp_parser_free(&p);
}
END_TEST

START_TEST(test_error_too_big_inline)
{
    size_t n;
    char *s;

    s = repeat("", 'a', RESP_MAX_INLINE, "", &n);
    check_req_lim(s, n, "M", NULL);
    free(s);
    s = repeat("", 'a', RESP_MAX_INLINE + 1, "", &n);
    check_req_lim(s, n, "EProtocol error: too big inline request", NULL);
    free(s);
    /* the newline may be byte 65537: the line itself is within the limit */
    s = repeat("", ' ', RESP_MAX_INLINE, "\n", &n);
    check_req_lim(s, n, "Di h0 f65537 []", NULL);
    free(s);
    s = repeat("", ' ', RESP_MAX_INLINE + 1, "\n", &n);
    check_req_lim(s, n, "EProtocol error: too big inline request", NULL);
    free(s);
}
END_TEST

START_TEST(test_buffers_reused_across_frames)
{
    struct resp_parser p;
    struct resp_arg *args;
    char *ibuf;
    int i;

    resp_parser_init(&p);
    ck_assert_int_eq(resp_parse_request(&p, "a b c d\n", 8), RESP_DONE);
    ck_assert_int_eq(resp_parse_request(&p, "*2\r\n$1\r\na\r\n$1\r\nb\r\n", 18), RESP_DONE);
    args = p.args;
    ibuf = p.inline_buf;
    for (i = 0; i < 1000; i++) {
        ck_assert_int_eq(resp_parse_request(&p, "x y\n", 4), RESP_DONE);
        ck_assert_int_eq(resp_parse_request(&p, "*1\r\n$1\r\na\r\n", 11), RESP_DONE);
    }
    ck_assert_ptr_eq(args, p.args);
    ck_assert_ptr_eq(ibuf, p.inline_buf);
    resp_parser_free(&p);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * resp_parse_ll
 * ------------------------------------------------------------------------------------------- */

START_TEST(test_parse_ll)
{
    static const struct {
        const char *s;
        int ok;
        long long v;
    } cases[] = {
        {"0", 1, 0},
        {"1", 1, 1},
        {"-1", 1, -1},
        {"1234567890", 1, 1234567890},
        {"9223372036854775807", 1, LLONG_MAX},
        {"-9223372036854775808", 1, LLONG_MIN},
        {"9223372036854775808", 0, 0},
        {"-9223372036854775809", 0, 0},
        {"18446744073709551616", 0, 0},
        {"99999999999999999999999", 0, 0},
        {"", 0, 0},
        {"-", 0, 0},
        {"+1", 0, 0},
        {" 1", 0, 0},
        {"1 ", 0, 0},
        {"01", 0, 0},
        {"-0", 0, 0},
        {"00", 0, 0},
        {"1a", 0, 0},
        {"0x1", 0, 0},
        {"--1", 0, 0},
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        long long v = 42;
        int r = resp_parse_ll(cases[i].s, strlen(cases[i].s), &v);
        ck_assert_msg((r == 0) == cases[i].ok, "'%s'", cases[i].s);
        if (cases[i].ok) ck_assert_msg(v == cases[i].v, "'%s' gave %lld", cases[i].s, v);
    }
    /* exactly len bytes are read */
    {
        long long v;
        ck_assert_int_eq(resp_parse_ll("123456", 3, &v), 0);
        ck_assert_int_eq(v, 123);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Reply framer: transcript "L<len> ... " then "M" (incomplete tail) or "X" (malformed).
 * ------------------------------------------------------------------------------------------- */

static char *run_scanner(const char *in, size_t n, enum feed_mode mode, unsigned seed, char *firsts, size_t firsts_cap)
{
    struct resp_scanner s;
    struct text t = {0};
    size_t off = 0, avail = next_avail(mode, 0, n, &seed), nf = 0;

    resp_scanner_reset(&s);
    text_add(&t, "", 0);
    for (;;) {
        long long r = resp_scan_reply(&s, in + off, avail - off);
        if (r > 0) {
            ck_assert_uint_le((size_t)r, avail - off);
            ck_assert_int_eq(s.first, in[off]);
            if (nf + 1 < firsts_cap) firsts[nf++] = s.first;
            text_printf(&t, "L%zu ", (size_t)r);
            off += (size_t)r;
        } else if (r < 0) {
            text_add(&t, "X", 1);
            break;
        } else if (avail == n) {
            if (off < n) text_add(&t, "M", 1);
            break;
        } else {
            avail = next_avail(mode, avail, n, &seed);
        }
    }
    if (firsts) firsts[nf] = '\0';
    if (t.len > 0 && t.s[t.len - 1] == ' ') t.s[--t.len] = '\0';
    return t.s;
}

static void check_reply_n(const char *in, size_t n, const char *want)
{
    char *whole = run_scanner(in, n, FEED_WHOLE, 0, NULL, 0);
    char *bytes = run_scanner(in, n, FEED_BYTES, 0, NULL, 0);
    unsigned seed;

    ck_assert_str_eq(whole, want);
    ck_assert_str_eq(bytes, want);
    for (seed = 1; seed <= 25; seed++) {
        char *r = run_scanner(in, n, FEED_RANDOM, seed, NULL, 0);
        ck_assert_msg(strcmp(r, want) == 0, "seed %u: got '%s' want '%s'", seed, r, want);
        free(r);
    }
    free(whole);
    free(bytes);
}

#define check_reply(lit, want) check_reply_n((lit), sizeof(lit) - 1, (want))

START_TEST(test_scan_simple_types)
{
    check_reply("+OK\r\n", "L5");
    check_reply("-ERR unknown command 'FOO'\r\n", "L28");
    check_reply("-WRONGTYPE Operation against a key\r\n", "L36");
    check_reply(":0\r\n", "L4");
    check_reply(":-123\r\n", "L7");
    check_reply("+a\rb\r\n", "L6"); /* a lone CR is content */
    check_reply("+\r\n", "L3");
}
END_TEST

START_TEST(test_scan_bulk_and_null)
{
    check_reply("$5\r\nhello\r\n", "L11");
    check_reply("$0\r\n\r\n", "L6");
    check_reply("$-1\r\n", "L5");
    check_reply("*-1\r\n", "L5");
    check_reply("*0\r\n", "L4");
    static const char bin[] = "$6\r\n\r\n\0*\r\n\r\n";
    check_reply_n(bin, sizeof(bin) - 1, "L12");
}
END_TEST

START_TEST(test_scan_arrays)
{
    check_reply("*2\r\n$3\r\nfoo\r\n$-1\r\n", "L18");
    check_reply("*3\r\n:1\r\n*2\r\n+a\r\n*0\r\n$1\r\nx\r\n", "L27");
    check_reply("*2\r\n*1\r\n*1\r\n:1\r\n:2\r\n", "L20");
    check_reply("*1\r\n*-1\r\n", "L9");
}
END_TEST

START_TEST(test_scan_exec_with_errors)
{
    check_reply("*3\r\n+OK\r\n-WRONGTYPE Operation against a key holding the wrong kind of "
                "value\r\n:1\r\n",
                "L81");
    check_reply("-EXECABORT Transaction discarded because of previous errors.\r\n", "L62");
}
END_TEST

START_TEST(test_scan_back_to_back)
{
    char firsts[16];
    const char in[] = "+OK\r\n$3\r\nabc\r\n*2\r\n:1\r\n-ERR x\r\n:7\r\n$-1\r\n+QUEUED\r\n*1";
    char *t;

    check_reply(in, "L5 L9 L16 L4 L5 L9 M");
    t = run_scanner(in, sizeof(in) - 1, FEED_BYTES, 0, firsts, sizeof(firsts));
    ck_assert_str_eq(firsts, "+$*:$+");
    free(t);
}
END_TEST

START_TEST(test_scan_incomplete)
{
    check_reply("+OK", "M");
    check_reply("+OK\r", "M");
    check_reply("$5\r\nhel", "M");
    check_reply("$5\r\nhello\r", "M");
    check_reply("*2\r\n:1\r\n", "M");
    check_reply("*2\r\n*1\r\n:1\r\n", "M");
}
END_TEST

START_TEST(test_scan_malformed)
{
    check_reply("?\r\n", "X");
    check_reply("\r\n", "X");
    check_reply(":abc\r\n", "X");
    check_reply(":\r\n", "X");
    check_reply("$x\r\n", "X");
    check_reply("$-2\r\n", "X");
    check_reply("*-2\r\n", "X");
    check_reply("$3\r\nabcde", "X"); /* payload not followed by CRLF */
    check_reply("*1\r\n!\r\n", "X");
    check_reply("+OK\r\n@\r\n", "L5 X");
    check_reply("$99999999999999999999\r\n", "X");
}
END_TEST

/* A reply nested 1000 (and 100000) deep is legal (Redis's Lua replies nest that far):
 * it frames whole and byte by byte, never as malformed, and the element after it frames too. */
START_TEST(test_issue10_item11_deeply_nested_reply_frames)
{
    static const int depths[] = {65, 1000, 100000};
    for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
        struct text t = {0};
        char want[64];
        for (int i = 0; i < depths[d]; i++) text_add(&t, i % 3 == 2 ? "*2\r\n:7\r\n" : "*1\r\n", i % 3 == 2 ? 8 : 4);
        text_add(&t, "$3\r\nend\r\n", 9);
        size_t one = t.len;
        text_add(&t, "+OK\r\n", 5);
        snprintf(want, sizeof(want), "L%zu L5", one);
        check_reply_n(t.s, t.len, want);
        /* one byte short of the end: incomplete, not malformed */
        struct resp_scanner sc;
        resp_scanner_reset(&sc);
        ck_assert_int_eq(resp_scan_reply(&sc, t.s, one - 1), 0);
        ck_assert_int_eq(resp_scan_reply(&sc, t.s, one), (long long)one);
        free(t.s);
    }
    /* a count no reply can have still fails cleanly */
    check_reply("*9223372036854775807\r\n*9223372036854775807\r\n", "X");
}
END_TEST

/* resp_scan_discard: a reply dropped as it comes, fed in small pieces, still ends where
 * it ends (counted from the last discard), and what follows frames normally. */
START_TEST(test_issue10_item12_scan_discard_frames_without_keeping)
{
    struct text t = {0};
    text_add(&t, "*3\r\n$100000\r\n", 13);
    for (int i = 0; i < 100000; i++) text_add(&t, "x", 1);
    text_add(&t, "\r\n*2\r\n:1\r\n+ok\r\n:42\r\n", 20);
    size_t reply_len = t.len;
    text_add(&t, "+NEXT\r\n", 7);
    for (size_t step = 1; step <= 4096; step *= 8) {
        struct resp_scanner sc;
        resp_scanner_reset(&sc);
        size_t start = 0, avail = 0, kept_max = 0, end = 0;
        while (!end) {
            avail = avail + step > t.len ? t.len : avail + step;
            long long r = resp_scan_reply(&sc, t.s + start, avail - start);
            ck_assert_int_ge(r, 0);
            if (r > 0) {
                end = start + (size_t)r;
                break;
            }
            start += resp_scan_discard(&sc, avail - start);
            if (avail - start > kept_max) kept_max = avail - start;
        }
        ck_assert_uint_eq(end, reply_len);
        ck_assert_msg(kept_max < 64, "step %zu: %zu bytes kept", step, kept_max);
        resp_scanner_reset(&sc);
        ck_assert_int_eq(resp_scan_reply(&sc, t.s + end, t.len - end), 7);
    }
    free(t.s);
}
END_TEST

START_TEST(test_scan_resp3_framing)
{
    check_reply("_\r\n", "L3");
    check_reply(",3.14\r\n", "L7");
    check_reply("#t\r\n", "L4");
    check_reply("(12345678901234567890\r\n", "L23");
    check_reply("!3\r\nerr\r\n", "L9");
    check_reply("=7\r\ntxt:abc\r\n", "L13");
    check_reply("%1\r\n+k\r\n:1\r\n", "L12");
    check_reply("~2\r\n:1\r\n:2\r\n", "L12");
    check_reply(">2\r\n+message\r\n$2\r\nhi\r\n", "L22");
}
END_TEST

/* RESP3 attributes: "|N" and N key/value pairs frame together with the element they annotate
 * (as a reply, as an aggregate's element, nested); a reply is not done at the attribute. */
START_TEST(test_scan_resp3_attributes)
{
    check_reply("|1\r\n+ttl\r\n:3\r\n$2\r\nhi\r\n", "L22");
    check_reply("|0\r\n:7\r\n", "L8");
    check_reply("*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n", "L24");
    check_reply("|1\r\n+k\r\n|1\r\n+x\r\n+y\r\n:1\r\n%1\r\n+f\r\n,1.5\r\n", "L38");
    check_reply("|1\r\n+k\r\n:1\r\n:9\r\n", "L16");
    check_reply("|-1\r\n:1\r\n", "X");
    check_reply("|x\r\n:1\r\n", "X");
}
END_TEST

/* Every RESP3 shape Redis 7.0 sends a HELLO 3 client, as it sends them (bytes from a real server). */
START_TEST(test_scan_resp3_redis_replies)
{
    check_reply("%2\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n", "L36"); /* HGETALL */
    check_reply("*3\r\n$2\r\nv1\r\n_\r\n$2\r\nv2\r\n", "L23");                    /* HMGET with a null */
    check_reply("*1\r\n*2\r\n$1\r\nm\r\n,2.5\r\n", "L21");                        /* ZRANGE WITHSCORES */
    check_reply(">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n", "L31");            /* confirmation */
    check_reply("*1\r\n*10\r\n$3\r\nget\r\n:2\r\n~2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n~3\r\n"
                "+@read\r\n+@string\r\n+@fast\r\n~0\r\n~1\r\n%3\r\n$5\r\nflags\r\n~2\r\n+RO\r\n+access\r\n"
                "$12\r\nbegin_search\r\n%2\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n%1\r\n$5\r\nindex\r\n"
                ":1\r\n$9\r\nfind_keys\r\n%2\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n%3\r\n$7\r\nlastkey\r\n"
                ":0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n~0\r\n",
                "L307"); /* COMMAND INFO get */
    check_reply("%0\r\n~0\r\n", "L4 L4");
}
END_TEST

START_TEST(test_scan_zeroed_scanner)
{
    struct resp_scanner s;

    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(resp_scan_reply(&s, "$2\r\nab\r\n", 8), 8);
    ck_assert_int_eq(s.first, '$');
    ck_assert_int_eq(resp_scan_reply(&s, ":1\r\n", 4), 4);
    ck_assert_int_eq(s.first, ':');
}
END_TEST

START_TEST(test_scan_bytewise_is_linear)
{
    size_t n, i, done = 0, errors = 0;
    char *s = repeat("+", 'x', 4000000, "\r\n", &n);
    struct resp_scanner sc;

    resp_scanner_reset(&sc);
    for (i = 1; i <= n; i++) {
        long long r = resp_scan_reply(&sc, s, i);
        errors += r < 0;
        if (r > 0) done = (size_t)r;
    }
    ck_assert_uint_eq(errors, 0);
    ck_assert_uint_eq(done, n);
    free(s);
}
END_TEST

static Suite *resp_suite(void)
{
    Suite *s = suite_create("resp");
    TCase *req = tcase_create("request");
    TCase *inl = tcase_create("inline");
    TCase *ll = tcase_create("parse_ll");
    TCase *scan = tcase_create("scanner");

    tcase_set_timeout(req, 60);
    tcase_set_timeout(inl, 60);
    tcase_set_timeout(scan, 60);
    tcase_add_test(req, test_unauthenticated_limits);
    tcase_add_test(req, test_array_first);
    tcase_add_test(req, test_multibulk_basic);
    tcase_add_test(req, test_multibulk_offsets);
    tcase_add_test(req, test_multibulk_pipelined);
    tcase_add_test(req, test_multibulk_binary_safe);
    tcase_add_test(req, test_multibulk_incomplete);
    tcase_add_test(req, test_multibulk_empty);
    tcase_add_test(req, test_multibulk_crlf_not_checked_like_redis);
    tcase_add_test(req, test_error_invalid_multibulk_length);
    tcase_add_test(req, test_error_invalid_bulk_length);
    tcase_add_test(req, test_error_expected_dollar);
    tcase_add_test(req, test_error_too_big_count_strings);
    tcase_add_test(req, test_limits_max_args_max_bulk);
    tcase_add_test(req, test_reset_after_error);
    tcase_add_test(req, test_bytewise_is_linear);
    tcase_add_test(req, test_buffers_reused_across_frames);
    tcase_add_test(inl, test_inline_basic);
    tcase_add_test(inl, test_inline_blank);
    tcase_add_test(inl, test_inline_quotes);
    tcase_add_test(inl, test_inline_unbalanced);
    tcase_add_test(inl, test_inline_args_in_inline_buf);
    tcase_add_test(inl, test_error_too_big_inline);
    tcase_add_test(ll, test_parse_ll);
    tcase_add_test(scan, test_scan_simple_types);
    tcase_add_test(scan, test_scan_resp3_attributes);
    tcase_add_test(scan, test_scan_resp3_redis_replies);
    tcase_add_test(scan, test_scan_bulk_and_null);
    tcase_add_test(scan, test_scan_arrays);
    tcase_add_test(scan, test_scan_exec_with_errors);
    tcase_add_test(scan, test_scan_back_to_back);
    tcase_add_test(scan, test_scan_incomplete);
    tcase_add_test(scan, test_scan_malformed);
    tcase_add_test(scan, test_issue10_item11_deeply_nested_reply_frames);
    tcase_add_test(scan, test_scan_resp3_framing);
    tcase_add_test(scan, test_issue10_item12_scan_discard_frames_without_keeping);
    tcase_add_test(scan, test_scan_zeroed_scanner);
    tcase_add_test(scan, test_scan_bytewise_is_linear);
    suite_add_tcase(s, req);
    suite_add_tcase(s, inl);
    suite_add_tcase(s, ll);
    suite_add_tcase(s, scan);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(resp_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
