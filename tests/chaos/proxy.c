/* proxy.c: the delay proxy of the chaos run (proxy.h): a poll loop forwarding bytes between accepted connections and their upstream ones, each chunk released at its time. */
#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 16384
#define MAX_QUEUED (8 << 20) /* bytes queued in one direction before the proxy stops reading that side */

struct chunk {
    struct chunk *next;
    long long release_ms;
    size_t len, off;
    char data[];
};

/* One direction of a pair: read from fd[from], written to fd[1 - from]. */
struct dir {
    struct chunk *head, *tail;
    size_t queued;
    int eof;  /* the reading side said EOF */
    int shut; /* passed on: shutdown(SHUT_WR) of the writing side */
};

struct pair {
    int fd[2];        /* [0] the accepted (keygate's) side, [1] the upstream (redis-server's) side */
    struct dir to[2]; /* to[0]: from fd[1] to fd[0]; to[1]: from fd[0] to fd[1] */
    int dead;
};

struct proxy {
    int listen_fd, wake[2], upstream_port;
    pthread_t thread;
    int delay_ms;        /* atomic */
    long long pending;   /* atomic */
    long long accepted;  /* atomic */
    int stop;            /* atomic */
    struct pair **pairs; /* the thread's */
    size_t npairs, cap;
};

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void pair_close(struct proxy *p, struct pair *pr)
{
    for (int d = 0; d < 2; d++) {
        struct chunk *c = pr->to[d].head;
        while (c != NULL) {
            struct chunk *n = c->next;
            __atomic_sub_fetch(&p->pending, (long long)(c->len - c->off), __ATOMIC_RELAXED);
            free(c);
            c = n;
        }
        pr->to[d].head = pr->to[d].tail = NULL;
        if (pr->fd[d] >= 0) close(pr->fd[d]);
        pr->fd[d] = -1;
    }
    pr->dead = 1;
}

static void accept_one(struct proxy *p)
{
    int fd = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return;
    int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)p->upstream_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (up < 0 || connect(up, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (up >= 0) close(up);
        close(fd); /* the upstream is down: so is the link */
        return;
    }
    if (p->npairs == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 32;
        struct pair **np = realloc(p->pairs, cap * sizeof *np);
        if (np == NULL) {
            close(fd);
            close(up);
            return;
        }
        p->pairs = np;
        p->cap = cap;
    }
    struct pair *pr = calloc(1, sizeof *pr);
    if (pr == NULL) {
        close(fd);
        close(up);
        return;
    }
    set_nonblock(fd);
    set_nonblock(up);
    pr->fd[0] = fd;
    pr->fd[1] = up;
    p->pairs[p->npairs++] = pr;
    __atomic_add_fetch(&p->accepted, 1, __ATOMIC_RELAXED);
}

/* Read what fd[from] has into the direction towards the other side. */
static void read_side(struct proxy *p, struct pair *pr, int from, long long now)
{
    struct dir *d = &pr->to[1 - from];
    struct chunk *c = malloc(sizeof *c + CHUNK);
    if (c == NULL) return;
    ssize_t n = recv(pr->fd[from], c->data, CHUNK, 0);
    if (n <= 0) {
        free(c);
        if (n == 0)
            d->eof = 1;
        else if (errno != EAGAIN && errno != EINTR)
            pair_close(p, pr);
        return;
    }
    c->next = NULL;
    c->len = (size_t)n;
    c->off = 0;
    c->release_ms = now + __atomic_load_n(&p->delay_ms, __ATOMIC_RELAXED);
    if (d->tail)
        d->tail->next = c;
    else
        d->head = c;
    d->tail = c;
    d->queued += (size_t)n;
    __atomic_add_fetch(&p->pending, n, __ATOMIC_RELAXED);
}

/* Write the released chunks of direction `to` (towards fd[to]). */
static void write_side(struct proxy *p, struct pair *pr, int to, long long now)
{
    struct dir *d = &pr->to[to];
    while (d->head != NULL && d->head->release_ms <= now) {
        struct chunk *c = d->head;
        ssize_t n = send(pr->fd[to], c->data + c->off, c->len - c->off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR) pair_close(p, pr);
            return;
        }
        c->off += (size_t)n;
        d->queued -= (size_t)n;
        __atomic_sub_fetch(&p->pending, n, __ATOMIC_RELAXED);
        if (c->off < c->len) return;
        d->head = c->next;
        if (d->head == NULL) d->tail = NULL;
        free(c);
    }
    if (d->head == NULL && d->eof && !d->shut) {
        shutdown(pr->fd[to], SHUT_WR);
        d->shut = 1;
    }
}

static void *proxy_main(void *arg)
{
    struct proxy *p = arg;
    struct pollfd *pfd = NULL;
    size_t pcap = 0;
    while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
        long long now = mono_ms();
        /* drop the closed pairs */
        size_t k = 0;
        for (size_t i = 0; i < p->npairs; i++) {
            struct pair *pr = p->pairs[i];
            if (!pr->dead && pr->to[0].shut && pr->to[1].shut) pair_close(p, pr);
            if (pr->dead)
                free(pr);
            else
                p->pairs[k++] = pr;
        }
        p->npairs = k;
        if (pcap < 2 + 2 * p->npairs) {
            pcap = 2 + 2 * p->npairs + 32;
            struct pollfd *np = realloc(pfd, pcap * sizeof *np);
            if (np == NULL) break;
            pfd = np;
        }
        int timeout = 100;
        pfd[0] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
        pfd[1] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
        for (size_t i = 0; i < p->npairs; i++) {
            struct pair *pr = p->pairs[i];
            for (int s = 0; s < 2; s++) {
                struct dir *in = &pr->to[1 - s], *out = &pr->to[s];
                short ev = 0;
                if (!in->eof && in->queued < MAX_QUEUED) ev |= POLLIN;
                if (out->head != NULL) {
                    long long wait = out->head->release_ms - now;
                    if (wait <= 0)
                        ev |= POLLOUT;
                    else if (wait < timeout)
                        timeout = (int)wait;
                }
                pfd[2 + 2 * i + (size_t)s] = (struct pollfd){.fd = pr->fd[s], .events = ev};
            }
        }
        if (poll(pfd, 2 + 2 * p->npairs, timeout) < 0 && errno != EINTR) break;
        now = mono_ms();
        if (pfd[1].revents & POLLIN) {
            char b[64];
            if (read(p->wake[0], b, sizeof b) < 0) {
            }
        }
        size_t n = p->npairs; /* accept_one may add pairs without poll entries */
        for (size_t i = 0; i < n; i++) {
            struct pair *pr = p->pairs[i];
            for (int s = 0; s < 2 && !pr->dead; s++) {
                short re = pfd[2 + 2 * i + (size_t)s].revents;
                if (re & (POLLIN | POLLHUP | POLLERR)) read_side(p, pr, s, now);
            }
            for (int s = 0; s < 2 && !pr->dead; s++) write_side(p, pr, s, now);
        }
        if (pfd[0].revents & POLLIN) accept_one(p);
    }
    for (size_t i = 0; i < p->npairs; i++) {
        if (!p->pairs[i]->dead) pair_close(p, p->pairs[i]);
        free(p->pairs[i]);
    }
    p->npairs = 0;
    free(pfd);
    return NULL;
}

struct proxy *proxy_start(int listen_port, int upstream_port, char *err, size_t errlen)
{
    struct proxy *p = calloc(1, sizeof *p);
    if (p == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    p->upstream_port = upstream_port;
    p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(p->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)listen_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(p->listen_fd, 128) != 0 || pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        snprintf(err, errlen, "delay proxy: cannot listen on 127.0.0.1:%d: %s", listen_port, strerror(errno));
        if (p->listen_fd >= 0) close(p->listen_fd);
        free(p);
        return NULL;
    }
    if (pthread_create(&p->thread, NULL, proxy_main, p) != 0) {
        snprintf(err, errlen, "delay proxy: pthread_create failed");
        close(p->listen_fd);
        close(p->wake[0]);
        close(p->wake[1]);
        free(p);
        return NULL;
    }
    return p;
}

void proxy_set_delay(struct proxy *p, int ms)
{
    __atomic_store_n(&p->delay_ms, ms < 0 ? 0 : ms, __ATOMIC_RELAXED);
    if (write(p->wake[1], "x", 1) < 0) {
    }
}

long long proxy_pending(struct proxy *p)
{
    return __atomic_load_n(&p->pending, __ATOMIC_RELAXED);
}

long long proxy_accepted(struct proxy *p)
{
    return __atomic_load_n(&p->accepted, __ATOMIC_RELAXED);
}

void proxy_stop(struct proxy *p)
{
    if (p == NULL) return;
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
    if (write(p->wake[1], "x", 1) < 0) {
    }
    pthread_join(p->thread, NULL);
    close(p->listen_fd);
    close(p->wake[0]);
    close(p->wake[1]);
    free(p->pairs);
    free(p);
}
