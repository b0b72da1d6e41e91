/* nofp_workload.c — the no-frame-pointer workload of the unwinding tests, compiled by the test
 * with -O2 -fomit-frame-pointer (like Debian's libc and most release binaries). Three chains,
 * each ending in a leaf that burns CPU:
 *
 *   main -> chain_a -> chain_b -> chain_c -> hot_leaf
 *   main -> sort_chain -> qsort (libc) -> cmp_burn            (the comparator)
 *   main -> search_chain -> bsearch (libc) -> key_burn        (the callback)
 *   main -> clock_chain -> clock_gettime (libc, then the vDSO)
 *
 * With PF_WL_DLOPEN=path, on SIGUSR1 (sent once the profiler runs) it opens that shared
 * library with dlopen and from then on also calls its dl_burn() through main -> dl_chain.
 * With PF_WL_DLOPEN_DIR=dir, it opens every *.so of dir at its start (a process with very
 * many executable mappings); it calls none of them.
 * No system call in the loop (clock_gettime stays in the vDSO): the run ends on SIGALRM.
 *
 *   nofp_workload SECONDS   (prints "ready", then "iterations N" when done) */
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N_KEYS 512

static volatile sig_atomic_t done, want_dl;
static volatile unsigned long sink;
static int keys[N_KEYS], work[N_KEYS];
static unsigned long (*dl_burn)(unsigned long);

static void on_signal(int sig)
{
	if (sig == SIGALRM)
		done = 1;
	else
		want_dl = 1;
}

__attribute__((noinline)) static unsigned long spin(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul + (x >> 7);
	return x;
}

__attribute__((noinline)) unsigned long hot_leaf(unsigned long x)
{
	for (unsigned long i = 0; i < 300000; i++)
		x = x * 2862933555777941757ul + 3037000493ul + (x >> 11);
	return x;
}

__attribute__((noinline)) unsigned long chain_c(unsigned long x)
{
	unsigned long r = hot_leaf(x ^ 3);
	sink += r;
	return r + 3;
}

__attribute__((noinline)) unsigned long chain_b(unsigned long x)
{
	unsigned long r = chain_c(x ^ 2);
	sink += r;
	return r + 2;
}

__attribute__((noinline)) unsigned long chain_a(unsigned long x)
{
	unsigned long r = chain_b(x ^ 1);
	sink += r;
	return r + 1;
}

__attribute__((noinline)) int cmp_burn(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	sink += spin(60, (unsigned long)x);
	return (x > y) - (x < y);
}

__attribute__((noinline)) int key_burn(const void *k, const void *e)
{
	int x = *(const int *)k, y = *(const int *)e;
	sink += spin(4000, (unsigned long)y);
	return (x > y) - (x < y);
}

__attribute__((noinline)) unsigned long sort_chain(unsigned long seed)
{
	for (int i = 0; i < N_KEYS; i++)
		work[i] = keys[(i * 7 + (int)seed) % N_KEYS];
	qsort(work, N_KEYS, sizeof(int), cmp_burn);
	sink += (unsigned long)work[0];
	return (unsigned long)work[N_KEYS - 1];
}

/* bsearch through a pointer: the header's inline copy would keep libc off the stack */
static void *(*volatile libc_bsearch)(const void *, const void *, size_t, size_t,
				      int (*)(const void *, const void *)) = bsearch;

__attribute__((noinline)) unsigned long search_chain(unsigned long seed)
{
	unsigned long found = 0;
	for (int i = 0; i < 48; i++) {
		int k = (int)((seed + (unsigned long)i * 13) % N_KEYS) * 2;
		found += libc_bsearch(&k, keys, N_KEYS, sizeof(int), key_burn) != NULL;
	}
	sink += found;
	return found;
}

__attribute__((noinline)) unsigned long clock_chain(unsigned long x)
{
	struct timespec ts;
	for (int i = 0; i < 3000; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		x += (unsigned long)ts.tv_nsec;
	}
	sink += x;
	return x;
}

__attribute__((noinline)) unsigned long dl_chain(unsigned long x)
{
	unsigned long r = dl_burn(x);
	sink += r;
	return r + 5;
}

/* dlopen of every *.so in dir (bounded: 512 files); the handles stay open. */
static void open_all(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[4096];
	for (int n = 0; d && n < 512 && (e = readdir(d)); n++) {
		size_t len = strlen(e->d_name);
		if (len < 4 || strcmp(e->d_name + len - 3, ".so"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (!dlopen(path, RTLD_NOW | RTLD_LOCAL))
			fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
	}
	if (d)
		closedir(d);
}

int main(int argc, char **argv)
{
	unsigned secs = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 5;
	const char *lib = getenv("PF_WL_DLOPEN");
	const char *many = getenv("PF_WL_DLOPEN_DIR");
	if (many)
		open_all(many);
	for (int i = 0; i < N_KEYS; i++)
		keys[i] = i * 2;
	signal(SIGALRM, on_signal);
	signal(SIGUSR1, on_signal);
	alarm(secs);
	printf("ready\n");
	fflush(stdout);
	unsigned long it = 0;
	void *dl = NULL;
	while (!done) {
		sink += chain_a(it);
		sink += sort_chain(it);
		sink += search_chain(it);
		sink += clock_chain(it);
		if (dl_burn)
			sink += dl_chain(it);
		else if (lib && want_dl && !dl) {
			dl = dlopen(lib, RTLD_NOW);
			dl_burn = dl ? (unsigned long (*)(unsigned long))dlsym(dl, "dl_burn") : NULL;
			printf("dlopen %s\n", dl ? "ok" : dlerror());
			fflush(stdout);
		}
		it++;
	}
	printf("iterations %lu\n", it);
	return 0;
}
