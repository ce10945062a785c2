/* util.h: small shared helpers: diagnostics lists ("FILE:LINE: message"), durations, logging. */
#ifndef KEYGATE_UTIL_H
#define KEYGATE_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define KG_MUST_CHECK __attribute__((warn_unused_result))

#define KEYGATE_VERSION "0.1.0"

/* Allocation for configuration-time code: on out of memory, log and abort. */
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

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

/* A growable list of error lines, each already formatted as "FILE:LINE: message". */
struct diag {
    char **lines;
    size_t count;
    size_t cap;
};

/* Append "FILE:LINE: message" (line 0 prints "FILE: message"). */
void diag_add(struct diag *d, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
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
    int eq;     /* offset in text of the first '=' outside quotes, or -1 (a bare word) */
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

/* Append n bytes; 0, or -1 when out of memory (the buffer is unchanged then). */
int bytebuf_add(struct bytebuf *b, const void *data, size_t n) KG_MUST_CHECK;

/* Append "$<n>\r\n<data>\r\n" (a RESP bulk string). 0 or -1 as bytebuf_add. */
int bytebuf_add_bulk(struct bytebuf *b, const void *data, size_t n) KG_MUST_CHECK;

void bytebuf_free(struct bytebuf *b);

/* A growable array of pointers (the worker's lists of connections to flush). */
struct ptrvec {
    void **items;
    size_t n, cap;
};

/* Append item; 0, or -1 when out of memory. */
int ptrvec_push(struct ptrvec *v, void *item) KG_MUST_CHECK;

/* Remove item if present; the others keep their order. */
void ptrvec_remove(struct ptrvec *v, const void *item);

/* Write the decimal digits of v into buf (at least 21 bytes); returns their count. No NUL. */
size_t format_ll(char *buf, long long v);

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };
extern int log_min_level;
/* Log one line to stderr: "LEVEL message" (journald adds time and unit). */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
