/* pf/hash.h — SHA-256 (through OpenSSL's EVP interface), constant-time comparison, random
 * bytes and tokens from the kernel CSPRNG (getrandom(2)), and fast non-cryptographic 64-bit
 * hashes for in-memory tables. Owns no state. */
#ifndef PF_HASH_H
#define PF_HASH_H

#include <stddef.h>
#include <stdint.h>

#define PF_SHA256_LEN 32
/* "pf_" + 43 chars of unpadded URL-safe base64 (RFC 4648 §5) + NUL = 47; 48 leaves slack. */
#define PF_TOKEN_PREFIX "pf_"
#define PF_TOKEN_LEN 46
#define PF_TOKEN_BUF_LEN 48

/* out receives the digest; on the (practically impossible) EVP failure it is all zero. */
void pf_sha256(const void *data, size_t len, uint8_t out[PF_SHA256_LEN]);
/* A 64-bit hash of n bytes for in-memory hash tables (eight bytes a step, every output bit
 * depending on every input bit). Not for anything stored or sent, nor against an adversary
 * who picks the keys: tables that take a sender's keys must bound their probes or their size
 * on their own. */
uint64_t pf_hash64(const void *data, size_t n);
/* One 64-bit word scrambled so that its low bits depend on all of it: the slot of a key in a
 * power-of-two open-addressing table (key & (cap - 1) of the result). */
static inline uint64_t pf_mix64(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x9e3779b97f4a7c15ull;
	return x ^ x >> 29;
}
/* h with the word v folded in (boost's hash_combine, widened): a running hash of a sequence
 * of words, such as a stack's addresses. */
static inline uint64_t pf_hash_combine(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}
/* Constant-time comparison of n bytes (time does not depend on where they differ).
 * Returns 1 when equal, 0 when not. */
int pf_ct_memeq(const void *a, const void *b, size_t n);
/* Fills dst with n bytes from getrandom(2) (retrying short reads and EINTR). 0 or -errno. */
int pf_random_bytes(void *dst, size_t n);
/* A new secret token "pf_" + 43 chars of URL-safe base64 of 32 random bytes, NUL-terminated;
 * dst_len >= PF_TOKEN_BUF_LEN (48), else -ENOSPC. 0 or -errno. */
int pf_token_generate(char *dst, size_t dst_len);

#endif
