/* tls.c — see tls.h. */
#include "tls.h"

#include <errno.h>
#include <string.h>

#include <libwebsockets.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

void pf_tls_vhost_policy(struct lws_context_creation_info *info)
{
	info->ssl_cipher_list = PF_TLS12_CIPHERS;
	info->tls1_3_plus_cipher_list = PF_TLS13_CIPHERS;
	info->ssl_options_set =
	    (long)(SSL_OP_NO_SSLv3 | SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1 | SSL_OP_NO_COMPRESSION |
		   SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
}

int pf_tls_ctx_harden(void *ssl_ctx, const char *client_ca)
{
	SSL_CTX *ctx = ssl_ctx;
	if (!ctx || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1)
		return -EINVAL;
	if (client_ca && (SSL_CTX_get_verify_mode(ctx) & SSL_VERIFY_PEER)) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(client_ca);
		if (!names)
			return -EINVAL;
		SSL_CTX_set_client_CA_list(ctx, names); /* takes names */
	}
	return 0;
}

/* The first queued OpenSSL error as text (or "unknown error"); clears the queue. */
static const char *ssl_reason(char *buf, size_t cap)
{
	unsigned long e = ERR_get_error();
	if (e)
		ERR_error_string_n(e, buf, cap);
	else
		snprintf(buf, cap, "unknown error");
	ERR_clear_error();
	return buf;
}

static int load_pair(SSL_CTX *ctx, const char *cert, const char *key, struct pf_error *err)
{
	char why[256];
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
		return pf_error_set(err, -EINVAL, "tls.cert", "cannot load '%s': %s", cert,
				    ssl_reason(why, sizeof(why)));
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
		return pf_error_set(err, -EINVAL, "tls.key", "cannot load '%s': %s", key,
				    ssl_reason(why, sizeof(why)));
	if (SSL_CTX_check_private_key(ctx) != 1)
		return pf_error_set(err, -EINVAL, "tls.key", "'%s' does not match '%s': %s", key,
				    cert, ssl_reason(why, sizeof(why)));
	return 0;
}

int pf_tls_reload(void *ssl_ctx, const char *cert, const char *key, struct pf_error *err)
{
	if (!ssl_ctx)
		return pf_error_set(err, -EINVAL, "tls", "no TLS listener");
	SSL_CTX *scratch = SSL_CTX_new(TLS_server_method());
	if (!scratch)
		return pf_error_set(err, -ENOMEM, "tls", "out of memory");
	int r = load_pair(scratch, cert, key, err);
	if (r == 0) {
		/* One call swaps certificate, key and chain together: the live context never
		 * holds a mismatched pair. */
		X509 *x = SSL_CTX_get0_certificate(scratch);
		EVP_PKEY *pk = SSL_CTX_get0_privatekey(scratch);
		STACK_OF(X509) *chain = NULL;
		SSL_CTX_get0_chain_certs(scratch, &chain);
		char why[256];
		if (!x || !pk || SSL_CTX_use_cert_and_key(ssl_ctx, x, pk, chain, 1) != 1)
			r = pf_error_set(err, -EINVAL, "tls", "cannot install '%s': %s", cert,
					 ssl_reason(why, sizeof(why)));
	}
	SSL_CTX_free(scratch);
	return r;
}
