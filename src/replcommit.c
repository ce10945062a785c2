/* replcommit.c: replicas=N's group commit: writes held until one WAIT per group says enough replicas have them. */
#include "replcommit.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "nodes.h"
#include "parts.h"
#include "replies.h"
#include "sentinelwatch.h"
#include "session.h"

/* ---- replicas=N: group commit (README, High availability) ----
 *
 *   shared connection:   SET a  SET b  SET c   (replies come: each is held, not answered)
 *                            \      \      \
 *   w->repl[instance]:    covered = {a, b, c}           next = {d, e}  (held while the WAIT is out)
 *                            |
 *   dedicated connection: PUBLISH keygate:wait:0 ""  +  WAIT need replicas-timeout
 *                            |
 *   WAIT answers k:       a, b, c answered (their kept reply when k >= their N, else -NOREPLICAS);
 *                         next becomes covered, and its own WAIT goes out
 *
 * A write whose reply came has run on the primary, and Redis has put it in its replication stream
 * before answering; the PUBLISH written after that reply is later in the stream, so WAIT (which
 * waits for its own connection's offset, the PUBLISH's) covers every write held before the
 * PUBLISH was written. So a held write joins the WAIT out while its PUBLISH is still unwritten
 * (staged until the end of this loop iteration: every reply of a batch read here joins it), and
 * waits for the next one otherwise. One WAIT per group, on a dedicated connection: the shared
 * connections never wait for replicas. */

/* The -NOREPLICAS text of a held write whose replicas did not confirm it (Redis's code and first
 * words, as for min-replicas; the write did run on the primary). */
static void replcommit_error(char *text, size_t size, const struct worker *w, int instance, int replicas,
                             long long acked, const char *why)
{
    char d[32];
    duration_format(w->cfg->replicas_timeout_ms, d, sizeof(d));
    if (why)
        snprintf(text, size,
                 "NOREPLICAS Not enough good replicas to write: the write ran on the primary of instance '%s', but "
                 "its replication could not be checked (%s)",
                 w->cfg->instance_names[instance], why);
    else
        snprintf(text, size,
                 "NOREPLICAS Not enough good replicas to write: the write ran on the primary of instance '%s', and "
                 "%lld of %d replicas confirmed it within replicas-timeout (%s)",
                 w->cfg->instance_names[instance], acked < 0 ? 0 : acked, replicas, d);
}

static void replcommit_push(struct repl_holds *v, struct repl_hold hd)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 16;
        v->items = xrealloc(v->items, v->cap * sizeof(*v->items));
    }
    v->items[v->n++] = hd;
}

/* Answer every write of `v` (held for instance): acked replicas confirmed them (-1: unknown, see
 * why); each gets its kept reply when acked reaches its N, else -NOREPLICAS (a split write's
 * part: in its part, which the merge then answers with). */
static void replcommit_answer(struct worker *w, int instance, struct repl_holds *v, long long acked, const char *why)
{
    for (size_t i = 0; i < v->n; i++) {
        const struct repl_hold hd = v->items[i]; /* a copy: answering may run the client's code */
        struct request *req = hd.req;
        if (acked >= hd.replicas) {
            if (hd.part < 0)
                request_answer(req, req->repl_reply, req->repl_len);
            else
                parts_kept(req);
            continue;
        }
        char text[ERROR_TEXT_MAX], msg[ERROR_REPLY_MAX];
        STAT_INC(&w->stats, replicas_timeouts);
        replcommit_error(text, sizeof(text), w, instance, hd.replicas, acked, why);
        size_t len = replies_error(msg, sizeof(msg), text);
        if (hd.part < 0) {
            request_answer(req, msg, len);
        } else {
            request_part_replace(req, hd.part, msg, len);
            parts_kept(req);
        }
    }
    v->n = 0;
}

/* The writes of `next` become the covered group: PUBLISH + WAIT for them on a dedicated connection
 * (idle or new; it goes back to the idle list once the WAIT answered). */
static void replcommit_start(struct worker *w, int instance)
{
    struct repl_group *g = &w->repl[instance];
    assert(!g->conn && g->covered.n == 0);
    if (g->next.n == 0) return;
    struct repl_holds t = g->covered;
    g->covered = g->next;
    g->next = t;
    g->need = 0;
    for (size_t i = 0; i < g->covered.n; i++)
        if (g->covered.items[i].replicas > g->need) g->need = g->covered.items[i].replicas;
    struct backend *b = w->repl_stopped ? NULL : nodes_conn(w, instance, &(struct node_want){.slot = -1, .pinned = 1});
    if (!b) {
        replcommit_answer(w, instance, &g->covered, -1,
                          w->repl_stopped ? "keygate is shutting down"
                                          : "no dedicated connection for WAIT: max-pinned, or no primary known");
        return;
    }
    /* a sentinel instance's primary changed since some of them ran (a failover): the new one's
     * replicas say nothing of those writes */
    size_t kept = 0;
    for (size_t i = 0; i < g->covered.n; i++) {
        struct repl_hold hd = g->covered.items[i];
        if (hd.node == b->node) {
            g->covered.items[kept++] = hd;
            continue;
        }
        struct repl_holds one = {.items = &hd, .n = 1, .cap = 1};
        replcommit_answer(w, instance, &one, -1, "the primary changed since the write: a failover");
    }
    g->covered.n = kept;
    if (kept == 0) {
        backend_unpin(b);
        return;
    }
    int64_t timeout = w->cfg->replicas_timeout_ms;
    backend_exempt(b, timeout); /* WAIT blocks up to its timeout: backend-timeout counts after it */
    struct bytebuf *out = backend_stage(b);
    bytebuf_add(out, STR_AND_LEN(REPLCOMMIT_SYNC));
    backend_expect(b, (struct pending){.kind = REPLCOMMIT_KIND_SYNC, .part = (uint16_t)instance});
    char n[24], ms[24];
    size_t nl = format_ll(n, g->need), msl = format_ll(ms, (long long)timeout);
    bytebuf_add(out, STR_AND_LEN("*3\r\n$4\r\nWAIT\r\n"));
    bytebuf_add_bulk(out, n, nl);
    bytebuf_add_bulk(out, ms, msl);
    backend_expect(b, (struct pending){.kind = REPLCOMMIT_KIND_WAIT, .part = (uint16_t)instance});
    STAT_INC(&w->stats, replicas_waits);
    backend_unpin(b); /* back to the idle list once the WAIT answered */
    g->conn = b;
    g->gen = nodes_follow_failover(w, instance) ? sentinelwatch_generation(instance) : 0;
}

/*
 * The reply of req (part -1), or of its part `part`, a write that `replicas` replicas must have,
 * came from b: hold it (1), or 0 when it is answered as usual (an error: nothing to replicate; an
 * orphaned request: nobody waits for it).
 */
int replcommit_hold(struct backend *b, struct request *req, int part, int replicas, const char *reply, size_t len)
{
    if (reply[0] == '-' || !req->client) return 0;
    struct worker *w = req->worker;
    struct repl_group *g = &w->repl[b->instance];
    if (part < 0)
        request_keep_reply(req, reply, len);
    else
        request_part_keep(req, part, reply, len);
    struct repl_hold hd = {.req = req, .part = (int16_t)part, .node = (int16_t)b->node, .replicas = (uint8_t)replicas};
    /* its PUBLISH not written yet (both entries still staged): the WAIT out covers this write too */
    if (g->conn && g->conn->unsent >= 2 && replicas <= g->need && hd.node == g->conn->node) {
        replcommit_push(&g->covered, hd);
        return 1;
    }
    replcommit_push(&g->next, hd);
    if (!g->conn) replcommit_start(w, b->instance);
    return 1;
}

/* A reply (reply NULL: lost) of the router's own entries: the WAIT answers its group. */
void replcommit_reply(struct backend *b, const struct pending *pd, const char *reply, size_t len)
{
    if (pd->kind == REPLCOMMIT_KIND_SYNC) return;
    assert(pd->kind == REPLCOMMIT_KIND_WAIT);
    struct worker *w = b->worker;
    int instance = pd->part;
    struct repl_group *g = &w->repl[instance];
    assert(g->conn == b);
    g->conn = NULL;
    long long acked = -1;
    char why[160];
    const char *reason = NULL;
    if (!reply) {
        reason = "its connection for WAIT was lost";
    } else if (reply[0] != ':' || len < 3 || resp_parse_ll(reply + 1, len - 3, &acked) != 0) {
        acked = -1; /* not WAIT's count of replicas */
        size_t n = 0;
        while (n < len && n < 100 && reply[n] != '\r') n++;
        snprintf(why, sizeof(why), "WAIT answered %.*s", (int)n, reply);
        reason = why;
    }
    struct sentinelwatch_state st;
    if (acked >= 0 && nodes_follow_failover(w, instance) &&
        (sentinelwatch_get(instance, &st) != 0 || !st.confirmed || st.generation != g->gen)) {
        /* a failover began (or the primary changed) while the WAIT was out: the replicas that
         * answered may be followers of the old primary that the promoted one will resync, so
         * their count says nothing of what survives (the Sentinel fault harness, SEED=3003) */
        acked = -1;
        reason = "a failover began while its WAIT was out";
    }
    replcommit_answer(w, instance, &g->covered, acked, reason);
    replcommit_start(w, instance);
}

void replcommit_stop(struct worker *w)
{
    w->repl_stopped = 1;
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++) {
        struct repl_group *g = &w->repl[i];
        replcommit_answer(w, i, &g->next, -1, "keygate is shutting down");
        /* covered: its WAIT's connection is the router's own (pinned, no client holds it, the pools
         * do not close it): closing it fails the WAIT, which answers them (replcommit_reply) */
        if (g->conn) backend_abandon(g->conn);
        assert(!g->conn && g->covered.n == 0);
    }
}

void replcommit_free(struct worker *w)
{
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++) {
        struct repl_group *g = &w->repl[i];
        assert(g->next.n == 0 && g->covered.n == 0 && !g->conn);
        free(g->next.items);
        free(g->covered.items);
        memset(g, 0, sizeof(*g));
    }
}
