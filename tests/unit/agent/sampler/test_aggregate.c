/* test_aggregate.c — agent/sampler/aggregate.h: stack dedup, per-(pid,tid,stack) counts, per-sample
 * timestamps, the window boundary, keep/resolve hooks, the sample bound; off-CPU aggregation
 * (weights, reasons, the off_cpu sample type) and its OTLP encoding; allocation aggregation
 * (the four heap sample types, inuse from the live flag) and its OTLP encoding. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "otlp_profiles.h"
#include "pprof_codec.h"
#include "pf/buf.h"
#include "sampler/aggregate.h"

static const uint64_t K1[] = {0xffffffff81000010ull, 0xffffffff81000020ull};
static const uint64_t U1[] = {0x401000, 0x402000, 0x403000};
static const uint64_t U2[] = {0x401000, 0x404000, 0x403000};

static void add(struct pf_agg *a, uint64_t ts, uint32_t pid, uint32_t tid, const uint64_t *k,
		uint32_t nk, const uint64_t *u, uint32_t nu)
{
	struct pf_agg_sample s = {.ts_unix_ns = ts, .pid = pid, .tid = tid, .comm = "worker",
				  .kstack = k, .n_kstack = nk, .ustack = u, .n_ustack = nu};
	assert_int_equal(pf_agg_add(a, &s), 0);
}

static const struct pf_prof_process *proc(const struct pf_prof_window *w, uint32_t pid)
{
	for (size_t i = 0; i < w->n_processes; i++)
		if (w->processes[i].pid == pid)
			return &w->processes[i];
	return NULL;
}

static void test_dedup_counts_timestamps(void **state)
{
	struct pf_agg *a = pf_agg_new(NULL);
	assert_non_null(a);
	add(a, 1030, 10, 11, NULL, 0, U1, 3);
	add(a, 1010, 10, 11, NULL, 0, U1, 3);
	add(a, 1020, 10, 11, NULL, 0, U1, 3);
	add(a, 1015, 10, 12, NULL, 0, U1, 3); /* other thread, same stack */
	add(a, 1040, 10, 11, K1, 2, U2, 3);   /* other stack */
	add(a, 1050, 20, 21, NULL, 0, U1, 3); /* other process */
	add(a, 2000, 10, 11, NULL, 0, U1, 3); /* after the window */

	struct pf_agg_stats st;
	pf_agg_stats(a, &st);
	assert_int_equal(st.stacks, 2);

	struct pf_prof_window *w;
	assert_int_equal(pf_agg_close(a, 1000, 1500, 99, NULL, &w), 0);
	assert_int_equal(w->n_processes, 2);
	assert_int_equal(w->frequency_hz, 99);
	assert_int_equal(pf_prof_window_samples(w), 6);
	const struct pf_prof_process *p = proc(w, 10);
	assert_non_null(p);
	assert_int_equal(p->n_stacks, 2);
	assert_int_equal(p->n_samples, 3);
	/* frames deduplicated by (kind, address): 0x401000 and 0x403000 are shared */
	assert_int_equal(p->n_frames, 2 + 4);
	const struct pf_prof_sample *s3 = NULL;
	for (size_t i = 0; i < p->n_samples; i++)
		if (p->samples[i].count == 3)
			s3 = &p->samples[i];
	assert_non_null(s3);
	assert_int_equal(s3->tid, 11);
	assert_string_equal(s3->thread_name, "worker");
	assert_int_equal(s3->n_timestamps, 3);
	assert_int_equal(s3->timestamps[0], 1010);
	assert_int_equal(s3->timestamps[1], 1020);
	assert_int_equal(s3->timestamps[2], 1030);
	const struct pf_prof_stack *stk = &p->stacks[s3->stack];
	assert_int_equal(stk->n_frames, 3);
	assert_int_equal(p->frames[stk->frames[0]].address, 0x401000);
	assert_int_equal(p->frames[stk->frames[0]].kind, PF_FRAME_NATIVE);
	assert_int_equal(p->frames[stk->frames[0]].mapping, -1);
	/* kernel frames first, leaf first */
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pf_prof_stack *k = &p->stacks[p->samples[i].stack];
		if (k->n_frames == 5) {
			assert_int_equal(p->frames[k->frames[0]].kind, PF_FRAME_KERNEL);
			assert_int_equal(p->frames[k->frames[0]].address, K1[0]);
			assert_int_equal(p->frames[k->frames[2]].kind, PF_FRAME_NATIVE);
		}
	}
	pf_prof_window_free(w);

	/* the late sample stays for the next window; its stack is still interned */
	pf_agg_stats(a, &st);
	assert_int_equal(st.pending, 1);
	assert_int_equal(st.stacks, 1);
	assert_int_equal(pf_agg_close(a, 1500, 3000, 99, NULL, &w), 0);
	assert_int_equal(pf_prof_window_samples(w), 1);
	assert_int_equal(w->processes[0].samples[0].timestamps[0], 2000);
	pf_prof_window_free(w);
	pf_agg_stats(a, &st);
	assert_int_equal(st.pending, 0);
	assert_int_equal(st.stacks, 0);
	pf_agg_free(a);
}

static bool keep_even(void *ctx, uint32_t pid)
{
	return pid % 2 == 0;
}

static int calls;

static int resolve(void *ctx, uint32_t pid, struct pf_prof_window *w, struct pf_prof_process *p,
		   struct pf_prof_frame *frames, size_t n)
{
	calls++;
	assert_ptr_equal(frames, p->frames);
	assert_int_equal(n, p->n_frames);
	for (size_t i = 0; i < n; i++)
		frames[i].function = pf_prof_strdup(w, frames[i].address == 0x401000 ? "leaf" : "x");
	return *(int *)ctx;
}

static void test_hooks(void **state)
{
	struct pf_agg *a = pf_agg_new(NULL);
	add(a, 10, 2, 2, NULL, 0, U1, 3);
	add(a, 11, 3, 3, NULL, 0, U1, 3);
	add(a, 5, 4, 4, NULL, 0, U1, 3); /* before start: clamped */
	int ret = -EIO;
	struct pf_agg_hooks h = {.keep = keep_even, .resolve = resolve, .ctx = &ret};
	struct pf_prof_window *w = (void *)1;
	/* a failing hook fails the close and keeps the samples */
	assert_int_equal(pf_agg_close(a, 8, 100, 99, &h, &w), -EIO);
	assert_null(w);
	struct pf_agg_stats st;
	pf_agg_stats(a, &st);
	assert_int_equal(st.pending, 3);
	ret = 0;
	calls = 0;
	assert_int_equal(pf_agg_close(a, 8, 100, 99, &h, &w), 0);
	assert_int_equal(calls, 2);
	assert_int_equal(w->n_processes, 2); /* pid 3 dropped */
	assert_null(proc(w, 3));
	const struct pf_prof_process *p = proc(w, 4);
	assert_int_equal(p->samples[0].timestamps[0], 8);
	assert_string_equal(p->frames[p->stacks[0].frames[0]].function, "leaf");
	pf_prof_window_free(w);
	pf_agg_free(a);
}

static void test_bound(void **state)
{
	struct pf_agg_options o = {.max_samples = 2};
	struct pf_agg *a = pf_agg_new(&o);
	add(a, 1, 1, 1, NULL, 0, U1, 3);
	add(a, 2, 1, 1, NULL, 0, U1, 3);
	struct pf_agg_sample s = {.ts_unix_ns = 3, .pid = 1, .tid = 1, .ustack = U1, .n_ustack = 3};
	assert_int_equal(pf_agg_add(a, &s), -ENOSPC);
	struct pf_agg_stats st;
	pf_agg_stats(a, &st);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.added, 2);
	/* an empty stack is a stack too */
	struct pf_prof_window *w;
	assert_int_equal(pf_agg_close(a, 0, 10, 99, NULL, &w), 0);
	pf_prof_window_free(w);
	struct pf_agg_sample e = {.ts_unix_ns = 3, .pid = 1, .tid = 1};
	assert_int_equal(pf_agg_add(a, &e), 0);
	assert_int_equal(pf_agg_close(a, 0, 10, 99, NULL, &w), 0);
	assert_int_equal(w->processes[0].stacks[0].n_frames, 0);
	pf_prof_window_free(w);
	pf_agg_free(a);
}

/* w through OTLP and back: it has n sample types, type k named name; the sum of its values k. */
static int64_t otlp_sum(const struct pf_prof_window *w, size_t n, size_t k, const char *name)
{
	struct pf_buf out;
	pf_buf_init(&out, 1u << 20);
	uint8_t id[16];
	struct pf_error err = {0};
	assert_int_equal(pf_otlp_profiles_encode(w, &out, id, &err), 0);
	struct pf_prof_window *d = NULL;
	assert_int_equal(pf_otlp_profiles_decode(out.data, out.len, 1u << 20, &d, &err), 0);
	assert_int_equal(d->n_sample_types, n);
	assert_string_equal(d->sample_types[k].type, name);
	int64_t sum = 0;
	for (size_t i = 0; i < d->n_processes; i++)
		for (size_t j = 0; j < d->processes[i].n_samples; j++)
			sum += d->processes[i].samples[j].values[k];
	pf_prof_window_free(d);
	pf_buf_release(&out);
	return sum;
}

static void add_off(struct pf_agg *a, uint64_t ts, uint32_t tid, const uint64_t *u, uint64_t ns,
		    uint8_t reason)
{
	struct pf_agg_sample s = {.ts_unix_ns = ts, .pid = 10, .tid = tid, .comm = "worker",
				  .ustack = u, .n_ustack = 3, .weight = ns, .reason = reason};
	assert_int_equal(pf_agg_add(a, &s), 0);
}

/* A weighted window's one sample type (type/nanoseconds, period type the same) and period. */
static void assert_weighted(const struct pf_prof_window *w, const char *type, int64_t period)
{
	assert_int_equal(w->n_sample_types, 1);
	assert_string_equal(w->sample_types[0].type, type);
	assert_string_equal(w->sample_types[0].unit, "nanoseconds");
	assert_string_equal(w->period_type.type, type);
	assert_int_equal(w->period, period);
}

/* Off-CPU: one sample per (tid, stack, reason), its value the sum of the weights, a weight
 * per timestamp, the reason as a label; type off_cpu/nanoseconds; OTLP keeps the sums. */
static void test_off_cpu(void **state)
{
	struct pf_agg_options o = {.off_cpu = true};
	struct pf_agg *a = pf_agg_new(&o);
	assert_non_null(a);
	add_off(a, 1010, 11, U1, 300000000, PF_AGG_OFF_BLOCKED);
	add_off(a, 1020, 11, U1, 200000000, PF_AGG_OFF_BLOCKED);
	add_off(a, 1030, 11, U1, 5000000, PF_AGG_OFF_PREEMPTED); /* same stack, other reason */
	add_off(a, 1040, 11, U2, 7000000, PF_AGG_OFF_BLOCKED);
	add_off(a, 1600, 11, U1, 1, PF_AGG_OFF_BLOCKED); /* after the window */
	struct pf_prof_window *w;
	assert_int_equal(pf_agg_close(a, 1000, 1500, 99, NULL, &w), 0);
	assert_weighted(w, "off_cpu", 1);
	const struct pf_prof_process *p = proc(w, 10);
	assert_non_null(p);
	assert_int_equal(p->n_samples, 3);
	int64_t total = 0;
	bool seen_blocked = false, seen_preempted = false;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pf_prof_sample *s = &p->samples[i];
		assert_non_null(s->values);
		assert_non_null(s->event_values);
		assert_int_equal(s->n_timestamps, s->count);
		int64_t sum = 0;
		for (uint32_t k = 0; k < s->n_timestamps; k++)
			sum += s->event_values[k];
		assert_int_equal(sum, s->values[0]);
		total += s->values[0];
		assert_int_equal(s->n_labels, 1);
		assert_string_equal(s->labels[0].key, "profleet.off_cpu.reason");
		if (!strcmp(s->labels[0].str, "preempted")) {
			seen_preempted = true;
			assert_int_equal(s->values[0], 5000000);
		} else {
			assert_string_equal(s->labels[0].str, "blocked");
			seen_blocked = true;
			if (s->count == 2) {
				assert_int_equal(s->timestamps[0], 1010);
				assert_int_equal(s->event_values[0], 300000000);
				assert_int_equal(s->event_values[1], 200000000);
			}
		}
	}
	assert_true(seen_blocked && seen_preempted);
	assert_int_equal(total, 512000000);

	/* OTLP: the type survives, the decoded values sum to the same */
	assert_int_equal(otlp_sum(w, 1, 0, "off_cpu"), total);
	pf_prof_window_free(w);
	pf_agg_free(a);
}

static void add_alloc(struct pf_agg *a, uint64_t ts, const uint64_t *u, uint64_t bytes,
		      uint64_t objs, size_t *idx)
{
	struct pf_agg_sample s = {.ts_unix_ns = ts, .pid = 10, .tid = 11, .comm = "worker",
				  .ustack = u, .n_ustack = 3, .weight = bytes, .objects = objs,
				  .reason = 1};
	assert_int_equal(pf_agg_add_index(a, &s, idx), 0);
}

/* Allocation: one sample per (tid, stack) whatever is live; alloc_* over every allocation,
 * inuse_* over those still live; pprof's type names, period type space/bytes. */
static void test_alloc(void **state)
{
	struct pf_agg_options o = {.alloc = true, .alloc_period = 524288};
	struct pf_agg *a = pf_agg_new(&o);
	assert_non_null(a);
	size_t i1, i2, i3;
	add_alloc(a, 1010, U1, 600000, 3, &i1);
	add_alloc(a, 1020, U1, 400000, 2, &i2);
	add_alloc(a, 1030, U2, 50000, 1, &i3);
	assert_int_equal(pf_agg_set_reason(a, i2, 0), 0); /* freed */
	assert_int_equal(pf_agg_set_reason(a, 99, 0), -ENOENT);
	struct pf_prof_window *w;
	assert_int_equal(pf_agg_close(a, 1000, 1500, 0, NULL, &w), 0);
	assert_int_equal(w->n_sample_types, 4);
	const char *t[4][2] = {{"alloc_objects", "count"},
			       {"alloc_space", "bytes"},
			       {"inuse_objects", "count"},
			       {"inuse_space", "bytes"}};
	for (int k = 0; k < 4; k++) {
		assert_string_equal(w->sample_types[k].type, t[k][0]);
		assert_string_equal(w->sample_types[k].unit, t[k][1]);
	}
	assert_string_equal(w->period_type.type, "space");
	assert_int_equal(w->period, 524288);
	const struct pf_prof_process *p = proc(w, 10);
	assert_non_null(p);
	assert_int_equal(p->n_samples, 2);
	int64_t sum[4] = {0};
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pf_prof_sample *sm = &p->samples[i];
		assert_non_null(sm->values);
		assert_int_equal(sm->n_timestamps, 0);
		if (sm->count == 2) {
			assert_int_equal(sm->values[0], 5);
			assert_int_equal(sm->values[1], 1000000);
			assert_int_equal(sm->values[2], 3);
			assert_int_equal(sm->values[3], 600000);
		}
		for (int k = 0; k < 4; k++)
			sum[k] += sm->values[k];
	}
	assert_int_equal(sum[1], 1050000);
	assert_int_equal(sum[3], 650000);

	assert_int_equal(otlp_sum(w, 4, 3, "inuse_space"), 650000);
	pf_prof_window_free(w);
	pf_agg_free(a);
}

/* Wall: CPU ticks (their period) and waits (their ns) of the same stack add up in one sample
 * per (tid, stack), no reason label; type wall/nanoseconds, period 1e9 / hz; the pprof
 * encoding keeps the type and the total. */
static void test_wall(void **state)
{
	struct pf_agg_options o = {.wall = true};
	struct pf_agg *a = pf_agg_new(&o);
	assert_non_null(a);
	/* a tick at 100 Hz, a wait of the same stack, a preempted one (merged too: no reason),
	 * a tick of another stack */
	static const struct {
		const uint64_t *u;
		uint64_t ns;
		uint8_t reason;
	} in[] = {{U1, 10000000, 0},
		  {U1, 300000000, PF_AGG_OFF_BLOCKED},
		  {U1, 5000000, PF_AGG_OFF_PREEMPTED},
		  {U2, 10000000, 0}};
	for (size_t i = 0; i < PF_ARRAY_SIZE(in); i++)
		add_off(a, 1010 + 10 * i, 11, in[i].u, in[i].ns, in[i].reason);
	struct pf_prof_window *w;
	assert_int_equal(pf_agg_close(a, 1000, 1500, 100, NULL, &w), 0);
	assert_weighted(w, "wall", 10000000);
	const struct pf_prof_process *p = proc(w, 10);
	assert_true(p && p->n_samples == 2);
	int64_t total = 0;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pf_prof_sample *s = &p->samples[i];
		assert_int_equal(s->n_labels, 0);
		assert_non_null(s->event_values);
		if (s->count == 3)
			assert_int_equal(s->values[0], 315000000);
		else
			assert_int_equal(s->values[0], 10000000);
		total += s->values[0];
	}
	assert_int_equal(total, 325000000);

	struct pf_buf out;
	pf_buf_init(&out, 1u << 20);
	struct pf_error err = {0};
	assert_int_equal(pf_pprof_encode(w, (int64_t)p->pid, &out, &err), 0);
	struct pf_prof_window *d = NULL;
	assert_int_equal(pf_pprof_decode(out.data, out.len, 1u << 20, &d, &err), 0);
	assert_int_equal(d->n_sample_types, 1);
	assert_string_equal(d->sample_types[0].type, "wall");
	assert_string_equal(d->sample_types[0].unit, "nanoseconds");
	int64_t dtotal = 0;
	for (size_t i = 0; i < d->n_processes; i++)
		for (size_t k = 0; k < d->processes[i].n_samples; k++)
			dtotal += pf_prof_sample_value(d, &d->processes[i].samples[k], 0);
	assert_int_equal(dtotal, total);
	pf_prof_window_free(d);
	pf_buf_release(&out);
	pf_prof_window_free(w);
	pf_agg_free(a);
}

static void test_many_stacks(void **state)
{
	struct pf_agg *a = pf_agg_new(NULL);
	uint64_t u[4];
	for (uint64_t i = 0; i < 5000; i++) {
		u[0] = 0x1000 + (i % 1000);
		u[1] = 0x2000;
		u[2] = 0x3000 + (i % 7);
		u[3] = 0x4000;
		add(a, 100 + i, (uint32_t)(1 + i % 3), 1, NULL, 0, u, 4);
	}
	struct pf_agg_stats st;
	pf_agg_stats(a, &st);
	assert_int_equal(st.stacks, 5000); /* (i % 1000, i % 7) is unique below 7000 */
	struct pf_prof_window *w;
	assert_int_equal(pf_agg_close(a, 100, 100000, 99, NULL, &w), 0);
	assert_int_equal(pf_prof_window_samples(w), 5000);
	pf_prof_window_free(w);
	pf_agg_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dedup_counts_timestamps),
		cmocka_unit_test(test_hooks),
		cmocka_unit_test(test_bound),
		cmocka_unit_test(test_many_stacks),
		cmocka_unit_test(test_off_cpu),
		cmocka_unit_test(test_wall),
		cmocka_unit_test(test_alloc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
