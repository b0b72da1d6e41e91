/* perf_map.c — see perf_map.h. */
#include "symbolize/perf_map.h"
#include "pf/array.h"
#include "pf/utf8.h"
#include "symbolize/sorted_find.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ent {
	uint64_t start, end;
	uint32_t name; /* offset into names */
	uint32_t seq;  /* line order: the later of two equal starts wins */
};

struct pf_perf_map {
	struct ent *e;
	size_t n;
	char *names;
	size_t names_len;
};

static int ent_cmp(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* A hex number at *p (an optional 0x), advancing *p past it; false when there is none. */
static bool hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	if (end - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	uint64_t v = 0;
	const char *d = s;
	for (; s < end; s++) {
		unsigned c = (unsigned char)*s, x;
		if (c >= '0' && c <= '9')
			x = c - '0';
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			x = (c | 0x20) - 'a' + 10;
		else
			break;
		if (v >> 60)
			return false; /* more than 64 bits */
		v = v << 4 | x;
	}
	if (s == d)
		return false;
	*p = s;
	*out = v;
	return true;
}

static const char *skip_blanks(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

/* One line into *e and its name (trimmed, cut at PF_PERF_MAP_MAX_NAME) into *name, *name_len. */
static bool parse_line(const char *p, const char *end, struct ent *e, const char **name,
		       size_t *name_len)
{
	uint64_t start, size;
	p = skip_blanks(p, end);
	if (!hex(&p, end, &start) || p == end || (*p != ' ' && *p != '\t'))
		return false;
	p = skip_blanks(p, end);
	if (!hex(&p, end, &size) || p == end || (*p != ' ' && *p != '\t'))
		return false;
	p = skip_blanks(p, end);
	while (end > p && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (p == end || size == 0 || start + size < start)
		return false;
	e->start = start;
	e->end = start + size;
	*name = p;
	*name_len = (size_t)(end - p) < PF_PERF_MAP_MAX_NAME ? (size_t)(end - p)
							     : PF_PERF_MAP_MAX_NAME;
	return true;
}

int pf_perf_map_parse(const char *text, size_t len, struct pf_perf_map **out, size_t *skipped)
{
	*out = NULL;
	if (skipped)
		*skipped = 0;
	if (len > PF_PERF_MAP_MAX_BYTES)
		return -EFBIG;
	struct pf_perf_map *m = calloc(1, sizeof(*m));
	size_t cap = 0, names_cap = 0;
	if (!m)
		return -ENOMEM;
	int rc = 0;
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		struct ent e;
		const char *name;
		size_t nlen;
		if (le == p) { /* an empty line */
			p = le + 1;
			continue;
		}
		if (!parse_line(p, le, &e, &name, &nlen)) {
			if (skipped)
				(*skipped)++;
			p = le + 1;
			continue;
		}
		if (m->n == PF_PERF_MAP_MAX_ENTRIES) {
			rc = -EFBIG;
			break;
		}
		if (PF_ARRAY_GROW(m->e, cap, m->n + 1, 256) < 0) {
			rc = -ENOMEM;
			break;
		}
		if (PF_ARRAY_GROW(m->names, names_cap, m->names_len + nlen + 1, 4096) < 0) {
			rc = -ENOMEM;
			break;
		}
		e.name = (uint32_t)m->names_len;
		e.seq = (uint32_t)m->n;
		pf_utf8_copy_clean(m->names + m->names_len, name, nlen);
		m->names_len += nlen + 1;
		m->e[m->n++] = e;
		p = le + 1;
	}
	if (rc < 0) {
		pf_perf_map_free(m);
		return rc;
	}
	if (m->n) {
		qsort(m->e, m->n, sizeof(*m->e), ent_cmp);
		size_t k = 0; /* of equal starts, the last line's */
		for (size_t i = 0; i < m->n; i++) {
			if (k && m->e[k - 1].start == m->e[i].start)
				k--;
			m->e[k++] = m->e[i];
		}
		m->n = k;
		struct ent *e = realloc(m->e, m->n * sizeof(*m->e)); /* what pf_perf_map_bytes says */
		if (e)
			m->e = e;
		char *nm = realloc(m->names, m->names_len);
		if (nm)
			m->names = nm;
	}
	*out = m;
	return 0;
}

int pf_perf_map_read(int fd, struct pf_perf_map **out, size_t *skipped)
{
	*out = NULL;
	size_t cap = 64 << 10, len = 0;
	char *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (len == cap) {
			if (cap > PF_PERF_MAP_MAX_BYTES) {
				free(buf);
				return -EFBIG;
			}
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			return -e;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	int rc = pf_perf_map_parse(buf, len, out, skipped);
	free(buf);
	return rc;
}

const char *pf_perf_map_find(const struct pf_perf_map *m, uint64_t addr)
{
	if (!m || !m->n)
		return NULL;
	size_t lo = PF_COUNT_AT_OR_BELOW(m->e, m->n, .start, addr);
	if (!lo || addr >= m->e[lo - 1].end)
		return NULL;
	return m->names + m->e[lo - 1].name;
}

size_t pf_perf_map_entries(const struct pf_perf_map *m)
{
	return m ? m->n : 0;
}

size_t pf_perf_map_bytes(const struct pf_perf_map *m)
{
	return m ? sizeof(*m) + m->n * sizeof(*m->e) + m->names_len : 0;
}

void pf_perf_map_free(struct pf_perf_map *m)
{
	if (!m)
		return;
	free(m->e);
	free(m->names);
	free(m);
}
