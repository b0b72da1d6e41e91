/* unwind_table.h — compact unwind tables of ELF files, for the kernel's stack walk.
 *
 * Owns: building one table per ELF file from its call frame information (.eh_frame, and
 * .debug_frame for what .eh_frame does not cover) through elfutils' libdw CFI API
 * (dwarf_getcfi_elf / dwarf_getcfi, dwarf_cfi_addrframe, dwarf_frame_info, dwarf_frame_cfa,
 * dwarf_frame_register) — libdw parses the DWARF, this module only classifies its answers —
 * or, for a Go program's functions, from the stack-pointer tables the Go runtime keeps for
 * itself (gopclntab.h: CFA = rsp + what the function has reserved + 8, also in binaries
 * built without DWARF), and a versioned on-disk cache of built tables keyed by GNU build id.
 *
 * A table is a sorted array of rows (struct pf_unwind_row, 8 bytes). Row i covers the ELF
 * virtual addresses [rows[i].pc, rows[i + 1].pc). Each row says how to get from a frame at
 * that pc to its caller on x86_64:
 *   PF_UNWIND_CFA_RSP  CFA = rsp + cfa_off
 *   PF_UNWIND_CFA_RBP  CFA = rbp + cfa_off
 *   PF_UNWIND_CFA_PLT  CFA = rsp + 8, + 8 more when (rip & 15) >= cfa_off (the one expression
 *                      every PLT section's CFI uses)
 *   return address at CFA - 8; rbp saved at CFA + 8 * rbp_off8 (rbp_off8 0: rbp unchanged)
 *   PF_UNWIND_END      the return address is undefined: the outermost frame (_start,
 *                      clone's child), the walk ends here, complete
 *   PF_UNWIND_SIGNAL   a signal frame (libc's sigreturn trampoline, __restore_rt): the
 *                      kernel's struct rt_sigframe is on the stack with its return address
 *                      already popped, so rsp points at the struct ucontext; the interrupted
 *                      rbp, rsp and rip are at rsp + PF_UNWIND_UC_RBP / _RSP / _RIP (its
 *                      uc_mcontext). Only for an FDE marked as a signal frame ('S') whose CFI
 *                      reads exactly those three slots. The interrupted rip is not a return
 *                      address: its row is looked up at rip itself, not rip - 1.
 *   PF_UNWIND_STOP     anything else (a DWARF expression, another signal frame layout, an
 *                      offset out of range, an address no FDE covers): the walk ends here
 * Consecutive rows with the same rule are merged; a gap between FDEs gets a STOP row.
 *
 * Not thread-safe per table; tables are plain values after building. */
#ifndef PF_AGENT_UNWIND_TABLE_H
#define PF_AGENT_UNWIND_TABLE_H

#include <stddef.h>
#include <stdint.h>

enum pf_unwind_kind {
	PF_UNWIND_STOP = 0,
	PF_UNWIND_CFA_RSP = 1,
	PF_UNWIND_CFA_RBP = 2,
	PF_UNWIND_CFA_PLT = 3,
	PF_UNWIND_END = 4,
	PF_UNWIND_SIGNAL = 5,
};

/* Where a PF_UNWIND_SIGNAL frame's interrupted registers are, in bytes from its rsp: the
 * x86_64 Linux ucontext (uc_flags 8, uc_link 8, uc_stack 24, then uc_mcontext, the kernel's
 * struct sigcontext: r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, 8 bytes each). So
 * rbp is at 40 + 10 * 8, rsp at 40 + 15 * 8, rip at 40 + 16 * 8: glibc's REG_RBP, REG_RSP and
 * REG_RIP slots of ucontext_t's gregs (checked against <sys/ucontext.h> when building, and
 * against the kernel's own struct ucontext by the BPF program). */
#define PF_UNWIND_UC_RBP 120
#define PF_UNWIND_UC_RSP 160
#define PF_UNWIND_UC_RIP 168

/* The layout of the kernel's rows (cpu_sampler.h struct pf_bpf_unwind_row). */
struct pf_unwind_row {
	uint32_t pc;      /* ELF virtual address the row starts at */
	int16_t cfa_off;  /* PF_UNWIND_CFA_RSP/RBP: bytes; PF_UNWIND_CFA_PLT: the rip & 15 bound */
	uint8_t kind;     /* enum pf_unwind_kind */
	int8_t rbp_off8;  /* rbp saved at CFA + 8 * rbp_off8; 0: unchanged */
};

struct pf_unwind_table {
	struct pf_unwind_row *rows;
	size_t n_rows;
	uint64_t text_bytes; /* bytes of executable sections the table covers */
	uint32_t n_stop;     /* rows of kind PF_UNWIND_STOP (gaps included) */
	uint8_t source;      /* 1 .eh_frame (+ .debug_frame), 2 .debug_frame only, 3 a Go
			      * program's pclntab (+ CFI between its functions), 0 from the
			      * disk cache */
};

/* Builds the table of the ELF file open at fd (not consumed), of at most max_rows rows (0: no
 * bound; the walk stops as soon as it passes the bound, so a file too large for the kernel's
 * rows costs no more than max_rows rows' worth of work). 0, -ENOENT when it has no call frame
 * information, -E2BIG over max_rows, -EINVAL (not ELF, not x86_64, addresses beyond 4 GiB),
 * -ENOMEM. */
int pf_unwind_table_build(int fd, size_t max_rows, struct pf_unwind_table **out);
/* The same for an ELF image in memory (len bytes; copied while building): the vDSO, which
 * every process maps from the kernel (the agent reads its own). */
int pf_unwind_table_build_image(const void *image, size_t len, size_t max_rows,
				struct pf_unwind_table **out);
void pf_unwind_table_free(struct pf_unwind_table *t);

/* The row covering ELF virtual address pc, or NULL when pc is before the first row. */
const struct pf_unwind_row *pf_unwind_table_find(const struct pf_unwind_table *t, uint64_t pc);

/* ---- the disk cache: <dir>/<key>.unw ----
 * The key is a GNU build id in hex, or for a file without one "<dev>-<inode>" in hex (a key
 * that can never be a build id; such entries are not kept across runs).
 * Format (host byte order, version PF_UNWIND_CACHE_VERSION): a 112-byte header { magic
 * "PFUNWTB1", version u32, row size u32, n_rows u64, text_bytes u64, n_stop u32, source u32,
 * XXH3-64 of the rows u64 (libxxhash), key char[64] (NUL padded) } followed by the rows.
 * A file whose magic, version, row size, length, build id or checksum does not match is
 * refused (-EBADMSG) and the caller rebuilds. Writes go to a temporary file renamed into
 * place. */
#define PF_UNWIND_CACHE_VERSION 3 /* 2: PF_UNWIND_SIGNAL rows; 3: XXH3 checksum */
#define PF_UNWIND_CACHE_KEY_CHARS "0123456789abcdef-" /* up to 63 of them */

int pf_unwind_cache_load(const char *dir, const char *build_id, struct pf_unwind_table **out);

/* The same in two steps, for a reader that puts the rows straight where they are used (the
 * kernel's array: no heap copy, no mapping to fault in and tear down). Open checks the header
 * and the length and reads the first and last rows, so the reader knows the table's size and
 * address range before it makes room; read fills dst with the n_rows rows and checks their
 * checksum and order (-EBADMSG: dst holds garbage, the caller rebuilds). */
struct pf_unwind_cache_file {
	int fd;
	uint64_t n_rows;
	struct pf_unwind_row first; /* rows[0] */
	uint32_t last_pc;           /* rows[n_rows - 1].pc */
	uint64_t text_bytes;
	uint32_t n_stop;
	uint64_t checksum;
};
int pf_unwind_cache_open(const char *dir, const char *key, struct pf_unwind_cache_file *f);
int pf_unwind_cache_read(struct pf_unwind_cache_file *f, struct pf_unwind_row *dst);
void pf_unwind_cache_close(struct pf_unwind_cache_file *f);
int pf_unwind_cache_store(const char *dir, const char *build_id, const struct pf_unwind_table *t);

/* Build and store in one call, the table builder's kind (table_builder.h): arg is max_rows. */
int pf_unwind_table_build_store(uint64_t max_rows, int fd, const char *dir, const char *key);

#endif
