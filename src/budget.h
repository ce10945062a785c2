/* budget.h: per-namespace budgets (max-keys=, max-memory=): the shared usage estimates and the pure decisions. */
#ifndef KEYGATE_BUDGET_H
#define KEYGATE_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "commands.h"
#include "registry.h"
#include "util.h"

/*
 * A namespace's usage, as keygate estimates it (docs/operations.md "Budgets"):
 *
 *   keys  = the sampler's last count of the namespace's keys (SCAN of the whole instance)
 *         + every key a write that may create one named since that count began
 *           (counted when forwarded: updates and failed writes count too, so between
 *           passes the estimate only overstates what keygate's own writes added)
 *   bytes = keys x the mean MEMORY USAGE of up to BUDGET_MEMORY_SAMPLES of its keys
 *           (the first the pass's SCAN met: SCAN's order follows key hashes)
 *
 * Over budget (keys >= max-keys, or bytes >= max-memory): a write that may create a key of the
 * namespace is sent as BUDGET_SCRIPT, which runs it only when every such key exists, and
 * answers -OOM namespace 'P' is over its budget (...) otherwise. Under budget: nothing changes.
 *
 * Shared by every worker and the sampler thread: relaxed atomics indexed by the namespace's
 * stats slot (namespace_entry.stats_slot; kept over reloads).
 */

/* namespace-scan-interval when budgets exist and the directive is 0 (or absent): budgets need counts. */
#define BUDGET_SCAN_INTERVAL_MS 10000
/* MEMORY USAGE calls per max-memory namespace per pass */
#define BUDGET_MEMORY_SAMPLES 32
/* Keys of an over-budget namespace one checked write may name (more: refused -OOM). */
#define BUDGET_CHECK_KEYS_MAX 64
/* Arguments a checked write may have: Lua's unpack takes some 8,000 (more: refused -OOM). */
#define BUDGET_CHECK_ARGS_MAX 7900

/*
 * The check, run by Redis: KEYS are the keys the write may create, ARGV[1] the -OOM text,
 * ARGV[2..] the client's command. Every key exists: the command runs (redis.pcall: its own
 * error replies come back unchanged, as without the script), else the -OOM error and nothing
 * ran. The RESP3 form asks for RESP3 replies, so a RESP3 client gets doubles and maps as
 * without the script.
 */
#define BUDGET_SCRIPT_BODY                                                                                             \
    "for i = 1, #KEYS do if redis.call('EXISTS', KEYS[i]) == 0 then return redis.error_reply(ARGV[1]) end end "        \
    "return redis.pcall(unpack(ARGV, 2))"
#define BUDGET_SCRIPT BUDGET_SCRIPT_BODY
#define BUDGET_SCRIPT_RESP3 "redis.setresp(3) " BUDGET_SCRIPT_BODY

/* The error's first words: clients and tests match on them. */
#define BUDGET_ERROR_PREFIX "OOM namespace '"

/* One namespace's estimate (budget_usage). */
struct budget_usage {
    uint64_t keys;          /* estimated keys */
    uint64_t bytes;         /* estimated bytes (0 until a pass sampled its keys) */
    uint64_t bytes_per_key; /* the last pass's mean MEMORY USAGE (0: none sampled) */
    int measured;           /* a pass has counted it */
};

/* ---- the shared estimates (any thread) ---- */

/* The estimate of the namespace in stats slot `slot`. */
void budget_usage(unsigned slot, struct budget_usage *u);

/* A write that may create n keys of the namespace in `slot` was forwarded. */
void budget_add(unsigned slot, uint64_t n);

/* The sampler: a pass over the namespace's instance begins; the returned mark goes to
 * budget_publish (keys added from now on stay in the estimate after that pass). */
uint64_t budget_pass_begin(unsigned slot);

/* The sampler: its pass counted `keys` keys of the namespace; bytes_sum over nsampled keys'
 * MEMORY USAGE (nsampled 0: bytes per key unknown, the last value stays). */
void budget_publish(unsigned slot, uint64_t mark, uint64_t keys, uint64_t bytes_sum, uint64_t nsampled);

/* Forget every estimate (tests). */
void budget_reset(void);

/* ---- pure decisions ---- */

/* 1 when usage u is at or past e's budget. */
int budget_over(const struct namespace_entry *e, const struct budget_usage *u);

/* 1 when the write cmd may create the key a key spec with `flags` names: a write-flagged
 * command (or EVAL, EVALSHA, FCALL), a key that is read-write or overwritten (not read-only, not removed), and not one
 * of the commands that only change an existing key (EXPIRE, PERSIST, LSET, LPUSHX, XACK, ...). */
int budget_may_create(const struct command_def *cmd, uint32_t flags);

/* What to do with a write that may create keys of an over-budget namespace. */
enum budget_action {
    BUDGET_PASS = 0, /* nothing to check */
    BUDGET_CHECK,    /* send it as BUDGET_SCRIPT */
    BUDGET_REFUSE,   /* answer -OOM at once: a script cannot run it (EVAL, FCALL, blocking, noscript),
                        or it names too many keys or arguments */
};

/* The action for cmd with argc arguments naming ncheck keys of over-budget namespaces (0: PASS). */
enum budget_action budget_action(const struct command_def *cmd, size_t argc, size_t ncheck);

/* "OOM namespace 'P' is over its budget (max-keys=N, about M keys)" (and/or max-memory) into
 * buf (no '-', no CRLF). */
void budget_error(const struct namespace_entry *e, const struct budget_usage *u, char *buf, size_t len);

/* The series keygate_namespace_budget_keys, keygate_namespace_budget_bytes,
 * keygate_namespace_estimated_keys and keygate_namespace_memory_bytes for r's budgeted lines. */
void budget_format_prometheus(const struct registry *r, struct bytebuf *out);

#endif
