/* cluster_harness.h: starts a real local TLS Redis Cluster (3 primaries + 3 replicas, redis-server 7.0) on free loopback ports for the cluster suites, and drives it: failover, SIGSTOP, reshard, a held slot migration. */
#ifndef KEYGATE_CLUSTER_HARNESS_H
#define KEYGATE_CLUSTER_HARNESS_H

#include <limits.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

/*
 * Usage (one cluster per test case, started in an unchecked fixture, in the runner; the
 * suites also link tests/integration/harness.c for harness_tcase, cmd, expect_*):
 *
 *   static struct cluster *C;
 *   static void setup(void) { C = cluster_start(); ck_assert_msg(C != NULL, "%s", cluster_last_error()); }
 *   static void teardown(void) { cluster_stop(C); C = NULL; }
 *
 * Every node listens on 127.0.0.1 on a plain port (the tests' own direct checks) and a TLS
 * port (what keygate and redis-cli use); the cluster bus is TLS (tls-cluster yes) on
 * tls_port + 10000, replication TLS too. All ports are picked at random in 20000..34999
 * with their bus port free as well (so every port, bus included, is below 45000). Every
 * node has the same password (requirepass and masterauth; also in pass_file, mode 0600),
 * cluster-node-timeout 1000 ms (CLUSTER_NODE_TIMEOUT_MS at cluster_start: another), no persistence, its own dir
 * under the cluster's temp dir.
 * CLUSTER_HOSTNAMES=1 at cluster_start: every node has cluster-announce-hostname localhost and
 * cluster-preferred-endpoint-type hostname, so CLUSTER SLOTS, CLUSTER SHARDS' endpoint, -MOVED
 * and -ASK name `localhost` instead of 127.0.0.1.
 *
 * Processes: the nodes are children of the process that called cluster_start, in its
 * process group, with PR_SET_PDEATHSIG=SIGKILL against it and no inherited fds
 * (closefrom). The struct lives in MAP_SHARED memory: a Check test process (CK_FORK) that
 * kills or stops a node leaves that state for the teardown to see. Every pid is recorded
 * with its start time (/proc/PID/stat field 22), so a signal never reaches a process that
 * took a dead node's pid. The starting process gets atexit and SIGINT/SIGTERM/SIGABRT
 * handlers that SIGKILL every node it started; cluster_leftovers() tells whether any still
 * runs, for a suite's final post-condition.
 * That process handling is tests/common/procs.[ch], shared with the Sentinel harness.
 *
 * Every wait has a deadline and, when it passes, says in cluster_last_error() what it
 * waited for and what it saw. Functions returning int: 0 on success, -1 on failure (the
 * error then says why). Environment: CLUSTER_KEEP=1 keeps the temp dir (logs, configs).
 * The cwd must be the repo root (certificates: build/certs, made by scripts/gen-certs).
 */

#define CLUSTER_NODES 6     /* the nodes cluster_start starts: 3 primaries, 3 replicas */
#define CLUSTER_MAX_NODES 8 /* with the ones cluster_node_add adds (a node removed leaves its entry free) */
#define CLUSTER_SLOTS 16384

enum cluster_role { CLUSTER_ROLE_UNKNOWN = 0, CLUSTER_ROLE_PRIMARY, CLUSTER_ROLE_REPLICA };

struct cluster_node {
    int plain_port;
    int tls_port;
    int bus_port;             /* tls_port + 10000 */
    pid_t pid;                /* as started, kept after a kill (cluster_node_alive tells) */
    unsigned long long start; /* the pid's start time, at fork */
    int stopped;              /* SIGSTOPped by cluster_node_pause and not continued */
    int removed;              /* forgotten by the cluster and killed (cluster_node_remove); an entry never used too */
    char id[41];              /* CLUSTER MYID */
    char dir[PATH_MAX];       /* data dir: nodes.conf */
    char conf_file[PATH_MAX];
    char log_file[PATH_MAX];
};

struct cluster {
    char root[1024]; /* repo root (the cwd at start) */
    char dir[256];   /* temp dir */
    char password[65];
    char pass_file[PATH_MAX];
    pid_t owner;         /* the process that started the nodes (their parent) */
    int hostnames;       /* CLUSTER_HOSTNAMES=1 at cluster_start: the nodes are named `localhost` (below) */
    int node_timeout_ms; /* cluster-node-timeout: 1000, or CLUSTER_NODE_TIMEOUT_MS at cluster_start */
    int nnodes;          /* entries of nodes[] in use or removed: CLUSTER_NODES, more after cluster_node_add */
    struct cluster_node nodes[CLUSTER_MAX_NODES];
};

/* Why the last failing call failed (this process's; a static buffer). */
const char *cluster_last_error(void);

/* Start 6 nodes, `redis-cli --cluster create ... --cluster-replicas 1`, and wait (30 s) until
 * every node says cluster_state:ok with 16384 slots ok, all nodes agree on the owner of every
 * slot, 3 primaries each have one replica and every replica's link is up. On failure (a port
 * taken meanwhile: up to 3 attempts with other ports) returns NULL, prints the nodes' logs
 * and leaves nothing running. The struct is shared memory: free it with cluster_stop. */
struct cluster *cluster_start(void);

/* SIGKILL every node still running, wait until each is gone (reaped when we are its
 * parent), remove the temp dir (unless CLUSTER_KEEP=1) and free c. NULL is a no-op. */
void cluster_stop(struct cluster *c);

/* How many redis-servers this process started (any cluster) still run: 0 after every
 * cluster_stop. Those found are printed on stderr. */
int cluster_leftovers(void);

/* Index of the node with that plain or TLS port, or of that node id; -1 when none. */
int cluster_node_by_port(const struct cluster *c, int port);
int cluster_node_by_id(const struct cluster *c, const char *id);

/* Is node i running (and not a zombie)? */
int cluster_node_alive(const struct cluster *c, int i);

/* A new blocking, authenticated plain connection to node i (2 s connect, 10 s I/O), or NULL.
 * The caller redisFree()s it. */
redisContext *cluster_connect(const struct cluster *c, int i);

/* Node i's role as it answers ROLE now; UNKNOWN when it does not answer. */
enum cluster_role cluster_node_role(const struct cluster *c, int i);

/* Indexes of the running primaries that own slots (CLUSTER SHARDS of a running node), into
 * out[0..CLUSTER_NODES) (out[0..CLUSTER_MAX_NODES) once nodes were added); returns how many, -1
 * when no node answers. */
int cluster_primaries(const struct cluster *c, int *out);

/* The node owning slot now, as CLUSTER SHARDS of the first running node answers (asked at
 * every call); -1 when no node answers or the slot has no owner. */
int cluster_slot_owner(const struct cluster *c, unsigned slot);

/* The owner of every slot as node indexes (-1: none), from CLUSTER SHARDS of node i. */
int cluster_slot_owners(const struct cluster *c, int i, int owners[CLUSTER_SLOTS]) __attribute__((warn_unused_result));

/* Wait (timeout_ms) until every running node says cluster_state:ok, cluster_slots_ok:16384,
 * and all agree on every slot's owner (a running node). */
int cluster_wait_ok(struct cluster *c, int timeout_ms) __attribute__((warn_unused_result));

/* SIGKILL node i and wait until its process is gone (5 s). */
int cluster_node_kill(struct cluster *c, int i) __attribute__((warn_unused_result));

/* Kill primary i and wait (timeout_ms) until another node owns every slot it had and the
 * cluster is ok again (cluster_wait_ok); *promoted (may be NULL): the new owner; *ms (may be
 * NULL): milliseconds from the kill to the cluster being ok. */
int cluster_kill_primary(struct cluster *c, int i, int timeout_ms, int *promoted, long long *ms)
    __attribute__((warn_unused_result));

/* SIGSTOP / SIGCONT node i (cluster_stop continues and kills a stopped node). */
int cluster_node_pause(struct cluster *c, int i) __attribute__((warn_unused_result));
int cluster_node_resume(struct cluster *c, int i) __attribute__((warn_unused_result));

/* `redis-cli --cluster reshard` of n slots from primary `from` to primary `to` (over TLS),
 * then cluster_wait_ok (timeout_ms for both). */
int cluster_reshard(struct cluster *c, int from, int to, int n, int timeout_ms) __attribute__((warn_unused_result));

/*
 * One slot's migration in steps, so a test can hold it mid-way (ASK):
 *   cluster_migrate_begin:  CLUSTER SETSLOT slot IMPORTING on `to`, then MIGRATING on `from`;
 *   cluster_migrate_keys:   MIGRATE (over the TLS bus's transport, AUTH) of up to max keys of
 *                           the slot still on `from` (CLUSTER GETKEYSINSLOT); *moved their count;
 *   cluster_migrate_end:    CLUSTER SETSLOT slot NODE to-id on `to`, `from`, then every other
 *                           running primary, and cluster_wait_ok (10 s).
 * `from` must own slot at begin; nothing else changes the slot meanwhile.
 */
int cluster_migrate_begin(struct cluster *c, unsigned slot, int from, int to) __attribute__((warn_unused_result));
int cluster_migrate_keys(struct cluster *c, unsigned slot, int from, int to, int max, int *moved)
    __attribute__((warn_unused_result));
int cluster_migrate_end(struct cluster *c, unsigned slot, int from, int to) __attribute__((warn_unused_result));

/*
 * Nodes added, removed, started again and failed over by hand (the fault harness's cluster topology):
 *
 *   cluster_node_add:     a new empty node (the first removed or unused entry; its own free ports), met by the
 *                         cluster (CLUSTER MEET), known to every running node and ok (it knows every slot's
 *                         owner: cluster_wait_ok); with replica_of >= 0 it then
 *                         replicates that primary (CLUSTER REPLICATE) and its link is up. *index: its entry.
 *   cluster_node_remove:  node i, which must own no slot (and, a primary, have no replica left), forgotten by every
 *                         other running node (CLUSTER FORGET) and killed; its entry is free again.
 *   cluster_node_restart: node i (killed) started again with its own config and nodes.conf (no data: the nodes
 *                         keep nothing on disk), answering; the cluster makes it a replica of whoever took its slots.
 *   cluster_failover:     CLUSTER FAILOVER (a manual, coordinated failover) sent to replica i; waits (timeout_ms)
 *                         until it owns its former primary's slots and the cluster is ok.
 *   cluster_wait_settled: cluster_wait_ok, then every primary owning slots has exactly one connected replica
 *                         and every other running node is such a replica (the shape cluster_start makes).
 */
int cluster_node_add(struct cluster *c, int replica_of, int *index) __attribute__((warn_unused_result));
int cluster_node_remove(struct cluster *c, int i) __attribute__((warn_unused_result));
int cluster_node_restart(struct cluster *c, int i) __attribute__((warn_unused_result));
int cluster_failover(struct cluster *c, int i, int timeout_ms) __attribute__((warn_unused_result));
int cluster_wait_settled(struct cluster *c, int timeout_ms) __attribute__((warn_unused_result));

#endif
