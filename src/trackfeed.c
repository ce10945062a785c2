/* trackfeed.c: one connection per instance (per primary of a cluster) per process on which Redis's own BCAST tracking tells keygate of every write, from any client (other keygates, direct writers, expiry, eviction). */
#include "trackfeed.h"

#include "backend.h"
#include "nodes.h"
#include "loop.h"
#include "sentinelwatch.h"
#include "syncconn.h"
#include "tracker.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FEED_PING_MS 1000
#define FEED_RETRY_MS 200      /* the first retry of a feed refused while the instance is up ... */
#define FEED_RETRY_MAX_MS 2000 /* ... doubling to this */
#define FEED_PINGS_MAX 3       /* unanswered PINGs on sub: the connection is gone */
/* While a feed is down, what its clients read is vouched for by nobody (but writes through
 * keygates: this one's, and the near-cache stream's): the clients that read keys of the instance
 * are flushed this often until it is back (README "Client-side caching"). */
#define FEED_STREAM_GRACE_MS 5000

struct feed {
    struct trackfeed *owner;
    int instance;
    struct instance_conf conf; /* its own copy (config_instance_copy) */
    int64_t connect_timeout_ms;
    pthread_t thread;
    int started;
    int64_t grace_at; /* while down: when the near-cache keys read are flushed next (feed_grace) */
};

struct trackfeed {
    struct proxy *proxy;
    struct syncconn_stop *stop;
    int stopping; /* atomic */
    struct feed feeds[CONFIG_MAX_INSTANCES];
    int nfeeds;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int stopping(const struct feed *fd)
{
    return __atomic_load_n(&fd->owner->stopping, __ATOMIC_ACQUIRE);
}

/* A change of what keygate vouches for on the instance (tracking.h: tracking_feed_lost, ...):
 * its invalidations handed to their receivers. */
static void feed_notes(struct feed *fd, void (*change)(struct tracking_table *, int, struct tracking_notes *))
{
    struct proxy *p = fd->owner->proxy;
    struct tracking_notes notes = {0};
    change(&p->tracking, fd->instance, &notes);
    tracker_post(p, &notes);
    tracking_notes_free(&notes);
}

/* The feed is up: what was read before is flushed or invalidated (tracking_feed_back). */
static void feed_up(struct feed *fd)
{
    feed_notes(fd, tracking_feed_back);
}

/* The feed is down: what it can no longer vouch for is flushed, and what is read meanwhile every
 * FEED_STREAM_GRACE_MS until it is back (feed_grace). */
static void feed_down(struct feed *fd)
{
    feed_notes(fd, tracking_feed_lost);
    fd->grace_at = mono_ms() + FEED_STREAM_GRACE_MS;
}

/* The feed is down (between sessions): what was read since the last flush has gone unvouched
 * long enough. */
static void feed_grace(struct feed *fd)
{
    if (mono_ms() < fd->grace_at) return;
    feed_notes(fd, tracking_feed_still_down);
    fd->grace_at = mono_ms() + FEED_STREAM_GRACE_MS;
}

/* A push on the feed: its keys to the table (default-mode readers, BCAST clients), or a flush. */
static void feed_push(struct feed *fd, const char *frame, size_t len)
{
    struct proxy *p = fd->owner->proxy;
    const char **keys = xmalloc((len / 6 + 1) * sizeof(*keys));
    size_t *lens = xmalloc((len / 6 + 1) * sizeof(*lens));
    size_t n = 0;
    int kind = tracking_parse_push(frame, len, keys, lens, &n);
    if (kind == 2) {
        feed_notes(fd, tracking_flush_instance); /* FLUSHALL / FLUSHDB on the instance */
    } else if (kind == 1 && n > 0) {
        struct tracking_notes notes = {0};
        tracking_invalidate(&p->tracking, 0, keys, lens, NULL, n, 1, &notes);
        tracker_post(p, &notes);
        tracking_notes_free(&notes);
    }
    free(keys);
    free(lens);
}

/* One command on c and its reply's bytes, which must start with `want`. 0 ok, else -1 with err. */
static int feed_command(struct syncconn *c, int argc, const char **argv, const char *want, char *err, size_t errlen)
{
    size_t lens[8];
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    const char *frame;
    size_t len;
    if (syncconn_append(c, argc, argv, lens) != 0 || syncconn_flush(c) != 0 ||
        syncconn_read_raw(c, &frame, &len) != 1) {
        snprintf(err, errlen, "%s: %s", argv[0], syncconn_error(c));
        return -1;
    }
    if (len < strlen(want) || memcmp(frame, want, strlen(want)) != 0) {
        snprintf(err, errlen, "%s answered %.*s", argv[0], (int)(len > 100 ? 100 : len), frame);
        return -1;
    }
    return 0;
}

/* Serve one connection until it fails or keygate stops (a sentinel instance: or its primary
 * changes, sentinelwatch's generation moving from `gen`). */
static void feed_session(struct feed *fd, struct syncconn *c, uint64_t gen)
{
    int pings = 0;
    int64_t next_ping = mono_ms() + FEED_PING_MS;
    const char *why = NULL;
    feed_up(fd); /* reads made before it was up: writes of the gap are unknown */
    while (!stopping(fd)) {
        if (fd->conf.sentinel && sentinelwatch_generation(fd->instance) != gen) {
            why = "the instance has a new primary";
            break;
        }
        int64_t now = mono_ms();
        if (now >= next_ping) {
            const char *ping[] = {"PING"};
            size_t plen[] = {4};
            if (pings >= FEED_PINGS_MAX) {
                why = "no answer to PING";
                break;
            }
            if (syncconn_append(c, 1, ping, plen) != 0 || syncconn_flush(c) != 0) break;
            pings++;
            next_ping = now + FEED_PING_MS;
        }
        int64_t wait = next_ping - now > 0 ? next_ping - now : 0;
        if (fd->conf.sentinel && wait > 100) wait = 100; /* a failover is seen within 100 ms */
        int ready = syncconn_wait(c, (int)wait);
        if (ready < 0) break;
        if (ready == 0) continue;
        const char *frame;
        size_t len;
        if (syncconn_read_raw(c, &frame, &len) != 1) break;
        if (frame[0] == '>')
            feed_push(fd, frame, len);
        else if (len == 7 && memcmp(frame, "+PONG\r\n", 7) == 0 && pings > 0)
            pings--;
    }
    if (!stopping(fd))
        log_event(LOG_WARN, "tracking_feed_lost", NULL, "tracking feed of '%s' lost: %s", fd->conf.name,
                  why ? why : syncconn_error(c));
    feed_down(fd); /* what was read of it may change unseen from now on */
}

/* Sleep ms unless keygate stops meanwhile (the feed is down: feed_grace meanwhile). */
static void feed_sleep(struct feed *fd, int ms)
{
    for (int slept = 0; slept < ms && !stopping(fd); slept += 20) {
        feed_grace(fd);
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Wait until keygate's own shared connections to the instance are up: the feed connects only to
 * an instance the workers reach (a down instance gets the workers' backoff, not a second
 * stream of attempts). */
static void feed_wait_instance(struct feed *fd)
{
    for (;;) {
        struct nodes_status st;
        nodes_status(fd->owner->proxy, fd->instance, &st);
        if (st.up > 0 || stopping(fd)) return;
        feed_sleep(fd, 50);
    }
}

#define FEED_NODES_MAX 64
#define FEED_TOPOLOGY_MS 2000 /* a cluster's primaries are asked again this often */

/* HELLO 3, the name, CLIENT TRACKING ON BCAST on a new connection. 0, or -1 with err. */
static int feed_handshake(struct syncconn *c, char *err, size_t errlen)
{
    const char *hello[] = {"HELLO", "3"}, *name[] = {"CLIENT", "SETNAME", "keygate-tracking"},
               *on[] = {"CLIENT", "TRACKING", "ON", "BCAST"};
    return feed_command(c, 2, hello, "%", err, errlen) == 0 && feed_command(c, 3, name, "+OK", err, errlen) == 0 &&
                   feed_command(c, 4, on, "+OK", err, errlen) == 0
               ? 0
               : -1;
}

/* Same primaries (as sets)? */
static int same_nodes(const struct slotmap_node *a, int na, const struct slotmap_node *b, int nb)
{
    if (na != nb) return 0;
    for (int i = 0; i < na; i++) {
        int found = 0;
        for (int j = 0; j < nb && !found; j++) found = a[i].port == b[j].port && strcmp(a[i].host, b[j].host) == 0;
        if (!found) return 0;
    }
    return 1;
}

/* A cluster instance: one connection per primary, served together until one fails, the
 * primaries change (asked every FEED_TOPOLOGY_MS: a failover, a node added or emptied), or
 * keygate stops. 1 when it served (a session ran), 0 when it could not start (err says why). */
static int feed_cluster(struct feed *fd, char *err, size_t errlen)
{
    int timeout = (int)fd->connect_timeout_ms;
    struct slotmap_node nodes[FEED_NODES_MAX];
    int n = syncconn_primaries(&fd->conf, timeout, fd->owner->stop, nodes, FEED_NODES_MAX, err, errlen);
    if (n <= 0) return 0;
    struct syncconn *c[FEED_NODES_MAX] = {0};
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        c[i] = syncconn_open_node(&fd->conf, nodes[i].host, nodes[i].port, timeout, fd->owner->stop, err, errlen);
        ok = c[i] && feed_handshake(c[i], err, errlen) == 0;
    }
    if (ok) {
        log_event(LOG_INFO, "tracking_feed", NULL, "tracking feed of '%s' up (%d primaries)", fd->conf.name, n);
        feed_up(fd); /* reads made before it was up: writes of the gap are unknown */
        const char *why = NULL;
        int pings[FEED_NODES_MAX] = {0};
        int64_t next_ping = mono_ms() + FEED_PING_MS, next_check = mono_ms() + FEED_TOPOLOGY_MS;
        while (!stopping(fd) && !why) {
            int64_t now = mono_ms();
            if (now >= next_ping) {
                const char *ping[] = {"PING"};
                size_t plen[] = {4};
                for (int i = 0; i < n && !why; i++) {
                    if (pings[i] >= FEED_PINGS_MAX)
                        why = "no answer to PING";
                    else if (syncconn_append(c[i], 1, ping, plen) != 0 || syncconn_flush(c[i]) != 0)
                        why = syncconn_error(c[i]);
                    pings[i]++;
                }
                next_ping = now + FEED_PING_MS;
            }
            if (!why && now >= next_check) {
                char e[200];
                struct slotmap_node now_nodes[FEED_NODES_MAX];
                int m =
                    syncconn_primaries(&fd->conf, timeout, fd->owner->stop, now_nodes, FEED_NODES_MAX, e, sizeof(e));
                if (m > 0 && !same_nodes(nodes, n, now_nodes, m)) why = "its primaries changed";
                next_check = mono_ms() + FEED_TOPOLOGY_MS;
            }
            struct pollfd pfd[FEED_NODES_MAX];
            int ready = 0;
            for (int i = 0; i < n && !why; i++) {
                int r = syncconn_wait(c[i], 0);
                if (r < 0) why = syncconn_error(c[i]);
                if (r <= 0) continue;
                const char *frame;
                size_t len;
                if (syncconn_read_raw(c[i], &frame, &len) != 1) {
                    why = syncconn_error(c[i]);
                    break;
                }
                ready = 1;
                if (frame[0] == '>')
                    feed_push(fd, frame, len);
                else if (len == 7 && memcmp(frame, "+PONG\r\n", 7) == 0 && pings[i] > 0)
                    pings[i]--;
            }
            if (why || ready) continue;
            for (int i = 0; i < n; i++) pfd[i] = (struct pollfd){.fd = syncconn_fd(c[i]), .events = POLLIN};
            (void)poll(pfd, (nfds_t)n, 100);
        }
        if (!stopping(fd))
            log_event(LOG_WARN, "tracking_feed_lost", NULL, "tracking feed of '%s' lost: %s", fd->conf.name,
                      why ? why : "stopped");
        feed_down(fd); /* what was read of it may change unseen from now on */
    }
    for (int i = 0; i < n; i++)
        if (c[i]) syncconn_close(c[i]);
    return ok;
}

static void *feed_main(void *arg)
{
    struct feed *fd = arg;
    char err[300];
    int logged = 0, retry_ms = FEED_RETRY_MS;
    fd->grace_at = mono_ms() + FEED_STREAM_GRACE_MS;
    while (!stopping(fd)) {
        feed_grace(fd);
        feed_wait_instance(fd);
        if (stopping(fd)) break;
        if (fd->conf.cluster) {
            int served = feed_cluster(fd, err, sizeof(err));
            if (served) {
                logged = 0;
                retry_ms = FEED_RETRY_MS;
            } else if (!logged && !stopping(fd)) {
                log_event(LOG_WARN, "tracking_feed_failed", NULL, "tracking feed of '%s' cannot start: %s",
                          fd->conf.name, err);
                logged = 1;
            }
            feed_sleep(fd, served ? 0 : retry_ms);
            if (!served) retry_ms = retry_ms * 2 > FEED_RETRY_MAX_MS ? FEED_RETRY_MAX_MS : retry_ms * 2;
            continue;
        }
        /* a sentinel instance: its primary as the sentinels name it and ROLE confirms, now */
        uint64_t gen = fd->conf.sentinel ? sentinelwatch_generation(fd->instance) : 0;
        struct slotmap_node primary;
        struct syncconn *c = NULL;
        if (!fd->conf.sentinel)
            c = syncconn_open_stoppable(&fd->conf, (int)fd->connect_timeout_ms, fd->owner->stop, err, sizeof(err));
        else if (syncconn_primaries(&fd->conf, (int)fd->connect_timeout_ms, fd->owner->stop, &primary, 1, err,
                                    sizeof(err)) == 1)
            c = syncconn_open_node(&fd->conf, primary.host, primary.port, (int)fd->connect_timeout_ms, fd->owner->stop,
                                   err, sizeof(err));
        int ok = c && feed_handshake(c, err, sizeof(err)) == 0;
        if (ok) {
            log_event(LOG_INFO, "tracking_feed", NULL, "tracking feed of '%s' up", fd->conf.name);
            logged = 0;
            retry_ms = FEED_RETRY_MS;
            feed_session(fd, c, gen);
        } else if (!logged && !stopping(fd)) {
            log_event(LOG_WARN, "tracking_feed_failed", NULL, "tracking feed of '%s' cannot start: %s", fd->conf.name,
                      err);
            logged = 1;
        }
        if (c) syncconn_close(c);
        if (!ok) {
            feed_sleep(fd, retry_ms);
            retry_ms = retry_ms * 2 > FEED_RETRY_MAX_MS ? FEED_RETRY_MAX_MS : retry_ms * 2;
        }
    }
    return NULL;
}

struct trackfeed *trackfeed_start(const struct config *cfg, struct proxy *p)
{
    struct trackfeed *f = xcalloc(1, sizeof(*f));
    f->proxy = p;
    f->stop = syncconn_stop_new();
    _Static_assert(CONFIG_MAX_INSTANCES <= 32, "tracking's instance masks hold 32 instances");
    for (size_t i = 0; i < cfg->ninstances && i < CONFIG_MAX_INSTANCES; i++) {
        const struct instance_conf *ic = &cfg->instances[i];
        struct feed *fd = &f->feeds[f->nfeeds++];
        fd->owner = f;
        fd->instance = (int)i;
        fd->connect_timeout_ms = cfg->connect_timeout_ms;
        config_instance_copy(&fd->conf, ic);
    }
    for (int k = 0; k < f->nfeeds; k++) {
        struct feed *fd = &f->feeds[k];
        fd->started = pthread_create(&fd->thread, NULL, feed_main, fd) == 0;
        if (!fd->started)
            log_event(LOG_ERROR, "tracking_feed", NULL, "cannot start the tracking feed of '%s'", fd->conf.name);
    }
    return f;
}

void trackfeed_stop(struct trackfeed *f)
{
    if (!f) return;
    __atomic_store_n(&f->stopping, 1, __ATOMIC_RELEASE);
    syncconn_stop_trip(f->stop);
    for (int k = 0; k < f->nfeeds; k++) {
        if (f->feeds[k].started) pthread_join(f->feeds[k].thread, NULL);
        config_instance_free(&f->feeds[k].conf);
    }
    syncconn_stop_free(f->stop);
    free(f);
}
