/* utf8.h — decoding one UTF-8 sequence, strictly (RFC 3629).
 *
 * Owns: the validity rule shared by whatever must put untrusted text into a protobuf string or
 * a YAML/JSON document: overlong forms, surrogates, code points past U+10FFFF and truncated
 * sequences are not UTF-8. */
#ifndef PF_UTF8_H
#define PF_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The sequence at s (n >= 1 bytes left): its length with its code point in *cp, or 0 when it
 * is not valid UTF-8. */
size_t pf_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* True when s[0, n) is valid UTF-8 without control characters (< 0x20, 0x7f): text that can
 * go into a protobuf string and a one-line label as it is. */
bool pf_utf8_clean(const char *s, size_t n);

/* Copies src[0, n) into dst (n bytes, then a NUL) with every byte that is not part of valid
 * UTF-8, and every control character, replaced by '?'. The number of bytes replaced. */
size_t pf_utf8_copy_clean(char *dst, const char *src, size_t n);

#endif
