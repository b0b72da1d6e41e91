/* utf8.h — decoding one UTF-8 sequence, strictly (RFC 3629).
 *
 * Owns: the validity rule shared by whatever must put untrusted text into a protobuf string or
 * a YAML/JSON document: overlong forms, surrogates, code points past U+10FFFF and truncated
 * sequences are not UTF-8. */
#ifndef PF_UTF8_H
#define PF_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The sequence at s (n >= 1 bytes left): its length with its code point in *cp, or 0 when it
 * is not valid UTF-8. */
size_t pf_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

#endif
