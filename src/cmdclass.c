/* cmdclass.c: a pointer-keyed table over the command table, built once, for O(1) command facts. */
#include "cmdclass.h"

#include <assert.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define SLOTS 2048 /* power of two, well above the ~370 commands and subcommands of Redis 7.0 */

struct slot {
    const struct command_def *cmd;
    uint16_t id;    /* enum cmd_id */
    uint16_t index; /* dense, in table order */
};

static struct slot slots[SLOTS];
static size_t nindex; /* indexes handed out by slots_build */
static pthread_once_t slots_once = PTHREAD_ONCE_INIT;

static const char *const id_names[CID_COUNT] = {[CID_OTHER] = "",
#define CMDCLASS_NAME(id, name) [id] = name,
                                                CMDCLASS_NAMES(CMDCLASS_NAME)
#undef CMDCLASS_NAME
};

_Static_assert(SLOTS <= UINT16_MAX + 1, "a slot's index fits its uint16_t");

static size_t slot_of(const struct command_def *cmd)
{
    uint64_t h = (uint64_t)(uintptr_t)cmd * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 53) & (SLOTS - 1);
}

static enum cmd_id id_by_name(const char *name)
{
    for (int id = 1; id < CID_COUNT; id++)
        if (strcmp(name, id_names[id]) == 0) return (enum cmd_id)id;
    return CID_OTHER;
}

static void slot_add(const struct command_def *cmd)
{
    size_t i = slot_of(cmd);
    while (slots[i].cmd) i = (i + 1) & (SLOTS - 1);
    slots[i].cmd = cmd;
    slots[i].id = (uint16_t)id_by_name(cmd->name);
    slots[i].index = (uint16_t)nindex++;
}

static void slots_build(void)
{
    for (size_t i = 0; i < command_table_len; i++) {
        slot_add(&command_table[i]);
        for (int j = 0; j < command_table[i].nsubcommands; j++) slot_add(&command_table[i].subcommands[j]);
    }
    assert(nindex < SLOTS); /* open addressing needs a free slot to end every probe */
}

/* The slot of cmd, or NULL for a command outside the table. */
static const struct slot *slot_find(const struct command_def *cmd)
{
    pthread_once(&slots_once, slots_build);
    for (size_t i = slot_of(cmd);; i = (i + 1) & (SLOTS - 1)) {
        if (slots[i].cmd == cmd) return &slots[i];
        if (!slots[i].cmd) return NULL;
    }
}

/* The last command asked about, per thread: policy, access and ttl ask about the same
 * command several times per request, so the answer is one compare away. */
static __thread const struct command_def *last;
static __thread uint16_t last_id, last_index;

/* Look cmd up and remember it as the last one; 0 when it is outside the table. */
static __attribute__((noinline)) int remember(const struct command_def *cmd)
{
    const struct slot *s = slot_find(cmd);
    if (!s) return 0;
    last = cmd;
    last_id = s->id;
    last_index = s->index;
    return 1;
}

enum cmd_id cmdclass_id(const struct command_def *cmd)
{
    if (cmd == last || remember(cmd)) return (enum cmd_id)last_id;
    return id_by_name(cmd->name); /* a command outside the table (tests): compare */
}

size_t cmdclass_index(const struct command_def *cmd)
{
    if (cmd == last || remember(cmd)) return last_index;
    return CMDCLASS_NO_INDEX;
}

size_t cmdclass_count(void)
{
    pthread_once(&slots_once, slots_build);
    return nindex;
}
