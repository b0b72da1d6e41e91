/* pf/buf.h — growable byte buffer with a hard cap (curl's dynbuf). Appending past `max`
 * fails with -E2BIG and leaves the buffer as it was; allocation failure gives -ENOMEM.
 * The data is always NUL-terminated past `len` (not counted), so text can be used as a
 * C string.
 *
 *   struct pf_buf b;
 *   pf_buf_init(&b, 1 << 20);
 *   pf_buf_printf(&b, "%d agents", n);
 *   ...
 *   pf_buf_release(&b);
 */
#ifndef PF_BUF_H
#define PF_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include "pf/compiler.h"

struct pf_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
	size_t max;
};

#define PF_BUF_MAX_DEFAULT ((size_t)64 << 20)

void pf_buf_init(struct pf_buf *b, size_t max);
void pf_buf_release(struct pf_buf *b);
void pf_buf_reset(struct pf_buf *b); /* len = 0, memory kept */
int pf_buf_reserve(struct pf_buf *b, size_t extra);
int pf_buf_append(struct pf_buf *b, const void *p, size_t n);
/* Appends v as a protobuf-style base-128 varint (1..10 bytes). */
int pf_buf_append_uvarint(struct pf_buf *b, uint64_t v);
int pf_buf_append_str(struct pf_buf *b, const char *s);
int pf_buf_putc(struct pf_buf *b, uint8_t c);
int pf_buf_printf(struct pf_buf *b, const char *fmt, ...) PF_PRINTF(2, 3);
int pf_buf_vprintf(struct pf_buf *b, const char *fmt, va_list ap);
/* Takes the data out (caller frees); the buffer is left empty and reusable. */
uint8_t *pf_buf_detach(struct pf_buf *b, size_t *len);
static inline const char *pf_buf_str(const struct pf_buf *b)
{
	return b->data ? (const char *)b->data : "";
}

#endif
