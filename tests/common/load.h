/* load.h: the client load the cluster and Sentinel suites run through keygate while they move slots or kill primaries: 20 threads of pipelined batches, every reply checked against what its thread knows. */
#ifndef KEYGATE_LOAD_H
#define KEYGATE_LOAD_H

#include <pthread.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

/*
 * Thread T sends batches, pipelined, and reads every reply before the next batch (one batch in
 * flight per thread): SET c:ld:T:i, INCR n:ctr:T:j (a namespace without TTL), INCR c:ctr:T:j
 * (TTL-wrapped by keygate: MULTI/INCR/PEXPIRE/EXEC), GET c:ld:T:i, with `reread` a GET of an
 * earlier key, and every 4th batch the client's own transaction MULTI / INCR M:ctr / SET M:last i
 * / EXEC (M: load_opts.multi_key). Every reply is checked against what the thread knows (INCR:
 * its count + 1, up to the errors that may have run; below it, a regression: an acknowledged
 * increment lost); anything else is a client-visible error. Threads make no Check assertion:
 * the test asserts on their counts once load_stop joined them.
 */

#define LOAD_THREADS 20
#define LOAD_COUNTERS 4
#define LOAD_MAX_BATCH 9 /* commands in one batch, at most */

struct load_opts {
    redisContext *(*connect)(void); /* a new client to keygate; NULL when it cannot connect */
    const char *multi_key;          /* the transaction's key prefix, a format of the thread id: "c:{m%d}" */
    int reread;                     /* each batch also GETs an earlier SET's key */
    int lossy; /* a counter may answer below its count (a failover lost writes): a regression, not an error */
};

struct load_thread {
    int id;
    pthread_t thread;
    long long batches;    /* completed (atomic: load_wait_batches) */
    long long sets;       /* SETs sent: keys c:ld:ID:0 .. sets-1 */
    long long sets_done;  /* SETs whose batch completed (atomic: snapshots) */
    unsigned char *acked; /* acked[i]: SET i answered +OK */
    size_t cap;
    long long incr[2][LOAD_COUNTERS];     /* acknowledged INCRs of n:ctr:ID:j and c:ctr:ID:j (atomic) */
    long long incr_err[2][LOAD_COUNTERS]; /* INCRs answered with an error (they may have run) */
    long long multi, multi_err;           /* acknowledged / failed MULTI ... EXEC (atomic) */
    long long gets, lost_reads;           /* GETs; nil for a key whose SET was acknowledged */
    long long nil_reads[16];              /* SET indexes of the first such nil GETs */
    long long regressions;                /* lossy: INCRs answered below the count + 1 */
    long long readonly;                   /* -READONLY answers seen */
    long long errors, error_batches, errors_after_mark;
    long long first_error_ms, last_error_done_ms; /* since the load began */
    long long error_sent_ms[2];                   /* when the first two failed batches were sent */
    long long prev_done_ms, max_stall_ms, stall_end_ms;
    char first_error[256];
    char first_regression[128];
};

/* The threads of the load running (or last run): read after load_stop, or through load_get. */
extern struct load_thread load_threads[LOAD_THREADS];

/* An atomic counter of a running thread (batches, sets_done, incr, multi). */
long long load_get(const long long *v);

/* Start the LOAD_THREADS threads (o is copied). */
void load_start(const struct load_opts *o);

/* Wait (timeout_ms) until every thread completed `more` batches after this call; fails the test
 * naming `what` otherwise. */
void load_wait_batches(int more, int timeout_ms, const char *what);

/* From now on, errors in batches sent count as errors_after_mark too. */
void load_mark(void);

/* Milliseconds since load_start. */
long long load_elapsed_ms(void);

/* Stop the threads and join them. */
void load_stop(void);

/* Free what the threads kept (after load_stop). */
void load_free(void);

struct load_sum {
    long long batches, sets, acked, incrs, multis, gets, lost_reads, regressions, readonly, errors, errors_after_mark,
        max_error_batches, max_stall_ms, stall_end_ms, last_error_done_ms;
};

/* The threads' counts added up (after load_stop); each thread's errors and regressions printed. */
struct load_sum load_sum(void);

/* The counts acknowledged so far (a snapshot of a running load). */
struct load_snap {
    long long incr[LOAD_THREADS][2][LOAD_COUNTERS], multi[LOAD_THREADS], sets_done[LOAD_THREADS];
};
void load_snap_take(struct load_snap *snap);

#define LOAD_NCOUNTERS (2 * LOAD_COUNTERS + 1) /* counters a thread keeps */

/* Counter m (0 .. LOAD_NCOUNTERS - 1) of thread id, as a key (malloc'd): n:ctr:ID:j for m <
 * LOAD_COUNTERS, c:ctr:ID:j up to 2 * LOAD_COUNTERS, then the transaction's M:ctr. */
char *load_counter_key(int id, int m);

/* Counter m of thread t: acknowledged and errored increments. */
long long load_counter_acked(const struct load_thread *t, int m);
long long load_counter_errors(const struct load_thread *t, int m);

/* Counter m of thread k in snap. */
long long load_snap_counter(const struct load_snap *snap, int k, int m);

/* The keys of every acknowledged SET (c:ld:T:i), malloc'd like the array; *n of them. */
char **load_acked_set_keys(long long *n);

#endif
