/* buf.c — see pf/buf.h. */
#include "pf/buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pf_buf_init(struct pf_buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max ? max : PF_BUF_MAX_DEFAULT;
}

void pf_buf_release(struct pf_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void pf_buf_reset(struct pf_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = 0;
}

int pf_buf_reserve(struct pf_buf *b, size_t extra)
{
	if (extra > b->max || b->len > b->max - extra)
		return -E2BIG;
	size_t need = b->len + extra + 1; /* + NUL */
	if (need <= b->cap)
		return 0;
	size_t ncap = b->cap ? b->cap : 64;
	while (ncap < need)
		ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
	if (ncap > b->max + 1)
		ncap = b->max + 1;
	uint8_t *p = realloc(b->data, ncap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = ncap;
	return 0;
}

int pf_buf_append(struct pf_buf *b, const void *p, size_t n)
{
	int r = pf_buf_reserve(b, n);
	if (r < 0)
		return r;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = 0;
	return 0;
}

int pf_buf_append_uvarint(struct pf_buf *b, uint64_t v)
{
	uint8_t t[10];
	size_t n = 0;

	do {
		t[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	if (b->cap - b->len > n) { /* room for it and the NUL (cap <= max + 1): no reserve */
		memcpy(b->data + b->len, t, n);
		b->len += n;
		b->data[b->len] = 0;
		return 0;
	}
	return pf_buf_append(b, t, n);
}

int pf_buf_append_str(struct pf_buf *b, const char *s)
{
	return pf_buf_append(b, s, strlen(s));
}

int pf_buf_putc(struct pf_buf *b, uint8_t c)
{
	return pf_buf_append(b, &c, 1);
}

int pf_buf_vprintf(struct pf_buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	va_copy(cp, ap);
	int n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0)
		return -EINVAL;
	int r = pf_buf_reserve(b, (size_t)n);
	if (r < 0)
		return r;
	vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int pf_buf_printf(struct pf_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = pf_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return r;
}

uint8_t *pf_buf_detach(struct pf_buf *b, size_t *len)
{
	uint8_t *p = b->data;
	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}
