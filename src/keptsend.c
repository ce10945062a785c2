/* keptsend.c: a cluster or Sentinel request's kept send: staged on its node, read back through the re-send table, sent again or held until its deadline. */
#include "keptsend.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "nodes.h"
#include "parts.h"
#include "pins.h"
#include "replies.h"
#include "resend.h"
#include "scripts.h"
#include "slotmap.h"

/* Cluster re-sends (README, Redis Cluster): at most this many -MOVED / -ASK hops, and waits after
 * -TRYAGAIN / -CLUSTERDOWN / no reachable owner, 25 ms doubling to 500 ms, until the request's
 * deadline: its first wait + the time this many waits take (about 6.3 s: a replica's promotion
 * fits; keptsend_hold_ms), then the last answer passes through. */
#define ROUTE_MAX_HOPS 5
#define ROUTE_MAX_RETRIES 16
#define ROUTE_RETRY_MIN_MS 25
#define ROUTE_RETRY_MAX_MS 500

/*
 * A -NOSCRIPT answered s's EVALSHA and keygate holds the script (scripts.h): SCRIPT LOAD <body>
 * goes on b before the EVALSHA again (and before ASKING, which must come right before the command),
 * its reply swallowed (ROUTE_SCRIPT_LOAD). A script forgotten since the NOSCRIPT (the table's
 * bound) is not loaded: the EVALSHA goes again alone, and its NOSCRIPT passes.
 */
static void kept_stage_load(struct request *req, struct request_send *s, struct backend *b, struct bytebuf *out)
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
void keptsend_stage(struct request *req, struct request_send *s, struct backend *b)
{
    struct bytebuf *out = backend_stage(b);
    if (__builtin_expect(s->script == ROUTE_SHA_LOAD, 0)) kept_stage_load(req, s, b, out);
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
static struct backend *kept_target(struct request *req, struct request_send *s)
{
    struct client *c = req->client;
    struct node_want want = {.slot = s->slot, .resp3 = c->resp3, .client_id = c->id};
    if (s->ask) {
        want.host = s->ask_host;
        want.port = s->ask_port;
    }
    return nodes_conn(req->worker, s->instance, &want);
}

int keptsend_wait_ms(int n)
{
    int ms = ROUTE_RETRY_MIN_MS << (n < 5 ? (n > 0 ? n : 0) : 5);
    return ms > ROUTE_RETRY_MAX_MS ? ROUTE_RETRY_MAX_MS : ms;
}

/*
 * A client's cluster sends that wait to go again (no reachable owner, -TRYAGAIN, -CLUSTERDOWN, a
 * connection lost before they were written) wait on one list, in the order of the client's
 * requests, and go in that order: a later request never overtakes an earlier one that waits,
 * and a new request of the client waits behind them (kept_out_done). Each carries its own
 * deadline (its first wait + keptsend_hold_ms), so they all wait together and fail together. One
 * timer per client: the first send's wait, 25 ms doubling with its retries to 500 ms, or an
 * earlier deadline.
 */
static void kept_resend_cb(evutil_socket_t fd, short what, void *arg);

/* s's deadline starts with its first wait (on the list, or for its owner): past it, it gives up. */
static void kept_deadline_start(struct request_send *s)
{
    if (!s->deadline_ns)
        s->deadline_ns = clock_mono_ns() + (uint64_t)keptsend_hold_ms(s->req->worker, s->instance) * 1000000u;
}

/* The timer fires for the first send's next attempt, or for the earliest deadline on the list
 * when that comes sooner: every waiting send gives up at its own deadline. */
static void kept_resend_arm(struct client *c)
{
    const struct request_send *first = TAILQ_FIRST(&c->resends);
    if (!first || (c->resend_timer && evtimer_pending(c->resend_timer, NULL))) return;
    if (!c->resend_timer) c->resend_timer = xevtimer_new(c->worker->base, kept_resend_cb, c);
    int64_t us = (int64_t)keptsend_wait_ms(first->retries > 1 ? first->retries - 1 : 0) * 1000;
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
static void kept_resend_enqueue(struct client *c, struct request_send *s)
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
    kept_deadline_start(s);
    kept_resend_arm(c);
}

/* The bounds are reached: s's last answer (or -UNAVAILABLE) is the reply of its part or request. */
static void kept_give_up(struct request *req, struct request_send *s);

/* s's wait on the list ends (it goes, or gives up): its hold is counted once. */
static void kept_held(struct request *req, struct request_send *s)
{
    if (!s->held_since_ns) return;
    stats_request_hold(&req->worker->stats, s->instance, clock_mono_ns() - s->held_since_ns);
    s->held_since_ns = 0;
}

/* One attempt of s (not on the list): 1 staged; 0 no connection (a retry counted, s waits);
 * -1 past its bounds (ROUTE_MAX_HOPS, or no connection past its deadline: its part or request
 * answered, s goes nowhere). */
static int kept_try(struct request *req, struct request_send *s);

/* Is s past its bounds: ROUTE_MAX_HOPS redirects, or its deadline (its first wait + the hold)? */
static int kept_expired(const struct request_send *s, uint64_t now)
{
    return s->hops > ROUTE_MAX_HOPS || (s->deadline_ns && now >= s->deadline_ns);
}

/* s waits once more for its owner (a retry, counted): its deadline starts with its first wait. */
static void kept_wait_counted(struct request *req, struct request_send *s)
{
    s->retries++;
    STAT_INC(&req->worker->stats, cluster_retries);
    kept_deadline_start(s);
}

/* Could s's next attempt be staged now if nothing waited ahead of it (its target's connection is up)? */
static int kept_reachable(struct request *req, struct request_send *s)
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
static void kept_resend_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct client *c = arg;
    struct request_send *s;
    while ((s = TAILQ_FIRST(&c->resends))) {
        TAILQ_REMOVE(&c->resends, s, resend_link);
        s->queued = 0;
        s->wait = 0;
        if (kept_try(s->req, s) != 0) continue; /* staged, or answered: the next one may go */
        TAILQ_INSERT_HEAD(&c->resends, s, resend_link);
        s->queued = 1;
        break;
    }
    uint64_t now = clock_mono_ns();
    for (int found = 1; found;) {
        found = 0;
        TAILQ_FOREACH(s, &c->resends, resend_link) {
            assert(s->queued && s->req->client == c);
            if (s == TAILQ_FIRST(&c->resends) || !kept_expired(s, now) || kept_reachable(s->req, s)) continue;
            TAILQ_REMOVE(&c->resends, s, resend_link);
            s->queued = 0;
            kept_give_up(s->req, s);
            found = 1;
            break; /* giving up answers a request: the list is walked again */
        }
    }
    kept_resend_arm(c);
}

void keptsend_client_gone(struct client *c)
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
static struct backend *kept_repin(struct request *req, struct request_send *s)
{
    return pins_block(req->client, s->instance, s->slot, req->block_ms);
}

static int kept_try(struct request *req, struct request_send *s)
{
    if (s->hops > ROUTE_MAX_HOPS) {
        kept_give_up(req, s);
        return -1;
    }
    struct backend *b = req->blocking ? kept_repin(req, s) : kept_target(req, s);
    if (b) {
        kept_held(req, s);
        keptsend_stage(req, s, b);
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
    kept_wait_counted(req, s);
    nodes_refresh(req->worker, s->instance);
    if (!kept_expired(s, clock_mono_ns())) return 0;
    kept_give_up(req, s);
    return -1;
}

/*
 * s's attempt ended without running (every reply of it came; one reply owed to req stands
 * for it until it goes again): stage it again now, or wait on the client's list (kept_resend_*),
 * or give up. A request whose client left is not sent again.
 */
void keptsend_again(struct request *req, struct request_send *s)
{
    if (!req->client) {
        request_reply_consumed(req);
        return;
    }
    struct client *c = req->client;
    if (kept_expired(s, clock_mono_ns())) {
        kept_give_up(req, s);
        return;
    }
    if (req->blocking && s->ask) { /* a blocking command waits for the migration to end, on no ASK target */
        s->ask = 0;
        s->wait = 1;
        s->retries++;
    }
    if (!s->wait && TAILQ_EMPTY(&c->resends) && kept_try(req, s) != 0) return; /* nothing waits ahead of it */
    kept_resend_enqueue(c, s);
}

static void kept_give_up(struct request *req, struct request_send *s)
{
    kept_held(req, s);
    if (req->blocking && req->client) pins_unblock(req->client);
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
        parts_answer(req, (int)(s - req->sends), reply, len);
    else
        request_answer(req, reply, len);
}

/*
 * How many times a send waits for its instance's owner before it gives up: on a cluster
 * ROUTE_MAX_RETRIES (about 6.3 s); on a sentinel instance as many as fit in failover-hold.
 */
int keptsend_max_waits(const struct worker *w, int instance)
{
    if (!nodes_follow_failover(w, instance)) return ROUTE_MAX_RETRIES;
    int64_t hold = w->cfg->failover_hold_ms, waited = 0;
    int n = 0;
    while (waited < hold && n < 1000) waited += keptsend_wait_ms(n++);
    return n;
}

int64_t keptsend_hold_ms(const struct worker *w, int instance)
{
    if (nodes_follow_failover(w, instance)) return w->cfg->failover_hold_ms;
    int64_t hold = 0;
    for (int n = 0; n < ROUTE_MAX_RETRIES; n++) hold += keptsend_wait_ms(n);
    return hold;
}

/*
 * The kind of a reply to entry `index` of s, an EVALSHA's send: in keygate's MULTI wrap (its TTL
 * fixes, its near-cache XADDs) the EVALSHA's own reply is element 0 of EXEC's array, and a
 * -NOSCRIPT there is one too (*own is then that element: the client's answer should the send give
 * up). The fixes ran; they run again with the whole transaction, which changes nothing: a PEXPIRE
 * again, one more invalidation.
 */
static enum resend_kind kept_classify_evalsha(const struct request *req, const struct request_send *s, int index,
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
static void kept_load_next(struct backend *b, struct request_send *s)
{
    s->script = ROUTE_SHA_LOAD;
    if (!s->ask_host[0]) return; /* never asked */
    const char *host;
    int port;
    backend_address(b, &host, &port);
    if (port == s->ask_port && strcmp(host, s->ask_host) == 0) s->ask = 1;
}

/*
 * A reply (reply NULL: a failure) for an entry of a kept send. Returns 1 when it was taken
 * here (the send goes again), 0 when the router reads it as usual. A -MOVED updates the
 * map, a -ASK aims the next attempt once, -TRYAGAIN and -CLUSTERDOWN wait, and so does a
 * failure of an entry that was never written (unsent: its connection was lost before, so Redis
 * never saw it; one that was written may have run, and fails as usual); from that reply on, the
 * rest of the attempt is swallowed, and once it is all in the send goes again from that entry
 * (a MULTI ... EXEC from its start).
 */
int keptsend_intercept(struct backend *b, struct request_send *s, const char *reply, size_t len, int unsent)
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
            kind = kept_classify_evalsha(req, s, index, reply, len, kind, &own, &own_len);
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
        if (act == RESEND_LOAD) kept_load_next(b, s);
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
            kept_wait_counted(req, s);
        }
    }
    if (!s->redo) return 0;
    if (s->left > 0)
        request_reply_consumed(req);
    else
        keptsend_again(req, s);
    return 1;
}
