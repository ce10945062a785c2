/* test_client.c: unit tests for client.c's pure decisions: which client a timeout closes, and why (client_timed_out). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "config.h"
#include "sizes.h"

/* ---------------------------------------------------------------------------------------------
 * client_timed_out, row by row
 * ------------------------------------------------------------------------------------------- */

#define IDLE "idle past client-timeout"
#define TLS "TLS handshake unfinished within client-header-timeout"
#define NOAUTH "not authenticated within client-header-timeout"
#define PARTIAL "a request unfinished past client-header-timeout"

/* One row: client-timeout, client-header-timeout (ms), users configured, the client, the time;
 * the reason expected (NULL: none) and, with one, when its clock started. */
static const struct {
    const char *name;
    int64_t idle, header;
    int nusers;
    struct client_timeout_facts f;
    int64_t now;
    const char *why;
    int64_t since;
} rows[] = {
    /* client-timeout: idle that long, unless it waits, blocks or is subscribed */
    {"idle just under", 10000, 0, 0, {.last_active_ms = 500}, 10499, NULL, 0},
    {"idle reached", 10000, 0, 0, {.last_active_ms = 500}, 10500, IDLE, 500},
    {"idle, a reply owed", 10000, 0, 0, {.last_active_ms = 500, .nqueued = 1}, 99999, NULL, 0},
    {"idle, blocked", 10000, 0, 0, {.last_active_ms = 500, .mode = SESSION_BLOCKED}, 99999, NULL, 0},
    {"idle, subscribed", 10000, 0, 0, {.last_active_ms = 500, .mode = SESSION_SUBSCRIBED}, 99999, NULL, 0},
    {"idle, RESP3 subscribed", 10000, 0, 0, {.last_active_ms = 500, .resp3_subscribed = 1}, 99999, NULL, 0},
    {"idle in MULTI", 10000, 0, 0, {.last_active_ms = 500, .mode = SESSION_MULTI}, 10500, IDLE, 500},
    {"client-timeout 0: never idle", 0, 0, 0, {.last_active_ms = 500}, 1000000, NULL, 0},
    /* client-header-timeout: the TLS handshake, AUTH (users configured), a slow request */
    {"TLS handshake under", 0, 2000, 0, {.created_ms = 100, .tls_handshaking = 1}, 2099, NULL, 0},
    {"TLS handshake reached", 0, 2000, 0, {.created_ms = 100, .tls_handshaking = 1}, 2100, TLS, 100},
    {"unauthenticated, users", 0, 2000, 1, {.created_ms = 100}, 2100, NOAUTH, 100},
    {"unauthenticated, under", 0, 2000, 1, {.created_ms = 100}, 2099, NULL, 0},
    {"unauthenticated, no users", 0, 2000, 0, {.created_ms = 100}, 99999, NULL, 0},
    {"authenticated, users", 0, 2000, 1, {.created_ms = 100, .authenticated = 1}, 99999, NULL, 0},
    {"handshake before AUTH", 0, 2000, 1, {.created_ms = 100, .tls_handshaking = 1}, 2100, TLS, 100},
    {"header timeout 0", 0, 0, 1, {.created_ms = 100, .tls_handshaking = 1, .partial_since_ms = 1}, 99999, NULL, 0},
    {"slowloris", 0, 2000, 0, {.authenticated = 1, .partial_since_ms = 1000, .qlen = 100}, 4000, PARTIAL, 1000},
    {"slow request under the timeout", 0, 2000, 0, {.partial_since_ms = 1000, .qlen = 1}, 2999, NULL, 0},
    {"a moving upload", 0, 2000, 0, {.partial_since_ms = 1000, .qlen = 3 * READ_CHUNK_BYTES}, 4000, NULL, 0},
    {"an upload just too slow",
     0,
     2000,
     0,
     {.partial_since_ms = 1000, .qlen = 3 * READ_CHUNK_BYTES - 1},
     4000,
     PARTIAL,
     1000},
    {"whole seconds only (2.5 s: 2 chunks)",
     0,
     2000,
     0,
     {.partial_since_ms = 1000, .qlen = 2 * READ_CHUNK_BYTES},
     3500,
     NULL,
     0},
    {"nothing unfinished", 0, 2000, 0, {.partial_since_ms = 0}, 99999, NULL, 0},
    /* both clocks: idle is looked at first */
    {"idle before a slow request", 10000, 2000, 1, {.partial_since_ms = 1000, .created_ms = 0}, 20000, IDLE, 0},
    {"a reply owed, then AUTH", 10000, 2000, 1, {.nqueued = 1}, 20000, NOAUTH, 0},
};

START_TEST(test_timed_out)
{
    struct config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.client_timeout_ms = rows[_i].idle;
    cfg.client_header_timeout_ms = rows[_i].header;
    cfg.nusers = (size_t)rows[_i].nusers;
    int64_t since = -1;
    const char *why = client_timed_out(&rows[_i].f, &cfg, rows[_i].now, &since);
    if (!rows[_i].why) {
        ck_assert_msg(why == NULL, "%s: closed for \"%s\", want none", rows[_i].name, why);
        return;
    }
    ck_assert_msg(why && strcmp(why, rows[_i].why) == 0, "%s: \"%s\", want \"%s\"", rows[_i].name, why ? why : "(none)",
                  rows[_i].why);
    ck_assert_msg(since == rows[_i].since, "%s: since %lld, want %lld", rows[_i].name, (long long)since,
                  (long long)rows[_i].since);
}
END_TEST

static Suite *client_suite(void)
{
    Suite *s = suite_create("client");
    TCase *tc = tcase_create("timeouts");
    tcase_add_loop_test(tc, test_timed_out, 0, sizeof(rows) / sizeof(rows[0]));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(client_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
