/* fanout.c: the commands keygate sends to several instances or nodes at once: split MGET/DEL/..., DBSIZE, KEYS, SCRIPT LOAD, INFO, a cluster's SCAN. */
#include "fanout.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "fanmerge.h"
#include "frames.h"
#include "nodes.h"
#include "parts.h"
#include "replies.h"
#include "scripts.h"
#include "slotmap.h"

/*
 * A split request has one part per (instance, slot) of its keys, or per instance (per primary of a
 * cluster instance) for a keyless one; each part is written here through the router's functions
 * (router_out ... router_out_done: its connection, its kept send on a cluster), read back as the
 * router's ROUTE_PART entries, and merged by parts.c once every part came (parts_answer).
 *
 *   client: MGET a b c      part 0 (instance 0): MGET a c  ->  *2 va vc  --+
 *   plan->key_part: 0 1 0    part 1 (instance 1): MGET b    ->  *1 vb     --+--> parts_merge: *3 va vb vc
 */

/* The parts of a command for every primary of cluster `instance` (each named by a slot it owns),
 * from parts[at]; one part with no slot (it waits for the map) when none is known yet. Returns
 * how many it filled (at most max). */
static int fanout_primaries(struct worker *w, int instance, struct request_part *parts, int max)
{
    int slots[SLOTMAP_MAX_NODES];
    int n = nodes_primaries(w, instance, slots, max < SLOTMAP_MAX_NODES ? max : SLOTMAP_MAX_NODES);
    if (n == 0) slots[n++] = -1;
    for (int k = 0; k < n; k++)
        parts[k] =
            (struct request_part){.instance = instance, .slot = slots[k], .node = nodes_owner(w, instance, slots[k])};
    return n;
}

/*
 * A keyless command for every instance (DBSIZE, INFO keyspace), or (only >= 0) for one: the
 * same `command` bytes to each, one part per instance and, when per_node, one per primary of
 * a cluster instance; merged like a split command (parts.c). `extra` (may be NULL) is one
 * more part that is complete already. A single server that is down fails its part at once, and
 * the merge answers that error; a cluster's part waits for its node (router_out_done).
 */
static void fanout_all(struct client *c, struct request *req, int merge, const struct bytebuf *command,
                       const char *extra, size_t extra_len, int only, int per_node)
{
    struct worker *w = c->worker;
    int ninst = (int)w->cfg->ninstances;
    assert(ninst > 0 && ninst <= CONFIG_MAX_INSTANCES);
    req->parts = xcalloc(REPLIES_MAX_PARTS, sizeof(*req->parts));
    int n = 0;
    for (int i = 0; i < ninst; i++) {
        if (only >= 0 && i != only) continue;
        if (per_node && nodes_may_move(w, i))
            n += fanout_primaries(w, i, req->parts + n, REPLIES_MAX_PARTS - 1 - (ninst - 1 - i) - n);
        else
            req->parts[n++] = (struct request_part){.instance = i, .slot = -1, .node = -1};
    }
    assert(n > 0 && n < REPLIES_MAX_PARTS);
    req->merge = merge;
    req->argc = c->parser.argc;
    req->nparts = req->parts_left = n;
    if (extra) { /* one more part, complete already: keygate's own (INFO's local sections) */
        req->parts[n].instance = -1;
        req->nparts++;
        request_part_keep(req, n, extra, extra_len);
    }
    struct backend **conns = xcalloc((size_t)n, sizeof(*conns));
    for (int k = 0; k < n; k++) conns[k] = router_conn_for(c, req->parts[k].instance, req->parts[k].slot);
    for (int k = 0; k < n; k++) { /* every part is written before any reply can complete req */
        int inst = req->parts[k].instance;
        if (!conns[k] && !router_keeps(c, NULL, inst)) continue;
        bytebuf_add(router_out(c, conns[k], req, inst, req->parts[k].slot, k), command->p, command->len);
        router_expect(conns[k], req, ROUTE_PART, k);
        router_out_done(req, conns[k]);
        STAT_INC(&w->stats, commands_forwarded);
    }
    for (int k = 0; k < n; k++)
        if (!conns[k] && !router_keeps(c, NULL, req->parts[k].instance)) parts_unavailable(w, req, k);
    free(conns);
}

void fanout_info(struct client *c, struct request *req, size_t argc, const char *const *argv, const size_t *argvlen,
                 const char *local, size_t local_len)
{
    struct bytebuf command = {0}; /* INFO with the client's own section names */
    char hdr[32];
    int n = snprintf(hdr, sizeof(hdr), "*%zu\r\n", argc);
    bytebuf_add(&command, hdr, (size_t)n);
    for (size_t i = 0; i < argc; i++) bytebuf_add_bulk(&command, argv[i], argvlen[i]);
    /* "": present, empty; a cluster's sections come from each primary, labelled by node */
    fanout_all(c, req, MERGE_INFO, &command, local_len ? local : "", local_len, -1, 1);
    bytebuf_free(&command);
}

/*
 * SCAN cursor MATCH p ... on a cluster instance: the client's cursor names a primary (its rank
 * among them, slotmap.h) and that node's cursor; the node's SCAN goes as one part, and its reply
 * comes back with the cursor that continues there, or starts the next primary
 * (parts.c's parts_merge_scan). A rank past the primaries known is Redis's invalid cursor.
 */
static void fanout_scan(struct client *c, struct request *req, const struct plan *plan, const char *frame)
{
    const struct resp_parser *p = &c->parser;
    uint64_t cursor;
    if (fanmerge_parse_cursor(resp_arg_ptr(p, frame, 1), p->args[1].len, &cursor) != 0) {
        request_error(req, "ERR invalid cursor");
        return;
    }
    unsigned rank;
    uint64_t node_cursor;
    slotmap_scan_cursor_split(cursor, &rank, &node_cursor);
    struct request_part nodes[SLOTMAP_MAX_NODES];
    int n = fanout_primaries(c->worker, plan->instance, nodes, SLOTMAP_MAX_NODES);
    if (rank >= (unsigned)n) {
        request_error(req, "ERR invalid cursor");
        return;
    }
    req->parts = xcalloc(1, sizeof(*req->parts));
    req->parts[0] = nodes[rank];
    req->merge = MERGE_SCAN;
    req->nparts = req->parts_left = 1;
    req->scan_rank = (uint16_t)rank;
    req->scan_nodes = (uint16_t)n;
    struct backend *b = router_conn_for(c, plan->instance, nodes[rank].slot);
    struct bytebuf *out = router_out(c, b, req, plan->instance, nodes[rank].slot, 0);
    frames_scan(out, p, frame, node_cursor);
    router_expect(b, req, ROUTE_PART, 0);
    router_out_done(req, b);
    STAT_INC(&c->worker->stats, commands_forwarded);
}

/*
 * MGET/DEL/UNLINK/EXISTS/TOUCH across instances (and a cluster's slots): one sub-command per
 * part (plan->parts) with that part's keys, in the client's order; parts.c's merge puts the
 * replies together.
 */
void fanout_split(struct client *c, struct request *req, struct plan *plan, const char *frame)
{
    struct worker *w = c->worker;
    const struct resp_parser *p = &c->parser;
    if (plan->merge == MERGE_SCAN) {
        fanout_scan(c, req, plan, frame);
        return;
    }
    if (!plan->key_part) { /* DBSIZE: every instance; KEYS, SCRIPT LOAD/EXISTS: one cluster instance's primaries */
        struct bytebuf command = {0};
        frames_command(&command, &c->parser, c->resp3, plan, frame);
        int one = plan->merge == MERGE_KEYS || plan->merge == MERGE_SCRIPT_LOAD || plan->merge == MERGE_SCRIPT_EXISTS;
        if (plan->merge == MERGE_SCRIPT_LOAD && p->argc == 3) /* remembered for a node that lacks it later */
            (void)scripts_remember(&w->proxy->scripts, resp_arg_ptr(p, frame, 2), p->args[2].len);
        fanout_all(c, req, plan->merge, &command, NULL, 0, one ? plan->instance : -1, 1);
        bytebuf_free(&command);
        return;
    }
    int n = plan->nparts;
    assert(n > 0 && n <= PLAN_MAX_PARTS);
    int *count = xcalloc((size_t)n, sizeof(*count));
    for (size_t i = 1; i < p->argc; i++)
        if (plan->key_part[i] >= 0) count[plan->key_part[i]]++;
    req->parts = xcalloc((size_t)n, sizeof(*req->parts));
    req->merge = plan->merge;
    req->key_part = plan->key_part;
    plan->key_part = NULL;
    req->argc = p->argc;
    req->nparts = req->parts_left = n;
    /* write every part before any reply can complete the request */
    struct backend **conns = xcalloc((size_t)n, sizeof(*conns));
    for (int k = 0; k < n; k++) {
        req->parts[k].instance = plan->parts[k].instance;
        req->parts[k].slot = plan->parts[k].slot;
        req->parts[k].replicas = plan->parts[k].replicas;
        conns[k] = router_conn_for(c, req->parts[k].instance, req->parts[k].slot);
    }
    for (int k = 0; k < n; k++) {
        int inst = req->parts[k].instance;
        struct backend *b = conns[k];
        if (!b && !router_keeps(c, b, inst)) continue;
        struct bytebuf *out = router_out(c, b, req, inst, req->parts[k].slot, k);
        /* a part that writes near-cache keys carries their XADDs in one MULTI/EXEC of its own */
        int wrap = 0;
        for (uint32_t v = 0; v < plan->inval.n && !wrap; v++) wrap = req->key_part[plan->inval.key[v].argi] == k;
        if (wrap) {
            bytebuf_add(out, STR_AND_LEN("*1\r\n$5\r\nMULTI\r\n"));
            router_expect(b, req, ROUTE_DROP, k);
        }
        frames_part(out, p, frame, req->key_part, k, count[k]);
        router_expect(b, req, wrap ? ROUTE_QUEUED : ROUTE_PART, k);
        for (size_t f = 0; f < plan->ttl.nfix; f++) {
            if (req->key_part[plan->ttl.fix[f].argi] != k) continue;
            frames_fix(out, &c->parser, frame, &plan->ttl.fix[f]);
            router_expect(b, req, ROUTE_DROP, k);
        }
        for (uint32_t v = 0; v < plan->inval.n; v++) {
            if (req->key_part[plan->inval.key[v].argi] != k) continue;
            frames_inval(out, &c->parser, frame, &plan->inval.key[v]);
            router_expect(b, req, ROUTE_DROP, k);
        }
        if (wrap) {
            bytebuf_add(out, STR_AND_LEN("*1\r\n$4\r\nEXEC\r\n"));
            router_expect(b, req, ROUTE_PART_PICK, k);
        }
        router_out_done(req, b);
        STAT_INC(&w->stats, commands_forwarded);
    }
    if (plan->ttl.nfix) stats_ttl_injected(&w->stats, &req->mark); /* a sliding window reset */
    /* parts whose instance is down fail at once; the merge reports it (a cluster's part waits
     * for its slot's owner instead: router_out_done) */
    for (int k = 0; k < n; k++)
        if (!conns[k] && !nodes_may_move(w, req->parts[k].instance)) parts_unavailable(w, req, k);
    free(conns);
    free(count);
}
