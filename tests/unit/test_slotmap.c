/* test_slotmap.c: unit tests for slotmap.c: key slots against a real node's CLUSTER KEYSLOT, real CLUSTER SLOTS / SHARDS replies, MOVED / ASK. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_replies.h"
#include "slotmap.h"

/* A char array (a fixture, a literal) as (pointer, length without the final NUL). */
#define BYTES(a) (a), (sizeof(a) - 1)

/* ---------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------- */

/* A map on the heap (66 KB: kept off the test's stack). */
static struct slotmap *map_new(void)
{
    struct slotmap *m = malloc(sizeof(*m));
    ck_assert_ptr_nonnull(m);
    slotmap_init(m);
    return m;
}

static unsigned slot_of(const char *key)
{
    return slotmap_key_slot(key, strlen(key));
}

/* Every slot of lo..hi is served by host:port. */
static void owner_is(const struct slotmap *m, unsigned lo, unsigned hi, const char *host, int port)
{
    for (unsigned s = lo; s <= hi; s++) {
        int i = slotmap_owner(m, s);
        ck_assert_msg(i >= 0 && i < m->nnodes, "slot %u: owner %d", s, i);
        ck_assert_msg(strcmp(m->nodes[i].host, host) == 0 && m->nodes[i].port == port, "slot %u: %s:%d, want %s:%d", s,
                      m->nodes[i].host, m->nodes[i].port, host, port);
    }
}

/* Two maps route every slot to the same address (node indexes may differ). */
static void same_routes(const struct slotmap *a, const struct slotmap *b)
{
    ck_assert_int_eq(a->nnodes, b->nnodes);
    for (unsigned s = 0; s < SLOTMAP_SLOTS; s++) {
        int i = slotmap_owner(a, s), j = slotmap_owner(b, s);
        ck_assert_msg((i < 0) == (j < 0), "slot %u: %d vs %d", s, i, j);
        if (i < 0) continue;
        ck_assert_str_eq(a->nodes[i].host, b->nodes[j].host);
        ck_assert_int_eq(a->nodes[i].port, b->nodes[j].port);
    }
}

/* A RESP2 writer for hand-made replies. */
struct w {
    char b[8192];
    size_t n;
};

__attribute__((format(printf, 2, 3))) static void put(struct w *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(w->b + w->n, sizeof(w->b) - w->n, fmt, ap);
    va_end(ap);
    ck_assert(n >= 0 && (size_t)n < sizeof(w->b) - w->n);
    w->n += (size_t)n;
}

static void arr(struct w *w, long n)
{
    put(w, "*%ld\r\n", n);
}

static void bulk(struct w *w, const char *s)
{
    put(w, "$%zu\r\n%s\r\n", strlen(s), s);
}

static void num(struct w *w, long long v)
{
    put(w, ":%lld\r\n", v);
}

/* A CLUSTER SLOTS range with its primary only. */
static void slots_range(struct w *w, long long lo, long long hi, const char *host, long long port)
{
    arr(w, 3);
    num(w, lo);
    num(w, hi);
    arr(w, 2);
    bulk(w, host);
    num(w, port);
}

/* A CLUSTER SHARDS node map with the fields slotmap reads (as Redis 7.0 orders them). */
static void shard_node(struct w *w, long long port, const char *ip, const char *endpoint, const char *role,
                       const char *health)
{
    arr(w, 10);
    bulk(w, "port");
    num(w, port);
    bulk(w, "ip");
    bulk(w, ip);
    bulk(w, "endpoint");
    bulk(w, endpoint);
    bulk(w, "role");
    bulk(w, role);
    bulk(w, "health");
    bulk(w, health);
}

/* One shard of one range lo..hi whose nodes follow (nnodes of them, written by the caller). */
static void shard_head(struct w *w, long long lo, long long hi, long nnodes)
{
    arr(w, 4);
    bulk(w, "slots");
    arr(w, 2);
    num(w, lo);
    num(w, hi);
    bulk(w, "nodes");
    arr(w, nnodes);
}

/* parse_slots / parse_shards fails with a message containing `want`, leaving the map as it was. */
static void slots_fail(const char *reply, size_t len, const char *asked, const char *want)
{
    struct slotmap *m = map_new(), *before = map_new();
    char err[256] = "";
    ck_assert_int_eq(slotmap_parse_slots(m, BYTES(slots_reply), "127.0.0.1", err, sizeof(err)), 0);
    *before = *m;
    ck_assert_int_eq(slotmap_parse_slots(m, reply, len, asked, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, want) != NULL, "error '%s' lacks '%s'", err, want);
    ck_assert_msg(strncmp(err, "CLUSTER SLOTS: ", 15) == 0, "error '%s'", err);
    ck_assert(memcmp(m, before, sizeof(*m)) == 0);
    free(m);
    free(before);
}

static void shards_fail(const char *reply, size_t len, int want_tls, const char *asked, const char *want)
{
    struct slotmap *m = map_new(), *before = map_new();
    char err[256] = "";
    ck_assert_int_eq(slotmap_parse_shards(m, BYTES(shards_reply), 0, "127.0.0.1", err, sizeof(err)), 0);
    *before = *m;
    ck_assert_int_eq(slotmap_parse_shards(m, reply, len, want_tls, asked, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, want) != NULL, "error '%s' lacks '%s'", err, want);
    ck_assert_msg(strncmp(err, "CLUSTER SHARDS: ", 16) == 0, "error '%s'", err);
    ck_assert(memcmp(m, before, sizeof(*m)) == 0);
    free(m);
    free(before);
}

/* ---------------------------------------------------------------------------------------------
 * Key -> slot. Every expected slot below was asked of a real redis-server 7.0.15 in cluster mode
 * (CLUSTER KEYSLOT key) while this test was written.
 * ------------------------------------------------------------------------------------------- */

START_TEST(crc16_known_vector)
{
    ck_assert_uint_eq(slotmap_crc16(BYTES("123456789")), 0x31C3); /* Redis's crc16.c: the XMODEM check value */
    ck_assert_uint_eq(slotmap_crc16("", 0), 0);
    ck_assert_uint_eq(slot_of("123456789"), 0x31C3 % SLOTMAP_SLOTS);
}
END_TEST

/* CRC16-XMODEM one bit at a time, as its definition reads: the oracle for the sliced one. */
static uint16_t crc16_bitwise(const unsigned char *p, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++) crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

/* Every length from 0 to 80 (the 8-byte slices, their tails, both together), every byte value. */
START_TEST(crc16_sliced_matches_bitwise)
{
    unsigned char buf[80];
    unsigned seed = 12345;
    for (int round = 0; round < 200; round++) {
        for (size_t i = 0; i < sizeof(buf); i++) {
            seed = seed * 1103515245u + 12345u;
            buf[i] = round == 0 ? (unsigned char)(i * 37) : round == 1 ? 0xff : (unsigned char)(seed >> 16);
        }
        for (size_t len = 0; len <= sizeof(buf); len++)
            ck_assert_msg(slotmap_crc16((const char *)buf, len) == crc16_bitwise(buf, len),
                          "round %d, %zu bytes: %04x, want %04x", round, len, slotmap_crc16((const char *)buf, len),
                          crc16_bitwise(buf, len));
    }
}
END_TEST

START_TEST(key_slots_of_real_keys)
{
    static const struct {
        const char *key;
        unsigned slot;
    } cases[] = {
        {"foo", 12182}, {"bar", 5061},      {"hello", 866},    {"123456789", 12739},
        {"b", 3300},    {"q:run:1", 16125}, {"tenant7", 8943}, {"nc", 13536},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(slot_of(cases[i].key) == cases[i].slot, "%s: %u, want %u", cases[i].key, slot_of(cases[i].key),
                      cases[i].slot);
    /* any bytes: NUL and high bytes included (redis-cli -x CLUSTER KEYSLOT < file) */
    ck_assert_uint_eq(slotmap_key_slot(BYTES("\xff\x00\x80"
                                             "binary")),
                      5226);
}
END_TEST

START_TEST(hash_tags)
{
    static const struct {
        const char *key;
        unsigned slot;   /* CLUSTER KEYSLOT key */
        const char *tag; /* what is hashed: the tag, or NULL for the whole key */
    } cases[] = {
        {"{user1000}.following", 3443, "user1000"},
        {"{user1000}.followers", 3443, "user1000"},
        {"a{b}c", 3300, "b"},
        {"cache:{tenant7}:a", 8943, "tenant7"},
        {"keygate:{nc}:stream", 13536, "nc"},
        {"foo{bar}{zap}", 5061, "bar"},  /* the first tag only */
        {"foo{{bar}}zap", 4015, "{bar"}, /* from the first '{' to the first '}' after it */
        {"{{}}", 4092, "{"},
        {"foo{}{bar}", 8363, NULL}, /* the first '{' opens an empty tag: the whole key */
        {"a{}b{c}", 7353, NULL},
        {"{}", 15257, NULL},
        {"{}}", 14790, NULL},
        {"{", 4092, NULL},
        {"}", 12090, NULL},
        {"}{", 12793, NULL},
        {"}{x}", 16287, "x"},
        {"{x", 11068, NULL},
        {"x{", 3596, NULL},
        {"", 0, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *k = cases[i].key, *h = cases[i].tag ? cases[i].tag : k;
        ck_assert_msg(slot_of(k) == cases[i].slot, "'%s': %u, want %u", k, slot_of(k), cases[i].slot);
        ck_assert_msg(slot_of(k) == (slotmap_crc16(h, strlen(h)) & 16383), "'%s' does not hash '%s'", k, h);
    }
    ck_assert_uint_eq(slot_of("{user1000}.following"), slot_of("{user1000}.followers"));
}
END_TEST

START_TEST(common_slot_of_keys)
{
    const char *same[] = {"{user1000}.following", "{user1000}.followers", "user1000"};
    size_t same_lens[] = {20, 20, 8};
    const char *spread[] = {"{user1000}.following", "foo"};
    size_t spread_lens[] = {20, 3};
    const char *tag_and_key[] = {"a{b}c", "b"};
    size_t tag_and_key_lens[] = {5, 1};

    ck_assert_int_eq(slotmap_common_slot(same, same_lens, 3), 3443);
    ck_assert_int_eq(slotmap_common_slot(same, same_lens, 1), 3443);
    ck_assert_int_eq(slotmap_common_slot(spread, spread_lens, 2), -1);
    ck_assert_int_eq(slotmap_common_slot(tag_and_key, tag_and_key_lens, 2), 3300);
    ck_assert_int_eq(slotmap_common_slot(NULL, NULL, 0), -2);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * CLUSTER SLOTS / CLUSTER SHARDS, real replies (cluster_replies.h says how each was made).
 * ------------------------------------------------------------------------------------------- */

START_TEST(init_is_empty)
{
    struct slotmap *m = map_new();
    ck_assert_int_eq(m->nnodes, 0);
    for (unsigned s = 0; s < SLOTMAP_SLOTS; s++) ck_assert_int_eq(slotmap_owner(m, s), -1);
    ck_assert_int_eq(slotmap_find_node(m, "127.0.0.1", 7000), -1);
    free(m);
}
END_TEST

START_TEST(slots_real_reply)
{
    struct slotmap *m = map_new();
    char err[256] = "";
    ck_assert_msg(slotmap_parse_slots(m, BYTES(slots_reply), "10.9.9.9", err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(m->nnodes, 3); /* primaries only: the replica 17004 is not a node of the map */
    owner_is(m, 0, 9, "127.0.0.1", 17003);
    owner_is(m, 10, 5460, "127.0.0.1", 17001);
    owner_is(m, 5461, 10922, "127.0.0.1", 17002); /* its hostname metadata (node2.example) is not used */
    owner_is(m, 10923, 16383, "127.0.0.1", 17003);
    ck_assert_int_eq(slotmap_owner(m, 0), slotmap_owner(m, 16383)); /* one node for both ranges */
    ck_assert_int_eq(slotmap_find_node(m, "127.0.0.1", 17004), -1);
    ck_assert_int_eq(slotmap_find_node(m, "127.0.0.1", 17002), slotmap_owner(m, 5461));
    ck_assert_int_eq(slotmap_owner(m, slot_of("foo")), slotmap_find_node(m, "127.0.0.1", 17003)); /* 12182 */
    free(m);
}
END_TEST

START_TEST(shards_real_reply_is_the_slots_map)
{
    struct slotmap *s = map_new(), *h = map_new();
    char err[256] = "";
    ck_assert_msg(slotmap_parse_slots(s, BYTES(slots_reply), NULL, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(slotmap_parse_shards(h, BYTES(shards_reply), 0, NULL, err, sizeof(err)) == 0, "%s", err);
    same_routes(s, h);
    owner_is(h, 5461, 10922, "127.0.0.1", 17002);                   /* endpoint (the ip here), not the hostname field */
    ck_assert_int_eq(slotmap_find_node(h, "127.0.0.1", 17004), -1); /* role replica */
    free(s);
    free(h);
}
END_TEST

START_TEST(hostname_endpoints)
{
    /* cluster-preferred-endpoint-type hostname: node2.example has a hostname; the others
     * answer "?" and carry their ip in the metadata (SLOTS) or the ip field (SHARDS) */
    struct slotmap *s = map_new(), *h = map_new();
    char err[256] = "";
    ck_assert_msg(slotmap_parse_slots(s, BYTES(slots_hostname_reply), "10.9.9.9", err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(slotmap_parse_shards(h, BYTES(shards_hostname_reply), 0, "10.9.9.9", err, sizeof(err)) == 0, "%s",
                  err);
    owner_is(s, 5461, 10922, "node2.example", 17002);
    owner_is(s, 10, 5460, "127.0.0.1", 17001);
    owner_is(s, 0, 9, "127.0.0.1", 17003);
    same_routes(s, h);
    free(s);
    free(h);
}
END_TEST

START_TEST(unknown_endpoints_use_the_asked_host)
{
    /* cluster-preferred-endpoint-type unknown-endpoint: SLOTS says null, SHARDS endpoint "";
     * the client is to use the address it asked, at the port given */
    struct slotmap *s = map_new(), *h = map_new();
    char err[256] = "";
    ck_assert_msg(slotmap_parse_slots(s, BYTES(slots_unknown_reply), "lb.example", err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(slotmap_parse_shards(h, BYTES(shards_unknown_reply), 0, "lb.example", err, sizeof(err)) == 0, "%s",
                  err);
    owner_is(s, 0, 9, "lb.example", 17003);
    owner_is(s, 10, 5460, "lb.example", 17001);
    owner_is(s, 5461, 10922, "lb.example", 17002);
    owner_is(s, 10923, 16383, "lb.example", 17003);
    same_routes(s, h);
    slots_fail(BYTES(slots_unknown_reply), NULL, "range 1: the node's address is unknown and no asked host was given");
    shards_fail(BYTES(shards_unknown_reply), 0, "", "shard 1: the node's address is unknown");
    free(s);
    free(h);
}
END_TEST

START_TEST(single_node_that_knows_no_ip)
{
    /* a one-node cluster never told its address: host "" (SLOTS), ip "" and endpoint "" (SHARDS) */
    struct slotmap *s = map_new(), *h = map_new();
    char err[256] = "";
    ck_assert_msg(slotmap_parse_slots(s, BYTES(slots_single_reply), "127.0.0.1", err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(slotmap_parse_shards(h, BYTES(shards_single_reply), 0, "127.0.0.1", err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_int_eq(s->nnodes, 1);
    owner_is(s, 0, 16383, "127.0.0.1", 17998);
    same_routes(s, h);
    free(s);
    free(h);
}
END_TEST

START_TEST(after_a_failover)
{
    /* 17001 was killed, its replica 17004 took its slots; SHARDS still lists 17001 as a
     * master (health fail) in a shard of its own with no slots: it is not routed to */
    struct slotmap *s = map_new(), *h = map_new();
    char err[256] = "";
    ck_assert_msg(slotmap_parse_slots(s, BYTES(slots_failover_reply), NULL, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(slotmap_parse_shards(h, BYTES(shards_failover_reply), 0, NULL, err, sizeof(err)) == 0, "%s", err);
    owner_is(s, 10, 5460, "127.0.0.1", 17004);
    same_routes(s, h);
    ck_assert_int_eq(slotmap_find_node(h, "127.0.0.1", 17001), -1);
    ck_assert_int_eq(h->nnodes, 3);
    free(s);
    free(h);
}
END_TEST

START_TEST(shards_tls_ports)
{
    /* tls-cluster yes with both ports: want_tls picks tls-port */
    struct slotmap *m = map_new();
    char err[256] = "";
    ck_assert_msg(slotmap_parse_shards(m, BYTES(shards_tls_reply), 1, NULL, err, sizeof(err)) == 0, "%s", err);
    owner_is(m, 0, 5460, "127.0.0.1", 17101);
    owner_is(m, 5461, 10922, "127.0.0.1", 17102);
    owner_is(m, 10923, 16383, "127.0.0.1", 17103);
    ck_assert_msg(slotmap_parse_shards(m, BYTES(shards_tls_reply), 0, NULL, err, sizeof(err)) == 0, "%s", err);
    owner_is(m, 0, 5460, "127.0.0.1", 17111);
    owner_is(m, 10923, 16383, "127.0.0.1", 17113);
    /* TLS only (port 0): no "port" field */
    ck_assert_msg(slotmap_parse_shards(m, BYTES(shards_tlsonly_reply), 1, NULL, err, sizeof(err)) == 0, "%s", err);
    owner_is(m, 0, 5460, "127.0.0.1", 17201);
    owner_is(m, 5461, 10922, "127.0.0.1", 17202);
    owner_is(m, 10923, 16383, "127.0.0.1", 17203);
    shards_fail(BYTES(shards_tlsonly_reply), 0, NULL, "shard 1: the primary has no port");
    /* a plain cluster has no tls-port */
    shards_fail(BYTES(shards_reply), 1, NULL, "shard 1: the primary has no tls-port");
    free(m);
}
END_TEST

START_TEST(ipv6_cluster)
{
    struct slotmap *s = map_new(), *h = map_new();
    char err[256] = "";
    ck_assert_msg(slotmap_parse_slots(s, BYTES(slots_ipv6_reply), NULL, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(slotmap_parse_shards(h, BYTES(shards_ipv6_reply), 0, NULL, err, sizeof(err)) == 0, "%s", err);
    owner_is(s, 0, 5460, "::1", 17301);
    owner_is(s, 5461, 10922, "::1", 17302);
    owner_is(s, 10923, 16383, "::1", 17303);
    same_routes(s, h);
    free(s);
    free(h);
}
END_TEST

START_TEST(parse_replaces_the_whole_map)
{
    struct slotmap *m = map_new();
    char err[256] = "";
    ck_assert_int_eq(slotmap_set_owner(m, 42, "10.0.0.1", 6379), 0);
    ck_assert_int_eq(slotmap_parse_slots(m, BYTES(slots_ipv6_reply), NULL, err, sizeof(err)), 0);
    ck_assert_int_eq(slotmap_find_node(m, "10.0.0.1", 6379), -1);
    owner_is(m, 42, 42, "::1", 17301);
    /* an empty map is a map: a cluster node with no slots assigned yet answers *0 */
    ck_assert_int_eq(slotmap_parse_slots(m, BYTES("*0\r\n"), NULL, err, sizeof(err)), 0);
    ck_assert_int_eq(m->nnodes, 0);
    for (unsigned s = 0; s < SLOTMAP_SLOTS; s++) ck_assert_int_eq(slotmap_owner(m, s), -1);
    ck_assert_int_eq(slotmap_parse_shards(m, BYTES("*0\r\n"), 0, NULL, err, sizeof(err)), 0);
    free(m);
}
END_TEST

START_TEST(uncovered_slots_stay_unserved)
{
    struct slotmap *m = map_new();
    struct w w = {.n = 0};
    char err[256] = "";
    arr(&w, 2);
    slots_range(&w, 100, 200, "10.0.0.1", 7000);
    slots_range(&w, 300, 300, "10.0.0.2", 7000);
    ck_assert_msg(slotmap_parse_slots(m, w.b, w.n, NULL, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(slotmap_owner(m, 99), -1);
    owner_is(m, 100, 200, "10.0.0.1", 7000);
    ck_assert_int_eq(slotmap_owner(m, 201), -1);
    owner_is(m, 300, 300, "10.0.0.2", 7000);
    ck_assert_int_eq(slotmap_owner(m, 16383), -1);
    free(m);
}
END_TEST

START_TEST(truncated_replies_fail_cleanly)
{
    /* every proper prefix of every real reply, in a buffer of exactly that size (ASan: no read past len) */
    static const struct {
        const char *bytes;
        size_t len;
        int shards;
    } replies[] = {
        {BYTES(slots_reply), 0},      {BYTES(shards_reply), 1},          {BYTES(slots_hostname_reply), 0},
        {BYTES(shards_tls_reply), 1}, {BYTES(shards_failover_reply), 1}, {BYTES(slots_ipv6_reply), 0},
    };
    struct slotmap *m = map_new();
    char err[256];
    for (size_t r = 0; r < sizeof(replies) / sizeof(replies[0]); r++) {
        for (size_t n = 0; n < replies[r].len; n++) {
            char *copy = malloc(n ? n : 1);
            memcpy(copy, replies[r].bytes, n);
            int rc = replies[r].shards ? slotmap_parse_shards(m, copy, n, 0, "h", err, sizeof(err))
                                       : slotmap_parse_slots(m, copy, n, "h", err, sizeof(err));
            ck_assert_msg(rc == -1, "reply %zu, prefix %zu parsed", r, n);
            ck_assert_msg(strstr(err, "not one whole RESP reply") != NULL, "%s", err);
            free(copy);
        }
        ck_assert_int_eq(m->nnodes, 0); /* never touched */
    }
    free(m);
}
END_TEST

START_TEST(error_replies_are_reported)
{
    /* a standalone redis-server 7.0.15's answer to both commands */
    slots_fail(BYTES("-ERR This instance has cluster support disabled\r\n"), NULL,
               "CLUSTER SLOTS: ERR This instance has cluster support disabled");
    shards_fail(BYTES("-ERR This instance has cluster support disabled\r\n"), 0, NULL,
                "CLUSTER SHARDS: ERR This instance has cluster support disabled");
    slots_fail(BYTES("-NOPERM this user has no permissions to run the 'cluster|slots' command\r\n"), NULL,
               "NOPERM this user");
}
END_TEST

START_TEST(malformed_slots_replies)
{
    struct w w;
    static const struct {
        const char *reply, *err;
    } cases[] = {
        {"+OK\r\n", "not an array"},
        {":1\r\n", "not an array"},
        {"*-1\r\n", "not an array"},
        {"*1\r\n:5\r\n", "range 1: not an array of start, end, primary"},
        {"*1\r\n*2\r\n:0\r\n:10\r\n", "range 1: not an array of start, end, primary"},
        {"*1\r\n*3\r\n$1\r\n0\r\n:10\r\n*2\r\n$1\r\nh\r\n:7000\r\n", "range 1: start and end must be integers"},
        {"*1\r\n*3\r\n:0\r\n:1\r\n$3\r\nabc\r\n", "range 1: the primary is not an array of host, port"},
        {"*1\r\n*3\r\n:0\r\n:1\r\n*1\r\n$1\r\nh\r\n", "range 1: the primary is not an array of host, port"},
        {"*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n:1\r\n:7000\r\n", "range 1: the primary's host is not a bulk string"},
        {"*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n$4\r\n7000\r\n", "range 1: the primary's port is not an integer"},
        /* "?" with metadata that is no map */
        {"*1\r\n*3\r\n:0\r\n:1\r\n*4\r\n$1\r\n?\r\n:7000\r\n$1\r\ni\r\n*1\r\n$2\r\nip\r\n",
         "range 1: malformed node entry"},
        {"*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:7000\r\n", "range 1: bad slot range 0-16384"},
        {"*1\r\n*3\r\n:-1\r\n:5\r\n*2\r\n$1\r\nh\r\n:7000\r\n", "range 1: bad slot range -1-5"},
        {"*1\r\n*3\r\n:10\r\n:5\r\n*2\r\n$1\r\nh\r\n:7000\r\n", "range 1: bad slot range 10-5"},
        {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\nh\r\n:0\r\n", "range 1: bad port 0"},
        {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\nh\r\n:65536\r\n", "range 1: bad port 65536"},
        {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$3\r\na b\r\n:7000\r\n", "range 1: host has a control or space byte"},
        {"*2\r\n*3\r\n:0\r\n:100\r\n*2\r\n$1\r\nh\r\n:7000\r\n*3\r\n:100\r\n:200\r\n*2\r\n$1\r\ni\r\n:7000\r\n",
         "range 2: slot 100 is in two ranges"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        slots_fail(cases[i].reply, strlen(cases[i].reply), "asked", cases[i].err);

    /* framing: a prefix, or a second reply after the first */
    slots_fail(slots_reply, sizeof(slots_reply) - 2, NULL, "not one whole RESP reply");
    w.n = 0;
    put(&w, "%s+OK\r\n", slots_reply);
    slots_fail(w.b, w.n, NULL, "not one whole RESP reply");
    slots_fail("", 0, NULL, "not one whole RESP reply");

    /* a host longer than the map keeps */
    char host[SLOTMAP_HOST_MAX + 1];
    memset(host, 'h', SLOTMAP_HOST_MAX);
    host[SLOTMAP_HOST_MAX] = '\0';
    w.n = 0;
    arr(&w, 1);
    slots_range(&w, 0, 1, host, 7000);
    slots_fail(w.b, w.n, NULL, "range 1: host of 256 bytes is too long");
    host[SLOTMAP_HOST_MAX - 1] = '\0'; /* 255 bytes fit */
    struct slotmap *m = map_new();
    char err[256];
    w.n = 0;
    arr(&w, 1);
    slots_range(&w, 0, 1, host, 7000);
    ck_assert_msg(slotmap_parse_slots(m, w.b, w.n, NULL, err, sizeof(err)) == 0, "%s", err);
    owner_is(m, 0, 1, host, 7000);
    free(m);
}
END_TEST

START_TEST(too_many_primaries)
{
    struct w w = {.n = 0};
    struct slotmap *m = map_new();
    char err[256];
    arr(&w, SLOTMAP_MAX_NODES + 1);
    for (int i = 0; i <= SLOTMAP_MAX_NODES; i++) slots_range(&w, i, i, "10.0.0.1", 7000 + i);
    slots_fail(w.b, w.n, NULL, "range 129: more than 128 primaries");
    w.n = 0; /* 128 fit */
    arr(&w, SLOTMAP_MAX_NODES);
    for (int i = 0; i < SLOTMAP_MAX_NODES; i++) slots_range(&w, i, i, "10.0.0.1", 7000 + i);
    ck_assert_msg(slotmap_parse_slots(m, w.b, w.n, NULL, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(m->nnodes, SLOTMAP_MAX_NODES);
    owner_is(m, 127, 127, "10.0.0.1", 7127);
    free(m);
}
END_TEST

START_TEST(small_error_buffers)
{
    struct slotmap *m = map_new();
    char err[8];
    memset(err, 'x', sizeof(err));
    ck_assert_int_eq(slotmap_parse_slots(m, BYTES("+OK\r\n"), NULL, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "CLUSTER"); /* cut, NUL-terminated */
    ck_assert_int_eq(slotmap_parse_slots(m, BYTES("+OK\r\n"), NULL, err, 0), -1);
    ck_assert_int_eq(slotmap_parse_shards(m, BYTES("+OK\r\n"), 0, NULL, NULL, 0), -1);
    free(m);
}
END_TEST

START_TEST(malformed_shards_replies)
{
    static const struct {
        const char *reply, *err;
    } cases[] = {
        {"+OK\r\n", "not an array"},
        {"*1\r\n*3\r\n$5\r\nslots\r\n*0\r\n$5\r\nnodes\r\n", "shard 1: not a map (an array of name, value pairs)"},
        {"*1\r\n$5\r\nslots\r\n", "shard 1: not a map"},
        {"*1\r\n*2\r\n:1\r\n*0\r\n", "shard 1: a field name is not a bulk string"},
        {"*1\r\n*2\r\n$5\r\nslots\r\n*1\r\n:0\r\n", "shard 1: slots is not an array of start, end pairs"},
        {"*1\r\n*2\r\n$5\r\nslots\r\n$1\r\n0\r\n", "shard 1: slots is not an array of start, end pairs"},
        {"*1\r\n*2\r\n$5\r\nnodes\r\n$1\r\n0\r\n", "shard 1: nodes is not an array"},
        {"*1\r\n*2\r\n$5\r\nnodes\r\n*1\r\n*1\r\n$4\r\nrole\r\n", "shard 1: node 1 is not a well-formed map"},
        {"*1\r\n*2\r\n$5\r\nnodes\r\n*1\r\n*2\r\n$4\r\nport\r\n$4\r\n7000\r\n",
         "shard 1: node 1 is not a well-formed map"},
        {"*1\r\n*2\r\n$5\r\nnodes\r\n*1\r\n*2\r\n$4\r\nrole\r\n:1\r\n", "shard 1: node 1 is not a well-formed map"},
        {"*1\r\n*2\r\n$5\r\nnodes\r\n*0\r\n", "shard 1: no slots field"},
        {"*1\r\n*2\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5\r\n", "shard 1: no node with role master"},
        {"*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n$1\r\n0\r\n:5\r\n$5\r\nnodes\r\n*1\r\n*6\r\n$4\r\nport\r\n:7000\r\n$"
         "2\r\nip\r\n"
         "$1\r\nh\r\n$4\r\nrole\r\n$6\r\nmaster\r\n",
         "shard 1: slots must be integers"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        shards_fail(cases[i].reply, strlen(cases[i].reply), 0, "asked", cases[i].err);

    struct w w = {.n = 0}; /* only a replica serves the slots */
    arr(&w, 1);
    shard_head(&w, 0, 5, 1);
    shard_node(&w, 7000, "10.0.0.1", "10.0.0.1", "replica", "online");
    shards_fail(w.b, w.n, 0, NULL, "shard 1: no node with role master");

    w.n = 0; /* two shards claim slot 5 */
    arr(&w, 2);
    shard_head(&w, 0, 5, 1);
    shard_node(&w, 7000, "10.0.0.1", "10.0.0.1", "master", "online");
    shard_head(&w, 5, 9, 1);
    shard_node(&w, 7001, "10.0.0.1", "10.0.0.1", "master", "online");
    shards_fail(w.b, w.n, 0, NULL, "shard 2: slot 5 is in two ranges");

    w.n = 0;
    arr(&w, 1);
    shard_head(&w, 0, 16384, 1);
    shard_node(&w, 7000, "10.0.0.1", "10.0.0.1", "master", "online");
    shards_fail(w.b, w.n, 0, NULL, "shard 1: bad slot range 0-16384");

    w.n = 0;
    arr(&w, 1);
    shard_head(&w, 0, 1, 1);
    shard_node(&w, 70000, "10.0.0.1", "10.0.0.1", "master", "online");
    shards_fail(w.b, w.n, 0, NULL, "shard 1: bad port 70000");
}
END_TEST

START_TEST(shards_primary_and_address_choice)
{
    struct slotmap *m = map_new();
    struct w w = {.n = 0};
    char err[256] = "";

    /* two masters in one shard (Redis 7.2 keeps a failed old primary in its shard): the online one */
    arr(&w, 1);
    shard_head(&w, 0, 16383, 3);
    shard_node(&w, 7000, "10.0.0.1", "10.0.0.1", "master", "fail");
    shard_node(&w, 7001, "10.0.0.2", "10.0.0.2", "replica", "online");
    shard_node(&w, 7002, "10.0.0.3", "10.0.0.3", "master", "online");
    ck_assert_msg(slotmap_parse_shards(m, w.b, w.n, 0, NULL, err, sizeof(err)) == 0, "%s", err);
    owner_is(m, 0, 16383, "10.0.0.3", 7002);
    ck_assert_int_eq(m->nnodes, 1);

    w.n = 0; /* none online: the first master */
    arr(&w, 1);
    shard_head(&w, 0, 16383, 2);
    shard_node(&w, 7000, "10.0.0.1", "10.0.0.1", "master", "loading");
    shard_node(&w, 7002, "10.0.0.3", "10.0.0.3", "master", "fail");
    ck_assert_msg(slotmap_parse_shards(m, w.b, w.n, 0, NULL, err, sizeof(err)) == 0, "%s", err);
    owner_is(m, 0, 16383, "10.0.0.1", 7000);

    w.n = 0; /* endpoint "?" -> ip; endpoint absent -> ip; nothing usable -> asked host */
    arr(&w, 3);
    shard_head(&w, 0, 9, 1);
    shard_node(&w, 7000, "10.0.0.1", "?", "master", "online");
    shard_head(&w, 10, 19, 1);
    arr(&w, 6);
    bulk(&w, "ip");
    bulk(&w, "10.0.0.2");
    bulk(&w, "port");
    num(&w, 7001);
    bulk(&w, "role");
    bulk(&w, "master");
    shard_head(&w, 20, 29, 1);
    shard_node(&w, 7002, "?", "?", "master", "online");
    ck_assert_msg(slotmap_parse_shards(m, w.b, w.n, 0, "seed.example", err, sizeof(err)) == 0, "%s", err);
    owner_is(m, 0, 9, "10.0.0.1", 7000);
    owner_is(m, 10, 19, "10.0.0.2", 7001);
    owner_is(m, 20, 29, "seed.example", 7002);
    ck_assert_int_eq(slotmap_owner(m, 30), -1);

    w.n = 0; /* a shard without slots needs no usable primary (none here, or one without the port asked) */
    arr(&w, 3);
    arr(&w, 4);
    bulk(&w, "slots");
    arr(&w, 0);
    bulk(&w, "nodes");
    arr(&w, 1);
    shard_node(&w, 7000, "10.0.0.1", "10.0.0.1", "replica", "online");
    arr(&w, 4);
    bulk(&w, "slots");
    arr(&w, 0);
    bulk(&w, "nodes");
    arr(&w, 1);
    shard_node(&w, 7001, "10.0.0.2", "10.0.0.2", "master", "fail");
    shard_head(&w, 0, 16383, 1);
    arr(&w, 8);
    bulk(&w, "tls-port");
    num(&w, 7102);
    bulk(&w, "endpoint");
    bulk(&w, "10.0.0.3");
    bulk(&w, "role");
    bulk(&w, "master");
    bulk(&w, "health");
    bulk(&w, "online");
    ck_assert_msg(slotmap_parse_shards(m, w.b, w.n, 1, NULL, err, sizeof(err)) == 0, "%s", err);
    owner_is(m, 0, 16383, "10.0.0.3", 7102);
    ck_assert_int_eq(m->nnodes, 1);

    w.n = 0; /* fields in another order, fields slotmap does not know, several ranges */
    arr(&w, 1);
    arr(&w, 6);
    bulk(&w, "nodes");
    arr(&w, 1);
    shard_node(&w, 7000, "10.0.0.1", "db1.example", "master", "online");
    bulk(&w, "shard-id");
    bulk(&w, "0123456789abcdef");
    bulk(&w, "slots");
    arr(&w, 4);
    num(&w, 0);
    num(&w, 0);
    num(&w, 16383);
    num(&w, 16383);
    ck_assert_msg(slotmap_parse_shards(m, w.b, w.n, 0, NULL, err, sizeof(err)) == 0, "%s", err);
    owner_is(m, 0, 0, "db1.example", 7000);
    owner_is(m, 16383, 16383, "db1.example", 7000);
    ck_assert_int_eq(slotmap_owner(m, 1), -1);
    free(m);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * MOVED / ASK, TRYAGAIN / CLUSTERDOWN, set_owner.
 * ------------------------------------------------------------------------------------------- */

static void redirect_is(const char *reply, enum slotmap_redirect_kind kind, unsigned slot, const char *host, int port)
{
    struct slotmap_redirect r;
    memset(&r, 0x55, sizeof(r));
    ck_assert_msg(slotmap_parse_redirect(reply, strlen(reply), &r) == 1, "'%s' not a redirect", reply);
    ck_assert_int_eq(r.kind, kind);
    ck_assert_uint_eq(r.slot, slot);
    ck_assert_str_eq(r.host, host);
    ck_assert_int_eq(r.port, port);
}

START_TEST(redirects)
{
    redirect_is("-MOVED 3999 127.0.0.1:6381\r\n", SLOTMAP_MOVED, 3999, "127.0.0.1", 6381);
    redirect_is("-ASK 3999 [::1]:6381\r\n", SLOTMAP_ASK, 3999, "::1", 6381);
    /* as real nodes sent them while this test was written */
    redirect_is("-MOVED 12182 127.0.0.1:17003\r\n", SLOTMAP_MOVED, 12182, "127.0.0.1", 17003);
    redirect_is("-ASK 866 127.0.0.1:17002\r\n", SLOTMAP_ASK, 866, "127.0.0.1", 17002);
    redirect_is("-MOVED 12182 ::1:17303\r\n", SLOTMAP_MOVED, 12182, "::1", 17303); /* bound to ::1 */
    redirect_is("-MOVED 12182 ?:17003\r\n", SLOTMAP_MOVED, 12182, "", 17003);      /* hostname type, none set */
    redirect_is("-MOVED 12182 :17003\r\n", SLOTMAP_MOVED, 12182, "", 17003);       /* unknown-endpoint */
    /* other spellings */
    redirect_is("-MOVED 0 node2.example:7000\r\n", SLOTMAP_MOVED, 0, "node2.example", 7000);
    redirect_is("-MOVED 16383 [2001:db8::7]:65535\r\n", SLOTMAP_MOVED, 16383, "2001:db8::7", 65535);
    redirect_is("-ASK 1 fe80::1:2:3\r\n", SLOTMAP_ASK, 1, "fe80::1:2", 3); /* the last ':' ends the host */
    redirect_is("-ASK 1 2001:db8::7:1\r\n", SLOTMAP_ASK, 1, "2001:db8::7", 1);
}
END_TEST

START_TEST(not_redirects)
{
    static const char *const cases[] = {
        "",
        "+OK\r\n",
        "$5\r\nMOVED\r\n",
        "-ERR MOVED 1 h:1\r\n",
        "-moved 1 h:1\r\n",
        "-MOVEDX 1 h:1\r\n",
        "-MOVED\r\n",
        "-MOVED \r\n",
        "-MOVED 1\r\n",
        "-MOVED 1 \r\n",
        "-MOVED 1 h:1",          /* not framed */
        "-MOVED 1 h:1\n",        /* LF only */
        "-MOVED 1 h:1\r\nX\r\n", /* two lines */
        "-MOVED  1 h:1\r\n",     /* two spaces */
        "-MOVED x h:1\r\n",
        "-MOVED 01 h:1\r\n",
        "-MOVED -1 h:1\r\n",
        "-MOVED 16384 h:1\r\n",
        "-MOVED 99999999999999999999 h:1\r\n",
        "-MOVED 1 h\r\n", /* no port */
        "-MOVED 1 h:\r\n",
        "-MOVED 1 h:0\r\n",
        "-MOVED 1 h:65536\r\n",
        "-MOVED 1 h:-5\r\n",
        "-MOVED 1 h:1x\r\n",
        "-MOVED 1 h:1 extra\r\n",
        "-MOVED 1 h h:1\r\n",
        "-MOVED 1 h\th:1\r\n",
        "-ASK 1 [::1:6381\r\n",
        "-ASK 1 []:6381\r\n",
        "-ASK 1 [::1]6381\r\n",
        "-ASK 1 [::1]:\r\n",
        "-ASK 1 [::1]]:6381\r\n",
        "-ASK 1 [[::1]:6381\r\n",
        "-ASK 1 a]:6381\r\n",
    };
    struct slotmap_redirect r;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(slotmap_parse_redirect(cases[i], strlen(cases[i]), &r) == 0, "'%s' taken", cases[i]);

    /* a host that does not fit the struct is no redirect; the longest that does is one */
    char buf[SLOTMAP_HOST_MAX + 32], host[SLOTMAP_HOST_MAX + 1];
    memset(host, 'h', SLOTMAP_HOST_MAX);
    host[SLOTMAP_HOST_MAX] = '\0';
    snprintf(buf, sizeof(buf), "-MOVED 1 %s:7000\r\n", host);
    ck_assert_int_eq(slotmap_parse_redirect(buf, strlen(buf), &r), 0);
    host[SLOTMAP_HOST_MAX - 1] = '\0';
    snprintf(buf, sizeof(buf), "-MOVED 1 %s:7000\r\n", host);
    redirect_is(buf, SLOTMAP_MOVED, 1, host, 7000);
}
END_TEST

START_TEST(set_owner_adds_and_reuses_nodes)
{
    struct slotmap *m = map_new();
    char err[256];
    ck_assert_int_eq(slotmap_set_owner(m, 5, "127.0.0.1", 7000), 0);
    ck_assert_int_eq(slotmap_set_owner(m, 6, "127.0.0.1", 7000), 0);
    ck_assert_int_eq(slotmap_set_owner(m, 7, "127.0.0.1", 7001), 1); /* another port, another node */
    ck_assert_int_eq(slotmap_set_owner(m, 5, "127.0.0.1", 7001), 1); /* moved on */
    ck_assert_int_eq(m->nnodes, 2);
    ck_assert_int_eq(slotmap_owner(m, 5), 1);
    ck_assert_int_eq(slotmap_owner(m, 6), 0);
    ck_assert_int_eq(slotmap_owner(m, 4), -1);
    ck_assert_int_eq(slotmap_find_node(m, "127.0.0.1", 7001), 1);
    ck_assert_int_eq(slotmap_find_node(m, "127.0.0.10", 7001), -1);
    ck_assert_int_eq(slotmap_find_node(m, "127.0.0", 7001), -1);

    /* a MOVED on a parsed map: the slot's new owner is a node the map already has */
    struct slotmap_redirect r;
    ck_assert_int_eq(slotmap_parse_slots(m, BYTES(slots_reply), NULL, err, sizeof(err)), 0);
    ck_assert_int_eq(slotmap_parse_redirect(BYTES("-MOVED 3999 127.0.0.1:17002\r\n"), &r), 1);
    ck_assert_int_eq(slotmap_set_owner(m, r.slot, r.host, r.port), slotmap_find_node(m, "127.0.0.1", 17002));
    owner_is(m, 3998, 3998, "127.0.0.1", 17001);
    owner_is(m, 3999, 3999, "127.0.0.1", 17002);
    owner_is(m, 4000, 4000, "127.0.0.1", 17001);
    ck_assert_int_eq(m->nnodes, 3);
    /* ... or one it learns from the redirect */
    ck_assert_int_eq(slotmap_set_owner(m, 4000, "127.0.0.1", 17005), 3);
    owner_is(m, 4000, 4000, "127.0.0.1", 17005);
    free(m);
}
END_TEST

START_TEST(set_owner_table_full)
{
    struct slotmap *m = map_new(), *before = map_new();
    for (int i = 0; i < SLOTMAP_MAX_NODES; i++)
        ck_assert_int_eq(slotmap_set_owner(m, (unsigned)i, "10.0.0.1", 1 + i), i);
    *before = *m;
    ck_assert_int_eq(slotmap_set_owner(m, 500, "10.0.0.1", 9999), -1);
    ck_assert(memcmp(m, before, sizeof(*m)) == 0);
    ck_assert_int_eq(slotmap_owner(m, 500), -1);
    /* a node the table has still takes slots */
    ck_assert_int_eq(slotmap_set_owner(m, 500, "10.0.0.1", 128), 127);
    owner_is(m, 500, 500, "10.0.0.1", 128);

    /* a host that does not fit */
    char host[SLOTMAP_HOST_MAX + 1];
    memset(host, 'h', SLOTMAP_HOST_MAX);
    host[SLOTMAP_HOST_MAX] = '\0';
    slotmap_init(m);
    ck_assert_int_eq(slotmap_set_owner(m, 1, host, 7000), -1);
    ck_assert_int_eq(m->nnodes, 0);
    ck_assert_int_eq(slotmap_owner(m, 1), -1);
    free(m);
    free(before);
}
END_TEST

/* The SCAN cursor over a cluster's primaries: rank in the low bits, the node's cursor above;
 * a node's end moves to the next rank's start, the last node's end is 0; a node cursor too
 * large to carry is refused. Every cursor split gives back what was joined. */
START_TEST(scan_cursor_over_nodes)
{
    unsigned rank;
    uint64_t node, next;
    slotmap_scan_cursor_split(0, &rank, &node);
    ck_assert_uint_eq(rank, 0);
    ck_assert(node == 0);
    ck_assert_int_eq(slotmap_scan_cursor_next(0, 0, 3, &next), 0); /* node 0 done: node 1 */
    ck_assert(next == 1);
    slotmap_scan_cursor_split(next, &rank, &node);
    ck_assert_uint_eq(rank, 1);
    ck_assert(node == 0);
    ck_assert_int_eq(slotmap_scan_cursor_next(0, 2, 3, &next), 0); /* the last node done: the end */
    ck_assert(next == 0);
    ck_assert_int_eq(slotmap_scan_cursor_next(0, 0, 1, &next), 0);
    ck_assert(next == 0);
    static const uint64_t cursors[] = {1, 2, 96, 12345, 1ull << 40, (1ull << 57) - 1};
    for (size_t i = 0; i < sizeof(cursors) / sizeof(cursors[0]); i++)
        for (unsigned r = 0; r < SLOTMAP_MAX_NODES; r += 37) {
            ck_assert_int_eq(slotmap_scan_cursor_next(cursors[i], r, SLOTMAP_MAX_NODES, &next), 0);
            ck_assert(next != 0);
            slotmap_scan_cursor_split(next, &rank, &node);
            ck_assert_uint_eq(rank, r);
            ck_assert(node == cursors[i]);
        }
    ck_assert_int_eq(slotmap_scan_cursor_next(1ull << 57, 0, 3, &next), -1);
    ck_assert_int_eq(slotmap_scan_cursor_next(UINT64_MAX, 2, 3, &next), -1);
}
END_TEST

static Suite *slotmap_suite(void)
{
    Suite *s = suite_create("slotmap");
    TCase *keys = tcase_create("keys");
    tcase_add_test(keys, crc16_known_vector);
    tcase_add_test(keys, crc16_sliced_matches_bitwise);
    tcase_add_test(keys, key_slots_of_real_keys);
    tcase_add_test(keys, hash_tags);
    tcase_add_test(keys, common_slot_of_keys);
    suite_add_tcase(s, keys);

    TCase *parse = tcase_create("parse");
    tcase_add_test(parse, init_is_empty);
    tcase_add_test(parse, slots_real_reply);
    tcase_add_test(parse, shards_real_reply_is_the_slots_map);
    tcase_add_test(parse, hostname_endpoints);
    tcase_add_test(parse, unknown_endpoints_use_the_asked_host);
    tcase_add_test(parse, single_node_that_knows_no_ip);
    tcase_add_test(parse, after_a_failover);
    tcase_add_test(parse, shards_tls_ports);
    tcase_add_test(parse, ipv6_cluster);
    tcase_add_test(parse, parse_replaces_the_whole_map);
    tcase_add_test(parse, uncovered_slots_stay_unserved);
    tcase_add_test(parse, truncated_replies_fail_cleanly);
    tcase_add_test(parse, error_replies_are_reported);
    tcase_add_test(parse, malformed_slots_replies);
    tcase_add_test(parse, too_many_primaries);
    tcase_add_test(parse, small_error_buffers);
    tcase_add_test(parse, malformed_shards_replies);
    tcase_add_test(parse, shards_primary_and_address_choice);
    suite_add_tcase(s, parse);

    TCase *redir = tcase_create("redirects");
    tcase_add_test(redir, redirects);
    tcase_add_test(redir, not_redirects);
    tcase_add_test(redir, set_owner_adds_and_reuses_nodes);
    tcase_add_test(redir, set_owner_table_full);
    tcase_add_test(redir, scan_cursor_over_nodes);
    suite_add_tcase(s, redir);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(slotmap_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
