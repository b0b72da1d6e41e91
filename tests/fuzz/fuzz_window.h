/* fuzz_window.h — invariants of a decoded window (pf/profile.h), shared by the profile fuzz
 * targets: every index in range, every array its documented length, strings non-NULL where
 * the contract says so; and per-type value sums, to compare a window with its re-decoded
 * encoding. */
#ifndef PF_TESTS_FUZZ_WINDOW_H
#define PF_TESTS_FUZZ_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "pf/profile.h"

#define FUZZ_MAX_TYPES 64

/* FUZZ_CHECKs every structural rule of w (aborts on the first broken one). */
void fuzz_window_check(const struct pf_prof_window *w);

/* Sums of the values of sample type k over every sample of every process, k < FUZZ_MAX_TYPES
 * (wrapping arithmetic: only compared for equality). Returns the number of types. */
size_t fuzz_window_sums(const struct pf_prof_window *w, uint64_t sums[FUZZ_MAX_TYPES]);

#endif
