/* commands.c: command lookup, arity checks and key extraction over the generated command table. */
#include "commands.h"

#include <limits.h>
#include <string.h>

/*
 * Key extraction follows Redis 7.0's key-spec walk (db.c getKeysUsingKeySpecs):
 *
 *   for each spec (KS_NOT_KEY skipped):
 *     begin_search  INDEX    first = index
 *                   KEYWORD  scan for the keyword (from startfrom forward, or from
 *                            argc+startfrom backward); not found -> spec gives no keys
 *     find_keys     RANGE    last = first+lastkey, or argc+lastkey, or with a limit
 *                            first + (argc-first)/limit - 1
 *                   KEYNUM   count = argv[first+keynumidx]; first += firstkey
 *     first/last outside argv -> -1 (Redis answers a syntax error)
 *
 * In Redis 7.0 only SORT, SORT_RO (BS/FK unknown) and MIGRATE (KEYS spec incomplete)
 * lack complete specs; they get hand-written finders below that mirror the commands'
 * own argument parsers (sort.c sortCommandGeneric, cluster.c migrateCommand).
 */

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
        if (n == '\0')
            return -1;
        if (n != c)
            return (int)n - (int)c;
    }
    return name[len] == '\0' ? 0 : 1;
}

/* 1 when s[0..len) equals word, ignoring ASCII case. */
static int arg_is(const char *s, size_t len, const char *word)
{
    if (strlen(word) != len)
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (ascii_lower((unsigned char)s[i]) != ascii_lower((unsigned char)word[i]))
            return 0;
    }
    return 1;
}

/* Binary search of a sorted def array; `skip` bytes of every name are a shared prefix. */
static const struct command_def *defs_find(const struct command_def *defs, size_t n, size_t skip,
                                           const char *s, size_t len)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = name_cmp(defs[mid].name + skip, s, len);
        if (c == 0)
            return &defs[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static const struct command_def *subcommand_find(const struct command_def *parent, const char *s,
                                                 size_t len)
{
    size_t skip = strlen(parent->name) + 1; /* "parent|" */
    return defs_find(parent->subcommands, (size_t)parent->nsubcommands, skip, s, len);
}

const struct command_def *command_lookup(size_t argc, const char *const *argv, const size_t *argvlen,
                                         int *unknown_subcommand)
{
    if (unknown_subcommand)
        *unknown_subcommand = 0;
    if (argc == 0)
        return NULL;
    const struct command_def *cmd =
        defs_find(command_table, command_table_len, 0, argv[0], arg_len(argv, argvlen, 0));
    if (!cmd || cmd->nsubcommands == 0)
        return cmd;
    const struct command_def *sub = NULL;
    if (argc >= 2)
        sub = subcommand_find(cmd, argv[1], arg_len(argv, argvlen, 1));
    if (sub)
        return sub;
    if (unknown_subcommand)
        *unknown_subcommand = 1;
    return cmd;
}

const struct command_def *command_by_name(const char *name)
{
    const char *bar = strchr(name, '|');
    size_t plen = bar ? (size_t)(bar - name) : strlen(name);
    const struct command_def *cmd = defs_find(command_table, command_table_len, 0, name, plen);
    if (!cmd || !bar)
        return cmd;
    if (cmd->nsubcommands == 0)
        return NULL;
    return subcommand_find(cmd, bar + 1, strlen(bar + 1));
}

int command_arity_ok(const struct command_def *cmd, size_t argc)
{
    if (cmd->arity >= 0)
        return argc == (size_t)cmd->arity;
    return argc >= (size_t)(-(long)cmd->arity);
}

/* Collects found keys: stores at most `max`, counts all. */
struct key_out {
    struct key_ref *out;
    int max;
    int n;
};

static void key_add(struct key_out *ko, int index, uint32_t flags)
{
    if (ko->n < ko->max) {
        ko->out[ko->n].index = index;
        ko->out[ko->n].flags = flags;
    }
    ko->n++;
}

/* Redis's string2ll for a key count: optional '-', digits, no leading zeros, fits in int. */
static int parse_count(const char *s, size_t len, long *out)
{
    size_t i = 0;
    int neg = 0;
    if (len == 0 || len > 20)
        return -1;
    if (s[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (i == len || (s[i] == '0' && len - i > 1) || (neg && s[i] == '0'))
        return -1;
    long v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (v > (INT_MAX - (s[i] - '0')) / 10)
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = neg ? -v : v;
    return 0;
}

/*
 * Where a keyword begin_search starts the keys: the argv index after the keyword,
 * or 0 when the keyword is absent. As in Redis, a forward search stops before the
 * last argument and a backward search stops before argv[1].
 */
static int keyword_first(const struct key_spec *ks, int argc, const char *const *argv,
                         const size_t *argvlen)
{
    int from = ks->bs_startfrom;
    if (from > 0) {
        for (int i = from; i < argc - 1; i++) {
            if (arg_is(argv[i], arg_len(argv, argvlen, (size_t)i), ks->bs_keyword))
                return i + 1;
        }
    } else {
        for (int i = argc + from; i > 1; i--) {
            if (i >= argc)
                break;
            if (arg_is(argv[i], arg_len(argv, argvlen, (size_t)i), ks->bs_keyword))
                return i + 1;
        }
    }
    return 0;
}

/* One key spec into ko. Returns 0, or -1 when argv cannot satisfy it (a syntax error). */
static int spec_find_keys(const struct key_spec *ks, int argc, const char *const *argv,
                          const size_t *argvlen, struct key_out *ko, int *incomplete)
{
    long first, last, step;

    if (ks->bs_type == BS_INDEX) {
        first = ks->bs_index;
    } else if (ks->bs_type == BS_KEYWORD) {
        first = keyword_first(ks, argc, argv, argvlen);
        if (first == 0)
            return 0;
    } else {
        *incomplete = 1;
        return 0;
    }

    if (ks->fk_type == FK_RANGE) {
        step = ks->fk_keystep;
        if (ks->fk_lastkey >= 0)
            last = first + ks->fk_lastkey;
        else if (ks->fk_limit == 0)
            last = argc + ks->fk_lastkey;
        else
            last = first + ((argc - first) / ks->fk_limit + ks->fk_lastkey);
    } else if (ks->fk_type == FK_KEYNUM) {
        long count;
        long idx = first + ks->fk_keynumidx;
        step = ks->fk_keystep;
        if (idx < 1 || idx >= argc)
            return -1;
        if (parse_count(argv[idx], arg_len(argv, argvlen, (size_t)idx), &count) != 0 || count < 0)
            return -1;
        first += ks->fk_firstkey;
        if (count == 0)
            return 0; /* "EVAL script 0": no keys (Redis 7.0 reaches the same via evalGetKeys) */
        last = first + (count - 1) * step;
    } else {
        *incomplete = 1;
        return 0;
    }

    if (step < 1 || first < 1 || first >= argc || last < first || last >= argc)
        return -1;
    for (long i = first; i <= last; i += step)
        key_add(ko, (int)i, ks->flags);
    if (ks->flags & KS_INCOMPLETE)
        *incomplete = 1;
    return 0;
}

/*
 * SORT / SORT_RO: the sorted key is argv[1]; SORT's STORE dest is a written key.
 * BY/GET patterns name keys only through the data, so they are not returned.
 * Walks the options exactly as sortCommandGeneric does; what it would reject is -1.
 */
static int sort_find_keys(const struct command_def *cmd, int argc, const char *const *argv,
                          const size_t *argvlen, struct key_out *ko)
{
    int readonly = (cmd->flags & CMD_READONLY) != 0;
    uint32_t flags = cmd->nspecs > 0 ? cmd->specs[0].flags : (KS_RO | KS_ACCESS);
    int store = 0;

    if (argc < 2)
        return -1;
    for (int j = 2; j < argc; j++) {
        const char *a = argv[j];
        size_t len = arg_len(argv, argvlen, (size_t)j);
        int left = argc - j - 1;
        if (arg_is(a, len, "asc") || arg_is(a, len, "desc") || arg_is(a, len, "alpha")) {
            continue;
        } else if (arg_is(a, len, "limit") && left >= 2) {
            j += 2;
        } else if (!readonly && arg_is(a, len, "store") && left >= 1) {
            store = ++j; /* the last STORE wins, as in Redis */
        } else if ((arg_is(a, len, "by") || arg_is(a, len, "get")) && left >= 1) {
            j++;
        } else {
            return -1;
        }
    }
    key_add(ko, 1, flags);
    if (store)
        key_add(ko, store, KS_OW | KS_UPDATE);
    return 0;
}

/*
 * MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw] [AUTH2 user pw] [KEYS k...]:
 * one key at argv[3], or, when argv[3] is "" and KEYS follows, every argument after KEYS.
 * Walks the options as migrateCommand does; what it would reject is -1.
 */
static int migrate_find_keys(const struct command_def *cmd, int argc, const char *const *argv,
                             const size_t *argvlen, struct key_out *ko)
{
    uint32_t flags = cmd->nspecs > 0 ? cmd->specs[0].flags : (KS_RW | KS_ACCESS | KS_DELETE);

    if (argc < 6)
        return -1;
    for (int j = 6; j < argc; j++) {
        const char *a = argv[j];
        size_t len = arg_len(argv, argvlen, (size_t)j);
        int more = argc - 1 - j;
        if (arg_is(a, len, "copy") || arg_is(a, len, "replace")) {
            continue;
        } else if (arg_is(a, len, "auth") && more >= 1) {
            j += 1;
        } else if (arg_is(a, len, "auth2") && more >= 2) {
            j += 2;
        } else if (arg_is(a, len, "keys")) {
            if (arg_len(argv, argvlen, 3) != 0)
                return -1; /* Redis: the key argument must be "" with KEYS */
            for (int k = j + 1; k < argc; k++)
                key_add(ko, k, flags);
            return 0;
        } else {
            return -1;
        }
    }
    key_add(ko, 3, flags);
    return 0;
}

int command_find_keys(const struct command_def *cmd, size_t argc, const char *const *argv,
                      const size_t *argvlen, struct key_ref *out, int max, int *incomplete)
{
    struct key_out ko = {out, max < 0 ? 0 : max, 0};
    int dummy = 0;
    int rc = 0;

    if (!incomplete)
        incomplete = &dummy;
    *incomplete = 0;
    if (argc > INT_MAX)
        return -1;

    if (strcmp(cmd->name, "sort") == 0 || strcmp(cmd->name, "sort_ro") == 0) {
        rc = sort_find_keys(cmd, (int)argc, argv, argvlen, &ko);
    } else if (strcmp(cmd->name, "migrate") == 0) {
        rc = migrate_find_keys(cmd, (int)argc, argv, argvlen, &ko);
    } else {
        for (int i = 0; i < cmd->nspecs && rc == 0; i++) {
            const struct key_spec *ks = &cmd->specs[i];
            if (ks->flags & KS_NOT_KEY)
                continue;
            rc = spec_find_keys(ks, (int)argc, argv, argvlen, &ko, incomplete);
        }
    }
    return rc < 0 ? -1 : ko.n;
}
