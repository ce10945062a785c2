/* launcher.c: start the integration harness (two TLS redis-servers + keygate on free
 * ports) for the real-client tests, print where they listen as shell variables, and
 * keep them running until stdin closes or SIGTERM/SIGINT/SIGHUP arrives.
 *
 * Build (tests/clients/run does it):
 *   cc -std=c11 -D_GNU_SOURCE -Itests/integration -o build/tests/clients/launcher \
 *      tests/clients/launcher.c tests/integration/harness.c -lhiredis
 *
 * The registry is the repo's conf/registry.conf plus a near-cache namespace `nc:` on durable
 * (and the keygate-owned `kg:` that holds its stream), and a second keygate (the harness's peer,
 * same configuration) runs beside the first: the node tests measure a near-cache hit and a write
 * through another keygate.
 *
 * Output on stdout, one `NAME=value` a line (values are [A-Za-z0-9/._-] only), then `READY`:
 *   KG_PORT KG_PEER_PORT KG_DIR KG_LOG KG_DURABLE_PORT KG_DURABLE_PASS KG_CACHE_PORT KG_CACHE_PASS
 * On failure: `FAILED <reason>` on stdout, the logs on stderr, exit 1.
 * Run from the repo root (the harness needs conf/registry.conf and build/certs).
 */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop;

static void on_stop(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* conf/registry.conf with the near-cache lines appended (malloc'd), or NULL. */
static char *registry_text(void)
{
    static const char extra[] =
        "namespace  kg:  instance=durable ttl=none owner=keygate purpose=\"keygate's own keys (near-cache stream)\"\n"
        "namespace  nc:  instance=durable ttl=none near-cache=30s owner=queues purpose=\"near-cache reads (client "
        "tests)\"\n";
    FILE *f = fopen("conf/registry.conf", "r");
    if (!f) return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    char buf[4096];
    size_t n;
    while (out && (n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, out);
    fclose(f);
    if (!out) return NULL;
    fputs(extra, out);
    fclose(out);
    return text;
}

int main(void)
{
    static struct harness h;
    char *registry = registry_text();
    if (!registry) {
        printf("FAILED cannot read conf/registry.conf: %s\n", strerror(errno));
        fflush(stdout);
        return 1;
    }
    struct harness_opts o = {.registry_text = registry};
    if (harness_start(&h, &o) != 0 || harness_peer_start(&h, NULL) != 0) {
        printf("FAILED %s\n", h.error);
        fflush(stdout);
        harness_stop(&h);
        return 1;
    }
    free(registry);
    /* Replace the harness's kill-on-signal handlers: stop gracefully instead. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    struct harness_backend *d = harness_backend(&h, "durable"), *c = harness_backend(&h, "cache");
    printf("KG_PORT=%d\nKG_PEER_PORT=%d\nKG_DIR=%s\nKG_LOG=%s\n", h.port, h.peer_port, h.dir, h.log_file);
    printf("KG_DURABLE_PORT=%d\nKG_DURABLE_PASS=%s\n", d->plain_port, d->password);
    printf("KG_CACHE_PORT=%d\nKG_CACHE_PASS=%s\n", c->plain_port, c->password);
    printf("READY\n");
    fflush(stdout);

    /* Wait for EOF (or an error) on stdin, or a stop signal. */
    while (!g_stop) {
        struct pollfd p = {.fd = 0, .events = POLLIN};
        int n = poll(&p, 1, 1000);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        if (n == 0) continue;
        char buf[256];
        ssize_t r = read(0, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break; /* EOF: whoever started us is gone or done */
    }
    (void)harness_peer_stop(&h);
    harness_stop(&h);
    if (h.keygate_status != -1 && !(WIFEXITED(h.keygate_status) && WEXITSTATUS(h.keygate_status) == 0)) {
        fprintf(stderr, "launcher: keygate did not exit cleanly (status 0x%x)\n", h.keygate_status);
        return 2;
    }
    return 0;
}
