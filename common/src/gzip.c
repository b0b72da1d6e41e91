/* gzip.c — see pf/gzip.h. Streams through a fixed stack chunk so neither direction ever
 * allocates more than the output it keeps; inputs larger than zlib's uInt are fed in pieces. */
#include "pf/gzip.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include <zlib.h>

#define GZ_CHUNK 16384
#define GZ_WINDOW_GZIP (15 + 16) /* windowBits + 16: gzip wrapper only (zlib manual) */
#define GZ_IN_MAX ((size_t)UINT_MAX)

static void feed(z_stream *zs, const uint8_t **in, size_t *left)
{
	if (zs->avail_in == 0 && *left > 0) {
		size_t n = pf_min(*left, GZ_IN_MAX);
		zs->next_in = (Bytef *)*in;
		zs->avail_in = (uInt)n;
		*in += n;
		*left -= n;
	}
}

int pf_gzip_compress(const void *src, size_t len, int level, struct pf_buf *out)
{
	z_stream zs;
	uint8_t chunk[GZ_CHUNK];
	const uint8_t *in = src;
	size_t left = len, start = out->len;
	int r = 0;

	if ((level < 1 || level > 9) && level != -1)
		return -EINVAL;
	if (!src && len)
		return -EINVAL;
	memset(&zs, 0, sizeof(zs));
	int zr = deflateInit2(&zs, level == -1 ? Z_DEFAULT_COMPRESSION : level, Z_DEFLATED,
			      GZ_WINDOW_GZIP, 8, Z_DEFAULT_STRATEGY);
	if (zr != Z_OK)
		return zr == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
	for (;;) {
		feed(&zs, &in, &left);
		int flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
		zs.next_out = chunk;
		zs.avail_out = sizeof(chunk);
		zr = deflate(&zs, flush);
		if (zr == Z_STREAM_ERROR) {
			r = -EINVAL;
			break;
		}
		r = pf_buf_append(out, chunk, sizeof(chunk) - zs.avail_out);
		if (r < 0 || zr == Z_STREAM_END)
			break;
	}
	deflateEnd(&zs);
	if (r < 0) {
		/* Leave out as it was. */
		out->len = start;
		if (out->data)
			out->data[start] = 0;
	}
	return r;
}

int pf_gzip_decompress(const void *src, size_t len, size_t max_out, struct pf_buf *out)
{
	z_stream zs;
	uint8_t chunk[GZ_CHUNK];
	const uint8_t *in = src;
	size_t left = len, start = out->len, produced = 0;
	int r = 0;

	if (!src || !pf_gzip_is_gzip(src, len))
		return -EBADMSG;
	memset(&zs, 0, sizeof(zs));
	int zr = inflateInit2(&zs, GZ_WINDOW_GZIP);
	if (zr != Z_OK)
		return zr == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
	for (;;) {
		feed(&zs, &in, &left);
		/* Ask for at most one byte beyond the budget: getting it proves the stream is too
		 * big, and that byte never reaches out. */
		size_t room = max_out - produced;
		zs.next_out = chunk;
		zs.avail_out = (uInt)(room < sizeof(chunk) ? room + 1 : sizeof(chunk));
		zr = inflate(&zs, Z_NO_FLUSH);
		size_t got = (size_t)(zs.next_out - chunk);
		if (got > room) {
			r = -E2BIG;
			break;
		}
		if (zr == Z_MEM_ERROR) {
			r = -ENOMEM;
			break;
		}
		if (zr != Z_OK && zr != Z_STREAM_END && !(zr == Z_BUF_ERROR && got > 0)) {
			/* Z_DATA_ERROR, Z_NEED_DICT, or Z_BUF_ERROR without progress: the input
			 * ended before the stream did (truncated). */
			r = -EBADMSG;
			break;
		}
		produced += got;
		r = pf_buf_append(out, chunk, got);
		if (r < 0)
			break;
		if (zr == Z_STREAM_END) {
			/* RFC 1952 §2.2: a gzip file is a series of members. Another member may
			 * follow; anything else after the trailer is garbage. */
			feed(&zs, &in, &left);
			if (zs.avail_in == 0)
				break;
			if (!pf_gzip_is_gzip(zs.next_in, zs.avail_in + left)) {
				r = -EBADMSG;
				break;
			}
			if (inflateReset(&zs) != Z_OK) {
				r = -EBADMSG;
				break;
			}
		} else if (zs.avail_in == 0 && left == 0 && got == 0) {
			r = -EBADMSG; /* truncated */
			break;
		}
	}
	inflateEnd(&zs);
	if (r < 0) {
		out->len = start;
		if (out->data)
			out->data[start] = 0;
	}
	return r;
}

bool pf_gzip_is_gzip(const void *src, size_t len)
{
	const uint8_t *p = src;

	return src && len >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}
