/* python_linetable.c — CPython line tables (co_lnotab, the 3.10 co_linetable, the 3.11+
 * location table) decoded from untrusted bytes. */
#include "python_linetable.h"

#include <errno.h>
#include <stdbool.h>

/* 3.9 co_lnotab (Objects/lnotab_notes.txt of 3.9): pairs of an unsigned byte-offset delta and
 * a signed line delta; the line of `offset` is first_line plus the line deltas of the pairs
 * whose offsets are <= offset (PyCode_Addr2Line of 3.9). */
static int lnotab_line(const uint8_t *t, size_t len, int32_t first, uint32_t offset, uint32_t *line)
{
	int64_t l = first;
	uint64_t addr = 0;
	for (size_t i = 0; i + 1 < len; i += 2) {
		addr += t[i];
		if (addr > offset)
			break;
		l += (int8_t)t[i + 1];
	}
	*line = l > 0 && l <= INT32_MAX ? (uint32_t)l : 0;
	return 0;
}

/* 3.10 co_linetable (Objects/lnotab_notes.txt of 3.10): pairs (unsigned byte-offset delta,
 * signed line delta), each pair one range [start, start + delta) of the bytecode; a line delta
 * of -128 marks a range without a line. */
static int linetable310_line(const uint8_t *t, size_t len, int32_t first, uint32_t offset,
			     uint32_t *line)
{
	int64_t computed = first;
	uint64_t start = 0;
	*line = 0;
	for (size_t i = 0; i + 1 < len; i += 2) {
		uint64_t end = start + t[i];
		int8_t ld = (int8_t)t[i + 1];
		bool none = ld == -128;
		if (!none)
			computed += ld;
		if (offset >= start && offset < end) {
			if (!none && computed > 0 && computed <= INT32_MAX)
				*line = (uint32_t)computed;
			return 0;
		}
		start = end;
	}
	return 0;
}

/* The location table's varints (Objects/locations.md of 3.11+): 6 bits a byte, low first,
 * 0x40 set on every byte but the last. An entry's payload bytes have bit 7 clear. */
static int read_varint(const uint8_t *t, size_t len, size_t *i, uint64_t *out)
{
	uint64_t v = 0;
	for (unsigned shift = 0; shift < 36; shift += 6) {
		if (*i >= len || (t[*i] & 0x80))
			return -EINVAL;
		uint8_t b = t[(*i)++];
		v |= (uint64_t)(b & 63) << shift;
		if (!(b & 64)) {
			*out = v;
			return 0;
		}
	}
	return -EINVAL;
}

static int read_svarint(const uint8_t *t, size_t len, size_t *i, int64_t *out)
{
	uint64_t u;
	int r = read_varint(t, len, i, &u);
	if (r < 0)
		return r;
	*out = (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
	return 0;
}

/* 3.11+ location table: each entry starts with a byte 1cccclll: code c, length l + 1 code
 * units (2 bytes each). Codes: 15 no location; 14 long form (svarint line delta, varint end
 * line delta, varint column + 1, varint end column + 1); 13 no columns (svarint line delta);
 * 10-12 one line (line delta c - 10, then column and end column bytes); 0-9 short form (same
 * line, one column byte). */
static int loctable_line(const uint8_t *t, size_t len, int32_t first, uint32_t offset,
			 uint32_t *line)
{
	int64_t computed = first;
	uint64_t start = 0;
	size_t i = 0;
	*line = 0;
	while (i < len) {
		uint8_t b = t[i++];
		if (!(b & 0x80))
			return -EINVAL; /* not at an entry's first byte */
		unsigned code = (b >> 3) & 15;
		uint64_t end = start + 2 * ((uint64_t)(b & 7) + 1);
		int64_t delta = 0;
		uint64_t skip;
		int r = 0;
		bool none = false;
		switch (code) {
		case 15:
			none = true;
			break;
		case 14:
			r = read_svarint(t, len, &i, &delta);
			for (int k = 0; k < 3 && r == 0; k++)
				r = read_varint(t, len, &i, &skip);
			break;
		case 13:
			r = read_svarint(t, len, &i, &delta);
			break;
		case 10:
		case 11:
		case 12:
			delta = code - 10;
			if (i + 2 > len)
				return -EINVAL;
			i += 2;
			break;
		default:
			if (i + 1 > len)
				return -EINVAL;
			i += 1;
			break;
		}
		if (r < 0)
			return r;
		computed += delta;
		if (computed < INT32_MIN || computed > INT32_MAX)
			return -EINVAL;
		if (offset >= start && offset < end) {
			if (!none && computed > 0)
				*line = (uint32_t)computed;
			return 0;
		}
		start = end;
	}
	return 0;
}

int pf_py_line_for(unsigned minor, const uint8_t *table, size_t len, int32_t first_line,
		   uint32_t offset, uint32_t *line)
{
	*line = 0;
	if (!table)
		len = 0;
	if (minor == 9)
		return lnotab_line(table, len, first_line, offset, line);
	if (minor == 10)
		return linetable310_line(table, len, first_line, offset, line);
	if (minor >= 11 && minor <= 13)
		return loctable_line(table, len, first_line, offset, line);
	return -ENOTSUP;
}
