/* resend.c: "did it run?": the pure table the router reads a kept send's reply with (resend.h). */
#include "resend.h"

#include <string.h>

/* Does reply[0..len) start with the word w (followed by a space, CR or its end)? */
static int resend_starts_with(const char *reply, size_t len, const char *w)
{
    size_t n = strlen(w);
    return len >= n && memcmp(reply, w, n) == 0 && (len == n || reply[n] == ' ' || reply[n] == '\r');
}

enum resend_kind resend_classify(const char *reply, size_t len, int written)
{
    if (!reply) return written ? RESEND_LOST_WRITTEN : RESEND_LOST_UNSENT;
    if (len == 0 || reply[0] != '-') return RESEND_OTHER;
    if (resend_starts_with(reply, len, "-MOVED")) return RESEND_MOVED;
    if (resend_starts_with(reply, len, "-ASK")) return RESEND_ASK;
    if (resend_starts_with(reply, len, "-TRYAGAIN")) return RESEND_TRYAGAIN;
    if (resend_starts_with(reply, len, "-CLUSTERDOWN")) {
        static const char unserved[] = "-CLUSTERDOWN Hash slot not served";
        size_t n = sizeof(unserved) - 1;
        if (len >= n && memcmp(reply, unserved, n) == 0 && (len == n || reply[n] == '\r')) return RESEND_UNSERVED;
        return RESEND_CLUSTERDOWN;
    }
    if (resend_starts_with(reply, len, "-READONLY")) return RESEND_READONLY;
    if (resend_starts_with(reply, len, "-LOADING")) return RESEND_LOADING;
    if (resend_starts_with(reply, len, "-UNBLOCKED")) return RESEND_UNBLOCKED;
    if (resend_starts_with(reply, len, "-NOSCRIPT")) return RESEND_NOSCRIPT;
    return RESEND_OTHER;
}

enum resend_action resend_decide(enum resend_kind kind, int sentinel, int blocking)
{
    switch (kind) {
    case RESEND_MOVED:
    case RESEND_ASK:
        return RESEND_GO;
    case RESEND_TRYAGAIN:
    case RESEND_CLUSTERDOWN:
        return RESEND_WAIT;
    case RESEND_UNSERVED:
        return RESEND_GIVE_UP;
    case RESEND_READONLY:
    case RESEND_LOADING:
        return sentinel ? RESEND_WAIT : RESEND_PASS;
    case RESEND_UNBLOCKED:
        return sentinel && blocking ? RESEND_WAIT : RESEND_PASS;
    case RESEND_LOST_UNSENT:
        return RESEND_WAIT;
    case RESEND_NOSCRIPT: /* a cluster's node, or a promoted replica, lacks the script: load it, send again */
        return RESEND_LOAD;
    case RESEND_LOST_WRITTEN:
    case RESEND_OTHER:
        return RESEND_PASS;
    }
    return RESEND_PASS;
}

enum resend_action resend_decide_load(int evalsha, int known, int loaded)
{
    return evalsha && known && !loaded ? RESEND_LOAD : RESEND_PASS;
}
