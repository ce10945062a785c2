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
 * second; when it fails (or 3 PINGs go unanswered) keygate can vouch only for what the near
 * cache's stream covers (tracking_feed_lost); once the feed is back, what was read meanwhile is
 * flushed or invalidated (tracking_feed_back); while it is down, the clients that read keys of it
 * are flushed every 5 s (tracking_feed_still_down: the stream does not see expiry, eviction or
 * writes without keygate, and nothing sees other keys' writes by others). A null
 * push (the instance flushed): a flush (tracking_flush_instance). It connects
 * only while keygate's own connections to the instance are up (nodes_status), retrying a
 * refused start after 200 ms doubling to 2 s. No subscription: PUBSUB CHANNELS / NUMSUB / NUMPAT do not see it.
 */

/* Start the feeds of cfg's instances (main thread, after tracker_start). NULL when none. */
struct trackfeed *trackfeed_start(const struct config *cfg, struct proxy *p);

/* Stop and join them (before tracker_stop). */
void trackfeed_stop(struct trackfeed *f);

#endif
