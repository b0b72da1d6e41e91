/* alloc_track.c — see alloc_track.h. */
#include "sampler/alloc_track.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

void pf_alloc_gaps(uint64_t mean, uint64_t *gaps, size_t n)
{
	/* slice i holds survival s in (b, a], a = 1 - i/n, b = 1 - (i+1)/n; with x = -m ln s,
	 * E[x | slice] = m (a (1 - ln a) - b (1 - ln b)) / (a - b), s ln s -> 0 at s = 0 */
	double m = (double)(mean ? mean : 1);
	for (size_t i = 0; i < n; i++) {
		double a = 1.0 - (double)i / (double)n, b = 1.0 - (double)(i + 1) / (double)n;
		double fa = a * (1 - log(a)), fb = b > 0 ? b * (1 - log(b)) : 0;
		double g = m * (fa - fb) / (a - b);
		gaps[i] = g < 1 ? 1 : g > 1e18 ? (uint64_t)1e18 : (uint64_t)(g + 0.5);
	}
}

void pf_alloc_weight(uint64_t size, uint64_t mean, double *bytes, double *objects)
{
	double m = (double)(mean ? mean : 1), s = (double)size;
	double p = -expm1(-s / m); /* 1 - exp(-s/m), precise for small s */
	if (!(p > 0)) {
		*bytes = m;
		*objects = size ? m / s : 0;
		return;
	}
	*bytes = s / p;
	*objects = 1 / p;
}

struct slot {
	uint64_t addr; /* 0: empty */
	size_t idx;
};

struct pf_alloc_track {
	struct slot *s;
	size_t n_slots, n, max;
};

struct pf_alloc_track *pf_alloc_track_new(size_t max)
{
	if (max < 1 || max > (1u << 24)) {
		errno = EINVAL;
		return NULL;
	}
	struct pf_alloc_track *t = calloc(1, sizeof(*t));
	size_t n = 16;
	while (n < max * 2)
		n *= 2;
	if (t)
		t->s = calloc(n, sizeof(*t->s));
	if (!t || !t->s) {
		free(t);
		errno = ENOMEM;
		return NULL;
	}
	t->n_slots = n;
	t->max = max;
	return t;
}

void pf_alloc_track_free(struct pf_alloc_track *t)
{
	if (!t)
		return;
	free(t->s);
	free(t);
}

static size_t slot_of(uint64_t addr, size_t mask)
{
	uint64_t h = addr * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 17) & mask;
}

int pf_alloc_track_put(struct pf_alloc_track *t, uint64_t addr, size_t idx)
{
	if (!addr)
		return -EINVAL;
	size_t mask = t->n_slots - 1, j = slot_of(addr, mask);
	/* at most half full: a free slot is always found within n_slots steps */
	for (size_t k = 0; k < t->n_slots; k++, j = (j + 1) & mask) {
		if (t->s[j].addr == addr) {
			t->s[j].idx = idx;
			return 0;
		}
		if (!t->s[j].addr) {
			if (t->n >= t->max)
				return -ENOSPC;
			t->s[j] = (struct slot){addr, idx};
			t->n++;
			return 0;
		}
	}
	return -ENOSPC;
}

int pf_alloc_track_take(struct pf_alloc_track *t, uint64_t addr, size_t *idx)
{
	if (!addr)
		return -ENOENT;
	size_t mask = t->n_slots - 1, j = slot_of(addr, mask);
	for (size_t k = 0; k < t->n_slots && t->s[j].addr; k++, j = (j + 1) & mask) {
		if (t->s[j].addr != addr)
			continue;
		*idx = t->s[j].idx;
		/* backward-shift deletion keeps every probe chain unbroken */
		size_t hole = j;
		for (size_t m = 0; m < t->n_slots; m++) {
			j = (j + 1) & mask;
			if (!t->s[j].addr)
				break;
			size_t home = slot_of(t->s[j].addr, mask);
			/* move j into the hole when its home is not in (hole, j] */
			if ((j > hole && (home <= hole || home > j)) ||
			    (j < hole && home <= hole && home > j)) {
				t->s[hole] = t->s[j];
				hole = j;
			}
		}
		t->s[hole] = (struct slot){0, 0};
		t->n--;
		return 0;
	}
	return -ENOENT;
}

size_t pf_alloc_track_count(const struct pf_alloc_track *t)
{
	return t->n;
}
