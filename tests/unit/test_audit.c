/* test_audit.c: unit tests for audit.c's pure parts: key escaping, the TTL rules, the INFO keyspace listing. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"

static char *escaped(const char *key, size_t len)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    ck_assert_ptr_nonnull(f);
    audit_key_escape(f, key, len);
    fclose(f);
    return text;
}

START_TEST(escape_keeps_printable_and_hexes_the_rest)
{
    char *s = escaped("cache:x", 7);
    ck_assert_str_eq(s, "cache:x");
    free(s);
    s = escaped("a b\\c\"\x01\xff\0z", 10);
    ck_assert_str_eq(s, "a\\x20b\\\\c\\x22\\x01\\xff\\x00z");
    free(s);
    s = escaped("", 0);
    ck_assert_str_eq(s, "");
    free(s);
}
END_TEST

START_TEST(ttl_rules)
{
    struct namespace_entry e = {.prefix = "cache:", .ttl_ms = 3600000, .max_ttl_ms = 7 * 86400000LL};
    ck_assert_int_eq(audit_ttl_check(&e, -1), AUDIT_NO_TTL);
    ck_assert_int_eq(audit_ttl_check(&e, -2), -1); /* gone since SCAN */
    ck_assert_int_eq(audit_ttl_check(&e, 1000), -1);
    ck_assert_int_eq(audit_ttl_check(&e, 7 * 86400000LL), -1);
    ck_assert_int_eq(audit_ttl_check(&e, 7 * 86400000LL + 1), AUDIT_TTL_ABOVE_MAX);

    struct namespace_entry none = {.prefix = "q:"}; /* ttl=none, no max-ttl */
    ck_assert_int_eq(audit_ttl_check(&none, -1), -1);
    ck_assert_int_eq(audit_ttl_check(&none, 1LL << 50), -1);

    struct namespace_entry capped = {.prefix = "x:", .max_ttl_ms = 60000}; /* ttl=none max-ttl=1m */
    ck_assert_int_eq(audit_ttl_check(&capped, -1), -1);
    ck_assert_int_eq(audit_ttl_check(&capped, 60001), AUDIT_TTL_ABOVE_MAX);

    struct namespace_entry unbounded = {.prefix = "y:", .ttl_ms = 1000}; /* ttl without max-ttl */
    ck_assert_int_eq(audit_ttl_check(&unbounded, 1LL << 50), -1);
    ck_assert_int_eq(audit_ttl_check(&unbounded, -1), AUDIT_NO_TTL);
}
END_TEST

/* Every db audit_keyspace_next walks from -1, as "0 5 12" text. */
static void walk(const char *info, char *out, size_t len)
{
    out[0] = '\0';
    size_t used = 0;
    for (int db = audit_keyspace_next(info, -1); db >= 0; db = audit_keyspace_next(info, db)) {
        int n = snprintf(out + used, len - used, "%s%d", used ? " " : "", db);
        ck_assert(n > 0 && (size_t)n < len - used);
        used += (size_t)n;
    }
}

START_TEST(test_issue10_item2_keyspace_lists_every_db_with_keys)
{
    char got[256];
    /* Redis 7.0's INFO keyspace, dbs out of order, CRLF */
    walk("# Keyspace\r\ndb0:keys=3,expires=1,avg_ttl=0\r\ndb12:keys=7,expires=0,avg_ttl=0\r\n"
         "db5:keys=1,expires=0,avg_ttl=0\r\n",
         got, sizeof(got));
    ck_assert_str_eq(got, "0 5 12");
    /* db 0 empty (absent), LF only, a db with keys=0 skipped, the last line without a newline */
    walk("# Keyspace\ndb1:keys=0,expires=0,avg_ttl=0\ndb3:keys=10000000000000000000000,expires=0\ndb9:keys=2", got,
         sizeof(got));
    ck_assert_str_eq(got, "3 9");
    /* nothing listed: an empty server */
    walk("# Keyspace\r\n", got, sizeof(got));
    ck_assert_str_eq(got, "");
    walk("", got, sizeof(got));
    ck_assert_str_eq(got, "");
    /* not keyspace lines: other fields, malformed numbers, a db number past int */
    walk("dbsize:4\r\ndb:keys=1\r\ndb2keys=1\r\ndb4:keys=,x\r\ndb6:keys=1x\r\ndb99999999999:keys=1\r\n"
         " db7:keys=1\r\ndb8:keys=1,expires=0\r\n",
         got, sizeof(got));
    ck_assert_str_eq(got, "8");
    /* `after` is exclusive; the largest int db */
    ck_assert_int_eq(audit_keyspace_next("db2147483647:keys=1\r\ndb4:keys=1\r\n", 4), 2147483647);
    ck_assert_int_eq(audit_keyspace_next("db2147483647:keys=1\r\n", 2147483647), -1);
}
END_TEST

static Suite *audit_suite(void)
{
    Suite *s = suite_create("audit");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, escape_keeps_printable_and_hexes_the_rest);
    tcase_add_test(tc, ttl_rules);
    tcase_add_test(tc, test_issue10_item2_keyspace_lists_every_db_with_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(audit_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
