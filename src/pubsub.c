/* pubsub.c: one client's subscriptions: its subscriber connections, the confirmed counts, the markers. */
#include "pubsub.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "resp.h"
#include "util.h"

_Static_assert(sizeof(PUBSUB_MARKER) - 1 == 27, "PUBSUB_MARKER_CMD's $27 is the marker's length");

/* What a subscribed connection answers PING <arg> with, before the bulk of <arg>. */
#define SUBSCRIBED_PONG_HEAD "*2\r\n$4\r\npong\r\n"

/* The bulk at p (len bytes, the whole rest of a frame): "$n\r\n<n bytes>\r\n" equal to word? */
static int bulk_is(const char *p, size_t len, const char *word)
{
    size_t wl = strlen(word);
    char hdr[16];
    int n = snprintf(hdr, sizeof(hdr), "$%zu\r\n", wl);
    return len == (size_t)n + wl + 2 && memcmp(p, hdr, (size_t)n) == 0 && memcmp(p + n, word, wl) == 0 &&
           memcmp(p + n + wl, "\r\n", 2) == 0;
}

int pubsub_is_marker_answer(const char *frame, size_t len)
{
    const size_t head = sizeof(SUBSCRIBED_PONG_HEAD) - 1;
    return bulk_is(frame, len, PUBSUB_MARKER) || (len > head && memcmp(frame, SUBSCRIBED_PONG_HEAD, head) == 0 &&
                                                  bulk_is(frame + head, len - head, PUBSUB_MARKER));
}

int pubsub_confirmation_parse(const char *frame, size_t len, int *shard, long long *count)
{
    static const char head[] = "*3\r\n$"; /* RESP2; a RESP3 connection's is a push, ">3\r\n$" */
    if (len < 20 || (frame[0] != '*' && frame[0] != '>') || memcmp(frame + 1, head + 1, sizeof(head) - 2) != 0)
        return 0;
    const char *p = frame + sizeof(head) - 1, *end = frame + len;
    long long wl;
    const char *crlf = memchr(p, '\r', (size_t)(end - p));
    static const char tail[] = "subscribe"; /* the shortest word, and how every one ends */
    const long long tl = (long long)sizeof(tail) - 1, longest = (long long)sizeof("punsubscribe") - 1;
    if (!crlf || resp_parse_ll(p, (size_t)(crlf - p), &wl) != 0 || wl < tl || wl > longest) return 0;
    const char *word = crlf + 2;
    if (word + wl + 2 > end) return 0;
    if (memcmp(word + wl - tl, tail, (size_t)tl) != 0) return 0;
    /* ssubscribe / sunsubscribe, not subscribe */
    *shard =
        word[0] == 's' && (wl == (long long)sizeof("ssubscribe") - 1 || wl == (long long)sizeof("sunsubscribe") - 1);
    /* the third element is an integer, ":<count>\r\n", and ends the frame */
    if (end[-2] != '\r' || end[-1] != '\n') return 0;
    const char *colon = end - 3;
    while (colon > word && *colon != ':' && *colon != '\n') colon--;
    if (colon <= word + 2 || *colon != ':' || colon[-2] != '\r' || colon[-1] != '\n') return 0;
    return resp_parse_ll(colon + 1, (size_t)(end - 2 - colon - 1), count) == 0;
}

void pubsub_marker_sent(struct pubsub *ps, int inst)
{
    assert(inst >= 0 && inst < CONFIG_MAX_INSTANCES && ps->pin[inst]);
    ps->markers[inst]++;
    ps->markers_total++;
}

enum pubsub_frame pubsub_on_frame(struct pubsub *ps, int inst, const char *frame, size_t len)
{
    assert(inst >= 0 && inst < CONFIG_MAX_INSTANCES);
    if (pubsub_is_marker_answer(frame, len)) {
        assert(ps->markers[inst] > 0 && ps->markers_total >= ps->markers[inst]);
        ps->markers[inst]--;
        ps->markers_total--;
        return ps->markers_total == 0 ? PUBSUB_FRAME_SETTLED : PUBSUB_FRAME_MARKER;
    }
    int shard = 0;
    long long count = 0;
    if (pubsub_confirmation_parse(frame, len, &shard, &count)) {
        if (shard)
            ps->shard[inst] = (int)count;
        else
            ps->normal[inst] = (int)count;
    }
    return PUBSUB_FRAME_CLIENT;
}

int pubsub_subscribed(const struct pubsub *ps)
{
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++)
        if (ps->pin[i] && ps->normal[i] + ps->shard[i] > 0) return 1;
    return 0;
}

int pubsub_holds_any(const struct pubsub *ps)
{
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++)
        if (ps->pin[i]) return 1;
    return 0;
}

int pubsub_instance_of(const struct pubsub *ps, const struct backend *b)
{
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++)
        if (b && ps->pin[i] == b) return i;
    return -1;
}

int pubsub_lost(struct pubsub *ps, int inst)
{
    assert(inst >= 0 && inst < CONFIG_MAX_INSTANCES && ps->pin[inst]);
    int had = ps->normal[inst] + ps->shard[inst] > 0;
    assert(ps->markers_total >= ps->markers[inst]); /* the total sums the instances' */
    ps->markers_total -= ps->markers[inst];
    ps->pin[inst] = NULL;
    ps->normal[inst] = ps->shard[inst] = ps->markers[inst] = 0;
    return had;
}
