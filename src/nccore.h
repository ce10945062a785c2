/* nccore.h: the near cache's generic core: entries by bytes with LRU, per-namespace cursor, the race rule, flushes. */
#ifndef KEYGATE_NCCORE_H
#define KEYGATE_NCCORE_H

#include <stddef.h>
#include <stdint.h>

/*
 * One cache (one per worker thread: no lock on the hit path). It knows nothing of Redis
 * types: an entry is (namespace slot, key) -> (type byte, element count, value bytes), with
 * an expiry; the table of cached reads (ncpolicy.h) fills and renders them. Pure: no I/O, no
 * clock (the caller passes now_ms).
 *
 *   fill:       ticket = nccore_ticket(ns)  ...the read travels...  nccore_store(ticket, ...)
 *               stored only if neither the namespace's stream cursor nor its local write
 *               generation moved meanwhile (seed step 5; a local write counts as one)
 *   stream:     nccore_stream_apply(ns, id, key): the cursor moves, THEN the key is evicted
 *   local write nccore_local_write(ns, key): evicted at once, the generation moves
 *   gap:        nccore_flush(ns): every entry of the namespace goes, the generation moves
 */

/* Why entries left: a write through this keygate, a stream entry, their TTL, the memory bound, a
 * stream gap, a reset (a reader's first read, a registry reload). */
enum nc_evict_cause {
    NC_EVICT_WRITE = 0,
    NC_EVICT_STREAM,
    NC_EVICT_TTL,
    NC_EVICT_LRU,
    NC_EVICT_GAP,
    NC_EVICT_RESET,
    NC_EVICT_COUNT
};

/* A stream entry id "MS-SEQ" as two numbers; {0,0} is "0" (before every entry). */
struct nc_id {
    uint64_t ms, seq;
};

struct nc_entry {
    struct nc_entry *hnext;         /* hash chain */
    struct nc_entry *lprev, *lnext; /* LRU list: lru_head is the most recently used */
    uint64_t hash;
    int64_t expires_ms; /* not served at or past this (min of near-cache=D and the key's PTTL) */
    uint32_t ns;        /* namespace slot */
    uint32_t key_len, val_len;
    uint32_t nelem; /* elements of a set or hash (the value's format is the table's, ncpolicy.h) */
    uint8_t type;   /* the table's type byte (ncpolicy.h: absent, string, set, hash, other) */
    size_t bytes;   /* what it counts against the bound */
    char data[];    /* key bytes, then value bytes */
};

/* Per namespace slot: where its stream stands and what happened to it (this cache's counts). */
struct nc_ns {
    struct nc_id cursor; /* the last stream entry applied */
    uint64_t gen;        /* local writes and flushes: moves when a fill in flight may be stale */
    int serving;         /* 0: no entry is served (its stream is down or catching up) */
    uint64_t entries, bytes;
    uint64_t hits, misses, fills, raced, evictions[NC_EVICT_COUNT];
};

struct nc_cache {
    struct nc_entry **buckets;
    size_t nbuckets, count;
    struct nc_entry *lru_head, *lru_tail;
    size_t bytes, max_bytes; /* entries' bytes (malloc's blocks, headers included); bytes + table_bytes <= max_bytes */
    size_t table_bytes;      /* the bucket array's block */
    struct nc_ns *ns;
    size_t nns;
};

/* What a fill saw when it started (nccore_ticket). */
struct nc_ticket {
    uint32_t ns;
    struct nc_id cursor;
    uint64_t gen;
};

enum nc_store_result { NC_STORED = 0, NC_RACED, NC_TOO_BIG };

/* An empty cache of nns namespace slots bounded to max_bytes (entries' bytes); all serving. */
void nccore_init(struct nc_cache *c, size_t max_bytes, size_t nns);

/* Free every entry and the tables. */
void nccore_free(struct nc_cache *c);

/* The bytes an entry of key_len + val_len counts at least (its header and malloc's chunk header;
 * nccore_store counts malloc's usable size, rounding included). */
size_t nccore_entry_bytes(size_t key_len, size_t val_len);

/* The largest value nccore_store takes: a sixteenth of the bound (issue 20). */
static inline size_t nccore_max_value(const struct nc_cache *c)
{
    return c->max_bytes / 16;
}

/* The servable entry of (ns, key), made the most recent; NULL when there is none, the namespace
 * is not serving, or it expired (then it is evicted, cause TTL). Counts a hit or a miss. */
struct nc_entry *nccore_find(struct nc_cache *c, uint32_t ns, const char *key, size_t len, int64_t now_ms);

/* nccore_find for a hit only: the servable entry of (ns, key) unless its type is `pass_type`,
 * made the most recent and counted as a hit; NULL otherwise, with nothing counted or evicted
 * (the caller then looks again with nccore_find). */
struct nc_entry *nccore_find_hit(struct nc_cache *c, uint32_t ns, const char *key, size_t len, int64_t now_ms,
                                 uint8_t pass_type);

/* The entry of (ns, key) without counting, serving check or expiry (tests, MGET's all-or-none). */
struct nc_entry *nccore_peek(struct nc_cache *c, uint32_t ns, const char *key, size_t len, int64_t now_ms);

/* Where ns stands before a fill is sent. */
struct nc_ticket nccore_ticket(const struct nc_cache *c, uint32_t ns);

/*
 * Store a fill's value (replacing any entry of the key) unless the ticket's cursor or
 * generation moved (NC_RACED: the value is still a fine answer for the read that fetched it,
 * but an invalidation may have missed it) or it is larger than nccore_max_value (NC_TOO_BIG:
 * then an empty entry of type big_type is stored in its place, which the table reads as "do
 * not fill this key again"). Past the bound, least recently used entries are evicted (cause
 * LRU). Counts the fill.
 */
enum nc_store_result nccore_store(struct nc_cache *c, const struct nc_ticket *t, const char *key, size_t key_len,
                                  uint8_t type, uint32_t nelem, const char *val, size_t val_len, int64_t expires_ms,
                                  uint8_t big_type);

/* A write through this keygate to (ns, key): evicted now (cause WRITE); the generation moves. */
void nccore_local_write(struct nc_cache *c, uint32_t ns, const char *key, size_t len);

/* (ns, key) written somewhere (another worker's write, an entry a blocking read returned ahead of
 * its cursor): evicted now (cause), the generation moves (a fill in flight is not stored). */
void nccore_evict(struct nc_cache *c, uint32_t ns, const char *key, size_t len, enum nc_evict_cause cause);

/* A stream entry of ns (its id and key) read by the reader: the cursor moves, then the key goes. */
void nccore_stream_apply(struct nc_cache *c, uint32_t ns, struct nc_id id, const char *key, size_t len);

/* Every entry of ns goes (cause); the generation moves. */
void nccore_flush(struct nc_cache *c, uint32_t ns, enum nc_evict_cause cause);

/* Serve ns's entries (on) or none (off: its stream connection is down or catching up). */
void nccore_set_serving(struct nc_cache *c, uint32_t ns, int on);

/* Parse a stream id "MS-SEQ" (or "MS", or "0"); 0, or -1 when it is not one. */
int nccore_id_parse(const char *s, size_t len, struct nc_id *out);

/* -1, 0, 1 as a is below, equal to or above b. */
static inline int nccore_id_cmp(struct nc_id a, struct nc_id b)
{
    if (a.ms != b.ms) return a.ms < b.ms ? -1 : 1;
    return a.seq < b.seq ? -1 : a.seq > b.seq;
}

/* ---- the stream reader's rules (pure: the reader thread runs them on each read) ---- */

/* What a reader has applied of its instance's stream. */
struct nc_stream_pos {
    struct nc_id cursor;  /* the last entry applied */
    long long seen_added; /* the stream's entries-added those entries account for */
    int has_read;         /* read once since the reader (re)started */
};

/* One read's XINFO STREAM, as the rules need it. */
enum nc_info_kind { NC_INFO_STREAM = 0, NC_INFO_ABSENT, NC_INFO_WRONGTYPE };
struct nc_stream_info {
    enum nc_info_kind kind;
    struct nc_id last;   /* last-generated-id */
    struct nc_id maxdel; /* max-deleted-entry-id */
    long long added;     /* entries-added */
};

enum nc_stream_verdict {
    NC_STREAM_APPLY,  /* apply this read's entries from the cursor, then nccore_stream_counts_differ */
    NC_STREAM_NONE,   /* no stream, and none was read: nothing to apply, nothing lost */
    NC_STREAM_RESET,  /* the first read: flush what was filled before it; the cursor is the last id */
    NC_STREAM_GAP,    /* entries this reader had not applied are gone: flush; the cursor is the last id */
    NC_STREAM_BROKEN, /* the key holds another type: flush, serve nothing, a gap every time */
};

/*
 * The verdict of one read against what the reader applied, with *pos moved as it says:
 *   first read since (re)start        RESET (a stream that does not exist yet: cursor 0)
 *   no such key                       NONE while nothing was ever applied (cursor 0: a new
 *                                     deployment; it is read from its start once it appears),
 *                                     else GAP (it was deleted)
 *   another type                      BROKEN (pos unchanged)
 *   last-generated-id < cursor,       GAP: made again since, or entries above the cursor
 *   entries-added < seen, or          deleted before they were read
 *   max-deleted-entry-id > cursor
 *   else                              APPLY (trimmed entries that were all read are no gap)
 */
enum nc_stream_verdict nccore_stream_verdict(struct nc_stream_pos *pos, const struct nc_stream_info *in);

/* After an APPLY read that found the stream caught up, every entry applied (each moved
 * pos->cursor and pos->seen_added): 1 when entries-added says more were added than the reader
 * saw (entries vanished: the stream was made again with as many): a gap, *pos moved to in's
 * last id; else 0. */
int nccore_stream_counts_differ(struct nc_stream_pos *pos, const struct nc_stream_info *in);

#endif
