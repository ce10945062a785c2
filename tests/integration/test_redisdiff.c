/* test_redisdiff.c: issue 19 part 4, the last differences from Redis that clients meet (CLIENT REPLY, CLIENT UNBLOCK, PUBSUB NUMPAT/NUMSUB on the default line, PING before AUTH), each byte for byte against a live redis-server in RESP2 and RESP3. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "resp.h"

/*
 * One harness (two TLS redis-servers + keygate, the repo's conf/registry.conf) with two users:
 * app (owners=*) and other (owners=queues). Every check sends the same commands to keygate and
 * to a backend's plain port (struct harness_raw: a socket, replies framed with keygate's resp_scan_reply)
 * and compares the bytes; in RESP3 both connections said HELLO 3 first. Where keygate's keys
 * and Redis's must differ (the registry), keygate's use q:rd:kg..., Redis's q:rd:rs...; both
 * live on durable (ttl=none), so the replies are the same bytes. Channels: push:rd... on cache.
 */

static struct harness h;

#define APP_PASS "redisdiff-app-pass"
#define OTHER_PASS "redisdiff-other-pass"

static void setup(void)
{
    char app[65], other[65], extra[400];
    harness_sha256_hex(APP_PASS, app);
    harness_sha256_hex(OTHER_PASS, other);
    snprintf(extra, sizeof(extra),
             "user app sha256=%s owners=* access=rw\nuser other sha256=%s owners=queues access=rw\n", app, other);
    struct harness_opts o = {.extra_config = extra};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h);
    harness_stop(&h);
}

/* ---- raw RESP connections (struct harness_raw, harness.h) ---- */

/* One command line split on spaces (no quoting needed here). */
static void raw_line(struct harness_raw *r, const char *line)
{
    char copy[512];
    const char *argv[32];
    int argc = 0;
    snprintf(copy, sizeof(copy), "%s", line);
    for (char *tok = strtok(copy, " "); tok && argc < 32; tok = strtok(NULL, " ")) argv[argc++] = tok;
    harness_raw_sendv(r, argc, argv);
}

/* Every byte until the peer closes (after a QUIT), within 5 s; malloc'd, NUL-terminated. */
static char *raw_until_closed(struct harness_raw *r)
{
    long long deadline = now_ms() + 5000;
    for (;;) {
        struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
        int left = (int)(deadline - now_ms());
        ck_assert_msg(left > 0 && poll(&pfd, 1, left) == 1, "%s: not closed within 5 s (have %zu bytes: %.*s)", r->name,
                      r->len, (int)r->len, r->buf);
        ck_assert_msg(r->len < sizeof(r->buf), "%s: more than the test's buffer", r->name);
        ssize_t got = read(r->fd, r->buf + r->len, sizeof(r->buf) - r->len);
        ck_assert_msg(got >= 0, "%s: read: %s", r->name, strerror(errno));
        if (got == 0) break;
        r->len += (size_t)got;
    }
    char *out = malloc(r->len + 1);
    memcpy(out, r->buf, r->len);
    out[r->len] = '\0';
    r->len = 0;
    return out;
}

/* The next reply of each is the same bytes; returns keygate's (the caller frees it). */
#define same_next(kg, redis, what) same_next_at(__LINE__, kg, redis, what)
static char *same_next_at(int line, struct harness_raw *kg, struct harness_raw *redis, const char *what)
{
    char *a = harness_raw_reply(kg, NULL), *b = harness_raw_reply(redis, NULL);
    ck_assert_msg(strcmp(a, b) == 0, "line %d: %s: keygate answered %s, Redis %s", line, what, harness_shown(a),
                  harness_shown(b));
    free(b);
    return a;
}

/* The same command line to both, the same reply bytes. */
#define same(kg, redis, line) free(same_at(__LINE__, kg, redis, line))
static char *same_at(int line, struct harness_raw *kg, struct harness_raw *redis, const char *cmdline)
{
    raw_line(kg, cmdline);
    raw_line(redis, cmdline);
    return same_next_at(line, kg, redis, cmdline);
}

/* keygate as user (app / other), in RESP3 (HELLO 3 ... AUTH) or RESP2 (AUTH). */
static void kg_open(struct harness_raw *r, const char *user, const char *pass, int resp3, const char *name)
{
    harness_raw_open(r, h.port, name);
    if (resp3) {
        const char *argv[] = {"HELLO", "3", "AUTH", user, pass};
        harness_raw_sendv(r, 5, argv);
        char *got = harness_raw_reply(r, NULL);
        ck_assert_msg(strncmp(got, "%7\r\n$6\r\nserver\r\n$7\r\nkeygate\r\n", 28) == 0, "HELLO 3: %s",
                      harness_shown(got));
        free(got);
    } else {
        const char *argv[] = {"AUTH", user, pass};
        harness_raw_sendv(r, 3, argv);
        harness_raw_expect(r, "+OK\r\n", "AUTH");
    }
}

/* A backend's plain port, authenticated, in RESP3 (HELLO 3) or RESP2. */
static void direct_open(struct harness_raw *r, const char *backend, int resp3, const char *name)
{
    struct harness_backend *b = harness_backend(&h, backend);
    ck_assert_ptr_nonnull(b);
    harness_raw_open(r, b->plain_port, name);
    const char *auth[] = {"AUTH", b->password};
    harness_raw_sendv(r, 2, auth);
    harness_raw_expect(r, "+OK\r\n", "AUTH");
    if (resp3) {
        raw_line(r, "HELLO 3");
        char *got = harness_raw_reply(r, NULL);
        ck_assert_msg(got[0] == '%', "HELLO 3: %s", harness_shown(got));
        free(got);
    }
}

/* The integer a connection's CLIENT ID answers. */
static long long raw_client_id(struct harness_raw *r)
{
    raw_line(r, "CLIENT ID");
    char *got = harness_raw_reply(r, NULL);
    ck_assert_msg(got[0] == ':', "%s: CLIENT ID answered %s", r->name, harness_shown(got));
    long long id = strtoll(got + 1, NULL, 10);
    free(got);
    return id;
}

/* ---- CLIENT REPLY ---- */

/*
 * One pipeline, sent to keygate and to durable directly, then QUIT: every byte each answered
 * until it closed must be the same. OFF drops every reply (errors, a transaction's, a blocking
 * command's), SKIP the next command's only (nothing while OFF), ON answers +OK, RESET ends OFF
 * but is dropped in a SKIP. Then the backend holds what every dropped command wrote, in order.
 */
static void client_reply_round(int resp3)
{
    const char *p = resp3 ? "3" : "2";
    struct harness_raw kg, redis;
    kg_open(&kg, "app", APP_PASS, resp3, "keygate");
    direct_open(&redis, "durable", resp3, "redis");
    static const char *const seq[] = {"CLIENT REPLY OFF",
                                      "SET %ss v1",
                                      "INCR %sn",
                                      "CLIENT REPLY maybe",
                                      "NOSUCHCOMMAND x",
                                      "CLIENT REPLY on x",
                                      "CLIENT REPLY SKIP",
                                      "INCR %sn",
                                      "CLIENT REPLY ON",
                                      "INCR %sn",
                                      "CLIENT REPLY SKIP",
                                      "INCR %sn",
                                      "GET %sn",
                                      "CLIENT REPLY SKIP",
                                      "CLIENT REPLY SKIP",
                                      "INCR %sn",
                                      "GET %ss",
                                      "CLIENT REPLY SKIP",
                                      "BLPOP %sl 0.01",
                                      "PING",
                                      "CLIENT REPLY OFF",
                                      "MULTI",
                                      "INCR %sn",
                                      "EXEC",
                                      "CLIENT REPLY ON",
                                      "GET %sn",
                                      "CLIENT REPLY SKIP",
                                      "RESET",
                                      "PING",
                                      "AUTH",
                                      "CLIENT REPLY OFF",
                                      "PING",
                                      "RESET",
                                      "PING",
                                      "QUIT"};
    char kgkey[64], rskey[64], line[200];
    snprintf(kgkey, sizeof(kgkey), "q:rd:kg%s:", p);
    snprintf(rskey, sizeof(rskey), "q:rd:rs%s:", p);
    for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
        if (strcmp(seq[i], "AUTH") == 0) { /* after RESET (logged out): each side's own password */
            raw_line(&kg, "AUTH app " APP_PASS);
            const char *auth[] = {"AUTH", harness_backend(&h, "durable")->password};
            harness_raw_sendv(&redis, 2, auth);
            continue;
        }
        snprintf(line, sizeof(line), seq[i], kgkey);
        raw_line(&kg, line);
        snprintf(line, sizeof(line), seq[i], rskey);
        raw_line(&redis, line);
    }
    char *a = raw_until_closed(&kg), *b = raw_until_closed(&redis);
    ck_assert_msg(strcmp(a, b) == 0, "RESP%s: keygate answered %s, Redis %s", p, harness_shown(a), harness_shown(b));
    /* what Redis answers is what the sequence above says (so neither side answered nothing) */
    const char *want =
        "+OK\r\n:3\r\n$1\r\n4\r\n$2\r\nv1\r\n+PONG\r\n+OK\r\n$1\r\n6\r\n"
        "-NOAUTH Authentication required.\r\n+OK\r\n+RESET\r\n-NOAUTH Authentication required.\r\n+OK\r\n";
    ck_assert_msg(strcmp(a, want) == 0, "RESP%s: the stream is %s", p,
                  harness_shown(a)); /* RESP3's shapes are RESP2's here */
    free(a);
    free(b);
    harness_raw_close(&kg);
    harness_raw_close(&redis);
    /* every dropped command ran on the backend, in order: n counts 6 INCRs, s was set */
    redisContext *d = harness_must_direct(&h, "durable");
    snprintf(line, sizeof(line), "%sn", kgkey);
    expect_bulk(cmd(d, "GET %s", line), "6", "keygate's counter on the backend");
    snprintf(line, sizeof(line), "%ss", kgkey);
    expect_bulk(cmd(d, "GET %s", line), "v1", "keygate's SET under OFF on the backend");
    redisFree(d);
}

START_TEST(test_issue19_client_reply_resp2)
{
    client_reply_round(0);
}
END_TEST

START_TEST(test_issue19_client_reply_resp3)
{
    client_reply_round(1);
}
END_TEST

/* Under CLIENT REPLY OFF, pub/sub confirmations and messages are still delivered (Redis 7.0
 * pushes them past the flag); keygate's own empty UNSUBSCRIBE confirmation too. */
static void client_reply_pubsub_round(int resp3)
{
    const char *chan = resp3 ? "push:rd:off3" : "push:rd:off2";
    char line[120];
    struct harness_raw kg, redis;
    kg_open(&kg, "app", APP_PASS, resp3, "keygate");
    direct_open(&redis, "cache", resp3, "redis");
    raw_line(&kg, "CLIENT REPLY OFF");
    raw_line(&redis, "CLIENT REPLY OFF");
    snprintf(line, sizeof(line), "SUBSCRIBE %s", chan);
    same(&kg, &redis, line);
    redisContext *pub = harness_must_direct(&h, "cache");
    expect_int(cmd(pub, "PUBLISH %s hello", chan), 2, "both subscribers");
    free(same_next(&kg, &redis, "the message under OFF"));
    snprintf(line, sizeof(line), "UNSUBSCRIBE %s", chan);
    same(&kg, &redis, line);
    same(&kg, &redis, "UNSUBSCRIBE"); /* nothing subscribed: keygate's local confirmation */
    raw_line(&kg, "PING");            /* dropped */
    raw_line(&redis, "PING");
    same(&kg, &redis, "CLIENT REPLY ON");
    same(&kg, &redis, "PING");
    redisFree(pub);
    harness_raw_close(&kg);
    harness_raw_close(&redis);
}

START_TEST(test_issue19_client_reply_keeps_pubsub_resp2)
{
    client_reply_pubsub_round(0);
}
END_TEST

START_TEST(test_issue19_client_reply_keeps_pubsub_resp3)
{
    client_reply_pubsub_round(1);
}
END_TEST

/* ---- CLIENT UNBLOCK ---- */

/* Wait until durable shows a client blocked in BLPOP (CLIENT LIST: flags b, cmd=blpop). */
static void wait_blocked_on_durable(int want, const char *what)
{
    redisContext *d = harness_must_direct(&h, "durable");
    long long deadline = now_ms() + 5000;
    int n = -1;
    while (now_ms() < deadline) {
        redisReply *r = cmd(d, "CLIENT LIST");
        n = 0;
        for (const char *l = r->str; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
            const char *end = strchr(l, '\n');
            size_t len = end ? (size_t)(end - l) : strlen(l);
            char one[1024];
            snprintf(one, sizeof(one), "%.*s", (int)(len < sizeof(one) - 1 ? len : sizeof(one) - 1), l);
            if (strstr(one, " flags=b ") && strstr(one, " cmd=blpop ")) n++;
        }
        freeReplyObject(r);
        if (n == want) break;
        sleep_ms(10);
    }
    redisFree(d);
    ck_assert_msg(n == want, "%s: %d clients blocked in BLPOP on durable, want %d (within 5 s)", what, n, want);
}

/*
 * A client of keygate blocked in BLPOP, unblocked by another client of the same user with CLIENT
 * UNBLOCK <its keygate id> [TIMEOUT|ERROR]; the same with two direct connections to durable.
 * The unblocker's reply and the blocked client's must be the same bytes; a client of another
 * user, an unknown id and a client not blocked get :0, as Redis answers an id it does not know.
 */
static void client_unblock_round(int resp3, const char *how)
{
    char line[160], key[64];
    struct harness_raw a, b, o, ra, rb;
    kg_open(&a, "app", APP_PASS, resp3, "keygate (blocked)");
    kg_open(&b, "app", APP_PASS, resp3, "keygate (unblocker)");
    kg_open(&o, "other", OTHER_PASS, resp3, "keygate (other user)");
    direct_open(&ra, "durable", resp3, "redis (blocked)");
    direct_open(&rb, "durable", resp3, "redis (unblocker)");
    long long aid = raw_client_id(&a), rid = raw_client_id(&ra), bid = raw_client_id(&b), rbid = raw_client_id(&rb);

    snprintf(key, sizeof(key), "q:rd:ub%d%s", resp3 ? 3 : 2, how);
    snprintf(line, sizeof(line), "BLPOP %s 0", key);
    raw_line(&a, line);
    raw_line(&ra, line);
    wait_blocked_on_durable(2, "both BLPOPs");

    /* ids that are no blocked client of this user: :0, like Redis for an unknown id */
    snprintf(line, sizeof(line), "CLIENT UNBLOCK %lld", aid);
    raw_line(&o, line);
    harness_raw_expect(&o, ":0\r\n", "another user's client");
    raw_line(&b, "CLIENT UNBLOCK 987654321");
    raw_line(&rb, "CLIENT UNBLOCK 987654321");
    free(same_next(&b, &rb, "an unknown id"));
    snprintf(line, sizeof(line), "CLIENT UNBLOCK %lld", bid);
    raw_line(&b, line);
    snprintf(line, sizeof(line), "CLIENT UNBLOCK %lld", rbid);
    raw_line(&rb, line);
    free(same_next(&b, &rb, "a client not blocked (itself)"));
    wait_blocked_on_durable(2, "still both blocked");

    snprintf(line, sizeof(line), "CLIENT UNBLOCK %lld%s%s", aid, *how ? " " : "", how);
    raw_line(&b, line);
    snprintf(line, sizeof(line), "CLIENT UNBLOCK %lld%s%s", rid, *how ? " " : "", how);
    raw_line(&rb, line);
    char *got = same_next(&b, &rb, "the unblocker's reply");
    ck_assert_msg(strcmp(got, ":1\r\n") == 0, "CLIENT UNBLOCK of a blocked client answered %s", harness_shown(got));
    free(got);
    got = same_next(&a, &ra, "the unblocked client's reply");
    if (strcmp(how, "ERROR") == 0)
        ck_assert_str_eq(got, "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    else
        ck_assert_str_eq(got, resp3 ? "_\r\n" : "*-1\r\n");
    free(got);
    wait_blocked_on_durable(0, "unblocked on the backend");
    same(&a, &ra, "PING"); /* the unblocked client goes on */
    snprintf(line, sizeof(line), "CLIENT UNBLOCK %lld", aid);
    raw_line(&b, line);
    snprintf(line, sizeof(line), "CLIENT UNBLOCK %lld", rid);
    raw_line(&rb, line);
    free(same_next(&b, &rb, "no longer blocked"));
    same(&b, &rb, "CLIENT UNBLOCK 1 maybe");
    same(&b, &rb, "CLIENT UNBLOCK x");
    same(&b, &rb, "CLIENT UNBLOCK 1 2 3");
    harness_raw_close(&a);
    harness_raw_close(&b);
    harness_raw_close(&o);
    harness_raw_close(&ra);
    harness_raw_close(&rb);
}

START_TEST(test_issue19_client_unblock_resp2)
{
    client_unblock_round(0, "");
    client_unblock_round(0, "TIMEOUT");
    client_unblock_round(0, "ERROR");
}
END_TEST

START_TEST(test_issue19_client_unblock_resp3)
{
    client_unblock_round(1, "");
    client_unblock_round(1, "ERROR");
}
END_TEST

/* 1 when the CLIENT LIST that r sees (its worker's clients) names client `id`. */
static int raw_lists_client(struct harness_raw *r, long long id)
{
    char want[40];
    raw_line(r, "CLIENT LIST");
    char *got = harness_raw_reply(r, NULL);
    snprintf(want, sizeof(want), "id=%lld ", id);
    int seen = strstr(got, want) != NULL;
    free(got);
    return seen;
}

/* With threads 2, CLIENT UNBLOCK from a client on the other worker thread (its CLIENT LIST does
 * not show the blocked client) unblocks it too: the table of blocked clients is process-wide. */
START_TEST(test_issue19_client_unblock_across_worker_threads)
{
    char app[65], other[65], extra[500];
    harness_sha256_hex(APP_PASS, app);
    harness_sha256_hex(OTHER_PASS, other);
    snprintf(extra, sizeof(extra),
             "user app sha256=%s owners=* access=rw\nuser other sha256=%s owners=queues access=rw\nthreads 2\n", app,
             other);
    struct harness_opts o = {.extra_config = extra};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart: %s", h.error);
    struct harness_raw a, b[64];
    kg_open(&a, "app", APP_PASS, 0, "keygate (blocked)");
    long long aid = raw_client_id(&a);
    int far = -1, opened = 0;
    for (long long deadline = now_ms() + 5000; far < 0 && opened < 64 && now_ms() < deadline; opened++) {
        kg_open(&b[opened], "app", APP_PASS, 0, "keygate (unblocker)");
        if (!raw_lists_client(&b[opened], aid)) far = opened;
    }
    ck_assert_msg(far >= 0, "no connection of %d landed on the other worker thread", opened);
    raw_line(&a, "BLPOP q:rd:ubfar 0");
    wait_blocked_on_durable(1, "the BLPOP");
    char line[80];
    snprintf(line, sizeof(line), "CLIENT UNBLOCK %lld", aid);
    raw_line(&b[far], line);
    harness_raw_expect(&b[far], ":1\r\n", "CLIENT UNBLOCK from the other worker thread");
    harness_raw_expect(&a, "*-1\r\n", "the unblocked BLPOP (timeout reply)");
    wait_blocked_on_durable(0, "unblocked on the backend");
    raw_line(&b[far], line);
    harness_raw_expect(&b[far], ":0\r\n", "no longer blocked");
    for (int i = 0; i < opened; i++) harness_raw_close(&b[i]);
    harness_raw_close(&a);
}
END_TEST

/* ---- COMMAND GETKEYS: no registry check, and queued inside MULTI ---- */

/* A user whose owners lack cache: asks about a cache: key and a never-forwarded command: no key
 * is touched, so keygate answers as Redis does; inside MULTI it is queued and answered in EXEC. */
static void getkeys_round(int resp3)
{
    struct harness_raw kg, redis;
    kg_open(&kg, "other", OTHER_PASS, resp3, "keygate (owners=queues)");
    direct_open(&redis, "durable", resp3, "redis");
    same(&kg, &redis, "COMMAND GETKEYS GET cache:rd:x");
    same(&kg, &redis, "COMMAND GETKEYSANDFLAGS LMOVE cache:rd:a q:rd:b LEFT RIGHT");
    same(&kg, &redis, "COMMAND GETKEYS MIGRATE 127.0.0.1 1 k 0 10");
    same(&kg, &redis, "COMMAND GETKEYS FLUSHALL");
    same(&kg, &redis, "MULTI");
    same(&kg, &redis, "COMMAND GETKEYS GET q:rd:x");
    same(&kg, &redis, "COMMAND GETKEYSANDFLAGS SET q:rd:x v GET");
    char *got = same_at(__LINE__, &kg, &redis, "EXEC");
    ck_assert_msg(strstr(got, "q:rd:x") != NULL, "EXEC: %s", harness_shown(got));
    free(got);
    harness_raw_close(&kg);
    harness_raw_close(&redis);
}

START_TEST(test_issue19_getkeys_without_registry_check_and_in_multi)
{
    getkeys_round(0);
    getkeys_round(1);
}
END_TEST

/* ---- PING before AUTH ---- */

/* With users configured, keygate answers what Redis with a password answers before AUTH: only
 * AUTH, HELLO, QUIT and RESET run; PING is -NOAUTH. */
START_TEST(test_issue19_ping_before_auth_is_noauth)
{
    struct harness_raw kg, redis;
    harness_raw_open(&kg, h.port, "keygate");
    harness_raw_open(&redis, harness_backend(&h, "durable")->plain_port, "redis");
    char *got = same_at(__LINE__, &kg, &redis, "PING");
    ck_assert_str_eq(got, "-NOAUTH Authentication required.\r\n");
    free(got);
    same(&kg, &redis, "PING hello");
    same(&kg, &redis, "ECHO x");
    same(&kg, &redis, "CLIENT REPLY OFF");
    same(&kg, &redis, "COMMAND GETKEYS GET k");
    same(&kg, &redis, "HELLO 3"); /* -NOAUTH HELLO must be called with the client already authenticated ... */
    same(&kg, &redis, "RESET");
    same(&kg, &redis, "PING");
    same(&kg, &redis, "QUIT");
    harness_raw_close(&kg);
    harness_raw_close(&redis);
}
END_TEST

/* ---- PUBSUB NUMPAT / NUMSUB where the only channel rule is the default line ---- */

static void pubsub_default_round(int resp3)
{
    struct harness_raw kg, redis;
    kg_open(&kg, "app", APP_PASS, resp3, "keygate");
    direct_open(&redis, "cache", resp3, "redis");
    same(&kg, &redis, "PUBSUB NUMPAT");
    same(&kg, &redis, "PUBSUB NUMSUB rd:chan rd:none");
    same(&kg, &redis, "PUBSUB NUMSUB");
    same(&kg, &redis, "PUBSUB CHANNELS rd:*");
    same(&kg, &redis, "PUBSUB CHANNELS");
    harness_raw_close(&kg);
    harness_raw_close(&redis);
}

START_TEST(test_issue19_pubsub_numpat_on_the_default_line)
{
    char app[65], extra[300];
    harness_sha256_hex(APP_PASS, app);
    snprintf(extra, sizeof(extra), "user app sha256=%s owners=* access=rw\n", app);
    struct harness_opts o = {.extra_config = extra,
                             .registry_text = "namespace q: instance=durable ttl=none owner=queues\n"
                                              "namespace cache: instance=cache ttl=1h max-ttl=7d owner=cache\n"
                                              "default instance=cache ttl=none owner=legacy\n"};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart: %s", h.error);
    /* subscribers on cache directly: a pattern and a channel, so the counts are not 0 */
    struct harness_raw sub;
    direct_open(&sub, "cache", 0, "subscriber");
    raw_line(&sub, "PSUBSCRIBE rd:pat:*");
    free(harness_raw_reply(&sub, NULL));
    raw_line(&sub, "SUBSCRIBE rd:chan");
    free(harness_raw_reply(&sub, NULL));
    pubsub_default_round(0);
    pubsub_default_round(1);
    struct harness_raw kg;
    kg_open(&kg, "app", APP_PASS, 0, "keygate");
    raw_line(&kg, "PUBSUB NUMPAT");
    harness_raw_expect(&kg, ":1\r\n", "the subscriber's one pattern");
    harness_raw_close(&kg);
    harness_raw_close(&sub);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("redisdiff");
    TCase *tc = harness_tcase(s, "redisdiff", 60, setup, teardown);
    harness_add_test(tc, test_issue19_client_reply_resp2);
    harness_add_test(tc, test_issue19_client_reply_resp3);
    harness_add_test(tc, test_issue19_client_reply_keeps_pubsub_resp2);
    harness_add_test(tc, test_issue19_client_reply_keeps_pubsub_resp3);
    harness_add_test(tc, test_issue19_client_unblock_resp2);
    harness_add_test(tc, test_issue19_client_unblock_resp3);
    harness_add_test(tc, test_issue19_client_unblock_across_worker_threads);
    harness_add_test(tc, test_issue19_getkeys_without_registry_check_and_in_multi);
    harness_add_test(tc, test_issue19_ping_before_auth_is_noauth);
    harness_add_test(tc, test_issue19_pubsub_numpat_on_the_default_line);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
