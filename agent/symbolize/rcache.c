/* rcache.c — see rcache.h. */
#include "symbolize/rcache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pf/utf8.h"
#include "symbolize/demangle.h"
#include "symbolize/elf_file.h"
#include "symbolize/elf_lines.h"
#include "symbolize/symbolize_int.h"

#define RCACHE_SLOTS 16384          /* resolved (file, address) results kept across windows */
#define RCACHE_NAMES_MAX (1u << 20) /* bytes of interned source file names before a reset */

struct iname {
	struct iname *next;
	char s[];
};

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

const char *rcache_intern(struct pf_symbolizer *sym, const char *s)
{
	return intern_clean(sym, s, strlen(s));
}

/* The name shown for ELF symbol s: its own when it is clean (in the file's image), else
 * without its version suffix ("@@GLIBC_2.34") and cleaned, interned. NULL: no memory. */
static const char *sym_name(struct pf_symbolizer *sym, const struct elf_sym *s)
{
	size_t len = elf_sym_base_len(s->name);
	return !s->name[len] && pf_utf8_clean(s->name, len) ? s->name
							    : intern_clean(sym, s->name, len);
}

/* The demangled form of name, interned (*out NULL when name reads as it is). 0 or -ENOMEM. */
static int readable_name(struct pf_symbolizer *sym, const char *name, const char **out)
{
	*out = NULL;
	const char *r = name ? pf_demangle(sym->dm, name) : NULL;
	if (r && !(*out = rcache_intern(sym, r)))
		return -ENOMEM;
	return 0;
}

bool rcache_ready(struct pf_symbolizer *sym)
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
const struct rcache_ent *rcache_lookup(struct pf_symbolizer *sym, struct elf_file *f,
				       uint64_t vaddr)
{
	if (!rcache_ready(sym))
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
		elf_lines_find(sym, f, vaddr, &file, &line, raw, &n_inl, &partial);
	if (file && !(file = rcache_intern(sym, file)))
		return NULL;
	struct rc_inline *inl = n_inl ? calloc(n_inl, sizeof(*inl)) : NULL;
	if (n_inl && !inl)
		return NULL;
	for (size_t i = 0; i < n_inl; i++) {
		inl[i].line = raw[i].line;
		if ((raw[i].name && !(inl[i].name = rcache_intern(sym, raw[i].name))) ||
		    (raw[i].file && !(inl[i].file = rcache_intern(sym, raw[i].file))) ||
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

/* True when (f, vaddr) is in the resolved-address cache (nothing moves). */
bool rcache_has(const struct pf_symbolizer *sym, const struct elf_file *f, uint64_t vaddr)
{
	if (!sym->rcache)
		return false;
	const struct rcache_ent *e =
		&sym->rcache[(rc_hash(f->id, vaddr) & (RCACHE_SLOTS / 2 - 1)) * 2];
	return (e[0].file_id == f->id && e[0].vaddr == vaddr) ||
	       (e[1].file_id == f->id && e[1].vaddr == vaddr);
}

void rcache_free(struct pf_symbolizer *sym)
{
	inames_clear(sym);
	free(sym->inames);
	rcache_clear(sym);
	free(sym->rcache);
}
