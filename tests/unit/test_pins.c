/* test_pins.c: unit tests of pins.h's pure decision, pins_need ("a dedicated connection of its own? an empty queue first?"), row by row and against the three tests it replaced. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "pins.h"

enum { FRESH = PINS_NEED_FRESH, EMPTY = PINS_NEED_EMPTY_QUEUE, NONE = PINS_NEED_NONE };

struct row {
    const char *what;
    struct pins_facts f;
    unsigned want;
};

#define FWD(flow_, mode_, watch_, sub_, resp3_)                                                                        \
    {                                                                                                                  \
        .kind = PLAN_FORWARD, .flow = (flow_), .instance = 0, .mode = (mode_), .watch_pinned = (watch_),               \
        .subscriber_pinned = (sub_), .resp3 = (resp3_)                                                                 \
    }

static const struct row rows[] = {
    /* the shared connection: nothing of its own, no wait */
    {"GET", FWD(FLOW_SHARED, SESSION_NORMAL, 0, 0, 0), NONE},
    {"GET under WATCH (goes on the WATCH pin)", FWD(FLOW_SHARED, SESSION_NORMAL, 1, 0, 0), NONE},
    {"GET, RESP3", FWD(FLOW_SHARED, SESSION_NORMAL, 0, 0, 1), NONE},
    /* a blocking command: always a new pin, behind every earlier reply */
    {"BLPOP", FWD(FLOW_BLOCK, SESSION_NORMAL, 0, 0, 0), FRESH | EMPTY},
    {"BLPOP under WATCH", FWD(FLOW_BLOCK, SESSION_NORMAL, 1, 0, 0), FRESH | EMPTY},
    {"BLPOP, RESP3", FWD(FLOW_BLOCK, SESSION_NORMAL, 0, 0, 1), FRESH | EMPTY},
    /* WATCH: a new pin only for the first */
    {"first WATCH", FWD(FLOW_WATCH, SESSION_NORMAL, 0, 0, 0), FRESH | EMPTY},
    {"WATCH again (its pin carries it)", FWD(FLOW_WATCH, SESSION_NORMAL, 1, 0, 0), NONE},
    {"UNWATCH", FWD(FLOW_UNWATCH, SESSION_NORMAL, 1, 0, 0), NONE},
    /* SUBSCRIBE, RESP2: a new subscriber connection when none is there; an empty queue to enter subscribed mode */
    {"first SUBSCRIBE", FWD(FLOW_SUBSCRIBE, SESSION_NORMAL, 0, 0, 0), FRESH | EMPTY},
    {"SUBSCRIBE, subscribed on this instance", FWD(FLOW_SUBSCRIBE, SESSION_SUBSCRIBED, 0, 1, 0), NONE},
    {"SUBSCRIBE, subscribed on another instance only", FWD(FLOW_SUBSCRIBE, SESSION_SUBSCRIBED, 0, 0, 0), FRESH},
    {"SUBSCRIBE, not subscribed, its connection still there", FWD(FLOW_SUBSCRIBE, SESSION_NORMAL, 0, 1, 0), EMPTY},
    {"UNSUBSCRIBE, RESP2", FWD(FLOW_UNSUBSCRIBE, SESSION_SUBSCRIBED, 0, 1, 0), NONE},
    /* RESP3: (un)subscribe confirmations are pushes, so they wait for every earlier reply */
    {"first SUBSCRIBE, RESP3", FWD(FLOW_SUBSCRIBE, SESSION_NORMAL, 0, 0, 1), FRESH | EMPTY},
    {"SUBSCRIBE again, RESP3", FWD(FLOW_SUBSCRIBE, SESSION_NORMAL, 0, 1, 1), EMPTY},
    {"UNSUBSCRIBE, RESP3", FWD(FLOW_UNSUBSCRIBE, SESSION_NORMAL, 0, 1, 1), EMPTY},
    /* inside MULTI nothing is sent before EXEC */
    {"BLPOP in MULTI", FWD(FLOW_BLOCK, SESSION_MULTI, 0, 0, 0), NONE},
    {"WATCH in MULTI (refused by policy)", FWD(FLOW_WATCH, SESSION_MULTI, 0, 0, 0), NONE},
    {"SUBSCRIBE in MULTI, RESP3", FWD(FLOW_SUBSCRIBE, SESSION_MULTI, 0, 0, 1), NONE},
    /* not forwarded */
    {"a local BLOCK-flow plan", {.kind = PLAN_LOCAL, .flow = FLOW_BLOCK, .instance = 0}, NONE},
    {"a refused BLOCK-flow plan", {.kind = PLAN_ERROR, .flow = FLOW_BLOCK, .instance = 0}, NONE},
    /* no instance: a connection cannot be opened, the wait for an empty queue stays */
    {"BLPOP, no instance", {.kind = PLAN_FORWARD, .flow = FLOW_BLOCK, .instance = -1}, EMPTY},
    {"first SUBSCRIBE, no instance",
     {.kind = PLAN_FORWARD, .flow = FLOW_SUBSCRIBE, .instance = -1, .mode = SESSION_NORMAL},
     EMPTY},
};

START_TEST(test_need_row)
{
    const struct row *r = &rows[_i];
    ck_assert_msg(pins_need(&r->f) == r->want, "%s: pins_need %u, want %u", r->what, pins_need(&r->f), r->want);
}
END_TEST

/*
 * The three tests pins_need replaced, as client.c wrote them before pins.c (issue 29): the
 * frame waits for an empty queue (client_handle_frame's needs_empty_queue), a cluster command
 * waits for its slot's owner to open a pin (client_waits_for_owner), the ordering check looks
 * at no existing connection (client_would_reorder, after its own exclusions: forwarded, not in
 * MULTI, an instance). Every combination of the facts answers as they did.
 */
static int old_needs_empty_queue(const struct pins_facts *f)
{
    int push_waits = f->resp3 && (f->flow == FLOW_SUBSCRIBE || f->flow == FLOW_UNSUBSCRIBE);
    return f->kind == PLAN_FORWARD && f->mode != SESSION_MULTI &&
           (f->flow == FLOW_BLOCK || (f->flow == FLOW_WATCH && !f->watch_pinned) ||
            (f->flow == FLOW_SUBSCRIBE && f->mode != SESSION_SUBSCRIBED) || push_waits);
}

static int old_waits_for_owner_pins(const struct pins_facts *f)
{
    return f->kind == PLAN_FORWARD && f->mode != SESSION_MULTI && f->instance >= 0 &&
           (f->flow == FLOW_BLOCK || (f->flow == FLOW_WATCH && !f->watch_pinned) ||
            (f->flow == FLOW_SUBSCRIBE && !f->subscriber_pinned));
}

/* 1 when client_would_reorder looked at no connection (b == NULL) for a plan it looks at. */
static int old_would_reorder_fresh(const struct pins_facts *f)
{
    if (f->flow == FLOW_BLOCK || (f->flow == FLOW_WATCH && !f->watch_pinned)) return 1;         /* a fresh pin */
    if (f->flow == FLOW_SUBSCRIBE || f->flow == FLOW_UNSUBSCRIBE) return !f->subscriber_pinned; /* pubsub.pin[i] */
    return -1; /* the shared connection (or the WATCH pin): looked up, not decided here */
}

START_TEST(test_need_matches_the_three_it_replaced)
{
    static const enum plan_kind kinds[] = {PLAN_ERROR, PLAN_LOCAL, PLAN_FORWARD};
    static const enum plan_flow flows[] = {FLOW_SHARED, FLOW_WATCH,     FLOW_UNWATCH,
                                           FLOW_BLOCK,  FLOW_SUBSCRIBE, FLOW_UNSUBSCRIBE};
    static const enum session_mode modes[] = {SESSION_NORMAL, SESSION_MULTI, SESSION_BLOCKED, SESSION_SUBSCRIBED};
    int n = 0;
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
        for (size_t fl = 0; fl < sizeof(flows) / sizeof(flows[0]); fl++)
            for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
                for (int bits = 0; bits < 16; bits++) {
                    struct pins_facts f = {
                        .kind = kinds[k],
                        .flow = flows[fl],
                        .mode = modes[m],
                        .instance = (bits & 1) ? 1 : -1,
                        .watch_pinned = (bits >> 1) & 1,
                        .subscriber_pinned = (bits >> 2) & 1,
                        .resp3 = (bits >> 3) & 1,
                    };
                    if (f.instance < 0) f.subscriber_pinned = 0; /* no instance: no connection there */
                    unsigned need = pins_need(&f);
                    ck_assert_int_eq(!!(need & PINS_NEED_EMPTY_QUEUE), old_needs_empty_queue(&f));
                    ck_assert_int_eq(!!(need & PINS_NEED_FRESH), old_waits_for_owner_pins(&f));
                    int looked_at = f.kind == PLAN_FORWARD && f.mode != SESSION_MULTI && f.instance >= 0;
                    int old = old_would_reorder_fresh(&f);
                    if (looked_at && old >= 0 && (need & PINS_NEED_FRESH)) ck_assert_int_eq(old, 1);
                    if (looked_at && old == 0) ck_assert(!(need & PINS_NEED_FRESH));
                    n++;
                }
    ck_assert_int_eq(n, 3 * 6 * 4 * 16);
}
END_TEST

/* pins_need_of reads the facts from the client and the plan. */
START_TEST(test_need_of_reads_the_client)
{
    struct client *c = calloc(1, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    struct backend *some = (struct backend *)(void *)c; /* only compared with NULL */
    struct plan plan;
    memset(&plan, 0, sizeof(plan));
    plan.kind = PLAN_FORWARD;
    plan.instance = 1;
    plan.flow = FLOW_WATCH;
    ck_assert_uint_eq(pins_need_of(c, &plan), PINS_NEED_FRESH | PINS_NEED_EMPTY_QUEUE);
    c->watch_pin = some;
    ck_assert_uint_eq(pins_need_of(c, &plan), PINS_NEED_NONE);
    plan.flow = FLOW_SUBSCRIBE;
    c->resp3 = 1;
    ck_assert_uint_eq(pins_need_of(c, &plan), PINS_NEED_FRESH | PINS_NEED_EMPTY_QUEUE);
    c->pubsub.pin[1] = some;
    ck_assert_uint_eq(pins_need_of(c, &plan), PINS_NEED_EMPTY_QUEUE);
    c->pubsub.pin[1] = NULL;
    c->pubsub.pin[0] = some; /* another instance's connection does not count */
    ck_assert_uint_eq(pins_need_of(c, &plan), PINS_NEED_FRESH | PINS_NEED_EMPTY_QUEUE);
    c->session.mode = SESSION_MULTI;
    ck_assert_uint_eq(pins_need_of(c, &plan), PINS_NEED_NONE);
    plan.kind = PLAN_LOCAL;
    plan.instance = CONFIG_MAX_INSTANCES; /* not read for a plan that is not forwarded */
    c->session.mode = SESSION_NORMAL;
    ck_assert_uint_eq(pins_need_of(c, &plan), PINS_NEED_NONE);
    free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pins");
    TCase *tc = tcase_create("need");
    tcase_add_loop_test(tc, test_need_row, 0, (int)(sizeof(rows) / sizeof(rows[0])));
    tcase_add_test(tc, test_need_matches_the_three_it_replaced);
    tcase_add_test(tc, test_need_of_reads_the_client);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
