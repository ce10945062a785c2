/* cluster_keygate.h: the set-up of the suites that run keygate in front of the live cluster, with the integration harness's durable beside it (test_cluster_keyless, test_cluster_topology); included once by each, its functions are the suite's own. */
#ifndef KEYGATE_CLUSTER_KEYGATE_H
#define KEYGATE_CLUSTER_KEYGATE_H

#include <check.h>
#include <limits.h>
#include <stdio.h>

#include "cluster_harness.h"
#include "harness.h"

/*
 * One cluster (3 primaries + 3 replicas) and one harness (durable, cache, keygate with an admin
 * port) per test case, started in the unchecked fixture; every test calls keygate_on_cluster
 * first, since the harness's heal puts the suite's own keygate.conf back before each test.
 */
static struct cluster *C;
static struct harness h;

/* cache is the cluster; durable stays the harness's single server */
static const char registry[] = "namespace  cache:  instance=cache   ttl=1h owner=app\n"
                               "namespace  other: instance=cache   ttl=1h owner=app\n"
                               "namespace  q:     instance=durable ttl=none owner=app\n"
                               "channel    push:  instance=cache owner=app\n";

static void setup(void)
{
    C = cluster_start();
    ck_assert_msg(C != NULL, "cluster_start: %s", cluster_last_error());
    struct harness_opts o = {.registry_text = registry, .admin = 1};
    ck_assert_msg(harness_start(&h, &o) == 0, "%s", h.error);
}

static void teardown(void)
{
    harness_stop(&h);
    cluster_stop(C);
    C = NULL;
}

/* Restart keygate with `cache` as the cluster (seeds: nodes 0 and 1), its map read every second
 * (a failover is seen without traffic). */
static void keygate_on_cluster(void)
{
    static char lines[3 * PATH_MAX];
    const struct harness_backend *d = &h.backends[0];
    snprintf(lines, sizeof lines,
             "instance durable 127.0.0.1:%d tls ca=%s/build/certs/ca.crt server-name=localhost password-file=%s\n"
             "instance cache cluster 127.0.0.1:%d,127.0.0.1:%d tls ca=%s/build/certs/ca.crt server-name=localhost "
             "password-file=%s\n",
             d->tls_port, h.root, d->pass_file, C->nodes[0].tls_port, C->nodes[1].tls_port, h.root, C->pass_file);
    struct harness_opts o = {.registry_text = registry,
                             .instances_text = lines,
                             .extra_config = "cluster-refresh 1s\n",
                             .admin = 1};
    ck_assert_msg(harness_keygate_restart(&h, &o) == 0, "keygate on the cluster: %s", h.error);
}

#endif
