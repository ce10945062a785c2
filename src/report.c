/* report.c: counting and rate-limited logging of what report mode let through and the default line took. */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"
#include "util.h"

const char *report_escape(const char *s, size_t len, size_t shown, char *out, size_t outlen)
{
    size_t o = 0;
    if (outlen == 0) return out;
    for (size_t i = 0; i < len && i < shown; i++) {
        unsigned char ch = (unsigned char)s[i];
        char one[5];
        size_t n;
        if (ch == '\\' || ch == '\'')
            one[0] = '\\', one[1] = (char)ch, n = 2;
        else if (ch >= 0x20 && ch < 0x7f)
            one[0] = (char)ch, n = 1;
        else
            n = (size_t)snprintf(one, sizeof one, "\\x%02x", ch);
        if (o + n + 1 > outlen) break;
        for (size_t k = 0; k < n; k++) out[o++] = one[k];
    }
    if (len > shown && o + 4 <= outlen) {
        out[o++] = '.', out[o++] = '.', out[o++] = '.';
    }
    out[o] = '\0';
    return out;
}

/* The label of entry `index` of reg: its prefix, "(default)" for the default line. */
static const char *entry_name(const struct registry *reg, uint32_t index)
{
    if (reg->dflt && index == reg->dflt->index) return REGISTRY_DEFAULT_NAME;
    return index < reg->count ? reg->entries[index].prefix : "?";
}

void report_note(struct worker *w, const struct plan *plan, const struct policy_request *r)
{
    if (plan->kind != PLAN_FORWARD) return;
    const struct plan_report *rp = &plan->report;
    if (!rp->nevents && !rp->unregistered) return;
    const struct registry *reg = w->cfg->registry;
    int64_t now = r->now_ms;
    const char *cmd = r->cmd ? r->cmd->name : "?";
    if (rp->unregistered) {
        int kind = rp->unregistered_kind == NS_CHANNEL;
        uint32_t due = stats_unregistered_note(&w->stats, kind, rp->unregistered, now);
        if (due && rp->unregistered_arg >= 0 && (size_t)rp->unregistered_arg < r->argc) {
            char shown[REPORT_KEY_SHOWN * 4 + 4];
            size_t ai = (size_t)rp->unregistered_arg;
            report_escape(r->argv[ai], r->argvlen[ai], REPORT_KEY_SHOWN, shown, sizeof shown);
            log_event(LOG_WARN, "unregistered", &(struct log_fields){.ns = REGISTRY_DEFAULT_NAME},
                      "unregistered %s '%s' taken by the default line (with '%s'): %u since the last line",
                      kind ? "channel" : "key", shown, cmd, due);
        }
    }
    for (uint32_t i = 0; i < rp->nevents; i++) {
        const struct plan_report_event *ev = &rp->events[i];
        uint32_t due = stats_report_note(&w->stats, ev->index, (enum stats_report_reason)ev->reason, now);
        if (due)
            log_event(LOG_WARN, "report", &(struct log_fields){.ns = entry_name(reg, ev->index)},
                      "report: namespace '%s' %s (with '%s'): %u since the last line", entry_name(reg, ev->index),
                      stats_report_word((enum stats_report_reason)ev->reason), cmd, due);
    }
}

/* The index in `next` of old's entry e, or -1. */
static long entry_in(const struct registry *next, const struct namespace_entry *e)
{
    if (e->is_default) return next->dflt ? (long)next->dflt->index : -1;
    const struct namespace_entry *n = registry_lookup(next, e->kind, e->prefix, e->prefix_len);
    return n && n->prefix_len == e->prefix_len ? (long)n->index : -1;
}

void report_reindex(struct worker *w, const struct registry *old, const struct registry *next)
{
    if (!old || !next || old == next) return;
    struct stats_report *cur = &w->stats.report;
    struct stats_report *fresh = xcalloc(1, sizeof *fresh);
    memcpy(fresh->unregistered, cur->unregistered, sizeof cur->unregistered);
    memcpy(fresh->unregistered_logged_ms, cur->unregistered_logged_ms, sizeof cur->unregistered_logged_ms);
    memcpy(fresh->unregistered_unlogged, cur->unregistered_unlogged, sizeof cur->unregistered_unlogged);
    for (size_t i = 0; i <= old->count; i++) {
        const struct namespace_entry *e = registry_entry(old, i);
        if (!e) continue;
        long to = entry_in(next, e);
        if (to < 0) continue;
        uint32_t from = stats_report_slot(e->index), slot = stats_report_slot((uint32_t)to);
        for (int r = 0; r < STATS_REPORT_NREASONS; r++) {
            fresh->count[slot][r] += cur->count[from][r];
            fresh->unlogged[slot][r] += cur->unlogged[from][r];
            if (cur->logged_ms[from][r] > fresh->logged_ms[slot][r])
                fresh->logged_ms[slot][r] = cur->logged_ms[from][r];
        }
    }
    /* counters are read by admin with relaxed loads: store each one so */
    for (uint32_t slot = 0; slot < STATS_REPORT_SLOTS; slot++)
        for (int r = 0; r < STATS_REPORT_NREASONS; r++)
            __atomic_store_n(&cur->count[slot][r], fresh->count[slot][r], __ATOMIC_RELAXED);
    memcpy(cur->logged_ms, fresh->logged_ms, sizeof cur->logged_ms);
    memcpy(cur->unlogged, fresh->unlogged, sizeof cur->unlogged);
    free(fresh);
}

void report_info(const struct proxy *p, const struct config *cfg, struct evbuffer *out)
{
    const struct registry *reg = cfg->registry;
    const struct stats *st = &p->workers[0].stats;
    size_t stride = sizeof(struct worker);
    const struct namespace_entry *d = reg->dflt;
    if (d) {
        char ttl[32] = "none", max[32] = "none";
        if (d->ttl_ms) duration_format(d->ttl_ms, ttl, sizeof ttl);
        if (d->max_ttl_ms) duration_format(d->max_ttl_ms, max, sizeof max);
        evbuffer_add_printf(out, "ns_default:instance=%s,ttl=%s,max_ttl=%s,sliding=%d,owner=%s,enforce=%s\r\n",
                            cfg->instance_names[d->instance], ttl, max, d->sliding, d->owner,
                            registry_reports(d) ? "report" : "on");
    }
    evbuffer_add_printf(out, "unregistered_keys:%llu\r\nunregistered_channels:%llu\r\n",
                        (unsigned long long)stats_unregistered_sum(st, stride, p->nworkers, 0),
                        (unsigned long long)stats_unregistered_sum(st, stride, p->nworkers, 1));
    for (size_t i = 0; i <= reg->count && i < STATS_REPORT_SLOTS; i++) {
        const struct namespace_entry *e = registry_entry(reg, i);
        if (!registry_reports(e)) continue;
        evbuffer_add_printf(
            out, "report%zu:namespace=%s,would_inject_ttl=%llu", i, entry_name(reg, e->index),
            (unsigned long long)stats_report_sum(st, stride, p->nworkers, (uint32_t)i, STATS_REPORT_INJECT_TTL));
        for (int r = 0; r < STATS_REPORT_NREASONS; r++) {
            if (r == STATS_REPORT_INJECT_TTL || r == STATS_REPORT_NONAMESPACE) continue;
            char code[32];
            size_t k = 0;
            for (const char *c = stats_report_code((enum stats_report_reason)r); *c && k + 1 < sizeof code; c++)
                code[k++] = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
            code[k] = '\0';
            evbuffer_add_printf(out, ",would_refuse_%s=%llu", code,
                                (unsigned long long)stats_report_sum(st, stride, p->nworkers, (uint32_t)i,
                                                                     (enum stats_report_reason)r));
        }
        evbuffer_add_printf(out, "\r\n");
    }
}
