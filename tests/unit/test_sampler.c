/* test_sampler.c: unit tests for sampler.c's pure part (the depth command per type) and its text before a first pass. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"

START_TEST(depth_command_per_type)
{
    ck_assert_str_eq(sampler_depth_command("list"), "LLEN");
    ck_assert_str_eq(sampler_depth_command("stream"), "XLEN");
    ck_assert_str_eq(sampler_depth_command("zset"), "ZCARD");
    /* a set, a hash or a string is no queue: not counted in the depth */
    ck_assert_ptr_null(sampler_depth_command("set"));
    ck_assert_ptr_null(sampler_depth_command("hash"));
    ck_assert_ptr_null(sampler_depth_command("string"));
    ck_assert_ptr_null(sampler_depth_command("none")); /* deleted between SCAN and TYPE */
    ck_assert_ptr_null(sampler_depth_command("List"));
}
END_TEST

START_TEST(nothing_before_a_first_pass)
{
    sampler_reset();
    const char *inst[] = {"durable", "cache"};
    struct bytebuf out = {0};
    sampler_format_prometheus(inst, 2, &out);
    ck_assert_uint_eq(out.len, 0);
    bytebuf_free(&out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sampler");
    TCase *tc = tcase_create("sampler");
    tcase_add_test(tc, depth_command_per_type);
    tcase_add_test(tc, nothing_before_a_first_pass);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
