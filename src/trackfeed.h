/* trackfeed.h: one connection per instance (per primary of a cluster) per process on which Redis's own BCAST tracking tells keygate of every write, from any client (other keygates, direct writers, expiry, eviction). */
#ifndef KEYGATE_TRACKFEED_H
#define KEYGATE_TRACKFEED_H

struct proxy;
struct config;
struct trackfeed;

/*
 * A thread per instance holds one connection (a Sentinel instance's: to its primary, again
 * after each failover, sentinelwatch's generation; a cluster's: one per primary, the primaries
 * asked again every 2 s, a change ending the session as a drop does):
 * HELLO 3, CLIENT TRACKING ON BCAST (every key), read raw (syncconn_read_raw: hiredis here
 * reads no RESP3). Every invalidate push is handed to the table (tracking_invalidate
 * from_feed): the default-mode keys (one-shot) and the BCAST clients. It is PINGed every
 * second; when it fails (or 3 PINGs go unanswered), or the instance is flushed (a null push),
 * keygate cannot vouch for what its clients read of the instance: they get Redis's flush-all
 * (tracking_flush_instance), again once the feed is back (writes of the gap). It connects
 * only while keygate's own connections to the instance are up (nodes_status), retrying a
 * refused start after 200 ms doubling to 2 s. No subscription: PUBSUB CHANNELS / NUMSUB / NUMPAT do not see it.
 */

/* Start the feeds of cfg's instances (main thread, after tracker_start). NULL when none. */
struct trackfeed *trackfeed_start(const struct config *cfg, struct proxy *p);

/* Stop and join them (before tracker_stop). */
void trackfeed_stop(struct trackfeed *f);

#endif
