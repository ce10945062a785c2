/* test_commands.c: Check tests for the generated command table, lookup, arity and key extraction. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

#define MAX_ARGS 32

/* A command line split on spaces; the token "" stands for an empty argument, and the two
 * characters \0 inside a token for a NUL byte ("STORE\\0" in C source is S T O R E NUL). */
struct args {
    char buf[512];
    const char *argv[MAX_ARGS];
    size_t argvlen[MAX_ARGS];
    size_t argc;
};

static void args_split(struct args *a, const char *line)
{
    ck_assert_uint_lt(strlen(line), sizeof(a->buf));
    strcpy(a->buf, line);
    a->argc = 0;
    for (char *tok = strtok(a->buf, " "); tok; tok = strtok(NULL, " ")) {
        ck_assert_uint_lt(a->argc, MAX_ARGS);
        size_t len = strlen(tok);
        if (strcmp(tok, "\"\"") == 0) tok[0] = '\0', len = 0;
        for (size_t i = 0; i + 1 < len; i++) {
            if (tok[i] == '\\' && tok[i + 1] == '0') {
                tok[i] = '\0';
                memmove(tok + i + 1, tok + i + 2, len - i - 1); /* the terminator moves too */
                len--;
            }
        }
        a->argv[a->argc] = tok;
        a->argvlen[a->argc] = len;
        a->argc++;
    }
}

static const struct command_def *lookup(const char *line, int *unknown_sub)
{
    struct args a;
    args_split(&a, line);
    return command_lookup(a.argc, a.argv, a.argvlen, unknown_sub);
}

/*
 * Key positions of `line` as "1 3 5" in out (or "-1"); asserts the command exists
 * and, when want_incomplete >= 0, the incomplete flag. Flags of key i go to flags[i].
 */
static char last_error[256]; /* the error text of the last keys_of/keys_of_argv that gave -1 */

static int keys_of_argv(size_t argc, const char *const *argv, const size_t *argvlen, char *out, size_t outlen,
                        uint32_t *flags)
{
    struct key_ref refs[MAX_ARGS];
    int unknown = 0, incomplete = -1;
    const struct command_def *cmd = command_lookup(argc, argv, argvlen, &unknown);
    ck_assert_msg(cmd != NULL, "no command for '%s'", argv[0]);
    ck_assert_int_eq(unknown, 0);
    int n =
        command_find_keys_err(cmd, argc, argv, argvlen, refs, MAX_ARGS, &incomplete, last_error, sizeof(last_error));
    ck_assert_int_eq(incomplete, 0);
    /* the wrapper agrees */
    ck_assert_int_eq(command_find_keys(cmd, argc, argv, argvlen, refs, MAX_ARGS, NULL), n);
    out[0] = '\0';
    if (n < 0) {
        snprintf(out, outlen, "-1");
        return n;
    }
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        used += (size_t)snprintf(out + used, outlen - used, "%s%d", i ? " " : "", refs[i].index);
        if (flags) flags[i] = refs[i].flags;
    }
    return n;
}

static int keys_of(const char *line, char *out, size_t outlen, uint32_t *flags)
{
    struct args a;
    args_split(&a, line);
    return keys_of_argv(a.argc, a.argv, a.argvlen, out, outlen, flags);
}

/* `line` is refused (-1) with exactly Redis's error text `want`. */
#define ck_keys_err(line, want)                                                                                        \
    do {                                                                                                               \
        char got_[128];                                                                                                \
        keys_of((line), got_, sizeof(got_), NULL);                                                                     \
        ck_assert_msg(strcmp(got_, "-1") == 0, "%s: keys [%s], expected a refusal", (line), got_);                     \
        ck_assert_msg(strcmp(last_error, (want)) == 0, "%s: error '%s', expected '%s'", (line), last_error, (want));   \
    } while (0)

/* command_block_timeout_ms of `line`. */
static long long block_ms_of(const char *line)
{
    struct args a;
    args_split(&a, line);
    const struct command_def *cmd = command_lookup(a.argc, a.argv, a.argvlen, NULL);
    ck_assert_msg(cmd != NULL, "no command for '%s'", line);
    return (long long)command_block_timeout_ms(cmd, a.argc, a.argv, a.argvlen);
}

/* command_blocks of `line`. */
static int blocks_of(const char *line)
{
    struct args a;
    args_split(&a, line);
    const struct command_def *cmd = command_lookup(a.argc, a.argv, a.argvlen, NULL);
    ck_assert_msg(cmd != NULL, "no command for '%s'", line);
    return command_blocks(cmd, a.argc, a.argv, a.argvlen);
}

#define ck_keys(line, expect)                                                                                          \
    do {                                                                                                               \
        char got_[128];                                                                                                \
        keys_of((line), got_, sizeof(got_), NULL);                                                                     \
        ck_assert_msg(strcmp(got_, (expect)) == 0, "%s: keys [%s], expected [%s]", (line), got_, (expect));            \
    } while (0)

/* ---- table ---- */

START_TEST(test_table_size_and_order)
{
    ck_assert_uint_ge(command_table_len, 200);
    for (size_t i = 1; i < command_table_len; i++)
        ck_assert_msg(strcmp(command_table[i - 1].name, command_table[i].name) < 0, "%s !< %s",
                      command_table[i - 1].name, command_table[i].name);
}
END_TEST

START_TEST(test_table_entries_have_resp)
{
    for (size_t i = 0; i < command_table_len; i++) {
        const struct command_def *c = &command_table[i];
        ck_assert_msg(c->info_resp[0] == '*' && c->info_resp_len == strlen(c->info_resp), "%s", c->name);
        ck_assert_msg(c->docs_resp[0] == '$' && c->docs_resp_len == strlen(c->docs_resp), "%s", c->name);
        for (int j = 0; j < c->nsubcommands; j++) {
            const struct command_def *s = &c->subcommands[j];
            size_t plen = strlen(c->name);
            ck_assert_msg(strncmp(s->name, c->name, plen) == 0 && s->name[plen] == '|', "%s", s->name);
            ck_assert(s->info_resp[0] == '*' && s->info_resp_len > 0);
            if (j > 0) ck_assert(strcmp(c->subcommands[j - 1].name, s->name) < 0);
        }
    }
}
END_TEST

START_TEST(test_table_client_setname)
{
    const struct command_def *c = command_by_name("client|setname");
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->arity, 3);
    ck_assert_uint_gt(c->info_resp_len, 0);
    ck_assert_int_eq(c->info_resp[0], '*');
    const char *info = "*10\r\n$14\r\nclient|setname\r\n:3\r\n";
    const char *docs = "$14\r\nclient|setname\r\n*";
    ck_assert(strncmp(c->info_resp, info, strlen(info)) == 0);
    ck_assert(strncmp(c->docs_resp, docs, strlen(docs)) == 0);
}
END_TEST

START_TEST(test_table_flags_and_acl)
{
    const struct command_def *get = command_by_name("get");
    ck_assert_ptr_nonnull(get);
    ck_assert(get->flags & CMD_READONLY);
    ck_assert(get->flags & CMD_FAST);
    ck_assert(!(get->flags & CMD_WRITE));
    ck_assert(get->acl & ACL_READ);
    ck_assert(get->acl & ACL_STRING);
    ck_assert_int_eq(get->first_key, 1);
    ck_assert_int_eq(get->nspecs, 1);
    ck_assert_int_eq(get->specs[0].bs_type, BS_INDEX);
    ck_assert_int_eq(get->specs[0].fk_type, FK_RANGE);

    const struct command_def *blpop = command_by_name("blpop");
    ck_assert(blpop->flags & CMD_BLOCKING && blpop->flags & CMD_WRITE);

    const struct command_def *eval = command_by_name("eval");
    ck_assert(eval->flags & CMD_MOVABLE_KEYS);
    ck_assert_int_eq(eval->specs[0].fk_type, FK_KEYNUM);
    ck_assert_int_eq(eval->specs[0].fk_keynumidx, 0);
    ck_assert_int_eq(eval->specs[0].fk_firstkey, 1);

    const struct command_def *xread = command_by_name("xread");
    ck_assert_int_eq(xread->specs[0].bs_type, BS_KEYWORD);
    ck_assert_str_eq(xread->specs[0].bs_keyword, "STREAMS");
    ck_assert_int_eq(xread->specs[0].fk_limit, 2);
}
END_TEST

/* ---- lookup ---- */

START_TEST(test_lookup_case_insensitive)
{
    int unk = -1;
    const struct command_def *c = lookup("GeT k", &unk);
    ck_assert_ptr_nonnull(c);
    ck_assert_str_eq(c->name, "get");
    ck_assert_int_eq(unk, 0);
    ck_assert_str_eq(lookup("sort_RO k", NULL)->name, "sort_ro");
    ck_assert_str_eq(command_by_name("CLIENT|SetName")->name, "client|setname");
}
END_TEST

START_TEST(test_lookup_subcommand)
{
    int unk = -1;
    const struct command_def *c = lookup("client SETNAME foo", &unk);
    ck_assert_ptr_nonnull(c);
    ck_assert_str_eq(c->name, "client|setname");
    ck_assert_int_eq(unk, 0);
    ck_assert_str_eq(lookup("Object encoding k", &unk)->name, "object|encoding");
    ck_assert_str_eq(lookup("CONFIG get maxmemory", &unk)->name, "config|get");
    ck_assert_str_eq(lookup("client no-evict on", &unk)->name, "client|no-evict");
    ck_assert_str_eq(command_by_name("xinfo|stream")->name, "xinfo|stream");
}
END_TEST

START_TEST(test_lookup_unknown_command)
{
    int unk = -1;
    ck_assert_ptr_null(lookup("NOSUCHCOMMAND a b", &unk));
    ck_assert_int_eq(unk, 0);
    ck_assert_ptr_null(lookup("ge", &unk));
    ck_assert_ptr_null(lookup("gett", &unk));
    ck_assert_ptr_null(command_lookup(0, NULL, NULL, &unk));
    ck_assert_ptr_null(command_by_name("nosuch"));
    ck_assert_ptr_null(command_by_name("get|x"));
    ck_assert_ptr_null(command_by_name("client|nosuch"));

    /* argv is binary: an embedded NUL never matches */
    const char *argv[] = {"get\0x", "k"};
    size_t len[] = {5, 1};
    ck_assert_ptr_null(command_lookup(2, argv, len, &unk));
}
END_TEST

START_TEST(test_lookup_unknown_subcommand)
{
    int unk = 0;
    const struct command_def *c = lookup("CLIENT", &unk);
    ck_assert_ptr_nonnull(c);
    ck_assert_str_eq(c->name, "client");
    ck_assert_int_eq(unk, 1);
    unk = 0;
    c = lookup("client bogus x", &unk);
    ck_assert_str_eq(c->name, "client");
    ck_assert_int_eq(unk, 1);
    c = lookup("xinfo", &unk);
    ck_assert_str_eq(c->name, "xinfo");
    ck_assert_int_eq(unk, 1);
    /* a plain command never sets the flag */
    lookup("get k", &unk);
    ck_assert_int_eq(unk, 0);
}
END_TEST

START_TEST(test_lookup_argvlen_null)
{
    const char *argv[] = {"Client", "GetName"};
    const struct command_def *c = command_lookup(2, argv, NULL, NULL);
    ck_assert_ptr_nonnull(c);
    ck_assert_str_eq(c->name, "client|getname");
}
END_TEST

/* ---- arity ---- */

START_TEST(test_arity_exact)
{
    const struct command_def *get = command_by_name("get");
    ck_assert_int_eq(get->arity, 2);
    ck_assert(command_arity_ok(get, 2));
    ck_assert(!command_arity_ok(get, 1));
    ck_assert(!command_arity_ok(get, 3));
}
END_TEST

START_TEST(test_arity_variadic)
{
    const struct command_def *mset = command_by_name("mset");
    ck_assert_int_eq(mset->arity, -3);
    ck_assert(!command_arity_ok(mset, 2));
    ck_assert(command_arity_ok(mset, 3));
    ck_assert(command_arity_ok(mset, 5));
    const struct command_def *ping = command_by_name("ping");
    ck_assert(command_arity_ok(ping, 1));
    ck_assert(command_arity_ok(ping, 2));
}
END_TEST

START_TEST(test_arity_subcommand)
{
    /* subcommand arity counts the whole argv, parent name included */
    const struct command_def *c = lookup("CLIENT SETNAME foo", NULL);
    ck_assert(command_arity_ok(c, 3));
    ck_assert(!command_arity_ok(c, 2));
    ck_assert(!command_arity_ok(c, 4));
    c = lookup("CONFIG GET a b", NULL);
    ck_assert_int_eq(c->arity, -3);
    ck_assert(command_arity_ok(c, 4));
    ck_assert(!command_arity_ok(c, 2));
}
END_TEST

/* ---- key extraction ---- */

START_TEST(test_keys_index_range)
{
    uint32_t flags[MAX_ARGS];
    char got[64];
    ck_assert_int_eq(keys_of("GET k", got, sizeof(got), flags), 1);
    ck_assert_str_eq(got, "1");
    ck_assert_uint_eq(flags[0], KS_RO | KS_ACCESS);
    ck_keys("SET k v EX 10", "1");
    keys_of("SET k v", got, sizeof(got), flags);
    ck_assert(flags[0] & KS_RW || flags[0] & KS_OW);
}
END_TEST

START_TEST(test_keys_range_step)
{
    ck_keys("MSET a 1 b 2 c 3", "1 3 5");
    ck_keys("MSETNX a 1 b 2", "1 3");
    ck_keys("HSET h f v f2 v2", "1");
}
END_TEST

START_TEST(test_keys_range_to_last)
{
    ck_keys("MGET a b c", "1 2 3");
    ck_keys("DEL a", "1");
    ck_keys("DEL a b", "1 2");
    ck_keys("EXISTS a b c d", "1 2 3 4");
    ck_keys("SUNIONSTORE d a b", "1 2 3");
}
END_TEST

START_TEST(test_keys_keynum)
{
    ck_keys("EVAL script 2 k1 k2 arg", "3 4");
    ck_keys("EVALSHA sha 1 k1 arg", "3");
    ck_keys("EVAL script 0", "");
    ck_keys("EVAL script 0 arg", "");
    ck_keys("FCALL fn 2 a b x", "3 4");
    ck_keys("ZUNIONSTORE dst 2 a b WEIGHTS 1 2", "1 3 4");
    ck_keys("ZINTER 2 a b", "2 3");
    ck_keys("LMPOP 2 a b LEFT COUNT 3", "2 3");
    ck_keys("BLMPOP 0 2 a b LEFT", "3 4");
}
END_TEST

START_TEST(test_keys_keynum_past_argv)
{
    ck_keys("EVAL script 3 k1 k2", "-1");
    ck_keys("ZUNIONSTORE dst 5 a b", "-1");
    ck_keys("LMPOP 9 a LEFT", "-1");
    ck_keys("EVAL script notanumber k", "-1");
    ck_keys("EVAL script -1 k", "-1");
    ck_keys("EVAL script 01 k", "-1");
}
END_TEST

START_TEST(test_keys_keyword_limit)
{
    ck_keys("XREAD COUNT 2 STREAMS s1 s2 0 0", "4 5");
    ck_keys("xread block 0 streams s1 $", "4");
    ck_keys("XREADGROUP GROUP g c STREAMS s1 s2 > >", "5 6");
    ck_keys("XREADGROUP GROUP g c COUNT 1 NOACK STREAMS a >", "8");
    /* an odd count of ids after STREAMS is inconsistent */
    ck_keys("XREAD STREAMS s1", "-1");
}
END_TEST

START_TEST(test_keys_keyword_store)
{
    uint32_t flags[MAX_ARGS];
    char got[64];
    keys_of("GEORADIUS k 0 0 1 km STORE dst", got, sizeof(got), flags);
    ck_assert_str_eq(got, "1 7");
    ck_assert(flags[1] & KS_OW);
    ck_keys("GEORADIUS k 0 0 1 km WITHDIST", "1");
    ck_keys("GEORADIUS k 0 0 1 km STOREDIST d2", "1 7");
    ck_keys("GEORADIUS k 0 0 1 km STORE a STOREDIST b", "1 9");
    ck_keys("GEORADIUS k 0 0 1 km", "1");
    ck_keys("GEORADIUSBYMEMBER k m 1 km store x", "1 6");
    ck_keys("GEOSEARCHSTORE dst src FROMMEMBER m BYRADIUS 1 km", "1 2");
}
END_TEST

START_TEST(test_keys_sort)
{
    uint32_t flags[MAX_ARGS];
    char got[64];
    int incomplete = -1;
    ck_assert_int_eq(keys_of("SORT k BY w_* GET # GET o_*->f STORE dst", got, sizeof(got), flags), 2);
    ck_assert_str_eq(got, "1 9");
    ck_assert_uint_eq(flags[0], KS_RO | KS_ACCESS);
    ck_assert_uint_eq(flags[1], KS_OW | KS_UPDATE);
    ck_keys("SORT k", "1");
    ck_keys("sort k limit 0 10 desc alpha", "1");
    ck_keys("SORT k STORE a STORE b", "1 5");
    /* the STORE argument is taken by BY, as Redis's parser does */
    ck_keys("SORT k BY store", "1");
    ck_keys("SORT k BY store STORE d", "1 5");
    ck_keys("SORT_RO k BY w_* GET #", "1");
    /* Redis answers a syntax error: SORT_RO has no STORE, bad options, dangling STORE */
    ck_keys("SORT_RO k STORE d", "-1");
    ck_keys("SORT k NOSUCH", "-1");
    ck_keys("SORT k STORE", "-1");

    struct args a;
    struct key_ref refs[4];
    args_split(&a, "SORT k GET x");
    command_find_keys(lookup("SORT k", NULL), a.argc, a.argv, a.argvlen, refs, 4, &incomplete);
    ck_assert_int_eq(incomplete, 0);
}
END_TEST

START_TEST(test_keys_migrate)
{
    ck_keys("MIGRATE host 6379 k 0 5000", "3");
    ck_keys("MIGRATE host 6379 k 0 5000 COPY REPLACE", "3");
    ck_keys("MIGRATE host 6379 \"\" 0 5000 KEYS a b c", "7 8 9");
    ck_keys("MIGRATE host 6379 \"\" 0 5000 COPY AUTH pw KEYS a", "10");
    ck_keys("MIGRATE host 6379 \"\" 0 5000 AUTH2 u pw keys a b", "10 11");
    /* KEYS needs the empty key argument; unknown options are syntax errors */
    ck_keys("MIGRATE host 6379 k 0 5000 KEYS a", "-1");
    ck_keys("MIGRATE host 6379 k 0 5000 BOGUS", "-1");
}
END_TEST

START_TEST(test_keys_two_specs)
{
    uint32_t flags[MAX_ARGS];
    char got[64];
    keys_of("LMOVE src dst LEFT RIGHT", got, sizeof(got), flags);
    ck_assert_str_eq(got, "1 2");
    ck_assert(flags[0] & KS_DELETE);
    ck_assert(flags[1] & KS_INSERT);
    ck_keys("RENAME a b", "1 2");
    ck_keys("COPY a b DB 0 REPLACE", "1 2");
    ck_keys("SMOVE a b m", "1 2");
}
END_TEST

START_TEST(test_keys_bitop)
{
    uint32_t flags[MAX_ARGS];
    char got[64];
    keys_of("BITOP AND dst a b", got, sizeof(got), flags);
    ck_assert_str_eq(got, "2 3 4");
    ck_assert(flags[0] & KS_OW);
    ck_assert(flags[1] & KS_RO);
    ck_keys("BITOP NOT dst a", "2 3");
}
END_TEST

START_TEST(test_keys_subcommand)
{
    ck_keys("OBJECT ENCODING k", "2");
    ck_keys("object freq k", "2");
    ck_keys("XINFO STREAM s FULL", "2");
    ck_keys("MEMORY USAGE k SAMPLES 5", "2");
    ck_keys("CLIENT SETNAME x", "");
}
END_TEST

START_TEST(test_keys_none)
{
    char got[64];
    ck_assert_int_eq(keys_of("PING", got, sizeof(got), NULL), 0);
    ck_assert_int_eq(keys_of("PING hello", got, sizeof(got), NULL), 0);
    ck_assert_int_eq(keys_of("DBSIZE", got, sizeof(got), NULL), 0);
    /* pub/sub channels are NOT_KEY specs: skipped */
    ck_assert_int_eq(keys_of("SPUBLISH ch msg", got, sizeof(got), NULL), 0);
    ck_assert_int_eq(keys_of("PUBLISH ch msg", got, sizeof(got), NULL), 0);
}
END_TEST

START_TEST(test_keys_out_too_small)
{
    struct args a;
    struct key_ref refs[2];
    int incomplete = 0;
    args_split(&a, "MGET a b c");
    const struct command_def *c = command_lookup(a.argc, a.argv, a.argvlen, NULL);
    ck_assert_int_eq(command_find_keys(c, a.argc, a.argv, a.argvlen, refs, 2, &incomplete), 3);
    ck_assert_int_eq(refs[0].index, 1);
    ck_assert_int_eq(refs[1].index, 2);
    ck_assert_int_eq(command_find_keys(c, a.argc, a.argv, a.argvlen, NULL, 0, NULL), 3);
}
END_TEST

START_TEST(test_keys_incomplete_spec)
{
    /* a spec Redis reports as unknown, on a command without a hand-written finder */
    static const struct key_spec specs[] = {
        {.flags = KS_RO | KS_ACCESS,
         .bs_type = BS_INDEX,
         .bs_index = 1,
         .fk_type = FK_RANGE,
         .fk_lastkey = 0,
         .fk_keystep = 1},
        {.flags = KS_RW, .bs_type = BS_UNKNOWN, .fk_type = FK_UNKNOWN},
    };
    static const struct command_def fake = {.name = "fake", .arity = -2, .specs = specs, .nspecs = 2};
    const char *argv[] = {"fake", "k", "x"};
    struct key_ref refs[4];
    int incomplete = 0;
    ck_assert_int_eq(command_find_keys(&fake, 3, argv, NULL, refs, 4, &incomplete), 1);
    ck_assert_int_eq(incomplete, 1);
    ck_assert_int_eq(refs[0].index, 1);
}
END_TEST

/* ---- issue 10: key extraction exactly as Redis executes the command ---- */

/* Redis's georadiusGeneric lets every STORE/STOREDIST override the one before. */
START_TEST(test_issue10_item1_georadius_last_store_wins)
{
    uint32_t flags[MAX_ARGS];
    char got[64];
    keys_of("GEORADIUS cache:geo 15 37 200 km STORE cache:ok STORE nope:evil", got, sizeof(got), flags);
    ck_assert_str_eq(got, "1 9");
    ck_assert(flags[1] & KS_OW);
    ck_keys("GEORADIUS k 15 37 200 km STOREDIST a STOREDIST b", "1 9");
    ck_keys("GEORADIUS k 15 37 200 km STORE a STOREDIST b", "1 9");
    ck_keys("GEORADIUS k 15 37 200 km STOREDIST a STORE b", "1 9");
    ck_keys("GEORADIUS k 15 37 200 km STORE a COUNT 2 ASC STORE b", "1 12");
    ck_keys("GEORADIUSBYMEMBER k m 200 km STORE a STORE b", "1 8");
    ck_keys("georadiusbymember k m 200 km storedist a count 3 any store b", "1 11");
    /* a value named STORE is a value: COUNT takes one, STORE takes one */
    ck_keys("GEORADIUS k 15 37 200 km STORE STORE", "1 7");
    ck_keys("GEORADIUS k 15 37 200 km STORE STORE STORE x", "1 9");
    /* the option walk fails where Redis's does */
    ck_keys_err("GEORADIUS k 15 37 200 km STORE a STORE", "ERR syntax error");
    ck_keys_err("GEORADIUS k 15 37 200 km BOGUS STORE a", "ERR syntax error");
    ck_keys_err("GEORADIUS k 15 37 200 km COUNT STORE a", "ERR value is not an integer or out of range");
    ck_keys_err("GEORADIUS k 15 37 200 km COUNT 0 STORE a", "ERR COUNT must be > 0");
    ck_keys_err("GEORADIUS k 15 37 200 km STORE a WITHDIST",
                "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options");
    ck_keys_err("GEORADIUS k 15 37 200 km ANY", "ERR the ANY argument requires COUNT argument");
    ck_keys_err("GEORADIUS_RO k 15 37 200 km STORE a", "ERR syntax error");
    ck_keys("GEORADIUS_RO k 15 37 200 km WITHDIST COUNT 1 ANY", "1");
}
END_TEST

/* Redis compares option words with strcasecmp: "STORE\0" (and "sToRe\0x") is STORE. */
START_TEST(test_issue10_item2_nul_suffixed_option_words)
{
    ck_keys("GEORADIUS k 15 37 200 km STORE\\0 nope:nul", "1 7");
    ck_keys("GEORADIUS k 15 37 200 km sToRe\\0x nope:nul", "1 7");
    ck_keys("GEORADIUSBYMEMBER k m 200 km STOREDIST\\0 a", "1 6");
    ck_keys("XREAD BLOCK\\0 0 STREAMS\\0 s $", "4");
    ck_keys("XREADGROUP GROUP\\0 g c NOACK\\0 STREAMS s >", "6");
    ck_keys("SORT k LIMIT\\0 0 1 STORE\\0 d", "1 6");
    ck_keys("MIGRATE h 6379 \"\" 0 5000 COPY\\0 KEYS\\0 a b", "8 9");
    /* a NUL before the word's end is not the word */
    ck_keys_err("GEORADIUS k 15 37 200 km STO\\0RE a", "ERR syntax error");
    ck_assert_int_eq(blocks_of("XREAD BLOCK\\0 0 STREAMS cache:s $"), 1);
    ck_assert_int_eq(blocks_of("xread count 1 block\\0zz 10 streams s $"), 1);
}
END_TEST

/* xreadCommand: GROUP takes two values, so a group or consumer named STREAMS is a value. */
START_TEST(test_issue10_item3_xreadgroup_group_named_streams)
{
    ck_keys("XREADGROUP GROUP STREAMS c BLOCK 0 STREAMS q:s >", "7");
    ck_assert_int_eq(blocks_of("XREADGROUP GROUP STREAMS c BLOCK 0 STREAMS q:s >"), 1);
    /* COMMAND GETKEYS reports c and STREAMS here (its spec searches STREAMS from argv[4]) */
    ck_keys("XREADGROUP COUNT 1 GROUP STREAMS c STREAMS s >", "7");
    ck_keys("XREADGROUP GROUP g STREAMS STREAMS s >", "5");
    ck_keys("XREADGROUP GROUP STREAMS STREAMS STREAMS STREAMS >", "5");
    ck_keys("XREAD COUNT 1 STREAMS STREAMS 0", "4");
    ck_keys("XREAD BLOCK 0 COUNT 1 BLOCK 5 STREAMS a b 0 0", "8 9");
    ck_assert_int_eq(blocks_of("XREADGROUP GROUP BLOCK c STREAMS s >"), 0);
    ck_assert_int_eq(blocks_of("XREADGROUP GROUP g c COUNT 1 STREAMS BLOCK >"), 0);
    ck_assert_int_eq(blocks_of("XREAD COUNT 1 BLOCK 0 BLOCK 0 STREAMS s $"), 1);
    ck_assert_int_eq(blocks_of("XREAD COUNT 1 STREAMS s $"), 0);
    /* Redis refuses these, so they never block */
    ck_assert_int_eq(blocks_of("XREAD BLOCK 0 STREAMS s"), 0);
    ck_assert_int_eq(blocks_of("XREAD BLOCK -1 STREAMS s $"), 0);
    ck_assert_int_eq(blocks_of("XREAD BOGUS BLOCK 0 STREAMS s $"), 0);
    /* every other blocking command, and WAIT */
    ck_assert_int_eq(blocks_of("BLPOP k 0"), 1);
    ck_assert_int_eq(blocks_of("BZMPOP 0 1 k MIN"), 1);
    ck_assert_int_eq(blocks_of("WAIT 0 0"), 1);
    ck_assert_int_eq(blocks_of("GET k"), 0);
    ck_assert_int_eq(blocks_of("LMPOP 1 k LEFT"), 0);
}
END_TEST

/* Where Redis rejects the arguments that locate the keys, keygate has Redis's words. */
/* how long a blocking command may block, for backend-timeout (issue 12) */
START_TEST(block_timeouts_as_redis_reads_them)
{
    ck_assert_int_eq(block_ms_of("BLPOP a b 2.5"), 2500);
    ck_assert_int_eq(block_ms_of("BRPOP a 0"), 0);
    ck_assert_int_eq(block_ms_of("BLMOVE a b LEFT RIGHT 0.01"), 10);
    ck_assert_int_eq(block_ms_of("BRPOPLPUSH a b 3"), 3000);
    ck_assert_int_eq(block_ms_of("BZPOPMIN z 1"), 1000);
    ck_assert_int_eq(block_ms_of("BLMPOP 1.5 2 a b LEFT"), 1500);
    ck_assert_int_eq(block_ms_of("BZMPOP 4 1 z MIN COUNT 2"), 4000);
    ck_assert_int_eq(block_ms_of("XREAD BLOCK 250 STREAMS s $"), 250);
    ck_assert_int_eq(block_ms_of("XREADGROUP GROUP g c BLOCK 0 STREAMS s >"), 0);
    ck_assert_int_eq(block_ms_of("WAIT 1 700"), 700);
    ck_assert_int_eq(block_ms_of("WAIT 1 0"), 0);
    /* what Redis refuses at once blocks nobody: 0 */
    ck_assert_int_eq(block_ms_of("BLPOP a nope"), 0);
    ck_assert_int_eq(block_ms_of("BLPOP a -1"), 0);
    ck_assert_int_eq(block_ms_of("BLPOP a inf"), 0);
}
END_TEST

START_TEST(test_issue10_item18_key_count_error_texts)
{
    ck_keys_err("LMPOP -1 a LEFT", "ERR numkeys should be greater than 0");
    ck_keys_err("LMPOP 0 a LEFT", "ERR numkeys should be greater than 0");
    ck_keys_err("LMPOP 01 a LEFT", "ERR numkeys should be greater than 0");
    ck_keys_err("LMPOP 2 a LEFT", "ERR syntax error");
    ck_keys_err("BLMPOP 0 x a LEFT", "ERR numkeys should be greater than 0");
    ck_keys_err("BLMPOP 0 3 a b LEFT", "ERR syntax error");
    ck_keys_err("ZMPOP -1 a MIN", "ERR numkeys should be greater than 0");
    ck_keys_err("BZMPOP 0 2 a MIN", "ERR syntax error");
    ck_keys_err("SINTERCARD 0 a", "ERR numkeys should be greater than 0");
    ck_keys_err("SINTERCARD 3 a b", "ERR Number of keys can't be greater than number of args");
    ck_keys_err("ZUNIONSTORE d 0 a", "ERR at least 1 input key is needed for 'zunionstore' command");
    ck_keys_err("ZINTER -1 a", "ERR at least 1 input key is needed for 'zinter' command");
    ck_keys_err("ZINTERCARD 0 a", "ERR at least 1 input key is needed for 'zintercard' command");
    ck_keys_err("ZDIFFSTORE d x a", "ERR value is not an integer or out of range");
    ck_keys_err("ZUNION 3 a b", "ERR syntax error");
    ck_keys_err("EVAL s -1", "ERR Number of keys can't be negative");
    ck_keys_err("EVAL s 2 a", "ERR Number of keys can't be greater than number of args");
    ck_keys_err("EVAL s 01 a", "ERR value is not an integer or out of range");
    ck_keys_err("EVAL_RO s x a", "ERR value is not an integer or out of range");
    ck_keys_err("FCALL f x a", "ERR Bad number of keys provided");
    ck_keys_err("FCALL_RO f 3 a", "ERR Number of keys can't be greater than number of args");
    ck_keys_err("EVALSHA abc -1", "NOSCRIPT No matching script. Please use EVAL.");
    ck_keys_err("EVALSHA 0123456789012345678901234567890123456789 -1", "ERR Number of keys can't be negative");
    ck_keys_err("XREAD COUNT 1 STREAMS a",
                "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.");
    ck_keys_err("XREAD COUNT x STREAMS a 0", "ERR value is not an integer or out of range");
    ck_keys_err("XREAD BLOCK x STREAMS a 0", "ERR timeout is not an integer or out of range");
    ck_keys_err("XREAD BLOCK -1 STREAMS a 0", "ERR timeout is negative");
    ck_keys_err("XREAD GROUP g c STREAMS a 0",
                "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.");
    ck_keys_err("XREAD NOACK STREAMS a 0",
                "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.");
    ck_keys_err("XREADGROUP COUNT 1 NOACK STREAMS a >", "ERR Missing GROUP option for XREADGROUP");
    ck_keys_err("XREAD COUNT 1 BLOCK 0 x", "ERR syntax error");
    ck_keys_err("SORT k LIMIT 0 x", "ERR value is not an integer or out of range");
    ck_keys_err("MIGRATE h 6379 k 0 5000 KEYS a",
                "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string");
    ck_keys_err("MIGRATE h 6379 \"\" 0 5000 AUTH2 u", "ERR syntax error");
    ck_keys_err("GET", "ERR wrong number of arguments for 'get' command");
    ck_keys_err("OBJECT ENCODING", "ERR wrong number of arguments for 'object|encoding' command");
    ck_keys_err("LMPOP 9223372036854775807 a LEFT", "ERR syntax error");
    ck_keys_err("EVAL s 9223372036854775807 a", "ERR Number of keys can't be greater than number of args");
    /* what Redis accepts is not refused */
    ck_keys("PFMERGE d", "1");                      /* COMMAND GETKEYS refuses it; Redis executes it */
    ck_keys("MIGRATE h 6379 \"\" 0 5000 KEYS", ""); /* Redis migrates nothing (+NOKEY) */
    ck_keys("EVAL s 0", "");
    ck_keys("FCALL f 1 a b", "3");
    ck_keys("LMPOP 1 a LEFT COUNT 0", "2"); /* COUNT is Redis's to refuse: the key is known */
    ck_keys("ZUNIONSTORE d 1 a b", "1 3");  /* likewise the stray option */
}
END_TEST

/* Every keyword and key-count spec of the table has a finder; a new one is refused, not guessed. */
START_TEST(test_keys_every_keyword_and_keynum_spec_is_known)
{
    static const char *const known[] = {
        "blmpop",     "bzmpop",      "eval",       "eval_ro",    "evalsha",
        "evalsha_ro", "fcall",       "fcall_ro",   "georadius",  "georadiusbymember",
        "lmpop",      "migrate",     "sintercard", "sort",       "sort_ro",
        "xread",      "xreadgroup",  "zdiff",      "zdiffstore", "zinter",
        "zintercard", "zinterstore", "zmpop",      "zunion",     "zunionstore",
    };
    size_t found = 0;
    for (size_t i = 0; i < command_table_len; i++) {
        const struct command_def *c = &command_table[i];
        int special = 0;
        for (int j = 0; j < c->nspecs; j++) {
            const struct key_spec *ks = &c->specs[j];
            if (ks->bs_type != BS_INDEX || ks->fk_type != FK_RANGE || (ks->flags & KS_INCOMPLETE)) special = 1;
        }
        for (int j = 0; j < c->nsubcommands; j++) {
            for (int k = 0; k < c->subcommands[j].nspecs; k++)
                ck_assert_msg(c->subcommands[j].specs[k].bs_type == BS_INDEX &&
                                  c->subcommands[j].specs[k].fk_type == FK_RANGE,
                              "%s: a subcommand with a special spec", c->subcommands[j].name);
        }
        if (!special) continue;
        int listed = 0;
        for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) listed |= strcmp(known[k], c->name) == 0;
        ck_assert_msg(listed, "%s has a keyword/keynum/unknown spec but no hand-written finder", c->name);
        found++;
    }
    ck_assert_uint_eq(found, sizeof(known) / sizeof(known[0]));

    static const struct key_spec specs[] = {
        {.flags = KS_RW,
         .bs_type = BS_KEYWORD,
         .bs_keyword = "INTO",
         .bs_startfrom = 1,
         .fk_type = FK_RANGE,
         .fk_lastkey = 0,
         .fk_keystep = 1},
    };
    static const struct command_def fake = {.name = "fake", .arity = -2, .specs = specs, .nspecs = 1};
    const char *argv[] = {"fake", "INTO", "k"};
    int incomplete = 0;
    ck_assert_int_eq(command_find_keys(&fake, 3, argv, NULL, NULL, 0, &incomplete), 0);
    ck_assert_int_eq(incomplete, 1);
}
END_TEST

START_TEST(test_hand_written_finders_are_sorted_for_their_binary_search)
{
    ck_assert(command_finders_sorted());
}
END_TEST

/* COMMAND GETKEYS of `line` as "k1 k2" (the keys' bytes, flags as hex after '/' when with_flags), or the error. */
static const char *getkeys_of(const char *line, int with_flags)
{
    static char out[512];
    struct args a;
    struct key_ref refs[MAX_ARGS];
    const char *error = NULL;
    args_split(&a, line);
    int n = command_getkeys(a.argc, a.argv, a.argvlen, refs, MAX_ARGS, &error);
    if (n < 0) return error;
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n && i < MAX_ARGS; i++) {
        used += (size_t)snprintf(out + used, sizeof(out) - used, "%s%.*s", i ? " " : "", (int)a.argvlen[refs[i].index],
                                 a.argv[refs[i].index]);
        if (with_flags) used += (size_t)snprintf(out + used, sizeof(out) - used, "/%x", refs[i].flags);
    }
    return out;
}

/* Issue 19: COMMAND GETKEYS answers what Redis 7.0.15's does (checked byte for byte against a live
 * server by test_getkeys), also where that is not what execution touches. */
START_TEST(test_issue19_getkeys_is_redis_getkeys)
{
    ck_assert_str_eq(getkeys_of("GET k", 0), "k");
    ck_assert_str_eq(getkeys_of("MSET a 1 b 2", 0), "a b");
    ck_assert_str_eq(getkeys_of("nosuch k", 0), "ERR Invalid command specified");
    ck_assert_str_eq(getkeys_of("CLIENT nosuch", 0), "ERR Invalid command specified");
    ck_assert_str_eq(getkeys_of("CLIENT", 0), "ERR The command has no key arguments");
    ck_assert_str_eq(getkeys_of("PING x", 0), "ERR The command has no key arguments");
    ck_assert_str_eq(getkeys_of("GET a b", 0), "ERR Invalid number of arguments specified for command");
    ck_assert_str_eq(getkeys_of("PFMERGE d", 0), "ERR Invalid arguments specified for command");
    ck_assert_str_eq(getkeys_of("EVAL s 0", 0), ""); /* no keys, and EVAL's are optional: [] */
    ck_assert_str_eq(getkeys_of("EVAL s 5 a", 0), "");
    ck_assert_str_eq(getkeys_of("EVAL s 1 a b", 1), "a/32");          /* the spec's RW access update */
    ck_assert_str_eq(getkeys_of("ZUNIONSTORE d 1x a", 1), "a/0 d/0"); /* atoi's procedure: dest last, no flags */
    ck_assert_str_eq(getkeys_of("ZUNIONSTORE d 1 a", 1), "d/24 a/11");
    ck_assert_str_eq(getkeys_of("SET k v", 1), "k/24");             /* OW update */
    ck_assert_str_eq(getkeys_of("SET k v GET", 1), "k/32");         /* RW access update */
    ck_assert_str_eq(getkeys_of("BITFIELD k GET u8 0", 1), "k/11"); /* RO access */
    ck_assert_str_eq(getkeys_of("BITFIELD k INCRBY u8 0 1", 1), "k/32");
    ck_assert_str_eq(getkeys_of("SORT k STORE STORE BY p", 0), "k BY");            /* not execution's "k STORE" */
    ck_assert_str_eq(getkeys_of("GEORADIUS k 1 1 1 m STORE a STORE b", 0), "k a"); /* the first STORE's spec */
    ck_assert_str_eq(getkeys_of("XREAD STREAMS a b c", 0), "a");
    ck_assert_str_eq(getkeys_of("MIGRATE h p \"\" 0 5000 KEYS", 0), "");
    ck_assert_str_eq(getkeys_of("OBJECT FREQ k", 0), "k");
    ck_assert_str_eq(getkeys_of("get k", 0), "k");
}
END_TEST

static Suite *commands_suite(void)
{
    Suite *s = suite_create("commands");
    TCase *t = tcase_create("table");
    tcase_add_test(t, test_table_size_and_order);
    tcase_add_test(t, test_table_entries_have_resp);
    tcase_add_test(t, test_table_client_setname);
    tcase_add_test(t, test_table_flags_and_acl);
    suite_add_tcase(s, t);

    t = tcase_create("lookup");
    tcase_add_test(t, test_lookup_case_insensitive);
    tcase_add_test(t, test_lookup_subcommand);
    tcase_add_test(t, test_lookup_unknown_command);
    tcase_add_test(t, test_lookup_unknown_subcommand);
    tcase_add_test(t, test_lookup_argvlen_null);
    tcase_add_test(t, test_arity_exact);
    tcase_add_test(t, test_arity_variadic);
    tcase_add_test(t, test_arity_subcommand);
    suite_add_tcase(s, t);

    t = tcase_create("keys");
    tcase_add_test(t, test_keys_index_range);
    tcase_add_test(t, test_keys_range_step);
    tcase_add_test(t, test_keys_range_to_last);
    tcase_add_test(t, test_keys_keynum);
    tcase_add_test(t, test_keys_keynum_past_argv);
    tcase_add_test(t, test_keys_keyword_limit);
    tcase_add_test(t, test_keys_keyword_store);
    tcase_add_test(t, test_keys_sort);
    tcase_add_test(t, test_keys_migrate);
    tcase_add_test(t, test_keys_two_specs);
    tcase_add_test(t, test_keys_bitop);
    tcase_add_test(t, test_keys_subcommand);
    tcase_add_test(t, test_keys_none);
    tcase_add_test(t, test_keys_out_too_small);
    tcase_add_test(t, test_keys_incomplete_spec);
    tcase_add_test(t, test_keys_every_keyword_and_keynum_spec_is_known);
    tcase_add_test(t, test_hand_written_finders_are_sorted_for_their_binary_search);
    suite_add_tcase(s, t);

    t = tcase_create("issue10");
    tcase_add_test(t, test_issue10_item1_georadius_last_store_wins);
    tcase_add_test(t, test_issue10_item2_nul_suffixed_option_words);
    tcase_add_test(t, test_issue10_item3_xreadgroup_group_named_streams);
    tcase_add_test(t, test_issue10_item18_key_count_error_texts);
    tcase_add_test(t, block_timeouts_as_redis_reads_them);
    tcase_add_test(t, test_issue19_getkeys_is_redis_getkeys);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(commands_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
