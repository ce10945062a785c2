/* slotmap.c: Redis Cluster's slot map as data: CRC16 key slots, CLUSTER SLOTS / SHARDS replies, MOVED / ASK. */
#include "slotmap.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp.h"
#include "util.h"

/* ---------------------------------------------------------------------------------------------
 * Key -> slot (Redis's crc16.c and keyHashSlot, cluster.c).
 * ------------------------------------------------------------------------------------------- */

/* CRC16-XMODEM (poly 0x1021), one entry per byte value. */
static const uint16_t crc16_table[256] = {
    0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7, 0x8108, 0x9129, 0xa14a, 0xb16b, 0xc18c, 0xd1ad,
    0xe1ce, 0xf1ef, 0x1231, 0x0210, 0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6, 0x9339, 0x8318, 0xb37b, 0xa35a,
    0xd3bd, 0xc39c, 0xf3ff, 0xe3de, 0x2462, 0x3443, 0x0420, 0x1401, 0x64e6, 0x74c7, 0x44a4, 0x5485, 0xa56a, 0xb54b,
    0x8528, 0x9509, 0xe5ee, 0xf5cf, 0xc5ac, 0xd58d, 0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6, 0x5695, 0x46b4,
    0xb75b, 0xa77a, 0x9719, 0x8738, 0xf7df, 0xe7fe, 0xd79d, 0xc7bc, 0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861,
    0x2802, 0x3823, 0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b, 0x5af5, 0x4ad4, 0x7ab7, 0x6a96,
    0x1a71, 0x0a50, 0x3a33, 0x2a12, 0xdbfd, 0xcbdc, 0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a, 0x6ca6, 0x7c87,
    0x4ce4, 0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41, 0xedae, 0xfd8f, 0xcdec, 0xddcd, 0xad2a, 0xbd0b, 0x8d68, 0x9d49,
    0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13, 0x2e32, 0x1e51, 0x0e70, 0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a,
    0x9f59, 0x8f78, 0x9188, 0x81a9, 0xb1ca, 0xa1eb, 0xd10c, 0xc12d, 0xf14e, 0xe16f, 0x1080, 0x00a1, 0x30c2, 0x20e3,
    0x5004, 0x4025, 0x7046, 0x6067, 0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e, 0x02b1, 0x1290,
    0x22f3, 0x32d2, 0x4235, 0x5214, 0x6277, 0x7256, 0xb5ea, 0xa5cb, 0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d,
    0x34e2, 0x24c3, 0x14a0, 0x0481, 0x7466, 0x6447, 0x5424, 0x4405, 0xa7db, 0xb7fa, 0x8799, 0x97b8, 0xe75f, 0xf77e,
    0xc71d, 0xd73c, 0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657, 0x7676, 0x4615, 0x5634, 0xd94c, 0xc96d, 0xf90e, 0xe92f,
    0x99c8, 0x89e9, 0xb98a, 0xa9ab, 0x5844, 0x4865, 0x7806, 0x6827, 0x18c0, 0x08e1, 0x3882, 0x28a3, 0xcb7d, 0xdb5c,
    0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a, 0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92,
    0xfd2e, 0xed0f, 0xdd6c, 0xcd4d, 0xbdaa, 0xad8b, 0x9de8, 0x8dc9, 0x7c26, 0x6c07, 0x5c64, 0x4c45, 0x3ca2, 0x2c83,
    0x1ce0, 0x0cc1, 0xef1f, 0xff3e, 0xcf5d, 0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8, 0x6e17, 0x7e36, 0x4e55, 0x5e74,
    0x2e93, 0x3eb2, 0x0ed1, 0x1ef0,
};

/*
 * Slicing by 8: crc16_slice[k][x] is the CRC of byte x followed by k zero bytes (slice 0 is
 * crc16_table). The CRC is linear and its state two bytes wide, so eight input bytes fold in as
 * eight independent lookups: the state's two bytes XORed into the first two, each byte with the
 * slice of the zero bytes that follow it. Filled once, before main (crc16_slices_fill).
 */
static uint16_t crc16_slice[8][256];

__attribute__((constructor)) static void crc16_slices_fill(void)
{
    for (unsigned x = 0; x < 256; x++) {
        uint16_t crc = crc16_table[x];
        crc16_slice[0][x] = crc;
        for (int k = 1; k < 8; k++) {
            crc = (uint16_t)((crc << 8) ^ crc16_table[crc >> 8]);
            crc16_slice[k][x] = crc;
        }
    }
}

uint16_t slotmap_crc16(const char *buf, size_t len)
{
    const unsigned char *p = (const unsigned char *)buf;
    uint16_t crc = 0;
    for (; len >= 8; p += 8, len -= 8)
        crc = crc16_slice[7][p[0] ^ (crc >> 8)] ^ crc16_slice[6][p[1] ^ (crc & 0xff)] ^ crc16_slice[5][p[2]] ^
              crc16_slice[4][p[3]] ^ crc16_slice[3][p[4]] ^ crc16_slice[2][p[5]] ^ crc16_slice[1][p[6]] ^
              crc16_slice[0][p[7]];
    for (; len > 0; p++, len--) crc = (uint16_t)((crc << 8) ^ crc16_table[((crc >> 8) ^ *p) & 0xff]);
    return crc;
}

unsigned slotmap_key_slot(const char *key, size_t len)
{
    const char *open = len ? memchr(key, '{', len) : NULL;
    if (open) {
        size_t after = (size_t)(open - key) + 1;
        const char *close = memchr(open + 1, '}', len - after);
        if (close && close > open + 1) key = open + 1, len = (size_t)(close - open) - 1;
    }
    return slotmap_crc16(key, len) & (SLOTMAP_SLOTS - 1);
}

int slotmap_common_slot(const char *const *keys, const size_t *lens, size_t n)
{
    if (n == 0) return -2;
    unsigned slot = slotmap_key_slot(keys[0], lens[0]);
    for (size_t i = 1; i < n; i++)
        if (slotmap_key_slot(keys[i], lens[i]) != slot) return -1;
    return (int)slot;
}

void slotmap_scan_cursor_split(uint64_t cursor, unsigned *rank, uint64_t *node_cursor)
{
    *rank = (unsigned)(cursor & ((1u << SLOTMAP_SCAN_RANK_BITS) - 1));
    *node_cursor = cursor >> SLOTMAP_SCAN_RANK_BITS;
}

int slotmap_scan_cursor_next(uint64_t node_cursor, unsigned rank, unsigned nnodes, uint64_t *out)
{
    assert(rank < nnodes && nnodes <= (1u << SLOTMAP_SCAN_RANK_BITS));
    if (node_cursor == 0) { /* this node is done: the next one's start, or the end */
        *out = rank + 1 < nnodes ? rank + 1 : 0;
        return 0;
    }
    if (node_cursor >> (64 - SLOTMAP_SCAN_RANK_BITS)) return -1;
    *out = node_cursor << SLOTMAP_SCAN_RANK_BITS | rank;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The map.
 * ------------------------------------------------------------------------------------------- */

void slotmap_init(struct slotmap *m)
{
    m->nnodes = 0;
    for (size_t i = 0; i < SLOTMAP_SLOTS; i++) m->owner[i] = -1;
}

int slotmap_owner(const struct slotmap *m, unsigned slot)
{
    assert(slot < SLOTMAP_SLOTS);
    return m->owner[slot];
}

/* As slotmap_find_node, host given as bytes. */
static int find_node(const struct slotmap *m, const char *host, size_t hlen, int port)
{
    for (int i = 0; i < m->nnodes; i++)
        if (m->nodes[i].port == port && strlen(m->nodes[i].host) == hlen && memcmp(m->nodes[i].host, host, hlen) == 0)
            return i;
    return -1;
}

int slotmap_find_node(const struct slotmap *m, const char *host, int port)
{
    return find_node(m, host, strlen(host), port);
}

void slotmap_node_set(struct slotmap_node *n, const char *host, size_t hlen, int port)
{
    assert(hlen < SLOTMAP_HOST_MAX);
    memcpy(n->host, host, hlen);
    n->host[hlen] = '\0';
    n->port = port;
    n->id = (util_hash(host, hlen) << 16) ^ (uint64_t)(unsigned)port;
}

/* The node host:port, found or appended; -1 when the table is full or host does not fit. */
static int node_add(struct slotmap *m, const char *host, size_t hlen, int port)
{
    int i = find_node(m, host, hlen, port);
    if (i >= 0) return i;
    if (m->nnodes == SLOTMAP_MAX_NODES || hlen >= SLOTMAP_HOST_MAX) return -1;
    i = m->nnodes++;
    slotmap_node_set(&m->nodes[i], host, hlen, port);
    return i;
}

int slotmap_set_owner(struct slotmap *m, unsigned slot, const char *host, int port)
{
    assert(slot < SLOTMAP_SLOTS);
    int i = node_add(m, host, strlen(host), port);
    if (i >= 0) m->owner[slot] = (int16_t)i;
    return i;
}

/* ---------------------------------------------------------------------------------------------
 * Reading a framed RESP2 reply: a cursor, one element at a time. The whole reply was framed
 * by resp_scan_reply first, so counts are real; every read is still bounds-checked.
 * ------------------------------------------------------------------------------------------- */

/* An address Redis names: not null, not "", not "?". */
static int str_usable(struct resp_str s)
{
    return !s.nil && s.n > 0 && !resp_str_is(s, "?");
}

/* ---------------------------------------------------------------------------------------------
 * Parsing CLUSTER SLOTS / SHARDS into a fresh map; m is replaced only when all of it parsed.
 * ------------------------------------------------------------------------------------------- */

struct parse {
    const char *cmd; /* "CLUSTER SLOTS", for messages */
    char *err;
    size_t errlen;
    const char *asked_host;
    struct slotmap *t; /* the map being built */
};

__attribute__((format(printf, 2, 3))) static int fail(struct parse *c, const char *fmt, ...)
{
    if (c->errlen == 0) return -1;
    int n = snprintf(c->err, c->errlen, "%s: ", c->cmd);
    if (n >= 0 && (size_t)n < c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Frame the reply and open it: -1 (err filled) for a partial or trailing-bytes reply or an error reply. */
static int reply_open(struct parse *c, const char *reply, size_t len, struct resp_cursor *r)
{
    struct resp_scanner sc;
    resp_scanner_reset(&sc);
    long long framed = resp_scan_reply(&sc, reply, len);
    if (framed <= 0 || (size_t)framed != len) return fail(c, "not one whole RESP reply (%zu bytes)", len);
    if (reply[0] == '-') {
        /* the error's text, without its CRLF */
        return fail(c, "%.*s", (int)(len - 3 < 200 ? len - 3 : 200), reply + 1);
    }
    r->p = reply;
    r->end = reply + len;
    return 0;
}

/* The host to store: `named` when Redis named one (str_usable), else asked_host. -1 (err filled)
 * when neither is there or the host cannot be stored. */
static int pick_host(struct parse *c, struct resp_str named, struct resp_str *out, const char *where)
{
    if (str_usable(named)) {
        *out = named;
    } else if (c->asked_host && c->asked_host[0]) {
        out->s = c->asked_host;
        out->n = strlen(c->asked_host);
        out->nil = 0;
    } else {
        return fail(c, "%s: the node's address is unknown and no asked host was given", where);
    }
    if (out->n >= SLOTMAP_HOST_MAX) return fail(c, "%s: host of %zu bytes is too long", where, out->n);
    for (size_t i = 0; i < out->n; i++)
        if ((unsigned char)out->s[i] <= ' ') return fail(c, "%s: host has a control or space byte", where);
    return 0;
}

/* Slots start..end belong to host:port in c->t. */
static int assign(struct parse *c, long long start, long long end, struct resp_str host, long long port,
                  const char *where)
{
    if (start < 0 || end >= SLOTMAP_SLOTS || start > end)
        return fail(c, "%s: bad slot range %lld-%lld", where, start, end);
    if (port < 1 || port > 65535) return fail(c, "%s: bad port %lld", where, port);
    int idx = node_add(c->t, host.s, host.n, (int)port);
    if (idx < 0) return fail(c, "%s: more than %d primaries", where, SLOTMAP_MAX_NODES);
    for (long long s = start; s <= end; s++) {
        if (c->t->owner[s] != -1) return fail(c, "%s: slot %lld is in two ranges", where, s);
        c->t->owner[s] = (int16_t)idx;
    }
    return 0;
}

/* Parse the array at r with `one` per element, into a fresh map that replaces m on success. */
static int parse_into(struct parse *c, struct slotmap *m, const char *reply, size_t len, void *arg,
                      int (*one)(struct parse *, struct resp_cursor *, long long, void *))
{
    struct resp_cursor r;
    long long n;
    if (reply_open(c, reply, len, &r) != 0) return -1;
    if (resp_cursor_array(&r, &n) != 0) return fail(c, "not an array");
    c->t = xmalloc(sizeof(*c->t));
    slotmap_init(c->t);
    int rc = 0;
    for (long long i = 0; i < n && rc == 0; i++) rc = one(c, &r, i, arg);
    assert(rc != 0 || r.p == r.end); /* framed as one reply, and each `one` reads its whole element */
    if (rc == 0) *m = *c->t;
    free(c->t);
    c->t = NULL;
    return rc;
}

/* CLUSTER SLOTS "ip" metadata of a node entry ([k, v, ...]); a nil str when absent. */
static int slots_meta_ip(struct resp_cursor *r, struct resp_str *ip)
{
    long long n;
    ip->nil = 1;
    if (resp_cursor_array(r, &n) != 0 || n % 2 != 0) return -1;
    for (long long i = 0; i < n; i += 2) {
        struct resp_str k, v;
        if (resp_cursor_bulk(r, &k) != 0) return -1;
        if (!resp_str_is(k, "ip")) {
            if (resp_cursor_skip(r) != 0) return -1;
            continue;
        }
        if (resp_cursor_bulk(r, &v) != 0) return -1;
        *ip = v;
    }
    return 0;
}

/* One range: [start, end, [host, port, id?, metadata?, ...], replicas...]. */
static int slots_range(struct parse *c, struct resp_cursor *r, long long i, void *arg)
{
    char where[32];
    long long n, start, end, nn, port;
    struct resp_str host, ip = {.nil = 1};
    snprintf(where, sizeof(where), "range %lld", i + 1);
    if (resp_cursor_array(r, &n) != 0 || n < 3) return fail(c, "%s: not an array of start, end, primary", where);
    if (resp_cursor_number(r, ':', &start) != 0 || resp_cursor_number(r, ':', &end) != 0)
        return fail(c, "%s: start and end must be integers", where);
    if (resp_cursor_array(r, &nn) != 0 || nn < 2)
        return fail(c, "%s: the primary is not an array of host, port", where);
    if (resp_cursor_bulk(r, &host) != 0) return fail(c, "%s: the primary's host is not a bulk string", where);
    if (resp_cursor_number(r, ':', &port) != 0) return fail(c, "%s: the primary's port is not an integer", where);
    for (long long k = 2; k < nn; k++) {
        int rc = k == 3 && resp_str_is(host, "?") ? slots_meta_ip(r, &ip) : resp_cursor_skip(r);
        if (rc != 0) return fail(c, "%s: malformed node entry", where);
    }
    for (long long k = 3; k < n; k++)
        if (resp_cursor_skip(r) != 0) return fail(c, "%s: malformed replica entry", where);
    if (resp_str_is(host, "?") && str_usable(ip)) host = ip;
    struct resp_str use;
    if (pick_host(c, host, &use, where) != 0) return -1;
    return assign(c, start, end, use, port, where);
}

int slotmap_parse_slots(struct slotmap *m, const char *reply, size_t len, const char *asked_host, char *err,
                        size_t errlen)
{
    struct parse c = {.cmd = "CLUSTER SLOTS", .err = err, .errlen = errlen, .asked_host = asked_host};
    return parse_into(&c, m, reply, len, NULL, slots_range);
}

/* What a CLUSTER SHARDS node map says that we use. */
struct shard_node {
    struct resp_str ip, endpoint, role, health;
    long long port, tls_port; /* -1: absent */
};

static int shard_node(struct resp_cursor *r, struct shard_node *nd)
{
    long long n;
    struct resp_str none = {.nil = 1};
    *nd = (struct shard_node){.ip = none, .endpoint = none, .role = none, .health = none, .port = -1, .tls_port = -1};
    if (resp_cursor_array(r, &n) != 0 || n % 2 != 0) return -1;
    for (long long i = 0; i < n; i += 2) {
        struct resp_str k;
        int rc;
        if (resp_cursor_bulk(r, &k) != 0) return -1;
        if (resp_str_is(k, "port"))
            rc = resp_cursor_number(r, ':', &nd->port);
        else if (resp_str_is(k, "tls-port"))
            rc = resp_cursor_number(r, ':', &nd->tls_port);
        else if (resp_str_is(k, "ip"))
            rc = resp_cursor_bulk(r, &nd->ip);
        else if (resp_str_is(k, "endpoint"))
            rc = resp_cursor_bulk(r, &nd->endpoint);
        else if (resp_str_is(k, "role"))
            rc = resp_cursor_bulk(r, &nd->role);
        else if (resp_str_is(k, "health"))
            rc = resp_cursor_bulk(r, &nd->health);
        else
            rc = resp_cursor_skip(r);
        if (rc != 0) return -1;
    }
    return 0;
}

/* One shard: ["slots", [start, end, ...], "nodes", [node map, ...], ...]. */
static int shards_shard(struct parse *c, struct resp_cursor *r, long long i, void *arg)
{
    const int want_tls = *(const int *)arg;
    char where[32];
    long long n, nslots = -1, nnodes;
    struct resp_cursor slots_at = {0};
    struct shard_node primary = {.port = -1}, nd;
    int have_primary = 0;

    snprintf(where, sizeof(where), "shard %lld", i + 1);
    if (resp_cursor_array(r, &n) != 0 || n % 2 != 0)
        return fail(c, "%s: not a map (an array of name, value pairs)", where);
    for (long long f = 0; f < n; f += 2) {
        struct resp_str k;
        if (resp_cursor_bulk(r, &k) != 0) return fail(c, "%s: a field name is not a bulk string", where);
        if (resp_str_is(k, "slots")) {
            slots_at = *r; /* read once the primary is known */
            if (resp_cursor_array(r, &nslots) != 0 || nslots % 2 != 0)
                return fail(c, "%s: slots is not an array of start, end pairs", where);
            for (long long s = 0; s < nslots; s++)
                if (resp_cursor_skip(r) != 0) return fail(c, "%s: malformed slots", where);
        } else if (resp_str_is(k, "nodes")) {
            if (resp_cursor_array(r, &nnodes) != 0) return fail(c, "%s: nodes is not an array", where);
            for (long long j = 0; j < nnodes; j++) {
                if (shard_node(r, &nd) != 0) return fail(c, "%s: node %lld is not a well-formed map", where, j + 1);
                if (!resp_str_is(nd.role, "master")) continue;
                if (!have_primary || (!resp_str_is(primary.health, "online") && resp_str_is(nd.health, "online")))
                    primary = nd;
                have_primary = 1;
            }
        } else if (resp_cursor_skip(r) != 0) {
            return fail(c, "%s: malformed field", where);
        }
    }
    if (nslots < 0) return fail(c, "%s: no slots field", where);
    if (nslots == 0) return 0; /* a primary without slots (e.g. failed over): nothing to route */
    if (!have_primary) return fail(c, "%s: no node with role master", where);

    struct resp_str host;
    if (resp_str_is(primary.endpoint, "") && !primary.endpoint.nil)
        host = primary.endpoint; /* unknown-endpoint */
    else
        host = str_usable(primary.endpoint) ? primary.endpoint : primary.ip;
    struct resp_str use;
    if (pick_host(c, host, &use, where) != 0) return -1;
    long long port = want_tls ? primary.tls_port : primary.port;
    if (port == -1) return fail(c, "%s: the primary has no %s", where, want_tls ? "tls-port" : "port");

    if (resp_cursor_array(&slots_at, &nslots) != 0) return fail(c, "%s: malformed slots", where); /* not reached */
    for (long long s = 0; s < nslots; s += 2) {
        long long start, end;
        if (resp_cursor_number(&slots_at, ':', &start) != 0 || resp_cursor_number(&slots_at, ':', &end) != 0)
            return fail(c, "%s: slots must be integers", where);
        if (assign(c, start, end, use, port, where) != 0) return -1;
    }
    return 0;
}

int slotmap_parse_shards(struct slotmap *m, const char *reply, size_t len, int want_tls, const char *asked_host,
                         char *err, size_t errlen)
{
    struct parse c = {.cmd = "CLUSTER SHARDS", .err = err, .errlen = errlen, .asked_host = asked_host};
    return parse_into(&c, m, reply, len, &want_tls, shards_shard);
}

/* ---------------------------------------------------------------------------------------------
 * Redirects (what a reply means for a request: resend.c).
 * ------------------------------------------------------------------------------------------- */

int slotmap_parse_redirect(const char *reply, size_t len, struct slotmap_redirect *out)
{
    enum slotmap_redirect_kind kind;
    size_t p;
    if (len >= 7 && memcmp(reply, "-MOVED ", 7) == 0) {
        kind = SLOTMAP_MOVED;
        p = 7;
    } else if (len >= 5 && memcmp(reply, "-ASK ", 5) == 0) {
        kind = SLOTMAP_ASK;
        p = 5;
    } else {
        return 0;
    }
    if (len < p + 2 || reply[len - 2] != '\r' || reply[len - 1] != '\n') return 0;
    const char *s = reply + p, *end = reply + len - 2; /* "SLOT ADDR" */
    if (memchr(s, '\r', (size_t)(end - s)) || memchr(s, '\n', (size_t)(end - s))) return 0;

    const char *sp = memchr(s, ' ', (size_t)(end - s));
    long long slot, port;
    if (!sp || resp_parse_ll(s, (size_t)(sp - s), &slot) != 0 || slot < 0 || slot >= SLOTMAP_SLOTS) return 0;

    const char *a = sp + 1, *host, *colon;
    size_t hlen;
    if (a < end && *a == '[') { /* "[::1]:6381" */
        const char *rb = memchr(a, ']', (size_t)(end - a));
        if (!rb || rb == a + 1 || rb + 1 >= end || rb[1] != ':') return 0;
        host = a + 1, hlen = (size_t)(rb - a) - 1, colon = rb + 1;
    } else { /* "127.0.0.1:6381", "::1:6381": the last ':' ends the host */
        colon = NULL;
        for (const char *q = a; q < end; q++)
            if (*q == ':') colon = q;
        if (!colon) return 0;
        host = a, hlen = (size_t)(colon - a);
    }
    if (resp_parse_ll(colon + 1, (size_t)(end - colon - 1), &port) != 0 || port < 1 || port > 65535) return 0;
    if (hlen == 1 && host[0] == '?') hlen = 0; /* hostname endpoint the node lacks: as unknown */
    if (hlen >= SLOTMAP_HOST_MAX) return 0;
    for (size_t i = 0; i < hlen; i++)
        if ((unsigned char)host[i] <= ' ' || host[i] == '[' || host[i] == ']') return 0;

    out->kind = kind;
    out->slot = (unsigned)slot;
    memcpy(out->host, host, hlen);
    out->host[hlen] = '\0';
    out->port = (int)port;
    return 1;
}
