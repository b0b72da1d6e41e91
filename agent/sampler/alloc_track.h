/* alloc_track.h — the arithmetic and book-keeping of sampled allocations, apart from BPF.
 *
 * Owns: the exponential gaps the kernel draws the next sample from (pf_alloc_gaps), the
 * unbiased estimate a sample stands for (pf_alloc_weight: a size-s allocation is sampled with
 * probability 1 - exp(-s / mean), so it counts as 1/p objects and s/p bytes, as Go's and
 * tcmalloc's heap profiles weight theirs), and the table of sampled addresses still live
 * (address -> the caller's sample index; bounded: a full table refuses, counted by its
 * caller). Not thread-safe. */
#ifndef PF_AGENT_ALLOC_TRACK_H
#define PF_AGENT_ALLOC_TRACK_H

#include <stddef.h>
#include <stdint.h>

/* n gaps (bytes, each >= 1): the mean of each of n equally likely slices of the exponential
 * distribution with this mean, so that a gap drawn uniformly from them has the mean exactly. */
void pf_alloc_gaps(uint64_t mean, uint64_t *gaps, size_t n);

/* The estimate a sampled allocation of size bytes stands for, sampling at mean bytes. */
void pf_alloc_weight(uint64_t size, uint64_t mean, double *bytes, double *objects);

struct pf_alloc_track;

/* At most max addresses (1..1<<24). NULL and errno. */
struct pf_alloc_track *pf_alloc_track_new(size_t max);
void pf_alloc_track_free(struct pf_alloc_track *t);
/* addr -> idx (replaces an entry of addr). 0, -ENOSPC (full), -EINVAL (addr 0). */
int pf_alloc_track_put(struct pf_alloc_track *t, uint64_t addr, size_t idx);
/* Takes addr's entry out into *idx. 0 or -ENOENT. */
int pf_alloc_track_take(struct pf_alloc_track *t, uint64_t addr, size_t *idx);
size_t pf_alloc_track_count(const struct pf_alloc_track *t);

#endif
