/* test_syncconn.c: unit tests for syncconn.c's pure part: a parsed reply back to its RESP2 bytes, and a cluster's primaries from CLUSTER SLOTS. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "cluster_replies.h"
#include "syncconn.h"

#define BYTES(a) (a), sizeof(a) - 1

/* bytes parsed by hiredis's reader, as syncconn_read hands replies over */
static redisReply *parse(const char *bytes, size_t len)
{
    redisReader *rd = redisReaderCreate();
    ck_assert_ptr_nonnull(rd);
    ck_assert_int_eq(redisReaderFeed(rd, bytes, len), REDIS_OK);
    void *r = NULL;
    ck_assert_int_eq(redisReaderGetReply(rd, &r), REDIS_OK);
    ck_assert_ptr_nonnull(r);
    redisReaderFree(rd);
    return r;
}

/* every RESP2 type comes back as the server sent it: the slot map's parser reads those bytes */
START_TEST(encode_gives_back_the_bytes)
{
    static const struct {
        const char *bytes;
        size_t len;
    } forms[] = {
        {BYTES("+OK\r\n")},
        {BYTES("-ERR unknown command\r\n")},
        {BYTES(":-42\r\n")},
        {BYTES("$-1\r\n")},
        {BYTES("$0\r\n\r\n")},
        {BYTES("$5\r\na\r\nb\x00\r\n")},
        {BYTES("*0\r\n")},
        {BYTES("*3\r\n$1\r\nx\r\n*2\r\n:1\r\n$-1\r\n+QUEUED\r\n")},
        {BYTES(slots_reply)},
        {BYTES(slots_failover_reply)},
        {BYTES(slots_hostname_reply)},
    };
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        redisReply *r = parse(forms[i].bytes, forms[i].len);
        struct bytebuf out = {0};
        syncconn_reply_encode(r, &out);
        ck_assert_msg(out.len == forms[i].len && memcmp(out.p, forms[i].bytes, out.len) == 0,
                      "form %zu: %zu bytes, want %zu", i, out.len, forms[i].len);
        bytebuf_free(&out);
        freeReplyObject(r);
    }
}
END_TEST

/* the primaries are the nodes owning a slot, in the reply's order, each once (17003 has two ranges);
 * replicas (17004 before the failover) are not listed */
START_TEST(primaries_from_cluster_slots)
{
    struct slotmap_node out[SLOTMAP_MAX_NODES];
    char err[256] = "";
    redisReply *r = parse(BYTES(slots_reply));
    int n = syncconn_primaries_from_slots(r, "127.0.0.1", out, SLOTMAP_MAX_NODES, err, sizeof(err));
    ck_assert_msg(n == 3, "%d: %s", n, err);
    ck_assert_str_eq(out[0].host, "127.0.0.1");
    ck_assert_int_eq(out[0].port, 17003);
    ck_assert_int_eq(out[1].port, 17001);
    ck_assert_int_eq(out[2].port, 17002);
    freeReplyObject(r);

    /* after 17001's failover its replica 17004 holds its slots */
    r = parse(BYTES(slots_failover_reply));
    n = syncconn_primaries_from_slots(r, "127.0.0.1", out, SLOTMAP_MAX_NODES, err, sizeof(err));
    ck_assert_msg(n == 3, "%d: %s", n, err);
    ck_assert_int_eq(out[0].port, 17003);
    ck_assert_int_eq(out[1].port, 17004);
    ck_assert_int_eq(out[2].port, 17002);
    freeReplyObject(r);

    /* max caps the list */
    r = parse(BYTES(slots_reply));
    ck_assert_int_eq(syncconn_primaries_from_slots(r, "127.0.0.1", out, 2, err, sizeof(err)), 2);
    freeReplyObject(r);
}
END_TEST

START_TEST(primaries_errors)
{
    struct slotmap_node out[4];
    char err[256] = "";
    redisReply *r = parse(BYTES("-ERR This instance has cluster support disabled\r\n"));
    ck_assert_int_eq(syncconn_primaries_from_slots(r, "127.0.0.1", out, 4, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "cluster support disabled") != NULL, "%s", err);
    freeReplyObject(r);
    r = parse(BYTES("*0\r\n")); /* a cluster with no slot assigned yet */
    ck_assert_int_eq(syncconn_primaries_from_slots(r, "127.0.0.1", out, 4, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "CLUSTER SLOTS: no slot is served");
    freeReplyObject(r);
}
END_TEST

/* a single-server instance is its own one server: no I/O */
START_TEST(single_server_is_its_address)
{
    struct instance_conf ic = {.name = "durable", .host = "10.1.2.3", .port = 6401};
    struct slotmap_node out[2];
    char err[64];
    ck_assert_int_eq(syncconn_primaries(&ic, 100, NULL, out, 2, err, sizeof(err)), 1);
    ck_assert_str_eq(out[0].host, "10.1.2.3");
    ck_assert_int_eq(out[0].port, 6401);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("syncconn");
    TCase *tc = tcase_create("syncconn");
    tcase_add_test(tc, encode_gives_back_the_bytes);
    tcase_add_test(tc, primaries_from_cluster_slots);
    tcase_add_test(tc, primaries_errors);
    tcase_add_test(tc, single_server_is_its_address);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
