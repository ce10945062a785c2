/* util.h: small shared helpers: diagnostics lists ("FILE:LINE: message"), durations, logging. */
#ifndef KEYGATE_UTIL_H
#define KEYGATE_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <event2/util.h> /* evutil_socket_t */

#define KG_MUST_CHECK __attribute__((warn_unused_result))

#define KEYGATE_VERSION "0.1.0"

/*
 * THE OUT-OF-MEMORY RULE (all of src/, start-up and run time alike): a failed allocation
 * is fatal. keygate logs one line ("ERROR out of memory (N bytes)") and aborts, as Redis
 * does (zmalloc's default out-of-memory handler). No request is answered -OOM and no
 * client is closed because an allocation failed: a half-done step would leave a backend's
 * FIFO, a client's queue or the max-memory accounting out of step, and a process that
 * cannot allocate rarely gets further by closing one client.
 *  - malloc / calloc / realloc / strdup / asprintf: xmalloc, xcalloc, xrealloc, xstrdup,
 *    xmemdup, xasprintf below; they never return NULL.
 *  - libevent (event_oom.c): xevbuffer_new / xevent_new / xevtimer_new never return NULL; the daemon
 *    routes libevent's own allocations (evbuffer growth, bufferevents, evhttp) to the same
 *    rule with oom_route_libevent(), first thing in main(), so evbuffer_add & co. cannot
 *    fail silently either.
 *  - The growable buffers below (bytebuf, ptrvec, tokens, diag) follow it too.
 *  - Not this rule: the configured memory limits (max-memory, client-output-hard-limit,
 *    max-request-size, max-pinned) answer or close as configured, and calls that fail for
 *    other reasons than memory (SSL_new, socket, bind, evhttp_new) report at the call site.
 *  - Config parsing (start-up, reload, `keygate --check`) reports what is wrong with a
 *    file as "FILE:LINE: message" diagnostics (struct diag) and returns an error; its
 *    allocations follow this rule (abort), they are not reported as diagnostics.
 */
void oom_abort(size_t n) __attribute__((noreturn, cold));

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (__builtin_expect(p == NULL, 0)) oom_abort(n);
    return p;
}

static inline void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (__builtin_expect(q == NULL, 0)) oom_abort(n);
    return q;
}

void *xcalloc(size_t n, size_t size);
char *xstrdup(const char *s);
/* A malloc'd copy of data[0..n) (n may be 0). */
void *xmemdup(const void *data, size_t n);
/* asprintf that aborts on out of memory; returns the length. */
int xasprintf(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct evbuffer;
struct event;
struct event_base;
struct evbuffer *xevbuffer_new(void);
struct event *xevent_new(struct event_base *base, evutil_socket_t fd, short events,
                         void (*cb)(evutil_socket_t, short, void *), void *arg);
#define xevtimer_new(base, cb, arg) xevent_new((base), -1, 0, (cb), (arg))
/* Route libevent's allocations through the rule (event_set_mem_functions): call before any
 * other libevent function. The daemon calls it; the unit tests need not. */
void oom_route_libevent(void);

/* A string literal and its length, for (ptr, len) arguments: no length is counted by hand. */
#define STR_AND_LEN(s) ("" s ""), (sizeof("" s "") - 1)

/* One unit of a number-with-unit syntax: "90s", "16mb". */
struct scale_unit {
    const char *name;
    int64_t mul;
};

/*
 * Parse "<digits><unit>" where unit is one of units[] (compared ignoring case when
 * ignore_case): the digits times its multiplier into *out. 0, or -1 when there are no
 * digits, the unit is unknown, or the value overflows.
 */
int scaled_parse(const char *s, const struct scale_unit *units, size_t nunits, int ignore_case,
                 int64_t *out) KG_MUST_CHECK;

/* Parse a size: "1024", "64kb", "16mb", "1gb" (case-insensitive; as Redis, k/m/g are
 * powers of 1000 and kb/mb/gb powers of 1024). 0 on success, -1 on junk or overflow. */
int size_parse(const char *s, int64_t *bytes) KG_MUST_CHECK;

/* A growable list of error lines, each already formatted as "FILE:LINE: message". */
struct diag {
    char **lines;
    size_t count;
    size_t cap;
};

/* Append "FILE:LINE: message" (line 0 prints "FILE: message"). */
void diag_add(struct diag *d, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void diag_free(struct diag *d);

/*
 * Parse a duration: a positive integer followed by one unit of ms, s, m, h, d
 * ("500ms", "90s", "10m", "24h", "7d"). Stores milliseconds in *ms.
 * Returns 0 on success, -1 on anything else (no unit, zero, overflow, junk).
 */
int duration_parse(const char *s, int64_t *ms) KG_MUST_CHECK;

/* Format ms as the shortest exact duration ("90s", "1h", "500ms") into buf. */
void duration_format(int64_t ms, char *buf, size_t len);

/* Resolve `path` against the folder of `relative_to_file` unless absolute; malloc'd. */
char *path_resolve(const char *relative_to_file, const char *path);

/* Read a whole small file (password files); strips one trailing newline. malloc'd, NULL on error
 * with errno set. */
char *file_read_secret(const char *path, size_t *len);

/* One whitespace-separated token of a config line: quotes removed, escapes applied. */
struct token {
    char *text;
    int eq; /* offset in text of the first '=' outside quotes, or -1 (a bare word) */
};

struct tokens {
    struct token *v;
    size_t n;
};

/*
 * Split one line of keygate.conf / registry.conf into tokens. Whitespace separates
 * tokens; "..." quotes (anywhere in a token) may hold spaces and '#', with \" and
 * \\ as escapes; a '#' outside quotes starts a comment. Returns 0, or -1 with *err
 * set to a static message ("unterminated quote"); `t` is then empty. Free with tokens_free.
 */
int tokens_split(const char *line, struct tokens *t, const char **err) KG_MUST_CHECK;
void tokens_free(struct tokens *t);

/* A growable linear byte buffer (staging of backend output, a client's transaction). */
struct bytebuf {
    char *p;
    size_t len, cap;
};

/* Append n bytes (out of memory aborts: the rule above). */
void bytebuf_add(struct bytebuf *b, const void *data, size_t n);

/* Append "$<n>\r\n<data>\r\n" (a RESP bulk string). */
void bytebuf_add_bulk(struct bytebuf *b, const void *data, size_t n);

void bytebuf_free(struct bytebuf *b);

/* A growable array of pointers (the worker's lists of connections to flush). */
struct ptrvec {
    void **items;
    size_t n, cap;
};

/* Append item (out of memory aborts: the rule above). */
void ptrvec_push(struct ptrvec *v, void *item);

/* Remove item if present; the others keep their order. */
void ptrvec_remove(struct ptrvec *v, const void *item);

/* A map from nonzero 64-bit ids to pointers (open addressing, linear probing, at most half
 * full): a zeroed struct is an empty map. The worker's clients by id (tracker.c's receivers). */
struct idmap {
    uint64_t *ids; /* 0: a free slot */
    void **vals;
    size_t cap, n;
};

/* Map id (nonzero) to v, replacing what it mapped to. */
void idmap_put(struct idmap *m, uint64_t id, void *v);

/* What id maps to, or NULL. */
void *idmap_get(const struct idmap *m, uint64_t id);

/* Forget id (nothing when absent). */
void idmap_del(struct idmap *m, uint64_t id);

/* Free the map's memory (it is empty afterwards). */
void idmap_free(struct idmap *m);

/* Write the decimal digits of v into buf (at least 21 bytes); returns their count. No NUL. */
size_t format_ll(char *buf, long long v);

/* Milliseconds and nanoseconds of the wall / monotonic clocks. */
int64_t clock_wall_ms(void);
uint64_t clock_mono_ns(void);

/* FNV-1a (64-bit) of s[0..len). */
uint64_t util_hash(const char *s, size_t len);

static inline int64_t clock_mono_ms(void)
{
    return (int64_t)(clock_mono_ns() / 1000000u);
}

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };
extern int log_min_level;

/* The level a log-level word names (debug, info, warn, error), or -1. */
int log_level_parse(const char *word);

/* log-format: text (the default) or json. Set once at start-up, before any thread runs. */
enum log_format { LOG_FORMAT_TEXT = 0, LOG_FORMAT_JSON };
extern int log_format;

/*
 * 1 when stderr is the systemd journal's stream: $JOURNAL_STREAM ("DEV:INODE", set by systemd
 * for a unit whose StandardError= is the journal) names the file stderr is (fstat). Every line
 * keygate writes to stderr then starts with its syslog priority, sd-daemon's "<N>" (3 error,
 * 4 warning, 6 info, 7 debug), which journald strips and stores as PRIORITY=: `journalctl
 * -p warning` shows warnings and errors only. Set by log_journal_detect; 0 (no prefix) until.
 */
extern int log_journal;

/*
 * Set log_journal from $JOURNAL_STREAM and stderr. Called once at start-up, before any thread
 * runs and before the first line is written (main). A stderr redirected elsewhere (a file, a
 * pipe: `keygate --check ... 2>x`) under a unit that set $JOURNAL_STREAM gets no prefix.
 */
void log_journal_detect(void);

/* 1 when fd is the stream $JOURNAL_STREAM names (stdout under a unit, usually), else 0. */
int log_journal_fd(int fd);

/* "<N>" for level when log_journal is set (the prefix log_event writes), else "". For the
 * lines written to stderr without log_event: the configuration's FILE:LINE: errors. */
const char *log_priority_prefix(enum log_level level);

/*
 * What a log line is about, where the call site knows it (NULL or 0: not known, left out).
 * JSON lines carry each known one as a field ("client", "client_id", "instance",
 * "backend", "namespace"); text lines print only the message, which already names them.
 * Never a secret: no field and no message holds a password or an AUTH argument.
 */
struct log_fields {
    const char *client;           /* the client's address: "127.0.0.1:5123", "unix:/run/keygate/keygate.sock" */
    unsigned long long client_id; /* keygate's client id (CLIENT ID), 0: none */
    const char *instance;         /* the instance's name */
    const char *backend_host;     /* the backend's address, with backend_port */
    int backend_port;
    const char *ns; /* the namespace's prefix */
};

/*
 * Log one line to stderr when level >= log_min_level. event is a short stable word naming
 * what happened ("client_closed", "backend_down"); fields may be NULL. log-format text:
 * "LEVEL message" (journald adds the time and the unit). log-format json: one object per
 * line, {"ts","level","event", the known fields, "msg"} (log_json_format). Under the journal
 * (log_journal) each line starts with its priority "<N>" (log_priority_prefix). One write per
 * line: lines of different threads never interleave.
 */
void log_event(enum log_level level, const char *event, const struct log_fields *fields, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * The JSON line log_event writes, into buf[0..cap) (cap >= 256), NUL-terminated, with its
 * newline; returns its length. ts is the RFC 3339 UTC time ("2026-12-01T15:34:07.123Z").
 * Every string is escaped (log_json_escape); a message too long for buf is cut at a whole
 * character and the object is still closed. Pure: the unit tests call it.
 */
size_t log_json_format(char *buf, size_t cap, const char *ts, enum log_level level, const char *event,
                       const struct log_fields *fields, const char *msg);

/*
 * s[0..n) as the inside of a JSON string into out[0..cap) (no quotes, no NUL); returns the
 * bytes written, stopping before an escape that would not fit. `"` and `\` are escaped,
 * \n \r \t \b \f by name, the other control bytes and DEL as \u00XX; valid UTF-8 passes
 * as it is; a byte that is not part of a valid UTF-8 character (a key's binary bytes)
 * becomes the four characters \xHH (JSON "\\xHH"), so every line is valid UTF-8 JSON.
 * *used gets how many bytes of s were consumed.
 */
size_t log_json_escape(char *out, size_t cap, const char *s, size_t n, size_t *used);

#endif
