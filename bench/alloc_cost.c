/* alloc-cost: what allocation captures cost the processes they probe (docs/benchmarks.md).
 *
 *   alloc-cost [rounds] [phase_ms]
 *
 * Forks two workloads of its own and measures each in interleaved phases of phase_ms (A, B,
 * C, A, B, C ... in one run), every phase on the same child:
 *  1. per probed call: a tight malloc(64)/free loop (two probed calls per operation) with no
 *     probe, with an empty uprobe on the same entry points (alloc_empty: a uprobe_multi link,
 *     a program that returns at once) and during an alloc capture (alloc_probe, default
 *     sample_bytes). Rates are per CPU-second of the child (/proc/PID/schedstat: its time on
 *     a CPU, uprobe handlers included), which the machine's other load does not change. ns
 *     per probed call = (1/rate - 1/rate_none) / 2; the ratio alloc/empty per round, its
 *     median and spread.
 *     Then malloc alone, a phase of each kind (free's cost is the pair's rest).
 *  2. throughput: a CPU-bound loop whose units each compute for ~19 us and do one malloc/free
 *     (calibrated to 50,000 allocations per CPU-second at baseline), without and during an alloc
 *     capture: the throughput lost per round (per CPU-second, and of the wall-clock rate),
 *     its median and spread.
 * Needs root (BPF, uprobes) and session uprobes (Linux 6.13+). */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pf/clock.h"
#include "sampler/sampler_bpf.h"

static volatile uint64_t *g_ops; /* shared with the child: operations done */
static pid_t g_child;
static double g_per_cpu; /* operations per CPU-second of the child in the last rate() */


static __attribute__((noinline)) void tight(void)
{
	for (;;) {
		void *p = malloc(64);
		if (!p)
			abort();
		*(volatile char *)p = 1;
		free(p);
		__atomic_store_n(g_ops, *g_ops + 1, __ATOMIC_RELAXED);
	}
}

/* one probed call per operation: malloc alone (the memory is kept: 16 bytes each) */
static __attribute__((noinline)) void malloc_only(void)
{
	for (;;) {
		if (!malloc(16))
			abort();
		__atomic_store_n(g_ops, *g_ops + 1, __ATOMIC_RELAXED);
	}
}

static unsigned g_work = 1000; /* compute iterations per unit, calibrated */

static __attribute__((noinline)) void units(void)
{
	uint64_t h = 1;
	for (;;) {
		for (unsigned i = 0; i < g_work; i++)
			h = h * 6364136223846793005ull + 1442695040888963407ull;
		void *p = malloc(256 + (h & 1023));
		if (!p)
			abort();
		*(volatile uint64_t *)p = h;
		free(p);
		__atomic_store_n(g_ops, *g_ops + 1, __ATOMIC_RELAXED);
	}
}

static pid_t spawn(void (*fn)(void))
{
	*g_ops = 0;
	pid_t pid = fork();
	if (pid == 0) {
		fn();
		_exit(0);
	}
	g_child = pid;
	return pid;
}


/* The child's time on a CPU (ns, /proc/PID/schedstat: user, system and uprobe handlers). */
static uint64_t child_cpu_ns(void)
{
	char p[64];
	unsigned long long ns = 0;
	snprintf(p, sizeof(p), "/proc/%d/schedstat", (int)g_child);
	FILE *f = fopen(p, "r");
	if (f) {
		if (fscanf(f, "%llu", &ns) != 1)
			ns = 0;
		fclose(f);
	}
	return ns;
}

/* Operations per second of the child over ms, polling the sampler meanwhile; per CPU-second
 * into g_per_cpu (what the machine's other load does not change). */
static double rate(struct pf_sampler *s, unsigned ms)
{
	uint64_t a = __atomic_load_n(g_ops, __ATOMIC_RELAXED), t0 = pf_clock_ns(CLOCK_MONOTONIC);
	uint64_t c0 = child_cpu_ns(), end = pf_mono_ms() + ms;
	while (pf_mono_ms() < end)
		pf_sampler_poll(s, 50);
	uint64_t b = __atomic_load_n(g_ops, __ATOMIC_RELAXED), t1 = pf_clock_ns(CLOCK_MONOTONIC);
	uint64_t c1 = child_cpu_ns();
	g_per_cpu = c1 > c0 ? (double)(b - a) * 1e9 / (double)(c1 - c0) : 0;
	return (double)(b - a) * 1e9 / (double)(t1 - t0);
}

enum mode { NONE, EMPTY, ALLOC };

static double phase(struct pf_sampler *s, pid_t pid, enum mode m, unsigned ms,
		    struct pf_alloc_result *res)
{
	struct pf_error err = {0};
	uint32_t p = (uint32_t)pid;
	if (m != NONE) {
		/* the guard out of the way: a tight loop on a free core passes its default */
		struct pf_alloc_options o = {.bench_empty = m == EMPTY,
					     .max_calls_per_second = 100000000};
		if (pf_sampler_alloc_start(s, &p, 1, &o, &err) < 0) {
			fprintf(stderr, "alloc capture: %s\n", err.msg);
			exit(1);
		}
	}
	double r = rate(s, ms);
	if (m != NONE) {
		struct pf_prof_window *w = pf_sampler_alloc_stop(s, res, &err);
		if (!w) {
			fprintf(stderr, "alloc stop: %s\n", err.msg);
			exit(1);
		}
		if (res->guard_tripped)
			fprintf(stderr, "guard tripped: %s\n", res->note);
		pf_prof_window_free(w);
	}
	return r;
}

static void stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void minmax(double v, double *lo, double *hi)
{
	if (v < *lo)
		*lo = v;
	if (v > *hi)
		*hi = v;
}

int main(int argc, char **argv)
{
	long lr = argc > 1 ? strtol(argv[1], NULL, 10) : 5;
	long lm = argc > 2 ? strtol(argv[2], NULL, 10) : 1000;
	if (lr < 1 || lr > 100 || lm < 100 || lm > 60000) { /* bounds the arrays below */
		fprintf(stderr, "usage: alloc-cost [rounds 1..100] [phase_ms 100..60000]\n");
		return 2;
	}
	int rounds = (int)lr;
	unsigned ms = (unsigned)lm;
	g_ops = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (g_ops == MAP_FAILED)
		return 1;
	struct pf_error err = {0};
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	if (!s) {
		fprintf(stderr, "sampler: %s\n", err.msg);
		return 1;
	}
	struct pf_alloc_result res;

	/* 1. per probed call */
	pid_t pid = spawn(tight);
	rate(s, 300); /* warm */
	double lo = 1e18, hi = 0, sum = 0, c_lo = 1e18, c_hi = 0, e_lo = 1e18, e_hi = 0;
	uint64_t sampled = 0;
	double ratios[100], losses[100];
	for (int r = 0; r < rounds; r++) {
		/* per CPU-second: the child's time on a CPU, its uprobes included */
		phase(s, pid, NONE, ms, &res);
		double r0 = g_per_cpu;
		phase(s, pid, EMPTY, ms, &res);
		double re = g_per_cpu;
		phase(s, pid, ALLOC, ms, &res);
		double ra = g_per_cpu;
		sampled += res.sampled;
		double ce = (1 / re - 1 / r0) * 1e9 / 2, ca = (1 / ra - 1 / r0) * 1e9 / 2;
		printf("round %d: %.0f ops/s bare, %.0f empty uprobe, %.0f alloc capture; "
		       "ns per probed call: empty %.0f, alloc %.0f, ratio %.3f\n",
		       r + 1, r0, re, ra, ce, ca, ca / ce);
		ratios[r] = ca / ce;
		minmax(ca / ce, &lo, &hi);
		minmax(ca, &c_lo, &c_hi);
		minmax(ce, &e_lo, &e_hi);
		sum += ca / ce;
	}
	stop(pid);
	printf("per probed call: empty uprobe %.0f..%.0f ns, alloc %.0f..%.0f ns; alloc/empty "
	       "median %.3f, mean %.3f (min %.3f, max %.3f) over %d rounds; %llu samples\n",
	       e_lo, e_hi, c_lo, c_hi, median(ratios, rounds), sum / rounds, lo, hi, rounds,
	       (unsigned long long)sampled);

	/* 1b. malloc alone (one phase of each kind): free's share is the pair's rest */
	pid = spawn(malloc_only);
	rate(s, 200);
	phase(s, pid, NONE, ms / 2, &res);
	double m0 = g_per_cpu;
	phase(s, pid, EMPTY, ms / 2, &res);
	double me = g_per_cpu;
	phase(s, pid, ALLOC, ms / 2, &res);
	double ma = g_per_cpu;
	stop(pid);
	printf("malloc alone: ns per call: empty uprobe %.0f, alloc %.0f (bare %.0f ns)\n",
	       (1 / me - 1 / m0) * 1e9, (1 / ma - 1 / m0) * 1e9, 1e9 / m0);

	/* 2. throughput at ~50,000 allocations a second */
	for (int k = 0; k < 8; k++) {
		/* 50,000 a second on one core: per CPU-second, whatever share of a core the
		 * child gets on a loaded machine */
		pid = spawn(units);
		rate(s, 400);
		double r0 = g_per_cpu;
		stop(pid);
		if (r0 <= 0)
			break;
		double f = r0 / 50000.0;
		if (f > 0.97 && f < 1.03)
			break;
		g_work = (unsigned)(g_work * f);
		if (g_work < 10)
			g_work = 10;
	}
	pid = spawn(units);
	rate(s, 300);
	double l_lo = 1e18, l_hi = -1e18, l_sum = 0, base_sum = 0, wall[100];
	for (int r = 0; r < rounds; r++) {
		double r0 = phase(s, pid, NONE, ms, &res), p0 = g_per_cpu;
		double ra = phase(s, pid, ALLOC, ms, &res), pa = g_per_cpu;
		double loss = 1 - pa / p0;
		wall[r] = 1 - ra / r0;
		printf("round %d: %.0f allocations/s bare, %.0f during the capture (per CPU-second "
		       "%.0f, %.0f): loss %.2f %% per CPU-second, %.2f %% of wall-clock rate\n",
		       r + 1, r0, ra, p0, pa, loss * 100, wall[r] * 100);
		losses[r] = loss;
		minmax(loss, &l_lo, &l_hi);
		l_sum += loss;
		base_sum += p0;
	}
	stop(pid);
	printf("throughput at %.0f allocations per CPU-second (%u compute iterations per unit): loss per "
	       "CPU-second median %.2f %%, mean %.2f %% (min %.2f %%, max %.2f %%); of the "
	       "wall-clock rate median %.2f %%; over %d rounds\n",
	       base_sum / rounds, g_work, median(losses, rounds) * 100, l_sum / rounds * 100,
	       l_lo * 100, l_hi * 100, median(wall, rounds) * 100, rounds);
	pf_sampler_free(s);
	return 0;
}
