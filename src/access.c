/* access.c: the never-forwarded list, script gate, and per-user namespace rights (all pure). */
#include "access.h"

#include <stdio.h>
#include <string.h>

/* Commands keygate never forwards (DESIGN.md §3), beyond those flagged admin. */
static const char *const denied_names[] = {
    "config",   "debug",       "shutdown", "replicaof",    "slaveof",  "sync",
    "psync",    "replconf",    "module",   "acl",          "monitor",  "migrate",
    "flushall", "flushdb",     "save",     "bgsave",       "bgrewriteaof", "swapdb",
    "failover", "cluster",     "restore",  "restore-asking", "dump",   "randomkey",
    "latency",  "slowlog",     "lastsave", "script|flush", "script|kill", "function|delete",
    "function|flush", "function|load", "function|restore", "function|kill", "function|dump",
    "client|kill", "client|pause", "client|unpause", "client|no-evict", "client|no-touch",
    "client|reply", "client|unblock", "client|tracking", "client|caching", "client|trackinginfo",
    "client|getredir", "object|freq", "memory|purge", "memory|malloc-stats", "memory|doctor",
    "memory|stats", "pfdebug", "pfselftest", NULL,
};

static int name_in(const char *name, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(name, list[i]) == 0) return 1;
    return 0;
}

int access_allowed_before_auth(const char *name)
{
    return strcmp(name, "auth") == 0 || strcmp(name, "hello") == 0 || strcmp(name, "ping") == 0 ||
           strcmp(name, "quit") == 0;
}

static void deny(struct access_result *out, const char *fmt, const char *a, const char *b)
{
    out->verdict = ACCESS_DENY;
    snprintf(out->error, sizeof(out->error), fmt, a, b);
}

void access_check_command(const struct config *cfg, const struct registry *reg, const struct session *s,
                          const struct policy_request *r, struct access_result *out)
{
    (void)cfg;
    (void)reg;
    const struct command_def *cmd = r->cmd;
    memset(out, 0, sizeof(*out));
    if (name_in(cmd->name, denied_names) || (cmd->flags & CMD_ADMIN)) {
        deny(out, "DENIED command '%s' is never forwarded by keygate%s", cmd->name, "");
        return;
    }
    if ((cmd->acl & ACL_SCRIPTING) && (!s->user || !s->user->scripts)) {
        deny(out, "DENIED scripts are refused: '%s' needs a user with scripts=yes%s", cmd->name, "");
        return;
    }
    if (s->user && s->user->read_only && (cmd->flags & CMD_WRITE)) {
        deny(out, "NOPERM user '%s' is read-only and '%s' writes", s->user->name, cmd->name);
        return;
    }
    out->verdict = ACCESS_ALLOW;
}

int access_check_namespace(const struct session *s, const struct namespace_entry *ns,
                           const struct command_def *cmd, char *error, size_t len)
{
    const struct user_conf *u = s->user;
    if (!u || u->all_owners) return 0;
    for (size_t i = 0; i < u->nowners; i++)
        if (strcmp(u->owners[i], ns->owner) == 0) return 0;
    snprintf(error, len, "NOPERM user '%s' may not use namespace '%s' (owner %s) with '%s'", u->name, ns->prefix,
             ns->owner, cmd->name);
    return -1;
}
