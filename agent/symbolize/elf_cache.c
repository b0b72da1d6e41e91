/* elf_cache.c — see elf_cache.h. */
#include "symbolize/elf_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf/list.h"
#include "symbolize/elf_file.h"
#include "symbolize/proc_maps.h"
#include "symbolize/symbolize_int.h"
#include "symbolize/vdso.h"

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
	if (!pf_elf_ready() || !pf_vdso_image(&image, &len, &vaddr0))
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

static void lru_unlink(struct pf_symbolizer *sym, struct elf_file *f)
{
	PF_DLIST_UNLINK_T(sym->lru_head, sym->lru_tail, f, prev, next);
}

static void lru_push_front(struct pf_symbolizer *sym, struct elf_file *f)
{
	PF_DLIST_PUSH_FRONT_T(sym->lru_head, sym->lru_tail, f, prev, next);
}

struct elf_file *elf_cache_find(struct pf_symbolizer *sym, const char *build_id, uint64_t dev,
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
struct elf_file *elf_cache_insert(struct pf_symbolizer *sym, struct elf_file *f)
{
	if (f->build_id[0]) {
		struct elf_file *twin = elf_cache_find(sym, f->build_id, 0, 0);
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
struct elf_file *elf_cache_open(struct pf_symbolizer *sym, int fd)
{
	uint64_t t0 = sym_thread_cpu_ns();
	struct elf_file *f = elf_file_open(fd);
	uint64_t t1 = sym_thread_cpu_ns();
	sym->st.elf_load_cpu_ns += t1 > t0 ? t1 - t0 : 0;
	return f;
}

struct elf_file *elf_cache_mapping(struct pf_symbolizer *sym, uint32_t pid, struct pmap *m)
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
	f = elf_cache_find(sym, m->build_id, m->dev, m->ino);
	if (!f) {
		int fd = open_mapping_file(pid, m);
		if (fd < 0)
			return NULL;
		f = elf_cache_open(sym, fd);
		if (!f) {
			sym->st.last_error = -EINVAL;
			return NULL;
		}
		f = elf_cache_insert(sym, f);
		memcpy(m->build_id, f->build_id, sizeof(m->build_id));
	}
	m->elf = f;
	m->elf_gen = sym->elf_gen;
	return f;
}
