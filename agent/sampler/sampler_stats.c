/* sampler_stats.c — see sampler_bpf.h and sampler_int.h: counters for metrics and health. */
#include "sampler/sampler_int.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp/python_unwind.h"
#include "interp/v8_unwind.h"
#include "sampler/procinfo.h"
#include "symbolize/symbolize.h"
#include "unwind/unwinder.h"

_Static_assert(PF_V8_UNWIND_UNSUPPORTED_KEPT == 8 && PF_V8_UNWIND_MSG_LEN == 144,
	       "nodejs counts of struct pf_sampler_stats differ");
_Static_assert(PF_PY_UNWIND_MINORS == 5 && PF_PY_UNWIND_UNSUPPORTED_KEPT == 8 &&
		       PF_PY_UNWIND_MSG_LEN == 144,
	       "python counts of struct pf_sampler_stats differ");

/* ---- stats -------------------------------------------------------------------------------- */

static int read_counters(struct pf_sampler *s, uint64_t sum[PF_CNT_MAX])
{
	memset(sum, 0, PF_CNT_MAX * sizeof(sum[0]));
	size_t nc = (size_t)s->n_cpus_possible;
	/* every key of every CPU in one system call (BPF_MAP_LOOKUP_BATCH, Linux 5.6) */
	_cleanup_free_ uint64_t *all = calloc(PF_CNT_MAX * nc, sizeof(*all));
	if (!all)
		return -ENOMEM;
	__u32 keys[PF_CNT_MAX], out_batch = 0, count = PF_CNT_MAX;
	LIBBPF_OPTS(bpf_map_batch_opts, bo);
	int rc = bpf_map_lookup_batch(bpf_map__fd(s->skel->maps.counters), NULL, &out_batch, keys,
				      all, &count, &bo);
	if ((rc == 0 || errno == ENOENT) && count == PF_CNT_MAX) {
		for (__u32 i = 0; i < PF_CNT_MAX; i++)
			for (size_t c = 0; c < nc; c++)
				if (keys[i] < PF_CNT_MAX)
					sum[keys[i]] += all[i * nc + c];
		return 0;
	}
	_cleanup_free_ uint64_t *vals = calloc(nc, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	for (__u32 k = 0; k < PF_CNT_MAX; k++) {
		if (bpf_map__lookup_elem(s->skel->maps.counters, &k, sizeof(k), vals,
					 (size_t)s->n_cpus_possible * sizeof(*vals), 0) < 0)
			return -errno;
		for (int c = 0; c < s->n_cpus_possible; c++)
			sum[k] += vals[c];
	}
	return 0;
}

char *sampler_percpu_read(struct pf_sampler *s, size_t *stride, int *err)
{
	*stride = (sizeof(struct pf_bpf_percpu) + 7) & ~(size_t)7;
	char *vals = calloc((size_t)s->n_cpus_possible, *stride);
	__u32 zero = 0;
	if (!vals) {
		*err = -ENOMEM;
		return NULL;
	}
	if (bpf_map__lookup_elem(s->skel->maps.scratch_map, &zero, sizeof(zero), vals,
				 (size_t)s->n_cpus_possible * *stride, 0) < 0) {
		*err = -errno;
		free(vals);
		return NULL;
	}
	return vals;
}

/* Adds the per-tick counts the sample program keeps in its per-CPU state (cpu_sampler.h,
 * struct pf_bpf_percpu) to sum. */
static int add_percpu_counts(struct pf_sampler *s, uint64_t sum[PF_CNT_MAX],
			     struct pf_sampler_stats *out)
{
	size_t stride;
	int rc;
	_cleanup_free_ char *vals = sampler_percpu_read(s, &stride, &rc);
	if (!vals)
		return rc;
	for (int c = 0; c < s->n_cpus_possible; c++) {
		const struct pf_bpf_percpu *p = (const void *)(vals + (size_t)c * stride);
		sum[PF_CNT_SAMPLES] += p->samples;
		sum[PF_CNT_CAPTURE] += p->captures;
		sum[PF_CNT_FILTERED] += p->filtered;
		if (out) {
			out->off_cpu_samples += p->off_cpu;
			out->off_cpu_switches += p->off_cpu_out;
			out->off_cpu_short += p->off_cpu_short;
			out->off_cpu_filtered += p->off_cpu_filtered;
			out->off_cpu_full += p->off_cpu_full;
			out->off_cpu_kernel_only += p->off_cpu_kernel_only;
			out->py_samples += p->py_samples;
			out->py_frames += p->py_frames;
			out->py_read_errors += p->py_read_errors;
			out->py_no_thread += p->py_no_thread;
			out->v8_frames += p->v8_frames;
			out->v8_read_errors += p->v8_read_errors;
			out->jvm_frames += p->jvm_frames;
			out->jvm_read_errors += p->jvm_read_errors;
		}
	}
	return 0;
}

uint64_t sampler_lost_total(struct pf_sampler *s)
{
	uint64_t c[PF_CNT_MAX];
	struct pf_agg_stats as;
	pf_agg_stats(s->agg, &as);
	if (read_counters(s, c) < 0)
		return as.dropped;
	return c[PF_CNT_LOST_RB] + as.dropped;
}

struct profiled_ctx {
	struct pf_sampler *s;
	uint32_t *out;
	size_t cap, n;
};

static int profiled_one(void *ctx, const struct pf_proc *p)
{
	struct profiled_ctx *c = ctx;
	if (p->exited || !p->exe_path || !sampler_proc_allowed(c->s, p))
		return 0;
	if (c->n < c->cap)
		c->out[c->n] = p->pid;
	c->n++;
	return 0;
}

size_t pf_sampler_profiled_pids(struct pf_sampler *s, uint32_t *out, size_t cap)
{
	struct profiled_ctx c = {.s = s, .out = out, .cap = cap};
	pf_procinfo_foreach(s->pi, profiled_one, &c);
	return c.n;
}

/* Run time and count of each program (kernel BPF statistics), into out->progs and the sums. */
static void prog_run_stats(struct pf_sampler *s, struct pf_sampler_stats *out)
{
	struct bpf_program *progs[PF_SAMPLER_N_PROGS] = {
		s->skel->progs.do_sample,   s->skel->progs.handle_exec,
		s->skel->progs.handle_fork, s->skel->progs.handle_exit,
		s->skel->progs.resolve_ksyms, s->skel->progs.do_capture,
		s->skel->progs.off_cpu_switch, s->skel->progs.off_cpu_sys_exit};
	for (int i = 0; i < PF_SAMPLER_N_PROGS; i++) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		memset(&info, 0, sizeof(info));
		out->progs[i].name = bpf_program__name(progs[i]);
		if (progs[i] == s->skel->progs.resolve_ksyms && !s->ksym_prog)
			continue; /* not loaded */
		if (bpf_obj_get_info_by_fd(bpf_program__fd(progs[i]), &info, &len) < 0)
			continue;
		out->progs[i].run_time_ns = info.run_time_ns;
		out->progs[i].run_cnt = info.run_cnt;
		out->bpf_run_time_ns += info.run_time_ns;
		out->bpf_run_cnt += info.run_cnt;
	}
}

int pf_sampler_bpf_run_time(struct pf_sampler *s, uint64_t *ns)
{
	struct pf_sampler_stats st;
	*ns = 0;
	if (s->stats_fd < 0)
		return -ENODATA;
	memset(&st, 0, sizeof(st));
	prog_run_stats(s, &st);
	*ns = st.bpf_run_time_ns;
	return 0;
}

uint64_t pf_sampler_setup_cpu_ns(const struct pf_sampler *s)
{
	return s->setup_cpu_ns + (s->py ? pf_py_unwind_detect_cpu_ns(s->py) : 0) +
	       (s->sym ? pf_symbolizer_load_cpu_ns(s->sym) : 0);
}

int pf_sampler_stats(struct pf_sampler *s, struct pf_sampler_stats *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t c[PF_CNT_MAX];
	int rc = read_counters(s, c);
	if (rc == 0)
		rc = add_percpu_counts(s, c, out);
	if (rc < 0)
		return rc;
	out->running = s->pe.n > 0;
	out->frequency_hz = s->freq_hz;
	out->n_cpus = s->pe.n;
	out->samples = c[PF_CNT_SAMPLES];
	out->capture_samples = c[PF_CNT_CAPTURE];
	out->capture_hz = s->cpe.n ? s->cap_hz : 0;
	for (size_t i = 0; i < PF_SAMPLER_CAPTURES; i++)
		out->captures += s->cap[i].used;
	out->lost_kernel = c[PF_CNT_LOST_RB];
	out->filtered = c[PF_CNT_FILTERED];
	out->stack_errors = c[PF_CNT_STACK_ERR];
	out->lost_events = c[PF_CNT_LOST_EVENT];
	for (int i = 0; i < PF_CNT_T_N - PF_CNT_T_FILTER; i++)
		out->bench_part_ns[i] = c[PF_CNT_T_FILTER + i];
	out->bench_timed = c[PF_CNT_T_N];
	struct pf_agg_stats as;
	pf_agg_stats(s->agg, &as);
	out->lost_user = as.dropped;
	out->pending = as.pending;
	out->processes = pf_procinfo_count(s->pi);
	out->bpf_stats_enabled = s->stats_fd >= 0;

	prog_run_stats(s, out);
	pf_symbolizer_stats(s->sym, &out->sym);
	out->helper_samples = s->helper_samples;
	out->windows_held = s->windows_held;
	out->windows_held_ns = s->windows_held_ns;
	out->off_cpu = sampler_off_cpu_on(s);
	if (s->off_agg) {
		pf_agg_stats(s->off_agg, &as);
		out->off_cpu_lost_user = as.dropped;
		out->off_cpu_pending = as.pending;
	}
	out->last_error = s->last_error;
	out->dwarf_unwind = s->unw != NULL;
	out->dwarf_unwind_off_reason = s->unw ? NULL : s->unw_off;
	out->dwarf_samples = s->dwarf_samples;
	out->python = pf_interp_walker_enabled(s->py);
	pf_py_unwind_stats(s->py, &out->py);
	out->py_map_errors = s->py_map_errors;
	out->nodejs = pf_interp_walker_enabled(s->v8);
	pf_v8_unwind_stats(s->v8, &out->v8);
	out->v8_map_errors = s->v8_map_errors;
	out->jvm_map_errors = s->jvm_map_errors;
	out->java = pf_interp_walker_enabled(s->hs);
	pf_hs_unwind_stats(s->hs, &out->jvm);
	if (s->unw)
		pf_unwinder_stats(s->unw, &out->unwind);
	return 0;
}

size_t pf_sampler_python_status(const struct pf_sampler_stats *st, char *out, size_t cap)
{
	if (!cap)
		return 0;
	out[0] = 0;
	size_t n = 0;
#define PUT(...)                                                                                   \
	do {                                                                                       \
		int k_ = snprintf(out + n, cap - n, __VA_ARGS__);                                  \
		n = k_ < 0 ? n : (size_t)k_ >= cap - n ? cap - 1 : n + (size_t)k_;                 \
	} while (0)
	if (!st->python) {
		PUT("python: off");
		return n;
	}
	if (!st->py.processes && !st->py.unsupported && !st->py_frames)
		return 0;
	PUT("python: %" PRIu64 " processes", st->py.processes);
	const char *sep = " (";
	for (unsigned i = 0; i < PF_PY_UNWIND_MINORS; i++) {
		if (!st->py.by_minor[i])
			continue;
		PUT("%s3.%u: %" PRIu64, sep, 9 + i, st->py.by_minor[i]);
		sep = ", ";
	}
	if (*sep == ',')
		PUT(")");
	PUT(", frames read %" PRIu64 ", read failures %" PRIu64 ", names %" PRIu64
	    ", not named %" PRIu64,
	    st->py_frames, st->py_read_errors, st->py.named, st->py.name_failed);
	for (unsigned i = 0; i < st->py.n_unsupported_msg && i < PF_PY_UNWIND_UNSUPPORTED_KEPT; i++)
		PUT("; %s", st->py.unsupported_msg[i]);
#undef PUT
	return n;
}

/* n advanced by what snprintf returned (k), clamped to the cap - 1 bytes written. */
static size_t advanced(size_t n, int k, size_t cap)
{
	return k < 0 ? n : (size_t)k >= cap - n ? cap - 1 : n + (size_t)k;
}

/* A walker's status line: "<name>: off", "" when it saw nothing, else head; then "; <reason>"
 * for each of its count kept unsupported processes (msgs: rows of stride bytes). */
static size_t walker_status(char *out, size_t cap, const char *name, bool on, bool seen,
			    const char *head, const char *msgs, size_t stride, unsigned count)
{
	if (!cap)
		return 0;
	size_t n;
	if (!on)
		n = advanced(0, snprintf(out, cap, "%s: off", name), cap);
	else
		n = advanced(0, snprintf(out, cap, "%s", seen ? head : ""), cap);
	for (unsigned i = 0; i < count; i++)
		n = advanced(n, snprintf(out + n, cap - n, "; %s", msgs + i * stride), cap);
	return n;
}

size_t pf_sampler_nodejs_status(const struct pf_sampler_stats *st, char *out, size_t cap)
{
	char head[256];
	snprintf(head, sizeof(head),
		 "nodejs: %" PRIu64 " processes%s%s%s, JS frames %" PRIu64
		 ", read failures %" PRIu64 ", names %" PRIu64 ", not named %" PRIu64,
		 st->v8.processes, st->v8.version[0] ? " (V8 " : "", st->v8.version,
		 st->v8.version[0] ? ")" : "", st->v8_frames, st->v8_read_errors, st->v8.named,
		 st->v8.name_failed);
	unsigned count = pf_min(st->v8.n_unsupported_msg, PF_V8_UNWIND_UNSUPPORTED_KEPT);
	return walker_status(out, cap, "nodejs", st->nodejs,
			     st->v8.processes || st->v8.unsupported || st->v8_frames, head,
			     st->v8.unsupported_msg[0], sizeof(st->v8.unsupported_msg[0]), count);
}

size_t pf_sampler_java_status(const struct pf_sampler_stats *st, char *out, size_t cap)
{
	char head[320];
	snprintf(head, sizeof(head),
		 "java: %" PRIu64 " JVMs (%" PRIu64 " walked in the kernel), Java frames %" PRIu64
		 ", lookups failed %" PRIu64 ", kernel frames %" PRIu64 ", read failures %" PRIu64
		 ", names %" PRIu64 ", not named %" PRIu64,
		 st->jvm.processes, st->jvm.walked, st->jvm.frames + st->jvm.interp_frames,
		 st->jvm.lookup_failed, st->jvm_frames, st->jvm_read_errors, st->jvm.named,
		 st->jvm.name_failed);
	unsigned count = pf_min(st->jvm.n_unsupported_msg, PF_INTERP_UNSUPPORTED_KEPT);
	return walker_status(out, cap, "java", st->java,
			     st->jvm.processes || st->jvm.unsupported || st->jvm.frames, head,
			     st->jvm.unsupported_msg[0], sizeof(st->jvm.unsupported_msg[0]), count);
}

size_t pf_sampler_unwinders_status(const struct pf_sampler_stats *st, char *out, size_t cap)
{
	if (!cap)
		return 0;
	char py[24] = "off", js[24] = "off", jvm[24] = "off";
	if (st->python)
		snprintf(py, sizeof(py), "%" PRIu64, st->py.processes);
	if (st->nodejs)
		snprintf(js, sizeof(js), "%" PRIu64, st->v8.processes);
	if (st->java)
		snprintf(jvm, sizeof(jvm), "%" PRIu64, st->jvm.processes);
	int k = snprintf(out, cap, "native: %s, python: %s, nodejs: %s, java: %s",
			 st->dwarf_unwind ? "unwind tables" : "frame pointers", py, js, jvm);
	return k < 0 ? 0 : (size_t)k >= cap ? cap - 1 : (size_t)k;
}
