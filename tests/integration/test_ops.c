/* test_ops.c: integration tests of the structured logs: log-format json lines (checked with jq), their events and fields, no secret in any log, and the journal's priority prefixes. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "util.h" /* STR_AND_LEN */

/*
 * One harness runs keygate with `log-format json`, `log-level debug` (every line keygate
 * can write) and a user whose password is in a file. Each log line is checked with jq
 * (scripts/install-deps installs it), the oracle for "is this JSON": a test fails on the
 * first line jq cannot parse. The secrets test runs its AUTH forms twice, once per
 * log-format, and then looks for every password (the user's, the wrong one tried, both
 * backends') in the whole log.
 *
 * Checked to fail: with the \xHH escape of non-UTF-8 bytes removed from log_json_escape
 * (jq: invalid UTF-8), with the client fields left out of client_protocol_error, and with
 * a log_event of the AUTH argument added to local.c's AUTH (the secrets test).
 */

static struct harness h;
static char dir[64]; /* this suite's own temp dir: the password file */
static char pass_file[128];
static char extra_json[1024], extra_text[1024];

#define APP_PW "app-pw-ops-Secret-7f3a"
#define WRONG_PW "wrong-pw-ops-Guess-91c2"

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/kgops-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(pass_file, sizeof pass_file, "%s/app.pass", dir);
    harness_write_secret(pass_file, APP_PW "\n", 0600);
    snprintf(extra_json, sizeof extra_json,
             "log-level debug\nlog-format json\nuser app password-file=%s owners=* access=rw\n", pass_file);
    snprintf(extra_text, sizeof extra_text,
             "log-level debug\nlog-format text\nuser app password-file=%s owners=* access=rw\n", pass_file);
    struct harness_opts o = {.extra_config = extra_json};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h); /* post-condition: no key on the backends breaks the registry */
    harness_stop(&h);
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* ---- helpers ---- */

/* jq FILTER over keygate's log (one JSON value per line; -e: false/null fails); its output, malloc'd.
 * *rc gets jq's exit status (0 ok, 1 the last output was false or null, 4+ a parse error). */
static char *jq_log(const char *filter, int *rc)
{
    char command[2048 + PATH_MAX + 64];
    snprintf(command, sizeof command, "jq -e -c '%s' '%s' 2>&1", filter, h.log_file);
    FILE *p = popen(command, "r");
    ck_assert_msg(p != NULL, "popen jq: %s", strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    size_t n;
    while ((n = fread(out + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (len + 1 == cap) {
            cap *= 2;
            out = realloc(out, cap);
            ck_assert_ptr_nonnull(out);
        }
    }
    out[len] = '\0';
    int st = pclose(p);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : 99;
    return out;
}

/* Every line of keygate's log is a JSON object with ts, level, event and msg of the right types. */
static void expect_every_line_json(void)
{
    int rc;
    /* a line jq cannot parse fails the whole run (exit 2 or more, its message names the line) */
    char *out = jq_log("type == \"object\" and (.ts | test(\"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
                       "\\\\.[0-9]{3}Z$\")) and (.level | IN(\"debug\",\"info\",\"warn\",\"error\")) and (.event | "
                       "test(\"^[a-z_]+$\")) and (.msg | type == \"string\") and ([keys[] | IN(\"ts\",\"level\","
                       "\"event\",\"client\",\"client_id\",\"instance\",\"backend\",\"namespace\",\"msg\")] | all)",
                       &rc);
    ck_assert_msg(rc == 0 && strstr(out, "false") == NULL, "a log line is not keygate's JSON (jq rc %d):\n%s", rc, out);
    free(out);
}

/* How many log lines match the jq condition COND (a boolean on one line's object). */
static int count_lines(const char *cond)
{
    char filter[2048];
    snprintf(filter, sizeof filter, "select(%s) | 1", cond);
    int rc;
    char *out = jq_log(filter, &rc);
    int n = 0;
    for (const char *p = out; (p = strchr(p, '1')) != NULL; p++) n++;
    free(out);
    return n;
}

/* Wait up to ms for a line matching COND. */
static int wait_line(const char *cond, int ms)
{
    long long end = now_ms() + ms;
    do {
        if (count_lines(cond) > 0) return 1;
        sleep_ms(50);
    } while (now_ms() < end);
    return 0;
}

/* Send raw bytes to keygate on a new plain socket and read until it closes (or 3 s). */
static void send_raw_and_drain(const char *bytes, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)h.port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s", strerror(errno));
    ck_assert_int_eq(write(fd, bytes, len), (ssize_t)len);
    char buf[512];
    while (read(fd, buf, sizeof buf) > 0) {
    }
    close(fd);
}

/* Every AUTH form with the right and a wrong password, a client that leaves mid-AUTH, and a reload. */
static void exercise_auth(void)
{
    redisContext *c = harness_must_client(&h);
    expect_error(cmd(c, "SET q:ops:1 x"), "NOAUTH", "before AUTH");
    expect_error(cmd(c, "AUTH %s", WRONG_PW), "WRONGPASS", "AUTH wrong");
    expect_error(cmd(c, "AUTH app %s", WRONG_PW), "WRONGPASS", "AUTH user wrong");
    /* a third failure would close c (authgate): HELLO's on a connection of its own; it is
     * the address's third, logged (auth_throttle) */
    redisContext *c2 = harness_must_client(&h);
    expect_error(cmd(c2, "HELLO 2 AUTH app %s", WRONG_PW), "WRONGPASS", "HELLO AUTH wrong");
    redisFree(c2);
    expect_status(cmd(c, "AUTH %s", APP_PW), "OK", "AUTH");
    expect_status(cmd(c, "AUTH app %s", APP_PW), "OK", "AUTH user pass");
    redisReply *r = cmd(c, "HELLO 2 AUTH app %s", APP_PW);
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    expect_error(cmd(c, "AUTH a b %s", WRONG_PW), "ERR", "AUTH with too many arguments");
    redisFree(c);
    /* inline AUTH, then AUTH cut off mid-bulk by a protocol error, then a bulk the client never finishes */
    send_raw_and_drain(STR_AND_LEN("AUTH " WRONG_PW "\r\nAUTH " APP_PW "\r\nQUIT\r\n"));
    send_raw_and_drain(STR_AND_LEN("*2\r\n$4\r\nAUTH\r\n$23\r\n" WRONG_PW "xx\r\n"));
    send_raw_and_drain(STR_AND_LEN("*2\r\n$4\r\nAUTH\r\n$30\r\n" WRONG_PW "\r\n*1\r\n!"));
    /* a reload reads the password file again */
    ck_assert_int_eq(kill(h.keygate_pid, SIGHUP), 0);
    long long end = now_ms() + 5000;
    char *log = NULL;
    do {
        free(log);
        sleep_ms(50);
        log = harness_keygate_log(&h);
        ck_assert_ptr_nonnull(log);
    } while (!strstr(log, "reloaded registry") && now_ms() < end);
    ck_assert_msg(strstr(log, "reloaded registry") != NULL, "no reload logged:\n%s", log);
    free(log);
}

/* ---- tests ---- */

/* Every line is one JSON object; the events name what happened and carry the fields they know. */
START_TEST(test_json_log_lines_events_and_fields)
{
    /* a protocol error whose text holds a byte that is not UTF-8 ("expected '$', got '\xff'") */
    send_raw_and_drain(STR_AND_LEN("*1\r\n\xff\r\n"));
    ck_assert_msg(
        wait_line(".event == \"client_protocol_error\" and (.client | test(\"^127\\\\.0\\\\.0\\\\.1:[0-9]+$\")) "
                  "and .client_id > 0 and (.msg | contains(\"\\\\xff\"))",
                  3000),
        "no client_protocol_error line with client, client_id and the \\xff byte escaped");
    ck_assert_msg(wait_line(".event == \"client_closed\" and .level == \"debug\" and (.client | length) > 0", 3000),
                  "no client_closed line");
    /* a backend lost and back: backend_down and backend_up carry the instance and its address */
    char backend_addr[64];
    snprintf(backend_addr, sizeof backend_addr, "127.0.0.1:%d", harness_backend(&h, "cache")->tls_port);
    ck_assert_int_eq(harness_backend_kill(&h, "cache"), 0);
    char cond[512];
    snprintf(cond, sizeof cond,
             ".event == \"backend_down\" and .level == \"warn\" and .instance == \"cache\" and .backend == \"%s\"",
             backend_addr);
    ck_assert_msg(wait_line(cond, 5000), "no backend_down line for cache at %s", backend_addr);
    ck_assert_int_eq(harness_backend_restart(&h, "cache"), 0);
    snprintf(cond, sizeof cond, ".event == \"backend_up\" and .instance == \"cache\" and .backend == \"%s\"",
             backend_addr);
    ck_assert_msg(wait_line(cond, 8000), "no backend_up line for cache");
    ck_assert_msg(count_lines(".event == \"ready\" and .level == \"info\"") >= 1, "no ready line");
    expect_every_line_json();
    /* no line without its own event: the bare "log" event is gone since every call site names one */
    ck_assert_int_eq(count_lines(".event == \"log\""), 0);
}
END_TEST

/* A reload that changes log-format keeps the running format and says so. */
START_TEST(test_reload_keeps_log_format)
{
    char *conf = NULL;
    size_t len = 0;
    FILE *f = fopen(h.conf_file, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(getdelim(&conf, &len, '\0', f), 0);
    fclose(f);
    char *at = strstr(conf, "log-format json");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "log-format text", strlen("log-format text"));
    f = fopen(h.conf_file, "w");
    ck_assert_ptr_nonnull(f);
    fputs(conf, f);
    fclose(f);
    free(conf);
    ck_assert_int_eq(kill(h.keygate_pid, SIGHUP), 0);
    ck_assert_msg(wait_line(".event == \"reload_log_format\" and .level == \"warn\"", 5000),
                  "no reload_log_format warning");
    ck_assert_msg(wait_line(".event == \"reload\"", 5000), "the reload itself was not applied");
    expect_every_line_json(); /* still JSON after the reload */
}
END_TEST

/* Wait (5 s at most) until keygate has closed every client but the one asking (INFO clients
 * connected_clients:1): it logs a client's close before it stops counting it. */
static void wait_clients_closed(void)
{
    redisContext *c = harness_must_client(&h);
    expect_status(cmd(c, "AUTH app %s", APP_PW), "OK", "AUTH of the client that asks INFO");
    long long n = -1;
    for (long long end = now_ms() + 5000; n != 1 && now_ms() < end;) {
        redisReply *r = cmd(c, "INFO clients");
        const char *at = r->type == REDIS_REPLY_STRING ? strstr(r->str, "connected_clients:") : NULL;
        ck_assert_msg(at != NULL, "INFO clients: %s", describe(r));
        n = atoll(at + strlen("connected_clients:"));
        freeReplyObject(r);
        if (n != 1) sleep_ms(10);
    }
    redisFree(c);
    ck_assert_msg(n == 1, "keygate still counts %lld clients 5 s after the test's others closed (want 1: this one)", n);
}

/* No password, right or wrong, the user's or a backend's, reaches the log, in either format. */
START_TEST(test_secrets_never_logged)
{
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            struct harness_opts o = {.extra_config = extra_text};
            ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart with log-format text: %s", h.error);
        }
        exercise_auth();
        wait_clients_closed(); /* the last lines of the closed clients */
        char *log = harness_keygate_log(&h);
        ck_assert_ptr_nonnull(log);
        ck_assert_msg(strstr(log, pass == 0 ? "\"event\":\"reload\"" : "INFO reloaded registry") != NULL &&
                          strstr(log, pass == 0 ? "\"event\":\"client_closed\"" : "DEBUG client ") != NULL,
                      "the AUTH forms logged nothing to look in (format %s):\n%s", pass == 0 ? "json" : "text", log);
        const char *secrets[] = {APP_PW, WRONG_PW, h.backends[0].password, h.backends[1].password};
        for (size_t i = 0; i < sizeof secrets / sizeof secrets[0]; i++) {
            /* a part of the secret too: a log line cut or escaped mid-password still shows its start */
            char part[12];
            snprintf(part, sizeof part, "%.10s", secrets[i]);
            ck_assert_msg(strstr(log, secrets[i]) == NULL && strstr(log, part) == NULL,
                          "secret %zu ('%s') is in keygate's %s log:\n%s", i, part, pass == 0 ? "json" : "text", log);
        }
        if (pass == 0) {
            expect_every_line_json();
            ck_assert_msg(count_lines(".event == \"auth_throttle\" and .level == \"warn\" and "
                                      "(.client | test(\"^127\\\\.0\\\\.0\\\\.1:[0-9]+$\")) and "
                                      "(.msg | contains(\"failed AUTH from 127.0.0.1 \"))") == 1,
                          "want one auth_throttle line for 127.0.0.1's failures");
        }
        free(log);
    }
}
END_TEST

/* ---- the journal's priorities ---- */

/* Point $JOURNAL_STREAM at `path` (its DEV:INODE, as systemd sets it for a unit's journal stream). */
static void journal_stream_is(const char *path)
{
    struct stat st;
    ck_assert_msg(stat(path, &st) == 0, "stat %s: %s", path, strerror(errno));
    char v[64];
    snprintf(v, sizeof v, "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    ck_assert_int_eq(setenv("JOURNAL_STREAM", v, 1), 0);
}

/* The syslog priority a line of keygate's must carry: by its text level word, its JSON level, or 3
 * for a configuration error line (FILE:LINE: message, no level word). */
static int priority_wanted(const char *rest)
{
    static const struct {
        const char *text, *json;
        int prio;
    } levels[] = {{"DEBUG ", "\"level\":\"debug\"", 7},
                  {"INFO ", "\"level\":\"info\"", 6},
                  {"WARN ", "\"level\":\"warn\"", 4},
                  {"ERROR ", "\"level\":\"error\"", 3}};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
        if (strncmp(rest, levels[i].text, strlen(levels[i].text)) == 0 ||
            (rest[0] == '{' && strstr(rest, levels[i].json)))
            return levels[i].prio;
    return 3;
}

/* Every line of the log starts with "<N>", N its level's priority; *seen gets a bit per priority met. */
static void expect_every_line_prefixed(const char *log, unsigned *seen)
{
    *seen = 0;
    for (const char *line = log; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        ck_assert_msg(len >= 4 && line[0] == '<' && line[1] >= '0' && line[1] <= '7' && line[2] == '>',
                      "a line without its priority prefix: '%.*s'\nlog:\n%s", (int)len, line, log);
        char rest[4096];
        snprintf(rest, sizeof rest, "%.*s", (int)(len - 3), line + 3);
        ck_assert_msg(line[1] - '0' == priority_wanted(rest), "priority <%c> on '%.*s' (want <%d>)", line[1], (int)len,
                      line, priority_wanted(rest));
        *seen |= 1u << (line[1] - '0');
        line += nl ? len + 1 : len;
    }
}

/* Wait up to ms for `needle` in keygate's log. */
static int wait_log(const char *needle, int ms)
{
    long long end = now_ms() + ms;
    for (;;) {
        char *log = harness_keygate_log(&h);
        int found = log && strstr(log, needle) != NULL;
        free(log);
        if (found || now_ms() >= end) return found;
        sleep_ms(20);
    }
}

/* Under the journal (stderr is the stream $JOURNAL_STREAM names) every line, in both formats and of
 * every level, starts with sd-daemon's <N> of its level, so `journalctl -p warning` keeps warnings
 * and errors only; the configuration's FILE:LINE: errors are <3>. Checked to fail with the prefix
 * left out of log_vwrite, and with warnings given <6>. */
START_TEST(test_journal_lines_carry_priority)
{
    journal_stream_is(h.log_file);
    for (int pass = 0; pass < 2; pass++) {
        struct harness_opts o = {.extra_config = pass == 0 ? extra_text : extra_json};
        ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart under the journal: %s", h.error);
        /* a warning: a backend lost and back */
        ck_assert_int_eq(harness_backend_kill(&h, "cache"), 0);
        ck_assert_msg(wait_log(pass == 0 ? "WARN " : "\"event\":\"backend_down\"", 5000), "no backend_down warning");
        ck_assert_int_eq(harness_backend_restart(&h, "cache"), 0);
        ck_assert_int_eq(harness_wait_connected(&h, "cache", 8000), 0);
        /* errors: a reload of a configuration with an unknown directive */
        FILE *f = fopen(h.conf_file, "a");
        ck_assert_ptr_nonnull(f);
        fputs("no-such-directive 1\n", f);
        fclose(f);
        ck_assert_int_eq(kill(h.keygate_pid, SIGHUP), 0);
        ck_assert_msg(wait_log(pass == 0 ? "ERROR reload:" : "\"event\":\"reload_failed\"", 5000), "no reload_failed");
        char *log = harness_keygate_log(&h);
        ck_assert_ptr_nonnull(log);
        unsigned seen;
        expect_every_line_prefixed(log, &seen);
        ck_assert_msg((seen & (1u << 3)) && (seen & (1u << 4)) && (seen & (1u << 6)) && (seen & (1u << 7)),
                      "want lines of priorities 3, 4, 6 and 7 (seen mask 0x%x):\n%s", seen, log);
        ck_assert_msg(strstr(log, "<3>") && strstr(log, ": unknown directive") != NULL,
                      "the FILE:LINE error of the reload is not <3>:\n%s", log);
        free(log);
    }
    /* stderr redirected away from the stream $JOURNAL_STREAM names: no prefix */
    ck_assert_int_eq(setenv("JOURNAL_STREAM", "1:1", 1), 0);
    struct harness_opts o = {.extra_config = extra_text};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart: %s", h.error);
    ck_assert_msg(wait_log("INFO keygate ", 5000), "no ready line");
    char *log = harness_keygate_log(&h);
    ck_assert_msg(log && strchr(log, '<') == NULL, "a prefix without the journal:\n%s", log ? log : "");
    free(log);
    unsetenv("JOURNAL_STREAM");
}
END_TEST

/* keygate --check under the journal (ExecStartPre=): its FILE:LINE: errors are <3>, its OK line <6>. */
START_TEST(test_journal_check_priorities)
{
    char out[PATH_MAX], bad[PATH_MAX], command[6 * PATH_MAX + 128];
    snprintf(out, sizeof out, "%s/check.out", dir);
    snprintf(bad, sizeof bad, "%s/bad.conf", dir);
    FILE *f = fopen(out, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    journal_stream_is(out);
    const char *bin = getenv("KEYGATE_BIN") ? getenv("KEYGATE_BIN") : "build/keygate";
    snprintf(command, sizeof command,
             "cat '%s' >'%s' && echo 'no-such-directive 1' >>'%s' && '%s' --check -c '%s' >>'%s' 2>&1", h.conf_file,
             bad, bad, bin, bad, out);
    ck_assert_int_ne(system(command), 0);
    snprintf(command, sizeof command, "'%s' --check -c '%s' >>'%s' 2>&1", bin, h.conf_file, out);
    ck_assert_int_eq(system(command), 0);
    unsetenv("JOURNAL_STREAM");
    f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    char *text = NULL;
    size_t cap = 0;
    ck_assert_int_ge(getdelim(&text, &cap, '\0', f), 0);
    fclose(f);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "<3>%s:", bad);
    ck_assert_msg(strstr(text, want) != NULL, "no <3>FILE:LINE: error from --check:\n%s", text);
    snprintf(want, sizeof want, "<6>%s: OK", h.conf_file);
    ck_assert_msg(strstr(text, want) != NULL, "no <6> OK line from --check:\n%s", text);
    free(text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = harness_tcase(s, "ops", 60, setup, teardown);
    harness_add_test(tc, test_json_log_lines_events_and_fields);
    harness_add_test(tc, test_reload_keeps_log_format);
    harness_add_test(tc, test_secrets_never_logged);
    harness_add_test(tc, test_journal_lines_carry_priority);
    harness_add_test(tc, test_journal_check_priorities);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
