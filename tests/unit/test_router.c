/* test_router.c: unit tests for router.c on a single server without a loop or a socket: the bytes and FIFO entries router_forward writes for each plan shape, and how the backend's replies (or its loss) become the client's reply. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "bare_worker.h"
#include "nodes.h"
#include "resp.h"
#include "router.h"

#undef fail /* check.h's deprecated fail(): backend_hooks has a member of that name */

/* ---------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------- */

/* A bare worker with one single-server instance, `cache`, and one of its connections, ready: what
 * the router writes stays in b.out and b's FIFO (no flush step runs). */
struct router_fixture {
    struct bare_worker *f;
    struct backend b;
};

static void fixture_init(struct router_fixture *r)
{
    r->f = bare_worker_new();
    struct config *cfg = &r->f->cfg;
    cfg->ninstances = 1;
    cfg->max_pinned = 64;
    cfg->instances[0].name = "cache";
    cfg->instances[0].host = "127.0.0.1";
    cfg->instances[0].port = 6402;
    cfg->instance_names[0] = "cache";
    r->f->w.nodes[0] = nodes_new(&r->f->w, 0, NODES_ONE);
    memset(&r->b, 0, sizeof(r->b));
    r->b.worker = &r->f->w;
    r->b.instance = 0;
    r->b.state = BACKEND_READY;
    r->b.server = &r->f->w.nodes[0]->map.nodes[0];
}

static void fixture_fini(struct router_fixture *r)
{
    ck_assert_int_eq(r->f->c.nqueued, 0); /* every test's requests were answered and written */
    ck_assert_uint_eq(r->b.fifo_count, 0);
    free(r->b.fifo);
    bytebuf_free(&r->b.out);
    free(r->f->w.dirty.items);
    resp_parser_free(&r->f->c.parser);
    nodes_delete(r->f->w.nodes[0]);
    bare_worker_free(r->f);
}

/* The client's frame, parsed into its parser as client.c does. */
static void client_parse(struct router_fixture *r, const char *frame)
{
    resp_parser_init(&r->f->c.parser);
    ck_assert_int_eq(resp_parse_request(&r->f->c.parser, frame, strlen(frame)), RESP_DONE);
}

/* A plan that forwards the command as it came to instance 0 (a plain GET's). */
static void plan_plain(struct plan *plan)
{
    memset(plan, 0, sizeof(*plan));
    plan->kind = PLAN_FORWARD;
    plan->slot = -1;
    plan->flow = FLOW_SHARED;
    plan->ttl.fix = plan->ttl.fix_inline;
    plan->inval.key = plan->inval.key_inline;
}

/* plan_plain with one TTL fix of the key (argument 1) in keygate's MULTI wrap. */
static void plan_wrapped_fix(struct plan *plan, enum ttl_fix_mode mode, int64_t ttl_ms)
{
    plan_plain(plan);
    plan->ttl.wrap = 1;
    plan->ttl.nfix = 1;
    plan->ttl.fix[0] = (struct ttl_fix){.argi = 1, .mode = (uint32_t)mode, .ttl_ms = ttl_ms};
}

/* A new request of the client for `frame`, parsed and handed to router_forward with plan on b. */
static struct request *forward(struct router_fixture *r, const char *frame, const struct plan *plan)
{
    client_parse(r, frame);
    struct request *req = request_new(&r->f->c);
    router_forward(&r->f->c, &r->b, req, plan, frame);
    return req;
}

/* b's FIFO as a string of kinds ("PASS", "DROP QUEUED DROP EXEC_PICK"), every entry for req. */
static const char *fifo_kinds(const struct router_fixture *r, const struct request *req)
{
    static const char *const names[] = {"PASS",      "DROP", "QUEUED",   "EXEC_PICK", "EXEC_FILTER", "PART",
                                        "PART_PICK", "FILL", "PREFETCH", "ASKING",    "SCRIPT_LOAD"};
    static char text[256];
    text[0] = '\0';
    for (size_t i = 0; i < r->b.fifo_count; i++) {
        const struct pending *pd = &r->b.fifo[(r->b.fifo_head + i) % r->b.fifo_cap];
        ck_assert_ptr_eq(pd->req, req);
        ck_assert_uint_lt(pd->kind, sizeof(names) / sizeof(names[0]));
        if (i) strcat(text, " ");
        strcat(text, names[pd->kind]);
    }
    return text;
}

/* The backend answers its oldest entry with reply (NULL: its connection is lost), as backend.c hands it over. */
static void backend_answers(struct router_fixture *r, const char *reply)
{
    ck_assert_uint_gt(r->b.fifo_count, 0);
    struct pending pd = r->b.fifo[r->b.fifo_head];
    r->b.fifo_head = (r->b.fifo_head + 1) % r->b.fifo_cap;
    r->b.fifo_count--;
    if (r->b.unsent > 0) r->b.unsent--;
    if (reply)
        router_hooks()->deliver(&r->b, &pd, reply, strlen(reply));
    else
        router_hooks()->fail(&r->b, &pd);
}

/* The client's output so far, as a string, then emptied. */
static const char *client_output(struct router_fixture *r)
{
    static char text[512];
    struct client *c = &r->f->c;
    ck_assert_uint_lt(c->obuf.len, sizeof(text));
    if (c->obuf.len) memcpy(text, c->obuf.p, c->obuf.len);
    text[c->obuf.len] = '\0';
    c->obuf.len = 0;
    return text;
}

/* The client's request was answered: at the head of its queue, its reply went to the client's
 * output and it left the queue (request.c). */
static void request_answered(struct router_fixture *r)
{
    ck_assert_int_eq(r->f->c.nqueued, 0);
    ck_assert(TAILQ_EMPTY(&r->f->c.queue));
}

/* ---------------------------------------------------------------------------------------------
 * Rows
 * ------------------------------------------------------------------------------------------- */

/* A plain GET: its frame's own bytes, one PASS entry; the value is the client's reply. */
START_TEST(test_plain_get)
{
    struct router_fixture r;
    fixture_init(&r);
    static const char frame[] = "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
    struct plan plan;
    plan_plain(&plan);
    struct request *req = forward(&r, frame, &plan);
    ck_assert_uint_eq(r.b.out.len, strlen(frame));
    ck_assert_mem_eq(r.b.out.p, frame, strlen(frame));
    ck_assert_str_eq(fifo_kinds(&r, req), "PASS");
    ck_assert_ptr_null(req->sends); /* a single server keeps no copy */
    ck_assert_uint_eq(r.f->w.stats.commands_forwarded, 1);
    backend_answers(&r, "$1\r\nv\r\n");
    ck_assert_str_eq(client_output(&r), "$1\r\nv\r\n");
    request_answered(&r);
    fixture_fini(&r);
}
END_TEST

/* A write with a TTL fix in keygate's MULTI wrap: MULTI, the command, PEXPIRE, EXEC in one batch;
 * the client gets element 0 of EXEC's array and nothing of the injected ones. */
START_TEST(test_ttl_wrap_answers_element_zero)
{
    struct router_fixture r;
    fixture_init(&r);
    static const char frame[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
    struct plan plan;
    plan_wrapped_fix(&plan, TTL_FIX_RESET, 60000);
    struct request *req = forward(&r, frame, &plan);
    static const char want[] = "*1\r\n$5\r\nMULTI\r\n"
                               "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
                               "*3\r\n$7\r\nPEXPIRE\r\n$1\r\nk\r\n$5\r\n60000\r\n"
                               "*1\r\n$4\r\nEXEC\r\n";
    ck_assert_uint_eq(r.b.out.len, strlen(want));
    ck_assert_mem_eq(r.b.out.p, want, strlen(want));
    ck_assert_str_eq(fifo_kinds(&r, req), "DROP QUEUED DROP EXEC_PICK");
    backend_answers(&r, "+OK\r\n");
    backend_answers(&r, "+QUEUED\r\n");
    backend_answers(&r, "+QUEUED\r\n");
    ck_assert_str_eq(client_output(&r), ""); /* nothing before EXEC's reply */
    backend_answers(&r, "*2\r\n+OK\r\n:1\r\n");
    ck_assert_str_eq(client_output(&r), "+OK\r\n");
    request_answered(&r);
    fixture_fini(&r);
}
END_TEST

/* The command refused when queued (a wrong type, arity): EXECABORT ran nothing, and the client gets
 * the command's own error, not EXECABORT. */
START_TEST(test_ttl_wrap_queued_error)
{
    struct router_fixture r;
    fixture_init(&r);
    static const char frame[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
    struct plan plan;
    plan_wrapped_fix(&plan, TTL_FIX_NX, 1000);
    forward(&r, frame, &plan);
    backend_answers(&r, "+OK\r\n");
    backend_answers(&r, "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
    backend_answers(&r, "+QUEUED\r\n");
    backend_answers(&r, "-EXECABORT Transaction discarded because of previous errors.\r\n");
    ck_assert_str_eq(client_output(&r), "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
    request_answered(&r);
    fixture_fini(&r);
}
END_TEST

/* The connection lost before the reply: the request is answered -UNAVAILABLE naming the instance. */
START_TEST(test_lost_connection_unavailable)
{
    struct router_fixture r;
    fixture_init(&r);
    static const char frame[] = "*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n";
    struct plan plan;
    plan_plain(&plan);
    forward(&r, frame, &plan);
    backend_answers(&r, NULL);
    const char *out = client_output(&r);
    ck_assert_msg(strncmp(out, "-UNAVAILABLE ", 13) == 0 && strstr(out, "'cache'") != NULL, "got '%s'", out);
    request_answered(&r);
    fixture_fini(&r);
}
END_TEST

/* A connection known down: nothing is written, the request is answered at once. */
START_TEST(test_down_answers_at_once)
{
    struct router_fixture r;
    fixture_init(&r);
    static const char frame[] = "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
    struct plan plan;
    plan_plain(&plan);
    r.b.state = BACKEND_DOWN;
    forward(&r, frame, &plan);
    ck_assert_uint_eq(r.b.out.len, 0);
    ck_assert_uint_eq(r.b.fifo_count, 0);
    const char *out = client_output(&r);
    ck_assert_msg(strncmp(out, "-UNAVAILABLE ", 13) == 0, "got '%s'", out);
    ck_assert_uint_eq(r.f->w.stats.commands_forwarded, 0);
    request_answered(&r);
    fixture_fini(&r);
}
END_TEST

static Suite *router_suite(void)
{
    Suite *su = suite_create("router");
    TCase *tc = tcase_create("single");
    tcase_add_test(tc, test_plain_get);
    tcase_add_test(tc, test_ttl_wrap_answers_element_zero);
    tcase_add_test(tc, test_ttl_wrap_queued_error);
    tcase_add_test(tc, test_lost_connection_unavailable);
    tcase_add_test(tc, test_down_answers_at_once);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    SRunner *sr = srunner_create(router_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
