/* ncpolicy.h: the near cache's pure rules: which keys a command invalidates, which cached reads exist. */
#ifndef KEYGATE_NCPOLICY_H
#define KEYGATE_NCPOLICY_H

#include <stddef.h>
#include <stdint.h>

#include "commands.h"
#include "registry.h"
#include "session.h"

/*
 * A write to a key of a near-cache namespace carries its invalidation in the write's plan:
 *
 *   SET users:1 v   ->  MULTI / SET users:1 v [EX D] / XADD <ns stream> * k users:1 / EXEC
 *
 * one XADD per written key (RENAME: source and destination; COPY, *STORE: the destination;
 * DEL/UNLINK/EXPIRE; the declared keys of EVAL/EVALSHA/FCALL), each in its namespace's stream
 * (namespace_entry.nc_stream), after the write it announces and in its transaction.
 */
struct nc_inval_key {
    uint32_t argi;                    /* argv index of the written key */
    const struct namespace_entry *ns; /* its namespace (near_cache_ms > 0, nc_stream set) */
};

#define NC_INVAL_INLINE 4

struct nc_inval {
    uint32_t n;
    struct nc_inval_key *key; /* key_inline, or heap past NC_INVAL_INLINE (ncpolicy_inval_release) */
    struct nc_inval_key key_inline[NC_INVAL_INLINE];
};

/* 1 when the command writes its keys: Redis's `write` flag, or a script/function (EVAL, EVALSHA,
 * FCALL write the keys they declare although Redis flags them no `write`). */
int ncpolicy_writes(const struct command_def *cmd);

/*
 * The invalidations of one command whose keys were found (keys[i] in namespace ns[i]): every
 * key of a command that writes (ncpolicy_writes) whose namespace has near-cache=D, in key
 * order (a key named twice is invalidated twice: harmless). *out is fully set (nothing to clear
 * first). Pure (an allocation failure aborts, util.h's rule).
 */
void ncpolicy_invalidations(const struct policy_request *r, const struct key_ref *keys,
                            const struct namespace_entry *const *ns, int nkeys, struct nc_inval *out);

/* Move *src into *dst (which holds nothing to free); *src is left empty. */
void ncpolicy_inval_move(struct nc_inval *dst, struct nc_inval *src);

/* Free what ncpolicy_invalidations allocated (safe on a zeroed or released value). */
void ncpolicy_inval_release(struct nc_inval *v);

#endif
