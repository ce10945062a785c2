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
 *   inline                -> re-encoded as multibulk
 */
static void write_frame(struct evbuffer *out, const struct client *c, const struct plan *plan, const char *frame)
{
    const struct resp_parser *p = &c->parser;
    if (!p->is_inline && plan->nappend == 0) {
        evbuffer_add(out, frame, p->frame_len);
        return;
    }
    char hdr[32];
    int n = snprintf(hdr, sizeof(hdr), "*%zu\r\n", p->argc + plan->nappend);
    evbuffer_add(out, hdr, (size_t)n);
    if (!p->is_inline) {
        evbuffer_add(out, frame + p->header_len, p->frame_len - p->header_len);
    } else {
        for (size_t i = 0; i < p->argc; i++) add_bulk(out, resp_arg_ptr(p, frame, i), p->args[i].len);
    }
    for (size_t i = 0; i < plan->nappend; i++) add_bulk(out, plan->append[i], plan->append_len[i]);
}

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
    write_frame(bufferevent_get_output(b->bev), c, plan, frame);
    backend_expect(b, req, PENDING_PASS);
    STAT_INC(&w->stats, commands_forwarded);
    if (plan->nappend) STAT_INC(&w->stats, ttl_injected);
}
