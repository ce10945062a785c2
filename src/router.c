/* router.c: turns a FORWARD plan into bytes on the instance's backend connection. */
#include "proxy.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

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
        stage_add(out, frame, p->frame_len);
        return;
    }
    char hdr[32];
    hdr[0] = '*';
    size_t n = 1 + format_ll(hdr + 1, (long long)(p->argc + plan->nappend));
    hdr[n++] = '\r';
    hdr[n++] = '\n';
    stage_add(out, hdr, n);
    if (!p->is_inline && !plan->ttl.getex) {
        stage_add(out, frame + p->header_len, p->frame_len - p->header_len);
    } else {
        for (size_t i = 0; i < p->argc; i++) {
            if (i == 0 && plan->ttl.getex) stage_add_bulk(out, STR_AND_LEN("GETEX"));
            else stage_add_bulk(out, resp_arg_ptr(p, frame, i), p->args[i].len);
        }
    }
    for (size_t i = 0; i < plan->nappend; i++) stage_add_bulk(out, plan->append[i], plan->append_len[i]);
}

/* PEXPIRE key ms [NX | XX LT] for one ttl_fix. */
static void write_fix(struct bytebuf *out, const struct client *c, const char *frame, const struct ttl_fix *f)
{
    char ms[24];
    size_t n = format_ll(ms, (long long)f->ttl_ms);
    if (f->mode == TTL_FIX_RESET) stage_add(out, STR_AND_LEN("*3\r\n$7\r\nPEXPIRE\r\n"));
    else if (f->mode == TTL_FIX_NX) stage_add(out, STR_AND_LEN("*4\r\n$7\r\nPEXPIRE\r\n"));
    else stage_add(out, STR_AND_LEN("*5\r\n$7\r\nPEXPIRE\r\n"));
    stage_add_bulk(out, resp_arg_ptr(&c->parser, frame, f->argi), c->parser.args[f->argi].len);
    stage_add_bulk(out, ms, (size_t)n);
    if (f->mode == TTL_FIX_NX) {
        stage_add_bulk(out, STR_AND_LEN("NX"));
    } else if (f->mode == TTL_FIX_CAP) {
        stage_add_bulk(out, STR_AND_LEN("XX")); /* only a key that has a TTL: none is given */
        stage_add_bulk(out, STR_AND_LEN("LT"));
    }
}

static void request_unavailable(struct client *c, struct request *req, int instance)
{
    char msg[128];
    int n = snprintf(msg, sizeof(msg), "-" UNAVAILABLE_FMT "\r\n", c->worker->cfg->instance_names[instance]);
    STAT_INC(&c->worker->stats, errors_unavailable);
    request_complete(req, msg, (size_t)n);
}

/*
 * Everything for one request goes into the connection's output in one go, so no
 * other client's command can fall between keygate's MULTI and EXEC:
 *
 *   [MULTI]  client command  [PEXPIRE k D NX ...]  [EXEC]
 *   DROP     PASS | QUEUED   DROP ...              EXEC_PICK
 */
void router_forward(struct client *c, struct backend *b, struct request *req, const struct plan *plan,
                    const char *frame)
{
    struct worker *w = c->worker;
    if (!b || b->state == BACKEND_DOWN) {
        request_unavailable(c, req, plan->instance);
        return;
    }
    struct bytebuf *out = backend_stage(b);
    int wrap = plan->ttl.wrap;
    if (wrap) {
        stage_add(out, STR_AND_LEN("*1\r\n$5\r\nMULTI\r\n"));
        backend_expect(b, req, PENDING_DROP);
    }
    write_frame(out, c, plan, frame);
    backend_expect(b, req, wrap ? PENDING_QUEUED : PENDING_PASS);
    for (size_t i = 0; i < plan->ttl.nfix; i++) {
        write_fix(out, c, frame, &plan->ttl.fix[i]);
        backend_expect(b, req, PENDING_DROP);
    }
    if (wrap) {
        stage_add(out, STR_AND_LEN("*1\r\n$4\r\nEXEC\r\n"));
        backend_expect(b, req, PENDING_EXEC_PICK);
    }
    STAT_INC(&w->stats, commands_forwarded);
    if (plan->nappend || plan->ttl.nfix) STAT_INC(&w->stats, ttl_injected);
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
}

/*
 * MGET/DEL/UNLINK/EXISTS/TOUCH across instances: one sub-command per instance with
 * that instance's keys, in the client's order; router_merge puts the replies together.
 */
void router_forward_split(struct client *c, struct request *req, struct plan *plan, const char *frame)
{
    struct worker *w = c->worker;
    const struct resp_parser *p = &c->parser;
    int count[CONFIG_MAX_INSTANCES] = {0};
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
    for (int k = 0; k < req->nparts; k++) conns[k] = client_backend(c, req->parts[k].instance);
    for (int k = 0; k < req->nparts; k++) {
        int inst = req->parts[k].instance;
        struct backend *b = conns[k];
        if (!b) continue;
        struct bytebuf *out = backend_stage(b);
        char hdr[32];
        int n = snprintf(hdr, sizeof(hdr), "*%d\r\n", 1 + count[inst]);
        stage_add(out, hdr, (size_t)n);
        stage_add_bulk(out, resp_arg_ptr(p, frame, 0), p->args[0].len);
        for (size_t i = 1; i < p->argc; i++)
            if (req->key_instance[i] == inst) stage_add_bulk(out, resp_arg_ptr(p, frame, i), p->args[i].len);
        backend_expect(b, req, PENDING_PART);
        struct pending *tail = &b->fifo[(b->fifo_head + b->fifo_count - 1) % b->fifo_cap];
        assert(tail->req == req && tail->kind == PENDING_PART && k <= UINT8_MAX);
        tail->part = (uint8_t)k;
        for (size_t f = 0; f < plan->ttl.nfix; f++) {
            if (req->key_instance[plan->ttl.fix[f].argi] != inst) continue;
            write_fix(out, c, frame, &plan->ttl.fix[f]);
            backend_expect(b, req, PENDING_DROP);
        }
        STAT_INC(&w->stats, commands_forwarded);
    }
    /* parts whose instance is down fail at once; the merge reports it */
    char msg[128];
    for (int k = 0; k < req->nparts; k++) {
        if (conns[k]) continue;
        int n = snprintf(msg, sizeof(msg), "-" UNAVAILABLE_FMT "\r\n", w->cfg->instance_names[req->parts[k].instance]);
        req->parts[k].reply = xmemdup(msg, (size_t)n);
        req->parts[k].len = (size_t)n;
        STAT_INC(&w->stats, errors_unavailable);
        assert(req->parts_left > 0);
        if (--req->parts_left == 0) router_merge(req);
    }
}

void router_merge(struct request *req)
{
    assert(req->parts_left == 0 && req->nparts > 0);
    /* any failed part: the client gets that error, never a silent partial result */
    for (int k = 0; k < req->nparts; k++) {
        const struct request_part *pt = &req->parts[k];
        assert(pt->reply && pt->len > 0); /* every part holds a framed reply or its -UNAVAILABLE */
        if (pt->reply[0] == '-') {
            request_complete(req, pt->reply, pt->len);
            return;
        }
    }
    struct evbuffer *out = xevbuffer_new();
    if (req->merge == MERGE_SUM) {
        long long sum = 0;
        for (int k = 0; k < req->nparts; k++) {
            long long v = 0;
            const struct request_part *pt = &req->parts[k];
            if (pt->reply[0] == ':' && pt->len > 3) (void)resp_parse_ll(pt->reply + 1, pt->len - 3, &v);
            sum += v;
        }
        evbuffer_add_printf(out, ":%lld\r\n", sum);
    } else {
        const char *cursor[CONFIG_MAX_INSTANCES] = {0};
        const char *end[CONFIG_MAX_INSTANCES] = {0};
        int part_of[CONFIG_MAX_INSTANCES] = {0};
        for (int k = 0; k < req->nparts; k++) {
            long long n = 0;
            cursor[k] = resp_array_first(req->parts[k].reply, req->parts[k].len, &n);
            end[k] = req->parts[k].reply + req->parts[k].len;
            part_of[req->parts[k].instance] = k;
        }
        evbuffer_add_printf(out, "*%zu\r\n", req->argc - 1);
        for (size_t i = 1; i < req->argc; i++) {
            int k = part_of[(int)req->key_instance[i]];
            struct resp_scanner sc;
            resp_scanner_reset(&sc);
            long long n = cursor[k] ? resp_scan_reply(&sc, cursor[k], (size_t)(end[k] - cursor[k])) : -1;
            if (n <= 0) {
                evbuffer_free(out);
                request_complete(req, STR_AND_LEN("-ERR keygate could not merge the MGET replies\r\n"));
                return;
            }
            evbuffer_add(out, cursor[k], (size_t)n);
            cursor[k] += n;
        }
    }
    size_t len = evbuffer_get_length(out);
    request_complete(req, (const char *)evbuffer_pullup(out, -1), len);
    evbuffer_free(out);
}
