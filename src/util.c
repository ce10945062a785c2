/* util.c: diagnostics lists, durations, paths, secret files, line tokens and logging. */
#include "util.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SECRET_MAX_BYTES 4096

int log_min_level = LOG_INFO;

void oom_abort(size_t n)
{
    /* no log_event: its formatting must not need memory either */
    char msg[64];
    int len = snprintf(msg, sizeof msg, "%sERROR out of memory (%zu bytes)\n", log_priority_prefix(LOG_ERROR), n);
    if (len > 0) fwrite(msg, 1, (size_t)len, stderr);
    abort();
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom_abort(n * size);
    return p;
}

char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d) oom_abort(strlen(s) + 1);
    return d;
}

void *xmemdup(const void *data, size_t n)
{
    void *p = xmalloc(n);
    if (n) memcpy(p, data, n);
    return p;
}

int xasprintf(char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(out, fmt, ap);
    va_end(ap);
    if (n < 0) oom_abort(0);
    return n;
}

int scaled_parse(const char *s, const struct scale_unit *units, size_t nunits, int ignore_case, int64_t *out)
{
    if (!s || *s < '0' || *s > '9') return -1;
    int64_t n = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (n > (INT64_MAX - 9) / 10) return -1;
        n = n * 10 + (*p - '0');
    }
    for (size_t i = 0; i < nunits; i++) {
        if ((ignore_case ? strcasecmp(p, units[i].name) : strcmp(p, units[i].name)) != 0) continue;
        if (n > INT64_MAX / units[i].mul) return -1;
        *out = n * units[i].mul;
        return 0;
    }
    return -1;
}

int size_parse(const char *s, int64_t *bytes)
{
    static const struct scale_unit units[] = {{"", 1},           {"b", 1},
                                              {"k", 1000},       {"kb", 1024},
                                              {"m", 1000000},    {"mb", 1024 * 1024},
                                              {"g", 1000000000}, {"gb", 1024 * 1024 * 1024}};
    return scaled_parse(s, units, sizeof units / sizeof units[0], 1, bytes);
}

void diag_add(struct diag *d, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    char *out = NULL;
    if (line > 0)
        xasprintf(&out, "%s:%d: %s", file, line, msg);
    else
        xasprintf(&out, "%s: %s", file, msg);
    if (d->count == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 8;
        d->lines = xrealloc(d->lines, d->cap * sizeof *d->lines);
    }
    d->lines[d->count++] = out;
}

void diag_free(struct diag *d)
{
    for (size_t i = 0; i < d->count; i++) free(d->lines[i]);
    free(d->lines);
    d->lines = NULL;
    d->count = d->cap = 0;
}

/* Largest first: duration_format prints the largest unit that divides exactly. */
static const struct scale_unit duration_units[] = {
    {"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1},
};

int duration_parse(const char *s, int64_t *ms)
{
    int64_t v;
    if (scaled_parse(s, duration_units, sizeof duration_units / sizeof duration_units[0], 0, &v) != 0 || v == 0)
        return -1;
    *ms = v;
    return 0;
}

void duration_format(int64_t ms, char *buf, size_t len)
{
    if (ms > 0) {
        for (size_t i = 0; i < sizeof duration_units / sizeof duration_units[0]; i++) {
            if (ms % duration_units[i].mul == 0) {
                snprintf(buf, len, "%lld%s", (long long)(ms / duration_units[i].mul), duration_units[i].name);
                return;
            }
        }
    }
    snprintf(buf, len, "%lldms", (long long)ms);
}

char *path_resolve(const char *relative_to_file, const char *path)
{
    const char *slash = relative_to_file ? strrchr(relative_to_file, '/') : NULL;
    char *out = NULL;
    if (path[0] == '/' || !slash)
        out = xstrdup(path);
    else
        xasprintf(&out, "%.*s/%s", (int)(slash - relative_to_file), relative_to_file, path);
    return out;
}

char *file_read_secret(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    char *buf = xmalloc(SECRET_MAX_BYTES + 1);
    size_t n = 0;
    ssize_t r = 0;
    while (n <= SECRET_MAX_BYTES && (r = read(fd, buf + n, SECRET_MAX_BYTES + 1 - n)) != 0) {
        if (r < 0) {
            if (errno == EINTR) continue;
            break;
        }
        n += (size_t)r;
    }
    int saved = r < 0 ? errno : (n > SECRET_MAX_BYTES ? EFBIG : 0);
    close(fd);
    if (saved) {
        free(buf);
        errno = saved;
        return NULL;
    }
    if (n > 0 && buf[n - 1] == '\n') n--;
    if (n > 0 && buf[n - 1] == '\r') n--;
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

/* Append one byte to a growing token buffer. */
static void buf_put(char **buf, size_t *n, size_t *cap, char c)
{
    if (*n + 1 >= *cap) {
        *cap = *cap ? *cap * 2 : 32;
        *buf = xrealloc(*buf, *cap);
    }
    (*buf)[(*n)++] = c;
    (*buf)[*n] = '\0';
}

int tokens_split(const char *line, struct tokens *t, const char **err)
{
    size_t cap = 0;
    t->v = NULL;
    t->n = 0;
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
        if (*p == '\0' || *p == '#') return 0;
        char *text = NULL;
        size_t n = 0, tcap = 0;
        int eq = -1;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n' && *p != '#') {
            if (*p != '"') {
                if (*p == '=' && eq < 0) eq = (int)n;
                buf_put(&text, &n, &tcap, *p++);
                continue;
            }
            p++; /* a quoted section: up to the closing quote */
            buf_put(&text, &n, &tcap, '\0');
            n--;
            while (*p && *p != '"') {
                if (*p == '\\' && (p[1] == '"' || p[1] == '\\')) p++;
                buf_put(&text, &n, &tcap, *p++);
            }
            if (*p != '"') {
                free(text);
                tokens_free(t);
                if (err) *err = "unterminated quote";
                return -1;
            }
            p++;
        }
        if (t->n == cap) {
            cap = cap ? cap * 2 : 8;
            t->v = xrealloc(t->v, cap * sizeof *t->v);
        }
        t->v[t->n].text = text;
        t->v[t->n].eq = eq;
        t->n++;
    }
}

void tokens_free(struct tokens *t)
{
    for (size_t i = 0; i < t->n; i++) free(t->v[i].text);
    free(t->v);
    t->v = NULL;
    t->n = 0;
}

/* ---- logging ----------------------------------------------------------------------- */

/* A formatted message; longer ones are cut (a log line is no place for a bulk value). */
#define LOG_MSG_MAX 2048
/* One JSON line: the message escaped (at most 6 bytes per byte: \u00XX) and the fields. */
#define LOG_LINE_MAX (6 * LOG_MSG_MAX + 1024)

int log_format = LOG_FORMAT_TEXT;

int log_journal;

static const char *const log_level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
/* sd-daemon.h's SD_DEBUG, SD_INFO, SD_WARNING, SD_ERR: the syslog priorities of the levels */
static const char *const log_level_priorities[] = {"<7>", "<6>", "<4>", "<3>"};
static const char *const log_level_words[] = {"debug", "info", "warn", "error"}; /* log-level's words */

int log_level_parse(const char *word)
{
    for (int i = LOG_DEBUG; i <= LOG_ERROR; i++)
        if (strcmp(word, log_level_words[i]) == 0) return i;
    return -1;
}

/* Length of the valid UTF-8 character at s[0..n) (s[0] >= 0x80), or 0 when it is not one
 * (overlong forms, surrogates and code points past U+10FFFF are not). */
static size_t utf8_char_len(const unsigned char *s, size_t n)
{
    size_t len;
    unsigned min, cp;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2, min = 0x80, cp = s[0] & 0x1fu;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, min = 0x800, cp = s[0] & 0x0fu;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, min = 0x10000, cp = s[0] & 0x07u;
    else
        return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

size_t log_json_escape(char *out, size_t cap, const char *s, size_t n, size_t *used)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0, i = 0;
    while (i < n) {
        char esc[8];
        size_t elen = 0, take = 1;
        unsigned char ch = u[i];
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\', esc[1] = (char)ch, elen = 2;
        } else if (ch == '\n' || ch == '\r' || ch == '\t' || ch == '\b' || ch == '\f') {
            esc[0] = '\\', elen = 2;
            esc[1] = ch == '\n' ? 'n' : ch == '\r' ? 'r' : ch == '\t' ? 't' : ch == '\b' ? 'b' : 'f';
        } else if (ch < 0x20 || ch == 0x7f) {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[ch >> 4], esc[5] = hex[ch & 15], elen = 6;
        } else if (ch < 0x80) {
            esc[0] = (char)ch, elen = 1;
        } else if ((take = utf8_char_len(u + i, n - i)) > 0) {
            memcpy(esc, u + i, take);
            elen = take;
        } else {
            take = 1; /* not UTF-8: the byte as the text \xHH, its backslash escaped */
            memcpy(esc, "\\\\x", 3);
            esc[3] = hex[ch >> 4], esc[4] = hex[ch & 15], elen = 5;
        }
        if (o + elen > cap) break;
        memcpy(out + o, esc, elen);
        o += elen;
        i += take;
    }
    if (used) *used = i;
    return o;
}

/* Append the raw text t to buf[*o..cap), as much as fits. */
static void json_raw(char *buf, size_t cap, size_t *o, const char *t)
{
    size_t n = strlen(t);
    if (n > cap - *o) n = cap - *o;
    memcpy(buf + *o, t, n);
    *o += n;
}

/* Append ,"name":"<value escaped>" to buf[*o..cap), leaving `keep` bytes free. */
static void json_field(char *buf, size_t cap, size_t keep, size_t *o, const char *name, const char *value, size_t vlen)
{
    if (cap - *o < keep + strlen(name) + 6) return;
    json_raw(buf, cap, o, ",\"");
    json_raw(buf, cap, o, name);
    json_raw(buf, cap, o, "\":\"");
    *o += log_json_escape(buf + *o, cap - keep - 1 - *o, value, vlen, NULL);
    json_raw(buf, cap, o, "\"");
}

size_t log_json_format(char *buf, size_t cap, const char *ts, enum log_level level, const char *event,
                       const struct log_fields *f, const char *msg)
{
    /* room kept for what closes the line: the message's quote, "}", the newline, the NUL */
    const size_t keep = 8;
    size_t o = 0;
    cap -= 1; /* the NUL */
    json_raw(buf, cap, &o, "{\"ts\":\"");
    o += log_json_escape(buf + o, cap - keep - o, ts, strlen(ts), NULL);
    json_raw(buf, cap, &o, "\",\"level\":\"");
    json_raw(buf, cap, &o, log_level_words[level <= LOG_ERROR ? level : LOG_ERROR]);
    json_raw(buf, cap, &o, "\"");
    json_field(buf, cap, keep + 64, &o, "event", event ? event : "log", strlen(event ? event : "log"));
    if (f && f->client) json_field(buf, cap, keep + 64, &o, "client", f->client, strlen(f->client));
    if (f && f->client_id) {
        char num[64];
        snprintf(num, sizeof num, ",\"client_id\":%llu", f->client_id);
        if (cap - o > keep + 64 + strlen(num)) json_raw(buf, cap, &o, num);
    }
    if (f && f->instance) json_field(buf, cap, keep + 64, &o, "instance", f->instance, strlen(f->instance));
    if (f && f->backend_host) {
        char addr[300];
        int n = snprintf(addr, sizeof addr, strchr(f->backend_host, ':') ? "[%s]:%d" : "%s:%d", f->backend_host,
                         f->backend_port);
        json_field(buf, cap, keep + 64, &o, "backend", addr,
                   n < 0                     ? 0
                   : (size_t)n < sizeof addr ? (size_t)n
                                             : sizeof addr - 1);
    }
    if (f && f->ns) json_field(buf, cap, keep + 64, &o, "namespace", f->ns, strlen(f->ns));
    json_field(buf, cap, keep - 2, &o, "msg", msg, strlen(msg));
    json_raw(buf, cap, &o, "}\n");
    buf[o] = '\0';
    return o;
}

int log_journal_fd(int fd)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    char end;
    if (!js || sscanf(js, "%llu:%llu%c", &dev, &ino, &end) != 2) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0) return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_journal_detect(void)
{
    log_journal = log_journal_fd(STDERR_FILENO);
}

const char *log_priority_prefix(enum log_level level)
{
    if (!log_journal) return "";
    return log_level_priorities[level <= LOG_ERROR ? level : LOG_ERROR];
}

static void log_vwrite(enum log_level level, const char *event, const struct log_fields *f, const char *fmt, va_list ap)
{
    char msg[LOG_MSG_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (level > LOG_ERROR) level = LOG_ERROR;
    if (log_format != LOG_FORMAT_JSON) {
        fprintf(stderr, "%s%s %s\n", log_priority_prefix(level), log_level_names[level], msg);
        return;
    }
    struct timespec now;
    struct tm tm;
    char ts[40];
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof ts - n, ".%03ldZ", now.tv_nsec / 1000000);
    char line[4 + LOG_LINE_MAX];
    const char *prio = log_priority_prefix(level);
    size_t plen = strlen(prio);
    memcpy(line, prio, plen);
    size_t len = plen + log_json_format(line + plen, sizeof line - plen, ts, level, event, f, msg);
    fwrite(line, 1, len, stderr);
}

void log_event(enum log_level level, const char *event, const struct log_fields *fields, const char *fmt, ...)
{
    if ((int)level < log_min_level) return;
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(level, event, fields, fmt, ap);
    va_end(ap);
}

void bytebuf_add(struct bytebuf *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256; /* small: an idle client keeps its reply buffer */
        while (cap < b->len + n) cap *= 2;
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

size_t format_ll(char *buf, long long v)
{
    char tmp[24];
    size_t n = 0, out = 0;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) buf[out++] = '-';
    while (n) buf[out++] = tmp[--n];
    return out;
}

void bytebuf_add_bulk(struct bytebuf *b, const void *data, size_t n)
{
    /* one capacity check and one copy of the data: a hit's whole reply is this call */
    size_t need = b->len + n + 25; /* '$', at most 20 digits, two CRLFs */
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need) cap *= 2;
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
    char *p = b->p + b->len;
    *p++ = '$';
    p += format_ll(p, (long long)n);
    *p++ = '\r';
    *p++ = '\n';
    if (n) memcpy(p, data, n);
    p += n;
    *p++ = '\r';
    *p++ = '\n';
    b->len = (size_t)(p - b->p);
}

void bytebuf_free(struct bytebuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static size_t idmap_home(const struct idmap *m, uint64_t id)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) & (m->cap - 1); /* Fibonacci hashing */
}

static void idmap_grow(struct idmap *m)
{
    struct idmap old = *m;
    m->cap = old.cap ? old.cap * 2 : 64;
    m->ids = xcalloc(m->cap, sizeof(*m->ids));
    m->vals = xcalloc(m->cap, sizeof(*m->vals));
    m->n = 0;
    for (size_t i = 0; i < old.cap; i++)
        if (old.ids[i]) idmap_put(m, old.ids[i], old.vals[i]);
    free(old.ids);
    free(old.vals);
}

void idmap_put(struct idmap *m, uint64_t id, void *v)
{
    assert(id != 0);
    if ((m->n + 1) * 2 > m->cap) idmap_grow(m);
    size_t i = idmap_home(m, id);
    while (m->ids[i] && m->ids[i] != id) i = (i + 1) & (m->cap - 1);
    if (!m->ids[i]) m->n++;
    m->ids[i] = id;
    m->vals[i] = v;
}

void *idmap_get(const struct idmap *m, uint64_t id)
{
    if (!m->cap || !id) return NULL;
    for (size_t i = idmap_home(m, id); m->ids[i]; i = (i + 1) & (m->cap - 1))
        if (m->ids[i] == id) return m->vals[i];
    return NULL;
}

void idmap_del(struct idmap *m, uint64_t id)
{
    if (!m->cap || !id) return;
    size_t i = idmap_home(m, id);
    while (m->ids[i] && m->ids[i] != id) i = (i + 1) & (m->cap - 1);
    if (!m->ids[i]) return;
    /* backward shift: the entries after it that probed past i move up, no tombstones */
    for (size_t j = (i + 1) & (m->cap - 1); m->ids[j]; j = (j + 1) & (m->cap - 1)) {
        size_t home = idmap_home(m, m->ids[j]);
        /* j's entry may fill the hole at i when its home is not cyclically in (i, j] */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            m->ids[i] = m->ids[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->ids[i] = 0;
    m->vals[i] = NULL;
    m->n--;
}

void idmap_free(struct idmap *m)
{
    free(m->ids);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

void ptrvec_push(struct ptrvec *v, void *item)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 16;
        v->items = xrealloc(v->items, cap * sizeof(*v->items));
        v->cap = cap;
    }
    v->items[v->n++] = item;
}

void ptrvec_remove(struct ptrvec *v, const void *item)
{
    for (size_t i = 0; i < v->n; i++) {
        if (v->items[i] != item) continue;
        memmove(&v->items[i], &v->items[i + 1], (v->n - i - 1) * sizeof(*v->items));
        v->n--;
        return;
    }
}

int64_t clock_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t clock_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t util_hash(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a: the offset basis */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}
