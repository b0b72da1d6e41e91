/* hotspot_proc.c — a HotSpot JVM in a mapped libjvm.so, read from the process (see
 * hotspot_proc.h). */
#include "hotspot_proc.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>

#include "elf_syms.h"

static const struct {
	const char *name;
	size_t off;
	bool layout;
} syms[] = {
#define PF_HS_SYM_ROW(m, s, l) {s, offsetof(struct pf_hs_file, m), l},
    PF_HS_SYMS(PF_HS_SYM_ROW)
#undef PF_HS_SYM_ROW
};
#define NSYMS (sizeof(syms) / sizeof(syms[0]))

bool pf_hs_file_name_ok(const char *path)
{
	const char *b = strrchr(path, '/');
	return !strcmp(b ? b + 1 : path, "libjvm.so");
}

static uint64_t *member(struct pf_hs_file *f, unsigned k)
{
	return (uint64_t *)((char *)f + syms[k].off);
}

static bool sym_seen(void *ctx, const char *name, const GElf_Sym *s)
{
	struct pf_hs_file *f = ctx;
	if (GELF_ST_TYPE(s->st_info) != STT_OBJECT || s->st_size != 8 ||
	    strncmp(name, "gHotSpotVM", 10))
		return true;
	for (unsigned k = 0; k < NSYMS; k++)
		if (!strcmp(name, syms[k].name))
			*member(f, k) = s->st_value;
	return true;
}

int pf_hs_file_read(int fd, struct pf_hs_file *out, char *why, unsigned why_len)
{
	memset(out, 0, sizeof(*out));
	if (why && why_len)
		why[0] = 0;
	Elf *elf = pf_elf_open(fd);
	if (!elf)
		return -EINVAL;
	pf_elf_each_sym(elf, SHT_DYNSYM, sym_seen, out);
	elf_end(elf);
	for (unsigned k = 0; k < NSYMS; k++) {
		if (*member(out, k))
			continue;
		if (why && why_len)
			snprintf(why, why_len, "libjvm.so exports no %s", syms[k].name);
		memset(out, 0, sizeof(*out));
		return -ENOTSUP;
	}
	return 0;
}

int pf_hs_proc_read(const struct pf_hs_file *f, uint64_t bias, pf_hs_read_fn rd, void *ctx,
		    struct pf_hs_vm *vm, char *why, unsigned why_len)
{
	memset(vm, 0, sizeof(*vm));
	if (why && why_len)
		why[0] = 0;
	struct pf_hs_file v; /* the variables' values, in the same order */
	for (unsigned k = 0; k < NSYMS; k++) {
		uint64_t at = *(const uint64_t *)((const char *)f + syms[k].off);
		int rc = rd(ctx, bias + at, member(&v, k), sizeof(uint64_t));
		if (rc < 0)
			return rc;
		if (syms[k].layout && *member(&v, k) > PF_HS_LAYOUT_MAX) {
			if (why && why_len)
				snprintf(why, why_len, "%s is %llu, past %u", syms[k].name,
					 (unsigned long long)*member(&v, k), PF_HS_LAYOUT_MAX);
			return -ENOTSUP;
		}
	}
	/* The name offsets are 0 (an entry's first member) in every JDK: only the table
	 * pointers and the strides tell a set layout from one not set yet. */
	if (!v.structs || !v.types || !v.s_stride || !v.t_stride || !v.consts || !v.c_stride)
		return -EAGAIN;
	struct pf_hs_layout l = {
	    .structs = v.structs,
	    .types = v.types,
	    .s_stride = (uint32_t)v.s_stride,
	    .s_type_name = (uint32_t)v.s_type_name,
	    .s_field_name = (uint32_t)v.s_field_name,
	    .s_is_static = (uint32_t)v.s_is_static,
	    .s_offset = (uint32_t)v.s_offset,
	    .s_address = (uint32_t)v.s_address,
	    .t_stride = (uint32_t)v.t_stride,
	    .t_type_name = (uint32_t)v.t_type_name,
	    .t_size = (uint32_t)v.t_size,
	    .consts = v.consts,
	    .c_stride = (uint32_t)v.c_stride,
	    .c_name = (uint32_t)v.c_name,
	    .c_value = (uint32_t)v.c_value,
	};
	char missing[PF_HS_MISSING_LEN];
	int rc = pf_hs_vm_parse(&l, rd, ctx, vm, missing, sizeof(missing));
	if (rc == -ENOTSUP || rc == -EINVAL || rc == -E2BIG) {
		if (why && why_len)
			snprintf(why, why_len, "VMStructs: %s%s",
				 rc == -ENOTSUP	  ? "no "
				 : rc == -EINVAL ? "an entry layout that does not fit its stride"
						 : "a table without its end",
				 rc == -ENOTSUP ? missing : "");
		return -ENOTSUP;
	}
	return rc;
}
