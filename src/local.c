/* local.c: the commands keygate answers itself: PING, ECHO, AUTH, HELLO, SELECT 0, CLIENT, COMMAND, INFO (its instance sections asked of the instances). */
#include "local.h"

#include "nearcache.h"
#include "pins.h"
#include "access.h"
#include "args.h"
#include "authgate.h"
#include "backend.h"
#include "nodes.h"
#include "report.h"
#include "fanout.h"
#include "router.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <hiredis/hiredis.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#define REDIS_COMPAT_VERSION "7.0.15"

static void add_bulk(struct evbuffer *out, const char *s, size_t len)
{
    evbuffer_add_printf(out, "$%zu\r\n", len);
    evbuffer_add(out, s, len);
    evbuffer_add(out, STR_AND_LEN("\r\n"));
}

static void add_cstr(struct evbuffer *out, const char *s)
{
    add_bulk(out, s, strlen(s));
}

/* A null as c's protocol writes it: RESP3's "_", RESP2's nil bulk (or nil array: nil2). */
static const char *local_null(const struct client *c, const char *nil2)
{
    return c->resp3 ? "_\r\n" : nil2;
}

/* Text for a human (INFO, CLIENT INFO/LIST): a verbatim string "=N txt:..." in RESP3, as
 * Redis's addReplyVerbatim; a bulk in RESP2. */
static void add_verbatim(const struct client *c, struct evbuffer *out, const char *s, size_t len)
{
    if (!c->resp3) {
        add_bulk(out, s, len);
        return;
    }
    evbuffer_add_printf(out, "=%zu\r\ntxt:", len + 4);
    evbuffer_add(out, s, len);
    evbuffer_add(out, STR_AND_LEN("\r\n"));
}

/* Complete req with the bytes of `out` and free it. */
static void reply_buffer(struct request *req, struct evbuffer *out)
{
    size_t len = evbuffer_get_length(out);
    request_complete(req, (const char *)evbuffer_pullup(out, -1), len);
    evbuffer_free(out);
}

static void reply_str(struct request *req, const char *s)
{
    request_complete(req, s, strlen(s));
}

/*
 * Check a password for a user name (NULL: the "default" user, else the first user
 * whose password matches). Digests are compared in constant time.
 */
static const struct user_conf *auth_check(const struct config *cfg, const char *user, size_t ulen, const char *pass,
                                          size_t plen)
{
    unsigned char digest[32];
    unsigned int dlen = 0;
    if (!EVP_Digest(pass, plen, digest, &dlen, EVP_sha256(), NULL)) return NULL;
    const struct user_conf *found = NULL;
    for (size_t i = 0; i < cfg->nusers; i++) {
        const struct user_conf *u = &cfg->users[i];
        int name_ok =
            user ? ulen == strlen(u->name) && memcmp(user, u->name, ulen) == 0 : 1; /* case-sensitive, as ACL */
        int pass_ok = CRYPTO_memcmp(digest, u->password_sha256, sizeof(digest)) == 0;
        if (name_ok && pass_ok && !found) found = u;
    }
    return found;
}

/* AUTH [user] pass -> 0 ok, else writes the error and returns -1. */
static int local_auth(struct client *c, struct request *req, const char *user, size_t ulen, const char *pass,
                      size_t plen)
{
    const struct config *cfg = c->worker->cfg;
    if (cfg->nusers == 0) {
        request_error(req, "ERR AUTH <password> called without any password configured for the default user. Are you "
                           "sure your configuration is correct?");
        return -1;
    }
    const struct user_conf *u = auth_check(cfg, user, ulen, pass, plen);
    if (!u) {
        authgate_failed(c, req, "WRONGPASS invalid username-password pair or user is disabled."); /* answered later */
        return -1;
    }
    authgate_passed(c);
    if (conn_user_login(c, u) != 0) { /* the user's max-clients=: Redis's maxclients text, c unchanged */
        request_error(req, "ERR max number of clients reached");
        return -1;
    }
    c->session.authenticated = 1;
    c->session.user = u;
    return 0;
}

static int valid_client_name(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] < '!' || s[i] > '~') return 0;
    return 1;
}

static int set_client_name(struct client *c, const char *s, size_t len)
{
    if (!valid_client_name(s, len)) return -1;
    free(c->name);
    c->name = NULL;
    if (len) {
        c->name = xmalloc(len + 1);
        memcpy(c->name, s, len);
        c->name[len] = '\0';
    }
    return 0;
}

/* HELLO [protover [AUTH user pass] [SETNAME name]], in Redis's order (helloCommand): every option
 * is read first (the last AUTH / SETNAME wins), then AUTH, then the NOAUTH check, and only
 * then the name and the protocol are set, so an unauthenticated HELLO changes nothing.
 * policy let only protover 2 or 3 (or none: the current one) through. The reply is a map in
 * RESP3 (a flat array in RESP2) with Redis's fields. A client whose dedicated connections
 * (subscriber, WATCH) speak the protocol it has cannot switch: those connections would
 * answer it in the other one. */
static void local_hello(struct client *c, struct request *req, size_t argc, const char *const *argv,
                        const size_t *argvlen)
{
    size_t auth = 0, setname = 0; /* argv index of the option's first value, 0 = not given */
    long long ver = c->resp3 ? 3 : 2;
    if (argc >= 2 && args_ll(argv[1], argvlen[1], &ver) != 0) ver = 2; /* policy checked it */
    for (size_t i = 2; i < argc; i++) {
        size_t more = argc - 1 - i;
        if (args_word_is(argv[i], argvlen[i], "AUTH") && more >= 2) {
            auth = i + 1;
            i += 2;
        } else if (args_word_is(argv[i], argvlen[i], "SETNAME") && more >= 1) {
            setname = i + 1;
            i += 1;
        } else {
            char msg[200], shown[130];
            const char *nul = memchr(argv[i], '\0', argvlen[i]); /* Redis prints the C string */
            size_t n = nul ? (size_t)(nul - argv[i]) : argvlen[i];
            snprintf(msg, sizeof(msg), "ERR Syntax error in HELLO option '%s'",
                     policy_printable(argv[i], n, shown, sizeof(shown)));
            request_error(req, msg);
            return;
        }
    }
    if (auth && local_auth(c, req, argv[auth], argvlen[auth], argv[auth + 1], argvlen[auth + 1]) != 0) return;
    if (!c->session.authenticated) {
        request_error(req, "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
                           "HELLO AUTH <user> <pass> option can be used to authenticate the client and "
                           "select the RESP protocol version at the same time");
        return;
    }
    int resp3 = ver == 3;
    if (resp3 != c->resp3 && (pubsub_subscribed(&c->pubsub) || c->watch_pin)) {
        request_error(req, pubsub_subscribed(&c->pubsub)
                               ? "ERR keygate: HELLO cannot change the protocol while subscribed (its subscriber "
                                 "connections speak the current one); UNSUBSCRIBE first, or reconnect"
                               : "ERR keygate: HELLO cannot change the protocol while WATCHing (its connection "
                                 "speaks the current one); UNWATCH first");
        return;
    }
    if (setname && set_client_name(c, argv[setname], argvlen[setname]) != 0) {
        request_error(req, "ERR Client names cannot contain spaces, newlines or special characters.");
        return;
    }
    /* nothing subscribed: the subscriber connections kept for the next SUBSCRIBE speak the old
     * protocol; close them (a new SUBSCRIBE pins one of the new) */
    if (resp3 != c->resp3) pins_drop_subscribers(c);
    c->resp3 = resp3;
    struct evbuffer *out = xevbuffer_new();
    evbuffer_add_printf(out, resp3 ? "%%7\r\n" : "*14\r\n");
    add_cstr(out, "server");
    add_cstr(out, "keygate");
    add_cstr(out, "version");
    add_cstr(out, REDIS_COMPAT_VERSION);
    add_cstr(out, "proto");
    evbuffer_add_printf(out, ":%d\r\n", resp3 ? 3 : 2);
    add_cstr(out, "id");
    evbuffer_add_printf(out, ":%llu\r\n", (unsigned long long)c->id);
    add_cstr(out, "mode");
    add_cstr(out, "standalone");
    add_cstr(out, "role");
    add_cstr(out, "master");
    add_cstr(out, "modules");
    evbuffer_add_printf(out, "*0\r\n");
    reply_buffer(req, out);
}

/* One client as Redis 7.0's CLIENT LIST prints it (every field, keygate's values). */
static void client_info_line(struct evbuffer *out, const struct client *c)
{
    int64_t age = (clock_wall_ms() - c->created_ms) / 1000;
    int subs = 0;
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++) subs += c->pubsub.pin[i] != NULL;
    size_t obl = conn_out_pending(c);
    evbuffer_add_printf(out,
                        "id=%llu addr=%s laddr=? fd=%d name=%s age=%lld idle=0 flags=%s db=0 sub=%d psub=0 ssub=0 "
                        "multi=%d qbuf=%zu qbuf-free=%zu argv-mem=0 multi-mem=0 rbs=%zu rbp=0 obl=%zu oll=0 "
                        "omem=%zu tot-mem=%zu events=r cmd=%s user=%s redir=-1 resp=%d\n",
                        (unsigned long long)c->id, c->addr, c->fd, c->name ? c->name : "", (long long)age,
                        c->session.mode == SESSION_MULTI ? "x" : "N", subs,
                        c->session.mode == SESSION_MULTI ? (int)c->multi_keep.len : -1, c->qlen, c->qcap - c->qlen,
                        c->qcap, obl, obl, c->qcap + obl, c->last_cmd ? c->last_cmd : "NULL",
                        c->session.user ? c->session.user->name : "default", c->resp3 ? 3 : 2);
}

static void local_client_list(struct client *c, struct request *req, int only_self)
{
    struct evbuffer *lines = xevbuffer_new();
    if (only_self) {
        client_info_line(lines, c);
    } else {
        const struct client *it;
        TAILQ_FOREACH(it, &c->worker->clients, link)
            if (access_may_see_client(c->session.user, it->session.user)) client_info_line(lines, it);
    }
    struct evbuffer *out = xevbuffer_new();
    size_t len = evbuffer_get_length(lines);
    add_verbatim(c, out, (const char *)evbuffer_pullup(lines, -1), len);
    evbuffer_free(lines);
    reply_buffer(req, out);
}

/*
 * CLIENT UNBLOCK id [TIMEOUT|ERROR] (policy checked the arguments): the client `id`, on any worker
 * (blocked.h), logged in as the same user (any client when no users are configured), blocked in a
 * command on its dedicated connection, is unblocked on the backend: CLIENT UNBLOCK <that
 * connection's id> goes to the instance on c's own connection, and the backend's :1 or :0 is c's
 * reply (:0 when the command was answered meanwhile); the blocked client gets what Redis gives it
 * (TIMEOUT: the command's timeout reply, ERROR: -UNBLOCKED ...). Its connection is never reused
 * after (router.c: the UNBLOCK travels on another connection and must not reach a later client's
 * command). Any other id: :0, as Redis answers for an id that is no blocked client.
 */
#define UNBLOCK_RETRY_MS 1          /* asking again while the blocked client's new connection learns its id */
#define UNBLOCK_PENDING_MAX_MS 1000 /* its CLIENT ID reply comes within a round trip; past this: :0 */

/* A CLIENT UNBLOCK waiting for the blocked client's connection to learn its backend id. */
struct unblock_retry {
    struct event *ev;
    struct request *req; /* kept alive by request_expect, also if its client goes */
    long long id;
    int error;
    int64_t until_ms;
};

/* Claim `id` and send the backend's CLIENT UNBLOCK for req, or answer :0. 0 when req must ask
 * again (the blocked client's connection does not know its backend id yet) and may_wait. */
static int unblock_try(struct client *c, struct request *req, long long id, int error, int may_wait)
{
    long long server_id = 0;
    int instance = -1;
    enum blocked_claim_result found =
        id > 0 ? blocked_claim(&c->worker->proxy->blocked, (uint64_t)id, c->session.user ? c->session.user->name : NULL,
                               &instance, &server_id)
               : BLOCKED_NONE;
    if (found == BLOCKED_PENDING && may_wait) return 0;
    if (found != BLOCKED_CLAIMED) {
        reply_str(req, ":0\r\n");
        return 1;
    }
    char sid[32];
    snprintf(sid, sizeof(sid), "%lld", server_id);
    const char *cmd[4] = {"CLIENT", "UNBLOCK", sid, error ? "ERROR" : "TIMEOUT"};
    char *bytes = NULL;
    int len = redisFormatCommandArgv(&bytes, 4, cmd, NULL);
    if (len < 0) oom_abort(0);
    router_forward_bytes(
        c, nodes_conn(c->worker, instance, &(struct node_want){.slot = -1, .resp3 = c->resp3, .client_id = c->id}),
        instance, req, bytes, (size_t)len);
    free(bytes);
    return 1;
}

static void unblock_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    struct unblock_retry *r = arg;
    struct request *req = r->req;
    (void)fd;
    (void)what;
    struct client *c = req->client;
    if (c && !c->closed && unblock_try(c, req, r->id, r->error, clock_wall_ms() < r->until_ms) == 0) {
        struct timeval tv = {0, UNBLOCK_RETRY_MS * 1000};
        evtimer_add(r->ev, &tv);
        return;
    }
    request_reply_consumed(req); /* answered or sent (it lives on while owed), or its client went */
    event_free(r->ev);
    free(r);
}

static void local_client_unblock(struct client *c, struct request *req, size_t argc, const char *const *argv,
                                 const size_t *argvlen)
{
    long long id = 0;
    if (args_ll(argv[2], argvlen[2], &id) != 0) id = 0; /* policy checked it */
    int error = argc == 4 && args_word_is(argv[3], argvlen[3], "error");
    if (unblock_try(c, req, id, error, 1)) return;
    struct unblock_retry *r = xcalloc(1, sizeof(*r));
    r->req = req;
    r->id = id;
    r->error = error;
    r->until_ms = clock_wall_ms() + UNBLOCK_PENDING_MAX_MS;
    r->ev = xevtimer_new(c->worker->base, unblock_retry_cb, r);
    request_expect(req);
    struct timeval tv = {0, UNBLOCK_RETRY_MS * 1000};
    evtimer_add(r->ev, &tv);
}

/* COMMAND / COMMAND INFO / COMMAND DOCS / COMMAND LIST / COMMAND COUNT, from the generated table. */
static void local_command(struct client *c, struct request *req, enum local_cmd what, size_t argc,
                          const char *const *argv, const size_t *argvlen)
{
    struct evbuffer *out = xevbuffer_new();
    if (what == LOCAL_COMMAND_COUNT) {
        evbuffer_add_printf(out, ":%zu\r\n", command_table_len);
    } else if (what == LOCAL_COMMAND || ((what == LOCAL_COMMAND_INFO || what == LOCAL_COMMAND_DOCS) && argc == 2)) {
        if (what == LOCAL_COMMAND_DOCS) {
            evbuffer_add_printf(out, "*%zu\r\n", command_table_len * 2);
            for (size_t i = 0; i < command_table_len; i++)
                evbuffer_add(out, command_table[i].docs_resp, command_table[i].docs_resp_len);
        } else {
            evbuffer_add_printf(out, "*%zu\r\n", command_table_len);
            for (size_t i = 0; i < command_table_len; i++)
                evbuffer_add(out, command_table[i].info_resp, command_table[i].info_resp_len);
        }
    } else if (what == LOCAL_COMMAND_INFO || what == LOCAL_COMMAND_DOCS) {
        struct evbuffer *body = xevbuffer_new();
        size_t found = 0;
        for (size_t i = 2; i < argc; i++) {
            char name[64];
            size_t n = argvlen[i] < sizeof(name) - 1 ? argvlen[i] : sizeof(name) - 1;
            for (size_t j = 0; j < n; j++)
                name[j] = (char)((argv[i][j] >= 'A' && argv[i][j] <= 'Z') ? argv[i][j] + 32 : argv[i][j]);
            name[n] = '\0';
            const struct command_def *cmd = argvlen[i] < sizeof(name) ? command_by_name(name) : NULL;
            if (what == LOCAL_COMMAND_INFO) {
                if (cmd)
                    evbuffer_add(body, cmd->info_resp, cmd->info_resp_len);
                else
                    evbuffer_add_printf(body, "%s", local_null(c, "*-1\r\n"));
                found++;
            } else if (cmd) {
                evbuffer_add(body, cmd->docs_resp, cmd->docs_resp_len);
                found += 2;
            }
        }
        evbuffer_add_printf(out, "*%zu\r\n", found);
        evbuffer_add_buffer(out, body);
        evbuffer_free(body);
    } else { /* LOCAL_COMMAND_LIST */
        size_t total = 0;
        for (size_t i = 0; i < command_table_len; i++) total += 1 + (size_t)command_table[i].nsubcommands;
        evbuffer_add_printf(out, "*%zu\r\n", total);
        for (size_t i = 0; i < command_table_len; i++) {
            add_cstr(out, command_table[i].name);
            for (int j = 0; j < command_table[i].nsubcommands; j++) add_cstr(out, command_table[i].subcommands[j].name);
        }
    }
    reply_buffer(req, out);
}

/* COMMAND GETKEYS / GETKEYSANDFLAGS cmd arg...: command_getkeys over argv[2..], Redis's reply. With
 * flags each key is [key, flags] and the flags a set (RESP3 "~", RESP2 an array) of status words. */
static void local_getkeys(struct client *c, struct request *req, size_t argc, const char *const *argv,
                          const size_t *argvlen)
{
    static const struct {
        uint32_t flag;
        const char *word;
    } words[] = {{KS_RO, "RO"},
                 {KS_RW, "RW"},
                 {KS_OW, "OW"},
                 {KS_RM, "RM"},
                 {KS_ACCESS, "access"},
                 {KS_UPDATE, "update"},
                 {KS_INSERT, "insert"},
                 {KS_DELETE, "delete"},
                 {KS_NOT_KEY, "not_key"},
                 {KS_INCOMPLETE, "incomplete"},
                 {KS_VARIABLE_FLAGS, "variable_flags"}};
    int with_flags = argvlen[1] == strlen("getkeysandflags"); /* command_lookup told the two apart */
    const char *error = NULL;
    int n = command_getkeys(argc - 2, argv + 2, argvlen + 2, NULL, 0, &error);
    if (n < 0) {
        request_error(req, error);
        return;
    }
    struct key_ref *keys = xmalloc(((size_t)n + 1) * sizeof(*keys));
    int again = command_getkeys(argc - 2, argv + 2, argvlen + 2, keys, n, &error);
    assert(again == n); /* pure: the same answer twice */
    (void)again;
    struct evbuffer *out = xevbuffer_new();
    evbuffer_add_printf(out, "*%d\r\n", n);
    for (int i = 0; i < n; i++) {
        size_t ai = (size_t)keys[i].index + 2;
        if (with_flags) evbuffer_add(out, STR_AND_LEN("*2\r\n"));
        add_bulk(out, argv[ai], argvlen[ai]);
        if (!with_flags) continue;
        int count = 0;
        for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) count += (keys[i].flags & words[w].flag) != 0;
        evbuffer_add_printf(out, "%c%d\r\n", c->resp3 ? '~' : '*', count);
        for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++)
            if (keys[i].flags & words[w].flag) evbuffer_add_printf(out, "+%s\r\n", words[w].word);
    }
    free(keys);
    reply_buffer(req, out);
}

static int section_wanted(size_t argc, const char *const *argv, const size_t *argvlen, const char *section)
{
    if (argc < 2) return 1;
    for (size_t i = 1; i < argc; i++) {
        if (args_word_is(argv[i], argvlen[i], section) || args_word_is(argv[i], argvlen[i], "all") ||
            args_word_is(argv[i], argvlen[i], "everything") || args_word_is(argv[i], argvlen[i], "default"))
            return 1;
    }
    return 0;
}

/* keygate's own INFO sections named by argv (server, clients, stats, namespaces, instances)
 * into body, each ending in a blank line. */
static void local_info_body(struct client *c, size_t argc, const char *const *argv, const size_t *argvlen,
                            struct evbuffer *body)
{
    struct worker *w = c->worker;
    struct proxy *px = w->proxy;
    const struct config *cfg = w->cfg;
    if (section_wanted(argc, argv, argvlen, "server")) {
        evbuffer_add_printf(body,
                            "# Server\r\nredis_version:%s\r\nkeygate_version:%s\r\nredis_mode:standalone\r\n"
                            "process_id:%ld\r\nthreads:%d\r\nuptime_in_seconds:%lld\r\nconfig_file:%s\r\n"
                            "reloads:%llu\r\n\r\n",
                            REDIS_COMPAT_VERSION, KEYGATE_VERSION, (long)getpid(), px->nworkers,
                            (long long)((clock_wall_ms() - px->started_ms) / 1000), cfg->path,
                            (unsigned long long)__atomic_load_n(&px->reloads, __ATOMIC_ACQUIRE));
    }
    if (section_wanted(argc, argv, argvlen, "clients")) {
        evbuffer_add_printf(body,
                            "# Clients\r\nconnected_clients:%d\r\nmaxclients:%d\r\nmemory_used_bytes:%lld\r\n"
                            "max_memory:%lld\r\n\r\n",
                            __atomic_load_n(&px->clients_now, __ATOMIC_RELAXED), cfg->max_clients,
                            (long long)__atomic_load_n(&px->mem_used, __ATOMIC_RELAXED), (long long)cfg->max_memory);
    }
    if (section_wanted(argc, argv, argvlen, "stats")) {
        struct stats sum;
        stats_sum(&px->workers[0].stats, sizeof(struct worker), px->nworkers, &sum);
        evbuffer_add_printf(body, "# Stats\r\n");
#define STATS_INFO(name, help) evbuffer_add_printf(body, "%s:%llu\r\n", #name, (unsigned long long)sum.name);
        STATS_COUNTERS(STATS_INFO)
#undef STATS_INFO
        evbuffer_add_printf(body, "\r\n");
    }
    if (section_wanted(argc, argv, argvlen, "namespaces")) {
        const struct registry *r = cfg->registry;
        evbuffer_add_printf(body, "# Namespaces\r\n");
        for (size_t i = 0; i < r->count; i++) {
            const struct namespace_entry *e = &r->entries[i];
            char ttl[32] = "none", max[32] = "none";
            if (e->ttl_ms) duration_format(e->ttl_ms, ttl, sizeof(ttl));
            if (e->max_ttl_ms) duration_format(e->max_ttl_ms, max, sizeof(max));
            /* one "name:k=v,..." line per entry, unique names, as clients' INFO parsers expect */
            evbuffer_add_printf(body, "ns%zu:prefix=%s,kind=%s,instance=%s,ttl=%s,max_ttl=%s,sliding=%d,owner=%s\r\n",
                                i, e->prefix, e->kind == NS_CHANNEL ? "channel" : "namespace",
                                cfg->instance_names[e->instance], ttl, max, e->sliding, e->owner);
        }
        report_info(px, cfg, body);  /* issue 13: the default line, unregistered names, report counters */
        struct bytebuf counts = {0}; /* the per-namespace counters and latency percentiles (stats.h) */
        stats_format_info(&px->workers[0].stats, sizeof(struct worker), px->nworkers, cfg->instance_names,
                          cfg->ninstances, &counts);
        evbuffer_add(body, counts.p, counts.len);
        bytebuf_free(&counts);
        evbuffer_add_printf(body, "\r\n");
    }
    if (section_wanted(argc, argv, argvlen, "instances")) {
        evbuffer_add_printf(body, "# Instances\r\n");
        for (size_t i = 0; i < cfg->ninstances; i++) {
            struct nodes_status st;
            nodes_status(w->proxy, (int)i, &st); /* every worker's */
            evbuffer_add_printf(body, "instance_%s:addr=%s:%d,tls=%d,connections=%d,up=%d,in_flight=%zu\r\n",
                                cfg->instances[i].name, cfg->instances[i].host, cfg->instances[i].port,
                                cfg->instances[i].tls, st.connections, st.up, st.in_flight);
        }
        evbuffer_add_printf(body, "\r\n");
    }
    if (section_wanted(argc, argv, argvlen, "tracking")) { /* issue 32: CLIENT TRACKING */
        struct tracking_info ti;
        tracking_info(&px->tracking, &ti);
        evbuffer_add_printf(body,
                            "# Tracking\r\ntracking_clients:%d\r\ntracking_total_keys:%zu\r\n"
                            "tracking_table_max_keys:%d\r\ntracking_feeds_up:%d\r\ntracking_streams_up:%d\r\n"
                            "tracking_memory_bytes:%lld\r\n"
                            "tracking_invalidations_write:%llu\r\ntracking_invalidations_evict:%llu\r\n"
                            "tracking_invalidations_flush:%llu\r\n\r\n",
                            ti.clients, ti.keys, cfg->tracking_table_max_keys, ti.feeds_up, ti.streams_up,
                            (long long)ti.memory, (unsigned long long)ti.sent[TRACKING_CAUSE_WRITE],
                            (unsigned long long)ti.sent[TRACKING_CAUSE_EVICT],
                            (unsigned long long)ti.sent[TRACKING_CAUSE_FLUSH]);
    }
    if (section_wanted(argc, argv, argvlen, "nearcache")) { /* issue 20: per near-cache namespace */
        struct bytebuf nc = {0};
        nearcache_info(px, &nc); /* nothing without near-cache namespaces */
        if (nc.len) evbuffer_add(body, nc.p, nc.len), evbuffer_add_printf(body, "\r\n");
        bytebuf_free(&nc);
    }
}

/* INFO: keygate's own sections; with keyspace, memory or replication named (plan->merge
 * MERGE_INFO) the same INFO goes to every instance and the reply is merged (info_merge). */
static void local_info(struct client *c, struct request *req, const struct plan *plan, size_t argc,
                       const char *const *argv, const size_t *argvlen)
{
    struct evbuffer *body = xevbuffer_new();
    local_info_body(c, argc, argv, argvlen, body);
    if (plan->merge == MERGE_INFO) {
        size_t n = evbuffer_get_length(body);
        fanout_info(c, req, argc, argv, argvlen, (const char *)evbuffer_pullup(body, -1), n);
        evbuffer_free(body);
        return;
    }
    struct evbuffer *out = xevbuffer_new();
    size_t len = evbuffer_get_length(body);
    /* Redis ends INFO without the last blank line */
    add_verbatim(c, out, (const char *)evbuffer_pullup(body, -1), len >= 2 ? len - 2 : len);
    evbuffer_free(body);
    reply_buffer(req, out);
}

/* The registry's rule for a BCAST prefix (as for a SCAN pattern): every key it covers lies in
 * namespaces c's user may read: the namespace (or the default line) holding the prefix itself,
 * and every namespace nested under it. 0, or -1 with a NOPERM error in err. */
static int prefix_allowed(void *ctx, const char *p, size_t len, char *err, size_t errlen)
{
    const struct client *c = ctx;
    return access_tracking_prefix(c->worker->cfg->registry, &c->session, p, len, err, errlen);
}

/* CLIENT TRACKING, CACHING, GETREDIR, TRACKINGINFO as Redis 7.0 answers them (networking.c's
 * clientCommand); the state lives in the process's table (tracking.h), c keeps a copy of its flags. */
static void local_client_tracking(struct client *c, struct request *req, enum local_cmd which, size_t argc,
                                  const char *const *argv, const size_t *argvlen)
{
    struct tracking_table *t = &c->worker->proxy->tracking;
    if (which == LOCAL_CLIENT_TRACKING) {
        char err[400];
        uint32_t flags;
        if (tracking_command(t, c->id, argc, argv, argvlen, prefix_allowed, c, &flags, err, sizeof(err)) != 0) {
            request_error(req, err);
            return;
        }
        c->tracking_flags = flags;
        reply_str(req, "+OK\r\n");
    } else if (which == LOCAL_CLIENT_CACHING) {
        uint32_t f = c->tracking_flags;
        if (!(f & TRACKING_ON))
            request_error(req, "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN "
                               "or OPTOUT mode enabled");
        else if (args_word_is(argv[2], argvlen[2], "yes") && !(f & TRACKING_OPTIN))
            request_error(req, "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.");
        else if (args_word_is(argv[2], argvlen[2], "no") && !(f & TRACKING_OPTOUT))
            request_error(req, "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.");
        else if (!args_word_is(argv[2], argvlen[2], "yes") && !args_word_is(argv[2], argvlen[2], "no"))
            request_error(req, "ERR syntax error");
        else {
            c->tracking_caching = 1;
            reply_str(req, "+OK\r\n");
        }
    } else {
        struct tracking_state st;
        tracking_state_get(t, c->id, &st);
        struct bytebuf out = {0};
        if (which == LOCAL_CLIENT_GETREDIR) {
            char line[32];
            int n = snprintf(line, sizeof(line), ":%lld\r\n", (st.flags & TRACKING_ON) ? (long long)st.redirect : -1LL);
            bytebuf_add(&out, line, (size_t)n);
        } else {
            tracking_info_reply(&st, c->tracking_caching, c->resp3, &out);
        }
        tracking_state_clear(&st);
        request_complete(req, out.p, out.len);
        bytebuf_free(&out);
    }
}

void local_execute(struct client *c, struct request *req, const struct plan *plan, size_t argc, const char *const *argv,
                   const size_t *argvlen)
{
    char buf[64];
    switch (plan->local) {
    case LOCAL_PING:
        if (argc == 2) {
            struct evbuffer *out = xevbuffer_new();
            add_bulk(out, argv[1], argvlen[1]);
            reply_buffer(req, out);
        } else {
            reply_str(req, "+PONG\r\n");
        }
        break;
    case LOCAL_ECHO: {
        struct evbuffer *out = xevbuffer_new();
        add_bulk(out, argv[1], argvlen[1]);
        reply_buffer(req, out);
        break;
    }
    case LOCAL_QUIT:
        c->closing = 1;
        reply_str(req, "+OK\r\n");
        break;
    case LOCAL_SELECT:
    case LOCAL_CLIENT_SETINFO:
    case LOCAL_READONLY:
        reply_str(req, "+OK\r\n");
        break;
    case LOCAL_AUTH:
        if (argc == 2) {
            if (local_auth(c, req, NULL, 0, argv[1], argvlen[1]) == 0) reply_str(req, "+OK\r\n");
        } else if (local_auth(c, req, argv[1], argvlen[1], argv[2], argvlen[2]) == 0) {
            reply_str(req, "+OK\r\n");
        }
        break;
    case LOCAL_HELLO:
        local_hello(c, req, argc, argv, argvlen);
        break;
    case LOCAL_CLIENT_SETNAME:
        if (set_client_name(c, argv[2], argvlen[2]) != 0)
            request_error(req, "ERR Client names cannot contain spaces, newlines or special characters.");
        else
            reply_str(req, "+OK\r\n");
        break;
    case LOCAL_CLIENT_GETNAME:
        if (c->name) {
            struct evbuffer *out = xevbuffer_new();
            add_cstr(out, c->name);
            reply_buffer(req, out);
        } else {
            reply_str(req, local_null(c, "$-1\r\n"));
        }
        break;
    case LOCAL_CLIENT_REPLY_ON:
        session_client_reply(&c->session, SESSION_REPLY_ON);
        reply_str(req, "+OK\r\n");
        break;
    case LOCAL_CLIENT_REPLY_OFF:
    case LOCAL_CLIENT_REPLY_SKIP:
        session_client_reply(&c->session,
                             plan->local == LOCAL_CLIENT_REPLY_OFF ? SESSION_REPLY_OFF : SESSION_REPLY_SKIP);
        request_complete(req, "", 0); /* silent (policy_reply_dropped): no reply of its own */
        break;
    case LOCAL_CLIENT_ID:
        snprintf(buf, sizeof(buf), ":%llu\r\n", (unsigned long long)c->id);
        reply_str(req, buf);
        break;
    case LOCAL_CLIENT_INFO:
        local_client_list(c, req, 1);
        break;
    case LOCAL_CLIENT_LIST:
        local_client_list(c, req, 0);
        break;
    case LOCAL_COMMAND:
    case LOCAL_COMMAND_COUNT:
    case LOCAL_COMMAND_INFO:
    case LOCAL_COMMAND_DOCS:
    case LOCAL_COMMAND_LIST:
        local_command(c, req, plan->local, argc, argv, argvlen);
        break;
    case LOCAL_INFO:
        local_info(c, req, plan, argc, argv, argvlen);
        break;
    case LOCAL_CLIENT_UNBLOCK:
        local_client_unblock(c, req, argc, argv, argvlen);
        break;
    case LOCAL_CLIENT_TRACKING:
    case LOCAL_CLIENT_CACHING:
    case LOCAL_CLIENT_GETREDIR:
    case LOCAL_CLIENT_TRACKINGINFO:
        local_client_tracking(c, req, plan->local, argc, argv, argvlen);
        break;
    case LOCAL_COMMAND_GETKEYS:
        local_getkeys(c, req, argc, argv, argvlen);
        break;
    case LOCAL_UNWATCH:
        (void)pins_watch_lost_take(c);
        session_unwatch(&c->session);
        reply_str(req, "+OK\r\n");
        break;
    case LOCAL_PING_SUBSCRIBED: {
        struct evbuffer *out = xevbuffer_new();
        evbuffer_add_printf(out, "*2\r\n$4\r\npong\r\n");
        if (argc == 2)
            add_bulk(out, argv[1], argvlen[1]);
        else
            evbuffer_add(out, STR_AND_LEN("$0\r\n\r\n"));
        reply_buffer(req, out);
        break;
    }
    case LOCAL_EMPTY_ARRAY:
        reply_str(req, "*0\r\n");
        break;
    case LOCAL_UNSUBSCRIBE_NONE: {
        /* Redis: one confirmation per channel named, or one with a nil channel */
        struct evbuffer *out = xevbuffer_new();
        const char *kind = argv[0];
        size_t kind_len = argvlen[0];
        char lower[16];
        size_t n = kind_len < sizeof(lower) ? kind_len : sizeof(lower) - 1;
        for (size_t i = 0; i < n; i++) lower[i] = (char)((kind[i] >= 'A' && kind[i] <= 'Z') ? kind[i] + 32 : kind[i]);
        const char *head = c->resp3 ? ">3\r\n" : "*3\r\n"; /* RESP3: a push, as every confirmation */
        if (argc == 1) {
            evbuffer_add_printf(out, "%s", head);
            add_bulk(out, lower, n);
            evbuffer_add_printf(out, "%s:0\r\n", local_null(c, "$-1\r\n"));
        }
        for (size_t i = 1; i < argc; i++) {
            evbuffer_add_printf(out, "%s", head);
            add_bulk(out, lower, n);
            add_bulk(out, argv[i], argvlen[i]);
            evbuffer_add_printf(out, ":0\r\n");
        }
        reply_buffer(req, out);
        break;
    }
    case LOCAL_NONE:
    default:
        request_error(req, "ERR internal error: no local handler");
        break;
    }
}
