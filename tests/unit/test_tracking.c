/* test_tracking.c: unit tests of CLIENT TRACKING's pure decisions (Redis 7.0's option checks, TRACKINGINFO, the messages) and of the process-wide table (one-shot keys, NOLOOP, REDIRECT, BCAST, the max-keys bound). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracking.h"

static int exists_7(void *ctx, uint64_t id)
{
    (void)ctx;
    return id == 7;
}

/* Parse "CLIENT TRACKING" + words against cur; the error text or "" when accepted. */
static const char *parse(const struct tracking_state *cur, struct tracking_request *rq, const char *const *words,
                         size_t n)
{
    static char err[400];
    const char *argv[32] = {"CLIENT", "TRACKING"};
    size_t lens[32] = {6, 8};
    for (size_t i = 0; i < n; i++) argv[2 + i] = words[i], lens[2 + i] = strlen(words[i]);
    err[0] = '\0';
    if (tracking_parse(cur, n + 2, argv, lens, exists_7, NULL, rq, err, sizeof(err)) == 0) return "";
    return err;
}
#define PARSE(cur, rq, ...)                                                                                            \
    parse(cur, rq, (const char *const[]){__VA_ARGS__}, sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *))

/* Redis 7.0's order: options left to right (a REDIRECT's id where it stands), then ON's checks. */
START_TEST(test_parse_errors_in_redis_order)
{
    struct tracking_state none = {0};
    struct tracking_request rq;
    ck_assert_str_eq(PARSE(&none, &rq, "ON"), "");
    ck_assert_int_eq(rq.on, 1);
    ck_assert_str_eq(PARSE(&none, &rq, "off", "bcast"), "");
    ck_assert_int_eq(rq.on, 0);
    ck_assert_str_eq(PARSE(&none, &rq, "MAYBE"), "ERR syntax error");
    ck_assert_str_eq(PARSE(&none, &rq, "MAYBE", "REDIRECT", "9"),
                     "ERR The client ID you want redirect to does not exist");
    ck_assert_str_eq(PARSE(&none, &rq, "ON", "REDIRECT", "x"), "ERR value is not an integer or out of range");
    ck_assert_str_eq(PARSE(&none, &rq, "ON", "REDIRECT", "7", "REDIRECT", "7"),
                     "ERR A client can only redirect to a single other client");
    ck_assert_str_eq(PARSE(&none, &rq, "ON", "REDIRECT", "7", "FOO"), "ERR syntax error");
    ck_assert_str_eq(PARSE(&none, &rq, "ON", "PREFIX"), "ERR syntax error"); /* PREFIX needs a value */
    ck_assert_str_eq(PARSE(&none, &rq, "ON", "PREFIX", "a"), "ERR PREFIX option requires BCAST mode to be enabled");
    ck_assert_str_eq(PARSE(&none, &rq, "ON", "BCAST", "OPTIN"), "ERR OPTIN and OPTOUT are not compatible with BCAST");
    ck_assert_str_eq(PARSE(&none, &rq, "ON", "OPTOUT", "OPTIN"),
                     "ERR You can't specify both OPTIN mode and OPTOUT mode");
    ck_assert_str_eq(PARSE(&none, &rq, "ON", "BCAST", "PREFIX", "a", "PREFIX", "ab"),
                     "ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must "
                     "not overlap.");
    ck_assert_str_eq(PARSE(&none, &rq, "ON", "REDIRECT", "7", "NOLOOP"), "");
    ck_assert_int_eq(rq.redirect, 7);
    ck_assert_uint_eq(rq.options, TRACKING_NOLOOP);
}
END_TEST

/* The state's switches: BCAST and OPTIN/OPTOUT cannot change while on; prefixes add up, sorted. */
START_TEST(test_apply_switches_and_prefixes)
{
    struct tracking_state st = {0};
    struct tracking_request rq;
    ck_assert_str_eq(PARSE(&st, &rq, "ON", "OPTIN"), "");
    tracking_apply(&st, &rq);
    ck_assert_str_eq(PARSE(&st, &rq, "ON", "OPTOUT"), "ERR You can't switch OPTIN/OPTOUT mode before disabling "
                                                      "tracking for this client, and then re-enabling it with a "
                                                      "different mode.");
    ck_assert_str_eq(PARSE(&st, &rq, "ON", "BCAST"), "ERR You can't switch BCAST mode on/off before disabling "
                                                     "tracking for this client, and then re-enabling it with a "
                                                     "different mode.");
    ck_assert_str_eq(PARSE(&st, &rq, "OFF"), "");
    tracking_apply(&st, &rq);
    ck_assert_uint_eq(st.flags, 0);
    ck_assert_str_eq(PARSE(&st, &rq, "ON", "BCAST", "PREFIX", "b", "PREFIX", "a"), "");
    tracking_apply(&st, &rq);
    ck_assert_str_eq(PARSE(&st, &rq, "ON", "BCAST", "PREFIX", "ab"),
                     "ERR Prefix 'ab' overlaps with an existing prefix 'a'. Prefixes for a single client must not "
                     "overlap.");
    ck_assert_str_eq(PARSE(&st, &rq, "ON", "BCAST", "PREFIX", "c"), "");
    tracking_apply(&st, &rq);
    ck_assert_uint_eq(st.nprefixes, 3);
    ck_assert_str_eq(st.prefix[0], "a");
    ck_assert_str_eq(st.prefix[1], "b");
    ck_assert_str_eq(st.prefix[2], "c");
    struct bytebuf out = {0};
    tracking_info_reply(&st, 0, 1, &out);
    bytebuf_add(&out, "", 1);
    ck_assert_str_eq(out.p, "%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$5\r\nbcast\r\n$8\r\nredirect\r\n:0\r\n"
                            "$8\r\nprefixes\r\n*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
    out.len = 0;
    tracking_state_clear(&st);
    tracking_info_reply(&st, 0, 0, &out);
    bytebuf_add(&out, "", 1);
    ck_assert_str_eq(out.p,
                     "*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n");
    bytebuf_free(&out);
}
END_TEST

START_TEST(test_remembers_and_messages)
{
    ck_assert(!tracking_remembers(0, 0));
    ck_assert(tracking_remembers(TRACKING_ON, 0));
    ck_assert(!tracking_remembers(TRACKING_ON | TRACKING_BCAST, 0));
    ck_assert(!tracking_remembers(TRACKING_ON | TRACKING_OPTIN, 0));
    ck_assert(tracking_remembers(TRACKING_ON | TRACKING_OPTIN, 1));
    ck_assert(tracking_remembers(TRACKING_ON | TRACKING_OPTOUT, 0));
    ck_assert(!tracking_remembers(TRACKING_ON | TRACKING_OPTOUT, 1));
    struct bytebuf out = {0};
    const char *k = "key";
    size_t l = 3;
    tracking_message(1, &k, &l, 1, &out);
    tracking_message(0, &k, &l, 1, &out);
    tracking_message(1, NULL, NULL, 0, &out);
    tracking_message(0, NULL, NULL, 0, &out);
    bytebuf_add(&out, "", 1);
    ck_assert_str_eq(out.p, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\nkey\r\n"
                            "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$3\r\nkey\r\n"
                            ">2\r\n$10\r\ninvalidate\r\n_\r\n"
                            "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n");
    bytebuf_free(&out);
}
END_TEST

/* The feed's pushes: keys, a flush, anything else, broken ones. */
START_TEST(test_parse_push)
{
    const char *keys[8];
    size_t lens[8], n;
    const char *two = ">2\r\n$10\r\ninvalidate\r\n*2\r\n$1\r\na\r\n$3\r\nb:c\r\n";
    ck_assert_int_eq(tracking_parse_push(two, strlen(two), keys, lens, &n), 1);
    ck_assert_uint_eq(n, 2);
    ck_assert(lens[0] == 1 && memcmp(keys[0], "a", 1) == 0);
    ck_assert(lens[1] == 3 && memcmp(keys[1], "b:c", 3) == 0);
    const char *flush = ">2\r\n$10\r\ninvalidate\r\n_\r\n";
    ck_assert_int_eq(tracking_parse_push(flush, strlen(flush), keys, lens, &n), 2);
    const char *msg = ">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n";
    ck_assert_int_eq(tracking_parse_push(msg, strlen(msg), keys, lens, &n), 0);
    ck_assert_int_eq(tracking_parse_push("+PONG\r\n", 7, keys, lens, &n), 0);
    const char *bad = ">2\r\n$10\r\ninvalidate\r\n*1\r\n$9\r\nshort\r\n";
    ck_assert_int_eq(tracking_parse_push(bad, strlen(bad), keys, lens, &n), -1);
}
END_TEST

/* ---- the table ---- */

static struct tracking_table t;

static void setup(void)
{
    tracking_init(&t, 0);
}

static void teardown(void)
{
    tracking_free(&t);
}

static int on(uint64_t id, const char *const *words, size_t n)
{
    const char *argv[16] = {"CLIENT", "TRACKING"};
    size_t lens[16] = {6, 8};
    for (size_t i = 0; i < n; i++) argv[2 + i] = words[i], lens[2 + i] = strlen(words[i]);
    char err[300];
    uint32_t flags;
    return tracking_command(&t, id, n + 2, argv, lens, NULL, NULL, &flags, err, sizeof(err));
}
#define ON(id, ...)                                                                                                    \
    on(id, (const char *const[]){__VA_ARGS__}, sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *))

static void remember(uint64_t id, const char *key, struct tracking_notes *n)
{
    size_t l = strlen(key);
    tracking_remember(&t, id, &key, &l, 1, 1, NULL, n);
}

static void write_key(uint64_t writer, const char *key, struct tracking_notes *n)
{
    size_t l = strlen(key);
    tracking_invalidate(&t, writer, &key, &l, NULL, 1, 0, n);
}

/* One-shot: a key read by two clients tells both once; NOLOOP spares the writer; a REDIRECT
 * goes to its client, on its worker; a missing REDIRECT client is a broken redirect. */
START_TEST(test_table_default_mode)
{
    struct tracking_notes n = {0};
    tracking_client_add(&t, 1, 0);
    tracking_client_add(&t, 2, 1);
    tracking_client_add(&t, 3, 1);
    ck_assert_int_eq(ON(1, "ON", "NOLOOP"), 0);
    ck_assert_int_eq(ON(2, "ON", "REDIRECT", "3"), 0);
    ck_assert(tracking_active(&t));
    remember(1, "k", &n);
    remember(2, "k", &n);
    remember(2, "k", &n);
    ck_assert_uint_eq(tracking_keys(&t), 1);
    write_key(1, "k", &n); /* 1 wrote it: NOLOOP */
    ck_assert_uint_eq(n.n, 1);
    ck_assert_uint_eq(n.v[0].client, 3); /* 2 redirects to 3, on worker 1 */
    ck_assert_int_eq(n.v[0].worker, 1);
    ck_assert_int_eq(n.v[0].redirected, 1);
    ck_assert_str_eq(n.v[0].key, "k");
    tracking_notes_reset(&n);
    write_key(0, "k", &n); /* forgotten */
    ck_assert_uint_eq(n.n, 0);
    tracking_client_remove(&t, 3);
    remember(2, "j", &n);
    write_key(0, "j", &n);
    ck_assert_uint_eq(n.n, 1);
    ck_assert_int_eq(n.v[0].kind, TRACKING_NOTE_BROKEN);
    ck_assert_uint_eq(n.v[0].client, 2);
    ck_assert_uint_eq(n.v[0].about, 3);
    tracking_notes_free(&n);
    tracking_client_remove(&t, 1);
    tracking_client_remove(&t, 2);
    ck_assert(!tracking_active(&t));
}
END_TEST

/* BCAST: every write under a prefix, without any read; NOLOOP honoured. */
START_TEST(test_table_bcast)
{
    struct tracking_notes n = {0};
    tracking_client_add(&t, 1, 0);
    tracking_client_add(&t, 2, 0);
    ck_assert_int_eq(ON(1, "ON", "BCAST", "PREFIX", "a:", "PREFIX", "b:"), 0);
    ck_assert_int_eq(ON(2, "ON", "BCAST", "NOLOOP"), 0);
    write_key(2, "a:x", &n);
    ck_assert_uint_eq(n.n, 1);
    ck_assert_uint_eq(n.v[0].client, 1);
    tracking_notes_reset(&n);
    write_key(0, "c:x", &n);
    ck_assert_uint_eq(n.n, 1); /* 2's empty prefix */
    ck_assert_uint_eq(n.v[0].client, 2);
    tracking_notes_free(&n);
}
END_TEST

/* tracking-table-max-keys: past it keys go, and their readers are told. */
START_TEST(test_table_max_keys_evicts)
{
    tracking_free(&t);
    tracking_init(&t, 3);
    struct tracking_notes n = {0};
    tracking_client_add(&t, 1, 0);
    ck_assert_int_eq(ON(1, "ON"), 0);
    char key[16];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        remember(1, key, &n);
    }
    ck_assert_uint_eq(tracking_keys(&t), 3);
    ck_assert_uint_eq(n.n, 7);
    for (size_t i = 0; i < n.n; i++) ck_assert_int_eq(n.v[i].kind, TRACKING_NOTE_KEY);
    ck_assert_uint_eq(t.sent[TRACKING_CAUSE_EVICT], 7);
    tracking_notes_free(&n);
}
END_TEST

/* Client id read key of instance 0: inside a near-cache namespace (streamed) or not. */
static void remember_on0(uint64_t id, const char *key, int streamed, struct tracking_notes *n)
{
    size_t l = strlen(key);
    uint8_t nc = streamed ? 0 : 255;
    tracking_remember(&t, id, &key, &l, 1, streamed ? 0 : 1, &nc, n);
}

static size_t count_kind(const struct tracking_notes *n, uint64_t client, int kind)
{
    size_t k = 0;
    for (size_t i = 0; i < n->n; i++) k += n->v[i].client == client && n->v[i].kind == kind;
    return k;
}

/* What keygate vouches for when instance 0's feed drops: client 1 read a plain key (flushed),
 * client 2 only a near-cache key while the stream vouches (kept: a stream entry still reaches
 * it); at the feed's return 2 gets its key's invalidation, not a flush. A stream gap while the
 * feed is down flushes the near-cache readers; with the feed live it flushes nobody. */
START_TEST(test_table_stream_source)
{
    struct tracking_notes n = {0};
    tracking_client_add(&t, 1, 0);
    tracking_client_add(&t, 2, 0);
    ck_assert_int_eq(ON(1, "ON"), 0);
    ck_assert_int_eq(ON(2, "ON"), 0);
    tracking_feed_back(&t, 0, &n); /* up at start, nothing read */
    tracking_stream_set(&t, 0, 1, 0, &n);
    ck_assert_uint_eq(n.n, 0);
    remember_on0(1, "q:a", 0, &n);
    remember_on0(2, "u:a", 1, &n);
    remember_on0(2, "u:b", 1, &n);
    tracking_feed_lost(&t, 0, &n);
    ck_assert_uint_eq(n.n, 1);
    ck_assert_uint_eq(count_kind(&n, 1, TRACKING_NOTE_FLUSH), 1);
    tracking_notes_reset(&n);
    /* the stream names u:a (a write through another keygate): 2 is told */
    const char *key = "u:a";
    size_t l = 3;
    uint8_t inst = 0;
    tracking_invalidate(&t, 0, &key, &l, &inst, 1, 0, &n);
    ck_assert_uint_eq(n.n, 1);
    ck_assert_uint_eq(count_kind(&n, 2, TRACKING_NOTE_KEY), 1);
    tracking_notes_reset(&n);
    /* back: u:b (read, never written meanwhile as far as the stream knows) is invalidated */
    tracking_feed_back(&t, 0, &n);
    ck_assert_uint_eq(n.n, 1);
    ck_assert_uint_eq(count_kind(&n, 2, TRACKING_NOTE_KEY), 1);
    ck_assert_str_eq(n.v[0].key, "u:b");
    ck_assert_uint_eq(tracking_keys(&t), 1); /* q:a stays (1 was flushed, its key is lazily kept) */
    tracking_notes_reset(&n);
    /* a gap with the feed live: nobody; with it down: the near-cache reader */
    remember_on0(2, "u:c", 1, &n);
    tracking_stream_set(&t, 0, 1, 1, &n);
    ck_assert_uint_eq(n.n, 0);
    tracking_feed_lost(&t, 0, &n);
    ck_assert_uint_eq(n.n, 0); /* 1 read nothing of it since its flush; 2 is vouched for */
    tracking_stream_set(&t, 0, 1, 1, &n);
    ck_assert_uint_eq(n.n, 1);
    ck_assert_uint_eq(count_kind(&n, 2, TRACKING_NOTE_FLUSH), 1);
    tracking_notes_reset(&n);
    /* the reader stops vouching, the feed down: a near-cache reader is flushed at once */
    remember_on0(2, "u:d", 1, &n);
    tracking_stream_set(&t, 0, 0, 0, &n);
    ck_assert_uint_eq(count_kind(&n, 2, TRACKING_NOTE_FLUSH), 1);
    tracking_notes_reset(&n);
    /* ... and a feed that drops while the stream does not vouch flushes it too */
    tracking_feed_back(&t, 0, &n);
    tracking_notes_reset(&n);
    remember_on0(2, "u:e", 1, &n);
    tracking_feed_lost(&t, 0, &n);
    ck_assert_uint_eq(count_kind(&n, 2, TRACKING_NOTE_FLUSH), 1);
    tracking_notes_reset(&n);
    /* the feed still down (every 5 s): whoever read since its last flush, plain or near-cache */
    remember_on0(1, "q:b", 0, &n);
    remember_on0(2, "u:f", 1, &n);
    tracking_feed_still_down(&t, 0, &n);
    ck_assert_uint_eq(n.n, 2);
    ck_assert_uint_eq(count_kind(&n, 1, TRACKING_NOTE_FLUSH), 1);
    ck_assert_uint_eq(count_kind(&n, 2, TRACKING_NOTE_FLUSH), 1);
    tracking_notes_reset(&n);
    tracking_feed_still_down(&t, 0, &n); /* nothing read since */
    ck_assert_uint_eq(n.n, 0);
    tracking_notes_free(&n);
}
END_TEST

/* The table's bytes are counted in the process's max-memory total (from when it is attached,
 * back to 0 once everything goes); past max-memory keys go with their pushes, and a lower
 * tracking-table-max-keys (a reload) evicts down to it at once. */
START_TEST(test_table_memory_and_limits)
{
    int64_t total = 1000; /* the workers' buffers */
    struct tracking_notes n = {0};
    tracking_client_add(&t, 1, 0);
    ck_assert_int_eq(ON(1, "ON", "BCAST", "PREFIX", "q:bcast:"), 0);
    tracking_set_limits(&t, 0, &total, 0, &n);
    ck_assert_int_eq(total, 1000 + 9); /* its prefix, counted from when the total is attached */
    ck_assert_int_eq(ON(1, "OFF"), 0);
    ck_assert_int_eq(total, 1000);
    ck_assert_int_eq(ON(1, "ON"), 0);
    int64_t before = total;
    char key[64];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "q:memory:%040d", i);
        remember(1, key, &n);
    }
    ck_assert_int_ge(total - before, 100 * 50);
    tracking_set_limits(&t, 10, NULL, 0, &n); /* a reload lowers the bound */
    ck_assert_uint_eq(tracking_keys(&t), 10);
    ck_assert_uint_eq(n.n, 90);
    tracking_notes_reset(&n);
    int64_t limit = total - 1;
    tracking_set_limits(&t, 0, NULL, limit, &n); /* over max-memory: keys go until under */
    ck_assert_uint_lt(tracking_keys(&t), 10);
    ck_assert_int_le(total, limit);
    ck_assert_uint_eq(n.n, 10 - tracking_keys(&t));
    tracking_notes_free(&n);
    tracking_client_remove(&t, 1);
    tracking_free(&t);
    ck_assert_int_eq(total, 1000);
    tracking_init(&t, 0); /* for the teardown */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tracking");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, test_parse_errors_in_redis_order);
    tcase_add_test(tc, test_apply_switches_and_prefixes);
    tcase_add_test(tc, test_remembers_and_messages);
    tcase_add_test(tc, test_parse_push);
    suite_add_tcase(s, tc);
    TCase *tt = tcase_create("table");
    tcase_add_checked_fixture(tt, setup, teardown);
    tcase_add_test(tt, test_table_default_mode);
    tcase_add_test(tt, test_table_bcast);
    tcase_add_test(tt, test_table_max_keys_evicts);
    tcase_add_test(tt, test_table_stream_source);
    tcase_add_test(tt, test_table_memory_and_limits);
    suite_add_tcase(s, tt);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
