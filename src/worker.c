/* worker.c: one event loop per thread: listeners (SO_REUSEPORT), clients, backend pools, control. */
#include "worker.h"

#include "access.h"
#include "backend.h"
#include "nodes.h"
#include "client.h"
#include "request.h"
#include "replcommit.h"
#include "router.h"
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/thread.h>

/* What a listener hands to its accept callback. */
struct listen_ctx {
    struct worker *worker;
    SSL_CTX *tls;
};

/*
 * Out of file descriptors. accept() failing with EMFILE/ENFILE leaves the connection in
 * the kernel's backlog, so the listener stays readable and libevent would call us again at
 * once, for ever (a full core). Instead every listener of the worker is disabled and a
 * timer re-enables them after ACCEPT_RETRY_FIRST_MS, doubling to ACCEPT_RETRY_MAX_MS while
 * accept still fails; the clients already connected are served meanwhile. One episode,
 * from the first failure to an accept batch that ends without one, logs one WARN line and
 * one "accepting again" line, and counts once in accept_paused.
 *
 *   accept fails EMFILE --> listeners off, retry timer (100 ms, 200, ... 1 s)
 *        ^                          |
 *        |                          v
 *        +---- fails again <-- listeners on --> accepts; the batch ends without EMFILE
 *                                                 (settle event) --> "accepting again"
 */
#define ACCEPT_RETRY_FIRST_MS 100
#define ACCEPT_RETRY_MAX_MS 1000

struct accept_pause {
    struct event *retry;  /* re-enables the listeners */
    struct event *settle; /* runs after an accept batch that accepted during an episode */
    int64_t since_ms;     /* the episode's first failure (0: accepting normally) */
    int delay_ms;         /* the delay of the next retry */
    int accepted;         /* accepted since the last failure of this episode */
};

static void worker_listeners_set(struct worker *w, int enable)
{
    for (size_t i = 0; i < w->nlisteners; i++) {
        if (enable)
            evconnlistener_enable(w->listeners[i]);
        else
            evconnlistener_disable(w->listeners[i]);
    }
}

/* accept() failed with err (EMFILE/ENFILE): stop accepting and retry on the timer. */
static void worker_accept_pause(struct worker *w, int err)
{
    struct accept_pause *ap = w->accept_pause;
    worker_listeners_set(w, 0);
    if (evtimer_pending(ap->retry, NULL)) return; /* another listener of w, same iteration */
    if (ap->since_ms == 0) {
        ap->since_ms = clock_wall_ms();
        ap->delay_ms = ACCEPT_RETRY_FIRST_MS;
        STAT_INC(&w->stats, accept_paused);
        log_event(LOG_WARN, "accept_paused", NULL,
                  "out of file descriptors: accepting paused (%s); retrying after %d ms, doubling up to %d ms",
                  strerror(err), ACCEPT_RETRY_FIRST_MS, ACCEPT_RETRY_MAX_MS);
    } else if (ap->accepted) {
        ap->delay_ms = ACCEPT_RETRY_FIRST_MS; /* some fds came back: retry soon */
    } else {
        ap->delay_ms = ap->delay_ms * 2 > ACCEPT_RETRY_MAX_MS ? ACCEPT_RETRY_MAX_MS : ap->delay_ms * 2;
    }
    ap->accepted = 0;
    struct timeval tv = {ap->delay_ms / 1000, (ap->delay_ms % 1000) * 1000};
    evtimer_add(ap->retry, &tv);
}

static void accept_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    (void)fd;
    (void)what;
    if (!w->stopping) worker_listeners_set(w, 1);
}

/* After a batch of accepts in an episode: if no EMFILE followed them, the episode is over. */
static void accept_settle_cb(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    struct accept_pause *ap = w->accept_pause;
    (void)fd;
    (void)what;
    if (ap->since_ms == 0 || !ap->accepted || evtimer_pending(ap->retry, NULL)) return;
    log_event(LOG_INFO, "accept_resumed", NULL, "accepting again after %lld ms out of file descriptors",
              (long long)(clock_wall_ms() - ap->since_ms));
    ap->since_ms = 0;
    ap->accepted = 0;
    ap->delay_ms = ACCEPT_RETRY_FIRST_MS;
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
    struct listen_ctx *lc = arg;
    struct worker *w = lc->worker;
    (void)l;
    if (w->stopping) {
        close(fd);
        return;
    }
    struct accept_pause *ap = w->accept_pause;
    if (ap->since_ms != 0 && !ap->accepted) {
        ap->accepted = 1;
        event_active(ap->settle, EV_TIMEOUT, 0); /* runs once libevent's accept loop has returned */
    }
    client_accept(w, fd, sa, salen, lc->tls);
}

/* libevent calls this for accept errors other than EAGAIN, EINTR and ECONNABORTED. */
static void accept_error_cb(struct evconnlistener *l, void *arg)
{
    struct listen_ctx *lc = arg;
    int err = EVUTIL_SOCKET_ERROR();
    (void)l;
    if (err == EMFILE || err == ENFILE) {
        worker_accept_pause(lc->worker, err);
        return;
    }
    log_event(LOG_WARN, "accept_failed", NULL, "accept failed: %s", evutil_socket_error_to_string(err));
}

/*
 * The flush step, once per loop iteration in which something was staged or woken: the
 * backends write (in arrival order), the clients postponed behind them parse again, the
 * woken clients are serviced, the counted runs are added up, and the plain clients' replies
 * are written (a TLS client's bufferevent writes at its EV_WRITE, after this step).
 */
static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    backend_flush_all(arg);
    client_wake_postponed(arg);
    client_service_woken(arg);
    struct worker *w = arg;
    stats_flush(&w->stats); /* this iteration's runs are in /metrics before a client reads their replies */
    client_write_all(w);
}

static void reap_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    client_reap(arg); /* may close dedicated connections: before backend_reap */
    backend_reap(arg);
}

/* Bind one listen entry for worker w; unix sockets only on worker 0. */
static int worker_listen(struct worker *w, const struct listen_addr *la, SSL_CTX *tls)
{
    struct listen_ctx *lc = xcalloc(1, sizeof(*lc));
    lc->worker = w;
    lc->tls = tls;
    struct evconnlistener *l = NULL;
    if (la->unix_path) {
        struct sockaddr_un sun;
        memset(&sun, 0, sizeof(sun));
        sun.sun_family = AF_UNIX;
        if (strlen(la->unix_path) >= sizeof(sun.sun_path)) {
            free(lc);
            log_event(LOG_ERROR, "listen_failed", NULL, "unix socket path too long: %s", la->unix_path);
            return -1;
        }
        strcpy(sun.sun_path, la->unix_path);
        unlink(la->unix_path);
        /* created with its final mode (no moment where the default umask lets others
         * connect); umask is process-wide, fine here: workers are set up before any thread */
        mode_t old_umask = umask((mode_t)(~la->unix_mode & 0777));
        l = evconnlistener_new_bind(w->base, accept_cb, lc, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 511,
                                    (struct sockaddr *)&sun, sizeof(sun));
        umask(old_umask);
        if (l && chmod(la->unix_path, (mode_t)la->unix_mode) != 0)
            log_event(LOG_WARN, "listen_chmod_failed", NULL, "chmod %s: %s", la->unix_path, strerror(errno));
    } else {
        struct sockaddr_storage ss;
        int sslen = sizeof(ss);
        char addr[300];
        snprintf(addr, sizeof(addr), strchr(la->host, ':') ? "[%s]:%d" : "%s:%d", la->host, la->port);
        if (evutil_parse_sockaddr_port(addr, (struct sockaddr *)&ss, &sslen) != 0) {
            free(lc);
            log_event(LOG_ERROR, "listen_failed", NULL, "listen %s: not a numeric address", addr);
            return -1;
        }
        l = evconnlistener_new_bind(w->base, accept_cb, lc,
                                    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT |
                                        LEV_OPT_CLOSE_ON_EXEC,
                                    511, (struct sockaddr *)&ss, sslen);
    }
    if (!l) {
        if (la->unix_path)
            log_event(LOG_ERROR, "listen_failed", NULL, "cannot listen on unix socket %s: %s", la->unix_path,
                      strerror(errno));
        else
            log_event(LOG_ERROR, "listen_failed", NULL, "cannot listen on %s:%d: %s", la->host, la->port,
                      strerror(errno));
        free(lc);
        return -1;
    }
    evconnlistener_set_error_cb(l, accept_error_cb);
    w->listen_ctxs[w->nlisten_ctxs++] = lc;
    w->listeners[w->nlisteners++] = l;
    return 0;
}

static void worker_close_listeners(struct worker *w)
{
    for (size_t i = 0; i < w->nlisteners; i++) evconnlistener_free(w->listeners[i]);
    w->nlisteners = 0;
    if (w->accept_pause) evtimer_del(w->accept_pause->retry);
}

/* While stopping: exit once no client waits for a backend reply or has reply bytes unwritten,
 * or at the deadline. */
static void drain_cb(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    (void)fd;
    (void)what;
    int busy = 0;
    struct client *c;
    TAILQ_FOREACH(c, &w->clients, link) {
        /* a client held by authgate (a failed AUTH's delayed reply, an AUTH waiting its
         * address's turn) is not waited for: its delay may outlast shutdown-timeout, and a
         * client that closed while held is only seen gone once it is read again */
        if (!TAILQ_EMPTY(&c->queue) && !c->auth_held) busy = 1;
        /* a reply completed in this loop iteration is written by the flush step, after this */
        if (!c->closed && conn_out_pending(c) > 0) busy = 1;
    }
    static const int step_ms = 20;
    w->drain_left_ms -= step_ms;
    if (busy && w->drain_left_ms > 0) {
        struct timeval tv = {0, step_ms * 1000};
        evtimer_add(w->drain_timer, &tv);
        return;
    }
    while ((c = TAILQ_FIRST(&w->clients))) conn_close(c, "shutting down");
    client_reap(w);
    event_base_loopbreak(w->base);
}

static void control_cb(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    (void)what;
    char drain[64];
    while (read(fd, drain, sizeof(drain)) > 0) {
    }
    const struct config *next = __atomic_exchange_n(&w->next_cfg, NULL, __ATOMIC_ACQ_REL);
    if (next) {
        struct client *c; /* sessions must not keep users of the config about to be freed */
        TAILQ_FOREACH(c, &w->clients, link) {
            access_session_rebind(&c->session, next);
            if (!c->session.user) conn_user_logout(c); /* its user is gone (or no users are left) */
            c->parser.unauthenticated = !c->session.authenticated;
        }
        report_reindex(w, w->cfg->registry, next->registry); /* issue 13: counters follow their namespaces */
        w->cfg = next;
        /* the last worker to take it: every worker now runs the new config (INFO server reloads:) */
        if (__atomic_sub_fetch(&w->proxy->reload_acks, 1, __ATOMIC_ACQ_REL) == 0)
            __atomic_add_fetch(&w->proxy->reloads, 1, __ATOMIC_RELEASE);
    }
    if (__atomic_load_n(&w->stop_requested, __ATOMIC_ACQUIRE) && !w->stopping) {
        w->stopping = 1;
        worker_close_listeners(w);
        w->drain_left_ms = (int)w->cfg->shutdown_timeout_ms;
        drain_cb(-1, 0, w);
    }
}

void worker_post(struct worker *w, const struct config *cfg, int stop)
{
    if (cfg) __atomic_store_n(&w->next_cfg, cfg, __ATOMIC_RELEASE);
    if (stop) __atomic_store_n(&w->stop_requested, 1, __ATOMIC_RELEASE);
    /* a byte on the worker's pipe wakes its loop: no lock is ever taken on the hot path */
    ssize_t n = write(w->control_pipe[1], STR_AND_LEN("x"));
    (void)n;
}

int worker_init(struct worker *w, struct proxy *p, int id, const struct config *cfg)
{
    memset(w, 0, sizeof(*w));
    w->id = id;
    w->proxy = p;
    w->cfg = cfg;
    TAILQ_INIT(&w->clients);
    TAILQ_INIT(&w->dead_backends);
    w->base = event_base_new();
    if (!w->base) return -1;
    if (pipe2(w->control_pipe, O_NONBLOCK | O_CLOEXEC) != 0) return -1;
    w->control_ev = xevent_new(w->base, w->control_pipe[0], EV_READ | EV_PERSIST, control_cb, w);
    event_add(w->control_ev, NULL);
    w->reap_ev = xevent_new(w->base, -1, 0, reap_cb, w);
    w->flush_ev = xevent_new(w->base, -1, 0, flush_cb, w);
    w->drain_timer = xevtimer_new(w->base, drain_cb, w);
    w->mem_timer = xevtimer_new(w->base, client_memory_tick, w);
    w->accept_pause = xcalloc(1, sizeof(*w->accept_pause));
    w->accept_pause->retry = xevtimer_new(w->base, accept_retry_cb, w);
    w->accept_pause->settle = xevent_new(w->base, -1, 0, accept_settle_cb, w);
    w->listeners = xcalloc(cfg->nlistens ? cfg->nlistens : 1, sizeof(*w->listeners));
    w->listen_ctxs = xcalloc(cfg->nlistens ? cfg->nlistens : 1, sizeof(void *));
    for (size_t i = 0; i < cfg->nlistens; i++) {
        const struct listen_addr *la = &cfg->listens[i];
        if (la->unix_path && id != 0) continue;
        if (worker_listen(w, la, p->listen_ssl[i]) != 0) return -1;
    }
    return nodes_start(w, router_hooks());
}

void *worker_run(void *arg)
{
    struct worker *w = arg;
    event_base_dispatch(w->base);
    return NULL;
}

void worker_free(struct worker *w)
{
    worker_close_listeners(w);
    struct client *c;
    while ((c = TAILQ_FIRST(&w->clients))) conn_close(c, "shutting down");
    client_reap(w);
    idmap_free(&w->clients_by_id);
    router_stop(w);
    nodes_free(w);
    replcommit_free(w);
    request_pool_free(w);
    stats_free(&w->stats);
    if (w->control_ev) event_free(w->control_ev);
    if (w->control_pipe[0] > 0) close(w->control_pipe[0]);
    if (w->control_pipe[1] > 0) close(w->control_pipe[1]);
    if (w->reap_ev) event_free(w->reap_ev);
    if (w->flush_ev) event_free(w->flush_ev);
    free(w->dirty.items);
    free(w->flush_spare.items);
    free(w->postponed.items);
    free(w->dirty_clients.items);
    free(w->woken.items);
    free(w->closing.items);
    if (w->drain_timer) event_free(w->drain_timer);
    if (w->mem_timer) event_free(w->mem_timer);
    if (w->client_tick) event_free(w->client_tick);
    if (w->accept_pause) {
        event_free(w->accept_pause->retry);
        event_free(w->accept_pause->settle);
        free(w->accept_pause);
    }
    free(w->listeners);
    for (size_t i = 0; w->listen_ctxs && i < w->nlisten_ctxs; i++) free(w->listen_ctxs[i]);
    free(w->listen_ctxs);
    if (w->base) event_base_free(w->base);
}
