/* pf/heap.h — giving a long-running process's freed heap back to the system when it is worth
 * it. malloc_trim(0) after every unit of work (a profile window) costs madvise calls, TLB
 * flushes on every CPU the process runs on and, during the next unit, page faults (zeroed
 * pages) for the same memory again; never trimming keeps a burst's pages resident for good.
 *
 * pf_heap_give_back() trims when either figure grew more than `slack` bytes past its mark:
 *   - the free heap (mallinfo2().fordblks, every arena) since the last trim: a burst freed
 *     (a symbolization that opened DWARF, a first window) goes back;
 *   - the resident anonymous memory (/proc/self/statm) since right after the last trim: a
 *     burst that reused the free chunks a trim gave back (the next such window) faulted
 *     them in again, and the free heap, already that large, does not show it.
 * The steady churn of a unit (aggregation, encoding buffers: reused in the same resident
 * chunks) moves neither and stays resident. The marks follow both figures down. Value type;
 * not thread-safe (one caller). */
#ifndef PF_HEAP_H
#define PF_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PF_HEAP_TRIM_SLACK ((size_t)1 << 20)

struct pf_heap_trim {
	size_t low;	     /* the least free heap seen since the last trim */
	size_t resident_low; /* the least resident anonymous memory since right after it */
	bool started;	     /* the marks are set */
	unsigned long trims, skipped;
};

/* The decision alone: free_bytes is the free heap now, resident_bytes the resident
 * anonymous memory. True when a trim is due; the marks move either way (after a trim both
 * are the figures given: what stays is not counted again; pf_heap_trimmed lowers the
 * resident one to what the trim left). */
bool pf_heap_trim_due(struct pf_heap_trim *t, size_t free_bytes, size_t resident_bytes,
		      size_t slack);
void pf_heap_trimmed(struct pf_heap_trim *t, size_t resident_bytes);
/* This process's resident set and its shared (file-backed and shmem) part, in bytes, from
 * /proc/self/statm (opened once, read with pread: safe from any thread). 0 or -errno. */
int pf_heap_statm(uint64_t *resident, uint64_t *shared);
/* Resident anonymous memory of this process, in bytes (resident - shared); 0 when
 * unreadable. */
size_t pf_heap_resident_anon(void);
/* Reads both figures, and trims (malloc_trim(0)) when due. Whether it trimmed. */
bool pf_heap_give_back(struct pf_heap_trim *t, size_t slack);

/* Blocks of PF_HEAP_MAP_LARGE bytes and more get a mapping of their own, unmapped at their
 * free. glibc starts there but raises the bound to the size of each mapped block freed (up
 * to 32 MiB), and from then on blocks that large come from the heap and, freed, stay
 * resident until a trim: a burst of large blocks (libdw's line tables for a program with
 * full DWARF, 1-2 MB each; a large export's buffers) left ~2 MB resident between windows.
 * pf_heap_map_large() fixes the bound (mallopt M_MMAP_THRESHOLD; glibc then also keeps its
 * heap-top trim bound at 128 KiB). Call once at start. 0, or -EINVAL when malloc refuses. */
#define PF_HEAP_MAP_LARGE ((size_t)128 << 10)
int pf_heap_map_large(size_t bytes);

#endif
