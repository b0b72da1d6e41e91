/* pf/gzip.h — gzip (RFC 1952) compress and bounded decompress through zlib. The decompressor
 * refuses to produce more than max_out bytes (-E2BIG), so a small hostile body cannot
 * expand without bound. */
#ifndef PF_GZIP_H
#define PF_GZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"

/* Appends the gzip form of src to out. level 1..9, or -1 for zlib's default. */
int pf_gzip_compress(const void *src, size_t len, int level, struct pf_buf *out);
/* Appends the decompressed bytes to out; -EBADMSG on corrupt input, -E2BIG past max_out. */
int pf_gzip_decompress(const void *src, size_t len, size_t max_out, struct pf_buf *out);
bool pf_gzip_is_gzip(const void *src, size_t len); /* magic 1f 8b */

#endif
