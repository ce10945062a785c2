/* fuzz_policy.c: libFuzzer target: policy_decide on random argv, registry and session, judged by an oracle. */
/*
 * Build and run: `make fuzz FUZZ_SECONDS=N` (clang -fsanitize=fuzzer,address,undefined over every
 * src object but main.o, in build/fuzz). The input bytes choose, in this order:
 *
 *   session   open / not authenticated / a user (owners subset, access=ro, scripts), MULTI with its
 *             instance, a WATCH pin, subscribed mode
 *   registry  conf/registry.conf (FUZZ_POLICY_REGISTRY overrides the path), or a small registry
 *             built from the input (nested prefixes, ttl=none, sliding, channels on both instances,
 *             enforce=report lines, a default line)
 *   argv      a command or subcommand of the real command table by index (sometimes with mangled
 *             case, a NUL suffix, a junk byte, or random bytes), then arguments drawn from option
 *             words (mangled the same ways), numbers, keys of registered and unregistered
 *             prefixes, repeats of earlier arguments and raw bytes
 *
 * Every argument is its own heap block of exactly its length (no NUL), so ASan sees any read past
 * an argument. The oracle re-reads argv with Redis 7.0.15's own parsing rules (strcasecmp on the
 * C string, string2ll, the last option wins; t_string.c, expire.c, geo.c, t_stream.c, sort.c,
 * db.c), written here without policy's helpers, and aborts when a plan
 *
 *   O1  forwards to an instance outside [0, ninstances) (-1 only inside MULTI for PING/ECHO/UNWATCH,
 *       COMMAND GETKEYS/GETKEYSANDFLAGS, the keyless TIME/LASTSAVE/WAIT and
 *       PUBSUB NUMSUB/SHARDNUMSUB naming no channel, whose answers do not depend on the instance, or
 *       FLOW_UNSUBSCRIBE with all_instances), or names one in key_part's parts;
 *   O2  forwards a key (or channel, or KEYS/SCAN pattern) that matches no namespace, lives on another
 *       instance than the plan's (key_part's parts for split plans, the transaction's inside MULTI), or
 *       belongs to an owner the user lacks (SORT BY/GET patterns included); or forwards a keyless
 *       command that is not routed by pattern, channel or transaction (but TIME, LASTSAVE, DBSIZE, WAIT);
 *   O3  leaves a written key of a ttl=D namespace without a TTL rule (an EX/PX append, a PEXPIRE fix
 *       of that argument, or the command's own TTL), lets a client TTL pass max-ttl, a RENAME/COPY
 *       carry a TTL past the destination's max-ttl uncapped, or PERSISTs a ttl=D key;
 *   O4  puts a command that blocks in Redis (CMD_BLOCKING, WAIT, XREAD/XREADGROUP whose option walk
 *       meets BLOCK) on the shared connection;
 *   O5  writes outside database 0 (COPY ... DB n), forwards what only an operator may run, a write
 *       for an access=ro user, a script without scripts=yes, anything before AUTH, or a non-pub/sub
 *       command in subscribed mode;
 *   O6  differs when decided twice (policy_decide is pure);
 *   O8  (issue 20) writes a key of a near-cache namespace without its invalidation: an XADD of that
 *       argument to that namespace's stream (plan->inval), wrapped in keygate's MULTI/EXEC with the
 *       write unless the command runs in the client's MULTI, blocks, or holds a WATCH pin there.
 *       Fuzzed registries give some namespace lines near-cache=1m and always carry keygate-owned
 *       lines on both instances.
 *
 * Issue 13: a name matching no prefix belongs to the default line when there is one (and the plan
 * must count it as unregistered); a pattern left to the default line must reach no namespace. A key
 * of an enforce=report line may live on another instance or belong to another owner, and is never
 * rewritten (no append, no fix, no GETEX), its client TTL never capped; but the plan must carry the
 * report event enforcement would have given it (would-refuse CROSSINSTANCE / NOPERM / max-ttl /
 * PERSIST, would-inject-ttl): O7.
 *
 * plan_release is called for every plan; LeakSanitizer reports what policy did not free.
 * FUZZ_POLICY_REPORT=1: print each violation once per (oracle, command) and go on instead of
 * aborting (a survey; run with UBSAN_OPTIONS=halt_on_error=0 to see sanitizer reports the same way).
 * FUZZ_POLICY_TRACE=1: print every decoded input and its plan (to read a seed or a crash file).
 */
#include "commands.h"
#include "config.h"
#include "policy.h"
#include "registry.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_ARGS 18
#define NOW_MS 1700000000000LL
#define NINST 2

/* ---------------------------------------------------------------- input */

struct in {
    const uint8_t *p;
    size_t n;
};

static unsigned in_u8(struct in *in)
{
    if (in->n == 0) return 0;
    in->n--;
    return *in->p++;
}

static unsigned in_u16(struct in *in)
{
    unsigned lo = in_u8(in);
    return lo | in_u8(in) << 8;
}

/* ---------------------------------------------------------------- fixed state */

static const char *const instance_names[NINST] = {"durable", "cache"};
static struct config cfg;
static struct registry *repo_reg;

/* Every command and subcommand of the table, as (def, argv[0], argv[1] or NULL). */
struct cmd_pick {
    const struct command_def *def;
    char name[64], sub[64];
};
static struct cmd_pick *picks;
static size_t npicks;

static const char *const words[] = {
    "STORE",      "STOREDIST", "EX",      "PX",         "EXAT",       "PXAT",
    "KEEPTTL",    "PERSIST",   "NX",      "XX",         "GT",         "LT",
    "GET",        "BLOCK",     "STREAMS", "GROUP",      "NOACK",      "COUNT",
    "DB",         "REPLACE",   "KEYS",    "LIMIT",      "BY",         "ASC",
    "DESC",       "ALPHA",     "MATCH",   "TYPE",       "WITHDIST",   "WITHCOORD",
    "WITHHASH",   "ANY",       "km",      "m",          "WEIGHTS",    "AGGREGATE",
    "LEFT",       "RIGHT",     "MIN",     "MAX",        "WITHSCORES", "FROMMEMBER",
    "FROMLONLAT", "BYRADIUS",  "BYBOX",   "AUTH",       "AUTH2",      "COPY",
    "IDLE",       "JUSTID",    "MAXLEN",  "NOMKSTREAM", "INCR",       "CH",
    "ABSTTL",     "SETNAME",   "$",       ">",          "*",          "#",
    "f",          "v",         "0-0",     "ENCODING",   "GETNAME",    "return redis.call('SET',KEYS[1],'1')",
};
static const char *const numbers[] = {
    "0",
    "1",
    "2",
    "3",
    "-1",
    "01",
    "-0",
    "+1",
    " 1",
    "10",
    "3600",
    "99999999",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854776",
    "1700000000",
    "1700000003600",
    "1700000000000",
    "1800000000000",
    "0.5",
    "16",
    "4",
};
/* Keys no namespace of conf/registry.conf holds (some are near misses). */
static const char *const stray_keys[] = {
    "nope:evil", "", "evil", "CACHE:x", "q", "cach", "*", "cache", "x:cache:", "pus", "dedup:",
};
static const char *const key_suffixes[] = {"", "x", "a:b", "*", "?x", "[a]", "\\*", "listener"};

/* Pieces of a fuzzed registry. */
static const char *const gen_prefixes[] = {
    "a:", "a:b:", "a", "b:", "q:", "cache:", "cache:x", "push:", "ab", "x", "a:b:c"};
static const char *const gen_ttls[] = {"none", "1s", "10m", "1h", "7d"};
static const char *const gen_max[] = {"", " max-ttl=1h", " max-ttl=7d"};
static const char *const gen_owners[] = {"o1", "o2", "o3"};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static int report_mode, trace_mode;

static struct registry *load_registry_text(const char *text, size_t len)
{
    int fd = memfd_create("fuzz-registry", 0);
    char path[64];
    struct diag errs = {0};
    struct registry *r = NULL;
    if (fd < 0) abort();
    if (write(fd, text, len) != (ssize_t)len) abort();
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    r = registry_load(path, instance_names, NINST, &errs);
    diag_free(&errs);
    close(fd);
    return r;
}

static void add_pick(const struct command_def *def)
{
    struct cmd_pick *p = &picks[npicks++];
    const char *bar = strchr(def->name, '|');
    p->def = def;
    if (bar) {
        snprintf(p->name, sizeof(p->name), "%.*s", (int)(bar - def->name), def->name);
        snprintf(p->sub, sizeof(p->sub), "%s", bar + 1);
    } else {
        snprintf(p->name, sizeof(p->name), "%s", def->name);
        p->sub[0] = '\0';
    }
}

static void init_once(void)
{
    static int done;
    if (done) return;
    done = 1;
    const char *path = getenv("FUZZ_POLICY_REGISTRY");
    FILE *f = fopen(path ? path : "conf/registry.conf", "rb");
    static char text[65536];
    size_t len;
    if (!f) {
        fprintf(stderr, "fuzz_policy: cannot open %s (run from the repository root)\n",
                path ? path : "conf/registry.conf");
        abort();
    }
    len = fread(text, 1, sizeof(text), f);
    fclose(f);
    repo_reg = load_registry_text(text, len);
    if (!repo_reg) {
        fprintf(stderr, "fuzz_policy: the registry does not load\n");
        abort();
    }
    cfg.ninstances = NINST;
    cfg.instance_names[0] = instance_names[0];
    cfg.instance_names[1] = instance_names[1];
    cfg.registry = repo_reg;

    size_t total = 0;
    for (size_t i = 0; i < command_table_len; i++) total += 1 + (size_t)command_table[i].nsubcommands;
    picks = calloc(total, sizeof(*picks));
    if (!picks) abort();
    for (size_t i = 0; i < command_table_len; i++) {
        add_pick(&command_table[i]);
        for (int j = 0; j < command_table[i].nsubcommands; j++) add_pick(&command_table[i].subcommands[j]);
    }
    report_mode = getenv("FUZZ_POLICY_REPORT") != NULL;
    trace_mode = getenv("FUZZ_POLICY_TRACE") != NULL;
}

static const char *fuzzed_text; /* the text of the last fuzzed registry, for violation reports */

/* A registry built from the input, or the repository's when it does not load. One is cached. */
static struct registry *fuzzed_registry(struct in *in)
{
    static char last[1025];
    static size_t last_len;
    static struct registry *last_reg;
    char text[1024];
    size_t len = 0;
    unsigned n = 1 + in_u8(in) % 6;
    /* the near cache's streams live in a keygate-owned namespace of each instance */
    len = (size_t)snprintf(text, sizeof(text),
                           "namespace ~kg: instance=%s ttl=none owner=keygate\n"
                           "namespace ~kc: instance=%s ttl=none owner=keygate\n",
                           instance_names[0], instance_names[1]);
    for (unsigned i = 0; i < n; i++) {
        unsigned a = in_u8(in), b = in_u8(in);
        int channel = (a & 7) == 7;
        const char *prefix = gen_prefixes[(a >> 3) % NELEM(gen_prefixes)];
        const char *inst = instance_names[b & 1];
        const char *owner = gen_owners[(b >> 1) % NELEM(gen_owners)];
        int w;
        const char *report = ((b >> 3) & 7) >= 5 ? " enforce=report" : ""; /* ttl's spare bit values */
        if (channel)
            w = snprintf(text + len, sizeof(text) - len, "channel %s instance=%s owner=%s%s\n", prefix, inst, owner,
                         report);
        else if ((a & 7) == 6) /* at most one: a second one makes the registry not load */
            w = snprintf(text + len, sizeof(text) - len, "default instance=%s ttl=%s%s%s owner=%s%s\n", inst,
                         gen_ttls[(b >> 3) % NELEM(gen_ttls)], gen_max[(b >> 6) % NELEM(gen_max)],
                         (a & 0x80) ? " sliding" : "", owner, report);
        else
            w = snprintf(text + len, sizeof(text) - len, "namespace %s instance=%s ttl=%s%s%s owner=%s%s\n", prefix,
                         inst, gen_ttls[(b >> 3) % NELEM(gen_ttls)], gen_max[(b >> 6) % NELEM(gen_max)],
                         (a & 0x80)   ? " sliding"
                         : (a & 0x40) ? " near-cache=1m"
                                      : "",
                         owner, report);
        if (w < 0 || (size_t)w >= sizeof(text) - len) break;
        len += (size_t)w;
    }
    fuzzed_text = last;
    if (last_reg && len == last_len && memcmp(text, last, len) == 0) return last_reg;
    registry_free(last_reg);
    last_reg = load_registry_text(text, len);
    memcpy(last, text, len);
    last[len] = '\0';
    last_len = len;
    return last_reg ? last_reg : repo_reg;
}

/* ---------------------------------------------------------------- argv */

struct args {
    size_t argc;
    char *argv[MAX_ARGS];
    size_t len[MAX_ARGS];
};

static void arg_set(struct args *a, const void *s, size_t len)
{
    char *copy = malloc(len ? len : 1);
    if (!copy) abort();
    memcpy(copy, s, len);
    a->argv[a->argc] = copy;
    a->len[a->argc] = len;
    a->argc++;
}

/* A word in some spelling: as is, lower, mixed case, NUL suffix (+ junk), or a junk byte appended. */
static void arg_word(struct args *a, struct in *in, const char *word, unsigned how)
{
    char buf[160];
    size_t n = strlen(word);
    if (n > sizeof(buf) - 3) n = sizeof(buf) - 3;
    memcpy(buf, word, n);
    unsigned bits = how >= 2 ? in_u8(in) : 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        int lower = how == 1 || (how >= 2 && ((bits >> (i & 7)) & 1));
        if (lower && c >= 'A' && c <= 'Z') buf[i] = (char)(c + 32);
        if (!lower && c >= 'a' && c <= 'z') buf[i] = (char)(c - 32);
    }
    if (how == 3) {
        buf[n++] = '\0';
        if (bits & 1) buf[n++] = (char)in_u8(in);
    } else if (how == 4) {
        buf[n++] = (char)in_u8(in);
    }
    arg_set(a, buf, n);
}

/* Raw bytes: a length byte (mod 48), then the bytes (the seed corpus spells exact argv this way). */
static void arg_raw(struct args *a, struct in *in)
{
    char buf[48];
    size_t n = in_u8(in) % sizeof(buf);
    for (size_t i = 0; i < n; i++) buf[i] = (char)in_u8(in);
    arg_set(a, buf, n);
}

static void arg_key(struct args *a, struct in *in, const struct registry *reg, int registered)
{
    char buf[160];
    unsigned i = in_u8(in), j = in_u8(in);
    const char *prefix =
        registered && reg->count ? reg->entries[i % reg->count].prefix : stray_keys[i % NELEM(stray_keys)];
    int n = snprintf(buf, sizeof(buf), "%s%s", prefix, key_suffixes[j % NELEM(key_suffixes)]);
    arg_set(a, buf, n < 0 ? 0 : (size_t)n >= sizeof(buf) ? sizeof(buf) - 1 : (size_t)n);
}

static void build_args(struct args *a, struct in *in, const struct registry *reg)
{
    unsigned want = 1 + in_u8(in) % (MAX_ARGS - 2);
    const struct cmd_pick *pick = &picks[in_u16(in) % npicks];
    unsigned m = in_u8(in);
    unsigned how = m % 16; /* mostly spelled plainly */
    a->argc = 0;
    if (how == 15)
        arg_raw(a, in);
    else
        arg_word(a, in, pick->name, how < 8 ? how % 3 : how < 12 ? 2 : how - 9);
    if (pick->sub[0]) arg_word(a, in, pick->sub, (m >> 4) % 8 < 5 ? (m >> 4) % 3 : (m >> 4) % 8 - 4);
    while (a->argc < want && a->argc < MAX_ARGS) {
        unsigned t = in_u8(in);
        switch (t % 10) {
        case 0:
        case 1:
        case 2:
            arg_word(a, in, words[in_u8(in) % NELEM(words)], (t >> 4) % 8 < 4 ? 0 : (t >> 4) % 8 - 3);
            break;
        case 3:
            arg_word(a, in, numbers[in_u8(in) % NELEM(numbers)], 0);
            break;
        case 4:
        case 5:
        case 6:
            arg_key(a, in, reg, 1);
            break;
        case 7:
            arg_key(a, in, reg, 0);
            break;
        case 8:
            if (a->argc > 0) {
                size_t k = in_u8(in) % a->argc;
                arg_set(a, a->argv[k], a->len[k]);
                break;
            }
            /* fall through */
        default:
            arg_raw(a, in);
            break;
        }
    }
}

/* ---------------------------------------------------------------- Redis's reading of argv */

/* Redis's strcasecmp(argv[i]->ptr, word): the argument's bytes up to its first NUL. */
static int word_is(const struct args *a, size_t i, const char *word)
{
    if (i >= a->argc) return 0;
    size_t n = strnlen(a->argv[i], a->len[i]), wn = strlen(word);
    return n == wn && strncasecmp(a->argv[i], word, n) == 0;
}

/* Redis's string2ll: the argument is exactly the canonical decimal form of a long long. */
static int redis_ll(const struct args *a, size_t i, long long *out)
{
    char buf[32], canon[32];
    if (i >= a->argc || a->len[i] == 0 || a->len[i] >= sizeof(buf)) return 0;
    memcpy(buf, a->argv[i], a->len[i]);
    buf[a->len[i]] = '\0';
    if (strlen(buf) != a->len[i]) return 0;
    int neg = buf[0] == '-';
    unsigned long long v = 0;
    for (size_t k = (size_t)neg; k < a->len[i]; k++) {
        if (buf[k] < '0' || buf[k] > '9') return 0;
        if (v > (ULLONG_MAX - 9) / 10) return 0;
        v = v * 10 + (unsigned)(buf[k] - '0');
    }
    if (neg ? v > (unsigned long long)LLONG_MAX + 1 : v > (unsigned long long)LLONG_MAX) return 0;
    long long r = !neg ? (long long)v : v > (unsigned long long)LLONG_MAX ? LLONG_MIN : -(long long)v;
    snprintf(canon, sizeof(canon), "%lld", r);
    if (strcmp(canon, buf) != 0) return 0;
    *out = r;
    return 1;
}

static int is(const struct command_def *cmd, const char *name)
{
    return strcmp(cmd->name, name) == 0;
}

struct okey {
    size_t idx;
    uint32_t flags;
};

struct oracle {
    struct okey keys[4 * MAX_ARGS];
    int nkeys;
    int redis_refuses; /* Redis's own parser answers an error: nothing runs */
    int blocks;        /* Redis would block the connection */
    int has_ttl;       /* the command sets argv[1]'s TTL itself: ttl_ms relative */
    __int128 ttl_ms;
    int persists;                   /* the command removes argv[1]'s TTL */
    int sort_stores;                /* SORT with STORE */
    size_t sort_patterns[MAX_ARGS]; /* argv indices of SORT's BY and GET patterns */
    int nsort_patterns;
    long long copy_db; /* COPY's destination database */
};

static void okey_add(struct oracle *o, size_t idx, uint32_t flags)
{
    for (int i = 0; i < o->nkeys; i++)
        if (o->keys[i].idx == idx) {
            o->keys[i].flags |= flags;
            return;
        }
    if (o->nkeys < (int)NELEM(o->keys)) o->keys[o->nkeys++] = (struct okey){idx, flags};
}

/* Redis's key-spec walk (db.c getKeysUsingKeySpecs) for one spec; an invalid spec gives nothing. */
static void spec_walk(struct oracle *o, const struct key_spec *ks, const struct args *a)
{
    long argc = (long)a->argc, first = 0, last, step;
    if (ks->flags & KS_NOT_KEY) return;
    if (ks->bs_type == BS_INDEX) {
        first = ks->bs_index;
    } else if (ks->bs_type == BS_KEYWORD) {
        long start = ks->bs_startfrom > 0 ? ks->bs_startfrom : argc + ks->bs_startfrom;
        long end = ks->bs_startfrom > 0 ? argc - 1 : 1;
        for (long i = start; i != end; i = start <= end ? i + 1 : i - 1) {
            if (i >= argc || i < 1) break;
            if (word_is(a, (size_t)i, ks->bs_keyword)) {
                first = i + 1;
                break;
            }
        }
        if (!first) return;
    } else {
        return;
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
        long long num;
        if (first + ks->fk_keynumidx >= argc || !redis_ll(a, (size_t)(first + ks->fk_keynumidx), &num) || num < 0 ||
            num > argc)
            return;
        first += ks->fk_firstkey;
        step = ks->fk_keystep;
        last = first + (long)num - 1;
    } else {
        return;
    }
    if (step < 1 || last >= argc || last < first || first >= argc || first < 1) return;
    for (long i = first; i <= last; i += step) okey_add(o, (size_t)i, ks->flags);
}

/* util.c string2d: strtod over the whole argument, no leading space, no NaN. */
static int redis_double(const struct args *a, size_t i, double *out)
{
    char buf[64], *end;
    if (i >= a->argc || a->len[i] == 0 || a->len[i] >= sizeof(buf) || isspace((unsigned char)a->argv[i][0])) return 0;
    memcpy(buf, a->argv[i], a->len[i]);
    buf[a->len[i]] = '\0';
    errno = 0;
    double d = strtod(buf, &end);
    if ((size_t)(end - buf) != a->len[i] || isnan(d) || (errno == ERANGE && (isinf(d) || d == 0))) return 0;
    *out = d;
    return 1;
}

/*
 * geo.c georadiusGeneric: GEORADIUS validates lon lat radius unit first; GEORADIUSBYMEMBER on a
 * missing key reads only the options (and then deletes the STORE key). The option loop: the last
 * STORE/STOREDIST names the written key.
 */
static void georadius_parse(struct oracle *o, const struct args *a, size_t base)
{
    size_t store = 0;
    int with = 0, any = 0, count = 0;
    double lon, lat, radius;
    if (base == 6 && (!redis_double(a, 2, &lon) || !redis_double(a, 3, &lat) || !redis_double(a, 4, &radius) ||
                      lon < -180 || lon > 180 || lat < -85.05112878 || lat > 85.05112878 || radius < 0 ||
                      !(word_is(a, 5, "m") || word_is(a, 5, "km") || word_is(a, 5, "ft") || word_is(a, 5, "mi"))))
        goto refuse;
    for (size_t i = base; i < a->argc; i++) {
        int more = i + 1 < a->argc;
        if (word_is(a, i, "WITHDIST") || word_is(a, i, "WITHHASH") || word_is(a, i, "WITHCOORD")) {
            with = 1;
        } else if (word_is(a, i, "ANY")) {
            any = 1;
        } else if (word_is(a, i, "ASC") || word_is(a, i, "DESC")) {
        } else if (word_is(a, i, "COUNT") && more) {
            long long c;
            if (!redis_ll(a, i + 1, &c) || c <= 0) goto refuse;
            count = 1;
            i++;
        } else if ((word_is(a, i, "STORE") || word_is(a, i, "STOREDIST")) && more) {
            store = ++i;
        } else {
            goto refuse;
        }
    }
    if ((store && with) || (any && !count)) goto refuse;
    okey_add(o, 1, KS_RO | KS_ACCESS);
    if (store) okey_add(o, store, KS_OW | KS_UPDATE);
    return;
refuse:
    o->redis_refuses = 1;
}

/* t_stream.c xreadCommand's option walk: the keys follow the STREAMS it stops at. */
static void xread_parse(struct oracle *o, const struct args *a, int group_cmd, uint32_t flags)
{
    int block = 0, group = 0;
    for (size_t i = 1; i < a->argc; i++) {
        int more = (int)(a->argc - i - 1);
        long long v;
        if (word_is(a, i, "BLOCK") && more) {
            if (!redis_ll(a, ++i, &v) || v < 0) goto refuse;
            block = 1;
        } else if (word_is(a, i, "COUNT") && more) {
            if (!redis_ll(a, ++i, &v)) goto refuse;
        } else if (word_is(a, i, "STREAMS") && more) {
            size_t first = i + 1, n = a->argc - first;
            if (n % 2 || group_cmd != group) goto refuse;
            for (size_t k = first; k < first + n / 2; k++) okey_add(o, k, flags);
            o->blocks = block;
            return;
        } else if (word_is(a, i, "GROUP") && more >= 2) {
            if (!group_cmd) goto refuse;
            group = 1;
            i += 2;
        } else if (word_is(a, i, "NOACK")) {
            if (!group_cmd) goto refuse;
        } else {
            goto refuse;
        }
    }
refuse:
    o->redis_refuses = 1;
}

/* sort.c sortCommandGeneric's option loop: the last STORE names the written key. */
static void sort_parse(struct oracle *o, const struct args *a, int readonly)
{
    size_t store = 0;
    for (size_t j = 2; j < a->argc; j++) {
        size_t left = a->argc - j - 1;
        long long v;
        if (word_is(a, j, "ASC") || word_is(a, j, "DESC") || word_is(a, j, "ALPHA")) {
        } else if (word_is(a, j, "LIMIT") && left >= 2) {
            if (!redis_ll(a, j + 1, &v) || !redis_ll(a, j + 2, &v)) goto refuse;
            j += 2;
        } else if (!readonly && word_is(a, j, "STORE") && left >= 1) {
            store = ++j;
        } else if ((word_is(a, j, "BY") || word_is(a, j, "GET")) && left >= 1) {
            o->sort_patterns[o->nsort_patterns++] = ++j;
        } else {
            goto refuse;
        }
    }
    okey_add(o, 1, KS_RO | KS_ACCESS);
    if (store) okey_add(o, store, KS_OW | KS_UPDATE);
    o->sort_stores = store != 0;
    return;
refuse:
    o->redis_refuses = 1;
}

/* t_string.c parseExtendedStringArgumentsOrReply + getExpireMillisecondsOrReply (SET / GETEX). */
static void set_parse(struct oracle *o, const struct args *a, int getex)
{
    enum { NX = 1, XX = 2, GET = 4, KEEPTTL = 8, PERSIST = 16, EX = 32, PX = 64, EXAT = 128, PXAT = 256 };
    unsigned f = 0;
    size_t expire = 0;
    const unsigned ttls = EX | PX | EXAT | PXAT;
    for (size_t j = getex ? 2 : 3; j < a->argc; j++) {
        int next = j + 1 < a->argc;
        if (!getex && word_is(a, j, "NX") && !(f & XX))
            f |= NX;
        else if (!getex && word_is(a, j, "XX") && !(f & NX))
            f |= XX;
        else if (!getex && word_is(a, j, "GET"))
            f |= GET;
        else if (!getex && word_is(a, j, "KEEPTTL") && !(f & (PERSIST | ttls)))
            f |= KEEPTTL;
        else if (getex && word_is(a, j, "PERSIST") && !(f & (KEEPTTL | ttls)))
            f |= PERSIST;
        else if (word_is(a, j, "EX") && next && !(f & (KEEPTTL | PERSIST | (ttls & ~EX))))
            f |= EX, expire = ++j;
        else if (word_is(a, j, "PX") && next && !(f & (KEEPTTL | PERSIST | (ttls & ~PX))))
            f |= PX, expire = ++j;
        else if (word_is(a, j, "EXAT") && next && !(f & (KEEPTTL | PERSIST | (ttls & ~EXAT))))
            f |= EXAT, expire = ++j;
        else if (word_is(a, j, "PXAT") && next && !(f & (KEEPTTL | PERSIST | (ttls & ~PXAT))))
            f |= PXAT, expire = ++j;
        else
            goto refuse;
    }
    o->persists = (f & PERSIST) != 0;
    if (expire) {
        long long v;
        if (!redis_ll(a, expire, &v) || v <= 0 || ((f & (EX | EXAT)) && v > LLONG_MAX / 1000)) goto refuse;
        __int128 ms = (__int128)v * ((f & (EX | EXAT)) ? 1000 : 1);
        if ((f & (EX | PX)) && ms > LLONG_MAX - NOW_MS) goto refuse; /* ms + mstime() overflows: refused */
        o->has_ttl = 1;
        o->ttl_ms = (f & (EX | PX)) ? ms : ms - NOW_MS;
    }
    return;
refuse:
    o->redis_refuses = 1;
}

/* expire.c expireGenericCommand: EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT key when [NX|XX|GT|LT]. */
static void expire_parse(struct oracle *o, const struct args *a, int seconds, int absolute)
{
    long long when;
    for (size_t j = 3; j < a->argc; j++)
        if (!word_is(a, j, "NX") && !word_is(a, j, "XX") && !word_is(a, j, "GT") && !word_is(a, j, "LT")) goto refuse;
    if (!redis_ll(a, 2, &when)) goto refuse;
    if (seconds && (when > LLONG_MAX / 1000 || when < LLONG_MIN / 1000)) goto refuse;
    __int128 ms = (__int128)when * (seconds ? 1000 : 1);
    if (!absolute && ms > LLONG_MAX - NOW_MS) goto refuse;
    o->has_ttl = 1;
    o->ttl_ms = absolute ? ms - NOW_MS : ms;
    return;
refuse:
    o->redis_refuses = 1;
}

/* SETEX / PSETEX key ttl value (setGenericCommand with OBJ_EX / OBJ_PX: relative to now). */
static void setex_parse(struct oracle *o, const struct args *a, int seconds)
{
    long long v;
    if (!redis_ll(a, 2, &v) || v <= 0 || (seconds && v > LLONG_MAX / 1000) ||
        (__int128)v * (seconds ? 1000 : 1) > LLONG_MAX - NOW_MS) { /* as SET EX/PX: ms + mstime() must fit */
        o->redis_refuses = 1;
        return;
    }
    o->has_ttl = 1;
    o->ttl_ms = (__int128)v * (seconds ? 1000 : 1);
}

/* db.c copyCommand's option loop: the last DB n is the destination database. */
static void copy_parse(struct oracle *o, const struct args *a)
{
    o->copy_db = 0;
    for (size_t j = 3; j < a->argc; j++) {
        long long db;
        if (word_is(a, j, "REPLACE")) continue;
        if (word_is(a, j, "DB") && j + 1 < a->argc) {
            if (!redis_ll(a, j + 1, &db) || db < 0 || db >= 16) goto refuse;
            o->copy_db = db;
            j++;
            continue;
        }
        goto refuse;
    }
    return;
refuse:
    o->redis_refuses = 1;
}

static void oracle_read(struct oracle *o, const struct command_def *cmd, const struct args *a)
{
    memset(o, 0, sizeof(*o));
    if (is(cmd, "georadius"))
        georadius_parse(o, a, 6);
    else if (is(cmd, "georadiusbymember"))
        georadius_parse(o, a, 5);
    else if (is(cmd, "xread") || is(cmd, "xreadgroup"))
        xread_parse(o, a, is(cmd, "xreadgroup"), cmd->specs[0].flags);
    else if (is(cmd, "sort") || is(cmd, "sort_ro"))
        sort_parse(o, a, is(cmd, "sort_ro"));
    else if (!is(cmd, "migrate"))
        for (int i = 0; i < cmd->nspecs; i++) spec_walk(o, &cmd->specs[i], a);
    if (is(cmd, "set"))
        set_parse(o, a, 0);
    else if (is(cmd, "getex"))
        set_parse(o, a, 1);
    else if (is(cmd, "expire"))
        expire_parse(o, a, 1, 0);
    else if (is(cmd, "pexpire"))
        expire_parse(o, a, 0, 0);
    else if (is(cmd, "expireat"))
        expire_parse(o, a, 1, 1);
    else if (is(cmd, "pexpireat"))
        expire_parse(o, a, 0, 1);
    else if (is(cmd, "setex"))
        setex_parse(o, a, 1);
    else if (is(cmd, "psetex"))
        setex_parse(o, a, 0);
    else if (is(cmd, "copy"))
        copy_parse(o, a);
    else if (is(cmd, "persist"))
        o->persists = 1;
    if (!is(cmd, "xread") && !is(cmd, "xreadgroup")) o->blocks = (cmd->flags & CMD_BLOCKING) || is(cmd, "wait");
}

/* ---------------------------------------------------------------- verdicts */

static const struct args *cur_args;
static const struct session *cur_session;
static const struct plan *cur_plan;
static const struct command_def *cur_cmd;
static const struct registry *cur_reg;

static void print_arg(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c >= 32 && c < 127)
            fputc(c, f);
        else
            fprintf(f, "\\x%02x", c);
    }
    fputc('"', f);
}

/* The decoded input and its plan, as a violation report (and FUZZ_POLICY_TRACE) shows them. */
static void print_case(FILE *f)
{
    const struct args *a = cur_args;
    const struct session *s = cur_session;
    const struct plan *p = cur_plan;
    fprintf(f, "  argv:");
    for (size_t i = 0; i < a->argc; i++) {
        fputc(' ', f);
        print_arg(f, a->argv[i], a->len[i]);
    }
    fprintf(f, "\n  session: authenticated=%d user=%s mode=%d multi_instance=%d watch_instance=%d", s->authenticated,
            s->user ? "yes" : "none", (int)s->mode, s->multi_instance, s->watch_instance);
    if (s->user) {
        fprintf(f, " owners=");
        if (s->user->all_owners) fprintf(f, "*");
        for (size_t i = 0; i < s->user->nowners; i++) fprintf(f, "%s%s", i ? "," : "", s->user->owners[i]);
        fprintf(f, " ro=%d scripts=%d", s->user->read_only, s->user->scripts);
    }
    fprintf(f, "\n  plan: kind=%d instance=%d flow=%d all_instances=%d merge=%d nappend=%zu nfix=%zu wrap=%d", p->kind,
            p->instance, p->flow, p->all_instances, p->merge, p->nappend, p->ttl.nfix, p->ttl.wrap);
    for (size_t i = 0; i < p->ttl.nfix; i++)
        fprintf(f, " fix(argv[%u] mode %u %lldms)", p->ttl.fix[i].argi, p->ttl.fix[i].mode,
                (long long)p->ttl.fix[i].ttl_ms);
    if (p->kind == PLAN_ERROR) fprintf(f, " error=\"%s\"", p->error);
    fprintf(f, "\n");
    if (cur_reg != repo_reg) fprintf(f, "  registry (fuzzed):\n%s", fuzzed_text);
}

static void violation(const char *oracle, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(const char *oracle, const char *fmt, ...)
{
    static char seen[512][80];
    static size_t nseen;
    if (report_mode) {
        char key[80];
        snprintf(key, sizeof(key), "%s %p %s", oracle, (const void *)fmt, cur_cmd ? cur_cmd->name : "?");
        for (size_t i = 0; i < nseen; i++)
            if (strcmp(seen[i], key) == 0) return;
        if (nseen < NELEM(seen)) snprintf(seen[nseen++], sizeof(seen[0]), "%s", key);
    }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_policy: %s violated: ", oracle);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    print_case(stderr);
    if (!report_mode) abort();
}

/* The oracle's own longest-prefix match over the registry's entries. */
static const struct namespace_entry *ns_of(const struct registry *reg, enum ns_kind kind, const char *s, size_t len)
{
    const struct namespace_entry *best = NULL;
    for (size_t i = 0; i < reg->count; i++) {
        const struct namespace_entry *e = &reg->entries[i];
        if (e->kind != kind || e->prefix_len > len || memcmp(e->prefix, s, e->prefix_len) != 0) continue;
        if (!best || e->prefix_len > best->prefix_len) best = e;
    }
    return best ? best : reg->dflt; /* issue 13: the default line takes what matches no prefix */
}

static int owner_ok(const struct session *s, const struct namespace_entry *ns);

/* Does the plan carry report event (ns, reason)? */
static int has_event(const struct plan *p, const struct namespace_entry *ns, enum stats_report_reason reason)
{
    for (uint32_t i = 0; i < p->report.nevents; i++)
        if (p->report.events[i].index == ns->index && p->report.events[i].reason == reason) return 1;
    return p->report.nevents == PLAN_REPORT_MAX; /* full: later pairs are not recorded */
}

/* A name of the plan in namespace ns: where it lives and whose it is, enforced or reported. */
static void check_placement(const struct session *s, const struct plan *p, const struct namespace_entry *ns, int inst,
                            const char *what, size_t idx)
{
    if (ns->is_default && p->report.unregistered == 0)
        violation("O7", "%s argv[%zu] taken by the default line is not counted as unregistered", what, idx);
    if (ns->instance != inst && !p->all_instances) {
        if (!registry_reports(ns))
            violation("O2", "%s argv[%zu] lives on instance %d, the plan sends it to %d", what, idx, ns->instance,
                      inst);
        else if (!has_event(p, ns, STATS_REPORT_CROSSINSTANCE))
            violation("O7",
                      "%s argv[%zu] of report namespace '%s' on another instance without would-refuse "
                      "CROSSINSTANCE",
                      what, idx, ns->prefix);
    }
    if (!owner_ok(s, ns)) {
        if (!registry_reports(ns))
            violation("O2", "%s argv[%zu] belongs to owner %s", what, idx, ns->owner);
        else if (!has_event(p, ns, STATS_REPORT_NOPERM))
            violation("O7", "%s argv[%zu] of report namespace '%s' of owner %s without would-refuse NOPERM", what, idx,
                      ns->prefix, ns->owner);
    }
}

static int owner_ok(const struct session *s, const struct namespace_entry *ns)
{
    if (!s->user || s->user->all_owners) return 1;
    for (size_t i = 0; i < s->user->nowners; i++)
        if (strcmp(s->user->owners[i], ns->owner) == 0) return 1;
    return 0;
}

/* Bytes of a glob before its first special character. */
static size_t glob_literal(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && s[i] != '*' && s[i] != '?' && s[i] != '[' && s[i] != '\\') i++;
    return i;
}

/* A glob's matches lie in the literal's namespace or in nested ones that start with the literal. */
static void check_glob(const struct registry *reg, const struct session *s, const struct plan *p, enum ns_kind kind,
                       const char *pat, size_t len, const char *what)
{
    size_t lit = glob_literal(pat, len);
    const struct namespace_entry *ns = ns_of(reg, kind, pat, lit);
    if (!ns) {
        violation("O2", "%s pattern's literal prefix matches no namespace", what);
        return;
    }
    if (ns->is_default)
        for (size_t i = 0; i < reg->count; i++) {
            const struct namespace_entry *e = &reg->entries[i];
            if (e->kind == kind && e->prefix_len >= lit && memcmp(e->prefix, pat, lit) == 0)
                violation("O2", "%s pattern left to the default line reaches namespace '%s'", what, e->prefix);
        }
    if (p->instance != ns->instance && !p->all_instances && !registry_reports(ns))
        violation("O2", "%s pattern's namespace '%s' is on instance %d, the plan's is %d", what, ns->prefix,
                  ns->instance, p->instance);
    if (!owner_ok(s, ns) && !registry_reports(ns))
        violation("O2", "%s pattern's namespace '%s' belongs to owner %s", what, ns->prefix, ns->owner);
    for (size_t i = 0; i < reg->count; i++) {
        const struct namespace_entry *e = &reg->entries[i];
        if (e->kind != kind || e == ns || e->prefix_len <= lit || memcmp(e->prefix, pat, lit) != 0) continue;
        if (!owner_ok(s, e))
            violation("O2", "%s pattern reaches namespace '%s' of owner %s", what, e->prefix, e->owner);
    }
}

static void check_channel(const struct registry *reg, const struct session *s, const struct plan *p,
                          const struct args *a, size_t i)
{
    const struct namespace_entry *ns = ns_of(reg, NS_CHANNEL, a->argv[i], a->len[i]);
    if (!ns) {
        violation("O2", "channel argv[%zu] matches no channel namespace", i);
        return;
    }
    check_placement(s, p, ns, p->instance, "channel", i);
}

/* Pub/sub commands: every channel (or pattern) on the plan's instance and the user's. 1 if cmd is one. */
static int check_pubsub(const struct registry *reg, const struct session *s, const struct plan *p,
                        const struct command_def *cmd, const struct args *a)
{
    if (is(cmd, "subscribe") || is(cmd, "ssubscribe") || is(cmd, "unsubscribe") || is(cmd, "sunsubscribe")) {
        for (size_t i = 1; i < a->argc; i++) check_channel(reg, s, p, a, i);
    } else if (is(cmd, "publish") || is(cmd, "spublish")) {
        check_channel(reg, s, p, a, 1);
    } else if (is(cmd, "pubsub|numsub") || is(cmd, "pubsub|shardnumsub")) {
        for (size_t i = 2; i < a->argc; i++) check_channel(reg, s, p, a, i);
    } else if (is(cmd, "psubscribe") || is(cmd, "punsubscribe")) {
        for (size_t i = 1; i < a->argc; i++) check_glob(reg, s, p, NS_CHANNEL, a->argv[i], a->len[i], "channel");
    } else if (is(cmd, "pubsub|channels") || is(cmd, "pubsub|shardchannels") || is(cmd, "pubsub|numpat")) {
        if (a->argc > 2) {
            check_glob(reg, s, p, NS_CHANNEL, a->argv[2], a->len[2], "channel");
        } else {
            /* no pattern: Redis answers about every channel of the instance */
            for (size_t i = 0; i < reg->count; i++) {
                const struct namespace_entry *e = &reg->entries[i];
                if (e->kind == NS_CHANNEL && e->instance == p->instance && !owner_ok(s, e))
                    violation("O2", "'%s' without a pattern shows channel namespace '%s' of owner %s", cmd->name,
                              e->prefix, e->owner);
            }
        }
    } else {
        return 0;
    }
    return 1;
}

/* KEYS p / SCAN c [MATCH p] (scanGenericCommand: the last MATCH wins). 1 if cmd is one. */
static int check_pattern(const struct registry *reg, const struct session *s, const struct plan *p,
                         const struct command_def *cmd, const struct args *a)
{
    if (is(cmd, "keys")) {
        check_glob(reg, s, p, NS_KEY, a->argv[1], a->len[1], "KEYS");
        return 1;
    }
    if (!is(cmd, "scan")) return 0;
    size_t pat = 0;
    for (size_t i = 2; i < a->argc; i += 2) {
        long long v;
        if (i + 1 >= a->argc) return 1; /* Redis: syntax error */
        if (word_is(a, i, "MATCH"))
            pat = i + 1;
        else if (word_is(a, i, "COUNT")) {
            if (!redis_ll(a, i + 1, &v) || v < 1) return 1;
        } else if (!word_is(a, i, "TYPE"))
            return 1;
    }
    if (!pat)
        violation("O2", "SCAN without MATCH forwarded: it lists every namespace");
    else
        check_glob(reg, s, p, NS_KEY, a->argv[pat], a->len[pat], "SCAN MATCH");
    return 1;
}

static int is_any(const struct command_def *cmd, const char *const *names)
{
    for (size_t i = 0; names[i]; i++) {
        size_t n = strlen(names[i]);
        if (strcmp(cmd->name, names[i]) == 0) return 1;
        if (names[i][n - 1] == '|' && strncmp(cmd->name, names[i], n) == 0) return 1;
    }
    return 0;
}

/* Never forwarded whatever policy's tables say ("x|" covers every subcommand of x). */
static const char *const operator_only[] = {
    "flushall",
    "flushdb",
    "move",
    "swapdb",
    "select",
    "migrate",
    "restore",
    "restore-asking",
    "dump",
    "randomkey",
    "config|",
    "debug",
    "shutdown",
    "monitor",
    "sync",
    "psync",
    "replicaof",
    "slaveof",
    "acl|",
    "module|",
    "client|kill",
    "client|pause",
    "client|reply",
    "script|flush",
    "script|kill",
    "function|flush",
    "function|delete",
    "function|load",
    "function|restore",
    "bgsave",
    "save",
    "bgrewriteaof",
    "failover",
    "cluster|",
    NULL,
};

/*
 * SORT's BY/GET patterns (sort.c lookupKeyByPattern): "#" is the element; a pattern without '*' in
 * its C string reads nothing; otherwise every key read starts with the bytes before the '*', so it
 * lies in that literal's namespace or in a nested one: on the plan's instance all of those must be
 * the user's.
 */
static void check_sort_patterns(const struct registry *reg, const struct session *s, const struct plan *p,
                                const struct args *a, const struct oracle *o)
{
    for (int i = 0; i < o->nsort_patterns; i++) {
        size_t idx = o->sort_patterns[i], n = strnlen(a->argv[idx], a->len[idx]);
        const char *star = memchr(a->argv[idx], '*', n);
        if (!star || (n == 1 && a->argv[idx][0] == '#')) continue;
        size_t lit = (size_t)(star - a->argv[idx]);
        const struct namespace_entry *home = ns_of(reg, NS_KEY, a->argv[idx], lit);
        for (size_t k = 0; k < reg->count; k++) {
            const struct namespace_entry *e = &reg->entries[k];
            if (e->kind != NS_KEY || e->instance != p->instance) continue;
            if (e != home && (e->prefix_len <= lit || memcmp(e->prefix, a->argv[idx], lit) != 0)) continue;
            if (!owner_ok(s, e))
                violation("O2", "SORT pattern argv[%zu] reads namespace '%s' of owner %s", idx, e->prefix, e->owner);
        }
    }
}

static const char *const keyless_ok[] = {
    "ping",
    "echo",
    "unwatch",
    "keys",
    "scan",
    "script|load",
    "script|exists",
    "subscribe",
    "ssubscribe",
    "psubscribe",
    "unsubscribe",
    "sunsubscribe",
    "punsubscribe",
    "publish",
    "spublish",
    "pubsub|",
    "time",
    "lastsave",
    "dbsize",
    "wait",
    "command|getkeys",
    "command|getkeysandflags", /* queued in MULTI: it touches no key (issue 19) */
    NULL,
};

static const char *const pubsub_mode_ok[] = {
    "subscribe", "ssubscribe", "psubscribe", "unsubscribe", "sunsubscribe", "punsubscribe", "ping", NULL,
};

static int has_fix(const struct plan *p, size_t idx, int capped)
{
    for (size_t i = 0; i < p->ttl.nfix; i++) {
        const struct ttl_fix *f = &p->ttl.fix[i];
        if (f->argi != idx || f->ttl_ms <= 0) continue;
        if (capped ? f->mode == TTL_FIX_CAP : f->mode == TTL_FIX_NX || f->mode == TTL_FIX_RESET) return 1;
    }
    return 0;
}

/* SET k v ... EX D / PX D appended by keygate. */
static int appends_ttl(const struct plan *p)
{
    char num[24];
    long long v;
    if (p->nappend < 2 || p->append_len[0] != 2 || p->append_len[1] == 0 || p->append_len[1] >= sizeof(num)) return 0;
    if (strncasecmp(p->append[0], "EX", 2) != 0 && strncasecmp(p->append[0], "PX", 2) != 0) return 0;
    memcpy(num, p->append[1], p->append_len[1]);
    num[p->append_len[1]] = '\0';
    char *end;
    v = strtoll(num, &end, 10);
    return *end == '\0' && v > 0;
}

static void check_ttl(const struct registry *reg, const struct plan *p, const struct command_def *cmd,
                      const struct args *a, const struct oracle *o)
{
    if (o->redis_refuses) return;
    const struct namespace_entry *first = a->argc > 1 ? ns_of(reg, NS_KEY, a->argv[1], a->len[1]) : NULL;
    int own_first = o->has_ttl && first;
    int first_reports = first && registry_reports(first) && o->nkeys > 0 && o->keys[0].idx == 1;
    if (first_reports && (appends_ttl(p) || p->ttl.getex))
        violation("O7", "a command of report namespace '%s' was rewritten", first->prefix);
    if (own_first && first->max_ttl_ms > 0 && o->ttl_ms > first->max_ttl_ms && !has_fix(p, 1, 1)) {
        if (!first_reports)
            violation("O3", "the client's TTL of %lld ms passes max-ttl %lld ms of '%s'", (long long)o->ttl_ms,
                      (long long)first->max_ttl_ms, first->prefix);
        else if (!has_event(p, first, STATS_REPORT_MAXTTL))
            violation("O7", "a TTL above max-ttl of report namespace '%s' without would-refuse max-ttl", first->prefix);
    }
    if (o->persists && first && first->ttl_ms > 0) {
        if (!first_reports)
            violation("O3", "PERSIST of a key in ttl namespace '%s'", first->prefix);
        else if (!has_event(p, first, STATS_REPORT_PERSIST))
            violation("O7", "PERSIST in report namespace '%s' without would-refuse PERSIST", first->prefix);
    }
    int no_create = is(cmd, "getex") || is(cmd, "persist") || is(cmd, "expire") || is(cmd, "pexpire") ||
                    is(cmd, "expireat") || is(cmd, "pexpireat");
    /* a key is written when a write command (or a script, which Redis does not flag) names it RW/OW, not RM */
    int writes = (cmd->flags & CMD_WRITE) || is(cmd, "eval") || is(cmd, "evalsha") || is(cmd, "fcall");
    for (int i = 0; i < o->nkeys && writes; i++) {
        size_t idx = o->keys[i].idx;
        uint32_t fl = o->keys[i].flags;
        const struct namespace_entry *ns = ns_of(reg, NS_KEY, a->argv[idx], a->len[idx]);
        if (ns && registry_reports(ns) && (has_fix(p, idx, 0) || has_fix(p, idx, 1)))
            violation("O7", "key argv[%zu] of report namespace '%s' was given a TTL fix", idx, ns->prefix);
        if (ns && registry_reports(ns)) {
            int wants =
                ns->ttl_ms > 0 && !no_create && !(idx == 1 && o->has_ttl) && (fl & (KS_RW | KS_OW)) && !(fl & KS_RM);
            if (wants && !has_event(p, ns, STATS_REPORT_INJECT_TTL))
                violation("O7", "written key argv[%zu] of report namespace '%s' without would-inject-ttl", idx,
                          ns->prefix);
            continue;
        }
        if (!ns || !(fl & (KS_RW | KS_OW)) || (fl & KS_RM)) continue;
        /* RENAME / RENAMENX / COPY carry the source's TTL to the destination */
        if ((is(cmd, "rename") || is(cmd, "renamenx") || is(cmd, "copy")) && idx == 2 && ns->max_ttl_ms > 0) {
            const struct namespace_entry *src = ns_of(reg, NS_KEY, a->argv[1], a->len[1]);
            if (src && (src->max_ttl_ms == 0 || src->max_ttl_ms > ns->max_ttl_ms) && !has_fix(p, 2, 1))
                violation("O3", "'%s' may carry a TTL above max-ttl of '%s' without a cap", cmd->name, ns->prefix);
        }
        if (ns->ttl_ms <= 0 || no_create || (idx == 1 && o->has_ttl)) continue;
        if (idx == 1 && is(cmd, "set") && appends_ttl(p)) continue;
        if (has_fix(p, idx, 0)) continue;
        violation("O3", "written key argv[%zu] of ttl namespace '%s' gets no TTL rule", idx, ns->prefix);
    }
}

/* O8: every key of a near-cache namespace the command writes has its XADD, in the write's MULTI. */
static void check_near_cache(const struct registry *reg, const struct session *s, const struct plan *p,
                             const struct args *a, const struct oracle *o)
{
    int any = 0;
    for (int i = 0; i < o->nkeys; i++) {
        size_t idx = o->keys[i].idx;
        const struct namespace_entry *ns = ns_of(reg, NS_KEY, a->argv[idx], a->len[idx]);
        if (!ns || ns->near_cache_ms == 0) continue;
        any = 1;
        uint32_t k = 0;
        while (k < p->inval.n && !(p->inval.key[k].argi == idx && p->inval.key[k].ns == ns)) k++;
        if (k == p->inval.n)
            violation("O8", "written key argv[%zu] of near-cache namespace '%s' has no XADD", idx, ns->prefix);
        else if (strcmp(p->inval.key[k].ns->nc_stream, ns->nc_stream) != 0)
            violation("O8", "XADD to the wrong stream");
    }
    int wrappable = s->mode != SESSION_MULTI && p->flow != FLOW_BLOCK && s->watch_instance != p->instance;
    if (any && wrappable && !p->ttl.wrap) violation("O8", "a near-cache write and its XADD are not in one MULTI/EXEC");
}

static void check_plan(const struct registry *reg, const struct session *s, const struct command_def *cmd,
                       const struct args *a, const struct policy_request *r, const struct plan *p)
{
    struct oracle o;
    /* RESET is flagged no-auth in Redis 7.0's command table: keygate answers it before AUTH, as Redis does */
    if (p->kind == PLAN_LOCAL && !s->authenticated && !is(cmd, "auth") && !is(cmd, "hello") && !is(cmd, "ping") &&
        !is(cmd, "quit") && !is(cmd, "reset"))
        violation("O5", "answered before AUTH");
    if (p->kind == PLAN_LOCAL && p->local == LOCAL_SELECT) {
        long long db;
        if (!redis_ll(a, 1, &db) || db != 0) violation("O5", "SELECT of a database other than 0 accepted");
    }
    if (p->kind != PLAN_FORWARD) return;

    /* O1 */
    int ok = p->instance >= 0 && p->instance < NINST;
    if (p->instance == -1)
        ok = (s->mode == SESSION_MULTI &&
              (is(cmd, "ping") || is(cmd, "echo") || is(cmd, "unwatch") || is(cmd, "command|getkeys") ||
               is(cmd, "command|getkeysandflags") || is(cmd, "time") || is(cmd, "lastsave") || is(cmd, "wait") ||
               ((is(cmd, "pubsub|numsub") || is(cmd, "pubsub|shardnumsub")) && a->argc == 2))) ||
             (p->flow == FLOW_UNSUBSCRIBE && p->all_instances);
    if (!ok) violation("O1", "FORWARD to instance %d", p->instance);
    if (p->key_part)
        for (size_t i = 1; i < a->argc; i++)
            if (p->key_part[i] < -1 || p->key_part[i] >= p->nparts ||
                (p->key_part[i] >= 0 &&
                 (p->parts[p->key_part[i]].instance < 0 || p->parts[p->key_part[i]].instance >= NINST)))
                violation("O1", "key_part[%zu] = %d", i, p->key_part[i]);

    /* O5 */
    if (!s->authenticated && !is(cmd, "ping")) violation("O5", "forwarded before AUTH");
    if (s->mode == SESSION_SUBSCRIBED && !is_any(cmd, pubsub_mode_ok)) violation("O5", "forwarded in subscribed mode");
    if (is_any(cmd, operator_only)) violation("O5", "'%s' is for operators only", cmd->name);
    if ((cmd->acl & ACL_SCRIPTING) && (!s->user || !s->user->scripts))
        violation("O5", "script command for a user without scripts=yes");

    oracle_read(&o, cmd, a);
    int writes = is(cmd, "sort") ? o.sort_stores
                                 : (cmd->flags & CMD_WRITE) || is(cmd, "eval") || is(cmd, "evalsha") ||
                                       is(cmd, "fcall") || is(cmd, "publish") || is(cmd, "spublish");
    if (s->user && s->user->read_only && writes) violation("O5", "a write for an access=ro user");
    if (is(cmd, "copy") && !o.redis_refuses && o.copy_db != 0) violation("O5", "COPY into database %lld", o.copy_db);

    /* O4 */
    if (s->mode != SESSION_MULTI && o.blocks && p->flow == FLOW_SHARED)
        violation("O4", "a command that blocks on the shared connection");

    /* O2: the keys of the plan's finder and of Redis's parsers */
    struct key_ref found[4 * MAX_ARGS];
    int incomplete = 0;
    int n = command_find_keys(cmd, a->argc, r->argv, r->argvlen, found, (int)NELEM(found), &incomplete);
    for (int i = 0; i < n && i < (int)NELEM(found); i++) okey_add(&o, (size_t)found[i].index, found[i].flags);
    int want = s->multi_instance >= 0 ? s->multi_instance : s->watch_instance;
    if (s->mode == SESSION_MULTI && want >= 0 && p->instance >= 0 && p->instance != want)
        violation("O2", "inside MULTI on instance %d the plan goes to %d", want, p->instance);
    for (int i = 0; i < o.nkeys; i++) {
        size_t idx = o.keys[i].idx;
        const struct namespace_entry *ns = ns_of(reg, NS_KEY, a->argv[idx], a->len[idx]);
        int inst = p->key_part ? (p->key_part[idx] >= 0 ? p->parts[p->key_part[idx]].instance : -1) : p->instance;
        if (!ns) {
            violation("O2", "key argv[%zu] matches no namespace", idx);
            continue;
        }
        check_placement(s, p, ns, inst, "key", idx);
    }
    if ((is(cmd, "sort") || is(cmd, "sort_ro")) && !o.redis_refuses) check_sort_patterns(reg, s, p, a, &o);
    int routed = check_pubsub(reg, s, p, cmd, a) || check_pattern(reg, s, p, cmd, a);
    if (o.nkeys == 0 && !routed && !is_any(cmd, keyless_ok)) violation("O2", "a keyless '%s' forwarded", cmd->name);

    /* O3 */
    check_ttl(reg, p, cmd, a, &o);

    /* O8 */
    if (writes && !is(cmd, "publish") && !is(cmd, "spublish")) check_near_cache(reg, s, p, a, &o);
}

/* ---------------------------------------------------------------- entry */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct in in = {data, size};
    init_once();

    /* session */
    unsigned s0 = in_u8(&in), s1 = in_u8(&in), s2 = in_u8(&in), s3 = in_u8(&in);
    const struct registry *reg = (in_u8(&in) & 3) == 3 ? fuzzed_registry(&in) : repo_reg;
    cfg.registry = (struct registry *)reg;
    /* the user's owners: bit d of s2,s3 keeps the d-th distinct owner of the registry */
    const char *distinct[16], *owners[16];
    size_t ndistinct = 0, nowners = 0;
    for (size_t i = 0; i < reg->count && ndistinct < NELEM(distinct); i++) {
        size_t k = 0;
        while (k < ndistinct && strcmp(distinct[k], reg->entries[i].owner) != 0) k++;
        if (k < ndistinct) continue;
        distinct[ndistinct] = reg->entries[i].owner;
        if (((s2 | s3 << 8) >> ndistinct) & 1) owners[nowners++] = reg->entries[i].owner;
        ndistinct++;
    }
    struct user_conf user = {
        .name = "fuzzer",
        .owners = (char **)owners,
        .nowners = nowners,
        .all_owners = (s1 & 1) != 0,
        .read_only = (s1 & 2) != 0,
        .scripts = (s1 & 4) != 0,
    };
    struct session s = {0};
    switch (s0 & 3) {
    case 0:
        s.authenticated = 1;
        break; /* no user lines: open */
    case 1:
        s.authenticated = 0;
        break; /* users configured, no AUTH yet */
    default:
        s.authenticated = 1;
        s.user = &user;
        break;
    }
    /* every mode policy decides in (never BLOCKED: nothing is decided while a blocking command runs) */
    s.mode = (s0 >> 2) & 1 ? SESSION_MULTI : (s1 & 0x80) ? SESSION_SUBSCRIBED : SESSION_NORMAL;
    s.multi_instance = s.mode == SESSION_MULTI ? (int)((s0 >> 3) % 3) - 1 : -1;
    s.watch_instance = (int)((s0 >> 5) % 3) - 1;

    /* argv */
    struct args a;
    build_args(&a, &in, reg);
    struct policy_request r = {.argc = a.argc, .argv = (const char *const *)a.argv, .argvlen = a.len, .now_ms = NOW_MS};
    r.cmd = command_lookup(a.argc, r.argv, r.argvlen, &r.unknown_subcommand);

    struct plan p, again;
    policy_decide(&cfg, reg, &s, &r, &p);
    cur_args = &a;
    cur_session = &s;
    cur_plan = &p;
    cur_cmd = r.cmd;
    cur_reg = reg;
    if (trace_mode) {
        fprintf(stderr, "fuzz_policy: case\n");
        print_case(stderr);
    }
    if (r.cmd && !r.unknown_subcommand && command_arity_ok(r.cmd, a.argc))
        check_plan(reg, &s, r.cmd, &a, &r, &p);
    else if (p.kind == PLAN_FORWARD)
        violation("O1", "an unknown command or a wrong arity forwarded");

    /* O6 */
    policy_decide(&cfg, reg, &s, &r, &again);
    if (again.kind != p.kind || again.instance != p.instance || again.flow != p.flow || again.nappend != p.nappend ||
        again.ttl.nfix != p.ttl.nfix || again.ttl.wrap != p.ttl.wrap || again.merge != p.merge ||
        again.inval.n != p.inval.n || strcmp(again.error, p.error) != 0)
        violation("O6", "a second decision differs");
    plan_release(&again);
    plan_release(&p);
    for (size_t i = 0; i < a.argc; i++) free(a.argv[i]);
    return 0;
}
