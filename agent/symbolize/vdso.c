/* vdso.c — see vdso.h. */
#include "symbolize/vdso.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/uio.h>
#include <unistd.h>

#define VDSO_MAX_BYTES (1u << 20) /* a real vDSO is 8 KiB; anything this big is not one */

bool pf_vdso_image(const void **image, size_t *len, uint64_t *vaddr0)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)getauxval(AT_SYSINFO_EHDR);
	if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_shentsize != sizeof(Elf64_Shdr))
		return false;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)eh + eh->e_phoff);
	bool found = false;
	for (unsigned i = 0; i < eh->e_phnum && !found; i++) {
		if (ph[i].p_type == PT_LOAD) {
			*vaddr0 = ph[i].p_vaddr - ph[i].p_offset;
			found = true;
		}
	}
	*image = eh;
	*len = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	return found && *len < VDSO_MAX_BYTES;
}

bool pf_vdso_same(uint32_t pid, uint64_t start, uint64_t end)
{
	const void *image;
	size_t len;
	uint64_t vaddr0;
	long pg = sysconf(_SC_PAGESIZE);
	if (!pf_vdso_image(&image, &len, &vaddr0) || pg <= 0 || end <= start)
		return false;
	/* the mapping is the image rounded up to pages */
	size_t mapped = (len + (size_t)pg - 1) & ~((size_t)pg - 1);
	if (end - start != mapped)
		return false;
	void *buf = malloc(len);
	if (!buf)
		return false;
	struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)start, len};
	bool same = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0) == (ssize_t)len &&
		    !memcmp(buf, image, len);
	free(buf);
	return same;
}
