/* commands.h: the command table (generated from Redis 7.0's COMMAND) and key extraction. */
#ifndef KEYGATE_COMMANDS_H
#define KEYGATE_COMMANDS_H

#include <stddef.h>
#include <stdint.h>

/* Command flags, as Redis 7.0 COMMAND reports them. */
enum command_flag {
    CMD_WRITE = 1u << 0,
    CMD_READONLY = 1u << 1,
    CMD_DENYOOM = 1u << 2,
    CMD_MODULE = 1u << 3,
    CMD_ADMIN = 1u << 4,
    CMD_PUBSUB = 1u << 5,
    CMD_NOSCRIPT = 1u << 6,
    CMD_BLOCKING = 1u << 7,
    CMD_LOADING = 1u << 8,
    CMD_STALE = 1u << 9,
    CMD_SKIP_MONITOR = 1u << 10,
    CMD_SKIP_SLOWLOG = 1u << 11,
    CMD_ASKING = 1u << 12,
    CMD_FAST = 1u << 13,
    CMD_NO_AUTH = 1u << 14,
    CMD_MAY_REPLICATE = 1u << 15,
    CMD_NO_MANDATORY_KEYS = 1u << 16,
    CMD_NO_ASYNC_LOADING = 1u << 17,
    CMD_NO_MULTI = 1u << 18,
    CMD_MOVABLE_KEYS = 1u << 19,
    CMD_ALLOW_BUSY = 1u << 20,
};

/* ACL categories (the "@name" list of COMMAND). */
enum command_acl {
    ACL_KEYSPACE = 1u << 0,
    ACL_READ = 1u << 1,
    ACL_WRITE = 1u << 2,
    ACL_SET = 1u << 3,
    ACL_SORTEDSET = 1u << 4,
    ACL_LIST = 1u << 5,
    ACL_HASH = 1u << 6,
    ACL_STRING = 1u << 7,
    ACL_BITMAP = 1u << 8,
    ACL_HYPERLOGLOG = 1u << 9,
    ACL_GEO = 1u << 10,
    ACL_STREAM = 1u << 11,
    ACL_PUBSUB = 1u << 12,
    ACL_ADMIN = 1u << 13,
    ACL_FAST = 1u << 14,
    ACL_SLOW = 1u << 15,
    ACL_BLOCKING = 1u << 16,
    ACL_DANGEROUS = 1u << 17,
    ACL_CONNECTION = 1u << 18,
    ACL_TRANSACTION = 1u << 19,
    ACL_SCRIPTING = 1u << 20,
};

/* Key-spec flags (Redis 7.0 "flags" of a key spec). */
enum key_spec_flag {
    KS_RO = 1u << 0,
    KS_RW = 1u << 1,
    KS_OW = 1u << 2,
    KS_RM = 1u << 3,
    KS_ACCESS = 1u << 4,
    KS_UPDATE = 1u << 5,
    KS_INSERT = 1u << 6,
    KS_DELETE = 1u << 7,
    KS_NOT_KEY = 1u << 8,
    KS_INCOMPLETE = 1u << 9,
    KS_VARIABLE_FLAGS = 1u << 10,
};

enum begin_search_type { BS_INVALID = 0, BS_UNKNOWN, BS_INDEX, BS_KEYWORD };
enum find_keys_type { FK_INVALID = 0, FK_UNKNOWN, FK_RANGE, FK_KEYNUM };

struct key_spec {
    uint32_t flags; /* enum key_spec_flag */
    uint8_t bs_type;
    int bs_index;           /* BS_INDEX: argv position (1 = first arg after the name) */
    const char *bs_keyword; /* BS_KEYWORD: the keyword (upper case, as Redis reports) */
    int bs_startfrom;       /* BS_KEYWORD: where to start looking; negative counts from the end */
    uint8_t fk_type;
    int fk_lastkey;   /* FK_RANGE: relative to the first key; -1 = last arg, -2 ... */
    int fk_keystep;   /* FK_RANGE / FK_KEYNUM */
    int fk_limit;     /* FK_RANGE: 0 = none, else keys = remaining / limit */
    int fk_keynumidx; /* FK_KEYNUM: index of the key count, relative to begin_search */
    int fk_firstkey;  /* FK_KEYNUM: first key, relative to begin_search */
};

struct command_def {
    const char *name;                  /* lower case; subcommands are "parent|sub" */
    int arity;                         /* Redis's: >0 exact, <0 at least -arity */
    uint32_t flags;                    /* enum command_flag */
    uint32_t acl;                      /* enum command_acl */
    int first_key, last_key, key_step; /* legacy range, as COMMAND reports */
    const struct key_spec *specs;
    int nspecs;
    const struct command_def *subcommands; /* NULL if none */
    int nsubcommands;
    const char *info_resp; /* this command's COMMAND INFO entry, raw RESP2 */
    size_t info_resp_len;
    const char *docs_resp; /* its COMMAND DOCS entry: "$len name" + docs map, raw RESP2 */
    size_t docs_resp_len;
};

/* The generated table (src/command_table.c), sorted by name. */
extern const struct command_def command_table[];
extern const size_t command_table_len;

/*
 * Find the command for argv (argv[0] is the name; for container commands such as
 * CLIENT or CONFIG, argv[1] selects the subcommand). Case-insensitive.
 * Returns NULL for an unknown command. *unknown_subcommand (may be NULL) is set to 1
 * when argv[0] is a container but the subcommand is missing/unknown (the container's
 * def is then returned, so the caller can word Redis's error), else to 0.
 * argvlen may be NULL for NUL-terminated argv.
 */
const struct command_def *command_lookup(size_t argc, const char *const *argv, const size_t *argvlen,
                                         int *unknown_subcommand);

/* Lookup by name ("get", "client|setname"; case-insensitive, as COMMAND INFO); NULL if none. */
const struct command_def *command_by_name(const char *name);

/* 1 when argc satisfies cmd->arity. */
int command_arity_ok(const struct command_def *cmd, size_t argc);

/* One key found in argv. */
struct key_ref {
    int index;      /* argv index of the key */
    uint32_t flags; /* the key spec's flags (KS_*) */
};

/*
 * Extract every key of the command from argv as Redis 7.0.15 finds them when it
 * EXECUTES the command: the key specs for keys at fixed places, and hand-written
 * finders that walk the options with the command's own grammar wherever a keyword or
 * a key count locates keys (GEORADIUS[BYMEMBER] STORE/STOREDIST, the last one wins;
 * XREAD/XREADGROUP STREAMS after BLOCK/COUNT/GROUP/NOACK; SORT/SORT_RO STORE; MIGRATE
 * KEYS; the key counts of EVAL, EVALSHA, FCALL (and their _RO forms), LMPOP, BLMPOP,
 * ZMPOP, BZMPOP, SINTERCARD, ZUNION, ZINTER, ZDIFF, ZINTERCARD and the *STORE forms). Where COMMAND GETKEYS disagrees with execution, execution
 * wins (commands.c says where). BY/GET patterns of SORT are not keys here.
 *
 * Keys are returned in key-spec order (no dedup), at most `max` are stored; returns
 * the number found, which exceeds `max` when `out` was too small (argc entries suffice
 * for every Redis 7.0 command), or -1 when Redis rejects the arguments that locate the
 * keys (wrong arity, a key count past argv or below its minimum, an option walk that
 * fails, an unbalanced STREAMS list, ...). Specs flagged KS_NOT_KEY are skipped.
 * A key count of 0 where Redis allows it (EVAL script 0) yields no keys, not -1.
 * `*incomplete` (may be NULL) is set to 1 when some spec is BS_UNKNOWN/FK_UNKNOWN/
 * KS_INCOMPLETE, or a keyword/key-count spec, that no hand-written finder covers
 * (callers must then refuse, not guess).
 * When -1 is returned and `error` is not NULL, error[0..errlen) holds the NUL-terminated
 * text Redis answers when executing these arguments, without the leading '-' and CRLF
 * (e.g. "ERR numkeys should be greater than 0"); it is the text of the first error
 * Redis finds in the arguments, not one it would find earlier in the data (WRONGTYPE).
 * argvlen may be NULL for NUL-terminated argv.
 */
int command_find_keys_err(const struct command_def *cmd, size_t argc, const char *const *argv, const size_t *argvlen,
                          struct key_ref *out, int max, int *incomplete, char *error, size_t errlen);

/* command_find_keys_err without the error text. */
int command_find_keys(const struct command_def *cmd, size_t argc, const char *const *argv, const size_t *argvlen,
                      struct key_ref *out, int max, int *incomplete);

/*
 * COMMAND GETKEYS / GETKEYSANDFLAGS as Redis 7.0.15 answers them (getKeysSubcommandImpl), for
 * argv[0..argc) = the command asked about. Not the execution finder above: GETKEYS walks the key
 * specs (INDEX and KEYWORD begin-searches, RANGE and KEYNUM find-keys) and falls back to Redis's
 * getkeys procedures where a spec fails (or, for SET and BITFIELD, whose flags depend on the
 * arguments, at once), with their quirks: a key count read with atoi, SORT's STORE seen inside
 * a STORE value, GEORADIUS's last STORE, ZUNIONSTORE's destination last when the counted form
 * fails. So it differs from what execution touches where README says (GETKEYS vs execution).
 * Returns the number of keys (the first `max` stored in out, each with the flags Redis reports:
 * 0 where its procedure gives none), or -1 with *error pointing at Redis's text (static, no '-'):
 *   "ERR Invalid command specified"                         an unknown command or subcommand
 *   "ERR The command has no key arguments"                  no key spec that is a key
 *   "ERR Invalid number of arguments specified for command" argc outside the command's arity
 *   "ERR Invalid arguments specified for command"           no key found (unless the command's keys
 *                                                           are optional: then 0, an empty array)
 * argvlen may be NULL for NUL-terminated argv. Pure.
 */
int command_getkeys(size_t argc, const char *const *argv, const size_t *argvlen, struct key_ref *out, int max,
                    const char **error);

/* 1 when the hand-written finders are sorted by name, as their binary search needs (a unit test checks it). */
int command_finders_sorted(void);

/*
 * 1 when this invocation can block in Redis (outside MULTI and scripts): XREAD and
 * XREADGROUP when their options, walked as xreadCommand does (BLOCK and COUNT take one
 * value, GROUP two, NOACK none, STREAMS ends them), parse and include a BLOCK (so
 * "BLOCK\0" is BLOCK, and a group named STREAMS does not end the options); any other
 * command flagged CMD_BLOCKING; WAIT. Else 0. argvlen may be NULL.
 */
int command_blocks(const struct command_def *cmd, size_t argc, const char *const *argv, const size_t *argvlen);

/*
 * For a command command_blocks says blocks: how long Redis may keep it blocked, in ms, read as
 * Redis reads it (XREAD/XREADGROUP BLOCK ms, WAIT's timeout ms, the seconds of BLPOP, BRPOP,
 * BRPOPLPUSH, BLMOVE, BZPOPMIN, BZPOPMAX (their last argument) and BLMPOP, BZMPOP (argv[1]),
 * a decimal number). 0 when it may block forever (a timeout of 0, or one that cannot be read:
 * Redis then refuses the command at once, so nothing waits).
 */
int64_t command_block_timeout_ms(const struct command_def *cmd, size_t argc, const char *const *argv,
                                 const size_t *argvlen);

#endif
