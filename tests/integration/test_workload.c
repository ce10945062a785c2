/* test_workload.c: the registry post-condition (harness_check_registry) proven to catch planted keys, then a seeded random mixed workload through keygate that must leave no key breaking the registry. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/*
 * One harness (two TLS redis-servers + keygate with the repo's conf/registry.conf) for
 * the suite (CK_NOFORK, see harness.h). Registry facts used by the detector test:
 *   q:      instance=durable ttl=none
 *   cache:  instance=cache   ttl=1h  max-ttl=7d
 */

static struct harness h;

static void setup(void)
{
    ck_assert_msg(harness_start(&h, NULL) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h);
    harness_stop(&h);
}

/* Run one command directly on a backend; the reply must not be an error. */
static void direct_ok(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "`%s`: %s", fmt, c->errstr);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "`%s`: %s", fmt, r->str);
    freeReplyObject(r);
}

/* ---- the detector: harness_check_registry fails on each kind of breaking key ---- */

static int g_child_mode; /* what the child suite's test / teardown does (run_child_suite) */

static void child_setup(void) {}

static void child_teardown(void)
{
    if (g_child_mode == 2) harness_check_registry(&h);
}

START_TEST(child_test)
{
    if (g_child_mode == 1) harness_check_registry(&h);
}
END_TEST

/* Run a one-test suite in a child process: mode 1 calls harness_check_registry in the
 * test, mode 2 in the suite's teardown. Returns the child's exit code, harness_run's count. */
static int run_child_suite(int mode)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        g_child_mode = mode;
        Suite *s = suite_create("detector-child");
        TCase *tc = harness_tcase(s, mode == 1 ? "in-test" : "in-teardown", 30, child_setup, child_teardown);
        tcase_add_test(tc, child_test);
        int failed = harness_run(s);
        fflush(stdout);
        fflush(stderr);
        _exit(failed > 100 ? 100 : failed); /* _exit: the parent's atexit handlers own the harness */
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "child suite (mode %d) died", mode);
    return WEXITSTATUS(status);
}

static void expect_report_line(const char *report, const char *line)
{
    char want[512];
    snprintf(want, sizeof want, "  %s\n", line);
    ck_assert_msg(strstr(report, want) != NULL, "want the line\n%sin the report:\n%s", want, report);
}

START_TEST(test_issue10_postcondition_detector_finds_planted_keys)
{
    char report[8192];
    int n = harness_registry_violations(&h, NULL, 100, report, sizeof report);
    ck_assert_msg(n == 0, "not clean before planting (%d):\n%s", n, report);

    redisContext *d = harness_must_direct(&h, "durable"), *c = harness_must_direct(&h, "cache");
    direct_ok(d, "SET nope:planted x");                     /* no namespace */
    direct_ok(c, "SET q:planted x");                        /* q: lives on durable */
    direct_ok(c, "SET cache:planted:nottl v");              /* cache: has ttl=1h */
    direct_ok(c, "SET cache:planted:long v EX 2592000");    /* 30 d > max-ttl=7d */
    direct_ok(c, "SET %b v EX 60", "cache:planted:\x01 \\", (size_t)16); /* fine, escaped if listed */
    direct_ok(c, "SET cache:planted:ok v EX 60");           /* fine */
    direct_ok(d, "SELECT 3");
    direct_ok(d, "SET q:planted:db3 x");                    /* in db 3 */
    direct_ok(c, "SELECT 15");
    direct_ok(c, "SET %b x", "nope:\x00nul", (size_t)9);    /* db 15, no namespace, binary */

    n = harness_registry_violations(&h, NULL, 100, report, sizeof report);
    ck_assert_msg(n == 6, "want 6 breaking keys, got %d:\n%s", n, report);
    expect_report_line(report, "durable db0 nope:planted: matches no namespace");
    expect_report_line(report, "cache db0 q:planted: namespace 'q:' lives on durable");
    expect_report_line(report, "cache db0 cache:planted:nottl: no TTL (namespace 'cache:' has ttl=3600000ms)");
    ck_assert_msg(strstr(report, "  cache db0 cache:planted:long: TTL ") != NULL &&
                      strstr(report, "ms above max-ttl=604800000ms of 'cache:'\n") != NULL,
                  "%s", report);
    expect_report_line(report, "durable db3 q:planted:db3: in db 3 (keygate serves db 0 only)");
    expect_report_line(report, "cache db15 nope:\\x00nul: in db 15 (keygate serves db 0 only); matches no namespace");
    ck_assert_msg(strstr(report, "cache:planted:ok") == NULL && strstr(report, "cache:planted:\\x01") == NULL,
                  "a good key listed:\n%s", report);

    /* the listing is capped, the count is not */
    n = harness_registry_violations(&h, NULL, 2, report, sizeof report);
    ck_assert_int_eq(n, 6);
    ck_assert_msg(strstr(report, "  ... and 4 more\n") != NULL, "%s", report);

    /* a planted pattern skips exactly what it matches */
    const char *const planted[] = {"nope:planted", "cache:planted:*", NULL};
    n = harness_registry_violations(&h, planted, 100, report, sizeof report);
    ck_assert_msg(n == 3, "want 3 after skipping nope:planted and cache:planted:*, got %d:\n%s", n, report);
    ck_assert_msg(strstr(report, "cache:planted") == NULL && strstr(report, "nope:planted") == NULL, "%s", report);
    expect_report_line(report, "cache db0 q:planted: namespace 'q:' lives on durable");

    /* the assertion fails a test, and a teardown (harness_run counts it) */
    printf("detector self-test: the two child suites below must each FAIL on the planted keys\n");
    ck_assert_int_eq(run_child_suite(1), 1);
    ck_assert_int_eq(run_child_suite(2), 1);

    /* delete the plants: clean again, and the assertion passes */
    direct_ok(d, "FLUSHDB");
    direct_ok(c, "FLUSHDB");
    direct_ok(d, "SELECT 0");
    direct_ok(c, "SELECT 0");
    direct_ok(d, "DEL nope:planted");
    direct_ok(c, "DEL q:planted cache:planted:nottl cache:planted:long");
    redisFree(d);
    redisFree(c);
    n = harness_registry_violations(&h, NULL, 100, report, sizeof report);
    ck_assert_msg(n == 0, "not clean after deleting the plants (%d):\n%s", n, report);
    ck_assert_int_eq(run_child_suite(1), 0);
    ck_assert_int_eq(run_child_suite(2), 0);
    harness_check_registry(&h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("workload");
    TCase *tc = harness_tcase(s, "workload", 120, setup, teardown);
    tcase_add_test(tc, test_issue10_postcondition_detector_finds_planted_keys);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
