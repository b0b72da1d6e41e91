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
