/* scripts.h: the Lua scripts keygate saw go to a cluster (SCRIPT LOAD and EVAL bodies), process-wide and bounded, so that a node's -NOSCRIPT can be answered by loading the script there (router.c). */
#ifndef KEYGATE_SCRIPTS_H
#define KEYGATE_SCRIPTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/*
 * One table for every worker thread, under one lock, taken only for a script command on a
 * cluster instance (EVAL, EVAL_RO, SCRIPT LOAD: remember the body; -NOSCRIPT: find it). Entries
 * are hashed by their SHA1, the name Redis gives the script. Bounded by count and bytes (the
 * bodies): past either bound the script seen least recently goes (seeing a script again, by EVAL
 * or SCRIPT LOAD, makes it the most recent). A body larger than the byte bound is not kept.
 */
#define SCRIPTS_MAX_COUNT 1024
#define SCRIPTS_MAX_BYTES (16u * 1024 * 1024)
#define SCRIPTS_BUCKETS 2048 /* a power of two */
#define SCRIPTS_SHA_LEN 20

struct scripts_entry;

struct scripts_table {
    pthread_mutex_t lock;
    struct scripts_entry *bucket[SCRIPTS_BUCKETS];
    struct scripts_entry *oldest, *newest; /* seen least / most recently */
    size_t count, bytes;                   /* held now: scripts, bytes of their bodies */
    size_t max_count, max_bytes;
};

/* An empty table bounded by max_count scripts and max_bytes of bodies (SCRIPTS_MAX_*). */
void scripts_init(struct scripts_table *t, size_t max_count, size_t max_bytes);

/* Free every script (at exit, after the workers stopped). */
void scripts_free(struct scripts_table *t);

/* The SHA1 of body[0..len): Redis's name of the script. */
void scripts_sha1(const char *body, size_t len, uint8_t sha[SCRIPTS_SHA_LEN]);

/* A script's name as a client writes it (40 hex digits, either case: Redis lowers them) into
 * sha. 0, or -1 when hex[0..len) is not one. */
int scripts_sha_parse(const char *hex, size_t len, uint8_t sha[SCRIPTS_SHA_LEN]);

/*
 * Remember body[0..len) (copied) as the most recent script, the least recent ones going while
 * the table is over its bounds. Returns 1 when it was new, 0 when known already (it becomes the
 * most recent), -1 when it is larger than the byte bound (not kept).
 */
int scripts_remember(struct scripts_table *t, const char *body, size_t len);

/* Is the script named sha held? */
int scripts_known(struct scripts_table *t, const uint8_t sha[SCRIPTS_SHA_LEN]);

/* Append SCRIPT LOAD <body> (RESP) of the script named sha to out, and its body's length to
 * *body_len (may be NULL); returns 1, or 0 when the script is not held (nothing appended). */
int scripts_write_load(struct scripts_table *t, const uint8_t sha[SCRIPTS_SHA_LEN], struct bytebuf *out,
                       size_t *body_len) __attribute__((warn_unused_result));

/* What a command's name (argv[0], any case) is to the table. */
enum scripts_command {
    SCRIPTS_OTHER = 0,
    SCRIPTS_EVAL,    /* EVAL, EVAL_RO: argv[1] is a body to remember */
    SCRIPTS_EVALSHA, /* EVALSHA, EVALSHA_RO: argv[1] names a script; its -NOSCRIPT may load it */
    SCRIPTS_SCRIPT,  /* SCRIPT: SCRIPT LOAD's argv[2] is a body to remember */
};
enum scripts_command scripts_command_of(const char *name, size_t len);

#endif
