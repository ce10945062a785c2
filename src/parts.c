/* parts.c: a split request's parts: each kept as its instance or node answers, merged into the request's reply when the last came. */
#include "parts.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "conn.h"
#include "fanmerge.h"
#include "nodes.h"
#include "policy.h"
#include "replies.h"

/* INFO's parts came: keygate's sections (the last part) and each instance's, labelled. */
static void parts_merge_info(struct request *req)
{
    const struct config *cfg = req->worker->cfg;
    int n = req->nparts - 1;
    assert(n > 0 && n < REPLIES_MAX_PARTS && req->parts[n].instance == -1);
    struct info_part *parts = xmalloc((size_t)n * sizeof(*parts));
    char(*names)[SLOTMAP_HOST_MAX + 64] = xmalloc((size_t)n * sizeof(*names));
    for (int k = 0; k < n; k++) {
        const struct request_part *rp = &req->parts[k];
        const char *name = cfg->instance_names[rp->instance];
        if (rp->node >= 0 && nodes_sharded(req->worker, rp->instance)) { /* "cache node 10.0.0.1:7001" */
            const char *host;
            int port;
            nodes_address(req->worker, rp->instance, rp->node, &host, &port);
            snprintf(names[k], sizeof(names[k]), "%s node %s:%d", name, host, port);
            name = names[k];
        }
        parts[k] = (struct info_part){name, rp->reply, rp->len};
    }
    struct bytebuf out = {0};
    if (fanmerge_info(req->parts[n].reply, req->parts[n].len, parts, n, req->client && req->client->resp3, &out) == 0)
        request_complete(req, out.p, out.len);
    else
        request_error(req, "ERR keygate could not merge the instances' INFO replies");
    bytebuf_free(&out);
    free(parts);
    free(names);
}

/* A cluster SCAN's node answered: its reply with the client's next cursor (fanout.c). */
static void parts_merge_scan(struct request *req)
{
    const struct request_part *part = &req->parts[0];
    struct bytebuf out = {0};
    enum fanmerge_scan r = fanmerge_scan(part->reply, part->len, req->scan_rank, req->scan_nodes, &out);
    if (r == FANMERGE_SCAN_DONE)
        request_complete(req, out.p, out.len);
    else if (r == FANMERGE_SCAN_AS_IS) /* an error: as it came */
        request_complete(req, part->reply, part->len);
    else
        request_error(req, "ERR keygate cannot carry this node's SCAN cursor");
    bytebuf_free(&out);
}

/* All parts of a split request came: merge them into its reply. */
static void parts_merge(struct request *req)
{
    if (req->merge == MERGE_INFO) {
        parts_merge_info(req);
        return;
    }
    if (req->merge == MERGE_SCAN) {
        parts_merge_scan(req);
        return;
    }
    assert(req->parts_left == 0 && req->nparts > 0 && req->nparts <= REPLIES_MAX_PARTS);
    struct replies_part *parts = xmalloc((size_t)req->nparts * sizeof(*parts));
    for (int k = 0; k < req->nparts; k++) /* key_part names parts by index */
        parts[k] = (struct replies_part){k, req->parts[k].reply, req->parts[k].len};
    struct bytebuf out = {0};
    int merged = replies_merge((enum replies_merge_kind)req->merge, parts, req->nparts, req->key_part, req->argc, &out);
    free(parts);
    if (merged == 0)
        request_complete(req, out.p, out.len);
    else
        request_error(req, "ERR keygate could not merge the replies of the parts of the command");
    bytebuf_free(&out);
}

/* One instance's reply (or failure) for part `part` of a split request; the last merges. */
void parts_answer(struct request *req, int part, const char *reply, size_t len)
{
    assert(part < req->nparts && req->parts_left > 0 && req->waiting > 0);
    request_part_keep(req, part, reply, len); /* counted against the client's limits as it comes */
    parts_kept(req);
}

/* One more part of req is kept: the merge answers once it was the last part due. */
void parts_kept(struct request *req)
{
    assert(req->parts_left > 0 && req->waiting > 0);
    if (--req->parts_left > 0) {
        request_reply_consumed(req); /* other parts are still owed: req lives on */
        return;
    }
    req->waiting--;
    parts_merge(req);
}

void parts_unavailable(struct worker *w, struct request *req, int k)
{
    char text[128], msg[ERROR_REPLY_MAX];
    replies_unavailable(text, sizeof(text), w->cfg->instance_names[req->parts[k].instance]);
    size_t n = replies_error(msg, sizeof(msg), text);
    request_part_keep(req, k, msg, n);
    STAT_INC(&w->stats, errors_unavailable);
    assert(req->parts_left > 0);
    if (--req->parts_left == 0) parts_merge(req);
}
