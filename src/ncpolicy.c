/* ncpolicy.c: the near cache's pure rules: which keys a command invalidates, which cached reads exist. */
#include "ncpolicy.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmdclass.h"
#include "resp.h"
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
        if (!ns[i] || !ns[i]->nc_stream) continue; /* near-cache lines and lines nested in one (registry.h) */
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

/* ---- the cached reads ---- */

#define WRONGTYPE "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"

static void add_hdr(struct bytebuf *out, char kind, size_t n)
{
    char buf[32];
    buf[0] = kind;
    size_t k = 1 + format_ll(buf + 1, (long long)n);
    buf[k++] = '\r';
    buf[k++] = '\n';
    bytebuf_add(out, buf, k);
}

static void add_int(struct bytebuf *out, long long v)
{
    char buf[32];
    buf[0] = ':';
    size_t k = 1 + format_ll(buf + 1, v);
    buf[k++] = '\r';
    buf[k++] = '\n';
    bytebuf_add(out, buf, k);
}

static void add_nil(struct bytebuf *out, int resp3)
{
    if (resp3)
        bytebuf_add(out, STR_AND_LEN("_\r\n"));
    else
        bytebuf_add(out, STR_AND_LEN("$-1\r\n"));
}

/* One length-prefixed element of a set or hash value at *pos; advances it. */
static const char *elem_next(const struct nc_value *v, size_t *pos, size_t *len)
{
    uint32_t n;
    assert(*pos + sizeof(n) <= v->len);
    memcpy(&n, v->val + *pos, sizeof(n));
    const char *p = v->val + *pos + sizeof(n);
    *pos += sizeof(n) + n;
    assert(*pos <= v->len);
    *len = n;
    return p;
}

/* The value of field f in a hash value, NULL when it has none. */
static const char *hash_get(const struct nc_value *v, const char *f, size_t flen, size_t *len)
{
    size_t pos = 0, kl, vl;
    for (uint32_t i = 0; i < v->nelem; i++) {
        const char *k = elem_next(v, &pos, &kl), *val = elem_next(v, &pos, &vl);
        if (kl == flen && memcmp(k, f, flen) == 0) {
            *len = vl;
            return val;
        }
    }
    return NULL;
}

static int set_has(const struct nc_value *v, const char *m, size_t mlen)
{
    size_t pos = 0, l;
    for (uint32_t i = 0; i < v->nelem; i++) {
        const char *e = elem_next(v, &pos, &l);
        if (l == mlen && memcmp(e, m, mlen) == 0) return 1;
    }
    return 0;
}

/* The rows answer WRONGTYPE for a key of another type (the absent key reads as empty). */
static int wrong_type(const struct nc_value *v, uint8_t want, struct bytebuf *out)
{
    if (v->type == NC_T_ABSENT || v->type == want) return 0;
    bytebuf_add(out, STR_AND_LEN(WRONGTYPE));
    return 1;
}

static void render_get(const struct nc_value *v, size_t argc, const char *const *argv, const size_t *argvlen, int resp3,
                       struct bytebuf *out)
{
    if (wrong_type(v, NC_T_STRING, out)) return;
    if (v->type == NC_T_ABSENT)
        add_nil(out, resp3);
    else
        bytebuf_add_bulk(out, v->val, v->len);
}

static void render_smembers(const struct nc_value *v, size_t argc, const char *const *argv, const size_t *argvlen,
                            int resp3, struct bytebuf *out)
{
    if (wrong_type(v, NC_T_SET, out)) return;
    uint32_t n = v->type == NC_T_SET ? v->nelem : 0;
    add_hdr(out, resp3 ? '~' : '*', n);
    size_t pos = 0, l;
    for (uint32_t i = 0; i < n; i++) {
        const char *e = elem_next(v, &pos, &l);
        bytebuf_add_bulk(out, e, l);
    }
}

static void render_sismember(const struct nc_value *v, size_t argc, const char *const *argv, const size_t *argvlen,
                             int resp3, struct bytebuf *out)
{
    if (wrong_type(v, NC_T_SET, out)) return;
    add_int(out, v->type == NC_T_SET && set_has(v, argv[2], argvlen[2]));
}

static void render_smismember(const struct nc_value *v, size_t argc, const char *const *argv, const size_t *argvlen,
                              int resp3, struct bytebuf *out)
{
    if (wrong_type(v, NC_T_SET, out)) return;
    add_hdr(out, '*', argc - 2);
    for (size_t i = 2; i < argc; i++) add_int(out, v->type == NC_T_SET && set_has(v, argv[i], argvlen[i]));
}

static void render_scard(const struct nc_value *v, size_t argc, const char *const *argv, const size_t *argvlen,
                         int resp3, struct bytebuf *out)
{
    if (wrong_type(v, NC_T_SET, out)) return;
    add_int(out, v->type == NC_T_SET ? v->count : 0);
}

static void render_hget(const struct nc_value *v, size_t argc, const char *const *argv, const size_t *argvlen,
                        int resp3, struct bytebuf *out)
{
    if (wrong_type(v, NC_T_HASH, out)) return;
    size_t l;
    const char *val = v->type == NC_T_HASH ? hash_get(v, argv[2], argvlen[2], &l) : NULL;
    if (val)
        bytebuf_add_bulk(out, val, l);
    else
        add_nil(out, resp3);
}

static void render_hmget(const struct nc_value *v, size_t argc, const char *const *argv, const size_t *argvlen,
                         int resp3, struct bytebuf *out)
{
    if (wrong_type(v, NC_T_HASH, out)) return;
    add_hdr(out, '*', argc - 2);
    for (size_t i = 2; i < argc; i++) {
        size_t l;
        const char *val = v->type == NC_T_HASH ? hash_get(v, argv[i], argvlen[i], &l) : NULL;
        if (val)
            bytebuf_add_bulk(out, val, l);
        else
            add_nil(out, resp3);
    }
}

static void render_hgetall(const struct nc_value *v, size_t argc, const char *const *argv, const size_t *argvlen,
                           int resp3, struct bytebuf *out)
{
    if (wrong_type(v, NC_T_HASH, out)) return;
    uint32_t n = v->type == NC_T_HASH ? v->nelem : 0;
    if (resp3)
        add_hdr(out, '%', n);
    else
        add_hdr(out, '*', 2 * (size_t)n);
    size_t pos = 0, l;
    for (uint32_t i = 0; i < 2 * n; i++) {
        const char *e = elem_next(v, &pos, &l);
        bytebuf_add_bulk(out, e, l);
    }
}

static void render_hexists(const struct nc_value *v, size_t argc, const char *const *argv, const size_t *argvlen,
                           int resp3, struct bytebuf *out)
{
    if (wrong_type(v, NC_T_HASH, out)) return;
    size_t l;
    add_int(out, v->type == NC_T_HASH && hash_get(v, argv[2], argvlen[2], &l) != NULL);
}

static void render_hlen(const struct nc_value *v, size_t argc, const char *const *argv, const size_t *argvlen,
                        int resp3, struct bytebuf *out)
{
    if (wrong_type(v, NC_T_HASH, out)) return;
    add_int(out, v->type == NC_T_HASH ? v->count : 0);
}

static void render_hstrlen(const struct nc_value *v, size_t argc, const char *const *argv, const size_t *argvlen,
                           int resp3, struct bytebuf *out)
{
    if (wrong_type(v, NC_T_HASH, out)) return;
    size_t l = 0;
    if (v->type != NC_T_HASH || !hash_get(v, argv[2], argvlen[2], &l)) l = 0;
    add_int(out, (long long)l);
}

static const struct nc_read rows[] = {
    {"get", 'a', render_get},
    {"smembers", 'a', render_smembers},
    {"sismember", 'm', render_sismember},
    {"smismember", 'm', render_smismember},
    {"scard", 'n', render_scard},
    {"hget", 'm', render_hget},
    {"hmget", 'm', render_hmget},
    {"hgetall", 'a', render_hgetall},
    {"hexists", 'm', render_hexists},
    {"hlen", 'n', render_hlen},
    {"hstrlen", 'm', render_hstrlen},
};

/* The row of a top-level command by its index in command_table, found once per command (any
 * thread: every thread finds the same value, stored with a relaxed atomic): 0 not yet looked
 * for, -1 none, else the row's index + 1. */
static int8_t row_of_command[1024];

const struct nc_read *ncpolicy_read(const struct command_def *cmd)
{
    if (!cmd) return NULL;
    size_t idx = (size_t)(cmd - command_table);
    int cached = cmd >= command_table && idx < command_table_len && idx < sizeof(row_of_command);
    if (cached) {
        int8_t r = __atomic_load_n(&row_of_command[idx], __ATOMIC_RELAXED);
        if (r) return r > 0 ? &rows[r - 1] : NULL;
    }
    int8_t found = -1;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (strcmp(cmd->name, rows[i].name) == 0) found = (int8_t)(i + 1);
    if (cached) __atomic_store_n(&row_of_command[idx], found, __ATOMIC_RELAXED);
    return found > 0 ? &rows[found - 1] : NULL;
}

void ncpolicy_render_mget(const struct nc_value *vals, size_t n, int resp3, struct bytebuf *out)
{
    add_hdr(out, '*', n);
    for (size_t i = 0; i < n; i++) {
        if (vals[i].type == NC_T_STRING)
            bytebuf_add_bulk(out, vals[i].val, vals[i].len);
        else
            add_nil(out, resp3);
    }
}

/* ---- the fill's reply ---- */

struct rd {
    const char *p, *end;
};

/* A line "<kind><text>\r\n" at r: its text; -1 at anything else. */
static int rd_line(struct rd *r, char kind, const char **text, size_t *len)
{
    if (r->p >= r->end || *r->p != kind) return -1;
    const char *cr = memchr(r->p, '\r', (size_t)(r->end - r->p));
    if (!cr || cr + 1 >= r->end || cr[1] != '\n') return -1;
    *text = r->p + 1;
    *len = (size_t)(cr - r->p - 1);
    r->p = cr + 2;
    return 0;
}

static int rd_int(struct rd *r, char kind, long long *v)
{
    const char *t;
    size_t l;
    return rd_line(r, kind, &t, &l) == 0 && resp_parse_ll(t, l, v) == 0 ? 0 : -1;
}

static int rd_bulk(struct rd *r, const char **s, size_t *len)
{
    long long n;
    if (rd_int(r, '$', &n) != 0 || n < 0 || n > r->end - r->p - 2) return -1;
    *s = r->p;
    *len = (size_t)n;
    if (r->p[n] != '\r' || r->p[n + 1] != '\n') return -1;
    r->p += n + 2;
    return 0;
}

int ncpolicy_fill_parse(const char *reply, size_t len, uint8_t *type, int64_t *pttl, uint32_t *nelem, uint32_t *count,
                        int *partial, struct bytebuf *value)
{
    struct rd r = {reply, reply + len};
    long long n, p;
    const char *t;
    size_t tl;
    if (rd_int(&r, '*', &n) != 0 || n < 2 || n > 4 || rd_bulk(&r, &t, &tl) != 0 || rd_int(&r, ':', &p) != 0) return -1;
    *pttl = p;
    *nelem = *count = 0;
    *partial = 0;
    if (tl == 4 && memcmp(t, "none", 4) == 0) {
        *type = NC_T_ABSENT;
        return n == 2 && r.p == r.end ? 0 : -1;
    }
    int is_string = tl == 6 && memcmp(t, "string", 6) == 0, is_set = tl == 3 && memcmp(t, "set", 3) == 0,
        is_hash = tl == 4 && memcmp(t, "hash", 4) == 0;
    if (!is_string && !is_set && !is_hash) {
        *type = NC_T_OTHER;
        return n == 2 && r.p == r.end ? 0 : -1;
    }
    if (is_string) {
        const char *s;
        size_t sl;
        if (n != 3 || rd_bulk(&r, &s, &sl) != 0) return -1;
        bytebuf_add(value, s, sl);
        *type = NC_T_STRING;
        return r.p == r.end ? 0 : -1;
    }
    long long k;
    if (n < 3 || rd_int(&r, '*', &k) != 0 || k < 0 || (is_hash && k % 2) || k > UINT32_MAX) return -1;
    for (long long i = 0; i < k; i++) {
        const char *s;
        size_t sl;
        if (rd_bulk(&r, &s, &sl) != 0 || sl > UINT32_MAX) return -1;
        uint32_t l32 = (uint32_t)sl;
        bytebuf_add(value, &l32, sizeof(l32));
        bytebuf_add(value, s, sl);
    }
    *type = is_set ? NC_T_SET : NC_T_HASH;
    *nelem = *count = (uint32_t)(is_set ? k : k / 2);
    if (n == 4) { /* a partial read: the whole value's count follows */
        long long c;
        if (rd_int(&r, ':', &c) != 0 || c < *nelem || c > UINT32_MAX) return -1;
        *count = (uint32_t)c;
        *partial = 1;
    }
    return r.p == r.end ? 0 : -1;
}
