/* fuzz.h — shared by the fuzz targets in tests/fuzz/ (docs/testing.md "Fuzzing").
 *
 * Every target is one file defining LLVMFuzzerTestOneInput(), the libFuzzer entry point, so the
 * same source links either with libFuzzer (-DPF_FUZZ=ON, clang) or with replay.c, our gcc
 * driver that replays the seed corpus and a bounded run of deterministic mutations (ctest).
 * A target returns 0 for every input; a broken invariant is reported with FUZZ_CHECK, which
 * prints the condition and aborts (libFuzzer and replay.c then save the input). */
#ifndef PF_TESTS_FUZZ_H
#define PF_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

#endif
