/* test_ttl_invocations.c: the TTL invocation table covers every write command of command_table[] and each row is well-formed. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

#include "../integration/ttl_invocations.h"

/*
 * No servers here: these guard the table that tests/integration/test_ttl.c walks.
 * A Redis upgrade that regenerates command_table.c with a new write command makes
 * test_every_write_command_has_a_row fail until the command gets a row.
 */

static void values_for_unit(struct inv_values *v)
{
    v->k[0] = "t:k1";
    v->k[1] = "t:k2";
    v->k[2] = "t:k3";
    snprintf(v->at, sizeof v->at, "%d", 2000000000);
    snprintf(v->pat, sizeof v->pat, "%lld", 2000000000000LL);
}

START_TEST(test_every_write_command_has_a_row)
{
    struct inv_coverage cov;
    inv_coverage_check(stderr, &cov);
    printf("ttl invocations: %d write commands with keys in command_table[]: %d exercised (%d of them blocking, "
           "run on a ready key), %d listed with a reason; %d rows\n",
           cov.commands, cov.exercised, cov.blocking, cov.listed, cov.rows);
    ck_assert_msg(cov.missing == 0, "%d write command(s) with keys have no row in ttl_invocations.h (see stderr)",
                  cov.missing);
    ck_assert_msg(cov.stray == 0, "%d row(s) name no write command with keys (see stderr)", cov.stray);
    ck_assert_int_gt(cov.commands, 90);
}
END_TEST

START_TEST(test_rows_parse_and_name_their_command)
{
    struct inv_values v;
    values_for_unit(&v);
    for (unsigned i = 0; i < ttl_invocations_len; i++) {
        const struct ttl_invocation *row = &ttl_invocations[i];
        struct inv_cmd c, setup[INV_MAX_CMDS];
        ck_assert_msg(inv_parse(row->invoke, strlen(row->invoke), &v, &c) > 0, "row %u (%s): cannot parse `%s`", i,
                      row->command, row->invoke);
        int unknown = 0;
        const struct command_def *def = command_lookup((size_t)c.argc, c.argv, c.argvlen, &unknown);
        ck_assert_msg(def != NULL && !unknown && strcmp(def->name, row->command) == 0,
                      "row %u: `%s` is command '%s', the row says '%s'", i, row->invoke, def ? def->name : "(none)",
                      row->command);
        ck_assert_msg(command_arity_ok(def, (size_t)c.argc), "row %u: `%s` has the wrong arity", i, row->invoke);
        ck_assert_msg(row->setup == NULL || inv_parse_setup(row->setup, &v, setup, INV_MAX_CMDS) > 0,
                      "row %u (%s): cannot parse setup `%s`", i, row->command, row->setup);
        ck_assert_msg((row->listed != NULL) == (row->expect == INV_DENIED),
                      "row %u (%s): listed rows, and only they, expect -DENIED", i, row->command);
        ck_assert_msg(row->ttl_keys != NULL || row->gone_keys != NULL || row->expect == INV_DENIED,
                      "row %u (%s): checks no key", i, row->command);
    }
}
END_TEST

/* Every key a row checks is a key of the command (keygate finds it with the key specs). */
START_TEST(test_checked_keys_are_keys_of_the_command)
{
    struct inv_values v;
    values_for_unit(&v);
    for (unsigned i = 0; i < ttl_invocations_len; i++) {
        const struct ttl_invocation *row = &ttl_invocations[i];
        struct inv_cmd c, checked;
        ck_assert_int_gt(inv_parse(row->invoke, strlen(row->invoke), &v, &c), 0);
        const struct command_def *def = command_lookup((size_t)c.argc, c.argv, c.argvlen, NULL);
        struct key_ref keys[INV_MAX_ARGS];
        int incomplete = 0;
        int n = command_find_keys(def, (size_t)c.argc, c.argv, c.argvlen, keys, INV_MAX_ARGS, &incomplete);
        ck_assert_msg(n > 0 && !incomplete, "row %u: `%s`: keygate finds %d keys%s", i, row->invoke, n,
                      incomplete ? " (incomplete)" : "");
        for (int which = 0; which < 2; which++) {
            const char *list = which == 0 ? row->ttl_keys : row->gone_keys;
            if (list == NULL) continue;
            ck_assert_int_gt(inv_parse(list, strlen(list), &v, &checked), 0);
            for (int k = 0; k < checked.argc; k++) {
                int found = 0;
                for (int j = 0; j < n; j++)
                    if (strcmp(c.argv[keys[j].index], checked.argv[k]) == 0) found = 1;
                ck_assert_msg(found, "row %u: `%s`: checked key %s is not one of its keys", i, row->invoke,
                              checked.argv[k]);
            }
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ttl_invocations");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, test_every_write_command_has_a_row);
    tcase_add_test(tc, test_rows_parse_and_name_their_command);
    tcase_add_test(tc, test_checked_keys_are_keys_of_the_command);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
