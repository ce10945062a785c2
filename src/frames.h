/* frames.h: the bytes a backend gets for a client's command: its frame, rewritten as the plan says (pure). */
#ifndef KEYGATE_FRAMES_H
#define KEYGATE_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "ncpolicy.h"
#include "policy.h"
#include "resp.h"
#include "ttl.h"
#include "util.h"

/*
 * Every function here appends RESP commands (multibulk) to `out` from the client's parsed frame:
 * `p` is the parser that read it (its arguments index `frame`, or p->inline_buf for an inline
 * command) and `frame` the frame's bytes. Nothing else is read or written: the router decides
 * where the bytes go and how each reply is used.
 */

/* frames_command's rewriting case (not the unchanged multibulk): see there. */
void frames_rewrite(struct bytebuf *out, const struct resp_parser *p, int resp3, const struct plan *plan,
                    const char *frame);

/*
 * The client's command as the plan sends it, with plan->append spliced on the end:
 *   unchanged multibulk   -> the frame's bytes as they came (one copy; inline here: the hot path)
 *   multibulk + appended  -> new "*N" header + the frame's arguments + the new ones
 *   inline, or GET->GETEX -> re-encoded as multibulk
 *   over budget           -> EVAL <check script> ncheck key... <-OOM text> <the command, as above>
 *                            (the RESP3 script when resp3)
 */
static inline void frames_command(struct bytebuf *out, const struct resp_parser *p, int resp3, const struct plan *plan,
                                  const char *frame)
{
    if (!p->is_inline && plan->nappend == 0 && !plan->ttl.getex && !plan->budget_ncheck) {
        bytebuf_add(out, frame, p->frame_len);
        return;
    }
    frames_rewrite(out, p, resp3, plan, frame);
}

/* PEXPIRE key ms [NX | XX LT] for one TTL fix (its key is the frame's argument f->argi). */
void frames_fix(struct bytebuf *out, const struct resp_parser *p, const char *frame, const struct ttl_fix *f);

/* XADD <stream> * k <key>: the near-cache invalidation of one written key (ncpolicy.h). */
void frames_inval(struct bytebuf *out, const struct resp_parser *p, const char *frame, const struct nc_inval_key *k);

/* The command and its TTL fixes and near-cache XADDs, in that order, for the client's own transaction
 * (no MULTI wrap: the client's MULTI is around it): 1 + plan->ttl.nfix + plan->inval.n commands. */
void frames_queued(struct bytebuf *out, const struct resp_parser *p, int resp3, const struct plan *plan,
                   const char *frame);

/* A near-cache fill: EVAL <NCPOLICY_FILL_SCRIPT> 1 key <limit> <mode> [the frame's arguments first..argc-1]
 * (none when first >= argc; p and frame are not read then). */
void frames_fill(struct bytebuf *out, size_t limit, char mode, const struct resp_parser *p, const char *frame,
                 const char *key, size_t key_len, size_t first, size_t argc);

/* One part of a split command (MGET, DEL, ...): the command's name, then the arguments i (from 1) with
 * key_part[i] == part, in the client's order; `count` of them. */
void frames_part(struct bytebuf *out, const struct resp_parser *p, const char *frame, const int16_t *key_part, int part,
                 int count);

/* SCAN <cursor> ...: the client's SCAN with its cursor argument (argument 1) replaced by `cursor`. */
void frames_scan(struct bytebuf *out, const struct resp_parser *p, const char *frame, uint64_t cursor);

#endif
