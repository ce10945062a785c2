/* request.c: one client command waiting for its reply, the client's queue of them, the recycling pool. */
#include "request.h"

#include <assert.h>
#include <string.h>

#include "conn.h"
#include "replies.h"

_Static_assert(ERROR_REPLY_MAX >= ERROR_TEXT_MAX + 3, "an error reply holds any error text of the pure layer");

#define FREE_REQUESTS_MAX 4096 /* recycled per worker; beyond that they go back to malloc */

struct request *request_new(struct client *c)
{
    struct worker *w = c->worker;
    struct request *req = w->free_requests;
    if (req) {
        w->free_requests = req->link.tqe_next;
        w->nfree_requests--;
        memset(req, 0, sizeof(*req));
    } else {
        req = xcalloc(1, sizeof(*req));
    }
    req->worker = w;
    req->client = c;
    TAILQ_INSERT_TAIL(&c->queue, req, link);
    c->nqueued++;
    return req;
}

static void request_free(struct request *req)
{
    struct worker *w = req->worker;
    assert(req->waiting == 0 && !req->client); /* nobody holds it, no backend reply is owed to it */
    for (int i = 0; i < req->nparts; i++) free(req->parts[i].reply);
    free(req->parts);
    free(req->key_instance);
    bytebuf_free(&req->exec_keep);
    free(req->queued_error);
    free(req->nc);
    if (req->reply) mem_add(w, -(int64_t)req->reply_len); /* a reply kept behind an earlier one */
    free(req->reply);
    if (w->nfree_requests >= FREE_REQUESTS_MAX) {
        free(req);
        return;
    }
    req->link.tqe_next = w->free_requests;
    w->free_requests = req;
    w->nfree_requests++;
}

void request_pool_free(struct worker *w)
{
    struct request *req;
    while ((req = w->free_requests)) {
        w->free_requests = req->link.tqe_next;
        free(req);
    }
    w->nfree_requests = 0;
}

void request_release(struct request *req)
{
    req->client = NULL;
    if (req->waiting == 0) request_free(req);
}

void request_expect(struct request *req)
{
    req->waiting++;
}

void request_reply_consumed(struct request *req)
{
    assert(req->waiting > 0);
    req->waiting--;
    if (req->waiting == 0 && !req->client) request_free(req);
}

/* Take the head of c's queue off it. */
static void queue_pop(struct client *c, struct request *req)
{
    assert(req == TAILQ_FIRST(&c->queue) && c->nqueued > 0); /* nqueued counts the queue */
    TAILQ_REMOVE(&c->queue, req, link);
    c->nqueued--;
}

void request_complete(struct request *req, const char *reply, size_t len)
{
    struct client *c = req->client;
    assert(!req->done); /* one reply per request */
    req->done = 1;
    if (!c) {
        if (req->waiting == 0) request_free(req);
        return;
    }
    if (c->closed) return; /* still on the queue: the reap releases it */
    if (req != TAILQ_FIRST(&c->queue)) {
        req->reply = xmemdup(reply, len);
        req->reply_len = len;
        mem_add(req->worker, (int64_t)len);
        return;
    }
    /* the head: straight to the output, then every complete one behind it */
    queue_pop(c, req);
    stats_reply_out(&req->worker->stats, &req->mark, len);
    conn_out(c, reply, len);
    request_release(req);
    while ((req = TAILQ_FIRST(&c->queue)) && req->done) {
        queue_pop(c, req);
        stats_reply_out(&req->worker->stats, &req->mark, req->reply_len);
        if (req->reply_len) conn_out(c, req->reply, req->reply_len);
        request_release(req);
    }
    conn_wake(c);
}

void request_error(struct request *req, const char *text)
{
    char buf[ERROR_REPLY_MAX];
    size_t n = replies_error(buf, sizeof(buf), text);
    stats_refused(&req->worker->stats, &req->mark, text);
    request_complete(req, buf, n);
}

/* request_answer with a backend error reply: counted per namespace and code, then the same. */
static __attribute__((noinline)) void request_answer_backend_error(struct request *req, const char *reply, size_t len)
{
    stats_backend_error(&req->worker->stats, &req->mark, reply, len);
    req->waiting--;
    request_complete(req, reply, len);
}

void request_answer(struct request *req, const char *reply, size_t len)
{
    assert(req->waiting > 0);
    if (__builtin_expect(reply[0] == '-', 0)) {
        request_answer_backend_error(req, reply, len);
        return;
    }
    req->waiting--;
    request_complete(req, reply, len);
}

void request_answer_error(struct request *req, const char *text)
{
    assert(req->waiting > 0);
    req->waiting--;
    request_error(req, text);
}
