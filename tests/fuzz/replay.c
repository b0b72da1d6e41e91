/* replay.c — the gcc fuzz driver: links one target (fuzz.h) and runs
 *
 *   fuzz-<target> [-n MUTATIONS] [-t SECONDS] [-s SEED] [-o CRASH_DIR] PATH...
 *
 * every file of every PATH (a corpus directory, or single files to reproduce a crash) once,
 * then MUTATIONS deterministic mutants (default 20000, at most SECONDS of wall time, default
 * 20): each mutant is a corpus file with 1 to 4 stacked edits — bit flip, interesting byte,
 * byte run set to 0xff (huge varints), truncation, insertion, deletion, duplication of a
 * range, or a splice with another file — drawn from a xorshift PRNG seeded with SEED
 * (default 1), so a run is reproducible. Inputs are handed over in a malloc'd block of their
 * exact size, so ASan sees any read past the end.
 *
 * On an invariant failure (FUZZ_CHECK) or a sanitizer error the input being run is written to
 * CRASH_DIR/crash-<target>-<n> (default: the working directory) and its name printed; rerun
 * the binary on that file to reproduce. Exit status 0 when every input passed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

#define FUZZ_MAX_INPUT ((size_t)256 << 10)
#define MAX_FILES 4096

struct input {
	uint8_t *data;
	size_t len;
	char *name;
};

static struct input files[MAX_FILES];
static size_t n_files;

/* The input being run, for the crash hooks. */
static const uint8_t *cur_data;
static size_t cur_len;
static char crash_path[4096];
static const char *crash_dir = ".";
static const char *target_name = "fuzz";

/* Async-signal-safe: open/write/close only. */
static void save_current(void)
{
	static int saved;
	if (saved++)
		return;
	int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return;
	size_t off = 0;
	while (cur_data && off < cur_len) {
		ssize_t w = write(fd, cur_data + off, cur_len - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	close(fd);
	static const char msg[] = "fuzz: failing input saved to ";
	if (write(2, msg, sizeof(msg) - 1) < 0 || write(2, crash_path, strlen(crash_path)) < 0 ||
	    write(2, "\n", 1) < 0)
		return;
}

void fuzz_save_input(const char *why)
{
	(void)why;
	save_current();
}

/* Present in sanitizer runtimes: called before a sanitizer report ends the process. */
extern void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));

static void on_signal(int sig)
{
	save_current();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void install_hooks(void)
{
	if (__sanitizer_set_death_callback) {
		__sanitizer_set_death_callback(save_current);
		return; /* keep the sanitizer's own SEGV handler and its report */
	}
	signal(SIGSEGV, on_signal);
	signal(SIGBUS, on_signal);
	signal(SIGFPE, on_signal);
	signal(SIGILL, on_signal);
	signal(SIGABRT, on_signal);
}

static int read_file(const char *path, struct input *in)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -errno;
	uint8_t *buf = malloc(FUZZ_MAX_INPUT);
	if (!buf) {
		fclose(f);
		return -ENOMEM;
	}
	size_t n = fread(buf, 1, FUZZ_MAX_INPUT, f);
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		free(buf);
		return -EIO;
	}
	in->data = buf;
	in->len = n;
	in->name = strdup(path);
	return in->name ? 0 : -ENOMEM;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds a file, or every regular file of a directory in name order (deterministic runs). */
static int add_path(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (n_files >= MAX_FILES)
			return -E2BIG;
		return read_file(path, &files[n_files++]);
	}
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	char *names[MAX_FILES];
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < MAX_FILES) {
		if (e->d_name[0] == '.')
			continue;
		names[n] = strdup(e->d_name);
		if (!names[n])
			break;
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(names[0]), name_cmp);
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		char full[4096];
		snprintf(full, sizeof(full), "%s/%s", path, names[i]);
		if (rc == 0 && stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
			if (n_files >= MAX_FILES)
				rc = -E2BIG;
			else
				rc = read_file(full, &files[n_files++]);
		}
		free(names[i]);
	}
	return rc;
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static size_t below(size_t n)
{
	return n ? (size_t)(rnd() % n) : 0;
}

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

static const uint8_t interesting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x0a, 0x12, 0x1a,
				      0x22, 0x08, 0x10, 0x2a, ':',  '-',  ' ',  '\n'};

/* One edit of buf (len bytes, room for FUZZ_MAX_INPUT). Returns the new length. */
static size_t mutate_once(uint8_t *buf, size_t len)
{
	size_t pos, n;
	switch (below(9)) {
	case 0: /* bit flip */
		if (len)
			buf[below(len)] ^= (uint8_t)(1u << below(8));
		break;
	case 1: /* interesting byte */
		if (len)
			buf[below(len)] = interesting[below(sizeof(interesting))];
		break;
	case 2: /* random byte */
		if (len)
			buf[below(len)] = (uint8_t)rnd();
		break;
	case 3: /* a run of 0xff: lengths and varints out of range */
		if (len) {
			pos = below(len);
			n = 1 + below(min_sz(len - pos, 10));
			memset(buf + pos, 0xff, n);
		}
		break;
	case 4: /* truncate */
		len = below(len + 1);
		break;
	case 5: /* insert random bytes */
		n = 1 + below(8);
		if (len + n <= FUZZ_MAX_INPUT) {
			pos = below(len + 1);
			memmove(buf + pos + n, buf + pos, len - pos);
			for (size_t i = 0; i < n; i++)
				buf[pos + i] = (uint8_t)rnd();
			len += n;
		}
		break;
	case 6: /* delete a range */
		if (len) {
			pos = below(len);
			n = 1 + below(min_sz(len - pos, 16));
			memmove(buf + pos, buf + pos + n, len - pos - n);
			len -= n;
		}
		break;
	case 7: /* duplicate a range in place */
		if (len) {
			pos = below(len);
			n = 1 + below(min_sz(len - pos, 64));
			if (len + n <= FUZZ_MAX_INPUT) {
				size_t to = below(len + 1);
				uint8_t tmp[64];
				memcpy(tmp, buf + pos, n);
				memmove(buf + to + n, buf + to, len - to);
				memcpy(buf + to, tmp, n);
				len += n;
			}
		}
		break;
	default: { /* splice: our prefix + the suffix of another file */
		const struct input *o = &files[below(n_files)];
		size_t cut = below(len + 1), from = below(o->len + 1);
		n = o->len - from;
		if (cut + n > FUZZ_MAX_INPUT)
			n = FUZZ_MAX_INPUT - cut;
		memcpy(buf + cut, o->data + from, n);
		len = cut + n;
		break;
	}
	}
	return len;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs one input from an exact-size heap copy. */
static void run(const uint8_t *data, size_t len)
{
	uint8_t *copy = malloc(len ? len : 1);
	if (!copy) {
		fprintf(stderr, "%s: out of memory\n", target_name);
		exit(2);
	}
	if (len)
		memcpy(copy, data, len);
	cur_data = copy;
	cur_len = len;
	LLVMFuzzerTestOneInput(copy, len);
	cur_data = NULL;
	free(copy);
}

static void usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [-n MUTATIONS] [-t SECONDS] [-s SEED] [-o CRASH_DIR] PATH...\n",
		argv0);
	exit(2);
}

int main(int argc, char **argv)
{
	long mutations = 20000;
	double seconds = 20;
	uint64_t seed = 1;
	int opt;

	const char *slash = strrchr(argv[0], '/');
	target_name = slash ? slash + 1 : argv[0];
	while ((opt = getopt(argc, argv, "n:t:s:o:")) != -1) {
		char *end;
		errno = 0;
		switch (opt) {
		case 'n':
			mutations = strtol(optarg, &end, 10);
			if (errno || *end || mutations < 0)
				usage(argv[0]);
			break;
		case 't':
			seconds = strtod(optarg, &end);
			if (errno || *end || seconds < 0)
				usage(argv[0]);
			break;
		case 's':
			seed = strtoull(optarg, &end, 10);
			if (errno || *end)
				usage(argv[0]);
			break;
		case 'o':
			crash_dir = optarg;
			break;
		default:
			usage(argv[0]);
		}
	}
	if (optind >= argc)
		usage(argv[0]);
	for (int i = optind; i < argc; i++)
		if (add_path(argv[i]) < 0) {
			fprintf(stderr, "%s: cannot read %s\n", target_name, argv[i]);
			return 2;
		}
	if (!n_files) {
		fprintf(stderr, "%s: no input files\n", target_name);
		return 2;
	}
	install_hooks();

	double t0 = now_s();
	for (size_t i = 0; i < n_files; i++) {
		snprintf(crash_path, sizeof(crash_path), "%s/crash-%s-seed-%zu", crash_dir,
			 target_name, i);
		run(files[i].data, files[i].len);
	}
	double t1 = now_s();

	uint8_t *buf = malloc(FUZZ_MAX_INPUT);
	if (!buf)
		return 2;
	rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
	long done = 0;
	for (; done < mutations; done++) {
		if ((done & 63) == 0 && now_s() - t1 > seconds)
			break;
		const struct input *base = &files[below(n_files)];
		size_t len = base->len;
		memcpy(buf, base->data, len);
		size_t edits = 1 + below(4);
		for (size_t e = 0; e < edits; e++)
			len = mutate_once(buf, len);
		snprintf(crash_path, sizeof(crash_path), "%s/crash-%s-s%llu-m%ld", crash_dir,
			 target_name, (unsigned long long)seed, done);
		run(buf, len);
	}
	free(buf);
	double t2 = now_s();
	printf("%s: %zu corpus files in %.2f s, %ld mutations in %.2f s (%.0f/s), seed %llu\n",
	       target_name, n_files, t1 - t0, done, t2 - t1, done / (t2 - t1 > 0 ? t2 - t1 : 1),
	       (unsigned long long)seed);
	printf("%s: %zu passed, 0 failed\n", target_name, n_files + (size_t)done);
	for (size_t i = 0; i < n_files; i++) {
		free(files[i].data);
		free(files[i].name);
	}
	return 0;
}
