/* cmdclass.c: a pointer-keyed table over the command table, built once, for O(1) command facts. */
#include "cmdclass.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define SLOTS 2048 /* power of two, well above the ~370 commands and subcommands of Redis 7.0 */

struct slot {
    const struct command_def *cmd;
    uint16_t id;
    const char *never_forwarded; /* filled by cmdclass_never_forwarded's first call */
};

static struct slot slots[SLOTS];
static pthread_once_t slots_once = PTHREAD_ONCE_INIT;
static pthread_once_t verdict_once = PTHREAD_ONCE_INIT;
static const char *(*verdict_fn)(const struct command_def *);

static const char *const id_names[CID_COUNT] = {
    [CID_OTHER] = "",
#define CMDCLASS_NAME(id, name) [id] = name,
    CMDCLASS_NAMES(CMDCLASS_NAME)
#undef CMDCLASS_NAME
};

static size_t slot_of(const struct command_def *cmd)
{
    uint64_t h = (uint64_t)(uintptr_t)cmd * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 53) & (SLOTS - 1);
}

static void slot_add(const struct command_def *cmd)
{
    size_t i = slot_of(cmd);
    while (slots[i].cmd) i = (i + 1) & (SLOTS - 1);
    slots[i].cmd = cmd;
    for (int id = 1; id < CID_COUNT; id++)
        if (strcmp(cmd->name, id_names[id]) == 0) slots[i].id = (uint16_t)id;
}

static void slots_build(void)
{
    for (size_t i = 0; i < command_table_len; i++) {
        slot_add(&command_table[i]);
        for (int j = 0; j < command_table[i].nsubcommands; j++) slot_add(&command_table[i].subcommands[j]);
    }
}

static const struct slot *slot_find(const struct command_def *cmd)
{
    pthread_once(&slots_once, slots_build);
    for (size_t i = slot_of(cmd);; i = (i + 1) & (SLOTS - 1)) {
        if (slots[i].cmd == cmd) return &slots[i];
        if (!slots[i].cmd) return NULL;
    }
}

enum cmd_id cmdclass_id(const struct command_def *cmd)
{
    /* policy, access and ttl ask about the same command several times per request */
    static __thread const struct command_def *last;
    static __thread enum cmd_id last_id;
    if (cmd == last) return last_id;
    const struct slot *s = slot_find(cmd);
    if (s) {
        last = cmd;
        last_id = (enum cmd_id)s->id;
        return last_id;
    }
    /* a command outside the table (tests): compare once */
    for (int id = 1; id < CID_COUNT; id++)
        if (strcmp(cmd->name, id_names[id]) == 0) return (enum cmd_id)id;
    return CID_OTHER;
}

static void verdicts_build(void)
{
    for (size_t i = 0; i < SLOTS; i++)
        if (slots[i].cmd) slots[i].never_forwarded = verdict_fn(slots[i].cmd);
}

const char *cmdclass_never_forwarded(const struct command_def *cmd, const char *(*compute)(const struct command_def *))
{
    const struct slot *s = slot_find(cmd);
    if (!s) return compute(cmd);
    verdict_fn = compute;
    pthread_once(&verdict_once, verdicts_build);
    return s->never_forwarded;
}
