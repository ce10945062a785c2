/* pubsub.h: one client's subscriptions: its subscriber connections, the confirmed counts, the markers. */
#ifndef KEYGATE_PUBSUB_H
#define KEYGATE_PUBSUB_H

#include <stddef.h>

#include "config.h"

struct backend;

/*
 * After each (P|S)(UN)SUBSCRIBE keygate sends PING with this argument on the subscriber
 * connection. Redis answers it after every confirmation of that command, so its answer
 * (["pong", marker] when subscribed on a RESP2 connection; a bulk when not, and always on a
 * RESP3 one) tells keygate the counts are final:
 * only then are the client's next commands parsed, in Redis's order.
 */
#define PUBSUB_MARKER "keygate-subscription-marker"
#define PUBSUB_MARKER_CMD "*2\r\n$4\r\nPING\r\n$27\r\n" PUBSUB_MARKER "\r\n"

/* A client's subscription state, per instance (the client owns it; nothing else writes it). */
struct pubsub {
    struct backend *pin[CONFIG_MAX_INSTANCES]; /* the subscriber connection on each instance, or NULL */
    int normal[CONFIG_MAX_INSTANCES];          /* channels + patterns, from the last confirmation */
    int shard[CONFIG_MAX_INSTANCES];           /* shard channels, from the last confirmation */
    int markers[CONFIG_MAX_INSTANCES];         /* marker PINGs sent there and not answered yet */
    int markers_total;                         /* the sum of markers[] */
};

/* What a frame from a subscriber connection is. */
enum pubsub_frame {
    PUBSUB_FRAME_CLIENT = 0, /* a message or a confirmation: the client's */
    PUBSUB_FRAME_MARKER,     /* a marker's answer, more markers outstanding: keygate's own */
    PUBSUB_FRAME_SETTLED,    /* the last outstanding marker's answer: every count is final */
};

/* A marker was sent on instance inst's subscriber connection. */
void pubsub_marker_sent(struct pubsub *ps, int inst);

/* Account for one frame from inst's subscriber connection and say whose it is. Only
 * keygate sends the marker, once per (un)subscribe: never more answers than sent. */
enum pubsub_frame pubsub_on_frame(struct pubsub *ps, int inst, const char *frame, size_t len);

/* Subscribed to anything on any instance (from the confirmed counts)? */
int pubsub_subscribed(const struct pubsub *ps);

/* Does the client hold any subscriber connection? */
int pubsub_holds_any(const struct pubsub *ps);

/* The instance whose subscriber connection is b, or -1. */
int pubsub_instance_of(const struct pubsub *ps, const struct backend *b);

/* inst's subscriber connection is gone: forget it, its counts and its markers. Returns 1
 * when it held subscriptions (messages would now be lost). */
int pubsub_lost(struct pubsub *ps, int inst);

/* Pure: is frame a confirmation ["(p|s)(un)subscribe", channel, count] (an array from a RESP2
 * connection, a push ">3" from a RESP3 one)? Then 1 with *shard
 * (an s(un)subscribe) and *count (the connection's count after it). */
int pubsub_confirmation_parse(const char *frame, size_t len, int *shard, long long *count);

/* Pure: is frame the answer to PUBSUB_MARKER_CMD (a bulk when not subscribed, ["pong", marker] when)? */
int pubsub_is_marker_answer(const char *frame, size_t len);

#endif
