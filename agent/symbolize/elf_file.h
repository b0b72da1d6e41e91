/* elf_file.h — one ELF file the symbolizer opened: its load segments, build id and function
 * symbols.
 *
 * Owns: struct elf_file (the libelf handle over the file's read-only mapping, the separate
 * debug file found by build id, the symbols kept one name per address) and what is read
 * from it: the symbol covering an address (.symtab, else the debug file's .symtab, else a Go
 * program's pclntab, else .dynsym), file offsets as ELF virtual addresses, and giving back
 * the resident pages of its images. The cache of these files is elf_cache.h; their line
 * tables elf_lines.h. Not thread-safe. */
#ifndef PF_AGENT_ELF_FILE_H
#define PF_AGENT_ELF_FILE_H

#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbolize/elf_read.h"

struct pf_line_table;

struct elf_sym {
	uint64_t addr;
	const char *name; /* points into the mmapped ELF; may end in a version, "@@GLIBC_2.34" */
	uint32_t size;
	uint8_t rank; /* sym_rank(): which of the names at one address is shown */
};

struct load_seg {
	uint64_t off, vaddr, filesz;
};

struct elf_file {
	struct elf_file *prev, *next; /* LRU: head = most recent */
	uint64_t id;                  /* unique per opened file: result cache key */
	char build_id[PF_BUILD_ID_HEX];  /* "" when the file has none */
	uint64_t dev, ino;
	int fd;
	Elf *elf;
	uint16_t e_type;
	struct load_seg *segs;
	size_t n_segs;
	bool syms_loaded;
	bool go_syms; /* its names came from its Go pclntab */
	bool go;      /* a Go program (.go.buildinfo): its frames are of type go */
	struct elf_sym *syms;
	size_t n_syms;
	bool no_dwarf;      /* neither the file nor its debug file has DWARF */
	bool dbg_tried;
	int dbg_fd; /* separate debug file (/usr/lib/debug/.build-id/..), -1 when none; kept
		     * while the file is cached: a stripped file's .symtab comes from it */
	Elf *dbg_elf;
	/* the file's and the debug file's images: 1 when libelf mapped them read-only from the
	 * file (their pages can be given back at a trim), -1 when not, 0 not checked yet */
	int8_t img_state, dbg_img_state;
	bool img_touched; /* symbol tables loaded (or a header read) since the last trim */
	int8_t lt_state;  /* its line table: LT_* */
	struct pf_line_table *lt;
	void *image; /* the bytes elf reads when it is not a file (the vDSO's copy), else NULL */
};

enum { LT_UNKNOWN = 0, LT_PENDING = 1, LT_READY = 2, LT_NONE = -1 };

/* Reads e's header, build id and load segments into a new elf_file owning fd (-1 for none)
 * and e, or NULL and errno (both released). */
struct elf_file *elf_file_wrap(int fd, Elf *e, uint64_t dev, uint64_t ino);
/* The same over a file descriptor, taking ownership of fd (closed on failure). */
struct elf_file *elf_file_open(int fd);
void elf_file_free(struct elf_file *f);

/* The separate debug file (<debug_dir>/.build-id/xx/yyyy.debug; NULL: /usr/lib/debug), opened
 * once per file. NULL when there is none. */
Elf *elf_file_debug(struct elf_file *f, const char *debug_dir);
/* The symbol covering vaddr (its tables loaded at the first lookup), or NULL. */
const struct elf_sym *elf_file_find_sym(struct elf_file *f, const char *debug_dir,
					uint64_t vaddr);
/* Length of a symbol's name without its version suffix ("@@VER", "@VER"). */
size_t elf_sym_base_len(const char *name);

/* ELF virtual address of a file offset, through the PT_LOAD segments. */
bool elf_file_off_to_vaddr(const struct elf_file *f, uint64_t off, uint64_t *vaddr);
/* The same for the page-aligned start offset of an executable mapping. */
bool elf_file_exec_off_to_vaddr(const struct elf_file *f, uint64_t off, uint64_t *vaddr);

/* Gives back the pages of f's images read since the last call (a no-op when none were). */
void elf_file_release_touched(struct elf_file *f);

struct pf_sym_info {
	char function[256]; /* "" when unknown */
	uint64_t sym_addr;  /* start of the symbol (ELF virtual address) */
};

/* Looks an ELF virtual address up in the file at path: its symbol (symtab, else dynsym), for
 * tests and tools. 0, -ENOENT when no symbol covers vaddr, other -errno. */
int pf_elf_lookup(const char *path, uint64_t vaddr, struct pf_sym_info *out);

#endif
