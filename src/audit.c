/* audit.c: `keygate audit`: SCAN each instance, check every key against the registry, report violations. */
#include "audit.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "syncconn.h"

/*
 *  for each instance (a cluster: each of its primaries, syncconn_primaries; only db 0 exists there):
 *                      INFO keyspace -> db 0 + every db with keys
 *   for each db:        SELECT db (db > 0)
 *                       SCAN c COUNT 1000 -> keys
 *                         -> db > 0?                            -> "outside db 0"
 *                         -> registry_lookup: none?             -> "no namespace"
 *                                             other instance?   -> "wrong instance"
 *                                             ttl= / max-ttl=?  -> PTTL (pipelined, PTTL_BATCH a flush)
 *                                                                  -> "no TTL" / "TTL above max-ttl"
 *                       until the cursor is 0 again
 */

#define SCAN_COUNT "1000"
#define PTTL_BATCH 256
#define DEFAULT_LIMIT 1000

static const char *const kind_names[AUDIT_KINDS] = {"no namespace", "wrong instance", "missing TTL",
                                                    "TTL above max-ttl", "outside db 0"};

struct audit {
    const struct config *cfg;
    unsigned long long limit;
    unsigned long long violations, by_kind[AUDIT_KINDS];
    unsigned long long scanned[CONFIG_MAX_INSTANCES];
    unsigned long long unregistered;     /* keys only the registry's default line takes (not violations) */
    int db;                              /* the database being scanned: violations of db > 0 say so */
    int primaries[CONFIG_MAX_INSTANCES]; /* a cluster instance: how many primaries it had */
    const char *node;                    /* a cluster node being scanned ("host:port"): its violations say so */
    char where[320];                     /* "instance 'NAME'" or "instance 'NAME' node HOST:PORT", for errors */
};

void audit_key_escape(FILE *out, const char *key, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)key[i];
        if (ch == '\\')
            fputs("\\\\", out);
        else if (ch > 0x20 && ch < 0x7f && ch != '"')
            fputc(ch, out);
        else
            fprintf(out, "\\x%02x", ch);
    }
}

int audit_ttl_check(const struct namespace_entry *e, long long pttl_ms)
{
    if (pttl_ms == -1 && e->ttl_ms > 0) return AUDIT_NO_TTL;
    if (pttl_ms > 0 && e->max_ttl_ms > 0 && pttl_ms > e->max_ttl_ms) return AUDIT_TTL_ABOVE_MAX;
    return -1;
}

int audit_keyspace_next(const char *info_text, int after)
{
    int best = -1;
    for (const char *line = info_text, *nl; line; line = (nl = strchr(line, '\n')) ? nl + 1 : NULL) {
        if (strncmp(line, STR_AND_LEN("db")) != 0) continue;
        const char *p = line + sizeof("db") - 1;
        long long db = 0;
        int digits = 0, keys = 0;
        for (; *p >= '0' && *p <= '9' && db <= INT32_MAX; p++, digits++) db = db * 10 + (*p - '0');
        if (!digits || db > INT32_MAX || strncmp(p, STR_AND_LEN(":keys=")) != 0) continue;
        p += sizeof(":keys=") - 1;
        for (digits = 0; *p >= '0' && *p <= '9'; p++, digits++) keys |= *p != '0'; /* any count above 0 */
        if (!digits || (*p != ',' && *p != '\r' && *p != '\n' && *p != '\0')) continue;
        if (keys && db > after && (best < 0 || db < best)) best = (int)db;
    }
    return best;
}

/* Count one violation; print "INSTANCE KEY PROBLEM" while under the limit, the
 * problem followed by " (db N)" outside db 0. */
static void violation(struct audit *a, int inst, const char *key, size_t len, int kind, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void violation(struct audit *a, int inst, const char *key, size_t len, int kind, const char *fmt, ...)
{
    a->violations++;
    a->by_kind[kind]++;
    if (a->violations > a->limit) return;
    printf("%s ", a->cfg->instances[inst].name);
    audit_key_escape(stdout, key, len);
    putchar(' ');
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (a->db != 0) printf(" (db %d)", a->db);
    if (a->node) printf(" (node %s)", a->node);
    putchar('\n');
}

static void ttl_violation(struct audit *a, int inst, const redisReply *key, const struct namespace_entry *e,
                          long long pttl)
{
    char ttl[32], max[32];
    switch (audit_ttl_check(e, pttl)) {
    case AUDIT_NO_TTL:
        duration_format(e->ttl_ms, ttl, sizeof(ttl));
        violation(a, inst, key->str, (size_t)key->len, AUDIT_NO_TTL, "missing TTL: namespace '%s' requires ttl=%s",
                  e->is_default ? REGISTRY_DEFAULT_NAME : e->prefix, ttl);
        break;
    case AUDIT_TTL_ABOVE_MAX:
        duration_format(e->max_ttl_ms, max, sizeof(max));
        violation(a, inst, key->str, (size_t)key->len, AUDIT_TTL_ABOVE_MAX,
                  "TTL above max-ttl: %llds left, namespace '%s' allows max-ttl=%s", (pttl + 999) / 1000,
                  e->is_default ? REGISTRY_DEFAULT_NAME : e->prefix, max);
        break;
    default:
        break;
    }
}

/* PTTL keys[idx[0..n)] in one pipeline and report their TTL violations. 0, or -1 (error printed). */
static int check_ttls(struct audit *a, struct syncconn *c, int inst, redisReply **keys, const size_t *idx, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *argv[2] = {"PTTL", keys[idx[i]]->str};
        size_t argvlen[2] = {4, (size_t)keys[idx[i]]->len};
        if (syncconn_append(c, 2, argv, argvlen) != 0) return -1;
    }
    if (syncconn_flush(c) != 0) return -1;
    int rc = 0;
    for (size_t i = 0; i < n; i++) { /* read every reply, even after a bad one, to stay aligned */
        redisReply *r = syncconn_read(c);
        if (!r) return -1;
        if (r->type == REDIS_REPLY_INTEGER) {
            const redisReply *k = keys[idx[i]];
            const struct namespace_entry *e = registry_resolve(a->cfg->registry, NS_KEY, k->str, (size_t)k->len);
            if (e) ttl_violation(a, inst, k, e, r->integer);
        } else {
            fprintf(stderr, "keygate audit: %s: PTTL: %s\n", a->where,
                    r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            rc = -1;
        }
        freeReplyObject(r);
    }
    return rc;
}

/* Check one SCAN batch. 0, or -1 on a connection/reply error (printed). */
static int check_batch(struct audit *a, struct syncconn *c, int inst, redisReply **keys, size_t nkeys)
{
    size_t idx[PTTL_BATCH], n = 0;
    for (size_t i = 0; i < nkeys; i++) {
        const redisReply *k = keys[i];
        if (k->type != REDIS_REPLY_STRING) continue;
        a->scanned[inst]++;
        if (a->db != 0)
            violation(a, inst, k->str, (size_t)k->len, AUDIT_OUTSIDE_DB0, "outside db 0: keygate serves db 0 only");
        const struct namespace_entry *e = registry_lookup(a->cfg->registry, NS_KEY, k->str, (size_t)k->len);
        if (!e && a->cfg->registry->dflt) { /* the default line takes it: counted, held to its rules */
            e = a->cfg->registry->dflt;
            a->unregistered++;
        }
        if (!e) {
            violation(a, inst, k->str, (size_t)k->len, AUDIT_NO_NAMESPACE, "no namespace");
            continue;
        }
        if (e->instance != inst)
            violation(a, inst, k->str, (size_t)k->len, AUDIT_WRONG_INSTANCE,
                      "wrong instance: namespace '%s' lives on '%s'", e->is_default ? REGISTRY_DEFAULT_NAME : e->prefix,
                      a->cfg->instance_names[e->instance]);
        if (e->ttl_ms > 0 || e->max_ttl_ms > 0) {
            idx[n++] = i;
            if (n == PTTL_BATCH) {
                if (check_ttls(a, c, inst, keys, idx, n) != 0) return -1;
                n = 0;
            }
        }
    }
    return n > 0 ? check_ttls(a, c, inst, keys, idx, n) : 0;
}

/* SCAN the selected database of instance inst to its end. 0, or -1 on an error (printed). */
static int audit_db(struct audit *a, struct syncconn *c, int inst)
{
    const char *name = a->where;
    char cursor[32] = "0";
    int rc = 0;
    do {
        const char *argv[4] = {"SCAN", cursor, "COUNT", SCAN_COUNT};
        size_t argvlen[4] = {4, strlen(cursor), 5, strlen(SCAN_COUNT)};
        redisReply *r = syncconn_command(c, 4, argv, argvlen);
        if (!r) {
            fprintf(stderr, "keygate audit: %s db %d: SCAN: %s\n", name, a->db, syncconn_error(c));
            return -1;
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
            r->element[0]->len >= sizeof(cursor) || r->element[1]->type != REDIS_REPLY_ARRAY) {
            fprintf(stderr, "keygate audit: %s db %d: SCAN: %s\n", name, a->db,
                    r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            freeReplyObject(r);
            return -1;
        }
        memcpy(cursor, r->element[0]->str, (size_t)r->element[0]->len + 1);
        rc = check_batch(a, c, inst, r->element[1]->element, r->element[1]->elements);
        if (rc != 0 && syncconn_error(c)[0])
            fprintf(stderr, "keygate audit: %s db %d: %s\n", name, a->db, syncconn_error(c));
        freeReplyObject(r);
    } while (rc == 0 && strcmp(cursor, "0") != 0);
    return rc;
}

/* SELECT db on c. 0, or -1 (printed). */
static int select_db(struct syncconn *c, const char *where, int db)
{
    char num[16];
    snprintf(num, sizeof(num), "%d", db);
    const char *argv[2] = {"SELECT", num};
    size_t argvlen[2] = {6, strlen(num)};
    redisReply *r = syncconn_command(c, 2, argv, argvlen);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (!ok)
        fprintf(stderr, "keygate audit: %s: SELECT %d: %s\n", where, db,
                !r                             ? syncconn_error(c)
                : r->type == REDIS_REPLY_ERROR ? r->str
                                               : "unexpected reply");
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Audit one server of instance inst (the instance's address, or a cluster's primary): db 0, then
 * every other database INFO keyspace lists with keys. 0, or -1 when it could not be reached,
 * listed or scanned (printed). */
static int audit_server(struct audit *a, int inst, const char *host, int port)
{
    const struct instance_conf *ic = &a->cfg->instances[inst];
    char err[256];
    struct syncconn *c = syncconn_open_node(ic, host, port, (int)a->cfg->connect_timeout_ms, NULL, err, sizeof(err));
    if (!c) {
        if (a->node)
            fprintf(stderr, "keygate audit: %s: %s\n", a->where, err);
        else
            fprintf(stderr, "keygate audit: instance '%s' (%s:%d): %s\n", ic->name, host, port, err);
        return -1;
    }
    const char *info_argv[2] = {"INFO", "keyspace"};
    size_t info_len[2] = {4, 8};
    redisReply *info = syncconn_command(c, 2, info_argv, info_len);
    if (!info) {
        fprintf(stderr, "keygate audit: %s: INFO keyspace: %s\n", a->where, syncconn_error(c));
        syncconn_close(c);
        return -1;
    }
    int listed = info->type == REDIS_REPLY_STRING, rc = listed ? 0 : -1;
    if (!listed)
        fprintf(stderr, "keygate audit: %s: INFO keyspace: %s; only db 0 is audited\n", a->where,
                info->type == REDIS_REPLY_ERROR ? info->str : "unexpected reply");
    a->db = 0;
    if (audit_db(a, c, inst) != 0) rc = -1;
    for (int db = rc == 0 ? audit_keyspace_next(info->str, 0) : -1; db > 0 && rc == 0;
         db = audit_keyspace_next(info->str, db)) {
        a->db = db;
        if (select_db(c, a->where, db) != 0 || audit_db(a, c, inst) != 0) rc = -1;
    }
    a->db = 0;
    freeReplyObject(info);
    syncconn_close(c);
    return rc;
}

/* Audit instance inst: its server, its primary as the sentinels name it, or every primary of a cluster (the cluster's slot map from
 * the first seed that answers; a primary that cannot be audited leaves the others audited).
 * 0, or -1 when any part could not be audited (printed). */
static int audit_instance(struct audit *a, int inst)
{
    const struct instance_conf *ic = &a->cfg->instances[inst];
    snprintf(a->where, sizeof(a->where), "instance '%s'", ic->name);
    if (!ic->cluster && !ic->sentinel) return audit_server(a, inst, ic->host, ic->port);
    struct slotmap_node *nodes = xmalloc(SLOTMAP_MAX_NODES * sizeof(*nodes));
    char err[400];
    int n = syncconn_primaries(ic, (int)a->cfg->connect_timeout_ms, NULL, nodes, SLOTMAP_MAX_NODES, err, sizeof(err));
    if (n < 0) {
        fprintf(stderr, "keygate audit: instance '%s' (%s): %s\n", ic->name, ic->cluster ? "a cluster" : "sentinel",
                err);
        free(nodes);
        return -1;
    }
    a->primaries[inst] = n;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char node[SLOTMAP_HOST_MAX + 8];
        snprintf(node, sizeof(node), "%s:%d", nodes[i].host, nodes[i].port);
        a->node = node;
        snprintf(a->where, sizeof(a->where), "instance '%s' node %s", ic->name, node);
        if (audit_server(a, inst, nodes[i].host, nodes[i].port) != 0) rc = -1;
    }
    a->node = NULL;
    free(nodes);
    return rc;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: keygate audit -c FILE [--limit N]\n"
            "  SCAN every database of every instance (every primary of a cluster); print\n"
            "  INSTANCE KEY PROBLEM per key that breaks the registry (keys outside db 0 included;\n"
            "  a cluster's lines end in (node HOST:PORT))\n"
            "  --limit N   print at most N violations (default %d; all are counted)\n"
            "  exit 0 clean, 1 violations found, 2 config or connection errors\n",
            DEFAULT_LIMIT);
}

int audit_main(int argc, char **argv)
{
    const char *path = NULL;
    unsigned long long limit = DEFAULT_LIMIT;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            limit = strtoull(argv[++i], &end, 10);
            if (errno || *end || argv[i][0] == '-' || argv[i][0] == '\0') {
                fprintf(stderr, "keygate audit: --limit wants a number, not '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "keygate audit: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    /* the daemon's start-up warnings (no user lines, ...) are not the audit's business */
    log_min_level = LOG_ERROR;
    struct diag errs = {0};
    struct config *cfg = config_load(path, &errs);
    for (size_t i = 0; i < errs.count; i++) fprintf(stderr, "%s\n", errs.lines[i]);
    diag_free(&errs);
    if (!cfg) return 2;

    struct audit a = {.cfg = cfg, .limit = limit};
    int failed = 0;
    for (size_t i = 0; i < cfg->ninstances; i++)
        if (audit_instance(&a, (int)i) != 0) failed++;

    printf("audit:");
    for (size_t i = 0; i < cfg->ninstances; i++)
        if (cfg->instances[i].cluster)
            printf(" %s %llu keys (%d primaries)%s", cfg->instances[i].name, a.scanned[i], a.primaries[i],
                   i + 1 < cfg->ninstances ? "," : ";");
        else
            printf(" %s %llu keys%s", cfg->instances[i].name, a.scanned[i], i + 1 < cfg->ninstances ? "," : ";");
    printf(" %llu violations", a.violations);
    if (a.violations) {
        const char *sep = " (";
        for (int k = 0; k < AUDIT_KINDS; k++) {
            if (!a.by_kind[k]) continue;
            printf("%s%s %llu", sep, kind_names[k], a.by_kind[k]);
            sep = ", ";
        }
        printf(")");
    }
    if (cfg->registry->dflt) printf("; %llu unregistered keys (taken by the default line)", a.unregistered);
    if (a.violations > a.limit) printf("; first %llu printed (--limit)", a.limit);
    if (failed) printf("; INCOMPLETE: %d instance(s) could not be audited", failed);
    printf("\n");
    fflush(stdout);
    config_free(cfg);
    return failed ? 2 : a.violations ? 1 : 0;
}
