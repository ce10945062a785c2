/* test_slotmap_live.c: src/slotmap against a live TLS Redis Cluster: key slots against CLUSTER KEYSLOT for 10,000 binary and hash-tagged keys, and maps parsed from the nodes' raw CLUSTER SLOTS / SHARDS bytes against every node's CLUSTER SHARDS and COUNTKEYSINSLOT, before and after a reshard. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_harness.h"
#include "cluster_suite.h"
#include "harness.h"
#include "slotmap.h"

/* ---- key slots ---- */

#define NKEYS 10000
#define KEY_MAX 48

struct key {
    char bytes[KEY_MAX];
    size_t len;
};

/* The hash-tag shapes Redis's keyHashSlot tells apart: empty tags, unclosed braces, a '}'
 * before the '{', several tags (only the first counts), nested braces, NUL bytes. */
#define FORM(s)                                                                                                        \
    {                                                                                                                  \
        s, sizeof(s) - 1                                                                                               \
    }
static const struct {
    const char *bytes;
    size_t len;
} tag_forms[] = {
    FORM(""),        FORM("{}"),         FORM("{"),      FORM("}"),      FORM("}{"),         FORM("{}{"),
    FORM("a{}b{c}"), FORM("{x}y"),       FORM("y{x}"),   FORM("{x}{y}"), FORM("{{x}}"),      FORM("{{}}"),
    FORM("{a{b}c}"), FORM("}{x}"),       FORM("x{}{y}"), FORM("{}x{y}"), FORM("a{b}{c}"),    FORM("{}}"),
    FORM("{{"),      FORM("}}"),         FORM("a{b"),    FORM("a}b{c"),  FORM("{user1000}"), FORM("foo{bar}"),
    FORM("{bar"),    FORM("foo{}{bar}"), FORM("{\0}"),   FORM("\0{x}"),  FORM("{x\0y}z"),    FORM("{ }"),
    FORM("{\xff}"),  FORM("a{b}c{d}e"),  FORM("{{a}b}"), FORM("{a}}b}"), FORM("{}{}{}"),     FORM("}{}{")};
#undef FORM

static void keys_make(struct key *keys)
{
    unsigned seed = 20261202;
    size_t nforms = sizeof tag_forms / sizeof tag_forms[0];
    static const char alphabet[] = {'{', '}', 'a', 'b', 'x', '\0', ':'};
    for (int i = 0; i < NKEYS; i++) {
        struct key *k = &keys[i];
        if ((size_t)i < nforms) { /* each form as it is */
            memcpy(k->bytes, tag_forms[i].bytes, tag_forms[i].len);
            k->len = tag_forms[i].len;
        } else if (i % 3 == 0) { /* random bytes, any value */
            k->len = (size_t)(rand_r(&seed) % KEY_MAX);
            for (size_t j = 0; j < k->len; j++) k->bytes[j] = (char)(rand_r(&seed) & 0xff);
        } else if (i % 3 == 1) { /* braces dense: tags of every shape */
            k->len = (size_t)(rand_r(&seed) % 12);
            for (size_t j = 0; j < k->len; j++) k->bytes[j] = alphabet[rand_r(&seed) % sizeof alphabet];
        } else { /* a form with random bytes around it */
            const size_t f = (size_t)rand_r(&seed) % nforms, pre = (size_t)rand_r(&seed) % 8,
                         post = (size_t)rand_r(&seed) % 8;
            size_t n = 0;
            for (size_t j = 0; j < pre; j++) k->bytes[n++] = (char)(rand_r(&seed) & 0xff);
            memcpy(k->bytes + n, tag_forms[f].bytes, tag_forms[f].len);
            n += tag_forms[f].len;
            for (size_t j = 0; j < post; j++) k->bytes[n++] = (char)('a' + rand_r(&seed) % 26);
            k->len = n;
        }
    }
}

START_TEST(test_key_slots_match_cluster_keyslot)
{
    static struct key keys[NKEYS];
    keys_make(keys);
    redisContext *c = must_connect(0);
    for (int i = 0; i < NKEYS; i++) redisAppendCommand(c, "CLUSTER KEYSLOT %b", keys[i].bytes, keys[i].len);
    int tagged = 0;
    for (int i = 0; i < NKEYS; i++) {
        redisReply *r = next_reply(c);
        ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "key %d: %s", i, describe(r));
        unsigned mine = slotmap_key_slot(keys[i].bytes, keys[i].len);
        if (memchr(keys[i].bytes, '{', keys[i].len) != NULL) tagged++;
        ck_assert_msg((long long)mine == r->integer,
                      "key %d (%zu bytes, first 16 as hex %02x%02x%02x%02x...): slotmap %u, "
                      "CLUSTER KEYSLOT %lld",
                      i, keys[i].len, (unsigned char)keys[i].bytes[0], (unsigned char)keys[i].bytes[1],
                      (unsigned char)keys[i].bytes[2], (unsigned char)keys[i].bytes[3], mine, r->integer);
        freeReplyObject(r);
    }
    redisFree(c);
    fprintf(stderr, "slotmap_key_slot = CLUSTER KEYSLOT for %d keys (%d with a '{')\n", NKEYS, tagged);
}
END_TEST

/* ---- maps from raw replies ---- */

#define LIVE_KEYS 40000

static int g_expected[CLUSTER_SLOTS]; /* keys the test wrote into each slot */

/* The raw bytes of one command's reply on a new plain, authenticated connection to node i. */
static char *raw_reply(int i, const char *command, const char *arg, size_t *len)
{
    static struct harness_raw raw;
    harness_raw_open(&raw, C->nodes[i].plain_port, "node");
    const char *auth[] = {"AUTH", C->password};
    harness_raw_sendv(&raw, 2, auth);
    char *ok = harness_raw_reply(&raw, NULL);
    ck_assert_msg(strcmp(ok, "+OK\r\n") == 0, "node %d: AUTH: %s", i, ok);
    free(ok);
    const char *argv[] = {"CLUSTER", command, arg};
    harness_raw_sendv(&raw, arg != NULL ? 3 : 2, argv);
    char *out = harness_raw_reply(&raw, len);
    harness_raw_close(&raw);
    return out;
}

/* The cluster node a slotmap node names (127.0.0.1 and a plain or TLS port), or -1. */
static int map_node(const struct slotmap *m, int idx, int tls)
{
    if (idx < 0) return -1;
    ck_assert_msg(strcmp(m->nodes[idx].host, "127.0.0.1") == 0, "host %s", m->nodes[idx].host);
    int n = cluster_node_by_port(C, m->nodes[idx].port);
    ck_assert_msg(n >= 0 && (tls ? C->nodes[n].tls_port : C->nodes[n].plain_port) == m->nodes[idx].port,
                  "port %d is node %d's %s port", m->nodes[idx].port, n, tls ? "TLS" : "plain");
    return n;
}

/* Write LIVE_KEYS keys, each on the node owning its slot (which refuses it otherwise). */
static void keys_write(void)
{
    static int owners[CLUSTER_SLOTS];
    ck_assert_msg(cluster_slot_owners(C, 0, owners) == 0, "%s", cluster_last_error());
    redisContext *conns[CLUSTER_NODES] = {0};
    int sent[CLUSTER_NODES] = {0};
    for (int i = 0; i < LIVE_KEYS; i++) {
        char key[32];
        int len = snprintf(key, sizeof key, "live:%d", i);
        unsigned s = slotmap_key_slot(key, (size_t)len);
        int o = owners[s];
        ck_assert_int_ge(o, 0);
        if (conns[o] == NULL) conns[o] = must_connect(o);
        redisAppendCommand(conns[o], "SET %s %d", key, i);
        sent[o]++;
        g_expected[s]++;
    }
    for (int k = 0; k < CLUSTER_NODES; k++) {
        if (conns[k] == NULL) continue;
        for (int i = 0; i < sent[k]; i++) expect_status(next_reply(conns[k]), "OK", "SET on the slot's owner");
        redisFree(conns[k]);
    }
}

/* Each primary's replica has all it wrote (WAIT 1 on every primary). */
static void replicas_catch_up(void)
{
    int primaries[CLUSTER_NODES], np = cluster_primaries(C, primaries);
    ck_assert_int_eq(np, 3);
    for (int k = 0; k < np; k++) {
        redisContext *c = must_connect(primaries[k]);
        expect_int(cmd(c, "WAIT 1 5000"), 1, "the replica caught up");
        redisFree(c);
    }
}

/* Every node: its raw CLUSTER SLOTS and CLUSTER SHARDS (plain and TLS ports) parse into maps
 * whose every slot's owner is the one its CLUSTER SHARDS names (hiredis-parsed); all nodes
 * agree; and for every slot every node's COUNTKEYSINSLOT is the keys written there on the
 * owner and its replica, 0 elsewhere. */
static void maps_check(const char *when)
{
    static struct slotmap slots_map, shards_plain, shards_tls;
    static int owners[CLUSTER_SLOTS], first[CLUSTER_SLOTS], node_owner[CLUSTER_SLOTS];
    char err[256];
    int primary_of[CLUSTER_NODES];
    for (int i = 0; i < CLUSTER_NODES; i++) {
        primary_of[i] = i;
        if (cluster_node_role(C, i) != CLUSTER_ROLE_REPLICA) continue;
        redisContext *c = must_connect(i);
        redisReply *r = cmd(c, "ROLE");
        primary_of[i] = cluster_node_by_port(C, (int)r->element[2]->integer);
        freeReplyObject(r);
        redisFree(c);
    }
    replicas_catch_up();
    long long t0 = now_ms();
    for (int i = 0; i < CLUSTER_NODES; i++) {
        size_t len;
        char *raw = raw_reply(i, "SLOTS", NULL, &len);
        ck_assert_msg(slotmap_parse_slots(&slots_map, raw, len, "127.0.0.1", err, sizeof err) == 0, "%s: node %d: %s",
                      when, i, err);
        free(raw);
        raw = raw_reply(i, "SHARDS", NULL, &len);
        ck_assert_msg(slotmap_parse_shards(&shards_plain, raw, len, 0, "127.0.0.1", err, sizeof err) == 0,
                      "%s: node %d: %s", when, i, err);
        ck_assert_msg(slotmap_parse_shards(&shards_tls, raw, len, 1, "127.0.0.1", err, sizeof err) == 0,
                      "%s: node %d: %s", when, i, err);
        free(raw);
        ck_assert_msg(cluster_slot_owners(C, i, owners) == 0, "%s", cluster_last_error());
        for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
            int a = map_node(&slots_map, slotmap_owner(&slots_map, s), 0);
            int b = map_node(&shards_plain, slotmap_owner(&shards_plain, s), 0);
            int t = map_node(&shards_tls, slotmap_owner(&shards_tls, s), 1);
            ck_assert_msg(a == owners[s] && b == owners[s] && t == owners[s],
                          "%s: node %d slot %u: SLOTS map %d, SHARDS map %d (TLS %d), CLUSTER SHARDS %d", when, i, s, a,
                          b, t, owners[s]);
            ck_assert_msg(owners[s] >= 0, "%s: slot %u has an owner", when, s);
            if (i == 0) first[s] = owners[s];
            ck_assert_msg(owners[s] == first[s], "%s: nodes 0 and %d disagree on slot %u", when, i, s);
        }
        memcpy(node_owner, owners, sizeof node_owner);
    }
    /* COUNTKEYSINSLOT, every slot on every node */
    for (int i = 0; i < CLUSTER_NODES; i++) {
        redisContext *c = must_connect(i);
        for (unsigned s = 0; s < CLUSTER_SLOTS; s++) redisAppendCommand(c, "CLUSTER COUNTKEYSINSLOT %u", s);
        for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
            redisReply *r = next_reply(c);
            long long want = primary_of[i] == node_owner[s] ? g_expected[s] : 0;
            ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer == want,
                          "%s: node %d (of primary %d) slot %u (owner %d): COUNTKEYSINSLOT %s, want %lld", when, i,
                          primary_of[i], s, node_owner[s], describe(r), want);
            freeReplyObject(r);
        }
        redisFree(c);
    }
    fprintf(stderr,
            "%s: 6 nodes x (SLOTS, SHARDS plain + TLS) maps = CLUSTER SHARDS and COUNTKEYSINSLOT for 16384 "
            "slots (%lld ms)\n",
            when, now_ms() - t0);
}

START_TEST(test_maps_match_live_cluster)
{
    keys_write();
    maps_check("before the reshard");
    int primaries[CLUSTER_NODES], np = cluster_primaries(C, primaries);
    ck_assert_int_eq(np, 3);
    long long t0 = now_ms();
    ck_assert_msg(cluster_reshard(C, primaries[0], primaries[1], 700, 60000) == 0, "%s", cluster_last_error());
    /* and one slot from the middle of the third primary's range: its slots become two ranges */
    static int owners[CLUSTER_SLOTS];
    ck_assert_msg(cluster_slot_owners(C, 0, owners) == 0, "%s", cluster_last_error());
    unsigned lo = CLUSTER_SLOTS, hi = 0;
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++)
        if (owners[s] == primaries[2]) {
            if (s < lo) lo = s;
            hi = s;
        }
    unsigned mid = (lo + hi) / 2;
    ck_assert_int_eq(owners[mid], primaries[2]);
    int moved = 0;
    ck_assert_msg(cluster_migrate_begin(C, mid, primaries[2], primaries[0]) == 0 &&
                      cluster_migrate_keys(C, mid, primaries[2], primaries[0], 1000, &moved) == 0 &&
                      cluster_migrate_end(C, mid, primaries[2], primaries[0]) == 0,
                  "%s", cluster_last_error());
    ck_assert_int_eq(moved, g_expected[mid]);
    fprintf(stderr, "reshard of 700 slots + slot %u moved alone: %lld ms\n", mid, now_ms() - t0);
    maps_check("after the reshard");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("slotmap_live");
    TCase *tc = harness_tcase(s, "live", 120, setup, teardown);
    harness_add_test(tc, test_key_slots_match_cluster_keyslot);
    harness_add_test(tc, test_maps_match_live_cluster);
    int failed = harness_run(s);
    int left = cluster_leftovers();
    if (left) fprintf(stderr, "POST-CONDITION FAILED: %d redis-server(s) of this suite still run\n", left);
    return failed == 0 && left == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
