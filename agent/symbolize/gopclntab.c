/* gopclntab.c — see gopclntab.h. The layout is Go's (src/debug/gosym/pclntab.go,
 * src/runtime/symtab.go): an 8-byte header (magic, two zero bytes, the instruction size
 * quantum, the pointer size), then pointer-sized words, then the function table: per
 * function an entry PC and the offset of its _func record, and one final PC (the end of
 * the last function). A _func record starts with the entry (a pointer, or from 1.18 a 32-bit
 * offset from .text) followed by the 32-bit offset of the name. */
#include "gopclntab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { GO12 = 12, GO116 = 116, GO118 = 118, GO120 = 120 };

static uint64_t le(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static int version_of(const uint8_t *tab, size_t len)
{
	if (len < 16 || tab[4] || tab[5] || (tab[6] != 1 && tab[6] != 2 && tab[6] != 4) ||
	    (tab[7] != 4 && tab[7] != 8))
		return -EINVAL;
	switch ((uint32_t)le(tab, 4)) {
	case 0xfffffffbu:
		return GO12;
	case 0xfffffffau:
		return GO116;
	case 0xfffffff0u:
		return GO118;
	case 0xfffffff1u:
		return GO120;
	default:
		return -ENOTSUP;
	}
}

int pf_gopclntab_looks_like(const uint8_t *tab, size_t len)
{
	return version_of(tab, len) > 0;
}

int pf_gopclntab_parse(const uint8_t *tab, size_t len, uint64_t text_start,
		       struct pf_go_func **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	int ver = version_of(tab, len);
	if (ver < 0)
		return ver;
	size_t ps = tab[7];
	/* the header's words: 8 + i * ps */
#define WORD(i) (8 + ((size_t)(i) + 1) * ps <= len ? le(tab + 8 + (size_t)(i) * ps, ps) : UINT64_MAX)
	uint64_t nfunc = WORD(0), names_off, funcs_off, functab_off;
	switch (ver) {
	case GO12:
		names_off = 0;
		funcs_off = 0;
		functab_off = 8 + ps;
		text_start = 0; /* entries are addresses */
		break;
	case GO116:
		names_off = WORD(2);
		funcs_off = functab_off = WORD(6);
		text_start = 0;
		break;
	default: /* 1.18+ */
		names_off = WORD(3);
		funcs_off = functab_off = WORD(7);
		break;
	}
#undef WORD
	if (nfunc == UINT64_MAX || names_off >= len || funcs_off >= len || functab_off >= len)
		return -EINVAL;
	if (nfunc > PF_GO_MAX_FUNCS)
		return -E2BIG;
	size_t fs = ver >= GO118 ? 4 : ps; /* a function table field */
	if ((2 * nfunc + 1) * fs > len - functab_off)
		return -EINVAL;
	const uint8_t *functab = tab + functab_off, *funcs = tab + funcs_off,
		      *names = tab + names_off;
	size_t funcs_len = len - funcs_off, names_len = len - names_off;
	struct pf_go_func *v = malloc((nfunc ? nfunc : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	size_t k = 0;
	uint64_t end = text_start + le(functab + 2 * nfunc * fs, fs);
	for (uint64_t i = 0; i < nfunc; i++) {
		uint64_t pc = text_start + le(functab + 2 * i * fs, fs);
		uint64_t next = i + 1 < nfunc ? text_start + le(functab + 2 * (i + 1) * fs, fs) : end;
		uint64_t foff = le(functab + (2 * i + 1) * fs, fs);
		if (foff > funcs_len || funcs_len - foff < fs + 4 || next < pc)
			continue;
		uint64_t noff = le(funcs + foff + fs, 4);
		if (noff >= names_len)
			continue;
		const char *name = (const char *)names + noff;
		if (!*name || !memchr(name, 0, names_len - noff))
			continue;
		v[k++] = (struct pf_go_func){pc, next - pc, name};
	}
	*out = v;
	*n = k;
	return 0;
}
