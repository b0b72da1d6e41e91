/* utf8.c — see pf/utf8.h. */
#include "pf/utf8.h"

#include <string.h>

size_t pf_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned char c = s[0];
	size_t len;
	uint32_t v, min;
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if (c >= 0xc2 && c <= 0xdf) {
		len = 2, v = c & 0x1f, min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3, v = c & 0x0f, min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4, v = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

/* The length of the clean sequence at s (n >= 1 bytes left), 0 when it is not one. */
static size_t clean_len(const unsigned char *s, size_t n)
{
	uint32_t cp;
	size_t l = pf_utf8_decode(s, n, &cp);
	return l == 1 && (s[0] < 0x20 || s[0] == 0x7f) ? 0 : l;
}

bool pf_utf8_clean(const char *src, size_t n)
{
	const unsigned char *s = (const unsigned char *)src;
	for (size_t i = 0, l; i < n; i += l)
		if (!(l = clean_len(s + i, n - i)))
			return false;
	return true;
}

size_t pf_utf8_copy_clean(char *dst, const char *src, size_t n)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t i = 0, bad = 0;
	while (i < n) {
		size_t l = clean_len(s + i, n - i);
		if (!l) {
			dst[i++] = '?';
			bad++;
			continue;
		}
		memcpy(dst + i, s + i, l);
		i += l;
	}
	dst[n] = 0;
	return bad;
}
