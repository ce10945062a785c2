/* fuzz_resp.c: libFuzzer target: the request parser and reply framer must agree with themselves whole vs split feeds. */
/*
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc tests/fuzz/fuzz_resp.c src/resp.c src/util.c
 * Each input is fed three ways: whole, split at a point chosen from the input, and (for
 * small inputs) byte by byte. The transcripts (every frame's fields, args and errors;
 * every reply length) must be identical. Split feeds hand over fresh heap copies, so
 * ASan catches any pointer kept into an old buffer.
 */
#include "resp.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct log {
    unsigned char *s;
    size_t len, cap;
};

static void log_add(struct log *l, const void *p, size_t n)
{
    if (l->len + n > l->cap) {
        l->cap = (l->len + n) * 2 + 64;
        l->s = realloc(l->s, l->cap);
        if (l->s == NULL) abort();
    }
    memcpy(l->s + l->len, p, n);
    l->len += n;
}

static void log_num(struct log *l, long long v)
{
    log_add(l, &v, sizeof(v));
}

/* Visible input sizes: split mode gives `split` bytes then all; byte mode one more each time. */
static size_t next_avail(int mode, size_t avail, size_t split, size_t n)
{
    if (mode == 0) return n;
    if (mode == 1) return avail < split ? split : n;
    return avail + 1 > n ? n : avail + 1;
}

static void run_parser(const uint8_t *in, size_t n, int mode, size_t split, size_t max_args, long long max_bulk,
                       struct log *out)
{
    struct resp_parser p;
    size_t off = 0, avail = next_avail(mode, 0, split, n), i;

    resp_parser_init(&p);
    if (max_args) p.max_args = max_args;
    if (max_bulk) p.max_bulk = max_bulk;
    for (;;) {
        size_t have = avail - off;
        char *copy = malloc(have + 1);
        enum resp_status st;

        if (copy == NULL) abort();
        memcpy(copy, in + off, have);
        st = resp_parse_request(&p, copy, have);
        log_num(out, st);
        if (st == RESP_DONE) {
            if (p.frame_len == 0 || p.frame_len > have || p.header_len > p.frame_len) abort();
            log_num(out, p.is_inline);
            log_num(out, (long long)p.argc);
            log_num(out, (long long)p.header_len);
            log_num(out, (long long)p.frame_len);
            for (i = 0; i < p.argc; i++) {
                if (!p.is_inline && p.args[i].off + p.args[i].len > p.frame_len) abort();
                if (p.is_inline && p.args[i].off + p.args[i].len > p.inline_cap) abort();
                log_num(out, (long long)p.args[i].len);
                log_add(out, resp_arg_ptr(&p, copy, i), p.args[i].len);
            }
            off += p.frame_len;
        } else if (st == RESP_ERROR) {
            log_add(out, p.error, strlen(p.error));
            free(copy);
            break;
        } else if (avail == n) {
            free(copy);
            break;
        } else {
            /* NEED_MORE is only recorded at the end of the input: drop it */
            out->len -= sizeof(long long);
            avail = next_avail(mode, avail, split, n);
        }
        free(copy);
    }
    resp_parser_free(&p);
}

static void run_scanner(const uint8_t *in, size_t n, int mode, size_t split, struct log *out)
{
    struct resp_scanner s;
    size_t off = 0, avail = next_avail(mode, 0, split, n);

    resp_scanner_reset(&s);
    for (;;) {
        size_t have = avail - off;
        char *copy = malloc(have + 1);
        long long r;

        if (copy == NULL) abort();
        memcpy(copy, in + off, have);
        r = resp_scan_reply(&s, copy, have);
        free(copy);
        if (r > 0) {
            if ((size_t)r > have || s.first != (char)in[off]) abort();
            log_num(out, r);
            off += (size_t)r;
        } else if (r < 0) {
            log_num(out, -1);
            break;
        } else if (avail == n) {
            log_num(out, 0);
            break;
        } else {
            avail = next_avail(mode, avail, split, n);
        }
    }
}

static void must_agree(const struct log *a, const struct log *b)
{
    if (a->len != b->len || (a->len && memcmp(a->s, b->s, a->len) != 0)) {
        fprintf(stderr, "whole and split feeds disagree\n");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct log whole = {0}, other = {0};
    size_t split, max_args = 0;
    long long max_bulk = 0;
    int mode;

    if (size < 3) return 0;
    /* two bytes pick the split point, one the limits; the rest is the stream */
    split = (size_t)(data[0] | data[1] << 8);
    if (data[2] & 1) {
        max_args = 1 + (data[2] >> 1 & 7);
        max_bulk = 1 + (data[2] >> 4);
    }
    data += 3;
    size -= 3;
    split = size ? split % (size + 1) : 0;

    run_parser(data, size, 0, split, max_args, max_bulk, &whole);
    for (mode = 1; mode <= 2; mode++) {
        if (mode == 2 && size > 4096) break;
        other.len = 0;
        run_parser(data, size, mode, split, max_args, max_bulk, &other);
        must_agree(&whole, &other);
    }

    whole.len = 0;
    run_scanner(data, size, 0, split, &whole);
    for (mode = 1; mode <= 2; mode++) {
        if (mode == 2 && size > 4096) break;
        other.len = 0;
        run_scanner(data, size, mode, split, &other);
        must_agree(&whole, &other);
    }
    free(whole.s);
    free(other.s);
    return 0;
}
