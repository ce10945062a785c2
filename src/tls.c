/* tls.c: the client side of keygate's TLS to a backend instance: context, SNI, name check. */
#include "tls.h"

#include <stdio.h>

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
