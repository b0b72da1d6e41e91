/* v8_meta.c — V8's postmortem constants from an ELF file (see v8_meta.h). */
#include "v8_meta.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "elf_syms.h"

#define PREFIX "v8dbg_"
#define PREFIX_LEN (sizeof(PREFIX) - 1)

enum {
#define PF_V8_META_ENUM(field, name, required) F_##field,
	PF_V8_META_FIELDS(PF_V8_META_ENUM)
#undef PF_V8_META_ENUM
	    F_COUNT
};
_Static_assert(F_COUNT <= 64, "present is a 64-bit mask");

static const struct {
	const char *name;
	bool required;
	size_t off;
} fields[F_COUNT] = {
#define PF_V8_META_ROW(field, n, req) [F_##field] = {n, req, offsetof(struct pf_v8_meta, field)},
    PF_V8_META_FIELDS(PF_V8_META_ROW)
#undef PF_V8_META_ROW
};

static int field_of(const char *name)
{
	for (int k = 0; k < F_COUNT; k++)
		if (strcmp(name, fields[k].name) == 0)
			return k;
	return -1;
}

struct scan {
	Elf *elf;
	struct pf_v8_meta *out;
};

static bool sym_wanted(void *ctx, const char *name, const GElf_Sym *s)
{
	struct scan *sc = ctx;
	struct pf_v8_meta *out = sc->out;
	if (strncmp(name, PREFIX, PREFIX_LEN) != 0 || s->st_shndx >= SHN_LORESERVE)
		return true;
	int k = field_of(name + PREFIX_LEN);
	int32_t v;
	if (k < 0 || (out->present >> k & 1) || pf_elf_sym_i32(sc->elf, s, &v) < 0)
		return true;
	*(int32_t *)((char *)out + fields[k].off) = v;
	out->present |= 1ull << k;
	return true;
}

static int missing_is(char *missing, unsigned len, const char *what)
{
	if (missing && len)
		snprintf(missing, len, "%s", what);
	return -ENOTSUP;
}

/* The layout the kernel's walk and the naming assume. */
static int check(const struct pf_v8_meta *m, char *missing, unsigned len)
{
	if (m->pointer_size != 8 || m->tagged_size != 8)
		return missing_is(missing, len, "64-bit tagged values (pointer compression)");
	if (m->heap_object_tag_mask != 3 || m->heap_object_tag != 1 || m->smi_tag != 0 ||
	    m->smi_tag_mask != 1 || m->smi_tag_size != 1 || m->smi_shift_size < 0 ||
	    m->smi_shift_size > 31)
		return missing_is(missing, len, "the pointer tagging");
	const int32_t slots[] = {m->fp_function, m->fp_context, m->fp_marker, m->fp_bytecode_array,
				 m->fp_bytecode_offset};
	for (unsigned i = 0; i < sizeof(slots) / sizeof(slots[0]); i++)
		if (slots[i] >= 0 || slots[i] < -128 || slots[i] % 8)
			return missing_is(missing, len, "the frame slots");
	const int32_t offs[] = {m->map,		  m->map_instance_type, m->fn_shared,
				m->sfi_name,	  m->sfi_script,	m->script_name,
				m->string_length, m->seq_one_chars,	m->seq_two_chars,
				m->cons_first,	  m->cons_second};
	for (unsigned i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		if (offs[i] < 0 || offs[i] > 4096)
			return missing_is(missing, len, "the object layout");
	return 0;
}

int pf_v8_meta_read(int fd, struct pf_v8_meta *out, char *missing, unsigned missing_len)
{
	memset(out, 0, sizeof(*out));
	if (missing && missing_len)
		missing[0] = 0;
	Elf *elf = pf_elf_open(fd);
	if (!elf)
		return -EINVAL;
	int rc = 0;
	/* Node exports them in .dynsym (they are globals of the engine); a static .symtab is a
	 * fallback for a build that does not */
	struct scan sc = {elf, out};
	pf_elf_each_sym(elf, SHT_DYNSYM, sym_wanted, &sc);
	if (!out->present)
		pf_elf_each_sym(elf, SHT_SYMTAB, sym_wanted, &sc);
	for (int k = 0; k < F_COUNT; k++) {
		if (fields[k].required && !(out->present >> k & 1)) {
			char what[PF_V8_META_MISSING_LEN];
			snprintf(what, sizeof(what), PREFIX "%s", fields[k].name);
			rc = out->present
				 ? missing_is(missing, missing_len, what)
				 : missing_is(missing, missing_len, "no " PREFIX " symbols");
			goto out;
		}
	}
	rc = check(out, missing, missing_len);
out:
	elf_end(elf);
	return rc;
}

bool pf_v8_meta_get(const struct pf_v8_meta *m, const char *name, int32_t *v)
{
	int k = field_of(name);
	if (k < 0 || !(m->present >> k & 1))
		return false;
	*v = *(const int32_t *)((const char *)m + fields[k].off);
	return true;
}
