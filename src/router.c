/* router.c: turns a FORWARD plan into bytes on the instance's backend connection. */
#include "proxy.h"

#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

/* Append "$len\r\n<arg>\r\n" to out. */
static void add_bulk(struct evbuffer *out, const char *arg, size_t len)
{
    char hdr[32];
    int n = snprintf(hdr, sizeof(hdr), "$%zu\r\n", len);
    evbuffer_add(out, hdr, (size_t)n);
    evbuffer_add(out, arg, len);
    evbuffer_add(out, "\r\n", 2);
}

/*
 * Write the client's frame to `out`, with plan->append spliced on the end:
 *   unchanged multibulk   -> the frame's bytes as they came (one copy)
 *   multibulk + appended  -> new "*N" header + the frame's arguments + the new ones
 *   inline, or GET->GETEX -> re-encoded as multibulk
 */
static void write_frame(struct evbuffer *out, const struct client *c, const struct plan *plan, const char *frame)
{
    const struct resp_parser *p = &c->parser;
    if (!p->is_inline && plan->nappend == 0 && !plan->ttl.getex) {
        evbuffer_add(out, frame, p->frame_len);
        return;
    }
    char hdr[32];
    int n = snprintf(hdr, sizeof(hdr), "*%zu\r\n", p->argc + plan->nappend);
    evbuffer_add(out, hdr, (size_t)n);
    if (!p->is_inline && !plan->ttl.getex) {
        evbuffer_add(out, frame + p->header_len, p->frame_len - p->header_len);
    } else {
        for (size_t i = 0; i < p->argc; i++) {
            if (i == 0 && plan->ttl.getex) add_bulk(out, "GETEX", 5);
            else add_bulk(out, resp_arg_ptr(p, frame, i), p->args[i].len);
        }
    }
    for (size_t i = 0; i < plan->nappend; i++) add_bulk(out, plan->append[i], plan->append_len[i]);
}

/* PEXPIRE key ms [NX] for one ttl_fix. */
static void write_fix(struct evbuffer *out, const struct client *c, const char *frame, const struct ttl_fix *f)
{
    char ms[24];
    int n = snprintf(ms, sizeof(ms), "%lld", (long long)f->ttl_ms);
    evbuffer_add(out, f->mode == TTL_FIX_NX ? "*4\r\n$7\r\nPEXPIRE\r\n" : "*3\r\n$7\r\nPEXPIRE\r\n", 17);
    add_bulk(out, resp_arg_ptr(&c->parser, frame, f->argi), c->parser.args[f->argi].len);
    add_bulk(out, ms, (size_t)n);
    if (f->mode == TTL_FIX_NX) add_bulk(out, "NX", 2);
}

/*
 * Everything for one request goes into the connection's output in one go, so no
 * other client's command can fall between keygate's MULTI and EXEC:
 *
 *   [MULTI]  client command  [PEXPIRE k D NX ...]  [EXEC]
 *   DROP     PASS | QUEUED   DROP ...              EXEC_PICK
 */
void router_forward(struct client *c, struct request *req, const struct plan *plan, const char *frame)
{
    struct worker *w = c->worker;
    struct backend *b = backend_for(w, plan->instance, c->id);
    if (!b) {
        char msg[128];
        int n = snprintf(msg, sizeof(msg), "-UNAVAILABLE instance '%s' is unreachable\r\n",
                         w->cfg->instance_names[plan->instance]);
        STAT_INC(&w->stats, errors_unavailable);
        request_complete(req, msg, (size_t)n);
        return;
    }
    struct evbuffer *out = bufferevent_get_output(b->bev);
    int wrap = plan->ttl.wrap;
    if (wrap) {
        evbuffer_add(out, "*1\r\n$5\r\nMULTI\r\n", 15);
        backend_expect(b, req, PENDING_DROP);
    }
    write_frame(out, c, plan, frame);
    backend_expect(b, req, wrap ? PENDING_QUEUED : PENDING_PASS);
    for (size_t i = 0; i < plan->ttl.nfix; i++) {
        write_fix(out, c, frame, &plan->ttl.fix[i]);
        backend_expect(b, req, PENDING_DROP);
    }
    if (wrap) {
        evbuffer_add(out, "*1\r\n$4\r\nEXEC\r\n", 14);
        backend_expect(b, req, PENDING_EXEC_PICK);
    }
    STAT_INC(&w->stats, commands_forwarded);
    if (plan->nappend || plan->ttl.nfix) STAT_INC(&w->stats, ttl_injected);
}
