/* session.h: the lowest layer of the pure decision: what it knows about a client (session) and one request. */
#ifndef KEYGATE_SESSION_H
#define KEYGATE_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "commands.h"
#include "config.h"

/*
 * The pure decision is a one-way hierarchy; each layer includes only those below it:
 *
 *   session.h   struct session, struct policy_request, argument helpers, ERROR_TEXT_MAX
 *      ^
 *   ttl         the TTL rewrite of one command            (ttl_decide -> struct ttl_decision)
 *      ^
 *   access      who may run what                         (access_check_command -> struct access_result)
 *      ^
 *   policy      request + session + registry -> plan      (policy_decide -> struct plan)
 */

/* Size of every error text the pure layer produces ("CODE message", NUL included). */
#define ERROR_TEXT_MAX 512

/* What policy knows about the client. */
struct session {
    int authenticated;              /* 1 when no auth is required or AUTH succeeded */
    const struct user_conf *user;   /* NULL when no users are configured */
    int in_multi;                   /* between MULTI and EXEC/DISCARD */
    int multi_instance;             /* instance of the transaction's keys so far, -1 none */
    int watch_instance;             /* instance of the WATCH pin, -1 none */
    int subscribed;                 /* has a subscriber connection */
};

/* One parsed request, as policy sees it. */
struct policy_request {
    const struct command_def *cmd; /* NULL: unknown command */
    int unknown_subcommand;        /* from command_lookup */
    size_t argc;
    const char *const *argv;
    const size_t *argvlen;
    int64_t now_ms;                /* wall clock (ms since epoch), for EXPIREAT-style checks */
};

/* 1 when argv[i] exists and equals `word` as Redis compares option words (args_word_is). */
int session_arg_is(const struct policy_request *r, size_t i, const char *word);

/* argv[i] as a strict decimal integer (Redis's string2ll, args_ll): 0, or -1 (also when argv[i]
 * does not exist). */
int session_arg_ll(const struct policy_request *r, size_t i, long long *out);

/* A copy of at most 128 bytes of s for an error message (CR, LF, NUL become spaces), cut to
 * outlen - 1 bytes and NUL-terminated (outlen >= 1); returns out. */
const char *session_printable(const char *s, size_t len, char *out, size_t outlen);

#endif
