/* replywin.c: a client's reply window: how many reply bytes it may have Redis build for it before it reads them. */
#include "replywin.h"

void replywin_init(struct replywin *w, uint64_t cap)
{
    w->window = REPLYWIN_START < cap ? REPLYWIN_START : cap;
    w->est = REPLYWIN_EST_START;
    w->inflight = 0;
    w->taken = 0;
}

void replywin_taken(struct replywin *w, uint64_t taken_total, uint64_t cap)
{
    if (taken_total <= w->taken) return;
    uint64_t grown = w->window + (taken_total - w->taken);
    w->taken = taken_total;
    w->window = grown < cap ? grown : cap;
}
