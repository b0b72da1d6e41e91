/* unwind-table-bench: what the sampler's unwind tables cost to build and hold
 * (agent/unwind/unwind_table.h), per ELF file.
 *
 *   unwind-table-bench [-r ROUNDS] FILE...
 *
 * For each file: rows, table bytes, bytes of executable code covered, stop rows, the CPU time
 * of one build (best of ROUNDS, default 3: the machine may be busy), and both per MiB of code;
 * then the time to read the same table back from the disk cache. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "unwind/unwind_table.h"

static double cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	int rounds = 3, i = 1;
	if (argc > 2 && !strcmp(argv[1], "-r")) {
		rounds = (int)strtol(argv[2], NULL, 10);
		i = 3;
	}
	if (i >= argc || rounds < 1) {
		fprintf(stderr, "usage: unwind-table-bench [-r ROUNDS] FILE...\n");
		return 2;
	}
	char dir[] = "/tmp/pf-unwbench-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	printf("%-40s %8s %9s %9s %6s %9s %10s %10s %9s\n", "file", "rows", "table_KiB", "code_KiB",
	       "stop%", "build_ms", "ms_per_MiB", "KiB_per_MiB", "cache_ms");
	int rc = 0;
	for (; i < argc; i++) {
		int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			perror(argv[i]);
			rc = 1;
			continue;
		}
		double best = 1e30;
		struct pf_unwind_table *t = NULL;
		for (int r = 0; r < rounds; r++) {
			pf_unwind_table_free(t);
			t = NULL;
			double t0 = cpu_ms();
			int e = pf_unwind_table_build(fd, 0, &t);
			double dt = cpu_ms() - t0;
			if (e < 0) {
				fprintf(stderr, "%s: %s\n", argv[i], strerror(-e));
				break;
			}
			best = dt < best ? dt : best;
		}
		close(fd);
		if (!t) {
			rc = 1;
			continue;
		}
		double cache = -1;
		const char *bid = "00000000000000000000000000000000000000aa";
		if (pf_unwind_cache_store(dir, bid, t) == 0) {
			struct pf_unwind_table *c = NULL;
			double t0 = cpu_ms();
			if (pf_unwind_cache_load(dir, bid, &c) == 0)
				cache = cpu_ms() - t0;
			pf_unwind_table_free(c);
		}
		double kib = (double)(t->n_rows * sizeof(*t->rows)) / 1024,
		       mib_code = (double)t->text_bytes / (1024 * 1024);
		const char *name = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
		printf("%-40s %8zu %9.1f %9.1f %6.1f %9.1f %10.1f %10.1f %9.2f\n", name, t->n_rows,
		       kib, (double)t->text_bytes / 1024, 100.0 * t->n_stop / (double)t->n_rows, best,
		       best / mib_code, kib / mib_code, cache);
		pf_unwind_table_free(t);
	}
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		rc = 1;
	return rc;
}
