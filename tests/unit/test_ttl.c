/* test_ttl.c: unit tests of the TTL engine's pure rewrite (command + registry -> injected commands). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_fixture.h"

static const char registry_text[] = "namespace t: instance=cache ttl=1h max-ttl=1d owner=t\n"
                                    "namespace n: instance=cache ttl=none owner=t\n"
                                    "namespace s: instance=cache ttl=30m sliding owner=t\n"
                                    "namespace f: instance=cache ttl=1500ms owner=t\n"
                                    "namespace d: instance=durable ttl=10m max-ttl=1h owner=t\n"
                                    "namespace m: instance=cache ttl=none max-ttl=1h owner=t\n";

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
    struct session s = {.authenticated = 1, .watch_instance = -1, .multi_instance = -1};
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
    decide("EXPIRE t:a 99999999999999", &p); /* ms saturate, never wrap below the limit */
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    decide("EXPIRE t:a 99999999999999999", &p); /* past LLONG_MAX ms: Redis's own invalid expire time */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    decide("PERSIST t:a", &p);
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    decide("GETEX s:a PERSIST", &p);
    ck_assert_int_eq(p.kind, PLAN_ERROR);
}
END_TEST

/* Issue 10 item 1: Redis lets the last of a repeated EX/PX/EXAT/PXAT win; so must max-ttl. */
START_TEST(test_issue10_item1_repeated_ttl_option_last_wins)
{
    static const char *const over[] = {
        "SET t:a v EX 10 EX 99999999",
        "SET t:a v PX 10 PX 99999999999",
        "SET t:a v EXAT 1700000010 EXAT 1800000000",
        "SET t:a v PXAT 1700000010000 PXAT 1800000000000",
        "SET t:a v ex 10 Ex 99999999",
        "SET t:a v NX EX 10 GET EX 99999999",
        "GETEX t:a EX 10 EX 99999999",
        "GETEX t:a px 10 PX 99999999999",
        "SETEX t:a 99999999 v",
    };
    for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
        struct plan p;
        decide(over[i], &p);
        ck_assert_msg(p.kind == PLAN_ERROR && strstr(p.error, "DENIED TTL of") == p.error, "%s -> kind %d %s", over[i],
                      p.kind, p.error);
        plan_release(&p);
    }
    struct plan p;
    decide("SET t:a v EX 99999999 EX 10", &p); /* the last one is the TTL Redis sets */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_uint_eq(p.nappend, 0);
    ck_assert_uint_eq(p.ttl.nfix, 0);
    plan_release(&p);
}
END_TEST

/* A NUL after an option word is still the option to Redis (strcasecmp): it is the client's TTL. */
START_TEST(test_issue10_item2_nul_suffixed_ttl_option)
{
    const char *argv[] = {"SET", "t:a", "v", "EX\0", "99999999"};
    const size_t len[] = {3, 3, 1, 3, 8};
    struct session s = {.authenticated = 1};
    struct plan p;
    fixture_decide_argv(&s, 5, argv, len, &p);
    ck_assert_msg(p.kind == PLAN_ERROR && strstr(p.error, "DENIED TTL of"), "%d %s", p.kind, p.error);
    plan_release(&p);
    const char *argv2[] = {"SET", "t:a", "v", "EX\0junk", "10"};
    const size_t len2[] = {3, 3, 1, 7, 2};
    fixture_decide_argv(&s, 5, argv2, len2, &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD); /* EX 10: the client's own TTL, kept unchanged */
    ck_assert_uint_eq(p.nappend, 0);
    ck_assert_uint_eq(p.ttl.nfix, 0);
    plan_release(&p);
}
END_TEST

/* Options Redis refuses (a syntax error) write nothing: keygate adds no EX, and still never a key without TTL. */
START_TEST(test_issue10_item1_conflicting_options_add_no_ex)
{
    static const char *const bad[] = {"SET t:a v EX 10 PX 10", "SET t:a v NX XX", "SET t:a v KEEPTTL EX 10",
                                      "SET t:a v EX",          "SET t:a v BOGUS", "SET t:a v EX abc",
                                      "SET t:a v EX 010"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct plan p;
        decide(bad[i], &p);
        ck_assert_msg(p.kind == PLAN_FORWARD && p.nappend == 0 && p.ttl.wrap == 1 && p.ttl.nfix == 1, "%s", bad[i]);
        plan_release(&p);
    }
}
END_TEST

/* Issue 10 item 10: INT64_MIN absolutes must not overflow; Redis deletes the key, keygate lets it. */
START_TEST(test_issue10_item10_int64_min_expire_at)
{
    static const char *const forms[] = {
        "PEXPIREAT t:a -9223372036854775808",  "EXPIREAT t:a -9223372036854775808",
        "SET t:a v PXAT -9223372036854775808", "SET t:a v EXAT -9223372036854775808",
        "GETEX t:a PXAT -9223372036854775808", "PEXPIRE t:a -9223372036854775808",
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        struct plan p;
        decide(forms[i], &p);
        ck_assert_msg(p.kind == PLAN_FORWARD, "%s -> %s", forms[i], p.error);
        plan_release(&p);
    }
}
END_TEST

/* Issue 10 item 5: scripts write the keys they declare, so those keys get their namespace's TTL. */
START_TEST(test_issue10_item5_eval_declared_keys_get_ttl)
{
    static const char *const forms[] = {"EVAL s 1 t:e", "EVALSHA 0123456789012345678901234567890123456789 1 t:e",
                                        "FCALL f 1 t:e"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        struct user_conf u = {.name = "u", .all_owners = 1, .scripts = 1};
        struct session s = {.authenticated = 1, .user = &u, .watch_instance = -1, .multi_instance = -1};
        struct plan p;
        fixture_decide(&s, forms[i], &p);
        ck_assert_msg(p.kind == PLAN_FORWARD, "%s -> %s", forms[i], p.error);
        ck_assert_int_eq(p.ttl.wrap, 1);
        ck_assert_uint_eq(p.ttl.nfix, 2);
        ck_assert_str_eq(fix_key(&p, 0), "t:e");
        ck_assert_int_eq(p.ttl.fix[0].mode, TTL_FIX_NX);
        /* a script may set any TTL itself (SET KEYS[1] v EX 99999999): cut to max-ttl */
        ck_assert_str_eq(fix_key(&p, 1), "t:e");
        ck_assert_int_eq(p.ttl.fix[1].mode, TTL_FIX_CAP);
        ck_assert_int_eq(p.ttl.fix[1].ttl_ms, 86400000);
        plan_release(&p);
    }
}
END_TEST

/* Issue 10 item 9: keygate's MULTI/EXEC on the WATCH pin would clear or fail the client's watch. */
START_TEST(test_issue10_item9_watch_pin_writes_are_not_wrapped)
{
    struct session s = {.authenticated = 1, .watch_instance = 1 /* cache */, .multi_instance = -1};
    struct plan p;
    fixture_decide(&s, "HSET t:h f v", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.ttl.wrap, 0);
    ck_assert_uint_eq(p.ttl.nfix, 1); /* the PEXPIRE NX follows the write on the pin */
    plan_release(&p);
    s.watch_instance = 0; /* watching durable: a cache write goes down the shared connection, wrapped */
    fixture_decide(&s, "HSET t:h f v", &p);
    ck_assert_int_eq(p.ttl.wrap, 1);
    plan_release(&p);
}
END_TEST

/* Issue 10 item 18: TTL values Redis refuses with "invalid expire time" are Redis's to answer. */
START_TEST(test_issue10_item18_invalid_expire_times_reach_redis)
{
    static const char *const forms[] = {
        "GETEX t:a EXAT 9223372036854775807",
        "PEXPIRE t:a 9223372036854775807",
        "SET t:a v EX 0",
        "SET t:a v PX -5",
        "EXPIRE t:a 9223372036854775",
        "SETEX t:a 0 v",
        "SET t:a v EX 9223372036854776",
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        struct plan p;
        decide(forms[i], &p);
        ck_assert_msg(p.kind == PLAN_FORWARD && p.nappend == 0, "%s -> kind %d %s", forms[i], p.kind, p.error);
        plan_release(&p);
    }
    struct plan p;
    decide("PEXPIRE t:a 9000000000000000", &p); /* a valid TTL above max-ttl is still refused */
    ck_assert_int_eq(p.kind, PLAN_ERROR);
}
END_TEST

/* Found by fuzz_policy: a TTL carried into a ttl=none namespace with a max-ttl must be cut too. */
START_TEST(test_fuzz_policy_carried_ttl_into_ttl_none_max_ttl)
{
    static const char *const forms[] = {"RENAME t:a m:b", "RENAMENX t:a m:b", "COPY t:a m:b", "COPY t:a m:b REPLACE"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        struct plan p;
        decide(forms[i], &p);
        ck_assert_msg(p.kind == PLAN_FORWARD, "%s: %s", forms[i], p.error);
        int capped = 0;
        for (size_t k = 0; k < p.ttl.nfix; k++)
            if (strcmp(fix_key(&p, k), "m:b") == 0) {
                ck_assert_int_eq(p.ttl.fix[k].mode, TTL_FIX_CAP); /* XX LT: no TTL is given to a key without one */
                ck_assert_int_eq(p.ttl.fix[k].ttl_ms, 3600000);
                capped++;
            }
        ck_assert_msg(capped == 1, "%s: %d caps", forms[i], capped);
        ck_assert_int_eq(p.ttl.wrap, 1);
        plan_release(&p);
    }
}
END_TEST

/* ttl_decide called directly, as policy calls it: keys found and looked up for the line. The
 * decision is filled with garbage first: ttl_decide must set every field its reader reads. */
static void ttl_of(const char *line, int blocks, int may_wrap, struct ttl_decision *d)
{
    static struct key_ref keys[64];
    static const struct namespace_entry *ns[64];
    size_t argc = fixture_split(line);
    struct policy_request r = {.argc = argc,
                               .argv = fixture_argv,
                               .argvlen = fixture_argvlen,
                               .now_ms = 1700000000000LL};
    r.cmd = command_lookup(argc, fixture_argv, fixture_argvlen, &r.unknown_subcommand);
    ck_assert_ptr_nonnull(r.cmd);
    int incomplete = 0;
    int nkeys = command_find_keys(r.cmd, argc, fixture_argv, fixture_argvlen, keys, 64, &incomplete);
    ck_assert_msg(nkeys > 0 && nkeys <= 64 && !incomplete, "%s: %d keys", line, nkeys);
    for (int i = 0; i < nkeys; i++) {
        size_t ai = (size_t)keys[i].index;
        ns[i] = registry_lookup(reg, NS_KEY, fixture_argv[ai], fixture_argvlen[ai]);
        ck_assert_ptr_nonnull(ns[i]);
    }
    memset(d, 0xA5, sizeof(*d));
    ttl_decide(&r, keys, ns, nkeys, blocks, may_wrap, d);
}

/* 1 when p points into the n bytes at store. */
static int points_into(const char *p, const char *store, size_t n)
{
    return (uintptr_t)p >= (uintptr_t)store && (uintptr_t)p < (uintptr_t)store + n;
}

START_TEST(ttl_decision_holds_append_getex_and_fixes)
{
    struct ttl_decision d;
    ttl_of("SET t:a v", 0, 1, &d); /* SET k v -> SET k v EX 3600: an append, one command */
    ck_assert_int_eq(d.refused, 0);
    ck_assert_uint_eq(d.nappend, 2);
    ck_assert_uint_eq(d.append_len[0], 2);
    ck_assert_mem_eq(d.append[0], "EX", 2);
    ck_assert_uint_eq(d.append_len[1], 4);
    ck_assert_mem_eq(d.append[1], "3600", 4);
    ck_assert(points_into(d.append[1], d.append_store, sizeof(d.append_store)));
    ck_assert_int_eq(d.rewrite.wrap, 0);
    ck_assert_int_eq(d.rewrite.getex, 0);
    ck_assert_uint_eq(d.rewrite.nfix, 0);
    ttl_decision_release(&d);

    ttl_of("GET s:a", 0, 1, &d); /* sliding GET -> GETEX k PX 1800000 */
    ck_assert_int_eq(d.refused, 0);
    ck_assert_int_eq(d.rewrite.getex, 1);
    ck_assert_uint_eq(d.nappend, 2);
    ck_assert_mem_eq(d.append[0], "PX", 2);
    ck_assert_uint_eq(d.append_len[1], 7);
    ck_assert_mem_eq(d.append[1], "1800000", 7);
    ck_assert_uint_eq(d.rewrite.nfix, 0);
    ttl_decision_release(&d);

    ttl_of("HSET t:h f v", 0, 1, &d); /* MULTI / HSET / PEXPIRE t:h 3600000 NX / EXEC */
    ck_assert_int_eq(d.refused, 0);
    ck_assert_uint_eq(d.nappend, 0);
    ck_assert_int_eq(d.rewrite.wrap, 1);
    ck_assert_int_eq(d.rewrite.getex, 0);
    ck_assert_uint_eq(d.rewrite.nfix, 1);
    ck_assert_ptr_eq(d.rewrite.fix, d.rewrite.fix_inline);
    ck_assert_uint_eq(d.rewrite.fix[0].argi, 1);
    ck_assert_uint_eq(d.rewrite.fix[0].mode, TTL_FIX_NX);
    ck_assert_int_eq(d.rewrite.fix[0].ttl_ms, 3600000);
    ttl_decision_release(&d);

    ttl_of("HSET t:h f v", 1, 1, &d); /* blocking: the fix follows unwrapped */
    ck_assert_int_eq(d.rewrite.wrap, 0);
    ck_assert_uint_eq(d.rewrite.nfix, 1);
    ttl_decision_release(&d);
    ttl_of("HSET t:h f v", 0, 0, &d); /* the client's WATCH pin: no MULTI of keygate's */
    ck_assert_int_eq(d.rewrite.wrap, 0);
    ck_assert_uint_eq(d.rewrite.nfix, 1);
    ttl_decision_release(&d);

    ttl_of("RENAME t:a m:b", 0, 1, &d); /* t:a written (NX); the carried TTL capped to m:'s max-ttl (XX LT) */
    ck_assert_uint_eq(d.rewrite.nfix, 2);
    ck_assert_uint_eq(d.rewrite.fix[0].argi, 1);
    ck_assert_uint_eq(d.rewrite.fix[0].mode, TTL_FIX_NX);
    ck_assert_uint_eq(d.rewrite.fix[1].argi, 2);
    ck_assert_uint_eq(d.rewrite.fix[1].mode, TTL_FIX_CAP);
    ck_assert_int_eq(d.rewrite.fix[1].ttl_ms, 3600000);
    ttl_decision_release(&d);

    ttl_of("HSET n:h f v", 0, 1, &d); /* ttl=none: nothing at all */
    ck_assert_int_eq(d.refused, 0);
    ck_assert_uint_eq(d.nappend, 0);
    ck_assert_int_eq(d.rewrite.wrap, 0);
    ck_assert_int_eq(d.rewrite.getex, 0);
    ck_assert_uint_eq(d.rewrite.nfix, 0);
    ck_assert_ptr_null(d.rewrite.fix);
    ttl_decision_release(&d);
}
END_TEST

START_TEST(ttl_decision_refusals_carry_their_text)
{
    struct ttl_decision d;
    ttl_of("PERSIST t:a", 0, 1, &d);
    ck_assert_int_eq(d.refused, 1);
    ck_assert_str_eq(d.error, "DENIED PERSIST is refused in namespace 't:': its keys must keep a TTL");
    ttl_decision_release(&d);
    ttl_of("EXPIRE d:a 3601", 0, 1, &d);
    ck_assert_int_eq(d.refused, 1);
    ck_assert_str_eq(d.error, "DENIED TTL of 3601000ms is above max-ttl 1h of namespace 'd:'");
    ttl_decision_release(&d);
    ttl_of("PERSIST n:a", 0, 1, &d); /* ttl=none: PERSIST is fine */
    ck_assert_int_eq(d.refused, 0);
    ck_assert_uint_eq(d.rewrite.nfix, 0);
    ttl_decision_release(&d);
    ttl_of("EXPIRE d:a 3600", 0, 1, &d); /* at max-ttl: allowed, its own TTL needs no fix */
    ck_assert_int_eq(d.refused, 0);
    ck_assert_uint_eq(d.rewrite.nfix, 0);
    ck_assert_uint_eq(d.nappend, 0);
    ttl_decision_release(&d);

    /* through policy: the same text, as a PLAN_ERROR with nothing to forward */
    struct plan p;
    decide("EXPIRE d:a 3601", &p);
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    ck_assert_str_eq(p.error, "DENIED TTL of 3601000ms is above max-ttl 1h of namespace 'd:'");
    ck_assert_uint_eq(p.nappend, 0);
    ck_assert_uint_eq(p.ttl.nfix, 0);
    plan_release(&p);
}
END_TEST

START_TEST(ttl_rewrite_move_leaves_nothing_pointing_into_the_source)
{
    struct ttl_decision d;
    struct ttl_rewrite dst;
    ttl_of("RENAME t:a t:b", 0, 1, &d); /* three inline fixes: NX on t:a, NX and CAP on t:b */
    ck_assert_uint_eq(d.rewrite.nfix, 3);
    memset(&dst, 0, sizeof(dst));
    ttl_rewrite_move(&dst, &d.rewrite);
    memset(&d, 0x5A, sizeof(d)); /* the decision is gone (it lived on policy's stack) */
    ck_assert_ptr_eq(dst.fix, dst.fix_inline);
    ck_assert_uint_eq(dst.nfix, 3);
    ck_assert_int_eq(dst.wrap, 1);
    ck_assert_uint_eq(dst.fix[0].mode, TTL_FIX_NX);
    ck_assert_uint_eq(dst.fix[1].argi, 2);
    ck_assert_uint_eq(dst.fix[1].mode, TTL_FIX_NX);
    ck_assert_uint_eq(dst.fix[2].mode, TTL_FIX_CAP);
    ck_assert_int_eq(dst.fix[2].ttl_ms, 86400000);
    ttl_rewrite_release(&dst);

    /* more fixes than fit inline: the heap array changes owner, the source keeps nothing */
    char line[4096] = "MSET";
    size_t used = strlen(line);
    for (int i = 0; i < 20; i++) used += (size_t)snprintf(line + used, sizeof(line) - used, " t:k%d v", i);
    ttl_of(line, 0, 1, &d);
    ck_assert_uint_eq(d.rewrite.nfix, 20);
    ck_assert_ptr_ne(d.rewrite.fix, d.rewrite.fix_inline);
    struct ttl_fix *heap = d.rewrite.fix;
    memset(&dst, 0, sizeof(dst));
    ttl_rewrite_move(&dst, &d.rewrite);
    ck_assert_ptr_eq(dst.fix, heap);
    ck_assert_ptr_null(d.rewrite.fix);
    ck_assert_uint_eq(d.rewrite.nfix, 0);
    ttl_decision_release(&d); /* nothing left to free: ASan reports a double free otherwise */
    ck_assert_uint_eq(dst.fix[19].argi, 39);
    ttl_rewrite_release(&dst);

    /* the plan's append pointers point into the plan's own store, not the gone decision's */
    struct plan p;
    decide("SET t:a v", &p);
    ck_assert_uint_eq(p.nappend, 2);
    ck_assert(points_into(p.append[1], p.append_store, sizeof(p.append_store)));
    ck_assert_mem_eq(p.append[1], "3600", 4);
    ck_assert_mem_eq(p.append[0], "EX", 2);
    plan_release(&p);
    decide("HSET t:h f v", &p);
    ck_assert_ptr_eq(p.ttl.fix, p.ttl.fix_inline);
    ck_assert_uint_eq(p.ttl.nfix, 1);
    plan_release(&p);
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
    tcase_add_test(tc, test_issue10_item1_repeated_ttl_option_last_wins);
    tcase_add_test(tc, test_issue10_item2_nul_suffixed_ttl_option);
    tcase_add_test(tc, test_issue10_item1_conflicting_options_add_no_ex);
    tcase_add_test(tc, test_issue10_item10_int64_min_expire_at);
    tcase_add_test(tc, test_issue10_item5_eval_declared_keys_get_ttl);
    tcase_add_test(tc, test_issue10_item9_watch_pin_writes_are_not_wrapped);
    tcase_add_test(tc, test_issue10_item18_invalid_expire_times_reach_redis);
    tcase_add_test(tc, test_fuzz_policy_carried_ttl_into_ttl_none_max_ttl);
    tcase_add_test(tc, ttl_decision_holds_append_getex_and_fixes);
    tcase_add_test(tc, ttl_decision_refusals_carry_their_text);
    tcase_add_test(tc, ttl_rewrite_move_leaves_nothing_pointing_into_the_source);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
