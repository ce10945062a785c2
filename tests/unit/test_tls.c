/* test_tls.c: unit tests for tls.c's tls_check_files: --check's look at every certificate, key and CA file. */
#include <check.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "config.h"
#include "tls.h"

/*
 * Each test makes its certificates with OpenSSL's API in a fresh folder (self-signed P-256
 * certificates whose validity the test chooses, relative to now), writes a keygate.conf naming
 * them, loads it with config_load and runs tls_check_files on it.
 */

static char dir[64];
static time_t now;

static void setup(void)
{
    strcpy(dir, "/tmp/kg_tls_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    now = time(NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/registry.conf", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("namespace q: instance=durable ttl=none owner=queues\n", f);
    fclose(f);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

/* A P-256 key written to dir/NAME.key; returned (the caller frees it). */
static EVP_PKEY *make_key(const char *name)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    ck_assert_ptr_nonnull(k);
    char path[128];
    snprintf(path, sizeof path, "%s/%s.key", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL), 1);
    fclose(f);
    return k;
}

/* A self-signed certificate of key k, valid from now + from_s to now + to_s, written to
 * dir/NAME.crt. */
static void make_cert(const char *name, EVP_PKEY *k, long from_s, long to_s)
{
    X509 *x = X509_new();
    ck_assert_ptr_nonnull(x);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    ck_assert_ptr_nonnull(X509_time_adj_ex(X509_getm_notBefore(x), 0, from_s, &now));
    ck_assert_ptr_nonnull(X509_time_adj_ex(X509_getm_notAfter(x), 0, to_s, &now));
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)name, -1, -1, 0);
    X509_set_issuer_name(x, n);
    X509_set_pubkey(x, k);
    ck_assert_int_gt(X509_sign(x, k, EVP_sha256()), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/%s.crt", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(PEM_write_X509(f, x), 1);
    fclose(f);
    X509_free(x);
}

/* Load a keygate.conf of `lines` (after a listen on line 1 and the registry on line 2) and run
 * tls_check_files on it. */
static void check_conf(const char *lines, struct diag *errs, struct diag *warns)
{
    char path[128];
    snprintf(path, sizeof path, "%s/keygate.conf", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "listen 127.0.0.1:6400\nregistry registry.conf\n%s", lines);
    fclose(f);
    struct diag load = {0};
    struct config *c = config_load(path, &load);
    ck_assert_msg(c != NULL, "config_load: %s", load.count ? load.lines[0] : "?");
    diag_free(&load);
    memset(errs, 0, sizeof *errs);
    memset(warns, 0, sizeof *warns);
    tls_check_files(c, now, errs, warns);
    config_free(c);
}

/* Some line of d holds every one of the (NULL-ended) words. */
static void expect_line(const struct diag *d, const char *what, ...)
{
    for (size_t i = 0; i < d->count; i++) {
        va_list ap;
        va_start(ap, what);
        const char *w;
        int all = 1;
        while ((w = va_arg(ap, const char *)) != NULL) all &= strstr(d->lines[i], w) != NULL;
        va_end(ap);
        if (all) return;
    }
    for (size_t i = 0; i < d->count; i++) fprintf(stderr, "  %s: %s\n", what, d->lines[i]);
    ck_abort_msg("no %s line with the words asked (%zu lines)", what, d->count);
}

#define DAY (24L * 3600)

START_TEST(valid_files_pass)
{
    EVP_PKEY *ca = make_key("ca"), *cl = make_key("client"), *srv = make_key("server");
    make_cert("ca", ca, -DAY, 365 * DAY);
    make_cert("client", cl, -DAY, 365 * DAY);
    make_cert("server", srv, -DAY, 90 * DAY);
    struct diag errs, warns;
    check_conf("listen 127.0.0.1:6443 tls cert=server.crt key=server.key ca=ca.crt\n"
               "instance durable 127.0.0.1:6401 tls ca=ca.crt cert=client.crt key=client.key\n",
               &errs, &warns);
    ck_assert_msg(errs.count == 0 && warns.count == 0, "%s", errs.count ? errs.lines[0] : warns.lines[0]);
    diag_free(&errs);
    diag_free(&warns);
    EVP_PKEY_free(ca);
    EVP_PKEY_free(cl);
    EVP_PKEY_free(srv);
}
END_TEST

/* A key that is not the certificate's: an error at the directive's line naming the key file. */
START_TEST(key_not_the_certificates)
{
    EVP_PKEY *ca = make_key("ca"), *cl = make_key("client"), *other = make_key("other");
    make_cert("ca", ca, -DAY, 365 * DAY);
    make_cert("client", cl, -DAY, 365 * DAY);
    struct diag errs, warns;
    check_conf("instance durable 127.0.0.1:6401 tls ca=ca.crt cert=client.crt key=other.key\n", &errs, &warns);
    char conf[128], key[128];
    snprintf(conf, sizeof conf, "%s/keygate.conf:3: instance 'durable' key=", dir);
    snprintf(key, sizeof key, "%s/other.key: the key does not match the certificate", dir);
    expect_line(&errs, "error", conf, key, (char *)NULL);
    ck_assert_int_eq(errs.count, 1);
    diag_free(&errs);
    diag_free(&warns);
    EVP_PKEY_free(ca);
    EVP_PKEY_free(cl);
    EVP_PKEY_free(other);
}
END_TEST

/* Expired (the listener's certificate, a CA) and not yet valid: errors; expiring within 30
 * days: a warning with the date and the days left; 31 days: nothing. */
START_TEST(expired_and_expiring)
{
    EVP_PKEY *ca = make_key("ca"), *srv = make_key("server"), *cl = make_key("client");
    make_cert("ca", ca, -10 * DAY, -DAY);
    make_cert("server", srv, -10 * DAY, -60);
    make_cert("client", cl, DAY, 300 * DAY);
    struct diag errs, warns;
    check_conf("listen 127.0.0.1:6443 tls cert=server.crt key=server.key\n"
               "instance durable 127.0.0.1:6401 tls ca=ca.crt cert=client.crt key=client.key\n",
               &errs, &warns);
    expect_line(&errs, "error", ":3: listen cert=", "server.crt: the certificate expired on", " UTC", (char *)NULL);
    expect_line(&errs, "error", ":4: instance 'durable' ca=", "ca.crt: the CA certificate expired on", (char *)NULL);
    expect_line(&errs, "error", ":4: instance 'durable' cert=", "client.crt: the certificate is not valid before",
                (char *)NULL);
    ck_assert_int_eq(errs.count, 3);
    ck_assert_int_eq(warns.count, 0);
    diag_free(&errs);
    diag_free(&warns);
    make_cert("ca", ca, -DAY, 31 * DAY + 3600);
    make_cert("server", srv, -DAY, 10 * DAY + 3600);
    make_cert("client", cl, -DAY, 300 * DAY);
    check_conf("listen 127.0.0.1:6443 tls cert=server.crt key=server.key\n"
               "instance durable 127.0.0.1:6401 tls ca=ca.crt cert=client.crt key=client.key\n",
               &errs, &warns);
    ck_assert_msg(errs.count == 0, "%s", errs.count ? errs.lines[0] : "");
    expect_line(&warns, "warning", ":3: warning: listen cert=", "server.crt: the certificate expires on", "in 10 days",
                (char *)NULL);
    ck_assert_int_eq(warns.count, 1);
    diag_free(&errs);
    diag_free(&warns);
    EVP_PKEY_free(ca);
    EVP_PKEY_free(srv);
    EVP_PKEY_free(cl);
}
END_TEST

/* A file that cannot be opened, or holds no PEM certificate or key: an error naming it. */
START_TEST(missing_and_garbage_files)
{
    EVP_PKEY *ca = make_key("ca");
    make_cert("ca", ca, -DAY, 365 * DAY);
    char path[128];
    snprintf(path, sizeof path, "%s/garbage.crt", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("not a certificate\n", f);
    fclose(f);
    struct diag errs, warns;
    check_conf("instance durable 127.0.0.1:6401 tls ca=garbage.crt cert=nothere.crt key=ca.key\n", &errs, &warns);
    expect_line(&errs, "error", ":3: instance 'durable' ca=", "garbage.crt: no PEM certificate in it", (char *)NULL);
    expect_line(&errs, "error", ":3: instance 'durable' cert=", "nothere.crt: cannot open: No such file", (char *)NULL);
    diag_free(&errs);
    diag_free(&warns);
    EVP_PKEY_free(ca);
}
END_TEST

static Suite *tls_suite(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("check_files");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, valid_files_pass);
    tcase_add_test(tc, key_not_the_certificates);
    tcase_add_test(tc, expired_and_expiring);
    tcase_add_test(tc, missing_and_garbage_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(tls_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
