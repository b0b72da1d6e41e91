/* fuzz.h — shared by the fuzz targets in tests/fuzz/ (docs/testing.md "Fuzzing").
 *
 * Every target is one file defining LLVMFuzzerTestOneInput(), the libFuzzer entry point, so the
 * same source links either with libFuzzer (-DPF_FUZZ=ON, clang) or with replay.c, our gcc
 * driver that replays the seed corpus and a bounded run of deterministic mutations (ctest).
 * A target returns 0 for every input; a broken invariant is reported with FUZZ_CHECK, which
 * prints the condition and aborts (libFuzzer and replay.c then save the input). */
#ifndef PF_TESTS_FUZZ_H
#define PF_TESTS_FUZZ_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Set by replay.c (weak: absent under libFuzzer, which saves crashing inputs itself). */
void fuzz_save_input(const char *why) __attribute__((weak));

__attribute__((noreturn, format(printf, 4, 5))) static inline void
fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...);

#include <stdarg.h>
static inline void fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: fuzz invariant failed: %s: ", file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (fuzz_save_input)
		fuzz_save_input("invariant");
	abort();
}

#define FUZZ_CHECK(cond, ...)                                                                \
	do {                                                                                 \
		if (!(cond))                                                                 \
			fuzz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                   \
	} while (0)

/* Another process's memory for the targets whose input is one: the input after a header of
 * hdr_len bytes (copied to hdr) is the memory from FUZZ_MEM_BASE on. */
#define FUZZ_MEM_BASE 0x100000000ull

struct fuzz_mem {
	const uint8_t *d;
	size_t n;
};

/* Splits an input: false when it is shorter than the header. */
static inline bool fuzz_mem_split(const uint8_t *data, size_t size, void *hdr, size_t hdr_len,
				  struct fuzz_mem *m)
{
	if (size < hdr_len)
		return false;
	memcpy(hdr, data, hdr_len);
	m->d = data + hdr_len;
	m->n = size - hdr_len;
	return true;
}

/* Reads len bytes at addr: 0, or -EFAULT outside the memory. */
static inline int fuzz_mem_read(const struct fuzz_mem *m, uint64_t addr, void *buf, size_t len)
{
	if (addr < FUZZ_MEM_BASE || addr - FUZZ_MEM_BASE > m->n ||
	    len > m->n - (addr - FUZZ_MEM_BASE))
		return -EFAULT;
	memcpy(buf, m->d + (addr - FUZZ_MEM_BASE), len);
	return 0;
}
#endif
