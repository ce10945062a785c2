/* userlimit.c: per-user connection counts and request-rate buckets shared by the worker threads (max-clients=, rate=). */
#include "userlimit.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_S 1000000000ull
#define NS_PER_MS 1000000ull

int userlimit_burst(int rate)
{
    return rate >= 10 ? rate / 10 : 1;
}

int userlimit_want(int rate)
{
    int want = rate / 100, burst = userlimit_burst(rate);
    if (want < 1) want = 1;
    return want > burst ? burst : want;
}

uint64_t userlimit_decide(uint64_t tat, uint64_t now, int rate, uint64_t *next)
{
    uint64_t step = NS_PER_S / (uint64_t)rate;                         /* one request's share of a second */
    uint64_t tolerance = (uint64_t)(userlimit_burst(rate) - 1) * step; /* how far ahead the bucket may run */
    uint64_t at = tat > now ? tat : now; /* an idle bucket refills up to full, no further */
    if (at - now <= tolerance) {
        *next = at + step;
        return 0;
    }
    *next = tat;
    /* userlimit_want(rate) requests pass once at + (want - 1) * step - tolerance is reached */
    return at + (uint64_t)(userlimit_want(rate) - 1) * step - tolerance - now;
}

void userlimit_init(struct userlimit_table *t)
{
    pthread_mutex_init(&t->lock, NULL);
    t->head = NULL;
}

void userlimit_free(struct userlimit_table *t)
{
    struct userlimit *u, *next;
    for (u = t->head; u; u = next) {
        next = u->next;
        pthread_mutex_destroy(&u->lock);
        free(u->name);
        free(u);
    }
    t->head = NULL;
    pthread_mutex_destroy(&t->lock);
}

struct userlimit *userlimit_find(struct userlimit_table *t, const char *name)
{
    pthread_mutex_lock(&t->lock);
    struct userlimit *u = t->head;
    while (u && strcmp(u->name, name) != 0) u = u->next;
    pthread_mutex_unlock(&t->lock);
    return u;
}

struct userlimit *userlimit_get(struct userlimit_table *t, const char *name)
{
    pthread_mutex_lock(&t->lock);
    struct userlimit *u = t->head;
    while (u && strcmp(u->name, name) != 0) u = u->next;
    if (!u) {
        u = xcalloc(1, sizeof(*u));
        u->name = xstrdup(name);
        pthread_mutex_init(&u->lock, NULL);
        u->next = t->head;
        t->head = u;
    }
    pthread_mutex_unlock(&t->lock);
    return u;
}

int userlimit_login(struct userlimit *u, int max)
{
    int now = __atomic_add_fetch(&u->clients, 1, __ATOMIC_RELAXED);
    if (max <= 0 || now <= max) {
        if (__atomic_load_n(&u->full, __ATOMIC_RELAXED)) __atomic_store_n(&u->full, 0, __ATOMIC_RELAXED);
        return 0;
    }
    __atomic_sub_fetch(&u->clients, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&u->refused, 1, __ATOMIC_RELAXED);
    if (!__atomic_exchange_n(&u->full, 1, __ATOMIC_RELAXED))
        log_event(LOG_WARN, "user_max_clients", NULL,
                  "user '%s' has max-clients=%d connections: its next AUTHs are refused (max number of clients "
                  "reached) until one closes",
                  u->name, max);
    return -1;
}

void userlimit_logout(struct userlimit *u)
{
    int left = __atomic_sub_fetch(&u->clients, 1, __ATOMIC_RELAXED);
    assert(left >= 0); /* one logout for each login */
    (void)left;
}

/* A request of u was held until now + wait: start an episode, or extend the current one. */
static void userlimit_note_hold(struct userlimit *u, int rate, uint64_t now, uint64_t wait)
{
    pthread_mutex_lock(&u->lock);
    int started = u->since_ns == 0;
    if (started) {
        u->since_ns = now;
        u->episode_held = 0;
        u->episodes++;
    }
    u->episode_held++;
    if (now + wait > u->until_ns) u->until_ns = now + wait;
    pthread_mutex_unlock(&u->lock);
    if (started)
        log_event(LOG_INFO, "user_throttled", NULL,
                  "user '%s' is over rate=%d requests a second: its connections are read more slowly", u->name, rate);
}

uint64_t userlimit_take(struct userlimit *u, int rate, uint64_t now)
{
    if (rate <= 0) {
        __atomic_add_fetch(&u->requests, 1, __ATOMIC_RELAXED);
        return 0;
    }
    uint64_t tat = __atomic_load_n(&u->tat, __ATOMIC_RELAXED), next, wait;
    for (;;) {
        wait = userlimit_decide(tat, now, rate, &next);
        if (wait) break;
        if (__atomic_compare_exchange_n(&u->tat, &tat, next, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) break;
    }
    if (wait) {
        __atomic_add_fetch(&u->held, 1, __ATOMIC_RELAXED);
        userlimit_note_hold(u, rate, now, wait);
        return wait;
    }
    __atomic_add_fetch(&u->requests, 1, __ATOMIC_RELAXED);
    return 0;
}

void userlimit_count(struct userlimit *u, uint64_t n)
{
    __atomic_add_fetch(&u->requests, n, __ATOMIC_RELAXED);
}

void userlimit_tick(struct userlimit_table *t, uint64_t now)
{
    pthread_mutex_lock(&t->lock);
    for (struct userlimit *u = t->head; u; u = u->next) {
        pthread_mutex_lock(&u->lock);
        int ends = u->since_ns && now > u->until_ns && now - u->until_ns >= USERLIMIT_EPISODE_GAP_MS * NS_PER_MS;
        uint64_t took = 0, held = 0;
        if (ends) {
            took = u->until_ns - u->since_ns;
            held = u->episode_held;
            u->throttled_ns += took;
            u->since_ns = u->until_ns = 0;
            u->episode_held = 0;
        }
        pthread_mutex_unlock(&u->lock);
        if (ends)
            log_event(LOG_INFO, "user_throttle_ended", NULL,
                      "user '%s' is back under its rate: throttled for %.3f s, its connections held %llu times",
                      u->name, (double)took / NS_PER_S, (unsigned long long)held);
    }
    pthread_mutex_unlock(&t->lock);
}

void userlimit_read(struct userlimit *u, uint64_t now, struct userlimit_view *v)
{
    memset(v, 0, sizeof(*v));
    if (!u) return;
    v->clients = __atomic_load_n(&u->clients, __ATOMIC_RELAXED);
    v->requests = __atomic_load_n(&u->requests, __ATOMIC_RELAXED);
    v->held = __atomic_load_n(&u->held, __ATOMIC_RELAXED);
    v->refused = __atomic_load_n(&u->refused, __ATOMIC_RELAXED);
    pthread_mutex_lock(&u->lock);
    v->episodes = u->episodes;
    v->throttled_ns = u->throttled_ns;
    v->throttled = u->since_ns != 0;
    if (u->since_ns) v->throttled_ns += (now < u->until_ns ? now : u->until_ns) - u->since_ns;
    pthread_mutex_unlock(&u->lock);
}
