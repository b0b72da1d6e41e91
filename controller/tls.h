/* tls.h — the controller's TLS policy for its listeners (OpenSSL through lws): TLS 1.2 at
 * least, 1.3 preferred, forward-secret AEAD cipher suites only, no compression or
 * renegotiation; and the reload of the server certificate and key into a live SSL_CTX
 * (SIGHUP), which new handshakes use while open connections keep theirs.
 *
 * Owns nothing: it fills lws creation info with constant strings and works on SSL_CTXs
 * that lws owns. */
#ifndef PF_TLS_H
#define PF_TLS_H

#include "pf/error.h"

struct lws_context_creation_info;

/* TLS 1.2 suites (OpenSSL names) and TLS 1.3 suites the listeners accept. */
#define PF_TLS12_CIPHERS                                                                           \
	"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"                               \
	"ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"                               \
	"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
#define PF_TLS13_CIPHERS                                                                           \
	"TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

/* Sets the cipher lists and SSL options of a TLS listener's vhost. */
void pf_tls_vhost_policy(struct lws_context_creation_info *info);
/* Applied to each listener's SSL_CTX once lws made it (the server's
 * LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS): the protocol floor, and on a
 * listener that verifies clients the CA names of client_ca (PEM) sent with the request, so
 * a client holding several certificates picks the right one. 0 or -EINVAL. */
int pf_tls_ctx_harden(void *ssl_ctx, const char *client_ca);
/* Loads cert (PEM chain) and key into ssl_ctx after checking, in a scratch context, that
 * both parse and belong together; on any error ssl_ctx is left as it was. */
int pf_tls_reload(void *ssl_ctx, const char *cert, const char *key, struct pf_error *err);

#endif
