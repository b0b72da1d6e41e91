/* proc_maps.h — the executable mappings of a process, as the symbolizer reads them.
 *
 * Owns: reading /proc/PID/maps through the PROCMAP_QUERY ioctl (Linux 6.11; one call per
 * executable mapping instead of the kernel formatting every mapping as text) or by parsing
 * its text, into an array of struct pmap sorted by address, with each [vdso] checked against
 * the agent's own image while the process lives; and asking whether an address range of the
 * agent itself lies in a read-only mapping of a given file. Which processes are kept, and
 * the ELF file of each mapping, are the symbolizer's (symbolize.c, elf_cache.h). */
#ifndef PF_AGENT_PROC_MAPS_H
#define PF_AGENT_PROC_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbolize/elf_read.h"

struct elf_file;

struct pmap {
	uint64_t start, end, offset;
	uint64_t dev, ino;
	char *path;
	char build_id[PF_BUILD_ID_HEX];
	bool special; /* [vdso], [anon], ...: no file */
	int8_t vdso;  /* a [vdso] holding the agent's own image (pf_vdso_same): 1, else 0 or -1 */
	struct elf_file *elf; /* its file in the ELF cache, while elf_gen is the symbolizer's */
	uint64_t elf_gen;
};

/* pid's executable mappings (file mappings, [vdso], anonymous code) into *out (malloc'd, *n
 * entries, address order). 0, -ENOENT when the process is gone, or another -errno. */
int pmap_read_all(uint32_t pid, struct pmap **out, size_t *n);
/* Frees maps[0, n) and their paths. */
void pmap_free_all(struct pmap *maps, size_t n);

/* The executable mappings of pid as pmap_read_all reads them, one line each ("start-end
 * offset dev inode path"), through the PROCMAP_QUERY ioctl (text false; -ENOTTY before Linux
 * 6.11) or by parsing the text of /proc/PID/maps (text true), for tests and tools. Bytes
 * written, or -errno (-ENOSPC when buf is too small). */
int pf_exec_maps_render(uint32_t pid, bool text, char *buf, size_t cap);

/* True when [a, a + len) lies in one read-only mapping of the file (dev, ino) in this
 * process. */
bool pmap_self_mapped_ro(uint64_t a, size_t len, uint64_t dev, uint64_t ino);

/* A hex number (lowercase, as /proc's text files write them) ending at `stop`: true and *c
 * advanced past the stop, else false and *c unchanged. */
bool pmap_hex_field(const char **c, uint64_t *v, char stop);

#endif
