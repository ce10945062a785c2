/* stats.c: summing per-worker counters, counting error replies by code, report-mode counters. */
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

/* ---- report mode and the default line (issue 13) ----------------------------------- */

/* Count n events into a pair's log state; the count to log now, or 0 within the interval. */
static uint32_t log_due(int64_t *logged_ms, uint32_t *unlogged, uint32_t n, int64_t now_ms)
{
    *unlogged += n;
    if (*logged_ms != 0 && now_ms - *logged_ms < STATS_REPORT_LOG_INTERVAL_MS) return 0;
    uint32_t due = *unlogged;
    *unlogged = 0;
    *logged_ms = now_ms ? now_ms : 1;
    return due;
}

uint32_t stats_report_note(struct stats *st, uint32_t index, enum stats_report_reason reason, int64_t now_ms)
{
    uint32_t slot = stats_report_slot(index);
    STAT_INC(&st->report, count[slot][reason]);
    return log_due(&st->report.logged_ms[slot][reason], &st->report.unlogged[slot][reason], 1, now_ms);
}

uint32_t stats_unregistered_note(struct stats *st, int kind, uint32_t n, int64_t now_ms)
{
    STAT_ADD(&st->report, unregistered[kind], n);
    return log_due(&st->report.unregistered_logged_ms[kind], &st->report.unregistered_unlogged[kind], n, now_ms);
}

uint64_t stats_report_sum(const struct stats *blocks, size_t stride, int n, uint32_t slot,
                          enum stats_report_reason reason)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        const struct stats *s = (const struct stats *)((const char *)blocks + (size_t)i * stride);
        sum += __atomic_load_n(&s->report.count[slot][reason], __ATOMIC_RELAXED);
    }
    return sum;
}

uint64_t stats_unregistered_sum(const struct stats *blocks, size_t stride, int n, int kind)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        const struct stats *s = (const struct stats *)((const char *)blocks + (size_t)i * stride);
        sum += __atomic_load_n(&s->report.unregistered[kind], __ATOMIC_RELAXED);
    }
    return sum;
}

const char *stats_report_code(enum stats_report_reason reason)
{
    static const char *const codes[] = {
#define STATS_REPORT_CODE(id, code, word) code,
        STATS_REPORT_REASONS(STATS_REPORT_CODE)
#undef STATS_REPORT_CODE
    };
    return reason < STATS_REPORT_NREASONS ? codes[reason] : "";
}

const char *stats_report_word(enum stats_report_reason reason)
{
    static const char *const words[] = {
#define STATS_REPORT_WORD(id, code, word) word,
        STATS_REPORT_REASONS(STATS_REPORT_WORD)
#undef STATS_REPORT_WORD
    };
    return reason < STATS_REPORT_NREASONS ? words[reason] : "";
}
