/* test_authgate.c: integration tests of AUTH throttling (issue 19 part 5): many connections of one address guessing at most 10 a second, closed after 3 failures, a client of another address served meanwhile, counted and logged without the password. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "authfail.h"
#include "harness.h"

/*
 * One harness: the repo's registry, `user alice password-file=… owners=* access=rw`, the admin
 * port. Each test attacks from a loopback address of its own (127.0.0.1, .3, .4, .5; the
 * legitimate client is 127.0.0.2): keygate's failed-AUTH table outlives a test, and an
 * address's failures are remembered for minutes.
 */

static struct harness h;
static char dir[64];
static char extra[1024];

#define ALICE_PW "alice-right-pw-1"
#define WRONG_PW "guess-wrong-pw-7" /* grepped for in the log */
#define ATTACKERS 20
#define ATTACK_MS 4000
#define WRONGPASS "-WRONGPASS invalid username-password pair or user is disabled.\r\n"

static const char wrong_auth[] = "*2\r\n$4\r\nAUTH\r\n$16\r\n" WRONG_PW "\r\n";

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/kgauth-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char pass[128];
    snprintf(pass, sizeof pass, "%s/alice.pass", dir);
    harness_write_secret(pass, ALICE_PW "\n", 0600);
    snprintf(extra, sizeof extra, "user alice password-file=%s owners=* access=rw\n", pass);
    struct harness_opts o = {.extra_config = extra, .admin = 1};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h);
    harness_stop(&h);
    char pass[128];
    snprintf(pass, sizeof pass, "%s/alice.pass", dir);
    unlink(pass);
    rmdir(dir);
}

static int connect_from(const char *src)
{
    return harness_connect_from(&h, src);
}

static redisContext *client_from(const char *src)
{
    return harness_client_from(&h, src);
}

/* keygate_auth_failures_total from /metrics. */
static long long metrics_auth_failures(void)
{
    struct harness_http r = harness_admin_get(&h, "/metrics");
    const char *at = strstr(r.body, "\nkeygate_auth_failures_total ");
    ck_assert_msg(at != NULL, "/metrics has no keygate_auth_failures_total");
    long long v = atoll(at + strlen("\nkeygate_auth_failures_total "));
    free(r.body);
    return v;
}

/* ---- the attackers: raw sockets pipelining wrong AUTHs as fast as keygate takes them ---- */

struct attacker {
    int fd;         /* -1: closed by keygate (reconnected at the next round) */
    int answered;   /* WRONGPASS replies on this connection */
    char tail[256]; /* an unfinished reply line */
    size_t tail_len;
};

struct attack {
    const char *src;
    struct attacker a[ATTACKERS];
    long long answered; /* WRONGPASS replies, every connection */
    int per_second[64]; /* of them, by second since the start */
    int closed;         /* connections keygate closed */
    int closed_early;   /* ... before their AUTHFAIL_CLOSE_AFTER-th failure */
    int most_answered;  /* the most WRONGPASS replies one connection got */
    long long start_ms;
};

static void attacker_open(struct attack *at, struct attacker *a)
{
    *a = (struct attacker){.fd = connect_from(at->src)};
    int fl = fcntl(a->fd, F_GETFL);
    ck_assert_int_eq(fcntl(a->fd, F_SETFL, fl | O_NONBLOCK), 0);
}

/* Keep the pipeline full: write wrong AUTHs until the socket takes no more (keygate stops
 * reading a held connection, so its buffers fill). */
static void attacker_write(struct attacker *a)
{
    for (int i = 0; i < 64; i++) {
        ssize_t n = write(a->fd, wrong_auth, sizeof wrong_auth - 1);
        if (n < (ssize_t)(sizeof wrong_auth - 1)) break; /* full (a partial write only ends the pipeline early) */
    }
}

/* Read what came: every line must be WRONGPASS; EOF is keygate closing the connection. */
static void attacker_read(struct attack *at, struct attacker *a)
{
    char buf[4096];
    for (;;) {
        ssize_t n = read(a->fd, buf, sizeof buf);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) { /* closed by keygate (a reset after the close counts the same) */
            close(a->fd);
            a->fd = -1;
            at->closed++;
            if (a->answered < AUTHFAIL_CLOSE_AFTER) at->closed_early++;
            return;
        }
        for (ssize_t i = 0; i < n; i++) {
            ck_assert_msg(a->tail_len < sizeof a->tail, "a reply line longer than %zu bytes", sizeof a->tail);
            a->tail[a->tail_len++] = buf[i];
            if (buf[i] != '\n') continue;
            ck_assert_msg(a->tail_len == strlen(WRONGPASS) && memcmp(a->tail, WRONGPASS, a->tail_len) == 0,
                          "an attacker got '%.*s', want WRONGPASS", (int)a->tail_len, a->tail);
            a->tail_len = 0;
            a->answered++;
            at->answered++;
            long long s = (now_ms() - at->start_ms) / 1000;
            if (s >= 0 && s < 64) at->per_second[s]++;
            if (a->answered > at->most_answered) at->most_answered = a->answered;
        }
    }
}

/*
 * ATTACKERS connections from at->src pipelining wrong passwords for ms milliseconds (a closed
 * one is replaced at once, as an attacker would). With `legit` (a connection of another
 * address, authenticated), a GET every 100 ms on it meanwhile: each must be answered within
 * 100 ms; the slowest is returned in *legit_max_ms.
 */
static void attack_run(struct attack *at, int ms, redisContext *legit, long long *legit_max_ms)
{
    for (int i = 0; i < ATTACKERS; i++) attacker_open(at, &at->a[i]);
    at->start_ms = now_ms();
    long long next_legit = at->start_ms;
    *legit_max_ms = 0;
    while (now_ms() - at->start_ms < ms) {
        struct pollfd p[ATTACKERS];
        for (int i = 0; i < ATTACKERS; i++) {
            if (at->a[i].fd < 0) attacker_open(at, &at->a[i]);
            attacker_write(&at->a[i]);
            p[i] = (struct pollfd){.fd = at->a[i].fd, .events = POLLIN};
        }
        ck_assert_int_ge(poll(p, ATTACKERS, 10), 0);
        for (int i = 0; i < ATTACKERS; i++)
            if (p[i].revents) attacker_read(at, &at->a[i]);
        if (legit && now_ms() >= next_legit) {
            long long t0 = now_ms();
            expect_nil(cmd(legit, "GET cache:authgate:legit"), "the legitimate client's GET");
            long long took = now_ms() - t0;
            if (took > *legit_max_ms) *legit_max_ms = took;
            next_legit = t0 + 100;
        }
    }
    /* the attacker leaves: a reset, which keygate sees at once (a FIN would wait behind the
     * pipelined bytes keygate does not read while it holds the connection; such a connection
     * goes at client-header-timeout) */
    for (int i = 0; i < ATTACKERS; i++) {
        if (at->a[i].fd < 0) continue;
        struct linger abort_close = {1, 0};
        setsockopt(at->a[i].fd, SOL_SOCKET, SO_LINGER, &abort_close, sizeof abort_close);
        close(at->a[i].fd);
    }
}

/* The most failures one table lets an address make within ms: the first at once, each next
 * one the delay of the one before later (0, 100, 300, 700, 1500, 3100, 6300 ms ...). */
static int most_failures_within(int ms)
{
    int n = 0;
    for (long long t = 0; t <= ms; t += authfail_delay((uint32_t)n)) n++;
    return n;
}

/* How many times `needle` occurs in s. */
static int occurrences(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* How long a wrong AUTH on c takes to be answered. */
static long long wrong_auth_ms(redisContext *c)
{
    long long t0 = now_ms();
    expect_error(cmd(c, "AUTH alice %s", WRONG_PW), "WRONGPASS", "AUTH alice (wrong)");
    return now_ms() - t0;
}

/* A correct AUTH from src: +OK; returns how long it took (it waits for the address's turn). */
static long long auth_ok_from(const char *src)
{
    redisContext *c = client_from(src);
    long long t0 = now_ms();
    expect_status(cmd(c, "AUTH alice %s", ALICE_PW), "OK", "AUTH alice (right password)");
    long long took = now_ms() - t0;
    expect_nil(cmd(c, "GET cache:authgate:after"), "GET after the right AUTH");
    redisFree(c);
    return took;
}

/* 20 connections of 127.0.0.1 pipelining wrong passwords for 4 s get at most 10 answers a
 * second between them (the first second may have one more: the first failure is answered
 * before the address is known), none more than 3 on one connection; a client from
 * 127.0.0.2 AUTHs at once and is served within 100 ms a request meanwhile; afterwards a
 * right password from 127.0.0.1 succeeds once its turn came (within the 5 s cap). Counted
 * in INFO stats and /metrics; logged once, without the password. Fails without authgate:
 * ~80,000 answers a second, connections never closed. */
START_TEST(test_many_connections_of_one_address_get_ten_a_second)
{
    redisContext *legit = client_from("127.0.0.2");
    long long t0 = now_ms();
    expect_status(cmd(legit, "AUTH alice %s", ALICE_PW), "OK", "AUTH from 127.0.0.2");
    ck_assert_msg(now_ms() - t0 <= 100, "AUTH from a clean address took %lld ms", now_ms() - t0);
    long long before = harness_info_stat(legit, "auth_failures");

    static struct attack at = {.src = "127.0.0.1"};
    long long legit_max_ms;
    attack_run(&at, ATTACK_MS, legit, &legit_max_ms);
    fprintf(stderr,
            "authgate: %d connections of 127.0.0.1 for %d ms: %lld WRONGPASS answered, %d connections "
            "closed, the legitimate client's slowest GET %lld ms\n",
            ATTACKERS, ATTACK_MS, at.answered, at.closed, legit_max_ms);
    ck_assert_msg(at.answered >= 1, "no wrong AUTH was answered at all");
    ck_assert_msg(at.answered <= 10 * ATTACK_MS / 1000 + 1, "%lld wrong AUTHs answered in %d ms: over 10 a second",
                  at.answered, ATTACK_MS);
    for (int s = 0; s < ATTACK_MS / 1000; s++)
        ck_assert_msg(at.per_second[s] <= 10 + (s == 0), "second %d: %d wrong AUTHs answered", s, at.per_second[s]);
    ck_assert_msg(at.answered <= most_failures_within(ATTACK_MS),
                  "%lld wrong AUTHs answered in %d ms: more than "
                  "the doubling delays allow (%d)",
                  at.answered, ATTACK_MS, most_failures_within(ATTACK_MS));
    ck_assert_msg(at.most_answered <= AUTHFAIL_CLOSE_AFTER, "one connection got %d WRONGPASS: not closed after %d",
                  at.most_answered, AUTHFAIL_CLOSE_AFTER);
    ck_assert_msg(at.closed_early == 0, "%d connections closed before their %dth failure", at.closed_early,
                  AUTHFAIL_CLOSE_AFTER);
    ck_assert_msg(legit_max_ms <= 100, "the client of 127.0.0.2 waited %lld ms for a GET", legit_max_ms);

    /* counted as they were made: at least every answer, at most one more per connection
     * (a failure whose reply was still held when the attacker left) */
    ck_assert_msg(before >= 0, "INFO stats has no auth_failures");
    long long counted = harness_info_stat(legit, "auth_failures") - before;
    ck_assert_msg(counted >= at.answered && counted <= at.answered + ATTACKERS + at.closed,
                  "auth_failures went up by %lld for %lld answered", counted, at.answered);

    long long took = auth_ok_from("127.0.0.1");
    fprintf(stderr, "authgate: the right password from 127.0.0.1 took %lld ms\n", took);
    ck_assert_msg(took <= AUTHFAIL_DELAY_MAX_MS + 1000, "the right password waited %lld ms", took);
    ck_assert_int_eq(metrics_auth_failures(), harness_info_stat(legit, "auth_failures"));
    redisFree(legit);

    char *log = harness_keygate_log(&h);
    ck_assert_ptr_nonnull(log);
    ck_assert_msg(occurrences(log, "failed AUTH from 127.0.0.1 ") == 1, "auth_throttle of 127.0.0.1 logged %d times",
                  occurrences(log, "failed AUTH from 127.0.0.1 "));
    ck_assert_msg(strstr(log, WRONG_PW) == NULL, "the wrong password is in keygate's log");
    ck_assert_msg(strstr(log, ALICE_PW) == NULL, "the right password is in keygate's log");
    free(log);
}
END_TEST

/* Read one reply line from fd (blocking, 10 s); the line into out. */
static void read_line(int fd, char *out, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t got = read(fd, out + n, 1);
        ck_assert_msg(got == 1, "read: %s", got == 0 ? "closed" : strerror(errno));
        if (out[n++] == '\n') break;
    }
    out[n] = '\0';
}

/* One connection of a clean address pipelining 10 wrong AUTHs (HELLO ... AUTH among them)
 * and a GET: three WRONGPASS, each delayed longer (100, 200, 400 ms: the doubling), then
 * keygate closes it; the GET is never answered. Fails without authgate (ten immediate
 * WRONGPASS, then NOAUTH, the connection open). */
START_TEST(test_a_connection_is_closed_after_three_failures)
{
    int fd = connect_from("127.0.0.3");
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char req[4096];
    size_t len = 0;
    static const char hello[] = "*5\r\n$5\r\nHELLO\r\n$1\r\n2\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$16\r\n" WRONG_PW "\r\n";
    memcpy(req + len, hello, sizeof hello - 1);
    len += sizeof hello - 1;
    for (int i = 0; i < 9; i++) {
        memcpy(req + len, wrong_auth, sizeof wrong_auth - 1);
        len += sizeof wrong_auth - 1;
    }
    static const char get[] = "*2\r\n$3\r\nGET\r\n$18\r\ncache:authgate:x12\r\n";
    memcpy(req + len, get, sizeof get - 1);
    len += sizeof get - 1;
    long long t = now_ms();
    ck_assert_int_eq(write(fd, req, len), (ssize_t)len);
    for (int i = 0; i < AUTHFAIL_CLOSE_AFTER; i++) {
        char line[256];
        read_line(fd, line, sizeof line);
        long long at = now_ms();
        ck_assert_str_eq(line, WRONGPASS);
        ck_assert_msg(at - t >= authfail_delay((uint32_t)i + 1) - 5, "failure %d answered after %lld ms, want >= %lld",
                      i + 1, at - t, (long long)authfail_delay((uint32_t)i + 1));
        t = at;
    }
    char rest[256];
    ssize_t got = read(fd, rest, sizeof rest);
    ck_assert_msg(got == 0, "after %d failures: want the connection closed, got %zd bytes '%.*s' (%s)",
                  AUTHFAIL_CLOSE_AFTER, got, got > 0 ? (int)got : 0, rest, got < 0 ? strerror(errno) : "");
    close(fd);
    /* the address's next turn: a right password succeeds once the last delay has passed */
    long long took = auth_ok_from("127.0.0.3");
    ck_assert_msg(took <= authfail_delay(AUTHFAIL_CLOSE_AFTER) + 1000, "the right password waited %lld ms", took);
}
END_TEST

/* A failed AUTH whose reply is held for its delay is no request in flight: SIGTERM does not
 * wait for the delay (test_security's last keygate took the whole 5 s shutdown-timeout to
 * exit, and the harness SIGKILLed it: a client that closed while held is only seen gone
 * once keygate reads it again). */
START_TEST(test_shutdown_does_not_wait_for_a_held_failure)
{
    for (int k = 0; k < 3; k++) { /* 6 failures from 127.0.0.9, two a connection (3 would close it) */
        redisContext *c = client_from("127.0.0.9");
        for (int i = 0; i < 2 && k * 2 + i < 5; i++) wrong_auth_ms(c);
        if (k == 2) {
            /* the 6th: its reply is held for authfail_delay(6) */
            ck_assert_int_eq(redisAppendCommand(c, "AUTH alice %s", WRONG_PW), REDIS_OK);
            send_appended(c, "the held AUTH");
            long long until = now_ms() + 3000; /* a failure is counted when it fails, its reply held after */
            while (metrics_auth_failures() < 6 && now_ms() < until) sleep_ms(10);
            ck_assert_msg(metrics_auth_failures() >= 6, "the 6th wrong AUTH was not counted within 3 s");
            pid_t pid = h.keygate_pid;
            long long t0 = now_ms();
            ck_assert_int_eq(kill(pid, SIGTERM), 0);
            ck_assert_msg(harness_wait_exit(pid, 10000) != -1, "keygate still runs 10 s after SIGTERM");
            long long took = now_ms() - t0;
            ck_assert_msg(took < 1000, "keygate took %lld ms to stop with a failed AUTH held for %lld ms", took,
                          (long long)authfail_delay(6));
        }
        redisFree(c);
    }
}
END_TEST

/* Requests pipelined behind a failed AUTH wait behind it, replies in order: WRONGPASS
 * (after its delay), the GET's NOAUTH, the right AUTH's +OK, the GET's nil. */
START_TEST(test_requests_behind_a_failed_auth_wait_in_order)
{
    redisContext *c = client_from("127.0.0.5");
    redisAppendCommand(c, "AUTH alice %s", WRONG_PW);
    redisAppendCommand(c, "GET cache:authgate:order");
    redisAppendCommand(c, "AUTH alice %s", ALICE_PW);
    redisAppendCommand(c, "GET cache:authgate:order");
    long long t0 = now_ms();
    send_appended(c, "the pipeline");
    expect_error(next_reply(c), "WRONGPASS", "the wrong AUTH");
    expect_error(next_reply(c), "NOAUTH", "the GET behind it");
    long long took = now_ms() - t0;
    ck_assert_msg(took >= AUTHFAIL_DELAY_MS - 5, "the GET behind the failed AUTH answered after %lld ms", took);
    expect_status(next_reply(c), "OK", "the right AUTH");
    expect_nil(next_reply(c), "the GET after it");
    redisFree(c);
}
END_TEST

/* HELLO ... AUTH takes its address's turn as AUTH does: while a failure of 127.0.0.10 (its
 * third: 400 ms) is held, a HELLO 2 AUTH with the right password from another connection of
 * the address is answered only once the turn came; a client of 127.0.0.2 is not held. */
START_TEST(test_hello_auth_waits_its_turn)
{
    redisContext *legit = client_from("127.0.0.2");
    expect_status(cmd(legit, "AUTH alice %s", ALICE_PW), "OK", "AUTH from 127.0.0.2");
    long long base = harness_info_stat(legit, "auth_failures");
    ck_assert_msg(base >= 0, "INFO stats has no auth_failures");
    redisContext *a = client_from("127.0.0.10");
    wrong_auth_ms(a);
    wrong_auth_ms(a);
    redisFree(a);
    a = client_from("127.0.0.10");
    redisAppendCommand(a, "AUTH alice %s", WRONG_PW);
    long long sent = now_ms();
    send_appended(a, "the third wrong AUTH");
    long long end = now_ms() + 5000;
    while (harness_info_stat(legit, "auth_failures") < base + 3 && now_ms() < end) sleep_ms(1);
    ck_assert_msg(harness_info_stat(legit, "auth_failures") == base + 3,
                  "the third failure was not counted within 5 s");
    redisContext *b = client_from("127.0.0.10");
    redisReply *r = cmd(b, "HELLO 2 AUTH alice %s", ALICE_PW);
    long long answered = now_ms();
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY, "HELLO 2 AUTH alice (right): %s", describe(r));
    freeReplyObject(r);
    ck_assert_msg(answered - sent >= authfail_delay(3) - 5,
                  "HELLO ... AUTH answered %lld ms after a failure whose turn lasts %lld ms", answered - sent,
                  (long long)authfail_delay(3));
    expect_error(next_reply(a), "WRONGPASS", "the third wrong AUTH");
    redisFree(a);
    redisFree(b);
    redisFree(legit);
}
END_TEST

/* With `threads 2` the table is the process's: 20 connections of 127.0.0.4, spread over both
 * workers by SO_REUSEPORT, still get at most 10 answers a second, and no more than one table's
 * doubling delays allow (plus one: both workers may admit the first attempt before either
 * failed). A table per worker would answer about twice that. */
START_TEST(test_two_threads_share_one_table)
{
    char conf[1200];
    snprintf(conf, sizeof conf, "%sthreads 2\n", extra);
    struct harness_opts o = {.extra_config = conf, .admin = 1};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart with threads 2: %s", h.error);
    static struct attack at = {.src = "127.0.0.4"};
    long long unused;
    attack_run(&at, ATTACK_MS, NULL, &unused);
    fprintf(stderr, "authgate: threads 2, %d connections of 127.0.0.4 for %d ms: %lld WRONGPASS answered\n", ATTACKERS,
            ATTACK_MS, at.answered);
    ck_assert_msg(at.answered >= 1, "no wrong AUTH was answered at all");
    ck_assert_msg(at.answered <= 10 * ATTACK_MS / 1000 + 2, "%lld wrong AUTHs answered in %d ms: over 10 a second",
                  at.answered, ATTACK_MS);
    for (int s = 0; s < ATTACK_MS / 1000; s++)
        ck_assert_msg(at.per_second[s] <= 10 + 2 * (s == 0), "second %d: %d wrong AUTHs answered", s, at.per_second[s]);
    ck_assert_msg(at.answered <= most_failures_within(ATTACK_MS) + 1,
                  "%lld wrong AUTHs answered in %d ms: more than one table's doubling delays allow (%d + 1)",
                  at.answered, ATTACK_MS, most_failures_within(ATTACK_MS));
}
END_TEST

/* keygate again with a TLS listener on a free port and a unix socket (dir/kg.sock); the port. */
static int restart_with_tls_and_unix(void)
{
    int tls_port = harness_free_port();
    ck_assert_int_gt(tls_port, 0);
    char conf[4096];
    snprintf(conf, sizeof conf,
             "%slisten 127.0.0.1:%d tls cert=%s/build/certs/server.crt key=%s/build/certs/server.key\n"
             "listen unix:%s/kg.sock mode=0600\n",
             extra, tls_port, h.root, h.root, dir);
    struct harness_opts o = {.extra_config = conf, .admin = 1};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart with TLS and unix listeners: %s", h.error);
    return tls_port;
}

/* A TLS client (a connection bound to 127.0.0.9) pipelining 5 wrong AUTHs and a PING gets
 * three WRONGPASS, at least 100 + 200 + 400 ms after its write, then the connection
 * closes: the TLS path holds and closes as the plain one does. */
START_TEST(test_tls_clients_are_throttled_too)
{
    int port = restart_with_tls_and_unix();
    SSL *ssl = harness_tls_client(&h, port, "127.0.0.9");
    char req[1024] = "";
    for (int i = 0; i < 5; i++) strcat(req, "AUTH " WRONG_PW "\r\n");
    strcat(req, "PING\r\n");
    long long t0 = now_ms();
    ck_assert_int_eq(SSL_write(ssl, req, (int)strlen(req)), (int)strlen(req));
    char out[1024];
    size_t got = 0;
    for (;;) {
        int n = SSL_read(ssl, out + got, (int)(sizeof out - 1 - got));
        if (n <= 0) break;
        got += (size_t)n;
    }
    out[got] = '\0';
    long long took = now_ms() - t0;
    ck_assert_msg(took < 10000, "the connection was not closed (read timed out), got '%s'", out);
    ck_assert_str_eq(out, WRONGPASS WRONGPASS WRONGPASS);
    ck_assert_msg(took >= 100 + 200 + 400 - 5, "three failures answered within %lld ms", took);
    harness_tls_close(ssl);
}
END_TEST

/* A unix-socket connection to keygate's dir/kg.sock (blocking, 10 s timeouts). */
static redisContext *unix_client(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/kg.sock", dir);
    struct timeval tv = {10, 0};
    redisContext *c = redisConnectUnixWithTimeout(path, tv);
    ck_assert_msg(c != NULL && !c->err, "connect %s: %s", path, c ? c->errstr : "no memory");
    ck_assert_int_eq(redisSetTimeout(c, tv), REDIS_OK);
    return c;
}

/* Unix-socket clients count by their peer's uid: the failures of three connections of this
 * uid add up (100, 200, 400 ms) and are logged as "unix uid N"; a TCP client's first failure
 * (127.0.0.8) is not slowed by them. */
START_TEST(test_unix_clients_count_by_uid)
{
    restart_with_tls_and_unix();
    long long d[3];
    for (int i = 0; i < 3; i++) {
        redisContext *c = unix_client();
        d[i] = wrong_auth_ms(c);
        redisFree(c);
    }
    for (int i = 0; i < 3; i++)
        ck_assert_msg(d[i] >= authfail_delay((uint32_t)i + 1) - 5,
                      "unix failure %d answered after %lld ms, want >= %lld", i + 1, d[i],
                      (long long)authfail_delay((uint32_t)i + 1));
    redisContext *tcp = client_from("127.0.0.8");
    long long first = wrong_auth_ms(tcp);
    ck_assert_msg(first < authfail_delay(2), "a TCP client's first failure took %lld ms: it shares the unix bucket",
                  first);
    redisFree(tcp);
    char *log = harness_keygate_log(&h);
    ck_assert_ptr_nonnull(log);
    char want[64];
    snprintf(want, sizeof want, "failed AUTH from unix uid %u ", (unsigned)getuid());
    ck_assert_msg(strstr(log, want) != NULL, "no '%s' in keygate's log", want);
    free(log);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("authgate");
    TCase *tc = harness_tcase(s, "authgate", 60, setup, teardown);
    harness_add_test(tc, test_many_connections_of_one_address_get_ten_a_second);
    harness_add_test(tc, test_a_connection_is_closed_after_three_failures);
    harness_add_test(tc, test_requests_behind_a_failed_auth_wait_in_order);
    harness_add_test(tc, test_hello_auth_waits_its_turn);
    harness_add_test(tc, test_two_threads_share_one_table);
    harness_add_test(tc, test_tls_clients_are_throttled_too);
    harness_add_test(tc, test_unix_clients_count_by_uid);
    harness_add_test(tc, test_shutdown_does_not_wait_for_a_held_failure);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
