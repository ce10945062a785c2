/* test_cluster_keyless.c: keyless reads of a cluster instance through keygate against the live TLS cluster's own answers: DBSIZE summed over every primary, KEYS and SCAN MATCH reading every primary once, SCAN's cursor across nodes and its errors. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_keygate.h"
#include "slotmap.h"

/* Write n keys cache:k:<i> through keygate (pipelined) and check each answered OK. */
static void write_keys(redisContext *kg, const char *prefix, int n)
{
    for (int i = 0; i < n; i++) redisAppendCommand(kg, "SET %s%d v%d", prefix, i, i);
    for (int i = 0; i < n; i++) expect_status(next_reply(kg), "OK", "SET through keygate");
}

/* DBSIZE of every primary, asked directly; *nprimaries: how many answered. */
static long long primaries_dbsize(int *nprimaries)
{
    int idx[CLUSTER_NODES];
    int n = cluster_primaries(C, idx);
    ck_assert_msg(n == 3, "3 primaries expected, the cluster says %d", n);
    long long sum = 0;
    for (int k = 0; k < n; k++) {
        redisContext *c = cluster_connect(C, idx[k]);
        ck_assert_msg(c != NULL, "primary %d does not answer", idx[k]);
        redisReply *r = cmd(c, "DBSIZE");
        ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "DBSIZE on node %d: %s", idx[k], describe(r));
        sum += r->integer;
        freeReplyObject(r);
        redisFree(c);
    }
    *nprimaries = n;
    return sum;
}

/* Which of the n keys prefix<i> each element of a reply array names; fails on a stranger or a repeat. */
static int mark_keys(const redisReply *arr, const char *prefix, int n, unsigned char *seen, const char *what)
{
    size_t plen = strlen(prefix);
    int added = 0;
    for (size_t j = 0; j < arr->elements; j++) {
        const redisReply *e = arr->element[j];
        ck_assert_msg(e->type == REDIS_REPLY_STRING && e->len > plen && memcmp(e->str, prefix, plen) == 0,
                      "%s: element %zu is %s, not a %s key", what, j, describe(e), prefix);
        int i = atoi(e->str + plen);
        ck_assert_msg(i >= 0 && i < n, "%s: key %s out of range", what, e->str);
        ck_assert_msg(!seen[i], "%s: key %s returned twice", what, e->str);
        seen[i] = 1;
        added++;
    }
    return added;
}

START_TEST(dbsize_sums_every_primary)
{
    keygate_on_cluster();
    redisContext *kg = harness_must_client(&h);
    write_keys(kg, "cache:d:", 500);
    expect_status(cmd(kg, "SET q:d:1 x"), "OK", "SET on durable");
    int n;
    long long cluster = primaries_dbsize(&n);
    long long durable = harness_direct_int(&h, "durable", "DBSIZE");
    ck_assert_msg(cluster == 500, "the primaries hold %lld keys, 500 written", cluster);
    /* keygate's DBSIZE: every instance, and every primary of the cluster */
    expect_int(cmd(kg, "DBSIZE"), cluster + durable, "DBSIZE through keygate");
    fprintf(stderr, "DBSIZE: %lld on %d primaries + %lld on durable\n", cluster, n, durable);
    redisFree(kg);
}
END_TEST

START_TEST(keys_reads_every_primary_once)
{
    keygate_on_cluster();
    redisContext *kg = harness_must_client(&h);
    enum { N = 600 };
    write_keys(kg, "cache:k:", N);
    write_keys(kg, "other:k:", 50); /* outside the pattern */
    unsigned char seen[N] = {0};
    redisReply *r = cmd(kg, "KEYS cache:k:*");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY, "KEYS: %s", describe(r));
    ck_assert_int_eq(mark_keys(r, "cache:k:", N, seen, "KEYS"), N);
    freeReplyObject(r);
    r = cmd(kg, "KEYS cache:none:*");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 0, "KEYS with no match: %s", describe(r));
    freeReplyObject(r);
    /* inside MULTI it would read one node: refused, and EXEC aborts as after any refused command */
    expect_status(cmd(kg, "MULTI"), "OK", "MULTI");
    expect_error(cmd(kg, "KEYS cache:k:*"), "DENIED KEYS inside MULTI", "KEYS in MULTI");
    expect_error(cmd(kg, "EXEC"), "EXECABORT", "EXEC");
    redisFree(kg);
}
END_TEST

/* SCAN cursor MATCH p COUNT 7 [TYPE t] through keygate until the cursor is 0 again; every key
 * seen is marked (a repeat is allowed, as Redis's SCAN allows it); *ranks gets a bit for every
 * node rank a cursor named (its low 7 bits). Returns the number of calls. */
static int scan_all(redisContext *kg, const char *match, const char *type, const char *prefix, int n,
                    unsigned char *seen, unsigned *ranks)
{
    char cursor[32] = "0";
    int calls = 0;
    size_t plen = strlen(prefix);
    do {
        ck_assert_msg(++calls < 20000, "SCAN did not come back to 0 in 20000 calls (cursor %s)", cursor);
        unsigned long long c = strtoull(cursor, NULL, 10);
        *ranks |= 1u << (c & 127);
        redisReply *r = type ? cmd(kg, "SCAN %s MATCH %s COUNT 7 TYPE %s", cursor, match, type)
                             : cmd(kg, "SCAN %s MATCH %s COUNT 7", cursor, match);
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_STRING &&
                          r->element[1]->type == REDIS_REPLY_ARRAY,
                      "SCAN %s: %s", cursor, describe(r));
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        const redisReply *keys = r->element[1];
        for (size_t j = 0; j < keys->elements; j++) {
            const redisReply *e = keys->element[j];
            ck_assert_msg(e->type == REDIS_REPLY_STRING && e->len >= plen && memcmp(e->str, prefix, plen) == 0,
                          "SCAN MATCH %s returned %s", match, describe(e));
            int i = atoi(e->str + plen);
            if (i >= 0 && i < n) seen[i] = 1;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return calls;
}

START_TEST(scan_walks_every_primary_with_one_cursor)
{
    keygate_on_cluster();
    redisContext *kg = harness_must_client(&h);
    enum { N = 1000 };
    write_keys(kg, "cache:s:", N);
    write_keys(kg, "other:s:", 100); /* outside the pattern */
    unsigned char seen[N] = {0};
    unsigned ranks = 0;
    int calls = scan_all(kg, "cache:s:*", NULL, "cache:s:", N, seen, &ranks);
    int found = 0;
    for (int i = 0; i < N; i++) found += seen[i];
    ck_assert_msg(found == N, "SCAN through keygate found %d of the %d keys", found, N);
    ck_assert_msg(ranks == 7, "the cursors named node ranks 0x%x, not all three primaries", ranks);
    fprintf(stderr, "SCAN: %d keys on 3 primaries in %d calls\n", N, calls);

    /* TYPE filters on every node: the one hash among the strings */
    expect_int(cmd(kg, "HSET cache:s:h f v"), 1, "HSET");
    unsigned char none[1] = {0};
    ranks = 0;
    int calls_hash = scan_all(kg, "cache:s:h*", "hash", "cache:s:h", 1, none, &ranks);
    ck_assert_msg(none[0] == 1 && calls_hash >= 3, "SCAN ... TYPE hash: the hash %sfound in %d calls",
                  none[0] ? "" : "not ", calls_hash);
    ck_assert_msg(ranks == 7, "SCAN ... TYPE hash named node ranks 0x%x", ranks);
    redisReply *r = cmd(kg, "SCAN 0 MATCH cache:s:h TYPE string");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "SCAN TYPE string: %s", describe(r));
    freeReplyObject(r);

    /* a cursor Redis would not parse, and one naming a node past the primaries: Redis's text */
    redisContext *node = cluster_connect(C, 0);
    ck_assert_msg(node != NULL, "node 0 does not answer");
    redisReply *want = cmd(node, "SCAN abc");
    ck_assert_msg(want->type == REDIS_REPLY_ERROR, "SCAN abc on a node: %s", describe(want));
    char text[256];
    snprintf(text, sizeof text, "%s", want->str);
    freeReplyObject(want);
    redisFree(node);
    /* (Redis reads the cursor with strtoull: "-1" is 2^64-1, which names rank 127 here) */
    static const char *const bad[] = {"abc", "5", "-1", "18446744073709551616", " 1", "+"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = cmd(kg, "SCAN %s MATCH cache:s:*", bad[i]);
        ck_assert_msg(r->type == REDIS_REPLY_ERROR && strcmp(r->str, text) == 0, "SCAN '%s': %s, Redis says '%s'",
                      bad[i], describe(r), text);
        freeReplyObject(r);
    }
    /* inside MULTI: refused */
    expect_status(cmd(kg, "MULTI"), "OK", "MULTI");
    expect_error(cmd(kg, "SCAN 0 MATCH cache:s:*"), "DENIED SCAN inside MULTI", "SCAN in MULTI");
    expect_status(cmd(kg, "DISCARD"), "OK", "DISCARD");
    redisFree(kg);
}
END_TEST

/* INFO keyspace through keygate: one section per primary of the cluster, labelled with the node's
 * address (the TLS port keygate uses), each with that node's own key count; durable's as before. */
START_TEST(info_keyspace_per_primary)
{
    keygate_on_cluster();
    redisContext *kg = harness_must_client(&h);
    write_keys(kg, "cache:i:", 300);
    redisReply *r = cmd(kg, "INFO keyspace");
    ck_assert_msg(r->type == REDIS_REPLY_STRING, "INFO keyspace: %s", describe(r));
    ck_assert_msg(strstr(r->str, "# Keyspace (instance durable)"), "durable's section missing:\n%s", r->str);
    int idx[CLUSTER_NODES], n = cluster_primaries(C, idx);
    ck_assert_int_eq(n, 3);
    for (int k = 0; k < n; k++) {
        char header[128];
        snprintf(header, sizeof header, "# Keyspace (instance cache node 127.0.0.1:%d)", C->nodes[idx[k]].tls_port);
        const char *at = strstr(r->str, header);
        ck_assert_msg(at != NULL, "no section '%s' in:\n%s", header, r->str);
        redisContext *node = cluster_connect(C, idx[k]);
        ck_assert_msg(node != NULL, "node %d does not answer", idx[k]);
        redisReply *d = cmd(node, "DBSIZE");
        char want[64];
        snprintf(want, sizeof want, "db0:keys=%lld,", d->integer);
        freeReplyObject(d);
        redisFree(node);
        const char *next = strstr(at + 1, "# ");
        const char *line = strstr(at, "db0:keys=");
        ck_assert_msg(line && (!next || line < next) && strncmp(line, want, strlen(want)) == 0,
                      "section '%s' does not say %s:\n%s", header, want, r->str);
    }
    freeReplyObject(r);
    redisFree(kg);
}
END_TEST

/* Client-side caching (issue 32): keygate's tracking feed holds a connection to every primary,
 * so a write made directly to whichever primary owns a key reaches a RESP3 tracking client. */
START_TEST(tracking_feed_on_every_primary)
{
    keygate_on_cluster();
    redisContext *kg = harness_must_client(&h);
    long long end = now_ms() + 15000, up = -1;
    while ((up = harness_info_field(kg, "tracking", "tracking_feeds_up")) != 2 && now_ms() < end) sleep_ms(20);
    ck_assert_msg(up == 2, "tracking feeds up: %lld, want 2 (durable and the cluster)", up);
    redisFree(kg);
    struct harness_raw t;
    harness_raw_open_tracking(&t, h.port, "keygate (tracking)", NULL, NULL);
    char *got;
    int owners_seen[CLUSTER_NODES] = {0}, distinct = 0;
    for (int i = 0; i < 12; i++) {
        char key[32], want[128];
        snprintf(key, sizeof key, "cache:trk%d", i);
        const char *get[] = {"GET", key};
        harness_raw_sendv(&t, 2, get);
        got = harness_raw_reply(&t, NULL);
        ck_assert_msg(strcmp(got, "_\r\n") == 0, "GET %s: %s", key, got);
        free(got);
        int owner = cluster_slot_owner(C, slotmap_key_slot(key, strlen(key)));
        ck_assert_int_ge(owner, 0);
        if (!owners_seen[owner]++) distinct++;
        redisContext *d = cluster_connect(C, owner);
        ck_assert_ptr_nonnull(d);
        freeReplyObject(cmd(d, "SET %s v EX 100", key));
        redisFree(d);
        snprintf(want, sizeof want, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$%zu\r\n%s\r\n", strlen(key), key);
        got = harness_raw_reply(&t, NULL);
        ck_assert_msg(strcmp(got, want) == 0, "the push of a direct write of %s on node %d: %s", key, owner, got);
        free(got);
    }
    ck_assert_msg(distinct == 3, "the keys reached %d primaries, want 3", distinct);
    harness_raw_close(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cluster_keyless");
    TCase *tc = harness_tcase(s, "keyless", 120, setup, teardown);
    harness_add_test(tc, dbsize_sums_every_primary);
    harness_add_test(tc, keys_reads_every_primary_once);
    harness_add_test(tc, scan_walks_every_primary_with_one_cursor);
    harness_add_test(tc, info_keyspace_per_primary);
    harness_add_test(tc, tracking_feed_on_every_primary);
    int failed = harness_run(s);
    return failed == 0 && cluster_leftovers() == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
