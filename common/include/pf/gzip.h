/* pf/gzip.h — gzip (RFC 1952) compress and bounded decompress through zlib. The decompressor
 * refuses to produce more than max_out bytes (-E2BIG), so a small hostile body cannot
 * expand without bound. */
#ifndef PF_GZIP_H
#define PF_GZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"

/* Appends the gzip form of src to out. level 1..9, or -1 for zlib's default (else -EINVAL).
 * On failure (-E2BIG from out's cap, -ENOMEM) out is left as it was. */
int pf_gzip_compress(const void *src, size_t len, int level, struct pf_buf *out);
/* Appends the decompressed bytes to out. -EBADMSG on input that is not gzip, corrupt (bad
 * CRC/ISIZE too), truncated, or followed by anything but another gzip member (RFC 1952 §2.2);
 * -E2BIG when this call's output would pass max_out bytes (or out's own cap). On failure out is
 * left as it was, and never more than max_out bytes were appended. */
int pf_gzip_decompress(const void *src, size_t len, size_t max_out, struct pf_buf *out);
bool pf_gzip_is_gzip(const void *src, size_t len); /* magic 1f 8b */

#endif
