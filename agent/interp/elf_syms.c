/* elf_syms.c — an ELF file's defined symbols (see elf_syms.h). */
#include "elf_syms.h"

#include <stddef.h>
#include <string.h>

Elf *pf_elf_open(int fd)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		elf = NULL;
	}
	return elf;
}

int pf_elf_each_symtab(Elf *elf, unsigned type,
		       int (*fn)(void *ctx, Elf_Data *d, const GElf_Shdr *sh, size_t n), void *ctx)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || !sh.sh_entsize)
			continue;
		Elf_Data *data = elf_getdata(scn, NULL);
		if (!data)
			continue;
		int rc = fn(ctx, data, &sh, sh.sh_size / sh.sh_entsize);
		if (rc)
			return rc;
	}
	return 0;
}

struct each_sym {
	Elf *elf;
	bool (*fn)(void *ctx, const char *name, const GElf_Sym *sym);
	void *ctx;
};

/* 1 (stop) once the callback said so. */
static int each_sym_in(void *ctx, Elf_Data *data, const GElf_Shdr *sh, size_t n)
{
	const struct each_sym *e = ctx;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym s;
		if (!gelf_getsym(data, (int)i, &s) || s.st_shndx == SHN_UNDEF || !s.st_value)
			continue;
		const char *name = elf_strptr(e->elf, sh->sh_link, s.st_name);
		if (name && !e->fn(e->ctx, name, &s))
			return 1;
	}
	return 0;
}

void pf_elf_each_sym(Elf *elf, unsigned type,
		     bool (*fn)(void *ctx, const char *name, const GElf_Sym *sym), void *ctx)
{
	struct each_sym e = {elf, fn, ctx};
	pf_elf_each_symtab(elf, type, each_sym_in, &e);
}

int pf_elf_sym_i32(Elf *elf, const GElf_Sym *s, int32_t *v)
{
	Elf_Scn *scn = elf_getscn(elf, s->st_shndx);
	GElf_Shdr sh;
	if (!scn || !gelf_getshdr(scn, &sh) || s->st_size != sizeof(*v) ||
	    s->st_value < sh.sh_addr || s->st_value - sh.sh_addr + sizeof(*v) > sh.sh_size)
		return -1;
	if (sh.sh_type == SHT_NOBITS) {
		*v = 0;
		return 0;
	}
	Elf_Data *d = NULL;
	uint64_t at = s->st_value - sh.sh_addr;
	while ((d = elf_getdata(scn, d))) {
		if (at >= (uint64_t)d->d_off && at - (uint64_t)d->d_off + sizeof(*v) <= d->d_size &&
		    d->d_buf) {
			memcpy(v, (const char *)d->d_buf + (at - (uint64_t)d->d_off), sizeof(*v));
			return 0;
		}
	}
	return -1;
}
