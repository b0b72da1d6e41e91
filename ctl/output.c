/* output.c — see output.h. */
#include "output.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pf/buf.h"

struct ctl_table {
	size_t ncols;
	char *headers[CTL_TABLE_MAX_COLS];
	char **cells; /* rows * ncols, NULL = empty */
	size_t rows, cap;
	size_t col; /* next cell of the current row */
};

int ctl_format_parse(const char *s, enum ctl_format *out)
{
	if (strcmp(s, "table") == 0)
		*out = CTL_OUT_TABLE;
	else if (strcmp(s, "json") == 0)
		*out = CTL_OUT_JSON;
	else
		return -EINVAL;
	return 0;
}

/* Control characters become '?', and the text is cut at CTL_TABLE_MAX_CELL bytes (on a
 * UTF-8 character boundary). */
static char *sanitize(const char *s)
{
	size_t n = strlen(s), cut = n;
	if (n > CTL_TABLE_MAX_CELL) {
		cut = CTL_TABLE_MAX_CELL - 3;
		while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
			cut--;
	}
	char *o = malloc(cut + 4);
	if (!o)
		return NULL;
	for (size_t i = 0; i < cut; i++) {
		unsigned char c = (unsigned char)s[i];
		o[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	if (cut < n) {
		memcpy(o + cut, "...", 3);
		cut += 3;
	}
	o[cut] = '\0';
	return o;
}

static size_t width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		w += ((unsigned char)*s & 0xC0) != 0x80;
	return w;
}

struct ctl_table *ctl_table_new(const char *const *headers)
{
	struct ctl_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	for (; headers[t->ncols]; t->ncols++) {
		int e = t->ncols == CTL_TABLE_MAX_COLS ? EINVAL : 0;
		if (!e && !(t->headers[t->ncols] = sanitize(headers[t->ncols])))
			e = ENOMEM;
		if (e) {
			ctl_table_free(t);
			errno = e;
			return NULL;
		}
	}
	t->col = t->ncols;
	return t;
}

void ctl_table_free(struct ctl_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->ncols; i++)
		free(t->headers[i]);
	for (size_t i = 0; i < t->rows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}

int ctl_table_row(struct ctl_table *t)
{
	if (t->rows == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 16;
		char **c = realloc(t->cells, nc * t->ncols * sizeof(*c));
		if (!c)
			return -ENOMEM;
		t->cells = c;
		t->cap = nc;
	}
	memset(&t->cells[t->rows * t->ncols], 0, t->ncols * sizeof(*t->cells));
	t->rows++;
	t->col = 0;
	return 0;
}

int ctl_table_cell(struct ctl_table *t, const char *fmt, ...)
{
	if (t->rows == 0 || t->col >= t->ncols)
		return 0;
	char *raw;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&raw, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	char *s = sanitize(raw);
	free(raw);
	if (!s)
		return -ENOMEM;
	t->cells[(t->rows - 1) * t->ncols + t->col++] = s;
	return 0;
}

size_t ctl_table_rows(const struct ctl_table *t)
{
	return t->rows;
}

static void print_line(FILE *f, char *const *cells, size_t ncols, const size_t *w)
{
	for (size_t c = 0; c < ncols; c++) {
		const char *s = cells[c] ? cells[c] : "";
		fputs(s, f);
		if (c + 1 < ncols)
			fprintf(f, "%*s", (int)(w[c] - width(s) + 2), "");
	}
	fputc('\n', f);
}

int ctl_table_print(const struct ctl_table *t, FILE *f)
{
	size_t w[CTL_TABLE_MAX_COLS] = {0};
	for (size_t c = 0; c < t->ncols; c++) {
		w[c] = width(t->headers[c]);
		for (size_t r = 0; r < t->rows; r++) {
			const char *s = t->cells[r * t->ncols + c];
			if (s && width(s) > w[c])
				w[c] = width(s);
		}
	}
	print_line(f, t->headers, t->ncols, w);
	for (size_t r = 0; r < t->rows; r++)
		print_line(f, &t->cells[r * t->ncols], t->ncols, w);
	return ferror(f) ? -EIO : 0;
}

int ctl_print_json(FILE *f, const json_t *j)
{
	if (json_dumpf(j, f, JSON_INDENT(2)) < 0)
		return -EIO;
	fputc('\n', f);
	return ferror(f) ? -EIO : 0;
}

void ctl_fmt_time_ms(int64_t ms, char *buf, size_t n)
{
	struct tm tm;
	time_t s = (time_t)(ms / 1000);
	if (ms <= 0 || !gmtime_r(&s, &tm) || strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(buf, n, "-");
}

void ctl_fmt_duration_ms(int64_t ms, char *buf, size_t n)
{
	if (ms < 0) {
		snprintf(buf, n, "-");
		return;
	}
	int64_t s = ms / 1000;
	if (s < 10 && ms % 1000)
		snprintf(buf, n, "%.1fs", (double)ms / 1000.0);
	else if (s < 60)
		snprintf(buf, n, "%llds", (long long)s);
	else if (s < 3600 && s % 60)
		snprintf(buf, n, "%lldm%llds", (long long)(s / 60), (long long)(s % 60));
	else if (s < 3600)
		snprintf(buf, n, "%lldm", (long long)(s / 60));
	else if (s % 3600 / 60)
		snprintf(buf, n, "%lldh%lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
	else
		snprintf(buf, n, "%lldh", (long long)(s / 3600));
}

const char *ctl_jstr(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

int64_t ctl_jint(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_real(v))
		return (int64_t)json_real_value(v);
	return 0;
}
