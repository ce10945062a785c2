/* test_config.c: unit tests for config.c: every directive, defaults, password files, errors. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "registry.h"

/* SHA-256 of "x": a user line that needs no password file */
#define SHA_OF_X "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"

/* Each test gets a fresh folder: registry.conf, secrets/{durable,cache,u}.pass (0600),
 * secrets/open.pass (0644). */
static char dir[64];
static char conf_path[128];

static void write_file(const char *name, const char *content, mode_t mode)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    size_t len = strlen(content);
    ck_assert_int_eq(write(fd, content, len), (ssize_t)len);
    close(fd);
    ck_assert_int_eq(chmod(path, mode), 0);
}

static void setup(void)
{
    strcpy(dir, "/tmp/kg_config_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char sub[128];
    snprintf(sub, sizeof sub, "%s/secrets", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    write_file("registry.conf",
               "namespace q: instance=durable ttl=none owner=queues\n"
               "namespace cache: instance=cache ttl=1h owner=cache\n"
               "channel push: instance=cache owner=notifications\n",
               0644);
    write_file("secrets/durable.pass", "d-pass\n", 0600);
    write_file("secrets/cache.pass", "c-pass", 0600);
    write_file("secrets/u.pass", "hunter2\n", 0400);
    write_file("secrets/open.pass", "leaky\n", 0644);
    write_file("secrets/empty.pass", "", 0600);
    snprintf(conf_path, sizeof conf_path, "%s/keygate.conf", dir);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

#define BASE                                                                                                           \
    "listen 127.0.0.1:6400\n"                                                                                          \
    "registry registry.conf\n"                                                                                         \
    "instance durable 127.0.0.1:6401 plain password-file=secrets/durable.pass\n"                                       \
    "instance cache 127.0.0.1:6402 plain\n"

static struct config *load(const char *content, struct diag *d)
{
    write_file("keygate.conf", content, 0644);
    memset(d, 0, sizeof *d);
    return config_load(conf_path, d);
}

/* Assert that some line of `d` starts with "FILE:LINE: " and contains `word`. */
static void assert_diag(const struct diag *d, const char *file, int line, const char *word)
{
    char prefix[512];
    if (line > 0)
        snprintf(prefix, sizeof prefix, "%s:%d: ", file, line);
    else
        snprintf(prefix, sizeof prefix, "%s: ", file);
    for (size_t i = 0; i < d->count; i++)
        if (strncmp(d->lines[i], prefix, strlen(prefix)) == 0 && strstr(d->lines[i], word)) return;
    for (size_t i = 0; i < d->count; i++) fprintf(stderr, "  diag: %s\n", d->lines[i]);
    ck_abort_msg("no diagnostic '%s...%s'", prefix, word);
}

/* `content` must fail with an error at `line` of keygate.conf mentioning `word`. */
static void expect_error(const char *content, int line, const char *word)
{
    struct diag d;
    struct config *c = load(content, &d);
    ck_assert_ptr_null(c);
    assert_diag(&d, conf_path, line, word);
    diag_free(&d);
}

START_TEST(full_config)
{
    struct diag d;
    struct config *c = load("# every directive\n"
                            "listen 127.0.0.1:6400\n"
                            "listen [::1]:6401   # comment after\n"
                            "listen unix:run/kg.sock mode=0600\n"
                            "listen unix:/run/keygate/keygate.sock\n"
                            "listen 0.0.0.0:6443 tls cert=certs/s.crt key=/etc/s.key ca=certs/ca.crt\n"
                            "admin-listen 127.0.0.1:9400\n"
                            "registry registry.conf\n"
                            "instance durable 10.0.0.1:6401 tls ca=certs/ca.crt cert=certs/c.crt key=certs/c.key "
                            "server-name=redis.internal password-file=secrets/durable.pass user=keygate connections=4\n"
                            "instance cache [fd00::1]:6402 plain password-file=secrets/cache.pass\n"
                            "user queues password-file=secrets/u.pass owners=queues,cache access=rw "
                            "max-clients=50 rate=1000\n"
                            "user ops sha256=F52FBD32B2B3B86FF88EF6C490628285F482AF15DDCB29541F94BCF526A3F6C7 "
                            "owners=* access=ro scripts=yes\n"
                            "threads 4\nmax-clients 100\nmax-request-size 1mb\nclient-output-limit 16MB\n"
                            "max-pending 10\nconnect-timeout 500ms\nshutdown-timeout 1m\nlog-level debug\n",
                            &d);
    for (size_t i = 0; i < d.count; i++) fprintf(stderr, "  diag: %s\n", d.lines[i]);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(d.count, 0);
    char want[256];

    ck_assert_uint_eq(c->nlistens, 5);
    ck_assert_str_eq(c->listens[0].host, "127.0.0.1");
    ck_assert_int_eq(c->listens[0].port, 6400);
    ck_assert_int_eq(c->listens[0].tls, 0);
    ck_assert_ptr_null(c->listens[0].unix_path);
    ck_assert_str_eq(c->listens[1].host, "::1");
    ck_assert_int_eq(c->listens[1].port, 6401);
    ck_assert_ptr_null(c->listens[2].host);
    snprintf(want, sizeof want, "%s/run/kg.sock", dir);
    ck_assert_str_eq(c->listens[2].unix_path, want);
    ck_assert_int_eq(c->listens[2].unix_mode, 0600);
    ck_assert_str_eq(c->listens[3].unix_path, "/run/keygate/keygate.sock");
    ck_assert_int_eq(c->listens[3].unix_mode, 0660);
    ck_assert_int_eq(c->listens[4].tls, 1);
    snprintf(want, sizeof want, "%s/certs/s.crt", dir);
    ck_assert_str_eq(c->listens[4].tls_cert, want);
    ck_assert_str_eq(c->listens[4].tls_key, "/etc/s.key");
    snprintf(want, sizeof want, "%s/certs/ca.crt", dir);
    ck_assert_str_eq(c->listens[4].tls_ca, want);

    ck_assert_str_eq(c->admin_host, "127.0.0.1");
    ck_assert_int_eq(c->admin_port, 9400);
    snprintf(want, sizeof want, "%s/registry.conf", dir);
    ck_assert_str_eq(c->registry_path, want);
    ck_assert_ptr_nonnull(c->registry);
    ck_assert_uint_eq(c->registry->count, 3);

    ck_assert_uint_eq(c->ninstances, 2);
    const struct instance_conf *in = &c->instances[0];
    ck_assert_str_eq(in->name, "durable");
    ck_assert_str_eq(in->host, "10.0.0.1");
    ck_assert_int_eq(in->port, 6401);
    ck_assert_int_eq(in->tls, 1);
    snprintf(want, sizeof want, "%s/certs/ca.crt", dir);
    ck_assert_str_eq(in->ca, want);
    snprintf(want, sizeof want, "%s/certs/c.crt", dir);
    ck_assert_str_eq(in->cert, want);
    snprintf(want, sizeof want, "%s/certs/c.key", dir);
    ck_assert_str_eq(in->key, want);
    ck_assert_str_eq(in->server_name, "redis.internal");
    snprintf(want, sizeof want, "%s/secrets/durable.pass", dir);
    ck_assert_str_eq(in->password_file, want);
    ck_assert_str_eq(in->password, "d-pass");
    ck_assert_str_eq(in->username, "keygate");
    ck_assert_int_eq(in->connections, 4);
    in = &c->instances[1];
    ck_assert_str_eq(in->host, "fd00::1");
    ck_assert_int_eq(in->tls, 0);
    ck_assert_str_eq(in->password, "c-pass");
    ck_assert_int_eq(in->connections, 1); /* the default */
    ck_assert_str_eq(c->instance_names[0], "durable");
    ck_assert_str_eq(c->instance_names[1], "cache");
    ck_assert_int_eq(config_instance_index(c, "cache"), 1);
    ck_assert_int_eq(config_instance_index(c, "durable"), 0);
    ck_assert_int_eq(config_instance_index(c, "nope"), -1);

    static const unsigned char hunter2[32] = {0xf5, 0x2f, 0xbd, 0x32, 0xb2, 0xb3, 0xb8, 0x6f, 0xf8, 0x8e, 0xf6,
                                              0xc4, 0x90, 0x62, 0x82, 0x85, 0xf4, 0x82, 0xaf, 0x15, 0xdd, 0xcb,
                                              0x29, 0x54, 0x1f, 0x94, 0xbc, 0xf5, 0x26, 0xa3, 0xf6, 0xc7};
    ck_assert_uint_eq(c->nusers, 2);
    const struct user_conf *u = &c->users[0];
    ck_assert_str_eq(u->name, "queues");
    ck_assert(memcmp(u->password_sha256, hunter2, 32) == 0);
    ck_assert_uint_eq(u->nowners, 2);
    ck_assert_str_eq(u->owners[0], "queues");
    ck_assert_str_eq(u->owners[1], "cache");
    ck_assert_int_eq(u->all_owners, 0);
    ck_assert_int_eq(u->read_only, 0);
    ck_assert_int_eq(u->scripts, 0);
    ck_assert_int_eq(u->max_clients, 50);
    ck_assert_int_eq(u->rate, 1000);
    ck_assert_int_eq(u->line, 11);
    u = &c->users[1];
    ck_assert(memcmp(u->password_sha256, hunter2, 32) == 0);
    ck_assert_ptr_null(u->password_file);
    ck_assert_int_eq(u->all_owners, 1);
    ck_assert_int_eq(u->read_only, 1);
    ck_assert_int_eq(u->scripts, 1);
    ck_assert_int_eq(u->max_clients, 0); /* no limits by default */
    ck_assert_int_eq(u->rate, 0);

    ck_assert_int_eq(c->threads, 4);
    ck_assert_int_eq(c->max_clients, 100);
    ck_assert_int_eq(c->max_request_bytes, 1024 * 1024);
    ck_assert_int_eq(c->client_output_limit, 16 * 1024 * 1024);
    ck_assert_int_eq(c->max_pending, 10);
    ck_assert_int_eq(c->connect_timeout_ms, 500);
    ck_assert_int_eq(c->shutdown_timeout_ms, 60000);
    ck_assert_int_eq(c->log_level, LOG_DEBUG);
    config_free(c);
}
END_TEST

START_TEST(defaults_and_no_user_warning)
{
    char logpath[160];
    snprintf(logpath, sizeof logpath, "%s/stderr.log", dir);
    fflush(stderr);
    int saved = dup(2);
    ck_assert_ptr_nonnull(freopen(logpath, "w", stderr));
    struct diag d;
    struct config *c = load(BASE, &d);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->threads, 1);
    ck_assert_int_eq(c->max_clients, 10000);
    ck_assert_int_eq(c->max_request_bytes, 512LL * 1024 * 1024);
    ck_assert_int_eq(c->client_output_limit, 64LL * 1024 * 1024);
    ck_assert_int_eq(c->client_output_hard_limit, 256LL * 1024 * 1024);
    ck_assert_int_eq(c->max_memory, 1024LL * 1024 * 1024);
    ck_assert_int_eq(c->max_pending, 1024);
    ck_assert_int_eq(c->connect_timeout_ms, 2000);
    ck_assert_int_eq(c->shutdown_timeout_ms, 5000);
    ck_assert_int_eq(c->log_level, LOG_INFO);
    ck_assert_ptr_null(c->admin_host);
    ck_assert_uint_eq(c->nusers, 0);
    ck_assert_ptr_null(c->instances[1].password);
    ck_assert_ptr_null(c->instances[1].password_file);
    config_free(c);
    size_t len;
    char *log = file_read_secret(logpath, &len);
    ck_assert_ptr_nonnull(log);
    ck_assert_msg(strncmp(log, "WARN ", 5) == 0 && strstr(log, "no AUTH"), "log: %s", log);
    free(log);
}
END_TEST

START_TEST(dev_config_parses)
{
    /* conf/keygate.conf needs build/secrets (mode 0600) from scripts/gen-certs; run it
     * when they exist, else check that only the password files are missing. */
    struct diag d = {0};
    struct config *c = config_load("conf/keygate.conf", &d);
    if (c) {
        ck_assert_uint_eq(c->nlistens, 1);
        ck_assert_str_eq(c->listens[0].host, "127.0.0.1");
        ck_assert_int_eq(c->listens[0].port, 6400);
        ck_assert_int_eq(c->admin_port, 9400);
        ck_assert_str_eq(c->registry_path, "conf/registry.conf");
        ck_assert_uint_eq(c->ninstances, 2);
        ck_assert_str_eq(c->instances[0].ca, "conf/../build/certs/ca.crt");
        ck_assert_str_eq(c->instances[1].server_name, "localhost");
        ck_assert_uint_eq(c->registry->count, 14);
        config_free(c);
        return;
    }
    for (size_t i = 0; i < d.count; i++)
        ck_assert_msg(strstr(d.lines[i], "password file 'conf/../build/secrets/"), "unexpected: %s", d.lines[i]);
    diag_free(&d);
}
END_TEST

START_TEST(error_unknown_directive)
{
    expect_error(BASE "listne 1.2.3.4:5\n", 5, "unknown directive 'listne'");
}
END_TEST

START_TEST(error_argument_counts)
{
    expect_error(BASE "threads\n", 5, "missing argument");
    expect_error(BASE "threads 1 2\n", 5, "too many arguments");
    expect_error(BASE "registry a b\n", 5, "too many arguments");
    expect_error("registry \"\"\n", 1, "empty path");
    expect_error(BASE "instance x 1.2.3.4:5\n", 5, "missing argument");
    expect_error(BASE "user\n", 5, "missing argument");
    expect_error(BASE "listen\n", 5, "missing argument");
}
END_TEST

START_TEST(error_bad_numbers)
{
    expect_error(BASE "threads 0\n", 5, "bad threads '0'");
    expect_error(BASE "threads 65\n", 5, "bad threads '65'");
    expect_error(BASE "threads four\n", 5, "bad threads");
    expect_error(BASE "max-clients -1\n", 5, "bad max-clients");
    expect_error(BASE "max-clients 99999999999999999999\n", 5, "bad max-clients");
    expect_error(BASE "max-pending 0\n", 5, "bad max-pending");
    expect_error(BASE "max-request-size 1xb\n", 5, "bad max-request-size");
    expect_error(BASE "client-output-limit 0\n", 5, "bad client-output-limit");
    expect_error(BASE "connect-timeout 10\n", 5, "bad connect-timeout '10'");
    expect_error(BASE "shutdown-timeout 0s\n", 5, "bad shutdown-timeout");
    expect_error(BASE "log-level verbose\n", 5, "bad log-level 'verbose'");
    expect_error(BASE "threads 2\nthreads 3\n", 6, "given twice (first on line 5)");
    expect_error(BASE "admin-listen 127.0.0.1:1\nadmin-listen 127.0.0.1:2\n", 6, "given twice");
    expect_error(BASE "instance c2 1.2.3.4:5 plain connections=0\n", 5, "bad connections");
}
END_TEST

/* max-memory and the hard output limit (issue 10 item 12) */
START_TEST(test_issue10_item12_memory_directives)
{
    struct diag d;
    struct config *c = load(BASE "max-memory 256mb\nclient-output-limit 8mb\nclient-output-hard-limit 32mb\n", &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->max_memory, 256LL * 1024 * 1024);
    ck_assert_int_eq(c->client_output_limit, 8LL * 1024 * 1024);
    ck_assert_int_eq(c->client_output_hard_limit, 32LL * 1024 * 1024);
    config_free(c);
    diag_free(&d);
    c = load(BASE "max-memory 0\n", &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->max_memory, 0);
    config_free(c);
    diag_free(&d);
    expect_error(BASE "max-memory lots\n", 5, "bad max-memory");
    expect_error(BASE "client-output-limit 8mb\nclient-output-hard-limit 4mb\n", 6,
                 "client-output-hard-limit (4194304) is below client-output-limit");
}
END_TEST

/* issue 19 item 3: the hard limit's default is 256mb and follows a soft limit set above it;
 * a hard limit written below the soft one is still refused, at its own line */
START_TEST(test_issue19_item3_hard_limit_default)
{
    struct diag d;
    struct config *c = load(BASE "client-output-limit 512mb\n", &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->client_output_limit, 512LL * 1024 * 1024);
    ck_assert_int_eq(c->client_output_hard_limit, 512LL * 1024 * 1024);
    config_free(c);
    diag_free(&d);
    c = load(BASE "client-output-limit 128mb\n", &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->client_output_hard_limit, 256LL * 1024 * 1024);
    config_free(c);
    diag_free(&d);
    c = load(BASE "client-output-hard-limit 64mb\n", &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->client_output_hard_limit, 64LL * 1024 * 1024);
    config_free(c);
    diag_free(&d);
    expect_error(BASE "client-output-limit 2gb\nclient-output-hard-limit 1gb\n", 6,
                 "client-output-hard-limit (1073741824) is below client-output-limit (2147483648)");
    expect_error(BASE "client-output-hard-limit 1mb\n", 5, "is below client-output-limit");
}
END_TEST

/* the timeouts of issue 12: durations, 0 = none, and their defaults */
START_TEST(timeout_directives)
{
    struct diag d;
    struct config *c = load(BASE, &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->client_timeout_ms, 0);
    ck_assert_int_eq(c->client_header_timeout_ms, 10000);
    ck_assert_int_eq(c->backend_timeout_ms, 5000);
    config_free(c);
    diag_free(&d);
    c = load(BASE "client-timeout 5m\nclient-header-timeout 250ms\nbackend-timeout 0\n", &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->client_timeout_ms, 300000);
    ck_assert_int_eq(c->client_header_timeout_ms, 250);
    ck_assert_int_eq(c->backend_timeout_ms, 0);
    config_free(c);
    diag_free(&d);
    expect_error(BASE "client-timeout 30\n", 5, "bad client-timeout '30' (a duration such as 500ms, 2s, 1m, or 0");
    expect_error(BASE "backend-timeout -1s\n", 5, "bad backend-timeout");
    expect_error(BASE "client-header-timeout 0s\n", 5, "bad client-header-timeout");
}
END_TEST

/* issue 14: the metrics directives, and every registry entry given its stats slot by config_load */
START_TEST(metrics_directives)
{
    struct diag d;
    struct config *c = load(BASE, &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->backend_info_interval_ms, 10000);
    ck_assert_int_eq(c->durable_headroom_warn_pct, 20);
    ck_assert_int_eq(c->namespace_scan_interval_ms, 0); /* the sampler is off by default */
    config_free(c);
    diag_free(&d);
    c = load(BASE "backend-info-interval 2s\ndurable-headroom-warn 35%\nnamespace-scan-interval 5m\n", &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->backend_info_interval_ms, 2000);
    ck_assert_int_eq(c->durable_headroom_warn_pct, 35);
    ck_assert_int_eq(c->namespace_scan_interval_ms, 300000);
    for (size_t i = 0; i < c->registry->count; i++) ck_assert_uint_ne(c->registry->entries[i].stats_slot, 0);
    config_free(c);
    diag_free(&d);
    c = load(BASE "durable-headroom-warn 0\n", &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->durable_headroom_warn_pct, 0);
    config_free(c);
    diag_free(&d);
    expect_error(BASE "backend-info-interval 0\n", 5, "bad backend-info-interval '0'");
    expect_error(BASE "durable-headroom-warn 100%\n", 5, "bad durable-headroom-warn '100%' (a percentage 0%..99%");
    expect_error(BASE "durable-headroom-warn x%\n", 5, "bad durable-headroom-warn");
    expect_error(BASE "durable-headroom-warn %\n", 5, "bad durable-headroom-warn");
    expect_error(BASE "namespace-scan-interval 10\n", 5, "bad namespace-scan-interval '10'");
}
END_TEST

/* issue 20: the near cache's directives, their defaults and their errors */
START_TEST(near_cache_directives)
{
    struct diag d;
    struct config *c = load(BASE, &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->near_cache_memory, 64LL * 1024 * 1024);
    ck_assert_str_eq(c->near_cache_group, "default");
    ck_assert_int_eq(c->near_cache_trim_interval_ms, 60000);
    ck_assert_int_eq(c->near_cache_marker_timeout_ms, 3600000);
    config_free(c);
    diag_free(&d);
    c = load(BASE "near-cache-memory 16mb\nnear-cache-group api-eu\nnear-cache-trim-interval 10s\n"
                  "near-cache-marker-timeout 2h\n",
             &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->near_cache_memory, 16LL * 1024 * 1024);
    ck_assert_str_eq(c->near_cache_group, "api-eu");
    ck_assert_int_eq(c->near_cache_trim_interval_ms, 10000);
    ck_assert_int_eq(c->near_cache_marker_timeout_ms, 7200000);
    config_free(c);
    diag_free(&d);
    expect_error(BASE "near-cache-memory 0\n", 5, "bad near-cache-memory '0'");
    expect_error(BASE "near-cache-trim-interval 10\n", 5, "bad near-cache-trim-interval '10'");
    expect_error(BASE "near-cache-marker-timeout x\n", 5, "bad near-cache-marker-timeout 'x'");
    expect_error(BASE "near-cache-group a b\n", 5, "near-cache-group: too many arguments");
}
END_TEST

/* log-format text|json (issue 14): text by default, json when asked, anything else a FILE:LINE error */
START_TEST(log_format_directive)
{
    struct diag d;
    struct config *c = load(BASE, &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->log_format, LOG_FORMAT_TEXT);
    config_free(c);
    diag_free(&d);
    c = load(BASE "log-format json\n", &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->log_format, LOG_FORMAT_JSON);
    config_free(c);
    diag_free(&d);
    c = load(BASE "log-format text\n", &d);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->log_format, LOG_FORMAT_TEXT);
    config_free(c);
    diag_free(&d);
    expect_error(BASE "log-format JSON\n", 5, "bad log-format 'JSON' (text or json)");
    expect_error(BASE "log-format logfmt\n", 5, "bad log-format 'logfmt'");
    expect_error(BASE "log-format\n", 5, "log-format: missing argument (usage: log-format text|json)");
    expect_error(BASE "log-format json text\n", 5, "too many arguments");
    expect_error(BASE "log-format json\nlog-format text\n", 6, "log-format given twice (first on line 5)");
}
END_TEST

START_TEST(error_listen_forms)
{
    expect_error(BASE "listen localhost\n", 5, "expected HOST:PORT");
    expect_error(BASE "listen ::1:6400\n", 5, "brackets");
    expect_error(BASE "listen [::1]6400\n", 5, "[IPV6]:PORT");
    expect_error(BASE "listen 1.2.3.4:0\n", 5, "bad port");
    expect_error(BASE "listen 1.2.3.4:65536\n", 5, "bad port");
    expect_error(BASE "listen 1.2.3.4:12ab\n", 5, "bad port");
    expect_error(BASE "listen :6400\n", 5, "missing host");
    expect_error(BASE "listen unix:\n", 5, "socket path");
    expect_error(BASE "listen 1.2.3.4:5 tls cert=a.crt\n", 5, "needs cert= and key=");
    expect_error(BASE "listen 1.2.3.4:5 cert=a.crt key=a.key\n", 5, "need the word tls");
    expect_error(BASE "listen 1.2.3.4:5 mode=0600\n", 5, "unix sockets only");
    expect_error(BASE "listen unix:/x.sock mode=999\n", 5, "bad mode");
    expect_error(BASE "listen unix:/x.sock speed=fast\n", 5, "unknown listen option 'speed='");
    expect_error(BASE "listen 127.0.0.1:6400\n", 5, "duplicate listen address");
    expect_error(BASE "admin-listen nowhere\n", 5, "bad admin-listen address");
}
END_TEST

START_TEST(error_instance_forms)
{
    expect_error(BASE "instance x 1.2.3.4:5 ca=a\n", 5, "exactly one of tls or plain");
    expect_error(BASE "instance x 1.2.3.4:5\n", 5, "missing argument");
    expect_error(BASE "instance x 1.2.3.4:5 tls plain ca=a\n", 5, "exactly one of tls or plain");
    expect_error(BASE "instance x 1.2.3.4:5 tls\n", 5, "tls needs ca=");
    expect_error(BASE "instance x 1.2.3.4:5 tls ca=a cert=c\n", 5, "cert= and key= go together");
    expect_error(BASE "instance x 1.2.3.4:5 tls ca=a key=k\n", 5, "cert= and key= go together");
    expect_error(BASE "instance x 1.2.3.4:5 plain ca=a\n", 5, "need tls");
    expect_error(BASE "instance x 1.2.3.4:5 plain ca=a ca=b\n", 5, "repeated option 'ca='");
    expect_error(BASE "instance x 1.2.3.4:5 plain color=red\n", 5, "unknown instance option");
    expect_error(BASE "instance x 1.2.3.4:5 plain user=u\n", 5, "user= needs password-file=");
    expect_error(BASE "instance cache 1.2.3.4:5 plain\n", 5, "duplicate instance 'cache' (first defined on line 4)");
    expect_error(BASE "instance x/y 1.2.3.4:5 plain\n", 5, "bad instance name");
    expect_error(BASE "instance x 1.2.3.4 plain\n", 5, "bad instance address");
    /* cluster: a seed list, then the options of a single-server instance */
    expect_error(BASE "instance x cluster tls ca=a\n", 5, "instance 'x': cluster needs its seed nodes");
    expect_error(BASE "instance x cluster\n", 5, "missing argument");
    expect_error(BASE "instance x cluster 1.2.3.4:5,nowhere plain\n", 5, "instance 'x': bad seed address 'nowhere'");
    expect_error(BASE "instance x cluster 1.2.3.4:5 tls\n", 5, "tls needs ca=");
    expect_error(BASE "instance x cluster 1.2.3.4:5 plain color=red\n", 5, "unknown instance option");
    expect_error(BASE "cluster-refresh soon\n", 5, "cluster-refresh");
    /* sentinel: the sentinels, master=, then the options of a single-server instance */
    expect_error(BASE "instance x sentinel master=m plain\n", 5, "instance 'x': sentinel needs its sentinels");
    expect_error(BASE "instance x sentinel 1.2.3.4:5 plain\n", 5, "instance 'x': sentinel needs master=NAME");
    expect_error(BASE "instance x sentinel 1.2.3.4:5,nowhere master=m plain\n", 5,
                 "instance 'x': bad seed address 'nowhere'");
    expect_error(BASE "instance x sentinel 1.2.3.4:5 master=m plain sentinel-tls=yes\n", 5,
                 "sentinel-tls=yes needs tls");
    expect_error(BASE "instance x sentinel 1.2.3.4:5 master=m plain sentinel-tls=maybe\n", 5, "bad sentinel-tls");
    expect_error(BASE "instance x sentinel 1.2.3.4:5 master=m plain sentinel-tls=no sentinel-tls=no\n", 5,
                 "repeated option 'sentinel-tls='");
    expect_error(BASE "instance x sentinel 1.2.3.4:5 master=m master=n plain\n", 5, "repeated option 'master='");
    expect_error(BASE "instance x 1.2.3.4:5 master=m plain\n", 5, "unknown instance option 'master='");
    expect_error(BASE "instance x cluster 1.2.3.4:5 sentinel-tls=no plain\n", 5,
                 "unknown instance option 'sentinel-tls='");
    expect_error(BASE "failover-hold soon\n", 5, "failover-hold");
    expect_error(BASE "replicas-timeout 0\n", 5, "replicas-timeout");
    struct diag d;
    ck_assert_ptr_null(load(BASE "instance x sentinel 1.2.3.4:5 plain\n", &d));
    ck_assert_int_eq(d.count, 1); /* not also "bad instance address" and "unknown instance option" */
    diag_free(&d);
}
END_TEST

START_TEST(sentinel_instance)
{
    struct diag d;
    struct config *c =
        load(BASE "instance ha sentinel 10.0.0.1:26379,10.0.0.2:26380 master=mymaster plain connections=2\n"
                  "instance hat sentinel 10.0.0.1:26379 master=m2 tls ca=ca.crt sentinel-tls=no\n"
                  "instance hau sentinel 10.0.0.1:26379 master=m3 tls ca=ca.crt\n"
                  "failover-hold 2s\nreplicas-timeout 250ms\n",
             &d);
    ck_assert_msg(c != NULL, "%s", d.count ? d.lines[0] : "?");
    const struct instance_conf *in = &c->instances[config_instance_index(c, "ha")];
    ck_assert_int_eq(in->sentinel, 1);
    ck_assert_int_eq(in->cluster, 0);
    ck_assert_int_eq(in->nseeds, 2);
    ck_assert_str_eq(in->seed_host[1], "10.0.0.2");
    ck_assert_int_eq(in->seed_port[1], 26380);
    ck_assert_str_eq(in->master_name, "mymaster");
    ck_assert_int_eq(in->sentinel_tls, 0);
    ck_assert_int_eq(in->connections, 2);
    ck_assert_int_eq(c->instances[config_instance_index(c, "hat")].sentinel_tls, 0);
    ck_assert_int_eq(c->instances[config_instance_index(c, "hau")].sentinel_tls, 1); /* the line's TLS by default */
    ck_assert_int_eq(c->failover_hold_ms, 2000);
    ck_assert_int_eq(c->replicas_timeout_ms, 250);
    /* the background threads' own copy outlives the config (a double free once, under ASan) */
    struct instance_conf copy;
    config_instance_copy(&copy, in);
    config_free(c);
    ck_assert_str_eq(copy.master_name, "mymaster");
    ck_assert_str_eq(copy.seed_host[1], "10.0.0.2");
    config_instance_free(&copy);
    diag_free(&d);
    c = load(BASE, &d);
    ck_assert_int_eq(c->failover_hold_ms, 5000);
    ck_assert_int_eq(c->replicas_timeout_ms, 1000);
    config_free(c);
    diag_free(&d);
}
END_TEST

START_TEST(cluster_instance)
{
    struct diag d;
    struct config *c = load(BASE "instance big cluster 10.0.0.1:7001,[::1]:7002,h3:7003 plain connections=2\n"
                                 "cluster-refresh 3s\n",
                            &d);
    ck_assert_msg(c != NULL, "%s", d.count ? d.lines[0] : "?");
    int i = config_instance_index(c, "big");
    ck_assert_int_ge(i, 0);
    const struct instance_conf *in = &c->instances[i];
    ck_assert_int_eq(in->cluster, 1);
    ck_assert_int_eq(in->nseeds, 3);
    ck_assert_str_eq(in->seed_host[0], "10.0.0.1");
    ck_assert_int_eq(in->seed_port[0], 7001);
    ck_assert_str_eq(in->seed_host[1], "::1");
    ck_assert_int_eq(in->seed_port[2], 7003);
    ck_assert_str_eq(in->host, "10.0.0.1"); /* the first seed */
    ck_assert_int_eq(in->connections, 2);
    ck_assert_int_eq(c->cluster_refresh_ms, 3000);
    ck_assert_int_eq(c->instances[0].cluster, 0);
    config_free(c);
    diag_free(&d);
}
END_TEST

/* The near cache on a cluster instance is not supported: --check (config_load) refuses a near-cache=
 * namespace whose instance is a cluster, at its registry line; the same namespace on a single
 * server, and a cluster instance without near-cache= namespaces, load. */
START_TEST(near_cache_on_cluster_refused)
{
    write_file("nc-registry.conf",
               "namespace q: instance=durable ttl=none owner=queues\n"
               "namespace keygate: instance=cache ttl=none owner=keygate\n"
               "namespace users: instance=cache ttl=none near-cache=60s owner=api\n",
               0644);
    struct diag d;
    ck_assert_ptr_null(load("listen 127.0.0.1:6400\n"
                            "registry nc-registry.conf\n"
                            "instance durable 127.0.0.1:6401 plain\n"
                            "instance cache cluster 127.0.0.1:7001,127.0.0.1:7002 plain\n",
                            &d));
    ck_assert_uint_eq(d.count, 1);
    char reg[160], want[512];
    snprintf(reg, sizeof reg, "%s/nc-registry.conf", dir);
    snprintf(want, sizeof want,
             "%s:3: namespace 'users:' has near-cache=1m, but instance 'cache' is a Redis Cluster (%s:4): the near "
             "cache is not supported on a cluster instance",
             reg, conf_path);
    ck_assert_str_eq(d.lines[0], want);
    diag_free(&d);

    struct config *c = load("listen 127.0.0.1:6400\n"
                            "registry nc-registry.conf\n"
                            "instance durable cluster 127.0.0.1:7001 plain\n"
                            "instance cache 127.0.0.1:6402 plain\n",
                            &d);
    ck_assert_msg(c != NULL, "%s", d.count ? d.lines[0] : "?");
    config_free(c);
    diag_free(&d);

    /* a Sentinel-managed instance takes near-cache= (its reader follows the primary) */
    c = load("listen 127.0.0.1:6400\n"
             "registry nc-registry.conf\n"
             "instance durable 127.0.0.1:6401 plain\n"
             "instance cache sentinel 127.0.0.1:26379,127.0.0.1:26380 master=mymaster plain\n",
             &d);
    ck_assert_msg(c != NULL, "%s", d.count ? d.lines[0] : "?");
    config_free(c);
    diag_free(&d);
}
END_TEST

/* issue 22: replicas=N on a cluster instance is refused at its registry line; on a single server it loads */
START_TEST(replicas_on_cluster_refused)
{
    write_file("rep-registry.conf",
               "namespace q: instance=durable ttl=none owner=queues replicas=1\n"
               "namespace c: instance=cache ttl=1h owner=cache replicas=2\n",
               0644);
    struct diag d;
    ck_assert_ptr_null(load("listen 127.0.0.1:6400\n"
                            "registry rep-registry.conf\n"
                            "instance durable 127.0.0.1:6401 plain\n"
                            "instance cache cluster 127.0.0.1:7001,127.0.0.1:7002 plain\n",
                            &d));
    ck_assert_uint_eq(d.count, 1);
    char reg[160], want[512];
    snprintf(reg, sizeof reg, "%s/rep-registry.conf", dir);
    snprintf(want, sizeof want,
             "%s:2: namespace 'c:' has replicas=2, but instance 'cache' is a Redis Cluster (%s:4): replicas= is not "
             "supported on a cluster instance (a single server or a sentinel instance)",
             reg, conf_path);
    ck_assert_str_eq(d.lines[0], want);
    diag_free(&d);
    struct config *c = load("listen 127.0.0.1:6400\n"
                            "registry rep-registry.conf\n"
                            "instance durable 127.0.0.1:6401 plain\n"
                            "instance cache 127.0.0.1:6402 plain\n",
                            &d);
    ck_assert_msg(c != NULL, "%s", d.count ? d.lines[0] : "?");
    config_free(c);
    diag_free(&d);
}
END_TEST

START_TEST(error_password_files)
{
    char want[256];
    snprintf(want, sizeof want, "password file '%s/secrets/open.pass' has mode 0644", dir);
    expect_error(BASE "instance x 1.2.3.4:5 plain password-file=secrets/open.pass\n", 5, want);
    expect_error(BASE "user a password-file=secrets/open.pass owners=q access=rw\n", 5, want);
    snprintf(want, sizeof want, "password file '%s/secrets/missing.pass'", dir);
    expect_error(BASE "instance x 1.2.3.4:5 plain password-file=secrets/missing.pass\n", 5, want);
    expect_error(BASE "instance x 1.2.3.4:5 plain password-file=secrets/empty.pass\n", 5, "empty");
    expect_error(BASE "instance x 1.2.3.4:5 plain password-file=secrets\n", 5, "not a regular file");
}
END_TEST

START_TEST(error_user_forms)
{
    expect_error(BASE "user a owners=q access=rw\n", 5, "needs password-file= or sha256=");
    expect_error(BASE "user a password-file=secrets/u.pass sha256=00 owners=q access=rw\n", 5,
                 "give one password-file= or sha256=");
    expect_error(BASE "user a sha256=abc owners=q access=rw\n", 5, "bad sha256");
    expect_error(BASE "user a password-file=secrets/u.pass access=rw\n", 5, "needs owners=");
    expect_error(BASE "user a password-file=secrets/u.pass owners=q\n", 5, "needs access=");
    expect_error(BASE "user a password-file=secrets/u.pass owners=q access=rx\n", 5, "bad access 'rx'");
    expect_error(BASE "user a password-file=secrets/u.pass owners=q,,c access=ro\n", 5, "empty owner");
    expect_error(BASE "user a password-file=secrets/u.pass owners=*,q access=ro\n", 5, "owners=* stands alone");
    expect_error(BASE "user a password-file=secrets/u.pass owners=q access=ro scripts=maybe\n", 5, "bad scripts");
    expect_error(BASE "user a password-file=secrets/u.pass owners=q access=ro\n"
                      "user a password-file=secrets/u.pass owners=q access=ro\n",
                 6, "duplicate user 'a' (first defined on line 5)");
    expect_error(BASE "user a password-file=secrets/u.pass owners=q access=ro bogus\n", 5,
                 "unknown user option 'bogus'");
    /* max-clients= and rate=: 1..1000000, once */
    expect_error(BASE "user a password-file=secrets/u.pass owners=q access=ro max-clients=0\n", 5,
                 "bad max-clients '0' (1..1000000)");
    expect_error(BASE "user a password-file=secrets/u.pass owners=q access=ro max-clients=-3\n", 5,
                 "bad max-clients '-3'");
    expect_error(BASE "user a password-file=secrets/u.pass owners=q access=ro max-clients=ten\n", 5,
                 "bad max-clients 'ten'");
    expect_error(BASE "user a password-file=secrets/u.pass owners=q access=ro rate=0\n", 5,
                 "bad rate '0' (1..1000000)");
    expect_error(BASE "user a password-file=secrets/u.pass owners=q access=ro rate=1000001\n", 5, "bad rate '1000001'");
    expect_error(BASE "user a password-file=secrets/u.pass owners=q access=ro rate=1.5\n", 5, "bad rate '1.5'");
    expect_error(BASE "user a password-file=secrets/u.pass owners=q access=ro rate=\n", 5, "bad rate ''");
    expect_error(BASE "user a password-file=secrets/u.pass owners=q access=ro rate=5 rate=6\n", 5,
                 "repeated option 'rate='");
}
END_TEST

START_TEST(error_required_directives_at_line_0)
{
    struct diag d;
    ck_assert_ptr_null(load("# nothing\n", &d));
    ck_assert_uint_eq(d.count, 3);
    assert_diag(&d, conf_path, 0, "no listen");
    assert_diag(&d, conf_path, 0, "no registry");
    assert_diag(&d, conf_path, 0, "no instance");
    diag_free(&d);
}
END_TEST

START_TEST(error_unterminated_quote)
{
    expect_error(BASE "log-level \"info\n", 5, "unterminated quote");
}
END_TEST

START_TEST(registry_errors_join_the_same_diag)
{
    write_file("bad-registry.conf",
               "namespace q: instance=durable ttl=none owner=queues\n"
               "namespace x: instance=elsewhere ttl=1h owner=o\n",
               0644);
    struct diag d;
    ck_assert_ptr_null(load("listen 127.0.0.1:6400\n"
                            "registry bad-registry.conf\n"
                            "instance durable 127.0.0.1:6401 plain\n"
                            "instance cache 127.0.0.1:6402 plain\n"
                            "threads 0\n",
                            &d));
    ck_assert_uint_eq(d.count, 2);
    assert_diag(&d, conf_path, 5, "bad threads");
    char reg[160];
    snprintf(reg, sizeof reg, "%s/bad-registry.conf", dir);
    assert_diag(&d, reg, 2, "unknown instance 'elsewhere' (valid instances: durable, cache)");
    diag_free(&d);

    /* an instance line with a bad option still defines its name for the registry */
    ck_assert_ptr_null(load("listen 127.0.0.1:6400\n"
                            "registry registry.conf\n"
                            "instance durable 127.0.0.1:6401 tls\n"
                            "instance cache 127.0.0.1:6402 plain\n",
                            &d));
    ck_assert_uint_eq(d.count, 1);
    assert_diag(&d, conf_path, 3, "tls needs ca=");
    diag_free(&d);

    snprintf(reg, sizeof reg, "%s/missing.conf", dir);
    ck_assert_ptr_null(load("listen 127.0.0.1:6400\nregistry missing.conf\n"
                            "instance durable 127.0.0.1:6401 plain\n",
                            &d));
    assert_diag(&d, reg, 0, "cannot open");
    diag_free(&d);
}
END_TEST

START_TEST(missing_config_file)
{
    struct diag d = {0};
    ck_assert_ptr_null(config_load("/nonexistent/keygate.conf", &d));
    assert_diag(&d, "/nonexistent/keygate.conf", 0, "cannot open");
    diag_free(&d);
}
END_TEST

START_TEST(size_parse_forms)
{
    static const struct {
        const char *s;
        int64_t bytes;
    } good[] = {{"1024", 1024},
                {"0", 0},
                {"64kb", 65536},
                {"16mb", 16777216},
                {"1gb", 1073741824},
                {"1GB", 1073741824},
                {"2k", 2000},
                {"3m", 3000000},
                {"1g", 1000000000},
                {"512MB", 536870912},
                {"7b", 7}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int64_t n = -1;
        ck_assert_msg(size_parse(good[i].s, &n) == 0, "%s", good[i].s);
        ck_assert_int_eq(n, good[i].bytes);
    }
    static const char *const bad[] = {
        "", "kb", "-1", "1.5mb", "1 mb", "1tb", "1mbb", "99999999999gb", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t n;
        ck_assert_msg(size_parse(bad[i], &n) == -1, "'%s' should be refused", bad[i]);
    }
}
END_TEST

/* ---- the example configuration names every directive and option the parser knows ---- */

/* The whole of a repo file (the tests run from the repo root), malloc'd. */
static char *repo_file(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s (run from the repo root)", path);
    char *text = NULL;
    size_t cap = 0;
    ck_assert_int_ge(getdelim(&text, &cap, '\0', f), 0);
    fclose(f);
    return text;
}

/* Does some line of text start with `name` (after an optional "#" and blanks), followed by a
 * blank or the line's end? */
static int has_directive_line(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *p = line;
        if (*p == '#') p++;
        while (*p == ' ') p++;
        if (strncmp(p, name, n) == 0 && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) return 1;
    }
    return 0;
}

/* conf/keygate.conf, the configuration a new installation starts from, has a line (or a
 * commented example) for every directive of config.c's table, and names every name= option of
 * their usages (instance's sentinel-password-file=, ...): a directive added to the table without
 * its explanation fails here. Checked to fail with cluster-refresh's lines removed. */
START_TEST(example_conf_names_every_directive)
{
    char *text = repo_file("conf/keygate.conf");
    ck_assert_int_ge(config_directive_count(), 30);
    for (size_t i = 0; i < config_directive_count(); i++) {
        const char *name = config_directive_name(i), *usage = config_directive_usage(i);
        ck_assert_msg(has_directive_line(text, name), "conf/keygate.conf has no line for directive '%s'", name);
        /* every option of its usage: the words ending in '=' ("ca=F" -> "ca=") */
        for (const char *p = usage; *p; p++) {
            if (*p != '=') continue;
            const char *b = p;
            while (b > usage && (b[-1] == '-' || (b[-1] >= 'a' && b[-1] <= 'z') || (b[-1] >= '0' && b[-1] <= '9'))) b--;
            char opt[64];
            snprintf(opt, sizeof opt, "%.*s=", (int)(p - b), b);
            ck_assert_msg(p > b && strstr(text, opt) != NULL, "conf/keygate.conf does not name %s's option %s", name,
                          opt);
        }
    }
    ck_assert_ptr_null(config_directive_name(config_directive_count()));
    /* the instance kinds besides a single server */
    ck_assert_msg(strstr(text, "instance NAME cluster ") && strstr(text, "instance NAME sentinel "),
                  "conf/keygate.conf does not show the cluster and sentinel instance forms");
    free(text);
}
END_TEST

/* The header of a registry file (its comment lines before the first entry) explains every
 * kind (namespace, channel, default) and every field of registry.c's table: name= for a value,
 * the bare word for a flag. */
static void expect_registry_header_complete(const char *path)
{
    char *text = repo_file(path);
    char *end = text;
    for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (*line != '#' && *line != '\n') break;
        end = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line);
    }
    *end = '\0';
    static const char *const kinds[] = {"namespace", "channel", "default"};
    for (size_t i = 0; i < 3; i++)
        ck_assert_msg(strstr(text, kinds[i]) != NULL, "%s's header does not explain the kind '%s'", path, kinds[i]);
    size_t n = 0;
    for (const char *f; (f = registry_field_name(n)) != NULL; n++) {
        char word[64];
        snprintf(word, sizeof word, registry_field_is_flag(n) ? "#   %s " : "#   %s=", f);
        ck_assert_msg(strstr(text, word) != NULL, "%s's header has no entry '%s' for the field %s", path, word + 4, f);
    }
    ck_assert_int_ge(n, 10);
    free(text);
}

/* conf/registry.conf (the full example, docs/registry-example.conf) and the packaged one. Checked
 * to fail with the header's replicas= entry removed. */
START_TEST(registry_header_names_every_field)
{
    expect_registry_header_complete("conf/registry.conf");
    expect_registry_header_complete("debian/conf/registry.conf"); /* the packaged one */
}
END_TEST

/* An unknown directive's error names the nearest known one: a swapped pair, a letter missing or
 * wrong, an unfinished name; nothing when no directive is near. */
START_TEST(error_unknown_directive_suggests)
{
    expect_error(BASE "listne 1.2.3.4:5\n", 5, "unknown directive 'listne' (did you mean 'listen'?)");
    expect_error(BASE "failover-hld 5s\n", 5, "(did you mean 'failover-hold'?)");
    expect_error(BASE "max-clinets 5\n", 5, "(did you mean 'max-clients'?)");
    expect_error(BASE "backend-info 5s\n", 5, "(did you mean 'backend-info-interval'?)");
    struct diag d;
    ck_assert_ptr_null(load(BASE "frobnicate 1\n", &d));
    assert_diag(&d, conf_path, 5, "unknown directive 'frobnicate'");
    ck_assert_ptr_null(strstr(d.lines[0], "did you mean"));
    diag_free(&d);
}
END_TEST

/* admin-listen on an address a listen takes is an error at the admin-listen line, also with a
 * wildcard host on either side; another port, or another host, is fine. */
START_TEST(error_admin_listen_on_listen_address)
{
    expect_error(BASE "admin-listen 127.0.0.1:6400\n", 5,
                 "admin-listen 127.0.0.1:6400 is the address of listen on line 1");
    expect_error(BASE "admin-listen 0.0.0.0:6400\n", 5, "is the address of listen on line 1");
    expect_error("listen 0.0.0.0:7000\nregistry registry.conf\ninstance durable 127.0.0.1:6401 plain\n"
                 "instance cache 127.0.0.1:6402 plain\nadmin-listen 127.0.0.1:7000\n",
                 5, "is the address of listen on line 1");
    struct diag d;
    struct config *c = load(BASE "admin-listen 127.0.0.1:9400\n", &d);
    ck_assert_msg(c != NULL, "%s", d.count ? d.lines[0] : "");
    config_free(c);
    diag_free(&d);
    c = load(BASE "admin-listen 127.0.0.2:6400\n", &d);
    ck_assert_msg(c != NULL, "%s", d.count ? d.lines[0] : "");
    config_free(c);
    diag_free(&d);
}
END_TEST

/* A user naming an owner no registry line has is an error at the user's line (not a warning
 * after OK): --check fails and a reload bringing it in is refused. */
START_TEST(error_unknown_owner)
{
    expect_error(BASE "user app sha256=" SHA_OF_X " owners=queues,queus access=rw\n", 5, "user 'app': no namespace of");
    expect_error(BASE "user app sha256=" SHA_OF_X " owners=queus access=rw\n", 5, "has owner 'queus'");
    struct diag d;
    struct config *c = load(BASE "user app sha256=" SHA_OF_X " owners=queues,cache,notifications access=rw\n", &d);
    ck_assert_msg(c != NULL, "%s", d.count ? d.lines[0] : "");
    config_free(c);
    diag_free(&d);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("load");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, full_config);
    tcase_add_test(tc, defaults_and_no_user_warning);
    tcase_add_test(tc, dev_config_parses);
    tcase_add_test(tc, test_issue10_item12_memory_directives);
    tcase_add_test(tc, test_issue19_item3_hard_limit_default);
    tcase_add_test(tc, timeout_directives);
    tcase_add_test(tc, metrics_directives);
    tcase_add_test(tc, size_parse_forms);
    tcase_add_test(tc, missing_config_file);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, error_unknown_directive);
    tcase_add_test(tc, error_argument_counts);
    tcase_add_test(tc, error_bad_numbers);
    tcase_add_test(tc, error_listen_forms);
    tcase_add_test(tc, error_instance_forms);
    tcase_add_test(tc, error_password_files);
    tcase_add_test(tc, cluster_instance);
    tcase_add_test(tc, sentinel_instance);
    tcase_add_test(tc, near_cache_on_cluster_refused);
    tcase_add_test(tc, replicas_on_cluster_refused);
    tcase_add_test(tc, error_user_forms);
    tcase_add_test(tc, error_required_directives_at_line_0);
    tcase_add_test(tc, error_unterminated_quote);
    tcase_add_test(tc, registry_errors_join_the_same_diag);
    tcase_add_test(tc, log_format_directive);
    tcase_add_test(tc, near_cache_directives);
    tcase_add_test(tc, error_unknown_directive_suggests);
    tcase_add_test(tc, error_admin_listen_on_listen_address);
    tcase_add_test(tc, error_unknown_owner);
    suite_add_tcase(s, tc);
    tc = tcase_create("examples");
    tcase_add_test(tc, example_conf_names_every_directive);
    tcase_add_test(tc, registry_header_names_every_field);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
