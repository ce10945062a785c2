/* tls.c: keygate's TLS to a backend instance (context, SNI, name check) and --check's look at every certificate file. */
#include "tls.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

SSL_CTX *tls_instance_ctx(const struct instance_conf *ic, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        snprintf(err, errlen, "SSL_CTX_new failed");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* TLS 1.3: AES-128-GCM first (OpenSSL's default order puts AES-256 first). Redis
     * takes the client's order unless tls-prefer-server-ciphers is on; AES-128 is
     * 10 rounds instead of 14 on both ends of every request and reply. */
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (!ic->ca || SSL_CTX_load_verify_locations(ctx, ic->ca, NULL) != 1) {
        snprintf(err, errlen, "cannot load CA %s", ic->ca ? ic->ca : "(none given)");
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (ic->cert && ic->key &&
        (SSL_CTX_use_certificate_chain_file(ctx, ic->cert) != 1 ||
         SSL_CTX_use_PrivateKey_file(ctx, ic->key, SSL_FILETYPE_PEM) != 1)) {
        snprintf(err, errlen, "cannot load client certificate %s / key %s", ic->cert, ic->key);
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

int tls_instance_expect_name(SSL *ssl, const struct instance_conf *ic, const char *host)
{
    const char *name = ic->server_name ? ic->server_name : host;
    SSL_set_tlsext_host_name(ssl, name);
    return SSL_set1_host(ssl, name) ? 0 : -1;
}

/* ---- --check: the certificate, key and CA files -------------------------------------- */

/* Where a file is named, for the diagnostics: keygate.conf's FILE and LINE, and what names it
 * ("listen cert=", "instance 'durable' ca="). */
struct tls_where {
    const char *conf;
    int line;
    const char *what;
    struct diag *errs, *warns;
    time_t now;
};

/* t as "2026-12-01 15:34 UTC" into buf. */
static void tls_time_format(const ASN1_TIME *t, char *buf, size_t len)
{
    struct tm tm;
    if (ASN1_TIME_to_tm(t, &tm) != 1 || strftime(buf, len, "%Y-%m-%d %H:%M UTC", &tm) == 0)
        snprintf(buf, len, "(unreadable date)");
}

/* The last OpenSSL error as text (the queue emptied), or `fallback`. */
static const char *tls_error_text(char *buf, size_t len, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    if (e)
        ERR_error_string_n(e, buf, len);
    else
        snprintf(buf, len, "%s", fallback);
    ERR_clear_error();
    return buf;
}

/* x's validity against w->now: not yet valid or expired is an error, expiring within
 * TLS_CHECK_EXPIRY_WARN_DAYS a warning. */
static void tls_check_validity(const struct tls_where *w, const char *path, X509 *x, const char *which)
{
    char when[64];
    time_t now = w->now;
    if (X509_cmp_time(X509_get0_notBefore(x), &now) > 0) {
        tls_time_format(X509_get0_notBefore(x), when, sizeof when);
        diag_add(w->errs, w->conf, w->line, "%s%s: %s is not valid before %s", w->what, path, which, when);
        return;
    }
    tls_time_format(X509_get0_notAfter(x), when, sizeof when);
    if (X509_cmp_time(X509_get0_notAfter(x), &now) < 0) {
        diag_add(w->errs, w->conf, w->line, "%s%s: %s expired on %s", w->what, path, which, when);
        return;
    }
    time_t soon = now + (time_t)TLS_CHECK_EXPIRY_WARN_DAYS * 86400;
    if (X509_cmp_time(X509_get0_notAfter(x), &soon) < 0) {
        int days = 0, secs = 0;
        ASN1_TIME *t = ASN1_TIME_set(NULL, now);
        if (t) ASN1_TIME_diff(&days, &secs, t, X509_get0_notAfter(x));
        ASN1_TIME_free(t);
        diag_add(w->warns, w->conf, w->line, "warning: %s%s: %s expires on %s, in %d days", w->what, path, which, when,
                 days);
    }
}

/* Read every certificate of the PEM file path; returns how many (0 with an error added when
 * the file cannot be opened or holds none). Each is checked for validity; the first is kept in
 * *first (the caller frees it) when first is not NULL. */
static int tls_check_certs(const struct tls_where *w, const char *path, const char *which, X509 **first)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        diag_add(w->errs, w->conf, w->line, "%s%s: cannot open: %s", w->what, path, strerror(errno));
        return 0;
    }
    int n = 0;
    X509 *x;
    while ((x = PEM_read_X509(f, NULL, NULL, NULL)) != NULL) {
        tls_check_validity(w, path, x, n == 0 ? which : "a certificate of its chain");
        if (n == 0 && first)
            *first = x;
        else
            X509_free(x);
        n++;
    }
    fclose(f);
    ERR_clear_error(); /* the end of the file reads as an error */
    if (n == 0) {
        char why[256];
        diag_add(w->errs, w->conf, w->line, "%s%s: no PEM certificate in it (%s)", w->what, path,
                 tls_error_text(why, sizeof why, "empty"));
    }
    return n;
}

/* A certificate and its key: both readable, the key the certificate's. */
static void tls_check_pair(struct tls_where *w, const char *what_cert, const char *cert, const char *what_key,
                           const char *key)
{
    X509 *x = NULL;
    w->what = what_cert;
    tls_check_certs(w, cert, "the certificate", &x);
    w->what = what_key;
    FILE *f = fopen(key, "r");
    if (!f) {
        diag_add(w->errs, w->conf, w->line, "%s%s: cannot open: %s", w->what, key, strerror(errno));
        X509_free(x);
        return;
    }
    EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    if (!k) {
        char why[256];
        diag_add(w->errs, w->conf, w->line, "%s%s: no PEM private key in it (%s)", w->what, key,
                 tls_error_text(why, sizeof why, "unreadable"));
    } else if (x && X509_check_private_key(x, k) != 1)
        diag_add(w->errs, w->conf, w->line, "%s%s: the key does not match the certificate %s", w->what, key, cert);
    ERR_clear_error();
    EVP_PKEY_free(k);
    X509_free(x);
}

void tls_check_files(const struct config *c, time_t now, struct diag *errs, struct diag *warns)
{
    struct tls_where w = {.conf = c->path, .errs = errs, .warns = warns, .now = now};
    char what_cert[160], what_key[160], what_ca[160];
    for (size_t i = 0; i < c->nlistens; i++) {
        const struct listen_addr *l = &c->listens[i];
        if (!l->tls) continue;
        w.line = l->line;
        if (l->tls_cert && l->tls_key) tls_check_pair(&w, "listen cert=", l->tls_cert, "listen key=", l->tls_key);
        w.what = "listen ca=";
        if (l->tls_ca) tls_check_certs(&w, l->tls_ca, "the CA certificate", NULL);
    }
    for (size_t i = 0; i < c->ninstances; i++) {
        const struct instance_conf *ic = &c->instances[i];
        if (!ic->tls) continue;
        w.line = ic->line;
        snprintf(what_cert, sizeof what_cert, "instance '%s' cert=", ic->name);
        snprintf(what_key, sizeof what_key, "instance '%s' key=", ic->name);
        snprintf(what_ca, sizeof what_ca, "instance '%s' ca=", ic->name);
        w.what = what_ca;
        if (ic->ca) tls_check_certs(&w, ic->ca, "the CA certificate", NULL);
        if (ic->cert && ic->key) tls_check_pair(&w, what_cert, ic->cert, what_key, ic->key);
    }
}
