/* nodes.c: each worker's node model of every instance: the node table, its slot map, and the pools of connections to each node. */
#include "nodes.h"

#include "sentinelwatch.h"
#include "tls.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How often the connections are checked against backend-timeout. */
#define TIMEOUT_TICK_MS 250

static void nodes_ask_now(struct nodes *t);

static const struct instance_conf *nodes_conf(const struct nodes *t)
{
    return &t->worker->cfg->instances[t->instance];
}

/* The ordering domain of node `node` of t (backend_would_reorder): a single server's is its instance's. */
static int nodes_domain(const struct nodes *t, int node)
{
    return backend_domain(t->instance, t->kind == NODES_ONE ? -1 : node);
}

/* Set up connection b of node `node` (zeroed) for t: its place, then closed and ready to connect. */
static void nodes_conn_init(struct nodes *t, struct backend *b, int node, int resp3, int ordinal)
{
    b->worker = t->worker;
    b->instance = t->instance;
    b->ordinal = ordinal;
    b->node = node;
    b->domain = nodes_domain(t, node);
    b->resp3 = (uint8_t)(resp3 != 0);
    b->guard = t->kind == NODES_ONE; /* a cluster's or sentinel's nodes: the INFO poller checks each */
    b->server = &t->map.nodes[node];
    b->ssl_ctx = t->ssl_ctx;
    b->pins = &t->pins;
    b->pinned = ordinal < 0;
    backend_init(b);
}

/* Is node k's every pool closed (never opened, or retired)? Then none of its callbacks can run. */
static int nodes_closed(const struct nodes *t, int k)
{
    const struct backend_pool *p = t->pools[k];
    return (p[0].nconns == 0 || p[0].retired) && (p[1].nconns == 0 || p[1].retired);
}

/* Node `node`'s pool of protocol resp3, its connections opened on first use (and again once retired). */
static struct backend_pool *nodes_pool(struct nodes *t, int node, int resp3)
{
    assert(node >= 0 && node < t->map.nnodes);
    struct backend_pool *pool = &t->pools[node][resp3 ? 1 : 0];
    if (__builtin_expect(pool->nconns > 0 && !pool->retired, 1)) return pool;
    if (pool->nconns == 0) {
        int n = nodes_conf(t)->connections > 0 ? nodes_conf(t)->connections : 1;
        pool->conns = xcalloc((size_t)n, sizeof(*pool->conns));
        for (int j = 0; j < n; j++) nodes_conn_init(t, &pool->conns[j], node, resp3, j);
        /* published only now: nodes_status reads the pools from other threads */
        __atomic_store_n(&pool->nconns, n, __ATOMIC_RELEASE);
        for (int j = 0; j < n; j++) backend_connect(&pool->conns[j]);
    } else {
        __atomic_store_n(&pool->retired, 0, __ATOMIC_RELAXED);
        for (int j = 0; j < pool->nconns; j++) backend_reopen(&pool->conns[j]);
    }
    return pool;
}

/* Node `node` owns no slot: close its shared connections, with no reconnect (nodes_pool opens
 * them again). A node with something in flight is left for the next map. */
static void nodes_retire(struct nodes *t, int node)
{
    if (nodes_closed(t, node)) return;
    struct backend_pool *pools = t->pools[node];
    for (int p = 0; p < 2; p++)
        for (int j = 0; j < pools[p].nconns; j++)
            if (backend_busy(&pools[p].conns[j])) return;
    const struct instance_conf *ic = nodes_conf(t);
    const struct slotmap_node *n = &t->map.nodes[node];
    log_event(LOG_INFO, "cluster_node_left",
              &(struct log_fields){.instance = ic->name, .backend_host = n->host, .backend_port = n->port},
              "instance '%s': node %s:%d owns no slot in the map: its connections are closed", ic->name, n->host,
              n->port);
    for (int p = 0; p < 2; p++) {
        if (pools[p].nconns == 0) continue;
        for (int j = 0; j < pools[p].nconns; j++) backend_retire(&pools[p].conns[j]);
        __atomic_store_n(&pools[p].retired, 1, __ATOMIC_RELAXED);
    }
}

struct nodes *nodes_new(struct worker *w, int instance, enum nodes_kind kind)
{
    struct nodes *t = xcalloc(1, sizeof(*t));
    t->worker = w;
    t->instance = instance;
    t->kind = kind;
    slotmap_init(&t->map);
    TAILQ_INIT(&t->pins.idle[0]);
    TAILQ_INIT(&t->pins.idle[1]);
    TAILQ_INIT(&t->pins.pinned);
    if (kind == NODES_MAP) t->parsed = xcalloc(1, sizeof(*t->parsed));
    if (kind == NODES_ONE) { /* its one server owns every slot, for good */
        const struct instance_conf *ic = &w->cfg->instances[instance];
        slotmap_node_set(&t->map.nodes[0], ic->host, strnlen(ic->host, SLOTMAP_HOST_MAX - 1), ic->port);
        t->map.nnodes = 1;
        memset(t->map.owner, 0, sizeof(t->map.owner));
    }
    return t;
}

void nodes_delete(struct nodes *t)
{
    if (!t) return;
    free(t->parsed);
    free(t);
}

/* ---- the node table ---- */

/* An entry of a full table that may take another address (nodes_index), -1 when none. */
static int nodes_reusable(const struct nodes *t, const unsigned char *keep)
{
    unsigned char used[SLOTMAP_MAX_NODES] = {0};
    for (int s = 0; s < SLOTMAP_SLOTS; s++)
        if (t->map.owner[s] >= 0) used[t->map.owner[s]] = 1;
    const struct backend *b;
    TAILQ_FOREACH(b, &t->pins.pinned, pinned_link) used[b->node] = 1;
    for (int k = 0; k < t->map.nnodes; k++)
        if (!used[k] && !(keep && keep[k]) && nodes_closed(t, k)) return k;
    return -1;
}

int nodes_index(struct nodes *t, const char *host, int port, const unsigned char *keep)
{
    int i = slotmap_find_node(&t->map, host, port);
    if (i >= 0 || strlen(host) >= SLOTMAP_HOST_MAX) return i;
    if (t->map.nnodes < SLOTMAP_MAX_NODES) {
        i = t->map.nnodes++;
    } else if ((i = nodes_reusable(t, keep)) < 0) {
        STAT_INC(&t->worker->stats, cluster_nodes_full);
        if (!t->full_logged) {
            const char *name = nodes_conf(t)->name;
            log_event(LOG_ERROR, "cluster_nodes_full",
                      &(struct log_fields){.instance = name, .backend_host = host, .backend_port = port},
                      "instance '%s': no node entry free for %s:%d: all %d are nodes in the map, or have requests "
                      "pending or connections pinned; the slots it owns have no owner until one is free",
                      name, host, port, SLOTMAP_MAX_NODES);
            t->full_logged = 1;
        }
        return -1;
    }
    t->full_logged = 0;
    assert(i >= 0 && i < SLOTMAP_MAX_NODES);
    assert(nodes_closed(t, i));                                   /* a new or reused entry has no open connection */
    slotmap_node_set(&t->map.nodes[i], host, strlen(host), port); /* fits: checked above */
    return i;
}

void nodes_adopt_map(struct nodes *t, const struct slotmap *parsed, int asked)
{
    int16_t index_of[SLOTMAP_MAX_NODES];
    unsigned char keep[SLOTMAP_MAX_NODES] = {0}; /* entries this map hands out, and the one asked: not reused */
    if (asked >= 0) keep[asked] = 1;
    for (int k = 0; k < SLOTMAP_MAX_NODES; k++) index_of[k] = -1;
    for (int k = 0; k < parsed->nnodes; k++) {
        index_of[k] = (int16_t)nodes_index(t, parsed->nodes[k].host, parsed->nodes[k].port, keep);
        if (index_of[k] >= 0) keep[index_of[k]] = 1;
    }
    unsigned char owns[SLOTMAP_MAX_NODES] = {0};
    for (int s = 0; s < SLOTMAP_SLOTS; s++) {
        int k = parsed->owner[s];
        t->map.owner[s] = k >= 0 && k < SLOTMAP_MAX_NODES ? index_of[k] : -1;
        if (t->map.owner[s] >= 0) owns[t->map.owner[s]] = 1;
    }
    for (int k = 0; k < t->map.nnodes; k++)
        if (!owns[k] && k != asked) nodes_retire(t, k);
}

int nodes_adopt_primary(struct nodes *t, int confirmed, const char *host, int port)
{
    int node = confirmed && host[0] ? nodes_index(t, host, port, NULL) : -1;
    for (int s = 0; s < SLOTMAP_SLOTS; s++) t->map.owner[s] = (int16_t)node;
    return node;
}

/*
 * A sentinel instance's primary, as its watcher confirmed it (sentinelwatch.h). With `retire`
 * (from a timer: no connection is in a callback), nodes that are not the primary are retired
 * once nothing is owed on them: a request written to the old primary gets its answer if it comes.
 */
static void nodes_follow(struct nodes *t, int retire)
{
    struct sentinelwatch_state st;
    if (sentinelwatch_get(t->instance, &st) != 0) return;
    if (!t->adopted || st.generation != t->generation) {
        t->adopted = 1;
        t->generation = st.generation;
        int node = nodes_adopt_primary(t, st.confirmed, st.primary.host, st.primary.port);
        if (node >= 0) (void)nodes_pool(t, node, 0); /* its connections ready before the first request */
    }
    int primary = t->map.owner[0];
    for (int k = 0; k < t->map.nnodes && retire; k++)
        if (k != primary) nodes_retire(t, k);
}

void nodes_slots_reply(struct backend *b, const char *reply, size_t len)
{
    struct nodes *t = b->worker->nodes[b->instance];
    if (!t || t->kind != NODES_MAP) return;
    t->refreshing = 0;
    t->asking = NULL;
    char err[200];
    const char *host;
    int port;
    backend_address(b, &host, &port);
    if (slotmap_parse_slots(t->parsed, reply, len, host, err, sizeof(err)) != 0) {
        const char *name = nodes_conf(t)->name;
        log_event(LOG_WARN, "cluster_map_failed",
                  &(struct log_fields){.instance = name, .backend_host = host, .backend_port = port},
                  "instance '%s': the slot map from %s:%d is unusable: %s", name, host, port, err);
        nodes_refresh(b->worker, b->instance); /* another node, soon */
        return;
    }
    nodes_adopt_map(t, t->parsed, b->node);
}

void nodes_lost(struct backend *b)
{
    struct nodes *t = b->worker->nodes[b->instance];
    if (!t || t->kind == NODES_ONE) return;
    if (t->asking == b) { /* its CLUSTER SLOTS was failed: asked again now */
        t->refreshing = 0;
        t->asking = NULL;
    }
    nodes_refresh(b->worker, b->instance); /* its slots may have a new owner (a failover) */
}

/* Ask for the slot map on a connection that is up (any node), else on the next seed's. */
static void nodes_ask_now(struct nodes *t)
{
    struct worker *w = t->worker;
    if (t->kind == NODES_MOVES) {
        nodes_follow(t, 1); /* from its timers (or at start) */
        return;
    }
    if (t->kind != NODES_MAP || t->refreshing || w->stopping) return;
    struct backend *b = NULL;
    for (int n = 0; n < t->map.nnodes && !b; n++) {
        struct backend_pool *pool = &t->pools[n][0];
        if (pool->nconns > 0 && pool->conns[0].state == BACKEND_READY) b = &pool->conns[0];
    }
    if (!b) {
        const struct instance_conf *ic = nodes_conf(t);
        int seed = t->next_seed++ % ic->nseeds;
        int node = nodes_index(t, ic->seed_host[seed], ic->seed_port[seed], NULL);
        if (node < 0) return;
        b = &nodes_pool(t, node, 0)->conns[0];
        if (b->state == BACKEND_DOWN) return; /* it reconnects, and its failure asks again */
    }
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    t->refreshing = 1;
    t->asking = b;
    t->last_refresh_ms = clock_mono_ms();
    STAT_INC(&w->stats, cluster_refreshes);
    backend_send_own(b, BACKEND_OWN_SLOTS, 2, argv);
}

static void nodes_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    nodes_ask_now(arg);
}

void nodes_refresh(struct worker *w, int instance)
{
    struct nodes *t = w->nodes[instance];
    if (!t || t->kind == NODES_ONE) return;
    if (t->kind == NODES_MOVES) { /* its watcher checks the primary again; its state is read now */
        int64_t now = clock_mono_ms();
        if (now - t->last_refresh_ms >= NODES_SENTINEL_POLL_MS) {
            t->last_refresh_ms = now;
            sentinelwatch_poke(instance);
        }
        nodes_follow(t, 0); /* a caller may be inside a connection's callback: its timer retires */
        return;
    }
    if (t->refreshing || w->stopping) return;
    int64_t wait = t->last_refresh_ms + NODES_REFRESH_MIN_MS - clock_mono_ms();
    if (wait <= 0) {
        nodes_ask_now(t);
        return;
    }
    if (evtimer_pending(t->soon, NULL)) return;
    struct timeval tv = {wait / 1000, (wait % 1000) * 1000};
    evtimer_add(t->soon, &tv);
}

void nodes_moved(struct worker *w, int instance, unsigned slot, const char *host, int port)
{
    struct nodes *t = w->nodes[instance];
    if (!t || t->kind == NODES_ONE) return;
    int node = nodes_index(t, host, port, NULL);
    if (node >= 0 && slot < SLOTMAP_SLOTS) t->map.owner[slot] = (int16_t)node;
    nodes_refresh(w, instance);
}

/* ---- questions about an instance ---- */

int nodes_may_move(const struct worker *w, int instance)
{
    return w->nodes[instance] && w->nodes[instance]->kind != NODES_ONE;
}

int nodes_follow_failover(const struct worker *w, int instance)
{
    return w->nodes[instance] && w->nodes[instance]->kind == NODES_MOVES;
}

int nodes_sharded(const struct worker *w, int instance)
{
    return w->nodes[instance] && w->nodes[instance]->kind == NODES_MAP;
}

int nodes_owner(const struct worker *w, int instance, int slot)
{
    const struct nodes *t = w->nodes[instance];
    return t && t->kind != NODES_ONE && slot >= 0 && slot < SLOTMAP_SLOTS ? slotmap_owner(&t->map, (unsigned)slot) : -1;
}

uint64_t nodes_owner_id(const struct worker *w, int instance, int slot)
{
    const struct nodes *t = w->nodes[instance];
    if (!t || t->kind == NODES_ONE) return 0;
    int node = slotmap_owner(&t->map, (unsigned)(slot >= 0 && slot < SLOTMAP_SLOTS ? slot : 0));
    return node < 0 ? ~(uint64_t)0 : t->map.nodes[node].id;
}

int nodes_id_serves(const struct worker *w, int instance, uint64_t id)
{
    const struct nodes *t = w->nodes[instance];
    if (!t || t->kind == NODES_ONE) return id == 0;
    unsigned char named[SLOTMAP_MAX_NODES] = {0}; /* the entries of that address, so a slot costs one lookup */
    int any = 0;
    for (int k = 0; k < t->map.nnodes; k++) any |= named[k] = t->map.nodes[k].id == id;
    for (unsigned slot = 0; any && slot < SLOTMAP_SLOTS; slot++) {
        int node = t->map.owner[slot];
        if (node >= 0 && named[node]) return 1;
    }
    return 0;
}

void nodes_address(const struct worker *w, int instance, int node, const char **host, int *port)
{
    const struct nodes *t = w->nodes[instance];
    assert(t && node >= 0 && node < t->map.nnodes);
    *host = t->map.nodes[node].host;
    *port = t->map.nodes[node].port;
}

/* Order of two nodes of a map by address: host bytes, then port. */
static int node_address_cmp(const struct slotmap_node *a, const struct slotmap_node *b)
{
    int c = strcmp(a->host, b->host);
    return c ? c : (a->port > b->port) - (a->port < b->port);
}

int nodes_primaries(const struct worker *w, int instance, int *slots, int max)
{
    const struct nodes *t = w->nodes[instance];
    if (!t || t->kind == NODES_ONE) return 0;
    int first[SLOTMAP_MAX_NODES]; /* each node's lowest slot, -1: it owns none */
    for (int k = 0; k < SLOTMAP_MAX_NODES; k++) first[k] = -1;
    for (int s = SLOTMAP_SLOTS - 1; s >= 0; s--) {
        int k = t->map.owner[s];
        if (k >= 0) first[k] = s;
    }
    int n = 0, order[SLOTMAP_MAX_NODES] = {0};
    for (int k = 0; k < t->map.nnodes; k++) {
        if (first[k] < 0) continue;
        int i = n++; /* insertion by address: a cluster has a few primaries */
        while (i > 0 && node_address_cmp(&t->map.nodes[order[i - 1]], &t->map.nodes[k]) > 0) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = k;
    }
    if (n > max) n = max;
    for (int i = 0; i < n; i++) slots[i] = first[order[i]];
    return n;
}

/* ---- connections ---- */

/* A dedicated connection to node `node` of t for owner (nodes_conn's pinned case). */
static struct backend *nodes_pin(struct nodes *t, int node, int resp3, struct client *owner)
{
    struct worker *w = t->worker;
    struct backend_list *idle = &t->pins.idle[resp3 ? 1 : 0];
    struct backend *b, *next;
    for (b = TAILQ_FIRST(idle); b; b = next) {
        next = TAILQ_NEXT(b, link);
        if (b->node != node) continue; /* another node's */
        TAILQ_REMOVE(idle, b, link);
        b->in_idle = 0;
        if (b->state != BACKEND_DOWN) {
            b->owner = owner;
            return b;
        }
        backend_abandon(b);
    }
    if (t->pins.npinned >= w->cfg->max_pinned) return NULL;
    b = xcalloc(1, sizeof(*b));
    nodes_conn_init(t, b, node, resp3, -1);
    t->pins.npinned++;
    TAILQ_INSERT_TAIL(&t->pins.pinned, b, pinned_link);
    backend_connect(b);
    if (b->state == BACKEND_DOWN) return NULL; /* backend_close already queued it for reaping */
    b->owner = owner;
    return b;
}

struct backend *nodes_conn_open(struct worker *w, int instance, const struct node_want *want)
{
    struct nodes *t = w->nodes[instance];
    if (__builtin_expect(!t, 0)) return NULL;
    int node;
    if (__builtin_expect(want->host != NULL, 0))
        node = t->kind != NODES_ONE ? nodes_index(t, want->host, want->port, NULL) : -1;
    else
        node = t->map.owner[want->slot >= 0 ? want->slot : 0];
    if (node < 0) return NULL; /* the slot's owner is not known yet */
    if (__builtin_expect(want->pinned, 0)) return nodes_pin(t, node, want->resp3, want->owner);
    struct backend_pool *pool = nodes_pool(t, node, want->resp3);
    struct backend *b = &pool->conns[want->client_id % (uint64_t)pool->nconns];
    return b->state == BACKEND_DOWN ? NULL : b;
}

int nodes_pin_full(const struct worker *w, int instance)
{
    return w->nodes[instance]->pins.npinned >= w->cfg->max_pinned;
}

const char *nodes_down_why(const struct worker *w, int instance)
{
    const struct nodes *t = w->nodes[instance];
    if (!t || t->kind != NODES_ONE) return NULL;
    const struct backend_pool *pool = &t->pools[0][0];
    const char *why = NULL;
    for (int i = 0; i < pool->nconns; i++) {
        const struct backend *b = &pool->conns[i];
        if (b->state == BACKEND_READY) return NULL;
        if (b->warned_down && strncmp(b->down_reason, "cannot resolve ", 15) == 0) why = b->down_reason;
    }
    return why;
}

/* Every TIMEOUT_TICK_MS: the connections of w against backend-timeout. */
static void nodes_tick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    (void)fd;
    (void)what;
    stats_flush(&w->stats); /* the replies counted since this worker's last read show in /metrics */
    int64_t timeout_ms = w->cfg->backend_timeout_ms;
    if (timeout_ms <= 0) return;
    int64_t now = clock_mono_ms();
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++) {
        struct nodes *t = w->nodes[i];
        if (!t) continue;
        for (int k = 0; k < t->map.nnodes; k++)
            for (int p = 0; p < 2; p++)
                for (int j = 0; j < t->pools[k][p].nconns; j++)
                    backend_check_timeout(&t->pools[k][p].conns[j], now, timeout_ms);
        struct backend *b, *next;
        for (b = TAILQ_FIRST(&t->pins.pinned); b; b = next) {
            next = TAILQ_NEXT(b, pinned_link); /* a timed-out one leaves the list */
            backend_check_timeout(b, now, timeout_ms);
        }
    }
}

int nodes_start(struct worker *w, const struct backend_hooks *hooks)
{
    const struct config *cfg = w->cfg;
    w->hooks = hooks;
    for (size_t i = 0; i < cfg->ninstances; i++) {
        const struct instance_conf *ic = &cfg->instances[i];
        SSL_CTX *ctx = NULL;
        if (ic->tls) {
            char err[300];
            ctx = tls_instance_ctx(ic, err, sizeof(err));
            if (!ctx) {
                log_event(LOG_ERROR, "backend_tls_config_failed", &(struct log_fields){.instance = ic->name},
                          "instance '%s': %s", ic->name, err);
                return -1;
            }
        }
        struct nodes *t = nodes_new(w, (int)i, ic->cluster ? NODES_MAP : ic->sentinel ? NODES_MOVES : NODES_ONE);
        t->ssl_ctx = ctx;
        if (t->kind != NODES_ONE) {
            t->soon = xevtimer_new(w->base, nodes_timer_cb, t);
            t->periodic = xevent_new(w->base, -1, EV_PERSIST, nodes_timer_cb, t);
            int64_t ms = t->kind == NODES_MOVES           ? NODES_SENTINEL_POLL_MS
                         : w->cfg->cluster_refresh_ms > 0 ? w->cfg->cluster_refresh_ms
                                                          : 10000;
            struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
            event_add(t->periodic, &tv);
        }
        __atomic_store_n(&w->nodes[i], t, __ATOMIC_RELEASE);
        if (t->kind == NODES_ONE)
            (void)nodes_pool(t, 0, 0); /* the RESP2 pool at start; the RESP3 one on first use */
        else
            nodes_ask_now(t);
    }
    w->backend_tick = xevent_new(w->base, -1, EV_PERSIST, nodes_tick_cb, w);
    struct timeval tv = {0, TIMEOUT_TICK_MS * 1000};
    event_add(w->backend_tick, &tv);
    return 0;
}

void nodes_free(struct worker *w)
{
    if (w->backend_tick) event_free(w->backend_tick);
    w->backend_tick = NULL;
    /* the idle dedicated connections first: closing one updates its instance's pins */
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++) {
        struct nodes *t = w->nodes[i];
        for (int p = 0; t && p < 2; p++) {
            struct backend *idle;
            while ((idle = TAILQ_FIRST(&t->pins.idle[p]))) {
                TAILQ_REMOVE(&t->pins.idle[p], idle, link);
                idle->in_idle = 0;
                backend_abandon(idle);
            }
        }
    }
    backend_reap(w);
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++) {
        struct nodes *t = w->nodes[i];
        if (!t) continue;
        for (int k = 0; k < t->map.nnodes; k++)
            for (int p = 0; p < 2; p++) {
                struct backend_pool *pool = &t->pools[k][p];
                for (int j = 0; j < pool->nconns; j++) backend_dispose(&pool->conns[j]);
                free(pool->conns);
                memset(pool, 0, sizeof(*pool));
            }
    }
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++) {
        struct nodes *t = w->nodes[i];
        if (!t) continue;
        if (t->soon) event_free(t->soon);
        if (t->periodic) event_free(t->periodic);
        if (t->ssl_ctx) SSL_CTX_free(t->ssl_ctx);
        nodes_delete(t);
        w->nodes[i] = NULL;
    }
    backend_worker_free(w);
}

void nodes_status(const struct proxy *p, int instance, struct nodes_status *out)
{
    *out = (struct nodes_status){0};
    for (int w = 0; w < p->nworkers; w++) {
        const struct nodes *t = __atomic_load_n(&p->workers[w].nodes[instance], __ATOMIC_ACQUIRE);
        if (!t) continue;
        int nnodes = __atomic_load_n(&t->map.nnodes, __ATOMIC_RELAXED);
        for (int k = 0; k < nnodes; k++) {
            for (int r = 0; r < 2; r++) {
                const struct backend_pool *pool = &t->pools[k][r];
                int n = __atomic_load_n(&pool->nconns, __ATOMIC_ACQUIRE);
                if (__atomic_load_n(&pool->retired, __ATOMIC_RELAXED)) continue; /* a node that left the map */
                out->connections += n;
                for (int j = 0; j < n; j++) {
                    if (__atomic_load_n(&pool->conns[j].state, __ATOMIC_RELAXED) == BACKEND_READY) out->up++;
                    out->in_flight += __atomic_load_n(&pool->conns[j].fifo_count, __ATOMIC_RELAXED);
                }
            }
        }
    }
}
