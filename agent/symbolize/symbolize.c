/* symbolize.c — see symbolize.h. */
#include "symbolize.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <libelf.h>
#include <linux/openat2.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "demangle.h"
#include "gopclntab.h"
#include "line_table.h"
#include "perf_map.h"
#include "table_builder.h"
#include "vdso.h"
#include "pf/compiler.h"
#include "pf/log.h"
#include "pf/utf8.h"

#define DEFAULT_MAX_ELF 128
#define DEFAULT_MAX_PROCS 4096
#define PROC_BUCKETS 1024
#define BUILD_ID_HEX 41
#define RCACHE_SLOTS 16384          /* resolved (file, address) results kept across windows */
#define RCACHE_NAMES_MAX (1u << 20) /* bytes of interned source file names before a reset */
#define KCACHE_SLOTS 4096           /* kernel addresses resolved by the resolver */
#define MAX_INLINE_DEPTH 16         /* inlined functions kept per address */

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
	char build_id[BUILD_ID_HEX];  /* "" when the file has none */
	uint64_t dev, ino;
	int fd;
	Elf *elf;
	uint16_t e_type;
	struct load_seg *segs;
	size_t n_segs;
	bool syms_loaded;
	bool go_syms; /* its names came from its Go pclntab */
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

struct pmap {
	uint64_t start, end, offset;
	uint64_t dev, ino;
	char *path;
	char build_id[BUILD_ID_HEX];
	bool special; /* [vdso], [anon], ...: no file */
	int8_t vdso;  /* a [vdso] holding the agent's own image (pf_vdso_same): 1, else 0 or -1 */
	struct elf_file *elf; /* its file in the ELF cache, while elf_gen is the symbolizer's */
	uint64_t elf_gen;
};

struct proc_maps {
	struct proc_maps *next;
	uint32_t pid;
	uint64_t stamp;
	struct pmap *maps;
	size_t n;
	/* its JIT symbol map (/tmp/perf-<pid>.map, perf_map.h), looked at once per window
	 * that has a frame it may name; reloaded when its size or time changed */
	struct pf_perf_map *jit;
	uint64_t jit_size;
	int64_t jit_mtime_ns;
	uint32_t jit_window; /* sym->window + 1 of the last look, 0: never */
	uint32_t jit_nspid;  /* pid in its own namespace (ns_pid), 0: not read yet */
};

/* Kernel text symbols: 8 bytes each (offset from kbase + name offset into one blob). */
struct ksym {
	uint32_t addr_off;
	uint32_t name_off;
};

/* A function inlined at a resolved address (names interned). */
struct rc_inline {
	const char *name; /* linkage (mangled) name when DWARF has one, else DW_AT_name */
	const char *readable; /* demangled name, NULL when it reads as name */
	const char *file;
	uint32_t line;
};

/* One resolved user address: the symbol (pointing into the cached ELF, valid while file `id`
 * is cached, which a matching key proves), the source line and the inlined functions there
 * (strings interned here, so the DWARF handles can be dropped between windows). */
struct rcache_ent {
	uint64_t file_id; /* 0 = empty */
	uint64_t vaddr;
	const char *function;
	const char *readable; /* demangled function (interned), NULL when it reads the same */
	const char *file;
	uint32_t line;
	uint32_t n_inl;
	struct rc_inline *inl; /* malloc'd, innermost first */
};

/* One kernel address resolved by the resolver (name interned; NULL: no symbol). */
struct kcache_ent {
	uint64_t addr; /* 0 = empty */
	const char *name;
};

struct iname {
	struct iname *next;
	char s[];
};

struct pf_symbolizer {
	struct pf_symbolizer_options opt;
	struct elf_file *lru_head, *lru_tail;
	size_t n_elf;
	struct proc_maps *procs[PROC_BUCKETS];
	size_t n_procs;
	uint64_t stamp;
	uint64_t next_file_id;
	uint64_t elf_gen; /* bumped when the cache frees a file: older pmap.elf may dangle */
	uint32_t window;  /* windows closed (pf_symbolizer_trim) */
	size_t jit_bytes; /* held by the processes' JIT maps, at most PF_SYM_JIT_MAX_BYTES */
	struct rcache_ent *rcache; /* RCACHE_SLOTS, 2-way sets; allocated at first use */
	struct iname **inames;     /* RCACHE_SLOTS buckets of interned file names */
	size_t inames_bytes;
	/* kernel */
	bool kernel_tried;
	uint64_t kbase;
	struct ksym *ksyms;
	size_t n_ksyms;
	char *knames;
	char kbuild_id[BUILD_ID_HEX];
	pf_kernel_resolve_fn kresolve; /* NULL: /proc/kallsyms */
	void *kresolve_ctx;
	struct kcache_ent *kcache; /* KCACHE_SLOTS, direct-mapped */
	uint64_t ktext_start;	   /* lowest kernel text address (resolver mode) */
	bool kinfo_read;	   /* kbuild_id and ktext_start read */
	struct pf_demangler *dm; /* C++/Rust names, cached */
	struct rcache_ent partial; /* a result without the lines a table will give: returned,
				    * never cached */
	struct pf_tbuilder *lb;    /* the line tables' builder */
	struct pf_tbuilder_budget lb_budget; /* the children's CPU time */
	struct pf_line_result *lres; /* a lookup's answer */
	uint64_t lines_dir_bytes;    /* the line directory's tables, as last counted + built */
	struct elf_file *vdso;       /* the vDSO's symbols (from the agent's own image) */
	bool vdso_tried;
	struct pf_symbolizer_stats st;
};

static bool libelf_ready(void)
{
	static int ready = -1;
	if (ready < 0)
		ready = elf_version(EV_CURRENT) != EV_NONE;
	return ready;
}

/* ---- ELF files ---------------------------------------------------------------------------- */

static void hexify(const uint8_t *b, size_t n, char *out, size_t outlen)
{
	static const char hx[] = "0123456789abcdef";
	size_t j = 0;
	for (size_t i = 0; i < n && j + 2 < outlen; i++) {
		out[j++] = hx[b[i] >> 4];
		out[j++] = hx[b[i] & 15];
	}
	out[j] = 0;
}

/* Walks a raw note area; 0 when a GNU build id was found. */
static int notes_build_id(const uint8_t *p, size_t len, char *hex, size_t hexlen)
{
	size_t off = 0;
	while (off + 12 <= len) {
		uint32_t namesz, descsz, type;
		memcpy(&namesz, p + off, 4);
		memcpy(&descsz, p + off + 4, 4);
		memcpy(&type, p + off + 8, 4);
		size_t name_off = off + 12;
		size_t desc_off = name_off + (((size_t)namesz + 3) & ~(size_t)3);
		size_t next = desc_off + (((size_t)descsz + 3) & ~(size_t)3);
		if (desc_off > len || next > len || next <= off)
			return -EINVAL;
		if (type == NT_GNU_BUILD_ID && namesz == 4 && !memcmp(p + name_off, "GNU", 4) &&
		    descsz > 0 && descsz <= 64) {
			hexify(p + desc_off, descsz, hex, hexlen);
			return 0;
		}
		off = next;
	}
	return -ENOENT;
}

static int elf_handle_build_id(Elf *elf, char *hex, size_t hexlen)
{
	size_t nphdr = 0;
	if (elf_getphdrnum(elf, &nphdr) == 0) {
		for (size_t i = 0; i < nphdr; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE)
				continue;
			Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
							   ELF_T_NHDR);
			if (d && d->d_buf && notes_build_id(d->d_buf, d->d_size, hex, hexlen) == 0)
				return 0;
		}
	}
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		Elf_Data *d = elf_rawdata(scn, NULL);
		if (d && d->d_buf && notes_build_id(d->d_buf, d->d_size, hex, hexlen) == 0)
			return 0;
	}
	return -ENOENT;
}

int pf_elf_build_id(int fd, char *hex, size_t hexlen)
{
	if (!libelf_ready() || hexlen < BUILD_ID_HEX)
		return -EINVAL;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EINVAL;
	int rc = elf_kind(elf) == ELF_K_ELF ? elf_handle_build_id(elf, hex, hexlen) : -EINVAL;
	elf_end(elf);
	return rc;
}

static void elf_file_free(struct elf_file *f)
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
static struct elf_file *elf_file_wrap(int fd, Elf *e, uint64_t dev, uint64_t ino)
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
	if (elf_handle_build_id(f->elf, f->build_id, sizeof(f->build_id)) < 0)
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
static struct elf_file *elf_file_open(int fd)
{
	struct stat stt;
	if (!libelf_ready() || fstat(fd, &stt) < 0) {
		close(fd);
		return NULL;
	}
	return elf_file_wrap(fd, elf_begin(fd, ELF_C_READ_MMAP, NULL), stt.st_dev, stt.st_ino);
}

/* The vDSO's symbols, from a copy of the agent's own image (vdso.h): made at the first
 * [vdso] frame, kept for the symbolizer's life, outside the file cache. No source lines
 * (the image carries no DWARF), no pages to give back (img_state -1). NULL when this process
 * has no vDSO. */
static struct elf_file *vdso_file(struct pf_symbolizer *sym)
{
	if (sym->vdso_tried)
		return sym->vdso;
	sym->vdso_tried = true;
	const void *image;
	size_t len;
	uint64_t vaddr0;
	if (!libelf_ready() || !pf_vdso_image(&image, &len, &vaddr0))
		return NULL;
	void *copy = malloc(len);
	if (!copy)
		return NULL;
	memcpy(copy, image, len);
	struct elf_file *f = elf_file_wrap(-1, elf_memory(copy, len), 0, 0);
	if (!f) {
		free(copy);
		return NULL;
	}
	f->image = copy;
	f->id = ++sym->next_file_id;
	f->no_dwarf = true;
	f->img_state = f->dbg_img_state = -1;
	sym->vdso = f;
	return f;
}

/* Leading underscores of name, and its length without a version suffix ("@@VER", "@VER"). */
static size_t sym_underscores(const char *name)
{
	size_t n = 0;
	while (name[n] == '_')
		n++;
	return n;
}

static size_t sym_base_len(const char *name)
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
	size_t lx = sym_base_len(x->name), ly = sym_base_len(y->name);
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

static int load_syms_from(struct elf_file *f, Elf *elf, Elf64_Word type)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		size_t n = sh.sh_size / sh.sh_entsize;
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
			const char *name = elf_strptr(elf, sh.sh_link, s.st_name);
			if (!name || !*name)
				continue;
			syms[k++] = (struct elf_sym){s.st_value, name,
						     s.st_size > UINT32_MAX ? UINT32_MAX
									    : (uint32_t)s.st_size,
						     sym_rank(&s, name)};
		}
		if (!k) {
			free(syms);
			continue;
		}
		syms_commit(f, syms, k, n);
		return 0;
	}
	return -ENOENT;
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
static Elf *elf_file_debug(struct elf_file *f, const char *debug_dir)
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

static const struct elf_sym *elf_file_find_sym(struct elf_file *f, const char *debug_dir,
					       uint64_t vaddr)
{
	elf_file_load_syms(f, debug_dir);
	size_t lo = 0, hi = f->n_syms;
	while (lo < hi) { /* first symbol with addr > vaddr */
		size_t mid = lo + (hi - lo) / 2;
		if (f->syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
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

/* True when elf has DWARF sections (.debug_*, or the old compressed .zdebug_*). */
static bool elf_has_dwarf(Elf *elf)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return false;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		const char *name = gelf_getshdr(scn, &sh) && sh.sh_type != SHT_NOBITS
					   ? elf_strptr(elf, shstrndx, sh.sh_name)
					   : NULL;
		if (name && (!strncmp(name, ".debug_", 7) || !strncmp(name, ".zdebug_", 8)))
			return true;
	}
	return false;
}

Elf_Scn *pf_elf_section(Elf *elf, const char *name)
{
	size_t shstrndx;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) < 0)
		return NULL;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		const char *n = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
		if (n && !strcmp(n, name))
			return scn;
	}
	return NULL;
}

/* A function inlined at an address, as a line table gives it (strings in its result). */
struct inl_raw {
	const char *name;
	const char *file;
	uint32_t line;
};

/* ELF virtual address of a file offset, through the PT_LOAD segments. */
static bool elf_file_off_to_vaddr(const struct elf_file *f, uint64_t off, uint64_t *vaddr)
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
		snprintf(out->function, sizeof(out->function), "%.*s", (int)sym_base_len(s->name),
			 s->name);
		out->sym_addr = s->addr;
		rc = 0;
	}
	elf_file_free(f);
	return rc;
}

/* ---- line tables ------------------------------------------------------------------------ */

/* f's key in the builder and the directory (pf_tbuilder_key; a "<dev>-<inode>" table is read
 * right after the builder wrote it, then unlinked). */
static void lt_key(const struct elf_file *f, char *out, size_t cap)
{
	pf_tbuilder_key(f->build_id, f->dev, f->ino, out, cap);
}

/* The builder's report of one file: the file waiting for it opens its table. */
static void lt_done(void *ctx, const char *key, int rc)
{
	struct pf_symbolizer *sym = ctx;
	const char *dir = pf_tbuilder_dir(sym->lb);
	if (rc == 0)
		sym->st.line_builds++;
	else
		sym->st.line_build_failed++;
	if (rc < 0 && rc != -ENOENT)
		pf_log_debug("symbolizer: no line table for %s: %s", key, strerror(-rc));
	for (struct elf_file *f = sym->lru_head; f; f = f->next) {
		char k[PF_TBUILDER_KEY_MAX];
		if (f->lt_state != LT_PENDING)
			continue;
		lt_key(f, k, sizeof(k));
		if (strcmp(k, key))
			continue;
		int orc = rc == 0 ? pf_line_table_open(dir, key, &f->lt) : rc;
		f->lt_state = orc == 0 ? LT_READY : LT_NONE;
		if (orc < 0 && orc != -ENOENT && orc != -E2BIG)
			sym->st.last_error = orc;
	}
	if (rc == 0)
		pf_tbuilder_account(dir, key, ".lin", PF_SYM_LINE_DIR_MAX_BYTES,
				    &sym->lines_dir_bytes);
}

/* Reaps finished builds and starts the next child when the budget allows. */
static void lt_poll(struct pf_symbolizer *sym)
{
	if (!pf_tbuilder_busy(sym->lb))
		return;
	uint64_t ns = 0;
	int rc = pf_tbuilder_poll(sym->lb, pf_tbuilder_budget_ok(&sym->lb_budget), lt_done, sym,
				  &ns);
	sym->lb_budget.ns -= (int64_t)ns;
	sym->st.line_build_cpu_ns += ns;
	if (rc < 0)
		sym->st.last_error = rc;
}

/* True when the ELF file at fd has DWARF sections. Read through a handle of its own that
 * preads the section headers and their names into the heap (freed at once): through the
 * cached handle's mapping, fault-around would map 16 pages around each page read, 5 MB
 * at a start for the few dozen files of the processes first seen. */
static bool fd_has_dwarf(int fd)
{
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	bool has = e && elf_kind(e) == ELF_K_ELF && elf_has_dwarf(e);
	if (e)
		elf_end(e);
	return has;
}

/* The descriptor of the file holding f's DWARF (f itself or its separate debug file), -1
 * when neither has any. */
static int lt_source_fd(struct pf_symbolizer *sym, struct elf_file *f)
{
	if (fd_has_dwarf(f->fd))
		return f->fd;
	bool tried = f->dbg_tried;
	if (!elf_file_debug(f, sym->opt.debug_dir))
		return -1;
	f->img_touched |= !tried; /* its header page: given back at the next trim */
	return fd_has_dwarf(f->dbg_fd) ? f->dbg_fd : -1;
}

/* Asks for f's table: open from the directory when an earlier run built it, else queued for
 * the builder. Files without DWARF are marked at once. */
static void lt_request(struct pf_symbolizer *sym, struct elf_file *f)
{
	if (f->lt_state != LT_UNKNOWN)
		return;
	int fd = lt_source_fd(sym, f);
	if (fd < 0) {
		f->lt_state = LT_NONE;
		f->no_dwarf = true;
		return;
	}
	char key[PF_TBUILDER_KEY_MAX];
	lt_key(f, key, sizeof(key));
	if (f->build_id[0] && pf_line_table_open(pf_tbuilder_dir(sym->lb), key, &f->lt) == 0) {
		f->lt_state = LT_READY;
		sym->st.line_cache_hits++;
		return;
	}
	int rc = pf_tbuilder_submit(sym->lb, key, fd);
	if (rc == 0 || rc == -EEXIST)
		f->lt_state = LT_PENDING;
	else if (rc != -EAGAIN) /* -EAGAIN: the queue is full, asked again at the next lookup */
		f->lt_state = LT_NONE;
	lt_poll(sym);
}

/* Source line and inlined functions of vaddr from f's table (as elf_file_find_line gives
 * them). *partial when the table is not there yet: the caller does not cache the result. */
static void lt_find_line(struct pf_symbolizer *sym, struct elf_file *f, uint64_t vaddr,
			 const char **file, uint32_t *line, struct inl_raw *inl, size_t *n_inl,
			 bool *partial)
{
	*file = NULL;
	*line = 0;
	*n_inl = 0;
	if (f->lt_state == LT_UNKNOWN)
		lt_request(sym, f);
	if (f->lt_state == LT_UNKNOWN || f->lt_state == LT_PENDING) {
		if (f->lt_state == LT_PENDING) { /* asked for ahead of time: now it is wanted */
			char key[PF_TBUILDER_KEY_MAX];
			lt_key(f, key, sizeof(key));
			pf_tbuilder_hurry(sym->lb, key);
		}
		*partial = true;
		sym->st.line_deferred++;
		return;
	}
	if (f->lt_state != LT_READY)
		return;
	const struct pf_line_result *r = sym->lres;
	int rc = pf_line_table_lookup(f->lt, vaddr, sym->lres);
	sym->st.line_lookups++;
	if (rc < 0) { /* the file went bad under us: built again at the next lookup */
		sym->st.last_error = rc;
		pf_line_table_close(f->lt);
		f->lt = NULL;
		f->lt_state = rc == -EBADMSG ? LT_UNKNOWN : LT_NONE;
		if (rc == -EBADMSG) {
			char key[PF_TBUILDER_KEY_MAX], path[PATH_MAX];
			lt_key(f, key, sizeof(key));
			if (snprintf(path, sizeof(path), "%s/%s.lin", pf_tbuilder_dir(sym->lb),
				     key) < (int)sizeof(path))
				unlink(path);
		}
		*partial = true;
		return;
	}
	*file = r->file;
	*line = r->line;
	for (uint32_t i = 0; i < r->n_inl; i++)
		inl[i] = (struct inl_raw){r->inl[i].name, r->inl[i].file, r->inl[i].line};
	*n_inl = r->n_inl;
}

/* ---- the ELF cache ------------------------------------------------------------------------ */

static void lru_unlink(struct pf_symbolizer *sym, struct elf_file *f)
{
	if (f->prev)
		f->prev->next = f->next;
	else
		sym->lru_head = f->next;
	if (f->next)
		f->next->prev = f->prev;
	else
		sym->lru_tail = f->prev;
	f->prev = f->next = NULL;
}

static void lru_push_front(struct pf_symbolizer *sym, struct elf_file *f)
{
	f->prev = NULL;
	f->next = sym->lru_head;
	if (sym->lru_head)
		sym->lru_head->prev = f;
	sym->lru_head = f;
	if (!sym->lru_tail)
		sym->lru_tail = f;
}

static struct elf_file *cache_find(struct pf_symbolizer *sym, const char *build_id, uint64_t dev,
				   uint64_t ino)
{
	for (struct elf_file *f = sym->lru_head; f; f = f->next) {
		bool hit = build_id && build_id[0] ? !strcmp(f->build_id, build_id)
						   : (f->dev == dev && f->ino == ino);
		if (hit) {
			lru_unlink(sym, f);
			lru_push_front(sym, f);
			return f;
		}
	}
	return NULL;
}

/* Inserts f (or returns the cached twin with the same build id, freeing f). */
static struct elf_file *cache_insert(struct pf_symbolizer *sym, struct elf_file *f)
{
	if (f->build_id[0]) {
		struct elf_file *twin = cache_find(sym, f->build_id, 0, 0);
		if (twin) {
			elf_file_free(f);
			return twin;
		}
	}
	lru_push_front(sym, f);
	f->id = ++sym->next_file_id;
	sym->n_elf++;
	sym->st.elf_opened++;
	while (sym->n_elf > sym->opt.max_elf_files && sym->lru_tail != f) {
		struct elf_file *old = sym->lru_tail;
		lru_unlink(sym, old);
		elf_file_free(old);
		sym->elf_gen++;
		sym->n_elf--;
		sym->st.elf_evicted++;
	}
	return f;
}

static int open_mapping_file(uint32_t pid, const struct pmap *m)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof(p), "/proc/%u/map_files/%" PRIx64 "-%" PRIx64, pid, m->start, m->end);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	snprintf(p, sizeof(p), "/proc/%u/root%s", pid, m->path);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	return open(m->path, O_RDONLY | O_CLOEXEC);
}

/* The cached ELF of a mapping, opening it through the process when needed. The mapping
 * remembers it until the cache frees a file (elf_gen): no search of the cache per frame. */
static struct elf_file *mapping_elf(struct pf_symbolizer *sym, uint32_t pid, struct pmap *m)
{
	if (m->special) {
		/* [anon] and the like (JIT code, named by jit_name); a [vdso] that is the agent's
		 * own image (checked when the maps were read) */
		return m->vdso > 0 ? vdso_file(sym) : NULL;
	}
	struct elf_file *f = m->elf;
	if (f && m->elf_gen == sym->elf_gen) {
		if (sym->lru_head != f) {
			lru_unlink(sym, f);
			lru_push_front(sym, f);
		}
		return f;
	}
	f = cache_find(sym, m->build_id, m->dev, m->ino);
	if (!f) {
		int fd = open_mapping_file(pid, m);
		if (fd < 0)
			return NULL;
		f = elf_file_open(fd);
		if (!f) {
			sym->st.last_error = -EINVAL;
			return NULL;
		}
		f = cache_insert(sym, f);
		memcpy(m->build_id, f->build_id, sizeof(m->build_id));
	}
	m->elf = f;
	m->elf_gen = sym->elf_gen;
	return f;
}

/* ---- processes ---------------------------------------------------------------------------- */

static int hexdigit(char c);

static void proc_maps_free(struct pf_symbolizer *sym, struct proc_maps *pm)
{
	if (!pm)
		return;
	if (pm->jit) {
		sym->jit_bytes -= pf_perf_map_bytes(pm->jit);
		sym->st.jit_maps--;
		pf_perf_map_free(pm->jit);
	}
	for (size_t i = 0; i < pm->n; i++)
		free(pm->maps[i].path);
	free(pm->maps);
	free(pm);
}

static struct proc_maps **proc_slot(const struct pf_symbolizer *sym, uint32_t pid)
{
	struct proc_maps **pp = (struct proc_maps **)&sym->procs[pid % PROC_BUCKETS];
	while (*pp && (*pp)->pid != pid)
		pp = &(*pp)->next;
	return pp;
}

bool pf_symbolizer_has(const struct pf_symbolizer *sym, uint32_t pid)
{
	return *proc_slot(sym, pid) != NULL;
}

void pf_symbolizer_forget(struct pf_symbolizer *sym, uint32_t pid)
{
	struct proc_maps **pp = proc_slot(sym, pid);
	struct proc_maps *pm = *pp;
	if (!pm)
		return;
	*pp = pm->next;
	proc_maps_free(sym, pm);
	sym->n_procs--;
}

static void evict_oldest_proc(struct pf_symbolizer *sym)
{
	struct proc_maps *old = NULL;
	for (size_t b = 0; b < PROC_BUCKETS; b++)
		for (struct proc_maps *pm = sym->procs[b]; pm; pm = pm->next)
			if (!old || pm->stamp < old->stamp)
				old = pm;
	if (old)
		pf_symbolizer_forget(sym, old->pid);
}

/* A hex number ending at `stop`; advances past it. */
static bool hex_field(const char **c, uint64_t *v, char stop)
{
	const char *p = *c;
	uint64_t x = 0;
	int d;
	for (; (d = hexdigit(*p)) >= 0; p++)
		x = x << 4 | (uint64_t)d;
	if (p == *c || *p != stop)
		return false;
	*v = x;
	*c = p + 1;
	return true;
}

static bool dec_field(const char **c, uint64_t *v)
{
	const char *p = *c;
	uint64_t x = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		x = x * 10 + (uint64_t)(*p - '0');
	if (p == *c)
		return false;
	*v = x;
	*c = p;
	return true;
}

/* PROCMAP_QUERY (Linux 6.11, include/uapi/linux/fs.h): one ioctl per executable mapping on a
 * /proc/PID/maps fd, instead of the kernel formatting every mapping as text and us parsing it
 * (about half the cost for a typical process). Declared here: Debian 12's headers predate it. */
struct pf_procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset;
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	uint32_t vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define PF_PROCMAP_QUERY _IOWR('f', 17, struct pf_procmap_query)
#define PF_PROCMAP_QUERY_VMA_WRITABLE 0x02
#define PF_PROCMAP_QUERY_VMA_EXECUTABLE 0x04
#define PF_PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10

static int procmap_query_state; /* 0 unknown, 1 works, -1 not on this kernel */

static int pmap_cmp(const void *a, const void *b)
{
	const struct pmap *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

static int pmap_push(struct pmap **maps, size_t *n, size_t *cap, uint64_t start, uint64_t end,
		     uint64_t off, uint64_t dev, uint64_t ino, const char *path)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct pmap *nm = realloc(*maps, nc * sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		*maps = nm;
		*cap = nc;
	}
	struct pmap *m = &(*maps)[*n];
	memset(m, 0, sizeof(*m));
	m->start = start;
	m->end = end;
	m->offset = off;
	m->dev = dev;
	m->ino = ino;
	m->special = path[0] != '/';
	m->path = strdup(path[0] ? path : "[anon]");
	if (!m->path)
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* The executable mappings through PROCMAP_QUERY. -ENOTTY when the kernel lacks it. */
static int query_maps(int fd, struct pmap **maps, size_t *n, size_t *cap)
{
	char name[PATH_MAX];
	uint64_t addr = 0;
	for (unsigned guard = 0; guard < 65536; guard++) {
		struct pf_procmap_query q = {
			.size = sizeof(q),
			.query_flags = PF_PROCMAP_QUERY_VMA_EXECUTABLE |
				       PF_PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
			.query_addr = addr,
			.vma_name_size = sizeof(name),
			.vma_name_addr = (uint64_t)(uintptr_t)name,
		};
		name[0] = 0;
		if (ioctl(fd, PF_PROCMAP_QUERY, &q) < 0) {
			if (errno == ENOENT) /* no more */
				return 0;
			return errno == ENOTTY || errno == EINVAL ? -ENOTTY
				: errno == ESRCH ? -ENOENT : -errno;
		}
		if (q.vma_end <= addr)
			return -EIO;
		addr = q.vma_end;
		int rc = pmap_push(maps, n, cap, q.vma_start, q.vma_end, q.vma_offset,
				   makedev(q.dev_major, q.dev_minor), q.inode,
				   q.vma_name_size ? name : "");
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The executable mappings from the text of /proc/PID/maps. */
static int text_maps(int fd, struct pmap **maps, size_t *n, size_t *cap)
{
	FILE *fp = fdopen(fd, "re");
	if (!fp)
		return -errno;
	char *line = NULL;
	size_t linecap = 0;
	int rc = 0;
	while (rc == 0 && getline(&line, &linecap, fp) > 0) {
		/* "start-end perms offset maj:min inode   path"; sscanf was the hot spot */
		uint64_t start, end, off, ino, maj, min;
		const char *c = line;
		if (!hex_field(&c, &start, '-') || !hex_field(&c, &end, ' '))
			continue;
		if (strnlen(c, 5) < 5 || c[2] != 'x' || c[4] != ' ')
			continue; /* not executable */
		c += 5;
		if (!hex_field(&c, &off, ' ') || !hex_field(&c, &maj, ':') ||
		    !hex_field(&c, &min, ' ') || !dec_field(&c, &ino))
			continue;
		while (*c == ' ')
			c++;
		char *path = line + (c - line);
		path[strcspn(path, "\n")] = 0;
		rc = pmap_push(maps, n, cap, start, end, off,
			       makedev((unsigned int)maj, (unsigned int)min), ino, path);
	}
	free(line);
	fclose(fp); /* closes fd */
	return rc;
}

static int parse_maps(uint32_t pid, struct pmap **out, size_t *n_out)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%u/maps", pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? -ENOENT : -errno;
	struct pmap *maps = NULL;
	size_t n = 0, cap = 0;
	int rc = -ENOTTY;
	if (procmap_query_state >= 0) {
		rc = query_maps(fd, &maps, &n, &cap);
		if (rc == -ENOTTY && procmap_query_state == 0)
			procmap_query_state = -1;
		else if (rc == 0)
			procmap_query_state = 1;
	}
	if (rc == -ENOTTY) {
		rc = text_maps(fd, &maps, &n, &cap);
		fd = -1;
	}
	if (fd >= 0)
		close(fd);
	if (rc < 0) {
		for (size_t i = 0; i < n; i++)
			free(maps[i].path);
		free(maps);
		return rc;
	}
	for (size_t i = 1; i < n; i++) {
		if (maps[i].start < maps[i - 1].start) { /* both sources list in address order */
			qsort(maps, n, sizeof(*maps), pmap_cmp);
			break;
		}
	}
	/* checked now, while the process lives: its frames may be named after it exited */
	for (size_t i = 0; i < n; i++)
		if (maps[i].special && !strcmp(maps[i].path, "[vdso]"))
			maps[i].vdso = pf_vdso_same(pid, maps[i].start, maps[i].end) ? 1 : -1;
	*out = maps;
	*n_out = n;
	return 0;
}

int pf_exec_maps_render(uint32_t pid, bool text, char *buf, size_t cap)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%u/maps", pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct pmap *maps = NULL;
	size_t n = 0, mcap = 0;
	int rc = text ? text_maps(fd, &maps, &n, &mcap) : query_maps(fd, &maps, &n, &mcap);
	if (!text)
		close(fd);
	size_t used = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		int k = snprintf(buf + used, cap - used, "%" PRIx64 "-%" PRIx64 " %" PRIx64
				 " %" PRIu64 " %" PRIu64 " %s\n",
				 maps[i].start, maps[i].end, maps[i].offset, maps[i].dev,
				 maps[i].ino, maps[i].path);
		if (k < 0 || (size_t)k >= cap - used)
			rc = -ENOSPC;
		else
			used += (size_t)k;
	}
	for (size_t i = 0; i < n; i++)
		free(maps[i].path);
	free(maps);
	return rc < 0 ? rc : (int)used;
}

int pf_symbolizer_capture(struct pf_symbolizer *sym, uint32_t pid)
{
	struct pmap *maps = NULL;
	size_t n = 0;
	int rc = parse_maps(pid, &maps, &n);
	if (rc < 0)
		return rc;
	struct proc_maps **pp = proc_slot(sym, pid);
	struct proc_maps *pm = *pp;
	if (!pm) {
		if (sym->n_procs >= sym->opt.max_processes) {
			evict_oldest_proc(sym);
			pp = proc_slot(sym, pid);
		}
		pm = calloc(1, sizeof(*pm));
		if (!pm) {
			for (size_t i = 0; i < n; i++)
				free(maps[i].path);
			free(maps);
			return -ENOMEM;
		}
		pm->pid = pid;
		*pp = pm;
		sym->n_procs++;
	} else {
		for (size_t i = 0; i < pm->n; i++)
			free(pm->maps[i].path);
		free(pm->maps);
	}
	pm->maps = maps;
	pm->n = n;
	pm->stamp = ++sym->stamp;
	/* Open every file now, while the process (and its mount namespace) is there. */
	for (size_t i = 0; i < n; i++) {
		struct elf_file *f = mapping_elf(sym, pid, &maps[i]);
		if (f)
			lt_request(sym, f);
	}
	return 0;
}

/* The ELF virtual address of the page-aligned start offset of an executable mapping: through
 * the executable PT_LOAD segment whose pages hold it (the offset may also fall inside the
 * preceding read-only segment's last page, where elf_file_off_to_vaddr would answer). */
static bool elf_exec_off_to_vaddr(const struct elf_file *f, uint64_t off, uint64_t *vaddr)
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

int pf_symbolizer_exec_maps(struct pf_symbolizer *sym, uint32_t pid,
			    int (*fn)(void *ctx, const struct pf_sym_exec_map *m), void *ctx)
{
	struct proc_maps *pm = *proc_slot(sym, pid);
	if (!pm)
		return -ENOENT;
	for (size_t i = 0; i < pm->n; i++) {
		struct pmap *m = &pm->maps[i];
		struct pf_sym_exec_map x = {.start = m->start, .end = m->end, .fd = -1,
					    .build_id = "", .path = m->path, .dev = m->dev,
					    .ino = m->ino,
					    .anon = m->special && strcmp(m->path, "[vdso]") &&
						    strcmp(m->path, "[vsyscall]"),
					    .vdso = m->vdso > 0};
		struct elf_file *f = mapping_elf(sym, pid, m);
		uint64_t vaddr;
		if (f && elf_exec_off_to_vaddr(f, m->offset, &vaddr)) {
			x.fd = f->fd;
			x.bias = m->start - vaddr;
			x.build_id = f->build_id;
		}
		int rc = fn(ctx, &x);
		if (rc)
			return rc;
	}
	return 0;
}

int pf_symbolizer_pin_exe(struct pf_symbolizer *sym, uint32_t pid)
{
	char p[64];
	struct stat stt;
	snprintf(p, sizeof(p), "/proc/%u/exe", pid);
	if (stat(p, &stt) < 0)
		return -errno;
	if (cache_find(sym, NULL, stt.st_dev, stt.st_ino))
		return 0;
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct elf_file *f = elf_file_open(fd);
	if (!f)
		return -EINVAL;
	cache_insert(sym, f);
	return 0;
}

/* ---- kernel ------------------------------------------------------------------------------- */

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;
	return x->addr_off < y->addr_off ? -1 : x->addr_off > y->addr_off;
}

/* Kernel text and modules lie within a few GB (x86-64: 2 GB; arm64: 4 GB with module PLTs),
 * so addresses are stored as 32-bit offsets from the lowest one. Symbols beyond base + 4 GB
 * (none on those arches) are dropped. */
static uint64_t kaddr(const struct pf_symbolizer *sym, size_t i)
{
	return sym->kbase + sym->ksyms[i].addr_off;
}

static int hexdigit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* The running kernel's GNU build id, from /sys/kernel/notes. */
static void kernel_build_id(struct pf_symbolizer *sym)
{
	int nfd = open("/sys/kernel/notes", O_RDONLY | O_CLOEXEC);
	if (nfd >= 0) {
		uint8_t buf[4096];
		ssize_t r = read(nfd, buf, sizeof(buf));
		if (r > 0 && notes_build_id(buf, (size_t)r, sym->kbuild_id, sizeof(sym->kbuild_id)))
			sym->kbuild_id[0] = 0;
		close(nfd);
	}
}

/* One line of /proc/kallsyms, "address type name [module]": true for a text symbol ('t' or
 * 'T') with a non-zero address and a name (name, len: the name, not NUL-terminated). The hex
 * is parsed by hand: strtoull's locale handling was half the load time. */
static bool kallsyms_text_line(const char *line, uint64_t *addr, const char **name, size_t *len)
{
	const char *end = line;
	uint64_t a = 0;
	for (int d; (d = hexdigit(*end)) >= 0; end++)
		a = a << 4 | (uint64_t)d;
	if (end == line || end[0] != ' ' || (end[1] != 't' && end[1] != 'T') || end[2] != ' ')
		return false;
	*name = end + 3;
	*len = strcspn(*name, " \t\n");
	*addr = a;
	return a && *len;
}

static void kernel_load(struct pf_symbolizer *sym)
{
	if (sym->kernel_tried)
		return;
	sym->kernel_tried = true;
	kernel_build_id(sym);

	FILE *fp = fopen("/proc/kallsyms", "re");
	if (!fp) {
		sym->st.last_error = -errno;
		return;
	}
	size_t cap = 0, n = 0, ncap = 0, nlen = 0;
	struct ksym *ks = NULL;
	char *names = NULL;
	char line[512];
	bool ok = true;
	/* /proc/kallsyms is sorted by address except for the modules' part; the base is the
	 * lowest text address, found in a first cheap pass over the (few) module lines later */
	uint64_t base = UINT64_MAX;
	struct {
		uint64_t addr;
		uint32_t name_off;
	} *raw = NULL;
	while (ok && fgets(line, sizeof(line), fp)) {
		uint64_t addr;
		const char *name;
		size_t len;
		if (!kallsyms_text_line(line, &addr, &name, &len))
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 65536;
			void *nk = realloc(raw, nc * sizeof(*raw));
			ok = nk != NULL;
			if (!ok)
				break;
			raw = nk;
			cap = nc;
		}
		if (nlen + len + 1 > ncap) {
			size_t nc = ncap ? ncap * 2 : (size_t)1 << 20;
			char *nn = realloc(names, nc);
			ok = nn != NULL;
			if (!ok)
				break;
			names = nn;
			ncap = nc;
		}
		memcpy(names + nlen, name, len);
		names[nlen + len] = 0;
		raw[n].addr = addr;
		raw[n++].name_off = (uint32_t)nlen;
		nlen += len + 1;
		if (addr < base)
			base = addr;
	}
	fclose(fp);
	if (ok && n) {
		/* compact in place: 16-byte entries become 8-byte ones, front to back */
		ks = (struct ksym *)raw;
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			uint64_t a = raw[i].addr, no = raw[i].name_off;
			if (a - base > UINT32_MAX)
				continue;
			ks[k++] = (struct ksym){(uint32_t)(a - base), (uint32_t)no};
		}
		n = k;
		raw = NULL;
	}
	if (!ok || !n) { /* no memory, or kptr_restrict hides the addresses */
		free(raw);
		free(ks);
		free(names);
		sym->st.last_error = ok ? -EPERM : -ENOMEM;
		return;
	}
	qsort(ks, n, sizeof(*ks), ksym_cmp);
	sym->kbase = base;
	/* give back the slack of the doubling growth */
	struct ksym *fit = realloc(ks, n * sizeof(*ks));
	char *nfit = realloc(names, nlen);
	sym->ksyms = fit ? fit : ks;
	sym->knames = nfit ? nfit : names;
	sym->n_ksyms = n;
	sym->st.kernel_symbols = n;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* kernel_load(), timed for the stats (most of it is the kernel formatting kallsyms). */
static void kernel_load_timed(struct pf_symbolizer *sym)
{
	if (sym->kernel_tried)
		return;
	uint64_t t0 = thread_cpu_ns();
	kernel_load(sym);
	sym->st.kernel_load_cpu_ns = thread_cpu_ns() - t0;
}

int pf_symbolizer_load_kernel(struct pf_symbolizer *sym)
{
	kernel_load_timed(sym);
	return sym->n_ksyms ? 0 : (sym->st.last_error ? sym->st.last_error : -ENOENT);
}

static const char *kernel_find(struct pf_symbolizer *sym, uint64_t addr)
{
	if (addr < sym->kbase || addr - sym->kbase > UINT32_MAX)
		return NULL;
	uint32_t off = (uint32_t)(addr - sym->kbase);
	size_t lo = 0, hi = sym->n_ksyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (sym->ksyms[mid].addr_off <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? sym->knames + sym->ksyms[lo - 1].name_off : NULL;
}

/* ---- resolved-address cache --------------------------------------------------------------- */

static uint64_t rc_hash(uint64_t a, uint64_t b)
{
	uint64_t h = (a * 0x9e3779b97f4a7c15ull) ^ (b + 0x632be59bd9b4e019ull + (a << 6));
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 32);
}

static void inames_clear(struct pf_symbolizer *sym)
{
	for (size_t b = 0; sym->inames && b < RCACHE_SLOTS; b++) {
		struct iname *n = sym->inames[b];
		while (n) {
			struct iname *nx = n->next;
			free(n);
			n = nx;
		}
		sym->inames[b] = NULL;
	}
	sym->inames_bytes = 0;
}

static void rcache_clear(struct pf_symbolizer *sym)
{
	for (size_t i = 0; sym->rcache && i < RCACHE_SLOTS; i++)
		free(sym->rcache[i].inl);
	if (sym->rcache)
		memset(sym->rcache, 0, RCACHE_SLOTS * sizeof(*sym->rcache));
}

/* Interned names over their bound (rare: a host with very many source files and inlined
 * functions): start over. Called before a resolution interns anything, so the names of one
 * entry never go away under it. */
static void inames_bound(struct pf_symbolizer *sym)
{
	if (sym->inames_bytes <= RCACHE_NAMES_MAX)
		return;
	rcache_clear(sym);
	if (sym->kcache)
		memset(sym->kcache, 0, KCACHE_SLOTS * sizeof(*sym->kcache));
	inames_clear(sym);
}

/* A stable copy of a source file or function name (a lookup's go with its result). NULL:
 * no memory. */
static const char *intern_name_n(struct pf_symbolizer *sym, const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
	struct iname **pp = &sym->inames[h & (RCACHE_SLOTS - 1)];
	for (struct iname *n = *pp; n; n = n->next)
		if (!strncmp(n->s, s, len) && !n->s[len])
			return n->s;
	struct iname *n = malloc(sizeof(*n) + len + 1);
	if (!n)
		return NULL;
	memcpy(n->s, s, len);
	n->s[len] = 0;
	n->next = *pp;
	*pp = n;
	sym->inames_bytes += sizeof(*n) + len + 1;
	return n->s;
}

/* Interns s[0, len), a name read from a file (symbol, source file, inlined function: bytes
 * whoever built the binary chose), fit for a profile's protobuf strings: every byte that is
 * not part of valid UTF-8, and every control character, replaced by '?'. NULL: no memory. */
static const char *intern_clean(struct pf_symbolizer *sym, const char *s, size_t len)
{
	if (pf_utf8_clean(s, len))
		return intern_name_n(sym, s, len);
	char buf[512];
	char *tmp = len < sizeof(buf) ? buf : malloc(len + 1);
	if (!tmp)
		return NULL;
	pf_utf8_copy_clean(tmp, s, len);
	sym->st.names_cleaned++;
	const char *r = intern_name_n(sym, tmp, len);
	if (tmp != buf)
		free(tmp);
	return r;
}

static const char *intern_name(struct pf_symbolizer *sym, const char *s)
{
	return intern_clean(sym, s, strlen(s));
}

/* The name shown for ELF symbol s: its own when it is clean (in the file's image), else
 * without its version suffix ("@@GLIBC_2.34") and cleaned, interned. NULL: no memory. */
static const char *sym_name(struct pf_symbolizer *sym, const struct elf_sym *s)
{
	size_t len = sym_base_len(s->name);
	return !s->name[len] && pf_utf8_clean(s->name, len) ? s->name
							    : intern_clean(sym, s->name, len);
}

/* The demangled form of name, interned (*out NULL when name reads as it is). 0 or -ENOMEM. */
static int readable_name(struct pf_symbolizer *sym, const char *name, const char **out)
{
	*out = NULL;
	const char *r = name ? pf_demangle(sym->dm, name) : NULL;
	if (r && !(*out = intern_name(sym, r)))
		return -ENOMEM;
	return 0;
}

static bool caches_ready(struct pf_symbolizer *sym)
{
	if (!sym->rcache) {
		sym->rcache = calloc(RCACHE_SLOTS, sizeof(*sym->rcache));
		if (!sym->rcache)
			return false;
	}
	if (!sym->inames) {
		sym->inames = calloc(RCACHE_SLOTS, sizeof(*sym->inames));
		if (!sym->inames)
			return false;
	}
	return true;
}

/* Symbol and line of vaddr in f, from the cache or resolved now (and cached). NULL only when
 * out of memory; ->function NULL when no symbol covers vaddr. While f's line table is being
 * built, the address gets its symbol only, in sym->partial (not cached). */
static const struct rcache_ent *rcache_lookup(struct pf_symbolizer *sym, struct elf_file *f,
					      uint64_t vaddr)
{
	if (!caches_ready(sym))
		return NULL;
	/* two ways per set, the most recently used first: two hot addresses that hash alike
	 * would otherwise push each other out and pay a DWARF lookup every window */
	struct rcache_ent *e = &sym->rcache[(rc_hash(f->id, vaddr) & (RCACHE_SLOTS / 2 - 1)) * 2];
	if (e[0].file_id == f->id && e[0].vaddr == vaddr) {
		sym->st.cache_hits++;
		return e;
	}
	if (e[1].file_id == f->id && e[1].vaddr == vaddr) {
		struct rcache_ent t = e[0];
		e[0] = e[1];
		e[1] = t;
		sym->st.cache_hits++;
		return e;
	}
	inames_bound(sym);
	const struct elf_sym *s = elf_file_find_sym(f, sym->opt.debug_dir, vaddr);
	f->img_touched = true; /* its name was read from the image */
	const char *file = NULL;
	uint32_t line = 0;
	struct inl_raw raw[MAX_INLINE_DEPTH];
	size_t n_inl = 0;
	bool partial = false;
	if (s && !f->no_dwarf)
		lt_find_line(sym, f, vaddr, &file, &line, raw, &n_inl, &partial);
	if (file && !(file = intern_name(sym, file)))
		return NULL;
	struct rc_inline *inl = n_inl ? calloc(n_inl, sizeof(*inl)) : NULL;
	if (n_inl && !inl)
		return NULL;
	for (size_t i = 0; i < n_inl; i++) {
		inl[i].line = raw[i].line;
		if ((raw[i].name && !(inl[i].name = intern_name(sym, raw[i].name))) ||
		    (raw[i].file && !(inl[i].file = intern_name(sym, raw[i].file))) ||
		    readable_name(sym, inl[i].name, &inl[i].readable) < 0) {
			free(inl);
			return NULL;
		}
	}
	const char *readable = NULL, *name = s ? sym_name(sym, s) : NULL;
	if (s && (!name || readable_name(sym, name, &readable) < 0)) {
		free(inl);
		return NULL;
	}
	if (partial) {
		sym->partial = (struct rcache_ent){0, vaddr, name, readable, NULL, 0, 0, NULL};
		return &sym->partial;
	}
	free(e[1].inl);
	e[1] = e[0];
	e[0] = (struct rcache_ent){f->id, vaddr, name, readable, file, line,
				   (uint32_t)n_inl, inl};
	sym->st.inlined_frames += n_inl;
	return e;
}

/* ---- pages of mapped files ---------------------------------------------------------------- */

/* True when [a, a + len) lies in one read-only mapping of the file (dev, ino) in this
 * process: libelf's mmap of it (ELF_C_READ_MMAP), not the heap copy it falls back to when
 * mmap fails. Such pages can only be clean copies of the file. */
static bool self_mapped_ro(uint64_t a, size_t len, uint64_t dev, uint64_t ino)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct pf_procmap_query q = {.size = sizeof(q), .query_addr = a};
	if (procmap_query_state >= 0 && ioctl(fd, PF_PROCMAP_QUERY, &q) == 0) {
		close(fd);
		return q.vma_start <= a && a + len <= q.vma_end && q.inode == ino &&
		       makedev(q.dev_major, q.dev_minor) == dev &&
		       !(q.vma_flags & PF_PROCMAP_QUERY_VMA_WRITABLE);
	}
	FILE *mf = fdopen(fd, "r"); /* before Linux 6.11: the text */
	if (!mf) {
		close(fd);
		return false;
	}
	char line[512];
	bool ok = false;
	while (fgets(line, sizeof(line), mf)) {
		uint64_t lo, hi, i;
		unsigned maj, min;
		char perm[8];
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %*x %x:%x %" SCNu64, &lo, &hi,
			   perm, &maj, &min, &i) != 6 || a < lo || a >= hi)
			continue;
		ok = a + len <= hi && i == ino && makedev(maj, min) == dev && perm[1] == '-';
		break;
	}
	fclose(mf);
	return ok;
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
		*state = fstat(fd, &st) == 0 && self_mapped_ro((uintptr_t)p, n, st.st_dev, st.st_ino)
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
static void release_touched(struct elf_file *f)
{
	if (!f->img_touched)
		return;
	release_image(f->elf, f->fd, &f->img_state);
	release_image(f->dbg_elf, f->dbg_fd, &f->dbg_img_state);
	f->img_touched = false;
}

void pf_symbolizer_trim(struct pf_symbolizer *sym)
{
	sym->window++;
	lt_poll(sym);
	for (struct elf_file *f = sym->lru_head; f; f = f->next)
		release_touched(f);
}

/* ---- resolve ------------------------------------------------------------------------------ */

/* ---- JIT symbol maps --------------------------------------------------------------------- */

/* pid's id in its own pid namespace (the last NSpid of /proc/PID/status: the number a
 * runtime in a container names its map after), pid itself when unreadable. */
static uint32_t ns_pid(uint32_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pid;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return pid;
	buf[n] = 0;
	const char *l = strstr(buf, "\nNSpid:");
	if (!l)
		return pid;
	l += 8;
	const char *eol = strchr(l, '\n');
	uint32_t last = pid;
	while (*l && (!eol || l < eol)) {
		char *e;
		unsigned long v = strtoul(l, &e, 10);
		if (e == l)
			break;
		last = (uint32_t)v;
		l = e;
	}
	return last;
}

/* Opens pid's perf map: tmp/perf-<ns pid>.map resolved inside the process's root, so that no
 * symlink the process made (of the file, or of /tmp) leads out of it (openat2
 * RESOLVE_IN_ROOT, Linux 5.6+; before it, a final symlink is refused at least). Non-blocking:
 * a FIFO in its place must not stall the data plane (the caller wants a regular file). */
static int jit_open(uint32_t pid, uint32_t nspid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%u/root", pid);
	int root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -1;
	snprintf(path, sizeof(path), "tmp/perf-%u.map", nspid);
	struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS)
		fd = openat(root, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
	close(root);
	return fd;
}

/* Loads or reloads pid's JIT map when it changed since pm last looked (at most once per
 * window). A map past perf_map.h's bounds, or one that would take the processes' maps past
 * PF_SYM_JIT_MAX_BYTES, is refused (counted) and the one loaded before stays. */
static void jit_refresh(struct pf_symbolizer *sym, uint32_t pid, struct proc_maps *pm)
{
	if (!pm->jit_nspid)
		pm->jit_nspid = ns_pid(pid);
	int fd = jit_open(pid, pm->jit_nspid);
	if (fd < 0)
		return;
	struct stat st;
	int64_t mtime = 0;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return;
	}
	mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	if (pm->jit && (uint64_t)st.st_size == pm->jit_size && mtime == pm->jit_mtime_ns) {
		close(fd);
		return;
	}
	pm->jit_size = (uint64_t)st.st_size;
	pm->jit_mtime_ns = mtime;
	struct pf_perf_map *m = NULL;
	int rc = (uint64_t)st.st_size > PF_PERF_MAP_MAX_BYTES ? -EFBIG
							       : pf_perf_map_read(fd, &m, NULL);
	close(fd);
	size_t old = pf_perf_map_bytes(pm->jit);
	if (rc == 0 && sym->jit_bytes - old + pf_perf_map_bytes(m) > PF_SYM_JIT_MAX_BYTES)
		rc = -ENOSPC;
	if (rc < 0) {
		pf_perf_map_free(m);
		sym->st.jit_maps_refused++;
		return;
	}
	if (pm->jit) {
		sym->jit_bytes -= old;
		pf_perf_map_free(pm->jit);
	} else {
		sym->st.jit_maps++;
	}
	pm->jit = m;
	sym->jit_bytes += pf_perf_map_bytes(m);
	sym->st.jit_maps_loaded++;
}

/* The name pid's JIT map gives addr, or NULL. */
static const char *jit_name(struct pf_symbolizer *sym, uint32_t pid, struct proc_maps *pm,
			    uint64_t addr)
{
	if (!pm)
		return NULL;
	if (pm->jit_window != sym->window + 1) {
		pm->jit_window = sym->window + 1;
		jit_refresh(sym, pid, pm);
	}
	return pf_perf_map_find(pm->jit, addr);
}

/* The mapping holding addr (maps are sorted by address and do not overlap), or NULL. */
static struct pmap *find_pmap(struct proc_maps *pm, uint64_t addr)
{
	if (!pm)
		return NULL;
	size_t lo = 0, hi = pm->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr < pm->maps[mid].start)
			hi = mid;
		else if (addr >= pm->maps[mid].end)
			lo = mid + 1;
		else
			return &pm->maps[mid];
	}
	return NULL;
}

/* ---- kernel frames through the resolver ---------------------------------------------------- */

void pf_symbolizer_set_kernel_resolver(struct pf_symbolizer *sym, pf_kernel_resolve_fn fn,
				       void *ctx)
{
	sym->kresolve = sym->opt.no_kernel ? NULL : fn;
	sym->kresolve_ctx = ctx;
	sym->st.kernel_resolver = sym->kresolve != NULL;
}

/* Resolver mode: the kernel build id, and the start of kernel text for the mapping from the
 * first lines of /proc/kallsyms (a 4 KiB read: the kernel formats only what is read). */
static void kernel_info(struct pf_symbolizer *sym)
{
	if (sym->kinfo_read)
		return;
	sym->kinfo_read = true;
	kernel_build_id(sym);
	int fd = open("/proc/kallsyms", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char buf[4096];
	ssize_t r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return;
	buf[r] = 0;
	for (char *l = buf; *l;) {
		uint64_t addr;
		const char *name;
		size_t len;
		if (kallsyms_text_line(l, &addr, &name, &len)) {
			sym->ktext_start = addr;
			return;
		}
		char *nl = strchr(l, '\n');
		if (!nl)
			return;
		l = nl + 1;
	}
}

static struct kcache_ent *kcache_slot(struct pf_symbolizer *sym, uint64_t addr)
{
	uint64_t h = addr * 0x9e3779b97f4a7c15ull;
	return &sym->kcache[(h >> 32) & (KCACHE_SLOTS - 1)];
}

/* "name+0xoff/0xsize [module]" -> interned name; NULL for "0x..." (no symbol). *oom on
 * allocation failure. */
static const char *ktext_name(struct pf_symbolizer *sym, char *text, bool *oom)
{
	text[PF_SYM_KTEXT_LEN - 1] = 0;
	if (!text[0] || (text[0] == '0' && text[1] == 'x'))
		return NULL;
	text[strcspn(text, "+ ")] = 0;
	if (!text[0])
		return NULL;
	const char *n = intern_name(sym, text);
	if (!n)
		*oom = true;
	return n;
}

struct kbatch {
	uint64_t addrs[PF_SYM_KRESOLVE_BATCH];
	char text[PF_SYM_KRESOLVE_BATCH][PF_SYM_KTEXT_LEN];
	const char *names[PF_SYM_KRESOLVE_BATCH]; /* after the flush; NULL: no symbol */
	size_t n;
	bool done; /* flushed: addrs/names hold the pass's results */
};

/* Resolves the batch and fills the cache. 0, -ENOMEM, or the resolver's error. */
static int kbatch_flush(struct pf_symbolizer *sym, struct kbatch *b)
{
	if (!b->n)
		return 0;
	uint64_t t0 = thread_cpu_ns();
	int rc = sym->kresolve(sym->kresolve_ctx, b->addrs, b->n, b->text);
	sym->st.kernel_resolve_cpu_ns += thread_cpu_ns() - t0;
	sym->st.kernel_resolve_calls++;
	if (rc < 0)
		return rc;
	bool oom = false;
	for (size_t i = 0; i < b->n; i++) {
		const char *name = ktext_name(sym, b->text[i], &oom);
		if (oom)
			return -ENOMEM;
		b->names[i] = name;
	}
	/* after every intern_name(): one of them may have reset the caches */
	for (size_t i = 0; i < b->n; i++)
		*kcache_slot(sym, b->addrs[i]) = (struct kcache_ent){b->addrs[i], b->names[i]};
	sym->st.kernel_resolved += b->n;
	b->done = true;
	return 0;
}

/* The name of a kernel address: this pass's batch first (two addresses of one batch may
 * share a cache slot), else the cache. *known false when neither has it. */
static const char *kname(struct pf_symbolizer *sym, const struct kbatch *b, uint64_t addr,
			 bool *known)
{
	*known = true;
	for (size_t j = 0; b->done && j < b->n; j++)
		if (b->addrs[j] == addr)
			return b->names[j];
	struct kcache_ent *e = kcache_slot(sym, addr);
	if (e->addr == addr)
		return e->name;
	*known = false;
	return NULL;
}

/* Names of the kernel frames among frames[0..n) through the resolver. Frames are named in
 * passes: the misses of a pass (up to a batch of distinct addresses) are resolved, then the
 * pass's frames take their names from the cache. 0, -ENOMEM, or the resolver's error
 * (frames left unnamed; the caller falls back to /proc/kallsyms). */
static int kernel_resolve_frames(struct pf_symbolizer *sym, struct pf_prof_window *w,
				 struct pf_prof_frame *frames, size_t n)
{
	if (!caches_ready(sym))
		return -ENOMEM;
	if (!sym->kcache) {
		sym->kcache = calloc(KCACHE_SLOTS, sizeof(*sym->kcache));
		if (!sym->kcache)
			return -ENOMEM;
	}
	_cleanup_free_ struct kbatch *b = malloc(sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->n = 0;
	b->done = false;
	size_t pass = 0;
	for (size_t i = 0; i <= n; i++) {
		bool last = i == n;
		if (!last) {
			struct pf_prof_frame *fr = &frames[i];
			if (fr->kind != PF_FRAME_KERNEL)
				continue;
			struct kcache_ent *e = kcache_slot(sym, fr->address);
			if (e->addr == fr->address) { /* named now: a flush may take the slot */
				if (e->name && !(fr->function = pf_prof_strdup(w, e->name)))
					return -ENOMEM;
				continue;
			}
			bool queued = false;
			for (size_t j = 0; j < b->n && !queued; j++)
				queued = b->addrs[j] == fr->address;
			if (queued)
				continue;
			if (b->n < PF_SYM_KRESOLVE_BATCH) {
				b->addrs[b->n++] = fr->address;
				continue;
			}
		}
		/* batch full (frame i not queued) or the end: resolve, then name frames
		 * pass..i-1 from the batch and the cache */
		int rc = kbatch_flush(sym, b);
		if (rc < 0)
			return rc;
		for (size_t k = pass; k < i; k++) {
			struct pf_prof_frame *fr = &frames[k];
			if (fr->kind != PF_FRAME_KERNEL || fr->function)
				continue;
			bool known;
			const char *name = kname(sym, b, fr->address, &known);
			if (!name)
				continue;
			fr->function = pf_prof_strdup(w, name);
			if (!fr->function)
				return -ENOMEM;
		}
		if (last)
			break;
		pass = i;
		b->n = 0;
		b->done = false;
		i--; /* frame i again, into the empty batch */
	}
	return 0;
}

/* The readable name and the system name (name itself; NULL when it reads the same), copied
 * into w. 0 or -ENOMEM. */
static int name_pair(struct pf_prof_window *w, const char *name, const char *readable,
		     const char **function, const char **system_name)
{
	*function = *system_name = NULL;
	if (readable) {
		*system_name = pf_prof_strdup(w, name);
		*function = pf_prof_strdup(w, readable);
		return *system_name && *function ? 0 : -ENOMEM;
	}
	*function = pf_prof_strdup(w, name);
	return *function ? 0 : -ENOMEM;
}

static int frame_inlines(struct pf_prof_window *w, const struct rcache_ent *r,
			 struct pf_prof_frame *fr)
{
	struct pf_prof_inline *in = pf_prof_alloc(w, r->n_inl * sizeof(*in));
	if (!in)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->n_inl; i++) {
		const struct rc_inline *ri = &r->inl[i];
		if (ri->name &&
		    name_pair(w, ri->name, ri->readable, &in[i].function, &in[i].system_name) < 0)
			return -ENOMEM;
		in[i].file = ri->file ? pf_prof_strdup(w, ri->file) : NULL;
		if (ri->file && !in[i].file)
			return -ENOMEM;
		in[i].line = ri->line;
	}
	fr->inlined = in;
	fr->n_inlined = r->n_inl;
	return 0;
}

/* True when (f, vaddr) is in the resolved-address cache (nothing moves). */
static bool rcache_has(const struct pf_symbolizer *sym, const struct elf_file *f, uint64_t vaddr)
{
	if (!sym->rcache)
		return false;
	const struct rcache_ent *e =
		&sym->rcache[(rc_hash(f->id, vaddr) & (RCACHE_SLOTS / 2 - 1)) * 2];
	return (e[0].file_id == f->id && e[0].vaddr == vaddr) ||
	       (e[1].file_id == f->id && e[1].vaddr == vaddr);
}

struct new_addr {
	uint64_t file_id, vaddr;
	size_t pmap; /* index in the process's maps */
};

static int new_addr_cmp(const void *a, const void *b)
{
	const struct new_addr *x = a, *y = b;
	if (x->file_id != y->file_id)
		return x->file_id < y->file_id ? -1 : 1;
	return (x->vaddr > y->vaddr) - (x->vaddr < y->vaddr);
}

/* Looks up the frames' addresses not in the cache yet, in file and address order: a line
 * table's block read for one serves its neighbours (in stack order, a window would read
 * blocks back and forth), and each symbol table is walked in order. The results land in the
 * cache, where the frames find them. */
static void resolve_new(struct pf_symbolizer *sym, uint32_t pid, struct proc_maps *pm,
			const struct pf_prof_frame *frames, const int32_t *fm, size_t n)
{
	struct new_addr *v = NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		struct pmap *m;
		struct elf_file *f;
		uint64_t vaddr;
		if (fm[i] < 0 || !(f = mapping_elf(sym, pid, m = &pm->maps[fm[i]])))
			continue;
		if (!elf_file_off_to_vaddr(f, frames[i].address - m->start + m->offset, &vaddr))
			vaddr = frames[i].address;
		if (rcache_has(sym, f, vaddr))
			continue;
		if (!v && !(v = malloc(n * sizeof(*v))))
			return; /* the frames' own lookups will do, in stack order */
		v[k++] = (struct new_addr){f->id, vaddr, (size_t)(m - pm->maps)};
	}
	if (k > 1)
		qsort(v, k, sizeof(*v), new_addr_cmp);
	for (size_t i = 0; k > 1 && i < k; i++) {
		if (i && v[i].file_id == v[i - 1].file_id && v[i].vaddr == v[i - 1].vaddr)
			continue;
		struct elf_file *f = mapping_elf(sym, pid, &pm->maps[v[i].pmap]);
		if (f && f->id == v[i].file_id) /* else evicted meanwhile: the frame's lookup */
			rcache_lookup(sym, f, v[i].vaddr);
	}
	free(v);
}

/* Each user frame's mapping in pm (its index; -1: a kernel frame or none). The number of
 * user frames in no mapping. */
static size_t frames_to_maps(struct proc_maps *pm, const struct pf_prof_frame *frames, size_t n,
			     int32_t *fm)
{
	size_t missing = 0;
	for (size_t i = 0; i < n; i++) {
		struct pmap *m = NULL;
		if (frames[i].kind != PF_FRAME_KERNEL && !(m = find_pmap(pm, frames[i].address)))
			missing++;
		fm[i] = m ? (int32_t)(m - pm->maps) : -1;
	}
	return missing;
}

int pf_symbolizer_resolve(struct pf_symbolizer *sym, uint32_t pid, struct pf_prof_window *w,
			  struct pf_prof_process *p, struct pf_prof_frame *frames, size_t n)
{
	struct proc_maps *pm = *proc_slot(sym, pid);
	bool have_kernel = false;
	_cleanup_free_ int32_t *fm = malloc((n ? n : 1) * sizeof(*fm));
	if (!fm)
		return -ENOMEM;
	/* A late dlopen: addresses outside the snapshot make us look once more. */
	lt_poll(sym);
	if (frames_to_maps(pm, frames, n, fm) && pf_symbolizer_capture(sym, pid) == 0) {
		pm = *proc_slot(sym, pid);
		frames_to_maps(pm, frames, n, fm);
	}

	/* Mappings: the kernel's plus every process mapping a frame falls in (in maps order). */
	size_t n_pmaps = pm ? pm->n : 0;
	_cleanup_free_ int32_t *idx = calloc(n_pmaps + 1, sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		have_kernel |= frames[i].kind == PF_FRAME_KERNEL;
		if (fm[i] >= 0)
			idx[fm[i]] = 1;
	}
	size_t nm = have_kernel;
	for (size_t i = 0; i < n_pmaps; i++)
		nm += idx[i] != 0;
	struct pf_prof_mapping *maps = nm ? pf_prof_alloc(w, nm * sizeof(*maps)) : NULL;
	if (nm && !maps)
		return -ENOMEM;
	size_t k = 0;
	int32_t kmap = -1;
	if (have_kernel) {
		if (sym->kresolve)
			kernel_info(sym);
		else
			kernel_load_timed(sym);
		kmap = (int32_t)k;
		if (sym->kresolve) {
			maps[k].start = sym->ktext_start;
			maps[k].limit = UINT64_MAX;
		} else {
			maps[k].start = sym->n_ksyms ? kaddr(sym, 0) : 0;
			maps[k].limit = sym->n_ksyms ? kaddr(sym, sym->n_ksyms - 1) + 1 : UINT64_MAX;
		}
		maps[k].path = "[kernel.kallsyms]";
		maps[k].build_id = sym->kbuild_id[0] ? pf_prof_strdup(w, sym->kbuild_id) : NULL;
		k++;
	}
	for (size_t i = 0; i < n_pmaps; i++) {
		if (!idx[i]) {
			idx[i] = -1;
			continue;
		}
		struct pmap *m = &pm->maps[i];
		struct elf_file *f = mapping_elf(sym, pid, m);
		maps[k].start = m->start;
		maps[k].limit = m->end;
		maps[k].offset = m->offset;
		maps[k].path = pf_prof_strdup(w, m->path);
		if (f && f->build_id[0])
			maps[k].build_id = pf_prof_strdup(w, f->build_id);
		if (!maps[k].path)
			return -ENOMEM;
		idx[i] = (int32_t)k++;
	}
	p->mappings = maps;
	p->n_mappings = nm;
	if (have_kernel && sym->kresolve) {
		int rc = kernel_resolve_frames(sym, w, frames, n);
		if (rc == -ENOMEM)
			return rc;
		if (rc < 0) { /* the resolver broke: /proc/kallsyms from now on */
			sym->st.last_error = rc;
			pf_symbolizer_set_kernel_resolver(sym, NULL, NULL);
			kernel_load_timed(sym);
		}
	}

	if (pm)
		resolve_new(sym, pid, pm, frames, fm, n);
	for (size_t i = 0; i < n; i++) {
		struct pf_prof_frame *fr = &frames[i];
		fr->mapping = -1;
		if (fr->kind == PF_FRAME_KERNEL) {
			fr->mapping = kmap;
			if (fr->function) { /* named by the resolver */
				sym->st.frames_resolved++;
				continue;
			}
			const char *name = sym->n_ksyms ? kernel_find(sym, fr->address) : NULL;
			if (name) {
				fr->function = pf_prof_strdup(w, name);
				if (!fr->function)
					return -ENOMEM;
			}
		} else {
			if (fm[i] < 0)
				goto jit;
			struct pmap *m = &pm->maps[fm[i]];
			fr->mapping = idx[fm[i]];
			struct elf_file *f = mapping_elf(sym, pid, m);
			uint64_t vaddr;
			if (!f)
				goto jit;
			if (!elf_file_off_to_vaddr(f, fr->address - m->start + m->offset, &vaddr))
				vaddr = fr->address; /* non-PIE ET_EXEC without usable phdrs */
			const struct rcache_ent *r = rcache_lookup(sym, f, vaddr);
			if (!r || !r->function)
				goto unresolved;
			if (name_pair(w, r->function, r->readable, &fr->function, &fr->system_name) < 0)
				return -ENOMEM;
			fr->line = r->line;
			fr->file = r->file ? pf_prof_strdup(w, r->file) : NULL;
			if (r->file && !fr->file)
				return -ENOMEM;
			if (r->n_inl && frame_inlines(w, r, fr) < 0)
				return -ENOMEM;
		}
		if (fr->function) {
			sym->st.frames_resolved++;
			continue;
		}
		goto unresolved;
jit: { /* no file to read: anonymous code a runtime compiled, named by its perf map */
		const char *name = jit_name(sym, pid, pm, fr->address);
		if (name) {
			fr->function = pf_prof_strdup(w, name);
			if (!fr->function)
				return -ENOMEM;
			sym->st.jit_frames++;
			sym->st.frames_resolved++;
			continue;
		}
	}
unresolved:
		sym->st.frames_unresolved++;
	}
	return 0;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

struct pf_symbolizer *pf_symbolizer_new(const struct pf_symbolizer_options *opt)
{
	if (!libelf_ready()) {
		errno = ENOTSUP;
		return NULL;
	}
	struct pf_symbolizer *sym = calloc(1, sizeof(*sym));
	if (!sym)
		return NULL;
	if (opt)
		sym->opt = *opt;
	if (!sym->opt.max_elf_files)
		sym->opt.max_elf_files = DEFAULT_MAX_ELF;
	if (!sym->opt.max_processes)
		sym->opt.max_processes = DEFAULT_MAX_PROCS;
	sym->kernel_tried = sym->opt.no_kernel;
	sym->dm = pf_demangler_new(0, 0);
	if (!sym->dm) {
		free(sym);
		errno = ENOMEM;
		return NULL;
	}
	const struct pf_tbuilder_kind kind = {"pf-lines-build", pf_line_table_build_store, 0};
	sym->lb = pf_tbuilder_new(sym->opt.line_dir, &kind);
	sym->lres = malloc(sizeof(*sym->lres));
	if (!sym->lb || !sym->lres) {
		int e = !sym->lb ? errno : ENOMEM;
		pf_symbolizer_free(sym);
		errno = e;
		return NULL;
	}
	sym->opt.line_dir = NULL; /* the caller's string: the builder keeps its copy */
	int64_t left = pf_tbuilder_prune(pf_tbuilder_dir(sym->lb), ".lin", PF_SYM_LINE_DIR_MAX_BYTES);
	if (left >= 0)
		sym->lines_dir_bytes = (uint64_t)left;
	pf_tbuilder_budget_init(&sym->lb_budget, PF_SYM_LINE_BUILD_NS_PER_S,
				PF_SYM_LINE_BUILD_BURST_NS);
	return sym;
}

void pf_symbolizer_free(struct pf_symbolizer *sym)
{
	if (!sym)
		return;
	for (size_t b = 0; b < PROC_BUCKETS; b++) {
		struct proc_maps *pm = sym->procs[b];
		while (pm) {
			struct proc_maps *nx = pm->next;
			proc_maps_free(sym, pm);
			pm = nx;
		}
	}
	struct elf_file *f = sym->lru_head;
	while (f) {
		struct elf_file *nx = f->next;
		elf_file_free(f);
		f = nx;
	}
	free(sym->ksyms);
	free(sym->kcache);
	free(sym->knames);
	inames_clear(sym);
	free(sym->inames);
	rcache_clear(sym);
	free(sym->rcache);
	pf_demangler_free(sym->dm);
	pf_tbuilder_free(sym->lb);
	free(sym->lres);
	elf_file_free(sym->vdso);
	free(sym);
}

void pf_symbolizer_stats(const struct pf_symbolizer *sym, struct pf_symbolizer_stats *out)
{
	*out = sym->st;
	out->elf_cached = sym->n_elf;
	out->go_files = 0;
	for (const struct elf_file *f = sym->lru_head; f; f = f->next)
		out->go_files += f->go_syms;
	out->processes = sym->n_procs;
	struct pf_tbuilder_stats bs;
	pf_tbuilder_stats(sym->lb, &bs);
	out->line_build_max_rss_kb = bs.max_rss_kb;
	out->line_dir_bytes = sym->lines_dir_bytes;
	out->jit_bytes = sym->jit_bytes;
	for (const struct elf_file *f = sym->lru_head; f; f = f->next) {
		if (f->lt) {
			out->line_tables++;
			out->line_tables_bytes += pf_line_table_memory(f->lt);
		}
	}
	if (sym->dm) {
		struct pf_demangler_stats d;
		pf_demangler_stats(sym->dm, &d);
		out->demangle_lookups = d.lookups;
		out->demangle_hits = d.hits;
		out->demangle_failed = d.failed;
		out->demangle_cpu_ns = d.cpu_ns;
	}
}

uint32_t pf_symbolizer_helper_pid(const struct pf_symbolizer *sym)
{
	return (uint32_t)pf_tbuilder_child(sym->lb);
}

bool pf_symbolizer_lines_pending(struct pf_symbolizer *sym)
{
	lt_poll(sym);
	return pf_tbuilder_busy(sym->lb);
}

bool pf_symbolizer_lines_building(struct pf_symbolizer *sym)
{
	lt_poll(sym);
	return pf_tbuilder_child(sym->lb) != 0;
}
