/* topology.c: the backend topology guard: what INFO must say per instance role, and the last result per instance. */
#include "topology.h"

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "util.h"

/* ---- the pure check ---- */

struct problem_buf {
    char *buf;
    size_t len, used;
    int count;
    int full;
};

static void problem_add(struct problem_buf *pb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem_add(struct problem_buf *pb, const char *fmt, ...)
{
    pb->count++;
    if (pb->full || pb->len == 0) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof(line) - 2) n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    line[n] = '\0';
    if (pb->used + (size_t)n + 1 > pb->len) { /* keep whole lines only */
        pb->full = 1;
        return;
    }
    memcpy(pb->buf + pb->used, line, (size_t)n + 1);
    pb->used += (size_t)n;
}

/* The value of `field` in INFO text (a line "field:value"), copied into out; 0 if found, else -1. */
static int info_field(const char *info, const char *field, char *out, size_t outlen)
{
    size_t flen = strlen(field);
    for (const char *line = info; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t llen = end ? (size_t)(end - line) : strlen(line);
        if (llen > 0 && line[llen - 1] == '\r') llen--;
        if (llen > flen && memcmp(line, field, flen) == 0 && line[flen] == ':') {
            size_t vlen = llen - flen - 1;
            if (vlen >= outlen) vlen = outlen - 1;
            memcpy(out, line + flen + 1, vlen);
            out[vlen] = '\0';
            return 0;
        }
        line = end ? end + 1 : NULL;
    }
    return -1;
}

static int policy_evicts(const char *policy)
{
    return strcmp(policy, "allkeys-lru") == 0 || strcmp(policy, "allkeys-lfu") == 0 ||
           strcmp(policy, "allkeys-random") == 0 || strncmp(policy, STR_AND_LEN("volatile-")) == 0;
}

/* The checks; every line starts with who: "instance 'cache'" or "instance 'cache' node H:P:". */
static int topology_check_as(const char *name, const char *who, const char *info, char *problems, size_t len)
{
    struct problem_buf pb = {.buf = problems, .len = len};
    if (len > 0) problems[0] = '\0';
    char version[64], policy[64], maxmem[32];

    if (info_field(info, "redis_version", version, sizeof(version)) != 0) {
        problem_add(&pb, "%s INFO has no redis_version", who);
    } else {
        int major = atoi(version);
        if (major < 7) problem_add(&pb, "%s runs Redis %s, must be 7.0 or newer", who, version);
    }

    if (strcmp(name, "durable") == 0) {
        char aof[16];
        if (info_field(info, "maxmemory_policy", policy, sizeof(policy)) != 0)
            problem_add(&pb, "%s INFO has no maxmemory_policy", who);
        else if (strcmp(policy, "noeviction") != 0)
            problem_add(&pb, "%s maxmemory-policy is %s, must be noeviction", who, policy);
        if (info_field(info, "aof_enabled", aof, sizeof(aof)) != 0)
            problem_add(&pb, "%s INFO has no aof_enabled", who);
        else if (strcmp(aof, "1") != 0)
            problem_add(&pb, "%s has AOF off (aof_enabled:%s), must be appendonly yes", who, aof);
    } else if (strcmp(name, "cache") == 0) {
        if (info_field(info, "maxmemory", maxmem, sizeof(maxmem)) != 0)
            problem_add(&pb, "%s INFO has no maxmemory", who);
        else if (strtoull(maxmem, NULL, 10) == 0)
            problem_add(&pb, "%s has no maxmemory (maxmemory:%s), must have a limit to evict under", who, maxmem);
        if (info_field(info, "maxmemory_policy", policy, sizeof(policy)) != 0)
            problem_add(&pb, "%s INFO has no maxmemory_policy", who);
        else if (!policy_evicts(policy))
            problem_add(&pb,
                        "%s maxmemory-policy is %s, must evict (allkeys-lru, allkeys-lfu, "
                        "allkeys-random or volatile-*)",
                        who, policy);
    }
    /* a replica that cannot take over: Sentinel may still promote it, and it would lose what it lacks */
    char role[16];
    if (info_field(info, "role", role, sizeof(role)) == 0 && strcmp(role, "slave") == 0) {
        char sync[8], link[16];
        if (info_field(info, "master_sync_in_progress", sync, sizeof(sync)) == 0 && strcmp(sync, "1") == 0)
            problem_add(&pb,
                        "%s is a replica whose first sync has not finished (master_sync_in_progress:1): promoted now, "
                        "it would lose every write it lacks",
                        who);
        else if (info_field(info, "master_link_status", link, sizeof(link)) == 0 && strcmp(link, "up") != 0)
            problem_add(&pb,
                        "%s is a replica whose link to its primary is %s (master_link_status): promoted now, it would "
                        "lose the writes it missed",
                        who, link);
    }
    return pb.count;
}

int topology_check(const char *name, const char *info, char *problems, size_t len)
{
    char who[160];
    snprintf(who, sizeof(who), "instance '%s'", name);
    return topology_check_as(name, who, info, problems, len);
}

int topology_check_node(const char *name, const char *addr, const char *info, char *problems, size_t len)
{
    char who[160 + TOPOLOGY_NODE_ADDR_MAX];
    snprintf(who, sizeof(who), "instance '%s' node %s:", name, addr);
    return topology_check_as(name, who, info, problems, len);
}

/* The capacity fields: INFO name -> where it goes (a u64, or a flag set when the value is `flag_value`). */
static const struct capacity_field {
    const char *name;
    size_t offset;
    const char *flag_value; /* NULL: a number */
} capacity_fields[] = {
    {"used_memory", offsetof(struct topology_capacity, used_memory), NULL},
    {"maxmemory", offsetof(struct topology_capacity, maxmemory), NULL},
    {"evicted_keys", offsetof(struct topology_capacity, evicted_keys), NULL},
    {"expired_keys", offsetof(struct topology_capacity, expired_keys), NULL},
    {"keyspace_hits", offsetof(struct topology_capacity, keyspace_hits), NULL},
    {"keyspace_misses", offsetof(struct topology_capacity, keyspace_misses), NULL},
    {"connected_clients", offsetof(struct topology_capacity, connected_clients), NULL},
    {"instantaneous_ops_per_sec", offsetof(struct topology_capacity, ops_per_sec), NULL},
    {"aof_enabled", offsetof(struct topology_capacity, aof_enabled), "1"},
    {"aof_last_write_status", offsetof(struct topology_capacity, aof_last_write_ok), "ok"},
    {"aof_last_bgrewrite_status", offsetof(struct topology_capacity, aof_last_rewrite_ok), "ok"},
};

int topology_parse_capacity(const char *info, struct topology_capacity *out)
{
    memset(out, 0, sizeof(*out));
    int memory = 0;
    for (size_t f = 0; f < sizeof(capacity_fields) / sizeof(capacity_fields[0]); f++) {
        const struct capacity_field *cf = &capacity_fields[f];
        char value[32];
        if (info_field(info, cf->name, value, sizeof(value)) != 0) continue;
        char *field = (char *)out + cf->offset;
        if (cf->flag_value)
            *(int *)(void *)field = strcmp(value, cf->flag_value) == 0;
        else
            *(uint64_t *)(void *)field = strtoull(value, NULL, 10);
        if (f < 2) memory = 1; /* used_memory, maxmemory */
    }
    if (info_field(info, "role", out->role, sizeof(out->role)) != 0) out->role[0] = '\0';
    if (!memory) {
        memset(out, 0, sizeof(*out));
        return -1;
    }
    out->valid = 1;
    return 0;
}

double topology_headroom(const struct topology_capacity *c)
{
    if (c->maxmemory == 0) return -1;
    if (c->used_memory >= c->maxmemory) return 0;
    return (double)(c->maxmemory - c->used_memory) / (double)c->maxmemory;
}

/* ---- the recorded results: written by workers at connect, read by the admin endpoint ---- */

struct topology_slot {
    int checked;
    char problems[TOPOLOGY_PROBLEMS_MAX];
    struct topology_capacity capacity;
    struct topology_node *nodes; /* a cluster instance: its primaries (SLOTMAP_MAX_NODES, allocated at
                                    its first round; kept for the process's life) */
    int nnodes;
};

static pthread_mutex_t topology_lock = PTHREAD_MUTEX_INITIALIZER;
static struct topology_slot topology_slots[CONFIG_MAX_INSTANCES];

/* Log every line of `problems` as a warning. */
static void log_problems(const char *problems)
{
    for (const char *line = problems; *line;) {
        const char *end = strchr(line, '\n');
        int n = end ? (int)(end - line) : (int)strlen(line);
        log_event(LOG_WARN, "topology_problem", NULL, "topology: %.*s", n, line);
        line = end ? end + 1 : line + n;
    }
}

void topology_record(struct proxy *p, int instance, const char *problems)
{
    (void)p;
    if (instance < 0 || instance >= CONFIG_MAX_INSTANCES) return;
    if (!problems) problems = "";
    char was[TOPOLOGY_PROBLEMS_MAX];
    pthread_mutex_lock(&topology_lock);
    struct topology_slot *s = &topology_slots[instance];
    int was_checked = s->checked;
    memcpy(was, s->problems, sizeof(was));
    snprintf(s->problems, sizeof(s->problems), "%s", problems);
    s->checked = 1;
    int changed = !was_checked || strcmp(was, s->problems) != 0;
    pthread_mutex_unlock(&topology_lock);
    if (!changed) return;
    if (problems[0])
        log_problems(problems);
    else if (was[0]) { /* the old lines start "instance 'NAME' ..." */
        const char *q = strchr(was, '\'');
        const char *e = q ? strchr(q + 1, '\'') : NULL;
        log_event(LOG_INFO, "topology_ok", NULL, "topology: instance '%.*s' is now configured as its role requires",
                  e ? (int)(e - q - 1) : 0, e ? q + 1 : "");
    }
}

/* Keep `cap` as the latest capacity reading of `instance`, stamped now. */
static void topology_record_capacity(int instance, const struct topology_capacity *cap)
{
    if (instance < 0 || instance >= CONFIG_MAX_INSTANCES) return;
    pthread_mutex_lock(&topology_lock);
    topology_slots[instance].capacity = *cap;
    topology_slots[instance].capacity.read_ms = clock_mono_ms();
    pthread_mutex_unlock(&topology_lock);
}

void topology_record_cluster(struct proxy *p, int instance, const struct topology_node *nodes, int n,
                             const char *problems)
{
    if (instance < 0 || instance >= CONFIG_MAX_INSTANCES) return;
    if (n > SLOTMAP_MAX_NODES) n = SLOTMAP_MAX_NODES;
    pthread_mutex_lock(&topology_lock);
    struct topology_slot *s = &topology_slots[instance];
    if (!s->nodes) s->nodes = xcalloc(SLOTMAP_MAX_NODES, sizeof(*s->nodes));
    if (n > 0) memcpy(s->nodes, nodes, (size_t)n * sizeof(*nodes));
    s->nnodes = n;
    pthread_mutex_unlock(&topology_lock);
    topology_record(p, instance, problems);
}

int topology_get_nodes(const struct proxy *p, int instance, struct topology_node *out, int max)
{
    (void)p;
    if (instance < 0 || instance >= CONFIG_MAX_INSTANCES) return 0;
    pthread_mutex_lock(&topology_lock);
    const struct topology_slot *s = &topology_slots[instance];
    int n = s->nnodes < max ? s->nnodes : max;
    if (n > 0) memcpy(out, s->nodes, (size_t)n * sizeof(*out));
    pthread_mutex_unlock(&topology_lock);
    return n;
}

void topology_get_capacity(const struct proxy *p, int instance, struct topology_capacity *out)
{
    (void)p;
    memset(out, 0, sizeof(*out));
    if (instance < 0 || instance >= CONFIG_MAX_INSTANCES) return;
    pthread_mutex_lock(&topology_lock);
    *out = topology_slots[instance].capacity;
    pthread_mutex_unlock(&topology_lock);
}

int topology_info_loading(const char *text)
{
    return strncmp(text, "loading:1", 9) == 0 || strstr(text, "\nloading:1") != NULL;
}

int topology_on_info_text(struct proxy *p, int instance, const char *name, const char *text)
{
    if (topology_info_loading(text)) return 1; /* its fields are not final yet: asked again */
    char problems[TOPOLOGY_PROBLEMS_MAX];
    topology_check(name, text, problems, sizeof(problems));
    struct topology_capacity cap;
    if (topology_parse_capacity(text, &cap) == 0) topology_record_capacity(instance, &cap);
    topology_record(p, instance, problems);
    return 0;
}

int topology_on_info_reply(struct proxy *p, int instance, const char *name, const char *reply, size_t len)
{
    char problems[TOPOLOGY_PROBLEMS_MAX];
    if (len >= 4 && reply[0] == '$') {
        size_t blen = 0, i = 1; /* "$N\r\n", read within len: reply is not NUL-terminated */
        while (i < len && i < 19 && reply[i] >= '0' && reply[i] <= '9') blen = blen * 10 + (size_t)(reply[i++] - '0');
        size_t hdr = i + 2;
        if (i > 1 && hdr <= len && reply[i] == '\r' && blen <= len - hdr) {
            char *text = xmalloc(blen + 1);
            memcpy(text, reply + hdr, blen);
            text[blen] = '\0';
            char cluster[8];
            /* a cluster node's: which node is not known here; the INFO poller checks each by name */
            int loading =
                info_field(text, "cluster_enabled", cluster, sizeof(cluster)) == 0 && strcmp(cluster, "1") == 0
                    ? 0
                    : topology_on_info_text(p, instance, name, text);
            free(text);
            return loading;
        }
    }
    size_t n = len;
    while (n > 0 && (reply[n - 1] == '\r' || reply[n - 1] == '\n')) n--;
    if (n > 200) n = 200;
    if (n > 0 && reply[0] == '-')
        snprintf(problems, sizeof(problems), "instance '%s' INFO failed: %.*s\n", name, (int)n - 1, reply + 1);
    else
        snprintf(problems, sizeof(problems), "instance '%s' INFO gave no text (%.*s)\n", name, (int)n, reply);
    topology_record(p, instance, problems);
    return 0;
}

int topology_get(const struct proxy *p, int instance, char *buf, size_t len)
{
    (void)p;
    if (len > 0) buf[0] = '\0';
    if (instance < 0 || instance >= CONFIG_MAX_INSTANCES) return 0;
    pthread_mutex_lock(&topology_lock);
    int checked = topology_slots[instance].checked;
    if (len > 0) snprintf(buf, len, "%s", topology_slots[instance].problems);
    pthread_mutex_unlock(&topology_lock);
    return checked;
}

void topology_reset(void)
{
    pthread_mutex_lock(&topology_lock);
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++) free(topology_slots[i].nodes);
    memset(topology_slots, 0, sizeof(topology_slots));
    pthread_mutex_unlock(&topology_lock);
}
