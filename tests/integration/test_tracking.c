/* test_tracking.c: integration tests of client-side caching through keygate (issue 32): CLIENT TRACKING, CACHING, GETREDIR, TRACKINGINFO and the invalidation messages, byte for byte against a direct Redis doing the same, in RESP3 and RESP2, with one worker thread and with two. */
#include <check.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

/*
 * One harness per test case (two TLS redis-servers + keygate, the repo's conf/registry.conf),
 * `threads 1` or `threads 2`, and an oracle: a plain redis-server of its own, so that keygate's
 * writes (which reach the backends) never invalidate the oracle's clients (Redis's tracking
 * knows key names, not databases). A check sends the same commands to keygate and to the
 * oracle, reads raw reply bytes from both, and compares them (keys q:trN:...). Client ids differ between the two; where a reply carries one, the
 * direct side's id is written as keygate's before comparing. keygate has one user, root
 * (owners=*).
 */

static struct harness h;
static pid_t oracle_pid;
static int oracle_port;

/* The oracle: redis-server on a free port, no persistence; up once it answers PING. */
static void oracle_start(void)
{
    oracle_port = harness_free_port();
    char port[16];
    snprintf(port, sizeof(port), "%d", oracle_port);
    oracle_pid = fork();
    ck_assert_int_ge(oracle_pid, 0);
    if (oracle_pid == 0) {
        execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly",
               "no", "--dir", "/tmp", "--loglevel", "warning", (char *)NULL);
        _exit(127);
    }
    long long deadline = now_ms() + 5000;
    for (;;) {
        redisContext *c = redisConnect("127.0.0.1", oracle_port);
        redisReply *r = c && !c->err ? redisCommand(c, "PING") : NULL;
        int up = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        if (up) return;
        ck_assert_msg(now_ms() < deadline, "the oracle redis-server did not answer PING within 5 s");
        sleep_ms(10);
    }
}

static void oracle_stop(void)
{
    if (oracle_pid <= 0) return;
    kill(oracle_pid, SIGTERM);
    waitpid(oracle_pid, NULL, 0);
    oracle_pid = 0;
}

#define ROOT_PASS "tracking-root-pass"
#define READER_PASS "tracking-reader-pass" /* user reader: owners=queues (q:), read-only */

/* Wait until n instances' tracking feeds are up (a feed coming up flushes its instance's
 * tracking clients: none may be flushed under a test by a late one). */
static void wait_feeds(int n)
{
    redisContext *c = harness_must_client(&h);
    redisReply *r = cmd(c, "AUTH root %s", ROOT_PASS);
    freeReplyObject(r);
    long long deadline = now_ms() + 10000, up = -1;
    while ((up = harness_info_field(c, "tracking", "tracking_feeds_up")) != n && now_ms() < deadline) sleep_ms(10);
    ck_assert_msg(up == n, "tracking feeds up: %lld, want %d", up, n);
    redisFree(c);
}

static const char *setup_extra = "";
static const char *setup_registry = NULL; /* NULL: the repo's conf/registry.conf */

/* Wait until n instances' near-cache stream readers vouch (INFO tracking_streams_up). */
static void wait_streams(int n)
{
    redisContext *c = harness_must_client(&h);
    freeReplyObject(cmd(c, "AUTH root %s", ROOT_PASS));
    long long deadline = now_ms() + 10000, up = -1;
    while ((up = harness_info_field(c, "tracking", "tracking_streams_up")) != n && now_ms() < deadline) sleep_ms(10);
    ck_assert_msg(up == n, "tracking streams up: %lld, want %d", up, n);
    redisFree(c);
}

static char setup_config[500]; /* the extra keygate.conf lines of the running setup */

static void durable_feeds_block(int block);

static void setup_threads(int threads)
{
    char hash[65], hash2[65], *extra = setup_config;
    harness_sha256_hex(ROOT_PASS, hash);
    harness_sha256_hex(READER_PASS, hash2);
    snprintf(extra, sizeof(setup_config),
             "user root sha256=%s owners=* access=rw scripts=yes\nuser reader sha256=%s owners=queues access=ro\n"
             "threads %d\n%s",
             hash, hash2, threads, setup_extra);
    struct harness_opts o = {.extra_config = extra, .registry_text = setup_registry};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
    durable_feeds_block(0); /* a failed case of the stream tests may have left the feeds refused */
    oracle_start();
    wait_feeds(2);
}

static void setup1(void)
{
    setup_threads(1);
}

static void setup2(void)
{
    setup_threads(2);
}

static void setup_small_table(void)
{
    setup_extra = "tracking-table-max-keys 2\n";
    setup_threads(1);
}

/* A near-cache namespace u: on durable (its stream kg:nc:{kg:}:stream), beside q: and cache:. */
static const char stream_registry[] =
    "namespace kg:    instance=durable ttl=none owner=keygate purpose=\"near-cache streams\"\n"
    "namespace u:     instance=durable ttl=none near-cache=30s owner=api\n"
    "namespace q:     instance=durable ttl=none owner=queues\n"
    "namespace cache: instance=cache   ttl=1h owner=cache\n";

static void wait_streams(int n);

static void setup_stream(void)
{
    setup_registry = stream_registry;
    setup_extra = ""; /* the cases run in one process: tracking_small_table's bound stays otherwise */
    setup_threads(2);
    wait_streams(1);
}

static void setup_small_memory(void)
{
    setup_registry = NULL;
    setup_extra = "max-memory 2mb\n";
    setup_threads(1);
}

static void teardown(void)
{
    oracle_stop();
    harness_check_registry(&h);
    harness_stop(&h);
}

/* ---- raw connections ---- */

#define RAW_MAXARGS 24 /* the arguments of one SAME() command */

/* A connection to keygate (RESP3 after HELLO 3, else RESP2), logged in as root. */
static void kg_open(struct harness_raw *r, int resp3)
{
    harness_raw_open(r, h.port, resp3 ? "keygate (HELLO 3)" : "keygate (RESP2)");
    if (resp3) {
        harness_raw_send(r, "HELLO", "3", "AUTH", "root", ROOT_PASS, NULL);
        char *got = harness_raw_reply(r, NULL);
        ck_assert_msg(strncmp(got, "%7\r\n", 4) == 0, "HELLO 3: %s", harness_shown(got));
        free(got);
    } else {
        harness_raw_send(r, "AUTH", "root", ROOT_PASS, NULL);
        harness_raw_expect(r, "+OK\r\n", "AUTH");
    }
}

/* A connection to the oracle (RESP3 after HELLO 3, else RESP2). */
static void direct_open(struct harness_raw *r, int resp3)
{
    harness_raw_open(r, oracle_port, resp3 ? "redis (HELLO 3)" : "redis (RESP2)");
    if (resp3) {
        harness_raw_send(r, "HELLO", "3", NULL);
        char *got = harness_raw_reply(r, NULL);
        ck_assert_msg(strncmp(got, "%7\r\n", 4) == 0, "HELLO 3: %s", harness_shown(got));
        free(got);
    }
}

/* The connection's client id (CLIENT ID). */
static long long raw_id(struct harness_raw *r)
{
    harness_raw_send(r, "CLIENT", "ID", NULL);
    char *got = harness_raw_reply(r, NULL);
    ck_assert_msg(got[0] == ':', "CLIENT ID: %s", harness_shown(got));
    long long id = atoll(got + 1);
    free(got);
    return id;
}

/* One side of a comparison: a connection and its client id's text (the id a reply may carry). */
struct side {
    struct harness_raw *r;
    char id[32];
};

/* s with every ":from\r\n" written ":to\r\n" (malloc'd). */
static char *swap_id(const char *s, const char *from, const char *to)
{
    char pat[40], rep[40];
    snprintf(pat, sizeof(pat), ":%s\r\n", from);
    snprintf(rep, sizeof(rep), ":%s\r\n", to);
    size_t cap = strlen(s) * 2 + 64, o = 0;
    char *out = malloc(cap);
    while (*s) {
        if (from[0] && strncmp(s, pat, strlen(pat)) == 0) {
            memcpy(out + o, rep, strlen(rep));
            o += strlen(rep);
            s += strlen(pat);
        } else {
            out[o++] = *s++;
        }
    }
    out[o] = '\0';
    return out;
}

/* The next frame of both is the same bytes (the direct side's id `rid` read as keygate's `kid`). */
static void same_next_at(int line, struct harness_raw *kg, struct harness_raw *redis, const char *kid, const char *rid,
                         const char *what)
{
    char *a = harness_raw_reply(kg, NULL), *b0 = harness_raw_reply(redis, NULL);
    char *b = swap_id(b0, rid, kid);
    ck_assert_msg(strcmp(a, b) == 0, "line %d: %s: keygate answered %s, Redis %s", line, what, harness_shown(a),
                  harness_shown(b));
    free(a);
    free(b);
    free(b0);
}
#define same_next(kg, redis, what) same_next_at(__LINE__, kg, redis, "", "", what)

/* The same command to both, then their replies compared. "$ID" in argv is each side's redirect id. */
static void same_cmd_at(int line, struct side *k, struct side *d, const char *redir_k, const char *redir_d, int argc,
                        const char **argv)
{
    const char *ka[RAW_MAXARGS], *da[RAW_MAXARGS];
    char what[300] = "";
    for (int i = 0; i < argc; i++) {
        int is_id = strcmp(argv[i], "$ID") == 0;
        ka[i] = is_id ? redir_k : argv[i];
        da[i] = is_id ? redir_d : argv[i];
        strncat(what, argv[i], sizeof(what) - strlen(what) - 2);
        strcat(what, " ");
    }
    harness_raw_sendv(k->r, argc, ka);
    harness_raw_sendv(d->r, argc, da);
    same_next_at(line, k->r, d->r, redir_k, redir_d, what);
}

static const char *redir_k = "", *redir_d = "";
#define SAME(k, d, ...)                                                                                                \
    do {                                                                                                               \
        const char *argv_[] = {__VA_ARGS__};                                                                           \
        same_cmd_at(__LINE__, k, d, redir_k, redir_d, (int)(sizeof(argv_) / sizeof(argv_[0])), argv_);                 \
    } while (0)

/* ---- the protocol: replies and errors ---- */

/* Every CLIENT TRACKING / CACHING / GETREDIR / TRACKINGINFO case, in one protocol. */
static void protocol_cases(int resp3)
{
    struct harness_raw kr, dr;
    kg_open(&kr, resp3);
    direct_open(&dr, resp3);
    struct side k = {.r = &kr}, d = {.r = &dr};
    redir_k = redir_d = "";
    SAME(&k, &d, "CLIENT", "TRACKINGINFO");
    SAME(&k, &d, "CLIENT", "GETREDIR");
    SAME(&k, &d, "CLIENT", "CACHING", "YES");
    SAME(&k, &d, "CLIENT", "CACHING");
    SAME(&k, &d, "CLIENT", "TRACKING");
    SAME(&k, &d, "CLIENT", "TRACKING", "MAYBE");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "FOO");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "PREFIX");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "PREFIX", "q:a");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "BCAST", "OPTIN");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "BCAST", "OPTOUT");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "REDIRECT", "987654321");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "REDIRECT", "abc");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "REDIRECT", "-1");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "REDIRECT", "0");
    SAME(&k, &d, "CLIENT", "TRACKING", "MAYBE", "REDIRECT", "987654321");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "q:a", "PREFIX", "q:ab");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "q:ab", "PREFIX", "q:a");
    SAME(&k, &d, "CLIENT", "TRACKINGINFO");
    /* OPTIN, CLIENT CACHING, the switches */
    SAME(&k, &d, "CLIENT", "TRACKING", "on", "optin");
    SAME(&k, &d, "CLIENT", "TRACKINGINFO");
    SAME(&k, &d, "CLIENT", "CACHING", "NO");
    SAME(&k, &d, "CLIENT", "CACHING", "maybe");
    SAME(&k, &d, "CLIENT", "CACHING", "yes");
    SAME(&k, &d, "CLIENT", "TRACKINGINFO"); /* caching-yes: CLIENT commands keep it */
    SAME(&k, &d, "GET", "q:tr0:x");
    SAME(&k, &d, "CLIENT", "TRACKINGINFO"); /* one command's: gone */
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "OPTOUT");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "BCAST");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "NOLOOP");
    SAME(&k, &d, "CLIENT", "TRACKINGINFO"); /* OPTIN went: ON replaces the options */
    SAME(&k, &d, "CLIENT", "GETREDIR");
    SAME(&k, &d, "CLIENT", "TRACKING", "OFF");
    SAME(&k, &d, "CLIENT", "TRACKINGINFO");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "OPTOUT", "NOLOOP");
    SAME(&k, &d, "CLIENT", "CACHING", "YES");
    SAME(&k, &d, "CLIENT", "CACHING", "NO");
    SAME(&k, &d, "CLIENT", "TRACKINGINFO");
    SAME(&k, &d, "CLIENT", "TRACKING", "OFF", "BCAST"); /* options are read, then ignored */
    /* BCAST: prefixes sorted, added to on a second ON, collisions with the old ones */
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "q:tr0:b", "PREFIX", "q:tr0:a");
    SAME(&k, &d, "CLIENT", "TRACKINGINFO");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "q:tr0:ab");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "q:tr0:");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "q:tr0:c");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON");
    SAME(&k, &d, "CLIENT", "TRACKINGINFO");
    SAME(&k, &d, "CLIENT", "TRACKING", "OFF");
    SAME(&k, &d, "CLIENT", "TRACKINGINFO");
    /* REDIRECT to a client that exists: each side's own */
    struct harness_raw kr2, dr2;
    kg_open(&kr2, resp3);
    direct_open(&dr2, resp3);
    char kid[32], did[32];
    snprintf(kid, sizeof(kid), "%lld", raw_id(&kr2));
    snprintf(did, sizeof(did), "%lld", raw_id(&dr2));
    redir_k = kid;
    redir_d = did;
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "REDIRECT", "$ID");
    SAME(&k, &d, "CLIENT", "GETREDIR");
    SAME(&k, &d, "CLIENT", "TRACKINGINFO");
    SAME(&k, &d, "CLIENT", "TRACKING", "ON", "REDIRECT", "$ID", "REDIRECT", "$ID");
    SAME(&k, &d, "CLIENT", "TRACKING", "OFF");
    SAME(&k, &d, "CLIENT", "GETREDIR");
    harness_raw_close(&kr2);
    harness_raw_close(&dr2);
    harness_raw_close(&kr);
    harness_raw_close(&dr);
}

START_TEST(test_protocol_resp3_byte_for_byte)
{
    protocol_cases(1);
}
END_TEST

START_TEST(test_protocol_resp2_byte_for_byte)
{
    protocol_cases(0);
}
END_TEST

/* ---- default mode: the keys a client read, invalidated by writes through keygate ---- */

/* A tracking client (RESP3) and a writer, on keygate and on Redis, doing the same. */
struct pair {
    struct harness_raw kt, kw, dt, dw;
};

static void pair_open(struct pair *p, const char *tracking_opts)
{
    kg_open(&p->kt, 1);
    kg_open(&p->kw, 1);
    direct_open(&p->dt, 1);
    direct_open(&p->dw, 1);
    struct harness_raw *ts[2] = {&p->kt, &p->dt};
    for (int i = 0; i < 2; i++) {
        if (tracking_opts)
            harness_raw_send(ts[i], "CLIENT", "TRACKING", "ON", tracking_opts, NULL);
        else
            harness_raw_send(ts[i], "CLIENT", "TRACKING", "ON", NULL);
        harness_raw_expect(ts[i], "+OK\r\n", "CLIENT TRACKING ON");
    }
}

static void pair_close(struct pair *p)
{
    harness_raw_close(&p->kt);
    harness_raw_close(&p->kw);
    harness_raw_close(&p->dt);
    harness_raw_close(&p->dw);
}

/* Both sides' connection `which` (0 tracking, 1 writer) send argv; their replies compared. */
static void pair_cmd_at(int line, struct pair *p, int which, int argc, const char **argv)
{
    struct harness_raw *k = which ? &p->kw : &p->kt, *d = which ? &p->dw : &p->dt;
    harness_raw_sendv(k, argc, argv);
    harness_raw_sendv(d, argc, argv);
    same_next_at(line, k, d, "", "", argv[0]);
}
#define T(p, ...)                                                                                                      \
    do {                                                                                                               \
        const char *argv_[] = {__VA_ARGS__};                                                                           \
        pair_cmd_at(__LINE__, p, 0, (int)(sizeof(argv_) / sizeof(argv_[0])), argv_);                                   \
    } while (0)
#define W(p, ...)                                                                                                      \
    do {                                                                                                               \
        const char *argv_[] = {__VA_ARGS__};                                                                           \
        pair_cmd_at(__LINE__, p, 1, (int)(sizeof(argv_) / sizeof(argv_[0])), argv_);                                   \
    } while (0)

/* The tracking connections' next frames (a push) are the same bytes, and are `want`. */
static void pair_push_at(int line, struct pair *p, const char *want)
{
    char *a = harness_raw_reply(&p->kt, NULL), *b = harness_raw_reply(&p->dt, NULL);
    ck_assert_msg(strcmp(a, b) == 0, "line %d: keygate pushed %s, Redis %s", line, harness_shown(a), harness_shown(b));
    ck_assert_msg(strcmp(a, want) == 0, "line %d: pushed %s, want %s", line, harness_shown(a), harness_shown(want));
    free(a);
    free(b);
}
#define PUSH(p, want) pair_push_at(__LINE__, p, want)

#define INVALIDATE(key) ">2\r\n$10\r\ninvalidate\r\n*1\r\n$" #key "\r\n"
static void invalidate_frame(char *out, size_t n, const char *key)
{
    snprintf(out, n, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$%zu\r\n%s\r\n", strlen(key), key);
}

/* A read, a write by another client: one push, then none for the next write (one-shot); a key
 * read twice gives one push; a key never read gives none. The "none" is shown by the push of a
 * later key coming first. */
START_TEST(test_default_mode_invalidation)
{
    struct pair p;
    pair_open(&p, NULL);
    char want[128];
    T(&p, "GET", "q:tr1:a");
    T(&p, "GET", "q:tr1:a");
    T(&p, "MGET", "q:tr1:b", "q:tr1:c");
    W(&p, "SET", "q:tr1:a", "1");
    invalidate_frame(want, sizeof(want), "q:tr1:a");
    PUSH(&p, want);
    W(&p, "SET", "q:tr1:a", "2");  /* forgotten: nothing */
    W(&p, "SET", "q:tr1:zz", "2"); /* never read: nothing */
    W(&p, "SET", "q:tr1:b", "3");
    invalidate_frame(want, sizeof(want), "q:tr1:b");
    PUSH(&p, want);
    /* the client's own write: the push follows its reply */
    T(&p, "GET", "q:tr1:d");
    T(&p, "SET", "q:tr1:d", "x");
    invalidate_frame(want, sizeof(want), "q:tr1:d");
    PUSH(&p, want);
    /* a write in a transaction (keygate wraps TTL-less writes as they came) */
    T(&p, "GET", "q:tr1:e");
    W(&p, "MULTI");
    W(&p, "INCR", "q:tr1:e");
    W(&p, "EXEC");
    invalidate_frame(want, sizeof(want), "q:tr1:e");
    PUSH(&p, want);
    pair_close(&p);
}
END_TEST

/* NOLOOP: the client's own writes say nothing to it; another's do. */
START_TEST(test_noloop)
{
    struct pair p;
    pair_open(&p, "NOLOOP");
    char want[128];
    T(&p, "GET", "q:tr2:a");
    T(&p, "SET", "q:tr2:a", "own");
    T(&p, "GET", "q:tr2:b");
    W(&p, "SET", "q:tr2:b", "other");
    invalidate_frame(want, sizeof(want), "q:tr2:b");
    PUSH(&p, want); /* first: nothing came for q:tr2:a */
    pair_close(&p);
}
END_TEST

/* OPTIN: only a read after CLIENT CACHING YES is remembered; OPTOUT: all but after CACHING NO. */
START_TEST(test_optin_optout)
{
    struct pair p;
    pair_open(&p, "OPTIN");
    char want[128];
    T(&p, "GET", "q:tr3:a"); /* not remembered */
    T(&p, "CLIENT", "CACHING", "YES");
    T(&p, "GET", "q:tr3:b");
    T(&p, "GET", "q:tr3:c"); /* CACHING lasted one command */
    W(&p, "SET", "q:tr3:a", "1");
    W(&p, "SET", "q:tr3:c", "1");
    W(&p, "SET", "q:tr3:b", "1");
    invalidate_frame(want, sizeof(want), "q:tr3:b");
    PUSH(&p, want);
    pair_close(&p);

    pair_open(&p, "OPTOUT");
    T(&p, "CLIENT", "CACHING", "NO");
    T(&p, "GET", "q:tr3:d"); /* not remembered */
    T(&p, "GET", "q:tr3:e");
    W(&p, "SET", "q:tr3:d", "1");
    W(&p, "SET", "q:tr3:e", "1");
    invalidate_frame(want, sizeof(want), "q:tr3:e");
    PUSH(&p, want);
    pair_close(&p);
}
END_TEST

/* Several tracking clients (with threads 2 they land on both workers): each gets its push. */
START_TEST(test_many_clients_each_told)
{
    enum { N = 6 };
    struct harness_raw t[N], w;
    for (int i = 0; i < N; i++) {
        kg_open(&t[i], 1);
        harness_raw_send(&t[i], "CLIENT", "TRACKING", "ON", NULL);
        harness_raw_expect(&t[i], "+OK\r\n", "TRACKING ON");
        harness_raw_send(&t[i], "GET", "q:tr4:k", NULL);
        harness_raw_expect(&t[i], "_\r\n", "GET");
    }
    kg_open(&w, 1);
    harness_raw_send(&w, "SET", "q:tr4:k", "v", NULL);
    harness_raw_expect(&w, "+OK\r\n", "SET");
    char want[128];
    invalidate_frame(want, sizeof(want), "q:tr4:k");
    for (int i = 0; i < N; i++) harness_raw_expect(&t[i], want, "the push");
    for (int i = 0; i < N; i++) harness_raw_close(&t[i]);
    harness_raw_close(&w);
}
END_TEST

/* BCAST: every write under the prefixes, no read needed, not one-shot. */
START_TEST(test_bcast_prefixes)
{
    struct pair p;
    pair_open(&p, NULL);
    struct harness_raw *ts[2] = {&p.kt, &p.dt};
    for (int i = 0; i < 2; i++) {
        harness_raw_send(ts[i], "CLIENT", "TRACKING", "OFF", NULL);
        harness_raw_expect(ts[i], "+OK\r\n", "OFF");
    }
    T(&p, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "q:tr5:a", "PREFIX", "q:tr5:b");
    char want[128];
    W(&p, "SET", "q:tr5:a1", "1");
    invalidate_frame(want, sizeof(want), "q:tr5:a1");
    PUSH(&p, want);
    W(&p, "SET", "q:tr5:a1", "2"); /* again: BCAST is not one-shot */
    PUSH(&p, want);
    W(&p, "SET", "q:tr5:c1", "2"); /* under no prefix: nothing */
    W(&p, "SET", "q:tr5:b1", "2");
    invalidate_frame(want, sizeof(want), "q:tr5:b1");
    PUSH(&p, want);
    T(&p, "SET", "q:tr5:b2", "own"); /* its own write too (no NOLOOP) */
    invalidate_frame(want, sizeof(want), "q:tr5:b2");
    PUSH(&p, want);
    pair_close(&p);
}
END_TEST

/* The registry rules BCAST: a prefix must lie in namespaces the user may read, as a SCAN
 * pattern must; no prefix means every key: refused without a default line. */
START_TEST(test_bcast_prefix_registry_checked)
{
    struct harness_raw r;
    harness_raw_open(&r, h.port, "keygate (reader)");
    harness_raw_send(&r, "AUTH", "reader", READER_PASS, NULL);
    harness_raw_expect(&r, "+OK\r\n", "AUTH reader");
    harness_raw_send(&r, "CLIENT", "TRACKING", "ON", "BCAST", NULL);
    harness_raw_expect(&r,
                       "-NOPERM keygate: BCAST prefix '' lies in no namespace and the registry has no default line\r\n",
                       "BCAST, no prefix");
    harness_raw_send(&r, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "q:tr6:", "PREFIX", "cache:tr6:", NULL);
    harness_raw_expect(&r,
                       "-NOPERM keygate: BCAST prefix 'cache:tr6:' covers namespace 'cache:' (owner cache) that user "
                       "'reader' may not read\r\n",
                       "a namespace of another owner");
    harness_raw_send(&r, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "cache:", NULL);
    char *got = harness_raw_reply(&r, NULL);
    ck_assert_msg(strncmp(got, "-NOPERM", 7) == 0, "cache: %s", harness_shown(got));
    free(got);
    harness_raw_send(&r, "CLIENT", "TRACKINGINFO", NULL); /* nothing changed */
    harness_raw_expect(&r, "*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n",
                       "TRACKINGINFO");
    harness_raw_send(&r, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "q:tr6:", NULL);
    harness_raw_expect(&r, "+OK\r\n", "a prefix in its namespace");
    /* default mode: only keys it may read are remembered (the others are refused) */
    harness_raw_send(&r, "CLIENT", "TRACKING", "OFF", NULL);
    harness_raw_expect(&r, "+OK\r\n", "OFF");
    harness_raw_send(&r, "CLIENT", "TRACKING", "ON", NULL);
    harness_raw_expect(&r, "+OK\r\n", "ON");
    harness_raw_send(&r, "GET", "cache:tr6:x", NULL);
    got = harness_raw_reply(&r, NULL);
    ck_assert_msg(strncmp(got, "-NOPERM", 7) == 0, "GET cache: %s", harness_shown(got));
    free(got);
    harness_raw_close(&r);
}
END_TEST

/* RESP2: the messages go to the REDIRECT client, subscribed to __redis__:invalidate; a RESP3
 * REDIRECT client gets pushes; a REDIRECT client gone: tracking-redir-broken (RESP3). */
START_TEST(test_redirect_resp2_and_broken)
{
    struct harness_raw kr, kt, kw, dr, dt, dw;
    kg_open(&kr, 0);
    kg_open(&kt, 0);
    kg_open(&kw, 0);
    direct_open(&dr, 0);
    direct_open(&dt, 0);
    direct_open(&dw, 0);
    char kid[32], did[32];
    snprintf(kid, sizeof(kid), "%lld", raw_id(&kr));
    snprintf(did, sizeof(did), "%lld", raw_id(&dr));
    struct side r = {.r = &kr}, rd = {.r = &dr}, t = {.r = &kt}, td = {.r = &dt}, w = {.r = &kw}, wd = {.r = &dw};
    redir_k = kid;
    redir_d = did;
    SAME(&r, &rd, "SUBSCRIBE", "__redis__:invalidate");
    SAME(&t, &td, "CLIENT", "TRACKING", "ON", "REDIRECT", "$ID");
    SAME(&t, &td, "GET", "q:tr7:a");
    SAME(&w, &wd, "SET", "q:tr7:a", "1");
    same_next(&kr, &dr, "the RESP2 message on the REDIRECT client");
    /* a RESP3 tracking client redirecting to a RESP3 client */
    struct harness_raw k3, k3r, d3, d3r;
    kg_open(&k3, 1);
    kg_open(&k3r, 1);
    direct_open(&d3, 1);
    direct_open(&d3r, 1);
    snprintf(kid, sizeof(kid), "%lld", raw_id(&k3r));
    snprintf(did, sizeof(did), "%lld", raw_id(&d3r));
    struct side s3 = {.r = &k3}, s3d = {.r = &d3};
    SAME(&s3, &s3d, "CLIENT", "TRACKING", "ON", "REDIRECT", "$ID");
    SAME(&s3, &s3d, "GET", "q:tr7:b");
    SAME(&w, &wd, "SET", "q:tr7:b", "1");
    same_next(&k3r, &d3r, "the push on the RESP3 REDIRECT client");
    SAME(&s3, &s3d, "GET", "q:tr7:c");
    harness_raw_close(&k3r);
    harness_raw_close(&d3r);
    /* wait until both servers see it gone: CLIENT TRACKINGINFO says nothing of it yet, so a
     * write then a read of the broken flag by polling would race; instead the write is retried
     * on a fresh key until the broken redirect shows */
    long long deadline = now_ms() + 5000;
    int n = 0;
    for (;;) {
        char key[32];
        snprintf(key, sizeof(key), "q:tr7:c%d", n++);
        SAME(&s3, &s3d, "GET", key);
        SAME(&w, &wd, "SET", key, "x");
        harness_raw_send(&k3, "CLIENT", "TRACKINGINFO", NULL);
        harness_raw_send(&d3, "CLIENT", "TRACKINGINFO", NULL);
        char *a = harness_raw_reply(&k3, NULL), *b = harness_raw_reply(&d3, NULL);
        int ka = a[0] == '>', da = b[0] == '>';
        if (ka && da) {
            char *b2 = swap_id(b, did, kid);
            ck_assert_msg(strcmp(a, b2) == 0, "broken redirect: keygate %s, Redis %s", harness_shown(a),
                          harness_shown(b2));
            free(a);
            free(b);
            free(b2);
            same_next_at(__LINE__, &k3, &d3, kid, did, "TRACKINGINFO after the broken redirect");
            break;
        }
        ck_assert_msg(!ka && !da, "one side saw the redirect client gone: keygate %s, Redis %s", harness_shown(a),
                      harness_shown(b));
        free(a);
        free(b);
        ck_assert_msg(now_ms() < deadline, "no broken redirect within 5 s");
    }
    harness_raw_close(&k3);
    harness_raw_close(&d3);
    harness_raw_close(&kr);
    harness_raw_close(&kt);
    harness_raw_close(&kw);
    harness_raw_close(&dr);
    harness_raw_close(&dt);
    harness_raw_close(&dw);
}
END_TEST

static int cmp_ll(const void *a, const void *b);
static long long now_us(void);

/* Two keygates over the same instances: a write through keygate B invalidates what a tracking
 * client of keygate A read (A learns it from Redis's tracking, its feed); the lag from B's reply
 * to A's push is measured. */
START_TEST(test_write_through_another_keygate)
{
    ck_assert_msg(harness_peer_start(&h, NULL) == 0, "second keygate: %s", h.error);
    redisContext *b = harness_must_peer_client(&h);
    freeReplyObject(cmd(b, "AUTH root %s", ROOT_PASS));
    struct harness_raw t;
    kg_open(&t, 1);
    harness_raw_send(&t, "CLIENT", "TRACKING", "ON", NULL);
    harness_raw_expect(&t, "+OK\r\n", "TRACKING ON");
    enum { ROUNDS = 200 };
    long long lag[ROUNDS];
    char key[64], want[128];
    for (int i = 0; i < ROUNDS; i++) {
        snprintf(key, sizeof(key), "q:tr11:k%d", i);
        harness_raw_send(&t, "GET", key, NULL);
        harness_raw_expect(&t, "_\r\n", "GET on keygate A");
        redisReply *r = cmd(b, "SET %s v", key);
        ck_assert_msg(r->type == REDIS_REPLY_STATUS, "SET on keygate B: %s", describe(r));
        freeReplyObject(r);
        long long t0 = now_us();
        invalidate_frame(want, sizeof(want), key);
        harness_raw_expect(&t, want, "the push on keygate A of a write through keygate B");
        lag[i] = now_us() - t0;
    }
    qsort(lag, ROUNDS, sizeof(lag[0]), cmp_ll);
    fprintf(stderr,
            "two keygates: write through B -> push on A, after B's reply, over %d writes: p50 %lld us, "
            "p99 %lld us, max %lld us\n",
            ROUNDS, lag[ROUNDS / 2], lag[ROUNDS * 99 / 100], lag[ROUNDS - 1]);
    ck_assert_msg(lag[ROUNDS * 99 / 100] < 10000, "p99 lag %lld us over 10 ms", lag[ROUNDS * 99 / 100]);
    redisFree(b);
    harness_raw_close(&t);
    (void)harness_peer_stop(&h);
}
END_TEST

/* rueidis's handshake, pipelined in one write: HELLO 3, CLIENT TRACKING ON OPTIN, then CLIENT
 * CACHING YES before each cached read (a MULTI-less pair); every reply and the push after a
 * write, byte for byte with the oracle. */
START_TEST(test_rueidis_style_pipelined_handshake)
{
    struct harness_raw k, d;
    harness_raw_open(&k, h.port, "keygate (pipelined)");
    direct_open(&d, 0);
    /* keygate needs AUTH first (the oracle has none): HELLO 3 AUTH ... vs HELLO 3 */
    const char *kh[] = {"HELLO", "3", "AUTH", "root", ROOT_PASS}, *dh[] = {"HELLO", "3"};
    const char *on[] = {"CLIENT", "TRACKING", "ON", "OPTIN"}, *cy[] = {"CLIENT", "CACHING", "YES"},
               *get[] = {"GET", "q:tr9:a"}, *get2[] = {"GET", "q:tr9:b"};
    struct harness_raw *both[2] = {&k, &d};
    for (int i = 0; i < 2; i++) {
        if (i == 0)
            harness_raw_sendv(both[i], 5, kh);
        else
            harness_raw_sendv(both[i], 2, dh);
        harness_raw_sendv(both[i], 4, on);
        harness_raw_sendv(both[i], 3, cy);
        harness_raw_sendv(both[i], 2, get);
        harness_raw_sendv(both[i], 2, get2); /* not cached: no CACHING YES before it */
    }
    char *a = harness_raw_reply(&k, NULL), *b = harness_raw_reply(&d, NULL);
    ck_assert_msg(a[0] == '%' && b[0] == '%', "HELLO 3: %s / %s", harness_shown(a), harness_shown(b));
    free(a);
    free(b);
    for (int i = 0; i < 4; i++) same_next(&k, &d, "the pipelined handshake's replies");
    struct harness_raw kw, dw;
    kg_open(&kw, 1);
    direct_open(&dw, 1);
    struct side w = {.r = &kw}, wd = {.r = &dw};
    redir_k = redir_d = "";
    SAME(&w, &wd, "SET", "q:tr9:b", "1"); /* not cached: nothing */
    SAME(&w, &wd, "SET", "q:tr9:a", "1");
    same_next(&k, &d, "the push for the read after CLIENT CACHING YES");
    harness_raw_close(&k);
    harness_raw_close(&d);
    harness_raw_close(&kw);
    harness_raw_close(&dw);
}
END_TEST

/* tracking-table-max-keys: a third key read pushes one out, and its reader is told (as Redis's
 * table eviction tells it); INFO tracking says so. */
START_TEST(test_table_max_keys_evicts_with_a_push)
{
    struct harness_raw t;
    kg_open(&t, 1);
    harness_raw_send(&t, "CLIENT", "TRACKING", "ON", NULL);
    harness_raw_expect(&t, "+OK\r\n", "ON");
    harness_raw_send(&t, "MGET", "q:tr10:a", "q:tr10:b", "q:tr10:c", NULL);
    harness_raw_expect(&t, "*3\r\n_\r\n_\r\n_\r\n", "MGET");
    char *got = harness_raw_reply(&t, NULL);
    char want[3][128];
    invalidate_frame(want[0], sizeof(want[0]), "q:tr10:a");
    invalidate_frame(want[1], sizeof(want[1]), "q:tr10:b");
    invalidate_frame(want[2], sizeof(want[2]), "q:tr10:c");
    ck_assert_msg(strcmp(got, want[0]) == 0 || strcmp(got, want[1]) == 0 || strcmp(got, want[2]) == 0,
                  "the evicted key's push: %s", harness_shown(got));
    free(got);
    redisContext *c = harness_must_client(&h);
    freeReplyObject(cmd(c, "AUTH root %s", ROOT_PASS));
    ck_assert_int_eq(harness_must_info_field(c, "tracking", "tracking_total_keys"), 2);
    ck_assert_int_eq(harness_must_info_field(c, "tracking", "tracking_invalidations_evict"), 1);
    ck_assert_int_eq(harness_must_info_field(c, "tracking", "tracking_clients"), 1);
    redisFree(c);
    harness_raw_close(&t);
}
END_TEST

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Writes made directly to Redis (another keygate, a script, a direct client) reach keygate's
 * tracking clients through the instance's feed (Redis's own BCAST tracking): default mode and
 * BCAST. The lag from the direct write's reply to the push is measured. When the feed drops
 * (the instance is killed), the clients that read keys of it get Redis's flush-all, and those
 * that did not get nothing; once it is back, direct writes are seen again. */
START_TEST(test_feed_direct_writes_and_drop)
{
    struct harness_raw t, b, u;
    kg_open(&t, 1);
    kg_open(&b, 1);
    kg_open(&u, 1);
    harness_raw_send(&t, "CLIENT", "TRACKING", "ON", NULL);
    harness_raw_expect(&t, "+OK\r\n", "t: TRACKING ON");
    harness_raw_send(&b, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "cache:tr8:b", NULL);
    harness_raw_expect(&b, "+OK\r\n", "b: TRACKING ON BCAST");
    harness_raw_send(&u, "CLIENT", "TRACKING", "ON", NULL);
    harness_raw_expect(&u, "+OK\r\n", "u: TRACKING ON");
    redisContext *d = harness_must_direct(&h, "cache");
    char key[64], want[128];
    enum { ROUNDS = 200 };
    long long lag[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        snprintf(key, sizeof(key), "cache:tr8:k%d", i);
        harness_raw_send(&t, "GET", key, NULL);
        harness_raw_expect(&t, "_\r\n", "GET");
        long long t0 = now_us();
        redisReply *r = cmd(d, "SET %s v EX 100", key);
        freeReplyObject(r);
        invalidate_frame(want, sizeof(want), key);
        harness_raw_expect(&t, want, "the push of a direct write");
        lag[i] = now_us() - t0;
    }
    qsort(lag, ROUNDS, sizeof(lag[0]), cmp_ll);
    fprintf(stderr, "tracking feed: direct write -> push lag over %d writes: p50 %lld us, p99 %lld us, max %lld us\n",
            ROUNDS, lag[ROUNDS / 2], lag[ROUNDS * 99 / 100], lag[ROUNDS - 1]);
    ck_assert_msg(lag[ROUNDS * 99 / 100] < 10000, "p99 lag %lld us over 10 ms", lag[ROUNDS * 99 / 100]);
    /* BCAST: a direct write under its prefix */
    redisReply *r = cmd(d, "SET cache:tr8:b1 v EX 100");
    freeReplyObject(r);
    invalidate_frame(want, sizeof(want), "cache:tr8:b1");
    harness_raw_expect(&b, want, "BCAST: the push of a direct write");
    /* the feed drops: t (read cache: keys) and b (BCAST) get the flush, u (read q: only) does not */
    harness_raw_send(&t, "GET", "cache:tr8:x", NULL);
    harness_raw_expect(&t, "_\r\n", "GET");
    harness_raw_send(&u, "GET", "q:tr8:u", NULL);
    harness_raw_expect(&u, "_\r\n", "GET");
    redisFree(d);
    ck_assert_msg(harness_backend_kill(&h, "cache") == 0, "kill: %s", h.error);
    const char *flush = ">2\r\n$10\r\ninvalidate\r\n_\r\n";
    harness_raw_expect(&t, flush, "t: flush-all when the feed dropped");
    harness_raw_expect(&b, flush, "b: flush-all when the feed dropped");
    struct harness_raw w;
    kg_open(&w, 1);
    harness_raw_send(&w, "SET", "q:tr8:u", "1", NULL);
    harness_raw_expect(&w, "+OK\r\n", "SET");
    invalidate_frame(want, sizeof(want), "q:tr8:u");
    harness_raw_expect(&u, want, "u: no flush, its own key's push first");
    ck_assert_msg(harness_backend_restart(&h, "cache") == 0, "restart: %s", h.error);
    wait_feeds(2);
    d = harness_must_direct(&h, "cache");
    harness_raw_send(&t, "GET", "cache:tr8:y", NULL);
    harness_raw_expect(&t, "_\r\n", "GET");
    r = cmd(d, "SET cache:tr8:y v EX 100");
    freeReplyObject(r);
    invalidate_frame(want, sizeof(want), "cache:tr8:y");
    harness_raw_expect(&t, want,
                       "the push of a direct write once the feed is back (no second flush: nothing read meanwhile)");
    redisFree(d);
    harness_raw_close(&t);
    harness_raw_close(&b);
    harness_raw_close(&u);
    harness_raw_close(&w);
}
END_TEST

/* ---- the near cache's stream as a source (README "Client-side caching": what keygate vouches for) ---- */

/* Durable's tracking feeds (every keygate's: Redis's BCAST tracking) cut and kept down (their
 * CLIENT TRACKING refused by an ACL rule), or let back (block 0). */
static void durable_feeds_block(int block)
{
    redisContext *d = harness_must_direct(&h, "durable");
    redisReply *r = cmd(d, "ACL SETUSER default %s", block ? "-client|tracking" : "+client|tracking");
    ck_assert_msg(r->type == REDIS_REPLY_STATUS, "ACL SETUSER: %s", describe(r));
    freeReplyObject(r);
    r = cmd(d, "CLIENT LIST");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    for (char *line = r->str; block && line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        char *name = strstr(line, " name=keygate-tracking ");
        char *nl = strchr(line, '\n');
        if (!name || (nl && name > nl)) continue;
        redisReply *k = cmd(d, "CLIENT KILL ID %lld", atoll(line + 3));
        freeReplyObject(k);
    }
    freeReplyObject(r);
    redisFree(d);
}

/* Two keygates; A's feed of durable is cut and kept down while its stream keeps flowing. A
 * client of A that read a plain key of durable gets the flush-all at once; one that read only
 * near-cache keys keeps its cache, hears a write through keygate B from the stream, and when the
 * feed is back gets one invalidation per near-cache key it read (writes without keygate, expiry
 * and eviction of the outage are unknown), not a flush. */
START_TEST(test_stream_source_while_feed_down)
{
    ck_assert_msg(harness_peer_start(&h, NULL) == 0, "second keygate: %s", h.error);
    redisContext *b = harness_must_peer_client(&h);
    freeReplyObject(cmd(b, "AUTH root %s", ROOT_PASS));
    struct harness_raw nc, plain;
    kg_open(&nc, 1);
    kg_open(&plain, 1);
    harness_raw_send(&nc, "CLIENT", "TRACKING", "ON", NULL);
    harness_raw_expect(&nc, "+OK\r\n", "nc: TRACKING ON");
    harness_raw_send(&plain, "CLIENT", "TRACKING", "ON", NULL);
    harness_raw_expect(&plain, "+OK\r\n", "plain: TRACKING ON");
    harness_raw_send(&nc, "GET", "u:tr12:a", NULL);
    harness_raw_expect(&nc, "_\r\n", "GET u:tr12:a");
    harness_raw_send(&nc, "GET", "u:tr12:b", NULL);
    harness_raw_expect(&nc, "_\r\n", "GET u:tr12:b");
    harness_raw_send(&plain, "GET", "q:tr12:x", NULL);
    harness_raw_expect(&plain, "_\r\n", "GET q:tr12:x");
    durable_feeds_block(1);
    const char *flush = ">2\r\n$10\r\ninvalidate\r\n_\r\n";
    harness_raw_expect(&plain, flush, "plain: the flush-all when durable's feed dropped");
    wait_feeds(1);
    redisReply *r = cmd(b, "SET u:tr12:a v");
    ck_assert_msg(r->type == REDIS_REPLY_STATUS, "SET on keygate B: %s", describe(r));
    freeReplyObject(r);
    char want[128];
    invalidate_frame(want, sizeof(want), "u:tr12:a");
    harness_raw_expect(&nc, want, "nc: no flush; the stream's push of B's write, the feed down");
    durable_feeds_block(0);
    invalidate_frame(want, sizeof(want), "u:tr12:b");
    harness_raw_expect(&nc, want, "nc: the feed back, its other near-cache key invalidated (not a flush)");
    wait_feeds(2);
    redisFree(b);
    harness_raw_close(&nc);
    harness_raw_close(&plain);
    (void)harness_peer_stop(&h);
}
END_TEST

/* A's feed down, its clients of near-cache keys kept by the stream: a gap in the stream (its key
 * deleted after A read from it) flushes them; a client of other keys hears nothing of it. */
START_TEST(test_stream_gap_flushes_while_feed_down)
{
    ck_assert_msg(harness_peer_start(&h, NULL) == 0, "second keygate: %s", h.error);
    redisContext *b = harness_must_peer_client(&h);
    freeReplyObject(cmd(b, "AUTH root %s", ROOT_PASS));
    struct harness_raw nc, other;
    kg_open(&nc, 1);
    kg_open(&other, 1);
    harness_raw_send(&nc, "CLIENT", "TRACKING", "ON", NULL);
    harness_raw_expect(&nc, "+OK\r\n", "nc: TRACKING ON");
    harness_raw_send(&other, "CLIENT", "TRACKING", "ON", NULL);
    harness_raw_expect(&other, "+OK\r\n", "other: TRACKING ON");
    harness_raw_send(&nc, "MGET", "u:tr13:a", "u:tr13:b", NULL);
    harness_raw_expect(&nc, "*2\r\n_\r\n_\r\n", "MGET u:tr13:a u:tr13:b");
    harness_raw_send(&other, "GET", "cache:tr13:x", NULL);
    harness_raw_expect(&other, "_\r\n", "GET cache:tr13:x");
    durable_feeds_block(1);
    wait_feeds(1);
    /* A's reader reads an entry (the push proves it): the stream has a cursor to lose */
    redisReply *r = cmd(b, "SET u:tr13:a v");
    freeReplyObject(r);
    char want[128];
    invalidate_frame(want, sizeof(want), "u:tr13:a");
    harness_raw_expect(&nc, want, "nc: the stream's push of B's write");
    redisContext *c = harness_must_client(&h);
    freeReplyObject(cmd(c, "AUTH root %s", ROOT_PASS));
    long long flushes = harness_must_info_field(c, "tracking", "tracking_invalidations_flush");
    harness_direct_int(&h, "durable", "DEL kg:nc:{kg:}:stream");
    harness_raw_expect(&nc, ">2\r\n$10\r\ninvalidate\r\n_\r\n", "nc: the flush-all of a stream gap, the feed down");
    ck_assert_int_eq(harness_must_info_field(c, "tracking", "tracking_invalidations_flush"), flushes + 1);
    /* other read cache: only: a write there reaches it first, no flush before it */
    r = cmd(b, "SET cache:tr13:x v");
    freeReplyObject(r);
    invalidate_frame(want, sizeof(want), "cache:tr13:x");
    harness_raw_expect(&other, want, "other: no flush (it read nothing of durable)");
    durable_feeds_block(0);
    wait_feeds(2);
    redisFree(c);
    redisFree(b);
    harness_raw_close(&nc);
    harness_raw_close(&other);
    (void)harness_peer_stop(&h);
}
END_TEST

/* ---- what the tracker remembers counts against max-memory ---- */

/* Client t (RESP3, tracking) reads n keys q:tr14:<i padded to 200 bytes> from `from`, in MGETs of
 * 250; the pushes that come meanwhile (keys pushed out) are counted. */
static long long read_keys(struct harness_raw *t, int from, int n)
{
    enum { BATCH = 250, KEYLEN = 200 };
    static char keys[BATCH][KEYLEN + 1];
    const char *argv[BATCH + 1] = {"MGET"};
    long long pushes = 0;
    for (int at = from; at < from + n; at += BATCH) {
        int k = 0;
        for (; k < BATCH && at + k < from + n; k++) {
            snprintf(keys[k], sizeof(keys[k]), "q:tr14:%0*d", KEYLEN - 7, at + k);
            argv[k + 1] = keys[k];
        }
        harness_raw_sendv(t, k + 1, argv);
        for (;;) {
            char *f = harness_raw_reply(t, NULL);
            int reply = f[0] == '*';
            ck_assert_msg(reply || strncmp(f, ">2\r\n$10\r\ninvalidate\r\n", 21) == 0, "MGET: %.60s", harness_shown(f));
            pushes += !reply;
            free(f);
            if (reply) break;
        }
    }
    return pushes;
}

/* The keys a tracking client read count in the process's max-memory total (INFO clients
 * memory_used_bytes) as tracking_memory_bytes; past max-memory the table lets keys go, each
 * with its push (as past tracking-table-max-keys), so it never holds the process over the cap:
 * keygate keeps answering. */
START_TEST(test_tracking_memory_counted)
{
    redisContext *c = harness_must_client(&h);
    freeReplyObject(cmd(c, "AUTH root %s", ROOT_PASS));
    long long used0 = harness_must_info_field(c, "clients", "memory_used_bytes");
    ck_assert_int_eq(harness_must_info_field(c, "tracking", "tracking_memory_bytes"), 0);
    struct harness_raw t;
    kg_open(&t, 1);
    harness_raw_send(&t, "CLIENT", "TRACKING", "ON", NULL);
    harness_raw_expect(&t, "+OK\r\n", "TRACKING ON");
    ck_assert_int_eq(read_keys(&t, 0, 1000), 0);
    long long tracked = harness_must_info_field(c, "tracking", "tracking_memory_bytes");
    long long used1 = harness_must_info_field(c, "clients", "memory_used_bytes");
    fprintf(stderr, "tracking memory: 1000 keys of 200 bytes: %lld bytes; max-memory total %lld -> %lld\n", tracked,
            used0, used1);
    ck_assert_msg(tracked >= 1000 * 200, "1000 keys of 200 bytes: tracking_memory_bytes %lld", tracked);
    ck_assert_msg(used1 - used0 >= tracked - 64 * 1024, "max-memory total %lld -> %lld, tracking holds %lld", used0,
                  used1, tracked);
    /* 2mb: about 8000 such keys fit; 20000 are read */
    long long pushes = read_keys(&t, 1000, 19000);
    long long keys = harness_must_info_field(c, "tracking", "tracking_total_keys");
    long long evicted = harness_must_info_field(c, "tracking", "tracking_invalidations_evict");
    tracked = harness_must_info_field(c, "tracking", "tracking_memory_bytes");
    fprintf(stderr, "tracking memory: 20000 keys read under max-memory 2mb: %lld kept (%lld bytes), %lld evicted\n",
            keys, tracked, evicted);
    ck_assert_msg(keys > 0 && keys < 20000 && evicted > 0 && keys + evicted == 20000,
                  "kept %lld, evicted %lld of 20000", keys, evicted);
    ck_assert_msg(tracked <= 2 * 1024 * 1024, "tracking holds %lld bytes, over max-memory", tracked);
    ck_assert_msg(pushes > 0, "no push for the keys that went");
    redisReply *r = cmd(c, "PING");
    ck_assert_msg(r->type == REDIS_REPLY_STATUS, "PING after: %s", describe(r));
    freeReplyObject(r);
    harness_raw_close(&t);
    redisFree(c);
}
END_TEST

/* A reload that lowers tracking-table-max-keys evicts down to it at once, each key with its push
 * (as Redis's CONFIG SET tracking-table-max-keys): INFO shows the new bound. */
START_TEST(test_reload_lowers_table_max_keys)
{
    /* a keygate of its own: the earlier cases' keys (their clients gone) are not in its table */
    struct harness_opts o = {.extra_config = setup_config, .registry_text = setup_registry};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart: %s", h.error);
    wait_feeds(2);
    struct harness_raw t;
    kg_open(&t, 1);
    harness_raw_send(&t, "CLIENT", "TRACKING", "ON", NULL);
    harness_raw_expect(&t, "+OK\r\n", "ON");
    harness_raw_send(&t, "MGET", "q:tr15:a", "q:tr15:b", "q:tr15:c", "q:tr15:d", "q:tr15:e", NULL);
    harness_raw_expect(&t, "*5\r\n_\r\n_\r\n_\r\n_\r\n_\r\n", "MGET");
    redisContext *c = harness_must_client(&h);
    freeReplyObject(cmd(c, "AUTH root %s", ROOT_PASS));
    ck_assert_int_eq(harness_must_info_field(c, "tracking", "tracking_total_keys"), 5);
    FILE *f = fopen(h.conf_file, "a");
    ck_assert_ptr_nonnull(f);
    fputs("tracking-table-max-keys 2\n", f);
    fclose(f);
    long long before = harness_info_reloads(c);
    ck_assert_int_eq(kill(h.keygate_pid, SIGHUP), 0);
    for (long long end = now_ms() + 5000; harness_info_reloads(c) == before && now_ms() < end;) sleep_ms(20);
    ck_assert_int_eq(harness_info_reloads(c), before + 1);
    int seen[5] = {0};
    for (int i = 0; i < 3; i++) {
        char *got = harness_raw_reply(&t, NULL);
        int which = -1;
        for (int k = 0; k < 5; k++) {
            char key[16], want[128];
            snprintf(key, sizeof(key), "q:tr15:%c", 'a' + k);
            invalidate_frame(want, sizeof(want), key);
            if (strcmp(got, want) == 0) which = k;
        }
        ck_assert_msg(which >= 0 && !seen[which], "push %d after the reload: %s", i, harness_shown(got));
        seen[which] = 1;
        free(got);
    }
    ck_assert_int_eq(harness_must_info_field(c, "tracking", "tracking_total_keys"), 2);
    ck_assert_int_eq(harness_must_info_field(c, "tracking", "tracking_table_max_keys"), 2);
    ck_assert_int_eq(harness_must_info_field(c, "tracking", "tracking_invalidations_evict"), 3);
    redisFree(c);
    harness_raw_close(&t);
}
END_TEST

/* A feed kept down: what is read meanwhile (a plain key, a near-cache key) is vouched for by
 * nobody against writes by others: within about 5 s the readers get the flush-all. */
START_TEST(test_feed_still_down_flushes_within_5s)
{
    struct harness_raw t;
    kg_open(&t, 1);
    harness_raw_send(&t, "CLIENT", "TRACKING", "ON", NULL);
    harness_raw_expect(&t, "+OK\r\n", "TRACKING ON");
    durable_feeds_block(1);
    wait_feeds(1);
    long long t0 = now_ms();
    harness_raw_send(&t, "MGET", "q:tr16:a", "u:tr16:b", NULL);
    harness_raw_expect(&t, "*2\r\n_\r\n_\r\n", "MGET after the drop");
    redisContext *c = harness_must_client(&h);
    freeReplyObject(cmd(c, "AUTH root %s", ROOT_PASS));
    long long flushes = harness_must_info_field(c, "tracking", "tracking_invalidations_flush"), now = flushes;
    while ((now = harness_must_info_field(c, "tracking", "tracking_invalidations_flush")) == flushes &&
           now_ms() < t0 + 8000)
        sleep_ms(50);
    ck_assert_msg(now > flushes, "no flush within 8 s of reads made while the feed is down");
    harness_raw_expect(&t, ">2\r\n$10\r\ninvalidate\r\n_\r\n", "the flush-all of a feed still down");
    long long took = now_ms() - t0;
    ck_assert_msg(took <= 6500, "the flush came %lld ms after the reads (the bound is 5 s)", took);
    durable_feeds_block(0);
    wait_feeds(2);
    redisFree(c);
    harness_raw_close(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tracking");
    TCase *tc = harness_tcase(s, "tracking", 60, setup1, teardown);
    harness_add_test(tc, test_protocol_resp3_byte_for_byte);
    harness_add_test(tc, test_protocol_resp2_byte_for_byte);
    harness_add_test(tc, test_default_mode_invalidation);
    harness_add_test(tc, test_noloop);
    harness_add_test(tc, test_optin_optout);
    harness_add_test(tc, test_many_clients_each_told);
    harness_add_test(tc, test_bcast_prefixes);
    harness_add_test(tc, test_bcast_prefix_registry_checked);
    harness_add_test(tc, test_redirect_resp2_and_broken);
    harness_add_test(tc, test_feed_direct_writes_and_drop);
    harness_add_test(tc, test_rueidis_style_pipelined_handshake);
    harness_add_test(tc, test_write_through_another_keygate);
    harness_add_test(tc, test_reload_lowers_table_max_keys);
    TCase *tc2 = harness_tcase(s, "tracking_threads2", 60, setup2, teardown);
    harness_add_test(tc2, test_default_mode_invalidation);
    harness_add_test(tc2, test_noloop);
    harness_add_test(tc2, test_many_clients_each_told);
    harness_add_test(tc2, test_bcast_prefixes);
    harness_add_test(tc2, test_redirect_resp2_and_broken);
    harness_add_test(tc2, test_feed_direct_writes_and_drop);
    TCase *tc3 = harness_tcase(s, "tracking_small_table", 60, setup_small_table, teardown);
    harness_add_test(tc3, test_table_max_keys_evicts_with_a_push);
    TCase *tc5 = harness_tcase(s, "tracking_memory", 60, setup_small_memory, teardown);
    harness_add_test(tc5, test_tracking_memory_counted);
    TCase *tc4 = harness_tcase(s, "tracking_stream", 60, setup_stream, teardown);
    harness_add_test(tc4, test_stream_source_while_feed_down);
    harness_add_test(tc4, test_stream_gap_flushes_while_feed_down);
    harness_add_test(tc4, test_feed_still_down_flushes_within_5s);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
