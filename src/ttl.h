/* ttl.h: the TTL engine's pure decision: which TTL each written key must end with, and how. */
#ifndef KEYGATE_TTL_H
#define KEYGATE_TTL_H

#include <stddef.h>
#include <stdint.h>

#include "commands.h"
#include "registry.h"
#include "session.h"

enum ttl_fix_mode {
    TTL_FIX_NX = 0,    /* PEXPIRE key D NX: give a TTL only to a key that has none */
    TTL_FIX_RESET = 1, /* PEXPIRE key D: sliding namespaces restart the window */
    TTL_FIX_CAP = 2,   /* PEXPIRE key MAX XX LT: a TTL carried from another key (or set by a script)
                          is cut to max-ttl; a key without a TTL keeps none */
};

/* One injected PEXPIRE after the client's command. */
struct ttl_fix {
    uint32_t argi; /* argv index of the key */
    uint32_t mode; /* enum ttl_fix_mode */
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
    int wrap;  /* MULTI <command> <fixes> EXEC */
    int getex; /* send GETEX k PX D instead of GET k */
    size_t nfix;
    struct ttl_fix *fix; /* fix_inline, or heap when more than TTL_FIX_INLINE (ttl_rewrite_release) */
    struct ttl_fix fix_inline[TTL_FIX_INLINE];
};

#define TTL_MAX_APPEND 2    /* "EX" D or "PX" D */
#define TTL_APPEND_STORE 24 /* the digits of D: a long long with its sign and NUL */

/* Why ttl_decide refused a command (report mode counts them apart). */
enum ttl_refusal {
    TTL_REFUSED_MAXTTL = 0, /* a client TTL above max-ttl */
    TTL_REFUSED_PERSIST,    /* PERSIST (or GETEX PERSIST) in a namespace with a TTL */
};

/*
 * ttl_decide's result: either a refusal, or the rewrite plus the arguments appended to the
 * client's command. The caller owns it (ttl_decision_release, or ttl_rewrite_move of
 * `rewrite` into the plan that carries it out). append[i] points at a static word or into
 * append_store: a copy of the decision must point those into its own store.
 */
struct ttl_decision {
    int refused;                /* 1: refuse the command with `error`; nothing else is set but refusal */
    enum ttl_refusal refusal;   /* refused: why */
    struct ttl_rewrite rewrite; /* the injected TTL commands (wrap, getex, fixes) */
    size_t nappend;             /* arguments to add at the end of the command */
    const char *append[TTL_MAX_APPEND];
    size_t append_len[TTL_MAX_APPEND];
    char append_store[TTL_APPEND_STORE]; /* storage the append pointers may point into */
    char error[ERROR_TEXT_MAX];          /* refused: "DENIED ..." (no '-', no CRLF) */
};

/* What a command asks for its own key's TTL (for max-ttl, PERSIST and "SET gets EX D"). */
enum client_ttl_kind {
    CLIENT_TTL_NONE = 0, /* no TTL option: SET k v, GETEX k, and every other command */
    CLIENT_TTL_SET,      /* EXPIRE-family, SETEX/PSETEX, SET/GETEX EX|PX|EXAT|PXAT: ttl_ms */
    CLIENT_TTL_KEEP,     /* SET ... KEEPTTL */
    CLIENT_TTL_PERSIST,  /* GETEX ... PERSIST */
    CLIENT_TTL_INVALID,  /* Redis refuses the arguments when it runs the command (a syntax error,
                            a TTL that is not an integer): nothing is written */
};

struct client_ttl {
    enum client_ttl_kind kind;
    int64_t ttl_ms; /* CLIENT_TTL_SET: relative to now_ms (saturated; <= 0 deletes or is refused) */
};

/*
 * The TTL a command asks for itself, read the way Redis 7.0 reads it: SET/GETEX options
 * walked as parseExtendedStringArgumentsOrReply does (a repeated EX/PX/EXAT/PXAT: the last
 * value wins; conflicting options: INVALID), integers as string2ll; EXPIREAT-style
 * absolutes become relative to now_ms. Fills *out.
 */
void ttl_client_ttl(const struct policy_request *r, int64_t now_ms, struct client_ttl *out);

/*
 * Decide the TTL rules for a command whose keys were found (keys[i], with ns[i] its
 * namespace, all on one instance) into *out (fully set: no need to clear it first).
 * `blocks` is 1 when the command runs as a blocking one (FLOW_BLOCK): it is never wrapped
 * in MULTI, which would keep it from blocking. `may_wrap` is 0 when keygate's own
 * MULTI/EXEC would change the client's state: a client holding a WATCH (EXEC clears its
 * watched keys, and a dirty watch would make keygate's EXEC fail): its fixes then follow
 * the command unwrapped on the same connection, in the same write. A refusal (PERSIST in a
 * TTL namespace, a client TTL above max-ttl) sets out->refused and a DENIED message.
 * Pure (an allocation failure aborts, util.h's rule).
 */
void ttl_decide(const struct policy_request *r, const struct key_ref *keys, const struct namespace_entry *const *ns,
                int nkeys, int blocks, int may_wrap, struct ttl_decision *out);

/*
 * Move the rewrite *src into *dst, which must hold nothing to free (zeroed or released):
 * inline fixes are copied into dst's own inline array, a heap array changes owner. *src is
 * left empty (nothing to release).
 */
static inline void ttl_rewrite_move(struct ttl_rewrite *dst, struct ttl_rewrite *src)
{
    dst->wrap = src->wrap;
    dst->getex = src->getex;
    dst->nfix = src->nfix;
    if (src->fix == src->fix_inline) {
        for (size_t i = 0; i < src->nfix; i++) dst->fix_inline[i] = src->fix_inline[i];
        dst->fix = dst->fix_inline;
    } else {
        dst->fix = src->fix; /* NULL (no fix) or the heap array, which dst now owns */
    }
    src->fix = NULL;
    src->nfix = 0;
}

/* Free what ttl_decide allocated (safe on a zeroed or already released rewrite). */
void ttl_rewrite_release(struct ttl_rewrite *t);

/* Free what a decision holds (its rewrite's heap fixes); safe to call twice. */
void ttl_decision_release(struct ttl_decision *d);

#endif
