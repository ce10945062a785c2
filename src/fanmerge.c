/* fanmerge.c: the replies of a command fanned out to several instances or nodes, made into the client's one reply (pure). */
#include "fanmerge.h"

#include "replies.h"
#include "slotmap.h"

int fanmerge_info(const char *local, size_t local_len, const struct info_part *parts, int nparts, int resp3,
                  struct bytebuf *out)
{
    if (!resp3) return info_merge(local, local_len, parts, nparts, out); /* (out unchanged on -1) */
    /* RESP3: a verbatim string, as Redis's INFO */
    struct bytebuf merged = {0};
    int rc = info_merge(local, local_len, parts, nparts, &merged);
    if (rc == 0) replies_verbatim(merged.p, merged.len, out);
    bytebuf_free(&merged);
    return rc;
}

enum fanmerge_scan fanmerge_scan(const char *reply, size_t len, unsigned rank, unsigned nnodes, struct bytebuf *out)
{
    uint64_t node_cursor, next;
    if (replies_scan_cursor(reply, len, &node_cursor) != 0) return FANMERGE_SCAN_AS_IS; /* an error: as it came */
    if (slotmap_scan_cursor_next(node_cursor, rank, nnodes, &next) != 0 ||
        replies_scan_with_cursor(reply, len, next, out) != 0)
        return FANMERGE_SCAN_UNCARRIED;
    return FANMERGE_SCAN_DONE;
}

int fanmerge_parse_cursor(const char *s, size_t len, uint64_t *out)
{
    size_t i = 0;
    int negative = 0;
    if (len > 0 && (s[0] == '+' || s[0] == '-')) negative = s[i++] == '-';
    if (i == len) { /* no digits: strtoull consumed nothing, which is all of "" only */
        *out = 0;
        return len == 0 ? 0 : -1;
    }
    uint64_t v = 0;
    for (; i < len; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (d > 9 || v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = negative ? (uint64_t)0 - v : v;
    return 0;
}
