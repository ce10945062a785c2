/* test_backend.c: unit tests for backend.c's pure part: the jittered reconnect delay. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend.h"

START_TEST(backoff_delay_stays_within_a_fifth_below)
{
    static const int steps[] = {100, 200, 400, 800, 1600, 2000};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        int b = steps[i], lo = b, hi = 0;
        uint32_t r = 2463534242u;
        for (int k = 0; k < 10000; k++) {
            r ^= r << 13;
            r ^= r >> 17;
            r ^= r << 5;
            int d = backend_backoff_delay(b, r);
            ck_assert_msg(d >= b - b / 5 && d <= b, "delay %d for backoff %d", d, b);
            if (d < lo) lo = d;
            if (d > hi) hi = d;
        }
        /* the whole window is used: connections that failed together spread over it */
        ck_assert_int_le(lo, b - b / 5 + 1);
        ck_assert_int_ge(hi, b - 1);
    }
    ck_assert_int_eq(backend_backoff_delay(100, 0), 100);
    ck_assert_int_eq(backend_backoff_delay(100, 20), 80);
    ck_assert_int_eq(backend_backoff_delay(100, 21), 100);
}
END_TEST

START_TEST(backoff_delay_still_grows)
{
    /* the longest delay of one step is below the shortest of the step after it doubled */
    for (int b = 100; b < 2000; b *= 2)
        ck_assert_int_lt(backend_backoff_delay(b, 0), backend_backoff_delay(2 * b, 2 * b / 5));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend");
    TCase *tc = tcase_create("backoff");
    tcase_add_test(tc, backoff_delay_stays_within_a_fifth_below);
    tcase_add_test(tc, backoff_delay_still_grows);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
