/* chaos_cluster.h: the fault harness's Redis Cluster topology (cluster.c), entered from chaos.c's main when TOPOLOGY=cluster. */
#ifndef KEYGATE_CHAOS_CLUSTER_H
#define KEYGATE_CHAOS_CLUSTER_H

#include "chaos_sentinel.h" /* struct chaos_common */

/* Run the cluster topology (cluster.c's header comment): the deployment, the load, the seed's schedule, the checker.
 * Prints as the other topologies do, ending with "N passed, N failed". Exit status: 0 passed, 1 failed (a violation
 * or a harness failure), 2 a bad option. */
int chaos_cluster_main(const struct chaos_common *c);

#endif
