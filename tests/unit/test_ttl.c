/* test_ttl.c: unit tests of the TTL engine's pure rewrite (command + registry -> injected commands). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_fixture.h"

static const char registry_text[] =
    "namespace t: instance=cache ttl=1h max-ttl=1d owner=t\n"
    "namespace n: instance=cache ttl=none owner=t\n"
    "namespace s: instance=cache ttl=30m sliding owner=t\n"
    "namespace f: instance=cache ttl=1500ms owner=t\n"
    "namespace d: instance=durable ttl=10m max-ttl=1h owner=t\n";

static void setup(void)
{
    fixture_load_text(registry_text);
}

static void teardown(void)
{
    fixture_free();
}

static void decide(const char *line, struct plan *p)
{
    struct session s = {.authenticated = 1};
    fixture_decide(&s, line, p);
}

/* The key a fix applies to, as a C string (argv of the last decide). */
static const char *fix_key(const struct plan *p, size_t i)
{
    return fixture_argv[p->ttl.fix[i].argi];
}

START_TEST(set_appends_ex_without_transaction)
{
    struct plan p;
    decide("SET t:a v", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_uint_eq(p.nappend, 2);
    ck_assert_int_eq(p.ttl.wrap, 0);
    ck_assert_uint_eq(p.ttl.nfix, 0);
    plan_release(&p);
    decide("SET f:a v", &p); /* not whole seconds: PX */
    ck_assert_mem_eq(p.append[0], "PX", 2);
    ck_assert_mem_eq(p.append[1], "1500", 4);
    plan_release(&p);
}
END_TEST

START_TEST(write_is_wrapped_with_expire_nx)
{
    struct plan p;
    decide("HSET t:h f v", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.ttl.wrap, 1);
    ck_assert_uint_eq(p.ttl.nfix, 1);
    ck_assert_str_eq(fix_key(&p, 0), "t:h");
    ck_assert_int_eq(p.ttl.fix[0].mode, TTL_FIX_NX);
    ck_assert_int_eq(p.ttl.fix[0].ttl_ms, 3600000);
    plan_release(&p);
}
END_TEST

START_TEST(ttl_none_injects_nothing)
{
    struct plan p;
    decide("HSET n:h f v", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.ttl.wrap, 0);
    ck_assert_uint_eq(p.ttl.nfix, 0);
    ck_assert_uint_eq(p.nappend, 0);
    decide("SET n:a v", &p);
    ck_assert_uint_eq(p.nappend, 0);
    decide("PERSIST n:a", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
}
END_TEST

START_TEST(destination_keys_get_their_namespace_ttl)
{
    struct plan p;
    decide("SUNIONSTORE t:dst n:a n:b", &p);
    ck_assert_uint_eq(p.ttl.nfix, 1);
    ck_assert_str_eq(fix_key(&p, 0), "t:dst");
    plan_release(&p);
    decide("RENAME n:src t:dst", &p); /* NX, then the carried TTL cut to max-ttl */
    ck_assert_uint_eq(p.ttl.nfix, 2);
    ck_assert_str_eq(fix_key(&p, 0), "t:dst");
    ck_assert_int_eq(p.ttl.fix[0].mode, TTL_FIX_NX);
    ck_assert_int_eq(p.ttl.fix[1].mode, TTL_FIX_CAP);
    ck_assert_int_eq(p.ttl.fix[1].ttl_ms, 86400000);
    plan_release(&p);
    decide("LMOVE t:a t:b LEFT RIGHT", &p);
    ck_assert_uint_eq(p.ttl.nfix, 2);
    plan_release(&p);
    decide("SORT n:list STORE t:sorted", &p);
    ck_assert_uint_eq(p.ttl.nfix, 1);
    ck_assert_str_eq(fix_key(&p, 0), "t:sorted");
    plan_release(&p);
    decide("BITOP AND t:dest n:a n:b", &p);
    ck_assert_uint_eq(p.ttl.nfix, 1);
    ck_assert_str_eq(fix_key(&p, 0), "t:dest");
    plan_release(&p);
}
END_TEST

START_TEST(many_keys_use_the_heap)
{
    char line[4096] = "MSET";
    for (int i = 0; i < 40; i++) {
        char kv[32];
        snprintf(kv, sizeof(kv), " t:k%d v", i);
        strcat(line, kv);
    }
    struct plan p;
    decide(line, &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_uint_eq(p.ttl.nfix, 40);
    ck_assert_str_eq(fix_key(&p, 39), "t:k39");
    plan_release(&p);
}
END_TEST

START_TEST(deletes_and_own_ttls_need_no_fix)
{
    struct plan p;
    decide("DEL t:a t:b", &p);
    ck_assert_uint_eq(p.ttl.nfix, 0);
    decide("EXPIRE t:a 100", &p);
    ck_assert_uint_eq(p.ttl.nfix, 0);
    decide("SETEX t:a 100 v", &p);
    ck_assert_uint_eq(p.ttl.nfix, 0);
    decide("SET t:a v PX 100", &p);
    ck_assert_uint_eq(p.ttl.nfix, 0);
    ck_assert_uint_eq(p.nappend, 0);
    decide("EXPIRE t:a 0", &p); /* deletes: allowed */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
}
END_TEST

START_TEST(blocking_writes_are_never_wrapped)
{
    struct plan p;
    decide("BLMOVE t:a t:b LEFT RIGHT 5", &p); /* MULTI would keep it from blocking */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.flow, FLOW_BLOCK);
    ck_assert_int_eq(p.ttl.wrap, 0);
    ck_assert_uint_eq(p.ttl.nfix, 2);
    plan_release(&p);
    decide("LMOVE t:a t:b LEFT RIGHT", &p); /* the non-blocking twin is wrapped */
    ck_assert_int_eq(p.ttl.wrap, 1);
    plan_release(&p);
}
END_TEST

START_TEST(keepttl_still_ends_with_a_ttl)
{
    struct plan p;
    decide("SET t:a v KEEPTTL", &p);
    ck_assert_uint_eq(p.nappend, 0);
    ck_assert_int_eq(p.ttl.wrap, 1);
    ck_assert_uint_eq(p.ttl.nfix, 1);
    ck_assert_int_eq(p.ttl.fix[0].mode, TTL_FIX_NX);
    plan_release(&p);
}
END_TEST

START_TEST(sliding_reads_reset_the_window)
{
    struct plan p;
    decide("GET s:a", &p);
    ck_assert_int_eq(p.ttl.getex, 1);
    ck_assert_uint_eq(p.nappend, 2);
    ck_assert_mem_eq(p.append[1], "1800000", 7);
    decide("HGETALL s:h", &p);
    ck_assert_int_eq(p.ttl.wrap, 0); /* a read: no transaction needed */
    ck_assert_uint_eq(p.ttl.nfix, 1);
    ck_assert_int_eq(p.ttl.fix[0].mode, TTL_FIX_RESET);
    plan_release(&p);
    decide("HSET s:h f v", &p);
    ck_assert_int_eq(p.ttl.wrap, 1);
    ck_assert_int_eq(p.ttl.fix[0].mode, TTL_FIX_RESET);
    plan_release(&p);
    decide("GET t:a", &p); /* not sliding: untouched */
    ck_assert_int_eq(p.ttl.getex, 0);
    ck_assert_uint_eq(p.ttl.nfix, 0);
}
END_TEST

START_TEST(max_ttl_and_persist)
{
    struct plan p;
    decide("EXPIRE d:a 3601", &p);
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    ck_assert_msg(strstr(p.error, "DENIED") == p.error && strstr(p.error, "'d:'") && strstr(p.error, "1h"), "%s",
                  p.error);
    decide("GETEX t:a EX 86401", &p);
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    decide("SET t:a v PXAT 1700086400001", &p); /* now + 1d + 1ms */
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    decide("SET t:a v PXAT 1700086400000", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    decide("EXPIRE t:a 99999999999999999", &p); /* saturates, never wraps below the limit */
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    decide("PERSIST t:a", &p);
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    decide("GETEX s:a PERSIST", &p);
    ck_assert_int_eq(p.kind, PLAN_ERROR);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ttl");
    TCase *tc = tcase_create("rewrite");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, set_appends_ex_without_transaction);
    tcase_add_test(tc, write_is_wrapped_with_expire_nx);
    tcase_add_test(tc, ttl_none_injects_nothing);
    tcase_add_test(tc, destination_keys_get_their_namespace_ttl);
    tcase_add_test(tc, many_keys_use_the_heap);
    tcase_add_test(tc, deletes_and_own_ttls_need_no_fix);
    tcase_add_test(tc, keepttl_still_ends_with_a_ttl);
    tcase_add_test(tc, blocking_writes_are_never_wrapped);
    tcase_add_test(tc, sliding_reads_reset_the_window);
    tcase_add_test(tc, max_ttl_and_persist);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
