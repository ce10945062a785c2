/* harness.h: starts real TLS redis-servers (durable, cache) and keygate on free loopback ports for integration tests, plus the Check helpers they share and the registry post-condition. */
#ifndef KEYGATE_HARNESS_H
#define KEYGATE_HARNESS_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include <check.h>
#include <hiredis/hiredis.h>
#include <openssl/ssl.h>

/*
 * Usage (one harness per test case, started once in an unchecked fixture, in the runner):
 *
 *   static struct harness h;
 *   static void setup(void) { ck_assert_msg(harness_start(&h, NULL) == 0, "%s", h.error); }
 *   static void teardown(void) { harness_check_registry(&h); harness_stop(&h); }
 *   ...
 *   int main(void) {
 *       Suite *s = suite_create("name");
 *       TCase *tc = harness_tcase(s, "name", 60, setup, teardown);
 *       harness_add_test(tc, ...);
 *       return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;   (CK_FORK)
 *   }
 *
 * Every test runs in its own forked process (CK_FORK): a test that crashes, aborts or
 * times out fails alone, and the tests after it run against healthy servers. The servers
 * are the runner's (a child subreaper), also those a test restarts (double-forked, see
 * harness.c), and what a start, kill or restart changes in struct harness is published
 * in shared memory, so each test and the teardown see the pids as the last test left
 * them. Before each test (a checked fixture, in its process) and before the teardown the
 * harness heals: servers left stopped are continued, a dead or hung backend is started
 * again, and keygate is restarted with the suite's keygate.conf and registry.conf when it
 * is dead, hung, or runs files a test changed (harness_keygate_restart, a rewrite) and
 * did not put back. keygate found ended badly (a signal other than SIGKILL, an exit
 * status other than 0) or hung fails the suite, as in a teardown. A test that needs
 * another configuration restarts keygate itself; it need not put the default back.
 *
 * What a test process sets in memory (globals, connections) is gone when it ends: state
 * every test needs belongs in the unchecked setup; everything else a test makes itself.
 * Keys on the backends stay (the teardown's post-condition checks them): tests use keys of
 * their own.
 *
 * Safety net: every server gets PR_SET_PDEATHSIG=SIGKILL against the runner, and the
 * runner's atexit handler plus SIGINT/SIGTERM/SIGABRT handlers kill every server in the
 * shared children table, so no redis-server or keygate outlives the runner. Each test's
 * process gets PR_SET_PDEATHSIG too. SIGPIPE is ignored (keygate closing a socket must
 * fail a test, not kill it).
 *
 * Environment: KEYGATE_BIN (default build/keygate); HARNESS_KEEP=1 keeps the temp dir
 * (logs, configs) after harness_stop; HARNESS_TEST=name,glob,... runs only the tests so
 * named (harness_add_test; each must pass alone); CK_FORK=no runs every test in the
 * runner, for a debugger (a crash then ends the suite). The cwd must be the repo root.
 */

struct harness_opts {
    const char *registry_text;  /* registry.conf contents; NULL: copy the repo's conf/registry.conf */
    const char *extra_config;   /* lines appended to keygate.conf (newline-terminated); may be NULL */
    int admin;                  /* nonzero: add `admin-listen 127.0.0.1:<admin_port>` */
    const char *instances_text; /* NULL: the two TLS `instance` lines the harness writes; else these
                                   lines (newline-terminated) replace them (harness_keygate_restart
                                   builds them from the running backends' ports) */
};

struct harness_backend {
    char name[16];     /* "durable" or "cache" */
    int tls_port;      /* what keygate connects to */
    int plain_port;    /* direct, unencrypted test access */
    pid_t pid;         /* 0 when not running */
    char password[65]; /* also in pass_file, mode 0600 */
    char pass_file[PATH_MAX];
    char conf_file[PATH_MAX]; /* redis.conf: ports, TLS, policy, dir; reused on restart */
    char log_file[PATH_MAX];
};

struct harness {
    char root[1024]; /* repo root (the cwd at start) */
    char dir[256];   /* temp dir holding configs, data, logs */
    char conf_file[PATH_MAX];
    char registry_file[PATH_MAX];
    char log_file[PATH_MAX];            /* keygate's stdout + stderr */
    int port;                           /* keygate's listen port on 127.0.0.1 */
    int admin_port;                     /* 0 unless opts->admin */
    int probe_port;                     /* keygate's admin-listen port unless extra_config names its own
                                           (= admin_port when opts->admin); harness_wait_connected reads
                                           /metrics on the port of the keygate.conf keygate runs */
    pid_t keygate_pid;                  /* 0 when not running */
    int keygate_status;                 /* waitpid status once keygate exited, else -1 */
    struct harness_backend backends[2]; /* [0] durable, [1] cache */
    char error[1024];                   /* why the last failing call failed */
    /* a second keygate (harness_peer_start), 0 when none: killed by the heal before each test */
    pid_t peer_pid;
    int peer_port;
    char peer_conf_file[PATH_MAX];
    char peer_log_file[PATH_MAX];
};

/* Start backends and keygate; waits until keygate answers PING (10 s). On failure
 * returns -1, fills h->error, prints the logs to stderr and leaves nothing running. */
int harness_start(struct harness *h, const struct harness_opts *o) __attribute__((warn_unused_result));

/* Stop keygate then the backends (SIGTERM, SIGKILL after 5 s); remove the temp dir. Idempotent. */
void harness_stop(struct harness *h);

/* A new blocking connection to keygate (5 s connect, 10 s I/O timeouts); NULL on failure.
 * The caller redisFree()s it. */
redisContext *harness_client(struct harness *h);

/* A new plain, authenticated connection to backend "durable" or "cache"; NULL on failure. */
redisContext *harness_direct(struct harness *h, const char *name);

/* The backend named "durable" or "cache", or NULL. */
struct harness_backend *harness_backend(struct harness *h, const char *name);

/* SIGKILL a backend and wait until it is gone (every thread: its ports are free). Returns 0,
 * or -1 when the name is unknown, it was not running, or it still runs 5 s after SIGKILL
 * (h->error; it then stays recorded, for the next heal). */
int harness_backend_kill(struct harness *h, const char *name) __attribute__((warn_unused_result));

/* Start a backend again with the same ports and data dir; waits until it answers (10 s),
 * then, while keygate runs, until keygate's shared connections to it are all ready again
 * (harness_wait_connected). -1 (h->error) when it does not answer, when the running one
 * does not stop, when its port answers from a process other than the one just started, or
 * when keygate does not reconnect in time. */
int harness_backend_restart(struct harness *h, const char *name) __attribute__((warn_unused_result));

/* Stop keygate and start it again with options o (NULL: defaults), rewriting keygate.conf
 * and registry.conf; the backends keep running, the admin port is kept only if the
 * harness was started with one, and keygate's log is truncated first. Waits until it
 * answers PING, like harness_start. */
int harness_keygate_restart(struct harness *h, const struct harness_opts *o) __attribute__((warn_unused_result));

/* Wait until every shared connection keygate has to the instance named `instance` (NULL:
 * every instance) is ready, read from keygate's /metrics (keygate_instance_connections and
 * _ready, all threads and protocols) on the admin-listen port of the keygate.conf it runs. Only instances whose keygate.conf
 * line points at a running harness backend are waited for. 0 once ready; -1 after
 * timeout_ms with h->error saying which instance had how many of how many ready. */
int harness_wait_connected(struct harness *h, const char *instance, int timeout_ms) __attribute__((warn_unused_result));

/* Start a second keygate with the suite's keygate.conf and registry.conf but its own listen
 * port (peer_port; no admin port) and log, over the same backends (issue 20: two keygates share
 * the near cache's streams), with the lines `extra` (may be NULL) appended; waits until it
 * answers PING. 0, or -1 (h->error). One at a time. */
int harness_peer_start(struct harness *h, const char *extra) __attribute__((warn_unused_result));

/* Stop the second keygate (SIGCONT + SIGTERM, SIGKILL after 5 s); its wait status, -1 when none ran. */
int harness_peer_stop(struct harness *h);

/* A blocking connection to the second keygate (as harness_client); fails the test when it cannot. */
redisContext *harness_must_peer_client(struct harness *h);

/* keygate's log so far, malloc'd and NUL-terminated (the caller frees it); NULL if unreadable. */
char *harness_keygate_log(struct harness *h);

/* ---- shared test helpers (Check): suite runner, connections, reply checks ----
 *
 * Every helper below that checks something fails the running test with ck_assert_msg
 * (a message naming the caller's line and what was expected). The reply helpers
 * (expect_*) take ownership of the reply and free it. */

/* An unused loopback TCP port (bound, read, closed), or -1. */
int harness_free_port(void);

/* Write text to path with mode (a password file); a failure fails the test. */
void harness_write_secret(const char *path, const char *text, mode_t mode);

/* The lowercase hex SHA-256 of s (a `user ... sha256=` password). */
void harness_sha256_hex(const char *s, char out[65]);

/* Milliseconds on the monotonic clock. */
long long now_ms(void);

/* Sleep for ms milliseconds. */
void sleep_ms(int ms);

/* A test case `name` added to s, with the unchecked fixture setup/teardown (one harness
 * for all its tests), the heal before each test and before teardown (see above), and a
 * timeout of timeout_s seconds for each test (0: Check's default, 4 s). */
TCase *harness_tcase(Suite *s, const char *name, int timeout_s, void (*setup)(void), void (*teardown)(void));

/* tcase_add_test, unless HARNESS_TEST is set and names none of test's globs. */
void harness_add_test(TCase *tc, const TTest *test);

/* test alone in a test case `name` of its own (harness_tcase: its own setup and teardown, so a
 * deployment per test), unless HARNESS_TEST is set and names none of test's globs: then no test
 * case either, and nothing is started for it. */
void harness_add_case(Suite *s, const char *name, int timeout_s, void (*setup)(void), void (*teardown)(void),
                      const TTest *test);

/* Run every test of s, each in its own process (CK_FORK, see above), with CK_ENV output,
 * free the runner; returns the number of failed tests plus the failures counted outside
 * the tests (teardown post-conditions, keygate found dead or hung between tests). */
int harness_run(Suite *s);

/* harness_client, failing the test when keygate cannot be reached. */
redisContext *harness_must_client(struct harness *h);

/* A blocking TCP connection to keygate whose source address is `source` (a loopback address
 * such as "127.0.0.2": keygate tells clients apart by address, e.g. for AUTH throttling);
 * any failure fails the test. The caller closes the fd. */
int harness_connect_from(struct harness *h, const char *source);

/* A blocking TCP connection to 127.0.0.1:port (keygate's, its admin port's, a server's), for raw
 * bytes; any failure (or a connect not done in 5 s) fails the test. The caller closes the fd. */
int harness_tcp_connect(int port);

/* harness_connect_from as a hiredis connection (10 s I/O timeout); the caller redisFree()s it. */
redisContext *harness_client_from(struct harness *h, const char *source);

/* A TLS connection to keygate's TLS listener on 127.0.0.1:port from `source` (NULL:
 * 127.0.0.1), keygate's certificate verified against build/certs/ca.crt as "localhost",
 * reads timing out after 10 s; any failure fails the test. harness_tls_close closes it. */
SSL *harness_tls_client(struct harness *h, int port, const char *source);

/* Free ssl and close its socket. */
void harness_tls_close(SSL *ssl);

/* harness_direct, failing the test when the backend cannot be reached. */
redisContext *harness_must_direct(struct harness *h, const char *backend);

/* The integer reply of one command run on a new direct connection to backend; any other
 * reply fails the test. */
long long harness_direct_int(struct harness *h, const char *backend, const char *fmt, ...);

/* A reply to the command (hiredis format); never NULL: a connection error fails the test.
 * The caller frees it. */
redisReply *cmd(redisContext *c, const char *fmt, ...);

/* The next reply on c (pipelined commands); never NULL: a read error or timeout fails the
 * test. The caller frees it. */
redisReply *next_reply(redisContext *c);

/* Write everything appended to c (redisAppendCommand) without reading a reply; a write
 * error, or bytes still unwritten after 1000 tries, fails the test naming `what`. */
void send_appended(redisContext *c, const char *what);

/* Field `name` of `INFO section` asked on c (keygate or a server); -1 when there is no such
 * line. A reply that is not INFO's text fails the test. */
long long harness_info_field(redisContext *c, const char *section, const char *name);

/* The same, failing the test (with INFO's text) when there is no such line. */
long long harness_must_info_field(redisContext *c, const char *section, const char *name);

/* keygate's INFO stats counter `name`, asked on c: harness_info_field / harness_must_info_field. */
long long harness_info_stat(redisContext *c, const char *name);
long long harness_must_info_stat(redisContext *c, const char *name);

/* INFO server's reloads: (the reloads every worker thread has taken), asked on c (keygate). */
long long harness_info_reloads(redisContext *c);

/* The backend's blocked_clients (its INFO clients), on a direct connection of its own. */
long long harness_blocked_clients(struct harness *h, const char *backend);

/* r as text for messages into buf: +status, -error, "bulk", :int, (nil), array of N [..]
 * (elements described recursively while buf has room); NULL reads "(no reply)". */
void describe_into(const redisReply *r, char *buf, size_t len);

/* describe_into a static buffer: valid until the next call. */
const char *describe(const redisReply *r);

/* r is the status `want`. what (may be NULL) names the check in the message. */
void expect_status_at(int line, redisReply *r, const char *want, const char *what);

/* r is the bulk string `want` (same length and bytes). */
void expect_bulk_at(int line, redisReply *r, const char *want, const char *what);

/* r is the integer `want`. */
void expect_int_at(int line, redisReply *r, long long want, const char *what);

/* r is a nil reply. */
void expect_nil_at(int line, redisReply *r, const char *what);

/* r is an error whose text starts with `prefix`. */
void expect_error_at(int line, redisReply *r, const char *prefix, const char *what);

/* r is an array of n elements, each matching its word in order: "nil", "+status",
 * ":int", "-error prefix", anything else a bulk string. */
void expect_array_at(int line, redisReply *r, const char *what, int n, ...);

/* ---- post-condition: nothing on the backends breaks the registry ----
 *
 * SCAN every database (CONFIG GET databases) of both backends directly (plain port, not
 * through keygate) and check every key against the registry keygate runs with (the
 * harness's registry file, parsed with src/registry.h): it matches a namespace, lives on
 * that namespace's instance, sits in db 0, and its PTTL is in (0, max-ttl] where the
 * namespace has ttl=D (above max-ttl is refused also for ttl=none with a max-ttl). A key
 * gone between SCAN and PTTL is skipped. */

/* The keys that break the registry, as up to max_keys lines "  BACKEND dbN KEY: REASON"
 * (key escaped: bytes 0x21..0x7e other than '\\' as they are, others "\xHH"; cut after 120
 * bytes) in report[0..len), then a line saying how many more.
 * Breaking keys matching a pattern of planted (fnmatch(3) globs, NULL-terminated, at most
 * 16, may be NULL) are not counted but skipped, and for each pattern a line on stderr
 * says how many it skipped and names the first. Returns how many keys break it (0:
 * none), or -1 when the check could not run (registry unreadable, backend unreachable,
 * SCAN failed: report says why). No Check assertion: safe anywhere. */
#define HARNESS_REPORT_KEYS 20
/* Whether a PTTL reply says the key has no TTL: -1 only. 0 is a key whose TTL ends within
 * this millisecond (Redis rounds down; a key past it answers -2), not one without. */
int harness_pttl_is_missing(long long pttl);

int harness_registry_violations(struct harness *h, const char *const *planted, int max_keys, char *report, size_t len);

/* The assertion: harness_registry_violations finds nothing. In a test it fails the test
 * with the report (the first HARNESS_REPORT_KEYS keys). In a suite's teardown (the fixture
 * of harness_tcase), where a Check failure would be lost, it prints the report on stderr
 * as "POST-CONDITION FAILED" and makes harness_run count one more failure, so the suite
 * exits non-zero. Call it first in the teardown, before harness_stop. */
void harness_check_registry(struct harness *h);

/* harness_check_registry skipping the breaking keys that match a glob of planted
 * (NULL-terminated, at most 16): only for keys a suite writes directly on a backend on
 * purpose, with patterns as narrow as those keys; every pattern's skips are printed on
 * stderr (count and first key), never silent. */
void harness_check_registry_except(struct harness *h, const char *const *planted);

/* The same check on servers outside the harness that keygate's instance `instance` ("durable" or
 * "cache") runs on, such as a Redis Cluster's primaries: SCAN db 0 of each (plain port, AUTH
 * password) directly; the keys are checked as on that backend (a ttl= namespace: PTTL in
 * (0, max-ttl]; a namespace of the other instance: wrong instance), each listed with its
 * server's port. Returns as harness_registry_violations (-1 also when nports is 0). */
int harness_registry_violations_on(struct harness *h, const char *instance, const int *plain_ports, int nports,
                                   const char *password, int max_keys, char *report, size_t len);

/* The assertion of harness_registry_violations_on, failing as harness_check_registry does (in a
 * test, or in a teardown as POST-CONDITION FAILED). */
void harness_check_registry_on(struct harness *h, const char *instance, const int *plain_ports, int nports,
                               const char *password);

/* An HTTP answer of keygate's admin endpoint: its status and body (malloc'd, NUL-terminated). */
struct harness_http {
    int status;
    char *body;
};

/* GET path from keygate's admin port (h->admin_port: opts->admin), the whole answer until the
 * endpoint closes; fails the test when it cannot connect, a read takes over 5 s, or the answer
 * is not HTTP. The caller frees body. */
struct harness_http harness_admin_get(const struct harness *h, const char *path);

/* Wait up to timeout_ms for pid (a server the harness started: keygate, a backend) to exit,
 * without stopping it. Its wait status, or -1 when it still runs. */
int harness_wait_exit(pid_t pid, int timeout_ms);

/* ---- a raw RESP connection: replies as bytes, for byte-for-byte comparisons ---- */

/* A plain TCP connection whose replies are framed by keygate's own reply scanner
 * (resp_scan_reply) and handed over as the bytes that came. `name` appears in messages. */
struct harness_raw {
    int fd;
    char buf[1 << 16];
    size_t len;
    const char *name;
};

/* Connect r to 127.0.0.1:port (fails the test when it cannot). */
void harness_raw_open(struct harness_raw *r, int port, const char *name);

void harness_raw_close(struct harness_raw *r);

/* Write one command (argv, RESP multibulk) whole. */
void harness_raw_sendv(struct harness_raw *r, int argc, const char **argv);

/* The next whole reply's bytes (NUL-terminated, malloc'd; *len its length when len is not
 * NULL). Fails the test when none comes within 5 s, the peer closes, or the bytes are not
 * RESP. */
char *harness_raw_reply(struct harness_raw *r, size_t *len);

/* Run `keygate ARGS` (KEYGATE_BIN, through sh: quote paths in args) to its end: its exit code
 * (-1: it did not exit), what it printed on stdout and stderr in out (cut at outlen - 1). */
int harness_run_keygate(const char *args, char *out, size_t outlen);

/* Run a suite that make_suite(arg) builds, in a forked process (harness_run, stdout and stderr
 * into log_path), for tests of the harness itself; its output read into out[0..len). Returns its
 * exit code (harness_run's count of failures, at most 100); fails the test when it died. */
int harness_run_nested(Suite *(*make_suite)(void *arg), void *arg, const char *log_path, char *out, size_t len);

/* Wait (5 s at most) until pid is stopped (state T in /proc/PID/stat, after a SIGSTOP);
 * fails the test otherwise. */
void harness_wait_stopped(pid_t pid);

/* Write text to dir/name (mode 0644); fails the test when it cannot. */
void harness_write_in(const char *dir, const char *name, const char *text);

/* pid's CPU time so far (utime + stime of /proc/PID/stat) in milliseconds (10 ms ticks);
 * fails the test when it cannot be read. */
long long harness_cpu_ms(pid_t pid);

/* A field of /proc/PID/status in KiB ("VmRSS", "VmHWM", ...); fails the test when absent. */
long long harness_status_kib(pid_t pid, const char *field);

/* One command (hiredis's format: %s, %b ...) run directly on backend (a connection of its own,
 * closed after); the reply,
 * which the caller frees (fails the test on a connection error). */
redisReply *harness_direct_cmd(struct harness *h, const char *backend, const char *fmt, ...);

/* One command (hiredis's format) over c (a direct connection); fails the test on an error reply. */
void harness_direct_ok(redisContext *c, const char *fmt, ...);

/* Are a and b the same RESP value (type, integer or bytes, elements recursively)? */
int harness_same_reply(const redisReply *a, const redisReply *b);

/* Open r to 127.0.0.1:port as a RESP3 client (HELLO 3, with AUTH user password when user is
 * not NULL) with CLIENT TRACKING ON (default mode): its invalidations come as pushes on r. */
void harness_raw_open_tracking(struct harness_raw *r, int port, const char *name, const char *user,
                               const char *password);

/* Write one command given as its arguments, NULL last (at most 32). */
void harness_raw_send(struct harness_raw *r, const char *first, ...) __attribute__((sentinel));

/* s with CR and LF shown as \r and \n, for messages (one of four static buffers, in turn:
 * up to four in one message; cut at about 1,200 characters). */
const char *harness_shown(const char *s);

/* The next reply is exactly `want`'s bytes (fails the test naming the caller's line). */
#define harness_raw_expect(r, want, what) harness_raw_expect_at(__LINE__, r, want, what)
void harness_raw_expect_at(int line, struct harness_raw *r, const char *want, const char *what);

/* The next reply starts with `prefix`. */
void harness_raw_expect_prefix(struct harness_raw *r, const char *prefix, const char *what);

/* Nothing more arrives within ms (and nothing is buffered). */
void harness_raw_expect_quiet(struct harness_raw *r, int ms);

#define expect_status(r, want, what) expect_status_at(__LINE__, r, want, what)
#define expect_bulk(r, want, what) expect_bulk_at(__LINE__, r, want, what)
#define expect_int(r, want, what) expect_int_at(__LINE__, r, want, what)
#define expect_nil(r, what) expect_nil_at(__LINE__, r, what)
#define expect_error(r, prefix, what) expect_error_at(__LINE__, r, prefix, what)
#define expect_array(r, what, ...) expect_array_at(__LINE__, r, what, __VA_ARGS__)

#endif
