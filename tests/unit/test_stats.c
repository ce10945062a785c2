/* test_stats.c: unit tests for stats.c: histogram buckets and quantiles, error codes, the label table, sums and texts. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

START_TEST(hist_buckets_are_upper_inclusive)
{
    ck_assert_int_eq(stats_hist_bucket(0), 0);
    ck_assert_int_eq(stats_hist_bucket(50000), 0); /* le="5e-05" holds 50 us exactly */
    ck_assert_int_eq(stats_hist_bucket(50001), 1);
    ck_assert_int_eq(stats_hist_bucket(100000), 1);
    ck_assert_int_eq(stats_hist_bucket(1000000), 4);
    ck_assert_int_eq(stats_hist_bucket(5000000000ull), STATS_HIST_NBOUNDS - 1);
    ck_assert_int_eq(stats_hist_bucket(5000000001ull), STATS_HIST_NBOUNDS); /* +Inf */
    ck_assert_int_eq(stats_hist_bucket(UINT64_MAX), STATS_HIST_NBOUNDS);
    /* the constant-time lookup equals the definition (first bound >= ns) everywhere */
    static const uint64_t bounds[STATS_HIST_NBOUNDS] = STATS_HIST_BOUNDS_NS;
    uint64_t x = 88172645463325252ull;
    for (int n = 0; n < 200000; n++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
        uint64_t ns = n < 100000 ? x % 10000000000ull : x >> (x % 64);
        if (n < STATS_HIST_NBOUNDS * 3) ns = bounds[n / 3] + (uint64_t)(n % 3) - 1; /* each bound and its neighbours */
        int want = 0;
        while (want < STATS_HIST_NBOUNDS && ns > bounds[want]) want++;
        ck_assert_msg(stats_hist_bucket(ns) == want, "ns %llu: bucket %d, want %d", (unsigned long long)ns,
                      stats_hist_bucket(ns), want);
    }
}
END_TEST

START_TEST(hist_add_and_quantiles)
{
    struct stats_hist h = {0};
    ck_assert(stats_hist_quantile_us(&h, 0.5) == 0);            /* nothing observed */
    for (int i = 0; i < 100; i++) stats_hist_add(&h, 75000, 1); /* all in (50us, 100us] */
    ck_assert_uint_eq(h.bucket[1], 100);
    ck_assert_uint_eq(h.sum_ns, 7500000);
    /* linear within the bucket, as histogram_quantile: p50 = 50 + 50 * 0.5 */
    ck_assert(stats_hist_quantile_us(&h, 0.5) == 75.0);
    ck_assert(stats_hist_quantile_us(&h, 1.0) == 100.0);
    stats_hist_add(&h, 9000000000ull, 1); /* +Inf: quantiles above read the last bound */
    ck_assert(stats_hist_quantile_us(&h, 1.0) == 5000000.0);
}
END_TEST

START_TEST(backend_codes_are_a_fixed_list)
{
    ck_assert_int_eq(stats_backend_code("OOM", 3), STATS_BACKEND_OOM);
    ck_assert_int_eq(stats_backend_code("WRONGTYPE", 9), STATS_BACKEND_WRONGTYPE);
    ck_assert_int_eq(stats_backend_code("BUSY", 4), STATS_BACKEND_BUSY);
    ck_assert_int_eq(stats_backend_code("EXECABORT", 9), STATS_BACKEND_EXECABORT);
    ck_assert_int_eq(stats_backend_code("ERR", 3), STATS_BACKEND_ERR);
    ck_assert_int_eq(stats_backend_code("OOMX", 4), STATS_BACKEND_OTHER); /* whole words only */
    ck_assert_int_eq(stats_backend_code("OO", 2), STATS_BACKEND_OTHER);
    ck_assert_int_eq(stats_backend_code("BUSYKEY", 7), STATS_BACKEND_OTHER);
    ck_assert_int_eq(stats_backend_code("", 0), STATS_BACKEND_OTHER);
}
END_TEST

START_TEST(recording_per_namespace)
{
    stats_ns_reset();
    unsigned q = stats_ns_slot("q:", 0, "durable", "queues");
    struct stats *st = calloc(1, sizeof(*st));
    st->now_ns = 1000;
    struct stats_mark m = stats_command(st, stats_key(q, STATS_WRITE), 0, 40);
    ck_assert_uint_eq(m.t0_ns, 1000);
    ck_assert_uint_eq(STATS_KEY_SLOT(m.key), q);
    ck_assert_uint_eq(STATS_KEY_CLASS(m.key), STATS_WRITE);
    ck_assert_int_eq(m.instance, 0);
    stats_backend_error(st, &m, "-OOM command not allowed when used memory > 'maxmemory'.\r\n", 56);
    stats_backend_error(st, &m, "-WRONGTYPE Operation\r\n", 22);
    stats_backend_error(st, &m, "-SOMETHINGNEW x\r\n", 17);
    stats_ttl_injected(st, &m);
    st->now_ns = 1000 + 300000; /* 300 us later */
    stats_reply_out(st, &m, 12);
    ck_assert_uint_eq(st->ns[q].sent_bytes, 0); /* pending in the run until a flush */
    stats_reply_out(st, &m, 12);                /* the same read time, namespace, class: the same run */
    stats_flush(st);
    ck_assert_uint_eq(st->ns[q].commands[STATS_WRITE], 1);
    ck_assert_uint_eq(st->ns[q].received_bytes, 40);
    ck_assert_uint_eq(st->ns[q].sent_bytes, 24);
    ck_assert_uint_eq(st->ns[q].backend_errors[STATS_BACKEND_OOM], 1);
    ck_assert_uint_eq(st->ns[q].backend_errors[STATS_BACKEND_WRONGTYPE], 1);
    ck_assert_uint_eq(st->ns[q].backend_errors[STATS_BACKEND_OTHER], 1);
    ck_assert_uint_eq(st->rejected_writes[0], 1);
    ck_assert_uint_eq(st->ns[q].ttl_injected, 1);
    ck_assert_uint_eq(st->ttl_injected, 1);
    ck_assert_uint_eq(st->request_duration[STATS_WRITE].bucket[3], 2); /* (250us, 500us] */
    ck_assert_uint_eq(st->request_duration[STATS_WRITE].sum_ns, 600000);
    /* a run ends when the key changes, and stats_clock counts it at the old now */
    struct stats_mark other = stats_command(st, stats_key(q, STATS_READ), 0, 1);
    stats_reply_out(st, &m, 1);
    stats_reply_out(st, &other, 1); /* flushes m's run of one */
    ck_assert_uint_eq(st->request_duration[STATS_WRITE].bucket[3], 3);
    ck_assert_uint_eq(st->request_duration[STATS_READ].bucket[0], 0);
    stats_clock(st); /* other's run: read at 301000, out at 301000 */
    ck_assert_uint_eq(st->request_duration[STATS_READ].bucket[0], 1);
    ck_assert_uint_eq(st->ns[q].sent_bytes, 26);
    st->now_ns = 1000 + 300000;

    struct stats_mark none = stats_command(st, stats_key(STATS_NS_NONE, STATS_WRITE), -1, 10);
    stats_refused(st, &none, "NONAMESPACE key 'x' matches no namespace in the registry");
    stats_refused(st, &m, "DENIED TTL of 2592000000ms is above max-ttl 7d of namespace 'q:'");
    stats_refused(st, &m, "DENIED PERSIST would remove the TTL");
    stats_refused(st, &m, "WRONGPASS invalid username-password pair");
    ck_assert_uint_eq(st->ns[STATS_NS_NONE].refused[STATS_REFUSED_NONAMESPACE], 1);
    ck_assert_uint_eq(st->errors_nonamespace, 1);
    ck_assert_uint_eq(st->ns[q].refused[STATS_REFUSED_DENIED], 2);
    ck_assert_uint_eq(st->ns[q].ttl_refused, 1); /* only the max-ttl one */
    ck_assert_uint_eq(st->ns[q].refused[STATS_REFUSED_NOAUTH], 1);
    ck_assert_uint_eq(st->errors_denied, 2);

    stats_backend_latency(st, 1, 70000, 3);
    stats_backend_latency(st, STATS_MAX_INSTANCES, 70000, 1); /* out of range: ignored */
    ck_assert_uint_eq(st->backend_latency[1].bucket[1], 3);
    ck_assert_uint_eq(st->backend_latency[1].sum_ns, 210000);
    stats_free(st);
    free(st);
    stats_ns_reset();
}
END_TEST

START_TEST(label_slots_are_kept_over_reloads)
{
    stats_ns_reset();
    unsigned a = stats_ns_slot("q:", 0, "durable", "queues");
    unsigned b = stats_ns_slot("cache:", 0, "cache", "cache");
    ck_assert_uint_eq(a, 1); /* 0 is namespace="" */
    ck_assert_uint_eq(b, 2);
    /* a reload: the same entries keep their slots, a changed owner is a new series */
    ck_assert_uint_eq(stats_ns_slot("cache:", 0, "cache", "cache"), b);
    ck_assert_uint_eq(stats_ns_slot("q:", 0, "durable", "queues"), a);
    ck_assert_uint_eq(stats_ns_slot("q:", 0, "durable", "other"), 3);
    ck_assert_uint_eq(stats_ns_slot("q:", 1, "durable", "queues"), 4); /* a channel of the same prefix */
    for (int i = 0; i < STATS_NS_MAX + 10; i++) {
        char p[32];
        snprintf(p, sizeof p, "n%d:", i);
        unsigned s = stats_ns_slot(p, 0, "cache", "o");
        ck_assert_uint_lt(s, STATS_NS_MAX);
        if (i > STATS_NS_MAX) ck_assert_uint_eq(s, STATS_NS_OVERFLOW);
    }
    stats_ns_reset();
}
END_TEST

/* Two workers' blocks (as struct worker holds them: `stride` apart). */
struct fake_worker {
    int id;
    struct stats stats;
    char pad[40];
};

START_TEST(sums_and_texts)
{
    stats_ns_reset();
    unsigned q = stats_ns_slot("q:", 0, "durable", "queues");
    unsigned odd = stats_ns_slot("we\"ird\\", 0, "cache", "o");
    struct fake_worker *w = calloc(2, sizeof(*w));
    for (int i = 0; i < 2; i++) {
        struct stats_mark m = stats_command(&w[i].stats, stats_key(q, STATS_READ), 0, 10);
        stats_reply_out(&w[i].stats, &m, 7);
        stats_flush(&w[i].stats);
        stats_backend_latency(&w[i].stats, 0, 60000, 1);
    }
    stats_command(&w[1].stats, stats_key(odd, STATS_OTHER), 1, 1);
    stats_flush(&w[1].stats);
    struct stats_ns sum;
    stats_ns_sum(&w[0].stats, sizeof(*w), 2, q, &sum);
    ck_assert_uint_eq(sum.commands[STATS_READ], 2);
    ck_assert_uint_eq(sum.received_bytes, 20);
    ck_assert_uint_eq(sum.sent_bytes, 14);
    struct stats_hist h;
    stats_hist_sum_backend(&w[0].stats, sizeof(*w), 2, 0, &h);
    ck_assert_uint_eq(h.bucket[1], 2);
    ck_assert_uint_eq(h.sum_ns, 120000);

    const char *inst[] = {"durable", "cache"};
    struct bytebuf out = {0};
    stats_format_prometheus(&w[0].stats, sizeof(*w), 2, inst, 2, &out);
    bytebuf_add(&out, "", 1);
    const char *t = out.p;
    ck_assert_ptr_nonnull(strstr(t, "# TYPE keygate_namespace_commands_total counter\n"));
    ck_assert_ptr_nonnull(strstr(
        t,
        "keygate_namespace_commands_total{namespace=\"q:\",backend=\"durable\",owner=\"queues\",class=\"read\"} 2\n"));
    ck_assert_ptr_nonnull(
        strstr(t, "keygate_namespace_refused_total{namespace=\"\",backend=\"\",owner=\"\",code=\"NONAMESPACE\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(t, "namespace=\"we\\\"ird\\\\\"")); /* escaped label value */
    ck_assert_ptr_nonnull(strstr(t, "# TYPE keygate_backend_latency_seconds histogram\n"));
    ck_assert_ptr_nonnull(strstr(t, "keygate_backend_latency_seconds_bucket{backend=\"durable\",le=\"5e-05\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(t, "keygate_backend_latency_seconds_bucket{backend=\"durable\",le=\"0.0001\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(t, "keygate_backend_latency_seconds_bucket{backend=\"durable\",le=\"+Inf\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(t, "keygate_backend_latency_seconds_count{backend=\"durable\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(t, "keygate_backend_latency_seconds_sum{backend=\"durable\"} 0.000120000\n"));
    ck_assert_ptr_nonnull(strstr(t, "keygate_request_duration_seconds_count{class=\"read\"} 2\n"));
    bytebuf_free(&out);

    stats_format_info(&w[0].stats, sizeof(*w), 2, inst, 2, &out);
    bytebuf_add(&out, "", 1);
    ck_assert_ptr_nonnull(strstr(out.p, "nsstat_1:prefix=q:,instance=durable,owner=queues,cmd_read=2,cmd_write=0,"));
    ck_assert_ptr_nonnull(
        strstr(out.p, "latency_percentiles_usec_backend_durable:p50=75.000,p99=99.500,p99.9=99.950\r\n"));
    bytebuf_free(&out);
    for (int i = 0; i < 2; i++) stats_free(&w[i].stats);
    free(w);
    stats_ns_reset();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stats");
    TCase *tc = tcase_create("stats");
    tcase_add_test(tc, hist_buckets_are_upper_inclusive);
    tcase_add_test(tc, hist_add_and_quantiles);
    tcase_add_test(tc, backend_codes_are_a_fixed_list);
    tcase_add_test(tc, recording_per_namespace);
    tcase_add_test(tc, label_slots_are_kept_over_reloads);
    tcase_add_test(tc, sums_and_texts);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
