/* test_adopt.c: integration tests of issue 13's adoption aids: the registry's default line and report mode, checked on the backends, in /metrics and in the log. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "stats.h"

/*
 * One harness; every test restarts keygate with its own registry and keygate.conf lines
 * (fresh counters, an empty log). The user `app` (password "apppw") has owner app only.
 * Registry facts used (ADOPT_REGISTRY):
 *   on:     durable ttl=1h max-ttl=1d owner=app        enforced
 *   rep:    cache   ttl=1h max-ttl=1d owner=app        enforce=report
 *   other:  cache   ttl=1h            owner=others     enforce=report
 *   lock:   durable ttl=none          owner=others     enforced
 *   default cache   ttl=10m           owner=app        (keys matching no prefix)
 */

#define ADOPT_REGISTRY                                                                                                 \
    "namespace on:    instance=durable ttl=1h max-ttl=1d owner=app    purpose=\"enforced\"\n"                          \
    "namespace rep:   instance=cache   ttl=1h max-ttl=1d owner=app    enforce=report purpose=\"being adopted\"\n"      \
    "namespace other: instance=cache   ttl=1h            owner=others enforce=report\n"                                \
    "namespace lock:  instance=durable ttl=none          owner=others\n"                                               \
    "channel   push:  instance=cache                     owner=app\n"                                                  \
    "default          instance=cache   ttl=10m           owner=app    purpose=\"not registered yet\"\n"

static struct harness h;

/* keygate.conf's user line (and `extra`), in a static buffer. */
static const char *user_config(const char *extra)
{
    static char conf[1024];
    char hex[65];
    harness_sha256_hex("apppw", hex);
    snprintf(conf, sizeof conf, "user app sha256=%s owners=app access=rw\n%s", hex, extra ? extra : "");
    return conf;
}

/* The suite's configuration is ADOPT_REGISTRY: the post-condition reads it. */
static void setup(void)
{
    struct harness_opts o = {.registry_text = ADOPT_REGISTRY, .extra_config = user_config(NULL), .admin = 1};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h);
    harness_stop(&h);
}

/* Restart keygate with registry `registry` and extra keygate.conf lines (after the user line). */
static void restart_with(const char *registry, const char *extra)
{
    struct harness_opts o = {.registry_text = registry, .extra_config = user_config(extra), .admin = 1};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart: %s", h.error);
}

static redisContext *app_client(void)
{
    redisContext *c = harness_must_client(&h);
    expect_status_at(__LINE__, cmd(c, "AUTH app apppw"), "OK", "AUTH");
    return c;
}

/* GET path on the admin port: the body (malloc'd). */
static char *http_body(const char *path)
{
    struct harness_http r = harness_admin_get(&h, path);
    return r.body;
}

/* The value of the metric line `series value` in /metrics; -1 when absent. */
static long long metric(const char *series)
{
    char *body = http_body("/metrics");
    size_t n = strlen(series);
    long long v = -1;
    for (const char *line = body; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (strncmp(line, series, n) == 0 && line[n] == ' ') v = strtoll(line + n + 1, NULL, 10);
    free(body);
    return v;
}

#define expect_metric(series, want)                                                                                    \
    do {                                                                                                               \
        long long got_ = metric(series);                                                                               \
        ck_assert_msg(got_ == (want), "%s is %lld, want %lld", series, got_, (long long)(want));                       \
    } while (0)

/* The log lines holding `needle`: how many, and the sum of their "N since the last line". */
static void log_lines(const char *needle, int *lines, long long *sum)
{
    char *log = harness_keygate_log(&h);
    ck_assert_ptr_nonnull(log);
    *lines = 0;
    *sum = 0;
    for (char *line = log; line && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        if (strstr(line, needle)) {
            const char *since = strstr(line, ": ");
            const char *last = NULL;
            while (since) { /* the count is after the last ": " */
                last = since;
                since = strstr(since + 2, ": ");
            }
            (*lines)++;
            if (last && strstr(last, "since the last line")) *sum += strtoll(last + 2, NULL, 10);
        }
        line = end ? end + 1 : NULL;
    }
    free(log);
}

/* PTTL of key on backend `name`, read directly. */
static long long pttl(const char *name, const char *key)
{
    return harness_direct_int(&h, name, "PTTL %s", key);
}

static long long exists(const char *name, const char *key)
{
    return harness_direct_int(&h, name, "EXISTS %s", key);
}

/* ---- the default line ---- */

START_TEST(test_default_line_takes_unregistered_keys_with_its_rules)
{
    restart_with(ADOPT_REGISTRY, NULL);
    redisContext *c = app_client();
    for (int i = 0; i < 7; i++) expect_status_at(__LINE__, cmd(c, "SET legacy:%d v", i), "OK", "SET unregistered");
    expect_int_at(__LINE__, cmd(c, "DEL legacy:5 legacy:6"), 2, "DEL");
    expect_int_at(__LINE__, cmd(c, "PUBLISH legacy-events hi"), 0, "PUBLISH unregistered channel");
    /* the default line's ttl=10m was injected; its instance is cache */
    for (int i = 0; i < 5; i++) {
        char key[32];
        snprintf(key, sizeof key, "legacy:%d", i);
        long long t = pttl("cache", key);
        ck_assert_msg(t > 590000 && t <= 600000, "%s: PTTL %lld on cache, want the default line's 10m", key, t);
        ck_assert_int_eq(exists("durable", key), 0);
    }
    /* registered keys are not counted */
    expect_status_at(__LINE__, cmd(c, "SET on:1 v"), "OK", "SET registered");
    expect_metric("keygate_unregistered_total{kind=\"key\"}", 9);
    expect_metric("keygate_unregistered_total{kind=\"channel\"}", 1);
    expect_metric("keygate_errors_nonamespace_total", 0);
    /* rate-limited: the first key of a burst is logged, with its name, the rest counted */
    int lines;
    long long sum;
    log_lines("unregistered key 'legacy:0' taken by the default line (with 'set'): 1 since the last line", &lines,
              &sum);
    ck_assert_int_eq(lines, 1);
    log_lines("unregistered key", &lines, &sum);
    ck_assert_int_eq(lines, 1);
    log_lines("unregistered channel 'legacy-events'", &lines, &sum);
    ck_assert_int_eq(lines, 1);
    redisFree(c);
}
END_TEST

START_TEST(test_default_line_log_escapes_and_cuts_the_key)
{
    restart_with(ADOPT_REGISTRY, NULL);
    redisContext *c = app_client();
    char key[200];
    memset(key, 'k', sizeof key);
    memcpy(key, "bin\n'\x01", 6);
    redisReply *r = redisCommand(c, "SET %b v", key, sizeof key);
    expect_status_at(__LINE__, r, "OK", "SET binary unregistered key");
    int lines;
    long long sum;
    /* 64 bytes: "bin" \n ' \x01 and 58 k, then "..." */
    char want[256];
    snprintf(want, sizeof want, "unregistered key 'bin\\x0a\\'\\x01%.*s...' taken", 58,
             "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk");
    log_lines(want, &lines, &sum);
    ck_assert_msg(lines == 1, "no log line with %s", want);
    redisFree(c);
}
END_TEST

START_TEST(test_registry_command_prints_the_default_line_last)
{
    restart_with(ADOPT_REGISTRY, NULL);
    const char *bin = getenv("KEYGATE_BIN");
    char command[PATH_MAX + 64];
    snprintf(command, sizeof command, "%s registry -c '%s'", bin && *bin ? bin : "build/keygate", h.conf_file);
    FILE *p = popen(command, "r");
    ck_assert_ptr_nonnull(p);
    char line[1024], last[1024] = "";
    while (fgets(line, sizeof line, p)) snprintf(last, sizeof last, "%s", line);
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_msg(strncmp(last, "(default)", 9) == 0 && strstr(last, "not registered yet") && strstr(last, "10m"),
                  "last row: %s", last);
}
END_TEST

/* ---- report mode ---- */

/* The traffic of the report tests: n_inject SETs, n_max EXPIREs above max-ttl, one PERSIST,
 * cross-instance RENAMEs, NOPERM GETs; every reply is what Redis answers, nothing refused. */
static void send_report_traffic(redisContext *c, const char *tag, int n_inject, int n_max, int n_cross, int n_noperm)
{
    for (int i = 0; i < n_inject; i++)
        expect_status_at(__LINE__, cmd(c, "SET rep:%s:inj%d v", tag, i), "OK", "SET in report mode");
    expect_status_at(__LINE__, cmd(c, "SET rep:%s:max v EX 100", tag), "OK", "SET with its own TTL");
    for (int i = 0; i < n_max; i++)
        expect_int_at(__LINE__, cmd(c, "EXPIRE rep:%s:max 99999999", tag), 1, "EXPIRE above max-ttl");
    expect_status_at(__LINE__, cmd(c, "SET rep:%s:per v EX 100", tag), "OK", "SET with its own TTL");
    expect_int_at(__LINE__, cmd(c, "PERSIST rep:%s:per", tag), 1, "PERSIST in report mode");
    for (int i = 0; i < n_cross; i++) {
        expect_status_at(__LINE__, cmd(c, "SET on:%s:src%d v", tag, i), "OK", "SET enforced");
        expect_status_at(__LINE__, cmd(c, "RENAME on:%s:src%d rep:%s:dst%d", tag, i, tag, i), "OK", "RENAME across");
    }
    for (int i = 0; i < n_noperm; i++) expect_nil_at(__LINE__, cmd(c, "GET other:%s:%d", tag, i), "GET of others");
}

START_TEST(test_report_mode_forwards_counts_and_logs_per_reason)
{
    restart_with(ADOPT_REGISTRY, NULL);
    redisContext *c = app_client();
    send_report_traffic(c, "a", 3, 2, 2, 4);
    /* outcomes on the backends: forwarded unchanged */
    for (int i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "rep:a:inj%d", i);
        ck_assert_msg(pttl("cache", key) == -1, "%s: no TTL may be injected in report mode", key);
    }
    ck_assert_int_gt(pttl("cache", "rep:a:max"), 86400000LL); /* above max-ttl 1d: not refused */
    ck_assert_int_eq(pttl("cache", "rep:a:per"), -1);         /* PERSIST ran */
    for (int i = 0; i < 2; i++) {                             /* RENAME ran on durable, the first key's */
        char key[32];
        snprintf(key, sizeof key, "rep:a:dst%d", i);
        ck_assert_int_eq(exists("durable", key), 1);
        ck_assert_int_eq(exists("cache", key), 0);
        /* the enforce=on source had ttl=1h, which RENAME carried along */
        ck_assert_int_gt(pttl("durable", key), 3500000);
    }
    /* enforce=on lines keep every rule */
    expect_error_at(__LINE__, cmd(c, "EXPIRE on:a:src0x 99999999"), "DENIED TTL", "max-ttl enforced");
    expect_status_at(__LINE__, cmd(c, "SET on:a:k v"), "OK", "SET enforced");
    ck_assert_int_gt(pttl("durable", "on:a:k"), 3500000);
    expect_error_at(__LINE__, cmd(c, "PERSIST on:a:k"), "DENIED PERSIST", "PERSIST enforced");
    expect_error_at(__LINE__, cmd(c, "GET lock:a"), "NOPERM", "NOPERM enforced");
    expect_error_at(__LINE__, cmd(c, "RENAME rep:a:inj0 on:a:k2"), "CROSSINSTANCE", "the enforce=on key wins");
    /* never forwarded, report mode or not */
    expect_error_at(__LINE__, cmd(c, "FLUSHALL"), "DENIED", "FLUSHALL");
    expect_error_at(__LINE__, cmd(c, "CONFIG GET maxmemory"), "DENIED", "CONFIG");
    expect_error_at(__LINE__, cmd(c, "DEBUG SLEEP 0"), "DENIED", "DEBUG");
    ck_assert_int_eq(exists("cache", "rep:a:inj0"), 1);

    expect_metric("keygate_report_would_inject_ttl_total{namespace=\"rep:\"}", 3 + 2); /* SETs + RENAME dsts */
    expect_metric("keygate_report_would_refuse_total{namespace=\"rep:\",code=\"MAXTTL\"}", 2);
    expect_metric("keygate_report_would_refuse_total{namespace=\"rep:\",code=\"PERSIST\"}", 1);
    expect_metric("keygate_report_would_refuse_total{namespace=\"rep:\",code=\"CROSSINSTANCE\"}", 2);
    expect_metric("keygate_report_would_refuse_total{namespace=\"rep:\",code=\"NOPERM\"}", 0);
    expect_metric("keygate_report_would_refuse_total{namespace=\"other:\",code=\"NOPERM\"}", 4);
    expect_metric("keygate_report_would_inject_ttl_total{namespace=\"other:\"}", 0);
    /* enforce=on lines have no report series; what they refused is counted as errors */
    ck_assert_int_eq(metric("keygate_report_would_inject_ttl_total{namespace=\"on:\"}"), -1);
    expect_metric("keygate_errors_denied_total", 2 + 3);
    expect_metric("keygate_errors_noperm_total", 1);
    expect_metric("keygate_errors_crossinstance_total", 1);

    /* rate-limited log: one line per (namespace, reason) so far, each saying 1 */
    static const char *const pairs[][2] = {
        {"'rep:' would-inject-ttl", "3"},      {"'rep:' would-refuse max-ttl", "2"},
        {"'rep:' would-refuse PERSIST", "1"},  {"'rep:' would-refuse CROSSINSTANCE", "2"},
        {"'other:' would-refuse NOPERM", "4"},
    };
    int lines;
    long long sum;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char needle[128];
        snprintf(needle, sizeof needle, "report: namespace %s", pairs[i][0]);
        log_lines(needle, &lines, &sum);
        ck_assert_msg(lines == 1 && sum == 1, "%s: %d lines, sum %lld (want 1 line saying 1)", needle, lines, sum);
    }
    /* past the interval the next event logs what was counted since: the lines sum to the traffic */
    sleep_ms(STATS_REPORT_LOG_INTERVAL_MS + 300); /* the scenario, not a wait: the rate limit's interval passes */
    send_report_traffic(c, "b", 0, 1, 1, 1);      /* one event per pair: each pair's second line sums it all */
    int want_inject = 3 + 2 + 1;
    struct {
        const char *needle;
        long long want;
    } sums[] = {
        {"report: namespace 'rep:' would-inject-ttl", want_inject},
        {"report: namespace 'rep:' would-refuse max-ttl", 3},
        {"report: namespace 'rep:' would-refuse PERSIST", 2},
        {"report: namespace 'rep:' would-refuse CROSSINSTANCE", 3},
        {"report: namespace 'other:' would-refuse NOPERM", 5},
    };
    for (size_t i = 0; i < sizeof sums / sizeof sums[0]; i++) {
        log_lines(sums[i].needle, &lines, &sum);
        ck_assert_msg(lines == 2 && sum == sums[i].want, "%s: %d lines summing to %lld, want 2 lines summing to %lld",
                      sums[i].needle, lines, sum, sums[i].want);
    }
    expect_metric("keygate_report_would_inject_ttl_total{namespace=\"rep:\"}", want_inject);
    redisFree(c);
}
END_TEST

/* `enforce report` in keygate.conf: every line without enforce= reports, the default line too. */
START_TEST(test_global_report_mode)
{
    restart_with("namespace on:    instance=durable ttl=1h max-ttl=1d owner=app\n"
                 "namespace rep:   instance=cache   ttl=1h max-ttl=1d owner=app enforce=on\n"
                 "default          instance=cache   ttl=10m owner=others\n",
                 "enforce report\n");
    redisContext *c = app_client();
    expect_status_at(__LINE__, cmd(c, "SET on:g v"), "OK", "SET");
    ck_assert_int_eq(pttl("durable", "on:g"), -1);
    expect_status_at(__LINE__, cmd(c, "SET legacy:g v"), "OK", "SET unregistered, owner not the user's");
    ck_assert_int_eq(pttl("cache", "legacy:g"), -1);
    /* on:g and legacy:g lack TTLs only because their lines report, which the post-condition
     * (the suite's ADOPT_REGISTRY, where on: is enforced) does not know: deleted at once */
    ck_assert_int_eq(harness_direct_int(&h, "durable", "DEL on:g"), 1);
    ck_assert_int_eq(harness_direct_int(&h, "cache", "DEL legacy:g"), 1);
    expect_status_at(__LINE__, cmd(c, "SET rep:g v"), "OK", "SET enforce=on line");
    ck_assert_int_gt(pttl("cache", "rep:g"), 3500000);
    expect_error_at(__LINE__, cmd(c, "EXPIRE rep:g 99999999"), "DENIED TTL", "enforce=on wins over the global");
    expect_metric("keygate_report_would_inject_ttl_total{namespace=\"on:\"}", 1);
    expect_metric("keygate_report_would_inject_ttl_total{namespace=\"(default)\"}", 1);
    expect_metric("keygate_report_would_refuse_total{namespace=\"(default)\",code=\"NOPERM\"}", 1);
    expect_metric("keygate_unregistered_total{kind=\"key\"}", 1);
    ck_assert_int_eq(metric("keygate_report_would_inject_ttl_total{namespace=\"rep:\"}"), -1);
    /* the same counts in INFO namespaces */
    redisReply *info = cmd(c, "INFO namespaces");
    ck_assert_int_eq(info->type, REDIS_REPLY_STRING);
    const char *want_info[] = {
        "ns_default:instance=cache,ttl=10m,max_ttl=none,sliding=0,owner=others,enforce=report\r\n",
        "unregistered_keys:1\r\nunregistered_channels:0\r\n",
        "report0:namespace=on:,would_inject_ttl=1,would_refuse_crossinstance=0,would_refuse_maxttl=0,"
        "would_refuse_persist=0,would_refuse_noperm=0\r\n",
        ":namespace=(default),would_inject_ttl=1,would_refuse_crossinstance=0,would_refuse_maxttl=0,"
        "would_refuse_persist=0,would_refuse_noperm=1",
    };
    for (size_t i = 0; i < sizeof want_info / sizeof want_info[0]; i++)
        ck_assert_msg(strstr(info->str, want_info[i]) != NULL, "INFO namespaces lacks %s:\n%s", want_info[i],
                      info->str);
    ck_assert_msg(strstr(info->str, "namespace=rep:") == NULL, "an enforce=on line in INFO's report lines:\n%s",
                  info->str);
    freeReplyObject(info);
    int lines;
    long long sum;
    log_lines("report: namespace '(default)' would-inject-ttl (with 'set'): 1 since the last line", &lines, &sum);
    ck_assert_int_eq(lines, 1);
    redisFree(c);
}
END_TEST

/* keygate --check -c dir/keygate.conf: its exit code, its output in out. */
static int check_config(const char *dir, char *out, size_t outlen)
{
    char args[PATH_MAX + 32];
    snprintf(args, sizeof args, "--check -c '%s/keygate.conf'", dir);
    return harness_run_keygate(args, out, outlen);
}

START_TEST(test_check_wants_a_default_line_for_global_report_mode)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/adopt-check", h.dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    harness_write_in(dir, "keygate.conf",
                     "listen 127.0.0.1:1\nregistry registry.conf\ninstance durable 127.0.0.1:2 plain\n"
                     "instance cache 127.0.0.1:3 plain\nenforce report\n");
    harness_write_in(dir, "registry.conf", "namespace q: instance=durable ttl=none owner=q\n");
    char out[4096];
    ck_assert_int_eq(check_config(dir, out, sizeof out), 1);
    char want[PATH_MAX + 128];
    snprintf(want, sizeof want, "%s/keygate.conf:5: enforce report needs a default line in the registry", dir);
    ck_assert_msg(strstr(out, want) != NULL, "want '%s' in:\n%s", want, out);
    /* per-line report mode needs none: unregistered keys are then refused as always */
    harness_write_in(dir, "keygate.conf",
                     "listen 127.0.0.1:1\nregistry registry.conf\ninstance durable 127.0.0.1:2 plain\n"
                     "instance cache 127.0.0.1:3 plain\nenforce on\n");
    harness_write_in(dir, "registry.conf", "namespace q: instance=durable ttl=none owner=q enforce=report\n");
    ck_assert_msg(check_config(dir, out, sizeof out) == 0, "%s", out);
    harness_write_in(dir, "keygate.conf",
                     "listen 127.0.0.1:1\nregistry registry.conf\ninstance durable 127.0.0.1:2 plain\n"
                     "instance cache 127.0.0.1:3 plain\nenforce maybe\n");
    ck_assert_int_eq(check_config(dir, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "keygate.conf:5: bad enforce 'maybe' (on or report)") != NULL, "%s", out);
    harness_write_in(dir, "registry.conf",
                     "namespace q: instance=durable ttl=none owner=q\ndefault instance=cache ttl=1h owner=q\n"
                     "default instance=cache ttl=1h owner=q\n");
    ck_assert_int_eq(check_config(dir, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "registry.conf:3: a second default line (first on line 2; at most one)") != NULL, "%s",
                  out);
}
END_TEST

START_TEST(test_unregistered_refused_without_default_line)
{
    restart_with("namespace rep: instance=cache ttl=1h owner=app enforce=report\n", NULL);
    redisContext *c = app_client();
    expect_error_at(__LINE__, cmd(c, "SET legacy:n v"), "NONAMESPACE key 'legacy:n'", "no default line");
    ck_assert_int_eq(exists("cache", "legacy:n"), 0);
    ck_assert_int_eq(exists("durable", "legacy:n"), 0);
    expect_metric("keygate_errors_nonamespace_total", 1);
    expect_metric("keygate_unregistered_total{kind=\"key\"}", 0);
    redisFree(c);
}
END_TEST

/* keygate audit with a default line: its keys are counted, not "no namespace", and held to its rules. */
START_TEST(test_audit_counts_the_default_lines_keys)
{
    ck_assert_int_eq(harness_direct_int(&h, "cache", "EXISTS legacy:audit:a"), 0);
    redisContext *cache = harness_must_direct(&h, "cache"), *durable = harness_must_direct(&h, "durable");
    expect_status_at(__LINE__, cmd(cache, "SET legacy:audit:a v EX 100"), "OK", "plant");
    expect_status_at(__LINE__, cmd(cache, "SET legacy:audit:b v"), "OK", "plant");          /* no TTL: ttl=10m */
    expect_status_at(__LINE__, cmd(durable, "SET legacy:audit:c v EX 100"), "OK", "plant"); /* wrong instance */
    /* every key on the backends (earlier tests' too) that no prefix of ADOPT_REGISTRY holds */
    long long unregistered = 0;
    redisContext *both[] = {cache, durable};
    for (int b = 0; b < 2; b++) {
        redisReply *all = cmd(both[b], "KEYS *");
        for (size_t i = 0; i < all->elements; i++) {
            const char *k = all->element[i]->str;
            unregistered +=
                strncmp(k, "on:", 3) && strncmp(k, "rep:", 4) && strncmp(k, "other:", 6) && strncmp(k, "lock:", 5);
        }
        freeReplyObject(all);
    }
    ck_assert_int_ge(unregistered, 3);
    char want_count[128];
    snprintf(want_count, sizeof want_count, "; %lld unregistered keys (taken by the default line)", unregistered);
    const char *bin = getenv("KEYGATE_BIN");
    char command[PATH_MAX + 64];
    snprintf(command, sizeof command, "%s audit -c '%s' 2>&1", bin && *bin ? bin : "build/keygate", h.conf_file);
    FILE *p = popen(command, "r");
    ck_assert_ptr_nonnull(p);
    static char out[1 << 16];
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = '\0';
    int status = pclose(p);
    expect_int_at(__LINE__, cmd(cache, "DEL legacy:audit:a legacy:audit:b"), 2, "cleanup");
    expect_int_at(__LINE__, cmd(durable, "DEL legacy:audit:c"), 1, "cleanup");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1, "audit exit %d:\n%s", status, out);
    ck_assert_msg(strstr(out, "cache legacy:audit:b missing TTL: namespace '(default)' requires ttl=10m\n"), "%s", out);
    ck_assert_msg(strstr(out, "durable legacy:audit:c wrong instance: namespace '(default)' lives on 'cache'\n"), "%s",
                  out);
    ck_assert_msg(!strstr(out, "legacy:audit:a ") && !strstr(out, "no namespace"), "%s", out);
    ck_assert_msg(strstr(out, want_count), "want '%s' in:\n%s", want_count, out);
    redisFree(cache);
    redisFree(durable);
}
END_TEST

/* INFO server's reloads: (the reloads every worker thread has taken). */
static long long info_reloads(void)
{
    redisContext *c = app_client();
    long long n = harness_info_reloads(c);
    redisFree(c);
    return n;
}

/* SIGHUP keygate after rewriting its registry file; wait until every worker took it. */
static void reload_registry(const char *text)
{
    FILE *f = fopen(h.registry_file, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    long long before = info_reloads();
    ck_assert_int_eq(kill(h.keygate_pid, SIGHUP), 0);
    long long got = before;
    for (long long end = now_ms() + 5000; got == before && now_ms() < end; got = info_reloads()) sleep_ms(20);
    ck_assert_msg(got == before + 1, "INFO server reloads: is %lld 5 s after SIGHUP, want %lld (every worker took it)",
                  got, before + 1);
}

/* A reload that moves every line's position keeps each counter with its namespace. */
START_TEST(test_reload_keeps_counters_with_their_namespace)
{
    restart_with(ADOPT_REGISTRY, NULL);
    redisContext *c = app_client();
    for (int i = 0; i < 3; i++) expect_status_at(__LINE__, cmd(c, "SET rep:rl:%d v", i), "OK", "SET");
    expect_nil_at(__LINE__, cmd(c, "GET other:rl"), "GET");
    expect_metric("keygate_report_would_inject_ttl_total{namespace=\"rep:\"}", 3);
    /* two lines sorted before every other one, and other: gone */
    reload_registry("namespace 0a: instance=cache ttl=none owner=app enforce=report\n"
                    "namespace 0b: instance=cache ttl=none owner=app enforce=report\n"
                    "namespace on:    instance=durable ttl=1h max-ttl=1d owner=app\n"
                    "namespace rep:   instance=cache   ttl=1h max-ttl=1d owner=app enforce=report\n"
                    "namespace lock:  instance=durable ttl=none owner=others\n"
                    "default          instance=cache   ttl=10m owner=app\n");
    expect_metric("keygate_report_would_inject_ttl_total{namespace=\"rep:\"}", 3);
    expect_metric("keygate_report_would_inject_ttl_total{namespace=\"0a:\"}", 0);
    expect_metric("keygate_report_would_refuse_total{namespace=\"0b:\",code=\"NOPERM\"}", 0);
    ck_assert_int_eq(metric("keygate_report_would_refuse_total{namespace=\"other:\",code=\"NOPERM\"}"), -1);
    expect_status_at(__LINE__, cmd(c, "SET rep:rl:9 v"), "OK", "SET after the reload");
    expect_metric("keygate_report_would_inject_ttl_total{namespace=\"rep:\"}", 4);
    redisFree(c);
    /* the suite's registry back, before the post-condition reads it */
    reload_registry(ADOPT_REGISTRY);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("adopt");
    TCase *tc = harness_tcase(s, "adopt", 90, setup, teardown);
    harness_add_test(tc, test_default_line_takes_unregistered_keys_with_its_rules);
    harness_add_test(tc, test_default_line_log_escapes_and_cuts_the_key);
    harness_add_test(tc, test_registry_command_prints_the_default_line_last);
    harness_add_test(tc, test_report_mode_forwards_counts_and_logs_per_reason);
    harness_add_test(tc, test_global_report_mode);
    harness_add_test(tc, test_check_wants_a_default_line_for_global_report_mode);
    harness_add_test(tc, test_unregistered_refused_without_default_line);
    harness_add_test(tc, test_audit_counts_the_default_lines_keys);
    harness_add_test(tc, test_reload_keeps_counters_with_their_namespace);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
