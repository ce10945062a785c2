/* test_topology.c: unit tests for topology.c: INFO rules per instance role, and the recorded results. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology.h"

/* INFO text as Redis 7 sends it (CRLF lines, section headers), with the fields the rules read. */
static void info(char *buf, size_t len, const char *version, const char *maxmemory, const char *policy, const char *aof)
{
    snprintf(buf, len,
             "# Server\r\nredis_version:%s\r\nredis_mode:standalone\r\n\r\n"
             "# Memory\r\nused_memory:1000\r\nmaxmemory:%s\r\nmaxmemory_human:x\r\nmaxmemory_policy:%s\r\n\r\n"
             "# Persistence\r\naof_enabled:%s\r\naof_rewrite_in_progress:0\r\n",
             version, maxmemory, policy, aof);
}

START_TEST(durable_noeviction_with_aof_is_fine)
{
    char text[1024], problems[TOPOLOGY_PROBLEMS_MAX];
    info(text, sizeof(text), "7.0.15", "268435456", "noeviction", "1");
    ck_assert_int_eq(topology_check("durable", text, problems, sizeof(problems)), 0);
    ck_assert_str_eq(problems, "");
    info(text, sizeof(text), "7.2.4", "0", "noeviction", "1"); /* durable needs no maxmemory */
    ck_assert_int_eq(topology_check("durable", text, problems, sizeof(problems)), 0);
}
END_TEST

START_TEST(durable_evicting_policy_and_aof_off_are_reported)
{
    char text[1024], problems[TOPOLOGY_PROBLEMS_MAX];
    info(text, sizeof(text), "7.0.15", "0", "allkeys-lru", "0");
    ck_assert_int_eq(topology_check("durable", text, problems, sizeof(problems)), 2);
    ck_assert_str_eq(problems, "instance 'durable' maxmemory-policy is allkeys-lru, must be noeviction\n"
                               "instance 'durable' has AOF off (aof_enabled:0), must be appendonly yes\n");
    info(text, sizeof(text), "7.0.15", "0", "volatile-lru", "1");
    ck_assert_int_eq(topology_check("durable", text, problems, sizeof(problems)), 1);
}
END_TEST

START_TEST(cache_rules)
{
    char text[1024], problems[TOPOLOGY_PROBLEMS_MAX];
    static const char *const good[] = {"allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-ttl"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        info(text, sizeof(text), "7.0.0", "67108864", good[i], "0");
        ck_assert_msg(topology_check("cache", text, problems, sizeof(problems)) == 0, "%s: %s", good[i], problems);
    }
    info(text, sizeof(text), "7.0.0", "0", "noeviction", "1");
    ck_assert_int_eq(topology_check("cache", text, problems, sizeof(problems)), 2);
    ck_assert_ptr_nonnull(strstr(problems, "instance 'cache' has no maxmemory (maxmemory:0)"));
    ck_assert_ptr_nonnull(strstr(problems, "instance 'cache' maxmemory-policy is noeviction, must evict"));
}
END_TEST

START_TEST(old_redis_is_reported_for_every_role)
{
    char text[1024], problems[TOPOLOGY_PROBLEMS_MAX];
    info(text, sizeof(text), "6.2.14", "1000", "noeviction", "1");
    ck_assert_int_eq(topology_check("durable", text, problems, sizeof(problems)), 1);
    ck_assert_str_eq(problems, "instance 'durable' runs Redis 6.2.14, must be 7.0 or newer\n");
    info(text, sizeof(text), "6.0.0", "1000", "allkeys-lru", "0");
    ck_assert_int_eq(topology_check("cache", text, problems, sizeof(problems)), 1);
    ck_assert_int_eq(topology_check("sessions", text, problems, sizeof(problems)), 1); /* other names: version only */
    info(text, sizeof(text), "10.0.1", "0", "noeviction", "0");
    ck_assert_int_eq(topology_check("sessions", text, problems, sizeof(problems)), 0);
}
END_TEST

START_TEST(missing_fields_and_lf_only_lines)
{
    char problems[TOPOLOGY_PROBLEMS_MAX];
    ck_assert_int_eq(topology_check("durable", "", problems, sizeof(problems)), 3);
    ck_assert_ptr_nonnull(strstr(problems, "INFO has no redis_version"));
    /* LF-only lines, no trailing newline; a field prefix ("maxmemory" of "maxmemory_policy") does not match */
    const char *text = "redis_version:7.0.1\nmaxmemory_policy:allkeys-lru\nmaxmemory:5";
    ck_assert_int_eq(topology_check("cache", text, problems, sizeof(problems)), 0);
    ck_assert_int_eq(
        topology_check("cache", "redis_version:7.0.1\nmaxmemory_policy:allkeys-lru\n", problems, sizeof(problems)), 1);
    ck_assert_str_eq(problems, "instance 'cache' INFO has no maxmemory\n");
}
END_TEST

START_TEST(small_buffer_keeps_whole_lines_and_counts_all)
{
    char text[1024], problems[70];
    info(text, sizeof(text), "6.0.0", "0", "allkeys-lru", "0");
    ck_assert_int_eq(topology_check("durable", text, problems, sizeof(problems)), 3);
    ck_assert_str_eq(problems, "instance 'durable' runs Redis 6.0.0, must be 7.0 or newer\n");
    ck_assert_int_eq(topology_check("durable", text, problems, 0), 3);
}
END_TEST

START_TEST(record_and_get)
{
    char buf[TOPOLOGY_PROBLEMS_MAX];
    topology_reset();
    ck_assert_int_eq(topology_get(NULL, 1, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "");
    topology_record(NULL, 1, "instance 'cache' has no maxmemory (maxmemory:0), must have a limit to evict under\n");
    ck_assert_int_eq(topology_get(NULL, 1, buf, sizeof(buf)), 1);
    ck_assert_ptr_nonnull(strstr(buf, "no maxmemory"));
    topology_record(NULL, 1, "");
    ck_assert_int_eq(topology_get(NULL, 1, buf, sizeof(buf)), 1);
    ck_assert_str_eq(buf, "");
    ck_assert_int_eq(topology_get(NULL, 0, buf, sizeof(buf)), 0);
    topology_record(NULL, 99, "ignored"); /* out of range: ignored */
    ck_assert_int_eq(topology_get(NULL, 99, buf, sizeof(buf)), 0);
}
END_TEST

/* text framed as a RESP bulk string, as the backend's reply framer hands it over. */
static size_t bulk(char *out, size_t len, const char *text)
{
    return (size_t)snprintf(out, len, "$%zu\r\n%s\r\n", strlen(text), text);
}

START_TEST(info_reply_hook_parses_bulk_and_errors)
{
    char buf[TOPOLOGY_PROBLEMS_MAX], framed[512];
    topology_reset();
    size_t n =
        bulk(framed, sizeof(framed), "# Server\r\nredis_version:7.0.15\r\nmaxmemory:1\r\nmaxmemory_policy:allkeys-lru");
    topology_on_info_reply(NULL, 1, "cache", framed, n);
    ck_assert_int_eq(topology_get(NULL, 1, buf, sizeof(buf)), 1);
    ck_assert_str_eq(buf, "");

    n = bulk(framed, sizeof(framed),
             "# Server\r\nredis_version:7.0.15\r\nmaxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n");
    topology_on_info_reply(NULL, 1, "cache", framed, n);
    topology_get(NULL, 1, buf, sizeof(buf));
    ck_assert_str_eq(buf, "instance 'cache' has no maxmemory (maxmemory:0), must have a limit to evict under\n");

    const char err[] = "-NOPERM this user has no permissions to run the 'info' command\r\n";
    topology_on_info_reply(NULL, 0, "durable", err, strlen(err));
    topology_get(NULL, 0, buf, sizeof(buf));
    ck_assert_str_eq(buf,
                     "instance 'durable' INFO failed: NOPERM this user has no permissions to run the 'info' command\n");

    /* still loading (aof_enabled:0 until the AOF is read): nothing recorded, asked again */
    topology_reset();
    n = bulk(framed, sizeof(framed), "# Persistence\r\nloading:1\r\naof_enabled:0\r\n");
    ck_assert_int_eq(topology_on_info_reply(NULL, 0, "durable", framed, n), 1);
    ck_assert_int_eq(topology_get(NULL, 0, buf, sizeof(buf)), 0);
    n = bulk(framed, sizeof(framed),
             "# Server\r\nredis_version:7.0.15\r\nloading:0\r\nmaxmemory_policy:noeviction\r\naof_enabled:1\r\n");
    ck_assert_int_eq(topology_on_info_reply(NULL, 0, "durable", framed, n), 0);
    ck_assert_int_eq(topology_get(NULL, 0, buf, sizeof(buf)), 1);
    ck_assert_str_eq(buf, "");

    /* a bulk shorter than it claims is never read past len (no NUL terminator here) */
    char truncated[] = {'$', '5', '0', '0', '\r', '\n', 'r', 'e', 'd', 'i', 's'};
    topology_on_info_reply(NULL, 0, "durable", truncated, sizeof(truncated));
    topology_get(NULL, 0, buf, sizeof(buf));
    ck_assert_ptr_nonnull(strstr(buf, "instance 'durable' INFO gave no text"));
}
END_TEST

static Suite *topology_suite(void)
{
    Suite *s = suite_create("topology");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, durable_noeviction_with_aof_is_fine);
    tcase_add_test(tc, durable_evicting_policy_and_aof_off_are_reported);
    tcase_add_test(tc, cache_rules);
    tcase_add_test(tc, old_redis_is_reported_for_every_role);
    tcase_add_test(tc, missing_fields_and_lf_only_lines);
    tcase_add_test(tc, small_buffer_keeps_whole_lines_and_counts_all);
    tcase_add_test(tc, record_and_get);
    tcase_add_test(tc, info_reply_hook_parses_bulk_and_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(topology_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
