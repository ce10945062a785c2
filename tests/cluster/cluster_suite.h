/* cluster_suite.h: the set-up of the suites that run against the live cluster alone, without keygate (test_cluster_harness, test_slotmap_live); included once by each, its functions are the suite's own. */
#ifndef KEYGATE_CLUSTER_SUITE_H
#define KEYGATE_CLUSTER_SUITE_H

#include <check.h>
#include <stdio.h>

#include "cluster_harness.h"
#include "harness.h"

/* One cluster (3 primaries + 3 replicas) per test case, started in the unchecked fixture. */
static struct cluster *C;

static void setup(void)
{
    long long t0 = now_ms();
    C = cluster_start();
    ck_assert_msg(C != NULL, "cluster_start: %s", cluster_last_error());
    fprintf(stderr, "cluster up in %lld ms\n", now_ms() - t0);
}

static void teardown(void)
{
    cluster_stop(C);
    C = NULL;
}

/* A plain connection to node i (fails the test when it does not answer). */
static redisContext *must_connect(int i)
{
    redisContext *c = cluster_connect(C, i);
    ck_assert_msg(c != NULL, "node %d (port %d) does not answer", i, C->nodes[i].plain_port);
    return c;
}

#endif
