/* history.h: what a chaos run records (every operation with its start, end and result; every fault with its window), the input of the checker. */
#ifndef KEYGATE_CHAOS_HISTORY_H
#define KEYGATE_CHAOS_HISTORY_H

#include <stddef.h>

/*
 * Times are microseconds since the run began (CLOCK_MONOTONIC). A key is an index into the
 * run's key table; a node is an index into its keygates, or HIST_DIRECT for a read straight
 * from the backend redis-server (the lost-write check).
 *
 * Values: each key's writer writes strictly increasing sequence numbers 1, 2, 3, ... (a
 * string holds n; a hash holds fields v=n and w=n; a set holds the members n-W+1 .. n, W =
 * the checker's set_window). A read's value is the sequence number it shows (0: the key
 * does not exist yet), SISMEMBER's the 0/1 answer for the member in arg.
 */

#define HIST_DIRECT (-1) /* node of a read made directly on the backend */
#define HIST_GLOBAL (-1) /* node of a fault that touches every keygate */
#define HIST_MAX_OP_KEYS 4

enum hist_op_kind {
    HOP_SET = 0,   /* write: SET k n */
    HOP_HSET,      /* write: HSET k v n w n */
    HOP_SADD,      /* write: MULTI / SADD k n / SREM k n-W n-W-1 ... n-W-16 / EXEC */
    HOP_GET,       /* read */
    HOP_MGET,      /* read: several string keys, value[i] for key[i] */
    HOP_HGET,      /* read: HGET k v */
    HOP_HGETALL,   /* read: v and w must agree (else the runner records HST_BAD) */
    HOP_SISMEMBER, /* read: SISMEMBER k arg, value 0 or 1 */
    HOP_SMEMBERS,  /* read: value = the largest member */
    HOP_INCR,      /* write on a counter key: INCR k, value[0] its reply (0 when it failed) */
    HOP_NKINDS
};

enum hist_status {
    HST_OK = 0,
    HST_ERR_REPLY,   /* an error reply (-ERR, -UNAVAILABLE, ...) */
    HST_ERR_TIMEOUT, /* no reply within the client's timeout */
    HST_ERR_CONN,    /* connect refused or failed, connection reset or closed */
    HST_BAD,         /* a reply of the wrong shape or value (a torn HGETALL, a non-number): never explained */
    HST_NKINDS
};

struct hist_op {
    int kind;   /* enum hist_op_kind */
    int node;   /* keygate index, or HIST_DIRECT */
    int final;  /* 1: a read of the lost-write check (after the faults were healed and things settled) */
    int status; /* enum hist_status */
    long long start_us, end_us;
    int nkeys;
    int key[HIST_MAX_OP_KEYS];
    long long value[HIST_MAX_OP_KEYS]; /* a write: value[0] is its sequence number; a read: what it shows */
    long long arg;                     /* HOP_SISMEMBER: the member asked about */
    int thread;                        /* the client thread that ran it (for messages) */
    char err[112];                     /* the error's text when status != HST_OK */
};

enum hist_fault_kind {
    HF_STOP = 0,         /* SIGSTOP a keygate, SIGCONT it after the planned time */
    HF_KILL_STREAM,      /* CLIENT KILL of a keygate's stream reader connections (keygate-nearcache-<pid>) */
    HF_DEL_STREAM,       /* DEL of an invalidation stream (global) */
    HF_TRIM_STREAM,      /* XTRIM of a stream to MAXLEN 1 (global) */
    HF_RESTART,          /* a keygate stopped (SIGTERM or SIGKILL) and started again */
    HF_SLOW_LINK,        /* the delay proxy between one keygate and the durable redis-server delays every byte */
    HF_RELOAD,           /* one keygate's registry rewritten and SIGHUPed, then put back (global) */
    HF_WRONGTYPE_STREAM, /* opt-in: a stream replaced by a string for a while, so every XADD fails (global) */
    HF_FAILOVER,         /* Sentinel topology: SENTINEL FAILOVER sent to a random sentinel (planned; global); cluster
                            topology: CLUSTER FAILOVER sent to a replica (planned: the primary's writes are paused) */
    HF_KILL_PRIMARY,  /* Sentinel or cluster: SIGKILL of a primary, started again once another is promoted (global) */
    HF_STOP_PRIMARY,  /* Sentinel or cluster: SIGSTOP of a primary for a while, then SIGCONT (global) */
    HF_STOP_SENTINEL, /* Sentinel topology: SIGSTOP of a sentinel for a while, then SIGCONT (global) */
    HF_RESHARD,       /* cluster topology: slots moved between primaries (SETSLOT / MIGRATE) under load (global) */
    HF_ADD_NODE,      /* cluster topology: a primary and its replica added, given slots, emptied and removed (global) */
    HF_DEAD_SLOTS,    /* cluster topology: a primary and its replica both SIGSTOPped for a while: a slot range dead */
    HF_NKINDS
};

struct hist_fault {
    int kind;                   /* enum hist_fault_kind */
    int node;                   /* the keygate it touches, or HIST_GLOBAL */
    long long start_us, end_us; /* from the fault's start to its heal's end */
    char what[160];             /* a description for messages: "SIGSTOP kg1 for 1300 ms" */
};

/* What a key holds (struct history's key_kind): the near cache's sequence numbers, or a counter
 * that only INCR changes (from 0; reads show its value), in a namespace with replicas=1 or without. */
enum hist_key_kind {
    HIST_KEY_SEQ = 0,            /* one writer, increasing sequence numbers (the rules of checker.h) */
    HIST_KEY_COUNTER_REPLICATED, /* a counter in a replicas=N namespace: no acknowledged INCR may be lost */
    HIST_KEY_COUNTER_ASYNC,      /* a counter in a namespace without replicas=: an unplanned failover may lose some */
};

struct history {
    const struct hist_op *ops;
    size_t nops;
    const struct hist_fault *faults;
    size_t nfaults;
    int nkeys;
    const char *const *key_names; /* nkeys names */
    const int *key_kind;          /* nkeys enum hist_key_kind, or NULL: every key HIST_KEY_SEQ */
    int nnodes;
    const char *const *node_names; /* nnodes names */
};

/* The name of an operation kind ("GET"), a status ("timeout") and a fault kind ("stop", as FAULTS= spells it). */
const char *hist_op_name(int kind);
const char *hist_status_name(int status);
const char *hist_fault_name(int kind);

/* Is op kind a write? (INCR is) */
int hist_op_is_write(int kind);

#endif
