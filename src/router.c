/* router.c: the only code that writes requests for a backend and interprets what it answers. */
/* Over 1,000 lines (about 1,180), for now: the replicas=N group commit went to replcommit.c, the frame
 * writers to frames.c, the merges' byte work to fanmerge.c and the split / fanned-out commands to
 * fanout.c; what keeps it over is the re-sends of cluster and Sentinel requests (route_again,
 * route_try, route_intercept and the resend list, about 470 lines: the re-send module of issue 29,
 * item 2), which move on their own branch, left untouched here so that the branches merge cleanly. */
#include "router.h"
#include "nodes.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "fanmerge.h"
#include "frames.h"
#include "info.h"
#include "nearcache.h"
#include "pins.h"
#include "tracker.h"
#include "replcommit.h"
#include "replies.h"
#include "resend.h"
#include "scripts.h"
#include "slotmap.h"

_Static_assert(CONFIG_MAX_INSTANCES <= REPLIES_MAX_PARTS, "a split command has one part per instance");
_Static_assert(PLAN_MAX_PARTS <= REPLIES_MAX_PARTS && PLAN_MAX_PARTS <= UINT16_MAX, "a part index fits everywhere");

/* Cluster re-sends (README, Redis Cluster): at most this many -MOVED / -ASK hops, and waits after
 * -TRYAGAIN / -CLUSTERDOWN / no reachable owner, 25 ms doubling to 500 ms, until the request's
 * deadline: its first wait + the time this many waits take (about 6.3 s: a replica's promotion
 * fits; router_hold_ms), then the last answer passes through. */
#define ROUTE_MAX_HOPS 5
#define ROUTE_MAX_RETRIES 16
#define ROUTE_RETRY_MIN_MS 25
#define ROUTE_RETRY_MAX_MS 500
_Static_assert((int)REPLIES_MERGE_VALUES == (int)MERGE_MGET && (int)REPLIES_MERGE_SUM == (int)MERGE_SUM &&
                   (int)REPLIES_MERGE_CONCAT == (int)MERGE_KEYS && (int)REPLIES_MERGE_SAME == (int)MERGE_SCRIPT_LOAD &&
                   (int)REPLIES_MERGE_AND == (int)MERGE_SCRIPT_EXISTS,
               "replies_merge takes plan_merge's values");
_Static_assert((int)ROUTE_REPL_SYNC == (int)REPLCOMMIT_KIND_SYNC && (int)ROUTE_REPL_WAIT == (int)REPLCOMMIT_KIND_WAIT,
               "replcommit's own entries keep the router's kinds");

/* One more reply owed on b for req, used as `kind`; while req records a send (a cluster
 * request, route_out), the entry is recorded and owed once the send is staged (route_stage). */
static void route_expect(struct backend *b, struct request *req, enum route_kind kind, int part)
{
    assert(part >= 0 && part <= UINT16_MAX);
    struct request_send *s = req->recording;
    if (__builtin_expect(s != NULL, 0)) {
        if (s->nentries == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 8;
            s->entries = xrealloc(s->entries, (size_t)s->cap * sizeof(*s->entries));
        }
        s->entries[s->nentries++] =
            (struct request_entry){.kind = (uint8_t)kind, .part = (uint16_t)part, .end = (uint32_t)s->bytes.len};
        return;
    }
    backend_expect(b, (struct pending){.req = req, .kind = (uint8_t)kind, .part = (uint16_t)part});
    request_expect(req);
}

/* ---- cluster sends: kept, and sent again when Redis says the command did not run ---- */

static void route_again(struct request *req, struct request_send *s);
static void route_unblock_client(struct request *req);

/* A lone EVALSHA's send (request_send.script): what its -NOSCRIPT may do. */
enum route_sha {
    ROUTE_SHA_NONE = 0, /* not an EVALSHA (or one inside the client's MULTI) */
    ROUTE_SHA_EVALSHA,  /* its -NOSCRIPT may load the script (resend_decide_load) */
    ROUTE_SHA_LOAD,     /* its next attempt loads the script first (route_stage_load) */
    ROUTE_SHA_LOADED,   /* loaded once: a second -NOSCRIPT passes */
};

/*
 * A -NOSCRIPT answered s's EVALSHA and keygate holds the script (scripts.h): SCRIPT LOAD <body>
 * goes on b before the EVALSHA again (and before ASKING, which must come right before the command),
 * its reply swallowed (ROUTE_SCRIPT_LOAD). A script forgotten since the NOSCRIPT (the table's
 * bound) is not loaded: the EVALSHA goes again alone, and its NOSCRIPT passes.
 */
static void route_stage_load(struct request *req, struct request_send *s, struct backend *b, struct bytebuf *out)
{
    s->script = ROUTE_SHA_LOADED;
    size_t body_len = 0;
    if (!scripts_write_load(&req->worker->proxy->scripts, s->sha, out, &body_len)) return;
    backend_expect(b, (struct pending){.req = req, .kind = ROUTE_SCRIPT_LOAD});
    request_expect(req);
    STAT_INC(&req->worker->stats, cluster_scripts_loaded);
    if (log_min_level > LOG_DEBUG) return;
    const char *host;
    int port;
    backend_address(b, &host, &port);
    char hex[2 * SCRIPTS_SHA_LEN + 1];
    for (int i = 0; i < SCRIPTS_SHA_LEN; i++) snprintf(hex + 2 * i, 3, "%02x", s->sha[i]);
    const char *name = req->worker->cfg->instance_names[s->instance];
    log_event(LOG_DEBUG, "cluster_script_loaded",
              &(struct log_fields){.instance = name, .backend_host = host, .backend_port = port},
              "instance '%s' node %s:%d answered -NOSCRIPT for script %s: loading the script keygate saw (%zu bytes) "
              "there, and sending the EVALSHA again",
              name, host, port, hex, body_len);
}

/* Stage s's entries from s->from on b (after SCRIPT LOAD when a -NOSCRIPT asked for it, after ASKING when
 * s->ask): one attempt. */
static void route_stage(struct request *req, struct request_send *s, struct backend *b)
{
    struct bytebuf *out = backend_stage(b);
    if (__builtin_expect(s->script == ROUTE_SHA_LOAD, 0)) route_stage_load(req, s, b, out);
    if (s->ask) {
        bytebuf_add(out, STR_AND_LEN("*1\r\n$6\r\nASKING\r\n"));
        backend_expect(b, (struct pending){.req = req, .kind = ROUTE_ASKING});
        request_expect(req);
    }
    if (s->from > 0) { /* entries before `from` ran: drop them from the send */
        uint32_t cut = s->entries[s->from - 1].end;
        memmove(s->bytes.p, s->bytes.p + cut, s->bytes.len - cut);
        s->bytes.len -= cut;
        s->nentries -= s->from;
        memmove(s->entries, s->entries + s->from, (size_t)s->nentries * sizeof(*s->entries));
        for (int i = 0; i < s->nentries; i++) s->entries[i].end -= cut;
        s->from = 0;
    }
    bytebuf_add(out, s->bytes.p, s->bytes.len);
    for (int i = 0; i < s->nentries; i++) {
        backend_expect(b, (struct pending){.req = req, .kind = s->entries[i].kind, .part = s->entries[i].part});
        request_expect(req);
    }
    s->left = s->nentries;
    s->redo = s->ask = s->wait = 0;
}

/* The connection s's next attempt goes to: the ASK target, else the slot's owner. */
static struct backend *route_target(struct request *req, struct request_send *s)
{
    struct client *c = req->client;
    struct node_want want = {.slot = s->slot, .resp3 = c->resp3, .client_id = c->id};
    if (s->ask) {
        want.host = s->ask_host;
        want.port = s->ask_port;
    }
    return nodes_conn(req->worker, s->instance, &want);
}

int router_wait_ms(int n)
{
    int ms = ROUTE_RETRY_MIN_MS << (n < 5 ? (n > 0 ? n : 0) : 5);
    return ms > ROUTE_RETRY_MAX_MS ? ROUTE_RETRY_MAX_MS : ms;
}

/*
 * A client's cluster sends that wait to go again (no reachable owner, -TRYAGAIN, -CLUSTERDOWN, a
 * connection lost before they were written) wait on one list, in the order of the client's
 * requests, and go in that order: a later request never overtakes an earlier one that waits,
 * and a new request of the client waits behind them (route_out_done). Each carries its own
 * deadline (its first wait + router_hold_ms), so they all wait together and fail together. One
 * timer per client: the first send's wait, 25 ms doubling with its retries to 500 ms, or an
 * earlier deadline.
 */
static void route_resend_cb(evutil_socket_t fd, short what, void *arg);

/* s's deadline starts with its first wait (on the list, or for its owner): past it, it gives up. */
static void route_deadline_start(struct request_send *s)
{
    if (!s->deadline_ns)
        s->deadline_ns = clock_mono_ns() + (uint64_t)router_hold_ms(s->req->worker, s->instance) * 1000000u;
}

/* The timer fires for the first send's next attempt, or for the earliest deadline on the list
 * when that comes sooner: every waiting send gives up at its own deadline. */
static void route_resend_arm(struct client *c)
{
    const struct request_send *first = TAILQ_FIRST(&c->resends);
    if (!first || (c->resend_timer && evtimer_pending(c->resend_timer, NULL))) return;
    if (!c->resend_timer) c->resend_timer = xevtimer_new(c->worker->base, route_resend_cb, c);
    int64_t us = (int64_t)router_wait_ms(first->retries > 1 ? first->retries - 1 : 0) * 1000;
    uint64_t now = clock_mono_ns();
    const struct request_send *s;
    TAILQ_FOREACH(s, &c->resends, resend_link) { /* one past its deadline waits for its turn only */
        if (!s->deadline_ns || s->deadline_ns <= now) continue;
        int64_t left = (int64_t)((s->deadline_ns - now + 999) / 1000);
        if (left < us) us = left;
    }
    struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
    evtimer_add(c->resend_timer, &tv);
}

/* s waits on its client's list, at its request's place (parts of one request in part order). */
static void route_resend_enqueue(struct client *c, struct request_send *s)
{
    assert(!s->queued);
    struct request_send *at = TAILQ_LAST(&c->resends, request_send_list);
    int part = (int)(s - s->req->sends);
    while (at && (at->req->seq > s->req->seq || (at->req == s->req && (int)(at - at->req->sends) > part)))
        at = TAILQ_PREV(at, request_send_list, resend_link);
    if (at)
        TAILQ_INSERT_AFTER(&c->resends, at, s, resend_link);
    else
        TAILQ_INSERT_HEAD(&c->resends, s, resend_link);
    s->queued = 1;
    if (!s->held_since_ns) s->held_since_ns = clock_mono_ns(); /* keygate_request_hold_seconds */
    route_deadline_start(s);
    route_resend_arm(c);
}

/* The bounds are reached: s's last answer (or -UNAVAILABLE) is the reply of its part or request. */
static void route_give_up(struct request *req, struct request_send *s);

/* s's wait on the list ends (it goes, or gives up): its hold is counted once. */
static void route_held(struct request *req, struct request_send *s)
{
    if (!s->held_since_ns) return;
    stats_request_hold(&req->worker->stats, s->instance, clock_mono_ns() - s->held_since_ns);
    s->held_since_ns = 0;
}

/* One attempt of s (not on the list): 1 staged; 0 no connection (a retry counted, s waits);
 * -1 past its bounds (ROUTE_MAX_HOPS, or no connection past its deadline: its part or request
 * answered, s goes nowhere). */
static int route_try(struct request *req, struct request_send *s);

/* Is s past its bounds: ROUTE_MAX_HOPS redirects, or its deadline (its first wait + the hold)? */
static int route_expired(const struct request_send *s, uint64_t now)
{
    return s->hops > ROUTE_MAX_HOPS || (s->deadline_ns && now >= s->deadline_ns);
}

/* s waits once more for its owner (a retry, counted): its deadline starts with its first wait. */
static void route_wait_counted(struct request *req, struct request_send *s)
{
    s->retries++;
    STAT_INC(&req->worker->stats, cluster_retries);
    route_deadline_start(s);
}

/* Could s's next attempt be staged now if nothing waited ahead of it (its target's connection is up)? */
static int route_reachable(struct request *req, struct request_send *s)
{
    struct client *c = req->client;
    struct node_want want = {.slot = s->slot < 0 ? -1 : s->slot, .resp3 = c->resp3, .client_id = c->id};
    if (s->ask) {
        want.host = s->ask_host;
        want.port = s->ask_port;
    }
    struct backend *b = nodes_conn(req->worker, s->instance, &want);
    return b && b->state != BACKEND_DOWN;
}

/*
 * The client's timer: its sends go in order while they can (the first that cannot waits, and
 * everything behind it); then every send behind it past its own deadline whose own target cannot
 * be reached either gives up: a client's waiting requests wait together and fail together (an
 * answer takes its turn in the client's queue). One past its deadline that waits only for its
 * turn goes once the ones ahead of it went or gave up.
 */
static void route_resend_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct client *c = arg;
    struct request_send *s;
    while ((s = TAILQ_FIRST(&c->resends))) {
        TAILQ_REMOVE(&c->resends, s, resend_link);
        s->queued = 0;
        s->wait = 0;
        if (route_try(s->req, s) != 0) continue; /* staged, or answered: the next one may go */
        TAILQ_INSERT_HEAD(&c->resends, s, resend_link);
        s->queued = 1;
        break;
    }
    uint64_t now = clock_mono_ns();
    for (int found = 1; found;) {
        found = 0;
        TAILQ_FOREACH(s, &c->resends, resend_link) {
            assert(s->queued && s->req->client == c);
            if (s == TAILQ_FIRST(&c->resends) || !route_expired(s, now) || route_reachable(s->req, s)) continue;
            TAILQ_REMOVE(&c->resends, s, resend_link);
            s->queued = 0;
            route_give_up(s->req, s);
            found = 1;
            break; /* giving up answers a request: the list is walked again */
        }
    }
    route_resend_arm(c);
}

void router_client_gone(struct client *c)
{
    struct request_send *s;
    while ((s = TAILQ_FIRST(&c->resends))) {
        TAILQ_REMOVE(&c->resends, s, resend_link);
        s->queued = 0;
        request_reply_consumed(s->req); /* the reply that stood for it: never sent again */
    }
    if (c->resend_timer) event_free(c->resend_timer);
    c->resend_timer = NULL;
}

/*
 * A blocking command that its node did not run (-MOVED, -TRYAGAIN, -CLUSTERDOWN) goes again on a
 * new dedicated connection to its slot's owner, which becomes the client's blocking pin (CLIENT
 * UNBLOCK finds it; the old one goes back to the idle list, having answered). NULL when no pin
 * can be had now (max-pinned, no owner known): the caller waits and tries again.
 */
static struct backend *route_repin(struct request *req, struct request_send *s)
{
    return pins_block(req->client, s->instance, s->slot, req->block_ms);
}

static int route_try(struct request *req, struct request_send *s)
{
    if (s->hops > ROUTE_MAX_HOPS) {
        route_give_up(req, s);
        return -1;
    }
    struct backend *b = req->blocking ? route_repin(req, s) : route_target(req, s);
    if (b) {
        route_held(req, s);
        route_stage(req, s, b);
        /* a new pin goes back to the idle list once it answered: only now that it owes the
         * command (unpinned before, one with nothing owed went idle at once, its exemption from
         * backend-timeout reset, and another client's blocking command could take it) */
        if (req->blocking) backend_unpin(b);
        request_reply_consumed(req);
        return 1;
    }
    s->ask = 0; /* the owner is not known or its node is down: ask the map again, and wait */
    free(s->error);
    s->error = NULL;
    route_wait_counted(req, s);
    nodes_refresh(req->worker, s->instance);
    if (!route_expired(s, clock_mono_ns())) return 0;
    route_give_up(req, s);
    return -1;
}

/*
 * s's attempt ended without running (every reply of it came; one reply owed to req stands
 * for it until it goes again): stage it again now, or wait on the client's list (route_resend_*),
 * or give up. A request whose client left is not sent again.
 */
static void route_again(struct request *req, struct request_send *s)
{
    if (!req->client) {
        request_reply_consumed(req);
        return;
    }
    struct client *c = req->client;
    if (route_expired(s, clock_mono_ns())) {
        route_give_up(req, s);
        return;
    }
    if (req->blocking && s->ask) { /* a blocking command waits for the migration to end, on no ASK target */
        s->ask = 0;
        s->wait = 1;
        s->retries++;
    }
    if (!s->wait && TAILQ_EMPTY(&c->resends) && route_try(req, s) != 0) return; /* nothing waits ahead of it */
    route_resend_enqueue(c, s);
}

static void route_part(struct request *req, int part, const char *reply, size_t len);
static void route_part_kept(struct request *req);

static void route_give_up(struct request *req, struct request_send *s)
{
    route_held(req, s);
    if (req->blocking) route_unblock_client(req);
    char msg[ERROR_REPLY_MAX];
    const char *reply = s->error;
    size_t len = s->error_len;
    if (!reply) {
        char text[160];
        replies_unavailable(text, sizeof(text), req->worker->cfg->instance_names[s->instance]);
        len = replies_error(msg, sizeof(msg), text);
        reply = msg;
        STAT_INC(&req->worker->stats, errors_unavailable);
    }
    if (req->nsends > 1 || req->nparts > 0)
        route_part(req, (int)(s - req->sends), reply, len);
    else
        request_answer(req, reply, len);
}

/* The send of req that the entry pd belongs to (NULL: none kept). */
static struct request_send *route_send_of(struct request *req, const struct pending *pd)
{
    if (__builtin_expect(req->sends == NULL, 1) || pd->kind == ROUTE_ASKING || pd->kind == ROUTE_SCRIPT_LOAD)
        return NULL;
    int k = req->nsends > 1 ? pd->part : 0;
    return k < req->nsends && req->sends[k].nentries > 0 ? &req->sends[k] : NULL;
}

/*
 * How many times a send waits for its instance's owner before it gives up: on a cluster
 * ROUTE_MAX_RETRIES (about 6.3 s); on a sentinel instance as many as fit in failover-hold.
 */
int router_max_waits(const struct worker *w, int instance)
{
    if (!nodes_follow_failover(w, instance)) return ROUTE_MAX_RETRIES;
    int64_t hold = w->cfg->failover_hold_ms, waited = 0;
    int n = 0;
    while (waited < hold && n < 1000) waited += router_wait_ms(n++);
    return n;
}

int64_t router_hold_ms(const struct worker *w, int instance)
{
    if (nodes_follow_failover(w, instance)) return w->cfg->failover_hold_ms;
    int64_t hold = 0;
    for (int n = 0; n < ROUTE_MAX_RETRIES; n++) hold += router_wait_ms(n);
    return hold;
}

/*
 * The kind of a reply to entry `index` of s, an EVALSHA's send: in keygate's MULTI wrap (its TTL
 * fixes, its near-cache XADDs) the EVALSHA's own reply is element 0 of EXEC's array, and a
 * -NOSCRIPT there is one too (*own is then that element: the client's answer should the send give
 * up). The fixes ran; they run again with the whole transaction, which changes nothing: a PEXPIRE
 * again, one more invalidation.
 */
static enum resend_kind route_classify_evalsha(const struct request *req, const struct request_send *s, int index,
                                               const char *reply, size_t len, enum resend_kind kind, const char **own,
                                               size_t *own_len)
{
    if (kind != RESEND_OTHER || !reply || s->entries[index].kind != ROUTE_EXEC_PICK || req->queued_error) return kind;
    const char *pick;
    size_t pick_len;
    replies_exec_pick(reply, len, NULL, 0, &pick, &pick_len);
    if (pick == reply || resend_classify(pick, pick_len, 1) != RESEND_NOSCRIPT) return kind;
    *own = pick; /* the client's answer should the send give up */
    *own_len = pick_len;
    return RESEND_NOSCRIPT;
}

/*
 * s's EVALSHA answered -NOSCRIPT on b: its next attempt loads the script first, on the node it goes
 * to: the slot's owner, or when b is the target of the ASK that s followed (the slot is being
 * migrated, the key is there already), that target again, after ASKING.
 */
static void route_load_next(struct backend *b, struct request_send *s)
{
    s->script = ROUTE_SHA_LOAD;
    if (!s->ask_host[0]) return; /* never asked */
    const char *host;
    int port;
    backend_address(b, &host, &port);
    if (port == s->ask_port && strcmp(host, s->ask_host) == 0) s->ask = 1;
}

/*
 * A reply (reply NULL: a failure) for an entry of a kept send. Returns 1 when the router
 * took it here (the send goes again), 0 when it is read as usual. A -MOVED updates the
 * map, a -ASK aims the next attempt once, -TRYAGAIN and -CLUSTERDOWN wait, and so does a
 * failure of an entry that was never written (unsent: its connection was lost before, so Redis
 * never saw it; one that was written may have run, and fails as usual); from that reply on, the
 * rest of the attempt is swallowed, and once it is all in the send goes again from that entry
 * (a MULTI ... EXEC from its start).
 */
static int route_intercept(struct backend *b, struct request_send *s, const char *reply, size_t len, int unsent)
{
    assert(s->left > 0);
    /* the common case, a reply that is no error to a send with no EVALSHA, going as usual: what
     * resend_classify and resend_decide answer for it (RESEND_OTHER: RESEND_PASS), without them */
    if (__builtin_expect(!s->redo && reply && len > 0 && reply[0] != '-' && s->script == ROUTE_SHA_NONE, 1)) {
        s->left--;
        return 0;
    }
    struct request *req = s->req;
    int index = s->nentries - s->left;
    s->left--;
    if (!s->redo) {
        enum resend_kind kind = resend_classify(reply, len, !unsent);
        const char *own = reply; /* the reply the client gets should the send give up */
        size_t own_len = len;
        if (__builtin_expect(s->script != ROUTE_SHA_NONE, 0))
            kind = route_classify_evalsha(req, s, index, reply, len, kind, &own, &own_len);
        enum resend_action act = resend_decide(kind, nodes_follow_failover(req->worker, s->instance), req->blocking);
        struct slotmap_redirect rd;
        if (act == RESEND_GO && !slotmap_parse_redirect(reply, len, &rd)) act = RESEND_PASS; /* unreadable: as usual */
        if (act == RESEND_LOAD) /* a -NOSCRIPT: the EVALSHA's own reply, a script keygate saw, not loaded yet */
            act = resend_decide_load(s->script != ROUTE_SHA_NONE && (s->entries[index].kind == ROUTE_PASS ||
                                                                     s->entries[index].kind == ROUTE_EXEC_PICK),
                                     s->script != ROUTE_SHA_NONE && scripts_known(&req->worker->proxy->scripts, s->sha),
                                     s->script >= ROUTE_SHA_LOAD);
        if (act == RESEND_GO || act == RESEND_WAIT || act == RESEND_LOAD) {
            s->redo = 1;
            s->from = s->atomic ? 0 : index;
        }
        if (act == RESEND_LOAD) route_load_next(b, s);
        if (reply && (act == RESEND_GO || act == RESEND_WAIT || act == RESEND_LOAD)) {
            free(s->error);
            s->error = xmemdup(own, own_len);
            s->error_len = own_len;
        }
        if (act == RESEND_WAIT && (kind == RESEND_READONLY || kind == RESEND_LOADING || kind == RESEND_UNBLOCKED))
            nodes_refresh(req->worker, s->instance); /* a demoted node: the watcher checks the primary now */
        if (act == RESEND_GO) {
            const char *host;
            int port;
            backend_address(b, &host, &port);
            if (rd.host[0]) host = rd.host; /* "" : the node it asked */
            s->hops++;
            STAT_INC(&req->worker->stats, cluster_redirects);
            if (rd.kind == SLOTMAP_MOVED) {
                nodes_moved(req->worker, s->instance, rd.slot, host, rd.port);
            } else {
                s->ask = 1;
                snprintf(s->ask_host, sizeof(s->ask_host), "%s", host);
                s->ask_port = rd.port;
            }
        } else if (act == RESEND_WAIT) {
            s->wait = 1;
            route_wait_counted(req, s);
        }
    }
    if (!s->redo) return 0;
    if (s->left > 0)
        request_reply_consumed(req);
    else
        route_again(req, s);
    return 1;
}

/* Is a request for `instance` on b kept (sent again after a redirect)? On a cluster's shared
 * connections, and when no connection is known yet (b NULL: it waits for the slot's owner). */
static inline int route_keeps(const struct client *c, const struct backend *b, int instance)
{
    return nodes_may_move(c->worker, instance) && !(b && b->pinned);
}

/* The buffer a request for (instance, slot) is written to: b's staging buffer, or when keep
 * (a shared cluster connection, route_keeps; b may then be NULL: no owner known yet) the kept
 * send of part `part`, which route_out_done stages. route_out: keep as route_keeps says. */
static struct bytebuf *route_out_kept(struct client *c, struct backend *b, struct request *req, int keep, int instance,
                                      int slot, int part)
{
    if (__builtin_expect(!keep, 1)) {
        assert(b != NULL); /* callers send nowhere else without a connection */
        return backend_stage(b);
    }
    if (!req->sends) {
        req->nsends = req->nparts > 0 ? req->nparts : 1;
        req->sends = req->nsends == 1 ? &req->send1 : xcalloc((size_t)req->nsends, sizeof(*req->sends));
    }
    assert(part < req->nsends);
    struct request_send *s = &req->sends[part];
    assert(s->nentries == 0);
    s->req = req;
    s->instance = instance;
    s->slot = slot < 0 ? -1 : slot;
    req->recording = s;
    return &s->bytes;
}

static struct bytebuf *route_out(struct client *c, struct backend *b, struct request *req, int instance, int slot,
                                 int part)
{
    return route_out_kept(c, b, req, route_keeps(c, b, instance), instance, slot, part);
}

/* The request written since route_out goes: staged on b, or (b NULL) after a wait. */
static void route_out_done(struct request *req, struct backend *b)
{
    struct request_send *s = req->recording;
    if (__builtin_expect(!s, 1)) return;
    req->recording = NULL;
    static const char multi[] = "*1\r\n$5\r\nMULTI\r\n";
    s->atomic =
        s->nentries > 1 && s->bytes.len >= sizeof(multi) - 1 && memcmp(s->bytes.p, multi, sizeof(multi) - 1) == 0;
    if (b && b->state != BACKEND_DOWN && TAILQ_EMPTY(&req->client->resends)) {
        route_stage(req, s, b);
        return;
    }
    request_expect(req); /* stands for the send until it goes (route_again) */
    s->wait = 0;
    route_again(req, s);
}

void router_unavailable(struct client *c, struct request *req, int instance)
{
    char text[128];
    replies_unavailable(text, sizeof(text), c->worker->cfg->instance_names[instance]);
    request_error(req, text);
}

/* router_unavailable for a request whose instance is down: the text says why when the reason is
 * one to act on (backend_down_why: a host name that does not resolve). */
static void route_down(struct client *c, struct request *req, int instance)
{
    char text[256];
    replies_unavailable_why(text, sizeof(text), c->worker->cfg->instance_names[instance],
                            nodes_down_why(c->worker, instance));
    request_error(req, text);
}

struct backend *router_conn_for(struct client *c, int instance, int slot)
{
    if (c->watch_pin && c->session.watch_instance == instance && (slot < 0 || slot == c->session.watch_slot))
        return c->watch_pin;
    return nodes_conn(c->worker, instance, &(struct node_want){.slot = slot, .resp3 = c->resp3, .client_id = c->id});
}

void router_stop(struct worker *w)
{
    replcommit_stop(w, route_part_kept);
}

/* The reply of a request sent on the client's blocking pin: the pin is back in the pool. */
static inline void route_unblock(struct request *req)
{
    if (__builtin_expect(req->blocking, 0)) route_unblock_client(req);
}

static __attribute__((noinline)) void route_unblock_client(struct request *req)
{
    if (req->client) pins_unblock(req->client);
}

/*
 * A command of c going to an instance whose nodes move (a cluster, a Sentinel primary; scripts.h):
 * an EVAL's or EVAL_RO's body is remembered, and SCRIPT LOAD's (a cluster's SCRIPT LOAD reaches
 * every primary through fanout_split instead); a lone EVALSHA's send s (alone, or in
 * keygate's own MULTI wrap; NULL: none, or the command is in the client's MULTI) notes the
 * script's name, which its node's -NOSCRIPT may load (route_intercept): a promoted replica lacks
 * what was loaded on its old primary (Redis 7.0 does not replicate SCRIPT LOAD).
 */
static void route_note_script(const struct client *c, const char *frame, struct request_send *s)
{
    const struct resp_parser *p = &c->parser;
    if (p->argc < 2) return;
    unsigned char first = (unsigned char)(resp_arg_ptr(p, frame, 0)[0] | 0x20); /* EVAL*, SCRIPT, or none */
    if (__builtin_expect(first != 'e' && first != 's', 1)) return;
    enum scripts_command sc = scripts_command_of(resp_arg_ptr(p, frame, 0), p->args[0].len);
    if (__builtin_expect(sc == SCRIPTS_OTHER, 1)) return;
    const char *arg = resp_arg_ptr(p, frame, 1);
    if (sc == SCRIPTS_EVAL)
        (void)scripts_remember(&c->worker->proxy->scripts, arg, p->args[1].len); /* one too large: not kept */
    else if (sc == SCRIPTS_SCRIPT && p->argc == 3 && p->args[1].len == 4 && strncasecmp(arg, "load", 4) == 0)
        (void)scripts_remember(&c->worker->proxy->scripts, resp_arg_ptr(p, frame, 2), p->args[2].len);
    else if (sc == SCRIPTS_EVALSHA && s && scripts_sha_parse(arg, p->args[1].len, s->sha) == 0)
        s->script = ROUTE_SHA_EVALSHA;
}

/*
 * Everything for one request goes into the connection's output in one go, so no
 * other client's command can fall between keygate's MULTI and EXEC:
 *
 *   [MULTI]  client command  [PEXPIRE k D NX ...]  [XADD s * k key ...]  [EXEC]
 *   DROP     PASS | QUEUED   DROP ...              DROP ...              EXEC_PICK
 */
void router_forward(struct client *c, struct backend *b, struct request *req, const struct plan *plan,
                    const char *frame)
{
    struct worker *w = c->worker;
    int keep = route_keeps(c, b, plan->instance);
    if (!keep && (!b || b->state == BACKEND_DOWN)) {
        route_unblock(req);
        route_down(c, req, plan->instance);
        return;
    }
    /* on a cluster, a command under WATCH starts on the WATCH's node and follows a redirect like
     * any other (the transaction then gets EXEC's null reply: route_exec_reply); WATCH itself
     * stays on its connection (route_watch_reply) */
    if (__builtin_expect(b && b == c->watch_pin && plan->flow == FLOW_SHARED, 0))
        keep = nodes_may_move(w, plan->instance);
    /* a blocking command on a cluster is kept too: redirected, it goes again on a new pin (route_repin) */
    if (__builtin_expect(plan->flow == FLOW_BLOCK && b && b == c->block_pin, 0))
        keep = nodes_may_move(w, plan->instance);
    req->watching = plan->flow == FLOW_WATCH;
    req->replicas = (uint8_t)plan->replicas;
    req->xadds = plan->ttl.wrap ? (uint16_t)plan->inval.n : 0;
    struct bytebuf *out = route_out_kept(c, b, req, keep, plan->instance, plan->slot, 0);
    if (plan->wait_sync) { /* the PUBLISH before a WAIT of the client's (replcommit.h) */
        bytebuf_add(out, STR_AND_LEN(REPLCOMMIT_SYNC));
        route_expect(b, req, ROUTE_DROP, 0);
    }
    int wrap = plan->ttl.wrap;
    if (wrap) {
        bytebuf_add(out, STR_AND_LEN("*1\r\n$5\r\nMULTI\r\n"));
        route_expect(b, req, ROUTE_DROP, 0);
    }
    frames_command(out, &c->parser, c->resp3, plan, frame);
    route_expect(b, req, wrap ? ROUTE_QUEUED : ROUTE_PASS, 0);
    if (keep) route_note_script(c, frame, req->recording);
    for (size_t i = 0; i < plan->ttl.nfix; i++) {
        frames_fix(out, &c->parser, frame, &plan->ttl.fix[i]);
        route_expect(b, req, ROUTE_DROP, 0);
    }
    for (uint32_t i = 0; i < plan->inval.n; i++) {
        frames_inval(out, &c->parser, frame, &plan->inval.key[i]);
        route_expect(b, req, ROUTE_DROP, 0);
    }
    if (wrap) {
        bytebuf_add(out, STR_AND_LEN("*1\r\n$4\r\nEXEC\r\n"));
        route_expect(b, req, ROUTE_EXEC_PICK, 0);
    }
    route_out_done(req, b);
    STAT_INC(&w->stats, commands_forwarded);
    if (plan->nappend || plan->ttl.nfix) stats_ttl_injected(&w->stats, &req->mark);
    policy_budget_forwarded(plan);
}

void router_forward_bytes(struct client *c, struct backend *b, int instance, struct request *req, const char *bytes,
                          size_t len)
{
    if (!route_keeps(c, b, instance) && (!b || b->state == BACKEND_DOWN)) {
        route_down(c, req, instance);
        return;
    }
    bytebuf_add(route_out(c, b, req, instance, -1, 0), bytes, len);
    route_expect(b, req, ROUTE_PASS, 0);
    route_out_done(req, b);
    STAT_INC(&c->worker->stats, commands_forwarded);
}

void router_forward_fill(struct client *c, struct backend *b, struct request *req, const struct plan *plan,
                         const char *frame)
{
    if (!b || b->state == BACKEND_DOWN) {
        route_down(c, req, plan->instance);
        return;
    }
    char mode = nearcache_fill_mode(req);
    /* a command naming more members or fields than Lua's unpack takes reads the whole value */
    if (mode == 'm' && c->parser.argc > 2 + NCPOLICY_FILL_MAX_NAMED) mode = 'a';
    frames_fill(backend_stage(b), nearcache_fill_limit(req), mode, &c->parser, frame,
                resp_arg_ptr(&c->parser, frame, 1), c->parser.args[1].len, 2, mode == 'm' ? c->parser.argc : 0);
    route_expect(b, req, ROUTE_FILL, 0);
    STAT_INC(&c->worker->stats, commands_forwarded);
}

void router_forward_prefetch(struct client *c, struct backend *b, struct request *req)
{
    size_t n = nearcache_prefetch_count(req);
    if (!b || b->state == BACKEND_DOWN || n == 0) return; /* the MGET itself answered -UNAVAILABLE */
    struct bytebuf *out = backend_stage(b);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *key = nearcache_prefetch_key(req, i, &len);
        frames_fill(out, nearcache_fill_limit(req), 'n', &c->parser, NULL, key, len, 0, 0);
        route_expect(b, req, ROUTE_PREFETCH, (int)i);
    }
}

void router_write_queued(struct bytebuf *out, const struct client *c, const struct plan *plan, const char *frame,
                         struct bytebuf *keep)
{
    static const uint8_t client_reply = REPLIES_KEEP_CLIENT, injected = REPLIES_KEEP_INJECTED, xadd = REPLIES_KEEP_XADD;
    frames_queued(out, &c->parser, c->resp3, plan, frame); /* the command, its fixes, its XADDs after its write */
    policy_budget_forwarded(plan); /* at queue time: a DISCARDed write stays counted (the estimate errs high) */
    bytebuf_add(keep, &client_reply, 1);
    if (plan->instance >= 0 && nodes_may_move(c->worker, plan->instance)) /* an EVAL's body is remembered */
        route_note_script(c, frame, NULL);
    for (size_t i = 0; i < plan->ttl.nfix; i++) bytebuf_add(keep, &injected, 1);
    for (uint32_t i = 0; i < plan->inval.n; i++) bytebuf_add(keep, &xadd, 1);
}

void router_exec(struct client *c, struct backend *b, struct request *req, int instance, int slot)
{
    struct bytebuf *out = route_out(c, b, req, instance, slot, 0);
    bytebuf_add(out, STR_AND_LEN("*1\r\n$5\r\nMULTI\r\n"));
    route_expect(b, req, ROUTE_DROP, 0);
    bytebuf_add(out, c->multi_buf.p, c->multi_buf.len);
    for (size_t i = 0; i < c->multi_keep.len; i++) route_expect(b, req, ROUTE_QUEUED, 0); /* each +QUEUED */
    bytebuf_add(out, STR_AND_LEN("*1\r\n$4\r\nEXEC\r\n"));
    route_expect(b, req, ROUTE_EXEC_FILTER, 0);
    route_out_done(req, b);
    req->exec_keep = c->multi_keep; /* the request owns the flags now */
    memset(&c->multi_keep, 0, sizeof(c->multi_keep));
    STAT_INC(&c->worker->stats, commands_forwarded);
}

void router_unwatch(struct client *c, struct request *req)
{
    assert(c->watch_pin);
    bytebuf_add(backend_stage(c->watch_pin), STR_AND_LEN("*1\r\n$7\r\nUNWATCH\r\n"));
    route_expect(c->watch_pin, req, ROUTE_DROP, 0);
}

void router_subscribe(struct client *c, struct backend *b, int inst, const char *frame, size_t len)
{
    assert(c->pubsub.pin[inst] == b && b->subscriber);
    struct bytebuf *out = backend_stage(b);
    bytebuf_add(out, frame, len);
    /* its answer marks the end of this command's confirmations (route_push) */
    bytebuf_add(out, STR_AND_LEN(PUBSUB_MARKER_CMD));
    pubsub_marker_sent(&c->pubsub, inst);
    STAT_INC(&c->worker->stats, commands_forwarded);
}

/* INFO's parts came: keygate's sections (the last part) and each instance's, labelled. */
static void route_merge_info(struct request *req)
{
    const struct config *cfg = req->worker->cfg;
    int n = req->nparts - 1;
    assert(n > 0 && n < REPLIES_MAX_PARTS && req->parts[n].instance == -1);
    struct info_part *parts = xmalloc((size_t)n * sizeof(*parts));
    char(*names)[SLOTMAP_HOST_MAX + 64] = xmalloc((size_t)n * sizeof(*names));
    for (int k = 0; k < n; k++) {
        const struct request_part *rp = &req->parts[k];
        const char *name = cfg->instance_names[rp->instance];
        if (rp->node >= 0 && nodes_sharded(req->worker, rp->instance)) { /* "cache node 10.0.0.1:7001" */
            const char *host;
            int port;
            nodes_address(req->worker, rp->instance, rp->node, &host, &port);
            snprintf(names[k], sizeof(names[k]), "%s node %s:%d", name, host, port);
            name = names[k];
        }
        parts[k] = (struct info_part){name, rp->reply, rp->len};
    }
    struct bytebuf out = {0};
    if (fanmerge_info(req->parts[n].reply, req->parts[n].len, parts, n, req->client && req->client->resp3, &out) == 0)
        request_complete(req, out.p, out.len);
    else
        request_error(req, "ERR keygate could not merge the instances' INFO replies");
    bytebuf_free(&out);
    free(parts);
    free(names);
}

/* A cluster SCAN's node answered: its reply with the client's next cursor (fanout.c). */
static void route_merge_scan(struct request *req)
{
    const struct request_part *part = &req->parts[0];
    struct bytebuf out = {0};
    enum fanmerge_scan r = fanmerge_scan(part->reply, part->len, req->scan_rank, req->scan_nodes, &out);
    if (r == FANMERGE_SCAN_DONE)
        request_complete(req, out.p, out.len);
    else if (r == FANMERGE_SCAN_AS_IS) /* an error: as it came */
        request_complete(req, part->reply, part->len);
    else
        request_error(req, "ERR keygate cannot carry this node's SCAN cursor");
    bytebuf_free(&out);
}

/* All parts of a split request came: merge them into its reply. */
static void route_merge(struct request *req)
{
    if (req->merge == MERGE_INFO) {
        route_merge_info(req);
        return;
    }
    if (req->merge == MERGE_SCAN) {
        route_merge_scan(req);
        return;
    }
    assert(req->parts_left == 0 && req->nparts > 0 && req->nparts <= REPLIES_MAX_PARTS);
    struct replies_part *parts = xmalloc((size_t)req->nparts * sizeof(*parts));
    for (int k = 0; k < req->nparts; k++) /* key_part names parts by index */
        parts[k] = (struct replies_part){k, req->parts[k].reply, req->parts[k].len};
    struct bytebuf out = {0};
    int merged = replies_merge((enum replies_merge_kind)req->merge, parts, req->nparts, req->key_part, req->argc, &out);
    free(parts);
    if (merged == 0)
        request_complete(req, out.p, out.len);
    else
        request_error(req, "ERR keygate could not merge the replies of the parts of the command");
    bytebuf_free(&out);
}

/* One instance's reply (or failure) for part `part` of a split request; the last merges. */
static void route_part(struct request *req, int part, const char *reply, size_t len)
{
    assert(part < req->nparts && req->parts_left > 0 && req->waiting > 0);
    request_part_keep(req, part, reply, len); /* counted against the client's limits as it comes */
    route_part_kept(req);
}

/* One more part of req is kept: the merge answers once it was the last part due. */
static void route_part_kept(struct request *req)
{
    assert(req->parts_left > 0 && req->waiting > 0);
    if (--req->parts_left > 0) {
        request_reply_consumed(req); /* other parts are still owed: req lives on */
        return;
    }
    req->waiting--;
    route_merge(req);
}

void router_part_unavailable(struct worker *w, struct request *req, int k)
{
    char text[128], msg[ERROR_REPLY_MAX];
    replies_unavailable(text, sizeof(text), w->cfg->instance_names[req->parts[k].instance]);
    size_t n = replies_error(msg, sizeof(msg), text);
    request_part_keep(req, k, msg, n);
    STAT_INC(&w->stats, errors_unavailable);
    assert(req->parts_left > 0);
    if (--req->parts_left == 0) route_merge(req);
}

/* ---- what fanout.c writes its parts with (router.h): the router's own functions, unchanged ---- */

struct bytebuf *router_out(struct client *c, struct backend *b, struct request *req, int instance, int slot, int part)
{
    return route_out(c, b, req, instance, slot, part);
}

int router_keeps(const struct client *c, const struct backend *b, int instance)
{
    return route_keeps(c, b, instance);
}

void router_expect(struct backend *b, struct request *req, enum route_kind kind, int part)
{
    route_expect(b, req, kind, part);
}

void router_out_done(struct request *req, struct backend *b)
{
    route_out_done(req, b);
}

/* ---- the hooks: what the backends report ---- */

/* The reply (or failure) that answers a request: a write's near-cache keys are evicted again. */
static void route_writes_answered(struct request *req, enum route_kind kind)
{
    if (req->nc && kind != ROUTE_DROP && kind != ROUTE_QUEUED && kind != ROUTE_FILL && kind != ROUTE_PREFETCH &&
        kind != ROUTE_SCRIPT_LOAD)
        nearcache_write_replied(req);
    if (req->track.len && kind != ROUTE_DROP && kind != ROUTE_QUEUED && kind != ROUTE_FILL && kind != ROUTE_PREFETCH &&
        kind != ROUTE_SCRIPT_LOAD) /* keygate's SCRIPT LOAD before an EVALSHA sent again: the write has not run */
        tracker_write_replied(req);
}

/* A redirect answered on b (a dedicated connection, which does not follow it): a -MOVED updates the map. */
static void route_learn_move(struct backend *b, const struct slotmap_redirect *rd)
{
    if (rd->kind != SLOTMAP_MOVED) return;
    const char *host;
    int port;
    backend_address(b, &host, &port);
    nodes_moved(b->worker, b->instance, rd->slot, rd->host[0] ? rd->host : host, rd->port);
}

/*
 * WATCH on a cluster runs on a dedicated connection to its slot's node. Answered -MOVED or -ASK
 * (or -TRYAGAIN, -CLUSTERDOWN: it did not run), nothing is watched there: the map learns the
 * move, the client gets +OK as from any WATCH, and its EXEC, sent to that node, is refused
 * there and answers the null reply (route_exec_moved): the client retries, as after any broken
 * WATCH, and its next WATCH goes to the new owner. 1 when answered here.
 */
static int route_watch_moved(struct backend *b, struct request *req, const char *reply, size_t len)
{
    struct slotmap_redirect rd;
    enum resend_kind kind = resend_classify(reply, len, 1);
    int moved = (kind == RESEND_MOVED || kind == RESEND_ASK) && slotmap_parse_redirect(reply, len, &rd);
    if (!moved && (kind == RESEND_MOVED || kind == RESEND_ASK || !resend_is_cluster_refusal(kind))) return 0;
    if (!nodes_may_move(b->worker, b->instance)) return 0;
    if (moved) route_learn_move(b, &rd);
    request_answer(req, STR_AND_LEN("+OK\r\n"));
    return 1;
}

/*
 * The client's EXEC on a cluster's WATCH connection, refused (-EXECABORT) because a command in
 * it was redirected or told to retry (its slot moved away from the WATCH's node, or is moving):
 * nothing ran, and the WATCH cannot hold on another node, so the client gets the null reply of
 * a broken WATCH and retries. 1 when answered here.
 */
static int route_exec_moved(struct backend *b, struct request *req, const char *reply)
{
    if (reply[0] != '-' || !req->queued_error || !b->pinned || !nodes_may_move(b->worker, b->instance)) return 0;
    enum resend_kind kind = resend_classify(req->queued_error, req->queued_error_len, 1);
    struct slotmap_redirect rd;
    int redirected = (kind == RESEND_MOVED || kind == RESEND_ASK) &&
                     slotmap_parse_redirect(req->queued_error, req->queued_error_len, &rd);
    if (!redirected &&
        (kind == RESEND_MOVED || kind == RESEND_ASK ||
         (!resend_is_cluster_refusal(kind) &&
          resend_decide(kind, nodes_follow_failover(b->worker, b->instance), req->blocking) != RESEND_WAIT)))
        return 0; /* (a NOSCRIPT, RESEND_LOAD, is no refusal of the transaction either) */
    if (redirected) route_learn_move(b, &rd);
    struct client *c = req->client;
    if (c && c->resp3)
        request_answer(req, STR_AND_LEN("_\r\n"));
    else
        request_answer(req, STR_AND_LEN("*-1\r\n"));
    return 1;
}

/*
 * A near-cache write whose XADD failed in its EXEC (the stream key holds another type): the write
 * ran, but no keygate learns of it, so the client is told so instead of +OK (its readers treat
 * the broken stream as a gap and serve nothing from the instance until it is repaired). 1 when
 * answered here.
 */
static int route_xadd_failed(struct backend *b, struct request *req, const char *reply, size_t len, const uint8_t *keep,
                             size_t nkeep)
{
    const char *err;
    size_t err_len;
    if (!replies_exec_xadd_failed(reply, len, keep, nkeep, req->xadds, &err, &err_len)) return 0;
    char text[320];
    snprintf(text, sizeof(text),
             "INVALIDATION the write ran on '%s', but its near-cache invalidation failed (%.*s): the near "
             "cache of that instance is off until its stream key is repaired",
             b->worker->cfg->instance_names[b->instance], (int)(err_len > 120 ? 120 : err_len), err);
    STAT_INC(&b->worker->stats, near_cache_xadd_failures);
    request_answer_error(req, text);
    return 1;
}

/* Part `part` of req answered from b: held while a replicas=N part waits for its WAIT, else kept. */
static void route_part_reply(struct backend *b, struct request *req, int part, const char *reply, size_t len)
{
    int replicas = req->parts[part].replicas;
    if (__builtin_expect(replicas, 0) && replcommit_hold(b, req, part, replicas, reply, len, route_part_kept)) return;
    route_part(req, part, reply, len);
}

static void route_deliver(struct backend *b, const struct pending *pd, const char *reply, size_t len)
{
    struct request *req = pd->req;
    if (__builtin_expect(!req, 0)) { /* the router's own: replicas=N's WAIT */
        replcommit_reply(b, pd, reply, len, route_part_kept);
        return;
    }
    struct request_send *s = route_send_of(req, pd);
    if (__builtin_expect(s != NULL, 0) && route_intercept(b, s, reply, len, 0)) return;
    route_writes_answered(req, (enum route_kind)pd->kind);
    switch ((enum route_kind)pd->kind) {
    case ROUTE_ASKING:
    case ROUTE_SCRIPT_LOAD: /* (an error: the EVALSHA that follows answers for it) */
        request_reply_consumed(req);
        return;
    case ROUTE_FILL:
        nearcache_fill_reply(req, reply, len, NULL);
        return;
    case ROUTE_PREFETCH:
        nearcache_prefetch_reply(req, pd->part, reply, len);
        request_reply_consumed(req);
        return;
    case ROUTE_DROP:
        request_reply_consumed(req);
        return;
    case ROUTE_QUEUED:
        if (reply[0] == '-' && !req->queued_error) {
            req->queued_error = xmemdup(reply, len);
            req->queued_error_len = len;
        }
        request_reply_consumed(req);
        return;
    case ROUTE_EXEC_PICK: {
        const char *pick;
        size_t pick_len;
        if (__builtin_expect(req->xadds > 0, 0) && route_xadd_failed(b, req, reply, len, NULL, 0)) return;
        replies_exec_pick(reply, len, req->queued_error, req->queued_error_len, &pick, &pick_len);
        if (__builtin_expect(req->replicas, 0) &&
            replcommit_hold(b, req, -1, req->replicas, pick, pick_len, route_part_kept))
            return;
        request_answer(req, pick, pick_len);
        return;
    }
    case ROUTE_EXEC_FILTER: {
        if (route_exec_moved(b, req, reply)) return;
        if (route_xadd_failed(b, req, reply, len, (const uint8_t *)req->exec_keep.p, req->exec_keep.len)) return;
        struct bytebuf out = {0};
        int filtered =
            replies_exec_filter(reply, len, (const uint8_t *)req->exec_keep.p, req->exec_keep.len, &out) == 0;
        if (!filtered) /* nil (WATCH) or EXECABORT: as it came, nothing ran */
            request_answer(req, reply, len);
        else if (!(req->replicas && out.len > 0 &&
                   replcommit_hold(b, req, -1, req->replicas, out.p, out.len, route_part_kept)))
            request_answer(req, out.p, out.len);
        bytebuf_free(&out);
        return;
    }
    case ROUTE_PART:
        route_part_reply(b, req, pd->part, reply, len);
        return;
    case ROUTE_PART_PICK: {
        const char *pick;
        size_t pick_len;
        replies_exec_pick(reply, len, req->queued_error, req->queued_error_len, &pick, &pick_len);
        route_part_reply(b, req, pd->part, pick, pick_len);
        return;
    }
    case ROUTE_PASS:
        route_unblock(req);
        if (__builtin_expect(req->watching, 0) && route_watch_moved(b, req, reply, len)) return;
        if (__builtin_expect(req->replicas, 0) &&
            replcommit_hold(b, req, -1, req->replicas, reply, len, route_part_kept))
            return;
        request_answer(req, reply, len);
        return;
    case ROUTE_REPL_SYNC:
    case ROUTE_REPL_WAIT:
        break; /* never with a request */
    }
    assert(!"unknown route kind");
}

static void route_fail(struct backend *b, const struct pending *pd)
{
    struct request *req = pd->req;
    if (__builtin_expect(!req, 0)) { /* the router's own: replicas=N's WAIT, lost */
        replcommit_reply(b, pd, NULL, 0, route_part_kept);
        return;
    }
    struct request_send *s = route_send_of(req, pd);
    if (__builtin_expect(s != NULL, 0) && route_intercept(b, s, NULL, 0, pd->unsent)) return;
    /* a request written to a sentinel instance's primary, its connection lost (a switch, a death) */
    if (pd->kind != ROUTE_DROP && pd->kind != ROUTE_QUEUED && pd->kind != ROUTE_ASKING &&
        pd->kind != ROUTE_SCRIPT_LOAD && nodes_follow_failover(b->worker, b->instance))
        STAT_INC(&b->worker->stats, switch_failures);
    char text[256];
    if (b->timed_out)
        replies_timed_out(text, sizeof(text), b->worker->cfg->instance_names[b->instance]);
    else
        replies_unavailable_why(text, sizeof(text), b->worker->cfg->instance_names[b->instance],
                                nodes_down_why(b->worker, b->instance));
    route_writes_answered(req, (enum route_kind)pd->kind);
    switch ((enum route_kind)pd->kind) {
    case ROUTE_FILL:
        nearcache_fill_reply(req, NULL, 0, text);
        return;
    case ROUTE_PREFETCH:
        request_reply_consumed(req);
        return;
    case ROUTE_PASS:
    case ROUTE_EXEC_PICK:
    case ROUTE_EXEC_FILTER:
        route_unblock(req);
        request_answer_error(req, text);
        return;
    case ROUTE_PART:
    case ROUTE_PART_PICK: {
        char msg[ERROR_REPLY_MAX];
        size_t n = replies_error(msg, sizeof(msg), text);
        STAT_INC(&b->worker->stats, errors_unavailable);
        route_part(req, pd->part, msg, n);
        return;
    }
    case ROUTE_DROP:
    case ROUTE_QUEUED:
    case ROUTE_ASKING:
    case ROUTE_SCRIPT_LOAD:
        request_reply_consumed(req);
        return;
    case ROUTE_REPL_SYNC:
    case ROUTE_REPL_WAIT:
        break; /* never with a request */
    }
    assert(!"unknown route kind");
}

static void route_push(struct backend *b, const char *frame, size_t len)
{
    struct client *c = b->owner;
    if (!c) return; /* released: nobody takes its frames */
    assert(c->pubsub.pin[b->instance] == b);
    switch (pubsub_on_frame(&c->pubsub, b->instance, frame, len)) {
    case PUBSUB_FRAME_CLIENT:
        conn_out(c, frame, len);
        return;
    case PUBSUB_FRAME_MARKER:
        return;
    case PUBSUB_FRAME_SETTLED:
        /* this command's confirmations are all in: the client's next commands may go */
        if (!c->resp3) session_set_subscribed(&c->session, pubsub_subscribed(&c->pubsub));
        conn_wake(c);
        return;
    }
}

static int route_may_keep(struct backend *b, const struct pending *pd, size_t partial)
{
    if (!pd) return !(b->owner && conn_output_over(b->owner, partial)); /* a subscriber connection */
    if (!pd->req) return 1;                                             /* the router's own (a WAIT) */
    struct client *c = pd->req->client;
    return pd->kind != ROUTE_DROP && c && !c->closed && !conn_output_over(c, partial);
}

static const struct backend_hooks hooks = {
    .deliver = route_deliver,
    .fail = route_fail,
    .push = route_push,
    .may_keep = route_may_keep,
    .owner_lost = pins_owner_lost,
    .lost = nodes_lost, /* the node model reads where the slots are again */
    .slots = nodes_slots_reply,
};

const struct backend_hooks *router_hooks(void)
{
    return &hooks;
}
