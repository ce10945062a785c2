/* test_admin.c: integration tests of the admin HTTP endpoint: /metrics, /healthz (with a backend down), /registry, 404. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "harness.h"

/*
 * One harness with `admin-listen` (o.admin = 1) and the repo's conf/registry.conf
 * serves the suite (each test in its own process, see harness.h). HTTP is spoken over a plain socket:
 * one request per connection, "Connection: close", the reply read to EOF.
 */

static struct harness h;

static void setup(void)
{
    struct harness_opts o = {.admin = 1};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h); /* post-condition: no key on the backends breaks the registry */
    harness_stop(&h);
}

struct http_reply {
    int status;
    char *head; /* status line + headers, NUL-terminated */
    char *body; /* NUL-terminated */
};

static void http_reply_free(struct http_reply *r)
{
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* `METHOD path` to the admin port; the whole reply. Fails the test on socket errors. */
static struct http_reply http_request(const char *method, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)h.admin_port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect to admin port %d: %s", h.admin_port,
                  strerror(errno));
    char req[512];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", method, path);
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (cap - len < 4096) buf = realloc(buf, cap *= 2);
        ck_assert_ptr_nonnull(buf);
        ssize_t got = read(fd, buf + len, cap - len - 1);
        ck_assert_msg(got >= 0, "read from admin port: %s", strerror(errno));
        if (got == 0) break;
        len += (size_t)got;
    }
    close(fd);
    buf[len] = '\0';
    struct http_reply r = {0};
    char *sep = strstr(buf, "\r\n\r\n");
    ck_assert_msg(sep != NULL, "no header end in reply: %s", buf);
    *sep = '\0';
    r.head = strdup(buf);
    r.body = strdup(sep + 4);
    ck_assert_msg(sscanf(buf, "HTTP/1.%*d %d", &r.status) == 1, "bad status line: %s", buf);
    free(buf);
    return r;
}

static struct http_reply http_get(const char *path)
{
    return http_request("GET", path);
}

/* The value of metric line "name value" in a /metrics body; fails when absent. */
static double metric(const char *body, const char *name)
{
    size_t n = strlen(name);
    for (const char *line = body; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, name, n) == 0 && line[n] == ' ') return strtod(line + n + 1, NULL);
    }
    ck_abort_msg("metric %s not in /metrics:\n%s", name, body);
    return -1;
}

/* GET /healthz until it answers `status` or timeout_ms passes; the last reply. */
static struct http_reply healthz_until(int status, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        struct http_reply r = http_get("/healthz");
        if (r.status == status || now_ms() >= deadline) return r;
        http_reply_free(&r);
        sleep_ms(50);
    }
}

/* GET /healthz until its body holds `needle` or timeout_ms passes; the last reply. */
static struct http_reply healthz_until_text(const char *needle, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        struct http_reply r = http_get("/healthz");
        if (strstr(r.body, needle) != NULL || now_ms() >= deadline) return r;
        http_reply_free(&r);
        sleep_ms(50);
    }
}

/* ---- /metrics ---- */

START_TEST(test_metrics_counters_move_after_commands)
{
    struct http_reply r = healthz_until(200, 3000); /* both instances connected */
    ck_assert_msg(r.status == 200, "healthz 3 s into the test: %d %s", r.status, r.body);
    http_reply_free(&r);
    r = http_get("/metrics");
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(strstr(r.head, "Content-Type: text/plain; version=0.0.4") != NULL, "%s", r.head);
    ck_assert_ptr_nonnull(strstr(r.body, "# HELP keygate_commands_processed_total client commands handled\n"));
    ck_assert_ptr_nonnull(strstr(r.body, "# TYPE keygate_commands_processed_total counter\n"));
    ck_assert_ptr_nonnull(strstr(r.body, "# TYPE keygate_connected_clients gauge\n"));
    ck_assert(metric(r.body, "keygate_instance_up{backend=\"durable\"}") == 1);
    ck_assert(metric(r.body, "keygate_instance_up{backend=\"cache\"}") == 1);
    ck_assert(metric(r.body, "keygate_topology_ok{backend=\"durable\"}") == 1);
    ck_assert(metric(r.body, "keygate_registry_namespaces") >= 10);
    double processed = metric(r.body, "keygate_commands_processed_total");
    double forwarded = metric(r.body, "keygate_commands_forwarded_total");
    double nonamespace = metric(r.body, "keygate_errors_nonamespace_total");
    http_reply_free(&r);

    redisContext *c = harness_client(&h);
    ck_assert_ptr_nonnull(c);
    const char *cmds[] = {"PING", "SET cache:admin:1 v", "GET cache:admin:1", "SET nope:admin 1"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        redisReply *rep = redisCommand(c, cmds[i]);
        ck_assert_msg(rep != NULL, "%s: %s", cmds[i], c->errstr);
        freeReplyObject(rep);
    }
    r = http_get("/metrics");
    ck_assert(metric(r.body, "keygate_connected_clients") >= 1);
    ck_assert_msg(metric(r.body, "keygate_commands_processed_total") >= processed + 4, "%s", r.body);
    ck_assert(metric(r.body, "keygate_commands_forwarded_total") >= forwarded + 2);
    ck_assert(metric(r.body, "keygate_errors_nonamespace_total") == nonamespace + 1);
    http_reply_free(&r);
    redisFree(c);
}
END_TEST

/* ---- /healthz ---- */

START_TEST(test_healthz_follows_backend_down_and_back)
{
    struct http_reply r = healthz_until(200, 3000);
    ck_assert_msg(r.status == 200, "healthz with both up: %d %s", r.status, r.body);
    ck_assert_str_eq(r.body, "ok\n");
    http_reply_free(&r);

    ck_assert_int_eq(harness_backend_kill(&h, "cache"), 0);
    r = healthz_until(503, 3000);
    ck_assert_msg(r.status == 503, "healthz with cache down: %d %s", r.status, r.body);
    ck_assert_msg(strstr(r.body, "instance 'cache' is unreachable\n") != NULL, "%s", r.body);
    ck_assert_msg(strstr(r.body, "durable") == NULL, "only cache is down: %s", r.body);
    http_reply_free(&r);
    r = http_get("/metrics");
    ck_assert(metric(r.body, "keygate_instance_up{backend=\"cache\"}") == 0);
    ck_assert(metric(r.body, "keygate_instance_up{backend=\"durable\"}") == 1);
    http_reply_free(&r);

    ck_assert_msg(harness_backend_restart(&h, "cache") == 0, "restart: %s", h.error);
    r = healthz_until(200, 6000); /* reconnect backoff is at most 2 s */
    ck_assert_msg(r.status == 200, "healthz after restart: %d %s", r.status, r.body);
    ck_assert_str_eq(r.body, "ok\n");
    http_reply_free(&r);
}
END_TEST

/* ---- topology guard ---- */

/* Close keygate's connections on backend `name` (CLIENT KILL from a direct connection) so it reconnects
 * and reads INFO again. */
static void kill_keygate_conns(const char *name)
{
    redisContext *c = harness_direct(&h, name);
    ck_assert_ptr_nonnull(c);
    redisReply *r = redisCommand(c, "CLIENT KILL TYPE normal SKIPME yes");
    ck_assert_msg(r != NULL && r->type == REDIS_REPLY_INTEGER, "CLIENT KILL: %s", r ? r->str : c->errstr);
    freeReplyObject(r);
    redisFree(c);
}

static void config_set(const char *name, const char *param, const char *value)
{
    redisContext *c = harness_direct(&h, name);
    ck_assert_ptr_nonnull(c);
    redisReply *r = redisCommand(c, "CONFIG SET %s %s", param, value);
    ck_assert_msg(r != NULL && r->type == REDIS_REPLY_STATUS, "CONFIG SET %s %s", param, value);
    freeReplyObject(r);
    redisFree(c);
}

START_TEST(test_topology_problem_shows_in_healthz_and_metrics)
{
    struct http_reply r = healthz_until(200, 3000);
    ck_assert_msg(r.status == 200, "healthz 3 s into the test: %d %s", r.status, r.body);
    http_reply_free(&r);
    r = http_get("/metrics");
    int checked = metric(r.body, "keygate_topology_checked{backend=\"cache\"}") == 1;
    http_reply_free(&r);
    ck_assert_msg(checked, "keygate read no INFO from 'cache' at connect (topology guard not wired)");
    config_set("cache", "maxmemory-policy", "noeviction");
    kill_keygate_conns("cache");
    /* first "unreachable" while it reconnects, then the problem INFO showed */
    r = healthz_until_text("instance 'cache' maxmemory-policy is noeviction, must evict", 5000);
    ck_assert_msg(r.status == 503, "healthz with cache on noeviction: %d %s", r.status, r.body);
    ck_assert_msg(strstr(r.body, "instance 'cache' maxmemory-policy is noeviction, must evict") != NULL, "%s", r.body);
    http_reply_free(&r);
    r = http_get("/metrics");
    ck_assert(metric(r.body, "keygate_topology_ok{backend=\"cache\"}") == 0);
    ck_assert(metric(r.body, "keygate_topology_ok{backend=\"durable\"}") == 1);
    http_reply_free(&r);

    config_set("cache", "maxmemory-policy", "allkeys-lru");
    kill_keygate_conns("cache");
    r = healthz_until(200, 5000);
    ck_assert_msg(r.status == 200, "healthz after the fix: %d %s", r.status, r.body);
    http_reply_free(&r);
    char *log = harness_keygate_log(&h);
    ck_assert_ptr_nonnull(log);
    ck_assert_msg(strstr(log, "WARN topology: instance 'cache' maxmemory-policy is noeviction") != NULL, "%s", log);
    free(log);
}
END_TEST

/* ---- /registry, 404, 405 ---- */

START_TEST(test_registry_is_markdown)
{
    struct http_reply r = http_get("/registry");
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(strstr(r.head, "Content-Type: text/markdown") != NULL, "%s", r.head);
    ck_assert_msg(strncmp(r.body, "| Namespace | Purpose | Instance | TTL | Max TTL | Owner |", 56) == 0, "%s", r.body);
    ck_assert_ptr_nonnull(strstr(r.body, "| q: |"));
    ck_assert_ptr_nonnull(strstr(r.body, "| cache:mattermost:listener |"));
    http_reply_free(&r);
}
END_TEST

START_TEST(test_unknown_path_is_404_and_post_405)
{
    const char *paths[] = {"/", "/nope", "/metricsx", "/healthz/x"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        struct http_reply r = http_get(paths[i]);
        ck_assert_msg(r.status == 404, "%s: %d", paths[i], r.status);
        http_reply_free(&r);
    }
    struct http_reply r = http_get("/metrics?x=1"); /* a query string does not change the path */
    ck_assert_int_eq(r.status, 200);
    http_reply_free(&r);
    r = http_request("POST", "/metrics");
    ck_assert_int_eq(r.status, 405);
    http_reply_free(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("admin");
    TCase *tc = harness_tcase(s, "admin", 60, setup, teardown);
    harness_add_test(tc, test_metrics_counters_move_after_commands);
    harness_add_test(tc, test_healthz_follows_backend_down_and_back);
    harness_add_test(tc, test_topology_problem_shows_in_healthz_and_metrics);
    harness_add_test(tc, test_registry_is_markdown);
    harness_add_test(tc, test_unknown_path_is_404_and_post_405);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
