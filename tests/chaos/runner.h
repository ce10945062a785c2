/* runner.h: what the topologies of the fault harness's runner share (chaos.c, sentinel.c, cluster.c): the run's clock and harness failure, the seeded random numbers, planned pauses, a client's operation log and connection, keygate processes (their files, start, serving check, restart), counter replies, options, the schedule and its fault windows, the history file, the error summary, and the run of sentinel.c's and cluster.c's topologies (runner_main). */
#ifndef KEYGATE_CHAOS_RUNNER_H
#define KEYGATE_CHAOS_RUNNER_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "checker.h"
#include "history.h"

/* What every topology's run shares: its seed (named in messages), when it began, the keygate it runs, its first
 * harness failure, the keygates that ended badly, and the flag that stops the client threads. */
struct runner_run {
    unsigned long long seed;
    long long t0_us;         /* runner_mono_us() at the run's start (runner_now_us() counts from it) */
    const char *keygate_bin; /* sentinel.c and cluster.c: the keygate runner_kg_spawn starts */
    char failure[2048];      /* a harness failure (not a checker one): why the run could not go on */
    int crashes;      /* keygates that did not exit 0 after SIGTERM (a defect: the run fails, the schedule goes on) */
    int stop_clients; /* atomic: the client threads stop */
};
extern struct runner_run runner;

/* The monotonic clock, in microseconds. */
long long runner_mono_us(void);

/* Microseconds since the run began (runner.t0_us). */
long long runner_now_us(void);

/* Record a harness failure (the first one is the cause: later ones are dropped) and say it on stderr as
 * "chaos[SEED=<seed>]: <text>". */
void runner_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The next number of the seeded sequence in *s (splitmix64: the same seed, the same schedule). */
unsigned long long runner_splitmix(unsigned long long *s);

/* A number in 0..n-1 from *s (n > 0). */
int runner_rnd(unsigned long long *s, int n);

/* One client thread's operations, in the order it ran them. */
struct oplog {
    struct hist_op *ops;
    size_t n, cap;
};

/* A new, zeroed operation at the end of l (aborts when out of memory: a history cannot be partial). */
struct hist_op *runner_oplog_add(struct oplog *l);

/* qsort order of operations: by start time. */
int runner_by_start_time(const void *a, const void *b);

/* A planned pause (think time, a fault's planned duration, a poll's interval): the one kind of sleep the harness
 * has. Returns early when *stop becomes nonzero (NULL: never). */
void runner_sleep_ms(int ms, const int *stop);

/* One keygate of a topology: its files and its process. */
struct runner_kg {
    char name[8];
    pid_t pid;
    unsigned long long start;
    int port, threads, restarts;
    char conf[PATH_MAX], log[PATH_MAX], registry[PATH_MAX];
};

/* What a keygate must answer to be serving: AUTH app <password> first (NULL: no AUTH), then a GET of each of
 * keys[0..nkeys) answered with a string or nil, each command within timeout_s. what: the failure message's name for
 * it ("GET r:c:0", "the counters"); when more than one command is sent the last answer is named by its command. */
struct runner_kg_probe {
    const char *password;
    const char *const *keys;
    int nkeys;
    int timeout_s;
    const char *what;
};

/* The keygates' ports (tls: 36000-40999, plain: 41000-45999) and, after them, nextra more for other servers into
 * extra[0..nextra); then k[0..n) filled: names[i], its port, threads 1 for the first and 2 for the others, its
 * config, log and registry files <dir>/<name>.conf, .log, .registry.conf. 0, or -1 (runner_fail). */
int runner_kg_setup(struct runner_kg *k, int n, const char *const *names, const char *dir, int *extra, int nextra);

/* Write keygate k's config (conf) and registry files. 0, or -1 (runner_fail). */
int runner_kg_write_files(const struct runner_kg *k, const char *conf, const char *registry);

/* Start keygate k (`runner.keygate_bin -c k->conf`, output to k->log) as this process's child
 * (tests/common/procs.c). 0, or -1 (runner_fail). */
int runner_kg_spawn(struct runner_kg *k);

/* Wait (deadline_ms) until keygate k answers probe p. 0, or -1 (its log's tail printed, runner_fail). */
int runner_kg_wait_serving(const struct runner_kg *k, const struct runner_kg_probe *p, int deadline_ms);

/* Start keygates k[0..n): each one's files written (its config from conf(i), registry text registry) and its
 * process started, then each waited for until it answers p (deadline_ms). 0, or -1 (runner_fail). */
int runner_kg_start_all(struct runner_kg *k, int n, void (*conf)(int i, char *buf, size_t len), const char *registry,
                        const struct runner_kg_probe *p, int deadline_ms);

/* After the schedule: each of k[0..n) still running (else a failure: it exited by itself) and answering p
 * (deadline_ms), until a harness failure. */
void runner_kg_check_running(struct runner_kg *k, int n, const struct runner_kg_probe *p, int deadline_ms);

/* SIGKILL each running keygate of k[0..n) and wait for it. */
void runner_kg_kill_all(struct runner_kg *k, int n);

/* Stop keygate k for a restart: SIGKILL, or SIGTERM and its exit waited for (shutdown_ms). Returns 0 when it is gone
 * as it should be, 1 when it exited badly after SIGTERM (a keygate defect: its log's tail is printed), -1 when it did
 * not exit in time (why in *why). */
int runner_kg_stop(struct runner_kg *k, int kill9, int shutdown_ms, char *why, size_t why_len);

/* The restart fault: keygate k stopped (runner_kg_stop: one that ends badly after SIGTERM is a keygate defect,
 * said as "chaos: DEFECT (SEED=N): ..." and counted in runner.crashes, and the schedule goes on), then started again
 * with the same config and waited for until it answers p (start_ms). 0, or -1 (runner_fail). */
int runner_kg_restart(struct runner_kg *k, int kill9, int shutdown_ms, const struct runner_kg_probe *p, int start_ms);

/* The run's directories: root the working directory (the repository), keygate_bin checked to be an executable,
 * TMPDIR <root>/build/chaos (the harness's temp dir, like the near-cache runs'). 0, or -1 (runner_fail). */
int runner_prepare(char *root, size_t len);

/* ---- the clients ---- */

/* A client thread of sentinel.c or cluster.c (the first member of cluster.c's). */
struct runner_client {
    int id, node;
    unsigned long long rng;
    redisContext *c;
    struct oplog log;
    pthread_t thread;
};

/* The client threads run 4 nice levels below the runner's other threads: the nemesis (and chaos.c's delay proxy)
 * must not wait behind the load they carry. Called by each client thread. */
void runner_client_lower_priority(void);

/* Connect *c to keygate port (127.0.0.1) with timeout_ms for the connect and every later command. 0, or -1 with
 * ops[0..n) ended as connection errors ("connect: ...") and *c NULL. */
int runner_client_connect(redisContext **c, int port, int timeout_ms, struct hist_op *ops, int n);

/* *c's connection was lost (a timeout or another I/O error) before ops[0..n) were answered: each ended with
 * HST_ERR_TIMEOUT or HST_ERR_CONN and the error text; the connection is dropped (*c NULL). */
void runner_client_lost(redisContext **c, struct hist_op *ops, int n);

/* Reply r (to an INCR, an EVALSHA that increments, or a GET of a counter) into o's value or status: an error reply
 * its text, an integer or a number the value (nil: 0), anything else HST_BAD. */
void runner_counter_reply(struct hist_op *o, const redisReply *r);

/* FAULTS= of a topology: text (NULL, "" or "all": every kind of kinds[0..n) but those in opt_in, a
 * mask of kind bits; "none": no fault; else a comma list of fault names) read into *faults (a bit
 * per kind) and faults_text (the names, comma-separated, or "none"). 0, or -1 after printing "chaos:
 * TOPOLOGY=<topology>: unknown fault 'X' (<names>)" on stderr. */
int runner_faults_parse(const char *text, const int *kinds, int n, unsigned opt_in, const char *topology,
                        const char *names, unsigned *faults, char *faults_text, size_t len);

/* ---- the schedule ---- */

/* A fault of a topology's schedule. */
struct runner_planned {
    int kind;
    int gap_ms, hold_ms;
    int target; /* restart: the keygate; else the topology's (sentinel.c: a sentinel; cluster.c: a primary pick) */
    int param;  /* restart: 1 SIGKILL, 0 SIGTERM; cluster.c's reshard / add-node: the counters moved */
    int pick;   /* cluster.c's reshard: where the slots go; a key pick */
};

/* A topology's schedule and the faults it ran (each run in the nemesis thread; read after the load). */
#define RUNNER_MAX_PLANNED 256
struct runner_schedule {
    void (*describe)(const struct runner_planned *pl, char *buf, size_t len); /* the topology's words for pl */
    struct runner_planned plan[RUNNER_MAX_PLANNED];
    int nplan;
    struct hist_fault faults[RUNNER_MAX_PLANNED];
    int nfaults;
    int count[HF_NKINDS]; /* faults run by kind */
};

/* sc's schedule from random numbers s (the seed's): faults of kinds[0..nkinds) in mask faults, each a kind and a
 * gap of 500..1999 ms (1.5 s more for the first: load without faults first), then draw(s, pl) the rest of it and
 * its cost (a guess of how long it and the settling after it take: the schedule ends at DURATION, duration_s). */
void runner_plan_make(struct runner_schedule *sc, unsigned long long s, const int *kinds, int nkinds, unsigned faults,
                      int duration_s, int (*draw)(unsigned long long *s, struct runner_planned *pl));

/* The words for planned fault pl of a kind every topology has (restart: of keygate names[pl->target]; another
 * kind: its name), into buf. */
void runner_plan_describe(const struct runner_planned *pl, const char *const *names, char *buf, size_t len);

/* Print sc's schedule (seed: the run's), each fault "followed by <settles> settling". */
void runner_plan_print(const struct runner_schedule *sc, const char *settles);

/* Run sc's schedule one fault after another, each after its planned gap, until a harness failure, a fault that
 * would end after DURATION (duration_s: the schedule is cut, said) or one that fails (heal() then). */
void runner_nemesis(const struct runner_schedule *sc, int duration_s, int (*fault_run)(const struct runner_planned *pl),
                    void (*heal)(void));

/* The fault window of planned fault pl (described by sc->describe), started now: sc's next fault (counted by
 * runner_fault_end). */
struct hist_fault *runner_fault_begin(struct runner_schedule *sc, const struct runner_planned *pl);

/* Fault window f of sc ended now: counted and printed as "chaos: +S.SSSs .. +E.EEEs <kind> <what>". */
void runner_fault_end(struct runner_schedule *sc, struct hist_fault *f);

/* Append to fault f's description. */
void runner_fault_note(struct hist_fault *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- the end ---- */

/* An ordinary read of key through keygate n for the end (a GET op added to cl's log, on a new connection: cl's is
 * dropped); the caller runs it. */
struct hist_op *runner_final_op(struct runner_client *cl, int n, int key);

/* A final read of key directly on a server: a GET op (node HIST_DIRECT, final) added to l, started now. */
struct hist_op *runner_final_begin(struct oplog *l, int thread, int key);

/* Final read o: GET name on c (NULL: no connection) of node p, its value or the error; c is freed. */
void runner_final_get(struct hist_op *o, redisContext *c, int p, const char *name);

/* ---- options ---- */

struct chaos_common; /* chaos_sentinel.h: what chaos.c read from the environment */

/* The options of sentinel.c and cluster.c. */
struct runner_opts {
    unsigned long long seed;
    int duration_s;
    unsigned faults; /* a bit per fault kind */
    char faults_text[256];
    struct check_params p;
    int keep;
    int clients; /* CHAOS_CLIENTS: client threads per keygate */
};

/* o from c (its seed and keygate also into runner), CHAOS_CLIENTS (default clients) and FAULTS= (runner_faults_parse
 * with kinds[0..nkinds), opt_in, topology and names). 0, or -1 (a bad FAULTS=, said). */
int runner_opts_read(struct runner_opts *o, const struct chaos_common *c, int clients, const int *kinds, int nkinds,
                     unsigned opt_in, const char *topology, const char *names);

/* Write history h to path, one line an operation then one a fault (names from h). */
void runner_write_history(const char *path, const struct history *h);

/* Print the client errors by the kind of the last fault started before each ended and by text (digits folded),
 * most frequent first, up to 12. */
void runner_print_error_texts(const struct history *h);

/* ---- the run ---- */

/* What runner_main runs of a topology (sentinel.c, cluster.c): its own pieces. */
struct runner_topology {
    const char *name;      /* TOPOLOGY=: "sentinel", "cluster" */
    const char *settles;   /* what settles after each fault: "the deployment", "the cluster" */
    const char *note_what; /* whose losses a planned failover's NOTE names (runner_main) */
    struct runner_opts *o;
    struct runner_schedule *sc;
    unsigned long long salt; /* the schedule's random numbers: the seed ^ salt */
    const int *kinds;        /* the topology's fault kinds[0..nkinds) */
    int nkinds;
    int (*draw)(unsigned long long *s, struct runner_planned *pl); /* runner_plan_make's */
    int nodes;                                                     /* keygates */
    size_t client_size;           /* a client: a struct runner_client first (cluster.c's has more) */
    void *(*client_main)(void *); /* a client thread */
    int (*start)(void);           /* the deployment started (and its ports said). 0, or -1 (runner_fail) */
    int (*fault_run)(const struct runner_planned *pl); /* run a fault and wait for the deployment to settle */
    void (*heal)(void);                                /* continue or start again whatever a fault left */
    void (*finish)(struct runner_client *settler);     /* settled after the load: the final reads by settler */
    void (*load_extra)(void *clients, int n, char *buf, size_t len); /* the load line's end; NULL: none */
    const char *(*dir)(void);   /* the deployment's directory ("" when there is none) */
    void (*stop)(int keep);     /* the deployment stopped (its files kept when keep) */
    const struct history *keys; /* nkeys, key_names, key_kind, nnodes, node_names of the history */
    size_t max_print;           /* violations printed at most */
};

/* Run topology t (its options read): its schedule made and printed; its deployment started; client threads
 * (o->clients per keygate, client i on keygate i % nodes, its own random numbers; one more, the settler, for the
 * final reads) and the schedule in this thread (the servers it starts are this thread's children) until DURATION
 * or a harness failure; the history (every client's log sorted by start time, <dir>/history.tsv) checked and
 * printed (the load, the faults run, the summary, the error texts, a NOTE of the async counters' losses after a
 * planned failover, the violations); the deployment stopped (kept on failure or CHAOS_KEEP=1); the verdict
 * (FAILED with what reproduces it, or PASSED) and "N passed, N failed". Exit status: 0 passed, 1 failed. */
int runner_main(const struct runner_topology *t);

#endif
