/* profleet-sample — runs the eBPF CPU sampler without the OpAMP client, for tests, debugging
 * and benchmarks: samples for N seconds under a profiling config file, closing a window every
 * sampling.duration_seconds, and prints each window as text.
 *
 *   profleet-sample [-c profiling.yaml] [-d seconds] [-t top] [-F] [-s] [-v] [-B bits] [-U]
 *                   [-C dir] [-L dir]
 *     -c  profiling config (pf/profcfg.h); default: all defaults (99 Hz, no filters)
 *     -d  total run time in seconds (default: one window, sampling.duration_seconds)
 *     -t  stacks printed per process (default 10)
 *     -F  folded output instead: "pid;comm;root;..;leaf count" per stack (flame graph input)
 *     -s  print sampler stats, BPF run time and this process's CPU time and peak RSS at exit,
 *         and at each window's close the CPU used so far ("stats window=N ..."), from which
 *         the benchmark takes the cost of a warm agent (after its first window)
 *     -v  debug logs
 *     -U  user stacks by frame pointers only (no .eh_frame tables)
 *     -C  cache the unwind tables in dir (the agent uses <state dir>/unwind); default none
 *     -L  keep the source-line tables in dir (the agent uses <state dir>/lines); default a
 *         private temporary directory
 *     -B  benchmark variant: PF_BENCH_* bits (cpu_sampler.h), parts of the sample program left
 *         out (bench/bpf_sample_cost.sh); default 0, the agent's program
 * Exit: 0 ok, 1 error, 2 usage, 77 the kernel refuses BPF or perf events. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "pf/log.h"
#include "pf/profcfg.h"
#include "pf/profile.h"
#include "sampler/sampler_bpf.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
		if (n == cap) {
			if (cap >= PF_PROFCFG_MAX_DOC * 2)
				break;
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	fclose(f);
	*len = n;
	return buf;
}

static const char *attr(const struct pf_prof_process *p, const char *key)
{
	for (size_t i = 0; i < p->n_attrs; i++)
		if (!strcmp(p->attrs[i].key, key))
			return p->attrs[i].value;
	return "?";
}

static void frame_name(const struct pf_prof_process *p, uint32_t fi, char *buf, size_t n)
{
	const struct pf_prof_frame *f = &p->frames[fi];
	if (f->function)
		snprintf(buf, n, "%s%s", f->function,
			 f->kind == PF_FRAME_KERNEL	? "_[k]"
			 : f->kind == PF_FRAME_PYTHON ? "_[py]"
			 : f->kind == PF_FRAME_V8JS   ? "_[js]"
			 : f->kind == PF_FRAME_JVM    ? "_[j]"
						      : "");
	else if (f->mapping >= 0)
		snprintf(buf, n, "%s+0x%" PRIx64, p->mappings[f->mapping].path,
			 f->address - p->mappings[f->mapping].start);
	else
		snprintf(buf, n, "0x%" PRIx64, f->address);
}

struct row {
	uint32_t stack;
	uint64_t count;
};

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

static void print_window(const struct pf_prof_window *w, int top, bool folded)
{
	uint64_t total = pf_prof_window_samples(w);
	if (!folded)
		printf("window start=%" PRIu64 " end=%" PRIu64 " frequency_hz=%u samples=%" PRIu64
		       " lost=%" PRIu64 " processes=%zu host=%s\n",
		       w->start_unix_ns, w->end_unix_ns, w->frequency_hz, total, w->lost_samples,
		       w->n_processes, w->host_name ? w->host_name : "");
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		struct row *rows = calloc(p->n_stacks ? p->n_stacks : 1, sizeof(*rows));
		if (!rows)
			return;
		uint64_t ptotal = 0;
		for (size_t k = 0; k < p->n_stacks; k++)
			rows[k].stack = (uint32_t)k;
		for (size_t k = 0; k < p->n_samples; k++) {
			rows[p->samples[k].stack].count += p->samples[k].count;
			ptotal += p->samples[k].count;
		}
		qsort(rows, p->n_stacks, sizeof(*rows), row_cmp);
		if (!folded)
			printf("process pid=%u service.name=%s exe=%s container.id=%s samples=%" PRIu64
			       "\n",
			       p->pid, attr(p, "service.name"), attr(p, "process.executable.name"),
			       attr(p, "container.id"), ptotal);
		for (size_t k = 0; k < p->n_stacks && (folded || (int)k < top); k++) {
			const struct pf_prof_stack *st = &p->stacks[rows[k].stack];
			char name[300];
			if (folded) {
				printf("%u;%s", p->pid, attr(p, "process.executable.name"));
				for (uint32_t j = st->n_frames; j-- > 0;) {
					frame_name(p, st->frames[j], name, sizeof(name));
					printf(";%s", name);
				}
				printf(" %" PRIu64 "\n", rows[k].count);
				continue;
			}
			printf("  %6" PRIu64 " %5.1f%% ", rows[k].count,
			       ptotal ? 100.0 * (double)rows[k].count / (double)ptotal : 0.0);
			for (uint32_t j = 0; j < st->n_frames; j++) {
				frame_name(p, st->frames[j], name, sizeof(name));
				printf("%s%s", j ? " <- " : "", name);
			}
			printf("\n");
		}
		free(rows);
	}
	fflush(stdout);
}

static uint64_t ru_cpu_ns(const struct rusage *ru)
{
	return ((uint64_t)ru->ru_utime.tv_sec + (uint64_t)ru->ru_stime.tv_sec) * 1000000000ull +
	       ((uint64_t)ru->ru_utime.tv_usec + (uint64_t)ru->ru_stime.tv_usec) * 1000ull;
}

static uint64_t cpu_now_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru_cpu_ns(&ru);
}

static uint64_t startup_cpu_ns;

/* Cumulative figures at a window's close: self and table-builder CPU, BPF run time. */
static void print_window_cpu(struct pf_sampler *s, unsigned n, uint64_t elapsed_ms)
{
	struct pf_sampler_stats st;
	if (pf_sampler_stats(s, &st) < 0)
		return;
	struct rusage ru, ch;
	getrusage(RUSAGE_SELF, &ru);
	getrusage(RUSAGE_CHILDREN, &ch);
	printf("stats window=%u elapsed_ms=%" PRIu64 " self_cpu_ns=%" PRIu64
	       " children_cpu_ns=%" PRIu64 " bpf_run_time_ns=%" PRIu64 " samples=%" PRIu64 "\n",
	       n, elapsed_ms, ru_cpu_ns(&ru), ru_cpu_ns(&ch), st.bpf_run_time_ns, st.samples);
}

static void print_stats(struct pf_sampler *s)
{
	struct pf_sampler_stats st;
	if (pf_sampler_stats(s, &st) < 0)
		return;
	struct rusage ru, ch;
	getrusage(RUSAGE_SELF, &ru);
	getrusage(RUSAGE_CHILDREN, &ch); /* the unwind-table builder's children */
	uint64_t cpu_ns = ru_cpu_ns(&ru);
	printf("stats samples=%" PRIu64 " lost_kernel=%" PRIu64 " lost_user=%" PRIu64
	       " filtered=%" PRIu64 " stack_errors=%" PRIu64 " lost_events=%" PRIu64
	       " processes=%" PRIu64 " cpus=%u\n",
	       st.samples, st.lost_kernel, st.lost_user, st.filtered, st.stack_errors,
	       st.lost_events, st.processes, st.n_cpus);
	printf("stats off_cpu=%d off_cpu_samples=%" PRIu64 " off_cpu_switches=%" PRIu64
	       " off_cpu_short=%" PRIu64 " off_cpu_filtered=%" PRIu64 " off_cpu_lost=%" PRIu64
	       " off_cpu_kernel_only=%" PRIu64 "\n",
	       st.off_cpu, st.off_cpu_samples, st.off_cpu_switches, st.off_cpu_short,
	       st.off_cpu_filtered, st.off_cpu_full + st.off_cpu_lost_user, st.off_cpu_kernel_only);
	printf("stats bpf_stats_enabled=%d bpf_run_time_ns=%" PRIu64 " bpf_run_cnt=%" PRIu64 "\n",
	       st.bpf_stats_enabled, st.bpf_run_time_ns, st.bpf_run_cnt);
	for (int i = 0; i < PF_SAMPLER_N_PROGS; i++)
		printf("stats prog=%s run_time_ns=%" PRIu64 " run_cnt=%" PRIu64 "\n",
		       st.progs[i].name ? st.progs[i].name : "?", st.progs[i].run_time_ns,
		       st.progs[i].run_cnt);
	printf("stats startup_cpu_ns=%" PRIu64 " kallsyms_cpu_ns=%" PRIu64 " self_cpu_ns=%" PRIu64
	       " max_rss_kb=%ld elf_cached=%" PRIu64 " frames_resolved=%" PRIu64
	       " frames_unresolved=%" PRIu64 " line_build_failed=%" PRIu64 " children_cpu_ns=%" PRIu64
	       " children_max_rss_kb=%ld\n",
	       startup_cpu_ns, st.sym.kernel_load_cpu_ns, cpu_ns, ru.ru_maxrss, st.sym.elf_cached,
	       st.sym.frames_resolved, st.sym.frames_unresolved, st.sym.line_build_failed,
	       ru_cpu_ns(&ch), ch.ru_maxrss);
	if (st.bench_timed)
		printf("stats bench_timed=%" PRIu64 " filter_ns=%" PRIu64 " kstack_ns=%" PRIu64
		       " ustack_ns=%" PRIu64 " record_ns=%" PRIu64 " output_ns=%" PRIu64 "\n",
		       st.bench_timed, st.bench_part_ns[0], st.bench_part_ns[1],
		       st.bench_part_ns[2], st.bench_part_ns[3], st.bench_part_ns[4]);
	printf("stats kernel_resolver=%d kernel_resolved=%" PRIu64 " kernel_resolve_cpu_ns=%" PRIu64
	       "\n",
	       st.sym.kernel_resolver, st.sym.kernel_resolved, st.sym.kernel_resolve_cpu_ns);
	printf("stats elf_opened=%" PRIu64 " elf_evicted=%" PRIu64 " sym_cache_hits=%" PRIu64
	       " line_lookups=%" PRIu64 " line_build_cpu_ns=%" PRIu64 " line_deferred=%" PRIu64
	       " line_tables=%" PRIu64 " line_tables_bytes=%" PRIu64
	       " line_build_max_rss_kb=%" PRIu64 " helper_samples=%" PRIu64 "\n",
	       st.sym.elf_opened, st.sym.elf_evicted, st.sym.cache_hits, st.sym.line_lookups,
	       st.sym.line_build_cpu_ns, st.sym.line_deferred, st.sym.line_tables,
	       st.sym.line_tables_bytes, st.sym.line_build_max_rss_kb, st.helper_samples);
	printf("stats python=%d py_processes=%" PRIu64 " py_detected=%" PRIu64
	       " py_detect_failed=%" PRIu64 " py_unsupported=%" PRIu64
	       " py_samples=%" PRIu64 " py_frames=%" PRIu64 " py_read_errors=%" PRIu64
	       " py_named=%" PRIu64 " py_name_failed=%" PRIu64 " py_names_bytes=%" PRIu64 "\n",
	       st.python, st.py.processes, st.py.detected_total, st.py.detect_failed,
	       st.py.unsupported, st.py_samples, st.py_frames, st.py_read_errors, st.py.named,
	       st.py.name_failed, st.py.names_bytes);
	if (!st.dwarf_unwind) {
		printf("stats dwarf_unwind=0 reason=\"%s\"\n",
		       st.dwarf_unwind_off_reason ? st.dwarf_unwind_off_reason : "");
		return;
	}
	printf("stats dwarf_unwind=1 dwarf_samples=%" PRIu64 " unwind_tables=%" PRIu64
	       " unwind_rows=%" PRIu64 "/%" PRIu64 " unwind_processes=%" PRIu64
	       " unwind_entries=%" PRIu64 " unwind_built=%" PRIu64 " unwind_build_ms=%.1f"
	       " unwind_cache_hits=%" PRIu64 " unwind_cache_bad=%" PRIu64 " unwind_no_cfi=%" PRIu64
	       " unwind_evicted=%" PRIu64 " unwind_rows_full=%" PRIu64 " unwind_reloads=%" PRIu64
	       " unwind_deferred=%" PRIu64 " unwind_pending=%" PRIu64 " unwind_builder_runs=%" PRIu64
	       " unwind_builder_killed=%" PRIu64 "\n",
	       st.dwarf_samples, st.unwind.tables, st.unwind.rows, st.unwind.rows_cap,
	       st.unwind.processes, st.unwind.entries, st.unwind.built,
	       (double)st.unwind.build_ns / 1e6, st.unwind.cache_hits, st.unwind.cache_bad,
	       st.unwind.no_cfi, st.unwind.evicted, st.unwind.rows_full, st.unwind.reloads,
	       st.unwind.deferred, st.unwind.pending, st.unwind.builder_runs,
	       st.unwind.builder_killed);
}

static bool refused(int e)
{
	return e == EPERM || e == EACCES || e == ENOTSUP || e == ENOSYS || e == EOPNOTSUPP ||
	       e == ENOENT;
}

int main(int argc, char **argv)
{
	const char *cfg_path = NULL;
	long seconds = 0, top = 10;
	bool folded = false, stats = false;
	struct pf_sampler_options so = {0};
	int opt;
	while ((opt = getopt(argc, argv, "B:C:c:d:t:FsUvL:")) != -1) {
		char *end;
		switch (opt) {
		case 'B': {
			unsigned long v = strtoul(optarg, &end, 0);
			if (*end || v > 0xff)
				goto usage;
			so.bench_omit = (uint32_t)v;
			break;
		}
		case 'c':
			cfg_path = optarg;
			break;
		case 'C':
			so.unwind_cache_dir = optarg;
			break;
		case 'U':
			so.no_dwarf_unwind = true;
			break;
		case 'L':
			so.line_cache_dir = optarg;
			break;
		case 'd':
			seconds = strtol(optarg, &end, 10);
			if (*end || seconds < 1 || seconds > 86400)
				goto usage;
			break;
		case 't':
			top = strtol(optarg, &end, 10);
			if (*end || top < 1)
				goto usage;
			break;
		case 'F':
			folded = true;
			break;
		case 's':
			stats = true;
			break;
		case 'v':
			pf_log_set_level(PF_LOG_DEBUG);
			break;
		default:
			goto usage;
		}
	}
	pf_log_set_ident("profleet-sample");

	struct pf_error err = {0};
	struct pf_profcfg *cfg = NULL;
	if (cfg_path) {
		size_t len;
		char *text = read_file(cfg_path, &len);
		if (!text) {
			fprintf(stderr, "profleet-sample: %s: %s\n", cfg_path, strerror(errno));
			return 1;
		}
		int rc = pf_profcfg_parse(text, len, &cfg, &err);
		free(text);
		if (rc < 0) {
			fprintf(stderr, "profleet-sample: %s: %s\n", cfg_path, err.msg);
			return 1;
		}
	} else {
		cfg = pf_profcfg_new_default();
		if (!cfg)
			return 1;
	}
	if (!seconds)
		seconds = cfg->duration_seconds;

	struct pf_sampler *s = pf_sampler_new(&so, &err);
	if (!s) {
		int e = errno;
		fprintf(stderr, "profleet-sample: %s\n", err.msg);
		pf_profcfg_free(cfg);
		if (refused(e)) {
			fprintf(stderr, "profleet-sample: SKIP: the kernel refuses BPF/perf here\n");
			return 77;
		}
		return 1;
	}
	int rc = pf_sampler_set_config(s, cfg, &err);
	if (rc < 0) {
		fprintf(stderr, "profleet-sample: %s\n", err.msg);
		pf_sampler_free(s);
		pf_profcfg_free(cfg);
		return refused(-rc) ? 77 : 1;
	}
	startup_cpu_ns = cpu_now_ns(); /* load, attach, /proc scan: paid once per agent start */
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	uint64_t t0 = now_ms(), deadline = t0 + (uint64_t)seconds * 1000;
	uint64_t next_close = t0 + (uint64_t)cfg->duration_seconds * 1000;
	int ret = 0;
	unsigned windows = 0;
	while (!stop) {
		uint64_t now = now_ms();
		if (now >= next_close || now >= deadline) {
			struct pf_prof_window *w = pf_sampler_close_window(s, &err);
			if (!w) {
				fprintf(stderr, "profleet-sample: %s\n", err.msg);
				ret = 1;
				break;
			}
			do {
				print_window(w, (int)top, folded);
				pf_prof_window_free(w);
			} while ((w = pf_sampler_next_window(s)));
			if (stats)
				print_window_cpu(s, ++windows, now_ms() - t0);
			next_close += (uint64_t)cfg->duration_seconds * 1000;
			if (now >= deadline)
				break;
			continue;
		}
		uint64_t wait = pf_min(next_close, deadline) - now;
		rc = pf_sampler_poll(s, (int)pf_min(wait, 500));
		if (rc < 0) {
			fprintf(stderr, "profleet-sample: poll: %s\n", strerror(-rc));
			ret = 1;
			break;
		}
	}
	if (stats)
		print_stats(s);
	pf_sampler_free(s);
	pf_profcfg_free(cfg);
	return ret;
usage:
	fprintf(stderr, "usage: profleet-sample [-c profiling.yaml] [-d seconds] [-t top] [-F] "
			"[-s] [-v] [-B bench-omit-bits] [-U] [-C unwind-cache-dir] "
			"[-L line-cache-dir]\n");
	return 2;
}
