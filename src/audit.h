/* audit.h: `keygate audit -c FILE`: SCAN every instance and report the keys that break the registry. */
#ifndef KEYGATE_AUDIT_H
#define KEYGATE_AUDIT_H

#include <stddef.h>
#include <stdio.h>

#include "registry.h"

/* What is wrong with a key. */
enum audit_kind {
    AUDIT_NO_NAMESPACE = 0, /* the key matches no namespace */
    AUDIT_WRONG_INSTANCE,   /* its namespace lives on another instance */
    AUDIT_NO_TTL,           /* namespace with ttl=D, key without a TTL */
    AUDIT_TTL_ABOVE_MAX,    /* TTL left is above the namespace's max-ttl */
    AUDIT_OUTSIDE_DB0,      /* the key sits in a database other than 0 (keygate serves db 0 only) */
    AUDIT_KINDS
};

/*
 * `keygate audit -c FILE [--limit N]` (argv[0] is "audit"). For every instance of
 * the config: connect as the daemon does (TLS, AUTH), read `INFO keyspace`, and for
 * db 0 and every other non-empty database it lists: SELECT it, walk it with SCAN
 * cursor COUNT 1000, and PTTL (pipelined per batch) the keys whose namespace has
 * ttl= or max-ttl=. Every key outside db 0 is a violation (AUDIT_OUTSIDE_DB0), and
 * the other rules are checked in every database too. Prints one line per violation
 * on stdout, "INSTANCE KEY PROBLEM", the key escaped (audit_key_escape), the
 * problem ending in " (db N)" for a key of db N > 0, at most N lines (default 1000;
 * counting goes on), then a summary line. Returns the exit code: 0 clean, 1
 * violations found, 2 when the config is invalid, an instance cannot be reached, its
 * databases cannot be listed or a scan fails (the other instances, and db 0 when
 * only the listing failed, are still audited).
 */
int audit_main(int argc, char **argv);

/*
 * Write key[0..len) so one output line stays parseable: bytes 0x21..0x7e as they
 * are, but backslash as "\\"; every other byte (space, control, non-ASCII,
 * '"') as "\xHH".
 */
void audit_key_escape(FILE *out, const char *key, size_t len);

/* The TTL rule a key of namespace e breaks given its PTTL (ms; -1 none, -2 gone):
 * AUDIT_NO_TTL, AUDIT_TTL_ABOVE_MAX, or -1 when it breaks none. */
int audit_ttl_check(const struct namespace_entry *e, long long pttl_ms);

/*
 * The databases of an `INFO keyspace` reply text ("db5:keys=3,expires=0,..." lines,
 * CRLF or LF) that hold keys: the smallest db number above `after` whose line says
 * keys= above 0, or -1 when there is none. Lines that are not such a line (the
 * "# Keyspace" header, other sections, malformed ones) are skipped. Pure. Walk them
 * with `for (db = audit_keyspace_next(t, -1); db >= 0; db = audit_keyspace_next(t, db))`.
 */
int audit_keyspace_next(const char *info_text, int after);

#endif
