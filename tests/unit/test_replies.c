/* test_replies.c: Check tests for replies.c: EXEC pick and filter, split-reply merge, error lines, byte for byte. */
#include "replies.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Harness: expected replies are C string literals (RESP2 bytes, "\r\n" included); a mismatch
 * prints both sides escaped, so a failure names the byte that differs.
 * ------------------------------------------------------------------------------------------- */

#define LIT(s) s, sizeof(s) - 1

/* s as printable text, CR/LF/NUL and other bytes as \xHH (into buf, size bytes). */
static const char *escaped(const char *s, size_t n, char *buf, size_t size)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            buf[k++] = (char)c;
        else
            k += (size_t)snprintf(buf + k, size - k, "\\x%02x", c);
    }
    buf[k] = '\0';
    return buf;
}

static void check_bytes(const char *got, size_t got_len, const char *want, size_t want_len, int line)
{
    char g[1024], w[1024];
    ck_assert_msg(got_len == want_len && (want_len == 0 || memcmp(got, want, want_len) == 0),
                  "line %d: got %zu bytes \"%s\", want %zu bytes \"%s\"", line, got_len,
                  escaped(got ? got : "", got ? got_len : 0, g, sizeof(g)), want_len,
                  escaped(want, want_len, w, sizeof(w)));
}

/* The bytes (got, got_len) are exactly the literal want. */
#define EXPECT_BYTES(got, got_len, want) check_bytes((got), (got_len), LIT(want), __LINE__)

/* ------------------------------------------------------------------------------------------ */
/* replies_exec_pick                                                                           */
/* ------------------------------------------------------------------------------------------ */

/* Pick from reply (a literal) with no queued error; the pick must lie inside the reply. */
static void pick(const char *reply, size_t len, const char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    replies_exec_pick(reply, len, NULL, 0, out, out_len);
    ck_assert_ptr_nonnull(*out);
    ck_assert_msg(*out >= reply && *out + *out_len <= reply + len, "the pick is a slice of the reply");
}

START_TEST(test_exec_pick_one_element)
{
    static const char reply[] = "*1\r\n$3\r\nfoo\r\n";
    const char *out;
    size_t n;
    pick(LIT(reply), &out, &n);
    EXPECT_BYTES(out, n, "$3\r\nfoo\r\n");
    ck_assert_ptr_eq(out, reply + 4); /* no copy: right after "*1\r\n" */
}
END_TEST

START_TEST(test_exec_pick_three_elements)
{
    const char *out;
    size_t n;

    /* bulk first; the TTL fixes' answers after it are dropped */
    pick(LIT("*3\r\n$3\r\nfoo\r\n:1\r\n:1\r\n"), &out, &n);
    EXPECT_BYTES(out, n, "$3\r\nfoo\r\n");

    /* integer first */
    pick(LIT("*3\r\n:42\r\n:1\r\n+OK\r\n"), &out, &n);
    EXPECT_BYTES(out, n, ":42\r\n");

    /* nested array first, itself holding an array and a nil */
    pick(LIT("*3\r\n*3\r\n$1\r\na\r\n*1\r\n:5\r\n$-1\r\n:1\r\n:0\r\n"), &out, &n);
    EXPECT_BYTES(out, n, "*3\r\n$1\r\na\r\n*1\r\n:5\r\n$-1\r\n");

    /* an error element (a run-time error of the client's command) is its reply */
    pick(LIT("*3\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n:1\r\n:1\r\n"), &out, &n);
    EXPECT_BYTES(out, n, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");

    /* a nil bulk first */
    pick(LIT("*3\r\n$-1\r\n:1\r\n:1\r\n"), &out, &n);
    EXPECT_BYTES(out, n, "$-1\r\n");

    /* a bulk whose payload holds CRLF and looks like RESP */
    pick(LIT("*3\r\n$8\r\n:1\r\n*2\r\n\r\n:7\r\n:1\r\n"), &out, &n);
    EXPECT_BYTES(out, n, "$8\r\n:1\r\n*2\r\n\r\n");
}
END_TEST

START_TEST(test_exec_pick_passes_nil_and_empty)
{
    static const char nil[] = "*-1\r\n";
    static const char empty[] = "*0\r\n";
    const char *out;
    size_t n;

    pick(LIT(nil), &out, &n);
    ck_assert_ptr_eq(out, nil);
    EXPECT_BYTES(out, n, "*-1\r\n");

    pick(LIT(empty), &out, &n);
    ck_assert_ptr_eq(out, empty);
    EXPECT_BYTES(out, n, "*0\r\n");

    /* a WATCH abort is not an error: a queued error does not replace it */
    static const char qerr[] = "-ERR unknown command 'FOO'\r\n";
    out = NULL;
    replies_exec_pick(LIT(nil), LIT(qerr), &out, &n);
    ck_assert_ptr_eq(out, nil);
    EXPECT_BYTES(out, n, "*-1\r\n");
}
END_TEST

START_TEST(test_exec_pick_execabort)
{
    static const char abort_reply[] = "-EXECABORT Transaction discarded because of previous errors.\r\n";
    static const char qerr[] = "-ERR wrong number of arguments for 'set' command\r\n";
    const char *out = NULL;
    size_t n = 0;

    /* with the command's queue-time error: that error is the client's reply */
    replies_exec_pick(LIT(abort_reply), LIT(qerr), &out, &n);
    ck_assert_ptr_eq(out, qerr);
    EXPECT_BYTES(out, n, "-ERR wrong number of arguments for 'set' command\r\n");

    /* without one: the EXEC error as it came */
    out = NULL;
    replies_exec_pick(LIT(abort_reply), NULL, 0, &out, &n);
    ck_assert_ptr_eq(out, abort_reply);
    EXPECT_BYTES(out, n, "-EXECABORT Transaction discarded because of previous errors.\r\n");
}
END_TEST

START_TEST(test_exec_pick_truncated_first_element)
{
    /* element 0 not whole: the reply as it came, never a cut slice */
    static const char reply[] = "*1\r\n$5\r\nab";
    const char *out;
    size_t n;
    pick(LIT(reply), &out, &n);
    ck_assert_ptr_eq(out, reply);
    EXPECT_BYTES(out, n, "*1\r\n$5\r\nab");
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* replies_exec_filter                                                                         */
/* ------------------------------------------------------------------------------------------ */

START_TEST(test_exec_filter_keeps_flagged)
{
    static const uint8_t keep[] = {1, 0, 0, 1};
    struct bytebuf out = {0};
    ck_assert_int_eq(replies_exec_filter(LIT("*4\r\n+OK\r\n:11\r\n:22\r\n$3\r\nbar\r\n"), keep, 4, &out), 0);
    EXPECT_BYTES(out.p, out.len, "*2\r\n+OK\r\n$3\r\nbar\r\n");
    bytebuf_free(&out);

    static const uint8_t keep2[] = {0, 1, 1, 0};
    ck_assert_int_eq(replies_exec_filter(LIT("*4\r\n+OK\r\n:11\r\n:22\r\n$3\r\nbar\r\n"), keep2, 4, &out), 0);
    EXPECT_BYTES(out.p, out.len, "*2\r\n:11\r\n:22\r\n");
    bytebuf_free(&out);
}
END_TEST

START_TEST(test_exec_filter_all_and_none)
{
    static const char reply[] = "*3\r\n+OK\r\n$-1\r\n-ERR no such key\r\n";
    static const uint8_t all[] = {1, 1, 1}, none[] = {0, 0, 0};
    struct bytebuf out = {0};

    ck_assert_int_eq(replies_exec_filter(LIT(reply), all, 3, &out), 0);
    EXPECT_BYTES(out.p, out.len, "*3\r\n+OK\r\n$-1\r\n-ERR no such key\r\n");
    bytebuf_free(&out);

    ck_assert_int_eq(replies_exec_filter(LIT(reply), none, 3, &out), 0);
    EXPECT_BYTES(out.p, out.len, "*0\r\n");
    bytebuf_free(&out);

    /* an empty transaction: MULTI EXEC */
    ck_assert_int_eq(replies_exec_filter(LIT("*0\r\n"), NULL, 0, &out), 0);
    EXPECT_BYTES(out.p, out.len, "*0\r\n");
    bytebuf_free(&out);
}
END_TEST

START_TEST(test_exec_filter_nested_and_crlf_payloads)
{
    /* element 0: a bulk "a\r\nb"; 1: an injected EXPIRE's :1; 2: an array holding a bulk of
     * "\r\n" and an array whose bulk looks like an integer and an array header */
    static const char reply[] = "*3\r\n$4\r\na\r\nb\r\n:1\r\n*2\r\n$2\r\n\r\n\r\n*1\r\n$5\r\n:9\r\n*\r\n";
    static const uint8_t keep[] = {1, 0, 1};
    struct bytebuf out = {0};
    ck_assert_int_eq(replies_exec_filter(LIT(reply), keep, 3, &out), 0);
    EXPECT_BYTES(out.p, out.len, "*2\r\n$4\r\na\r\nb\r\n*2\r\n$2\r\n\r\n\r\n*1\r\n$5\r\n:9\r\n*\r\n");
    bytebuf_free(&out);

    static const uint8_t keep2[] = {0, 1, 1};
    ck_assert_int_eq(replies_exec_filter(LIT(reply), keep2, 3, &out), 0);
    EXPECT_BYTES(out.p, out.len, "*2\r\n:1\r\n*2\r\n$2\r\n\r\n\r\n*1\r\n$5\r\n:9\r\n*\r\n");
    bytebuf_free(&out);

    /* the client's own nested EXEC-like answer: an array of arrays with nils and errors */
    static const char reply2[] = "*2\r\n*2\r\n*-1\r\n-ERR x\r\n:1\r\n";
    static const uint8_t keep3[] = {1, 0};
    ck_assert_int_eq(replies_exec_filter(LIT(reply2), keep3, 2, &out), 0);
    EXPECT_BYTES(out.p, out.len, "*1\r\n*2\r\n*-1\r\n-ERR x\r\n");
    bytebuf_free(&out);
}
END_TEST

START_TEST(test_exec_filter_appends)
{
    static const uint8_t keep[] = {0, 1};
    struct bytebuf out = {0};
    bytebuf_add(&out, LIT("+PREV\r\n"));
    ck_assert_int_eq(replies_exec_filter(LIT("*2\r\n:1\r\n$2\r\nhi\r\n"), keep, 2, &out), 0);
    EXPECT_BYTES(out.p, out.len, "+PREV\r\n*1\r\n$2\r\nhi\r\n");
    bytebuf_free(&out);
}
END_TEST

/* replies_exec_filter refuses reply (with nkeep flags all kept) and leaves out exactly as it was. */
static void filter_refuses(const char *reply, size_t len, size_t nkeep, int line)
{
    static const uint8_t keep[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    ck_assert(nkeep <= sizeof(keep));

    struct bytebuf out = {0};
    ck_assert_msg(replies_exec_filter(reply, len, keep, nkeep, &out) == -1, "line %d: not refused", line);
    ck_assert_msg(out.len == 0, "line %d: %zu bytes appended to an empty buffer", line, out.len);
    bytebuf_free(&out);

    /* also when out already held bytes */
    bytebuf_add(&out, LIT("*1\r\n:1\r\n"));
    ck_assert_msg(replies_exec_filter(reply, len, keep, nkeep, &out) == -1, "line %d: not refused", line);
    check_bytes(out.p, out.len, LIT("*1\r\n:1\r\n"), line);
    bytebuf_free(&out);
}

/* replies_exec_xadd_failed: a near-cache write's XADD elements, by marker or as the tail */
START_TEST(test_exec_xadd_failed)
{
    const char *err;
    size_t n;
    static const uint8_t keep[] = {REPLIES_KEEP_CLIENT, REPLIES_KEEP_INJECTED, REPLIES_KEEP_XADD};
    /* keygate's MULTI: SET, PEXPIRE, XADD; the XADD an error */
    ck_assert_int_eq(replies_exec_xadd_failed(LIT("*3\r\n+OK\r\n:1\r\n-WRONGTYPE Operation against a key\r\n"), NULL, 0,
                                              1, &err, &n),
                     1);
    ck_assert_int_eq((int)n, (int)strlen("WRONGTYPE Operation against a key"));
    ck_assert(memcmp(err, "WRONGTYPE", 9) == 0);
    /* the client's own error is not an XADD's */
    ck_assert_int_eq(replies_exec_xadd_failed(LIT("*3\r\n-ERR no\r\n:1\r\n$3\r\n1-1\r\n"), NULL, 0, 1, &err, &n), 0);
    ck_assert_int_eq(replies_exec_xadd_failed(LIT("*3\r\n-ERR no\r\n:1\r\n$3\r\n1-1\r\n"), keep, 3, 0, &err, &n), 0);
    ck_assert_int_eq(replies_exec_xadd_failed(LIT("*3\r\n+OK\r\n-ERR x\r\n$3\r\n1-1\r\n"), keep, 3, 0, &err, &n), 0);
    ck_assert_int_eq(replies_exec_xadd_failed(LIT("*3\r\n+OK\r\n:1\r\n-ERR bad\r\n"), keep, 3, 0, &err, &n), 1);
    ck_assert_int_eq((int)n, 7);
    /* RESP3's blob error */
    ck_assert_int_eq(replies_exec_xadd_failed(LIT("*2\r\n+OK\r\n!7\r\nERR bad\r\n"), NULL, 0, 1, &err, &n), 1);
    ck_assert_int_eq((int)n, 7);
    ck_assert(memcmp(err, "ERR bad", 7) == 0);
    /* not an array (EXECABORT, nil after WATCH), or fewer elements than XADDs: nothing to say */
    ck_assert_int_eq(replies_exec_xadd_failed(LIT("-EXECABORT x\r\n"), NULL, 0, 1, &err, &n), 0);
    ck_assert_int_eq(replies_exec_xadd_failed(LIT("*-1\r\n"), NULL, 0, 1, &err, &n), 0);
    ck_assert_int_eq(replies_exec_xadd_failed(LIT("*1\r\n-ERR x\r\n"), NULL, 0, 2, &err, &n), 0);
    ck_assert_int_eq(replies_exec_xadd_failed(LIT("*2\r\n+OK\r\n-ERR x\r\n"), keep, 3, 0, &err, &n), 0);
}
END_TEST

START_TEST(test_exec_filter_refuses)
{
    /* count mismatch, both ways */
    filter_refuses(LIT("*3\r\n:1\r\n:2\r\n:3\r\n"), 4, __LINE__);
    filter_refuses(LIT("*3\r\n:1\r\n:2\r\n:3\r\n"), 2, __LINE__);
    /* nil after a WATCH */
    filter_refuses(LIT("*-1\r\n"), 0, __LINE__);
    filter_refuses(LIT("*-1\r\n"), 1, __LINE__);
    /* EXECABORT and other non-arrays */
    filter_refuses(LIT("-EXECABORT Transaction discarded because of previous errors.\r\n"), 1, __LINE__);
    filter_refuses(LIT("+OK\r\n"), 1, __LINE__);
    /* a truncated element: the last one, one in the middle, a nested one */
    filter_refuses(LIT("*2\r\n+OK\r\n$5\r\nab"), 2, __LINE__);
    filter_refuses(LIT("*2\r\n+OK\r\n$5\r\nabcde\r"), 2, __LINE__);
    filter_refuses(LIT("*3\r\n+OK\r\n:1"), 3, __LINE__);
    filter_refuses(LIT("*2\r\n*2\r\n:1\r\n"), 2, __LINE__);
    /* an array with fewer elements than its header says */
    filter_refuses(LIT("*4\r\n:1\r\n:2\r\n:3\r\n"), 4, __LINE__);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* replies_merge                                                                               */
/* ------------------------------------------------------------------------------------------ */

#define PART(inst, s) ((struct replies_part){(inst), (s), sizeof(s) - 1})

START_TEST(test_merge_values_two_instances)
{
    /* MGET a b c: a and c on instance 5, b on instance 3 (b missing there) */
    static const int16_t key_instance[] = {-1, 5, 3, 5};
    const struct replies_part parts[] = {
        PART(3, "*1\r\n$-1\r\n"),
        PART(5, "*2\r\n$2\r\nva\r\n$2\r\nvc\r\n"),
    };
    struct bytebuf out = {0};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_VALUES, parts, 2, key_instance, 4, &out), 0);
    EXPECT_BYTES(out.p, out.len, "*3\r\n$2\r\nva\r\n$-1\r\n$2\r\nvc\r\n");
    bytebuf_free(&out);
}
END_TEST

START_TEST(test_merge_values_three_instances_interleaved)
{
    /* MGET a b c d e: a c on 0, b e on 1, d on 2; the parts not in instance order */
    static const int16_t key_instance[] = {-1, 0, 1, 0, 2, 1};
    const struct replies_part parts[] = {
        PART(2, "*1\r\n$2\r\nvd\r\n"),
        PART(0, "*2\r\n$2\r\nva\r\n$-1\r\n"),
        PART(1, "*2\r\n$-1\r\n$6\r\nv\r\ne:5\r\n"),
    };
    struct bytebuf out = {0};
    bytebuf_add(&out, LIT("+PREV\r\n"));
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_VALUES, parts, 3, key_instance, 6, &out), 0);
    EXPECT_BYTES(out.p, out.len, "+PREV\r\n*5\r\n$2\r\nva\r\n$-1\r\n$-1\r\n$2\r\nvd\r\n$6\r\nv\r\ne:5\r\n");
    bytebuf_free(&out);
}
END_TEST

START_TEST(test_merge_sum)
{
    static const int16_t key_instance[] = {-1, 0, 1, 0};
    struct bytebuf out = {0};

    const struct replies_part two[] = {PART(0, ":3\r\n"), PART(1, ":4\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_SUM, two, 2, key_instance, 4, &out), 0);
    EXPECT_BYTES(out.p, out.len, ":7\r\n");
    bytebuf_free(&out);

    const struct replies_part neg[] = {PART(1, ":10\r\n"), PART(0, ":-14\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_SUM, neg, 2, key_instance, 4, &out), 0);
    EXPECT_BYTES(out.p, out.len, ":-4\r\n");
    bytebuf_free(&out);

    const struct replies_part three[] = {PART(0, ":0\r\n"), PART(1, ":12\r\n"), PART(2, ":-2\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_SUM, three, 3, key_instance, 4, &out), 0);
    EXPECT_BYTES(out.p, out.len, ":10\r\n");
    bytebuf_free(&out);
}
END_TEST

START_TEST(test_merge_error_part_wins)
{
    static const int16_t key_instance[] = {-1, 0, 1, 2};
    struct bytebuf out = {0};

    /* SUM: an error in the middle, then another: the first one, exactly */
    const struct replies_part sum[] = {
        PART(0, ":3\r\n"),
        PART(1, "-UNAVAILABLE instance 'cache' is unreachable\r\n"),
        PART(2, "-ERR second\r\n"),
    };
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_SUM, sum, 3, key_instance, 4, &out), 0);
    EXPECT_BYTES(out.p, out.len, "-UNAVAILABLE instance 'cache' is unreachable\r\n");
    bytebuf_free(&out);

    /* VALUES: the error is the last part */
    const struct replies_part last[] = {
        PART(0, "*1\r\n$1\r\na\r\n"),
        PART(1, "*1\r\n$1\r\nb\r\n"),
        PART(2, "-OOM command not allowed when used memory > 'maxmemory'.\r\n"),
    };
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_VALUES, last, 3, key_instance, 4, &out), 0);
    EXPECT_BYTES(out.p, out.len, "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
    bytebuf_free(&out);

    /* VALUES: the error is the first part; appended after what out held */
    const struct replies_part first[] = {
        PART(2, "-ERR first\r\n"),
        PART(0, "*1\r\n$1\r\na\r\n"),
        PART(1, "-ERR later\r\n"),
    };
    bytebuf_add(&out, LIT(":1\r\n"));
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_VALUES, first, 3, key_instance, 4, &out), 0);
    EXPECT_BYTES(out.p, out.len, ":1\r\n-ERR first\r\n");
    bytebuf_free(&out);
}
END_TEST

/* replies_merge(VALUES) refuses and leaves out exactly as it was (empty, then holding bytes). */
static void merge_refuses(const struct replies_part *parts, int nparts, const int16_t *key_instance, size_t argc,
                          int line)
{
    struct bytebuf out = {0};
    ck_assert_msg(replies_merge(REPLIES_MERGE_VALUES, parts, nparts, key_instance, argc, &out) == -1,
                  "line %d: not refused", line);
    ck_assert_msg(out.len == 0, "line %d: %zu bytes left in an empty buffer", line, out.len);
    bytebuf_free(&out);

    bytebuf_add(&out, LIT("+PREV\r\n"));
    ck_assert_msg(replies_merge(REPLIES_MERGE_VALUES, parts, nparts, key_instance, argc, &out) == -1,
                  "line %d: not refused", line);
    check_bytes(out.p, out.len, LIT("+PREV\r\n"), line);
    bytebuf_free(&out);
}

START_TEST(test_merge_values_refuses)
{
    /* MGET a b c, a and c on 0: instance 0's part holds one element, not two */
    static const int16_t key_instance[] = {-1, 0, 1, 0};
    const struct replies_part short_part[] = {PART(0, "*1\r\n$1\r\na\r\n"), PART(1, "*1\r\n$1\r\nb\r\n")};
    merge_refuses(short_part, 2, key_instance, 4, __LINE__);

    /* an empty array where one element was asked for */
    const struct replies_part empty[] = {PART(0, "*2\r\n$1\r\na\r\n$1\r\nc\r\n"), PART(1, "*0\r\n")};
    merge_refuses(empty, 2, key_instance, 4, __LINE__);

    /* a part that is not an array */
    const struct replies_part not_array[] = {PART(0, "*2\r\n$1\r\na\r\n$1\r\nc\r\n"), PART(1, "+OK\r\n")};
    merge_refuses(not_array, 2, key_instance, 4, __LINE__);

    /* a key whose instance sent no part */
    static const int16_t key_instance3[] = {-1, 0, 2, 0};
    const struct replies_part no_part[] = {PART(0, "*2\r\n$1\r\na\r\n$1\r\nc\r\n"), PART(1, "*1\r\n$1\r\nb\r\n")};
    merge_refuses(no_part, 2, key_instance3, 4, __LINE__);

    /* a truncated element in a part */
    const struct replies_part truncated[] = {PART(0, "*2\r\n$1\r\na\r\n$1\r\nc"), PART(1, "*1\r\n$1\r\nb\r\n")};
    merge_refuses(truncated, 2, key_instance, 4, __LINE__);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* replies_error, replies_unavailable                                                          */
/* ------------------------------------------------------------------------------------------ */

/* RESP3 replies (a RESP3 client's backend connections): every element type is framed, nulls
 * are "_", maps count their pairs twice, a blob error "!" is an error like "-". */
START_TEST(test_resp3_pick_filter_merge)
{
    const char *out;
    size_t n;
    pick(LIT("*4\r\n,2.5\r\n+QUEUED-no\r\n:1\r\n:1\r\n"), &out, &n);
    EXPECT_BYTES(out, n, ",2.5\r\n");
    pick(LIT("*2\r\n%1\r\n$1\r\nf\r\n~1\r\n_\r\n:1\r\n"), &out, &n);
    EXPECT_BYTES(out, n, "%1\r\n$1\r\nf\r\n~1\r\n_\r\n");
    pick(LIT("*2\r\n|1\r\n+a\r\n+b\r\n(123\r\n:1\r\n"), &out, &n);
    EXPECT_BYTES(out, n, "|1\r\n+a\r\n+b\r\n(123\r\n");
    replies_exec_pick(LIT("!21\r\nEXECABORT Transaction\r\n"), LIT("-ERR queued\r\n"), &out, &n);
    EXPECT_BYTES(out, n, "-ERR queued\r\n");

    static const uint8_t keep[] = {1, 0, 1, 1, 0};
    struct bytebuf b = {0};
    ck_assert_int_eq(replies_exec_filter(LIT("*5\r\n%2\r\n+a\r\n:1\r\n+b\r\n_\r\n:1\r\n=7\r\ntxt:a\r\n\r\n#t\r\n"
                                             "~0\r\n"),
                                         keep, 5, &b),
                     0);
    EXPECT_BYTES(b.p, b.len, "*3\r\n%2\r\n+a\r\n:1\r\n+b\r\n_\r\n=7\r\ntxt:a\r\n\r\n#t\r\n");
    bytebuf_free(&b);

    /* MGET a b c d across instances 1 and 2: RESP3 nulls are copied as they came */
    static const int16_t key_instance[] = {-1, 1, 2, 1, 2};
    const struct replies_part parts[] = {PART(1, "*2\r\n$1\r\nA\r\n_\r\n"), PART(2, "*2\r\n_\r\n$1\r\nD\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_VALUES, parts, 2, key_instance, 5, &b), 0);
    EXPECT_BYTES(b.p, b.len, "*4\r\n$1\r\nA\r\n_\r\n_\r\n$1\r\nD\r\n");
    bytebuf_free(&b);
    const struct replies_part err[] = {PART(1, "*2\r\n_\r\n_\r\n"), PART(2, "!5\r\nERR x\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_VALUES, err, 2, key_instance, 5, &b), 0);
    EXPECT_BYTES(b.p, b.len, "!5\r\nERR x\r\n");
    bytebuf_free(&b);
}
END_TEST

/* INFO for a RESP3 client: the merged bulk as a verbatim string; an error stays itself. */
START_TEST(test_verbatim_from_bulk)
{
    struct bytebuf b = {0};
    replies_verbatim(LIT("$13\r\n# Server\r\na:1\r\n"), &b);
    EXPECT_BYTES(b.p, b.len, "=17\r\ntxt:# Server\r\na:1\r\n");
    b.len = 0;
    replies_verbatim(LIT("$0\r\n\r\n"), &b);
    EXPECT_BYTES(b.p, b.len, "=4\r\ntxt:\r\n");
    b.len = 0;
    replies_verbatim(LIT("-UNAVAILABLE instance 'cache' is unreachable\r\n"), &b);
    EXPECT_BYTES(b.p, b.len, "-UNAVAILABLE instance 'cache' is unreachable\r\n");
    b.len = 0;
    replies_verbatim(LIT("$5\r\nab\r\n"), &b); /* not a whole bulk: as it came */
    EXPECT_BYTES(b.p, b.len, "$5\r\nab\r\n");
    bytebuf_free(&b);
}
END_TEST

START_TEST(test_error_normal)
{
    char buf[128];
    memset(buf, 'X', sizeof(buf));
    size_t n = replies_error(buf, sizeof(buf), "NOPERM user 'app' may not write namespace 'q'");
    EXPECT_BYTES(buf, n, "-NOPERM user 'app' may not write namespace 'q'\r\n");
    ck_assert_int_eq(buf[n], '\0');

    /* exactly fitting: not cut */
    char fit[4 + 7];
    n = replies_error(fit, sizeof(fit), "ERR abc");
    EXPECT_BYTES(fit, n, "-ERR abc\r\n");
    ck_assert_uint_lt(n, sizeof(fit));
}
END_TEST

START_TEST(test_error_cut_to_fit)
{
    char buf[20];
    memset(buf, 'X', sizeof(buf));
    size_t n = replies_error(buf, 16, "ERR something rather long that does not fit");
    EXPECT_BYTES(buf, n, "-ERR somethin\r\n");
    ck_assert_uint_eq(n, 15);
    ck_assert_int_eq(buf[15], '\0');
    ck_assert_int_eq(buf[16], 'X'); /* nothing written past size */

    /* one byte short of fitting */
    char small[4 + 6];
    n = replies_error(small, sizeof(small), "ERR abc");
    EXPECT_BYTES(small, n, "-ERR ab\r\n");

    /* the smallest buffer: no text at all, still a line */
    char tiny[4];
    n = replies_error(tiny, sizeof(tiny), "ERR x");
    EXPECT_BYTES(tiny, n, "-\r\n");
}
END_TEST

START_TEST(test_unavailable_text)
{
    char text[128], line[160];
    replies_unavailable(text, sizeof(text), "cache");
    ck_assert_str_eq(text, "UNAVAILABLE instance 'cache' is unreachable");
    size_t n = replies_error(line, sizeof(line), text);
    EXPECT_BYTES(line, n, "-UNAVAILABLE instance 'cache' is unreachable\r\n");
}
END_TEST

/* Issue 30 item 3: a host name that does not resolve is said in -UNAVAILABLE; no reason, no change. */
START_TEST(test_unavailable_text_with_why)
{
    char text[160];
    replies_unavailable_why(text, sizeof(text), "cache", "cannot resolve redis-a.example: no address");
    ck_assert_str_eq(text, "UNAVAILABLE instance 'cache' is unreachable (cannot resolve redis-a.example: no address)");
    replies_unavailable_why(text, sizeof(text), "cache", NULL);
    ck_assert_str_eq(text, "UNAVAILABLE instance 'cache' is unreachable");
}
END_TEST

/* KEYS over a cluster's primaries: every part's keys in one array, part by part; empty parts
 * add nothing; an error part wins; a part that is not a whole array is refused. */
START_TEST(test_merge_concat)
{
    const struct replies_part parts[] = {PART(0, "*2\r\n$1\r\na\r\n$2\r\nbb\r\n"), PART(1, "*0\r\n"),
                                         PART(2, "*1\r\n$3\r\nc\r\n\r\n")};
    struct bytebuf out = {0};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_CONCAT, parts, 3, NULL, 0, &out), 0);
    EXPECT_BYTES(out.p, out.len, "*3\r\n$1\r\na\r\n$2\r\nbb\r\n$3\r\nc\r\n\r\n");
    out.len = 0;
    const struct replies_part none[] = {PART(0, "*0\r\n"), PART(1, "*0\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_CONCAT, none, 2, NULL, 0, &out), 0);
    EXPECT_BYTES(out.p, out.len, "*0\r\n");
    out.len = 0;
    const struct replies_part failed[] = {PART(0, "*1\r\n$1\r\na\r\n"), PART(1, "-UNAVAILABLE x\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_CONCAT, failed, 2, NULL, 0, &out), 0);
    EXPECT_BYTES(out.p, out.len, "-UNAVAILABLE x\r\n");
    out.len = 0;
    const struct replies_part bad[] = {PART(0, "*1\r\n$1\r\na\r\n"), PART(1, ":3\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_CONCAT, bad, 2, NULL, 0, &out), -1);
    ck_assert_uint_eq(out.len, 0);
    const struct replies_part cut[] = {PART(0, "*2\r\n$1\r\na\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_CONCAT, cut, 1, NULL, 0, &out), -1);
    ck_assert_uint_eq(out.len, 0);
    bytebuf_free(&out);
}
END_TEST

/* SCRIPT LOAD and SCRIPT EXISTS over every primary of a cluster: the same SHA1, and 1 where all have it */
START_TEST(test_merge_same_and)
{
    struct bytebuf out = {0};
    const struct replies_part sha[] = {PART(0, "$3\r\nabc\r\n"), PART(1, "$3\r\nabc\r\n"), PART(2, "$3\r\nabc\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_SAME, sha, 3, NULL, 0, &out), 0);
    EXPECT_BYTES(out.p, out.len, "$3\r\nabc\r\n");
    out.len = 0;
    const struct replies_part differ[] = {PART(0, "$3\r\nabc\r\n"), PART(1, "$3\r\nabd\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_SAME, differ, 2, NULL, 0, &out), 0);
    EXPECT_BYTES(out.p, out.len, "-ERR the primaries of the cluster answered differently\r\n");
    out.len = 0;
    const struct replies_part ex[] = {PART(0, "*3\r\n:1\r\n:1\r\n:0\r\n"), PART(1, "*3\r\n:1\r\n:0\r\n:0\r\n"),
                                      PART(2, "*3\r\n:1\r\n:1\r\n:1\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_AND, ex, 3, NULL, 0, &out), 0);
    EXPECT_BYTES(out.p, out.len, "*3\r\n:1\r\n:0\r\n:0\r\n");
    out.len = 0;
    const struct replies_part err[] = {PART(0, "*1\r\n:1\r\n"), PART(1, "-NOPERM x\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_AND, err, 2, NULL, 0, &out), 0);
    EXPECT_BYTES(out.p, out.len, "-NOPERM x\r\n");
    out.len = 0;
    const struct replies_part uneven[] = {PART(0, "*1\r\n:1\r\n"), PART(1, "*2\r\n:1\r\n:1\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_AND, uneven, 2, NULL, 0, &out), -1);
    ck_assert_uint_eq(out.len, 0);
    const struct replies_part notint[] = {PART(0, "*1\r\n$1\r\n1\r\n")};
    ck_assert_int_eq(replies_merge(REPLIES_MERGE_AND, notint, 1, NULL, 0, &out), -1);
    ck_assert_uint_eq(out.len, 0);
    bytebuf_free(&out);
}
END_TEST

/* A SCAN reply's cursor read and replaced; the keys follow byte for byte; other shapes refused. */
START_TEST(test_scan_cursor)
{
    uint64_t cur = 1;
    struct bytebuf out = {0};
    ck_assert_int_eq(replies_scan_cursor(LIT("*2\r\n$1\r\n0\r\n*0\r\n"), &cur), 0);
    ck_assert_uint_eq(cur, 0);
    ck_assert_int_eq(replies_scan_cursor(LIT("*2\r\n$20\r\n18446744073709551615\r\n*1\r\n$1\r\nk\r\n"), &cur), 0);
    ck_assert(cur == UINT64_MAX);
    ck_assert_int_eq(replies_scan_with_cursor(LIT("*2\r\n$2\r\n48\r\n*2\r\n$1\r\nk\r\n$2\r\nk2\r\n"), 385, &out), 0);
    EXPECT_BYTES(out.p, out.len, "*2\r\n$3\r\n385\r\n*2\r\n$1\r\nk\r\n$2\r\nk2\r\n");
    out.len = 0;
    /* not a SCAN reply: nothing read, nothing appended */
    static const char *const bad[] = {"-ERR invalid cursor\r\n",
                                      "*2\r\n$0\r\n\r\n*0\r\n",
                                      "*2\r\n$2\r\n1x\r\n*0\r\n",
                                      "*2\r\n:1\r\n*0\r\n",
                                      "*2\r\n$21\r\n184467440737095516150\r\n*0\r\n",
                                      "*2\r\n$20\r\n18446744073709551616\r\n*0\r\n",
                                      "*3\r\n$1\r\n0\r\n*0\r\n*0\r\n",
                                      "*2\r\n$1\r\n0\r\n*1\r\n",
                                      "*2\r\n$5\r\n0\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(replies_scan_cursor(bad[i], strlen(bad[i]), &cur) == -1, "bad[%zu] read", i);
        ck_assert_msg(replies_scan_with_cursor(bad[i], strlen(bad[i]), 7, &out) == -1, "bad[%zu] rewritten", i);
        ck_assert_uint_eq(out.len, 0);
    }
    bytebuf_free(&out);
}
END_TEST

static Suite *replies_suite(void)
{
    Suite *s = suite_create("replies");
    TCase *pk = tcase_create("exec_pick");
    TCase *flt = tcase_create("exec_filter");
    TCase *mrg = tcase_create("merge");
    TCase *err = tcase_create("error");

    tcase_add_test(pk, test_exec_pick_one_element);
    tcase_add_test(pk, test_exec_pick_three_elements);
    tcase_add_test(pk, test_exec_pick_passes_nil_and_empty);
    tcase_add_test(pk, test_exec_pick_execabort);
    tcase_add_test(pk, test_exec_pick_truncated_first_element);
    tcase_add_test(flt, test_exec_filter_keeps_flagged);
    tcase_add_test(flt, test_exec_xadd_failed);
    tcase_add_test(flt, test_exec_filter_all_and_none);
    tcase_add_test(flt, test_exec_filter_nested_and_crlf_payloads);
    tcase_add_test(flt, test_exec_filter_appends);
    tcase_add_test(flt, test_exec_filter_refuses);
    tcase_add_test(mrg, test_merge_values_two_instances);
    tcase_add_test(mrg, test_merge_values_three_instances_interleaved);
    tcase_add_test(mrg, test_merge_sum);
    tcase_add_test(mrg, test_merge_error_part_wins);
    tcase_add_test(mrg, test_merge_values_refuses);
    tcase_add_test(mrg, test_resp3_pick_filter_merge);
    tcase_add_test(mrg, test_merge_concat);
    tcase_add_test(mrg, test_merge_same_and);
    tcase_add_test(mrg, test_scan_cursor);
    tcase_add_test(err, test_error_normal);
    tcase_add_test(err, test_verbatim_from_bulk);
    tcase_add_test(err, test_error_cut_to_fit);
    tcase_add_test(err, test_unavailable_text);
    tcase_add_test(err, test_unavailable_text_with_why);
    suite_add_tcase(s, pk);
    suite_add_tcase(s, flt);
    suite_add_tcase(s, mrg);
    suite_add_tcase(s, err);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(replies_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
