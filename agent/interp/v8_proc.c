/* v8_proc.c — V8 in a mapped file (see v8_proc.h). */
#include "v8_proc.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>

#include "elf_syms.h"

bool pf_v8_file_name_ok(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return !strcmp(b, "node") || !strcmp(b, "nodejs") || !strncmp(b, "libnode.so", 10);
}

struct scan {
	Elf *elf;
	struct pf_v8_file *out;
};

static bool sym_seen(void *ctx, const char *name, const GElf_Sym *s)
{
	struct scan *sc = ctx;
	struct pf_v8_file *f = sc->out;
	if (GELF_ST_TYPE(s->st_info) == STT_FUNC && !strncmp(name, "Builtins_", 9)) {
		if (!f->builtins_start || s->st_value < f->builtins_start)
			f->builtins_start = s->st_value;
		if (s->st_value + s->st_size > f->builtins_end)
			f->builtins_end = s->st_value + s->st_size;
		return true;
	}
	static const char *const ver[3] = {"_ZN2v88internal7Version6major_E",
					   "_ZN2v88internal7Version6minor_E",
					   "_ZN2v88internal7Version6build_E"};
	int *dst[3] = {&f->major, &f->minor, &f->build};
	for (int k = 0; k < 3; k++) {
		int32_t v;
		if (!strcmp(name, ver[k]) && pf_elf_sym_i32(sc->elf, s, &v) == 0 && v >= 0)
			*dst[k] = v;
	}
	return true;
}

int pf_v8_file_read(int fd, struct pf_v8_file *out, char *why, unsigned why_len)
{
	memset(out, 0, sizeof(*out));
	out->major = out->minor = out->build = -1;
	int rc = pf_v8_meta_read(fd, &out->meta, why, why_len);
	if (rc < 0)
		return rc;
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return -EINVAL;
	struct scan sc = {elf, out};
	pf_elf_each_sym(elf, SHT_SYMTAB, sym_seen, &sc);
	elf_end(elf);
	/* a span of more than 64 MiB is no builtins blob (a symbol of that prefix elsewhere) */
	if (out->builtins_end <= out->builtins_start ||
	    out->builtins_end - out->builtins_start > (64u << 20))
		out->builtins_start = out->builtins_end = 0;
	return 0;
}

bool pf_v8_file_scope_info_ok(const struct pf_v8_file *f)
{
	int32_t fv, nl, t;
	return f->major == 11 && pf_v8_meta_get(&f->meta, "scopeinfo_idx_first_vars", &fv) &&
	       pf_v8_meta_get(&f->meta, "scopeinfo_idx_ncontextlocals", &nl) &&
	       pf_v8_meta_get(&f->meta, "type_ScopeInfo__SCOPE_INFO_TYPE", &t) && fv > 0 &&
	       fv < 16 && nl > 0 && nl < fv;
}
