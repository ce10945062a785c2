/* test_args.c: unit tests for args.c: option words and integers read exactly as Redis reads them. */
#include <check.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

#define WORD_IS(lit, word) args_word_is(lit, sizeof(lit) - 1, word)

START_TEST(word_is_case_insensitive_c_string)
{
    ck_assert(WORD_IS("STORE", "STORE"));
    ck_assert(WORD_IS("store", "STORE"));
    ck_assert(WORD_IS("sToRe", "store"));
    /* strcasecmp stops at the argument's first NUL: Redis reads "STORE\0..." as STORE */
    ck_assert(WORD_IS("STORE\0", "STORE"));
    ck_assert(WORD_IS("STORE\0junk", "STORE"));
    ck_assert(WORD_IS("db\0\0", "DB"));
    ck_assert(!WORD_IS("STOR", "STORE"));
    ck_assert(!WORD_IS("STORES", "STORE"));
    ck_assert(!WORD_IS("STO\0RE", "STORE"));
    ck_assert(!WORD_IS("", "STORE"));
    ck_assert(!WORD_IS("\0STORE", "STORE"));
    ck_assert(!WORD_IS(" STORE", "STORE"));
}
END_TEST

START_TEST(ll_is_string2ll)
{
    static const struct {
        const char *s;
        long long want;
    } good[] = {
        {"0", 0},
        {"1", 1},
        {"-1", -1},
        {"99999999", 99999999},
        {"9223372036854775807", LLONG_MAX},
        {"-9223372036854775808", LLONG_MIN},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        long long v = 42;
        ck_assert_msg(args_ll(good[i].s, strlen(good[i].s), &v) == 0, "'%s' should parse", good[i].s);
        ck_assert_int_eq(v, good[i].want);
    }
    static const char *const bad[] = {
        "",
        "-",
        "00",
        "-0",
        "01",
        "+1",
        " 1",
        "1 ",
        "1x",
        "0x10",
        "9223372036854775808",
        "-9223372036854775809",
        "18446744073709551616",
        "123456789012345678901",
        "1.0",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long long v = 42;
        ck_assert_msg(args_ll(bad[i], strlen(bad[i]), &v) == -1, "'%s' should be refused", bad[i]);
        ck_assert_int_eq(v, 42);
    }
    long long v = 42;
    ck_assert_int_eq(args_ll("1\0", 2, &v), -1); /* a NUL is not a digit to string2ll */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("args");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, word_is_case_insensitive_c_string);
    tcase_add_test(tc, ll_is_string2ll);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
