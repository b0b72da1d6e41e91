/* prof_fixture.h — test windows (pf/profile.h) for the encoder, checker and exporter tests.
 *
 * prof_fixture_window() builds a window of two processes running the same binary:
 *   pid 100 "app": mappings /usr/bin/app (build id aabbccdd...) and [kernel.kallsyms];
 *     frames main, work_a, work_b, do_syscall (kernel), one unsymbolized address;
 *     stacks work_a<-main (twice, as stacks 0 and 3: the encoder must dedup),
 *     work_b<-main, do_syscall<-?<-main; samples: work_a 4 (tid 100 "app"), work_b 2
 *     (tid 101 "worker"), kernel 1, work_a again 1 (stack 3, tid 100);
 *   pid 200 "other": same mapping and functions, stack work_a<-main, 3 samples (tid 200).
 * Window [PROF_FIXTURE_START, +10 s), 99 Hz, host "host-a". */
#ifndef PF_TESTS_PROF_FIXTURE_H
#define PF_TESTS_PROF_FIXTURE_H

#include "pf/profile.h"

#define PROF_FIXTURE_START 1700000000000000000ull
#define PROF_FIXTURE_NS (10ull * 1000000000ull)

enum {
	PROF_FIX_TIMESTAMPS = 1 << 0, /* per-sample timestamps on every sample */
	PROF_FIX_LINK = 1 << 1,       /* sample 0 of pid 100 carries a trace link */
	PROF_FIX_MIXED = 1 << 2,      /* timestamps on all samples but one of pid 100 */
	/* work_a is the C++ function "app::work_a(int)" (system name "_ZN3app6work_aEi", line
	 * 21 calling mid) with two functions inlined at its address, innermost first:
	 * "app::leaf()" ("_ZN3app4leafEv", app.h:3) and "mid" (no system name, app.c:15). */
	PROF_FIX_NAMES = 1 << 3,
};

struct pf_prof_window *prof_fixture_window(unsigned flags);

/* prof_fixture_typed_window(): the same process 100 as a pprof source would give it: explicit
 * sample types alloc_objects/count and alloc_space/bytes, period type space/bytes, period
 * 524288, default sample type alloc_space, pid 0 (unknown), no thread ids; samples
 *   0: work_a <- main  values {3, 3000}  labels worker="a", bytes=1000 (unit "bytes")
 *   1: work_b <- main  values {0, 512}   (zero in the first type only)
 *   2: work_a <- main  values {0, 0}     (no weight: left out by the encoders)
 * and original_payload "PPROF" (format "pprof"). */
struct pf_prof_window *prof_fixture_typed_window(void);

#endif
