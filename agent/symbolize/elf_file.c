/* elf_file.c — see elf_file.h. */
#include "symbolize/elf_file.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interp/elf_syms.h"
#include "symbolize/gopclntab.h"
#include "symbolize/line_table.h"
#include "symbolize/proc_maps.h"
#include "symbolize/sorted_find.h"

void elf_file_free(struct elf_file *f)
{
	if (!f)
		return;
	pf_line_table_close(f->lt);
	if (f->dbg_elf)
		elf_end(f->dbg_elf);
	if (f->dbg_fd >= 0)
		close(f->dbg_fd);
	if (f->elf)
		elf_end(f->elf);
	if (f->fd >= 0)
		close(f->fd);
	free(f->segs);
	free(f->syms);
	free(f->image);
	free(f);
}

/* Reads e's header, build id and load segments into a new elf_file owning fd (-1 for none)
 * and e, or NULL (both released). */
struct elf_file *elf_file_wrap(int fd, Elf *e, uint64_t dev, uint64_t ino)
{
	struct elf_file *f = calloc(1, sizeof(*f));
	if (!f) {
		if (e)
			elf_end(e);
		if (fd >= 0)
			close(fd);
		errno = ENOMEM;
		return NULL;
	}
	f->fd = fd;
	f->dbg_fd = -1;
	f->dev = dev;
	f->ino = ino;
	f->elf = e;
	GElf_Ehdr eh;
	if (!f->elf || elf_kind(f->elf) != ELF_K_ELF || !gelf_getehdr(f->elf, &eh)) {
		elf_file_free(f);
		errno = EINVAL;
		return NULL;
	}
	f->e_type = eh.e_type;
	if (pf_elf_handle_build_id(f->elf, f->build_id, sizeof(f->build_id)) < 0)
		f->build_id[0] = 0;
	size_t nphdr = 0;
	if (elf_getphdrnum(f->elf, &nphdr) == 0 && nphdr) {
		f->segs = calloc(nphdr, sizeof(*f->segs));
		if (!f->segs) {
			elf_file_free(f);
			errno = ENOMEM;
			return NULL;
		}
		for (size_t i = 0; i < nphdr; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(f->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			f->segs[f->n_segs++] = (struct load_seg){ph.p_offset, ph.p_vaddr, ph.p_filesz};
		}
	}
	return f;
}

/* Takes ownership of fd (closed on failure). */
struct elf_file *elf_file_open(int fd)
{
	struct stat stt;
	if (!pf_elf_ready() || fstat(fd, &stt) < 0) {
		close(fd);
		return NULL;
	}
	return elf_file_wrap(fd, elf_begin(fd, ELF_C_READ_MMAP, NULL), stt.st_dev, stt.st_ino);
}

/* Leading underscores of name, and its length without a version suffix ("@@VER", "@VER"). */
static size_t sym_underscores(const char *name)
{
	size_t n = 0;
	while (name[n] == '_')
		n++;
	return n;
}

size_t elf_sym_base_len(const char *name)
{
	return strcspn(name, "@");
}

/* How good a name is among several for one address (lower is better): sized before size 0,
 * then global before weak before local (glibc's "__libc_start_main" over its local
 * "__libc_start_main_alias_2"), then a default or no version before an old one ("name@VER",
 * kept for binaries linked long ago). */
static uint8_t sym_rank(const GElf_Sym *s, const char *name)
{
	int b = GELF_ST_BIND(s->st_info);
	uint8_t bind = b == STB_GLOBAL || b == STB_GNU_UNIQUE ? 0 : b == STB_WEAK ? 1 : 2;
	const char *at = strchr(name, '@');
	uint8_t old_version = at && at[1] != '@';
	return (uint8_t)((s->st_size == 0) << 3 | bind << 1 | old_version);
}

/* By address; at one address the best name first: by rank, then fewer leading underscores
 * ("clock_gettime" over "__clock_gettime"), then the shorter, then by bytes (the same choice
 * on every load). */
static int sym_cmp(const void *a, const void *b)
{
	const struct elf_sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	size_t ux = sym_underscores(x->name), uy = sym_underscores(y->name);
	if (ux != uy)
		return ux < uy ? -1 : 1;
	size_t lx = elf_sym_base_len(x->name), ly = elf_sym_base_len(y->name);
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* syms[0, k) (an array of cap) sorted, one name kept per address (the best, which sym_cmp
 * puts first), cut to size and given to f. */
static void syms_commit(struct elf_file *f, struct elf_sym *syms, size_t k, size_t cap)
{
	qsort(syms, k, sizeof(*syms), sym_cmp);
	size_t u = 1;
	for (size_t i = 1; i < k; i++)
		if (syms[i].addr != syms[u - 1].addr)
			syms[u++] = syms[i];
	k = u;
	if (k < cap) {
		struct elf_sym *cut = realloc(syms, k * sizeof(*syms));
		if (cut)
			syms = cut;
	}
	f->syms = syms;
	f->n_syms = k;
}

struct syms_load {
	struct elf_file *f;
	Elf *elf;
};

/* The functions of one symbol section: 1 when it had some (they are f's now), 0 when it had
 * none, -ENOMEM. */
static int load_syms_section(void *ctx, Elf_Data *d, const GElf_Shdr *sh, size_t n)
{
	struct syms_load *l = ctx;
	/* not calloc: only the k entries kept are written, and the array is cut to them
	 * (a .symtab is mostly objects, sections and files: zeroing all of it would make
	 * every page resident for a few seconds) */
	struct elf_sym *syms = malloc((n ? n : 1) * sizeof(*syms));
	if (!syms)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym s;
		if (!gelf_getsym(d, (int)i, &s))
			continue;
		int st = GELF_ST_TYPE(s.st_info);
		if ((st != STT_FUNC && st != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF ||
		    !s.st_value)
			continue;
		const char *name = elf_strptr(l->elf, sh->sh_link, s.st_name);
		if (!name || !*name)
			continue;
		syms[k++] = (struct elf_sym){
		    s.st_value, name, s.st_size > UINT32_MAX ? UINT32_MAX : (uint32_t)s.st_size,
		    sym_rank(&s, name)};
	}
	if (!k) {
		free(syms);
		return 0;
	}
	syms_commit(l->f, syms, k, n);
	return 1;
}

/* The functions of the first section of type that has some: 0, -ENOENT (none), -ENOMEM. */
static int load_syms_from(struct elf_file *f, Elf *elf, Elf64_Word type)
{
	struct syms_load l = {f, elf};
	int rc = pf_elf_each_symtab(elf, type, load_syms_section, &l);
	return rc < 0 ? rc : rc ? 0 : -ENOENT;
}

/* A Go program's functions from its pclntab (gopclntab.h): what names a Go binary built
 * with -ldflags="-s -w" (no .symtab). 1 when they were loaded. */
static int load_go_syms(struct elf_file *f, Elf *elf)
{
	const uint8_t *tab;
	size_t len, n = 0;
	uint64_t text;
	struct pf_go_func *fn = NULL;
	int rc = pf_gopclntab_find(elf, &tab, &len, &text);
	if (rc == 0)
		rc = pf_gopclntab_parse(tab, len, text, &fn, &n);
	if (rc < 0 || !n) {
		free(fn);
		return rc < 0 ? rc : -ENOENT;
	}
	struct elf_sym *syms = malloc(n * sizeof(*syms));
	if (!syms) {
		free(fn);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		syms[i] = (struct elf_sym){fn[i].entry, fn[i].name,
					   fn[i].size > UINT32_MAX ? UINT32_MAX : (uint32_t)fn[i].size,
					   0};
	free(fn);
	syms_commit(f, syms, n, n);
	f->go_syms = true;
	return 1;
}

/* The separate debug file of a stripped ELF, by build id (Debian's -dbgsym and -dbg packages:
 * /usr/lib/debug/.build-id/xx/yyyy.debug). Opened once per cached file; NULL when none. */
Elf *elf_file_debug(struct elf_file *f, const char *debug_dir)
{
	if (f->dbg_tried)
		return f->dbg_elf;
	f->dbg_tried = true;
	if (!f->build_id[0])
		return NULL;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug",
		 debug_dir ? debug_dir : "/usr/lib/debug", f->build_id, f->build_id + 2);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		if (e)
			elf_end(e);
		close(fd);
		return NULL;
	}
	f->dbg_fd = fd;
	f->dbg_elf = e;
	return e;
}

static void elf_file_load_syms(struct elf_file *f, const char *debug_dir)
{
	if (f->syms_loaded)
		return;
	f->syms_loaded = true;
	f->img_touched = true;
	f->go = pf_elf_section(f->elf, ".go.buildinfo") != NULL;
	if (load_syms_from(f, f->elf, SHT_SYMTAB) == 0)
		return;
	/* stripped (Debian's shared libraries): the full .symtab, local functions included,
	 * is in the debug file when installed; same addresses */
	Elf *dbg = elf_file_debug(f, debug_dir);
	if (dbg && load_syms_from(f, dbg, SHT_SYMTAB) == 0)
		return;
	/* a Go program built without .symtab: the runtime's own function table */
	if (load_go_syms(f, f->elf) > 0)
		return;
	load_syms_from(f, f->elf, SHT_DYNSYM);
}

const struct elf_sym *elf_file_find_sym(struct elf_file *f, const char *debug_dir, uint64_t vaddr)
{
	elf_file_load_syms(f, debug_dir);
	size_t lo = PF_COUNT_AT_OR_BELOW(f->syms, f->n_syms, .addr, vaddr);
	if (!lo)
		return NULL;
	const struct elf_sym *s = &f->syms[lo - 1]; /* the one name kept at its address */
	if (s->size)
		return vaddr < s->addr + s->size ? s : NULL;
	/* size 0 (_fini, hand-written asm): only within the segment holding the symbol */
	for (size_t k = 0; k < f->n_segs; k++) {
		const struct load_seg *g = &f->segs[k];
		if (s->addr >= g->vaddr && s->addr < g->vaddr + g->filesz)
			return vaddr < g->vaddr + g->filesz ? s : NULL;
	}
	return NULL;
}

/* ELF virtual address of a file offset, through the PT_LOAD segments. */
bool elf_file_off_to_vaddr(const struct elf_file *f, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < f->n_segs; i++) {
		const struct load_seg *s = &f->segs[i];
		if (off >= s->off && off < s->off + s->filesz) {
			*vaddr = off - s->off + s->vaddr;
			return true;
		}
	}
	return false;
}

int pf_elf_lookup(const char *path, uint64_t vaddr, struct pf_sym_info *out)
{
	memset(out, 0, sizeof(*out));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct elf_file *f = elf_file_open(fd);
	if (!f)
		return -(errno ? errno : EINVAL);
	const struct elf_sym *s = elf_file_find_sym(f, NULL, vaddr);
	int rc = -ENOENT;
	if (s) {
		snprintf(out->function, sizeof(out->function), "%.*s",
			 (int)elf_sym_base_len(s->name), s->name);
		out->sym_addr = s->addr;
		rc = 0;
	}
	elf_file_free(f);
	return rc;
}

/* The ELF virtual address of the page-aligned start offset of an executable mapping: through
 * the executable PT_LOAD segment whose pages hold it (the offset may also fall inside the
 * preceding read-only segment's last page, where elf_file_off_to_vaddr would answer). */
bool elf_file_exec_off_to_vaddr(const struct elf_file *f, uint64_t off, uint64_t *vaddr)
{
	size_t nphdr = 0;
	if (elf_getphdrnum(f->elf, &nphdr) == 0) {
		for (size_t i = 0; i < nphdr; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(f->elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
			    !(ph.p_flags & PF_X))
				continue;
			uint64_t first = ph.p_offset & ~(uint64_t)4095;
			if (off >= first && off < ph.p_offset + ph.p_filesz) {
				*vaddr = ph.p_vaddr - (ph.p_offset - off);
				return true;
			}
		}
	}
	return elf_file_off_to_vaddr(f, off, vaddr);
}

/* Gives back the resident pages of e's image when libelf mapped it from the file (checked
 * once per handle into *state): the symbol tables, string tables and DWARF sections read so
 * far would otherwise stay in the agent's RSS as long as the file is cached (8+ MB for a
 * Python built with -g). The page cache keeps them: a later read is a minor fault. */
static void release_image(Elf *e, int fd, int8_t *state)
{
	size_t n = 0;
	char *p = e ? elf_rawfile(e, &n) : NULL;
	long pg = sysconf(_SC_PAGESIZE);
	if (!p || !n || pg <= 0 || ((uintptr_t)p & (uintptr_t)(pg - 1)) || *state < 0)
		return;
	if (!*state) {
		struct stat st;
		*state = fstat(fd, &st) == 0 &&
				 pmap_self_mapped_ro((uintptr_t)p, n, st.st_dev, st.st_ino)
			     ? 1
			     : -1;
		if (*state < 0)
			return;
	}
	madvise(p, n, MADV_DONTNEED);
}

/* The pages of f's images read in bulk since the last release go back, a kept handle's too:
 * its next lookups fault back (from the page cache) only the few they read. Only those:
 * madvise costs TLB flushes on every CPU running an agent thread, and the pages that names
 * are read from at each window stay once back. */
void elf_file_release_touched(struct elf_file *f)
{
	if (!f->img_touched)
		return;
	release_image(f->elf, f->fd, &f->img_state);
	release_image(f->dbg_elf, f->dbg_fd, &f->dbg_img_state);
	f->img_touched = false;
}
