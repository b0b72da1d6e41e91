/* prof_fixture.c — see prof_fixture.h. */
#include "prof_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *S(struct pf_prof_window *w, const char *s)
{
	return pf_prof_strdup(w, s);
}

static struct pf_prof_process *fixture_process(struct pf_prof_window *w,
					       struct pf_prof_process *p, uint32_t pid,
					       const char *service, unsigned flags, int which)
{
	p->pid = pid;
	struct pf_prof_attr *a = pf_prof_alloc(w, 4 * sizeof(*a));
	char pidbuf[16];
	snprintf(pidbuf, sizeof(pidbuf), "%u", pid);
	a[0] = (struct pf_prof_attr){S(w, "service.name"), S(w, service)};
	a[1] = (struct pf_prof_attr){S(w, "process.executable.name"), S(w, "app")};
	a[2] = (struct pf_prof_attr){S(w, "process.pid"), S(w, pidbuf)};
	a[3] = (struct pf_prof_attr){S(w, "container.id"), S(w, "c0ffee")};
	p->attrs = a;
	p->n_attrs = 4;

	struct pf_prof_mapping *m = pf_prof_alloc(w, 2 * sizeof(*m));
	m[0] = (struct pf_prof_mapping){0x400000, 0x500000, 0, S(w, "/usr/bin/app"),
					S(w, "aabbccddeeff00112233445566778899aabbccdd")};
	m[1] = (struct pf_prof_mapping){0xffffffff81000000ull, 0xffffffff82000000ull, 0,
					S(w, "[kernel.kallsyms]"), NULL};
	p->mappings = m;
	p->n_mappings = 2;

	struct pf_prof_frame *f = pf_prof_alloc(w, 5 * sizeof(*f));
#define FR(a_, m_, k_, fn_, file_, ln_)                                                            \
	(struct pf_prof_frame)                                                                     \
	{                                                                                          \
		.address = (a_), .mapping = (m_), .kind = (k_), .function = (fn_),                 \
		.file = (file_), .line = (ln_)                                                     \
	}
	f[0] = FR(0x401000, 0, PF_FRAME_NATIVE, S(w, "main"), S(w, "app.c"), 10);
	f[1] = FR(0x401100, 0, PF_FRAME_NATIVE, S(w, "work_a"), S(w, "app.c"), 20);
	f[2] = FR(0x401200, 0, PF_FRAME_NATIVE, S(w, "work_b"), S(w, "app.c"), 30);
	f[3] = FR(0xffffffff81001000ull, 1, PF_FRAME_KERNEL, S(w, "do_syscall_64"), NULL, 0);
	f[4] = FR(0x401300, 0, PF_FRAME_NATIVE, NULL, NULL, 0);
#undef FR
	if (flags & PROF_FIX_NAMES) {
		struct pf_prof_inline *in = pf_prof_alloc(w, 2 * sizeof(*in));
		in[0] = (struct pf_prof_inline){S(w, "app::leaf()"), S(w, "_ZN3app4leafEv"),
						S(w, "app.h"), 3};
		in[1] = (struct pf_prof_inline){S(w, "mid"), NULL, S(w, "app.c"), 15};
		f[1].function = S(w, "app::work_a(int)");
		f[1].system_name = S(w, "_ZN3app6work_aEi");
		f[1].line = 21;
		f[1].inlined = in;
		f[1].n_inlined = 2;
	}
	p->frames = f;
	p->n_frames = 5;

	static const uint32_t s_a[] = {1, 0}, s_b[] = {2, 0}, s_k[] = {3, 4, 0};
	struct pf_prof_stack *st = pf_prof_alloc(w, 4 * sizeof(*st));
	st[0] = (struct pf_prof_stack){2, s_a};
	st[1] = (struct pf_prof_stack){2, s_b};
	st[2] = (struct pf_prof_stack){3, s_k};
	st[3] = (struct pf_prof_stack){2, s_a};
	p->stacks = st;
	p->n_stacks = 4;

	struct pf_prof_sample *s = pf_prof_alloc(w, 4 * sizeof(*s));
	if (which == 0) {
		s[0] = (struct pf_prof_sample){.stack = 0, .tid = 100, .thread_name = S(w, "app"), .count = 4};
		s[1] = (struct pf_prof_sample){.stack = 1, .tid = 101, .thread_name = S(w, "worker"), .count = 2};
		s[2] = (struct pf_prof_sample){.stack = 2, .tid = 100, .thread_name = S(w, "app"), .count = 1};
		s[3] = (struct pf_prof_sample){.stack = 3, .tid = 100, .thread_name = S(w, "app"), .count = 1};
		p->n_samples = 4;
		if (flags & PROF_FIX_LINK) {
			memset(s[0].trace_id, 0xab, 16);
			memset(s[0].span_id, 0xcd, 8);
		}
	} else {
		s[0] = (struct pf_prof_sample){.stack = 0, .tid = 200, .thread_name = S(w, "other"), .count = 3};
		p->n_samples = 1;
	}
	if (flags & (PROF_FIX_TIMESTAMPS | PROF_FIX_MIXED)) {
		uint64_t t = PROF_FIXTURE_START + 1000;
		for (size_t i = 0; i < p->n_samples; i++) {
			if ((flags & PROF_FIX_MIXED) && which == 0 && i == 1)
				continue;
			uint64_t *ts = pf_prof_alloc(w, s[i].count * sizeof(*ts));
			for (uint64_t k = 0; k < s[i].count; k++, t += 10101010)
				ts[k] = t;
			s[i].timestamps = ts;
			s[i].n_timestamps = (uint32_t)s[i].count;
		}
	}
	p->samples = s;
	return p;
}

struct pf_prof_window *prof_fixture_window(unsigned flags)
{
	struct pf_prof_window *w = pf_prof_window_new();
	if (!w)
		abort();
	w->start_unix_ns = PROF_FIXTURE_START;
	w->end_unix_ns = PROF_FIXTURE_START + PROF_FIXTURE_NS;
	w->frequency_hz = 99;
	w->host_name = S(w, "host-a");
	struct pf_prof_process *p = pf_prof_alloc(w, 2 * sizeof(*p));
	fixture_process(w, &p[0], 100, "app", flags, 0);
	fixture_process(w, &p[1], 200, "other", flags, 1);
	w->processes = p;
	w->n_processes = 2;
	return w;
}

struct pf_prof_window *prof_fixture_typed_window(void)
{
	struct pf_prof_window *w = prof_fixture_window(0);
	struct pf_prof_value_type *t = pf_prof_alloc(w, 2 * sizeof(*t));
	t[0] = (struct pf_prof_value_type){S(w, "alloc_objects"), S(w, "count")};
	t[1] = (struct pf_prof_value_type){S(w, "alloc_space"), S(w, "bytes")};
	w->sample_types = t;
	w->n_sample_types = 2;
	w->period_type = (struct pf_prof_value_type){S(w, "space"), S(w, "bytes")};
	w->period = 524288;
	w->default_sample_type = S(w, "alloc_space");
	w->frequency_hz = 0;
	w->n_processes = 1;
	struct pf_prof_process *p = (struct pf_prof_process *)&w->processes[0];
	p->pid = 0;
	p->n_attrs = 2; /* service.name, process.executable.name */
	struct pf_prof_sample *s = pf_prof_alloc(w, 3 * sizeof(*s));
	static const int64_t v0[] = {3, 3000}, v1[] = {0, 512}, v2[] = {0, 0};
	struct pf_prof_label *l = pf_prof_alloc(w, 2 * sizeof(*l));
	l[0] = (struct pf_prof_label){.key = S(w, "worker"), .str = S(w, "a")};
	l[1] = (struct pf_prof_label){.key = S(w, "bytes"), .num = 1000, .unit = S(w, "bytes")};
	s[0] = (struct pf_prof_sample){.stack = 0, .count = 3, .values = v0, .n_labels = 2,
				       .labels = l};
	s[1] = (struct pf_prof_sample){.stack = 1, .count = 0, .values = v1};
	s[2] = (struct pf_prof_sample){.stack = 3, .count = 0, .values = v2};
	p->samples = s;
	p->n_samples = 3;
	p->original_payload = (const uint8_t *)S(w, "PPROF");
	p->original_payload_len = 5;
	p->original_payload_format = S(w, "pprof");
	return w;
}
