/* test_policy.c: unit tests of the pure request decision (policy_decide) over the real registry. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_fixture.h"
#include "slotmap.h"

static struct user_conf user_ro, user_queues;

static void setup(void)
{
    fixture_load("conf/registry.conf");

    static char *q_owners[] = {"queues", "lifecycle"};
    memset(&user_queues, 0, sizeof(user_queues));
    user_queues.name = "queues";
    user_queues.owners = q_owners;
    user_queues.nowners = 2;
    memset(&user_ro, 0, sizeof(user_ro));
    user_ro.name = "ops";
    user_ro.all_owners = 1;
    user_ro.read_only = 1;
}

static void teardown(void)
{
    fixture_free();
}

/* Decide for a space-separated command line as session s (no quoting needed in these tests). */
static void decide_as(const struct session *s, const char *line, struct plan *p)
{
    fixture_decide(s, line, p);
}

static void decide(const char *line, struct plan *p)
{
    struct session open = {.authenticated = 1, .user = NULL, .multi_instance = -1, .watch_instance = -1};
    decide_as(&open, line, p);
}

static void assert_error_prefix(const struct plan *p, const char *prefix)
{
    ck_assert_int_eq(p->kind, PLAN_ERROR);
    ck_assert_msg(strncmp(p->error, prefix, strlen(prefix)) == 0, "error '%s' does not start with '%s'", p->error,
                  prefix);
}

/* cache (instance 1) as a Redis Cluster: slots from CRC16 (expected values asked of a real node's
 * CLUSTER KEYSLOT: cache:{u}a and cache:{u}b 11826, cache:x 16229, cache:y 12100) */
START_TEST(cluster_instance_routes_by_slot)
{
    cfg.instances[1].cluster = 1;
    struct plan p;
    decide("SET cache:x 1", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.slot, 16229);
    ck_assert_uint_eq(p.nappend, 2); /* the TTL still injected */
    plan_release(&p);
    decide("MSET cache:{u}a 1 cache:{u}b 2", &p); /* one slot: as it came */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.slot, 11826);
    ck_assert_int_eq(p.merge, MERGE_NONE);
    plan_release(&p);
    decide("MSET cache:x 1 cache:y 2", &p);
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    ck_assert_str_eq(p.error, "CROSSSLOT Keys in request don't hash to the same slot");
    decide("MGET cache:x cache:y cache:x q:1", &p); /* split per (instance, slot), in key order */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.merge, MERGE_MGET);
    ck_assert_int_eq(p.nparts, 3);
    ck_assert_int_eq(p.key_part[1], p.key_part[3]);
    ck_assert_int_ne(p.key_part[1], p.key_part[2]);
    ck_assert_int_eq(p.parts[p.key_part[1]].slot, 16229);
    ck_assert_int_eq(p.parts[p.key_part[2]].slot, 12100);
    ck_assert_int_eq(p.parts[p.key_part[4]].instance, 0);
    ck_assert_int_eq(p.parts[p.key_part[4]].slot, -1);
    plan_release(&p);
    decide("GET q:1", &p); /* the single-server instance has no slot */
    ck_assert_int_eq(p.slot, -1);
    struct session s;
    session_init(&s, 1);
    session_multi_begin(&s);
    decide_as(&s, "MSET cache:x 1 cache:y 2", &p); /* queued: EXEC answers CROSSSLOT, as Redis */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.slot, PLAN_SLOT_SPANS);
    plan_release(&p);
    session_multi_end(&s);
    session_watch(&s, 1, 16229);
    decide_as(&s, "WATCH cache:y", &p); /* the WATCH pin is one node's connection */
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    ck_assert_str_eq(p.error, "CROSSSLOT Keys in request don't hash to the same slot");
    decide_as(&s, "WATCH cache:x", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    plan_release(&p);
    cfg.instances[1].cluster = 0;
}
END_TEST

/* KEYS and SCAN in a namespace of a cluster instance read every primary; inside MULTI they
 * would read one: refused. DBSIZE is split as on single servers (the router adds the nodes);
 * on a single-server instance KEYS and SCAN go as they came. */
START_TEST(cluster_patterns_read_every_primary)
{
    struct plan p;
    decide("KEYS cache:a*", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.merge, MERGE_NONE);
    plan_release(&p);
    cfg.instances[1].cluster = 1;
    decide("KEYS cache:a*", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 1);
    ck_assert_int_eq(p.merge, MERGE_KEYS);
    ck_assert_ptr_null(p.key_part);
    plan_release(&p);
    decide("SCAN 129 MATCH cache:a* COUNT 10", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 1);
    ck_assert_int_eq(p.merge, MERGE_SCAN);
    plan_release(&p);
    decide("SCAN 0 MATCH q:*", &p); /* durable is one server */
    ck_assert_int_eq(p.merge, MERGE_NONE);
    plan_release(&p);
    decide("DBSIZE", &p);
    ck_assert_int_eq(p.merge, MERGE_SUM);
    plan_release(&p);
    struct session s;
    session_init(&s, 1);
    session_multi_begin(&s);
    decide_as(&s, "KEYS cache:a*", &p);
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    ck_assert_str_eq(p.error, "DENIED KEYS inside MULTI would read one node of cluster instance 'cache'");
    decide_as(&s, "SCAN 0 MATCH cache:a*", &p);
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    ck_assert_str_eq(p.error, "DENIED SCAN inside MULTI would read one node of cluster instance 'cache'");
    cfg.instances[1].cluster = 0;
}
END_TEST

/* Shard channels of a cluster instance go to their slot's node; one command's must share a slot
 * (Redis's CROSSSLOT); SUBSCRIBE and PUBLISH, which a cluster broadcasts, take no slot. */
START_TEST(cluster_shard_channels_take_their_slot)
{
    cfg.instances[1].cluster = 1;
    struct plan p;
    decide("SSUBSCRIBE push:{a}1 push:{a}2", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.flow, FLOW_SUBSCRIBE);
    ck_assert_int_eq(p.slot, (int)slotmap_key_slot("a", 1));
    decide("SSUBSCRIBE push:x push:y", &p);
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    ck_assert_str_eq(p.error, "CROSSSLOT Keys in request don't hash to the same slot");
    decide("SUNSUBSCRIBE push:{a}1", &p);
    ck_assert_int_eq(p.slot, (int)slotmap_key_slot("a", 1));
    decide("SPUBLISH push:x m", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.slot, (int)slotmap_key_slot("push:x", 6));
    decide("SUBSCRIBE push:x push:y", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.slot, -1);
    decide("PUBLISH push:x m", &p);
    ck_assert_int_eq(p.slot, -1);
    cfg.instances[1].cluster = 0;
    decide("SSUBSCRIBE push:x push:y", &p); /* a single server: no slot */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.slot, -1);
}
END_TEST

START_TEST(set_cache_key_gets_registry_ttl)
{
    struct plan p;
    decide("SET cache:x 1", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 1);
    ck_assert_uint_eq(p.nappend, 2);
    ck_assert_mem_eq(p.append[0], "EX", 2);
    ck_assert_mem_eq(p.append[1], "3600", p.append_len[1]);
    ck_assert_uint_eq(p.append_len[1], 4);
}
END_TEST

START_TEST(longest_prefix_decides_ttl)
{
    struct plan p;
    decide("SET cache:mattermost:listener {}", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_uint_eq(p.nappend, 2);
    ck_assert_uint_eq(p.append_len[1], 2);
    ck_assert_mem_eq(p.append[1], "90", 2);
    ck_assert_str_eq(p.ns->prefix, "cache:mattermost:listener");
}
END_TEST

START_TEST(set_durable_queue_key_has_no_ttl)
{
    struct plan p;
    decide("SET q:run:1 payload", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 0);
    ck_assert_uint_eq(p.nappend, 0);
}
END_TEST

START_TEST(set_with_client_ttl_is_kept)
{
    struct plan p;
    decide("SET cache:x 1 EX 10", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_uint_eq(p.nappend, 0);
    decide("SET cache:x 1 px 10000", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_uint_eq(p.nappend, 0);
}
END_TEST

START_TEST(client_ttl_above_max_ttl_is_denied)
{
    struct plan p;
    decide("SET cache:x 1 EX 999999999", &p);
    assert_error_prefix(&p, "DENIED");
    ck_assert_ptr_nonnull(strstr(p.error, "cache:"));
    decide("EXPIRE rl:ip:1 86401", &p);
    assert_error_prefix(&p, "DENIED");
    decide("EXPIRE rl:ip:1 86400", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    decide("SETEX rl:ip:1 90000 v", &p);
    assert_error_prefix(&p, "DENIED");
    decide("PEXPIREAT rl:ip:1 1800000000000", &p);
    assert_error_prefix(&p, "DENIED");
}
END_TEST

START_TEST(persist_refused_only_in_ttl_namespaces)
{
    struct plan p;
    decide("PERSIST cache:x", &p);
    assert_error_prefix(&p, "DENIED");
    decide("PERSIST q:x", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    decide("GETEX cache:x PERSIST", &p);
    assert_error_prefix(&p, "DENIED");
}
END_TEST

START_TEST(unknown_namespace_is_refused)
{
    struct plan p;
    decide("SET nope 1", &p);
    ck_assert_int_eq(p.kind, PLAN_ERROR);
    ck_assert_str_eq(p.error, "NONAMESPACE key 'nope' matches no namespace in the registry");
    decide("MGET cache:a nope:b", &p);
    ck_assert_str_eq(p.error, "NONAMESPACE key 'nope:b' matches no namespace in the registry");
}
END_TEST

START_TEST(keys_on_two_instances_are_refused)
{
    struct plan p;
    decide("MSET q:a 1 cache:b 2", &p);
    assert_error_prefix(&p, "CROSSINSTANCE");
    decide("RENAME q:a cache:b", &p);
    assert_error_prefix(&p, "CROSSINSTANCE");
    decide("MSET q:a 1 rl:b 2", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 0);
}
END_TEST

START_TEST(many_keys_route_together)
{
    char line[65536] = "MGET";
    for (int i = 0; i < 600; i++) {
        char k[32];
        snprintf(k, sizeof(k), " cache:k%d", i);
        strcat(line, k);
    }
    struct plan p;
    decide(line, &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 1);
    strcat(line, " q:last");
    decide(line, &p); /* MGET across instances is split per instance */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.merge, MERGE_MGET);
    ck_assert_int_eq(p.nparts, 2);
    ck_assert_int_eq(p.parts[p.key_part[1]].instance, 1);
    ck_assert_int_eq(p.parts[p.key_part[601]].instance, 0);
    ck_assert_int_eq(p.parts[p.key_part[601]].slot, -1);
    plan_release(&p);
    line[1] = 'S'; /* MSET across instances cannot be split */
    strcat(line, " v");
    decide(line, &p);
    assert_error_prefix(&p, "CROSSINSTANCE");
}
END_TEST

START_TEST(redis_error_texts)
{
    struct plan p;
    decide("FOO", &p);
    ck_assert_str_eq(p.error, "ERR unknown command 'FOO', with args beginning with: ");
    decide("foo a b", &p);
    ck_assert_str_eq(p.error, "ERR unknown command 'foo', with args beginning with: 'a' 'b' ");
    decide("GET", &p);
    ck_assert_str_eq(p.error, "ERR wrong number of arguments for 'get' command");
    decide("CLIENT FOO", &p);
    ck_assert_str_eq(p.error, "ERR unknown subcommand 'FOO'. Try CLIENT HELP.");
    decide("client setname", &p);
    ck_assert_str_eq(p.error, "ERR wrong number of arguments for 'client|setname' command");
}
END_TEST

START_TEST(local_commands)
{
    struct plan p;
    decide("PING", &p);
    ck_assert_int_eq(p.kind, PLAN_LOCAL);
    ck_assert_int_eq(p.local, LOCAL_PING);
    decide("ping hello", &p);
    ck_assert_int_eq(p.local, LOCAL_PING);
    decide("ECHO x", &p);
    ck_assert_int_eq(p.local, LOCAL_ECHO);
    decide("SELECT 0", &p);
    ck_assert_int_eq(p.local, LOCAL_SELECT);
    decide("SELECT 3", &p);
    assert_error_prefix(&p, "DENIED");
    decide("HELLO 4", &p);
    assert_error_prefix(&p, "NOPROTO");
    decide("HELLO 1", &p);
    assert_error_prefix(&p, "NOPROTO");
    decide("HELLO 3", &p); /* RESP3 (issue 13) */
    ck_assert_int_eq(p.local, LOCAL_HELLO);
    decide("HELLO 2", &p);
    ck_assert_int_eq(p.local, LOCAL_HELLO);
    decide("COMMAND COUNT", &p);
    ck_assert_int_eq(p.local, LOCAL_COMMAND_COUNT);
    decide("COMMAND", &p);
    ck_assert_int_eq(p.local, LOCAL_COMMAND);
    decide("CLIENT SETNAME x", &p);
    ck_assert_int_eq(p.local, LOCAL_CLIENT_SETNAME);
    decide("QUIT", &p);
    ck_assert_int_eq(p.local, LOCAL_QUIT);
}
END_TEST

START_TEST(dangerous_commands_are_denied)
{
    const char *lines[] = {"CONFIG SET dir /tmp",
                           "FLUSHALL",
                           "FLUSHDB",
                           "SAVE",
                           "BGSAVE",
                           "SHUTDOWN",
                           "REPLICAOF 127.0.0.1 1",
                           "MODULE LOAD /x.so",
                           "DEBUG SLEEP 0",
                           "MONITOR",
                           "ACL LIST",
                           "RANDOMKEY",
                           "CLIENT KILL 1.2.3.4:5",
                           "SWAPDB 0 1",
                           "DUMP cache:x",
                           "RESTORE cache:x 0 x",
                           "MIGRATE h 1 cache:x 0 1"};
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        struct plan p;
        decide(lines[i], &p);
        ck_assert_msg(p.kind == PLAN_ERROR && strncmp(p.error, "DENIED", 6) == 0, "'%s' -> kind %d '%s'", lines[i],
                      p.kind, p.error);
    }
}
END_TEST

START_TEST(keyless_commands_cannot_be_routed)
{
    struct plan p;
    decide("RANDOMKEY", &p);
    assert_error_prefix(&p, "DENIED");
    decide("FLUSHDB", &p);
    assert_error_prefix(&p, "DENIED");
    decide("EVAL return 1 0", &p);
    assert_error_prefix(&p, "DENIED");
}
END_TEST

START_TEST(keyless_commands_keygate_forwards)
{
    struct plan p;
    decide("TIME", &p); /* the first instance answers */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 0);
    ck_assert_int_eq(p.merge, MERGE_NONE);
    decide("LASTSAVE", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 0);
    decide("DBSIZE", &p); /* every instance, summed */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.merge, MERGE_SUM);
    ck_assert_ptr_null(p.key_part);
    plan_release(&p);
    decide("WAIT 1 1000", &p); /* no write yet: the first instance, on a dedicated connection */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.flow, FLOW_BLOCK);
    ck_assert_int_eq(p.instance, 0);
    ck_assert_int_eq(p.wait_sync, 0);
    struct session wrote = {.authenticated = 1, .multi_instance = -1, .watch_instance = -1};
    session_wrote(&wrote, 1, -1, 0);
    decide_as(&wrote, "WAIT 1 1000", &p); /* the instance of the last write, synced first */
    ck_assert_int_eq(p.flow, FLOW_BLOCK);
    ck_assert_int_eq(p.instance, 1);
    ck_assert_int_eq(p.wait_sync, 1);
    ck_assert_int_eq(p.slot, -1);
    session_wrote(&wrote, 1, 1234, 0); /* a cluster instance's write: WAIT goes to that slot's node */
    decide_as(&wrote, "WAIT 1 1000", &p);
    ck_assert_int_eq(p.instance, 1);
    ck_assert_int_eq(p.slot, 1234);
    struct session in_multi = {.authenticated = 1, .mode = SESSION_MULTI, .multi_instance = 1, .watch_instance = -1};
    decide_as(&in_multi, "WAIT 1 1000", &p); /* queued: Redis answers it at once inside EXEC */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.flow, FLOW_SHARED);
    ck_assert_int_eq(p.instance, -1);
    decide_as(&in_multi, "TIME", &p);
    ck_assert_int_eq(p.instance, -1);
    decide_as(&in_multi, "DBSIZE", &p);
    assert_error_prefix(&p, "DENIED DBSIZE inside MULTI");
    struct session anon = {.authenticated = 0, .multi_instance = -1, .watch_instance = -1};
    decide_as(&anon, "DBSIZE", &p);
    assert_error_prefix(&p, "NOAUTH");
}
END_TEST

START_TEST(reset_and_start_up_commands)
{
    struct plan p;
    struct session sub = {.authenticated = 1, .mode = SESSION_SUBSCRIBED, .multi_instance = -1, .watch_instance = -1};
    struct session in_multi = {.authenticated = 1, .mode = SESSION_MULTI, .multi_instance = 1, .watch_instance = -1};
    struct session anon = {.authenticated = 0, .multi_instance = -1, .watch_instance = -1};
    decide("RESET", &p);
    ck_assert_int_eq(p.kind, PLAN_LOCAL);
    ck_assert_int_eq(p.local, LOCAL_RESET);
    decide_as(&sub, "RESET", &p);
    ck_assert_int_eq(p.local, LOCAL_RESET);
    decide_as(&in_multi, "RESET", &p); /* run, not queued, as Redis does */
    ck_assert_int_eq(p.kind, PLAN_LOCAL);
    ck_assert_int_eq(p.local, LOCAL_RESET);
    decide_as(&anon, "RESET", &p); /* NO_AUTH in Redis */
    ck_assert_int_eq(p.local, LOCAL_RESET);
    decide("RESET x", &p);
    ck_assert_str_eq(p.error, "ERR wrong number of arguments for 'reset' command");
    decide("READONLY", &p);
    ck_assert_int_eq(p.local, LOCAL_READONLY);
    decide("READWRITE", &p);
    ck_assert_int_eq(p.local, LOCAL_READONLY);
    decide("CLIENT SETINFO LIB-NAME redis-py", &p);
    ck_assert_int_eq(p.kind, PLAN_LOCAL);
    ck_assert_int_eq(p.local, LOCAL_CLIENT_SETINFO);
    decide("CLIENT setinfo lib-ver 5.0.1", &p);
    ck_assert_int_eq(p.local, LOCAL_CLIENT_SETINFO);
    decide("CLIENT SETINFO LIB-COLOR red", &p);
    ck_assert_str_eq(p.error, "ERR Unrecognized option 'LIB-COLOR'");
    decide("CLIENT SETINFO LIB-NAME", &p);
    ck_assert_str_eq(p.error, "ERR wrong number of arguments for 'client|setinfo' command");
    decide_as(&anon, "CLIENT SETINFO LIB-NAME x", &p);
    assert_error_prefix(&p, "NOAUTH");
    decide("CLIENT NO-TOUCH ON", &p);
    assert_error_prefix(&p, "DENIED CLIENT NO-TOUCH");
    decide("CLIENT NO-EVICT ON", &p);
    assert_error_prefix(&p, "DENIED");
    decide("CLIENT NOSUCH", &p); /* other unknown subcommands: Redis 7.0's error */
    ck_assert_str_eq(p.error, "ERR unknown subcommand 'NOSUCH'. Try CLIENT HELP.");
}
END_TEST

START_TEST(auth_is_required_when_users_exist)
{
    struct session s = {.authenticated = 0};
    struct plan p;
    decide_as(&s, "GET q:x", &p);
    ck_assert_str_eq(p.error, "NOAUTH Authentication required.");
    decide_as(&s, "PING", &p); /* issue 19: Redis answers PING before AUTH with NOAUTH */
    ck_assert_str_eq(p.error, "NOAUTH Authentication required.");
    decide_as(&s, "ECHO x", &p);
    ck_assert_str_eq(p.error, "NOAUTH Authentication required.");
    decide_as(&s, "QUIT", &p);
    ck_assert_int_eq(p.local, LOCAL_QUIT);
    decide_as(&s, "RESET", &p);
    ck_assert_int_eq(p.local, LOCAL_RESET);
    decide_as(&s, "HELLO 3", &p);
    ck_assert_int_eq(p.local, LOCAL_HELLO);
    decide_as(&s, "AUTH pw", &p);
    ck_assert_int_eq(p.local, LOCAL_AUTH);
}
END_TEST

/* Issue 19: CLIENT REPLY, as Redis's flags: which replies are dropped, command by command (the
 * session advanced as client.c does: session_command_done after each command). */
static int reply_dropped_after(struct session *s, const char *line)
{
    struct plan p;
    decide_as(s, line, &p);
    int dropped = policy_reply_dropped(s, &p);
    if (p.kind == PLAN_LOCAL && p.local == LOCAL_CLIENT_REPLY_ON) session_client_reply(s, SESSION_REPLY_ON);
    if (p.kind == PLAN_LOCAL && p.local == LOCAL_CLIENT_REPLY_OFF) session_client_reply(s, SESSION_REPLY_OFF);
    if (p.kind == PLAN_LOCAL && p.local == LOCAL_CLIENT_REPLY_SKIP) session_client_reply(s, SESSION_REPLY_SKIP);
    if (p.kind == PLAN_LOCAL && p.local == LOCAL_RESET) session_reset(s, 1);
    plan_release(&p);
    session_command_done(s);
    return dropped;
}

START_TEST(test_issue19_client_reply_drops_as_redis)
{
    struct session s;
    session_init(&s, 1);
    struct plan p;
    decide_as(&s, "CLIENT REPLY maybe", &p);
    ck_assert_str_eq(p.error, "ERR syntax error");
    decide_as(&s, "CLIENT REPLY on x", &p);
    ck_assert_str_eq(p.error, "ERR wrong number of arguments for 'client|reply' command");
    ck_assert(!reply_dropped_after(&s, "GET q:a"));
    ck_assert(reply_dropped_after(&s, "CLIENT REPLY OFF")); /* no reply of its own */
    ck_assert(reply_dropped_after(&s, "GET q:a"));
    ck_assert(reply_dropped_after(&s, "CLIENT REPLY maybe")); /* errors too */
    ck_assert(reply_dropped_after(&s, "NOSUCH"));
    ck_assert(reply_dropped_after(&s, "CLIENT REPLY SKIP")); /* nothing while OFF */
    ck_assert(!reply_dropped_after(&s, "CLIENT REPLY ON"));  /* +OK */
    ck_assert(!reply_dropped_after(&s, "GET q:a"));
    ck_assert(reply_dropped_after(&s, "CLIENT REPLY SKIP"));
    ck_assert(reply_dropped_after(&s, "GET q:a")); /* the next one only */
    ck_assert(!reply_dropped_after(&s, "GET q:a"));
    ck_assert(reply_dropped_after(&s, "CLIENT REPLY SKIP"));
    ck_assert(reply_dropped_after(&s, "CLIENT REPLY SKIP")); /* skipped, and skips the next */
    ck_assert(reply_dropped_after(&s, "GET q:a"));
    ck_assert(!reply_dropped_after(&s, "GET q:a"));
    ck_assert(reply_dropped_after(&s, "CLIENT REPLY SKIP"));
    ck_assert(!reply_dropped_after(&s, "CLIENT REPLY ON")); /* ON ends the SKIP too */
    ck_assert(!reply_dropped_after(&s, "GET q:a"));
    ck_assert(reply_dropped_after(&s, "CLIENT REPLY OFF"));
    ck_assert(!reply_dropped_after(&s, "RESET")); /* RESET ends OFF before it answers */
    ck_assert(!reply_dropped_after(&s, "GET q:a"));
    ck_assert(reply_dropped_after(&s, "CLIENT REPLY SKIP"));
    ck_assert(reply_dropped_after(&s, "RESET")); /* but a SKIP drops +RESET */
    ck_assert(!reply_dropped_after(&s, "GET q:a"));
    /* UNSUBSCRIBE's local confirmation is a push: never dropped */
    session_client_reply(&s, SESSION_REPLY_OFF);
    struct plan unsub = {.kind = PLAN_LOCAL, .local = LOCAL_UNSUBSCRIBE_NONE};
    ck_assert(!policy_reply_dropped(&s, &unsub));
    /* inside MULTI keygate cannot queue it: refused, as its other local answers */
    struct session m;
    session_init(&m, 1);
    session_multi_begin(&m);
    decide_as(&m, "CLIENT REPLY OFF", &p);
    assert_error_prefix(&p, "DENIED keygate cannot queue 'client|reply' inside MULTI");
}
END_TEST

/* Issue 19: CLIENT UNBLOCK's argument errors are Redis's, in Redis's order; COMMAND GETKEYS is
 * local (queued inside MULTI, where the transaction's instance answers it as Redis would). */
START_TEST(test_issue19_client_unblock_and_getkeys_decisions)
{
    struct plan p;
    decide("CLIENT UNBLOCK 12", &p);
    ck_assert_int_eq(p.local, LOCAL_CLIENT_UNBLOCK);
    decide("CLIENT UNBLOCK 12 error", &p);
    ck_assert_int_eq(p.local, LOCAL_CLIENT_UNBLOCK);
    decide("CLIENT UNBLOCK x", &p);
    ck_assert_str_eq(p.error, "ERR value is not an integer or out of range");
    decide("CLIENT UNBLOCK x maybe", &p); /* the reason is checked first */
    ck_assert_str_eq(p.error, "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
    decide("client UnBlock 1 2 3", &p);
    ck_assert_str_eq(p.error, "ERR unknown subcommand or wrong number of arguments for 'UnBlock'. Try CLIENT HELP.");
    decide("CLIENT UNBLOCK", &p);
    ck_assert_str_eq(p.error, "ERR wrong number of arguments for 'client|unblock' command");
    decide("COMMAND GETKEYS GET q:a", &p);
    ck_assert_int_eq(p.local, LOCAL_COMMAND_GETKEYS);
    decide("COMMAND GETKEYSANDFLAGS CONFIG SET a b", &p); /* no registry check, no never-forwarded list */
    ck_assert_int_eq(p.local, LOCAL_COMMAND_GETKEYS);
    struct session m;
    session_init(&m, 1);
    session_multi_begin(&m);
    decide_as(&m, "COMMAND GETKEYS GET q:a", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, -1);
    struct session anon;
    session_init(&anon, 0);
    decide_as(&anon, "COMMAND GETKEYS GET q:a", &p);
    ck_assert_str_eq(p.error, "NOAUTH Authentication required.");
}
END_TEST

START_TEST(owners_and_read_only_users)
{
    struct session q = {.authenticated = 1, .user = &user_queues};
    struct session ro = {.authenticated = 1, .user = &user_ro};
    struct plan p;
    decide_as(&q, "SET q:a 1", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    decide_as(&q, "SET dedup:job:1 1", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    decide_as(&q, "GET rl:x", &p);
    assert_error_prefix(&p, "NOPERM");
    decide_as(&ro, "GET rl:x", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    decide_as(&ro, "SET rl:x 1", &p);
    assert_error_prefix(&p, "NOPERM");
}
END_TEST

START_TEST(stateful_commands_pin_or_buffer)
{
    struct plan p;
    decide("BLPOP q:a 0", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.flow, FLOW_BLOCK);
    decide("XREAD COUNT 1 STREAMS q:s 0", &p);
    ck_assert_int_eq(p.flow, FLOW_SHARED);
    decide("XREAD BLOCK 10 STREAMS q:s 0", &p);
    ck_assert_int_eq(p.flow, FLOW_BLOCK);
    decide("MULTI", &p);
    ck_assert_int_eq(p.local, LOCAL_MULTI);
    decide("EXEC", &p);
    ck_assert_str_eq(p.error, "ERR EXEC without MULTI");
    decide("WATCH q:a rl:b", &p);
    ck_assert_int_eq(p.flow, FLOW_WATCH);
    ck_assert_int_eq(p.instance, 0);
    decide("WATCH q:a cache:b", &p);
    assert_error_prefix(&p, "CROSSINSTANCE");

    struct session in_multi = {.authenticated = 1, .mode = SESSION_MULTI, .multi_instance = 1, .watch_instance = -1};
    decide_as(&in_multi, "SET q:a 1", &p);
    assert_error_prefix(&p, "CROSSINSTANCE");
    decide_as(&in_multi, "SET cache:a 1", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    decide_as(&in_multi, "BLPOP cache:l 0", &p); /* inside MULTI Redis never blocks */
    ck_assert_int_eq(p.flow, FLOW_SHARED);
    decide_as(&in_multi, "MULTI", &p);
    ck_assert_str_eq(p.error, "ERR MULTI calls can not be nested");
    decide_as(&in_multi, "WATCH cache:a", &p);
    ck_assert_str_eq(p.error, "ERR WATCH inside MULTI is not allowed");
    decide_as(&in_multi, "PING", &p); /* queued; keyless, so it runs wherever the transaction does */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, -1);
    decide_as(&in_multi, "WATCH cache:a", &p); /* an error that does not abort the transaction */
    ck_assert_int_eq(p.keeps_transaction, 1);
    decide_as(&in_multi, "UNWATCH", &p); /* queued like Redis */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
}
END_TEST

START_TEST(channels_need_a_channel_namespace)
{
    struct plan p;
    decide("SUBSCRIBE push:feed", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.flow, FLOW_SUBSCRIBE);
    ck_assert_int_eq(p.instance, 1);
    decide("PSUBSCRIBE push:*", &p);
    ck_assert_int_eq(p.flow, FLOW_SUBSCRIBE);
    decide("PSUBSCRIBE pu*", &p);
    assert_error_prefix(&p, "NONAMESPACE");
    decide("SUBSCRIBE q:x", &p); /* a key namespace is not a channel namespace */
    assert_error_prefix(&p, "NONAMESPACE");
    decide("PUBLISH push:feed hello", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.flow, FLOW_SHARED);
    decide("PUBSUB NUMSUB push:feed", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    decide("UNSUBSCRIBE", &p);
    ck_assert_int_eq(p.flow, FLOW_UNSUBSCRIBE);
    ck_assert_int_eq(p.all_instances, 1);
    struct session sub = {.authenticated = 1, .mode = SESSION_SUBSCRIBED, .multi_instance = -1, .watch_instance = -1};
    decide_as(&sub, "GET q:x", &p);
    ck_assert_str_eq(p.error, "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET "
                              "are allowed in this context");
    decide_as(&sub, "PING", &p);
    ck_assert_int_eq(p.local, LOCAL_PING_SUBSCRIBED);
}
END_TEST

/* Issue 10 item 7: PUBSUB NUMSUB / SHARDNUMSUB with no channel crashed keygate (FORWARD to instance -1). */
START_TEST(test_issue10_item7_pubsub_numsub_no_channel)
{
    struct plan p;
    static const char *const forms[] = {"PUBSUB NUMSUB", "PUBSUB SHARDNUMSUB", "pubsub numsub"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        decide(forms[i], &p);
        ck_assert_msg(p.kind == PLAN_LOCAL && p.local == LOCAL_EMPTY_ARRAY, "%s: kind %d instance %d", forms[i], p.kind,
                      p.instance);
    }
    struct session m = {.authenticated = 1, .mode = SESSION_MULTI, .multi_instance = -1, .watch_instance = -1};
    decide_as(&m, "PUBSUB NUMSUB", &p); /* queued: its answer belongs in the EXEC array */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, -1);
}
END_TEST

/* Issue 10 item 4: PUBSUB CHANNELS/SHARDCHANNELS/NUMPAT and patterns respect channel owners. */
START_TEST(test_issue10_item4_pubsub_listing_checks_owners)
{
    fixture_free();
    fixture_load_text("namespace cache: instance=cache ttl=1h owner=cache\n"
                      "channel push: instance=cache owner=notifications\n"
                      "channel push:tenant- instance=cache owner=tenants\n");
    static char *owners[] = {"cache", "notifications"};
    struct user_conf u = {.name = "app", .owners = owners, .nowners = 2};
    struct session s = {.authenticated = 1, .user = &u, .multi_instance = -1, .watch_instance = -1};
    static const char *const refused[] = {"PUBSUB CHANNELS",        "PUBSUB SHARDCHANNELS", "PUBSUB NUMPAT",
                                          "PUBSUB CHANNELS push:*", "PSUBSCRIBE push:*",    "PUBSUB CHANNELS push:t*"};
    struct plan p;
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        decide_as(&s, refused[i], &p);
        ck_assert_msg(p.kind == PLAN_ERROR && strncmp(p.error, "NOPERM", 6) == 0, "%s -> kind %d %s", refused[i],
                      p.kind, p.error);
    }
    decide_as(&s, "PSUBSCRIBE push:feed:*", &p); /* reaches no namespace of another owner */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    decide_as(&s, "PUBSUB CHANNELS push:feed*", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    decide_as(&s, "SUBSCRIBE push:tenant-42", &p);
    assert_error_prefix(&p, "NOPERM");
    struct user_conf all = {.name = "ops", .all_owners = 1};
    struct session a = {.authenticated = 1, .user = &all, .multi_instance = -1, .watch_instance = -1};
    decide_as(&a, "PUBSUB CHANNELS", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 1);
    decide_as(&a, "PUBSUB NUMPAT", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
}
END_TEST

/* Issue 10 item 14: KEYS / SCAN / SCRIPT LOAD inside MULTI run where the transaction runs, or are refused. */
START_TEST(test_issue10_item14_patterns_inside_multi)
{
    struct session m = {.authenticated = 1,
                        .mode = SESSION_MULTI,
                        .multi_instance = 1 /* cache */,
                        .watch_instance = -1};
    struct plan p;
    decide_as(&m, "KEYS q:*", &p);
    assert_error_prefix(&p, "CROSSINSTANCE");
    decide_as(&m, "SCAN 0 MATCH q:*", &p);
    assert_error_prefix(&p, "CROSSINSTANCE");
    decide_as(&m, "KEYS cache:*", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 1);
}
END_TEST

/* Issue 10 item 15: integers as Redis's string2ll reads them. */
START_TEST(test_issue10_item15_strict_integers)
{
    struct plan p;
    static const char *const bad[] = {"SELECT 00", "SELECT -0", "SELECT +0", "SELECT 0x0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        decide(bad[i], &p);
        ck_assert_msg(p.kind == PLAN_ERROR && strcmp(p.error, "ERR value is not an integer or out of range") == 0,
                      "%s -> %s", bad[i], p.error);
    }
    decide("SELECT 0", &p);
    ck_assert_int_eq(p.local, LOCAL_SELECT);
    const char *argv[] = {"EXPIRE", "rl:x", " 99999999"};
    const size_t len[] = {6, 4, 9};
    struct session open = {.authenticated = 1, .multi_instance = -1, .watch_instance = -1};
    fixture_decide_argv(&open, 3, argv, len, &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD); /* Redis answers "not an integer"; nothing can change */
    plan_release(&p);
}
END_TEST

/* Issue 10 item 16: Redis checks arity before authentication. */
START_TEST(test_issue10_item16_arity_before_noauth)
{
    struct session s = {.authenticated = 0, .multi_instance = -1, .watch_instance = -1};
    struct plan p;
    decide_as(&s, "GET", &p);
    ck_assert_str_eq(p.error, "ERR wrong number of arguments for 'get' command");
    decide_as(&s, "NOSUCHCMD x", &p);
    assert_error_prefix(&p, "ERR unknown command");
    decide_as(&s, "GET q:x", &p);
    ck_assert_str_eq(p.error, "NOAUTH Authentication required.");
}
END_TEST

/* ---- issue 13: the default line and report mode ---------------------------------- */

#define REPORT_REGISTRY                                                                                                \
    "namespace on:    instance=durable ttl=1h max-ttl=1d owner=on\n"                                                   \
    "namespace rep:   instance=cache   ttl=1h max-ttl=1d owner=rep enforce=report\n"                                   \
    "namespace repd:  instance=durable ttl=none owner=rep enforce=report\n"                                            \
    "namespace slide: instance=cache   ttl=30m sliding owner=rep enforce=report\n"                                     \
    "channel   push:  instance=cache   owner=on\n"                                                                     \
    "default          instance=cache   ttl=10m max-ttl=1h owner=legacy\n"

static void report_setup(void)
{
    fixture_load_text(REPORT_REGISTRY);
}

/* The index of prefix's entry ("" = the default line). */
static uint32_t idx_of(const char *prefix)
{
    if (!*prefix) return reg->dflt->index;
    const struct namespace_entry *e = registry_lookup(reg, NS_KEY, prefix, strlen(prefix));
    if (!e) e = registry_lookup(reg, NS_CHANNEL, prefix, strlen(prefix));
    ck_assert_ptr_nonnull(e);
    return e->index;
}

/* p's report events, as "PREFIX REASON;" in order (the default line's prefix is "(default)"). */
static const char *events_of(const struct plan *p)
{
    static char out[512];
    size_t o = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < p->report.nevents; i++) {
        uint32_t ix = p->report.events[i].index;
        const char *name = ix == reg->dflt->index ? "(default)" : reg->entries[ix].prefix;
        o += (size_t)snprintf(out + o, sizeof out - o, "%s %s;", name,
                              stats_report_word((enum stats_report_reason)p->report.events[i].reason));
    }
    return out;
}

static void decide_open(const char *line, struct plan *p)
{
    struct session open = {.authenticated = 1, .user = NULL, .multi_instance = -1, .watch_instance = -1};
    fixture_decide(&open, line, p);
}

START_TEST(default_line_takes_unregistered_keys)
{
    struct plan p;
    decide_open("SET legacy:x 1", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 1);
    ck_assert_ptr_eq(p.ns, reg->dflt);
    ck_assert_uint_eq(p.nappend, 2); /* the default line's ttl=10m is enforced */
    ck_assert_mem_eq(p.append[1], "600", 3);
    ck_assert_uint_eq(p.report.unregistered, 1);
    ck_assert_int_eq(p.report.unregistered_kind, NS_KEY);
    ck_assert_int_eq(p.report.unregistered_arg, 1);
    ck_assert_str_eq(events_of(&p), "");
    plan_release(&p);
    decide_open("MSET a 1 on:b 2 c 3", &p); /* default on cache, on: on durable: refused */
    assert_error_prefix(&p, "CROSSINSTANCE");
    decide_open("DEL a b c", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_uint_eq(p.report.unregistered, 3);
    ck_assert_int_eq(p.report.unregistered_arg, 1);
    plan_release(&p);
    decide_open("EXPIRE legacy:x 7200", &p); /* the default line's max-ttl=1h is enforced */
    assert_error_prefix(&p, "DENIED TTL of 7200000ms is above max-ttl 1h");
    decide_open("GET on:x", &p);
    ck_assert_uint_eq(p.report.unregistered, 0);
    plan_release(&p);
    decide_open("PUBLISH legacy-channel hi", &p); /* channels too */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 1);
    ck_assert_uint_eq(p.report.unregistered, 1);
    ck_assert_int_eq(p.report.unregistered_kind, NS_CHANNEL);
    plan_release(&p);
    decide_open("PSUBSCRIBE legacy*", &p); /* a pattern that can reach no channel namespace */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_uint_eq(p.report.unregistered, 1);
    plan_release(&p);
    decide_open("PSUBSCRIBE pu*", &p); /* can reach push:, so no default */
    assert_error_prefix(&p, "NONAMESPACE pattern 'pu*'");
    decide_open("KEYS legacy*", &p); /* patterns of KEYS/SCAN need a namespace */
    assert_error_prefix(&p, "DENIED");
}
END_TEST

/* Issue 19: PUBSUB NUMPAT / CHANNELS without a pattern, and NUMSUB, where the registry's only channel
 * rule is the default line: forwarded to the default line's instance, as Redis answers them. */
START_TEST(test_issue19_pubsub_listing_on_the_default_line)
{
    fixture_free();
    fixture_load_text("namespace q: instance=durable ttl=none owner=queues\n"
                      "default instance=cache ttl=none owner=legacy\n");
    static const char *const forms[] = {"PUBSUB NUMPAT", "PUBSUB CHANNELS", "PUBSUB NUMSUB a b", "PUBSUB CHANNELS x*"};
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        struct plan p;
        decide_open(forms[i], &p);
        ck_assert_msg(p.kind == PLAN_FORWARD, "%s: %s", forms[i], p.error);
        ck_assert_int_eq(p.instance, 1);
        ck_assert_ptr_eq(p.ns, reg->dflt);
        plan_release(&p);
    }
    struct user_conf other = {.name = "app", .nowners = 1};
    const char *owners[] = {"queues"};
    other.owners = (char **)owners;
    struct session s = {.authenticated = 1, .user = &other, .multi_instance = -1, .watch_instance = -1};
    struct plan p;
    fixture_decide(&s, "PUBSUB NUMPAT", &p); /* every channel is the default line's: its owner is needed */
    assert_error_prefix(&p,
                        "NOPERM 'pubsub|numpat' without a pattern sees channel namespace '(default)' (owner legacy)");
    fixture_free();
    fixture_load_text("namespace q: instance=durable ttl=none owner=queues\n");
    decide_open("PUBSUB NUMPAT", &p);
    assert_error_prefix(&p, "DENIED the registry has no channel namespace");
    fixture_free();
    fixture_load_text(REPORT_REGISTRY); /* push: and the default line, both on cache */
    decide_open("PUBSUB NUMPAT", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 1);
    plan_release(&p);
}
END_TEST

START_TEST(without_default_line_unregistered_keys_are_refused)
{
    fixture_free();
    fixture_load_text("namespace rep: instance=cache ttl=1h owner=rep enforce=report\n");
    struct plan p;
    decide_open("SET legacy:x 1", &p);
    assert_error_prefix(&p, "NONAMESPACE key 'legacy:x'");
    decide_open("SET rep:x 1", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_uint_eq(p.nappend, 0);
    plan_release(&p);
}
END_TEST

START_TEST(report_mode_forwards_unchanged_and_counts)
{
    struct plan p;
    decide_open("SET rep:x 1", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 1);
    ck_assert_uint_eq(p.nappend, 0);
    ck_assert_uint_eq(p.ttl.nfix, 0);
    ck_assert_str_eq(events_of(&p), "rep: would-inject-ttl;");
    ck_assert_uint_eq(p.report.events[0].index, idx_of("rep:"));
    plan_release(&p);
    decide_open("HSET rep:h f v", &p);
    ck_assert_int_eq(p.ttl.wrap, 0);
    ck_assert_uint_eq(p.ttl.nfix, 0);
    ck_assert_str_eq(events_of(&p), "rep: would-inject-ttl;");
    plan_release(&p);
    decide_open("SET rep:x 1 EX 60", &p); /* its own TTL: nothing would change */
    ck_assert_str_eq(events_of(&p), "");
    plan_release(&p);
    decide_open("EXPIRE rep:x 999999", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_str_eq(events_of(&p), "rep: would-refuse max-ttl;");
    plan_release(&p);
    decide_open("PERSIST rep:x", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_str_eq(events_of(&p), "rep: would-refuse PERSIST;");
    plan_release(&p);
    decide_open("GETEX rep:x PERSIST", &p);
    ck_assert_str_eq(events_of(&p), "rep: would-refuse PERSIST;");
    plan_release(&p);
    decide_open("GET slide:x", &p); /* sliding: no GETEX rewrite */
    ck_assert_int_eq(p.ttl.getex, 0);
    ck_assert_uint_eq(p.nappend, 0);
    ck_assert_str_eq(events_of(&p), "slide: would-inject-ttl;");
    plan_release(&p);
    decide_open("SET repd:x 1", &p); /* ttl=none: nothing to report */
    ck_assert_str_eq(events_of(&p), "");
    plan_release(&p);
    decide_open("GET rep:x", &p);
    ck_assert_str_eq(events_of(&p), "");
    plan_release(&p);
    /* enforce=on keys keep their rules */
    decide_open("EXPIRE on:x 999999", &p);
    assert_error_prefix(&p, "DENIED TTL");
    decide_open("PERSIST on:x", &p);
    assert_error_prefix(&p, "DENIED PERSIST");
    /* never-forwarded commands stay refused */
    decide_open("CONFIG GET maxmemory", &p);
    assert_error_prefix(&p, "DENIED");
    decide_open("FLUSHALL", &p);
    assert_error_prefix(&p, "DENIED");
}
END_TEST

START_TEST(report_mode_cross_instance_goes_to_the_first_key)
{
    struct plan p;
    decide_open("RENAME on:a rep:b", &p); /* durable, then cache: the report key follows */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 0);
    ck_assert_str_eq(events_of(&p), "rep: would-refuse CROSSINSTANCE;rep: would-inject-ttl;");
    plan_release(&p);
    decide_open("RENAME rep:b on:a", &p); /* the enforce=on key on the other instance wins */
    assert_error_prefix(&p, "CROSSINSTANCE");
    decide_open("SUNIONSTORE on:d on:a rep:b", &p); /* on:d keeps its TTL fix, rep:b is only counted */
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 0);
    ck_assert_int_eq(p.ttl.wrap, 1);
    ck_assert_uint_eq(p.ttl.nfix, 2);
    ck_assert_uint_eq(p.ttl.fix[0].argi, 1);
    ck_assert_uint_eq(p.ttl.fix[1].argi, 2);
    ck_assert_str_eq(events_of(&p), "rep: would-refuse CROSSINSTANCE;rep: would-inject-ttl;");
    plan_release(&p);
    decide_open("MGET on:a rep:b", &p); /* split commands are split, as always */
    ck_assert_int_eq(p.merge, MERGE_MGET);
    ck_assert_str_eq(events_of(&p), "");
    plan_release(&p);
    struct session s = {.authenticated = 1,
                        .user = NULL,
                        .mode = SESSION_MULTI,
                        .multi_instance = 0,
                        .watch_instance = -1};
    fixture_decide(&s, "SET rep:x 1", &p); /* a transaction stays on one instance */
    assert_error_prefix(&p, "CROSSINSTANCE this transaction runs on instance 'durable'");
}
END_TEST

START_TEST(report_mode_noperm_is_per_line)
{
    static char *owners[] = {"on"};
    struct user_conf u = {.name = "app", .owners = owners, .nowners = 1};
    struct session s = {.authenticated = 1, .user = &u, .multi_instance = -1, .watch_instance = -1};
    struct plan p;
    fixture_decide(&s, "GET rep:x", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_str_eq(events_of(&p), "rep: would-refuse NOPERM;");
    plan_release(&p);
    fixture_decide(&s, "GET legacy:x", &p); /* the default line is enforce=on here: owner legacy */
    assert_error_prefix(&p, "NOPERM user 'app' may not use namespace '(default)' (owner legacy)");
    fixture_decide(&s, "MGET on:x repd:y", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_str_eq(events_of(&p), "repd: would-refuse NOPERM;");
    plan_release(&p);
}
END_TEST

START_TEST(default_line_in_report_mode)
{
    fixture_free();
    fixture_load_text("namespace on: instance=durable ttl=1h owner=on\n"
                      "default instance=cache ttl=10m max-ttl=1h owner=legacy enforce=report\n");
    static char *owners[] = {"on"};
    struct user_conf u = {.name = "app", .owners = owners, .nowners = 1};
    struct session s = {.authenticated = 1, .user = &u, .multi_instance = -1, .watch_instance = -1};
    struct plan p;
    fixture_decide(&s, "SET legacy:x 1", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_int_eq(p.instance, 1);
    ck_assert_uint_eq(p.nappend, 0);
    ck_assert_uint_eq(p.report.unregistered, 1);
    ck_assert_str_eq(events_of(&p), "(default) would-refuse NOPERM;(default) would-inject-ttl;");
    plan_release(&p);
    fixture_decide(&s, "RENAME on:a legacy:b", &p);
    ck_assert_int_eq(p.instance, 0);
    ck_assert_str_eq(events_of(&p),
                     "(default) would-refuse NOPERM;(default) would-refuse CROSSINSTANCE;(default) would-inject-ttl;");
    plan_release(&p);
}
END_TEST

/* ---- issue 20: the near cache's invalidations in the write's plan ---- */

#define NEAR_REGISTRY                                                                                                  \
    "namespace kg: instance=durable ttl=none owner=keygate\n"                                                          \
    "namespace u: instance=durable ttl=none near-cache=1m owner=api\n"                                                 \
    "namespace t: instance=durable ttl=1h near-cache=30s owner=api\n"                                                  \
    "namespace plain: instance=durable ttl=none owner=api\n"                                                           \
    "namespace kc: instance=cache ttl=none owner=keygate\n"                                                            \
    "namespace uc: instance=cache ttl=none near-cache=1m owner=api\n"

static void near_setup(void)
{
    fixture_load_text(NEAR_REGISTRY);
}

/* The plan's invalidations as "ARGI>STREAM;..." plus " wrap" when the write is wrapped. */
static const char *invals_of(const struct plan *p)
{
    static char buf[512];
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < p->inval.n; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%u>%s;", p->inval.key[i].argi,
                                 p->inval.key[i].ns->nc_stream);
    if (p->ttl.wrap) snprintf(buf + used, sizeof buf - used, " wrap");
    return buf;
}

START_TEST(near_cache_writes_carry_their_xadd)
{
    static const struct {
        const char *line, *want;
    } cases[] = {
        {"SET u:1 v", "1>kg:nc:{kg:}:stream; wrap"},
        {"GET u:1", ""},
        {"HGETALL u:1", ""},
        {"SET plain:1 v", ""},
        {"SET t:1 v", "1>kg:nc:{kg:}:stream; wrap"}, /* SET ... EX 3600 in MULTI with its XADD */
        {"HSET t:1 f v", "1>kg:nc:{kg:}:stream; wrap"},
        {"DEL u:1", "1>kg:nc:{kg:}:stream; wrap"},
        {"UNLINK u:1 plain:2 u:3", "1>kg:nc:{kg:}:stream;3>kg:nc:{kg:}:stream; wrap"},
        {"EXPIRE u:1 10", "1>kg:nc:{kg:}:stream; wrap"},
        {"PERSIST u:1", "1>kg:nc:{kg:}:stream; wrap"},
        {"RENAME u:a u:b", "1>kg:nc:{kg:}:stream;2>kg:nc:{kg:}:stream; wrap"},
        {"RENAME plain:a u:b", "2>kg:nc:{kg:}:stream; wrap"},
        {"COPY plain:a u:b", "2>kg:nc:{kg:}:stream; wrap"},
        {"SUNIONSTORE u:d plain:a t:b", "1>kg:nc:{kg:}:stream;3>kg:nc:{kg:}:stream; wrap"},
        {"SORT plain:a STORE u:d", "3>kg:nc:{kg:}:stream; wrap"},
        {"EVAL x 2 u:a plain:b", "3>kg:nc:{kg:}:stream; wrap"},
        {"EVALSHA x 1 u:a", "3>kg:nc:{kg:}:stream; wrap"},
        {"FCALL f 1 u:a", "3>kg:nc:{kg:}:stream; wrap"},
        {"EVAL_RO x 1 u:a", ""},
        {"SADD uc:s m", "1>kc:nc:{kc:}:stream; wrap"},
    };
    struct user_conf all = {.name = "ops", .all_owners = 1, .scripts = 1};
    struct session s = {.authenticated = 1, .user = &all, .multi_instance = -1, .watch_instance = -1};
    struct plan p;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        decide_as(&s, cases[i].line, &p);
        ck_assert_msg(p.kind == PLAN_FORWARD, "%s: kind %d %s", cases[i].line, p.kind, p.error);
        ck_assert_msg(strcmp(invals_of(&p), cases[i].want) == 0, "%s: got '%s', want '%s'", cases[i].line,
                      invals_of(&p), cases[i].want);
        plan_release(&p);
    }
    /* SET in a ttl=D near-cache namespace keeps its EX and gains the MULTI for the XADD */
    decide("SET t:1 v", &p);
    ck_assert_uint_eq(p.nappend, 2);
    plan_release(&p);
    /* a split DEL: each instance's part carries the XADDs of its own keys */
    decide("DEL u:1 uc:2 plain:3", &p);
    ck_assert_int_eq(p.merge, MERGE_SUM);
    ck_assert_str_eq(invals_of(&p), "1>kg:nc:{kg:}:stream;2>kc:nc:{kc:}:stream; wrap");
    plan_release(&p);
}
END_TEST

START_TEST(near_cache_xadd_in_transactions_pins_and_blocking)
{
    struct plan p;
    /* queued in the client's MULTI: router_write_queued writes the XADD into that transaction */
    struct session m = {.authenticated = 1, .mode = SESSION_MULTI, .multi_instance = -1, .watch_instance = -1};
    decide_as(&m, "SET u:1 v", &p);
    ck_assert_int_eq(p.kind, PLAN_FORWARD);
    ck_assert_uint_eq(p.inval.n, 1);
    plan_release(&p);
    /* a WATCH pin on the instance: keygate's MULTI would clear the watch; the XADD follows unwrapped */
    struct session w = {.authenticated = 1, .multi_instance = -1, .watch_instance = 0};
    decide_as(&w, "SET u:1 v", &p);
    ck_assert_str_eq(invals_of(&p), "1>kg:nc:{kg:}:stream;");
    plan_release(&p);
    /* a blocking write never goes in MULTI (it would not block): the XADDs follow it on its pin */
    decide("BLMOVE u:a u:b LEFT LEFT 0", &p);
    ck_assert_int_eq(p.flow, FLOW_BLOCK);
    ck_assert_str_eq(invals_of(&p), "1>kg:nc:{kg:}:stream;2>kg:nc:{kg:}:stream;");
    plan_release(&p);
    /* many keys: past the inline array */
    decide("DEL u:1 u:2 u:3 u:4 u:5 u:6 u:7 u:8 u:9", &p);
    ck_assert_uint_eq(p.inval.n, 9);
    ck_assert_uint_eq(p.inval.key[8].argi, 9);
    plan_release(&p);
}
END_TEST

/* ---- issue 22: replicas=N ---------------------------------------------------------- */

static void replicas_setup(void)
{
    fixture_load_text("namespace r1:  instance=durable ttl=none owner=a replicas=1\n"
                      "namespace r2:  instance=durable ttl=1h owner=a replicas=2\n"
                      "namespace p:   instance=durable ttl=none owner=a\n"
                      "namespace c:   instance=cache ttl=1h owner=a\n"
                      "default        instance=cache ttl=1h owner=a replicas=3\n");
}

/* a write carries the largest replicas=N of its keys' namespaces; reads never wait */
START_TEST(replicas_on_writes_only)
{
    static const struct {
        const char *line;
        int want;
    } cases[] = {
        {"SET r1:a v", 1},        {"GET r1:a", 0},           {"SET p:a v", 0},        {"SET r2:a v", 2},
        {"MSET p:a 1 r2:b 2", 2}, {"MSET r1:a 1 r2:b 2", 2}, {"DEL r1:a", 1},         {"EXISTS r1:a", 0},
        {"INCR r1:n", 1},         {"EXPIRE r1:a 10", 1},     {"SET x v", 3},          {"GET x", 0},
        {"RENAME p:a r1:b", 1},   {"LPUSH r2:l x", 2},       {"SET c:a v", 0},        {"EVAL x 1 r1:a", 1},
        {"EVALSHA x 1 r2:a", 2},  {"FCALL f 1 r1:a", 1},     {"EVAL_RO x 1 r1:a", 0},
    };
    struct user_conf all = {.name = "ops", .all_owners = 1, .scripts = 1};
    struct session s = {.authenticated = 1, .user = &all, .multi_instance = -1, .watch_instance = -1};
    struct plan p;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        decide_as(&s, cases[i].line, &p);
        ck_assert_msg(p.kind == PLAN_FORWARD, "%s: kind %d %s", cases[i].line, p.kind, p.error);
        ck_assert_msg(p.replicas == cases[i].want, "%s: replicas %d, want %d", cases[i].line, p.replicas,
                      cases[i].want);
        plan_release(&p);
    }
}
END_TEST

/* a split DEL's parts carry the largest replicas=N of their own keys; a split read's none */
START_TEST(replicas_of_split_parts)
{
    struct user_conf all = {.name = "ops", .all_owners = 1, .scripts = 1};
    struct session s = {.authenticated = 1, .user = &all, .multi_instance = -1, .watch_instance = -1};
    struct plan p;
    decide_as(&s, "DEL c:a r1:b p:c r2:d x", &p); /* durable: r1, p, r2; cache: c, the default's x */
    ck_assert_msg(p.kind == PLAN_FORWARD, "kind %d %s", p.kind, p.error);
    ck_assert_int_eq(p.nparts, 2);
    ck_assert_int_eq(p.parts[p.key_part[1]].replicas, 3); /* c: (0) and x (the default line: 3) */
    ck_assert_int_eq(p.parts[p.key_part[2]].replicas, 2); /* r1: 1, p: 0, r2: 2 */
    plan_release(&p);
    decide_as(&s, "UNLINK c:a p:b", &p);
    ck_assert_int_eq(p.nparts, 2);
    ck_assert_int_eq(p.parts[0].replicas + p.parts[1].replicas, 0);
    plan_release(&p);
    decide_as(&s, "MGET c:a r2:b", &p);
    ck_assert_int_eq(p.nparts, 2);
    ck_assert_int_eq(p.parts[0].replicas + p.parts[1].replicas, 0);
    plan_release(&p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("decide");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, set_cache_key_gets_registry_ttl);
    tcase_add_test(tc, cluster_instance_routes_by_slot);
    tcase_add_test(tc, cluster_patterns_read_every_primary);
    tcase_add_test(tc, cluster_shard_channels_take_their_slot);
    tcase_add_test(tc, longest_prefix_decides_ttl);
    tcase_add_test(tc, set_durable_queue_key_has_no_ttl);
    tcase_add_test(tc, set_with_client_ttl_is_kept);
    tcase_add_test(tc, client_ttl_above_max_ttl_is_denied);
    tcase_add_test(tc, persist_refused_only_in_ttl_namespaces);
    tcase_add_test(tc, unknown_namespace_is_refused);
    tcase_add_test(tc, keys_on_two_instances_are_refused);
    tcase_add_test(tc, many_keys_route_together);
    tcase_add_test(tc, redis_error_texts);
    tcase_add_test(tc, local_commands);
    tcase_add_test(tc, dangerous_commands_are_denied);
    tcase_add_test(tc, keyless_commands_cannot_be_routed);
    tcase_add_test(tc, keyless_commands_keygate_forwards);
    tcase_add_test(tc, reset_and_start_up_commands);
    tcase_add_test(tc, auth_is_required_when_users_exist);
    tcase_add_test(tc, owners_and_read_only_users);
    tcase_add_test(tc, test_issue19_client_reply_drops_as_redis);
    tcase_add_test(tc, test_issue19_client_unblock_and_getkeys_decisions);
    tcase_add_test(tc, stateful_commands_pin_or_buffer);
    tcase_add_test(tc, channels_need_a_channel_namespace);
    tcase_add_test(tc, test_issue10_item7_pubsub_numsub_no_channel);
    tcase_add_test(tc, test_issue10_item4_pubsub_listing_checks_owners);
    tcase_add_test(tc, test_issue10_item14_patterns_inside_multi);
    tcase_add_test(tc, test_issue10_item15_strict_integers);
    tcase_add_test(tc, test_issue10_item16_arity_before_noauth);
    suite_add_tcase(s, tc);
    tc = tcase_create("issue13");
    tcase_add_checked_fixture(tc, report_setup, teardown);
    tcase_add_test(tc, default_line_takes_unregistered_keys);
    tcase_add_test(tc, without_default_line_unregistered_keys_are_refused);
    tcase_add_test(tc, report_mode_forwards_unchanged_and_counts);
    tcase_add_test(tc, report_mode_cross_instance_goes_to_the_first_key);
    tcase_add_test(tc, report_mode_noperm_is_per_line);
    tcase_add_test(tc, default_line_in_report_mode);
    tcase_add_test(tc, test_issue19_pubsub_listing_on_the_default_line);
    suite_add_tcase(s, tc);
    tc = tcase_create("near_cache");
    tcase_add_checked_fixture(tc, near_setup, teardown);
    tcase_add_test(tc, near_cache_writes_carry_their_xadd);
    tcase_add_test(tc, near_cache_xadd_in_transactions_pins_and_blocking);
    suite_add_tcase(s, tc);
    tc = tcase_create("replicas");
    tcase_add_checked_fixture(tc, replicas_setup, teardown);
    tcase_add_test(tc, replicas_on_writes_only);
    tcase_add_test(tc, replicas_of_split_parts);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
