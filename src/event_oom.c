/* event_oom.c: libevent's allocations under util.h's out-of-memory rule (util.c links without libevent). */
#include "util.h"

#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/event.h>

struct evbuffer *xevbuffer_new(void)
{
    struct evbuffer *b = evbuffer_new();
    if (!b) oom_abort(0); /* evbuffer_new fails only for memory */
    return b;
}

struct event *xevent_new(struct event_base *base, evutil_socket_t fd, short events,
                         void (*cb)(evutil_socket_t, short, void *), void *arg)
{
    struct event *ev = event_new(base, fd, events, cb, arg);
    if (!ev) oom_abort(0); /* with valid flags, event_new fails only for memory */
    return ev;
}

static void *oom_event_malloc(size_t n)
{
    return xmalloc(n);
}

static void *oom_event_realloc(void *p, size_t n)
{
    if (n == 0) { /* realloc(p, 0) frees and answers NULL: libevent expects no more */
        free(p);
        return NULL;
    }
    return xrealloc(p, n);
}

static void oom_event_free(void *p)
{
    free(p);
}

void oom_route_libevent(void)
{
    event_set_mem_functions(oom_event_malloc, oom_event_realloc, oom_event_free);
}
