/* commands.c: command lookup, arity checks and key extraction over the generated command table. */
#include "commands.h"
#include "util.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

static unsigned char ascii_lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

static size_t arg_len(const char *const *argv, const size_t *argvlen, size_t i)
{
    return argvlen ? argvlen[i] : strlen(argv[i]);
}

/* Compare a lower-case table name with s[0..len) folded to lower case, like strcmp. */
static int name_cmp(const char *name, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char n = (unsigned char)name[i];
        unsigned char c = ascii_lower((unsigned char)s[i]);
        if (n == '\0') return -1;
        if (n != c) return (int)n - (int)c;
    }
    return name[len] == '\0' ? 0 : 1;
}

/* Binary search of a sorted def array; `skip` bytes of every name are a shared prefix. */
static const struct command_def *defs_find(const struct command_def *defs, size_t n, size_t skip, const char *s,
                                           size_t len)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = name_cmp(defs[mid].name + skip, s, len);
        if (c == 0) return &defs[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static const struct command_def *subcommand_find(const struct command_def *parent, const char *s, size_t len)
{
    size_t skip = strlen(parent->name) + 1; /* "parent|" */
    return defs_find(parent->subcommands, (size_t)parent->nsubcommands, skip, s, len);
}

const struct command_def *command_lookup(size_t argc, const char *const *argv, const size_t *argvlen,
                                         int *unknown_subcommand)
{
    if (unknown_subcommand) *unknown_subcommand = 0;
    if (argc == 0) return NULL;
    const struct command_def *cmd = defs_find(command_table, command_table_len, 0, argv[0], arg_len(argv, argvlen, 0));
    if (!cmd || cmd->nsubcommands == 0) return cmd;
    const struct command_def *sub = NULL;
    if (argc >= 2) sub = subcommand_find(cmd, argv[1], arg_len(argv, argvlen, 1));
    if (sub) return sub;
    if (unknown_subcommand) *unknown_subcommand = 1;
    return cmd;
}

const struct command_def *command_by_name(const char *name)
{
    const char *bar = strchr(name, '|');
    size_t plen = bar ? (size_t)(bar - name) : strlen(name);
    const struct command_def *cmd = defs_find(command_table, command_table_len, 0, name, plen);
    if (!cmd || !bar) return cmd;
    if (cmd->nsubcommands == 0) return NULL;
    return subcommand_find(cmd, bar + 1, strlen(bar + 1));
}

int command_arity_ok(const struct command_def *cmd, size_t argc)
{
    if (cmd->arity >= 0) return argc == (size_t)cmd->arity;
    return argc >= (size_t)(-(long)cmd->arity);
}

/*
 * Key extraction: which arguments Redis 7.0.15 treats as keys when it EXECUTES the
 * command. Execution, not COMMAND GETKEYS, is the truth: where the two disagree the
 * finders follow the command's own parser.
 *
 *   command_find_keys_err
 *     arity wrong                      -> -1, Redis's "wrong number of arguments" text
 *     hand-written finder for the name -> walks the options like the Redis parser does
 *       geo_find      GEORADIUS[BYMEMBER][_RO]  georadiusGeneric (geo.c)
 *       xread_find    XREAD, XREADGROUP         xreadCommand (t_stream.c)
 *       sort_find     SORT, SORT_RO             sortCommandGeneric (sort.c)
 *       migrate_find  MIGRATE                   migrateCommand (cluster.c)
 *       script_find   EVAL*, EVALSHA*, FCALL*   evalGenericCommand, fcallCommandGeneric
 *       mpop_find     LMPOP BLMPOP ZMPOP BZMPOP lmpopGenericCommand, zmpopGenericCommand
 *       sintercard_find SINTERCARD              sinterCardCommand (t_set.c)
 *       zsetop_find   ZUNION ZINTER ZDIFF ZINTERCARD and the *STORE forms
 *                                               zunionInterDiffGenericCommand (t_zset.c)
 *     otherwise the key-spec walk (db.c getKeysUsingKeySpecs) over INDEX specs
 *
 * Where COMMAND GETKEYS and execution disagree, the finders follow execution (each case
 * is checked against a live Redis by tests/integration/test_getkeys.c):
 *
 *   GEORADIUS k 1 1 1 m STORE a STORE b          GETKEYS: k a     Redis writes b
 *   XREADGROUP COUNT 1 GROUP STREAMS c STREAMS s >  GETKEYS: c STREAMS  Redis reads s
 *   SORT k STORE STORE BY p                      GETKEYS: k BY    Redis writes "STORE"
 *   PFMERGE dst                                  GETKEYS: error   Redis writes dst
 *   MIGRATE h p "" 0 5000 KEYS                   GETKEYS: ""      Redis migrates nothing
 *
 * Every BS_KEYWORD spec of the 7.0 table (GEORADIUS/GEORADIUSBYMEMBER STORE and
 * STOREDIST, MIGRATE KEYS, XREAD/XREADGROUP STREAMS) and every FK_KEYNUM spec has a
 * finder above: a keyword or a key count only means something inside the command's
 * own option grammar. A keyword/keynum spec without a finder (a newer table) sets
 * *incomplete rather than being guessed at.
 *
 * Where the arguments that locate the keys are malformed, the finders return -1 and
 * the text Redis answers for them. Errors Redis finds later (a bad WHERE of LMPOP, a
 * bad WEIGHTS value) are left to Redis: the keys are known by then and Redis touches
 * none of them. Error texts are those of a well-formed request up to that point; an
 * error Redis reports first from the data (WRONGTYPE, a GEORADIUSBYMEMBER member not in
 * the set, "Function not found" for FCALL) cannot be seen from the arguments.
 *
 * Option words are compared with args_word_is (strcasecmp on the C string: "STORE\0x"
 * is STORE) and integers read with args_ll (string2ll), exactly as Redis does.
 */

#define ERR_SYNTAX "ERR syntax error"
#define ERR_NOT_INT "ERR value is not an integer or out of range"

/* One extraction: the arguments, where keys go, where an error text goes. */
struct find {
    const struct command_def *cmd;
    int argc;
    const char *const *argv;
    const size_t *argvlen;
    struct key_ref *out;
    int max;
    int n;              /* keys found (may exceed max) */
    int incomplete;     /* a spec no finder covers */
    int blocks;         /* XREAD/XREADGROUP: a BLOCK option was parsed */
    long long block_ms; /* its value */
    char *error;
    size_t errlen;
};

static void key_add(struct find *f, int index, uint32_t flags)
{
    if (f->n < f->max) {
        f->out[f->n].index = index;
        f->out[f->n].flags = flags;
    }
    f->n++;
}

/* Record Redis's error text and return -1. */
static int find_fail(struct find *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int find_fail(struct find *f, const char *fmt, ...)
{
    if (f->error && f->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(f->error, f->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static size_t find_len(const struct find *f, int i)
{
    return arg_len(f->argv, f->argvlen, (size_t)i);
}

/* argv[i] is the option word `word` to Redis (strcasecmp). */
static int find_is(const struct find *f, int i, const char *word)
{
    return args_word_is(f->argv[i], find_len(f, i), word);
}

/* argv[i] as Redis's string2ll reads it; 0 or -1. */
static int find_ll(const struct find *f, int i, long long *v)
{
    return args_ll(f->argv[i], find_len(f, i), v);
}

static uint32_t spec_flags(const struct command_def *cmd, int i, uint32_t dflt)
{
    return i < cmd->nspecs ? cmd->specs[i].flags & ~KS_INCOMPLETE : dflt;
}

/* ---- the key-spec walk, for commands whose keys sit at fixed places ---- */

/* One INDEX spec into f. Returns 0, or -1 when argv cannot satisfy it. */
static int spec_find_keys(struct find *f, const struct key_spec *ks)
{
    int argc = f->argc;
    long first, last, step;

    if (ks->bs_type != BS_INDEX || ks->fk_type != FK_RANGE) {
        /* BS_UNKNOWN/FK_UNKNOWN, or a keyword/key count without a finder of its own */
        f->incomplete = 1;
        return 0;
    }
    first = ks->bs_index;
    step = ks->fk_keystep;
    if (ks->fk_lastkey >= 0)
        last = first + ks->fk_lastkey;
    else if (ks->fk_limit == 0)
        last = argc + ks->fk_lastkey;
    else
        last = first + ((argc - first) / ks->fk_limit + ks->fk_lastkey);
    if (ks->fk_lastkey < 0 && first <= argc && last < first)
        return 0; /* an empty range to the end, where the arity allows it: "PFMERGE dst" (Redis
                     executes it; COMMAND GETKEYS answers "Invalid arguments") */
    if (step < 1 || first < 1 || first >= argc || last < first || last >= argc) return find_fail(f, ERR_SYNTAX);
    for (long i = first; i <= last; i += step) key_add(f, (int)i, ks->flags);
    if (ks->flags & KS_INCOMPLETE) f->incomplete = 1;
    return 0;
}

static int specs_find(struct find *f)
{
    for (int i = 0; i < f->cmd->nspecs; i++) {
        const struct key_spec *ks = &f->cmd->specs[i];
        if (ks->flags & KS_NOT_KEY) continue;
        if (spec_find_keys(f, ks) < 0) return -1;
    }
    return 0;
}

/* ---- hand-written finders (see the table above) ---- */

/* argv[i] as Redis's string2d reads it (strtod over the whole argument, no leading
 * space, no NaN, no overflow); 0 or -1. */
static int find_double(const struct find *f, int i, double *v)
{
    size_t len = find_len(f, i);
    char small[128];
    char *buf = len < sizeof(small) ? small : xmalloc(len + 1);
    char *end;
    int rc = -1;

    memcpy(buf, f->argv[i], len);
    buf[len] = '\0';
    errno = 0;
    *v = strtod(buf, &end);
    if (len > 0 && !isspace((unsigned char)buf[0]) && (size_t)(end - buf) == len &&
        !(errno == ERANGE && (*v == HUGE_VAL || *v == -HUGE_VAL || fpclassify(*v) == FP_ZERO)) && !isnan(*v))
        rc = 0;
    if (buf != small) free(buf);
    return rc;
}

/* GEORADIUS's radius and unit at argv[i], argv[i+1] (geo.c extractDistanceOrReply). */
static int geo_distance(struct find *f, int i)
{
    double radius;
    if (find_double(f, i, &radius) != 0) return find_fail(f, "ERR need numeric radius");
    if (radius < 0) return find_fail(f, "ERR radius cannot be negative");
    if (!find_is(f, i + 1, "m") && !find_is(f, i + 1, "km") && !find_is(f, i + 1, "ft") && !find_is(f, i + 1, "mi"))
        return find_fail(f, "ERR unsupported unit provided. please use M, KM, FT, MI");
    return 0;
}

/*
 * GEORADIUS key lon lat radius unit [opts] / GEORADIUSBYMEMBER key member radius unit [opts]:
 * options WITHDIST WITHHASH WITHCOORD ANY ASC DESC (no value), COUNT n, STORE key,
 * STOREDIST key. Every STORE/STOREDIST overrides the one before: the LAST one names
 * the written key. (COMMAND GETKEYS disagrees: its key specs take the first STORE and
 * the first STOREDIST, so "STORE a STORE b" reports a where Redis writes b.)
 * The _RO variants take no STORE/STOREDIST (a syntax error).
 * Before the options Redis checks GEORADIUS's longitude, latitude, radius and unit, and
 * GEORADIUSBYMEMBER's radius and unit (those only when the key exists and holds the
 * member: with no key Redis skips them and a STORE deletes its key; keygate checks
 * them always, refusing a little more than Redis does, never less).
 */
static int geo_find(struct find *f)
{
    const char *name = f->cmd->name;
    int base = strncmp(name, "georadiusbymember", 17) == 0 ? 5 : 6;
    int nostore = strstr(name, "_ro") != NULL;
    int store = 0, withx = 0, any = 0;
    long long count = 0;
    double lon, lat;

    if (base == 6) {
        if (find_double(f, 2, &lon) != 0 || find_double(f, 3, &lat) != 0)
            return find_fail(f, "ERR value is not a valid float");
        if (lon < -180 || lon > 180 || lat < -85.05112878 || lat > 85.05112878)
            return find_fail(f, "ERR invalid longitude,latitude pair %f,%f", lon, lat);
    }
    if (geo_distance(f, base - 2) < 0) return -1;

    for (int i = base; i < f->argc; i++) {
        int more = f->argc - i - 1;
        if (find_is(f, i, "withdist") || find_is(f, i, "withhash") || find_is(f, i, "withcoord")) {
            withx = 1;
        } else if (find_is(f, i, "any")) {
            any = 1;
        } else if (find_is(f, i, "asc") || find_is(f, i, "desc")) {
            continue;
        } else if (find_is(f, i, "count") && more) {
            if (find_ll(f, i + 1, &count) != 0) return find_fail(f, ERR_NOT_INT);
            if (count <= 0) return find_fail(f, "ERR COUNT must be > 0");
            i++;
        } else if ((find_is(f, i, "store") || find_is(f, i, "storedist")) && more && !nostore) {
            store = ++i;
        } else {
            return find_fail(f, ERR_SYNTAX);
        }
    }
    if (store && withx)
        return find_fail(f, "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and "
                            "WITHCOORD options");
    if (any && !count) return find_fail(f, "ERR the ANY argument requires COUNT argument");
    key_add(f, 1, spec_flags(f->cmd, 0, KS_RO | KS_ACCESS));
    if (store) key_add(f, store, spec_flags(f->cmd, 1, KS_OW | KS_UPDATE));
    return 0;
}

/*
 * XREAD [COUNT n] [BLOCK ms] STREAMS key... id... / XREADGROUP GROUP g c [COUNT n]
 * [BLOCK ms] [NOACK] STREAMS key... id...: options in any order, repeatable; BLOCK
 * and COUNT take one value, GROUP two, NOACK none; the first STREAMS that is an
 * option (not a value of one) ends them. So a group or consumer named STREAMS is a
 * value. (COMMAND GETKEYS disagrees: its key spec takes the first STREAMS from argv[4]
 * on, so "XREADGROUP COUNT 1 GROUP STREAMS c STREAMS s >" reports c and STREAMS.)
 * Sets f->blocks when a BLOCK option was parsed.
 */
static int xread_find(struct find *f)
{
    int group_cmd = strcmp(f->cmd->name, "xreadgroup") == 0;
    int streams = 0, have_group = 0;
    long long v;

    for (int i = 1; i < f->argc; i++) {
        int more = f->argc - i - 1;
        if (find_is(f, i, "block") && more) {
            i++;
            if (find_ll(f, i, &v) != 0) return find_fail(f, "ERR timeout is not an integer or out of range");
            if (v < 0) return find_fail(f, "ERR timeout is negative");
            f->blocks = 1;
            f->block_ms = v;
        } else if (find_is(f, i, "count") && more) {
            i++;
            if (find_ll(f, i, &v) != 0) return find_fail(f, ERR_NOT_INT);
        } else if (find_is(f, i, "streams") && more) {
            streams = i + 1;
            if ((f->argc - streams) % 2 != 0)
                return find_fail(f, "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' "
                                    "must be specified.");
            break;
        } else if (find_is(f, i, "group") && more >= 2) {
            if (!group_cmd)
                return find_fail(f, "ERR The GROUP option is only supported by XREADGROUP. You called XREAD "
                                    "instead.");
            have_group = 1;
            i += 2;
        } else if (find_is(f, i, "noack")) {
            if (!group_cmd)
                return find_fail(f, "ERR The NOACK option is only supported by XREADGROUP. You called XREAD "
                                    "instead.");
        } else {
            return find_fail(f, ERR_SYNTAX);
        }
    }
    if (streams == 0) return find_fail(f, ERR_SYNTAX);
    if (group_cmd && !have_group) return find_fail(f, "ERR Missing GROUP option for XREADGROUP");
    int nkeys = (f->argc - streams) / 2;
    for (int i = streams; i < streams + nkeys; i++) key_add(f, i, spec_flags(f->cmd, 0, KS_RO | KS_ACCESS));
    return 0;
}

/*
 * SORT / SORT_RO key [BY pat] [LIMIT off n] [GET pat]... [ASC|DESC] [ALPHA] [STORE dst]:
 * the sorted key is argv[1]; SORT's last STORE names the written key (SORT_RO has
 * none: a syntax error). BY/GET patterns name keys only through the data and are not
 * returned. LIMIT's two values must be integers.
 */
static int sort_find(struct find *f)
{
    int readonly = strcmp(f->cmd->name, "sort_ro") == 0;
    int store = 0;
    long long v;

    for (int j = 2; j < f->argc; j++) {
        int left = f->argc - j - 1;
        if (find_is(f, j, "asc") || find_is(f, j, "desc") || find_is(f, j, "alpha")) {
            continue;
        } else if (find_is(f, j, "limit") && left >= 2) {
            if (find_ll(f, j + 1, &v) != 0 || find_ll(f, j + 2, &v) != 0) return find_fail(f, ERR_NOT_INT);
            j += 2;
        } else if (!readonly && find_is(f, j, "store") && left >= 1) {
            store = ++j;
        } else if ((find_is(f, j, "by") || find_is(f, j, "get")) && left >= 1) {
            j++;
        } else {
            return find_fail(f, ERR_SYNTAX);
        }
    }
    key_add(f, 1, spec_flags(f->cmd, 0, KS_RO | KS_ACCESS));
    if (store) key_add(f, store, KS_OW | KS_UPDATE);
    return 0;
}

/*
 * MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw] [AUTH2 user pw]
 * [KEYS key...]: one key at argv[3], or, with KEYS (argv[3] must then be ""), every
 * argument after KEYS.
 */
static int migrate_find(struct find *f)
{
    uint32_t flags = spec_flags(f->cmd, 0, KS_RW | KS_ACCESS | KS_DELETE);

    for (int j = 6; j < f->argc; j++) {
        int more = f->argc - 1 - j;
        if (find_is(f, j, "copy") || find_is(f, j, "replace")) {
            continue;
        } else if (find_is(f, j, "auth")) {
            if (!more) return find_fail(f, ERR_SYNTAX);
            j++;
        } else if (find_is(f, j, "auth2")) {
            if (more < 2) return find_fail(f, ERR_SYNTAX);
            j += 2;
        } else if (find_is(f, j, "keys")) {
            if (find_len(f, 3) != 0)
                return find_fail(f, "ERR When using MIGRATE KEYS option, the key argument must be set to the "
                                    "empty string");
            for (int k = j + 1; k < f->argc; k++) key_add(f, k, flags);
            return 0;
        } else {
            return find_fail(f, ERR_SYNTAX);
        }
    }
    key_add(f, 3, flags);
    return 0;
}

/*
 * EVAL[_RO] script numkeys key... arg..., EVALSHA[_RO] sha numkeys ..., FCALL[_RO]
 * function numkeys ...: numkeys keys from argv[3]; 0 is allowed. EVALSHA answers
 * NOSCRIPT for a sha that is not 40 bytes before it reads numkeys.
 */
static int script_find(struct find *f)
{
    int fcall = strncmp(f->cmd->name, "fcall", 5) == 0;
    int evalsha = strncmp(f->cmd->name, "evalsha", 7) == 0;
    long long n;
    int bad = find_ll(f, 2, &n) != 0;

    if (bad || n > f->argc - 3 || n < 0) {
        if (evalsha && find_len(f, 1) != 40) return find_fail(f, "NOSCRIPT No matching script. Please use EVAL.");
        if (bad) return find_fail(f, fcall ? "ERR Bad number of keys provided" : ERR_NOT_INT);
        if (n > f->argc - 3) return find_fail(f, "ERR Number of keys can't be greater than number of args");
        return find_fail(f, "ERR Number of keys can't be negative");
    }
    for (int i = 3; i < 3 + (int)n; i++) key_add(f, i, spec_flags(f->cmd, 0, KS_RW | KS_ACCESS | KS_UPDATE));
    return 0;
}

/*
 * LMPOP numkeys key... LEFT|RIGHT [COUNT n], ZMPOP numkeys key... MIN|MAX [COUNT n],
 * BLMPOP/BZMPOP timeout numkeys ...: numkeys >= 1 keys, and the WHERE word must follow
 * them (what follows is Redis's to check).
 */
static int mpop_find(struct find *f)
{
    int idx = f->cmd->name[0] == 'b' ? 2 : 1;
    long long n;

    if (find_ll(f, idx, &n) != 0 || n < 1) return find_fail(f, "ERR numkeys should be greater than 0");
    if (n >= f->argc - idx - 1) /* where_idx = idx + n + 1 must be < argc */
        return find_fail(f, ERR_SYNTAX);
    for (int i = idx + 1; i <= idx + (int)n; i++) key_add(f, i, spec_flags(f->cmd, 0, KS_RW | KS_ACCESS | KS_DELETE));
    return 0;
}

/* SINTERCARD numkeys key... [LIMIT n]: numkeys >= 1 keys from argv[2]. */
static int sintercard_find(struct find *f)
{
    long long n;

    if (find_ll(f, 1, &n) != 0 || n < 1) return find_fail(f, "ERR numkeys should be greater than 0");
    if (n > f->argc - 2) return find_fail(f, "ERR Number of keys can't be greater than number of args");
    for (int i = 2; i < 2 + (int)n; i++) key_add(f, i, spec_flags(f->cmd, 0, KS_RO | KS_ACCESS));
    return 0;
}

/*
 * ZUNION/ZINTER/ZDIFF/ZINTERCARD numkeys key... [opts] and ZUNIONSTORE/ZINTERSTORE/
 * ZDIFFSTORE dst numkeys key... [opts]: the destination, then numkeys >= 1 keys.
 */
static int zsetop_find(struct find *f)
{
    size_t len = strlen(f->cmd->name);
    int store = len > 5 && strcmp(f->cmd->name + len - 5, "store") == 0;
    int idx = store ? 2 : 1;
    long long n;

    if (find_ll(f, idx, &n) != 0) return find_fail(f, ERR_NOT_INT);
    if (n < 1) return find_fail(f, "ERR at least 1 input key is needed for '%s' command", f->cmd->name);
    if (n > f->argc - (idx + 1)) return find_fail(f, ERR_SYNTAX);
    if (store) key_add(f, 1, spec_flags(f->cmd, 0, KS_OW | KS_UPDATE));
    for (int i = idx + 1; i <= idx + (int)n; i++) key_add(f, i, spec_flags(f->cmd, store ? 1 : 0, KS_RO | KS_ACCESS));
    return 0;
}

static const struct {
    const char *name;
    int (*find)(struct find *f);
} finders[] = {
    {"blmpop", mpop_find},      {"bzmpop", mpop_find},           {"eval", script_find},
    {"eval_ro", script_find},   {"evalsha", script_find},        {"evalsha_ro", script_find},
    {"fcall", script_find},     {"fcall_ro", script_find},       {"georadius", geo_find},
    {"georadius_ro", geo_find}, {"georadiusbymember", geo_find}, {"georadiusbymember_ro", geo_find},
    {"lmpop", mpop_find},       {"migrate", migrate_find},       {"sintercard", sintercard_find},
    {"sort", sort_find},        {"sort_ro", sort_find},          {"xread", xread_find},
    {"xreadgroup", xread_find}, {"zdiff", zsetop_find},          {"zdiffstore", zsetop_find},
    {"zinter", zsetop_find},    {"zintercard", zsetop_find},     {"zinterstore", zsetop_find},
    {"zmpop", mpop_find},       {"zunion", zsetop_find},         {"zunionstore", zsetop_find},
};

typedef int (*finder_fn)(struct find *f);

/* The hand-written finder named `name`, or NULL: a binary search of finders[] (sorted by name). */
static finder_fn finder_by_name(const char *name)
{
    size_t lo = 0, hi = sizeof(finders) / sizeof(finders[0]);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(finders[mid].name, name);
        if (c == 0) return finders[mid].find;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/*
 * Every command's finder, looked up by name once: a table keyed by the command's address
 * (open addressing), filled on first use, so a request pays one hash probe instead of the
 * ~10 strcmp of a search by name (two searches per request cost ~450 instructions).
 */
#define FINDER_SLOTS 1024 /* power of two, well above the ~370 commands and subcommands */

static struct {
    const struct command_def *cmd;
    finder_fn find;
} finder_slots[FINDER_SLOTS];
static pthread_once_t finder_slots_once = PTHREAD_ONCE_INIT;

static size_t finder_slot_of(const struct command_def *cmd)
{
    uint64_t h = (uint64_t)(uintptr_t)cmd * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 54) & (FINDER_SLOTS - 1);
}

static void finder_slot_add(const struct command_def *cmd)
{
    size_t i = finder_slot_of(cmd);
    while (finder_slots[i].cmd) i = (i + 1) & (FINDER_SLOTS - 1);
    finder_slots[i].cmd = cmd;
    finder_slots[i].find = finder_by_name(cmd->name);
}

static void finder_slots_build(void)
{
    size_t n = 0;
    for (size_t i = 0; i < command_table_len; i++) {
        finder_slot_add(&command_table[i]);
        for (int j = 0; j < command_table[i].nsubcommands; j++) finder_slot_add(&command_table[i].subcommands[j]);
        n += 1 + (size_t)command_table[i].nsubcommands;
    }
    assert(n < FINDER_SLOTS / 2); /* probes stay short */
}

/* The hand-written finder of cmd, or NULL (the key specs are walked). A command outside the
 * table (tests build their own) is looked up by name. */
static finder_fn finder_of(const struct command_def *cmd)
{
    pthread_once(&finder_slots_once, finder_slots_build);
    for (size_t i = finder_slot_of(cmd);; i = (i + 1) & (FINDER_SLOTS - 1)) {
        if (finder_slots[i].cmd == cmd) return finder_slots[i].find;
        if (!finder_slots[i].cmd) return finder_by_name(cmd->name);
    }
}

/* Run the finder of f->cmd (hand-written or the spec walk); 0 or -1. */
static int find_run(struct find *f)
{
    if (!command_arity_ok(f->cmd, (size_t)f->argc))
        return find_fail(f, "ERR wrong number of arguments for '%s' command", f->cmd->name);
    finder_fn find = finder_of(f->cmd);
    return find ? find(f) : specs_find(f);
}

int command_finders_sorted(void)
{
    for (size_t i = 1; i < sizeof(finders) / sizeof(finders[0]); i++)
        if (strcmp(finders[i - 1].name, finders[i].name) >= 0) return 0;
    return 1;
}

int command_find_keys_err(const struct command_def *cmd, size_t argc, const char *const *argv, const size_t *argvlen,
                          struct key_ref *out, int max, int *incomplete, char *error, size_t errlen)
{
    struct find f = {.cmd = cmd,
                     .argv = argv,
                     .argvlen = argvlen,
                     .out = out,
                     .max = max < 0 ? 0 : max,
                     .error = error,
                     .errlen = errlen};

    if (incomplete) *incomplete = 0;
    if (error && errlen > 0) error[0] = '\0';
    if (argc > INT_MAX / 2) /* index arithmetic stays within int */
        return find_fail(&f, ERR_SYNTAX);
    f.argc = (int)argc;
    if (find_run(&f) < 0) return -1;
    if (incomplete) *incomplete = f.incomplete;
    return f.n;
}

int command_find_keys(const struct command_def *cmd, size_t argc, const char *const *argv, const size_t *argvlen,
                      struct key_ref *out, int max, int *incomplete)
{
    return command_find_keys_err(cmd, argc, argv, argvlen, out, max, incomplete, NULL, 0);
}

/* ---- COMMAND GETKEYS: Redis's own answer (getKeysFromCommandWithSpecs), not execution's ----
 *
 *   command_getkeys
 *     unknown / no key spec / arity      -> Redis's error texts
 *     SET, BITFIELD (variable flags)     -> getkeys_proc at once
 *     otherwise the key specs            -> getkeys_spec_walk (getKeysUsingKeySpecs)
 *       a spec that fails (UNKNOWN, INCOMPLETE, out of range, a bad key count)
 *                                        -> the command's getkeys_proc, if it has one, else no key
 *     no key                             -> [] when the command's keys are optional, else an error
 */

/* One spec of Redis's getKeysUsingKeySpecs (GET_KEYSPEC_DEFAULT): its keys into f; -1 when it fails. */
static int getkeys_spec(struct find *f, const struct key_spec *ks)
{
    int argc = f->argc, first = 0, last, step;
    if (ks->bs_type == BS_INDEX) {
        first = ks->bs_index;
    } else if (ks->bs_type == BS_KEYWORD) {
        /* forward from startfrom to argc-2, or backward from argc+startfrom to 2: the end is excluded */
        int start = ks->bs_startfrom > 0 ? ks->bs_startfrom : argc + ks->bs_startfrom;
        int end = ks->bs_startfrom > 0 ? argc - 1 : 1;
        for (int i = start; i != end; i = start <= end ? i + 1 : i - 1) {
            if (i >= argc || i < 1) break;
            if (find_is(f, i, ks->bs_keyword)) {
                first = i + 1;
                break;
            }
        }
        if (!first) return 0; /* keyword not found: this spec names no key */
    } else {
        return -1;
    }
    if (ks->fk_type == FK_RANGE) {
        step = ks->fk_keystep;
        if (ks->fk_lastkey >= 0)
            last = first + ks->fk_lastkey;
        else if (!ks->fk_limit)
            last = argc + ks->fk_lastkey;
        else
            last = first + ((argc - first) / ks->fk_limit + ks->fk_lastkey);
    } else if (ks->fk_type == FK_KEYNUM) {
        long long n;
        step = ks->fk_keystep;
        if (ks->fk_keynumidx >= argc || first + ks->fk_keynumidx >= argc) return -1;
        if (find_ll(f, first + ks->fk_keynumidx, &n) != 0 || n < 0 || n > INT_MAX / 2) return -1;
        first += ks->fk_firstkey;
        last = first + (int)n - 1;
    } else {
        return -1;
    }
    if (last >= argc || last < first || first >= argc || step < 1) return -1;
    for (int i = first; i <= last; i += step) key_add(f, i, ks->flags);
    return ks->flags & KS_INCOMPLETE ? -1 : 0;
}

/* Every key spec (getKeysUsingKeySpecs): 0, or -1 (f->n reset) when one fails. */
static int getkeys_spec_walk(struct find *f)
{
    for (int i = 0; i < f->cmd->nspecs; i++) {
        const struct key_spec *ks = &f->cmd->specs[i];
        if (ks->flags & KS_NOT_KEY) continue;
        if (getkeys_spec(f, ks) < 0) {
            f->n = 0;
            return -1;
        }
    }
    return 0;
}

/* argv[i] as C's atoi reads its C string (leading space, a sign, digits up to the first other byte). */
static int find_atoi(const struct find *f, int i)
{
    size_t len = find_len(f, i);
    char small[64];
    char *buf = len < sizeof(small) ? small : xmalloc(len + 1);
    memcpy(buf, f->argv[i], len);
    buf[len] = '\0';
    int v = (int)strtol(buf, NULL, 10); /* glibc's atoi */
    if (buf != small) free(buf);
    return v;
}

/* genericGetKeys: `num` keys (atoi of argv[count_at]) from first_at, then the destination
 * (store_at, 0 = none) last; no key when num < 1 or past argc. Flags: none. */
static void getkeys_counted(struct find *f, int store_at, int count_at, int first_at)
{
    int num = find_atoi(f, count_at);
    if (num < 1 || num > f->argc - first_at) return;
    for (int i = 0; i < num; i++) key_add(f, first_at + i, 0);
    if (store_at) key_add(f, store_at, 0);
}

/* sortGetKeys: the sorted key, and the last STORE's value, where options are skipped as LIMIT 2,
 * GET 1, BY 1 and every other word as none (so a STORE value may itself be read as STORE). */
static void getkeys_sort(struct find *f)
{
    int store = 0;
    key_add(f, 1, KS_RO | KS_ACCESS);
    for (int i = 2; i < f->argc; i++) {
        if (find_is(f, i, "limit"))
            i += 2;
        else if (find_is(f, i, "get") || find_is(f, i, "by"))
            i += 1;
        else if (find_is(f, i, "store") && i + 1 < f->argc)
            store = i + 1;
    }
    if (store) key_add(f, store, KS_OW | KS_UPDATE);
}

/* migrateGetKeys: argv[3], or every argument after KEYS (none when argv[3] is not ""). */
static void getkeys_migrate(struct find *f)
{
    int first = 3, num = 1;
    for (int i = 6; f->argc > 6 && i < f->argc; i++) {
        if (find_is(f, i, "keys")) {
            if (find_len(f, 3) > 0) {
                num = 0;
            } else {
                first = i + 1;
                num = f->argc - first;
            }
            break;
        }
        if (find_is(f, i, "auth"))
            i += 1;
        else if (find_is(f, i, "auth2"))
            i += 2;
    }
    for (int i = 0; i < num; i++) key_add(f, first + i, KS_RW | KS_ACCESS | KS_DELETE);
}

/* georadiusGetKeys: argv[1], and the value of the last STORE or STOREDIST from argv[5]. */
static void getkeys_georadius(struct find *f)
{
    int stored = 0;
    for (int i = 5; i < f->argc; i++) {
        if ((find_is(f, i, "store") || find_is(f, i, "storedist")) && i + 1 < f->argc) stored = ++i;
    }
    key_add(f, 1, 0);
    if (stored) key_add(f, stored, 0);
}

/* xreadGetKeys: the first half of what follows the first STREAMS among BLOCK n, COUNT n,
 * GROUP g c, NOACK (any other word ends the options); none when that is empty or odd. */
static void getkeys_xread(struct find *f)
{
    int streams = -1;
    for (int i = 1; i < f->argc; i++) {
        if (find_is(f, i, "block") || find_is(f, i, "count")) {
            i++;
        } else if (find_is(f, i, "group")) {
            i += 2;
        } else if (find_is(f, i, "noack")) {
            continue;
        } else {
            if (find_is(f, i, "streams")) streams = i;
            break;
        }
    }
    int num = streams < 0 ? 0 : f->argc - streams - 1;
    if (num == 0 || num % 2 != 0) return;
    for (int i = streams + 1; i < f->argc - num / 2; i++) key_add(f, i, 0);
}

/* setGetKeys / bitfieldGetKeys: argv[1], its flags from the options. */
static void getkeys_set(struct find *f)
{
    uint32_t flags = KS_OW | KS_UPDATE;
    for (int i = 3; i < f->argc; i++)
        if (find_is(f, i, "get")) {
            flags = KS_RW | KS_ACCESS | KS_UPDATE;
            break;
        }
    key_add(f, 1, flags);
}

static void getkeys_bitfield(struct find *f)
{
    int readonly = 1;
    for (int i = 2; i < f->argc; i++) {
        int rem = f->argc - i - 1;
        if (find_is(f, i, "get") && rem >= 2) {
            i += 2;
        } else if ((find_is(f, i, "set") || find_is(f, i, "incrby")) && rem >= 3) {
            readonly = 0;
            break;
        } else if (find_is(f, i, "overflow") && rem >= 1) {
            i += 1;
        } else {
            readonly = 0; /* a syntax error: Redis assumes a write */
            break;
        }
    }
    key_add(f, 1, readonly ? KS_RO | KS_ACCESS : KS_RW | KS_ACCESS | KS_UPDATE);
}

/* The getkeys procedure of Redis 7.0.15's table for f->cmd; 0 when the command has none. */
static int getkeys_proc(struct find *f)
{
    static const struct {
        const char *name;
        int store_at, count_at, first_at; /* getkeys_counted's, when fn is NULL */
        void (*fn)(struct find *f);
    } procs[] = {
        {"bitfield", 0, 0, 0, getkeys_bitfield},
        {"blmpop", 0, 2, 3, NULL},
        {"bzmpop", 0, 2, 3, NULL},
        {"eval", 0, 2, 3, NULL},
        {"eval_ro", 0, 2, 3, NULL},
        {"evalsha", 0, 2, 3, NULL},
        {"evalsha_ro", 0, 2, 3, NULL},
        {"fcall", 0, 2, 3, NULL},
        {"fcall_ro", 0, 2, 3, NULL},
        {"georadius", 0, 0, 0, getkeys_georadius},
        {"georadiusbymember", 0, 0, 0, getkeys_georadius},
        {"lmpop", 0, 1, 2, NULL},
        {"migrate", 0, 0, 0, getkeys_migrate},
        {"set", 0, 0, 0, getkeys_set},
        {"sintercard", 0, 1, 2, NULL},
        {"sort", 0, 0, 0, getkeys_sort},
        {"sort_ro", 0, 0, 0, NULL}, /* the sorted key alone (below) */
        {"xread", 0, 0, 0, getkeys_xread},
        {"xreadgroup", 0, 0, 0, getkeys_xread},
        {"zdiff", 0, 1, 2, NULL},
        {"zdiffstore", 1, 2, 3, NULL},
        {"zinter", 0, 1, 2, NULL},
        {"zintercard", 0, 1, 2, NULL},
        {"zinterstore", 1, 2, 3, NULL},
        {"zmpop", 0, 1, 2, NULL},
        {"zunion", 0, 1, 2, NULL},
        {"zunionstore", 1, 2, 3, NULL},
    };
    for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
        if (strcmp(procs[i].name, f->cmd->name) != 0) continue;
        if (procs[i].fn)
            procs[i].fn(f);
        else if (procs[i].count_at)
            getkeys_counted(f, procs[i].store_at, procs[i].count_at, procs[i].first_at);
        else
            key_add(f, 1, KS_RO | KS_ACCESS); /* sortROGetKeys */
        return 1;
    }
    return 0;
}

int command_getkeys(size_t argc, const char *const *argv, const size_t *argvlen, struct key_ref *out, int max,
                    const char **error)
{
    int unknown = 0;
    const struct command_def *cmd = command_lookup(argc, argv, argvlen, &unknown);
    uint32_t all = 0, any_key = 0;
    if (!cmd || (unknown && argc >= 2)) {
        *error = "ERR Invalid command specified";
        return -1;
    }
    for (int i = 0; i < cmd->nspecs; i++) {
        all |= cmd->specs[i].flags;
        any_key |= !(cmd->specs[i].flags & KS_NOT_KEY);
    }
    if (!any_key) { /* every command of the table with a getkeys procedure has a key spec */
        *error = "ERR The command has no key arguments";
        return -1;
    }
    if (!command_arity_ok(cmd, argc)) {
        *error = "ERR Invalid number of arguments specified for command";
        return -1;
    }
    if (argc > INT_MAX / 2) {
        *error = "ERR Invalid arguments specified for command";
        return -1;
    }
    struct find f =
        {.cmd = cmd, .argc = (int)argc, .argv = argv, .argvlen = argvlen, .out = out, .max = max < 0 ? 0 : max};
    if ((all & KS_VARIABLE_FLAGS) || getkeys_spec_walk(&f) != 0) {
        f.n = 0;
        (void)getkeys_proc(&f);
    }
    if (f.n == 0 && !(cmd->flags & CMD_NO_MANDATORY_KEYS)) {
        *error = "ERR Invalid arguments specified for command";
        return -1;
    }
    return f.n;
}

/* Redis's timeout in seconds (a decimal number, as getTimeoutFromObjectOrReply reads it) as
 * ms; 0 for 0 or for what is not a finite non-negative number. */
static int64_t seconds_arg_ms(const char *s, size_t len)
{
    char buf[64];
    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (errno || *end || !isfinite(v) || v < 0 || v > 1e12) return 0;
    return (int64_t)(v * 1000.0 + 0.5);
}

int64_t command_block_timeout_ms(const struct command_def *cmd, size_t argc, const char *const *argv,
                                 const size_t *argvlen)
{
    if (argc < 2) return 0;
    size_t len1 = argvlen ? argvlen[1] : strlen(argv[1]), lenl = argvlen ? argvlen[argc - 1] : strlen(argv[argc - 1]);
    if (finder_of(cmd) == xread_find) {
        struct key_ref none[1];
        struct find f = {.cmd = cmd, .argv = argv, .argvlen = argvlen, .out = none, .max = 0};
        if (argc > INT_MAX / 2) return 0;
        f.argc = (int)argc;
        return find_run(&f) == 0 && f.blocks ? f.block_ms : 0;
    }
    if (strcmp(cmd->name, "wait") == 0) {
        long long ms;
        return argc == 3 && args_ll(argv[2], argvlen ? argvlen[2] : strlen(argv[2]), &ms) == 0 && ms > 0 ? ms : 0;
    }
    if (strcmp(cmd->name, "blmpop") == 0 || strcmp(cmd->name, "bzmpop") == 0) return seconds_arg_ms(argv[1], len1);
    return seconds_arg_ms(argv[argc - 1], lenl);
}

int command_blocks(const struct command_def *cmd, size_t argc, const char *const *argv, const size_t *argvlen)
{
    if (finder_of(cmd) == xread_find) {
        struct key_ref none[1];
        struct find f = {.cmd = cmd, .argv = argv, .argvlen = argvlen, .out = none, .max = 0};
        if (argc > INT_MAX / 2) return 0;
        f.argc = (int)argc;
        return find_run(&f) == 0 && f.blocks;
    }
    if (cmd->flags & CMD_BLOCKING) return 1;
    return cmd->nspecs == 0 && strcmp(cmd->name, "wait") == 0; /* WAIT names no key: keyed commands skip the strcmp */
}
