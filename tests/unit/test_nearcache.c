/* test_nearcache.c: unit tests of the near cache's pure parts: the core (nccore.c) and the read table (ncpolicy.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "nccore.h"
#include "ncpolicy.h"

#define NOW 1000000

static struct nc_id id(uint64_t ms, uint64_t seq)
{
    return (struct nc_id){ms, seq};
}

static enum nc_store_result store_str(struct nc_cache *c, struct nc_ticket t, const char *key, const char *val,
                                      int64_t expires)
{
    return nccore_store(c, &t, key, strlen(key), NC_T_STRING, 0, val, strlen(val), expires, NC_T_BIG);
}

START_TEST(core_hit_miss_absent_and_expiry)
{
    struct nc_cache c;
    nccore_init(&c, 1 << 20, 2);
    ck_assert_ptr_null(nccore_find(&c, 0, "k", 1, NOW));
    ck_assert_uint_eq(c.ns[0].misses, 1);
    struct nc_ticket t = nccore_ticket(&c, 0);
    ck_assert_int_eq(nccore_store(&c, &t, "gone", 4, NC_T_ABSENT, 0, NULL, 0, NOW + 100, NC_T_BIG), NC_STORED);
    struct nc_entry *e = nccore_find(&c, 0, "gone", 4, NOW);
    ck_assert_ptr_nonnull(e); /* an absent key is an answer worth keeping (seed step 1) */
    ck_assert_int_eq(e->type, NC_T_ABSENT);
    ck_assert_ptr_null(nccore_find(&c, 1, "gone", 4, NOW));       /* namespaces apart */
    ck_assert_ptr_null(nccore_find(&c, 0, "gone", 4, NOW + 100)); /* expired: evicted, cause TTL */
    ck_assert_uint_eq(c.ns[0].evictions[NC_EVICT_TTL], 1);
    ck_assert_uint_eq(c.count, 0);
    ck_assert_uint_eq(c.bytes, 0);
    nccore_free(&c);
}
END_TEST

/* nccore_find_hit counts and touches a hit only: a miss, an expired entry or a pass type changes
 * nothing (nccore_find then decides, counting and evicting); keys of 1 to 20 bytes all found
 * (the hash's word loop and its tail). */
START_TEST(core_find_hit_changes_nothing_but_a_hit)
{
    struct nc_cache c;
    nccore_init(&c, 1 << 20, 1);
    struct nc_ticket t = nccore_ticket(&c, 0);
    ck_assert_ptr_null(nccore_find_hit(&c, 0, "k", 1, NOW, NC_T_BIG));
    ck_assert_uint_eq(c.ns[0].misses, 0);
    ck_assert_int_eq(store_str(&c, t, "short", "v", NOW + 100), NC_STORED);
    ck_assert_ptr_null(nccore_find_hit(&c, 0, "short", 5, NOW + 100, NC_T_BIG)); /* expired: left in place */
    ck_assert_uint_eq(c.count, 1);
    ck_assert_uint_eq(c.ns[0].evictions[NC_EVICT_TTL], 0);
    ck_assert_ptr_null(nccore_find_hit(&c, 0, "short", 5, NOW, NC_T_STRING)); /* its type passes */
    ck_assert_uint_eq(c.ns[0].hits, 0);
    ck_assert_ptr_nonnull(nccore_find_hit(&c, 0, "short", 5, NOW, NC_T_BIG));
    ck_assert_uint_eq(c.ns[0].hits, 1);
    char key[32];
    for (int n = 1; n <= 20; n++) {
        memset(key, 'a' + n, (size_t)n);
        ck_assert_int_eq(nccore_store(&c, &t, key, (size_t)n, NC_T_STRING, 0, "v", 1, NOW + 1000, NC_T_BIG), NC_STORED);
    }
    for (int n = 1; n <= 20; n++) {
        memset(key, 'a' + n, (size_t)n);
        ck_assert_msg(nccore_find_hit(&c, 0, key, (size_t)n, NOW, NC_T_BIG) != NULL, "key of %d bytes", n);
        key[n - 1] = 'Z'; /* its last byte differs (the hash's tail): another key */
        ck_assert_msg(nccore_find_hit(&c, 0, key, (size_t)n, NOW, NC_T_BIG) == NULL, "other key of %d bytes", n);
    }
    nccore_free(&c);
}
END_TEST

START_TEST(core_lru_by_bytes_and_large_values)
{
    char val[2000];
    memset(val, 'x', sizeof val);
    struct nc_cache c;
    nccore_init(&c, SIZE_MAX / 2, 1); /* one entry's bytes as counted (malloc's block, rounding included) */
    struct nc_ticket t0 = nccore_ticket(&c, 0);
    ck_assert_int_eq(nccore_store(&c, &t0, "k000", 4, NC_T_STRING, 0, val, 1000, NOW + 1000, NC_T_BIG), NC_STORED);
    size_t one = c.bytes, table = c.table_bytes;
    ck_assert_uint_ge(one, nccore_entry_bytes(4, 1000));
    nccore_free(&c);
    nccore_init(&c, table + 20 * one, 1); /* the bucket array counts against the bound too */
    char key[8];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "k%03d", i);
        struct nc_ticket t = nccore_ticket(&c, 0);
        ck_assert_int_eq(nccore_store(&c, &t, key, 4, NC_T_STRING, 0, val, 1000, NOW + 1000, NC_T_BIG), NC_STORED);
    }
    ck_assert_uint_eq(c.count, 20);
    ck_assert_ptr_nonnull(nccore_find(&c, 0, "k000", 4, NOW)); /* k000 is now the most recent */
    struct nc_ticket t = nccore_ticket(&c, 0);
    ck_assert_int_eq(nccore_store(&c, &t, "k020", 4, NC_T_STRING, 0, val, 1000, NOW + 1000, NC_T_BIG), NC_STORED);
    ck_assert_uint_le(c.bytes, c.max_bytes);
    ck_assert_ptr_null(nccore_peek(&c, 0, "k001", 4, NOW)); /* the least recently used went */
    ck_assert_ptr_nonnull(nccore_peek(&c, 0, "k000", 4, NOW));
    ck_assert_uint_eq(c.ns[0].evictions[NC_EVICT_LRU], 1);
    /* a value above a sixteenth of the bound is not cached */
    t = nccore_ticket(&c, 0);
    ck_assert_int_eq(nccore_store(&c, &t, "big", 3, NC_T_STRING, 0, val, c.max_bytes / 16 + 1, NOW + 1000, NC_T_BIG),
                     NC_TOO_BIG);
    struct nc_entry *big = nccore_peek(&c, 0, "big", 3, NOW);
    ck_assert_ptr_nonnull(big); /* a marker: its reads are forwarded, not filled again */
    ck_assert_int_eq(big->type, NC_T_BIG);
    ck_assert_uint_eq(big->val_len, 0);
    nccore_free(&c);
}
END_TEST

/* Seed step 5: a fill whose cursor moved while it was in flight is returned but not cached. The
 * invalidation's eviction found nothing (the fill was not stored yet); the moved cursor is what
 * tells the fill. nccore_stream_apply stores the cursor before it evicts. */
START_TEST(core_race_rule_stream_cursor)
{
    struct nc_cache c;
    nccore_init(&c, 1 << 20, 1);
    struct nc_ticket t = nccore_ticket(&c, 0);    /* a fill starts */
    nccore_stream_apply(&c, 0, id(5, 0), "k", 1); /* the invalidation of k arrives: nothing to evict */
    ck_assert_int_eq(nccore_id_cmp(c.ns[0].cursor, id(5, 0)), 0);
    ck_assert_int_eq(store_str(&c, t, "k", "old", NOW + 1000), NC_RACED);
    ck_assert_ptr_null(nccore_peek(&c, 0, "k", 1, NOW));
    ck_assert_uint_eq(c.ns[0].raced, 1);
    /* a fill started after the invalidation is cached; the next invalidation evicts it */
    t = nccore_ticket(&c, 0);
    ck_assert_int_eq(store_str(&c, t, "k", "new", NOW + 1000), NC_STORED);
    nccore_stream_apply(&c, 0, id(6, 0), "k", 1);
    ck_assert_ptr_null(nccore_peek(&c, 0, "k", 1, NOW));
    ck_assert_uint_eq(c.ns[0].evictions[NC_EVICT_STREAM], 1);
    /* an invalidation of another namespace does not race this one's fills */
    nccore_free(&c);
    nccore_init(&c, 1 << 20, 2);
    t = nccore_ticket(&c, 0);
    nccore_stream_apply(&c, 1, id(7, 0), "k", 1);
    ck_assert_int_eq(store_str(&c, t, "k", "v", NOW + 1000), NC_STORED);
    nccore_free(&c);
}
END_TEST

/* A local write evicts at once and races the fills in flight (read your own write). */
START_TEST(core_local_write_and_flush)
{
    struct nc_cache c;
    nccore_init(&c, 1 << 20, 2);
    struct nc_ticket t = nccore_ticket(&c, 0);
    ck_assert_int_eq(store_str(&c, t, "a", "1", NOW + 1000), NC_STORED);
    t = nccore_ticket(&c, 0);
    nccore_local_write(&c, 0, "a", 1);
    ck_assert_ptr_null(nccore_peek(&c, 0, "a", 1, NOW));
    ck_assert_uint_eq(c.ns[0].evictions[NC_EVICT_WRITE], 1);
    ck_assert_int_eq(store_str(&c, t, "a", "stale", NOW + 1000), NC_RACED);
    /* a gap flushes one namespace only */
    t = nccore_ticket(&c, 0);
    struct nc_ticket t1 = nccore_ticket(&c, 1);
    ck_assert_int_eq(store_str(&c, t, "x", "1", NOW + 1000), NC_STORED);
    ck_assert_int_eq(store_str(&c, t, "y", "1", NOW + 1000), NC_STORED);
    ck_assert_int_eq(store_str(&c, t1, "x", "1", NOW + 1000), NC_STORED);
    nccore_flush(&c, 0, NC_EVICT_GAP);
    ck_assert_uint_eq(c.ns[0].entries, 0);
    ck_assert_uint_eq(c.ns[0].evictions[NC_EVICT_GAP], 2);
    ck_assert_ptr_nonnull(nccore_peek(&c, 1, "x", 1, NOW));
    /* not serving (the stream is down): nothing is served, the entry stays */
    nccore_set_serving(&c, 1, 0);
    ck_assert_ptr_null(nccore_find(&c, 1, "x", 1, NOW));
    nccore_set_serving(&c, 1, 1);
    ck_assert_ptr_nonnull(nccore_find(&c, 1, "x", 1, NOW));
    nccore_free(&c);
}
END_TEST

START_TEST(core_ids)
{
    struct nc_id x;
    ck_assert_int_eq(nccore_id_parse("1700000000000-12", 16, &x), 0);
    ck_assert_uint_eq(x.ms, 1700000000000ULL);
    ck_assert_uint_eq(x.seq, 12);
    ck_assert_int_eq(nccore_id_parse("0", 1, &x), 0);
    ck_assert_uint_eq(x.ms, 0);
    ck_assert_int_eq(nccore_id_parse("1-", 2, &x), -1);
    ck_assert_int_eq(nccore_id_parse("-1", 2, &x), -1);
    ck_assert_int_eq(nccore_id_parse("99999999999999999999999-1", 25, &x), -1);
    ck_assert_int_lt(nccore_id_cmp(id(1, 9), id(2, 0)), 0);
    ck_assert_int_gt(nccore_id_cmp(id(2, 1), id(2, 0)), 0);
}
END_TEST

/* ---- the read table ---- */

static char *render(const char *line_cmd, const struct nc_value *v, int resp3, size_t argc, const char **argv)
{
    const struct nc_read *row = ncpolicy_read(command_by_name(line_cmd));
    ck_assert_ptr_nonnull(row);
    size_t lens[8];
    for (size_t i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    struct bytebuf out = {0};
    row->render(v, argc, argv, lens, resp3, &out);
    bytebuf_add(&out, "", 1);
    return out.p;
}

static void expect_render(const char *want, const char *cmd, const struct nc_value *v, int resp3, size_t argc,
                          const char **argv)
{
    char *got = render(cmd, v, resp3, argc, argv);
    ck_assert_msg(strcmp(got, want) == 0, "%s RESP%d: got %s", cmd, resp3 ? 3 : 2, got);
    free(got);
}

static struct nc_stream_info stream_info(uint64_t last, uint64_t maxdel, long long added)
{
    return (struct nc_stream_info){.kind = NC_INFO_STREAM, .last = {last, 0}, .maxdel = {maxdel, 0}, .added = added};
}

/* The reader's rules, row by row: what one read of the stream says against what was applied. */
START_TEST(stream_verdict_rows)
{
    struct nc_stream_pos pos = {0};
    struct nc_stream_info absent = {.kind = NC_INFO_ABSENT}, wrong = {.kind = NC_INFO_WRONGTYPE};
    /* a new deployment: no stream yet; the first read resets (fills made before it go), then nothing */
    ck_assert_int_eq(nccore_stream_verdict(&pos, &absent), NC_STREAM_RESET);
    ck_assert_int_eq(pos.has_read, 1);
    ck_assert_int_eq(nccore_stream_verdict(&pos, &absent), NC_STREAM_NONE);
    /* the stream appears: read from its start (the first entry is applied, not skipped) */
    struct nc_stream_info one = stream_info(100, 0, 1);
    ck_assert_int_eq(nccore_stream_verdict(&pos, &one), NC_STREAM_APPLY);
    ck_assert_uint_eq(pos.cursor.ms, 0);
    pos.cursor = (struct nc_id){100, 0}, pos.seen_added = 1; /* the caller applied entry 100 */
    ck_assert_int_eq(nccore_stream_counts_differ(&pos, &one), 0);
    /* deleted after it was read: a gap, the cursor back to 0 (read from the start when made again) */
    ck_assert_int_eq(nccore_stream_verdict(&pos, &absent), NC_STREAM_GAP);
    ck_assert_uint_eq(pos.cursor.ms, 0);
    ck_assert_int_eq(pos.seen_added, 0);
    /* a reader starting on a stream with entries: reset, the cursor at its last id */
    struct nc_stream_pos fresh = {0};
    struct nc_stream_info busy = stream_info(500, 400, 50);
    ck_assert_int_eq(nccore_stream_verdict(&fresh, &busy), NC_STREAM_RESET);
    ck_assert_uint_eq(fresh.cursor.ms, 500);
    ck_assert_int_eq(fresh.seen_added, 50);
    /* trimmed entries that were all read (max deleted at or below the cursor): no gap */
    struct nc_stream_info trimmed = stream_info(600, 500, 51);
    ck_assert_int_eq(nccore_stream_verdict(&fresh, &trimmed), NC_STREAM_APPLY);
    /* an entry above the cursor deleted before it was read: a gap */
    struct nc_stream_info lost = stream_info(700, 550, 52);
    ck_assert_int_eq(nccore_stream_verdict(&fresh, &lost), NC_STREAM_GAP);
    ck_assert_uint_eq(fresh.cursor.ms, 700);
    ck_assert_int_eq(fresh.seen_added, 52);
    /* made again with lower ids, or fewer entries added than were read: a gap */
    struct nc_stream_info lower = stream_info(10, 0, 1);
    ck_assert_int_eq(nccore_stream_verdict(&fresh, &lower), NC_STREAM_GAP);
    struct nc_stream_pos ahead = {.cursor = {100, 0}, .seen_added = 9, .has_read = 1};
    struct nc_stream_info fewer = stream_info(200, 0, 3);
    ck_assert_int_eq(nccore_stream_verdict(&ahead, &fewer), NC_STREAM_GAP);
    /* made again with as many entries and higher ids: the counts do not add up once caught up */
    struct nc_stream_pos p2 = {.cursor = {100, 0}, .seen_added = 1, .has_read = 1};
    struct nc_stream_info again = stream_info(300, 0, 1);
    ck_assert_int_eq(nccore_stream_verdict(&p2, &again), NC_STREAM_APPLY);
    p2.cursor = (struct nc_id){300, 0}, p2.seen_added = 2; /* its one entry applied */
    ck_assert_int_eq(nccore_stream_counts_differ(&p2, &again), 1);
    ck_assert_int_eq(p2.seen_added, 1);
    /* another type: broken every time, nothing moved */
    struct nc_stream_pos p3 = {.cursor = {100, 0}, .seen_added = 5, .has_read = 1};
    ck_assert_int_eq(nccore_stream_verdict(&p3, &wrong), NC_STREAM_BROKEN);
    ck_assert_int_eq(nccore_stream_verdict(&p3, &wrong), NC_STREAM_BROKEN);
    ck_assert_uint_eq(p3.cursor.ms, 100);
}
END_TEST

START_TEST(fill_parse_and_render)
{
    struct bytebuf val = {0};
    uint8_t type;
    int64_t pttl;
    uint32_t nelem, count;
    int partial;
    const char *hash = "*3\r\n$4\r\nhash\r\n:-1\r\n*4\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$0\r\n\r\n";
    ck_assert_int_eq(ncpolicy_fill_parse(hash, strlen(hash), &type, &pttl, &nelem, &count, &partial, &val), 0);
    ck_assert_int_eq(type, NC_T_HASH);
    ck_assert_int_eq(pttl, -1);
    ck_assert_uint_eq(nelem, 2);
    struct nc_value h = {.type = type, .nelem = nelem, .count = count, .val = val.p, .len = val.len};
    const char *hgetall[] = {"HGETALL", "k"}, *hget[] = {"HGET", "k", "f2"}, *hmget[] = {"HMGET", "k", "f1", "x"};
    expect_render("*4\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$0\r\n\r\n", "hgetall", &h, 0, 2, hgetall);
    expect_render("%2\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$0\r\n\r\n", "hgetall", &h, 1, 2, hgetall);
    expect_render("$0\r\n\r\n", "hget", &h, 0, 3, hget);
    expect_render("*2\r\n$2\r\nv1\r\n$-1\r\n", "hmget", &h, 0, 4, hmget);
    expect_render("*2\r\n$2\r\nv1\r\n_\r\n", "hmget", &h, 1, 4, hmget);
    expect_render(":2\r\n", "hlen", &h, 0, 2, hgetall);
    expect_render("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", "smembers", &h, 0, 2,
                  hgetall);
    bytebuf_free(&val);
    const char *set = "*3\r\n$3\r\nset\r\n:5000\r\n*2\r\n$1\r\na\r\n$2\r\nbb\r\n";
    ck_assert_int_eq(ncpolicy_fill_parse(set, strlen(set), &type, &pttl, &nelem, &count, &partial, &val), 0);
    ck_assert_int_eq(pttl, 5000);
    struct nc_value s = {.type = type, .nelem = nelem, .count = count, .val = val.p, .len = val.len};
    const char *smembers[] = {"SMEMBERS", "k"}, *smis[] = {"SMISMEMBER", "k", "bb", "c"};
    expect_render("~2\r\n$1\r\na\r\n$2\r\nbb\r\n", "smembers", &s, 1, 2, smembers);
    expect_render("*2\r\n:1\r\n:0\r\n", "smismember", &s, 1, 4, smis);
    expect_render(":2\r\n", "scard", &s, 0, 2, smembers);
    bytebuf_free(&val);
    const char *none = "*2\r\n$4\r\nnone\r\n:-2\r\n";
    ck_assert_int_eq(ncpolicy_fill_parse(none, strlen(none), &type, &pttl, &nelem, &count, &partial, &val), 0);
    struct nc_value a = {.type = type};
    const char *get[] = {"GET", "k"};
    expect_render("$-1\r\n", "get", &a, 0, 2, get);
    expect_render("_\r\n", "get", &a, 1, 2, get);
    expect_render("*0\r\n", "smembers", &a, 0, 2, smembers);
    expect_render("%0\r\n", "hgetall", &a, 1, 2, hgetall);
    const char *list = "*2\r\n$4\r\nlist\r\n:-1\r\n";
    ck_assert_int_eq(ncpolicy_fill_parse(list, strlen(list), &type, &pttl, &nelem, &count, &partial, &val), 0);
    ck_assert_int_eq(type, NC_T_OTHER);
    /* not a fill's reply: an error, a truncated array */
    ck_assert_int_eq(ncpolicy_fill_parse("-BUSY x\r\n", 9, &type, &pttl, &nelem, &count, &partial, &val), -1);
    ck_assert_int_eq(ncpolicy_fill_parse(set, strlen(set) - 3, &type, &pttl, &nelem, &count, &partial, &val), -1);
    ck_assert_ptr_null(ncpolicy_read(command_by_name("lrange")));
    bytebuf_free(&val);
    /* a partial read of a large hash: the named fields present, then the whole hash's count */
    const char *part = "*4\r\n$4\r\nhash\r\n:-1\r\n*2\r\n$2\r\nf1\r\n$2\r\nv1\r\n:100000\r\n";
    ck_assert_int_eq(ncpolicy_fill_parse(part, strlen(part), &type, &pttl, &nelem, &count, &partial, &val), 0);
    ck_assert_int_eq(partial, 1);
    ck_assert_uint_eq(nelem, 1);
    ck_assert_uint_eq(count, 100000);
    struct nc_value ph = {.type = type, .nelem = nelem, .count = count, .val = val.p, .len = val.len};
    const char *hget1[] = {"HGET", "k", "f1"}, *hmget2[] = {"HMGET", "k", "f1", "f9"};
    expect_render("$2\r\nv1\r\n", "hget", &ph, 0, 3, hget1);
    expect_render("*2\r\n$2\r\nv1\r\n$-1\r\n", "hmget", &ph, 0, 4, hmget2);
    expect_render(":100000\r\n", "hlen", &ph, 0, 2, hgetall);
    bytebuf_free(&val);
    const char *bad = "*4\r\n$3\r\nset\r\n:-1\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n:1\r\n"; /* count below the members */
    ck_assert_int_eq(ncpolicy_fill_parse(bad, strlen(bad), &type, &pttl, &nelem, &count, &partial, &val), -1);
    bytebuf_free(&val);
    ck_assert_int_eq(ncpolicy_read(command_by_name("hget"))->mode, 'm');
    ck_assert_int_eq(ncpolicy_read(command_by_name("hgetall"))->mode, 'a');
    ck_assert_int_eq(ncpolicy_read(command_by_name("scard"))->mode, 'n');
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nearcache");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, core_hit_miss_absent_and_expiry);
    tcase_add_test(tc, core_find_hit_changes_nothing_but_a_hit);
    tcase_add_test(tc, core_lru_by_bytes_and_large_values);
    tcase_add_test(tc, core_race_rule_stream_cursor);
    tcase_add_test(tc, core_local_write_and_flush);
    tcase_add_test(tc, core_ids);
    tcase_add_test(tc, stream_verdict_rows);
    tcase_add_test(tc, fill_parse_and_render);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
