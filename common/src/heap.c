/* heap.c — see pf/heap.h. */
#include "pf/heap.h"

#include <malloc.h>

bool pf_heap_trim_due(struct pf_heap_trim *t, size_t free_bytes, size_t slack)
{
	if (!t->started || free_bytes < t->low) {
		t->low = free_bytes;
		t->started = true;
	}
	if (free_bytes - t->low <= slack) {
		t->skipped++;
		return false;
	}
	t->low = free_bytes;
	t->trims++;
	return true;
}

bool pf_heap_give_back(struct pf_heap_trim *t, size_t slack)
{
	struct mallinfo2 mi = mallinfo2();
	if (!pf_heap_trim_due(t, mi.fordblks, slack))
		return false;
	malloc_trim(0);
	return true;
}
