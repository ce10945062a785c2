/* ttl.h: the TTL engine's pure decision: which TTL each written key must end with, and how. */
#ifndef KEYGATE_TTL_H
#define KEYGATE_TTL_H

#include <stddef.h>
#include <stdint.h>

#include "commands.h"
#include "registry.h"

struct plan;
struct policy_request;

enum ttl_fix_mode {
    TTL_FIX_NX = 0,    /* PEXPIRE key D NX: give a TTL only to a key that has none */
    TTL_FIX_RESET = 1, /* PEXPIRE key D: sliding namespaces restart the window */
    TTL_FIX_CAP = 2,   /* PEXPIRE key MAX LT: a TTL carried from another key is cut to max-ttl */
};

/* One injected PEXPIRE after the client's command. */
struct ttl_fix {
    uint32_t argi;  /* argv index of the key */
    uint32_t mode;  /* enum ttl_fix_mode */
    int64_t ttl_ms;
};

#define TTL_FIX_INLINE 8

/*
 * How the client's command is rewritten for TTLs (part of a FORWARD plan):
 *
 *   SET k v              -> SET k v EX D                  (append; one command)
 *   HSET k f v           -> MULTI / HSET k f v / PEXPIRE k D NX / EXEC   (wrap)
 *   GET k   (sliding)    -> GETEX k PX D                  (getex; one command)
 *   LRANGE k 0 -1 (sliding) -> LRANGE k 0 -1 / PEXPIRE k D  (no wrap: a read)
 *
 * With `wrap`, the client's reply is element 0 of the EXEC array (or the
 * queue-time error of its command); the injected replies are swallowed.
 */
struct ttl_rewrite {
    int wrap;            /* MULTI <command> <fixes> EXEC */
    int getex;           /* send GETEX k PX D instead of GET k */
    size_t nfix;
    struct ttl_fix *fix; /* fix_inline, or heap when more than TTL_FIX_INLINE (ttl_rewrite_release) */
    struct ttl_fix fix_inline[TTL_FIX_INLINE];
};

/*
 * The TTL a command asks for itself, for max-ttl checks: returns 1 and sets *ttl_ms
 * (relative; now_ms turns EXPIREAT-style absolutes into relative), 0 when the command
 * sets none, -1 when its TTL argument is not an integer (Redis answers that error).
 * *option_given is set when SET/GETEX carries EX/PX/EXAT/PXAT/KEEPTTL/PERSIST.
 */
int ttl_client_ttl(const struct policy_request *r, int64_t now_ms, int64_t *ttl_ms, int *option_given);

/*
 * Decide the TTL rules for a command whose keys were found (keys[i], with ns[i] its
 * namespace, all on one instance); plan->flow must already be set (a FLOW_BLOCK command
 * is never wrapped in MULTI, which would keep it from blocking). Fills plan->ttl and plan->append, or sets
 * plan->kind = PLAN_ERROR with a DENIED message (PERSIST in a TTL namespace, a client
 * TTL above max-ttl). Returns 0, or -1 when out of memory. Pure.
 */
int ttl_decide(const struct policy_request *r, const struct key_ref *keys,
               const struct namespace_entry *const *ns, int nkeys, struct plan *plan);

/* Free what ttl_decide allocated (safe on a zeroed or already released rewrite). */
void ttl_rewrite_release(struct ttl_rewrite *t);

#endif
