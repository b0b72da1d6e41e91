/* metrics.c — see metrics.h. Exposition format: Prometheus "text format" version 0.0.4
 * (HELP/TYPE comment lines, one family's samples together, label values escaped with \\, \"
 * and \n, histograms as cumulative _bucket{le} plus _sum and _count). */
#include "endpoints/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libwebsockets.h>

#include "description.h"
#include "endpoints/http_server.h"
#include "health.h"
#include "pf/heap.h"
#include "pf/log.h"
#include "relabel/relabel.h"

#define PREFIX "profleet_agent_"
#define LABELS_LEN 256

/* ---- rendering ----------------------------------------------------------------------------- */

size_t agent_metrics_escape_label(char *out, size_t cap, const char *value)
{
	size_t n = 0;
	if (!cap)
		return 0;
	for (const char *p = value ? value : ""; *p; p++) {
		const char *rep = NULL;
		char one[2] = {*p, '\0'};
		if (*p == '\\')
			rep = "\\\\";
		else if (*p == '"')
			rep = "\\\"";
		else if (*p == '\n')
			rep = "\\n";
		else
			rep = one;
		size_t l = strlen(rep);
		if (n + l >= cap)
			break;
		memcpy(out + n, rep, l);
		n += l;
	}
	out[n] = '\0';
	return n;
}

/* A writer with a sticky error: the first failing append is kept, the rest are skipped. */
struct w {
	struct pf_buf *b;
	int err;
};

static void put(struct w *w, const char *fmt, ...) PF_PRINTF(2, 3);
static void put(struct w *w, const char *fmt, ...)
{
	va_list ap;
	if (w->err)
		return;
	va_start(ap, fmt);
	int rc = pf_buf_vprintf(w->b, fmt, ap);
	va_end(ap);
	if (rc < 0)
		w->err = rc;
}

static void family(struct w *w, const char *name, const char *type, const char *help)
{
	put(w, "# HELP " PREFIX "%s %s\n# TYPE " PREFIX "%s %s\n", name, help, name, type);
}

/* labels: "" or `a="x",b="y"` (already escaped) */
static void sample_u64(struct w *w, const char *name, const char *labels, uint64_t v)
{
	if (labels && *labels)
		put(w, PREFIX "%s{%s} %" PRIu64 "\n", name, labels, v);
	else
		put(w, PREFIX "%s %" PRIu64 "\n", name, v);
}

static void sample_f64(struct w *w, const char *name, const char *labels, double v)
{
	if (labels && *labels)
		put(w, PREFIX "%s{%s} %.15g\n", name, labels, v);
	else
		put(w, PREFIX "%s %.15g\n", name, v);
}

static void gauge_u64(struct w *w, const char *name, const char *help, uint64_t v)
{
	family(w, name, "gauge", help);
	sample_u64(w, name, "", v);
}

static void gauge_f64(struct w *w, const char *name, const char *help, double v)
{
	family(w, name, "gauge", help);
	sample_f64(w, name, "", v);
}

static void counter_u64(struct w *w, const char *name, const char *help, uint64_t v)
{
	family(w, name, "counter", help);
	sample_u64(w, name, "", v);
}

/* A counter family of series told apart by one label: label="key" v, one per entry. */
struct series {
	const char *key;
	uint64_t v;
};

static void counter_by(struct w *w, const char *name, const char *help, const char *label,
		       const struct series *s, size_t n)
{
	char lab[LABELS_LEN];
	family(w, name, "counter", help);
	for (size_t i = 0; i < n; i++) {
		snprintf(lab, sizeof(lab), "%s=\"%s\"", label, s[i].key);
		sample_u64(w, name, lab, s[i].v);
	}
}

#define COUNTER_BY(w, name, help, label, ...)                                                    \
	counter_by(w, name, help, label, (const struct series[]){__VA_ARGS__},                     \
		   sizeof((const struct series[]){__VA_ARGS__}) / sizeof(struct series))

/* The same with two series: label="k1" v1, label="k2" v2. */
static void counter_pair(struct w *w, const char *name, const char *help, const char *label,
			 const char *k1, uint64_t v1, const char *k2, uint64_t v2)
{
	COUNTER_BY(w, name, help, label, {k1, v1}, {k2, v2});
}

static void render_process(struct w *w, const struct agent_metrics_input *in)
{
	char ver[128], lab[LABELS_LEN];
	agent_metrics_escape_label(ver, sizeof(ver), in->version ? in->version : "unknown");
	snprintf(lab, sizeof(lab), "version=\"%s\"", ver);
	family(w, "info", "gauge", "The agent's version (always 1).");
	sample_u64(w, "info", lab, 1);
	if (in->health && in->health->start_time_unix_nano) {
		family(w, "start_time_seconds", "gauge", "When the agent started (Unix time).");
		sample_f64(w, "start_time_seconds", "",
			   (double)in->health->start_time_unix_nano / 1e9);
	}
	if (in->proc) {
		family(w, "cpu_seconds_total", "counter",
		       "CPU time of the agent process, user plus system, all threads.");
		sample_f64(w, "cpu_seconds_total", "", in->proc->cpu_seconds);
		if (in->proc->rss_bytes)
			gauge_u64(w, "resident_memory_bytes",
				  "Resident memory of the agent process.", in->proc->rss_bytes);
	}
	if (in->dp && in->dp->overhead_pct >= 0) {
		gauge_f64(w, "overhead_cpu_percent",
			  "Agent process CPU plus BPF program run time over the overhead guard's "
			  "window (10 s), in percent of one CPU.",
			  in->dp->overhead_pct);
	}
}

static void render_windows(struct w *w, const struct agent_dataplane_metrics *m)
{
	const struct agent_dataplane_counters *c = &m->counters;
	counter_pair(w, "profiles_collected_total",
		     "Profiles (windows) encoded and handed to the exporters, by source: ebpf sampler "
		     "windows, pprof target scrapes.",
		     "source", "ebpf", c->windows, "pprof", c->pprof_windows);
	counter_u64(w, "profile_bytes_total", "OTLP bytes encoded, all profiles.",
		    c->profile_bytes);
	gauge_u64(w, "profile_last_size_bytes", "OTLP size of the last encoded profile.",
		  c->last_profile_bytes);
	counter_u64(w, "encode_errors_total", "Profiles that could not be encoded.",
		    c->encode_errors);
	counter_u64(w, "exports_submitted_total",
		    "Profiles accepted into an exporter's queue (one per exporter).", c->exports);
	counter_u64(w, "profiles_dropped_total",
		    "Profiles an exporter refused at submit (not started, larger than its queue, "
		    "out of memory); drops from a full queue are in "
		    "profleet_agent_exporter_dropped_total.",
		    c->dropped);
}

/* What profiling.redact_secrets and profiling.relabel did (relabel.h). */
static void render_relabel(struct w *w)
{
	struct agent_relabel_stats st;
	agent_relabel_stats(&st);
	counter_u64(w, "relabel_redacted_total",
		    "Attribute and sample label values whose secret-looking parts were replaced "
		    "with [REDACTED] (profiling.redact_secrets).",
		    st.redacted);
	counter_u64(w, "relabel_replaced_total",
		    "Attributes written by profiling.relabel replace rules.", st.replaced);
	counter_u64(w, "relabel_attributes_dropped_total",
		    "Attributes removed by labeldrop rules or an empty replacement.",
		    st.attrs_dropped);
	counter_u64(w, "relabel_profiles_dropped_total",
		    "Processes' profiles left out by drop and keep rules.", st.profiles_dropped);
}

/* ---- families read from a stats struct by a table ---- */

/* How a field is read and shown: U_COUNT uint64_t, U_U32 uint32_t, U_BOOL bool, U_INT int
 * (negative shown as 0), U_KIB uint64_t KiB shown in bytes, U_MS/U_NS uint64_t shown in
 * seconds; U_PAIR two uint64_t series told apart by label (k1 at off, k2 at off2);
 * U_PY_MINORS the PF_PY_UNWIND_MINORS uint64_t series version="3.9".. at off;
 * U_BOOL_RUNNING an exporter's running flag (not in its status struct). */
enum unit { U_COUNT, U_U32, U_BOOL, U_INT, U_KIB, U_MS, U_NS, U_PAIR, U_PY_MINORS, U_BOOL_RUNNING };

struct field_family {
	const char *name;
	const char *type;
	enum unit unit;
	size_t off; /* in the struct the table describes */
	const char *help;
	const char *label, *k1, *k2; /* U_PAIR */
	size_t off2;                 /* U_PAIR */
};

/* A row of one series, and a U_PAIR row (a counter: label="k1" at off, label="k2" at off2). */
#define FIELD(name, type, unit, off, help) {name, type, unit, off, help, NULL, NULL, NULL, 0}
#define PAIR(name, label, k1, off, k2, off2, help)                                                 \
	{name, "counter", U_PAIR, off, help, label, k1, k2, off2}

static uint64_t field_u64(const char *base, size_t off)
{
	uint64_t u;
	memcpy(&u, base + off, sizeof(u));
	return u;
}

/* The samples of f read from base (labels: "" or already escaped, as sample_u64). */
static void sample_field(struct w *w, const struct field_family *f, const char *base,
			 const char *labels)
{
	char lab[LABELS_LEN];
	uint32_t u32;
	bool b;
	int iv;
	switch (f->unit) {
	case U_COUNT:
		sample_u64(w, f->name, labels, field_u64(base, f->off));
		break;
	case U_U32:
		memcpy(&u32, base + f->off, sizeof(u32));
		sample_u64(w, f->name, labels, u32);
		break;
	case U_BOOL:
		memcpy(&b, base + f->off, sizeof(b));
		sample_u64(w, f->name, labels, b);
		break;
	case U_INT:
		memcpy(&iv, base + f->off, sizeof(iv));
		sample_u64(w, f->name, labels, iv > 0 ? (uint64_t)iv : 0);
		break;
	case U_KIB:
		sample_u64(w, f->name, labels, field_u64(base, f->off) * 1024);
		break;
	case U_MS:
		sample_f64(w, f->name, labels, (double)field_u64(base, f->off) / 1e3);
		break;
	case U_NS:
		sample_f64(w, f->name, labels, (double)field_u64(base, f->off) / 1e9);
		break;
	case U_PAIR:
		snprintf(lab, sizeof(lab), "%s=\"%s\"", f->label, f->k1);
		sample_u64(w, f->name, lab, field_u64(base, f->off));
		snprintf(lab, sizeof(lab), "%s=\"%s\"", f->label, f->k2);
		sample_u64(w, f->name, lab, field_u64(base, f->off2));
		break;
	case U_PY_MINORS:
		for (unsigned i = 0; i < PF_PY_UNWIND_MINORS; i++) {
			snprintf(lab, sizeof(lab), "version=\"3.%u\"", 9 + i);
			sample_u64(w, f->name, lab, field_u64(base, f->off + i * sizeof(uint64_t)));
		}
		break;
	case U_BOOL_RUNNING:
		break;
	}
}

/* Each family of the table with its one unlabelled sample (or U_PAIR/U_PY_MINORS series). */
static void render_fields(struct w *w, const struct field_family *t, size_t n, const void *base)
{
	for (size_t i = 0; i < n; i++) {
		family(w, t[i].name, t[i].type, t[i].help);
		sample_field(w, &t[i], base, "");
	}
}

/* ---- sampler, symbolizer, interpreters ---- */

#define SS(f) offsetof(struct pf_sampler_stats, f)
/* The sampler's families up to the per-program BPF run times. */
static const struct field_family sampler_families[] = {
    FIELD("sampler_frequency_hertz", "gauge", U_U32, SS(frequency_hz),
     "Sampling frequency per CPU."),
    FIELD("sampler_cpus", "gauge", U_U32, SS(n_cpus),
     "CPUs with a perf event open."),
    FIELD("sampler_samples_total", "counter", U_COUNT, SS(samples),
     "Samples recorded by the BPF program."),
    PAIR("sampler_lost_samples_total", "reason",
     "ring_buffer", SS(lost_kernel), "window_full", SS(lost_user),
     "Samples lost: ring_buffer (the kernel found the ring buffer full), window_full "
     "(the open window's sample store was full)."),
    FIELD("sampler_lost_events_total", "counter", U_COUNT, SS(lost_events),
     "Process events (exec, fork, exit) lost in the kernel."),
    FIELD("sampler_filtered_samples_total", "counter", U_COUNT, SS(filtered),
     "Ticks of processes the filters exclude, skipped in the kernel."),
    FIELD("sampler_stack_errors_total", "counter", U_COUNT, SS(stack_errors),
     "Ticks where no stack could be walked."),
    FIELD("sampler_off_cpu", "gauge", U_BOOL, SS(off_cpu),
     "1 while off-CPU profiling's switch program is attached."),
    FIELD("sampler_off_cpu_samples_total", "counter", U_COUNT, SS(off_cpu_samples),
     "Off-CPU records written: threads back on the CPU after min_block_us or more."),
    FIELD("sampler_off_cpu_switches_total", "counter", U_COUNT, SS(off_cpu_switches),
     "Switch-outs of profiled threads followed."),
    FIELD("sampler_off_cpu_kernel_only_total", "counter", U_COUNT, SS(off_cpu_kernel_only),
     "Off-CPU records written with the kernel stack alone: the thread left again "
     "before its system call returned, or another record went through the CPU's "
     "state while the return's walk ran."),
    FIELD("sampler_off_cpu_short_total", "counter", U_COUNT, SS(off_cpu_short),
     "Followed switch-outs whose thread came back sooner than min_block_us."),
    FIELD("sampler_off_cpu_filtered_total", "counter", U_COUNT, SS(off_cpu_filtered),
     "Switch-outs of processes the filters exclude, skipped in the kernel."),
    PAIR("sampler_off_cpu_lost_total", "reason",
     "threads_full", SS(off_cpu_full), "window_full", SS(off_cpu_lost_user),
     "Off-CPU records lost: threads_full (too many threads away at once), window_full "
     "(the open window's off-CPU store was full)."),
    FIELD("sampler_processes", "gauge", U_COUNT, SS(processes),
     "Processes known to the sampler."),
    FIELD("sampler_unwind_tables", "gauge", U_BOOL, SS(dwarf_unwind),
     "1 while user stacks are walked with .eh_frame unwind tables in the kernel (0: "
     "frame pointers only)."),
    FIELD("sampler_unwind_table_walks_total", "counter", U_COUNT, SS(dwarf_samples),
     "Samples whose user stack the kernel walked with the unwind tables."),
    FIELD("sampler_unwind_tables_loaded", "gauge", U_COUNT, SS(unwind.tables),
     "Unwind tables loaded in the kernel."),
    FIELD("sampler_unwind_rows", "gauge", U_COUNT, SS(unwind.rows),
     "Unwind rows (8 bytes each) in the kernel's array."),
    FIELD("sampler_unwind_rows_capacity", "gauge", U_COUNT, SS(unwind.rows_cap),
     "Unwind rows the tables may use: an eighth of limits.max_memory_mb, at most the "
     "kernel's array."),
    FIELD("sampler_unwind_tables_pending", "gauge", U_COUNT, SS(unwind.pending),
     "Unwind tables the builder process is making (frame pointers meanwhile)."),
    FIELD("sampler_unwind_builder_cpu_seconds_total", "counter", U_NS, SS(unwind.build_ns),
     "CPU time of the unwind table builder's child processes."),
    FIELD("sampler_unwind_tables_built_total", "counter", U_COUNT, SS(unwind.built),
     "Unwind tables built from .eh_frame/.debug_frame (cache misses)."),
    FIELD("sampler_unwind_table_cache_hits_total", "counter", U_COUNT, SS(unwind.cache_hits),
     "Unwind tables read from the state directory's cache."),
    FIELD("sampler_unwind_tables_evicted_total", "counter", U_COUNT, SS(unwind.evicted),
     "Unwind tables evicted from the kernel to make room (least recently used)."),
    FIELD("sampler_pending_samples", "gauge", U_COUNT, SS(pending),
     "Samples in the open window."),
    FIELD("bpf_stats_enabled", "gauge", U_BOOL, SS(bpf_stats_enabled),
     "1 while the kernel counts BPF run time (bpf_run_time_seconds_total moves only "
     "then)."),
};

/* After the BPF run times: the symbolizer's and the interpreter walkers' families. */
static const struct field_family symbolizer_families[] = {
    PAIR("symbolizer_frames_total", "result",
     "resolved", SS(sym.frames_resolved), "unresolved", SS(sym.frames_unresolved),
     "Stack frames symbolized: resolved to a function, or left as an address."),
    FIELD("symbolizer_elf_files_cached", "gauge", U_COUNT, SS(sym.elf_cached),
     "ELF files in the symbolizer's cache."),
    FIELD("symbolizer_line_tables", "gauge", U_COUNT, SS(sym.line_tables),
     "Source-line tables open (one per ELF file with DWARF in the cache)."),
    FIELD("symbolizer_line_tables_bytes", "gauge", U_COUNT, SS(sym.line_tables_bytes),
     "Memory the open source-line tables hold (their block indexes)."),
    FIELD("symbolizer_line_table_builds_total", "counter", U_COUNT, SS(sym.line_builds),
     "Source-line tables built from DWARF by the builder child."),
    FIELD("symbolizer_line_table_build_failures_total", "counter", U_COUNT,
     SS(sym.line_build_failed),
     "Files whose source-line table could not be built (no line program, over "
     "the row bound, a child killed or lost): function names only."),
    FIELD("symbolizer_line_table_disk_hits_total", "counter", U_COUNT, SS(sym.line_cache_hits),
     "Source-line tables read from the state directory, built by an earlier run."),
    FIELD("symbolizer_line_table_build_cpu_seconds_total", "counter", U_NS,
     SS(sym.line_build_cpu_ns),
     "CPU time of the builder children that decode DWARF into source-line tables."),
    FIELD("symbolizer_line_table_build_peak_bytes", "gauge", U_KIB, SS(sym.line_build_max_rss_kb),
     "The largest peak RSS of a builder child (libdw decoding a file's DWARF runs "
     "there, not in the agent)."),
    FIELD("symbolizer_line_deferred_total", "counter", U_COUNT, SS(sym.line_deferred),
     "New addresses named from the symbol table only while their file's source-line "
     "table was being built; a later window resolves them in full."),
    FIELD("symbolizer_jit_maps", "gauge", U_COUNT, SS(sym.jit_maps),
     "Processes whose JIT symbol map (/tmp/perf-<pid>.map) is loaded."),
    FIELD("symbolizer_jit_map_bytes", "gauge", U_COUNT, SS(sym.jit_bytes),
     "Memory the loaded JIT symbol maps hold (at most 16 MiB together)."),
    FIELD("symbolizer_jit_frames_total", "counter", U_COUNT, SS(sym.jit_frames),
     "Frames in anonymous code named from their process's JIT symbol map."),
    FIELD("symbolizer_go_files", "gauge", U_COUNT, SS(sym.go_files),
     "Cached Go binaries without a symbol table (-ldflags=\"-s -w\"), named from the "
     "Go runtime's own function table (.gopclntab)."),
    FIELD("symbolizer_names_cleaned_total", "counter", U_COUNT, SS(sym.names_cleaned),
     "Function or file names read from a binary that were not valid UTF-8 (or held "
     "control characters): the bad bytes became '?' before they went into a profile."),
    FIELD("symbolizer_jit_maps_refused_total", "counter", U_COUNT, SS(sym.jit_maps_refused),
     "JIT symbol maps not loaded: over 8 MiB or 131,072 lines, or past the 16 MiB "
     "all maps may hold."),
    FIELD("python_processes", "gauge", U_PY_MINORS, SS(py.by_minor),
     "CPython processes whose Python frames the kernel walks, by minor version."),
    FIELD("python_processes_unsupported", "gauge", U_COUNT, SS(py.unsupported),
     "CPython processes left with their native stacks (a version or layout the walk "
     "does not read; the agent's health says which)."),
    FIELD("python_frames_read_total", "counter", U_COUNT, SS(py_frames),
     "Python frames the kernel read from sampled threads' frame chains."),
    FIELD("python_frame_read_failures_total", "counter", U_COUNT, SS(py_read_errors),
     "Python frames the kernel could not read (the chain ends there; native frames "
     "stay)."),
    FIELD("python_samples_total", "counter", U_COUNT, SS(py_samples),
     "Samples given Python frames."),
    FIELD("python_names_total", "counter", U_COUNT, SS(py.named),
     "Python frames (code object, instruction) named from the process's memory."),
    FIELD("python_name_failures_total", "counter", U_COUNT, SS(py.name_failed),
     "Python frames that could not be named (the process was gone, or the address "
     "held no code object): they stay without a name."),
    FIELD("python_names_bytes", "gauge", U_COUNT, SS(py.names_bytes),
     "Memory the Python name caches hold (code objects and their names)."),
    FIELD("nodejs_processes", "gauge", U_COUNT, SS(v8.processes),
     "node processes whose JS frames the kernel walks."),
    FIELD("nodejs_processes_unsupported", "gauge", U_COUNT, SS(v8.unsupported),
     "node processes left with their native stacks (V8 constants missing or a layout "
     "the walk does not read; the agent's health says which)."),
    FIELD("nodejs_frames_total", "counter", U_COUNT, SS(v8_frames),
     "JS frames the kernel wrote (a SharedFunctionInfo in place of V8 code)."),
    FIELD("nodejs_frame_read_failures_total", "counter", U_COUNT, SS(v8_read_errors),
     "V8 frames the kernel could not read (the walk ends there)."),
    FIELD("nodejs_names_total", "counter", U_COUNT, SS(v8.named),
     "JS frames named from the process's V8 heap."),
    FIELD("nodejs_name_failures_total", "counter", U_COUNT, SS(v8.name_failed),
     "JS frames that could not be named (the process was gone, or the address held "
     "no SharedFunctionInfo any more): they stay without a name."),
    FIELD("nodejs_names_bytes", "gauge", U_COUNT, SS(v8.names_bytes),
     "Memory the JS name caches hold."),
    FIELD("java_processes", "gauge", U_COUNT, SS(jvm.processes),
     "JVMs whose code-cache addresses are named from their VMStructs tables."),
    FIELD("java_processes_unsupported", "gauge", U_COUNT, SS(jvm.unsupported),
     "JVMs left with their native frames (libjvm.so without the tables, or a layout the "
     "agent does not read; the agent's health says which)."),
    FIELD("java_frames_total", "counter", U_COUNT, SS(jvm.frames),
     "Code-cache addresses turned into Java frames (a method or a code blob)."),
    FIELD("java_processes_walked", "gauge", U_COUNT, SS(jvm.walked),
     "JVMs whose frames the kernel walks (the others are named where the native walk "
     "stops; the agent's health says why)."),
    FIELD("java_kernel_frames_total", "counter", U_COUNT, SS(jvm_frames),
     "Code-cache frames the kernel stepped by the JVM's frame layout."),
    FIELD("java_frame_read_failures_total", "counter", U_COUNT, SS(jvm_read_errors),
     "Code-cache frames the kernel could not step (the walk ends there)."),
    FIELD("java_lookup_failures_total", "counter", U_COUNT, SS(jvm.lookup_failed),
     "Code-cache addresses of no code blob (freed code): they stay [anon] frames."),
    FIELD("java_names_total", "counter", U_COUNT, SS(jvm.named),
     "Java frames named from the JVM's metadata."),
    FIELD("java_name_failures_total", "counter", U_COUNT, SS(jvm.name_failed),
     "Java frames that could not be named (the process was gone, or the method or blob "
     "was freed): they stay without a name."),
    FIELD("java_names_bytes", "gauge", U_COUNT, SS(jvm.names_bytes),
     "Memory the Java name and address caches hold."),
    FIELD("windows_held_total", "counter", U_COUNT, SS(windows_held),
     "Windows whose close waited (at most 1 s) for a source-line table a child was "
     "building; they still end at their time."),
    FIELD("windows_held_seconds_total", "counter", U_NS, SS(windows_held_ns),
     "Time the closes of those windows waited."),
    FIELD("symbolizer_kernel_resolver", "gauge", U_BOOL, SS(sym.kernel_resolver),
     "1 while kernel frames are named by the in-kernel resolver (BPF), 0 when "
     "/proc/kallsyms is read instead."),
    FIELD("symbolizer_kernel_addresses_resolved_total", "counter", U_COUNT, SS(sym.kernel_resolved),
     "Distinct kernel addresses named by the in-kernel resolver (cache misses)."),
    FIELD("symbolizer_kallsyms_load_seconds", "gauge", U_NS, SS(sym.kernel_load_cpu_ns),
     "CPU time the one-time /proc/kallsyms load took; 0 while the in-kernel resolver is "
     "used."),
};
#undef SS

static void render_sampler(struct w *w, const struct agent_dataplane_metrics *m)
{
	const struct pf_sampler_stats *s = &m->sampler;
	char lab[LABELS_LEN], name[AGENT_DATAPLANE_NAME_LEN * 2];

	gauge_u64(w, "sampler_running", "1 while the eBPF sampler's perf events are attached.",
		  m->has_sampler && s->running);
	if (!m->has_sampler)
		return;
	render_fields(w, sampler_families, PF_ARRAY_SIZE(sampler_families), s);
	family(w, "bpf_run_time_seconds_total", "counter",
	       "Run time of each of the agent's BPF programs.");
	for (int i = 0; i < PF_SAMPLER_N_PROGS; i++) {
		agent_metrics_escape_label(name, sizeof(name), m->progs[i].name);
		snprintf(lab, sizeof(lab), "prog=\"%s\"", name);
		sample_f64(w, "bpf_run_time_seconds_total", lab,
			   (double)m->progs[i].run_time_ns / 1e9);
	}
	family(w, "bpf_run_count_total", "counter", "Runs of each of the agent's BPF programs.");
	for (int i = 0; i < PF_SAMPLER_N_PROGS; i++) {
		agent_metrics_escape_label(name, sizeof(name), m->progs[i].name);
		snprintf(lab, sizeof(lab), "prog=\"%s\"", name);
		sample_u64(w, "bpf_run_count_total", lab, m->progs[i].run_cnt);
	}
	render_fields(w, symbolizer_families, PF_ARRAY_SIZE(symbolizer_families), s);
}

/* ---- exporters ---- */

#define ST(f) offsetof(struct agent_exporter_status, f)
static const struct field_family ex_families[] = {
    FIELD("exporter_up", "gauge", U_BOOL_RUNNING, 0,
     "1 when the exporter could be created, 0 when it could not (its health says why)."),
    FIELD("exporter_submitted_total", "counter", U_COUNT, ST(submitted),
     "Items queued for delivery (items reloaded from the spill directory included)."),
    FIELD("exporter_sent_total", "counter", U_COUNT, ST(sent),
     "Delivery attempts made (requests, file writes)."),
    FIELD("exporter_confirmed_total", "counter", U_COUNT, ST(confirmed),
     "Items the back end accepted (2xx; partial successes included)."),
    FIELD("exporter_confirmed_bytes_total", "counter", U_COUNT, ST(bytes_ok),
     "Payload bytes of the confirmed items, before compression."),
    FIELD("exporter_failed_total", "counter", U_COUNT, ST(failed),
     "Items refused for good (an answer that is not retried)."),
    FIELD("exporter_retried_total", "counter", U_COUNT, ST(retried),
     "Attempts that failed and will be retried."),
    FIELD("exporter_dropped_total", "counter", U_COUNT, ST(dropped),
     "Items dropped: the oldest evicted from a full queue, or one larger than the queue."),
    FIELD("exporter_dropped_bytes_total", "counter", U_COUNT, ST(dropped_bytes),
     "Bytes of the dropped items."),
    FIELD("exporter_queued_items", "gauge", U_COUNT, ST(queued_items),
     "Items waiting in the delivery queue."),
    FIELD("exporter_queued_bytes", "gauge", U_COUNT, ST(queued_bytes),
     "Bytes waiting in the delivery queue."),
    FIELD("exporter_queue_limit_bytes", "gauge", U_COUNT, ST(queue_limit_bytes),
     "Bound of the delivery queue (limits.queue_bytes)."),
    FIELD("exporter_last_latency_seconds", "gauge", U_MS, ST(last_latency_ms),
     "Duration of the last successful attempt."),
    FIELD("exporter_max_latency_seconds", "gauge", U_MS, ST(max_latency_ms),
     "Duration of the longest successful attempt."),
    FIELD("exporter_retry_wait_seconds", "gauge", U_MS, ST(next_retry_ms),
     "While backing off: time until the next attempt; else 0."),
    FIELD("exporter_last_success_timestamp_seconds", "gauge", U_NS, ST(last_ok_unix_ns),
     "Unix time of the last confirmed attempt; 0 before the first."),
    FIELD("exporter_last_http_status", "gauge", U_INT, ST(last_http_status),
     "HTTP status of the last response; 0 when none (file exporters, transport errors)."),
    FIELD("exporter_partial_successes_total", "counter", U_COUNT, ST(partial_successes),
     "Confirmed OTLP requests whose response carried a partial_success."),
    FIELD("exporter_rejected_profiles_total", "counter", U_COUNT, ST(rejected_profiles),
     "Profiles the back end rejected in partial successes."),
    FIELD("exporter_spilled_total", "counter", U_COUNT, ST(spilled),
     "Items written to the spill directory."),
    FIELD("exporter_spill_loaded_total", "counter", U_COUNT, ST(spill_loaded),
     "Items read back from the spill directory at start."),
    FIELD("exporter_spill_errors_total", "counter", U_COUNT, ST(spill_errors),
     "Spill writes that failed and corrupt spill files found at start."),
};
#undef ST

static void ex_labels(char *out, size_t cap, const struct agent_dataplane_exporter_metrics *e)
{
	char type[64];
	agent_metrics_escape_label(type, sizeof(type), e->type);
	snprintf(out, cap, "exporter=\"%u\",type=\"%s\"", e->index, type);
}

static void render_exporters(struct w *w, const struct agent_dataplane_metrics *m)
{
	char lab[LABELS_LEN], blab[LABELS_LEN + 32];
	if (!m->n_exporters)
		return;
	for (size_t f = 0; f < PF_ARRAY_SIZE(ex_families); f++) {
		const struct field_family *xf = &ex_families[f];
		family(w, xf->name, xf->type, xf->help);
		for (size_t i = 0; i < m->n_exporters; i++) {
			const struct agent_dataplane_exporter_metrics *e = &m->ex[i];
			ex_labels(lab, sizeof(lab), e);
			if (xf->unit == U_BOOL_RUNNING)
				sample_u64(w, xf->name, lab, e->running);
			else
				sample_field(w, xf, (const char *)&e->st, lab);
		}
	}
	const char *h = "exporter_export_duration_seconds";
	family(w, h, "histogram",
	       "Duration of every delivery attempt (request or file write), successful or not.");
	for (size_t i = 0; i < m->n_exporters; i++) {
		const struct agent_exporter_status *st = &m->ex[i].st;
		uint64_t cum = 0;
		ex_labels(lab, sizeof(lab), &m->ex[i]);
		for (size_t b = 0; b < AGENT_EXPORTER_LATENCY_BUCKETS; b++) {
			cum += st->latency_buckets[b];
			snprintf(blab, sizeof(blab), "%s,le=\"%.15g\"", lab,
				 (double)agent_exporter_latency_bounds_us[b] / 1e6);
			put(w, PREFIX "%s_bucket{%s} %" PRIu64 "\n", h, blab, cum);
		}
		put(w, PREFIX "%s_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n", h, lab, st->latency_count);
		put(w, PREFIX "%s_sum{%s} %.15g\n", h, lab, (double)st->latency_sum_us / 1e6);
		put(w, PREFIX "%s_count{%s} %" PRIu64 "\n", h, lab, st->latency_count);
	}
}

static void render_targets(struct w *w, const struct agent_dataplane_metrics *m)
{
	char lab[LABELS_LEN], type[64];
	if (!m->n_targets)
		return;
	family(w, "pprof_scrapes_total", "counter",
	       "Scrapes of each pprof target, by result (ok, failed).");
	for (size_t i = 0; i < m->n_targets; i++) {
		const struct agent_dataplane_target_metrics *t = &m->pt[i];
		agent_metrics_escape_label(type, sizeof(type), t->type);
		snprintf(lab, sizeof(lab), "target=\"%u\",type=\"%s\",result=\"ok\"", t->index,
			 type);
		sample_u64(w, "pprof_scrapes_total", lab, t->scrapes_ok);
		snprintf(lab, sizeof(lab), "target=\"%u\",type=\"%s\",result=\"failed\"", t->index,
			 type);
		sample_u64(w, "pprof_scrapes_total", lab, t->scrapes_failed);
	}
	static const struct {
		const char *name, *help;
	} g[] = {
	    {"pprof_target_active", "1 while the target is scraped (profiling enabled)."},
	    {"pprof_last_scrape_duration_seconds", "Duration of the target's last scrape."},
	    {"pprof_last_profile_bytes", "Size of the last profile scraped from the target."},
	    {"pprof_last_profile_samples", "Samples (sum of counts) of the target's last profile."},
	    {"pprof_last_success_timestamp_seconds",
	     "Unix time of the target's last successful scrape; 0 before the first."},
	};
	for (size_t f = 0; f < PF_ARRAY_SIZE(g); f++) {
		family(w, g[f].name, "gauge", g[f].help);
		for (size_t i = 0; i < m->n_targets; i++) {
			const struct agent_dataplane_target_metrics *t = &m->pt[i];
			agent_metrics_escape_label(type, sizeof(type), t->type);
			snprintf(lab, sizeof(lab), "target=\"%u\",type=\"%s\"", t->index, type);
			switch (f) {
			case 0:
				sample_u64(w, g[f].name, lab, t->active);
				break;
			case 1:
				sample_f64(w, g[f].name, lab, (double)t->last_duration_ms / 1e3);
				break;
			case 2:
				sample_u64(w, g[f].name, lab, t->last_bytes);
				break;
			case 3:
				sample_u64(w, g[f].name, lab, t->last_samples);
				break;
			default:
				sample_f64(w, g[f].name, lab, (double)t->last_ok_unix_ns / 1e9);
				break;
			}
		}
	}
}

/* The overhead guard, the shared profile rate limit and the high_cpu trigger. */
static void render_limits(struct w *w, const struct agent_dataplane_metrics *m)
{
	const struct agent_guard_state *g = &m->guard;
	char lab[LABELS_LEN];
	if (g->configured_hz) {
		gauge_u64(w, "guard_frequency_hz",
			  "Sampling frequency the overhead guard lets the sampler run at.", g->hz);
		gauge_u64(w, "guard_configured_frequency_hz",
			  "Sampling frequency of the config (profiling.sampling.frequency_hz).",
			  g->configured_hz);
		gauge_u64(w, "guard_throttled",
			  "1 while the overhead guard runs the sampler below the configured "
			  "frequency.",
			  g->throttled);
		counter_pair(w, "guard_steps_total",
			     "Frequency steps of the overhead guard, down (over budget) and up "
			     "(restored).",
			     "direction", "down", g->steps_down, "up", g->steps_up);
		gauge_f64(w, "guard_cpu_budget_percent",
			  "limits.max_cpu_percent: the agent's CPU budget, percent of one CPU.",
			  g->max_cpu_percent);
		gauge_u64(w, "guard_memory_budget_bytes",
			  "limits.max_memory_mb, in bytes (0: not enforced, sanitizer builds).",
			  (uint64_t)g->max_memory_mb << 20);
	}
	if (m->rate.limit) {
		gauge_u64(w, "profiles_rate_limit",
			  "limits.max_profiles_per_minute: profiles allowed in any 60 s, all "
			  "sources together.",
			  m->rate.limit);
		gauge_u64(w, "profiles_rate_used", "Profiles allowed during the last 60 s.",
			  m->rate.used);
		family(w, "profiles_rate_limited_total", "counter",
		       "Profiles dropped over limits.max_profiles_per_minute, by source.");
		for (int i = 0; i < AGENT_SRC_N; i++) {
			snprintf(lab, sizeof(lab), "source=\"%s\"", agent_profile_source_name(i));
			sample_u64(w, "profiles_rate_limited_total", lab, m->rate.refused[i]);
		}
	}
	if (m->has_high_cpu) {
		const struct agent_high_cpu_stats *h = &m->high_cpu;
		gauge_u64(w, "high_cpu_watched_processes",
			  "Profiled processes whose CPU the high_cpu trigger reads.", h->tracked);
		gauge_u64(w, "high_cpu_over_threshold_processes",
			  "Watched processes over threshold_percent at the last reading.", h->over);
		gauge_u64(w, "high_cpu_unwatched_processes",
			  "Profiled processes over the trigger's bound (not read one by one).",
			  h->untracked);
		if (h->host_percent >= 0) {
			gauge_f64(w, "high_cpu_host_cpu_percent",
				  "Host CPU use at the last reading, percent of all CPUs.",
				  h->host_percent);
		}
		counter_pair(
		    w, "high_cpu_fired_total",
		    "high_cpu firings by rule: process (a process over the threshold), host "
		    "(the host over it).",
		    "rule", "process", h->fired, "host", h->host_fired);
		counter_pair(w, "high_cpu_held_total",
			     "Evaluations where a rule was met but its quiet time (capture plus "
			     "cooldown_seconds) held the firing back, by rule.",
			     "rule", "process", h->held, "host", h->host_held);
		counter_u64(w, "high_cpu_captures_total",
			    "Captures started by the high_cpu trigger (one per process).",
			    m->counters.high_cpu_captures);
		gauge_f64(w, "high_cpu_evaluation_seconds",
			  "CPU time the last high_cpu evaluation took (reading /proc).",
			  (double)h->last_update_ns / 1e9);
	}
}

static void render_health(struct w *w, const struct pf_health *h)
{
	char lab[LABELS_LEN], name[LABELS_LEN - 16];
	gauge_u64(w, "healthy", "1 while every component of the agent is healthy.", h->healthy);
	if (!h->n_children)
		return;
	family(w, "component_healthy", "gauge",
	       "1 while the component is healthy (the OpAMP ComponentHealth of the agent).");
	for (size_t i = 0; i < h->n_children; i++) {
		agent_metrics_escape_label(name, sizeof(name), h->children[i].name);
		snprintf(lab, sizeof(lab), "component=\"%s\"", name);
		sample_u64(w, "component_healthy", lab, h->children[i].health.healthy);
	}
}

static void render_spans(struct w *w, const struct agent_dataplane_metrics *m)
{
	const struct agent_span_counters *c = &m->span_rx;
	COUNTER_BY(w, "span_requests_total",
		   "OTLP/HTTP trace export requests to the span receiver, by answer code.", "code",
		   {"200", c->requests}, {"400", c->bad_requests}, {"413", c->too_large},
		   {"503", c->busy});
	counter_u64(w, "spans_received_total", "Spans decoded by the span receiver.", c->spans);
	COUNTER_BY(w, "spans_accepted_total",
		   "Spans that started a profile, by trigger (slow_span, error_span).", "trigger",
		   {"slow_span", c->triggered[0]}, {"error_span", c->triggered[1]});
	COUNTER_BY(w, "spans_rejected_total",
		   "Triggering spans answered as rejected (OTLP partial_success), by reason.",
		   "reason", {"unknown_process", c->rejected_unknown}, {"too_old", c->rejected_old},
		   {"rate_limited", c->rejected_rate}, {"queue_full", c->rejected_queue});
	COUNTER_BY(w, "span_profiles_total",
		   "Span profiles exported, by trigger; empty: the span's thread had no samples.",
		   "trigger", {"slow_span", m->span.profiles[0]}, {"error_span", m->span.profiles[1]},
		   {"empty", m->span.empty});
	family(w, "span_profile_latency_seconds", "gauge",
	       "From a span's arrival to its profile being handed to the exporters: the last "
	       "one, and the largest.");
	sample_f64(w, "span_profile_latency_seconds", "stat=\"last\"",
		   (double)m->span.last_latency_ns / 1e9);
	sample_f64(w, "span_profile_latency_seconds", "stat=\"max\"",
		   (double)m->span.max_latency_ns / 1e9);
	gauge_u64(w, "sample_ring_bytes", "Memory held by the span triggers' sample ring.",
		  m->ring_bytes);
	gauge_u64(w, "sample_ring_max_bytes",
		  "The sample ring's bound (a quarter of limits.max_memory_mb).", m->ring_max_bytes);
	gauge_u64(w, "sample_ring_samples", "Samples held in the sample ring.", m->ring_samples);
	counter_u64(w, "sample_ring_evicted_memory_total",
		    "Samples evicted before lookback_seconds to stay within the bound.",
		    m->ring_evicted_memory);
}

int agent_metrics_render(const struct agent_metrics_input *in, struct pf_buf *out)
{
	struct w w = {.b = out};
	render_process(&w, in);
	if (in->dp) {
		render_windows(&w, in->dp);
		render_relabel(&w);
		render_sampler(&w, in->dp);
		render_exporters(&w, in->dp);
		render_targets(&w, in->dp);
		if (in->dp->has_spans)
			render_spans(&w, in->dp);
		render_limits(&w, in->dp);
	}
	if (in->health)
		render_health(&w, in->health);
	return w.err;
}

/* ---- HTTP server --------------------------------------------------------------------------- */

struct agent_metrics {
	struct agent_http_server *srv;
	struct agent_health *health;
	struct agent_dataplane *dp;
};

/* One answer per HTTP transaction. */
struct pss {
	struct agent_http_answer a;
};

static const char *method_of(struct lws *wsi)
{
	static const struct {
		enum lws_token_indexes t;
		const char *name;
	} m[] = {{WSI_TOKEN_GET_URI, "GET"},	 {WSI_TOKEN_POST_URI, "POST"},
		 {WSI_TOKEN_PUT_URI, "PUT"},	 {WSI_TOKEN_DELETE_URI, "DELETE"},
		 {WSI_TOKEN_PATCH_URI, "PATCH"}, {WSI_TOKEN_OPTIONS_URI, "OPTIONS"},
		 {WSI_TOKEN_HEAD_URI, "HEAD"}};
	for (size_t i = 0; i < PF_ARRAY_SIZE(m); i++)
		if (lws_hdr_total_length(wsi, m[i].t))
			return m[i].name;
	return "OTHER";
}

static int render_metrics(struct agent_metrics *m, struct pf_buf *out)
{
	struct agent_self_usage proc;
	struct pf_health tree;
	struct agent_dataplane_metrics *dp = NULL;
	bool have_tree = false;
	int rc;

	memset(&tree, 0, sizeof(tree));
	if (m->dp) {
		dp = malloc(sizeof(*dp));
		if (!dp)
			return -ENOMEM;
		/* a snapshot the worker has not taken yet shows nothing rather than zeros */
		if (agent_dataplane_metrics(m->dp, dp) < 0 || !dp->refreshed_unix_ns) {
			free(dp);
			dp = NULL;
		}
	}
	if (m->health && agent_health_build(m->health, &tree) == 0)
		have_tree = true;
	bool have_proc = agent_self_usage_read(&proc) == 0;
	struct agent_metrics_input in = {.version = agent_version(),
					 .proc = have_proc ? &proc : NULL,
					 .dp = dp,
					 .health = have_tree ? &tree : NULL};
	rc = agent_metrics_render(&in, out);
	if (have_tree)
		agent_health_tree_release(&tree);
	free(dp);
	return rc;
}

static int http_begin(struct agent_metrics *m, struct lws *wsi, struct pss *p, const char *uri)
{
	const char *method = method_of(wsi);
	bool get = !strcmp(method, "GET");
	bool is_metrics = uri && !strcmp(uri, "/metrics");
	bool is_health = uri && !strcmp(uri, "/healthz");
	struct agent_http_answer *a = &p->a;

	if (agent_http_answer_init(a, AGENT_METRICS_MAX_BYTES) < 0)
		return -1;
	/* a request that may carry a body is answered without reading it */
	a->close_after = !get;
	if (!is_metrics && !is_health) {
		agent_http_answer_text(wsi, a, 404, "not found: try /metrics or /healthz\n");
	} else if (!get) {
		a->allow = "GET";
		agent_http_answer_text(wsi, a, 405, "method not allowed: GET only\n");
	} else if (is_health) {
		agent_http_answer_text(wsi, a, 200, "ok\n");
	} else {
		int rc = render_metrics(m, &a->resp);
		if (rc < 0) {
			pf_log_warn("metrics: cannot render /metrics: %s", strerror(-rc));
			agent_http_answer_text(wsi, a, 500, "cannot render the metrics\n");
			return 0;
		}
		a->status = 200;
		a->ctype = AGENT_METRICS_CONTENT_TYPE;
		a->ready = true;
		lws_callback_on_writable(wsi);
	}
	return 0;
}

static void answer_done(void *a)
{
	agent_http_answer_release(a);
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		    size_t len)
{
	struct agent_metrics *m = agent_http_user(wsi);
	struct pss *p = user;

	switch (reason) {
	case LWS_CALLBACK_HTTP:
		return http_begin(m, wsi, p, in) < 0 ? -1 : 0;
	case LWS_CALLBACK_HTTP_BODY:
	case LWS_CALLBACK_HTTP_BODY_COMPLETION:
		return 0; /* ignored: every accepted method is GET */
	case LWS_CALLBACK_HTTP_WRITEABLE:
		return p ? agent_http_answer_writeable(wsi, &p->a, answer_done, &p->a) : -1;
	case LWS_CALLBACK_CLOSED_HTTP:
		if (p)
			agent_http_answer_release(&p->a);
		return 0;
	default:
		break;
	}
	return lws_callback_http_dummy(wsi, reason, user, in, len);
}

static const struct lws_protocols protocols[] = {
    {"profleet-metrics", callback, sizeof(struct pss), 1024, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

struct agent_metrics *agent_metrics_new(const struct agent_listen_addr *l,
					struct agent_health *health, struct pf_error *err)
{
	struct agent_metrics *m = calloc(1, sizeof(*m));
	if (!m) {
		return pf_error_oom(err);
	}
	m->health = health;
	m->srv = agent_http_server_new(l, "metrics", protocols, m, "--metrics-listen", err);
	if (!m->srv) {
		int e = errno;
		free(m);
		errno = e;
		return NULL;
	}
	pf_log_info("metrics: serving /metrics and /healthz on %s",
		    agent_http_server_where(m->srv));
	return m;
}

int agent_metrics_port(const struct agent_metrics *m)
{
	return agent_http_server_port(m->srv);
}

int agent_metrics_start(struct agent_metrics *m, struct agent_dataplane *dataplane,
			struct pf_error *err)
{
	m->dp = dataplane;
	return agent_http_server_start(m->srv, err);
}

void agent_metrics_free(struct agent_metrics *m)
{
	if (!m)
		return;
	agent_http_server_free(m->srv);
	free(m);
}
