/* array.c — pf_array_grow(): doubling growth of a caller-owned array, overflow checked. */
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
