/* pins.c: a client's dedicated connections (WATCH, blocking, subscriber pins): set up, moved, dropped, here only. */
#include "pins.h"

#include "backend.h"
#include "nodes.h"
#include "blocked.h"
#include "pubsub.h"
#include "replies.h"

/* A dedicated connection of c to the node of (instance, slot): an idle one, or a new one; NULL at
 * max-pinned or when the slot's owner is not known. */
static struct backend *pins_open(struct client *c, int instance, int slot)
{
    return nodes_conn(c->worker, instance,
                      &(struct node_want){.slot = slot, .resp3 = c->resp3, .pinned = 1, .owner = c});
}

/* ---- WATCH ---- */

struct backend *pins_watch(struct client *c, int instance, int slot)
{
    if (c->watch_pin) return c->watch_pin;
    struct backend *b = pins_open(c, instance, slot);
    if (!b) return NULL;
    c->watch_pin = b;
    session_watch(&c->session, instance, slot);
    return b;
}

void pins_watch_release(struct client *c)
{
    if (!c->watch_pin) return;
    backend_unpin(c->watch_pin);
    c->watch_pin = NULL;
    session_unwatch(&c->session);
}

void pins_watch_abandon(struct client *c)
{
    if (!c->watch_pin) return;
    backend_abandon(c->watch_pin); /* still WATCHing: never reuse */
    c->watch_pin = NULL;
    session_unwatch(&c->session);
}

int pins_watch_lost_take(struct client *c)
{
    int lost = c->watch_lost;
    c->watch_lost = 0;
    return lost;
}

/* ---- blocking commands ---- */

/* b no longer carries c's blocking command: the CLIENT UNBLOCK table forgets it. One that named
 * it may still be on its way, so b must not carry another client's blocking command. */
static void pins_block_forget(struct client *c, struct backend *b)
{
    b->block_client = 0;
    if (blocked_remove(&c->worker->proxy->blocked, c->id)) backend_unblock_sent(b);
}

struct backend *pins_block(struct client *c, int instance, int slot, int64_t block_ms)
{
    struct worker *w = c->worker;
    struct backend *b = pins_open(c, instance, slot);
    if (!b) return NULL;
    if (c->block_pin) pins_block_forget(c, c->block_pin); /* sent again: the old one answered */
    c->block_pin = b;
    b->block_client = c->id; /* CLIENT UNBLOCK, from any worker, finds it (blocked.h) */
    blocked_add(&w->proxy->blocked, c->id, c->session.user ? c->session.user->name : NULL, instance, b->server_id);
    backend_exempt(b, block_ms); /* it may wait as long as the command blocks */
    return b;
}

void pins_unblock(struct client *c)
{
    if (c->block_pin) pins_block_forget(c, c->block_pin);
    c->block_pin = NULL;
    session_unblock(&c->session);
}

/* ---- subscriber connections ---- */

struct backend *pins_subscriber(struct client *c, int instance, int slot)
{
    struct backend *b = pins_open(c, instance, slot);
    if (!b) return NULL;
    b->subscriber = 1;
    c->pubsub.pin[instance] = b;
    if (!c->resp3) session_set_subscribed(&c->session, 1); /* RESP2's subscribed mode */
    return b;
}

void pins_drop_subscribers(struct client *c)
{
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++) {
        struct backend *b = c->pubsub.pin[i];
        if (!b) continue;
        (void)pubsub_lost(&c->pubsub, i);
        backend_abandon(b);
    }
}

/* ---- losing them ---- */

void pins_owner_lost(struct backend *b, struct client *c)
{
    if (c->block_pin == b) {
        (void)blocked_remove(&c->worker->proxy->blocked, c->id);
        c->block_pin = NULL; /* its request got -UNAVAILABLE; no other state */
        return;
    }
    if (c->watch_pin == b) {
        /* the WATCH is gone: EXEC must not run as if nothing were watched */
        c->watch_pin = NULL;
        c->watch_lost = 1;
        return;
    }
    int inst = pubsub_instance_of(&c->pubsub, b);
    if (inst < 0) return;
    int had = pubsub_lost(&c->pubsub, inst);
    char text[128], msg[ERROR_REPLY_MAX];
    replies_unavailable(text, sizeof(text), c->worker->cfg->instance_names[inst]);
    conn_out(c, msg, replies_error(msg, sizeof(msg), text));
    if (!c->resp3) session_set_subscribed(&c->session, pubsub_subscribed(&c->pubsub));
    /* its subscriptions are gone: close after the error, never lose messages silently */
    if (had) conn_close_when_done(c);
    conn_wake(c);
}

void pins_drop_all(struct client *c)
{
    if (c->watch_pin) backend_abandon(c->watch_pin);
    c->watch_pin = NULL;
    if (c->block_pin) {
        (void)blocked_remove(&c->worker->proxy->blocked, c->id); /* the connection is closed anyway */
        c->block_pin->block_client = 0;
        backend_abandon(c->block_pin);
    }
    c->block_pin = NULL;
    for (int i = 0; i < CONFIG_MAX_INSTANCES; i++)
        if (c->pubsub.pin[i]) backend_abandon(c->pubsub.pin[i]);
}
