/* bare_worker.h: a worker and one plain client with no socket and no backend, for unit suites of the connection layer (test_request, test_keptsend, test_router). */
#ifndef KEYGATE_TEST_BARE_WORKER_H
#define KEYGATE_TEST_BARE_WORKER_H

#include <check.h>
#include <stdlib.h>

#include <event2/event.h>

#include "config.h"
#include "conn.h"
#include "loop.h"
#include "request.h"

/*
 * What request.c and keptsend.c touch. Replies go to c.obuf (conn_out), a wake-up lists c on
 * w.woken (conn_wake); both activate w.flush_ev, and a re-send timer is added, on a real event base
 * that is never dispatched. The caller sets cfg's instances and w.nodes as it needs.
 */
struct bare_worker {
    struct config cfg;
    struct proxy proxy;
    struct worker w;
    struct client c;
    struct event_base *base;
};

static void bare_worker_noop_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

/* A new bare worker with one client (client output limits 1 MiB soft, 2 MiB hard). */
static inline struct bare_worker *bare_worker_new(void)
{
    struct bare_worker *f = calloc(1, sizeof(*f));
    ck_assert_ptr_nonnull(f);
    f->cfg.client_output_limit = 1 << 20;
    f->cfg.client_output_hard_limit = 1 << 21;
    f->base = event_base_new();
    ck_assert_ptr_nonnull(f->base);
    f->w.cfg = &f->cfg;
    f->w.proxy = &f->proxy;
    f->w.base = f->base;
    f->w.flush_ev = event_new(f->base, -1, 0, bare_worker_noop_cb, NULL);
    ck_assert_ptr_nonnull(f->w.flush_ev);
    f->c.worker = &f->w;
    f->c.fd = f->c.pfd = -1;
    TAILQ_INIT(&f->c.queue);
    TAILQ_INIT(&f->c.resends);
    replywin_init(&f->c.win, (uint64_t)f->cfg.client_output_limit);
    return f;
}

/* Free f (its client's queue emptied by the test, its node tables deleted by the caller). */
static inline void bare_worker_free(struct bare_worker *f)
{
    request_pool_free(&f->w);
    bytebuf_free(&f->c.obuf);
    free(f->w.dirty_clients.items);
    free(f->w.woken.items);
    stats_free(&f->w.stats);
    event_free(f->w.flush_ev);
    event_base_free(f->base);
    free(f);
}

/* The client lets go of req (client_teardown): req is freed once its last owed reply came. */
static inline void bare_worker_let_go(struct bare_worker *f, struct request *req)
{
    TAILQ_REMOVE(&f->c.queue, req, link);
    f->c.nqueued--;
    f->c.replies_held -= req->held;
    request_release(req);
}

#endif
