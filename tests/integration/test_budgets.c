/* test_budgets.c: integration tests of per-namespace budgets (issue 31 part 3): max-keys= and max-memory= on durable, checked on the backend itself. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/*
 * One harness (two TLS redis-servers + keygate, `namespace-scan-interval 1s`, the admin
 * endpoint) with its own registry. Each test uses namespaces of its own (the estimates live in
 * keygate and outlast a test):
 *   dedup:webhook:  max-keys=500     the flood
 *   upd:            max-keys=10      updates, DEL, EXPIRE pass over budget; creation comes back
 *   dm:             max-memory=64kb  the memory variant
 *   r3:             max-keys=2       RESP3 replies through the check script
 *   q:, rl:         no budget, on the same durable instance
 */

static struct harness h;

#define REGISTRY                                                                                                       \
    "namespace dedup:webhook: instance=durable ttl=1h   owner=harvester max-keys=500\n"                                \
    "namespace upd:           instance=durable ttl=none owner=app max-keys=10\n"                                       \
    "namespace dm:            instance=durable ttl=none owner=app max-memory=64kb\n"                                   \
    "namespace r3:            instance=durable ttl=none owner=app max-keys=2\n"                                        \
    "namespace q:             instance=durable ttl=none owner=queues\n"                                                \
    "namespace rl:            instance=durable ttl=1h   owner=rate-limit\n"                                            \
    "namespace cache:         instance=cache   ttl=1h   owner=cache\n"

/* How far past max-keys the flood may go, checked on the backend: keygate counts a write that may
 * create a key when it forwards it, so one client's writes stop at the budget exactly; the slack
 * covers nothing but a pass that began before the flood (measured 0, then writes counted). */
#define FLOOD_SLACK 0

static void setup(void)
{
    struct harness_opts o = {.registry_text = REGISTRY, .extra_config = "namespace-scan-interval 1s\n", .admin = 1};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h);
    harness_stop(&h);
}

/* Keys of durable (directly, SCAN MATCH prefix*). */
static long long backend_count(const char *prefix)
{
    redisContext *d = harness_must_direct(&h, "durable");
    long long n = 0;
    char cursor[32] = "0";
    do {
        redisReply *r = cmd(d, "SCAN %s MATCH %s* COUNT 1000", cursor, prefix);
        ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        n += (long long)r->element[1]->elements;
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    redisFree(d);
    return n;
}

/* The value of the first /metrics line starting with `series` (name and labels), -1 when none. */
static long long metric(const char *series)
{
    struct harness_http r = harness_admin_get(&h, "/metrics");
    long long v = -1;
    for (char *line = r.body; line && *line;) {
        char *end = strchr(line, '\n');
        if (strncmp(line, series, strlen(series)) == 0) {
            if (end) *end = '\0';
            char *sp = strrchr(line, ' ');
            if (sp) v = atoll(sp + 1);
            break;
        }
        line = end ? end + 1 : NULL;
    }
    free(r.body);
    return v;
}

/* Wait (deadline 10 s) until keygate's estimate of prefix's keys reads `want`: a pass counted them. */
static void wait_estimate(const char *prefix, long long want)
{
    char series[256];
    snprintf(series, sizeof series, "keygate_namespace_estimated_keys{namespace=\"%s\"", prefix);
    long long got = -1;
    for (long long end = now_ms() + 10000; now_ms() < end; sleep_ms(100))
        if ((got = metric(series)) == want) return;
    struct harness_http r = harness_admin_get(&h, "/metrics");
    for (char *line = r.body; line && (line = strstr(line, "keygate_namespace_")) != NULL; line++)
        if (strncmp(line, "keygate_namespace_estimated_keys", 32) == 0 ||
            strncmp(line, "keygate_namespace_keys{", 23) == 0)
            fprintf(stderr, "  %.*s\n", (int)strcspn(line, "\n"), line);
    free(r.body);
    ck_abort_msg("the estimate of %s stayed %lld (want %lld) for 10 s", prefix, got, want);
}

/* A flood of dedup:webhook: keys stops at the budget, checked on durable itself, while q: and rl:
 * writes on the same instance keep succeeding. */
START_TEST(test_flood_stops_at_max_keys)
{
    wait_estimate("dedup:webhook:", 0); /* the first pass ran */
    redisContext *c = harness_must_client(&h);
    int ok = 0, oom = 0;
    for (int batch = 0; batch < 10; batch++) {
        for (int i = 0; i < 100; i++) {
            int n = batch * 100 + i;
            redisAppendCommand(c, "SET dedup:webhook:%d 1", n);
            redisAppendCommand(c, "SET q:flood:%d payload", n);
            redisAppendCommand(c, "INCR rl:flood:%d", n % 7);
        }
        for (int i = 0; i < 100; i++) {
            redisReply *r = next_reply(c);
            if (r->type == REDIS_REPLY_STATUS)
                ok++;
            else if (r->type == REDIS_REPLY_ERROR &&
                     strncmp(r->str, "OOM namespace 'dedup:webhook:' is over its budget",
                             strlen("OOM namespace 'dedup:webhook:' is over its budget")) == 0)
                oom++;
            else
                ck_abort_msg("SET dedup:webhook: answered %s", describe(r));
            freeReplyObject(r);
            expect_status(next_reply(c), "OK", "a q: write beside the over-budget namespace");
            r = next_reply(c);
            ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "INCR rl: answered %s", describe(r));
            freeReplyObject(r);
        }
    }
    long long stored = backend_count("dedup:webhook:");
    fprintf(stderr, "flood: %d OK, %d OOM; durable holds %lld dedup:webhook: keys (max-keys=500)\n", ok, oom, stored);
    ck_assert_int_eq(ok + oom, 1000);
    ck_assert_msg(stored <= 500 + FLOOD_SLACK, "durable holds %lld keys, budget 500 + slack %d", stored, FLOOD_SLACK);
    ck_assert_msg(stored >= 500 - 5, "creation stopped early: %lld keys", stored);
    ck_assert_int_eq(backend_count("q:flood:"), 1000);
    /* the error text names the budget and the estimate */
    redisReply *r = cmd(c, "SET dedup:webhook:one-more 1");
    expect_error(r, "OOM namespace 'dedup:webhook:' is over its budget (max-keys=500, about ", "the refusal's text");
    ck_assert_int_ge(metric("keygate_budget_refused_total{namespace=\"dedup:webhook:\""), oom + 1);
    ck_assert_int_eq(metric("keygate_namespace_budget_keys{namespace=\"dedup:webhook:\""), 500);
    /* clean up through keygate (DEL passes over budget) */
    for (int i = 0; i < 1000; i++) redisAppendCommand(c, "DEL dedup:webhook:%d q:flood:%d", i, i);
    for (int i = 0; i < 1000; i++) freeReplyObject(next_reply(c));
    for (int i = 0; i < 7; i++) freeReplyObject(cmd(c, "DEL rl:flood:%d", i));
    redisFree(c);
}
END_TEST

/* Over budget, updates of existing keys, DEL and EXPIRE pass; a new key is refused; after DELs
 * bring the namespace under, the next pass lets creation through again. */
START_TEST(test_updates_pass_and_creation_comes_back)
{
    wait_estimate("upd:", 0);
    redisContext *c = harness_must_client(&h);
    for (int i = 0; i < 8; i++) expect_status(cmd(c, "SET upd:%d v", i), "OK", "under budget");
    expect_int(cmd(c, "RPUSH upd:list a"), 1, "under budget: a list");
    expect_int(cmd(c, "ZADD upd:z 1 m"), 1, "under budget: a sorted set");
    /* 10 keys: the budget */
    expect_error(cmd(c, "SET upd:new v"), "OOM namespace 'upd:' is over its budget (max-keys=10, about 10 keys)",
                 "an 11th key");
    expect_error(cmd(c, "HSET upd:h f v"), "OOM namespace 'upd:'", "a new hash");
    expect_error(cmd(c, "MSET upd:0 x upd:new2 y"), "OOM namespace 'upd:'", "MSET naming a new key");
    expect_status(cmd(c, "SET upd:0 v2"), "OK", "SET of an existing key");
    expect_bulk(cmd(c, "GET upd:0"), "v2", "the update ran");
    expect_int(cmd(c, "APPEND upd:1 w"), 2, "APPEND to an existing key");
    expect_int(cmd(c, "RPUSH upd:list b"), 2, "RPUSH to an existing list");
    redisReply *r = cmd(c, "ZINCRBY upd:z 1.5 m");
    expect_bulk(r, "2.5", "ZINCRBY on an existing sorted set (RESP2 through the script)");
    expect_status(cmd(c, "MSET upd:2 a upd:3 b"), "OK", "MSET of existing keys");
    expect_int(cmd(c, "EXPIRE upd:4 1000"), 1, "EXPIRE");
    expect_int(cmd(c, "PERSIST upd:4"), 1, "PERSIST (ttl=none)");
    r = cmd(c, "SET upd:5 v XX GET");
    expect_bulk(r, "v", "SET XX GET of an existing key");
    expect_nil(cmd(c, "LPOP upd:missing"), "LPOP of a missing key (never creates: not checked)");
    expect_int(cmd(c, "DEL upd:missing"), 0, "DEL of a missing key");
    expect_int(cmd(c, "LPUSHX upd:missing a"), 0, "LPUSHX of a missing key (never creates)");
    expect_int(cmd(c, "EXISTS upd:new upd:h upd:new2"), 0, "nothing refused was created");
    /* DELs bring it under: 10 - 3 = 7 keys; the next pass counts them and creation comes back */
    expect_int(cmd(c, "DEL upd:5 upd:6 upd:7"), 3, "DEL over budget");
    wait_estimate("upd:", 7);
    expect_status(cmd(c, "SET upd:new v"), "OK", "a new key once a pass counted the DELs");
    expect_int(cmd(c, "DEL upd:0 upd:1 upd:2 upd:3 upd:4 upd:list upd:z upd:new"), 8, "clean up");
    ck_assert_int_eq(backend_count("upd:"), 0);
    redisFree(c);
}
END_TEST

/* The sum of MEMORY USAGE over durable's keys of prefix (directly), and how many there are. */
static long long backend_memory(const char *prefix, long long *nkeys)
{
    redisContext *d = harness_must_direct(&h, "durable");
    long long sum = 0, n = 0;
    char cursor[32] = "0";
    do {
        redisReply *r = cmd(d, "SCAN %s MATCH %s* COUNT 1000", cursor, prefix);
        ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            redisReply *m = cmd(d, "MEMORY USAGE %s", r->element[1]->element[i]->str);
            if (m->type == REDIS_REPLY_INTEGER) sum += m->integer, n++;
            freeReplyObject(m);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    redisFree(d);
    *nkeys = n;
    return sum;
}

/* max-memory=64kb: once a pass sampled the namespace's keys, creation stops at about 64 KiB
 * (keys x sampled MEMORY USAGE), checked on durable with MEMORY USAGE of every key. */
START_TEST(test_max_memory_stops_near_its_budget)
{
    wait_estimate("dm:", 0);
    redisContext *c = harness_must_client(&h);
    char value[1001];
    memset(value, 'v', 1000);
    value[1000] = '\0';
    for (int i = 0; i < 20; i++) expect_status(cmd(c, "SET dm:%d %s", i, value), "OK", "under budget");
    /* a pass samples them: the memory estimate appears */
    long long mem = -1;
    for (long long end = now_ms() + 10000; now_ms() < end && mem <= 0; sleep_ms(100))
        mem = metric("keygate_namespace_memory_bytes{namespace=\"dm:\"");
    ck_assert_msg(mem > 20 * 1000, "no memory estimate for dm: (%lld)", mem);
    int ok = 20, oom = 0;
    for (int i = 20; i < 200; i++) redisAppendCommand(c, "SET dm:%d %s", i, value);
    for (int i = 20; i < 200; i++) {
        redisReply *r = next_reply(c);
        if (r->type == REDIS_REPLY_STATUS)
            ok++;
        else if (r->type == REDIS_REPLY_ERROR &&
                 strstr(r->str, "OOM namespace 'dm:' is over its budget (max-memory=65536, about "))
            oom++;
        else
            ck_abort_msg("SET dm: answered %s", describe(r));
        freeReplyObject(r);
    }
    long long nkeys, used = backend_memory("dm:", &nkeys);
    fprintf(stderr,
            "max-memory: %d OK, %d OOM; durable holds %lld dm: keys, %lld bytes by MEMORY USAGE (budget 65536)\n", ok,
            oom, nkeys, used);
    ck_assert_int_eq(nkeys, ok);
    ck_assert_int_gt(oom, 0);
    /* the same sizes everywhere: the estimate is exact but for one key's worth */
    ck_assert_msg(used <= 65536 + used / nkeys, "%lld bytes stored, budget 65536", used);
    ck_assert_msg(used >= 65536 * 9 / 10, "creation stopped early: %lld bytes", used);
    expect_status(cmd(c, "SET dm:0 small"), "OK", "an update over the memory budget");
    for (int i = 0; i < 200; i++) redisAppendCommand(c, "DEL dm:%d", i);
    for (int i = 0; i < 200; i++) freeReplyObject(next_reply(c));
    redisFree(c);
}
END_TEST

/* A RESP3 client's replies come through the check script as RESP3 (a double stays a double);
 * inside the client's MULTI the check answers in EXEC's array. */
START_TEST(test_resp3_and_multi_through_the_check)
{
    wait_estimate("r3:", 0);
    redisContext *c = harness_must_client(&h);
    expect_int(cmd(c, "ZADD r3:z 1 m"), 1, "under budget");
    expect_status(cmd(c, "SET r3:a 1"), "OK", "under budget: the second of max-keys=2");
    expect_error(cmd(c, "SET r3:b 1"), "OOM namespace 'r3:'", "a third key");
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET r3:a 2"), "QUEUED", "an update queued");
    expect_status(cmd(c, "SET r3:c 1"), "QUEUED", "a new key queued");
    redisReply *r = cmd(c, "EXEC");
    expect_array(r, "EXEC: the update ran, the new key was refused", 2, "+OK", "-OOM namespace 'r3:'");
    expect_bulk(cmd(c, "GET r3:a"), "2", "the update inside MULTI ran");

    struct harness_raw raw;
    harness_raw_open(&raw, h.port, "resp3");
    const char *hello[] = {"HELLO", "3"};
    harness_raw_sendv(&raw, 2, hello);
    free(harness_raw_reply(&raw, NULL));
    const char *zincr[] = {"ZINCRBY", "r3:z", "1.5", "m"};
    harness_raw_sendv(&raw, 4, zincr);
    char *bytes = harness_raw_reply(&raw, NULL);
    ck_assert_msg(strcmp(bytes, ",2.5\r\n") == 0, "ZINCRBY over budget under RESP3 answered %s", bytes);
    free(bytes);
    const char *set[] = {"SET", "r3:b", "1"};
    harness_raw_sendv(&raw, 3, set);
    bytes = harness_raw_reply(&raw, NULL);
    ck_assert_msg(strncmp(bytes, "-OOM namespace 'r3:'", 20) == 0, "SET of a new key under RESP3 answered %s", bytes);
    free(bytes);
    harness_raw_close(&raw);
    expect_int(cmd(c, "DEL r3:z r3:a"), 2, "clean up");
    redisFree(c);
}
END_TEST

/* --check refuses a budget on a channel line, on the cache instance, and bad numbers and sizes,
 * each as FILE:LINE: message; a good budget passes. */
START_TEST(test_check_refuses_bad_budgets)
{
    char dir[PATH_MAX], args[PATH_MAX + 64], out[8192];
    snprintf(dir, sizeof dir, "%s/budget-check", h.dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    harness_write_in(dir, "keygate.conf",
                     "listen 127.0.0.1:1\nregistry registry.conf\ninstance durable 127.0.0.1:2 plain\n"
                     "instance cache 127.0.0.1:3 plain\n");
    harness_write_in(dir, "registry.conf",
                     "namespace q: instance=durable ttl=none owner=q max-keys=1000 max-memory=1gb\n"
                     "channel push: instance=cache owner=n max-keys=10\n"
                     "namespace cache: instance=cache ttl=1h owner=c max-memory=10mb\n"
                     "namespace a: instance=durable ttl=none owner=a max-keys=0\n"
                     "namespace b: instance=durable ttl=none owner=a max-memory=12qb\n"
                     "default instance=cache ttl=1h owner=legacy max-keys=5\n");
    snprintf(args, sizeof args, "--check -c '%s/keygate.conf'", dir);
    ck_assert_int_eq(harness_run_keygate(args, out, sizeof out), 1);
    const char *want[] = {
        "registry.conf:2: max-keys= is not allowed on a channel line",
        "registry.conf:3: max-memory= is not allowed on instance 'cache': budgets are for a noeviction instance",
        "registry.conf:4: bad max-keys= value '0'",
        "registry.conf:5: bad max-memory= value '12qb'",
        "registry.conf:6: max-keys= is not allowed on instance 'cache'",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(out, want[i]) != NULL, "--check: no '%s' in:\n%s", want[i], out);
    ck_assert_msg(strstr(out, "registry.conf:1:") == NULL, "line 1 is good:\n%s", out);
    harness_write_in(dir, "registry.conf",
                     "namespace q: instance=durable ttl=none owner=q max-keys=1000 max-memory=1gb\n");
    ck_assert_msg(harness_run_keygate(args, out, sizeof out) == 0, "a good budget: %s", out);
}
END_TEST

/* keygate registry prints the budgets (plain and --markdown). */
START_TEST(test_registry_prints_budgets)
{
    char args[PATH_MAX + 64], out[8192];
    snprintf(args, sizeof args, "registry -c '%s'", h.conf_file);
    ck_assert_int_eq(harness_run_keygate(args, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "Budget") && strstr(out, "max-keys=500") && strstr(out, "max-memory=64kb"),
                  "keygate registry:\n%s", out);
    snprintf(args, sizeof args, "registry -c '%s' --markdown", h.conf_file);
    ck_assert_int_eq(harness_run_keygate(args, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "| Budget |") && strstr(out, "| max-keys=10 |"), "keygate registry --markdown:\n%s", out);
}
END_TEST

/* With namespace-scan-interval 0 and no budget the sampler is off; a reload that brings a budget
 * starts its passes (every 10 s, the first at once) and enforces it. */
START_TEST(test_reload_brings_a_budget_and_its_passes)
{
    struct harness_opts o = {.registry_text = "namespace rb: instance=durable ttl=none owner=app\n"
                                              "namespace cache: instance=cache ttl=1h owner=cache\n",
                             .admin = 1};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart: %s", h.error);
    redisContext *c = harness_must_client(&h);
    for (int i = 0; i < 5; i++) expect_status(cmd(c, "SET rb:%d v", i), "OK", "no budget yet");
    ck_assert_int_eq(metric("keygate_namespace_keys{namespace=\"rb:\""), -1); /* the sampler is off */
    FILE *f = fopen(h.registry_file, "w");
    ck_assert_ptr_nonnull(f);
    fputs("namespace rb: instance=durable ttl=none owner=app max-keys=5\n"
          "namespace cache: instance=cache ttl=1h owner=cache\n",
          f);
    fclose(f);
    long long before = harness_info_reloads(c);
    ck_assert_int_eq(kill(h.keygate_pid, SIGHUP), 0);
    for (long long end = now_ms() + 5000; harness_info_reloads(c) == before && now_ms() < end;) sleep_ms(20);
    ck_assert_int_eq(harness_info_reloads(c), before + 1);
    wait_estimate("rb:", 5); /* the reload started the passes: the 5 keys are counted */
    expect_error(cmd(c, "SET rb:new v"), "OOM namespace 'rb:' is over its budget (max-keys=5, about 5 keys)",
                 "the budget a reload brought");
    expect_status(cmd(c, "SET rb:0 w"), "OK", "an update");
    expect_int(cmd(c, "DEL rb:0 rb:1 rb:2 rb:3 rb:4"), 5, "clean up");
    redisFree(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("budgets");
    TCase *tc = harness_tcase(s, "budgets", 120, setup, teardown);
    harness_add_test(tc, test_flood_stops_at_max_keys);
    harness_add_test(tc, test_updates_pass_and_creation_comes_back);
    harness_add_test(tc, test_max_memory_stops_near_its_budget);
    harness_add_test(tc, test_resp3_and_multi_through_the_check);
    harness_add_test(tc, test_check_refuses_bad_budgets);
    harness_add_test(tc, test_registry_prints_budgets);
    harness_add_test(tc, test_reload_brings_a_budget_and_its_passes);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
