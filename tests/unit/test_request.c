/* test_request.c: unit tests for request.c's queue without a loop: reply order, orphans, held parts, error replies, recycling. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "bare_worker.h"
#include "config.h"
#include "conn.h"
#include "loop.h"
#include "request.h"

/* ---------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------- */

static struct bare_worker *fixture_new(void)
{
    return bare_worker_new();
}

static void fixture_free(struct bare_worker *f)
{
    ck_assert_int_eq(f->c.nqueued, 0); /* every test empties the queue */
    bare_worker_free(f);
}

/* c's output so far, as a string. */
static const char *out_of(struct bare_worker *f)
{
    static char buf[256];
    ck_assert_uint_lt(f->c.obuf.len, sizeof(buf));
    if (f->c.obuf.len) memcpy(buf, f->c.obuf.p, f->c.obuf.len); /* p may be NULL: memcpy(NULL, 0) is undefined */
    buf[f->c.obuf.len] = '\0';
    return buf;
}

/* Bytes the requests keep in max-memory: the worker's unpublished count less c's own buffers
 * (its output, conn_account). */
static int64_t kept_mem(const struct bare_worker *f)
{
    return f->w.mem_unpublished - (int64_t)f->c.mem_held;
}

/* ---------------------------------------------------------------------------------------------
 * Reply order
 * ------------------------------------------------------------------------------------------- */

/* A later request completed first: its reply is kept (counted as held) until the head
 * completes, then both are written, the head's first, and c is woken once. */
START_TEST(test_later_reply_kept_until_head)
{
    struct bare_worker *f = fixture_new();
    struct request *a = request_new(&f->c);
    struct request *b = request_new(&f->c);
    ck_assert_uint_eq(a->seq, 0);
    ck_assert_uint_eq(b->seq, 1);
    ck_assert_int_eq(f->c.nqueued, 2);

    request_complete(b, "+second\r\n", 9);
    ck_assert_uint_eq(f->c.obuf.len, 0); /* nothing written past an unanswered head */
    ck_assert_int_eq(b->done, 1);
    ck_assert_uint_eq(b->held, 9);
    ck_assert_uint_eq(f->c.replies_held, 9);
    ck_assert_int_eq(f->c.woken, 0);
    ck_assert_int_eq(f->c.nqueued, 2);

    request_complete(a, ":1\r\n", 4);
    ck_assert_str_eq(out_of(f), ":1\r\n+second\r\n");
    ck_assert_int_eq(f->c.nqueued, 0);
    ck_assert_uint_eq(f->c.replies_held, 0);
    ck_assert_int_eq(f->c.woken, 1);
    ck_assert_uint_eq(f->w.woken.n, 1);
    ck_assert_uint_eq(f->w.dirty_clients.n, 1); /* listed once for the flush step */
    ck_assert_uint_eq(f->w.nfree_requests, 2);  /* both went back to the pool */
    fixture_free(f);
}
END_TEST

/*
 * Three requests completed in each of the six orders, row by row: after every completion the
 * output is exactly the replies of the leading run of completed requests, in queue order.
 */
static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

START_TEST(test_every_completion_order)
{
    static const char *const replies[3] = {"+a\r\n", "+bb\r\n", "+ccc\r\n"};
    struct bare_worker *f = fixture_new();
    struct request *req[3];
    for (int i = 0; i < 3; i++) req[i] = request_new(&f->c);
    int done[3] = {0, 0, 0};
    for (int step = 0; step < 3; step++) {
        int k = orders[_i][step];
        request_complete(req[k], replies[k], strlen(replies[k]));
        done[k] = 1;
        char want[64] = "";
        size_t held = 0;
        int head = 1;
        for (int i = 0; i < 3; i++) {
            head = head && done[i];
            if (head)
                strcat(want, replies[i]);
            else if (done[i])
                held += strlen(replies[i]);
        }
        ck_assert_msg(strcmp(out_of(f), want) == 0, "order %d%d%d step %d: output \"%s\", want \"%s\"", orders[_i][0],
                      orders[_i][1], orders[_i][2], step, out_of(f), want);
        ck_assert_uint_eq(f->c.replies_held, held);
    }
    ck_assert_str_eq(out_of(f), "+a\r\n+bb\r\n+ccc\r\n");
    ck_assert_int_eq(f->c.nqueued, 0);
    fixture_free(f);
}
END_TEST

/* A silent request (CLIENT REPLY OFF / SKIP) completes in its turn and writes no byte. */
START_TEST(test_silent_takes_its_turn)
{
    struct bare_worker *f = fixture_new();
    struct request *a = request_new(&f->c);
    struct request *b = request_new(&f->c);
    struct request *c = request_new(&f->c);
    b->silent = 1;
    request_complete(c, "+c\r\n", 4);
    request_complete(b, "+b\r\n", 4);
    ck_assert_uint_eq(f->c.obuf.len, 0);
    ck_assert_uint_eq(f->c.replies_held, 4); /* c's reply only: b keeps nothing */
    request_complete(a, "+a\r\n", 4);
    ck_assert_str_eq(out_of(f), "+a\r\n+c\r\n");
    ck_assert_int_eq(f->c.nqueued, 0);
    fixture_free(f);
}
END_TEST

/* A closed client's request completes but stays on its queue (the reap releases it): no byte
 * is queued. */
START_TEST(test_closed_client_writes_nothing)
{
    struct bare_worker *f = fixture_new();
    struct request *a = request_new(&f->c);
    f->c.closed = 1;
    request_complete(a, "+a\r\n", 4);
    ck_assert_int_eq(a->done, 1);
    ck_assert_uint_eq(f->c.obuf.len, 0);
    ck_assert_int_eq(f->c.nqueued, 1);
    ck_assert_int_eq(f->c.woken, 0);
    bare_worker_let_go(f, a);
    ck_assert_uint_eq(f->w.nfree_requests, 1);
    fixture_free(f);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Orphans: the client let go, backend replies still owed
 * ------------------------------------------------------------------------------------------- */

/* Released with two replies owed: it lives on through the first (taken by the router), and is
 * freed at the second (its answer), whose bytes are dropped. */
START_TEST(test_orphan_freed_at_last_reply)
{
    struct bare_worker *f = fixture_new();
    struct request *a = request_new(&f->c);
    request_expect(a);
    request_expect(a);
    bare_worker_let_go(f, a);
    ck_assert_ptr_null(a->client);
    ck_assert_uint_eq(f->w.nfree_requests, 0); /* two replies still owed: not freed */
    request_reply_consumed(a);
    ck_assert_int_eq(a->waiting, 1);
    ck_assert_uint_eq(f->w.nfree_requests, 0);
    request_answer(a, "+OK\r\n", 5);
    ck_assert_uint_eq(f->w.nfree_requests, 1); /* freed into the pool */
    ck_assert_uint_eq(f->c.obuf.len, 0);       /* its reply dropped */
    ck_assert_int_eq(f->c.woken, 0);
    fixture_free(f);
}
END_TEST

/* The last owed reply is one the router takes (request_reply_consumed): freed then too. */
START_TEST(test_orphan_freed_at_last_consumed)
{
    struct bare_worker *f = fixture_new();
    struct request *a = request_new(&f->c);
    request_expect(a);
    bare_worker_let_go(f, a);
    ck_assert_uint_eq(f->w.nfree_requests, 0);
    request_reply_consumed(a);
    ck_assert_uint_eq(f->w.nfree_requests, 1);
    fixture_free(f);
}
END_TEST

/* Released with nothing owed: freed at once. */
START_TEST(test_release_with_nothing_owed)
{
    struct bare_worker *f = fixture_new();
    struct request *a = request_new(&f->c);
    bare_worker_let_go(f, a);
    ck_assert_uint_eq(f->w.nfree_requests, 1);
    fixture_free(f);
}
END_TEST

/* An orphan's error answer (the backend failed) is dropped too, and frees it. */
START_TEST(test_orphan_error_dropped)
{
    struct bare_worker *f = fixture_new();
    struct request *a = request_new(&f->c);
    request_expect(a);
    bare_worker_let_go(f, a);
    request_answer_error(a, "UNAVAILABLE instance 'cache' is unreachable");
    ck_assert_uint_eq(f->w.nfree_requests, 1);
    ck_assert_uint_eq(f->c.obuf.len, 0);
    fixture_free(f);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Held bytes: split parts, kept replies
 * ------------------------------------------------------------------------------------------- */

/* A split request with two parts, as the router makes one (parts allocated, nparts set). */
static struct request *split_request(struct bare_worker *f, int nparts)
{
    struct request *req = request_new(&f->c);
    req->parts = calloc((size_t)nparts, sizeof(*req->parts));
    ck_assert_ptr_nonnull(req->parts);
    req->nparts = req->parts_left = nparts;
    return req;
}

/* Parts kept count in the request's held, its client's replies_held and max-memory; a
 * replaced part counts its new size; the merged reply drops them all. */
START_TEST(test_parts_held_then_dropped)
{
    struct bare_worker *f = fixture_new();
    struct request *a = split_request(f, 2);
    request_part_keep(a, 0, ":3\r\n", 4);
    ck_assert_uint_eq(a->held, 4);
    ck_assert_uint_eq(f->c.replies_held, 4);
    ck_assert_int_eq(kept_mem(f), 4);
    request_part_keep(a, 1, ":10\r\n", 5);
    ck_assert_uint_eq(a->held, 9);
    ck_assert_uint_eq(f->c.replies_held, 9);
    ck_assert_int_eq(kept_mem(f), 9);
    ck_assert(a->parts[1].len == 5 && memcmp(a->parts[1].reply, ":10\r\n", 5) == 0);

    request_part_replace(a, 1, "-NOREPL replication failed\r\n", 28);
    ck_assert_uint_eq(a->parts[1].len, 28);
    ck_assert_uint_eq(a->held, 4 + 28);
    ck_assert_uint_eq(f->c.replies_held, 4 + 28);
    ck_assert_int_eq(kept_mem(f), 4 + 28);

    request_complete(a, ":13\r\n", 5); /* the merge */
    ck_assert_str_eq(out_of(f), ":13\r\n");
    ck_assert_uint_eq(f->c.replies_held, 0);
    ck_assert_int_eq(kept_mem(f), 0);
    fixture_free(f);
}
END_TEST

/* A request behind the head keeps its parts, then its merged reply: both counted for c until it
 * is written. */
START_TEST(test_parts_behind_head)
{
    struct bare_worker *f = fixture_new();
    struct request *a = request_new(&f->c);
    struct request *b = split_request(f, 2);
    request_part_keep(b, 0, "+x\r\n", 4);
    request_part_keep(b, 1, "+y\r\n", 4);
    ck_assert_uint_eq(f->c.replies_held, 8);
    request_complete(b, "*2\r\n+x\r\n+y\r\n", 12); /* parts dropped, the merged reply kept */
    ck_assert_uint_eq(b->held, 12);
    ck_assert_uint_eq(f->c.replies_held, 12);
    ck_assert_int_eq(kept_mem(f), 12);
    request_complete(a, "+a\r\n", 4);
    ck_assert_str_eq(out_of(f), "+a\r\n*2\r\n+x\r\n+y\r\n");
    ck_assert_uint_eq(f->c.replies_held, 0);
    ck_assert_int_eq(kept_mem(f), 0); /* freed with its request */
    fixture_free(f);
}
END_TEST

/* An orphan that holds parts and a kept reply: they stop counting for the client at its
 * teardown (client_teardown's sum), and in max-memory when it is freed. */
START_TEST(test_orphan_parts_released)
{
    struct bare_worker *f = fixture_new();
    struct request *a = split_request(f, 2);
    request_expect(a);
    request_part_keep(a, 0, "+x\r\n", 4);
    request_keep_reply(a, "+held\r\n", 7);
    ck_assert_uint_eq(a->held, 11);
    ck_assert_uint_eq(f->c.replies_held, 11);
    bare_worker_let_go(f, a);
    ck_assert_uint_eq(f->c.replies_held, 0);
    ck_assert_int_eq(kept_mem(f), 11);    /* still held: a reply is owed */
    request_part_keep(a, 1, "+y\r\n", 4); /* a late part: counted for nobody's client */
    ck_assert_uint_eq(f->c.replies_held, 0);
    ck_assert_int_eq(kept_mem(f), 15);
    request_reply_consumed(a);
    ck_assert_uint_eq(f->w.nfree_requests, 1);
    ck_assert_int_eq(kept_mem(f), 0);
    fixture_free(f);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Error replies
 * ------------------------------------------------------------------------------------------- */

static const struct {
    const char *text;
    const char *reply;
} error_rows[] = {
    {"ERR unknown command", "-ERR unknown command\r\n"},
    {"DENIED key 'x' is in no namespace", "-DENIED key 'x' is in no namespace\r\n"},
    {"EXECABORT Transaction discarded because of previous errors.",
     "-EXECABORT Transaction discarded because of previous errors.\r\n"},
    {"", "-\r\n"},
};

/* "-<text>\r\n", row by row. */
START_TEST(test_error_text)
{
    struct bare_worker *f = fixture_new();
    request_error(request_new(&f->c), error_rows[_i].text);
    ck_assert_str_eq(out_of(f), error_rows[_i].reply);
    fixture_free(f);
}
END_TEST

/* A text longer than an error reply holds is cut to fit, still ending in CRLF. */
START_TEST(test_error_text_cut)
{
    struct bare_worker *f = fixture_new();
    char text[ERROR_REPLY_MAX + 100];
    memset(text, 'x', sizeof(text) - 1);
    memcpy(text, "ERR ", 4);
    text[sizeof(text) - 1] = '\0';
    request_error(request_new(&f->c), text);
    ck_assert_uint_eq(f->c.obuf.len, ERROR_REPLY_MAX - 1);
    ck_assert_int_eq(f->c.obuf.p[0], '-');
    ck_assert(memcmp(f->c.obuf.p + 1, "ERR xxx", 7) == 0);
    ck_assert(memcmp(f->c.obuf.p + f->c.obuf.len - 2, "\r\n", 2) == 0);
    fixture_free(f);
}
END_TEST

/* Counted per code: DENIED and NOPERM each their counter, any other code as errors_other. */
START_TEST(test_error_counted_per_code)
{
    struct bare_worker *f = fixture_new();
    request_error(request_new(&f->c), "DENIED no");
    request_error(request_new(&f->c), "DENIED no again");
    request_error(request_new(&f->c), "NOPERM no");
    request_error(request_new(&f->c), "ERR other");
    ck_assert_uint_eq(f->w.stats.errors_denied, 2);
    ck_assert_uint_eq(f->w.stats.errors_noperm, 1);
    ck_assert_uint_eq(f->w.stats.errors_other, 1);
    ck_assert_str_eq(out_of(f), "-DENIED no\r\n-DENIED no again\r\n-NOPERM no\r\n-ERR other\r\n");
    fixture_free(f);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Recycling
 * ------------------------------------------------------------------------------------------- */

/* A freed request is the next one handed out, wiped but for its small kept send's buffers
 * (emptied); the client's sequence goes on. */
START_TEST(test_recycled_request_wiped)
{
    struct bare_worker *f = fixture_new();
    struct request *a = request_new(&f->c);
    a->sends = &a->send1;
    a->nsends = 1;
    bytebuf_add(&a->send1.bytes, "*1\r\n$4\r\nPING\r\n", 14);
    a->send1.entries = calloc(4, sizeof(*a->send1.entries));
    a->send1.cap = 4;
    a->nc = malloc(32);
    a->queued_error = strdup("-ERR queued\r\n");
    bytebuf_add(&a->track, "k", 1);
    a->blocking = 1;
    request_expect(a);
    request_answer(a, "+PONG\r\n", 7);
    ck_assert_uint_eq(f->w.nfree_requests, 1);

    struct request *b = request_new(&f->c);
    ck_assert_ptr_eq(b, a); /* the pool's, not malloc's */
    ck_assert_uint_eq(f->w.nfree_requests, 0);
    ck_assert_uint_eq(b->seq, 1);
    ck_assert_ptr_eq(b->client, &f->c);
    ck_assert_int_eq(b->done, 0);
    ck_assert_int_eq(b->blocking, 0);
    ck_assert_ptr_null(b->nc);
    ck_assert_ptr_null(b->queued_error);
    ck_assert_uint_eq(b->track.len, 0);
    ck_assert_int_eq(b->nsends, 0);
    ck_assert_uint_eq(b->send1.bytes.len, 0); /* kept, emptied */
    ck_assert_uint_ge(b->send1.bytes.cap, 14);
    ck_assert_ptr_nonnull(b->send1.entries);
    ck_assert_int_eq(b->send1.cap, 4);
    request_complete(b, "+OK\r\n", 5);
    ck_assert_str_eq(out_of(f), "+PONG\r\n+OK\r\n");
    fixture_free(f); /* valgrind: nothing of either life leaks */
}
END_TEST

/* A kept send's buffer past REQUEST_KEEP_BYTES (4096) is not kept by the recycled request. */
START_TEST(test_recycled_request_drops_big_send)
{
    struct bare_worker *f = fixture_new();
    struct request *a = request_new(&f->c);
    a->sends = &a->send1;
    a->nsends = 1;
    static char big[8192];
    bytebuf_add(&a->send1.bytes, big, sizeof(big));
    request_complete(a, "+OK\r\n", 5);
    struct request *b = request_new(&f->c);
    ck_assert_ptr_eq(b, a);
    ck_assert_uint_eq(b->send1.bytes.cap, 0);
    request_complete(b, "+OK\r\n", 5);
    fixture_free(f);
}
END_TEST

/* The pool keeps at most 4096 requests (FREE_REQUESTS_MAX); beyond that they go back to malloc. */
START_TEST(test_pool_bounded)
{
    enum { N = 4096 + 10 };
    struct bare_worker *f = fixture_new();
    for (int i = 0; i < N; i++) request_new(&f->c);
    struct request *req;
    while ((req = TAILQ_FIRST(&f->c.queue))) request_complete(req, "+OK\r\n", 5);
    ck_assert_uint_eq(f->w.nfree_requests, 4096);
    ck_assert_uint_eq(f->c.obuf.len, (size_t)N * 5);
    fixture_free(f);
}
END_TEST

static Suite *request_suite(void)
{
    Suite *s = suite_create("request");
    TCase *tc = tcase_create("order");
    tcase_add_test(tc, test_later_reply_kept_until_head);
    tcase_add_loop_test(tc, test_every_completion_order, 0, 6);
    tcase_add_test(tc, test_silent_takes_its_turn);
    tcase_add_test(tc, test_closed_client_writes_nothing);
    suite_add_tcase(s, tc);
    tc = tcase_create("orphans");
    tcase_add_test(tc, test_orphan_freed_at_last_reply);
    tcase_add_test(tc, test_orphan_freed_at_last_consumed);
    tcase_add_test(tc, test_release_with_nothing_owed);
    tcase_add_test(tc, test_orphan_error_dropped);
    suite_add_tcase(s, tc);
    tc = tcase_create("held");
    tcase_add_test(tc, test_parts_held_then_dropped);
    tcase_add_test(tc, test_parts_behind_head);
    tcase_add_test(tc, test_orphan_parts_released);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_loop_test(tc, test_error_text, 0, sizeof(error_rows) / sizeof(error_rows[0]));
    tcase_add_test(tc, test_error_text_cut);
    tcase_add_test(tc, test_error_counted_per_code);
    suite_add_tcase(s, tc);
    tc = tcase_create("recycling");
    tcase_add_test(tc, test_recycled_request_wiped);
    tcase_add_test(tc, test_recycled_request_drops_big_send);
    tcase_add_test(tc, test_pool_bounded);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(request_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
