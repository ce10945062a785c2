/* runner.h: what the topologies of the fault harness's runner share (chaos.c, sentinel.c, cluster.c): the clock, the seeded random numbers, planned pauses, a client's operation log, keygate processes, counter replies, the history file and the error summary. */
#ifndef KEYGATE_CHAOS_RUNNER_H
#define KEYGATE_CHAOS_RUNNER_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "history.h"

/* The monotonic clock, in microseconds. */
long long runner_mono_us(void);

/* The next number of the seeded sequence in *s (splitmix64: the same seed, the same schedule). */
unsigned long long runner_splitmix(unsigned long long *s);

/* A number in 0..n-1 from *s (n > 0). */
int runner_rnd(unsigned long long *s, int n);

/* One client thread's operations, in the order it ran them. */
struct oplog {
    struct hist_op *ops;
    size_t n, cap;
};

/* A new, zeroed operation at the end of l (aborts when out of memory: a history cannot be partial). */
struct hist_op *runner_oplog_add(struct oplog *l);

/* qsort order of operations: by start time. */
int runner_by_start_time(const void *a, const void *b);

/* A planned pause (think time, a fault's planned duration, a poll's interval): the one kind of sleep the harness
 * has. Returns early when *stop becomes nonzero (NULL: never). */
void runner_sleep_ms(int ms, const int *stop);

/* One keygate of a topology: its files and its process. */
struct runner_kg {
    char name[8];
    pid_t pid;
    unsigned long long start;
    int port, threads, restarts;
    char conf[PATH_MAX], log[PATH_MAX], registry[PATH_MAX];
};

/* Start keygate k (`bin -c k->conf`, output to k->log) as this process's child (tests/common/procs.c). 0, or -1
 * (errno). */
int runner_kg_spawn(struct runner_kg *k, const char *bin);

/* Stop keygate k for a restart: SIGKILL, or SIGTERM and its exit waited for (shutdown_ms). Returns 0 when it is gone
 * as it should be, 1 when it exited badly after SIGTERM (a keygate defect: its log's tail is printed), -1 when it did
 * not exit in time (why in *why). */
int runner_kg_stop(struct runner_kg *k, int kill9, int shutdown_ms, char *why, size_t why_len);

/* Reply r (to an INCR, an EVALSHA that increments, or a GET of a counter) into o's value or status: an error reply
 * its text, an integer or a number the value (nil: 0), anything else HST_BAD. */
void runner_counter_reply(struct hist_op *o, const redisReply *r);

/* FAULTS= of a topology: text (NULL, "" or "all": every kind of kinds[0..n) but those in opt_in, a
 * mask of kind bits; "none": no fault; else a comma list of fault names) read into *faults (a bit
 * per kind) and faults_text (the names, comma-separated, or "none"). 0, or -1 after printing "chaos:
 * TOPOLOGY=<topology>: unknown fault 'X' (<names>)" on stderr. */
int runner_faults_parse(const char *text, const int *kinds, int n, unsigned opt_in, const char *topology,
                        const char *names, unsigned *faults, char *faults_text, size_t len);

/* Write history h to path, one line an operation then one a fault (names from h). */
void runner_write_history(const char *path, const struct history *h);

/* Print the client errors by the kind of the last fault started before each ended and by text (digits folded),
 * most frequent first, up to 12. */
void runner_print_error_texts(const struct history *h);

#endif
