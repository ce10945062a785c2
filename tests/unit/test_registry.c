/* test_registry.c: unit tests for registry.c: the real conf/registry.conf, lookups, every error. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "registry.h"

static const char *const instances[] = {"durable", "cache"};

/* Write `content` to a fresh temp file; returns its malloc'd path. */
static char *write_temp(const char *content)
{
    char *path = strdup("/tmp/kg_registry_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    size_t len = strlen(content);
    ck_assert_int_eq(write(fd, content, len), (ssize_t)len);
    close(fd);
    return path;
}

/* Load `content` as a registry that must fail; errors go to *d, the temp path to *path. */
static void load_bad(const char *content, struct diag *d, char **path)
{
    *path = write_temp(content);
    memset(d, 0, sizeof *d);
    struct registry *r = registry_load(*path, instances, 2, d);
    ck_assert_ptr_null(r);
    ck_assert_uint_gt(d->count, 0);
}

/* Assert that some line of `d` starts with "PATH:LINE: " and contains `word`. */
static void assert_diag(const struct diag *d, const char *path, int line, const char *word)
{
    char prefix[512];
    if (line > 0)
        snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
    else
        snprintf(prefix, sizeof prefix, "%s: ", path);
    for (size_t i = 0; i < d->count; i++)
        if (strncmp(d->lines[i], prefix, strlen(prefix)) == 0 && strstr(d->lines[i], word)) return;
    for (size_t i = 0; i < d->count; i++) fprintf(stderr, "  diag: %s\n", d->lines[i]);
    ck_abort_msg("no diagnostic '%s...%s'", prefix, word);
}

/* One bad registry: expect exactly one error, at `line`, mentioning `word`. */
static void expect_one_error(const char *content, int line, const char *word)
{
    struct diag d;
    char *path;
    load_bad(content, &d, &path);
    if (d.count != 1)
        for (size_t i = 0; i < d.count; i++) fprintf(stderr, "  diag: %s\n", d.lines[i]);
    ck_assert_uint_eq(d.count, 1);
    assert_diag(&d, path, line, word);
    diag_free(&d);
    unlink(path);
    free(path);
}

#define GOOD "instance=durable owner=queues"

START_TEST(real_registry_parses)
{
    struct diag d = {0};
    struct registry *r = registry_load("conf/registry.conf", instances, 2, &d);
    for (size_t i = 0; i < d.count; i++) fprintf(stderr, "  diag: %s\n", d.lines[i]);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(d.count, 0);
    /* Every row of the seed's "Key registry" table: 13 namespaces and 1 channel. */
    ck_assert_uint_eq(r->count, 14);
    ck_assert_uint_eq(r->n[NS_KEY], 13);
    ck_assert_uint_eq(r->n[NS_CHANNEL], 1);
    for (size_t i = 1; i < r->count; i++) { /* sorted by (kind, prefix) */
        const struct namespace_entry *a = &r->entries[i - 1], *b = &r->entries[i];
        ck_assert(a->kind < b->kind || (a->kind == b->kind && strcmp(a->prefix, b->prefix) < 0));
    }
    ck_assert_str_eq(r->path, "conf/registry.conf");

    const struct namespace_entry *e = registry_lookup(r, NS_KEY, "q:run:1", 7);
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(e->prefix, "q:");
    ck_assert_int_eq(e->instance, 0);
    ck_assert_int_eq(e->ttl_ms, 0);
    ck_assert_str_eq(e->owner, "queues");

    e = registry_lookup(r, NS_KEY, "telegram:active-conv:42", 23);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->instance, 1);
    ck_assert_int_eq(e->ttl_ms, 30 * 60000);
    ck_assert_int_eq(e->sliding, 1);
    ck_assert_str_eq(e->owner, "telegram");

    e = registry_lookup(r, NS_KEY, "rl:ip:1", 7);
    ck_assert_int_eq(e->ttl_ms, 3600000);
    ck_assert_int_eq(e->max_ttl_ms, 86400000);
    ck_assert_str_eq(e->owner, "rate-limit");

    e = registry_lookup(r, NS_CHANNEL, "push:feed", 9);
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(e->prefix, "push:");
    ck_assert_int_eq(e->instance, 1);
    ck_assert_str_eq(e->owner, "notifications");
    registry_free(r);
}
END_TEST

static const char *lookup(const struct registry *r, enum ns_kind kind, const char *key)
{
    const struct namespace_entry *e = registry_lookup(r, kind, key, strlen(key));
    return e ? e->prefix : NULL;
}

START_TEST(longest_prefix_wins)
{
    struct diag d = {0};
    struct registry *r = registry_load("conf/registry.conf", instances, 2, &d);
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(lookup(r, NS_KEY, "cache:mattermost:listener"), "cache:mattermost:listener");
    ck_assert_str_eq(lookup(r, NS_KEY, "cache:mattermost:listenerX"), "cache:mattermost:listener");
    ck_assert_str_eq(lookup(r, NS_KEY, "cache:mattermost:listene"), "cache:");
    ck_assert_str_eq(lookup(r, NS_KEY, "cache:foo"), "cache:");
    ck_assert_str_eq(lookup(r, NS_KEY, "cache:"), "cache:");
    ck_assert_str_eq(lookup(r, NS_KEY, "dedup:job:1"), "dedup:job:");
    ck_assert_str_eq(lookup(r, NS_KEY, "dedup:webhook:abc"), "dedup:webhook:");
    ck_assert_ptr_null(lookup(r, NS_KEY, "dedup:other:1"));
    ck_assert_ptr_null(lookup(r, NS_KEY, "nope"));
    ck_assert_ptr_null(lookup(r, NS_KEY, ""));
    ck_assert_ptr_null(lookup(r, NS_KEY, "cache"));
    ck_assert_ptr_null(lookup(r, NS_KEY, "Q:1"));
    ck_assert_str_eq(lookup(r, NS_CHANNEL, "push:feed"), "push:");
    ck_assert_ptr_null(lookup(r, NS_KEY, "push:feed"));
    ck_assert_ptr_null(lookup(r, NS_CHANNEL, "cache:foo"));
    /* length-bounded: bytes past len are not part of the key */
    ck_assert_ptr_null(registry_lookup(r, NS_KEY, "q:", 1));
    ck_assert_ptr_nonnull(registry_lookup(r, NS_KEY, "q:", 2));
    ck_assert_ptr_null(registry_lookup(NULL, NS_KEY, "q:", 2));
    registry_free(r);
}
END_TEST

/* Lookups over many generated prefixes agree with a brute-force longest-prefix scan. */
START_TEST(lookup_matches_brute_force)
{
    enum { N = 600 };
    size_t cap = N * 120;
    char *text = malloc(cap), *p = text;
    char prefixes[N][24];
    for (int i = 0; i < N; i++) {
        /* nested families: a:, a:3:, a:3:7: ... */
        snprintf(prefixes[i], sizeof prefixes[i], "%c:%d:%s", 'a' + i % 5, (i / 5) % 17,
                 i % 3 == 0 ? "" : (i % 3 == 1 ? "x:" : "x:y"));
        p += sprintf(p, "namespace \"%s\" %s ttl=none\n", prefixes[i], GOOD);
    }
    /* drop generated duplicates by loading, then keep only what loaded */
    char *path = write_temp(text);
    struct diag d = {0};
    struct registry *r = registry_load(path, instances, 2, &d);
    ck_assert_ptr_null(r); /* duplicates exist in the generated set */
    ck_assert_uint_gt(d.count, 0);
    assert_diag(&d, path, 256, "(first defined on line 1)");
    diag_free(&d);
    unlink(path);
    free(path);

    /* unique subset */
    p = text;
    int nuniq = 0;
    static char uniq[N][24];
    for (int i = 0; i < N; i++) {
        int dup = 0;
        for (int j = 0; j < nuniq && !dup; j++) dup = strcmp(uniq[j], prefixes[i]) == 0;
        if (dup) continue;
        strcpy(uniq[nuniq++], prefixes[i]);
        p += sprintf(p, "namespace \"%s\" %s ttl=none\n", prefixes[i], GOOD);
    }
    path = write_temp(text);
    r = registry_load(path, instances, 2, &d);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(r->count, (size_t)nuniq);
    const char *const keys[] = {"a:0:", "a:0:x:", "a:0:x:y", "a:0:x:yz", "b:16:x:y:1", "c:3",
                                "c:3:", "e:9:x",  "e:9:x:",  "f:1:",     "a:",         "d:12:x:q"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const char *best = NULL;
        for (int j = 0; j < nuniq; j++)
            if (strncmp(keys[k], uniq[j], strlen(uniq[j])) == 0 && (!best || strlen(uniq[j]) > strlen(best)))
                best = uniq[j];
        const char *got = lookup(r, NS_KEY, keys[k]);
        if (!best)
            ck_assert_msg(got == NULL, "%s: got %s, want none", keys[k], got);
        else
            ck_assert_msg(got && strcmp(got, best) == 0, "%s: got %s, want %s", keys[k], got ? got : "(null)", best);
    }
    registry_free(r);
    unlink(path);
    free(path);
    free(text);
}
END_TEST

START_TEST(error_unknown_kind)
{
    expect_one_error("namespace a: " GOOD " ttl=1h\nnamespaces b: " GOOD " ttl=1h\n", 2, "unknown kind 'namespaces'");
}
END_TEST

START_TEST(error_missing_prefix)
{
    expect_one_error("namespace a: " GOOD " ttl=1h\n\nnamespace\n", 3, "missing prefix");
    expect_one_error("namespace instance=durable owner=x ttl=1h\n", 1, "missing prefix");
    expect_one_error("namespace \"\" " GOOD " ttl=1h\n", 1, "empty prefix");
}
END_TEST

START_TEST(error_unknown_field)
{
    expect_one_error("namespace a: " GOOD " ttl=1h colour=red\n", 1, "unknown field 'colour'");
    expect_one_error("namespace a: " GOOD " ttl=1h slidng\n", 1, "unknown field 'slidng'");
    expect_one_error("namespace a: " GOOD " ttl=1h sliding=yes\n", 1, "flag word");
}
END_TEST

START_TEST(error_repeated_field)
{
    expect_one_error("namespace a: " GOOD " ttl=1h ttl=2h\n", 1, "repeated field 'ttl'");
    expect_one_error("namespace a: " GOOD " ttl=1h sliding sliding\n", 1, "repeated field 'sliding'");
}
END_TEST

START_TEST(error_missing_required)
{
    expect_one_error("namespace a: owner=x ttl=1h\n", 1, "missing instance=");
    expect_one_error("namespace a: instance=cache ttl=1h\n", 1, "missing owner=");
    expect_one_error("namespace a: instance=cache owner=x\n", 1, "missing ttl=");
    expect_one_error("channel a: owner=x\n", 1, "missing instance=");
}
END_TEST

START_TEST(error_unknown_instance_lists_valid)
{
    expect_one_error("namespace a: instance=durabel owner=x ttl=1h\n", 1,
                     "unknown instance 'durabel' (valid instances: durable, cache)");
}
END_TEST

START_TEST(error_bad_duration_names_field_and_value)
{
    expect_one_error("namespace a: " GOOD " ttl=0s\n", 1, "ttl: '0s'");
    expect_one_error("namespace a: " GOOD " ttl=1.5h\n", 1, "ttl: '1.5h'");
    expect_one_error("namespace a: " GOOD " ttl=10\n", 1, "ttl: '10'");
    expect_one_error("namespace a: " GOOD " ttl=1h max-ttl=-1s\n", 1, "max-ttl: '-1s'");
    expect_one_error("namespace a: " GOOD " ttl=1h max-ttl=none\n", 1, "max-ttl: 'none'");
    expect_one_error("namespace a: " GOOD " ttl=none near-cache=60\n", 1, "near-cache: '60'");
    expect_one_error("namespace a: " GOOD " ttl=\n", 1, "bad duration for ttl");
}
END_TEST

START_TEST(error_max_ttl_below_ttl)
{
    expect_one_error("namespace a: " GOOD " ttl=1h max-ttl=30m\n", 1, "max-ttl=30m is less than ttl=1h");
}
END_TEST

START_TEST(error_sliding_without_ttl)
{
    expect_one_error("namespace a: " GOOD " ttl=none sliding\n", 1, "sliding");
}
END_TEST

START_TEST(error_near_cache_needs_keygate_namespace)
{
    /* the stream lives on the namespace's own instance: a keygate line elsewhere does not count */
    expect_one_error("namespace kg: instance=cache ttl=none owner=keygate\n"
                     "namespace u: " GOOD " ttl=none near-cache=1m\n",
                     2,
                     "near-cache= needs a keygate-owned namespace on instance 'durable' for its invalidation stream: "
                     "add the line 'namespace keygate: instance=durable ttl=none owner=keygate'");
    expect_one_error("namespace u: " GOOD " ttl=1h sliding near-cache=1m\n"
                     "namespace kg: instance=durable ttl=none owner=keygate\n",
                     1, "near-cache= cannot be combined with sliding");
    expect_one_error("namespace kg: instance=durable ttl=none owner=keygate near-cache=1m\n", 1,
                     "near-cache= is not allowed on a keygate-owned line");
}
END_TEST

START_TEST(error_key_fields_on_channel)
{
    struct diag d;
    char *path;
    load_bad("channel push: instance=cache owner=n ttl=1h max-ttl=2h sliding near-cache=1s\n", &d, &path);
    ck_assert_uint_eq(d.count, 4);
    assert_diag(&d, path, 1, "ttl= is not allowed on a channel line");
    assert_diag(&d, path, 1, "max-ttl= is not allowed on a channel line");
    assert_diag(&d, path, 1, "sliding is not allowed on a channel line");
    assert_diag(&d, path, 1, "near-cache= is not allowed on a channel line");
    diag_free(&d);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(error_duplicate_prefix_names_first_line)
{
    expect_one_error("# header\nnamespace a: " GOOD " ttl=1h\nchannel a: instance=cache owner=n\n"
                     "namespace b: " GOOD " ttl=1h\nnamespace a: " GOOD " ttl=2h\n",
                     5, "duplicate namespace prefix 'a:' (first defined on line 2)");
    expect_one_error("channel p: instance=cache owner=n\nchannel p: instance=cache owner=n\n", 2,
                     "duplicate channel prefix 'p:' (first defined on line 1)");
}
END_TEST

START_TEST(error_unterminated_quote)
{
    expect_one_error("namespace a: " GOOD " ttl=1h\nnamespace b: " GOOD " ttl=1h purpose=\"oops\n", 2,
                     "unterminated quote");
}
END_TEST

START_TEST(error_empty_file_at_line_0)
{
    expect_one_error("", 0, "no entries");
    expect_one_error("# only comments\n\n   # here\n", 0, "no entries");
}
END_TEST

START_TEST(error_missing_file)
{
    struct diag d = {0};
    ck_assert_ptr_null(registry_load("/nonexistent/registry.conf", instances, 2, &d));
    ck_assert_uint_eq(d.count, 1);
    assert_diag(&d, "/nonexistent/registry.conf", 0, "cannot open");
    diag_free(&d);
}
END_TEST

START_TEST(all_errors_in_one_pass_in_line_order)
{
    struct diag d;
    char *path;
    load_bad("namespace a: " GOOD " ttl=1h\n"      /* 1 ok */
             "namespace a: " GOOD " ttl=1h\n"      /* 2 duplicate */
             "bogus b:\n"                          /* 3 unknown kind */
             "namespace c: " GOOD " ttl=5x\n"      /* 4 bad duration */
             "namespace d: instance=nope ttl=1h\n" /* 5 unknown instance + missing owner */
             "namespace e: " GOOD "\n",            /* 6 missing ttl */
             &d, &path);
    ck_assert_uint_eq(d.count, 6);
    char want[600];
    snprintf(want, sizeof want, "%s:2: ", path);
    ck_assert(strncmp(d.lines[0], want, strlen(want)) == 0);
    assert_diag(&d, path, 2, "duplicate");
    assert_diag(&d, path, 3, "unknown kind");
    assert_diag(&d, path, 4, "bad duration for ttl: '5x'");
    assert_diag(&d, path, 5, "unknown instance 'nope'");
    assert_diag(&d, path, 5, "missing owner=");
    assert_diag(&d, path, 6, "missing ttl=");
    snprintf(want, sizeof want, "%s:6: ", path);
    ck_assert(strncmp(d.lines[5], want, strlen(want)) == 0);
    diag_free(&d);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(valid_forms)
{
    char *path = write_temp(
        "# comment line\n"
        "namespace  q:  instance=durable ttl=none max-ttl=1h owner=queues   # max-ttl caps clients\n"
        "namespace \"sp ace:\" instance=cache ttl=90s owner=c purpose=\"a # not a comment, \\\"q\\\" \\\\\"\n"
        "namespace  u:  instance=durable ttl=none near-cache=60s owner=api\n"
        "channel    push: instance=cache owner=notifications\n"
        "namespace  kg: instance=durable ttl=none owner=keygate\n");
    struct diag d = {0};
    struct registry *r = registry_load(path, instances, 2, &d);
    for (size_t i = 0; i < d.count; i++) fprintf(stderr, "  diag: %s\n", d.lines[i]);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(r->count, 5);
    const struct namespace_entry *e = registry_lookup(r, NS_KEY, "q:1", 3);
    ck_assert_ptr_null(e->nc_stream);
    ck_assert_int_eq(e->ttl_ms, 0);
    ck_assert_int_eq(e->max_ttl_ms, 3600000);
    ck_assert_int_eq(e->line, 2);
    e = registry_lookup(r, NS_KEY, "sp ace:1", 8);
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(e->purpose, "a # not a comment, \"q\" \\");
    ck_assert_int_eq(e->ttl_ms, 90000);
    e = registry_lookup(r, NS_KEY, "u:1", 3);
    ck_assert_int_eq(e->near_cache_ms, 60000);
    ck_assert_str_eq(e->nc_stream,
                     "kg:nc:{kg:}:stream"); /* the instance's stream, in the keygate-owned namespace, hash-tagged */
    ck_assert_uint_eq(e->nc_stream_len, strlen("kg:nc:{kg:}:stream"));
    ck_assert_str_eq(e->nc_markers, "kg:nc:{kg:}:markers");
    ck_assert_uint_eq(e->nc_markers_len, strlen("kg:nc:{kg:}:markers"));
    ck_assert_str_eq(e->purpose, "");
    e = registry_lookup(r, NS_CHANNEL, "push:x", 6);
    ck_assert_int_eq(e->kind, NS_CHANNEL);
    ck_assert_int_eq(e->ttl_ms, 0);
    registry_free(r);
    unlink(path);
    free(path);
}
END_TEST

/* Capture registry_print's output in a string. */
static char *print_to_string(const struct registry *r, int markdown)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    registry_print(r, instances, markdown, f);
    fclose(f);
    return buf;
}

START_TEST(print_markdown_table)
{
    struct diag d = {0};
    struct registry *r = registry_load("conf/registry.conf", instances, 2, &d);
    ck_assert_ptr_nonnull(r);
    char *s = print_to_string(r, 1);
    const char *head = "| Namespace | Purpose | Instance | TTL | Max TTL | Owner |\n"
                       "|---|---|---|---|---|---|\n"
                       "| q: | task queue — run payloads | durable | none | - | queues |\n"
                       "| rl: |";
    ck_assert_msg(strncmp(s, head, strlen(head)) == 0, "got:\n%s", s);
    ck_assert_ptr_nonnull(strstr(s, "| telegram:active-conv: |"));
    ck_assert_ptr_nonnull(strstr(s, "| cache | 30m sliding | - | telegram |\n"));
    ck_assert_ptr_nonnull(strstr(s, "| cache | 90s | 5m | mattermost |\n"));
    ck_assert_ptr_nonnull(strstr(s, "| dedup:job: | idempotency of a job_id enqueue — one run | "
                                    "durable | 1d | 7d | lifecycle |\n")); /* 24h: shortest exact */
    ck_assert_ptr_nonnull(strstr(s, "| cache | (pub/sub) | - | notifications |\n"));
    int lines = 0;
    for (const char *p = s; *p; p++) lines += *p == '\n';
    ck_assert_int_eq(lines, 2 + 14);
    free(s);
    registry_free(r);
}
END_TEST

START_TEST(print_plain_aligned)
{
    char *path = write_temp("namespace long:prefix: instance=durable ttl=1h max-ttl=1d owner=o "
                            "purpose=\"p|q — x\"\n"
                            "channel c: instance=cache owner=own purpose=\"\"\n"
                            "namespace n: instance=cache ttl=none near-cache=60s owner=a\n"
                            "namespace k: instance=cache ttl=none owner=keygate\n");
    struct diag d = {0};
    struct registry *r = registry_load(path, instances, 2, &d);
    ck_assert_ptr_nonnull(r);
    char *s = print_to_string(r, 0);
    const char *want = "Namespace     Purpose  Instance  TTL                  Max TTL  Owner\n"
                       "------------  -------  --------  -------------------  -------  -------\n"
                       "long:prefix:  p|q — x  durable   1h                   1d       o\n"
                       "c:                     cache     (pub/sub)            -        own\n"
                       "n:                     cache     none, near-cache 1m  -        a\n"
                       "k:                     cache     none                 -        keygate\n";
    ck_assert_msg(strcmp(s, want) == 0, "got:\n%s", s);
    free(s);
    s = print_to_string(r, 1);
    ck_assert_ptr_nonnull(strstr(s, "| long:prefix: | p\\|q — x | durable | 1h | 1d | o |\n"));
    free(s);
    registry_free(r);
    unlink(path);
    free(path);
}
END_TEST

/* issue 14: the depth flag word (the sampler sums the lengths of such a namespace's lists, streams, zsets) */
START_TEST(depth_flag)
{
    char *path = write_temp("namespace q: instance=durable ttl=none owner=queues depth\n"
                            "namespace rl: instance=durable ttl=1h owner=rl\n");
    struct diag d = {0};
    struct registry *r = registry_load(path, instances, 2, &d);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(registry_lookup(r, NS_KEY, "q:1", 3)->depth, 1);
    ck_assert_int_eq(registry_lookup(r, NS_KEY, "rl:1", 4)->depth, 0);
    registry_free(r);
    unlink(path);
    free(path);
    expect_one_error("namespace q: " GOOD " ttl=none depth=1\n", 1, "'depth' is a flag word and takes no value");
    expect_one_error("namespace q: " GOOD " ttl=none depth depth\n", 1, "repeated field 'depth'");
    expect_one_error("channel c: " GOOD " depth\n", 1, "depth is not allowed on a channel line");
}
END_TEST

/* issue 22: replicas=N on namespace and default lines (writes acknowledged once N replicas have them) */
START_TEST(replicas_field)
{
    char *path = write_temp("namespace q: instance=durable ttl=none owner=queues replicas=2\n"
                            "namespace rl: instance=durable ttl=1h owner=rl\n"
                            "default instance=durable ttl=1h owner=legacy replicas=16\n");
    struct diag d = {0};
    struct registry *r = registry_load(path, instances, 2, &d);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(registry_lookup(r, NS_KEY, "q:1", 3)->replicas, 2);
    ck_assert_int_eq(registry_lookup(r, NS_KEY, "rl:1", 4)->replicas, 0);
    ck_assert_int_eq(registry_resolve(r, NS_KEY, "x", 1)->replicas, 16);
    char *s = print_to_string(r, 0);
    ck_assert_msg(strstr(s, "none, replicas=2") != NULL, "got:\n%s", s);
    ck_assert_msg(strstr(s, "1h, replicas=16") != NULL, "got:\n%s", s);
    free(s);
    registry_free(r);
    unlink(path);
    free(path);
    expect_one_error("namespace q: " GOOD " ttl=none replicas=0\n", 1,
                     "bad replicas= value '0' (a number of replicas, 1..16)");
    expect_one_error("namespace q: " GOOD " ttl=none replicas=17\n", 1, "bad replicas= value '17'");
    expect_one_error("namespace q: " GOOD " ttl=none replicas=1x\n", 1, "bad replicas= value '1x'");
    expect_one_error("namespace q: " GOOD " ttl=none replicas=-1\n", 1, "bad replicas= value '-1'");
    expect_one_error("namespace q: " GOOD " ttl=none replicas=\n", 1, "bad replicas= value ''");
    expect_one_error("namespace q: " GOOD " ttl=none replicas\n", 1, "field 'replicas' needs a value");
    expect_one_error("namespace q: " GOOD " ttl=none replicas=1 replicas=2\n", 1, "repeated field 'replicas'");
    expect_one_error("channel c: " GOOD " replicas=1\n", 1, "replicas= is not allowed on a channel line");
}
END_TEST

/* issue 31: max-keys=N and max-memory=SIZE on namespace and default lines of the noeviction instance */
START_TEST(budget_fields)
{
    char *path = write_temp("namespace q: instance=durable ttl=none owner=queues max-keys=500 max-memory=64mb\n"
                            "namespace rl: instance=durable ttl=1h owner=rl\n"
                            "default instance=durable ttl=1h owner=legacy max-memory=1000\n");
    struct diag d = {0};
    struct registry *r = registry_load(path, instances, 2, &d);
    ck_assert_ptr_nonnull(r);
    const struct namespace_entry *q = registry_lookup(r, NS_KEY, "q:1", 3);
    ck_assert_int_eq(q->max_keys, 500);
    ck_assert_int_eq(q->max_memory, 64 * 1024 * 1024);
    ck_assert(registry_has_budget(q));
    ck_assert(!registry_has_budget(registry_lookup(r, NS_KEY, "rl:1", 4)));
    ck_assert_int_eq(registry_resolve(r, NS_KEY, "x", 1)->max_memory, 1000);
    ck_assert(registry_any_budget(r));
    char *s = print_to_string(r, 0);
    ck_assert_msg(strstr(s, "Budget") != NULL, "got:\n%s", s);
    ck_assert_msg(strstr(s, "max-keys=500, max-memory=64mb") != NULL, "got:\n%s", s);
    ck_assert_msg(strstr(s, "max-memory=1000") != NULL, "got:\n%s", s);
    free(s);
    registry_free(r);
    unlink(path);
    free(path);
    expect_one_error("namespace q: " GOOD " ttl=none max-keys=0\n", 1, "bad max-keys= value '0'");
    expect_one_error("namespace q: " GOOD " ttl=none max-keys=-5\n", 1, "bad max-keys= value '-5'");
    expect_one_error("namespace q: " GOOD " ttl=none max-keys=1k\n", 1, "bad max-keys= value '1k'");
    expect_one_error("namespace q: " GOOD " ttl=none max-memory=0\n", 1, "bad max-memory= value '0'");
    expect_one_error("namespace q: " GOOD " ttl=none max-memory=10zb\n", 1, "bad max-memory= value '10zb'");
    expect_one_error("namespace q: " GOOD " ttl=none max-memory=\n", 1, "bad max-memory= value ''");
    expect_one_error("namespace q: " GOOD " ttl=none max-keys=1 max-keys=2\n", 1, "repeated field 'max-keys'");
    expect_one_error("channel c: " GOOD " max-keys=10\n", 1, "max-keys= is not allowed on a channel line");
    expect_one_error("channel c: " GOOD " max-memory=1mb\n", 1, "max-memory= is not allowed on a channel line");
    expect_one_error("namespace c: instance=cache owner=c ttl=1h max-keys=10\n", 1,
                     "max-keys= is not allowed on instance 'cache': budgets are for a noeviction instance");
    expect_one_error("default instance=cache owner=c ttl=1h max-memory=1mb\n", 1,
                     "max-memory= is not allowed on instance 'cache'");
}
END_TEST

/* Issue 13: a default line takes what matches no prefix; it is last in the table. */
START_TEST(default_line_takes_unmatched_names)
{
    char *path = write_temp("namespace q: instance=durable ttl=none owner=queues\n"
                            "default instance=cache ttl=1h max-ttl=1d owner=legacy purpose=\"not yet registered\"\n"
                            "namespace cache: instance=cache ttl=1h owner=cache enforce=report\n");
    struct diag d = {0};
    struct registry *r = registry_load(path, instances, 2, &d);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(r->count, 2);
    ck_assert_ptr_nonnull(r->dflt);
    ck_assert_int_eq(r->dflt->is_default, 1);
    ck_assert_uint_eq(r->dflt->index, 2);
    ck_assert_int_eq(r->dflt->instance, 1);
    ck_assert_int_eq(r->dflt->ttl_ms, 3600000);
    ck_assert_int_eq(r->dflt->max_ttl_ms, 86400000);
    ck_assert_str_eq(r->dflt->owner, "legacy");
    /* lookup never returns it; resolve falls back to it, for keys and channels */
    ck_assert_ptr_null(registry_lookup(r, NS_KEY, "zzz", 3));
    ck_assert_ptr_eq(registry_resolve(r, NS_KEY, "zzz", 3), r->dflt);
    ck_assert_ptr_eq(registry_resolve(r, NS_CHANNEL, "zzz", 3), r->dflt);
    ck_assert_str_eq(registry_resolve(r, NS_KEY, "q:1", 3)->prefix, "q:");
    for (size_t i = 0; i < r->count; i++) ck_assert_uint_eq(r->entries[i].index, i);
    /* enforce: explicit report stays, unset lines take the global value */
    const struct namespace_entry *c = registry_lookup(r, NS_KEY, "cache:x", 7),
                                 *q = registry_lookup(r, NS_KEY, "q:", 2);
    ck_assert_int_eq(c->enforce, ENFORCE_REPORT);
    ck_assert_int_eq(q->enforce, ENFORCE_UNSET);
    ck_assert_int_eq(registry_reports(q), 0);
    registry_set_enforce(r, ENFORCE_REPORT);
    ck_assert_int_eq(registry_reports(q), 1);
    ck_assert_int_eq(registry_reports(r->dflt), 1);
    ck_assert_int_eq(c->enforce, ENFORCE_REPORT);

    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    registry_print(r, instances, 1, out);
    fclose(out);
    const char *last = strstr(buf, "| (default) |");
    ck_assert_msg(last != NULL, "no default row in:\n%s", buf);
    ck_assert_msg(strchr(last, '\n')[1] == '\0', "the default row is not the last:\n%s", buf);
    ck_assert_msg(strstr(last, "1h, enforce=report") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "| cache: |  | cache | 1h, enforce=report |") != NULL, "%s", buf);
    free(buf);
    registry_free(r);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(default_line_alone_is_a_registry)
{
    char *path = write_temp("default instance=durable ttl=none owner=legacy\n");
    struct diag d = {0};
    struct registry *r = registry_load(path, instances, 2, &d);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(r->count, 0);
    ck_assert_uint_eq(r->dflt->index, 0);
    ck_assert_ptr_eq(registry_resolve(r, NS_KEY, "anything", 8), r->dflt);
    registry_free(r);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(error_default_line)
{
    expect_one_error("default instance=durable ttl=none owner=a\ndefault instance=cache ttl=1h owner=b\n", 2,
                     "second default line (first on line 1");
    expect_one_error("default x: instance=durable ttl=none owner=a\n", 1, "takes no prefix ('x:')");
    expect_one_error("default instance=durable owner=a\n", 1, "missing ttl= (required on default lines");
    expect_one_error("default instance=durable ttl=1m near-cache=10s owner=a\n", 1, "near-cache= is not allowed");
    expect_one_error("default ttl=1m owner=a\n", 1, "missing instance=");
    expect_one_error("namespace a: " GOOD " ttl=1h enforce=maybe\n", 1, "bad enforce= value 'maybe' (on or report)");
    expect_one_error("namespace a: " GOOD " ttl=1h enforce=on enforce=report\n", 1, "repeated field 'enforce'");
}
END_TEST

static Suite *registry_suite(void)
{
    Suite *s = suite_create("registry");
    TCase *tc = tcase_create("load");
    tcase_add_test(tc, real_registry_parses);
    tcase_add_test(tc, longest_prefix_wins);
    tcase_add_test(tc, lookup_matches_brute_force);
    tcase_add_test(tc, valid_forms);
    tcase_add_test(tc, default_line_takes_unmatched_names);
    tcase_add_test(tc, depth_flag);
    tcase_add_test(tc, replicas_field);
    tcase_add_test(tc, budget_fields);
    tcase_add_test(tc, default_line_alone_is_a_registry);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, error_unknown_kind);
    tcase_add_test(tc, error_default_line);
    tcase_add_test(tc, error_missing_prefix);
    tcase_add_test(tc, error_unknown_field);
    tcase_add_test(tc, error_repeated_field);
    tcase_add_test(tc, error_missing_required);
    tcase_add_test(tc, error_unknown_instance_lists_valid);
    tcase_add_test(tc, error_bad_duration_names_field_and_value);
    tcase_add_test(tc, error_max_ttl_below_ttl);
    tcase_add_test(tc, error_sliding_without_ttl);
    tcase_add_test(tc, error_key_fields_on_channel);
    tcase_add_test(tc, error_near_cache_needs_keygate_namespace);
    tcase_add_test(tc, error_duplicate_prefix_names_first_line);
    tcase_add_test(tc, error_unterminated_quote);
    tcase_add_test(tc, error_empty_file_at_line_0);
    tcase_add_test(tc, error_missing_file);
    tcase_add_test(tc, all_errors_in_one_pass_in_line_order);
    suite_add_tcase(s, tc);
    tc = tcase_create("print");
    tcase_add_test(tc, print_markdown_table);
    tcase_add_test(tc, print_plain_aligned);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(registry_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
