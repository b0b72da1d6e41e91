/* elf_syms.c — an ELF file's defined symbols (see elf_syms.h). */
#include "elf_syms.h"

#include <stddef.h>

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
