/* budget.c: per-namespace budgets: the usage estimates every thread shares, and the pure decisions on them. */
#include "budget.h"

#include <stdio.h>
#include <string.h>

#include "stats.h"

/* Per stats slot; relaxed atomics (a reader may see a pass's count with the previous bytes per key). */
static uint64_t measured_keys[STATS_NS_MAX]; /* the last pass's count */
static uint64_t added_keys[STATS_NS_MAX];    /* keys of writes forwarded since the count began */
static uint64_t per_key_bytes[STATS_NS_MAX]; /* the last sampled mean MEMORY USAGE */
static unsigned char measured[STATS_NS_MAX];

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

void budget_usage(unsigned slot, struct budget_usage *u)
{
    if (slot >= STATS_NS_MAX) slot = STATS_NS_OVERFLOW;
    u->keys = LOAD(&measured_keys[slot]) + LOAD(&added_keys[slot]);
    u->bytes_per_key = LOAD(&per_key_bytes[slot]);
    u->bytes = u->keys * u->bytes_per_key;
    u->measured = LOAD(&measured[slot]);
}

void budget_add(unsigned slot, uint64_t n)
{
    if (slot >= STATS_NS_MAX) slot = STATS_NS_OVERFLOW;
    __atomic_fetch_add(&added_keys[slot], n, __ATOMIC_RELAXED);
}

uint64_t budget_pass_begin(unsigned slot)
{
    if (slot >= STATS_NS_MAX) slot = STATS_NS_OVERFLOW;
    return LOAD(&added_keys[slot]);
}

void budget_publish(unsigned slot, uint64_t mark, uint64_t keys, uint64_t bytes_sum, uint64_t nsampled)
{
    if (slot >= STATS_NS_MAX) slot = STATS_NS_OVERFLOW;
    /* what was added before the pass began is in its count now; what came during it may be or
     * not (SCAN is no snapshot): it stays, so the estimate errs high */
    uint64_t cur = LOAD(&added_keys[slot]);
    do {
        if (cur < mark) mark = cur; /* only budget_reset lowers it */
    } while (!__atomic_compare_exchange_n(&added_keys[slot], &cur, cur - mark, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    STORE(&measured_keys[slot], keys);
    if (nsampled > 0) STORE(&per_key_bytes[slot], (bytes_sum + nsampled / 2) / nsampled);
    STORE(&measured[slot], 1);
}

void budget_reset(void)
{
    for (unsigned i = 0; i < STATS_NS_MAX; i++) {
        STORE(&measured_keys[i], 0);
        STORE(&added_keys[i], 0);
        STORE(&per_key_bytes[i], 0);
        STORE(&measured[i], 0);
    }
}

int budget_over(const struct namespace_entry *e, const struct budget_usage *u)
{
    if (!e) return 0;
    if (e->max_keys > 0 && u->keys >= (uint64_t)e->max_keys) return 1;
    return e->max_memory > 0 && u->bytes_per_key > 0 && u->bytes >= (uint64_t)e->max_memory;
}

/* Write commands whose keys are read-write but which never make a key that was not there
 * (Redis's key specs say RW UPDATE/INSERT for them as for SET): they pass over budget. */
static const char *const never_create[] = {
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "persist",
    "getex",
    "lset",
    "ltrim",
    "linsert",
    "lpushx",
    "rpushx",
    "xack",
    "xclaim",
    "xautoclaim",
    "xsetid",
    "xtrim",
    "xreadgroup",
    "xgroup|setid",
    "xgroup|destroy",
    "xgroup|createconsumer",
    "xgroup|delconsumer",
};

/* EVAL, EVALSHA, FCALL (not their _RO forms): a script may write any key it declares. */
static int budget_script(const struct command_def *cmd)
{
    return strcmp(cmd->name, "eval") == 0 || strcmp(cmd->name, "evalsha") == 0 || strcmp(cmd->name, "fcall") == 0;
}

int budget_may_create(const struct command_def *cmd, uint32_t flags)
{
    if (!cmd || (!(cmd->flags & CMD_WRITE) && !budget_script(cmd))) return 0;
    if (!(flags & (KS_RW | KS_OW)) || (flags & (KS_RO | KS_RM | KS_DELETE | KS_NOT_KEY))) return 0;
    for (size_t i = 0; i < sizeof never_create / sizeof never_create[0]; i++)
        if (strcmp(cmd->name, never_create[i]) == 0) return 0;
    return 1;
}

enum budget_action budget_action(const struct command_def *cmd, size_t argc, size_t ncheck)
{
    if (ncheck == 0) return BUDGET_PASS;
    if (!cmd || (cmd->flags & (CMD_BLOCKING | CMD_NOSCRIPT)) || ncheck > BUDGET_CHECK_KEYS_MAX ||
        argc > BUDGET_CHECK_ARGS_MAX)
        return BUDGET_REFUSE;
    /* a script cannot call EVAL or FCALL (scripts=yes users' scripts are refused over budget) */
    if (budget_script(cmd)) return BUDGET_REFUSE;
    return BUDGET_CHECK;
}

void budget_error(const struct namespace_entry *e, const struct budget_usage *u, char *buf, size_t len)
{
    char what[160];
    size_t n = 0;
    what[0] = '\0';
    if (e->max_keys > 0)
        n += (size_t)snprintf(what, sizeof what, "max-keys=%lld, about %llu keys", (long long)e->max_keys,
                              (unsigned long long)u->keys);
    if (e->max_memory > 0 && n < sizeof what)
        snprintf(what + n, sizeof what - n, "%smax-memory=%lld, about %llu bytes", n ? "; " : "",
                 (long long)e->max_memory, (unsigned long long)u->bytes);
    const char *prefix = e->is_default ? REGISTRY_DEFAULT_NAME : e->prefix;
    snprintf(buf, len, BUDGET_ERROR_PREFIX "%.*s' is over its budget (%s)", 200, prefix, what);
}

void budget_format_prometheus(const struct registry *r, struct bytebuf *out)
{
    if (!registry_any_budget(r)) return;
    static uint64_t max_keys[STATS_NS_MAX], max_bytes[STATS_NS_MAX], keys[STATS_NS_MAX], bytes[STATS_NS_MAX];
    static unsigned char has_keys[STATS_NS_MAX], has_bytes[STATS_NS_MAX], has_est[STATS_NS_MAX]; /* the admin's */
    memset(has_keys, 0, sizeof has_keys);
    memset(has_bytes, 0, sizeof has_bytes);
    memset(has_est, 0, sizeof has_est);
    for (size_t i = 0; i <= r->count; i++) {
        const struct namespace_entry *e = registry_entry(r, i);
        if (!registry_has_budget(e) || e->stats_slot >= STATS_NS_MAX) continue;
        struct budget_usage u;
        budget_usage(e->stats_slot, &u);
        has_est[e->stats_slot] = 1;
        keys[e->stats_slot] = u.keys;
        if (e->max_keys > 0) {
            has_keys[e->stats_slot] = 1;
            max_keys[e->stats_slot] = (uint64_t)e->max_keys;
        }
        if (e->max_memory > 0) {
            has_bytes[e->stats_slot] = 1;
            max_bytes[e->stats_slot] = (uint64_t)e->max_memory;
            bytes[e->stats_slot] = u.bytes;
        }
    }
    stats_format_ns_gauge("keygate_namespace_budget_keys", "the namespace's max-keys= budget", max_keys, has_keys, out);
    stats_format_ns_gauge("keygate_namespace_estimated_keys",
                          "keys of a budgeted namespace as keygate estimates them (last pass + writes since)", keys,
                          has_est, out);
    stats_format_ns_gauge("keygate_namespace_budget_bytes", "the namespace's max-memory= budget in bytes", max_bytes,
                          has_bytes, out);
    stats_format_ns_gauge("keygate_namespace_memory_bytes",
                          "bytes of a max-memory namespace as keygate estimates them (keys x sampled MEMORY USAGE)",
                          bytes, has_bytes, out);
}
