/* pf/hash.h — SHA-256 (through OpenSSL's EVP interface) and random tokens. */
#ifndef PF_HASH_H
#define PF_HASH_H

#include <stddef.h>
#include <stdint.h>

#define PF_SHA256_LEN 32

void pf_sha256(const void *data, size_t len, uint8_t out[PF_SHA256_LEN]);
/* Constant-time comparison of n bytes. */
int pf_ct_memeq(const void *a, const void *b, size_t n);
/* A new secret token "pf_" + 43 chars of URL-safe base64 of 32 random bytes; dst >= 48 bytes.
 * 0 or -errno. */
int pf_token_generate(char *dst, size_t dst_len);

#endif
