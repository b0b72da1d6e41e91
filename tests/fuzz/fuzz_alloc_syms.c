/* fuzz_alloc_syms.c — the allocator entry points of one ELF file (agent/sampler/alloc_syms.h):
 * files a captured process maps, which the agent reads. The input is the file's content
 * (through a memfd).
 *
 * Invariants checked:
 *  - reading returns 0 or a negative errno, and finds at most PF_ALLOC_SYMS_MAX entry points;
 *  - none without malloc among them (a file without malloc is no allocator);
 *  - every entry point has a known kind and a name, and its offset lies inside the file;
 *  - no two share an offset. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "sampler/alloc_syms.h"
#include "sampler/bpf/cpu_sampler.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-alloc-syms", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	static struct pf_alloc_file f;
	struct pf_error err = {0};
	int rc = pf_alloc_syms_file(path, &f, &err);
	close(fd);
	if (rc < 0) {
		FUZZ_CHECK(err.msg[0] != 0, "rc %d without a message", rc);
		return 0;
	}
	FUZZ_CHECK(f.n <= PF_ALLOC_SYMS_MAX, "%zu entry points", f.n);
	bool malloc_seen = false;
	for (size_t i = 0; i < f.n; i++) {
		FUZZ_CHECK(f.kind[i] >= 1 && f.kind[i] <= PF_ALLOC_FN_MAX, "kind %llu",
			   (unsigned long long)f.kind[i]);
		FUZZ_CHECK(f.name[i] != NULL, "entry point %zu without a name", i);
		FUZZ_CHECK(f.off[i] < size, "offset %llu past the file (%zu bytes)",
			   (unsigned long long)f.off[i], size);
		malloc_seen |= !strcmp(f.name[i], "malloc");
		for (size_t j = 0; j < i; j++)
			FUZZ_CHECK(f.off[j] != f.off[i], "offset %llu twice",
				   (unsigned long long)f.off[i]);
	}
	FUZZ_CHECK(f.n == 0 || malloc_seen, "entry points without malloc");
	return 0;
}
