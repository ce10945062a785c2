/* test_getkeys.c: differential test of keygate's key finder against a live redis-server (COMMAND GETKEYS and real
 * execution). */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "commands.h"
#include "harness.h"
#include "resp.h"

/*
 * For every command of the table that has keys, a corpus of argument forms is made
 * from the command's COMMAND DOCS argument tree (the table's docs_resp):
 *
 *   bases      the minimal form; each optional argument alone; every optional
 *              argument; each other choice of every oneof; repeated "multiple"
 *              arguments; each option moved to the front of the options
 *   mutations  of every base: each option word NUL-suffixed ("STORE\0") and in mixed
 *              case; each option repeated (its keys renamed, so the winner shows);
 *              each value replaced by a keyword of the command (a group named
 *              STREAMS, a member named STORE); key counts 0, -1, "01", " 1", too
 *              many, ...; the last one or two arguments dropped
 *
 * Each form runs on a scratch connection to the cache backend (plain port):
 *
 *   FLUSHALL; every argument of the form created as a key of the command's type
 *   OBJECT FREQ of each  (maxmemory-policy allkeys-lfu, lfu-log-factor 0: every
 *                         lookup of a key increments its counter)
 *   PUBLISH mark B  MULTI  <form>  EXEC  PUBLISH mark E   (MULTI: nothing blocks)
 *   OBJECT FREQ of each again; COMMAND GETKEYS <form>
 *
 * and a subscriber collects the keyspace notifications between the marks. The keys
 * execution touched (T) are those whose counter moved plus those notified (written,
 * deleted, renamed). keygate's command_find_keys_err gives K (or -1 and a text),
 * COMMAND GETKEYS gives G. A form passes when
 *
 *   K = -1:  Redis's execution fails too, with exactly K's text (unless Redis fails
 *            first on the data: WRONGTYPE, NOGROUP, a GEORADIUSBYMEMBER member not in
 *            the set: counted as data-first)
 *   K keys:  T is within K, and K = G, or K differs from G only where execution
 *            shows GETKEYS is wrong (K's extra keys touched, G's extra keys not):
 *            a GETKEYS-vs-execution disagreement, counted and listed.
 *
 * Keys read by commands that look keys up without touching them (EXISTS, TYPE, TTL)
 * do not show in T; for them K must equal G.
 */

static struct harness h;

static void setup(void)
{
    ck_assert_msg(harness_start(&h, NULL) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_stop(&h);
}

/* ---- the COMMAND DOCS argument tree ---- */

#define MAX_NODES 160
#define MAX_KIDS 24

struct dnode {
    char name[48];
    char type[16];
    char token[40];
    int has_token;
    int optional, multiple, multiple_token;
    int parent;
    int kids[MAX_KIDS];
    int nkids;
};

struct dtree {
    struct dnode n[MAX_NODES];
    int count;
    int top[MAX_KIDS * 2];
    int ntop;
};

/* A RESP2 value of the docs (hiredis 0.14's reader stops at 7 levels; the docs nest deeper). */
struct rnode {
    char kind; /* '$' '+' ':' '*' */
    const char *str;
    size_t len;
    struct rnode **el;
    size_t n;
};

static struct rnode *resp_parse(const char **p, const char *end)
{
    struct rnode *r = calloc(1, sizeof(*r));
    ck_assert_ptr_nonnull(r);
    ck_assert(*p < end);
    r->kind = **p;
    const char *line = *p + 1;
    const char *crlf = strstr(line, "\r\n");
    ck_assert(crlf && crlf < end);
    *p = crlf + 2;
    if (r->kind == '$') {
        r->len = (size_t)strtoull(line, NULL, 10);
        r->str = *p;
        *p += r->len + 2;
    } else if (r->kind == '*') {
        r->n = (size_t)strtoull(line, NULL, 10);
        r->el = calloc(r->n ? r->n : 1, sizeof(*r->el));
        for (size_t i = 0; i < r->n; i++) r->el[i] = resp_parse(p, end);
    } else {
        r->str = line;
        r->len = (size_t)(crlf - line);
    }
    return r;
}

static void resp_free(struct rnode *r)
{
    for (size_t i = 0; i < r->n; i++) resp_free(r->el[i]);
    free(r->el);
    free(r);
}

static int resp_is(const struct rnode *r, const char *s)
{
    return r->kind != '*' && r->len == strlen(s) && memcmp(r->str, s, r->len) == 0;
}

static const struct rnode *map_get(const struct rnode *m, const char *key)
{
    if (!m || m->kind != '*') return NULL;
    for (size_t i = 0; i + 1 < m->n; i += 2) {
        if (resp_is(m->el[i], key)) return m->el[i + 1];
    }
    return NULL;
}

static void copy_str(char *dst, size_t size, const struct rnode *r)
{
    snprintf(dst, size, "%.*s", (int)r->len, r->str);
}

static int tree_add(struct dtree *t, const struct rnode *arg, int parent)
{
    ck_assert_int_lt(t->count, MAX_NODES);
    int id = t->count++;
    struct dnode *d = &t->n[id];
    memset(d, 0, sizeof(*d));
    d->parent = parent;
    const struct rnode *v;
    if ((v = map_get(arg, "name"))) copy_str(d->name, sizeof(d->name), v);
    if ((v = map_get(arg, "type"))) copy_str(d->type, sizeof(d->type), v);
    if ((v = map_get(arg, "token"))) {
        copy_str(d->token, sizeof(d->token), v);
        d->has_token = 1;
    }
    if ((v = map_get(arg, "flags")) && v->kind == '*') {
        for (size_t i = 0; i < v->n; i++) {
            d->optional |= resp_is(v->el[i], "optional");
            d->multiple |= resp_is(v->el[i], "multiple");
            d->multiple_token |= resp_is(v->el[i], "multiple_token");
        }
    }
    if ((v = map_get(arg, "arguments")) && v->kind == '*') {
        for (size_t i = 0; i < v->n; i++) {
            int kid = tree_add(t, v->el[i], id);
            ck_assert_int_lt(t->n[id].nkids, MAX_KIDS);
            t->n[id].kids[t->n[id].nkids++] = kid;
        }
    }
    return id;
}

/* The argument tree of cmd from its docs_resp ("$len name" then the docs map). */
static void tree_of(const struct command_def *cmd, struct dtree *t)
{
    const char *p = cmd->docs_resp, *end = cmd->docs_resp + cmd->docs_resp_len;
    struct rnode *name = resp_parse(&p, end);
    struct rnode *docs = resp_parse(&p, end);
    t->count = 0;
    t->ntop = 0;
    const struct rnode *args = map_get(docs, "arguments");
    if (args && args->kind == '*') {
        for (size_t i = 0; i < args->n; i++) {
            ck_assert_int_lt(t->ntop, (int)(sizeof(t->top) / sizeof(t->top[0])));
            t->top[t->ntop++] = tree_add(t, args->el[i], -1);
        }
    }
    resp_free(name);
    resp_free(docs);
}

/* ---- forms ---- */

#define MAX_ARGV 48
#define ARG_MAX 200

enum role { R_NAME, R_TOKEN, R_KEY, R_VALUE, R_NUMKEYS };

struct form {
    int argc;
    char a[MAX_ARGV][ARG_MAX];
    size_t len[MAX_ARGV];
    unsigned char role[MAX_ARGV];
    short span_end[MAX_ARGV]; /* R_TOKEN: one past the option's last value */
};

static void form_push(struct form *f, const char *s, size_t len, enum role role)
{
    ck_assert_int_lt(f->argc, MAX_ARGV);
    ck_assert_uint_lt(len, ARG_MAX);
    memcpy(f->a[f->argc], s, len);
    f->a[f->argc][len] = '\0';
    f->len[f->argc] = len;
    f->role[f->argc] = (unsigned char)role;
    f->span_end[f->argc] = (short)(f->argc + 1);
    f->argc++;
}

static int form_same(const struct form *x, const struct form *y)
{
    if (x->argc != y->argc) return 0;
    for (int i = 0; i < x->argc; i++) {
        if (x->len[i] != y->len[i] || memcmp(x->a[i], y->a[i], x->len[i]) != 0) return 0;
    }
    return 1;
}

static const char *SCRIPT = "for _,k in ipairs(KEYS) do redis.pcall('GET',k) end return 1";
static char script_sha[41];

/* Values that make a form executable where the docs' type says too little. */
static const char *value_for(const char *cmd, const struct dnode *d)
{
    if (strncmp(cmd, "eval", 4) == 0 && strcmp(d->name, "script") == 0) return SCRIPT;
    if (strncmp(cmd, "evalsha", 7) == 0 && strcmp(d->name, "sha1") == 0) return script_sha;
    if (strncmp(cmd, "fcall", 5) == 0 && strcmp(d->name, "function") == 0) return "kgf";
    if (strcmp(cmd, "migrate") == 0 && strcmp(d->name, "host") == 0) return "127.0.0.1";
    if (strcmp(cmd, "migrate") == 0 && strcmp(d->name, "port") == 0) return "1"; /* nothing listens: IOERR at once */
    if (strncmp(cmd, "xread", 5) == 0 && strcmp(d->name, "id") == 0) return strcmp(cmd, "xreadgroup") == 0 ? ">" : "0";
    if (strcmp(cmd, "bitop") == 0 && strcmp(d->name, "operation") == 0) return "AND";
    if (strcmp(cmd, "lset") == 0 && strcmp(d->name, "index") == 0) return "0";
    if (strstr(cmd, "lex") && (strcmp(d->name, "min") == 0 || strcmp(d->name, "max") == 0))
        return strcmp(d->name, "min") == 0 ? "-" : "+";
    if ((strcmp(cmd, "xrange") == 0 || strcmp(cmd, "xrevrange") == 0) &&
        (strcmp(d->name, "start") == 0 || strcmp(d->name, "end") == 0))
        return strcmp(d->name, "start") == 0 ? "-" : "+";
    if (strncmp(cmd, "xread", 5) != 0 && cmd[0] == 'x' && strcmp(d->type, "string") == 0) {
        if (strcmp(d->name, "id") == 0 || strcmp(d->name, "start") == 0 || strcmp(d->name, "last-id") == 0 ||
            strcmp(d->name, "max_deleted_entry_id") == 0)
            return "1-1"; /* the entry every created stream holds */
        if (strcmp(d->name, "min-idle-time") == 0 || strcmp(d->name, "threshold") == 0) return "1";
    }
    if (strncmp(cmd, "zrange", 6) == 0 && (strcmp(d->name, "start") == 0 || strcmp(d->name, "stop") == 0 ||
                                           strcmp(d->name, "min") == 0 || strcmp(d->name, "max") == 0))
        return "0";
    if (strcmp(cmd, "pfdebug") == 0 && strcmp(d->name, "subcommand") == 0) return "GETREG";
    if (strcmp(d->name, "groupname") == 0) return "g";
    if (strcmp(d->name, "consumername") == 0) return "c";
    if (strcmp(d->name, "member") == 0) return "m"; /* the member every created key holds */
    if (strcmp(d->name, "group") == 0) return "g";
    if (strcmp(d->name, "consumer") == 0) return "c";
    if (strcmp(d->type, "pattern") == 0) return "p"; /* no '*': SORT BY/GET look nothing up */
    if (strcmp(d->type, "string") == 0) return "v";
    return "1"; /* integer, double, unix-time */
}

/* What one base form includes: optional nodes, oneof choices, repeats. */
struct plan {
    unsigned char include[MAX_NODES];
    unsigned char choice[MAX_NODES];
    int repeat;
};

struct gen {
    const struct command_def *cmd;
    const struct dtree *t;
    const struct plan *p;
    struct form *f;
    int keyno;
};

static void emit(struct gen *g, int id);

static void emit_value(struct gen *g, int id)
{
    const struct dnode *d = &g->t->n[id];
    char buf[16];
    if (strcmp(d->type, "key") == 0) {
        snprintf(buf, sizeof(buf), "k%d", ++g->keyno);
        form_push(g->f, buf, strlen(buf), R_KEY);
    } else if (strcmp(d->type, "pure-token") == 0) {
        /* the token is all */
    } else if (strcmp(d->type, "oneof") == 0) {
        if (d->nkids > 0) emit(g, d->kids[g->p->choice[id] % d->nkids]);
    } else if (strcmp(d->type, "block") == 0) {
        for (int i = 0; i < d->nkids; i++) emit(g, d->kids[i]);
    } else {
        const char *v = value_for(g->cmd->name, d);
        form_push(g->f, v, strlen(v), strcmp(d->name, "numkeys") == 0 ? R_NUMKEYS : R_VALUE);
    }
}

static void emit(struct gen *g, int id)
{
    const struct dnode *d = &g->t->n[id];
    if (d->optional && !g->p->include[id]) return;
    int reps = d->multiple && g->p->repeat ? 2 : 1;
    for (int r = 0; r < reps; r++) {
        int start = g->f->argc;
        if (d->has_token && (r == 0 || d->multiple_token || !d->multiple))
            form_push(g->f, d->token, strlen(d->token), R_TOKEN);
        emit_value(g, id);
        if (d->has_token && start < g->f->argc) g->f->span_end[start] = (short)g->f->argc;
    }
}

/* A base form of cmd under plan p (argv[0] and, for a subcommand, argv[1] from the name). */
static void form_build(const struct command_def *cmd, const struct dtree *t, const struct plan *p, struct form *f)
{
    struct gen g = {cmd, t, p, f, 0};
    char name[64];
    snprintf(name, sizeof(name), "%s", cmd->name);
    f->argc = 0;
    char *bar = strchr(name, '|');
    if (bar) {
        *bar = '\0';
        form_push(f, name, strlen(name), R_NAME);
        form_push(f, bar + 1, strlen(bar + 1), R_NAME);
    } else {
        form_push(f, name, strlen(name), R_NAME);
    }
    for (int i = 0; i < t->ntop; i++) emit(&g, t->top[i]);
    /* a key count counts the keys after it */
    for (int i = 0; i < f->argc; i++) {
        if (f->role[i] != R_NUMKEYS) continue;
        int n = 0;
        for (int j = i + 1; j < f->argc; j++) n += f->role[j] == R_KEY;
        char buf[16];
        snprintf(buf, sizeof(buf), "%d", n);
        memcpy(f->a[i], buf, strlen(buf) + 1);
        f->len[i] = strlen(buf);
    }
}

struct corpus {
    struct form *f;
    int n, cap;
};

static void corpus_add(struct corpus *c, const struct form *f)
{
    for (int i = 0; i < c->n; i++) {
        if (form_same(&c->f[i], f)) return;
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->f = realloc(c->f, sizeof(struct form) * (size_t)c->cap);
        ck_assert_ptr_nonnull(c->f);
    }
    c->f[c->n++] = *f;
}

static void plan_include_path(const struct dtree *t, struct plan *p, int id)
{
    for (; id >= 0; id = t->n[id].parent) p->include[id] = 1;
}

/* The base forms of cmd (see the comment at the top). */
static void bases_of(const struct command_def *cmd, const struct dtree *t, struct corpus *out)
{
    struct plan p;
    struct form f;
    memset(&p, 0, sizeof(p));
    form_build(cmd, t, &p, &f);
    corpus_add(out, &f);
    for (int i = 0; i < t->count; i++) {
        if (!t->n[i].optional) continue;
        memset(&p, 0, sizeof(p));
        plan_include_path(t, &p, i);
        form_build(cmd, t, &p, &f);
        corpus_add(out, &f);
    }
    struct plan all;
    memset(&all, 0, sizeof(all));
    memset(all.include, 1, sizeof(all.include));
    form_build(cmd, t, &all, &f);
    corpus_add(out, &f);
    all.repeat = 1;
    form_build(cmd, t, &all, &f);
    corpus_add(out, &f);
    all.repeat = 0;
    for (int i = 0; i < t->count; i++) {
        if (strcmp(t->n[i].type, "oneof") != 0) continue;
        for (int c = 1; c < t->n[i].nkids; c++) {
            memset(&p, 0, sizeof(p));
            plan_include_path(t, &p, i);
            p.choice[i] = (unsigned char)c;
            plan_include_path(t, &p, t->n[i].kids[c]);
            form_build(cmd, t, &p, &f);
            corpus_add(out, &f);
            struct plan a2 = all;
            a2.choice[i] = (unsigned char)c;
            form_build(cmd, t, &a2, &f);
            corpus_add(out, &f);
        }
    }
    memset(&p, 0, sizeof(p));
    p.repeat = 1;
    form_build(cmd, t, &p, &f);
    corpus_add(out, &f);
}

/* f with the option span [s, e) moved to position `to` (< s). */
static void form_move(const struct form *f, int s, int e, int to, struct form *o)
{
    o->argc = 0;
    for (int i = 0; i < to; i++) form_push(o, f->a[i], f->len[i], f->role[i]);
    for (int i = s; i < e; i++) form_push(o, f->a[i], f->len[i], f->role[i]);
    for (int i = to; i < f->argc; i++) {
        if (i < s || i >= e) form_push(o, f->a[i], f->len[i], f->role[i]);
    }
}

static int is_key_word(const char *w)
{
    static const char *const words[] = {"STORE", "STOREDIST", "STREAMS", "KEYS", "GROUP", "BLOCK",
                                        "COUNT", "LIMIT",     "BY",      "GET",  "NOACK", "AUTH"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (strcmp(words[i], w) == 0) return 1;
    }
    return 0;
}

/* Every form of the corpus of cmd. */
static void corpus_of(const struct command_def *cmd, struct corpus *out)
{
    static struct dtree t;
    struct corpus bases = {0};
    struct form f;
    tree_of(cmd, &t);
    bases_of(cmd, &t, &bases);

    /* options moved to the front of the options */
    int nb = bases.n;
    static struct form base; /* a copy: corpus_add may move bases.f */
    for (int b = 0; b < nb; b++) {
        base = bases.f[b];
        const struct form *x = &base;
        int first = -1;
        for (int i = 0; i < x->argc; i++) {
            if (x->role[i] != R_TOKEN) continue;
            if (first < 0)
                first = i;
            else if (x->span_end[i] > i) {
                form_move(x, i, x->span_end[i], first, &f);
                corpus_add(&bases, &f);
            }
        }
    }

    /* the keywords of the command that locate keys */
    char words[16][40];
    int nwords = 0;
    for (int i = 0; i < t.count && nwords < 16; i++) {
        if (t.n[i].has_token && is_key_word(t.n[i].token)) {
            int dup = 0;
            for (int w = 0; w < nwords; w++) dup |= strcmp(words[w], t.n[i].token) == 0;
            if (!dup) snprintf(words[nwords++], sizeof(words[0]), "%s", t.n[i].token);
        }
    }

    for (int b = 0; b < bases.n; b++) {
        const struct form *x = &bases.f[b];
        corpus_add(out, x);
        for (int i = 0; i < x->argc; i++) {
            if (x->role[i] == R_TOKEN && x->len[i] > 0) {
                f = *x; /* NUL-suffixed */
                ck_assert_uint_lt(f.len[i] + 1, ARG_MAX);
                f.a[i][f.len[i]] = '\0';
                f.len[i]++;
                corpus_add(out, &f);
                f = *x; /* mixed case */
                for (size_t k = 0; k < f.len[i]; k++) {
                    char ch = f.a[i][k];
                    f.a[i][k] = (char)(k % 2 ? (ch >= 'A' && ch <= 'Z' ? ch + 32 : ch)
                                             : (ch >= 'a' && ch <= 'z' ? ch - 32 : ch));
                }
                corpus_add(out, &f);
                /* repeated right after itself, its keys renamed */
                int e = x->span_end[i];
                if (x->argc + (e - i) <= MAX_ARGV) {
                    f.argc = 0;
                    for (int k = 0; k < e; k++) form_push(&f, x->a[k], x->len[k], x->role[k]);
                    for (int k = i; k < e; k++) {
                        char buf[ARG_MAX + 2];
                        if (x->role[k] == R_KEY)
                            snprintf(buf, sizeof(buf), "r%s", x->a[k]);
                        else
                            memcpy(buf, x->a[k], x->len[k] + 1);
                        form_push(&f, buf, x->role[k] == R_KEY ? strlen(buf) : x->len[k], x->role[k]);
                    }
                    for (int k = e; k < x->argc; k++) form_push(&f, x->a[k], x->len[k], x->role[k]);
                    corpus_add(out, &f);
                }
            }
            if (x->role[i] == R_KEY || x->role[i] == R_VALUE) {
                for (int w = 0; w < nwords; w++) {
                    f = *x;
                    memcpy(f.a[i], words[w], strlen(words[w]) + 1);
                    f.len[i] = strlen(words[w]);
                    corpus_add(out, &f);
                }
            }
            if (x->role[i] == R_NUMKEYS) {
                static const struct {
                    const char *s;
                    size_t len;
                } counts[] = {{"0", 1},  {"-1", 2}, {"01", 2}, {" 1", 2}, {"1 ", 2}, {"+1", 2},
                              {"-0", 2}, {"x", 1},  {"2", 1},  {"3", 1},  {"99", 2}, {"1\0", 2}};
                for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                    f = *x;
                    memcpy(f.a[i], counts[c].s, counts[c].len);
                    f.a[i][counts[c].len] = '\0';
                    f.len[i] = counts[c].len;
                    corpus_add(out, &f);
                }
            }
        }
        int names = strchr(cmd->name, '|') ? 2 : 1;
        for (int drop = 1; drop <= 2 && x->argc - drop >= names; drop++) {
            f = *x;
            f.argc -= drop;
            corpus_add(out, &f);
        }
    }
    free(bases.f);
}

/* ---- running a form ---- */

/* Keys of a form as a list of distinct byte strings. */
struct kset {
    int n;
    const char *s[MAX_ARGV * 4];
    size_t len[MAX_ARGV * 4];
    char pool[MAX_ARGV * 4][ARG_MAX + 8];
};

static int kset_has(const struct kset *k, const char *s, size_t len)
{
    for (int i = 0; i < k->n; i++) {
        if (k->len[i] == len && memcmp(k->s[i], s, len) == 0) return 1;
    }
    return 0;
}

static void kset_add(struct kset *k, const char *s, size_t len)
{
    if (len > ARG_MAX || kset_has(k, s, len)) return;
    ck_assert_int_lt(k->n, MAX_ARGV * 4);
    memcpy(k->pool[k->n], s, len);
    k->s[k->n] = k->pool[k->n];
    k->len[k->n] = len;
    k->n++;
}

static int kset_within(const struct kset *a, const struct kset *b)
{
    for (int i = 0; i < a->n; i++) {
        if (!kset_has(b, a->s[i], a->len[i])) return 0;
    }
    return 1;
}

static void describe_form(const struct form *f, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < f->argc && used + 8 < len; i++) {
        used += (size_t)snprintf(buf + used, len - used, "%s", i ? " " : "");
        for (size_t k = 0; k < f->len[i] && used + 6 < len; k++) {
            unsigned char ch = (unsigned char)f->a[i][k];
            if (ch == 0)
                used += (size_t)snprintf(buf + used, len - used, "\\0");
            else if (ch == ' ')
                used += (size_t)snprintf(buf + used, len - used, "\\s");
            else
                buf[used++] = (char)ch, buf[used] = '\0';
        }
        if (f->len[i] == 0) used += (size_t)snprintf(buf + used, len - used, "\"\"");
    }
}

static void describe_kset(const struct kset *k, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < k->n && used + 4 < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%.*s", i ? "," : "", (int)k->len[i], k->s[i]);
}

struct tally {
    int forms, agreed, refused, data_first, disagreements, failures;
    int executed;     /* forms Redis executed without an error */
    int cmd_failures; /* of the command being checked */
    int cmd_executed;
};

/* The command that creates key `k` with the type the command works on. */
static void append_create(redisContext *c, const struct command_def *cmd, const char *k, size_t klen)
{
    const char *argv[6];
    size_t len[6];
    int n = 0;
#define ARG(s) (argv[n] = (s), len[n] = strlen(s), n++)
    if (cmd->acl & ACL_GEO) {
        ARG("GEOADD"), argv[n] = k, len[n++] = klen, ARG("15"), ARG("37"), ARG("m");
    } else if (cmd->acl & ACL_LIST) {
        ARG("RPUSH"), argv[n] = k, len[n++] = klen, ARG("1");
    } else if (cmd->acl & ACL_SORTEDSET) {
        ARG("ZADD"), argv[n] = k, len[n++] = klen, ARG("1"), ARG("m");
    } else if (cmd->acl & ACL_SET) {
        ARG("SADD"), argv[n] = k, len[n++] = klen, ARG("m");
    } else if (cmd->acl & ACL_HASH) {
        ARG("HSET"), argv[n] = k, len[n++] = klen, ARG("f"), ARG("1");
    } else if (cmd->acl & ACL_STREAM) {
        ARG("XADD"), argv[n] = k, len[n++] = klen, ARG("1-1"), ARG("f"), ARG("1");
    } else if (cmd->acl & ACL_HYPERLOGLOG) {
        ARG("PFADD"), argv[n] = k, len[n++] = klen, ARG("m");
    } else {
        ARG("SET"), argv[n] = k, len[n++] = klen, ARG("1");
    }
#undef ARG
    redisAppendCommandArgv(c, n, argv, len);
}

static int reply_is_error(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR;
}

/* Read the subscriber until the mark message `want`; collect keyspace keys into k when k. */
static void sub_until(redisContext *sub, const char *want, struct kset *k)
{
    for (long long deadline = now_ms() + 10000;;) {
        ck_assert_msg(now_ms() < deadline, "subscriber: no mark message '%s' within 10 s", want);
        redisReply *r = next_reply(sub);
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements >= 3, "subscriber: %s", describe(r));
        const redisReply *chan = r->element[r->elements - 2];
        const redisReply *msg = r->element[r->elements - 1];
        if (strcmp(r->element[0]->str, "message") == 0 && strcmp(chan->str, "kgmark") == 0) {
            int done = strcmp(msg->str, want) == 0;
            freeReplyObject(r);
            if (done) return;
            continue;
        }
        if (k && strcmp(r->element[0]->str, "pmessage") == 0) {
            const char *p = strstr(chan->str + 11, "__:"); /* "__keyspace@<db>__:<key>" */
            if (p) kset_add(k, p + 3, chan->len - (size_t)(p + 3 - chan->str));
        }
        freeReplyObject(r);
    }
}

static void check_form(redisContext *c, redisContext *sub, const struct command_def *cmd, const struct form *f,
                       struct tally *t, int seq)
{
    const char *argv[MAX_ARGV + 2];
    size_t len[MAX_ARGV + 2];
    struct kset *pop = calloc(1, sizeof(*pop));
    struct kset *touched = calloc(1, sizeof(*touched));
    struct kset *kk = calloc(1, sizeof(*kk));
    struct kset *gk = calloc(1, sizeof(*gk));
    char mark_b[32], mark_e[32];
    int nrep = 0;

    /* keygate */
    struct key_ref refs[MAX_ARGV];
    char kerr[256] = "";
    int incomplete = 0;
    for (int i = 0; i < f->argc; i++) argv[i] = f->a[i], len[i] = f->len[i];
    int kn = command_find_keys_err(cmd, (size_t)f->argc, argv, len, refs, MAX_ARGV, &incomplete, kerr, sizeof(kerr));
    for (int i = 0; i < kn; i++) kset_add(kk, f->a[refs[i].index], f->len[refs[i].index]);

    int first_arg = strchr(cmd->name, '|') ? 2 : 1;
    for (int i = first_arg; i < f->argc; i++) kset_add(pop, f->a[i], f->len[i]);

    snprintf(mark_b, sizeof(mark_b), "B%d", seq);
    snprintf(mark_e, sizeof(mark_e), "E%d", seq);
    redisAppendCommand(c, "FLUSHALL"), nrep++;
    for (int i = 0; i < pop->n; i++) append_create(c, cmd, pop->s[i], pop->len[i]), nrep++;
    if (cmd->acl & ACL_STREAM) { /* groups named after every argument, so XREADGROUP finds its group */
        for (int i = 0; i < pop->n; i++) {
            for (int j = 0; j < pop->n; j++)
                redisAppendCommand(c, "XGROUP CREATE %b %b 0", pop->s[i], pop->len[i], pop->s[j], pop->len[j]), nrep++;
        }
    }
    int freq_before = nrep;
    for (int i = 0; i < pop->n; i++) redisAppendCommand(c, "OBJECT FREQ %b", pop->s[i], pop->len[i]), nrep++;
    redisAppendCommand(c, "PUBLISH kgmark %s", mark_b), nrep++;
    int direct = (cmd->flags & CMD_NO_MULTI) != 0 || strcmp(cmd->name, "watch") == 0; /* refused in MULTI */
    int exec_at;
    if (!direct) redisAppendCommand(c, "MULTI"), nrep++;
    exec_at = nrep;
    redisAppendCommandArgv(c, f->argc, argv, len), nrep++;
    if (!direct)
        redisAppendCommand(c, "EXEC"), nrep++;
    else
        redisAppendCommand(c, "UNWATCH"), nrep++;
    redisAppendCommand(c, "PUBLISH kgmark %s", mark_e), nrep++;
    int freq_after = nrep;
    for (int i = 0; i < pop->n; i++) redisAppendCommand(c, "OBJECT FREQ %b", pop->s[i], pop->len[i]), nrep++;
    int getkeys_at = nrep;
    argv[0] = "COMMAND", len[0] = 7;
    argv[1] = "GETKEYS", len[1] = 7;
    for (int i = 0; i < f->argc; i++) argv[i + 2] = f->a[i], len[i + 2] = f->len[i];
    redisAppendCommandArgv(c, f->argc + 2, argv, len), nrep++;

    redisReply **rep = calloc((size_t)nrep, sizeof(*rep));
    for (int i = 0; i < nrep; i++) rep[i] = next_reply(c);
    sub_until(sub, mark_b, NULL);
    sub_until(sub, mark_e, touched);

    for (int i = 0; i < pop->n; i++) {
        const redisReply *b = rep[freq_before + i], *a = rep[freq_after + i];
        int changed = b->type != a->type || (b->type == REDIS_REPLY_INTEGER && b->integer != a->integer);
        if (changed) kset_add(touched, pop->s[i], pop->len[i]);
    }

    /* what executing answered: the queued reply's error, or EXEC's one element */
    const redisReply *exec = rep[exec_at];
    if (!direct && !reply_is_error(exec)) {
        const redisReply *e = rep[exec_at + 1];
        exec = (e->type == REDIS_REPLY_ARRAY && e->elements == 1) ? e->element[0] : e;
    }
    const redisReply *g = rep[getkeys_at];
    if (g->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < g->elements; i++) kset_add(gk, g->element[i]->str, g->element[i]->len);
    }

    char fdesc[600], a1[300], a2[300], a3[300];
    const char *why = NULL;
    t->forms++;
    if (!reply_is_error(exec)) t->executed++, t->cmd_executed++;
    if (incomplete) {
        why = "keygate reports the command incomplete";
    } else if (kn < 0) {
        if (!reply_is_error(exec)) {
            why = "keygate refuses a form Redis executes";
        } else if (strncmp(exec->str, "WRONGTYPE", 9) == 0 || strncmp(exec->str, "NOGROUP", 7) == 0 ||
                   strcmp(exec->str, "ERR could not decode requested zset member") == 0) {
            t->data_first++;
        } else if (strcmp(exec->str, kerr) != 0) {
            why = "keygate's error text is not Redis's";
        } else {
            t->refused++;
        }
    } else if (!kset_within(touched, kk)) {
        why = "execution touched a key keygate did not find";
    } else if (kset_within(kk, gk) && kset_within(gk, kk)) {
        t->agreed++;
    } else {
        int explained = touched->n > 0;
        for (int i = 0; i < kk->n && explained; i++)
            explained = kset_has(gk, kk->s[i], kk->len[i]) || kset_has(touched, kk->s[i], kk->len[i]);
        for (int i = 0; i < gk->n && explained; i++)
            explained = kset_has(kk, gk->s[i], gk->len[i]) || !kset_has(touched, gk->s[i], gk->len[i]);
        /* MIGRATE ... KEYS with no key after it: Redis migrates nothing (+NOKEY, though every
           argument exists as a key) while GETKEYS names the "" of argv[3] */
        if (!explained && exec->type == REDIS_REPLY_STATUS && strcmp(exec->str, "NOKEY") == 0 && touched->n == 0 &&
            kset_within(kk, gk))
            explained = 1;
        if (!explained) {
            why = "keygate's keys differ from COMMAND GETKEYS without execution showing GETKEYS wrong";
        } else {
            t->disagreements++;
            describe_form(f, fdesc, sizeof(fdesc));
            describe_kset(kk, a1, sizeof(a1));
            describe_kset(gk, a2, sizeof(a2));
            if (t->disagreements <= 12 || getenv("GETKEYS_VERBOSE"))
                fprintf(stderr, "getkeys: GETKEYS vs execution: %s: GETKEYS [%s], executed and keygate [%s]\n", fdesc,
                        a2, a1);
        }
    }
    if (why) {
        t->failures++;
        t->cmd_failures++;
        if (t->cmd_failures <= 3) {
            char g_desc[300], e_desc[300];
            describe_into(g, g_desc, sizeof(g_desc));
            describe_into(exec, e_desc, sizeof(e_desc));
            describe_form(f, fdesc, sizeof(fdesc));
            describe_kset(kk, a1, sizeof(a1));
            describe_kset(gk, a2, sizeof(a2));
            describe_kset(touched, a3, sizeof(a3));
            fprintf(stderr,
                    "getkeys: FAIL %s: %s\n  keygate %d [%s] %s\n  GETKEYS %s [%s]\n  executed %s, touched [%s]\n", why,
                    fdesc, kn, a1, kn < 0 ? kerr : "", g_desc, a2, e_desc, a3);
        }
    }
    for (int i = 0; i < nrep; i++) freeReplyObject(rep[i]);
    free(rep);
    free(pop);
    free(touched);
    free(kk);
    free(gk);
}

/* Commands with keys: a spec that is not NOT_KEY (SORT and MIGRATE included). */
static int has_keys(const struct command_def *cmd)
{
    for (int i = 0; i < cmd->nspecs; i++) {
        if (!(cmd->specs[i].flags & KS_NOT_KEY)) return 1;
    }
    return 0;
}

START_TEST(test_issue10_differential_key_extraction)
{
    redisContext *c = harness_must_direct(&h, "cache");
    redisContext *sub = harness_must_direct(&h, "cache");
    redisReply *r;

    expect_status(cmd(c, "CONFIG SET maxmemory-policy allkeys-lfu"), "OK", "lfu");
    expect_status(cmd(c, "CONFIG SET lfu-log-factor 0"), "OK", "lfu factor");
    expect_status(cmd(c, "CONFIG SET lfu-decay-time 0"), "OK", "lfu decay");
    expect_status(cmd(c, "CONFIG SET notify-keyspace-events KEA"), "OK", "notifications");
    r = cmd(c, "SCRIPT LOAD %s", SCRIPT);
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    snprintf(script_sha, sizeof(script_sha), "%s", r->str);
    freeReplyObject(r);
    r = cmd(c, "FUNCTION LOAD REPLACE %s",
            "#!lua name=kglib\nredis.register_function{function_name='kgf', callback=function(keys, args) "
            "for _,k in ipairs(keys) do redis.pcall('GET',k) end return 1 end, flags={'no-writes'}}");
    expect_bulk(r, "kglib", "function load");
    freeReplyObject(cmd(sub, "PSUBSCRIBE __keyspace@*__:*"));
    freeReplyObject(cmd(sub, "SUBSCRIBE kgmark"));

    struct tally t = {0};
    int commands = 0, seq = 0;
    char unexecuted[1024] = ""; /* commands none of whose forms Redis executed without an error */
    long long start = now_ms();
    for (size_t i = 0; i < command_table_len; i++) {
        const struct command_def *top = &command_table[i];
        int nsub = top->nsubcommands;
        for (int s = -1; s < nsub; s++) {
            const struct command_def *cd = s < 0 ? top : &top->subcommands[s];
            if (!has_keys(cd)) continue;
            if ((cd->flags & CMD_NO_MULTI) && (cd->flags & CMD_BLOCKING)) continue;
            commands++;
            t.cmd_failures = 0;
            t.cmd_executed = 0;
            struct corpus corp = {0};
            corpus_of(cd, &corp);
            for (int k = 0; k < corp.n; k++) check_form(c, sub, cd, &corp.f[k], &t, ++seq);
            if (t.cmd_executed == 0 && strlen(unexecuted) + strlen(cd->name) + 3 < sizeof(unexecuted))
                snprintf(unexecuted + strlen(unexecuted), sizeof(unexecuted) - strlen(unexecuted), "%s%s",
                         unexecuted[0] ? ", " : "", cd->name);
            if (t.cmd_failures > 0)
                fprintf(stderr, "getkeys: %s: %d of %d forms FAILED\n", cd->name, t.cmd_failures, corp.n);
            free(corp.f);
        }
    }
    fprintf(stderr,
            "getkeys: %d commands, %d forms checked in %lld ms (%d executed without an error): %d agreed with COMMAND "
            "GETKEYS, %d refused by "
            "keygate with Redis's error text, %d GETKEYS-vs-execution disagreements (keygate follows "
            "execution), %d failed first on the data, %d FAILED\n",
            commands, t.forms, now_ms() - start, t.executed, t.agreed, t.refused, t.disagreements, t.data_first,
            t.failures);
    if (unexecuted[0])
        fprintf(stderr, "getkeys: no form executed without an error (checked on keys and error texts only): %s\n",
                unexecuted);
    ck_assert_int_ge(commands, 150);
    ck_assert_int_gt(t.disagreements, 0); /* the corpus reaches the forms where GETKEYS is wrong */
    ck_assert_int_gt(t.refused, 0);
    ck_assert_msg(t.failures == 0, "%d of %d forms: keygate's key finder is not Redis's (see stderr)", t.failures,
                  t.forms);
    redisFree(sub);
    redisFree(c);
}
END_TEST

/* ---- issue 19: COMMAND GETKEYS / GETKEYSANDFLAGS answered by keygate, byte for byte ----
 *
 * The same corpus (every form of every command with keys), plus for every command and
 * subcommand of the table a form with two arguments, unknown commands and subcommands, wrong
 * arities and containers alone: each asked as COMMAND GETKEYS and COMMAND GETKEYSANDFLAGS of
 * keygate (answered from commands.c, no backend) and of the cache backend directly, in RESP2
 * and after HELLO 3; the reply bytes must be the same. Pipelined in batches.
 */

struct rawc {
    int fd;
    char *buf;
    size_t len, cap;
    const char *name;
};

static void rawc_open(struct rawc *r, int port, const char *name)
{
    r->fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_msg(r->fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_msg(connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "%s: connect: %s", name, strerror(errno));
    r->len = 0;
    r->cap = 1 << 16;
    r->buf = malloc(r->cap);
    r->name = name;
}

static void rawc_close(struct rawc *r)
{
    close(r->fd);
    free(r->buf);
}

static void rawc_write(struct rawc *r, const char *p, size_t n)
{
    for (size_t off = 0; off < n;) {
        ssize_t w = write(r->fd, p + off, n - off);
        ck_assert_msg(w > 0, "%s: write: %s", r->name, strerror(errno));
        off += (size_t)w;
    }
}

/* The next whole reply (malloc'd, NUL-terminated; *len its length), within 10 s. */
static char *rawc_reply(struct rawc *r, size_t *len)
{
    struct resp_scanner sc;
    long long deadline = now_ms() + 10000;
    for (;;) {
        resp_scanner_reset(&sc);
        long long n = r->len ? resp_scan_reply(&sc, r->buf, r->len) : 0;
        ck_assert_msg(n >= 0, "%s: malformed reply", r->name);
        if (n > 0) {
            char *out = malloc((size_t)n + 1);
            memcpy(out, r->buf, (size_t)n);
            out[n] = '\0';
            memmove(r->buf, r->buf + n, r->len - (size_t)n);
            r->len -= (size_t)n;
            *len = (size_t)n;
            return out;
        }
        if (r->len == r->cap) r->buf = realloc(r->buf, r->cap *= 2);
        struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
        int left = (int)(deadline - now_ms());
        ck_assert_msg(left > 0 && poll(&pfd, 1, left) == 1, "%s: no reply within 10 s", r->name);
        ssize_t got = read(r->fd, r->buf + r->len, r->cap - r->len);
        ck_assert_msg(got > 0, "%s: connection closed", r->name);
        r->len += (size_t)got;
    }
}

/* A command (argv) to both, and its reply checked at once (the start-up commands). */
static char *rawc_call(struct rawc *r, int argc, const char **argv)
{
    char *out = NULL;
    int n = redisFormatCommandArgv(&out, argc, argv, NULL);
    rawc_write(r, out, (size_t)n);
    free(out);
    size_t len;
    return rawc_reply(r, &len);
}

/* A batch of forms asked of both: every reply must be the same bytes. */
struct gk_batch {
    char *bytes;
    size_t len, cap;
    int n;
    char desc[256][160]; /* the first forms, for messages */
};

static void gk_add(struct gk_batch *b, const char *sub, int argc, const char *const *argv, const size_t *len)
{
    const char *a[MAX_ARGV + 4];
    size_t l[MAX_ARGV + 4];
    a[0] = "COMMAND", l[0] = 7;
    a[1] = sub, l[1] = strlen(sub);
    for (int i = 0; i < argc; i++) a[i + 2] = argv[i], l[i + 2] = len[i];
    char *out = NULL;
    int n = redisFormatCommandArgv(&out, argc + 2, a, l);
    ck_assert_int_gt(n, 0);
    if (b->len + (size_t)n > b->cap) b->bytes = realloc(b->bytes, b->cap = (b->len + (size_t)n) * 2);
    memcpy(b->bytes + b->len, out, (size_t)n);
    b->len += (size_t)n;
    free(out);
    if (b->n < 256) {
        size_t u = 0;
        b->desc[b->n][0] = '\0';
        for (int i = 0; i < argc + 2 && u + 4 < sizeof(b->desc[0]); i++)
            u += (size_t)snprintf(b->desc[b->n] + u, sizeof(b->desc[0]) - u, "%s%.*s", i ? " " : "",
                                  (int)(l[i] > 40 ? 40 : l[i]), a[i]);
    }
    b->n++;
}

struct gk_tally {
    int asked, errors, empty, with_keys;
};

/* Send the batch to keygate and Redis; compare reply by reply. */
static void gk_flush(struct gk_batch *b, struct rawc *kg, struct rawc *redis, struct gk_tally *t, const char *proto)
{
    if (b->n == 0) return;
    rawc_write(kg, b->bytes, b->len);
    rawc_write(redis, b->bytes, b->len);
    for (int i = 0; i < b->n; i++) {
        size_t n1, n2;
        char *x = rawc_reply(kg, &n1), *y = rawc_reply(redis, &n2);
        ck_assert_msg(n1 == n2 && memcmp(x, y, n1) == 0, "%s: %s: keygate answered '%.200s', Redis '%.200s'", proto,
                      i < 256 ? b->desc[i] : "(a form past the first 256 of its batch)", x, y);
        t->asked++;
        t->errors += x[0] == '-';
        t->empty += strcmp(x, "*0\r\n") == 0;
        t->with_keys += x[0] == '*' && strcmp(x, "*0\r\n") != 0;
        free(x);
        free(y);
    }
    b->len = 0;
    b->n = 0;
}

/* Both forms of one argv (GETKEYS, GETKEYSANDFLAGS) into the batch; flushed every 200. */
static void gk_ask(struct gk_batch *b, struct rawc *kg, struct rawc *redis, struct gk_tally *t, const char *proto,
                   int argc, const char *const *argv, const size_t *len)
{
    gk_add(b, "GETKEYS", argc, argv, len);
    gk_add(b, "GETKEYSANDFLAGS", argc, argv, len);
    if (b->n >= 200) gk_flush(b, kg, redis, t, proto);
}

static void gk_ask_words(struct gk_batch *b, struct rawc *kg, struct rawc *redis, struct gk_tally *t, const char *proto,
                         const char *line)
{
    const char *argv[MAX_ARGV];
    size_t len[MAX_ARGV];
    static char copy[1024];
    int argc = 0;
    snprintf(copy, sizeof(copy), "%s", line);
    for (char *tok = strtok(copy, " "); tok && argc < MAX_ARGV; tok = strtok(NULL, " ")) {
        argv[argc] = tok;
        len[argc++] = strlen(tok);
    }
    gk_ask(b, kg, redis, t, proto, argc, argv, len);
}

static void getkeys_round(int resp3)
{
    const char *proto = resp3 ? "RESP3" : "RESP2";
    struct harness_backend *cache = harness_backend(&h, "cache");
    struct rawc kg, redis;
    rawc_open(&kg, h.port, "keygate");
    rawc_open(&redis, cache->plain_port, "redis");
    const char *auth[] = {"AUTH", cache->password};
    char *r = rawc_call(&redis, 2, auth);
    ck_assert_str_eq(r, "+OK\r\n");
    free(r);
    if (resp3) {
        const char *hello[] = {"HELLO", "3"};
        r = rawc_call(&kg, 2, hello);
        ck_assert_msg(r[0] == '%', "keygate HELLO 3: %s", r);
        free(r);
        r = rawc_call(&redis, 2, hello);
        ck_assert_msg(r[0] == '%', "redis HELLO 3: %s", r);
        free(r);
    }
    struct gk_batch *b = calloc(1, sizeof(*b));
    struct gk_tally t = {0};
    long long start = now_ms();
    int commands = 0;
    for (size_t i = 0; i < command_table_len; i++) {
        const struct command_def *top = &command_table[i];
        for (int sidx = -1; sidx < top->nsubcommands; sidx++) {
            const struct command_def *cd = sidx < 0 ? top : &top->subcommands[sidx];
            char line[200], name[64];
            snprintf(name, sizeof(name), "%s", cd->name);
            char *bar = strchr(name, '|');
            if (bar) *bar = ' ';
            /* every command: two arguments, one, none (no keys, arity, containers alone) */
            snprintf(line, sizeof(line), "%s k1 k2", name);
            gk_ask_words(b, &kg, &redis, &t, proto, line);
            snprintf(line, sizeof(line), "%s k1", name);
            gk_ask_words(b, &kg, &redis, &t, proto, line);
            gk_ask_words(b, &kg, &redis, &t, proto, name);
            if (!has_keys(cd)) continue;
            commands++;
            struct corpus corp = {0};
            corpus_of(cd, &corp);
            for (int k = 0; k < corp.n; k++) {
                const char *argv[MAX_ARGV];
                for (int a = 0; a < corp.f[k].argc; a++) argv[a] = corp.f[k].a[a];
                gk_ask(b, &kg, &redis, &t, proto, corp.f[k].argc, argv, corp.f[k].len);
            }
            free(corp.f);
        }
    }
    static const char *const extra[] = {"nosuchcommand k",
                                        "GET",
                                        "get k extra",
                                        "GeT k",
                                        "CLIENT",
                                        "CLIENT nosuch k",
                                        "CONFIG GET",
                                        "OBJECT FREQ k",
                                        "object nosuch k",
                                        "EVAL s 0",
                                        "EVAL s 1x k",
                                        "ZUNIONSTORE d 1x a",
                                        "ZUNIONSTORE d 2 a b",
                                        "PFMERGE d",
                                        "MIGRATE h p \"\" 0 5000 KEYS",
                                        "SET k v GET",
                                        "SET k v get EX 1",
                                        "BITFIELD k GET u8 0",
                                        "BITFIELD k SET u8 0 1",
                                        "SORT k STORE STORE BY p",
                                        "GEORADIUS k 1 1 1 m STORE a STORE b",
                                        "XREAD STREAMS a b c",
                                        "PING k"};
    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) gk_ask_words(b, &kg, &redis, &t, proto, extra[i]);
    gk_flush(b, &kg, &redis, &t, proto);
    fprintf(stderr,
            "getkeys (%s): %d COMMAND GETKEYS/GETKEYSANDFLAGS asked of keygate and Redis in %lld ms (%d commands with "
            "keys): %d with keys, %d empty, %d errors, every reply the same bytes\n",
            proto, t.asked, now_ms() - start, commands, t.with_keys, t.empty, t.errors);
    ck_assert_int_ge(commands, 150);
    ck_assert_int_gt(t.with_keys, 10000);
    ck_assert_int_gt(t.errors, 1000);
    ck_assert_int_gt(t.empty, 0);
    free(b->bytes);
    free(b);
    rawc_close(&kg);
    rawc_close(&redis);
}

START_TEST(test_issue19_command_getkeys_is_redis_answer_resp2)
{
    getkeys_round(0);
}
END_TEST

START_TEST(test_issue19_command_getkeys_is_redis_answer_resp3)
{
    getkeys_round(1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("getkeys");
    TCase *tc = harness_tcase(s, "differential", 120, setup, teardown);
    harness_add_test(tc, test_issue10_differential_key_extraction);
    harness_add_test(tc, test_issue19_command_getkeys_is_redis_answer_resp2);
    harness_add_test(tc, test_issue19_command_getkeys_is_redis_answer_resp3);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
