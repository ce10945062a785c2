/* tls.h: the client side of keygate's TLS to a backend instance (daemon and `keygate audit`). */
#ifndef KEYGATE_TLS_H
#define KEYGATE_TLS_H

#include <stddef.h>

#include <openssl/ssl.h>

#include "config.h"

/*
 * A client TLS context for instance ic: TLS 1.2+, the server certificate verified against
 * ic->ca, and ic->cert/ic->key presented when both are given. NULL on failure, with the
 * reason (naming the file) in err.
 */
SSL_CTX *tls_instance_ctx(const struct instance_conf *ic, char *err, size_t errlen);

/* Make ssl send SNI and verify the certificate's name: ic->server_name, else host (the
 * server's address: ic->host, or a cluster node's). 0, or -1 when OpenSSL refuses. */
int tls_instance_expect_name(SSL *ssl, const struct instance_conf *ic, const char *host);

#endif
