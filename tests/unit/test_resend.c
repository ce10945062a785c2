/* test_resend.c: unit tests of resend.c, the "did it run?" table: each reply kind classified from real Redis error replies, and each row of the decision (taken now, taken after a wait, a script loaded first, passed, given up) for a cluster and a Sentinel instance, blocking or not. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "resend.h"

/* A char array (a literal) as (pointer, length without the final NUL). */
#define BYTES(a) (a), (sizeof(a) - 1)

/* Replies as Redis 7.0 sends them (cluster.c, server.c). */
START_TEST(test_classify_redis_replies)
{
    ck_assert_int_eq(resend_classify(BYTES("-MOVED 3999 127.0.0.1:6381\r\n"), 1), RESEND_MOVED);
    ck_assert_int_eq(resend_classify(BYTES("-ASK 3999 127.0.0.1:6381\r\n"), 1), RESEND_ASK);
    ck_assert_int_eq(resend_classify(BYTES("-TRYAGAIN Multiple keys request during rehashing of slot\r\n"), 1),
                     RESEND_TRYAGAIN);
    ck_assert_int_eq(resend_classify(BYTES("-CLUSTERDOWN The cluster is down\r\n"), 1), RESEND_CLUSTERDOWN);
    ck_assert_int_eq(resend_classify(BYTES("-CLUSTERDOWN The cluster is down and only accepts read commands\r\n"), 1),
                     RESEND_CLUSTERDOWN);
    ck_assert_int_eq(resend_classify(BYTES("-CLUSTERDOWN Hash slot not served\r\n"), 1), RESEND_UNSERVED);
    ck_assert_int_eq(resend_classify(BYTES("-READONLY You can't write against a read only replica.\r\n"), 1),
                     RESEND_READONLY);
    ck_assert_int_eq(resend_classify(BYTES("-LOADING Redis is loading the dataset in memory\r\n"), 1), RESEND_LOADING);
    ck_assert_int_eq(
        resend_classify(BYTES("-UNBLOCKED force unblock from blocking operation, instance state changed (master -> "
                              "replica?)\r\n"),
                        1),
        RESEND_UNBLOCKED);
    ck_assert_int_eq(resend_classify(BYTES("-NOSCRIPT No matching script. Please use EVAL.\r\n"), 1), RESEND_NOSCRIPT);
}
END_TEST

/* Replies that ran, or whose first word only looks like one of them. */
START_TEST(test_classify_others)
{
    ck_assert_int_eq(resend_classify(BYTES("+OK\r\n"), 1), RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("$5\r\n-MOVE\r\n"), 1), RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("-ERR unknown command\r\n"), 1), RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("-MOVEDX 1 a:1\r\n"), 1), RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("-ASKING\r\n"), 1), RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("-CLUSTERDOWNX\r\n"), 1), RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("-CLUSTERDOWN Hash slot not served yet\r\n"), 1), RESEND_CLUSTERDOWN);
    ck_assert_int_eq(resend_classify(BYTES("-WRONGTYPE Operation against a key holding the wrong kind\r\n"), 1),
                     RESEND_OTHER);
    ck_assert_int_eq(resend_classify("", 0, 1), RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("-NOSCRIPTS x\r\n"), 1), RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("-ERR NOSCRIPT\r\n"), 1), RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("$8\r\nNOSCRIPT\r\n"), 1), RESEND_OTHER);
}
END_TEST

/* The words, not a prefix of another (moved from test_slotmap.c's slotmap_is_retryable). */
START_TEST(test_classify_whole_words)
{
    ck_assert_int_eq(resend_classify(BYTES("-CROSSSLOT Keys in request don't hash to the same slot\r\n"), 1),
                     RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("-TRYAGAIN\r\n"), 1), RESEND_TRYAGAIN);
    ck_assert_int_eq(resend_classify(BYTES("-TRYAGAIN"), 1), RESEND_TRYAGAIN);
    ck_assert_int_eq(resend_classify(BYTES("-TRYAGAINX\r\n"), 1), RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("-TRY"), 1), RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("-ERR TRYAGAIN\r\n"), 1), RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("+TRYAGAIN\r\n"), 1), RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("$9\r\nTRYAGAIN\r\n"), 1), RESEND_OTHER);
    ck_assert_int_eq(resend_classify(BYTES("-CLUSTERDOWN Hash slot not served"), 1), RESEND_UNSERVED);
}
END_TEST

/* No reply: the connection was lost, before or after the request was written. */
START_TEST(test_classify_lost)
{
    ck_assert_int_eq(resend_classify(NULL, 0, 0), RESEND_LOST_UNSENT);
    ck_assert_int_eq(resend_classify(NULL, 0, 1), RESEND_LOST_WRITTEN);
}
END_TEST

/* The table, row by row: kind -> action on a cluster (c) and a Sentinel instance (s), for a
 * command that does not block (nb) and one that does (b). */
static const struct row {
    enum resend_kind kind;
    enum resend_action c_nb, c_b, s_nb, s_b;
} rows[] = {
    {RESEND_OTHER, RESEND_PASS, RESEND_PASS, RESEND_PASS, RESEND_PASS},
    {RESEND_MOVED, RESEND_GO, RESEND_GO, RESEND_GO, RESEND_GO},
    {RESEND_ASK, RESEND_GO, RESEND_GO, RESEND_GO, RESEND_GO},
    {RESEND_TRYAGAIN, RESEND_WAIT, RESEND_WAIT, RESEND_WAIT, RESEND_WAIT},
    {RESEND_CLUSTERDOWN, RESEND_WAIT, RESEND_WAIT, RESEND_WAIT, RESEND_WAIT},
    {RESEND_UNSERVED, RESEND_GIVE_UP, RESEND_GIVE_UP, RESEND_GIVE_UP, RESEND_GIVE_UP},
    {RESEND_READONLY, RESEND_PASS, RESEND_PASS, RESEND_WAIT, RESEND_WAIT},
    {RESEND_LOADING, RESEND_PASS, RESEND_PASS, RESEND_WAIT, RESEND_WAIT},
    {RESEND_UNBLOCKED, RESEND_PASS, RESEND_PASS, RESEND_PASS, RESEND_WAIT},
    {RESEND_LOST_UNSENT, RESEND_WAIT, RESEND_WAIT, RESEND_WAIT, RESEND_WAIT},
    {RESEND_LOST_WRITTEN, RESEND_PASS, RESEND_PASS, RESEND_PASS, RESEND_PASS},
    {RESEND_NOSCRIPT, RESEND_LOAD, RESEND_LOAD, RESEND_LOAD, RESEND_LOAD},
};

START_TEST(test_decide_row)
{
    const struct row *r = &rows[_i];
    ck_assert_msg(resend_decide(r->kind, 0, 0) == r->c_nb, "kind %d on a cluster, not blocking", r->kind);
    ck_assert_msg(resend_decide(r->kind, 0, 1) == r->c_b, "kind %d on a cluster, blocking", r->kind);
    ck_assert_msg(resend_decide(r->kind, 1, 0) == r->s_nb, "kind %d on a Sentinel instance, not blocking", r->kind);
    ck_assert_msg(resend_decide(r->kind, 1, 1) == r->s_b, "kind %d on a Sentinel instance, blocking", r->kind);
}
END_TEST

/* Every kind has its row. */
START_TEST(test_decide_every_kind_listed)
{
    ck_assert_int_eq(sizeof(rows) / sizeof(rows[0]), RESEND_NOSCRIPT + 1);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) ck_assert_int_eq(rows[i].kind, (int)i);
}
END_TEST

/* The cluster refusals (WATCH and EXEC on a pin read these as "not run here"). */
START_TEST(test_cluster_refusals)
{
    for (int k = RESEND_OTHER; k <= RESEND_NOSCRIPT; k++) {
        int want = k == RESEND_MOVED || k == RESEND_ASK || k == RESEND_TRYAGAIN || k == RESEND_CLUSTERDOWN ||
                   k == RESEND_UNSERVED;
        ck_assert_msg(resend_is_cluster_refusal((enum resend_kind)k) == want, "kind %d", k);
    }
}
END_TEST

/* A NOSCRIPT on a cluster is taken only for a lone EVALSHA whose script keygate holds, once:
 * every row of (evalsha, known, loaded). */
START_TEST(test_decide_load_row)
{
    int evalsha = _i & 1, known = (_i >> 1) & 1, loaded = (_i >> 2) & 1;
    enum resend_action want = evalsha && known && !loaded ? RESEND_LOAD : RESEND_PASS;
    ck_assert_msg(resend_decide_load(evalsha, known, loaded) == want, "evalsha %d known %d loaded %d", evalsha, known,
                  loaded);
}
END_TEST

/* The rows spelled out: the one that loads, and each reason to pass. */
START_TEST(test_decide_load_reasons)
{
    ck_assert_int_eq(resend_decide_load(1, 1, 0), RESEND_LOAD);
    ck_assert_int_eq(resend_decide_load(0, 1, 0), RESEND_PASS); /* in a MULTI, or not an EVALSHA */
    ck_assert_int_eq(resend_decide_load(1, 0, 0), RESEND_PASS); /* never seen through this keygate */
    ck_assert_int_eq(resend_decide_load(1, 1, 1), RESEND_PASS); /* loaded once: the second NOSCRIPT passes */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("resend");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, test_classify_redis_replies);
    tcase_add_test(tc, test_classify_others);
    tcase_add_test(tc, test_classify_whole_words);
    tcase_add_test(tc, test_classify_lost);
    tcase_add_loop_test(tc, test_decide_row, 0, (int)(sizeof(rows) / sizeof(rows[0])));
    tcase_add_test(tc, test_decide_every_kind_listed);
    tcase_add_test(tc, test_cluster_refusals);
    tcase_add_loop_test(tc, test_decide_load_row, 0, 8);
    tcase_add_test(tc, test_decide_load_reasons);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
