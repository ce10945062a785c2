/* test_security.c: integration tests of access control: AUTH, pre-auth limits, refused attacks, scripts, TLS and unix listeners, backend TLS. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include "harness.h"

/*
 * One harness for the suite (each test in its own process, see harness.h): the repo's registry, and
 * keygate.conf with these extra lines:
 *
 *   user alice password-file=…  owners=cache  access=rw              (file, mode 0600)
 *   user bob   sha256=…         owners=queues,lifecycle access=rw scripts=yes
 *   user ops   password-file=…  owners=*      access=ro
 *   user root  password-file=…  owners=*      access=rw              (no scripts)
 *   listen 127.0.0.1:T1 tls cert= key=                        (server TLS only)
 *   listen 127.0.0.1:T2 tls cert= key= ca=                    (client certificates required)
 *   listen unix:DIR/kg.sock mode=0600
 *
 * The backend-TLS tests restart keygate with broken `instance` lines
 * (harness_keygate_restart); the harness starts it again with the suite's files before
 * the next test.
 */

static struct harness h;
static char dir[64]; /* this suite's own temp dir: password files, unix socket */
static char sock_path[128];
static int tls_port, mtls_port;
static char extra[16384];

#define ALICE_PW "alice-correct-horse-1"
#define BOB_PW "bob-battery-staple-2"
#define OPS_PW "ops-read-only-pw-3"
#define ROOT_PW "root-not-really-4"
#define WRONG_PW "definitely-wrong-pw-5"

static void setup(void)
{
    char cwd[1024];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    snprintf(dir, sizeof dir, "/tmp/kgsec-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char alice[128], ops[128], root[128], bob_hash[65];
    snprintf(alice, sizeof alice, "%s/alice.pass", dir);
    snprintf(ops, sizeof ops, "%s/ops.pass", dir);
    snprintf(root, sizeof root, "%s/root.pass", dir);
    snprintf(sock_path, sizeof sock_path, "%s/kg.sock", dir);
    harness_write_secret(alice, ALICE_PW "\n", 0600);
    harness_write_secret(ops, OPS_PW, 0600);
    harness_write_secret(root, ROOT_PW "\n", 0400);
    harness_sha256_hex(BOB_PW, bob_hash);
    tls_port = harness_free_port();
    mtls_port = harness_free_port();
    ck_assert(tls_port > 0 && mtls_port > 0 && tls_port != mtls_port);
    snprintf(extra, sizeof extra,
             "log-level debug\n"
             "user alice password-file=%s owners=cache access=rw\n"
             "user bob sha256=%s owners=queues,lifecycle access=rw scripts=yes\n"
             "user ops password-file=%s owners=* access=ro\n"
             "user root password-file=%s owners=* access=rw scripts=no\n"
             "listen 127.0.0.1:%d tls cert=%s/build/certs/server.crt key=%s/build/certs/server.key\n"
             "listen 127.0.0.1:%d tls cert=%s/build/certs/server.crt key=%s/build/certs/server.key "
             "ca=%s/build/certs/ca.crt\n"
             "listen unix:%s mode=0600\n",
             alice, bob_hash, ops, root, tls_port, cwd, cwd, mtls_port, cwd, cwd, cwd, sock_path);
    struct harness_opts o = {.extra_config = extra};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h); /* post-condition: no key on the backends breaks the registry */
    harness_stop(&h);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* ---- helpers (cmd and the expect_* reply checks are in harness.h) ---- */

static redisContext *client(void)
{
    return harness_must_client(&h);
}

/* A keygate connection authenticated as user/pass. */
static redisContext *login(const char *user, const char *pass)
{
    redisContext *c = client();
    expect_status(cmd(c, "AUTH %s %s", user, pass), "OK", "AUTH %s %s");
    return c;
}

/* An integer reply of one command run directly on a backend. */
#define direct_int(...) harness_direct_int(&h, __VA_ARGS__)

/* CONFIG GET name on a backend, copied into out. */
static void direct_config(const char *backend, const char *name, char *out, size_t cap)
{
    redisReply *r = harness_direct_cmd(&h, backend, "CONFIG GET %s", name);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "%s CONFIG GET %s: %s", backend, name, describe(r));
    snprintf(out, cap, "%s", r->element[1]->str);
    freeReplyObject(r);
}

/* ---- raw sockets, for what hiredis would not send ---- */

static int raw_open(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(h.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_sec = 3};
    ck_assert_msg(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "raw connect: %s", strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void raw_send(int fd, const char *bytes, size_t len)
{
    ck_assert_int_eq(send(fd, bytes, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* Read until `want` bytes arrived, the peer closed, or 3 s passed. Returns the bytes read. */
static size_t raw_read(int fd, char *out, size_t cap, size_t want, int *closed)
{
    size_t len = 0;
    *closed = 0;
    while (len < want && len < cap - 1) {
        ssize_t n = recv(fd, out + len, cap - 1 - len, 0);
        if (n > 0) {
            len += (size_t)n;
            continue;
        }
        *closed = n == 0 || (n < 0 && errno == ECONNRESET);
        break;
    }
    out[len] = '\0';
    return len;
}

/* 1 when keygate closed fd within 3 s. */
static int raw_closed(int fd)
{
    char buf[256];
    int closed = 0;
    raw_read(fd, buf, sizeof buf, sizeof buf, &closed);
    return closed;
}

/* ---- 1. AUTH ---- */

START_TEST(test_noauth_before_auth)
{
    redisContext *c = client();
    expect_error(cmd(c, "PING"), "NOAUTH Authentication required.", "PING (as Redis: issue 19)");
    expect_error(cmd(c, "GET cache:sec1:x"), "NOAUTH Authentication required.", "GET cache:sec1:x");
    expect_error(cmd(c, "SET cache:sec1:x 1"), "NOAUTH Authentication required.", "SET cache:sec1:x 1");
    expect_error(cmd(c, "KEYS cache:sec1:*"), "NOAUTH Authentication required.", "KEYS cache:sec1:*");
    expect_error(cmd(c, "CONFIG SET dir /tmp"), "NOAUTH Authentication required.", "CONFIG SET dir /tmp");
    expect_error(cmd(c, "INFO"), "NOAUTH Authentication required.", "INFO");
    expect_error(cmd(c, "HELLO 2"), "NOAUTH HELLO must be called with the client already authenticated", "HELLO 2");
    ck_assert_int_eq(direct_int("cache", "EXISTS %s", "cache:sec1:x"), 0);
    redisFree(c);
}
END_TEST

START_TEST(test_auth_flows)
{
    /* from an address of its own (failures are remembered per address, test_authgate), two
     * wrong pairs a connection: the third failure closes one */
    redisContext *c = harness_client_from(&h, "127.0.0.6");
    expect_error(cmd(c, "AUTH %s", WRONG_PW), "WRONGPASS invalid username-password pair or user is disabled.",
                 "AUTH %s");
    expect_error(cmd(c, "AUTH alice %s", WRONG_PW), "WRONGPASS invalid username-password pair or user is disabled.",
                 "AUTH alice %s");
    redisFree(c);
    c = harness_client_from(&h, "127.0.0.6");
    expect_error(cmd(c, "AUTH alice %s", BOB_PW), "WRONGPASS", "AUTH alice %s");
    expect_error(cmd(c, "AUTH nobody %s", ALICE_PW), "WRONGPASS", "AUTH nobody %s");
    expect_error(cmd(c, "AUTH a b c"), "ERR syntax error", "AUTH a b c");
    expect_error(cmd(c, "GET cache:sec2:x"), "NOAUTH", "GET cache:sec2:x");
    /* AUTH password: the user whose password it is (file with a trailing newline) */
    expect_status(cmd(c, "AUTH %s", ALICE_PW), "OK", "AUTH %s");
    expect_status(cmd(c, "SET cache:sec2:x 1"), "OK", "SET cache:sec2:x 1");
    expect_error(cmd(c, "SET q:sec2:x 1"), "NOPERM user 'alice' may not use namespace 'q:'", "SET q:sec2:x 1");
    /* AUTH user password with a sha256= user switches identity */
    expect_status(cmd(c, "AUTH bob %s", BOB_PW), "OK", "AUTH bob %s");
    expect_status(cmd(c, "SET q:sec2:x 1"), "OK", "SET q:sec2:x 1");
    expect_error(cmd(c, "GET cache:sec2:x"), "NOPERM user 'bob'", "GET cache:sec2:x");
    redisFree(c);

    /* HELLO 2 AUTH user password */
    c = harness_client_from(&h, "127.0.0.6");
    expect_error(cmd(c, "HELLO 2 AUTH ops %s", WRONG_PW), "WRONGPASS", "HELLO 2 AUTH ops %s");
    redisReply *r = cmd(c, "HELLO 2 AUTH ops %s", OPS_PW);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements >= 2, "HELLO 2 AUTH: %s", describe(r));
    freeReplyObject(r);
    expect_bulk(cmd(c, "GET cache:sec2:x"), "1", "GET cache:sec2:x");
    expect_error(cmd(c, "SET cache:sec2:y 1"), "NOPERM user 'ops' has access=ro and 'set' writes namespace 'cache:'",
                 "SET cache:sec2:y 1");
    ck_assert_int_eq(direct_int("cache", "EXISTS %s", "cache:sec2:y"), 0);
    ck_assert_int_eq(direct_int("durable", "EXISTS %s", "q:sec2:x"), 1);
    ck_assert_int_eq(direct_int("cache", "EXISTS %s", "q:sec2:x"), 0);
    redisFree(c);
}
END_TEST

/* ---- 2. Redis's pre-auth limits ---- */

START_TEST(test_pre_auth_limits)
{
    char out[65536];
    int closed;
    int fd = raw_open();
    raw_send(fd, "*11\r\n", 5);
    raw_read(fd, out, sizeof out, 256, &closed);
    ck_assert_str_eq(out, "-ERR Protocol error: unauthenticated multibulk length\r\n");
    ck_assert_msg(closed || raw_closed(fd), "connection left open after the multibulk limit");
    close(fd);

    fd = raw_open();
    raw_send(fd, "*1\r\n$16385\r\n", 12);
    raw_read(fd, out, sizeof out, 256, &closed);
    ck_assert_str_eq(out, "-ERR Protocol error: unauthenticated bulk length\r\n");
    ck_assert_msg(closed || raw_closed(fd), "connection left open after the bulk limit");
    close(fd);

    /* at the limits: 10 arguments, a 16 KiB bulk: parsed, refused by AUTH rules, still open */
    static char big[16384 + 128];
    fd = raw_open();
    const char ten[] =
        "*10\r\n$3\r\nDEL\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n"
        "$1\r\nh\r\n$1\r\ni\r\n";
    raw_send(fd, ten, sizeof ten - 1);
    int n = snprintf(big, sizeof big, "*2\r\n$4\r\nECHO\r\n$16384\r\n");
    memset(big + n, 'x', 16384);
    memcpy(big + n + 16384, "\r\n", 2);
    raw_send(fd, big, (size_t)n + 16386);
    raw_send(fd, "*1\r\n$4\r\nPING\r\n", 14);
    const char want[] = "-NOAUTH Authentication required.\r\n-NOAUTH Authentication required.\r\n"
                        "-NOAUTH Authentication required.\r\n"; /* PING too, as Redis (issue 19) */
    raw_read(fd, out, sizeof out, sizeof want - 1, &closed);
    ck_assert_str_eq(out, want);
    close(fd);

    /* AUTH lifts the limits for the next command of the same pipeline */
    fd = raw_open();
    n = snprintf(big, sizeof big, "*2\r\n$4\r\nAUTH\r\n$%zu\r\n%s\r\n*12\r\n$4\r\nMGET\r\n", strlen(ALICE_PW),
                 ALICE_PW);
    for (int i = 0; i < 11; i++) n += snprintf(big + n, sizeof big - (size_t)n, "$12\r\ncache:sec3:%d\r\n", i % 10);
    raw_send(fd, big, (size_t)n);
    raw_read(fd, out, sizeof out, 5 + 5 + 11 * 5, &closed);
    ck_assert_msg(strncmp(out, "+OK\r\n*11\r\n$-1\r\n", 15) == 0, "AUTH then 11 arguments: got '%.60s'", out);
    close(fd);
}
END_TEST

/* ---- 3. rights through keygate ---- */

START_TEST(test_rights_and_patterns_through_keygate)
{
    redisContext *alice = login("alice", ALICE_PW);
    expect_status(cmd(alice, "SET cache:sec4:a 1"), "OK", "SET cache:sec4:a 1");
    expect_error(cmd(alice, "SET q:sec4:a 1"), "NOPERM", "SET q:sec4:a 1");
    expect_error(cmd(alice, "SET cache:mattermost:listener 1"),
                 "NOPERM user 'alice' may not use namespace 'cache:mattermost:listener'",
                 "SET cache:mattermost:listener 1");
    ck_assert_int_eq(direct_int("durable", "EXISTS %s", "q:sec4:a"), 0);
    ck_assert_int_eq(direct_int("cache", "EXISTS %s", "cache:mattermost:listener"), 0);

    redisReply *r = cmd(alice, "KEYS cache:sec4:*");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && strcmp(r->element[0]->str, "cache:sec4:a") == 0,
                  "KEYS cache:sec4:*: %s", describe(r));
    freeReplyObject(r);
    r = cmd(alice, "SCAN 0 MATCH cache:sec4:* COUNT 1000");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "SCAN: %s", describe(r));
    freeReplyObject(r);
    expect_error(cmd(alice, "KEYS *"), "DENIED", "KEYS *");
    expect_error(cmd(alice, "keys cache:*"), "DENIED", "keys cache:*"); /* would reach cache:mattermost:listener */
    expect_error(cmd(alice, "SCAN 0"), "DENIED", "SCAN 0");
    expect_error(cmd(alice, "SCAN 0 MATCH q:*"), "DENIED", "SCAN 0 MATCH q:*");
    redisFree(alice);

    redisContext *ops = login("ops", OPS_PW);
    r = cmd(ops, "KEYS cache:*");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY, "ops KEYS cache:*: %s", describe(r));
    freeReplyObject(r);
    expect_error(cmd(ops, "DEL cache:sec4:a"), "NOPERM", "DEL cache:sec4:a");
    ck_assert_int_eq(direct_int("cache", "EXISTS %s", "cache:sec4:a"), 1);
    redisFree(ops);
}
END_TEST

/* ---- 4. the classic attacks ---- */

START_TEST(test_classic_attacks_change_nothing)
{
    char dir_d[512], dir_c[512], file_c[512], after[512];
    direct_config("durable", "dir", dir_d, sizeof dir_d);
    direct_config("cache", "dir", dir_c, sizeof dir_c);
    direct_config("cache", "dbfilename", file_c, sizeof file_c);
    redisReply *r = harness_direct_cmd(&h, "cache", "LASTSAVE");
    long long lastsave = r->integer;
    freeReplyObject(r);
    freeReplyObject(harness_direct_cmd(&h, "cache", "RPUSH cache:sec5:list 2 1"));
    freeReplyObject(harness_direct_cmd(&h, "durable", "SET q:2 secret-of-queues"));

    /* root: every owner, read-write: the most a user can be, and still none of this */
    redisContext *c = login("root", ROOT_PW);
    const char *attacks[] = {
        "CONFIG SET dir /tmp",
        "config set dbfilename evil.so",
        "CONFIG GET requirepass",
        "SAVE",
        "BGSAVE",
        "BGREWRITEAOF",
        "REPLICAOF 127.0.0.1 1",
        "SLAVEOF 127.0.0.1 1",
        "MODULE LOAD /x.so",
        "DEBUG SLEEP 0",
        "SHUTDOWN NOSAVE",
        "FLUSHALL",
        "FLUSHDB",
        "SWAPDB 0 1",
        "ACL SETUSER evil on >pw +@all ~*",
        "ACL LIST",
        "MONITOR",
        "CLIENT KILL TYPE normal",
        "CLIENT PAUSE 10000",
        "FAILOVER",
        "CLUSTER RESET",
        "RANDOMKEY",
        "DUMP cache:sec5:list",
        "RESTORE cache:sec5:new 0 x",
        "MIGRATE 127.0.0.1 1 cache:sec5:list 0 100",
        "SCRIPT FLUSH",
        "FUNCTION FLUSH",
        "LATENCY RESET",
        "SLOWLOG RESET",
        "MEMORY PURGE",
        "SYNC",
        "PSYNC ? -1",
        "MOVE cache:sec5:list 1",
        "SELECT 1",
    };
    for (size_t i = 0; i < sizeof attacks / sizeof attacks[0]; i++) {
        r = cmd(c, attacks[i]);
        ck_assert_msg(r->type == REDIS_REPLY_ERROR && strncmp(r->str, "DENIED", 6) == 0, "'%s': want -DENIED, got %s",
                      attacks[i], describe(r));
        freeReplyObject(r);
    }
    expect_error(cmd(c, "EVAL %s 1 %s", "redis.call('set', KEYS[1], 'x') return 1", "cache:sec5:evil"),
                 "DENIED scripts are refused", "EVAL %s 1 %s");
    /* SORT ... BY/GET q:* would read another namespace (and instance) through the data */
    expect_error(cmd(c, "SORT cache:sec5:list BY q:*"), "DENIED", "SORT cache:sec5:list BY q:*");
    expect_error(cmd(c, "SORT cache:sec5:list GET q:*"), "DENIED", "SORT cache:sec5:list GET q:*");
    r = cmd(c, "SORT cache:sec5:list");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2 && strcmp(r->element[0]->str, "1") == 0,
                  "SORT cache:sec5:list: %s", describe(r));
    freeReplyObject(r);
    expect_status(cmd(c, "PING"), "PONG", "PING");
    redisFree(c);

    /* nothing changed on the backends */
    direct_config("durable", "dir", after, sizeof after);
    ck_assert_str_eq(after, dir_d);
    direct_config("cache", "dir", after, sizeof after);
    ck_assert_str_eq(after, dir_c);
    direct_config("cache", "dbfilename", after, sizeof after);
    ck_assert_str_eq(after, file_c);
    r = harness_direct_cmd(&h, "cache", "LASTSAVE");
    ck_assert_int_eq(r->integer, lastsave);
    freeReplyObject(r);
    for (int i = 0; i < 2; i++) {
        const char *b = i ? "cache" : "durable";
        r = harness_direct_cmd(&h, b, "ROLE");
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && strcmp(r->element[0]->str, "master") == 0, "%s ROLE: %s", b,
                      describe(r));
        freeReplyObject(r);
        r = harness_direct_cmd(&h, b, "MODULE LIST");
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 0, "%s MODULE LIST: %s", b, describe(r));
        freeReplyObject(r);
        r = harness_direct_cmd(&h, b, "ACL USERS");
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1, "%s ACL USERS: %s", b, describe(r));
        freeReplyObject(r);
    }
    ck_assert_int_eq(direct_int("cache", "EXISTS %s", "cache:sec5:evil"), 0);
    ck_assert_int_eq(direct_int("cache", "EXISTS %s", "cache:sec5:list"), 1);
    ck_assert_int_eq(direct_int("durable", "EXISTS %s", "q:2"), 1);
}
END_TEST

/* ---- 5. scripts ---- */

START_TEST(test_scripts_only_with_scripts_yes)
{
    redisContext *alice = login("alice", ALICE_PW);
    expect_error(cmd(alice, "EVAL %s 1 %s", "return 1", "cache:sec6:a"), "DENIED scripts are refused", "EVAL %s 1 %s");
    expect_error(cmd(alice, "SCRIPT LOAD %s", "return 1"), "DENIED", "SCRIPT LOAD %s");
    redisFree(alice);

    redisContext *bob = login("bob", BOB_PW);
    expect_status(
        cmd(bob, "EVAL %s 1 %s", "return redis.status_reply(redis.call('set', KEYS[1], 'v')['ok'])", "q:sec6:s"), "OK",
        "EVAL %s 1 %s");
    redisReply *r = harness_direct_cmd(&h, "durable", "GET q:sec6:s");
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, "v") == 0, "durable GET q:sec6:s: %s", describe(r));
    freeReplyObject(r);
    expect_error(cmd(bob, "EVAL %s 1 %s", "return 1", "cache:sec6:a"), "NOPERM user 'bob'", "EVAL %s 1 %s");
    expect_error(cmd(bob, "EVAL %s 0", "return 1"), "DENIED", "EVAL %s 0");
    /* SCRIPT LOAD goes to durable, where every namespace of bob lives */
    r = cmd(bob, "SCRIPT LOAD %s", "return 42");
    ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == 40, "SCRIPT LOAD: %s", describe(r));
    char sha[41];
    snprintf(sha, sizeof sha, "%s", r->str);
    freeReplyObject(r);
    expect_int(cmd(bob, "EVALSHA %s 1 %s", sha, "q:sec6:x"), 42, "EVALSHA %s 1 %s");
    r = cmd(bob, "SCRIPT EXISTS %s", sha);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->integer == 1, "SCRIPT EXISTS: %s",
                  describe(r));
    freeReplyObject(r);
    r = harness_direct_cmd(&h, "durable", "SCRIPT EXISTS %s", sha);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 1, "durable SCRIPT EXISTS: %s",
                  describe(r));
    freeReplyObject(r);
    r = harness_direct_cmd(&h, "cache", "SCRIPT EXISTS %s", sha);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 0, "cache SCRIPT EXISTS: %s", describe(r));
    freeReplyObject(r);
    redisFree(bob);
}
END_TEST

/* ---- 6. client-side TLS and the unix socket ---- */

/*
 * One TLS exchange with keygate on port: verify its certificate (ca.crt, name
 * localhost), present cert/key when given, cap the protocol at max_version when
 * nonzero, send `bytes` and read until `want` bytes, close or 3 s. Returns the bytes
 * read (NUL-terminated in out), or -1 when the handshake failed.
 */
static int tls_exchange(int port, const char *cert, const char *key, int max_version, const char *bytes, char *out,
                        size_t cap, size_t want)
{
    char path[PATH_MAX + 64];
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    ck_assert_ptr_nonnull(ctx);
    snprintf(path, sizeof path, "%s/build/certs/ca.crt", h.root);
    ck_assert_int_eq(SSL_CTX_load_verify_locations(ctx, path, NULL), 1);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (max_version) {
        SSL_CTX_set_security_level(ctx, 0);
        SSL_CTX_set_min_proto_version(ctx, TLS1_VERSION);
        SSL_CTX_set_max_proto_version(ctx, max_version);
    }
    if (cert) {
        snprintf(path, sizeof path, "%s/build/certs/%s", h.root, cert);
        ck_assert_int_eq(SSL_CTX_use_certificate_chain_file(ctx, path), 1);
        snprintf(path, sizeof path, "%s/build/certs/%s", h.root, key);
        ck_assert_int_eq(SSL_CTX_use_PrivateKey_file(ctx, path, SSL_FILETYPE_PEM), 1);
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_sec = 3};
    ck_assert_msg(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect %d: %s", port,
                  strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    SSL_set1_host(ssl, "localhost");
    int got = -1;
    out[0] = '\0';
    if (SSL_connect(ssl) == 1) {
        got = 0;
        if (SSL_write(ssl, bytes, (int)strlen(bytes)) == (int)strlen(bytes)) {
            while ((size_t)got < want && (size_t)got < cap - 1) {
                int n = SSL_read(ssl, out + got, (int)(cap - 1 - (size_t)got));
                if (n <= 0) break;
                got += n;
            }
            out[got] = '\0';
        }
    }
    ERR_clear_error();
    SSL_free(ssl);
    close(fd);
    SSL_CTX_free(ctx);
    return got;
}

START_TEST(test_client_tls_listeners)
{
    char out[512], req[256];
    snprintf(req, sizeof req, "AUTH alice %s\r\nPING\r\n", ALICE_PW);
    const char *want = "+OK\r\n+PONG\r\n";

    /* server TLS only: any TLS 1.2+ client that trusts keygate's certificate */
    ck_assert_int_eq(tls_exchange(tls_port, NULL, NULL, 0, req, out, sizeof out, strlen(want)), (int)strlen(want));
    ck_assert_str_eq(out, want);
    ck_assert_int_eq(tls_exchange(tls_port, NULL, NULL, TLS1_2_VERSION, req, out, sizeof out, strlen(want)),
                     (int)strlen(want));
    ck_assert_str_eq(out, want);
    ck_assert_msg(tls_exchange(tls_port, NULL, NULL, TLS1_1_VERSION, req, out, sizeof out, strlen(want)) == -1,
                  "TLS 1.1 was accepted: '%s'", out);

    /* a plain-text client on the TLS port gets no answer */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(tls_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_sec = 2};
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    raw_send(fd, "PING\r\n", 6);
    int closed;
    raw_read(fd, out, sizeof out, 7, &closed);
    ck_assert_msg(strstr(out, "PONG") == NULL, "plain text answered on the TLS port");
    close(fd);

    /* ca=: a client certificate signed by the CA is required */
    ck_assert_int_eq(tls_exchange(mtls_port, "client.crt", "client.key", 0, req, out, sizeof out, strlen(want)),
                     (int)strlen(want));
    ck_assert_str_eq(out, want);
    tls_exchange(mtls_port, NULL, NULL, 0, req, out, sizeof out, strlen(want));
    ck_assert_msg(strstr(out, "PONG") == NULL, "a client without a certificate was served: '%s'", out);

    /* the plain listener still works alongside */
    redisContext *c = login("alice", ALICE_PW);
    expect_status(cmd(c, "PING"), "PONG", "PING");
    redisFree(c);
}
END_TEST

START_TEST(test_unix_socket_listener)
{
    struct stat st;
    ck_assert_msg(stat(sock_path, &st) == 0, "stat %s: %s", sock_path, strerror(errno));
    ck_assert_msg(S_ISSOCK(st.st_mode), "%s is not a socket", sock_path);
    ck_assert_msg((st.st_mode & 0777) == 0600, "socket mode %04o, want 0600", (unsigned)(st.st_mode & 0777));
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectUnixWithTimeout(sock_path, tv);
    ck_assert_msg(c != NULL && !c->err, "connect %s: %s", sock_path, c ? c->errstr : "oom");
    expect_error(cmd(c, "GET cache:sec7:x"), "NOAUTH", "GET cache:sec7:x");
    expect_status(cmd(c, "AUTH alice %s", ALICE_PW), "OK", "AUTH alice %s");
    expect_status(cmd(c, "SET cache:sec7:x 1"), "OK", "SET cache:sec7:x 1");
    redisFree(c);
    ck_assert_int_eq(direct_int("cache", "EXISTS %s", "cache:sec7:x"), 1);
}
END_TEST

/* ---- 7. secrets ---- */

START_TEST(test_secrets_never_in_logs_or_info)
{
    /* every secret crosses keygate here, right and wrong, in each AUTH form (the log is at
     * debug level): this test sees only the log of its own keygate when run alone */
    redisContext *c = harness_client_from(&h, "127.0.0.7"); /* an address of its own, two failures a connection */
    expect_error(cmd(c, "AUTH %s", WRONG_PW), "WRONGPASS", "AUTH wrong");
    expect_error(cmd(c, "AUTH alice %s", WRONG_PW), "WRONGPASS", "AUTH alice wrong");
    redisFree(c);
    c = harness_client_from(&h, "127.0.0.7");
    for (int i = 0; i < 2; i++)
        expect_error(cmd(c, "AUTH %s", h.backends[i].password), "WRONGPASS", "AUTH with a backend's password");
    expect_status(cmd(c, "AUTH %s", ALICE_PW), "OK", "AUTH alice's password");
    expect_status(cmd(c, "AUTH bob %s", BOB_PW), "OK", "AUTH bob");
    redisReply *hello = cmd(c, "HELLO 2 AUTH ops %s", OPS_PW);
    ck_assert_msg(hello->type == REDIS_REPLY_ARRAY, "HELLO 2 AUTH ops: %s", describe(hello));
    freeReplyObject(hello);
    expect_status(cmd(c, "AUTH root %s", ROOT_PW), "OK", "AUTH root");
    redisReply *info = cmd(c, "INFO everything");
    ck_assert_msg(info->type == REDIS_REPLY_STRING, "INFO: %s", describe(info));
    redisFree(c);
    char *log = harness_keygate_log(&h);
    ck_assert_ptr_nonnull(log);
    const char *secrets[] = {
        ALICE_PW, BOB_PW, OPS_PW, ROOT_PW, WRONG_PW, h.backends[0].password, h.backends[1].password};
    for (size_t i = 0; i < sizeof secrets / sizeof secrets[0]; i++) {
        ck_assert_msg(strstr(log, secrets[i]) == NULL, "keygate's log holds secret #%zu", i);
        ck_assert_msg(strstr(info->str, secrets[i]) == NULL, "INFO holds secret #%zu", i);
    }
    free(log);
    freeReplyObject(info);
}
END_TEST

/* keygate --check -c conf: its exit code, its output in out. */
static int keygate_check(const char *conf, char *out, size_t outlen)
{
    char args[PATH_MAX + 32];
    snprintf(args, sizeof args, "--check -c '%s'", conf);
    return harness_run_keygate(args, out, outlen);
}

START_TEST(test_password_files_must_be_private)
{
    char conf[128], pass[128], text[2048], out[4096];
    snprintf(conf, sizeof conf, "%s/check.conf", dir);
    snprintf(pass, sizeof pass, "%s/open.pass", dir);
    harness_write_secret(pass, "pw\n", 0644);
    const char *base = "listen 127.0.0.1:1\nregistry %s/conf/registry.conf\n"
                       "instance durable 127.0.0.1:2 plain\ninstance cache 127.0.0.1:3 plain\n%s\n";
    char user[512];
    snprintf(user, sizeof user, "user u password-file=%s owners=cache access=rw", pass);
    snprintf(text, sizeof text, base, h.root, user);
    harness_write_secret(conf, text, 0600);
    ck_assert_int_eq(keygate_check(conf, out, sizeof out), 1);
    ck_assert_msg(strstr(out, pass) && strstr(out, "0644"), "--check output does not name the file and its mode: %s",
                  out);

    ck_assert_int_eq(chmod(pass, 0600), 0);
    ck_assert_msg(keygate_check(conf, out, sizeof out) == 0, "--check with a 0600 file: %s", out);

    snprintf(text, sizeof text, base, h.root, "user u sha256=abc owners=cache access=rw");
    harness_write_secret(conf, text, 0600);
    ck_assert_int_eq(keygate_check(conf, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "sha256"), "--check output: %s", out);
}
END_TEST

/* ---- 8. reload: sessions follow the new users ---- */

static int count_in_log(const char *what)
{
    char *log = harness_keygate_log(&h);
    int n = 0;
    for (const char *p = log ? strstr(log, what) : NULL; p; p = strstr(p + 1, what)) n++;
    free(log);
    return n;
}

/* INFO server's reloads: (the reloads every worker thread has taken), read as root. */
static long long info_reloads(void)
{
    redisContext *c = login("root", ROOT_PW);
    long long n = harness_info_reloads(c);
    redisFree(c);
    return n;
}

/* Wait (5 s at most) until INFO server's reloads: is want; returns the last value. */
static long long reloads_until(long long want)
{
    long long got = info_reloads();
    for (long long end = now_ms() + 5000; got != want && now_ms() < end; got = info_reloads()) usleep(20 * 1000);
    return got;
}

/* SIGHUP keygate and wait until every worker took the new configuration (INFO server reloads:
 * one more; the log line alone says only that the main thread accepted the files). */
static void reload(void)
{
    long long before = info_reloads();
    ck_assert_int_eq(kill(h.keygate_pid, SIGHUP), 0);
    long long got = reloads_until(before + 1);
    ck_assert_msg(got == before + 1,
                  "INFO server reloads: is %lld 5 s after SIGHUP, want %lld (every worker took the new config)", got,
                  before + 1);
}

static void write_conf(const char *text)
{
    FILE *f = fopen(h.conf_file, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(test_reload_rebinds_sessions_to_new_users)
{
    redisContext *alice = login("alice", ALICE_PW), *ops = login("ops", OPS_PW);
    /* two reloads free the config alice logged in under: her session must not point into it */
    reload();
    reload();
    expect_status(cmd(alice, "SET cache:sec8:a 1"), "OK", "SET cache:sec8:a 1");
    expect_error(cmd(alice, "SET q:sec8:a 1"), "NOPERM user 'alice'", "SET q:sec8:a 1");

    /* alice removed from keygate.conf: her session is logged out, ops's is not */
    FILE *f = fopen(h.conf_file, "r");
    ck_assert_ptr_nonnull(f);
    static char conf[65536], without[65536];
    size_t n = fread(conf, 1, sizeof conf - 1, f);
    conf[n] = '\0';
    fclose(f);
    without[0] = '\0';
    for (char *line = conf; *line;) {
        size_t len = strcspn(line, "\n") + (line[strcspn(line, "\n")] == '\n');
        if (strncmp(line, "user alice ", 11) != 0) strncat(without, line, len);
        line += len;
    }
    ck_assert_msg(strlen(without) < strlen(conf), "no alice line in %s", h.conf_file);
    write_conf(without);
    reload();
    expect_error(cmd(alice, "GET cache:sec8:a"), "NOAUTH", "GET cache:sec8:a");
    expect_error(cmd(alice, "AUTH alice %s", ALICE_PW), "WRONGPASS", "AUTH alice %s");
    expect_bulk(cmd(ops, "GET cache:sec8:a"), "1", "GET cache:sec8:a");

    write_conf(conf);
    reload();
    expect_status(cmd(alice, "AUTH alice %s", ALICE_PW), "OK", "AUTH alice %s");
    expect_bulk(cmd(alice, "GET cache:sec8:a"), "1", "GET cache:sec8:a");
    redisFree(alice);
    redisFree(ops);
}
END_TEST

/* INFO server's reloads: counts a reload once every worker took it (threads 4: once, not once
 * per worker); a reload keygate refuses does not count. */
START_TEST(test_reload_counted_once_every_worker_took_it)
{
    static char conf[65536], threads[sizeof extra + 16];
    snprintf(threads, sizeof threads, "%sthreads 4\n", extra);
    struct harness_opts o = {.extra_config = threads};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart with threads 4: %s", h.error);
    ck_assert_int_eq(info_reloads(), 0);
    reload();
    reload();
    ck_assert_int_eq(reloads_until(2), 2);

    FILE *f = fopen(h.conf_file, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(conf, 1, sizeof conf - 1, f);
    conf[n] = '\0';
    fclose(f);
    char broken[sizeof conf + 64];
    snprintf(broken, sizeof broken, "%sno-such-directive 1\n", conf);
    int failed = count_in_log("has errors; keeping the running configuration");
    write_conf(broken);
    ck_assert_int_eq(kill(h.keygate_pid, SIGHUP), 0);
    for (long long end = now_ms() + 5000;
         count_in_log("has errors; keeping the running configuration") == failed && now_ms() < end;)
        usleep(20 * 1000);
    write_conf(conf);
    ck_assert_msg(count_in_log("has errors; keeping the running configuration") > failed,
                  "keygate did not log the refused reload within 5 s");
    ck_assert_int_eq(info_reloads(), 2);
    reload();
    ck_assert_int_eq(info_reloads(), 3);
}
END_TEST

/* ---- 8. backend TLS is verified (these restart keygate; the harness restores it after each) ---- */

/* Restart keygate with the cache instance line replaced by `cache_line` (printf: port, root, pass). */
static void restart_with_cache(const char *cache_line, int port)
{
    static char instances[16384], line[4096];
    struct harness_backend *d = harness_backend(&h, "durable"), *c = harness_backend(&h, "cache");
    snprintf(line, sizeof line, cache_line, port, h.root, c->pass_file);
    snprintf(instances, sizeof instances,
             "instance durable 127.0.0.1:%d tls ca=%s/build/certs/ca.crt cert=%s/build/certs/client.crt "
             "key=%s/build/certs/client.key server-name=localhost password-file=%s\n%s\n",
             d->tls_port, h.root, h.root, h.root, d->pass_file, line);
    struct harness_opts o = {.extra_config = extra, .instances_text = instances};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart: %s", h.error);
}

/* cache requests answer -UNAVAILABLE, durable still serves, and the log says why (`why`). */
static void expect_cache_unavailable(const char *why)
{
    redisContext *c = login("root", ROOT_PW);
    for (int i = 0; i < 3; i++)
        expect_error(cmd(c, "GET cache:sec9:x"), "UNAVAILABLE instance 'cache' is unreachable", "GET cache:sec9:x");
    expect_error(cmd(c, "SET cache:sec9:x 1"), "UNAVAILABLE instance 'cache' is unreachable", "SET cache:sec9:x 1");
    expect_status(cmd(c, "SET q:sec9:x 1"), "OK", "SET q:sec9:x 1");
    redisFree(c);
    char *log = NULL;
    for (int tries = 0; tries < 50; tries++) { /* the log line may trail the reply by a moment */
        free(log);
        log = harness_keygate_log(&h);
        if (log && strstr(log, why)) break;
        usleep(100 * 1000);
    }
    ck_assert_ptr_nonnull(log);
    int found = 0;
    for (const char *line = log; *line && !found; line += strcspn(line, "\n") + (line[strcspn(line, "\n")] != 0)) {
        const char *hit = strstr(line, why), *name = strstr(line, "instance 'cache'");
        size_t end = strcspn(line, "\n");
        found = hit && name && hit < line + end && name < line + end;
    }
    ck_assert_msg(found, "keygate's log has no line naming instance 'cache' and saying '%s':\n%s", why, log);
    free(log);
    ck_assert_int_eq(direct_int("cache", "EXISTS %s", "cache:sec9:x"), 0);
}

START_TEST(test_backend_with_wrong_ca_is_refused)
{
    restart_with_cache("instance cache 127.0.0.1:%d tls ca=%s/build/certs/other-ca.crt server-name=localhost "
                       "password-file=%s",
                       harness_backend(&h, "cache")->tls_port);
    expect_cache_unavailable("certificate verify failed: server certificate: ");
}
END_TEST

START_TEST(test_backend_with_wrong_name_is_refused)
{
    restart_with_cache("instance cache 127.0.0.1:%d tls ca=%s/build/certs/ca.crt server-name=not-the-cache.example "
                       "password-file=%s",
                       harness_backend(&h, "cache")->tls_port);
    expect_cache_unavailable("certificate verify failed: server certificate: hostname mismatch");
}
END_TEST

START_TEST(test_plaintext_backend_configured_as_tls_is_refused)
{
    restart_with_cache("instance cache 127.0.0.1:%d tls ca=%s/build/certs/ca.crt server-name=localhost "
                       "password-file=%s",
                       harness_backend(&h, "cache")->plain_port);
    expect_cache_unavailable("TLS handshake timed out");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("security");
    TCase *tc = harness_tcase(s, "access", 120, setup, teardown);
    harness_add_test(tc, test_noauth_before_auth);
    harness_add_test(tc, test_auth_flows);
    harness_add_test(tc, test_pre_auth_limits);
    harness_add_test(tc, test_rights_and_patterns_through_keygate);
    harness_add_test(tc, test_classic_attacks_change_nothing);
    harness_add_test(tc, test_scripts_only_with_scripts_yes);
    harness_add_test(tc, test_client_tls_listeners);
    harness_add_test(tc, test_unix_socket_listener);
    harness_add_test(tc, test_password_files_must_be_private);
    harness_add_test(tc, test_reload_rebinds_sessions_to_new_users);
    harness_add_test(tc, test_reload_counted_once_every_worker_took_it);
    harness_add_test(tc, test_secrets_never_in_logs_or_info);
    harness_add_test(tc, test_backend_with_wrong_ca_is_refused);
    harness_add_test(tc, test_backend_with_wrong_name_is_refused);
    harness_add_test(tc, test_plaintext_backend_configured_as_tls_is_refused);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
