/* authgate.c: AUTH throttling on client connections: an AUTH waits its source address's turn, a failed one's reply waits its delay, a connection goes after a few failures. */
#include "authgate.h"

#include "args.h"
#include "authfail.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct authgate {
    pthread_mutex_t lock; /* every worker's AUTH attempts; nothing else takes it */
    struct authfail table;
};

/* A client's part, made when its first AUTH waits or fails. */
struct authgate_client {
    struct event *timer;  /* on c's worker: the turn may have come, or the held reply may go */
    struct request *held; /* a failed AUTH whose reply waits; NULL: c waits for its address's turn */
    const char *text;     /* held's error */
    struct authfail_key key;
    unsigned failures; /* failed attempts on this connection */
};

struct authgate *authgate_new(void)
{
    struct authgate *g = xcalloc(1, sizeof(*g));
    pthread_mutex_init(&g->lock, NULL);
    authfail_init(&g->table);
    return g;
}

void authgate_free(struct authgate *g)
{
    if (!g) return;
    pthread_mutex_destroy(&g->lock);
    free(g);
}

int authgate_is_attempt(const struct plan *plan, size_t argc, const char *const *argv, const size_t *argvlen)
{
    if (plan->kind != PLAN_LOCAL) return 0;
    if (plan->local == LOCAL_AUTH) return 1;
    if (plan->local != LOCAL_HELLO) return 0;
    for (size_t i = 2; i < argc; i += 2) { /* HELLO ver [AUTH user pass] [SETNAME name] ...: SETNAME skipped */
        size_t more = argc - 1 - i;
        if (args_word_is(argv[i], argvlen[i], "AUTH") && more >= 2) return 1;
        if (!args_word_is(argv[i], argvlen[i], "SETNAME") || more < 1) return 0; /* a syntax error */
    }
    return 0;
}

/* Where c's attempts count: its address, or for a unix-socket client its peer's uid. */
static struct authfail_key client_key(const struct client *c)
{
    if (c->auth_gate) return c->auth_gate->key;
    long uid = -1;
    if (strcmp(c->addr, "unix") == 0) {
        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) uid = (long)cred.uid;
    }
    return authfail_key_of(c->addr, uid);
}

static void authgate_timer_cb(evutil_socket_t fd, short what, void *arg);

static struct authgate_client *client_gate(struct client *c)
{
    if (!c->auth_gate) {
        struct authgate_client *a = xcalloc(1, sizeof(*a));
        a->key = client_key(c);
        a->timer = xevtimer_new(c->worker->base, authgate_timer_cb, c);
        c->auth_gate = a;
    }
    return c->auth_gate;
}

/* Nothing more of c is parsed until its timer fires, ms from now. */
static void client_hold(struct client *c, int64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    assert(!c->auth_held && ms > 0); /* nothing of a held client is parsed: no second hold */
    c->auth_held = 1;
    evtimer_add(client_gate(c)->timer, &tv);
}

static void authgate_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;
    struct authgate_client *a = c->auth_gate;
    (void)fd;
    (void)what;
    if (c->closed) return; /* its reap frees the timer */
    c->auth_held = 0;
    struct request *req = a->held;
    if (req) {
        a->held = NULL;
        if (authfail_should_close(a->failures)) c->closing = 1; /* closed once this reply is written */
        request_error(req, a->text);
    }
    conn_wake(c); /* the client's service resumes its reading and parsing */
}

int authgate_wait(struct client *c)
{
    if (c->worker->cfg->nusers == 0) return 0; /* AUTH only answers that no password is set */
    struct authgate *g = c->worker->proxy->authgate;
    struct authfail_key k = client_key(c);
    int64_t now = clock_mono_ms();
    pthread_mutex_lock(&g->lock);
    int64_t wait = authfail_admit(&g->table, &k, now);
    pthread_mutex_unlock(&g->lock);
    if (wait == 0) return 0;
    client_hold(c, wait);
    return 1;
}

void authgate_passed(struct client *c)
{
    struct authgate *g = c->worker->proxy->authgate;
    struct authfail_key k = client_key(c);
    int64_t now = clock_mono_ms();
    pthread_mutex_lock(&g->lock);
    authfail_passed(&g->table, &k, now);
    pthread_mutex_unlock(&g->lock);
}

void authgate_failed(struct client *c, struct request *req, const char *text)
{
    struct authgate *g = c->worker->proxy->authgate;
    struct authgate_client *a = client_gate(c);
    int64_t now = clock_mono_ms();
    pthread_mutex_lock(&g->lock);
    struct authfail_verdict v = authfail_failed(&g->table, &a->key, now);
    pthread_mutex_unlock(&g->lock);
    STAT_INC(&c->worker->stats, auth_failures);
    a->failures++;
    if (v.log) {
        char label[AUTHFAIL_LABEL_MAX];
        authfail_key_format(&a->key, label, sizeof(label));
        log_event(LOG_WARN, "auth_throttle", &(struct log_fields){.client = c->addr, .client_id = c->id},
                  "%llu failed AUTH from %s (the last by client %llu %s): its AUTH attempts now take turns, "
                  "each failure's reply delayed (%lld ms now, up to %d ms), a connection closed after %d "
                  "failures; logged once until %s is forgotten (one failure per %d s)",
                  (unsigned long long)v.episode, label, (unsigned long long)c->id, c->addr, (long long)v.delay_ms,
                  AUTHFAIL_DELAY_MAX_MS, AUTHFAIL_CLOSE_AFTER, label, AUTHFAIL_FORGET_MS / 1000);
    }
    assert(!a->held);
    a->held = req;
    a->text = text;
    client_hold(c, v.delay_ms);
}

void authgate_client_free(struct client *c)
{
    struct authgate_client *a = c->auth_gate;
    if (!a) return;
    event_free(a->timer);
    free(a);
    c->auth_gate = NULL;
}
