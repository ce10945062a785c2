/* session.c: the client's state as policy reads it (its transitions), and the argument helpers every layer reads a request with. */
#include "session.h"

#include "args.h"

#include <assert.h>

void session_init(struct session *s, int authenticated)
{
    *s = (struct session){.authenticated = authenticated,
                          .mode = SESSION_NORMAL,
                          .multi_instance = -1,
                          .multi_slot = -1,
                          .watch_instance = -1,
                          .watch_slot = -1,
                          .write_slot = -1};
}

void session_multi_begin(struct session *s)
{
    assert(s->mode == SESSION_NORMAL); /* policy refuses MULTI elsewhere */
    s->mode = SESSION_MULTI;
    s->multi_instance = -1;
    s->multi_slot = -1;
    s->multi_crossslot = 0;
}

void session_multi_queued(struct session *s, int instance, int slot)
{
    assert(s->mode == SESSION_MULTI);
    if (s->multi_instance < 0 && instance >= 0) s->multi_instance = instance;
    if (slot < -1 || (slot >= 0 && s->multi_slot >= 0 && slot != s->multi_slot)) s->multi_crossslot = 1;
    if (s->multi_slot < 0 && slot >= 0) s->multi_slot = slot;
}

void session_multi_end(struct session *s)
{
    assert(s->mode == SESSION_MULTI);
    s->mode = SESSION_NORMAL;
    s->multi_instance = -1;
    s->multi_slot = -1;
    s->multi_crossslot = 0;
}

void session_block(struct session *s)
{
    assert(s->mode == SESSION_NORMAL); /* policy blocks only outside MULTI and subscribed mode */
    s->mode = SESSION_BLOCKED;
}

void session_unblock(struct session *s)
{
    assert(s->mode == SESSION_BLOCKED);
    s->mode = SESSION_NORMAL;
}

void session_set_subscribed(struct session *s, int subscribed)
{
    if (subscribed) {
        assert(s->mode == SESSION_NORMAL || s->mode == SESSION_SUBSCRIBED); /* policy subscribes from these only */
        s->mode = SESSION_SUBSCRIBED;
    } else if (s->mode == SESSION_SUBSCRIBED) {
        s->mode = SESSION_NORMAL; /* an idle subscriber connection lost in MULTI changes nothing */
    }
}

void session_watch(struct session *s, int instance, int slot)
{
    assert(instance >= 0 && (s->watch_instance < 0 || s->watch_instance == instance));
    s->watch_instance = instance;
    s->watch_slot = slot;
}

void session_unwatch(struct session *s)
{
    s->watch_instance = -1;
    s->watch_slot = -1;
}

void session_wrote(struct session *s, int instance, int slot, uint64_t node)
{
    assert(instance >= 0);
    s->wrote = 1;
    s->write_instance = instance;
    s->write_slot = slot;
    s->write_node = node;
}

void session_reset(struct session *s, int authenticated)
{
    assert(s->mode != SESSION_BLOCKED); /* nothing is decided while a blocking command runs */
    int wrote = s->wrote, write_instance = s->write_instance, write_slot = s->write_slot;
    uint64_t write_node = s->write_node;
    session_init(s, authenticated);
    s->wrote = wrote;
    s->write_instance = write_instance;
    s->write_slot = write_slot;
    s->write_node = write_node;
}

void session_client_reply(struct session *s, enum session_reply mode)
{
    if (mode == SESSION_REPLY_ON) {
        s->reply_off = s->reply_skip = s->reply_skip_next = 0;
    } else if (mode == SESSION_REPLY_OFF) {
        s->reply_off = 1;
    } else if (!s->reply_off) {
        s->reply_skip_next = 1; /* SKIP while OFF does nothing, as Redis */
    }
}

int session_arg_is(const struct policy_request *r, size_t i, const char *word)
{
    return i < r->argc && args_word_is(r->argv[i], r->argvlen[i], word);
}

int session_arg_ll(const struct policy_request *r, size_t i, long long *out)
{
    return i < r->argc ? args_ll(r->argv[i], r->argvlen[i], out) : -1;
}

const char *session_printable(const char *s, size_t len, char *out, size_t outlen)
{
    size_t n = len < 128 ? len : 128;
    if (n > outlen - 1) n = outlen - 1;
    for (size_t i = 0; i < n; i++) out[i] = (s[i] == '\r' || s[i] == '\n' || s[i] == '\0') ? ' ' : s[i];
    out[n] = '\0';
    return out;
}
