/* ebpf_util.h — helpers the eBPF integration tests share (tests/ebpf): the start-up probe that
 * skips (exit 77) where the kernel refuses BPF or perf events, and a config from a format. */
#ifndef PF_TEST_EBPF_UTIL_H
#define PF_TEST_EBPF_UTIL_H

#include "pf/profcfg.h"
#include "sampler/sampler_bpf.h"

/* Opens a sampler: NULL with *code 77 (printed SKIP) where the kernel refuses BPF or perf
 * events, NULL with *code 1 on any other failure, else the sampler (the caller frees it). */
struct pf_sampler *ebpf_probe(int *code);
/* A config parsed from the printf-style YAML; fails the test (cmocka) when it does not parse. */
struct pf_profcfg *ebpf_config(const char *fmt, ...);

#endif
