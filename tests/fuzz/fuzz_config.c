/* fuzz_config.c: libFuzzer target: the keygate.conf and registry.conf parsers, their diagnostics and invariants. */
/*
 * Input: byte 0 picks the mode (bit 0 set: config mode, else registry mode), the rest is text.
 *  - registry mode: the text is registry.conf, loaded by registry_load with the instances
 *    "durable" and "cache" (as conf/keygate.conf defines them).
 *  - config mode: the text up to the first \x01 byte is keygate.conf, the rest registry.conf,
 *    loaded by config_load (which loads the registry the config names, and password files).
 * FUZZ_CONFIG_PRINT=1 prints each input's mode and diagnostics (to see what a seed reaches).
 * Both files are written into one private directory per process (the parsers read files only).
 * That directory also holds secrets/ok.pass (mode 0600), secrets/open.pass (0644, which must be
 * refused) and secrets/empty.pass (0600, empty), the names the seeds use.
 *
 * Required, whatever the input:
 *  - no crash, leak or sanitizer report; the parser returns a result iff it reported no error;
 *  - every diagnostic is "PATH:LINE: message" with PATH one of the two files and 1 <= LINE <= the
 *    file's line count, or "PATH: message" (line 0) for the whole-file errors only (no listen /
 *    registry / instance directive, cannot open, no entries); registry errors in line order;
 *    for a registry file other than ours that the config names (a folder, a password file) the
 *    same format without the line count (inputs naming paths under /dev, /proc, /sys, /run are
 *    skipped: a FIFO or /dev/zero would hang the run, not find a bug);
 *  - a registry parsed without errors: entries sorted by (kind, prefix) with no duplicate,
 *    every field in range (instance an index of the instances given, max-ttl >= ttl, sliding
 *    only with a ttl, channels without TTL fields, owner set, line within the file), the
 *    per-kind index consistent, every duration reading back as duration_format prints it, and
 *    registry_lookup equal to a brute-force longest-prefix search for every prefix, every prefix
 *    extended and cut by a byte, and probes taken from the input; registry_print runs (plain and
 *    Markdown, to /dev/null);
 *  - a config loaded without errors: at least one listen, 1..CONFIG_MAX_INSTANCES instances with
 *    distinct valid names, each exactly tls or plain, tls ones with ca=, cert= and key= together,
 *    users with a secret, owners and distinct names, hard output limit >= the soft one.
 */
#include "config.h"
#include "registry.h"
#include "util.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64], cfg_path[128], reg_path[128];
static FILE *devnull;
static int print; /* FUZZ_CONFIG_PRINT=1: print each input's outcome and diagnostics */

__attribute__((noreturn)) static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_config: %s: %s\n", what, detail ? detail : "");
    abort();
}

static void write_file(const char *path, const void *data, size_t n, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0 || (n && write(fd, data, n) != (ssize_t)n) || fchmod(fd, mode) != 0 || close(fd) != 0)
        fail("cannot write", path);
}

/* At exit: remove the private directory and what the target wrote into it. */
static void cleanup(void)
{
    static const char *const files[] = {"keygate.conf",      "registry.conf",      "secrets/ok.pass",
                                        "secrets/open.pass", "secrets/empty.pass", "secrets"};
    char p[160];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        (void)remove(p);
    }
    (void)rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char sub[128];

    strcpy(dir, "/tmp/fuzz_config.XXXXXX");
    if (!mkdtemp(dir)) fail("mkdtemp", dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/keygate.conf", dir);
    snprintf(reg_path, sizeof reg_path, "%s/registry.conf", dir);
    snprintf(sub, sizeof sub, "%s/secrets", dir);
    if (mkdir(sub, 0700) != 0) fail("mkdir", sub);
    snprintf(sub, sizeof sub, "%s/secrets/ok.pass", dir);
    write_file(sub, "s3cret\n", 7, 0600);
    snprintf(sub, sizeof sub, "%s/secrets/open.pass", dir);
    write_file(sub, "s3cret\n", 7, 0644);
    snprintf(sub, sizeof sub, "%s/secrets/empty.pass", dir);
    write_file(sub, "", 0, 0600);
    atexit(cleanup);
    devnull = fopen("/dev/null", "w");
    if (!devnull) fail("fopen", "/dev/null");
    print = getenv("FUZZ_CONFIG_PRINT") != NULL;
    log_min_level = LOG_ERROR + 1; /* the parsers' warnings are not findings */
    return 0;
}

/* Lines getline() yields for n bytes of text. */
static int count_lines(const uint8_t *s, size_t n)
{
    int lines = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\n') lines++;
    return lines + (n > 0 && s[n - 1] != '\n');
}

/* 1 when the text, quotes and backslashes dropped as the tokenizer may, names a special file tree. */
static int names_special_path(const uint8_t *s, size_t n)
{
    static const char *const bad[] = {"dev/", "/dev", "proc/", "/proc", "sys/", "/sys", "run/", "/run"};
    char *flat = malloc(n + 1);
    size_t m = 0;
    int hit = 0;

    if (!flat) abort();
    for (size_t i = 0; i < n; i++)
        if (s[i] != '"' && s[i] != '\\' && s[i] != '\0') flat[m++] = (char)s[i];
    flat[m] = '\0';
    for (size_t i = 0; i < sizeof bad / sizeof bad[0] && !hit; i++) hit = strstr(flat, bad[i]) != NULL;
    free(flat);
    return hit;
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Does diagnostic d start with "path:" followed by a line number or a space? */
static int names_file(const char *d, const char *path)
{
    size_t n = strlen(path);
    return starts_with(d, path) && d[n] == ':' && (d[n + 1] == ' ' || isdigit((unsigned char)d[n + 1]));
}

/* Check one diagnostic; returns its line (0 for a whole-file one) and which file (*which: 0 cfg, 1 reg). */
static int diag_check(const char *d, int cfg_lines, int reg_lines, int *which)
{
    static const char *const whole_file[] = {
        "no listen directive", "no registry directive", "no instance directive",
        "cannot open config:", "cannot open registry:", "no entries (",
    };
    const char *rest;
    int limit;

    /* a file whose name is ours plus more (`registry registry.conf:` names "registry.conf:",
     * `registry keygate.conf:x` "keygate.conf:x") is another file: its diagnostic only starts
     * like one of ours, which go on with a line number or a space */
    if (names_file(d, cfg_path)) {
        rest = d + strlen(cfg_path) + 1;
        limit = cfg_lines;
        *which = 0;
    } else if (names_file(d, reg_path)) {
        rest = d + strlen(reg_path) + 1;
        limit = reg_lines;
        *which = 1;
    } else {
        /* another file the config named as its registry (a folder, a password file, our
           registry by another name): the same format, its lines not counted here */
        *which = 2;
        for (const char *p = strchr(d, ':'); p; p = strchr(p + 1, ':')) {
            if (p[1] == ' ') {
                for (size_t i = 0; i < sizeof whole_file / sizeof whole_file[0]; i++)
                    if (starts_with(p + 2, whole_file[i])) return 0;
            } else if (p[1] >= '1' && p[1] <= '9') {
                const char *q = p + 1;
                while (isdigit((unsigned char)*q)) q++;
                if (q[0] == ':' && q[1] == ' ' && q[2] != '\0') return 0;
            }
        }
        fail("diagnostic of another file is not FILE:LINE: message", d);
    }
    if (rest[0] == ' ') {
        for (size_t i = 0; i < sizeof whole_file / sizeof whole_file[0]; i++)
            if (starts_with(rest + 1, whole_file[i])) return 0;
        fail("diagnostic without a line number", d);
    }
    if (!isdigit((unsigned char)rest[0]) || rest[0] == '0') fail("diagnostic's line is not a number", d);
    char *end;
    long line = strtol(rest, &end, 10);
    if (end[0] != ':' || end[1] != ' ' || end[2] == '\0') fail("diagnostic is not FILE:LINE: message", d);
    if (line < 1 || line > limit) fail("diagnostic's line is outside the file", d);
    return (int)line;
}

/* The longest-prefix entry of kind for key, by brute force. */
static const struct namespace_entry *lookup_slow(const struct registry *r, enum ns_kind kind, const char *key,
                                                 size_t len)
{
    const struct namespace_entry *best = NULL;
    for (size_t i = 0; i < r->count; i++) {
        const struct namespace_entry *e = &r->entries[i];
        if (e->kind == kind && e->prefix_len <= len && memcmp(e->prefix, key, e->prefix_len) == 0 &&
            (!best || e->prefix_len > best->prefix_len))
            best = e;
    }
    return best;
}

static void lookup_check(const struct registry *r, const char *key, size_t len)
{
    for (int kind = NS_KEY; kind <= NS_CHANNEL; kind++) {
        const struct namespace_entry *fast = registry_lookup(r, (enum ns_kind)kind, key, len);
        const struct namespace_entry *slow = len ? lookup_slow(r, (enum ns_kind)kind, key, len) : NULL;
        if (fast != slow) {
            fprintf(stderr, "key '%.*s' (%zu bytes), kind %d: lookup %s, brute force %s\n", (int)len, key, len, kind,
                    fast ? fast->prefix : "(none)", slow ? slow->prefix : "(none)");
            fail("registry_lookup differs from the longest matching prefix", NULL);
        }
    }
}

static int bytes_order(const struct namespace_entry *a, const struct namespace_entry *b)
{
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    size_t n = a->prefix_len < b->prefix_len ? a->prefix_len : b->prefix_len;
    int c = memcmp(a->prefix, b->prefix, n);
    if (c) return c;
    return a->prefix_len < b->prefix_len ? -1 : a->prefix_len > b->prefix_len;
}

/* What registry_print shows of a duration (duration_format) must read back as the same value. */
static void duration_roundtrip(int64_t ms, const char *prefix)
{
    char buf[64];
    int64_t back;
    if (ms <= 0) return;
    duration_format(ms, buf, sizeof buf);
    if (duration_parse(buf, &back) != 0 || back != ms) fail("a duration does not read back as printed", prefix);
}

static void registry_check(const struct registry *r, size_t ninstances, int reg_lines, const uint8_t *in, size_t n,
                           const char *const *names)
{
    size_t count[2] = {0, 0};
    char key[512];

    if (r->count == 0) fail("a registry with no entries loaded", NULL);
    for (size_t i = 0; i < r->count; i++) {
        const struct namespace_entry *e = &r->entries[i];
        if (e->kind != NS_KEY && e->kind != NS_CHANNEL) fail("bad kind", e->prefix);
        if (!e->prefix || e->prefix_len == 0 || strlen(e->prefix) != e->prefix_len) fail("bad prefix", e->prefix);
        if (e->instance < 0 || (size_t)e->instance >= ninstances) fail("instance out of range", e->prefix);
        if (e->ttl_ms < 0 || e->max_ttl_ms < 0 || e->near_cache_ms < 0) fail("negative duration", e->prefix);
        if (e->max_ttl_ms && e->ttl_ms > e->max_ttl_ms) fail("max-ttl below ttl", e->prefix);
        if (e->sliding && e->ttl_ms == 0) fail("sliding without a ttl", e->prefix);
        if (e->kind == NS_CHANNEL && (e->ttl_ms || e->max_ttl_ms || e->sliding || e->near_cache_ms))
            fail("a channel with TTL fields", e->prefix);
        if (!e->owner || !e->owner[0] || !e->purpose) fail("owner or purpose missing", e->prefix);
        if (e->line < 1 || e->line > reg_lines) fail("entry line outside the file", e->prefix);
        if (i > 0 && bytes_order(&r->entries[i - 1], e) >= 0) fail("entries not sorted or duplicated", e->prefix);
        duration_roundtrip(e->ttl_ms, e->prefix);
        duration_roundtrip(e->max_ttl_ms, e->prefix);
        duration_roundtrip(e->near_cache_ms, e->prefix);
        /* issue 20: a near-cache line has its stream in a keygate-owned namespace of its instance */
        if ((e->near_cache_ms > 0) != (e->nc_stream != NULL))
            fail("near-cache without its stream (or the reverse)", e->prefix);
        if (e->near_cache_ms > 0) {
            if (e->sliding) fail("near-cache with sliding loaded", e->prefix);
            size_t j = 0;
            while (j < r->count && !(strcmp(r->entries[j].owner, "keygate") == 0 &&
                                     r->entries[j].instance == e->instance && r->entries[j].kind == NS_KEY &&
                                     strncmp(e->nc_stream, r->entries[j].prefix, r->entries[j].prefix_len) == 0))
                j++;
            if (j == r->count) fail("near-cache stream outside a keygate-owned namespace of its instance", e->prefix);
        }
        count[e->kind]++;
    }
    for (int k = 0; k < 2; k++) {
        if (r->n[k] != count[k]) fail("per-kind count wrong", NULL);
        for (size_t i = 0; i < r->n[k]; i++)
            if (r->entries[r->first[k] + i].kind != (enum ns_kind)k) fail("per-kind range wrong", NULL);
        for (size_t li = 0; li + 1 < r->nlens[k]; li++)
            if (r->lens[k][li] <= r->lens[k][li + 1]) fail("prefix lengths not longest first", NULL);
    }
    for (size_t i = 0; i < r->count; i++) {
        const struct namespace_entry *e = &r->entries[i];
        size_t len = e->prefix_len < sizeof key - 1 ? e->prefix_len : sizeof key - 1;
        memcpy(key, e->prefix, len);
        lookup_check(r, key, len);
        if (len > 0) lookup_check(r, key, len - 1);
        key[len] = (char)(i < n ? in[i] : 'x');
        lookup_check(r, key, len + 1);
    }
    /* probes from the input: every 16-byte window start, up to 24 bytes long */
    for (size_t off = 0; off < n; off += 16) {
        size_t len = n - off < 24 ? n - off : 24;
        memcpy(key, in + off, len);
        lookup_check(r, key, len);
    }
    registry_print(r, names, 0, devnull);
    registry_print(r, names, 1, devnull);
}

static void config_check(const struct config *c, int reg_lines, const uint8_t *in, size_t n)
{
    if (c->nlistens == 0 || !c->registry) fail("loaded without listen or registry", NULL);
    if (c->ninstances == 0 || c->ninstances > CONFIG_MAX_INSTANCES) fail("instance count", NULL);
    for (size_t i = 0; i < c->ninstances; i++) {
        const struct instance_conf *in_c = &c->instances[i];
        if (!in_c->name || !in_c->name[0] || c->instance_names[i] != in_c->name) fail("instance name", NULL);
        if (config_instance_index(c, in_c->name) != (int)i) fail("duplicate instance loaded", in_c->name);
        if (!in_c->host || in_c->port < 1 || in_c->port > 65535) fail("instance address", in_c->name);
        if (in_c->tls && !in_c->ca) fail("tls instance without ca=", in_c->name);
        if (!in_c->tls && (in_c->ca || in_c->cert || in_c->key)) fail("plain instance with TLS files", in_c->name);
        if (!in_c->cert != !in_c->key) fail("cert= without key=", in_c->name);
        if (in_c->password_file && (!in_c->password || !in_c->password[0])) fail("password not read", in_c->name);
        if (in_c->connections < 1 || in_c->connections > 64) fail("connections", in_c->name);
    }
    for (size_t i = 0; i < c->nlistens; i++) {
        const struct listen_addr *l = &c->listens[i];
        if (!l->unix_path == !l->host) fail("listen is neither unix nor TCP", NULL);
        if (l->tls && (!l->tls_cert || !l->tls_key)) fail("tls listen without cert/key", NULL);
    }
    for (size_t i = 0; i < c->nusers; i++) {
        const struct user_conf *u = &c->users[i];
        if (!u->name || !u->name[0] || u->nowners == 0) fail("user without name or owners", NULL);
        for (size_t j = 0; j < i; j++)
            if (strcmp(c->users[j].name, u->name) == 0) fail("duplicate user loaded", u->name);
        if (u->all_owners && u->nowners != 1) fail("owners=* not alone", u->name);
    }
    if (c->client_output_hard_limit < c->client_output_limit) fail("hard output limit below the soft one", NULL);
    if (c->threads < 1 || c->max_clients < 1 || c->max_pending < 1 || c->max_pinned < 1) fail("int limits", NULL);
    if (strcmp(c->registry_path, reg_path) == 0)
        registry_check(c->registry, c->ninstances, reg_lines, in, n, c->instance_names);
    else
        registry_check(c->registry, c->ninstances, 1 << 30, in, n, c->instance_names);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const two[] = {"durable", "cache"};
    struct diag errs = {0};
    const uint8_t *cfg = NULL, *reg;
    size_t cfg_n = 0, reg_n;
    int config_mode, cfg_lines = 0, reg_lines, last_reg_line = 0;

    if (size < 1 || size > 65536) return 0;
    config_mode = data[0] & 1;
    data++;
    size--;
    reg = data;
    reg_n = size;
    if (config_mode) {
        const uint8_t *sep = memchr(data, 1, size);
        cfg = data;
        cfg_n = sep ? (size_t)(sep - data) : size;
        reg = sep ? sep + 1 : data + size;
        reg_n = size - cfg_n - (sep != NULL);
        if (names_special_path(cfg, cfg_n)) return 0;
        write_file(cfg_path, cfg, cfg_n, 0644);
        cfg_lines = count_lines(cfg, cfg_n);
    }
    write_file(reg_path, reg, reg_n, 0644);
    reg_lines = count_lines(reg, reg_n);

    if (config_mode) {
        struct config *c = config_load(cfg_path, &errs);
        if (!c != (errs.count > 0)) fail("config_load's result and its errors disagree", NULL);
        if (c) config_check(c, reg_lines, reg, reg_n);
        config_free(c);
    } else {
        struct registry *r = registry_load(reg_path, two, 2, &errs);
        if (!r != (errs.count > 0)) fail("registry_load's result and its errors disagree", NULL);
        if (r) registry_check(r, 2, reg_lines, reg, reg_n, two);
        registry_free(r);
    }
    if (print) fprintf(stderr, "fuzz_config: %s mode, %zu errors\n", config_mode ? "config" : "registry", errs.count);
    for (size_t i = 0; i < errs.count; i++) {
        if (print) fprintf(stderr, "  %s\n", errs.lines[i]);
        int which, line = diag_check(errs.lines[i], cfg_lines, reg_lines, &which);
        if (which == 1) {
            if (line < last_reg_line) fail("registry errors out of line order", errs.lines[i]);
            last_reg_line = line;
        }
    }
    diag_free(&errs);
    return 0;
}
