/* ttl.c: the TTL engine's pure decision: mandatory TTLs, max-ttl, PERSIST, sliding windows. */
#include "ttl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmdclass.h"
#include "policy.h"

static void deny(struct plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void deny(struct plan *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    p->kind = PLAN_ERROR;
    vsnprintf(p->error, sizeof(p->error), fmt, ap);
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

int ttl_client_ttl(const struct policy_request *r, int64_t now_ms, int64_t *ttl_ms, int *option_given)
{
    enum cmd_id cid = cmdclass_id(r->cmd);
    long long v;
    *option_given = 0;
    int64_t scale = 0, absolute = 0;
    if (cid == CID_EXPIRE || cid == CID_SETEX) scale = 1000;
    else if (cid == CID_PEXPIRE || cid == CID_PSETEX) scale = 1;
    else if (cid == CID_EXPIREAT) scale = 1000, absolute = 1;
    else if (cid == CID_PEXPIREAT) scale = 1, absolute = 1;
    if (scale) {
        if (policy_arg_ll(r, 2, &v) != 0) return -1;
        *ttl_ms = mul_sat(v, scale) - (absolute ? now_ms : 0);
        return 1;
    }
    size_t first_opt;
    if (cid == CID_SET) first_opt = 3;
    else if (cid == CID_GETEX) first_opt = 2;
    else return 0;
    for (size_t i = first_opt; i < r->argc; i++) {
        if (policy_arg_is(r, i, "EX")) scale = 1000;
        else if (policy_arg_is(r, i, "PX")) scale = 1;
        else if (policy_arg_is(r, i, "EXAT")) scale = 1000, absolute = 1;
        else if (policy_arg_is(r, i, "PXAT")) scale = 1, absolute = 1;
        else if (policy_arg_is(r, i, "KEEPTTL") || policy_arg_is(r, i, "PERSIST")) *option_given = 1;
        if (scale) {
            *option_given = 1;
            if (policy_arg_ll(r, i + 1, &v) != 0) return -1;
            *ttl_ms = mul_sat(v, scale) - (absolute ? now_ms : 0);
            return 1;
        }
    }
    return 0;
}

/* The client's own command sets (or removes) the first key's TTL: no fix for it. */
static int sets_own_ttl(const struct policy_request *r, int has_ttl)
{
    enum cmd_id cid = cmdclass_id(r->cmd);
    if (has_ttl == 1) return 1;
    return cid == CID_EXPIRE || cid == CID_PEXPIRE || cid == CID_EXPIREAT ||
           cid == CID_PEXPIREAT;
}

/* Commands whose destination (argv[2]) takes over the source key's TTL. */
static int carries_ttl(enum cmd_id cid)
{
    return cid == CID_RENAME || cid == CID_RENAMENX || cid == CID_COPY;
}

static int ttl_add_fix(struct ttl_rewrite *t, size_t cap_hint, uint32_t argi, uint32_t mode, int64_t ttl_ms)
{
    if (t->nfix == TTL_FIX_INLINE && t->fix == t->fix_inline) {
        struct ttl_fix *heap = malloc(cap_hint * sizeof(*heap));
        if (!heap) return -1;
        memcpy(heap, t->fix_inline, sizeof(t->fix_inline));
        t->fix = heap;
    }
    if (!t->fix) t->fix = t->fix_inline;
    t->fix[t->nfix++] = (struct ttl_fix){.argi = argi, .mode = mode, .ttl_ms = ttl_ms};
    return 0;
}

/* Append "EX D" (whole seconds, unless ms_only) or "PX D" to the client's command. */
static void ttl_append(struct plan *p, int64_t ttl_ms, int ms_only)
{
    int seconds = !ms_only && ttl_ms % 1000 == 0;
    p->append[0] = seconds ? "EX" : "PX";
    p->append_len[0] = 2;
    p->append_len[1] = format_ll(p->append_store, (long long)(seconds ? ttl_ms / 1000 : ttl_ms));
    p->append[1] = p->append_store;
    p->nappend = 2;
}

int ttl_decide(const struct policy_request *r, const struct key_ref *keys,
               const struct namespace_entry *const *ns, int nkeys, struct plan *p)
{
    enum cmd_id cid = cmdclass_id(r->cmd);
    const struct namespace_entry *first = ns[0];
    int64_t ttl_ms = 0;
    int option_given = 0;
    int has_ttl = ttl_client_ttl(r, r->now_ms, &ttl_ms, &option_given);
    int writes = (r->cmd->flags & CMD_WRITE) != 0;

    int persist = cid == CID_PERSIST ||
                  (cid == CID_GETEX && option_given && has_ttl == 0 && policy_arg_is(r, r->argc - 1, "PERSIST"));
    if (persist && first->ttl_ms > 0) {
        deny(p, "DENIED PERSIST is refused in namespace '%s': its keys must keep a TTL", first->prefix);
        return 0;
    }
    if (has_ttl == 1 && first->max_ttl_ms > 0 && ttl_ms > first->max_ttl_ms) {
        char lim[32];
        duration_format(first->max_ttl_ms, lim, sizeof(lim));
        deny(p, "DENIED TTL of %lldms is above max-ttl %s of namespace '%s'", (long long)ttl_ms, lim, first->prefix);
        return 0;
    }

    /* SET without a TTL option: the TTL travels in the command itself. */
    int is_set = cid == CID_SET;
    if (is_set && first->ttl_ms > 0 && !option_given && has_ttl == 0) {
        ttl_append(p, first->ttl_ms, 0); /* SET k v [NX|XX] [GET] -> ... EX D */
        return 0;
    }
    /* GET in a sliding namespace: GETEX reads and restarts the window in one command. */
    if (cid == CID_GET && first->sliding && first->ttl_ms > 0) {
        p->ttl.getex = 1;
        ttl_append(p, first->ttl_ms, 1);
        return 0;
    }

    int own = sets_own_ttl(r, has_ttl);
    for (int i = 0; i < nkeys; i++) {
        const struct namespace_entry *e = ns[i];
        if (e->ttl_ms <= 0) continue;
        if (own && keys[i].index == 1) continue;   /* the client's TTL for its own key */
        if (keys[i].flags & KS_RM) continue;       /* DEL/UNLINK: nothing left to expire */
        /* Every key of a write command counts as written: Redis 7.0 flags some written keys
         * read-only (XREADGROUP's stream), and a PEXPIRE NX on a key that has its TTL is a
         * no-op; so is a second one for a key named twice (RENAME k k). */
        uint32_t mode;
        if (e->sliding) mode = TTL_FIX_RESET;      /* every touch restarts the window */
        else if (writes) mode = TTL_FIX_NX;        /* a write never extends an existing TTL */
        else continue;
        if (ttl_add_fix(&p->ttl, 2 * (size_t)nkeys, (uint32_t)keys[i].index, mode, e->ttl_ms) != 0) return -1;
        /* RENAME/COPY move the source's TTL along: cut it to the destination's max-ttl */
        if (carries_ttl(cid) && e->max_ttl_ms > 0 && keys[i].index == 2 &&
            ttl_add_fix(&p->ttl, 2 * (size_t)nkeys, (uint32_t)keys[i].index, TTL_FIX_CAP, e->max_ttl_ms) != 0)
            return -1;
    }
    /* A write and its TTL are applied atomically; a read's window reset needs no transaction.
     * Redis never blocks inside MULTI: a blocking command's fixes follow it on its pin. */
    p->ttl.wrap = p->ttl.nfix > 0 && writes && p->flow != FLOW_BLOCK;
    return 0;
}

void ttl_rewrite_release(struct ttl_rewrite *t)
{
    if (t->fix && t->fix != t->fix_inline) free(t->fix);
    t->fix = NULL;
    t->nfix = 0;
}
