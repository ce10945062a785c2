/* info.h: INFO's instance sections (keyspace, memory, replication): which a request names, and the one reply made of keygate's sections and each instance's, labelled. Pure byte work. */
#ifndef KEYGATE_INFO_H
#define KEYGATE_INFO_H

#include <stddef.h>

#include "util.h"

/*
 *   INFO server keyspace memory
 *     keygate's own sections (server)           ->  "# Server\r\n...\r\n\r\n"
 *     the same INFO to every instance           ->  "# Keyspace\r\ndb0:...\r\n\r\n# Memory\r\n..."
 *   one bulk:  keygate's sections, then per instance (in config order) its instance sections
 *              with the header relabelled "# Keyspace (instance durable)"; every other section
 *              an instance sends (its server, ...) is left out.
 */

/* 1 when argv[1..argc) names an instance section (keyspace, memory, replication; Redis's
 * case-insensitive compare), so INFO must ask the instances. "all", "everything", "default"
 * and no argument do not: INFO stays keygate's own, answered without a backend. */
int info_names_instance_section(size_t argc, const char *const *argv, const size_t *argvlen);

/* One instance's INFO reply (a framed RESP reply) and the instance's name. */
struct info_part {
    const char *name;
    const char *reply;
    size_t len;
};

/*
 * Append the merged INFO reply to out: a bulk of `local` (keygate's sections, each ending in
 * a blank line, as local.c writes them) followed by the instance sections of every part,
 * relabelled, sections separated by a blank line and no blank line at the end, as Redis ends
 * INFO. A part that is an error reply (the instance is down, or refused) makes the reply that
 * error, never a partial INFO. Returns 0, or -1 (out unchanged) when a part is neither a
 * bulk string (or RESP3 verbatim string) nor an error. The reply is a bulk (RESP2's shape).
 */
int info_merge(const char *local, size_t local_len, const struct info_part *parts, int nparts,
               struct bytebuf *out) KG_MUST_CHECK;

#endif
