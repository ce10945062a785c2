/* trackfeed.c: one connection pair per plain instance per process on which Redis's own BCAST tracking tells keygate of every write, from any client (other keygates, direct writers, expiry, eviction). */
#include "trackfeed.h"

#include "loop.h"
#include "syncconn.h"
#include "tracker.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FEED_PING_MS 1000
#define FEED_RETRY_MS 200
#define FEED_PINGS_MAX 3 /* unanswered PINGs on sub: the connection is gone */

struct feed {
    struct trackfeed *owner;
    int instance;
    struct instance_conf conf; /* its own copy (config_instance_copy) */
    int64_t connect_timeout_ms;
    pthread_t thread;
    int started;
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

/* Flush what the instance's tracking clients read: keygate cannot vouch for it. */
static void feed_flush(struct feed *fd)
{
    struct proxy *p = fd->owner->proxy;
    struct tracking_notes notes = {0};
    tracking_flush_instance(&p->tracking, fd->instance, &notes);
    tracker_post(p, &notes);
    tracking_notes_free(&notes);
}

/* A message on sub: ["message", "__redis__:invalidate", [keys] | nil], or a PING's ["pong", ""]. */
static void feed_message(struct feed *fd, const redisReply *r, int *pings)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->element[0]->type != REDIS_REPLY_STRING) return;
    if (strcmp(r->element[0]->str, "pong") == 0) {
        if (*pings > 0) (*pings)--;
        return;
    }
    if (strcmp(r->element[0]->str, "message") != 0 || r->elements != 3) return;
    const redisReply *v = r->element[2];
    struct proxy *p = fd->owner->proxy;
    if (v->type == REDIS_REPLY_NIL) { /* FLUSHALL / FLUSHDB on the instance */
        feed_flush(fd);
        return;
    }
    if (v->type != REDIS_REPLY_ARRAY || v->elements == 0) return;
    const char **keys = xmalloc(v->elements * sizeof(*keys));
    size_t *lens = xmalloc(v->elements * sizeof(*lens));
    size_t n = 0;
    for (size_t i = 0; i < v->elements; i++) {
        if (v->element[i]->type != REDIS_REPLY_STRING) continue;
        keys[n] = v->element[i]->str;
        lens[n++] = v->element[i]->len;
    }
    struct tracking_notes notes = {0};
    tracking_invalidate(&p->tracking, 0, keys, lens, NULL, n, 1, &notes);
    tracker_post(p, &notes);
    tracking_notes_free(&notes);
    free(keys);
    free(lens);
}

/* One command on c whose reply must be a status or integer (not an error). 0 ok. */
static int feed_command(struct syncconn *c, int argc, const char **argv, long long *id, char *err, size_t errlen)
{
    size_t lens[8];
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    redisReply *r = syncconn_command(c, argc, argv, lens);
    if (!r) {
        snprintf(err, errlen, "%s", syncconn_error(c));
        return -1;
    }
    int ok = r->type != REDIS_REPLY_ERROR;
    if (!ok) snprintf(err, errlen, "%s", r->str);
    if (ok && id && r->type == REDIS_REPLY_INTEGER) *id = r->integer;
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Serve one connection pair until it fails or keygate stops. */
static void feed_session(struct feed *fd, struct syncconn *sub, struct syncconn *trk)
{
    struct tracking_table *t = &fd->owner->proxy->tracking;
    int pings = 0;
    int64_t next_ping = mono_ms() + FEED_PING_MS;
    char err[300];
    tracking_feed_set(t, fd->instance, 1);
    feed_flush(fd); /* reads made before it was up: writes of the gap are unknown */
    while (!stopping(fd)) {
        int64_t now = mono_ms();
        if (now >= next_ping) {
            const char *ping[] = {"PING"};
            size_t plen[] = {4};
            if (pings >= FEED_PINGS_MAX || feed_command(trk, 1, ping, NULL, err, sizeof(err)) != 0 ||
                syncconn_append(sub, 1, ping, plen) != 0 || syncconn_flush(sub) != 0) {
                log_event(LOG_WARN, "tracking_feed_lost", NULL, "tracking feed of '%s' lost: %s", fd->conf.name,
                          pings >= FEED_PINGS_MAX ? "no answer to PING" : err);
                break;
            }
            pings++;
            next_ping = now + FEED_PING_MS;
        }
        int ready = syncconn_wait(sub, (int)(next_ping - now > 0 ? next_ping - now : 0));
        if (ready < 0) break;
        if (ready == 0) continue;
        redisReply *r = syncconn_read(sub);
        if (!r) {
            if (!stopping(fd))
                log_event(LOG_WARN, "tracking_feed_lost", NULL, "tracking feed of '%s' lost: %s", fd->conf.name,
                          syncconn_error(sub));
            break;
        }
        feed_message(fd, r, &pings);
        freeReplyObject(r);
    }
    tracking_feed_set(t, fd->instance, 0);
    feed_flush(fd); /* what was read of it may change unseen from now on */
}

static void *feed_main(void *arg)
{
    struct feed *fd = arg;
    char err[300];
    int logged = 0;
    while (!stopping(fd)) {
        struct syncconn *sub =
            syncconn_open_stoppable(&fd->conf, (int)fd->connect_timeout_ms, fd->owner->stop, err, sizeof(err));
        struct syncconn *trk =
            sub ? syncconn_open_stoppable(&fd->conf, (int)fd->connect_timeout_ms, fd->owner->stop, err, sizeof(err))
                : NULL;
        long long id = 0;
        char sid[32];
        const char *cid[] = {"CLIENT", "ID"};
        int ok = trk && feed_command(sub, 2, cid, &id, err, sizeof(err)) == 0;
        if (ok) {
            const char *subscribe[] = {"SUBSCRIBE", TRACKING_CHANNEL};
            size_t slen[] = {9, sizeof(TRACKING_CHANNEL) - 1};
            redisReply *r = syncconn_command(sub, 2, subscribe, slen);
            ok = r && r->type == REDIS_REPLY_ARRAY;
            if (!ok) snprintf(err, sizeof(err), "SUBSCRIBE: %s", r ? "refused" : syncconn_error(sub));
            if (r) freeReplyObject(r);
        }
        snprintf(sid, sizeof(sid), "%lld", id);
        const char *on[] = {"CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", sid};
        if (ok) ok = feed_command(trk, 6, on, NULL, err, sizeof(err)) == 0;
        if (ok) {
            log_event(LOG_INFO, "tracking_feed", NULL, "tracking feed of '%s' up", fd->conf.name);
            logged = 0;
            feed_session(fd, sub, trk);
        } else if (!logged && !stopping(fd)) {
            log_event(LOG_WARN, "tracking_feed_failed", NULL, "tracking feed of '%s' cannot start: %s", fd->conf.name,
                      err);
            logged = 1;
        }
        if (sub) syncconn_close(sub);
        if (trk) syncconn_close(trk);
        for (int slept = 0; slept < FEED_RETRY_MS && !stopping(fd); slept += 20) {
            struct timespec ts = {0, 20 * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

struct trackfeed *trackfeed_start(const struct config *cfg, struct proxy *p)
{
    struct trackfeed *f = xcalloc(1, sizeof(*f));
    f->proxy = p;
    f->stop = syncconn_stop_new();
    for (size_t i = 0; i < cfg->ninstances && (int)i < CONFIG_MAX_INSTANCES && i < 32; i++) {
        const struct instance_conf *ic = &cfg->instances[i];
        if (ic->cluster || ic->sentinel) continue; /* not done yet: BCAST per node, follow the primary */
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
