/* test_frames.c: unit tests of frames.c, the bytes a backend gets for a client's command: every case, row by row, parsed back (resp.c's parser) to exactly the expected commands and arguments. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "frames.h"
#include "registry.h"
#include "resp.h"

/* The client's frame, parsed as client.c parses it. */
struct client_frame {
    struct resp_parser p;
    const char *bytes;
};

static void frame_parse(struct client_frame *f, const char *bytes)
{
    resp_parser_init(&f->p);
    f->bytes = bytes;
    ck_assert_int_eq(resp_parse_request(&f->p, bytes, strlen(bytes)), RESP_DONE);
    ck_assert_uint_eq(f->p.frame_len, strlen(bytes));
}

/*
 * What a writer appended, parsed back as Redis reads it, written as one line: the commands
 * separated by " / ", each one's arguments by "|" (so "SET|k|v|EX|60 / PEXPIRE|k|60000"). Every
 * command must be a multibulk (a backend is never sent an inline command) and the bytes must end
 * with the last one.
 */
static char *commands_of(const struct bytebuf *out)
{
    struct bytebuf text = {0};
    struct resp_parser p;
    resp_parser_init(&p);
    size_t at = 0;
    while (at < out->len) {
        ck_assert_int_eq(resp_parse_request(&p, out->p + at, out->len - at), RESP_DONE);
        ck_assert_int_eq(p.is_inline, 0);
        ck_assert_uint_gt(p.argc, 0);
        if (text.len) bytebuf_add(&text, STR_AND_LEN(" / "));
        for (size_t i = 0; i < p.argc; i++) {
            if (i) bytebuf_add(&text, "|", 1);
            bytebuf_add(&text, resp_arg_ptr(&p, out->p + at, i), p.args[i].len);
        }
        at += p.frame_len;
    }
    resp_parser_free(&p);
    bytebuf_add(&text, "", 1);
    return text.p;
}

static void expect_commands(const struct bytebuf *out, const char *want)
{
    char *got = commands_of(out);
    ck_assert_str_eq(got, want);
    free(got);
}

/* A plan that forwards the command as it came (what policy_decide leaves for a plain GET). */
static void plan_plain(struct plan *plan)
{
    memset(plan, 0, sizeof(*plan));
    plan->kind = PLAN_FORWARD;
    plan->ttl.fix = plan->ttl.fix_inline;
    plan->inval.key = plan->inval.key_inline;
}

/* ---- frames_command: one row per shape ---- */

struct command_row {
    const char *what;
    const char *frame;
    const char *append[2]; /* plan->append (NULL: none) */
    int getex;
    const char *want;
    int same_bytes; /* the frame's own bytes are copied as they came */
};

static const struct command_row command_rows[] = {
    {"unchanged multibulk GET", "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", {NULL}, 0, "GET|k", 1},
    {"unchanged multibulk SET", "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n", {NULL}, 0, "SET|key|value", 1},
    {"unchanged, a binary value with CR LF in it",
     "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n",
     {NULL},
     0,
     "SET|k|a\r\nb",
     1},
    {"unchanged, an empty argument", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n", {NULL}, 0, "SET|k|", 1},
    {"multibulk + EX appended", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", {"EX", "60"}, 0, "SET|k|v|EX|60", 0},
    {"multibulk + PX appended, a 10-argument header",
     "*8\r\n$4\r\nMSET\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$"
     "1\r\nc\r\n$1\r\n3\r\n$2\r\nNX\r\n",
     {"PX", "1500"},
     0,
     "MSET|a|1|b|2|c|3|NX|PX|1500",
     0},
    {"inline, unchanged plan", "GET k\r\n", {NULL}, 0, "GET|k", 0},
    {"inline with quotes and an empty argument", "SET \"a b\" \"\"\r\n", {NULL}, 0, "SET|a b|", 0},
    {"inline + appended", "SET k v\r\n", {"EX", "5"}, 0, "SET|k|v|EX|5", 0},
    {"GET -> GETEX (sliding TTL)", "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", {"PX", "30000"}, 1, "GETEX|k|PX|30000", 0},
    {"lower-case get -> GETEX", "*2\r\n$3\r\nget\r\n$1\r\nk\r\n", {"PX", "1"}, 1, "GETEX|k|PX|1", 0},
    {"inline GET -> GETEX", "GET k\r\n", {"PX", "30000"}, 1, "GETEX|k|PX|30000", 0},
};

START_TEST(test_command_rows)
{
    const struct command_row *r = &command_rows[_i];
    struct client_frame f;
    frame_parse(&f, r->frame);
    struct plan plan;
    plan_plain(&plan);
    for (size_t i = 0; i < 2 && r->append[i]; i++) {
        plan.append[plan.nappend] = r->append[i];
        plan.append_len[plan.nappend++] = strlen(r->append[i]);
    }
    plan.ttl.getex = r->getex;
    struct bytebuf out = {0};
    bytebuf_add(&out, STR_AND_LEN("x")); /* appended after what is there */
    frames_command(&out, &f.p, 0, &plan, f.bytes);
    ck_assert_msg(out.p[0] == 'x', "%s: overwrote the buffer", r->what);
    struct bytebuf rest = {.p = out.p + 1, .len = out.len - 1};
    char *got = commands_of(&rest);
    ck_assert_msg(strcmp(got, r->want) == 0, "%s: got '%s', want '%s'", r->what, got, r->want);
    if (r->same_bytes)
        ck_assert_msg(rest.len == strlen(r->frame) && memcmp(rest.p, r->frame, rest.len) == 0, "%s: not copied",
                      r->what);
    free(got);
    bytebuf_free(&out);
    resp_parser_free(&f.p);
}
END_TEST

/* Over budget: EVAL <check script> ncheck key... <-OOM text> <the command>, the RESP3 script for RESP3. */
START_TEST(test_command_budget)
{
    for (int resp3 = 0; resp3 <= 1; resp3++) {
        struct client_frame f;
        frame_parse(&f, "*5\r\n$4\r\nMSET\r\n$2\r\nk1\r\n$1\r\na\r\n$2\r\nk2\r\n$1\r\nb\r\n");
        struct plan plan;
        plan_plain(&plan);
        plan.budget_ncheck = 2;
        plan.budget_check[0] = 1;
        plan.budget_check[1] = 3;
        strcpy(plan.budget_msg, "OOM namespace over max-keys");
        plan.append[0] = "NX"; /* appended after the command's own arguments, inside the EVAL */
        plan.append_len[0] = 2;
        plan.nappend = 1;
        struct bytebuf out = {0}, want = {0};
        frames_command(&out, &f.p, resp3, &plan, f.bytes);
        bytebuf_add(&want, STR_AND_LEN("EVAL|"));
        if (resp3)
            bytebuf_add(&want, STR_AND_LEN(BUDGET_SCRIPT_RESP3));
        else
            bytebuf_add(&want, STR_AND_LEN(BUDGET_SCRIPT));
        bytebuf_add(&want, STR_AND_LEN("|2|k1|k2|OOM namespace over max-keys|MSET|k1|a|k2|b|NX"));
        bytebuf_add(&want, "", 1);
        expect_commands(&out, want.p);
        bytebuf_free(&out);
        bytebuf_free(&want);
        resp_parser_free(&f.p);
    }
}
END_TEST

/* An inline command over budget is re-encoded inside the EVAL too. */
START_TEST(test_command_budget_inline)
{
    struct client_frame f;
    frame_parse(&f, "SET k v\r\n");
    struct plan plan;
    plan_plain(&plan);
    plan.budget_ncheck = 1;
    plan.budget_check[0] = 1;
    strcpy(plan.budget_msg, "OOM full");
    struct bytebuf out = {0};
    frames_command(&out, &f.p, 0, &plan, f.bytes);
    char *got = commands_of(&out);
    ck_assert_str_eq(got + strlen("EVAL|" BUDGET_SCRIPT), "|1|k|OOM full|SET|k|v");
    free(got);
    bytebuf_free(&out);
    resp_parser_free(&f.p);
}
END_TEST

/* ---- frames_fix, frames_inval, frames_queued ---- */

START_TEST(test_fix_modes)
{
    struct client_frame f;
    frame_parse(&f, "*4\r\n$4\r\nHSET\r\n$3\r\nh:1\r\n$1\r\nf\r\n$1\r\nv\r\n");
    struct bytebuf out = {0};
    frames_fix(&out, &f.p, f.bytes, &(struct ttl_fix){.argi = 1, .mode = TTL_FIX_RESET, .ttl_ms = 60000});
    frames_fix(&out, &f.p, f.bytes, &(struct ttl_fix){.argi = 1, .mode = TTL_FIX_NX, .ttl_ms = 1});
    frames_fix(&out, &f.p, f.bytes, &(struct ttl_fix){.argi = 1, .mode = TTL_FIX_CAP, .ttl_ms = 9223372036854775807LL});
    expect_commands(&out, "PEXPIRE|h:1|60000 / PEXPIRE|h:1|1|NX / PEXPIRE|h:1|9223372036854775807|XX|LT");
    bytebuf_free(&out);
    resp_parser_free(&f.p);
}
END_TEST

/* The key of a fix comes from an inline command's unquoted arguments too. */
START_TEST(test_fix_inline)
{
    struct client_frame f;
    frame_parse(&f, "HSET \"my key\" f v\r\n");
    struct bytebuf out = {0};
    frames_fix(&out, &f.p, f.bytes, &(struct ttl_fix){.argi = 1, .mode = TTL_FIX_NX, .ttl_ms = 500});
    expect_commands(&out, "PEXPIRE|my key|500|NX");
    bytebuf_free(&out);
    resp_parser_free(&f.p);
}
END_TEST

static char stream_name[] = "app:nc:{app:}:stream";
static struct namespace_entry nc_ns = {.nc_stream = stream_name, .nc_stream_len = sizeof(stream_name) - 1};

START_TEST(test_inval)
{
    struct client_frame f;
    frame_parse(&f, "*3\r\n$3\r\nDEL\r\n$5\r\napp:a\r\n$5\r\napp:b\r\n");
    struct bytebuf out = {0};
    frames_inval(&out, &f.p, f.bytes, &(struct nc_inval_key){.argi = 2, .ns = &nc_ns});
    expect_commands(&out, "XADD|app:nc:{app:}:stream|*|k|app:b");
    bytebuf_free(&out);
    resp_parser_free(&f.p);
}
END_TEST

/* In the client's MULTI: the command, then its fixes, then its XADDs; no MULTI / EXEC of keygate's. */
START_TEST(test_queued)
{
    struct client_frame f;
    frame_parse(&f, "*4\r\n$4\r\nHSET\r\n$5\r\napp:h\r\n$1\r\nf\r\n$1\r\nv\r\n");
    struct plan plan;
    plan_plain(&plan);
    plan.ttl.wrap = 1; /* ignored: the client's transaction wraps it */
    plan.ttl.fix[plan.ttl.nfix++] = (struct ttl_fix){.argi = 1, .mode = TTL_FIX_NX, .ttl_ms = 3600000};
    plan.inval.key[plan.inval.n++] = (struct nc_inval_key){.argi = 1, .ns = &nc_ns};
    struct bytebuf out = {0};
    frames_queued(&out, &f.p, 0, &plan, f.bytes);
    expect_commands(&out, "HSET|app:h|f|v / PEXPIRE|app:h|3600000|NX / XADD|app:nc:{app:}:stream|*|k|app:h");
    bytebuf_free(&out);
    /* nothing to add: the command alone, as it came */
    plan_plain(&plan);
    frames_queued(&out, &f.p, 0, &plan, f.bytes);
    ck_assert_uint_eq(out.len, f.p.frame_len);
    ck_assert_int_eq(memcmp(out.p, f.bytes, out.len), 0);
    bytebuf_free(&out);
    resp_parser_free(&f.p);
}
END_TEST

/* ---- frames_fill ---- */

START_TEST(test_fill)
{
    struct client_frame f;
    frame_parse(&f, "*4\r\n$9\r\nSISMEMBER\r\n$3\r\nset\r\n$1\r\na\r\n$1\r\nb\r\n");
    struct bytebuf out = {0};
    /* the command's own key and members 2.. (mode m) */
    frames_fill(&out, 65536, 'm', &f.p, f.bytes, resp_arg_ptr(&f.p, f.bytes, 1), f.p.args[1].len, 2, f.p.argc);
    expect_commands(&out, "EVAL|" NCPOLICY_FILL_SCRIPT "|1|set|65536|m|a|b");
    bytebuf_free(&out);
    /* a prefetch: a key alone, no frame read */
    frames_fill(&out, 0, 'n', &f.p, NULL, STR_AND_LEN("other"), 0, 0);
    expect_commands(&out, "EVAL|" NCPOLICY_FILL_SCRIPT "|1|other|0|n");
    bytebuf_free(&out);
    /* first past argc: no extra arguments */
    frames_fill(&out, 7, 'a', &f.p, f.bytes, STR_AND_LEN("set"), 2, 0);
    expect_commands(&out, "EVAL|" NCPOLICY_FILL_SCRIPT "|1|set|7|a");
    bytebuf_free(&out);
    resp_parser_free(&f.p);
}
END_TEST

/* ---- frames_part, frames_scan ---- */

START_TEST(test_part)
{
    struct client_frame f;
    frame_parse(&f, "*5\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n");
    const int16_t key_part[] = {-1, 1, 0, 1, 2};
    struct bytebuf out = {0};
    frames_part(&out, &f.p, f.bytes, key_part, 0, 1);
    frames_part(&out, &f.p, f.bytes, key_part, 1, 2);
    frames_part(&out, &f.p, f.bytes, key_part, 2, 1);
    expect_commands(&out, "MGET|b / MGET|a|c / MGET|d");
    bytebuf_free(&out);
    resp_parser_free(&f.p);
    /* inline: the arguments come from the parser's own buffer */
    frame_parse(&f, "DEL x y\r\n");
    const int16_t two[] = {-1, 0, 1};
    frames_part(&out, &f.p, f.bytes, two, 1, 1);
    expect_commands(&out, "DEL|y");
    bytebuf_free(&out);
    resp_parser_free(&f.p);
}
END_TEST

START_TEST(test_scan)
{
    struct client_frame f;
    frame_parse(&f,
                "*6\r\n$4\r\nSCAN\r\n$11\r\n36028797018\r\n$5\r\nMATCH\r\n$4\r\napp*\r\n$5\r\nCOUNT\r\n$3\r\n100\r\n");
    struct bytebuf out = {0};
    frames_scan(&out, &f.p, f.bytes, 0);
    frames_scan(&out, &f.p, f.bytes, 18446744073709551615ULL);
    expect_commands(&out, "SCAN|0|MATCH|app*|COUNT|100 / SCAN|18446744073709551615|MATCH|app*|COUNT|100");
    bytebuf_free(&out);
    resp_parser_free(&f.p);
    frame_parse(&f, "scan 5\r\n");
    frames_scan(&out, &f.p, f.bytes, 12);
    expect_commands(&out, "scan|12");
    bytebuf_free(&out);
    resp_parser_free(&f.p);
}
END_TEST

static Suite *frames_suite(void)
{
    Suite *s = suite_create("frames");
    TCase *tc = tcase_create("frames");
    tcase_add_loop_test(tc, test_command_rows, 0, (int)(sizeof(command_rows) / sizeof(command_rows[0])));
    tcase_add_test(tc, test_command_budget);
    tcase_add_test(tc, test_command_budget_inline);
    tcase_add_test(tc, test_fix_modes);
    tcase_add_test(tc, test_fix_inline);
    tcase_add_test(tc, test_inval);
    tcase_add_test(tc, test_queued);
    tcase_add_test(tc, test_fill);
    tcase_add_test(tc, test_part);
    tcase_add_test(tc, test_scan);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(frames_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
