/* frames.c: the bytes a backend gets for a client's command: its frame, rewritten as the plan says (pure). */
#include "frames.h"

#include <stdio.h>
#include <string.h>

#include "budget.h"

void frames_rewrite(struct bytebuf *out, const struct resp_parser *p, int resp3, const struct plan *plan,
                    const char *frame)
{
    char hdr[32];
    hdr[0] = '*';
    /* over budget: EVAL <check script> ncheck key... <-OOM text> <the command, as below> */
    size_t budget_args = plan->budget_ncheck ? 4u + plan->budget_ncheck : 0;
    size_t n = 1 + format_ll(hdr + 1, (long long)(budget_args + p->argc + plan->nappend));
    hdr[n++] = '\r';
    hdr[n++] = '\n';
    bytebuf_add(out, hdr, n);
    if (plan->budget_ncheck) {
        bytebuf_add(out, STR_AND_LEN("$4\r\nEVAL\r\n"));
        if (resp3)
            bytebuf_add_bulk(out, STR_AND_LEN(BUDGET_SCRIPT_RESP3));
        else
            bytebuf_add_bulk(out, STR_AND_LEN(BUDGET_SCRIPT));
        char num[24];
        bytebuf_add_bulk(out, num, format_ll(num, (long long)plan->budget_ncheck));
        for (uint16_t i = 0; i < plan->budget_ncheck; i++) {
            size_t ai = (size_t)plan->budget_check[i];
            bytebuf_add_bulk(out, resp_arg_ptr(p, frame, ai), p->args[ai].len);
        }
        bytebuf_add_bulk(out, plan->budget_msg, strlen(plan->budget_msg));
    }
    if (!p->is_inline && !plan->ttl.getex) {
        bytebuf_add(out, frame + p->header_len, p->frame_len - p->header_len);
    } else {
        for (size_t i = 0; i < p->argc; i++) {
            if (i == 0 && plan->ttl.getex)
                bytebuf_add_bulk(out, STR_AND_LEN("GETEX"));
            else
                bytebuf_add_bulk(out, resp_arg_ptr(p, frame, i), p->args[i].len);
        }
    }
    for (size_t i = 0; i < plan->nappend; i++) bytebuf_add_bulk(out, plan->append[i], plan->append_len[i]);
}

void frames_fix(struct bytebuf *out, const struct resp_parser *p, const char *frame, const struct ttl_fix *f)
{
    char ms[24];
    size_t n = format_ll(ms, (long long)f->ttl_ms);
    if (f->mode == TTL_FIX_RESET)
        bytebuf_add(out, STR_AND_LEN("*3\r\n$7\r\nPEXPIRE\r\n"));
    else if (f->mode == TTL_FIX_NX)
        bytebuf_add(out, STR_AND_LEN("*4\r\n$7\r\nPEXPIRE\r\n"));
    else
        bytebuf_add(out, STR_AND_LEN("*5\r\n$7\r\nPEXPIRE\r\n"));
    bytebuf_add_bulk(out, resp_arg_ptr(p, frame, f->argi), p->args[f->argi].len);
    bytebuf_add_bulk(out, ms, (size_t)n);
    if (f->mode == TTL_FIX_NX) {
        bytebuf_add_bulk(out, STR_AND_LEN("NX"));
    } else if (f->mode == TTL_FIX_CAP) {
        bytebuf_add_bulk(out, STR_AND_LEN("XX")); /* only a key that has a TTL: none is given */
        bytebuf_add_bulk(out, STR_AND_LEN("LT"));
    }
}

void frames_inval(struct bytebuf *out, const struct resp_parser *p, const char *frame, const struct nc_inval_key *k)
{
    bytebuf_add(out, STR_AND_LEN("*5\r\n$4\r\nXADD\r\n"));
    bytebuf_add_bulk(out, k->ns->nc_stream, k->ns->nc_stream_len);
    bytebuf_add(out, STR_AND_LEN("$1\r\n*\r\n$1\r\nk\r\n"));
    bytebuf_add_bulk(out, resp_arg_ptr(p, frame, k->argi), p->args[k->argi].len);
}

void frames_queued(struct bytebuf *out, const struct resp_parser *p, int resp3, const struct plan *plan,
                   const char *frame)
{
    frames_command(out, p, resp3, plan, frame);
    for (size_t i = 0; i < plan->ttl.nfix; i++) frames_fix(out, p, frame, &plan->ttl.fix[i]);
    for (uint32_t i = 0; i < plan->inval.n; i++) frames_inval(out, p, frame, &plan->inval.key[i]);
}

void frames_fill(struct bytebuf *out, size_t limit, char mode, const struct resp_parser *p, const char *frame,
                 const char *key, size_t key_len, size_t first, size_t argc)
{
    static const char script[] = NCPOLICY_FILL_SCRIPT;
    char num[24];
    size_t nl = format_ll(num, (long long)limit);
    size_t extra = first < argc ? argc - first : 0;
    char hdr[32];
    hdr[0] = '*';
    size_t hl = 1 + format_ll(hdr + 1, (long long)(6 + extra));
    hdr[hl++] = '\r';
    hdr[hl++] = '\n';
    bytebuf_add(out, hdr, hl);
    bytebuf_add(out, STR_AND_LEN("$4\r\nEVAL\r\n"));
    bytebuf_add_bulk(out, script, sizeof(script) - 1);
    bytebuf_add(out, STR_AND_LEN("$1\r\n1\r\n"));
    bytebuf_add_bulk(out, key, key_len);
    bytebuf_add_bulk(out, num, nl);
    bytebuf_add_bulk(out, &mode, 1);
    for (size_t i = first; i < argc; i++) bytebuf_add_bulk(out, resp_arg_ptr(p, frame, i), p->args[i].len);
}

void frames_part(struct bytebuf *out, const struct resp_parser *p, const char *frame, const int16_t *key_part, int part,
                 int count)
{
    char hdr[32];
    int hn = snprintf(hdr, sizeof(hdr), "*%d\r\n", 1 + count);
    bytebuf_add(out, hdr, (size_t)hn);
    bytebuf_add_bulk(out, resp_arg_ptr(p, frame, 0), p->args[0].len);
    for (size_t i = 1; i < p->argc; i++)
        if (key_part[i] == part) bytebuf_add_bulk(out, resp_arg_ptr(p, frame, i), p->args[i].len);
}

void frames_scan(struct bytebuf *out, const struct resp_parser *p, const char *frame, uint64_t cursor)
{
    char hdr[32], digits[24];
    int hn = snprintf(hdr, sizeof(hdr), "*%zu\r\n", p->argc);
    int dn = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)cursor);
    bytebuf_add(out, hdr, (size_t)hn);
    bytebuf_add_bulk(out, resp_arg_ptr(p, frame, 0), p->args[0].len);
    bytebuf_add_bulk(out, digits, (size_t)dn);
    for (size_t i = 2; i < p->argc; i++) bytebuf_add_bulk(out, resp_arg_ptr(p, frame, i), p->args[i].len);
}
