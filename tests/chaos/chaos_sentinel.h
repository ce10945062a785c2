/* chaos_sentinel.h: the fault harness's Sentinel topology (sentinel.c), entered from chaos.c's main when TOPOLOGY=sentinel. */
#ifndef KEYGATE_CHAOS_SENTINEL_H
#define KEYGATE_CHAOS_SENTINEL_H

#include "checker.h"

/* What chaos.c read from the environment, for either topology. */
struct chaos_common {
    unsigned long long seed;
    int duration_s;
    const char *faults; /* FAULTS= as given (NULL or "": every fault of the topology) */
    struct check_params p;
    int keep; /* CHAOS_KEEP=1: keep the run's files on success too */
    const char *keygate_bin;
};

/* Run the Sentinel topology (sentinel.c's header comment): the deployment, the load, the seed's schedule, the
 * checker. Prints as the near-cache run does, ending with "N passed, N failed". Exit status: 0 passed, 1 failed
 * (a violation or a harness failure), 2 a bad option. */
int chaos_sentinel_main(const struct chaos_common *c);

#endif
