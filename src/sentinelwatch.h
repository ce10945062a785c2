/* sentinelwatch.h: a background thread per sentinel instance that finds its primary through the sentinels, confirms it with ROLE and follows +switch-master / +odown / -odown; the workers read what it found. */
#ifndef KEYGATE_SENTINELWATCH_H
#define KEYGATE_SENTINELWATCH_H

#include <stdint.h>

#include "config.h"
#include "slotmap.h"

/*
 * For each `instance NAME sentinel ...`, threads of its own:
 *
 *   a checker   asks the sentinels in turn (syncconn_sentinel_primary: get-master-addr-by-name,
 *               then ROLE on the node named) and publishes the primary, confirmed; every
 *               WATCH_CHECK_MS while it is confirmed, every WATCH_UNCONFIRMED_MS while not, and at
 *               once when poked (sentinelwatch_poke, or a listener's event)
 *   a listener  per sentinel: SUBSCRIBEd to its events about this master. +try-failover and
 *               +failover-state-send-slaveof-noone (a failover starts: the leader sentinel is
 *               about to promote a replica, and writes the old primary still takes would be lost),
 *               +odown and +switch-master make the primary unconfirmed at once, so the workers
 *               hold its requests (README "High availability"); a failover's end (+switch-master,
 *               -failover-abort-*, +failover-end) and -odown make the checker look again.
 *
 * While a failover is under way (until its end, or failover-hold) or the primary is under
 * +odown, the checker does not confirm that old primary, and does not ask ROLE of a node under
 * +odown (a frozen node would hold it for its I/O timeout). When no sentinel answers, the
 * published primary stays as it was: keygate keeps serving the primary it has. Every change of
 * the published address is logged (event `sentinel_switch`) and counted.
 */
struct sentinelwatch;

/* What the workers read of an instance's primary. */
struct sentinelwatch_state {
    struct slotmap_node primary; /* the last primary found (host "" before the first) */
    int confirmed;               /* ROLE said primary, and no switch or odown since */
    uint64_t generation;         /* grows with every change of primary or confirmed */
    uint64_t switches;           /* changes of the primary's address since start (failovers followed) */
    /* the sentinels' timing, from the SENTINEL MASTER answer followed (-1 before the first) */
    long long down_after_ms;       /* down-after-milliseconds: how long before they see the primary down */
    long long failover_timeout_ms; /* failover-timeout */
    int hold_short;                /* failover-hold is shorter than down_after_ms + SENTINELWATCH_ELECTION_MS */
};

/* What a failover takes past down-after-milliseconds, at least: the quorum agreeing the primary is
 * down, a leader elected, a replica promoted and confirmed (about 1-2 s measured here). */
#define SENTINELWATCH_ELECTION_MS 2000

/* Pure: 1 when a request held for hold_ms cannot outlast an unplanned failover whose sentinels
 * wait down_after_ms (< 0: unknown) before they even see the primary down. */
int sentinelwatch_hold_short(long long hold_ms, long long down_after_ms);

/* Start a thread for every sentinel instance of cfg (cfg must outlive the watcher). NULL when
 * cfg has none. */
struct sentinelwatch *sentinelwatch_start(const struct config *cfg);

/* Stop and join the threads (their blocking calls return at once), free sw. NULL is a no-op. */
void sentinelwatch_stop(struct sentinelwatch *sw);

/* The state of sentinel instance `instance` (any thread). 0, or -1 when it has no watcher. */
int sentinelwatch_get(int instance, struct sentinelwatch_state *out);

/* The generation of `instance`'s state (sentinelwatch_state.generation) without a lock: any
 * thread, on a hot path (the near cache checks it before each hit). 0 before the first. */
uint64_t sentinelwatch_generation(int instance);

/* Check `instance`'s primary again now (a connection to it was lost, it answered -READONLY or
 * -LOADING): its watcher leaves its subscription and asks the sentinels. Any thread; a no-op
 * for an instance without a watcher. */
void sentinelwatch_poke(int instance);

#endif
