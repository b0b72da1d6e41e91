/* ctl/output.h — what profleetctl prints: aligned human tables (the default) or the API's
 * JSON as it came (--output json, stable for scripts), plus the small formatters the tables
 * use (UTC times, durations, shortened ids).
 *
 * Table cells come from the server, so they are sanitized before reaching a terminal: control
 * characters (escape sequences, newlines, tabs) become '?', and a cell is cut to
 * CTL_TABLE_MAX_CELL bytes with a trailing "...". Widths count UTF-8 characters, not bytes.
 *
 *   struct ctl_table *t = ctl_table_new((const char *[]){"ID", "STATE", NULL});
 *   ctl_table_row(t);
 *   ctl_table_cell(t, "%s", id);
 *   ctl_table_cell(t, "%s", state);
 *   ctl_table_print(t, stdout);
 *   ctl_table_free(t);
 */
#ifndef CTL_OUTPUT_H
#define CTL_OUTPUT_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "pf/compiler.h"

#define CTL_TABLE_MAX_COLS 12
#define CTL_TABLE_MAX_CELL 200

enum ctl_format { CTL_OUT_TABLE, CTL_OUT_JSON };

/* "table" or "json"; -EINVAL otherwise. */
int ctl_format_parse(const char *s, enum ctl_format *out);

struct ctl_table;
/* headers: NULL-terminated, at most CTL_TABLE_MAX_COLS. NULL + errno on failure. */
struct ctl_table *ctl_table_new(const char *const *headers);
void ctl_table_free(struct ctl_table *t);
static inline void ctl_table_freep(struct ctl_table **t)
{
	ctl_table_free(*t);
}
/* Starts a row; cells then fill it left to right (missing ones print empty, extra ones are
 * dropped). -ENOMEM on allocation failure (the table stays usable). */
int ctl_table_row(struct ctl_table *t);
int ctl_table_cell(struct ctl_table *t, const char *fmt, ...) PF_PRINTF(2, 3);
size_t ctl_table_rows(const struct ctl_table *t);
/* Columns separated by two spaces, the last one not padded, one line per row. */
int ctl_table_print(const struct ctl_table *t, FILE *f);

/* Pretty-printed JSON (2-space indent, keys in the server's order) and a newline. */
int ctl_print_json(FILE *f, const json_t *j);

/* "2026-11-25 10:01:02" (UTC) for Unix milliseconds; "-" for 0 or negative. */
void ctl_fmt_time_ms(int64_t ms, char *buf, size_t n);
/* "30s", "1m30s", "2h5m", "1.5s" for sub-10 s values with a fraction; "-" for negative. */
void ctl_fmt_duration_ms(int64_t ms, char *buf, size_t n);

/* JSON accessors that tolerate missing members: "" / 0 / false. */
const char *ctl_jstr(const json_t *o, const char *key);
int64_t ctl_jint(const json_t *o, const char *key);

#endif
