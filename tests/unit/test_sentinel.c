/* test_sentinel.c: unit tests for sentinel.c: real get-master-addr-by-name, ROLE, SENTINEL REPLICAS replies and event messages of redis-server 7.0 sentinels, and malformed ones. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sentinel.h"
#include "sentinelwatch.h"
#include "sentinel_replies.h"

/* A char array (a fixture, a literal) as (pointer, length without the final NUL). */
#define BYTES(a) (a), (sizeof(a) - 1)

static void addr_is(const struct sentinel_addr *a, const char *host, int port)
{
    ck_assert_str_eq(a->host, host);
    ck_assert_int_eq(a->port, port);
}

/* The payload of a real pub/sub message, NUL-terminated into buf; its channel must be want. */
static size_t payload_of(const char *msg, size_t len, const char *want_channel, char *buf, size_t cap)
{
    const char *ch, *pl;
    size_t chn, pln;
    ck_assert_int_eq(sentinel_parse_message(msg, len, &ch, &chn, &pl, &pln), 1);
    ck_assert_int_eq(chn, strlen(want_channel));
    ck_assert(memcmp(ch, want_channel, chn) == 0);
    ck_assert_uint_lt(pln, cap);
    memcpy(buf, pl, pln);
    buf[pln] = '\0';
    return pln;
}

/* ---------------------------------------------------------------------------------------------
 * SENTINEL get-master-addr-by-name
 * ------------------------------------------------------------------------------------------- */

/* SENTINEL MASTER: a real reply; no such master; malformed ones */
START_TEST(master_real)
{
    struct sentinel_master m;
    char err[200];
    ck_assert_int_eq(sentinel_parse_master(master_reply, strlen(master_reply), &m, err, sizeof err), 1);
    ck_assert_str_eq(m.addr.host, "127.0.0.1");
    ck_assert_int_eq(m.addr.port, 21325);
    ck_assert_int_eq(m.config_epoch, 2);
    ck_assert_int_eq(m.down_after_ms, 1000);
    ck_assert_int_eq(m.failover_timeout_ms, 5000);
    ck_assert_uint_eq(m.flags, sentinel_parse_flags("master", 6));
    ck_assert_int_eq(sentinel_parse_master(master_unknown_reply, strlen(master_unknown_reply), &m, err, sizeof err), 0);
    static const char noip[] = "*2\r\n$4\r\nport\r\n$4\r\n7411\r\n", odd[] = "*1\r\n$2\r\nip\r\n",
                      noauth[] = "-NOAUTH Authentication required.\r\n";
    ck_assert_int_eq(sentinel_parse_master(noip, strlen(noip), &m, err, sizeof err), -1);
    ck_assert_int_eq(sentinel_parse_master(odd, strlen(odd), &m, err, sizeof err), -1);
    ck_assert_int_eq(sentinel_parse_master(noauth, strlen(noauth), &m, err, sizeof err), -1);
    ck_assert_int_eq(sentinel_parse_master(master_reply, strlen(master_reply) - 4, &m, err, sizeof err), -1);
}
END_TEST

static struct sentinel_master answer(const char *host, int port, long long epoch)
{
    struct sentinel_master m = {.addr.port = port, .config_epoch = epoch};
    snprintf(m.addr.host, sizeof m.addr.host, "%s", host);
    return m;
}

/* sentinel_pick: the highest config-epoch wins, then the most named address; an epoch below the
 * one followed only when most of the configured sentinels say it */
START_TEST(pick_rule)
{
    struct sentinel_master a[4];
    /* a stale sentinel first: the old primary at epoch 3; two others name the new one at epoch 4 */
    a[0] = answer("10.0.0.1", 6379, 3), a[1] = answer("10.0.0.2", 6379, 4), a[2] = answer("10.0.0.2", 6379, 4);
    ck_assert_int_eq(sentinel_pick(a, 3, 3, 3), 1);
    ck_assert_int_eq(sentinel_pick(a, 3, -1, 3), 1);
    /* only the stale one answers, once epoch 4 was followed: nothing to follow */
    ck_assert_int_eq(sentinel_pick(a, 1, 4, 3), -1);
    /* ... and before anything was followed, it is all there is */
    ck_assert_int_eq(sentinel_pick(a, 1, -1, 3), 0);
    /* the master removed and monitored again: epoch 0 everywhere, another address; most of the
     * configured sentinels say it (2 of 3), so it is followed; one of 3 is not enough */
    a[0] = answer("10.0.0.9", 6379, 0), a[1] = answer("10.0.0.9", 6379, 0);
    ck_assert_int_eq(sentinel_pick(a, 2, 4, 3), 0);
    ck_assert_int_eq(sentinel_pick(a, 1, 4, 3), -1);
    ck_assert_int_eq(sentinel_pick(a, 1, 4, 1), 0); /* the only sentinel configured */
    /* the epoch followed, naming another address (a reconfiguration at the same epoch): followed */
    a[0] = answer("10.0.0.7", 6379, 4);
    ck_assert_int_eq(sentinel_pick(a, 1, 4, 3), 0);
    /* one epoch, two addresses: the most named; a tie goes to the first */
    a[0] = answer("h1", 1, 7), a[1] = answer("h2", 2, 7), a[2] = answer("h2", 2, 7), a[3] = answer("h1", 1, 7);
    ck_assert_int_eq(sentinel_pick(a, 3, -1, 4), 1);
    ck_assert_int_eq(sentinel_pick(a, 4, -1, 4), 0);
    /* no epoch in the answers (-1): followed when nothing newer was */
    a[0] = answer("h1", 1, -1);
    ck_assert_int_eq(sentinel_pick(a, 1, -1, 1), 0);
    ck_assert_int_eq(sentinel_pick(a, 0, -1, 1), -1);
}
END_TEST

/* failover-hold against the sentinels' down-after-milliseconds plus an election */
START_TEST(hold_short_rule)
{
    ck_assert_int_eq(sentinelwatch_hold_short(5000, 30000), 1); /* Sentinel's default down-after: 30 s */
    ck_assert_int_eq(sentinelwatch_hold_short(2000, 1000), 1);
    ck_assert_int_eq(sentinelwatch_hold_short(3000, 1000), 0);
    ck_assert_int_eq(sentinelwatch_hold_short(35000, 30000), 0);
    ck_assert_int_eq(sentinelwatch_hold_short(5000, -1), 0); /* unknown: nothing to say */
}
END_TEST

START_TEST(master_addr_real)
{
    struct sentinel_addr a;
    char err[128];
    ck_assert_int_eq(sentinel_parse_master_addr(BYTES(addr_reply), &a, err, sizeof err), 1);
    addr_is(&a, "127.0.0.1", 21325);
}
END_TEST

START_TEST(master_addr_unknown_master)
{
    struct sentinel_addr a = {"unchanged", 7};
    char err[128];
    ck_assert_int_eq(sentinel_parse_master_addr(BYTES(addr_unknown_reply), &a, err, sizeof err), 0);
    ck_assert_int_eq(sentinel_parse_master_addr(BYTES("$-1\r\n"), &a, err, sizeof err), 0); /* before 7.0 */
    addr_is(&a, "unchanged", 7);
}
END_TEST

START_TEST(master_addr_errors)
{
    struct sentinel_addr a = {"unchanged", 7};
    char err[128];
    ck_assert_int_eq(sentinel_parse_master_addr(BYTES(addr_noauth_reply), &a, err, sizeof err), -1);
    ck_assert_str_eq(err, "SENTINEL get-master-addr-by-name: NOAUTH Authentication required.");
    static const char *const bad[] = {
        "+OK\r\n",
        ":1\r\n",
        "*0\r\n",
        "*1\r\n$9\r\n127.0.0.1\r\n",
        "*3\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n$1\r\nx\r\n",
        "*2\r\n$9\r\n127.0.0.1\r\n:6379\r\n",             /* port as an integer */
        "*2\r\n$9\r\n127.0.0.1\r\n$1\r\n0\r\n",           /* port 0 */
        "*2\r\n$9\r\n127.0.0.1\r\n$5\r\n65536\r\n",       /* port too big */
        "*2\r\n$9\r\n127.0.0.1\r\n$2\r\n-1\r\n",          /* negative */
        "*2\r\n$9\r\n127.0.0.1\r\n$3\r\n1x2\r\n",         /* not a number */
        "*2\r\n$9\r\n127.0.0.1\r\n$0\r\n\r\n",            /* empty port */
        "*2\r\n$0\r\n\r\n$4\r\n6379\r\n",                 /* empty host */
        "*2\r\n$-1\r\n$4\r\n6379\r\n",                    /* null host */
        "*2\r\n$9\r\n127.0 0.1\r\n$4\r\n6379\r\n",        /* a space in the host */
        "*2\r\n$9\r\n127.0\r0.1\r\n$4\r\n6379\r\n",       /* a CR in the host */
        "*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n+OK\r\n", /* trailing bytes */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ck_assert_msg(sentinel_parse_master_addr(bad[i], strlen(bad[i]), &a, err, sizeof err) == -1, "case %zu", i);
        ck_assert_msg(strncmp(err, "SENTINEL get-master-addr-by-name: ", 34) == 0, "case %zu: %s", i, err);
    }
    /* a host of 256 bytes does not fit SENTINEL_HOST_MAX; 255 does */
    char reply[600], host[300];
    memset(host, 'h', sizeof host);
    for (int n = 255; n <= 256; n++) {
        int len = snprintf(reply, sizeof reply, "*2\r\n$%d\r\n%.*s\r\n$4\r\n6379\r\n", n, n, host);
        ck_assert_int_eq(sentinel_parse_master_addr(reply, (size_t)len, &a, err, sizeof err), n == 255 ? 1 : -1);
    }
}
END_TEST

/* Every proper prefix of a whole reply is refused: nothing is read past len. */
START_TEST(truncated_replies)
{
    static const struct {
        const char *reply;
        size_t len;
    } all[] = {{BYTES(addr_reply)},           {BYTES(role_primary_reply)}, {BYTES(role_replica_reply)},
               {BYTES(role_sentinel_reply)},  {BYTES(replicas_reply)},     {BYTES(replicas_after_kill_reply)},
               {BYTES(switch_master_message)}};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        for (size_t n = 0; n < all[k].len; n++) {
            char *copy = malloc(n + 1); /* exactly n bytes readable (ASan finds an overread) */
            ck_assert_ptr_nonnull(copy);
            memcpy(copy, all[k].reply, n);
            struct sentinel_addr a;
            struct sentinel_role role;
            struct sentinel_replica reps[4];
            int count;
            const char *ch, *pl;
            size_t chn, pln;
            ck_assert_int_eq(sentinel_parse_master_addr(copy, n, &a, NULL, 0), -1);
            ck_assert_int_eq(sentinel_parse_role(copy, n, &role, NULL, 0), -1);
            ck_assert_int_eq(sentinel_parse_replicas(copy, n, reps, 4, &count, NULL, 0), -1);
            ck_assert_int_eq(sentinel_parse_message(copy, n, &ch, &chn, &pl, &pln), 0);
            free(copy);
        }
    }
}
END_TEST

START_TEST(small_error_buffers)
{
    struct sentinel_role role;
    char err[5];
    memset(err, 'x', sizeof err);
    ck_assert_int_eq(sentinel_parse_role(BYTES("+OK\r\n"), &role, err, sizeof err), -1);
    ck_assert_str_eq(err, "ROLE"); /* cut, NUL-terminated */
    ck_assert_int_eq(sentinel_parse_role(BYTES("+OK\r\n"), &role, err, 0), -1);
    ck_assert_int_eq(sentinel_parse_role(BYTES("+OK\r\n"), &role, NULL, 0), -1);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * ROLE
 * ------------------------------------------------------------------------------------------- */

START_TEST(role_primary_real)
{
    struct sentinel_role r;
    char err[128];
    ck_assert_int_eq(sentinel_parse_role(BYTES(role_primary_reply), &r, err, sizeof err), 0);
    ck_assert_int_eq(r.kind, SENTINEL_ROLE_PRIMARY);
    ck_assert_int_eq(r.offset, 431);
    ck_assert_int_eq(r.nreplicas, 2);
    addr_is(&r.replicas[0].addr, "127.0.0.1", 31588);
    ck_assert_int_eq(r.replicas[0].offset, 0);
    addr_is(&r.replicas[1].addr, "127.0.0.1", 21787);

    ck_assert_int_eq(sentinel_parse_role(BYTES(role_primary_later_reply), &r, err, sizeof err), 0);
    ck_assert_int_eq(r.kind, SENTINEL_ROLE_PRIMARY);
    ck_assert_int_eq(r.offset, 6798);
    ck_assert_int_eq(r.nreplicas, 2);
    addr_is(&r.replicas[0].addr, "127.0.0.1", 31588);
    ck_assert_int_eq(r.replicas[0].offset, 6798);
    addr_is(&r.replicas[1].addr, "127.0.0.1", 21325);
    ck_assert_int_eq(r.replicas[1].offset, 6390);

    ck_assert_int_eq(sentinel_parse_role(BYTES(role_primary_alone_reply), &r, err, sizeof err), 0);
    ck_assert_int_eq(r.kind, SENTINEL_ROLE_PRIMARY);
    ck_assert_int_eq(r.offset, 6957);
    ck_assert_int_eq(r.nreplicas, 0);
}
END_TEST

START_TEST(role_replica_real)
{
    struct sentinel_role r;
    char err[128];
    ck_assert_int_eq(sentinel_parse_role(BYTES(role_replica_reply), &r, err, sizeof err), 0);
    ck_assert_int_eq(r.kind, SENTINEL_ROLE_REPLICA);
    addr_is(&r.primary, "127.0.0.1", 21325);
    ck_assert_int_eq(r.link, SENTINEL_LINK_CONNECTED);
    ck_assert_int_eq(r.offset, 431);

    ck_assert_int_eq(sentinel_parse_role(BYTES(role_replica_connect_reply), &r, err, sizeof err), 0);
    ck_assert_int_eq(r.kind, SENTINEL_ROLE_REPLICA);
    addr_is(&r.primary, "127.0.0.1", 21787);
    ck_assert_int_eq(r.link, SENTINEL_LINK_CONNECT);
    ck_assert_int_eq(r.offset, -1);
}
END_TEST

START_TEST(role_replica_states)
{
    static const struct {
        const char *word;
        enum sentinel_link link;
    } states[] = {{"none", SENTINEL_LINK_NONE},
                  {"connect", SENTINEL_LINK_CONNECT},
                  {"connecting", SENTINEL_LINK_CONNECTING},
                  {"sync", SENTINEL_LINK_SYNC},
                  {"connected", SENTINEL_LINK_CONNECTED},
                  {"handshake", SENTINEL_LINK_UNKNOWN},
                  {"Connected", SENTINEL_LINK_UNKNOWN}};
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
        char reply[128];
        int len = snprintf(reply, sizeof reply, "*5\r\n$5\r\nslave\r\n$3\r\n::1\r\n:6379\r\n$%zu\r\n%s\r\n:12\r\n",
                           strlen(states[i].word), states[i].word);
        struct sentinel_role r;
        ck_assert_int_eq(sentinel_parse_role(reply, (size_t)len, &r, NULL, 0), 0);
        ck_assert_int_eq(r.link, states[i].link);
        addr_is(&r.primary, "::1", 6379);
        ck_assert_int_eq(r.offset, 12);
    }
}
END_TEST

START_TEST(role_sentinel_real)
{
    struct sentinel_role r;
    char err[128];
    ck_assert_int_eq(sentinel_parse_role(BYTES(role_sentinel_reply), &r, err, sizeof err), 0);
    ck_assert_int_eq(r.kind, SENTINEL_ROLE_SENTINEL);
    ck_assert_int_eq(r.nmasters, 1);
}
END_TEST

START_TEST(role_primary_many_replicas)
{
    /* 10 replicas listed: the first SENTINEL_ROLE_MAX_REPLICAS kept, all counted */
    char reply[2048];
    int len = snprintf(reply, sizeof reply, "*3\r\n$6\r\nmaster\r\n:5\r\n*10\r\n");
    for (int i = 0; i < 10; i++)
        len += snprintf(reply + len, sizeof reply - (size_t)len,
                        "*3\r\n$9\r\n127.0.0.1\r\n$4\r\n70%02d\r\n$1\r\n%d\r\n", i, i);
    struct sentinel_role r;
    ck_assert_int_eq(sentinel_parse_role(reply, (size_t)len, &r, NULL, 0), 0);
    ck_assert_int_eq(r.nreplicas, 10);
    for (int i = 0; i < SENTINEL_ROLE_MAX_REPLICAS; i++) {
        addr_is(&r.replicas[i].addr, "127.0.0.1", 7000 + i);
        ck_assert_int_eq(r.replicas[i].offset, i);
    }
}
END_TEST

START_TEST(role_malformed)
{
    static const struct {
        const char *reply, *err;
    } cases[] = {
        {"-LOADING Redis is loading the dataset in memory\r\n", "ROLE: LOADING Redis is loading the dataset in memory"},
        {"+OK\r\n", "ROLE: not an array starting with the role"},
        {"*0\r\n", "ROLE: not an array starting with the role"},
        {"*1\r\n:1\r\n", "ROLE: not an array starting with the role"},
        {"*1\r\n$7\r\nunknown\r\n", "ROLE: unknown role \"unknown\""},
        {"*2\r\n$6\r\nmaster\r\n:1\r\n", "ROLE: malformed master reply"},
        {"*3\r\n$6\r\nmaster\r\n$1\r\n1\r\n*0\r\n", "ROLE: malformed master reply"},
        {"*3\r\n$6\r\nmaster\r\n:1\r\n*1\r\n*2\r\n$1\r\nh\r\n$1\r\n1\r\n", "ROLE: malformed master reply"},
        {"*3\r\n$6\r\nmaster\r\n:1\r\n*1\r\n*3\r\n$1\r\nh\r\n$1\r\n0\r\n$1\r\n0\r\n", "ROLE: malformed master reply"},
        {"*3\r\n$6\r\nmaster\r\n:1\r\n*1\r\n*3\r\n$1\r\nh\r\n$1\r\n1\r\n$1\r\nx\r\n", "ROLE: malformed master reply"},
        {"*4\r\n$5\r\nslave\r\n$1\r\nh\r\n:1\r\n$9\r\nconnected\r\n", "ROLE: malformed slave reply"},
        {"*5\r\n$5\r\nslave\r\n$1\r\nh\r\n$1\r\n1\r\n$9\r\nconnected\r\n:0\r\n", "ROLE: malformed slave reply"},
        {"*5\r\n$5\r\nslave\r\n$1\r\nh\r\n:0\r\n$9\r\nconnected\r\n:0\r\n",
         "ROLE: bad primary address in a slave reply"},
        {"*5\r\n$5\r\nslave\r\n$0\r\n\r\n:1\r\n$9\r\nconnected\r\n:0\r\n",
         "ROLE: bad primary address in a slave reply"},
        {"*2\r\n$8\r\nsentinel\r\n$1\r\nm\r\n", "ROLE: malformed sentinel reply"},
        {"*2\r\n$8\r\nsentinel\r\n*1\r\n:1\r\n", "ROLE: malformed sentinel reply"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sentinel_role r;
        char err[128] = "";
        ck_assert_msg(sentinel_parse_role(cases[i].reply, strlen(cases[i].reply), &r, err, sizeof err) == -1,
                      "case %zu", i);
        ck_assert_msg(strcmp(err, cases[i].err) == 0, "case %zu: %s", i, err);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * SENTINEL REPLICAS and flags
 * ------------------------------------------------------------------------------------------- */

START_TEST(flags)
{
    ck_assert_uint_eq(sentinel_parse_flags("", 0), 0);
    ck_assert_uint_eq(sentinel_parse_flags("slave", 5), SENTINEL_FLAG_SLAVE);
    ck_assert_uint_eq(sentinel_parse_flags(BYTES("s_down,slave,disconnected")),
                      SENTINEL_FLAG_S_DOWN | SENTINEL_FLAG_SLAVE | SENTINEL_FLAG_DISCONNECTED);
    ck_assert_uint_eq(sentinel_parse_flags(BYTES("master,o_down,failover_in_progress,promoted,sentinel")),
                      SENTINEL_FLAG_MASTER | SENTINEL_FLAG_O_DOWN | SENTINEL_FLAG_FAILOVER | SENTINEL_FLAG_PROMOTED |
                          SENTINEL_FLAG_SENTINEL);
    ck_assert_uint_eq(sentinel_parse_flags(BYTES("slave,master_down")), SENTINEL_FLAG_SLAVE | SENTINEL_FLAG_OTHER);
    ck_assert_uint_eq(sentinel_parse_flags(BYTES(",,slave,")), SENTINEL_FLAG_SLAVE);
    ck_assert_uint_eq(sentinel_parse_flags(BYTES("slaves")), SENTINEL_FLAG_OTHER);
    /* only len bytes are read */
    ck_assert_uint_eq(sentinel_parse_flags("slave,s_down", 5), SENTINEL_FLAG_SLAVE);
}
END_TEST

START_TEST(replicas_real)
{
    struct sentinel_replica reps[4];
    int count = -1;
    char err[128];
    ck_assert_int_eq(sentinel_parse_replicas(BYTES(replicas_reply), reps, 4, &count, err, sizeof err), 0);
    ck_assert_int_eq(count, 2);
    addr_is(&reps[0].addr, "127.0.0.1", 21787);
    addr_is(&reps[1].addr, "127.0.0.1", 31588);
    for (int i = 0; i < 2; i++) {
        ck_assert_uint_eq(reps[i].flags, SENTINEL_FLAG_SLAVE);
        ck_assert_int_eq(reps[i].link_up, 1);
        addr_is(&reps[i].primary, "127.0.0.1", 21325);
        ck_assert_int_eq(reps[i].priority, 100);
        ck_assert_int_ge(reps[i].offset, 0);
    }
}
END_TEST

START_TEST(replicas_after_a_kill)
{
    struct sentinel_replica reps[4];
    int count = -1;
    char err[128];
    ck_assert_int_eq(sentinel_parse_replicas(BYTES(replicas_after_kill_reply), reps, 4, &count, err, sizeof err), 0);
    ck_assert_int_eq(count, 2);
    int dead = -1;
    for (int i = 0; i < 2; i++)
        if (reps[i].flags & SENTINEL_FLAG_S_DOWN) dead = i;
    ck_assert_int_ge(dead, 0);
    addr_is(&reps[dead].addr, "127.0.0.1", 21787);
    ck_assert_uint_eq(reps[dead].flags, SENTINEL_FLAG_S_DOWN | SENTINEL_FLAG_SLAVE | SENTINEL_FLAG_DISCONNECTED);
    const struct sentinel_replica *live = &reps[1 - dead];
    addr_is(&live->addr, "127.0.0.1", 31588);
    ck_assert_uint_eq(live->flags, SENTINEL_FLAG_SLAVE);
    addr_is(&live->primary, "127.0.0.1", 21325);
    ck_assert_int_eq(live->link_up, 1);
}
END_TEST

START_TEST(replicas_more_than_max)
{
    struct sentinel_replica reps[2];
    memset(reps, 0, sizeof reps);
    int count = -1;
    ck_assert_int_eq(sentinel_parse_replicas(BYTES(replicas_reply), reps, 1, &count, NULL, 0), 0);
    ck_assert_int_eq(count, 2);
    addr_is(&reps[0].addr, "127.0.0.1", 21787);
    ck_assert_int_eq(reps[1].addr.port, 0); /* untouched */
    ck_assert_int_eq(sentinel_parse_replicas(BYTES(replicas_reply), NULL, 0, &count, NULL, 0), 0);
    ck_assert_int_eq(count, 2);
    ck_assert_int_eq(sentinel_parse_replicas(BYTES("*0\r\n"), reps, 2, &count, NULL, 0), 0);
    ck_assert_int_eq(count, 0);
}
END_TEST

START_TEST(replicas_defaults)
{
    /* only ip, port and flags: the rest takes its defaults; an unknown field is skipped;
     * master-host "?" (no INFO yet) names no primary */
    static const char reply[] = "*1\r\n*10\r\n$2\r\nip\r\n$3\r\n::1\r\n$4\r\nport\r\n$4\r\n6380\r\n"
                                "$5\r\nflags\r\n$5\r\nslave\r\n$7\r\nfuture!\r\n$1\r\nx\r\n"
                                "$11\r\nmaster-host\r\n$1\r\n?\r\n";
    struct sentinel_replica r;
    int count;
    ck_assert_int_eq(sentinel_parse_replicas(BYTES(reply), &r, 1, &count, NULL, 0), 0);
    ck_assert_int_eq(count, 1);
    addr_is(&r.addr, "::1", 6380);
    ck_assert_uint_eq(r.flags, SENTINEL_FLAG_SLAVE);
    ck_assert_int_eq(r.link_up, 0);
    ck_assert_str_eq(r.primary.host, "");
    ck_assert_int_eq(r.primary.port, 0);
    ck_assert_int_eq(r.priority, -1);
    ck_assert_int_eq(r.offset, -1);
}
END_TEST

START_TEST(replicas_malformed)
{
    static const struct {
        const char *reply, *err;
    } cases[] = {
        {"-ERR No such master with that name\r\n", "SENTINEL REPLICAS: ERR No such master with that name"},
        {"$1\r\nx\r\n", "SENTINEL REPLICAS: not an array"},
        {"*1\r\n$1\r\nx\r\n", "SENTINEL REPLICAS: replica 0: a replica is not a flat map"},
        {"*1\r\n*1\r\n$2\r\nip\r\n", "SENTINEL REPLICAS: replica 0: a replica is not a flat map"},
        {"*1\r\n*2\r\n$2\r\nip\r\n:1\r\n", "SENTINEL REPLICAS: replica 0: a replica's field or value is not a string"},
        {"*1\r\n*4\r\n$2\r\nip\r\n$1\r\nh\r\n$4\r\nport\r\n$1\r\n1\r\n",
         "SENTINEL REPLICAS: replica 0: a replica without ip, port or flags"},
        {"*1\r\n*6\r\n$2\r\nip\r\n$1\r\nh\r\n$4\r\nport\r\n$1\r\n0\r\n$5\r\nflags\r\n$5\r\nslave\r\n",
         "SENTINEL REPLICAS: replica 0: a replica's ip or port is bad"},
        {"*1\r\n*6\r\n$2\r\nip\r\n$0\r\n\r\n$4\r\nport\r\n$1\r\n1\r\n$5\r\nflags\r\n$5\r\nslave\r\n",
         "SENTINEL REPLICAS: replica 0: a replica's ip or port is bad"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sentinel_replica r;
        int count = -7;
        char err[128] = "";
        ck_assert_msg(sentinel_parse_replicas(cases[i].reply, strlen(cases[i].reply), &r, 1, &count, err, sizeof err) ==
                          -1,
                      "case %zu", i);
        ck_assert_msg(strcmp(err, cases[i].err) == 0, "case %zu: %s", i, err);
        ck_assert_int_eq(count, -7);
    }
    /* real replies that are no SENTINEL REPLICAS answer */
    struct sentinel_replica r;
    int count;
    char err[128];
    ck_assert_int_eq(sentinel_parse_replicas(BYTES(replicas_unknown_reply), &r, 1, &count, err, sizeof err), -1);
    ck_assert_str_eq(err, "SENTINEL REPLICAS: ERR No such master with that name");
    ck_assert_int_eq(sentinel_parse_replicas(BYTES(master_reply), &r, 1, &count, err, sizeof err), -1);
    ck_assert_int_eq(sentinel_parse_replicas(BYTES(role_primary_reply), &r, 1, &count, err, sizeof err), -1);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Messages and events
 * ------------------------------------------------------------------------------------------- */

START_TEST(messages)
{
    char payload[256];
    payload_of(BYTES(switch_master_message), "+switch-master", payload, sizeof payload);
    ck_assert_str_eq(payload, "keygate-ha 127.0.0.1 21325 127.0.0.1 21787");
    /* SUBSCRIBE's form */
    static const char plain[] = "*3\r\n$7\r\nmessage\r\n$6\r\n+odown\r\n$9\r\nmaster m \r\n";
    payload_of(BYTES(plain), "+odown", payload, sizeof payload);
    ck_assert_str_eq(payload, "master m ");
    /* not messages */
    const char *ch, *pl;
    size_t chn, pln;
    ck_assert_int_eq(sentinel_parse_message(BYTES(psubscribe_reply), &ch, &chn, &pl, &pln), 0);
    ck_assert_int_eq(sentinel_parse_message(BYTES("*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n:1\r\n"), &ch, &chn, &pl, &pln),
                     0);
    ck_assert_int_eq(
        sentinel_parse_message(BYTES("*4\r\n$7\r\nmessage\r\n$1\r\np\r\n$1\r\nc\r\n$1\r\nx\r\n"), &ch, &chn, &pl, &pln),
        0);
    ck_assert_int_eq(
        sentinel_parse_message(BYTES("*3\r\n$8\r\npmessage\r\n$1\r\nc\r\n$1\r\nx\r\n"), &ch, &chn, &pl, &pln), 0);
    ck_assert_int_eq(sentinel_parse_message(BYTES("-ERR x\r\n"), &ch, &chn, &pl, &pln), 0);
    ck_assert_int_eq(sentinel_parse_message(BYTES(addr_reply), &ch, &chn, &pl, &pln), 0);
}
END_TEST

START_TEST(switch_master_real)
{
    char payload[256];
    size_t n = payload_of(BYTES(switch_master_message), "+switch-master", payload, sizeof payload);
    struct sentinel_switch sw;
    ck_assert_int_eq(sentinel_parse_switch_master(payload, n, &sw), 0);
    ck_assert_str_eq(sw.name, "keygate-ha");
    addr_is(&sw.from, "127.0.0.1", 21325);
    addr_is(&sw.to, "127.0.0.1", 21787);
    /* IPv6 addresses and hostnames are words like any other */
    ck_assert_int_eq(sentinel_parse_switch_master(BYTES("m ::1 6379 redis-2.example 6380"), &sw), 0);
    addr_is(&sw.from, "::1", 6379);
    addr_is(&sw.to, "redis-2.example", 6380);
}
END_TEST

START_TEST(switch_master_malformed)
{
    static const char *const bad[] = {
        "",
        "m 127.0.0.1 1 127.0.0.1",
        "m 127.0.0.1 1 127.0.0.1 2 extra",
        "m  127.0.0.1 1 127.0.0.1 2",
        " m 127.0.0.1 1 127.0.0.1 2",
        "m 127.0.0.1 1 127.0.0.1 2 ",
        "m 127.0.0.1 0 127.0.0.1 2",
        "m 127.0.0.1 1 127.0.0.1 65536",
        "m 127.0.0.1 1 127.0.0.1 2x",
        "m 127.0.0.1 1 127.0.0.1 2\r\n",
        "m 127.0.0.1 1 127.0.0.1\t2",
    };
    struct sentinel_switch sw;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(sentinel_parse_switch_master(bad[i], strlen(bad[i]), &sw) == -1, "case %zu: %s", i, bad[i]);
    /* a master name of SENTINEL_NAME_MAX bytes does not fit */
    char text[400];
    int len = snprintf(text, sizeof text, "%0*d 127.0.0.1 1 127.0.0.1 2", SENTINEL_NAME_MAX, 0);
    ck_assert_int_eq(sentinel_parse_switch_master(text, (size_t)len, &sw), -1);
    len = snprintf(text, sizeof text, "%0*d 127.0.0.1 1 127.0.0.1 2", SENTINEL_NAME_MAX - 1, 0);
    ck_assert_int_eq(sentinel_parse_switch_master(text, (size_t)len, &sw), 0);
}
END_TEST

START_TEST(events_real)
{
    char payload[256];
    struct sentinel_event ev;
    size_t n = payload_of(BYTES(odown_message), "+odown", payload, sizeof payload);
    ck_assert_int_eq(sentinel_parse_event(payload, n, &ev), 0);
    ck_assert_int_eq(ev.kind, SENTINEL_ROLE_PRIMARY);
    ck_assert_str_eq(ev.name, "keygate-ha");
    addr_is(&ev.addr, "127.0.0.1", 21325);
    ck_assert_str_eq(ev.master_name, "keygate-ha");
    addr_is(&ev.master, "127.0.0.1", 21325);

    n = payload_of(BYTES(unodown_message), "-odown", payload, sizeof payload);
    ck_assert_int_eq(sentinel_parse_event(payload, n, &ev), 0);
    ck_assert_int_eq(ev.kind, SENTINEL_ROLE_PRIMARY);
    ck_assert_str_eq(ev.master_name, "keygate-ha");
    addr_is(&ev.master, "127.0.0.1", 21325);

    n = payload_of(BYTES(sdown_slave_message), "+sdown", payload, sizeof payload);
    ck_assert_int_eq(sentinel_parse_event(payload, n, &ev), 0);
    ck_assert_int_eq(ev.kind, SENTINEL_ROLE_REPLICA);
    ck_assert_str_eq(ev.name, "127.0.0.1:21787");
    addr_is(&ev.addr, "127.0.0.1", 21787);
    ck_assert_str_eq(ev.master_name, "keygate-ha");
    addr_is(&ev.master, "127.0.0.1", 21325);

    n = payload_of(BYTES(role_change_message), "-role-change", payload, sizeof payload);
    ck_assert_int_eq(sentinel_parse_event(payload, n, &ev), 0); /* "new reported role is master" ignored */
    ck_assert_int_eq(ev.kind, SENTINEL_ROLE_REPLICA);
    addr_is(&ev.addr, "127.0.0.1", 21787);
    addr_is(&ev.master, "127.0.0.1", 21325);

    n = payload_of(BYTES(config_update_message), "+config-update-from", payload, sizeof payload);
    ck_assert_int_eq(sentinel_parse_event(payload, n, &ev), 0);
    ck_assert_int_eq(ev.kind, SENTINEL_ROLE_SENTINEL);
    ck_assert_int_eq(strlen(ev.name), 40); /* the sentinel's run id */
    addr_is(&ev.addr, "127.0.0.1", 27404);
    ck_assert_str_eq(ev.master_name, "keygate-ha");
    addr_is(&ev.master, "127.0.0.1", 21325);
}
END_TEST

START_TEST(events_malformed)
{
    static const char *const bad[] = {
        "",
        "master keygate-ha 127.0.0.1",
        "master keygate-ha 127.0.0.1 0",
        "master keygate-ha 127.0.0.1 x #quorum 2/2",
        "master keygate-ha 127.0.0.1 1 @ other 127.0.0.1 2",
        "master  keygate-ha 127.0.0.1 1",
        "bogus keygate-ha 127.0.0.1 1",
        "slave 127.0.0.1:1 127.0.0.1 1",
        "slave 127.0.0.1:1 127.0.0.1 1 # m 127.0.0.1 2",
        "slave 127.0.0.1:1 127.0.0.1 1 @ m 127.0.0.1",
        "slave 127.0.0.1:1 127.0.0.1 1 @ m 127.0.0.1 99999",
        "sentinel id 127.0.0.1 1 @@ m 127.0.0.1 2",
    };
    struct sentinel_event ev;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(sentinel_parse_event(bad[i], strlen(bad[i]), &ev) == -1, "case %zu: %s", i, bad[i]);
    /* more words after a replica's master: ignored */
    ck_assert_int_eq(sentinel_parse_event(BYTES("slave a:1 a 1 @ m b 2 x y z"), &ev), 0);
    addr_is(&ev.master, "b", 2);
}
END_TEST

static Suite *sentinel_suite(void)
{
    Suite *s = suite_create("sentinel");
    TCase *addr = tcase_create("master_addr");
    tcase_add_test(addr, master_addr_real);
    tcase_add_test(addr, master_real);
    tcase_add_test(addr, pick_rule);
    tcase_add_test(addr, hold_short_rule);
    tcase_add_test(addr, master_addr_unknown_master);
    tcase_add_test(addr, master_addr_errors);
    tcase_add_test(addr, truncated_replies);
    tcase_add_test(addr, small_error_buffers);
    suite_add_tcase(s, addr);

    TCase *role = tcase_create("role");
    tcase_add_test(role, role_primary_real);
    tcase_add_test(role, role_replica_real);
    tcase_add_test(role, role_replica_states);
    tcase_add_test(role, role_sentinel_real);
    tcase_add_test(role, role_primary_many_replicas);
    tcase_add_test(role, role_malformed);
    suite_add_tcase(s, role);

    TCase *reps = tcase_create("replicas");
    tcase_add_test(reps, flags);
    tcase_add_test(reps, replicas_real);
    tcase_add_test(reps, replicas_after_a_kill);
    tcase_add_test(reps, replicas_more_than_max);
    tcase_add_test(reps, replicas_defaults);
    tcase_add_test(reps, replicas_malformed);
    suite_add_tcase(s, reps);

    TCase *ev = tcase_create("events");
    tcase_add_test(ev, messages);
    tcase_add_test(ev, switch_master_real);
    tcase_add_test(ev, switch_master_malformed);
    tcase_add_test(ev, events_real);
    tcase_add_test(ev, events_malformed);
    suite_add_tcase(s, ev);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sentinel_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
