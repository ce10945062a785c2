/* policy.c: the pure request decision: auth, deny list, namespaces, instance, TTL rewrite. */
#include "policy.h"

#include "slotmap.h"

#include "access.h"
#include "cmdclass.h"
#include "info.h"
#include "session.h"
#include "tracking.h"
#include "ttl.h"
#include "util.h"

#include <errno.h>
#include <assert.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void plan_error(struct plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void plan_error(struct plan *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    p->kind = PLAN_ERROR;
    vsnprintf(p->error, sizeof(p->error), fmt, ap);
    va_end(ap);
}

static void plan_local(struct plan *p, enum local_cmd local)
{
    p->kind = PLAN_LOCAL;
    p->local = local;
}

/* Record that enforcement of entry ns let `reason` through (report mode); once per pair. */
static void report_add(struct plan *p, const struct namespace_entry *ns, enum stats_report_reason reason)
{
    struct plan_report *rp = &p->report;
    for (uint32_t i = 0; i < rp->nevents; i++)
        if (rp->events[i].index == ns->index && rp->events[i].reason == reason) return;
    if (rp->nevents == PLAN_REPORT_MAX) return; /* README: at most PLAN_REPORT_MAX pairs a command */
    rp->events[rp->nevents].index = ns->index;
    rp->events[rp->nevents].reason = (uint8_t)reason;
    rp->nevents++;
}

/* access_check_namespace for ns: 1 when the command may go on (allowed, or refused by a
 * report-mode line: then counted as would-refuse NOPERM), 0 when p is its PLAN_ERROR. */
static int namespace_access(const struct session *s, const struct namespace_entry *ns, const struct command_def *cmd,
                            struct plan *p)
{
    if (access_check_namespace(s, ns, cmd, p->error, sizeof(p->error)) == 0) return 1;
    if (!registry_reports(ns)) {
        p->kind = PLAN_ERROR;
        return 0;
    }
    p->error[0] = '\0';
    report_add(p, ns, STATS_REPORT_NOPERM);
    return 1;
}

/* The default line took argv[argi] (a key or a channel). */
static void report_unregistered(struct plan *p, enum ns_kind kind, size_t argi)
{
    if (p->report.unregistered++ == 0) {
        p->report.unregistered_kind = kind;
        p->report.unregistered_arg = (int32_t)argi;
    }
}

/* The entry a name goes to: its namespace, else the default line (counted as unregistered). */
static const struct namespace_entry *resolve_name(const struct registry *reg, enum ns_kind kind,
                                                  const struct policy_request *r, size_t argi, size_t len,
                                                  struct plan *p)
{
    const struct namespace_entry *ns = registry_lookup(reg, kind, r->argv[argi], len);
    if (!ns && reg->dflt) {
        ns = reg->dflt;
        report_unregistered(p, kind, argi);
    }
    return ns;
}

/* 1 when some channel namespace's prefix starts with lit[0..len): a pattern with that literal can
 * reach it, so it cannot be left to the default line. */
static int channel_prefix_below(const struct registry *reg, const char *lit, size_t len)
{
    for (size_t i = 0; i < reg->count; i++) {
        const struct namespace_entry *e = &reg->entries[i];
        if (e->kind == NS_CHANNEL && e->prefix_len >= len && memcmp(e->prefix, lit, len) == 0) return 1;
    }
    return 0;
}

int policy_reply_dropped(const struct session *s, const struct plan *p)
{
    if (p->kind == PLAN_LOCAL) {
        switch (p->local) {
        case LOCAL_CLIENT_REPLY_ON:
        case LOCAL_UNSUBSCRIBE_NONE:
            return 0;
        case LOCAL_CLIENT_REPLY_OFF:
        case LOCAL_CLIENT_REPLY_SKIP:
            return 1;
        case LOCAL_RESET:
            return s->reply_skip;
        default:
            break;
        }
    }
    return s->reply_off || s->reply_skip;
}

void policy_unknown_command_error(const struct policy_request *req, char *buf, size_t len)
{
    char name[130], args[160] = "", one[130];
    size_t used = 0;
    session_printable(req->argv[0], req->argvlen[0], name, sizeof(name));
    /* Redis: "'%.*s' " per argument while the list is shorter than 128 bytes. */
    for (size_t i = 1; i < req->argc && used < 128; i++) {
        size_t room = 128 - used;
        session_printable(req->argv[i], req->argvlen[i] < room ? req->argvlen[i] : room, one, sizeof(one));
        int n = snprintf(args + used, sizeof(args) - used, "'%s' ", one);
        if (n < 0 || (size_t)n >= sizeof(args) - used) break;
        used += (size_t)n;
    }
    snprintf(buf, len, "ERR unknown command '%s', with args beginning with: %s", name, args);
}

/* Upper-cased copy of a container command name, for "Try CLIENT HELP." */
static void upper_copy(const char *s, size_t len, char *out, size_t outlen)
{
    size_t n = len < outlen - 1 ? len : outlen - 1;
    for (size_t i = 0; i < n; i++) out[i] = (s[i] >= 'a' && s[i] <= 'z') ? (char)(s[i] - 32) : s[i];
    out[n] = '\0';
}

/* Commands keygate answers itself with no argument check (the others are in decide_local). */
static const uint8_t local_of[CID_COUNT] = {
    [CID_ECHO] = LOCAL_ECHO,
    [CID_QUIT] = LOCAL_QUIT,
    [CID_INFO] = LOCAL_INFO,
    [CID_COMMAND] = LOCAL_COMMAND,
    [CID_COMMAND_COUNT] = LOCAL_COMMAND_COUNT,
    [CID_COMMAND_INFO] = LOCAL_COMMAND_INFO,
    [CID_COMMAND_DOCS] = LOCAL_COMMAND_DOCS,
    [CID_COMMAND_LIST] = LOCAL_COMMAND_LIST,
    [CID_CLIENT_SETNAME] = LOCAL_CLIENT_SETNAME,
    [CID_CLIENT_GETNAME] = LOCAL_CLIENT_GETNAME,
    [CID_CLIENT_ID] = LOCAL_CLIENT_ID,
    [CID_CLIENT_SETINFO] = LOCAL_CLIENT_SETINFO,
    [CID_CLIENT_INFO] = LOCAL_CLIENT_INFO,
    [CID_CLIENT_LIST] = LOCAL_CLIENT_LIST,
    [CID_READONLY] = LOCAL_READONLY,
    [CID_READWRITE] = LOCAL_READONLY,
    [CID_COMMAND_GETKEYS] = LOCAL_COMMAND_GETKEYS,
    [CID_COMMAND_GETKEYSANDFLAGS] = LOCAL_COMMAND_GETKEYS,
    [CID_CLIENT_TRACKING] = LOCAL_CLIENT_TRACKING,
    [CID_CLIENT_CACHING] = LOCAL_CLIENT_CACHING,
    [CID_CLIENT_GETREDIR] = LOCAL_CLIENT_GETREDIR,
    [CID_CLIENT_TRACKINGINFO] = LOCAL_CLIENT_TRACKINGINFO,
};

/* Decide the commands keygate answers itself; returns 1 when `p` was filled. */
static int decide_local(enum cmd_id cid, const struct policy_request *r, struct plan *p)
{
    if (cid == CID_PING) {
        if (r->argc > 2)
            plan_error(p, "ERR wrong number of arguments for 'ping' command");
        else
            plan_local(p, LOCAL_PING);
    } else if (cid == CID_AUTH) {
        if (r->argc > 3)
            plan_error(p, "ERR syntax error");
        else
            plan_local(p, LOCAL_AUTH);
    } else if (cid == CID_SELECT) {
        long long db;
        if (session_arg_ll(r, 1, &db) != 0)
            plan_error(p, "ERR value is not an integer or out of range");
        else if (db != 0)
            plan_error(p, "DENIED keygate serves database 0 only");
        else
            plan_local(p, LOCAL_SELECT);
    } else if (cid == CID_HELLO) {
        long long ver = 2;
        if (r->argc >= 2 && session_arg_ll(r, 1, &ver) != 0)
            plan_error(p, "ERR Protocol version is not an integer or out of range");
        else if (ver < 2 || ver > 3)
            plan_error(p, "NOPROTO unsupported protocol version");
        else
            plan_local(p, LOCAL_HELLO);
    } else if (cid == CID_CLIENT_REPLY) {
        if (session_arg_is(r, 2, "on"))
            plan_local(p, LOCAL_CLIENT_REPLY_ON);
        else if (session_arg_is(r, 2, "off"))
            plan_local(p, LOCAL_CLIENT_REPLY_OFF);
        else if (session_arg_is(r, 2, "skip"))
            plan_local(p, LOCAL_CLIENT_REPLY_SKIP);
        else
            plan_error(p, "ERR syntax error");
    } else if (cid == CID_CLIENT_UNBLOCK) {
        long long id;
        if (r->argc > 4) { /* Redis 7.0's clientCommand falls through to addReplySubcommandSyntaxError */
            char sub[130], parent[64];
            const char *nul = memchr(r->argv[1], '\0', r->argvlen[1]); /* Redis prints the C string */
            session_printable(r->argv[1], nul ? (size_t)(nul - r->argv[1]) : r->argvlen[1], sub, sizeof(sub));
            upper_copy(r->argv[0], r->argvlen[0], parent, sizeof(parent));
            plan_error(p, "ERR unknown subcommand or wrong number of arguments for '%s'. Try %s HELP.", sub, parent);
        } else if (r->argc == 4 && !session_arg_is(r, 3, "timeout") && !session_arg_is(r, 3, "error"))
            plan_error(p, "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
        else if (session_arg_ll(r, 2, &id) != 0)
            plan_error(p, "ERR value is not an integer or out of range");
        else
            plan_local(p, LOCAL_CLIENT_UNBLOCK);
    } else if (cid == CID_INFO && info_names_instance_section(r->argc, r->argv, r->argvlen)) {
        plan_local(p, LOCAL_INFO); /* inside MULTI: refused, like INFO (decide_local_in_multi) */
        p->merge = MERGE_INFO;     /* outside: keygate's sections, then every instance's INFO */
    } else if (local_of[cid] != LOCAL_NONE) {
        plan_local(p, (enum local_cmd)local_of[cid]);
    } else {
        return 0;
    }
    return 1;
}

/*
 * Keyless commands keygate forwards (README "What keygate does with a command"); 1 when p was
 * filled. Outside MULTI:
 *   TIME, LASTSAVE  the first instance (the first `instance` line) answers
 *   DBSIZE          every instance, the integers summed (keygate's own keys count too)
 *   WAIT            a dedicated connection (it blocks) to the instance of the client's last
 *                   write (on a cluster, to the node of that write's slot), after a replicated
 *                   no-op that brings that connection's offset past the write; with no write
 *                   yet, the first instance, no no-op
 * Inside MULTI they run where the transaction runs (Redis answers WAIT at once there); DBSIZE
 * would count one instance only: refused.
 */
static int decide_keyless(const struct session *s, enum cmd_id cid, struct plan *p)
{
    if (cid != CID_TIME && cid != CID_LASTSAVE && cid != CID_DBSIZE && cid != CID_WAIT) return 0;
    p->kind = PLAN_FORWARD;
    if (s->mode == SESSION_MULTI) {
        p->instance = -1;
        if (cid == CID_DBSIZE) plan_error(p, "DENIED DBSIZE inside MULTI would count one instance only");
        return 1;
    }
    p->instance = 0;
    if (cid == CID_DBSIZE) {
        p->merge = MERGE_SUM; /* no key_part: the command as it came, to every instance */
    } else if (cid == CID_WAIT) {
        p->flow = FLOW_BLOCK;
        if (s->wrote) {
            p->instance = s->write_instance;
            p->wait_sync = 1;
            /* a cluster instance: the node of that write's slot, whose replicas have it (slot 0's
             * node knows nothing of it: it answered at once, a false acknowledgement) */
            if (s->write_slot >= 0) p->slot = s->write_slot;
        }
    }
    return 1;
}

/*
 * KEYS and SCAN in a namespace of a cluster instance read every primary (a cluster's keys are
 * spread over them): KEYS merges their arrays, SCAN walks them one after the other with the
 * node's rank in the cursor (slotmap.h). SCRIPT LOAD and SCRIPT EXISTS go to every primary too
 * (LOAD: their SHA1s agree; EXISTS: 1 where every one has it). Inside MULTI they would reach
 * one node: refused. 1 when p was decided here.
 */
static int decide_pattern_cluster(const struct config *cfg, const struct session *s, enum cmd_id cid, struct plan *p)
{
    if ((cid == CID_SCRIPT_LOAD || cid == CID_SCRIPT_EXISTS) && cfg->instances[p->instance].cluster) {
        /* every primary has its own script cache: EVALSHA runs on the node of its keys */
        if (s->mode == SESSION_MULTI)
            plan_error(p, "DENIED SCRIPT %s inside MULTI would reach one node of cluster instance '%s'",
                       cid == CID_SCRIPT_LOAD ? "LOAD" : "EXISTS", cfg->instance_names[p->instance]);
        else
            p->merge = cid == CID_SCRIPT_LOAD ? MERGE_SCRIPT_LOAD : MERGE_SCRIPT_EXISTS;
        return 1;
    }
    if ((cid != CID_KEYS && cid != CID_SCAN) || !cfg->instances[p->instance].cluster) return 0;
    if (s->mode == SESSION_MULTI)
        plan_error(p, "DENIED %s inside MULTI would read one node of cluster instance '%s'",
                   cid == CID_KEYS ? "KEYS" : "SCAN", cfg->instance_names[p->instance]);
    else
        p->merge = cid == CID_KEYS ? MERGE_KEYS : MERGE_SCAN;
    return 1;
}

/*
 * CLIENT subcommands of Redis 7.2 that clients send at start-up, which Redis 7.0's table (and
 * so keygate's) lacks; 1 when p was filled. SETINFO is checked as Redis 7.2 checks it and
 * answered +OK (keygate keeps no library name); NO-TOUCH is refused with its reason.
 */
static int decide_client_7_2(const struct session *s, const struct policy_request *r, struct plan *p)
{
    int setinfo = session_arg_is(r, 1, "setinfo"), notouch = session_arg_is(r, 1, "no-touch");
    if (!setinfo && !notouch) return 0;
    const char *sub = setinfo ? "client|setinfo" : "client|no-touch";
    if ((setinfo && r->argc != 4) || (notouch && r->argc != 3)) {
        plan_error(p, "ERR wrong number of arguments for '%s' command", sub);
    } else if (!s->authenticated) {
        plan_error(p, "NOAUTH Authentication required.");
    } else if (notouch) {
        plan_error(p, "DENIED CLIENT NO-TOUCH cannot be set for one client: keygate's backend connections are "
                      "shared by many clients");
    } else if (!session_arg_is(r, 2, "lib-name") && !session_arg_is(r, 2, "lib-ver")) {
        char opt[130];
        plan_error(p, "ERR Unrecognized option '%s'", session_printable(r->argv[2], r->argvlen[2], opt, sizeof(opt)));
    } else {
        for (size_t i = 0; i < r->argvlen[3]; i++) {
            if (r->argv[3][i] < '!' || r->argv[3][i] > '~') {
                char opt[130];
                plan_error(p, "ERR %s cannot contain spaces, newlines or special characters.",
                           session_printable(r->argv[2], r->argvlen[2], opt, sizeof(opt)));
                return 1;
            }
        }
        plan_local(p, LOCAL_CLIENT_SETINFO);
    }
    return 1;
}

static void decide_keys(const struct config *cfg, const struct registry *reg, const struct session *s,
                        const struct policy_request *r, enum cmd_id cid, struct key_ref *keys,
                        const struct namespace_entry **ns, struct plan *p);
static void decide_multi_instance(const struct config *cfg, const struct session *s, struct plan *p);

/* Commands Redis accepts from a client in subscribed mode (RESP2). */
static int allowed_subscribed(enum cmd_id cid)
{
    return cid == CID_SUBSCRIBE || cid == CID_PSUBSCRIBE || cid == CID_SSUBSCRIBE || cid == CID_UNSUBSCRIBE ||
           cid == CID_PUNSUBSCRIBE || cid == CID_SUNSUBSCRIBE || cid == CID_PING || cid == CID_QUIT || cid == CID_RESET;
}

static int is_unsubscribe(enum cmd_id cid)
{
    return cid == CID_UNSUBSCRIBE || cid == CID_PUNSUBSCRIBE || cid == CID_SUNSUBSCRIBE;
}

/* PUBSUB subcommands name channels from argv[2] on; the others from argv[1]. */
static int is_pubsub_query(enum cmd_id cid)
{
    return cid == CID_PUBSUB_NUMSUB || cid == CID_PUBSUB_SHARDNUMSUB || cid == CID_PUBSUB_CHANNELS ||
           cid == CID_PUBSUB_SHARDCHANNELS || cid == CID_PUBSUB_NUMPAT;
}

enum channel_role { CH_NONE = 0, CH_CHANNELS, CH_PATTERNS, CH_FIRST_ONLY, CH_OPTIONAL_PATTERN };

/* Where a pub/sub command names channels (argv[1..]) and whether they are patterns. */
static enum channel_role channel_role(enum cmd_id cid)
{
    if (cid == CID_SUBSCRIBE || cid == CID_SSUBSCRIBE || cid == CID_UNSUBSCRIBE || cid == CID_SUNSUBSCRIBE)
        return CH_CHANNELS;
    if (cid == CID_PSUBSCRIBE || cid == CID_PUNSUBSCRIBE) return CH_PATTERNS;
    if (cid == CID_PUBLISH || cid == CID_SPUBLISH) return CH_FIRST_ONLY;
    if (cid == CID_PUBSUB_NUMSUB || cid == CID_PUBSUB_SHARDNUMSUB) return CH_CHANNELS;
    if (cid == CID_PUBSUB_CHANNELS || cid == CID_PUBSUB_SHARDCHANNELS) return CH_OPTIONAL_PATTERN;
    if (cid == CID_PUBSUB_NUMPAT) return CH_OPTIONAL_PATTERN;
    return CH_NONE;
}

/* Length of a glob pattern's literal prefix (up to the first * ? [ or backslash). */
static size_t pattern_literal_len(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] == '*' || s[i] == '?' || s[i] == '[' || s[i] == '\\') return i;
    return len;
}

/*
 * Channel namespace checks of a pub/sub command: every channel must lie in a `channel`
 * entry the user may use; a pattern's literal prefix must too, and so must every nested
 * channel namespace the pattern can reach (access_glob_namespace); all on one instance.
 * Without a channel or pattern, PUBSUB CHANNELS/SHARDCHANNELS/NUMPAT see every channel:
 * the user must be allowed every channel namespace. Fills p->instance / p->ns or an error.
 */
static void decide_channels(const struct config *cfg, const struct registry *reg, const struct session *s,
                            const struct policy_request *r, enum cmd_id cid, enum channel_role role, struct plan *p)
{
    size_t first = is_pubsub_query(cid) ? 2 : 1, last = role == CH_FIRST_ONLY ? 2 : r->argc;
    int patterns = role == CH_PATTERNS || role == CH_OPTIONAL_PATTERN;
    const struct namespace_entry *seen = NULL;
    int tracking_channel = 0;
    for (size_t i = first; i < last; i++) {
        if ((cid == CID_SUBSCRIBE || cid == CID_UNSUBSCRIBE) && r->argvlen[i] == sizeof(TRACKING_CHANNEL) - 1 &&
            memcmp(r->argv[i], TRACKING_CHANNEL, sizeof(TRACKING_CHANNEL) - 1) == 0) {
            /* CLIENT TRACKING's channel (RESP2 REDIRECT): keygate writes its messages, no instance
             * publishes there; any client may listen to it (it hears only what it may read) */
            tracking_channel = 1;
            continue;
        }
        size_t len = patterns ? pattern_literal_len(r->argv[i], r->argvlen[i]) : r->argvlen[i];
        const struct namespace_entry *ns = registry_lookup(reg, NS_CHANNEL, r->argv[i], len);
        char ch[130];
        /* a channel in no namespace goes to the default line; so does a pattern that can reach no
         * channel namespace (its literal prefix lies in none and no prefix starts with it) */
        if (!ns && reg->dflt && (!patterns || !channel_prefix_below(reg, r->argv[i], len)))
            ns = resolve_name(reg, NS_CHANNEL, r, i, len, p);
        if (!ns || (patterns && len < ns->prefix_len)) {
            session_printable(r->argv[i], r->argvlen[i], ch, sizeof(ch));
            plan_error(p, "NONAMESPACE %s '%s' matches no channel namespace in the registry",
                       patterns ? "pattern" : "channel", ch);
            return;
        }
        if (!namespace_access(s, ns, r->cmd, p)) return;
        char why[PLAN_ERROR_MAX - 160];
        if (patterns && !ns->is_default && /* the default line: no channel namespace below, checked above */
            !access_glob_namespace(reg, s, r->cmd, NS_CHANNEL, r->argv[i], r->argvlen[i], "*?[\\", why, sizeof(why))) {
            session_printable(r->argv[i], r->argvlen[i], ch, sizeof(ch));
            plan_error(p, "NOPERM pattern '%s' of '%s': %s", ch, r->cmd->name, why);
            return;
        }
        if (seen && seen->instance != ns->instance && registry_reports(ns)) {
            report_add(p, ns, STATS_REPORT_CROSSINSTANCE); /* report mode: to the first channel's instance */
            continue;
        }
        if (seen && seen->instance != ns->instance) {
            plan_error(p, "CROSSINSTANCE channels of '%s' live on instances '%s' and '%s'", r->cmd->name,
                       cfg->instance_names[seen->instance], cfg->instance_names[ns->instance]);
            return;
        }
        if (!seen) seen = ns;
    }
    if (!seen && tracking_channel) { /* only the tracking channel: a subscription on the first instance */
        p->kind = PLAN_FORWARD;
        p->instance = 0;
        return;
    }
    if (!seen && (cid == CID_PUBSUB_NUMSUB || cid == CID_PUBSUB_SHARDNUMSUB)) {
        plan_local(p, LOCAL_EMPTY_ARRAY); /* Redis: no channel named, no counts */
        if (s->mode == SESSION_MULTI) {
            p->kind = PLAN_FORWARD; /* its "*0" belongs in the EXEC array, like PING's answer */
            p->instance = -1;
        }
        return;
    }
    if (!seen && (role == CH_CHANNELS || role == CH_PATTERNS)) {
        p->all_instances = 1; /* (P|S)UNSUBSCRIBE with no argument: every subscriber connection */
    } else if (!seen) {
        /* PUBSUB NUMPAT / CHANNELS / SHARDCHANNELS without a pattern: every channel of an instance,
         * the default line's too (it takes the channels of no channel namespace) */
        for (size_t i = 0; i <= reg->count; i++) {
            const struct namespace_entry *e = registry_entry(reg, i);
            if (!e || (e->kind != NS_CHANNEL && !e->is_default)) continue;
            if (access_check_namespace(s, e, r->cmd, p->error, sizeof(p->error)) != 0) {
                plan_error(p,
                           "NOPERM '%s' without a pattern sees channel namespace '%s' (owner %s) that user '%s' "
                           "may not use; give a pattern inside your namespaces",
                           r->cmd->name, e->is_default ? REGISTRY_DEFAULT_NAME : e->prefix, e->owner, s->user->name);
                return;
            }
            if (seen && seen->instance != e->instance) {
                plan_error(p, "DENIED '%s' without a channel pattern spans several instances", r->cmd->name);
                return;
            }
            seen = e;
        }
        if (!seen) {
            plan_error(p, "DENIED the registry has no channel namespace and no default line");
            return;
        }
    }
    p->kind = PLAN_FORWARD;
    p->ns = seen;
    p->instance = seen ? seen->instance : -1;
    if (seen && cfg->instances[seen->instance].cluster &&
        (cid == CID_SSUBSCRIBE || cid == CID_SUNSUBSCRIBE || cid == CID_SPUBLISH || cid == CID_PUBSUB_SHARDNUMSUB)) {
        /* a shard channel lives on its slot's node, and one command's channels share a slot (Redis) */
        p->slot = slotmap_common_slot((const char *const *)r->argv + first, r->argvlen + first, last - first);
        if (p->slot == -1) plan_error(p, PLAN_CROSSSLOT);
    }
}

/* Transaction, WATCH and subscribed-mode rules that depend on the session. 1 when p was filled. */
static int decide_session(enum cmd_id cid, const struct session *s, const struct policy_request *r, struct plan *p)
{
    const char *name = r->cmd->name;
    if (s->mode == SESSION_SUBSCRIBED && !allowed_subscribed(cid)) {
        plan_error(p,
                   "ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are "
                   "allowed in this context",
                   name);
        return 1;
    }
    if (s->mode == SESSION_SUBSCRIBED && cid == CID_PING) {
        plan_local(p, LOCAL_PING_SUBSCRIBED);
        return 1;
    }
    if (cid == CID_MULTI) {
        if (s->mode == SESSION_MULTI) {
            plan_error(p, "ERR MULTI calls can not be nested");
            p->keeps_transaction = 1;
        } else {
            plan_local(p, LOCAL_MULTI);
        }
        return 1;
    }
    if (cid == CID_EXEC || cid == CID_DISCARD) {
        if (s->mode != SESSION_MULTI)
            plan_error(p, "ERR %s without MULTI", cid == CID_EXEC ? "EXEC" : "DISCARD");
        else
            plan_local(p, cid == CID_EXEC ? LOCAL_EXEC : LOCAL_DISCARD);
        return 1;
    }
    if (cid == CID_WATCH && s->mode == SESSION_MULTI) {
        plan_error(p, "ERR WATCH inside MULTI is not allowed");
        p->keeps_transaction = 1;
        return 1;
    }
    if (cid == CID_UNWATCH) {
        if (s->mode == SESSION_MULTI) {
            p->kind = PLAN_FORWARD; /* queued like Redis does; runs wherever the transaction runs */
            p->instance = -1;
        } else if (s->watch_instance < 0)
            plan_local(p, LOCAL_UNWATCH);
        else {
            p->kind = PLAN_FORWARD;
            p->flow = FLOW_UNWATCH;
            p->instance = s->watch_instance;
        }
        return 1;
    }
    if (cid == CID_RESET) {
        plan_local(p, LOCAL_RESET); /* also inside MULTI, where Redis runs it instead of queuing it */
        return 1;
    }
    if (s->mode == SESSION_MULTI &&
        (cid == CID_SUBSCRIBE || cid == CID_SSUBSCRIBE || cid == CID_PSUBSCRIBE || is_unsubscribe(cid))) {
        plan_error(p, "DENIED '%s' inside MULTI is not supported by keygate", name);
        return 1;
    }
    return 0;
}

/* Inside MULTI keygate forwards PING/ECHO/COMMAND GETKEYS (their replies belong in the EXEC array). */
static int decide_local_in_multi(const struct session *s, const struct policy_request *r, struct plan *p)
{
    if (s->mode != SESSION_MULTI || p->kind != PLAN_LOCAL) return 0;
    if (p->local == LOCAL_PING || p->local == LOCAL_ECHO || p->local == LOCAL_COMMAND_GETKEYS) {
        /* Redis answers these alike wherever they run: queued, they run in the transaction */
        p->kind = PLAN_FORWARD;
        p->instance = -1; /* no key: it runs wherever the transaction's keys decide */
        return 1;
    }
    if (p->local == LOCAL_QUIT) return 0;
    plan_error(p, "DENIED keygate cannot queue '%s' inside MULTI", r->cmd->name);
    return 1;
}

static int splittable(enum cmd_id cid)
{
    return cid == CID_MGET || cid == CID_DEL || cid == CID_UNLINK || cid == CID_EXISTS || cid == CID_TOUCH;
}

void policy_decide(const struct config *cfg, const struct registry *reg, const struct session *s,
                   const struct policy_request *r, struct plan *p)
{
    assert(s->mode != SESSION_BLOCKED);         /* the client decides nothing while a blocking command runs */
    memset(p, 0, offsetof(struct plan, error)); /* the text buffers are written when used */
    p->error[0] = '\0';
    p->instance = -1;
    p->slot = -1;
    p->report.nevents = 0;
    p->report.unregistered = 0;
    p->report.unregistered_kind = NS_KEY;
    p->report.unregistered_arg = -1;

    if (!r->cmd) {
        policy_unknown_command_error(r, p->error, sizeof(p->error));
        p->kind = PLAN_ERROR;
        return;
    }
    /* Redis's order (processCommand): unknown (sub)command, arity, then authentication */
    if (r->unknown_subcommand && cmdclass_id(r->cmd) == CID_CLIENT && decide_client_7_2(s, r, p)) {
        decide_local_in_multi(s, r, p);
        return;
    }
    if (r->unknown_subcommand && r->argc >= 2) {
        char sub[130], parent[64];
        session_printable(r->argv[1], r->argvlen[1], sub, sizeof(sub));
        upper_copy(r->argv[0], r->argvlen[0], parent, sizeof(parent));
        plan_error(p, "ERR unknown subcommand '%s'. Try %s HELP.", sub, parent);
        return;
    }
    if (!command_arity_ok(r->cmd, r->argc)) {
        plan_error(p, "ERR wrong number of arguments for '%s' command", r->cmd->name);
        return;
    }
    if (!s->authenticated && !access_allowed_before_auth(r->cmd)) {
        plan_error(p, "NOAUTH Authentication required.");
        return;
    }
    enum cmd_id cid = cmdclass_id(r->cmd);
    if (decide_session(cid, s, r, p)) return;
    if (decide_local(cid, r, p)) {
        decide_local_in_multi(s, r, p);
        return;
    }
    if (decide_keyless(s, cid, p)) return;

    struct access_result ar;
    access_check_command(cfg, reg, s, r, &ar);
    if (ar.verdict == ACCESS_DENY) {
        plan_error(p, "%s", ar.error);
        return;
    }
    p->writes = (r->cmd->flags & CMD_WRITE) != 0;
    if (ar.verdict == ACCESS_PATTERN) {
        p->kind = PLAN_FORWARD;
        p->instance = ar.ns->instance;
        p->ns = ar.ns;
        if (decide_pattern_cluster(cfg, s, cid, p)) return;
        if (s->mode == SESSION_MULTI) decide_multi_instance(cfg, s, p);
        return;
    }
    enum channel_role role = channel_role(cid);
    if (role != CH_NONE) {
        decide_channels(cfg, reg, s, r, cid, role, p);
        if (p->kind != PLAN_FORWARD) return; /* an error, or PUBSUB NUMSUB's local empty answer */
        if (cid == CID_SUBSCRIBE || cid == CID_PSUBSCRIBE || cid == CID_SSUBSCRIBE) {
            p->flow = FLOW_SUBSCRIBE;
        } else if (is_unsubscribe(cid)) {
            p->flow = FLOW_UNSUBSCRIBE;
        } else if (s->mode == SESSION_MULTI) {
            decide_multi_instance(cfg, s, p);
        }
        return;
    }

    /* A command has at most argc keys; small commands use the stack. */
    struct key_ref stack_keys[256];
    const struct namespace_entry *stack_ns[256];
    struct key_ref *keys = stack_keys;
    const struct namespace_entry **ns = stack_ns;
    if (r->argc > 256) {
        keys = xmalloc(r->argc * sizeof(*keys));
        ns = xmalloc(r->argc * sizeof(*ns));
    }
    decide_keys(cfg, reg, s, r, cid, keys, ns, p);
    if (keys != stack_keys) {
        free(keys);
        free(ns);
    }
}

void plan_release(struct plan *p)
{
    ttl_rewrite_release(&p->ttl);
    ncpolicy_inval_release(&p->inval);
    free(p->key_part);
    p->key_part = NULL;
    free(p->parts);
    p->parts = NULL;
}

/* The slot of every key on a cluster instance: p->slot is the first instance's (when a
 * cluster). Returns 1 when the keys of one cluster instance lie in several slots. */
static int decide_slots(const struct config *cfg, const struct policy_request *r, const struct key_ref *keys,
                        const struct namespace_entry **ns_of, int nkeys, struct plan *p)
{
    int first_slot[CONFIG_MAX_INSTANCES];
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++) first_slot[i] = -1;
    int spans = 0;
    for (int i = 0; i < nkeys; i++) {
        int inst = ns_of[i]->instance;
        if (inst < 0 || !cfg->instances[inst].cluster) continue;
        size_t ai = (size_t)keys[i].index;
        int slot = (int)slotmap_key_slot(r->argv[ai], r->argvlen[ai]);
        if (first_slot[inst] < 0)
            first_slot[inst] = slot;
        else if (first_slot[inst] != slot)
            spans = 1;
    }
    if (p->ns && p->ns->instance >= 0) p->slot = first_slot[p->ns->instance];
    return spans;
}

/* A split command's parts: one per (instance, slot) of its keys, in the order they first
 * appear; p->key_part maps each key argument to its part; a write's part carries the largest
 * replicas=N of its keys. -1 (p untouched) past PLAN_MAX_PARTS. */
static int plan_split(const struct config *cfg, const struct policy_request *r, const struct key_ref *keys,
                      const struct namespace_entry **ns_of, int nkeys, int may_write, struct plan *p)
{
    int16_t *slot_part = NULL; /* a cluster's slot -> part, for the keys of cluster instances */
    int16_t inst_part[CONFIG_MAX_INSTANCES];
    int cluster_inst = -1;
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++) inst_part[i] = -1;
    int16_t *key_part = xmalloc(r->argc * sizeof(*key_part));
    for (size_t i = 0; i < r->argc; i++) key_part[i] = -1;
    struct plan_part *parts = xmalloc(PLAN_MAX_PARTS * sizeof(*parts));
    int nparts = 0;
    for (int i = 0; i < nkeys; i++) {
        int inst = ns_of[i]->instance;
        size_t ai = (size_t)keys[i].index;
        int slot = -1;
        int16_t *where = &inst_part[inst];
        if (cfg->instances[inst].cluster) {
            slot = (int)slotmap_key_slot(r->argv[ai], r->argvlen[ai]);
            if (cluster_inst >= 0 && cluster_inst != inst) {
                nparts = PLAN_MAX_PARTS + 1; /* keys of two clusters: not split */
                break;
            }
            cluster_inst = inst;
            if (!slot_part) {
                slot_part = xmalloc(SLOTMAP_SLOTS * sizeof(*slot_part));
                for (int k = 0; k < SLOTMAP_SLOTS; k++) slot_part[k] = -1;
            }
            where = &slot_part[slot];
        }
        if (*where < 0) {
            if (nparts == PLAN_MAX_PARTS) {
                nparts++;
                break;
            }
            parts[nparts] = (struct plan_part){.instance = (int16_t)inst, .slot = (int16_t)slot};
            *where = (int16_t)nparts++;
        }
        key_part[ai] = *where;
        if (may_write && ns_of[i]->replicas > parts[*where].replicas)
            parts[*where].replicas = (uint8_t)ns_of[i]->replicas;
    }
    free(slot_part);
    if (nparts > PLAN_MAX_PARTS) {
        free(key_part);
        free(parts);
        return -1;
    }
    p->key_part = key_part;
    p->parts = parts;
    p->nparts = nparts;
    return 0;
}

_Static_assert(PLAN_MAX_APPEND >= TTL_MAX_APPEND, "a plan carries every argument the TTL engine appends");
_Static_assert(sizeof(((struct plan *)0)->append_store) >= TTL_APPEND_STORE, "a plan stores the TTL's digits");
_Static_assert(sizeof(((struct plan *)0)->error) == sizeof(((struct ttl_decision *)0)->error), "a refusal's text fits");

/* Carry the TTL decision d into plan p (zeroed by policy_decide): the rewrite moves (d keeps
 * nothing to release), and the appended arguments that point into d's store are pointed into
 * the plan's own store, which outlives d. */
static void plan_take_ttl(struct plan *p, struct ttl_decision *d)
{
    ttl_rewrite_move(&p->ttl, &d->rewrite);
    p->nappend = d->nappend;
    if (!d->nappend) return;
    memcpy(p->append_store, d->append_store, sizeof(d->append_store));
    memcpy(p->append_len, d->append_len, sizeof(d->append_len));
    for (size_t i = 0; i < d->nappend; i++) {
        size_t off = (uintptr_t)d->append[i] - (uintptr_t)d->append_store; /* huge unless it points into the store */
        p->append[i] = off < sizeof(d->append_store) ? p->append_store + off : d->append[i]; /* else a static word */
    }
}

/* Namespace rules of report mode's keys in the TTL engine: none (nothing injected, nothing refused). */
static const struct namespace_entry ttl_none_entry = {.prefix = "", .owner = "", .purpose = "", .instance = -1};

/*
 * Report mode's half of the TTL rules. For each report-mode namespace among the keys: what
 * ttl_decide would do if it were enforced alone (a refusal: would-refuse max-ttl / PERSIST; a
 * rewrite: would-inject-ttl) is recorded in p. Then the keys of report namespaces are replaced
 * in ns_of by an entry without TTL rules, so the real decision enforces only the enforce=on
 * ones.
 */
static void decide_ttl_report(const struct policy_request *r, const struct key_ref *keys,
                              const struct namespace_entry **ns_of, int nkeys, int blocks, int may_wrap, struct plan *p)
{
    int any = 0;
    for (int i = 0; i < nkeys && !any; i++) any = registry_reports(ns_of[i]);
    if (!any) return;
    const struct namespace_entry *stack_one[64], *decided[PLAN_REPORT_MAX];
    const struct namespace_entry **one = nkeys <= 64 ? stack_one : xmalloc((size_t)nkeys * sizeof(*one));
    size_t ndecided = 0;
    for (int i = 0; i < nkeys && ndecided < PLAN_REPORT_MAX; i++) {
        const struct namespace_entry *rep = ns_of[i];
        if (!registry_reports(rep)) continue;
        int done = 0; /* one decision per namespace (at most PLAN_REPORT_MAX: events beyond do not fit) */
        for (size_t j = 0; j < ndecided && !done; j++) done = decided[j] == rep;
        if (done) continue;
        decided[ndecided++] = rep;
        for (int j = 0; j < nkeys; j++) one[j] = ns_of[j] == rep ? rep : &ttl_none_entry;
        struct ttl_decision d;
        ttl_decide(r, keys, one, nkeys, blocks, may_wrap, &d);
        if (d.refused)
            report_add(p, rep, d.refusal == TTL_REFUSED_PERSIST ? STATS_REPORT_PERSIST : STATS_REPORT_MAXTTL);
        else if (d.nappend || d.rewrite.nfix || d.rewrite.getex)
            report_add(p, rep, STATS_REPORT_INJECT_TTL);
        ttl_decision_release(&d);
    }
    for (int i = 0; i < nkeys; i++)
        if (registry_reports(ns_of[i])) ns_of[i] = &ttl_none_entry;
    if (one != stack_one) free(one);
}

/*
 * Budgets (budget.h): the keys of budgeted namespaces that the write may create. Under budget,
 * they join the estimate once forwarded (p->budget_add); over budget, the write is checked by
 * BUDGET_SCRIPT (p->budget_check) or refused. Report-mode namespaces were replaced in ns_of by
 * an entry without budget: they are not enforced. Returns 0, or -1 with p a PLAN_ERROR.
 */
static int decide_budget(const struct policy_request *r, const struct key_ref *keys,
                         const struct namespace_entry **ns_of, int nkeys, struct plan *p)
{
    const struct namespace_entry *over = NULL;
    struct budget_usage over_u = {0};
    size_t ncheck = 0;
    for (int i = 0; i < nkeys; i++) {
        const struct namespace_entry *ns = ns_of[i];
        if (!registry_has_budget(ns) || !budget_may_create(r->cmd, keys[i].flags)) continue;
        struct budget_usage u;
        budget_usage(ns->stats_slot, &u);
        if (budget_over(ns, &u)) {
            if (!over) over = ns, over_u = u;
            if (ncheck < BUDGET_CHECK_KEYS_MAX) p->budget_check[ncheck] = keys[i].index;
            ncheck++;
            continue;
        }
        uint16_t k = 0;
        while (k < p->budget_nadd && p->budget_add[k].slot != ns->stats_slot) k++;
        if (k == p->budget_nadd) {
            if (k == PLAN_BUDGET_ADDS) continue;
            p->budget_add[k].slot = ns->stats_slot;
            p->budget_add[k].n = 0;
            p->budget_nadd++;
        }
        p->budget_add[k].n++;
    }
    switch (budget_action(r->cmd, r->argc, ncheck)) {
    case BUDGET_PASS:
        return 0;
    case BUDGET_CHECK:
        p->budget_ncheck = (uint16_t)ncheck;
        budget_error(over, &over_u, p->budget_msg, sizeof(p->budget_msg));
        return 0;
    default:
        p->budget_nadd = 0;
        budget_error(over, &over_u, p->error, sizeof(p->error));
        p->kind = PLAN_ERROR;
        return -1;
    }
}

/* ns, a namespace of one of the command's keys other than the first's, in p->more_ns once. */
static void plan_note_namespace(struct plan *p, const struct namespace_entry *ns)
{
    for (uint32_t i = 0; i < p->nmore_ns; i++)
        if (p->more_ns[i] == ns) return;
    if (p->nmore_ns < PLAN_MORE_NS) p->more_ns[p->nmore_ns++] = ns;
}

/* Namespace, permission and instance checks over every key, then the TTL rules. */
static void decide_keys(const struct config *cfg, const struct registry *reg, const struct session *s,
                        const struct policy_request *r, enum cmd_id cid, struct key_ref *keys,
                        const struct namespace_entry **ns_of, struct plan *p)
{
    const char *name = r->cmd->name;
    int incomplete = 0;
    /* where the key-bearing arguments are wrong, Redis's own error text for them */
    int nkeys = command_find_keys_err(r->cmd, r->argc, r->argv, r->argvlen, keys, (int)(r->argc > 256 ? r->argc : 256),
                                      &incomplete, p->error, sizeof(p->error));
    if (nkeys < 0) {
        p->kind = PLAN_ERROR;
        return;
    }
    if (incomplete) {
        plan_error(p, "DENIED keygate cannot find every key of '%s'", name);
        return;
    }
    if (nkeys == 0) {
        plan_error(p, "DENIED command '%s' names no key; keygate routes by key namespace", name);
        return;
    }

    const struct namespace_entry *first = NULL;
    int split_instance = -1;
    int may_write = ncpolicy_writes(r->cmd); /* write-flagged, and scripts (EVAL, EVALSHA, FCALL) */
    for (int i = 0; i < nkeys; i++) {
        size_t ai = (size_t)keys[i].index;
        const struct namespace_entry *ns = resolve_name(reg, NS_KEY, r, ai, r->argvlen[ai], p);
        char key[130];
        if (!ns) {
            session_printable(r->argv[ai], r->argvlen[ai], key, sizeof(key));
            plan_error(p, "NONAMESPACE key '%s' matches no namespace in the registry", key);
            return;
        }
        if (!namespace_access(s, ns, r->cmd, p)) return;
        ns_of[i] = ns;
        if (may_write && ns->replicas > p->replicas) p->replicas = ns->replicas;
        if (first && ns != first) plan_note_namespace(p, ns);
        if (!first) {
            first = ns;
        } else if (ns->instance != first->instance && splittable(cid)) {
            split_instance = ns->instance;
        } else if (ns->instance != first->instance && registry_reports(ns)) {
            /* report mode: the command goes to its first key's instance; an enforce=on key
             * elsewhere still refuses it (the next branch) */
            report_add(p, ns, STATS_REPORT_CROSSINSTANCE);
        } else if (ns->instance != first->instance) {
            session_printable(r->argv[ai], r->argvlen[ai], key, sizeof(key));
            plan_error(p, "CROSSINSTANCE keys of '%s' live on instances '%s' and '%s' ('%s'); it cannot be split", name,
                       cfg->instance_names[first->instance], cfg->instance_names[ns->instance], key);
            return;
        }
    }
    p->ns = first;
    /* a cluster instance runs a command only when its keys share a slot, as Redis does */
    int spans = decide_slots(cfg, r, keys, ns_of, nkeys, p);
    if (spans && s->mode == SESSION_MULTI && split_instance < 0) {
        p->slot = PLAN_SLOT_SPANS; /* queued; EXEC answers CROSSSLOT, as Redis */
        spans = 0;
    } else if (spans && !splittable(cid)) {
        plan_error(p, PLAN_CROSSSLOT);
        return;
    }
    if (split_instance >= 0 || spans) {
        if (s->mode == SESSION_MULTI) {
            plan_error(p, "CROSSINSTANCE keys of '%s' live on instances '%s' and '%s'; inside MULTI it cannot be split",
                       name, cfg->instance_names[first->instance], cfg->instance_names[split_instance]);
            return;
        }
        if (plan_split(cfg, r, keys, ns_of, nkeys, may_write, p) != 0) {
            plan_error(p,
                       "CROSSSLOT keys of '%s' span more than %d slots and instances; keygate splits into at most %d",
                       name, PLAN_MAX_PARTS, PLAN_MAX_PARTS);
            return;
        }
        p->merge = cid == CID_MGET ? MERGE_MGET : MERGE_SUM;
    }
    /* the connection flow first: the TTL engine needs to know whether it may wrap */
    if (s->mode != SESSION_MULTI && cid == CID_WATCH) {
        if (s->watch_instance >= 0 && s->watch_instance != first->instance) {
            plan_error(p, "CROSSINSTANCE WATCH keys live on instance '%s' but earlier WATCHed keys on '%s'",
                       cfg->instance_names[first->instance], cfg->instance_names[s->watch_instance]);
            return;
        }
        if (s->watch_instance >= 0 && s->watch_slot != p->slot) { /* on a cluster: one node's connection */
            plan_error(p, PLAN_CROSSSLOT);
            return;
        }
        p->flow = FLOW_WATCH;
    } else if (s->mode != SESSION_MULTI && command_blocks(r->cmd, r->argc, r->argv, r->argvlen)) {
        p->flow = FLOW_BLOCK;
    }
    /* keygate's own MULTI/EXEC on the WATCH pin would clear (or fail on) the client's watch */
    int may_wrap = s->watch_instance != first->instance;
    /* before report mode's keys lose their namespace below: a report line is invalidated too */
    struct nc_inval inval;
    ncpolicy_invalidations(r, keys, ns_of, nkeys, &inval);
    struct ttl_decision td;
    /* keys of report namespaces are enforced as ttl=none; what their rules would do is counted */
    decide_ttl_report(r, keys, ns_of, nkeys, p->flow == FLOW_BLOCK, may_wrap, p);
    if (decide_budget(r, keys, ns_of, nkeys, p) != 0) {
        ncpolicy_inval_release(&inval);
        return;
    }
    ttl_decide(r, keys, ns_of, nkeys, p->flow == FLOW_BLOCK, may_wrap, &td);
    if (td.refused) {
        ttl_decision_release(&td);
        ncpolicy_inval_release(&inval);
        p->kind = PLAN_ERROR;
        memcpy(p->error, td.error, strlen(td.error) + 1); /* both ERROR_TEXT_MAX bytes */
        return;
    }
    plan_take_ttl(p, &td);
    ncpolicy_inval_move(&p->inval, &inval);
    /* a write is never visible without its invalidation: both in one MULTI/EXEC (a blocking
     * command or a WATCH pin cannot be wrapped: the XADDs follow the write on its connection) */
    if (p->inval.n && may_wrap && p->flow != FLOW_BLOCK) p->ttl.wrap = 1;
    if (p->error[0]) return; /* a text the key finder left: the plan stays PLAN_ERROR, as it always did */
    p->kind = PLAN_FORWARD;
    p->instance = first->instance;
    if (s->mode == SESSION_MULTI) decide_multi_instance(cfg, s, p);
}

/* Every command of one transaction goes to one instance (and the WATCH pin's). */
static void decide_multi_instance(const struct config *cfg, const struct session *s, struct plan *p)
{
    int want = s->multi_instance >= 0 ? s->multi_instance : s->watch_instance;
    if (want >= 0 && p->instance >= 0 && p->instance != want) {
        plan_release(p);
        plan_error(p, "CROSSINSTANCE this transaction runs on instance '%s'; the command's keys live on '%s'",
                   cfg->instance_names[want], cfg->instance_names[p->instance]);
    }
}
