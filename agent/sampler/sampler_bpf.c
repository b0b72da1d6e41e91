/* sampler_bpf.c — see sampler_bpf.h and sampler_int.h: the sampler object's life (BPF load
 * and attach, perf events, the kernel's pid verdicts, configuration, polling, clocks). */
#include "sampler/sampler_int.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pf/log.h"
#include "interp/python_unwind.h"
#include "interp/v8_unwind.h"
#include "interp/hotspot_unwind.h"
#include "sampler/procinfo.h"
#include "sampler/sample_ring.h"
#include "symbolize/symbolize.h"
#include "unwind/unwinder.h"

/* ---- clocks ------------------------------------------------------------------------------- */

/* Set-up work: what meeting a process costs once (its /proc attributes, its maps, its
 * unwind tables), apart from the steady cost of sampling it. Its thread CPU time is counted
 * in setup_cpu_ns, which the overhead guard judges on a budget of its own; only paths that
 * do such work take the clock (a system call). */
uint64_t sampler_setup_begin(struct pf_sampler *s)
{
	s->setup_sym_mark = s->sym ? pf_symbolizer_load_cpu_ns(s->sym) : 0;
	return pf_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* The symbolizer's file loads inside the section are left out: it counts them itself, inside
 * a section or not (pf_sampler_setup_cpu_ns adds them). Sections do not nest. */
void sampler_setup_end(struct pf_sampler *s, uint64_t t0)
{
	uint64_t t = pf_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	uint64_t dt = t > t0 ? t - t0 : 0;
	uint64_t inner = s->sym ? pf_symbolizer_load_cpu_ns(s->sym) - s->setup_sym_mark : 0;
	s->setup_cpu_ns += dt > inner ? dt - inner : 0;
}

/* bpf_ktime_get_ns() is CLOCK_MONOTONIC; take the tightest of a few paired reads. */
void sampler_refresh_clock(struct pf_sampler *s)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 3; i++) {
		uint64_t m1 = pf_clock_ns(CLOCK_MONOTONIC), r = pf_clock_ns(CLOCK_REALTIME),
			 m2 = pf_clock_ns(CLOCK_MONOTONIC);
		if (m2 - m1 < best) {
			best = m2 - m1;
			s->mono_to_unix = (int64_t)(r - (m1 + (m2 - m1) / 2));
		}
	}
}

/* ---- libbpf logs into ours ---------------------------------------------------------------- */

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	enum pf_log_level l = level == LIBBPF_WARN ? PF_LOG_WARN
			      : level == LIBBPF_INFO ? PF_LOG_DEBUG
						     : PF_LOG_DEBUG;
	if ((int)l > pf_log_level_current)
		return 0;
	char line[1024];
	vsnprintf(line, sizeof(line), fmt, ap);
	pf_log_emit_raw(l, "libbpf", line);
	return 0;
}

/* ---- pid verdicts ------------------------------------------------------------------------- */

bool sampler_proc_allowed(struct pf_sampler *s, const struct pf_proc *p)
{
	if (p->pid == s->self_pid && !s->opt.include_self)
		return false;
	return p->allowed;
}

void sampler_push_verdict(struct pf_sampler *s, const struct pf_proc *p)
{
	__u32 key = p->pid;
	__u8 v = sampler_proc_allowed(s, p) ? PF_FILTER_ALLOW : PF_FILTER_DENY;
	bpf_map__update_elem(s->skel->maps.pid_filter, &key, sizeof(key), &v, sizeof(v), BPF_ANY);
	/* after the update: drops the verdicts the kernel cached per CPU */
	__atomic_fetch_add(&s->skel->bss->filter_gen, 1, __ATOMIC_SEQ_CST);
}

int sampler_push_one(void *ctx, const struct pf_proc *p)
{
	if (!p->exited)
		sampler_push_verdict(ctx, p);
	return 0;
}

/* The agent itself is skipped in the kernel by a tgid compare (skip_tgid); the allow-map is
 * only consulted while include/exclude filters are active. */
bool sampler_need_filter(struct pf_sampler *s)
{
	return pf_procinfo_filtering(s->pi);
}

static void sync_filter_map(struct pf_sampler *s)
{
	if (!sampler_need_filter(s)) {
		s->skel->bss->filter_on = 0;
		return;
	}
	/* Verdicts for the processes that exist already (also refreshes entries that exec'd
	 * while nothing was filtered); exec/fork/exit keep the table current from here on.
	 * Without filters nobody needs them before a process's first sample. */
	if (!s->skel->bss->filter_on)
		pf_procinfo_scan(s->pi);
	pf_procinfo_foreach(s->pi, sampler_push_one, s);
	s->skel->bss->filter_on = 1;
}

int pf_sampler_fd(const struct pf_sampler *s)
{
	return ring_buffer__epoll_fd(s->rb);
}

/* Tells the kernel the table builders' current children, so that their ticks are not
 * recorded (sampler_on_sample drops what came before it knew). */
static void sync_helpers(struct pf_sampler *s)
{
	uint32_t h[2] = {s->unw ? pf_unwinder_helper_pid(s->unw) : 0,
			 pf_symbolizer_helper_pid(s->sym)};
	for (int i = 0; i < 2; i++)
		if (s->skel->bss->skip_helper[i] != h[i])
			s->skel->bss->skip_helper[i] = h[i];
}

int pf_sampler_poll(struct pf_sampler *s, int timeout_ms)
{
	/* timeout 0: the caller's own poll(2) watched the fd; an epoll_wait would only tell the
	 * consume below what it finds out itself */
	int rc = timeout_ms ? ring_buffer__poll(s->rb, timeout_ms) : 0;
	if (rc == -EINTR)
		rc = 0;
	if (rc < 0)
		return rc;
	/* pod attribution: verdicts taken before a process's pod reached the cache */
	if (s->skel->bss->filter_on)
		pf_procinfo_refresh_source(s->pi, sampler_push_one, s);
	/* samples do not wake us one by one (see cpu_sampler.bpf.c): drain on every call */
	sampler_refresh_clock(s);
	uint64_t t = pf_clock_ns(CLOCK_REALTIME);
	int n = ring_buffer__consume(s->rb);
	if (s->unw) {
		/* building and reading tables (and forking their builders) is set-up */
		uint64_t t0 = sampler_setup_begin(s);
		pf_unwinder_tick(s->unw);
		sampler_setup_end(s, t0);
	}
	for (size_t i = 0; i < SAMPLER_WALKERS; i++)
		s->walkers[i].ops->tick(s->walkers[i].w);
	sampler_alloc_poll(s);
	sync_helpers(s);
	if (n >= 0)
		s->drained_unix_ns = t;
	return n < 0 ? n : rc + n;
}

/* ---- perf events -------------------------------------------------------------------------- */

void sampler_perf_close(struct sampler_perf_set *ps)
{
	for (uint32_t i = 0; i < ps->n; i++) {
		bpf_link__destroy(ps->links[i]);
		close(ps->fds[i]);
	}
	ps->n = 0;
}

/* Opens one cpu-clock event per online CPU at hz into ps, each running prog. */
int sampler_perf_open(struct pf_sampler *s, struct sampler_perf_set *ps, struct bpf_program *prog,
		     uint32_t hz, struct pf_error *err)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = 1000000000ull / hz, /* cpu-clock counts nanoseconds */
	};
	for (int cpu = 0; cpu < s->n_cpus_possible; cpu++) {
		int fd =
		    (int)syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			if (errno == ENODEV) /* offline CPU */
				continue;
			int e = -errno;
			sampler_perf_close(ps);
			return pf_error_set(err, e, "", "perf_event_open(cpu-clock, cpu %d): %s",
					    cpu, strerror(-e));
		}
		struct bpf_link *l = bpf_program__attach_perf_event(prog, fd);
		if (!l) {
			int e = -errno;
			close(fd);
			sampler_perf_close(ps);
			return pf_error_set(err, e, "", "attach perf_event program: %s",
					    strerror(-e));
		}
		ps->fds[ps->n] = fd;
		ps->links[ps->n++] = l;
	}
	if (!ps->n)
		return pf_error_set(err, -ENODEV, "", "no online CPU accepted a perf event");
	return 0;
}

int sampler_perf_set_period(struct sampler_perf_set *ps, uint32_t hz, const char *key,
			   struct pf_error *err)
{
	uint64_t period = 1000000000ull / hz;
	for (uint32_t i = 0; i < ps->n; i++)
		if (ioctl(ps->fds[i], PERF_EVENT_IOC_PERIOD, &period) < 0)
			return pf_error_set(err, -errno, key, "PERF_EVENT_IOC_PERIOD: %s",
					    strerror(errno));
	return 0;
}

/* ---- config ------------------------------------------------------------------------------- */

static bool want_running(const struct pf_sampler *s)
{
	return s->enabled && (!s->triggered_mode || s->trigger_on || s->ring);
}

/* Brings the perf events in line with enabled/mode/trigger and the frequency. */
int sampler_apply_running(struct pf_sampler *s, uint32_t hz, struct pf_error *err)
{
	bool want = want_running(s);
	int rc = 0;
	if (want && !s->pe.n) {
		rc = sampler_perf_open(s, &s->pe, s->skel->progs.do_sample, hz, err);
	} else if (!want && s->pe.n) {
		sampler_perf_close(&s->pe);
	} else if (want && hz != s->freq_hz) {
		rc = sampler_perf_set_period(&s->pe, hz, "profiling.sampling.frequency_hz", err);
	}
	if (rc == 0)
		s->freq_hz = hz;
	/* off-CPU follows the continuous windows (not between triggers), the ring, captures */
	if (rc == 0)
		rc = sampler_off_cpu_update(s, err);
	return rc;
}

/* Deletes every entry of the hash map m. */
void sampler_map_clear(struct bpf_map *m, size_t key_size)
{
	uint64_t key;
	for (uint32_t i = 0; i < bpf_map__max_entries(m) &&
			     bpf_map__get_next_key(m, NULL, &key, key_size) == 0;
	     i++) {
		if (bpf_map__delete_elem(m, &key, key_size, 0) < 0)
			break;
	}
}

/* profiling.interpreters.python, .nodejs and .java: off forgets every process of walker k
 * and empties its kernel map m (its samples keep their native stacks; without their
 * v8_procs or jvm_procs entry the kernel's walk of node processes and JVMs ends at their JIT
 * code, as for any JIT); on detects processes again at their next samples. */
static void walker_enable(const struct sampler_walker *k, struct bpf_map *m, bool on)
{
	if (pf_interp_walker_enable(k->ops, k->w, on) && m)
		sampler_map_clear(m, sizeof(uint32_t));
}

int pf_sampler_set_config(struct pf_sampler *s, const struct pf_profcfg *cfg, struct pf_error *err)
{
	if (!cfg || cfg->frequency_hz < 1 || cfg->frequency_hz > 1000)
		return pf_error_set(err, -EINVAL, "profiling.sampling.frequency_hz",
				    "must be 1..1000");
	int rc = pf_procinfo_set_filters(s->pi, cfg->include, cfg->n_include, cfg->exclude,
					 cfg->n_exclude, err);
	if (rc < 0)
		return rc;
	sync_filter_map(s);
	walker_enable(&s->walkers[SAMPLER_WALKER_PY], s->skel->maps.py_procs,
		      cfg->interpreters.python);
	walker_enable(&s->walkers[SAMPLER_WALKER_V8], s->skel->maps.v8_procs,
		      cfg->interpreters.nodejs);
	/* Java frames are named in user space: no kernel map */
	walker_enable(&s->walkers[SAMPLER_WALKER_JVM], s->skel->maps.jvm_procs,
		      cfg->interpreters.java);
	/* the unwind rows may take an eighth of limits.max_memory_mb (the sample ring a quarter) */
	if (s->unw && cfg->limits.max_memory_mb)
		pf_unwinder_set_rows_limit(s->unw, (uint64_t)cfg->limits.max_memory_mb * 1024 *
						       1024 / 8 / sizeof(struct pf_bpf_unwind_row));

	bool old_enabled = s->enabled, old_mode = s->triggered_mode, old_off = s->off_cpu_cfg;
	uint32_t old_hz = s->freq_hz;
	bool was_running = s->pe.n > 0;
	s->enabled = cfg->enabled;
	s->triggered_mode = cfg->mode == PF_MODE_TRIGGERED;
	s->off_cpu_cfg = cfg->off_cpu.enabled;
	sampler_off_cpu_knobs(s, cfg);
	pf_sampler_alloc_options(cfg, &s->alloc_opt);
	/* drain what the old period produced before switching */
	ring_buffer__consume(s->rb);
	rc = sampler_apply_running(s, cfg->frequency_hz, err);
	if (rc < 0) {
		s->enabled = old_enabled;
		s->triggered_mode = old_mode;
		s->off_cpu_cfg = old_off;
		s->last_error = rc;
		sampler_apply_running(s, old_hz, NULL); /* what the old settings had running */
		return rc;
	}
	/* A window has one sampling period: a new frequency closes what was sampled so far,
	 * cut at the moment of the switch (samples queued since then carry later times). */
	if (was_running && old_hz != s->freq_hz) {
		sampler_refresh_clock(s);
		rc = sampler_cut_window(s, pf_clock_ns(CLOCK_REALTIME), old_hz, err);
	}
	return rc;
}

int pf_sampler_trigger(struct pf_sampler *s, bool on, struct pf_error *err)
{
	bool old = s->trigger_on;
	s->trigger_on = on;
	int rc = sampler_apply_running(s, s->freq_hz, err);
	if (rc < 0)
		s->trigger_on = old;
	return rc;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

void pf_sampler_free(struct pf_sampler *s)
{
	if (!s)
		return;
	if (s->skel) {
		sampler_perf_close(&s->pe);
		sampler_perf_close(&s->cpe);
	}
	for (size_t i = 0; i < PF_SAMPLER_CAPTURES; i++)
		pf_agg_free(s->cap[i].agg);
	if (s->skel) {
		sampler_off_cpu_free(s);
		sampler_alloc_free(s);
	}
	for (size_t i = 0; i < PF_ARRAY_SIZE(s->proc_links); i++)
		bpf_link__destroy(s->proc_links[i]);
	ring_buffer__free(s->rb);
	pf_unwinder_free(s->unw);
	free(s->unw_cache_dir);
	cpu_sampler_bpf__destroy(s->skel);
	free(s->ksym_req);
	if (s->stats_fd >= 0)
		close(s->stats_fd);
	for (size_t i = 0; i < s->n_ready; i++)
		pf_prof_window_free(s->ready[i]);
	pf_agg_free(s->agg);
	pf_sample_ring_free(s->ring);
	pf_symbolizer_free(s->sym);
	pf_py_unwind_free(s->py);
	pf_v8_unwind_free(s->v8);
	pf_hs_unwind_free(s->hs);
	pf_procinfo_free(s->pi);
	free(s->pe.fds);
	free(s->pe.links);
	free(s->cpe.fds);
	free(s->cpe.links);
	free(s);
}

/* pf_kernel_resolve_fn: one run of resolve_ksyms over a batch of kernel addresses. */
static int resolve_kernel(void *ctx, const uint64_t *addrs, size_t n,
			  char (*text)[PF_SYM_KTEXT_LEN])
{
	_Static_assert(PF_SYM_KRESOLVE_BATCH == PF_KSYM_BATCH, "batch sizes differ");
	_Static_assert(PF_SYM_KTEXT_LEN == PF_KSYM_TEXT_LEN, "text sizes differ");
	struct pf_sampler *s = ctx;
	if (n > PF_KSYM_BATCH)
		return -EINVAL;
	if (!s->ksym_req && !(s->ksym_req = malloc(sizeof(*s->ksym_req))))
		return -ENOMEM;
	struct pf_bpf_ksym_req *r = s->ksym_req;
	r->n = (unsigned)n;
	r->pad = 0;
	memcpy(r->addrs, addrs, n * sizeof(*addrs));
	for (size_t i = 0; i < n; i++)
		r->text[i][0] = 0;
	int fd = bpf_map__fd(s->skel->maps.ksym_req);
	__u32 zero = 0;
	if (bpf_map_update_elem(fd, &zero, r, BPF_ANY) < 0)
		return -errno;
	LIBBPF_OPTS(bpf_test_run_opts, run);
	int rc = bpf_prog_test_run_opts(bpf_program__fd(s->skel->progs.resolve_ksyms), &run);
	if (rc < 0)
		return rc;
	if (bpf_map_lookup_elem(fd, &zero, r) < 0)
		return -errno;
	for (size_t i = 0; i < n; i++)
		memcpy(text[i], r->text[i], PF_KSYM_TEXT_LEN);
	return 0;
}

/* PF_SAMPLES_RB_PER_CPU per possible CPU, a power of two within [MIN, MAX] (cpu_sampler.h). */
static uint32_t samples_rb_bytes(int n_cpus)
{
	uint64_t want = (uint64_t)n_cpus * PF_SAMPLES_RB_PER_CPU;
	uint32_t sz = PF_SAMPLES_RB_MIN_BYTES;
	while (sz < want && sz < PF_SAMPLES_RB_MAX_BYTES)
		sz <<= 1;
	return sz;
}

/* Before load: .eh_frame unwinding needs bpf_loop (5.17) and bpf_task_pt_regs (5.15) in
 * perf_event programs, and x86_64 (the tables' register rules). Returns the rows to hold. */
static uint32_t unwind_setup(struct pf_sampler *s)
{
	s->skel->rodata->dwarf_unwind = 0;
	uint32_t rows = s->opt.unwind_rows ? s->opt.unwind_rows : PF_SAMPLER_UNWIND_ROWS;
	rows = (rows + PF_UNWINDER_CHUNK - 1) / PF_UNWINDER_CHUNK * PF_UNWINDER_CHUNK;
#if !defined(__x86_64__)
	s->unw_off = "table walk implemented for x86_64 only";
	return 0;
#endif
	if (s->opt.no_dwarf_unwind) {
		s->unw_off = "off: --frame-pointers-only";
		return 0;
	}
	if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL) != 1 ||
	    libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs, NULL) != 1) {
		s->unw_off = "kernel lacks bpf_loop or bpf_task_pt_regs (needs 5.17+)";
		pf_log_warn("sampler: .eh_frame unwinding off: %s; frame pointers only",
			    s->unw_off);
		return 0;
	}
	if (bpf_map__set_max_entries(s->skel->maps.unwind_rows, rows) < 0) {
		s->unw_off = "cannot size the unwind rows";
		return 0;
	}
	s->skel->rodata->dwarf_unwind = 1;
	return rows;
}

/* After load: the user side of the table walk. Without it the walk finds no process and
 * every stack is walked by frame pointers, as before. */
static void unwind_start(struct pf_sampler *s, uint32_t rows)
{
	if (s->opt.unwind_cache_dir && !(s->unw_cache_dir = strdup(s->opt.unwind_cache_dir)))
		return;
	struct pf_unwinder_options uo = {
		.rows_fd = bpf_map__fd(s->skel->maps.unwind_rows),
		.rows_cap = rows,
		.tables_fd = bpf_map__fd(s->skel->maps.unwind_tables),
		.tables_cap = PF_UNWIND_TABLES_MAX,
		.procs_fd = bpf_map__fd(s->skel->maps.unwind_procs),
		.cache_dir = s->unw_cache_dir,
	};
	s->unw = pf_unwinder_new(&uo);
	if (!s->unw) {
		s->unw_off = "cannot map the unwind rows";
		pf_log_warn("sampler: .eh_frame unwinding off: %s: %s", s->unw_off,
			    strerror(errno));
	}
}

static struct pf_sampler *fail(struct pf_sampler *s, int rc)
{
	pf_sampler_free(s);
	errno = rc < 0 ? -rc : rc;
	return NULL;
}

struct pf_sampler *pf_sampler_new(const struct pf_sampler_options *opt, struct pf_error *err)
{
	struct pf_sampler *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->stats_fd = -1;
	if (opt)
		s->opt = *opt;
	s->self_pid = (uint32_t)getpid();
	libbpf_set_print(libbpf_print);

	s->n_cpus_possible = libbpf_num_possible_cpus();
	if (s->n_cpus_possible <= 0)
		return fail(s, pf_error_set(err, -ENOTSUP, "", "cannot count possible CPUs"));
	s->pe.fds = calloc((size_t)s->n_cpus_possible, sizeof(*s->pe.fds));
	s->pe.links = calloc((size_t)s->n_cpus_possible, sizeof(*s->pe.links));
	s->cpe.fds = calloc((size_t)s->n_cpus_possible, sizeof(*s->cpe.fds));
	s->cpe.links = calloc((size_t)s->n_cpus_possible, sizeof(*s->cpe.links));
	struct pf_procinfo_options po = {.host_name = s->opt.host_name,
					 .command_line = s->opt.command_line,
					 .source = s->opt.attr_source};
	struct pf_symbolizer_options so = {.max_elf_files = s->opt.max_elf_files,
					   .no_kernel = s->opt.no_kernel_symbols,
					   .line_dir = s->opt.line_cache_dir};
	struct pf_agg_options ao = {.max_samples = s->opt.max_samples};
	s->pi = pf_procinfo_new(&po);
	s->sym = pf_symbolizer_new(&so);
	s->agg = pf_agg_new(&ao);
	s->py = pf_py_unwind_new(0);
	s->v8 = pf_v8_unwind_new();
	s->hs = pf_hs_unwind_new();
	s->walkers[SAMPLER_WALKER_PY] = (struct sampler_walker){&pf_py_walker, s->py};
	s->walkers[SAMPLER_WALKER_V8] = (struct sampler_walker){&pf_v8_walker, s->v8};
	s->walkers[SAMPLER_WALKER_JVM] = (struct sampler_walker){&pf_hs_walker, s->hs};
	if (!s->pe.fds || !s->pe.links || !s->cpe.fds || !s->cpe.links || !s->pi || !s->sym ||
	    !s->agg || !s->py || !s->v8 || !s->hs)
		return fail(s, pf_error_set(err, -ENOMEM, "", "out of memory"));

	/* open -> configure -> load -> attach (libbpf-tools) */
	/* A second attempt without the allocation programs when the kernel refuses them (their
	 * kfuncs and attach type are the newest the object asks for): CPU profiling must not
	 * depend on them. */
	int rc = 0;
	uint32_t unw_rows = 0;
	for (int attempt = 0; attempt < 2; attempt++) {
		s->skel = cpu_sampler_bpf__open();
		if (!s->skel)
			return fail(s, pf_error_set(err, -errno, "", "open BPF object: %s",
						    strerror(errno)));
		uint32_t rb_bytes = samples_rb_bytes(s->n_cpus_possible);
		rc = bpf_map__set_max_entries(s->skel->maps.samples, rb_bytes);
		if (rc < 0)
			return fail(s, pf_error_set(err, rc, "", "size the sample ring buffer: %s",
						    strerror(-rc)));
		s->skel->rodata->wake_bytes = rb_bytes / 4;
		s->skel->rodata->bench_omit = s->opt.bench_omit;
		/* The kernel symbol resolver needs syscall programs with bpf_snprintf (5.14+);
		 * without them the sampler loads without it and the symbolizer reads
		 * /proc/kallsyms. */
		s->ksym_prog = !s->opt.no_kernel_symbols &&
			       libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_SYSCALL, NULL) == 1 &&
			       libbpf_probe_bpf_helper(BPF_PROG_TYPE_SYSCALL, BPF_FUNC_snprintf,
						       NULL) == 1;
		bpf_program__set_autoload(s->skel->progs.resolve_ksyms, s->ksym_prog);
		unw_rows = unwind_setup(s);
		sampler_alloc_setup(s, attempt == 0);
		rc = cpu_sampler_bpf__load(s->skel);
		if (rc == 0 || !s->alloc_prog || rc == -EPERM || rc == -EACCES)
			break;
		pf_log_warn("sampler: the kernel refuses the allocation probes (%s): loading "
			    "without them, alloc captures off",
			    strerror(-rc));
		cpu_sampler_bpf__destroy(s->skel);
		s->skel = NULL;
	}
	if (rc < 0)
		return fail(s, pf_error_set(err, rc, "", "load BPF programs (needs CAP_BPF + "
					    "CAP_PERFMON and kernel BTF): %s", strerror(-rc)));
	struct bpf_program *tp[3] = {s->skel->progs.handle_exec, s->skel->progs.handle_fork,
				     s->skel->progs.handle_exit};
	for (int i = 0; i < 3; i++) {
		s->proc_links[i] = bpf_program__attach(tp[i]);
		if (!s->proc_links[i])
			return fail(s, pf_error_set(err, -errno, "", "attach %s: %s",
						    bpf_program__name(tp[i]), strerror(errno)));
	}
	/* BPF run-time stats for the agent's metrics; optional (kernel.bpf_stats_enabled works
	 * too). */
	s->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (s->stats_fd < 0)
		s->stats_fd = -1;

	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.samples), sampler_on_sample, s, NULL);
	if (!s->rb ||
	    ring_buffer__add(s->rb, bpf_map__fd(s->skel->maps.events), sampler_on_event, s) < 0)
		return fail(s, pf_error_set(err, -errno, "", "ring buffer: %s", strerror(errno)));

	if (s->ksym_prog)
		pf_symbolizer_set_kernel_resolver(s->sym, resolve_kernel, s);
	if (s->skel->rodata->dwarf_unwind)
		unwind_start(s, unw_rows);
	if (!s->opt.include_self)
		s->skel->bss->skip_tgid = s->self_pid;
	/* /proc is scanned once filters need verdicts (sync_filter_map); /proc/kallsyms is
	 * loaded at the first kernel frame to symbolize. */
	sync_filter_map(s);
	sampler_refresh_clock(s);
	/* libbpf freed the parsed kernel BTF (several MB) after the load: give the pages back */
	malloc_trim(0);
	s->window_start = pf_clock_ns(CLOCK_REALTIME);
	s->freq_hz = 99;
	return s;
}

size_t pf_sampler_unwind_entries(struct pf_sampler *s, uint32_t pid)
{
	return s->unw ? pf_unwinder_kernel_entries(s->unw, pid) : 0;
}

size_t pf_sampler_python_entries(struct pf_sampler *s, uint32_t pid)
{
	struct pf_bpf_py_proc e;
	return bpf_map__lookup_elem(s->skel->maps.py_procs, &pid, sizeof(pid), &e, sizeof(e), 0) ==
	       0;
}
