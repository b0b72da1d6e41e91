/* heap.c — see pf/heap.h. */
#include "pf/heap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
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

/* Opened once and kept for the process's life: no path walk through /proc at each read,
 * and pread shares no file offset between threads. */
static pthread_once_t statm_once = PTHREAD_ONCE_INIT;
static int statm_fd = -1;

static void statm_open(void)
{
	statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
}

int pf_heap_statm(uint64_t *resident, uint64_t *shared)
{
	pthread_once(&statm_once, statm_open);
	if (statm_fd < 0)
		return -ENOENT;
	char buf[128];
	ssize_t n = pread(statm_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	unsigned long long size, res, shr; /* "size resident shared text lib data dt", pages */
	if (sscanf(buf, "%llu %llu %llu", &size, &res, &shr) != 3)
		return -EIO;
	long page = sysconf(_SC_PAGESIZE);
	uint64_t pg = (uint64_t)(page > 0 ? page : 4096);
	*resident = (uint64_t)res * pg;
	*shared = (uint64_t)shr * pg;
	return 0;
}

size_t pf_heap_resident_anon(void)
{
	uint64_t res, shr;
	if (pf_heap_statm(&res, &shr) < 0 || shr > res)
		return 0;
	return (size_t)(res - shr);
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

int pf_heap_map_large(size_t bytes)
{
	if (bytes > INT_MAX)
		return -EINVAL;
	return mallopt(M_MMAP_THRESHOLD, (int)bytes) == 1 ? 0 : -EINVAL;
}
