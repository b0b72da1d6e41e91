/* elf_read.h — what the agent reads from one ELF image through libelf, with no cache around it.
 *
 * Owns: libelf's one-time setup, finding a section by name, the GNU build id (from the
 * PT_NOTE segments, else the SHT_NOTE sections, or from a raw note area such as
 * /sys/kernel/notes), and whether a file carries DWARF. The symbolizer (elf_file.h), the Go
 * table reader (gopclntab.h) and the unwind-table builder (unwind_table.h) share it. */
#ifndef PF_AGENT_ELF_READ_H
#define PF_AGENT_ELF_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A GNU build id in lowercase hex with its NUL (20 bytes of SHA-1: 41; longer ids are cut). */
#define PF_BUILD_ID_HEX 41

struct Elf;
struct Elf_Scn;

/* True once libelf agreed to this version of its interface (asked once). */
bool pf_elf_ready(void);

/* The section of an ELF handle (libelf's Elf, Elf_Scn) with that name, or NULL. */
struct Elf_Scn *pf_elf_section(struct Elf *elf, const char *name);

/* The GNU build id in a raw note area p[0, len), as hex into hex (hexlen bytes). 0, -ENOENT
 * when there is none, -EINVAL when a note runs past the area. */
int pf_elf_notes_build_id(const uint8_t *p, size_t len, char *hex, size_t hexlen);
/* The same from an ELF handle's notes: segments first, then sections. 0 or -ENOENT. */
int pf_elf_handle_build_id(struct Elf *elf, char *hex, size_t hexlen);
/* GNU build id of an ELF file (fd not consumed), lowercase hex into hex (>= 41 bytes).
 * 0, -ENOENT when the file has no build id note, -EINVAL when it is not ELF. */
int pf_elf_build_id(int fd, char *hex, size_t hexlen);

/* True when elf has DWARF sections (.debug_*, or the old compressed .zdebug_*). */
bool pf_elf_has_dwarf(struct Elf *elf);

#endif
