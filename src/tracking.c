/* tracking.c: CLIENT TRACKING's state and decisions as Redis 7.0 keeps them, and the process-wide table of tracked keys and clients. */
#include "tracking.h"

#include "args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tracking_client {
    struct tracking_client *next; /* in its bucket */
    uint64_t id;
    int worker;
    uint32_t instances;    /* instances it read keys of since its last flush, outside near-cache
                              namespaces (BCAST: all) */
    uint32_t nc_instances; /* instances it read near-cache keys of since its last flush (their
                              stream tells their writes too) */
    uint64_t flushed;      /* the table's flush_seq when it was last flushed */
    struct tracking_state st;
};

struct tracking_key {
    struct tracking_key *next; /* in its bucket */
    uint64_t hash;
    uint64_t *ids; /* the clients that read it since its last invalidation */
    size_t nids, cap;
    size_t len;
    uint8_t nc_inst; /* the instance whose near-cache stream names its writes; 255: none */
    char key[];
};

/* ---- pure: the protocol ---- */

/* Redis's stringCheckPrefix: one is a prefix of the other. */
static int prefixes_overlap(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    return memcmp(a, b, n) == 0;
}

/* Redis prints prefixes with %s: up to a NUL. */
static void prefix_printable(const char *s, size_t len, char *out, size_t outlen)
{
    const char *nul = memchr(s, '\0', len);
    size_t n = nul ? (size_t)(nul - s) : len;
    if (n > outlen - 1) n = outlen - 1;
    memcpy(out, s, n);
    out[n] = '\0';
}

/* Redis's checkPrefixCollisionsOrReply. Redis 7.0 answers an overlap of two new prefixes after
 * the first both with the error and then +OK (its `return i`): keygate answers the error only. */
static int check_collisions(const struct tracking_state *cur, const struct tracking_request *rq, char *err,
                            size_t errlen)
{
    char a[200], b[200];
    for (size_t i = 0; i < rq->nprefixes; i++) {
        for (size_t k = 0; k < cur->nprefixes; k++) {
            if (prefixes_overlap(cur->prefix[k], cur->prefix_len[k], rq->prefix[i], rq->prefix_len[i])) {
                prefix_printable(rq->prefix[i], rq->prefix_len[i], a, sizeof(a));
                prefix_printable(cur->prefix[k], cur->prefix_len[k], b, sizeof(b));
                snprintf(err, errlen,
                         "ERR Prefix '%s' overlaps with an existing prefix '%s'. Prefixes for a single client must "
                         "not overlap.",
                         a, b);
                return -1;
            }
        }
        for (size_t j = i + 1; j < rq->nprefixes; j++) {
            if (prefixes_overlap(rq->prefix[i], rq->prefix_len[i], rq->prefix[j], rq->prefix_len[j])) {
                prefix_printable(rq->prefix[i], rq->prefix_len[i], a, sizeof(a));
                prefix_printable(rq->prefix[j], rq->prefix_len[j], b, sizeof(b));
                snprintf(err, errlen,
                         "ERR Prefix '%s' overlaps with another provided prefix '%s'. Prefixes for a single client "
                         "must not overlap.",
                         a, b);
                return -1;
            }
        }
    }
    return 0;
}

int tracking_parse(const struct tracking_state *cur, size_t argc, const char *const *argv, const size_t *argvlen,
                   int (*exists)(void *ctx, uint64_t id), void *ctx, struct tracking_request *out, char *err,
                   size_t errlen)
{
    memset(out, 0, sizeof(*out));
    long long redir = 0;
    for (size_t j = 3; j < argc; j++) {
        size_t more = argc - 1 - j;
        if (args_word_is(argv[j], argvlen[j], "redirect") && more) {
            j++;
            if (redir != 0) {
                snprintf(err, errlen, "ERR A client can only redirect to a single other client");
                return -1;
            }
            if (args_ll(argv[j], argvlen[j], &redir) != 0) {
                snprintf(err, errlen, "ERR value is not an integer or out of range");
                return -1;
            }
            if (redir <= 0 || !exists(ctx, (uint64_t)redir)) {
                snprintf(err, errlen, "ERR The client ID you want redirect to does not exist");
                return -1;
            }
        } else if (args_word_is(argv[j], argvlen[j], "bcast")) {
            out->options |= TRACKING_BCAST;
        } else if (args_word_is(argv[j], argvlen[j], "optin")) {
            out->options |= TRACKING_OPTIN;
        } else if (args_word_is(argv[j], argvlen[j], "optout")) {
            out->options |= TRACKING_OPTOUT;
        } else if (args_word_is(argv[j], argvlen[j], "noloop")) {
            out->options |= TRACKING_NOLOOP;
        } else if (args_word_is(argv[j], argvlen[j], "prefix") && more) {
            j++;
            if (out->nprefixes == TRACKING_MAX_PREFIXES) {
                snprintf(err, errlen, "ERR keygate: at most %d prefixes per client", TRACKING_MAX_PREFIXES);
                return -1;
            }
            out->prefix[out->nprefixes] = argv[j];
            out->prefix_len[out->nprefixes++] = argvlen[j];
        } else {
            snprintf(err, errlen, "ERR syntax error");
            return -1;
        }
    }
    out->redirect = (uint64_t)redir;
    if (args_word_is(argv[2], argvlen[2], "off")) return 0;
    if (!args_word_is(argv[2], argvlen[2], "on")) {
        snprintf(err, errlen, "ERR syntax error");
        return -1;
    }
    out->on = 1;
    uint32_t o = out->options;
    const char *e = NULL;
    if (!(o & TRACKING_BCAST) && out->nprefixes)
        e = "ERR PREFIX option requires BCAST mode to be enabled";
    else if ((cur->flags & TRACKING_ON) && !!(cur->flags & TRACKING_BCAST) != !!(o & TRACKING_BCAST))
        e = "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling "
            "it with a different mode.";
    else if ((o & TRACKING_BCAST) && (o & (TRACKING_OPTIN | TRACKING_OPTOUT)))
        e = "ERR OPTIN and OPTOUT are not compatible with BCAST";
    else if ((o & TRACKING_OPTIN) && (o & TRACKING_OPTOUT))
        e = "ERR You can't specify both OPTIN mode and OPTOUT mode";
    else if (((o & TRACKING_OPTIN) && (cur->flags & TRACKING_OPTOUT)) ||
             ((o & TRACKING_OPTOUT) && (cur->flags & TRACKING_OPTIN)))
        e = "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling "
            "it with a different mode.";
    if (e) {
        snprintf(err, errlen, "%s", e);
        return -1;
    }
    if ((o & TRACKING_BCAST) && check_collisions(cur, out, err, errlen) != 0) return -1;
    if ((o & TRACKING_BCAST) && cur->nprefixes + (out->nprefixes ? out->nprefixes : 1) > TRACKING_MAX_PREFIXES) {
        snprintf(err, errlen, "ERR keygate: at most %d prefixes per client", TRACKING_MAX_PREFIXES);
        return -1;
    }
    return 0;
}

/* Bytewise order, a prefix before its extensions (rax's). */
static int prefix_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

static void state_add_prefix(struct tracking_state *st, const char *p, size_t len)
{
    size_t at = 0;
    while (at < st->nprefixes) {
        int c = prefix_cmp(st->prefix[at], st->prefix_len[at], p, len);
        if (c == 0) return; /* already there (Redis's raxTryInsert) */
        if (c > 0) break;
        at++;
    }
    if (st->nprefixes == TRACKING_MAX_PREFIXES) return; /* checked by tracking_parse */
    memmove(&st->prefix[at + 1], &st->prefix[at], (st->nprefixes - at) * sizeof(st->prefix[0]));
    memmove(&st->prefix_len[at + 1], &st->prefix_len[at], (st->nprefixes - at) * sizeof(st->prefix_len[0]));
    st->prefix[at] = xmalloc(len + 1); /* NUL-terminated: Redis prints it with %s */
    memcpy(st->prefix[at], p, len);
    st->prefix[at][len] = '\0';
    st->prefix_len[at] = len;
    st->nprefixes++;
}

void tracking_state_clear(struct tracking_state *st)
{
    for (size_t i = 0; i < st->nprefixes; i++) free(st->prefix[i]);
    memset(st, 0, sizeof(*st));
}

void tracking_apply(struct tracking_state *st, const struct tracking_request *rq)
{
    if (!rq->on) {
        tracking_state_clear(st); /* disableTracking: every flag and prefix goes */
        return;
    }
    st->flags = TRACKING_ON | (rq->options & (TRACKING_BCAST | TRACKING_OPTIN | TRACKING_OPTOUT | TRACKING_NOLOOP));
    st->redirect = rq->redirect;
    if (rq->options & TRACKING_BCAST) {
        if (rq->nprefixes == 0) state_add_prefix(st, "", 0);
        for (size_t i = 0; i < rq->nprefixes; i++) state_add_prefix(st, rq->prefix[i], rq->prefix_len[i]);
    }
}

static void add_bulk(struct bytebuf *out, const char *s, size_t len)
{
    char head[32];
    int n = snprintf(head, sizeof(head), "$%zu\r\n", len);
    bytebuf_add(out, head, (size_t)n);
    bytebuf_add(out, s, len);
    bytebuf_add(out, "\r\n", 2);
}

static void add_cstr(struct bytebuf *out, const char *s)
{
    add_bulk(out, s, strlen(s));
}

static void add_head(struct bytebuf *out, char type, long long n)
{
    char head[32];
    int k = snprintf(head, sizeof(head), "%c%lld\r\n", type, n);
    bytebuf_add(out, head, (size_t)k);
}

void tracking_info_reply(const struct tracking_state *st, int caching, int resp3, struct bytebuf *out)
{
    const char *flags[8];
    int n = 0;
    uint32_t f = st->flags;
    flags[n++] = (f & TRACKING_ON) ? "on" : "off";
    if (f & TRACKING_BCAST) flags[n++] = "bcast";
    if (f & TRACKING_OPTIN) {
        flags[n++] = "optin";
        if (caching) flags[n++] = "caching-yes";
    }
    if (f & TRACKING_OPTOUT) {
        flags[n++] = "optout";
        if (caching) flags[n++] = "caching-no";
    }
    if (f & TRACKING_NOLOOP) flags[n++] = "noloop";
    if (f & TRACKING_BROKEN_REDIR) flags[n++] = "broken_redirect";
    add_head(out, resp3 ? '%' : '*', resp3 ? 3 : 6);
    add_cstr(out, "flags");
    add_head(out, resp3 ? '~' : '*', n);
    for (int i = 0; i < n; i++) add_cstr(out, flags[i]);
    add_cstr(out, "redirect");
    add_head(out, ':', (f & TRACKING_ON) ? (long long)st->redirect : -1);
    add_cstr(out, "prefixes");
    add_head(out, '*', (long long)st->nprefixes);
    for (size_t i = 0; i < st->nprefixes; i++) add_bulk(out, st->prefix[i], st->prefix_len[i]);
}

int tracking_remembers(uint32_t flags, int caching)
{
    if (!(flags & TRACKING_ON) || (flags & TRACKING_BCAST)) return 0;
    if ((flags & TRACKING_OPTIN) && !caching) return 0;
    if ((flags & TRACKING_OPTOUT) && caching) return 0;
    return 1;
}

void tracking_message(int resp3, const char *const *keys, const size_t *lens, size_t n, struct bytebuf *out)
{
    if (resp3) {
        bytebuf_add(out, STR_AND_LEN(">2\r\n$10\r\ninvalidate\r\n"));
    } else {
        bytebuf_add(out, STR_AND_LEN("*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"));
    }
    if (n == 0) {
        if (resp3)
            bytebuf_add(out, STR_AND_LEN("_\r\n"));
        else
            bytebuf_add(out, STR_AND_LEN("$-1\r\n")); /* Redis: its shared.null of a RESP2 client */
        return;
    }
    add_head(out, '*', (long long)n);
    for (size_t i = 0; i < n; i++) add_bulk(out, keys[i], lens[i]);
}

/* Read "<type><integer>\r\n" at f[*at]: the integer, *at past it; -1 when not so. */
static long long read_head(const char *f, size_t len, size_t *at, char type)
{
    if (*at >= len || f[*at] != type) return -1;
    size_t i = *at + 1;
    long long v = 0;
    int digits = 0;
    while (i < len && f[i] >= '0' && f[i] <= '9' && digits < 18) v = v * 10 + (f[i++] - '0'), digits++;
    if (!digits || i + 1 >= len || f[i] != '\r' || f[i + 1] != '\n') return -1;
    *at = i + 2;
    return v;
}

int tracking_parse_push(const char *f, size_t len, const char **keys, size_t *lens, size_t *n)
{
    static const char head[] = ">2\r\n$10\r\ninvalidate\r\n";
    *n = 0;
    if (len < sizeof(head) - 1 || memcmp(f, head, sizeof(head) - 1) != 0) return 0;
    size_t at = sizeof(head) - 1;
    if (len - at == 3 && memcmp(f + at, "_\r\n", 3) == 0) return 2;
    long long count = read_head(f, len, &at, '*');
    if (count < 0) return -1;
    for (long long i = 0; i < count; i++) {
        long long l = read_head(f, len, &at, '$');
        if (l < 0 || at + (size_t)l + 2 > len || f[at + l] != '\r' || f[at + l + 1] != '\n') return -1;
        keys[*n] = f + at;
        lens[(*n)++] = (size_t)l;
        at += (size_t)l + 2;
    }
    return at == len ? 1 : -1;
}

/* ---- the table ---- */

/* The table holds delta bytes more for its tracking clients (the keys they read, their readers'
 * ids, BCAST prefixes; not the entry every connection has), under the lock; the process's
 * max-memory total follows. */
static void mem_change(struct tracking_table *t, int64_t delta)
{
    t->mem += delta;
    if (t->mem_total) __atomic_add_fetch(t->mem_total, delta, __ATOMIC_RELAXED);
}

static int64_t key_bytes(const struct tracking_key *k)
{
    return (int64_t)(sizeof(*k) + k->len + 1 + k->cap * sizeof(*k->ids));
}

static int64_t state_bytes(const struct tracking_state *st)
{
    int64_t n = 0;
    for (size_t i = 0; i < st->nprefixes; i++) n += (int64_t)st->prefix_len[i] + 1;
    return n;
}

void tracking_init(struct tracking_table *t, size_t max_keys)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    t->nclient_buckets = 1024;
    t->clients = xcalloc(t->nclient_buckets, sizeof(*t->clients));
    t->nkey_buckets = 1024;
    t->keys = xcalloc(t->nkey_buckets, sizeof(*t->keys));
    t->max_keys = max_keys;
}

static void key_free(struct tracking_table *t, struct tracking_key *k)
{
    mem_change(t, -key_bytes(k));
    free(k->ids);
    free(k);
}

void tracking_free(struct tracking_table *t)
{
    for (size_t i = 0; i < t->nclient_buckets; i++) {
        while (t->clients[i]) {
            struct tracking_client *c = t->clients[i];
            t->clients[i] = c->next;
            mem_change(t, -state_bytes(&c->st));
            tracking_state_clear(&c->st);
            free(c);
        }
    }
    for (size_t i = 0; i < t->nkey_buckets; i++) {
        while (t->keys[i]) {
            struct tracking_key *k = t->keys[i];
            t->keys[i] = k->next;
            key_free(t, k);
        }
    }
    free(t->clients);
    free(t->keys);
    free(t->bcast.items);
    pthread_mutex_destroy(&t->lock);
}

static struct tracking_client **client_slot(struct tracking_table *t, uint64_t id)
{
    struct tracking_client **c = &t->clients[id & (t->nclient_buckets - 1)];
    while (*c && (*c)->id != id) c = &(*c)->next;
    return c;
}

static struct tracking_client *client_find(struct tracking_table *t, uint64_t id)
{
    return *client_slot(t, id);
}

void tracking_client_add(struct tracking_table *t, uint64_t id, int worker)
{
    struct tracking_client *c = xcalloc(1, sizeof(*c));
    c->id = id;
    c->worker = worker;
    pthread_mutex_lock(&t->lock);
    struct tracking_client **slot = client_slot(t, id);
    if (!*slot) {
        c->next = NULL;
        *slot = c;
        c = NULL;
    }
    pthread_mutex_unlock(&t->lock);
    free(c); /* ids are unique: never */
}

/* c's tracking goes off (its BCAST entry too); under the lock. */
static void client_untrack(struct tracking_table *t, struct tracking_client *c)
{
    if (c->st.flags & TRACKING_ON) __atomic_sub_fetch(&t->tracking_clients, 1, __ATOMIC_RELAXED);
    if (c->st.flags & TRACKING_BCAST) ptrvec_remove(&t->bcast, c);
    mem_change(t, -state_bytes(&c->st));
    tracking_state_clear(&c->st);
}

void tracking_client_remove(struct tracking_table *t, uint64_t id)
{
    pthread_mutex_lock(&t->lock);
    struct tracking_client **slot = client_slot(t, id), *c = *slot;
    if (c) {
        *slot = c->next;
        client_untrack(t, c);
    }
    pthread_mutex_unlock(&t->lock);
    free(c); /* the keys it read keep its id until they are written (Redis's lazy cleanup) */
}

static int id_exists(void *ctx, uint64_t id)
{
    return client_find(ctx, id) != NULL;
}

int tracking_command(struct tracking_table *t, uint64_t id, size_t argc, const char *const *argv, const size_t *argvlen,
                     int (*allow)(void *ctx, const char *p, size_t len, char *err, size_t errlen), void *ctx,
                     uint32_t *flags, char *err, size_t errlen)
{
    pthread_mutex_lock(&t->lock);
    struct tracking_client *c = client_find(t, id);
    struct tracking_state none = {0};
    struct tracking_request rq;
    int rc = tracking_parse(c ? &c->st : &none, argc, argv, argvlen, id_exists, t, &rq, err, errlen);
    if (rc == 0 && rq.on && (rq.options & TRACKING_BCAST) && allow) {
        if (rq.nprefixes == 0) rc = allow(ctx, "", 0, err, errlen);
        for (size_t i = 0; rc == 0 && i < rq.nprefixes; i++)
            rc = allow(ctx, rq.prefix[i], rq.prefix_len[i], err, errlen);
    }
    if (rc == 0 && c) {
        uint32_t before = c->st.flags;
        if (!rq.on) {
            client_untrack(t, c);
        } else {
            int64_t had = state_bytes(&c->st);
            tracking_apply(&c->st, &rq);
            mem_change(t, state_bytes(&c->st) - had);
            if (!(before & TRACKING_ON)) __atomic_add_fetch(&t->tracking_clients, 1, __ATOMIC_RELAXED);
            if ((c->st.flags & TRACKING_BCAST) && !(before & TRACKING_BCAST)) ptrvec_push(&t->bcast, c);
            if (c->st.flags & TRACKING_BCAST) c->instances = UINT32_MAX;
        }
    }
    *flags = c ? c->st.flags : 0;
    pthread_mutex_unlock(&t->lock);
    return rc;
}

void tracking_state_get(struct tracking_table *t, uint64_t id, struct tracking_state *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&t->lock);
    const struct tracking_client *c = client_find(t, id);
    if (c) {
        out->flags = c->st.flags;
        out->redirect = c->st.redirect;
        for (size_t i = 0; i < c->st.nprefixes; i++) state_add_prefix(out, c->st.prefix[i], c->st.prefix_len[i]);
    }
    pthread_mutex_unlock(&t->lock);
}

static void notes_push(struct tracking_notes *notes, struct tracking_note n)
{
    if (notes->n == notes->cap) {
        notes->cap = notes->cap ? notes->cap * 2 : 16;
        notes->v = xrealloc(notes->v, notes->cap * sizeof(*notes->v));
    }
    notes->v[notes->n++] = n;
}

/* The note for tracking client c about key (NULL: everything), through its REDIRECT when it has one. */
static void note_for(struct tracking_table *t, struct tracking_client *c, const char *key, size_t len,
                     struct tracking_notes *notes)
{
    struct tracking_note n = {.kind = key ? TRACKING_NOTE_KEY : TRACKING_NOTE_FLUSH,
                              .worker = c->worker,
                              .client = c->id};
    if (c->st.redirect) {
        const struct tracking_client *r = client_find(t, c->st.redirect);
        if (!r) {
            c->st.flags |= TRACKING_BROKEN_REDIR;
            n.kind = TRACKING_NOTE_BROKEN;
            n.about = c->st.redirect;
            notes_push(notes, n);
            return;
        }
        n.worker = r->worker;
        n.client = r->id;
        n.redirected = 1;
    }
    if (key) {
        n.key = xmalloc(len + 1);
        memcpy(n.key, key, len);
        n.key[len] = '\0';
        n.key_len = len;
    }
    notes_push(notes, n);
}

static struct tracking_key **key_slot(struct tracking_table *t, const char *key, size_t len, uint64_t h)
{
    struct tracking_key **k = &t->keys[h & (t->nkey_buckets - 1)];
    while (*k && !((*k)->hash == h && (*k)->len == len && memcmp((*k)->key, key, len) == 0)) k = &(*k)->next;
    return k;
}

static void keys_grow(struct tracking_table *t)
{
    size_t nb = t->nkey_buckets * 2;
    struct tracking_key **b = xcalloc(nb, sizeof(*b));
    for (size_t i = 0; i < t->nkey_buckets; i++) {
        while (t->keys[i]) {
            struct tracking_key *k = t->keys[i];
            t->keys[i] = k->next;
            k->next = b[k->hash & (nb - 1)];
            b[k->hash & (nb - 1)] = k;
        }
    }
    free(t->keys);
    t->keys = b;
    t->nkey_buckets = nb;
}

/* Key k is written (writer: NOLOOP's client, 0 none) or pushed out: notes for its readers, then it goes. */
static void key_invalidate(struct tracking_table *t, struct tracking_key **slot, uint64_t writer,
                           enum tracking_cause cause, struct tracking_notes *notes)
{
    struct tracking_key *k = *slot;
    for (size_t i = 0; i < k->nids; i++) {
        struct tracking_client *c = client_find(t, k->ids[i]);
        if (!c || !(c->st.flags & TRACKING_ON) || (c->st.flags & TRACKING_BCAST)) continue;
        if ((c->st.flags & TRACKING_NOLOOP) && c->id == writer) continue;
        note_for(t, c, k->key, k->len, notes);
        __atomic_add_fetch(&t->sent[cause], 1, __ATOMIC_RELAXED);
    }
    *slot = k->next;
    t->nkeys--;
    key_free(t, k);
}

/* Over tracking-table-max-keys, or the process over max-memory: keys go (their readers told),
 * as Redis's trackingLimitUsedSlots (it picks them at random; keygate walks the buckets from
 * where it stopped last). Under the lock. */
static int over_limits(const struct tracking_table *t)
{
    if (t->max_keys && t->nkeys > t->max_keys) return 1;
    return t->mem_limit > 0 && t->mem_total && t->nkeys > 0 &&
           __atomic_load_n(t->mem_total, __ATOMIC_RELAXED) > t->mem_limit;
}

static void evict_to_limits(struct tracking_table *t, struct tracking_notes *notes)
{
    while (over_limits(t)) {
        size_t b = t->evict_cursor & (t->nkey_buckets - 1);
        if (t->keys[b])
            key_invalidate(t, &t->keys[b], 0, TRACKING_CAUSE_EVICT, notes);
        else
            t->evict_cursor++;
    }
}

void tracking_remember(struct tracking_table *t, uint64_t id, const char *const *keys, const size_t *lens, size_t n,
                       uint32_t instances, const uint8_t *streamed, struct tracking_notes *notes)
{
    pthread_mutex_lock(&t->lock);
    struct tracking_client *reader = client_find(t, id);
    if (reader) reader->instances |= instances;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = util_hash(keys[i], lens[i]);
        struct tracking_key **slot = key_slot(t, keys[i], lens[i], h), *k = *slot;
        uint8_t nc = streamed && streamed[i] < 32 ? streamed[i] : 255;
        if (reader && nc < 32) reader->nc_instances |= 1u << nc;
        if (!k) {
            k = xcalloc(1, sizeof(*k) + lens[i] + 1);
            k->hash = h;
            k->len = lens[i];
            memcpy(k->key, keys[i], lens[i]);
            k->next = t->keys[h & (t->nkey_buckets - 1)];
            t->keys[h & (t->nkey_buckets - 1)] = k;
            t->nkeys++;
            mem_change(t, key_bytes(k));
        }
        k->nc_inst = nc;
        size_t j = 0;
        while (j < k->nids && k->ids[j] != id) j++;
        if (j == k->nids) {
            if (k->nids == k->cap) {
                size_t cap = k->cap ? k->cap * 2 : 2;
                mem_change(t, (int64_t)((cap - k->cap) * sizeof(*k->ids)));
                k->cap = cap;
                k->ids = xrealloc(k->ids, k->cap * sizeof(*k->ids));
            }
            k->ids[k->nids++] = id;
        }
    }
    evict_to_limits(t, notes);
    if (t->nkeys > t->nkey_buckets * 2) keys_grow(t);
    pthread_mutex_unlock(&t->lock);
}

void tracking_invalidate(struct tracking_table *t, uint64_t writer, const char *const *keys, const size_t *lens,
                         const uint8_t *inst, size_t n, int from_feed, struct tracking_notes *notes)
{
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < n; i++) {
        struct tracking_key **slot = key_slot(t, keys[i], lens[i], util_hash(keys[i], lens[i]));
        if (*slot) key_invalidate(t, slot, writer, TRACKING_CAUSE_WRITE, notes);
        int bcast = from_feed || !inst || inst[i] >= 32 || !(t->feed_up & (1u << inst[i]));
        for (size_t b = 0; bcast && b < t->bcast.n; b++) {
            struct tracking_client *c = t->bcast.items[b];
            if ((c->st.flags & TRACKING_NOLOOP) && c->id == writer) continue;
            for (size_t p = 0; p < c->st.nprefixes; p++) {
                if (lens[i] >= c->st.prefix_len[p] && memcmp(keys[i], c->st.prefix[p], c->st.prefix_len[p]) == 0) {
                    note_for(t, c, keys[i], lens[i], notes);
                    __atomic_add_fetch(&t->sent[TRACKING_CAUSE_WRITE], 1, __ATOMIC_RELAXED);
                    break; /* prefixes of one client never overlap */
                }
            }
        }
    }
    pthread_mutex_unlock(&t->lock);
}

void tracking_forget(struct tracking_table *t, uint64_t id, const char *const *keys, const size_t *lens, size_t n)
{
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < n; i++) {
        struct tracking_key *k = *key_slot(t, keys[i], lens[i], util_hash(keys[i], lens[i]));
        for (size_t j = 0; k && j < k->nids; j++) {
            if (k->ids[j] != id) continue;
            k->ids[j] = k->ids[--k->nids];
            break;
        }
    }
    pthread_mutex_unlock(&t->lock);
}

/* Under the lock: a flush (cause FLUSH) to every tracking client that read keys of instance
 * `bit` outside near-cache namespaces (plain) or inside them (streamed) since its last flush;
 * those bits go (a BCAST client's plain bits stay: it hears every write). */
static void flush_readers(struct tracking_table *t, uint32_t bit, int plain, int streamed, struct tracking_notes *notes)
{
    t->flush_seq++;
    for (size_t b = 0; b < t->nclient_buckets; b++) {
        for (struct tracking_client *c = t->clients[b]; c; c = c->next) {
            if (!(c->st.flags & TRACKING_ON)) continue;
            if (!((plain && (c->instances & bit)) || (streamed && (c->nc_instances & bit)))) continue;
            if (!(c->st.flags & TRACKING_BCAST)) c->instances &= ~bit;
            c->nc_instances &= ~bit;
            c->flushed = t->flush_seq;
            note_for(t, c, NULL, 0, notes);
            __atomic_add_fetch(&t->sent[TRACKING_CAUSE_FLUSH], 1, __ATOMIC_RELAXED);
        }
    }
}

static uint32_t inst_bit(int inst)
{
    return inst >= 0 && inst < 32 ? 1u << inst : UINT32_MAX;
}

void tracking_flush_instance(struct tracking_table *t, int inst, struct tracking_notes *notes)
{
    pthread_mutex_lock(&t->lock);
    flush_readers(t, inst_bit(inst), 1, 1, notes);
    pthread_mutex_unlock(&t->lock);
}

void tracking_feed_lost(struct tracking_table *t, int inst, struct tracking_notes *notes)
{
    uint32_t bit = inst_bit(inst);
    pthread_mutex_lock(&t->lock);
    t->feed_up &= ~bit;
    flush_readers(t, bit, 1, !(t->stream_up & bit), notes);
    pthread_mutex_unlock(&t->lock);
}

void tracking_feed_back(struct tracking_table *t, int inst, struct tracking_notes *notes)
{
    uint32_t bit = inst_bit(inst);
    pthread_mutex_lock(&t->lock);
    t->feed_up |= bit;
    flush_readers(t, bit, 1, 0, notes);
    uint64_t seq = t->flush_seq; /* the clients just flushed need no key of it */
    int streamed = 0;            /* a client read near-cache keys of it since its last flush */
    for (size_t b = 0; b < t->nclient_buckets && !streamed; b++)
        for (struct tracking_client *c = t->clients[b]; c && !streamed; c = c->next)
            streamed = (c->nc_instances & bit) != 0;
    for (size_t b = 0; streamed && b < t->nkey_buckets; b++) {
        struct tracking_key **slot = &t->keys[b];
        while (*slot) {
            struct tracking_key *k = *slot;
            if (k->nc_inst >= 32 || !(bit & (1u << k->nc_inst))) {
                slot = &k->next;
                continue;
            }
            for (size_t i = 0; i < k->nids; i++) {
                struct tracking_client *c = client_find(t, k->ids[i]);
                if (!c || !(c->st.flags & TRACKING_ON) || (c->st.flags & TRACKING_BCAST) || c->flushed == seq) continue;
                note_for(t, c, k->key, k->len, notes);
                __atomic_add_fetch(&t->sent[TRACKING_CAUSE_FLUSH], 1, __ATOMIC_RELAXED);
            }
            *slot = k->next;
            t->nkeys--;
            key_free(t, k);
        }
    }
    for (size_t b = 0; b < t->nclient_buckets; b++)
        for (struct tracking_client *c = t->clients[b]; c; c = c->next) c->nc_instances &= ~bit;
    pthread_mutex_unlock(&t->lock);
}

void tracking_stream_set(struct tracking_table *t, int inst, int vouched, int gap, struct tracking_notes *notes)
{
    uint32_t bit = inst_bit(inst);
    pthread_mutex_lock(&t->lock);
    int was = (t->stream_up & bit) != 0;
    if (vouched)
        t->stream_up |= bit;
    else
        t->stream_up &= ~bit;
    if (!(t->feed_up & bit) && (gap || (was && !vouched))) flush_readers(t, bit, 0, 1, notes);
    pthread_mutex_unlock(&t->lock);
}

void tracking_feed_still_down(struct tracking_table *t, int inst, struct tracking_notes *notes)
{
    pthread_mutex_lock(&t->lock);
    flush_readers(t, inst_bit(inst), 1, 1, notes);
    pthread_mutex_unlock(&t->lock);
}

void tracking_set_limits(struct tracking_table *t, size_t max_keys, int64_t *mem_total, int64_t mem_limit,
                         struct tracking_notes *notes)
{
    pthread_mutex_lock(&t->lock);
    if (mem_total && !t->mem_total) __atomic_add_fetch(mem_total, t->mem, __ATOMIC_RELAXED);
    if (mem_total) t->mem_total = mem_total;
    t->max_keys = max_keys;
    t->mem_limit = mem_limit;
    evict_to_limits(t, notes);
    pthread_mutex_unlock(&t->lock);
}

void tracking_notes_reset(struct tracking_notes *notes)
{
    for (size_t i = 0; i < notes->n; i++) free(notes->v[i].key);
    notes->n = 0;
}

void tracking_notes_free(struct tracking_notes *notes)
{
    tracking_notes_reset(notes);
    free(notes->v);
    memset(notes, 0, sizeof(*notes));
}

void tracking_info(struct tracking_table *t, struct tracking_info *out)
{
    pthread_mutex_lock(&t->lock);
    out->clients = __atomic_load_n(&t->tracking_clients, __ATOMIC_RELAXED);
    out->keys = t->nkeys;
    out->feeds_up = __builtin_popcount(t->feed_up);
    out->streams_up = __builtin_popcount(t->stream_up);
    out->memory = t->mem;
    for (int i = 0; i < TRACKING_CAUSES; i++) out->sent[i] = __atomic_load_n(&t->sent[i], __ATOMIC_RELAXED);
    pthread_mutex_unlock(&t->lock);
}

size_t tracking_keys(struct tracking_table *t)
{
    pthread_mutex_lock(&t->lock);
    size_t n = t->nkeys;
    pthread_mutex_unlock(&t->lock);
    return n;
}
