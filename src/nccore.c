/* nccore.c: the near cache's generic core: entries by bytes with LRU, per-namespace cursor, the race rule, flushes. */
#include "nccore.h"

#include <assert.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define NC_MIN_BUCKETS 1024

/* The key's hash: eight bytes at a time (a byte-at-a-time FNV-1a took ~110 instructions of a
 * hit's ~3,500 for an 18-byte key), each word multiplied in and its high half folded down, then
 * a full finalizer, so that the low bits the bucket index takes depend on every byte (100,000
 * keys cache:0..99999 in 131,072 buckets: longest chain 7, empty buckets 46.7 %, as random). */
static uint64_t nc_hash(uint32_t ns, const char *key, size_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ ns ^ ((uint64_t)len << 32);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, key + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
    }
    uint64_t tail = 0;
    if (i < len) memcpy(&tail, key + i, len - i);
    h ^= tail;
    h ^= h >> 33; /* MurmurHash3's 64-bit finalizer */
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

/* What a block of malloc's takes from the process: its usable size (rounding included) and the
 * chunk header in front of it. */
static size_t block_bytes(void *p)
{
    return malloc_usable_size(p) + sizeof(size_t);
}

void nccore_init(struct nc_cache *c, size_t max_bytes, size_t nns)
{
    memset(c, 0, sizeof(*c));
    c->nbuckets = NC_MIN_BUCKETS;
    c->buckets = xcalloc(c->nbuckets, sizeof(*c->buckets));
    c->table_bytes = block_bytes(c->buckets); /* counted against the bound like the entries */
    c->max_bytes = max_bytes;
    c->nns = nns;
    c->ns = xcalloc(nns ? nns : 1, sizeof(*c->ns));
    for (size_t i = 0; i < nns; i++) c->ns[i].serving = 1;
}

void nccore_free(struct nc_cache *c)
{
    struct nc_entry *e = c->lru_head;
    while (e) {
        struct nc_entry *next = e->lnext;
        free(e);
        e = next;
    }
    free(c->buckets);
    free(c->ns);
    memset(c, 0, sizeof(*c));
}

size_t nccore_entry_bytes(size_t key_len, size_t val_len)
{
    return sizeof(struct nc_entry) + key_len + val_len + sizeof(size_t); /* + malloc's chunk header */
}

static void lru_unlink(struct nc_cache *c, struct nc_entry *e)
{
    if (e->lprev)
        e->lprev->lnext = e->lnext;
    else
        c->lru_head = e->lnext;
    if (e->lnext)
        e->lnext->lprev = e->lprev;
    else
        c->lru_tail = e->lprev;
    e->lprev = e->lnext = NULL;
}

static void lru_push_head(struct nc_cache *c, struct nc_entry *e)
{
    e->lprev = NULL;
    e->lnext = c->lru_head;
    if (c->lru_head) c->lru_head->lprev = e;
    c->lru_head = e;
    if (!c->lru_tail) c->lru_tail = e;
}

/* The hash-chain link that points at (ns, key)'s entry (or at the chain's NULL end). */
static struct nc_entry **chain_find(struct nc_cache *c, uint64_t h, uint32_t ns, const char *key, size_t len)
{
    struct nc_entry **p = &c->buckets[h & (c->nbuckets - 1)];
    while (*p && !((*p)->hash == h && (*p)->ns == ns && (*p)->key_len == len && memcmp((*p)->data, key, len) == 0))
        p = &(*p)->hnext;
    return p;
}

static void evict(struct nc_cache *c, struct nc_entry *e, enum nc_evict_cause cause)
{
    struct nc_entry **p = chain_find(c, e->hash, e->ns, e->data, e->key_len);
    assert(*p == e);
    *p = e->hnext;
    lru_unlink(c, e);
    struct nc_ns *n = &c->ns[e->ns];
    assert(c->count > 0 && c->bytes >= e->bytes && n->entries > 0 && n->bytes >= e->bytes);
    c->count--;
    c->bytes -= e->bytes;
    n->entries--;
    n->bytes -= e->bytes;
    if (cause < NC_EVICT_COUNT) n->evictions[cause]++; /* NC_EVICT_COUNT: replaced, not counted */
    free(e);
}

static void evict_key(struct nc_cache *c, uint32_t ns, const char *key, size_t len, enum nc_evict_cause cause)
{
    struct nc_entry *e = *chain_find(c, nc_hash(ns, key, len), ns, key, len);
    if (e) evict(c, e, cause);
}

static void grow(struct nc_cache *c)
{
    size_t n = c->nbuckets * 2;
    struct nc_entry **b = xcalloc(n, sizeof(*b));
    for (size_t i = 0; i < c->nbuckets; i++) {
        struct nc_entry *e = c->buckets[i];
        while (e) {
            struct nc_entry *next = e->hnext;
            e->hnext = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    free(c->buckets);
    c->buckets = b;
    c->nbuckets = n;
    c->table_bytes = block_bytes(b);
}

struct nc_entry *nccore_peek(struct nc_cache *c, uint32_t ns, const char *key, size_t len, int64_t now_ms)
{
    assert(ns < c->nns);
    struct nc_entry *e = *chain_find(c, nc_hash(ns, key, len), ns, key, len);
    return e && e->expires_ms > now_ms ? e : NULL;
}

struct nc_entry *nccore_find(struct nc_cache *c, uint32_t ns, const char *key, size_t len, int64_t now_ms)
{
    assert(ns < c->nns);
    struct nc_ns *n = &c->ns[ns];
    struct nc_entry *e = *chain_find(c, nc_hash(ns, key, len), ns, key, len);
    if (e && e->expires_ms <= now_ms) {
        evict(c, e, NC_EVICT_TTL);
        e = NULL;
    }
    if (!e || !n->serving) {
        n->misses++;
        return NULL;
    }
    n->hits++;
    if (c->lru_head != e) {
        lru_unlink(c, e);
        lru_push_head(c, e);
    }
    return e;
}

struct nc_entry *nccore_find_hit(struct nc_cache *c, uint32_t ns, const char *key, size_t len, int64_t now_ms,
                                 uint8_t pass_type)
{
    assert(ns < c->nns);
    struct nc_ns *n = &c->ns[ns];
    if (!n->serving) return NULL;
    struct nc_entry *e = *chain_find(c, nc_hash(ns, key, len), ns, key, len);
    if (!e || e->expires_ms <= now_ms || e->type == pass_type) return NULL;
    n->hits++;
    if (c->lru_head != e) {
        lru_unlink(c, e);
        lru_push_head(c, e);
    }
    return e;
}

struct nc_ticket nccore_ticket(const struct nc_cache *c, uint32_t ns)
{
    assert(ns < c->nns);
    return (struct nc_ticket){.ns = ns, .cursor = c->ns[ns].cursor, .gen = c->ns[ns].gen};
}

enum nc_store_result nccore_store(struct nc_cache *c, const struct nc_ticket *t, const char *key, size_t key_len,
                                  uint8_t type, uint32_t nelem, const char *val, size_t val_len, int64_t expires_ms,
                                  uint8_t big_type)
{
    assert(t->ns < c->nns);
    struct nc_ns *n = &c->ns[t->ns];
    n->fills++;
    /* the read may have crossed an invalidation whose eviction found nothing to evict */
    if (nccore_id_cmp(n->cursor, t->cursor) != 0 || n->gen != t->gen) {
        n->raced++;
        return NC_RACED;
    }
    evict_key(c, t->ns, key, key_len, NC_EVICT_COUNT); /* a fill replaces what it read again */
    enum nc_store_result result = NC_STORED;
    if (val_len > nccore_max_value(c)) {
        type = big_type, nelem = 0, val_len = 0;
        result = NC_TOO_BIG;
    }
    struct nc_entry *e = xmalloc(sizeof(*e) + key_len + val_len);
    size_t bytes = block_bytes(e);
    /* the table doubles past one entry a bucket: its next size is made room for too */
    size_t table = c->count + 1 > c->nbuckets ? 2 * c->nbuckets * sizeof(*c->buckets) + sizeof(size_t) : 0;
    while (c->bytes + c->table_bytes + table + bytes > c->max_bytes && c->lru_tail) {
        evict(c, c->lru_tail, NC_EVICT_LRU);
        table = c->count + 1 > c->nbuckets ? table : 0;
    }
    e->hash = nc_hash(t->ns, key, key_len);
    e->expires_ms = expires_ms;
    e->ns = t->ns;
    e->key_len = (uint32_t)key_len;
    e->val_len = (uint32_t)val_len;
    e->nelem = nelem;
    e->type = type;
    e->bytes = bytes;
    memcpy(e->data, key, key_len);
    if (val_len) memcpy(e->data + key_len, val, val_len);
    struct nc_entry **head = &c->buckets[e->hash & (c->nbuckets - 1)];
    e->hnext = *head;
    *head = e;
    lru_push_head(c, e);
    c->count++;
    c->bytes += bytes;
    n->entries++;
    n->bytes += bytes;
    if (c->count > c->nbuckets) grow(c);
    return result;
}

void nccore_local_write(struct nc_cache *c, uint32_t ns, const char *key, size_t len)
{
    nccore_evict(c, ns, key, len, NC_EVICT_WRITE);
}

void nccore_evict(struct nc_cache *c, uint32_t ns, const char *key, size_t len, enum nc_evict_cause cause)
{
    assert(ns < c->nns);
    c->ns[ns].gen++; /* a fill in flight since before this write must not be cached */
    evict_key(c, ns, key, len, cause);
}

void nccore_stream_apply(struct nc_cache *c, uint32_t ns, struct nc_id id, const char *key, size_t len)
{
    assert(ns < c->nns);
    /* The cursor moves BEFORE the eviction, never after: a fill in flight compares the cursor
     * it started with (nccore_store). Evicting first would leave a moment where the eviction
     * found nothing (the fill's value not stored yet) and the cursor still reads unchanged, so
     * the fill would store the value this invalidation was about. */
    c->ns[ns].cursor = id;
    evict_key(c, ns, key, len, NC_EVICT_STREAM);
}

void nccore_flush(struct nc_cache *c, uint32_t ns, enum nc_evict_cause cause)
{
    assert(ns < c->nns);
    c->ns[ns].gen++;
    struct nc_entry *e = c->lru_head;
    while (e && c->ns[ns].entries > 0) {
        struct nc_entry *next = e->lnext;
        if (e->ns == ns) evict(c, e, cause);
        e = next;
    }
}

void nccore_set_serving(struct nc_cache *c, uint32_t ns, int on)
{
    assert(ns < c->nns);
    c->ns[ns].serving = on;
}

/* A decimal uint64 of s[0..len) (not empty, no sign); 0 or -1. */
static int u64_parse(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    if (len == 0 || len > 20) return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int nccore_id_parse(const char *s, size_t len, struct nc_id *out)
{
    const char *dash = memchr(s, '-', len);
    struct nc_id id = {0, 0};
    if (!dash) {
        if (u64_parse(s, len, &id.ms) != 0) return -1;
    } else if (u64_parse(s, (size_t)(dash - s), &id.ms) != 0 ||
               u64_parse(dash + 1, len - (size_t)(dash - s) - 1, &id.seq) != 0) {
        return -1;
    }
    *out = id;
    return 0;
}

/* ---- the stream reader's rules ---- */

enum nc_stream_verdict nccore_stream_verdict(struct nc_stream_pos *pos, const struct nc_stream_info *in)
{
    static const struct nc_id zero = {0, 0};
    if (in->kind == NC_INFO_WRONGTYPE) return NC_STREAM_BROKEN;
    if (in->kind == NC_INFO_ABSENT) {
        enum nc_stream_verdict v = !pos->has_read                          ? NC_STREAM_RESET
                                   : nccore_id_cmp(pos->cursor, zero) != 0 ? NC_STREAM_GAP
                                                                           : NC_STREAM_NONE;
        *pos = (struct nc_stream_pos){.cursor = zero, .seen_added = 0, .has_read = 1};
        return v;
    }
    int lost = pos->has_read && (nccore_id_cmp(in->last, pos->cursor) < 0 || in->added < pos->seen_added ||
                                 nccore_id_cmp(in->maxdel, pos->cursor) > 0);
    if (pos->has_read && !lost) return NC_STREAM_APPLY;
    /* this read's entries are at or below the last id: not applied */
    *pos = (struct nc_stream_pos){.cursor = in->last, .seen_added = in->added, .has_read = 1};
    return lost ? NC_STREAM_GAP : NC_STREAM_RESET;
}

int nccore_stream_counts_differ(struct nc_stream_pos *pos, const struct nc_stream_info *in)
{
    if (pos->seen_added == in->added) return 0;
    pos->cursor = in->last;
    pos->seen_added = in->added;
    return 1;
}
