/* profcfg_emit.c — the effective config as YAML (pf_profcfg_emit_yaml and its redacted
 * form), written by walking the key table of profcfg.c: keys in table order, two-space
 * indentation, strings double-quoted, numbers in their shortest exact form. The output is
 * what the controller hashes as the effective config, so it changes only with the table. */
#include "pf/profcfg.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf/utf8.h"
#include "profcfg_int.h"

/* A YAML double-quoted scalar (YAML 1.1 §5.7 escapes): C0/C1 controls, DEL, the YAML line
 * breaks NEL/LS/PS and the BOM are escaped, other printable UTF-8 is kept as is. */
static int emit_quoted(struct pf_buf *out, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str);
	int r = pf_buf_putc(out, '"');
	for (size_t i = 0; i < n && r == 0;) {
		uint32_t cp;
		size_t l = pf_utf8_decode(s + i, n - i, &cp);
		if (!l)
			return -EINVAL;
		if (cp == '"')
			r = pf_buf_append_str(out, "\\\"");
		else if (cp == '\\')
			r = pf_buf_append_str(out, "\\\\");
		else if (cp == '\n')
			r = pf_buf_append_str(out, "\\n");
		else if (cp == '\t')
			r = pf_buf_append_str(out, "\\t");
		else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
			 cp == 0xfeff || cp == 0xfffe || cp == 0xffff)
			r = pf_buf_printf(out, "\\u%04x", (unsigned)cp);
		else
			r = pf_buf_append(out, s + i, l);
		i += l;
	}
	return r ? r : pf_buf_putc(out, '"');
}

static int emit_double(struct pf_buf *out, double d)
{
	char tmp[40];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
		if (strtod(tmp, NULL) == d)
			break;
	}
	if (!strpbrk(tmp, ".eEn"))
		return pf_buf_printf(out, "%s.0", tmp);
	return pf_buf_append_str(out, tmp);
}

void profcfg_out_printf(struct profcfg_out *o, const char *fmt, ...)
{
	if (o->err)
		return;
	va_list ap;
	va_start(ap, fmt);
	o->err = pf_buf_vprintf(o->b, fmt, ap);
	va_end(ap);
}

static void out_quoted(struct profcfg_out *o, const char *s)
{
	if (!o->err)
		o->err = emit_quoted(o->b, s);
}

void profcfg_out_double(struct profcfg_out *o, double d)
{
	if (!o->err)
		o->err = emit_double(o->b, d);
}

/* Keys of container `pattern` at column `ind`; for a list item, the first key goes after
 * "- " at column ind - 2. */
static void emit_fields(struct profcfg_out *o, const char *pattern, const void *base, int ind,
			bool list_item)
{
	int discrim = list_item ? profcfg_item_discrim(pattern, base) : -1;
	bool first = true;
	for (size_t i = 0; i < profcfg_n_keys && !o->err; i++) {
		const struct key_desc *k = &profcfg_keys[i];
		const char *name = profcfg_child_name(k, pattern);
		if (!name || !applies_to(k, discrim))
			continue;
		/* unset optional strings and absent tracked sections are left out */
		if ((k->type == K_STRING && !get_ptr(base, k->off)) ||
		    (k->type == K_SECTION && (k->flags & F_PRESENT) && !section_present(base, k)))
			continue;
		if (list_item && first)
			profcfg_out_printf(o, "%*s- %s:", ind - 2, "", name);
		else
			profcfg_out_printf(o, "%*s%s:", ind, "", name);
		first = false;
		switch (k->type) {
		case K_SECTION:
			profcfg_out_printf(o, "\n");
			emit_fields(o, k->path, base, ind + 2, false);
			break;
		case K_BOOL:
			profcfg_out_printf(o, " %s\n", get_u(base, k) ? "true" : "false");
			break;
		case K_U32:
		case K_U64:
			profcfg_out_printf(o, " %" PRIu64 "\n", get_u(base, k));
			break;
		case K_ENUM: {
			uint64_t v = get_u(base, k);
			if (v >= k->n_names)
				o->err = -EINVAL;
			else
				profcfg_out_printf(o, " %s\n", k->names[v]);
			break;
		}
		case K_DOUBLE:
			profcfg_out_printf(o, " ");
			profcfg_out_double(o, get_d(base, k));
			profcfg_out_printf(o, "\n");
			break;
		case K_STRING: {
			/* NULL (unset) strings were left out above */
			profcfg_out_printf(o, " ");
			out_quoted(o, get_ptr(base, k->off));
			profcfg_out_printf(o, "\n");
			break;
		}
		case K_MAP: {
			const struct pf_kv_str *kv = get_ptr(base, k->off);
			size_t n = get_count(base, k);
			profcfg_out_printf(o, "%s", n ? "\n" : " {}\n");
			for (size_t j = 0; j < n; j++) {
				profcfg_out_printf(o, "%*s", ind + 2, "");
				out_quoted(o, kv[j].key);
				profcfg_out_printf(o, ": ");
				out_quoted(o, o->redact && (k->flags & F_SECRET)
						  ? PF_PROFCFG_REDACTED
						  : kv[j].value);
				profcfg_out_printf(o, "\n");
			}
			break;
		}
		case K_LIST: {
			char ip[MAX_PATH];
			item_pattern(ip, sizeof(ip), k);
			const char *arr = get_ptr(base, k->off);
			size_t n = get_count(base, k);
			profcfg_out_printf(o, "%s", n ? "\n" : " []\n");
			for (size_t j = 0; j < n; j++)
				emit_fields(o, ip, arr + j * k->elem_size, ind + 4, true);
			break;
		}
		}
	}
}

static int emit_yaml(const struct pf_profcfg *cfg, struct pf_buf *out, bool redact)
{
	if (!cfg || !out)
		return -EINVAL;
	struct profcfg_out o = {.b = out, .redact = redact};
	size_t start = out->len;
	emit_fields(&o, "", cfg, 0, false);
	if (o.err < 0) { /* leave the buffer as it was */
		out->len = start;
		if (out->data)
			out->data[start] = 0;
	}
	return o.err;
}

int pf_profcfg_emit_yaml(const struct pf_profcfg *cfg, struct pf_buf *out)
{
	return emit_yaml(cfg, out, false);
}

int pf_profcfg_emit_yaml_redacted(const struct pf_profcfg *cfg, struct pf_buf *out)
{
	return emit_yaml(cfg, out, true);
}
