/* profcfg_int.h — the key table of the profiling config, shared by the files that walk it.
 * Not for use outside common/src.
 *
 * profcfg.c owns the table (profcfg_keys[]: every key's path pattern, type, default, range,
 * allowed values, place in struct pf_profcfg and doc text), defaults, freeing and equality;
 * profcfg_parse.c reads YAML into the struct; profcfg_emit.c writes the effective config
 * back as YAML; profcfg_doc.c writes the Markdown key reference. Each of them walks the same
 * table through the accessors below, so a key is added in one place. */
#ifndef PF_PROFCFG_INT_H
#define PF_PROFCFG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pf/buf.h"
#include "pf/compiler.h"
#include "pf/error.h"
#include "pf/profcfg.h"

#define MAX_STR 4096 /* every string value and map key */
#define MAX_PATH 256 /* concrete key paths, as in struct pf_error */

enum key_type { K_SECTION, K_BOOL, K_U32, K_U64, K_DOUBLE, K_STRING, K_ENUM, K_LIST, K_MAP };

#define F_REQUIRED 1u /* must be present (in a list item, when it applies) */
/* An item enum selecting which sibling keys apply. Only exporters[].type uses it, so messages
 * and docs name its values with exporter_names. */
#define F_DISCRIM 2u
/* A K_SECTION whose presence is recorded: off is a bool set when the document has the section
 * (even empty or null); it is compared, and emitted only when set. exporters[].tls uses it. */
#define F_PRESENT 4u
/* A K_MAP whose values are secrets (credentials in request headers): the redacting emit
 * (pf_profcfg_emit_yaml_redacted) writes PF_PROFCFG_REDACTED instead of each value. */
#define F_SECRET 8u

/* A string value's extra check: 0, or -1 with why filled. */
typedef int (*str_check_fn)(const char *s, char *why, size_t n);
/* A list item's cross-key check, after all its keys are read. */
typedef int (*item_check_fn)(const void *item, const char *path, struct pf_error *err);

struct key_desc {
	const char *path; /* pattern; "a.b[]" is an item of list a.b */
	enum key_type type;
	unsigned flags;
	size_t off;	  /* into struct pf_profcfg, or into the list element for item keys */
	size_t count_off; /* K_LIST, K_MAP: the size_t count next to the array */
	size_t elem_size; /* K_LIST */
	size_t max_items; /* K_LIST, K_MAP */
	uint64_t def_u;	  /* K_BOOL, K_U32, K_U64, K_ENUM */
	const char *def_s; /* K_STRING default, NULL = unset */
	uint64_t min_u, max_u;
	double def_d, min_d, max_d;
	const char *const *names; /* K_ENUM values; K_STRING allowed set (NULL = any) */
	size_t n_names;
	uint32_t applies; /* item keys: bit mask of discriminator values; 0 = always */
	str_check_fn check;
	const char *check_desc; /* what check wants, for "required" messages */
	item_check_fn item_check;
	const char *doc;
};

extern const struct key_desc profcfg_keys[];
extern const size_t profcfg_n_keys;
/* At least profcfg_n_keys (checked where the table is): the parser's per-section "seen"
 * arrays, indexed like the table, are this long. */
#define PROFCFG_MAX_KEYS 256

/* The last segment of k's path when k is a direct child of container pattern `parent`
 * ("" is the document root, "a.b[]" the items of list a.b), else NULL. */
const char *profcfg_child_name(const struct key_desc *k, const char *parent);
/* The discriminator value of a list item (exporters[].type), or -1 when it has none. */
int profcfg_item_discrim(const char *ipattern, const void *item);
/* Defaults of every scalar key under container `pattern` (sections recursively; lists and
 * maps start empty). 0 or -ENOMEM. */
int profcfg_fill_defaults(const char *pattern, void *base);
/* s (n bytes) is name, or has name's prefix when name ends in '*'. */
bool profcfg_name_matches(const char *name, const char *s, size_t n);
/* names[0, count) as "a, b, c" into buf (cut at n bytes). */
void profcfg_names_list(char *buf, size_t n, const char *const *names, size_t count);

/* Output with a sticky error: after the first failure every call is a no-op and the caller
 * looks at o->err once at the end. */
struct profcfg_out {
	struct pf_buf *b;
	int err;
	bool redact; /* F_SECRET values written as PF_PROFCFG_REDACTED */
};

void profcfg_out_printf(struct profcfg_out *o, const char *fmt, ...) PF_PRINTF(2, 3);
/* A double as the shortest decimal that reads back the same, always with a '.' or exponent. */
void profcfg_out_double(struct profcfg_out *o, double d);

static inline void item_pattern(char *buf, size_t n, const struct key_desc *k)
{
	snprintf(buf, n, "%s[]", k->path);
}

/* Typed access to struct fields by offset; memcpy keeps it free of aliasing games. */
static inline void *fld(const void *base, const struct key_desc *k)
{
	return (char *)base + k->off;
}

static inline void *get_ptr(const void *base, size_t off)
{
	void *p;
	memcpy(&p, (const char *)base + off, sizeof(p));
	return p;
}

static inline void set_ptr(void *base, size_t off, void *p)
{
	memcpy((char *)base + off, &p, sizeof(p));
}

static inline size_t get_count(const void *base, const struct key_desc *k)
{
	size_t n;
	memcpy(&n, (const char *)base + k->count_off, sizeof(n));
	return n;
}

static inline void set_count(void *base, const struct key_desc *k, size_t n)
{
	memcpy((char *)base + k->count_off, &n, sizeof(n));
}

static inline uint64_t get_u(const void *base, const struct key_desc *k)
{
	bool b;
	uint32_t u32;
	uint64_t u64;
	int e;
	switch (k->type) {
	case K_BOOL:
		memcpy(&b, fld(base, k), sizeof(b));
		return b;
	case K_U32:
		memcpy(&u32, fld(base, k), sizeof(u32));
		return u32;
	case K_U64:
		memcpy(&u64, fld(base, k), sizeof(u64));
		return u64;
	case K_ENUM:
		memcpy(&e, fld(base, k), sizeof(e));
		return (uint64_t)(unsigned)e;
	default:
		return 0;
	}
}

static inline void set_u(void *base, const struct key_desc *k, uint64_t v)
{
	bool b = v != 0;
	uint32_t u32 = (uint32_t)v;
	int e = (int)v;
	switch (k->type) {
	case K_BOOL:
		memcpy(fld(base, k), &b, sizeof(b));
		break;
	case K_U32:
		memcpy(fld(base, k), &u32, sizeof(u32));
		break;
	case K_U64:
		memcpy(fld(base, k), &v, sizeof(v));
		break;
	case K_ENUM:
		memcpy(fld(base, k), &e, sizeof(e));
		break;
	default:
		break;
	}
}

static inline double get_d(const void *base, const struct key_desc *k)
{
	double d;
	memcpy(&d, fld(base, k), sizeof(d));
	return d;
}

static inline void set_d(void *base, const struct key_desc *k, double d)
{
	memcpy(fld(base, k), &d, sizeof(d));
}

static inline bool applies_to(const struct key_desc *k, int discrim)
{
	return !k->applies || (discrim >= 0 && discrim < 32 && (k->applies & (1u << discrim)));
}

static inline bool section_present(const void *base, const struct key_desc *k)
{
	bool on;
	memcpy(&on, fld(base, k), sizeof(on));
	return on;
}

#endif
