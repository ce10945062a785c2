/* procs.h: the process handling the cluster and Sentinel harnesses share: servers started as the owner's children and recorded (pid and start time) in a table shared across forks, signalled, killed and reaped with deadlines, safety nets so that none outlives the runner; free loopback ports; the last-error buffer. */
#ifndef KEYGATE_PROCS_H
#define KEYGATE_PROCS_H

#include <sys/types.h>

/*
 * Usage (tests/cluster/cluster_harness.c, tests/ha/sentinel_harness.c): procs_install in the
 * process that starts the servers (their owner), then procs_spawn for each server; the
 * harness keeps each server's pid and start time in its own (MAP_SHARED) struct and hands
 * them to procs_alive, procs_kill_wait, procs_pause, ... A pid always travels with its start
 * time (/proc/PID/stat field 22): no signal ever reaches a process that took a dead server's
 * pid. One table of servers a process: a binary links one harness.
 *
 * What this module prints on stderr (and writes to a server's log when it cannot exec)
 * starts with the name given to procs_install ("cluster_harness: ...").
 */

#define PROCS_ERR_MAX 2048 /* the last-error buffer's size, with its '\0' */
#define PROCS_GONE_MS 5000 /* a SIGKILLed server's threads are gone; a SIGSTOPped one is stopped */

/* ---- the last error (this process's; a static buffer) ---- */

/* Why the last failing call failed. */
const char *procs_last_error(void);

/* Set it (printf format). */
void procs_set_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Set it to "<what>: <the error as it was>" (what: printf format, up to 511 characters). */
void procs_wrap_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Empty it. */
void procs_clear_err(void);

/* ---- time ---- */

/* CLOCK_MONOTONIC in milliseconds. */
long long procs_mono_ms(void);

/* Sleep ms milliseconds (the whole of them, through EINTR). */
void procs_nap_ms(int ms);

/* ---- processes ---- */

/* The safety net, in the process that starts servers (again in each process that does: a
 * no-op when already installed by this one): the shared table of servers (MAP_SHARED, seen
 * by the test processes forked after it), a process group of its own, an atexit handler and
 * SIGINT/SIGTERM/SIGABRT handlers that SIGKILL every server this process owns, SIGPIPE
 * ignored; with subreaper, PR_SET_CHILD_SUBREAPER too (procs_spawn from another process
 * needs it). who prefixes what the module prints. 0, or -1 (errno: mmap's or prctl's). */
int procs_install(const char *who, int subreaper);

/* Start argv (execvp) as owner's child, in owner's process group when the caller is not the
 * owner, with PR_SET_PDEATHSIG=SIGKILL against owner (the child exits at once when owner is
 * no longer its parent), default signal handling and mask, stdin /dev/null, stdout and
 * stderr appended to log_path, no other fd of the caller (closefrom), REDISCLI_AUTH=auth
 * when auth is not NULL. From the owner: a plain fork. From another process (a test
 * process, CK_FORK): a double fork, the server re-parented to the owner (it must be the
 * caller's subreaper: procs_install(..., 1)) and out of the caller's process group. The pid
 * is recorded in the table with owner and its start time (*start) (no table before
 * procs_install: a caller that keeps its own records it there). Returns the pid, or -1
 * (errno: fork's or pipe's). */
pid_t procs_spawn(char *const argv[], const char *log_path, const char *auth, pid_t owner, pid_t owner_pgid,
                  unsigned long long *start);

/* Wait (timeout_ms, polling every 20 ms) for a child of ours started by procs_spawn to exit,
 * reap it and drop it from the table. Its wait status, or -1 (timed out: then SIGKILLed,
 * reaped and dropped; or waitpid failed). */
int procs_wait_child(pid_t pid, int timeout_ms);

/* pid's start time (field 22 of /proc/PID/stat) and, when state is not NULL, its state
 * letter; 0 when there is no such process. Only open/read/close: safe in a signal handler. */
unsigned long long procs_stat(pid_t pid, char *state);

/* Threads left in pid's group ("Threads:" of /proc/PID/status); 0 when gone. A SIGKILLed
 * redis-server's leader is a zombie while its bio threads still exit and hold its ports. */
int procs_threads(pid_t pid);

/* Is the process recorded as (pid, start) still running (not a zombie)? 0 for pid <= 0. */
int procs_alive(pid_t pid, unsigned long long start);

/* Is it gone for good: reaped, another process under that pid, or (seen from a process that
 * is not its parent) a zombie whose last thread has exited (a SIGKILLed redis-server's
 * zombie leader while its threads still exit holds its ports)? Reaps it when we are its
 * parent. 1 for pid <= 0. */
int procs_gone(pid_t pid, unsigned long long start);

/* kill(pid, sig) when pid is still the process started at start; else -1 with errno ESRCH. */
int procs_signal(pid_t pid, unsigned long long start, int sig);

/* SIGCONT (a stopped process too must go), then SIGKILL, to (pid, start) if still that
 * process; no wait. Nothing for pid <= 0. */
void procs_kill(pid_t pid, unsigned long long start);

/* Wait until deadline (procs_mono_ms) for (pid, start) to be gone (procs_gone, every 10 ms).
 * 1 when it is; 0 when it still runs, which stderr says ("<who> (pid N) still runs 5000 ms
 * after SIGKILL"). 1 for pid <= 0. */
int procs_reap(pid_t pid, unsigned long long start, long long deadline, const char *who);

/* SIGKILL (pid, start), after a SIGCONT when sigcont_first, and wait (PROCS_GONE_MS, every
 * 5 ms) until it is gone (procs_gone). 0; -1 when it was not running ("<who> is not
 * running") or still runs at the deadline ("<who> (pid N) still runs 5000 ms after
 * SIGKILL"). The table keeps the pid: its owner reaps it. */
int procs_kill_wait(pid_t pid, unsigned long long start, int sigcont_first, const char *who);

/* SIGSTOP (pid, start) and wait (PROCS_GONE_MS, every 5 ms) until /proc says it is stopped
 * (state T). 0; -1 when it is not running ("<who>: SIGSTOP: not running") or not stopped at
 * the deadline ("<who> not stopped 5000 ms after SIGSTOP (state C)"). */
int procs_pause(pid_t pid, unsigned long long start, const char *who);

/* SIGCONT (pid, start). 0; -1 when it is not that process ("<who>: SIGCONT: not running"). */
int procs_resume(pid_t pid, unsigned long long start, const char *who);

/* Drop pid from the table (once gone: the table holds what may still run, or still has to be
 * reaped by its owner). */
void procs_forget(pid_t pid);

/* In the owner: reap every server of its own that has exited, also those no harness struct
 * names any more (a server a test killed, then restarted under a new pid), and drop them: a
 * zombie left unreaped would go to the next subreaper up when we exit, and look alive to
 * kill(pid, 0). */
void procs_reap_mine(void);

/* How many servers in the table (started by any process of this tree) still run; those
 * found are printed on stderr ("<who>: LEFTOVER: pid N (owner N) still runs"), the gone ones
 * dropped. 0 after every harness stop. */
int procs_leftovers(void);

/* ---- ports ---- */

/* Where procs_pick_ports looks. */
struct procs_port_ranges {
    int tls_low, tls_high;     /* the TLS ports */
    int plain_low, plain_high; /* the plain ports (may be the TLS range) */
    int bus_offset;            /* > 0: tls + bus_offset must be free too (a cluster bus port) */
};

/* For each of n servers a TLS port (tls[k]), its bus port when r->bus_offset > 0, and a plain
 * port (plain[k]), at random in r's ranges, every one free on 127.0.0.1 and different from
 * the others: each bound at once and held until all are found (500 tries a server). n is at
 * most 16. 0, or -1 ("no free loopback ports in L..H", or "in L..H / L..H" when the ranges
 * differ: TLS, then plain). */
int procs_pick_ports(int n, const struct procs_port_ranges *r, int *tls, int *plain);

/* Can a server bind 127.0.0.1:port again: does nothing listen on it? (SO_REUSEADDR, as Redis
 * binds: a killed server's connections in TIME_WAIT do not keep it out, only a listener
 * does.) For the harnesses' own tests. */
int procs_port_free(int port);

#endif
