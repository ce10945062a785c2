/* sentinel_harness.h: starts a real local Sentinel-managed deployment (a TLS primary, two replicas, three sentinels; redis-server 7.0) on free loopback ports for the HA suites, and drives it: SENTINEL FAILOVER, SIGKILL, SIGSTOP, sentinels killed and restarted, a replica without AOF. */
#ifndef KEYGATE_SENTINEL_HARNESS_H
#define KEYGATE_SENTINEL_HARNESS_H

#include <limits.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

/*
 * Usage (one deployment per test case, started in an unchecked fixture, in the runner; the
 * suites also link tests/integration/harness.c for harness_tcase, cmd, expect_*):
 *
 *   static struct ha *H;
 *   static void setup(void) { H = ha_start(); ck_assert_msg(H != NULL, "%s", ha_last_error()); }
 *   static void teardown(void) { ha_stop(H); H = NULL; }
 *
 * Data nodes (index 0..nnodes-1; node 0 is the first primary, 1 and 2 its replicas, 3 the
 * replica ha_replica_add starts): redis-server with a plain port (the tests' own direct
 * checks) and a TLS port on 127.0.0.1; replication runs over TLS (tls-replication yes), so
 * the addresses the nodes and the sentinels exchange are the TLS ports. Every data node has
 * appendonly yes (but an ha_replica_add(h, 0, ...) replica), maxmemory-policy noeviction,
 * the same password (requirepass and masterauth; also in pass_file, mode 0600).
 *
 * Sentinels (index 0..2): `redis-server sentinel.conf --sentinel` with a plain and a TLS
 * port, tls-replication yes (they speak TLS to the data nodes and to each other), a
 * password of their own (requirepass and `sentinel sentinel-pass`; in sentinel_pass_file,
 * mode 0600), monitoring master_name at node 0's TLS port with quorum 2,
 * down-after-milliseconds 1000 (HA_DOWN_AFTER_MS=N at ha_start: N), failover-timeout 5000,
 * parallel-syncs 2, auth-pass the nodes' password.
 *
 * HA_HOSTNAMES=1 at ha_start: servers are named by host name. The replicas replicate from
 * `localhost` and announce themselves as `localhost` (replica-announce-ip); the sentinels monitor
 * `localhost`, with resolve-hostnames yes and announce-hostnames yes, so
 * SENTINEL get-master-addr-by-name, SENTINEL REPLICAS and +switch-master name `localhost`. With 1000 ms a failure often gets two
 * switches: right after +switch-master a sentinel's fresh link to the new primary may miss
 * a PING reply within 1 s, and the other sentinels' "master down" answers, kept from the
 * failover just done, make that +sdown an +odown at once (quorum 3/2), so a second failover
 * promotes the other replica about 1.2 s after the first (measured: 4 SIGKILLs of 5; none
 * in 3 with 2000 ms, where the promotion takes 2.2 to 3.2 s; redis/redis#8607). Every port is picked at random in 20000..31999 (below the kernel's
 * ephemeral range and below 45000).
 *
 * Processes: every server is a child of the process that called ha_start (the owner, made
 * a child subreaper), in its process group, with PR_SET_PDEATHSIG=SIGKILL against it and
 * no inherited fds (closefrom). A server (re)started from another process (a Check test
 * process, CK_FORK) is double-forked so that it too is the owner's child, out of the
 * test's process group. The struct lives in MAP_SHARED memory: a test process that kills,
 * stops or restarts a server leaves that state for the teardown to see. Every pid is
 * recorded with its start time (/proc/PID/stat field 22), so a signal never reaches a
 * process that took a dead server's pid. The owner gets atexit and SIGINT/SIGTERM/SIGABRT
 * handlers that SIGKILL every server it started; ha_leftovers() tells whether any still
 * runs, for a suite's final post-condition.
 * That process handling is tests/common/procs.[ch], shared with the cluster harness.
 *
 * Every wait polls with a deadline and, when it passes, says in ha_last_error() what it
 * waited for and what it saw last (and prints the tail of every server's log on stderr). Functions returning int: 0 on success, -1 on failure
 * (the error then says why). Environment: HA_KEEP=1 keeps the temp dir (logs, configs).
 * The cwd must be the repo root (certificates: build/certs, made by scripts/gen-certs).
 */

#define HA_NODES 4       /* room for the data nodes: 3 started by ha_start, 1 by ha_replica_add */
#define HA_START_NODES 3 /* the primary and its 2 replicas */
#define HA_SENTINELS 3
#define HA_QUORUM 2

enum ha_role { HA_ROLE_UNKNOWN = 0, HA_ROLE_PRIMARY, HA_ROLE_REPLICA, HA_ROLE_SENTINEL };

/* A data node or a sentinel. */
struct ha_proc {
    int plain_port;
    int tls_port;
    int aof;                  /* data node: appendonly yes */
    pid_t pid;                /* as started, kept after a kill (ha_node_alive tells) */
    unsigned long long start; /* the pid's start time, at fork */
    int stopped;              /* SIGSTOPped by a pause and not continued */
    char dir[PATH_MAX];       /* its data dir */
    char conf_file[PATH_MAX]; /* redis.conf / sentinel.conf (both rewritten by Redis) */
    char log_file[PATH_MAX];
};

struct ha {
    char root[1024]; /* repo root (the cwd at start) */
    char dir[256];   /* temp dir */
    char master_name[32];
    char password[65]; /* the data nodes' */
    char pass_file[PATH_MAX];
    char sentinel_password[65]; /* the sentinels' own */
    char sentinel_pass_file[PATH_MAX];
    pid_t owner;       /* the process that started the servers (their parent) */
    pid_t owner_pgid;  /* its process group, which every server joins */
    int nnodes;        /* data nodes started: 3, or 4 after ha_replica_add */
    int down_after_ms; /* the sentinels' down-after-milliseconds */
    int hostnames;     /* HA_HOSTNAMES=1 at ha_start: every server is named `localhost`, not 127.0.0.1 */
    struct ha_proc nodes[HA_NODES];
    struct ha_proc sentinels[HA_SENTINELS];
};

/* Why the last failing call failed (this process's; a static buffer). */
const char *ha_last_error(void);

/* Start the 3 data nodes, wait until the primary has both replicas online, start the 3
 * sentinels and wait (30 s) until every sentinel names node 0 as the primary (flags just
 * "master"), lists both replicas (flags "slave") and the other 2 sentinels. On failure (a
 * port taken meanwhile: up to 3 attempts with other ports) returns NULL, prints the
 * servers' logs and leaves nothing running. The struct is shared memory: free it with
 * ha_stop. */
struct ha *ha_start(void);

/* SIGKILL every server still running, wait until each is gone (reaped when we are its
 * parent), remove the temp dir (unless HA_KEEP=1) and free h. NULL is a no-op. */
void ha_stop(struct ha *h);

/* How many servers this process started (any deployment) still run: 0 after every
 * ha_stop. Those found are printed on stderr. */
int ha_leftovers(void);

/* Index of the data node with that plain or TLS port; -1 when none. */
int ha_node_by_port(const struct ha *h, int port);

/* Is data node i / sentinel s running (and not a zombie)? */
int ha_node_alive(const struct ha *h, int i);
int ha_sentinel_alive(const struct ha *h, int s);

/* A new blocking, authenticated plain connection to data node i / sentinel s (2 s connect,
 * 10 s I/O), or NULL. The caller redisFree()s it. */
redisContext *ha_connect(const struct ha *h, int i);
redisContext *ha_sentinel_connect(const struct ha *h, int s);

/* Node i's role as it answers ROLE now (HA_ROLE_UNKNOWN when it does not answer); for a
 * replica, *primary_port (may be NULL) is the port it replicates from and *link_up whether
 * its ROLE state is "connected". */
enum ha_role ha_node_role(const struct ha *h, int i, int *primary_port, int *link_up);

/* The primary as sentinel s answers SENTINEL get-master-addr-by-name now: a data node
 * index; -1 when it does not answer, names no primary, or one that is no node of h. */
int ha_sentinel_primary(const struct ha *h, int s);

/* The primary as the sentinels say: the answer of every running, not stopped sentinel
 * when they all agree; -1 when none answers or they disagree (the error says). */
int ha_primary(const struct ha *h);

/* Wait (timeout_ms) until the deployment is settled: every running, not stopped sentinel
 * names the same data node P (get-master-addr-by-name, and SENTINEL MASTER with flags
 * just "master": no failover in progress), P answers ROLE master, and every other running,
 * not stopped data node is a replica of P (its TLS port) with its link connected.
 * *primary (may be NULL): P. */
int ha_wait_settled(struct ha *h, int timeout_ms, int *primary) __attribute__((warn_unused_result));

/* Wait (timeout_ms) until every running, not stopped sentinel names one primary other than
 * old, and that node answers ROLE master. *promoted (may be NULL): it. */
int ha_wait_promoted(struct ha *h, int old, int timeout_ms, int *promoted) __attribute__((warn_unused_result));

/* SENTINEL FAILOVER master_name on a running sentinel, then ha_wait_promoted (the primary
 * changed, every sentinel agrees) and ha_wait_settled (the old primary and the other
 * replica replicate from the new one; Sentinel demotes a reachable old primary some 8 s
 * after the switch). timeout_ms bounds both. *promoted: the primary it settled on;
 * *confirmed_ms: to ha_wait_promoted's end; *settled_ms: to the end (each may be NULL).
 * Sentinel may switch twice for one failover (a second sentinel's attempt, voted for in a
 * later epoch, promotes another replica): the settled primary counts, and stderr says so. */
int ha_failover(struct ha *h, int timeout_ms, int *promoted, long long *confirmed_ms, long long *settled_ms)
    __attribute__((warn_unused_result));

/* SIGKILL the current primary (ha_primary) and wait (timeout_ms) for its replacement:
 * ha_wait_promoted, then ha_wait_settled. *old (may be NULL): the killed node; *promoted (may
 * be NULL): the primary it settled on (see ha_failover on a second switch); *ms (may be
 * NULL): the milliseconds from the kill to every sentinel naming a new primary. */
int ha_kill_primary(struct ha *h, int timeout_ms, int *old, int *promoted, long long *ms)
    __attribute__((warn_unused_result));

/* SIGKILL data node i / sentinel s and wait until its process is gone (5 s). */
int ha_node_kill(struct ha *h, int i) __attribute__((warn_unused_result));
int ha_sentinel_kill(struct ha *h, int s) __attribute__((warn_unused_result));

/* Start data node i / sentinel s again from its (Redis-rewritten) config and data dir (it
 * must not run) and wait until it answers PING (10 s). A restarted sentinel learns the
 * current primary from the others; ha_wait_settled waits for that. */
int ha_node_restart(struct ha *h, int i) __attribute__((warn_unused_result));
int ha_sentinel_restart(struct ha *h, int s) __attribute__((warn_unused_result));

/* SIGSTOP / SIGCONT data node i / sentinel s (ha_stop continues and kills a stopped one).
 * A pause returns once /proc says the process is stopped. */
int ha_node_pause(struct ha *h, int i) __attribute__((warn_unused_result));
int ha_node_resume(struct ha *h, int i) __attribute__((warn_unused_result));
int ha_sentinel_pause(struct ha *h, int s) __attribute__((warn_unused_result));
int ha_sentinel_resume(struct ha *h, int s) __attribute__((warn_unused_result));

/* Start one more data node (index 3), appendonly yes or no as aof says, as a replica of the
 * current primary, and wait (timeout_ms) until its link is up and every running sentinel
 * lists it as a replica (Sentinel reads the primary's INFO every 10 s: allow 15 s). Returns
 * its index, or -1. */
int ha_replica_add(struct ha *h, int aof, int timeout_ms) __attribute__((warn_unused_result));

#endif
