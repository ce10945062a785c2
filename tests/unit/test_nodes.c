/* test_nodes.c: unit tests for nodes.c's table without a loop: a single server owns every slot, a cluster map's adoption and entry reuse, a moved Sentinel primary, a full table. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_replies.h"
#include "config.h"
#include "loop.h"
#include "nodes.h"

#define BYTES(a) (a), (sizeof(a) - 1)

/* ---------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------- */

/* A worker with one instance, `cache` at 127.0.0.1:6402: enough for a table (no loop, no
 * connection is ever opened: these tests never ask for one). */
struct fixture {
    struct config cfg;
    struct worker w;
};

static struct fixture *fixture_new(void)
{
    struct fixture *f = calloc(1, sizeof(*f));
    ck_assert_ptr_nonnull(f);
    f->cfg.ninstances = 1;
    f->cfg.max_pinned = 64;
    f->cfg.instances[0].name = "cache";
    f->cfg.instances[0].host = "127.0.0.1";
    f->cfg.instances[0].port = 6402;
    f->w.cfg = &f->cfg;
    return f;
}

/* Every slot of t is owned by the node at host:port. */
static void all_owned_by(const struct nodes *t, const char *host, int port)
{
    for (unsigned s = 0; s < SLOTMAP_SLOTS; s++) {
        int k = t->map.owner[s];
        ck_assert_msg(k >= 0 && k < t->map.nnodes, "slot %u: no owner (%d)", s, k);
        ck_assert_msg(strcmp(t->map.nodes[k].host, host) == 0 && t->map.nodes[k].port == port,
                      "slot %u: %s:%d, want %s:%d", s, t->map.nodes[k].host, t->map.nodes[k].port, host, port);
    }
}

/* "10.0.<i/250>.<i%250>": the i-th distinct address. */
static const char *addr_of(int i, char *buf, size_t size)
{
    snprintf(buf, size, "10.0.%d.%d", i / 250, i % 250);
    return buf;
}

/* ---------------------------------------------------------------------------------------------
 * A single server
 * ------------------------------------------------------------------------------------------- */

START_TEST(test_one_owns_every_slot)
{
    struct fixture *f = fixture_new();
    struct nodes *t = nodes_new(&f->w, 0, NODES_ONE);
    ck_assert_int_eq(t->map.nnodes, 1);
    all_owned_by(t, "127.0.0.1", 6402);
    f->w.nodes[0] = t;
    ck_assert(!nodes_may_move(&f->w, 0));
    ck_assert(!nodes_follow_failover(&f->w, 0));
    ck_assert(!nodes_sharded(&f->w, 0));
    ck_assert_int_eq(nodes_owner(&f->w, 0, 1234), -1); /* nothing to compare on one server */
    int slots[4];
    ck_assert_int_eq(nodes_primaries(&f->w, 0, slots, 4), 0);
    /* never refreshed, never moved: a MOVED names no other node */
    nodes_moved(&f->w, 0, 42, "10.9.9.9", 7000);
    ck_assert_int_eq(t->map.nnodes, 1);
    all_owned_by(t, "127.0.0.1", 6402);
    nodes_refresh(&f->w, 0);
    ck_assert_int_eq(t->refreshing, 0);
    nodes_delete(t);
    free(f);
}
END_TEST

/* A WAIT's question (client.c): does the node a write went to still serve a slot? After a
 * failover the old primary owns none (its write may be lost: WAIT answers 0); after one slot
 * moved by a reshard the old owner still serves its others (WAIT goes to the new owner). */
START_TEST(test_owner_id_after_failover_and_move)
{
    struct fixture *f = fixture_new();
    struct nodes *t = nodes_new(&f->w, 0, NODES_MAP);
    f->w.nodes[0] = t;
    char err[200];
    ck_assert_int_eq(slotmap_parse_slots(t->parsed, BYTES(slots_reply), "127.0.0.1", err, sizeof err), 0);
    nodes_adopt_map(t, t->parsed, -1);
    uint64_t before[SLOTMAP_SLOTS / 1024];
    for (unsigned k = 0; k < SLOTMAP_SLOTS / 1024; k++) {
        before[k] = nodes_owner_id(&f->w, 0, (int)(k * 1024));
        ck_assert(before[k] != 0 && before[k] != ~(uint64_t)0);
        ck_assert(nodes_id_serves(&f->w, 0, before[k]));
    }
    /* one slot moved to another primary (a reshard): its old owner still serves its others */
    unsigned moved = 0;
    int other = -1;
    for (unsigned s2 = 0; s2 < SLOTMAP_SLOTS && other < 0; s2++)
        if (t->parsed->owner[s2] >= 0 && t->parsed->owner[s2] != t->parsed->owner[0]) other = t->parsed->owner[s2];
    ck_assert_int_ge(other, 0);
    t->parsed->owner[moved] = (int16_t)other;
    nodes_adopt_map(t, t->parsed, 0);
    ck_assert(nodes_owner_id(&f->w, 0, (int)moved) != before[0]);
    ck_assert(nodes_id_serves(&f->w, 0, before[0]));
    /* a failover: every node that lost all its slots serves none any more */
    ck_assert_int_eq(slotmap_parse_slots(t->parsed, BYTES(slots_failover_reply), "127.0.0.1", err, sizeof err), 0);
    nodes_adopt_map(t, t->parsed, -1);
    int gone = 0;
    for (unsigned k = 0; k < SLOTMAP_SLOTS / 1024; k++)
        if (nodes_owner_id(&f->w, 0, (int)(k * 1024)) != before[k]) {
            ck_assert(!nodes_id_serves(&f->w, 0, before[k]));
            gone++;
        }
    ck_assert_int_gt(gone, 0); /* the failover reply moves some range to a new primary */
    ck_assert(!nodes_id_serves(&f->w, 0, 12345));
    nodes_delete(t);
    /* a single server: 0, and it always serves */
    struct nodes *one = nodes_new(&f->w, 0, NODES_ONE);
    f->w.nodes[0] = one;
    ck_assert(nodes_owner_id(&f->w, 0, 7) == 0);
    ck_assert(nodes_id_serves(&f->w, 0, 0));
    nodes_delete(one);
    free(f);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * A cluster map
 * ------------------------------------------------------------------------------------------- */

START_TEST(test_map_adopted_and_entries_kept)
{
    struct fixture *f = fixture_new();
    struct nodes *t = nodes_new(&f->w, 0, NODES_MAP);
    f->w.nodes[0] = t;
    ck_assert(nodes_may_move(&f->w, 0) && nodes_sharded(&f->w, 0) && !nodes_follow_failover(&f->w, 0));
    char err[200];
    ck_assert_int_eq(slotmap_parse_slots(t->parsed, BYTES(slots_reply), "127.0.0.1", err, sizeof err), 0);
    nodes_adopt_map(t, t->parsed, -1);
    ck_assert_int_eq(t->map.nnodes, t->parsed->nnodes);
    for (unsigned s = 0; s < SLOTMAP_SLOTS; s++) {
        int k = t->map.owner[s], p = t->parsed->owner[s];
        ck_assert_int_eq(k >= 0, p >= 0);
        if (k < 0) continue;
        ck_assert_str_eq(t->map.nodes[k].host, t->parsed->nodes[p].host);
        ck_assert_int_eq(t->map.nodes[k].port, t->parsed->nodes[p].port);
    }
    /* the same map again: every node keeps its entry (they index the pools) */
    struct slotmap_node before[SLOTMAP_MAX_NODES];
    int n = t->map.nnodes;
    memcpy(before, t->map.nodes, sizeof(before));
    nodes_adopt_map(t, t->parsed, 0);
    ck_assert_int_eq(t->map.nnodes, n);
    ck_assert_int_eq(memcmp(before, t->map.nodes, sizeof(struct slotmap_node) * (size_t)n), 0);
    /* a failover: the new primary gets a new entry, the old one keeps its entry with no slot */
    ck_assert_int_eq(slotmap_parse_slots(t->parsed, BYTES(slots_failover_reply), "127.0.0.1", err, sizeof err), 0);
    nodes_adopt_map(t, t->parsed, -1);
    ck_assert_int_ge(t->map.nnodes, n);
    for (int k = 0; k < n; k++) {
        ck_assert_str_eq(t->map.nodes[k].host, before[k].host);
        ck_assert_int_eq(t->map.nodes[k].port, before[k].port);
    }
    /* nodes_primaries: one slot per primary, ordered by address */
    int slots[SLOTMAP_MAX_NODES];
    int np = nodes_primaries(&f->w, 0, slots, SLOTMAP_MAX_NODES);
    ck_assert_int_eq(np, 3);
    for (int i = 1; i < np; i++) {
        const char *h0, *h1;
        int p0, p1;
        nodes_address(&f->w, 0, nodes_owner(&f->w, 0, slots[i - 1]), &h0, &p0);
        nodes_address(&f->w, 0, nodes_owner(&f->w, 0, slots[i]), &h1, &p1);
        ck_assert(strcmp(h0, h1) < 0 || (strcmp(h0, h1) == 0 && p0 < p1));
    }
    nodes_delete(t);
    free(f);
}
END_TEST

/* A full table: a new address takes the entry of a node that left the map (nothing open on it);
 * when every entry owns a slot, the address is left out, counted, and the map keeps its owners. */
START_TEST(test_full_table_reuses_then_counts)
{
    struct fixture *f = fixture_new();
    struct nodes *t = nodes_new(&f->w, 0, NODES_MAP);
    char host[32];
    for (int i = 0; i < SLOTMAP_MAX_NODES; i++) {
        int k = nodes_index(t, addr_of(i, host, sizeof host), 7000, NULL);
        ck_assert_int_eq(k, i);
        t->map.owner[i] = (int16_t)k; /* each owns one slot */
    }
    ck_assert_int_eq(t->map.nnodes, SLOTMAP_MAX_NODES);
    /* every entry owns a slot: none free, counted each time, logged once */
    ck_assert_int_eq(nodes_index(t, "10.9.0.1", 7000, NULL), -1);
    ck_assert_int_eq(nodes_index(t, "10.9.0.2", 7000, NULL), -1);
    ck_assert_uint_eq(f->w.stats.cluster_nodes_full, 2);
    ck_assert_int_eq(t->full_logged, 1);
    /* node 5 leaves the map: its entry takes the next address; kept entries are not taken */
    uint64_t left_id = t->map.nodes[5].id;
    t->map.owner[5] = -1;
    unsigned char keep[SLOTMAP_MAX_NODES] = {0};
    keep[5] = 1;
    ck_assert_int_eq(nodes_index(t, "10.9.0.1", 7000, keep), -1);
    ck_assert_int_eq(nodes_index(t, "10.9.0.1", 7000, NULL), 5);
    ck_assert_str_eq(t->map.nodes[5].host, "10.9.0.1");
    /* the reused entry's id is its new address's (a WAIT compares ids: nodes_owner_id) */
    struct slotmap_node fresh;
    slotmap_node_set(&fresh, BYTES("10.9.0.1"), 7000);
    ck_assert(t->map.nodes[5].id == fresh.id && fresh.id != left_id);
    t->map.owner[5] = 5;
    f->w.nodes[0] = t;
    ck_assert(nodes_owner_id(&f->w, 0, 5) == fresh.id);
    ck_assert(nodes_id_serves(&f->w, 0, fresh.id) && !nodes_id_serves(&f->w, 0, left_id));
    ck_assert_int_eq(t->full_logged, 0);
    ck_assert_int_eq(nodes_index(t, "10.9.0.1", 7000, NULL), 5); /* found, not added again */
    ck_assert_uint_eq(f->w.stats.cluster_nodes_full, 3);         /* the kept entry's attempt counted */
    nodes_delete(t);
    free(f);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * A sentinel instance
 * ------------------------------------------------------------------------------------------- */

/* The primary moves 1,000 times (a new port each time): every address gets an entry (the table
 * has 128: the ones left behind are reused), and every slot is the current primary's. */
START_TEST(test_moved_primary_followed)
{
    struct fixture *f = fixture_new();
    struct nodes *t = nodes_new(&f->w, 0, NODES_MOVES);
    f->w.nodes[0] = t;
    ck_assert(nodes_may_move(&f->w, 0) && nodes_follow_failover(&f->w, 0) && !nodes_sharded(&f->w, 0));
    ck_assert_int_eq(t->map.owner[0], -1); /* no primary confirmed yet */
    for (int i = 0; i < 1000; i++) {
        int node = nodes_adopt_primary(t, 1, "127.0.0.1", 20000 + i);
        ck_assert_msg(node >= 0, "primary %d: no entry", i);
        ck_assert_msg(t->map.owner[0] == node && t->map.owner[SLOTMAP_SLOTS - 1] == node, "primary %d", i);
        ck_assert_int_eq(t->map.nodes[node].port, 20000 + i);
    }
    all_owned_by(t, "127.0.0.1", 20999);
    ck_assert_uint_eq(f->w.stats.cluster_nodes_full, 0);
    /* no primary confirmed (a failover under way): no slot has an owner */
    ck_assert_int_eq(nodes_adopt_primary(t, 0, "", 0), -1);
    for (unsigned s = 0; s < SLOTMAP_SLOTS; s++) ck_assert_int_eq(t->map.owner[s], -1);
    nodes_delete(t);
    free(f);
}
END_TEST

static Suite *nodes_suite(void)
{
    Suite *s = suite_create("nodes");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, test_one_owns_every_slot);
    tcase_add_test(tc, test_map_adopted_and_entries_kept);
    tcase_add_test(tc, test_owner_id_after_failover_and_move);
    tcase_add_test(tc, test_full_table_reuses_then_counts);
    tcase_add_test(tc, test_moved_primary_followed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(nodes_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
