/* elf_syms.c — an ELF file's defined symbols (see elf_syms.h). */
#include "elf_syms.h"

#include <stddef.h>
#include <string.h>

void pf_elf_each_sym(Elf *elf, unsigned type,
		     bool (*fn)(void *ctx, const char *name, const GElf_Sym *sym), void *ctx)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || !sh.sh_entsize)
			continue;
		Elf_Data *data = elf_getdata(scn, NULL);
		if (!data)
			continue;
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < n; i++) {
			GElf_Sym s;
			if (!gelf_getsym(data, (int)i, &s) || s.st_shndx == SHN_UNDEF ||
			    !s.st_value)
				continue;
			const char *name = elf_strptr(elf, sh.sh_link, s.st_name);
			if (name && !fn(ctx, name, &s))
				return;
		}
	}
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
