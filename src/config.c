/* config.c: keygate.conf parsing: a table of directives into one struct config snapshot. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

/* Parsing state for one config_load call. */
struct cfg_ctx {
    struct config *c;
    struct diag *errs;
    int line;
};

#define CFG_ERR(ctx, ...) diag_add((ctx)->errs, (ctx)->c->path, (ctx)->line, __VA_ARGS__)

/* A decimal integer in [min, max], nothing else. */
static int int_parse(const char *s, long long min, long long max, long long *out)
{
    long long n = 0;
    if (!*s) return -1;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || n > (max - (*p - '0')) / 10) return -1;
        n = n * 10 + (*p - '0');
    }
    if (n < min) return -1;
    *out = n;
    return 0;
}

/* HOST:PORT or [V6]:PORT. On error returns -1 with *why set. */
static int addr_parse(const char *s, char **host, int *port, const char **why)
{
    const char *h = s, *colon;
    size_t hlen;
    if (*s == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':') {
            *why = "expected [IPV6]:PORT";
            return -1;
        }
        h = s + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon) {
            *why = "expected HOST:PORT";
            return -1;
        }
        hlen = (size_t)(colon - s);
        if (memchr(s, ':', hlen)) {
            *why = "IPv6 addresses need brackets, e.g. [::1]:6400";
            return -1;
        }
    }
    long long p;
    if (hlen == 0) {
        *why = "missing host";
        return -1;
    }
    if (int_parse(colon + 1, 1, 65535, &p) != 0) {
        *why = "bad port (1..65535)";
        return -1;
    }
    *host = xcalloc(hlen + 1, 1);
    memcpy(*host, h, hlen);
    *port = (int)p;
    return 0;
}

/* Check a password file (exists, regular, no group/other read or write) and read it. */
static char *password_load(struct cfg_ctx *ctx, const char *path, size_t *len)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        CFG_ERR(ctx, "password file '%s': %s", path, strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        CFG_ERR(ctx, "password file '%s' is not a regular file", path);
        return NULL;
    }
    if (st.st_mode & 0066) {
        CFG_ERR(ctx,
                "password file '%s' has mode %04o: it must not be readable or writable by "
                "group or other (chmod 600 '%s')",
                path, (unsigned)(st.st_mode & 07777), path);
        return NULL;
    }
    char *pw = file_read_secret(path, len);
    if (!pw) {
        CFG_ERR(ctx, "cannot read password file '%s': %s", path, strerror(errno));
        return NULL;
    }
    if (*len == 0) {
        CFG_ERR(ctx, "password file '%s' is empty", path);
        free(pw);
        return NULL;
    }
    return pw;
}

static void secret_free(char *s)
{
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

/* Take a path option into *dst (resolved against the config's folder); repeats are errors. */
static int opt_set(struct cfg_ctx *ctx, char **dst, const char *name, const char *value, int path)
{
    if (*dst) {
        CFG_ERR(ctx, "repeated option '%s='", name);
        return -1;
    }
    if (!*value) {
        CFG_ERR(ctx, "empty value for '%s='", name);
        return -1;
    }
    *dst = path ? path_resolve(ctx->c->path, value) : xstrdup(value);
    return 0;
}

/* ---- directives -------------------------------------------------------------------- */

/* listen HOST:PORT | [V6]:PORT | unix:/path [mode=0660] [tls cert=F key=F [ca=F]] */
static void dir_listen(struct cfg_ctx *ctx, const struct tokens *t)
{
    struct config *c = ctx->c;
    c->listens = xrealloc(c->listens, (c->nlistens + 1) * sizeof *c->listens);
    struct listen_addr *l = &c->listens[c->nlistens++];
    memset(l, 0, sizeof *l);
    l->line = ctx->line;
    l->unix_mode = 0660;
    const char *addr = t->v[1].text, *why = NULL;
    if (strncmp(addr, STR_AND_LEN("unix:")) == 0) {
        const char *sock = addr + sizeof("unix:") - 1;
        if (!*sock)
            CFG_ERR(ctx, "listen unix: needs a socket path");
        else
            l->unix_path = path_resolve(c->path, sock);
    } else if (addr_parse(addr, &l->host, &l->port, &why) != 0) {
        CFG_ERR(ctx, "bad listen address '%s': %s", addr, why);
    }
    int mode_seen = 0;
    for (size_t i = 2; i < t->n; i++) {
        const char *tok = t->v[i].text, *v = tok + t->v[i].eq + 1;
        long long mode;
        if (t->v[i].eq < 0 && strcmp(tok, "tls") == 0)
            l->tls = 1;
        else if (t->v[i].eq < 0)
            CFG_ERR(ctx, "unknown listen option '%s' (tls cert= key= ca= mode=)", tok);
        else if (strncmp(tok, STR_AND_LEN("cert=")) == 0)
            (void)opt_set(ctx, &l->tls_cert, "cert", v, 1);
        else if (strncmp(tok, STR_AND_LEN("key=")) == 0)
            (void)opt_set(ctx, &l->tls_key, "key", v, 1);
        else if (strncmp(tok, STR_AND_LEN("ca=")) == 0)
            (void)opt_set(ctx, &l->tls_ca, "ca", v, 1);
        else if (strncmp(tok, STR_AND_LEN("mode=")) == 0) {
            if (!addr[0] || strncmp(addr, STR_AND_LEN("unix:")) != 0)
                CFG_ERR(ctx, "mode= applies to unix sockets only");
            else if (mode_seen++)
                CFG_ERR(ctx, "repeated option 'mode='");
            else if (!*v || strspn(v, "01234567") != strlen(v) || (mode = strtoll(v, NULL, 8)) > 0777)
                CFG_ERR(ctx, "bad mode '%s' (octal, e.g. 0660)", v);
            else
                l->unix_mode = (int)mode;
        } else
            CFG_ERR(ctx, "unknown listen option '%.*s=' (tls cert= key= ca= mode=)", t->v[i].eq, tok);
    }
    if (l->tls && (!l->tls_cert || !l->tls_key)) CFG_ERR(ctx, "listen ... tls needs cert= and key=");
    if (!l->tls && (l->tls_cert || l->tls_key || l->tls_ca)) CFG_ERR(ctx, "cert=/key=/ca= need the word tls");
    for (size_t i = 0; i + 1 < c->nlistens; i++) {
        const struct listen_addr *o = &c->listens[i];
        int same = (l->unix_path && o->unix_path && strcmp(l->unix_path, o->unix_path) == 0) ||
                   (l->host && o->host && l->port == o->port && strcmp(l->host, o->host) == 0);
        if (same) CFG_ERR(ctx, "duplicate listen address '%s'", addr);
    }
}

/* admin-listen HOST:PORT */
static void dir_admin_listen(struct cfg_ctx *ctx, const struct tokens *t)
{
    const char *why = NULL;
    if (addr_parse(t->v[1].text, &ctx->c->admin_host, &ctx->c->admin_port, &why) != 0)
        CFG_ERR(ctx, "bad admin-listen address '%s': %s", t->v[1].text, why);
}

/* registry PATH */
static void dir_registry(struct cfg_ctx *ctx, const struct tokens *t)
{
    if (!t->v[1].text[0])
        CFG_ERR(ctx, "registry: empty path");
    else
        ctx->c->registry_path = path_resolve(ctx->c->path, t->v[1].text);
}

static int name_valid(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_') return 0;
    return 1;
}

/* instance NAME HOST:PORT tls|plain [ca= cert= key= server-name= password-file= user= connections=N] */
/* A cluster's seed list "H:P[,H:P...]" into in (host/port: the first seed). */
static void instance_seeds(struct cfg_ctx *ctx, struct instance_conf *in, const char *list)
{
    char *copy = xstrdup(list), *save = NULL;
    for (char *s = strtok_r(copy, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        const char *why;
        char *host;
        int port;
        if (in->nseeds == CONFIG_MAX_SEEDS) {
            CFG_ERR(ctx, "instance '%s': too many seed nodes (at most %d)", in->name, CONFIG_MAX_SEEDS);
            break;
        }
        if (addr_parse(s, &host, &port, &why) != 0) {
            CFG_ERR(ctx, "instance '%s': bad seed address '%s': %s", in->name, s, why);
            continue;
        }
        in->seed_host[in->nseeds] = host;
        in->seed_port[in->nseeds++] = port;
    }
    if (in->nseeds == 0 && !*list)
        CFG_ERR(ctx, "instance '%s': %s", in->name,
                in->sentinel ? "sentinel needs its sentinels (sentinel HOST:PORT[,HOST:PORT...] master=NAME)"
                             : "cluster needs its seed nodes (cluster HOST:PORT[,HOST:PORT...])");
    if (in->nseeds > 0) {
        in->host = xstrdup(in->seed_host[0]);
        in->port = in->seed_port[0];
    }
    free(copy);
}

static void dir_instance(struct cfg_ctx *ctx, const struct tokens *t)
{
    struct config *c = ctx->c;
    const char *name = t->v[1].text, *why = NULL;
    if (!name_valid(name)) {
        CFG_ERR(ctx, "bad instance name '%s' (letters, digits, - and _)", name);
        return;
    }
    int dup = config_instance_index(c, name);
    if (dup >= 0) {
        CFG_ERR(ctx, "duplicate instance '%s' (first defined on line %d)", name, c->instances[dup].line);
        return;
    }
    if (c->ninstances == CONFIG_MAX_INSTANCES) {
        CFG_ERR(ctx, "too many instances (at most %d)", CONFIG_MAX_INSTANCES);
        return;
    }
    /* The name counts from here on, so registry errors are not blamed on a bad option. */
    struct instance_conf *in = &c->instances[c->ninstances];
    memset(in, 0, sizeof *in);
    in->name = xstrdup(name);
    in->line = ctx->line;
    in->connections = 1; /* Redis runs commands one at a time: one connection batches best */
    c->instance_names[c->ninstances++] = in->name;

    size_t first_opt = 3;
    int sentinel_tls_seen = 0, sentinel_tls = -1;
    if (t->v[2].eq < 0 && (strcmp(t->v[2].text, "cluster") == 0 || strcmp(t->v[2].text, "sentinel") == 0)) {
        in->cluster = t->v[2].text[0] == 'c';
        in->sentinel = !in->cluster;
        first_opt = 4;
        if (t->n < 4 || t->v[3].eq >= 0 || strcmp(t->v[3].text, "tls") == 0 || strcmp(t->v[3].text, "plain") == 0) {
            CFG_ERR(ctx, "instance '%s': %s", name,
                    in->sentinel ? "sentinel needs its sentinels (sentinel HOST:PORT[,HOST:PORT...] master=NAME)"
                                 : "cluster needs its seed nodes (cluster HOST:PORT[,HOST:PORT...])");
            first_opt = 3;
        } else
            instance_seeds(ctx, in, t->v[3].text);
    } else if (addr_parse(t->v[2].text, &in->host, &in->port, &why) != 0)
        CFG_ERR(ctx, "bad instance address '%s': %s", t->v[2].text, why);
    int ntls = 0, nplain = 0, conns_seen = 0;
    for (size_t i = first_opt; i < t->n; i++) {
        const char *tok = t->v[i].text, *v = tok + t->v[i].eq + 1;
        long long n;
        if (t->v[i].eq < 0 && strcmp(tok, "tls") == 0)
            ntls++;
        else if (t->v[i].eq < 0 && strcmp(tok, "plain") == 0)
            nplain++;
        else if (t->v[i].eq < 0)
            CFG_ERR(ctx, "unknown instance option '%s'", tok);
        else if (strncmp(tok, STR_AND_LEN("ca=")) == 0)
            (void)opt_set(ctx, &in->ca, "ca", v, 1);
        else if (strncmp(tok, STR_AND_LEN("cert=")) == 0)
            (void)opt_set(ctx, &in->cert, "cert", v, 1);
        else if (strncmp(tok, STR_AND_LEN("key=")) == 0)
            (void)opt_set(ctx, &in->key, "key", v, 1);
        else if (strncmp(tok, STR_AND_LEN("server-name=")) == 0)
            (void)opt_set(ctx, &in->server_name, "server-name", v, 0);
        else if (strncmp(tok, STR_AND_LEN("password-file=")) == 0)
            (void)opt_set(ctx, &in->password_file, "password-file", v, 1);
        else if (strncmp(tok, STR_AND_LEN("user=")) == 0)
            (void)opt_set(ctx, &in->username, "user", v, 0);
        else if (in->sentinel && strncmp(tok, STR_AND_LEN("master=")) == 0)
            (void)opt_set(ctx, &in->master_name, "master", v, 0);
        else if (in->sentinel && strncmp(tok, STR_AND_LEN("sentinel-password-file=")) == 0)
            (void)opt_set(ctx, &in->sentinel_password_file, "sentinel-password-file", v, 1);
        else if (in->sentinel && strncmp(tok, STR_AND_LEN("sentinel-tls=")) == 0) {
            if (sentinel_tls_seen++)
                CFG_ERR(ctx, "repeated option 'sentinel-tls='");
            else if (strcmp(v, "yes") == 0 || strcmp(v, "no") == 0)
                sentinel_tls = v[0] == 'y';
            else
                CFG_ERR(ctx, "bad sentinel-tls '%s' (yes|no)", v);
        } else if (strncmp(tok, STR_AND_LEN("connections=")) == 0) {
            if (conns_seen++)
                CFG_ERR(ctx, "repeated option 'connections='");
            else if (int_parse(v, 1, 64, &n) != 0)
                CFG_ERR(ctx, "bad connections '%s' (1..64)", v);
            else
                in->connections = (int)n;
        } else
            CFG_ERR(ctx,
                    "unknown instance option '%.*s=' (ca= cert= key= server-name= "
                    "password-file= user= connections=%s)",
                    t->v[i].eq, tok, in->sentinel ? " master= sentinel-password-file= sentinel-tls=" : "");
    }
    if (in->sentinel) {
        if (!in->master_name)
            CFG_ERR(ctx, "instance '%s': sentinel needs master=NAME (the name the sentinels monitor)", name);
        in->sentinel_tls = sentinel_tls >= 0 ? sentinel_tls : ntls > 0;
        if (in->sentinel_tls && ntls == 0)
            CFG_ERR(ctx, "instance '%s': sentinel-tls=yes needs tls (the sentinels are verified with the line's ca=)",
                    name);
        if (in->sentinel_password_file) {
            size_t len;
            in->sentinel_password = password_load(ctx, in->sentinel_password_file, &len);
        }
    }
    in->tls = ntls > 0;
    if (ntls + nplain != 1)
        CFG_ERR(ctx,
                "instance '%s': give exactly one of tls or plain (plain TCP must be asked "
                "for)",
                name);
    else if (in->tls && !in->ca)
        CFG_ERR(ctx, "instance '%s': tls needs ca= (the CA that signs the server certificate)", name);
    else if (!in->tls && (in->ca || in->cert || in->key || in->server_name))
        CFG_ERR(ctx, "instance '%s': ca=/cert=/key=/server-name= need tls", name);
    if (!in->cert != !in->key) CFG_ERR(ctx, "instance '%s': cert= and key= go together", name);
    if (in->username && !in->password_file) CFG_ERR(ctx, "instance '%s': user= needs password-file=", name);
    if (in->password_file) {
        size_t len;
        in->password = password_load(ctx, in->password_file, &len);
    }
}

static int hex_decode(const char *s, unsigned char *out, size_t n)
{
    if (strlen(s) != 2 * n) return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        for (int j = 0; j < 2; j++) {
            int ch = tolower((unsigned char)s[2 * i + j]);
            if (!isxdigit(ch)) return -1;
            v = v * 16 + (unsigned)(isdigit(ch) ? ch - '0' : ch - 'a' + 10);
        }
        out[i] = (unsigned char)v;
    }
    return 0;
}

static void user_owners(struct cfg_ctx *ctx, struct user_conf *u, const char *list)
{
    if (u->nowners) {
        CFG_ERR(ctx, "repeated option 'owners='");
        return;
    }
    for (const char *p = list;;) {
        size_t n = strcspn(p, ",");
        if (n == 0) {
            CFG_ERR(ctx, "empty owner in owners='%s'", list);
            return;
        }
        u->owners = xrealloc(u->owners, (u->nowners + 1) * sizeof *u->owners);
        u->owners[u->nowners] = xcalloc(n + 1, 1);
        memcpy(u->owners[u->nowners++], p, n);
        if (n == 1 && *p == '*') u->all_owners = 1;
        if (!p[n]) break;
        p += n + 1;
    }
    if (u->all_owners && u->nowners > 1) CFG_ERR(ctx, "owners=* stands alone");
}

/* A user's numeric limit (max-clients=, rate=): 1..1000000, once. */
static void user_limit(struct cfg_ctx *ctx, int *field, const char *opt, const char *v)
{
    long long n;
    if (*field)
        CFG_ERR(ctx, "repeated option '%s='", opt);
    else if (int_parse(v, 1, CONFIG_USER_LIMIT_MAX, &n) != 0)
        CFG_ERR(ctx, "bad %s '%s' (1..%d)", opt, v, CONFIG_USER_LIMIT_MAX);
    else
        *field = (int)n;
}

/* user NAME password-file=F|sha256=HEX owners=a,b|* access=rw|ro [scripts=yes|no] [max-clients=N] [rate=N] */
static void dir_user(struct cfg_ctx *ctx, const struct tokens *t)
{
    struct config *c = ctx->c;
    const char *name = t->v[1].text;
    if (t->v[1].eq >= 0 || !*name) {
        CFG_ERR(ctx, "user needs a name first");
        return;
    }
    for (size_t i = 0; i < c->nusers; i++)
        if (strcmp(c->users[i].name, name) == 0) {
            CFG_ERR(ctx, "duplicate user '%s' (first defined on line %d)", name, c->users[i].line);
            return;
        }
    c->users = xrealloc(c->users, (c->nusers + 1) * sizeof *c->users);
    struct user_conf *u = &c->users[c->nusers++];
    memset(u, 0, sizeof *u);
    u->name = xstrdup(name);
    u->line = ctx->line;
    int have_secret = 0, access_seen = 0, scripts_seen = 0;
    for (size_t i = 2; i < t->n; i++) {
        const char *tok = t->v[i].text, *v = tok + t->v[i].eq + 1;
        if (t->v[i].eq < 0)
            CFG_ERR(ctx, "unknown user option '%s'", tok);
        else if (strncmp(tok, STR_AND_LEN("password-file=")) == 0 || strncmp(tok, STR_AND_LEN("sha256=")) == 0) {
            if (have_secret++) {
                CFG_ERR(ctx, "user '%s': give one password-file= or sha256=", name);
            } else if (tok[0] == 's') {
                if (hex_decode(v, u->password_sha256, sizeof u->password_sha256) != 0)
                    CFG_ERR(ctx, "bad sha256 '%s' (64 hex digits)", v);
            } else if (opt_set(ctx, &u->password_file, "password-file", v, 1) == 0) {
                size_t len = 0;
                char *pw = password_load(ctx, u->password_file, &len);
                if (pw && !EVP_Digest(pw, len, u->password_sha256, NULL, EVP_sha256(), NULL))
                    CFG_ERR(ctx, "cannot hash the password of user '%s'", name);
                secret_free(pw);
            }
        } else if (strncmp(tok, STR_AND_LEN("owners=")) == 0)
            user_owners(ctx, u, v);
        else if (strncmp(tok, STR_AND_LEN("access=")) == 0) {
            if (access_seen++)
                CFG_ERR(ctx, "repeated option 'access='");
            else if (strcmp(v, "rw") == 0 || strcmp(v, "ro") == 0)
                u->read_only = v[1] == 'o';
            else
                CFG_ERR(ctx, "bad access '%s' (rw or ro)", v);
        } else if (strncmp(tok, STR_AND_LEN("scripts=")) == 0) {
            if (scripts_seen++)
                CFG_ERR(ctx, "repeated option 'scripts='");
            else if (strcmp(v, "yes") == 0 || strcmp(v, "no") == 0)
                u->scripts = v[0] == 'y';
            else
                CFG_ERR(ctx, "bad scripts '%s' (yes or no)", v);
        } else if (strncmp(tok, STR_AND_LEN("max-clients=")) == 0)
            user_limit(ctx, &u->max_clients, "max-clients", v);
        else if (strncmp(tok, STR_AND_LEN("rate=")) == 0)
            user_limit(ctx, &u->rate, "rate", v);
        else
            CFG_ERR(ctx,
                    "unknown user option '%.*s=' (password-file= sha256= owners= access= "
                    "scripts= max-clients= rate=)",
                    t->v[i].eq, tok);
    }
    if (!have_secret) CFG_ERR(ctx, "user '%s' needs password-file= or sha256=", name);
    if (!u->nowners) CFG_ERR(ctx, "user '%s' needs owners= (a,b or *)", name);
    if (!access_seen) CFG_ERR(ctx, "user '%s' needs access=rw or access=ro", name);
}

/* log-level debug|info|warn|error */
static void dir_log_level(struct cfg_ctx *ctx, const struct tokens *t)
{
    int level = log_level_parse(t->v[1].text);
    if (level < 0)
        CFG_ERR(ctx, "bad log-level '%s' (debug, info, warn or error)", t->v[1].text);
    else
        ctx->c->log_level = level;
}

/* log-format text|json */
static void dir_log_format(struct cfg_ctx *ctx, const struct tokens *t)
{
    if (strcmp(t->v[1].text, "text") == 0)
        ctx->c->log_format = LOG_FORMAT_TEXT;
    else if (strcmp(t->v[1].text, "json") == 0)
        ctx->c->log_format = LOG_FORMAT_JSON;
    else
        CFG_ERR(ctx, "bad log-format '%s' (text or json)", t->v[1].text);
}

/* enforce on|report: the registry lines without enforce= (a report mode needs a default line) */
static void dir_enforce(struct cfg_ctx *ctx, const struct tokens *t)
{
    ctx->c->enforce_line = ctx->line;
    enum ns_enforce e = registry_enforce_word(t->v[1].text);
    if (e == ENFORCE_UNSET)
        CFG_ERR(ctx, "bad enforce '%s' (on or report)", t->v[1].text);
    else
        ctx->c->enforce = e;
}

enum value_kind { V_FUNC, V_INT, V_SIZE, V_DURATION, V_DURATION_OR_0 };

/* durable-headroom-warn 20%: a whole percentage 0..99 ("20" without the sign too). */
static void dir_headroom_warn(struct cfg_ctx *ctx, const struct tokens *t)
{
    const char *v = t->v[1].text;
    char num[16];
    size_t n = strlen(v);
    if (n > 0 && v[n - 1] == '%') n--;
    long long pct;
    if (n == 0 || n >= sizeof(num) || (memcpy(num, v, n), num[n] = '\0', int_parse(num, 0, 99, &pct) != 0)) {
        CFG_ERR(ctx, "bad durable-headroom-warn '%s' (a percentage 0%%..99%% of maxmemory, such as 20%%)", v);
        return;
    }
    ctx->c->durable_headroom_warn_pct = (int)pct;
}

/* near-cache-group NAME: a marker name (a field of each markers hash; no blanks by the tokenizer) */
static void dir_near_cache_group(struct cfg_ctx *ctx, const struct tokens *t)
{
    const char *v = t->v[1].text;
    if (!*v || strlen(v) > 128) {
        CFG_ERR(ctx, "bad near-cache-group '%s' (a name of 1..128 bytes)", v);
        return;
    }
    free(ctx->c->near_cache_group);
    ctx->c->near_cache_group = xstrdup(v);
}

static const struct directive {
    const char *name;
    const char *usage;
    int min_args, max_args; /* after the directive's name; -1 = unbounded */
    int repeatable;
    enum value_kind kind;
    void (*apply)(struct cfg_ctx *, const struct tokens *); /* V_FUNC */
    size_t offset;                                          /* V_INT: int; else int64_t */
    long long min, max;                                     /* V_INT, V_SIZE range */
} directives[] = {
    {"listen", "HOST:PORT|[V6]:PORT|unix:/PATH [mode=0660] [tls cert=F key=F [ca=F]]", 1, -1, 1, V_FUNC, dir_listen, 0,
     0, 0},
    {"admin-listen", "HOST:PORT", 1, 1, 0, V_FUNC, dir_admin_listen, 0, 0, 0},
    {"registry", "PATH", 1, 1, 0, V_FUNC, dir_registry, 0, 0, 0},
    {"instance",
     "NAME HOST:PORT|cluster HOST:PORT[,HOST:PORT...]|sentinel HOST:PORT[,HOST:PORT...] master=NAME tls|plain "
     "[ca=F cert=F key=F server-name=N password-file=F user=U connections=N] [sentinel-password-file=F "
     "sentinel-tls=yes|no]",
     3, -1, 1, V_FUNC, dir_instance, 0, 0, 0},
    {"user", "NAME password-file=F|sha256=HEX owners=a,b|* access=rw|ro [scripts=yes|no] [max-clients=N] [rate=N]", 2,
     -1, 1, V_FUNC, dir_user, 0, 0, 0},
    {"threads", "N", 1, 1, 0, V_INT, NULL, offsetof(struct config, threads), 1, 64},
    {"max-clients", "N", 1, 1, 0, V_INT, NULL, offsetof(struct config, max_clients), 1, 1000000},
    {"max-pending", "N", 1, 1, 0, V_INT, NULL, offsetof(struct config, max_pending), 1, 1000000},
    {"max-pinned", "N", 1, 1, 0, V_INT, NULL, offsetof(struct config, max_pinned), 1, 100000},
    {"tracking-table-max-keys", "N", 1, 1, 0, V_INT, NULL, offsetof(struct config, tracking_table_max_keys), 0,
     100000000},
    {"max-request-size", "SIZE", 1, 1, 0, V_SIZE, NULL, offsetof(struct config, max_request_bytes), 1, INT64_MAX},
    {"client-output-limit", "SIZE", 1, 1, 0, V_SIZE, NULL, offsetof(struct config, client_output_limit), 1, INT64_MAX},
    {"client-output-hard-limit", "SIZE", 1, 1, 0, V_SIZE, NULL, offsetof(struct config, client_output_hard_limit), 1,
     INT64_MAX},
    {"max-memory", "SIZE", 1, 1, 0, V_SIZE, NULL, offsetof(struct config, max_memory), 0, INT64_MAX},
    {"connect-timeout", "DURATION", 1, 1, 0, V_DURATION, NULL, offsetof(struct config, connect_timeout_ms), 0, 0},
    {"shutdown-timeout", "DURATION", 1, 1, 0, V_DURATION, NULL, offsetof(struct config, shutdown_timeout_ms), 0, 0},
    {"client-timeout", "DURATION|0", 1, 1, 0, V_DURATION_OR_0, NULL, offsetof(struct config, client_timeout_ms), 0, 0},
    {"client-header-timeout", "DURATION|0", 1, 1, 0, V_DURATION_OR_0, NULL,
     offsetof(struct config, client_header_timeout_ms), 0, 0},
    {"backend-timeout", "DURATION|0", 1, 1, 0, V_DURATION_OR_0, NULL, offsetof(struct config, backend_timeout_ms), 0,
     0},
    {"log-level", "debug|info|warn|error", 1, 1, 0, V_FUNC, dir_log_level, 0, 0, 0},
    {"cluster-refresh", "DURATION", 1, 1, 0, V_DURATION, NULL, offsetof(struct config, cluster_refresh_ms), 0, 0},
    {"failover-hold", "DURATION", 1, 1, 0, V_DURATION, NULL, offsetof(struct config, failover_hold_ms), 0, 0},
    {"replicas-timeout", "DURATION", 1, 1, 0, V_DURATION, NULL, offsetof(struct config, replicas_timeout_ms), 0, 0},
    {"backend-info-interval", "DURATION", 1, 1, 0, V_DURATION, NULL, offsetof(struct config, backend_info_interval_ms),
     0, 0},
    {"durable-headroom-warn", "N%", 1, 1, 0, V_FUNC, dir_headroom_warn, 0, 0, 0},
    {"namespace-scan-interval", "DURATION|0", 1, 1, 0, V_DURATION_OR_0, NULL,
     offsetof(struct config, namespace_scan_interval_ms), 0, 0},
    {"log-format", "text|json", 1, 1, 0, V_FUNC, dir_log_format, 0, 0, 0},
    {"enforce", "on|report", 1, 1, 0, V_FUNC, dir_enforce, 0, 0, 0},
    {"near-cache-memory", "SIZE", 1, 1, 0, V_SIZE, NULL, offsetof(struct config, near_cache_memory), 1, INT64_MAX},
    {"near-cache-group", "NAME", 1, 1, 0, V_FUNC, dir_near_cache_group, 0, 0, 0},
    {"near-cache-trim-interval", "DURATION", 1, 1, 0, V_DURATION, NULL,
     offsetof(struct config, near_cache_trim_interval_ms), 0, 0},
    {"near-cache-marker-timeout", "DURATION", 1, 1, 0, V_DURATION, NULL,
     offsetof(struct config, near_cache_marker_timeout_ms), 0, 0},
};
#define NDIRECTIVES (sizeof directives / sizeof directives[0])

size_t config_directive_count(void)
{
    return NDIRECTIVES;
}

const char *config_directive_name(size_t i)
{
    return i < NDIRECTIVES ? directives[i].name : NULL;
}

const char *config_directive_usage(size_t i)
{
    return i < NDIRECTIVES ? directives[i].usage : NULL;
}

/* Index of directive `name` in the table (it must be there). */
static size_t config_directive_index(const char *name)
{
    size_t i = 0;
    while (i + 1 < NDIRECTIVES && strcmp(directives[i].name, name) != 0) i++;
    return i;
}

static void directive_apply(struct cfg_ctx *ctx, const struct directive *d, const struct tokens *t)
{
    const char *v = t->v[1].text;
    char *field = (char *)ctx->c + d->offset;
    long long n;
    int64_t n64;
    switch (d->kind) {
    case V_FUNC:
        d->apply(ctx, t);
        break;
    case V_INT:
        if (int_parse(v, d->min, d->max, &n) != 0)
            CFG_ERR(ctx, "bad %s '%s' (an integer %lld..%lld)", d->name, v, d->min, d->max);
        else
            *(int *)(void *)field = (int)n;
        break;
    case V_SIZE:
        if (size_parse(v, &n64) != 0 || n64 < d->min)
            CFG_ERR(ctx, "bad %s '%s' (a size such as 1024, 64kb, 16mb, 1gb)", d->name, v);
        else
            *(int64_t *)(void *)field = n64;
        break;
    case V_DURATION:
        if (duration_parse(v, &n64) != 0)
            CFG_ERR(ctx, "bad %s '%s' (a duration such as 500ms, 2s, 1m)", d->name, v);
        else
            *(int64_t *)(void *)field = n64;
        break;
    case V_DURATION_OR_0:
        if (strcmp(v, "0") == 0)
            *(int64_t *)(void *)field = 0;
        else if (duration_parse(v, &n64) != 0)
            CFG_ERR(ctx, "bad %s '%s' (a duration such as 500ms, 2s, 1m, or 0 for none)", d->name, v);
        else
            *(int64_t *)(void *)field = n64;
        break;
    }
}

/* The optimal-string-alignment distance of a and b (insertions, deletions, substitutions and
 * swaps of two neighbours, each 1), or more than `cap` once it is sure to be (long inputs). */
static size_t edit_distance(const char *a, const char *b, size_t cap)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 64 || m > 64) return cap + 1;
    if ((n > m ? n - m : m - n) > cap) return cap + 1;
    size_t d[65][65];
    for (size_t i = 0; i <= n; i++) d[i][0] = i;
    for (size_t j = 0; j <= m; j++) d[0][j] = j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

/* The directive an unknown name most likely meant: the nearest by edit distance (at most 2, and
 * under half the name), else the one directive the name is a prefix of (4 letters or more); NULL
 * when none is near. */
static const char *config_directive_suggest(const char *name)
{
    const char *best = NULL, *prefixed = NULL;
    size_t best_d = 3, nprefixed = 0, len = strlen(name);
    for (size_t i = 0; i < NDIRECTIVES; i++) {
        size_t dist = edit_distance(name, directives[i].name, 2);
        if (dist < best_d && dist * 2 < len) best_d = dist, best = directives[i].name;
        if (len >= 4 && strncmp(directives[i].name, name, len) == 0) prefixed = directives[i].name, nprefixed++;
    }
    return best ? best : nprefixed == 1 ? prefixed : NULL;
}

static void line_parse(struct cfg_ctx *ctx, const struct tokens *t, int first_line[NDIRECTIVES])
{
    const char *name = t->v[0].text;
    for (size_t i = 0; i < NDIRECTIVES; i++) {
        const struct directive *d = &directives[i];
        if (strcmp(d->name, name) != 0) continue;
        int nargs = (int)t->n - 1;
        if (nargs < d->min_args)
            CFG_ERR(ctx, "%s: missing argument (usage: %s %s)", name, name, d->usage);
        else if (d->max_args >= 0 && nargs > d->max_args)
            CFG_ERR(ctx, "%s: too many arguments, unexpected '%s' (usage: %s %s)", name, t->v[1 + d->max_args].text,
                    name, d->usage);
        else if (!d->repeatable && first_line[i])
            CFG_ERR(ctx, "%s given twice (first on line %d)", name, first_line[i]);
        else {
            first_line[i] = ctx->line;
            directive_apply(ctx, d, t);
        }
        return;
    }
    const char *near = config_directive_suggest(name);
    if (near)
        CFG_ERR(ctx, "unknown directive '%s' (did you mean '%s'?)", name, near);
    else
        CFG_ERR(ctx, "unknown directive '%s'", name);
}

/* A user's owner that no namespace (nor the default line) carries grants nothing: a typo, or a
 * namespace not added yet. An error at the user's line: --check fails, and a reload bringing one
 * in is refused. */
static void config_owners_check(const struct config *c, struct diag *errs)
{
    if (!c->registry) return;
    for (size_t u = 0; u < c->nusers; u++) {
        for (size_t o = 0; o < c->users[u].nowners && !c->users[u].all_owners; o++) {
            const char *owner = c->users[u].owners[o];
            size_t i = 0;
            while (i < c->registry->count && strcmp(c->registry->entries[i].owner, owner) != 0) i++;
            if (i == c->registry->count && !(c->registry->dflt && strcmp(c->registry->dflt->owner, owner) == 0))
                diag_add(errs, c->path, c->users[u].line,
                         "user '%s': no namespace of %s has owner '%s' (owners= names the owner= of registry lines)",
                         c->users[u].name, c->registry->path, owner);
        }
    }
}

/* Two addresses one socket cannot both bind: the same port on the same host, or on a wildcard
 * host (0.0.0.0, ::) and any other. */
static int config_addr_clash(const char *host_a, int port_a, const char *host_b, int port_b)
{
    if (port_a != port_b) return 0;
    int wild_a = strcmp(host_a, "0.0.0.0") == 0 || strcmp(host_a, "::") == 0 || !*host_a;
    int wild_b = strcmp(host_b, "0.0.0.0") == 0 || strcmp(host_b, "::") == 0 || !*host_b;
    return wild_a || wild_b || strcmp(host_a, host_b) == 0;
}

/* admin-listen on an address a `listen` already takes: the admin endpoint would never bind
 * (or, with SO_REUSEPORT, take clients' connections). An error at the admin-listen line. */
static void config_admin_clash_check(const struct config *c, int admin_line, struct diag *errs)
{
    if (!c->admin_host) return;
    for (size_t i = 0; i < c->nlistens; i++) {
        const struct listen_addr *l = &c->listens[i];
        if (l->host && config_addr_clash(c->admin_host, c->admin_port, l->host, l->port))
            diag_add(errs, c->path, admin_line,
                     "admin-listen %s:%d is the address of listen on line %d: the admin endpoint needs a port "
                     "of its own",
                     c->admin_host, c->admin_port, l->line);
    }
}

/* Give every registry entry its per-namespace stats slot (stats.h: kept over reloads). */
void config_registry_bind_stats(struct registry *r, const char *const *instance_names)
{
    for (size_t i = 0; i < r->count; i++) {
        struct namespace_entry *e = &r->entries[i];
        e->stats_slot = stats_ns_slot(e->prefix, e->kind == NS_CHANNEL, instance_names[e->instance], e->owner);
    }
    /* the default line (keys and channels matching no prefix): namespace="(default)" */
    struct namespace_entry *d = r->dflt;
    if (d) d->stats_slot = stats_ns_slot(REGISTRY_DEFAULT_NAME, 0, instance_names[d->instance], d->owner);
}

/* `enforce report` needs the registry's default line: report mode must not refuse unregistered
 * keys, and only the operator can say which instance and TTL they get. Then every line without
 * enforce= takes the directive's value. */
static void config_enforce_apply(struct cfg_ctx *ctx)
{
    struct config *c = ctx->c;
    if (!c->registry) return;
    if (c->enforce == ENFORCE_REPORT && !c->registry->dflt) {
        ctx->line = c->enforce_line;
        CFG_ERR(ctx,
                "enforce report needs a default line in the registry (%s): report mode forwards keys that match no "
                "namespace, and the default line says to which instance and with which TTL",
                c->registry_path);
        ctx->line = 0;
        return;
    }
    registry_set_enforce(c->registry, c->enforce == ENFORCE_REPORT ? ENFORCE_REPORT : ENFORCE_ON);
}

/* The near cache on a cluster instance is not supported (a write and its XADD go in one MULTI, so
 * in one slot, and the stream is one key): a near-cache= line whose instance is a cluster is an
 * error at that line of the registry (config_load and every reload run it, so a SIGHUP cannot
 * bring one in). A Sentinel instance is one primary at a time: its stream reader follows it. */
static void config_near_cache_cluster_check(struct config *c, struct diag *errs)
{
    if (!c->registry) return;
    for (size_t i = 0; i < c->registry->count; i++) {
        const struct namespace_entry *e = registry_entry(c->registry, i);
        if (!e || e->near_cache_ms <= 0 || e->instance < 0 || (size_t)e->instance >= c->ninstances) continue;
        const struct instance_conf *ic = &c->instances[e->instance];
        if (!ic->cluster) continue;
        char d[32];
        duration_format(e->near_cache_ms, d, sizeof(d));
        diag_add(errs, c->registry->path, e->line,
                 "namespace '%s' has near-cache=%s, but instance '%s' is a Redis Cluster (%s:%d): the near "
                 "cache is not supported on a cluster instance",
                 e->prefix, d, ic->name, c->path, ic->line);
    }
}

/* replicas=N on a cluster instance is not supported (WAIT counts one node's replicas, and a cluster's
 * writes go to many nodes): an error at that registry line, as near-cache= (config_load, every reload). */
static void config_replicas_cluster_check(struct config *c, struct diag *errs)
{
    if (!c->registry) return;
    for (size_t i = 0; i <= c->registry->count; i++) {
        const struct namespace_entry *e = registry_entry(c->registry, i);
        if (!e || e->replicas <= 0 || e->instance < 0 || (size_t)e->instance >= c->ninstances) continue;
        const struct instance_conf *ic = &c->instances[e->instance];
        if (!ic->cluster) continue;
        diag_add(errs, c->registry->path, e->line,
                 "%s '%s' has replicas=%d, but instance '%s' is a Redis Cluster (%s:%d): replicas= is not supported "
                 "on a cluster instance (a single server or a sentinel instance)",
                 e->is_default ? "the default line" : "namespace", e->is_default ? REGISTRY_DEFAULT_NAME : e->prefix,
                 e->replicas, ic->name, c->path, ic->line);
    }
}

struct config *config_load(const char *path, struct diag *errs)
{
    struct config *c = xcalloc(1, sizeof *c);
    c->path = xstrdup(path);
    c->threads = 1;
    c->max_clients = 10000;
    c->max_request_bytes = 512LL * 1024 * 1024;
    c->client_output_limit = 64LL * 1024 * 1024;
    c->client_output_hard_limit = CONFIG_OUTPUT_HARD_LIMIT_DEFAULT;
    c->max_memory = 1024LL * 1024 * 1024;
    c->max_pending = 1024;
    c->max_pinned = 64;
    c->tracking_table_max_keys = 1000000;
    c->connect_timeout_ms = 2000;
    c->shutdown_timeout_ms = 5000;
    c->client_timeout_ms = 0;
    c->client_header_timeout_ms = 10000;
    c->backend_timeout_ms = 5000;
    c->log_level = LOG_INFO;
    c->backend_info_interval_ms = 10000;
    c->cluster_refresh_ms = 10000;
    c->failover_hold_ms = 5000;
    c->replicas_timeout_ms = 1000;
    c->durable_headroom_warn_pct = 20;
    c->namespace_scan_interval_ms = 0;
    c->near_cache_memory = 64LL * 1024 * 1024;
    c->near_cache_trim_interval_ms = 60000;
    c->near_cache_marker_timeout_ms = 3600000;
    struct cfg_ctx ctx = {.c = c, .errs = errs};
    size_t errs_before = errs->count;

    FILE *f = fopen(path, "r");
    if (!f) {
        diag_add(errs, path, 0, "cannot open config: %s", strerror(errno));
        config_free(c);
        return NULL;
    }
    int first_line[NDIRECTIVES] = {0};
    char *buf = NULL;
    size_t cap = 0;
    while (getline(&buf, &cap, f) >= 0) {
        ctx.line++;
        struct tokens t;
        const char *why = NULL;
        if (tokens_split(buf, &t, &why) != 0) {
            CFG_ERR(&ctx, "%s", why);
            continue;
        }
        if (t.n > 0) line_parse(&ctx, &t, first_line);
        tokens_free(&t);
    }
    free(buf);
    fclose(f);

    ctx.line = first_line[config_directive_index("client-output-hard-limit")];
    if (!ctx.line && c->client_output_hard_limit < c->client_output_limit)
        c->client_output_hard_limit = c->client_output_limit; /* only the soft limit raised: the default follows */
    if (c->client_output_hard_limit < c->client_output_limit)
        CFG_ERR(&ctx, "client-output-hard-limit (%lld) is below client-output-limit (%lld)",
                (long long)c->client_output_hard_limit, (long long)c->client_output_limit);
    ctx.line = 0;
    if (c->nlistens == 0) CFG_ERR(&ctx, "no listen directive (at least one is required)");
    if (!c->registry_path) CFG_ERR(&ctx, "no registry directive");
    if (c->ninstances == 0) CFG_ERR(&ctx, "no instance directive (at least one is required)");
    if (c->registry_path && c->ninstances > 0)
        c->registry = registry_load(c->registry_path, c->instance_names, c->ninstances, errs);
    config_enforce_apply(&ctx);
    config_near_cache_cluster_check(c, errs);
    config_replicas_cluster_check(c, errs);
    config_owners_check(c, errs);
    config_admin_clash_check(c, first_line[config_directive_index("admin-listen")], errs);

    if (errs->count > errs_before) {
        config_free(c);
        return NULL;
    }
    if (!c->near_cache_group) c->near_cache_group = xstrdup("default");
    if (c->nusers == 0)
        log_event(LOG_WARN, "config_no_users", NULL, "%s: no user lines: clients need no AUTH (development only)",
                  c->path);
    config_registry_bind_stats(c->registry, c->instance_names);
    return c;
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

void config_instance_copy(struct instance_conf *dst, const struct instance_conf *src)
{
    *dst = *src;
    dst->name = dup_or_null(src->name);
    dst->host = dup_or_null(src->host);
    for (int i = 0; i < src->nseeds; i++) dst->seed_host[i] = dup_or_null(src->seed_host[i]);
    dst->ca = dup_or_null(src->ca);
    dst->cert = dup_or_null(src->cert);
    dst->key = dup_or_null(src->key);
    dst->server_name = dup_or_null(src->server_name);
    dst->password_file = dup_or_null(src->password_file);
    dst->password = dup_or_null(src->password);
    dst->username = dup_or_null(src->username);
    dst->master_name = dup_or_null(src->master_name);
    dst->sentinel_password_file = dup_or_null(src->sentinel_password_file);
    dst->sentinel_password = dup_or_null(src->sentinel_password);
}

void config_instance_free(struct instance_conf *in)
{
    free(in->name);
    free(in->host);
    for (int i = 0; i < in->nseeds; i++) free(in->seed_host[i]);
    free(in->ca);
    free(in->cert);
    free(in->key);
    free(in->server_name);
    free(in->password_file);
    secret_free(in->password);
    free(in->username);
    free(in->master_name);
    free(in->sentinel_password_file);
    secret_free(in->sentinel_password);
}

void config_free(struct config *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->nlistens; i++) {
        struct listen_addr *l = &c->listens[i];
        free(l->host);
        free(l->unix_path);
        free(l->tls_cert);
        free(l->tls_key);
        free(l->tls_ca);
    }
    free(c->listens);
    for (size_t i = 0; i < c->ninstances; i++) config_instance_free(&c->instances[i]);
    for (size_t i = 0; i < c->nusers; i++) {
        struct user_conf *u = &c->users[i];
        free(u->name);
        free(u->password_file);
        for (size_t o = 0; o < u->nowners; o++) free(u->owners[o]);
        free(u->owners);
        OPENSSL_cleanse(u->password_sha256, sizeof u->password_sha256);
    }
    free(c->users);
    free(c->admin_host);
    free(c->registry_path);
    free(c->near_cache_group);
    registry_free(c->registry);
    free(c->path);
    free(c);
}

int config_instance_index(const struct config *c, const char *name)
{
    for (size_t i = 0; i < c->ninstances; i++)
        if (strcmp(c->instances[i].name, name) == 0) return (int)i;
    return -1;
}
