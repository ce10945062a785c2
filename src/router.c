/* router.c: writes each request for a backend (a kept send is staged, and again, by keptsend.c) and interprets what the backend answers. */
#include "router.h"
#include "nodes.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "frames.h"
#include "keptsend.h"
#include "nearcache.h"
#include "parts.h"
#include "pins.h"
#include "tracker.h"
#include "replcommit.h"
#include "replies.h"
#include "resend.h"
#include "scripts.h"
#include "slotmap.h"

_Static_assert(CONFIG_MAX_INSTANCES <= REPLIES_MAX_PARTS, "a split command has one part per instance");
_Static_assert(PLAN_MAX_PARTS <= REPLIES_MAX_PARTS && PLAN_MAX_PARTS <= UINT16_MAX, "a part index fits everywhere");

_Static_assert((int)REPLIES_MERGE_VALUES == (int)MERGE_MGET && (int)REPLIES_MERGE_SUM == (int)MERGE_SUM &&
                   (int)REPLIES_MERGE_CONCAT == (int)MERGE_KEYS && (int)REPLIES_MERGE_SAME == (int)MERGE_SCRIPT_LOAD &&
                   (int)REPLIES_MERGE_AND == (int)MERGE_SCRIPT_EXISTS,
               "replies_merge takes plan_merge's values");
_Static_assert((int)ROUTE_REPL_SYNC == (int)REPLCOMMIT_KIND_SYNC && (int)ROUTE_REPL_WAIT == (int)REPLCOMMIT_KIND_WAIT,
               "replcommit's own entries keep the router's kinds");

/* One more reply owed on b for req, used as `kind`; while req records a send (a cluster
 * request, router_out), the entry is recorded and owed once the send is staged (keptsend_stage). */
void router_expect(struct backend *b, struct request *req, enum route_kind kind, int part)
{
    assert(part >= 0 && part <= UINT16_MAX);
    struct request_send *s = req->recording;
    if (__builtin_expect(s != NULL, 0)) {
        if (s->nentries == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 8;
            s->entries = xrealloc(s->entries, (size_t)s->cap * sizeof(*s->entries));
        }
        s->entries[s->nentries++] =
            (struct request_entry){.kind = (uint8_t)kind, .part = (uint16_t)part, .end = (uint32_t)s->bytes.len};
        return;
    }
    backend_expect(b, (struct pending){.req = req, .kind = (uint8_t)kind, .part = (uint16_t)part});
    request_expect(req);
}

/* Is a request for `instance` on b kept (sent again after a redirect)? On a cluster's shared
 * connections, and when no connection is known yet (b NULL: it waits for the slot's owner). */
int router_keeps(const struct client *c, const struct backend *b, int instance)
{
    return nodes_may_move(c->worker, instance) && !(b && b->pinned);
}

/* The buffer a request for (instance, slot) is written to: b's staging buffer, or when keep
 * (a shared cluster connection, router_keeps; b may then be NULL: no owner known yet) the kept
 * send of part `part`, which router_out_done stages. router_out: keep as router_keeps says. */
static struct bytebuf *route_out_kept(struct client *c, struct backend *b, struct request *req, int keep, int instance,
                                      int slot, int part)
{
    if (__builtin_expect(!keep, 1)) {
        assert(b != NULL); /* callers send nowhere else without a connection */
        return backend_stage(b);
    }
    if (!req->sends) {
        req->nsends = req->nparts > 0 ? req->nparts : 1;
        req->sends = req->nsends == 1 ? &req->send1 : xcalloc((size_t)req->nsends, sizeof(*req->sends));
    }
    assert(part < req->nsends);
    struct request_send *s = &req->sends[part];
    assert(s->nentries == 0);
    s->req = req;
    s->instance = instance;
    s->slot = slot < 0 ? -1 : slot;
    req->recording = s;
    return &s->bytes;
}

struct bytebuf *router_out(struct client *c, struct backend *b, struct request *req, int instance, int slot, int part)
{
    return route_out_kept(c, b, req, router_keeps(c, b, instance), instance, slot, part);
}

/* The request written since router_out goes: staged on b, or (b NULL) after a wait. */
void router_out_done(struct request *req, struct backend *b)
{
    struct request_send *s = req->recording;
    if (__builtin_expect(!s, 1)) return;
    req->recording = NULL;
    static const char multi[] = "*1\r\n$5\r\nMULTI\r\n";
    s->atomic =
        s->nentries > 1 && s->bytes.len >= sizeof(multi) - 1 && memcmp(s->bytes.p, multi, sizeof(multi) - 1) == 0;
    if (b && b->state != BACKEND_DOWN && TAILQ_EMPTY(&req->client->resends)) {
        keptsend_stage(req, s, b);
        return;
    }
    request_expect(req); /* stands for the send until it goes (keptsend_again) */
    s->wait = 0;
    keptsend_again(req, s);
}

void router_unavailable(struct client *c, struct request *req, int instance)
{
    char text[128];
    replies_unavailable(text, sizeof(text), c->worker->cfg->instance_names[instance]);
    request_error(req, text);
}

/* router_unavailable for a request whose instance is down: the text says why when the reason is
 * one to act on (backend_down_why: a host name that does not resolve). */
static void route_down(struct client *c, struct request *req, int instance)
{
    char text[256];
    replies_unavailable_why(text, sizeof(text), c->worker->cfg->instance_names[instance],
                            nodes_down_why(c->worker, instance));
    request_error(req, text);
}

struct backend *router_conn_for(struct client *c, int instance, int slot)
{
    if (c->watch_pin && c->session.watch_instance == instance && (slot < 0 || slot == c->session.watch_slot))
        return c->watch_pin;
    return nodes_conn(c->worker, instance, &(struct node_want){.slot = slot, .resp3 = c->resp3, .client_id = c->id});
}

void router_stop(struct worker *w)
{
    replcommit_stop(w);
}

static __attribute__((noinline)) void route_unblock_client(struct request *req)
{
    if (req->client) pins_unblock(req->client);
}

/* The reply of a request sent on the client's blocking pin: the pin is back in the pool. */
static inline void route_unblock(struct request *req)
{
    if (__builtin_expect(req->blocking, 0)) route_unblock_client(req);
}

/*
 * A command of c going to an instance whose nodes move (a cluster, a Sentinel primary; scripts.h):
 * an EVAL's or EVAL_RO's body is remembered, and SCRIPT LOAD's (a cluster's SCRIPT LOAD reaches
 * every primary through fanout_split instead); a lone EVALSHA's send s (alone, or in
 * keygate's own MULTI wrap; NULL: none, or the command is in the client's MULTI) notes the
 * script's name, which its node's -NOSCRIPT may load (keptsend_intercept): a promoted replica lacks
 * what was loaded on its old primary (Redis 7.0 does not replicate SCRIPT LOAD).
 */
static void route_note_script(const struct client *c, const char *frame, struct request_send *s)
{
    const struct resp_parser *p = &c->parser;
    if (p->argc < 2) return;
    unsigned char first = (unsigned char)(resp_arg_ptr(p, frame, 0)[0] | 0x20); /* EVAL*, SCRIPT, or none */
    if (__builtin_expect(first != 'e' && first != 's', 1)) return;
    enum scripts_command sc = scripts_command_of(resp_arg_ptr(p, frame, 0), p->args[0].len);
    if (__builtin_expect(sc == SCRIPTS_OTHER, 1)) return;
    const char *arg = resp_arg_ptr(p, frame, 1);
    if (sc == SCRIPTS_EVAL)
        (void)scripts_remember(&c->worker->proxy->scripts, arg, p->args[1].len); /* one too large: not kept */
    else if (sc == SCRIPTS_SCRIPT && p->argc == 3 && p->args[1].len == 4 && strncasecmp(arg, "load", 4) == 0)
        (void)scripts_remember(&c->worker->proxy->scripts, resp_arg_ptr(p, frame, 2), p->args[2].len);
    else if (sc == SCRIPTS_EVALSHA && s && scripts_sha_parse(arg, p->args[1].len, s->sha) == 0)
        s->script = ROUTE_SHA_EVALSHA;
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
    int keep = router_keeps(c, b, plan->instance);
    if (!keep && (!b || b->state == BACKEND_DOWN)) {
        route_unblock(req);
        route_down(c, req, plan->instance);
        return;
    }
    /* on a cluster, a command under WATCH starts on the WATCH's node and follows a redirect like
     * any other (the transaction then gets EXEC's null reply: route_exec_reply); WATCH itself
     * stays on its connection (route_watch_reply) */
    if (__builtin_expect(b && b == c->watch_pin && plan->flow == FLOW_SHARED, 0))
        keep = nodes_may_move(w, plan->instance);
    /* a blocking command on a cluster is kept too: redirected, it goes again on a new pin (keptsend.c's kept_repin) */
    if (__builtin_expect(plan->flow == FLOW_BLOCK && b && b == c->block_pin, 0))
        keep = nodes_may_move(w, plan->instance);
    req->watching = plan->flow == FLOW_WATCH;
    req->replicas = (uint8_t)plan->replicas;
    req->xadds = plan->ttl.wrap ? (uint16_t)plan->inval.n : 0;
    struct bytebuf *out = route_out_kept(c, b, req, keep, plan->instance, plan->slot, 0);
    if (plan->wait_sync) { /* the PUBLISH before a WAIT of the client's (replcommit.h) */
        bytebuf_add(out, STR_AND_LEN(REPLCOMMIT_SYNC));
        router_expect(b, req, ROUTE_DROP, 0);
    }
    int wrap = plan->ttl.wrap;
    if (wrap) {
        bytebuf_add(out, STR_AND_LEN("*1\r\n$5\r\nMULTI\r\n"));
        router_expect(b, req, ROUTE_DROP, 0);
    }
    frames_command(out, &c->parser, c->resp3, plan, frame);
    router_expect(b, req, wrap ? ROUTE_QUEUED : ROUTE_PASS, 0);
    if (keep) route_note_script(c, frame, req->recording);
    for (size_t i = 0; i < plan->ttl.nfix; i++) {
        frames_fix(out, &c->parser, frame, &plan->ttl.fix[i]);
        router_expect(b, req, ROUTE_DROP, 0);
    }
    for (uint32_t i = 0; i < plan->inval.n; i++) {
        frames_inval(out, &c->parser, frame, &plan->inval.key[i]);
        router_expect(b, req, ROUTE_DROP, 0);
    }
    if (wrap) {
        bytebuf_add(out, STR_AND_LEN("*1\r\n$4\r\nEXEC\r\n"));
        router_expect(b, req, ROUTE_EXEC_PICK, 0);
    }
    router_out_done(req, b);
    STAT_INC(&w->stats, commands_forwarded);
    if (plan->nappend || plan->ttl.nfix) stats_ttl_injected(&w->stats, &req->mark);
    policy_budget_forwarded(plan);
}

void router_forward_bytes(struct client *c, struct backend *b, int instance, struct request *req, const char *bytes,
                          size_t len)
{
    if (!router_keeps(c, b, instance) && (!b || b->state == BACKEND_DOWN)) {
        route_down(c, req, instance);
        return;
    }
    bytebuf_add(router_out(c, b, req, instance, -1, 0), bytes, len);
    router_expect(b, req, ROUTE_PASS, 0);
    router_out_done(req, b);
    STAT_INC(&c->worker->stats, commands_forwarded);
}

void router_forward_fill(struct client *c, struct backend *b, struct request *req, const struct plan *plan,
                         const char *frame)
{
    if (!b || b->state == BACKEND_DOWN) {
        route_down(c, req, plan->instance);
        return;
    }
    char mode = nearcache_fill_mode(req);
    /* a command naming more members or fields than Lua's unpack takes reads the whole value */
    if (mode == 'm' && c->parser.argc > 2 + NCPOLICY_FILL_MAX_NAMED) mode = 'a';
    frames_fill(backend_stage(b), nearcache_fill_limit(req), mode, &c->parser, frame,
                resp_arg_ptr(&c->parser, frame, 1), c->parser.args[1].len, 2, mode == 'm' ? c->parser.argc : 0);
    router_expect(b, req, ROUTE_FILL, 0);
    STAT_INC(&c->worker->stats, commands_forwarded);
}

void router_forward_prefetch(struct client *c, struct backend *b, struct request *req)
{
    size_t n = nearcache_prefetch_count(req);
    if (!b || b->state == BACKEND_DOWN || n == 0) return; /* the MGET itself answered -UNAVAILABLE */
    struct bytebuf *out = backend_stage(b);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *key = nearcache_prefetch_key(req, i, &len);
        frames_fill(out, nearcache_fill_limit(req), 'n', &c->parser, NULL, key, len, 0, 0);
        router_expect(b, req, ROUTE_PREFETCH, (int)i);
    }
}

void router_write_queued(struct bytebuf *out, const struct client *c, const struct plan *plan, const char *frame,
                         struct bytebuf *keep)
{
    static const uint8_t client_reply = REPLIES_KEEP_CLIENT, injected = REPLIES_KEEP_INJECTED, xadd = REPLIES_KEEP_XADD;
    frames_queued(out, &c->parser, c->resp3, plan, frame); /* the command, its fixes, its XADDs after its write */
    policy_budget_forwarded(plan); /* at queue time: a DISCARDed write stays counted (the estimate errs high) */
    bytebuf_add(keep, &client_reply, 1);
    if (plan->instance >= 0 && nodes_may_move(c->worker, plan->instance)) /* an EVAL's body is remembered */
        route_note_script(c, frame, NULL);
    for (size_t i = 0; i < plan->ttl.nfix; i++) bytebuf_add(keep, &injected, 1);
    for (uint32_t i = 0; i < plan->inval.n; i++) bytebuf_add(keep, &xadd, 1);
}

void router_exec(struct client *c, struct backend *b, struct request *req, int instance, int slot)
{
    struct bytebuf *out = router_out(c, b, req, instance, slot, 0);
    bytebuf_add(out, STR_AND_LEN("*1\r\n$5\r\nMULTI\r\n"));
    router_expect(b, req, ROUTE_DROP, 0);
    bytebuf_add(out, c->multi_buf.p, c->multi_buf.len);
    for (size_t i = 0; i < c->multi_keep.len; i++) router_expect(b, req, ROUTE_QUEUED, 0); /* each +QUEUED */
    bytebuf_add(out, STR_AND_LEN("*1\r\n$4\r\nEXEC\r\n"));
    router_expect(b, req, ROUTE_EXEC_FILTER, 0);
    router_out_done(req, b);
    req->exec_keep = c->multi_keep; /* the request owns the flags now */
    memset(&c->multi_keep, 0, sizeof(c->multi_keep));
    STAT_INC(&c->worker->stats, commands_forwarded);
}

void router_unwatch(struct client *c, struct request *req)
{
    assert(c->watch_pin);
    bytebuf_add(backend_stage(c->watch_pin), STR_AND_LEN("*1\r\n$7\r\nUNWATCH\r\n"));
    router_expect(c->watch_pin, req, ROUTE_DROP, 0);
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

/* ---- the hooks: what the backends report ---- */

/* The reply (or failure) that answers a request: a write's near-cache keys are evicted again. */
static void route_writes_answered(struct request *req, enum route_kind kind)
{
    if (req->nc && kind != ROUTE_DROP && kind != ROUTE_QUEUED && kind != ROUTE_FILL && kind != ROUTE_PREFETCH &&
        kind != ROUTE_SCRIPT_LOAD)
        nearcache_write_replied(req);
    if (req->track.len && kind != ROUTE_DROP && kind != ROUTE_QUEUED && kind != ROUTE_FILL && kind != ROUTE_PREFETCH &&
        kind != ROUTE_SCRIPT_LOAD) /* keygate's SCRIPT LOAD before an EVALSHA sent again: the write has not run */
        tracker_write_replied(req);
}

/* A redirect answered on b (a dedicated connection, which does not follow it): a -MOVED updates the map. */
static void route_learn_move(struct backend *b, const struct slotmap_redirect *rd)
{
    if (rd->kind != SLOTMAP_MOVED) return;
    const char *host;
    int port;
    backend_address(b, &host, &port);
    nodes_moved(b->worker, b->instance, rd->slot, rd->host[0] ? rd->host : host, rd->port);
}

/*
 * WATCH on a cluster runs on a dedicated connection to its slot's node. Answered -MOVED or -ASK
 * (or -TRYAGAIN, -CLUSTERDOWN: it did not run), nothing is watched there: the map learns the
 * move, the client gets +OK as from any WATCH, and its EXEC, sent to that node, is refused
 * there and answers the null reply (route_exec_moved): the client retries, as after any broken
 * WATCH, and its next WATCH goes to the new owner. 1 when answered here.
 */
static int route_watch_moved(struct backend *b, struct request *req, const char *reply, size_t len)
{
    struct slotmap_redirect rd;
    enum resend_kind kind = resend_classify(reply, len, 1);
    int moved = (kind == RESEND_MOVED || kind == RESEND_ASK) && slotmap_parse_redirect(reply, len, &rd);
    if (!moved && (kind == RESEND_MOVED || kind == RESEND_ASK || !resend_is_cluster_refusal(kind))) return 0;
    if (!nodes_may_move(b->worker, b->instance)) return 0;
    if (moved) route_learn_move(b, &rd);
    request_answer(req, STR_AND_LEN("+OK\r\n"));
    return 1;
}

/*
 * The client's EXEC on a cluster's WATCH connection, refused (-EXECABORT) because a command in
 * it was redirected or told to retry (its slot moved away from the WATCH's node, or is moving):
 * nothing ran, and the WATCH cannot hold on another node, so the client gets the null reply of
 * a broken WATCH and retries. 1 when answered here.
 */
static int route_exec_moved(struct backend *b, struct request *req, const char *reply)
{
    if (reply[0] != '-' || !req->queued_error || !b->pinned || !nodes_may_move(b->worker, b->instance)) return 0;
    enum resend_kind kind = resend_classify(req->queued_error, req->queued_error_len, 1);
    struct slotmap_redirect rd;
    int redirected = (kind == RESEND_MOVED || kind == RESEND_ASK) &&
                     slotmap_parse_redirect(req->queued_error, req->queued_error_len, &rd);
    if (!redirected &&
        (kind == RESEND_MOVED || kind == RESEND_ASK ||
         (!resend_is_cluster_refusal(kind) &&
          resend_decide(kind, nodes_follow_failover(b->worker, b->instance), req->blocking) != RESEND_WAIT)))
        return 0; /* (a NOSCRIPT, RESEND_LOAD, is no refusal of the transaction either) */
    if (redirected) route_learn_move(b, &rd);
    struct client *c = req->client;
    if (c && c->resp3)
        request_answer(req, STR_AND_LEN("_\r\n"));
    else
        request_answer(req, STR_AND_LEN("*-1\r\n"));
    return 1;
}

/*
 * A near-cache write whose XADD failed in its EXEC (the stream key holds another type): the write
 * ran, but no keygate learns of it, so the client is told so instead of +OK (its readers treat
 * the broken stream as a gap and serve nothing from the instance until it is repaired). 1 when
 * answered here.
 */
static int route_xadd_failed(struct backend *b, struct request *req, const char *reply, size_t len, const uint8_t *keep,
                             size_t nkeep)
{
    const char *err;
    size_t err_len;
    if (!replies_exec_xadd_failed(reply, len, keep, nkeep, req->xadds, &err, &err_len)) return 0;
    char text[320];
    snprintf(text, sizeof(text),
             "INVALIDATION the write ran on '%s', but its near-cache invalidation failed (%.*s): the near "
             "cache of that instance is off until its stream key is repaired",
             b->worker->cfg->instance_names[b->instance], (int)(err_len > 120 ? 120 : err_len), err);
    STAT_INC(&b->worker->stats, near_cache_xadd_failures);
    request_answer_error(req, text);
    return 1;
}

/* Part `part` of req answered from b: held while a replicas=N part waits for its WAIT, else kept. */
static void route_part_reply(struct backend *b, struct request *req, int part, const char *reply, size_t len)
{
    int replicas = req->parts[part].replicas;
    if (__builtin_expect(replicas, 0) && replcommit_hold(b, req, part, replicas, reply, len)) return;
    parts_answer(req, part, reply, len);
}

static void route_deliver(struct backend *b, const struct pending *pd, const char *reply, size_t len)
{
    struct request *req = pd->req;
    if (__builtin_expect(!req, 0)) { /* the router's own: replicas=N's WAIT */
        replcommit_reply(b, pd, reply, len);
        return;
    }
    struct request_send *s = keptsend_of(req, pd);
    if (__builtin_expect(s != NULL, 0) && keptsend_intercept(b, s, reply, len, 0)) return;
    route_writes_answered(req, (enum route_kind)pd->kind);
    switch ((enum route_kind)pd->kind) {
    case ROUTE_ASKING:
    case ROUTE_SCRIPT_LOAD: /* (an error: the EVALSHA that follows answers for it) */
        request_reply_consumed(req);
        return;
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
        if (__builtin_expect(req->xadds > 0, 0) && route_xadd_failed(b, req, reply, len, NULL, 0)) return;
        replies_exec_pick(reply, len, req->queued_error, req->queued_error_len, &pick, &pick_len);
        if (__builtin_expect(req->replicas, 0) && replcommit_hold(b, req, -1, req->replicas, pick, pick_len)) return;
        request_answer(req, pick, pick_len);
        return;
    }
    case ROUTE_EXEC_FILTER: {
        if (route_exec_moved(b, req, reply)) return;
        if (route_xadd_failed(b, req, reply, len, (const uint8_t *)req->exec_keep.p, req->exec_keep.len)) return;
        struct bytebuf out = {0};
        int filtered =
            replies_exec_filter(reply, len, (const uint8_t *)req->exec_keep.p, req->exec_keep.len, &out) == 0;
        if (!filtered) /* nil (WATCH) or EXECABORT: as it came, nothing ran */
            request_answer(req, reply, len);
        else if (!(req->replicas && out.len > 0 && replcommit_hold(b, req, -1, req->replicas, out.p, out.len)))
            request_answer(req, out.p, out.len);
        bytebuf_free(&out);
        return;
    }
    case ROUTE_PART:
        route_part_reply(b, req, pd->part, reply, len);
        return;
    case ROUTE_PART_PICK: {
        const char *pick;
        size_t pick_len;
        replies_exec_pick(reply, len, req->queued_error, req->queued_error_len, &pick, &pick_len);
        route_part_reply(b, req, pd->part, pick, pick_len);
        return;
    }
    case ROUTE_PASS:
        route_unblock(req);
        if (__builtin_expect(req->watching, 0) && route_watch_moved(b, req, reply, len)) return;
        if (__builtin_expect(req->replicas, 0) && replcommit_hold(b, req, -1, req->replicas, reply, len)) return;
        request_answer(req, reply, len);
        return;
    case ROUTE_REPL_SYNC:
    case ROUTE_REPL_WAIT:
        break; /* never with a request */
    }
    assert(!"unknown route kind");
}

static void route_fail(struct backend *b, const struct pending *pd)
{
    struct request *req = pd->req;
    if (__builtin_expect(!req, 0)) { /* the router's own: replicas=N's WAIT, lost */
        replcommit_reply(b, pd, NULL, 0);
        return;
    }
    struct request_send *s = keptsend_of(req, pd);
    if (__builtin_expect(s != NULL, 0) && keptsend_intercept(b, s, NULL, 0, pd->unsent)) return;
    /* a request written to a sentinel instance's primary, its connection lost (a switch, a death) */
    if (pd->kind != ROUTE_DROP && pd->kind != ROUTE_QUEUED && pd->kind != ROUTE_ASKING &&
        pd->kind != ROUTE_SCRIPT_LOAD && nodes_follow_failover(b->worker, b->instance))
        STAT_INC(&b->worker->stats, switch_failures);
    char text[256];
    if (b->timed_out)
        replies_timed_out(text, sizeof(text), b->worker->cfg->instance_names[b->instance]);
    else
        replies_unavailable_why(text, sizeof(text), b->worker->cfg->instance_names[b->instance],
                                nodes_down_why(b->worker, b->instance));
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
        parts_answer(req, pd->part, msg, n);
        return;
    }
    case ROUTE_DROP:
    case ROUTE_QUEUED:
    case ROUTE_ASKING:
    case ROUTE_SCRIPT_LOAD:
        request_reply_consumed(req);
        return;
    case ROUTE_REPL_SYNC:
    case ROUTE_REPL_WAIT:
        break; /* never with a request */
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
    if (!pd->req) return 1;                                             /* the router's own (a WAIT) */
    struct client *c = pd->req->client;
    return pd->kind != ROUTE_DROP && c && !c->closed && !conn_output_over(c, partial);
}

static const struct backend_hooks hooks = {
    .deliver = route_deliver,
    .fail = route_fail,
    .push = route_push,
    .may_keep = route_may_keep,
    .owner_lost = pins_owner_lost,
    .lost = nodes_lost, /* the node model reads where the slots are again */
    .slots = nodes_slots_reply,
};

const struct backend_hooks *router_hooks(void)
{
    return &hooks;
}
