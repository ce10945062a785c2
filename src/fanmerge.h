/* fanmerge.h: the replies of a command fanned out to several instances or nodes, made into the client's one reply (pure). */
#ifndef KEYGATE_FANMERGE_H
#define KEYGATE_FANMERGE_H

#include <stddef.h>
#include <stdint.h>

#include "info.h"
#include "util.h"

/*
 * INFO naming instance sections went to every instance (every primary of a cluster): append to
 * out the client's reply made of `local` (keygate's own sections) and each part's instance
 * sections, labelled by part->name (info_merge); for a RESP3 client (resp3) as a verbatim
 * string, as Redis answers INFO. An instance's error reply is the reply. Returns 0, or -1 (out
 * unchanged) when a part is not an INFO reply or an error: the caller answers an error.
 */
int fanmerge_info(const char *local, size_t local_len, const struct info_part *parts, int nparts, int resp3,
                  struct bytebuf *out) KG_MUST_CHECK;

/* What fanmerge_scan made of a cluster node's SCAN reply. */
enum fanmerge_scan {
    FANMERGE_SCAN_DONE = 0,  /* out holds the reply with the client's next cursor */
    FANMERGE_SCAN_AS_IS,     /* not a SCAN reply (an error): the client gets it as it came; out unchanged */
    FANMERGE_SCAN_UNCARRIED, /* the node's cursor does not fit beside the rank: out unchanged */
};

/*
 * The node of rank `rank` among the `nnodes` primaries of a cluster (slotmap.h's cursor layout)
 * answered SCAN with `reply`: append to out that reply with the cursor the client sends next, which
 * continues on that node, or (the node's cursor 0) starts on the next primary, or is 0 after the last.
 */
enum fanmerge_scan fanmerge_scan(const char *reply, size_t len, unsigned rank, unsigned nnodes, struct bytebuf *out);

/*
 * A SCAN cursor as Redis reads it (strtoull, all of it: an optional sign, a negative one wrapping,
 * "" is 0; no leading space, no overflow). 0 with *out set, or -1 when Redis would answer
 * "invalid cursor".
 */
int fanmerge_parse_cursor(const char *s, size_t len, uint64_t *out) KG_MUST_CHECK;

#endif
