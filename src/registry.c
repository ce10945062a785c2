/* registry.c: registry.conf parsing and validation, longest-prefix lookup, table printing. */
#include "registry.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/*
 * One entry a line:
 *
 *   kind     prefix      fields (name=value, "quoted values", the flag words sliding and depth)
 *   namespace cache:     instance=cache ttl=1h max-ttl=7d owner=cache purpose="..."
 *   namespace q:         instance=durable ttl=none owner=queues replicas=1
 *   channel  push:       instance=cache owner=notifications
 *   default              instance=cache ttl=1h owner=legacy enforce=report
 *
 * `default` (at most one line, no prefix) takes every key and channel that matches no prefix;
 * `enforce=on|report` may end any line.
 * Parsing collects every problem (with its line), then reports them sorted by line.
 */

enum field_id {
    F_INSTANCE,
    F_OWNER,
    F_TTL,
    F_MAX_TTL,
    F_NEAR_CACHE,
    F_PURPOSE,
    F_SLIDING,
    F_ENFORCE,
    F_DEPTH,
    F_REPLICAS,
    F_MAX_KEYS,
    F_MAX_MEMORY,
    F_COUNT
};

static const struct {
    const char *name;
    int channel_ok; /* allowed on a channel line */
} fields[F_COUNT] = {
    [F_INSTANCE] = {"instance", 1}, [F_OWNER] = {"owner", 1},           [F_TTL] = {"ttl", 0},
    [F_MAX_TTL] = {"max-ttl", 0},   [F_NEAR_CACHE] = {"near-cache", 0}, [F_PURPOSE] = {"purpose", 1},
    [F_SLIDING] = {"sliding", 0},   [F_ENFORCE] = {"enforce", 1},       [F_DEPTH] = {"depth", 0},
    [F_REPLICAS] = {"replicas", 0}, [F_MAX_KEYS] = {"max-keys", 0},     [F_MAX_MEMORY] = {"max-memory", 0},
};

const char *registry_field_name(size_t i)
{
    return i < F_COUNT ? fields[i].name : NULL;
}

int registry_field_is_flag(size_t i)
{
    return i == F_SLIDING || i == F_DEPTH;
}

struct line_error {
    int line;
    size_t seq; /* keeps errors of one line in the order found */
    char *msg;
};

/* Parsing state for one registry_load call. */
struct parse_ctx {
    const char *const *instances;
    size_t ninstances;
    struct line_error *errs;
    size_t nerrs, errs_cap;
    struct namespace_entry *entries; /* every line with a kind and a prefix, in file order */
    size_t count, cap;
    struct namespace_entry *dflt; /* the first `default` line (heap), NULL before one */
};

static void __attribute__((format(printf, 3, 4))) err_add(struct parse_ctx *ctx, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ctx->nerrs == ctx->errs_cap) {
        ctx->errs_cap = ctx->errs_cap ? ctx->errs_cap * 2 : 8;
        ctx->errs = xrealloc(ctx->errs, ctx->errs_cap * sizeof *ctx->errs);
    }
    ctx->errs[ctx->nerrs].line = line;
    ctx->errs[ctx->nerrs].seq = ctx->nerrs;
    ctx->errs[ctx->nerrs].msg = xstrdup(msg);
    ctx->nerrs++;
}

static int line_error_cmp(const void *a, const void *b)
{
    const struct line_error *x = a, *y = b;
    if (x->line != y->line) return x->line < y->line ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int bytes_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

/* Order by (kind, prefix, line): the registry's sort order, first-defined first among equals. */
static int entry_cmp(const void *a, const void *b)
{
    const struct namespace_entry *x = a, *y = b;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    int c = bytes_cmp(x->prefix, x->prefix_len, y->prefix, y->prefix_len);
    if (c) return c;
    return x->line < y->line ? -1 : x->line > y->line;
}

static int len_desc_cmp(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x > y ? -1 : x < y;
}

static void entry_free(struct namespace_entry *e)
{
    free(e->prefix);
    free(e->owner);
    free(e->purpose);
    free(e->nc_stream);
    free(e->nc_markers);
}

static int instance_find(const struct parse_ctx *ctx, const char *name)
{
    for (size_t i = 0; i < ctx->ninstances; i++)
        if (strcmp(ctx->instances[i], name) == 0) return (int)i;
    return -1;
}

static void instance_unknown(struct parse_ctx *ctx, int line, const char *name)
{
    char list[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < ctx->ninstances && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", ctx->instances[i]);
    if (ctx->ninstances == 0)
        err_add(ctx, line, "unknown instance '%s' (the config defines no instances)", name);
    else
        err_add(ctx, line, "unknown instance '%s' (valid instances: %s)", name, list);
}

/* A duration field: D, or "none" where allow_none. 0 = ok (none -> 0 ms). */
static int field_duration(struct parse_ctx *ctx, int line, const char *field, const char *v, int allow_none,
                          int64_t *ms)
{
    if (allow_none && strcmp(v, "none") == 0) {
        *ms = 0;
        return 0;
    }
    if (duration_parse(v, ms) == 0) return 0;
    err_add(ctx, line,
            "bad duration for %s: '%s' (expected a positive integer and a unit: "
            "500ms 90s 10m 24h 7d%s)",
            field, v, allow_none ? ", or none" : "");
    return -1;
}

/* Apply one name=value token (or the flag word) to `e`. `seen` tracks repeats.
 * Returns the field's id, or -1 (reported) when the token is bad. */
static int field_apply(struct parse_ctx *ctx, int line, struct namespace_entry *e, const struct token *tok,
                       int seen[F_COUNT])
{
    const char *name = tok->text;
    const char *value = tok->eq >= 0 ? tok->text + tok->eq + 1 : NULL;
    size_t name_len = tok->eq >= 0 ? (size_t)tok->eq : strlen(name);
    int f = -1;
    for (int i = 0; i < F_COUNT; i++)
        if (strlen(fields[i].name) == name_len && memcmp(fields[i].name, name, name_len) == 0) f = i;
    int flag = f == F_SLIDING || f == F_DEPTH;
    if (f < 0 || flag != (value == NULL)) {
        if (flag)
            err_add(ctx, line, "'%s' is a flag word and takes no value", fields[f].name);
        else if (f >= 0)
            err_add(ctx, line, "field '%s' needs a value (%s=...)", fields[f].name, fields[f].name);
        else
            err_add(ctx, line,
                    "unknown field '%.*s' (fields: instance= owner= ttl= max-ttl= "
                    "near-cache= replicas= max-keys= max-memory= purpose= enforce= and the flag words sliding, depth)",
                    (int)name_len, name);
        return -1;
    }
    if (seen[f]++) {
        err_add(ctx, line, "repeated field '%s'", fields[f].name);
        return -1;
    }
    if (e->kind == NS_CHANNEL && !fields[f].channel_ok) {
        err_add(ctx, line, "%s%s is not allowed on a channel line (channels hold no keys)", fields[f].name,
                flag ? "" : "=");
        return -1;
    }
    if (e->is_default && f == F_NEAR_CACHE) {
        err_add(ctx, line, "near-cache= is not allowed on the default line (give the keys a namespace first)");
        return -1;
    }
    switch (f) {
    case F_INSTANCE:
        e->instance = instance_find(ctx, value);
        if (e->instance < 0) {
            instance_unknown(ctx, line, value);
            return -1;
        }
        return f;
    case F_OWNER:
        if (!*value || strchr(value, ',') || strcmp(value, "*") == 0) {
            err_add(ctx, line, "bad owner '%s' (a name; no commas, not '*')", value);
            return -1;
        }
        e->owner = xstrdup(value);
        return f;
    case F_PURPOSE:
        e->purpose = xstrdup(value);
        return f;
    case F_TTL:
        return field_duration(ctx, line, "ttl", value, 1, &e->ttl_ms) ? -1 : f;
    case F_MAX_TTL:
        return field_duration(ctx, line, "max-ttl", value, 0, &e->max_ttl_ms) ? -1 : f;
    case F_NEAR_CACHE:
        return field_duration(ctx, line, "near-cache", value, 0, &e->near_cache_ms) ? -1 : f;
    case F_DEPTH:
        e->depth = 1;
        return f;
    case F_REPLICAS: {
        char *end;
        errno = 0;
        long n = strtol(value, &end, 10);
        if (!*value || *end || errno || value[0] == '+' || value[0] == '-' || n < 1 || n > REGISTRY_MAX_REPLICAS) {
            err_add(ctx, line, "bad replicas= value '%s' (a number of replicas, 1..%d)", value, REGISTRY_MAX_REPLICAS);
            return -1;
        }
        e->replicas = (int)n;
        return f;
    }
    case F_MAX_KEYS: {
        char *end;
        errno = 0;
        long long n = strtoll(value, &end, 10);
        if (!*value || *end || errno || value[0] == '+' || value[0] == '-' || n < 1) {
            err_add(ctx, line, "bad max-keys= value '%s' (a number of keys, 1 or more)", value);
            return -1;
        }
        e->max_keys = (int64_t)n;
        return f;
    }
    case F_MAX_MEMORY:
        if (size_parse(value, &e->max_memory) != 0 || e->max_memory < 1) {
            err_add(ctx, line, "bad max-memory= value '%s' (a size such as 1048576, 512kb, 64mb, 1gb)", value);
            return -1;
        }
        return f;
    case F_ENFORCE:
        if ((e->enforce = registry_enforce_word(value)) == ENFORCE_UNSET) {
            err_add(ctx, line, "bad enforce= value '%s' (on or report)", value);
            return -1;
        }
        return f;
    default: /* F_SLIDING */
        e->sliding = 1;
        return f;
    }
}

/* Parse one tokenized, non-empty line. Keeps the entry (for duplicate checks) if it has a
 * kind and a prefix; returns 0 when the line is valid. */
static int line_parse(struct parse_ctx *ctx, int line, const struct tokens *t)
{
    struct namespace_entry e = {.line = line, .instance = -1};
    const char *kind = t->v[0].text;
    if (strcmp(kind, "namespace") == 0)
        e.kind = NS_KEY;
    else if (strcmp(kind, "channel") == 0)
        e.kind = NS_CHANNEL;
    else if (strcmp(kind, "default") == 0)
        e.kind = NS_KEY, e.is_default = 1;
    else {
        err_add(ctx, line, "unknown kind '%s' (expected namespace, channel or default)", kind);
        return -1;
    }
    if (e.is_default && t->n >= 2 && t->v[1].eq < 0 && strcmp(t->v[1].text, "sliding") != 0) {
        err_add(ctx, line, "the default line takes no prefix ('%s'): it takes every key matching none", t->v[1].text);
        return -1;
    }
    if (e.is_default && ctx->dflt) {
        err_add(ctx, line, "a second default line (first on line %d; at most one)", ctx->dflt->line);
        return -1;
    }
    if (!e.is_default && (t->n < 2 || t->v[1].eq >= 0)) {
        err_add(ctx, line, "missing prefix after '%s'", kind);
        return -1;
    }
    if (!e.is_default && t->v[1].text[0] == '\0') {
        err_add(ctx, line, "empty prefix");
        return -1;
    }
    int bad = 0, seen[F_COUNT] = {0}, ok[F_COUNT] = {0};
    for (size_t i = e.is_default ? 1 : 2; i < t->n; i++) {
        int f = field_apply(ctx, line, &e, &t->v[i], seen);
        if (f < 0)
            bad = 1;
        else
            ok[f] = 1;
    }
    if (!seen[F_INSTANCE]) err_add(ctx, line, "missing instance= (required)"), bad = 1;
    if (!seen[F_OWNER]) err_add(ctx, line, "missing owner= (required)"), bad = 1;
    if (e.kind == NS_KEY && !seen[F_TTL])
        err_add(ctx, line,
                "missing ttl= (required on %s lines; say ttl=none for keys "
                "that never expire)",
                e.is_default ? "default" : "namespace"),
            bad = 1;
    if (ok[F_TTL] && ok[F_MAX_TTL] && e.ttl_ms > 0 && e.max_ttl_ms < e.ttl_ms) {
        char a[32], b[32];
        duration_format(e.max_ttl_ms, a, sizeof a);
        duration_format(e.ttl_ms, b, sizeof b);
        err_add(ctx, line, "max-ttl=%s is less than ttl=%s", a, b);
        bad = 1;
    }
    if (ok[F_TTL] && e.sliding && e.ttl_ms == 0) {
        err_add(ctx, line, "sliding needs a ttl to slide (ttl=none)");
        bad = 1;
    }
    if (ok[F_NEAR_CACHE] && e.sliding) {
        err_add(ctx, line,
                "near-cache= cannot be combined with sliding (a cached read would not reset the key's TTL on the "
                "backend)");
        bad = 1;
    }
    if ((ok[F_MAX_KEYS] || ok[F_MAX_MEMORY]) && ok[F_INSTANCE] &&
        !registry_instance_budgets(ctx->instances[e.instance])) {
        err_add(ctx, line,
                "%s is not allowed on instance '%s': budgets are for a noeviction instance (only 'durable' is held "
                "to noeviction by the topology guard; where Redis evicts, LRU decides what stays)",
                ok[F_MAX_KEYS] ? "max-keys=" : "max-memory=", ctx->instances[e.instance]);
        bad = 1;
    }
    e.prefix = xstrdup(e.is_default ? "" : t->v[1].text);
    e.prefix_len = strlen(e.prefix);
    if (!e.owner) e.owner = xstrdup("");
    if (!e.purpose) e.purpose = xstrdup("");
    if (e.is_default) {
        ctx->dflt = xmemdup(&e, sizeof e);
        return bad ? -1 : 0;
    }
    if (ctx->count == ctx->cap) {
        ctx->cap = ctx->cap ? ctx->cap * 2 : 32;
        ctx->entries = xrealloc(ctx->entries, ctx->cap * sizeof *ctx->entries);
    }
    ctx->entries[ctx->count++] = e;
    return bad ? -1 : 0;
}

/* Report every prefix defined twice for the same kind; entries must be sorted by entry_cmp. */
static void duplicates_check(struct parse_ctx *ctx)
{
    size_t first = 0;
    for (size_t i = 1; i < ctx->count; i++) {
        const struct namespace_entry *a = &ctx->entries[first], *b = &ctx->entries[i];
        if (a->kind != b->kind || bytes_cmp(a->prefix, a->prefix_len, b->prefix, b->prefix_len)) {
            first = i;
            continue;
        }
        err_add(ctx, b->line, "duplicate %s prefix '%s' (first defined on line %d)",
                b->kind == NS_KEY ? "namespace" : "channel", b->prefix, a->line);
    }
}

/* A new heap string "<keygate prefix>nc:{<keygate prefix>}:<what>" (registry.h: one stream and
 * one markers hash per instance, the hash tag puts them in one cluster slot). */
static char *near_cache_key(const struct namespace_entry *kg, const char *what, size_t *len)
{
    size_t n = kg->prefix_len + 4 + kg->prefix_len + 2 + strlen(what);
    char *k = xmalloc(n + 1);
    snprintf(k, n + 1, "%snc:{%s}:%s", kg->prefix, kg->prefix, what);
    *len = n;
    return k;
}

/* The keygate-owned key namespace of instance (the first such line in the file), or NULL. */
static const struct namespace_entry *keygate_owned(const struct parse_ctx *ctx, int instance)
{
    const struct namespace_entry *kg = NULL;
    for (size_t j = 0; j < ctx->count; j++) {
        const struct namespace_entry *k = &ctx->entries[j];
        if (k->kind == NS_KEY && k->instance == instance && strcmp(k->owner, REGISTRY_KEYGATE_OWNER) == 0 &&
            (!kg || k->line < kg->line))
            kg = k;
    }
    return kg;
}

/* 1 when namespace e lies inside a near-cache namespace of its own instance (a longer prefix
 * carved out of it): its writes announce their keys too, since a keygate whose registry lacks
 * the carve-out caches them under the shorter prefix. */
static int near_cache_nested(const struct parse_ctx *ctx, const struct namespace_entry *e)
{
    for (size_t j = 0; j < ctx->count; j++) {
        const struct namespace_entry *o = &ctx->entries[j];
        if (o != e && o->kind == NS_KEY && o->near_cache_ms > 0 && o->instance == e->instance &&
            o->prefix_len < e->prefix_len && memcmp(o->prefix, e->prefix, o->prefix_len) == 0)
            return 1;
    }
    return 0;
}

/*
 * near-cache=D keeps its invalidations in the stream of the keygate-owned namespace
 * (owner=keygate) of its own instance: the write and its XADD go in one MULTI/EXEC, which one
 * instance runs. One stream per instance, whose entries carry the key: a keygate reads every
 * invalidation of the instance whatever prefixes the writer's registry has. The first such
 * line in the file is the one used. Sets nc_stream and nc_markers on every near-cache line and
 * on every line nested inside one (its writes carry their XADD too).
 */
static void near_cache_check(struct parse_ctx *ctx)
{
    for (size_t i = 0; i < ctx->count; i++) {
        struct namespace_entry *e = &ctx->entries[i];
        if (e->kind != NS_KEY || e->instance < 0) continue; /* an unknown instance: reported already */
        int keygate = strcmp(e->owner, REGISTRY_KEYGATE_OWNER) == 0;
        if (e->near_cache_ms > 0 && keygate) {
            err_add(ctx, e->line,
                    "near-cache= is not allowed on a keygate-owned line (owner=keygate holds its streams)");
            continue;
        }
        if (e->near_cache_ms == 0 && (keygate || !near_cache_nested(ctx, e))) continue;
        const struct namespace_entry *kg = keygate_owned(ctx, e->instance);
        if (!kg) {
            if (e->near_cache_ms == 0) continue; /* the near-cache line it is nested in is reported */
            const char *inst = ctx->instances[e->instance];
            err_add(ctx, e->line,
                    "near-cache= needs a keygate-owned namespace on instance '%s' for its invalidation stream: add "
                    "the line 'namespace keygate: instance=%s ttl=none owner=keygate'",
                    inst, inst);
            continue;
        }
        e->nc_stream = near_cache_key(kg, "stream", &e->nc_stream_len);
        e->nc_markers = near_cache_key(kg, "markers", &e->nc_markers_len);
    }
}

/* Build the per-kind ranges and distinct prefix lengths used by registry_lookup. */
static void index_build(struct registry *r)
{
    for (int k = 0; k < 2; k++) {
        r->first[k] = r->count;
        r->n[k] = 0;
        r->lens[k] = xrealloc(NULL, (r->count ? r->count : 1) * sizeof(size_t));
        r->nlens[k] = 0;
    }
    for (size_t i = 0; i < r->count; i++) {
        int k = r->entries[i].kind;
        if (r->n[k]++ == 0) r->first[k] = i;
        r->lens[k][r->nlens[k]++] = r->entries[i].prefix_len;
    }
    for (int k = 0; k < 2; k++) {
        qsort(r->lens[k], r->nlens[k], sizeof(size_t), len_desc_cmp);
        size_t out = 0;
        for (size_t i = 0; i < r->nlens[k]; i++)
            if (out == 0 || r->lens[k][out - 1] != r->lens[k][i]) r->lens[k][out++] = r->lens[k][i];
        r->nlens[k] = out;
    }
    /* entries are sorted by prefix, so one first byte is one contiguous run */
    memset(r->bucket_n, 0, sizeof(r->bucket_n));
    for (size_t i = 0; i < r->count; i++) {
        const struct namespace_entry *e = &r->entries[i];
        unsigned char b0 = (unsigned char)e->prefix[0];
        if (r->bucket_n[e->kind][b0]++ == 0) r->bucket_at[e->kind][b0] = (uint32_t)i;
    }
}

struct registry *registry_load(const char *path, const char *const *instances, size_t ninstances, struct diag *errs)
{
    struct parse_ctx ctx = {.instances = instances, .ninstances = ninstances};
    FILE *f = fopen(path, "r");
    if (!f) {
        diag_add(errs, path, 0, "cannot open registry: %s", strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t bufcap = 0;
    int lineno = 0, nonempty = 0;
    while (getline(&buf, &bufcap, f) >= 0) {
        lineno++;
        struct tokens t;
        const char *why = NULL;
        if (tokens_split(buf, &t, &why) != 0) {
            err_add(&ctx, lineno, "%s", why);
            nonempty = 1;
            continue;
        }
        if (t.n > 0) {
            nonempty = 1;
            (void)line_parse(&ctx, lineno, &t);
        }
        tokens_free(&t);
    }
    free(buf);
    fclose(f);
    if (!nonempty) err_add(&ctx, 0, "no entries (an empty registry would refuse every key)");

    if (ctx.count > 0) qsort(ctx.entries, ctx.count, sizeof *ctx.entries, entry_cmp);
    duplicates_check(&ctx);
    near_cache_check(&ctx);

    if (ctx.nerrs > 0) qsort(ctx.errs, ctx.nerrs, sizeof *ctx.errs, line_error_cmp);
    for (size_t i = 0; i < ctx.nerrs; i++) {
        diag_add(errs, path, ctx.errs[i].line, "%s", ctx.errs[i].msg);
        free(ctx.errs[i].msg);
    }
    free(ctx.errs);
    if (ctx.nerrs > 0) {
        for (size_t i = 0; i < ctx.count; i++) entry_free(&ctx.entries[i]);
        free(ctx.entries);
        if (ctx.dflt) entry_free(ctx.dflt);
        free(ctx.dflt);
        return NULL;
    }
    struct registry *r = xrealloc(NULL, sizeof *r);
    memset(r, 0, sizeof *r);
    r->path = xstrdup(path);
    r->entries = ctx.entries;
    r->count = ctx.count;
    for (size_t i = 0; i < r->count; i++) r->entries[i].index = (uint32_t)i;
    r->dflt = ctx.dflt;
    if (r->dflt) r->dflt->index = (uint32_t)r->count;
    index_build(r);
    return r;
}

int registry_instance_budgets(const char *instance)
{
    return strcmp(instance, REGISTRY_BUDGET_INSTANCE) == 0;
}

enum ns_enforce registry_enforce_word(const char *word)
{
    return strcmp(word, "on") == 0 ? ENFORCE_ON : strcmp(word, "report") == 0 ? ENFORCE_REPORT : ENFORCE_UNSET;
}

int registry_any_budget(const struct registry *r)
{
    for (size_t i = 0; r && i <= r->count; i++)
        if (registry_has_budget(registry_entry(r, i))) return 1;
    return 0;
}

void registry_set_enforce(struct registry *r, enum ns_enforce global)
{
    if (!r) return;
    for (size_t i = 0; i <= r->count; i++) {
        struct namespace_entry *e = i < r->count ? &r->entries[i] : r->dflt;
        if (e && e->enforce == ENFORCE_UNSET) e->enforce = global;
    }
}

void registry_free(struct registry *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->count; i++) entry_free(&r->entries[i]);
    free(r->entries);
    if (r->dflt) entry_free(r->dflt);
    free(r->dflt);
    free(r->lens[0]);
    free(r->lens[1]);
    free(r->path);
    free(r);
}

const struct namespace_entry *registry_lookup(const struct registry *r, enum ns_kind kind, const char *key, size_t len)
{
    if (!r || (kind != NS_KEY && kind != NS_CHANNEL) || len == 0 || r->count == 0)
        return NULL; /* a default line alone */
    /* Usual registries: a handful of prefixes share a first byte; scan them, keep the longest. */
    unsigned char b0 = (unsigned char)key[0];
    if (r->bucket_n[kind][b0] <= 16) {
        const struct namespace_entry *best = NULL;
        const struct namespace_entry *e = r->entries + r->bucket_at[kind][b0];
        for (uint32_t i = 0; i < r->bucket_n[kind][b0]; i++, e++) {
            if (e->prefix_len <= len && (!best || e->prefix_len > best->prefix_len) &&
                memcmp(e->prefix, key, e->prefix_len) == 0)
                best = e;
        }
        return best;
    }
    const struct namespace_entry *base = r->entries + r->first[kind];
    for (size_t li = 0; li < r->nlens[kind]; li++) {
        size_t plen = r->lens[kind][li];
        if (plen > len) continue;
        size_t lo = 0, hi = r->n[kind];
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            int c = bytes_cmp(base[mid].prefix, base[mid].prefix_len, key, plen);
            if (c == 0) return &base[mid];
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
    }
    return NULL;
}

/* ---- printing ---------------------------------------------------------------------- */

/* COL_BUDGET is printed only when some line has a budget (registry_print's ncols). */
enum { COL_NS, COL_PURPOSE, COL_INSTANCE, COL_TTL, COL_MAX_TTL, COL_OWNER, COL_BUDGET, NCOLS };

static const char *const col_titles[NCOLS] = {"Namespace", "Purpose", "Instance", "TTL", "Max TTL", "Owner", "Budget"};

/* The cells of one row, with room for the formatted ones. */
struct row {
    const char *cell[NCOLS];
    char ttl[96], max_ttl[32], instance[32], budget[64];
};

/* A size as the shortest exact form size_parse reads back: "64mb", "512kb", "1gb", "1000". */
static void size_format(int64_t n, char *buf, size_t len)
{
    static const struct {
        const char *unit;
        int64_t mul;
    } units[] = {{"gb", 1024LL * 1024 * 1024}, {"mb", 1024 * 1024}, {"kb", 1024}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (n % units[i].mul == 0) {
            snprintf(buf, len, "%lld%s", (long long)(n / units[i].mul), units[i].unit);
            return;
        }
    }
    snprintf(buf, len, "%lld", (long long)n);
}

/* "max-keys=500, max-memory=64mb", or "-" without a budget. */
static void budget_cell(const struct namespace_entry *e, char *buf, size_t len)
{
    if (!registry_has_budget(e)) {
        snprintf(buf, len, "-");
        return;
    }
    char mem[32] = "";
    if (e->max_memory > 0) size_format(e->max_memory, mem, sizeof mem);
    if (e->max_keys > 0 && e->max_memory > 0)
        snprintf(buf, len, "max-keys=%lld, max-memory=%s", (long long)e->max_keys, mem);
    else if (e->max_keys > 0)
        snprintf(buf, len, "max-keys=%lld", (long long)e->max_keys);
    else
        snprintf(buf, len, "max-memory=%s", mem);
}

static void row_fill(struct row *row, const struct namespace_entry *e, const char *const *instances)
{
    row->cell[COL_NS] = e->is_default ? REGISTRY_DEFAULT_NAME : e->prefix;
    row->cell[COL_PURPOSE] = e->purpose;
    row->cell[COL_OWNER] = e->owner;
    if (instances)
        row->cell[COL_INSTANCE] = instances[e->instance];
    else {
        snprintf(row->instance, sizeof row->instance, "#%d", e->instance);
        row->cell[COL_INSTANCE] = row->instance;
    }
    if (e->kind == NS_CHANNEL) {
        snprintf(row->ttl, sizeof row->ttl, "(pub/sub)");
    } else {
        char d[32] = "none";
        if (e->ttl_ms > 0) duration_format(e->ttl_ms, d, sizeof d);
        size_t used = (size_t)snprintf(row->ttl, sizeof row->ttl, "%s%s", d, e->sliding ? " sliding" : "");
        if (e->near_cache_ms > 0 && used < sizeof row->ttl) {
            char nc[32];
            duration_format(e->near_cache_ms, nc, sizeof nc);
            snprintf(row->ttl + used, sizeof row->ttl - used, ", near-cache %s", nc);
        }
    }
    size_t tl = strlen(row->ttl);
    if (e->replicas > 0 && tl < sizeof row->ttl) {
        snprintf(row->ttl + tl, sizeof row->ttl - tl, ", replicas=%d", e->replicas);
        tl = strlen(row->ttl);
    }
    if (e->enforce == ENFORCE_REPORT && tl < sizeof row->ttl)
        snprintf(row->ttl + tl, sizeof row->ttl - tl, ", enforce=report");
    if (e->max_ttl_ms > 0 && e->kind == NS_KEY)
        duration_format(e->max_ttl_ms, row->max_ttl, sizeof row->max_ttl);
    else
        snprintf(row->max_ttl, sizeof row->max_ttl, "-");
    row->cell[COL_TTL] = row->ttl;
    row->cell[COL_MAX_TTL] = row->max_ttl;
    budget_cell(e, row->budget, sizeof row->budget);
    row->cell[COL_BUDGET] = row->budget;
}

/* Display width: UTF-8 code points, so "—" counts as one column. */
static size_t text_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80) w++;
    return w;
}

static void markdown_cell(FILE *out, const char *s)
{
    fputs(" ", out);
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", out);
        else if (*s == '\n' || *s == '\r')
            fputc(' ', out);
        else
            fputc(*s, out);
    }
    fputs(" |", out);
}

static void plain_row(FILE *out, const char *const cells[NCOLS], const size_t width[NCOLS], int ncols)
{
    for (int c = 0; c < ncols; c++) {
        fputs(cells[c], out);
        if (c + 1 < ncols) fprintf(out, "%*s", (int)(width[c] - text_width(cells[c]) + 2), "");
    }
    fputc('\n', out);
}

static int entry_line_cmp(const void *a, const void *b)
{
    const struct namespace_entry *x = *(const struct namespace_entry *const *)a;
    const struct namespace_entry *y = *(const struct namespace_entry *const *)b;
    return x->line < y->line ? -1 : x->line > y->line;
}

void registry_print(const struct registry *r, const char *const *instances, int markdown, FILE *out)
{
    size_t n = r ? r->count : 0;
    int ncols = registry_any_budget(r) ? NCOLS : COL_BUDGET;
    const struct namespace_entry **order = xrealloc(NULL, (n + 1) * sizeof *order);
    struct row *rows = xrealloc(NULL, (n + 1) * sizeof *rows);
    for (size_t i = 0; i < n; i++) order[i] = &r->entries[i];
    qsort(order, n, sizeof *order, entry_line_cmp);
    if (r && r->dflt) order[n++] = r->dflt; /* the default line is always the last row */

    size_t width[NCOLS];
    for (int c = 0; c < ncols; c++) width[c] = text_width(col_titles[c]);
    for (size_t i = 0; i < n; i++) {
        row_fill(&rows[i], order[i], instances);
        for (int c = 0; c < ncols; c++) {
            size_t w = text_width(rows[i].cell[c]);
            if (w > width[c]) width[c] = w;
        }
    }

    if (markdown) {
        fputs("|", out);
        for (int c = 0; c < ncols; c++) markdown_cell(out, col_titles[c]);
        fputs("\n|", out);
        for (int c = 0; c < ncols; c++) fputs("---|", out);
        fputc('\n', out);
        for (size_t i = 0; i < n; i++) {
            fputs("|", out);
            for (int c = 0; c < ncols; c++) markdown_cell(out, rows[i].cell[c]);
            fputc('\n', out);
        }
    } else {
        const char *dashes[NCOLS];
        char *rule[NCOLS];
        for (int c = 0; c < ncols; c++) {
            rule[c] = xrealloc(NULL, width[c] + 1);
            memset(rule[c], '-', width[c]);
            rule[c][width[c]] = '\0';
            dashes[c] = rule[c];
        }
        plain_row(out, col_titles, width, ncols);
        plain_row(out, dashes, width, ncols);
        for (size_t i = 0; i < n; i++) plain_row(out, rows[i].cell, width, ncols);
        for (int c = 0; c < ncols; c++) free(rule[c]);
    }
    free(rows);
    free(order);
}
