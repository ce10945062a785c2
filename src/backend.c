/* backend.c: connections to the backend instances: socket, TLS, the FIFO of replies owed, batching, reconnect. */
#include "backend.h"

#include "replies.h"
#include "sentinelwatch.h"
#include "slotmap.h"
#include "tls.h"
#include "topology.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
/* How often the connections are checked against backend-timeout. */
#define TIMEOUT_TICK_MS 250
/* The topology guard asks a loading instance's INFO again after this. */
#define TOPOLOGY_RECHECK_MS 1000
/* Keepalive probes on every backend socket: a peer gone without a FIN/RST (a half-open
 * connection) is found within KEEPIDLE + KEEPCNT x KEEPINTVL seconds, and TCP_USER_TIMEOUT
 * bounds how long written data may stay unacknowledged. */
#define KEEPALIVE_IDLE_S 10
#define KEEPALIVE_INTVL_S 5
#define KEEPALIVE_CNT 3
#define USER_TIMEOUT_DEFAULT_MS 30000 /* TCP_USER_TIMEOUT when backend-timeout is 0 */
/* Staged bytes past which a shared connection writes even with a batch in flight
 * (backend_holds): bounds how much a batch waits behind the one in flight. */
#define HOLD_MAX_BYTES 65536
/* Buffers past this size are given back once they are nearly empty again (a large
 * transfer ended); below it they are kept, so pipelined batches cause no realloc churn. */
#define BUF_KEEP_MAX (4 * 1024 * 1024)
/* A reply still arriving that holds more than this is checked against its client's
 * hard output limit (and dropped as it comes when nobody may keep it). */
#define PARTIAL_CHECK_BYTES (1024 * 1024)

/* A cluster instance on one worker (backend.h): its slot map and a pool per node and protocol. */
struct backend_cluster {
    struct worker *worker;
    int instance;
    struct slotmap map;                              /* node indexes are stable: they index pools */
    struct slotmap parsed;                           /* the CLUSTER SLOTS reply being adopted */
    struct backend_pool pools[SLOTMAP_MAX_NODES][2]; /* shared connections per node, RESP2 / RESP3 */
    int refreshing;                                  /* a CLUSTER SLOTS is in flight */
    int next_seed;                                   /* the seed node asked when no node is up */
    int64_t last_refresh_ms;                         /* monotonic: when the last CLUSTER SLOTS was sent */
    struct event *soon;                              /* a refresh held back by BACKEND_REFRESH_MIN_MS */
    struct event *periodic;                          /* every cluster-refresh (a sentinel instance: SENTINEL_POLL_MS) */
    int sentinel;                                    /* a sentinel instance: one primary, from its watcher */
    uint64_t generation;                             /* the watcher's state last adopted */
    int adopted;                                     /* generation holds one */
    int full_logged;                                 /* the node table's being full is logged (until it is not) */
};

static void backend_connect(struct backend *b);
static int backend_next_address(struct backend *b);
static void backend_make_idle(struct backend *b);
static void cluster_refresh_now(struct backend_cluster *cl);
static void backend_send_internal(struct backend *b, enum backend_own own, int argc, const char **argv);
static void backend_unstage(struct backend *b);
static void backend_io_close(struct backend *b);

static void backend_do_write(struct backend *b);
static void backend_timer_cb(evutil_socket_t fd, short what, void *arg);

static const struct instance_conf *backend_conf(const struct backend *b)
{
    return &b->worker->cfg->instances[b->instance];
}

/* The pool b belongs to: its instance's RESP2 pool, or the RESP3 one (backend_pool_index). */
static struct backend_pool *backend_pool_of(const struct backend *b)
{
    return &b->worker->pools[backend_pool_index(b->instance, b->resp3)];
}

/* The instance's RESP2 pool: it counts and lists every dedicated connection of the
 * instance, whatever their protocol (max-pinned is per instance). */
static struct backend_pool *backend_pin_pool(const struct backend *b)
{
    return &b->worker->pools[b->instance];
}

void backend_address(const struct backend *b, const char **host, int *port)
{
    const struct backend_cluster *cl = b->worker->clusters[b->instance];
    if (cl && b->node >= 0) {
        *host = cl->map.nodes[b->node].host;
        *port = cl->map.nodes[b->node].port;
        return;
    }
    *host = backend_conf(b)->host;
    *port = backend_conf(b)->port;
}

/* max-memory: count what b holds now (replies not yet framed, requests not yet written). */
static void backend_account(struct backend *b)
{
    size_t now = b->fd < 0 && !b->resolving ? 0 : b->rlen + b->out.len + (b->wbuf.len - b->woff);
    mem_set(b->worker, &b->mem_held, now);
}

/* A jitter seed that differs per connection and per process start. */
static uint32_t backend_seed(const struct backend *b)
{
    uint64_t x = clock_mono_ns() ^ ((uint64_t)(uintptr_t)b * 0x9E3779B97F4A7C15ull);
    uint32_t s = (uint32_t)(x ^ (x >> 32));
    return s ? s : 1;
}

/* xorshift32: the next value of b's jitter sequence. */
static uint32_t backend_random(struct backend *b)
{
    uint32_t x = b->rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b->rng = x;
    return x;
}

int backend_backoff_delay(int backoff_ms, uint32_t r)
{
    assert(backoff_ms > 0);
    return backoff_ms - (int)(r % (uint32_t)(backoff_ms / 5 + 1));
}

/* The shared pool number i of w (i < BACKEND_ALL_POOLS): the instances' pools, then
 * each cluster's node pools; NULL for a cluster slot that holds none. */
#define BACKEND_ALL_POOLS (BACKEND_NPOOLS + CONFIG_MAX_INSTANCES * SLOTMAP_MAX_NODES * 2)
static struct backend_pool *backend_shared_pool(struct worker *w, int i)
{
    if (i < BACKEND_NPOOLS) return w->pools ? &w->pools[i] : NULL;
    i -= BACKEND_NPOOLS;
    struct backend_cluster *cl = __atomic_load_n(&w->clusters[i / (SLOTMAP_MAX_NODES * 2)], __ATOMIC_ACQUIRE);
    if (!cl) return NULL;
    i %= SLOTMAP_MAX_NODES * 2;
    return &cl->pools[i / 2][i % 2];
}

/* Has b's oldest written entry waited past backend-timeout? Then b is closed (its entries
 * fail "timed out") and, if shared, reconnects. A connection carrying a blocking command
 * (backend_exempt) waits its timeout more, or forever for one that blocks forever;
 * subscriber connections are not checked (their frames come unasked). */
static void backend_check_timeout(struct backend *b, int64_t now, int64_t timeout_ms)
{
    if (b->fd < 0 || b->state != BACKEND_READY || b->subscriber || b->block_ms == 0) return;
    if (b->fifo_count <= b->unsent) return; /* nothing written is unanswered */
    if (b->block_ms > 0) timeout_ms += b->block_ms;
    if (now - b->waiting_since_ms < timeout_ms) return;
    char why[128];
    snprintf(why, sizeof(why), "no reply within backend-timeout (%lld ms): closed, its requests failed",
             (long long)timeout_ms);
    STAT_INC(&b->worker->stats, backend_timeouts);
    b->timed_out = 1;
    backend_close(b, why);
}

/* Every TIMEOUT_TICK_MS: the connections of w against backend-timeout. */
static void backend_tick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    (void)fd;
    (void)what;
    stats_flush(&w->stats); /* the replies counted since this worker's last read show in /metrics */
    int64_t timeout_ms = w->cfg->backend_timeout_ms;
    if (timeout_ms <= 0) return;
    int64_t now = clock_mono_ms();
    for (int i = 0; i < BACKEND_ALL_POOLS; i++) {
        struct backend_pool *pool = backend_shared_pool(w, i);
        if (!pool) continue;
        for (int j = 0; j < pool->nconns; j++) backend_check_timeout(&pool->conns[j], now, timeout_ms);
        if (i >= BACKEND_NPOOLS) continue; /* dedicated connections are listed in the instance's pools */
        struct backend *b, *next;
        for (b = TAILQ_FIRST(&pool->pinned); b; b = next) {
            next = TAILQ_NEXT(b, pinned_link); /* a timed-out one leaves the list */
            backend_check_timeout(b, now, timeout_ms);
        }
    }
}

/* Create the shared connections of `instance`'s pool for protocol resp3 (0: RESP2) and start
 * connecting them (every connection of an instance uses its RESP2 pool's TLS context). */
static void backend_pool_fill(struct worker *w, struct backend_pool *pool, int instance, int node, int resp3)
{
    const struct instance_conf *ic = &w->cfg->instances[instance];
    int n = ic->connections > 0 ? ic->connections : 1;
    pool->conns = xcalloc((size_t)n, sizeof(*pool->conns));
    for (int j = 0; j < n; j++) {
        struct backend *b = &pool->conns[j];
        b->worker = w;
        b->instance = instance;
        b->node = node;
        b->domain = backend_domain(instance, node);
        b->resp3 = (uint8_t)(resp3 != 0);
        b->slot = j;
        b->fd = -1;
        b->backoff_ms = BACKOFF_MIN_MS;
        b->block_ms = -1;
        b->rng = backend_seed(b);
        b->timer = xevtimer_new(w->base, backend_timer_cb, b);
    }
    /* published only now: backend_pool_status reads the pools from other threads */
    __atomic_store_n(&pool->nconns, n, __ATOMIC_RELEASE);
    for (int j = 0; j < n; j++) backend_connect(&pool->conns[j]);
}

static void backend_pool_open(struct worker *w, int instance, int resp3)
{
    backend_pool_fill(w, &w->pools[backend_pool_index(instance, resp3)], instance, -1, resp3);
}

/* ---- cluster instances ---- */

/*
 * A node entry of a full table that may take another address: it owns no slot in the map, the
 * caller does not hand it out (keep[k], keep may be NULL), its shared connections were never
 * opened or are retired (cluster_node_retire closed them with nothing owed, staged or flushing,
 * and no callback of theirs is running), and no dedicated connection (a pin, idle or not) is on
 * it. -1 when none.
 */
static int cluster_node_reusable(const struct backend_cluster *cl, const unsigned char *keep)
{
    unsigned char used[SLOTMAP_MAX_NODES] = {0};
    for (int s = 0; s < SLOTMAP_SLOTS; s++)
        if (cl->map.owner[s] >= 0) used[cl->map.owner[s]] = 1;
    const struct backend *b;
    TAILQ_FOREACH(b, &cl->worker->pools[cl->instance].pinned, pinned_link) {
        if (b->node >= 0) used[b->node] = 1;
    }
    for (int k = 0; k < cl->map.nnodes; k++) {
        if (used[k] || (keep && keep[k])) continue;
        const struct backend_pool *pools = cl->pools[k];
        if ((pools[0].nconns == 0 || pools[0].retired) && (pools[1].nconns == 0 || pools[1].retired)) return k;
    }
    return -1;
}

/*
 * The node host:port's index in cl's map, added (with no slot) when new: in a free entry, or
 * when the table is full in the entry of a node that left the map with nothing pending or pinned
 * on it (cluster_node_reusable; its retired connections reconnect to the new address on first
 * use). -1 when every entry is in use: logged (once until an entry is found again) and counted
 * (cluster_nodes_full), never silent. keep (may be NULL): entries the caller hands out meanwhile.
 */
static int cluster_node_index_keep(struct backend_cluster *cl, const char *host, int port, const unsigned char *keep)
{
    int i = slotmap_find_node(&cl->map, host, port);
    if (i >= 0 || strlen(host) >= SLOTMAP_HOST_MAX) return i;
    if (cl->map.nnodes < SLOTMAP_MAX_NODES) {
        i = cl->map.nnodes++;
    } else if ((i = cluster_node_reusable(cl, keep)) < 0) {
        STAT_INC(&cl->worker->stats, cluster_nodes_full);
        if (!cl->full_logged) {
            const char *name = cl->worker->cfg->instances[cl->instance].name;
            log_event(LOG_ERROR, "cluster_nodes_full",
                      &(struct log_fields){.instance = name, .backend_host = host, .backend_port = port},
                      "instance '%s': no node entry free for %s:%d: all %d are nodes in the map, or have requests "
                      "pending or connections pinned; the slots it owns have no owner until one is free",
                      name, host, port, SLOTMAP_MAX_NODES);
            cl->full_logged = 1;
        }
        return -1;
    }
    cl->full_logged = 0;
    assert(i >= 0 && i < SLOTMAP_MAX_NODES);
    /* a new or reused entry has no open connection: none of its callbacks can be running */
    assert((cl->pools[i][0].nconns == 0 || cl->pools[i][0].retired) &&
           (cl->pools[i][1].nconns == 0 || cl->pools[i][1].retired));
    snprintf(cl->map.nodes[i].host, SLOTMAP_HOST_MAX, "%s", host);
    cl->map.nodes[i].port = port;
    return i;
}

static int cluster_node_index(struct backend_cluster *cl, const char *host, int port)
{
    return cluster_node_index_keep(cl, host, port, NULL);
}

/* Node `node`'s pool of protocol resp3, its connections opened on first use (and again once retired). */
static struct backend_pool *cluster_pool(struct backend_cluster *cl, int node, int resp3)
{
    assert(node >= 0 && node < cl->map.nnodes);
    struct backend_pool *pool = &cl->pools[node][resp3 ? 1 : 0];
    if (pool->nconns == 0) {
        backend_pool_fill(cl->worker, pool, cl->instance, node, resp3);
    } else if (__builtin_expect(pool->retired, 0)) {
        __atomic_store_n(&pool->retired, 0, __ATOMIC_RELAXED);
        for (int j = 0; j < pool->nconns; j++) {
            pool->conns[j].backoff_ms = BACKOFF_MIN_MS;
            backend_connect(&pool->conns[j]);
        }
    }
    return pool;
}

/* Does any connection of node's pools hold something: a reply owed, bytes staged, a flush due? */
static int cluster_node_busy(const struct backend_cluster *cl, int node)
{
    for (int p = 0; p < 2; p++) {
        const struct backend_pool *pool = &cl->pools[node][p];
        for (int j = 0; j < pool->nconns; j++) {
            const struct backend *b = &pool->conns[j];
            if (b->fifo_count || b->dirty || b->out.len) return 1;
        }
    }
    return 0;
}

/* Node `node` owns no slot: close its shared connections, with no reconnect (cluster_pool opens
 * them again). A node with something in flight is left for the next map. */
static void cluster_node_retire(struct backend_cluster *cl, int node)
{
    struct backend_pool *pools = cl->pools[node];
    if ((pools[0].nconns == 0 || pools[0].retired) && (pools[1].nconns == 0 || pools[1].retired)) return;
    if (cluster_node_busy(cl, node)) return;
    const struct instance_conf *ic = &cl->worker->cfg->instances[cl->instance];
    const struct slotmap_node *n = &cl->map.nodes[node];
    log_event(LOG_INFO, "cluster_node_left",
              &(struct log_fields){.instance = ic->name, .backend_host = n->host, .backend_port = n->port},
              "instance '%s': node %s:%d owns no slot in the map: its connections are closed", ic->name, n->host,
              n->port);
    for (int p = 0; p < 2; p++) {
        if (pools[p].nconns == 0) continue;
        for (int j = 0; j < pools[p].nconns; j++) {
            struct backend *b = &pools[p].conns[j];
            backend_io_close(b); /* also stops a reconnect timer */
            b->state = BACKEND_DOWN;
            b->rlen = 0;
            resp_scanner_reset(&b->scan);
            b->warned_down = 0;
        }
        __atomic_store_n(&pools[p].retired, 1, __ATOMIC_RELAXED);
    }
}

/* Every node's map entry takes the owners of the reply just parsed (cl->parsed); nodes left
 * with no slot are retired, but for `asked` (the node whose connection is delivering the reply). */
static void cluster_adopt(struct backend_cluster *cl, int asked)
{
    int16_t index_of[SLOTMAP_MAX_NODES];
    unsigned char keep[SLOTMAP_MAX_NODES] = {0}; /* entries this map hands out, and the one asked: not reused */
    if (asked >= 0) keep[asked] = 1;
    for (int k = 0; k < SLOTMAP_MAX_NODES; k++) index_of[k] = -1;
    for (int k = 0; k < cl->parsed.nnodes; k++) {
        index_of[k] = (int16_t)cluster_node_index_keep(cl, cl->parsed.nodes[k].host, cl->parsed.nodes[k].port, keep);
        if (index_of[k] >= 0) keep[index_of[k]] = 1;
    }
    unsigned char owns[SLOTMAP_MAX_NODES] = {0};
    for (int s = 0; s < SLOTMAP_SLOTS; s++) {
        int k = cl->parsed.owner[s];
        cl->map.owner[s] = k >= 0 && k < SLOTMAP_MAX_NODES ? index_of[k] : -1;
        if (cl->map.owner[s] >= 0) owns[cl->map.owner[s]] = 1;
    }
    for (int k = 0; k < cl->map.nnodes; k++)
        if (!owns[k] && k != asked) cluster_node_retire(cl, k);
}

/* The CLUSTER SLOTS reply of node connection b. */
static void cluster_slots_reply(struct backend *b, const char *reply, size_t len)
{
    struct backend_cluster *cl = b->worker->clusters[b->instance];
    if (!cl) return;
    cl->refreshing = 0;
    char err[200];
    const char *host;
    int port;
    backend_address(b, &host, &port);
    if (slotmap_parse_slots(&cl->parsed, reply, len, host, err, sizeof(err)) != 0) {
        log_event(LOG_WARN, "cluster_map_failed",
                  &(struct log_fields){.instance = backend_conf(b)->name, .backend_host = host, .backend_port = port},
                  "instance '%s': the slot map from %s:%d is unusable: %s", backend_conf(b)->name, host, port, err);
        backend_cluster_refresh(b->worker, b->instance); /* another node, soon */
        return;
    }
    cluster_adopt(cl, b->node);
}

/*
 * A sentinel instance is a map of one node: every slot belongs to the primary its watcher
 * confirmed (sentinelwatch.h), none while it confirms none (requests then wait, as for a
 * cluster slot with no owner). With `retire` (from a timer: no connection is in a callback),
 * nodes that are not the primary are retired once nothing is owed on them: a request written
 * to the old primary gets its answer if it comes.
 */
static void sentinel_adopt(struct backend_cluster *cl, int retire)
{
    struct sentinelwatch_state st;
    if (sentinelwatch_get(cl->instance, &st) != 0) return;
    if (!cl->adopted || st.generation != cl->generation) {
        cl->adopted = 1;
        cl->generation = st.generation;
        int node = st.confirmed && st.primary.host[0] ? cluster_node_index(cl, st.primary.host, st.primary.port) : -1;
        for (int s = 0; s < SLOTMAP_SLOTS; s++) cl->map.owner[s] = (int16_t)node;
        if (node >= 0) (void)cluster_pool(cl, node, 0); /* its connections ready before the first request */
    }
    int primary = cl->map.owner[0];
    for (int k = 0; k < cl->map.nnodes && retire; k++)
        if (k != primary) cluster_node_retire(cl, k);
}

/* Ask for the slot map on a connection that is up (any node), else on the next seed's. */
static void cluster_refresh_now(struct backend_cluster *cl)
{
    struct worker *w = cl->worker;
    if (cl->sentinel) {
        sentinel_adopt(cl, 1); /* from its timers (or at start) */
        return;
    }
    if (cl->refreshing || w->stopping) return;
    struct backend *b = NULL;
    for (int n = 0; n < cl->map.nnodes && !b; n++) {
        struct backend_pool *pool = &cl->pools[n][0];
        if (pool->nconns > 0 && pool->conns[0].state == BACKEND_READY) b = &pool->conns[0];
    }
    if (!b) {
        const struct instance_conf *ic = &w->cfg->instances[cl->instance];
        int seed = cl->next_seed++ % ic->nseeds;
        int node = cluster_node_index(cl, ic->seed_host[seed], ic->seed_port[seed]);
        if (node < 0) return;
        b = &cluster_pool(cl, node, 0)->conns[0];
        if (b->state == BACKEND_DOWN) return; /* it reconnects, and its failure asks again */
    }
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    cl->refreshing = 1;
    cl->last_refresh_ms = clock_mono_ms();
    STAT_INC(&w->stats, cluster_refreshes);
    backend_send_internal(b, BACKEND_OWN_SLOTS, 2, argv);
}

static void cluster_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    cluster_refresh_now(arg);
}

static void cluster_start(struct worker *w, int instance)
{
    struct backend_cluster *cl = xcalloc(1, sizeof(*cl));
    cl->worker = w;
    cl->instance = instance;
    cl->sentinel = w->cfg->instances[instance].sentinel;
    slotmap_init(&cl->map);
    cl->soon = xevtimer_new(w->base, cluster_timer_cb, cl);
    cl->periodic = xevent_new(w->base, -1, EV_PERSIST, cluster_timer_cb, cl);
    int64_t ms = cl->sentinel                     ? BACKEND_SENTINEL_POLL_MS
                 : w->cfg->cluster_refresh_ms > 0 ? w->cfg->cluster_refresh_ms
                                                  : 10000;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_add(cl->periodic, &tv);
    __atomic_store_n(&w->clusters[instance], cl, __ATOMIC_RELEASE);
    cluster_refresh_now(cl);
}

int backend_is_cluster(const struct worker *w, int instance)
{
    return w->clusters[instance] != NULL;
}

int backend_is_sentinel(const struct worker *w, int instance)
{
    return w->clusters[instance] != NULL && w->clusters[instance]->sentinel;
}

void backend_cluster_refresh(struct worker *w, int instance)
{
    struct backend_cluster *cl = w->clusters[instance];
    if (cl && cl->sentinel) { /* its watcher checks the primary again; its state is read now */
        int64_t now = clock_mono_ms();
        if (now - cl->last_refresh_ms >= BACKEND_SENTINEL_POLL_MS) {
            cl->last_refresh_ms = now;
            sentinelwatch_poke(instance);
        }
        sentinel_adopt(cl, 0); /* a caller may be inside a connection's callback: its timer retires */
        return;
    }
    if (!cl || cl->refreshing || w->stopping) return;
    int64_t wait = cl->last_refresh_ms + BACKEND_REFRESH_MIN_MS - clock_mono_ms();
    if (wait <= 0) {
        cluster_refresh_now(cl);
        return;
    }
    if (evtimer_pending(cl->soon, NULL)) return;
    struct timeval tv = {wait / 1000, (wait % 1000) * 1000};
    evtimer_add(cl->soon, &tv);
}

void backend_cluster_moved(struct worker *w, int instance, unsigned slot, const char *host, int port)
{
    struct backend_cluster *cl = w->clusters[instance];
    if (!cl) return;
    int node = cluster_node_index(cl, host, port);
    if (node >= 0 && slot < SLOTMAP_SLOTS) cl->map.owner[slot] = (int16_t)node;
    backend_cluster_refresh(w, instance);
}

/* Order of two nodes of a map by address: host bytes, then port. */
static int node_address_cmp(const struct slotmap_node *a, const struct slotmap_node *b)
{
    int c = strcmp(a->host, b->host);
    return c ? c : (a->port > b->port) - (a->port < b->port);
}

int backend_cluster_owner(const struct worker *w, int instance, int slot)
{
    const struct backend_cluster *cl = w->clusters[instance];
    return cl && slot >= 0 && slot < SLOTMAP_SLOTS ? slotmap_owner(&cl->map, (unsigned)slot) : -1;
}

void backend_cluster_node_address(const struct worker *w, int instance, int node, const char **host, int *port)
{
    const struct backend_cluster *cl = w->clusters[instance];
    assert(cl && node >= 0 && node < cl->map.nnodes);
    *host = cl->map.nodes[node].host;
    *port = cl->map.nodes[node].port;
}

int backend_cluster_primaries(const struct worker *w, int instance, int *slots, int max)
{
    const struct backend_cluster *cl = w->clusters[instance];
    if (!cl) return 0;
    int first[SLOTMAP_MAX_NODES]; /* each node's lowest slot, -1: it owns none */
    for (int k = 0; k < SLOTMAP_MAX_NODES; k++) first[k] = -1;
    for (int s = SLOTMAP_SLOTS - 1; s >= 0; s--) {
        int k = cl->map.owner[s];
        if (k >= 0) first[k] = s;
    }
    int n = 0, order[SLOTMAP_MAX_NODES] = {0};
    for (int k = 0; k < cl->map.nnodes; k++) {
        if (first[k] < 0) continue;
        int i = n++; /* insertion by address: a cluster has a few primaries */
        while (i > 0 && node_address_cmp(&cl->map.nodes[order[i - 1]], &cl->map.nodes[k]) > 0) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = k;
    }
    if (n > max) n = max;
    for (int i = 0; i < n; i++) slots[i] = first[order[i]];
    return n;
}

/* The node for slot (-1: slot 0's, for a keyless command); -1 when not known. */
static int cluster_node_for(const struct backend_cluster *cl, int slot)
{
    return slotmap_owner(&cl->map, slot >= 0 ? (unsigned)slot : 0);
}

/* client_id's shared connection to node `node` (-1: none known), NULL when down. */
static struct backend *cluster_conn(struct backend_cluster *cl, int node, uint64_t client_id, int resp3)
{
    if (node < 0) return NULL;
    struct backend_pool *pool = cluster_pool(cl, node, resp3);
    struct backend *b = &pool->conns[client_id % (uint64_t)pool->nconns];
    return b->state == BACKEND_DOWN ? NULL : b;
}

struct backend *backend_for_slot(struct worker *w, int instance, int slot, uint64_t client_id, int resp3)
{
    struct backend_cluster *cl = w->clusters[instance];
    if (!cl) return resp3 ? backend_for3(w, instance, client_id) : backend_for(w, instance, client_id);
    return cluster_conn(cl, cluster_node_for(cl, slot), client_id, resp3);
}

struct backend *backend_for_addr(struct worker *w, int instance, const char *host, int port, uint64_t client_id,
                                 int resp3)
{
    struct backend_cluster *cl = w->clusters[instance];
    return cl ? cluster_conn(cl, cluster_node_index(cl, host, port), client_id, resp3) : NULL;
}

int backend_pools_start(struct worker *w, const struct backend_hooks *hooks)
{
    const struct config *cfg = w->cfg;
    w->hooks = hooks;
    w->pools = xcalloc(BACKEND_NPOOLS, sizeof(*w->pools)); /* the RESP3 ones open on first use */
    for (int i = 0; i < BACKEND_NPOOLS; i++) {
        TAILQ_INIT(&w->pools[i].idle); /* a RESP3 pin may come before its pool's shared connections */
        TAILQ_INIT(&w->pools[i].pinned);
    }
    for (size_t i = 0; i < cfg->ninstances; i++) {
        const struct instance_conf *ic = &cfg->instances[i];
        struct backend_pool *pool = &w->pools[i];
        if (ic->tls) {
            char err[300];
            pool->ssl_ctx = tls_instance_ctx(ic, err, sizeof(err));
            if (!pool->ssl_ctx) {
                log_event(LOG_ERROR, "backend_tls_config_failed", &(struct log_fields){.instance = ic->name},
                          "instance '%s': %s", ic->name, err);
                return -1;
            }
        }
        if (ic->cluster || ic->sentinel)
            cluster_start(w, (int)i);
        else
            backend_pool_open(w, (int)i, 0);
    }
    w->backend_tick = xevent_new(w->base, -1, EV_PERSIST, backend_tick_cb, w);
    struct timeval tv = {0, TIMEOUT_TICK_MS * 1000};
    event_add(w->backend_tick, &tv);
    return 0;
}

/* Fail and forget every entry owed on b (the router answers them). */
static void backend_fail_fifo(struct backend *b)
{
    size_t written = b->fifo_count - b->unsent; /* the entries after these were never written */
    b->unsent = 0;
    for (size_t i = 0; b->fifo_count > 0; i++) {
        struct pending pd = b->fifo[b->fifo_head];
        b->fifo_head = (b->fifo_head + 1) % b->fifo_cap;
        b->fifo_count--;
        pd.unsent = i >= written;
        if (pd.own == BACKEND_OWN_NONE) b->worker->hooks->fail(b, &pd);
        if (pd.own == BACKEND_OWN_SLOTS && b->worker->clusters[b->instance])
            b->worker->clusters[b->instance]->refreshing = 0; /* asked again below (backend_close) */
    }
}

/* Close b's socket and TLS session and forget any partial write; the FIFO is left alone. */
static void backend_io_close(struct backend *b)
{
    if (b->addrs) evutil_freeaddrinfo(b->addrs);
    b->addrs = b->next_addr = NULL;
    if (b->resolving) { /* its callback runs now, told EVUTIL_EAI_CANCEL, and leaves b alone */
        struct evdns_getaddrinfo_request *req = b->resolving;
        b->resolving = NULL;
        evdns_getaddrinfo_cancel(req);
    }
    if (b->rev) event_free(b->rev);
    if (b->wev) event_free(b->wev);
    b->rev = b->wev = NULL;
    if (b->ssl) SSL_free(b->ssl); /* the socket BIO does not own fd */
    b->ssl = NULL;
    if (b->fd >= 0) close(b->fd);
    b->fd = -1;
    b->tcp_up = b->read_wants_write = b->write_wants_read = 0;
    b->wbuf.len = 0;
    b->woff = 0;
    if (b->timer) evtimer_del(b->timer);
    b->discarding = 0;
    backend_account(b);
}

void backend_pools_free(struct worker *w)
{
    if (w->backend_tick) event_free(w->backend_tick);
    w->backend_tick = NULL;
    if (!w->pools) return;
    /* the idle dedicated connections first: closing one updates its instance's RESP2 pool */
    for (int i = 0; i < BACKEND_NPOOLS; i++) {
        struct backend_pool *pool = &w->pools[i];
        struct backend *idle;
        while ((idle = TAILQ_FIRST(&pool->idle))) {
            TAILQ_REMOVE(&pool->idle, idle, link);
            idle->in_idle = 0;
            backend_abandon(idle);
        }
    }
    backend_reap(w);
    for (int i = 0; i < BACKEND_ALL_POOLS; i++) {
        struct backend_pool *pool = backend_shared_pool(w, i);
        if (!pool) continue;
        for (int j = 0; j < pool->nconns; j++) {
            struct backend *b = &pool->conns[j];
            backend_io_close(b);
            backend_unstage(b);
            backend_fail_fifo(b);
            if (b->timer) event_free(b->timer);
            bytebuf_free(&b->out);
            bytebuf_free(&b->wbuf);
            free(b->fifo);
            free(b->rbuf);
        }
        free(pool->conns);
        if (pool->ssl_ctx) SSL_CTX_free(pool->ssl_ctx);
        memset(pool, 0, sizeof(*pool));
    }
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++) {
        struct backend_cluster *cl = w->clusters[i];
        if (!cl) continue;
        event_free(cl->soon);
        event_free(cl->periodic);
        free(cl);
        w->clusters[i] = NULL;
    }
    free(w->pools);
    w->pools = NULL;
    if (w->dns) evdns_base_free(w->dns, 0); /* every lookup was cancelled with its connection */
    w->dns = NULL;
}

void backend_pool_status(const struct proxy *p, int instance, struct backend_pool_status *out)
{
    *out = (struct backend_pool_status){0};
    for (int w = 0; w < p->nworkers; w++) {
        const struct backend_cluster *cl = __atomic_load_n(&p->workers[w].clusters[instance], __ATOMIC_ACQUIRE);
        int npools = cl ? SLOTMAP_MAX_NODES * 2 : 2;
        for (int k = 0; k < npools; k++) {
            const struct backend_pool *pool =
                cl ? &cl->pools[k / 2][k % 2] : &p->workers[w].pools[backend_pool_index(instance, k)];
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

struct backend *backend_for(struct worker *w, int instance, uint64_t client_id)
{
    if (__builtin_expect(w->clusters[instance] != NULL, 0)) return backend_for_slot(w, instance, -1, client_id, 0);
    struct backend_pool *pool = &w->pools[instance];
    if (pool->nconns == 0) return NULL;
    struct backend *b = &pool->conns[client_id % (uint64_t)pool->nconns];
    return b->state == BACKEND_DOWN ? NULL : b;
}

struct backend *backend_for3(struct worker *w, int instance, uint64_t client_id)
{
    if (w->clusters[instance]) return backend_for_slot(w, instance, -1, client_id, 1);
    if (w->pools[instance].nconns == 0) return NULL; /* no such instance */
    struct backend_pool *pool = &w->pools[backend_pool_index(instance, 1)];
    if (pool->nconns == 0) backend_pool_open(w, instance, 1); /* the first RESP3 client of the instance */
    struct backend *b = &pool->conns[client_id % (uint64_t)pool->nconns];
    return b->state == BACKEND_DOWN ? NULL : b;
}

void backend_expect(struct backend *b, struct pending pd)
{
    if (b->fifo_count == b->fifo_cap) {
        size_t cap = b->fifo_cap ? b->fifo_cap * 2 : 64;
        struct pending *f = xmalloc(cap * sizeof(*f));
        for (size_t i = 0; i < b->fifo_count; i++) f[i] = b->fifo[(b->fifo_head + i) % b->fifo_cap];
        free(b->fifo);
        b->fifo = f;
        b->fifo_head = 0;
        b->fifo_cap = cap;
    }
    assert(pd.own == BACKEND_OWN_NONE || pd.req == NULL); /* the connection's own have no request */
    b->fifo[(b->fifo_head + b->fifo_count) % b->fifo_cap] = pd;
    b->fifo_count++;
    b->unsent++;
    assert(b->unsent <= b->fifo_count);
}

struct bytebuf *backend_stage(struct backend *b)
{
    struct worker *w = b->worker;
    if (!b->dirty) {
        ptrvec_push(&w->dirty, b);
        b->dirty = 1;
        w->domain_tail[b->domain] = b;
    }
    /* also when b is listed already: it may have been kept back by the last flush */
    event_active(w->flush_ev, EV_TIMEOUT, 0);
    return &b->out;
}

/* Recompute w->domain_tail from the dirty list. */
static void backend_tails(struct worker *w)
{
    memset(w->domain_tail, 0, sizeof(w->domain_tail));
    for (size_t i = 0; i < w->dirty.n; i++) {
        struct backend *b = w->dirty.items[i];
        w->domain_tail[b->domain] = b;
    }
}

int backend_would_reorder(const struct worker *w, const struct backend *b)
{
    return b && b->dirty == 1 && w->domain_tail[b->domain] != b;
}

/* Forget b's staged bytes and take it off the flush list (it closed). */
static void backend_unstage(struct backend *b)
{
    b->out.len = 0;
    if (!b->dirty) return;
    ptrvec_remove(&b->worker->dirty, b);
    b->dirty = 0;
    backend_tails(b->worker);
    /* entries kept waiting behind b, and clients postponed behind them, may go now */
    if (b->worker->dirty.n > 0 || b->worker->postponed.n > 0) event_active(b->worker->flush_ev, EV_TIMEOUT, 0);
}

/*
 * A shared connection keeps one batch in flight: requests staged while earlier ones
 * are unanswered wait for those replies (or for HOLD_MAX_BYTES), then go as one write.
 * Under load this makes batches of many clients' requests, so Redis reads, decrypts
 * and answers once per batch instead of once per request; an idle connection writes
 * at once, so a lone request is not delayed. Dedicated connections never wait.
 */
static int backend_holds(const struct backend *b)
{
    return !b->pinned && b->fifo_count > b->unsent && b->out.len < HOLD_MAX_BYTES;
}

/*
 * Move b's staged batch into its write buffer and start writing it, unless a
 * write is still in progress or the connection is not ready (then the batch stays
 * staged; backend_do_write or the handshake stages it again). The buffers swap, so
 * no batch is copied and the old write buffer's memory is reused.
 */
static void backend_send_staged(struct backend *b)
{
    if (b->state != BACKEND_READY || b->woff < b->wbuf.len) return;
    if (b->fifo_count == b->unsent) b->waiting_since_ms = clock_mono_ms(); /* the oldest written entry starts waiting */
    if (b->fifo_count == b->unsent) b->sent_ns = stats_clock(&b->worker->stats); /* latency: from this write */
    struct bytebuf t = b->wbuf;
    b->wbuf = b->out;
    b->out = t;
    b->out.len = 0;
    b->woff = 0;
    b->unsent = 0;
    STAT_INC(&b->worker->stats, backend_writes);
    backend_do_write(b);
}

/*
 * The dirty list holds each backend at the place of its first staged request, so
 * walking it in order writes the requests of different clients in the order they
 * arrived (Redis serves a client that blocked first first, counts a subscriber that
 * unsubscribed before a PUBLISH as gone). Within one instance an entry that must wait
 * (connecting, a write still in progress) keeps every later entry of that instance
 * waiting behind it; one that only holds for batching writes anyway when a later entry
 * of its instance writes now. Entries that wait stay listed, in order; their backend
 * stages itself again (backend_stage) when it can write. A request that would join a
 * connection's batch after another connection of its instance was staged (A1 B1 A2,
 * which would leave as A1 A2 B1) is postponed by the client layer until this flush
 * (backend_would_reorder, client_postpone); the flush wakes those clients in order.
 */
void backend_flush_all(struct worker *w)
{
    struct ptrvec todo = w->dirty; /* writes may close backends (unstaging them) or stage more */
    w->dirty = w->flush_spare;
    w->dirty.n = 0;
    w->flush_spare = (struct ptrvec){0};
    /* decide first, in order: waits (0), writes (1), writes unless it holds (2) */
    int blocked[BACKEND_DOMAINS] = {0}, later_writes[BACKEND_DOMAINS] = {0};
    for (size_t i = 0; i < todo.n; i++) {
        struct backend *b = todo.items[i];
        b->dirty = 2; /* listed in todo: backend_stage leaves it there, backend_unstage zeroes it */
        if ((b->fd < 0 && !b->resolving) || b->out.len == 0) {
            b->flush_go = -1; /* nothing to write: off the list */
            continue;
        }
        int busy = b->state != BACKEND_READY || b->woff < b->wbuf.len;
        b->flush_go = blocked[b->domain] || busy ? 0 : 2;
        if (busy) blocked[b->domain] = 1;
    }
    for (size_t i = todo.n; i-- > 0;) {
        struct backend *b = todo.items[i];
        if (b->flush_go == 2) b->flush_go = !backend_holds(b) || later_writes[b->domain];
        if (b->flush_go == 1) later_writes[b->domain] = 1;
    }
    size_t kept = 0;
    for (size_t i = 0; i < todo.n; i++) {
        struct backend *b = todo.items[i];
        if (b->dirty != 2) continue; /* closed meanwhile */
        if (b->flush_go < 0 || (b->fd < 0 && !b->resolving) || b->out.len == 0) {
            b->out.len = 0;
            b->dirty = 0;
            continue;
        }
        if (b->flush_go == 0) {
            todo.items[kept++] = b; /* stays listed at its place */
            continue;
        }
        b->dirty = 0;
        backend_send_staged(b);
    }
    for (size_t i = 0; i < todo.n; i++) backend_account(todo.items[i]);
    /* the new list: the entries kept back, then those first staged during this walk */
    struct ptrvec added = w->dirty;
    todo.n = 0;
    for (size_t i = 0; i < kept; i++) {
        struct backend *b = todo.items[i];
        if (b->dirty != 2) continue;
        b->dirty = 1;
        todo.items[todo.n++] = b;
    }
    for (size_t i = 0; i < added.n; i++) ptrvec_push(&todo, added.items[i]);
    w->dirty = todo;
    added.n = 0;
    w->flush_spare = added;
    backend_tails(w);
}

/* Send one of keygate's own commands (AUTH, HELLO 3, INFO) formatted by hiredis. */
static void backend_send_internal(struct backend *b, enum backend_own own, int argc, const char **argv)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, NULL);
    if (len < 0) oom_abort(0); /* hiredis fails here only for memory */
    bytebuf_add(backend_stage(b), cmd, (size_t)len);
    free(cmd);
    backend_expect(b, (struct pending){.own = (uint8_t)own});
}

void backend_close(struct backend *b, const char *reason)
{
    const struct instance_conf *ic = backend_conf(b);
    const char *host;
    int port;
    backend_address(b, &host, &port);
    backend_unstage(b);
    if (b->pinned) {
        struct client *owner = b->owner;
        log_event(owner ? LOG_WARN : LOG_DEBUG, "backend_pinned_closed",
                  &(struct log_fields){.instance = ic->name, .backend_host = host, .backend_port = port},
                  "instance '%s' dedicated connection: %s", ic->name, reason);
        backend_io_close(b);
        b->state = BACKEND_DOWN;
        b->owner = NULL;
        backend_fail_fifo(b);
        if (b->in_idle) TAILQ_REMOVE(&backend_pool_of(b)->idle, b, link);
        b->in_idle = 0;
        assert(backend_pin_pool(b)->npinned > 0);
        backend_pin_pool(b)->npinned--;
        TAILQ_REMOVE(&backend_pin_pool(b)->pinned, b, pinned_link);
        TAILQ_INSERT_TAIL(&b->worker->dead_backends, b, link);
        event_active(b->worker->reap_ev, EV_TIMEOUT, 0);
        if (owner) b->worker->hooks->owner_lost(b, owner);
        return;
    }
    if (!b->warned_down || b->state == BACKEND_READY || strncmp(b->down_reason, reason, sizeof b->down_reason - 1)) {
        log_event(LOG_WARN, "backend_down",
                  &(struct log_fields){.instance = ic->name, .backend_host = host, .backend_port = port},
                  "instance '%s' (%s:%d) connection %d: %s; retrying", ic->name, host, port, b->slot, reason);
        snprintf(b->down_reason, sizeof b->down_reason, "%s", reason);
    }
    b->warned_down = 1;
    STAT_INC(&b->worker->stats, backend_failures);
    backend_io_close(b);
    b->state = BACKEND_DOWN;
    b->rlen = 0;
    resp_scanner_reset(&b->scan);
    backend_fail_fifo(b);
    int delay_ms = backend_backoff_delay(b->backoff_ms, backend_random(b));
    struct timeval tv = {delay_ms / 1000, (delay_ms % 1000) * 1000};
    b->backoff_ms = b->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b->backoff_ms * 2;
    if (!b->worker->stopping && b->timer) evtimer_add(b->timer, &tv);
    /* a cluster node lost: its slots may have a new owner (a failover) */
    if (b->node >= 0) backend_cluster_refresh(b->worker, b->instance);
}

/* Reserve room for `more` received bytes. */
static void backend_rbuf_reserve(struct backend *b, size_t more)
{
    if (b->rlen + more <= b->rcap) return;
    size_t cap = b->rcap ? b->rcap : READ_CHUNK_BYTES;
    while (cap < b->rlen + more) cap *= 2;
    b->rbuf = xrealloc(b->rbuf, cap);
    b->rcap = cap;
}

/* One framed reply for the FIFO head: the connection's own, or the hooks'. Returns 0, or -1
 * when b was closed (a reply nothing was owed for, a refused AUTH). */
static int backend_deliver(struct backend *b, const char *reply, size_t len)
{
    if (b->fifo_count == 0) {
        backend_close(b, "reply with no request in flight");
        return -1;
    }
    struct pending pd = b->fifo[b->fifo_head];
    b->fifo_head = (b->fifo_head + 1) % b->fifo_cap;
    b->fifo_count--;
    switch (pd.own) {
    case BACKEND_OWN_AUTH:
    case BACKEND_OWN_HELLO: /* a RESP3 connection's HELLO 3 */
        if (reply[0] == '-') {
            char why[160];
            snprintf(why, sizeof(why), "%s refused: %.*s", pd.own == BACKEND_OWN_AUTH ? "AUTH" : "HELLO 3",
                     (int)(len > 120 ? 120 : len - 2), reply + 1);
            backend_close(b, why);
            return -1;
        }
        return 0;
    case BACKEND_OWN_ID: /* a dedicated connection's CLIENT ID (an error leaves it unknown: UNBLOCK answers :0) */
        if (reply[0] == ':') b->server_id = strtoll(reply + 1, NULL, 10);
        if (b->block_client && b->server_id > 0) /* its blocking command went out before the id came */
            blocked_set_server_id(&b->worker->proxy->blocked, b->block_client, b->server_id);
        return 0;
    case BACKEND_OWN_INFO:
        if (topology_on_info_reply(b->worker->proxy, b->instance, backend_conf(b)->name, reply, len)) {
            struct timeval tv = {TOPOLOGY_RECHECK_MS / 1000, (TOPOLOGY_RECHECK_MS % 1000) * 1000};
            evtimer_add(b->timer, &tv); /* still loading: INFO again (backend_timer_cb) */
        }
        return 0;
    case BACKEND_OWN_SLOTS:
        cluster_slots_reply(b, reply, len);
        return 0;
    default:
        b->worker->hooks->deliver(b, &pd, reply, len);
        return 0;
    }
}

/*
 * A reply still arriving holds `partial` bytes. Past PARTIAL_CHECK_BYTES the hooks say
 * whether anybody may keep it whole (may_keep: its client is gone, would pass its hard
 * output limit, or it only answers an injected command); if not, it is dropped as it
 * comes (b->discarding) and its entry gets "-ERR reply dropped" when it ends.
 */
static void backend_large_partial(struct backend *b, size_t partial)
{
    if (b->discarding || partial < PARTIAL_CHECK_BYTES) return;
    const struct pending *pd = NULL;
    if (!b->subscriber) {
        if (b->fifo_count == 0) return;
        pd = &b->fifo[b->fifo_head];
        if (pd->own != BACKEND_OWN_NONE) return; /* the connection's own AUTH / INFO */
    }
    if (!b->worker->hooks->may_keep(b, pd, partial)) {
        b->discarding = 1;
        log_event(LOG_DEBUG, "backend_reply_dropped", &(struct log_fields){.instance = backend_conf(b)->name},
                  "instance '%s': a reply of more than %zu bytes is dropped as it comes (no client keeps it)",
                  backend_conf(b)->name, partial);
    }
}

/*
 * Frame and deliver every whole reply in b->rbuf. Returns 0, or -1 when b closed
 * meanwhile (a malformed reply, a refused AUTH): the hooks never close it.
 */
static int backend_frame_replies(struct backend *b)
{
    size_t pos = 0;
    if (b->rlen > 0) stats_clock(&b->worker->stats); /* the replies' time: one clock read a batch */
    uint64_t nreplies = 0;                           /* replies for the hooks: one latency observation each */
    while (pos < b->rlen) {
        long long n = resp_scan_reply(&b->scan, b->rbuf + pos, b->rlen - pos);
        if (n == 0) {
            backend_large_partial(b, b->rlen - pos);
            if (b->discarding) pos += resp_scan_discard(&b->scan, b->rlen - pos);
            break;
        }
        if (n < 0) {
            backend_close(b, "malformed reply");
            return -1;
        }
        const char *reply = b->rbuf + pos;
        size_t len = (size_t)n;
        pos += (size_t)n;
        char dropped[32];
        if (b->discarding) {
            /* the end of a reply nobody keeps: its owner gets no bytes of it */
            b->discarding = 0;
            len = replies_error(dropped, sizeof(dropped), "ERR reply dropped");
            reply = dropped;
        }
        int own_head = b->fifo_count > 0 && b->fifo[b->fifo_head].own != BACKEND_OWN_NONE;
        nreplies += !b->subscriber && !own_head;
        if (b->subscriber && !own_head)
            b->worker->hooks->push(b, reply, len);
        else if (backend_deliver(b, reply, len) != 0)
            return -1;
        assert(b->fd >= 0); /* the hooks do not close the backend they are called for */
    }
    /* every reply of this read took as long: its batch's write to now */
    if (nreplies) stats_backend_latency(&b->worker->stats, b->instance, b->worker->stats.now_ns - b->sent_ns, nreplies);
    if (pos > 0) {
        b->waiting_since_ms =
            clock_mono_ms(); /* replies came: the next entry's wait begins now (one clock read a batch) */
        memmove(b->rbuf, b->rbuf + pos, b->rlen - pos);
        b->rlen -= pos;
    }
    if (b->rcap > BUF_KEEP_MAX && b->rlen < b->rcap / 8) {
        /* a large reply went through: give its buffer back */
        size_t cap = READ_CHUNK_BYTES;
        while (cap < b->rlen * 2) cap *= 2;
        b->rbuf = xrealloc(b->rbuf, cap);
        b->rcap = cap;
    }
    if (b->pinned && b->release_when_idle && b->fifo_count == 0 && !b->subscriber) {
        backend_make_idle(b);
        if (b->fd < 0) return -1; /* it was not reusable: make_idle closed it */
    }
    /* output kept back for this batch: written at the end of this iteration */
    if (b->out.len > 0 && b->fifo_count == b->unsent) backend_stage(b);
    return 0;
}

/* Why a TLS call failed, for the log: OpenSSL's first error and any certificate verdict. */
static void backend_tls_reason(struct backend *b, const char *what, char *why, size_t size)
{
    unsigned long err = ERR_get_error();
    ERR_clear_error();
    if (!err) {
        snprintf(why, size, "%s: %s", what, errno ? strerror(errno) : "connection closed by the server");
        return;
    }
    char ebuf[200];
    ERR_error_string_n(err, ebuf, sizeof(ebuf));
    long verify = SSL_get_verify_result(b->ssl);
    if (verify != X509_V_OK) /* say which check failed: CA, name, dates */
        snprintf(why, size, "TLS error: %s: server certificate: %s", ebuf, X509_verify_cert_error_string(verify));
    else
        snprintf(why, size, "TLS error: %s", ebuf);
}

/* Close b after SSL_read/SSL_write/SSL_connect returned r with SSL_get_error e, saying why. */
static void backend_tls_failed(struct backend *b, int e, int r, const char *what)
{
    char why[300];
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && (r == 0 || errno == 0)))
        snprintf(why, sizeof(why), "%sconnection closed by the server%s",
                 b->state == BACKEND_READY ? "" : "TLS handshake: ",
                 b->state == BACKEND_READY ? "" : " (is it speaking TLS on this port?)");
    else if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
        snprintf(why, sizeof(why), "%s: %s", what, strerror(errno));
    else
        backend_tls_reason(b, what, why, sizeof(why));
    backend_close(b, why);
}

/*
 * Read what the socket has and deliver the replies. With TLS read-ahead one read()
 * takes several records; SSL_has_pending says when decrypted-but-unread bytes are
 * left that epoll cannot report, so the loop goes on until both are drained.
 */
static void backend_do_read_some(struct backend *b)
{
    b->read_wants_write = 0;
    for (;;) {
        backend_rbuf_reserve(b, READ_CHUNK_BYTES);
        size_t room = b->rcap - b->rlen;
        ssize_t n;
        if (b->ssl) {
            ERR_clear_error();
            int r = SSL_read(b->ssl, b->rbuf + b->rlen, room > INT_MAX ? INT_MAX : (int)room);
            if (r <= 0) {
                int e = SSL_get_error(b->ssl, r);
                if (e == SSL_ERROR_WANT_READ) return;
                if (e == SSL_ERROR_WANT_WRITE) {
                    b->read_wants_write = 1;
                    event_add(b->wev, NULL);
                    return;
                }
                backend_tls_failed(b, e, r, "TLS read");
                return;
            }
            n = r;
        } else {
            n = read(b->fd, b->rbuf + b->rlen, room);
            if (n == 0) {
                backend_close(b, "connection closed by the server");
                return;
            }
            if (n < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) return;
                backend_close(b, strerror(errno));
                return;
            }
        }
        b->rlen += (size_t)n;
        if (backend_frame_replies(b) != 0) return;
        int more = b->ssl ? SSL_has_pending(b->ssl) : (size_t)n == room;
        if (!more) return; /* level-triggered: epoll reports what is still in the socket */
    }
}

/* backend_do_read_some, then count what b holds now (max-memory). */
static void backend_do_read(struct backend *b)
{
    backend_do_read_some(b);
    backend_account(b);
}

/* Write b->wbuf from b->woff; on a full socket wait for EV_WRITE. */
static void backend_do_write(struct backend *b)
{
    b->write_wants_read = 0;
    while (b->woff < b->wbuf.len) {
        size_t left = b->wbuf.len - b->woff;
        ssize_t n;
        if (b->ssl) {
            ERR_clear_error();
            int r = SSL_write(b->ssl, b->wbuf.p + b->woff, left > INT_MAX ? INT_MAX : (int)left);
            if (r <= 0) {
                int e = SSL_get_error(b->ssl, r);
                if (e == SSL_ERROR_WANT_WRITE) {
                    event_add(b->wev, NULL);
                    return;
                }
                if (e == SSL_ERROR_WANT_READ) {
                    b->write_wants_read = 1; /* the read event (always armed) resumes it */
                    return;
                }
                backend_tls_failed(b, e, r, "TLS write");
                return;
            }
            n = r;
        } else {
            n = write(b->fd, b->wbuf.p + b->woff, left);
            if (n < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    event_add(b->wev, NULL);
                    return;
                }
                backend_close(b, strerror(errno));
                return;
            }
        }
        b->woff += (size_t)n;
    }
    b->wbuf.len = 0;
    b->woff = 0;
    if (b->wbuf.cap > BUF_KEEP_MAX) bytebuf_free(&b->wbuf); /* a large batch went out */
    if (b->out.len == 0 && b->out.cap > BUF_KEEP_MAX) bytebuf_free(&b->out);
    backend_account(b);
    if (!b->read_wants_write) event_del(b->wev);
    if (b->out.len > 0) backend_stage(b); /* staged while this write waited */
}

/* The connection (and its TLS handshake) is up: send what was staged meanwhile. */
static void backend_ready(struct backend *b)
{
    const struct instance_conf *ic = backend_conf(b);
    const char *host;
    int port;
    backend_address(b, &host, &port);
    evtimer_del(b->timer);
    event_del(b->wev);
    event_add(b->rev, NULL);
    if (b->addrs) evutil_freeaddrinfo(b->addrs); /* connected: the other addresses are not needed */
    b->addrs = b->next_addr = NULL;
    b->state = BACKEND_READY;
    b->backoff_ms = BACKOFF_MIN_MS;
    if (b->warned_down)
        log_event(LOG_INFO, "backend_up",
                  &(struct log_fields){.instance = ic->name, .backend_host = host, .backend_port = port},
                  "instance '%s' connection %d is back", ic->name, b->slot);
    b->warned_down = 0;
    if (b->ssl)
        log_event(LOG_DEBUG, "backend_connected",
                  &(struct log_fields){.instance = ic->name, .backend_host = host, .backend_port = port},
                  "instance '%s' connection %d: %s %s", ic->name, b->slot, SSL_get_version(b->ssl),
                  SSL_get_cipher_name(b->ssl));
    STAT_INC(&b->worker->stats, backend_connects);
    if (b->out.len > 0) backend_stage(b);
}

/* Drive the TCP connect, then the TLS handshake, one readiness event at a time. */
static void backend_continue_connect(struct backend *b)
{
    if (!b->tcp_up) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(b->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        if (err == EINPROGRESS) return;
        if (err) {
            if (!backend_next_address(b)) backend_close(b, strerror(err));
            return;
        }
        b->tcp_up = 1;
    }
    if (!b->ssl) {
        backend_ready(b);
        return;
    }
    ERR_clear_error();
    int r = SSL_connect(b->ssl);
    if (r == 1) {
        backend_ready(b);
        return;
    }
    int e = SSL_get_error(b->ssl, r);
    if (e == SSL_ERROR_WANT_READ) {
        event_del(b->wev);
        event_add(b->rev, NULL);
        return;
    }
    if (e == SSL_ERROR_WANT_WRITE) {
        event_add(b->wev, NULL);
        return;
    }
    backend_tls_failed(b, e, r, "TLS handshake");
}

static void backend_io_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    struct backend *b = arg;
    if (b->state == BACKEND_CONNECTING) {
        backend_continue_connect(b);
        return;
    }
    int readable = (what & EV_READ) != 0, writable = (what & EV_WRITE) != 0;
    if (readable || (writable && b->read_wants_write)) {
        int resume_write = readable && b->write_wants_read;
        backend_do_read(b);
        if (b->fd < 0) return;
        if (resume_write) backend_do_write(b);
        if (b->fd < 0) return;
    }
    if (writable) {
        if (b->woff < b->wbuf.len)
            backend_do_write(b);
        else if (!b->read_wants_write)
            event_del(b->wev);
    }
}

/* DOWN: time to reconnect. CONNECTING: the connect or handshake took too long. */
static void backend_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct backend *b = arg;
    if (b->state == BACKEND_DOWN) {
        backend_connect(b);
        return;
    }
    if (b->state == BACKEND_READY) { /* the topology guard's INFO found it loading: ask again */
        const char *info[1] = {"INFO"};
        backend_send_internal(b, BACKEND_OWN_INFO, 1, info);
        return;
    }
    if (b->state == BACKEND_CONNECTING && b->resolving) {
        const char *host;
        int port;
        backend_address(b, &host, &port);
        char why[128];
        snprintf(why, sizeof why, "cannot resolve %.60s: timed out", host);
        backend_close(b, why);
        return;
    }
    if (b->state == BACKEND_CONNECTING)
        backend_close(b, b->ssl && b->tcp_up ? "TLS handshake timed out (is the server speaking TLS on this port?)"
                                             : "connect timed out");
}

/* Open the socket to the address ss (a numeric address, or what b's host name resolved to) and start
 * the TCP connect and the TLS handshake (SNI and the certificate's name: the host as configured or
 * announced, never the address it resolved to). On failure b is closed. */
static void backend_open(struct backend *b, const struct sockaddr *sa, socklen_t salen);

/* The TCP connect to one address of b's host name failed: 1 when b now connects to the next
 * address of the answer (an IPv6 and an IPv4 one, a name with several records), 0 when none is
 * left (the caller closes b). Only the socket is closed: what is staged stays. */
static int backend_next_address(struct backend *b)
{
    struct evutil_addrinfo *ai = b->next_addr;
    if (!ai) return 0;
    struct evutil_addrinfo *keep = b->addrs;
    b->addrs = NULL; /* backend_io_close would free it */
    backend_io_close(b);
    b->addrs = keep;
    b->next_addr = ai->ai_next;
    backend_open(b, ai->ai_addr, (socklen_t)ai->ai_addrlen);
    return 1;
}

static void backend_open(struct backend *b, const struct sockaddr *sa, socklen_t salen)
{
    struct worker *w = b->worker;
    const struct instance_conf *ic = backend_conf(b);
    struct backend_pool *pool = &w->pools[b->instance]; /* its TLS context */
    const char *host;
    int port;
    backend_address(b, &host, &port);
    b->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (b->fd < 0) {
        backend_close(b, strerror(errno));
        return;
    }
    int one = 1, idle = KEEPALIVE_IDLE_S, intvl = KEEPALIVE_INTVL_S, cnt = KEEPALIVE_CNT;
    unsigned int user_timeout =
        (unsigned int)(w->cfg->backend_timeout_ms > 0 ? w->cfg->backend_timeout_ms : USER_TIMEOUT_DEFAULT_MS);
    setsockopt(b->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(b->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(b->fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(b->fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(b->fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    setsockopt(b->fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
    b->rev = xevent_new(w->base, b->fd, EV_READ | EV_PERSIST, backend_io_cb, b);
    b->wev = xevent_new(w->base, b->fd, EV_WRITE | EV_PERSIST, backend_io_cb, b);
    if (pool->ssl_ctx) {
        b->ssl = SSL_new(pool->ssl_ctx);
        if (!b->ssl || tls_instance_expect_name(b->ssl, ic, host) != 0 || SSL_set_fd(b->ssl, b->fd) != 1) {
            backend_close(b, "cannot set up TLS (SSL_new / SSL_set1_host / SSL_set_fd failed)");
            return;
        }
        SSL_set_connect_state(b->ssl);
        SSL_set_mode(b->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE);
        SSL_set_read_ahead(b->ssl, 1);
    }
    if (connect(b->fd, sa, salen) != 0 && errno != EINPROGRESS) {
        int err = errno;
        if (!backend_next_address(b)) backend_close(b, strerror(err));
        return;
    }
    event_add(b->wev, NULL); /* writable: the TCP connect finished (or failed: SO_ERROR) */
    struct timeval tv = {w->cfg->connect_timeout_ms / 1000, (w->cfg->connect_timeout_ms % 1000) * 1000};
    evtimer_add(b->timer, &tv);
    backend_account(b); /* what was staged while the name resolved */
}

/* The worker's resolver, made on first use: libevent's evdns (/etc/hosts, then the name servers
 * of /etc/resolv.conf), so a lookup never blocks the loop. It keeps no cache: every lookup asks
 * again. NULL when it cannot be made. */
static struct evdns_base *backend_dns(struct worker *w)
{
    if (w->dns) return w->dns;
    w->dns = evdns_base_new(w->base, EVDNS_BASE_INITIALIZE_NAMESERVERS | EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    /* 0x20 case randomization drops answers from servers that do not echo the case */
    if (w->dns) evdns_base_set_option(w->dns, "randomize-case:", "0");
    return w->dns;
}

/* evdns's answer for b's host name: connect to its first address (the next ones when a connect
 * fails: backend_next_address), or close b with the reason. */
static void backend_resolved(int err, struct evutil_addrinfo *res, void *arg)
{
    struct backend *b = arg;
    if (err == EVUTIL_EAI_CANCEL) { /* b closed (backend_io_close) while asking: b is not touched */
        if (res) evutil_freeaddrinfo(res);
        return;
    }
    b->resolving = NULL;
    if (err != 0 || !res) {
        const char *host;
        int port;
        backend_address(b, &host, &port);
        char why[128];
        snprintf(why, sizeof why, "cannot resolve %.60s: %s", host, err != 0 ? evutil_gai_strerror(err) : "no address");
        if (res) evutil_freeaddrinfo(res);
        backend_close(b, why);
        return;
    }
    b->addrs = res;
    b->next_addr = res->ai_next;
    backend_open(b, res->ai_addr, (socklen_t)res->ai_addrlen);
}

/*
 * Connect b to its server: a numeric host is connected at once; a host name is resolved first
 * (evdns, off the loop; again for every new connection, so a name whose address changed is
 * followed by the next connection). Meanwhile b is CONNECTING without a socket, its AUTH / HELLO
 * and the requests routed to it staged; connect-timeout bounds the lookup, then the connect and
 * handshake. A name that resolves to nothing closes b with "cannot resolve NAME: why".
 */
static void backend_connect(struct backend *b)
{
    struct worker *w = b->worker;
    const struct instance_conf *ic = backend_conf(b);
    const char *host;
    int port;
    backend_address(b, &host, &port);
    if (!b->timer) b->timer = xevtimer_new(w->base, backend_timer_cb, b);
    b->state = BACKEND_CONNECTING;
    b->timed_out = 0;

    struct sockaddr_storage ss;
    int sslen = sizeof(ss);
    char addr[300];
    snprintf(addr, sizeof(addr), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    if (evutil_parse_sockaddr_port(addr, (struct sockaddr *)&ss, &sslen) == 0) {
        backend_open(b, (struct sockaddr *)&ss, (socklen_t)sslen);
    } else {
        struct evdns_base *dns = backend_dns(w);
        if (!dns) {
            backend_close(b, "cannot start the name resolver");
            return;
        }
        struct timeval tv = {w->cfg->connect_timeout_ms / 1000, (w->cfg->connect_timeout_ms % 1000) * 1000};
        evtimer_add(b->timer, &tv); /* the lookup's timeout (backend_timer_cb) */
        char portstr[8];
        snprintf(portstr, sizeof portstr, "%d", port);
        struct evutil_addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_protocol = IPPROTO_TCP};
        /* the answer may come before this returns (/etc/hosts): then the request is NULL */
        struct evdns_getaddrinfo_request *req = evdns_getaddrinfo(dns, host, portstr, &hints, backend_resolved, b);
        if (req) b->resolving = req;
    }
    if (b->state == BACKEND_DOWN) return; /* closed: a dedicated one is queued for reaping */
    /* Pipelined behind the handshake: AUTH first, then the topology check. */
    if (ic->password) {
        const char *argv[3] = {"AUTH", ic->username ? ic->username : ic->password, ic->password};
        backend_send_internal(b, BACKEND_OWN_AUTH, ic->username ? 3 : 2, argv);
    }
    /* a RESP3 connection: every reply from here on is what Redis sends a HELLO 3 client */
    if (b->resp3) {
        const char *hello[2] = {"HELLO", "3"};
        backend_send_internal(b, BACKEND_OWN_HELLO, 2, hello);
    }
    /* a dedicated connection's id on the backend, for CLIENT UNBLOCK of the client it serves */
    if (b->pinned) {
        const char *id[2] = {"CLIENT", "ID"};
        backend_send_internal(b, BACKEND_OWN_ID, 2, id);
    }
    /* topology guard (shared RESP2 connections only: every instance has them; its parser
     * reads RESP2's bulk): durable noeviction + AOF, cache evicting, Redis >= 7. Not for a
     * cluster's or a sentinel instance's node: the INFO poller checks each by its address */
    if (!b->pinned && !b->resp3 && b->node < 0) {
        const char *info[1] = {"INFO"};
        backend_send_internal(b, BACKEND_OWN_INFO, 1, info);
    }
}

const char *backend_down_why(const struct worker *w, int instance)
{
    const struct backend_pool *pool = &w->pools[instance];
    const char *why = NULL;
    for (int i = 0; i < pool->nconns; i++) {
        const struct backend *b = &pool->conns[i];
        if (b->state == BACKEND_READY) return NULL;
        if (b->warned_down && strncmp(b->down_reason, "cannot resolve ", 15) == 0) why = b->down_reason;
    }
    return why;
}

/* Put a clean dedicated connection on its instance's idle list. */
static void backend_make_idle(struct backend *b)
{
    struct backend_pool *pool = backend_pool_of(b);
    b->release_when_idle = 0;
    b->owner = NULL;
    b->block_ms = -1;
    if (b->unblocked || (b->state != BACKEND_READY && b->state != BACKEND_CONNECTING)) {
        backend_abandon(b);
        return;
    }
    if (!b->in_idle) {
        TAILQ_INSERT_TAIL(&pool->idle, b, link);
        b->in_idle = 1;
    }
}

struct backend *backend_pin(struct worker *w, int instance, int slot, struct client *c, int resp3)
{
    struct backend_pool *pool = &w->pools[instance]; /* counts every pin of the instance */
    struct backend_pool *idle = &w->pools[backend_pool_index(instance, resp3)];
    const struct backend_cluster *cl = w->clusters[instance];
    int node = cl ? cluster_node_for(cl, slot) : -1;
    if (cl && node < 0) return NULL; /* the slot's owner is not known yet */
    struct backend *b, *next;
    for (b = TAILQ_FIRST(&idle->idle); b; b = next) {
        next = TAILQ_NEXT(b, link);
        if (b->node != node) continue; /* another cluster node's */
        TAILQ_REMOVE(&idle->idle, b, link);
        b->in_idle = 0;
        if (b->state != BACKEND_DOWN) {
            b->owner = c;
            return b;
        }
        backend_abandon(b);
    }
    if (pool->npinned >= w->cfg->max_pinned) return NULL;
    b = xcalloc(1, sizeof(*b));
    b->worker = w;
    b->instance = instance;
    b->node = node;
    b->domain = backend_domain(instance, node);
    b->resp3 = (uint8_t)(resp3 != 0);
    b->slot = -1;
    b->fd = -1;
    b->pinned = 1;
    b->block_ms = -1;
    b->backoff_ms = BACKOFF_MIN_MS;
    b->rng = backend_seed(b);
    pool->npinned++;
    TAILQ_INSERT_TAIL(&pool->pinned, b, pinned_link);
    backend_connect(b);
    if (b->state == BACKEND_DOWN) return NULL; /* backend_close already queued it for reaping */
    b->owner = c;
    return b;
}

int backend_pin_full(const struct worker *w, int instance)
{
    return w->pools[instance].npinned >= w->cfg->max_pinned;
}

void backend_exempt(struct backend *b, int64_t block_ms)
{
    assert(b->pinned && block_ms >= 0);
    b->block_ms = block_ms;
}

void backend_unblock_sent(struct backend *b)
{
    assert(b->pinned);
    b->unblocked = 1;
}

void backend_unpin(struct backend *b)
{
    b->owner = NULL;
    if (b->subscriber) {
        backend_abandon(b); /* still subscribed to something: never reuse */
        return;
    }
    if (b->fifo_count == 0)
        backend_make_idle(b);
    else
        b->release_when_idle = 1;
}

void backend_abandon(struct backend *b)
{
    b->owner = NULL;
    if (b->state == BACKEND_DOWN && b->fd < 0) return; /* already closed and queued for reaping */
    backend_close(b, "released");
}

void backend_reap(struct worker *w)
{
    struct backend *b;
    while ((b = TAILQ_FIRST(&w->dead_backends))) {
        TAILQ_REMOVE(&w->dead_backends, b, link);
        assert(b->pinned && b->fd < 0 && b->fifo_count == 0 && !b->dirty && !b->in_idle && b->mem_held == 0);
        if (b->timer) event_free(b->timer);
        bytebuf_free(&b->out);
        bytebuf_free(&b->wbuf);
        free(b->fifo);
        free(b->rbuf);
        free(b);
    }
}
