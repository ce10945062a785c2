/* tls.h: the client side of keygate's TLS to a backend instance (daemon and `keygate audit`), and --check's certificate checks. */
#ifndef KEYGATE_TLS_H
#define KEYGATE_TLS_H

#include <stddef.h>
#include <time.h>

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

/* A certificate that expires within this many days of --check is a warning. */
#define TLS_CHECK_EXPIRY_WARN_DAYS 30

/*
 * keygate --check's look at every certificate, key and CA file c names (listen ... tls cert= key=
 * ca=, instance ... tls ca= cert= key=), at time `now`: each is opened and read as PEM. Errors
 * (into errs, as "FILE:LINE: WHAT PATH: why", FILE:LINE the directive's in keygate.conf): a file
 * that cannot be opened or holds no certificate or key, a key that is not its certificate's, a
 * certificate (or one of its chain, or a CA) expired or not valid yet. Warnings (into warns, as
 * "FILE:LINE: warning: ..."): a certificate that expires within TLS_CHECK_EXPIRY_WARN_DAYS.
 * Touches no network.
 */
void tls_check_files(const struct config *c, time_t now, struct diag *errs, struct diag *warns);

#endif
