/* unwind_table.c — see unwind_table.h. */
#include "unwind/unwind_table.h"
#include "pf/compiler.h"
#include "symbolize/elf_read.h"
#include "symbolize/gopclntab.h"
#include "unwind/table_builder.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/ucontext.h>
#include <unistd.h>
#include <xxhash.h>

/* The signal frame's slots (unwind_table.h) are glibc's view of the ucontext the kernel
 * pushes. */
_Static_assert(PF_UNWIND_UC_RBP == offsetof(ucontext_t, uc_mcontext.gregs[REG_RBP]) &&
		       PF_UNWIND_UC_RSP == offsetof(ucontext_t, uc_mcontext.gregs[REG_RSP]) &&
		       PF_UNWIND_UC_RIP == offsetof(ucontext_t, uc_mcontext.gregs[REG_RIP]),
	       "x86_64 ucontext layout");

/* DWARF register numbers of the x86_64 psABI (figure 3.36). */
#define DW_X86_64_RBP 6
#define DW_X86_64_RSP 7
#define DW_X86_64_RA 16

/* ---- classifying libdw's answers ---------------------------------------------------------- */

/* "CFA + off" as dwarf_frame_register describes a register's location (libdw builds
 * DW_OP_call_frame_cfa, then DW_OP_plus_uconst N or DW_OP_consts N, DW_OP_plus). False for any
 * other expression, and for values (DW_OP_stack_value) rather than locations. */
static bool cfa_relative(const Dwarf_Op *ops, size_t nops, int64_t *off)
{
	if (!ops || nops == 0 || ops[0].atom != DW_OP_call_frame_cfa)
		return false;
	if (nops == 1) {
		*off = 0;
		return true;
	}
	if (nops == 2 && ops[1].atom == DW_OP_plus_uconst) {
		*off = (int64_t)ops[1].number;
		return true;
	}
	if (nops == 3 && (ops[1].atom == DW_OP_consts || ops[1].atom == DW_OP_constu) &&
	    ops[2].atom == DW_OP_plus) {
		*off = (int64_t)ops[1].number;
		return true;
	}
	return false;
}

/* The CFA rule "register + offset" (libdw: one DW_OP_bregx reg, off or DW_OP_bregN off). */
static bool cfa_reg_off(const Dwarf_Op *ops, size_t nops, int *reg, int64_t *off)
{
	if (nops != 1)
		return false;
	if (ops[0].atom == DW_OP_bregx) {
		*reg = (int)ops[0].number;
		*off = (int64_t)ops[0].number2;
		return true;
	}
	if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
		*reg = ops[0].atom - DW_OP_breg0;
		*off = (int64_t)ops[0].number;
		return true;
	}
	return false;
}

/* The CFA expression of x86_64 PLT entries (binutils' elf_x86_64_eh_frame_plt):
 *   DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_litN; DW_OP_ge;
 *   DW_OP_lit3; DW_OP_shl; DW_OP_plus
 * i.e. CFA = rsp + 8 + ((rip & 15) >= N ? 8 : 0). Returns N, or -1. */
static int plt_bound(const Dwarf_Op *ops, size_t nops)
{
	if (nops != 9 || ops[0].atom != DW_OP_breg7 || ops[0].number != 8 ||
	    ops[1].atom != DW_OP_breg16 || ops[1].number != 0 || ops[2].atom != DW_OP_lit15 ||
	    ops[3].atom != DW_OP_and || ops[4].atom < DW_OP_lit0 || ops[4].atom > DW_OP_lit15 ||
	    ops[5].atom != DW_OP_ge || ops[6].atom != DW_OP_lit3 || ops[7].atom != DW_OP_shl ||
	    ops[8].atom != DW_OP_plus)
		return -1;
	return ops[4].atom - DW_OP_lit0;
}

/* True when register reg of a signal frame is saved at rsp + off (DW_CFA_expression
 * DW_OP_breg7 off, which libdw describes as DW_OP_call_frame_cfa; DW_OP_breg7 off: the CFA is
 * pushed first, then the expression's own value is the location). */
static bool saved_at_rsp(Dwarf_Frame *fr, int reg, int64_t off)
{
	Dwarf_Op mem[3], *ops = NULL;
	size_t nops = 0;
	return dwarf_frame_register(fr, reg, mem, &ops, &nops) == 0 && nops == 2 &&
	       ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_breg7 &&
	       (int64_t)ops[1].number == off;
}

/* A signal frame's row: PF_UNWIND_SIGNAL when its CFI reads the interrupted rip, rbp and rsp
 * from the ucontext slots the kernel's walk reads (glibc's __restore_rt), else STOP. */
static uint8_t classify_signal(Dwarf_Frame *fr)
{
	if (saved_at_rsp(fr, DW_X86_64_RA, PF_UNWIND_UC_RIP) &&
	    saved_at_rsp(fr, DW_X86_64_RBP, PF_UNWIND_UC_RBP) &&
	    saved_at_rsp(fr, DW_X86_64_RSP, PF_UNWIND_UC_RSP))
		return PF_UNWIND_SIGNAL;
	return PF_UNWIND_STOP;
}

/* The row of one Dwarf_Frame. */
static struct pf_unwind_row classify(Dwarf_Frame *fr, uint32_t pc)
{
	struct pf_unwind_row r = {.pc = pc, .kind = PF_UNWIND_STOP};
	Dwarf_Addr start, end;
	bool signal = false;
	if (dwarf_frame_info(fr, &start, &end, &signal) < 0)
		return r;
	if (signal) {
		r.kind = classify_signal(fr);
		return r;
	}

	Dwarf_Op mem[3], *ops = NULL;
	size_t nops = 0;
	if (dwarf_frame_register(fr, DW_X86_64_RA, mem, &ops, &nops) < 0)
		return r;
	if (nops == 0 && ops == mem) { /* undefined: the outermost frame */
		r.kind = PF_UNWIND_END;
		return r;
	}
	int64_t off;
	if (!cfa_relative(ops, nops, &off) || off != -8)
		return r;

	Dwarf_Op *cops = NULL;
	size_t ncops = 0;
	int reg;
	if (dwarf_frame_cfa(fr, &cops, &ncops) < 0 || ncops == 0)
		return r;
	uint8_t kind = PF_UNWIND_STOP;
	int64_t cfa_off = 0;
	int bound;
	if (cfa_reg_off(cops, ncops, &reg, &cfa_off)) {
		if (reg == DW_X86_64_RSP)
			kind = PF_UNWIND_CFA_RSP;
		else if (reg == DW_X86_64_RBP)
			kind = PF_UNWIND_CFA_RBP;
		if (cfa_off < INT16_MIN || cfa_off > INT16_MAX)
			kind = PF_UNWIND_STOP;
	} else if ((bound = plt_bound(cops, ncops)) >= 0) {
		kind = PF_UNWIND_CFA_PLT;
		cfa_off = bound;
	}
	if (kind == PF_UNWIND_STOP)
		return r;

	int8_t rbp8 = 0;
	ops = NULL;
	nops = 0;
	if (dwarf_frame_register(fr, DW_X86_64_RBP, mem, &ops, &nops) < 0)
		return r;
	if (nops > 0) {
		/* saved at CFA + off; any other rule (in another register, an expression) is one
		 * the kernel cannot follow */
		if (!cfa_relative(ops, nops, &off) || off % 8 || off / 8 < INT8_MIN ||
		    off / 8 > INT8_MAX || off == 0)
			return r;
		rbp8 = (int8_t)(off / 8);
	}
	r.kind = kind;
	r.cfa_off = (int16_t)cfa_off;
	r.rbp_off8 = rbp8;
	return r;
}

/* ---- building ----------------------------------------------------------------------------- */

struct builder {
	struct pf_unwind_table *t;
	size_t cap;
	size_t max_rows; /* 0: no bound */
	uint64_t last_end; /* end of the last row's range, 0 before the first */
};

static bool same_rule(const struct pf_unwind_row *a, const struct pf_unwind_row *b)
{
	return a->kind == b->kind && a->cfa_off == b->cfa_off && a->rbp_off8 == b->rbp_off8;
}

static int push(struct builder *b, struct pf_unwind_row r)
{
	struct pf_unwind_table *t = b->t;
	if (t->n_rows && same_rule(&t->rows[t->n_rows - 1], &r))
		return 0;
	if (t->n_rows && t->rows[t->n_rows - 1].pc >= r.pc) /* ranges overlap: keep the first */
		return 0;
	if (b->max_rows && t->n_rows >= b->max_rows)
		return -E2BIG;
	if (t->n_rows == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 1024;
		struct pf_unwind_row *nr = realloc(t->rows, nc * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		t->rows = nr;
		b->cap = nc;
	}
	t->rows[t->n_rows++] = r;
	return 0;
}

/* Rows for the executable range [lo, hi). dwarf_cfi_addrframe answers the row covering an
 * address with its [start, end); the walk steps from one row's end to the next. An address
 * the first CFI (.eh_frame) does not cover is looked up in the second (.debug_frame, NULL when
 * the file has none). Addresses neither covers (alignment padding between functions, code
 * without CFI) are stepped over a byte at a time until an FDE starts, with one STOP row for
 * the gap. */
static int walk_range(struct builder *b, Dwarf_CFI *cfi, Dwarf_CFI *cfi2, uint64_t lo,
		      uint64_t hi, bool close)
{
	uint64_t addr = lo;
	bool in_gap = false;
	while (addr < hi) {
		Dwarf_Frame *fr = NULL;
		if ((!cfi || dwarf_cfi_addrframe(cfi, addr, &fr) != 0) &&
		    (!cfi2 || dwarf_cfi_addrframe(cfi2, addr, &fr) != 0)) {
			if (!in_gap) {
				int rc = push(b, (struct pf_unwind_row){.pc = (uint32_t)addr});
				if (rc < 0)
					return rc;
				in_gap = true;
			}
			addr++;
			continue;
		}
		in_gap = false;
		Dwarf_Addr start = addr, end = addr + 1;
		bool signal;
		dwarf_frame_info(fr, &start, &end, &signal);
		struct pf_unwind_row r = classify(fr, (uint32_t)addr);
		free(fr);
		int rc = push(b, r);
		if (rc < 0)
			return rc;
		addr = end > addr ? end : addr + 1;
	}
	/* the range's end: nothing is known past it */
	if (close && b->t->n_rows && b->t->rows[b->t->n_rows - 1].pc < hi && hi <= UINT32_MAX)
		return push(b, (struct pf_unwind_row){.pc = (uint32_t)hi});
	return 0;
}

/* A Go program's functions and their stack-pointer tables (gopclntab.h). */
struct go_funcs {
	const uint8_t *tab;
	size_t len;
	struct pf_go_func *f;
	size_t n, next; /* the next function to walk (they are in address order) */
};

/* pf_gopclntab_sp's callback: Go keeps no frame-pointer-relative rule, so every row is
 * CFA = rsp + sp + 8; once a function has reserved its frame, the caller's rbp is saved right
 * below the return address (CFA - 16), where Go's prologue puts it. */
static int go_row(void *ctx, uint64_t pc, int32_t sp)
{
	struct builder *b = ctx;
	struct pf_unwind_row r = {.pc = (uint32_t)pc};
	if (sp + 8 <= INT16_MAX) {
		r.kind = PF_UNWIND_CFA_RSP;
		r.cfa_off = (int16_t)(sp + 8);
		r.rbp_off8 = sp > 0 ? -2 : 0;
	}
	return push(b, r);
}

/* The outermost frames of Go stacks: a goroutine's (its entry function returns into
 * goexit), a thread's and the program's. */
static bool go_outermost(const char *name)
{
	return !strcmp(name, "runtime.goexit") || !strcmp(name, "runtime.mstart") ||
	       !strcmp(name, "runtime.rt0_go");
}

/* Rows for [lo, hi) of a Go program: each Go function's from its stack-pointer table, what
 * lies between them (cgo's C code, padding) from the CFI when there is one. */
static int walk_go(struct builder *b, Dwarf_CFI *cfi, Dwarf_CFI *cfi2, uint64_t lo, uint64_t hi,
		   struct go_funcs *g)
{
	uint64_t at = lo;
	int rc = 0;
	for (; rc == 0 && g->next < g->n && g->f[g->next].entry < hi; g->next++) {
		const struct pf_go_func *f = &g->f[g->next];
		if (f->entry < at || f->entry + f->size > hi)
			continue; /* overlapping or past the section: not trusted */
		if (at < f->entry)
			rc = walk_range(b, cfi, cfi2, at, f->entry, false);
		if (rc == 0 && go_outermost(f->name))
			rc = push(b, (struct pf_unwind_row){.pc = (uint32_t)f->entry,
							    .kind = PF_UNWIND_END});
		else if (rc == 0 && pf_gopclntab_sp(g->tab, g->len, f, go_row, b) < 0)
			rc = push(b, (struct pf_unwind_row){.pc = (uint32_t)f->entry}); /* STOP */
		if (rc == -EINVAL)
			rc = 0;
		at = f->entry + f->size;
	}
	return rc ? rc : walk_range(b, cfi, cfi2, at, hi, true);
}

void pf_unwind_table_free(struct pf_unwind_table *t)
{
	if (!t)
		return;
	free(t->rows);
	free(t);
}

/* The table of an opened ELF (consumed). */
static int build_elf(Elf *elf, size_t max_rows, struct pf_unwind_table **out)
{
	GElf_Ehdr eh;
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    eh.e_machine != EM_X86_64) {
		if (elf)
			elf_end(elf);
		return -EINVAL;
	}
	int rc = 0;
	Dwarf *dw = NULL;
	Dwarf_CFI *ehf = dwarf_getcfi_elf(elf), *dbg = NULL;
	/* .debug_frame too when the file has one: it covers what .eh_frame leaves out (code
	 * built with -fno-asynchronous-unwind-tables keeps its CFI there) */
	if (pf_elf_section(elf, ".debug_frame") && (dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL)))
		dbg = dwarf_getcfi(dw);
	/* a Go program: its functions' rows from the runtime's own tables, which every Go
	 * binary has, also without DWARF (-ldflags="-s -w") */
	struct go_funcs go = {0};
	uint64_t go_text;
	if (pf_gopclntab_find(elf, &go.tab, &go.len, &go_text) == 0 &&
	    pf_gopclntab_parse(go.tab, go.len, go_text, &go.f, &go.n) < 0)
		go.n = 0;
	struct pf_unwind_table *t = calloc(1, sizeof(*t));
	if ((!ehf && !dbg && !go.n) || !t) {
		rc = t ? -ENOENT : -ENOMEM;
		goto out;
	}
	t->source = go.n ? 3 : ehf ? 1 : 2;
	struct builder b = {.t = t, .max_rows = max_rows};
	/* The executable sections (not PT_LOAD segments: those also cover .plt's neighbours
	 * such as .init and the read-only data of some linkers' layouts). Code yields one row
	 * per 30-60 bytes: a file whose code would need more rows than allowed even at 64 bytes
	 * per row is refused before any work. */
	Elf_Scn *scn = NULL;
	uint64_t code = 0;
	while (max_rows && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_PROGBITS &&
		    (sh.sh_flags & SHF_EXECINSTR) && (sh.sh_flags & SHF_ALLOC))
			code += sh.sh_size;
	}
	if (max_rows && code / 64 > max_rows) {
		rc = -E2BIG;
		goto out;
	}
	scn = NULL;
	while (rc == 0 && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_EXECINSTR) || !(sh.sh_flags & SHF_ALLOC) || !sh.sh_size)
			continue;
		if (sh.sh_addr + sh.sh_size > UINT32_MAX) {
			rc = -EINVAL;
			break;
		}
		t->text_bytes += sh.sh_size;
		rc = go.n ? walk_go(&b, ehf, dbg, sh.sh_addr, sh.sh_addr + sh.sh_size, &go)
			  : walk_range(&b, ehf, dbg, sh.sh_addr, sh.sh_addr + sh.sh_size, true);
	}
	for (size_t i = 0; i < t->n_rows; i++)
		t->n_stop += t->rows[i].kind == PF_UNWIND_STOP;
	if (rc == 0 && !t->n_rows)
		rc = -ENOENT;
out:
	free(go.f);
	if (ehf)
		dwarf_cfi_end(ehf); /* dwarf_getcfi_elf's; dwarf_getcfi's belongs to dw */
	if (dw)
		dwarf_end(dw);
	elf_end(elf);
	if (rc < 0) {
		pf_unwind_table_free(t);
		return rc;
	}
	/* give back the doubling slack */
	struct pf_unwind_row *fit = realloc(t->rows, t->n_rows * sizeof(*fit));
	if (fit)
		t->rows = fit;
	*out = t;
	return 0;
}

int pf_unwind_table_build(int fd, size_t max_rows, struct pf_unwind_table **out)
{
	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	return build_elf(elf_begin(fd, ELF_C_READ_MMAP, NULL), max_rows, out);
}

int pf_unwind_table_build_image(const void *image, size_t len, size_t max_rows,
				struct pf_unwind_table **out)
{
	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	char *copy = malloc(len); /* elf_memory wants a writable image */
	if (!copy)
		return -ENOMEM;
	memcpy(copy, image, len);
	int rc = build_elf(elf_memory(copy, len), max_rows, out);
	free(copy);
	return rc;
}

const struct pf_unwind_row *pf_unwind_table_find(const struct pf_unwind_table *t, uint64_t pc)
{
	if (!t->n_rows || pc < t->rows[0].pc)
		return NULL;
	size_t lo = 0, hi = t->n_rows; /* rows[lo].pc <= pc < rows[hi].pc */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->rows[mid].pc <= pc)
			lo = mid;
		else
			hi = mid;
	}
	return &t->rows[lo];
}

/* ---- the disk cache ----------------------------------------------------------------------- */

#define CACHE_MAGIC "PFUNWTB1"
#define CACHE_MAX_ROWS (64u << 20) /* 512 MiB of rows: anything larger is corrupt */

struct cache_hdr {
	char magic[8];
	uint32_t version;
	uint32_t row_size;
	uint64_t n_rows;
	uint64_t text_bytes;
	uint32_t n_stop;
	uint32_t source;
	uint64_t checksum; /* XXH3-64 of the rows */
	char build_id[64];
};

static uint64_t rows_checksum(const void *p, size_t n)
{
	return XXH3_64bits(p, n);
}

static int cache_path(const char *dir, const char *build_id, char *out, size_t cap)
{
	size_t n = strlen(build_id);
	if (!n || n >= sizeof(((struct cache_hdr *)0)->build_id) ||
	    strspn(build_id, PF_UNWIND_CACHE_KEY_CHARS) != n)
		return -EINVAL;
	int k = snprintf(out, cap, "%s/%s.unw", dir, build_id);
	return k < 0 || (size_t)k >= cap ? -ENAMETOOLONG : 0;
}

int pf_unwind_cache_open(const char *dir, const char *key, struct pf_unwind_cache_file *f)
{
	memset(f, 0, sizeof(*f));
	f->fd = -1;
	char path[4096];
	int rc = cache_path(dir, key, path, sizeof(path));
	if (rc < 0)
		return rc;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	struct cache_hdr h;
	struct pf_unwind_row last;
	if (fstat(fd, &st) < 0)
		rc = -errno;
	else if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		rc = -EBADMSG;
	else if (memcmp(h.magic, CACHE_MAGIC, 8) || h.version != PF_UNWIND_CACHE_VERSION ||
		 h.row_size != sizeof(struct pf_unwind_row) || !h.n_rows ||
		 h.n_rows > CACHE_MAX_ROWS || strncmp(h.build_id, key, sizeof(h.build_id)) ||
		 (uint64_t)st.st_size != sizeof(h) + h.n_rows * sizeof(struct pf_unwind_row))
		rc = -EBADMSG;
	else if (pread(fd, &f->first, sizeof(f->first), sizeof(h)) != (ssize_t)sizeof(f->first) ||
		 pread(fd, &last, sizeof(last),
		       (off_t)(sizeof(h) + (h.n_rows - 1) * sizeof(last))) != (ssize_t)sizeof(last) ||
		 last.pc < f->first.pc)
		rc = -EBADMSG;
	if (rc < 0) {
		close(fd);
		return rc;
	}
	(void)futimens(fd, NULL); /* used now: the last a prune deletes */
	f->fd = fd;
	f->n_rows = h.n_rows;
	f->last_pc = last.pc;
	f->text_bytes = h.text_bytes;
	f->n_stop = h.n_stop;
	f->checksum = h.checksum;
	return 0;
}

int pf_unwind_cache_read(struct pf_unwind_cache_file *f, struct pf_unwind_row *dst)
{
	size_t len = f->n_rows * sizeof(*dst);
	for (size_t done = 0; done < len;) {
		ssize_t r = pread(f->fd, (char *)dst + done, len - done,
				  (off_t)(sizeof(struct cache_hdr) + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EBADMSG; /* shorter than its header said */
		done += (size_t)r;
	}
	if (rows_checksum(dst, len) != f->checksum || dst[0].pc != f->first.pc ||
	    dst[f->n_rows - 1].pc != f->last_pc)
		return -EBADMSG;
	for (size_t i = 1; i < f->n_rows; i++)
		if (dst[i].pc <= dst[i - 1].pc)
			return -EBADMSG; /* the kernel's binary search needs them sorted */
	return 0;
}

void pf_unwind_cache_close(struct pf_unwind_cache_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

int pf_unwind_cache_load(const char *dir, const char *build_id, struct pf_unwind_table **out)
{
	*out = NULL;
	struct pf_unwind_cache_file f;
	int rc = pf_unwind_cache_open(dir, build_id, &f);
	if (rc < 0)
		return rc;
	struct pf_unwind_table *t = calloc(1, sizeof(*t));
	if (t && !(t->rows = malloc(f.n_rows * sizeof(*t->rows))))
		rc = -ENOMEM;
	else if (!t)
		rc = -ENOMEM;
	if (rc == 0)
		rc = pf_unwind_cache_read(&f, t->rows);
	pf_unwind_cache_close(&f);
	if (rc < 0) {
		pf_unwind_table_free(t);
		return rc;
	}
	t->n_rows = f.n_rows;
	t->text_bytes = f.text_bytes;
	t->n_stop = f.n_stop;
	t->source = 0;
	*out = t;
	return 0;
}

int pf_unwind_cache_store(const char *dir, const char *build_id, const struct pf_unwind_table *t)
{
	char path[4096];
	int rc = cache_path(dir, build_id, path, sizeof(path));
	if (rc < 0)
		return rc;
	struct cache_hdr h;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, CACHE_MAGIC, 8);
	h.version = PF_UNWIND_CACHE_VERSION;
	h.row_size = sizeof(struct pf_unwind_row);
	h.n_rows = t->n_rows;
	h.text_bytes = t->text_bytes;
	h.n_stop = t->n_stop;
	h.source = t->source;
	h.checksum = rows_checksum(t->rows, t->n_rows * sizeof(*t->rows));
	memcpy(h.build_id, build_id, strlen(build_id));
	const struct iovec parts[] = {{&h, sizeof(h)}, {t->rows, t->n_rows * sizeof(*t->rows)}};
	return pf_tbuilder_write_file(dir, path, parts, PF_ARRAY_SIZE(parts));
}

int pf_unwind_table_build_store(uint64_t max_rows, int fd, const char *dir, const char *key)
{
	struct pf_unwind_table *t = NULL;
	int rc = pf_unwind_table_build(fd, (size_t)max_rows, &t);
	if (rc == 0)
		rc = pf_unwind_cache_store(dir, key, t);
	pf_unwind_table_free(t);
	return rc;
}
