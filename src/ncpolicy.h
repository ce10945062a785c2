/* ncpolicy.h: the near cache's pure rules: which keys a command invalidates, which cached reads exist. */
#ifndef KEYGATE_NCPOLICY_H
#define KEYGATE_NCPOLICY_H

#include <stddef.h>
#include <stdint.h>

#include "commands.h"
#include "registry.h"
#include "session.h"
#include "util.h"

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

/*
 * ---- the cached reads: one row each ----
 *
 * A fill reads the whole value of one key with its type and PTTL, on the primary (EVAL, never
 * EVAL_RO: a script that may write never runs on a replica; allow-oom: a full cache instance
 * still answers), and every row renders its reply from that value as Redis would, in RESP2 or
 * RESP3:
 *
 *   EVAL NCPOLICY_FILL_SCRIPT 1 key  ->  [type, pttl]  or  [type, pttl, GET | SMEMBERS | HGETALL]
 *
 * The value bytes an entry keeps (nccore knows nothing of them):
 *   NC_T_STRING  the string
 *   NC_T_SET     per member: u32 length (host order), bytes          nelem = members
 *   NC_T_HASH    per field: u32 length, bytes, u32 length, value     nelem = fields
 *   NC_T_ABSENT, NC_T_OTHER  nothing (another type: every row but MGET answers WRONGTYPE)
 */
enum nc_type {
    NC_T_ABSENT = 0,
    NC_T_STRING,
    NC_T_SET,
    NC_T_HASH,
    NC_T_OTHER,
    NC_T_BIG, /* a value over the size bound: its reads are forwarded as they came, not filled again */
};

/*
 * The fill: EVAL NCPOLICY_FILL_SCRIPT 1 key <limit> <mode> [member or field ...]. A set or hash
 * whose MEMORY USAGE is above limit (it will not be cached) is not read whole unless the row
 * needs it whole (mode a: SMEMBERS, HGETALL): mode m reads only the members or fields the
 * command names (SMISMEMBER, HMGET), mode n only the count (SCARD, HLEN; MGET's prefetch), and
 * the reply says so with a fourth element, the count: a miss never costs Redis much more than
 * the read it stands for.
 */
/* The most members or fields a mode 'm' fill names (the script unpacks them: Lua's stack takes
 * some 8,000); a command naming more is filled in mode 'a', whole. */
#define NCPOLICY_FILL_MAX_NAMED 1000

#define NCPOLICY_FILL_SCRIPT                                                                                           \
    "#!lua flags=no-writes,allow-oom\n"                                                                                \
    "local k = KEYS[1]\n"                                                                                              \
    "local t = redis.call('TYPE', k)['ok']\n"                                                                          \
    "local p = redis.call('PTTL', k)\n"                                                                                \
    "if t == 'string' then return {t, p, redis.call('GET', k)} end\n"                                                  \
    "if t ~= 'set' and t ~= 'hash' then return {t, p} end\n"                                                           \
    "local m = ARGV[2]\n"                                                                                              \
    "if m ~= 'a' and (redis.call('MEMORY', 'USAGE', k) or 0) > tonumber(ARGV[1]) then\n"                               \
    "  local got = {}\n"                                                                                               \
    "  if t == 'set' then\n"                                                                                           \
    "    if m == 'm' then\n"                                                                                           \
    "      local r = redis.call('SMISMEMBER', k, unpack(ARGV, 3))\n"                                                   \
    "      for i = 1, #r do if r[i] == 1 then got[#got + 1] = ARGV[i + 2] end end\n"                                   \
    "    end\n"                                                                                                        \
    "    return {t, p, got, redis.call('SCARD', k)}\n"                                                                 \
    "  end\n"                                                                                                          \
    "  if m == 'm' then\n"                                                                                             \
    "    local r = redis.call('HMGET', k, unpack(ARGV, 3))\n"                                                          \
    "    for i = 1, #r do if r[i] then got[#got + 1] = ARGV[i + 2]; got[#got + 1] = r[i] end end\n"                    \
    "  end\n"                                                                                                          \
    "  return {t, p, got, redis.call('HLEN', k)}\n"                                                                    \
    "end\n"                                                                                                            \
    "if t == 'set' then return {t, p, redis.call('SMEMBERS', k)} end\n"                                                \
    "return {t, p, redis.call('HGETALL', k)}\n"

/* A cached value as the rows read it. */
struct nc_value {
    uint8_t type;   /* enum nc_type */
    uint32_t nelem; /* elements in val */
    uint32_t count; /* the set's members, the hash's fields: nelem, or more for a partial read */
    const char *val;
    size_t len;
};

/* One cached read (GET, SMEMBERS, HGETALL, ...): its reply from a value, for argv. */
struct nc_read {
    const char *name;
    char mode; /* the fill's: 'a' the whole value, 'm' the named members or fields, 'n' the count */
    void (*render)(const struct nc_value *v, size_t argc, const char *const *argv, const size_t *argvlen, int resp3,
                   struct bytebuf *out);
};

/* The row of a command answered from the cache (its key is argv[1]), or NULL. MGET is not a row:
 * see ncpolicy_render_mget. */
const struct nc_read *ncpolicy_read(const struct command_def *cmd);

/*
 * Parse a fill's reply (the script's array) into its type, its PTTL (-1: none, -2: absent) and
 * the value bytes appended to *value in the format above (nelem set; count the members or
 * fields of the whole value, *partial 1 when the value holds only some of them: rendered,
 * never cached). 0, or -1 when the reply is not a fill's (an error reply, a malformed array):
 * then nothing is cached and the reply is the client's as it came.
 */
int ncpolicy_fill_parse(const char *reply, size_t len, uint8_t *type, int64_t *pttl, uint32_t *nelem, uint32_t *count,
                        int *partial, struct bytebuf *value);

/* MGET's reply from every key's cached value (vals[i] for argv[i + 1]): a string is its bulk,
 * anything else nil, as Redis answers. */
void ncpolicy_render_mget(const struct nc_value *vals, size_t n, int resp3, struct bytebuf *out);

#endif
