/* test_harness.c: the harness's own guarantees: each test in its own process, a crash or a timeout fails that test
 * alone, servers a test restarts outlive it and die with the runner, what a test leaves behind is healed before the
 * next. */
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/*
 * The suite's tests run small suites of their own ("nested") on the same harness, in a
 * forked process (like test_workload's detector): the nested tests must run in a fixed
 * order (a crash, then the test after it), and the outer test checks the nested suite's
 * verdict, so no outer test depends on another.
 *
 *   outer runner (owns the servers) -- outer test process -- nested runner -- nested tests
 *
 * Servers a nested test restarts are the outer runner's children (the harness's subreaper
 * and double fork), and the outer tests after it see them through the shared state.
 */

static struct harness h;
static pid_t g_runner; /* the outer runner: the parent of every server */

static void setup(void)
{
    g_runner = getpid();
    ck_assert_msg(harness_start(&h, NULL) == 0, "harness_start: %s", h.error);
}

static void teardown(void)
{
    harness_check_registry(&h);
    harness_stop(&h);
}

/* /proc/PID/stat's state letter and parent pid; state '-' when there is no such process. */
static char proc_state(pid_t pid, pid_t *ppid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    *ppid = 0;
    if (f == NULL) return '-';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    char state = '?';
    int parent = 0;
    if (p == NULL || sscanf(p + 1, " %c %d", &state, &parent) != 2) return '?';
    *ppid = parent;
    return state;
}

static int alive(pid_t pid)
{
    pid_t ppid;
    char s = proc_state(pid, &ppid);
    return s != '-' && s != 'Z' && s != 'X';
}

/* The pids file the nested tests pass on: keygate durable cache. */
static void pids_path(char *out, size_t len)
{
    snprintf(out, len, "%s/nested-pids", h.dir);
}

static void pids_write(pid_t keygate, pid_t durable, pid_t cache)
{
    char path[PATH_MAX];
    pids_path(path, sizeof path);
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    fprintf(f, "%d %d %d\n", (int)keygate, (int)durable, (int)cache);
    fclose(f);
}

static void pids_read(pid_t *keygate, pid_t *durable, pid_t *cache)
{
    char path[PATH_MAX];
    pids_path(path, sizeof path);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s (the nested test before did not write it)", path, strerror(errno));
    int k = 0, d = 0, c = 0;
    ck_assert_int_eq(fscanf(f, "%d %d %d", &k, &d, &c), 3);
    fclose(f);
    *keygate = k;
    *durable = d;
    *cache = c;
}

/* Through keygate: a key on each instance, written and read back, then deleted. */
static void keygate_serves_both(const char *what)
{
    redisContext *c = harness_must_client(&h);
    expect_status(cmd(c, "SET cache:harness:%s v", what), "OK", what);
    expect_bulk(cmd(c, "GET cache:harness:%s", what), "v", what);
    expect_status(cmd(c, "SET q:harness:%s v", what), "OK", what);
    expect_bulk(cmd(c, "GET q:harness:%s", what), "v", what);
    expect_int(cmd(c, "DEL cache:harness:%s q:harness:%s", what, what), 2, what);
    redisFree(c);
}

/* ---- nested suite 1: a crash, then a timeout ---- */

/* Leaves everything broken and dies of SIGSEGV: keygate restarted with another keygate.conf,
 * cache SIGKILLed behind the harness's back, durable stopped (SIGSTOP). */
START_TEST(n_crash)
{
    struct harness_opts o = {.extra_config = "# left by n_crash\n"};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "restart: %s", h.error);
    pid_t cache = harness_backend(&h, "cache")->pid, durable = harness_backend(&h, "durable")->pid;
    pids_write(h.keygate_pid, durable, cache);
    ck_assert_int_eq(kill(cache, SIGKILL), 0);
    ck_assert_int_eq(kill(durable, SIGSTOP), 0);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none); /* no core file in the repo */
    signal(SIGSEGV, SIG_DFL);      /* a sanitizer build's handler would turn the death into exit(1) */
    raise(SIGSEGV);
}
END_TEST

/* Runs on healthy servers: durable continued (same pid), cache and keygate started again,
 * keygate with the suite's keygate.conf. */
START_TEST(n_after_crash)
{
    pid_t keygate, durable, cache;
    pids_read(&keygate, &durable, &cache);
    ck_assert_msg(harness_backend(&h, "durable")->pid == durable, "durable was only stopped: want pid %d, got %d",
                  (int)durable, (int)harness_backend(&h, "durable")->pid);
    pid_t ppid;
    ck_assert_msg(proc_state(durable, &ppid) != 'T', "durable (pid %d) is still stopped", (int)durable);
    ck_assert_msg(harness_backend(&h, "cache")->pid != cache && alive(harness_backend(&h, "cache")->pid),
                  "cache (killed, pid %d) was not started again: pid %d", (int)cache,
                  (int)harness_backend(&h, "cache")->pid);
    ck_assert_msg(h.keygate_pid != keygate && alive(h.keygate_pid),
                  "keygate (pid %d, another keygate.conf) was not restarted: pid %d", (int)keygate, (int)h.keygate_pid);
    char *conf = NULL;
    FILE *f = fopen(h.conf_file, "r");
    ck_assert_ptr_nonnull(f);
    size_t cap = 0;
    ck_assert_int_gt(getdelim(&conf, &cap, '\0', f), 0);
    fclose(f);
    ck_assert_msg(strstr(conf, "# left by n_crash") == NULL, "keygate.conf still holds the crashed test's line:\n%s",
                  conf);
    free(conf);
    keygate_serves_both("after-crash");
}
END_TEST

/* Restarts cache from the test's process, then overruns the timeout: Check SIGKILLs the
 * test's process group. */
START_TEST(n_timeout)
{
    ck_assert_msg(harness_backend_restart(&h, "cache") == 0, "restart: %s", h.error);
    pid_t cache = harness_backend(&h, "cache")->pid;
    pid_t ppid;
    proc_state(cache, &ppid);
    ck_assert_msg(ppid == g_runner, "cache restarted by a test: parent %d, want the runner %d", (int)ppid,
                  (int)g_runner);
    pids_write(h.keygate_pid, harness_backend(&h, "durable")->pid, cache);
    sleep(600);
}
END_TEST

/* The cache the timed-out test started is alive, the runner's child, and served. */
START_TEST(n_after_timeout)
{
    pid_t keygate, durable, cache;
    pids_read(&keygate, &durable, &cache);
    ck_assert_msg(harness_backend(&h, "cache")->pid == cache,
                  "cache: want the pid %d the timed-out test started, got %d", (int)cache,
                  (int)harness_backend(&h, "cache")->pid);
    pid_t ppid;
    char state = proc_state(cache, &ppid);
    ck_assert_msg(alive(cache) && ppid == g_runner, "cache (pid %d): state %c, parent %d, want alive, parent %d",
                  (int)cache, state, (int)ppid, (int)g_runner);
    ck_assert_int_eq(h.keygate_pid, keygate);
    keygate_serves_both("after-timeout");
}
END_TEST

/* ---- nested suite 2: keygate crashing between tests fails the suite ---- */

START_TEST(n_keygate_segv)
{
    pids_write(h.keygate_pid, 0, 0);
    struct rlimit none = {0, 0};
    prlimit(h.keygate_pid, RLIMIT_CORE, &none, NULL); /* no core file in the repo */
    ck_assert_int_eq(kill(h.keygate_pid, SIGSEGV), 0);
    for (int i = 0; i < 500 && alive(h.keygate_pid); i++) sleep_ms(10);
    ck_assert_msg(!alive(h.keygate_pid), "keygate did not die of SIGSEGV");
}
END_TEST

START_TEST(n_after_keygate_segv)
{
    pid_t keygate, durable, cache;
    pids_read(&keygate, &durable, &cache);
    ck_assert_msg(h.keygate_pid != keygate && alive(h.keygate_pid), "keygate was not started again");
    keygate_serves_both("after-keygate-segv");
}
END_TEST

/* Nested suite `which` (1, 2; *(int *)arg). */
static Suite *nested_suite(void *arg)
{
    int which = *(const int *)arg;
    Suite *s = suite_create("nested");
    TCase *tc = harness_tcase(s, "nested", 5, NULL, NULL);
    if (which == 1) {
        tcase_add_test_raise_signal(tc, n_crash, SIGSEGV);
        tcase_add_test(tc, n_after_crash);
        tcase_add_test(tc, n_timeout);
        tcase_add_test(tc, n_after_timeout);
    } else {
        tcase_add_test(tc, n_keygate_segv);
        tcase_add_test(tc, n_after_keygate_segv);
    }
    return s;
}

/* Run nested suite `which` (1, 2) in a forked process, output into out[0..len). Returns its
 * exit code (harness_run's count). */
static int run_nested(int which, char *out, size_t len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/nested-%d.log", h.dir, which);
    return harness_run_nested(nested_suite, &which, path, out, len);
}

/* The nested suite's output, each line indented: its own "NN%: Checks" line (with the
 * error it must have) is not the suite's. */
static void print_nested(int which, const char *out)
{
    printf("---- nested suite %d ----\n", which);
    for (const char *line = out; *line != '\0';) {
        size_t len = strcspn(line, "\n");
        printf("  | %.*s\n", (int)len, line);
        line += len + (line[len] == '\n');
    }
    printf("---- end ----\n");
}

START_TEST(test_a_crash_or_timeout_fails_that_test_alone)
{
    static char out[65536];
    int failed = run_nested(1, out, sizeof out);
    print_nested(1, out);
    ck_assert_msg(failed == 1 && strstr(out, "75%: Checks: 4, Failures: 0, Errors: 1") != NULL,
                  "want only n_timeout to fail (n_crash dies of the SIGSEGV it is added with), got %d:\n%s", failed,
                  out);
    ck_assert_msg(strstr(out, ":E:nested:n_timeout:0: (after this point) Test timeout expired") != NULL,
                  "n_timeout: want a timeout:\n%s", out);
    ck_assert_msg(strstr(out, "POST-CONDITION FAILED") == NULL, "%s", out);
}
END_TEST

START_TEST(test_keygate_crashing_between_tests_fails_the_suite)
{
    static char out[65536];
    int failed = run_nested(2, out, sizeof out);
    print_nested(2, out);
    ck_assert_msg(strstr(out, "100%: Checks: 2, Failures: 0, Errors: 0") != NULL, "both tests pass:\n%s", out);
    /* "killed by signal 11", or "exit status 1" from a sanitizer build's SIGSEGV handler */
    ck_assert_msg(failed == 1 && strstr(out, "POST-CONDITION FAILED between tests: keygate ended badly: ") != NULL,
                  "want keygate's SIGSEGV counted against the suite (exit 1), got %d:\n%s", failed, out);
}
END_TEST

/* ---- the safety net: servers die with the runner, also those a test started ---- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

/* A runner of its own (an owner: harness_start) whose "test" (a forked child) restarts
 * cache and exits; that cache must live on, as the runner's child, and die with the
 * runner when it is SIGKILLed (no atexit, no handler: PR_SET_PDEATHSIG alone). */
START_TEST(test_servers_die_with_the_runner_also_those_a_test_restarted)
{
    char path[PATH_MAX], log[PATH_MAX];
    snprintf(path, sizeof path, "%s/runner-pids", h.dir);
    snprintf(log, sizeof log, "%s/runner.log", h.dir);
    pid_t runner = fork();
    ck_assert_int_ge(runner, 0);
    if (runner == 0) {
        if (!freopen(log, "w", stdout) || dup2(fileno(stdout), 2) < 0) _exit(101);
        static struct harness h2;
        if (harness_start(&h2, NULL) != 0) _exit(102);
        pid_t test = fork();
        if (test == 0) {
            if (harness_backend_restart(&h2, "cache") != 0) _exit(103);
            FILE *f = fopen(path, "w");
            if (f == NULL) _exit(104);
            fprintf(f, "%d %d %d %s\n", (int)h2.keygate_pid, (int)h2.backends[0].pid, (int)h2.backends[1].pid, h2.dir);
            fclose(f);
            _exit(0);
        }
        int st = 0;
        waitpid(test, &st, 0);
        printf("the test process exited with status %d\n", st);
        fflush(stdout);
        for (;;) pause();
    }
    int pids[3] = {0, 0, 0};
    char dir[256] = "";
    for (int i = 0; i < 400; i++) {
        FILE *f = fopen(path, "r");
        int n = f != NULL ? fscanf(f, "%d %d %d %255s", &pids[0], &pids[1], &pids[2], dir) : 0;
        if (f != NULL) fclose(f);
        if (n == 4) break;
        sleep_ms(50);
    }
    /* the verdict first, then the runner killed and its temp dir removed, then the assertion */
    char why[PATH_MAX + 256] = "";
    if (dir[0] == '\0') snprintf(why, sizeof why, "the runner wrote no pids in 20 s (log %s)", log);
    sleep_ms(300); /* the test process has exited */
    for (int i = 0; i < 3 && dir[0] != '\0' && why[0] == '\0'; i++) {
        pid_t ppid;
        char state = proc_state(pids[i], &ppid);
        if (!alive(pids[i]) || ppid != runner)
            snprintf(why, sizeof why,
                     "server %d (pid %d) before the runner's death: state %c, parent %d, want alive, parent %d", i,
                     pids[i], state, (int)ppid, (int)runner);
    }
    kill(runner, SIGKILL);
    waitpid(runner, NULL, 0);
    for (int i = 0; i < 3 && dir[0] != '\0' && why[0] == '\0'; i++) {
        for (int t = 0; t < 500 && alive(pids[i]); t++) sleep_ms(10);
        if (alive(pids[i]))
            snprintf(why, sizeof why, "server %d (pid %d, %s) outlived its runner", i, pids[i],
                     i == 0   ? "keygate"
                     : i == 1 ? "durable"
                              : "cache, restarted by the test");
    }
    if (dir[0] != '\0') nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); /* the SIGKILLed runner's temp dir */
    ck_assert_msg(why[0] == '\0', "%s", why);
}
END_TEST

/* Issue 19: test_keyless's WAIT met "-UNAVAILABLE instance 'cache' is unreachable" on a new
 * user's first run, right after test_dbsize_with_an_instance_down restarted cache: keygate was
 * still in its reconnect backoff (up to 2 s), and the harness went on as soon as redis-server
 * answered. harness_backend_restart now returns once keygate's connections are ready again. */
START_TEST(test_a_restarted_backend_is_reconnected_before_the_test_goes_on)
{
    redisContext *kg = harness_must_client(&h);
    expect_status(cmd(kg, "SET cache:harness:r1 v"), "OK", "cache up");
    ck_assert_int_eq(harness_backend_kill(&h, "cache"), 0);
    redisReply *r = NULL;
    for (long long end = now_ms() + 5000; now_ms() < end; sleep_ms(20)) { /* until keygate saw it go */
        freeReplyObject(r);
        r = cmd(kg, "GET cache:harness:r1");
        if (r->type == REDIS_REPLY_ERROR) break;
    }
    expect_error(r, "UNAVAILABLE instance 'cache'", "GET with cache killed");
    /* the scenario, not a wait for a condition: cache stays down long enough for keygate's
     * reconnect backoff to reach its 2 s cap, as after a test that kept it down */
    sleep_ms(3000);
    ck_assert_msg(harness_backend_restart(&h, "cache") == 0, "restarting cache: %s", h.error);
    expect_status(cmd(kg, "SET cache:harness:r2 v"), "OK", "the first request once harness_backend_restart returned");
    redisFree(kg);
}
END_TEST

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    Suite *s = suite_create("harness");
    TCase *tc = harness_tcase(s, "harness", 60, setup, teardown);
    harness_add_test(tc, test_a_crash_or_timeout_fails_that_test_alone);
    harness_add_test(tc, test_keygate_crashing_between_tests_fails_the_suite);
    harness_add_test(tc, test_servers_die_with_the_runner_also_those_a_test_restarted);
    harness_add_test(tc, test_a_restarted_backend_is_reconnected_before_the_test_goes_on);
    return harness_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
