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

/*
 * Where the client is, as policy reads it. One copy: the client changes it only through the
 * session_* transitions below (which assert the state they leave), and keeps no mirror.
 *
 *   NORMAL --MULTI--> MULTI --EXEC/DISCARD--> NORMAL
 *   NORMAL --blocking command forwarded--> BLOCKED --its reply--> NORMAL
 *   NORMAL --(P|S)SUBSCRIBE--> SUBSCRIBED --the last subscription ended--> NORMAL
 *   NORMAL | MULTI | SUBSCRIBED --RESET--> NORMAL (no WATCH, logged out when users exist)
 *
 * A WATCH pin (watch_instance >= 0) is orthogonal: Redis keeps a client's watched keys
 * across all of these until EXEC, DISCARD or UNWATCH.
 */
enum session_mode {
    SESSION_NORMAL = 0, /* commands are decided one by one */
    SESSION_MULTI,      /* between MULTI and EXEC/DISCARD: commands are queued */
    SESSION_BLOCKED,    /* a blocking command is in flight: nothing more is decided until it answers */
    SESSION_SUBSCRIBED, /* subscribed to something: only the subscribed-mode commands */
};

/* What policy knows about the client. A zeroed session with both instances -1 is NORMAL,
 * unauthenticated, watching nothing (session_init). */
struct session {
    int authenticated;            /* 1 when no auth is required or AUTH succeeded */
    const struct user_conf *user; /* NULL when no users are configured */
    enum session_mode mode;
    int multi_instance;  /* MULTI: instance of the transaction's keys so far, -1 none */
    int multi_slot;      /* MULTI on a cluster instance: the slot of its keys so far, -1 none */
    int multi_crossslot; /* MULTI: keys queued in two slots (EXEC answers CROSSSLOT, as Redis) */
    int watch_instance;  /* instance of the WATCH pin, -1 none */
    int watch_slot;      /* its slot on a cluster instance, -1 none */
    int wrote;           /* a write was forwarded (WAIT goes where it went); RESET keeps it, as Redis keeps woff */
    int write_instance;  /* the instance of the last forwarded write (when wrote) */
    int write_slot;      /* its keys' slot on a cluster instance (-1: none): a WAIT goes to that node */
    uint64_t write_node; /* who that write was sent to, when the instance's primary may move (the caller's
                            name for a node's address; 0: it never moves): a WAIT that would reach another
                            node cannot vouch for the write */
    /* CLIENT REPLY, as Redis's CLIENT_REPLY_OFF / _SKIP / _SKIP_NEXT flags (session_client_reply) */
    uint8_t reply_off;       /* OFF: no reply until CLIENT REPLY ON (or RESET) */
    uint8_t reply_skip;      /* the command being decided now is the one after CLIENT REPLY SKIP */
    uint8_t reply_skip_next; /* CLIENT REPLY SKIP ran: the next command's reply is dropped */
};

/* A new client's session: NORMAL, authenticated when no users are configured. */
void session_init(struct session *s, int authenticated);

/* MULTI: NORMAL -> MULTI, no instance chosen yet. */
void session_multi_begin(struct session *s);

/* Inside MULTI, a queued command for `instance` (and, on a cluster, `slot`: -1 none, or
 * PLAN_SLOT_SPANS's -2 for keys in several): the transaction's instance is its first one, its
 * slot the first one; a second slot marks it multi_crossslot. */
void session_multi_queued(struct session *s, int instance, int slot);

/* EXEC or DISCARD (also refused): MULTI -> NORMAL. */
void session_multi_end(struct session *s);

/* A blocking command was forwarded: NORMAL -> BLOCKED; its reply (or failure): -> NORMAL. */
void session_block(struct session *s);
void session_unblock(struct session *s);

/* Subscribed to something (1) or to nothing any more (0), from the confirmed counts:
 * NORMAL <-> SUBSCRIBED. */
void session_set_subscribed(struct session *s, int subscribed);

/* WATCH pinned a connection to `instance`; EXEC, DISCARD, UNWATCH or the pin's loss ended it. */
void session_watch(struct session *s, int instance, int slot);
void session_unwatch(struct session *s);

/* A write was forwarded to `instance` (WAIT waits for it there): on a cluster its keys' `slot`
 * (else -1), and `node`, who it was sent to when the instance's primary may move (else 0). */
void session_wrote(struct session *s, int instance, int slot, uint64_t node);

/*
 * RESET (Redis's clearClientConnectionState): from NORMAL, MULTI or SUBSCRIBED back to
 * NORMAL, no transaction, no WATCH, CLIENT REPLY ON, and authenticated only when no users are configured
 * (`authenticated`), as a client that just connected. The last write's instance stays
 * (Redis keeps a connection's replication offset across RESET). Never while BLOCKED.
 */
void session_reset(struct session *s, int authenticated);

/*
 * CLIENT REPLY ON | OFF | SKIP (Redis's clientCommand): ON ends OFF and a pending SKIP; OFF
 * drops every reply until ON; SKIP drops the next command's reply (nothing while OFF). Which
 * reply is dropped is policy_reply_dropped's to say; pushes (pub/sub) are never dropped.
 */
enum session_reply { SESSION_REPLY_ON = 0, SESSION_REPLY_OFF, SESSION_REPLY_SKIP };
void session_client_reply(struct session *s, enum session_reply mode);

/* A command was handled (Redis's resetClient): the SKIP window moves on, so the command after
 * CLIENT REPLY SKIP is the one skipped, and only that one. Call once per command, after it ran.
 * Inline: it runs for every command. */
static inline void session_command_done(struct session *s)
{
    s->reply_skip = s->reply_skip_next;
    s->reply_skip_next = 0;
}

/* One parsed request, as policy sees it. */
struct policy_request {
    const struct command_def *cmd; /* NULL: unknown command */
    int unknown_subcommand;        /* from command_lookup */
    size_t argc;
    const char *const *argv;
    const size_t *argvlen;
    int64_t now_ms; /* wall clock (ms since epoch), for EXPIREAT-style checks */
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
