/* hotspot_vm.c — HotSpot's gHotSpotVMStructs / gHotSpotVMTypes tables to the offsets the Java
 * walk and naming use (hotspot_vm.h). Entries are read one at a time through the caller's
 * reader; a table ends at the first entry whose type name pointer is 0. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "hotspot_vm.h"

enum {
#define PF_HS_IDX(m, ...) PF_HS_I_##m,
	PF_HS_FIELDS(PF_HS_IDX) PF_HS_TYPES(PF_HS_IDX) PF_HS_CONSTS(PF_HS_IDX)
#undef PF_HS_IDX
	    PF_HS_N
};

struct hs_field {
	const char *type, *field;
	bool required;
	size_t off;
};

static const struct hs_field fields[] = {
#define PF_HS_F(m, t, f, r) {t, f, r, offsetof(struct pf_hs_vm, m)},
    PF_HS_FIELDS(PF_HS_F)
#undef PF_HS_F
};

static const struct hs_field types[] = {
#define PF_HS_T(m, t, r) {t, NULL, r, offsetof(struct pf_hs_vm, m)},
    PF_HS_TYPES(PF_HS_T)
#undef PF_HS_T
};

static const struct hs_field consts[] = {
#define PF_HS_C(m, n, r) {n, NULL, r, offsetof(struct pf_hs_vm, m)},
    PF_HS_CONSTS(PF_HS_C)
#undef PF_HS_C
};

/* Pairs of which one is needed (a is named when both are missing); with copy, b stands in
 * for a. */
static const struct {
	unsigned a, b;
	bool copy;
} either[] = {
    {PF_HS_I_blob_code_begin, PF_HS_I_blob_code_offset, false},
    {PF_HS_I_nm_method, PF_HS_I_cm_method, true},
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))
#define NTYPES (sizeof(types) / sizeof(types[0]))
#define NCONSTS (sizeof(consts) / sizeof(consts[0]))
_Static_assert(NFIELDS + NTYPES + NCONSTS <= 64, "present has a bit per item");

/* A NUL-terminated string at addr, at most PF_HS_NAME_MAX - 1 bytes (longer ones are cut and
 * then match no name we look for). Reads runs up to the end of their page; a run the reader
 * refuses (the string ends just before unreadable memory) is read again a byte at a time. */
int pf_hs_read_str(pf_hs_read_fn rd, void *ctx, uint64_t addr, char *buf)
{
	size_t n = 0;
	bool bytewise = false;
	while (n < PF_HS_NAME_MAX - 1) {
		size_t want = bytewise ? 1 : 4096 - ((addr + n) & 4095);
		if (want > PF_HS_NAME_MAX - 1 - n)
			want = PF_HS_NAME_MAX - 1 - n;
		int rc = rd(ctx, addr + n, buf + n, want);
		if (rc < 0 && !bytewise) {
			bytewise = true;
			continue;
		}
		if (rc < 0)
			return rc;
		void *z = memchr(buf + n, 0, want);
		if (z)
			return 0;
		n += want;
	}
	buf[n] = 0;
	return 0;
}

static int read_word(pf_hs_read_fn rd, void *ctx, uint64_t addr, uint64_t *v)
{
	return rd(ctx, addr, v, sizeof(*v));
}

static bool fits(uint32_t off, uint32_t width, uint32_t stride)
{
	return (uint64_t)off + width <= stride;
}

static void set(struct pf_hs_vm *out, const struct hs_field *f, unsigned idx, uint64_t v)
{
	memcpy((char *)out + f->off, &v, sizeof(v));
	out->present |= 1ull << idx;
}

static int parse_structs(const struct pf_hs_layout *l, pf_hs_read_fn rd, void *ctx,
			 struct pf_hs_vm *out)
{
	for (uint32_t i = 0; i < PF_HS_MAX_ENTRIES; i++) {
		uint64_t e = l->structs + (uint64_t)i * l->s_stride, tn, fn, v;
		int rc = read_word(rd, ctx, e + l->s_type_name, &tn);
		if (rc < 0)
			return rc;
		if (!tn)
			return 0;
		char type[PF_HS_NAME_MAX], field[PF_HS_NAME_MAX];
		if ((rc = pf_hs_read_str(rd, ctx, tn, type)) < 0)
			return rc;
		bool want = false;
		for (unsigned k = 0; k < NFIELDS && !want; k++)
			want = !strcmp(fields[k].type, type);
		if (!want)
			continue;
		if ((rc = read_word(rd, ctx, e + l->s_field_name, &fn)) < 0 || !fn)
			return rc < 0 ? rc : -EINVAL;
		if ((rc = pf_hs_read_str(rd, ctx, fn, field)) < 0)
			return rc;
		int32_t is_static;
		if ((rc = rd(ctx, e + l->s_is_static, &is_static, sizeof(is_static))) < 0)
			return rc;
		rc = read_word(rd, ctx, e + (is_static ? l->s_address : l->s_offset), &v);
		if (rc < 0)
			return rc;
		for (unsigned k = 0; k < NFIELDS; k++)
			if (!strcmp(fields[k].type, type) && !strcmp(fields[k].field, field))
				set(out, &fields[k], k, v);
	}
	return -E2BIG;
}

/* A table of (name, value) entries, VMTypes (sizes, 8 bytes) or VMIntConstants (4 bytes):
 * the value of each of items[0, n) found, present bit first_bit + k. */
static int parse_named(uint64_t table, uint32_t stride, uint32_t name_off, uint32_t value_off,
		       size_t width, const struct hs_field *items, unsigned n, unsigned first_bit,
		       pf_hs_read_fn rd, void *ctx, struct pf_hs_vm *out)
{
	for (uint32_t i = 0; i < PF_HS_MAX_ENTRIES; i++) {
		uint64_t e = table + (uint64_t)i * stride, nm;
		int rc = read_word(rd, ctx, e + name_off, &nm);
		if (rc < 0)
			return rc;
		if (!nm)
			return 0;
		char name[PF_HS_NAME_MAX];
		if ((rc = pf_hs_read_str(rd, ctx, nm, name)) < 0)
			return rc;
		for (unsigned k = 0; k < n; k++) {
			if (strcmp(items[k].type, name))
				continue;
			if ((rc = rd(ctx, e + value_off, (char *)out + items[k].off, width)) < 0)
				return rc;
			out->present |= 1ull << (first_bit + k);
		}
	}
	return -E2BIG;
}

static void name_missing(char *missing, size_t len, const struct hs_field *f)
{
	if (!missing || !len)
		return;
	if (f->field)
		snprintf(missing, len, "%s::%s", f->type, f->field);
	else
		snprintf(missing, len, "%s", f->type);
}

int pf_hs_vm_parse(const struct pf_hs_layout *l, pf_hs_read_fn rd, void *ctx, struct pf_hs_vm *out,
		   char *missing, size_t missing_len)
{
	memset(out, 0, sizeof(*out));
	if (missing && missing_len)
		missing[0] = 0;
	if (!l->s_stride || !l->t_stride || !fits(l->s_type_name, 8, l->s_stride) ||
	    !fits(l->s_field_name, 8, l->s_stride) || !fits(l->s_is_static, 4, l->s_stride) ||
	    !fits(l->s_offset, 8, l->s_stride) || !fits(l->s_address, 8, l->s_stride) ||
	    !fits(l->t_type_name, 8, l->t_stride) || !fits(l->t_size, 8, l->t_stride) ||
	    (l->consts && (!fits(l->c_name, 8, l->c_stride) || !fits(l->c_value, 4, l->c_stride))))
		return -EINVAL;
	int rc = parse_structs(l, rd, ctx, out);
	if (rc == 0)
		rc = parse_named(l->types, l->t_stride, l->t_type_name, l->t_size, 8, types, NTYPES,
				 NFIELDS, rd, ctx, out);
	if (rc == 0 && l->consts)
		rc = parse_named(l->consts, l->c_stride, l->c_name, l->c_value, sizeof(int32_t),
				 consts, NCONSTS, NFIELDS + NTYPES, rd, ctx, out);
	for (unsigned k = 0; rc == 0 && k < NFIELDS + NTYPES + NCONSTS; k++) {
		const struct hs_field *f = k < NFIELDS		  ? &fields[k]
					   : k < NFIELDS + NTYPES ? &types[k - NFIELDS]
								  : &consts[k - NFIELDS - NTYPES];
		if (f->required && !(out->present & (1ull << k))) {
			name_missing(missing, missing_len, f);
			rc = -ENOTSUP;
		}
	}
	for (unsigned k = 0; rc == 0 && k < sizeof(either) / sizeof(either[0]); k++) {
		uint64_t a = 1ull << either[k].a, b = 1ull << either[k].b;
		if (!(out->present & (a | b))) {
			name_missing(missing, missing_len, &fields[either[k].a]);
			rc = -ENOTSUP;
		} else if (either[k].copy && !(out->present & a)) {
			set(out, &fields[either[k].a], either[k].a,
			    *(const uint64_t *)((const char *)out + fields[either[k].b].off));
		}
	}
	if (rc < 0)
		memset(out, 0, sizeof(*out));
	return rc;
}

uint64_t pf_hs_vm_scopes(const struct pf_hs_vm *vm)
{
	static const unsigned need[] = {PF_HS_I_nm_scopes_pcs, PF_HS_I_nm_dependencies,
					PF_HS_I_nm_metadata,   PF_HS_I_pcdesc_pc,
					PF_HS_I_pcdesc_scope,  PF_HS_I_size_pcdesc};
	for (unsigned k = 0; k < sizeof(need) / sizeof(need[0]); k++)
		if (!(vm->present & (1ull << need[k])))
			return 0;
	if (vm->size_pcdesc < 8 || vm->size_pcdesc > 64 || vm->pcdesc_pc + 4 > vm->size_pcdesc ||
	    vm->pcdesc_scope + 4 > vm->size_pcdesc)
		return 0;
	if (vm->present & (1ull << PF_HS_I_nm_scopes_data))
		return vm->nm_scopes_data;
	return vm->present & (1ull << PF_HS_I_cm_scopes_data) ? vm->cm_scopes_data : 0;
}

bool pf_hs_vm_walkable(const struct pf_hs_vm *vm)
{
	static const unsigned need[] = {PF_HS_I_vspace_low_bound,    PF_HS_I_vspace_high_bound,
					PF_HS_I_blob_frame_complete, PF_HS_I_interp_code,
					PF_HS_I_stubq_buffer,	     PF_HS_I_stubq_limit,
					PF_HS_I_c_fr_sender_sp,	     PF_HS_I_c_fr_last_sp};
	for (unsigned k = 0; k < sizeof(need) / sizeof(need[0]); k++)
		if (!(vm->present & (1ull << need[k])))
			return false;
	return true;
}
