/* demangle-bench: what readable names cost the symbolizer (agent/symbolize/demangle.h).
 *
 *   demangle-bench [ROUNDS] < names     (one symbol per line, e.g. `nm -D --defined-only LIB`'s
 *                                        third column)
 *
 * Prints the demangler's cost per mangled name on a miss (libiberty, uncached), the cost per
 * lookup through the cache as the symbolizer does it once per frame and window (ROUNDS passes
 * over the names, default 20: a steady workload), and the cache's hit rate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "symbolize/demangle.h"

#define MAX_NAMES 200000

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: the machine may be busy */
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 20;
	if (rounds < 1 || rounds > 10000)
		rounds = 20;
	char **names = calloc(MAX_NAMES, sizeof(*names));
	size_t n = 0, mangled = 0;
	char line[8192];
	while (names && n < MAX_NAMES && fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\r\n")] = 0;
		if (!*line)
			continue;
		names[n] = strdup(line);
		if (!names[n])
			return 1;
		mangled += pf_demangle_is_mangled(names[n]);
		n++;
	}
	if (!n) {
		fprintf(stderr, "usage: demangle-bench [ROUNDS] < names\n");
		return 2;
	}
	double t0 = now_ns();
	size_t ok = 0;
	for (size_t i = 0; i < n; i++) {
		char *r = pf_demangle_dup(names[i]);
		ok += r != NULL;
		free(r);
	}
	double miss_ns = (now_ns() - t0) / (mangled ? mangled : 1);
	struct pf_demangler *d = pf_demangler_new(0, 0);
	t0 = now_ns();
	for (int k = 0; k < rounds; k++)
		for (size_t i = 0; i < n; i++)
			(void)pf_demangle(d, names[i]);
	double per_lookup = (now_ns() - t0) / ((double)n * rounds);
	struct pf_demangler_stats st;
	pf_demangler_stats(d, &st);
	printf("names %zu, mangled %zu, demangled %zu\n", n, mangled, ok);
	printf("uncached: %.0f ns per mangled name\n", miss_ns);
	printf("cached (%d rounds): %.0f ns per name, hit rate %.1f%%, cache %.1f KiB, %" "llu"
	       " resets\n",
	       rounds, per_lookup, st.lookups ? 100.0 * st.hits / st.lookups : 0.0,
	       st.bytes / 1024.0, (unsigned long long)st.resets);
	pf_demangler_free(d);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return 0;
}
