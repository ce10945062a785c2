/* test_audit.c: unit tests for audit.c's pure parts: key escaping and the TTL rules. */
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

static Suite *audit_suite(void)
{
    Suite *s = suite_create("audit");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, escape_keeps_printable_and_hexes_the_rest);
    tcase_add_test(tc, ttl_rules);
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
