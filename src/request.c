/* request.c: one client command waiting for its reply, the client's queue of them, the recycling pool. */
#include "request.h"

#include <assert.h>
#include <string.h>

#include "conn.h"
#include "replies.h"

_Static_assert(ERROR_REPLY_MAX >= ERROR_TEXT_MAX + 3, "an error reply holds any error text of the pure layer");

#define FREE_REQUESTS_MAX 4096  /* recycled per worker; beyond that they go back to malloc */
#define REQUEST_KEEP_BYTES 4096 /* a recycled request keeps its kept send's buffer up to this */
#define REQUEST_KEEP_ENTRIES 64 /* and its entries array up to this many */

struct request *request_new(struct client *c)
{
    struct worker *w = c->worker;
    struct request *req = w->free_requests;
    if (req) {
        w->free_requests = req->link.tqe_next;
        w->nfree_requests--;
        struct bytebuf bytes = req->send1.bytes; /* kept by request_free, emptied */
        struct request_entry *entries = req->send1.entries;
        int cap = req->send1.cap;
        memset(req, 0, sizeof(*req));
        req->send1.bytes = bytes;
        req->send1.entries = entries;
        req->send1.cap = cap;
    } else {
        req = xcalloc(1, sizeof(*req));
    }
    req->worker = w;
    req->client = c;
    req->seq = c->next_seq++;
    TAILQ_INSERT_TAIL(&c->queue, req, link);
    c->nqueued++;
    req->win_charge = replywin_charge(&c->win);
    return req;
}

static void request_free(struct request *req)
{
    struct worker *w = req->worker;
    assert(req->waiting == 0 && !req->client); /* nobody holds it, no backend reply is owed to it */
    for (int i = 0; i < req->nparts; i++) free(req->parts[i].reply);
    free(req->parts);
    free(req->key_part);
    int recycled = w->nfree_requests < FREE_REQUESTS_MAX;
    for (int i = 0; i < req->nsends; i++) {
        struct request_send *s = &req->sends[i];
        assert(!s->queued); /* a client's list holds no send of a freed request */
        free(s->error);
        if (s == &req->send1) continue; /* below */
        bytebuf_free(&s->bytes);
        free(s->entries);
    }
    if (req->sends != &req->send1) free(req->sends);
    /* send1's buffers stay with a recycled request while they are small */
    if (!recycled || req->send1.bytes.cap > REQUEST_KEEP_BYTES || req->send1.cap > REQUEST_KEEP_ENTRIES) {
        bytebuf_free(&req->send1.bytes);
        free(req->send1.entries);
        req->send1.entries = NULL;
        req->send1.cap = 0;
    }
    req->send1.bytes.len = 0;
    bytebuf_free(&req->exec_keep);
    free(req->queued_error);
    free(req->nc);
    bytebuf_free(&req->track);
    if (req->held) mem_add(w, -(int64_t)req->held); /* its reply kept behind an earlier one, its parts */
    free(req->reply);
    free(req->repl_reply);
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
        bytebuf_free(&req->send1.bytes); /* kept across its recycling (request_free) */
        free(req->send1.entries);
        free(req);
    }
    w->nfree_requests = 0;
}

/* req keeps `len` more reply bytes: they count in max-memory and against its client's limits. */
static void request_hold(struct request *req, size_t len)
{
    req->held += len;
    mem_add(req->worker, (int64_t)len);
    if (req->client) req->client->replies_held += len;
}

/* req keeps `len` fewer reply bytes (kept through request_hold): they no longer count. */
static void request_unhold(struct request *req, size_t len)
{
    assert(len <= req->held); /* every byte was kept through request_hold */
    req->held -= len;
    mem_add(req->worker, -(int64_t)len);
    if (req->client) req->client->replies_held -= len;
}

/* req's parts are merged into its reply: free them (they no longer count). */
static void request_parts_drop(struct request *req)
{
    size_t len = 0;
    for (int i = 0; i < req->nparts; i++) {
        len += req->parts[i].len;
        free(req->parts[i].reply);
        req->parts[i].reply = NULL;
        req->parts[i].len = 0;
    }
    request_unhold(req, len); /* every part was kept through request_part_keep */
}

void request_part_keep(struct request *req, int part, const char *reply, size_t len)
{
    struct request_part *pt = &req->parts[part];
    assert(part < req->nparts && !pt->reply);
    pt->reply = xmemdup(reply, len);
    pt->len = len;
    request_hold(req, len);
    if (req->client) (void)conn_output_over(req->client, 0); /* past its limit: closed, the rest dropped */
}

void request_part_replace(struct request *req, int part, const char *reply, size_t len)
{
    struct request_part *pt = &req->parts[part];
    assert(part < req->nparts && pt->reply);
    request_unhold(req, pt->len); /* the replaced bytes no longer count (they did twice) */
    free(pt->reply);
    pt->reply = NULL;
    pt->len = 0;
    request_part_keep(req, part, reply, len);
}

void request_keep_reply(struct request *req, const char *reply, size_t len)
{
    assert(!req->repl_reply);
    req->repl_reply = xmemdup(reply, len);
    req->repl_len = len;
    request_hold(req, len);
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
static inline __attribute__((always_inline)) void queue_pop(struct client *c, struct request *req)
{
    assert(req == TAILQ_FIRST(&c->queue) && c->nqueued > 0); /* nqueued counts the queue */
    assert(c->replies_held >= req->held);                    /* what it keeps was counted for c when kept */
    TAILQ_REMOVE(&c->queue, req, link);
    c->nqueued--;
    c->replies_held -= req->held; /* its reply goes to the output now (or is dropped) */
}

void request_complete(struct request *req, const char *reply, size_t len)
{
    struct client *c = req->client;
    assert(!req->done); /* one reply per request */
    req->done = 1;
    if (req->silent) len = 0;                 /* CLIENT REPLY OFF / SKIP: its turn in the queue, no bytes */
    if (req->nparts) request_parts_drop(req); /* merged into reply (which never points into them) */
    if (!c) {
        if (req->waiting == 0) request_free(req);
        return;
    }
    replywin_reply(&c->win, req->win_charge, len); /* the window learns its size */
    req->win_charge = 0;
    if (c->closed) return; /* still on the queue: the reap releases it */
    if (req != TAILQ_FIRST(&c->queue)) {
        /* kept until the head reaches it, counted against c's limits as it arrives */
        if (conn_output_over(c, len)) return; /* closed: the reply is dropped */
        req->reply = len ? xmemdup(reply, len) : NULL;
        req->reply_len = len;
        request_hold(req, len);
        return;
    }
    /* the head: straight to the output, then every complete one behind it */
    queue_pop(c, req);
    stats_reply_out(&req->worker->stats, &req->mark, len);
    if (len) conn_out(c, reply, len);
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
