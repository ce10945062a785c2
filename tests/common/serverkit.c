/* serverkit.c: files, passwords, folders, logs, connections and replies for the cluster and Sentinel harnesses (serverkit.h). */
#include "serverkit.h"

#include <assert.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int serverkit_write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return -1;
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)n;
    }
    return close(fd);
}

void serverkit_random_hex(char *out, size_t bytes)
{
    unsigned char raw[32];
    assert(bytes <= sizeof raw);
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, raw, bytes) : -1;
    if (fd >= 0) close(fd);
    for (size_t i = 0; i < bytes; i++) sprintf(out + 2 * i, "%02x", (n == (ssize_t)bytes ? raw[i] : rand()) & 0xff);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void serverkit_remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void serverkit_print_log_tail(const char *title, const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) return;
    char buf[4097];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > 4096 ? size - 4096 : 0, SEEK_SET);
    size_t n = fread(buf, 1, 4096, f);
    fclose(f);
    buf[n] = '\0';
    fprintf(stderr, "---- %s (%s, last 4 KiB) ----\n%s\n---- end of %s ----\n", title, path, buf, title);
}

redisContext *serverkit_connect(int port, const char *password, int connect_ms, int io_ms)
{
    struct timeval ct = {connect_ms / 1000, (connect_ms % 1000) * 1000};
    struct timeval it = {io_ms / 1000, (io_ms % 1000) * 1000};
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", port, ct);
    if (ctx == NULL) return NULL;
    if (ctx->err || redisSetTimeout(ctx, it) != REDIS_OK) {
        redisFree(ctx);
        return NULL;
    }
    redisReply *r = redisCommand(ctx, "AUTH %s", password);
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    if (!ok) {
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

int serverkit_str_is(const redisReply *r, const char *s)
{
    return r != NULL && r->type == REDIS_REPLY_STRING && strcmp(r->str, s) == 0;
}

const char *serverkit_reply_text(const redisReply *r)
{
    if (r == NULL) return "(no reply)";
    if (r->type == REDIS_REPLY_NIL) return "(nil)";
    if (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STRING) return r->str;
    return "(not a string)";
}

const redisReply *serverkit_map_get(const redisReply *m, const char *name)
{
    if (m == NULL || m->type != REDIS_REPLY_ARRAY) return NULL;
    for (size_t k = 0; k + 1 < m->elements; k += 2)
        if (serverkit_str_is(m->element[k], name)) return m->element[k + 1];
    return NULL;
}
