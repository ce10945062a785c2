/* test_blocked.c: unit tests of the process-wide table of blocked clients (CLIENT UNBLOCK from any worker). */
#include <check.h>
#include <stdlib.h>

#include "blocked.h"

static struct blocked_table t;

static void setup(void)
{
    blocked_init(&t);
}

static void teardown(void)
{
    blocked_free(&t);
}

/* A blocked client is claimed by its own user only, once its connection's id is known; the
 * owner then learns at removal that an UNBLOCK was sent (its connection must not be reused). */
START_TEST(test_issue19_claim_same_user_known_id)
{
    int instance = -1;
    long long sid = 0;
    blocked_add(&t, 7, "app", 1, 0);
    ck_assert_int_eq(blocked_claim(&t, 7, "app", &instance, &sid), BLOCKED_PENDING); /* CLIENT ID not back yet */
    blocked_set_server_id(&t, 7, 42);
    ck_assert_int_eq(blocked_claim(&t, 7, "other", &instance, &sid), BLOCKED_NONE); /* another user: unknown */
    ck_assert_int_eq(blocked_claim(&t, 8, "app", &instance, &sid), BLOCKED_NONE);
    ck_assert_int_eq(blocked_claim(&t, 7, "app", &instance, &sid), BLOCKED_CLAIMED);
    ck_assert_int_eq(instance, 1);
    ck_assert_int_eq(sid, 42);
    ck_assert_int_eq(blocked_remove(&t, 7), 1); /* an UNBLOCK was sent */
    ck_assert_int_eq(blocked_claim(&t, 7, "app", &instance, &sid), BLOCKED_NONE);
    ck_assert_int_eq(blocked_remove(&t, 7), 0); /* gone */
}
END_TEST

/* Without users (NULL) any client may be claimed; removal without a claim says none was sent;
 * ids sharing a bucket are kept apart. */
START_TEST(test_issue19_no_users_and_shared_buckets)
{
    int instance = -1;
    long long sid = 0;
    blocked_add(&t, 5, NULL, 0, 11);
    blocked_add(&t, 5 + BLOCKED_BUCKETS, "app", 1, 12);
    blocked_add(&t, 5 + 2 * BLOCKED_BUCKETS, NULL, 0, 13);
    ck_assert_int_eq(blocked_claim(&t, 5, NULL, &instance, &sid), BLOCKED_CLAIMED);
    ck_assert_int_eq(sid, 11);
    ck_assert_int_eq(blocked_remove(&t, 5 + BLOCKED_BUCKETS), 0);
    ck_assert_int_eq(blocked_claim(&t, 5 + 2 * BLOCKED_BUCKETS, NULL, &instance, &sid), BLOCKED_CLAIMED);
    ck_assert_int_eq(sid, 13);
    ck_assert_int_eq(blocked_remove(&t, 5), 1);
    ck_assert_int_eq(blocked_claim(&t, 5 + BLOCKED_BUCKETS, "app", &instance, &sid), BLOCKED_NONE);
    /* entry 5 + 2*BUCKETS is left for blocked_free */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("blocked");
    TCase *tc = tcase_create("table");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_issue19_claim_same_user_known_id);
    tcase_add_test(tc, test_issue19_no_users_and_shared_buckets);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
