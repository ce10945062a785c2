/* test_fanmerge.c: unit tests of fanmerge.c, the merges of fanned-out replies: INFO from several instances and cluster nodes (RESP2 and RESP3), a cluster node's SCAN reply given the client's next cursor, and SCAN cursors read as Redis 7.0 reads them, row by row. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fanmerge.h"
#include "info_redis70.h"

/* A char array (a literal) as (pointer, length without the final NUL). */
#define BYTES(a) (a), (sizeof(a) - 1)

/* out's bytes as a string (freed by the caller). */
static char *text_of(const struct bytebuf *out)
{
    char *t = malloc(out->len + 1);
    memcpy(t, out->p, out->len);
    t[out->len] = '\0';
    return t;
}

/* A bulk string reply of body, as Redis sends INFO to a RESP2 connection. */
static char *bulk_of(const char *body)
{
    size_t n = strlen(body);
    char *r = malloc(n + 32);
    snprintf(r, n + 32, "$%zu\r\n%s\r\n", n, body);
    return r;
}

/* INFO keyspace memory, as a Redis 7.0.15 cluster primary answers it (the sections in Redis's order). */
static const char node_a_body[] = "# Memory\r\n"
                                  "used_memory:1546480\r\n"
                                  "used_memory_human:1.47M\r\n"
                                  "maxmemory:0\r\n"
                                  "maxmemory_policy:noeviction\r\n"
                                  "\r\n"
                                  "# Keyspace\r\n"
                                  "db0:keys=3,expires=1,avg_ttl=59994\r\n";
static const char node_b_body[] = "# Memory\r\n"
                                  "used_memory:1503920\r\n"
                                  "used_memory_human:1.43M\r\n"
                                  "maxmemory:0\r\n"
                                  "maxmemory_policy:noeviction\r\n"
                                  "\r\n"
                                  "# Keyspace\r\n";
static const char local_sections[] = "# Server\r\nkeygate_version:1.0\r\n\r\n";

static const char want_merged[] = "# Server\r\nkeygate_version:1.0\r\n\r\n"
                                  "# Memory (instance cache node 127.0.0.1:7001)\r\n"
                                  "used_memory:1546480\r\n"
                                  "used_memory_human:1.47M\r\n"
                                  "maxmemory:0\r\n"
                                  "maxmemory_policy:noeviction\r\n"
                                  "\r\n"
                                  "# Keyspace (instance cache node 127.0.0.1:7001)\r\n"
                                  "db0:keys=3,expires=1,avg_ttl=59994\r\n"
                                  "\r\n"
                                  "# Memory (instance cache node 127.0.0.1:7002)\r\n"
                                  "used_memory:1503920\r\n"
                                  "used_memory_human:1.43M\r\n"
                                  "maxmemory:0\r\n"
                                  "maxmemory_policy:noeviction\r\n"
                                  "\r\n"
                                  "# Keyspace (instance cache node 127.0.0.1:7002)\r\n";

/* Two primaries of one cluster instance, labelled by node, after keygate's own sections: one bulk (RESP2). */
START_TEST(test_info_two_nodes_resp2)
{
    char *a = bulk_of(node_a_body), *b = bulk_of(node_b_body);
    struct info_part parts[2] = {{"cache node 127.0.0.1:7001", a, strlen(a)},
                                 {"cache node 127.0.0.1:7002", b, strlen(b)}};
    struct bytebuf out = {0};
    ck_assert_int_eq(fanmerge_info(BYTES(local_sections), parts, 2, 0, &out), 0);
    char *got = text_of(&out), *want = bulk_of(want_merged);
    ck_assert_str_eq(got, want);
    free(got);
    free(want);
    free(a);
    free(b);
    bytebuf_free(&out);
}
END_TEST

/* The same for a RESP3 client: a verbatim string ("=N\r\ntxt:<body>\r\n"), as Redis answers INFO; the
 * parts came as verbatim strings too (the instance connections speak RESP3 then). */
START_TEST(test_info_two_nodes_resp3)
{
    char a[512], b[512];
    snprintf(a, sizeof(a), "=%zu\r\ntxt:%s\r\n", strlen(node_a_body) + 4, node_a_body);
    snprintf(b, sizeof(b), "=%zu\r\ntxt:%s\r\n", strlen(node_b_body) + 4, node_b_body);
    struct info_part parts[2] = {{"cache node 127.0.0.1:7001", a, strlen(a)},
                                 {"cache node 127.0.0.1:7002", b, strlen(b)}};
    struct bytebuf out = {0};
    ck_assert_int_eq(fanmerge_info(BYTES(local_sections), parts, 2, 1, &out), 0);
    char want[2048];
    snprintf(want, sizeof(want), "=%zu\r\ntxt:%s\r\n", strlen(want_merged) + 4, want_merged);
    char *got = text_of(&out);
    ck_assert_str_eq(got, want);
    free(got);
    bytebuf_free(&out);
}
END_TEST

/* A whole INFO of Redis 7.0.15 (every section): only keyspace, memory and replication are kept, labelled. */
START_TEST(test_info_whole_redis_reply)
{
    char *r = bulk_of(info_redis70);
    struct info_part parts[1] = {{"durable", r, strlen(r)}};
    struct bytebuf out = {0};
    ck_assert_int_eq(fanmerge_info("", 0, parts, 1, 0, &out), 0);
    char *got = text_of(&out);
    ck_assert_ptr_nonnull(strstr(got, "# Memory (instance durable)\r\nused_memory:"));
    ck_assert_ptr_nonnull(strstr(got, "# Replication (instance durable)\r\nrole:master\r\n"));
    ck_assert_ptr_nonnull(strstr(got, "# Keyspace (instance durable)\r\ndb0:keys=1,"));
    ck_assert_ptr_null(strstr(got, "redis_version")); /* the instance's server section is not the client's */
    ck_assert_ptr_null(strstr(got, "# Clients"));
    ck_assert_ptr_null(strstr(got, "# Stats"));
    free(got);
    free(r);
    bytebuf_free(&out);
}
END_TEST

/* An instance's error is the reply, for RESP2 and RESP3 alike. */
START_TEST(test_info_error_part)
{
    static const char down[] = "-UNAVAILABLE instance 'cache' is unreachable\r\n";
    char *a = bulk_of(node_a_body);
    struct info_part parts[2] = {{"durable", a, strlen(a)}, {"cache", BYTES(down)}};
    for (int resp3 = 0; resp3 <= 1; resp3++) {
        struct bytebuf out = {0};
        ck_assert_int_eq(fanmerge_info(BYTES(local_sections), parts, 2, resp3, &out), 0);
        char *got = text_of(&out);
        ck_assert_str_eq(got, down);
        free(got);
        bytebuf_free(&out);
    }
    free(a);
}
END_TEST

/* A part that is no INFO reply: -1, and what out held stays as it was. */
START_TEST(test_info_refused)
{
    static const char integer[] = ":1\r\n";
    struct info_part parts[1] = {{"durable", BYTES(integer)}};
    for (int resp3 = 0; resp3 <= 1; resp3++) {
        struct bytebuf out = {0};
        bytebuf_add(&out, "x", 1);
        ck_assert_int_eq(fanmerge_info("", 0, parts, 1, resp3, &out), -1);
        ck_assert_uint_eq(out.len, 1);
        bytebuf_free(&out);
    }
}
END_TEST

/* ---- SCAN ---- */

struct scan_row {
    const char *what;
    const char *reply;
    unsigned rank, nnodes;
    enum fanmerge_scan want;
    const char *want_reply; /* FANMERGE_SCAN_DONE */
};

/* Node replies as Redis 7.0 sends SCAN's: "*2", the cursor as a bulk, the keys. 128 = 1 << SLOTMAP_SCAN_RANK_BITS. */
static const struct scan_row scan_rows[] = {
    {"a node's cursor goes on on that node (rank 1 of 3: 17 << 7 | 1)",
     "*2\r\n$2\r\n17\r\n*2\r\n$5\r\napp:1\r\n$5\r\napp:2\r\n", 1, 3, FANMERGE_SCAN_DONE,
     "*2\r\n$4\r\n2177\r\n*2\r\n$5\r\napp:1\r\n$5\r\napp:2\r\n"},
    {"node 0 done: the next primary's start", "*2\r\n$1\r\n0\r\n*1\r\n$5\r\napp:9\r\n", 0, 3, FANMERGE_SCAN_DONE,
     "*2\r\n$1\r\n1\r\n*1\r\n$5\r\napp:9\r\n"},
    {"the last node done: 0, the scan is over", "*2\r\n$1\r\n0\r\n*0\r\n", 2, 3, FANMERGE_SCAN_DONE,
     "*2\r\n$1\r\n0\r\n*0\r\n"},
    {"a single primary", "*2\r\n$3\r\n448\r\n*0\r\n", 0, 1, FANMERGE_SCAN_DONE, "*2\r\n$5\r\n57344\r\n*0\r\n"},
    {"the largest node cursor that fits beside the rank (2^57 - 1)", "*2\r\n$18\r\n144115188075855871\r\n*0\r\n", 5, 6,
     FANMERGE_SCAN_DONE, "*2\r\n$20\r\n18446744073709551493\r\n*0\r\n"},
    {"a node cursor too large to carry (2^57)", "*2\r\n$18\r\n144115188075855872\r\n*0\r\n", 0, 3,
     FANMERGE_SCAN_UNCARRIED, NULL},
    {"max uint64 from the node", "*2\r\n$20\r\n18446744073709551615\r\n*0\r\n", 0, 3, FANMERGE_SCAN_UNCARRIED, NULL},
    {"an error passes as it came", "-CLUSTERDOWN The cluster is down\r\n", 0, 3, FANMERGE_SCAN_AS_IS, NULL},
    {"-MOVED passes as it came", "-MOVED 866 127.0.0.1:7002\r\n", 1, 3, FANMERGE_SCAN_AS_IS, NULL},
    {"not SCAN's shape", "*1\r\n$1\r\n0\r\n", 0, 3, FANMERGE_SCAN_AS_IS, NULL},
};

START_TEST(test_scan_rows)
{
    const struct scan_row *r = &scan_rows[_i];
    struct bytebuf out = {0};
    /* the reply stored with a trailing hyphen byte after it: the length, not a NUL, ends it */
    size_t n = strlen(r->reply);
    char *stored = malloc(n + 1);
    memcpy(stored, r->reply, n);
    stored[n] = '-';
    enum fanmerge_scan got = fanmerge_scan(stored, n, r->rank, r->nnodes, &out);
    ck_assert_msg(got == r->want, "%s: got %d, want %d", r->what, (int)got, (int)r->want);
    if (r->want == FANMERGE_SCAN_DONE) {
        char *t = text_of(&out);
        ck_assert_msg(strcmp(t, r->want_reply) == 0, "%s: got %s", r->what, t);
        free(t);
    } else {
        ck_assert_msg(out.len == 0, "%s: appended", r->what);
    }
    free(stored);
    bytebuf_free(&out);
}
END_TEST

/* ---- cursors ---- */

struct cursor_row {
    const char *in;
    int ok;
    uint64_t want;
};

/* Redis 7.0 (parseScanCursorOrReply): strtoul of all of it, no leading space, no overflow. */
static const struct cursor_row cursor_rows[] = {
    {"0", 1, 0},
    {"", 1, 0}, /* strtoul consumes nothing and stops at the end: Redis takes it as 0 */
    {"1", 1, 1},
    {"2177", 1, 2177},
    {"00012", 1, 12},
    {"+5", 1, 5},
    {"-0", 1, 0},
    {"-1", 1, UINT64_MAX}, /* a negative one wraps, as strtoul's */
    {"-18446744073709551615", 1, 1},
    {"18446744073709551615", 1, UINT64_MAX},
    {"18446744073709551616", 0, 0}, /* ERANGE */
    {"99999999999999999999", 0, 0},
    {"184467440737095516150", 0, 0},
    {"+", 0, 0},
    {"-", 0, 0},
    {"a", 0, 0},
    {"12a", 0, 0},
    {"1.5", 0, 0},
    {" 1", 0, 0},
    {"1 ", 0, 0},
    {"0x10", 0, 0},
    {"--1", 0, 0},
};

START_TEST(test_cursor_rows)
{
    const struct cursor_row *r = &cursor_rows[_i];
    uint64_t got = 7;
    int rc = fanmerge_parse_cursor(r->in, strlen(r->in), &got);
    ck_assert_msg(rc == (r->ok ? 0 : -1), "'%s': returned %d", r->in, rc);
    if (r->ok) ck_assert_msg(got == r->want, "'%s': read %llu", r->in, (unsigned long long)got);
}
END_TEST

/* The length, not a NUL, ends the cursor: "12" out of "123". */
START_TEST(test_cursor_length_bounded)
{
    uint64_t got;
    ck_assert_int_eq(fanmerge_parse_cursor("123", 2, &got), 0);
    ck_assert_uint_eq(got, 12);
    ck_assert_int_eq(fanmerge_parse_cursor("1\0003", 3, &got), -1);
}
END_TEST

static Suite *fanmerge_suite(void)
{
    Suite *s = suite_create("fanmerge");
    TCase *info = tcase_create("info");
    tcase_add_test(info, test_info_two_nodes_resp2);
    tcase_add_test(info, test_info_two_nodes_resp3);
    tcase_add_test(info, test_info_whole_redis_reply);
    tcase_add_test(info, test_info_error_part);
    tcase_add_test(info, test_info_refused);
    suite_add_tcase(s, info);
    TCase *scan = tcase_create("scan");
    tcase_add_loop_test(scan, test_scan_rows, 0, (int)(sizeof(scan_rows) / sizeof(scan_rows[0])));
    tcase_add_loop_test(scan, test_cursor_rows, 0, (int)(sizeof(cursor_rows) / sizeof(cursor_rows[0])));
    tcase_add_test(scan, test_cursor_length_bounded);
    suite_add_tcase(s, scan);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(fanmerge_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
