/* test_tls.c — controller/tls.c: the protocol floor and client CA names on a listener's
 * SSL_CTX, and the certificate reload (a good pair is installed, a bad one leaves the
 * context as it was). Keys and self-signed certificates are made here with OpenSSL. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "tls.h"

struct fx {
	char dir[64];
	char cert1[128], key1[128], cert2[128], key2[128], missing[128];
};

/* Writes a P-256 key and a self-signed certificate for CN=cn. */
static void make_pair(const char *cert_path, const char *key_path, const char *cn)
{
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	assert_non_null(pk);
	X509 *x = X509_new();
	assert_non_null(x);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, pk);
	X509_NAME *name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, name);
	assert_true(X509_sign(x, pk, EVP_sha256()) > 0);
	FILE *f = fopen(cert_path, "w");
	assert_non_null(f);
	assert_int_equal(PEM_write_X509(f, x), 1);
	fclose(f);
	f = fopen(key_path, "w");
	assert_non_null(f);
	assert_int_equal(PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL), 1);
	fclose(f);
	X509_free(x);
	EVP_PKEY_free(pk);
}

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	snprintf(x->dir, sizeof(x->dir), "/tmp/pf-tls-XXXXXX");
	if (!mkdtemp(x->dir))
		return -1;
	snprintf(x->cert1, sizeof(x->cert1), "%s/one.crt", x->dir);
	snprintf(x->key1, sizeof(x->key1), "%s/one.key", x->dir);
	snprintf(x->cert2, sizeof(x->cert2), "%s/two.crt", x->dir);
	snprintf(x->key2, sizeof(x->key2), "%s/two.key", x->dir);
	snprintf(x->missing, sizeof(x->missing), "%s/none.crt", x->dir);
	make_pair(x->cert1, x->key1, "one");
	make_pair(x->cert2, x->key2, "two");
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;
	unlink(x->cert1);
	unlink(x->key1);
	unlink(x->cert2);
	unlink(x->key2);
	rmdir(x->dir);
	free(x);
	return 0;
}

/* The CN of the certificate ssl_ctx serves. */
static const char *served_cn(SSL_CTX *ctx, char *buf, size_t n)
{
	X509 *c = SSL_CTX_get0_certificate(ctx);
	if (!c)
		return "";
	X509_NAME_get_text_by_NID(X509_get_subject_name(c), NID_commonName, buf, (int)n);
	return buf;
}

static void test_reload(void **state)
{
	struct fx *x = *state;
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	char cn[64];
	struct pf_error err = {0};

	assert_int_equal(pf_tls_reload(ctx, x->cert1, x->key1, &err), 0);
	assert_string_equal(served_cn(ctx, cn, sizeof(cn)), "one");
	assert_int_equal(pf_tls_reload(ctx, x->cert2, x->key2, &err), 0);
	assert_string_equal(served_cn(ctx, cn, sizeof(cn)), "two");
	assert_int_equal(SSL_CTX_check_private_key(ctx), 1);

	/* A key of another certificate: refused, "two" stays with its key. */
	assert_int_equal(pf_tls_reload(ctx, x->cert1, x->key2, &err), -EINVAL);
	assert_string_equal(err.path, "tls.key");
	assert_string_equal(served_cn(ctx, cn, sizeof(cn)), "two");
	assert_int_equal(SSL_CTX_check_private_key(ctx), 1);

	/* A missing certificate file, a key file that is no key. */
	pf_error_clear(&err);
	assert_int_equal(pf_tls_reload(ctx, x->missing, x->key1, &err), -EINVAL);
	assert_string_equal(err.path, "tls.cert");
	assert_non_null(strstr(err.msg, x->missing));
	pf_error_clear(&err);
	assert_int_equal(pf_tls_reload(ctx, x->cert1, x->cert1, &err), -EINVAL);
	assert_string_equal(err.path, "tls.key");
	assert_string_equal(served_cn(ctx, cn, sizeof(cn)), "two");

	pf_error_clear(&err);
	assert_int_equal(pf_tls_reload(NULL, x->cert1, x->key1, &err), -EINVAL);
	SSL_CTX_free(ctx);
}

static void test_harden(void **state)
{
	struct fx *x = *state;
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	assert_int_equal(pf_tls_ctx_harden(ctx, x->cert1), 0);
	assert_int_equal(SSL_CTX_get_min_proto_version(ctx), TLS1_2_VERSION);
	/* No client verification on this context: no CA names sent. */
	assert_true(sk_X509_NAME_num(SSL_CTX_get_client_CA_list(ctx)) <= 0);
	SSL_CTX_free(ctx);

	ctx = SSL_CTX_new(TLS_server_method());
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	assert_int_equal(pf_tls_ctx_harden(ctx, x->cert2), 0);
	STACK_OF(X509_NAME) *names = SSL_CTX_get_client_CA_list(ctx);
	assert_int_equal(sk_X509_NAME_num(names), 1);
	char cn[64];
	X509_NAME_get_text_by_NID(sk_X509_NAME_value(names, 0), NID_commonName, cn, sizeof(cn));
	assert_string_equal(cn, "two");
	assert_int_equal(pf_tls_ctx_harden(ctx, x->missing), -EINVAL);
	SSL_CTX_free(ctx);

	assert_int_equal(pf_tls_ctx_harden(NULL, NULL), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reload),
	    cmocka_unit_test(test_harden),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
