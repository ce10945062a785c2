/* access.h: who may run what: the never-forwarded list, pattern commands, scripts, users' owners and read-only rights. */
#ifndef KEYGATE_ACCESS_H
#define KEYGATE_ACCESS_H

#include <stddef.h>

#include "commands.h"
#include "config.h"
#include "registry.h"
#include "session.h"

enum access_verdict {
    ACCESS_ALLOW = 0, /* go on: policy checks every key's namespace next */
    ACCESS_DENY,      /* refuse with `error` */
    ACCESS_PATTERN,   /* a keyless command keygate routes itself (KEYS/SCAN MATCH inside one
                         namespace, SCRIPT LOAD/EXISTS): forward to ns's instance, no key loop */
};

struct access_result {
    enum access_verdict verdict;
    char error[ERROR_TEXT_MAX];       /* ACCESS_DENY: "CODE message" */
    const struct namespace_entry *ns; /* ACCESS_PATTERN */
};

/* 1 when cmd may run before AUTH: the commands Redis 7.0 flags no_auth (AUTH, HELLO, QUIT, RESET), as
 * Redis's processCommand; PING is not one of them (it answers -NOAUTH). Pure. */
int access_allowed_before_auth(const struct command_def *cmd);

/*
 * Why keygate never forwards cmd (a short reason for the -DENIED text), or NULL when it
 * may be forwarded. Never forwarded: the explicit list in access.c (DESIGN.md §3, issue
 * #5; a parent name such as "config" covers every subcommand), and every command flagged
 * `admin` or in `@dangerous`, except KEYS, SORT, SORT_RO (made safe by pattern checks)
 * and INFO, CLIENT LIST (answered by keygate). Pure.
 */
const char *access_never_forwarded(const struct command_def *cmd);

/*
 * access_never_forwarded(cmd), read from access's own table: built once (pthread_once, by
 * whichever thread asks first) over every command of the command table, indexed by
 * cmdclass_index; a command outside the table is computed directly. O(1), thread-safe.
 */
const char *access_never_forwarded_lookup(const struct command_def *cmd);

/*
 * Command-level rights, before any key is looked up. Pure. In order:
 *   - never forwarded (access_never_forwarded_lookup)       -> DENY "DENIED ..."
 *   - @scripting without a user with scripts=yes            -> DENY "DENIED ..."
 *   - an access=ro user and a command that writes (SORT only with STORE; EVAL, EVALSHA,
 *     FCALL, PUBLISH, SPUBLISH count as writes)             -> DENY "NOPERM ..."
 *   - COPY ... DB n with n != 0                              -> DENY "DENIED ..."
 *   - KEYS p / SCAN c MATCH p: p's literal prefix (before the first of * ? [ \) must lie
 *     in a namespace the user may use, and no nested namespace the pattern can reach may
 *     belong to an owner the user lacks                      -> PATTERN(ns) or DENY "DENIED ..."
 *     (SCAN without MATCH is DENIED; a malformed SCAN gets Redis's "ERR syntax error")
 *   - SORT/SORT_RO BY/GET patterns containing '*': the literal before the '*' must lie in
 *     the sorted key's namespace (same nested rule)         -> ALLOW or DENY "DENIED ..."
 *   - SCRIPT LOAD / SCRIPT EXISTS: to the one instance holding every namespace the user
 *     may use                                               -> PATTERN(ns) or DENY "DENIED ..."
 *   - anything else                                         -> ALLOW
 */
void access_check_command(const struct config *cfg, const struct registry *reg, const struct session *s,
                          const struct policy_request *r, struct access_result *out);

/*
 * After a reload, before the old config is released: point s->user at the user of the
 * same name in `next`, whose owners and rights then apply. A session whose user is gone
 * is logged out (-NOAUTH until it AUTHs again); with no user lines in next every
 * session is open; an open session of a config without users must AUTH once next has
 * users. Never keeps a pointer into the old config.
 */
void access_session_rebind(struct session *s, const struct config *next);

/*
 * May session s touch namespace ns with command cmd? 0 when yes (no users configured,
 * owners=*, or ns's owner among the user's owners); otherwise -1 with
 * "NOPERM user 'U' may not use namespace 'P' (owner O) with 'cmd'" in error. Pure.
 */
int access_check_namespace(const struct session *s, const struct namespace_entry *ns, const struct command_def *cmd,
                           char *error, size_t len);

/*
 * May a client logged in as `viewer` see, in CLIENT LIST, a connection of user `other`?
 * Yes without users configured (viewer NULL), for the same user (by name: a reload
 * keeps names), and for an administrator (owners=* with access=rw); else no. Pure.
 */
int access_may_see_client(const struct user_conf *viewer, const struct user_conf *other);

/*
 * The namespace (of `kind`) that every name matching a glob lies in: the namespace of
 * its literal prefix (the bytes before the first of `stops`). Every match starts with
 * that literal, so it lies in that namespace or in a longer one nested inside it whose
 * prefix starts with the literal; session s must be allowed to use all of those.
 * Returns the namespace, or NULL with the reason in why. Pure.
 */
const struct namespace_entry *access_glob_namespace(const struct registry *reg, const struct session *s,
                                                    const struct command_def *cmd, enum ns_kind kind, const char *pat,
                                                    size_t len, const char *stops, char *why, size_t whylen);

/*
 * CLIENT TRACKING BCAST's PREFIX p (len bytes; "" without a prefix) for session s, as a SCAN
 * pattern is ruled: every key it covers must lie in namespaces s may read (as GET): the
 * namespace or default line holding p itself, and every key namespace nested under p. 0, or -1
 * with "NOPERM keygate: BCAST prefix ..." in err. Pure.
 */
int access_tracking_prefix(const struct registry *reg, const struct session *s, const char *p, size_t len, char *err,
                           size_t errlen);

#endif
