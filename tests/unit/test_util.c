/* test_util.c: unit tests for util.c: durations, paths, secrets, tokens, diagnostics, text and JSON logging. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

START_TEST(test_format_ll)
{
    char buf[32];
    const long long cases[] = {0, 7, 10, 3600, 86400000, -1, -90, 9223372036854775807LL, (-9223372036854775807LL - 1)};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char want[32];
        int wn = snprintf(want, sizeof(want), "%lld", cases[i]);
        size_t n = format_ll(buf, cases[i]);
        ck_assert_uint_eq(n, (size_t)wn);
        ck_assert_mem_eq(buf, want, n);
    }
}
END_TEST

START_TEST(duration_parse_good)
{
    static const struct {
        const char *s;
        int64_t ms;
    } cases[] = {
        {"500ms", 500},  {"1ms", 1},        {"90s", 90000},
        {"10m", 600000}, {"24h", 86400000}, {"7d", 604800000},
        {"1s", 1000},    {"010s", 10000},   {"106751991167d", 106751991167LL * 86400000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t ms = -1;
        ck_assert_msg(duration_parse(cases[i].s, &ms) == 0, "%s should parse", cases[i].s);
        ck_assert_int_eq(ms, cases[i].ms);
    }
}
END_TEST

START_TEST(duration_parse_bad)
{
    static const char *const bad[] = {
        "0s",
        "0ms",
        "10",
        "1.5h",
        "-1s",
        "+1s",
        "",
        "s",
        "1 s",
        " 1s",
        "1s ",
        "1S",
        "1sec",
        "1hh",
        "1w",
        "ms",
        "1m1s",
        "9223372036854775807ms0",
        "9223372036854775808ms",
        "106751991168d",
        "99999999999999999999s",
        "none",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = 42;
        ck_assert_msg(duration_parse(bad[i], &ms) == -1, "'%s' should be refused", bad[i]);
        ck_assert_int_eq(ms, 42);
    }
    int64_t ms;
    ck_assert_int_eq(duration_parse(NULL, &ms), -1);
}
END_TEST

START_TEST(duration_format_shortest_exact)
{
    static const struct {
        int64_t ms;
        const char *s;
    } cases[] = {
        {86400000, "1d"},  {5400000, "90m"},  {1500, "1500ms"}, {90000, "90s"}, {3600000, "1h"}, {500, "500ms"},
        {604800000, "7d"}, {90000000, "25h"}, {60000, "1m"},    {1000, "1s"},   {1, "1ms"},
    };
    char buf[32];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        duration_format(cases[i].ms, buf, sizeof buf);
        ck_assert_str_eq(buf, cases[i].s);
        int64_t back;
        ck_assert_int_eq(duration_parse(buf, &back), 0);
        ck_assert_int_eq(back, cases[i].ms);
    }
    duration_format(86400000, buf, 2); /* truncates, never overflows */
    ck_assert_str_eq(buf, "1");
}
END_TEST

START_TEST(path_resolve_forms)
{
    char *p = path_resolve("conf/keygate.conf", "registry.conf");
    ck_assert_str_eq(p, "conf/registry.conf");
    free(p);
    p = path_resolve("conf/keygate.conf", "../build/certs/ca.crt");
    ck_assert_str_eq(p, "conf/../build/certs/ca.crt");
    free(p);
    p = path_resolve("/etc/keygate/keygate.conf", "secrets/a.pass");
    ck_assert_str_eq(p, "/etc/keygate/secrets/a.pass");
    free(p);
    p = path_resolve("/etc/keygate/keygate.conf", "/run/x.sock");
    ck_assert_str_eq(p, "/run/x.sock");
    free(p);
    p = path_resolve("keygate.conf", "registry.conf"); /* config in the cwd */
    ck_assert_str_eq(p, "registry.conf");
    free(p);
    p = path_resolve("/keygate.conf", "r.conf");
    ck_assert_str_eq(p, "/r.conf");
    free(p);
}
END_TEST

static char *write_temp(const char *content, size_t len)
{
    char *path = strdup("/tmp/kg_util_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, content, len), (ssize_t)len);
    close(fd);
    return path;
}

START_TEST(file_read_secret_strips_one_newline)
{
    char *path = write_temp("s3cret\n", 7);
    size_t len = 0;
    char *s = file_read_secret(path, &len);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s, "s3cret");
    ck_assert_uint_eq(len, 6);
    free(s);
    unlink(path);
    free(path);

    path = write_temp("a b\r\n\n", 6); /* only the last newline goes */
    s = file_read_secret(path, &len);
    ck_assert_str_eq(s, "a b\r\n");
    free(s);
    unlink(path);
    free(path);

    path = write_temp("crlf\r\n", 6);
    s = file_read_secret(path, &len);
    ck_assert_str_eq(s, "crlf");
    free(s);
    unlink(path);
    free(path);

    ck_assert_ptr_null(file_read_secret("/nonexistent/kg.pass", &len));
}
END_TEST

START_TEST(tokens_split_quotes_and_comments)
{
    struct tokens t;
    const char *err = NULL;
    ck_assert_int_eq(tokens_split("namespace  q: purpose=\"a # b\" x=\"say \\\"hi\\\" \\\\\" # c\n", &t, &err), 0);
    ck_assert_uint_eq(t.n, 4);
    ck_assert_str_eq(t.v[0].text, "namespace");
    ck_assert_int_eq(t.v[0].eq, -1);
    ck_assert_str_eq(t.v[1].text, "q:");
    ck_assert_str_eq(t.v[2].text, "purpose=a # b");
    ck_assert_int_eq(t.v[2].eq, 7);
    ck_assert_str_eq(t.v[3].text, "x=say \"hi\" \\");
    tokens_free(&t);

    ck_assert_int_eq(tokens_split("  # only a comment", &t, &err), 0);
    ck_assert_uint_eq(t.n, 0);
    ck_assert_int_eq(tokens_split("a=\"\" \"b=c\"", &t, &err), 0);
    ck_assert_uint_eq(t.n, 2);
    ck_assert_str_eq(t.v[0].text, "a=");
    ck_assert_str_eq(t.v[1].text, "b=c");
    ck_assert_int_eq(t.v[1].eq, -1); /* '=' inside quotes does not split */
    tokens_free(&t);

    ck_assert_int_eq(tokens_split("a x=\"open", &t, &err), -1);
    ck_assert_str_eq(err, "unterminated quote");
    ck_assert_uint_eq(t.n, 0);
}
END_TEST

START_TEST(diag_formats_file_and_line)
{
    struct diag d = {0};
    diag_add(&d, "conf/x.conf", 3, "bad %s", "thing");
    diag_add(&d, "conf/x.conf", 0, "no entries");
    ck_assert_uint_eq(d.count, 2);
    ck_assert_str_eq(d.lines[0], "conf/x.conf:3: bad thing");
    ck_assert_str_eq(d.lines[1], "conf/x.conf: no entries");
    diag_free(&d);
    ck_assert_uint_eq(d.count, 0);
}
END_TEST

START_TEST(log_event_respects_level)
{
    char *path = write_temp("", 0);
    fflush(stderr);
    int saved = dup(2);
    FILE *f = freopen(path, "w", stderr);
    ck_assert_ptr_nonnull(f);
    log_min_level = LOG_WARN;
    log_event(LOG_INFO, "t", NULL, "hidden %d", 1);
    log_event(LOG_WARN, "t", NULL, "shown %d", 2);
    log_event(LOG_ERROR, "t", NULL, "boom");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    log_min_level = LOG_INFO;
    size_t len;
    char *s = file_read_secret(path, &len);
    ck_assert_str_eq(s, "WARN shown 2\nERROR boom");
    free(s);
    unlink(path);
    free(path);
}
END_TEST

/* log_json_escape: s as the inside of a JSON string, compared with want */
static void expect_escaped(const char *s, size_t n, const char *want)
{
    char out[256];
    size_t used = 0;
    size_t len = log_json_escape(out, sizeof out, s, n, &used);
    ck_assert_uint_eq(used, n);
    ck_assert_msg(len == strlen(want) && memcmp(out, want, len) == 0, "escaped '%.*s', want '%s'", (int)len, out, want);
}

START_TEST(log_json_escape_quotes_controls_and_bytes)
{
    expect_escaped(STR_AND_LEN("plain text: 127.0.0.1:6401"), "plain text: 127.0.0.1:6401");
    expect_escaped(STR_AND_LEN("say \"hi\" \\ there"), "say \\\"hi\\\" \\\\ there");
    expect_escaped(STR_AND_LEN("a\nb\rc\td\be\ff"), "a\\nb\\rc\\td\\be\\ff");
    expect_escaped(STR_AND_LEN("\x01\x1f\x7f"), "\\u0001\\u001f\\u007f");
    expect_escaped(STR_AND_LEN("k\0z"), "k\\u0000z"); /* a NUL inside a key */
    /* valid UTF-8 passes as it is: 2, 3 and 4 byte characters */
    expect_escaped(STR_AND_LEN("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
                   "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    /* not UTF-8: a lone byte, an overlong '/', a surrogate, a cut character, past U+10FFFF */
    expect_escaped(STR_AND_LEN("\xff"), "\\\\xff");
    expect_escaped(STR_AND_LEN("\xc0\xaf"), "\\\\xc0\\\\xaf");
    expect_escaped(STR_AND_LEN("\xed\xa0\x80"), "\\\\xed\\\\xa0\\\\x80");
    expect_escaped(STR_AND_LEN("\xe2\x82"), "\\\\xe2\\\\x82");
    expect_escaped(STR_AND_LEN("\xf4\x90\x80\x80"), "\\\\xf4\\\\x90\\\\x80\\\\x80");
    expect_escaped(STR_AND_LEN("\xe2\x82x"), "\\\\xe2\\\\x82x");
}
END_TEST

START_TEST(log_json_escape_stops_before_a_partial_escape)
{
    char out[8];
    size_t used = 0;
    /* "ab" fits, the 6-byte \u0001 does not: nothing of it is written */
    size_t len = log_json_escape(out, 7, STR_AND_LEN("ab\x01z"), &used);
    ck_assert_uint_eq(len, 2);
    ck_assert_uint_eq(used, 2);
    /* a 4-byte character is never cut */
    len = log_json_escape(out, 5, STR_AND_LEN("ab\xf0\x9f\x98\x80"), &used);
    ck_assert_uint_eq(len, 2);
    ck_assert_uint_eq(used, 2);
}
END_TEST

START_TEST(log_json_format_fields_in_order)
{
    char buf[1024];
    struct log_fields f = {.client = "127.0.0.1:5123",
                           .client_id = 7,
                           .instance = "durable",
                           .backend_host = "127.0.0.1",
                           .backend_port = 6401,
                           .ns = "q:"};
    size_t n = log_json_format(buf, sizeof buf, "2026-12-01T15:34:07.123Z", LOG_WARN, "client_closed", &f,
                               "client 7 closed: \"quit\"");
    ck_assert_str_eq(
        buf, "{\"ts\":\"2026-12-01T15:34:07.123Z\",\"level\":\"warn\",\"event\":\"client_closed\","
             "\"client\":\"127.0.0.1:5123\",\"client_id\":7,\"instance\":\"durable\","
             "\"backend\":\"127.0.0.1:6401\",\"namespace\":\"q:\",\"msg\":\"client 7 closed: \\\"quit\\\"\"}\n");
    ck_assert_uint_eq(n, strlen(buf));
    /* no fields: only ts, level, event, msg; an IPv6 backend gets brackets */
    log_json_format(buf, sizeof buf, "T", LOG_ERROR, "x", NULL, "m");
    ck_assert_str_eq(buf, "{\"ts\":\"T\",\"level\":\"error\",\"event\":\"x\",\"msg\":\"m\"}\n");
    struct log_fields v6 = {.backend_host = "::1", .backend_port = 6402};
    log_json_format(buf, sizeof buf, "T", LOG_DEBUG, "x", &v6, "m");
    ck_assert_str_eq(buf,
                     "{\"ts\":\"T\",\"level\":\"debug\",\"event\":\"x\",\"backend\":\"[::1]:6402\",\"msg\":\"m\"}\n");
}
END_TEST

START_TEST(log_json_format_cuts_a_long_message_and_closes)
{
    char msg[1000], buf[256];
    memset(msg, '\x01', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    size_t n = log_json_format(buf, sizeof buf, "T", LOG_INFO, "x", NULL, msg);
    ck_assert_uint_lt(n, sizeof buf);
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_msg(n >= 4 && strcmp(buf + n - 3, "\"}\n") == 0, "line not closed: %s", buf);
    /* the cut falls between escapes: what is before the closing quote is whole \u0001s */
    const char *m = strstr(buf, "\"msg\":\"") + strlen("\"msg\":\"");
    size_t mlen = (size_t)(buf + n - 3 - m);
    ck_assert_uint_gt(mlen, 0);
    ck_assert_uint_eq(mlen % 6, 0);
    for (size_t i = 0; i < mlen; i += 6) ck_assert_mem_eq(m + i, "\\u0001", 6);
}
END_TEST

/* log_event to a temp file in both formats: the text line is unchanged, the JSON line carries the event */
START_TEST(log_event_text_and_json)
{
    char *path = write_temp("", 0);
    fflush(stderr);
    int saved = dup(2);
    FILE *f = freopen(path, "w", stderr);
    ck_assert_ptr_nonnull(f);
    struct log_fields lf = {.client = "unix:/run/k.sock", .client_id = 3};
    log_event(LOG_INFO, "client_closed", &lf, "client %d closed", 3);
    log_format = LOG_FORMAT_JSON;
    log_event(LOG_INFO, "client_closed", &lf, "client %d closed", 3);
    log_event(LOG_DEBUG, "hidden", NULL, "below log-level info");
    log_event(LOG_WARN, NULL, NULL, "no event");
    log_format = LOG_FORMAT_TEXT;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    size_t len;
    char *s = file_read_secret(path, &len);
    ck_assert_ptr_nonnull(s);
    char *l2 = strchr(s, '\n');
    ck_assert_ptr_nonnull(l2);
    *l2++ = '\0';
    ck_assert_str_eq(s, "INFO client 3 closed");
    ck_assert_msg(strncmp(l2, "{\"ts\":\"", 7) == 0 && l2[7 + 4] == '-' && l2[7 + 10] == 'T' && l2[7 + 23] == 'Z',
                  "ts: %s", l2);
    ck_assert_msg(strstr(l2, "\",\"level\":\"info\",\"event\":\"client_closed\",\"client\":\"unix:/run/k.sock\","
                             "\"client_id\":3,\"msg\":\"client 3 closed\"}\n{\"ts\":\"") != NULL,
                  "json: %s", l2);
    ck_assert_msg(strstr(l2, "\"level\":\"warn\",\"event\":\"log\",\"msg\":\"no event\"}") != NULL, "json: %s", l2);
    ck_assert_msg(strstr(l2, "hidden") == NULL, "a DEBUG line below log-level: %s", l2);
    free(s);
    unlink(path);
    free(path);
}
END_TEST

/* issue 11: string lengths are never counted by hand */
START_TEST(test_issue11_str_and_len)
{
#define EXEC_CMD "*1\r\n$4\r\nEXEC\r\n"
    const char *p;
    size_t n;
    struct {
        const char *p;
        size_t n;
    } pair = {STR_AND_LEN(EXEC_CMD)};
    p = pair.p;
    n = pair.n;
    ck_assert_uint_eq(n, 14);
    ck_assert_int_eq(memcmp(p, "*1\r\n$4\r\nEXEC\r\n", n), 0);
    struct bytebuf b = {0};
    bytebuf_add(&b, STR_AND_LEN("+OK\r\n"));
    bytebuf_add_bulk(&b, STR_AND_LEN("GETEX"));
    ck_assert_uint_eq(b.len, 5 + 11);
    ck_assert_int_eq(memcmp(b.p, "+OK\r\n$5\r\nGETEX\r\n", b.len), 0);
    bytebuf_free(&b);
#undef EXEC_CMD
}
END_TEST

START_TEST(test_issue11_xmemdup_copies)
{
    char *d = xmemdup("a\0b", 3);
    ck_assert_int_eq(memcmp(d, "a\0b", 3), 0);
    free(d);
    d = xmemdup(NULL, 0); /* an empty copy is still a pointer to free */
    ck_assert_ptr_nonnull(d);
    free(d);
}
END_TEST

#ifndef __SANITIZE_ADDRESS__ /* ASan answers an impossible malloc with its own report */
/* issue 11, the out-of-memory rule: a failed allocation logs one line and aborts */
START_TEST(test_issue11_oom_rule_logs_and_aborts)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        volatile size_t huge = (size_t)PTRDIFF_MAX + 1; /* malloc refuses it */
        void *p = xmalloc(huge);
        _exit(p ? 3 : 4); /* not reached */
    }
    close(fds[1]);
    char out[128] = {0};
    ssize_t n = read(fds[0], out, sizeof(out) - 1);
    close(fds[0]);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status));
    ck_assert_int_eq(WTERMSIG(status), SIGABRT);
    ck_assert_int_gt(n, 0);
    ck_assert_msg(strncmp(out, "ERROR out of memory (", strlen("ERROR out of memory (")) == 0, "logged: %s", out);
}
END_TEST
#endif

/* idmap: put, get, replace, delete with backward shifts (colliding ids, wrap-around), growth. */
START_TEST(test_idmap_put_get_del)
{
    struct idmap m = {0};
    ck_assert_ptr_null(idmap_get(&m, 7));
    idmap_del(&m, 7); /* empty: nothing */
    static int v[5000];
    for (uint64_t id = 1; id <= 5000; id++) idmap_put(&m, id, &v[id - 1]);
    ck_assert_uint_eq(m.n, 5000);
    ck_assert_uint_ge(m.cap, 10000);
    for (uint64_t id = 1; id <= 5000; id++) ck_assert_ptr_eq(idmap_get(&m, id), &v[id - 1]);
    ck_assert_ptr_null(idmap_get(&m, 5001));
    idmap_put(&m, 42, &v[0]); /* replaced, not added */
    ck_assert_uint_eq(m.n, 5000);
    ck_assert_ptr_eq(idmap_get(&m, 42), &v[0]);
    for (uint64_t id = 1; id <= 5000; id += 2) idmap_del(&m, id); /* every other: shifts */
    ck_assert_uint_eq(m.n, 2500);
    for (uint64_t id = 1; id <= 5000; id++)
        ck_assert_ptr_eq(idmap_get(&m, id), id % 2 ? NULL : (id == 42 ? &v[0] : &v[id - 1]));
    idmap_free(&m);
    /* ids that share a home slot (a small map: 64 slots), deleted from the middle of the run */
    struct idmap s = {0};
    uint64_t same[6];
    int k = 0;
    idmap_put(&s, 1, &v[1]);
    size_t home = 0;
    for (size_t i = 0; i < s.cap; i++)
        if (s.ids[i] == 1) home = i;
    for (uint64_t id = 2; k < 6; id++) {
        idmap_put(&s, id, &v[id % 5000]);
        size_t at = 0;
        for (size_t i = 0; i < s.cap; i++)
            if (s.ids[i] == id) at = i;
        if (at == ((home + 1 + (size_t)k) & (s.cap - 1)) && k < 6)
            same[k++] = id; /* it landed right after the run */
        else
            idmap_del(&s, id);
    }
    idmap_del(&s, 1);
    idmap_del(&s, same[2]);
    for (int i = 0; i < 6; i++) ck_assert_ptr_eq(idmap_get(&s, same[i]), i == 2 ? NULL : (void *)&v[same[i] % 5000]);
    idmap_free(&s);
}
END_TEST

START_TEST(test_util_hash_is_fnv1a)
{
    /* the published FNV-1a 64-bit test vectors */
    ck_assert_uint_eq(util_hash("", 0), 0xcbf29ce484222325ull);
    ck_assert_uint_eq(util_hash("a", 1), 0xaf63dc4c8601ec8cull);
    ck_assert_uint_eq(util_hash("foobar", 6), 0x85944171f73967e8ull);
}
END_TEST

static Suite *util_suite(void)
{
    Suite *s = suite_create("util");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_format_ll);
    tcase_add_test(tc, duration_parse_good);
    tcase_add_test(tc, duration_parse_bad);
    tcase_add_test(tc, duration_format_shortest_exact);
    tcase_add_test(tc, path_resolve_forms);
    tcase_add_test(tc, file_read_secret_strips_one_newline);
    tcase_add_test(tc, tokens_split_quotes_and_comments);
    tcase_add_test(tc, diag_formats_file_and_line);
    tcase_add_test(tc, log_event_respects_level);
    tcase_add_test(tc, log_json_escape_quotes_controls_and_bytes);
    tcase_add_test(tc, log_json_escape_stops_before_a_partial_escape);
    tcase_add_test(tc, log_json_format_fields_in_order);
    tcase_add_test(tc, log_json_format_cuts_a_long_message_and_closes);
    tcase_add_test(tc, log_event_text_and_json);
    tcase_add_test(tc, test_issue11_str_and_len);
    tcase_add_test(tc, test_issue11_xmemdup_copies);
    tcase_add_test(tc, test_idmap_put_get_del);
    tcase_add_test(tc, test_util_hash_is_fnv1a);
#ifndef __SANITIZE_ADDRESS__
    tcase_add_test(tc, test_issue11_oom_rule_logs_and_aborts);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(util_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
