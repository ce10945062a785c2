/* authfail.h: the failed-AUTH table per source address: whose turn it is, how long a failure's reply waits, when a connection goes, decay. Pure. */
#ifndef KEYGATE_AUTHFAIL_H
#define KEYGATE_AUTHFAIL_H

#include <stddef.h>
#include <stdint.h>

/*
 * An AUTH (or HELLO ... AUTH) attempt goes through the table of its source address:
 *
 *   authfail_admit   may it be checked now? An address with failures remembered takes
 *                    turns: one attempt per authfail_delay(failures), whatever the
 *                    number of its connections (the caller retries after the wait).
 *   authfail_failed  the password was wrong: one more failure; the connection's reply
 *                    waits authfail_delay(failures), and so does the address's next turn.
 *   authfail_passed  the password was right: the turn it took is given back.
 *
 * Failures are forgotten one per AUTHFAIL_FORGET_MS without a new one (at most
 * AUTHFAIL_MAX_REMEMBERED are kept: an address is clean at most 16 x 30 s = 8 min after
 * its last failure). The table has AUTHFAIL_SLOTS entries; a new address takes a free
 * (forgotten) entry, else the one with the fewest failures (the oldest of those), so an
 * attacker's many fresh addresses evict each other before they evict a busy one.
 * Time is the caller's (now_ms, any monotonic milliseconds); nothing here reads a clock,
 * locks or logs.
 */
#define AUTHFAIL_SLOTS 1024        /* source addresses remembered */
#define AUTHFAIL_FORGET_MS 30000   /* one failure forgotten per 30 s without a failure */
#define AUTHFAIL_MAX_REMEMBERED 16 /* failures kept per address (the delay is at its cap long before) */
#define AUTHFAIL_DELAY_MS 100      /* the first failure's delay; each more doubles it */
#define AUTHFAIL_DELAY_MAX_MS 5000 /* ... up to this (reached at the 7th failure) */
#define AUTHFAIL_CLOSE_AFTER 3     /* failures on one connection: it is closed after the 3rd's reply */
#define AUTHFAIL_LOG_AFTER 3       /* failures of an address in one episode before it is logged (once) */
#define AUTHFAIL_LABEL_MAX 64      /* authfail_key_format's output, NUL included */

/* Where attempts come from: an IPv4 address, an IPv6 /64 (one host or customer holds a whole
 * /64), a unix-socket peer's uid, or one bucket for anything unreadable. */
enum authfail_family { AUTHFAIL_OTHER = 0, AUTHFAIL_IPV4, AUTHFAIL_IPV6, AUTHFAIL_UNIX };

struct authfail_key {
    uint8_t family;   /* enum authfail_family */
    uint8_t addr[16]; /* IPv4: 4 bytes; IPv6: the first 8 (the /64); the rest zero */
    uint32_t uid;     /* AUTHFAIL_UNIX: the peer's uid (UINT32_MAX: unknown) */
};

struct authfail_entry {
    struct authfail_key key;
    uint8_t used;            /* 0: free */
    uint8_t turn_taken;      /* an attempt was admitted and has not reported yet */
    uint8_t logged;          /* this episode was logged */
    uint32_t failures;       /* remembered (decayed) failures, <= AUTHFAIL_MAX_REMEMBERED */
    uint64_t episode;        /* failures since the address was last clean */
    int64_t forget_at_ms;    /* when the next remembered failure is forgotten */
    int64_t next_ms;         /* no attempt of the address is checked before this */
    int64_t last_failure_ms; /* eviction: the oldest goes first among the fewest failures */
};

struct authfail {
    struct authfail_entry e[AUTHFAIL_SLOTS];
};

/* What a failure means for the connection that made it. */
struct authfail_verdict {
    int64_t delay_ms;  /* hold its reply this long (>= AUTHFAIL_DELAY_MS) */
    uint32_t failures; /* the address's remembered failures, this one included */
    uint64_t episode;  /* the address's failures since it was last clean */
    int log;           /* 1 once per episode: when episode reaches AUTHFAIL_LOG_AFTER */
};

/* An empty table. */
void authfail_init(struct authfail *t);

/*
 * The key of a client address as keygate writes it (client.c): "1.2.3.4:port",
 * "[v6]:port" (an IPv4-mapped v6 address is its IPv4 address), or "unix" (then `uid` is the
 * peer's uid, or -1 when unknown). Anything else is the AUTHFAIL_OTHER bucket.
 */
struct authfail_key authfail_key_of(const char *addr, long uid);

/* k for a log line: "1.2.3.4", "2001:db8:1:2::/64", "unix uid 1000", "unix", "unknown". */
void authfail_key_format(const struct authfail_key *k, char *out, size_t len);

/* The delay of the n-th remembered failure (n >= 1): 100 ms doubled n-1 times, at most 5 s. */
int64_t authfail_delay(uint32_t n);

/* 0: an attempt from k may be checked now (with failures remembered, it takes the
 * address's turn: the next waits authfail_delay); else how many ms it must wait. */
int64_t authfail_admit(struct authfail *t, const struct authfail_key *k, int64_t now_ms);

/* The attempt from k failed at now_ms (k gets an entry if it had none). */
struct authfail_verdict authfail_failed(struct authfail *t, const struct authfail_key *k, int64_t now_ms);

/* The attempt from k succeeded: the turn it took (if any) is given back. Failures stay
 * remembered: a right password does not clear an address that also guesses. */
void authfail_passed(struct authfail *t, const struct authfail_key *k, int64_t now_ms);

/* 1 when a connection with `failures` failed attempts is to be closed (after the reply). */
int authfail_should_close(unsigned failures);

#endif
