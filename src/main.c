/* main.c: command line, start-up, signals, sd_notify, worker threads, reload and shutdown. */
#include "loop.h"
#include "worker.h"
#include "admin.h"
#include "audit.h"
#include "authgate.h"
#include "nearcache.h"
#include "trackfeed.h"
#include "tracker.h"
#include "sampler.h"
#include "sentinelwatch.h"
#include "tls.h"

#include <errno.h>
#include <malloc.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/opensslv.h>
#include <systemd/sd-daemon.h>

struct daemon_state {
    const char *config_path;
    struct config *cfg;     /* current */
    struct config *retired; /* previous, freed once every worker took the new one */
    struct proxy proxy;
    pthread_t *threads;
    struct event_base *base;     /* main thread: signals */
    struct sampler *sampler;     /* namespace-scan-interval (NULL: off) */
    struct nearcache *nearcache; /* NULL: no near-cache namespace */
};

/* --check: one host name of instance ic (its address, or a seed) resolved now. A name that does not
 * resolve is a warning, not an error: keygate resolves names again for every new connection (the
 * record may come later, or resolve only where keygate runs). Numeric addresses are not looked up. */
static void check_host_resolves(const struct config *c, const struct instance_conf *ic, const char *host,
                                struct diag *warns)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *res;
    if (getaddrinfo(host, NULL, &hints, &res) == 0) {
        freeaddrinfo(res);
        return;
    }
    hints.ai_flags = 0;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc == 0) {
        freeaddrinfo(res);
        return;
    }
    diag_add(warns, c->path, ic->line,
             "warning: instance '%s': host name %s does not resolve now (%s); keygate resolves it again for each new "
             "connection",
             ic->name, host, gai_strerror(rc));
}

/* --check: every host name of every instance line (its address, a cluster's or sentinel's seeds). */
static void check_host_names(const struct config *c, struct diag *warns)
{
    for (size_t i = 0; i < c->ninstances; i++) {
        const struct instance_conf *ic = &c->instances[i];
        if (ic->nseeds == 0 && ic->host) check_host_resolves(c, ic, ic->host, warns);
        for (int k = 0; k < ic->nseeds; k++) check_host_resolves(c, ic, ic->seed_host[k], warns);
    }
}

static void usage(FILE *out)
{
    fprintf(out, "usage: keygate -c FILE               run the proxy (foreground)\n"
                 "       keygate --check -c FILE       validate config, registry and users; exit 1 on errors\n"
                 "       keygate registry -c FILE [--markdown]  print the effective registry\n"
                 "       keygate audit -c FILE [--limit N]  report keys on the instances that break the registry\n"
                 "       keygate --version\n");
}

static void print_version(void)
{
    printf("keygate %s\nlibevent %s\nhiredis %d.%d.%d\n%s\n", KEYGATE_VERSION, event_get_version(), HIREDIS_MAJOR,
           HIREDIS_MINOR, HIREDIS_PATCH, OpenSSL_version(OPENSSL_VERSION));
    printf("License: BSD-3-Clause (the LICENSE file; /usr/share/doc/keygate/copyright in the Debian package)\n");
}

/* Load config + registry; print every error as FILE:LINE: message. */
static struct config *load_or_report(const char *path)
{
    struct diag errs = {0};
    struct config *cfg = config_load(path, &errs);
    for (size_t i = 0; i < errs.count; i++) fprintf(stderr, "%s%s\n", log_priority_prefix(LOG_ERROR), errs.lines[i]);
    diag_free(&errs);
    return cfg;
}

/* TLS contexts of the `listen ... tls` entries. */
static int listen_tls_init(struct daemon_state *d)
{
    const struct config *cfg = d->cfg;
    d->proxy.listen_ssl = xcalloc(cfg->nlistens ? cfg->nlistens : 1, sizeof(*d->proxy.listen_ssl));
    d->proxy.nlisten_ssl = cfg->nlistens;
    for (size_t i = 0; i < cfg->nlistens; i++) {
        const struct listen_addr *la = &cfg->listens[i];
        if (!la->tls) continue;
        SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
        if (!ctx) return -1;
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        if (SSL_CTX_use_certificate_chain_file(ctx, la->tls_cert) != 1 ||
            SSL_CTX_use_PrivateKey_file(ctx, la->tls_key, SSL_FILETYPE_PEM) != 1) {
            log_event(LOG_ERROR, "listen_tls_failed", NULL, "listen tls: cannot load %s / %s", la->tls_cert,
                      la->tls_key);
            SSL_CTX_free(ctx);
            return -1;
        }
        if (la->tls_ca) {
            if (SSL_CTX_load_verify_locations(ctx, la->tls_ca, NULL) != 1) {
                log_event(LOG_ERROR, "listen_tls_failed", NULL, "listen tls: cannot load CA %s", la->tls_ca);
                SSL_CTX_free(ctx);
                return -1;
            }
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        }
        d->proxy.listen_ssl[i] = ctx;
    }
    return 0;
}

/* Free what listen_tls_init made (also after it failed part way). */
static void listen_tls_free(struct daemon_state *d)
{
    for (size_t i = 0; i < d->proxy.nlisten_ssl; i++)
        if (d->proxy.listen_ssl[i]) SSL_CTX_free(d->proxy.listen_ssl[i]);
    free(d->proxy.listen_ssl);
    d->proxy.listen_ssl = NULL;
    d->proxy.nlisten_ssl = 0;
}

static void reload(struct daemon_state *d)
{
    if (d->retired) {
        if (__atomic_load_n(&d->proxy.reload_acks, __ATOMIC_ACQUIRE) != 0) {
            log_event(LOG_WARN, "reload_busy", NULL, "reload: the previous reload is still being applied; try again");
            return;
        }
        config_free(d->retired);
        d->retired = NULL;
    }
    struct config *next = load_or_report(d->config_path);
    if (!next) {
        log_event(LOG_ERROR, "reload_failed", NULL, "reload: %s has errors; keeping the running configuration",
                  d->config_path);
        return;
    }
    int same = next->ninstances == d->cfg->ninstances;
    for (size_t i = 0; same && i < next->ninstances; i++)
        same = strcmp(next->instances[i].name, d->cfg->instances[i].name) == 0;
    if (!same) {
        log_event(LOG_ERROR, "reload_failed", NULL,
                  "reload: instances changed; that needs a restart. Keeping the running configuration");
        config_free(next);
        return;
    }
    if (next->log_format != d->cfg->log_format) /* log_format is read by every thread unlocked: start-up only */
        log_event(LOG_WARN, "reload_log_format", NULL, "reload: log-format changes need a restart; the log stays %s",
                  d->cfg->log_format == LOG_FORMAT_JSON ? "json" : "text");
    d->retired = d->cfg;
    d->cfg = next;
    __atomic_store_n(&d->proxy.reload_acks, d->proxy.nworkers, __ATOMIC_RELEASE);
    for (int i = 0; i < d->proxy.nworkers; i++) worker_post(&d->proxy.workers[i], next, 0);
    sampler_update(d->sampler, next);
    nearcache_update(d->nearcache, next); /* what this process's writes announce now */
    tracker_update(&d->proxy, next);      /* tracking-table-max-keys, max-memory: keys past them go now */
    log_event(LOG_INFO, "reload", NULL, "reloaded registry (%zu namespaces) and %zu users", next->registry->count,
              next->nusers);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
    struct daemon_state *d = arg;
    (void)what;
    if (sig == SIGHUP) {
        sd_notify(0, "RELOADING=1");
        reload(d);
        sd_notify(0, "READY=1");
        return;
    }
    log_event(LOG_INFO, "stopping", NULL, "signal %d: stopping (draining for at most %lldms)", (int)sig,
              (long long)d->cfg->shutdown_timeout_ms);
    sd_notify(0, "STOPPING=1");
    event_base_loopbreak(d->base);
}

/* libevent's own warnings (event_warn: a failed accept, a bad fd) in keygate's log format and level. */
static void libevent_log_cb(int severity, const char *msg)
{
    enum log_level level = severity == EVENT_LOG_DEBUG  ? LOG_DEBUG
                           : severity == EVENT_LOG_MSG  ? LOG_INFO
                           : severity == EVENT_LOG_WARN ? LOG_WARN
                                                        : LOG_ERROR;
    log_event(level, "libevent", NULL, "libevent: %s", msg);
}

static int run(const char *path)
{
    struct daemon_state d;
    memset(&d, 0, sizeof(d));
    d.config_path = path;
    d.cfg = load_or_report(path);
    if (!d.cfg) return 1;
    log_min_level = d.cfg->log_level;
    log_format = d.cfg->log_format;
    signal(SIGPIPE, SIG_IGN);
    event_set_log_callback(libevent_log_cb);
    /* buffers of 4 MiB and more are mapped on their own and unmapped when freed: the
     * memory of a large transfer goes back to the system (glibc would otherwise raise the
     * threshold after the first such free, up to 32 MiB, and keep those on its heap) */
    mallopt(M_MMAP_THRESHOLD, 4 * 1024 * 1024);
    /* No evthread_use_pthreads(): each event base belongs to one thread, and the main
     * thread wakes a worker through its pipe (worker_post), so libevent takes no locks. */
    if (listen_tls_init(&d) != 0) { /* a listener's certificate or key does not load */
        listen_tls_free(&d);
        config_free(d.cfg);
        return 1;
    }

    d.proxy.nworkers = d.cfg->threads;
    d.proxy.started_ms = clock_wall_ms();
    d.proxy.authgate = authgate_new();
    blocked_init(&d.proxy.blocked);
    userlimit_init(&d.proxy.users);
    scripts_init(&d.proxy.scripts, SCRIPTS_MAX_COUNT, SCRIPTS_MAX_BYTES);
    d.proxy.workers = xcalloc((size_t)d.proxy.nworkers, sizeof(struct worker));
    d.threads = xcalloc((size_t)d.proxy.nworkers, sizeof(pthread_t));
    int rc = 0, started = 0;
    for (int i = 0; i < d.proxy.nworkers; i++) {
        if (worker_init(&d.proxy.workers[i], &d.proxy, i, d.cfg) != 0) {
            log_event(LOG_ERROR, "worker_failed", NULL, "worker %d failed to start", i);
            rc = 1;
            break;
        }
    }
    /* sentinel instances: their primaries are looked for before the workers need them */
    struct sentinelwatch *watch = rc == 0 ? sentinelwatch_start(d.cfg) : NULL;
    /* CLIENT TRACKING's table and inboxes go on the workers' bases before they run (and before
     * the near cache's readers, which tell it of their streams) */
    if (rc == 0) tracker_start(&d.proxy);
    /* the near cache's per-worker caches and inboxes, likewise */
    struct nearcache *nearcache = d.nearcache = rc == 0 ? nearcache_start(d.cfg, &d.proxy) : NULL;
    struct trackfeed *trackfeed = rc == 0 ? trackfeed_start(d.cfg, &d.proxy) : NULL;
    d.base = event_base_new();
    struct admin *admin = NULL;
    if (rc == 0 && d.cfg->admin_host &&
        !(admin = admin_start(d.base, d.cfg->admin_host, d.cfg->admin_port, &d.proxy, &d.cfg)))
        rc = 1;
    struct event *sigs[3] = {0};
    if (rc == 0) {
        int signums[3] = {SIGHUP, SIGTERM, SIGINT};
        for (int i = 0; i < 3; i++) {
            sigs[i] = xevent_new(d.base, signums[i], EV_SIGNAL | EV_PERSIST, signal_cb, &d); /* evsignal_new */
            event_add(sigs[i], NULL);
        }
        for (; started < d.proxy.nworkers; started++)
            if (pthread_create(&d.threads[started], NULL, worker_run, &d.proxy.workers[started]) != 0) break;
        if (started < d.proxy.nworkers) rc = 1;
    }
    if (rc == 0) {
        log_event(LOG_INFO, "ready", NULL, "keygate %s ready: %zu listener(s), %d thread(s), %zu namespaces",
                  KEYGATE_VERSION, d.cfg->nlistens, d.proxy.nworkers, d.cfg->registry->count);
        d.sampler = sampler_start(d.cfg, &d.proxy);
        sd_notify(0, "READY=1");
        event_base_dispatch(d.base);
    }
    sampler_stop(d.sampler);
    admin_stop(admin);
    for (int i = 0; i < started; i++) worker_post(&d.proxy.workers[i], NULL, 1);
    for (int i = 0; i < started; i++) pthread_join(d.threads[i], NULL);
    nearcache_stop(nearcache);
    trackfeed_stop(trackfeed);
    tracker_stop(&d.proxy);
    sentinelwatch_stop(watch);
    for (int i = 0; i < d.proxy.nworkers; i++) worker_free(&d.proxy.workers[i]);
    int64_t left = __atomic_load_n(&d.proxy.mem_used, __ATOMIC_RELAXED);
    for (int i = 0; i < d.proxy.nworkers; i++) left += d.proxy.workers[i].mem_unpublished;
    if (left != 0)
        log_event(LOG_WARN, "memory_accounting_left", NULL, "max-memory accounting: %lld bytes still counted at exit",
                  (long long)left);
    for (int i = 0; i < 3; i++)
        if (sigs[i]) event_free(sigs[i]);
    if (d.base) event_base_free(d.base);
    listen_tls_free(&d);
    free(d.proxy.workers);
    authgate_free(d.proxy.authgate);
    blocked_free(&d.proxy.blocked);
    userlimit_free(&d.proxy.users);
    scripts_free(&d.proxy.scripts);
    free(d.threads);
    if (d.retired) config_free(d.retired);
    config_free(d.cfg);
    libevent_global_shutdown();
    return rc;
}

int main(int argc, char **argv)
{
    const char *config_path = NULL;
    int check = 0, markdown = 0, registry_cmd = 0;
    oom_route_libevent(); /* before any other libevent call: util.h's out-of-memory rule */
    log_journal_detect(); /* before the first line: under the journal each carries its priority */
    if (argc > 1 && strcmp(argv[1], "audit") == 0) return audit_main(argc - 1, argv + 1);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
            config_path = argv[++i];
        } else if (strcmp(argv[i], "--check") == 0) {
            check = 1;
        } else if (strcmp(argv[i], "--version") == 0) {
            print_version();
            return 0;
        } else if (strcmp(argv[i], "--markdown") == 0) {
            markdown = 1;
        } else if (strcmp(argv[i], "registry") == 0 && i == 1) {
            registry_cmd = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "%skeygate: unknown argument '%s'\n", log_priority_prefix(LOG_ERROR), argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!config_path) {
        usage(stderr);
        return 2;
    }
    if (check || registry_cmd) {
        struct config *cfg = load_or_report(config_path);
        if (!cfg) return 1;
        if (check) { /* every certificate, key and CA file: what a start would find only at its TLS handshake */
            struct diag errs = {0}, warns = {0};
            tls_check_files(cfg, time(NULL), &errs, &warns);
            check_host_names(cfg, &warns);
            for (size_t i = 0; i < warns.count; i++)
                fprintf(stderr, "%s%s\n", log_priority_prefix(LOG_WARN), warns.lines[i]);
            for (size_t i = 0; i < errs.count; i++)
                fprintf(stderr, "%s%s\n", log_priority_prefix(LOG_ERROR), errs.lines[i]);
            int bad = errs.count > 0;
            diag_free(&errs);
            diag_free(&warns);
            if (bad) {
                config_free(cfg);
                return 1;
            }
        }
        if (registry_cmd)
            registry_print(cfg->registry, cfg->instance_names, markdown, stdout);
        else
            printf("%s%s: OK (%zu namespaces, %zu instances, %zu users)\n", log_journal_fd(STDOUT_FILENO) ? "<6>" : "",
                   config_path, cfg->registry->count, cfg->ninstances, cfg->nusers);
        config_free(cfg);
        return 0;
    }
    return run(config_path);
}
