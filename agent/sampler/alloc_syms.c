/* alloc_syms.c — see alloc_syms.h. */
#include "sampler/alloc_syms.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pf/compiler.h"
#include "sampler/bpf/cpu_sampler.h"
#include "symbolize/elf_read.h"

static const struct {
	const char *name;
	uint64_t kind;
} fns[PF_ALLOC_SYMS_MAX] = {
	{"malloc", PF_ALLOC_FN_MALLOC},
	{"calloc", PF_ALLOC_FN_CALLOC},
	{"realloc", PF_ALLOC_FN_REALLOC},
	{"free", PF_ALLOC_FN_FREE},
	{"posix_memalign", PF_ALLOC_FN_POSIX_ALIGN},
	{"aligned_alloc", PF_ALLOC_FN_ALIGNED},
	{"memalign", PF_ALLOC_FN_ALIGNED},
	{"valloc", PF_ALLOC_FN_MALLOC},
	{"pvalloc", PF_ALLOC_FN_MALLOC},
	{"cfree", PF_ALLOC_FN_FREE},
};

/* The file offset of ELF virtual address v, through the PT_LOAD segments: inside the file's
 * fsize bytes, or false. */
static bool vaddr_to_off(Elf *e, uint64_t fsize, uint64_t v, uint64_t *off)
{
	size_t n;
	if (elf_getphdrnum(e, &n) < 0)
		return false;
	for (size_t i = 0; i < n && i < 256; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		if (v >= ph.p_vaddr && v - ph.p_vaddr < ph.p_filesz) {
			*off = v - ph.p_vaddr + ph.p_offset;
			return *off >= ph.p_offset && *off < fsize; /* no wrap, inside the file */
		}
	}
	return false;
}

/* True when p starts with a push of a register (50+r, REX.B 41 50+r): an instruction the
 * kernel's x86 uprobes emulate. */
static bool is_push(const uint8_t *p)
{
	return (p[0] >= 0x50 && p[0] <= 0x57) || (p[0] == 0x41 && p[1] >= 0x50 && p[1] <= 0x57);
}

/* Where on the function at file offset off (kind) the probe goes: its entry, or past leading
 * instructions the kernel would have to single-step, when what they do cannot matter to the
 * probe and a push the kernel emulates follows. A single step is a second trap (on a VM it
 * made free's probe ~30x dearer than malloc's, bench/alloc_cost.c). x86_64 only; two glibc
 * prologues:
 *  - free: `test %rdi,%rdi; je` to its return: free(NULL) frees nothing;
 *  - posix_memalign, aligned_alloc, valloc...: `cmpb $imm8, rel32(%rip)` (a flag only the
 *    next instructions read). */
static uint64_t probe_point(int fd, uint64_t off, uint64_t kind)
{
#if defined(__x86_64__)
	uint8_t b[16];
	if (pread(fd, b, sizeof(b), (off_t)off) != (ssize_t)sizeof(b))
		return off;
	if (kind == PF_ALLOC_FN_FREE && b[0] == 0x48 && b[1] == 0x85 && b[2] == 0xff) {
		size_t n = b[3] == 0x74 ? 5 : b[3] == 0x0f && b[4] == 0x84 ? 9 : 0;
		if (n && is_push(b + n))
			return off + n;
	}
	if (b[0] == 0x80 && b[1] == 0x3d && is_push(b + 7))
		return off + 7;
#else
	(void)fd;
	(void)kind;
#endif
	return off;
}

/* The entry points defined in symbol table section scn. */
static void scan_table(Elf *e, int fd, uint64_t fsize, Elf_Scn *scn, struct pf_alloc_file *out,
		       bool *found)
{
	GElf_Shdr sh;
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!gelf_getshdr(scn, &sh) || !d || !sh.sh_entsize)
		return;
	/* the data's own size, not the header's claim; at most PF_ALLOC_SYMS_SCAN symbols */
	size_t n = d->d_size / sh.sh_entsize;
	if (n > PF_ALLOC_SYMS_SCAN)
		n = PF_ALLOC_SYMS_SCAN;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value ||
		    GELF_ST_TYPE(sym.st_info) != STT_FUNC) /* an IFUNC's address is its resolver */
			continue;
		const char *name = elf_strptr(e, sh.sh_link, sym.st_name);
		if (!name || !name[0])
			continue;
		for (size_t k = 0; k < PF_ALLOC_SYMS_MAX; k++) {
			if (found[k] || strcmp(name, fns[k].name) != 0)
				continue;
			found[k] = true;
			uint64_t off;
			if (!vaddr_to_off(e, fsize, sym.st_value, &off))
				break;
			off = probe_point(fd, off, fns[k].kind);
			bool dup = false;
			for (size_t j = 0; j < out->n; j++)
				dup |= out->off[j] == off;
			if (dup || out->n >= PF_ALLOC_SYMS_MAX)
				break;
			out->off[out->n] = off;
			out->kind[out->n] = fns[k].kind;
			out->name[out->n] = fns[k].name;
			out->n++;
			break;
		}
	}
}

int pf_alloc_syms_file(const char *path, struct pf_alloc_file *out, struct pf_error *err)
{
	out->n = 0;
	if (!pf_elf_ready())
		return pf_error_set(err, -ENOTSUP, "", "libelf unavailable");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pf_error_set(err, -errno, "", "open %s: %s", path, strerror(errno));
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		if (e)
			elf_end(e);
		close(fd);
		return pf_error_set(err, -EINVAL, "", "%s: not an ELF file", path);
	}
	size_t fsize = 0;
	if (!elf_rawfile(e, &fsize))
		fsize = 0;
	bool found[PF_ALLOC_SYMS_MAX] = {0};
	Elf_Scn *scn = NULL;
	/* .dynsym first (what calls bind to), then .symtab for a static program */
	for (int pass = 0; pass < 2; pass++) {
		scn = NULL;
		for (unsigned k = 0; k < PF_ALLOC_SECTIONS_MAX && (scn = elf_nextscn(e, scn)); k++) {
			GElf_Shdr sh;
			if (gelf_getshdr(scn, &sh) &&
			    sh.sh_type == (pass == 0 ? SHT_DYNSYM : SHT_SYMTAB))
				scan_table(e, fd, fsize, scn, out, found);
		}
	}
	bool has_malloc = false;
	for (size_t i = 0; i < out->n; i++)
		has_malloc |= out->name[i] == fns[0].name;
	if (!has_malloc)
		out->n = 0; /* no malloc of its own (or none the probes can reach): not an allocator */
	elf_end(e);
	close(fd);
	return 0;
}

static bool is_loader(const char *base)
{
	return strncmp(base, "ld-linux", 8) == 0 || strncmp(base, "ld-musl", 7) == 0 ||
	       strncmp(base, "ld64.so", 7) == 0;
}

int pf_alloc_syms_find(uint32_t pid, struct pf_alloc_file *out, size_t max, size_t *n,
		       struct pf_error *err)
{
	*n = 0;
	char p[64];
	snprintf(p, sizeof(p), "/proc/%u/maps", pid);
	FILE *f = fopen(p, "re");
	if (!f)
		return pf_error_set(err, errno == ENOENT ? -ESRCH : -errno, "", "%s: %s", p,
				    strerror(errno));
	char line[4096 + 256];
	char seen[16][4096 / 4];
	size_t n_seen = 0;
	int rc = 0;
	for (unsigned i = 0; i < PF_ALLOC_MAPS_LINES && fgets(line, sizeof(line), f); i++) {
		char perms[8] = "";
		int pos = -1;
		if (sscanf(line, "%*x-%*x %7s %*x %*x:%*x %*u %n", perms, &pos) < 1 || pos < 0 ||
		    perms[2] != 'x')
			continue;
		char *path = line + pos;
		path[strcspn(path, "\n")] = 0;
		if (path[0] != '/' || strlen(path) >= sizeof(seen[0]) ||
		    strstr(path, " (deleted)"))
			continue;
		bool dup = false;
		for (size_t k = 0; k < n_seen; k++)
			dup |= strcmp(seen[k], path) == 0;
		if (dup || n_seen >= PF_ARRAY_SIZE(seen))
			continue;
		memcpy(seen[n_seen++], path, strlen(path) + 1);
		const char *base = strrchr(path, '/') + 1;
		if (is_loader(base) || *n >= max)
			continue;
		struct pf_alloc_file *a = &out[*n];
		snprintf(a->path, sizeof(a->path), "/proc/%u/root%s", pid, path);
		a->base = strrchr(a->path, '/') + 1;
		struct pf_error e2 = {0};
		if (pf_alloc_syms_file(a->path, a, &e2) < 0)
			continue; /* unreadable: not probed (the others may be) */
		if (a->n)
			(*n)++;
	}
	if (ferror(f))
		rc = pf_error_set(err, -EIO, "", "read %s", p);
	fclose(f);
	return rc;
}
