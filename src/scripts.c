/* scripts.c: the Lua scripts keygate saw go to a cluster, process-wide and bounded (scripts.h). */
#include "scripts.h"

#include <assert.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct scripts_entry {
    struct scripts_entry *next;          /* in its bucket */
    struct scripts_entry *older, *newer; /* the recency list */
    uint8_t sha[SCRIPTS_SHA_LEN];
    size_t len;
    char body[]; /* len bytes */
};

void scripts_init(struct scripts_table *t, size_t max_count, size_t max_bytes)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    t->max_count = max_count;
    t->max_bytes = max_bytes;
}

void scripts_free(struct scripts_table *t)
{
    struct scripts_entry *e = t->oldest;
    while (e) {
        struct scripts_entry *next = e->newer;
        free(e);
        e = next;
    }
    pthread_mutex_destroy(&t->lock);
    memset(t, 0, sizeof(*t));
}

void scripts_sha1(const char *body, size_t len, uint8_t sha[SCRIPTS_SHA_LEN])
{
    SHA1((const unsigned char *)body, len, sha);
}

static int scripts_hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int scripts_sha_parse(const char *hex, size_t len, uint8_t sha[SCRIPTS_SHA_LEN])
{
    if (len != 2 * SCRIPTS_SHA_LEN) return -1;
    for (size_t i = 0; i < SCRIPTS_SHA_LEN; i++) {
        int hi = scripts_hex_digit(hex[2 * i]), lo = scripts_hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        sha[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* The bucket link that holds (or would hold) the script named sha. Under the lock. */
static struct scripts_entry **scripts_slot(struct scripts_table *t, const uint8_t *sha)
{
    uint32_t h;
    memcpy(&h, sha, sizeof(h)); /* a SHA1's bytes are spread evenly */
    struct scripts_entry **e = &t->bucket[h & (SCRIPTS_BUCKETS - 1)];
    while (*e && memcmp((*e)->sha, sha, SCRIPTS_SHA_LEN) != 0) e = &(*e)->next;
    return e;
}

static void scripts_unlink_recency(struct scripts_table *t, struct scripts_entry *e)
{
    if (e->older)
        e->older->newer = e->newer;
    else
        t->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        t->newest = e->older;
    e->older = e->newer = NULL;
}

static void scripts_link_newest(struct scripts_table *t, struct scripts_entry *e)
{
    e->older = t->newest;
    e->newer = NULL;
    if (t->newest)
        t->newest->newer = e;
    else
        t->oldest = e;
    t->newest = e;
}

/* The least recent script goes. Under the lock; the table is not empty. */
static void scripts_evict_oldest(struct scripts_table *t)
{
    struct scripts_entry *e = t->oldest;
    struct scripts_entry **at = scripts_slot(t, e->sha);
    assert(*at == e);
    *at = e->next;
    scripts_unlink_recency(t, e);
    t->count--;
    t->bytes -= e->len;
    free(e);
}

int scripts_remember(struct scripts_table *t, const char *body, size_t len)
{
    if (len > t->max_bytes || t->max_count == 0) return -1;
    uint8_t sha[SCRIPTS_SHA_LEN];
    scripts_sha1(body, len, sha); /* outside the lock */
    pthread_mutex_lock(&t->lock);
    struct scripts_entry **at = scripts_slot(t, sha);
    if (*at) {
        scripts_unlink_recency(t, *at);
        scripts_link_newest(t, *at);
        pthread_mutex_unlock(&t->lock);
        return 0;
    }
    while (t->count > 0 && (t->count + 1 > t->max_count || t->bytes + len > t->max_bytes)) scripts_evict_oldest(t);
    struct scripts_entry *e = xmalloc(sizeof(*e) + len);
    memcpy(e->sha, sha, SCRIPTS_SHA_LEN);
    e->len = len;
    memcpy(e->body, body, len);
    at = scripts_slot(t, sha); /* evictions may have changed its chain */
    e->next = NULL;
    *at = e;
    scripts_link_newest(t, e);
    t->count++;
    t->bytes += len;
    pthread_mutex_unlock(&t->lock);
    return 1;
}

int scripts_known(struct scripts_table *t, const uint8_t sha[SCRIPTS_SHA_LEN])
{
    pthread_mutex_lock(&t->lock);
    int known = *scripts_slot(t, sha) != NULL;
    pthread_mutex_unlock(&t->lock);
    return known;
}

int scripts_write_load(struct scripts_table *t, const uint8_t sha[SCRIPTS_SHA_LEN], struct bytebuf *out,
                       size_t *body_len)
{
    pthread_mutex_lock(&t->lock);
    const struct scripts_entry *e = *scripts_slot(t, sha);
    if (e) {
        bytebuf_add(out, STR_AND_LEN("*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n"));
        bytebuf_add_bulk(out, e->body, e->len);
        if (body_len) *body_len = e->len;
    }
    pthread_mutex_unlock(&t->lock);
    return e != NULL;
}

enum scripts_command scripts_command_of(const char *name, size_t len)
{
    if ((len == 4 && strncasecmp(name, "eval", 4) == 0) || (len == 7 && strncasecmp(name, "eval_ro", 7) == 0))
        return SCRIPTS_EVAL;
    if ((len == 7 && strncasecmp(name, "evalsha", 7) == 0) || (len == 10 && strncasecmp(name, "evalsha_ro", 10) == 0))
        return SCRIPTS_EVALSHA;
    if (len == 6 && strncasecmp(name, "script", 6) == 0) return SCRIPTS_SCRIPT;
    return SCRIPTS_OTHER;
}
