/* registry.h: the namespace registry (registry.conf): parsing, validation, longest-prefix lookup. */
#ifndef KEYGATE_REGISTRY_H
#define KEYGATE_REGISTRY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

enum ns_kind { NS_KEY = 0, NS_CHANNEL = 1 };

/* enforce= of a line: unset lines take keygate.conf's `enforce` (registry_set_enforce). */
enum ns_enforce {
    ENFORCE_UNSET = 0, /* no enforce= field: as `enforce` in keygate.conf says (on by default) */
    ENFORCE_ON,        /* refuse and rewrite as the registry says */
    ENFORCE_REPORT,    /* forward unchanged; count and log what enforcement would refuse or change */
};

/* The label of the default line (registry_print's Namespace cell, metrics' namespace label). */
#define REGISTRY_DEFAULT_NAME "(default)"

struct namespace_entry {
    enum ns_kind kind; /* "namespace" -> NS_KEY, "channel" -> NS_CHANNEL */
    char *prefix;
    size_t prefix_len;
    int instance;          /* index into the instance names given to registry_load */
    int64_t ttl_ms;        /* 0 = ttl=none (channels: always 0) */
    int64_t max_ttl_ms;    /* 0 = no max-ttl given (then the effective max is unbounded) */
    int sliding;           /* "sliding" flag word */
    int64_t near_cache_ms; /* 0 = no near cache */
    char *owner;
    char *purpose;       /* may be "" */
    int line;            /* line in the registry file */
    int enforce;         /* enum ns_enforce */
    int is_default;      /* the `default` line: prefix "" (takes every key and channel matching no prefix) */
    uint32_t index;      /* position: entries[index], the default line is `count`; counters are indexed by it */
    int depth;           /* "depth" flag word: the sampler sums its lists', streams' and zsets' lengths */
    int replicas;        /* replicas=N: its writes are acknowledged once N replicas have them (0: at once) */
    int64_t max_keys;    /* max-keys=N: past N keys a write that would create one is refused -OOM (0: no budget) */
    int64_t max_memory;  /* max-memory=SIZE: the same past SIZE bytes, as the sampler estimates them (0: none) */
    unsigned stats_slot; /* its per-namespace stats slot (stats_ns_slot, set at config load) */
    /* near-cache=D: the instance's invalidation stream and markers hash, keys of the keygate-owned
     * namespace K (owner=keygate) of the same instance: "<K>nc:{<K>}:stream" and "...:markers"
     * (one of each per instance; the hash tag keeps them in one slot). Also set on a line nested
     * inside a near-cache line of its instance (its writes announce their keys). NULL otherwise. */
    char *nc_stream, *nc_markers;
    size_t nc_stream_len, nc_markers_len;
};

/* replicas=N takes 1..this (Redis's WAIT counts replicas; more than this is a typo). */
#define REGISTRY_MAX_REPLICAS 16

/* The one instance name that may carry budgets (max-keys=, max-memory=): the topology guard
 * holds it to noeviction (topology.h); on an instance that evicts, LRU decides what stays. */
#define REGISTRY_BUDGET_INSTANCE "durable"

/* 1 when a line on instance `instance` (its name) may carry max-keys= and max-memory=. Pure. */
int registry_instance_budgets(const char *instance);

/* 1 when e has a budget (max-keys= or max-memory=). */
static inline int registry_has_budget(const struct namespace_entry *e)
{
    return e && (e->max_keys > 0 || e->max_memory > 0);
}

/* The owner= that marks a namespace as keygate's own (the near cache's streams live in it). */
#define REGISTRY_KEYGATE_OWNER "keygate"

struct registry {
    char *path;
    struct namespace_entry *entries; /* sorted by (kind, prefix) */
    size_t count;
    /* Lookup index, per kind: entries[first[k] .. first[k]+n[k]) are that kind's, and
     * lens[k] holds the distinct prefix lengths of that kind, longest first. */
    size_t first[2], n[2];
    size_t *lens[2];
    size_t nlens[2];
    /* entries of kind k whose prefix starts with byte b: [bucket_at[k][b], +bucket_n[k][b]) */
    uint32_t bucket_at[2][256], bucket_n[2][256];
    /* The `default` line (NULL when none): keys and channels matching no prefix. Its index is
     * `count`, so count + 1 indexes cover every entry. registry_lookup never returns it. */
    struct namespace_entry *dflt;
};

/*
 * Parse and validate the registry file at `path`. `instances` are the instance
 * names the config defines (e.g. "durable", "cache"). Every problem is added to
 * `errs` as "PATH:LINE: message"; parsing continues past errors so all are
 * reported. Errors: unknown kind word, missing prefix, unknown field, missing
 * instance=/owner=, missing ttl= on a namespace line, repeated field, unknown
 * instance, bad duration, max-ttl < ttl, sliding with ttl=none, duplicate prefix
 * (same kind), unterminated quote, ttl/max-ttl/sliding/near-cache on a channel line,
 * a file with no entries (reported at line 0), a second `default` line, near-cache= on the
 * default line, a bad enforce= value, near-cache= with sliding, near-cache= on an instance
 * without a keygate-owned namespace (owner=keygate; the message names the line to add) or
 * on an owner=keygate line, replicas= outside 1..REGISTRY_MAX_REPLICAS or on a channel line,
 * max-keys= that is not a positive number, max-memory= that is not a size (size_parse) above 0,
 * either on a channel line or on an instance other than REGISTRY_BUDGET_INSTANCE. max-ttl with ttl=none is allowed: it
 * caps the TTLs clients set themselves. Errors are reported in line order.
 * Returns the registry (caller frees with registry_free) when there were no
 * errors, else NULL.
 */
struct registry *registry_load(const char *path, const char *const *instances, size_t ninstances,
                               struct diag *errs) KG_MUST_CHECK;

void registry_free(struct registry *r);

/* The entry of `kind` with the longest prefix of key[0..len), or NULL.
 * One binary search per distinct prefix length: O(lengths * log n * prefix). */
const struct namespace_entry *registry_lookup(const struct registry *r, enum ns_kind kind, const char *key, size_t len);

/* registry_lookup, then the default line: the entry that takes the key (or channel), or NULL
 * when it matches no prefix and there is no default line. */
static inline const struct namespace_entry *registry_resolve(const struct registry *r, enum ns_kind kind,
                                                             const char *key, size_t len)
{
    const struct namespace_entry *e = registry_lookup(r, kind, key, len);
    return e ? e : r ? r->dflt : NULL;
}

/* Entry i of r, counting the default line as entry `count` (its index): NULL past it, or at
 * `count` without a default line. For loops over every entry, the default line last. */
static inline const struct namespace_entry *registry_entry(const struct registry *r, size_t i)
{
    return i < r->count ? &r->entries[i] : i == r->count ? r->dflt : NULL;
}

/* 1 when entry e is in report mode (enforce=report, or unset under `enforce report`). */
static inline int registry_reports(const struct namespace_entry *e)
{
    return e && e->enforce == ENFORCE_REPORT;
}

/* The enforce value a word names ("on", "report"; the registry's enforce= and keygate.conf's
 * enforce), ENFORCE_UNSET for any other word. */
enum ns_enforce registry_enforce_word(const char *word);

/* Give every line without enforce= the value of keygate.conf's `enforce` (ENFORCE_ON or
 * ENFORCE_REPORT). config_load calls it once, before the registry is shared. */
void registry_set_enforce(struct registry *r, enum ns_enforce global);

/* 1 when some line of r has a budget. */
int registry_any_budget(const struct registry *r);

/* The fields a registry line may carry, as registry_load parses them: the name of the i-th
 * ("instance", "ttl", "replicas", ...; NULL past the last), and whether it is a flag word
 * (sliding, depth) rather than name=value. With the kinds namespace, channel and default,
 * everything a registry line can say: the tests hold the registry's header to it. */
const char *registry_field_name(size_t i);
int registry_field_is_flag(size_t i);

/* Print the registry as the seed's table, in file order: Namespace | Purpose | Instance |
 * TTL | Max TTL | Owner; aligned plain text, or a Markdown table when markdown != 0.
 * TTL reads "90s", "30m sliding", "none" (+ ", near-cache 60s", ", replicas=1"); channels "(pub/sub)".
 * A budget adds a Budget column ("max-keys=500, max-memory=64mb"; "-" on lines without one),
 * only when some line has a budget (registries without budgets print as before).
 * The default line is the last row, named "(default)"; report-mode lines say ", enforce=report"
 * in the TTL column. */
void registry_print(const struct registry *r, const char *const *instances, int markdown, FILE *out);

#endif
