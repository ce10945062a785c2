/* sentinel.h: Redis Sentinel's answers as data: SENTINEL get-master-addr-by-name, ROLE, SENTINEL REPLICAS, and the +switch-master / +odown / -odown event payloads. Pure. */
#ifndef KEYGATE_SENTINEL_H
#define KEYGATE_SENTINEL_H

#include <stddef.h>

/*
 * No I/O: every function reads bytes the caller hands it, either one whole RESP2 reply as
 * resp_scan_reply framed it (reply, len: exactly one reply, its final CRLF included) or an
 * event's payload text (the message's last bulk, without RESP framing). Results are copied
 * into caller-owned structs; nothing points into the input but sentinel_parse_message's
 * results. Hosts are stored as Redis names them (an IPv4 or IPv6 address, or a hostname
 * under `sentinel resolve-hostnames`), NUL-terminated, at most SENTINEL_HOST_MAX - 1 bytes,
 * no control or space bytes; ports are 1..65535. Functions with an err buffer write a
 * one-line reason there on failure ("ROLE: ..."; cut to errlen; errlen 0 writes nothing).
 */

#define SENTINEL_HOST_MAX 256
#define SENTINEL_NAME_MAX 128        /* a master name, as in `sentinel monitor NAME` */
#define SENTINEL_ROLE_MAX_REPLICAS 8 /* ROLE of a primary: the replicas kept (all are counted) */

struct sentinel_addr {
    char host[SENTINEL_HOST_MAX];
    int port;
};

/*
 * The reply of SENTINEL get-master-addr-by-name NAME: *2 [host, port] as bulk strings.
 * 1: the sentinel knows the master (out filled); 0: a null reply ($-1 or *-1: it monitors
 * no master of that name); -1: anything else (an error reply such as -NOAUTH, a malformed
 * shape, a port that is no number in 1..65535, a host that does not fit; err filled).
 */
int sentinel_parse_master_addr(const char *reply, size_t len, struct sentinel_addr *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

enum sentinel_role_kind { SENTINEL_ROLE_PRIMARY = 1, SENTINEL_ROLE_REPLICA, SENTINEL_ROLE_SENTINEL };

/* A replica's link to its primary as ROLE names it (Redis 7.0: replstateToString). */
enum sentinel_link {
    SENTINEL_LINK_UNKNOWN = 0, /* a state this parser does not know */
    SENTINEL_LINK_NONE,        /* "none" */
    SENTINEL_LINK_CONNECT,     /* "connect": must connect */
    SENTINEL_LINK_CONNECTING,  /* "connecting": the connection and handshake are under way */
    SENTINEL_LINK_SYNC,        /* "sync": receiving the primary's data */
    SENTINEL_LINK_CONNECTED,   /* "connected": streaming; the only state that is up */
};

struct sentinel_role {
    enum sentinel_role_kind kind;
    long long offset; /* primary: its replication offset; replica: the offset it has processed (-1 before a sync) */
    /* replica: */
    struct sentinel_addr primary; /* whom it replicates from */
    enum sentinel_link link;
    /* primary: its replicas as ROLE lists them (host, port, acknowledged offset) */
    int nreplicas; /* how many the reply lists (the first SENTINEL_ROLE_MAX_REPLICAS are kept) */
    struct {
        struct sentinel_addr addr;
        long long offset;
    } replicas[SENTINEL_ROLE_MAX_REPLICAS];
    int nmasters; /* sentinel: how many masters it monitors */
};

/*
 * The reply of ROLE (Redis 7.0, RESP2):
 *   primary:  *3 ["master", :offset, *N [*3 [host, port, offset]]]  (port and offset as bulks)
 *   replica:  *5 ["slave", host, :port, state, :offset]
 *   sentinel: *2 ["sentinel", *N [name ...]]
 * 0 with out filled, -1 with err filled (an error reply such as -NOAUTH or -LOADING, another
 * first word, a malformed shape, a bad port). A replica's unknown state word is
 * SENTINEL_LINK_UNKNOWN, not an error; extra elements of a listed replica are ignored.
 */
int sentinel_parse_role(const char *reply, size_t len, struct sentinel_role *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Flags of an instance as SENTINEL REPLICAS / MASTER lists them ("slave,s_down,disconnected"). */
enum {
    SENTINEL_FLAG_MASTER = 1 << 0,
    SENTINEL_FLAG_SLAVE = 1 << 1,
    SENTINEL_FLAG_SENTINEL = 1 << 2,
    SENTINEL_FLAG_S_DOWN = 1 << 3,
    SENTINEL_FLAG_O_DOWN = 1 << 4,
    SENTINEL_FLAG_DISCONNECTED = 1 << 5,
    SENTINEL_FLAG_PROMOTED = 1 << 6,
    SENTINEL_FLAG_FAILOVER = 1 << 7, /* failover_in_progress */
    SENTINEL_FLAG_OTHER = 1 << 8,    /* a flag word this parser does not know */
};

/* Parse a comma-separated flags text (len bytes) into SENTINEL_FLAG_* bits; "" is 0. */
unsigned sentinel_parse_flags(const char *text, size_t len);

struct sentinel_replica {
    struct sentinel_addr addr;    /* "ip", "port" */
    unsigned flags;               /* "flags" */
    int link_up;                  /* "master-link-status" is "ok" */
    struct sentinel_addr primary; /* "master-host", "master-port" (host "" and port 0 when it names none) */
    int priority;                 /* "slave-priority" (0: never promoted); -1 when absent */
    long long offset;             /* "slave-repl-offset"; -1 when absent */
};

/* What one sentinel says of a master: SENTINEL MASTER NAME. */
struct sentinel_master {
    struct sentinel_addr addr;     /* "ip", "port" */
    long long config_epoch;        /* "config-epoch": the failover that made this configuration (-1 absent) */
    unsigned flags;                /* "flags" (enum sentinel_flag) */
    long long down_after_ms;       /* "down-after-milliseconds" (-1 absent) */
    long long failover_timeout_ms; /* "failover-timeout" (-1 absent) */
};

/*
 * The reply of SENTINEL MASTER NAME: a flat map (*2N [field, value, ...], bulk strings). 1 with
 * out filled ("ip" and "port" required, other fields optional, unknown ones skipped); 0 when the
 * sentinel monitors no master of that name ("-ERR No such master with that name"); -1 for
 * anything else (err filled).
 */
int sentinel_parse_master(const char *reply, size_t len, struct sentinel_master *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Which sentinel to follow, of the n that answered (answers[i]; nconfigured sentinels are
 * configured): Sentinel's own rule, the configuration of the highest config-epoch wins; among
 * answers of that epoch naming different addresses, the one most of them name (the first on a
 * tie). An answer whose epoch is below min_epoch (the one followed last) is a sentinel that is
 * behind (the minority side of a partition, next to the old primary) and is never followed,
 * unless more than half of the configured sentinels give that same answer (an operator removed
 * and monitored the master again: its epoch starts over at 0). Returns the index of the answer
 * to follow, or -1 when none may be. Pure.
 */
int sentinel_pick(const struct sentinel_master *answers, int n, long long min_epoch, int nconfigured);

/*
 * The reply of SENTINEL REPLICAS NAME (alias SLAVES): an array of flat maps (*2N [field,
 * value, ...], every value a bulk string). Fills out[0 .. min(count, max)) and sets *count to
 * how many replicas the reply lists. Each replica needs "ip", "port" and "flags"; the other
 * fields take their defaults when absent; unknown fields are skipped. 0, or -1 with err filled
 * (an error reply such as "-ERR No such master with that name", a malformed shape, a
 * replica without ip/port/flags or with a bad port or host).
 */
int sentinel_parse_replicas(const char *reply, size_t len, struct sentinel_replica *out, int max, int *count, char *err,
                            size_t errlen) __attribute__((warn_unused_result));

/*
 * A pub/sub message as a sentinel sends it on its event channels: *3 ["message", channel,
 * payload] or *4 ["pmessage", pattern, channel, payload] (a whole framed reply). 1 with the
 * channel and payload pointing into reply (not NUL-terminated); 0 when it is another reply
 * (a subscribe confirmation, anything malformed).
 */
int sentinel_parse_message(const char *reply, size_t len, const char **channel, size_t *channel_len,
                           const char **payload, size_t *payload_len);

/*
 * The payload of +switch-master: "<name> <oldip> <oldport> <newip> <newport>" (single
 * spaces, nothing after). 0 with out filled, -1 when malformed (a missing or extra word, a
 * bad port, a name or host that does not fit).
 */
struct sentinel_switch {
    char name[SENTINEL_NAME_MAX];
    struct sentinel_addr from;
    struct sentinel_addr to;
};
int sentinel_parse_switch_master(const char *payload, size_t len, struct sentinel_switch *out)
    __attribute__((warn_unused_result));

/*
 * The payload of an instance event (+odown, -odown, +sdown, -sdown, +failover-end, ...):
 * "<type> <name> <ip> <port>" for a master, then " @ <master-name> <master-ip> <master-port>"
 * for a replica or a sentinel, then for some events more words (+odown: " #quorum 2/2"),
 * which are ignored. type is "master", "slave" or "sentinel". 0 with out filled (for a master
 * event `master` repeats the instance), -1 when malformed.
 */
struct sentinel_event {
    enum sentinel_role_kind kind; /* of the instance: PRIMARY for "master" */
    char name[SENTINEL_NAME_MAX]; /* the instance's name (a replica's: "ip:port") */
    struct sentinel_addr addr;
    char master_name[SENTINEL_NAME_MAX]; /* the master the event is about */
    struct sentinel_addr master;
};
int sentinel_parse_event(const char *payload, size_t len, struct sentinel_event *out)
    __attribute__((warn_unused_result));

#endif
