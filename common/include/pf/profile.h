/* pf/profile.h — one closed window of aggregated, symbolized samples: the hand-off between
 * the sampling side (sampler_bpf.c → aggregate.c → symbolize.c fill it; sampler_pprof.c fills
 * it from scraped pprof) and the encoding side (proto/codec otlp and pprof encoders read it;
 * exporters ship the bytes). The controller decodes received profiles into the same shape for
 * its store and flame graphs.
 *
 * Plain value type, no library dependencies. All strings and arrays belong to the window's
 * arena and are freed together by pf_prof_window_free(). Indices are 0-based positions in the
 * owning process's arrays (not OTLP dictionary indices: the encoder builds its own
 * deduplicated dictionary).
 *
 * Stacks are leaf first (frames[0] is where the CPU was), kernel frames before user frames
 * as the CPU unwound them. A frame that could not be symbolized keeps its address and
 * mapping and has function == NULL.
 *
 * Sample types. A window with n_sample_types == 0 (the eBPF sampler's) is a CPU profile: one
 * implicit sample type samples/count, period type cpu/nanoseconds, period 1e9 / frequency_hz,
 * and a sample's weight is its count. A window with n_sample_types > 0 (pprof sources) names
 * its sample types (pprof's `sample_type`: alloc_space/bytes, inuse_objects/count, ...), its
 * period type and period; each sample then carries `values`, one int64 per sample type in
 * that order (NULL values means {count, 0, 0, ...}), and `count` is kept as a summary for code
 * that only wants one number (the first value clamped at 0). frequency_hz is then optional (0
 * unless the period type is in nanoseconds). Timestamps are only meaningful without explicit
 * sample types, or with one explicit type whose samples all carry event_values: then each
 * timestamp has its own value (an off-CPU wait's nanoseconds), values[0] is their sum and
 * count the number of timestamps; the OTLP encoder writes such samples with values and
 * timestamps side by side. Labels (pprof labels, OTLP sample attributes) are key → string or number.
 *
 * A process may carry the bytes it was converted from (original_payload, e.g. the scraped
 * pprof with format "pprof"); encoders put them into OTLP's Profile.original_payload. */
#ifndef PF_PROFILE_H
#define PF_PROFILE_H

#include <stddef.h>
#include <stdint.h>

/* What ran at a frame; OTLP's profile.frame.type: "native", "kernel", "cpython" (a Python
 * function: address is the agent's word for it, not a code address), "go", "v8js" (a JavaScript function run by V8: address is the agent's word for it), "jvm" (a
 * Java method or JVM code blob of HotSpot's code cache: address is the agent's word for it). */
enum pf_frame_kind {
	PF_FRAME_NATIVE = 0,
	PF_FRAME_KERNEL = 1,
	PF_FRAME_PYTHON = 2,
	PF_FRAME_GO = 3,
	PF_FRAME_V8JS = 4,
	PF_FRAME_JVM = 5
};

struct pf_prof_attr {
	const char *key;
	const char *value;
};

struct pf_prof_mapping {
	uint64_t start;   /* memory_start */
	uint64_t limit;   /* memory_limit (exclusive) */
	uint64_t offset;  /* file_offset */
	const char *path; /* "/usr/bin/x", "[kernel.kallsyms]", "[vdso]" */
	const char *build_id; /* GNU build id, lowercase hex, NULL when unknown */
};

/* A function the compiler inlined at a frame's address (DWARF inlined subroutine). */
struct pf_prof_inline {
	const char *function;    /* readable name, NULL when unknown */
	const char *system_name; /* as the binary names it (mangled), NULL when unknown */
	const char *file;        /* source file, NULL when unknown */
	uint32_t line;           /* 0 when unknown */
};

struct pf_prof_frame {
	uint64_t address;     /* absolute (user: virtual address in the process) */
	int32_t mapping;      /* index into mappings, -1 when none */
	uint8_t kind;         /* enum pf_frame_kind */
	const char *function; /* readable symbol name (C++/Rust demangled), NULL when unknown */
	const char *file;     /* source file from DWARF, NULL when unknown */
	uint32_t line;        /* 0 when unknown */
	const char *system_name; /* the symbol as the binary names it (C++/Rust mangled); NULL
				  * means the same as function */
	/* Functions inlined at address, innermost first: inlined[0] is where the CPU was, each
	 * one was inlined into the next and the last into function. With inlined functions,
	 * file/line of the frame are the call site in function of inlined[n_inlined - 1]. As
	 * frames of a stack they come before the frame itself (leaf first). */
	uint32_t n_inlined;
	const struct pf_prof_inline *inlined;
};

struct pf_prof_stack {
	uint32_t n_frames;
	const uint32_t *frames; /* indices into frames, leaf first */
};

/* A sample label: str != NULL for a string label, else the number num (unit may be NULL). */
struct pf_prof_label {
	const char *key;
	const char *str;
	int64_t num;
	const char *unit;
};

/* pprof ValueType / OTLP ValueType: a sample type or the period type. */
struct pf_prof_value_type {
	const char *type; /* "cpu", "alloc_space", ... */
	const char *unit; /* "nanoseconds", "bytes", "count", ... */
};

struct pf_prof_sample {
	uint32_t stack;          /* index into stacks */
	uint32_t tid;
	const char *thread_name; /* comm of the thread, may be NULL */
	uint64_t count;          /* number of samples */
	uint32_t n_timestamps;   /* 0, or == count: per-sample wall-clock times (unix ns) */
	const uint64_t *timestamps;
	/* Trace link (slow-span trigger): all-zero when none. */
	uint8_t trace_id[16];
	uint8_t span_id[8];
	/* Explicit sample types only: n_sample_types values (see above), or NULL. */
	const int64_t *values;
	/* One explicit sample type only: the value of each timestamp (n_timestamps), or NULL. */
	const int64_t *event_values;
	/* Labels beyond tid/thread_name (pprof labels); keys are unique within a sample. */
	uint32_t n_labels;
	const struct pf_prof_label *labels;
};

struct pf_prof_process {
	uint32_t pid;
	size_t n_attrs;
	const struct pf_prof_attr *attrs; /* resource attributes: service.name, process.pid, ... */
	size_t n_mappings;
	const struct pf_prof_mapping *mappings;
	size_t n_frames;
	const struct pf_prof_frame *frames;
	size_t n_stacks;
	const struct pf_prof_stack *stacks;
	size_t n_samples;
	const struct pf_prof_sample *samples;
	/* The source bytes this process's profile was converted from (may be absent). */
	const uint8_t *original_payload;
	size_t original_payload_len;
	const char *original_payload_format; /* "pprof"; NULL when original_payload is NULL */
	/* The OTLP profile_id this process came with (decoded), all zero when none. The encoder
	 * gives the process's first Profile this id when it is set, a random one otherwise, so
	 * a profile keeps the id its producer reported (incident captures report them). */
	uint8_t profile_id[16];
};

struct pf_prof_window {
	uint64_t start_unix_ns; /* window start; every timestamp >= this */
	uint64_t end_unix_ns;   /* window end; every timestamp < this */
	uint32_t frequency_hz;  /* period = 1e9 / frequency_hz nanoseconds of CPU */
	uint64_t lost_samples;  /* samples the kernel side could not record */
	const char *host_name;
	size_t n_processes;
	const struct pf_prof_process *processes;
	/* Explicit sample types (see above); 0 = the implicit CPU profile. */
	size_t n_sample_types;
	const struct pf_prof_value_type *sample_types;
	struct pf_prof_value_type period_type; /* explicit types only; fields may be NULL */
	int64_t period;                        /* explicit types only; 0 when unknown */
	const char *default_sample_type;       /* pprof default_sample_type, NULL when none */
	void *arena; /* owner of everything above */
};

/* The OpenTelemetry profile.frame.type of a kind ("native" for unknown kinds), and back (an
 * unknown or absent type is native). */
const char *pf_frame_kind_name(uint8_t kind);
uint8_t pf_frame_kind_parse(const char *type);

/* Builders: a new empty window with its arena, and allocations from that arena (zeroed,
 * 16-byte aligned, freed only with the window). NULL on ENOMEM. */
struct pf_prof_window *pf_prof_window_new(void);
void *pf_prof_alloc(struct pf_prof_window *w, size_t size);
const char *pf_prof_strdup(struct pf_prof_window *w, const char *s);
void pf_prof_window_free(struct pf_prof_window *w);
/* Total samples (sum of counts) in the window. */
uint64_t pf_prof_window_samples(const struct pf_prof_window *w);
/* Number of sample types: n_sample_types, or 1 for the implicit CPU profile. */
size_t pf_prof_window_types(const struct pf_prof_window *w);
/* Sample type k (k < pf_prof_window_types) and the period type / period, with the implicit
 * CPU profile's values when the window has no explicit types. */
struct pf_prof_value_type pf_prof_window_type(const struct pf_prof_window *w, size_t k);
struct pf_prof_value_type pf_prof_window_period_type(const struct pf_prof_window *w);
int64_t pf_prof_window_period(const struct pf_prof_window *w);
/* Value of sample type k of s: values[k], or count for k == 0 (0 for k > 0) without values. */
int64_t pf_prof_sample_value(const struct pf_prof_window *w, const struct pf_prof_sample *s,
			     size_t k);
/* Whether any value of s is non-zero (a sample that carries weight). */
int pf_prof_sample_nonzero(const struct pf_prof_window *w, const struct pf_prof_sample *s);

#endif
