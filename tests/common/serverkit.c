/* serverkit.c: files, passwords, folders, logs, connections and replies for the integration, cluster and Sentinel harnesses (serverkit.h). */
#include "serverkit.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int serverkit_write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return -1;
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)n;
    }
    fchmod(fd, mode); /* the mode as asked, whatever the umask */
    return close(fd);
}

char *serverkit_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf != NULL && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *bigger = realloc(buf, cap *= 2);
            if (bigger == NULL) free(buf);
            buf = bigger;
        }
    }
    fclose(f);
    if (buf != NULL) buf[len] = '\0';
    return buf;
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
    char *text = serverkit_read_file(path);
    if (text == NULL) return;
    size_t len = strlen(text);
    const char *from = len > SERVERKIT_LOG_TAIL ? text + len - SERVERKIT_LOG_TAIL : text;
    fprintf(stderr, "---- %s (%s)%s ----\n%s\n---- end of %s ----\n", title, path, from != text ? ", last 8 KiB" : "",
            from, title);
    free(text);
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
    if (password == NULL) return ctx;
    redisReply *r = redisCommand(ctx, "AUTH %s", password);
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    if (!ok) {
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

int serverkit_promtool_check(const char *text, const char *dir, char *why, size_t whylen)
{
    char path[4096], out[4096], sh[3 * 4096];
    snprintf(path, sizeof path, "%s/metrics.txt", dir);
    snprintf(out, sizeof out, "%s/promtool.out", dir);
    if (serverkit_write_file(path, text, 0644) != 0) {
        snprintf(why, whylen, "cannot write %s", path);
        return -1;
    }
    snprintf(sh, sizeof sh, "promtool check metrics < %s > %s 2>&1", path, out);
    int rc = system(sh);
    char *said = serverkit_read_file(out);
    int ok = WIFEXITED(rc) && WEXITSTATUS(rc) == 0 && said != NULL && said[0] == '\0';
    snprintf(why, whylen, "promtool (status %d): %s", rc, said ? said : "(no output file)");
    free(said);
    return ok ? 0 : -1;
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
    if (r->type == REDIS_REPLY_INTEGER) { /* a buffer of the thread: printed before its next call */
        static __thread char num[32];
        snprintf(num, sizeof num, "(integer) %lld", r->integer);
        return num;
    }
    return "(not a string)";
}

const redisReply *serverkit_map_get(const redisReply *m, const char *name)
{
    if (m == NULL || m->type != REDIS_REPLY_ARRAY) return NULL;
    for (size_t k = 0; k + 1 < m->elements; k += 2)
        if (serverkit_str_is(m->element[k], name)) return m->element[k + 1];
    return NULL;
}
