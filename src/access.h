/* access.h: who may run what: the never-forwarded list, scripts, users' owners and read-only rights. */
#ifndef KEYGATE_ACCESS_H
#define KEYGATE_ACCESS_H

#include <stddef.h>

#include "policy.h"

enum access_verdict {
    ACCESS_ALLOW = 0, /* go on: policy checks every key's namespace next */
    ACCESS_DENY,      /* refuse with `error` */
    ACCESS_PATTERN,   /* KEYS/SCAN with a MATCH inside one namespace: forward to ns's instance */
};

struct access_result {
    enum access_verdict verdict;
    char error[PLAN_ERROR_MAX];       /* ACCESS_DENY: "CODE message" */
    const struct namespace_entry *ns; /* ACCESS_PATTERN */
};

/* 1 when `name` (lower-case command name) may run before AUTH. */
int access_allowed_before_auth(const char *name);

/*
 * Command-level rights, before any key is looked up: the never-forwarded list
 * (DESIGN.md §3), scripts without scripts=yes, a read-only user's writes, and the
 * pattern commands (KEYS/SCAN). Pure.
 */
void access_check_command(const struct config *cfg, const struct registry *reg, const struct session *s,
                          const struct policy_request *r, struct access_result *out);

/*
 * May session s touch namespace ns with command cmd? 0 when yes; otherwise -1 with
 * a "NOPERM ..." message in error. Pure.
 */
int access_check_namespace(const struct session *s, const struct namespace_entry *ns,
                           const struct command_def *cmd, char *error, size_t len);

#endif
