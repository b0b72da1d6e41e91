/* gopclntab.c — see gopclntab.h. The layout is Go's (src/debug/gosym/pclntab.go,
 * src/runtime/symtab.go): an 8-byte header (magic, two zero bytes, the instruction size
 * quantum, the pointer size), then pointer-sized words, then the function table: per
 * function an entry PC and the offset of its _func record, and one final PC (the end of
 * the last function). A _func record starts with the entry (a pointer, or from 1.18 a 32-bit
 * offset from .text) followed by the 32-bit offset of the name. */
#include "symbolize/gopclntab.h"
#include "symbolize/elf_read.h"

#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
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
		uint32_t pcsp = ver >= GO116 && funcs_len - foff >= fs + 16
					? (uint32_t)le(funcs + foff + fs + 12, 4)
					: 0;
		v[k++] = (struct pf_go_func){pc, next - pc, name, pcsp};
	}
	*out = v;
	*n = k;
	return 0;
}

/* An unsigned LEB128 varint at *p (below end) into *v: false when it runs past end or 32 bits. */
static bool varint(const uint8_t **p, const uint8_t *end, uint32_t *v)
{
	uint32_t x = 0;
	for (unsigned shift = 0; shift < 35; shift += 7) {
		if (*p >= end)
			return false;
		uint8_t b = *(*p)++;
		x |= (uint32_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

int pf_gopclntab_sp(const uint8_t *tab, size_t len, const struct pf_go_func *f,
		    int (*fn)(void *ctx, uint64_t pc, int32_t sp), void *ctx)
{
	int ver = version_of(tab, len);
	if (ver < 0)
		return ver;
	if (ver < GO116 || !f->pcsp)
		return -ENOTSUP;
	size_t ps = tab[7], w = ver == GO116 ? 5 : 6; /* the pctab's header word */
	if (8 + (w + 1) * ps > len)
		return -EINVAL;
	uint64_t pctab = le(tab + 8 + w * ps, ps);
	if (pctab >= len || f->pcsp >= len - pctab)
		return -EINVAL;
	const uint8_t *p = tab + pctab + f->pcsp, *end = tab + len;
	uint64_t pc = f->entry, fend = f->entry + f->size;
	int64_t val = -1; /* wide: a hostile delta must not overflow it */
	for (unsigned step = 0; pc < fend; step++) {
		uint32_t uv, pcd;
		if (!varint(&p, end, &uv))
			return -EINVAL;
		if (uv == 0 && step)
			break; /* the program's end */
		int32_t d = (uv & 1) ? (int32_t)~(uv >> 1) : (int32_t)(uv >> 1);
		if (!varint(&p, end, &pcd) || !pcd)
			return -EINVAL;
		val += d;
		if (val < 0 || val > (1 << 24))
			return -EINVAL;
		int rc = fn(ctx, pc, (int32_t)val);
		if (rc)
			return rc;
		pc += (uint64_t)pcd * tab[6];
	}
	return 0;
}

/* The bytes of the section of elf called name, or NULL (none, or SHT_NOBITS). */
static const uint8_t *section_bytes(Elf *elf, const char *name, size_t *len)
{
	GElf_Shdr sh;
	Elf_Scn *scn = pf_elf_section(elf, name);
	Elf_Data *d = scn && gelf_getshdr(scn, &sh) && sh.sh_type != SHT_NOBITS
			      ? elf_getdata(scn, NULL)
			      : NULL;
	*len = d && d->d_buf ? d->d_size : 0;
	return *len ? d->d_buf : NULL;
}

/* Where Go's code starts: the 1.18+ header's own textStart (runtime.text) when it lies in
 * .text — an externally linked program (cgo) has C code first — else .text's address (the
 * header's word is 0 in a file where a dynamic relocation fills it in). */
static uint64_t go_text(const uint8_t *tab, size_t len, const GElf_Shdr *text)
{
	int ver = version_of(tab, len);
	if (ver < GO118 || tab[7] != 8 || len < 8 + 3 * 8)
		return text->sh_addr;
	uint64_t ts = le(tab + 8 + 2 * 8, 8);
	return ts >= text->sh_addr && ts < text->sh_addr + text->sh_size ? ts : text->sh_addr;
}

int pf_gopclntab_find(Elf *elf, const uint8_t **tab, size_t *len, uint64_t *text_start)
{
	GElf_Shdr text;
	Elf_Scn *ts = pf_elf_section(elf, ".text");
	if (!ts || !gelf_getshdr(ts, &text))
		return -ENOENT;
	*text_start = text.sh_addr;
	size_t n;
	const uint8_t *t = section_bytes(elf, ".gopclntab", &n);
	if (!t)
		t = section_bytes(elf, ".data.rel.ro.gopclntab", &n);
	if (t && pf_gopclntab_looks_like(t, n)) {
		*tab = t;
		*len = n;
		*text_start = go_text(t, n, &text);
		return 0;
	}
	size_t bl;
	if (!section_bytes(elf, ".go.buildinfo", &bl) || !(t = section_bytes(elf, ".data.rel.ro", &n)))
		return -ENOENT;
	for (size_t off = 0; off + 16 <= n; off += 8) { /* the header is pointer-aligned */
		struct pf_go_func *f;
		size_t k;
		if (!pf_gopclntab_looks_like(t + off, n - off) ||
		    pf_gopclntab_parse(t + off, n - off, *text_start, &f, &k) < 0)
			continue;
		free(f);
		if (k) {
			*tab = t + off;
			*len = n - off;
			*text_start = go_text(*tab, *len, &text);
			return 0;
		}
	}
	return -ENOENT;
}
