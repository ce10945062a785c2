/* test_ttl.c: integration tests of the TTL rules (DESIGN.md section 2, issue #3) over every write command of the table. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

#include "harness.h"
#include "ttl_invocations.h"

/*
 * One harness (two TLS redis-servers + keygate) serves the suite, with this registry:
 *
 *   t:  cache    ttl=1h  max-ttl=1d    the main TTL namespace
 *   n:  cache    ttl=none              nothing injected, nothing refused
 *   s:  cache    ttl=30m sliding       every touch resets the TTL
 *   d:  durable  ttl=10m max-ttl=1h    the TTL rules on the AOF instance (MULTI/EXEC there too)
 *   u:  cache    ttl=none              a ttl-less source for RENAME/COPY/LMOVE into t:
 *
 * The walks (test_walk_*) run every row of ttl_invocations.h: setup DIRECTLY on the
 * namespace's backend, the command THROUGH keygate, then PTTL/EXISTS directly. They
 * collect every failure (one line each: namespace, command, key, expected, got) and
 * assert zero at the end. Blocking rows (INV_BLOCKING) run on a ready key through a
 * dedicated connection and are checked like every other row.
 *
 *   direct (plain port) --setup-->  backend  <--TLS-- keygate <-- invoke (client)
 *   direct (plain port) --PTTL/EXISTS/MONITOR/INFO commandstats--> backend
 */

static const char registry_text[] =
    "namespace t: instance=cache   ttl=1h  max-ttl=1d owner=t purpose=\"ttl tests: main\"\n"
    "namespace n: instance=cache   ttl=none           owner=t purpose=\"ttl tests: no ttl\"\n"
    "namespace s: instance=cache   ttl=30m sliding    owner=t purpose=\"ttl tests: sliding\"\n"
    "namespace d: instance=durable ttl=10m max-ttl=1h owner=t purpose=\"ttl tests: durable\"\n"
    "namespace u: instance=cache   ttl=none           owner=t purpose=\"ttl tests: ttl-less source\"\n";

struct ns_case {
    const char *prefix;
    const char *backend;
    long long ttl_ms; /* 0: ttl=none */
    long long max_ms; /* 0: no max-ttl */
};

static const struct ns_case NS_T = {"t:", "cache", 3600000, 86400000};
static const struct ns_case NS_N = {"n:", "cache", 0, 0};
static const struct ns_case NS_D = {"d:", "durable", 600000, 3600000};

#define SLIDING_MS 1800000LL
#define TOLERANCE_MS 5000LL

static struct harness h;

static void setup(void)
{
    struct harness_opts o = {.registry_text = registry_text};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry_except(
        &h,
        (const char *const[]){
            "f?:w:*", "[td]:w:move:*", "[td]:w:migrate:*", "[td]:w:pfdebug:*",
            NULL}); /* post-condition; skipped: keys the walks write directly (fidelity twins f?:, setups of the -DENIED MOVE/MIGRATE/PFDEBUG rows) */
    harness_stop(&h);
}

/* ---- small helpers ---- */

static redisContext *client(void)
{
    return harness_must_client(&h);
}

static redisContext *direct(const char *backend)
{
    return harness_must_direct(&h, backend);
}

/* cmd (a reply, never NULL) and describe are in harness.h. */

static redisReply *cmd_argv(redisContext *c, const struct inv_cmd *ic)
{
    const char *argv[INV_MAX_ARGS];
    for (int i = 0; i < ic->argc; i++) argv[i] = ic->argv[i];
    redisReply *r = redisCommandArgv(c, ic->argc, argv, ic->argvlen);
    ck_assert_msg(r != NULL, "`%s ...`: connection error: %s", ic->argv[0], c->errstr);
    return r;
}

static long long reply_int(redisReply *r, const char *what)
{
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "%s: want an integer, got %s", what, describe(r));
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

static long long pttl(redisContext *dc, const char *key)
{
    return reply_int(cmd(dc, "PTTL %s", key), "PTTL");
}

static int is_error(const redisReply *r, const char *prefix)
{
    return r->type == REDIS_REPLY_ERROR && strncmp(r->str, prefix, strlen(prefix)) == 0;
}

static void expect_ok_reply(redisReply *r, const char *what)
{
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "%s: got %s", what, describe(r));
    freeReplyObject(r);
}

static void fill_times(struct inv_values *v)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    snprintf(v->at, sizeof v->at, "%lld", (long long)tv.tv_sec + 100);
    snprintf(v->pat, sizeof v->pat, "%lld", (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000 + 100000);
}

/* Fresh keys "<prefix>w:<command>:<seq>:<i>" ('|' made '-'). */
struct key_set {
    char k[3][160];
};

static void make_keys(struct key_set *ks, const char *prefix, const char *command, unsigned seq, struct inv_values *v)
{
    char name[64];
    snprintf(name, sizeof name, "%s", command);
    for (char *p = name; *p; p++)
        if (*p == '|') *p = '-';
    for (int i = 0; i < 3; i++) {
        snprintf(ks->k[i], sizeof ks->k[i], "%sw:%s:%u:%d", prefix, name, seq, i + 1);
        v->k[i] = ks->k[i];
    }
}

/* "CMD arg arg" of a parsed command, for messages. */
static const char *cmd_text(const struct inv_cmd *c)
{
    static char buf[600];
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->argc && used + 2 < sizeof buf; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", i ? " " : "", c->argv[i]);
    return buf;
}

/* ---- failure collection ---- */

struct failures {
    int count;
    char commands[4096]; /* distinct failing command names, space-separated */
};

static void fail_note(struct failures *f, const char *command, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_note(struct failures *f, const char *command, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    f->count++;
    char needle[80];
    snprintf(needle, sizeof needle, " %s ", command);
    char padded[sizeof f->commands + 2];
    snprintf(padded, sizeof padded, " %s", f->commands);
    if (strstr(padded, needle) == NULL) {
        size_t used = strlen(f->commands);
        snprintf(f->commands + used, sizeof f->commands - used, "%s ", command);
    }
}

/* ---- MONITOR: which commands keygate sent, and in which MULTI/EXEC block ---- */

struct mon_line {
    char addr[64];
    int argc;
    char *argv[INV_MAX_ARGS + 8];
    int block; /* MULTI..EXEC block number on its connection, -1 outside */
};

struct mon_window {
    int n;
    struct mon_line lines[64];
    int overflow;
};

/* Parse `1700000000.123 [0 127.0.0.1:5555] "SET" "k" "v"` into l (args malloc'd). */
static int mon_parse(const char *s, struct mon_line *l)
{
    memset(l, 0, sizeof *l);
    l->block = -1;
    const char *lb = strchr(s, '['), *rb = lb ? strchr(lb, ']') : NULL;
    if (!lb || !rb) return -1;
    const char *sp = memchr(lb, ' ', (size_t)(rb - lb));
    const char *a = sp ? sp + 1 : lb + 1;
    snprintf(l->addr, sizeof l->addr, "%.*s", (int)(rb - a), a);
    for (const char *p = rb + 1; *p;) {
        while (*p == ' ') p++;
        if (*p != '"') break;
        p++;
        char buf[1024];
        size_t n = 0;
        while (*p && *p != '"' && n + 1 < sizeof buf) {
            if (*p == '\\' && p[1]) {
                p++;
                char e = *p;
                if (e == 'x' && p[1] && p[2]) {
                    char hex[3] = {p[1], p[2], 0};
                    buf[n++] = (char)strtol(hex, NULL, 16);
                    p += 3;
                    continue;
                }
                buf[n++] = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
                p++;
            } else {
                buf[n++] = *p++;
            }
        }
        if (*p == '"') p++;
        buf[n] = '\0';
        if (l->argc < (int)(sizeof l->argv / sizeof l->argv[0])) l->argv[l->argc++] = strdup(buf);
    }
    return l->argc > 0 ? 0 : -1;
}

static void mon_window_free(struct mon_window *w)
{
    for (int i = 0; i < w->n; i++)
        for (int j = 0; j < w->lines[i].argc; j++) free(w->lines[i].argv[j]);
    w->n = 0;
}

/* Read monitor lines until one contains `marker`; when `w` is given, keep keygate's lines (not the markers). */
static void mon_read_until(redisContext *mon, const char *marker, struct mon_window *w)
{
    for (long long deadline = now_ms() + 10000;;) {
        ck_assert_msg(now_ms() < deadline, "MONITOR: no line with %s within 10 s", marker);
        void *rv = NULL;
        ck_assert_msg(redisGetReply(mon, &rv) == REDIS_OK && rv != NULL, "MONITOR: %s", mon->errstr);
        redisReply *r = rv;
        int done = r->type == REDIS_REPLY_STATUS && strstr(r->str, marker) != NULL;
        if (!done && w != NULL && r->type == REDIS_REPLY_STATUS && strstr(r->str, "kgmark:") == NULL) {
            if (w->n == (int)(sizeof w->lines / sizeof w->lines[0]))
                w->overflow = 1;
            else if (mon_parse(r->str, &w->lines[w->n]) == 0)
                w->n++;
        }
        freeReplyObject(r);
        if (done) return;
    }
}

/* Number the MULTI..EXEC blocks per connection. */
static void mon_blocks(struct mon_window *w)
{
    int next = 0;
    for (int i = 0; i < w->n; i++) {
        struct mon_line *l = &w->lines[i];
        if (strcasecmp(l->argv[0], "MULTI") != 0) continue;
        int b = next++;
        l->block = b;
        for (int j = i + 1; j < w->n; j++) {
            if (strcmp(w->lines[j].addr, l->addr) != 0) continue;
            w->lines[j].block = b;
            if (strcasecmp(w->lines[j].argv[0], "EXEC") == 0 || strcasecmp(w->lines[j].argv[0], "DISCARD") == 0) break;
        }
    }
}

static int is_expire_family(const char *name)
{
    return strcasecmp(name, "EXPIRE") == 0 || strcasecmp(name, "PEXPIRE") == 0 || strcasecmp(name, "EXPIREAT") == 0 ||
           strcasecmp(name, "PEXPIREAT") == 0;
}

/* The line carrying the client's command: its arguments as sent (keygate may append some). */
static int mon_find_client_line(const struct mon_window *w, const struct inv_cmd *inv)
{
    for (int i = 0; i < w->n; i++) {
        const struct mon_line *l = &w->lines[i];
        if (l->argc < inv->argc) continue;
        int same = 1;
        for (int a = 0; a < inv->argc && same; a++)
            same = a == 0 ? strcasecmp(l->argv[a], inv->argv[a]) == 0 : strcmp(l->argv[a], inv->argv[a]) == 0;
        if (same) return i;
    }
    /* A rewrite (e.g. a blocking command sent as its non-blocking twin): the first
     * non-transaction, non-expire line that names the first checked key. */
    for (int i = 0; i < w->n; i++) {
        const struct mon_line *l = &w->lines[i];
        if (strcasecmp(l->argv[0], "MULTI") == 0 || strcasecmp(l->argv[0], "EXEC") == 0 || is_expire_family(l->argv[0]))
            continue;
        for (int a = 1; a < l->argc; a++)
            for (int k = 1; k < inv->argc; k++)
                if (strcmp(l->argv[a], inv->argv[k]) == 0 && strchr(inv->argv[k], ':') != NULL) return i;
    }
    return -1;
}

static const char *mon_text(const struct mon_window *w)
{
    static char buf[2048];
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < w->n && used + 4 < sizeof buf; i++) {
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s{", i ? " " : "");
        for (int a = 0; a < w->lines[i].argc && used + 4 < sizeof buf; a++)
            used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", a ? " " : "", w->lines[i].argv[a]);
        if (used + 2 < sizeof buf) used += (size_t)snprintf(buf + used, sizeof buf - used, "}");
    }
    return buf;
}

/*
 * Atomicity of one row: every TTL keygate injected for a key of `keys` is in the same
 * MULTI/EXEC block as the client's command, or the client's command carries it itself
 * (SET ... EX D). Returns 0, or -1 after noting the failure.
 *
 * The one listed exception: blocking commands (INV_BLOCKING rows). Redis never blocks
 * inside MULTI, so keygate sends their TTLs as the very next commands on the same
 * dedicated connection; a pop creates no key, and a blocking move's destination gets
 * its TTL by the next command Redis runs for that connection. Checked as exactly that.
 */
static int mon_check_atomic(struct failures *f, const char *nsname, const struct ttl_invocation *row,
                            const struct inv_cmd *inv, const struct inv_cmd *keys, struct mon_window *w)
{
    mon_blocks(w);
    if (w->overflow) {
        fail_note(f, row->command, "[%s] %s: atomicity: more than 64 backend commands in the window", nsname,
                  cmd_text(inv));
        return -1;
    }
    int ci = mon_find_client_line(w, inv);
    if (ci < 0) {
        fail_note(f, row->command, "[%s] %s: atomicity: the command never reached the backend; keygate sent: %s",
                  nsname, cmd_text(inv), mon_text(w));
        return -1;
    }
    int rc = 0;
    for (int k = 0; k < keys->argc; k++) {
        int injected = 0, bad = 0;
        for (int i = 0; i < w->n; i++) {
            const struct mon_line *l = &w->lines[i];
            if (i == ci || !is_expire_family(l->argv[0]) || l->argc < 2 || strcmp(l->argv[1], keys->argv[k]) != 0)
                continue;
            injected++;
            if (row->flags & INV_BLOCKING) {
                /* right behind the command: only expire-family lines between them */
                for (int j = ci + 1; j < i; j++)
                    if (!is_expire_family(w->lines[j].argv[0])) bad++;
                if (i < ci) bad++;
            } else if (l->block < 0 || l->block != w->lines[ci].block) {
                bad++;
            }
        }
        int carried = 0; /* the client's own line sets a TTL (SET k v EX D, SETEX ...) */
        const struct mon_line *cl = &w->lines[ci];
        for (int a = 2; a < cl->argc; a++)
            if (strcasecmp(cl->argv[a], "EX") == 0 || strcasecmp(cl->argv[a], "PX") == 0 ||
                strcasecmp(cl->argv[a], "EXAT") == 0 || strcasecmp(cl->argv[a], "PXAT") == 0)
                carried = 1;
        if (bad) {
            fail_note(f, row->command,
                      "[%s] %s: atomicity: key %s: expected its TTL in the same MULTI/EXEC as the command, got it "
                      "outside; keygate sent: %s",
                      nsname, cmd_text(inv), keys->argv[k], mon_text(w));
            rc = -1;
        } else if (!injected && !carried) {
            fail_note(f, row->command,
                      "[%s] %s: atomicity: key %s: expected a TTL with the command (MULTI/EXEC or one command), got "
                      "none in its window; keygate sent: %s",
                      nsname, cmd_text(inv), keys->argv[k], mon_text(w));
            rc = -1;
        }
    }
    return rc;
}

/* ---- reply fidelity: keygate's reply vs Redis's own on an identical setup ---- */

/* Equal replies; a string equal to key a_keys[i] on one side matches b_keys[i] on the other. */
static int reply_equal(const redisReply *a, const redisReply *b, const struct inv_values *ak,
                       const struct inv_values *bk, int types_only)
{
    if (a->type != b->type) return 0;
    switch (a->type) {
    case REDIS_REPLY_INTEGER:
        return types_only || a->integer == b->integer;
    case REDIS_REPLY_NIL:
        return 1;
    case REDIS_REPLY_ARRAY:
        if (a->elements != b->elements) return 0;
        for (size_t i = 0; i < a->elements; i++)
            if (!reply_equal(a->element[i], b->element[i], ak, bk, types_only)) return 0;
        return 1;
    default:
        if (types_only) return 1;
        if (a->len == b->len && memcmp(a->str, b->str, a->len) == 0) return 1;
        for (int i = 0; i < 3; i++)
            if (strcmp(a->str, ak->k[i]) == 0 && strcmp(b->str, bk->k[i]) == 0) return 1;
        return 0;
    }
}

/* ---- the walk ---- */

enum walk_mode {
    WALK_TTL = 1,      /* PTTL / EXISTS checks */
    WALK_FIDELITY = 2, /* reply through keygate == Redis's reply to the same command */
    WALK_MONITOR = 4,  /* injected TTLs travel with their write (MONITOR on the backend) */
};

struct walk_stats {
    int rows, checked, listed;
};

static int run_setup(redisContext *dc, const struct ttl_invocation *row, const struct inv_values *v, struct failures *f,
                     const char *nsname)
{
    struct inv_cmd setup[INV_MAX_CMDS];
    int n = row->setup != NULL ? inv_parse_setup(row->setup, v, setup, INV_MAX_CMDS) : 0;
    ck_assert_msg(n >= 0, "%s: cannot parse setup `%s`", row->command, row->setup);
    for (int i = 0; i < n; i++) {
        redisReply *r = cmd_argv(dc, &setup[i]);
        if (r->type == REDIS_REPLY_ERROR) {
            fail_note(f, row->command, "[%s] setup `%s` failed on the backend: %s", nsname, cmd_text(&setup[i]),
                      describe(r));
            freeReplyObject(r);
            return -1;
        }
        freeReplyObject(r);
    }
    return 0;
}

/* PTTL of every key of `list` against the expectation of the row in namespace ns. */
static void check_ttls(redisContext *dc, struct failures *f, const struct ns_case *ns, const struct ttl_invocation *row,
                       const struct inv_cmd *inv, const struct inv_cmd *keys, int persisted)
{
    for (int k = 0; k < keys->argc; k++) {
        long long got = pttl(dc, keys->argv[k]);
        long long want = row->client_ttl_s > 0 ? row->client_ttl_s * 1000LL : ns->ttl_ms;
        const char *whose = row->client_ttl_s > 0 ? "the client's TTL, kept" : "the registry's ttl";
        if (persisted) want = 0, whose = "PERSIST forwarded in a ttl=none namespace";
        if (want == 0) {
            if (got != -1)
                fail_note(f, row->command, "[%s] %s: key %s: expected PTTL -1 (%s), got %lld", ns->prefix,
                          cmd_text(inv), keys->argv[k], ns->ttl_ms ? whose : "ttl=none: nothing injected", got);
            continue;
        }
        long long max = ns->max_ms > 0 ? ns->max_ms : want;
        if (got <= 0 || got > max || got < want - TOLERANCE_MS || got > want + 1000) {
            char range[64] = "";
            if (ns->max_ms > 0) snprintf(range, sizeof range, ", in (0, %lld]", ns->max_ms);
            fail_note(f, row->command, "[%s] %s: key %s: expected PTTL ~%lld (%s%s), got %lld%s", ns->prefix,
                      cmd_text(inv), keys->argv[k], want, whose, range, got,
                      got == -1   ? " (no TTL)"
                      : got == -2 ? " (key missing)"
                                  : "");
        }
    }
}

static void check_gone(redisContext *dc, struct failures *f, const struct ns_case *ns, const struct ttl_invocation *row,
                       const struct inv_cmd *inv, const struct inv_cmd *keys)
{
    for (int k = 0; k < keys->argc; k++) {
        long long got = reply_int(cmd(dc, "EXISTS %s", keys->argv[k]), "EXISTS");
        if (got != 0)
            fail_note(f, row->command, "[%s] %s: key %s: expected it gone, got EXISTS %lld (PTTL %lld)", ns->prefix,
                      cmd_text(inv), keys->argv[k], got, pttl(dc, keys->argv[k]));
    }
}

/* The placeholders of a key list, substituted (argc 0 for NULL). */
static void parse_keys(const char *list, const struct inv_values *v, struct inv_cmd *out)
{
    out->argc = 0;
    if (list != NULL) ck_assert_int_gt(inv_parse(list, strlen(list), v, out), 0);
}

static int walk(const struct ns_case *ns, unsigned mode, const char *title, struct walk_stats *st)
{
    struct failures f = {0};
    memset(st, 0, sizeof *st);
    redisContext *kc = client();
    redisContext *dc = direct(ns->backend);
    redisContext *mon = NULL;
    if (mode & WALK_MONITOR) {
        mon = direct(ns->backend);
        redisReply *r = cmd(mon, "MONITOR");
        ck_assert_msg(r->type == REDIS_REPLY_STATUS, "MONITOR: %s", describe(r));
        freeReplyObject(r);
    }
    printf("---- %s ----\n", title);
    for (unsigned i = 0; i < ttl_invocations_len; i++) {
        const struct ttl_invocation *row = &ttl_invocations[i];
        /* unique across the suite: each walk is one (namespace, mode) pair, the namespace is in
         * the key, the mode here (each test runs in a process of its own: no counter carries over) */
        unsigned seq = mode * 100000u + i + 1;
        struct key_set ks, fks;
        struct inv_values v, fv;
        make_keys(&ks, ns->prefix, row->command, seq, &v);
        fill_times(&v);
        struct inv_cmd inv, ttl_keys, gone_keys;
        ck_assert_int_gt(inv_parse(row->invoke, strlen(row->invoke), &v, &inv), 0);
        parse_keys(row->ttl_keys, &v, &ttl_keys);
        parse_keys(row->gone_keys, &v, &gone_keys);
        st->rows++;
        if (run_setup(dc, row, &v, &f, ns->prefix) != 0) continue;

        char marker[64];
        if (mon) {
            snprintf(marker, sizeof marker, "kgmark:%u:begin", seq);
            freeReplyObject(cmd(dc, "ECHO %s", marker));
            mon_read_until(mon, marker, NULL);
        }
        redisReply *r = cmd_argv(kc, &inv);
        struct mon_window w = {0};
        if (mon) {
            snprintf(marker, sizeof marker, "kgmark:%u:end", seq);
            freeReplyObject(cmd(dc, "ECHO %s", marker));
            mon_read_until(mon, marker, &w);
        }

        int ttl_ns = ns->ttl_ms > 0;
        int want_denied = row->expect == INV_DENIED || (row->expect == INV_DENIED_IF_TTL && ttl_ns);
        int denied = is_error(r, "DENIED");
        if (row->listed != NULL) st->listed++;

        if (want_denied) {
            if (!denied)
                fail_note(&f, row->command, "[%s] %s: expected -DENIED (%s), got %s", ns->prefix, cmd_text(&inv),
                          row->listed ? row->listed : "PERSIST in a TTL namespace", describe(r));
            else if (mode & WALK_TTL) {
                check_ttls(dc, &f, ns, row, &inv, &ttl_keys, 0); /* unchanged */
                check_gone(dc, &f, ns, row, &inv, &gone_keys);
            }
            st->checked++;
        } else if (r->type == REDIS_REPLY_ERROR) {
            fail_note(&f, row->command, "[%s] %s: expected a reply, got %s", ns->prefix, cmd_text(&inv), describe(r));
        } else {
            st->checked++;
            if (mode & WALK_TTL) {
                check_ttls(dc, &f, ns, row, &inv, &ttl_keys, row->expect == INV_DENIED_IF_TTL);
                check_gone(dc, &f, ns, row, &inv, &gone_keys);
            }
            if ((mode & WALK_MONITOR) && ttl_ns && row->client_ttl_s == 0 && row->expect == INV_OK && ttl_keys.argc > 0)
                mon_check_atomic(&f, ns->prefix, row, &inv, &ttl_keys, &w);
            if (mode & WALK_FIDELITY) {
                /* The same setup and command directly on the backend, keys "f:<...>". */
                char fprefix[16];
                snprintf(fprefix, sizeof fprefix, "f%s", ns->prefix);
                make_keys(&fks, fprefix, row->command, seq, &fv);
                memcpy(fv.at, v.at, sizeof fv.at);
                memcpy(fv.pat, v.pat, sizeof fv.pat);
                struct inv_cmd finv;
                ck_assert_int_gt(inv_parse(row->invoke, strlen(row->invoke), &fv, &finv), 0);
                if (run_setup(dc, row, &fv, &f, "direct") == 0) {
                    redisReply *want = cmd_argv(dc, &finv);
                    if (!reply_equal(r, want, &v, &fv, (row->flags & INV_NONDET) != 0)) {
                        char got[512];
                        describe_into(r, got, sizeof got);
                        fail_note(&f, row->command, "[%s] %s: reply fidelity: expected %s (Redis's reply), got %s",
                                  ns->prefix, cmd_text(&inv), describe(want), got);
                    }
                    freeReplyObject(want);
                }
            }
        }
        mon_window_free(&w);
        freeReplyObject(r);
    }
    printf("%s: %d rows, %d checked, %d listed (expected -DENIED); "
           "%d failure(s)%s%s\n",
           title, st->rows, st->checked, st->listed, f.count, f.count ? " in: " : "", f.commands);
    fflush(stdout);
    if (mon) redisFree(mon);
    redisFree(dc);
    redisFree(kc);
    return f.count;
}

/* ---- 0. coverage of command_table[] ---- */

START_TEST(test_every_write_command_is_covered)
{
    struct inv_coverage cov;
    inv_coverage_check(stdout, &cov);
    printf("ttl invocations: %d write commands with keys in command_table[]: %d exercised (%d blocking, run on a "
           "ready key), %d listed with a reason (expected -DENIED); %d rows\n",
           cov.commands, cov.exercised, cov.blocking, cov.listed, cov.rows);
    for (unsigned i = 0; i < ttl_invocations_len; i++)
        if (ttl_invocations[i].listed != NULL)
            printf("  listed: %-16s %s\n", ttl_invocations[i].command, ttl_invocations[i].listed);
    fflush(stdout);
    ck_assert_msg(cov.missing == 0, "%d write command(s) with keys have no row in ttl_invocations.h", cov.missing);
    ck_assert_msg(cov.stray == 0, "%d row(s) name no write command with keys", cov.stray);
}
END_TEST

/* ---- 1. the generated walks ---- */

START_TEST(test_walk_ttl_namespace)
{
    struct walk_stats st;
    int failures = walk(&NS_T, WALK_TTL, "walk t: (cache, ttl=1h max-ttl=1d)", &st);
    ck_assert_msg(failures == 0, "t: walk: %d TTL failure(s), listed above as FAIL lines", failures);
}
END_TEST

START_TEST(test_walk_durable_ttl_namespace)
{
    struct walk_stats st;
    int failures = walk(&NS_D, WALK_TTL, "walk d: (durable, ttl=10m max-ttl=1h)", &st);
    ck_assert_msg(failures == 0, "d: walk: %d TTL failure(s), listed above as FAIL lines", failures);
}
END_TEST

START_TEST(test_walk_ttl_none_namespace)
{
    struct walk_stats st;
    int failures = walk(&NS_N, WALK_TTL, "walk n: (cache, ttl=none)", &st);
    ck_assert_msg(failures == 0, "n: walk: %d failure(s), listed above as FAIL lines", failures);
}
END_TEST

START_TEST(test_walk_reply_fidelity)
{
    struct walk_stats st;
    int failures = walk(&NS_T, WALK_FIDELITY, "fidelity t: (reply through keygate vs Redis)", &st);
    failures += walk(&NS_N, WALK_FIDELITY, "fidelity n: (reply through keygate vs Redis)", &st);
    ck_assert_msg(failures == 0, "reply fidelity: %d failure(s), listed above as FAIL lines", failures);
}
END_TEST

START_TEST(test_walk_atomicity_monitor)
{
    struct walk_stats st;
    int failures = walk(&NS_T, WALK_MONITOR, "atomicity t: (MONITOR on cache)", &st);
    failures += walk(&NS_D, WALK_MONITOR, "atomicity d: (MONITOR on durable)", &st);
    ck_assert_msg(failures == 0, "atomicity: %d failure(s), listed above as FAIL lines", failures);
}
END_TEST

/* ---- 2. sliding ---- */

struct sliding_read {
    const char *create; /* through keygate, %s = key */
    const char *read;   /* through keygate, %s = key */
};

static const struct sliding_read sliding_reads[] = {
    {"SET %s v", "GET %s"},
    {"SET %s v", "STRLEN %s"},
    {"SET %s v", "GETRANGE %s 0 0"},
    {"SET %s v", "MGET %s"},
    {"SET %s v", "EXISTS %s"},
    {"SET %s v", "TYPE %s"},
    {"HSET %s f v", "HGET %s f"},
    {"HSET %s f v", "HGETALL %s"},
    {"HSET %s f v", "HLEN %s"},
    {"HSET %s f v", "HEXISTS %s f"},
    {"RPUSH %s a b", "LRANGE %s 0 -1"},
    {"RPUSH %s a b", "LLEN %s"},
    {"RPUSH %s a b", "LINDEX %s 0"},
    {"SADD %s a b", "SMEMBERS %s"},
    {"SADD %s a b", "SISMEMBER %s a"},
    {"SADD %s a b", "SCARD %s"},
    {"ZADD %s 1 a", "ZRANGE %s 0 -1"},
    {"ZADD %s 1 a", "ZSCORE %s a"},
    {"ZADD %s 1 a", "ZCARD %s"},
    {"XADD %s 1-1 f v", "XRANGE %s - +"},
    {"XADD %s 1-1 f v", "XLEN %s"},
    /* writes slide too: not EXPIRE NX in a sliding namespace */
    {"HSET %s f v", "HSET %s g w"},
    {"RPUSH %s a", "RPUSH %s b"},
    {"SET %s 1", "INCR %s"},
};

START_TEST(test_sliding_every_touch_resets_ttl)
{
    redisContext *kc = client(), *dc = direct("cache");
    struct failures f = {0};
    for (size_t i = 0; i < sizeof sliding_reads / sizeof sliding_reads[0]; i++) {
        char key[64], create[128], read[128];
        snprintf(key, sizeof key, "s:slide:%zu", i);
        snprintf(create, sizeof create, sliding_reads[i].create, key);
        snprintf(read, sizeof read, sliding_reads[i].read, key);
        expect_ok_reply(cmd(kc, sliding_reads[i].create, key), create);
        long long first = pttl(dc, key);
        if (first <= 0 || first > SLIDING_MS)
            fail_note(&f, create, "[s:] %s: key %s: expected PTTL ~%lld after the write, got %lld", create, key,
                      SLIDING_MS, first);
        ck_assert_int_eq(reply_int(cmd(dc, "PEXPIRE %s 1000", key), "PEXPIRE"), 1);
        redisReply *r = cmd(kc, sliding_reads[i].read, key);
        if (r->type == REDIS_REPLY_ERROR) {
            fail_note(&f, read, "[s:] %s: expected a reply, got %s", read, describe(r));
        } else {
            long long got = pttl(dc, key);
            if (got < SLIDING_MS - TOLERANCE_MS || got > SLIDING_MS)
                fail_note(&f, read, "[s:] %s: key %s: expected PTTL reset to ~%lld (sliding), got %lld%s", read, key,
                          SLIDING_MS, got, got == -2 ? " (key expired or missing)" : "");
        }
        freeReplyObject(r);
    }
    /* the read's reply is the client's: GET returns the value, not GETEX's */
    redisReply *r = cmd(kc, "GET s:slide:0");
    if (!(r->type == REDIS_REPLY_STRING && strcmp(r->str, "v") == 0))
        fail_note(&f, "GET", "[s:] GET s:slide:0: expected \"v\", got %s", describe(r));
    freeReplyObject(r);
    /* a read of a missing key creates nothing */
    r = cmd(kc, "GET s:slide:missing");
    if (r->type != REDIS_REPLY_NIL)
        fail_note(&f, "GET", "[s:] GET s:slide:missing: expected (nil), got %s", describe(r));
    freeReplyObject(r);
    if (reply_int(cmd(dc, "EXISTS s:slide:missing"), "EXISTS") != 0)
        fail_note(&f, "GET", "[s:] GET s:slide:missing: expected no key created, got one");
    redisFree(dc);
    redisFree(kc);
    ck_assert_msg(f.count == 0, "sliding: %d failure(s) in: %s", f.count, f.commands);
}
END_TEST

/* ---- 3. the client's TTL is kept, never extended ---- */

START_TEST(test_client_ttl_is_kept_and_never_extended)
{
    redisContext *kc = client(), *dc = direct("cache");
    redisReply *r = cmd(kc, "SET t:kept:a v EX 100");
    ck_assert_msg(r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0, "SET t:kept:a v EX 100: got %s",
                  describe(r));
    freeReplyObject(r);
    long long got = pttl(dc, "t:kept:a");
    ck_assert_msg(got > 100000 - TOLERANCE_MS && got <= 100000,
                  "SET t:kept:a v EX 100: expected PTTL ~100000, got %lld", got);

    ck_assert_int_eq(reply_int(cmd(kc, "HSET t:kept:h f v"), "HSET t:kept:h f v"), 1);
    got = pttl(dc, "t:kept:h");
    ck_assert_msg(got > 3600000 - TOLERANCE_MS && got <= 3600000, "HSET t:kept:h f v: expected PTTL ~3600000, got %lld",
                  got);
    ck_assert_int_eq(reply_int(cmd(kc, "EXPIRE t:kept:h 50"), "EXPIRE t:kept:h 50"), 1);
    ck_assert_int_eq(reply_int(cmd(kc, "HSET t:kept:h f2 v"), "HSET t:kept:h f2 v"), 1);
    got = pttl(dc, "t:kept:h");
    ck_assert_msg(got > 0 && got <= 50000, "HSET after EXPIRE 50: expected PTTL <= 50000 (never extended), got %lld",
                  got);
    ck_assert_int_eq(reply_int(cmd(kc, "LPUSH t:kept:l a"), "LPUSH"), 1);
    ck_assert_int_eq(reply_int(cmd(kc, "PEXPIRE t:kept:l 20000"), "PEXPIRE t:kept:l 20000"), 1);
    for (int i = 0; i < 3; i++) freeReplyObject(cmd(kc, "RPUSH t:kept:l b"));
    got = pttl(dc, "t:kept:l");
    ck_assert_msg(got > 0 && got <= 20000, "RPUSH after PEXPIRE 20000: expected PTTL <= 20000, got %lld", got);

    /* SET replaces the key: its TTL is the registry's again */
    expect_ok_reply(cmd(kc, "SET t:kept:a v2"), "SET t:kept:a v2");
    got = pttl(dc, "t:kept:a");
    ck_assert_msg(got > 3600000 - TOLERANCE_MS && got <= 3600000,
                  "SET over a key with EX 100: expected ~3600000, got %lld", got);
    redisFree(dc);
    redisFree(kc);
}
END_TEST

/* ---- 4. max-ttl ---- */

struct over_max {
    const char *ns; /* "t:" (max 1d) or "d:" (max 1h) */
    const char *backend;
    const char *fmt; /* %s key, then up to one %lld */
    long long arg;   /* relative seconds/ms or absolute, already computed */
};

START_TEST(test_ttl_above_max_ttl_is_refused_and_changes_nothing)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    long long now_s = tv.tv_sec, now_ms = now_s * 1000 + tv.tv_usec / 1000;
    const struct over_max cases[] = {
        {"t:", "cache", "EXPIRE %s %lld", 90000},
        {"t:", "cache", "EXPIRE %s %lld", 86401},
        {"t:", "cache", "PEXPIRE %s %lld", 86400001 + 5000},
        {"t:", "cache", "EXPIREAT %s %lld", now_s + 90000},
        {"t:", "cache", "PEXPIREAT %s %lld", now_ms + 90000000},
        {"t:", "cache", "SET %s new EX %lld", 86401},
        {"t:", "cache", "SET %s new PX %lld", 86460000},
        {"t:", "cache", "SET %s new EXAT %lld", now_s + 90000},
        {"t:", "cache", "SET %s new PXAT %lld", now_ms + 90000000},
        {"t:", "cache", "SETEX %s %lld new", 86401},
        {"t:", "cache", "PSETEX %s %lld new", 86460000},
        {"t:", "cache", "GETEX %s EX %lld", 86401},
        {"t:", "cache", "GETEX %s PX %lld", 86460000},
        {"t:", "cache", "GETEX %s EXAT %lld", now_s + 90000},
        {"t:", "cache", "GETEX %s PXAT %lld", now_ms + 90000000},
        {"d:", "durable", "EXPIRE %s %lld", 3700},
        {"d:", "durable", "SET %s new EX %lld", 3700},
        {"d:", "durable", "SETEX %s %lld new", 3700},
        {"d:", "durable", "GETEX %s EX %lld", 3700},
    };
    redisContext *kc = client();
    struct failures f = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        redisContext *dc = direct(cases[i].backend);
        char key[64], text[160];
        snprintf(key, sizeof key, "%smax:%zu", cases[i].ns, i);
        snprintf(text, sizeof text, cases[i].fmt, key, cases[i].arg);
        expect_ok_reply(cmd(dc, "SET %s old EX 500", key), "setup SET EX 500");
        redisReply *r = cmd(kc, cases[i].fmt, key, cases[i].arg);
        const char *limit = cases[i].ns[0] == 't' ? "1d" : "1h";
        if (!is_error(r, "DENIED")) {
            fail_note(&f, text, "[%s] %s: expected -DENIED (TTL above max-ttl %s), got %s", cases[i].ns, text, limit,
                      describe(r));
        } else {
            char quoted[16];
            snprintf(quoted, sizeof quoted, "'%s'", cases[i].ns);
            int names_limit = strstr(r->str, limit) != NULL ||
                              strstr(r->str, cases[i].ns[0] == 't' ? "86400" : "3600") != NULL ||
                              strstr(r->str, cases[i].ns[0] == 't' ? "24h" : "60m") != NULL;
            if (strstr(r->str, quoted) == NULL || !names_limit)
                fail_note(&f, text, "[%s] %s: expected the error to name namespace %s and limit %s, got %s",
                          cases[i].ns, text, quoted, limit, describe(r));
        }
        freeReplyObject(r);
        long long got = pttl(dc, key);
        if (got < 500000 - TOLERANCE_MS || got > 500000)
            fail_note(&f, text, "[%s] %s: expected the key's PTTL unchanged (~500000), got %lld", cases[i].ns, text,
                      got);
        r = cmd(dc, "GET %s", key);
        if (!(r->type == REDIS_REPLY_STRING && strcmp(r->str, "old") == 0))
            fail_note(&f, text, "[%s] %s: expected the value unchanged (\"old\"), got %s", cases[i].ns, text,
                      describe(r));
        freeReplyObject(r);
        redisFree(dc);
    }
    /* exactly max-ttl is allowed */
    redisContext *dc = direct("cache");
    expect_ok_reply(cmd(dc, "SET t:max:edge old"), "setup");
    {
        redisReply *r = cmd(kc, "EXPIRE t:max:edge 86400");
        if (!(r->type == REDIS_REPLY_INTEGER && r->integer == 1))
            fail_note(&f, "EXPIRE", "[t:] EXPIRE t:max:edge 86400 (= max-ttl): expected :1, got %s", describe(r));
        freeReplyObject(r);
        r = cmd(kc, "SET t:max:edge2 v EX 86400");
        if (r->type != REDIS_REPLY_STATUS)
            fail_note(&f, "SET", "[t:] SET t:max:edge2 v EX 86400 (= max-ttl): expected +OK, got %s", describe(r));
        freeReplyObject(r);
    }
    /* ttl=none without max-ttl refuses nothing */
    redisReply *r = cmd(kc, "SET n:max:a v EX 9000000");
    if (r->type != REDIS_REPLY_STATUS)
        fail_note(&f, "SET", "[n:] SET n:max:a v EX 9000000: expected +OK (no max-ttl), got %s", describe(r));
    freeReplyObject(r);
    redisFree(dc);
    redisFree(kc);
    ck_assert_msg(f.count == 0, "max-ttl: %d failure(s) in: %s", f.count, f.commands);
}
END_TEST

/* ---- 5. PERSIST ---- */

START_TEST(test_persist_refused_in_ttl_namespace_forwarded_in_ttl_none)
{
    redisContext *kc = client(), *dc = direct("cache");
    expect_ok_reply(cmd(dc, "SET t:persist:a v EX 500"), "setup");
    redisReply *r = cmd(kc, "PERSIST t:persist:a");
    ck_assert_msg(is_error(r, "DENIED") && strstr(r->str, "t:") != NULL,
                  "PERSIST t:persist:a: expected -DENIED naming 't:', got %s", describe(r));
    freeReplyObject(r);
    long long got = pttl(dc, "t:persist:a");
    ck_assert_msg(got > 500000 - TOLERANCE_MS && got <= 500000,
                  "after refused PERSIST: expected PTTL ~500000, got %lld", got);
    r = cmd(kc, "GETEX t:persist:a PERSIST");
    ck_assert_msg(is_error(r, "DENIED"), "GETEX t:persist:a PERSIST: expected -DENIED, got %s", describe(r));
    freeReplyObject(r);
    got = pttl(dc, "t:persist:a");
    ck_assert_msg(got > 500000 - TOLERANCE_MS && got <= 500000,
                  "after refused GETEX PERSIST: expected PTTL ~500000, got %lld", got);

    expect_ok_reply(cmd(dc, "SET n:persist:a v EX 500"), "setup");
    ck_assert_int_eq(reply_int(cmd(kc, "PERSIST n:persist:a"), "PERSIST n:persist:a"), 1);
    ck_assert_int_eq(pttl(dc, "n:persist:a"), -1);
    expect_ok_reply(cmd(dc, "PEXPIRE n:persist:a 500000"), "setup");
    r = cmd(kc, "GETEX n:persist:a PERSIST");
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, "v") == 0, "GETEX n:persist:a PERSIST: got %s",
                  describe(r));
    freeReplyObject(r);
    ck_assert_int_eq(pttl(dc, "n:persist:a"), -1);
    redisFree(dc);
    redisFree(kc);
}
END_TEST

/* ---- 6. KEEPTTL and non-positive EXPIRE ---- */

START_TEST(test_keepttl_and_nonpositive_expire)
{
    redisContext *kc = client(), *dc = direct("cache");
    expect_ok_reply(cmd(kc, "SET t:keep:k v KEEPTTL"), "SET t:keep:k v KEEPTTL");
    long long got = pttl(dc, "t:keep:k");
    ck_assert_msg(got > 3600000 - TOLERANCE_MS && got <= 3600000,
                  "SET t:keep:k v KEEPTTL on a new key: expected PTTL ~3600000, got %lld", got);
    expect_ok_reply(cmd(dc, "PEXPIRE t:keep:k 100000"), "setup");
    expect_ok_reply(cmd(kc, "SET t:keep:k v2 KEEPTTL"), "SET t:keep:k v2 KEEPTTL");
    got = pttl(dc, "t:keep:k");
    ck_assert_msg(got > 100000 - TOLERANCE_MS && got <= 100000,
                  "SET KEEPTTL on a key with TTL 100 s: expected PTTL ~100000 (kept), got %lld", got);

    const char *zero[] = {"EXPIRE %s 0", "EXPIRE %s -1", "PEXPIRE %s 0", "EXPIREAT %s 1", "PEXPIREAT %s 1"};
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++) {
        char key[32];
        snprintf(key, sizeof key, "t:zero:%zu", i);
        expect_ok_reply(cmd(dc, "SET %s v", key), "setup");
        redisReply *r = cmd(kc, zero[i], key);
        ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer == 1, "%s on %s: expected :1 (deletes), got %s",
                      zero[i], key, describe(r));
        freeReplyObject(r);
        ck_assert_msg(reply_int(cmd(dc, "EXISTS %s", key), "EXISTS") == 0, "%s on %s: expected the key gone", zero[i],
                      key);
    }
    redisFree(dc);
    redisFree(kc);
}
END_TEST

/* ---- 7. keys of several namespaces in one command: each gets its own namespace's TTL ---- */

START_TEST(test_each_key_gets_its_own_namespace_ttl)
{
    redisContext *kc = client(), *dc = direct("cache");
    struct failures f = {0};
    struct {
        const char *setup, *invoke, *ttl_key, *none_key;
    } cases[] = {
        {"SET u:mix:1 v", "RENAME u:mix:1 t:mix:1", "t:mix:1", NULL},
        {"SET u:mix:2 v", "COPY u:mix:2 t:mix:2", "t:mix:2", "u:mix:2"},
        {"RPUSH u:mix:3 a b", "LMOVE u:mix:3 t:mix:3 LEFT RIGHT", "t:mix:3", "u:mix:3"},
        {"SADD u:mix:4 a b", "SMOVE u:mix:4 t:mix:4 a", "t:mix:4", "u:mix:4"},
        {"SADD u:mix:5 a b", "SUNIONSTORE t:mix:5 u:mix:5", "t:mix:5", "u:mix:5"},
        {"SADD t:mix:6 a b", "SUNIONSTORE n:mix:6 t:mix:6", NULL, "n:mix:6"},
        {NULL, "MSET t:mix:7 a n:mix:7 b", "t:mix:7", "n:mix:7"},
        {"RPUSH t:mix:8 a b", "RPOPLPUSH t:mix:8 n:mix:8", "t:mix:8", "n:mix:8"},
        {"SET t:mix:9 v", "RENAME t:mix:9 n:mix:9", NULL, "n:mix:9"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].setup) expect_ok_reply(cmd(dc, cases[i].setup), cases[i].setup);
        redisReply *r = cmd(kc, cases[i].invoke);
        if (r->type == REDIS_REPLY_ERROR) {
            fail_note(&f, cases[i].invoke, "%s: expected a reply, got %s", cases[i].invoke, describe(r));
            freeReplyObject(r);
            continue;
        }
        freeReplyObject(r);
        if (cases[i].ttl_key) {
            long long got = pttl(dc, cases[i].ttl_key);
            if (got < 3600000 - TOLERANCE_MS || got > 3600000)
                fail_note(&f, cases[i].invoke, "%s: key %s: expected PTTL ~3600000 (t:'s ttl), got %lld",
                          cases[i].invoke, cases[i].ttl_key, got);
        }
        if (cases[i].none_key) {
            long long got = pttl(dc, cases[i].none_key);
            if (got != -1)
                fail_note(&f, cases[i].invoke, "%s: key %s: expected PTTL -1 (ttl=none namespace), got %lld",
                          cases[i].invoke, cases[i].none_key, got);
        }
    }
    /* A TTL carried into t: from a ttl-less namespace must still respect t:'s max-ttl (1d). */
    const char *carry[] = {"RENAME u:carry:1 t:carry:1", "COPY u:carry:2 t:carry:2"};
    const char *src[] = {"u:carry:1", "u:carry:2"}, *dst[] = {"t:carry:1", "t:carry:2"};
    for (int i = 0; i < 2; i++) {
        expect_ok_reply(cmd(dc, "SET %s v EX 432000", src[i]), "setup 5d TTL");
        redisReply *r = cmd(kc, carry[i]);
        long long got = pttl(dc, dst[i]);
        if (is_error(r, "DENIED")) {
            if (got != -2)
                fail_note(&f, carry[i], "%s: refused, expected %s not created, got PTTL %lld", carry[i], dst[i], got);
        } else if (r->type == REDIS_REPLY_ERROR || got <= 0 || got > 86400000) {
            fail_note(&f, carry[i],
                      "%s (source TTL 5d): expected -DENIED or PTTL in (0, 86400000], got reply %s, "
                      "PTTL %lld",
                      carry[i], describe(r), got);
        }
        freeReplyObject(r);
    }
    redisFree(dc);
    redisFree(kc);
    ck_assert_msg(f.count == 0, "mixed namespaces: %d failure(s) in: %s", f.count, f.commands);
}
END_TEST

/* ---- 8. reply fidelity: an explicit sample (the fidelity walk covers every row) ---- */

START_TEST(test_reply_fidelity_sample)
{
    /* {K} is key number k1, {K2} key number k2: the same sequence runs through keygate on
     * "t:fid:N" and directly on "n:fid:N", and every reply must be equal. */
    static const struct {
        const char *text;
        int k1, k2;
    } sample[] = {
        {"HSET {K} a 1 b 2", 1, 0},  {"LPUSH {K} a b c", 2, 0},     {"SADD {K} a b a", 3, 0},
        {"INCR {K}", 4, 0},          {"APPEND {K} hello", 5, 0},    {"SETNX {K} v", 6, 0},
        {"SETNX {K} w", 6, 0},       {"GETSET {K} x", 6, 0},        {"SET {K} y GET", 6, 0},
        {"SET {K} v", 7, 0},         {"RENAME {K} {K2}", 7, 8},     {"COPY {K} {K2}", 8, 9},
        {"COPY {K} {K2}", 8, 9},     {"HSET {K} a 3", 1, 0},        {"LPUSH {K} d", 2, 0},
        {"INCRBY {K} 10", 4, 0},     {"HINCRBY {K} c 2", 1, 0},     {"ZADD {K} 1 a", 10, 0},
        {"EXPIRE {K} 100", 10, 0},   {"SET {K} v NX GET", 11, 0},   {"LPOP {K}", 2, 0},
        {"SMOVE {K} {K2} a", 3, 12}, {"RPOPLPUSH {K} {K2}", 2, 13},
    };
    redisContext *kc = client(), *dc = direct("cache");
    struct failures f = {0};
    for (size_t i = 0; i < sizeof sample / sizeof sample[0]; i++) {
        char tk[2][32], nk[2][32];
        snprintf(tk[0], sizeof tk[0], "t:fid:%d", sample[i].k1);
        snprintf(tk[1], sizeof tk[1], "t:fid:%d", sample[i].k2);
        snprintf(nk[0], sizeof nk[0], "n:fid:%d", sample[i].k1);
        snprintf(nk[1], sizeof nk[1], "n:fid:%d", sample[i].k2);
        struct inv_values tv = {{tk[0], tk[1], ""}, "", ""}, nv = {{nk[0], nk[1], ""}, "", ""};
        struct inv_cmd via, plain;
        ck_assert_int_gt(inv_parse(sample[i].text, strlen(sample[i].text), &tv, &via), 0);
        ck_assert_int_gt(inv_parse(sample[i].text, strlen(sample[i].text), &nv, &plain), 0);
        redisReply *a = cmd_argv(kc, &via), *b = cmd_argv(dc, &plain);
        if (!reply_equal(a, b, &tv, &nv, 0)) {
            char got[512], what[160];
            describe_into(a, got, sizeof got);
            snprintf(what, sizeof what, "%s", cmd_text(&via));
            fail_note(&f, what, "%s: reply fidelity: expected %s (Redis's reply to %s), got %s", what, describe(b),
                      cmd_text(&plain), got);
        }
        freeReplyObject(a);
        freeReplyObject(b);
    }
    redisFree(dc);
    redisFree(kc);
    ck_assert_msg(f.count == 0, "reply fidelity sample: %d failure(s) in: %s", f.count, f.commands);
}
END_TEST

/* ---- 9. atomicity seen in INFO commandstats ---- */

/* calls= of one command in INFO commandstats (0 when absent). */
static long long stat_calls(const char *info, const char *name)
{
    char needle[64];
    snprintf(needle, sizeof needle, "cmdstat_%s:calls=", name);
    const char *p = strstr(info, needle);
    return p ? strtoll(p + strlen(needle), NULL, 10) : 0;
}

struct cmdstats {
    long long multi, exec, expire, set, hset;
};

static void read_cmdstats(redisContext *dc, struct cmdstats *s)
{
    redisReply *r = cmd(dc, "INFO commandstats");
    ck_assert_msg(r->type == REDIS_REPLY_STRING, "INFO: %s", describe(r));
    s->multi = stat_calls(r->str, "multi");
    s->exec = stat_calls(r->str, "exec");
    s->expire = stat_calls(r->str, "expire") + stat_calls(r->str, "pexpire") + stat_calls(r->str, "expireat") +
                stat_calls(r->str, "pexpireat");
    s->set = stat_calls(r->str, "set");
    s->hset = stat_calls(r->str, "hset");
    freeReplyObject(r);
}

START_TEST(test_atomicity_commandstats)
{
    redisContext *kc = client(), *dc = direct("cache");
    struct cmdstats a, b;

    read_cmdstats(dc, &a);
    ck_assert_int_eq(reply_int(cmd(kc, "HSET t:atom:h f v"), "HSET t:atom:h f v"), 1);
    read_cmdstats(dc, &b);
    ck_assert_msg(b.hset - a.hset == 1, "HSET through keygate: expected cmdstat_hset +1, got %+lld", b.hset - a.hset);
    ck_assert_msg(b.multi - a.multi == 1 && b.exec - a.exec == 1 && b.expire - a.expire == 1,
                  "HSET t:atom:h f v: expected MULTI +1, EXEC +1, (P)EXPIRE +1 (write and TTL in one transaction), "
                  "got MULTI %+lld, EXEC %+lld, (P)EXPIRE %+lld",
                  b.multi - a.multi, b.exec - a.exec, b.expire - a.expire);

    read_cmdstats(dc, &a);
    expect_ok_reply(cmd(kc, "SET t:atom:s v"), "SET t:atom:s v");
    read_cmdstats(dc, &b);
    ck_assert_msg(b.set - a.set == 1 && b.multi == a.multi && b.expire == a.expire,
                  "SET t:atom:s v: expected one SET carrying EX (SET +1, MULTI +0, (P)EXPIRE +0), got SET %+lld, "
                  "MULTI %+lld, (P)EXPIRE %+lld",
                  b.set - a.set, b.multi - a.multi, b.expire - a.expire);
    long long got = pttl(dc, "t:atom:s");
    ck_assert_msg(got > 3600000 - TOLERANCE_MS && got <= 3600000, "SET t:atom:s v: expected PTTL ~3600000, got %lld",
                  got);

    /* a ttl=none namespace: no transaction at all */
    read_cmdstats(dc, &a);
    ck_assert_int_eq(reply_int(cmd(kc, "HSET n:atom:h f v"), "HSET n:atom:h f v"), 1);
    read_cmdstats(dc, &b);
    ck_assert_msg(b.multi == a.multi && b.expire == a.expire,
                  "HSET n:atom:h (ttl=none): expected no MULTI and no EXPIRE, got MULTI %+lld, (P)EXPIRE %+lld",
                  b.multi - a.multi, b.expire - a.expire);
    redisFree(dc);
    redisFree(kc);
}
END_TEST

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    Suite *s = suite_create("ttl");
    TCase *tc = harness_tcase(s, "ttl", 300, setup, teardown);
    harness_add_test(tc, test_every_write_command_is_covered);
    harness_add_test(tc, test_walk_ttl_namespace);
    harness_add_test(tc, test_walk_durable_ttl_namespace);
    harness_add_test(tc, test_walk_ttl_none_namespace);
    harness_add_test(tc, test_walk_reply_fidelity);
    harness_add_test(tc, test_walk_atomicity_monitor);
    harness_add_test(tc, test_sliding_every_touch_resets_ttl);
    harness_add_test(tc, test_client_ttl_is_kept_and_never_extended);
    harness_add_test(tc, test_ttl_above_max_ttl_is_refused_and_changes_nothing);
    harness_add_test(tc, test_persist_refused_in_ttl_namespace_forwarded_in_ttl_none);
    harness_add_test(tc, test_keepttl_and_nonpositive_expire);
    harness_add_test(tc, test_each_key_gets_its_own_namespace_ttl);
    harness_add_test(tc, test_reply_fidelity_sample);
    harness_add_test(tc, test_atomicity_commandstats);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
