/* access.c: who may run what: the never-forwarded list, pattern commands, scripts, users' rights (all pure). */
#include "access.h"

#include "cmdclass.h"
#include "util.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/*
 * access_check_command, in this order:
 *
 *   never forwarded   in denied[] (a parent name covers all its subcommands), or
 *                     flagged admin / @dangerous and not one of safe_exceptions[]
 *   scripts           @scripting needs a user with scripts=yes
 *   read-only users   a write (SORT only with STORE), EVAL/EVALSHA/FCALL, PUBLISH/SPUBLISH -> NOPERM
 *   database 0        COPY ... DB n (n != 0) -> DENIED
 *   patterns          KEYS p / SCAN c MATCH p -> ACCESS_PATTERN(namespace of p) or DENIED
 *                     SORT BY/GET p: p's literal prefix must stay in the sorted key's namespace
 *                     SCRIPT LOAD/EXISTS -> ACCESS_PATTERN(the user's one instance) or DENIED
 *   otherwise         ACCESS_ALLOW: policy looks every key up and calls access_check_namespace
 */

struct denied_entry {
    const char *name; /* lower case; "parent" covers "parent|*" */
    const char *why;
};

/* Never forwarded (DESIGN.md §3 and issue #5), whatever their flags say. */
static const struct denied_entry denied[] = {
    {"acl", "server administration"},
    {"bgrewriteaof", "persistence is the operator's"},
    {"bgsave", "persistence is the operator's"},
    {"client|kill", "it acts on the backend's connections"},
    {"client|no-evict", "it acts on the backend's connections"},
    {"client|no-touch", "it acts on the backend's connections"},
    {"client|pause", "it acts on the backend's connections"},
    {"client|unpause", "it acts on the backend's connections"},
    {"cluster", "server administration"},
    {"config", "server administration"},
    {"debug", "server administration"},
    {"dump", "raw serialized values bypass the registry"},
    {"failover", "replication is the operator's"},
    {"flushall", "it deletes every namespace"},
    {"flushdb", "it deletes every namespace"},
    {"function|delete", "functions are loaded by the operator"},
    {"function|dump", "functions are loaded by the operator"},
    {"function|flush", "functions are loaded by the operator"},
    {"function|kill", "functions are loaded by the operator"},
    {"function|load", "functions are loaded by the operator"},
    {"function|restore", "functions are loaded by the operator"},
    {"latency", "server administration"},
    {"memory|doctor", "server administration"},
    {"memory|malloc-stats", "server administration"},
    {"memory|purge", "server administration"},
    {"memory|stats", "server administration"},
    {"migrate", "it moves keys out of the registry's instances"},
    {"module", "server administration"},
    {"monitor", "it would show every client's commands"},
    {"move", "keygate serves database 0 only"},
    {"pfdebug", "server administration"},
    {"pfselftest", "server administration"},
    {"psync", "replication is the operator's"},
    {"randomkey", "it names a key of any namespace"},
    {"replconf", "replication is the operator's"},
    {"replicaof", "replication is the operator's"},
    {"restore", "raw serialized values bypass the registry"},
    {"restore-asking", "raw serialized values bypass the registry"},
    {"role", "server administration"},
    {"save", "persistence is the operator's"},
    {"script|debug", "script debugging blocks or forks the backend"},
    {"script|flush", "it drops every user's scripts"},
    {"script|kill", "it stops another client's script"},
    {"shutdown", "server administration"},
    {"slaveof", "replication is the operator's"},
    {"slowlog", "server administration"},
    {"swapdb", "keygate serves database 0 only"},
    {"sync", "replication is the operator's"},
    {NULL, NULL},
};

/*
 * Flagged admin or @dangerous in Redis's table, yet safe through keygate:
 *   keys, sort, sort_ro  patterns checked here, keys through the registry
 *   info, client|list    answered by keygate itself (keygate's own sections / clients)
 *   client|unblock       answered by keygate itself (its own clients, on their dedicated connections)
 *   lastsave             a keyless read policy sends to the first instance
 */
static const char *const safe_exceptions[] = {"keys",        "sort",     "sort_ro",        "info",
                                              "client|list", "lastsave", "client|unblock", NULL};

static int name_in(const char *name, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(name, list[i]) == 0) return 1;
    return 0;
}

/* The denied[] entry for name: exact, or its parent ("config" for "config|set"). */
static const struct denied_entry *denied_find(const char *name)
{
    const char *bar = strchr(name, '|');
    size_t plen = bar ? (size_t)(bar - name) : strlen(name);
    for (size_t i = 0; denied[i].name; i++) {
        if (strcmp(name, denied[i].name) == 0) return &denied[i];
        if (bar && strlen(denied[i].name) == plen && strncmp(name, denied[i].name, plen) == 0) return &denied[i];
    }
    return NULL;
}

const char *access_never_forwarded(const struct command_def *cmd)
{
    const struct denied_entry *d = denied_find(cmd->name);
    if (d) return d->why;
    if ((cmd->flags & CMD_ADMIN) && !name_in(cmd->name, safe_exceptions)) return "flagged admin";
    if ((cmd->acl & ACL_DANGEROUS) && !name_in(cmd->name, safe_exceptions)) return "in the @dangerous category";
    return NULL;
}

/* access_never_forwarded of every command of the table, by cmdclass_index: built once by
 * the first thread that asks, published with release/acquire so that readers after the
 * first need no pthread_once call. */
static const char **never_forwarded_by_index;
static pthread_once_t never_forwarded_once = PTHREAD_ONCE_INIT;

static void never_forwarded_build(void)
{
    const char **table = xcalloc(cmdclass_count(), sizeof(*table));
    for (size_t i = 0; i < command_table_len; i++) {
        const struct command_def *cmd = &command_table[i];
        table[cmdclass_index(cmd)] = access_never_forwarded(cmd);
        for (int j = 0; j < cmd->nsubcommands; j++)
            table[cmdclass_index(&cmd->subcommands[j])] = access_never_forwarded(&cmd->subcommands[j]);
    }
    __atomic_store_n(&never_forwarded_by_index, table, __ATOMIC_RELEASE);
}

const char *access_never_forwarded_lookup(const struct command_def *cmd)
{
    size_t i = cmdclass_index(cmd);
    if (i == CMDCLASS_NO_INDEX) return access_never_forwarded(cmd);
    const char **table = __atomic_load_n(&never_forwarded_by_index, __ATOMIC_ACQUIRE);
    if (!table) {
        pthread_once(&never_forwarded_once, never_forwarded_build);
        table = __atomic_load_n(&never_forwarded_by_index, __ATOMIC_ACQUIRE);
    }
    return table[i];
}

int access_allowed_before_auth(const struct command_def *cmd)
{
    return (cmd->flags & CMD_NO_AUTH) != 0; /* Redis's table: AUTH, HELLO, QUIT, RESET */
}

static void deny(struct access_result *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void deny(struct access_result *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    out->verdict = ACCESS_DENY;
    vsnprintf(out->error, sizeof(out->error), fmt, ap);
    va_end(ap);
}

/* 1 when SORT's options carry STORE: the key finder (which walks them as Redis does) found
 * a key besides the sorted one. */
static int sort_stores(const struct policy_request *r)
{
    struct key_ref keys[2];
    int incomplete = 0;
    int n = command_find_keys(r->cmd, r->argc, r->argv, r->argvlen, keys, 2, &incomplete);
    return n != 1; /* a STORE key, or arguments Redis refuses (nothing runs): treat as a write */
}

/* Does the command change data, for an access=ro user? */
static int command_writes(const struct policy_request *r)
{
    enum cmd_id cid = cmdclass_id(r->cmd);
    if (cid == CID_SORT) return sort_stores(r);
    return (r->cmd->flags & CMD_WRITE) || cid == CID_EVAL || cid == CID_EVALSHA || cid == CID_FCALL ||
           cid == CID_PUBLISH || cid == CID_SPUBLISH;
}

/* The namespace of the command's first key that has one (for messages), or NULL. */
static const struct namespace_entry *first_key_namespace(const struct registry *reg, const struct policy_request *r)
{
    struct key_ref keys[16];
    int incomplete = 0;
    int n = command_find_keys(r->cmd, r->argc, r->argv, r->argvlen, keys, 16, &incomplete);
    for (int i = 0; i < n && i < 16; i++) {
        size_t ai = (size_t)keys[i].index;
        const struct namespace_entry *ns = registry_lookup(reg, NS_KEY, r->argv[ai], r->argvlen[ai]);
        if (ns) return ns;
    }
    return NULL;
}

const struct namespace_entry *access_glob_namespace(const struct registry *reg, const struct session *s,
                                                    const struct command_def *cmd, enum ns_kind kind, const char *pat,
                                                    size_t len, const char *stops, char *why, size_t whylen)
{
    size_t lit = 0;
    while (lit < len && !strchr(stops, pat[lit])) lit++;
    const struct namespace_entry *ns = registry_lookup(reg, kind, pat, lit);
    if (!ns) {
        char shown[104];
        snprintf(why, whylen, "its literal prefix '%s' lies in no namespace",
                 session_printable(pat, lit, shown, sizeof(shown)));
        return NULL;
    }
    char err[ERROR_TEXT_MAX];
    if (access_check_namespace(s, ns, cmd, err, sizeof(err)) != 0) {
        snprintf(why, whylen, "user '%s' may not use namespace '%s' (owner %s)", s->user->name, ns->prefix, ns->owner);
        return NULL;
    }
    size_t from = reg->first[kind], to = from + reg->n[kind];
    for (size_t i = from; i < to; i++) {
        const struct namespace_entry *e = &reg->entries[i];
        if (e == ns || e->prefix_len <= lit || memcmp(e->prefix, pat, lit) != 0) continue;
        if (access_check_namespace(s, e, cmd, err, sizeof(err)) != 0) {
            snprintf(why, whylen, "it also matches nested namespace '%s' (owner %s) that user '%s' may not use",
                     e->prefix, e->owner, s->user->name);
            return NULL;
        }
    }
    return ns;
}

int access_tracking_prefix(const struct registry *reg, const struct session *s, const char *p, size_t len, char *err,
                           size_t errlen)
{
    const struct command_def *get = command_by_name("get");
    char shown[130], why[ERROR_TEXT_MAX];
    session_printable(p, len, shown, sizeof(shown));
    const struct namespace_entry *ns = registry_resolve(reg, NS_KEY, p, len);
    if (!ns) {
        snprintf(err, errlen,
                 "NOPERM keygate: BCAST prefix '%s' lies in no namespace and the registry has no default line", shown);
        return -1;
    }
    size_t i = reg->first[NS_KEY], end = i + reg->n[NS_KEY];
    while (ns) {
        if (access_check_namespace(s, ns, get, why, sizeof(why)) != 0) {
            snprintf(err, errlen,
                     "NOPERM keygate: BCAST prefix '%s' covers namespace '%s' (owner %s) that user '%s' may not read",
                     shown, ns->is_default ? "default" : ns->prefix, ns->owner, s->user ? s->user->name : "default");
            return -1;
        }
        ns = NULL; /* then each namespace nested under the prefix */
        for (; i < end && !ns; i++) {
            const struct namespace_entry *e = &reg->entries[i];
            if (e->prefix_len > len && memcmp(e->prefix, p, len) == 0) ns = e;
        }
    }
    return 0;
}

/* KEYS pattern / SCAN cursor [MATCH p] [COUNT n] [TYPE t]: forward only inside one namespace. */
static void check_keys_scan(const struct registry *reg, const struct session *s, const struct policy_request *r,
                            struct access_result *out)
{
    const char *name = r->cmd->name;
    size_t pat = 0; /* argv index of the pattern; 0 = none */
    if (cmdclass_id(r->cmd) == CID_KEYS) {
        pat = 1;
    } else {
        for (size_t i = 2; i < r->argc; i += 2) { /* as scanGenericCommand: the last MATCH wins */
            if (i + 1 >= r->argc ||
                !(session_arg_is(r, i, "MATCH") || session_arg_is(r, i, "COUNT") || session_arg_is(r, i, "TYPE"))) {
                deny(out, "ERR syntax error");
                return;
            }
            if (session_arg_is(r, i, "MATCH")) pat = i + 1;
        }
        if (!pat) {
            deny(out, "DENIED SCAN needs MATCH with a pattern inside one namespace (e.g. SCAN 0 MATCH cache:x:*)");
            return;
        }
    }
    char why[ERROR_TEXT_MAX - 128];
    const struct namespace_entry *ns =
        access_glob_namespace(reg, s, r->cmd, NS_KEY, r->argv[pat], r->argvlen[pat], "*?[\\", why, sizeof(why));
    if (!ns) {
        char shown[104];
        deny(out, "DENIED %s pattern '%s' must stay inside one namespace you may read: %s", name,
             session_printable(r->argv[pat], r->argvlen[pat], shown, sizeof(shown)), why);
        return;
    }
    out->verdict = ACCESS_PATTERN;
    out->ns = ns;
}

/* SORT/SORT_RO key ... BY p / GET p: each p with a '*' must stay in the sorted key's namespace. */
static void check_sort(const struct registry *reg, const struct session *s, const struct policy_request *r,
                       struct access_result *out)
{
    const struct namespace_entry *key_ns = registry_lookup(reg, NS_KEY, r->argv[1], r->argvlen[1]);
    out->verdict = ACCESS_ALLOW;
    if (!key_ns) return; /* policy answers NONAMESPACE for the key itself */
    for (size_t j = 2; j < r->argc; j++) {
        size_t left = r->argc - j - 1;
        if (session_arg_is(r, j, "LIMIT") && left >= 2) {
            j += 2;
            continue;
        }
        if (session_arg_is(r, j, "STORE") && left >= 1) {
            j++;
            continue;
        }
        if (!((session_arg_is(r, j, "BY") || session_arg_is(r, j, "GET")) && left >= 1))
            continue; /* ASC, ALPHA, or a syntax error */
        j++;
        const char *p = r->argv[j];
        size_t len = r->argvlen[j];
        /* No '*': BY sorts nothing, GET returns nil; "GET #" is the element itself. No key is read. */
        if (!memchr(p, '*', len)) continue;
        char why[ERROR_TEXT_MAX - 160];
        const struct namespace_entry *ns = access_glob_namespace(reg, s, r->cmd, NS_KEY, p, len, "*", why, sizeof(why));
        if (ns && ns != key_ns)
            snprintf(why, sizeof(why), "it reads namespace '%s', the sorted key is in '%s'", ns->prefix,
                     key_ns->prefix);
        if (!ns || ns != key_ns) {
            char shown[104];
            deny(out, "DENIED %s %s pattern '%s' must stay in the sorted key's namespace: %s", r->cmd->name,
                 session_arg_is(r, j - 1, "BY") ? "BY" : "GET", session_printable(p, len, shown, sizeof(shown)), why);
            return;
        }
    }
}

/*
 * SCRIPT LOAD / SCRIPT EXISTS name no key. They go to the one instance that holds
 * every namespace the user may use (that is where its EVALSHA can run); a user whose
 * namespaces span instances is refused and uses EVAL, which caches the script on the
 * instance that runs it.
 */
static void check_script_cache(const struct config *cfg, const struct registry *reg, const struct session *s,
                               const struct policy_request *r, struct access_result *out)
{
    const struct namespace_entry *pick = NULL;
    int spans = 0;
    char err[ERROR_TEXT_MAX];
    size_t from = reg->first[NS_KEY], to = from + reg->n[NS_KEY];
    for (size_t i = from; i < to; i++) {
        const struct namespace_entry *e = &reg->entries[i];
        if (access_check_namespace(s, e, r->cmd, err, sizeof(err)) != 0) continue;
        if (!pick)
            pick = e;
        else if (e->instance != pick->instance)
            spans = 1;
    }
    if (!pick || spans) {
        deny(out,
             "DENIED %s needs one instance, and user '%s' has namespaces on %s; use EVAL (it caches the script on "
             "the instance that runs it)",
             r->cmd->name, s->user ? s->user->name : "default", pick ? "several instances" : "none");
        return;
    }
    (void)cfg;
    out->verdict = ACCESS_PATTERN;
    out->ns = pick;
}

void access_check_command(const struct config *cfg, const struct registry *reg, const struct session *s,
                          const struct policy_request *r, struct access_result *out)
{
    const struct command_def *cmd = r->cmd;
    const char *name = cmd->name;
    out->ns = NULL; /* no memset of the error buffer on every request: deny() fills it */

    enum cmd_id cid = cmdclass_id(cmd);
    const char *why = access_never_forwarded_lookup(cmd);
    if (why) {
        deny(out, "DENIED command '%s' is never forwarded by keygate: %s", name, why);
        return;
    }
    if ((cmd->acl & ACL_SCRIPTING) && (!s->user || !s->user->scripts)) {
        deny(out, "DENIED scripts are refused: '%s' needs a user with scripts=yes", name);
        return;
    }
    if (s->user && s->user->read_only && command_writes(r)) {
        const struct namespace_entry *ns = first_key_namespace(reg, r);
        deny(out, "NOPERM user '%s' has access=ro and '%s' writes%s%s%s", s->user->name, name, ns ? " namespace '" : "",
             ns ? ns->prefix : "", ns ? "'" : "");
        return;
    }
    if (cid == CID_COPY) {
        for (size_t i = 3; i + 1 < r->argc; i++)
            if (session_arg_is(r, i, "DB") && !session_arg_is(r, i + 1, "0")) {
                deny(out, "DENIED keygate serves database 0 only: COPY ... DB is refused");
                return;
            }
    }
    if (cid == CID_KEYS || cid == CID_SCAN) {
        check_keys_scan(reg, s, r, out);
        return;
    }
    if (cid == CID_SORT || cid == CID_SORT_RO) {
        check_sort(reg, s, r, out);
        return;
    }
    if (cid == CID_SCRIPT_LOAD || cid == CID_SCRIPT_EXISTS) {
        check_script_cache(cfg, reg, s, r, out);
        return;
    }
    out->verdict = ACCESS_ALLOW;
}

void access_session_rebind(struct session *s, const struct config *next)
{
    const struct user_conf *old = s->user;
    s->user = NULL;
    if (next->nusers == 0) {
        s->authenticated = 1;
        return;
    }
    for (size_t i = 0; old && i < next->nusers; i++)
        if (strcmp(next->users[i].name, old->name) == 0) s->user = &next->users[i];
    s->authenticated = s->user != NULL;
}

int access_may_see_client(const struct user_conf *viewer, const struct user_conf *other)
{
    if (!viewer) return 1;
    if (viewer->all_owners && !viewer->read_only) return 1;
    return other && strcmp(viewer->name, other->name) == 0;
}

int access_check_namespace(const struct session *s, const struct namespace_entry *ns, const struct command_def *cmd,
                           char *error, size_t len)
{
    const struct user_conf *u = s->user;
    if (!u || u->all_owners) return 0;
    for (size_t i = 0; i < u->nowners; i++)
        if (strcmp(u->owners[i], ns->owner) == 0) return 0;
    snprintf(error, len, "NOPERM user '%s' may not use namespace '%s' (owner %s) with '%s'", u->name,
             ns->is_default ? REGISTRY_DEFAULT_NAME : ns->prefix, ns->owner, cmd->name);
    return -1;
}
