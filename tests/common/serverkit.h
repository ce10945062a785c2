/* serverkit.h: what the integration, cluster and Sentinel harnesses share besides processes: files they write for their servers, random passwords, removing a server's folder, a log's tail, AUTHed connections, reading replies. */
#ifndef KEYGATE_SERVERKIT_H
#define KEYGATE_SERVERKIT_H

#include <stddef.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

/* Write text to path (created or truncated, with mode whatever the umask). 0, or -1 (errno). */
int serverkit_write_file(const char *path, const char *text, mode_t mode);

/* bytes (at most 32) random bytes from /dev/urandom as 2 * bytes hex digits and a '\0' in out. */
void serverkit_random_hex(char *out, size_t bytes);

/* Remove the folder dir and everything under it (best effort). */
void serverkit_remove_tree(const char *dir);

/* The whole file at path, malloc'd and NUL-terminated; NULL when it cannot be read. */
char *serverkit_read_file(const char *path);

#define SERVERKIT_LOG_TAIL 8192 /* what serverkit_print_log_tail prints of a log at the most */

/* The last SERVERKIT_LOG_TAIL bytes of the file at path on stderr, between lines naming title. */
void serverkit_print_log_tail(const char *title, const char *path);

/* A connection to 127.0.0.1:port AUTHed with password, or not AUTHed when password is NULL
 * (connect_ms and io_ms timeouts); NULL when it cannot connect or the AUTH is refused. */
redisContext *serverkit_connect(int port, const char *password, int connect_ms, int io_ms);

/* Run `promtool check metrics` on text (a /metrics body), through the files dir/metrics.txt and
 * dir/promtool.out: 0 when it accepts it with nothing to say, else -1 with what it printed
 * (or why it did not run) in why. */
int serverkit_promtool_check(const char *text, const char *dir, char *why, size_t whylen);

/* Is r a bulk string equal to s? */
int serverkit_str_is(const redisReply *r, const char *s);

/* r's text (status, error or string), "(integer) N" (a buffer of the calling thread: use it before its next
 * call), "(nil)", "(no reply)" or "(not a string)". */
const char *serverkit_reply_text(const redisReply *r);

/* The value after the bulk string `name` in the flat name/value array m (CLUSTER SHARDS, SENTINEL
 * MASTER ...); NULL when absent or m is not an array. */
const redisReply *serverkit_map_get(const redisReply *m, const char *name);

#endif
