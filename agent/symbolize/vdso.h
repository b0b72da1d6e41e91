/* vdso.h — the vDSO: the kernel's small shared object (clock_gettime, gettimeofday, time,
 * getcpu) mapped as "[vdso]" into every process, with no file behind it.
 *
 * Owns: finding the image this process was given (its ELF header, size and load address)
 * and telling whether another process's [vdso] mapping holds the same bytes. A kernel maps one
 * image into all its 64-bit processes, so the agent's own copy gives the tables and names of
 * everyone's; a 32-bit process (another image) or a checkpointed one restored from another
 * kernel does not match, and is left alone. */
#ifndef PF_AGENT_VDSO_H
#define PF_AGENT_VDSO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* This process's vDSO: its ELF image, its size in bytes and the virtual address its first
 * byte has in the image's own terms (what the image's symbols and tables are relative to).
 * False when there is none or it does not look like a 64-bit ELF image. */
bool pf_vdso_image(const void **image, size_t *len, uint64_t *vaddr0);

/* True when pid's mapping [start, end) holds this process's vDSO image, byte for byte (read
 * with process_vm_readv: one call). False when it differs, is another size, or cannot be
 * read (the process is gone, or we may not read it). */
bool pf_vdso_same(uint32_t pid, uint64_t start, uint64_t end);

#endif
