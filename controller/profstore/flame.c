/* flame.c — see flame.h.
 *
 * Names are interned once (open-addressing table of indices into names[]), so a node is four
 * integers and two value pairs, and finding a child is one probe in a (parent, name) -> node
 * table. Output and top walk the tree iteratively: stacks from the wire can be deep. */
/* qsort_r: _GNU_SOURCE comes from the build (gnu11). */
#include "flame.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf/compiler.h"

#define NONE UINT32_MAX

struct node {
	uint32_t name;
	uint32_t parent;
	uint64_t total[PF_FLAME_SLOTS];
	uint64_t self[PF_FLAME_SLOTS];
};

struct pf_flame {
	size_t max_nodes;
	bool truncated;
	/* interned names */
	char **names;
	uint64_t *name_hash;
	size_t n_names, cap_names;
	uint32_t *name_tab; /* open addressing: index + 1, 0 empty */
	size_t name_tab_cap;
	/* nodes and the (parent, name) -> node table */
	struct node *nodes;
	size_t n_nodes, cap_nodes;
	uint32_t *child_tab; /* node index + 1, 0 empty */
	size_t child_tab_cap;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++) {
		h ^= (uint8_t)s[i];
		h *= 1099511628211ull;
	}
	return h;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static int name_tab_grow(struct pf_flame *f)
{
	size_t cap = f->name_tab_cap ? f->name_tab_cap * 2 : 1024;
	uint32_t *t = calloc(cap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < f->n_names; i++) {
		size_t j = f->name_hash[i] & (cap - 1);
		while (t[j])
			j = (j + 1) & (cap - 1);
		t[j] = (uint32_t)i + 1;
	}
	free(f->name_tab);
	f->name_tab = t;
	f->name_tab_cap = cap;
	return 0;
}

/* Index of the interned copy of s[0..n). */
static int intern(struct pf_flame *f, const char *s, size_t n, uint32_t *out)
{
	uint64_t h = hash_bytes(s, n);

	if ((f->n_names + 1) * 10 >= f->name_tab_cap * 7 && name_tab_grow(f) < 0)
		return -ENOMEM;
	size_t j = h & (f->name_tab_cap - 1);
	while (f->name_tab[j]) {
		uint32_t i = f->name_tab[j] - 1;
		if (f->name_hash[i] == h && strncmp(f->names[i], s, n) == 0 && !f->names[i][n]) {
			*out = i;
			return 0;
		}
		j = (j + 1) & (f->name_tab_cap - 1);
	}
	if (f->n_names == f->cap_names) {
		size_t cap = f->cap_names ? f->cap_names * 2 : 256;
		char **nn = realloc(f->names, cap * sizeof(*nn));
		if (!nn)
			return -ENOMEM;
		f->names = nn;
		uint64_t *nh = realloc(f->name_hash, cap * sizeof(*nh));
		if (!nh)
			return -ENOMEM;
		f->name_hash = nh;
		f->cap_names = cap;
	}
	char *c = malloc(n + 1);
	if (!c)
		return -ENOMEM;
	memcpy(c, s, n);
	c[n] = 0;
	f->names[f->n_names] = c;
	f->name_hash[f->n_names] = h;
	f->name_tab[j] = (uint32_t)f->n_names + 1;
	*out = (uint32_t)f->n_names++;
	return 0;
}

static uint64_t child_key(uint32_t parent, uint32_t name)
{
	return mix(((uint64_t)parent << 32) | name);
}

static int child_tab_grow(struct pf_flame *f)
{
	size_t cap = f->child_tab_cap ? f->child_tab_cap * 2 : 1024;
	uint32_t *t = calloc(cap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = 1; i < f->n_nodes; i++) {
		size_t j = child_key(f->nodes[i].parent, f->nodes[i].name) & (cap - 1);
		while (t[j])
			j = (j + 1) & (cap - 1);
		t[j] = (uint32_t)i + 1;
	}
	free(f->child_tab);
	f->child_tab = t;
	f->child_tab_cap = cap;
	return 0;
}

/* The child `name` of parent, created when missing; NONE when the node cap is reached. */
static int child(struct pf_flame *f, uint32_t parent, uint32_t name, uint32_t *out)
{
	if ((f->n_nodes + 1) * 10 >= f->child_tab_cap * 7 && child_tab_grow(f) < 0)
		return -ENOMEM;
	size_t j = child_key(parent, name) & (f->child_tab_cap - 1);
	while (f->child_tab[j]) {
		uint32_t i = f->child_tab[j] - 1;
		if (f->nodes[i].parent == parent && f->nodes[i].name == name) {
			*out = i;
			return 0;
		}
		j = (j + 1) & (f->child_tab_cap - 1);
	}
	if (f->n_nodes >= f->max_nodes) {
		f->truncated = true;
		*out = NONE;
		return 0;
	}
	if (f->n_nodes == f->cap_nodes) {
		size_t cap = f->cap_nodes * 2;
		struct node *nn = realloc(f->nodes, cap * sizeof(*nn));
		if (!nn)
			return -ENOMEM;
		f->nodes = nn;
		f->cap_nodes = cap;
	}
	struct node *nd = &f->nodes[f->n_nodes];
	memset(nd, 0, sizeof(*nd));
	nd->name = name;
	nd->parent = parent;
	f->child_tab[j] = (uint32_t)f->n_nodes + 1;
	*out = (uint32_t)f->n_nodes++;
	return 0;
}

struct pf_flame *pf_flame_new(size_t max_nodes)
{
	struct pf_flame *f = calloc(1, sizeof(*f));
	uint32_t root_name;

	if (!f)
		goto oom;
	f->max_nodes = max_nodes ? max_nodes : 1;
	f->cap_nodes = 64;
	f->nodes = calloc(f->cap_nodes, sizeof(*f->nodes));
	if (!f->nodes || intern(f, PF_FLAME_ROOT, strlen(PF_FLAME_ROOT), &root_name) < 0 ||
	    child_tab_grow(f) < 0)
		goto oom;
	f->nodes[0].name = root_name;
	f->nodes[0].parent = NONE;
	f->n_nodes = 1;
	return f;
oom:
	pf_flame_free(f);
	errno = ENOMEM;
	return NULL;
}

void pf_flame_free(struct pf_flame *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n_names; i++)
		free(f->names[i]);
	free(f->names);
	free(f->name_hash);
	free(f->name_tab);
	free(f->nodes);
	free(f->child_tab);
	free(f);
}

/* Walks/extends the path of interned names from the root and adds weight along it. */
static int add_path(struct pf_flame *f, const uint32_t *names, size_t n, uint64_t weight,
		    int slot)
{
	uint32_t cur = 0;
	int rc;

	f->nodes[0].total[slot] += weight;
	for (size_t i = 0; i < n; i++) {
		uint32_t next;
		rc = child(f, cur, names[i], &next);
		if (rc < 0)
			return rc;
		if (next == NONE)
			break;
		cur = next;
		f->nodes[cur].total[slot] += weight;
	}
	f->nodes[cur].self[slot] += weight;
	return 0;
}

int pf_flame_add_stack(struct pf_flame *f, const char *const *names, size_t n, uint64_t weight,
		       int slot)
{
	if (slot < 0 || slot >= PF_FLAME_SLOTS || (!names && n))
		return -EINVAL;
	_cleanup_free_ uint32_t *ids = malloc((n ? n : 1) * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *s = names[i] ? names[i] : "";
		int rc = intern(f, s, strnlen(s, PF_FLAME_NAME_MAX - 1), &ids[i]);
		if (rc < 0)
			return rc;
	}
	return add_path(f, ids, n, weight, slot);
}

static const char *basename_of(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

void pf_flame_frame_name(const struct pf_prof_process *p, const struct pf_prof_frame *fr,
			 char *buf, size_t len)
{
	if (fr->function && *fr->function) {
		snprintf(buf, len, "%s", fr->function);
		return;
	}
	if (fr->mapping >= 0 && (size_t)fr->mapping < p->n_mappings) {
		const struct pf_prof_mapping *m = &p->mappings[fr->mapping];
		if (m->path && *m->path) {
			uint64_t off = fr->address - m->start + m->offset;
			snprintf(buf, len, "%s+0x%" PRIx64, basename_of(m->path), off);
			return;
		}
	}
	snprintf(buf, len, "0x%" PRIx64, fr->address);
}

/* Interned names of one process's frames, computed once per window (NONE until needed). */
static int process_add(struct pf_flame *f, const struct pf_prof_process *p, int slot)
{
	_cleanup_free_ uint32_t *fnames = malloc((p->n_frames ? p->n_frames : 1) * sizeof(uint32_t));
	_cleanup_free_ uint32_t *path = NULL;
	size_t path_cap = 0;
	char name[PF_FLAME_NAME_MAX];
	int rc;

	if (!fnames)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_frames; i++)
		fnames[i] = NONE;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pf_prof_sample *s = &p->samples[i];
		if (!s->count)
			continue;
		if (s->stack >= p->n_stacks)
			return -EINVAL;
		const struct pf_prof_stack *st = &p->stacks[s->stack];
		if (st->n_frames > path_cap) {
			uint32_t *np = realloc(path, st->n_frames * sizeof(*np));
			if (!np)
				return -ENOMEM;
			path = np;
			path_cap = st->n_frames;
		}
		/* Leaf first in the window, root first in the tree. */
		for (uint32_t k = 0; k < st->n_frames; k++) {
			uint32_t fi = st->frames[st->n_frames - 1 - k];
			if (fi >= p->n_frames)
				return -EINVAL;
			if (fnames[fi] == NONE) {
				pf_flame_frame_name(p, &p->frames[fi], name, sizeof(name));
				rc = intern(f, name, strlen(name), &fnames[fi]);
				if (rc < 0)
					return rc;
			}
			path[k] = fnames[fi];
		}
		rc = add_path(f, path, st->n_frames, s->count, slot);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int pf_flame_add_window(struct pf_flame *f, const struct pf_prof_window *w, int slot)
{
	if (slot < 0 || slot >= PF_FLAME_SLOTS || !w)
		return -EINVAL;
	for (size_t i = 0; i < w->n_processes; i++) {
		int rc = process_add(f, &w->processes[i], slot);
		if (rc < 0)
			return rc;
	}
	return 0;
}

uint64_t pf_flame_total(const struct pf_flame *f, int slot)
{
	return slot >= 0 && slot < PF_FLAME_SLOTS ? f->nodes[0].total[slot] : 0;
}

size_t pf_flame_node_count(const struct pf_flame *f)
{
	return f->n_nodes;
}

bool pf_flame_truncated(const struct pf_flame *f)
{
	return f->truncated;
}

/* ---- Children lists (for output): nodes grouped by parent, each group sorted by name. */

struct kids {
	uint32_t *start; /* n_nodes + 1 offsets into idx */
	uint32_t *idx;
};

static int cmp_by_name(const void *a, const void *b, void *ud)
{
	const struct pf_flame *f = ud;
	const struct node *x = &f->nodes[*(const uint32_t *)a], *y = &f->nodes[*(const uint32_t *)b];
	return strcmp(f->names[x->name], f->names[y->name]);
}

static int kids_build(const struct pf_flame *f, struct kids *k)
{
	size_t n = f->n_nodes;

	k->start = calloc(n + 1, sizeof(uint32_t));
	k->idx = malloc((n ? n : 1) * sizeof(uint32_t));
	if (!k->start || !k->idx)
		return -ENOMEM;
	for (size_t i = 1; i < n; i++)
		k->start[f->nodes[i].parent + 1]++;
	for (size_t i = 0; i < n; i++)
		k->start[i + 1] += k->start[i];
	_cleanup_free_ uint32_t *fill = calloc(n ? n : 1, sizeof(uint32_t));
	if (!fill)
		return -ENOMEM;
	for (size_t i = 1; i < n; i++) {
		uint32_t p = f->nodes[i].parent;
		k->idx[k->start[p] + fill[p]++] = (uint32_t)i;
	}
	for (size_t i = 0; i < n; i++)
		if (k->start[i + 1] - k->start[i] > 1)
			qsort_r(k->idx + k->start[i], k->start[i + 1] - k->start[i],
				sizeof(uint32_t), cmp_by_name, (void *)f);
	return 0;
}

static void kids_release(struct kids *k)
{
	free(k->start);
	free(k->idx);
}

/* JSON string with escapes; bytes that are not valid UTF-8 become U+FFFD. */
static int json_str(struct pf_buf *out, const char *s)
{
	const uint8_t *p = (const uint8_t *)s;
	int rc = pf_buf_putc(out, '"');

	while (rc == 0 && *p) {
		uint8_t c = *p;
		if (c == '"' || c == '\\') {
			rc = pf_buf_putc(out, '\\');
			if (rc == 0)
				rc = pf_buf_putc(out, c);
			p++;
		} else if (c < 0x20) {
			rc = pf_buf_printf(out, "\\u%04x", c);
			p++;
		} else if (c < 0x80) {
			rc = pf_buf_putc(out, c);
			p++;
		} else {
			size_t n = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
			size_t k = 1;
			while (n && k < n && (p[k] & 0xc0) == 0x80)
				k++;
			if (n && k == n) {
				rc = pf_buf_append(out, p, n);
				p += n;
			} else {
				rc = pf_buf_append_str(out, "\xef\xbf\xbd");
				p++;
			}
		}
	}
	return rc ? rc : pf_buf_putc(out, '"');
}

static int64_t scaled_delta(const struct pf_flame *f, const struct node *nd)
{
	uint64_t t0 = f->nodes[0].total[0], t1 = f->nodes[0].total[1];
	if (!t1)
		return (int64_t)nd->total[0];
	double base = (double)nd->total[1] * ((double)t0 / (double)t1);
	double d = (double)nd->total[0] - base;
	return (int64_t)(d < 0 ? d - 0.5 : d + 0.5);
}

static int node_open(const struct pf_flame *f, uint32_t i, bool diff, bool has_kids,
		     struct pf_buf *out)
{
	const struct node *nd = &f->nodes[i];
	int rc = pf_buf_append_str(out, "{\"name\":");

	if (rc == 0)
		rc = json_str(out, f->names[nd->name]);
	if (rc == 0)
		rc = pf_buf_printf(out, ",\"value\":%" PRIu64, nd->total[0]);
	if (rc == 0 && diff)
		rc = pf_buf_printf(out, ",\"base\":%" PRIu64 ",\"delta\":%" PRId64, nd->total[1],
				   scaled_delta(f, nd));
	if (rc == 0 && has_kids)
		rc = pf_buf_append_str(out, ",\"children\":[");
	return rc;
}

static bool keep(const struct pf_flame *f, uint32_t i, uint64_t min_value)
{
	return !min_value || f->nodes[i].total[0] >= min_value || f->nodes[i].total[1] >= min_value;
}

int pf_flame_json(const struct pf_flame *f, bool diff, uint64_t min_value, struct pf_buf *out)
{
	struct kids k = {0};
	size_t before = out->len;
	int rc = kids_build(f, &k);
	/* Explicit DFS stack: node and the position of its next child. */
	_cleanup_free_ uint32_t *st_node = malloc(f->n_nodes * sizeof(uint32_t));
	_cleanup_free_ uint32_t *st_pos = malloc(f->n_nodes * sizeof(uint32_t));
	size_t depth = 0;

	if (rc == 0 && (!st_node || !st_pos))
		rc = -ENOMEM;
	if (rc < 0)
		goto out;
	rc = node_open(f, 0, diff, k.start[1] > k.start[0], out);
	if (k.start[1] > k.start[0]) {
		st_node[0] = 0;
		st_pos[0] = k.start[0];
		depth = 1;
	} else if (rc == 0) {
		rc = pf_buf_putc(out, '}');
	}
	bool first = true;
	while (rc == 0 && depth) {
		uint32_t n = st_node[depth - 1];
		if (st_pos[depth - 1] == k.start[n + 1]) {
			rc = pf_buf_append_str(out, "]}");
			depth--;
			first = false;
			continue;
		}
		uint32_t c = k.idx[st_pos[depth - 1]++];
		if (!keep(f, c, min_value))
			continue;
		if (!first)
			rc = pf_buf_putc(out, ',');
		/* Children that all fall under min_value make a leaf. */
		bool has = false;
		for (uint32_t j = k.start[c]; j < k.start[c + 1] && !has; j++)
			has = keep(f, k.idx[j], min_value);
		if (rc == 0)
			rc = node_open(f, c, diff, has, out);
		if (rc < 0)
			break;
		if (has) {
			st_node[depth] = c;
			st_pos[depth] = k.start[c];
			depth++;
			first = true;
		} else {
			rc = pf_buf_putc(out, '}');
			first = false;
		}
	}
out:
	kids_release(&k);
	if (rc < 0)
		out->len = before;
	return rc;
}

/* ---- Top functions. */

static int cmp_fn(const void *a, const void *b)
{
	const struct pf_flame_fn *x = a, *y = b;
	if (x->self != y->self)
		return x->self < y->self ? 1 : -1;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	return strcmp(x->name, y->name);
}

int pf_flame_top(const struct pf_flame *f, int slot, size_t limit, struct pf_flame_fn **out,
		 size_t *n)
{
	struct kids k = {0};
	int rc;

	*out = NULL;
	*n = 0;
	if (slot < 0 || slot >= PF_FLAME_SLOTS)
		return -EINVAL;
	_cleanup_free_ uint64_t *self = calloc(f->n_names, sizeof(uint64_t));
	_cleanup_free_ uint64_t *total = calloc(f->n_names, sizeof(uint64_t));
	_cleanup_free_ uint32_t *on_path = calloc(f->n_names, sizeof(uint32_t));
	_cleanup_free_ uint32_t *st_node = malloc(f->n_nodes * sizeof(uint32_t));
	_cleanup_free_ uint32_t *st_pos = malloc(f->n_nodes * sizeof(uint32_t));
	if (!self || !total || !on_path || !st_node || !st_pos)
		return -ENOMEM;
	rc = kids_build(f, &k);
	if (rc < 0)
		goto out;
	/* DFS from the root's children; a name counts towards total only at its outermost
	 * occurrence on the path (recursion is not double counted). */
	size_t depth = 0;
	for (uint32_t j = k.start[0]; j < k.start[1]; j++) {
		uint32_t c = k.idx[j];
		st_node[0] = c;
		st_pos[0] = k.start[c];
		depth = 1;
		if (!on_path[f->nodes[c].name]++)
			total[f->nodes[c].name] += f->nodes[c].total[slot];
		self[f->nodes[c].name] += f->nodes[c].self[slot];
		while (depth) {
			uint32_t nd = st_node[depth - 1];
			if (st_pos[depth - 1] == k.start[nd + 1]) {
				on_path[f->nodes[nd].name]--;
				depth--;
				continue;
			}
			uint32_t ch = k.idx[st_pos[depth - 1]++];
			uint32_t nm = f->nodes[ch].name;
			if (!on_path[nm]++)
				total[nm] += f->nodes[ch].total[slot];
			self[nm] += f->nodes[ch].self[slot];
			st_node[depth] = ch;
			st_pos[depth] = k.start[ch];
			depth++;
		}
	}
	size_t m = 0;
	/* The root is never counted (the walk starts below it): a frame named like it is. */
	for (size_t i = 0; i < f->n_names; i++)
		if (total[i])
			m++;
	struct pf_flame_fn *r = malloc((m ? m : 1) * sizeof(*r));
	if (!r) {
		rc = -ENOMEM;
		goto out;
	}
	m = 0;
	for (size_t i = 0; i < f->n_names; i++)
		if (total[i])
			r[m++] = (struct pf_flame_fn){f->names[i], self[i], total[i]};
	qsort(r, m, sizeof(*r), cmp_fn);
	*out = r;
	*n = limit && limit < m ? limit : m;
out:
	kids_release(&k);
	return rc;
}
