/* client.c: client connections: accept, parse, decide, dispatch; service woken clients; tear down closed ones. */
/* One connection's life from accept to teardown, and the decision and dispatch of each frame.
 * Its parts of their own: the socket (read, write, TLS, pausing for backpressure) is clientio.c's,
 * which hands the bytes it read up through c->parse (client_parse) and never calls here; the
 * MULTI/EXEC transaction is txn.c's; the pins and the "needs a dedicated connection" decision
 * are pins.c's (issue 29, item 3). */
#include "client.h"

#include "authgate.h"
#include "clientio.h"
#include "backend.h"
#include "nodes.h"
#include "local.h"
#include "pubsub.h"
#include "replies.h"
#include "report.h"
#include "request.h"
#include "ncpolicy.h"
#include "nearcache.h"
#include "pins.h"
#include "tracker.h"
#include "fanout.h"
#include "keptsend.h"
#include "router.h"
#include "txn.h"

#include <assert.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <unistd.h>

static size_t client_parse(struct client *c, const char *buf, size_t len);
static void client_tick_cb(evutil_socket_t fd, short what, void *arg);

#define CLIENT_TICK_MS 250 /* how often the clients are checked against the timeouts */

static void addr_format(const struct sockaddr *sa, char *out, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        snprintf(out, len, "%s:%d", host, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        snprintf(out, len, "[%s]:%d", host, ntohs(in6->sin6_port));
    } else {
        snprintf(out, len, "unix");
    }
}

void client_accept(struct worker *w, int fd, const struct sockaddr *sa, int salen, SSL_CTX *tls)
{
    const struct config *cfg = w->cfg;
    int now = __atomic_add_fetch(&w->proxy->clients_now, 1, __ATOMIC_RELAXED);
    if (now > cfg->max_clients) {
        __atomic_sub_fetch(&w->proxy->clients_now, 1, __ATOMIC_RELAXED);
        STAT_INC(&w->stats, connections_rejected);
        if (!tls) {
            char msg[64];
            size_t len = replies_error(msg, sizeof(msg), "ERR max number of clients reached");
            ssize_t n = write(fd, msg, len);
            (void)n;
        }
        close(fd);
        return;
    }
    if (sa->sa_family != AF_UNIX) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    struct client *c = xcalloc(1, sizeof(*c));
    c->worker = w;
    c->id = __atomic_add_fetch(&w->proxy->next_client_id, 1, __ATOMIC_RELAXED);
    c->created_ms = clock_wall_ms();
    c->last_active_ms = c->created_ms;
    addr_format(sa, c->addr, sizeof(c->addr));
    (void)salen;
    TAILQ_INIT(&c->queue);
    TAILQ_INIT(&c->resends);
    resp_parser_init(&c->parser);
    c->parser.max_bulk = cfg->max_request_bytes;
    replywin_init(&c->win, (uint64_t)cfg->client_output_limit);
    session_init(&c->session, cfg->nusers == 0);
    c->parser.unauthenticated = !c->session.authenticated; /* Redis's pre-AUTH request limits */
    c->fd = fd;
    c->pfd = -1;
    TAILQ_INSERT_TAIL(&w->clients, c, link);
    idmap_put(&w->clients_by_id, c->id, c);
    tracking_client_add(&w->proxy->tracking, c->id, w->id); /* a REDIRECT may name it */
    if (clientio_open(c, tls, client_parse) != 0) return;   /* c is closed */
    STAT_INC(&w->stats, connections_received);
    if (!w->client_tick) { /* the timeouts' check, from the first client on */
        w->client_tick = xevent_new(w->base, -1, EV_PERSIST, client_tick_cb, w);
        struct timeval tv = {0, CLIENT_TICK_MS * 1000};
        event_add(w->client_tick, &tv);
    }
}

/* Tear down a closed client: orphan its requests (replies still due from backends free
 * them when they come), close the dedicated connections holding its state (never reused),
 * close the socket, free it. */
static void client_teardown(struct client *c)
{
    struct worker *w = c->worker;
    assert(c->closed && !c->out_dirty && !c->postponed && !c->woken);
    struct request *req;
    int released = 0;
    size_t held = 0;
    while ((req = TAILQ_FIRST(&c->queue))) {
        TAILQ_REMOVE(&c->queue, req, link);
        held += req->held;
        request_release(req);
        released++;
    }
    assert(released == c->nqueued);  /* nqueued counts the queue */
    assert(held == c->replies_held); /* replies_held counts what its requests keep */
    c->nqueued = 0;
    pins_drop_all(c);
    authgate_client_free(c);
    keptsend_client_gone(c); /* after its requests were released: they are not sent again */
    if (c->owner_timer) event_free(c->owner_timer);
    if (c->rate_timer) event_free(c->rate_timer);
    conn_user_logout(c);
    clientio_close(c);
    bytebuf_free(&c->multi_buf);
    bytebuf_free(&c->multi_keep);
    bytebuf_free(&c->nc_multi);
    bytebuf_free(&c->track_multi);
    mem_set(w, &c->mem_held, 0);
    resp_parser_free(&c->parser);
    free(c->argv);
    free(c->argvlen);
    free(c->name);
    free(c);
}

void client_reap(struct worker *w)
{
    while (w->closing.n > 0) client_teardown(w->closing.items[--w->closing.n]);
}

/* Grow the argv scratch arrays to hold n arguments. */
static void client_argv_reserve(struct client *c, size_t n)
{
    if (n <= c->argv_cap) return;
    size_t cap = c->argv_cap ? c->argv_cap : 16;
    while (cap < n) cap *= 2;
    c->argv = xrealloc(c->argv, cap * sizeof(*c->argv));
    c->argvlen = xrealloc(c->argvlen, cap * sizeof(*c->argvlen));
    c->argv_cap = cap;
}

/*
 * RESET, as Redis's clearClientConnectionState: the transaction is dropped, the WATCH pin
 * gets UNWATCH and goes back to the idle list once its replies are in, the subscriber
 * connections are closed (never reused: nothing of another client's subscriptions can
 * leak; Redis sends no unsubscribe confirmations either), the name is forgotten, the
 * session is NORMAL and logged out when users are configured. Answers +RESET.
 */
static void client_reset(struct client *c, struct request *req)
{
    if (c->session.mode == SESSION_MULTI) txn_reset(c);
    (void)pins_watch_lost_take(c);
    if (c->watch_pin) {
        router_unwatch(c, req); /* its reply is req's to swallow */
        txn_watch_end(c);
    }
    pins_drop_subscribers(c);
    session_reset(&c->session, c->worker->cfg->nusers == 0);
    if (!c->session.authenticated) conn_user_logout(c);
    free(c->name);
    c->name = NULL;
    c->resp3 = 0; /* RESET returns to RESP2, as Redis (its dedicated connections are gone or idle) */
    request_complete(req, STR_AND_LEN("+RESET\r\n"));
}

/* A write was forwarded (or queued in c's MULTI): WAIT goes to its instance. */
static void client_note_write(struct client *c, const struct plan *plan, const struct policy_request *pr)
{
    /* a script may write (EVAL, EVALSHA, FCALL: ncpolicy_writes): a WAIT after it goes to its node */
    if (plan->kind == PLAN_FORWARD && (plan->writes || (pr->cmd && ncpolicy_writes(pr->cmd))) && plan->instance >= 0)
        session_wrote(&c->session, plan->instance, plan->slot, nodes_owner_id(c->worker, plan->instance, plan->slot));
}

static void request_pin_full(struct client *c, struct request *req, int instance)
{
    if (!nodes_pin_full(c->worker, instance)) {
        router_unavailable(c, req, instance);
        return;
    }
    char msg[200];
    snprintf(msg, sizeof(msg), "UNAVAILABLE no dedicated connection free for instance '%s' (max-pinned %d)",
             c->worker->cfg->instance_names[instance], c->worker->cfg->max_pinned);
    request_error(req, msg);
}

/*
 * A cluster's shard channel lives on its slot's node; a client's subscriptions on one instance
 * share one subscriber connection, opened on the node of the first. An SSUBSCRIBE or SUNSUBSCRIBE
 * whose slot is another node's is refused (1) rather than answered -MOVED.
 */
static int client_shard_elsewhere(struct client *c, const struct backend *b, const struct plan *plan)
{
    int owner = nodes_owner(c->worker, plan->instance, plan->slot);
    if (owner < 0 || owner == b->node) return 0;
    const char *host, *pin_host;
    int port, pin_port;
    backend_address(b, &pin_host, &pin_port);
    nodes_address(c->worker, plan->instance, owner, &host, &port);
    char text[ERROR_TEXT_MAX];
    snprintf(text, sizeof(text),
             "DENIED this shard channel lives on node %s:%d of cluster instance '%s', and this connection's "
             "subscriptions there are on node %s:%d; subscribe to it on another connection",
             host, port, c->worker->cfg->instance_names[plan->instance], pin_host, pin_port);
    request_error(request_new(c), text);
    return 1;
}

/* (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE: written to the subscriber connection, whose frames
 * go straight to the client (client_push); no reply is matched to a request. */
static void client_subscribe(struct client *c, const struct plan *plan, const char *frame)
{
    struct worker *w = c->worker;
    for (int i = 0; i < (int)w->cfg->ninstances; i++) {
        int wanted = plan->flow == FLOW_SUBSCRIBE ? i == plan->instance : (plan->all_instances || i == plan->instance);
        if (!wanted) continue;
        struct backend *b = c->pubsub.pin[i];
        if (b && plan->slot >= 0 && client_shard_elsewhere(c, b, plan)) return;
        if (!b && plan->flow == FLOW_SUBSCRIBE) {
            b = pins_subscriber(c, i, plan->slot); /* a shard channel: its slot's node */
            if (!b) {
                request_pin_full(c, request_new(c), i);
                return;
            }
        }
        if (!b) continue;
        router_subscribe(c, b, i, frame, c->parser.frame_len);
        c->stall = 1;
    }
}

/* 1 when the client holds no subscriber connection (UNSUBSCRIBE then answers locally). */
static int client_has_no_subscription(const struct client *c, const struct plan *plan)
{
    if (plan->all_instances) return !pubsub_holds_any(&c->pubsub);
    return c->pubsub.pin[plan->instance] == NULL;
}

/*
 * Would forwarding this plan now let it overtake an earlier request of another client
 * (backend_would_reorder)? Looks at the connection it would be staged on; split plans
 * and commands queued inside MULTI (nothing is sent before EXEC) are not looked at. `need` is
 * pins_need's answer for it.
 */
static int client_would_reorder(struct client *c, const struct plan *plan, unsigned need, int *domain)
{
    struct worker *w = c->worker;
    struct backend *b;
    int instance;
    if (plan->kind == PLAN_LOCAL && plan->local == LOCAL_EXEC && !c->multi_dirty && !c->watch_lost) {
        instance = txn_instance(c);
        int slot = txn_slot(c);
        b = c->watch_pin ? c->watch_pin : router_conn_for(c, instance, slot < 0 ? -1 : slot);
    } else {
        if (plan->kind != PLAN_FORWARD || c->session.mode == SESSION_MULTI || plan->merge != MERGE_NONE ||
            plan->instance < 0 || plan->all_instances)
            return 0;
        instance = plan->instance;
        if (need & PINS_NEED_FRESH)
            b = NULL; /* a fresh pin */
        else if (plan->flow == FLOW_SUBSCRIBE || plan->flow == FLOW_UNSUBSCRIBE)
            b = c->pubsub.pin[plan->instance];
        else
            b = router_conn_for(c, plan->instance, plan->slot);
    }
    *domain = b ? b->domain : backend_domain(instance, -1);
    return w->postponing[*domain] || backend_would_reorder(w, b);
}

/* c's frame for ordering domain `domain` waits: it is parsed again after the next backend flush. */
static void client_postpone(struct client *c, int domain)
{
    struct worker *w = c->worker;
    w->postponing[domain] = 1;
    if (!c->postponed) {
        ptrvec_push(&w->postponed, c);
        c->postponed = 1;
    }
    clientio_update_reading(c);
    /* no flush is asked for: what it waits behind is listed, and a flush comes when that
     * can write (asking here would wake it, postpone it again, ask again...) */
}

void client_wake_postponed(struct worker *w)
{
    /* requests postponed so as not to overtake the ones just flushed go now, in their order */
    memset(w->postponing, 0, sizeof(w->postponing));
    if (w->postponed.n == 0) return;
    struct ptrvec v = w->postponed;
    w->postponed = (struct ptrvec){0};
    for (size_t i = 0; i < v.n; i++) {
        struct client *c = v.items[i];
        c->postponed = 0;
        clientio_update_reading(c);
        clientio_resume_parsing(c);
    }
    free(v.items);
}

/* ---- metrics (stats.h) ---- */

/* A command's class for the per-namespace series: by the table's write / readonly flags. */
static enum stats_class client_stats_class(const struct command_def *cmd)
{
    _Static_assert(CMD_WRITE == 1 && CMD_READONLY == 2, "the class table is indexed by these two flags");
    static const uint8_t by_flags[4] = {STATS_OTHER, STATS_WRITE, STATS_READ, STATS_WRITE}; /* write wins */
    return cmd ? (enum stats_class)by_flags[cmd->flags & 3] : STATS_OTHER;
}

/* Count the parsed command in the per-namespace series (stats.h); the mark its request carries. */
static inline struct stats_mark client_stats_command(struct client *c, const struct policy_request *pr,
                                                     const struct plan *plan)
{
    enum stats_class cls = client_stats_class(pr->cmd);
    /* a command with keys in several namespaces counts once under each (policy listed the others) */
    for (uint32_t i = 0; plan->ns && i < plan->nmore_ns; i++)
        stats_command_more(&c->worker->stats, stats_key(plan->more_ns[i]->stats_slot, cls));
    return stats_command(&c->worker->stats, stats_key(plan->ns ? plan->ns->stats_slot : STATS_NS_NONE, cls),
                         plan->kind == PLAN_FORWARD ? plan->instance : -1, c->parser.frame_len);
}

/*
 * RESP3: COMMAND, COMMAND INFO and COMMAND DOCS answer in sets and maps that keygate's table
 * (the raw RESP2 bytes of Redis 7.0's answers) does not hold; they go to the first instance's
 * RESP3 connection, whose Redis answers them in its own RESP3 shape. COMMAND COUNT / LIST
 * (an integer, an array of names) stay local.
 */
static void client_resp3_plan(const struct client *c, struct plan *plan)
{
    if (plan->kind != PLAN_LOCAL || c->session.mode == SESSION_MULTI) return;
    if (plan->local != LOCAL_COMMAND && plan->local != LOCAL_COMMAND_INFO && plan->local != LOCAL_COMMAND_DOCS) return;
    plan->kind = PLAN_FORWARD;
    plan->instance = 0;
}

static void client_owner_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;
    (void)fd;
    (void)what;
    if (c->closed) return; /* its teardown frees the timer */
    c->owner_held = 0;
    conn_wake(c); /* the held frame is parsed again */
}

/*
 * A command that needs a new dedicated connection (WATCH, a blocking command, a first SUBSCRIBE)
 * to a cluster slot whose owner keygate cannot reach yet (its map is not read, or a failover is
 * under way: the owner's shared connection is not ready) waits, as a shared request does, instead of
 * failing: c is held (nothing more of it is parsed or read), the map is asked again, and the
 * frame is parsed again when the timer fires (25 ms doubling to 500 ms), as often as the router
 * waits (keptsend_max_waits: about 6.3 s on a cluster, failover-hold on a sentinel instance). Past
 * the bound it goes on, and fails as before (-UNAVAILABLE). `need` is pins_need's answer for the
 * command. 1 when c is held.
 */
static int client_waits_for_owner(struct client *c, const struct plan *plan, unsigned need)
{
    struct worker *w = c->worker;
    if (__builtin_expect(!(need & PINS_NEED_FRESH) || !nodes_may_move(w, plan->instance), 1) ||
        c->owner_waits >= keptsend_max_waits(w, plan->instance)) {
        c->owner_waits = 0;
        return 0;
    }
    const struct backend *shared =
        nodes_conn(w, plan->instance, &(struct node_want){.slot = plan->slot, .client_id = c->id});
    if (shared && shared->state == BACKEND_READY) { /* the owner answers: a pin to it can be opened */
        c->owner_waits = 0;
        return 0;
    }
    nodes_refresh(w, plan->instance);
    int ms = keptsend_wait_ms(c->owner_waits++);
    if (!c->owner_timer) c->owner_timer = xevtimer_new(w->base, client_owner_timer_cb, c);
    struct timeval tv = {0, ms * 1000};
    evtimer_add(c->owner_timer, &tv);
    c->owner_held = 1;
    return 1;
}

/*
 * Why a whole frame is left in c's buffer, to be parsed again later (client_parse stops there;
 * the frame is decided again when it is). Each reason has its own wake-up.
 */
enum client_later {
    CLIENT_NOW = 0,     /* handled: the next frame may follow */
    CLIENT_LATER_RATE,  /* its user is over rate= (client_rate_hold): c's rate timer */
    CLIENT_LATER_QUEUE, /* it needs an empty queue (pins_need): c stalls until every reply is written */
    CLIENT_LATER_OWNER, /* its new pin's cluster slot has no reachable owner yet (client_waits_for_owner): c's owner
                           timer */
    CLIENT_LATER_ORDER, /* it would overtake an earlier request of another client (client_would_reorder): the next
                           backend flush */
    CLIENT_LATER_AUTH,  /* an AUTH that is not its address's turn (authgate_wait): c's AUTH timer */
};

/* Must c's frame, decided as `plan` (pins_need's answer `need`), wait? Sets up the reason's
 * wake-up (the stall, the owner timer, the postponement, the AUTH turn) when it must. */
static enum client_later client_frame_later(struct client *c, const struct plan *plan, unsigned need)
{
    if ((need & PINS_NEED_EMPTY_QUEUE) && c->nqueued > 0) {
        c->stall = 1;
        return CLIENT_LATER_QUEUE;
    }
    if (__builtin_expect(client_waits_for_owner(c, plan, need), 0)) return CLIENT_LATER_OWNER;
    int domain = 0;
    if (client_would_reorder(c, plan, need, &domain)) {
        client_postpone(c, domain); /* it would leave before a request read earlier: wait for the next flush */
        return CLIENT_LATER_ORDER;
    }
    if (plan->kind == PLAN_LOCAL && (plan->local == LOCAL_AUTH || plan->local == LOCAL_HELLO) &&
        authgate_is_attempt(plan, c->parser.argc, c->argv, c->argvlen) && authgate_wait(c))
        return CLIENT_LATER_AUTH;
    return CLIENT_NOW;
}

/*
 * Handle one parsed frame: decide, then answer, refuse, buffer or forward. Returns why the
 * frame must wait instead (client_frame_later): the caller leaves it unconsumed and parses it
 * again then.
 */
static enum client_later client_handle_frame(struct client *c, const char *frame)
{
    struct worker *w = c->worker;
    struct resp_parser *p = &c->parser;

    client_argv_reserve(c, p->argc);
    for (size_t i = 0; i < p->argc; i++) {
        c->argv[i] = resp_arg_ptr(p, frame, i);
        c->argvlen[i] = p->args[i].len;
    }
    struct policy_request pr = {
        .argc = p->argc,
        .argv = c->argv,
        .argvlen = c->argvlen,
        .now_ms = c->now_ms,
    };
    pr.cmd = command_lookup(p->argc, c->argv, c->argvlen, &pr.unknown_subcommand);

    struct plan plan;
    policy_decide(w->cfg, w->cfg->registry, &c->session, &pr, &plan);
    if (c->resp3) client_resp3_plan(c, &plan);
    enum client_later later = client_frame_later(c, &plan, pins_need_of(c, &plan));
    if (__builtin_expect(later != CLIENT_NOW, 0)) {
        plan_release(&plan);
        return later;
    }
    STAT_INC(&w->stats, commands_processed);
    if (pr.cmd) c->last_cmd = pr.cmd->name;
    client_note_write(c, &plan, &pr);
    report_note(w, &plan, &pr); /* issue 13: report mode and the default line, counted and logged */

    if (plan.kind == PLAN_FORWARD && plan.flow == FLOW_UNSUBSCRIBE && client_has_no_subscription(c, &plan)) {
        plan.kind = PLAN_LOCAL; /* nothing subscribed: Redis's empty confirmation */
        plan.local = LOCAL_UNSUBSCRIBE_NONE;
    } else if (plan.kind == PLAN_FORWARD && (plan.flow == FLOW_SUBSCRIBE || plan.flow == FLOW_UNSUBSCRIBE)) {
        client_stats_command(c, &pr, &plan);
        client_subscribe(c, &plan, frame);
        plan_release(&plan);
        return CLIENT_NOW;
    }
    struct stats_mark mark = client_stats_command(c, &pr, &plan);
    const char *hit;
    size_t hit_len;
    if (c->nqueued == 0 && !(c->session.reply_off | c->session.reply_skip) && !c->tracking_flags &&
        !c->tracking_caching && nearcache_hit_now(c, &plan, &pr, &hit, &hit_len)) {
        /* a near-cache hit with nothing ahead of it: its reply goes out now, no request made (not
         * for a tracking client: tracker_command remembers what it reads) */
        stats_reply_out(&w->stats, &mark, hit_len);
        conn_out(c, hit, hit_len);
        plan_release(&plan);
        return CLIENT_NOW;
    }
    struct request *req = request_new(c);
    req->mark = mark;
    /* CLIENT REPLY OFF / SKIP (without either, only their own replies are dropped, and they are empty) */
    if (__builtin_expect(c->session.reply_off | c->session.reply_skip, 0))
        req->silent = (uint8_t)policy_reply_dropped(&c->session, &plan);
    tracker_command(c, req, &plan, pr.cmd, p->argc, c->argv, c->argvlen);
    if (c->session.mode == SESSION_MULTI &&
        (plan.kind == PLAN_FORWARD || (plan.kind == PLAN_ERROR && !plan.keeps_transaction))) {
        txn_queue(c, req, &plan, frame);
        plan_release(&plan);
        return CLIENT_NOW;
    }
    enum nearcache_verdict nv = nearcache_try(c, req, &plan, &pr);
    if (nv != NEARCACHE_PASS) {
        struct backend *nb = nv == NEARCACHE_HIT ? NULL : router_conn_for(c, plan.instance, plan.slot);
        if (nv == NEARCACHE_FILL) router_forward_fill(c, nb, req, &plan, frame);
        if (nv == NEARCACHE_PREFETCH) router_forward(c, nb, req, &plan, frame), router_forward_prefetch(c, nb, req);
        plan_release(&plan);
        return CLIENT_NOW;
    }
    if (plan.kind == PLAN_FORWARD) nearcache_writes(c, req, &plan);
    switch (plan.kind) {
    case PLAN_ERROR:
        request_error(req, plan.error);
        break;
    case PLAN_LOCAL:
        STAT_INC(&w->stats, commands_local);
        if (plan.local == LOCAL_MULTI) {
            txn_begin(c, req);
        } else if (plan.local == LOCAL_EXEC) {
            txn_exec(c, req);
        } else if (plan.local == LOCAL_DISCARD) {
            txn_discard(c, req);
        } else if (plan.local == LOCAL_RESET) {
            client_reset(c, req);
        } else {
            local_execute(c, req, &plan, p->argc, c->argv, c->argvlen);
        }
        break;
    case PLAN_FORWARD:
        if (plan.merge != MERGE_NONE) {
            fanout_split(c, req, &plan, frame);
        } else if (plan.flow == FLOW_WATCH) {
            struct backend *b = pins_watch(c, plan.instance, plan.slot);
            if (!b) {
                request_pin_full(c, req, plan.instance);
                break;
            }
            router_forward(c, b, req, &plan, frame);
        } else if (plan.flow == FLOW_UNWATCH && !c->watch_pin) {
            (void)pins_watch_lost_take(c); /* its connection is already gone: nothing is watched */
            session_unwatch(&c->session);
            request_complete(req, STR_AND_LEN("+OK\r\n"));
        } else if (plan.flow == FLOW_UNWATCH) {
            router_forward(c, c->watch_pin, req, &plan, frame);
            txn_watch_end(c);
        } else if (plan.flow == FLOW_BLOCK && plan.wait_sync &&
                   nodes_owner_id(w, plan.instance, plan.slot) != c->session.write_node &&
                   !nodes_id_serves(w, plan.instance, c->session.write_node)) {
            /* a WAIT whose write went to a node that owns no slot now (a failover demoted it, a
             * frozen primary woke as a replica, it was emptied): the slot's new owner's replicas
             * cannot vouch for it, and the write may be lost; none is known to have it. (A slot
             * moved by a reshard leaves its old owner serving others: the WAIT goes to the new
             * owner, which has the write by MIGRATE.) */
            request_complete(req, STR_AND_LEN(":0\r\n"));
        } else if (plan.flow == FLOW_BLOCK) {
            int64_t block_ms = command_block_timeout_ms(pr.cmd, p->argc, c->argv, c->argvlen);
            struct backend *b = pins_block(c, plan.instance, plan.slot, block_ms);
            if (!b) {
                request_pin_full(c, req, plan.instance);
                break;
            }
            req->blocking = 1;
            req->block_ms = block_ms;
            session_block(&c->session);
            router_forward(c, b, req, &plan, frame);
            backend_unpin(b); /* back to the idle list once it answered */
            c->stall = 1;     /* later commands wait for it, as they would on Redis */
        } else {
            router_forward(c, router_conn_for(c, plan.instance, plan.slot), req, &plan, frame);
        }
        break;
    }
    plan_release(&plan);
    return CLIENT_NOW;
}

static void client_rate_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;
    (void)fd;
    (void)what;
    if (c->closed) return; /* its teardown frees the timer */
    c->rate_held = 0;
    conn_wake(c); /* the held frame is parsed again */
}

/*
 * The frame just parsed is one request of c's user (userlimit.h): it takes a token of the
 * user's rate= bucket, once (rate_paid: a frame parsed again after a stall or a postponement
 * is not counted twice). With none left c is held: the frame and every one after it stay in
 * its buffer, nothing more is read from it (clientio_update_reading), until the timer fires
 * when the bucket has refilled. 1 when c is held.
 */
static int client_rate_hold(struct client *c)
{
    if (!c->ulimit || c->rate_paid) return 0;
    int rate = c->session.user ? c->session.user->rate : 0;
    if (!rate) {
        c->user_requests++; /* counted at the end of the batch (client_parse) */
        c->rate_paid = 1;
        return 0;
    }
    uint64_t wait = userlimit_take(c->ulimit, rate, clock_mono_ns());
    if (!wait) {
        c->rate_paid = 1;
        return 0;
    }
    if (!c->rate_timer) c->rate_timer = xevtimer_new(c->worker->base, client_rate_timer_cb, c);
    uint64_t us = (wait + 999) / 1000; /* rounded up: a timer a little early would only find none again */
    struct timeval tv = {(time_t)(us / 1000000u), (suseconds_t)(us % 1000000u)};
    evtimer_add(c->rate_timer, &tv);
    c->rate_held = 1;
    return 1;
}

static void client_protocol_error(struct client *c, const char *text)
{
    struct request *req = request_new(c);
    req->silent = c->session.reply_off || c->session.reply_skip; /* as Redis: no reply under CLIENT REPLY OFF */
    STAT_INC(&c->worker->stats, errors_protocol);
    log_event(LOG_INFO, "client_protocol_error", &(struct log_fields){.client = c->addr, .client_id = c->id},
              "client %llu %s: %s", (unsigned long long)c->id, c->addr, text);
    c->closing = 1;
    c->qlen = 0;
    char buf[200];
    snprintf(buf, sizeof(buf), "ERR %s", text);
    request_error(req, buf); /* closed once it is written */
}

/*
 * Parse and handle every whole frame of buf[0..len); returns the bytes consumed. Stops at
 * an unfinished frame, a stall, backpressure, or a protocol error (which closes c).
 */
static size_t client_parse(struct client *c, const char *buf, size_t len)
{
    size_t pos = 0;
    const struct config *cfg = c->worker->cfg;
    c->now_ms = clock_wall_ms();
    c->last_active_ms = c->now_ms;
    c->need_more = 0;
    while (pos < len && !c->closing && !c->auth_held && !c->owner_held && !c->rate_held &&
           c->nqueued < cfg->max_pending && clientio_window_open(c)) {
        enum resp_status st = resp_parse_request(&c->parser, buf + pos, len - pos);
        if (st == RESP_NEED_MORE) {
            if ((int64_t)(len - pos) > cfg->max_request_bytes + REQUEST_FRAMING_SLACK) {
                client_protocol_error(c, "Protocol error: request larger than max-request-size");
                return len;
            }
            c->need_more = 1;
            break;
        }
        if (st == RESP_ERROR) {
            client_protocol_error(c, c->parser.error);
            return len;
        }
        const char *frame = buf + pos;
        if (c->parser.argc > 0 && clientio_stalled(c)) break; /* parsed again later */
        c->stall = 0;
        if (c->parser.argc > 0) {
            enum client_later later = client_rate_hold(c) ? CLIENT_LATER_RATE : client_handle_frame(c, frame);
            if (later != CLIENT_NOW) break; /* parsed again at its reason's wake-up */
            c->rate_paid = 0;
            session_command_done(&c->session); /* CLIENT REPLY SKIP's window moves on */
        }
        if (c->closed) return len; /* a closed client takes no more input */
        pos += c->parser.frame_len;
        if (c->parser.argc > 0) c->parser.unauthenticated = !c->session.authenticated; /* AUTH lifts the limits */
    }
    if (c->user_requests) { /* its user's count: once a batch */
        assert(c->ulimit);  /* a logout mid-batch counted them and cleared them (conn_user_logout) */
        userlimit_count(c->ulimit, c->user_requests);
        c->user_requests = 0;
    }
    return pos;
}

/* The client of w holding the most bytes (input, transaction, replies queued or kept), if
 * it holds at least `least`; else NULL. */
static struct client *client_largest(struct worker *w, size_t least)
{
    struct client *c, *best = NULL;
    size_t most = least;
    TAILQ_FOREACH(c, &w->clients, link) {
        if (c->mem_held + c->replies_held >= most) {
            most = c->mem_held + c->replies_held;
            best = c;
        }
    }
    return best;
}

#define MEM_EVICT_AFTER_MS 500 /* over max-memory this long: evict the largest client */

const char *client_timed_out(const struct client_timeout_facts *f, const struct config *cfg, int64_t now,
                             int64_t *since)
{
    int64_t idle = cfg->client_timeout_ms, header = cfg->client_header_timeout_ms;
    *since = f->last_active_ms;
    if (idle > 0 && f->nqueued == 0 && f->mode != SESSION_BLOCKED && f->mode != SESSION_SUBSCRIBED &&
        !f->resp3_subscribed && now - f->last_active_ms >= idle)
        return "idle past client-timeout";
    if (header <= 0) return NULL;
    *since = f->created_ms;
    if (f->tls_handshaking && now - f->created_ms >= header)
        return "TLS handshake unfinished within client-header-timeout";
    if (cfg->nusers > 0 && !f->authenticated && now - f->created_ms >= header)
        return "not authenticated within client-header-timeout";
    *since = f->partial_since_ms;
    if (f->partial_since_ms > 0 && now - f->partial_since_ms >= header &&
        (int64_t)f->qlen < (now - f->partial_since_ms) / 1000 * READ_CHUNK_BYTES)
        return "a request unfinished past client-header-timeout";
    return NULL;
}

/* What client_timed_out reads of c. */
static struct client_timeout_facts client_timeout_facts_of(const struct client *c)
{
    return (struct client_timeout_facts){
        .created_ms = c->created_ms,
        .last_active_ms = c->last_active_ms,
        .partial_since_ms = c->partial_since_ms,
        .qlen = c->qlen,
        .nqueued = c->nqueued,
        .mode = c->session.mode,
        .resp3_subscribed = c->resp3 && pubsub_subscribed(&c->pubsub),
        .tls_handshaking = c->tls_handshaking,
        .authenticated = c->session.authenticated,
    };
}

/* Every CLIENT_TICK_MS: the clients of w against the timeouts. */
static void client_tick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    (void)fd;
    (void)what;
    const struct config *cfg = w->cfg;
    userlimit_tick(&w->proxy->users, clock_mono_ns()); /* rate= throttling episodes that ended */
    if (cfg->client_timeout_ms <= 0 && cfg->client_header_timeout_ms <= 0) return;
    int64_t now = clock_wall_ms();
    struct client *c, *next;
    for (c = TAILQ_FIRST(&w->clients); c; c = next) {
        next = TAILQ_NEXT(c, link); /* a closed client leaves the list */
        int64_t since;
        struct client_timeout_facts facts = client_timeout_facts_of(c);
        const char *why = client_timed_out(&facts, cfg, now, &since);
        if (!why) continue;
        log_event(LOG_INFO, "client_timed_out", &(struct log_fields){.client = c->addr, .client_id = c->id},
                  "client %llu %s closed: %s (%lld ms)", (unsigned long long)c->id, c->addr, why,
                  (long long)(now - since));
        STAT_INC(&w->stats, clients_timed_out);
        conn_close(c, why);
    }
}

void client_memory_tick(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    (void)fd;
    (void)what;
    if (mem_over(w)) {
        int64_t now = clock_wall_ms();
        if (!w->mem_over_since_ms) w->mem_over_since_ms = now;
        if (now - w->mem_over_since_ms >= MEM_EVICT_AFTER_MS) {
            /* nothing is read while over, so unfinished requests never finish: as Redis's
             * client eviction (maxmemory-clients) does, the client holding the most goes */
            struct client *c = client_largest(w, (size_t)(w->cfg->max_memory / 64));
            if (c) {
                log_event(LOG_WARN, "client_evicted", &(struct log_fields){.client = c->addr, .client_id = c->id},
                          "client %llu %s closed: keygate is over max-memory (%lld bytes) and this client "
                          "holds %zu bytes (input %zu, transaction %zu)",
                          (unsigned long long)c->id, c->addr, (long long)w->cfg->max_memory,
                          c->mem_held + c->replies_held, c->qlen, c->multi_buf.len);
                STAT_INC(&w->stats, clients_evicted);
                conn_close(c, "evicted: over max-memory");
            }
            w->mem_over_since_ms = now;
        }
    } else {
        w->mem_over_since_ms = 0;
        struct client *c, *next;
        for (c = TAILQ_FIRST(&w->clients); c; c = next) {
            next = TAILQ_NEXT(c, link);
            if (!c->mem_paused) continue;
            c->mem_paused = 0;
            clientio_update_reading(c); /* may pause it again (and re-arm the timer) */
            if (mem_over(w)) break;
        }
    }
    int waiting = 0;
    struct client *c;
    TAILQ_FOREACH(c, &w->clients, link) waiting |= c->mem_paused;
    if (waiting && !evtimer_pending(w->mem_timer, NULL)) {
        struct timeval tv = {0, 20 * 1000};
        evtimer_add(w->mem_timer, &tv);
    }
}
