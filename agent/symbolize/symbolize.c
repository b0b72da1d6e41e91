/* symbolize.c — see symbolize.h; the parts it is made of are listed in symbolize_int.h. */
#include "symbolize/symbolize.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pf/compiler.h"
#include "symbolize/demangle.h"
#include "symbolize/elf_cache.h"
#include "symbolize/elf_file.h"
#include "symbolize/elf_lines.h"
#include "symbolize/kernel_syms.h"
#include "symbolize/line_table.h"
#include "symbolize/perf_map.h"
#include "symbolize/proc_maps.h"
#include "symbolize/rcache.h"
#include "symbolize/symbolize_int.h"
#include "unwind/table_builder.h"

#define DEFAULT_MAX_ELF 128
#define DEFAULT_MAX_PROCS 4096

/* ---- processes ---------------------------------------------------------------------------- */

static void proc_maps_free(struct pf_symbolizer *sym, struct proc_maps *pm)
{
	if (!pm)
		return;
	if (pm->jit) {
		sym->jit_bytes -= pf_perf_map_bytes(pm->jit);
		sym->st.jit_maps--;
		pf_perf_map_free(pm->jit);
	}
	pmap_free_all(pm->maps, pm->n);
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

int pf_symbolizer_capture(struct pf_symbolizer *sym, uint32_t pid)
{
	struct pmap *maps = NULL;
	size_t n = 0;
	int rc = pmap_read_all(pid, &maps, &n);
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
			pmap_free_all(maps, n);
			return -ENOMEM;
		}
		pm->pid = pid;
		*pp = pm;
		sym->n_procs++;
	} else {
		pmap_free_all(pm->maps, pm->n);
	}
	pm->maps = maps;
	pm->n = n;
	pm->stamp = ++sym->stamp;
	/* Open every file now, while the process (and its mount namespace) is there. */
	for (size_t i = 0; i < n; i++) {
		struct elf_file *f = elf_cache_mapping(sym, pid, &maps[i]);
		if (f)
			elf_lines_request(sym, f);
	}
	return 0;
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
		struct elf_file *f = elf_cache_mapping(sym, pid, m);
		uint64_t vaddr;
		if (f && elf_file_exec_off_to_vaddr(f, m->offset, &vaddr)) {
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
	if (elf_cache_find(sym, NULL, stt.st_dev, stt.st_ino))
		return 0;
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct elf_file *f = elf_cache_open(sym, fd);
	if (!f)
		return -EINVAL;
	elf_cache_insert(sym, f);
	return 0;
}

void pf_symbolizer_trim(struct pf_symbolizer *sym)
{
	sym->window++;
	elf_lines_poll(sym);
	for (struct elf_file *f = sym->lru_head; f; f = f->next)
		elf_file_release_touched(f);
}

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
		if (fm[i] < 0 || !(f = elf_cache_mapping(sym, pid, m = &pm->maps[fm[i]])))
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
		struct elf_file *f = elf_cache_mapping(sym, pid, &pm->maps[v[i].pmap]);
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
	elf_lines_poll(sym);
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
			ksyms_info(sym);
		else
			ksyms_load(sym);
		kmap = (int32_t)k;
		if (sym->kresolve) {
			maps[k].start = sym->ktext_start;
			maps[k].limit = UINT64_MAX;
		} else {
			maps[k].start = sym->n_ksyms ? ksyms_addr(sym, 0) : 0;
			maps[k].limit =
			    sym->n_ksyms ? ksyms_addr(sym, sym->n_ksyms - 1) + 1 : UINT64_MAX;
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
		struct elf_file *f = elf_cache_mapping(sym, pid, m);
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
		int rc = ksyms_resolve_frames(sym, w, frames, n);
		if (rc == -ENOMEM)
			return rc;
		if (rc < 0) { /* the resolver broke: /proc/kallsyms from now on */
			sym->st.last_error = rc;
			pf_symbolizer_set_kernel_resolver(sym, NULL, NULL);
			ksyms_load(sym);
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
			const char *name = sym->n_ksyms ? ksyms_find(sym, fr->address) : NULL;
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
			struct elf_file *f = elf_cache_mapping(sym, pid, m);
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
			if (f->go || f->go_syms)
				fr->kind = PF_FRAME_GO;
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
	if (!pf_elf_ready()) {
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
	rcache_free(sym);
	pf_demangler_free(sym->dm);
	pf_tbuilder_free(sym->lb);
	free(sym->lres);
	elf_file_free(sym->vdso);
	free(sym);
}

uint64_t pf_symbolizer_load_cpu_ns(const struct pf_symbolizer *sym)
{
	return sym->st.elf_load_cpu_ns + sym->st.kernel_load_cpu_ns;
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
	elf_lines_poll(sym);
	return pf_tbuilder_busy(sym->lb);
}

bool pf_symbolizer_lines_building(struct pf_symbolizer *sym)
{
	elf_lines_poll(sym);
	return pf_tbuilder_child(sym->lb) != 0;
}
