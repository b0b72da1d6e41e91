/* alloc_workload.c — the allocation-profile test's workload (test_alloc.c builds it with -O0
 * -fno-omit-frame-pointer -g). Prints "ready", waits for a line on stdin, then allocates
 * argv[1] bytes in alloc_hot() (malloc, some posix_memalign and realloc) and a tenth as
 * much in alloc_cold() (calloc), sizes 16..16384 from a fixed sequence, frees every other
 * allocation, prints "total <bytes> live <bytes> allocations <n>" (live: what it still
 * holds), and keeps the rest until stdin
 * closes. With argv[2] = "loop" it allocates and frees at once, in a loop, until stdin closes
 * (the guard test). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

static uint64_t seq = 88172645463325252ull;

static size_t next_size(void)
{
	seq ^= seq << 13;
	seq ^= seq >> 7;
	seq ^= seq << 17;
	return 16 + (size_t)(seq % 16369);
}

struct held {
	void *p;
	size_t n;
};

static struct held *held;
static size_t n_held, cap_held;

static void keep(void *p, size_t n)
{
	if (!p)
		abort();
	if (n_held == cap_held) {
		cap_held = cap_held ? cap_held * 2 : 4096;
		held = realloc(held, cap_held * sizeof(*held));
		if (!held)
			abort();
	}
	held[n_held++] = (struct held){p, n};
}

static __attribute__((noinline)) uint64_t alloc_hot(uint64_t bytes)
{
	uint64_t done = 0;
	for (unsigned i = 0; done < bytes; i++) {
		size_t n = next_size();
		void *p;
		if (i % 16 == 1) {
			if (posix_memalign(&p, 64, n) != 0)
				abort();
		} else if (i % 16 == 2) {
			/* grown from half its size: the half is freed, counted as allocated */
			p = malloc(n / 2);
			done += n / 2;
			p = realloc(p, n);
		} else {
			p = malloc(n);
		}
		keep(p, n);
		done += n;
	}
	return done;
}

static __attribute__((noinline)) uint64_t alloc_cold(uint64_t bytes)
{
	uint64_t done = 0;
	while (done < bytes) {
		size_t n = next_size();
		keep(calloc(n, 1), n);
		done += n;
	}
	return done;
}

static void loop(void)
{
	/* stdin closing ends it: polled every 1000 allocations */
	for (;;) {
		for (int i = 0; i < 1000; i++) {
			void *p = malloc(next_size());
			if (!p)
				abort();
			free(p);
		}
		struct timeval tv = {0, 0};
		fd_set r;
		FD_ZERO(&r);
		FD_SET(0, &r);
		if (select(1, &r, NULL, NULL, &tv) > 0)
			return;
	}
}

int main(int argc, char **argv)
{
	uint64_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : (64u << 20);
	char line[64];
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready\n");
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	if (argc > 2 && !strcmp(argv[2], "loop")) {
		loop();
		return 0;
	}
	uint64_t total = alloc_hot(bytes);
	total += alloc_cold(bytes / 10);
	uint64_t live = 0;
	/* held[] itself grew by realloc: its own bytes are not in total */
	for (size_t i = 0; i < n_held; i++) {
		if (i % 2)
			free(held[i].p);
		else
			live += held[i].n;
	}
	printf("total %llu live %llu allocations %zu\n", (unsigned long long)total,
	       (unsigned long long)live, n_held);
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
