/* tracker.c: CLIENT TRACKING on the request path: the keys a tracking client reads, the keys a write changes, and the invalidation messages handed to the workers that own their receivers. */
#include "tracker.h"

#include "cmdclass.h"
#include "commands.h"
#include "conn.h"
#include "request.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One worker's inbox: notes other workers hand it (their keys on the heap, its to free). */
struct tracker_inbox {
    struct worker *w;
    pthread_mutex_t mu;
    struct tracking_notes notes; /* under mu */
    int signaled;                /* under mu: a byte is in the pipe */
    int pipe[2];
    struct event *ev;
};

/* A write's keys, kept on its request until its reply (req->track): the writer's id (8 bytes),
 * then per key a uint32 length, its instance (1 byte) and the bytes. */
static void track_begin(struct bytebuf *b, uint64_t writer)
{
    if (b->len == 0) bytebuf_add(b, (const char *)&writer, sizeof(writer));
}

static struct tracking_table *table_of(struct worker *w)
{
    return &w->proxy->tracking;
}

/* The client of w whose id is id, or NULL (the worker's map: O(1) with thousands of clients). */
static struct client *client_by_id(struct worker *w, uint64_t id)
{
    return idmap_get(&w->clients_by_id, id);
}

/* Give c the message bytes after the replies queued before it (at once when none is): a read's
 * reply comes before the invalidation that follows it, and a client's own write's reply before
 * the invalidation it caused (as Redis 7.0.15 orders them: its tracking_pending_keys). */
static void tracker_out(struct client *c, const char *bytes, size_t len)
{
    if (c->closed) return;
    if (c->nqueued == 0) {
        conn_out(c, bytes, len);
        return;
    }
    struct request *req = request_new(c);
    request_complete(req, bytes, len);
}

/* Deliver one note to its receiver, a client of w, in the protocol it speaks now. */
static void tracker_deliver(struct worker *w, const struct tracking_note *n, struct bytebuf *buf)
{
    struct client *c = client_by_id(w, n->client);
    if (!c) return; /* gone meanwhile */
    buf->len = 0;
    if (n->kind == TRACKING_NOTE_BROKEN) {
        if (!c->resp3) return; /* RESP2 has no way to say it (Redis's sendTrackingMessage) */
        char line[96];
        int k = snprintf(line, sizeof(line), ">2\r\n$21\r\ntracking-redir-broken\r\n:%llu\r\n",
                         (unsigned long long)n->about);
        bytebuf_add(buf, line, (size_t)k);
    } else {
        /* RESP3: a push; RESP2: only to a REDIRECT client in subscribed mode, as a message */
        if (!c->resp3 && !(n->redirected && pubsub_subscribed(&c->pubsub))) return;
        const char *key = n->key;
        size_t len = n->key_len;
        tracking_message(c->resp3, &key, &len, n->kind == TRACKING_NOTE_KEY ? 1 : 0, buf);
    }
    STAT_INC(&w->stats, tracking_messages);
    tracker_out(c, buf->p, buf->len);
}

static void inbox_drain(struct tracker_inbox *ib)
{
    char junk[64];
    pthread_mutex_lock(&ib->mu);
    while (read(ib->pipe[0], junk, sizeof(junk)) > 0) {
    }
    ib->signaled = 0;
    struct tracking_notes notes = ib->notes;
    memset(&ib->notes, 0, sizeof(ib->notes));
    pthread_mutex_unlock(&ib->mu);
    struct bytebuf buf = {0};
    for (size_t i = 0; i < notes.n; i++) tracker_deliver(ib->w, &notes.v[i], &buf);
    bytebuf_free(&buf);
    tracking_notes_free(&notes);
}

static void inbox_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    inbox_drain(arg);
}

void tracker_start(struct proxy *p)
{
    const struct config *cfg = p->workers[0].cfg;
    tracking_init(&p->tracking, (size_t)cfg->tracking_table_max_keys);
    struct tracking_notes none = {0}; /* an empty table evicts nothing */
    tracking_set_limits(&p->tracking, (size_t)cfg->tracking_table_max_keys, &p->mem_used, cfg->max_memory, &none);
    tracking_notes_free(&none);
    for (int k = 0; k < p->nworkers; k++) {
        struct worker *w = &p->workers[k];
        struct tracker_inbox *ib = xcalloc(1, sizeof(*ib));
        ib->w = w;
        pthread_mutex_init(&ib->mu, NULL);
        if (pipe(ib->pipe) != 0) abort(); /* at start: out of fds is fatal, as for the workers' own pipes */
        fcntl(ib->pipe[0], F_SETFL, O_NONBLOCK);
        fcntl(ib->pipe[1], F_SETFL, O_NONBLOCK);
        ib->ev = xevent_new(w->base, ib->pipe[0], EV_READ | EV_PERSIST, inbox_cb, ib);
        event_add(ib->ev, NULL);
        w->tracker = ib;
    }
}

void tracker_stop(struct proxy *p)
{
    for (int k = 0; k < p->nworkers; k++) {
        struct tracker_inbox *ib = p->workers[k].tracker;
        if (!ib) continue;
        event_free(ib->ev);
        close(ib->pipe[0]);
        close(ib->pipe[1]);
        tracking_notes_free(&ib->notes);
        pthread_mutex_destroy(&ib->mu);
        free(ib);
        p->workers[k].tracker = NULL;
    }
    if (p->tracking.keys) tracking_free(&p->tracking); /* started */
}

/* Hand one note to another worker's inbox (the key moves with it). */
static void inbox_post(struct tracker_inbox *ib, struct tracking_note *n)
{
    pthread_mutex_lock(&ib->mu);
    struct tracking_notes *q = &ib->notes;
    if (q->n == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 16;
        q->v = xrealloc(q->v, q->cap * sizeof(*q->v));
    }
    q->v[q->n++] = *n;
    n->key = NULL;
    int wake = !ib->signaled;
    ib->signaled = 1;
    pthread_mutex_unlock(&ib->mu);
    if (wake && write(ib->pipe[1], "x", 1) < 0 && errno != EAGAIN)
        log_event(LOG_WARN, "tracking_wake", NULL, "tracking: cannot wake a worker: %s", strerror(errno));
}

void tracker_post(struct proxy *p, struct tracking_notes *notes)
{
    for (size_t i = 0; i < notes->n; i++) {
        struct tracking_note *n = &notes->v[i];
        if (n->worker >= 0 && n->worker < p->nworkers) inbox_post(p->workers[n->worker].tracker, n);
    }
    tracking_notes_reset(notes);
}

void tracker_update(struct proxy *p, const struct config *cfg)
{
    struct tracking_notes notes = {0};
    tracking_set_limits(&p->tracking, (size_t)cfg->tracking_table_max_keys, NULL, cfg->max_memory, &notes);
    tracker_post(p, &notes);
    tracking_notes_free(&notes);
}

void tracker_stream_keys(struct proxy *p, int inst, const char *const *keys, const size_t *lens, size_t n)
{
    if (n == 0 || inst < 0 || inst >= 32 || !tracking_active(&p->tracking)) return;
    uint8_t *insts = xmalloc(n);
    memset(insts, inst, n);
    struct tracking_notes notes = {0};
    tracking_invalidate(&p->tracking, 0, keys, lens, insts, n, 0, &notes);
    tracker_post(p, &notes);
    tracking_notes_free(&notes);
    free(insts);
}

void tracker_stream_state(struct proxy *p, int inst, int vouched, int gap)
{
    struct tracking_notes notes = {0};
    tracking_stream_set(&p->tracking, inst, vouched, gap, &notes);
    tracker_post(p, &notes);
    tracking_notes_free(&notes);
}

void tracker_send(struct worker *w, struct tracking_notes *notes)
{
    if (notes->n == 0) return;
    struct bytebuf buf = {0};
    for (size_t i = 0; i < notes->n; i++) {
        struct tracking_note *n = &notes->v[i];
        if (n->worker == w->id)
            tracker_deliver(w, n, &buf);
        else if (n->worker >= 0 && n->worker < w->proxy->nworkers)
            inbox_post(w->proxy->workers[n->worker].tracker, n);
    }
    bytebuf_free(&buf);
    tracking_notes_reset(notes);
}

/* Redis remembers the keys of CMD_READONLY commands but the read-only script runners. */
static int remembered_read(const struct command_def *cmd)
{
    if (!(cmd->flags & CMD_READONLY) || (cmd->flags & CMD_PUBSUB)) return 0;
    return strcmp(cmd->name, "eval_ro") != 0 && strcmp(cmd->name, "evalsha_ro") != 0 &&
           strcmp(cmd->name, "fcall_ro") != 0;
}

/* Writes: CMD_WRITE, and the scripts that may write the keys they name. */
static int changes_keys(const struct command_def *cmd)
{
    if (cmd->flags & CMD_WRITE) return 1;
    enum cmd_id cid = cmdclass_id(cmd);
    return cid == CID_EVAL || cid == CID_EVALSHA || cid == CID_FCALL;
}

#define TRACKER_MAX_KEYS 4096 /* a command with more keys is handled in several batches */

/* The argv indexes of cmd's keys (a write's: those it may change), at most max. */
static int keys_of(const struct command_def *cmd, size_t argc, const char *const *argv, const size_t *argvlen,
                   int writes, int *idx, int max)
{
    struct key_ref stack[64];
    struct key_ref *refs = argc <= 64 ? stack : xmalloc(argc * sizeof(*refs));
    int incomplete = 0;
    int n = command_find_keys(cmd, argc, argv, argvlen, refs, (int)argc, &incomplete);
    int k = 0;
    for (int i = 0; i < n && k < max; i++) {
        if (refs[i].flags & KS_NOT_KEY) continue;
        if (writes && (refs[i].flags & (KS_RO | KS_RW | KS_OW | KS_RM)) == KS_RO) continue; /* a source only */
        idx[k++] = refs[i].index;
    }
    if (refs != stack) free(refs);
    return k;
}

static void keys_append(struct bytebuf *b, const char *key, size_t len, uint8_t inst)
{
    uint32_t l = (uint32_t)len;
    bytebuf_add(b, (const char *)&l, sizeof(l));
    bytebuf_add(b, (const char *)&inst, 1);
    bytebuf_add(b, key, len);
}

/* The instance of a key (its namespace's, or the default line's); 255 when none. *streamed
 * (when not NULL): the instance again when the namespace is a near-cache one (its stream names
 * the writes through keygates), else 255. */
static uint8_t key_instance_nc(const struct worker *w, const char *key, size_t len, uint8_t *streamed)
{
    const struct namespace_entry *ns = registry_resolve(w->cfg->registry, NS_KEY, key, len);
    uint8_t inst = ns && ns->instance >= 0 && ns->instance < 255 ? (uint8_t)ns->instance : 255;
    if (streamed) *streamed = ns && ns->near_cache_ms > 0 ? inst : 255;
    return inst;
}

static uint8_t key_instance(const struct worker *w, const char *key, size_t len)
{
    return key_instance_nc(w, key, len, NULL);
}

void tracker_command(struct client *c, struct request *req, const struct plan *plan, const struct command_def *cmd,
                     size_t argc, const char *const *argv, const size_t *argvlen)
{
    struct worker *w = c->worker;
    if (!cmd) return;
    int caching = c->tracking_caching;
    if (caching && c->session.mode != SESSION_MULTI && cmdclass_id(cmd) != CID_CLIENT &&
        strncmp(cmd->name, "client|", 7) != 0)
        c->tracking_caching = 0; /* one command's (CLIENT commands do not count, as Redis) */
    if (plan->kind != PLAN_FORWARD || !tracking_active(table_of(w))) return;
    int reads = tracking_remembers(c->tracking_flags, caching) && remembered_read(cmd);
    int writes = changes_keys(cmd);
    if (!reads && !writes) return;
    int stack[64];
    int *idx = argc <= 64 ? stack : xmalloc(argc * sizeof(*idx));
    int n = keys_of(cmd, argc, argv, argvlen, writes, idx, (int)argc);
    if (n > 0 && reads) {
        const char **keys = xmalloc((size_t)n * sizeof(*keys));
        size_t *lens = xmalloc((size_t)n * sizeof(*lens));
        uint8_t *streamed = xmalloc((size_t)n);
        uint32_t instances = 0;
        for (int i = 0; i < n; i++) {
            keys[i] = argv[idx[i]], lens[i] = argvlen[idx[i]];
            uint8_t inst = key_instance_nc(w, keys[i], lens[i], &streamed[i]);
            instances |= inst < 32 && streamed[i] == 255 ? 1u << inst : 0;
        }
        struct tracking_notes notes = {0};
        tracking_remember(table_of(w), c->id, keys, lens, (size_t)n, instances, streamed, &notes);
        tracker_send(w, &notes);
        tracking_notes_free(&notes);
        free(keys);
        free(lens);
        free(streamed);
    }
    if (n > 0 && writes && (c->tracking_flags & TRACKING_NOLOOP) && !(c->tracking_flags & TRACKING_BCAST)) {
        const char **keys = xmalloc((size_t)n * sizeof(*keys));
        size_t *lens = xmalloc((size_t)n * sizeof(*lens));
        for (int i = 0; i < n; i++) keys[i] = argv[idx[i]], lens[i] = argvlen[idx[i]];
        tracking_forget(table_of(w), c->id, keys, lens, (size_t)n);
        free(keys);
        free(lens);
    }
    if (n > 0 && writes) {
        if (c->session.mode == SESSION_MULTI) {
            for (int i = 0; i < n; i++)
                keys_append(&c->track_multi, argv[idx[i]], argvlen[idx[i]],
                            key_instance(w, argv[idx[i]], argvlen[idx[i]]));
        } else {
            track_begin(&req->track, c->id);
            for (int i = 0; i < n; i++)
                keys_append(&req->track, argv[idx[i]], argvlen[idx[i]], key_instance(w, argv[idx[i]], argvlen[idx[i]]));
        }
    }
    if (idx != stack) free(idx);
}

void tracker_exec(struct client *c, struct request *req)
{
    if (c->track_multi.len == 0) return;
    track_begin(&req->track, c->id);
    bytebuf_add(&req->track, c->track_multi.p, c->track_multi.len);
    c->track_multi.len = 0;
}

void tracker_write_replied(struct request *req)
{
    const struct bytebuf *tk = &req->track;
    uint64_t writer;
    if (tk->len <= sizeof(writer) || !tracking_active(table_of(req->worker))) return;
    memcpy(&writer, tk->p, sizeof(writer));
    size_t n = 0;
    for (size_t off = sizeof(writer); off + sizeof(uint32_t) + 1 <= tk->len; n++) {
        uint32_t l;
        memcpy(&l, tk->p + off, sizeof(l));
        off += sizeof(l) + 1 + l;
    }
    const char **keys = xmalloc(n * sizeof(*keys));
    size_t *lens = xmalloc(n * sizeof(*lens));
    uint8_t *insts = xmalloc(n ? n : 1);
    size_t off = sizeof(writer);
    for (size_t i = 0; i < n; i++) {
        uint32_t l;
        memcpy(&l, tk->p + off, sizeof(l));
        insts[i] = (uint8_t)tk->p[off + sizeof(l)];
        keys[i] = tk->p + off + sizeof(l) + 1;
        lens[i] = l;
        off += sizeof(l) + 1 + l;
    }
    struct tracking_notes notes = {0};
    tracking_invalidate(table_of(req->worker), writer, keys, lens, insts, n, 0, &notes);
    tracker_send(req->worker, &notes);
    tracking_notes_free(&notes);
    free(keys);
    free(lens);
    free(insts);
}
