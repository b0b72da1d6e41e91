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

#include "pf/array.h"
#include "pf/compiler.h"
#include "pf/hash.h"
#include "pb_util.h"

#define NONE UINT32_MAX

struct node {
	uint32_t name;
	uint32_t parent;
	uint8_t kind; /* enum pf_frame_kind of the frame that made the node, PF_FLAME_KIND_NONE */
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

/* FNV-1a: the compact form's stored checksum (it stays this function). */
static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
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

/* Both indexes are open-addressing tables of entry + 1 (0 free), probed linearly from
 * key & (cap - 1). Doubles *tab (1024 slots at first) and inserts entries first..n-1 again. */
static int tab_grow(const struct pf_flame *f, uint32_t **tab, size_t *tab_cap, size_t first,
		    size_t n, uint64_t (*key)(const struct pf_flame *, size_t))
{
	size_t cap = *tab_cap ? *tab_cap * 2 : 1024;
	uint32_t *t = calloc(cap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = first; i < n; i++) {
		size_t j = key(f, i) & (cap - 1);
		while (t[j])
			j = (j + 1) & (cap - 1);
		t[j] = (uint32_t)i + 1;
	}
	free(*tab);
	*tab = t;
	*tab_cap = cap;
	return 0;
}

static uint64_t name_key(const struct pf_flame *f, size_t i)
{
	return f->name_hash[i];
}

static int name_tab_grow(struct pf_flame *f)
{
	return tab_grow(f, &f->name_tab, &f->name_tab_cap, 0, f->n_names, name_key);
}

/* Index of the interned copy of s[0..n). */
static int intern(struct pf_flame *f, const char *s, size_t n, uint32_t *out)
{
	uint64_t h = pf_hash64(s, n);

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

static uint64_t node_key(const struct pf_flame *f, size_t i)
{
	return child_key(f->nodes[i].parent, f->nodes[i].name);
}

/* Node 0 is the root, nobody's child. */
static int child_tab_grow(struct pf_flame *f)
{
	return tab_grow(f, &f->child_tab, &f->child_tab_cap, 1, f->n_nodes, node_key);
}

/* The child `name` of parent, created when missing; NONE when the node cap is reached. */
static int child(struct pf_flame *f, uint32_t parent, uint32_t name, uint8_t kind,
		 uint32_t *out)
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
	nd->kind = kind;
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
	f->nodes[0].kind = PF_FLAME_KIND_NONE;
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
static int add_path(struct pf_flame *f, const uint32_t *names, const uint8_t *kinds, size_t n,
		    uint64_t weight, int slot)
{
	uint32_t cur = 0;
	int rc;

	f->nodes[0].total[slot] += weight;
	for (size_t i = 0; i < n; i++) {
		uint32_t next;
		rc = child(f, cur, names[i], kinds ? kinds[i] : PF_FLAME_KIND_NONE, &next);
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
	return add_path(f, ids, NULL, n, weight, slot);
}

int pf_flame_name(struct pf_flame *f, const char *s, size_t n, uint32_t *id)
{
	return intern(f, s, strnlen(s, pf_min(n, (size_t)PF_FLAME_NAME_MAX - 1)), id);
}

int pf_flame_add_path(struct pf_flame *f, const uint32_t *names, const uint8_t *kinds, size_t n,
		      uint64_t weight, int slot)
{
	if (slot < 0 || slot >= PF_FLAME_SLOTS || (!names && n))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (names[i] >= f->n_names)
			return -EINVAL;
	return add_path(f, names, kinds, n, weight, slot);
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

/* The one walk over a process's samples that both the tree (process_add) and the compact
 * form (cenc_process) use, so both see the same samples, names and order: name() turns a
 * frame's display name (pf_flame_frame_name) into an id, once per frame; path() gets every
 * sample with a count (with typed set: with a non-zero value of any of typed's sample types)
 * and its root-first ids. Stacks deeper than max_depth: -E2BIG. */
struct path_walk {
	void *ctx;
	int (*name)(void *ctx, const char *s, size_t n, uint32_t *id);
	int (*path)(void *ctx, const uint32_t *ids, const uint8_t *kinds, uint32_t n,
		    const struct pf_prof_sample *s);
	uint32_t max_depth;
	const struct pf_prof_window *typed;
};

/* Id of a frame's display name, interned once per frame into *id (NONE until then). */
static int frame_name_id(const struct pf_prof_process *p, const struct path_walk *wk, size_t fi,
			 uint32_t *id)
{
	char name[PF_FLAME_NAME_MAX];
	if (*id != NONE)
		return 0;
	const char *fn = p->frames[fi].function;
	if (fn && *fn) /* what pf_flame_frame_name() gives, sans printf */
		return wk->name(wk->ctx, fn, strnlen(fn, sizeof(name) - 1), id);
	pf_flame_frame_name(p, &p->frames[fi], name, sizeof(name));
	return wk->name(wk->ctx, name, strlen(name), id);
}

/* Frames inlined at an address are nodes of their own, under the frame they were inlined
 * into (each with the name of the inlined function). */
static uint32_t frame_depth(const struct pf_prof_frame *fr)
{
	uint32_t d = 1;
	for (uint32_t j = 0; fr->inlined && j < fr->n_inlined; j++)
		d += fr->inlined[j].function && *fr->inlined[j].function;
	return d;
}

static int walk_paths(const struct pf_prof_process *p, const struct path_walk *wk)
{
	_cleanup_free_ uint32_t *fnames = malloc((p->n_frames ? p->n_frames : 1) * sizeof(uint32_t));
	_cleanup_free_ uint32_t *path = NULL;
	_cleanup_free_ uint8_t *kinds = NULL;
	size_t path_cap = 0;
	int rc;

	if (!fnames)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_frames; i++)
		fnames[i] = NONE;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pf_prof_sample *s = &p->samples[i];
		if (wk->typed ? !pf_prof_sample_nonzero(wk->typed, s) : !s->count)
			continue;
		if (s->stack >= p->n_stacks)
			return -EINVAL;
		const struct pf_prof_stack *st = &p->stacks[s->stack];
		size_t depth = 0;
		for (uint32_t k = 0; k < st->n_frames; k++) {
			if (st->frames[k] >= p->n_frames)
				return -EINVAL;
			depth += frame_depth(&p->frames[st->frames[k]]);
		}
		if (wk->max_depth && depth > wk->max_depth)
			return -E2BIG;
		if (depth > path_cap) {
			uint32_t *np = realloc(path, depth * sizeof(*np));
			if (!np)
				return -ENOMEM;
			path = np;
			uint8_t *nk = realloc(kinds, depth);
			if (!nk)
				return -ENOMEM;
			kinds = nk;
			path_cap = depth;
		}
		/* Leaf first in the window, root first in the tree. */
		size_t n = 0;
		for (uint32_t k = 0; k < st->n_frames; k++) {
			uint32_t fi = st->frames[st->n_frames - 1 - k];
			const struct pf_prof_frame *fr = &p->frames[fi];
			if ((rc = frame_name_id(p, wk, fi, &fnames[fi])) < 0)
				return rc;
			kinds[n] = fr->kind;
			path[n++] = fnames[fi];
			for (uint32_t j = fr->inlined ? fr->n_inlined : 0; j-- > 0;) {
				const char *in = fr->inlined[j].function;
				if (!in || !*in)
					continue;
				rc = wk->name(wk->ctx, in, strnlen(in, PF_FLAME_NAME_MAX - 1), &path[n]);
				if (rc < 0)
					return rc;
				kinds[n++] = fr->kind;
			}
		}
		rc = wk->path(wk->ctx, path, kinds, (uint32_t)n, s);
		if (rc < 0)
			return rc;
	}
	return 0;
}

struct tree_add {
	struct pf_flame *f;
	int slot;
};

static int tree_name(void *ctx, const char *s, size_t n, uint32_t *id)
{
	return intern(((struct tree_add *)ctx)->f, s, n, id);
}

static int tree_path(void *ctx, const uint32_t *ids, const uint8_t *kinds, uint32_t n,
		     const struct pf_prof_sample *s)
{
	struct tree_add *t = ctx;
	return add_path(t->f, ids, kinds, n, s->count, t->slot);
}

/* One process's samples into the tree. */
static int process_add(struct pf_flame *f, const struct pf_prof_process *p, int slot)
{
	struct tree_add t = {f, slot};
	struct path_walk wk = {.ctx = &t, .name = tree_name, .path = tree_path};
	return walk_paths(p, &wk);
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
	if (rc == 0 && nd->kind != PF_FLAME_KIND_NONE)
		rc = pf_buf_printf(out, ",\"type\":\"%s\"", pf_frame_kind_name(nd->kind));
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

/* ---- Compact form (flame.h). */

#define COMPACT_MAGIC "PFL1"
#define COMPACT_HDR 12 /* magic + 8-byte checksum */

static uint64_t compact_sum(const uint8_t *p, size_t n)
{
	return hash_bytes((const char *)p, n);
}

/* The encoder's string table and distinct stacks, both in first-occurrence order: the codecs'
 * interning table (pb_util.h), keyed by the name's bytes and by the path's ids. */
struct cenc {
	struct pb_intern strs;	   /* frame names -> string index */
	struct pb_intern stacks;   /* root-first id arrays -> stack index */
	uint64_t *weights;	   /* per stack */
	size_t cap_weights;
	size_t max_bytes;
};

static void cenc_release(struct cenc *e)
{
	pb_intern_release(&e->strs);
	pb_intern_release(&e->stacks);
	free(e->weights);
}

/* Interns s[0, n) in t as *id: -E2BIG once t's keys pass max_bytes. */
static int intern_id(struct pb_intern *t, const char *s, size_t n, size_t max_bytes, uint32_t *id)
{
	int32_t idx;
	int rc = pb_intern(t, s, n, &idx, NULL);
	if (rc < 0)
		return rc;
	if (t->keys.len > max_bytes)
		return -E2BIG;
	*id = (uint32_t)idx;
	return 0;
}

static int cenc_name(void *ctx, const char *s, size_t n, uint32_t *id)
{
	struct cenc *e = ctx;
	return intern_id(&e->strs, s, n, e->max_bytes, id);
}

/* The summed weight of distinct stack idx (just interned: added), in a growing array. */
static int weight_add(uint64_t **w, size_t *cap, int32_t idx, bool added, uint64_t weight)
{
	if (!added) {
		(*w)[idx] += weight; /* wraps like the tree's sums: same result mod 2^64 */
		return 0;
	}
	if ((size_t)idx >= *cap) {
		size_t c = *cap ? *cap * 2 : 256;
		uint64_t *nw = realloc(*w, c * sizeof(*nw));
		if (!nw)
			return -ENOMEM;
		*w = nw;
		*cap = c;
	}
	(*w)[idx] = weight;
	return 0;
}

/* Adds weight to the distinct stack path[0..n). */
static int cenc_path(void *ctx, const uint32_t *path, const uint8_t *kinds, uint32_t n,
		     const struct pf_prof_sample *s)
{
	struct cenc *e = ctx;
	(void)kinds; /* the compact form has no frame kinds */
	int32_t idx;
	bool added;
	int rc = pb_intern(&e->stacks, path, n * sizeof(*path), &idx, &added);
	if (rc < 0)
		return rc;
	return weight_add(&e->weights, &e->cap_weights, idx, added, s->count);
}

/* The same walk as process_add(): the same samples, names and order. */
static int cenc_process(struct cenc *e, const struct pf_prof_process *p)
{
	struct path_walk wk = {.ctx = e, .name = cenc_name, .path = cenc_path,
			       .max_depth = PF_FLAME_COMPACT_MAX_DEPTH};
	return walk_paths(p, &wk);
}

int pf_flame_compact_encode(const struct pf_prof_process *p, size_t max_bytes,
			    struct pf_buf *out)
{
	struct cenc e = {0};
	size_t start = out->len;
	int rc;

	if (!p)
		return -EINVAL;
	if (!max_bytes || max_bytes > PF_FLAME_COMPACT_MAX_BYTES)
		max_bytes = PF_FLAME_COMPACT_MAX_BYTES;
	e.max_bytes = max_bytes;
	pb_intern_init(&e.strs, 0);
	pb_intern_init(&e.stacks, 0);
	rc = cenc_process(&e, p);
	if (rc == 0)
		rc = pf_buf_append(out, COMPACT_MAGIC "\0\0\0\0\0\0\0\0", COMPACT_HDR);
	if (rc == 0)
		rc = pf_buf_append_uvarint(out, e.strs.n);
	for (size_t i = 0; rc == 0 && i < e.strs.n; i++) {
		rc = pf_buf_append_uvarint(out, e.strs.len[i]);
		if (rc == 0)
			rc = pf_buf_append(out, e.strs.keys.data + e.strs.off[i], e.strs.len[i]);
	}
	if (rc == 0)
		rc = pf_buf_append_uvarint(out, e.stacks.n);
	/* a stack's ids are its key bytes (4 per id, not necessarily aligned) */
	const uint8_t *prev = NULL;
	uint32_t prev_len = 0;
	for (size_t i = 0; rc == 0 && i < e.stacks.n; i++) {
		const uint8_t *cur = e.stacks.keys.data + e.stacks.off[i];
		uint32_t len = (uint32_t)(e.stacks.len[i] / sizeof(uint32_t));
		uint32_t shared = 0;
		while (shared < len && shared < prev_len &&
		       memcmp(cur + 4 * shared, prev + 4 * shared, 4) == 0)
			shared++;
		rc = pf_buf_append_uvarint(out, e.weights[i]);
		if (rc == 0)
			rc = pf_buf_append_uvarint(out, shared);
		if (rc == 0)
			rc = pf_buf_append_uvarint(out, len - shared);
		for (uint32_t k = shared; rc == 0 && k < len; k++) {
			uint32_t id;
			memcpy(&id, cur + 4 * k, sizeof(id));
			rc = pf_buf_append_uvarint(out, id);
		}
		if (rc == 0 && out->len - start > max_bytes)
			rc = -E2BIG;
		prev = cur;
		prev_len = len;
	}
	if (rc == 0 && out->len - start > max_bytes)
		rc = -E2BIG;
	if (rc == 0) {
		uint64_t sum = compact_sum(out->data + start + COMPACT_HDR,
					   out->len - start - COMPACT_HDR);
		for (int i = 0; i < 8; i++)
			out->data[start + 4 + i] = (uint8_t)(sum >> (8 * i));
	}
	cenc_release(&e);
	if (rc < 0)
		out->len = start;
	return rc;
}

/* One string of a compact form: where its bytes are. */
struct cstr {
	const uint8_t *p;
	uint32_t len;
};

/* Checks the whole form (structure, lengths, every index, the checksum) before the tree is
 * touched, and finds the strings and the start of the stack section. */
static int compact_check(const uint8_t *b, size_t len, struct cstr **strs_out, uint64_t *n_strs,
			 const uint8_t **stacks, uint64_t *n_stacks, uint32_t *max_depth)
{
	const uint8_t *p = b + COMPACT_HDR, *end = b + len;
	uint64_t sum = 0, n, ns;

	*strs_out = NULL;
	if (len < COMPACT_HDR || len > PF_FLAME_COMPACT_MAX_BYTES ||
	    memcmp(b, COMPACT_MAGIC, 4) != 0)
		return -EBADMSG;
	for (int i = 0; i < 8; i++)
		sum |= (uint64_t)b[4 + i] << (8 * i);
	if (sum != compact_sum(p, len - COMPACT_HDR))
		return -EBADMSG;
	/* every string takes at least one byte, every stack at least three */
	if (pb_varint_read(&p, end, &n) < 0 || n > (size_t)(end - p))
		return -EBADMSG;
	struct cstr *strs = malloc((n ? n : 1) * sizeof(*strs));
	if (!strs)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t sl;
		if (pb_varint_read(&p, end, &sl) < 0 || sl >= PF_FLAME_NAME_MAX ||
		    sl > (size_t)(end - p) || memchr(p, 0, sl))
			goto bad;
		strs[i] = (struct cstr){p, (uint32_t)sl};
		p += sl;
	}
	if (pb_varint_read(&p, end, &ns) < 0 || ns > (size_t)(end - p) / 3 + 1)
		goto bad;
	*stacks = p;
	uint64_t depth = 0, maxd = 0;
	for (uint64_t i = 0; i < ns; i++) {
		uint64_t w, shared, rest;
		if (pb_varint_read(&p, end, &w) < 0 || !w || pb_varint_read(&p, end, &shared) < 0 ||
		    shared > depth || pb_varint_read(&p, end, &rest) < 0 ||
		    rest > PF_FLAME_COMPACT_MAX_DEPTH - shared)
			goto bad;
		for (uint64_t k = 0; k < rest; k++) {
			uint64_t id;
			if (pb_varint_read(&p, end, &id) < 0 || id >= n)
				goto bad;
		}
		depth = shared + rest;
		maxd = pf_max(maxd, depth);
	}
	if (p != end)
		goto bad;
	*strs_out = strs;
	*n_strs = n;
	*n_stacks = ns;
	*max_depth = (uint32_t)maxd;
	return 0;
bad:
	free(strs);
	return -EBADMSG;
}

int pf_flame_add_compact(struct pf_flame *f, const void *blob, size_t len, int slot)
{
	_cleanup_free_ struct cstr *strs = NULL;
	_cleanup_free_ uint32_t *map = NULL, *path = NULL;
	const uint8_t *p, *end = (const uint8_t *)blob + len;
	uint64_t n_strs, n_stacks;
	uint32_t max_depth, depth = 0;
	int rc;

	if (slot < 0 || slot >= PF_FLAME_SLOTS || (!blob && len))
		return -EINVAL;
	if (!blob)
		return -EBADMSG;
	rc = compact_check(blob, len, &strs, &n_strs, &p, &n_stacks, &max_depth);
	if (rc < 0)
		return rc;
	map = malloc((n_strs ? n_strs : 1) * sizeof(*map));
	path = malloc((max_depth ? max_depth : 1) * sizeof(*path));
	if (!map || !path)
		return -ENOMEM;
	for (uint64_t i = 0; i < n_strs; i++) {
		rc = intern(f, (const char *)strs[i].p, strs[i].len, &map[i]);
		if (rc < 0)
			return rc;
	}
	/* Checked above: every read below succeeds and stays in bounds. */
	for (uint64_t i = 0; i < n_stacks; i++) {
		uint64_t w = 0, shared = 0, rest = 0, id = 0;
		pb_varint_read(&p, end, &w);
		pb_varint_read(&p, end, &shared);
		pb_varint_read(&p, end, &rest);
		depth = (uint32_t)shared;
		for (uint64_t k = 0; k < rest; k++) {
			pb_varint_read(&p, end, &id);
			path[depth++] = map[id];
		}
		rc = add_path(f, path, NULL, depth, w, slot);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- Distinct paths (flame.h). The same walk again, interning (kind, name) pairs and the
 * root-first id arrays in first-occurrence order. */

struct penc {
	struct pb_intern names;	 /* kind byte + name bytes -> name index */
	struct pb_intern stacks; /* root-first name indices -> stack index */
	uint64_t *weights;
	size_t cap_weights;
	const struct pf_prof_window *typed; /* per sample type weights too (nt of them) */
	size_t nt;
	uint64_t *tw;  /* stack index x nt */
	size_t cap_tw; /* stacks tw has room for */
};

/* The values of sample s (each clamped at 0, as count is) added to stack idx's row of tw. */
static int type_weights_add(struct penc *e, int32_t idx, bool added, const struct pf_prof_sample *s)
{
	if ((size_t)idx >= e->cap_tw) {
		size_t c = e->cap_tw ? e->cap_tw * 2 : 256;
		uint64_t *nw = realloc(e->tw, c * e->nt * sizeof(*nw));
		if (!nw)
			return -ENOMEM;
		e->tw = nw;
		e->cap_tw = c;
	}
	uint64_t *row = e->tw + (size_t)idx * e->nt;
	if (added)
		memset(row, 0, e->nt * sizeof(*row));
	for (size_t k = 0; k < e->nt; k++) {
		int64_t v = pf_prof_sample_value(e->typed, s, k);
		row[k] += v > 0 ? (uint64_t)v : 0;
	}
	return 0;
}

/* walk_paths() asks names before it fills the path's kinds, frame by frame: the kind of the
 * name is known only afterwards. So names are interned without kind here and the pair is
 * made in penc_path, once the path's kinds are known. */
static int penc_name(void *ctx, const char *s, size_t n, uint32_t *id)
{
	struct penc *e = ctx;
	return intern_id(&e->names, s, n, SIZE_MAX, id);
}

static int penc_path(void *ctx, const uint32_t *ids, const uint8_t *kinds, uint32_t n,
		     const struct pf_prof_sample *s)
{
	struct penc *e = ctx;
	_cleanup_free_ uint64_t *key = malloc((n ? n : 1) * sizeof(*key));
	int32_t idx;
	bool added;

	if (!key)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		key[i] = (uint64_t)ids[i] << 8 | kinds[i];
	int rc = pb_intern(&e->stacks, key, n * sizeof(*key), &idx, &added);
	if (rc == 0 && e->typed)
		rc = type_weights_add(e, idx, added, s);
	if (rc < 0)
		return rc;
	return weight_add(&e->weights, &e->cap_weights, idx, added, s->count);
}

void pf_flame_paths_release(struct pf_flame_paths *ps)
{
	if (!ps)
		return;
	for (size_t i = 0; i < ps->n_frames; i++)
		free(ps->frames[i].name);
	free(ps->frames);
	free(ps->stacks);
	free(ps->ids);
	free(ps->type_weights);
	memset(ps, 0, sizeof(*ps));
}

/* The frames of the output, each (name, kind) pair once, indexed in the order the paths
 * first use them: by name (most names have one kind), and pairs for a name's other kinds. */
struct frame_index {
	uint32_t *of_name; /* name index -> frame + 1 (0: none yet) of the name's first kind */
	uint8_t *kind;	   /* name index -> that kind */
	struct pb_intern others; /* (name index << 8 | kind) -> frame, for the other kinds */
	uint32_t *other_frame;	 /* others' index -> frame */
	size_t n_others_cap;
};

static int paths_frame(struct pf_flame_paths *ps, struct frame_index *fx, const struct penc *e,
		       uint64_t key, uint32_t *out)
{
	uint32_t ni = (uint32_t)(key >> 8);
	uint8_t kind = (uint8_t)key;
	uint32_t *slot = NULL; /* the other kind's entry, or NULL: the name's first */

	if (!fx->of_name[ni]) {
		fx->kind[ni] = kind;
	} else if (fx->kind[ni] == kind) {
		*out = fx->of_name[ni] - 1;
		return 0;
	} else {
		int32_t idx;
		bool added;
		int rc = pb_intern(&fx->others, &key, sizeof(key), &idx, &added);
		if (rc < 0)
			return rc;
		if (!added) {
			*out = fx->other_frame[idx];
			return 0;
		}
		if (PF_ARRAY_GROW(fx->other_frame, fx->n_others_cap, (size_t)idx + 1, 16) < 0)
			return -ENOMEM;
		slot = &fx->other_frame[idx];
	}
	struct pf_flame_path_frame *fr = &ps->frames[ps->n_frames];
	fr->name = malloc(e->names.len[ni] + 1);
	if (!fr->name)
		return -ENOMEM;
	memcpy(fr->name, e->names.keys.data + e->names.off[ni], e->names.len[ni]);
	fr->name[e->names.len[ni]] = 0;
	fr->kind = kind;
	*out = (uint32_t)ps->n_frames++;
	if (slot)
		*slot = *out;
	else
		fx->of_name[ni] = *out + 1;
	return 0;
}

static int paths_collect(struct pf_flame_paths *ps, const struct penc *e)
{
	size_t total = 0, nn = e->names.n ? e->names.n : 1;
	int rc = 0;

	for (size_t i = 0; i < e->stacks.n; i++)
		total += e->stacks.len[i] / sizeof(uint64_t);
	ps->stacks = calloc(e->stacks.n ? e->stacks.n : 1, sizeof(*ps->stacks));
	ps->ids = malloc((total ? total : 1) * sizeof(*ps->ids));
	/* at most one frame per path entry */
	ps->frames = calloc(total ? total : 1, sizeof(*ps->frames));
	struct frame_index fx = {.of_name = calloc(nn, sizeof(uint32_t)), .kind = malloc(nn)};
	pb_intern_init(&fx.others, 0);
	if (!ps->stacks || !ps->ids || !ps->frames || !fx.of_name || !fx.kind)
		rc = -ENOMEM;
	size_t at = 0;
	for (size_t i = 0; rc == 0 && i < e->stacks.n; i++) {
		const uint8_t *k = e->stacks.keys.data + e->stacks.off[i];
		uint32_t n = (uint32_t)(e->stacks.len[i] / sizeof(uint64_t));
		ps->stacks[i] = (struct pf_flame_path){.ids = ps->ids + at, .n = n,
						       .weight = e->weights[i]};
		for (uint32_t j = 0; rc == 0 && j < n; j++) {
			uint64_t key;
			memcpy(&key, k + j * sizeof(key), sizeof(key));
			rc = paths_frame(ps, &fx, e, key, &ps->ids[at++]);
		}
	}
	ps->n_stacks = e->stacks.n;
	pb_intern_release(&fx.others);
	free(fx.of_name);
	free(fx.kind);
	free(fx.other_frame);
	return rc;
}

static int paths_build(const struct pf_prof_window *typed, const struct pf_prof_process *p,
		       struct pf_flame_paths *ps)
{
	struct penc e = {.typed = typed, .nt = typed ? pf_prof_window_types(typed) : 0};
	struct path_walk wk = {.ctx = &e,
			       .name = penc_name,
			       .path = penc_path,
			       .max_depth = PF_FLAME_COMPACT_MAX_DEPTH,
			       .typed = typed};
	int rc;

	memset(ps, 0, sizeof(*ps));
	if (!p)
		return -EINVAL;
	pb_intern_init(&e.names, 0);
	pb_intern_init(&e.stacks, 0);
	rc = walk_paths(p, &wk);
	if (rc == 0)
		rc = paths_collect(ps, &e);
	if (rc == 0 && typed) {
		ps->n_types = e.nt;
		ps->type_weights = e.tw;
		e.tw = NULL;
	}
	pb_intern_release(&e.names);
	pb_intern_release(&e.stacks);
	free(e.weights);
	free(e.tw);
	if (rc < 0)
		pf_flame_paths_release(ps);
	return rc;
}

int pf_flame_paths_build(const struct pf_prof_process *p, struct pf_flame_paths *ps)
{
	return paths_build(NULL, p, ps);
}

int pf_flame_paths_build_types(const struct pf_prof_window *w, const struct pf_prof_process *p,
			       struct pf_flame_paths *ps)
{
	return w ? paths_build(w, p, ps) : -EINVAL;
}
