/* elf_lines.c — see elf_lines.h. */
#include "symbolize/elf_lines.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pf/log.h"
#include "symbolize/elf_file.h"
#include "symbolize/line_table.h"
#include "symbolize/symbolize_int.h"

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
void elf_lines_poll(struct pf_symbolizer *sym)
{
	pf_tbuilder_tick(sym->lb, &sym->lb_budget, lt_done, sym, &sym->st.line_build_cpu_ns,
			 &sym->st.last_error);
}

/* True when the ELF file at fd has DWARF sections. Read through a handle of its own that
 * preads the section headers and their names into the heap (freed at once): through the
 * cached handle's mapping, fault-around would map 16 pages around each page read, 5 MB
 * at a start for the few dozen files of the processes first seen. */
static bool fd_has_dwarf(int fd)
{
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	bool has = e && elf_kind(e) == ELF_K_ELF && pf_elf_has_dwarf(e);
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
void elf_lines_request(struct pf_symbolizer *sym, struct elf_file *f)
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
	elf_lines_poll(sym);
}

/* Source line and inlined functions of vaddr from f's table; *partial when the table is not
 * there yet (asked for now, or hurried when already queued). */
void elf_lines_find(struct pf_symbolizer *sym, struct elf_file *f, uint64_t vaddr,
		    const char **file, uint32_t *line, struct inl_raw *inl, size_t *n_inl,
		    bool *partial)
{
	*file = NULL;
	*line = 0;
	*n_inl = 0;
	if (f->lt_state == LT_UNKNOWN)
		elf_lines_request(sym, f);
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
