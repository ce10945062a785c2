/* test_topology.c: unit tests for topology.c: INFO rules per instance role, and the recorded results. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "info_redis70.h"
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

/* A replica that cannot take over (its first sync not finished, its link down) is reported on its
 * node; a replica in sync, and a primary, are not */
START_TEST(replica_that_cannot_take_over_is_reported)
{
    char base[1024], text[2048], problems[TOPOLOGY_PROBLEMS_MAX];
    info(base, sizeof(base), "7.0.15", "0", "noeviction", "1");
    snprintf(text, sizeof(text),
             "%s\r\n# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:6379\r\n"
             "master_link_status:down\r\nmaster_sync_in_progress:1\r\nmaster_sync_total_bytes:-1\r\n",
             base);
    ck_assert_int_eq(topology_check_node("durable", "127.0.0.1:7001", text, problems, sizeof(problems)), 1);
    ck_assert_str_eq(problems, "instance 'durable' node 127.0.0.1:7001: is a replica whose first sync has not "
                               "finished (master_sync_in_progress:1): promoted now, it would lose every write it "
                               "lacks\n");
    snprintf(text, sizeof(text),
             "%s\r\n# Replication\r\nrole:slave\r\nmaster_link_status:down\r\nmaster_sync_in_progress:0\r\n", base);
    ck_assert_int_eq(topology_check_node("durable", "127.0.0.1:7001", text, problems, sizeof(problems)), 1);
    ck_assert_ptr_nonnull(strstr(problems, "whose link to its primary is down (master_link_status)"));
    snprintf(text, sizeof(text),
             "%s\r\n# Replication\r\nrole:slave\r\nmaster_link_status:up\r\nmaster_sync_in_progress:0\r\n", base);
    ck_assert_int_eq(topology_check_node("durable", "127.0.0.1:7001", text, problems, sizeof(problems)), 0);
    snprintf(text, sizeof(text), "%s\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n", base);
    ck_assert_int_eq(topology_check("durable", text, problems, sizeof(problems)), 0);
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

/* ---- capacity: parsed from a real redis-server 7.0 INFO ---- */

START_TEST(capacity_from_real_info)
{
    struct topology_capacity c;
    ck_assert_int_eq(topology_parse_capacity(info_redis70, &c), 0);
    ck_assert_int_eq(c.valid, 1);
    ck_assert_uint_eq(c.used_memory, 966960);
    ck_assert_uint_eq(c.maxmemory, 104857600);
    ck_assert_uint_eq(c.evicted_keys, 0);
    ck_assert_uint_eq(c.expired_keys, 0);
    ck_assert_uint_eq(c.keyspace_hits, 1);
    ck_assert_uint_eq(c.keyspace_misses, 1);
    ck_assert_uint_eq(c.connected_clients, 1);
    ck_assert_uint_eq(c.ops_per_sec, 1);
    ck_assert_int_eq(c.aof_enabled, 1);
    ck_assert_int_eq(c.aof_last_write_ok, 1);
    ck_assert_int_eq(c.aof_last_rewrite_ok, 1);
    ck_assert_str_eq(c.role, "master");
    ck_assert_int_eq(c.read_ms, 0);
    /* (maxmemory - used) / maxmemory */
    ck_assert(topology_headroom(&c) > 0.99077 && topology_headroom(&c) < 0.99078);
    /* the memory field is not confused with used_memory_rss or maxmemory_human */
    ck_assert_ptr_nonnull(strstr(info_redis70, "\r\nused_memory_rss:"));
}
END_TEST

START_TEST(capacity_edges)
{
    struct topology_capacity c;
    ck_assert_int_eq(topology_parse_capacity("# Server\r\nredis_version:7.0.15\r\n", &c), -1); /* no memory section */
    ck_assert_int_eq(c.valid, 0);
    ck_assert_int_eq(topology_parse_capacity("used_memory:5000\nmaxmemory:0\naof_last_write_status:err\n"
                                             "aof_enabled:0\nrole:slave\nevicted_keys:17\n",
                                             &c),
                     0);
    ck_assert(topology_headroom(&c) == -1); /* no limit */
    ck_assert_int_eq(c.aof_last_write_ok, 0);
    ck_assert_int_eq(c.aof_last_rewrite_ok, 0); /* absent reads 0 */
    ck_assert_str_eq(c.role, "slave");
    ck_assert_uint_eq(c.evicted_keys, 17);
    c.maxmemory = 4000; /* used over the limit: no headroom, never negative */
    ck_assert(topology_headroom(&c) == 0);
    c.maxmemory = 10000;
    ck_assert(topology_headroom(&c) == 0.5);
}
END_TEST

START_TEST(capacity_recorded_by_the_info_hook)
{
    topology_reset();
    struct topology_capacity c;
    topology_get_capacity(NULL, 1, &c);
    ck_assert_int_eq(c.valid, 0);
    size_t n = strlen(info_redis70);
    char *reply = malloc(n + 32);
    int h = snprintf(reply, 32, "$%zu\r\n", n);
    memcpy(reply + h, info_redis70, n);
    memcpy(reply + h + n, "\r\n", 2);
    ck_assert_int_eq(topology_on_info_reply(NULL, 1, "durable", reply, (size_t)h + n + 2), 0);
    free(reply);
    topology_get_capacity(NULL, 1, &c);
    ck_assert_int_eq(c.valid, 1);
    ck_assert_uint_eq(c.maxmemory, 104857600);
    ck_assert_int_gt(c.read_ms, 0);
    topology_get_capacity(NULL, 0, &c); /* another instance: nothing */
    ck_assert_int_eq(c.valid, 0);
    topology_reset();
}
END_TEST

/* a cluster's node: the rules of its instance's role, each line naming the node */
START_TEST(node_check_names_the_node)
{
    char text[1024], problems[TOPOLOGY_PROBLEMS_MAX];
    info(text, sizeof(text), "7.0.15", "67108864", "noeviction", "0");
    ck_assert_int_eq(topology_check_node("cache", "127.0.0.1:7001", text, problems, sizeof(problems)), 1);
    ck_assert_str_eq(problems, "instance 'cache' node 127.0.0.1:7001: maxmemory-policy is noeviction, must evict "
                               "(allkeys-lru, allkeys-lfu, allkeys-random or volatile-*)\n");
    info(text, sizeof(text), "6.2.0", "0", "allkeys-lru", "0");
    ck_assert_int_eq(topology_check_node("durable", "::1:7002", text, problems, sizeof(problems)), 3);
    ck_assert_str_eq(problems,
                     "instance 'durable' node ::1:7002: runs Redis 6.2.0, must be 7.0 or newer\n"
                     "instance 'durable' node ::1:7002: maxmemory-policy is allkeys-lru, must be noeviction\n"
                     "instance 'durable' node ::1:7002: has AOF off (aof_enabled:0), must be appendonly yes\n");
    info(text, sizeof(text), "7.0.15", "67108864", "allkeys-lfu", "0");
    ck_assert_int_eq(topology_check_node("cache", "h:1", text, problems, sizeof(problems)), 0);
    ck_assert_str_eq(problems, "");
}
END_TEST

/* a cluster instance's round: its nodes and problems recorded together; a later round replaces
 * the list; the workers' connect-time INFO of a cluster node (cluster_enabled:1) records nothing */
START_TEST(cluster_round_recorded)
{
    topology_reset();
    struct topology_node nodes[3] = {{.addr = "127.0.0.1:7001", .up = 1}, {.addr = "127.0.0.1:7002", .up = 0}};
    nodes[0].capacity.valid = 1;
    nodes[0].capacity.maxmemory = 1000;
    topology_record_cluster(NULL, 1, nodes, 2, "instance 'cache' node 127.0.0.1:7002: unreachable (refused)\n");
    struct topology_node out[SLOTMAP_MAX_NODES];
    ck_assert_int_eq(topology_get_nodes(NULL, 1, out, SLOTMAP_MAX_NODES), 2);
    ck_assert_str_eq(out[0].addr, "127.0.0.1:7001");
    ck_assert_int_eq(out[0].up, 1);
    ck_assert_uint_eq(out[0].capacity.maxmemory, 1000);
    ck_assert_int_eq(out[1].up, 0);
    ck_assert_int_eq(topology_get_nodes(NULL, 1, out, 1), 1);
    ck_assert_int_eq(topology_get_nodes(NULL, 0, out, SLOTMAP_MAX_NODES), 0); /* a single server: none */
    char buf[TOPOLOGY_PROBLEMS_MAX];
    ck_assert_int_eq(topology_get(NULL, 1, buf, sizeof(buf)), 1);
    ck_assert_str_eq(buf, "instance 'cache' node 127.0.0.1:7002: unreachable (refused)\n");

    /* a connect-time INFO of some node of the cluster: neither its problems nor its capacity land */
    char framed[512];
    size_t n = bulk(framed, sizeof(framed),
                    "# Server\r\nredis_version:7.0.15\r\n# Memory\r\nused_memory:5\r\nmaxmemory:0\r\n"
                    "maxmemory_policy:noeviction\r\n# Cluster\r\ncluster_enabled:1\r\n");
    ck_assert_int_eq(topology_on_info_reply(NULL, 1, "cache", framed, n), 0);
    ck_assert_int_eq(topology_get(NULL, 1, buf, sizeof(buf)), 1);
    ck_assert_str_eq(buf, "instance 'cache' node 127.0.0.1:7002: unreachable (refused)\n");
    struct topology_capacity c;
    topology_get_capacity(NULL, 1, &c);
    ck_assert_int_eq(c.valid, 0);

    topology_record_cluster(NULL, 1, nodes + 1, 1, "");
    ck_assert_int_eq(topology_get_nodes(NULL, 1, out, SLOTMAP_MAX_NODES), 1);
    ck_assert_str_eq(out[0].addr, "127.0.0.1:7002");
    ck_assert_int_eq(topology_get(NULL, 1, buf, sizeof(buf)), 1);
    ck_assert_str_eq(buf, "");
    ck_assert_int_eq(topology_info_loading("redis_version:7.0.15\r\nloading:1\r\n"), 1);
    ck_assert_int_eq(topology_info_loading("loading:0\r\n"), 0);
    topology_reset();
}
END_TEST

static Suite *topology_suite(void)
{
    Suite *s = suite_create("topology");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, durable_noeviction_with_aof_is_fine);
    tcase_add_test(tc, replica_that_cannot_take_over_is_reported);
    tcase_add_test(tc, durable_evicting_policy_and_aof_off_are_reported);
    tcase_add_test(tc, cache_rules);
    tcase_add_test(tc, old_redis_is_reported_for_every_role);
    tcase_add_test(tc, missing_fields_and_lf_only_lines);
    tcase_add_test(tc, small_buffer_keeps_whole_lines_and_counts_all);
    tcase_add_test(tc, record_and_get);
    tcase_add_test(tc, info_reply_hook_parses_bulk_and_errors);
    tcase_add_test(tc, capacity_from_real_info);
    tcase_add_test(tc, capacity_edges);
    tcase_add_test(tc, capacity_recorded_by_the_info_hook);
    tcase_add_test(tc, node_check_names_the_node);
    tcase_add_test(tc, cluster_round_recorded);
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
