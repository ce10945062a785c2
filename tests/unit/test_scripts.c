/* test_scripts.c: unit tests of scripts.c, the table of scripts keygate saw: SHA1 names as Redis gives them, a name parsed in either case, the bounds (count and bytes, the least recent going), SCRIPT LOAD written for a held script only, the command names. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scripts.h"

/* Redis's SHA1 of "return 1" (SCRIPT LOAD "return 1" on redis-server 7.0). */
static const char return1_sha[] = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db";

static void sha_of(const char *body, uint8_t sha[SCRIPTS_SHA_LEN])
{
    scripts_sha1(body, strlen(body), sha);
}

START_TEST(test_sha1_is_redis_name)
{
    uint8_t a[SCRIPTS_SHA_LEN], b[SCRIPTS_SHA_LEN];
    sha_of("return 1", a);
    ck_assert_int_eq(scripts_sha_parse(return1_sha, 40, b), 0);
    ck_assert_mem_eq(a, b, SCRIPTS_SHA_LEN);
}
END_TEST

START_TEST(test_sha_parse)
{
    uint8_t a[SCRIPTS_SHA_LEN], b[SCRIPTS_SHA_LEN];
    ck_assert_int_eq(scripts_sha_parse("E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", 40, a), 0); /* Redis lowers it */
    ck_assert_int_eq(scripts_sha_parse(return1_sha, 40, b), 0);
    ck_assert_mem_eq(a, b, SCRIPTS_SHA_LEN);
    ck_assert_int_eq(scripts_sha_parse(return1_sha, 39, a), -1);
    ck_assert_int_eq(scripts_sha_parse("e0e1f9fabfc9d4800c877a703b823ac0578ff8dbx", 41, a), -1);
    ck_assert_int_eq(scripts_sha_parse("g0e1f9fabfc9d4800c877a703b823ac0578ff8db", 40, a), -1);
    ck_assert_int_eq(scripts_sha_parse("", 0, a), -1);
}
END_TEST

START_TEST(test_remember_and_load)
{
    struct scripts_table t;
    scripts_init(&t, SCRIPTS_MAX_COUNT, SCRIPTS_MAX_BYTES);
    uint8_t sha[SCRIPTS_SHA_LEN];
    sha_of("return 1", sha);
    struct bytebuf out = {0};
    size_t len = 99;
    ck_assert_int_eq(scripts_known(&t, sha), 0);
    ck_assert_int_eq(scripts_write_load(&t, sha, &out, &len), 0);
    ck_assert_uint_eq(out.len, 0);
    ck_assert_uint_eq(len, 99);
    ck_assert_int_eq(scripts_remember(&t, STR_AND_LEN("return 1")), 1);
    ck_assert_int_eq(scripts_remember(&t, STR_AND_LEN("return 1")), 0); /* known */
    ck_assert_uint_eq(t.count, 1);
    ck_assert_uint_eq(t.bytes, 8);
    ck_assert_int_eq(scripts_known(&t, sha), 1);
    ck_assert_int_eq(scripts_write_load(&t, sha, &out, &len), 1);
    static const char want[] = "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$8\r\nreturn 1\r\n";
    ck_assert_uint_eq(out.len, sizeof(want) - 1);
    ck_assert_mem_eq(out.p, want, sizeof(want) - 1);
    ck_assert_uint_eq(len, 8);
    bytebuf_free(&out);
    scripts_free(&t);
}
END_TEST

/* Past the count bound the least recently seen goes; seeing one again keeps it. */
START_TEST(test_count_bound_evicts_least_recent)
{
    struct scripts_table t;
    scripts_init(&t, 3, SCRIPTS_MAX_BYTES);
    uint8_t a[SCRIPTS_SHA_LEN], b[SCRIPTS_SHA_LEN], c[SCRIPTS_SHA_LEN], d[SCRIPTS_SHA_LEN];
    sha_of("return 'a'", a);
    sha_of("return 'b'", b);
    sha_of("return 'c'", c);
    sha_of("return 'd'", d);
    ck_assert_int_eq(scripts_remember(&t, STR_AND_LEN("return 'a'")), 1);
    ck_assert_int_eq(scripts_remember(&t, STR_AND_LEN("return 'b'")), 1);
    ck_assert_int_eq(scripts_remember(&t, STR_AND_LEN("return 'c'")), 1);
    ck_assert_int_eq(scripts_remember(&t, STR_AND_LEN("return 'a'")), 0); /* a is the most recent now */
    ck_assert_int_eq(scripts_remember(&t, STR_AND_LEN("return 'd'")), 1); /* b goes */
    ck_assert_uint_eq(t.count, 3);
    ck_assert_int_eq(scripts_known(&t, a), 1);
    ck_assert_int_eq(scripts_known(&t, b), 0);
    ck_assert_int_eq(scripts_known(&t, c), 1);
    ck_assert_int_eq(scripts_known(&t, d), 1);
    scripts_free(&t);
}
END_TEST

/* Past the byte bound the least recent go until the new body fits; a body over it is not kept. */
START_TEST(test_byte_bound)
{
    struct scripts_table t;
    scripts_init(&t, 100, 25);
    ck_assert_int_eq(scripts_remember(&t, STR_AND_LEN("return 'a'")), 1);  /* 10 bytes */
    ck_assert_int_eq(scripts_remember(&t, STR_AND_LEN("return 'b'")), 1);  /* 20 */
    ck_assert_int_eq(scripts_remember(&t, STR_AND_LEN("return 'cc'")), 1); /* 11: a goes */
    ck_assert_uint_eq(t.count, 2);
    ck_assert_uint_eq(t.bytes, 21);
    uint8_t a[SCRIPTS_SHA_LEN];
    sha_of("return 'a'", a);
    ck_assert_int_eq(scripts_known(&t, a), 0);
    ck_assert_int_eq(scripts_remember(&t, STR_AND_LEN("return 'abcdefghijklmnopq'")), -1); /* 26 > 25 */
    ck_assert_uint_eq(t.count, 2);
    ck_assert_int_eq(scripts_remember(&t, STR_AND_LEN("return 'abcdefghijklmnop'")), 1); /* 25: all others go */
    ck_assert_uint_eq(t.count, 1);
    ck_assert_uint_eq(t.bytes, 25);
    scripts_free(&t);
}
END_TEST

/* Many scripts through one table: the chains and the recency list stay whole. */
START_TEST(test_many)
{
    struct scripts_table t;
    scripts_init(&t, SCRIPTS_MAX_COUNT, SCRIPTS_MAX_BYTES);
    char body[64];
    for (int i = 0; i < 3 * SCRIPTS_MAX_COUNT; i++) {
        int n = snprintf(body, sizeof body, "return %d", i);
        ck_assert_int_eq(scripts_remember(&t, body, (size_t)n), 1);
    }
    ck_assert_uint_eq(t.count, SCRIPTS_MAX_COUNT);
    for (int i = 0; i < 3 * SCRIPTS_MAX_COUNT; i++) {
        int n = snprintf(body, sizeof body, "return %d", i);
        uint8_t sha[SCRIPTS_SHA_LEN];
        scripts_sha1(body, (size_t)n, sha);
        ck_assert_int_eq(scripts_known(&t, sha), i >= 2 * SCRIPTS_MAX_COUNT);
    }
    scripts_free(&t);
}
END_TEST

START_TEST(test_command_of)
{
    ck_assert_int_eq(scripts_command_of(STR_AND_LEN("EVAL")), SCRIPTS_EVAL);
    ck_assert_int_eq(scripts_command_of(STR_AND_LEN("eval_ro")), SCRIPTS_EVAL);
    ck_assert_int_eq(scripts_command_of(STR_AND_LEN("EvalSha")), SCRIPTS_EVALSHA);
    ck_assert_int_eq(scripts_command_of(STR_AND_LEN("EVALSHA_RO")), SCRIPTS_EVALSHA);
    ck_assert_int_eq(scripts_command_of(STR_AND_LEN("EVALS")), SCRIPTS_OTHER);
    ck_assert_int_eq(scripts_command_of(STR_AND_LEN("FCALL")), SCRIPTS_OTHER);
    ck_assert_int_eq(scripts_command_of(STR_AND_LEN("SCRIPT")), SCRIPTS_SCRIPT); /* its LOAD: a body to remember */
    ck_assert_int_eq(scripts_command_of(STR_AND_LEN("script")), SCRIPTS_SCRIPT);
    ck_assert_int_eq(scripts_command_of(STR_AND_LEN("SCRIPTS")), SCRIPTS_OTHER);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scripts");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, test_sha1_is_redis_name);
    tcase_add_test(tc, test_sha_parse);
    tcase_add_test(tc, test_remember_and_load);
    tcase_add_test(tc, test_count_bound_evicts_least_recent);
    tcase_add_test(tc, test_byte_bound);
    tcase_add_test(tc, test_many);
    tcase_add_test(tc, test_command_of);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
