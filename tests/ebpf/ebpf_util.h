/* ebpf_util.h — helpers the eBPF integration tests share (tests/ebpf): the start-up probe that
 * skips (exit 77) where the kernel refuses BPF or perf events, and a config from a format. */
#ifndef PF_TEST_EBPF_UTIL_H
#define PF_TEST_EBPF_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "pf/profcfg.h"
#include "pf/profile.h"
#include "sampler/sampler_bpf.h"

/* Opens a sampler: NULL with *code 77 (printed SKIP) where the kernel refuses BPF or perf
 * events, NULL with *code 1 on any other failure, else the sampler (the caller frees it). */
struct pf_sampler *ebpf_probe(int *code);
/* A config parsed from the printf-style YAML; fails the test (cmocka) when it does not parse. */
struct pf_profcfg *ebpf_config(const char *fmt, ...);

/* Whether a frame of stack st of p is the function fn. */
bool ebpf_stack_has(const struct pf_prof_process *p, const struct pf_prof_stack *st,
		    const char *fn);

/* The CPU time process pid has run so far, in ns (/proc/PID/schedstat), 0 when unreadable: for
 * sample-count checks that follow the CPU a workload got on a shared host. */
uint64_t ebpf_proc_cpu_ns(pid_t pid);

/* A test binary's main: skips (77) or fails as ebpf_probe says, builds its workload with
 * build (fails when it returns < 0), runs the cmocka group, then removes dir. Needs
 * <cmocka.h> included before this header. */
#ifdef cmocka_unit_test
int ebpf_main(const struct CMUnitTest *tests, size_t n, int (*build)(void), const char *dir);
#define EBPF_MAIN(tests, build, dir) ebpf_main(tests, sizeof(tests) / sizeof(tests[0]), build, dir)
#endif

#endif
