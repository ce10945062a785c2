/* runner.h: what both topologies of the fault harness's runner share (chaos.c, sentinel.c): the clock, the seeded random numbers, a client's operation log. */
#ifndef KEYGATE_CHAOS_RUNNER_H
#define KEYGATE_CHAOS_RUNNER_H

#include <stddef.h>

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

#endif
