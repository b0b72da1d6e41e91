/* heap.c — see pf/heap.h. */
#include "pf/heap.h"

#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <unistd.h>

bool pf_heap_trim_due(struct pf_heap_trim *t, size_t free_bytes, size_t resident_bytes,
		      size_t slack)
{
	if (!t->started || free_bytes < t->low)
		t->low = free_bytes;
	if (!t->started || resident_bytes < t->resident_low)
		t->resident_low = resident_bytes;
	t->started = true;
	if (free_bytes - t->low <= slack && resident_bytes - t->resident_low <= slack) {
		t->skipped++;
		return false;
	}
	t->low = free_bytes;
	t->resident_low = resident_bytes;
	t->trims++;
	return true;
}

void pf_heap_trimmed(struct pf_heap_trim *t, size_t resident_bytes)
{
	if (resident_bytes && resident_bytes < t->resident_low)
		t->resident_low = resident_bytes;
}

size_t pf_heap_resident_anon(void)
{
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[128];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	unsigned long size, resident, shared;
	long page = sysconf(_SC_PAGESIZE);
	if (sscanf(buf, "%lu %lu %lu", &size, &resident, &shared) != 3 || page <= 0 ||
	    shared > resident)
		return 0;
	return (size_t)(resident - shared) * (size_t)page;
}

bool pf_heap_give_back(struct pf_heap_trim *t, size_t slack)
{
	struct mallinfo2 mi = mallinfo2();
	if (!pf_heap_trim_due(t, mi.fordblks, pf_heap_resident_anon(), slack))
		return false;
	malloc_trim(0);
	pf_heap_trimmed(t, pf_heap_resident_anon());
	return true;
}
