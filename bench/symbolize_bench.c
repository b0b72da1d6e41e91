/* symbolize-bench — what the symbolizer costs per new address (function, source file and
 * line, inlined frames; agent/symbolize/symbolize.h), on an ELF file with debug info, and
 * what building its line table costs (line_table.h, in the builder child).
 *
 *   symbolize-bench [-n addresses] [-s seed] [-r rounds] [ELF]   (default: this program)
 *
 * Maps the file's executable segment into this process (no code of it runs), picks n random
 * addresses inside its function symbols, and per round: a fresh symbolizer captures this
 * process and waits for the file's line table (built by the child in the first round, read
 * from disk in the next ones), resolves the addresses (every one new: a table lookup each),
 * then again (the resolved-address cache), and checks every round gave the same frames.
 * Prints each round and the medians. Exit: 0 ok, 1 error, 2 usage. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "pf/profile.h"
#include "symbolize/symbolize.h"

#define BATCH 64

static uint64_t thread_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct target {
	uint8_t *map;        /* the executable segment, mapped from the file */
	size_t map_len;
	uint64_t map_vaddr;  /* ELF virtual address of map[0] */
	uint64_t *addrs;     /* absolute, in map */
	size_t n;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Maps the first executable PT_LOAD of path and picks n addresses in its function symbols. */
static int target_open(const char *path, size_t n, unsigned seed, struct target *t)
{
	memset(t, 0, sizeof(*t));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "symbolize-bench: %s: %s\n", path, strerror(errno));
		return -1;
	}
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t nph = 0;
	if (!e || elf_getphdrnum(e, &nph) < 0) {
		fprintf(stderr, "symbolize-bench: %s: not an ELF file\n", path);
		goto fail;
	}
	long pg = sysconf(_SC_PAGESIZE);
	for (size_t i = 0; i < nph && !t->map; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		uint64_t off0 = ph.p_offset & ~(uint64_t)(pg - 1);
		t->map_len = ph.p_filesz + (ph.p_offset - off0);
		t->map_vaddr = ph.p_vaddr - (ph.p_offset - off0);
		void *m = mmap(NULL, t->map_len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, (off_t)off0);
		if (m == MAP_FAILED) {
			fprintf(stderr, "symbolize-bench: mmap %s: %s\n", path, strerror(errno));
			goto fail;
		}
		t->map = m;
	}
	if (!t->map) {
		fprintf(stderr, "symbolize-bench: %s: no executable segment\n", path);
		goto fail;
	}
	/* function symbols inside the mapped segment */
	uint64_t *lo = NULL, *sz = NULL;
	size_t nf = 0, cap = 0;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    !s.st_size || s.st_value < t->map_vaddr ||
			    s.st_value + s.st_size > t->map_vaddr + t->map_len)
				continue;
			if (nf == cap) {
				cap = cap ? cap * 2 : 1024;
				uint64_t *a = realloc(lo, cap * sizeof(*a)), *b = realloc(sz, cap * sizeof(*b));
				if (a)
					lo = a;
				if (b)
					sz = b;
				if (!a || !b)
					goto nomem;
			}
			lo[nf] = s.st_value;
			sz[nf++] = s.st_size;
		}
	}
	if (!nf) {
		fprintf(stderr, "symbolize-bench: %s: no function symbols (.symtab, .dynsym) in its code\n",
			path);
		free(lo);
		free(sz);
		goto fail;
	}
	t->addrs = calloc(n, sizeof(*t->addrs));
	if (!t->addrs)
		goto nomem;
	srand(seed);
	for (size_t i = 0; i < n; i++) {
		size_t k = (size_t)rand() % nf;
		uint64_t v = lo[k] + (uint64_t)rand() % sz[k];
		t->addrs[i] = (uint64_t)(uintptr_t)t->map + (v - t->map_vaddr);
	}
	qsort(t->addrs, n, sizeof(*t->addrs), cmp_u64);
	t->n = n;
	fprintf(stderr, "symbolize-bench: %s: %zu function symbols, %zu addresses\n", path, nf, n);
	free(lo);
	free(sz);
	elf_end(e);
	close(fd);
	return 0;
nomem:
	fprintf(stderr, "symbolize-bench: out of memory\n");
	free(lo);
	free(sz);
fail:
	if (e)
		elf_end(e);
	close(fd);
	return -1;
}

/* Resolves every address of t once, BATCH frames per process entry, in one window. */
static uint64_t fnv(uint64_t h, const char *str)
{
	for (const char *c = str ? str : "\x01"; *c; c++)
		h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
	return (h ^ 0xff) * 0x100000001b3ull;
}

/* What a frame resolved to: function, file, line, inlined functions with theirs. */
static uint64_t frame_hash(uint64_t h, const struct pf_prof_frame *f)
{
	h = fnv(fnv(h, f->function), f->file) ^ ((uint64_t)f->line << 20) ^ f->n_inlined;
	for (uint32_t i = 0; i < f->n_inlined; i++)
		h = fnv(fnv(h, f->inlined[i].function), f->inlined[i].file) ^ f->inlined[i].line;
	return h;
}

static int resolve_all(struct pf_symbolizer *sym, const struct target *t, uint64_t *cpu_ns,
		       size_t *with_line, uint64_t *hash)
{
	struct pf_prof_window *w = pf_prof_window_new();
	if (!w)
		return -ENOMEM;
	struct pf_prof_frame fr[BATCH];
	*with_line = 0;
	*hash = 0xcbf29ce484222325ull;
	uint64_t t0 = thread_ns();
	int rc = 0;
	for (size_t i = 0; i < t->n && !rc; i += BATCH) {
		size_t k = t->n - i < BATCH ? t->n - i : BATCH;
		for (size_t j = 0; j < k; j++)
			fr[j] = (struct pf_prof_frame){.address = t->addrs[i + j],
						       .kind = PF_FRAME_NATIVE};
		struct pf_prof_process p = {0};
		rc = pf_symbolizer_resolve(sym, (uint32_t)getpid(), w, &p, fr, k);
		for (size_t j = 0; j < k; j++) {
			*with_line += fr[j].line > 0;
			*hash = frame_hash(*hash, &fr[j]);
		}
	}
	*cpu_ns = thread_ns() - t0;
	pf_prof_window_free(w);
	return rc;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Waits (up to 120 s) for the line tables the capture asked for. */
static int wait_tables(struct pf_symbolizer *sym)
{
	for (int i = 0; i < 12000 && pf_symbolizer_lines_pending(sym); i++)
		usleep(10000);
	return pf_symbolizer_lines_pending(sym) ? -ETIMEDOUT : 0;
}

int main(int argc, char **argv)
{
	size_t n = 2000;
	unsigned seed = 1, rounds = 3;
	int c;
	while ((c = getopt(argc, argv, "n:s:r:")) != -1) {
		switch (c) {
		case 'n':
			n = strtoul(optarg, NULL, 10);
			break;
		case 's':
			seed = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'r':
			rounds = (unsigned)strtoul(optarg, NULL, 10);
			break;
		default:
			goto usage;
		}
	}
	if (!n || !rounds || rounds > 64 || optind < argc - 1)
		goto usage;
	const char *path = optind < argc ? argv[optind] : "/proc/self/exe";
	struct target t;
	if (target_open(path, n, seed, &t) < 0)
		return 1;
	const char *tmp = getenv("TMPDIR");
	char tdir[4096];
	snprintf(tdir, sizeof(tdir), "%s/symbolize-bench.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(tdir)) {
		fprintf(stderr, "symbolize-bench: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	double per[64], warm[64];
	uint64_t want = 0;
	int ret = 0;
	for (unsigned r = 0; r < rounds && !ret; r++) {
		struct pf_symbolizer_options o = {.no_kernel = true, .line_dir = tdir};
		struct pf_symbolizer *sym = pf_symbolizer_new(&o);
		if (!sym || pf_symbolizer_capture(sym, (uint32_t)getpid()) < 0 ||
		    wait_tables(sym) < 0) {
			fprintf(stderr, "symbolize-bench: symbolizer: %s\n", strerror(errno));
			ret = 1;
			break;
		}
		uint64_t cold_ns, warm_ns, h, h2;
		size_t lines, lines2;
		if (resolve_all(sym, &t, &cold_ns, &lines, &h) < 0 ||
		    resolve_all(sym, &t, &warm_ns, &lines2, &h2) < 0) {
			fprintf(stderr, "symbolize-bench: out of memory\n");
			ret = 1;
		} else if ((want && h != want) || h2 != h) {
			fprintf(stderr, "symbolize-bench: round %u: frames differ from the first"
					" round's\n", r + 1);
			ret = 1;
		}
		want = h;
		struct pf_symbolizer_stats st;
		pf_symbolizer_stats(sym, &st);
		per[r] = (double)cold_ns / 1e3 / (double)n;
		warm[r] = (double)warm_ns / 1e3 / (double)n;
		printf("round %u: tables %" PRIu64 " (%" PRIu64 " built: child CPU %.1f ms, child peak"
		       " %" PRIu64 " kB; %" PRIu64 " read from disk; index %" PRIu64
		       " B); new addresses %.2f us each (%" PRIu64 " table lookups), cached %.3f us"
		       " each; with a source line %zu of %zu\n",
		       r + 1, st.line_tables, st.line_builds, (double)st.line_build_cpu_ns / 1e6,
		       st.line_build_max_rss_kb, st.line_cache_hits, st.line_tables_bytes, per[r],
		       st.line_lookups, warm[r], lines, n);
		pf_symbolizer_free(sym);
	}
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	if (system(cmd) != 0)
		fprintf(stderr, "symbolize-bench: could not remove %s\n", tdir);
	if (ret)
		return ret;
	qsort(per, rounds, sizeof(double), cmp_dbl);
	qsort(warm, rounds, sizeof(double), cmp_dbl);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("median of %u: new address %.2f us, cached %.3f us; same frames every round; peak"
	       " RSS %ld kB (the tables are built in a child)\n",
	       rounds, per[rounds / 2], warm[rounds / 2], ru.ru_maxrss);
	return 0;
usage:
	fprintf(stderr, "usage: symbolize-bench [-n addresses] [-s seed] [-r rounds 1-64] [ELF]\n");
	return 2;
}
