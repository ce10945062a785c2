/* blocked.c: the keygate clients blocked in a command on a dedicated connection, process-wide, for CLIENT UNBLOCK from any worker thread. */
#include "blocked.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

struct blocked_entry {
    struct blocked_entry *next; /* in its bucket */
    uint64_t client_id;
    char *user; /* NULL without users */
    int instance;
    long long server_id; /* 0: not known yet */
    int unblock_sent;
};

static struct blocked_entry **blocked_slot(struct blocked_table *t, uint64_t client_id)
{
    struct blocked_entry **e = &t->bucket[client_id & (BLOCKED_BUCKETS - 1)];
    while (*e && (*e)->client_id != client_id) e = &(*e)->next;
    return e;
}

void blocked_init(struct blocked_table *t)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
}

void blocked_free(struct blocked_table *t)
{
    for (size_t i = 0; i < BLOCKED_BUCKETS; i++) {
        while (t->bucket[i]) {
            struct blocked_entry *e = t->bucket[i];
            t->bucket[i] = e->next;
            free(e->user);
            free(e);
        }
    }
    pthread_mutex_destroy(&t->lock);
}

void blocked_add(struct blocked_table *t, uint64_t client_id, const char *user, int instance, long long server_id)
{
    struct blocked_entry *e = xcalloc(1, sizeof(*e));
    e->client_id = client_id;
    e->user = user ? xstrdup(user) : NULL;
    e->instance = instance;
    e->server_id = server_id;
    pthread_mutex_lock(&t->lock);
    struct blocked_entry **slot = blocked_slot(t, client_id);
    if (*slot) { /* cannot happen (a client blocks once at a time): keep the table consistent anyway */
        struct blocked_entry *old = *slot;
        *slot = old->next;
        free(old->user);
        free(old);
        slot = blocked_slot(t, client_id);
    }
    e->next = NULL;
    *slot = e;
    pthread_mutex_unlock(&t->lock);
}

void blocked_set_server_id(struct blocked_table *t, uint64_t client_id, long long server_id)
{
    pthread_mutex_lock(&t->lock);
    struct blocked_entry *e = *blocked_slot(t, client_id);
    if (e) e->server_id = server_id;
    pthread_mutex_unlock(&t->lock);
}

int blocked_remove(struct blocked_table *t, uint64_t client_id)
{
    pthread_mutex_lock(&t->lock);
    struct blocked_entry **slot = blocked_slot(t, client_id), *e = *slot;
    int sent = 0;
    if (e) {
        *slot = e->next;
        sent = e->unblock_sent;
    }
    pthread_mutex_unlock(&t->lock);
    if (e) {
        free(e->user);
        free(e);
    }
    return sent;
}

enum blocked_claim_result blocked_claim(struct blocked_table *t, uint64_t client_id, const char *user, int *instance,
                                        long long *server_id)
{
    enum blocked_claim_result found = BLOCKED_NONE;
    pthread_mutex_lock(&t->lock);
    struct blocked_entry *e = *blocked_slot(t, client_id);
    if (e && (!user || (e->user && strcmp(e->user, user) == 0))) {
        found = e->server_id > 0 ? BLOCKED_CLAIMED : BLOCKED_PENDING;
        if (found == BLOCKED_CLAIMED) {
            e->unblock_sent = 1;
            *instance = e->instance;
            *server_id = e->server_id;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return found;
}
