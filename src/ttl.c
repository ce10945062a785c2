/* ttl.c: the TTL engine's pure decision: mandatory TTLs, max-ttl, PERSIST, sliding windows. */
#include "ttl.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmdclass.h"
#include "session.h"
#include "util.h"

static void deny(struct ttl_decision *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void deny(struct ttl_decision *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    d->refused = 1;
    vsnprintf(d->error, sizeof(d->error), fmt, ap);
    va_end(ap);
}

/* Multiply with saturation, so absurd client values compare as "too big", not wrap. */
static int64_t mul_sat(long long v, int64_t scale)
{
    if (scale == 1) return v;
    if (v > INT64_MAX / scale) return INT64_MAX;
    if (v < INT64_MIN / scale) return INT64_MIN;
    return v * scale;
}

/* a - b with saturation (an absolute time at INT64_MIN minus now must not wrap). */
static int64_t sub_sat(int64_t a, int64_t b)
{
    if (b > 0 && a < INT64_MIN + b) return INT64_MIN;
    if (b < 0 && a > INT64_MAX + b) return INT64_MAX;
    return a - b;
}

/* SET/GETEX option flags, as parseExtendedStringArgumentsOrReply (t_string.c) keeps them. */
enum string_opt {
    OPT_NX = 1 << 0,
    OPT_XX = 1 << 1,
    OPT_GET = 1 << 2,
    OPT_KEEPTTL = 1 << 3,
    OPT_PERSIST = 1 << 4,
    OPT_EX = 1 << 5,
    OPT_PX = 1 << 6,
    OPT_EXAT = 1 << 7,
    OPT_PXAT = 1 << 8,
};

/*
 * SET k v [opts] / GETEX k [opts], walked exactly like Redis 7.0's
 * parseExtendedStringArgumentsOrReply: an option may repeat (EX 10 EX 20: the last
 * value wins) but never meets a conflicting one (EX with PX, KEEPTTL with EX, NX with
 * XX), and anything else is a syntax error. Returns the flags, or -1 where Redis answers
 * a syntax error; *expire_arg is the argv index of the last EX/PX/EXAT/PXAT value (0: none).
 */
static int string_options(const struct policy_request *r, int is_set, size_t *expire_arg)
{
    const int any_ttl = OPT_EX | OPT_PX | OPT_EXAT | OPT_PXAT;
    static const struct {
        const char *word;
        int flag, set_only, get_only, excludes;
    } opts[] = {
        {"NX", OPT_NX, 1, 0, OPT_XX},
        {"XX", OPT_XX, 1, 0, OPT_NX},
        {"GET", OPT_GET, 1, 0, 0},
        {"KEEPTTL", OPT_KEEPTTL, 1, 0, OPT_PERSIST | OPT_EX | OPT_PX | OPT_EXAT | OPT_PXAT},
        {"PERSIST", OPT_PERSIST, 0, 1, OPT_KEEPTTL | OPT_EX | OPT_PX | OPT_EXAT | OPT_PXAT},
        {"EX", OPT_EX, 0, 0, OPT_KEEPTTL | OPT_PERSIST | OPT_PX | OPT_EXAT | OPT_PXAT},
        {"PX", OPT_PX, 0, 0, OPT_KEEPTTL | OPT_PERSIST | OPT_EX | OPT_EXAT | OPT_PXAT},
        {"EXAT", OPT_EXAT, 0, 0, OPT_KEEPTTL | OPT_PERSIST | OPT_EX | OPT_PX | OPT_PXAT},
        {"PXAT", OPT_PXAT, 0, 0, OPT_KEEPTTL | OPT_PERSIST | OPT_EX | OPT_PX | OPT_EXAT},
    };
    int flags = 0;
    *expire_arg = 0;
    for (size_t j = is_set ? 3 : 2; j < r->argc; j++) {
        int has_next = j + 1 < r->argc, matched = 0;
        for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]) && !matched; k++) {
            if (!session_arg_is(r, j, opts[k].word) || (flags & opts[k].excludes)) continue;
            if ((opts[k].set_only && !is_set) || (opts[k].get_only && is_set)) continue;
            if ((opts[k].flag & any_ttl) && !has_next) continue;
            flags |= opts[k].flag;
            if (opts[k].flag & any_ttl) *expire_arg = ++j;
            matched = 1;
        }
        if (!matched) return -1;
    }
    return flags;
}

/*
 * 1 when Redis refuses this TTL value with "invalid expire time" (and changes nothing):
 *   EXPIRE family (expireGenericCommand): seconds outside LLONG_MIN/1000..LLONG_MAX/1000,
 *     or the absolute time past LLONG_MAX (relative forms add now);
 *   SET/GETEX/SETEX/PSETEX (getExpireMillisecondsOrReply): a value <= 0, seconds past
 *     LLONG_MAX/1000, or a relative time that overflows when now is added.
 */
static int redis_refuses_expire(enum cmd_id cid, long long v, int64_t scale, int absolute, int64_t now_ms)
{
    int expire_family = cid == CID_EXPIRE || cid == CID_PEXPIRE || cid == CID_EXPIREAT || cid == CID_PEXPIREAT;
    if (expire_family) {
        if (scale == 1000 && (v > LLONG_MAX / 1000 || v < LLONG_MIN / 1000)) return 1;
        long long when = v * scale, base = absolute ? 0 : now_ms;
        return when > LLONG_MAX - base;
    }
    if (v <= 0 || (scale == 1000 && v > LLONG_MAX / 1000)) return 1;
    return !absolute && v * scale > LLONG_MAX - now_ms;
}

void ttl_client_ttl(const struct policy_request *r, int64_t now_ms, struct client_ttl *out)
{
    enum cmd_id cid = cmdclass_id(r->cmd);
    long long v;
    int64_t scale = 0, absolute = 0;
    size_t arg = 2;
    out->kind = CLIENT_TTL_NONE;
    out->ttl_ms = 0;
    if (cid == CID_EXPIRE || cid == CID_SETEX)
        scale = 1000;
    else if (cid == CID_PEXPIRE || cid == CID_PSETEX)
        scale = 1;
    else if (cid == CID_EXPIREAT)
        scale = 1000, absolute = 1;
    else if (cid == CID_PEXPIREAT)
        scale = 1, absolute = 1;
    else if (cid == CID_SET || cid == CID_GETEX) {
        int flags = string_options(r, cid == CID_SET, &arg);
        if (flags < 0) {
            out->kind = CLIENT_TTL_INVALID;
            return;
        }
        if (flags & OPT_KEEPTTL) out->kind = CLIENT_TTL_KEEP;
        if (flags & OPT_PERSIST) out->kind = CLIENT_TTL_PERSIST;
        if (flags & (OPT_EX | OPT_EXAT)) scale = 1000;
        if (flags & (OPT_PX | OPT_PXAT)) scale = 1;
        absolute = (flags & (OPT_EXAT | OPT_PXAT)) != 0;
        if (!scale) return;
    } else {
        return;
    }
    if (session_arg_ll(r, arg, &v) != 0 || redis_refuses_expire(cid, v, scale, absolute, now_ms)) {
        out->kind = CLIENT_TTL_INVALID; /* Redis answers its own error and changes nothing */
        return;
    }
    out->kind = CLIENT_TTL_SET;
    out->ttl_ms = absolute ? sub_sat(mul_sat(v, scale), now_ms) : mul_sat(v, scale);
}

/* The client's own command sets (or removes) the first key's TTL: no fix for it. An EXPIRE
 * that Redis refuses (not an integer) changes nothing, so it needs none either. */
static int sets_own_ttl(const struct policy_request *r, const struct client_ttl *ct)
{
    enum cmd_id cid = cmdclass_id(r->cmd);
    if (ct->kind == CLIENT_TTL_SET) return 1;
    return cid == CID_EXPIRE || cid == CID_PEXPIRE || cid == CID_EXPIREAT || cid == CID_PEXPIREAT;
}

static int is_script(enum cmd_id cid)
{
    return cid == CID_EVAL || cid == CID_EVALSHA || cid == CID_FCALL;
}

/* Scripts and functions write the keys they declare, although Redis flags them no `write`. */
static int writes_keys(const struct command_def *cmd)
{
    enum cmd_id cid = cmdclass_id(cmd);
    return (cmd->flags & CMD_WRITE) || is_script(cid);
}

/* Commands whose destination (argv[2]) takes over the source key's TTL. */
static int carries_ttl(enum cmd_id cid)
{
    return cid == CID_RENAME || cid == CID_RENAMENX || cid == CID_COPY;
}

/* One more fix; cap_hint (at least every fix the command can get) sizes the heap copy. */
static void ttl_add_fix(struct ttl_rewrite *t, size_t cap_hint, uint32_t argi, uint32_t mode, int64_t ttl_ms)
{
    if (t->nfix == TTL_FIX_INLINE && t->fix == t->fix_inline) {
        struct ttl_fix *heap = xmalloc(cap_hint * sizeof(*heap));
        memcpy(heap, t->fix_inline, sizeof(t->fix_inline));
        t->fix = heap;
    }
    if (!t->fix) t->fix = t->fix_inline;
    assert(t->nfix < (t->fix == t->fix_inline ? TTL_FIX_INLINE : cap_hint));
    t->fix[t->nfix++] = (struct ttl_fix){.argi = argi, .mode = mode, .ttl_ms = ttl_ms};
}

/* Append "EX D" (whole seconds, unless ms_only) or "PX D" to the client's command. */
static void ttl_append(struct ttl_decision *d, int64_t ttl_ms, int ms_only)
{
    int seconds = !ms_only && ttl_ms % 1000 == 0;
    d->append[0] = seconds ? "EX" : "PX";
    d->append_len[0] = 2;
    d->append_len[1] = format_ll(d->append_store, (long long)(seconds ? ttl_ms / 1000 : ttl_ms));
    d->append[1] = d->append_store;
    d->nappend = 2;
}

void ttl_decide(const struct policy_request *r, const struct key_ref *keys, const struct namespace_entry *const *ns,
                int nkeys, int blocks, int may_wrap, struct ttl_decision *d)
{
    /* every field but the text buffers: a decision lives on its caller's stack, uncleared */
    d->refused = 0;
    d->rewrite.wrap = 0;
    d->rewrite.getex = 0;
    d->rewrite.nfix = 0;
    d->rewrite.fix = NULL;
    d->nappend = 0;

    enum cmd_id cid = cmdclass_id(r->cmd);
    const struct namespace_entry *first = ns[0];
    struct client_ttl ct;
    ttl_client_ttl(r, r->now_ms, &ct);
    int writes = writes_keys(r->cmd);

    int persist = cid == CID_PERSIST || ct.kind == CLIENT_TTL_PERSIST;
    if (persist && first->ttl_ms > 0) {
        d->refusal = TTL_REFUSED_PERSIST;
        deny(d, "DENIED PERSIST is refused in namespace '%s': its keys must keep a TTL", first->prefix);
        return;
    }
    if (ct.kind == CLIENT_TTL_SET && first->max_ttl_ms > 0 && ct.ttl_ms > first->max_ttl_ms) {
        char lim[32];
        duration_format(first->max_ttl_ms, lim, sizeof(lim));
        d->refusal = TTL_REFUSED_MAXTTL;
        deny(d, "DENIED TTL of %lldms is above max-ttl %s of namespace '%s'", (long long)ct.ttl_ms, lim, first->prefix);
        return;
    }

    /* SET without a TTL option: the TTL travels in the command itself. */
    int is_set = cid == CID_SET;
    if (is_set && first->ttl_ms > 0 && ct.kind == CLIENT_TTL_NONE) {
        ttl_append(d, first->ttl_ms, 0); /* SET k v [NX|XX] [GET] -> ... EX D */
        return;
    }
    /* GET in a sliding namespace: GETEX reads and restarts the window in one command. */
    if (cid == CID_GET && first->sliding && first->ttl_ms > 0) {
        d->rewrite.getex = 1;
        ttl_append(d, first->ttl_ms, 1);
        return;
    }

    struct ttl_rewrite *t = &d->rewrite;
    int own = sets_own_ttl(r, &ct);
    for (int i = 0; i < nkeys; i++) {
        const struct namespace_entry *e = ns[i];
        if (own && keys[i].index == 1) continue; /* the client's TTL for its own key */
        if (keys[i].flags & KS_RM) continue;     /* DEL/UNLINK: nothing left to expire */
        /* Every key of a write command counts as written: Redis 7.0 flags some written keys
         * read-only (XREADGROUP's stream), and a PEXPIRE NX on a key that has its TTL is a
         * no-op; so is a second one for a key named twice (RENAME k k). */
        uint32_t mode = UINT32_MAX; /* no fix: ttl=none, or a read outside a sliding namespace */
        if (e->ttl_ms > 0 && e->sliding)
            mode = TTL_FIX_RESET; /* every touch restarts the window */
        else if (e->ttl_ms > 0 && writes)
            mode = TTL_FIX_NX; /* a write never extends an existing TTL */
        if (mode != UINT32_MAX) ttl_add_fix(t, 2 * (size_t)nkeys, (uint32_t)keys[i].index, mode, e->ttl_ms);
        /* RENAME/COPY move the source's TTL along, and a script may set any TTL itself: cut
         * it to the key's max-ttl, also in a ttl=none namespace (XX: a key without TTL keeps none) */
        if (((carries_ttl(cid) && keys[i].index == 2) || is_script(cid)) && e->max_ttl_ms > 0)
            ttl_add_fix(t, 2 * (size_t)nkeys, (uint32_t)keys[i].index, TTL_FIX_CAP, e->max_ttl_ms);
    }
    /* A write and its TTL are applied atomically; a read's window reset needs no transaction.
     * Redis never blocks inside MULTI: a blocking command's fixes follow it on its pin. */
    t->wrap = t->nfix > 0 && writes && may_wrap && !blocks;
}

void ttl_rewrite_release(struct ttl_rewrite *t)
{
    if (t->fix && t->fix != t->fix_inline) free(t->fix);
    t->fix = NULL;
    t->nfix = 0;
}

void ttl_decision_release(struct ttl_decision *d)
{
    ttl_rewrite_release(&d->rewrite);
}
