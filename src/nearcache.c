/* nearcache.c: the near cache in the request path (hits, fills, local writes) and its stream readers. */
/* Over 1,000 lines (about 1,600): its two halves, the request path (workers) and the stream readers
 * (one thread per instance), share the per-stream state (struct nc_stream: the vouch, the
 * generation, what the tracker was told) and the message posts between them; split, that state
 * and the posts would become a header of their own. The pure parts are already apart: nccore.c
 * (the table) and ncpolicy.c (what a command does to it, the reader's verdicts). */
#include "nearcache.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "cmdclass.h"
#include "nccore.h"
#include "ncpolicy.h"
#include "sentinelwatch.h"
#include "syncconn.h"
#include "tracker.h"

/* ---- the process: namespaces followed, per-worker state, readers ---- */

/* One near-cache namespace followed (a slot: nccore's namespace index). */
struct nc_slot {
    char *prefix;
    size_t prefix_len;
    int instance;
    int stream; /* its instance's stream (index in nearcache.streams) */
};

/*
 * An instance's invalidation stream (one per instance holding a followed namespace; every
 * near-cache write on the instance XADDs to it, its entries carry the key) and its reader's
 * state. Only the reader thread touches pos.
 */
struct nc_stream {
    char *key, *markers, *writers;
    int instance;
    struct nc_stream_pos pos; /* what the reader applied (nccore_stream_verdict's rules) */
    struct nc_id blocked;     /* the last entry a blocking read returned (evicted before it is applied) */
    /* atomic, monotonic ms: entries are served only before this. A read that found the stream
     * caught up vouches for NC_VOUCH_MS counted from when it was SENT (what it saw is at least
     * that recent, however slow the link); 0 when the connection is lost. The worker judges it
     * when it builds the reply, so a frozen process or a stalled link stops serving. */
    int64_t vouched_until_ms;
    /* a Sentinel instance: the watcher's generation the reader vouches under (atomic): a hit is
     * served only while the watcher still says what it said then (the same confirmed primary),
     * so a failover stops every hit at once, before the reader notices */
    int sentinel;
    uint64_t watch_gen;
    int tracker_told; /* reader only: what CLIENT TRACKING was last told (nc_tell_tracker), -1: nothing */
};

/* How long one caught-up read vouches for an instance's entries (monotonic ms from its send):
 * the bound on how stale a served value can be when the reader stalls silently. The blocking
 * read wakes the reader every NC_BLOCK_MS, so a healthy reader renews it well before. */
#define NC_VOUCH_MS 1000
#define NC_BLOCK_MS "200"

/* What a reader (or another worker) tells a worker, in order. */
enum nc_msg_kind {
    NC_MSG_ENTRY = 0, /* a stream entry: the cursor moves, then its key is evicted */
    NC_MSG_EVICT,     /* a key written (another worker's write, or an entry a blocking read returned) */
    NC_MSG_RESET,     /* the instance's namespaces are flushed (a gap, a reader's first read) */
    NC_MSG_SERVE,     /* the slot's entries may be served again */
    NC_MSG_DOWN,      /* ... may not */
};

struct nc_msg {
    uint8_t kind;
    uint8_t cause;   /* RESET: NC_EVICT_GAP or NC_EVICT_RESET; EVICT: NC_EVICT_WRITE or NC_EVICT_STREAM */
    uint8_t lagged;  /* ENTRY, EVICT: its lag is counted here (an entry a blocking read evicted first is not) */
    uint32_t target; /* ENTRY, EVICT, RESET: the stream; SERVE, DOWN: the slot */
    struct nc_id id;
    char *key; /* ENTRY, EVICT: heap, the worker frees it */
    size_t key_len;
};

/* Lag histogram buckets (ms between an invalidation's XADD id time and its eviction here). */
#define NC_LAG_BUCKETS 10
static const int64_t nc_lag_le[NC_LAG_BUCKETS] = {1, 2, 5, 10, 25, 50, 100, 250, 1000, 5000};

struct nc_slot_stats {
    uint64_t lag[NC_LAG_BUCKETS + 1]; /* the last: above every bound */
    uint64_t lag_count;
    int64_t lag_sum_ms;
};

/* One worker's near cache: its cache, its inbox, its map from registry entries to slots. */
struct nc_worker {
    struct nearcache *nc;
    struct worker *w;
    int index;
    struct nc_cache cache;
    const struct config *mapped; /* the config slot_of was built for */
    int32_t *slot_of;            /* registry entry index -> slot, -1: not followed */
    size_t nslot_of;
    struct nc_slot_stats *sstats; /* per slot */
    struct bytebuf out;           /* a hit's reply is rendered here (kept: no allocation per hit) */
    /* inbox: written by readers and other workers under mu, read by the worker */
    pthread_mutex_t mu;
    struct nc_msg *msgs;
    size_t nmsgs, cap;
    int pipe[2];
    int signaled; /* under mu: a byte is in the pipe */
    struct event *ev;
};

struct nc_reader {
    struct nearcache *nc;
    int stream;                /* index in nearcache.streams */
    struct instance_conf conf; /* its own copy (config_instance_copy) */
    pthread_t thread;
    int started;
};

struct nearcache {
    struct proxy *proxy;
    struct nc_slot *slots;
    size_t nslots;
    struct nc_stream *streams; /* one per reader */
    struct nc_worker *workers; /* one per proxy worker */
    int nworkers;
    struct nc_reader readers[CONFIG_MAX_INSTANCES];
    int nreaders;
    char *group;
    char self[128]; /* "<host>:<pid>": this process's field in the writers hashes */
    int64_t trim_interval_ms, marker_timeout_ms;
    /* under pub_mu: per instance, the prefixes this process's writes announce there now (its
     * current registry's near-cache lines of the instance, "\n"-separated), published by its
     * reader in the instance's writers hash */
    pthread_mutex_t pub_mu;
    char *published[CONFIG_MAX_INSTANCES];
    int stop;                   /* atomic */
    struct syncconn_stop *halt; /* tripped by nearcache_stop: a reader's blocking call returns */
};

/* The test hook (README): KEYGATE_NEAR_CACHE_FILL_DELAY_MS holds every fill's reply that long
 * before it is used, so an integration test can make an invalidation cross a fill. 0: none. */
static int64_t nc_fill_delay_ms;

/* ---- the worker side ---- */

/* The slot of registry entry e for w's current config (built again after a reload, when every
 * slot is flushed: a key may belong to another namespace now, and its entry would not be found
 * by the invalidations that follow). */
static int nc_slot_for(struct nc_worker *nw, const struct namespace_entry *e)
{
    const struct config *cfg = nw->w->cfg;
    if (__builtin_expect(nw->mapped != cfg, 0)) {
        size_t n = cfg->registry->count + 1;
        free(nw->slot_of);
        nw->slot_of = xmalloc(n * sizeof(*nw->slot_of));
        nw->nslot_of = n;
        for (size_t i = 0; i < n; i++) {
            const struct namespace_entry *x = registry_entry(cfg->registry, i);
            nw->slot_of[i] = -1;
            for (size_t s = 0; x && x->near_cache_ms > 0 && s < nw->nc->nslots; s++)
                if (nw->nc->slots[s].instance == x->instance && strcmp(nw->nc->slots[s].prefix, x->prefix) == 0)
                    nw->slot_of[i] = (int32_t)s;
        }
        if (nw->mapped)
            for (size_t s = 0; s < nw->nc->nslots; s++) nccore_flush(&nw->cache, (uint32_t)s, NC_EVICT_RESET);
        nw->mapped = cfg;
    }
    return e && e->index < nw->nslot_of ? nw->slot_of[e->index] : -1;
}

/* The slot a key of stream st's instance is cached in by this worker, or -1. */
static int nc_slot_of_key(struct nc_worker *nw, uint32_t st, const char *key, size_t len)
{
    const struct namespace_entry *e = registry_resolve(nw->w->cfg->registry, NS_KEY, key, len);
    int slot = nc_slot_for(nw, e);
    return slot >= 0 && nw->nc->slots[slot].stream == (int)st ? slot : -1;
}

static struct nc_worker *nc_of(struct worker *w)
{
    return w->nc;
}

/* Count an invalidation's lag (its id's time to now) in slot's histogram. */
static void nc_lag_count(struct nc_worker *nw, int slot, struct nc_id id, int64_t now)
{
    struct nc_slot_stats *st = &nw->sstats[slot];
    int64_t lag = now - (int64_t)id.ms;
    if (lag < 0) lag = 0;
    size_t b = 0;
    while (b < NC_LAG_BUCKETS && lag > nc_lag_le[b]) b++;
    st->lag[b]++;
    st->lag_count++;
    st->lag_sum_ms += lag;
}

/* Apply what the readers and the other workers sent (worker thread), in order. */
static void nc_inbox_drain(struct nc_worker *nw)
{
    char buf[64];
    pthread_mutex_lock(&nw->mu);
    while (read(nw->pipe[0], buf, sizeof(buf)) > 0) {
    }
    __atomic_store_n(&nw->signaled, 0, __ATOMIC_RELEASE);
    struct nc_msg *msgs = nw->msgs;
    size_t n = nw->nmsgs;
    nw->msgs = NULL;
    nw->nmsgs = nw->cap = 0;
    pthread_mutex_unlock(&nw->mu);
    int64_t now = clock_wall_ms();
    for (size_t i = 0; i < n; i++) {
        struct nc_msg *m = &msgs[i];
        switch ((enum nc_msg_kind)m->kind) {
        case NC_MSG_ENTRY: {
            int slot = m->key_len ? nc_slot_of_key(nw, m->target, m->key, m->key_len) : -1;
            if (slot >= 0) {
                nccore_stream_apply(&nw->cache, (uint32_t)slot, m->id, m->key, m->key_len);
                if (m->lagged) nc_lag_count(nw, slot, m->id, now);
            }
            /* an entry of no namespace cached here evicts nothing: no fill of this worker can be
             * of its key (fills resolve keys with the same registry) */
            free(m->key);
            break;
        }
        case NC_MSG_EVICT: {
            int slot = nc_slot_of_key(nw, m->target, m->key, m->key_len);
            if (slot >= 0) {
                nccore_evict(&nw->cache, (uint32_t)slot, m->key, m->key_len, (enum nc_evict_cause)m->cause);
                if (m->lagged) nc_lag_count(nw, slot, m->id, now);
            }
            free(m->key);
            break;
        }
        case NC_MSG_RESET:
            for (size_t s = 0; s < nw->nc->nslots; s++)
                if (nw->nc->slots[s].stream == (int)m->target)
                    nccore_flush(&nw->cache, (uint32_t)s, (enum nc_evict_cause)m->cause);
            break;
        case NC_MSG_SERVE:
            nccore_set_serving(&nw->cache, m->target, 1);
            break;
        case NC_MSG_DOWN:
            nccore_set_serving(&nw->cache, m->target, 0);
            break;
        }
    }
    free(msgs);
}

static void nc_inbox_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    nc_inbox_drain(arg);
}

/* Append messages m[0..n) to worker k's inbox, waking it (any thread). */
static void nc_post_one(struct nearcache *nc, int k, const struct nc_msg *m, size_t n)
{
    struct nc_worker *nw = &nc->workers[k];
    pthread_mutex_lock(&nw->mu);
    if (nw->nmsgs + n > nw->cap) {
        nw->cap = (nw->nmsgs + n) * 2;
        nw->msgs = xrealloc(nw->msgs, nw->cap * sizeof(*nw->msgs));
    }
    for (size_t i = 0; i < n; i++) {
        struct nc_msg c = m[i];
        if (c.kind == NC_MSG_ENTRY || c.kind == NC_MSG_EVICT) c.key = xmemdup(m[i].key, m[i].key_len);
        nw->msgs[nw->nmsgs++] = c;
    }
    int wake = !nw->signaled;
    __atomic_store_n(&nw->signaled, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&nw->mu);
    if (wake && write(nw->pipe[1], "x", 1) < 0 && errno != EAGAIN)
        log_event(LOG_WARN, "near_cache_wake", NULL, "near cache: cannot wake worker %d: %s", k, strerror(errno));
}

/* Reader thread: append messages to every worker's inbox, waking each once. */
static void nc_post(struct nearcache *nc, const struct nc_msg *m, size_t n)
{
    if (n == 0) return;
    for (int k = 0; k < nc->nworkers; k++) nc_post_one(nc, k, m, n);
}

/* 1 when w may answer from slot's entries now: its reader vouched for them within NC_VOUCH_MS
 * of now (monotonic, read here: the reply is built now), and every message posted before that
 * vouch is applied (drained here when some are pending). */
static int nc_vouched(struct nc_worker *nw, int slot)
{
    const struct nc_stream *st = &nw->nc->streams[nw->nc->slots[slot].stream];
    /* the vouch first (acquire): the messages posted before it are then seen pending below */
    int64_t until = __atomic_load_n(&st->vouched_until_ms, __ATOMIC_ACQUIRE);
    if (__builtin_expect(st->sentinel, 0) &&
        sentinelwatch_generation(st->instance) != __atomic_load_n(&st->watch_gen, __ATOMIC_ACQUIRE))
        return 0;
    if (__atomic_load_n(&nw->signaled, __ATOMIC_ACQUIRE)) nc_inbox_drain(nw);
    return clock_mono_ms() < until;
}

/* ---- the request path ---- */

/* What a request of the near cache carries (req->nc, one heap block, freed with the request). */
enum nc_blob_kind { NC_BLOB_FILL = 1, NC_BLOB_WRITES, NC_BLOB_PREFETCH };

struct nc_fill {
    uint8_t kind; /* NC_BLOB_FILL */
    uint8_t resp3;
    struct nc_ticket ticket;
    const struct nc_read *row;
    int64_t sent_ms, near_ms;
    int64_t delay_until_ms;
    size_t argc;
    /* argc lengths (size_t), then the arguments' bytes one after the other */
    char data[];
};

struct nc_writes {
    uint8_t kind; /* NC_BLOB_WRITES */
    size_t len;
    char data[]; /* records: u32 slot, u32 length, key bytes */
};

/* MGET's missing keys, each read by a fill of its own after the MGET (their replies only stored). */
struct nc_prefetch_key {
    struct nc_ticket ticket;
    size_t off, len; /* the key in data */
};

struct nc_prefetch {
    uint8_t kind; /* NC_BLOB_PREFETCH */
    int64_t sent_ms, near_ms;
    size_t n;
    struct nc_prefetch_key *keys; /* points into data */
    char data[];                  /* the keys array, then the keys' bytes */
};

/* A writes blob holding records[0..len). */
static struct nc_writes *nc_writes_new(const char *records, size_t len)
{
    struct nc_writes *wr = xmalloc(sizeof(*wr) + len);
    wr->kind = NC_BLOB_WRITES;
    wr->len = len;
    if (len) memcpy(wr->data, records, len);
    return wr;
}

/* Append (slot, key) to a records buffer. */
static void nc_record(struct bytebuf *b, uint32_t slot, const char *key, size_t len)
{
    uint32_t l = (uint32_t)len;
    bytebuf_add(b, &slot, sizeof(slot));
    bytebuf_add(b, &l, sizeof(l));
    bytebuf_add(b, key, len);
}

/* Evict every record of p[0..n) from w's cache (a local write: the generation moves); with
 * others, in every other worker's cache too, before the write's reply leaves: their next read
 * drains its inbox first (nc_vouched), so no connection of this keygate reads the old value
 * after the acknowledgement. */
static void nc_evict_records(struct nc_worker *nw, const char *p, size_t n, int others)
{
    struct nc_msg stack_msgs[8], *msgs = stack_msgs;
    size_t nmsgs = 0, cap = sizeof(stack_msgs) / sizeof(stack_msgs[0]);
    others = others && nw->nc->nworkers > 1;
    size_t pos = 0;
    while (pos < n) {
        uint32_t slot, len;
        memcpy(&slot, p + pos, sizeof(slot));
        memcpy(&len, p + pos + 4, sizeof(len));
        nccore_local_write(&nw->cache, slot, p + pos + 8, len);
        if (others) {
            if (nmsgs == cap) {
                cap *= 2;
                msgs = msgs == stack_msgs ? memcpy(xmalloc(cap * sizeof(*msgs)), stack_msgs, sizeof(stack_msgs))
                                          : xrealloc(msgs, cap * sizeof(*msgs));
            }
            msgs[nmsgs++] = (struct nc_msg){.kind = NC_MSG_EVICT,
                                            .cause = NC_EVICT_WRITE,
                                            .target = (uint32_t)nw->nc->slots[slot].stream,
                                            .key = (char *)(p + pos + 8),
                                            .key_len = len};
        }
        pos += 8 + len;
    }
    for (int k = 0; nmsgs && k < nw->nc->nworkers; k++) /* one post (one wake-up) per other worker */
        if (k != nw->index) nc_post_one(nw->nc, k, msgs, nmsgs);
    if (msgs != stack_msgs) free(msgs);
}

/* The records of plan's invalidations whose namespace is followed, appended to b. */
static void nc_plan_records(struct nc_worker *nw, struct client *c, const struct plan *plan, struct bytebuf *b)
{
    for (uint32_t i = 0; i < plan->inval.n; i++) {
        int slot = nc_slot_for(nw, plan->inval.key[i].ns);
        uint32_t a = plan->inval.key[i].argi;
        if (slot >= 0) nc_record(b, (uint32_t)slot, c->argv[a], c->argvlen[a]);
    }
}

void nearcache_writes(struct client *c, struct request *req, const struct plan *plan)
{
    struct nc_worker *nw = nc_of(c->worker);
    if (!nw || plan->inval.n == 0) return;
    struct bytebuf b = {0};
    nc_plan_records(nw, c, plan, &b);
    nc_evict_records(nw, b.p, b.len, 0);
    assert(!req->nc);
    if (b.len) req->nc = nc_writes_new(b.p, b.len);
    bytebuf_free(&b);
}

void nearcache_queued(struct client *c, const struct plan *plan)
{
    struct nc_worker *nw = nc_of(c->worker);
    if (!nw || plan->inval.n == 0) return;
    size_t from = c->nc_multi.len;
    nc_plan_records(nw, c, plan, &c->nc_multi);
    nc_evict_records(nw, c->nc_multi.p + from, c->nc_multi.len - from, 0);
}

void nearcache_exec(struct client *c, struct request *req)
{
    struct nc_worker *nw = nc_of(c->worker);
    if (!nw || c->nc_multi.len == 0) return;
    nc_evict_records(nw, c->nc_multi.p, c->nc_multi.len, 0);
    assert(!req->nc);
    req->nc = nc_writes_new(c->nc_multi.p, c->nc_multi.len);
    c->nc_multi.len = 0;
}

void nearcache_write_replied(struct request *req)
{
    struct nc_writes *wr = req->nc;
    if (!wr || wr->kind != NC_BLOB_WRITES) return;
    struct nc_worker *nw = nc_of(req->worker);
    if (nw) nc_evict_records(nw, wr->data, wr->len, 1);
    /* a fill that started after the write was sent and was read before it may have been stored
     * meanwhile: this second eviction (and generation) comes before the client sees its reply */
}

/* The cached value of an entry, as the rows read it. */
static struct nc_value nc_value_of(const struct nc_entry *e)
{
    return (struct nc_value){.type = e->type,
                             .nelem = e->nelem,
                             .count = e->nelem,
                             .val = e->data + e->key_len,
                             .len = e->val_len};
}

/* MGET with every key in followed namespaces: answered when every key is cached (NEARCACHE_HIT);
 * else the keys not cached are prefetched by fills sent after the MGET (NEARCACHE_PREFETCH, req->nc
 * set), whose replies are stored only: the MGET's own reply is Redis's. */
static enum nearcache_verdict nc_try_mget(struct nc_worker *nw, struct client *c, struct request *req,
                                          const struct plan *plan, const struct policy_request *pr)
{
    size_t n = pr->argc - 1;
    struct nc_value stack_vals[16];
    struct nc_value *vals = n <= 16 ? stack_vals : xmalloc(n * sizeof(*vals));
    size_t missing = 0, missing_bytes = 0, uncacheable = 0;
    /* one namespace (the caller's check): vouched for once, BEFORE any entry is looked at: the
     * vouch drains the inbox, which may free entries (vals[] points into them) */
    int slot = nc_slot_for(nw, plan->ns);
    int vouched = slot >= 0 && nc_vouched(nw, slot) && nw->cache.ns[slot].serving;
    for (size_t i = 0; i < n; i++) {
        struct nc_entry *ent =
            vouched ? nccore_peek(&nw->cache, (uint32_t)slot, pr->argv[i + 1], pr->argvlen[i + 1], c->now_ms) : NULL;
        if (ent && ent->type != NC_T_BIG)
            vals[i] = nc_value_of(ent);
        else if (slot >= 0 && !ent)
            missing++, missing_bytes += pr->argvlen[i + 1], vals[i].type = UINT8_MAX; /* to be prefetched */
        else
            uncacheable++; /* too large, or not followed: neither answered nor prefetched */
    }
    enum nearcache_verdict v = NEARCACHE_PASS;
    if (missing == 0 && uncacheable == 0) {
        for (size_t i = 0; i < n; i++) /* counted as hits, made the most recent */
            (void)nccore_find(&nw->cache, (uint32_t)slot, pr->argv[i + 1], pr->argvlen[i + 1], c->now_ms);
        nw->out.len = 0;
        ncpolicy_render_mget(vals, n, c->resp3, &nw->out);
        request_complete(req, nw->out.p, nw->out.len);
        if (nw->out.cap > (1u << 20)) bytebuf_free(&nw->out);
        v = NEARCACHE_HIT;
    } else if (missing > 0) {
        if (missing > NEARCACHE_PREFETCH_MAX) missing = NEARCACHE_PREFETCH_MAX;
        struct nc_prefetch *pf = xmalloc(sizeof(*pf) + missing * sizeof(struct nc_prefetch_key) + missing_bytes);
        pf->kind = NC_BLOB_PREFETCH;
        pf->sent_ms = clock_wall_ms();
        pf->near_ms = plan->ns->near_cache_ms;
        pf->keys = (struct nc_prefetch_key *)(void *)pf->data;
        pf->n = 0;
        char *p = pf->data + missing * sizeof(struct nc_prefetch_key);
        for (size_t i = 0; i < n && pf->n < missing; i++) {
            if (vals[i].type != UINT8_MAX) continue;
            nw->cache.ns[slot].misses++;
            struct nc_prefetch_key *k = &pf->keys[pf->n++];
            k->ticket = nccore_ticket(&nw->cache, (uint32_t)slot);
            k->off = (size_t)(p - pf->data);
            k->len = pr->argvlen[i + 1];
            memcpy(p, pr->argv[i + 1], k->len);
            p += k->len;
        }
        assert(!req->nc);
        req->nc = pf;
        v = NEARCACHE_PREFETCH;
    }
    if (vals != stack_vals) free(vals);
    return v;
}

size_t nearcache_fill_limit(const struct request *req)
{
    struct nc_worker *nw = nc_of(req->worker);
    return nw ? nccore_max_value(&nw->cache) : 0;
}

char nearcache_fill_mode(const struct request *req)
{
    const struct nc_fill *f = req->nc;
    return f && f->kind == NC_BLOB_FILL ? f->row->mode : 'n';
}

size_t nearcache_prefetch_count(const struct request *req)
{
    const struct nc_prefetch *pf = req->nc;
    return pf && pf->kind == NC_BLOB_PREFETCH ? pf->n : 0;
}

const char *nearcache_prefetch_key(const struct request *req, size_t i, size_t *len)
{
    const struct nc_prefetch *pf = req->nc;
    assert(pf && pf->kind == NC_BLOB_PREFETCH && i < pf->n);
    *len = pf->keys[i].len;
    return pf->data + pf->keys[i].off;
}

void nearcache_prefetch_reply(struct request *req, size_t i, const char *reply, size_t len)
{
    struct nc_prefetch *pf = req->nc;
    struct nc_worker *nw = nc_of(req->worker);
    assert(pf && pf->kind == NC_BLOB_PREFETCH && i < pf->n);
    uint8_t type;
    int64_t pttl;
    uint32_t nelem, count;
    int partial;
    struct bytebuf value = {0};
    if (nw && reply && ncpolicy_fill_parse(reply, len, &type, &pttl, &nelem, &count, &partial, &value) == 0 &&
        !partial) {
        int64_t life = pf->near_ms;
        if (pttl >= 0 && pttl < life) life = pttl;
        (void)nccore_store(&nw->cache, &pf->keys[i].ticket, pf->data + pf->keys[i].off, pf->keys[i].len, type, nelem,
                           value.p, value.len, pf->sent_ms + life, NC_T_BIG);
    }
    bytebuf_free(&value);
}

/* A read of a near-cache namespace that the cache may answer: forwarded plainly on the shared
 * connection (no write, no TTL rewrite, no transaction, no pin). nearcache_hit_now and
 * nearcache_try both start here. */
static int nc_plain_cached_read(const struct client *c, const struct plan *plan)
{
    return plan->kind == PLAN_FORWARD && plan->ns && plan->ns->near_cache_ms > 0 && !plan->writes &&
           plan->flow == FLOW_SHARED && c->session.mode == SESSION_NORMAL && !plan->nappend && !plan->ttl.nfix &&
           !plan->ttl.getex && !c->watch_pin;
}

int nearcache_hit_now(struct client *c, const struct plan *plan, const struct policy_request *pr, const char **reply,
                      size_t *len)
{
    struct nc_worker *nw = nc_of(c->worker);
    /* nearcache_try's conditions, and one key: MGET goes through nearcache_try */
    if (!nw || !nc_plain_cached_read(c, plan) || plan->merge != MERGE_NONE) return 0;
    const struct nc_read *row = ncpolicy_read(pr->cmd);
    if (!row || cmdclass_id(pr->cmd) == CID_MGET) return 0;
    int slot = nc_slot_for(nw, plan->ns);
    if (slot < 0 || !nc_vouched(nw, slot)) return 0;
    struct nc_entry *e = nccore_find_hit(&nw->cache, (uint32_t)slot, pr->argv[1], pr->argvlen[1], c->now_ms, NC_T_BIG);
    if (!e) return 0;
    struct nc_value v = nc_value_of(e);
    if (nw->out.cap > (1u << 20)) bytebuf_free(&nw->out); /* the last large value's buffer is not kept */
    nw->out.len = 0;
    row->render(&v, pr->argc, pr->argv, pr->argvlen, c->resp3, &nw->out);
    *reply = nw->out.p;
    *len = nw->out.len;
    return 1;
}

enum nearcache_verdict nearcache_try(struct client *c, struct request *req, const struct plan *plan,
                                     const struct policy_request *pr)
{
    struct nc_worker *nw = nc_of(c->worker);
    if (!nw || !nc_plain_cached_read(c, plan)) return NEARCACHE_PASS;
    if (plan->merge == MERGE_NONE && cmdclass_id(pr->cmd) == CID_MGET && plan->nmore_ns == 0)
        return nc_try_mget(nw, c, req, plan, pr); /* one namespace; split: forwarded */
    if (plan->merge != MERGE_NONE) return NEARCACHE_PASS;
    const struct nc_read *row = ncpolicy_read(pr->cmd);
    if (!row) return NEARCACHE_PASS;
    int slot = nc_slot_for(nw, plan->ns);
    if (slot < 0) return NEARCACHE_PASS;
    struct nc_entry *e = NULL;
    if (nc_vouched(nw, slot))
        e = nccore_find(&nw->cache, (uint32_t)slot, pr->argv[1], pr->argvlen[1], c->now_ms);
    else
        nw->cache.ns[slot].misses++; /* not vouched for: the fill's value is kept, served once it is */
    if (e && e->type == NC_T_BIG) return NEARCACHE_PASS; /* too large to cache: as if not a cached read */
    if (e) {
        struct nc_value v = nc_value_of(e);
        nw->out.len = 0;
        row->render(&v, pr->argc, pr->argv, pr->argvlen, c->resp3, &nw->out);
        request_complete(req, nw->out.p, nw->out.len);
        if (nw->out.cap > (1u << 20)) bytebuf_free(&nw->out); /* a large value's buffer is not kept */
        return NEARCACHE_HIT;
    }
    /* a miss: the fill reads the whole value on the primary; the reply is rendered from it */
    size_t bytes = sizeof(struct nc_fill) + pr->argc * sizeof(size_t);
    for (size_t i = 0; i < pr->argc; i++) bytes += pr->argvlen[i];
    struct nc_fill *f = xmalloc(bytes);
    f->kind = NC_BLOB_FILL;
    f->resp3 = (uint8_t)c->resp3;
    f->ticket = nccore_ticket(&nw->cache, (uint32_t)slot);
    f->row = row;
    f->sent_ms = clock_wall_ms();
    f->near_ms = plan->ns->near_cache_ms;
    f->delay_until_ms = nc_fill_delay_ms ? clock_mono_ms() + nc_fill_delay_ms : 0;
    f->argc = pr->argc;
    size_t *lens = (size_t *)(void *)f->data;
    char *p = f->data + pr->argc * sizeof(size_t);
    for (size_t i = 0; i < pr->argc; i++) {
        lens[i] = pr->argvlen[i];
        memcpy(p, pr->argv[i], pr->argvlen[i]);
        p += pr->argvlen[i];
    }
    assert(!req->nc);
    req->nc = f;
    return NEARCACHE_FILL;
}

/* The test hook's wait: this thread sleeps (the fill's worker only; tests run one client). */
static void nc_fill_wait(const struct nc_fill *f)
{
    int64_t left = f->delay_until_ms - clock_mono_ms();
    if (left <= 0) return;
    struct timespec ts = {.tv_sec = left / 1000, .tv_nsec = (left % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void nearcache_fill_reply(struct request *req, const char *reply, size_t len, const char *fail)
{
    struct nc_fill *f = req->nc;
    assert(f && f->kind == NC_BLOB_FILL);
    if (!reply) {
        request_answer_error(req, fail);
        return;
    }
    if (f->delay_until_ms) {
        nc_fill_wait(f);
        /* readers' messages that came meanwhile are applied first: the race the hook makes */
        struct nc_worker *nw = nc_of(req->worker);
        if (nw) nc_inbox_drain(nw);
    }
    struct nc_worker *nw = nc_of(req->worker);
    uint8_t type;
    int64_t pttl;
    uint32_t nelem, count;
    int partial;
    struct bytebuf value = {0};
    if (!nw || ncpolicy_fill_parse(reply, len, &type, &pttl, &nelem, &count, &partial, &value) != 0) {
        request_answer(req, reply, len); /* an error (or anything else): the client's as it came */
        bytebuf_free(&value);
        return;
    }
    const size_t *lens = (const size_t *)(const void *)f->data;
    const char *argv_stack[16];
    const char **argv = f->argc <= 16 ? argv_stack : xmalloc(f->argc * sizeof(*argv));
    const char *p = f->data + f->argc * sizeof(size_t);
    for (size_t i = 0; i < f->argc; i++) {
        argv[i] = p;
        p += lens[i];
    }
    /* the entry never outlives the key: its PTTL counted from when the fill was sent */
    int64_t life = f->near_ms;
    if (pttl >= 0 && pttl < life) life = pttl;
    /* too large: an NC_T_BIG entry makes its next reads go to Redis as they came, not as fills;
     * a partial read (a value too large to read whole) leaves the same mark */
    if (partial)
        (void)nccore_store(&nw->cache, &f->ticket, argv[1], lens[1], NC_T_BIG, 0, NULL, 0, f->sent_ms + life, NC_T_BIG);
    else
        (void)nccore_store(&nw->cache, &f->ticket, argv[1], lens[1], type, nelem, value.p, value.len, f->sent_ms + life,
                           NC_T_BIG);
    struct nc_value v = {.type = type, .nelem = nelem, .count = count, .val = value.p, .len = value.len};
    struct bytebuf out = {0};
    f->row->render(&v, f->argc, argv, lens, f->resp3, &out);
    request_answer(req, out.p, out.len);
    bytebuf_free(&out);
    bytebuf_free(&value);
    if (argv != argv_stack) free(argv);
}

/* ---- the readers (one thread per instance, a connection of its own) ---- */

static int nc_stopping(const struct nearcache *nc)
{
    return __atomic_load_n(&nc->stop, __ATOMIC_ACQUIRE);
}

/* Sleep ms (in slices, so a stop is seen within 100 ms); 1 when stopping. */
static int nc_sleep(struct nearcache *nc, int64_t ms)
{
    while (ms > 0 && !nc_stopping(nc)) {
        int64_t step = ms < 100 ? ms : 100;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = step * 1000000};
        nanosleep(&ts, NULL);
        ms -= step;
    }
    return nc_stopping(nc);
}

static void nc_id_format(struct nc_id id, char *buf, size_t len)
{
    snprintf(buf, len, "%llu-%llu", (unsigned long long)id.ms, (unsigned long long)id.seq);
}

/* The most namespaces one reader follows. */
#define NC_READER_MAX 64

/* A reply that is an array (else NULL): hiredis's shape of every reply read here. */
static int nc_is_array(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ARRAY;
}

/* The value of field `name` in a flat field/value array (XINFO STREAM), or NULL. */
static const redisReply *nc_field(const redisReply *r, const char *name)
{
    if (!nc_is_array(r)) return NULL;
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING || r->element[i]->type == REDIS_REPLY_STATUS)
            if (strcmp(r->element[i]->str, name) == 0) return r->element[i + 1];
    return NULL;
}

/* An id field of XINFO STREAM (0 when absent or not an id). */
static struct nc_id nc_field_id(const redisReply *info, const char *name)
{
    struct nc_id id = {0, 0};
    const redisReply *f = nc_field(info, name);
    if (f && f->type == REDIS_REPLY_STRING && nccore_id_parse(f->str, f->len, &id) != 0) id = (struct nc_id){0, 0};
    return id;
}

/* The entries array of a one-stream XREAD reply ([[stream, [[id, [f, v...]]...]]]), or NULL. */
static const redisReply *nc_xread_entries(const redisReply *x)
{
    const redisReply *sr = nc_is_array(x) && x->elements == 1 ? x->element[0] : NULL;
    return nc_is_array(sr) && sr->elements == 2 && nc_is_array(sr->element[1]) ? sr->element[1] : NULL;
}

/* One entry [id, [f, v...]] of an XREAD reply: its field/value array, *id parsed; NULL when it is
 * not an entry. */
static const redisReply *nc_entry(const redisReply *e, struct nc_id *id)
{
    if (!nc_is_array(e) || e->elements != 2 || e->element[0]->type != REDIS_REPLY_STRING ||
        nccore_id_parse(e->element[0]->str, e->element[0]->len, id) != 0)
        return NULL;
    return e->element[1];
}

/* Append one command of argc words (NUL-terminated) to conn. */
static int nc_append(struct syncconn *conn, int argc, const char **argv)
{
    size_t lens[8];
    assert(argc <= 8);
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    return syncconn_append(conn, argc, argv, lens);
}

/* Send argv and read its reply (NULL: the connection failed). */
static redisReply *nc_command(struct syncconn *conn, int argc, const char **argv)
{
    if (nc_append(conn, argc, argv) != 0 || syncconn_flush(conn) != 0) return NULL;
    return syncconn_read(conn);
}

/* Append XREAD [BLOCK ms] COUNT 100 STREAMS <stream> <cursor>. */
static int nc_append_xread(struct syncconn *conn, const struct nc_stream *st, int block)
{
    char id[48];
    nc_id_format(st->pos.cursor, id, sizeof(id));
    if (block) {
        const char *argv[] = {"XREAD", "BLOCK", NC_BLOCK_MS, "COUNT", "100", "STREAMS", st->key, id};
        return nc_append(conn, 8, argv);
    }
    const char *argv[] = {"XREAD", "COUNT", "100", "STREAMS", st->key, id};
    return nc_append(conn, 6, argv);
}

/* HSET markers group "<cursor> <ms>": where this group stands (the trim keeps what it has not
 * read); and this process's field in the writers hash: "<ms>\n<prefix>\n..." (what its writes
 * announce on this instance now). */
static int nc_markers_write(struct nearcache *nc, struct syncconn *conn, const struct nc_stream *st)
{
    char id[48], val[96], ms[32];
    nc_id_format(st->pos.cursor, id, sizeof(id));
    int64_t now = clock_wall_ms();
    snprintf(val, sizeof(val), "%s %lld", id, (long long)now);
    snprintf(ms, sizeof(ms), "%lld\n", (long long)now);
    pthread_mutex_lock(&nc->pub_mu);
    const char *pub = nc->published[st->instance] ? nc->published[st->instance] : "";
    char *mine = xmalloc(strlen(ms) + strlen(pub) + 1);
    strcpy(mine, ms);
    strcat(mine, pub);
    pthread_mutex_unlock(&nc->pub_mu);
    const char *m[] = {"HSET", st->markers, nc->group, val}, *w[] = {"HSET", st->writers, nc->self, mine};
    int rc = nc_append(conn, 4, m) == 0 && nc_append(conn, 4, w) == 0 && syncconn_flush(conn) == 0 ? 0 : -1;
    free(mine);
    for (int i = 0; rc == 0 && i < 2; i++) {
        redisReply *r = syncconn_read(conn);
        if (!r) return -1;
        freeReplyObject(r);
    }
    return rc;
}

/* XTRIM the stream MINID to its lowest marker refreshed within near-cache-marker-timeout. */
static int nc_trim(struct nearcache *nc, struct syncconn *conn, const struct nc_stream *st)
{
    int64_t now = clock_wall_ms();
    const char *argv[] = {"HGETALL", st->markers};
    redisReply *r = nc_command(conn, 2, argv);
    if (!r) return -1;
    struct nc_id min = {UINT64_MAX, UINT64_MAX};
    int any = 0;
    for (size_t i = 0; nc_is_array(r) && i + 1 < r->elements; i += 2) {
        const redisReply *v = r->element[i + 1];
        if (v->type != REDIS_REPLY_STRING) continue;
        const char *sp = memchr(v->str, ' ', v->len);
        struct nc_id id;
        long long at = sp ? atoll(sp + 1) : 0;
        if (!sp || nccore_id_parse(v->str, (size_t)(sp - v->str), &id) != 0) continue;
        if (now - at > nc->marker_timeout_ms) continue; /* a group gone quiet no longer pins the stream */
        if (!any || nccore_id_cmp(id, min) < 0) min = id;
        any = 1;
    }
    freeReplyObject(r);
    if (!any || (min.ms == 0 && min.seq == 0)) return 0;
    char id[48];
    nc_id_format(min, id, sizeof(id));
    const char *trim[] = {"XTRIM", st->key, "MINID", id};
    r = nc_command(conn, 4, trim);
    if (!r) return -1;
    freeReplyObject(r);
    return 0;
}

/* A message into the batch. */
static void nc_batch_add(struct nc_msg **b, size_t *n, size_t *cap, struct nc_msg m)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *b = xrealloc(*b, *cap * sizeof(**b));
    }
    (*b)[(*n)++] = m;
}

/* A writers-hash field is live while refreshed within this (its reader writes it every second). */
#define NC_WRITER_LIVE_MS 5000

/* 1 when prefix p lies inside one of the "\n"-separated prefixes in list[0..len). */
static int nc_prefix_covered(const char *p, size_t plen, const char *list, size_t len)
{
    size_t i = 0;
    while (i < len) {
        const char *nl = memchr(list + i, '\n', len - i);
        size_t l = nl ? (size_t)(nl - (list + i)) : len - i;
        if (l <= plen && memcmp(list + i, p, l) == 0) return 1; /* "" (a default line) covers every key */
        i += l + 1;
    }
    return 0;
}

/*
 * The writers hash of rd's instance: which of its namespaces every live keygate announces
 * (covered[k] for the reader's k-th slot). A keygate whose registry does not near-cache a
 * prefix writes its keys without an XADD: a namespace that some live writer does not cover
 * is not served here (who: the last such keygate's field). Fields not refreshed within the
 * marker timeout are removed. 0, or -1 on a connection error.
 */
static int nc_writers_read(struct nearcache *nc, struct syncconn *conn, const struct nc_stream *st, const size_t *idx,
                           size_t n, int *covered, char *who, size_t who_len)
{
    const char *argv[] = {"HGETALL", st->writers};
    redisReply *r = nc_command(conn, 2, argv);
    if (!r) return -1;
    int64_t now = clock_wall_ms();
    for (size_t k = 0; k < n; k++) covered[k] = 1;
    for (size_t i = 0; nc_is_array(r) && i + 1 < r->elements; i += 2) {
        const redisReply *f = r->element[i], *v = r->element[i + 1];
        if (v->type != REDIS_REPLY_STRING || f->type != REDIS_REPLY_STRING) continue;
        const char *nl = memchr(v->str, '\n', v->len);
        long long at = atoll(v->str);
        if (now - at > nc->marker_timeout_ms) { /* a process long gone: its field goes */
            const char *del[] = {"HDEL", st->writers, f->str};
            redisReply *d = nc_command(conn, 3, del);
            if (!d) {
                freeReplyObject(r);
                return -1;
            }
            freeReplyObject(d);
            continue;
        }
        if (now - at > NC_WRITER_LIVE_MS || !nl) continue;
        const char *list = nl + 1;
        size_t len = v->len - (size_t)(list - v->str);
        for (size_t k = 0; k < n; k++)
            if (covered[k] && !nc_prefix_covered(nc->slots[idx[k]].prefix, nc->slots[idx[k]].prefix_len, list, len)) {
                covered[k] = 0;
                snprintf(who, who_len, "%s", f->str);
            }
    }
    freeReplyObject(r);
    return 0;
}

/* CLIENT TRACKING's stream source (tracker.h): whether this reader vouches for every namespace
 * of its instance, told on a change, and every gap (reader thread). */
static void nc_tell_tracker(struct nearcache *nc, struct nc_stream *st, int vouched, int gap)
{
    if (!gap && st->tracker_told == vouched) return;
    tracker_stream_state(nc->proxy, st->instance, vouched, gap);
    st->tracker_told = vouched;
}

/* The keys of a batch's ENTRY and EVICT messages to CLIENT TRACKING, as the stream's
 * invalidations (reader thread): those no blocking read told before (`lagged`). */
static void nc_tell_keys(struct nearcache *nc, const struct nc_stream *st, const struct nc_msg *m, size_t n)
{
    const char **keys = xmalloc((n ? n : 1) * sizeof(*keys));
    size_t *lens = xmalloc((n ? n : 1) * sizeof(*lens)), k = 0;
    for (size_t i = 0; i < n; i++)
        if ((m[i].kind == NC_MSG_ENTRY || m[i].kind == NC_MSG_EVICT) && m[i].key_len && m[i].lagged)
            keys[k] = m[i].key, lens[k++] = m[i].key_len;
    if (k) tracker_stream_keys(nc->proxy, st->instance, keys, lens, k);
    free(keys);
    free(lens);
}

/* Log a gap of stream st (why): its instance's namespaces are flushed. */
static void nc_log_gap(const struct nearcache *nc, const struct nc_stream *st, int si, const char *why)
{
    log_event(LOG_WARN, "near_cache_gap", NULL,
              "near cache: stream %s has a gap past the cursor (%s): the namespaces of instance '%s' are flushed",
              st->key, why, nc->readers[si].conf.name);
}

/*
 * One read of the stream: MULTI / XINFO STREAM / XREAD COUNT 100 / EXEC, so the gap check and
 * the entries describe the same moment. Posts resets, entries. Returns 1 when more entries are
 * waiting, 0 when caught up (*vouch: whether the read may vouch: not when the stream key holds
 * another type), -1 on a connection error. What the stream says against what this reader has
 * applied is nccore_stream_verdict's (nccore.h: reset, gap, broken, apply); a reset or a gap
 * flushes the instance's namespaces.
 */
static int nc_read_once(struct nearcache *nc, struct syncconn *conn, struct nc_stream *st, int si, int *vouch)
{
    const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"}, *xinfo[] = {"XINFO", "STREAM", st->key};
    *vouch = 0;
    if (nc_append(conn, 1, multi) != 0 || nc_append(conn, 3, xinfo) != 0 || nc_append_xread(conn, st, 0) != 0 ||
        nc_append(conn, 1, exec) != 0 || syncconn_flush(conn) != 0)
        return -1;
    for (int k = 0; k < 3; k++) { /* +OK, +QUEUED, +QUEUED */
        redisReply *r = syncconn_read(conn);
        if (!r) return -1;
        freeReplyObject(r);
    }
    redisReply *r = syncconn_read(conn);
    if (!r) return -1;
    if (!nc_is_array(r) || r->elements != 2) {
        log_event(LOG_WARN, "near_cache_read", NULL, "near cache: unexpected reply to the stream read (type %d)",
                  r->type);
        freeReplyObject(r);
        return -1;
    }
    struct nc_msg *batch = NULL;
    size_t nb = 0, cap = 0;
    const redisReply *in = r->element[0], *x = r->element[1];
    struct nc_stream_info info = {.kind = NC_INFO_STREAM};
    if (in->type == REDIS_REPLY_ERROR && strncmp(in->str, "WRONGTYPE", 9) == 0)
        info.kind = NC_INFO_WRONGTYPE;
    else if (in->type == REDIS_REPLY_ERROR || !nc_is_array(in)) /* no such key */
        info.kind = NC_INFO_ABSENT;
    if (info.kind == NC_INFO_STREAM) {
        info.last = nc_field_id(in, "last-generated-id");
        info.maxdel = nc_field_id(in, "max-deleted-entry-id");
        const redisReply *ea = nc_field(in, "entries-added");
        info.added = ea && ea->type == REDIS_REPLY_INTEGER ? ea->integer : 0;
    }
    int more = 0;
    *vouch = 1;
    enum nc_stream_verdict v = nccore_stream_verdict(&st->pos, &info);
    switch (v) {
    case NC_STREAM_BROKEN:
        nc_log_gap(nc, st, si, "the key is not a stream: nothing is served until it is deleted");
        *vouch = 0;
        break;
    case NC_STREAM_GAP:
        nc_log_gap(nc, st, si,
                   info.kind == NC_INFO_ABSENT
                       ? "it was deleted"
                       : "entries this keygate had not read were deleted, or it was made again");
        break;
    case NC_STREAM_RESET:
    case NC_STREAM_NONE:
        break;
    case NC_STREAM_APPLY: {
        size_t got = 0;
        const redisReply *es = nc_xread_entries(x);
        for (size_t j = 0; es && j < es->elements; j++) {
            struct nc_id id;
            const redisReply *fv = nc_entry(es->element[j], &id);
            if (!fv) continue;
            got++;
            st->pos.cursor = id;
            st->pos.seen_added++;
            int any = 0;
            for (size_t f = 0; nc_is_array(fv) && f + 1 < fv->elements; f += 2) {
                if (fv->element[f]->type != REDIS_REPLY_STRING || strcmp(fv->element[f]->str, "k") != 0) continue;
                const redisReply *key = fv->element[f + 1];
                nc_batch_add(&batch, &nb, &cap,
                             (struct nc_msg){.kind = NC_MSG_ENTRY,
                                             .lagged = nccore_id_cmp(id, st->blocked) > 0,
                                             .target = (uint32_t)si,
                                             .id = id,
                                             .key = key->str,
                                             .key_len = key->len});
                any = 1;
            }
            if (!any) /* an entry without a k field still moves the cursor (nothing to evict) */
                nc_batch_add(&batch, &nb, &cap,
                             (struct nc_msg){.kind = NC_MSG_ENTRY, .target = (uint32_t)si, .id = id, .key = ""});
        }
        more = got >= 100;
        if (!more && nccore_stream_counts_differ(&st->pos, &info)) {
            nc_log_gap(nc, st, si, "its entries-added count differs from the entries read: made again");
            v = NC_STREAM_GAP;
        }
        break;
    }
    }
    /* the flush: alone in the batch, or after the entries of a read whose counts did not add up */
    if (v == NC_STREAM_RESET || v == NC_STREAM_GAP || v == NC_STREAM_BROKEN)
        nc_batch_add(&batch, &nb, &cap,
                     (struct nc_msg){.kind = NC_MSG_RESET,
                                     .cause = v == NC_STREAM_RESET ? NC_EVICT_RESET : NC_EVICT_GAP,
                                     .target = (uint32_t)si});
    nc_post(nc, batch, nb); /* copies the keys: the reply is freed below */
    nc_tell_keys(nc, st, batch, nb);
    if (v == NC_STREAM_GAP || v == NC_STREAM_BROKEN)
        nc_tell_tracker(nc, st, v == NC_STREAM_GAP && st->tracker_told == 1, 1);
    free(batch);
    freeReplyObject(r);
    if (more) *vouch = 0;
    return more;
}

/* Every slot of the reader stops serving (its connection is down, or its stream is broken). */
static void nc_down(struct nearcache *nc, struct nc_stream *st, const size_t *idx, size_t n, int *serving)
{
    struct nc_msg m[NC_READER_MAX];
    size_t k = 0;
    nc_tell_tracker(nc, st, 0, 0);
    __atomic_store_n(&st->vouched_until_ms, 0, __ATOMIC_RELEASE);
    for (size_t i = 0; i < n; i++) {
        if (serving[i]) m[k++] = (struct nc_msg){.kind = NC_MSG_DOWN, .target = (uint32_t)idx[i]};
        serving[i] = 0;
    }
    nc_post(nc, m, k);
}

/* The slots of stream si, into idx (returns how many, at most NC_READER_MAX). */
static size_t nc_reader_slots(const struct nearcache *nc, int si, size_t *idx)
{
    size_t n = 0;
    for (size_t s = 0; s < nc->nslots; s++) {
        if (nc->slots[s].stream != si) continue;
        if (n == NC_READER_MAX) { /* never served (its writes still carry their XADD) */
            log_event(LOG_WARN, "near_cache", NULL, "near cache: more than %d namespaces on '%s': '%s' is not cached",
                      NC_READER_MAX, nc->readers[si].conf.name, nc->slots[s].prefix);
            continue;
        }
        idx[n++] = s;
    }
    return n;
}

/* Read the writers hash; a slot that serves and is no longer covered stops serving now (posted
 * before the log line says so), the rest waits for the next caught-up read (nc_serve). */
static int nc_writers_check(struct nearcache *nc, struct syncconn *conn, const struct nc_stream *st, const size_t *idx,
                            size_t n, int *serving, int *covered)
{
    char who[160] = "";
    if (nc_writers_read(nc, conn, st, idx, n, covered, who, sizeof(who)) != 0) return -1;
    struct nc_msg m[NC_READER_MAX];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!covered[i] && serving[i]) {
            m[k++] = (struct nc_msg){.kind = NC_MSG_DOWN, .target = (uint32_t)idx[i]};
            serving[i] = 0;
        }
    nc_post(nc, m, k);
    for (size_t i = 0; k > 0 && i < n; i++)
        if (!covered[i])
            log_event(LOG_WARN, "near_cache_skew", NULL,
                      "near cache: keygate %s does not announce writes to '%s' (its registry has no near-cache= "
                      "there): '%s' is not served from the cache until every keygate does",
                      who, nc->slots[idx[i]].prefix, nc->slots[idx[i]].prefix);
    return 0;
}

/*
 * After a read that may vouch: slots whose writers all announce them (covered) serve, the
 * others do not; a slot that serves again is flushed first (writes made meanwhile by a
 * keygate that did not announce them left no invalidation).
 */
static void nc_serve(struct nearcache *nc, const size_t *idx, size_t n, int *serving, const int *covered)
{
    struct nc_msg m[NC_READER_MAX];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (covered[i] == serving[i]) continue;
        m[k++] = (struct nc_msg){.kind = covered[i] ? NC_MSG_SERVE : NC_MSG_DOWN, .target = (uint32_t)idx[i]};
        serving[i] = covered[i];
    }
    nc_post(nc, m, k);
}

/* The primary a Sentinel instance's reader reads from. */
struct nc_primary {
    struct slotmap_node node; /* host "" before the first */
    char replid[48];          /* INFO replication's master_replid there */
    uint64_t gen;             /* the watcher's generation when it was confirmed */
};

/* master_replid of INFO replication's text ("" when absent). */
static void nc_replid(const redisReply *r, char *out, size_t len)
{
    out[0] = '\0';
    const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "master_replid:") : NULL;
    if (!p) return;
    p += strlen("master_replid:");
    size_t n = strcspn(p, "\r\n");
    snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), p);
}

/*
 * A connection to a Sentinel instance's confirmed primary (the watcher's), or NULL: err empty
 * when there is none confirmed yet, else why the connection failed. A primary other than the
 * last one read from (another address, or another replication id at the same address: a node
 * that was demoted, or restarted without its data) resets the reader: the new primary may lack
 * writes the cache saw, so its first read flushes the instance's namespaces and starts from the
 * new primary's stream.
 */
static struct syncconn *nc_open_primary(struct nearcache *nc, struct nc_reader *rd, struct nc_primary *last, char *err,
                                        size_t errlen)
{
    struct nc_stream *st = &nc->streams[rd->stream];
    struct sentinelwatch_state ws;
    err[0] = '\0';
    if (sentinelwatch_get(st->instance, &ws) != 0 || !ws.confirmed || !ws.primary.host[0]) return NULL;
    struct syncconn *conn =
        syncconn_open_node(&rd->conf, ws.primary.host, ws.primary.port, 2000, nc->halt, err, errlen);
    if (!conn) return NULL;
    const char *info[] = {"INFO", "replication"};
    redisReply *r = nc_command(conn, 2, info);
    if (!r) {
        snprintf(err, errlen, "%s", syncconn_error(conn));
        syncconn_close(conn);
        return NULL;
    }
    char replid[48];
    nc_replid(r, replid, sizeof(replid));
    int master = r->type == REDIS_REPLY_STRING && strstr(r->str, "role:master") != NULL;
    freeReplyObject(r);
    if (!master) { /* the watcher will see it too: not a primary to read from */
        snprintf(err, errlen, "%.200s:%d is not a primary", ws.primary.host, ws.primary.port);
        syncconn_close(conn);
        return NULL;
    }
    int moved =
        last->node.host[0] && (last->node.port != ws.primary.port || strcmp(last->node.host, ws.primary.host) != 0 ||
                               strcmp(last->replid, replid) != 0);
    if (moved) {
        log_event(LOG_WARN, "near_cache_primary", NULL,
                  "near cache: instance '%s' has a new primary %s:%d (was %s:%d): its namespaces are flushed and "
                  "read from the new primary's stream",
                  rd->conf.name, ws.primary.host, ws.primary.port, last->node.host, last->node.port);
        st->pos.has_read = 0; /* the first read resets */
    }
    last->node = ws.primary;
    snprintf(last->replid, sizeof(last->replid), "%s", replid);
    last->gen = ws.generation;
    __atomic_store_n(&st->watch_gen, ws.generation, __ATOMIC_RELEASE);
    return conn;
}

/* 1 when the watcher no longer says what it said when the reader connected to `p`: another
 * primary, or none confirmed (a failover under way). The same primary confirmed again under a
 * newer generation is adopted (a false alarm: +odown, then -odown). */
static int nc_primary_moved(struct nc_stream *st, struct nc_primary *p)
{
    struct sentinelwatch_state ws;
    if (sentinelwatch_get(st->instance, &ws) != 0) return 1;
    if (ws.generation == p->gen) return 0;
    if (!ws.confirmed || ws.primary.port != p->node.port || strcmp(ws.primary.host, p->node.host) != 0) return 1;
    p->gen = ws.generation;
    __atomic_store_n(&st->watch_gen, ws.generation, __ATOMIC_RELEASE);
    return 0;
}

static void *nc_reader_main(void *arg)
{
    struct nc_reader *rd = arg;
    struct nearcache *nc = rd->nc;
    int si = rd->stream;
    struct nc_stream *st = &nc->streams[si];
    size_t idx[NC_READER_MAX];
    size_t n = nc_reader_slots(nc, si, idx);
    int serving[NC_READER_MAX] = {0}, covered[NC_READER_MAX], was_covered[NC_READER_MAX];
    for (size_t k = 0; k < n; k++) covered[k] = was_covered[k] = 1;
    struct syncconn *conn = NULL;
    struct nc_primary primary = {0}; /* a Sentinel instance's: the node and replication id read from */
    int64_t backoff = 100, next_marker = 0, next_trim = clock_mono_ms() + nc->trim_interval_ms;
    while (!nc_stopping(nc)) {
        if (!conn) {
            char err[256];
            conn = st->sentinel ? nc_open_primary(nc, rd, &primary, err, sizeof(err))
                                : syncconn_open_stoppable(&rd->conf, 2000, nc->halt, err, sizeof(err));
            if (!conn && st->sentinel && !err[0]) { /* no confirmed primary yet: nothing is served */
                nc_down(nc, st, idx, n, serving);
                if (nc_sleep(nc, 100)) break;
                continue;
            }
            if (!conn) {
                if (nc_stopping(nc)) break;
                log_event(LOG_WARN, "near_cache_reader", NULL, "near cache: stream reader for '%s' cannot connect: %s",
                          rd->conf.name, err);
                if (nc_sleep(nc, backoff)) break;
                backoff = backoff < 2000 ? backoff * 2 : 2000;
                continue;
            }
            backoff = 100;
            char name[64];
            snprintf(name, sizeof(name), "keygate-nearcache-%ld", (long)getpid());
            const char *setname[] = {"CLIENT", "SETNAME", name};
            redisReply *nr = nc_command(conn, 3, setname);
            if (!nr) goto lost;
            freeReplyObject(nr);
            /* the marker pins the stream at the cursor before anything is served (trimming) */
            if (nc_markers_write(nc, conn, st) != 0 || nc_writers_check(nc, conn, st, idx, n, serving, covered) != 0)
                goto lost;
            next_marker = clock_mono_ms() + 1000;
        }
        int64_t sent = clock_mono_ms();
        int vouch;
        int more = nc_read_once(nc, conn, st, si, &vouch);
        if (more < 0) goto lost;
        if (more) continue;
        if (!vouch) { /* the stream key holds another type: nothing is served, a gap each time */
            nc_down(nc, st, idx, n, serving);
        } else if (st->sentinel && nc_primary_moved(st, &primary)) {
            goto lost; /* a failover: nothing more is vouched for from this node */
        } else {
            /* a slot covered again is flushed before it serves: writes not announced meanwhile */
            int flush_any = 0;
            for (size_t k = 0; k < n; k++) flush_any |= covered[k] && !was_covered[k];
            if (flush_any) {
                struct nc_msg g = {.kind = NC_MSG_RESET, .cause = NC_EVICT_GAP, .target = (uint32_t)si};
                nc_post(nc, &g, 1);
            }
            memcpy(was_covered, covered, sizeof(covered));
            nc_serve(nc, idx, n, serving, covered);
            /* after the posts (release): a worker that sees the vouch sees the messages */
            __atomic_store_n(&st->vouched_until_ms, sent + NC_VOUCH_MS, __ATOMIC_RELEASE);
            int all = 1;
            for (size_t k = 0; k < n; k++) all &= covered[k];
            nc_tell_tracker(nc, st, all, 0);
        }
        int64_t now = clock_mono_ms();
        if (now >= next_marker) {
            if (nc_markers_write(nc, conn, st) != 0 || nc_writers_check(nc, conn, st, idx, n, serving, covered) != 0)
                goto lost;
            next_marker = now + 1000;
        }
        if (now >= next_trim) {
            if (nc_trim(nc, conn, st) != 0) goto lost;
            next_trim = now + nc->trim_interval_ms;
        }
        /* wait for news; what it returns is evicted at once (the read after it moves the cursor,
         * with the gap check: a stalled read must not keep an invalidation waiting) */
        if (nc_append_xread(conn, st, 1) != 0 || syncconn_flush(conn) != 0) goto lost;
        redisReply *r = syncconn_read(conn);
        if (!r) goto lost;
        const redisReply *es = nc_xread_entries(r);
        for (size_t j = 0; es && j < es->elements; j++) {
            struct nc_id id;
            const redisReply *fv = nc_entry(es->element[j], &id);
            if (!fv) continue;
            for (size_t f = 0; nc_is_array(fv) && f + 1 < fv->elements; f += 2)
                if (fv->element[f]->type == REDIS_REPLY_STRING && strcmp(fv->element[f]->str, "k") == 0 &&
                    fv->element[f + 1]->type == REDIS_REPLY_STRING) {
                    struct nc_msg m = {.kind = NC_MSG_EVICT,
                                       .cause = NC_EVICT_STREAM,
                                       .lagged = 1,
                                       .target = (uint32_t)si,
                                       .id = id,
                                       .key = fv->element[f + 1]->str,
                                       .key_len = fv->element[f + 1]->len};
                    nc_post(nc, &m, 1);
                    nc_tell_keys(nc, st, &m, 1);
                }
            if (nccore_id_cmp(id, st->blocked) > 0) st->blocked = id;
        }
        freeReplyObject(r);
        continue;
    lost:
        if (nc_stopping(nc)) break; /* nearcache_stop cut the connection short: nothing was lost */
        log_event(LOG_WARN, "near_cache_reader", NULL,
                  "near cache: stream connection to '%s' lost (%s): its namespaces are not served until it caught up",
                  rd->conf.name, conn ? syncconn_error(conn) : "?");
        nc_down(nc, st, idx, n, serving);
        if (conn) syncconn_close(conn);
        conn = NULL;
        if (nc_sleep(nc, 100)) break;
    }
    if (conn) syncconn_close(conn);
    return NULL;
}

/* ---- start, stop ---- */

/* The "\n"-separated near-cache prefixes of cfg's registry on each instance, into nc->published. */
static void nc_publish(struct nearcache *nc, const struct config *cfg)
{
    const struct registry *reg = cfg->registry;
    pthread_mutex_lock(&nc->pub_mu);
    for (size_t i = 0; i < CONFIG_MAX_INSTANCES; i++) {
        struct bytebuf b = {0};
        for (size_t e = 0; e < reg->count; e++) {
            const struct namespace_entry *x = &reg->entries[e];
            if (x->near_cache_ms <= 0 || x->instance != (int)i) continue;
            bytebuf_add(&b, x->prefix, x->prefix_len);
            bytebuf_add(&b, "\n", 1);
        }
        bytebuf_add(&b, "", 1);
        free(nc->published[i]);
        nc->published[i] = xstrdup(b.p);
        bytebuf_free(&b);
    }
    pthread_mutex_unlock(&nc->pub_mu);
}

void nearcache_update(struct nearcache *nc, const struct config *cfg)
{
    if (nc) nc_publish(nc, cfg);
}

/* The stream of instance i (made on first use). */
static int nc_stream_of(struct nearcache *nc, const struct namespace_entry *e)
{
    for (int k = 0; k < nc->nreaders; k++)
        if (nc->streams[k].instance == e->instance) return k;
    int k = nc->nreaders++;
    struct nc_stream *st = &nc->streams[k];
    st->instance = e->instance;
    st->key = xstrdup(e->nc_stream);
    st->markers = xstrdup(e->nc_markers);
    /* "<K>nc:{<K>}:stream" -> "<K>nc:{<K>}:writers" */
    size_t base = e->nc_stream_len - strlen("stream");
    st->writers = xmalloc(base + strlen("writers") + 1);
    memcpy(st->writers, e->nc_stream, base);
    strcpy(st->writers + base, "writers");
    return k;
}

struct nearcache *nearcache_start(const struct config *cfg, struct proxy *p)
{
    const struct registry *reg = cfg->registry;
    size_t nslots = 0;
    for (size_t i = 0; i < reg->count; i++) nslots += reg->entries[i].near_cache_ms > 0;
    if (nslots == 0) return NULL;
    int(*pipes)[2] = xcalloc((size_t)p->nworkers, sizeof(*pipes));
    for (int k = 0; k < p->nworkers; k++) {
        if (pipe(pipes[k]) == 0) continue;
        log_event(LOG_ERROR, "near_cache", NULL, "near cache: off (cannot make a pipe: %s); reads are forwarded",
                  strerror(errno));
        for (int j = 0; j < k; j++) close(pipes[j][0]), close(pipes[j][1]);
        free(pipes);
        return NULL;
    }
    const char *delay = getenv("KEYGATE_NEAR_CACHE_FILL_DELAY_MS");
    nc_fill_delay_ms = delay ? atoll(delay) : 0;
    struct nearcache *nc = xcalloc(1, sizeof(*nc));
    nc->proxy = p;
    nc->halt = syncconn_stop_new();
    pthread_mutex_init(&nc->pub_mu, NULL);
    char host[64] = "?";
    (void)gethostname(host, sizeof(host) - 1);
    snprintf(nc->self, sizeof(nc->self), "%s:%ld", host, (long)getpid());
    nc_publish(nc, cfg);
    nc->slots = xcalloc(nslots, sizeof(*nc->slots));
    nc->streams = xcalloc(CONFIG_MAX_INSTANCES, sizeof(*nc->streams));
    for (size_t i = 0; i < reg->count; i++) {
        const struct namespace_entry *e = &reg->entries[i];
        if (e->near_cache_ms <= 0) continue;
        struct nc_slot *s = &nc->slots[nc->nslots++];
        s->prefix = xstrdup(e->prefix);
        s->prefix_len = e->prefix_len;
        s->instance = e->instance;
        s->stream = nc_stream_of(nc, e);
    }
    nc->group = xstrdup(cfg->near_cache_group);
    nc->trim_interval_ms = cfg->near_cache_trim_interval_ms;
    nc->marker_timeout_ms = cfg->near_cache_marker_timeout_ms;
    nc->nworkers = p->nworkers;
    nc->workers = xcalloc((size_t)p->nworkers, sizeof(*nc->workers));
    size_t per_worker = (size_t)(cfg->near_cache_memory / p->nworkers); /* the process stays under the bound */
    for (int k = 0; k < p->nworkers; k++) {
        struct nc_worker *nw = &nc->workers[k];
        nw->nc = nc;
        nw->w = &p->workers[k];
        nw->index = k;
        nccore_init(&nw->cache, per_worker, nc->nslots);
        for (size_t s = 0; s < nc->nslots; s++) nccore_set_serving(&nw->cache, (uint32_t)s, 0); /* until caught up */
        nw->sstats = xcalloc(nc->nslots, sizeof(*nw->sstats));
        pthread_mutex_init(&nw->mu, NULL);
        nw->pipe[0] = pipes[k][0];
        nw->pipe[1] = pipes[k][1];
        fcntl(nw->pipe[0], F_SETFL, O_NONBLOCK);
        fcntl(nw->pipe[1], F_SETFL, O_NONBLOCK);
        nw->ev = xevent_new(nw->w->base, nw->pipe[0], EV_READ | EV_PERSIST, nc_inbox_cb, nw);
        event_add(nw->ev, NULL);
        nw->w->nc = nw;
    }
    free(pipes);
    for (int k = 0; k < nc->nreaders; k++) {
        struct nc_reader *rd = &nc->readers[k];
        rd->nc = nc;
        rd->stream = k;
        config_instance_copy(&rd->conf, &cfg->instances[nc->streams[k].instance]);
        nc->streams[k].sentinel = rd->conf.sentinel;
        nc->streams[k].tracker_told = -1;
    }
    for (int k = 0; k < nc->nreaders; k++) { /* every reader's conf is set: nc_reader_slots names them */
        struct nc_reader *rd = &nc->readers[k];
        rd->started = pthread_create(&rd->thread, NULL, nc_reader_main, rd) == 0;
        if (!rd->started)
            log_event(LOG_ERROR, "near_cache_reader", NULL, "near cache: cannot start the reader of '%s'",
                      rd->conf.name);
    }
    log_event(LOG_INFO, "near_cache", NULL, "near cache: %zu namespace(s), %lld bytes per worker", nc->nslots,
              (long long)per_worker);
    return nc;
}

void nearcache_stop(struct nearcache *nc)
{
    if (!nc) return;
    __atomic_store_n(&nc->stop, 1, __ATOMIC_RELEASE);
    syncconn_stop_trip(nc->halt); /* a read waiting on a frozen backend ends now */
    for (int i = 0; i < nc->nreaders; i++) {
        if (nc->readers[i].started) pthread_join(nc->readers[i].thread, NULL);
        config_instance_free(&nc->readers[i].conf);
        free(nc->streams[i].key);
        free(nc->streams[i].markers);
        free(nc->streams[i].writers);
    }
    syncconn_stop_free(nc->halt);
    for (int k = 0; k < nc->nworkers; k++) {
        struct nc_worker *nw = &nc->workers[k];
        event_free(nw->ev);
        close(nw->pipe[0]);
        close(nw->pipe[1]);
        for (size_t i = 0; i < nw->nmsgs; i++) free(nw->msgs[i].key);
        free(nw->msgs);
        pthread_mutex_destroy(&nw->mu);
        nccore_free(&nw->cache);
        free(nw->slot_of);
        free(nw->sstats);
        bytebuf_free(&nw->out);
        nw->w->nc = NULL;
    }
    for (size_t s = 0; s < nc->nslots; s++) free(nc->slots[s].prefix);
    for (size_t i = 0; i < CONFIG_MAX_INSTANCES; i++) free(nc->published[i]);
    pthread_mutex_destroy(&nc->pub_mu);
    free(nc->slots);
    free(nc->streams);
    free(nc->workers);
    free(nc->group);
    free(nc);
}

/* ---- metrics ---- */

static const char *const nc_cause_names[NC_EVICT_COUNT] = {"write", "stream", "ttl", "lru", "gap", "reset"};

/* The sum of every worker's counts for slot s (read without locks: counters of other threads
 * may be a moment old). */
static struct nc_ns nc_sum(const struct nearcache *nc, size_t s, struct nc_slot_stats *lag)
{
    struct nc_ns t = {0};
    memset(lag, 0, sizeof(*lag));
    for (int k = 0; k < nc->nworkers; k++) {
        const struct nc_ns *n = &nc->workers[k].cache.ns[s];
        t.hits += n->hits;
        t.misses += n->misses;
        t.fills += n->fills;
        t.raced += n->raced;
        t.entries += n->entries;
        t.bytes += n->bytes;
        for (int c = 0; c < NC_EVICT_COUNT; c++) t.evictions[c] += n->evictions[c];
        const struct nc_slot_stats *st = &nc->workers[k].sstats[s];
        for (int b = 0; b <= NC_LAG_BUCKETS; b++) lag->lag[b] += st->lag[b];
        lag->lag_count += st->lag_count;
        lag->lag_sum_ms += st->lag_sum_ms;
    }
    return t;
}

static void nc_addf(struct bytebuf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void nc_addf(struct bytebuf *out, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > 0) bytebuf_add(out, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static struct nearcache *nc_from_proxy(const struct proxy *p)
{
    return p->nworkers > 0 && p->workers[0].nc ? p->workers[0].nc->nc : NULL;
}

void nearcache_info(const struct proxy *p, struct bytebuf *out)
{
    struct nearcache *nc = nc_from_proxy(p);
    if (!nc) return;
    nc_addf(out, "# Nearcache\r\n");
    for (size_t s = 0; s < nc->nslots; s++) {
        struct nc_slot_stats lag;
        struct nc_ns t = nc_sum(nc, s, &lag);
        nc_addf(out,
                "nc_%s:hits=%llu,misses=%llu,fills=%llu,raced=%llu,entries=%llu,bytes=%llu,evicted_write=%llu,"
                "evicted_stream=%llu,evicted_ttl=%llu,evicted_lru=%llu,evicted_gap=%llu,evicted_reset=%llu,"
                "invalidations=%llu\r\n",
                nc->slots[s].prefix, (unsigned long long)t.hits, (unsigned long long)t.misses,
                (unsigned long long)t.fills, (unsigned long long)t.raced, (unsigned long long)t.entries,
                (unsigned long long)t.bytes, (unsigned long long)t.evictions[NC_EVICT_WRITE],
                (unsigned long long)t.evictions[NC_EVICT_STREAM], (unsigned long long)t.evictions[NC_EVICT_TTL],
                (unsigned long long)t.evictions[NC_EVICT_LRU], (unsigned long long)t.evictions[NC_EVICT_GAP],
                (unsigned long long)t.evictions[NC_EVICT_RESET], (unsigned long long)lag.lag_count);
    }
}

void nearcache_format_prometheus(const struct proxy *p, struct bytebuf *out)
{
    struct nearcache *nc = nc_from_proxy(p);
    if (!nc) return;
    static const struct {
        const char *name, *help;
        size_t off;
    } counters[] = {
        {"keygate_near_cache_hits_total", "near-cache reads answered from keygate's memory",
         offsetof(struct nc_ns, hits)},
        {"keygate_near_cache_misses_total", "near-cache reads not answered from the cache (sent as fills)",
         offsetof(struct nc_ns, misses)},
        {"keygate_near_cache_fills_total", "fill replies (value and PTTL read with EVAL on the primary)",
         offsetof(struct nc_ns, fills)},
        {"keygate_near_cache_raced_total", "fills returned but not cached: an invalidation or local write crossed them",
         offsetof(struct nc_ns, raced)},
    };
    for (size_t c = 0; c < sizeof(counters) / sizeof(counters[0]); c++) {
        nc_addf(out, "# HELP %s %s\n# TYPE %s counter\n", counters[c].name, counters[c].help, counters[c].name);
        for (size_t s = 0; s < nc->nslots; s++) {
            struct nc_slot_stats lag;
            struct nc_ns t = nc_sum(nc, s, &lag);
            nc_addf(out, "%s{namespace=\"%s\"} %llu\n", counters[c].name, nc->slots[s].prefix,
                    (unsigned long long)*(const uint64_t *)(const void *)((const char *)&t + counters[c].off));
        }
    }
    nc_addf(out, "# HELP keygate_near_cache_entries entries cached\n# TYPE keygate_near_cache_entries gauge\n");
    for (size_t s = 0; s < nc->nslots; s++) {
        struct nc_slot_stats lag;
        struct nc_ns t = nc_sum(nc, s, &lag);
        nc_addf(out, "keygate_near_cache_entries{namespace=\"%s\"} %llu\n", nc->slots[s].prefix,
                (unsigned long long)t.entries);
    }
    nc_addf(out, "# HELP keygate_near_cache_bytes bytes cached (keys, values, headers)\n"
                 "# TYPE keygate_near_cache_bytes gauge\n");
    for (size_t s = 0; s < nc->nslots; s++) {
        struct nc_slot_stats lag;
        struct nc_ns t = nc_sum(nc, s, &lag);
        nc_addf(out, "keygate_near_cache_bytes{namespace=\"%s\"} %llu\n", nc->slots[s].prefix,
                (unsigned long long)t.bytes);
    }
    nc_addf(out, "# HELP keygate_near_cache_evictions_total entries evicted, by cause\n"
                 "# TYPE keygate_near_cache_evictions_total counter\n");
    for (size_t s = 0; s < nc->nslots; s++) {
        struct nc_slot_stats lag;
        struct nc_ns t = nc_sum(nc, s, &lag);
        for (int c = 0; c < NC_EVICT_COUNT; c++)
            nc_addf(out, "keygate_near_cache_evictions_total{namespace=\"%s\",cause=\"%s\"} %llu\n",
                    nc->slots[s].prefix, nc_cause_names[c], (unsigned long long)t.evictions[c]);
    }
    static const char lag_name[] = "keygate_near_cache_invalidation_lag_seconds";
    nc_addf(out, "# HELP %s time from an invalidation's XADD (its id) to its eviction here\n# TYPE %s histogram\n",
            lag_name, lag_name);
    for (size_t s = 0; s < nc->nslots; s++) {
        struct nc_slot_stats lag;
        (void)nc_sum(nc, s, &lag);
        const char *ns = nc->slots[s].prefix;
        uint64_t cum = 0;
        for (int b = 0; b < NC_LAG_BUCKETS; b++) {
            cum += lag.lag[b];
            nc_addf(out, "%s_bucket{namespace=\"%s\",le=\"%g\"} %llu\n", lag_name, ns, (double)nc_lag_le[b] / 1000.0,
                    (unsigned long long)cum);
        }
        nc_addf(out, "%s_bucket{namespace=\"%s\",le=\"+Inf\"} %llu\n", lag_name, ns, (unsigned long long)lag.lag_count);
        nc_addf(out, "%s_sum{namespace=\"%s\"} %g\n", lag_name, ns, (double)lag.lag_sum_ms / 1000.0);
        nc_addf(out, "%s_count{namespace=\"%s\"} %llu\n", lag_name, ns, (unsigned long long)lag.lag_count);
    }
}
