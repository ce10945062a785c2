/* sentinel.c: Redis Sentinel's answers as data: get-master-addr-by-name, ROLE, SENTINEL REPLICAS, event payloads. */
#include "sentinel.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "resp.h"

/* ---------------------------------------------------------------------------------------------
 * Reading a framed RESP2 reply: a cursor, one element at a time. The whole reply was framed
 * by resp_scan_reply first, so counts are real; every read is still bounds-checked.
 * ------------------------------------------------------------------------------------------- */

/* A bulk that is not null. */
static int rd_string(struct resp_cursor *r, struct resp_str *out)
{
    return resp_cursor_bulk(r, out) == 0 && !out->nil ? 0 : -1;
}

/* A port: the decimal text of 1..65535. */
static int port_of(const char *s, size_t n, int *port)
{
    long long v;
    if (resp_parse_ll(s, n, &v) != 0 || v < 1 || v > 65535) return -1;
    *port = (int)v;
    return 0;
}

/* A word (host or name) copied NUL-terminated into out[cap]: not empty, fits, no control or space byte. */
static int word_copy(const char *s, size_t n, char *out, size_t cap)
{
    if (n == 0 || n >= cap) return -1;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] == 0x7f) return -1;
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

static int addr_set(struct sentinel_addr *a, struct resp_str host, const char *port, size_t port_len)
{
    return word_copy(host.s, host.n, a->host, sizeof a->host) == 0 && port_of(port, port_len, &a->port) == 0 ? 0 : -1;
}

__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errlen, const char *cmd, const char *fmt, ...)
{
    if (errlen == 0) return -1;
    int n = snprintf(err, errlen, "%s: ", cmd);
    if (n >= 0 && (size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Frame the reply: -1 (err filled) for a partial or trailing-bytes reply or an error reply. */
static int reply_open(const char *reply, size_t len, struct resp_cursor *r, const char *cmd, char *err, size_t errlen)
{
    struct resp_scanner sc;
    resp_scanner_reset(&sc);
    long long framed = len > 0 ? resp_scan_reply(&sc, reply, len) : 0;
    if (framed <= 0 || (size_t)framed != len)
        return fail(err, errlen, cmd, "not one whole RESP reply (%zu bytes)", len);
    if (reply[0] == '-') return fail(err, errlen, cmd, "%.*s", (int)(len - 3 < 200 ? len - 3 : 200), reply + 1);
    r->p = reply;
    r->end = reply + len;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * SENTINEL get-master-addr-by-name
 * ------------------------------------------------------------------------------------------- */

int sentinel_parse_master_addr(const char *reply, size_t len, struct sentinel_addr *out, char *err, size_t errlen)
{
    static const char cmd[] = "SENTINEL get-master-addr-by-name";
    struct resp_cursor r;
    if (reply_open(reply, len, &r, cmd, err, errlen) != 0) return -1;
    if ((len == 5 && memcmp(reply, "$-1\r\n", 5) == 0) || (len == 5 && memcmp(reply, "*-1\r\n", 5) == 0)) return 0;
    long long n;
    struct resp_str host, port;
    if (resp_cursor_array(&r, &n) != 0 || n != 2 || rd_string(&r, &host) != 0 || rd_string(&r, &port) != 0)
        return fail(err, errlen, cmd, "not an array of host and port");
    struct sentinel_addr a;
    if (addr_set(&a, host, port.s, port.n) != 0)
        return fail(err, errlen, cmd, "bad address \"%.*s\" \"%.*s\"", (int)(host.n < 100 ? host.n : 100), host.s,
                    (int)(port.n < 20 ? port.n : 20), port.s);
    *out = a;
    return 1;
}

/* ---------------------------------------------------------------------------------------------
 * ROLE
 * ------------------------------------------------------------------------------------------- */

static enum sentinel_link link_of(struct resp_str s)
{
    static const struct {
        const char *word;
        enum sentinel_link link;
    } words[] = {{"none", SENTINEL_LINK_NONE},
                 {"connect", SENTINEL_LINK_CONNECT},
                 {"connecting", SENTINEL_LINK_CONNECTING},
                 {"sync", SENTINEL_LINK_SYNC},
                 {"connected", SENTINEL_LINK_CONNECTED}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (resp_str_is(s, words[i].word)) return words[i].link;
    return SENTINEL_LINK_UNKNOWN;
}

/* The primary's list: *N [*3 [host, port, offset] ...] (port and offset as bulks; more elements ignored). */
static int role_replicas(struct resp_cursor *r, struct sentinel_role *o)
{
    long long n;
    if (resp_cursor_array(r, &n) != 0) return -1;
    for (long long i = 0; i < n; i++) {
        long long k;
        struct resp_str host, port, off;
        if (resp_cursor_array(r, &k) != 0 || k < 3 || rd_string(r, &host) != 0 || rd_string(r, &port) != 0 ||
            rd_string(r, &off) != 0)
            return -1;
        for (long long j = 3; j < k; j++)
            if (resp_cursor_skip(r) != 0) return -1;
        long long offset;
        struct sentinel_addr a;
        if (addr_set(&a, host, port.s, port.n) != 0 || resp_parse_ll(off.s, off.n, &offset) != 0) return -1;
        if (o->nreplicas < SENTINEL_ROLE_MAX_REPLICAS) {
            o->replicas[o->nreplicas].addr = a;
            o->replicas[o->nreplicas].offset = offset;
        }
        o->nreplicas++;
    }
    return 0;
}

int sentinel_parse_role(const char *reply, size_t len, struct sentinel_role *out, char *err, size_t errlen)
{
    static const char cmd[] = "ROLE";
    struct resp_cursor r;
    if (reply_open(reply, len, &r, cmd, err, errlen) != 0) return -1;
    long long n;
    struct resp_str kind;
    if (resp_cursor_array(&r, &n) != 0 || n < 1 || rd_string(&r, &kind) != 0)
        return fail(err, errlen, cmd, "not an array starting with the role");
    struct sentinel_role o;
    memset(&o, 0, sizeof o);
    if (resp_str_is(kind, "master")) {
        o.kind = SENTINEL_ROLE_PRIMARY;
        if (n != 3 || resp_cursor_number(&r, ':', &o.offset) != 0 || role_replicas(&r, &o) != 0)
            return fail(err, errlen, cmd, "malformed master reply");
    } else if (resp_str_is(kind, "slave")) {
        struct resp_str host, state;
        long long port;
        o.kind = SENTINEL_ROLE_REPLICA;
        if (n != 5 || rd_string(&r, &host) != 0 || resp_cursor_number(&r, ':', &port) != 0 ||
            rd_string(&r, &state) != 0 || resp_cursor_number(&r, ':', &o.offset) != 0)
            return fail(err, errlen, cmd, "malformed slave reply");
        if (word_copy(host.s, host.n, o.primary.host, sizeof o.primary.host) != 0 || port < 1 || port > 65535)
            return fail(err, errlen, cmd, "bad primary address in a slave reply");
        o.primary.port = (int)port;
        o.link = link_of(state);
    } else if (resp_str_is(kind, "sentinel")) {
        long long masters;
        o.kind = SENTINEL_ROLE_SENTINEL;
        if (n != 2 || resp_cursor_array(&r, &masters) != 0) return fail(err, errlen, cmd, "malformed sentinel reply");
        for (long long i = 0; i < masters; i++) {
            struct resp_str name;
            if (rd_string(&r, &name) != 0) return fail(err, errlen, cmd, "malformed sentinel reply");
        }
        o.nmasters = (int)(masters > 1000000 ? 1000000 : masters);
    } else {
        return fail(err, errlen, cmd, "unknown role \"%.*s\"", (int)(kind.n < 40 ? kind.n : 40), kind.s);
    }
    *out = o;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * SENTINEL REPLICAS
 * ------------------------------------------------------------------------------------------- */

unsigned sentinel_parse_flags(const char *text, size_t len)
{
    static const struct {
        const char *word;
        unsigned flag;
    } words[] = {{"master", SENTINEL_FLAG_MASTER},     {"slave", SENTINEL_FLAG_SLAVE},
                 {"sentinel", SENTINEL_FLAG_SENTINEL}, {"s_down", SENTINEL_FLAG_S_DOWN},
                 {"o_down", SENTINEL_FLAG_O_DOWN},     {"disconnected", SENTINEL_FLAG_DISCONNECTED},
                 {"promoted", SENTINEL_FLAG_PROMOTED}, {"failover_in_progress", SENTINEL_FLAG_FAILOVER}};
    unsigned flags = 0;
    for (size_t i = 0; i < len;) {
        size_t n = 0;
        while (i + n < len && text[i + n] != ',') n++;
        if (n == 0) { /* an empty word (",,") is no flag */
            i++;
            continue;
        }
        unsigned flag = SENTINEL_FLAG_OTHER;
        for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
            if (strlen(words[k].word) == n && memcmp(words[k].word, text + i, n) == 0) flag = words[k].flag;
        flags |= flag;
        i += n + 1;
    }
    return flags;
}

/* One replica: a flat map of bulk strings. -1 with *why set. */
static int replica_map(struct resp_cursor *r, struct sentinel_replica *o, const char **why)
{
    long long n;
    if (resp_cursor_array(r, &n) != 0 || n % 2 != 0) {
        *why = "a replica is not a flat map";
        return -1;
    }
    memset(o, 0, sizeof *o);
    o->priority = -1;
    o->offset = -1;
    struct resp_str ip = {0}, port = {0};
    int have_ip = 0, have_port = 0, have_flags = 0;
    struct resp_str mhost = {0}, mport = {0};
    for (long long i = 0; i < n; i += 2) {
        struct resp_str k, v;
        if (rd_string(r, &k) != 0 || rd_string(r, &v) != 0) {
            *why = "a replica's field or value is not a string";
            return -1;
        }
        long long num;
        if (resp_str_is(k, "ip")) {
            ip = v, have_ip = 1;
        } else if (resp_str_is(k, "port")) {
            port = v, have_port = 1;
        } else if (resp_str_is(k, "flags")) {
            o->flags = sentinel_parse_flags(v.s, v.n), have_flags = 1;
        } else if (resp_str_is(k, "master-link-status")) {
            o->link_up = resp_str_is(v, "ok");
        } else if (resp_str_is(k, "master-host")) {
            mhost = v;
        } else if (resp_str_is(k, "master-port")) {
            mport = v;
        } else if (resp_str_is(k, "slave-priority") && resp_parse_ll(v.s, v.n, &num) == 0 && num >= 0 &&
                   num <= 1 << 30) {
            o->priority = (int)num;
        } else if (resp_str_is(k, "slave-repl-offset") && resp_parse_ll(v.s, v.n, &num) == 0) {
            o->offset = num;
        }
    }
    if (!have_ip || !have_port || !have_flags) {
        *why = "a replica without ip, port or flags";
        return -1;
    }
    if (addr_set(&o->addr, ip, port.s, port.n) != 0) {
        *why = "a replica's ip or port is bad";
        return -1;
    }
    /* the primary it reports: "?" and 0 before its first INFO; keep only a usable one */
    if (mhost.n > 0 && !resp_str_is(mhost, "?")) {
        struct sentinel_addr m;
        if (addr_set(&m, mhost, mport.s, mport.n) == 0) o->primary = m;
    }
    return 0;
}

int sentinel_parse_master(const char *reply, size_t len, struct sentinel_master *out, char *err, size_t errlen)
{
    static const char cmd[] = "SENTINEL MASTER";
    if (len > 5 && reply[0] == '-' && memmem(reply, len, "No such master", 14) != NULL) return 0;
    struct resp_cursor r;
    if (reply_open(reply, len, &r, cmd, err, errlen) != 0) return -1;
    long long n;
    if (resp_cursor_array(&r, &n) != 0 || n % 2 != 0) return fail(err, errlen, cmd, "not a flat map");
    memset(out, 0, sizeof *out);
    out->config_epoch = out->down_after_ms = out->failover_timeout_ms = -1;
    struct resp_str ip = {0}, port = {0};
    int have_ip = 0, have_port = 0;
    for (long long i = 0; i < n; i += 2) {
        struct resp_str k, v;
        if (rd_string(&r, &k) != 0 || rd_string(&r, &v) != 0)
            return fail(err, errlen, cmd, "a field or value is not a string");
        long long num;
        if (resp_str_is(k, "ip"))
            ip = v, have_ip = 1;
        else if (resp_str_is(k, "port"))
            port = v, have_port = 1;
        else if (resp_str_is(k, "flags"))
            out->flags = sentinel_parse_flags(v.s, v.n);
        else if (resp_str_is(k, "config-epoch") && resp_parse_ll(v.s, v.n, &num) == 0 && num >= 0)
            out->config_epoch = num;
        else if (resp_str_is(k, "down-after-milliseconds") && resp_parse_ll(v.s, v.n, &num) == 0 && num >= 0)
            out->down_after_ms = num;
        else if (resp_str_is(k, "failover-timeout") && resp_parse_ll(v.s, v.n, &num) == 0 && num >= 0)
            out->failover_timeout_ms = num;
    }
    if (!have_ip || !have_port) return fail(err, errlen, cmd, "no ip or port");
    if (addr_set(&out->addr, ip, port.s, port.n) != 0) return fail(err, errlen, cmd, "a bad ip or port");
    return 1;
}

static int same_addr(const struct sentinel_addr *a, const struct sentinel_addr *b)
{
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

int sentinel_pick(const struct sentinel_master *answers, int n, long long min_epoch, int nconfigured)
{
    int best = -1, best_votes = 0;
    long long best_epoch = -2;
    for (int i = 0; i < n; i++) {
        int votes = 0;
        for (int j = 0; j < n; j++)
            if (answers[j].config_epoch == answers[i].config_epoch && same_addr(&answers[i].addr, &answers[j].addr))
                votes++;
        /* below the epoch followed: a sentinel that is behind, unless most of the deployment says it
         * (an operator who removed and monitored the master again: its epoch starts over) */
        if (answers[i].config_epoch < min_epoch && 2 * votes <= nconfigured) continue;
        if (answers[i].config_epoch > best_epoch || (answers[i].config_epoch == best_epoch && votes > best_votes))
            best = i, best_votes = votes, best_epoch = answers[i].config_epoch;
    }
    return best;
}

int sentinel_parse_replicas(const char *reply, size_t len, struct sentinel_replica *out, int max, int *count, char *err,
                            size_t errlen)
{
    static const char cmd[] = "SENTINEL REPLICAS";
    struct resp_cursor r;
    if (reply_open(reply, len, &r, cmd, err, errlen) != 0) return -1;
    long long n;
    if (resp_cursor_array(&r, &n) != 0) return fail(err, errlen, cmd, "not an array");
    for (long long i = 0; i < n; i++) {
        struct sentinel_replica one;
        const char *why = "";
        if (replica_map(&r, &one, &why) != 0) return fail(err, errlen, cmd, "replica %lld: %s", i, why);
        if (i < max) out[i] = one;
    }
    *count = (int)n;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Pub/sub messages and event payloads
 * ------------------------------------------------------------------------------------------- */

int sentinel_parse_message(const char *reply, size_t len, const char **channel, size_t *channel_len,
                           const char **payload, size_t *payload_len)
{
    struct resp_cursor r;
    if (reply_open(reply, len, &r, "message", NULL, 0) != 0) return 0;
    long long n;
    struct resp_str kind, pattern, ch, msg;
    if (resp_cursor_array(&r, &n) != 0 || rd_string(&r, &kind) != 0) return 0;
    if (resp_str_is(kind, "message") && n == 3) {
        if (rd_string(&r, &ch) != 0 || rd_string(&r, &msg) != 0) return 0;
    } else if (resp_str_is(kind, "pmessage") && n == 4) {
        if (rd_string(&r, &pattern) != 0 || rd_string(&r, &ch) != 0 || rd_string(&r, &msg) != 0) return 0;
    } else {
        return 0;
    }
    *channel = ch.s;
    *channel_len = ch.n;
    *payload = msg.s;
    *payload_len = msg.n;
    return 1;
}

/* Split text into at most max words separated by single spaces; -1 when a word is empty
 * (two spaces, a leading or trailing one) or there are more than max (when exact) words. */
struct words {
    const char *s[12];
    size_t n[12];
    int count;
};

static int split_words(const char *text, size_t len, struct words *w, int max)
{
    w->count = 0;
    size_t i = 0;
    while (i <= len) {
        const char *sp = i < len ? memchr(text + i, ' ', len - i) : NULL;
        size_t n = sp ? (size_t)(sp - (text + i)) : len - i;
        if (n == 0 || w->count == max) return -1;
        w->s[w->count] = text + i;
        w->n[w->count] = n;
        w->count++;
        i += n + 1;
        if (!sp) break;
    }
    return 0;
}

int sentinel_parse_switch_master(const char *payload, size_t len, struct sentinel_switch *out)
{
    struct words w;
    struct sentinel_switch o;
    memset(&o, 0, sizeof o);
    if (split_words(payload, len, &w, 5) != 0 || w.count != 5) return -1;
    if (word_copy(w.s[0], w.n[0], o.name, sizeof o.name) != 0 ||
        word_copy(w.s[1], w.n[1], o.from.host, sizeof o.from.host) != 0 || port_of(w.s[2], w.n[2], &o.from.port) != 0 ||
        word_copy(w.s[3], w.n[3], o.to.host, sizeof o.to.host) != 0 || port_of(w.s[4], w.n[4], &o.to.port) != 0)
        return -1;
    *out = o;
    return 0;
}

/* "<name> <ip> <port>" at words[at..at+2] into name and addr. */
static int instance_at(const struct words *w, int at, char *name, size_t name_cap, struct sentinel_addr *addr)
{
    return word_copy(w->s[at], w->n[at], name, name_cap) == 0 &&
                   word_copy(w->s[at + 1], w->n[at + 1], addr->host, sizeof addr->host) == 0 &&
                   port_of(w->s[at + 2], w->n[at + 2], &addr->port) == 0
               ? 0
               : -1;
}

int sentinel_parse_event(const char *payload, size_t len, struct sentinel_event *out)
{
    struct words w;
    struct sentinel_event o;
    memset(&o, 0, sizeof o);
    /* up to 8 instance words, then the event's own words (ignored): split only the head */
    size_t head = len;
    int spaces = 0;
    for (size_t i = 0; i < len; i++)
        if (payload[i] == ' ' && ++spaces == 8) {
            head = i;
            break;
        }
    if (split_words(payload, head, &w, 8) != 0 || w.count < 4) return -1;
    struct resp_str type = {w.s[0], w.n[0], 0};
    if (resp_str_is(type, "master"))
        o.kind = SENTINEL_ROLE_PRIMARY;
    else if (resp_str_is(type, "slave"))
        o.kind = SENTINEL_ROLE_REPLICA;
    else if (resp_str_is(type, "sentinel"))
        o.kind = SENTINEL_ROLE_SENTINEL;
    else
        return -1;
    if (instance_at(&w, 1, o.name, sizeof o.name, &o.addr) != 0) return -1;
    if (o.kind == SENTINEL_ROLE_PRIMARY) {
        /* the words after a master's address are the event's own ("#quorum 2/2"), never "@" */
        if (w.count > 4 && w.n[4] == 1 && w.s[4][0] == '@') return -1;
        memcpy(o.master_name, o.name, sizeof o.name);
        o.master = o.addr;
    } else {
        if (w.count < 8 || w.n[4] != 1 || w.s[4][0] != '@') return -1;
        if (instance_at(&w, 5, o.master_name, sizeof o.master_name, &o.master) != 0) return -1;
    }
    *out = o;
    return 0;
}
