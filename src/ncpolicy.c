/* ncpolicy.c: the near cache's pure rules: which keys a command invalidates, which cached reads exist. */
#include "ncpolicy.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "cmdclass.h"
#include "util.h"

int ncpolicy_writes(const struct command_def *cmd)
{
    enum cmd_id cid = cmdclass_id(cmd);
    return (cmd->flags & CMD_WRITE) || cid == CID_EVAL || cid == CID_EVALSHA || cid == CID_FCALL;
}

void ncpolicy_invalidations(const struct policy_request *r, const struct key_ref *keys,
                            const struct namespace_entry *const *ns, int nkeys, struct nc_inval *out)
{
    out->n = 0;
    out->key = out->key_inline;
    if (!r->cmd || !ncpolicy_writes(r->cmd)) return;
    size_t cap = NC_INVAL_INLINE;
    for (int i = 0; i < nkeys; i++) {
        if (!ns[i] || ns[i]->near_cache_ms <= 0) continue;
        assert(ns[i]->nc_stream); /* registry_load gives every near-cache line its stream */
        if (out->n == cap) {
            cap = (size_t)nkeys;
            struct nc_inval_key *heap = xmalloc(cap * sizeof(*heap));
            memcpy(heap, out->key, out->n * sizeof(*heap));
            if (out->key != out->key_inline) free(out->key);
            out->key = heap;
        }
        out->key[out->n++] = (struct nc_inval_key){.argi = (uint32_t)keys[i].index, .ns = ns[i]};
    }
}

void ncpolicy_inval_move(struct nc_inval *dst, struct nc_inval *src)
{
    dst->n = src->n;
    if (src->key == src->key_inline || !src->key) {
        memcpy(dst->key_inline, src->key_inline, sizeof(dst->key_inline));
        dst->key = dst->key_inline;
    } else {
        dst->key = src->key; /* dst owns the heap array now */
    }
    src->key = NULL;
    src->n = 0;
}

void ncpolicy_inval_release(struct nc_inval *v)
{
    if (v->key && v->key != v->key_inline) free(v->key);
    v->key = NULL;
    v->n = 0;
}
