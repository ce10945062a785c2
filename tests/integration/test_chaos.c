/* test_chaos.c: issue 12: no acknowledged INCR lost on durable under chaos; backend errors pass through unchanged. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/*
 * One harness (two TLS redis-servers + keygate, the repo's conf/registry.conf) with one
 * user, `root` (owners=* access=rw scripts=yes: EVALSHA needs scripts=yes). Registry facts
 * used: q: durable ttl=none, rl: durable ttl=1h (writes MULTI-wrapped with a PEXPIRE),
 * cache: cache ttl=1h (SET gets EX, other writes MULTI-wrapped).
 *
 * Every backend setting a test changes (appendfsync, maxmemory, busy-reply-threshold,
 * REPLICAOF, save/dir) is put back before the test asserts anything.
 */

#define ROOT_PW "chaos-root-pw"

static struct harness h;

static void setup(void)
{
    static char extra[256];
    char hash[65];
    harness_sha256_hex(ROOT_PW, hash);
    snprintf(extra, sizeof extra, "user root sha256=%s owners=* access=rw scripts=yes\n", hash);
    struct harness_opts o = {.extra_config = extra};
    ck_assert_msg(harness_start(&h, &o) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h);
    harness_stop(&h);
}

/* A connection to keygate logged in as root (10 s I/O timeout); NULL when it cannot be made. No assertion:
 * safe in the chaos client threads. */
static redisContext *chaos_login(void)
{
    redisContext *c = harness_client(&h);
    if (c == NULL) return NULL;
    redisReply *r = redisCommand(c, "AUTH root %s", ROOT_PW);
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    if (!ok) {
        redisFree(c);
        return NULL;
    }
    return c;
}

static redisContext *must_login(void)
{
    redisContext *c = chaos_login();
    ck_assert_msg(c != NULL, "cannot connect to keygate and AUTH root");
    return c;
}

/* Run one command directly on backend; it must answer +OK. No assertion (usable in restores, which run
 * before any assertion): returns 0, or -1 printing why on stderr. */
static int direct_ok(const char *backend, const char *fmt, ...)
{
    redisContext *c = harness_direct(&h, backend);
    if (c == NULL) {
        fprintf(stderr, "test_chaos: %s unreachable for `%s`\n", backend, fmt);
        return -1;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    if (!ok) fprintf(stderr, "test_chaos: %s: `%s`: %s\n", backend, fmt, r != NULL ? describe(r) : c->errstr);
    freeReplyObject(r);
    redisFree(c);
    return ok ? 0 : -1;
}

/* The value of CONFIG GET name on backend, into out. */
static void config_get(const char *backend, const char *name, char *out, size_t len)
{
    redisReply *r = harness_direct_cmd(&h, backend, "CONFIG GET %s", name);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING,
                  "%s: CONFIG GET %s: %s", backend, name, describe(r));
    snprintf(out, len, "%s", r->element[1]->str);
    freeReplyObject(r);
}

/* ASan keeps freed memory in quarantine and adds shadow memory: under it the RSS bound is
 * printed, not checked (as in test_limits). */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_CHECKED 0
#else
#define RSS_CHECKED 1
#endif

/* ---- chaos: nothing acknowledged is lost ---- */

enum {
    CHAOS_CLIENTS = 8,
    CHAOS_DEPTH = 4, /* INCRs pipelined per round trip: replies must come back in order */
};
#define CHAOS_BASE_STEP 1000000000000LL /* client i's counter starts at (i + 1) * this: ranges never meet */

struct chaos_client {
    int id;
    char key[64];
    long long base;       /* the counter's value before the run */
    long long last;       /* the last acknowledged value (base before any) */
    long long sent;       /* INCRs written */
    long long acked;      /* integer replies */
    long long errored;    /* error replies */
    long long lost;       /* in flight when keygate closed the connection: no reply */
    long long reconnects; /* keygate closed the connection and the client connected again */
    long long calm_acked; /* acked once the calm phase began */
    char first_error[160];
    char failure[320]; /* the first violation seen; "" if none */
};

static atomic_int chaos_stop;
static atomic_int chaos_calm; /* set when the last disturbance is over */

static void chaos_fail(struct chaos_client *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void chaos_fail(struct chaos_client *k, const char *fmt, ...)
{
    if (k->failure[0] != '\0') return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->failure, sizeof k->failure, fmt, ap);
    va_end(ap);
}

/* One reply of the client's pipeline: an integer must be its own counter's next values (strictly
 * above the last acknowledged one, below base + everything sent that may have run); an error is counted. */
static void chaos_reply(struct chaos_client *k, const redisReply *r)
{
    if (r->type == REDIS_REPLY_INTEGER) {
        long long v = r->integer;
        if (v < k->base || v >= k->base + CHAOS_BASE_STEP)
            chaos_fail(k, "client %d got %lld: another counter's value (its own starts at %lld)", k->id, v, k->base);
        else if (v <= k->last)
            chaos_fail(k, "client %d got %lld after %lld: not increasing", k->id, v, k->last);
        else if (v - k->base > k->acked + 1 + k->errored + k->lost)
            chaos_fail(k, "client %d got %lld: more INCRs ran (%lld) than it had unanswered or acknowledged (%lld)",
                       k->id, v, v - k->base, k->acked + 1 + k->errored + k->lost);
        k->last = v;
        k->acked++;
        if (atomic_load(&chaos_calm)) k->calm_acked++;
    } else if (r->type == REDIS_REPLY_ERROR) {
        if (k->errored == 0) snprintf(k->first_error, sizeof k->first_error, "%s", r->str);
        k->errored++;
    } else {
        chaos_fail(k, "client %d: INCR answered %s", k->id, describe(r));
    }
}

static void *chaos_client_run(void *arg)
{
    struct chaos_client *k = arg;
    redisContext *c = NULL;
    while (!atomic_load(&chaos_stop) && k->failure[0] == '\0') {
        if (c == NULL && (c = chaos_login()) == NULL) {
            sleep_ms(20);
            continue;
        }
        for (int i = 0; i < CHAOS_DEPTH; i++) redisAppendCommand(c, "INCR %s", k->key);
        k->sent += CHAOS_DEPTH;
        long long errors = k->errored;
        for (int i = 0; i < CHAOS_DEPTH; i++) {
            void *r = NULL;
            if (redisGetReply(c, &r) != REDIS_OK || r == NULL) {
                if (c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK))
                    chaos_fail(k, "client %d: no reply within 10 s (%s)", k->id, c->errstr);
                k->lost += CHAOS_DEPTH - i;
                k->reconnects++;
                redisFree(c);
                c = NULL;
                break;
            }
            chaos_reply(k, r);
            freeReplyObject(r);
        }
        if (k->errored != errors) sleep_ms(10); /* the backend is down: do not spin */
    }
    if (c != NULL) {
        /* exactly one reply each: nothing more may arrive */
        struct timeval tv = {0, 300000};
        redisSetTimeout(c, tv);
        void *r = NULL;
        if (redisGetReply(c, &r) == REDIS_OK && r != NULL) {
            chaos_fail(k, "client %d: an extra reply after its last INCR: %s", k->id, describe(r));
            freeReplyObject(r);
        }
        redisFree(c);
    }
    return NULL;
}

/* Put appendfsync always on durable (the harness's redis.conf has AOF with everysec); after
 * each restart too, since the restart reads redis.conf again. */
static void durable_fsync_always(void)
{
    ck_assert_msg(direct_ok("durable", "CONFIG SET appendfsync always") == 0, "durable: CONFIG SET appendfsync");
}

static void durable_kill_restart(int down_ms)
{
    ck_assert_msg(harness_backend_kill(&h, "durable") == 0, "killing durable");
    sleep_ms(down_ms); /* the scenario, not a wait: durable stays down that long */
    ck_assert_msg(harness_backend_restart(&h, "durable") == 0, "restarting durable: %s", h.error);
    durable_fsync_always();
}

/* CLIENT KILL TYPE normal on durable: keygate's backend connections (not the caller's). How many. */
static long long durable_client_kill(void)
{
    return harness_direct_int(&h, "durable", "CLIENT KILL TYPE normal");
}

static long long chaos_acked(const struct chaos_client *k)
{
    long long n = 0;
    for (int i = 0; i < CHAOS_CLIENTS; i++) n += k[i].acked;
    return n;
}

/* The disturbances' timeline, for the test's output. */
struct chaos_log {
    long long t0;
    char text[1024];
    size_t used;
};

static void chaos_log(struct chaos_log *log, const struct chaos_client *k, const char *what)
{
    if (log->used >= sizeof log->text) return;
    log->used += (size_t)snprintf(log->text + log->used, sizeof log->text - log->used,
                                  "  %5lld ms %-28s acked so far %lld\n", now_ms() - log->t0, what, chaos_acked(k));
}

/* With durable stopped: wait until no ack came for 300 ms (the replies durable sent before it
 * stopped have arrived), at most 1.5 s; the acks then. */
static long long acked_quiet(const struct chaos_client *k)
{
    long long acked = chaos_acked(k), since = now_ms(), end = since + 1500;
    while (now_ms() - since < 300) {
        ck_assert_msg(now_ms() < end, "INCRs still acknowledged 1.5 s after durable stopped (%lld so far)", acked);
        sleep_ms(10);
        long long now = chaos_acked(k);
        if (now != acked) acked = now, since = now_ms();
    }
    return acked;
}

START_TEST(test_chaos_nothing_acknowledged_is_lost)
{
    char fsync_was[32];
    config_get("durable", "appendfsync", fsync_was, sizeof fsync_was);
    durable_fsync_always();

    static struct chaos_client k[CHAOS_CLIENTS];
    redisContext *c = must_login();
    for (int i = 0; i < CHAOS_CLIENTS; i++) {
        k[i].id = i;
        k[i].base = (i + 1) * CHAOS_BASE_STEP;
        k[i].last = k[i].base;
        snprintf(k[i].key, sizeof k[i].key, "q:chaos:%d:counter:%d", (int)getpid(), i);
        expect_status(cmd(c, "SET %s %lld", k[i].key, k[i].base), "OK", "the counter's base");
    }
    long long rss_start = harness_status_kib(h.keygate_pid, "VmRSS");

    pthread_t threads[CHAOS_CLIENTS];
    for (int i = 0; i < CHAOS_CLIENTS; i++)
        ck_assert_msg(pthread_create(&threads[i], NULL, chaos_client_run, &k[i]) == 0, "pthread_create");

    /* the disturbances, about 20 s in all; acks counted before each. The sleeps between them
     * are the scenario, not waits: the clients' traffic runs that long between disturbances */
    struct chaos_log log = {.t0 = now_ms()};
    sleep_ms(1500);
    chaos_log(&log, k, "CLIENT KILL TYPE normal");
    long long killed1 = durable_client_kill();
    sleep_ms(1500);
    chaos_log(&log, k, "SIGKILL, down 1 s, restart");
    durable_kill_restart(1000);
    sleep_ms(2000);
    chaos_log(&log, k, "SIGSTOP 2 s, SIGCONT");
    pid_t pid = harness_backend(&h, "durable")->pid;
    ck_assert_msg(pid > 0 && kill(pid, SIGSTOP) == 0, "SIGSTOP durable");
    harness_wait_stopped(pid);
    long long acked_stop = acked_quiet(k); /* replies already on their way may still arrive */
    sleep_ms(1900);                        /* the scenario, not a wait: durable stays stopped */
    long long acked_stopped = chaos_acked(k) - acked_stop;
    ck_assert_msg(kill(pid, SIGCONT) == 0, "SIGCONT durable");
    ck_assert_msg(acked_stopped == 0, "%lld INCRs acknowledged while durable was stopped", acked_stopped);
    sleep_ms(1500);
    chaos_log(&log, k, "SIGKILL, down 0.5 s, restart");
    durable_kill_restart(500);
    sleep_ms(2500);
    chaos_log(&log, k, "CLIENT KILL TYPE normal");
    long long killed2 = durable_client_kill();
    sleep_ms(1500);
    chaos_log(&log, k, "SIGKILL, restart at once");
    durable_kill_restart(0);
    sleep_ms(2500);
    chaos_log(&log, k, "calm: every client must INCR");
    atomic_store(&chaos_calm, 1);
    sleep_ms(4000);
    chaos_log(&log, k, "stop");
    atomic_store(&chaos_stop, 1);
    for (int i = 0; i < CHAOS_CLIENTS; i++) pthread_join(threads[i], NULL);
    int restored = direct_ok("durable", "CONFIG SET appendfsync %s", fsync_was);

    /* keygate gives back what the chaos cost: its RSS polled (5 s) until within 16 MiB of the start.
     * Not "until the clients are closed in keygate": a backend the harness restarted from this
     * process inherited the clients' sockets (no FD_CLOEXEC), so keygate sees them open. */
    long long rss_end = harness_status_kib(h.keygate_pid, "VmRSS");
    for (long long end = now_ms() + 5000; RSS_CHECKED && rss_end >= rss_start + 16 * 1024 && now_ms() < end;) {
        sleep_ms(50);
        rss_end = harness_status_kib(h.keygate_pid, "VmRSS");
    }
    long long rss_peak = harness_status_kib(h.keygate_pid, "VmHWM");
    fprintf(stderr, "chaos timeline (CLIENT KILL closed %lld, then %lld connections; acked in the stop: %lld):\n%s",
            killed1, killed2, acked_stopped, log.text);

    long long sent = 0, acked = 0, errored = 0, lost = 0, reconnects = 0, ran0 = 0;
    for (int i = 0; i < CHAOS_CLIENTS; i++) {
        redisReply *r = harness_direct_cmd(&h, "durable", "GET %s", k[i].key);
        ck_assert_msg(r->type == REDIS_REPLY_STRING, "durable: GET %s: %s", k[i].key, describe(r));
        long long ran = atoll(r->str) - k[i].base;
        freeReplyObject(r);
        if (i == 0) ran0 = ran;
        fprintf(stderr,
                "  client %d: sent %lld acked %lld errored %lld lost %lld reconnects %lld calm-acked %lld; ran on "
                "durable %lld; first error: %s\n",
                i, k[i].sent, k[i].acked, k[i].errored, k[i].lost, k[i].reconnects, k[i].calm_acked, ran,
                k[i].first_error[0] ? k[i].first_error : "(none)");
        /* one reply per request: each was read in turn within 10 s (a missing one fails as "no reply"), a
         * duplicated or foreign one breaks the strictly increasing sequence of the client's own range, and
         * none came after the last (all in chaos_client_run) */
        ck_assert_msg(k[i].failure[0] == '\0', "%s", k[i].failure);
        ck_assert_msg(k[i].acked <= ran, "client %d: %lld INCRs acknowledged, durable holds only %lld: lost", i,
                      k[i].acked, ran);
        ck_assert_msg(ran <= k[i].acked + k[i].errored + k[i].lost,
                      "client %d: durable ran %lld INCRs, more than the %lld acknowledged + %lld errored + %lld lost",
                      i, ran, k[i].acked, k[i].errored, k[i].lost);
        ck_assert_msg(k[i].last - k[i].base <= ran, "client %d: acknowledged value %lld above durable's %lld", i,
                      k[i].last, ran + k[i].base);
        ck_assert_msg(k[i].calm_acked > 0, "client %d: no INCR acknowledged in the 4 s after the last disturbance", i);
        sent += k[i].sent, acked += k[i].acked, errored += k[i].errored, lost += k[i].lost;
        reconnects += k[i].reconnects;
    }
    fprintf(stderr,
            "chaos: %d clients sent %lld INCRs: %lld acked, %lld errored, %lld lost at %lld disconnects; keygate RSS "
            "%lld KiB at start, %lld KiB at the end, peak %lld KiB\n",
            CHAOS_CLIENTS, sent, acked, errored, lost, reconnects, rss_start, rss_end, rss_peak);
    ck_assert_msg(restored == 0, "durable: appendfsync not put back to %s", fsync_was);
    ck_assert_msg(errored > 0, "no INCR failed: the disturbances did not reach keygate");
    ck_assert_msg(acked > 1000, "only %lld INCRs acknowledged in 20 s", acked);
    ck_assert_msg(!RSS_CHECKED || rss_end < rss_start + 16 * 1024,
                  "keygate's RSS %lld KiB 5 s after the end, %lld KiB at the start: not back within 16 MiB", rss_end,
                  rss_start);

    /* keygate still serves, on a connection of before the chaos too */
    expect_status(cmd(c, "PING"), "PONG", "PING on a connection opened before the chaos");
    long long value0 = k[0].base + ran0;
    expect_int(cmd(c, "INCR %s", k[0].key), value0 + 1, "INCR after the chaos: durable's value + 1");
    redisFree(c);
}
END_TEST

/* ---- backend errors pass through unchanged, tried nowhere else ---- */

/* calls + rejected_calls of command on backend (INFO commandstats; 0 when never called). */
static long long cmdstat(const char *backend, const char *command)
{
    redisReply *r = harness_direct_cmd(&h, backend, "INFO commandstats");
    ck_assert_msg(r->type == REDIS_REPLY_STRING, "%s: INFO commandstats: %s", backend, describe(r));
    char name[64];
    snprintf(name, sizeof name, "cmdstat_%s:", command);
    long long n = 0;
    const char *line = strstr(r->str, name);
    if (line != NULL) {
        const char *end = strchr(line, '\n');
        const char *calls = strstr(line, "calls="), *rejected = strstr(line, "rejected_calls=");
        if (calls != NULL && (end == NULL || calls < end)) n += atoll(calls + strlen("calls="));
        if (rejected != NULL && (end == NULL || rejected < end)) n += atoll(rejected + strlen("rejected_calls="));
    }
    freeReplyObject(r);
    return n;
}

/* How often each of up to four commands ran (or was rejected) on durable and on cache. */
struct cmdstats {
    const char *commands[4];
    long long durable[4], cache[4];
};

static void cmdstats_read(struct cmdstats *s)
{
    for (int i = 0; i < 4 && s->commands[i] != NULL; i++) {
        s->durable[i] = cmdstat("durable", s->commands[i]);
        s->cache[i] = cmdstat("cache", s->commands[i]);
    }
}

/* Between before and after, command i ran want_durable[i] times on durable and want_cache[i] on cache. */
static void expect_cmdstats(const struct cmdstats *before, const struct cmdstats *after, const int *want_durable,
                            const int *want_cache)
{
    for (int i = 0; i < 4 && before->commands[i] != NULL; i++) {
        long long d = after->durable[i] - before->durable[i], c = after->cache[i] - before->cache[i];
        fprintf(stderr, "    %s: durable +%lld, cache +%lld\n", before->commands[i], d, c);
        ck_assert_msg(d == want_durable[i] && c == want_cache[i],
                      "%s ran %lld times on durable (want %d) and %lld on cache (want %d): retried or sent elsewhere",
                      before->commands[i], d, want_durable[i], c, want_cache[i]);
    }
}

/* A command through c without assertions (the backend setting is still changed): NULL on a connection error. */
static redisReply *try_cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    return r;
}

/* r is an error with exactly Redis's text `want` (which starts with prefix); frees r. */
static void expect_same_error(redisReply *r, const char *want, const char *prefix, const char *what)
{
    ck_assert_msg(r != NULL, "%s: no reply (connection error)", what);
    ck_assert_msg(r->type == REDIS_REPLY_ERROR && strcmp(r->str, want) == 0, "%s: got %s, Redis answers -%s", what,
                  describe(r), want);
    ck_assert_msg(strncmp(want, prefix, strlen(prefix)) == 0, "%s: Redis answered -%s, not %s", what, want, prefix);
    fprintf(stderr, "  %s: -%s\n", what, r->str);
    freeReplyObject(r);
}

/* Redis's own reply r (direct) as the wanted error text into want; frees r. */
static void redis_error_text(redisReply *r, char *want, size_t len, const char *what)
{
    ck_assert_msg(r != NULL && r->type == REDIS_REPLY_ERROR, "%s directly on the backend: got %s, want an error", what,
                  r != NULL ? describe(r) : "(connection error)");
    snprintf(want, len, "%s", r->str);
    freeReplyObject(r);
}

#define UNKNOWN_SHA "ffffffffffffffffffffffffffffffffffffffff"

START_TEST(test_noscript_passes_through)
{
    /* EVALSHA of an unknown sha: forwarded once (plain for q:, MULTI-wrapped for rl:), never SCRIPT LOADed and
     * retried */
    char q[64], rl[64], want[512];
    snprintf(q, sizeof q, "q:chaos:%d:noscript", (int)getpid());
    snprintf(rl, sizeof rl, "rl:chaos:%d:noscript", (int)getpid());
    redis_error_text(harness_direct_cmd(&h, "durable", "EVALSHA %s 1 %s", UNKNOWN_SHA, q), want, sizeof want,
                     "EVALSHA");
    redisContext *c = must_login();
    struct cmdstats before = {.commands = {"evalsha", "script|load", "eval"}}, after = before;
    cmdstats_read(&before);
    redisReply *r1 = try_cmd(c, "EVALSHA %s 1 %s", UNKNOWN_SHA, q);
    redisReply *r2 = try_cmd(c, "EVALSHA %s 1 %s", UNKNOWN_SHA, rl);
    cmdstats_read(&after);
    expect_same_error(r1, want, "NOSCRIPT", "EVALSHA (q:, ttl=none)");
    expect_same_error(r2, want, "NOSCRIPT", "EVALSHA (rl:, wrapped in MULTI with its PEXPIRE)");
    expect_cmdstats(&before, &after, (const int[]){2, 0, 0}, (const int[]){0, 0, 0});
    redisFree(c);
}
END_TEST

START_TEST(test_busy_passes_through)
{
    /* a 1.5 s script run directly on durable with busy-reply-threshold 100 ms: keygate's STRLEN gets Redis's -BUSY */
    char key[64], threshold[32], want[512];
    snprintf(key, sizeof key, "q:chaos:%d:busy", (int)getpid());
    config_get("durable", "busy-reply-threshold", threshold, sizeof threshold);
    redisContext *c = must_login(), *direct = harness_must_direct(&h, "durable"),
                 *script = harness_must_direct(&h, "durable");
    expect_int(cmd(c, "STRLEN %s", key), 0, "STRLEN before");
    struct cmdstats before = {.commands = {"strlen"}}, after = before;
    cmdstats_read(&before);

    int set = direct_ok("durable", "CONFIG SET busy-reply-threshold 100");
    redisAppendCommand(script, "EVAL %s 0",
                       "local t0 = redis.call('TIME') local s = t0[1] * 1000000 + t0[2] "
                       "while true do local t = redis.call('TIME') "
                       "if t[1] * 1000000 + t[2] - s > 1500000 then break end end return 1");
    int done = 0;
    for (int tries = 0; !done && tries < 100; tries++)
        if (redisBufferWrite(script, &done) != REDIS_OK) break;
    /* the script runs past busy-reply-threshold: durable answers another client -BUSY (EXISTS: not counted below) */
    int busy = 0;
    for (long long end = now_ms() + 1000; done && !busy && now_ms() < end;) {
        redisReply *e = try_cmd(direct, "EXISTS %s", key);
        busy = e != NULL && e->type == REDIS_REPLY_ERROR && strncmp(e->str, "BUSY", 4) == 0;
        freeReplyObject(e);
    }
    ck_assert_msg(busy, "durable did not answer -BUSY within 1 s of the 1.5 s script");
    long long t = now_ms();
    redisReply *through = try_cmd(c, "STRLEN %s", key);
    long long took = now_ms() - t;
    redisReply *own = try_cmd(direct, "STRLEN %s", key);
    void *ended = NULL;
    int script_ok = redisGetReply(script, &ended) == REDIS_OK && ended != NULL &&
                    ((redisReply *)ended)->type == REDIS_REPLY_INTEGER;
    freeReplyObject(ended);
    int restored = direct_ok("durable", "CONFIG SET busy-reply-threshold %s", threshold);
    cmdstats_read(&after);

    ck_assert_msg(set == 0 && restored == 0, "durable: CONFIG SET busy-reply-threshold failed (see stderr)");
    ck_assert_msg(done && script_ok, "the busy script did not run to its end");
    redis_error_text(own, want, sizeof want, "STRLEN during the script");
    expect_same_error(through, want, "BUSY", "STRLEN through keygate during the script");
    ck_assert_msg(took < 1000, "keygate's -BUSY took %lld ms: it waited for the script", took);
    expect_cmdstats(&before, &after, (const int[]){2}, (const int[]){0});
    expect_int(cmd(c, "STRLEN %s", key), 0, "STRLEN once the script ended");
    redisFree(script);
    redisFree(direct);
    redisFree(c);
}
END_TEST

START_TEST(test_oom_passes_through)
{
    /* durable (noeviction) with maxmemory 1: SET q: (plain) and INCR rl: (MULTI-wrapped) get Redis's -OOM */
    char q[64], rl[64], maxmemory[32], want[512];
    snprintf(q, sizeof q, "q:chaos:%d:oom", (int)getpid());
    snprintf(rl, sizeof rl, "rl:chaos:%d:oom", (int)getpid());
    config_get("durable", "maxmemory", maxmemory, sizeof maxmemory);
    redisContext *c = must_login(), *direct = harness_must_direct(&h, "durable");
    struct cmdstats before = {.commands = {"set", "incr", "pexpire"}}, after = before;
    cmdstats_read(&before);

    int set = direct_ok("durable", "CONFIG SET maxmemory 1");
    redisReply *own = try_cmd(direct, "SET %s v", q);
    redisReply *r1 = try_cmd(c, "SET %s v", q);
    redisReply *r2 = try_cmd(c, "INCR %s", rl);
    int restored = direct_ok("durable", "CONFIG SET maxmemory %s", maxmemory);
    cmdstats_read(&after);

    ck_assert_msg(set == 0 && restored == 0, "durable: CONFIG SET maxmemory failed (see stderr)");
    redis_error_text(own, want, sizeof want, "SET with maxmemory 1");
    expect_same_error(r1, want, "OOM", "SET q: through keygate");
    expect_same_error(r2, want, "OOM", "INCR rl: (MULTI-wrapped) through keygate");
    /* SET: keygate's + the direct one; INCR and its PEXPIRE: keygate's MULTI, each rejected when queued (under
     * OOM Redis 7 refuses to queue any command) */
    expect_cmdstats(&before, &after, (const int[]){2, 1, 1}, (const int[]){0, 0, 0});
    expect_int(cmd(direct, "EXISTS %s %s", q, rl), 0, "nothing written under OOM");
    redisFree(direct);
    redisFree(c);
}
END_TEST

START_TEST(test_readonly_passes_through)
{
    /* cache made a replica of a port nobody listens on (it keeps its data, never syncs): writes get -READONLY */
    char key[64], hkey[64], want[512];
    snprintf(key, sizeof key, "cache:chaos:%d:ro", (int)getpid());
    snprintf(hkey, sizeof hkey, "cache:chaos:%d:roh", (int)getpid());
    int port = harness_free_port();
    ck_assert_msg(port > 0, "no free port");
    redisContext *c = must_login(), *direct = harness_must_direct(&h, "cache");
    struct cmdstats before = {.commands = {"set", "hset"}}, after = before;
    cmdstats_read(&before);

    int set = direct_ok("cache", "REPLICAOF 127.0.0.1 %d", port);
    redisReply *own = try_cmd(direct, "SET %s v EX 10", key);
    redisReply *r1 = try_cmd(c, "SET %s v", key);
    redisReply *r2 = try_cmd(c, "HSET %s f v", hkey);
    int restored = direct_ok("cache", "REPLICAOF NO ONE");
    cmdstats_read(&after);

    ck_assert_msg(set == 0 && restored == 0, "cache: REPLICAOF failed (see stderr)");
    redis_error_text(own, want, sizeof want, "SET on a replica");
    expect_same_error(r1, want, "READONLY", "SET cache: (with its EX) through keygate");
    expect_same_error(r2, want, "READONLY", "HSET cache: (MULTI-wrapped) through keygate");
    expect_cmdstats(&before, &after, (const int[]){0, 0}, (const int[]){2, 1});
    expect_status(cmd(c, "SET %s v", key), "OK", "SET once cache is a master again");
    redisFree(direct);
    redisFree(c);
}
END_TEST

/* INFO persistence of backend has `field:value`. */
static int info_has(const char *backend, const char *field_value)
{
    redisReply *r = harness_direct_cmd(&h, backend, "INFO persistence");
    int has = (r->type == REDIS_REPLY_STRING) && strstr(r->str, field_value) != NULL;
    freeReplyObject(r);
    return has;
}

/* The pid of a child process of parent (redis-server's BGSAVE child), or 0. */
static pid_t child_of(pid_t parent)
{
    DIR *d = opendir("/proc");
    ck_assert_msg(d != NULL, "opendir /proc: %s", strerror(errno));
    pid_t found = 0;
    struct dirent *e;
    while (found == 0 && (e = readdir(d)) != NULL) {
        char path[300], buf[512];
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *close = strrchr(buf, ')');
        int ppid = 0;
        char state;
        if (close != NULL && sscanf(close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent) found = atoi(e->d_name);
    }
    closedir(d);
    return found;
}

START_TEST(test_misconf_passes_through)
{
    /* cache with a save point whose last BGSAVE failed (its child killed: rdb-key-save-delay holds it): writes get
     * -MISCONF (stop-writes-on-bgsave-error yes, Redis's default). `dir` is a protected config, so a BGSAVE into an
     * unwritable dir cannot be arranged; root ignores permissions. */
    char key[64], hkey[64], save[128], want[1024];
    snprintf(key, sizeof key, "cache:chaos:%d:misconf", (int)getpid());
    snprintf(hkey, sizeof hkey, "cache:chaos:%d:misconfh", (int)getpid());
    config_get("cache", "save", save, sizeof save);
    redisContext *c = must_login(), *direct = harness_must_direct(&h, "cache");
    for (int i = 0; i < 5; i++) /* keys for the child to be slow on */
        expect_status(cmd(c, "SET %s:seed%d v", key, i), "OK", "seed keys");
    pid_t cache = harness_backend(&h, "cache")->pid;
    struct cmdstats before = {.commands = {"set", "hset"}}, after = before;

    int set = direct_ok("cache", "CONFIG SET rdb-key-save-delay 1000000");
    set |= direct_ok("cache", "CONFIG SET save %s", "3600 1");
    redisReply *bg = try_cmd(direct, "BGSAVE");
    pid_t child = 0;
    for (long long deadline = now_ms() + 2000; child == 0 && now_ms() < deadline; sleep_ms(10)) child = child_of(cache);
    if (child > 0) kill(child, SIGKILL);
    int failed = 0;
    for (long long deadline = now_ms() + 5000; !failed && now_ms() < deadline; sleep_ms(20))
        failed = info_has("cache", "rdb_bgsave_in_progress:0") && info_has("cache", "rdb_last_bgsave_status:err");
    cmdstats_read(&before);
    redisReply *own = try_cmd(direct, "SET %s v EX 10", key);
    redisReply *r1 = try_cmd(c, "SET %s v", key);
    redisReply *r2 = try_cmd(c, "HSET %s f v", hkey);
    cmdstats_read(&after);
    int restored = direct_ok("cache", "CONFIG SET save %s", save);
    restored |= direct_ok("cache", "CONFIG SET rdb-key-save-delay 0");

    ck_assert_msg(set == 0 && restored == 0, "cache: CONFIG SET save / rdb-key-save-delay failed (see stderr)");
    ck_assert_msg(bg != NULL && bg->type == REDIS_REPLY_STATUS && child > 0 && failed,
                  "BGSAVE: %s, child %d, failed: %d", describe(bg), (int)child, failed);
    freeReplyObject(bg);
    redis_error_text(own, want, sizeof want, "SET after a failed BGSAVE");
    expect_same_error(r1, want, "MISCONF", "SET cache: (with its EX) through keygate");
    expect_same_error(r2, want, "MISCONF", "HSET cache: (MULTI-wrapped) through keygate");
    expect_cmdstats(&before, &after, (const int[]){0, 0}, (const int[]){2, 1});
    expect_status(cmd(c, "SET %s v", key), "OK", "SET once the save point is gone");
    redisFree(direct);
    redisFree(c);
}
END_TEST

/* ---- -LOADING: durable restarting with a slow-loading AOF ---- */

struct loading_probe {
    char key[64];
    long long through_loading, through_ok, through_unavailable; /* keygate's replies by kind */
    long long direct_loading, direct_ok;                        /* durable's own, on its plain port */
    char through_text[256], direct_text[256];                   /* the first -LOADING of each */
    char failure[320];
};

static atomic_int probe_stop;

/* One STRLEN's reply into the counters of its side (through keygate or direct). */
static void probe_reply(struct loading_probe *p, const redisReply *r, int through)
{
    char *text = through ? p->through_text : p->direct_text;
    if (r->type == REDIS_REPLY_INTEGER) {
        if (through)
            p->through_ok++;
        else
            p->direct_ok++;
    } else if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "LOADING", 7) == 0) {
        if (text[0] == '\0') snprintf(text, 256, "%s", r->str);
        if (through)
            p->through_loading++;
        else
            p->direct_loading++;
    } else if (through && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "UNAVAILABLE", 11) == 0) {
        p->through_unavailable++;
    } else if (p->failure[0] == '\0') {
        snprintf(p->failure, sizeof p->failure, "STRLEN %s answered %s", through ? "through keygate" : "directly",
                 describe(r));
    }
}

/* One side of the probe: which side it runs, and the probe it counts into. */
struct probe_side {
    struct loading_probe *probe;
    int through; /* 1: through keygate (one connection, again after a close); 0: directly on durable */
};

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;

/* Until probe_stop: STRLEN every 10 ms, through keygate or directly on durable (a new connection after each
 * failure there, since durable restarts). */
static void *loading_probe_run(void *arg)
{
    const struct probe_side *side = arg;
    struct loading_probe *p = side->probe;
    redisContext *c = NULL;
    while (!atomic_load(&probe_stop)) {
        if (c == NULL) c = side->through ? chaos_login() : harness_direct(&h, "durable");
        redisReply *r = c != NULL ? redisCommand(c, "STRLEN %s", p->key) : NULL;
        if (r == NULL && c != NULL) {
            redisFree(c);
            c = NULL;
        } else if (r != NULL) {
            pthread_mutex_lock(&probe_lock);
            probe_reply(p, r, side->through);
            pthread_mutex_unlock(&probe_lock);
            freeReplyObject(r);
        }
        sleep_ms(10);
    }
    if (c != NULL) redisFree(c);
    return NULL;
}

/* The whole of a file, malloc'd; NULL on failure. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) return NULL;
    char *buf = malloc(65536);
    size_t n = buf != NULL ? fread(buf, 1, 65535, f) : 0;
    fclose(f);
    if (buf != NULL) buf[n] = '\0';
    return buf;
}

static int spill(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) return -1;
    int rc = fputs(text, f) < 0 ? -1 : 0;
    return fclose(f) != 0 ? -1 : rc;
}

START_TEST(test_loading_passes_through)
{
    /* durable restarted with its AOF rewritten to an RDB preamble of big keys, loaded slowly (key-load-delay,
     * a Redis test config, appended to the harness's redis.conf for this one restart and removed again):
     * keygate reconnects while durable loads and passes Redis's -LOADING through, each request sent once */
    enum { KEYS = 40 };
    static struct loading_probe p;
    snprintf(p.key, sizeof p.key, "q:chaos:%d:load:0", (int)getpid());
    redisContext *d = harness_must_direct(&h, "durable");
    char value[4096];
    unsigned x = 12345;
    for (int i = 0; i < KEYS; i++) {
        /* incompressible (RDB would LZF-compress repeated bytes): each key is > 1 KiB read, so durable serves
         * its clients between any two keys it loads (loading-process-events-interval-bytes 1024) */
        for (size_t j = 0; j < sizeof value; j++) value[j] = (char)('a' + (x = x * 1103515245 + 12345) % 26);
        expect_status(cmd(d, "SET q:chaos:%d:load:%d %b", (int)getpid(), i, value, sizeof value), "OK", "a big key");
    }
    redisReply *rw = cmd(d, "BGREWRITEAOF");
    ck_assert_msg(rw->type == REDIS_REPLY_STATUS, "BGREWRITEAOF: %s", describe(rw));
    freeReplyObject(rw);
    redisFree(d);
    int rewritten = 0;
    for (long long deadline = now_ms() + 10000; !rewritten && now_ms() < deadline; sleep_ms(50))
        rewritten = info_has("durable", "aof_rewrite_in_progress:0") &&
                    info_has("durable", "aof_rewrite_scheduled:0") &&
                    info_has("durable", "aof_last_bgrewrite_status:ok");
    ck_assert_msg(rewritten, "durable's AOF rewrite did not finish in 10 s");
    long long keys = harness_direct_int(&h, "durable", "DBSIZE");
    long long delay_us = 4000000 / keys; /* about 4 s of loading in all */
    if (delay_us > 100000) delay_us = 100000;
    long long cache_before = cmdstat("cache", "strlen");

    const char *conf = harness_backend(&h, "durable")->conf_file;
    char *original = slurp(conf);
    ck_assert_msg(original != NULL, "read %s: %s", conf, strerror(errno));
    char *slow = malloc(strlen(original) + 128);
    ck_assert_msg(slow != NULL, "out of memory");
    sprintf(slow, "%skey-load-delay %lld\nloading-process-events-interval-bytes 1024\n", original, delay_us);
    int wrote = spill(conf, slow);
    free(slow);

    /* the probe starts once durable is dead: every STRLEN durable answers is counted by the new process */
    int killed = harness_backend_kill(&h, "durable");
    pthread_t probes[2];
    struct probe_side sides[2] = {{&p, 1}, {&p, 0}};
    int started = 0;
    for (int i = 0; i < 2; i++) started += pthread_create(&probes[i], NULL, loading_probe_run, &sides[i]) == 0;
    long long t = now_ms();
    int restarted = harness_backend_restart(&h, "durable"); /* waits until durable answers PING: loaded */
    long long load_ms = now_ms() - t;
    int restored = spill(conf, original);
    free(original);
    restored |= direct_ok("durable", "CONFIG SET key-load-delay 0");
    restored |= direct_ok("durable", "CONFIG SET loading-process-events-interval-bytes 2097152");
    /* keygate serves durable again (its reconnect backoff is capped at 2 s): a STRLEN answered through it */
    long long served = 0;
    for (long long end = now_ms() + 5000; served == 0 && now_ms() < end; sleep_ms(20)) {
        pthread_mutex_lock(&probe_lock);
        served = p.through_ok;
        pthread_mutex_unlock(&probe_lock);
    }
    atomic_store(&probe_stop, 1);
    for (int i = 0; i < started; i++) pthread_join(probes[i], NULL);
    ck_assert_msg(started == 2 && killed == 0 && restarted == 0, "probe threads, kill or restart failed: %s", h.error);
    long long durable_strlen = cmdstat("durable", "strlen"), cache_strlen = cmdstat("cache", "strlen") - cache_before;

    fprintf(stderr,
            "  loading took %lld ms (key-load-delay %lld us x %lld keys); through keygate: %lld -LOADING, %lld "
            "-UNAVAILABLE, %lld answered; directly: %lld -LOADING, %lld answered; STRLEN on durable since its "
            "restart %lld, on cache %lld\n",
            load_ms, delay_us, keys, p.through_loading, p.through_unavailable, p.through_ok, p.direct_loading,
            p.direct_ok, durable_strlen, cache_strlen);
    ck_assert_msg(wrote == 0 && restored == 0, "writing or restoring %s / durable's load settings failed", conf);
    ck_assert_msg(p.failure[0] == '\0', "%s", p.failure);
    ck_assert_msg(p.direct_loading > 0, "durable never answered -LOADING directly: loading too fast (%lld ms)",
                  load_ms);
    ck_assert_msg(p.through_loading > 0,
                  "no -LOADING came through keygate while durable loaded for %lld ms (%lld -UNAVAILABLE): did "
                  "keygate connect while it loaded?",
                  load_ms, p.through_unavailable);
    ck_assert_msg(strcmp(p.through_text, p.direct_text) == 0, "keygate's -%s differs from Redis's -%s", p.through_text,
                  p.direct_text);
    ck_assert_msg(p.through_ok > 0, "keygate never served STRLEN once durable had loaded");
    /* every STRLEN that reached durable is one of the probe's: nothing was resent */
    ck_assert_msg(durable_strlen == p.through_loading + p.through_ok + p.direct_loading + p.direct_ok,
                  "durable ran STRLEN %lld times, the probe got %lld replies from it (through keygate and directly)",
                  durable_strlen, p.through_loading + p.through_ok + p.direct_loading + p.direct_ok);
    ck_assert_msg(cache_strlen == 0, "STRLEN ran %lld times on cache", cache_strlen);
    fprintf(stderr, "  STRLEN through keygate while durable loads: -%s\n", p.through_text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("chaos");
    TCase *tc = harness_tcase(s, "chaos", 90, setup, teardown);
    harness_add_test(tc, test_chaos_nothing_acknowledged_is_lost);
    harness_add_test(tc, test_noscript_passes_through);
    harness_add_test(tc, test_busy_passes_through);
    harness_add_test(tc, test_oom_passes_through);
    harness_add_test(tc, test_readonly_passes_through);
    harness_add_test(tc, test_misconf_passes_through);
    harness_add_test(tc, test_loading_passes_through);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
