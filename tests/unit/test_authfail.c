/* test_authfail.c: unit tests for authfail.c: the failed-AUTH table's keys, turns, delays, decay, closing, logging and bound. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "authfail.h"

static struct authfail *table_new(void)
{
    struct authfail *t = malloc(sizeof(*t));
    ck_assert_ptr_nonnull(t);
    authfail_init(t);
    return t;
}

static struct authfail_key key(const char *addr)
{
    return authfail_key_of(addr, -1);
}

static struct authfail_key v4(unsigned n)
{
    char a[32];
    snprintf(a, sizeof a, "10.%u.%u.%u:1000", (n >> 16) & 255, (n >> 8) & 255, n & 255);
    return key(a);
}

static int same(struct authfail_key a, struct authfail_key b)
{
    return a.family == b.family && a.uid == b.uid && memcmp(a.addr, b.addr, sizeof a.addr) == 0;
}

static const char *label(struct authfail_key k)
{
    static char out[AUTHFAIL_LABEL_MAX];
    authfail_key_format(&k, out, sizeof out);
    return out;
}

START_TEST(keys_are_addresses_without_ports)
{
    ck_assert(same(key("127.0.0.1:5000"), key("127.0.0.1:6000")));
    ck_assert(!same(key("127.0.0.1:5000"), key("127.0.0.2:5000")));
    ck_assert_str_eq(label(key("127.0.0.1:5000")), "127.0.0.1");
    /* IPv6: one /64 is one bucket (one host or customer holds a whole /64) */
    ck_assert(same(key("[2001:db8:1:2:aaaa::1]:5"), key("[2001:db8:1:2:bbbb::9]:7")));
    ck_assert(!same(key("[2001:db8:1:2::1]:5"), key("[2001:db8:1:3::1]:5")));
    ck_assert_str_eq(label(key("[2001:db8:1:2:aaaa::1]:5")), "2001:db8:1:2::/64");
    /* a dual-stack listener's IPv4 client is its IPv4 address, not the one ::ffff:0:0/64 bucket */
    ck_assert(same(key("[::ffff:10.0.0.1]:5"), key("10.0.0.1:9")));
    ck_assert(!same(key("[::ffff:10.0.0.1]:5"), key("[::ffff:10.0.0.2]:5")));
    /* unix sockets: the peer's uid */
    ck_assert(same(authfail_key_of("unix", 1000), authfail_key_of("unix", 1000)));
    ck_assert(!same(authfail_key_of("unix", 1000), authfail_key_of("unix", 1001)));
    ck_assert_str_eq(label(authfail_key_of("unix", 1000)), "unix uid 1000");
    ck_assert_str_eq(label(authfail_key_of("unix", -1)), "unix");
    /* anything unreadable shares one bucket */
    ck_assert_int_eq(key("?").family, AUTHFAIL_OTHER);
    ck_assert(same(key("?"), key("300.1.1.1:5")));
    ck_assert_str_eq(label(key("?")), "unknown");
}
END_TEST

START_TEST(delay_doubles_up_to_its_cap)
{
    ck_assert_int_eq(authfail_delay(1), 100);
    ck_assert_int_eq(authfail_delay(2), 200);
    ck_assert_int_eq(authfail_delay(3), 400);
    ck_assert_int_eq(authfail_delay(6), 3200);
    ck_assert_int_eq(authfail_delay(7), AUTHFAIL_DELAY_MAX_MS);
    ck_assert_int_eq(authfail_delay(AUTHFAIL_MAX_REMEMBERED), AUTHFAIL_DELAY_MAX_MS);
    ck_assert_int_eq(authfail_delay(1000000), AUTHFAIL_DELAY_MAX_MS);
}
END_TEST

START_TEST(a_clean_address_is_never_held)
{
    struct authfail *t = table_new();
    struct authfail_key k = key("127.0.0.1:1");
    for (int i = 0; i < 100; i++) ck_assert_int_eq(authfail_admit(t, &k, 1000), 0);
    authfail_passed(t, &k, 1000);
    ck_assert_int_eq(authfail_admit(t, &k, 1000), 0);
    free(t);
}
END_TEST

START_TEST(after_a_failure_the_address_takes_turns)
{
    struct authfail *t = table_new();
    struct authfail_key k = key("127.0.0.1:1"), other = key("127.0.0.2:1");
    struct authfail_verdict v = authfail_failed(t, &k, 1000);
    ck_assert_int_eq(v.delay_ms, 100);
    ck_assert_int_eq(v.failures, 1);
    ck_assert_int_eq(authfail_admit(t, &k, 1000), 100); /* any connection of the address waits */
    ck_assert_int_eq(authfail_admit(t, &k, 1060), 40);
    ck_assert_int_eq(authfail_admit(t, &other, 1000), 0); /* another address does not */
    ck_assert_int_eq(authfail_admit(t, &k, 1100), 0);     /* its turn, taken: */
    ck_assert_int_eq(authfail_admit(t, &k, 1100), 100);   /* the next waits delay(1) */
    v = authfail_failed(t, &k, 1101);                     /* the turn failed: two failures */
    ck_assert_int_eq(v.delay_ms, 200);
    ck_assert_int_eq(authfail_admit(t, &k, 1101), 200);
    free(t);
}
END_TEST

START_TEST(a_right_password_gives_its_turn_back)
{
    struct authfail *t = table_new();
    struct authfail_key k = key("127.0.0.1:1");
    authfail_failed(t, &k, 1000);
    ck_assert_int_eq(authfail_admit(t, &k, 1100), 0);
    authfail_passed(t, &k, 1100);
    ck_assert_int_eq(authfail_admit(t, &k, 1100), 0); /* a pool's next connection is not held */
    /* but a success with no turn taken (admitted while clean) cancels nobody's wait */
    struct authfail *u = table_new();
    ck_assert_int_eq(authfail_admit(u, &k, 1000), 0);
    authfail_failed(u, &k, 1000); /* another connection failed meanwhile */
    authfail_passed(u, &k, 1001);
    ck_assert_int_eq(authfail_admit(u, &k, 1001), 99);
    /* and failures stay: the next failure's delay counts the earlier ones */
    ck_assert_int_eq(authfail_failed(t, &k, 1200).delay_ms, 200);
    free(t);
    free(u);
}
END_TEST

/* 20 connections of one address trying as fast as they are let, for 10 s. */
START_TEST(many_connections_get_at_most_ten_a_second)
{
    struct authfail *t = table_new();
    struct authfail_key k = key("127.0.0.1:1");
    int64_t next_try[20] = {0};
    int attempts = 0, per_second[10] = {0};
    for (int64_t now = 0; now < 10000; now++) {
        for (int i = 0; i < 20; i++) {
            if (now < next_try[i]) continue;
            int64_t wait = authfail_admit(t, &k, now);
            if (wait > 0) {
                next_try[i] = now + wait;
                continue;
            }
            struct authfail_verdict v = authfail_failed(t, &k, now);
            next_try[i] = now + v.delay_ms; /* its reply is held that long */
            attempts++;
            per_second[now / 1000]++;
        }
    }
    for (int s = 0; s < 10; s++) ck_assert_msg(per_second[s] <= 10, "second %d: %d attempts", s, per_second[s]);
    /* at 0, then after 100, 200, 400, 800, 1600, 3200 ms (6300), the next after 5 s: 7 in 10 s */
    ck_assert_int_eq(attempts, 7);
    free(t);
}
END_TEST

START_TEST(failures_are_forgotten_one_per_period)
{
    struct authfail *t = table_new();
    struct authfail_key k = key("127.0.0.1:1");
    for (int i = 0; i < 3; i++) authfail_failed(t, &k, 0);
    /* just before the period: still three; the fourth doubles to 800 */
    struct authfail *u = table_new();
    for (int i = 0; i < 3; i++) authfail_failed(u, &k, 0);
    ck_assert_int_eq(authfail_failed(u, &k, AUTHFAIL_FORGET_MS - 1).delay_ms, 800);
    /* one period after the last failure, one is forgotten: 2 + 1 */
    ck_assert_int_eq(authfail_failed(t, &k, AUTHFAIL_FORGET_MS).delay_ms, 400);
    /* three after that one, all are: the next is a first failure again */
    ck_assert_int_eq(authfail_failed(t, &k, 4 * AUTHFAIL_FORGET_MS).delay_ms, 100);
    free(t);
    free(u);
}
END_TEST

START_TEST(at_most_sixteen_failures_are_remembered)
{
    struct authfail *t = table_new();
    struct authfail_key k = key("127.0.0.1:1");
    for (int i = 0; i < 1000; i++) authfail_failed(t, &k, i);
    /* 15 periods after the last one: 16 - 15 remembered, not 1000 - 15; this one makes 2 */
    int64_t last = 999 + 15 * AUTHFAIL_FORGET_MS;
    ck_assert_int_eq(authfail_failed(t, &k, last).delay_ms, 200);
    /* that failure restarted the clock: two periods later the address is clean */
    ck_assert_int_eq(authfail_failed(t, &k, last + 2 * AUTHFAIL_FORGET_MS).delay_ms, 100);
    free(t);
}
END_TEST

START_TEST(logged_once_per_episode)
{
    struct authfail *t = table_new();
    struct authfail_key k = key("127.0.0.1:1");
    ck_assert_int_eq(authfail_failed(t, &k, 0).log, 0);
    ck_assert_int_eq(authfail_failed(t, &k, 1).log, 0);
    struct authfail_verdict v = authfail_failed(t, &k, 2);
    ck_assert_int_eq(v.log, 1);
    ck_assert_int_eq(v.episode, AUTHFAIL_LOG_AFTER);
    for (int i = 3; i < 100; i++) ck_assert_int_eq(authfail_failed(t, &k, i).log, 0);
    ck_assert_int_eq(authfail_failed(t, &k, 100).episode, 101);
    /* clean again (16 periods after the last failure), a new episode is logged again */
    int64_t later = 100 + AUTHFAIL_MAX_REMEMBERED * AUTHFAIL_FORGET_MS;
    ck_assert_int_eq(authfail_failed(t, &k, later).episode, 1);
    ck_assert_int_eq(authfail_failed(t, &k, later + 1).log, 0);
    ck_assert_int_eq(authfail_failed(t, &k, later + 2).log, 1);
    free(t);
}
END_TEST

START_TEST(a_connection_closes_after_three_failures)
{
    ck_assert_int_eq(authfail_should_close(0), 0);
    ck_assert_int_eq(authfail_should_close(1), 0);
    ck_assert_int_eq(authfail_should_close(2), 0);
    ck_assert_int_eq(authfail_should_close(3), 1);
    ck_assert_int_eq(authfail_should_close(4), 1);
}
END_TEST

START_TEST(the_table_is_bounded_and_evicts_the_lightest)
{
    struct authfail *t = table_new();
    struct authfail_key heavy = key("192.0.2.1:1");
    for (int i = 0; i < 5; i++) authfail_failed(t, &heavy, 0);
    /* an attacker's many fresh addresses: twice the table's size, one failure each */
    for (unsigned n = 0; n < 2 * AUTHFAIL_SLOTS; n++) {
        struct authfail_key k = v4(n);
        authfail_failed(t, &k, 1 + n);
    }
    int64_t now = 2 * AUTHFAIL_SLOTS + 1;
    ck_assert_msg(authfail_failed(t, &heavy, now).delay_ms == 3200, "the heavy address was evicted"); /* its 6th */
    /* the oldest light ones went first: the first fresh address is forgotten, the last remembered */
    struct authfail_key first = v4(0), last = v4(2 * AUTHFAIL_SLOTS - 1);
    ck_assert_int_eq(authfail_failed(t, &first, now).delay_ms, 100);
    ck_assert_int_eq(authfail_failed(t, &last, now).delay_ms, 200);
    free(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("authfail");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, keys_are_addresses_without_ports);
    tcase_add_test(tc, delay_doubles_up_to_its_cap);
    tcase_add_test(tc, a_clean_address_is_never_held);
    tcase_add_test(tc, after_a_failure_the_address_takes_turns);
    tcase_add_test(tc, a_right_password_gives_its_turn_back);
    tcase_add_test(tc, many_connections_get_at_most_ten_a_second);
    tcase_add_test(tc, failures_are_forgotten_one_per_period);
    tcase_add_test(tc, at_most_sixteen_failures_are_remembered);
    tcase_add_test(tc, logged_once_per_episode);
    tcase_add_test(tc, a_connection_closes_after_three_failures);
    tcase_add_test(tc, the_table_is_bounded_and_evicts_the_lightest);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
