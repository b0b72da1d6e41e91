# sampler.cmake — the agent's data plane, kernel to symbolized window, as the static
# library `agent_sampler` plus the debugging tool `profleet-sample`. Included from
# agent/CMakeLists.txt; paths are relative to this file so it works from any directory scope.
#
#   bpf/cpu_sampler.bpf.c  perf_event + tp_btf programs     -> cpu_sampler.bpf.o -> .skel.h
#   bpf/walk*.bpf.h        its user-stack walk (native, JIT, Python), included by it alone
#   sampler_bpf.c          the pf_sampler object (sampler_int.h: its parts, the only code
#                          touching the skeleton): load, attach, perf events, config, poll
#   sampler_read.c         the ring buffers' read path
#   sampler_window.c       windows and the span triggers' ring
#   sampler_capture.c      captures
#   sampler_stats.c        counters
#   sampler_offcpu.c       off-CPU profiles: switch programs attached while on, their window
#   sampler_alloc.c        allocation captures: allocator probes attached while one runs
#   alloc_syms.c           a process's allocator entry points (maps + ELF symbols)
#   alloc_track.c          sample gaps and weights, the table of sampled live addresses
#   procinfo.c             process attributes, filters, pid verdicts
#   ../symbolize/symbolize.c  processes, JIT maps and frames to names (symbolize_int.h: its parts)
#   ../symbolize/elf_read.c   libelf helpers: sections, build ids, DWARF presence
#   ../symbolize/elf_file.c   one opened ELF file: segments, symbols, its debug file
#   ../symbolize/elf_cache.c  the LRU cache of opened ELF files, a mapping's file
#   ../symbolize/elf_lines.c  the cached files' line tables (requests, builds, lookups)
#   ../symbolize/proc_maps.c  /proc/PID/maps (PROCMAP_QUERY or text)
#   ../symbolize/kernel_syms.c kernel frames: /proc/kallsyms or the BPF resolver
#   ../symbolize/rcache.c     the resolved-address cache and its interned names
#   ../symbolize/demangle.c   C++/Rust names (libiberty), cached
#   ../symbolize/line_table.c source lines and inlined functions per file, built in a child
#   ../symbolize/perf_map.c   JIT symbol maps (/tmp/perf-<pid>.map) of runtimes that write them
#   ../symbolize/vdso.c       the vDSO image the kernel maps into every process ([vdso])
#   ../symbolize/gopclntab.c  Go function names from .gopclntab (Go binaries without .symtab)
#   aggregate.c            raw samples -> struct pf_prof_window
#   sample_ring.c          recent samples kept for lookback_seconds (span triggers cut from it)
#   ../unwind/unwind_table.c  .eh_frame/.debug_frame -> compact unwind tables (libdw CFI), disk cache
#   ../unwind/table_builder.c per-file tables (unwind, source lines) built in a short-lived child
#   ../unwind/unwinder.c      unwind tables and each process's mappings in the kernel's maps
#   ../interp/python_unwind.c CPython processes' entries for the kernel's Python walk, frame names
#   ../interp/v8_unwind.c     node processes' entries for the kernel's V8 walk, JS frame names
#   ../interp/hotspot_unwind.c JVMs: code-cache addresses to Java frames, their names
#   ../interp/interp_unwind.c what those walkers share: their switch, the unsupported list
#
# The BPF object is built the way libbpf-bootstrap's bpf_object() does it: its own compiler
# (clang -target bpf), its own flags (never the user-space ones: no sanitizers, no -Werror
# set for gcc), vmlinux.h dumped at build time from the running kernel's BTF (the libbpf-tools layout).

set(PF_SAMPLER_DIR ${CMAKE_CURRENT_LIST_DIR})
set(PF_SAMPLER_GEN ${CMAKE_CURRENT_BINARY_DIR}/sampler_gen)

foreach(lib libbpf libelf libdw libxxhash)
	string(TOUPPER "PF_${lib}" var)
	if(NOT TARGET PkgConfig::${var})
		pkg_check_modules(${var} REQUIRED IMPORTED_TARGET GLOBAL ${lib})
	endif()
endforeach()

find_program(PF_BPF_CLANG NAMES clang clang-14 REQUIRED)
find_program(PF_BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)
set(PF_VMLINUX_BTF "/sys/kernel/btf/vmlinux" CACHE FILEPATH "Kernel BTF that vmlinux.h is dumped from")

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
	set(PF_BPF_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
	set(PF_BPF_ARCH arm64)
else()
	set(PF_BPF_ARCH ${CMAKE_SYSTEM_PROCESSOR})
endif()

# BPF compiler flags, kept apart from CMAKE_C_FLAGS and the pf_warnings target.
set(PF_BPF_CFLAGS -g -O2 -target bpf -D__TARGET_ARCH_${PF_BPF_ARCH} -Wall -Werror
	-Wno-unused-function -fno-stack-protector)

add_custom_command(OUTPUT ${PF_SAMPLER_GEN}/vmlinux.h
	COMMAND ${CMAKE_COMMAND} -E make_directory ${PF_SAMPLER_GEN}
	COMMAND ${PF_BPFTOOL} btf dump file ${PF_VMLINUX_BTF} format c > ${PF_SAMPLER_GEN}/vmlinux.h.tmp
	COMMAND ${CMAKE_COMMAND} -E rename ${PF_SAMPLER_GEN}/vmlinux.h.tmp ${PF_SAMPLER_GEN}/vmlinux.h
	COMMENT "bpftool: vmlinux.h from ${PF_VMLINUX_BTF}"
	VERBATIM)

add_custom_command(OUTPUT ${PF_SAMPLER_GEN}/cpu_sampler.bpf.o
	COMMAND ${PF_BPF_CLANG} ${PF_BPF_CFLAGS} -I${PF_SAMPLER_GEN} -I${PF_SAMPLER_DIR}/bpf
		-c ${PF_SAMPLER_DIR}/bpf/cpu_sampler.bpf.c -o ${PF_SAMPLER_GEN}/cpu_sampler.bpf.o
	DEPENDS ${PF_SAMPLER_DIR}/bpf/cpu_sampler.bpf.c ${PF_SAMPLER_DIR}/bpf/cpu_sampler.h
		${PF_SAMPLER_DIR}/bpf/walk.bpf.h ${PF_SAMPLER_DIR}/bpf/walk_python.bpf.h
		${PF_SAMPLER_GEN}/vmlinux.h
	COMMENT "clang -target bpf: cpu_sampler.bpf.o"
	VERBATIM)

add_custom_command(OUTPUT ${PF_SAMPLER_GEN}/cpu_sampler.skel.h
	COMMAND ${PF_BPFTOOL} gen skeleton ${PF_SAMPLER_GEN}/cpu_sampler.bpf.o name cpu_sampler_bpf
		> ${PF_SAMPLER_GEN}/cpu_sampler.skel.h.tmp
	COMMAND ${CMAKE_COMMAND} -E rename ${PF_SAMPLER_GEN}/cpu_sampler.skel.h.tmp
		${PF_SAMPLER_GEN}/cpu_sampler.skel.h
	DEPENDS ${PF_SAMPLER_GEN}/cpu_sampler.bpf.o
	COMMENT "bpftool gen skeleton: cpu_sampler.skel.h"
	VERBATIM)
add_custom_target(agent_sampler_skel DEPENDS ${PF_SAMPLER_GEN}/cpu_sampler.skel.h)

add_library(agent_sampler STATIC
	${PF_SAMPLER_DIR}/sampler_bpf.c ${PF_SAMPLER_DIR}/sampler_read.c
	${PF_SAMPLER_DIR}/sampler_window.c ${PF_SAMPLER_DIR}/sampler_capture.c
	${PF_SAMPLER_DIR}/sampler_stats.c ${PF_SAMPLER_DIR}/sampler_offcpu.c
	${PF_SAMPLER_DIR}/sampler_alloc.c ${PF_SAMPLER_DIR}/alloc_syms.c
	${PF_SAMPLER_DIR}/alloc_track.c
	${PF_SAMPLER_DIR}/procinfo.c
	${PF_SAMPLER_DIR}/../symbolize/symbolize.c ${PF_SAMPLER_DIR}/../symbolize/demangle.c
	${PF_SAMPLER_DIR}/../symbolize/line_table.c ${PF_SAMPLER_DIR}/../symbolize/perf_map.c
	${PF_SAMPLER_DIR}/../symbolize/vdso.c ${PF_SAMPLER_DIR}/../symbolize/gopclntab.c
	${PF_SAMPLER_DIR}/../symbolize/elf_read.c ${PF_SAMPLER_DIR}/../symbolize/elf_file.c
	${PF_SAMPLER_DIR}/../symbolize/elf_cache.c ${PF_SAMPLER_DIR}/../symbolize/elf_lines.c
	${PF_SAMPLER_DIR}/../symbolize/proc_maps.c ${PF_SAMPLER_DIR}/../symbolize/kernel_syms.c
	${PF_SAMPLER_DIR}/../symbolize/rcache.c
	${PF_SAMPLER_DIR}/aggregate.c ${PF_SAMPLER_DIR}/sample_ring.c
	${PF_SAMPLER_DIR}/../unwind/unwind_table.c ${PF_SAMPLER_DIR}/../unwind/table_builder.c
	${PF_SAMPLER_DIR}/../unwind/unwinder.c ${PF_SAMPLER_DIR}/../interp/python_unwind.c
	${PF_SAMPLER_DIR}/../interp/v8_unwind.c ${PF_SAMPLER_DIR}/../interp/interp_unwind.c
	${PF_SAMPLER_DIR}/../interp/hotspot_unwind.c)
add_dependencies(agent_sampler agent_sampler_skel)
# libiberty (Debian libiberty-dev) has no pkg-config file: a static library and its headers.
find_library(PF_LIBIBERTY NAMES libiberty.a iberty REQUIRED)
target_include_directories(agent_sampler
	PUBLIC ${PF_SAMPLER_DIR}/..
	PRIVATE ${PF_SAMPLER_GEN})
target_link_libraries(agent_sampler
	PUBLIC pf_common agent_interp
	PRIVATE pf_warnings PkgConfig::PF_LIBBPF PkgConfig::PF_LIBELF PkgConfig::PF_LIBDW
	PkgConfig::PF_LIBXXHASH
	${PF_LIBIBERTY} m)

add_executable(profleet-sample ${PF_SAMPLER_DIR}/sample_main.c)
target_link_libraries(profleet-sample PRIVATE agent_sampler pf_common pf_warnings)
