/* sentinelwatch.c: background threads per sentinel instance that find its primary through the sentinels, confirm it with ROLE and follow their failover events; the workers read what they found. */
#include "sentinelwatch.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sentinel.h"
#include "syncconn.h"

#define WATCH_CHECK_MS 1000      /* a confirmed primary is checked again this often */
#define WATCH_UNCONFIRMED_MS 100 /* an unconfirmed one this often */
#define WATCH_RECONNECT_MS 1000  /* a listener whose sentinel is unreachable tries again after this */
#define WATCH_LISTEN_IO_MS 30000 /* a listener's read waits this long for an event before it reconnects */

struct watch;

/* One sentinel's events, on a connection of its own. */
struct listener {
    struct watch *wt;
    int sentinel; /* its index in the instance's seed list */
    pthread_t thread;
    int started;
    struct syncconn_stop *stop; /* the current connection's, under state_lock: tripped at stop */
};

struct watch {
    struct sentinelwatch *sw;
    int instance;
    const struct instance_conf *ic;
    pthread_t thread; /* the checker */
    int started;      /* the checker runs */
    int failing;      /* the checker's last check failed (logged once) */
    long long epoch;  /* checker only: the config-epoch of the primary followed (-1 before the first) */
    struct listener listeners[CONFIG_MAX_SEEDS];
    /* under state_lock: */
    struct slotmap_node odown; /* the primary a +odown named, until a -odown or a switch (port 0: none) */
    int64_t failover_until;    /* monotonic ms: a failover started; the old primary is not confirmed before */
    uint64_t alarms;           /* +odown and failover starts seen so far: a check that began before one confirms
                                  nothing (what it asked may predate it) */
    int poked;                 /* check at once */
};

struct sentinelwatch {
    struct watch watches[CONFIG_MAX_INSTANCES];
    int n;
    int timeout_ms;
    int64_t hold_ms;
    struct syncconn_stop *halt; /* tripped by sentinelwatch_stop: the checkers' blocking calls return */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop; /* under lock */
};

/* ---- what the workers read, under state_lock ---- */

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sentinelwatch_state states[CONFIG_MAX_INSTANCES];
static struct watch *watch_of[CONFIG_MAX_INSTANCES]; /* the running watch of an instance */

/* states[i].generation, readable without state_lock (sentinelwatch_generation) */
static uint64_t generations[CONFIG_MAX_INSTANCES];

uint64_t sentinelwatch_generation(int instance)
{
    assert(instance >= 0 && instance < CONFIG_MAX_INSTANCES);
    return __atomic_load_n(&generations[instance], __ATOMIC_ACQUIRE);
}

int sentinelwatch_get(int instance, struct sentinelwatch_state *out)
{
    if (instance < 0 || instance >= CONFIG_MAX_INSTANCES) return -1;
    pthread_mutex_lock(&state_lock);
    int rc = watch_of[instance] ? 0 : -1;
    if (rc == 0) *out = states[instance];
    pthread_mutex_unlock(&state_lock);
    return rc;
}

/* Locks are taken in one order: a watcher's sw->lock, then state_lock (nap); never the other way. */
void sentinelwatch_poke(int instance)
{
    if (instance < 0 || instance >= CONFIG_MAX_INSTANCES) return;
    pthread_mutex_lock(&state_lock);
    struct sentinelwatch *sw = watch_of[instance] ? watch_of[instance]->sw : NULL;
    if (sw) watch_of[instance]->poked = 1;
    pthread_mutex_unlock(&state_lock);
    if (!sw) return; /* (a watcher is stopped only after the workers that poke it) */
    pthread_mutex_lock(&sw->lock);
    pthread_cond_broadcast(&sw->wake);
    pthread_mutex_unlock(&sw->lock);
}

static int same_node(const struct slotmap_node *a, const struct slotmap_node *b)
{
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* Publish wt's primary: p (NULL: the one it has) and whether it is confirmed; log a change.
 * state_lock is not held. */
static void publish(struct watch *wt, const struct slotmap_node *p, int confirmed, const char *why)
{
    struct sentinelwatch_state *st = &states[wt->instance];
    pthread_mutex_lock(&state_lock);
    struct slotmap_node was = st->primary;
    int moved = p && !same_node(&st->primary, p), unconfirmed = st->confirmed && !confirmed;
    int reconfirmed = !st->confirmed && confirmed;
    if (moved) {
        st->primary = *p;
        if (was.host[0]) st->switches++;
    }
    if (moved || st->confirmed != confirmed) {
        st->confirmed = confirmed;
        st->generation++;
        __atomic_store_n(&generations[wt->instance], st->generation, __ATOMIC_RELEASE);
    }
    struct slotmap_node now = st->primary;
    pthread_mutex_unlock(&state_lock);
    const char *name = wt->ic->name;
    struct log_fields f = {.instance = name, .backend_host = now.host, .backend_port = now.port};
    if (moved && was.host[0])
        log_event(LOG_WARN, "sentinel_switch", &f, "instance '%s': the primary is now %s:%d (was %s:%d): %s", name,
                  now.host, now.port, was.host, was.port, why);
    else if (moved)
        log_event(LOG_INFO, "sentinel_primary", &f, "instance '%s': the primary is %s:%d: %s", name, now.host, now.port,
                  why);
    if (!moved && unconfirmed)
        log_event(LOG_WARN, "sentinel_unconfirmed", &f,
                  "instance '%s': the primary %s:%d is not confirmed (%s): its requests wait (failover-hold)", name,
                  now.host, now.port, why);
    else if (!moved && reconfirmed)
        log_event(LOG_INFO, "sentinel_confirmed", &f, "instance '%s': the primary %s:%d is confirmed: %s", name,
                  now.host, now.port, why);
}

static int stopping(struct sentinelwatch *sw)
{
    pthread_mutex_lock(&sw->lock);
    int s = sw->stop;
    pthread_mutex_unlock(&sw->lock);
    return s;
}

/* Sleep ms, or less when stopped or (wt's checker, poke != 0) poked. */
static void nap(struct watch *wt, int ms, int poke)
{
    struct sentinelwatch *sw = wt->sw;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&sw->lock);
    int rc = 0;
    while (!sw->stop && rc != ETIMEDOUT) {
        pthread_mutex_lock(&state_lock);
        int p = poke && wt->poked;
        pthread_mutex_unlock(&state_lock);
        if (p) break;
        rc = pthread_cond_timedwait(&sw->wake, &sw->lock, &until);
    }
    pthread_mutex_unlock(&sw->lock);
}

/* ---- the checker ---- */

int sentinelwatch_hold_short(long long hold_ms, long long down_after_ms)
{
    return down_after_ms >= 0 && hold_ms < down_after_ms + SENTINELWATCH_ELECTION_MS;
}

/* The sentinels' timing from the answer followed: published, and a failover-hold too short to
 * cover an unplanned failover logged once per change. */
static void timing(struct watch *wt, const struct sentinel_master *m)
{
    int shorter = sentinelwatch_hold_short(wt->sw->hold_ms, m->down_after_ms);
    pthread_mutex_lock(&state_lock);
    struct sentinelwatch_state *st = &states[wt->instance];
    int changed = st->down_after_ms != m->down_after_ms || st->failover_timeout_ms != m->failover_timeout_ms;
    st->down_after_ms = m->down_after_ms;
    st->failover_timeout_ms = m->failover_timeout_ms;
    st->hold_short = shorter;
    pthread_mutex_unlock(&state_lock);
    if (changed && shorter)
        log_event(LOG_WARN, "sentinel_hold_short", &(struct log_fields){.instance = wt->ic->name},
                  "instance '%s': failover-hold %lld ms cannot cover an unplanned failover: the sentinels see a dead "
                  "primary after down-after-milliseconds %lld, then elect and promote (failover-timeout %lld at "
                  "most); requests held longer fail -UNAVAILABLE. Set failover-hold to at least %lld ms",
                  wt->ic->name, (long long)wt->sw->hold_ms, m->down_after_ms, m->failover_timeout_ms,
                  m->down_after_ms + SENTINELWATCH_ELECTION_MS);
}

/* Ask the sentinels for the primary; publish what they say. Returns 1 when it is confirmed. */
static int check(struct watch *wt)
{
    struct sentinelwatch_state now;
    pthread_mutex_lock(&state_lock);
    wt->poked = 0;
    now = states[wt->instance];
    struct slotmap_node skip = wt->odown; /* a primary under +odown, or an old one during a failover */
    if (!skip.port && wt->failover_until > clock_mono_ms()) skip = now.primary;
    uint64_t alarms = wt->alarms;
    pthread_mutex_unlock(&state_lock);
    struct slotmap_node p = now.primary;
    long long epoch = wt->epoch;
    int asked = 0;
    char err[1024];
    struct sentinel_master m;
    int rc = syncconn_sentinel_primary(wt->ic, wt->sw->timeout_ms, wt->sw->halt, skip.port ? &skip : NULL, &epoch, &p,
                                       &asked, &m, err, sizeof(err));
    if (rc == 0) {
        wt->epoch = epoch; /* never followed back below it (a sentinel that is behind) */
        timing(wt, &m);
        char why[128];
        snprintf(why, sizeof(why), "named by sentinel %s:%d at config-epoch %lld, ROLE master",
                 wt->ic->seed_host[asked], wt->ic->seed_port[asked], epoch);
        wt->failing = 0;
        pthread_mutex_lock(&state_lock);
        /* a +odown or a failover start came while the sentinels were asked: their answer (and the
         * node's ROLE) may predate it; ask again, with it in the skip */
        int raced = wt->alarms != alarms;
        if (!raced && !same_node(&p, &now.primary)) wt->failover_until = 0; /* a new primary: that failover is over */
        pthread_mutex_unlock(&state_lock);
        if (raced) return 0;
        publish(wt, &p, 1, why);
        return 1;
    }
    if (!wt->failing && !stopping(wt->sw))
        log_event(LOG_WARN, "sentinel_check_failed", &(struct log_fields){.instance = wt->ic->name},
                  "instance '%s': %s%s", wt->ic->name, err,
                  rc == -1 ? " (no sentinel answers: keygate keeps the primary it has)" : "");
    wt->failing = 1;
    if (rc == -2) publish(wt, NULL, 0, err); /* a sentinel answered: its primary is not confirmed */
    return rc == -1 && now.confirmed;
}

static void *checker_run(void *arg)
{
    struct watch *wt = arg;
    while (!stopping(wt->sw)) {
        int confirmed = check(wt);
        nap(wt, confirmed ? WATCH_CHECK_MS : WATCH_UNCONFIRMED_MS, 1);
    }
    return NULL;
}

/* ---- the listeners ---- */

#define WORD_IS(s, n, w) ((n) == sizeof(w) - 1 && memcmp((s), (w), sizeof(w) - 1) == 0)

/* A message of a sentinel's event channels. Events about another master are ignored. */
static void on_event(struct watch *wt, const char *channel, size_t clen, const char *payload, size_t plen)
{
    const char *name = wt->ic->master_name;
    if (WORD_IS(channel, clen, "+switch-master")) {
        struct sentinel_switch sw;
        if (sentinel_parse_switch_master(payload, plen, &sw) != 0 || strcmp(sw.name, name) != 0) return;
        struct slotmap_node to = {.port = sw.to.port};
        snprintf(to.host, sizeof(to.host), "%s", sw.to.host);
        pthread_mutex_lock(&state_lock);
        memset(&wt->odown, 0, sizeof(wt->odown));
        wt->failover_until = 0;
        /* every sentinel announces the switch: the ones after the first find it confirmed already */
        int known = states[wt->instance].confirmed && same_node(&states[wt->instance].primary, &to);
        pthread_mutex_unlock(&state_lock);
        if (known) return;
        publish(wt, &to, 0, "+switch-master"); /* confirmed once ROLE says so */
        sentinelwatch_poke(wt->instance);
        return;
    }
    struct sentinel_event ev; /* about the master itself, or one of its replicas (the one being promoted) */
    if (sentinel_parse_event(payload, plen, &ev) != 0 ||
        strcmp(ev.kind == SENTINEL_ROLE_PRIMARY ? ev.name : ev.master_name, name) != 0)
        return;
    int starts =
        WORD_IS(channel, clen, "+try-failover") || WORD_IS(channel, clen, "+failover-state-send-slaveof-noone");
    int odown = WORD_IS(channel, clen, "+odown");
    pthread_mutex_lock(&state_lock);
    if (starts || odown) wt->alarms++;
    if (starts) wt->failover_until = clock_mono_ms() + wt->sw->hold_ms;
    if (odown && ev.kind == SENTINEL_ROLE_PRIMARY) {
        wt->odown.port = ev.addr.port;
        snprintf(wt->odown.host, sizeof(wt->odown.host), "%s", ev.addr.host);
    }
    if (WORD_IS(channel, clen, "-odown")) memset(&wt->odown, 0, sizeof(wt->odown));
    /* an abort ends that sentinel's attempt; "not elected" says another sentinel leads it (their
     * attempts race at every failover): the failover goes on, the old primary stays skipped */
    if (clen > 15 && memcmp(channel, "-failover-abort", 15) == 0 &&
        !WORD_IS(channel, clen, "-failover-abort-not-elected"))
        wt->failover_until = 0;
    pthread_mutex_unlock(&state_lock);
    if (starts || odown) publish(wt, NULL, 0, starts ? "a failover starts" : "+odown");
    sentinelwatch_poke(wt->instance);
}

static void *listener_run(void *arg)
{
    struct listener *l = arg;
    struct watch *wt = l->wt;
    while (!stopping(wt->sw)) {
        struct syncconn_stop *st = syncconn_stop_new();
        pthread_mutex_lock(&state_lock);
        l->stop = st;
        pthread_mutex_unlock(&state_lock);
        char err[300];
        struct syncconn *c = stopping(wt->sw) ? NULL
                                              : syncconn_open_sentinel(wt->ic, l->sentinel, wt->sw->timeout_ms,
                                                                       WATCH_LISTEN_IO_MS, st, err, sizeof(err));
        if (c) {
            const char *argv[] = {"PSUBSCRIBE",       "+switch-master", "+odown",
                                  "-odown",           "+try-failover",  "+failover-state-send-slaveof-noone",
                                  "-failover-abort*", "+failover-end"};
            size_t argvlen[8];
            for (int k = 0; k < 8; k++) argvlen[k] = strlen(argv[k]);
            int ok = syncconn_append(c, 8, argv, argvlen) == 0 && syncconn_flush(c) == 0;
            struct bytebuf b = {0};
            while (ok) {
                redisReply *r = syncconn_read(c);
                if (!r) break;
                b.len = 0;
                syncconn_reply_encode(r, &b);
                freeReplyObject(r);
                const char *channel, *payload;
                size_t clen, plen;
                if (sentinel_parse_message(b.p, b.len, &channel, &clen, &payload, &plen))
                    on_event(wt, channel, clen, payload, plen);
            }
            bytebuf_free(&b);
            syncconn_close(c);
        }
        pthread_mutex_lock(&state_lock);
        l->stop = NULL;
        pthread_mutex_unlock(&state_lock);
        syncconn_stop_free(st);
        if (!stopping(wt->sw)) nap(wt, WATCH_RECONNECT_MS, 0);
    }
    return NULL;
}

/* ---- start and stop ---- */

struct sentinelwatch *sentinelwatch_start(const struct config *cfg)
{
    int any = 0;
    for (size_t i = 0; i < cfg->ninstances; i++) any |= cfg->instances[i].sentinel;
    if (!any) return NULL;
    struct sentinelwatch *sw = xcalloc(1, sizeof(*sw));
    pthread_mutex_init(&sw->lock, NULL);
    pthread_cond_init(&sw->wake, NULL);
    sw->halt = syncconn_stop_new();
    sw->timeout_ms = cfg->connect_timeout_ms > 0 ? (int)cfg->connect_timeout_ms : 2000;
    sw->hold_ms = cfg->failover_hold_ms > 0 ? cfg->failover_hold_ms : 5000;
    for (size_t i = 0; i < cfg->ninstances; i++) {
        if (!cfg->instances[i].sentinel) continue;
        struct watch *wt = &sw->watches[sw->n++];
        wt->sw = sw;
        wt->instance = (int)i;
        wt->ic = &cfg->instances[i];
        wt->epoch = -1;
        pthread_mutex_lock(&state_lock);
        watch_of[i] = wt;
        memset(&states[i], 0, sizeof(states[i]));
        states[i].down_after_ms = states[i].failover_timeout_ms = -1;
        pthread_mutex_unlock(&state_lock);
        wt->started = pthread_create(&wt->thread, NULL, checker_run, wt) == 0;
        int all = wt->started;
        for (int k = 0; k < wt->ic->nseeds; k++) {
            struct listener *l = &wt->listeners[k];
            l->wt = wt;
            l->sentinel = k;
            l->started = pthread_create(&l->thread, NULL, listener_run, l) == 0;
            all &= l->started;
        }
        if (!all)
            log_event(LOG_ERROR, "sentinel_thread_failed", &(struct log_fields){.instance = wt->ic->name},
                      "instance '%s': cannot start its sentinel threads: %s", wt->ic->name, strerror(errno));
    }
    return sw;
}

void sentinelwatch_stop(struct sentinelwatch *sw)
{
    if (!sw) return;
    pthread_mutex_lock(&sw->lock);
    sw->stop = 1;
    pthread_cond_broadcast(&sw->wake);
    pthread_mutex_unlock(&sw->lock);
    syncconn_stop_trip(sw->halt);
    pthread_mutex_lock(&state_lock);
    for (int k = 0; k < sw->n; k++)
        for (int j = 0; j < sw->watches[k].ic->nseeds; j++)
            if (sw->watches[k].listeners[j].stop) syncconn_stop_trip(sw->watches[k].listeners[j].stop);
    pthread_mutex_unlock(&state_lock);
    for (int k = 0; k < sw->n; k++) {
        struct watch *wt = &sw->watches[k];
        for (int j = 0; j < wt->ic->nseeds; j++)
            if (wt->listeners[j].started) pthread_join(wt->listeners[j].thread, NULL);
        if (wt->started) pthread_join(wt->thread, NULL);
    }
    pthread_mutex_lock(&state_lock);
    for (int k = 0; k < sw->n; k++) watch_of[sw->watches[k].instance] = NULL;
    pthread_mutex_unlock(&state_lock);
    syncconn_stop_free(sw->halt);
    pthread_cond_destroy(&sw->wake);
    pthread_mutex_destroy(&sw->lock);
    free(sw);
}
