/* array.c — pf_array_grow(), pf_array_grow_fill(): doubling growth of a caller-owned array,
 * overflow checked. */
#include "pf/array.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int pf_array_grow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first)
{
	if (need <= *cap)
		return 0;
	if (!elem)
		return -ENOMEM;
	size_t nc = *cap ? *cap : (first ? first : 1);
	while (nc < need) {
		if (nc > SIZE_MAX / 2)
			return -ENOMEM;
		nc *= 2;
	}
	if (nc > SIZE_MAX / elem)
		return -ENOMEM;
	void *old;
	memcpy(&old, arrp, sizeof(old));
	void *p = realloc(old, nc * elem);
	if (!p)
		return -ENOMEM;
	memcpy(arrp, &p, sizeof(p));
	*cap = nc;
	return 0;
}

int pf_array_grow_fill(void *arrp, size_t *cap, size_t need, size_t elem, int fill)
{
	if (need <= *cap)
		return 0;
	size_t old_cap = *cap;
	size_t nc = old_cap > SIZE_MAX / 2 ? SIZE_MAX : old_cap * 2;
	if (nc < need)
		nc = need;
	if (!elem || nc > SIZE_MAX / elem)
		return -ENOMEM;
	void *old;
	memcpy(&old, arrp, sizeof(old));
	unsigned char *p = realloc(old, nc * elem);
	if (!p)
		return -ENOMEM;
	memset(p + old_cap * elem, fill, (nc - old_cap) * elem);
	memcpy(arrp, &p, sizeof(p));
	*cap = nc;
	return 0;
}

int pf_array_index_reserve(size_t **slot, size_t *n_slot, size_t n, size_t first,
			   size_t (*hash)(const void *ctx, size_t i), const void *ctx)
{
	if ((n + 1) * 2 <= *n_slot)
		return 0;
	size_t ns = *n_slot ? *n_slot * 2 : first;
	size_t *sl = calloc(ns, sizeof(*sl));
	if (!sl)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t j = hash(ctx, i) & (ns - 1);
		while (sl[j])
			j = (j + 1) & (ns - 1);
		sl[j] = i + 1;
	}
	free(*slot);
	*slot = sl;
	*n_slot = ns;
	return 0;
}
