/* report.h: counting and rate-limited logging of what report mode let through and the default line took. */
#ifndef KEYGATE_REPORT_H
#define KEYGATE_REPORT_H

#include <event2/buffer.h>

#include "loop.h"
#include "policy.h"

/* Bytes of an unregistered key (or channel) a log line shows, before "...". */
#define REPORT_KEY_SHOWN 64

/*
 * A FORWARD plan was accepted for a client of worker w: count its report events and the names
 * the default line took (struct stats' report block), and log each (namespace, reason) pair and
 * each kind of unregistered name at most once per STATS_REPORT_LOG_INTERVAL_MS, with the count
 * since the last line (for unregistered names, the key's first REPORT_KEY_SHOWN bytes, escaped).
 * Other plans are ignored. Worker thread only; no lock.
 */
void report_note(struct worker *w, const struct plan *plan, const struct policy_request *r);

/*
 * A reload swaps registry `old` for `next` in worker w: its report counters (and log state)
 * follow their entries to their new positions (same kind and prefix; the default line to the
 * default line); counters of entries `next` no longer has are dropped. Worker thread only.
 */
void report_reindex(struct worker *w, const struct registry *old, const struct registry *next);

/*
 * INFO's namespaces section, issue 13's part: the default line (ns_default:...), the unregistered
 * counts, and per report-mode line its counters (report<INDEX>:namespace=P,would_inject_ttl=N,
 * would_refuse_<code>=N...), summed over the workers of `p`. Appends "\r\n"-ended lines to out.
 */
void report_info(const struct proxy *p, const struct config *cfg, struct evbuffer *out);

/* Escape s[0..len) for a log line: printable ASCII as is (but \ and '), others \xHH, at most
 * `shown` bytes of s then "..."; always NUL-terminated within outlen. Returns out. */
const char *report_escape(const char *s, size_t len, size_t shown, char *out, size_t outlen);

#endif
