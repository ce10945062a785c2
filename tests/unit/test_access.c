/* test_access.c: unit tests of command rights through policy_decide: the whole command table, users' rights, patterns, scripts. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "cmdclass.h"
#include "policy_fixture.h"

/* root: every owner, rw, scripts. cacheteam: owner cache. queues: queues + lifecycle, scripts.
 * ops: every owner, read-only, scripts. */
static struct user_conf root, cacheteam, queues, ops;

static void user_init(struct user_conf *u, const char *name, char **owners, size_t n, int ro, int scripts)
{
    memset(u, 0, sizeof(*u));
    u->name = (char *)name;
    u->owners = owners;
    u->nowners = n;
    u->all_owners = owners == NULL;
    u->read_only = ro;
    u->scripts = scripts;
}

static void setup(void)
{
    fixture_load("conf/registry.conf");

    static char *cache_owners[] = {"cache"};
    static char *queue_owners[] = {"queues", "lifecycle"};
    user_init(&root, "root", NULL, 0, 0, 1);
    user_init(&cacheteam, "cacheteam", cache_owners, 1, 0, 0);
    user_init(&queues, "queues", queue_owners, 2, 0, 1);
    user_init(&ops, "ops", NULL, 0, 1, 1);
}

static void teardown(void)
{
    fixture_free();
}

static struct session session_of(const struct user_conf *u)
{
    struct session s;
    memset(&s, 0, sizeof(s));
    s.authenticated = 1;
    s.user = u;
    s.multi_instance = -1;
    s.watch_instance = -1;
    return s;
}

static void decide_argv(const struct user_conf *u, size_t argc, const char **argv, const size_t *argvlen,
                        struct plan *p)
{
    struct session s = session_of(u);
    fixture_decide_argv(&s, argc, argv, argvlen, p);
    plan_release(p); /* these tests read only kind, error, instance and ns */
}

/* Decide for a space-separated command line as user u (NULL: no users configured). */
static void decide_as(const struct user_conf *u, const char *line, struct plan *p)
{
    size_t argc = fixture_split(line);
    decide_argv(u, argc, fixture_argv, fixture_argvlen, p);
}

#define expect_forward(u, line, inst) expect_forward_at(__LINE__, u, line, inst)
static void expect_forward_at(int at, const struct user_conf *u, const char *line, int instance)
{
    struct plan p;
    decide_as(u, line, &p);
    ck_assert_msg(p.kind == PLAN_FORWARD && p.instance == instance,
                  "line %d: %s '%s': want forward to %d, got kind %d '%s'", at, u ? u->name : "(open)", line, instance,
                  p.kind, p.error);
}

#define expect_error(u, line, prefix) expect_error_at(__LINE__, u, line, prefix)
static void expect_error_at(int at, const struct user_conf *u, const char *line, const char *prefix)
{
    struct plan p;
    decide_as(u, line, &p);
    ck_assert_msg(p.kind == PLAN_ERROR && strncmp(p.error, prefix, strlen(prefix)) == 0,
                  "line %d: %s '%s': want an error starting '%s', got kind %d '%s'", at, u ? u->name : "(open)", line,
                  prefix, p.kind, p.error);
}

/* ---- the whole command table ---- */

/*
 * Every command keygate refuses as "never forwarded", for a user with every right
 * (owners=*, rw, scripts=yes). A command added to the table (a Redis upgrade) that is
 * flagged admin or @dangerous lands here and fails this test until someone decides;
 * one that is not is still forwarded only through the registry (checked below).
 */
static const char *const never_forwarded[] = {
    "acl|cat",
    "acl|deluser",
    "acl|dryrun",
    "acl|genpass",
    "acl|getuser",
    "acl|help",
    "acl|list",
    "acl|load",
    "acl|log",
    "acl|save",
    "acl|setuser",
    "acl|users",
    "acl|whoami",
    "bgrewriteaof",
    "bgsave",
    "client|kill",
    "client|no-evict",
    "client|pause",
    "client|unpause",
    "cluster|addslots",
    "cluster|addslotsrange",
    "cluster|bumpepoch",
    "cluster|count-failure-reports",
    "cluster|countkeysinslot",
    "cluster|delslots",
    "cluster|delslotsrange",
    "cluster|failover",
    "cluster|flushslots",
    "cluster|forget",
    "cluster|getkeysinslot",
    "cluster|help",
    "cluster|info",
    "cluster|keyslot",
    "cluster|links",
    "cluster|meet",
    "cluster|myid",
    "cluster|nodes",
    "cluster|replicas",
    "cluster|replicate",
    "cluster|reset",
    "cluster|saveconfig",
    "cluster|set-config-epoch",
    "cluster|setslot",
    "cluster|shards",
    "cluster|slaves",
    "cluster|slots",
    "config|get",
    "config|help",
    "config|resetstat",
    "config|rewrite",
    "config|set",
    "debug",
    "dump",
    "failover",
    "flushall",
    "flushdb",
    "function|delete",
    "function|dump",
    "function|flush",
    "function|kill",
    "function|load",
    "function|restore",
    "latency|doctor",
    "latency|graph",
    "latency|help",
    "latency|histogram",
    "latency|history",
    "latency|latest",
    "latency|reset",
    "memory|doctor",
    "memory|malloc-stats",
    "memory|purge",
    "memory|stats",
    "migrate",
    "module|help",
    "module|list",
    "module|load",
    "module|loadex",
    "module|unload",
    "monitor",
    "move",
    "pfdebug",
    "pfselftest",
    "psync",
    "randomkey",
    "replconf",
    "replicaof",
    "restore",
    "restore-asking",
    "role",
    "save",
    "script|debug",
    "script|flush",
    "script|kill",
    "shutdown",
    "slaveof",
    "slowlog|get",
    "slowlog|help",
    "slowlog|len",
    "slowlog|reset",
    "swapdb",
    "sync",
    NULL,
};

/* Keyless commands policy forwards without a namespace (README "What keygate does with a command"). */
static const char *const keyless_forwarded[] = {"dbsize", "time", "lastsave", "wait", NULL};

static int in_list(const char *name, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(list[i], name) == 0) return 1;
    return 0;
}

/* argv for cmd: its name (split at '|'), then "cache:t" up to its arity, with the key
 * counts of KEYNUM specs set to "1" so that each spec finds one key. */
static size_t table_argv(const struct command_def *cmd, char store[][64], const char **argv, size_t *argvlen)
{
    size_t argc = 0;
    const char *bar = strchr(cmd->name, '|');
    if (bar) {
        snprintf(store[argc++], 64, "%.*s", (int)(bar - cmd->name), cmd->name);
        snprintf(store[argc++], 64, "%s", bar + 1);
    } else {
        snprintf(store[argc++], 64, "%s", cmd->name);
    }
    size_t want = (size_t)(cmd->arity >= 0 ? cmd->arity : -cmd->arity);
    int keynum_at[8], nkeynum = 0;
    for (int i = 0; i < cmd->nspecs && nkeynum < 8; i++) {
        const struct key_spec *ks = &cmd->specs[i];
        if (ks->bs_type == BS_INDEX && ks->fk_type == FK_KEYNUM) {
            keynum_at[nkeynum] = ks->bs_index + ks->fk_keynumidx;
            size_t need = (size_t)(keynum_at[nkeynum] + ks->fk_firstkey + 1);
            if (need > want) want = need;
            nkeynum++;
        }
    }
    while (argc < want) snprintf(store[argc++], 64, "cache:t");
    for (int i = 0; i < nkeynum; i++) snprintf(store[keynum_at[i]], 64, "1");
    for (size_t i = 0; i < argc; i++) {
        argv[i] = store[i];
        argvlen[i] = strlen(store[i]);
    }
    return argc;
}

START_TEST(whole_command_table_is_forwarded_through_the_registry_or_denied)
{
    size_t n_local = 0, n_forward = 0, n_never = 0, n_denied_other = 0, n_err = 0, n_total = 0;
    char refused[512][64];
    size_t nrefused = 0;
    for (size_t i = 0; i < command_table_len; i++) {
        const struct command_def *top = &command_table[i];
        size_t nleaf = top->nsubcommands ? (size_t)top->nsubcommands : 1;
        for (size_t j = 0; j < nleaf; j++) {
            const struct command_def *cmd = top->nsubcommands ? &top->subcommands[j] : top;
            char store[16][64];
            const char *argv[16];
            size_t argvlen[16];
            size_t argc = table_argv(cmd, store, argv, argvlen);
            struct plan p;
            decide_argv(&root, argc, argv, argvlen, &p);
            n_total++;
            char never[128];
            snprintf(never, sizeof(never), "DENIED command '%s' is never forwarded", cmd->name);
            if (p.kind == PLAN_LOCAL) {
                n_local++;
            } else if (p.kind == PLAN_FORWARD) {
                /* forwarded: a key (or channel) went through the registry, or keygate routed a
                 * pattern; pub/sub introspection naming no channel goes to every instance */
                ck_assert_msg((p.ns != NULL && p.instance == p.ns->instance) || (cmd->flags & CMD_PUBSUB) ||
                                  in_list(cmd->name, keyless_forwarded),
                              "%s forwarded without a namespace", cmd->name);
                n_forward++;
            } else if (strncmp(p.error, never, strlen(never)) == 0) {
                ck_assert_uint_lt(nrefused, 512);
                snprintf(refused[nrefused++], 64, "%s", cmd->name);
                n_never++;
            } else if (strncmp(p.error, "DENIED", 6) == 0) {
                n_denied_other++; /* keyless, stateful, scripts without keys, ... */
            } else {
                /* generic arguments can be a syntax error (Redis would say the same) */
                ck_assert_msg(strncmp(p.error, "ERR", 3) == 0 || strncmp(p.error, "CROSSINSTANCE", 13) == 0 ||
                                  strncmp(p.error, "NONAMESPACE", 11) == 0,
                              "%s: unexpected '%s'", cmd->name, p.error);
                n_err++;
            }
            ck_assert_msg(in_list(cmd->name, never_forwarded) == (strncmp(p.error, never, strlen(never)) == 0),
                          "%s: documented as %s, policy says kind %d '%s'", cmd->name,
                          in_list(cmd->name, never_forwarded) ? "never forwarded" : "forwardable", p.kind, p.error);
        }
    }
    for (size_t i = 0; never_forwarded[i]; i++) {
        int seen = 0;
        for (size_t k = 0; k < nrefused && !seen; k++) seen = strcmp(refused[k], never_forwarded[i]) == 0;
        ck_assert_msg(seen, "%s is documented as never forwarded but is not in the command table", never_forwarded[i]);
    }
    printf("command table: %zu commands: %zu local, %zu forwarded through the registry, %zu never forwarded, "
           "%zu refused otherwise (no key, stateful), %zu argument errors\n",
           n_total, n_local, n_forward, n_never, n_denied_other, n_err);
}
END_TEST

START_TEST(never_forwarded_is_case_insensitive_and_covers_subcommands)
{
    expect_error(&root, "config set dir /tmp", "DENIED command 'config|set' is never forwarded");
    expect_error(&root, "CoNfIg GeT dir", "DENIED command 'config|get'");
    expect_error(&root, "REPLICAOF 127.0.0.1 1", "DENIED");
    expect_error(&root, "slaveof no one", "DENIED");
    expect_error(&root, "MODULE LOAD /x.so", "DENIED");
    expect_error(&root, "FLUSHALL ASYNC", "DENIED");
    expect_error(&root, "client kill 1.2.3.4:5", "DENIED");
    expect_error(&root, "CLIENT PAUSE 100", "DENIED");
    expect_error(&root, "CLIENT NO-EVICT on", "DENIED");
    expect_error(&root, "CLIENT REPLY MAYBE", "ERR syntax error"); /* issue 19: answered by keygate */
    expect_error(&root, "cluster info", "DENIED");
    expect_error(&root, "SCRIPT FLUSH", "DENIED");
    expect_error(&root, "script kill", "DENIED");
    expect_error(&root, "FUNCTION LOAD x", "DENIED");
    expect_error(&root, "FUNCTION FLUSH", "DENIED");
    expect_error(&root, "RESTORE cache:x 0 payload", "DENIED");
    expect_error(&root, "DUMP cache:x", "DENIED");
    expect_error(&root, "MEMORY STATS", "DENIED");
    expect_error(&root, "MEMORY DOCTOR", "DENIED");
    expect_error(&root, "latency latest", "DENIED");
    expect_error(&root, "SLOWLOG GET", "DENIED");
    expect_error(&root, "randomkey", "DENIED");
    expect_error(&root, "MOVE cache:x 1", "DENIED");
    expect_error(&root, "COPY cache:a cache:b DB 1", "DENIED keygate serves database 0 only");
    expect_forward(&root, "COPY cache:a cache:b DB 0 REPLACE", 1);
    expect_forward(&root, "COPY cache:a cache:b", 1);
    /* keyed OBJECT/MEMORY subcommands go through the registry */
    expect_forward(&root, "OBJECT ENCODING cache:x", 1);
    expect_forward(&root, "object freq q:x", 0);
    expect_forward(&root, "MEMORY USAGE cache:x", 1);
    expect_error(&cacheteam, "MEMORY USAGE q:x", "NOPERM");
    expect_error(&root, "OBJECT HELP", "DENIED");
    /* answered by keygate itself, never by a backend */
    struct plan p;
    decide_as(&root, "INFO", &p);
    ck_assert_int_eq(p.kind, PLAN_LOCAL);
    decide_as(&root, "client list", &p);
    ck_assert_int_eq(p.kind, PLAN_LOCAL);
}
END_TEST

/* ---- users' rights ---- */

START_TEST(rights_matrix_of_three_users)
{
    const struct user_conf *users[] = {&cacheteam, &queues, &ops};
    size_t checked = 0;
    for (size_t u = 0; u < 3; u++) {
        const struct user_conf *user = users[u];
        for (size_t i = reg->first[NS_KEY]; i < reg->first[NS_KEY] + reg->n[NS_KEY]; i++) {
            const struct namespace_entry *ns = &reg->entries[i];
            int owns = user->all_owners;
            for (size_t o = 0; o < user->nowners; o++) owns |= strcmp(user->owners[o], ns->owner) == 0;
            const char *forms[] = {"GET %sm1", "HGETALL %sm1", "SET %sm1 v", "DEL %sm1", "INCR %sm1"};
            for (size_t f = 0; f < 5; f++) {
                int writes = f >= 2;
                char line[256], name[16];
                snprintf(line, sizeof(line), forms[f], ns->prefix);
                snprintf(name, sizeof(name), "%.*s", (int)strcspn(forms[f], " "), forms[f]);
                for (char *c = name; *c; c++) *c = (char)(*c - 'A' + 'a');
                struct plan p;
                decide_as(user, line, &p);
                if (owns && !(writes && user->read_only)) {
                    ck_assert_msg(p.kind == PLAN_FORWARD && p.instance == ns->instance,
                                  "%s '%s': want forward, got '%s'", user->name, line, p.error);
                } else {
                    ck_assert_msg(p.kind == PLAN_ERROR && strncmp(p.error, "NOPERM", 6) == 0,
                                  "%s '%s': want NOPERM, got kind %d '%s'", user->name, line, p.kind, p.error);
                    char want[128];
                    snprintf(want, sizeof(want), "'%s'", user->name);
                    ck_assert_msg(strstr(p.error, want), "'%s' does not name the user", p.error);
                    snprintf(want, sizeof(want), "'%s'", name);
                    ck_assert_msg(strstr(p.error, want), "'%s' does not name the command", p.error);
                    snprintf(want, sizeof(want), "'%s'", ns->prefix);
                    ck_assert_msg(strstr(p.error, want), "'%s' does not name the namespace", p.error);
                }
                checked++;
            }
        }
    }
    printf("rights matrix: %zu decisions\n", checked);
}
END_TEST

START_TEST(multi_key_commands_check_every_key)
{
    expect_forward(&queues, "MGET q:a dedup:job:b", 0);
    expect_error(&queues, "MGET q:a rl:b", "NOPERM user 'queues' may not use namespace 'rl:'");
    expect_error(&queues, "RENAME q:a rl:b", "NOPERM");
    expect_error(&cacheteam, "SUNIONSTORE cache:dst cache:a cache:mattermost:listener", "NOPERM");
    expect_error(&ops, "SUNIONSTORE cache:dst cache:a", "NOPERM user 'ops' has access=ro and 'sunionstore' writes");
    expect_forward(&ops, "SUNION cache:a cache:b", 1);
}
END_TEST

/* ---- KEYS and SCAN ---- */

START_TEST(keys_and_scan_only_inside_one_readable_namespace)
{
    /* no users configured: any pattern inside one namespace */
    expect_forward(NULL, "KEYS cache:*", 1);
    expect_forward(NULL, "KEYS q:run:*", 0);
    expect_error(NULL, "KEYS *", "DENIED");
    expect_error(NULL, "KEYS ca*", "DENIED");
    expect_error(NULL, "KEYS cache?x", "DENIED");
    expect_error(NULL, "KEYS dedup:*", "DENIED"); /* "dedup:" alone is no namespace */
    expect_error(NULL, "keys \\q:*", "DENIED");

    /* cache:mattermost:listener (owner mattermost) nests inside cache: */
    expect_error(&cacheteam, "KEYS cache:*", "DENIED");
    expect_error(&cacheteam, "KEYS cache:[m]*", "DENIED");
    expect_error(&cacheteam, "KEYS cache:m*", "DENIED");
    expect_forward(&cacheteam, "KEYS cache:search:*", 1);
    expect_forward(&cacheteam, "KEYS cache:x?y", 1);
    expect_error(&cacheteam, "KEYS cache:mattermost:listener*", "DENIED");
    expect_error(&cacheteam, "KEYS q:*", "DENIED");
    expect_forward(&root, "KEYS cache:*", 1);
    expect_forward(&ops, "KEYS cache:*", 1);
    expect_forward(&queues, "KEYS dedup:job:*", 0);

    expect_error(NULL, "SCAN 0", "DENIED");
    expect_error(&root, "SCAN 0 COUNT 100", "DENIED");
    expect_error(&root, "SCAN 0 MATCH *", "DENIED");
    expect_forward(&queues, "SCAN 0 MATCH q:* COUNT 100", 0);
    expect_forward(&queues, "scan 17 count 10 match q:run:* type string", 0);
    expect_forward(&queues, "SCAN 0 MATCH * MATCH q:*", 0); /* the last MATCH wins, as in Redis */
    expect_error(&queues, "SCAN 0 MATCH q:* MATCH *", "DENIED");
    expect_error(&queues, "SCAN 0 MATCH cache:*", "DENIED");
    expect_error(&queues, "SCAN 0 MATCH", "ERR syntax error");
    expect_error(&queues, "SCAN 0 FOO bar", "ERR syntax error");
    /* HSCAN's MATCH is over fields: the key goes through the registry */
    expect_forward(&queues, "HSCAN q:h 0 MATCH *", 0);
    expect_error(&queues, "HSCAN cache:h 0", "NOPERM");
}
END_TEST

/* CLIENT TRACKING BCAST prefixes: ruled as SCAN patterns (issue 32). */
START_TEST(test_issue32_bcast_prefix_like_a_scan_pattern)
{
    char err[300];
    struct session s = session_of(&cacheteam);
    ck_assert_int_eq(access_tracking_prefix(reg, &s, "cache:search:", 13, err, sizeof(err)), 0);
    ck_assert_int_eq(access_tracking_prefix(reg, &s, "cache:", 6, err, sizeof(err)), -1); /* nests mattermost's */
    ck_assert_str_eq(err, "NOPERM keygate: BCAST prefix 'cache:' covers namespace 'cache:mattermost:listener' (owner "
                          "mattermost) that user 'cacheteam' may not read");
    ck_assert_int_eq(access_tracking_prefix(reg, &s, "q:", 2, err, sizeof(err)), -1);
    ck_assert_int_eq(access_tracking_prefix(reg, &s, "", 0, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "NOPERM keygate: BCAST prefix '' lies in no namespace and the registry has no default line");
    ck_assert_int_eq(access_tracking_prefix(reg, &s, "ca", 2, err, sizeof(err)), -1); /* as KEYS ca*: DENIED */
    s = session_of(&root);
    ck_assert_int_eq(access_tracking_prefix(reg, &s, "cache:", 6, err, sizeof(err)), 0);
    ck_assert_int_eq(access_tracking_prefix(reg, &s, "dedup:job:x", 11, err, sizeof(err)), 0);
    s = session_of(&ops); /* read-only, every owner: reading is enough */
    ck_assert_int_eq(access_tracking_prefix(reg, &s, "cache:", 6, err, sizeof(err)), 0);
}
END_TEST

/* ---- SORT BY / GET ---- */

START_TEST(sort_patterns_stay_in_the_sorted_keys_namespace)
{
    expect_forward(&cacheteam, "SORT cache:ids", 1);
    expect_forward(&cacheteam, "SORT cache:ids BY cache:w_*", 1);
    expect_forward(&cacheteam, "SORT cache:ids BY nosort", 1);
    expect_forward(&cacheteam, "SORT cache:ids GET #", 1);
    expect_forward(&cacheteam, "SORT cache:ids BY cache:w_* GET # GET cache:h_*->name LIMIT 0 10 DESC ALPHA", 1);
    expect_forward(&cacheteam, "SORT cache:ids GET nostar", 1);
    expect_error(&cacheteam, "SORT cache:ids BY q:*", "DENIED");
    expect_error(&cacheteam, "sort cache:ids by q:*", "DENIED");
    expect_error(&cacheteam, "SORT cache:ids GET # GET q:*->f", "DENIED");
    expect_error(&cacheteam, "SORT_RO cache:ids BY rl:*", "DENIED");
    expect_error(&cacheteam, "SORT cache:ids BY *", "DENIED");
    expect_error(&cacheteam, "SORT cache:ids BY cache:*", "DENIED"); /* reaches cache:mattermost:listener */
    expect_forward(&root, "SORT cache:ids BY cache:*", 1);
    expect_error(&root, "SORT cache:ids BY cache:mattermost:listener*", "DENIED");
    expect_error(&root, "SORT cache:ids BY q:*", "DENIED");
    expect_forward(&root, "SORT cache:ids STORE cache:dst", 1);
    expect_error(&root, "SORT cache:ids STORE q:dst", "CROSSINSTANCE");
    /* a read-only user may sort, not store */
    expect_forward(&ops, "SORT cache:ids BY cache:*", 1);
    expect_error(&ops, "SORT cache:ids STORE cache:dst", "NOPERM");
}
END_TEST

/* ---- scripts ---- */

START_TEST(scripts_need_scripts_yes_and_declared_keys)
{
    expect_error(NULL, "EVAL return 1 1 cache:a", "DENIED");
    expect_error(&cacheteam, "EVAL return 1 1 cache:a", "DENIED scripts are refused");
    expect_error(&cacheteam, "EVALSHA abc 1 cache:a", "DENIED");
    expect_error(&cacheteam, "FCALL f 1 cache:a", "DENIED");
    expect_error(&cacheteam, "SCRIPT LOAD return", "DENIED");
    expect_forward(&queues, "EVAL return 1 q:a", 0);
    expect_forward(&queues, "evalsha abc 2 q:a dedup:job:b", 0);
    expect_forward(&queues, "EVAL_RO return 1 q:a", 0);
    expect_forward(&queues, "FCALL f 1 q:a", 0);
    expect_forward(&queues, "FCALL_RO f 1 q:a", 0);
    expect_error(&queues, "EVAL return 1 cache:a", "NOPERM");
    expect_error(&queues, "EVAL return 2 q:a cache:a", "NOPERM");
    expect_error(&queues, "EVAL return 1 nope", "NONAMESPACE");
    expect_error(&queues, "EVAL return 0", "DENIED");
    /* SCRIPT LOAD/EXISTS: queues' namespaces (q:, dedup:job:) all live on durable */
    expect_forward(&queues, "SCRIPT LOAD return", 0);
    expect_forward(&queues, "SCRIPT EXISTS abc def", 0);
    expect_error(&root, "SCRIPT LOAD return", "DENIED");
    expect_error(&queues, "SCRIPT FLUSH", "DENIED");
    expect_error(&queues, "SCRIPT KILL", "DENIED");
    expect_error(&queues, "FUNCTION LOAD x", "DENIED");
    /* read-only: only the _RO variants */
    expect_error(&ops, "EVAL return 1 q:a", "NOPERM user 'ops' has access=ro and 'eval' writes namespace 'q:'");
    expect_error(&ops, "FCALL f 1 q:a", "NOPERM");
    expect_forward(&ops, "EVAL_RO return 1 q:a", 0);
    expect_forward(&ops, "EVALSHA_RO abc 1 cache:a", 1);
}
END_TEST

START_TEST(auth_gate_comes_first)
{
    struct session s;
    memset(&s, 0, sizeof(s));
    s.multi_instance = -1;
    s.watch_instance = -1;
    const char *argv[] = {"CONFIG", "SET", "dir", "/tmp"};
    size_t argvlen[] = {6, 3, 3, 4};
    struct policy_request r = {.argc = 4, .argv = argv, .argvlen = argvlen};
    r.cmd = command_lookup(4, argv, argvlen, &r.unknown_subcommand);
    struct plan p;
    policy_decide(&cfg, reg, &s, &r, &p);
    plan_release(&p);
    ck_assert_str_eq(p.error, "NOAUTH Authentication required.");
    ck_assert(access_allowed_before_auth(command_by_name("auth")));
    ck_assert(access_allowed_before_auth(command_by_name("hello")));
    ck_assert(access_allowed_before_auth(command_by_name("quit")));
    ck_assert(access_allowed_before_auth(command_by_name("reset")));
    ck_assert(!access_allowed_before_auth(command_by_name("ping"))); /* issue 19: -NOAUTH, as Redis */
    ck_assert(!access_allowed_before_auth(command_by_name("get")));
    ck_assert(!access_allowed_before_auth(command_by_name("keys")));
}
END_TEST

/* Issue 10 item 6: CLIENT LIST shows a user its own user's connections; an rw owners=* user sees all. */
START_TEST(test_issue10_item6_client_list_visibility)
{
    struct user_conf alice = {.name = "alice"}, bob = {.name = "bob"}, alice2 = {.name = "alice"};
    struct user_conf admin = {.name = "admin", .all_owners = 1}, ops = {.name = "ops", .all_owners = 1, .read_only = 1};
    ck_assert(access_may_see_client(NULL, NULL)); /* no users configured */
    ck_assert(access_may_see_client(&alice, &alice));
    ck_assert(access_may_see_client(&alice, &alice2)); /* same name after a reload */
    ck_assert(!access_may_see_client(&alice, &bob));
    ck_assert(!access_may_see_client(&alice, NULL)); /* a connection not logged in yet */
    ck_assert(access_may_see_client(&admin, &bob));
    ck_assert(access_may_see_client(&admin, NULL));
    ck_assert(!access_may_see_client(&ops, &bob)); /* owners=* but access=ro */
    ck_assert(access_may_see_client(&ops, &ops));
}
END_TEST

/* Every command_def of the table, containers and their subcommands alike, into out; returns how many. */
static size_t all_commands(const struct command_def **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < command_table_len; i++) {
        ck_assert_uint_lt(n, max);
        out[n++] = &command_table[i];
        for (int j = 0; j < command_table[i].nsubcommands; j++) {
            ck_assert_uint_lt(n, max);
            out[n++] = &command_table[i].subcommands[j];
        }
    }
    return n;
}

START_TEST(cmdclass_index_is_dense_and_distinct)
{
    static const struct command_def *cmds[4096];
    static unsigned char seen[4096];
    size_t n = all_commands(cmds, 4096);
    ck_assert_uint_eq(cmdclass_count(), n);
    ck_assert_uint_gt(n, 300); /* Redis 7.0: ~240 commands and their subcommands */
    memset(seen, 0, sizeof(seen));
    for (size_t i = 0; i < n; i++) {
        size_t ix = cmdclass_index(cmds[i]);
        ck_assert_msg(ix < n, "%s: index %zu of %zu", cmds[i]->name, ix, n);
        ck_assert_msg(!seen[ix], "%s: index %zu given twice", cmds[i]->name, ix);
        seen[ix] = 1;
    }
    /* distinct and all below n: every index of [0, n) is used once */
    for (size_t i = 0; i < n; i++) ck_assert(seen[i]);
    /* stable, and the per-thread cache answers id and index of the right command when they alternate */
    const struct command_def *get = command_by_name("get");
    const struct command_def *set = command_by_name("set");
    ck_assert_ptr_nonnull(get);
    ck_assert_ptr_nonnull(set);
    size_t gi = cmdclass_index(get), si = cmdclass_index(set);
    ck_assert_uint_ne(gi, si);
    ck_assert_int_eq(cmdclass_id(get), CID_GET);
    ck_assert_uint_eq(cmdclass_index(set), si);
    ck_assert_int_eq(cmdclass_id(get), CID_GET);
    ck_assert_int_eq(cmdclass_id(set), CID_SET);
    ck_assert_uint_eq(cmdclass_index(get), gi);
    /* a command_def outside the table has no index, and its id is found by name */
    struct command_def own = *get;
    ck_assert_uint_eq(cmdclass_index(&own), CMDCLASS_NO_INDEX);
    ck_assert_int_eq(cmdclass_id(&own), CID_GET);
    ck_assert_uint_eq(cmdclass_index(get), gi);
}
END_TEST

/* The table access keeps gives, for every command, what access_never_forwarded computes. */
static void *compare_never_forwarded(void *arg)
{
    static const struct command_def *cmds[4096];
    size_t n = all_commands(cmds, 4096), *mismatches = arg, never = 0;
    for (size_t i = 0; i < n; i++) {
        const char *direct = access_never_forwarded(cmds[i]);
        if (access_never_forwarded_lookup(cmds[i]) != direct) (*mismatches)++;
        never += direct != NULL;
    }
    return (void *)never;
}

START_TEST(never_forwarded_table_matches_the_direct_computation)
{
    static const struct command_def *cmds[4096];
    size_t n = all_commands(cmds, 4096), never = 0;
    for (size_t i = 0; i < n; i++) {
        const char *direct = access_never_forwarded(cmds[i]);
        const char *table = access_never_forwarded_lookup(cmds[i]);
        ck_assert_msg(table == direct, "%s: table '%s', computed '%s'", cmds[i]->name, table ? table : "(forwardable)",
                      direct ? direct : "(forwardable)");
        never += direct != NULL;
    }
    ck_assert_uint_gt(never, 100); /* the comparison covers both answers */
    ck_assert_uint_lt(never, n / 2);
    ck_assert_str_eq(access_never_forwarded_lookup(command_by_name("config|set")), "server administration");
    ck_assert_ptr_null(access_never_forwarded_lookup(command_by_name("get")));
    /* a command outside the table is computed, not looked up */
    struct command_def own = {.name = "flushall"};
    ck_assert_str_eq(access_never_forwarded_lookup(&own), "it deletes every namespace");
}
END_TEST

/* Run in a fresh (forked) test: the first lookups race to build the table from four threads. */
START_TEST(never_forwarded_table_is_built_once_under_concurrent_first_use)
{
    pthread_t t[4];
    size_t mismatches[4] = {0};
    void *never[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, compare_never_forwarded, &mismatches[i]), 0);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_join(t[i], &never[i]), 0);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(mismatches[i], 0);
        ck_assert_uint_gt((size_t)never[i], 100);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("access");
    TCase *tc = tcase_create("rights");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, whole_command_table_is_forwarded_through_the_registry_or_denied);
    tcase_add_test(tc, never_forwarded_is_case_insensitive_and_covers_subcommands);
    tcase_add_test(tc, test_issue32_bcast_prefix_like_a_scan_pattern);
    tcase_add_test(tc, rights_matrix_of_three_users);
    tcase_add_test(tc, multi_key_commands_check_every_key);
    tcase_add_test(tc, keys_and_scan_only_inside_one_readable_namespace);
    tcase_add_test(tc, sort_patterns_stay_in_the_sorted_keys_namespace);
    tcase_add_test(tc, scripts_need_scripts_yes_and_declared_keys);
    tcase_add_test(tc, auth_gate_comes_first);
    tcase_add_test(tc, test_issue10_item6_client_list_visibility);
    tcase_add_test(tc, cmdclass_index_is_dense_and_distinct);
    tcase_add_test(tc, never_forwarded_table_matches_the_direct_computation);
    tcase_add_test(tc, never_forwarded_table_is_built_once_under_concurrent_first_use);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
