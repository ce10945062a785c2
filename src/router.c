/* router.c: the only code that writes requests for a backend and interprets what it answers. */
#include "router.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "info.h"
#include "nearcache.h"
#include "replies.h"

/* How a backend reply is used (struct pending's kind; see router.h). */
enum route_kind {
    ROUTE_PASS = 0,
    ROUTE_DROP,
    ROUTE_QUEUED,
    ROUTE_EXEC_PICK,
    ROUTE_EXEC_FILTER,
    ROUTE_PART,
    ROUTE_PART_PICK, /* a split part in keygate's MULTI (its invalidations): element 0 of EXEC is the part */
    ROUTE_FILL,      /* a near-cache fill: stored, and the command's reply rendered from it (nearcache.c) */
    ROUTE_PREFETCH,  /* a near-cache fill of one of MGET's keys (part = its index): stored, not answered */
};

_Static_assert(CONFIG_MAX_INSTANCES <= REPLIES_MAX_PARTS, "a split command has one part per instance");
_Static_assert((int)REPLIES_MERGE_VALUES == (int)MERGE_MGET && (int)REPLIES_MERGE_SUM == (int)MERGE_SUM,
               "replies_merge takes plan_merge's values");

/* One more reply owed on b for req, used as `kind`. */
static void route_expect(struct backend *b, struct request *req, enum route_kind kind, int part)
{
    assert(part >= 0 && part <= UINT8_MAX);
    backend_expect(b, (struct pending){.req = req, .kind = (uint8_t)kind, .part = (uint8_t)part});
    request_expect(req);
}

/*
 * Write the client's frame to `out`, with plan->append spliced on the end:
 *   unchanged multibulk   -> the frame's bytes as they came (one copy)
 *   multibulk + appended  -> new "*N" header + the frame's arguments + the new ones
 *   inline, or GET->GETEX -> re-encoded as multibulk
 */
static void write_frame(struct bytebuf *out, const struct client *c, const struct plan *plan, const char *frame)
{
    const struct resp_parser *p = &c->parser;
    if (!p->is_inline && plan->nappend == 0 && !plan->ttl.getex) {
        bytebuf_add(out, frame, p->frame_len);
        return;
    }
    char hdr[32];
    hdr[0] = '*';
    size_t n = 1 + format_ll(hdr + 1, (long long)(p->argc + plan->nappend));
    hdr[n++] = '\r';
    hdr[n++] = '\n';
    bytebuf_add(out, hdr, n);
    if (!p->is_inline && !plan->ttl.getex) {
        bytebuf_add(out, frame + p->header_len, p->frame_len - p->header_len);
    } else {
        for (size_t i = 0; i < p->argc; i++) {
            if (i == 0 && plan->ttl.getex)
                bytebuf_add_bulk(out, STR_AND_LEN("GETEX"));
            else
                bytebuf_add_bulk(out, resp_arg_ptr(p, frame, i), p->args[i].len);
        }
    }
    for (size_t i = 0; i < plan->nappend; i++) bytebuf_add_bulk(out, plan->append[i], plan->append_len[i]);
}

/* PEXPIRE key ms [NX | XX LT] for one ttl_fix. */
static void write_fix(struct bytebuf *out, const struct client *c, const char *frame, const struct ttl_fix *f)
{
    char ms[24];
    size_t n = format_ll(ms, (long long)f->ttl_ms);
    if (f->mode == TTL_FIX_RESET)
        bytebuf_add(out, STR_AND_LEN("*3\r\n$7\r\nPEXPIRE\r\n"));
    else if (f->mode == TTL_FIX_NX)
        bytebuf_add(out, STR_AND_LEN("*4\r\n$7\r\nPEXPIRE\r\n"));
    else
        bytebuf_add(out, STR_AND_LEN("*5\r\n$7\r\nPEXPIRE\r\n"));
    bytebuf_add_bulk(out, resp_arg_ptr(&c->parser, frame, f->argi), c->parser.args[f->argi].len);
    bytebuf_add_bulk(out, ms, (size_t)n);
    if (f->mode == TTL_FIX_NX) {
        bytebuf_add_bulk(out, STR_AND_LEN("NX"));
    } else if (f->mode == TTL_FIX_CAP) {
        bytebuf_add_bulk(out, STR_AND_LEN("XX")); /* only a key that has a TTL: none is given */
        bytebuf_add_bulk(out, STR_AND_LEN("LT"));
    }
}

/* XADD <stream> * k <key>: the near-cache invalidation of one written key (ncpolicy.h). */
static void write_inval(struct bytebuf *out, const struct client *c, const char *frame, const struct nc_inval_key *k)
{
    bytebuf_add(out, STR_AND_LEN("*5\r\n$4\r\nXADD\r\n"));
    bytebuf_add_bulk(out, k->ns->nc_stream, k->ns->nc_stream_len);
    bytebuf_add(out, STR_AND_LEN("$1\r\n*\r\n$1\r\nk\r\n"));
    bytebuf_add_bulk(out, resp_arg_ptr(&c->parser, frame, k->argi), c->parser.args[k->argi].len);
}

void router_unavailable(struct client *c, struct request *req, int instance)
{
    char text[128];
    replies_unavailable(text, sizeof(text), c->worker->cfg->instance_names[instance]);
    request_error(req, text);
}

struct backend *router_conn_for(struct client *c, int instance)
{
    if (c->watch_pin && c->session.watch_instance == instance) return c->watch_pin;
    return router_shared_for(c, instance);
}

/*
 * WAIT waits for the replication offset of the connection it runs on, and it runs on a
 * dedicated connection, not the one that carried the client's write: a PUBLISH first (Redis
 * replicates every PUBLISH, to a channel nobody subscribes to) moves that offset to the
 * primary's current one, past the client's earlier write. Its reply is swallowed.
 */
#define ROUTER_WAIT_SYNC "*3\r\n$7\r\nPUBLISH\r\n$14\r\nkeygate:wait:0\r\n$0\r\n\r\n"

static void router_write_wait_sync(struct bytebuf *out, struct backend *b, struct request *req)
{
    bytebuf_add(out, STR_AND_LEN(ROUTER_WAIT_SYNC));
    route_expect(b, req, ROUTE_DROP, 0);
}

void router_close_subscribers(struct client *c)
{
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++) {
        struct backend *b = c->pubsub.pin[i];
        if (!b) continue;
        (void)pubsub_lost(&c->pubsub, i);
        backend_abandon(b);
    }
}

/* The reply of a request sent on the client's blocking pin: the pin is back in the pool. */
static __attribute__((noinline)) void route_unblock_client(struct request *req);

static inline void route_unblock(struct request *req)
{
    if (__builtin_expect(req->blocking, 0)) route_unblock_client(req);
}

static void route_unblock_client(struct request *req)
{
    if (!req->client) return;
    struct client *c = req->client;
    struct backend *b = c->block_pin;
    if (b) {
        b->block_client = 0;
        /* a CLIENT UNBLOCK (from any worker) named its connection: the UNBLOCK may still be on its
         * way, so the connection must not carry another client's blocking command */
        if (blocked_remove(&c->worker->proxy->blocked, c->id)) backend_unblock_sent(b);
    }
    c->block_pin = NULL;
    session_unblock(&c->session);
}

/*
 * Everything for one request goes into the connection's output in one go, so no
 * other client's command can fall between keygate's MULTI and EXEC:
 *
 *   [MULTI]  client command  [PEXPIRE k D NX ...]  [XADD s * k key ...]  [EXEC]
 *   DROP     PASS | QUEUED   DROP ...              DROP ...              EXEC_PICK
 */
void router_forward(struct client *c, struct backend *b, struct request *req, const struct plan *plan,
                    const char *frame)
{
    struct worker *w = c->worker;
    if (!b || b->state == BACKEND_DOWN) {
        route_unblock(req);
        router_unavailable(c, req, plan->instance);
        return;
    }
    struct bytebuf *out = backend_stage(b);
    if (plan->wait_sync) router_write_wait_sync(out, b, req);
    int wrap = plan->ttl.wrap;
    if (wrap) {
        bytebuf_add(out, STR_AND_LEN("*1\r\n$5\r\nMULTI\r\n"));
        route_expect(b, req, ROUTE_DROP, 0);
    }
    write_frame(out, c, plan, frame);
    route_expect(b, req, wrap ? ROUTE_QUEUED : ROUTE_PASS, 0);
    for (size_t i = 0; i < plan->ttl.nfix; i++) {
        write_fix(out, c, frame, &plan->ttl.fix[i]);
        route_expect(b, req, ROUTE_DROP, 0);
    }
    for (uint32_t i = 0; i < plan->inval.n; i++) {
        write_inval(out, c, frame, &plan->inval.key[i]);
        route_expect(b, req, ROUTE_DROP, 0);
    }
    if (wrap) {
        bytebuf_add(out, STR_AND_LEN("*1\r\n$4\r\nEXEC\r\n"));
        route_expect(b, req, ROUTE_EXEC_PICK, 0);
    }
    STAT_INC(&w->stats, commands_forwarded);
    if (plan->nappend || plan->ttl.nfix) stats_ttl_injected(&w->stats, &req->mark);
}

void router_forward_bytes(struct client *c, struct backend *b, int instance, struct request *req, const char *bytes,
                          size_t len)
{
    if (!b || b->state == BACKEND_DOWN) {
        router_unavailable(c, req, instance);
        return;
    }
    bytebuf_add(backend_stage(b), bytes, len);
    route_expect(b, req, ROUTE_PASS, 0);
    STAT_INC(&c->worker->stats, commands_forwarded);
}

void router_forward_fill(struct client *c, struct backend *b, struct request *req, const struct plan *plan,
                         const char *frame)
{
    if (!b || b->state == BACKEND_DOWN) {
        router_unavailable(c, req, plan->instance);
        return;
    }
    static const char script[] = NCPOLICY_FILL_SCRIPT;
    struct bytebuf *out = backend_stage(b);
    bytebuf_add(out, STR_AND_LEN("*4\r\n$4\r\nEVAL\r\n"));
    bytebuf_add_bulk(out, script, sizeof(script) - 1);
    bytebuf_add(out, STR_AND_LEN("$1\r\n1\r\n"));
    bytebuf_add_bulk(out, resp_arg_ptr(&c->parser, frame, 1), c->parser.args[1].len);
    route_expect(b, req, ROUTE_FILL, 0);
    STAT_INC(&c->worker->stats, commands_forwarded);
}

void router_forward_prefetch(struct client *c, struct backend *b, struct request *req)
{
    size_t n = nearcache_prefetch_count(req);
    if (!b || b->state == BACKEND_DOWN || n == 0) return; /* the MGET itself answered -UNAVAILABLE */
    static const char script[] = NCPOLICY_FILL_SCRIPT;
    struct bytebuf *out = backend_stage(b);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *key = nearcache_prefetch_key(req, i, &len);
        bytebuf_add(out, STR_AND_LEN("*4\r\n$4\r\nEVAL\r\n"));
        bytebuf_add_bulk(out, script, sizeof(script) - 1);
        bytebuf_add(out, STR_AND_LEN("$1\r\n1\r\n"));
        bytebuf_add_bulk(out, key, len);
        route_expect(b, req, ROUTE_PREFETCH, (int)i);
    }
}

void router_write_queued(struct bytebuf *out, const struct client *c, const struct plan *plan, const char *frame,
                         struct bytebuf *keep)
{
    static const uint8_t client_reply = 1, injected = 0;
    write_frame(out, c, plan, frame);
    bytebuf_add(keep, &client_reply, 1);
    for (size_t i = 0; i < plan->ttl.nfix; i++) {
        write_fix(out, c, frame, &plan->ttl.fix[i]);
        bytebuf_add(keep, &injected, 1);
    }
    for (uint32_t i = 0; i < plan->inval.n; i++) { /* in the client's transaction, after its write */
        write_inval(out, c, frame, &plan->inval.key[i]);
        bytebuf_add(keep, &injected, 1);
    }
}

void router_exec(struct client *c, struct backend *b, struct request *req)
{
    struct bytebuf *out = backend_stage(b);
    bytebuf_add(out, STR_AND_LEN("*1\r\n$5\r\nMULTI\r\n"));
    route_expect(b, req, ROUTE_DROP, 0);
    bytebuf_add(out, c->multi_buf.p, c->multi_buf.len);
    for (size_t i = 0; i < c->multi_keep.len; i++) route_expect(b, req, ROUTE_DROP, 0); /* each +QUEUED */
    bytebuf_add(out, STR_AND_LEN("*1\r\n$4\r\nEXEC\r\n"));
    route_expect(b, req, ROUTE_EXEC_FILTER, 0);
    req->exec_keep = c->multi_keep; /* the request owns the flags now */
    memset(&c->multi_keep, 0, sizeof(c->multi_keep));
    STAT_INC(&c->worker->stats, commands_forwarded);
}

void router_unwatch(struct client *c, struct request *req)
{
    assert(c->watch_pin);
    bytebuf_add(backend_stage(c->watch_pin), STR_AND_LEN("*1\r\n$7\r\nUNWATCH\r\n"));
    route_expect(c->watch_pin, req, ROUTE_DROP, 0);
}

void router_subscribe(struct client *c, struct backend *b, int inst, const char *frame, size_t len)
{
    assert(c->pubsub.pin[inst] == b && b->subscriber);
    struct bytebuf *out = backend_stage(b);
    bytebuf_add(out, frame, len);
    /* its answer marks the end of this command's confirmations (route_push) */
    bytebuf_add(out, STR_AND_LEN(PUBSUB_MARKER_CMD));
    pubsub_marker_sent(&c->pubsub, inst);
    STAT_INC(&c->worker->stats, commands_forwarded);
}

/* INFO's parts came: keygate's sections (the last part) and each instance's, labelled. */
static void route_merge_info(struct request *req)
{
    const struct config *cfg = req->worker->cfg;
    struct info_part parts[CONFIG_MAX_INSTANCES];
    int n = req->nparts - 1;
    assert(n > 0 && n <= CONFIG_MAX_INSTANCES && req->parts[n].instance == -1);
    for (int k = 0; k < n; k++)
        parts[k] =
            (struct info_part){cfg->instance_names[req->parts[k].instance], req->parts[k].reply, req->parts[k].len};
    struct bytebuf out = {0};
    if (info_merge(req->parts[n].reply, req->parts[n].len, parts, n, &out) == 0) {
        if (req->client && req->client->resp3) { /* RESP3: a verbatim string, as Redis's INFO */
            struct bytebuf v = {0};
            replies_verbatim(out.p, out.len, &v);
            bytebuf_free(&out);
            out = v;
        }
        request_complete(req, out.p, out.len);
    } else
        request_error(req, "ERR keygate could not merge the instances' INFO replies");
    bytebuf_free(&out);
}

/* All parts of a split request came: merge them into its reply. */
static void route_merge(struct request *req)
{
    if (req->merge == MERGE_INFO) {
        route_merge_info(req);
        return;
    }
    assert(req->parts_left == 0 && req->nparts > 0 && req->nparts <= REPLIES_MAX_PARTS);
    struct replies_part parts[REPLIES_MAX_PARTS];
    for (int k = 0; k < req->nparts; k++)
        parts[k] = (struct replies_part){req->parts[k].instance, req->parts[k].reply, req->parts[k].len};
    struct bytebuf out = {0};
    if (replies_merge((enum replies_merge_kind)req->merge, parts, req->nparts, req->key_instance, req->argc, &out) == 0)
        request_complete(req, out.p, out.len);
    else
        request_error(req, "ERR keygate could not merge the MGET replies");
    bytebuf_free(&out);
}

/* One instance's reply (or failure) for part `part` of a split request; the last merges. */
static void route_part(struct request *req, int part, const char *reply, size_t len)
{
    assert(part < req->nparts && req->parts_left > 0 && req->waiting > 0);
    request_part_keep(req, part, reply, len); /* counted against the client's limits as it comes */
    if (--req->parts_left > 0) {
        request_reply_consumed(req); /* other parts are still owed: req lives on */
        return;
    }
    req->waiting--;
    route_merge(req);
}

/* Part k of req has no connection (its instance is down): it fails at once with
 * -UNAVAILABLE, and the merge answers when it was the last part due. */
static void route_part_unavailable(struct worker *w, struct request *req, int k)
{
    char text[128], msg[ERROR_REPLY_MAX];
    replies_unavailable(text, sizeof(text), w->cfg->instance_names[req->parts[k].instance]);
    size_t n = replies_error(msg, sizeof(msg), text);
    request_part_keep(req, k, msg, n);
    STAT_INC(&w->stats, errors_unavailable);
    assert(req->parts_left > 0);
    if (--req->parts_left == 0) route_merge(req);
}

/*
 * A keyless command for every instance (DBSIZE, INFO keyspace): the same `command` bytes to
 * each, one part per instance, merged like a split command (route_merge); `extra` (may be
 * NULL) is one more part that is complete already. An instance that is down fails its part,
 * and the merge answers that error.
 */
static void router_forward_all(struct client *c, struct request *req, int merge, const struct bytebuf *command,
                               const char *extra, size_t extra_len)
{
    struct worker *w = c->worker;
    int n = (int)w->cfg->ninstances;
    assert(n > 0 && n <= CONFIG_MAX_INSTANCES);
    req->parts = xcalloc(CONFIG_MAX_INSTANCES + 1, sizeof(*req->parts));
    req->merge = merge;
    req->argc = c->parser.argc;
    req->nparts = req->parts_left = n;
    if (extra) { /* one more part, complete already: keygate's own (INFO's local sections) */
        req->parts[n].instance = -1;
        req->nparts++;
        request_part_keep(req, n, extra, extra_len);
    }
    struct backend *conns[CONFIG_MAX_INSTANCES] = {0};
    for (int k = 0; k < n; k++) {
        req->parts[k].instance = k;
        conns[k] = router_conn_for(c, k);
    }
    for (int k = 0; k < n; k++) { /* every part is written before any reply can complete req */
        if (!conns[k]) continue;
        bytebuf_add(backend_stage(conns[k]), command->p, command->len);
        route_expect(conns[k], req, ROUTE_PART, k);
        STAT_INC(&w->stats, commands_forwarded);
    }
    for (int k = 0; k < n; k++)
        if (!conns[k]) route_part_unavailable(w, req, k);
}

void router_forward_info(struct client *c, struct request *req, size_t argc, const char *const *argv,
                         const size_t *argvlen, const char *local, size_t local_len)
{
    struct bytebuf command = {0}; /* INFO with the client's own section names */
    char hdr[32];
    int n = snprintf(hdr, sizeof(hdr), "*%zu\r\n", argc);
    bytebuf_add(&command, hdr, (size_t)n);
    for (size_t i = 0; i < argc; i++) bytebuf_add_bulk(&command, argv[i], argvlen[i]);
    router_forward_all(c, req, MERGE_INFO, &command, local_len ? local : "", local_len); /* "": present, empty */
    bytebuf_free(&command);
}

/*
 * MGET/DEL/UNLINK/EXISTS/TOUCH across instances: one sub-command per instance with
 * that instance's keys, in the client's order; route_merge puts the replies together.
 */
void router_forward_split(struct client *c, struct request *req, struct plan *plan, const char *frame)
{
    struct worker *w = c->worker;
    const struct resp_parser *p = &c->parser;
    int count[CONFIG_MAX_INSTANCES] = {0};
    if (!plan->key_instance) {
        struct bytebuf command = {0};
        write_frame(&command, c, plan, frame);
        router_forward_all(c, req, plan->merge, &command, NULL, 0);
        bytebuf_free(&command);
        return;
    }
    for (size_t i = 1; i < p->argc; i++)
        if (plan->key_instance[i] >= 0) count[(int)plan->key_instance[i]]++;
    req->parts = xcalloc(CONFIG_MAX_INSTANCES, sizeof(*req->parts));
    req->merge = plan->merge;
    req->key_instance = plan->key_instance;
    plan->key_instance = NULL;
    req->argc = p->argc;
    for (int inst = 0; inst < CONFIG_MAX_INSTANCES; inst++)
        if (count[inst]) req->parts[req->nparts++].instance = inst;
    req->parts_left = req->nparts;
    /* write every part before any reply can complete the request */
    struct backend *conns[CONFIG_MAX_INSTANCES] = {0};
    for (int k = 0; k < req->nparts; k++) conns[k] = router_conn_for(c, req->parts[k].instance);
    for (int k = 0; k < req->nparts; k++) {
        int inst = req->parts[k].instance;
        struct backend *b = conns[k];
        if (!b) continue;
        struct bytebuf *out = backend_stage(b);
        /* a part that writes near-cache keys carries their XADDs in one MULTI/EXEC of its own */
        int wrap = 0;
        for (uint32_t v = 0; v < plan->inval.n && !wrap; v++) wrap = req->key_instance[plan->inval.key[v].argi] == inst;
        if (wrap) {
            bytebuf_add(out, STR_AND_LEN("*1\r\n$5\r\nMULTI\r\n"));
            route_expect(b, req, ROUTE_DROP, 0);
        }
        char hdr[32];
        int n = snprintf(hdr, sizeof(hdr), "*%d\r\n", 1 + count[inst]);
        bytebuf_add(out, hdr, (size_t)n);
        bytebuf_add_bulk(out, resp_arg_ptr(p, frame, 0), p->args[0].len);
        for (size_t i = 1; i < p->argc; i++)
            if (req->key_instance[i] == inst) bytebuf_add_bulk(out, resp_arg_ptr(p, frame, i), p->args[i].len);
        route_expect(b, req, wrap ? ROUTE_QUEUED : ROUTE_PART, k);
        for (size_t f = 0; f < plan->ttl.nfix; f++) {
            if (req->key_instance[plan->ttl.fix[f].argi] != inst) continue;
            write_fix(out, c, frame, &plan->ttl.fix[f]);
            route_expect(b, req, ROUTE_DROP, 0);
        }
        for (uint32_t v = 0; v < plan->inval.n; v++) {
            if (req->key_instance[plan->inval.key[v].argi] != inst) continue;
            write_inval(out, c, frame, &plan->inval.key[v]);
            route_expect(b, req, ROUTE_DROP, 0);
        }
        if (wrap) {
            bytebuf_add(out, STR_AND_LEN("*1\r\n$4\r\nEXEC\r\n"));
            route_expect(b, req, ROUTE_PART_PICK, k);
        }
        STAT_INC(&w->stats, commands_forwarded);
    }
    if (plan->ttl.nfix) stats_ttl_injected(&w->stats, &req->mark); /* a sliding window reset */
    /* parts whose instance is down fail at once; the merge reports it */
    for (int k = 0; k < req->nparts; k++)
        if (!conns[k]) route_part_unavailable(w, req, k);
}

/* ---- the hooks: what the backends report ---- */

/* The reply (or failure) that answers a request: a write's near-cache keys are evicted again. */
static void route_writes_answered(struct request *req, enum route_kind kind)
{
    if (req->nc && kind != ROUTE_DROP && kind != ROUTE_QUEUED && kind != ROUTE_FILL && kind != ROUTE_PREFETCH)
        nearcache_write_replied(req);
}

static void route_deliver(struct backend *b, const struct pending *pd, const char *reply, size_t len)
{
    struct request *req = pd->req;
    (void)b;
    route_writes_answered(req, (enum route_kind)pd->kind);
    switch ((enum route_kind)pd->kind) {
    case ROUTE_FILL:
        nearcache_fill_reply(req, reply, len, NULL);
        return;
    case ROUTE_PREFETCH:
        nearcache_prefetch_reply(req, pd->part, reply, len);
        request_reply_consumed(req);
        return;
    case ROUTE_DROP:
        request_reply_consumed(req);
        return;
    case ROUTE_QUEUED:
        if (reply[0] == '-' && !req->queued_error) {
            req->queued_error = xmemdup(reply, len);
            req->queued_error_len = len;
        }
        request_reply_consumed(req);
        return;
    case ROUTE_EXEC_PICK: {
        const char *pick;
        size_t pick_len;
        replies_exec_pick(reply, len, req->queued_error, req->queued_error_len, &pick, &pick_len);
        request_answer(req, pick, pick_len);
        return;
    }
    case ROUTE_EXEC_FILTER: {
        struct bytebuf out = {0};
        if (replies_exec_filter(reply, len, (const uint8_t *)req->exec_keep.p, req->exec_keep.len, &out) == 0)
            request_answer(req, out.p, out.len);
        else
            request_answer(req, reply, len); /* nil (WATCH) or EXECABORT: as it came */
        bytebuf_free(&out);
        return;
    }
    case ROUTE_PART:
        route_part(req, pd->part, reply, len);
        return;
    case ROUTE_PART_PICK: {
        const char *pick;
        size_t pick_len;
        replies_exec_pick(reply, len, req->queued_error, req->queued_error_len, &pick, &pick_len);
        route_part(req, pd->part, pick, pick_len);
        return;
    }
    case ROUTE_PASS:
        route_unblock(req);
        request_answer(req, reply, len);
        return;
    }
    assert(!"unknown route kind");
}

static void route_fail(struct backend *b, const struct pending *pd)
{
    struct request *req = pd->req;
    char text[160];
    if (b->timed_out)
        replies_timed_out(text, sizeof(text), b->worker->cfg->instance_names[b->instance]);
    else
        replies_unavailable(text, sizeof(text), b->worker->cfg->instance_names[b->instance]);
    route_writes_answered(req, (enum route_kind)pd->kind);
    switch ((enum route_kind)pd->kind) {
    case ROUTE_FILL:
        nearcache_fill_reply(req, NULL, 0, text);
        return;
    case ROUTE_PREFETCH:
        request_reply_consumed(req);
        return;
    case ROUTE_PASS:
    case ROUTE_EXEC_PICK:
    case ROUTE_EXEC_FILTER:
        route_unblock(req);
        request_answer_error(req, text);
        return;
    case ROUTE_PART:
    case ROUTE_PART_PICK: {
        char msg[ERROR_REPLY_MAX];
        size_t n = replies_error(msg, sizeof(msg), text);
        STAT_INC(&b->worker->stats, errors_unavailable);
        route_part(req, pd->part, msg, n);
        return;
    }
    case ROUTE_DROP:
    case ROUTE_QUEUED:
        request_reply_consumed(req);
        return;
    }
    assert(!"unknown route kind");
}

static void route_push(struct backend *b, const char *frame, size_t len)
{
    struct client *c = b->owner;
    if (!c) return; /* released: nobody takes its frames */
    assert(c->pubsub.pin[b->instance] == b);
    switch (pubsub_on_frame(&c->pubsub, b->instance, frame, len)) {
    case PUBSUB_FRAME_CLIENT:
        conn_out(c, frame, len);
        return;
    case PUBSUB_FRAME_MARKER:
        return;
    case PUBSUB_FRAME_SETTLED:
        /* this command's confirmations are all in: the client's next commands may go */
        if (!c->resp3) session_set_subscribed(&c->session, pubsub_subscribed(&c->pubsub));
        conn_wake(c);
        return;
    }
}

static int route_may_keep(struct backend *b, const struct pending *pd, size_t partial)
{
    if (!pd) return !(b->owner && conn_output_over(b->owner, partial)); /* a subscriber connection */
    struct client *c = pd->req->client;
    return pd->kind != ROUTE_DROP && c && !c->closed && !conn_output_over(c, partial);
}

static void route_owner_lost(struct backend *b, struct client *c)
{
    if (c->block_pin == b) {
        (void)blocked_remove(&c->worker->proxy->blocked, c->id);
        c->block_pin = NULL; /* its request got -UNAVAILABLE; no other state */
        return;
    }
    if (c->watch_pin == b) {
        /* the WATCH is gone: EXEC must not run as if nothing were watched */
        c->watch_pin = NULL;
        c->watch_lost = 1;
        return;
    }
    int inst = pubsub_instance_of(&c->pubsub, b);
    if (inst < 0) return;
    int had = pubsub_lost(&c->pubsub, inst);
    char text[128], msg[ERROR_REPLY_MAX];
    replies_unavailable(text, sizeof(text), c->worker->cfg->instance_names[inst]);
    conn_out(c, msg, replies_error(msg, sizeof(msg), text));
    if (!c->resp3) session_set_subscribed(&c->session, pubsub_subscribed(&c->pubsub));
    /* its subscriptions are gone: close after the error, never lose messages silently */
    if (had) c->closing = 1;
    conn_wake(c);
}

static const struct backend_hooks hooks = {
    .deliver = route_deliver,
    .fail = route_fail,
    .push = route_push,
    .may_keep = route_may_keep,
    .owner_lost = route_owner_lost,
};

const struct backend_hooks *router_hooks(void)
{
    return &hooks;
}
