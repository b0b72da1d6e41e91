/* elf_syms.h — the defined symbols of an ELF file's symbol tables, one callback each.
 *
 * Owns the walk over the sections of one type (SHT_DYNSYM or SHT_SYMTAB) that the runtimes'
 * detections (python_proc.c, v8_meta.c) and the symbolizer's ELF files (symbolize/elf_file.c)
 * share: pf_elf_each_symtab() hands over each section, pf_elf_each_sym() its defined symbols
 * (undefined symbols and those of value 0 are left out). Thread-safe (no state). */
#ifndef PF_AGENT_ELF_SYMS_H
#define PF_AGENT_ELF_SYMS_H

#include <gelf.h>
#include <stdbool.h>
#include <stdint.h>

/* The ELF file open at fd, for reading (elf_end() it); NULL when it is no ELF file. */
Elf *pf_elf_open(int fd);

/* Calls fn(ctx, d, sh, n) for each section of type `type` with fixed-size entries, in file
 * order: d its data, sh its header, n its entries. Stops at the first nonzero fn() and returns
 * it; 0 when every section was handed over. */
int pf_elf_each_symtab(Elf *elf, unsigned type,
		       int (*fn)(void *ctx, Elf_Data *d, const GElf_Shdr *sh, size_t n), void *ctx);

/* Calls fn(ctx, name, sym) for each defined symbol with a value in the sections of type
 * `type`, in file order, until it returns false. */
void pf_elf_each_sym(Elf *elf, unsigned type,
		     bool (*fn)(void *ctx, const char *name, const GElf_Sym *sym), void *ctx);

/* The 4-byte value of symbol s (of size 4) from the section holding it: 0 for .bss
 * (SHT_NOBITS); -1 when the section does not hold the whole value. */
int pf_elf_sym_i32(Elf *elf, const GElf_Sym *s, int32_t *v);

#endif
