/* ttl_invocations.h: one valid invocation (setup, command, keys that must end with a TTL) per write command of command_table[]. */
#ifndef KEYGATE_TTL_INVOCATIONS_H
#define KEYGATE_TTL_INVOCATIONS_H

#include <stdio.h>
#include <string.h>

#include "commands.h"

/*
 * The table that tests/integration/test_ttl.c walks (and tests/unit/test_ttl_invocations.c
 * checks against command_table[] without any server). Header-only: both tests include it.
 *
 *   for each row:  setup (sent DIRECTLY to the namespace's backend)
 *                  invoke (sent THROUGH keygate)
 *                  then, on the backend: PTTL of every ttl_keys key, EXISTS of every gone_keys key
 *
 * Strings are split on single spaces; `;` separates setup commands. Placeholders:
 *   {K} {K2} {K3}  fresh keys of the namespace under test (unique per row and run)
 *   {AT}           unix time in seconds 100 s from now     (EXPIREAT / SET EXAT)
 *   {PAT}          unix time in milliseconds 100 s from now (PEXPIREAT / SET PXAT)
 *
 * Expected TTLs (namespace with ttl=D, max-ttl=M):
 *   client_ttl_s == 0   PTTL of each ttl_keys key in (0, M] and ~ D    (keygate's TTL)
 *   client_ttl_s  > 0   PTTL of each ttl_keys key ~ client_ttl_s * 1000 (the client's, kept)
 *   in a ttl=none namespace: PTTL -1 unless client_ttl_s > 0.
 *
 * Every command of command_table[] (and subcommand) flagged CMD_WRITE that has a key
 * spec must have at least one row. Rows with `listed` set are not exercised for TTLs:
 * the reason says why, and the test still sends `invoke` and expects -DENIED.
 */

enum inv_expect {
    INV_OK = 0,        /* a non-error reply; TTL checks apply */
    INV_DENIED_IF_TTL, /* -DENIED in a namespace with a TTL (PERSIST...), forwarded in ttl=none */
    INV_DENIED,        /* always -DENIED: keygate never forwards it (row is `listed`) */
};

enum inv_flags {
    INV_NONDET = 1u << 0,   /* reply depends on randomness: fidelity compares reply types only */
    INV_BLOCKING = 1u << 1, /* a blocking command run on a ready key (returns at once) through its
                             * dedicated connection; its TTLs follow it there (see README) */
};

struct ttl_invocation {
    const char *command;   /* command_table[] name: "set", "xgroup|create" */
    const char *setup;     /* direct commands, `;`-separated; NULL for none */
    const char *invoke;    /* through keygate */
    const char *ttl_keys;  /* placeholders that must end with a TTL, space-separated; NULL for none */
    const char *gone_keys; /* placeholders that must not exist afterwards; NULL for none */
    int client_ttl_s;      /* see above */
    enum inv_expect expect;
    unsigned flags;     /* enum inv_flags */
    const char *listed; /* non-NULL: not exercised for TTLs, and why */
};

#define DENIED_REASON "never forwarded by keygate (DESIGN.md section 3): expected -DENIED, nothing to TTL"

#define STREAM_GROUP "XADD {K} 1-1 f v;XADD {K} 2-1 f v;XGROUP CREATE {K} g 0"
#define STREAM_PENDING STREAM_GROUP ";XREADGROUP GROUP g c COUNT 1 STREAMS {K} >"
#define GEO_SRC "GEOADD {K2} 13.361389 38.115556 Palermo 15.087269 37.502669 Catania"

/* clang-format off */
static const struct ttl_invocation ttl_invocations[] = {
    /* ---- strings ---- */
    {"append", NULL, "APPEND {K} hello", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"append", "SET {K} a", "APPEND {K} hello", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"decr", NULL, "DECR {K}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"decrby", NULL, "DECRBY {K} 5", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"incr", NULL, "INCR {K}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"incr", "SET {K} 41", "INCR {K}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"incrby", NULL, "INCRBY {K} 5", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"incrbyfloat", NULL, "INCRBYFLOAT {K} 1.5", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"set", NULL, "SET {K} v", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"set", "SET {K} old;PEXPIRE {K} 100000", "SET {K} v", "{K}", NULL, 0, INV_OK, 0, NULL}, /* SET replaces: D */
    {"set", NULL, "SET {K} v NX", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"set", "SET {K} old", "SET {K} v XX", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"set", "SET {K} old", "SET {K} v GET", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"set", NULL, "SET {K} v KEEPTTL", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"set", "SET {K} old", "SET {K} v KEEPTTL", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"set", "SET {K} old;PEXPIRE {K} 100000", "SET {K} v KEEPTTL", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"set", NULL, "SET {K} v EX 100", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"set", NULL, "SET {K} v PX 100000", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"set", NULL, "SET {K} v EXAT {AT}", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"set", NULL, "SET {K} v PXAT {PAT}", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"setex", NULL, "SETEX {K} 100 v", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"psetex", NULL, "PSETEX {K} 100000 v", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"setnx", NULL, "SETNX {K} v", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"setrange", NULL, "SETRANGE {K} 2 hello", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"getset", "SET {K} old", "GETSET {K} new", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"getset", "SET {K} old;PEXPIRE {K} 100000", "GETSET {K} new", "{K}", NULL, 0, INV_OK, 0, NULL}, /* GETSET drops the TTL */
    {"getset", NULL, "GETSET {K} new", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"getdel", "SET {K} v", "GETDEL {K}", NULL, "{K}", 0, INV_OK, 0, NULL},
    {"getex", "SET {K} v", "GETEX {K} EX 100", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"getex", "SET {K} v", "GETEX {K} PXAT {PAT}", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"getex", "SET {K} v;PEXPIRE {K} 500000", "GETEX {K} PERSIST", "{K}", NULL, 500, INV_DENIED_IF_TTL, 0, NULL},
    {"mset", NULL, "MSET {K} a {K2} b", "{K} {K2}", NULL, 0, INV_OK, 0, NULL},
    {"msetnx", NULL, "MSETNX {K} a {K2} b", "{K} {K2}", NULL, 0, INV_OK, 0, NULL},
    /* ---- bitmaps, hyperloglog ---- */
    {"setbit", NULL, "SETBIT {K} 7 1", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"bitfield", NULL, "BITFIELD {K} SET u8 0 255 GET u8 0", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"bitop", "SET {K2} ab;SET {K3} cd", "BITOP AND {K} {K2} {K3}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"pfadd", NULL, "PFADD {K} a b c", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"pfmerge", "PFADD {K2} a b;PFADD {K3} c", "PFMERGE {K} {K2} {K3}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"pfdebug", "PFADD {K} a", "PFDEBUG GETREG {K}", NULL, NULL, 0, INV_DENIED, 0, DENIED_REASON},
    /* ---- keyspace ---- */
    {"del", "SET {K} v;SET {K2} v", "DEL {K} {K2}", NULL, "{K} {K2}", 0, INV_OK, 0, NULL},
    {"unlink", "SET {K} v;SET {K2} v", "UNLINK {K} {K2}", NULL, "{K} {K2}", 0, INV_OK, 0, NULL},
    {"expire", "SET {K} v", "EXPIRE {K} 100", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"expire", "SET {K} v", "EXPIRE {K} 100 NX", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"expire", "SET {K} v", "EXPIRE {K} 0", NULL, "{K}", 0, INV_OK, 0, NULL},
    {"expire", "SET {K} v", "EXPIRE {K} -5", NULL, "{K}", 0, INV_OK, 0, NULL},
    {"pexpire", "SET {K} v", "PEXPIRE {K} 100000", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"pexpire", "SET {K} v", "PEXPIRE {K} 0", NULL, "{K}", 0, INV_OK, 0, NULL},
    {"expireat", "SET {K} v", "EXPIREAT {K} {AT}", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"expireat", "SET {K} v", "EXPIREAT {K} 1", NULL, "{K}", 0, INV_OK, 0, NULL},
    {"pexpireat", "SET {K} v", "PEXPIREAT {K} {PAT}", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"pexpireat", "SET {K} v", "PEXPIREAT {K} 1000", NULL, "{K}", 0, INV_OK, 0, NULL},
    {"persist", "SET {K} v;PEXPIRE {K} 500000", "PERSIST {K}", "{K}", NULL, 500, INV_DENIED_IF_TTL, 0, NULL},
    {"rename", "SET {K2} v", "RENAME {K2} {K}", "{K}", "{K2}", 0, INV_OK, 0, NULL},
    {"rename", "SET {K2} v;PEXPIRE {K2} 100000", "RENAME {K2} {K}", "{K}", "{K2}", 100, INV_OK, 0, NULL},
    {"rename", "SET {K2} v;SET {K} old;PEXPIRE {K} 100000", "RENAME {K2} {K}", "{K}", "{K2}", 0, INV_OK, 0, NULL},
    {"renamenx", "SET {K2} v", "RENAMENX {K2} {K}", "{K}", "{K2}", 0, INV_OK, 0, NULL},
    {"copy", "SET {K2} v", "COPY {K2} {K}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"copy", "SET {K2} v;PEXPIRE {K2} 100000", "COPY {K2} {K}", "{K}", NULL, 100, INV_OK, 0, NULL},
    {"copy", "SET {K2} v;SET {K} old", "COPY {K2} {K} REPLACE", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"move", "SET {K} v", "MOVE {K} 1", NULL, NULL, 0, INV_DENIED, 0,
     "keygate serves database 0 only (the key would leave the registry's reach): expected -DENIED"},
    {"restore", NULL, "RESTORE {K} 0 payload", NULL, "{K}", 0, INV_DENIED, 0, DENIED_REASON},
    {"restore-asking", NULL, "RESTORE-ASKING {K} 0 payload", NULL, "{K}", 0, INV_DENIED, 0, DENIED_REASON},
    {"migrate", "SET {K} v", "MIGRATE 127.0.0.1 1 {K} 0 100", NULL, NULL, 0, INV_DENIED, 0, DENIED_REASON},
    {"sort", "RPUSH {K2} 3 1 2", "SORT {K2} STORE {K}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"sort", "RPUSH {K2} c a b", "SORT {K2} ALPHA DESC LIMIT 0 2 STORE {K}", "{K}", NULL, 0, INV_OK, 0, NULL},
    /* ---- hashes ---- */
    {"hset", NULL, "HSET {K} a 1 b 2", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"hset", "HSET {K} a 1", "HSET {K} a 2 b 2", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"hset", "HSET {K} a 1;PEXPIRE {K} 100000", "HSET {K} b 2", "{K}", NULL, 100, INV_OK, 0, NULL}, /* never extended */
    {"hmset", NULL, "HMSET {K} a 1 b 2", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"hsetnx", NULL, "HSETNX {K} a 1", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"hincrby", "HSET {K} f 1", "HINCRBY {K} f 5", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"hincrbyfloat", NULL, "HINCRBYFLOAT {K} f 1.5", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"hdel", "HSET {K} a 1 b 2", "HDEL {K} a", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"hdel", "HSET {K} a 1", "HDEL {K} a", NULL, "{K}", 0, INV_OK, 0, NULL},
    /* ---- lists ---- */
    {"lpush", NULL, "LPUSH {K} a b c", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"rpush", NULL, "RPUSH {K} a b c", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"lpushx", "RPUSH {K} a", "LPUSHX {K} b", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"rpushx", "RPUSH {K} a", "RPUSHX {K} b", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"linsert", "RPUSH {K} a c", "LINSERT {K} BEFORE c b", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"lset", "RPUSH {K} a b", "LSET {K} 0 z", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"lrem", "RPUSH {K} a b a", "LREM {K} 1 a", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"ltrim", "RPUSH {K} a b c", "LTRIM {K} 0 1", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"lpop", "RPUSH {K} a b", "LPOP {K}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"lpop", "RPUSH {K} a", "LPOP {K}", NULL, "{K}", 0, INV_OK, 0, NULL},
    {"rpop", "RPUSH {K} a b c", "RPOP {K} 2", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"lmpop", "RPUSH {K} a b", "LMPOP 1 {K} LEFT", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"lmove", "RPUSH {K2} a b", "LMOVE {K2} {K} LEFT RIGHT", "{K} {K2}", NULL, 0, INV_OK, 0, NULL},
    {"lmove", "RPUSH {K} a b", "LMOVE {K} {K} LEFT RIGHT", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"lmove", "RPUSH {K2} a", "LMOVE {K2} {K} LEFT RIGHT", "{K}", "{K2}", 0, INV_OK, 0, NULL},
    {"rpoplpush", "RPUSH {K2} a b", "RPOPLPUSH {K2} {K}", "{K} {K2}", NULL, 0, INV_OK, 0, NULL},
    {"blmove", "RPUSH {K2} a b", "BLMOVE {K2} {K} LEFT RIGHT 1", "{K} {K2}", NULL, 0, INV_OK, INV_BLOCKING, NULL},
    {"brpoplpush", "RPUSH {K2} a b", "BRPOPLPUSH {K2} {K} 1", "{K} {K2}", NULL, 0, INV_OK, INV_BLOCKING, NULL},
    {"blpop", "RPUSH {K} a b", "BLPOP {K} 1", "{K}", NULL, 0, INV_OK, INV_BLOCKING, NULL},
    {"brpop", "RPUSH {K} a b", "BRPOP {K} 1", "{K}", NULL, 0, INV_OK, INV_BLOCKING, NULL},
    {"blmpop", "RPUSH {K} a b", "BLMPOP 1 1 {K} LEFT", "{K}", NULL, 0, INV_OK, INV_BLOCKING, NULL},
    /* ---- sets ---- */
    {"sadd", NULL, "SADD {K} a b c", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"srem", "SADD {K} a b", "SREM {K} a", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"spop", "SADD {K} a b c", "SPOP {K}", "{K}", NULL, 0, INV_OK, INV_NONDET, NULL},
    {"smove", "SADD {K2} a b", "SMOVE {K2} {K} a", "{K} {K2}", NULL, 0, INV_OK, 0, NULL},
    {"sunionstore", "SADD {K2} a b;SADD {K3} c", "SUNIONSTORE {K} {K2} {K3}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"sunionstore", "SADD {K2} a b;SADD {K} old;PEXPIRE {K} 100000", "SUNIONSTORE {K} {K2}", "{K}", NULL, 0, INV_OK, 0,
     NULL}, /* a *STORE replaces the destination: its old TTL is gone, D applies */
    {"sinterstore", "SADD {K2} a b;SADD {K3} b c", "SINTERSTORE {K} {K2} {K3}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"sdiffstore", "SADD {K2} a b c;SADD {K3} c", "SDIFFSTORE {K} {K2} {K3}", "{K}", NULL, 0, INV_OK, 0, NULL},
    /* ---- sorted sets ---- */
    {"zadd", NULL, "ZADD {K} 1 a 2 b", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"zincrby", NULL, "ZINCRBY {K} 2 a", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"zrem", "ZADD {K} 1 a 2 b", "ZREM {K} a", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"zremrangebylex", "ZADD {K} 0 a 0 b 0 c", "ZREMRANGEBYLEX {K} [a [a", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"zremrangebyrank", "ZADD {K} 1 a 2 b", "ZREMRANGEBYRANK {K} 0 0", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"zremrangebyscore", "ZADD {K} 1 a 2 b", "ZREMRANGEBYSCORE {K} 1 1", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"zpopmin", "ZADD {K} 1 a 2 b", "ZPOPMIN {K}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"zpopmax", "ZADD {K} 1 a 2 b", "ZPOPMAX {K}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"zpopmin", "ZADD {K} 1 a", "ZPOPMIN {K}", NULL, "{K}", 0, INV_OK, 0, NULL},
    {"zmpop", "ZADD {K} 1 a 2 b", "ZMPOP 1 {K} MIN", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"bzpopmin", "ZADD {K} 1 a 2 b", "BZPOPMIN {K} 1", "{K}", NULL, 0, INV_OK, INV_BLOCKING, NULL},
    {"bzpopmax", "ZADD {K} 1 a 2 b", "BZPOPMAX {K} 1", "{K}", NULL, 0, INV_OK, INV_BLOCKING, NULL},
    {"bzmpop", "ZADD {K} 1 a 2 b", "BZMPOP 1 1 {K} MIN", "{K}", NULL, 0, INV_OK, INV_BLOCKING, NULL},
    {"zunionstore", "ZADD {K2} 1 a;ZADD {K3} 2 b", "ZUNIONSTORE {K} 2 {K2} {K3}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"zinterstore", "ZADD {K2} 1 a 2 b;ZADD {K3} 2 b", "ZINTERSTORE {K} 2 {K2} {K3}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"zdiffstore", "ZADD {K2} 1 a 2 b;ZADD {K3} 2 b", "ZDIFFSTORE {K} 2 {K2} {K3}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"zrangestore", "ZADD {K2} 1 a 2 b 3 c", "ZRANGESTORE {K} {K2} 0 1", "{K}", NULL, 0, INV_OK, 0, NULL},
    /* ---- geo ---- */
    {"geoadd", NULL, "GEOADD {K} 13.361389 38.115556 Palermo", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"georadius", GEO_SRC, "GEORADIUS {K2} 15 37 200 km STORE {K}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"georadius", GEO_SRC, "GEORADIUS {K2} 15 37 200 km STOREDIST {K}", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"georadiusbymember", GEO_SRC, "GEORADIUSBYMEMBER {K2} Palermo 200 km STORE {K}", "{K}", NULL, 0, INV_OK, 0,
     NULL},
    {"geosearchstore", GEO_SRC, "GEOSEARCHSTORE {K} {K2} FROMLONLAT 15 37 BYRADIUS 200 km", "{K}", NULL, 0, INV_OK, 0,
     NULL},
    /* ---- streams ---- */
    {"xadd", NULL, "XADD {K} 1-1 f v", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"xadd", NULL, "XADD {K} MAXLEN 10 1-1 f v", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"xdel", "XADD {K} 1-1 f v;XADD {K} 2-1 f v", "XDEL {K} 1-1", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"xtrim", "XADD {K} 1-1 f v;XADD {K} 2-1 f v", "XTRIM {K} MAXLEN 1", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"xsetid", "XADD {K} 1-1 f v", "XSETID {K} 5-0", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"xgroup|create", NULL, "XGROUP CREATE {K} g $ MKSTREAM", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"xgroup|create", "XADD {K} 1-1 f v", "XGROUP CREATE {K} g 0", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"xgroup|createconsumer", STREAM_GROUP, "XGROUP CREATECONSUMER {K} g c", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"xgroup|delconsumer", STREAM_PENDING, "XGROUP DELCONSUMER {K} g c", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"xgroup|destroy", STREAM_GROUP, "XGROUP DESTROY {K} g", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"xgroup|setid", STREAM_GROUP, "XGROUP SETID {K} g 0", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"xreadgroup", STREAM_GROUP, "XREADGROUP GROUP g c COUNT 1 STREAMS {K} >", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"xack", STREAM_PENDING, "XACK {K} g 1-1", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"xclaim", STREAM_PENDING, "XCLAIM {K} g c2 0 1-1", "{K}", NULL, 0, INV_OK, 0, NULL},
    {"xautoclaim", STREAM_PENDING, "XAUTOCLAIM {K} g c2 0 0-0", "{K}", NULL, 0, INV_OK, 0, NULL},
};
/* clang-format on */

static const unsigned ttl_invocations_len = sizeof ttl_invocations / sizeof ttl_invocations[0];

/* ---- helpers shared by both tests (static inline: header-only, no unused warnings) ---- */

/* The concrete values of the placeholders for one row. */
struct inv_values {
    const char *k[3];     /* {K} {K2} {K3} */
    char at[24], pat[24]; /* {AT} {PAT} */
};

#define INV_MAX_ARGS 32
#define INV_MAX_CMDS 8

/* One command of a row with its placeholders substituted. */
struct inv_cmd {
    int argc;
    const char *argv[INV_MAX_ARGS];
    size_t argvlen[INV_MAX_ARGS];
    char store[1024];
};

/* The value of one token: a placeholder's value, or the token itself (copied into *store). */
static inline const char *inv_token_value(const char *tok, size_t len, const struct inv_values *v)
{
    static const char *const names[] = {"{K}", "{K2}", "{K3}", "{AT}", "{PAT}"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (len == strlen(names[i]) && memcmp(tok, names[i], len) == 0)
            return i < 3 ? v->k[i] : i == 3 ? v->at : v->pat;
    return NULL;
}

/*
 * Split text[0..len) on spaces into c, substituting placeholders.
 * Returns argc, or -1 when it does not fit or a placeholder has no value.
 */
static inline int inv_parse(const char *text, size_t len, const struct inv_values *v, struct inv_cmd *c)
{
    size_t used = 0, i = 0;
    c->argc = 0;
    while (i < len) {
        while (i < len && text[i] == ' ') i++;
        size_t start = i;
        while (i < len && text[i] != ' ') i++;
        if (i == start) break;
        size_t tl = i - start;
        const char *val = inv_token_value(text + start, tl, v);
        if (val == NULL && text[start] == '{') return -1; /* unknown placeholder */
        const char *src = val != NULL ? val : text + start;
        size_t sl = val != NULL ? strlen(val) : tl;
        if (src == NULL || c->argc == INV_MAX_ARGS || used + sl + 1 > sizeof c->store) return -1;
        memcpy(c->store + used, src, sl);
        c->store[used + sl] = '\0';
        c->argv[c->argc] = c->store + used;
        c->argvlen[c->argc] = sl;
        c->argc++;
        used += sl + 1;
    }
    return c->argc;
}

/* Split a `;`-separated setup into cmds; returns how many, or -1. */
static inline int inv_parse_setup(const char *setup, const struct inv_values *v, struct inv_cmd *cmds, int max)
{
    int n = 0;
    for (const char *p = setup; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ';');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (n == max || inv_parse(p, len, v, &cmds[n]) <= 0) return -1;
        n++;
        p = end != NULL ? end + 1 : NULL;
    }
    return n;
}

/* Does the command write and take at least one key (a key spec that is not NOT_KEY)? */
static inline int inv_is_write_with_key(const struct command_def *c)
{
    if (!(c->flags & CMD_WRITE)) return 0;
    for (int i = 0; i < c->nspecs; i++)
        if (!(c->specs[i].flags & KS_NOT_KEY)) return 1;
    return c->first_key > 0;
}

/* Rows for a command name: counts (exercised: not listed; listed: with a reason). */
static inline void inv_rows_for(const char *name, int *exercised, int *listed)
{
    *exercised = *listed = 0;
    for (unsigned i = 0; i < ttl_invocations_len; i++)
        if (strcmp(ttl_invocations[i].command, name) == 0) {
            if (ttl_invocations[i].listed != NULL)
                (*listed)++;
            else
                (*exercised)++;
        }
}

struct inv_coverage {
    int commands;  /* write+key commands (and subcommands) in command_table[] */
    int exercised; /* of those, with at least one exercised row */
    int listed;    /* of those, only listed with a reason */
    int blocking;  /* exercised through a non-blocking path (INV_BLOCKING rows) */
    int missing;   /* with no row at all: each is printed to `out` */
    int stray;     /* rows naming no write+key command of the table: printed to `out` */
    int rows;
};

/* Walk command_table[] (and subcommands) and the invocation table; print every gap to out. */
static inline void inv_coverage_check(FILE *out, struct inv_coverage *cov)
{
    memset(cov, 0, sizeof *cov);
    cov->rows = (int)ttl_invocations_len;
    for (size_t i = 0; i < command_table_len; i++) {
        const struct command_def *parent = &command_table[i];
        for (int j = -1; j < parent->nsubcommands; j++) {
            const struct command_def *c = j < 0 ? parent : &parent->subcommands[j];
            if (!inv_is_write_with_key(c)) continue;
            int ex, li;
            inv_rows_for(c->name, &ex, &li);
            cov->commands++;
            if (ex > 0) {
                cov->exercised++;
            } else if (li > 0) {
                cov->listed++;
            } else {
                cov->missing++;
                fprintf(out,
                        "ttl coverage: write command '%s' takes keys but has no row in "
                        "tests/integration/ttl_invocations.h (add a valid invocation, or list it with a reason)\n",
                        c->name);
            }
        }
    }
    for (unsigned i = 0; i < ttl_invocations_len; i++) {
        const struct command_def *c = command_by_name(ttl_invocations[i].command);
        if (c == NULL || !inv_is_write_with_key(c)) {
            cov->stray++;
            fprintf(out, "ttl coverage: row %u names '%s', which is not a write command with keys in command_table[]\n",
                    i, ttl_invocations[i].command);
        }
        if (ttl_invocations[i].flags & INV_BLOCKING) {
            int first = 1;
            for (unsigned j = 0; j < i; j++)
                if (strcmp(ttl_invocations[j].command, ttl_invocations[i].command) == 0) first = 0;
            cov->blocking += first;
        }
    }
}

#endif
