/* pf/heap.h — giving a long-running process's freed heap back to the system when it is worth
 * it. malloc_trim(0) after every unit of work (a profile window) costs madvise calls, TLB
 * flushes on every CPU the process runs on and, during the next unit, page faults (zeroed
 * pages) for the same memory again; never trimming keeps a burst's pages resident for good.
 *
 * pf_heap_give_back() trims when the free heap (mallinfo2().fordblks, every arena) grew more
 * than `slack` bytes past its low-water mark since the last trim: the steady churn of a unit
 * (aggregation, encoding buffers: reused in the same free chunks) stays resident, a burst
 * (a symbolization that opened DWARF, a first window) goes back. Value type; not
 * thread-safe (one caller). */
#ifndef PF_HEAP_H
#define PF_HEAP_H

#include <stdbool.h>
#include <stddef.h>

#define PF_HEAP_TRIM_SLACK ((size_t)1 << 20)

struct pf_heap_trim {
	size_t low;   /* the least free heap seen since the last trim */
	bool started; /* low is set */
	unsigned long trims, skipped;
};

/* The decision alone: free_bytes is the free heap now. True when a trim is due; the mark
 * moves either way (after a trim it is free_bytes: what stays free is not counted again). */
bool pf_heap_trim_due(struct pf_heap_trim *t, size_t free_bytes, size_t slack);
/* Reads the free heap, and trims (malloc_trim(0)) when due. Whether it trimmed. */
bool pf_heap_give_back(struct pf_heap_trim *t, size_t slack);

#endif
