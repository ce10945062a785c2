/* test_metrics.c: keygate's /metrics: exact per-namespace counters, histograms, capacity gauges, /healthz on headroom, build and process series, promtool, a real Prometheus scraping it, the sampler. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "harness.h"
#include "serverkit.h"
#include "util.h" /* KEYGATE_VERSION */

/*
 * One harness with admin-listen, a registry of its own (q: marked depth) and
 * backend-info-interval 1s serves the suite. keygate lives across the tests of the case,
 * so every counter assertion is a delta: read before, drive known traffic, read after.
 */

static struct harness h;

#define REGISTRY                                                                                                       \
    "namespace q:     instance=durable ttl=none owner=queues depth\n"                                                  \
    "namespace rl:    instance=durable ttl=1h max-ttl=1d owner=rate-limit\n"                                           \
    "namespace cache: instance=cache   ttl=1h max-ttl=7d owner=cache\n"                                                \
    "namespace sl:    instance=durable ttl=1h sliding owner=rate-limit\n"                                              \
    "channel   push:  instance=cache   owner=notifications\n"

static void setup(void)
{
    struct harness_opts o = {.admin = 1, .registry_text = REGISTRY, .extra_config = "backend-info-interval 1s\n"};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h);
    harness_stop(&h);
}

/* ---- HTTP ---- */

static char *metrics(void)
{
    struct harness_http r = harness_admin_get(&h, "/metrics");
    ck_assert_int_eq(r.status, 200);
    return r.body;
}

/* The value of the series `name` (with its labels, exactly as printed) in body; -1 when absent. */
static double series(const char *body, const char *name)
{
    size_t n = strlen(name);
    for (const char *line = body; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (strncmp(line, name, n) == 0 && line[n] == ' ') return strtod(line + n + 1, NULL);
    return -1;
}

static double must_series(const char *body, const char *name)
{
    double v = series(body, name);
    ck_assert_msg(v >= 0, "series %s not in /metrics", name);
    return v;
}

#define NS(prefix, inst, owner) "namespace=\"" prefix "\",backend=\"" inst "\",owner=\"" owner "\""

/* ---- keygate traffic ---- */

/* The RESP bytes hiredis sends for `argv` (what keygate reads). */
static size_t resp_len(int argc, const char **argv)
{
    char *out = NULL;
    int n = redisFormatCommandArgv(&out, argc, argv, NULL);
    ck_assert_int_gt(n, 0);
    free(out);
    return (size_t)n;
}

/* Send argv through c; its reply's RESP length (computed from the reply) is added to *sent. */
static redisReply *send_argv(redisContext *c, int argc, const char **argv, size_t *received, size_t *sent)
{
    *received += resp_len(argc, argv);
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    ck_assert_msg(r != NULL, "%s: %s", argv[0], c->errstr);
    char tmp[64];
    switch (r->type) {
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        *sent += 3 + r->len;
        break;
    case REDIS_REPLY_INTEGER:
        *sent += 3 + (size_t)snprintf(tmp, sizeof tmp, "%lld", r->integer);
        break;
    case REDIS_REPLY_NIL:
        *sent += 5;
        break;
    case REDIS_REPLY_STRING:
        *sent += (size_t)snprintf(tmp, sizeof tmp, "$%zu\r\n", r->len) + r->len + 2;
        break;
    default:
        ck_abort_msg("unexpected reply type %d", r->type);
    }
    return r;
}

START_TEST(test_namespace_counters_exact)
{
    redisContext *c = harness_must_client(&h);
    char *before = metrics();
    size_t rx_cache = 0, tx_cache = 0, rx_q = 0, tx_q = 0, rx_none = 0, tx_none = 0, rx_rl = 0, tx_rl = 0;
    /* cache: 5 SET (TTL injected), 7 GET, 1 SET EX 30d (refused: over max-ttl 7d) */
    for (int i = 0; i < 5; i++) {
        char key[32];
        snprintf(key, sizeof key, "cache:m:%d", i);
        const char *a[] = {"SET", key, "v"};
        freeReplyObject(send_argv(c, 3, a, &rx_cache, &tx_cache));
    }
    for (int i = 0; i < 7; i++) {
        const char *a[] = {"GET", "cache:m:1"};
        freeReplyObject(send_argv(c, 2, a, &rx_cache, &tx_cache));
    }
    const char *over[] = {"SET", "cache:m:over", "v", "EX", "2592000"};
    redisReply *r = send_argv(c, 5, over, &rx_cache, &tx_cache);
    ck_assert_msg(r->type == REDIS_REPLY_ERROR && strstr(r->str, "above max-ttl"), "%s", describe(r));
    freeReplyObject(r);
    /* q: 3 RPUSH (ttl=none: nothing injected), 1 LLEN */
    for (int i = 0; i < 3; i++) {
        const char *a[] = {"RPUSH", "q:m:list", "job"};
        freeReplyObject(send_argv(c, 3, a, &rx_q, &tx_q));
    }
    const char *llen[] = {"LLEN", "q:m:list"};
    freeReplyObject(send_argv(c, 2, llen, &rx_q, &tx_q));
    /* rl: a WRONGTYPE from the backend passed through (INCR on a list) */
    const char *lpush[] = {"RPUSH", "rl:m:wt", "x"};
    r = send_argv(c, 3, lpush, &rx_rl, &tx_rl); /* a list in rl: gets the TTL too */
    freeReplyObject(r);
    const char *incr[] = {"INCR", "rl:m:wt"};
    r = send_argv(c, 2, incr, &rx_rl, &tx_rl);
    ck_assert_msg(r->type == REDIS_REPLY_ERROR && strncmp(r->str, "WRONGTYPE", 9) == 0, "%s", describe(r));
    freeReplyObject(r);
    /* no namespace: 2 refused; PING counts under namespace="" class other */
    for (int i = 0; i < 2; i++) {
        const char *a[] = {"SET", "nope:m", "1"};
        r = send_argv(c, 3, a, &rx_none, &tx_none);
        ck_assert_msg(r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NONAMESPACE", 11) == 0, "%s", describe(r));
        freeReplyObject(r);
    }
    const char *ping[] = {"PING"};
    freeReplyObject(send_argv(c, 1, ping, &rx_none, &tx_none));

    char *after = metrics(); /* c still open: its replies are counted without its close */
    redisFree(c);
    struct {
        const char *name;
        double want;
    } deltas[] = {
        {"keygate_namespace_commands_total{" NS("cache:", "cache", "cache") ",class=\"write\"}", 6},
        {"keygate_namespace_commands_total{" NS("cache:", "cache", "cache") ",class=\"read\"}", 7},
        {"keygate_namespace_commands_total{" NS("cache:", "cache", "cache") ",class=\"other\"}", 0},
        {"keygate_namespace_ttl_injected_total{" NS("cache:", "cache", "cache") "}", 5},
        {"keygate_namespace_ttl_refused_total{" NS("cache:", "cache", "cache") "}", 1},
        {"keygate_namespace_refused_total{" NS("cache:", "cache", "cache") ",code=\"DENIED\"}", 1},
        {"keygate_namespace_received_bytes_total{" NS("cache:", "cache", "cache") "}", (double)rx_cache},
        {"keygate_namespace_sent_bytes_total{" NS("cache:", "cache", "cache") "}", (double)tx_cache},
        {"keygate_namespace_commands_total{" NS("q:", "durable", "queues") ",class=\"write\"}", 3},
        {"keygate_namespace_commands_total{" NS("q:", "durable", "queues") ",class=\"read\"}", 1},
        {"keygate_namespace_ttl_injected_total{" NS("q:", "durable", "queues") "}", 0},
        {"keygate_namespace_received_bytes_total{" NS("q:", "durable", "queues") "}", (double)rx_q},
        {"keygate_namespace_sent_bytes_total{" NS("q:", "durable", "queues") "}", (double)tx_q},
        {"keygate_namespace_backend_errors_total{" NS("rl:", "durable", "rate-limit") ",code=\"WRONGTYPE\"}", 1},
        {"keygate_namespace_backend_errors_total{" NS("rl:", "durable", "rate-limit") ",code=\"OOM\"}", 0},
        {"keygate_namespace_ttl_injected_total{" NS("rl:", "durable", "rate-limit") "}", 2}, /* RPUSH, INCR */
        {"keygate_namespace_received_bytes_total{" NS("rl:", "durable", "rate-limit") "}", (double)rx_rl},
        {"keygate_namespace_sent_bytes_total{" NS("rl:", "durable", "rate-limit") "}", (double)tx_rl},
        {"keygate_namespace_refused_total{" NS("", "", "") ",code=\"NONAMESPACE\"}", 2},
        {"keygate_namespace_commands_total{" NS("", "", "") ",class=\"write\"}", 2},
        {"keygate_namespace_commands_total{" NS("", "", "") ",class=\"other\"}", 1},
        {"keygate_namespace_received_bytes_total{" NS("", "", "") "}", (double)rx_none},
        {"keygate_namespace_sent_bytes_total{" NS("", "", "") "}", (double)tx_none},
    };
    for (size_t i = 0; i < sizeof deltas / sizeof deltas[0]; i++) {
        double b = must_series(before, deltas[i].name), a = must_series(after, deltas[i].name);
        ck_assert_msg(a - b == deltas[i].want, "%s: moved by %.0f, want %.0f", deltas[i].name, a - b, deltas[i].want);
    }
    /* a key is never a label */
    ck_assert_msg(strstr(after, "cache:m:") == NULL && strstr(after, "nope:m") == NULL, "a key became a label");

    /* INFO namespaces carries the same counters */
    redisContext *c2 = harness_must_client(&h);
    r = cmd(c2, "INFO namespaces");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    const char *line = strstr(r->str, ":prefix=cache:,instance=cache,owner=cache,cmd_read=");
    ck_assert_msg(line != NULL, "%s", r->str);
    char want[64];
    snprintf(want, sizeof want, "cmd_read=%.0f,",
             must_series(after, "keygate_namespace_commands_total{" NS("cache:", "cache", "cache") ",class=\"read\"}"));
    const char *eol = strstr(line, "\r\n");
    ck_assert_msg(strstr(line, want) != NULL && strstr(line, want) < eol, "INFO %.*s lacks %s", (int)(eol - line), line,
                  want);
    ck_assert_msg(strstr(r->str, "latency_percentiles_usec_backend_cache:p50=") != NULL, "%s", r->str);
    ck_assert_msg(strstr(r->str, "latency_percentiles_usec_request_read:p50=") != NULL, "%s", r->str);
    freeReplyObject(r);
    redisFree(c2);
    free(before);
    free(after);
}
END_TEST

/* A command with keys in several namespaces counts once under each; its bytes go to the first key's. */
START_TEST(test_multi_namespace_command_counted_under_each)
{
    char *before = metrics();
    redisContext *c = harness_must_client(&h);
    /* same instance: q: and rl: on durable; three q: keys still count q: once */
    redisReply *r = cmd(c, "DEL q:mn:1 q:mn:2 rl:mn:1 q:mn:3");
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
    /* across instances (split and merged): cache: and q: */
    r = cmd(c, "MGET cache:mn:1 q:mn:1 cache:mn:2");
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    size_t del_len = strlen("*5\r\n$3\r\nDEL\r\n$6\r\nq:mn:1\r\n$6\r\nq:mn:2\r\n$7\r\nrl:mn:1\r\n$6\r\nq:mn:3\r\n");
    char *after = metrics(); /* c still open: its replies are counted without its close */
    redisFree(c);
    struct {
        const char *name;
        double want;
    } deltas[] = {
        {"keygate_namespace_commands_total{" NS("q:", "durable", "queues") ",class=\"write\"}", 1},
        {"keygate_namespace_commands_total{" NS("rl:", "durable", "rate-limit") ",class=\"write\"}", 1},
        {"keygate_namespace_commands_total{" NS("cache:", "cache", "cache") ",class=\"read\"}", 1},
        {"keygate_namespace_commands_total{" NS("q:", "durable", "queues") ",class=\"read\"}", 1},
        {"keygate_namespace_received_bytes_total{" NS("rl:", "durable", "rate-limit") "}", 0},
    };
    for (size_t i = 0; i < sizeof deltas / sizeof deltas[0]; i++) {
        double b = must_series(before, deltas[i].name), a = must_series(after, deltas[i].name);
        ck_assert_msg(a - b == deltas[i].want, "%s: moved by %.0f, want %.0f", deltas[i].name, a - b, deltas[i].want);
    }
    const char *qrx = "keygate_namespace_received_bytes_total{" NS("q:", "durable", "queues") "}";
    ck_assert_int_eq(must_series(after, qrx) - must_series(before, qrx), del_len);
    free(before);
    free(after);
}
END_TEST

START_TEST(test_ttl_injected_inside_multi_and_split)
{
    /* a TTL given to writes queued in the client's MULTI (counted when queued), and the
     * sliding reset of a split EXISTS across both instances (counted once, first key's) */
    char *before = metrics();
    redisContext *c = harness_must_client(&h);
    expect_status(cmd(c, "MULTI"), "OK", "MULTI");
    expect_status(cmd(c, "SET rl:m:tx1 v"), "QUEUED", "SET in MULTI");
    expect_status(cmd(c, "HSET rl:m:tx2 f v"), "QUEUED", "HSET in MULTI");
    redisReply *r = cmd(c, "EXEC");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "EXEC: %s", describe(r));
    freeReplyObject(r);
    expect_int(cmd(c, "EXISTS sl:m:1 cache:m:none"), 0, "EXISTS across both instances");
    expect_int(cmd(c, "DEL rl:m:tx1 rl:m:tx2"), 2, "DEL");
    char *after = metrics(); /* c still open: its replies are counted without its close */
    redisFree(c);
    const char *rl = "keygate_namespace_ttl_injected_total{" NS("rl:", "durable", "rate-limit") "}";
    const char *sl = "keygate_namespace_ttl_injected_total{" NS("sl:", "durable", "rate-limit") "}";
    ck_assert_msg(must_series(after, rl) - must_series(before, rl) == 2,
                  "rl: moved by %.0f, want 2 (SET, HSET in MULTI)", must_series(after, rl) - must_series(before, rl));
    ck_assert_msg(must_series(after, sl) - must_series(before, sl) == 1, "sl: moved by %.0f, want 1 (EXISTS split)",
                  must_series(after, sl) - must_series(before, sl));
    free(before);
    free(after);
}
END_TEST

/* Keys of the registry's default line count under namespace="(default)" (issue 13's line). */
START_TEST(test_default_line_is_its_own_namespace)
{
    struct harness_opts o = {.admin = 1,
                             .registry_text = REGISTRY "default instance=cache ttl=1h owner=legacy\n",
                             .extra_config = "backend-info-interval 1s\n"};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart: %s", h.error);
    char *before = metrics();
    redisContext *c = harness_must_client(&h);
    expect_status(cmd(c, "SET legacy:dl:1 v"), "OK", "SET of an unregistered key");
    freeReplyObject(cmd(c, "GET legacy:dl:1"));
    freeReplyObject(cmd(c, "GET cache:dl:1"));
    char *after = metrics(); /* c still open: its replies are counted without its close */
    redisFree(c);
    const char *w = "keygate_namespace_commands_total{" NS("(default)", "cache", "legacy") ",class=\"write\"}";
    const char *r = "keygate_namespace_commands_total{" NS("(default)", "cache", "legacy") ",class=\"read\"}";
    const char *inj = "keygate_namespace_ttl_injected_total{" NS("(default)", "cache", "legacy") "}";
    ck_assert_int_eq(must_series(after, w) - (series(before, w) < 0 ? 0 : series(before, w)), 1);
    ck_assert_int_eq(must_series(after, r) - (series(before, r) < 0 ? 0 : series(before, r)), 1);
    ck_assert_int_eq(must_series(after, inj) - (series(before, inj) < 0 ? 0 : series(before, inj)), 1);
    free(before);
    free(after);
    redisContext *d = harness_must_direct(&h, "cache"); /* the suite's registry has no default line */
    freeReplyObject(cmd(d, "DEL legacy:dl:1"));
    redisFree(d);
}
END_TEST

/* INFO server's reloads: (the reloads every worker thread has taken). */
static long long info_reloads(void)
{
    redisContext *c = harness_must_client(&h);
    long long n = harness_info_reloads(c);
    redisFree(c);
    return n;
}

/* SIGHUP with a registry that adds a namespace before the others and changes an owner: every
 * unchanged namespace keeps its series (counters go on from where they were), the new one
 * appears, the changed owner is a new series and the old one stays at its last value. */
START_TEST(test_reload_keeps_series)
{
    redisContext *c = harness_must_client(&h);
    for (int i = 0; i < 3; i++) freeReplyObject(cmd(c, "GET cache:rl:%d", i));
    freeReplyObject(cmd(c, "RPUSH q:rl:list x"));
    redisFree(c);
    char *before = metrics();
    FILE *f = fopen(h.registry_file, "w");
    ck_assert_ptr_nonnull(f);
    fputs("namespace a:     instance=cache   ttl=1h owner=alpha\n"
          "namespace q:     instance=durable ttl=none owner=queues depth\n"
          "namespace rl:    instance=durable ttl=1h max-ttl=1d owner=limits\n"
          "namespace cache: instance=cache   ttl=1h max-ttl=7d owner=cache\n"
          "channel   push:  instance=cache   owner=notifications\n",
          f);
    fclose(f);
    long long reloads = info_reloads();
    ck_assert_int_eq(kill(h.keygate_pid, SIGHUP), 0);
    long long got = reloads;
    for (long long end = now_ms() + 5000; got == reloads && now_ms() < end; got = info_reloads()) sleep_ms(20);
    ck_assert_msg(got == reloads + 1, "INFO server reloads: is %lld 5 s after SIGHUP, want %lld (every worker took it)",
                  got, reloads + 1);
    c = harness_must_client(&h);
    for (int i = 0; i < 2; i++) freeReplyObject(cmd(c, "GET cache:rl:%d", i));
    freeReplyObject(cmd(c, "SET a:rl:1 v"));
    freeReplyObject(cmd(c, "SET rl:rl:1 v"));
    char *after = metrics(); /* c still open: its replies are counted without its close */
    redisFree(c);
    const char *cr = "keygate_namespace_commands_total{" NS("cache:", "cache", "cache") ",class=\"read\"}";
    ck_assert_int_eq(must_series(after, cr) - must_series(before, cr), 2);
    const char *qw = "keygate_namespace_commands_total{" NS("q:", "durable", "queues") ",class=\"write\"}";
    ck_assert_int_eq(must_series(after, qw), must_series(before, qw)); /* kept, not reset */
    ck_assert_int_eq(
        must_series(after, "keygate_namespace_commands_total{" NS("a:", "cache", "alpha") ",class=\"write\"}"), 1);
    ck_assert_int_eq(
        must_series(after, "keygate_namespace_commands_total{" NS("rl:", "durable", "limits") ",class=\"write\"}"), 1);
    const char *old_rl = "keygate_namespace_commands_total{" NS("rl:", "durable", "rate-limit") ",class=\"write\"}";
    ck_assert_int_eq(must_series(after, old_rl), must_series(before, old_rl));
    free(before);
    free(after);
    redisContext *d = harness_must_direct(&h, "cache"); /* a: is not in the suite's registry */
    freeReplyObject(cmd(d, "DEL a:rl:1"));
    redisFree(d);
}
END_TEST

/* ---- histograms ---- */

/* Check the buckets of histogram `name{label}` are monotonic and end in _count; returns _count. */
static double hist_check(const char *body, const char *name, const char *label)
{
    static const char *const les[] = {"5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025",
                                      "0.005", "0.01",   "0.025",   "0.05",   "0.1",   "0.25",
                                      "0.5",   "1",      "2.5",     "5",      "+Inf"};
    double prev = 0;
    char s[256];
    for (size_t i = 0; i < sizeof les / sizeof les[0]; i++) {
        snprintf(s, sizeof s, "%s_bucket{%s,le=\"%s\"}", name, label, les[i]);
        double v = must_series(body, s);
        ck_assert_msg(v >= prev, "%s: %.0f below the bucket before (%.0f)", s, v, prev);
        prev = v;
    }
    snprintf(s, sizeof s, "%s_count{%s}", name, label);
    ck_assert_msg(must_series(body, s) == prev, "%s is not the +Inf bucket", s);
    snprintf(s, sizeof s, "%s_sum{%s}", name, label);
    ck_assert(must_series(body, s) >= 0);
    return prev;
}

START_TEST(test_histograms_count_the_requests)
{
    char *before = metrics();
    double read0 = hist_check(before, "keygate_request_duration_seconds", "class=\"read\"");
    double write0 = hist_check(before, "keygate_request_duration_seconds", "class=\"write\"");
    double cache0 = hist_check(before, "keygate_backend_latency_seconds", "backend=\"cache\"");
    redisContext *c = harness_must_client(&h);
    /* 40 GETs pipelined, 10 one at a time; 3 SETs on q: (no TTL: one backend reply each) */
    for (int i = 0; i < 40; i++) redisAppendCommand(c, "GET cache:h:%d", i);
    for (int i = 0; i < 40; i++) freeReplyObject(next_reply(c));
    for (int i = 0; i < 10; i++) freeReplyObject(cmd(c, "GET cache:h:x"));
    for (int i = 0; i < 3; i++) freeReplyObject(cmd(c, "SET q:h:%d v", i));
    char *after = metrics(); /* c still open: its replies are counted without its close */
    redisFree(c);
    ck_assert_int_eq(hist_check(after, "keygate_request_duration_seconds", "class=\"read\"") - read0, 50);
    ck_assert_int_eq(hist_check(after, "keygate_request_duration_seconds", "class=\"write\"") - write0, 3);
    ck_assert_int_eq(hist_check(after, "keygate_backend_latency_seconds", "backend=\"cache\"") - cache0, 50);
    hist_check(after, "keygate_backend_latency_seconds", "backend=\"durable\"");
    hist_check(after, "keygate_request_duration_seconds", "class=\"other\"");
    free(before);
    free(after);
}
END_TEST

/* A TLS client's replies are counted before they reach it too (its bufferevent writes after
 * the worker's flush step): 3 pipelined SETs, read back, show in the write histogram while the
 * connection is still open. */
START_TEST(test_histograms_count_a_tls_clients_requests)
{
    int tls_port = harness_free_port();
    ck_assert_int_gt(tls_port, 0);
    char conf[3 * PATH_MAX];
    snprintf(conf, sizeof conf,
             "backend-info-interval 1s\nlisten 127.0.0.1:%d tls cert=%s/build/certs/server.crt "
             "key=%s/build/certs/server.key\n",
             tls_port, h.root, h.root);
    struct harness_opts o = {.admin = 1, .registry_text = REGISTRY, .extra_config = conf};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart with a TLS listener: %s", h.error);
    char *before = metrics();
    double write0 = hist_check(before, "keygate_request_duration_seconds", "class=\"write\"");

    SSL *ssl = harness_tls_client(&h, tls_port, NULL);
    const char *req = "SET q:ht:1 v\r\nSET q:ht:2 v\r\nSET q:ht:3 v\r\n";
    const char *want = "+OK\r\n+OK\r\n+OK\r\n";
    ck_assert_int_eq(SSL_write(ssl, req, (int)strlen(req)), (int)strlen(req));
    char out[64];
    size_t got = 0;
    while (got < strlen(want)) {
        int n = SSL_read(ssl, out + got, (int)(sizeof out - 1 - got));
        ck_assert_msg(n > 0, "TLS read ended after %zu bytes", got);
        got += (size_t)n;
    }
    out[got] = '\0';
    ck_assert_str_eq(out, want);

    char *after = metrics(); /* the TLS connection still open */
    ck_assert_int_eq(hist_check(after, "keygate_request_duration_seconds", "class=\"write\"") - write0, 3);
    harness_tls_close(ssl);
    free(before);
    free(after);
    redisContext *d = harness_must_direct(&h, "durable");
    freeReplyObject(cmd(d, "DEL q:ht:1 q:ht:2 q:ht:3"));
    redisFree(d);
}
END_TEST

/* ---- backend capacity ---- */

/* INFO field `field` of backend `name` read directly. */
static long long direct_info(const char *name, const char *field)
{
    redisContext *d = harness_must_direct(&h, name);
    redisReply *r = cmd(d, "INFO everything");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    char pat[64];
    snprintf(pat, sizeof pat, "\r\n%s:", field);
    const char *p = strstr(r->str, pat);
    ck_assert_msg(p != NULL, "INFO has no %s", field);
    long long v = strtoll(p + strlen(pat), NULL, 10);
    freeReplyObject(r);
    redisFree(d);
    return v;
}

static void direct_config_set(const char *name, const char *param, const char *value)
{
    redisContext *d = harness_must_direct(&h, name);
    redisReply *r = cmd(d, "CONFIG SET %s %s", param, value);
    ck_assert_msg(r->type == REDIS_REPLY_STATUS, "CONFIG SET %s %s: %s", param, value, describe(r));
    freeReplyObject(r);
    redisFree(d);
}

/* Poll /metrics until series `name` equals want (timeout_ms); returns the last body. */
static char *metrics_until(const char *name, double want, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        char *body = metrics();
        if (series(body, name) == want || now_ms() >= deadline) return body;
        free(body);
        sleep_ms(100);
    }
}

/* /metrics once the INFO poller has read both instances after since (now_ms()): each
 * keygate_backend_info_age_seconds is under the time since then. Fails after 5 s (the suite
 * reads every second). */
static char *metrics_read_after(long long since)
{
    static const char *const ages[] = {"keygate_backend_info_age_seconds{backend=\"durable\"}",
                                       "keygate_backend_info_age_seconds{backend=\"cache\"}"};
    long long deadline = now_ms() + 5000;
    for (;;) {
        long long asked = now_ms();
        char *body = metrics();
        int fresh = 1;
        for (int i = 0; i < 2; i++) {
            double age = series(body, ages[i]); /* -1: no reading yet */
            fresh &= age >= 0 && age * 1000 + 2 < (double)(asked - since);
        }
        if (fresh) return body;
        ck_assert_msg(now_ms() < deadline,
                      "no INFO reading of both instances within 5 s (backend-info-interval 1s):\n%s", body);
        free(body);
        sleep_ms(50);
    }
}

START_TEST(test_capacity_gauges_equal_backend_info)
{
    direct_config_set("cache", "maxmemory", "123456789");
    char *body = metrics_until("keygate_backend_maxmemory_bytes{backend=\"cache\"}", 123456789, 3000);
    ck_assert_msg(series(body, "keygate_backend_maxmemory_bytes{backend=\"cache\"}") == 123456789,
                  "maxmemory not read within 2 intervals:\n%s", body);
    free(body);
    /* quiet backends: the next reading equals what INFO says now */
    long long hits = direct_info("cache", "keyspace_hits"), misses = direct_info("cache", "keyspace_misses");
    long long evicted = direct_info("cache", "evicted_keys"), aof = direct_info("durable", "aof_enabled");
    body = metrics_read_after(now_ms()); /* a reading of now */
    ck_assert_int_eq(must_series(body, "keygate_backend_keyspace_hits_total{backend=\"cache\"}"), hits);
    ck_assert_int_eq(must_series(body, "keygate_backend_keyspace_misses_total{backend=\"cache\"}"), misses);
    ck_assert_int_eq(must_series(body, "keygate_backend_evicted_keys_total{backend=\"cache\"}"), evicted);
    ck_assert_int_eq(must_series(body, "keygate_backend_aof_enabled{backend=\"durable\"}"), aof);
    ck_assert_int_eq(must_series(body, "keygate_backend_aof_enabled{backend=\"cache\"}"), 0);
    ck_assert_int_eq(must_series(body, "keygate_backend_aof_last_write_ok{backend=\"durable\"}"), 1);
    ck_assert_int_eq(must_series(body, "keygate_backend_role{backend=\"durable\",role=\"master\"}"), 1);
    ck_assert(must_series(body, "keygate_backend_info_age_seconds{backend=\"cache\"}") < 1.5);
    double used = must_series(body, "keygate_backend_used_memory_bytes{backend=\"cache\"}");
    long long used_now = direct_info("cache", "used_memory");
    ck_assert_msg(used > used_now * 0.9 && used < used_now * 1.1, "used_memory %.0f vs INFO %lld", used, used_now);
    double ratio = must_series(body, "keygate_backend_memory_headroom_ratio{backend=\"cache\"}");
    ck_assert_msg(ratio > 0 && ratio < 1 && ratio - (123456789.0 - used) / 123456789.0 < 1e-6, "ratio %f", ratio);
    ck_assert(must_series(body, "keygate_backend_connected_clients{backend=\"cache\"}") >= 1);
    free(body);
}
END_TEST

START_TEST(test_oom_counted_and_healthz_flips_on_headroom)
{
    struct harness_http hz = harness_admin_get(&h, "/healthz");
    ck_assert_msg(hz.status == 200, "healthz: %d %s", hz.status, hz.body);
    free(hz.body);
    char *before = metrics();
    /* a tiny maxmemory on durable (noeviction): writes get -OOM, headroom is 0 */
    direct_config_set("durable", "maxmemory", "1mb");
    redisContext *d = harness_must_direct(&h, "durable");
    static char fill[2 << 20];
    freeReplyObject(cmd(d, "SET q:oom:fill %b", fill, sizeof fill));
    redisFree(d);
    redisContext *c = harness_must_client(&h);
    for (int i = 0; i < 3; i++) {
        redisReply *r = cmd(c, "RPUSH q:oom:%d x", i);
        ck_assert_msg(r->type == REDIS_REPLY_ERROR && strncmp(r->str, "OOM", 3) == 0, "%s", describe(r));
        freeReplyObject(r);
    }
    redisFree(c);
    char *after = metrics_until("keygate_backend_memory_headroom_ratio{backend=\"durable\"}", 0, 3000);
    const char *oom = "keygate_namespace_backend_errors_total{" NS("q:", "durable", "queues") ",code=\"OOM\"}";
    ck_assert_int_eq(must_series(after, oom) - must_series(before, oom), 3);
    const char *rej = "keygate_backend_rejected_writes_total{backend=\"durable\"}";
    ck_assert_int_eq(must_series(after, rej) - must_series(before, rej), 3);
    ck_assert_int_eq(must_series(after, "keygate_backend_memory_headroom_ratio{backend=\"durable\"}"), 0);
    free(before);
    free(after);
    hz = harness_admin_get(&h, "/healthz");
    ck_assert_msg(hz.status == 503 && strstr(hz.body, "instance 'durable' memory headroom is 0.0%") &&
                      strstr(hz.body, "under durable-headroom-warn 20%"),
                  "healthz: %d %s", hz.status, hz.body);
    free(hz.body);
    /* room again: back to 200 within an interval */
    redisContext *d2 = harness_must_direct(&h, "durable");
    freeReplyObject(cmd(d2, "DEL q:oom:fill"));
    redisFree(d2);
    direct_config_set("durable", "maxmemory", "0");
    long long deadline = now_ms() + 3000;
    do {
        sleep_ms(100);
        hz = harness_admin_get(&h, "/healthz");
        if (hz.status == 200) break;
        free(hz.body);
        hz.body = NULL;
    } while (now_ms() < deadline);
    ck_assert_msg(hz.status == 200, "healthz after the fix: %d %s", hz.status, hz.body ? hz.body : "");
    free(hz.body);
}
END_TEST

/* ---- promtool ---- */

START_TEST(test_promtool_accepts_metrics)
{
    redisContext *c = harness_must_client(&h);
    freeReplyObject(cmd(c, "GET cache:p"));
    freeReplyObject(cmd(c, "SET nope:p 1"));
    redisFree(c);
    char *body = metrics_read_after(0); /* a capacity reading is in: its series are there */
    char why[8192];
    int rc = serverkit_promtool_check(body, h.dir, why, sizeof why);
    free(body);
    ck_assert_msg(rc == 0, "%.1500s", why);
}
END_TEST

/* ---- labels, build and process series ---- */

/* No series of keygate's carries `instance` or `job`: those are the labels Prometheus gives the
 * target; a series carrying one of them itself is stored renamed (exported_instance). */
START_TEST(test_no_series_carries_a_target_label)
{
    char *body = metrics_read_after(0);
    int series_lines = 0;
    for (const char *line = body; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
        if (*line == '#' || *line == '\n') continue;
        series_lines++;
        const char *brace = strchr(line, '{'), *nl = strchr(line, '\n');
        if (!brace || (nl && brace > nl)) continue;
        const char *end = strchr(brace, '}');
        ck_assert_ptr_nonnull(end);
        char labels[4096];
        snprintf(labels, sizeof labels, ",%.*s", (int)(end - brace - 1), brace + 1);
        ck_assert_msg(!strstr(labels, ",instance=") && !strstr(labels, ",job=") && !strstr(labels, ",exported_"),
                      "a series carries a target label: %.*s", nl ? (int)(nl - line) : (int)strlen(line), line);
    }
    ck_assert_int_gt(series_lines, 50);
    ck_assert_int_eq(must_series(body, "keygate_instance_up{backend=\"durable\"}"), 1);
    ck_assert_int_eq(must_series(body, "keygate_instance_up{backend=\"cache\"}"), 1);
    free(body);
}
END_TEST

/* keygate's /proc/PID/stat field `field` (1-based; the name, field 2, skipped by its last ')'). */
static unsigned long long proc_stat_field(pid_t pid, int field)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    ck_assert_ptr_nonnull(p);
    for (int i = 3; i <= field; i++) {
        p = strchr(p + 1, ' ');
        ck_assert_ptr_nonnull(p);
    }
    return strtoull(p + 1, NULL, 10);
}

/* keygate_build_info names this build; the process_* series are keygate's own process as /proc
 * shows it from outside: open fds (counted in /proc/PID/fd), the fd limit (/proc/PID/limits), the
 * resident memory (/proc/PID/statm), the start time (/proc/PID/stat + btime), the CPU time. */
START_TEST(test_build_info_and_process_series)
{
    pid_t pid = h.keygate_pid;
    char *body = metrics_read_after(0);
    char want[256];
    snprintf(want, sizeof want, "\nkeygate_build_info{version=\"%s\",libevent=\"", KEYGATE_VERSION);
    ck_assert_msg(strstr(body, want) != NULL, "no %s in /metrics", want + 1);
    const char *bi = strstr(body, want);
    const char *eol = strchr(bi + 1, '\n');
    ck_assert_msg(eol && strncmp(eol - 3, "} 1", 3) == 0 && strstr(bi, "hiredis=\"") < eol &&
                      strstr(bi, "openssl=\"OpenSSL ") < eol,
                  "keygate_build_info: %.*s", (int)(eol - bi), bi);
    /* open fds: /proc/PID/fd counted now; keygate's own count is of the moment it answered, give
     * or take the admin connection and the directory it opened */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    long fds = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) fds += e->d_name[0] != '.';
    closedir(d);
    double open = must_series(body, "process_open_fds");
    ck_assert_msg(open >= fds - 2 && open <= fds + 2, "process_open_fds %.0f, /proc/%d/fd has %ld", open, (int)pid,
                  fds);
    /* the fd limit: /proc/PID/limits' soft "Max open files" */
    snprintf(path, sizeof path, "/proc/%d/limits", (int)pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    double soft = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Max open files", 14) == 0) soft = strtod(line + 26, NULL);
    fclose(f);
    ck_assert_msg(soft > 0 && must_series(body, "process_max_fds") == soft, "process_max_fds %.0f, limits %.0f",
                  must_series(body, "process_max_fds"), soft);
    /* resident memory: within 25% of /proc/PID/statm now */
    snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    unsigned long long vm, rss;
    ck_assert_int_eq(fscanf(f, "%llu %llu", &vm, &rss), 2);
    fclose(f);
    double rss_bytes = (double)rss * (double)sysconf(_SC_PAGESIZE);
    double rss_metric = must_series(body, "process_resident_memory_bytes");
    ck_assert_msg(rss_metric > 0.75 * rss_bytes && rss_metric < 1.25 * rss_bytes,
                  "process_resident_memory_bytes %.0f, statm %.0f", rss_metric, rss_bytes);
    ck_assert(must_series(body, "process_virtual_memory_bytes") >= rss_metric);
    /* start time: /proc/PID/stat's starttime after /proc/stat's btime, to the tick */
    unsigned long long btime = 0;
    f = fopen("/proc/stat", "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", &btime) == 1) break;
    fclose(f);
    double start = (double)btime + (double)proc_stat_field(pid, 22) / (double)sysconf(_SC_CLK_TCK);
    double start_metric = must_series(body, "process_start_time_seconds");
    ck_assert_msg(start_metric > start - 0.02 && start_metric < start + 0.02,
                  "process_start_time_seconds %.3f, /proc says %.3f", start_metric, start);
    /* CPU: utime + stime (fields 14, 15) now, at least what keygate reported a moment ago */
    double cpu = (double)(proc_stat_field(pid, 14) + proc_stat_field(pid, 15)) / (double)sysconf(_SC_CLK_TCK);
    double cpu_metric = must_series(body, "process_cpu_seconds_total");
    ck_assert_msg(cpu_metric > 0 && cpu_metric <= cpu + 0.05, "process_cpu_seconds_total %.3f, /proc %.3f", cpu_metric,
                  cpu);
    free(body);
}
END_TEST

/* ---- a real Prometheus scraping keygate ---- */

static pid_t prom_pid;

/* Prometheus's HTTP API answer for `query` (curl; jq -c of its .data.result), malloc'd. */
static char *prom_query(int port, const char *query)
{
    char command[2048];
    snprintf(command, sizeof command,
             "curl -sfG --max-time 5 'http://127.0.0.1:%d/api/v1/query' --data-urlencode 'query=%s' | jq -c "
             "'.data.result | map(.metric + {value: .value[1]}) | sort_by(.__name__, .backend)'",
             port, query);
    FILE *p = popen(command, "r");
    ck_assert_ptr_nonnull(p);
    char *out = calloc(1, 65536);
    ck_assert_ptr_nonnull(out);
    size_t n = fread(out, 1, 65535, p);
    out[n] = '\0';
    pclose(p);
    char *nl = strchr(out, '\n');
    if (nl) *nl = '\0';
    return out;
}

/* Wait up to ms for prom_query(query) to be `want` exactly; returns the last answer. */
static char *prom_wait(int port, const char *query, const char *want, int ms)
{
    long long end = now_ms() + ms;
    for (;;) {
        char *got = prom_query(port, query);
        if (strcmp(got, want) == 0 || now_ms() >= end) return got;
        free(got);
        sleep_ms(200);
    }
}

static void prom_stop(void)
{
    if (prom_pid <= 0) return;
    kill(prom_pid, SIGTERM);
    if (harness_wait_exit(prom_pid, 10000) == -1) {
        kill(prom_pid, SIGKILL);
        waitpid(prom_pid, NULL, 0);
    }
    prom_pid = 0;
}

/* Debian's prometheus server scrapes keygate's /metrics every second with the default scrape
 * config (honor_labels: false): the series it stores carry keygate's backend label as served,
 * job and instance are the target's, and no exported_instance exists; build_info and the
 * process series arrive; the up series is 1. Checked to fail with the backend label named
 * instance again (Prometheus then stores exported_instance). */
START_TEST(test_real_prometheus_scrapes_keygate)
{
    int web = harness_free_port();
    char dir[PATH_MAX], conf[PATH_MAX], log[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/prometheus", h.dir);
    snprintf(conf, sizeof conf, "%s/prometheus.yml", h.dir);
    snprintf(log, sizeof log, "%s/prometheus.log", h.dir);
    FILE *f = fopen(conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: keygate\n"
            "    static_configs: [{targets: ['127.0.0.1:%d']}]\n",
            h.admin_port);
    fclose(f);
    char web_arg[64], conf_arg[PATH_MAX + 32], dir_arg[PATH_MAX + 32];
    snprintf(web_arg, sizeof web_arg, "--web.listen-address=127.0.0.1:%d", web);
    snprintf(conf_arg, sizeof conf_arg, "--config.file=%s", conf);
    snprintf(dir_arg, sizeof dir_arg, "--storage.tsdb.path=%s", dir);
    pid_t parent = getpid();
    prom_pid = fork();
    ck_assert_int_ge(prom_pid, 0);
    if (prom_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        FILE *l = freopen(log, "w", stderr);
        if (!l) _exit(126);
        dup2(STDERR_FILENO, STDOUT_FILENO);
        execlp("prometheus", "prometheus", conf_arg, dir_arg, web_arg, "--log.level=warn", (char *)NULL);
        _exit(127);
    }
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", h.admin_port);
    char want[1024];
    snprintf(want, sizeof want, "[{\"__name__\":\"up\",\"instance\":\"%s\",\"job\":\"keygate\",\"value\":\"1\"}]",
             target);
    char *got = prom_wait(web, "up", want, 20000);
    ck_assert_msg(strcmp(got, want) == 0, "Prometheus's up: %s (want %s); its log %s", got, want, log);
    free(got);
    /* keygate's backend label, stored as served, beside the target's job and instance */
    snprintf(want, sizeof want,
             "[{\"__name__\":\"keygate_instance_up\",\"backend\":\"cache\",\"instance\":\"%s\",\"job\":\"keygate\","
             "\"value\":\"1\"},{\"__name__\":\"keygate_instance_up\",\"backend\":\"durable\",\"instance\":\"%s\","
             "\"job\":\"keygate\",\"value\":\"1\"}]",
             target, target);
    got = prom_wait(web, "keygate_instance_up", want, 5000);
    ck_assert_msg(strcmp(got, want) == 0, "keygate_instance_up as Prometheus stored it: %s\nwant %s", got, want);
    free(got);
    /* no series of the job has an exported_* label */
    got = prom_query(web,
                     "count({job=\"keygate\",exported_instance!=\"\"}) or count({job=\"keygate\",exported_job!=\"\"})");
    ck_assert_msg(strcmp(got, "[]") == 0, "series with exported_ labels: %s", got);
    free(got);
    /* the dashboard's and alerts' selectors find what they look for */
    got = prom_query(web, "keygate_backend_aof_enabled{backend=\"durable\"}");
    ck_assert_msg(strstr(got, "\"value\":\"1\"") != NULL, "keygate_backend_aof_enabled{backend=\"durable\"}: %s", got);
    free(got);
    got = prom_query(web, "keygate_build_info");
    snprintf(want, sizeof want, "\"version\":\"%s\"", KEYGATE_VERSION);
    ck_assert_msg(strstr(got, want) && strstr(got, "\"value\":\"1\""), "keygate_build_info: %s", got);
    free(got);
    static const char *const process[] = {"process_cpu_seconds_total", "process_resident_memory_bytes",
                                          "process_open_fds", "process_max_fds", "process_start_time_seconds"};
    for (size_t i = 0; i < sizeof process / sizeof process[0]; i++) {
        got = prom_query(web, process[i]);
        ck_assert_msg(strstr(got, "\"job\":\"keygate\"") != NULL, "%s not stored: %s", process[i], got);
        free(got);
    }
    /* a rate over the stored series: process_cpu_seconds_total is a counter Prometheus can use */
    got = prom_wait(web, "count(rate(process_cpu_seconds_total[5s]) >= 0)", "[{\"value\":\"1\"}]", 10000);
    ck_assert_msg(strcmp(got, "[{\"value\":\"1\"}]") == 0, "rate(process_cpu_seconds_total[5s]): %s", got);
    free(got);
    prom_stop();
}
END_TEST

/* ---- the namespace sampler ---- */

/* Keys of `prefix` on backend `name` counted directly (SCAN MATCH), and the summed
 * LLEN/XLEN/ZCARD of those that are lists, streams or zsets. */
static void direct_count(const char *name, const char *prefix, long long *keys, long long *depth)
{
    redisContext *d = harness_must_direct(&h, name);
    *keys = *depth = 0;
    char cursor[32] = "0";
    do {
        redisReply *r = cmd(d, "SCAN %s MATCH %s* COUNT 100", cursor, prefix);
        ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            const char *k = r->element[1]->element[i]->str;
            (*keys)++;
            redisReply *t = cmd(d, "TYPE %s", k);
            const char *len = strcmp(t->str, "list") == 0     ? "LLEN"
                              : strcmp(t->str, "stream") == 0 ? "XLEN"
                              : strcmp(t->str, "zset") == 0   ? "ZCARD"
                                                              : NULL;
            freeReplyObject(t);
            if (!len) continue;
            redisReply *n = cmd(d, "%s %s", len, k);
            ck_assert_int_eq(n->type, REDIS_REPLY_INTEGER);
            *depth += n->integer;
            freeReplyObject(n);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    redisFree(d);
}

START_TEST(test_sampler_counts_keys_and_queue_depth)
{
    struct harness_opts o = {.admin = 1,
                             .registry_text = REGISTRY,
                             .extra_config = "backend-info-interval 1s\nnamespace-scan-interval 1s\n"};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart: %s", h.error);
    redisContext *c = harness_must_client(&h);
    for (int i = 0; i < 3; i++) freeReplyObject(cmd(c, "RPUSH q:s:list1 job%d", i));
    for (int i = 0; i < 2; i++) freeReplyObject(cmd(c, "LPUSH q:s:list2 job%d", i));
    for (int i = 0; i < 4; i++) freeReplyObject(cmd(c, "ZADD q:s:z %d m%d", i, i));
    for (int i = 0; i < 5; i++) freeReplyObject(cmd(c, "XADD q:s:stream * f %d", i));
    freeReplyObject(cmd(c, "SET q:s:string not-a-queue"));
    freeReplyObject(cmd(c, "HSET q:s:hash f v"));
    for (int i = 0; i < 7; i++) freeReplyObject(cmd(c, "SET cache:s:%d v", i));
    for (int i = 0; i < 2; i++) freeReplyObject(cmd(c, "RPUSH rl:s:%d x", i)); /* rl: is not a depth namespace */
    redisFree(c);
    long long q_keys, q_depth, cache_keys, cache_depth, rl_keys, rl_depth;
    direct_count("durable", "q:", &q_keys, &q_depth);
    direct_count("cache", "cache:", &cache_keys, &cache_depth);
    direct_count("durable", "rl:", &rl_keys, &rl_depth);
    ck_assert_int_ge(q_depth, 14); /* 3 + 2 + 4 + 5 at least (earlier tests add more) */
    ck_assert_int_ge(q_keys, 6);
    /* two passes: one that began before the writes may have missed them */
    char *body = NULL;
    long long deadline = now_ms() + 5000;
    const char *qk = "keygate_namespace_keys{" NS("q:", "durable", "queues") "}";
    const char *qd = "keygate_namespace_depth{" NS("q:", "durable", "queues") "}";
    for (;;) {
        body = metrics();
        if ((series(body, qk) == q_keys && series(body, qd) == q_depth) || now_ms() >= deadline) break;
        free(body);
        sleep_ms(200);
    }
    ck_assert_msg(series(body, qk) == q_keys, "q: keys %.0f, direct %lld", series(body, qk), q_keys);
    ck_assert_msg(series(body, qd) == q_depth, "q: depth %.0f, direct %lld", series(body, qd), q_depth);
    ck_assert_int_eq(series(body, "keygate_namespace_keys{" NS("cache:", "cache", "cache") "}"), cache_keys);
    ck_assert_int_eq(series(body, "keygate_namespace_keys{" NS("rl:", "durable", "rate-limit") "}"), rl_keys);
    ck_assert_msg(series(body, "keygate_namespace_depth{" NS("rl:", "durable", "rate-limit") "}") < 0,
                  "rl: has no depth flag: no depth series");
    ck_assert_msg(series(body, "keygate_namespace_keys{" NS("push:", "cache", "notifications") "}") < 0,
                  "a channel holds no keys");
    ck_assert(must_series(body, "keygate_namespace_scan_age_seconds{backend=\"durable\"}") < 3);
    ck_assert(must_series(body, "keygate_namespace_scan_duration_seconds{backend=\"cache\"}") >= 0);
    free(body);
}
END_TEST

START_TEST(test_sampler_off_by_default)
{
    char *body = metrics();
    ck_assert_msg(strstr(body, "keygate_namespace_keys") == NULL, "the sampler ran without namespace-scan-interval");
    free(body);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = harness_tcase(s, "metrics", 60, setup, teardown);
    harness_add_test(tc, test_namespace_counters_exact);
    harness_add_test(tc, test_ttl_injected_inside_multi_and_split);
    harness_add_test(tc, test_multi_namespace_command_counted_under_each);
    harness_add_test(tc, test_default_line_is_its_own_namespace);
    harness_add_test(tc, test_reload_keeps_series);
    harness_add_test(tc, test_histograms_count_the_requests);
    harness_add_test(tc, test_histograms_count_a_tls_clients_requests);
    harness_add_test(tc, test_capacity_gauges_equal_backend_info);
    harness_add_test(tc, test_oom_counted_and_healthz_flips_on_headroom);
    harness_add_test(tc, test_promtool_accepts_metrics);
    harness_add_test(tc, test_no_series_carries_a_target_label);
    harness_add_test(tc, test_build_info_and_process_series);
    harness_add_test(tc, test_real_prometheus_scrapes_keygate);
    harness_add_test(tc, test_sampler_counts_keys_and_queue_depth);
    harness_add_test(tc, test_sampler_off_by_default);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
