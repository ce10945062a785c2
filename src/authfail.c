/* authfail.c: the failed-AUTH table per source address: whose turn it is, how long a failure's reply waits, when a connection goes, decay. Pure. */
#include "authfail.h"

#include <arpa/inet.h>
#include <assert.h>
#include <stdio.h>
#include <string.h>

void authfail_init(struct authfail *t)
{
    memset(t, 0, sizeof(*t));
}

struct authfail_key authfail_key_of(const char *addr, long uid)
{
    struct authfail_key k = {.family = AUTHFAIL_OTHER};
    char host[64];
    if (strcmp(addr, "unix") == 0) {
        k.family = AUTHFAIL_UNIX;
        k.uid = uid >= 0 && uid < (long)UINT32_MAX ? (uint32_t)uid : UINT32_MAX;
        return k;
    }
    const char *end;
    if (addr[0] == '[') { /* "[v6]:port" */
        addr++;
        end = strchr(addr, ']');
    } else { /* "v4:port" */
        end = strrchr(addr, ':');
    }
    if (!end || (size_t)(end - addr) >= sizeof(host)) return k;
    memcpy(host, addr, (size_t)(end - addr));
    host[end - addr] = '\0';
    unsigned char a[16];
    if (inet_pton(AF_INET, host, a) == 1) {
        k.family = AUTHFAIL_IPV4;
        memcpy(k.addr, a, 4);
    } else if (inet_pton(AF_INET6, host, a) == 1) {
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(a, mapped, sizeof(mapped)) == 0) { /* ::ffff:a.b.c.d, a dual-stack listener's IPv4 client */
            k.family = AUTHFAIL_IPV4;
            memcpy(k.addr, a + 12, 4);
        } else {
            k.family = AUTHFAIL_IPV6;
            memcpy(k.addr, a, 8); /* the /64 */
        }
    }
    return k;
}

void authfail_key_format(const struct authfail_key *k, char *out, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    switch (k->family) {
    case AUTHFAIL_IPV4:
        inet_ntop(AF_INET, k->addr, host, sizeof(host));
        snprintf(out, len, "%s", host);
        break;
    case AUTHFAIL_IPV6:
        inet_ntop(AF_INET6, k->addr, host, sizeof(host));
        snprintf(out, len, "%s/64", host);
        break;
    case AUTHFAIL_UNIX:
        if (k->uid == UINT32_MAX)
            snprintf(out, len, "unix");
        else
            snprintf(out, len, "unix uid %u", (unsigned)k->uid);
        break;
    default:
        snprintf(out, len, "unknown");
        break;
    }
}

int64_t authfail_delay(uint32_t n)
{
    assert(n >= 1);
    int64_t d = AUTHFAIL_DELAY_MS;
    for (uint32_t i = 1; i < n && d < AUTHFAIL_DELAY_MAX_MS; i++) d *= 2;
    return d < AUTHFAIL_DELAY_MAX_MS ? d : AUTHFAIL_DELAY_MAX_MS;
}

int authfail_should_close(unsigned failures)
{
    return failures >= AUTHFAIL_CLOSE_AFTER;
}

static int key_eq(const struct authfail_key *a, const struct authfail_key *b)
{
    return a->family == b->family && a->uid == b->uid && memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

/* Forget what has decayed by now; 1 when e still holds something (failures, or a wait). */
static int entry_settle(struct authfail_entry *e, int64_t now)
{
    if (!e->used) return 0;
    if (e->failures > 0 && now >= e->forget_at_ms) {
        int64_t gone = (now - e->forget_at_ms) / AUTHFAIL_FORGET_MS + 1;
        if (gone >= e->failures) {
            e->failures = 0;
        } else {
            e->failures -= (uint32_t)gone;
            e->forget_at_ms += gone * AUTHFAIL_FORGET_MS;
        }
    }
    if (e->failures == 0) { /* clean again: the next failure starts a new episode */
        e->episode = 0;
        e->logged = 0;
        e->turn_taken = 0;
        if (now >= e->next_ms) e->used = 0;
    }
    return e->used;
}

static struct authfail_entry *entry_find(struct authfail *t, const struct authfail_key *k, int64_t now)
{
    for (size_t i = 0; i < AUTHFAIL_SLOTS; i++) {
        struct authfail_entry *e = &t->e[i];
        if (e->used && key_eq(&e->key, k)) return entry_settle(e, now) ? e : NULL;
    }
    return NULL;
}

/* A new entry for k: a free one, else the one with the fewest failures, the oldest among them. */
static struct authfail_entry *entry_take(struct authfail *t, const struct authfail_key *k, int64_t now)
{
    struct authfail_entry *victim = NULL;
    for (size_t i = 0; i < AUTHFAIL_SLOTS; i++) {
        struct authfail_entry *e = &t->e[i];
        if (!entry_settle(e, now)) {
            victim = e;
            break;
        }
        if (!victim || e->failures < victim->failures ||
            (e->failures == victim->failures && e->last_failure_ms < victim->last_failure_ms))
            victim = e;
    }
    assert(victim);
    *victim = (struct authfail_entry){.key = *k, .used = 1};
    return victim;
}

int64_t authfail_admit(struct authfail *t, const struct authfail_key *k, int64_t now_ms)
{
    struct authfail_entry *e = entry_find(t, k, now_ms);
    if (!e) return 0;
    if (now_ms < e->next_ms) return e->next_ms - now_ms;
    if (e->failures > 0) { /* its turn: the others of the address wait */
        e->next_ms = now_ms + authfail_delay(e->failures);
        e->turn_taken = 1;
    }
    return 0;
}

struct authfail_verdict authfail_failed(struct authfail *t, const struct authfail_key *k, int64_t now_ms)
{
    struct authfail_entry *e = entry_find(t, k, now_ms);
    if (!e) e = entry_take(t, k, now_ms);
    if (e->failures < AUTHFAIL_MAX_REMEMBERED) e->failures++;
    e->episode++;
    e->forget_at_ms = now_ms + AUTHFAIL_FORGET_MS;
    e->last_failure_ms = now_ms;
    e->turn_taken = 0;
    struct authfail_verdict v = {.delay_ms = authfail_delay(e->failures),
                                 .failures = e->failures,
                                 .episode = e->episode};
    if (e->next_ms < now_ms + v.delay_ms) e->next_ms = now_ms + v.delay_ms;
    if (!e->logged && e->episode >= AUTHFAIL_LOG_AFTER) {
        e->logged = 1;
        v.log = 1;
    }
    return v;
}

void authfail_passed(struct authfail *t, const struct authfail_key *k, int64_t now_ms)
{
    struct authfail_entry *e = entry_find(t, k, now_ms);
    if (!e || !e->turn_taken) return;
    e->turn_taken = 0;
    if (e->next_ms > now_ms) e->next_ms = now_ms;
}
