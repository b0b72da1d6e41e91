/* kernel_syms.c — see kernel_syms.h. */
#include "symbolize/kernel_syms.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pf/array.h"
#include "pf/compiler.h"
#include "symbolize/proc_maps.h"
#include "symbolize/rcache.h"
#include "symbolize/sorted_find.h"
#include "symbolize/symbolize_int.h"

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;
	return x->addr_off < y->addr_off ? -1 : x->addr_off > y->addr_off;
}

/* Kernel text and modules lie within a few GB (x86-64: 2 GB; arm64: 4 GB with module PLTs),
 * so addresses are stored as 32-bit offsets from the lowest one. Symbols beyond base + 4 GB
 * (none on those arches) are dropped. */
uint64_t ksyms_addr(const struct pf_symbolizer *sym, size_t i)
{
	return sym->kbase + sym->ksyms[i].addr_off;
}

/* The running kernel's GNU build id, from /sys/kernel/notes. */
static void kernel_build_id(struct pf_symbolizer *sym)
{
	int nfd = open("/sys/kernel/notes", O_RDONLY | O_CLOEXEC);
	if (nfd >= 0) {
		uint8_t buf[4096];
		ssize_t r = read(nfd, buf, sizeof(buf));
		if (r > 0 &&
		    pf_elf_notes_build_id(buf, (size_t)r, sym->kbuild_id, sizeof(sym->kbuild_id)))
			sym->kbuild_id[0] = 0;
		close(nfd);
	}
}

/* One line of /proc/kallsyms, "address type name [module]": true for a text symbol ('t' or
 * 'T') with a non-zero address and a name (name, len: the name, not NUL-terminated). The hex
 * is parsed by hand: strtoull's locale handling was half the load time. */
static bool kallsyms_text_line(const char *line, uint64_t *addr, const char **name, size_t *len)
{
	const char *c = line;
	uint64_t a;
	if (!pmap_hex_field(&c, &a, ' ') || (c[0] != 't' && c[0] != 'T') || c[1] != ' ')
		return false;
	*name = c + 2;
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
		ok = PF_ARRAY_GROW(raw, cap, n + 1, 65536) == 0 &&
		     PF_ARRAY_GROW(names, ncap, nlen + len + 1, (size_t)1 << 20) == 0;
		if (!ok)
			break;
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

/* kernel_load(), timed for the stats (most of it is the kernel formatting kallsyms). */
void ksyms_load(struct pf_symbolizer *sym)
{
	if (sym->kernel_tried)
		return;
	uint64_t t0 = sym_thread_cpu_ns();
	kernel_load(sym);
	sym->st.kernel_load_cpu_ns = sym_thread_cpu_ns() - t0;
}

int pf_symbolizer_load_kernel(struct pf_symbolizer *sym)
{
	ksyms_load(sym);
	return sym->n_ksyms ? 0 : (sym->st.last_error ? sym->st.last_error : -ENOENT);
}

const char *ksyms_find(struct pf_symbolizer *sym, uint64_t addr)
{
	if (addr < sym->kbase || addr - sym->kbase > UINT32_MAX)
		return NULL;
	uint32_t off = (uint32_t)(addr - sym->kbase);
	size_t lo = PF_COUNT_AT_OR_BELOW(sym->ksyms, sym->n_ksyms, .addr_off, off);
	return lo ? sym->knames + sym->ksyms[lo - 1].name_off : NULL;
}

void pf_symbolizer_set_kernel_resolver(struct pf_symbolizer *sym, pf_kernel_resolve_fn fn,
				       void *ctx)
{
	sym->kresolve = sym->opt.no_kernel ? NULL : fn;
	sym->kresolve_ctx = ctx;
	sym->st.kernel_resolver = sym->kresolve != NULL;
}

/* Resolver mode: the kernel build id, and the start of kernel text for the mapping from the
 * first lines of /proc/kallsyms (a 4 KiB read: the kernel formats only what is read). */
void ksyms_info(struct pf_symbolizer *sym)
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
	const char *n = rcache_intern(sym, text);
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
	uint64_t t0 = sym_thread_cpu_ns();
	int rc = sym->kresolve(sym->kresolve_ctx, b->addrs, b->n, b->text);
	sym->st.kernel_resolve_cpu_ns += sym_thread_cpu_ns() - t0;
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
	/* after every rcache_intern(): one of them may have reset the caches */
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
int ksyms_resolve_frames(struct pf_symbolizer *sym, struct pf_prof_window *w,
			 struct pf_prof_frame *frames, size_t n)
{
	if (!rcache_ready(sym))
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
