/* test_workload.c: the registry post-condition (harness_check_registry) proven to catch planted keys, then a seeded
 * random mixed workload through keygate that must leave no key breaking the registry. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "registry.h"

/*
 * One harness (two TLS redis-servers + keygate with the repo's conf/registry.conf) for
 * the suite (CK_NOFORK, see harness.h). Registry facts used by the detector test:
 *   q:      instance=durable ttl=none
 *   cache:  instance=cache   ttl=1h  max-ttl=7d
 */

static struct harness h;

static void setup(void)
{
    ck_assert_msg(harness_start(&h, NULL) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h);
    harness_stop(&h);
}

/* Run one command directly on a backend; the reply must not be an error. */
static void direct_ok(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "`%s`: %s", fmt, c->errstr);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "`%s`: %s", fmt, r->str);
    freeReplyObject(r);
}

/* ---- the detector: harness_check_registry fails on each kind of breaking key ---- */

static int g_child_mode; /* what the child suite's test / teardown does (run_child_suite) */

static void child_setup(void)
{
}

static void child_teardown(void)
{
    if (g_child_mode == 2) harness_check_registry(&h);
}

START_TEST(child_test)
{
    if (g_child_mode == 1) harness_check_registry(&h);
}
END_TEST

/* Run a one-test suite in a child process: mode 1 calls harness_check_registry in the
 * test, mode 2 in the suite's teardown. Its output goes to a file, read into out[0..len).
 * Returns the child's exit code, harness_run's count. */
static int run_child_suite(int mode, char *out, size_t len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/detector-child-%d.log", h.dir, mode);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!freopen(path, "w", stdout) || dup2(fileno(stdout), 2) < 0) _exit(101);
        g_child_mode = mode;
        Suite *s = suite_create("detector-child");
        TCase *tc = harness_tcase(s, mode == 1 ? "in-test" : "in-teardown", 30, child_setup, child_teardown);
        tcase_add_test(tc, child_test);
        int failed = harness_run(s);
        fflush(stdout);
        fflush(stderr);
        _exit(failed > 100 ? 100 : failed); /* _exit: the parent's atexit handlers own the harness */
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "child suite (mode %d) died", mode);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    fclose(f);
    return WEXITSTATUS(status);
}

static void expect_report_line(const char *report, const char *line)
{
    char want[512];
    snprintf(want, sizeof want, "  %s\n", line);
    ck_assert_msg(strstr(report, want) != NULL, "want the line\n%sin the report:\n%s", want, report);
}

START_TEST(test_issue10_postcondition_detector_finds_planted_keys)
{
    char report[8192];
    int n = harness_registry_violations(&h, NULL, 100, report, sizeof report);
    ck_assert_msg(n == 0, "not clean before planting (%d):\n%s", n, report);

    redisContext *d = harness_must_direct(&h, "durable"), *c = harness_must_direct(&h, "cache");
    direct_ok(d, "SET nope:planted x");                                  /* no namespace */
    direct_ok(c, "SET q:planted x");                                     /* q: lives on durable */
    direct_ok(c, "SET cache:planted:nottl v");                           /* cache: has ttl=1h */
    direct_ok(c, "SET cache:planted:long v EX 2592000");                 /* 30 d > max-ttl=7d */
    direct_ok(c, "SET %b v EX 60", "cache:planted:\x01 \\", (size_t)16); /* fine, escaped if listed */
    direct_ok(c, "SET cache:planted:ok v EX 60");                        /* fine */
    direct_ok(d, "SELECT 3");
    direct_ok(d, "SET q:planted:db3 x"); /* in db 3 */
    direct_ok(c, "SELECT 15");
    direct_ok(c, "SET %b x", "nope:\x00nul", (size_t)9); /* db 15, no namespace, binary */

    n = harness_registry_violations(&h, NULL, 100, report, sizeof report);
    ck_assert_msg(n == 6, "want 6 breaking keys, got %d:\n%s", n, report);
    expect_report_line(report, "durable db0 nope:planted: matches no namespace");
    expect_report_line(report, "cache db0 q:planted: namespace 'q:' lives on durable");
    expect_report_line(report, "cache db0 cache:planted:nottl: no TTL (namespace 'cache:' has ttl=3600000ms)");
    ck_assert_msg(strstr(report, "  cache db0 cache:planted:long: TTL ") != NULL &&
                      strstr(report, "ms above max-ttl=604800000ms of 'cache:'\n") != NULL,
                  "%s", report);
    expect_report_line(report, "durable db3 q:planted:db3: in db 3 (keygate serves db 0 only)");
    expect_report_line(report, "cache db15 nope:\\x00nul: in db 15 (keygate serves db 0 only); matches no namespace");
    ck_assert_msg(strstr(report, "cache:planted:ok") == NULL && strstr(report, "cache:planted:\\x01") == NULL,
                  "a good key listed:\n%s", report);

    /* the listing is capped, the count is not */
    n = harness_registry_violations(&h, NULL, 2, report, sizeof report);
    ck_assert_int_eq(n, 6);
    ck_assert_msg(strstr(report, "  ... and 4 more\n") != NULL, "%s", report);

    /* a planted pattern skips exactly what it matches */
    const char *const planted[] = {"nope:planted", "cache:planted:*", NULL};
    n = harness_registry_violations(&h, planted, 100, report, sizeof report);
    ck_assert_msg(n == 3, "want 3 after skipping nope:planted and cache:planted:*, got %d:\n%s", n, report);
    ck_assert_msg(strstr(report, "cache:planted") == NULL && strstr(report, "nope:planted") == NULL, "%s", report);
    expect_report_line(report, "cache db0 q:planted: namespace 'q:' lives on durable");

    /* the assertion fails a test, and a teardown (harness_run counts it) */
    static char out[16384];
    ck_assert_int_eq(run_child_suite(1, out, sizeof out), 1);
    ck_assert_msg(strstr(out, ":F:in-test:child_test:") && strstr(out, "harness_check_registry: keys that break the "
                                                                       "registry (6):\n  "),
                  "the failing test's output:\n%s", out);
    ck_assert_int_eq(run_child_suite(2, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "100%: Checks: 1, Failures: 0") &&
                      strstr(out, "POST-CONDITION FAILED in the teardown: harness_check_registry: keys that break "
                                  "the registry (6):\n  ") &&
                      strstr(out, "harness: 1 post-condition check(s) in a teardown FAILED"),
                  "the failing teardown's output:\n%s", out);
    printf("detector self-test: harness_check_registry failed a test and a teardown on the planted keys, as it must\n");

    /* delete the plants: clean again, and the assertion passes */
    direct_ok(d, "FLUSHDB");
    direct_ok(c, "FLUSHDB");
    direct_ok(d, "SELECT 0");
    direct_ok(c, "SELECT 0");
    direct_ok(d, "DEL nope:planted");
    direct_ok(c, "DEL q:planted cache:planted:nottl cache:planted:long");
    redisFree(d);
    redisFree(c);
    n = harness_registry_violations(&h, NULL, 100, report, sizeof report);
    ck_assert_msg(n == 0, "not clean after deleting the plants (%d):\n%s", n, report);
    ck_assert_msg(run_child_suite(1, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(run_child_suite(2, out, sizeof out) == 0, "%s", out);
    harness_check_registry(&h);
}
END_TEST

/* ---- the random mixed workload ----
 *
 *   seed (HARNESS_SEED or clock) -> splitmix64
 *     -> batch: single | pipeline of 2..16 | MULTI 1..8 EXEC | inline (raw bytes)
 *          -> gen(): one of 19 families, keys of every namespace of the registry (and
 *             unregistered ones), option words in random case, now and then a NUL
 *             suffix, and the bypass forms of issue 10 items 1-2 (repeated options,
 *             STORE ... STORE, "STORE\0", "DB\0", "BLOCK\0")
 *     -> every reply read (its outcome logged with the command)
 *   harness_registry_violations() == 0, else each offending key is traced back to the
 *   logged commands that named it and the bypass forms caught are summed up.
 */

#define WL_COMMANDS 12000  /* default; HARNESS_WORKLOAD_COMMANDS overrides */
#define WL_BUDGET_MS 40000 /* stop generating after this, whatever the count */
#define MAX_ARGS 40
#define ARG_CAP 96
#define BY_CHANCE "(NUL suffix, by chance)"

struct rng {
    uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static unsigned rnd(struct rng *r, unsigned n)
{
    return n ? (unsigned)(rng_next(r) % n) : 0;
}

static int chance(struct rng *r, unsigned pct)
{
    return rnd(r, 100) < pct;
}

struct command {
    int argc;
    char argv[MAX_ARGS][ARG_CAP];
    size_t len[MAX_ARGS];
    char label[96];        /* the bypass forms it carries on purpose ("" none), for the summary */
    char chance_label[80]; /* the first option word word() gave a NUL suffix by chance */
    unsigned inst_mask;    /* bit i: it names a key of a namespace on instance i (not counting evil_key) */
};

/* What was sent and what came back, for tracing an offending key to its command. */
struct logent {
    char text[240]; /* escaped argv joined by spaces (as the report escapes keys) */
    char label[96];
    char mode; /* 's'ingle, 'p'ipeline, 'm'ulti, 'i'nline */
    unsigned inst_mask;
    char outcome[40]; /* "ok" or the error's first word */
};

struct workload {
    struct rng r;
    unsigned seq; /* unique names */
    long long now_s;
    struct logent *log;
    size_t nlog, caplog;
    int hangs, reconnects;
    char outcomes[24][24];
    unsigned outcome_n[24];
};

/* namespaces of the registry keygate runs with, then unregistered prefixes (instance -1) */
struct wl_ns {
    char prefix[64];
    int instance;
};
static struct wl_ns g_ns[64];
static int g_nns, g_nreg;

static void load_namespaces(void)
{
    const char *names[2] = {h.backends[0].name, h.backends[1].name};
    struct diag errs = {0};
    struct registry *reg = registry_load(h.registry_file, names, 2, &errs);
    diag_free(&errs);
    ck_assert_msg(reg != NULL, "cannot load %s", h.registry_file);
    g_nns = 0;
    for (size_t i = 0; i < reg->count && g_nns < 48; i++) {
        if (reg->entries[i].kind != NS_KEY) continue;
        snprintf(g_ns[g_nns].prefix, sizeof g_ns[g_nns].prefix, "%s", reg->entries[i].prefix);
        g_ns[g_nns++].instance = reg->entries[i].instance;
    }
    registry_free(reg);
    g_nreg = g_nns;
    static const char *const unregistered[] = {"nope:", "push:", "dedup:", "Cache:", "q", "grace"};
    for (size_t i = 0; i < sizeof unregistered / sizeof unregistered[0]; i++) {
        snprintf(g_ns[g_nns].prefix, sizeof g_ns[g_nns].prefix, "%s", unregistered[i]);
        g_ns[g_nns++].instance = -1;
    }
}

/* ---- building a command ---- */

static void argn(struct command *c, const char *s, size_t n)
{
    ck_assert_int_lt(c->argc, MAX_ARGS);
    ck_assert_uint_lt(n, ARG_CAP);
    memcpy(c->argv[c->argc], s, n);
    c->argv[c->argc][n] = '\0';
    c->len[c->argc++] = n;
}

static void arg(struct command *c, const char *s)
{
    argn(c, s, strlen(s));
}

static void argf(struct command *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void argf(struct command *c, const char *fmt, ...)
{
    char buf[ARG_CAP];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ck_assert(n >= 0 && n < ARG_CAP);
    argn(c, buf, (size_t)n);
}

/* Name a bypass form the command carries (several are joined with " + "). */
static void label(struct command *c, const char *l)
{
    size_t n = strlen(c->label);
    snprintf(c->label + n, sizeof c->label - n, "%s%s", n ? " + " : "", l);
}

/* The command's name upper-cased into name[0..size). */
static void upper_name(const struct command *c, char *name, size_t size)
{
    size_t i = 0;
    for (; i + 1 < size && c->argc > 0 && c->argv[0][i]; i++)
        name[i] = (char)(c->argv[0][i] >= 'a' && c->argv[0][i] <= 'z' ? c->argv[0][i] - 32 : c->argv[0][i]);
    name[i] = '\0';
}

/* A word Redis matches case-insensitively, in random case now and then. */
static void mangled(struct command *c, struct rng *r, const char *w)
{
    arg(c, w);
    if (!chance(r, 20)) return;
    char *a = c->argv[c->argc - 1];
    for (char *p = a; *p; p++)
        if (chance(r, 50)) *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
}

/* An option word: mangled, and with a trailing NUL (Redis compares C strings) 3 % of the time. */
static void word(struct command *c, struct rng *r, const char *w)
{
    mangled(c, r, w);
    if (chance(r, 3)) {
        c->len[c->argc - 1]++; /* the NUL argn wrote */
        if (!c->chance_label[0]) {
            char name[20];
            upper_name(c, name, sizeof name);
            snprintf(c->chance_label, sizeof c->chance_label, "%s .. %.12s\\0 .. " BY_CHANCE, name, w);
        }
    }
}

/* The option word w with a NUL suffix, always. */
static void word_nul(struct command *c, struct rng *r, const char *w)
{
    mangled(c, r, w);
    c->len[c->argc - 1]++; /* the NUL argn wrote */
    char l[64], name[32];
    upper_name(c, name, sizeof name);
    snprintf(l, sizeof l, "%s .. %s\\0 .. (NUL suffix)", name, w);
    label(c, l);
}

static int g_batch_instance = -1; /* >= 0: a MULTI batch, whose keys keep to that instance */

/* A namespace index: mostly registered ones, 12 % unregistered (4 % in a MULTI batch). */
static int pick_ns(struct rng *r)
{
    if (g_batch_instance >= 0 && !chance(r, 4))
        for (int tries = 0; tries < 16; tries++) {
            int o = (int)rnd(r, (unsigned)g_nreg);
            if (g_ns[o].instance == g_batch_instance) return o;
        }
    return chance(r, 88) ? (int)rnd(r, (unsigned)g_nreg) : g_nreg + (int)rnd(r, (unsigned)(g_nns - g_nreg));
}

/* The namespace of a further key of a multi-key command whose first key is in ns. */
static int related_ns(struct rng *r, int ns)
{
    unsigned roll = rnd(r, 100);
    if (roll < 70) return ns;
    if ((roll < 88 || g_batch_instance >= 0) && g_ns[ns].instance >= 0) {
        for (int tries = 0; tries < 8; tries++) {
            int o = (int)rnd(r, (unsigned)g_nreg);
            if (g_ns[o].instance == g_ns[ns].instance) return o;
        }
    }
    return pick_ns(r);
}

/* A key of namespace ns for type tag t: "<prefix><t>:<0..3>", now and then the bare prefix. */
static void key(struct command *c, struct rng *r, int ns, char t)
{
    if (g_ns[ns].instance >= 0) c->inst_mask |= 1u << g_ns[ns].instance;
    if (chance(r, 3))
        arg(c, g_ns[ns].prefix);
    else
        argf(c, "%s%c:%u", g_ns[ns].prefix, t, rnd(r, 4));
}

/* The destination a bypass aims at: no namespace, the other instance, another owner's
 * key with a TTL rule, or a fresh key of a ttl= namespace (it must get a TTL). */
static void evil_key(struct workload *w, struct command *c, int ns)
{
    unsigned seq = ++w->seq;
    switch (rnd(&w->r, 4)) {
    case 0:
        argf(c, "nope:evil:%u", seq);
        break;
    case 1:
        for (int i = 0; i < g_nreg; i++)
            if (g_ns[i].instance >= 0 && g_ns[i].instance != g_ns[ns].instance) {
                argf(c, "%sevil:%u", g_ns[i].prefix, seq);
                return;
            }
        argf(c, "nope:evil:%u", seq);
        break;
    case 2:
        arg(c, "cache:mattermost:listener");
        break;
    default:
        argf(c, "%sevil:%u", g_ns[ns].prefix, seq);
        break;
    }
}

/* A TTL amount in seconds around the registry's limits (90 s, 5 m, 1 h, 1 d, 7 d). */
static long long ttl_s(struct rng *r)
{
    static const long long v[] = {1,    5,     10,    60,     89,     200,      299, 301, 3600,
                                  3601, 86400, 86401, 604800, 604801, 99999999, 0,   -5};
    return v[rnd(r, sizeof v / sizeof v[0])];
}

/* SET's / GETEX's expiry options: none, one, KEEPTTL/PERSIST, or the same option twice,
 * small then huge (issue 10 item 1: Redis keeps the last). */
static void expiry(struct workload *w, struct command *c, int getex, int repeat)
{
    struct rng *r = &w->r;
    static const char *const opts[] = {"EX", "PX", "EXAT", "PXAT"};
    unsigned roll = repeat ? 9 : rnd(r, 10);
    if (roll < 3) return;
    if (roll == 3) {
        word(c, r, getex ? "PERSIST" : "KEEPTTL");
        return;
    }
    const char *o = opts[rnd(r, 4)];
    int ms = o[0] == 'P', at = strlen(o) == 4;
    long long a = ttl_s(r), b = roll >= 8 ? 99999999 : 0;
    word(c, r, o);
    argf(c, "%lld", (at ? w->now_s : 0) * (ms ? 1000 : 1) + a * (ms ? 1000 : 1));
    if (b) {
        word(c, r, o);
        argf(c, "%lld", (at ? w->now_s : 0) * (ms ? 1000 : 1) + b * (ms ? 1000 : 1));
        char l[64];
        snprintf(l, sizeof l, "%s %s .. %s .. (repeated option)", getex ? "GETEX" : "SET", o, o);
        label(c, l);
    }
}

/* One random command of a random family into out[0], or a plain SET into out[0] and the
 * command into out[1] (out has room for 2). Returns how many. */
static int gen(struct workload *w, struct command *out)
{
    struct rng *r = &w->r;
    struct command *c = out;
    int count = 1;
    memset(c, 0, sizeof *c);
    int ns = pick_ns(r), ns2 = related_ns(r, ns);
    static const char *const cond[] = {"NX", "XX", "GT", "LT"};
    switch (rnd(r, 20)) {
    case 0: { /* SET with every option; a repeated option on a key of its own now and then (kept to the end) */
        int own = chance(r, 15);
        mangled(c, r, "SET");
        if (own) argf(c, "%ss:own:%u", g_ns[ns].prefix, ++w->seq);
        if (own && g_ns[ns].instance >= 0)
            c->inst_mask |= 1u << g_ns[ns].instance;
        else
            key(c, r, ns, 's');
        argf(c, "v%u", rnd(r, 100));
        if (!own && chance(r, 30)) word(c, r, chance(r, 50) ? "NX" : "XX");
        if (chance(r, 20)) word(c, r, "GET");
        expiry(w, c, 0, own);
        break;
    }
    case 1: { /* the other string writers */
        static const char *const cmds[] = {"SETEX",       "PSETEX",   "SETNX",  "APPEND", "INCR", "INCRBY", "DECRBY",
                                           "INCRBYFLOAT", "SETRANGE", "GETSET", "GETDEL", "MSET", "MSETNX"};
        const char *n = cmds[rnd(r, sizeof cmds / sizeof cmds[0])];
        mangled(c, r, n);
        key(c, r, ns, 's');
        if (!strcmp(n, "SETEX"))
            argf(c, "%lld", ttl_s(r));
        else if (!strcmp(n, "PSETEX"))
            argf(c, "%lld", ttl_s(r) * 1000);
        if (!strcmp(n, "INCR") || !strcmp(n, "GETDEL")) break;
        if (!strcmp(n, "SETRANGE")) argf(c, "%u", rnd(r, 20));
        if (!strcmp(n, "INCRBY") || !strcmp(n, "DECRBY"))
            argf(c, "%u", rnd(r, 9));
        else if (!strcmp(n, "INCRBYFLOAT"))
            arg(c, "1.5");
        else
            argf(c, "%u", rnd(r, 1000));
        if (n[0] == 'M')
            for (unsigned i = rnd(r, 3); i > 0; i--) {
                key(c, r, related_ns(r, ns), 's');
                argf(c, "%u", rnd(r, 1000));
            }
        break;
    }
    case 2: /* GETEX; a repeated option on a key of its own (SET just before) now and then */
        if (chance(r, 25)) {
            char own[ARG_CAP];
            snprintf(own, sizeof own, "%.60ss:own:%u", g_ns[ns].prefix, ++w->seq);
            arg(c, "SET");
            arg(c, own);
            arg(c, "v");
            c = &out[count++];
            memset(c, 0, sizeof *c);
            mangled(c, r, "GETEX");
            arg(c, own);
            if (g_ns[ns].instance >= 0) c->inst_mask |= 1u << g_ns[ns].instance;
            expiry(w, c, 1, 1);
            break;
        }
        mangled(c, r, "GETEX");
        key(c, r, ns, 's');
        expiry(w, c, 1, 0);
        break;
    case 3: { /* hashes */
        static const char *const cmds[] = {"HSET", "HSETNX", "HINCRBY", "HDEL", "HMSET"};
        const char *n = cmds[rnd(r, 5)];
        mangled(c, r, n);
        key(c, r, ns, 'h');
        argf(c, "f%u", rnd(r, 5));
        if (strcmp(n, "HDEL")) argf(c, "%u", rnd(r, 100));
        break;
    }
    case 4: { /* lists */
        static const char *const cmds[] = {"LPUSH", "RPUSH", "LPUSHX", "RPUSHX", "LINSERT",
                                           "LSET",  "LPOP",  "LTRIM",  "LREM"};
        const char *n = cmds[rnd(r, sizeof cmds / sizeof cmds[0])];
        mangled(c, r, n);
        key(c, r, ns, 'l');
        if (!strcmp(n, "LINSERT")) {
            word(c, r, chance(r, 50) ? "BEFORE" : "AFTER");
            arg(c, "1");
        } else if (!strcmp(n, "LSET") || !strcmp(n, "LREM") || !strcmp(n, "LTRIM")) {
            arg(c, "0");
        }
        if (strcmp(n, "LPOP")) argf(c, "%u", rnd(r, 50));
        break;
    }
    case 5: { /* list moves, some blocking (short timeouts) */
        static const char *const cmds[] = {"RPOPLPUSH", "LMOVE", "BLMOVE", "BRPOPLPUSH", "BLPOP", "LMPOP", "BLMPOP"};
        const char *n = cmds[rnd(r, sizeof cmds / sizeof cmds[0])];
        mangled(c, r, n);
        if (!strcmp(n, "BLMPOP")) arg(c, "0.01");
        if (n[1] == 'M' || !strcmp(n, "BLMPOP")) arg(c, "1");
        key(c, r, ns, 'l');
        if (strcmp(n, "BLPOP") && strcmp(n, "LMPOP") && strcmp(n, "BLMPOP")) key(c, r, ns2, 'l');
        if (strstr(n, "MOVE") || strstr(n, "MPOP")) word(c, r, chance(r, 50) ? "LEFT" : "RIGHT");
        if (strstr(n, "MOVE")) word(c, r, chance(r, 50) ? "LEFT" : "RIGHT");
        if (n[0] == 'B' && strcmp(n, "BLMPOP")) arg(c, "0.01");
        break;
    }
    case 6: { /* sets */
        static const char *const cmds[] = {"SADD", "SREM", "SPOP", "SMOVE", "SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"};
        const char *n = cmds[rnd(r, sizeof cmds / sizeof cmds[0])];
        mangled(c, r, n);
        key(c, r, ns, 'S');
        if (strstr(n, "STORE") || !strcmp(n, "SMOVE")) key(c, r, ns2, 'S');
        if (strstr(n, "STORE"))
            key(c, r, related_ns(r, ns), 'S');
        else if (strcmp(n, "SPOP"))
            argf(c, "%u", rnd(r, 10));
        break;
    }
    case 7: { /* zsets */
        static const char *const cmds[] = {
            "ZADD",        "ZINCRBY",          "ZREM",  "ZPOPMIN", "ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE",
            "ZRANGESTORE", "ZREMRANGEBYSCORE", "ZMPOP", "BZPOPMIN"};
        const char *n = cmds[rnd(r, sizeof cmds / sizeof cmds[0])];
        mangled(c, r, n);
        if (!strcmp(n, "ZMPOP")) arg(c, "1");
        key(c, r, ns, 'z');
        if (!strcmp(n, "ZADD")) {
            if (chance(r, 30)) word(c, r, cond[rnd(r, 4)]);
            if (chance(r, 20)) word(c, r, "CH");
            argf(c, "%u", rnd(r, 100));
            argf(c, "m%u", rnd(r, 10));
        } else if (!strcmp(n, "ZINCRBY")) {
            arg(c, "2");
            argf(c, "m%u", rnd(r, 10));
        } else if (!strcmp(n, "ZREM")) {
            argf(c, "m%u", rnd(r, 10));
        } else if (strstr(n, "STORE") && strcmp(n, "ZRANGESTORE")) {
            arg(c, "2");
            key(c, r, ns2, 'z');
            key(c, r, related_ns(r, ns), 'z');
            if (chance(r, 30) && strcmp(n, "ZDIFFSTORE")) {
                word(c, r, "AGGREGATE");
                word(c, r, chance(r, 50) ? "MAX" : "SUM");
            }
        } else if (!strcmp(n, "ZRANGESTORE")) {
            key(c, r, ns2, 'z');
            arg(c, "0");
            arg(c, "-1");
        } else if (!strcmp(n, "ZREMRANGEBYSCORE")) {
            arg(c, "0");
            arg(c, "10");
        } else if (!strcmp(n, "ZMPOP")) {
            word(c, r, "MIN");
        } else if (!strcmp(n, "BZPOPMIN")) {
            arg(c, "0.01");
        }
        break;
    }
    case 8: { /* streams */
        unsigned roll = rnd(r, 9);
        if (roll == 0) {
            mangled(c, r, "XGROUP");
            word(c, r, "CREATE");
            key(c, r, ns, 'x');
            arg(c, "g");
            arg(c, "$");
            word(c, r, "MKSTREAM");
        } else if (roll == 1) {
            mangled(c, r, "XREADGROUP");
            word(c, r, "GROUP");
            arg(c, "g");
            arg(c, "c");
            if (chance(r, 40)) {
                word(c, r, "BLOCK");
                arg(c, "5");
            }
            word(c, r, "STREAMS");
            key(c, r, ns, 'x');
            arg(c, ">");
        } else if (roll == 2) {
            mangled(c, r, "XREAD");
            if (chance(r, 50)) {
                word(c, r, "COUNT");
                arg(c, "2");
            }
            if (chance(r, 30))
                word_nul(c, r, "BLOCK"); /* issue 10 item 2 */
            else
                word(c, r, "BLOCK");
            arg(c, "5");
            word(c, r, "STREAMS");
            key(c, r, ns, 'x');
            arg(c, "$");
        } else if (roll == 3) {
            static const char *const cmds[] = {"XTRIM", "XDEL", "XSETID", "XACK"};
            const char *n = cmds[rnd(r, 4)];
            mangled(c, r, n);
            key(c, r, ns, 'x');
            if (!strcmp(n, "XTRIM")) {
                word(c, r, "MAXLEN");
                if (chance(r, 50)) arg(c, "~");
                arg(c, "10");
            } else if (!strcmp(n, "XACK")) {
                arg(c, "g");
                arg(c, "1-1");
            } else {
                arg(c, n[1] == 'D' ? "1-1" : "999999999999-0");
            }
        } else if (roll == 4) {
            mangled(c, r, chance(r, 50) ? "XAUTOCLAIM" : "XCLAIM");
            int auto_ = c->argv[0][1] == 'A' || c->argv[0][1] == 'a';
            key(c, r, ns, 'x');
            arg(c, "g");
            arg(c, "c2");
            arg(c, "0");
            arg(c, auto_ ? "0-0" : "1-1");
        } else {
            mangled(c, r, "XADD");
            key(c, r, ns, 'x');
            if (chance(r, 15)) word(c, r, "NOMKSTREAM");
            if (chance(r, 30)) {
                word(c, r, "MAXLEN");
                if (chance(r, 50)) arg(c, "~");
                arg(c, "20");
            }
            arg(c, "*");
            arg(c, "f");
            argf(c, "%u", rnd(r, 100));
        }
        break;
    }
    case 9: /* GEOADD */
        mangled(c, r, "GEOADD");
        key(c, r, ns, 'g');
        if (chance(r, 20)) word(c, r, chance(r, 50) ? "NX" : "CH");
        argf(c, "15.%u", rnd(r, 90));
        argf(c, "37.%u", rnd(r, 90));
        argf(c, "m%u", rnd(r, 8));
        break;
    case 10:
    case 11: { /* GEORADIUS / GEORADIUSBYMEMBER / GEOSEARCHSTORE with STORE / STOREDIST */
        unsigned roll = rnd(r, 3);
        if (roll == 2) {
            mangled(c, r, "GEOSEARCHSTORE");
            key(c, r, ns2, 'g');
            key(c, r, ns, 'g');
            word(c, r, "FROMLONLAT");
            arg(c, "15");
            arg(c, "37");
            word(c, r, "BYRADIUS");
            arg(c, "200");
            word(c, r, "km");
            if (chance(r, 30)) word(c, r, "STOREDIST");
            break;
        }
        mangled(c, r, roll ? "GEORADIUSBYMEMBER" : "GEORADIUS");
        key(c, r, ns, 'g');
        if (roll) {
            argf(c, "m%u", rnd(r, 8));
        } else {
            arg(c, "15");
            arg(c, "37");
        }
        arg(c, "200");
        word(c, r, "km");
        if (chance(r, 30)) {
            word(c, r, "COUNT");
            arg(c, "3");
        }
        if (chance(r, 15)) {
            word(c, r, "WITHDIST");
            break;
        }
        const char *store = chance(r, 50) ? "STORE" : "STOREDIST";
        unsigned form = rnd(r, 10);
        if (form < 3) { /* issue 10 item 1: the last STORE wins in Redis */
            word(c, r, store);
            key(c, r, ns, 'g');
            word(c, r, store);
            evil_key(w, c, ns);
            char l[64];
            snprintf(l, sizeof l, "%s %s a %s b (repeated option)", roll ? "GEORADIUSBYMEMBER" : "GEORADIUS", store,
                     store);
            label(c, l);
        } else if (form < 5) { /* issue 10 item 2 */
            word_nul(c, r, store);
            evil_key(w, c, ns);
        } else if (form < 9) {
            word(c, r, store);
            key(c, r, ns2, 'g');
        }
        break;
    }
    case 12: { /* bitmaps */
        unsigned roll = rnd(r, 3);
        if (roll == 0) {
            mangled(c, r, "SETBIT");
            key(c, r, ns, 'b');
            argf(c, "%u", rnd(r, 64));
            arg(c, "1");
        } else if (roll == 1) {
            static const char *const ops[] = {"AND", "OR", "XOR", "NOT"};
            const char *op = ops[rnd(r, 4)];
            mangled(c, r, "BITOP");
            word(c, r, op);
            key(c, r, ns2, 'b');
            key(c, r, ns, 'b');
            if (strcmp(op, "NOT")) key(c, r, related_ns(r, ns), 'b');
        } else {
            mangled(c, r, "BITFIELD");
            key(c, r, ns, 'b');
            word(c, r, "SET");
            arg(c, "u8");
            arg(c, "0");
            arg(c, "200");
            if (chance(r, 50)) {
                word(c, r, "INCRBY");
                arg(c, "u4");
                arg(c, "4");
                arg(c, "1");
            }
        }
        break;
    }
    case 13: /* hyperloglog */
        if (chance(r, 50)) {
            mangled(c, r, "PFADD");
            key(c, r, ns, 'p');
            argf(c, "e%u", rnd(r, 50));
            argf(c, "e%u", rnd(r, 50));
        } else {
            mangled(c, r, chance(r, 70) ? "PFMERGE" : "PFCOUNT");
            key(c, r, ns2, 'p');
            key(c, r, ns, 'p');
        }
        break;
    case 14: { /* COPY, with DB and "DB\0" */
        char t = "slSzxg"[rnd(r, 6)];
        mangled(c, r, "COPY");
        key(c, r, ns, t);
        key(c, r, ns2, t);
        unsigned form = rnd(r, 10);
        if (form < 2) {
            word(c, r, "DB");
            arg(c, "1");
        } else if (form < 4) { /* issue 10 item 2 */
            word_nul(c, r, "DB");
            argf(c, "%u", 1 + rnd(r, 15));
        }
        if (chance(r, 40)) word(c, r, "REPLACE");
        break;
    }
    case 15: { /* RENAME / RENAMENX */
        char t = "slSzxg"[rnd(r, 6)];
        mangled(c, r, chance(r, 60) ? "RENAME" : "RENAMENX");
        key(c, r, ns, t);
        key(c, r, ns2, t);
        break;
    }
    case 16: { /* SORT ... STORE */
        char t = "lSz"[rnd(r, 3)];
        mangled(c, r, chance(r, 85) ? "SORT" : "SORT_RO");
        key(c, r, ns, t);
        if (chance(r, 30)) {
            word(c, r, "BY");
            arg(c, "nosort");
        }
        if (chance(r, 30)) {
            word(c, r, "LIMIT");
            arg(c, "0");
            arg(c, "5");
        }
        if (chance(r, 20)) word(c, r, "ALPHA");
        unsigned form = rnd(r, 10);
        if (form < 3) { /* the last STORE wins in Redis's sort.c */
            word(c, r, "STORE");
            key(c, r, ns, 'l');
            word(c, r, "STORE");
            evil_key(w, c, ns);
            label(c, "SORT STORE a STORE b (repeated option)");
        } else if (form < 5) {
            word_nul(c, r, "STORE");
            evil_key(w, c, ns);
        } else if (form < 9) {
            word(c, r, "STORE");
            key(c, r, ns2, 'l');
        }
        break;
    }
    case 17: { /* EXPIRE family */
        static const char *const cmds[] = {"EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT", "PERSIST"};
        const char *n = cmds[rnd(r, 5)];
        char t = "slSzhxgbp"[rnd(r, 9)];
        mangled(c, r, n);
        key(c, r, ns, t);
        if (n[1] == 'E' && n[0] == 'P' && n[2] == 'R') break; /* PERSIST */
        int ms = n[0] == 'P', at = strstr(n, "AT") != NULL;
        argf(c, "%lld", ((at ? w->now_s : 0) + ttl_s(r)) * (ms ? 1000 : 1));
        if (chance(r, 25)) word(c, r, cond[rnd(r, 4)]);
        break;
    }
    case 18: { /* deletes, so keys are created again */
        char t = "slSzhxgbp"[rnd(r, 9)];
        mangled(c, r, chance(r, 50) ? "DEL" : "UNLINK");
        key(c, r, ns, t);
        break;
    }
    default: { /* reads that keep keys alive (sliding) or touch them */
        static const char *const cmds[] = {"GET", "TTL", "EXISTS", "TYPE", "LRANGE"};
        const char *n = cmds[rnd(r, 5)];
        mangled(c, r, n);
        key(c, r, ns, n[0] == 'L' ? 'l' : 's');
        if (n[0] == 'L') {
            arg(c, "0");
            arg(c, "-1");
        }
        break;
    }
    }
    return count;
}

/* ---- sending, reading, logging ---- */

/* c's argv escaped like the report escapes keys, joined by spaces, into out. */
static void command_text(const struct command *c, char *out, size_t size)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < c->argc && o + 8 < size; i++) {
        if (i) out[o++] = ' ';
        for (size_t k = 0; k < c->len[i] && o + 6 < size; k++) {
            unsigned char ch = (unsigned char)c->argv[i][k];
            if (ch > 0x20 && ch < 0x7f && ch != '\\')
                out[o++] = (char)ch;
            else
                o += (size_t)snprintf(out + o, size - o, "\\x%02x", ch);
        }
        out[o] = '\0';
    }
}

static struct logent *log_add(struct workload *w, const struct command *c, char mode)
{
    if (w->nlog == w->caplog) {
        w->caplog = w->caplog ? w->caplog * 2 : 4096;
        w->log = realloc(w->log, w->caplog * sizeof *w->log);
        ck_assert_ptr_nonnull(w->log);
    }
    struct logent *e = &w->log[w->nlog++];
    command_text(c, e->text, sizeof e->text);
    snprintf(e->label, sizeof e->label, "%s", c->label[0] ? c->label : c->chance_label);
    e->mode = mode;
    e->inst_mask = c->inst_mask;
    snprintf(e->outcome, sizeof e->outcome, "(no reply)");
    return e;
}

/* "ok", or an error's first word; counted per kind. */
static void set_outcome(struct workload *w, struct logent *e, const redisReply *r)
{
    if (r == NULL)
        snprintf(e->outcome, sizeof e->outcome, "(no reply)");
    else if (r->type != REDIS_REPLY_ERROR)
        snprintf(e->outcome, sizeof e->outcome, "ok");
    else
        snprintf(e->outcome, sizeof e->outcome, "-%.*s", (int)strcspn(r->str, " "), r->str);
    int i = 0;
    while (i < 24 && w->outcomes[i][0] && strcmp(w->outcomes[i], e->outcome)) i++;
    if (i == 24) return;
    if (!w->outcomes[i][0]) snprintf(w->outcomes[i], sizeof w->outcomes[i], "%.23s", e->outcome);
    w->outcome_n[i]++;
}

/* The inline form of c ("word word \"a\\x00b\"\r\n"), quoting what needs it. */
static size_t inline_text(const struct command *c, char *out, size_t size)
{
    size_t o = 0;
    for (int i = 0; i < c->argc; i++) {
        int plain = c->len[i] > 0;
        for (size_t k = 0; k < c->len[i]; k++) {
            unsigned char ch = (unsigned char)c->argv[i][k];
            if (ch <= 0x20 || ch >= 0x7f || ch == '"' || ch == '\'' || ch == '\\') plain = 0;
        }
        if (i) out[o++] = ' ';
        if (!plain) out[o++] = '"';
        for (size_t k = 0; k < c->len[i]; k++) {
            unsigned char ch = (unsigned char)c->argv[i][k];
            if (!plain && (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\'))
                o += (size_t)snprintf(out + o, size - o, "\\x%02x", ch);
            else
                out[o++] = (char)ch;
        }
        if (!plain) out[o++] = '"';
        ck_assert_uint_lt(o + 8, size);
    }
    out[o++] = '\r';
    out[o++] = '\n';
    return o;
}

static redisContext *wl_connect(void)
{
    redisContext *c = harness_must_client(&h);
    struct timeval tv = {5, 0}; /* a command that hangs keygate shows up in 5 s */
    ck_assert_int_eq(redisSetTimeout(c, tv), REDIS_OK);
    return c;
}

/* Read one reply; NULL (and a fresh connection in *kc) when the connection broke or
 * nothing came within the timeout. */
static redisReply *wl_reply(struct workload *w, redisContext **kc, const struct logent *e)
{
    redisReply *r = NULL;
    if (redisGetReply(*kc, (void **)&r) == REDIS_OK && r != NULL) return r;
    int hang = (*kc)->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
    printf("workload: %s after `%.200s` (%s); reconnecting\n", hang ? "NO REPLY within 5 s" : "connection lost",
           e->text, (*kc)->errstr);
    if (hang) w->hangs++;
    w->reconnects++;
    redisFree(*kc);
    *kc = wl_connect();
    return NULL;
}

static void append(redisContext *kc, const struct command *c)
{
    const char *argv[MAX_ARGS];
    for (int i = 0; i < c->argc; i++) argv[i] = c->argv[i];
    ck_assert_int_eq(redisAppendCommandArgv(kc, c->argc, argv, c->len), REDIS_OK);
}

/* One batch in a random mode: a single command, a pipeline of 1..16, MULTI with 1..8 and
 * EXEC, or inline commands; returns how many commands it sent. */
static int run_batch(struct workload *w, redisContext **kc)
{
    static struct command cmds[20];
    unsigned roll = rnd(&w->r, 100);
    char mode = roll < 45 ? 's' : roll < 70 ? 'p' : roll < 85 ? 'm' : 'i';
    int multi = mode == 'm', want = mode == 'p' ? 1 + (int)rnd(&w->r, 16) : multi ? 1 + (int)rnd(&w->r, 8) : 1;
    int n = 0;
    g_batch_instance = multi ? (int)rnd(&w->r, 2) : -1; /* a transaction runs on one instance */
    while (n < want) n += gen(w, &cmds[n]);
    g_batch_instance = -1;

    size_t first = w->nlog;
    if (multi) ck_assert_int_eq(redisAppendCommand(*kc, "MULTI"), REDIS_OK);
    for (int i = 0; i < n; i++) {
        log_add(w, &cmds[i], mode);
        if (mode == 'i') {
            static char text[MAX_ARGS * ARG_CAP * 4 + 16];
            size_t len = inline_text(&cmds[i], text, sizeof text);
            ck_assert_int_eq(redisAppendFormattedCommand(*kc, text, len), REDIS_OK);
        } else {
            append(*kc, &cmds[i]);
        }
    }
    if (multi) ck_assert_int_eq(redisAppendCommand(*kc, "EXEC"), REDIS_OK);
    int replies = n + (multi ? 2 : 0);
    for (int i = 0; i < replies; i++) {
        /* reply i: MULTI's +OK, each command's (+QUEUED or a refusal), EXEC's; or each command's */
        int k = multi ? i - 1 : i;
        struct logent *e = &w->log[first + (size_t)(k < 0 ? 0 : k >= n ? n - 1 : k)];
        redisReply *r = wl_reply(w, kc, e);
        if (r == NULL) break; /* the rest of the batch is lost with the connection */
        if (!multi) {
            set_outcome(w, e, r);
        } else if (i == replies - 1) { /* EXEC: the queued commands' real replies */
            for (int q = 0; q < n; q++) {
                struct logent *eq = &w->log[first + (size_t)q];
                set_outcome(w, eq, r->type == REDIS_REPLY_ARRAY && (size_t)q < r->elements ? r->element[q] : r);
                if (r->type != REDIS_REPLY_ARRAY) {
                    char o[40];
                    snprintf(o, sizeof o, "EXEC%.34s", eq->outcome);
                    snprintf(eq->outcome, sizeof o, "%s", o);
                }
            }
        } else if (i > 0 && r->type == REDIS_REPLY_ERROR) { /* refused when queued */
            set_outcome(w, e, r);
        }
        freeReplyObject(r);
    }
    return n;
}

/* Keys of every type in every namespace, so the STORE and move commands find sources. */
static void seed_keys(struct workload *w, redisContext **kc)
{
    for (int ns = 0; ns < g_nreg; ns++)
        for (unsigned d = 0; d < 4; d++) {
            const char *p = g_ns[ns].prefix;
            redisAppendCommand(*kc, "GEOADD %sg:%u 15.1 37.1 m0 15.2 37.2 m1 15.3 37.3 m2", p, d);
            redisAppendCommand(*kc, "RPUSH %sl:%u 3 1 2", p, d);
            redisAppendCommand(*kc, "SADD %sS:%u 3 1 2", p, d);
            redisAppendCommand(*kc, "ZADD %sz:%u 1 m1 2 m2", p, d);
            redisAppendCommand(*kc, "XADD %sx:%u * f v", p, d);
            for (int i = 0; i < 5; i++) {
                redisReply *r = wl_reply(w, kc, &(struct logent){.text = "seed"});
                ck_assert_msg(r != NULL && r->type != REDIS_REPLY_ERROR, "seeding %s: %s", p, describe(r));
                freeReplyObject(r);
            }
        }
}

/* Print, for each offending key of the report, the logged commands that named it with a
 * non-error outcome (newest first), and sum the labels of the newest such command. */
static void trace_offenders(const struct workload *w, const char *report)
{
    char labels[32][96];
    unsigned label_n[32] = {0};
    int nlabels = 0;
    printf("workload: offending keys, each with the commands that named it and were not refused:\n");
    for (const char *line = report; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char key[300] = "";
        int inst = strncmp(line + 2, h.backends[0].name, strlen(h.backends[0].name)) == 0 ? 0 : 1;
        const char *above = strstr(line, "above max-ttl");
        int ttl_too_long = above && above < line + len; /* a STORE makes a key without a TTL, never a long one */
        const char *db = strstr(line, " db");
        if (strncmp(line, "  ", 2) == 0 && db && db < line + len) {
            const char *k = strchr(db + 1, ' ');
            const char *colon = k ? strstr(k, ": ") : NULL;
            if (k && colon && colon < line + len && (size_t)(colon - k - 1) < sizeof key)
                snprintf(key, sizeof key, "%.*s", (int)(colon - k - 1), k + 1);
        }
        printf("%.*s\n", (int)len, line);
        if (key[0]) {
            /* the 2 newest commands naming it, and the newest best suspect among those naming a key
             * of the backend it sits on (where keygate routed them): one storing into it
             * (the key right after a STORE/STOREDIST word), else one carrying a bypass form on
             * purpose, else one with an option word NUL-suffixed by chance */
            int shown = 0, best = -1;
            const char *lab = NULL;
            char tok[310], padded[250];
            snprintf(tok, sizeof tok, " %s ", key);
            for (size_t i = w->nlog; i-- > 0 && (shown < 2 || best < 3);) {
                const struct logent *e = &w->log[i];
                if (strcmp(e->outcome, "ok") != 0) continue;
                snprintf(padded, sizeof padded, " %s ", e->text);
                const char *at = strstr(padded, tok);
                if (!at) continue;
                const char *prev = at;
                while (prev > padded && prev[-1] != ' ') prev--;
                size_t plen = (size_t)(at - prev);
                int store = (plen >= 5 && !strncasecmp(prev, "store", 5) &&
                             (plen == 5 || !strncmp(prev + 5, "\\x00", plen - 5) ||
                              (plen >= 9 && !strncasecmp(prev + 5, "dist", 4) &&
                               (plen == 9 || !strncmp(prev + 9, "\\x00", plen - 9)))));
                int by_chance = strstr(e->label, BY_CHANCE) != NULL;
                int score = !(e->inst_mask & (1u << inst)) ? -1
                            : store && !ttl_too_long       ? 3
                            : e->label[0] && !by_chance    ? 2
                            : by_chance                    ? 1
                                                           : 0;
                if (shown >= 2 && score <= best) continue;
                printf("      <- [%c] %s%s%s%s\n", e->mode, e->text, e->label[0] ? "   {" : "", e->label,
                       e->label[0] ? "}" : "");
                if (score > best) {
                    best = score;
                    lab = e->label[0] ? e->label : score == 3 ? "(a plain STORE: no bypass form)" : NULL;
                }
                shown++;
            }
            const char *l = lab ? lab : shown ? "(no bypass form: plain commands only)" : "(no command found)";
            int i = 0;
            while (i < nlabels && strcmp(labels[i], l)) i++;
            if (i == nlabels && nlabels < 32) snprintf(labels[nlabels++], sizeof labels[0], "%s", l);
            if (i < 32) label_n[i]++;
        }
        line += len + (end ? 1 : 0);
    }
    printf("workload: forms caught (offending keys per bypass form of the newest command naming them):\n");
    for (int i = 0; i < nlabels; i++) printf("  %4u  %s\n", label_n[i], labels[i]);
}

/* How many commands of each bypass form were sent, and how many keygate let through. */
static void print_forms_sent(const struct workload *w)
{
    char labels[64][96];
    unsigned sent[64] = {0}, ok[64] = {0};
    int n = 0;
    for (size_t i = 0; i < w->nlog; i++) {
        const struct logent *e = &w->log[i];
        if (!e->label[0]) continue;
        int k = 0;
        while (k < n && strcmp(labels[k], e->label)) k++;
        if (k == n && n < 64) snprintf(labels[n++], sizeof labels[0], "%s", e->label);
        if (k == 64) continue;
        sent[k]++;
        ok[k] += strcmp(e->outcome, "ok") == 0;
    }
    printf("workload: bypass forms sent (sent / not refused):\n");
    for (int k = 0; k < n; k++) printf("  %4u / %4u  %s\n", sent[k], ok[k], labels[k]);
}

START_TEST(test_issue10_random_workload_leaves_registry_intact)
{
    struct workload w = {0};
    const char *env = getenv("HARNESS_SEED");
    unsigned long long seed =
        env && *env ? strtoull(env, NULL, 0) : (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 32);
    const char *envn = getenv("HARNESS_WORKLOAD_COMMANDS");
    int total = envn && *envn ? atoi(envn) : WL_COMMANDS;
    printf("workload: seed %llu (replay with HARNESS_SEED=%llu), %d commands\n", seed, seed, total);
    fflush(stdout);
    w.r.s = seed;
    w.now_s = (long long)time(NULL);
    load_namespaces();
    redisContext *kc = wl_connect();
    seed_keys(&w, &kc);

    /* issue 10 item 2's third form: XREAD "BLOCK\0" 0 on one client per instance, never
     * answered (no key the workload writes). On a dedicated connection it waits for good
     * and harms nobody; on the shared one every later command of that instance hangs. */
    redisContext *blockers[2] = {NULL, NULL};
    for (int inst = 0; inst < 2; inst++)
        for (int ns = 0; ns < g_nreg && !blockers[inst]; ns++) {
            if (g_ns[ns].instance != inst) continue;
            blockers[inst] = wl_connect();
            char stream[96];
            snprintf(stream, sizeof stream, "%.60sx:blocker", g_ns[ns].prefix);
            const char *argv[6] = {"XREAD", "BLOCK\0", "0", "STREAMS", stream, "$"};
            size_t len[6] = {5, 6, 1, 7, strlen(stream), 1};
            ck_assert_int_eq(redisAppendCommandArgv(blockers[inst], 6, argv, len), REDIS_OK);
            send_appended(blockers[inst], "XREAD \"BLOCK\\0\" 0");
            printf("workload: a client waits in `XREAD \"BLOCK\\0\" 0 STREAMS %s $` (%s)\n", stream,
                   h.backends[inst].name);
        }
    sleep_ms(100);

    long long start = now_ms();
    int sent = 0, batches = 0;
    while (sent < total && now_ms() - start < WL_BUDGET_MS && w.hangs < 3) {
        sent += run_batch(&w, &kc);
        batches++;
    }
    redisFree(kc);
    for (int inst = 0; inst < 2; inst++)
        if (blockers[inst]) redisFree(blockers[inst]);
    printf("workload: %d commands in %d batches, %lld ms, %d reconnects, %d without a reply%s; outcomes:", sent,
           batches, now_ms() - start, w.reconnects, w.hangs, sent < total ? " (stopped early)" : "");
    for (int i = 0; i < 24 && w.outcomes[i][0]; i++) printf(" %s %u", w.outcomes[i], w.outcome_n[i]);
    printf("\n");

    print_forms_sent(&w);
    const char *dump = getenv("HARNESS_WORKLOAD_LOG");
    if (dump && *dump) { /* every command sent with its outcome, for a replayed seed */
        FILE *f = fopen(dump, "w");
        ck_assert_msg(f != NULL, "HARNESS_WORKLOAD_LOG=%s: cannot write", dump);
        for (size_t i = 0; i < w.nlog; i++)
            fprintf(f, "[%c] %s => %s%s%s\n", w.log[i].mode, w.log[i].text, w.log[i].outcome,
                    w.log[i].label[0] ? "   {" : "", w.log[i].label[0] ? w.log[i].label : "");
        fclose(f);
        printf("workload: commands and outcomes written to %s\n", dump);
    }

    static char report[1 << 17];
    int n = harness_registry_violations(&h, NULL, 400, report, sizeof report);
    if (n != 0) {
        trace_offenders(&w, report);
        /* reported here with their commands: clear them so the teardown's check speaks of nothing else */
        const char *names[2] = {"durable", "cache"};
        for (int i = 0; i < 2; i++) {
            redisContext *d = harness_must_direct(&h, names[i]);
            direct_ok(d, "FLUSHALL");
            redisFree(d);
        }
    }
    fflush(stdout);
    free(w.log);
    ck_assert_msg(n == 0,
                  "seed %llu: %d key(s) break the registry after the workload (listed above with the "
                  "commands that wrote them)%s",
                  seed, n, n < 0 ? report : "");
    ck_assert_msg(w.hangs == 0, "seed %llu: %d command(s) got no reply within 5 s (listed above)", seed, w.hangs);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("workload");
    TCase *tc = harness_tcase(s, "workload", 120, setup, teardown);
    tcase_add_test(tc, test_issue10_postcondition_detector_finds_planted_keys);
    tcase_add_test(tc, test_issue10_random_workload_leaves_registry_intact);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
