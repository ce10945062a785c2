/* admin.c: the admin HTTP endpoint (evhttp on the main thread): /metrics, /healthz, /registry. */
#include "admin.h"
#include "budget.h"
#include "nearcache.h"

#include <assert.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <hiredis/hiredis.h>
#include <openssl/crypto.h>

#include "backend.h"
#include "nodes.h"
#include "loop.h"
#include "sampler.h"
#include "sentinelwatch.h"
#include "topology.h"

/* Request line and headers of one admin request: larger requests are refused (evhttp). */
#define ADMIN_MAX_HEADER_BYTES 16384

/* After accept() fails on the admin port (out of file descriptors), accepting pauses this long. */
#define ADMIN_ACCEPT_PAUSE_MS 1000

struct admin {
    struct evhttp *http;
    struct proxy *proxy;
    struct config *const *cfgp;
    struct evconnlistener *listener; /* evhttp's, for pausing on accept errors */
    struct event *resume;            /* re-enables the listener after a pause */
    int accept_paused;               /* in an episode of accept errors: logged once */
};

/* libevent gives a listener's error callback evhttp's pointer, not ours: one admin per process. */
static struct admin *the_admin;

/* READY shared connections of `instance` over every worker and protocol (a snapshot). */
static int instance_ready(const struct proxy *p, int instance)
{
    struct nodes_status st;
    nodes_status(p, instance, &st);
    return st.up;
}

static void reply(struct evhttp_request *req, int code, const char *reason, const char *type, struct evbuffer *body)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", type);
    evhttp_add_header(h, "Cache-Control", "no-store");
    evhttp_send_reply(req, code, reason, body);
}

/* Issue 13's series: names the default line took, what report mode let through per namespace.
 * Labels carry registry prefixes (escaped as Prometheus label values), never a key. */
static void admin_metrics_report(const struct proxy *p, const struct registry *reg, struct evbuffer *out)
{
    const struct stats *st = &p->workers[0].stats;
    size_t stride = sizeof(struct worker);
    evbuffer_add_printf(out,
                        "# HELP keygate_unregistered_total keys and channels taken by the registry's default line\n"
                        "# TYPE keygate_unregistered_total counter\n");
    evbuffer_add_printf(out, "keygate_unregistered_total{kind=\"key\"} %llu\n",
                        (unsigned long long)stats_unregistered_sum(st, stride, p->nworkers, 0));
    evbuffer_add_printf(out, "keygate_unregistered_total{kind=\"channel\"} %llu\n",
                        (unsigned long long)stats_unregistered_sum(st, stride, p->nworkers, 1));
    struct bytebuf refuse = {0}, inject = {0};
    bytebuf_add(&refuse, STR_AND_LEN("# HELP keygate_report_would_refuse_total commands report mode forwarded that "
                                     "enforcement would refuse\n# TYPE keygate_report_would_refuse_total counter\n"));
    bytebuf_add(&inject, STR_AND_LEN("# HELP keygate_report_would_inject_ttl_total commands report mode forwarded "
                                     "unchanged that enforcement would give a TTL\n"
                                     "# TYPE keygate_report_would_inject_ttl_total counter\n"));
    for (size_t i = 0; i <= reg->count && i < STATS_REPORT_SLOTS; i++) {
        const struct namespace_entry *e = registry_entry(reg, i);
        if (!e || e->enforce != ENFORCE_REPORT) continue;
        const char *name = e->is_default ? REGISTRY_DEFAULT_NAME : e->prefix;
        for (int r = 0; r < STATS_REPORT_NREASONS; r++) {
            if (r == STATS_REPORT_NONAMESPACE) continue;
            int is_inject = r == STATS_REPORT_INJECT_TTL;
            struct bytebuf *b = is_inject ? &inject : &refuse;
            if (is_inject)
                bytebuf_add(b, STR_AND_LEN("keygate_report_would_inject_ttl_total{namespace=\""));
            else
                bytebuf_add(b, STR_AND_LEN("keygate_report_would_refuse_total{namespace=\""));
            stats_prom_label_value(b, name);
            char tail[96];
            uint64_t n = stats_report_sum(st, stride, p->nworkers, (uint32_t)i, (enum stats_report_reason)r);
            int len = is_inject ? snprintf(tail, sizeof tail, "\"} %llu\n", (unsigned long long)n)
                                : snprintf(tail, sizeof tail, "\",code=\"%s\"} %llu\n",
                                           stats_report_code((enum stats_report_reason)r), (unsigned long long)n);
            bytebuf_add(b, tail, (size_t)len);
        }
    }
    evbuffer_add(out, refuse.p, refuse.len);
    evbuffer_add(out, inject.p, inject.len);
    bytebuf_free(&refuse);
    bytebuf_free(&inject);
}

/* GET /metrics: Prometheus text exposition format 0.0.4. */

/* A sentinel instance's primary as its watcher found it (sentinelwatch.h): which node, whether
 * confirmed, and how many switches keygate followed. */
static void admin_sentinel_metrics(struct evbuffer *out, const struct config *cfg)
{
    int any = 0;
    for (size_t i = 0; i < cfg->ninstances; i++) any |= cfg->instances[i].sentinel;
    if (!any) return;
    struct sentinelwatch_state st[CONFIG_MAX_INSTANCES];
    int known[CONFIG_MAX_INSTANCES] = {0};
    for (size_t i = 0; i < cfg->ninstances; i++)
        known[i] = cfg->instances[i].sentinel && sentinelwatch_get((int)i, &st[i]) == 0;
    evbuffer_add_printf(out, "# HELP keygate_sentinel_primary 1 for the primary keygate sends a sentinel instance's "
                             "requests to, 0 while it is not confirmed (requests wait)\n"
                             "# TYPE keygate_sentinel_primary gauge\n");
    for (size_t i = 0; i < cfg->ninstances; i++)
        if (known[i] && st[i].primary.host[0])
            evbuffer_add_printf(out, "keygate_sentinel_primary{backend=\"%s\",node=\"%s:%d\"} %d\n",
                                cfg->instances[i].name, st[i].primary.host, st[i].primary.port, st[i].confirmed);
    evbuffer_add_printf(out, "# HELP keygate_sentinel_switches_total changes of a sentinel instance's primary keygate "
                             "followed (failovers)\n"
                             "# TYPE keygate_sentinel_switches_total counter\n");
    for (size_t i = 0; i < cfg->ninstances; i++)
        if (known[i])
            evbuffer_add_printf(out, "keygate_sentinel_switches_total{backend=\"%s\"} %llu\n", cfg->instances[i].name,
                                (unsigned long long)st[i].switches);
}

/* A label value with Prometheus's escapes (\\, \", \n), into out. */
static void admin_label_value(struct evbuffer *out, const char *v)
{
    struct bytebuf b = {0};
    stats_prom_label_value(&b, v);
    evbuffer_add(out, b.p, b.len);
    bytebuf_free(&b);
}

/* keygate_build_info{version,libevent,hiredis,openssl} 1: what this binary is, for joins
 * (`* on (instance) group_left(version) keygate_build_info`) and for finding an old binary. */
static void admin_build_info(struct evbuffer *out)
{
    char hiredis[32];
    snprintf(hiredis, sizeof hiredis, "%d.%d.%d", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
    evbuffer_add_printf(out, "# HELP keygate_build_info keygate's version and the libraries it runs with; always 1\n"
                             "# TYPE keygate_build_info gauge\nkeygate_build_info{version=\"");
    admin_label_value(out, KEYGATE_VERSION);
    evbuffer_add_printf(out, "\",libevent=\"");
    admin_label_value(out, event_get_version());
    evbuffer_add_printf(out, "\",hiredis=\"%s\",openssl=\"", hiredis);
    admin_label_value(out, OpenSSL_version(OPENSSL_VERSION));
    evbuffer_add_printf(out, "\"} 1\n");
}

/* The open file descriptors of this process (entries of /proc/self/fd but the one the count
 * itself opens), or -1 when /proc cannot be read. */
static long admin_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    long n = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1;
}

/* The process's start, in seconds since the epoch: /proc/self/stat's starttime (clock ticks
 * after boot) plus /proc/stat's btime; fallback: when keygate's main started (started_ms). */
static double admin_start_time(int64_t started_ms)
{
    double fallback = (double)started_ms / 1000.0;
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return fallback;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    unsigned long long ticks = 0;
    /* after ") ": state is field 3; starttime is field 22, the 20th after the name */
    for (int field = 3; p && field <= 22; field++) {
        p = strchr(p + 1, ' ');
        if (p && field == 22) ticks = strtoull(p + 1, NULL, 10);
    }
    unsigned long long btime = 0;
    f = fopen("/proc/stat", "r");
    if (!f) return fallback;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", &btime) == 1) break;
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (!ticks || !btime || hz <= 0) return fallback;
    return (double)btime + (double)ticks / (double)hz;
}

/* The standard process_* series every Prometheus client library serves: CPU seconds, resident
 * and virtual memory, open and maximum file descriptors, start time. A value that cannot be read
 * (no /proc) is left out, never served as 0. */
static void admin_process_metrics(struct evbuffer *out, int64_t started_ms)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        evbuffer_add_printf(out,
                            "# HELP process_cpu_seconds_total user and system CPU time spent, in seconds\n"
                            "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.6f\n",
                            (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                                (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
    unsigned long long vm_pages, rss_pages;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &vm_pages, &rss_pages) == 2) {
            unsigned long long page = (unsigned long long)sysconf(_SC_PAGESIZE);
            evbuffer_add_printf(out,
                                "# HELP process_resident_memory_bytes resident memory size in bytes\n"
                                "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %llu\n"
                                "# HELP process_virtual_memory_bytes virtual memory size in bytes\n"
                                "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %llu\n",
                                rss_pages * page, vm_pages * page);
        }
        fclose(f);
    }
    long fds = admin_open_fds();
    if (fds >= 0)
        evbuffer_add_printf(out,
                            "# HELP process_open_fds open file descriptors\n"
                            "# TYPE process_open_fds gauge\nprocess_open_fds %ld\n",
                            fds);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        evbuffer_add_printf(out,
                            "# HELP process_max_fds the limit of open file descriptors (RLIMIT_NOFILE)\n"
                            "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n",
                            (unsigned long long)rl.rlim_cur);
    evbuffer_add_printf(out,
                        "# HELP process_start_time_seconds start time of the process since the epoch, in seconds\n"
                        "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.3f\n",
                        admin_start_time(started_ms));
}

/* One series of every user line (issue 31: max-clients=, rate=; userlimit.h). */
struct user_series {
    const char *name, *type, *help;
};

static const struct user_series user_series[] = {
    {"keygate_user_clients", "gauge", "connections authenticated as the user now, all threads"},
    {"keygate_user_max_clients", "gauge", "the user's max-clients= (0: no limit)"},
    {"keygate_user_rate", "gauge", "the user's rate= in requests a second (0: no limit)"},
    {"keygate_user_requests_total", "counter", "requests of the user's connections keygate parsed"},
    {"keygate_user_clients_refused_total", "counter", "AUTHs refused for the user's max-clients="},
    {"keygate_user_held_total", "counter", "times one of the user's connections was held for its rate="},
    {"keygate_user_throttled", "gauge", "1 while the user is in a throttling episode (over its rate=)"},
    {"keygate_user_throttle_episodes_total", "counter", "throttling episodes of the user"},
    {"keygate_user_throttled_seconds_total", "counter", "seconds the user spent throttled (the episodes')"},
};

static void admin_metrics_users(struct proxy *p, const struct config *cfg, struct evbuffer *out)
{
    if (cfg->nusers == 0) return;
    uint64_t now = clock_mono_ns();
    struct userlimit_view *views = xcalloc(cfg->nusers, sizeof(*views));
    char **labels = xcalloc(cfg->nusers, sizeof(*labels));
    for (size_t i = 0; i < cfg->nusers; i++) {
        userlimit_read(userlimit_find(&p->users, cfg->users[i].name), now, &views[i]);
        struct bytebuf v = {0};
        stats_prom_label_value(&v, cfg->users[i].name);
        bytebuf_add(&v, "", 1);
        labels[i] = v.p;
    }
    for (size_t k = 0; k < sizeof(user_series) / sizeof(user_series[0]); k++) {
        const struct user_series *m = &user_series[k];
        evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name, m->type);
        for (size_t i = 0; i < cfg->nusers; i++) {
            const struct userlimit_view *v = &views[i];
            const struct user_conf *u = &cfg->users[i];
            uint64_t values[] = {(uint64_t)v->clients,
                                 (uint64_t)u->max_clients,
                                 (uint64_t)u->rate,
                                 v->requests,
                                 v->refused,
                                 v->held,
                                 (uint64_t)v->throttled,
                                 v->episodes};
            _Static_assert(sizeof(values) / sizeof(values[0]) + 1 == sizeof(user_series) / sizeof(user_series[0]),
                           "a value for every series but the seconds");
            if (k < sizeof(values) / sizeof(values[0]))
                evbuffer_add_printf(out, "%s{user=\"%s\"} %llu\n", m->name, labels[i], (unsigned long long)values[k]);
            else
                evbuffer_add_printf(out, "%s{user=\"%s\"} %.3f\n", m->name, labels[i], (double)v->throttled_ns / 1e9);
        }
    }
    for (size_t i = 0; i < cfg->nusers; i++) free(labels[i]);
    free(labels);
    free(views);
}

static void admin_metrics(struct admin *a, struct evbuffer *out)
{
    const struct proxy *p = a->proxy;
    const struct config *cfg = *a->cfgp;
    struct stats sum;
    stats_sum(&p->workers[0].stats, sizeof(struct worker), p->nworkers, &sum);
#define STATS_PROM(name, help)                                                                                         \
    evbuffer_add_printf(out,                                                                                           \
                        "# HELP keygate_" #name "_total " help "\n# TYPE keygate_" #name "_total counter\n"            \
                        "keygate_" #name "_total %llu\n",                                                              \
                        (unsigned long long)sum.name);
    STATS_COUNTERS(STATS_PROM)
#undef STATS_PROM
    admin_build_info(out);
    admin_process_metrics(out, p->started_ms);

    evbuffer_add_printf(out,
                        "# HELP keygate_connected_clients client connections open now\n"
                        "# TYPE keygate_connected_clients gauge\nkeygate_connected_clients %d\n",
                        __atomic_load_n(&p->clients_now, __ATOMIC_RELAXED));
    struct tracking_info ti;
    tracking_info((struct tracking_table *)&p->tracking, &ti); /* its lock is the only thing written */
    evbuffer_add_printf(
        out,
        "# HELP keygate_tracking_clients clients with CLIENT TRACKING on\n"
        "# TYPE keygate_tracking_clients gauge\nkeygate_tracking_clients %d\n"
        "# HELP keygate_tracking_keys keys remembered for CLIENT TRACKING clients "
        "(tracking-table-max-keys)\n"
        "# TYPE keygate_tracking_keys gauge\nkeygate_tracking_keys %zu\n"
        "# HELP keygate_tracking_feeds_up instances whose tracking feed (Redis's BCAST tracking) is live\n"
        "# TYPE keygate_tracking_feeds_up gauge\nkeygate_tracking_feeds_up %d\n"
        "# HELP keygate_tracking_streams_up instances whose near-cache stream vouches for their near-cache keys\n"
        "# TYPE keygate_tracking_streams_up gauge\nkeygate_tracking_streams_up %d\n"
        "# HELP keygate_tracking_memory_bytes bytes held for CLIENT TRACKING clients (counted in max-memory)\n"
        "# TYPE keygate_tracking_memory_bytes gauge\nkeygate_tracking_memory_bytes %lld\n"
        "# HELP keygate_memory_used_bytes bytes counted against max-memory (buffers and tracking)\n"
        "# TYPE keygate_memory_used_bytes gauge\nkeygate_memory_used_bytes %lld\n"
        "# HELP keygate_tracking_invalidations_total invalidation messages sent, by cause\n"
        "# TYPE keygate_tracking_invalidations_total counter\n"
        "keygate_tracking_invalidations_total{cause=\"write\"} %llu\n"
        "keygate_tracking_invalidations_total{cause=\"evict\"} %llu\n"
        "keygate_tracking_invalidations_total{cause=\"flush\"} %llu\n",
        ti.clients, ti.keys, ti.feeds_up, ti.streams_up, (long long)ti.memory,
        (long long)__atomic_load_n(&p->mem_used, __ATOMIC_RELAXED), (unsigned long long)ti.sent[TRACKING_CAUSE_WRITE],
        (unsigned long long)ti.sent[TRACKING_CAUSE_EVICT], (unsigned long long)ti.sent[TRACKING_CAUSE_FLUSH]);
    evbuffer_add_printf(out,
                        "# HELP keygate_uptime_seconds seconds since keygate started\n"
                        "# TYPE keygate_uptime_seconds gauge\nkeygate_uptime_seconds %lld\n",
                        (long long)((clock_wall_ms() - p->started_ms) / 1000));
    evbuffer_add_printf(out,
                        "# HELP keygate_registry_namespaces entries (namespaces and channels) in the registry\n"
                        "# TYPE keygate_registry_namespaces gauge\nkeygate_registry_namespaces %zu\n",
                        cfg->registry->count);

    evbuffer_add_printf(out, "# HELP keygate_instance_up 1 when the instance has at least one ready connection\n"
                             "# TYPE keygate_instance_up gauge\n");
    for (size_t i = 0; i < cfg->ninstances; i++)
        evbuffer_add_printf(out, "keygate_instance_up{backend=\"%s\"} %d\n", cfg->instances[i].name,
                            instance_ready(p, (int)i) > 0);
    evbuffer_add_printf(out, "# HELP keygate_instance_connections_ready ready backend connections, all workers\n"
                             "# TYPE keygate_instance_connections_ready gauge\n");
    for (size_t i = 0; i < cfg->ninstances; i++)
        evbuffer_add_printf(out, "keygate_instance_connections_ready{backend=\"%s\"} %d\n", cfg->instances[i].name,
                            instance_ready(p, (int)i));
    evbuffer_add_printf(out, "# HELP keygate_instance_connections shared backend connections (ready or not), all "
                             "workers and protocols\n"
                             "# TYPE keygate_instance_connections gauge\n");
    for (size_t i = 0; i < cfg->ninstances; i++) {
        struct nodes_status st;
        nodes_status(p, (int)i, &st);
        evbuffer_add_printf(out, "keygate_instance_connections{backend=\"%s\"} %d\n", cfg->instances[i].name,
                            st.connections);
    }

    admin_sentinel_metrics(out, cfg);

    char problems[TOPOLOGY_PROBLEMS_MAX];
    int checked[CONFIG_MAX_INSTANCES], ok[CONFIG_MAX_INSTANCES];
    for (size_t i = 0; i < cfg->ninstances; i++) {
        checked[i] = topology_get(p, (int)i, problems, sizeof(problems));
        ok[i] = problems[0] == '\0';
    }
    evbuffer_add_printf(out, "# HELP keygate_topology_ok 0 when the last INFO check of the instance found a problem\n"
                             "# TYPE keygate_topology_ok gauge\n");
    for (size_t i = 0; i < cfg->ninstances; i++)
        evbuffer_add_printf(out, "keygate_topology_ok{backend=\"%s\"} %d\n", cfg->instances[i].name, ok[i]);
    evbuffer_add_printf(out, "# HELP keygate_topology_checked 1 once the instance's INFO was checked\n"
                             "# TYPE keygate_topology_checked gauge\n");
    for (size_t i = 0; i < cfg->ninstances; i++)
        evbuffer_add_printf(out, "keygate_topology_checked{backend=\"%s\"} %d\n", cfg->instances[i].name, checked[i]);
    admin_metrics_report(p, cfg->registry, out);
    admin_metrics_users(a->proxy, cfg, out);
}

/* One capacity reading to render: a single-server instance's (node NULL: the series carry the
 * backend label only), or a cluster or sentinel node's (node="host:port" added). */
struct cap_row {
    const char *instance;
    const char *node;
    const struct topology_capacity *cap;
};

/* The labels of a row: backend="NAME"[,node="ADDR"] (the address escaped as a label value). */
static void cap_labels(struct evbuffer *out, const struct cap_row *r)
{
    evbuffer_add_printf(out, "backend=\"%s\"", r->instance);
    if (!r->node) return;
    struct bytebuf v = {0};
    stats_prom_label_value(&v, r->node);
    evbuffer_add_printf(out, ",node=\"%.*s\"", (int)v.len, v.p);
    bytebuf_free(&v);
}

/* Is an instance's INFO read node by node (a cluster's primaries; a sentinel instance's primary and
 * replicas), its gauges labelled with the node? */
static int instance_per_node(const struct instance_conf *ic)
{
    return ic->cluster || ic->sentinel;
}

/* The capacity gauges (from each instance's INFO, topology.c; a cluster's per primary, with a
 * node label) and the per-namespace series and histograms (stats.c). */
static void admin_metrics_capacity(struct admin *a, struct evbuffer *out)
{
    const struct proxy *p = a->proxy;
    const struct config *cfg = *a->cfgp;
    struct topology_capacity cap[CONFIG_MAX_INSTANCES];
    struct topology_node *nodes[CONFIG_MAX_INSTANCES] = {0};
    int nnodes[CONFIG_MAX_INSTANCES] = {0}, nrows = 0;
    for (size_t i = 0; i < cfg->ninstances; i++) {
        topology_get_capacity(p, (int)i, &cap[i]);
        if (!instance_per_node(&cfg->instances[i])) {
            nrows += cap[i].valid;
            continue;
        }
        nodes[i] = xmalloc(SLOTMAP_MAX_NODES * sizeof(*nodes[i]));
        nnodes[i] = topology_get_nodes(p, (int)i, nodes[i], SLOTMAP_MAX_NODES);
        nrows += nnodes[i];
    }
    struct cap_row *rows = xcalloc((size_t)nrows + 1, sizeof(*rows));
    int n = 0;
    for (size_t i = 0; i < cfg->ninstances; i++) {
        if (!instance_per_node(&cfg->instances[i]) && cap[i].valid)
            rows[n++] = (struct cap_row){cfg->instances[i].name, NULL, &cap[i]};
        for (int k = 0; k < nnodes[i]; k++)
            if (nodes[i][k].capacity.valid)
                rows[n++] = (struct cap_row){cfg->instances[i].name, nodes[i][k].addr, &nodes[i][k].capacity};
    }
    int64_t now_ms = clock_mono_ms();
#define CAP_SERIES(metric, type, help, field)                                                                          \
    do {                                                                                                               \
        evbuffer_add_printf(out, "# HELP " metric " " help "\n# TYPE " metric " " type "\n");                          \
        for (int r = 0; r < n; r++) {                                                                                  \
            evbuffer_add_printf(out, metric "{");                                                                      \
            cap_labels(out, &rows[r]);                                                                                 \
            evbuffer_add_printf(out, "} %llu\n", (unsigned long long)rows[r].cap->field);                              \
        }                                                                                                              \
    } while (0)
    CAP_SERIES("keygate_backend_used_memory_bytes", "gauge", "used_memory of the instance (its INFO)", used_memory);
    CAP_SERIES("keygate_backend_maxmemory_bytes", "gauge", "maxmemory of the instance (0: no limit)", maxmemory);
    evbuffer_add_printf(out, "# HELP keygate_backend_memory_headroom_ratio (maxmemory - used_memory) / maxmemory "
                             "(absent while maxmemory is 0)\n# TYPE keygate_backend_memory_headroom_ratio gauge\n");
    for (int r = 0; r < n; r++) {
        if (rows[r].cap->maxmemory == 0) continue;
        evbuffer_add_printf(out, "keygate_backend_memory_headroom_ratio{");
        cap_labels(out, &rows[r]);
        evbuffer_add_printf(out, "} %.6f\n", topology_headroom(rows[r].cap));
    }
    CAP_SERIES("keygate_backend_evicted_keys_total", "counter", "evicted_keys of the instance (its INFO)",
               evicted_keys);
    CAP_SERIES("keygate_backend_expired_keys_total", "counter", "expired_keys of the instance (its INFO)",
               expired_keys);
    CAP_SERIES("keygate_backend_keyspace_hits_total", "counter", "keyspace_hits of the instance (its INFO)",
               keyspace_hits);
    CAP_SERIES("keygate_backend_keyspace_misses_total", "counter", "keyspace_misses of the instance (its INFO)",
               keyspace_misses);
    CAP_SERIES("keygate_backend_aof_enabled", "gauge", "1 when the instance's AOF is on", aof_enabled);
    CAP_SERIES("keygate_backend_aof_last_write_ok", "gauge", "1 when the instance's last AOF write succeeded",
               aof_last_write_ok);
    CAP_SERIES("keygate_backend_aof_last_rewrite_ok", "gauge", "1 when the instance's last AOF rewrite succeeded",
               aof_last_rewrite_ok);
    CAP_SERIES("keygate_backend_connected_clients", "gauge", "connected_clients of the instance (its INFO)",
               connected_clients);
    CAP_SERIES("keygate_backend_ops_per_second", "gauge", "instantaneous_ops_per_sec of the instance (its INFO)",
               ops_per_sec);
#undef CAP_SERIES
    evbuffer_add_printf(out, "# HELP keygate_backend_role the instance's role (its INFO), as the role label\n"
                             "# TYPE keygate_backend_role gauge\n");
    for (int r = 0; r < n; r++) {
        evbuffer_add_printf(out, "keygate_backend_role{");
        cap_labels(out, &rows[r]);
        evbuffer_add_printf(out, ",role=\"%s\"} 1\n", rows[r].cap->role[0] ? rows[r].cap->role : "unknown");
    }
    evbuffer_add_printf(out, "# HELP keygate_backend_info_age_seconds seconds since the instance's INFO was last read\n"
                             "# TYPE keygate_backend_info_age_seconds gauge\n");
    for (int r = 0; r < n; r++) {
        evbuffer_add_printf(out, "keygate_backend_info_age_seconds{");
        cap_labels(out, &rows[r]);
        evbuffer_add_printf(out, "} %.3f\n", (double)(now_ms - rows[r].cap->read_ms) / 1000.0);
    }
    evbuffer_add_printf(out, "# HELP keygate_backend_node_up 1 when the INFO poller's last INFO of the cluster "
                             "primary was read, 0 when it was unreachable or INFO failed\n"
                             "# TYPE keygate_backend_node_up gauge\n");
    for (size_t i = 0; i < cfg->ninstances; i++)
        for (int k = 0; k < nnodes[i]; k++) {
            struct cap_row row = {cfg->instances[i].name, nodes[i][k].addr, NULL};
            evbuffer_add_printf(out, "keygate_backend_node_up{");
            cap_labels(out, &row);
            evbuffer_add_printf(out, "} %d\n", nodes[i][k].up);
        }
    free(rows);
    for (size_t i = 0; i < cfg->ninstances; i++) free(nodes[i]);
    uint64_t rejected[CONFIG_MAX_INSTANCES] = {0};
    for (int w = 0; w < p->nworkers; w++)
        for (size_t i = 0; i < cfg->ninstances; i++)
            rejected[i] += __atomic_load_n(&p->workers[w].stats.rejected_writes[i], __ATOMIC_RELAXED);
    evbuffer_add_printf(out, "# HELP keygate_backend_rejected_writes_total -OOM replies keygate passed on from the "
                             "instance\n# TYPE keygate_backend_rejected_writes_total counter\n");
    for (size_t i = 0; i < cfg->ninstances; i++)
        evbuffer_add_printf(out, "keygate_backend_rejected_writes_total{backend=\"%s\"} %llu\n", cfg->instances[i].name,
                            (unsigned long long)rejected[i]);

    struct bytebuf text = {0};
    stats_format_prometheus(&p->workers[0].stats, sizeof(struct worker), p->nworkers, cfg->instance_names,
                            cfg->ninstances, &text);
    sampler_format_prometheus(cfg->instance_names, cfg->ninstances, &text);
    budget_format_prometheus(cfg->registry, &text);
    nearcache_format_prometheus(p, &text); /* issue 20 */
    evbuffer_add(out, text.p, text.len);
    bytebuf_free(&text);
}

/* One reading's /healthz capacity problems (see admin_health_capacity); `who` names the instance
 * or the node. Returns how many lines were added. */
static int health_capacity_of(const struct config *cfg, const char *who, const struct topology_capacity *cap,
                              struct evbuffer *out)
{
    int n = 0;
    double headroom = topology_headroom(cap);
    if (headroom >= 0 && headroom * 100.0 < (double)cfg->durable_headroom_warn_pct) {
        evbuffer_add_printf(out,
                            "%s memory headroom is %.1f%% (used_memory %llu of maxmemory %llu), "
                            "under durable-headroom-warn %d%%\n",
                            who, headroom * 100.0, (unsigned long long)cap->used_memory,
                            (unsigned long long)cap->maxmemory, cfg->durable_headroom_warn_pct);
        n++;
    }
    if (cap->evicted_keys > 0) {
        evbuffer_add_printf(out, "%s evicted %llu keys (evicted_keys): it must never evict\n", who,
                            (unsigned long long)cap->evicted_keys);
        n++;
    }
    return n;
}

/* /healthz's capacity problems: durable's headroom under durable-headroom-warn, or durable
 * having evicted a key. A cluster durable is judged per primary: every node under the
 * threshold (so the worst one decides) or with evictions gets a line naming it. Returns how
 * many lines were added. */
static int admin_health_capacity(struct admin *a, struct evbuffer *out)
{
    const struct config *cfg = *a->cfgp;
    int n = 0;
    for (size_t i = 0; i < cfg->ninstances; i++) {
        if (strcmp(cfg->instances[i].name, "durable") != 0) continue;
        if (!instance_per_node(&cfg->instances[i])) {
            struct topology_capacity cap;
            topology_get_capacity(a->proxy, (int)i, &cap);
            if (cap.valid) n += health_capacity_of(cfg, "instance 'durable'", &cap, out);
            continue;
        }
        struct topology_node *nodes = xmalloc(SLOTMAP_MAX_NODES * sizeof(*nodes));
        int nn = topology_get_nodes(a->proxy, (int)i, nodes, SLOTMAP_MAX_NODES);
        for (int k = 0; k < nn; k++) {
            if (!nodes[k].capacity.valid) continue;
            char who[64 + TOPOLOGY_NODE_ADDR_MAX];
            snprintf(who, sizeof(who), "instance 'durable' node %s:", nodes[k].addr);
            n += health_capacity_of(cfg, who, &nodes[k].capacity, out);
        }
        free(nodes);
    }
    return n;
}

/* /healthz's notes: what does not make keygate unhealthy but an operator should know (a Sentinel
 * instance whose failover-hold cannot cover an unplanned failover), one a line. */
static void admin_health_notes(struct admin *a, struct evbuffer *out)
{
    const struct config *cfg = *a->cfgp;
    for (size_t i = 0; i < cfg->ninstances; i++) {
        struct sentinelwatch_state ws;
        if (!cfg->instances[i].sentinel || sentinelwatch_get((int)i, &ws) != 0 || !ws.hold_short) continue;
        evbuffer_add_printf(out,
                            "note: instance '%s': failover-hold %lld ms cannot cover an unplanned failover "
                            "(the sentinels' down-after-milliseconds is %lld): held requests fail first\n",
                            cfg->instances[i].name, (long long)cfg->failover_hold_ms, ws.down_after_ms);
    }
}

/* GET /healthz: the problems, one a line; returns how many. */
static int admin_health(struct admin *a, struct evbuffer *out)
{
    const struct config *cfg = *a->cfgp;
    int n = 0;
    char problems[TOPOLOGY_PROBLEMS_MAX];
    for (size_t i = 0; i < cfg->ninstances; i++) {
        if (instance_ready(a->proxy, (int)i) == 0) {
            evbuffer_add_printf(out, "instance '%s' is unreachable\n", cfg->instances[i].name);
            n++;
        }
        topology_get(a->proxy, (int)i, problems, sizeof(problems));
        for (const char *c = problems; *c; c++) n += *c == '\n';
        evbuffer_add(out, problems, strlen(problems));
    }
    return n + admin_health_capacity(a, out);
}

static void admin_request_cb(struct evhttp_request *req, void *arg)
{
    struct admin *a = arg;
    if (a->accept_paused) { /* a request came in: the episode of accept errors is over */
        a->accept_paused = 0;
        log_event(LOG_INFO, "admin_accept_resumed", NULL, "admin endpoint: accepting again");
    }
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (!path) path = "";
    struct evbuffer *out = xevbuffer_new();
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    if (method != EVHTTP_REQ_GET && method != EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
        evbuffer_add_printf(out, "only GET and HEAD\n");
        reply(req, 405, "Method Not Allowed", "text/plain; charset=utf-8", out);
    } else if (strcmp(path, "/metrics") == 0) {
        admin_metrics(a, out);
        admin_metrics_capacity(a, out);
        reply(req, HTTP_OK, "OK", "text/plain; version=0.0.4; charset=utf-8", out);
    } else if (strcmp(path, "/healthz") == 0) {
        if (admin_health(a, out) == 0) {
            evbuffer_add(out, STR_AND_LEN("ok\n"));
            admin_health_notes(a, out);
            reply(req, HTTP_OK, "OK", "text/plain; charset=utf-8", out);
        } else {
            admin_health_notes(a, out);
            reply(req, HTTP_SERVUNAVAIL, "Service Unavailable", "text/plain; charset=utf-8", out);
        }
    } else if (strcmp(path, "/registry") == 0) {
        const struct config *cfg = *a->cfgp;
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f) oom_abort(0); /* it fails only for memory */
        registry_print(cfg->registry, cfg->instance_names, 1, f);
        fclose(f);
        if (text) {
            evbuffer_add(out, text, len);
            reply(req, HTTP_OK, "OK", "text/markdown; charset=utf-8", out);
        } else {
            evbuffer_add_printf(out, "cannot print the registry\n");
            reply(req, HTTP_INTERNAL, "Internal Server Error", "text/plain; charset=utf-8", out);
        }
        free(text);
    } else {
        evbuffer_add_printf(out, "not found; try /metrics, /healthz or /registry\n");
        reply(req, HTTP_NOTFOUND, "Not Found", "text/plain; charset=utf-8", out);
    }
    evbuffer_free(out);
}

/* accept() on the admin port failed (EMFILE/ENFILE): libevent would retry on every readable
 * turn, logging each; instead stop accepting for ADMIN_ACCEPT_PAUSE_MS and log once per episode. */
static void admin_accept_error_cb(struct evconnlistener *lev, void *arg)
{
    (void)arg;
    struct admin *a = the_admin;
    int err = EVUTIL_SOCKET_ERROR();
    if (!a) return;
    if (!a->accept_paused)
        log_event(LOG_WARN, "admin_accept_paused", NULL,
                  "admin endpoint: accept: %s: accepting paused, retrying every %d ms",
                  evutil_socket_error_to_string(err), ADMIN_ACCEPT_PAUSE_MS);
    a->accept_paused = 1;
    evconnlistener_disable(lev);
    struct timeval tv = {ADMIN_ACCEPT_PAUSE_MS / 1000, (ADMIN_ACCEPT_PAUSE_MS % 1000) * 1000};
    evtimer_add(a->resume, &tv);
}

static void admin_resume_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct admin *a = arg;
    evconnlistener_enable(a->listener);
}

struct admin *admin_start(struct event_base *base, const char *host, int port, struct proxy *p,
                          struct config *const *cfgp)
{
    struct admin *a = xcalloc(1, sizeof(*a));
    a->proxy = p;
    a->cfgp = cfgp;
    a->http = evhttp_new(base);
    if (!a->http) {
        free(a);
        return NULL;
    }
    /* every method reaches the callback, which answers 405 to all but GET and HEAD */
    evhttp_set_allowed_methods(a->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                            EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_timeout(a->http, 10);
    evhttp_set_max_headers_size(a->http, ADMIN_MAX_HEADER_BYTES);
    evhttp_set_max_body_size(a->http, 0);
    evhttp_set_gencb(a->http, admin_request_cb, a);
    struct evhttp_bound_socket *bound =
        port < 0 || port > 65535 ? NULL : evhttp_bind_socket_with_handle(a->http, host, (ev_uint16_t)port);
    if (!bound) {
        log_event(LOG_ERROR, "admin_listen_failed", NULL, "admin-listen %s:%d: cannot listen", host, port);
        admin_stop(a);
        return NULL;
    }
    assert(the_admin == NULL);
    a->listener = evhttp_bound_socket_get_listener(bound);
    a->resume = xevtimer_new(base, admin_resume_cb, a);
    evconnlistener_set_error_cb(a->listener, admin_accept_error_cb);
    the_admin = a;
    log_event(LOG_INFO, "admin_listening", NULL, "admin endpoint on http://%s:%d/ (/metrics, /healthz, /registry)",
              host, port);
    return a;
}

void admin_stop(struct admin *a)
{
    if (!a) return;
    if (a->resume) event_free(a->resume);
    if (a->http) evhttp_free(a->http);
    if (the_admin == a) the_admin = NULL;
    free(a);
}
