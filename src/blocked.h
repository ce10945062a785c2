/* blocked.h: the keygate clients blocked in a command on a dedicated connection, process-wide, for CLIENT UNBLOCK from any worker thread. */
#ifndef KEYGATE_BLOCKED_H
#define KEYGATE_BLOCKED_H

#include <pthread.h>
#include <stdint.h>

/*
 * One lock for the whole table, taken only when a blocking command starts or ends and for
 * CLIENT UNBLOCK (never for other requests): entries are hashed by keygate client id. A
 * worker adds its client when the command goes to its dedicated connection, sets the
 * connection's backend id when its CLIENT ID reply comes (it may come after), and removes
 * the client when the command answered, failed or its client went away. CLIENT UNBLOCK, from
 * any worker, claims an entry: it learns where to send the backend's CLIENT UNBLOCK, and the
 * owning worker, when it removes the entry, learns that the connection must not be reused.
 */
#define BLOCKED_BUCKETS 1024 /* a power of two */

struct blocked_entry;

struct blocked_table {
    pthread_mutex_t lock;
    struct blocked_entry *bucket[BLOCKED_BUCKETS];
};

/* An empty table. */
void blocked_init(struct blocked_table *t);

/* Free every entry left (at exit, after the workers stopped). */
void blocked_free(struct blocked_table *t);

/* Client `client_id`, logged in as `user` (NULL: no users configured), blocks on a dedicated
 * connection of `instance` whose backend CLIENT ID is server_id (0: not known yet). */
void blocked_add(struct blocked_table *t, uint64_t client_id, const char *user, int instance, long long server_id);

/* The dedicated connection of client_id's blocking command learnt its backend id. */
void blocked_set_server_id(struct blocked_table *t, uint64_t client_id, long long server_id);

/* client_id's blocking command ended: its entry goes. 1 when a CLIENT UNBLOCK was sent for it
 * meanwhile (its connection must then be closed, not reused), else 0 (also when none). */
int blocked_remove(struct blocked_table *t, uint64_t client_id);

/* What blocked_claim found. */
enum blocked_claim_result {
    BLOCKED_NONE = 0, /* no blocked client of that id and user */
    BLOCKED_CLAIMED,  /* blocked: the UNBLOCK counts as sent, *instance and *server_id say where */
    BLOCKED_PENDING,  /* blocked, on a new connection whose CLIENT ID reply has not come yet: ask again */
};

/* CLIENT UNBLOCK client_id, asked by `user` (NULL: no users configured): is that client blocked,
 * logged in as the same user, and is its connection's backend id known? */
enum blocked_claim_result blocked_claim(struct blocked_table *t, uint64_t client_id, const char *user, int *instance,
                                        long long *server_id);

#endif
