/* cmdclass.h: per-command facts computed once (an id for the names keygate treats specially, a
 * dense index per command), so deciding a request compares no strings. */
#ifndef KEYGATE_CMDCLASS_H
#define KEYGATE_CMDCLASS_H

#include <stddef.h>

#include "commands.h"

/* X(id, "name") for every command name that policy, access or ttl look at (kept out of
 * clang-format, which lays this list out differently on every pass). */
/* clang-format off */
#define CMDCLASS_NAMES(X)                                                                                    \
    X(CID_PING, "ping") X(CID_ECHO, "echo") X(CID_QUIT, "quit") X(CID_AUTH, "auth") X(CID_SELECT, "select")  \
    X(CID_HELLO, "hello") X(CID_INFO, "info") X(CID_COMMAND, "command") X(CID_COMMAND_COUNT, "command|count") \
    X(CID_COMMAND_INFO, "command|info") X(CID_COMMAND_DOCS, "command|docs")                                   \
    X(CID_COMMAND_LIST, "command|list") X(CID_CLIENT_SETNAME, "client|setname")                               \
    X(CID_CLIENT_GETNAME, "client|getname") X(CID_CLIENT_ID, "client|id")                                     \
    X(CID_CLIENT_SETINFO, "client|setinfo") X(CID_CLIENT_INFO, "client|info")                                 \
    X(CID_CLIENT_LIST, "client|list") X(CID_MULTI, "multi") X(CID_EXEC, "exec") X(CID_DISCARD, "discard")    \
    X(CID_WATCH, "watch") X(CID_UNWATCH, "unwatch") X(CID_RESET, "reset") X(CID_SUBSCRIBE, "subscribe")       \
    X(CID_SSUBSCRIBE, "ssubscribe") X(CID_PSUBSCRIBE, "psubscribe") X(CID_UNSUBSCRIBE, "unsubscribe")         \
    X(CID_SUNSUBSCRIBE, "sunsubscribe") X(CID_PUNSUBSCRIBE, "punsubscribe") X(CID_PUBLISH, "publish")         \
    X(CID_SPUBLISH, "spublish") X(CID_PUBSUB_NUMSUB, "pubsub|numsub")                                         \
    X(CID_PUBSUB_SHARDNUMSUB, "pubsub|shardnumsub") X(CID_PUBSUB_CHANNELS, "pubsub|channels")                 \
    X(CID_PUBSUB_SHARDCHANNELS, "pubsub|shardchannels") X(CID_PUBSUB_NUMPAT, "pubsub|numpat")                 \
    X(CID_MGET, "mget") X(CID_DEL, "del") X(CID_UNLINK, "unlink") X(CID_EXISTS, "exists")                     \
    X(CID_TOUCH, "touch") X(CID_XREAD, "xread") X(CID_XREADGROUP, "xreadgroup") X(CID_WAIT, "wait")           \
    X(CID_EXPIRE, "expire") X(CID_PEXPIRE, "pexpire") X(CID_EXPIREAT, "expireat")                             \
    X(CID_PEXPIREAT, "pexpireat") X(CID_SETEX, "setex") X(CID_PSETEX, "psetex") X(CID_SET, "set")             \
    X(CID_GETEX, "getex") X(CID_PERSIST, "persist") X(CID_GET, "get") X(CID_RENAME, "rename")                 \
    X(CID_RENAMENX, "renamenx") X(CID_COPY, "copy") X(CID_SORT, "sort") X(CID_SORT_RO, "sort_ro")             \
    X(CID_KEYS, "keys") X(CID_SCAN, "scan") X(CID_SCRIPT_LOAD, "script|load")                                 \
    X(CID_SCRIPT_EXISTS, "script|exists") X(CID_EVAL, "eval") X(CID_EVALSHA, "evalsha") X(CID_FCALL, "fcall")   \
    X(CID_CLIENT, "client") X(CID_DBSIZE, "dbsize") X(CID_TIME, "time") X(CID_LASTSAVE, "lastsave")             \
    X(CID_READONLY, "readonly") X(CID_READWRITE, "readwrite") X(CID_CLIENT_REPLY, "client|reply")            \
    X(CID_CLIENT_UNBLOCK, "client|unblock") X(CID_COMMAND_GETKEYS, "command|getkeys")                         \
    X(CID_COMMAND_GETKEYSANDFLAGS, "command|getkeysandflags") X(CID_CLIENT_TRACKING, "client|tracking")      \
    X(CID_CLIENT_CACHING, "client|caching") X(CID_CLIENT_GETREDIR, "client|getredir")                         \
    X(CID_CLIENT_TRACKINGINFO, "client|trackinginfo")
/* clang-format on */

enum cmd_id {
    CID_OTHER = 0,
#define CMDCLASS_ENUM(id, name) id,
    CMDCLASS_NAMES(CMDCLASS_ENUM)
#undef CMDCLASS_ENUM
        CID_COUNT
};

/* The id of cmd (CID_OTHER for names keygate has no special rule for). O(1), thread-safe. */
enum cmd_id cmdclass_id(const struct command_def *cmd);

/* cmdclass_index of a command outside the generated command table (a test's own command_def). */
#define CMDCLASS_NO_INDEX ((size_t)-1)

/*
 * A dense index for cmd: every command and subcommand of the command table has a distinct
 * index in [0, cmdclass_count()), stable for the life of the process, so a module can keep
 * its own per-command table as an array. CMDCLASS_NO_INDEX for a command outside the table.
 * O(1), thread-safe.
 */
size_t cmdclass_index(const struct command_def *cmd);

/* How many indexes cmdclass_index hands out: the commands plus subcommands of the table. */
size_t cmdclass_count(void);

#endif
