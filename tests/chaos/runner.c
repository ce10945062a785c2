/* runner.c: what both topologies of the fault harness's runner share: the clock, the seeded random numbers, a client's operation log. */
#include "runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

long long runner_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

unsigned long long runner_splitmix(unsigned long long *s)
{
    unsigned long long z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int runner_rnd(unsigned long long *s, int n)
{
    return (int)(runner_splitmix(s) % (unsigned long long)n);
}

struct hist_op *runner_oplog_add(struct oplog *l)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4096;
        struct hist_op *np = realloc(l->ops, cap * sizeof *np);
        if (np == NULL) {
            fprintf(stderr, "chaos: out of memory for the history\n");
            abort();
        }
        l->ops = np;
        l->cap = cap;
    }
    struct hist_op *o = &l->ops[l->n++];
    memset(o, 0, sizeof *o);
    return o;
}

int runner_by_start_time(const void *a, const void *b)
{
    const struct hist_op *x = a, *y = b;
    return x->start_us < y->start_us ? -1 : x->start_us > y->start_us;
}
