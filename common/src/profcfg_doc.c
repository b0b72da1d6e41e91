/* profcfg_doc.c — the Markdown key reference of the profiling config (pf_profcfg_doc_markdown,
 * the table in docs/config.md), one row per entry of the key table of profcfg.c. */
#include "pf/profcfg.h"

#include <inttypes.h>
#include <stdio.h>

#include "profcfg_int.h"

static const char *doc_type(const struct key_desc *k, char *buf, size_t n)
{
	switch (k->type) {
	case K_SECTION:
		return "mapping";
	case K_BOOL:
		return "bool";
	case K_U32:
	case K_U64:
		return "integer";
	case K_DOUBLE:
		return "number";
	case K_STRING:
		return "string";
	case K_ENUM:
		return "enum";
	case K_LIST:
		snprintf(buf, n, "list of mappings (at most %zu)", k->max_items);
		return buf;
	case K_MAP:
		snprintf(buf, n, "map string → string (at most %zu)", k->max_items);
		return buf;
	}
	return "";
}

static void doc_row(struct profcfg_out *o, const struct key_desc *k)
{
	char tbuf[64];
	profcfg_out_printf(o, "| `%s` | %s | ", k->path, doc_type(k, tbuf, sizeof(tbuf)));

	/* Default */
	if (k->flags & F_REQUIRED) {
		profcfg_out_printf(o, "*required*");
	} else if (k->type == K_BOOL) {
		profcfg_out_printf(o, "`%s`", k->def_u ? "true" : "false");
	} else if (k->type == K_U32 || k->type == K_U64) {
		profcfg_out_printf(o, "`%" PRIu64 "`", k->def_u);
	} else if (k->type == K_DOUBLE) {
		profcfg_out_printf(o, "`");
		profcfg_out_double(o, k->def_d);
		profcfg_out_printf(o, "`");
	} else if (k->type == K_ENUM) {
		profcfg_out_printf(o, "`%s`", k->names[k->def_u]);
	} else if (k->type == K_LIST) {
		profcfg_out_printf(o, "`[]`");
	} else if (k->type == K_MAP) {
		profcfg_out_printf(o, "`{}`");
	} else if (k->type == K_STRING && k->def_s) {
		profcfg_out_printf(o, "`%s`", k->def_s);
	} else if (k->type == K_STRING) {
		profcfg_out_printf(o, "*unset*");
	}
	profcfg_out_printf(o, " | ");

	/* Allowed */
	if (k->type == K_U32 || k->type == K_U64) {
		profcfg_out_printf(o, "%" PRIu64 "..%" PRIu64, k->min_u, k->max_u);
	} else if (k->type == K_DOUBLE) {
		profcfg_out_printf(o, "%g..%g", k->min_d, k->max_d);
	} else if (k->type == K_BOOL) {
		profcfg_out_printf(o, "`true`/`false` (also yes/no, on/off)");
	} else if (k->names) {
		for (size_t i = 0; i < k->n_names; i++)
			profcfg_out_printf(o, "%s`%s`", i ? ", " : "", k->names[i]);
	} else if (k->type == K_STRING) {
		profcfg_out_printf(o, "%s%sat most %d bytes", k->check_desc ? k->check_desc : "",
				   k->check_desc ? ", " : "", MAX_STR);
	} else if (k->type == K_MAP) {
		profcfg_out_printf(o, "keys and values at most %d bytes", MAX_STR);
	}

	/* Description */
	profcfg_out_printf(o, " | %s", k->doc);
	if (k->applies) {
		profcfg_out_printf(o, " Only for `type`:");
		for (unsigned t = 0; t < 32; t++)
			if (k->applies & (1u << t))
				profcfg_out_printf(o, " `%s`",
						   pf_exporter_type_name((enum pf_exporter_type)t));
		profcfg_out_printf(o, ".");
	}
	profcfg_out_printf(o, " |\n");
}

int pf_profcfg_doc_markdown(struct pf_buf *out)
{
	struct profcfg_out o = {.b = out};
	profcfg_out_printf(
	    &o,
	    "## Key reference\n\n"
	    "Generated from the key table in `common/src/profcfg.c`. `[]` stands for a "
	    "list index (`profiling.exporters[1].endpoint` in error messages).\n\n"
	    "Rules for the whole document:\n\n"
	    "- One YAML document of at most %zu bytes, a mapping with the keys `profiling` "
	    "and `labels`. An empty document, `profiling:` and `profiling: {}` give all "
	    "defaults.\n"
	    "- Unknown keys, duplicate keys, wrong types and out-of-range values are errors "
	    "naming the key path.\n"
	    "- Anchors, aliases and tags are refused.\n"
	    "- Integers and numbers are plain decimal scalars (not quoted); strings are at "
	    "most %d bytes.\n"
	    "- Exporter keys apply by `type`; setting a key the type does not use is an "
	    "error.\n\n"
	    "| Key | Type | Default | Allowed | Description |\n"
	    "|---|---|---|---|---|\n",
	    PF_PROFCFG_MAX_DOC, MAX_STR);
	for (size_t i = 0; i < profcfg_n_keys; i++)
		doc_row(&o, &profcfg_keys[i]);
	return o.err;
}
