/* policy.h: the pure decision: (command, argv, session, registry) -> a plan. No I/O. */
#ifndef KEYGATE_POLICY_H
#define KEYGATE_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "access.h"
#include "budget.h"
#include "commands.h"
#include "config.h"
#include "ncpolicy.h"
#include "registry.h"
#include "session.h"
#include "stats.h"
#include "ttl.h"

/*
 * request bytes -> parser -> command_lookup -> policy_decide -> plan
 *
 *   PLAN_ERROR    reply `-<error>` and forward nothing
 *   PLAN_LOCAL    keygate answers itself (PING, ECHO, HELLO, CLIENT SETNAME, COMMAND ...)
 *   PLAN_FORWARD  send to instance `instance`: the original frame, with `append`
 *                 arguments spliced on the end (SET k v -> SET k v EX 3600), and the
 *                 TTL commands of `ttl` around it (MULTI ... PEXPIRE k D NX ... EXEC),
 *                 and the near cache's invalidations `inval` (... XADD s * k key ... EXEC)
 */
enum plan_kind { PLAN_ERROR = 0, PLAN_LOCAL, PLAN_FORWARD };

enum local_cmd {
    LOCAL_NONE = 0,
    LOCAL_PING,
    LOCAL_ECHO,
    LOCAL_QUIT,
    LOCAL_SELECT, /* SELECT 0 (other dbs are PLAN_ERROR) */
    LOCAL_HELLO,  /* HELLO [2|3] (any other version is PLAN_ERROR -NOPROTO) */
    LOCAL_AUTH,   /* AUTH [user] pass: checked by the client against config users */
    LOCAL_CLIENT_SETNAME,
    LOCAL_CLIENT_GETNAME,
    LOCAL_CLIENT_ID,
    LOCAL_CLIENT_SETINFO,
    LOCAL_CLIENT_INFO,
    LOCAL_CLIENT_LIST,
    LOCAL_COMMAND, /* COMMAND (whole table) */
    LOCAL_COMMAND_COUNT,
    LOCAL_COMMAND_INFO,
    LOCAL_COMMAND_DOCS,
    LOCAL_COMMAND_LIST,
    LOCAL_INFO,
    LOCAL_MULTI, /* start buffering a transaction in keygate */
    LOCAL_EXEC,  /* send the buffered transaction (or EXECABORT) */
    LOCAL_DISCARD,
    LOCAL_UNWATCH,             /* UNWATCH with nothing watched */
    LOCAL_PING_SUBSCRIBED,     /* PING in subscribed mode: ["pong", msg] */
    LOCAL_UNSUBSCRIBE_NONE,    /* (P|S)UNSUBSCRIBE with no subscription: Redis's empty confirmation */
    LOCAL_EMPTY_ARRAY,         /* PUBSUB NUMSUB / SHARDNUMSUB naming no channel: "*0" */
    LOCAL_RESET,               /* RESET: leave MULTI, unwatch, unsubscribe, forget the name, log out; "+RESET" */
    LOCAL_READONLY,            /* READONLY / READWRITE: "+OK" (no cluster: every read is served by the primary) */
    LOCAL_CLIENT_REPLY_ON,     /* CLIENT REPLY ON: "+OK", replies again (session_client_reply) */
    LOCAL_CLIENT_REPLY_OFF,    /* CLIENT REPLY OFF: no reply, none until ON */
    LOCAL_CLIENT_REPLY_SKIP,   /* CLIENT REPLY SKIP: no reply, none for the next command */
    LOCAL_COMMAND_GETKEYS,     /* COMMAND GETKEYS / GETKEYSANDFLAGS: command_getkeys, Redis's answer */
    LOCAL_CLIENT_TRACKING,     /* CLIENT TRACKING ON|OFF ...: Redis 7.0's checks (tracking.h) */
    LOCAL_CLIENT_CACHING,      /* CLIENT CACHING YES|NO */
    LOCAL_CLIENT_GETREDIR,     /* CLIENT GETREDIR */
    LOCAL_CLIENT_TRACKINGINFO, /* CLIENT TRACKINGINFO */
    LOCAL_CLIENT_UNBLOCK,      /* CLIENT UNBLOCK id [TIMEOUT|ERROR]: a blocked client of the same user */
};

/* How a FORWARD plan uses backend connections. */
enum plan_flow {
    FLOW_SHARED = 0,  /* the client's shared pipelined connection (or its WATCH pin) */
    FLOW_WATCH,       /* WATCH: pin a dedicated connection until EXEC/DISCARD/UNWATCH */
    FLOW_UNWATCH,     /* UNWATCH on the pinned connection, then release it */
    FLOW_BLOCK,       /* blocking command: a dedicated connection until it answers */
    FLOW_SUBSCRIBE,   /* (P|S)SUBSCRIBE: the client's subscriber connection on that instance */
    FLOW_UNSUBSCRIBE, /* (P|S)UNSUBSCRIBE: to the subscriber connection(s) */
};

/* Multi-key commands split across instances. */
enum plan_merge {
    MERGE_NONE = 0,
    MERGE_MGET,          /* values back in the client's key order */
    MERGE_SUM,           /* DEL/UNLINK/EXISTS/TOUCH: integers summed */
    MERGE_INFO,          /* INFO keyspace/memory/replication: keygate's sections + each instance's, labelled (info.h) */
    MERGE_KEYS,          /* KEYS on a cluster instance: every primary's keys, in one array */
    MERGE_SCAN,          /* SCAN on a cluster instance: one primary at a time, the node's rank in the cursor */
    MERGE_SCRIPT_LOAD,   /* SCRIPT LOAD on a cluster instance: every primary loads it; their SHA1s agree */
    MERGE_SCRIPT_EXISTS, /* SCRIPT EXISTS on a cluster instance: 1 only where every primary has it */
};

/*
 * Report mode and the default line (issue 13): what the plan did not enforce, for the caller
 * to count and log (report_note). An event is (registry entry index, reason), at most once per
 * pair and command; `unregistered` counts the names the default line took.
 */
#define PLAN_REPORT_MAX 16

struct plan_report_event {
    uint32_t index; /* namespace_entry.index */
    uint8_t reason; /* enum stats_report_reason */
};

struct plan_report {
    uint32_t nevents;
    uint32_t unregistered;    /* keys (or channels) the default line took */
    int unregistered_kind;    /* enum ns_kind of those */
    int32_t unregistered_arg; /* argv index of the first, for the log line */
    struct plan_report_event events[PLAN_REPORT_MAX];
};

#define PLAN_MAX_APPEND 4
/* A split command's parts: one per instance, and on a cluster one per slot (Redis runs a
 * multi-key command only when its keys share a slot). More slots than this: CROSSSLOT. */
#define PLAN_MAX_PARTS 1024
#define PLAN_SLOT_SPANS (-2)
/* Redis's text, for a command whose keys are in several slots of a cluster instance */
#define PLAN_CROSSSLOT "CROSSSLOT Keys in request don't hash to the same slot"

struct plan_part {
    int16_t instance;
    int16_t slot;     /* -1: a single-server instance */
    uint8_t replicas; /* a write's largest replicas=N over this part's keys (0: none) */
};
#define PLAN_MORE_NS 16
#define PLAN_BUDGET_ADDS 8 /* budgeted namespaces whose keys one command adds to the estimates (more: not counted) */
#define PLAN_ERROR_MAX ERROR_TEXT_MAX /* session.h's size of an error text */

struct plan {
    enum plan_kind kind;
    enum local_cmd local; /* PLAN_LOCAL */
    int instance;         /* PLAN_FORWARD: config instance index; -1 inside MULTI: any (PING) */
    int writes;           /* the command writes (for stats/ro users) */
    size_t nappend;       /* PLAN_FORWARD: arguments to add at the end */
    const char *append[PLAN_MAX_APPEND];
    size_t append_len[PLAN_MAX_APPEND];
    const struct namespace_entry *ns; /* namespace of the first key (NULL if none) */
    struct ttl_rewrite ttl;           /* PLAN_FORWARD: injected TTL commands (see ttl.h) */
    enum plan_flow flow;              /* PLAN_FORWARD */
    int all_instances;                /* FLOW_UNSUBSCRIBE with no argument: every subscriber connection */
    int wait_sync;                    /* WAIT after a write: a replicated no-op first, so the pin's offset covers it */
    int replicas;                     /* a write (ncpolicy_writes) to keys of replicas=N namespaces: the largest N; its
                                         reply is held until N replicas confirm it (replcommit.c); 0: answered at once */
    int slot;                         /* PLAN_FORWARD to a cluster instance: the slot of its keys; -1 none (keyless,
                                         or a single-server instance); PLAN_SLOT_SPANS: queued in MULTI, keys in
                                         several slots (EXEC answers CROSSSLOT, as Redis) */
    enum plan_merge merge;            /* != MERGE_NONE: split, see key_part */
    int16_t *key_part;                /* merge: the part of argv[i] for i in 1..argc-1 (heap), -1 = not a key;
                                         NULL: the whole command to every instance (DBSIZE; every primary
                                         of a cluster), or to every primary of `instance` (MERGE_KEYS) */
    struct plan_part *parts;          /* merge with key_part: one per (instance, slot) of the keys (heap) */
    int nparts;
    int keeps_transaction; /* PLAN_ERROR inside MULTI that does not make EXEC abort (as Redis) */
    uint32_t nmore_ns;     /* distinct namespaces of the other keys, in more_ns (metrics) */
    struct nc_inval inval; /* PLAN_FORWARD: the near-cache invalidations (XADD) the write carries, in
                                         its transaction (ttl.wrap is set for them: see ncpolicy.h) */
    /* budgets (budget.h): budget_ncheck > 0: the command goes as BUDGET_SCRIPT, checking the keys
     * argv[budget_check[0..ncheck)], answering budget_msg when one is missing; budget_nadd: the
     * (slot, keys) pairs budget_add is told once the command is forwarded (policy_budget_forwarded) */
    uint16_t budget_ncheck, budget_nadd;
    /* The text buffers last: policy_decide clears every field before them and only the first
     * byte of error, so a request does not pay for zeroing 600 bytes nobody reads. */
    char error[PLAN_ERROR_MAX]; /* PLAN_ERROR: "CODE message" (no '-', no CRLF); "" otherwise */
    char append_store[64];      /* storage the append pointers may point into (the plan's own) */
    /* PLAN_FORWARD: what report mode let through and what the default line took; policy_decide
     * sets its counts (the events array is read only up to nevents) */
    struct plan_report report;
    /* the namespaces of a command's keys other than ns, each once (read up to nmore_ns; past
     * PLAN_MORE_NS distinct ones the rest are not listed): the per-namespace commands series */
    const struct namespace_entry *more_ns[PLAN_MORE_NS];
    /* budgets: read up to budget_ncheck and budget_nadd */
    int32_t budget_check[BUDGET_CHECK_KEYS_MAX];
    struct {
        uint32_t slot, n;
    } budget_add[PLAN_BUDGET_ADDS];
    char budget_msg[256];
};

/* A forwarded plan's keys of budgeted namespaces under their budget join the estimates
 * (budget_add). Call once, when the command is sent (or queued in the client's MULTI). */
static inline void policy_budget_forwarded(const struct plan *p)
{
    for (uint16_t i = 0; i < p->budget_nadd; i++) budget_add(p->budget_add[i].slot, p->budget_add[i].n);
}

/* Free what policy_decide allocated in plan (call once the plan was carried out). */
void plan_release(struct plan *plan);

/* struct session and struct policy_request: session.h (included above). */

/*
 * Decide what to do with one request. Pure: reads only its arguments (the config
 * snapshot and registry included), performs no I/O, keeps no state.
 * `plan` is fully overwritten: every field is set, and the text buffers hold what their
 * readers read (error up to its NUL, "" unless PLAN_ERROR; append_store through append). Errors use Redis's texts where Redis has one and
 * keygate's codes (DESIGN.md §3) otherwise.
 */
void policy_decide(const struct config *cfg, const struct registry *reg, const struct session *s,
                   const struct policy_request *req, struct plan *plan);

/* The argument helpers under their policy names (session.h's, for callers above the pure layer). */
static inline int policy_arg_is(const struct policy_request *r, size_t i, const char *word)
{
    return session_arg_is(r, i, word);
}

static inline int policy_arg_ll(const struct policy_request *r, size_t i, long long *out)
{
    return session_arg_ll(r, i, out);
}

static inline const char *policy_printable(const char *s, size_t len, char *out, size_t outlen)
{
    return session_printable(s, len, out, outlen);
}

/*
 * CLIENT REPLY: is the reply of the request planned as p dropped? From the session as it was
 * when p was decided (before p ran): under OFF or in the SKIP window every reply is dropped
 * (errors too), but for CLIENT REPLY ON (it ends both and answers), RESET (it ends OFF before
 * it answers; a SKIP still drops it) and UNSUBSCRIBE's local confirmation (Redis pushes
 * confirmations and messages whatever CLIENT REPLY says). CLIENT REPLY OFF and SKIP have no
 * reply of their own. Pure.
 */
int policy_reply_dropped(const struct session *s, const struct plan *p);

/* Format Redis's "unknown command" error for argv into buf (no '-', no CRLF). */
void policy_unknown_command_error(const struct policy_request *req, char *buf, size_t len);

#endif
