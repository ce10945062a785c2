/* stats.c: summing per-worker counters and counting error replies by code. */
#include "stats.h"

#include <string.h>

void stats_sum(const struct stats *blocks, size_t stride, int n, struct stats *out)
{
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < n; i++) {
        const struct stats *s = (const struct stats *)((const char *)blocks + (size_t)i * stride);
#define STATS_SUM(name, help) out->name += __atomic_load_n(&s->name, __ATOMIC_RELAXED);
        STATS_COUNTERS(STATS_SUM)
#undef STATS_SUM
    }
}

static int starts_with(const char *s, const char *word)
{
    size_t n = strlen(word);
    return strncmp(s, word, n) == 0 && (s[n] == ' ' || s[n] == '\0');
}

void stats_count_error(struct stats *st, const char *error)
{
    if (starts_with(error, "NONAMESPACE"))
        STAT_INC(st, errors_nonamespace);
    else if (starts_with(error, "CROSSINSTANCE"))
        STAT_INC(st, errors_crossinstance);
    else if (starts_with(error, "DENIED"))
        STAT_INC(st, errors_denied);
    else if (starts_with(error, "NOPERM"))
        STAT_INC(st, errors_noperm);
    else if (starts_with(error, "NOAUTH") || starts_with(error, "WRONGPASS"))
        STAT_INC(st, errors_noauth);
    else if (starts_with(error, "UNAVAILABLE"))
        STAT_INC(st, errors_unavailable);
    else
        STAT_INC(st, errors_other);
}
