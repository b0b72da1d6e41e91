/* line_table.h — source lines and inlined functions of an ELF file, as a compact table.
 *
 * Owns: building a file's table from its DWARF (elfutils libdw: every CU's line program and
 * its inlined-subroutine DIEs) and writing it as <dir>/<key>.lin — the table builder's kind
 * for source lines (table_builder.h), so the decoding's memory and CPU stay in its child —
 * and reading a table back for lookups without libdw. A reader holds one address per block
 * of PF_LINE_TABLE_BLOCK rows in memory and reads one block, an inline chain and its strings
 * with pread per lookup: neither decoded DWARF nor the file's pages sit in the caller.
 *
 * A lookup answers as libdw does for the address (the symbolizer's in-process path): the
 * source line is the last line-table row at or before it (none past an end of sequence),
 * and the inlined functions there come innermost first, each with the file and line the CPU
 * is at in it; the position of the frame itself becomes the outermost one's call site.
 *
 * Format (host byte order, version PF_LINE_TABLE_VERSION): a 64-byte header { magic
 * "PFLINTB1", version u32, flags u32, base u64, n_rows u32, n_inl u32, str_bytes u32, pad u32,
 * XXH3-64 of what follows u64, key char[16] (its first 15 characters, NUL padded) }, then
 * n_rows rows { address - base u32, file u32, line u32, inline u32 } in address order, n_inl
 * inline records { parent u32, name u32, call file u32, call line u32 }, and str_bytes of
 * NUL-terminated strings (file and name fields are offsets into them). PF_LINE_NONE marks
 * "no file" and "no inline record". A file whose header, length, checksum or row order does
 * not match is refused (-EBADMSG); the caller rebuilds it. */
#ifndef PF_AGENT_LINE_TABLE_H
#define PF_AGENT_LINE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#define PF_LINE_TABLE_VERSION 1
#define PF_LINE_NONE UINT32_MAX
#define PF_LINE_TABLE_BLOCK 256 /* rows per block read (4 KiB) */
#define PF_LINE_INLINE_MAX 16   /* inlined functions given per address, innermost first */
#define PF_LINE_STR_MAX 4096    /* a string longer than this is cut */
/* Rows a table may have (16 bytes each on disk): past it the build fails with -E2BIG. */
#define PF_LINE_TABLE_MAX_ROWS (4u << 20)

/* Builds the table of the ELF file open at fd (not consumed; the file itself or its separate
 * debug file, whichever has the DWARF) and writes <dir>/<key>.lin (a temporary file renamed
 * into place). At most max_rows rows (0: PF_LINE_TABLE_MAX_ROWS). 0, -ENOENT (no DWARF or no
 * line program), -E2BIG (over max_rows, or code spanning more than 4 GiB), -EINVAL (not
 * ELF, a bad key), -ENOMEM, or -errno of the write. The table builder's kind: the signature
 * is pf_tbuilder_kind's. */
int pf_line_table_build_store(uint64_t max_rows, int fd, const char *dir, const char *key);

struct pf_line_table;

/* Opens <dir>/<key>.lin and checks it, and marks it used (its modification time). 0,
 * -ENOENT, -EBADMSG, -ENOMEM, -errno. */
int pf_line_table_open(const char *dir, const char *key, struct pf_line_table **out);
void pf_line_table_close(struct pf_line_table *t);
/* Rows and bytes of memory the open table holds (its index). */
uint32_t pf_line_table_rows(const struct pf_line_table *t);
size_t pf_line_table_memory(const struct pf_line_table *t);

struct pf_line_inline {
	const char *name; /* linkage (mangled) name when DWARF has one, else DW_AT_name */
	const char *file;
	uint32_t line;
};

/* A lookup's answer; the strings live in buf. */
struct pf_line_result {
	const char *file; /* NULL: no source line */
	uint32_t line;
	uint32_t n_inl;
	struct pf_line_inline inl[PF_LINE_INLINE_MAX]; /* innermost first */
	char buf[16384]; /* a string that does not fit is cut */
	size_t used;
};

/* The source line and inlined functions at ELF virtual address vaddr. 0 (r->file NULL and
 * no inlines when the table has nothing there), -EBADMSG (the file changed under the reader:
 * close it), -errno of a read. */
int pf_line_table_lookup(struct pf_line_table *t, uint64_t vaddr, struct pf_line_result *r);

#endif
