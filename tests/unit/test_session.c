/* test_session.c: unit tests for session.c's transitions: the one copy of the client's state policy reads. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>

#include "session.h"

START_TEST(init_is_normal_and_watches_nothing)
{
    struct session s;
    session_init(&s, 1);
    ck_assert_int_eq(s.mode, SESSION_NORMAL);
    ck_assert_int_eq(s.authenticated, 1);
    ck_assert_int_eq(s.multi_instance, -1);
    ck_assert_int_eq(s.watch_instance, -1);
    session_init(&s, 0);
    ck_assert_int_eq(s.authenticated, 0);
}
END_TEST

START_TEST(multi_takes_its_first_instance)
{
    struct session s;
    session_init(&s, 1);
    session_multi_begin(&s);
    ck_assert_int_eq(s.mode, SESSION_MULTI);
    session_multi_queued(&s, -1, -1); /* PING: any instance */
    ck_assert_int_eq(s.multi_instance, -1);
    session_multi_queued(&s, 1, -1);
    session_multi_queued(&s, 0, -1); /* policy refuses a second instance; the first stays */
    ck_assert_int_eq(s.multi_instance, 1);
    session_multi_end(&s);
    ck_assert_int_eq(s.mode, SESSION_NORMAL);
    ck_assert_int_eq(s.multi_instance, -1);
}
END_TEST

START_TEST(multi_on_a_cluster_tracks_its_slot)
{
    struct session s;
    session_init(&s, 1);
    session_multi_begin(&s);
    session_multi_queued(&s, 0, -1); /* keyless */
    session_multi_queued(&s, 0, 77);
    session_multi_queued(&s, 0, 77);
    ck_assert_int_eq(s.multi_slot, 77);
    ck_assert_int_eq(s.multi_crossslot, 0);
    session_multi_queued(&s, 0, 78); /* Redis answers EXEC -CROSSSLOT */
    ck_assert_int_eq(s.multi_crossslot, 1);
    ck_assert_int_eq(s.multi_slot, 77);
    session_multi_end(&s);
    ck_assert_int_eq(s.multi_slot, -1);
    ck_assert_int_eq(s.multi_crossslot, 0);
    session_multi_begin(&s);
    session_multi_queued(&s, 0, -2); /* one command's keys in several slots */
    ck_assert_int_eq(s.multi_crossslot, 1);
    session_multi_end(&s);
    session_watch(&s, 0, 9);
    ck_assert_int_eq(s.watch_slot, 9);
    session_unwatch(&s);
    ck_assert_int_eq(s.watch_slot, -1);
}
END_TEST

START_TEST(watch_spans_multi_and_ends_on_unwatch)
{
    struct session s;
    session_init(&s, 1);
    session_watch(&s, 2, -1);
    session_multi_begin(&s);
    ck_assert_int_eq(s.watch_instance, 2);
    session_multi_end(&s);
    ck_assert_int_eq(s.watch_instance, 2); /* EXEC's caller unwatches, not the transaction's end */
    session_watch(&s, 2, -1);              /* WATCH again on the same pin */
    session_unwatch(&s);
    ck_assert_int_eq(s.watch_instance, -1);
}
END_TEST

START_TEST(block_and_unblock)
{
    struct session s;
    session_init(&s, 1);
    session_block(&s);
    ck_assert_int_eq(s.mode, SESSION_BLOCKED);
    session_unblock(&s);
    ck_assert_int_eq(s.mode, SESSION_NORMAL);
}
END_TEST

START_TEST(subscribed_follows_the_counts)
{
    struct session s;
    session_init(&s, 1);
    session_set_subscribed(&s, 1);
    ck_assert_int_eq(s.mode, SESSION_SUBSCRIBED);
    session_set_subscribed(&s, 1);
    ck_assert_int_eq(s.mode, SESSION_SUBSCRIBED);
    session_set_subscribed(&s, 0);
    ck_assert_int_eq(s.mode, SESSION_NORMAL);
    /* an idle subscriber connection lost while in MULTI or BLOCKED leaves the mode alone */
    session_multi_begin(&s);
    session_set_subscribed(&s, 0);
    ck_assert_int_eq(s.mode, SESSION_MULTI);
    session_multi_end(&s);
    session_block(&s);
    session_set_subscribed(&s, 0);
    ck_assert_int_eq(s.mode, SESSION_BLOCKED);
}
END_TEST

/* Leaving a state the session is not in is a bug of the caller: the asserts stop it. */
START_TEST(wrong_transition_multi_end_outside_multi)
{
    struct session s;
    session_init(&s, 1);
    session_multi_end(&s);
}
END_TEST

START_TEST(wrong_transition_multi_inside_subscribed)
{
    struct session s;
    session_init(&s, 1);
    session_set_subscribed(&s, 1);
    session_multi_begin(&s);
}
END_TEST

START_TEST(wrong_transition_block_in_multi)
{
    struct session s;
    session_init(&s, 1);
    session_multi_begin(&s);
    session_block(&s);
}
END_TEST

START_TEST(reset_from_every_state_is_a_new_client_that_keeps_its_last_write)
{
    struct session s;
    static const struct user_conf u = {.name = "queues"};
    enum session_mode from[] = {SESSION_NORMAL, SESSION_MULTI, SESSION_SUBSCRIBED};
    for (size_t i = 0; i < sizeof(from) / sizeof(from[0]); i++) {
        session_init(&s, 0);
        s.authenticated = 1; /* AUTH succeeded */
        s.user = &u;
        session_wrote(&s, 1, 77, 0);
        session_watch(&s, 1, -1);
        if (from[i] == SESSION_MULTI) {
            session_multi_begin(&s);
            session_multi_queued(&s, 1, -1);
        } else if (from[i] == SESSION_SUBSCRIBED) {
            session_set_subscribed(&s, 1);
        }
        session_reset(&s, 0); /* users configured: logged out */
        ck_assert_int_eq(s.mode, SESSION_NORMAL);
        ck_assert_int_eq(s.authenticated, 0);
        ck_assert_ptr_null(s.user);
        ck_assert_int_eq(s.watch_instance, -1);
        ck_assert_int_eq(s.multi_instance, -1);
        ck_assert_int_eq(s.wrote, 1); /* Redis keeps the connection's replication offset */
        ck_assert_int_eq(s.write_instance, 1);
        ck_assert_int_eq(s.write_slot, 77);
    }
    session_init(&s, 1);
    session_reset(&s, 1); /* no users: still authenticated, nothing written yet */
    ck_assert_int_eq(s.authenticated, 1);
    ck_assert_int_eq(s.wrote, 0);
}
END_TEST

START_TEST(wrote_remembers_the_last_instance)
{
    struct session s;
    session_init(&s, 1);
    ck_assert_int_eq(s.wrote, 0);
    ck_assert_int_eq(s.write_slot, -1);
    session_wrote(&s, 0, 5, 0);
    session_wrote(&s, 1, -1, 0);
    ck_assert_int_eq(s.wrote, 1);
    ck_assert_int_eq(s.write_instance, 1);
    ck_assert_int_eq(s.write_slot, -1);
}
END_TEST

START_TEST(wrong_transition_reset_while_blocked)
{
    struct session s;
    session_init(&s, 1);
    session_block(&s);
    session_reset(&s, 1);
}
END_TEST

START_TEST(wrong_transition_watch_a_second_instance)
{
    struct session s;
    session_init(&s, 1);
    session_watch(&s, 0, -1);
    session_watch(&s, 1, -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("session");
    TCase *tc = tcase_create("transitions");
    tcase_add_test(tc, init_is_normal_and_watches_nothing);
    tcase_add_test(tc, multi_takes_its_first_instance);
    tcase_add_test(tc, watch_spans_multi_and_ends_on_unwatch);
    tcase_add_test(tc, multi_on_a_cluster_tracks_its_slot);
    tcase_add_test(tc, block_and_unblock);
    tcase_add_test(tc, subscribed_follows_the_counts);
    tcase_add_test_raise_signal(tc, wrong_transition_multi_end_outside_multi, SIGABRT);
    tcase_add_test_raise_signal(tc, wrong_transition_multi_inside_subscribed, SIGABRT);
    tcase_add_test_raise_signal(tc, wrong_transition_block_in_multi, SIGABRT);
    tcase_add_test_raise_signal(tc, wrong_transition_watch_a_second_instance, SIGABRT);
    tcase_add_test(tc, reset_from_every_state_is_a_new_client_that_keeps_its_last_write);
    tcase_add_test(tc, wrote_remembers_the_last_instance);
    tcase_add_test_raise_signal(tc, wrong_transition_reset_while_blocked, SIGABRT);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
