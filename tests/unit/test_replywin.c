/* test_replywin.c: unit tests of replywin.c, a client's reply window: the first requests, learning reply sizes, growth by what the client takes, the cap, and one request taken whenever nothing is owed or held. */
#include <check.h>
#include <stdlib.h>

#include "replywin.h"

#define MIB (1024u * 1024u)

/* How many requests a client that has taken nothing may have queued, replies not come. */
static int taken_before_closed(struct replywin *w, int most)
{
    int n = 0;
    while (n < most && replywin_open(w, 0)) {
        (void)replywin_charge(w);
        n++;
    }
    return n;
}

START_TEST(test_first_requests)
{
    struct replywin w;
    replywin_init(&w, 64 * MIB);
    ck_assert_uint_eq(w.window, REPLYWIN_START);
    /* before any reply is seen: 4 requests of the first charge fill the 256 KiB window */
    ck_assert_int_eq(taken_before_closed(&w, 1000), 4);
    ck_assert_uint_eq(w.inflight, REPLYWIN_START);
}
END_TEST

START_TEST(test_one_request_goes_when_nothing_is_owed_or_held)
{
    struct replywin w;
    replywin_init(&w, 64 * MIB);
    /* a reply far larger than the window: the next request still goes once it was read */
    uint64_t ch = replywin_charge(&w);
    replywin_reply(&w, ch, 100 * MIB);
    ck_assert_uint_eq(w.est, 100 * MIB);
    ck_assert_int_eq(replywin_open(&w, 100 * MIB), 0); /* not read yet: nothing more, queued or not */
    ck_assert_int_eq(replywin_open(&w, 0), 1);         /* nothing owed, nothing held */
    (void)replywin_charge(&w);
    ck_assert_int_eq(replywin_open(&w, 0), 0); /* one owed of 100 MiB: closed */
}
END_TEST

START_TEST(test_small_replies_open_the_window)
{
    struct replywin w;
    replywin_init(&w, 64 * MIB);
    /* small replies bring the charge down an eighth of the gap at a time, to the floor */
    for (int i = 0; i < 200; i++) replywin_reply(&w, replywin_charge(&w), 5);
    ck_assert_uint_eq(w.inflight, 0);
    ck_assert_uint_eq(w.est, REPLYWIN_EST_MIN);
    ck_assert_int_eq(taken_before_closed(&w, 100000), (int)(REPLYWIN_START / REPLYWIN_EST_MIN));
}
END_TEST

START_TEST(test_a_large_reply_raises_the_charge_at_once)
{
    struct replywin w;
    replywin_init(&w, 64 * MIB);
    for (int i = 0; i < 200; i++) replywin_reply(&w, replywin_charge(&w), 5);
    replywin_reply(&w, replywin_charge(&w), MIB);
    ck_assert_uint_eq(w.est, MIB);
    replywin_reply(&w, replywin_charge(&w), 0);
    ck_assert_uint_eq(w.est, MIB - MIB / 8);
}
END_TEST

START_TEST(test_window_grows_by_what_is_taken_up_to_the_cap)
{
    struct replywin w;
    replywin_init(&w, 8 * MIB);
    replywin_taken(&w, MIB, 8 * MIB);
    ck_assert_uint_eq(w.window, REPLYWIN_START + MIB);
    replywin_taken(&w, MIB, 8 * MIB); /* nothing new taken: no growth */
    ck_assert_uint_eq(w.window, REPLYWIN_START + MIB);
    replywin_taken(&w, 100 * MIB, 8 * MIB);
    ck_assert_uint_eq(w.window, 8 * MIB);
    /* held bytes count like owed ones */
    ck_assert_int_eq(replywin_open(&w, 8 * MIB - 1), 1);
    ck_assert_int_eq(replywin_open(&w, 8 * MIB), 0);
}
END_TEST

START_TEST(test_cap_below_the_start)
{
    struct replywin w;
    replywin_init(&w, 100 * 1024);
    ck_assert_uint_eq(w.window, 100 * 1024);
    replywin_taken(&w, MIB, 100 * 1024);
    ck_assert_uint_eq(w.window, 100 * 1024);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("replywin");
    TCase *tc = tcase_create("window");
    tcase_add_test(tc, test_first_requests);
    tcase_add_test(tc, test_one_request_goes_when_nothing_is_owed_or_held);
    tcase_add_test(tc, test_small_replies_open_the_window);
    tcase_add_test(tc, test_a_large_reply_raises_the_charge_at_once);
    tcase_add_test(tc, test_window_grows_by_what_is_taken_up_to_the_cap);
    tcase_add_test(tc, test_cap_below_the_start);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
