/* test_budget.c: unit tests for budget.c's pure decisions (over budget? may this key be created? check, refuse, pass?) and the plans policy_decide makes of them. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "policy_fixture.h"

static const struct command_def *cmd_of(const char *name)
{
    const struct command_def *c = command_by_name(name);
    ck_assert_msg(c != NULL, "no command %s", name);
    return c;
}

/* The flags of the first key command_find_keys finds in line. */
static uint32_t first_key_flags(const char *line)
{
    size_t argc = fixture_split(line);
    struct key_ref keys[16];
    int incomplete = 0;
    const struct command_def *c = command_lookup(argc, fixture_argv, fixture_argvlen, NULL);
    ck_assert_ptr_nonnull(c);
    int n = command_find_keys(c, argc, fixture_argv, fixture_argvlen, keys, 16, &incomplete);
    ck_assert_int_gt(n, 0);
    return keys[0].flags;
}

START_TEST(over_budget_by_keys_or_bytes)
{
    struct namespace_entry e = {.prefix = "q:", .max_keys = 500};
    struct budget_usage u = {.keys = 499};
    ck_assert(!budget_over(&e, &u));
    u.keys = 500;
    ck_assert(budget_over(&e, &u)); /* at the budget: the next key would pass it */
    struct namespace_entry m = {.prefix = "m:", .max_memory = 65536};
    struct budget_usage v = {.keys = 60, .bytes_per_key = 1000, .bytes = 60000};
    ck_assert(!budget_over(&m, &v));
    v.keys = 66, v.bytes = 66000;
    ck_assert(budget_over(&m, &v));
    v.bytes_per_key = 0, v.bytes = 0; /* no key sampled yet: the memory budget is not judged */
    ck_assert(!budget_over(&m, &v));
    ck_assert(!budget_over(NULL, &v));
}
END_TEST

/* Which writes may create the key they name (by the key specs, and the list of commands that
 * only change an existing key). */
START_TEST(may_create_per_command)
{
    static const struct {
        const char *line;
        int creates;
    } rows[] = {
        {"SET k v", 1},
        {"SETNX k v", 1},
        {"INCR k", 1},
        {"APPEND k v", 1},
        {"HSET k f v", 1},
        {"LPUSH k a", 1},
        {"SADD k a", 1},
        {"ZADD k 1 m", 1},
        {"XADD k * f v", 1},
        {"PFADD k a", 1},
        {"SETRANGE k 0 v", 1},
        {"BITFIELD k SET u8 0 1", 1},
        {"MSET k v", 1},
        {"GETSET k v", 1},
        {"EVAL s 1 k", 1},
        {"FCALL f 1 k", 1},
        {"DEL k", 0},
        {"UNLINK k", 0},
        {"EXPIRE k 10", 0},
        {"PEXPIREAT k 10", 0},
        {"PERSIST k", 0},
        {"GETEX k EX 10", 0},
        {"GETDEL k", 0},
        {"LPOP k", 0},
        {"SREM k a", 0},
        {"HDEL k f", 0},
        {"LPUSHX k a", 0},
        {"RPUSHX k a", 0},
        {"LSET k 0 v", 0},
        {"LTRIM k 0 1", 0},
        {"LINSERT k BEFORE a b", 0},
        {"XACK k g 1-1", 0},
        {"GET k", 0},
        {"EXISTS k", 0},
        {"TOUCH k", 0},
        {"EVAL_RO s 1 k", 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        size_t argc = fixture_split(rows[i].line);
        const struct command_def *c = command_lookup(argc, fixture_argv, fixture_argvlen, NULL);
        ck_assert_ptr_nonnull(c);
        ck_assert_msg(budget_may_create(c, first_key_flags(rows[i].line)) == rows[i].creates, "%s: want %d",
                      rows[i].line, rows[i].creates);
    }
    /* RENAME: the source is removed, the destination may be new */
    size_t argc = fixture_split("RENAME a b");
    struct key_ref keys[4];
    int incomplete = 0;
    ck_assert_int_eq(command_find_keys(cmd_of("rename"), argc, fixture_argv, fixture_argvlen, keys, 4, &incomplete), 2);
    ck_assert(!budget_may_create(cmd_of("rename"), keys[0].flags));
    ck_assert(budget_may_create(cmd_of("rename"), keys[1].flags));
}
END_TEST

START_TEST(check_refuse_or_pass)
{
    ck_assert_int_eq(budget_action(cmd_of("set"), 3, 0), BUDGET_PASS);
    ck_assert_int_eq(budget_action(cmd_of("set"), 3, 1), BUDGET_CHECK);
    ck_assert_int_eq(budget_action(cmd_of("mset"), 129, BUDGET_CHECK_KEYS_MAX), BUDGET_CHECK);
    ck_assert_int_eq(budget_action(cmd_of("mset"), 131, BUDGET_CHECK_KEYS_MAX + 1), BUDGET_REFUSE);
    ck_assert_int_eq(budget_action(cmd_of("sadd"), BUDGET_CHECK_ARGS_MAX + 1, 1), BUDGET_REFUSE);
    ck_assert_int_eq(budget_action(cmd_of("eval"), 4, 1), BUDGET_REFUSE); /* a script cannot EVAL */
    ck_assert_int_eq(budget_action(cmd_of("fcall"), 4, 1), BUDGET_REFUSE);
    ck_assert_int_eq(budget_action(cmd_of("blmove"), 6, 1), BUDGET_REFUSE); /* would not block in a script */
}
END_TEST

START_TEST(error_text)
{
    struct namespace_entry e = {.prefix = "dedup:webhook:", .max_keys = 500};
    struct budget_usage u = {.keys = 512};
    char buf[256];
    budget_error(&e, &u, buf, sizeof buf);
    ck_assert_str_eq(buf, "OOM namespace 'dedup:webhook:' is over its budget (max-keys=500, about 512 keys)");
    struct namespace_entry d = {.prefix = "", .is_default = 1, .max_keys = 5, .max_memory = 1024};
    struct budget_usage v = {.keys = 3, .bytes = 2048, .bytes_per_key = 683};
    budget_error(&d, &v, buf, sizeof buf);
    ck_assert_str_eq(buf, "OOM namespace '(default)' is over its budget (max-keys=5, about 3 keys; max-memory=1024, "
                          "about 2048 bytes)");
}
END_TEST

/* The estimate: a pass's count, plus keys forwarded since it began; what came during the pass stays. */
START_TEST(estimate_across_a_pass)
{
    budget_reset();
    struct budget_usage u;
    budget_add(7, 3);
    uint64_t mark = budget_pass_begin(7);
    budget_add(7, 2); /* during the pass: SCAN may or may not have seen them */
    budget_publish(7, mark, 10, 3000, 3);
    budget_usage(7, &u);
    ck_assert(u.measured);
    ck_assert_uint_eq(u.keys, 12);
    ck_assert_uint_eq(u.bytes_per_key, 1000);
    ck_assert_uint_eq(u.bytes, 12000);
    budget_publish(7, budget_pass_begin(7), 4, 0, 0); /* nothing sampled: the bytes per key stay */
    budget_usage(7, &u);
    ck_assert_uint_eq(u.keys, 4);
    ck_assert_uint_eq(u.bytes_per_key, 1000);
    budget_reset();
}
END_TEST

#define REG                                                                                                            \
    "namespace q:  instance=durable ttl=none owner=q max-keys=2\n"                                                     \
    "namespace rl: instance=durable ttl=1h owner=q\n"                                                                  \
    "namespace rep: instance=durable ttl=none owner=q max-keys=1 enforce=report\n"

static void setup(void)
{
    fixture_load_text(REG);
    config_registry_bind_stats(reg, cfg.instance_names);
    budget_reset();
}

static void teardown(void)
{
    fixture_free();
    budget_reset();
}

/* policy_decide: under budget a write counts its keys; over budget it is checked (or refused). */
START_TEST(policy_plans_over_budget)
{
    struct session s;
    session_init(&s, 1);
    struct plan p;
    fixture_decide(&s, "SET q:a 1", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_uint_eq(p.budget_ncheck, 0);
    ck_assert_uint_eq(p.budget_nadd, 1);
    ck_assert_uint_eq(p.budget_add[0].n, 1);
    policy_budget_forwarded(&p);
    plan_release(&p);
    fixture_decide(&s, "MSET q:b 1 rl:x 2", &p);
    ck_assert_uint_eq(p.budget_nadd, 1); /* rl: has no budget */
    policy_budget_forwarded(&p);
    plan_release(&p);
    /* 2 keys: at the budget */
    fixture_decide(&s, "SET q:c 1", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_uint_eq(p.budget_ncheck, 1);
    ck_assert_int_eq(p.budget_check[0], 1);
    ck_assert_uint_eq(p.budget_nadd, 0);
    ck_assert_str_eq(p.budget_msg, "OOM namespace 'q:' is over its budget (max-keys=2, about 2 keys)");
    plan_release(&p);
    fixture_decide(&s, "MSET rl:y 1 q:d 2 q:e 3", &p);
    ck_assert_uint_eq(p.budget_ncheck, 2);
    ck_assert_int_eq(p.budget_check[0], 3);
    ck_assert_int_eq(p.budget_check[1], 5);
    plan_release(&p);
    fixture_decide(&s, "DEL q:a", &p);
    ck_assert_uint_eq(p.budget_ncheck, 0);
    plan_release(&p);
    fixture_decide(&s, "EXPIRE q:a 10", &p);
    ck_assert_uint_eq(p.budget_ncheck, 0);
    plan_release(&p);
    fixture_decide(&s, "GET q:a", &p);
    ck_assert_uint_eq(p.budget_ncheck, 0);
    plan_release(&p);
    fixture_decide(&s, "BLMOVE rl:x q:l LEFT LEFT 0", &p);
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    ck_assert_str_eq(p.error, "OOM namespace 'q:' is over its budget (max-keys=2, about 2 keys)");
    plan_release(&p);
    fixture_decide(&s, "SET rl:z 1", &p);
    ck_assert_uint_eq(p.budget_ncheck, 0);
    ck_assert_uint_eq(p.budget_nadd, 0);
    plan_release(&p);
    /* enforce=report: budgets are not enforced */
    budget_add(registry_lookup(reg, NS_KEY, "rep:1", 5)->stats_slot, 5);
    fixture_decide(&s, "SET rep:1 1", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_uint_eq(p.budget_ncheck, 0);
    plan_release(&p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("budget");
    TCase *tc = tcase_create("budget");
    tcase_add_test(tc, over_budget_by_keys_or_bytes);
    tcase_add_test(tc, may_create_per_command);
    tcase_add_test(tc, check_refuse_or_pass);
    tcase_add_test(tc, error_text);
    tcase_add_test(tc, estimate_across_a_pass);
    suite_add_tcase(s, tc);
    TCase *pc = tcase_create("policy");
    tcase_add_checked_fixture(pc, setup, teardown);
    tcase_add_test(pc, policy_plans_over_budget);
    suite_add_tcase(s, pc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
