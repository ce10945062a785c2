/* sampler.c: the background readers: the INFO poller (capacity, topology guard) and the namespace sampler (SCAN). */
#include "sampler.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "budget.h"
#include "registry.h"
#include "stats.h"
#include "syncconn.h"
#include "topology.h"

struct sampler {
    pthread_t thread;         /* the namespace sampler (only when scanning) */
    pthread_t info_thread;    /* the INFO poller (always) */
    int scanning, polling;    /* which threads run */
    int64_t info_interval_ms; /* under lock: backend-info-interval */
    struct proxy *proxy;      /* topology_on_info_text's */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;                   /* under lock */
    struct syncconn_stop *halt; /* tripped by sampler_stop: the threads' blocking calls return */
    int64_t interval_ms;        /* under lock: 0 pauses the passes */
    struct registry *pending;   /* under lock: the registry of a reload, taken at the next pass */
    struct registry *reg;       /* the thread's own */
    int64_t connect_timeout_ms; /* fixed: instances do not change without a restart */
    struct instance_conf instances[CONFIG_MAX_INSTANCES];
    const char *instance_names[CONFIG_MAX_INSTANCES];
    size_t ninstances;
    int failing[CONFIG_MAX_INSTANCES]; /* the thread's: the last pass of the instance failed (logged once) */
};

/* ---- the results: written by the thread after each instance's pass, read by /metrics ---- */

static pthread_mutex_t results_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t result_keys[STATS_NS_MAX], result_depth[STATS_NS_MAX];
static unsigned char result_has_keys[STATS_NS_MAX], result_has_depth[STATS_NS_MAX];
static int64_t result_done_ms[CONFIG_MAX_INSTANCES];     /* monotonic end of the last completed pass; 0 none */
static int64_t result_duration_ms[CONFIG_MAX_INSTANCES]; /* how long it took */

const char *sampler_depth_command(const char *type)
{
    if (strcmp(type, "list") == 0) return "LLEN";
    if (strcmp(type, "stream") == 0) return "XLEN";
    if (strcmp(type, "zset") == 0) return "ZCARD";
    return NULL;
}

/* A registry of our own (the file cfg read, read again) with every entry's stats slot. NULL (logged) on errors. */
static struct registry *registry_copy(const struct config *cfg)
{
    struct diag errs = {0};
    struct registry *r = registry_load(cfg->registry->path, cfg->instance_names, cfg->ninstances, &errs);
    if (!r)
        log_event(LOG_WARN, "sampler_registry_unreadable", NULL,
                  "sampler: cannot read %s again (%s); keeping the registry it had", cfg->registry->path,
                  errs.count ? errs.lines[0] : "?");
    diag_free(&errs);
    if (r) config_registry_bind_stats(r, cfg->instance_names); /* as config_load binds it */
    return r;
}

/* Wait until `deadline_ms` (monotonic) or a stop. Returns 1 when stopped. */
static int sampler_sleep_until(struct sampler *s, int64_t deadline_ms)
{
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        int64_t now = clock_mono_ms();
        if (now >= deadline_ms) break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t wait = deadline_ms - now;
        ts.tv_sec += (time_t)(wait / 1000);
        ts.tv_nsec += (long)(wait % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->wake, &s->lock, &ts);
    }
    int stop = s->stop;
    pthread_mutex_unlock(&s->lock);
    return stop;
}

/* One instance's counts while its pass runs. */
struct tally {
    uint64_t keys[STATS_NS_MAX], depth[STATS_NS_MAX];
    uint64_t mem_sum[STATS_NS_MAX], mem_n[STATS_NS_MAX]; /* max-memory namespaces: sampled MEMORY USAGE */
    uint64_t mark[STATS_NS_MAX];                         /* budgeted namespaces: budget_pass_begin's */
};

/* MEMORY USAGE of the max-memory-namespace keys keys[idx[0..n)], pipelined, into t. 0, or -1 on a
 * connection error. A key gone since the SCAN answers nil: not counted. */
static int sampler_memory(struct syncconn *c, redisReply **keys, const size_t *idx, size_t n,
                          const struct namespace_entry **ns, struct tally *t)
{
    for (size_t i = 0; i < n; i++) {
        const char *argv[3] = {"MEMORY", "USAGE", keys[idx[i]]->str};
        size_t argvlen[3] = {6, 5, (size_t)keys[idx[i]]->len};
        if (syncconn_append(c, 3, argv, argvlen) != 0) return -1;
    }
    if (syncconn_flush(c) != 0) return -1;
    for (size_t i = 0; i < n; i++) {
        redisReply *r = syncconn_read(c);
        if (!r) return -1;
        if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
            t->mem_sum[ns[i]->stats_slot] += (uint64_t)r->integer;
            t->mem_n[ns[i]->stats_slot]++;
        }
        freeReplyObject(r);
    }
    return 0;
}

/* The queue depth of the depth-namespace keys keys[idx[0..n)]: TYPE, then the length
 * command, each pipelined. 0, or -1 on a connection error (why in err). */
static int sampler_depth(struct syncconn *c, redisReply **keys, const size_t *idx, size_t n,
                         const struct namespace_entry **ns, struct tally *t)
{
    for (size_t i = 0; i < n; i++) {
        const char *argv[2] = {"TYPE", keys[idx[i]]->str};
        size_t argvlen[2] = {4, (size_t)keys[idx[i]]->len};
        if (syncconn_append(c, 2, argv, argvlen) != 0) return -1;
    }
    if (syncconn_flush(c) != 0) return -1;
    const char *cmd[256];
    size_t sent = 0, which[256];
    for (size_t i = 0; i < n; i++) {
        redisReply *r = syncconn_read(c);
        if (!r) return -1;
        cmd[i] = r->type == REDIS_REPLY_STATUS ? sampler_depth_command(r->str) : NULL;
        freeReplyObject(r);
    }
    for (size_t i = 0; i < n; i++) {
        if (!cmd[i]) continue;
        const char *argv[2] = {cmd[i], keys[idx[i]]->str};
        size_t argvlen[2] = {strlen(cmd[i]), (size_t)keys[idx[i]]->len};
        if (syncconn_append(c, 2, argv, argvlen) != 0) return -1;
        which[sent++] = i;
    }
    if (sent == 0) return 0;
    if (syncconn_flush(c) != 0) return -1;
    for (size_t k = 0; k < sent; k++) {
        redisReply *r = syncconn_read(c);
        if (!r) return -1;
        /* a key deleted or retyped between TYPE and its length reads 0 or an error: not counted */
        if (r->type == REDIS_REPLY_INTEGER && r->integer > 0)
            t->depth[ns[which[k]]->stats_slot] += (uint64_t)r->integer;
        freeReplyObject(r);
    }
    return 0;
}

/* One pass over the server host:port of instance inst (its address, or a cluster's primary) into
 * t (added to what t holds). 0 when the SCAN reached its end, 1 when stopped, -1 on an error (why
 * in err). */
static int sampler_scan(struct sampler *s, int inst, const char *host, int port, struct tally *t, char *err,
                        size_t errlen)
{
    struct syncconn *c =
        syncconn_open_node(&s->instances[inst], host, port, (int)s->connect_timeout_ms, s->halt, err, errlen);
    if (!c) return -1;
    char cursor[32] = "0";
    int rc = 0;
    do {
        const char *argv[4] = {"SCAN", cursor, "COUNT", SAMPLER_SCAN_COUNT};
        size_t argvlen[4] = {4, strlen(cursor), 5, sizeof(SAMPLER_SCAN_COUNT) - 1};
        redisReply *r = syncconn_command(c, 4, argv, argvlen);
        if (!r) {
            snprintf(err, errlen, "SCAN: %s", syncconn_error(c));
            rc = -1;
            break;
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
            r->element[0]->len >= sizeof(cursor) || r->element[1]->type != REDIS_REPLY_ARRAY) {
            snprintf(err, errlen, "SCAN: %s", r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            freeReplyObject(r);
            rc = -1;
            break;
        }
        memcpy(cursor, r->element[0]->str, (size_t)r->element[0]->len + 1);
        redisReply **keys = r->element[1]->element;
        size_t nkeys = r->element[1]->elements, idx[256], n = 0, midx[256], mn = 0;
        const struct namespace_entry *ns[256], *mns[256];
        for (size_t i = 0; i < nkeys && rc == 0; i++) {
            if (keys[i]->type != REDIS_REPLY_STRING) continue;
            /* the default line takes what matches no prefix, as keygate routes it */
            const struct namespace_entry *e = registry_resolve(s->reg, NS_KEY, keys[i]->str, (size_t)keys[i]->len);
            if (!e || e->instance != inst) continue; /* no namespace, or another instance's: the audit's business */
            t->keys[e->stats_slot]++;
            /* max-memory: the first BUDGET_MEMORY_SAMPLES keys the pass meets (SCAN's order is the hash's) */
            if (e->max_memory > 0 && t->mem_n[e->stats_slot] < BUDGET_MEMORY_SAMPLES) {
                t->mem_n[e->stats_slot]++; /* reserved here, counted again by sampler_memory */
                mns[mn] = e;
                midx[mn++] = i;
                if (mn == sizeof(midx) / sizeof(midx[0])) {
                    for (size_t k = 0; k < mn; k++) t->mem_n[mns[k]->stats_slot]--;
                    if (sampler_memory(c, keys, midx, mn, mns, t) != 0) rc = -1;
                    mn = 0;
                }
            }
            if (!e->depth) continue;
            ns[n] = e;
            idx[n++] = i;
            if (n == sizeof(idx) / sizeof(idx[0])) {
                if (sampler_depth(c, keys, idx, n, ns, t) != 0) rc = -1;
                n = 0;
            }
        }
        if (rc == 0 && n > 0 && sampler_depth(c, keys, idx, n, ns, t) != 0) rc = -1;
        if (rc == 0 && mn > 0) {
            for (size_t k = 0; k < mn; k++) t->mem_n[mns[k]->stats_slot]--;
            if (sampler_memory(c, keys, midx, mn, mns, t) != 0) rc = -1;
        }
        if (rc != 0) snprintf(err, errlen, "%s", syncconn_error(c));
        freeReplyObject(r);
        if (rc == 0 && strcmp(cursor, "0") != 0 && sampler_sleep_until(s, clock_mono_ms() + SAMPLER_PAUSE_MS)) rc = 1;
    } while (rc == 0 && strcmp(cursor, "0") != 0);
    syncconn_close(c);
    return rc;
}

/* One pass over instance inst into t: its server, or every primary of a cluster (the slot map from
 * the first seed that answers), the counts summed. As sampler_scan; a cluster's errors name the node. */
static int sampler_scan_instance(struct sampler *s, int inst, struct tally *t, char *err, size_t errlen)
{
    const struct instance_conf *ic = &s->instances[inst];
    if (!ic->cluster && !ic->sentinel) return sampler_scan(s, inst, ic->host, ic->port, t, err, errlen);
    struct slotmap_node *nodes = xmalloc(SLOTMAP_MAX_NODES * sizeof(*nodes));
    int n = syncconn_primaries(ic, (int)s->connect_timeout_ms, s->halt, nodes, SLOTMAP_MAX_NODES, err, errlen);
    int rc = n < 0 ? -1 : 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char why[256] = "";
        rc = sampler_scan(s, inst, nodes[i].host, nodes[i].port, t, why, sizeof(why));
        if (rc < 0) snprintf(err, errlen, "node %s:%d: %s", nodes[i].host, nodes[i].port, why);
    }
    free(nodes);
    return rc;
}

/* The instance's pass is complete: its namespaces' counts replace the previous ones. */
static void sampler_publish(struct sampler *s, int inst, const struct tally *t, int64_t started_ms)
{
    pthread_mutex_lock(&results_lock);
    /* the namespaces this registry puts on inst (also those with no key: 0), the default line last */
    for (size_t i = 0; i <= s->reg->count; i++) {
        const struct namespace_entry *e = registry_entry(s->reg, i);
        if (!e) break;
        if (e->kind != NS_KEY || e->instance != inst) continue;
        result_keys[e->stats_slot] = t->keys[e->stats_slot];
        result_has_keys[e->stats_slot] = 1;
        result_depth[e->stats_slot] = t->depth[e->stats_slot];
        result_has_depth[e->stats_slot] = (unsigned char)e->depth;
        if (registry_has_budget(e))
            budget_publish(e->stats_slot, t->mark[e->stats_slot], t->keys[e->stats_slot], t->mem_sum[e->stats_slot],
                           t->mem_n[e->stats_slot]);
    }
    int64_t now = clock_mono_ms();
    result_done_ms[inst] = now;
    result_duration_ms[inst] = now - started_ms;
    pthread_mutex_unlock(&results_lock);
}

static void *sampler_run(void *arg)
{
    struct sampler *s = arg;
    struct tally *t = xmalloc(sizeof(*t));
    int64_t next = clock_mono_ms();
    for (;;) {
        if (sampler_sleep_until(s, next)) break;
        pthread_mutex_lock(&s->lock);
        if (s->pending) {
            registry_free(s->reg);
            s->reg = s->pending;
            s->pending = NULL;
        }
        int64_t interval = s->interval_ms;
        pthread_mutex_unlock(&s->lock);
        if (interval <= 0) { /* paused by a reload: look again in a second */
            next = clock_mono_ms() + 1000;
            continue;
        }
        int64_t started = clock_mono_ms();
        int stopped = 0;
        for (size_t i = 0; i < s->ninstances && !stopped; i++) {
            memset(t, 0, sizeof(*t));
            for (size_t k = 0; k <= s->reg->count; k++) { /* keys written from now on stay in the estimate */
                const struct namespace_entry *e = registry_entry(s->reg, k);
                if (e && e->instance == (int)i && registry_has_budget(e))
                    t->mark[e->stats_slot] = budget_pass_begin(e->stats_slot);
            }
            char err[256] = "";
            int64_t inst_started = clock_mono_ms();
            int rc = sampler_scan_instance(s, (int)i, t, err, sizeof(err));
            if (rc == 1) {
                stopped = 1;
            } else if (rc == 0) {
                sampler_publish(s, (int)i, t, inst_started);
                if (s->failing[i])
                    log_event(LOG_INFO, "sampler_instance_ok", &(struct log_fields){.instance = s->instance_names[i]},
                              "sampler: instance '%s' scanned again", s->instance_names[i]);
                s->failing[i] = 0;
            } else if (!s->failing[i]) { /* keep its last counts; say it once */
                log_event(LOG_WARN, "sampler_instance_failed", &(struct log_fields){.instance = s->instance_names[i]},
                          "sampler: instance '%s': %s; its namespace counts are not updated", s->instance_names[i],
                          err);
                s->failing[i] = 1;
            }
        }
        if (stopped) break;
        next = started + interval;
    }
    free(t);
    return NULL;
}

/* The INFO poller's view of one primary of a cluster instance. */
struct poll_node {
    struct slotmap_node at;
    struct syncconn *c;                        /* kept open; NULL: opened at the next round */
    struct topology_node node;                 /* addr, up, last capacity reading */
    char problems[TOPOLOGY_NODE_PROBLEMS_MAX]; /* its lines of the last round that judged it */
};

/* ... and of a cluster instance: its primaries as the last slot map that could be read listed them. */
struct poll_cluster {
    struct poll_node *nodes; /* SLOTMAP_MAX_NODES */
    int n;
};

/* pc's primaries become list[0..n): the nodes still listed keep their connection and last result. */
static void poll_cluster_adopt(struct poll_cluster *pc, const struct slotmap_node *list, int n)
{
    struct poll_node *next = xcalloc(SLOTMAP_MAX_NODES, sizeof(*next));
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < pc->n; k++) {
            if (pc->nodes[k].at.port != list[i].port || strcmp(pc->nodes[k].at.host, list[i].host) != 0) continue;
            next[i] = pc->nodes[k];
            pc->nodes[k].c = NULL; /* moved */
            break;
        }
        next[i].at = list[i];
        snprintf(next[i].node.addr, sizeof(next[i].node.addr), "%s:%d", list[i].host, list[i].port);
    }
    for (int k = 0; k < pc->n; k++) syncconn_close(pc->nodes[k].c); /* nodes no longer primaries */
    free(pc->nodes);
    pc->nodes = next;
    pc->n = n;
}

/* Append the whole lines of text to out[0..len) (NUL-terminated) while they fit. */
static void lines_append(char *out, size_t len, const char *text)
{
    size_t used = strlen(out);
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) + 1 : strlen(line);
        if (used + n + 1 > len) return;
        memcpy(out + used, line, n);
        used += n;
        out[used] = '\0';
        line += n;
    }
}

/*
 * One round of the INFO poller over cluster instance inst: the primaries from the slot map (the
 * first seed that answers; when none does, the last known list, and a problem line; a sentinel
 * instance: its primary and the replicas its sentinels list, so a replica that would fail the
 * guard is reported before a failover promotes it), then INFO
 * on a connection of its own to each (kept open): the guard's checks per node (topology_check_node),
 * its capacity, an unreachable node or a failed INFO as a problem naming the node. Recorded
 * with topology_record_cluster. Returns 1 when a node was loading (asked again a second later).
 */
static int poll_cluster_round(struct sampler *s, int inst, struct poll_cluster *pc)
{
    const struct instance_conf *ic = &s->instances[inst];
    const char *name = s->instance_names[inst];
    char *problems = xmalloc(TOPOLOGY_PROBLEMS_MAX);
    problems[0] = '\0';
    struct slotmap_node *list = xmalloc(SLOTMAP_MAX_NODES * sizeof(*list));
    char err[400];
    int n = syncconn_primaries(ic, (int)s->connect_timeout_ms, s->halt, list, SLOTMAP_MAX_NODES, err, sizeof(err));
    if (n >= 0 && ic->sentinel) { /* and the replicas a failover may promote, judged as the primary is */
        char rerr[400];
        int r = syncconn_sentinel_replicas(ic, (int)s->connect_timeout_ms, s->halt, list + n, SLOTMAP_MAX_NODES - n,
                                           rerr, sizeof(rerr));
        if (r > 0) n += r;
    }
    if (n >= 0) {
        poll_cluster_adopt(pc, list, n);
    } else {
        char line[600];
        snprintf(line, sizeof(line), "instance '%s' slot map unreadable: %s\n", name, err);
        lines_append(problems, TOPOLOGY_PROBLEMS_MAX, line);
    }
    free(list);
    int loading = 0;
    for (int i = 0; i < pc->n; i++) {
        struct poll_node *pn = &pc->nodes[i];
        if (!pn->c)
            pn->c =
                syncconn_open_node(ic, pn->at.host, pn->at.port, (int)s->connect_timeout_ms, s->halt, err, sizeof(err));
        if (!pn->c) {
            pn->node.up = 0;
            snprintf(pn->problems, sizeof(pn->problems), "instance '%s' node %s: unreachable (%s)\n", name,
                     pn->node.addr, err);
        } else {
            const char *argv[1] = {"INFO"};
            size_t argvlen[1] = {4};
            redisReply *r = syncconn_command(pn->c, 1, argv, argvlen);
            if (r && r->type == REDIS_REPLY_STRING) {
                pn->node.up = 1;
                if (topology_info_loading(r->str)) {
                    loading = 1; /* not judged: its last result stands */
                } else {
                    struct topology_capacity cap;
                    topology_check_node(name, pn->node.addr, r->str, pn->problems, sizeof(pn->problems));
                    if (topology_parse_capacity(r->str, &cap) == 0) {
                        cap.read_ms = clock_mono_ms();
                        pn->node.capacity = cap;
                    }
                }
            } else { /* an error or a lost connection: a new one next time */
                pn->node.up = 0;
                snprintf(pn->problems, sizeof(pn->problems), "instance '%s' node %s: INFO failed (%s)\n", name,
                         pn->node.addr,
                         !r                             ? syncconn_error(pn->c)
                         : r->type == REDIS_REPLY_ERROR ? r->str
                                                        : "not a bulk string");
                syncconn_close(pn->c);
                pn->c = NULL;
            }
            if (r) freeReplyObject(r);
        }
        lines_append(problems, TOPOLOGY_PROBLEMS_MAX, pn->problems);
    }
    struct topology_node *nodes = xmalloc(SLOTMAP_MAX_NODES * sizeof(*nodes));
    for (int i = 0; i < pc->n; i++) nodes[i] = pc->nodes[i].node;
    topology_record_cluster(s->proxy, inst, nodes, pc->n, problems);
    free(nodes);
    free(problems);
    return loading;
}

/*
 * The INFO poller: every backend-info-interval, INFO on a connection of its own per instance
 * (kept open, opened again after an error) for the topology guard and the capacity gauges
 * (topology_on_info_text); a cluster instance's, on one per primary (poll_cluster_round). Not
 * on the shared connections: an INFO in flight there holds the next batch of client requests
 * for a round trip, and a later request of another client on another connection could reach
 * Redis first (test_proxy's arrival-order test saw it).
 */
static void *sampler_poll(void *arg)
{
    struct sampler *s = arg;
    struct syncconn *conns[CONFIG_MAX_INSTANCES] = {0};
    struct poll_cluster clusters[CONFIG_MAX_INSTANCES] = {0};
    int64_t next = clock_mono_ms();
    for (;;) {
        if (sampler_sleep_until(s, next)) break;
        pthread_mutex_lock(&s->lock);
        int64_t interval = s->info_interval_ms;
        pthread_mutex_unlock(&s->lock);
        int64_t started = clock_mono_ms();
        int loading = 0;
        for (size_t i = 0; i < s->ninstances; i++) {
            if (s->instances[i].cluster || s->instances[i].sentinel) { /* a sentinel's: its one primary */
                loading |= poll_cluster_round(s, (int)i, &clusters[i]);
                continue;
            }
            if (!conns[i]) {
                char err[256] = "";
                conns[i] =
                    syncconn_open_stoppable(&s->instances[i], (int)s->connect_timeout_ms, s->halt, err, sizeof(err));
            }
            if (!conns[i]) continue; /* unreachable: the workers' connections say so (/healthz) */
            const char *argv[1] = {"INFO"};
            size_t argvlen[1] = {4};
            redisReply *r = syncconn_command(conns[i], 1, argv, argvlen);
            if (r && r->type == REDIS_REPLY_STRING)
                loading |= topology_on_info_text(s->proxy, (int)i, s->instance_names[i], r->str);
            if (!r || r->type != REDIS_REPLY_STRING) { /* an error or a lost connection: a new one next time */
                syncconn_close(conns[i]);
                conns[i] = NULL;
            }
            if (r) freeReplyObject(r);
        }
        /* a loading instance is asked again a second later, as the workers' guard does */
        next = started + (loading && interval > 1000 ? 1000 : interval);
    }
    for (size_t i = 0; i < s->ninstances; i++) {
        if (conns[i]) syncconn_close(conns[i]);
        poll_cluster_adopt(&clusters[i], NULL, 0);
        free(clusters[i].nodes);
    }
    return NULL;
}

int64_t sampler_scan_interval(const struct config *cfg)
{
    if (cfg->namespace_scan_interval_ms > 0) return cfg->namespace_scan_interval_ms;
    return registry_any_budget(cfg->registry) ? BUDGET_SCAN_INTERVAL_MS : 0;
}

struct sampler *sampler_start(const struct config *cfg, struct proxy *p)
{
    struct sampler *s = xcalloc(1, sizeof(*s));
    s->reg = registry_copy(cfg);
    if (!s->reg) {
        free(s);
        return NULL;
    }
    s->proxy = p;
    s->interval_ms = sampler_scan_interval(cfg);
    s->info_interval_ms = cfg->backend_info_interval_ms;
    s->connect_timeout_ms = cfg->connect_timeout_ms;
    s->ninstances = cfg->ninstances;
    for (size_t i = 0; i < cfg->ninstances; i++) {
        config_instance_copy(&s->instances[i], &cfg->instances[i]);
        s->instance_names[i] = s->instances[i].name;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->halt = syncconn_stop_new();
    int err = pthread_create(&s->info_thread, NULL, sampler_poll, s);
    s->polling = err == 0;
    if (err == 0 && s->interval_ms > 0) {
        err = pthread_create(&s->thread, NULL, sampler_run, s);
        s->scanning = err == 0;
    }
    if (err != 0) {
        log_event(LOG_ERROR, "sampler_start_failed", NULL, "sampler: cannot start its thread: %s", strerror(err));
        sampler_stop(s);
        return NULL;
    }
    if (s->scanning)
        log_event(LOG_INFO, "sampler_started", NULL,
                  "sampler: one pass every %lldms (SCAN COUNT %s, %d ms between calls)", (long long)s->interval_ms,
                  SAMPLER_SCAN_COUNT, SAMPLER_PAUSE_MS);
    return s;
}

void sampler_update(struct sampler *s, const struct config *cfg)
{
    if (!s) return;
    struct registry *r = registry_copy(cfg);
    pthread_mutex_lock(&s->lock);
    if (r) {
        registry_free(s->pending);
        s->pending = r;
    }
    s->interval_ms = sampler_scan_interval(cfg);
    s->info_interval_ms = cfg->backend_info_interval_ms;
    pthread_cond_broadcast(&s->wake);
    int start = !s->scanning && s->interval_ms > 0;
    pthread_mutex_unlock(&s->lock);
    if (!start) return;
    /* budgets added by a reload need counts: the passes begin now (the thread only reads what
     * it shares with this one under the lock) */
    int err = pthread_create(&s->thread, NULL, sampler_run, s);
    s->scanning = err == 0;
    if (err != 0)
        log_event(LOG_ERROR, "sampler_start_failed", NULL, "sampler: cannot start its thread: %s", strerror(err));
    else
        log_event(LOG_INFO, "sampler_started", NULL, "sampler: one pass every %lldms (started by a reload)",
                  (long long)s->interval_ms);
}

void sampler_stop(struct sampler *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
    syncconn_stop_trip(s->halt); /* an INFO or SCAN waiting on a silent backend ends now */
    if (s->scanning) pthread_join(s->thread, NULL);
    if (s->polling) pthread_join(s->info_thread, NULL);
    syncconn_stop_free(s->halt);
    registry_free(s->reg);
    registry_free(s->pending);
    for (size_t i = 0; i < s->ninstances; i++) config_instance_free(&s->instances[i]);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

void sampler_format_prometheus(const char *const *instances, size_t ninstances, struct bytebuf *out)
{
    static uint64_t keys[STATS_NS_MAX], depth[STATS_NS_MAX]; /* the admin's copy (main thread only) */
    static unsigned char has_keys[STATS_NS_MAX], has_depth[STATS_NS_MAX];
    int64_t done[CONFIG_MAX_INSTANCES], took[CONFIG_MAX_INSTANCES];
    pthread_mutex_lock(&results_lock);
    memcpy(keys, result_keys, sizeof(keys));
    memcpy(depth, result_depth, sizeof(depth));
    memcpy(has_keys, result_has_keys, sizeof(has_keys));
    memcpy(has_depth, result_has_depth, sizeof(has_depth));
    memcpy(done, result_done_ms, sizeof(done));
    memcpy(took, result_duration_ms, sizeof(took));
    pthread_mutex_unlock(&results_lock);
    int any = 0;
    for (size_t i = 0; i < ninstances && i < CONFIG_MAX_INSTANCES; i++) any |= done[i] != 0;
    if (!any) return;
    stats_format_ns_gauge("keygate_namespace_keys", "keys of the namespace on its instance (the sampler's last pass)",
                          keys, has_keys, out);
    stats_format_ns_gauge("keygate_namespace_depth",
                          "summed LLEN/XLEN/ZCARD of a depth namespace's keys (the sampler's last pass)", depth,
                          has_depth, out);
    char line[256];
    int64_t now = clock_mono_ms();
    bytebuf_add(out, STR_AND_LEN("# HELP keygate_namespace_scan_age_seconds seconds since the sampler's last "
                                 "complete pass over the instance\n# TYPE keygate_namespace_scan_age_seconds gauge\n"));
    for (size_t i = 0; i < ninstances && i < CONFIG_MAX_INSTANCES; i++) {
        if (!done[i]) continue;
        int n = snprintf(line, sizeof(line), "keygate_namespace_scan_age_seconds{backend=\"%s\"} %.3f\n", instances[i],
                         (double)(now - done[i]) / 1000.0);
        if (n > 0 && (size_t)n < sizeof(line)) bytebuf_add(out, line, (size_t)n);
    }
    bytebuf_add(out, STR_AND_LEN("# HELP keygate_namespace_scan_duration_seconds how long the sampler's last pass "
                                 "over the instance took\n# TYPE keygate_namespace_scan_duration_seconds gauge\n"));
    for (size_t i = 0; i < ninstances && i < CONFIG_MAX_INSTANCES; i++) {
        if (!done[i]) continue;
        int n = snprintf(line, sizeof(line), "keygate_namespace_scan_duration_seconds{backend=\"%s\"} %.3f\n",
                         instances[i], (double)took[i] / 1000.0);
        if (n > 0 && (size_t)n < sizeof(line)) bytebuf_add(out, line, (size_t)n);
    }
}

void sampler_reset(void)
{
    pthread_mutex_lock(&results_lock);
    memset(result_keys, 0, sizeof(result_keys));
    memset(result_depth, 0, sizeof(result_depth));
    memset(result_has_keys, 0, sizeof(result_has_keys));
    memset(result_has_depth, 0, sizeof(result_has_depth));
    memset(result_done_ms, 0, sizeof(result_done_ms));
    memset(result_duration_ms, 0, sizeof(result_duration_ms));
    pthread_mutex_unlock(&results_lock);
}
