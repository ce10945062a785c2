/* test_keptsend.c: unit tests for keptsend.c without a loop or a backend: the waits and deadlines, which entries belong to a kept send, and how each reply of a send is read (passed, or taken to go again or wait). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "bare_worker.h"
#include "config.h"
#include "conn.h"
#include "keptsend.h"
#include "loop.h"
#include "nodes.h"
#include "request.h"

#define BYTES(a) (a), (sizeof(a) - 1)

/* ---------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------- */

/*
 * A bare worker (bare_worker.h) with one instance, `kv`: a cluster of one known node, 10.0.0.1:7000,
 * owning every slot, or a Sentinel instance. No connection is ever opened: the rows below never
 * stage a send, and a CLUSTER SLOTS counts as in flight (a MOVED asks no node).
 */

static struct bare_worker *fixture_new(enum nodes_kind kind)
{
    struct bare_worker *f = bare_worker_new();
    f->cfg.ninstances = 1;
    f->cfg.max_pinned = 64;
    f->cfg.failover_hold_ms = 2000;
    f->cfg.instances[0].name = "kv";
    f->cfg.instances[0].host = "10.0.0.1";
    f->cfg.instances[0].port = 7000;
    f->cfg.instance_names[0] = "kv";
    f->w.nodes[0] = nodes_new(&f->w, 0, kind);
    if (kind != NODES_ONE)
        for (unsigned s = 0; s < SLOTMAP_SLOTS; s++)
            ck_assert_int_ge(slotmap_set_owner(&f->w.nodes[0]->map, s, "10.0.0.1", 7000), 0);
    f->w.nodes[0]->refreshing = 1;
    return f;
}

static void fixture_free(struct bare_worker *f)
{
    keptsend_client_gone(&f->c);
    nodes_delete(f->w.nodes[0]);
    bare_worker_free(f);
}

/* A request of f's client for slot 42 with one kept send of n entries (ROUTE_PASS each), written
 * and staged: every reply owed (s->left == n, req->waiting == n). */
static struct request_send *kept_request(struct bare_worker *f, int n)
{
    struct request *req = request_new(&f->c);
    req->nsends = 1;
    req->sends = &req->send1;
    struct request_send *s = &req->send1;
    s->req = req;
    s->instance = 0;
    s->slot = 42;
    s->entries = realloc(s->entries, (size_t)n * sizeof(*s->entries));
    ck_assert_ptr_nonnull(s->entries);
    s->cap = n;
    for (int i = 0; i < n; i++) {
        bytebuf_add(&s->bytes, BYTES("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"));
        s->entries[i] = (struct request_entry){.kind = ROUTE_PASS, .end = (uint32_t)s->bytes.len};
        request_expect(req);
    }
    s->nentries = s->left = n;
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * Waits and deadlines
 * ------------------------------------------------------------------------------------------- */

START_TEST(test_waits_double_to_500_ms)
{
    static const int want[] = {25, 50, 100, 200, 400, 500, 500, 500};
    for (int n = 0; n < 8; n++) ck_assert_int_eq(keptsend_wait_ms(n), want[n]);
    ck_assert_int_eq(keptsend_wait_ms(-1), 25);
    ck_assert_int_eq(keptsend_wait_ms(1000), 500);
}
END_TEST

/* A cluster waits 16 times, 6,275 ms in all; a Sentinel instance as many as fit in failover-hold. */
START_TEST(test_hold_cluster_and_sentinel)
{
    struct bare_worker *f = fixture_new(NODES_MAP);
    ck_assert_int_eq(keptsend_max_waits(&f->w, 0), 16);
    ck_assert_int_eq(keptsend_hold_ms(&f->w, 0), 25 + 50 + 100 + 200 + 400 + 11 * 500);
    fixture_free(f);
    f = fixture_new(NODES_MOVES);
    ck_assert_int_eq(keptsend_hold_ms(&f->w, 0), 2000);
    ck_assert_int_eq(keptsend_max_waits(&f->w, 0), 8); /* 25 .. 500, 500, 500: 2,275 ms >= 2,000 */
    f->cfg.failover_hold_ms = 0;
    ck_assert_int_eq(keptsend_max_waits(&f->w, 0), 0);
    fixture_free(f);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Which entries are a send's
 * ------------------------------------------------------------------------------------------- */

START_TEST(test_entries_of_a_send)
{
    struct bare_worker *f = fixture_new(NODES_MAP);
    struct request *plain = request_new(&f->c);
    ck_assert_ptr_null(keptsend_of(plain, &(struct pending){.req = plain, .kind = ROUTE_PASS}));
    struct request_send *s = kept_request(f, 1);
    struct request *req = s->req;
    ck_assert_ptr_eq(keptsend_of(req, &(struct pending){.req = req, .kind = ROUTE_PASS}), s);
    /* keygate's own ASKING and SCRIPT LOAD before an attempt are no entry of it */
    ck_assert_ptr_null(keptsend_of(req, &(struct pending){.req = req, .kind = ROUTE_ASKING}));
    ck_assert_ptr_null(keptsend_of(req, &(struct pending){.req = req, .kind = ROUTE_SCRIPT_LOAD}));
    ck_assert_int_eq(keptsend_intercept(NULL, s, BYTES("$1\r\nv\r\n"), 0), 0);
    request_answer(req, BYTES("$1\r\nv\r\n"));
    request_expect(plain);
    request_answer(plain, BYTES("+OK\r\n"));
    fixture_free(f);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Reading a send's replies
 * ------------------------------------------------------------------------------------------- */

/* Replies that are no redirect pass, one entry each: values, nil, arrays, any other error. */
START_TEST(test_replies_that_pass)
{
    struct bare_worker *f = fixture_new(NODES_MAP);
    static const char *const passing[] = {"+OK\r\n",          "$1\r\nv\r\n", "$-1\r\n",
                                          "*0\r\n",           ":1\r\n",      "-ERR wrong number of arguments\r\n",
                                          "-WRONGTYPE x\r\n", "-MOVED x\r\n" /* unreadable: as usual */};
    int n = (int)(sizeof(passing) / sizeof(passing[0]));
    struct request_send *s = kept_request(f, n);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(keptsend_intercept(NULL, s, passing[i], strlen(passing[i]), 0) == 0, "'%s' was taken",
                      passing[i]);
        ck_assert_int_eq(s->left, n - 1 - i);
        ck_assert_int_eq(s->redo, 0);
        request_reply_consumed(s->req); /* as the router would, reading it */
    }
    ck_assert_int_eq(s->hops + s->retries, 0);
    bare_worker_let_go(f, s->req);
    fixture_free(f);
}
END_TEST

/* A -MOVED is taken: the map learns the slot's new owner, the send goes again from that entry, and
 * the rest of the attempt is swallowed; the last reply of it sends it again (here its client has
 * left: it is dropped, and the request freed). */
START_TEST(test_moved_taken_and_learned)
{
    struct bare_worker *f = fixture_new(NODES_MAP);
    struct request_send *s = kept_request(f, 3);
    struct request *req = s->req;
    struct backend b = {.worker = &f->w, .server = &f->w.nodes[0]->map.nodes[0]}; /* the node that answered */
    ck_assert_int_eq(keptsend_intercept(&b, s, BYTES("+OK\r\n"), 0), 0);
    request_reply_consumed(req);
    ck_assert_int_eq(keptsend_intercept(&b, s, BYTES("-MOVED 42 10.0.0.2:7001\r\n"), 0), 1);
    ck_assert_int_eq(s->redo, 1);
    ck_assert_int_eq(s->from, 1); /* entry 0 ran: not again */
    ck_assert_int_eq(s->hops, 1);
    ck_assert_uint_eq(f->w.stats.cluster_redirects, 1);
    const struct slotmap *m = &f->w.nodes[0]->map;
    int owner = slotmap_owner(m, 42);
    ck_assert_str_eq(m->nodes[owner].host, "10.0.0.2");
    ck_assert_int_eq(m->nodes[owner].port, 7001);
    ck_assert_str_eq(m->nodes[slotmap_owner(m, 43)].host, "10.0.0.1");
    ck_assert_ptr_nonnull(s->error);
    bare_worker_let_go(f, req);
    ck_assert_int_eq(keptsend_intercept(&b, s, BYTES("$1\r\nv\r\n"), 0), 1); /* swallowed, and req freed */
    fixture_free(f);
}
END_TEST

/* A -TRYAGAIN is taken: the send waits on its client's list with its deadline (its first wait +
 * the hold), one retry counted, the rest of the attempt swallowed; the client's teardown drops it. */
START_TEST(test_tryagain_waits_with_deadline)
{
    struct bare_worker *f = fixture_new(NODES_MAP);
    struct request_send *s = kept_request(f, 2);
    uint64_t before = clock_mono_ns();
    ck_assert_int_eq(
        keptsend_intercept(NULL, s, BYTES("-TRYAGAIN Multiple keys request during rehashing of slot\r\n"), 0), 1);
    ck_assert_int_eq(s->redo, 1);
    ck_assert_int_eq(s->wait, 1);
    ck_assert_int_eq(s->retries, 1);
    ck_assert_uint_eq(f->w.stats.cluster_retries, 1);
    ck_assert(s->deadline_ns >= before + 6275ull * 1000000u && s->deadline_ns <= clock_mono_ns() + 6275ull * 1000000u);
    ck_assert(TAILQ_EMPTY(&f->c.resends));
    ck_assert_int_eq(keptsend_intercept(NULL, s, BYTES("+OK\r\n"), 0), 1); /* the attempt's last: it waits */
    ck_assert_ptr_eq(TAILQ_FIRST(&f->c.resends), s);
    ck_assert_int_eq(s->queued, 1);
    ck_assert(f->c.resend_timer && evtimer_pending(f->c.resend_timer, NULL));
    struct request *req = s->req;
    bare_worker_let_go(f, req);
    keptsend_client_gone(&f->c); /* the reply that stood for the send: never sent again; req freed */
    ck_assert(TAILQ_EMPTY(&f->c.resends));
    ck_assert_ptr_null(f->c.resend_timer);
    fixture_free(f);
}
END_TEST

/* "Hash slot not served" gives up at once: it passes as the answer (the table's GIVE_UP for an
 * entry read as usual), nothing waits. A lost connection after the write passes too; before it
 * was written, the send waits. */
START_TEST(test_unserved_passes_lost_unsent_waits)
{
    struct bare_worker *f = fixture_new(NODES_MAP);
    struct request_send *s = kept_request(f, 3);
    ck_assert_int_eq(keptsend_intercept(NULL, s, BYTES("-CLUSTERDOWN Hash slot not served\r\n"), 0), 0);
    request_reply_consumed(s->req);
    ck_assert_int_eq(keptsend_intercept(NULL, s, NULL, 0, 0), 0); /* written: it may have run */
    request_reply_consumed(s->req);
    ck_assert_int_eq(s->redo, 0);
    ck_assert_int_eq(keptsend_intercept(NULL, s, NULL, 0, 1), 1); /* never written: it did not run */
    ck_assert_int_eq(s->wait, 1);
    ck_assert_ptr_eq(TAILQ_FIRST(&f->c.resends), s);
    bare_worker_let_go(f, s->req);
    fixture_free(f);
}
END_TEST

static Suite *keptsend_suite(void)
{
    Suite *su = suite_create("keptsend");
    TCase *waits = tcase_create("waits");
    tcase_add_test(waits, test_waits_double_to_500_ms);
    tcase_add_test(waits, test_hold_cluster_and_sentinel);
    suite_add_tcase(su, waits);
    TCase *read = tcase_create("read");
    tcase_add_test(read, test_entries_of_a_send);
    tcase_add_test(read, test_replies_that_pass);
    tcase_add_test(read, test_moved_taken_and_learned);
    tcase_add_test(read, test_tryagain_waits_with_deadline);
    tcase_add_test(read, test_unserved_passes_lost_unsent_waits);
    suite_add_tcase(su, read);
    return su;
}

int main(void)
{
    SRunner *sr = srunner_create(keptsend_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
