/* hash.c — see pf/hash.h. */
#include "pf/hash.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

/* The SHA-256 implementation, fetched once: EVP_sha256() makes EVP_Digest() fetch it again
 * on every call, which costs as much as hashing a few hundred bytes. Kept for the process's
 * life (NULL when the fetch failed: then the digest is all zero). */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

void pf_sha256(const void *data, size_t len, uint8_t out[PF_SHA256_LEN])
{
	unsigned int n = 0;

	pthread_once(&sha256_once, sha256_fetch);
	if (!sha256_md || EVP_Digest(data, len, out, &n, sha256_md, NULL) != 1 ||
	    n != PF_SHA256_LEN)
		memset(out, 0, PF_SHA256_LEN);
}

#define H64_K1 0x9e3779b97f4a7c15ull
#define H64_K2 0xbf58476d1ce4e5b9ull
#define H64_K3 0x94d049bb133111ebull

static inline uint64_t h64_step(uint64_t h, uint64_t w)
{
	h = (h ^ w) * H64_K2;
	return h ^ (h >> 31);
}

uint64_t pf_hash64(const void *data, size_t n)
{
	const uint8_t *b = data;
	uint64_t h = H64_K1 ^ ((uint64_t)n * H64_K3), w;

	for (; n >= 8; b += 8, n -= 8) {
		memcpy(&w, b, 8);
		h = h64_step(h, w);
	}
	if (n) {
		w = 0;
		for (size_t i = 0; i < n; i++)
			w |= (uint64_t)b[i] << (8 * i);
		h = h64_step(h, w);
	}
	h ^= h >> 32;
	h *= H64_K3;
	return h ^ (h >> 29);
}

int pf_ct_memeq(const void *a, const void *b, size_t n)
{
	/* CRYPTO_memcmp is OpenSSL's constant-time compare: 0 when equal. */
	return CRYPTO_memcmp(a, b, n) == 0;
}

int pf_random_bytes(void *dst, size_t n)
{
	uint8_t *p = dst;

	while (n > 0) {
		ssize_t r = getrandom(p, n, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int pf_token_generate(char *dst, size_t dst_len)
{
	uint8_t raw[33]; /* 32 random bytes + one zero pad byte to make 11 full 3-byte groups */
	size_t o = 0;

	if (!dst || dst_len < PF_TOKEN_BUF_LEN)
		return -ENOSPC;
	int r = pf_random_bytes(raw, 32);
	if (r < 0)
		return r;
	raw[32] = 0;
	memcpy(dst, PF_TOKEN_PREFIX, 3);
	o = 3;
	for (size_t i = 0; i < sizeof(raw); i += 3) {
		uint32_t v = (uint32_t)raw[i] << 16 | (uint32_t)raw[i + 1] << 8 | raw[i + 2];
		dst[o++] = b64url[(v >> 18) & 63];
		dst[o++] = b64url[(v >> 12) & 63];
		dst[o++] = b64url[(v >> 6) & 63];
		dst[o++] = b64url[v & 63];
	}
	/* 32 bytes are 256 bits = 43 base64 chars (the 44th encodes only pad bits); unpadded. */
	o = 3 + 43;
	dst[o] = '\0';
	explicit_bzero(raw, sizeof(raw));
	return 0;
}
