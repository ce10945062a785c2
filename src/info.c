/* info.c: INFO's instance sections: which a request names, and keygate's sections plus each instance's, labelled, as one reply. */
#include "info.h"

#include "args.h"
#include "resp.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const instance_sections[] = {"keyspace", "memory", "replication", NULL};

int info_names_instance_section(size_t argc, const char *const *argv, const size_t *argvlen)
{
    for (size_t i = 1; i < argc; i++)
        for (size_t k = 0; instance_sections[k]; k++)
            if (args_word_is(argv[i], argvlen[i], instance_sections[k])) return 1;
    return 0;
}

/* Is the section header line h[0..len) ("# Name") one of the instance sections? */
static int header_is_instance_section(const char *h, size_t len)
{
    if (len < 3 || h[0] != '#' || h[1] != ' ') return 0;
    for (size_t k = 0; instance_sections[k]; k++)
        if (len - 2 == strlen(instance_sections[k]) && strncasecmp(h + 2, instance_sections[k], len - 2) == 0) return 1;
    return 0;
}

/* The body of a bulk reply r[0..len), or of a RESP3 verbatim string "=N\r\ntxt:..." (a RESP3
 * client's instance connections answer INFO so; the 4-byte format is skipped): *body,
 * *body_len; 0, or -1 when r is neither, whole. */
static int bulk_body(const char *r, size_t len, const char **body, size_t *body_len)
{
    const char *crlf = len > 1 && (r[0] == '$' || r[0] == '=') ? memchr(r, '\r', len) : NULL;
    long long n = 0;
    if (!crlf || resp_parse_ll(r + 1, (size_t)(crlf - r - 1), &n) != 0 || n < 0) return -1;
    size_t hdr = (size_t)(crlf - r) + 2;
    if (hdr > len || len - hdr != (size_t)n + 2) return -1;
    size_t skip = r[0] == '=' ? 4 : 0; /* "txt:" */
    if ((size_t)n < skip) return -1;
    *body = r + hdr + skip;
    *body_len = (size_t)n - skip;
    return 0;
}

/* Append the instance sections of one INFO body to text, headers relabelled with the instance's name. */
static void add_instance_sections(struct bytebuf *text, const char *name, const char *body, size_t len)
{
    int keep = 0;
    size_t pos = 0;
    while (pos < len) {
        const char *nl = memchr(body + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - body) + 1 : len; /* the line with its LF */
        size_t n = end - pos;
        while (n > 0 && (body[pos + n - 1] == '\n' || body[pos + n - 1] == '\r')) n--; /* the line without CRLF */
        const char *line = body + pos;
        if (n > 0 && line[0] == '#') {
            keep = header_is_instance_section(line, n);
            if (keep) {
                bytebuf_add(text, line, n);
                bytebuf_add(text, STR_AND_LEN(" (instance "));
                bytebuf_add(text, name, strlen(name));
                bytebuf_add(text, STR_AND_LEN(")\r\n"));
            }
        } else if (n > 0 && keep) {
            bytebuf_add(text, line, n);
            bytebuf_add(text, STR_AND_LEN("\r\n"));
        } else if (n == 0 && keep) {
            bytebuf_add(text, STR_AND_LEN("\r\n")); /* the blank line that ends a section */
            keep = 0;
        }
        pos = end;
    }
    if (keep) bytebuf_add(text, STR_AND_LEN("\r\n")); /* Redis's last section has no blank line after it */
}

int info_merge(const char *local, size_t local_len, const struct info_part *parts, int nparts, struct bytebuf *out)
{
    for (int k = 0; k < nparts; k++) {
        if (parts[k].len > 0 && parts[k].reply[0] == '-') {
            bytebuf_add(out, parts[k].reply, parts[k].len); /* never a partial INFO */
            return 0;
        }
    }
    struct bytebuf text = {0};
    if (local_len) bytebuf_add(&text, local, local_len);
    for (int k = 0; k < nparts; k++) {
        const char *body;
        size_t len;
        if (bulk_body(parts[k].reply, parts[k].len, &body, &len) != 0) {
            bytebuf_free(&text);
            return -1;
        }
        add_instance_sections(&text, parts[k].name, body, len);
    }
    size_t n = text.len >= 2 ? text.len - 2 : text.len; /* Redis ends INFO without the last blank line */
    if (n > 0)
        bytebuf_add_bulk(out, text.p, n);
    else
        bytebuf_add(out, STR_AND_LEN("$0\r\n\r\n"));
    bytebuf_free(&text);
    return 0;
}
