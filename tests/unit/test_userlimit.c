/* test_userlimit.c: unit tests for userlimit.c: the rate bucket's decision (burst, refill, waits) and the max-clients count. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "userlimit.h"

#define MS 1000000ull
#define S 1000000000ull

/* Take requests at `now` until one is refused; returns how many passed. */
static int take_all(uint64_t *tat, uint64_t now, int rate, uint64_t *wait)
{
    int n = 0;
    for (;;) {
        uint64_t next;
        *wait = userlimit_decide(*tat, now, rate, &next);
        if (*wait) {
            ck_assert_uint_eq(next, *tat); /* a refusal leaves the bucket as it was */
            return n;
        }
        *tat = next;
        n++;
        ck_assert_int_le(n, rate + 1);
    }
}

START_TEST(burst_is_a_tenth_of_the_rate_at_least_one)
{
    ck_assert_int_eq(userlimit_burst(1), 1);
    ck_assert_int_eq(userlimit_burst(9), 1);
    ck_assert_int_eq(userlimit_burst(10), 1);
    ck_assert_int_eq(userlimit_burst(200), 20);
    ck_assert_int_eq(userlimit_burst(1000000), 100000);
    ck_assert_int_eq(userlimit_want(1), 1);
    ck_assert_int_eq(userlimit_want(200), 2);
    ck_assert_int_eq(userlimit_want(100000), 1000);
}
END_TEST

START_TEST(a_new_bucket_is_full)
{
    uint64_t tat = 0, wait;
    ck_assert_int_eq(take_all(&tat, 5 * S, 200, &wait), 20);
    /* empty: 2 requests (userlimit_want(200)) pass again after 2 x 5 ms */
    ck_assert_uint_eq(wait, 10 * MS);
}
END_TEST

START_TEST(the_wait_given_is_enough)
{
    uint64_t tat = 0, wait;
    uint64_t now = 7 * S;
    (void)take_all(&tat, now, 200, &wait);
    now += wait;
    ck_assert_int_eq(take_all(&tat, now, 200, &wait), 2); /* userlimit_want(200) requests pass then */
    ck_assert_uint_gt(wait, 0);
}
END_TEST

START_TEST(held_to_the_rate_over_a_second)
{
    /* a client sending whenever allowed, waking exactly when told: the burst plus rate x 1 s */
    const int rate = 200;
    uint64_t tat = 0, wait, start = 3 * S, now = start;
    int passed = 0;
    while (now < start + S) {
        passed += take_all(&tat, now, rate, &wait);
        now += wait;
    }
    ck_assert_int_ge(passed, rate + userlimit_burst(rate) - userlimit_want(rate));
    ck_assert_int_le(passed, rate + userlimit_burst(rate) + userlimit_want(rate));
}
END_TEST

START_TEST(an_idle_bucket_refills_only_to_its_burst)
{
    uint64_t tat = 0, wait;
    (void)take_all(&tat, 1 * S, 50, &wait);
    /* a minute idle: still only 5 tokens (rate 50 / 10) */
    ck_assert_int_eq(take_all(&tat, 61 * S, 50, &wait), 5);
}
END_TEST

START_TEST(rate_one_waits_a_second)
{
    uint64_t tat = 0, wait;
    ck_assert_int_eq(take_all(&tat, 2 * S, 1, &wait), 1);
    ck_assert_uint_eq(wait, S);
    ck_assert_int_eq(take_all(&tat, 2 * S + S / 2, 1, &wait), 0);
    ck_assert_uint_eq(wait, S / 2);
}
END_TEST

START_TEST(the_largest_rate_does_not_overflow)
{
    uint64_t tat = 0, wait;
    ck_assert_int_eq(take_all(&tat, 100 * S, 1000000, &wait), 100000);
    ck_assert_uint_le(wait, 10 * MS);
    ck_assert_uint_gt(wait, 0);
}
END_TEST

START_TEST(max_clients_counts_and_refuses_the_one_over)
{
    struct userlimit_table t;
    userlimit_init(&t);
    struct userlimit *u = userlimit_get(&t, "alice");
    ck_assert_ptr_eq(userlimit_get(&t, "alice"), u);
    ck_assert_ptr_eq(userlimit_find(&t, "bob"), NULL);
    ck_assert_int_eq(userlimit_login(u, 2), 0);
    ck_assert_int_eq(userlimit_login(u, 2), 0);
    ck_assert_int_eq(userlimit_login(u, 2), -1);
    ck_assert_int_eq(userlimit_login(u, 2), -1);
    struct userlimit_view v;
    userlimit_read(u, 0, &v);
    ck_assert_int_eq(v.clients, 2);
    ck_assert_uint_eq(v.refused, 2);
    userlimit_logout(u);
    ck_assert_int_eq(userlimit_login(u, 2), 0);
    ck_assert_int_eq(userlimit_login(u, 0), 0); /* 0: no limit */
    userlimit_read(u, 0, &v);
    ck_assert_int_eq(v.clients, 3);
    userlimit_free(&t);
}
END_TEST

START_TEST(an_episode_lasts_until_a_second_without_holds)
{
    struct userlimit_table t;
    userlimit_init(&t);
    struct userlimit *u = userlimit_get(&t, "alice");
    uint64_t now = 10 * S;
    ck_assert_uint_eq(userlimit_take(u, 10, now), 0); /* the burst of rate 10: one */
    uint64_t wait = userlimit_take(u, 10, now);
    ck_assert_uint_eq(wait, 100 * MS);
    struct userlimit_view v;
    userlimit_read(u, now + 50 * MS, &v);
    ck_assert_int_eq(v.throttled, 1);
    ck_assert_uint_eq(v.episodes, 1);
    ck_assert_uint_eq(v.throttled_ns, 50 * MS);
    userlimit_tick(&t, now + 900 * MS); /* 800 ms after the hold's end: still in it */
    userlimit_read(u, now + 900 * MS, &v);
    ck_assert_int_eq(v.throttled, 1);
    userlimit_tick(&t, now + 1100 * MS + 1);
    userlimit_read(u, now + 2 * S, &v);
    ck_assert_int_eq(v.throttled, 0);
    ck_assert_uint_eq(v.throttled_ns, 100 * MS);
    ck_assert_uint_eq(v.requests, 1);
    ck_assert_uint_eq(v.held, 1);
    ck_assert_uint_eq(userlimit_take(u, 0, 0), 0); /* rate 0: only counted */
    userlimit_read(u, now + 2 * S, &v);
    ck_assert_uint_eq(v.requests, 2);
    userlimit_free(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("userlimit");
    TCase *tc = tcase_create("bucket");
    tcase_add_test(tc, burst_is_a_tenth_of_the_rate_at_least_one);
    tcase_add_test(tc, a_new_bucket_is_full);
    tcase_add_test(tc, the_wait_given_is_enough);
    tcase_add_test(tc, held_to_the_rate_over_a_second);
    tcase_add_test(tc, an_idle_bucket_refills_only_to_its_burst);
    tcase_add_test(tc, rate_one_waits_a_second);
    tcase_add_test(tc, the_largest_rate_does_not_overflow);
    tcase_add_test(tc, max_clients_counts_and_refuses_the_one_over);
    tcase_add_test(tc, an_episode_lasts_until_a_second_without_holds);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
