/* policy_fixture.h: shared set-up for the unit tests of policy_decide (registry + config of two instances) and a command-line splitter. */
#ifndef KEYGATE_POLICY_FIXTURE_H
#define KEYGATE_POLICY_FIXTURE_H

/*
 * Header-only: each unit test is compiled alone (tests/unit/test_X.c plus src objects),
 * so the including file gets its own copy of reg, cfg and the helpers. Usage:
 *
 *   static void setup(void) { fixture_load("conf/registry.conf"); ... }
 *   static void teardown(void) { fixture_free(); }
 *   ... fixture_decide(&session, "SET cache:x 1", &plan); ...
 */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "config.h"
#include "policy.h"
#include "registry.h"

static struct registry *reg; /* loaded by fixture_load, freed by fixture_free */
static struct config cfg;    /* two instances, durable (0) and cache (1), with reg as registry */

/* Load the registry file at path for instances "durable" and "cache" into reg (its
 * diagnostics go to stderr) and point a zeroed cfg at it; fails the test when it does not load. */
static inline void fixture_load(const char *path)
{
    static const char *const names[] = {"durable", "cache"};
    struct diag errs = {0};
    reg = registry_load(path, names, 2, &errs);
    for (size_t i = 0; i < errs.count; i++) fprintf(stderr, "%s\n", errs.lines[i]);
    diag_free(&errs);
    ck_assert_ptr_nonnull(reg);
    memset(&cfg, 0, sizeof(cfg));
    cfg.ninstances = 2;
    cfg.instance_names[0] = "durable";
    cfg.instance_names[1] = "cache";
    cfg.registry = reg;
}

/* fixture_load of registry text, written to a temporary file that is removed again. */
static inline void fixture_load_text(const char *text)
{
    char path[] = "/tmp/keygate-test-registry-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    size_t len = strlen(text);
    ssize_t written = write(fd, text, len);
    close(fd);
    if (written != (ssize_t)len) unlink(path);
    ck_assert_int_eq(written, (ssize_t)len);
    fixture_load(path);
    unlink(path);
}

/* Free the registry fixture_load loaded. */
static inline void fixture_free(void)
{
    registry_free(reg);
    reg = NULL;
}

#define FIXTURE_MAX_ARGS 4096

/* The arguments of the last fixture_split: valid until the next call. */
static const char *fixture_argv[FIXTURE_MAX_ARGS];
static size_t fixture_argvlen[FIXTURE_MAX_ARGS];

/* Split a space-separated command line (no quoting) into fixture_argv/fixture_argvlen;
 * returns argc. Lines longer than 64 KiB are cut, tokens past FIXTURE_MAX_ARGS dropped. */
static inline size_t fixture_split(const char *line)
{
    static char buf[65536];
    size_t argc = 0;
    snprintf(buf, sizeof(buf), "%s", line);
    for (char *tok = strtok(buf, " "); tok && argc < FIXTURE_MAX_ARGS; tok = strtok(NULL, " ")) {
        fixture_argv[argc] = tok;
        fixture_argvlen[argc] = strlen(tok);
        argc++;
    }
    return argc;
}

/* policy_decide(&cfg, reg, s, ...) for argv, the command looked up as keygate does, at a fixed
 * clock (1700000000000 ms). The caller owns *p (plan_release when it needs to). */
static inline void fixture_decide_argv(const struct session *s, size_t argc, const char *const *argv,
                                       const size_t *argvlen, struct plan *p)
{
    struct policy_request r = {.argc = argc, .argv = argv, .argvlen = argvlen, .now_ms = 1700000000000LL};
    r.cmd = command_lookup(argc, argv, argvlen, &r.unknown_subcommand);
    policy_decide(&cfg, reg, s, &r, p);
}

/* fixture_decide_argv for a space-separated command line (fixture_split). */
static inline void fixture_decide(const struct session *s, const char *line, struct plan *p)
{
    size_t argc = fixture_split(line);
    fixture_decide_argv(s, argc, fixture_argv, fixture_argvlen, p);
}

#endif
