/* perf_map.h — a process's JIT symbol map (/tmp/perf-<pid>.map).
 *
 * Owns: parsing the map that JIT runtimes write for perf — one "START SIZE name" line per
 * compiled function, START and SIZE in hex (with or without 0x), the name the rest of the line
 * (V8/Node's --perf-basic-prof, the JVM's perf-map-agent, .NET's DOTNET_PerfMapEnabled,
 * LuaJIT, Julia) — into one sorted array of ranges and one string blob, and the lookup of an
 * address in it. A later line for the same start replaces the earlier one (code moved or
 * recompiled in place), as perf reads it. Malformed lines are skipped and counted.
 *
 * Bounded: a file over PF_PERF_MAP_MAX_BYTES or with more than PF_PERF_MAP_MAX_ENTRIES lines is
 * refused whole (-EFBIG; the agent's memory is not the runtime's to grow). Names are cut at
 * PF_PERF_MAP_MAX_NAME bytes. */
#ifndef PF_AGENT_PERF_MAP_H
#define PF_AGENT_PERF_MAP_H

#include <stddef.h>
#include <stdint.h>

#define PF_PERF_MAP_MAX_BYTES ((size_t)8 << 20)
#define PF_PERF_MAP_MAX_ENTRIES ((size_t)128 << 10)
#define PF_PERF_MAP_MAX_NAME 512

struct pf_perf_map;

/* Parses the map read from fd (from its current offset to its end) into *out. 0, -EFBIG past
 * the bounds, -ENOMEM, or -errno of read. *skipped (may be NULL) receives the number of
 * malformed lines. */
int pf_perf_map_read(int fd, struct pf_perf_map **out, size_t *skipped);
/* The same from a buffer (tests, fuzzing). */
int pf_perf_map_parse(const char *text, size_t len, struct pf_perf_map **out, size_t *skipped);
/* The name of the function whose range holds addr, or NULL. */
const char *pf_perf_map_find(const struct pf_perf_map *m, uint64_t addr);
size_t pf_perf_map_entries(const struct pf_perf_map *m);
/* The memory it holds, in bytes. */
size_t pf_perf_map_bytes(const struct pf_perf_map *m);
void pf_perf_map_free(struct pf_perf_map *m);

#endif
