/* test_info.c: unit tests of info.c: which INFO names instance sections, and the labelled merge, byte for byte. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "info.h"

#define LIT(s) s, sizeof(s) - 1

static int names(const char *a, const char *b)
{
    const char *argv[3] = {"INFO", a, b};
    size_t argvlen[3] = {4, a ? strlen(a) : 0, b ? strlen(b) : 0};
    return info_names_instance_section(b ? 3 : a ? 2 : 1, argv, argvlen);
}

START_TEST(instance_sections_are_named_only_explicitly)
{
    ck_assert_int_eq(names(NULL, NULL), 0);
    ck_assert_int_eq(names("all", NULL), 0);
    ck_assert_int_eq(names("everything", NULL), 0);
    ck_assert_int_eq(names("default", NULL), 0);
    ck_assert_int_eq(names("server", NULL), 0);
    ck_assert_int_eq(names("keyspace", NULL), 1);
    ck_assert_int_eq(names("KeySpace", NULL), 1);
    ck_assert_int_eq(names("server", "memory"), 1);
    ck_assert_int_eq(names("replication", NULL), 1);
    ck_assert_int_eq(names("keyspaces", NULL), 0);
}
END_TEST

/* info_merge into a NUL-terminated copy (static buffer). */
static const char *merge(const char *local, const struct info_part *parts, int n)
{
    static char text[4096];
    struct bytebuf out = {0};
    ck_assert_int_eq(info_merge(local, strlen(local), parts, n, &out), 0);
    ck_assert_uint_lt(out.len, sizeof(text));
    memcpy(text, out.p, out.len);
    text[out.len] = '\0';
    bytebuf_free(&out);
    return text;
}

START_TEST(sections_are_labelled_per_instance_and_others_dropped)
{
    /* what Redis answers to INFO server keyspace: its server section is not the client's */
    static const char dbody[] =
        "# Server\r\nredis_version:7.0.15\r\n\r\n# Keyspace\r\ndb0:keys=2,expires=0,avg_ttl=0\r\n";
    char durable[256];
    snprintf(durable, sizeof durable, "$%zu\r\n%s\r\n", sizeof(dbody) - 1, dbody);
    static const char cache[] = "$12\r\n# Keyspace\r\n\r\n";
    struct info_part parts[2] = {{"durable", durable, strlen(durable)}, {"cache", LIT(cache)}};
    const char *got = merge("# Server\r\nredis_version:7.0.15\r\nkeygate_version:x\r\n\r\n", parts, 2);
    static const char want_body[] = "# Server\r\nredis_version:7.0.15\r\nkeygate_version:x\r\n\r\n"
                                    "# Keyspace (instance durable)\r\ndb0:keys=2,expires=0,avg_ttl=0\r\n\r\n"
                                    "# Keyspace (instance cache)\r\n"; /* Redis: the last line's CRLF, no blank line */
    char want[512];
    snprintf(want, sizeof want, "$%zu\r\n%s\r\n", sizeof(want_body) - 1, want_body);
    ck_assert_str_eq(got, want);
}
END_TEST

START_TEST(several_sections_of_one_instance)
{
    static const char body[] =
        "# Memory\r\nused_memory:1\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n";
    char reply[256];
    snprintf(reply, sizeof reply, "$%zu\r\n%s\r\n", sizeof(body) - 1, body);
    struct info_part parts[1] = {{"durable", reply, strlen(reply)}};
    static const char want_body[] = "# Memory (instance durable)\r\nused_memory:1\r\n\r\n"
                                    "# Replication (instance durable)\r\nrole:master\r\nconnected_slaves:0\r\n";
    char want[256];
    snprintf(want, sizeof want, "$%zu\r\n%s\r\n", sizeof(want_body) - 1, want_body);
    ck_assert_str_eq(merge("", parts, 1), want);
}
END_TEST

START_TEST(an_instance_error_is_the_reply)
{
    static const char ok[] = "$12\r\n# Keyspace\r\n\r\n", down[] = "-UNAVAILABLE instance 'cache' is unreachable\r\n";
    struct info_part parts[2] = {{"durable", LIT(ok)}, {"cache", LIT(down)}};
    ck_assert_str_eq(merge("# Server\r\nx:1\r\n\r\n", parts, 2), down);
}
END_TEST

START_TEST(a_reply_that_is_no_bulk_is_refused)
{
    static const char bad[] = ":1\r\n", short_bulk[] = "$40\r\n# Keyspace\r\n";
    struct bytebuf out = {0};
    struct info_part parts[1] = {{"durable", LIT(bad)}};
    ck_assert_int_eq(info_merge("", 0, parts, 1, &out), -1);
    parts[0] = (struct info_part){"durable", LIT(short_bulk)};
    ck_assert_int_eq(info_merge("", 0, parts, 1, &out), -1);
    ck_assert_uint_eq(out.len, 0);
    bytebuf_free(&out);
}
END_TEST

START_TEST(nothing_at_all_is_an_empty_bulk)
{
    static const char none[] = "$0\r\n\r\n";
    struct info_part parts[1] = {{"durable", LIT(none)}};
    ck_assert_str_eq(merge("", parts, 1), "$0\r\n\r\n");
}
END_TEST

/* A RESP3 client's instance connections answer INFO with a verbatim string "=N\r\ntxt:...":
 * its body is merged like a bulk's (the reply stays a bulk; fanmerge.c makes it verbatim). */
START_TEST(a_resp3_verbatim_part_is_merged_like_a_bulk)
{
    static const char part[] = "=38\r\ntxt:# Keyspace\r\ndb0:keys=1,expires=0\r\n\r\n";
    struct info_part parts[1] = {{"durable", LIT(part)}};
    static const char want[] = "$53\r\n# Keyspace (instance durable)\r\ndb0:keys=1,expires=0\r\n\r\n";
    ck_assert_str_eq(merge("", parts, 1), want);
    static const char short_verbatim[] = "=2\r\ntx\r\n"; /* shorter than its format: not a verbatim string */
    struct info_part bad[1] = {{"durable", LIT(short_verbatim)}};
    struct bytebuf out = {0};
    ck_assert_int_eq(info_merge("", 0, bad, 1, &out), -1);
    bytebuf_free(&out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("info");
    TCase *tc = tcase_create("merge");
    tcase_add_test(tc, instance_sections_are_named_only_explicitly);
    tcase_add_test(tc, sections_are_labelled_per_instance_and_others_dropped);
    tcase_add_test(tc, several_sections_of_one_instance);
    tcase_add_test(tc, an_instance_error_is_the_reply);
    tcase_add_test(tc, a_reply_that_is_no_bulk_is_refused);
    tcase_add_test(tc, nothing_at_all_is_an_empty_bulk);
    tcase_add_test(tc, a_resp3_verbatim_part_is_merged_like_a_bulk);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
