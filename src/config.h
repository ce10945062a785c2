/* config.h: keygate.conf directives parsed into one immutable struct config (a snapshot). */
#ifndef KEYGATE_CONFIG_H
#define KEYGATE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "registry.h"
#include "stats.h"
#include "util.h"

#define CONFIG_MAX_INSTANCES 8
/* seed nodes on one `instance NAME cluster H:P,H:P...` line */
#define CONFIG_MAX_SEEDS 16
/* the largest max-clients= and rate= of a user line */
#define CONFIG_USER_LIMIT_MAX 1000000

/* client-output-hard-limit's default: Redis's hard limit for replicas, the one class of its
 * clients that is sent bulk data it may not keep up with. A quarter of max-memory's default,
 * so one client that never reads cannot take the process's budget alone; replies up to 256 MB
 * still pass whole. Raised to client-output-limit when only that one is set above it. */
#define CONFIG_OUTPUT_HARD_LIMIT_DEFAULT (256LL * 1024 * 1024)
_Static_assert(CONFIG_MAX_INSTANCES <= STATS_MAX_INSTANCES, "the stats histograms hold every instance");

struct listen_addr {
    char *host; /* NULL for unix sockets */
    int port;
    char *unix_path; /* "unix:/run/keygate/keygate.sock" -> "/run/keygate/keygate.sock" */
    int unix_mode;   /* mode=0660 (octal); default 0660 */
    int tls;         /* listen ADDR tls cert=... key=... [ca=...] */
    char *tls_cert, *tls_key, *tls_ca;
    int line; /* line of the listen directive */
};

struct instance_conf {
    char *name; /* "durable", "cache", ... */
    char *host; /* a cluster: its first seed */
    int port;
    int cluster;                       /* instance NAME cluster SEEDS ...: a Redis Cluster */
    int sentinel;                      /* instance NAME sentinel SENTINELS master=NAME ...: a Sentinel-managed
                                          primary (seed_host/seed_port: the sentinels) */
    char *master_name;                 /* sentinel: master=NAME, as the sentinels monitor it */
    char *sentinel_password_file;      /* sentinel: sentinel-password-file= (resolved; NULL: no AUTH) */
    char *sentinel_password;           /* read from it at load time */
    int sentinel_tls;                  /* sentinel: the sentinels speak TLS (the line's tls, unless sentinel-tls=no) */
    char *seed_host[CONFIG_MAX_SEEDS]; /* a cluster's seed nodes (any reachable one gives the slot map), or the
                                          sentinels of a sentinel instance */
    int seed_port[CONFIG_MAX_SEEDS];
    int nseeds;
    int tls;               /* 1 = tls (default when neither word is given: error), 0 = plain */
    char *ca, *cert, *key; /* resolved paths; tls requires ca, cert and key go together */
    char *server_name;     /* server-name=: name the certificate must carry; NULL = host */
    char *password_file;   /* resolved path; NULL = no AUTH */
    char *password;        /* read from password_file at load time; NULL if none */
    char *username;        /* user=NAME for AUTH NAME PASS (optional) */
    int connections;       /* shared pipelined connections per worker (connections=N, default 2) */
    int line;              /* line of the instance directive */
};

struct user_conf {
    char *name;
    char *password_file;               /* resolved; NULL when sha256= was given. The plain text is not kept. */
    unsigned char password_sha256[32]; /* from password-file or sha256=HEX */
    char **owners;                     /* "*" alone means every owner */
    size_t nowners;
    int all_owners;
    int read_only;   /* access=ro */
    int scripts;     /* scripts=yes */
    int max_clients; /* max-clients=N: connections authenticated as this user at once, all workers (0 = no limit) */
    int rate;        /* rate=N: its requests per second, all workers (0 = no limit; userlimit.h) */
    int line;
};

struct config {
    char *path;
    struct listen_addr *listens;
    size_t nlistens;
    char *admin_host; /* admin-listen; NULL = none */
    int admin_port;
    char *registry_path; /* resolved */
    struct instance_conf instances[CONFIG_MAX_INSTANCES];
    size_t ninstances;
    const char *instance_names[CONFIG_MAX_INSTANCES]; /* for registry_load */
    struct user_conf *users;
    size_t nusers;
    int threads;                      /* threads N, default 1 */
    int max_clients;                  /* max-clients N, default 10000 */
    int64_t max_request_bytes;        /* max-request-size SIZE (bytes; 512mb default like Redis) */
    int64_t client_output_limit;      /* client-output-limit SIZE: reply bytes queued per client before
                                    keygate stops reading it (soft), default 64mb */
    int64_t client_output_hard_limit; /* client-output-hard-limit SIZE: past it the client is closed, default 256mb */
    int64_t max_memory;               /* max-memory SIZE: buffered request + reply bytes of all workers past
                                 which no client is read (0 = no bound), default 1gb */
    int max_pending;                  /* max-pending N: requests in flight per client, default 1024 */
    int tracking_table_max_keys; /* tracking-table-max-keys N: keys remembered for CLIENT TRACKING, default 1000000 */
    int max_pinned;              /* max-pinned N: dedicated connections per instance per worker, default 64 */
    int64_t connect_timeout_ms;  /* backend connect timeout, default 2s */
    int64_t shutdown_timeout_ms; /* shutdown-timeout: drain bound on SIGTERM, default 5s */
    int64_t client_timeout_ms;   /* client-timeout: close a client idle this long (0 = never, the
                                         default, as Redis's `timeout 0`) */
    int64_t client_header_timeout_ms; /* client-header-timeout: bound on a client's first request, its AUTH
                                         (when users are configured) and any unfinished request (0 = none),
                                         default 10s */
    int64_t backend_timeout_ms;       /* backend-timeout: a backend connection whose oldest written request
                                         has no reply after this is closed, its requests failed (0 = none),
                                         default 5s */
    int log_level;                    /* log-level debug|info|warn|error (enum log_level), default info */
    int log_format;                   /* log-format text|json (enum log_format), default text */
    int enforce;                      /* enforce on|report (enum ns_enforce), default on: the value of
                                         every registry line without enforce= */
    int enforce_line;                 /* line of the enforce directive (0: none) */

    /* metrics (issue 14) */
    int64_t backend_info_interval_ms;   /* backend-info-interval: INFO read for the capacity gauges, default 10s */
    int durable_headroom_warn_pct;      /* durable-headroom-warn N%: /healthz fails under it, default 20 */
    int64_t namespace_scan_interval_ms; /* namespace-scan-interval: one sampler pass each (0 = off, default) */
    int64_t cluster_refresh_ms;  /* cluster-refresh: periodic slot-map refresh of cluster instances, default 10s */
    int64_t failover_hold_ms;    /* failover-hold: how long a request waits for an instance's primary, default 5s */
    int64_t replicas_timeout_ms; /* replicas-timeout: a replicas=N write's wait for its replicas, default 1s */

    /* the near cache (issue 20; registry lines with near-cache=D) */
    int64_t near_cache_memory;            /* near-cache-memory: cached bytes of the whole process, default 64mb */
    char *near_cache_group;               /* near-cache-group: the marker's name in each markers hash, default
                                            "default" */
    int64_t near_cache_trim_interval_ms;  /* near-cache-trim-interval: XTRIM MINID period, default 1m */
    int64_t near_cache_marker_timeout_ms; /* near-cache-marker-timeout: a marker older stops pinning, default 1h */
    struct registry *registry;
};

/*
 * Parse keygate.conf at `path`, then the registry it names (and the password files).
 * Every error goes to `errs` as "FILE:LINE: message". Unknown directives, missing
 * required directives (listen, registry, at least one instance), malformed addresses,
 * instance without tls/plain, duplicate instance names, unreadable or group/other-
 * readable password files, a user naming an owner no registry line has, and admin-listen
 * on a listen address are errors; an unknown directive's error names the nearest known one.
 * Touches no network and opens no certificate (tls_check_files does, for --check). Warns
 * (log_event) when there is no user line (no AUTH).
 * Returns the config (free with config_free) when there were no errors, else NULL.
 */
struct config *config_load(const char *path, struct diag *errs) KG_MUST_CHECK;

void config_free(struct config *c);

/*
 * The directive table config_load parses with: how many directives (config_directive_count),
 * the name of the i-th ("listen", "cluster-refresh", ...) and its usage, the arguments after the
 * name as the error messages print them ("NAME HOST:PORT|cluster ... [ca=F cert=F ...]"). NULL
 * for i past the end. For the tests that hold the example configuration and the manual page to
 * every directive and option the parser knows.
 */
size_t config_directive_count(void);
const char *config_directive_name(size_t i);
const char *config_directive_usage(size_t i);

/* A deep copy of an instance's settings (the password too), for a thread of its own (the
 * sampler); free it with config_instance_free, which also clears the password. */
void config_instance_copy(struct instance_conf *dst, const struct instance_conf *src);
void config_instance_free(struct instance_conf *in);

/* Give every entry of r (the default line too) its per-namespace stats slot (stats_ns_slot:
 * the same labels keep their slot over reloads). config_load does it for its registry. */
void config_registry_bind_stats(struct registry *r, const char *const *instance_names);

/* Index of the instance called `name`, or -1. */
int config_instance_index(const struct config *c, const char *name);

/* size_parse: util.h (the registry's max-memory= reads sizes too). */

#endif
