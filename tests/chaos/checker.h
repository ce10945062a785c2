/* checker.h: the chaos run's history checker, a pure function from a recorded history (history.h) to its violations: stale reads, values never written, lost writes, errors no fault explains. */
#ifndef KEYGATE_CHAOS_CHECKER_H
#define KEYGATE_CHAOS_CHECKER_H

#include <stdio.h>
#include <sys/types.h>

#include "history.h"

/*
 * The rules (times in microseconds since the run began):
 *
 * - STALE: a read that started at s on keygate K shows, for each key, a value at least the
 *   newest write to that key acknowledged (through any keygate) before s - L. L is bound_us,
 *   or fault_bound_us when the read overlaps the window of a fault touching K: a fault's
 *   window runs from its start to fault_tail_us after its end; a fault on HIST_GLOBAL
 *   touches every keygate. A SISMEMBER answer 0 for member X proves the set older than X
 *   only while no write with sequence >= X + set_window had been invoked by the read's end
 *   (the writer removes member n - W with every write n); a 1 proves it at least X. Reads
 *   whose answer proves neither way are counted as inconclusive, not checked.
 * - FUTURE: a read shows a sequence number whose write had not been invoked (sent) before the
 *   read ended, or never was: a value nobody wrote.
 * - LOST: a final read (the lost-write check, after the heal) shows a value older than the
 *   newest acknowledged write of its key. A final read is checked by this rule instead of STALE.
 * - ERROR: an operation answered an error, timed out or lost its connection, and no fault
 *   explains it: a fault explains an error of status S on keygate K when check_fault_explains
 *   says its kind explains S, it touches K, and the operation overlaps its window extended by
 *   error_grace_us after its end.
 * - BAD: a reply of the wrong shape (the runner's HST_BAD: a torn HGETALL, a non-number).
 *
 * Writes answered with an error or a timeout are indeterminate: they count as invoked (a read
 * may show them), never as acknowledged. An indeterminate write may also take effect late: a
 * frozen keygate executes the request it holds when continued, after the client timed out and
 * its writer went on with newer writes. So a read (STALE or LOST) showing the value of an
 * indeterminate write older than the one required passes when that write may have taken effect
 * after the required write began: its deadline is the end of the window of the fault explaining
 * its error (its own end when none does) plus error_grace_us. A SISMEMBER 0 is inconclusive when
 * such an older write exists (the set may hold its member instead). One writer per key, writing increasing sequence
 * numbers, is assumed (the runner guarantees it), not checked.
 *
 * Counter keys (history key_kind HIST_KEY_COUNTER_*: only INCR changes them, from 0; the Sentinel
 * topology) have rules of their own instead of STALE / FUTURE / LOST above; ERROR and BAD apply
 * as to any key. An operation shows a state of the counter: a GET its value, an acknowledged INCR
 * its reply minus 1 (the value before it). With A(t) the INCRs acknowledged (ended) before t and
 * I(t) those invoked (sent) before t:
 *
 * - DUP: an operation ending at e shows a value above I(e) (a GET's value, an INCR's reply): an
 *   increment applied twice, or a value nobody made. Also a final read above A + U (U: the INCRs
 *   answered with an error, a timeout or a lost connection, which may or may not have run).
 * - The deficit of an operation starting at s is D = A(s) - the state it shows: D > 0 proves at
 *   least D acknowledged increments missing (an indeterminate INCR that did run only hides a loss).
 *   Each rise of D's running maximum (operations in start order, the final read last) is a loss
 *   event of that many increments, attributed to the last fault that started before the operation.
 *   LOST, on a HIST_KEY_COUNTER_REPLICATED key: any loss event, and two acknowledged INCRs with the
 *   same reply (one increment was lost in between). On a HIST_KEY_COUNTER_ASYNC key a loss event
 *   after an unplanned failover (kill-primary, stop-primary, dead-slots) is expected (counted, not a
 *   violation); one after a planned failover (failover) is counted apart and reported (a planned
 *   failover should lose nothing); one after any other fault or none is LOST.
 */

struct check_params {
    long long bound_us;              /* L outside fault windows (100 ms) */
    long long fault_bound_us;        /* L for a read overlapping a window of a fault touching its keygate (1100 ms) */
    long long fault_tail_us;         /* a fault's window ends this long after the fault's end (100 ms) */
    long long error_grace_us;        /* an error is explained up to this long after its fault's end (1000 ms) */
    long long set_window;            /* W: the members a set keeps (64) */
    long long same_keygate_bound_us; /* < 0 (the default): off. Else an extra STALE rule outside fault windows: a read
                                        on keygate K shows at least the newest write K itself acknowledged before
                                        start - this bound (0: K's readers see K's acknowledged writes at once,
                                        whichever of its worker threads serves them) */
};

enum check_rule { CR_STALE = 0, CR_FUTURE, CR_LOST, CR_ERROR, CR_BAD, CR_DUP, CR_NRULES };

struct check_violation {
    int rule;            /* enum check_rule */
    size_t op;           /* the offending operation (index into the history's ops) */
    int slot;            /* which of its keys (MGET) */
    long long got;       /* the value it showed (SISMEMBER: its answer) */
    long long required;  /* STALE/LOST: the sequence number it had to show at least */
    long long bound_us;  /* STALE: the L applied */
    ssize_t required_op; /* the acknowledged write that set `required`, or -1 */
    ssize_t got_op;      /* the write of the value shown, or -1 (0, or never written) */
    ssize_t fault;       /* the fault it is attributed to: the first active one touching its keygate, else the
                             last one touching it that ended before the operation began; -1: none */
    int fault_active;    /* 1: `fault` was active (window overlapping the operation) */
    int same_keygate;    /* STALE by the same_keygate_bound_us rule */
};

/* One counter key's numbers (check_result's counter[key]). */
struct check_counter_sum {
    long long acked, indeterminate; /* INCRs acknowledged; answered with an error, a timeout, a lost connection */
    long long final_value;          /* the final read's value (the last one; -1: none) */
    long long lost; /* acknowledged increments proven missing: D's running maximum at the end, or dup_replies if more */
    long long lost_planned; /* of those, in loss events attributed to a planned failover */
    long long dup_replies;  /* acknowledged INCRs whose reply another acknowledged INCR also got */
    long long dup_planned;  /* of those, the later INCR of the pair began after a planned failover */
    long long checked;      /* operations whose state was judged */
};

/* A loss event (see the counter rules above). */
struct check_loss_event {
    int key;
    size_t op;             /* the operation that showed it */
    long long lost;        /* the rise of D's running maximum: acknowledged increments newly proven missing */
    long long acked, seen; /* A(s) and the state the operation showed */
    ssize_t fault;         /* the last fault started before the operation, or -1 */
};

#define CHECK_MAX_LOSS_EVENTS 64

struct check_result {
    struct check_violation *viol; /* nviol of them, in history order (malloc'd) */
    size_t nviol;
    long long reads, read_values; /* read operations; key values they showed (MGET: one per key) */
    long long checked;            /* read values a rule could decide, with something to compare (required > 0) */
    long long trivial;            /* read values decided with nothing acknowledged yet to compare against */
    long long inconclusive;       /* SISMEMBER answers that prove nothing about the bound */
    long long late_applied;       /* read values older than required shown by an indeterminate write that may have
                                     taken effect late (see above): passed */
    long long in_fault_window;    /* read values checked with fault_bound_us */
    long long writes_acked, writes_indeterminate;
    long long ops_by_kind[HOP_NKINDS];
    long long status_by_kind[HOP_NKINDS][HST_NKINDS];
    long long explained_by_fault[HF_NKINDS]; /* errors explained, by the kind of the fault explaining them */
    long long viol_by_rule[CR_NRULES];
    long long viol_by_fault[HF_NKINDS + 1]; /* by the attributed fault's kind; [HF_NKINDS]: no fault */
    struct check_counter_sum *counter;      /* nkeys entries when the history has counter keys, else NULL (malloc'd) */
    struct check_loss_event loss[CHECK_MAX_LOSS_EVENTS]; /* the first loss events, history order */
    size_t nloss;                                        /* every loss event (may exceed the array) */
    long long lost_by_fault[HF_NKINDS + 1]; /* increments of every loss event, by its fault's kind; [HF_NKINDS]: none */
};

/* The defaults of the product's bounds: L 100 ms, 1100 ms in a fault window, windows 100 ms past
 * the fault's end, errors explained up to 1 s past it, sets of 64 members. */
struct check_params check_default_params(void);

/* Does a fault of kind fault_kind explain an operation status (enum hist_status) on a keygate it
 * touches? stop: timeouts and connection errors; restart, failover, kill-primary, stop-primary and dead-slots: any
 * error; slow-link: timeouts; wrongtype-stream: error replies (a write whose XADD fails may be refused); the other
 * stream faults, reload, stop-sentinel, reshard and add-node: nothing (clients must not notice them: keygate follows
 * -MOVED and -ASK itself). */
int check_fault_explains(int fault_kind, int status);

/* Check h against the rules above with p; fills *out (check_result_free frees it). Reads only h
 * and p: the same history always gives the same result. Returns the number of violations, or -1
 * when memory ran out (then *out holds nothing to free). */
ssize_t check_history(const struct history *h, const struct check_params *p, struct check_result *out);

/* Free what check_history allocated in r. */
void check_result_free(struct check_result *r);

/* Print the counter keys' numbers of r to f (check_print_summary does when there are counter keys): per key the
 * INCRs acknowledged and indeterminate, the final value, the increments proven lost; the loss events with the fault
 * before each. */
void check_print_counters(FILE *f, const struct history *h, const struct check_result *r);

/* A rule's name ("STALE"). */
const char *check_rule_name(int rule);

/* Print violation v as a paragraph to f: the rule, the operation (keygate, command, keys, times
 * relative to the run start, what it showed), the write it had to show and the write it showed
 * (times, keygate), the bound applied, and the faults active during it and the last one before. */
void check_print_violation(FILE *f, const struct history *h, const struct check_params *p,
                           const struct check_violation *v);

/* Print the counts of r to f: operations and errors per kind, errors explained per fault kind,
 * reads checked, violations per rule and per fault kind. */
void check_print_summary(FILE *f, const struct history *h, const struct check_result *r);

#endif
