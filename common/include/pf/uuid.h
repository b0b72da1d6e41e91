/* pf/uuid.h — UUIDv7 (RFC 9562 §5.7) generation and the canonical text form. Random bits
 * come from getrandom(2); within one process, ids are strictly increasing (the 12-bit
 * rand_a field is used as a counter when the millisecond repeats, RFC 9562 §6.2 method 1). */
#ifndef PF_UUID_H
#define PF_UUID_H

#include <stddef.h>
#include <stdint.h>

#define PF_UUID_STR_LEN 36 /* without NUL */

int pf_uuid_v7(uint8_t out[16]); /* 0 or -errno from getrandom; thread-safe (one mutex) */
/* "0190f1f2-...": dst must hold 37 bytes. */
void pf_uuid_format(const uint8_t uid[16], char dst[PF_UUID_STR_LEN + 1]);
/* Accepts the canonical 36-char form (any case) or 32 hex digits. 0 or -EINVAL. */
int pf_uuid_parse(const char *s, uint8_t out[16]);
int pf_uuid_version(const uint8_t uid[16]);

/* Lowercase hex of n bytes into dst (2n+1 bytes); and back (-EINVAL on bad input). */
void pf_hex_encode(const uint8_t *src, size_t n, char *dst);
int pf_hex_decode(const char *src, uint8_t *dst, size_t n);

#endif
