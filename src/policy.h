/* policy.h: the pure decision: (command, argv, session, registry) -> a plan. No I/O. */
#ifndef KEYGATE_POLICY_H
#define KEYGATE_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "commands.h"
#include "config.h"
#include "registry.h"
#include "ttl.h"

/*
 * request bytes -> parser -> command_lookup -> policy_decide -> plan
 *
 *   PLAN_ERROR    reply `-<error>` and forward nothing
 *   PLAN_LOCAL    keygate answers itself (PING, ECHO, HELLO, CLIENT SETNAME, COMMAND ...)
 *   PLAN_FORWARD  send to instance `instance`: the original frame, with `append`
 *                 arguments spliced on the end (SET k v -> SET k v EX 3600), and the
 *                 TTL commands of `ttl` around it (MULTI ... PEXPIRE k D NX ... EXEC)
 */
enum plan_kind { PLAN_ERROR = 0, PLAN_LOCAL, PLAN_FORWARD };

enum local_cmd {
    LOCAL_NONE = 0,
    LOCAL_PING,
    LOCAL_ECHO,
    LOCAL_QUIT,
    LOCAL_SELECT,          /* SELECT 0 (other dbs are PLAN_ERROR) */
    LOCAL_HELLO,           /* HELLO [2] (3 is PLAN_ERROR -NOPROTO) */
    LOCAL_AUTH,            /* AUTH [user] pass: checked by the client against config users */
    LOCAL_CLIENT_SETNAME,
    LOCAL_CLIENT_GETNAME,
    LOCAL_CLIENT_ID,
    LOCAL_CLIENT_SETINFO,
    LOCAL_CLIENT_INFO,
    LOCAL_CLIENT_LIST,
    LOCAL_COMMAND,         /* COMMAND (whole table) */
    LOCAL_COMMAND_COUNT,
    LOCAL_COMMAND_INFO,
    LOCAL_COMMAND_DOCS,
    LOCAL_COMMAND_LIST,
    LOCAL_INFO,
};

#define PLAN_MAX_APPEND 4
#define PLAN_ERROR_MAX 512

struct plan {
    enum plan_kind kind;
    char error[PLAN_ERROR_MAX]; /* PLAN_ERROR: "CODE message" (no '-', no CRLF) */
    enum local_cmd local;       /* PLAN_LOCAL */
    int instance;               /* PLAN_FORWARD: config instance index */
    int writes;                 /* the command writes (for stats/ro users) */
    size_t nappend;             /* PLAN_FORWARD: arguments to add at the end */
    const char *append[PLAN_MAX_APPEND];
    size_t append_len[PLAN_MAX_APPEND];
    char append_store[64];      /* storage the append pointers may point into */
    const struct namespace_entry *ns; /* namespace of the first key (NULL if none) */
    struct ttl_rewrite ttl;     /* PLAN_FORWARD: injected TTL commands (see ttl.h) */
};

/* Free what policy_decide allocated in plan (call once the plan was carried out). */
void plan_release(struct plan *plan);

/* What policy knows about the client. */
struct session {
    int authenticated;              /* 1 when no auth is required or AUTH succeeded */
    const struct user_conf *user;   /* NULL when no users are configured */
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

/*
 * Decide what to do with one request. Pure: reads only its arguments (the config
 * snapshot and registry included), performs no I/O, keeps no state.
 * `plan` is fully overwritten. Errors use Redis's texts where Redis has one and
 * keygate's codes (DESIGN.md §3) otherwise.
 */
void policy_decide(const struct config *cfg, const struct registry *reg, const struct session *s,
                   const struct policy_request *req, struct plan *plan);

/* Format Redis's "unknown command" error for argv into buf (no '-', no CRLF). */
void policy_unknown_command_error(const struct policy_request *req, char *buf, size_t len);

#endif
