/* profleet-pprof-scrape — scrape one pprof endpoint once through agent_pprof, write the OTLP
 * profiles request (and optionally the decoded-and-re-encoded pprof) and print a summary:
 *
 *   profleet-pprof-scrape [--type cpu|heap|allocs|goroutine|mutex|block|threadcreate]
 *       [--seconds N] [--attr key=value]... [--keep-original] [--timeout-ms N]
 *       [--max-bytes N] [--out FILE.otlp.pb] [--pprof-out FILE.pb.gz] URL
 *
 * Summary on stdout, one "key: value" per line: status, bytes, processes, sample_types
 * (type/unit,...), samples (sum of counts), otlp_bytes, then `top: <total share> <self share>
 * <function>` for the 20 functions with the largest inclusive share of the first sample type
 * (of "cpu" when present). Exit 0 on success, 1 on a scrape error (printed as "error: ..."),
 * 2 on bad usage. For tests and debugging; the agent uses the library directly. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_profiles.h"
#include "pf/buf.h"
#include "pf/profcfg.h"
#include "pprof/sampler_pprof.h"
#include "pprof_codec.h"

static const char *const type_names[] = {"cpu",	  "heap",  "allocs",	  "goroutine",
					 "mutex", "block", "threadcreate"};

static int usage(void)
{
	fprintf(stderr, "usage: profleet-pprof-scrape [--type T] [--seconds N] [--attr k=v]... "
			"[--keep-original] [--timeout-ms N] [--max-bytes N] [--out FILE] "
			"[--pprof-out FILE] URL\n");
	return 2;
}

static int write_file(const char *path, const uint8_t *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -errno;
	size_t w = fwrite(p, 1, n, f);
	int r = fclose(f);
	return w == n && r == 0 ? 0 : -EIO;
}

struct fstat {
	const char *name;
	int64_t self, total;
};

static int cmp_total(const void *a, const void *b)
{
	const struct fstat *x = a, *y = b;
	return x->total < y->total ? 1 : x->total > y->total ? -1 : strcmp(x->name, y->name);
}

/* Inclusive and self value of every function for sample type k. */
static void print_top(const struct pf_prof_window *w, size_t k)
{
	size_t cap = 0, n = 0;
	struct fstat *fs = NULL;
	int64_t all = 0;
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		for (size_t j = 0; j < p->n_samples; j++) {
			const struct pf_prof_sample *s = &p->samples[j];
			int64_t v = pf_prof_sample_value(w, s, k);
			if (v <= 0 || s->stack >= p->n_stacks)
				continue;
			all += v;
			const struct pf_prof_stack *st = &p->stacks[s->stack];
			for (uint32_t f = 0; f < st->n_frames; f++) {
				const char *name = p->frames[st->frames[f]].function;
				if (!name)
					name = "?";
				bool seen = false; /* recursion counts once per sample */
				for (uint32_t g = 0; g < f && !seen; g++) {
					const char *o = p->frames[st->frames[g]].function;
					seen = strcmp(o ? o : "?", name) == 0;
				}
				size_t x = 0;
				while (x < n && strcmp(fs[x].name, name) != 0)
					x++;
				if (x == n) {
					if (n == cap) {
						cap = cap ? cap * 2 : 64;
						struct fstat *nf = realloc(fs, cap * sizeof(*fs));
						if (!nf) {
							free(fs);
							return;
						}
						fs = nf;
					}
					fs[n++] = (struct fstat){name, 0, 0};
				}
				if (!seen)
					fs[x].total += v;
				if (f == 0)
					fs[x].self += v;
			}
		}
	}
	if (n)
		qsort(fs, n, sizeof(*fs), cmp_total);
	for (size_t i = 0; i < n && i < 20 && all > 0; i++)
		printf("top: %.4f %.4f %s\n", (double)fs[i].total / (double)all,
		       (double)fs[i].self / (double)all, fs[i].name);
	free(fs);
}

int main(int argc, char **argv)
{
	struct pf_pprof_target t = {.type = PF_PPROF_CPU};
	struct pf_kv_str attrs[PF_PROFCFG_MAX_ATTRS];
	struct pf_pprof_options opts = {0};
	const char *out = NULL, *pprof_out = NULL;
	uint32_t seconds = 0;
	t.attributes = attrs;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool more = i + 1 < argc;
		char *end;
		if (strcmp(a, "--type") == 0 && more) {
			const char *v = argv[++i];
			size_t k = 0;
			while (k < sizeof(type_names) / sizeof(type_names[0]) &&
			       strcmp(type_names[k], v) != 0)
				k++;
			if (k == sizeof(type_names) / sizeof(type_names[0]))
				return usage();
			t.type = (enum pf_pprof_type)k;
		} else if (strcmp(a, "--seconds") == 0 && more) {
			long v = strtol(argv[++i], &end, 10);
			if (*end || v < 1 || v > 3600)
				return usage();
			seconds = (uint32_t)v;
		} else if (strcmp(a, "--timeout-ms") == 0 && more) {
			long v = strtol(argv[++i], &end, 10);
			if (*end || v < 1 || v > 3600000)
				return usage();
			opts.timeout_ms = (uint32_t)v;
		} else if (strcmp(a, "--max-bytes") == 0 && more) {
			long long v = strtoll(argv[++i], &end, 10);
			if (*end || v < 1)
				return usage();
			opts.max_response_bytes = (size_t)v;
		} else if (strcmp(a, "--attr") == 0 && more) {
			char *kv = argv[++i], *eq = strchr(kv, '=');
			if (!eq || eq == kv || t.n_attributes == PF_PROFCFG_MAX_ATTRS)
				return usage();
			*eq = 0;
			attrs[t.n_attributes++] = (struct pf_kv_str){kv, eq + 1};
		} else if (strcmp(a, "--keep-original") == 0) {
			t.keep_original = true;
		} else if (strcmp(a, "--out") == 0 && more) {
			out = argv[++i];
		} else if (strcmp(a, "--pprof-out") == 0 && more) {
			pprof_out = argv[++i];
		} else if (a[0] != '-' && !t.url) {
			t.url = argv[i];
		} else {
			return usage();
		}
	}
	if (!t.url)
		return usage();

	struct pf_error err = {0};
	struct pf_prof_window *w = NULL;
	int status = 0;
	int r = pf_pprof_scrape_once(&t, &opts, seconds, &w, &status, &err);
	printf("status: %d\n", status);
	if (r < 0) {
		printf("error: %s\n", err.msg[0] ? err.msg : strerror(-r));
		return 1;
	}
	printf("processes: %zu\n", w->n_processes);
	printf("sample_types: ");
	size_t cpu = 0;
	for (size_t k = 0; k < pf_prof_window_types(w); k++) {
		struct pf_prof_value_type vt = pf_prof_window_type(w, k);
		printf("%s%s/%s", k ? "," : "", vt.type, vt.unit ? vt.unit : "");
		if (vt.type && strcmp(vt.type, "cpu") == 0)
			cpu = k;
	}
	printf("\nsamples: %" PRIu64 "\n", pf_prof_window_samples(w));
	struct pf_prof_value_type pt = pf_prof_window_period_type(w);
	printf("period: %" PRId64 " %s/%s\n", pf_prof_window_period(w), pt.type ? pt.type : "",
	       pt.unit ? pt.unit : "");

	struct pf_buf b;
	pf_buf_init(&b, (size_t)1 << 30);
	pf_error_clear(&err);
	r = pf_otlp_profiles_encode(w, &b, NULL, &err);
	if (r < 0 && r != -ENODATA) {
		printf("error: OTLP encode: %s\n", err.msg[0] ? err.msg : strerror(-r));
		goto fail;
	}
	printf("otlp_bytes: %zu\n", r == -ENODATA ? (size_t)0 : b.len);
	if (out && (r = write_file(out, b.data, r == -ENODATA ? 0 : b.len)) < 0) {
		printf("error: %s: %s\n", out, strerror(-r));
		goto fail;
	}
	if (pprof_out) {
		pf_buf_reset(&b);
		r = pf_pprof_encode(w, PF_PPROF_ALL_PROCESSES, &b, &err);
		if (r == 0)
			r = write_file(pprof_out, b.data, b.len);
		if (r < 0) {
			printf("error: pprof: %s\n", strerror(-r));
			goto fail;
		}
	}
	print_top(w, cpu);
	pf_buf_release(&b);
	pf_prof_window_free(w);
	return 0;
fail:
	pf_buf_release(&b);
	pf_prof_window_free(w);
	return 1;
}
