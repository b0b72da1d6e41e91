/* pprof_convert_bench.c — pprof → OTLP conversion throughput (a benchmark, not a test).
 *
 *   pprof-convert-bench [--seconds S] [FILE.pb.gz ...]
 *
 * For each input (the Go fixtures under tests/data/pprof, plus a synthetic CPU profile of
 * 5,000 distinct stacks 24 frames deep made here with the project's pprof encoder), it runs
 * the agent's whole conversion path — gunzip, bounded decode (pf_pprof_convert) and OTLP
 * encode (pf_otlp_profiles_encode) — in a loop for S seconds (default 3) and prints
 * profiles/s, input MB/s and samples/s, one `key: value` block per input. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "otlp_profiles.h"
#include "pf/buf.h"
#include "pf/profile.h"
#include "pprof/sampler_pprof.h"
#include "pprof_codec.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int read_file(const char *path, struct pf_buf *out)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -errno;
	uint8_t chunk[65536];
	size_t n;
	int r = 0;
	while (r == 0 && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		r = pf_buf_append(out, chunk, n);
	fclose(f);
	return r;
}

/* A CPU window of `stacks` distinct stacks, `depth` frames each, one process. */
static int synthetic(struct pf_buf *out, size_t stacks, size_t depth)
{
	struct pf_prof_window *w = pf_prof_window_new();
	if (!w)
		return -ENOMEM;
	w->start_unix_ns = 1700000000000000000ULL;
	w->end_unix_ns = w->start_unix_ns + 10000000000ULL;
	w->frequency_hz = 99;
	struct pf_prof_process *p = pf_prof_alloc(w, sizeof(*p));
	size_t n_frames = depth * 64;
	struct pf_prof_frame *fr = pf_prof_alloc(w, n_frames * sizeof(*fr));
	struct pf_prof_stack *st = pf_prof_alloc(w, stacks * sizeof(*st));
	struct pf_prof_sample *sm = pf_prof_alloc(w, stacks * sizeof(*sm));
	struct pf_prof_mapping *mp = pf_prof_alloc(w, sizeof(*mp));
	struct pf_prof_attr *at = pf_prof_alloc(w, sizeof(*at));
	if (!p || !fr || !st || !sm || !mp || !at) {
		pf_prof_window_free(w);
		return -ENOMEM;
	}
	mp->start = 0x400000;
	mp->limit = 0x800000;
	mp->path = "/usr/bin/synthetic";
	mp->build_id = "0123456789abcdef0123456789abcdef01234567";
	for (size_t i = 0; i < n_frames; i++) {
		char name[32];
		snprintf(name, sizeof(name), "func_%zu", i);
		fr[i].address = 0x400000 + i * 16;
		fr[i].function = pf_prof_strdup(w, name);
		fr[i].file = "synthetic.c";
		fr[i].line = (uint32_t)i + 1;
	}
	uint32_t seed = 12345;
	for (size_t s = 0; s < stacks; s++) {
		uint32_t *ix = pf_prof_alloc(w, depth * sizeof(*ix));
		if (!ix) {
			pf_prof_window_free(w);
			return -ENOMEM;
		}
		for (size_t d = 0; d < depth; d++) {
			seed = seed * 1103515245u + 12345u;
			ix[d] = (uint32_t)((d * 64 + (seed >> 16) % 64) % n_frames);
		}
		st[s].n_frames = (uint32_t)depth;
		st[s].frames = ix;
		sm[s].stack = (uint32_t)s;
		sm[s].tid = 100 + (uint32_t)(s % 8);
		sm[s].count = 1 + s % 5;
	}
	at[0].key = "service.name";
	at[0].value = "synthetic";
	p->pid = 4242;
	p->n_attrs = 1;
	p->attrs = at;
	p->n_mappings = 1;
	p->mappings = mp;
	p->n_frames = n_frames;
	p->frames = fr;
	p->n_stacks = stacks;
	p->stacks = st;
	p->n_samples = stacks;
	p->samples = sm;
	w->n_processes = 1;
	w->processes = p;
	int r = pf_pprof_encode(w, -1, out, NULL);
	pf_prof_window_free(w);
	return r;
}

static int run(const char *name, const struct pf_buf *in, double seconds)
{
	struct pf_pprof_target t = {.url = (char *)"http://127.0.0.1/debug/pprof/profile",
				    .type = PF_PPROF_CPU};
	struct pf_pprof_options o = {.host_name = "bench"};
	struct pf_buf out;
	pf_buf_init(&out, (size_t)256 << 20);
	uint64_t n = 0, samples = 0, otlp_bytes = 0;
	double t0 = now_s(), t1 = t0;
	while (t1 - t0 < seconds) {
		struct pf_prof_window *w = NULL;
		struct pf_error err = {0};
		int r = pf_pprof_convert(in->data, in->len, &t, &o, 1700000000000000000ULL, &w, &err);
		if (r < 0) {
			fprintf(stderr, "%s: convert: %s\n", name, err.msg);
			pf_buf_release(&out);
			return 1;
		}
		uint8_t id[16];
		pf_buf_reset(&out);
		r = pf_otlp_profiles_encode(w, &out, id, &err);
		if (r < 0 && r != -ENODATA) {
			fprintf(stderr, "%s: encode: %s\n", name, err.msg);
			pf_prof_window_free(w);
			pf_buf_release(&out);
			return 1;
		}
		for (size_t i = 0; i < w->n_processes; i++)
			samples += w->processes[i].n_samples;
		otlp_bytes += out.len;
		pf_prof_window_free(w);
		n++;
		t1 = now_s();
	}
	double el = t1 - t0;
	printf("input: %s\npprof_bytes: %zu\nprofiles_per_s: %.0f\ninput_mb_per_s: %.1f\n"
	       "samples_per_s: %.0f\notlp_bytes_per_profile: %.0f\n\n",
	       name, in->len, (double)n / el, (double)n * (double)in->len / el / 1e6,
	       (double)samples / el, n ? (double)otlp_bytes / (double)n : 0.0);
	pf_buf_release(&out);
	return 0;
}

int main(int argc, char **argv)
{
	double seconds = 3;
	int i = 1, rc = 0;
	if (argc > 2 && strcmp(argv[1], "--seconds") == 0) {
		seconds = strtod(argv[2], NULL);
		if (seconds <= 0 || seconds > 600)
			seconds = 3;
		i = 3;
	}
	for (; i < argc; i++) {
		struct pf_buf in;
		pf_buf_init(&in, (size_t)64 << 20);
		if (read_file(argv[i], &in) < 0) {
			fprintf(stderr, "cannot read %s\n", argv[i]);
			rc = 1;
		} else {
			rc |= run(argv[i], &in, seconds);
		}
		pf_buf_release(&in);
	}
	struct pf_buf syn;
	pf_buf_init(&syn, (size_t)64 << 20);
	if (synthetic(&syn, 5000, 24) < 0) {
		fprintf(stderr, "cannot build the synthetic profile\n");
		rc = 1;
	} else {
		rc |= run("synthetic 5000 stacks x 24 frames", &syn, seconds);
	}
	pf_buf_release(&syn);
	return rc;
}
