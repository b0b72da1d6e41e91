/* test_python_unwind.c — agent/interp/python_unwind.h: the kernel entry made from each minor
 * version's offsets (and the layouts the walk refuses), the stack word of a Python frame,
 * aggregate.c's frames of kind PF_FRAME_PYTHON, and names read from a live python3.11 child
 * that stay after it exits (a word never named before the exit gets no name, never a wrong
 * one). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sampler/aggregate.h"
#include "pychild.h"
#include "interp/python_unwind.h"

static struct pf_py_process fake_proc(unsigned minor)
{
	struct pf_py_process p = {.pid = 1, .major = 3, .minor = minor, .runtime_addr = 0x7f0000,
				  .n_eval = 2};
	p.eval[0] = (struct pf_py_range){0x500000, 0x510000};
	p.eval[1] = (struct pf_py_range){0x400000, 0x400800};
	const struct pf_py_offsets *o = pf_py_offsets_table(minor);
	assert_non_null(o);
	p.off = *o;
	return p;
}

static void test_layout_every_table(void **state)
{
	for (unsigned minor = 9; minor <= 12; minor++) {
		struct pf_py_process p = fake_proc(minor);
		struct pf_bpf_py_proc e;
		assert_int_equal(pf_py_unwind_layout(&p, &e), 0);
		assert_true(e.frame_read > 0 && e.frame_read <= PF_PY_FRAME_READ_MAX);
		assert_int_equal(e.frame_read % 8, 0);
		assert_true(e.f_code < e.frame_read && e.f_back < e.frame_read &&
			    e.f_instr < e.frame_read);
		assert_int_equal(e.eval_start[1], 0x400000);
		assert_int_equal(e.eval_end[0], 0x510000);
		assert_int_equal(e.eval_end[2], 0);
		assert_int_equal(e.frame_kind, minor <= 10 ? PF_BPF_PY_OBJECT : PF_BPF_PY_INTERP);
		/* 3.11: an activation ends at is_entry, 3.12+ at the C stack's shim */
		if (minor == 11) {
			assert_int_not_equal(e.f_is_entry, PF_PY_OFF_NONE);
			assert_int_equal(e.owner_cstack, PF_PY_OFF_NONE);
		}
		if (minor == 12)
			assert_int_not_equal(e.owner_cstack, PF_PY_OFF_NONE);
		/* 3.11-3.12 reach the frame through tstate->cframe */
		assert_int_equal(e.cframe_frame != PF_PY_OFF_NONE, minor == 11 || minor == 12);
	}
	/* Debian's 3.11 as the headers give it: f_code 32, previous 48, prev_instr 56, is_entry
	 * 68, owner 69; cframe 56, current_frame 8; co_code_adaptive 184 */
	struct pf_py_process p = fake_proc(11);
	struct pf_bpf_py_proc e;
	assert_int_equal(pf_py_unwind_layout(&p, &e), 0);
	assert_int_equal(e.f_code, 32);
	assert_int_equal(e.f_back, 48);
	assert_int_equal(e.f_instr, 56);
	assert_int_equal(e.f_is_entry, 68);
	assert_int_equal(e.frame_read, 72);
	assert_int_equal(e.tstate_frame, 56);
	assert_int_equal(e.cframe_frame, 8);
	assert_int_equal(e.code_adaptive, 184);
}

static void test_layout_refused(void **state)
{
	struct pf_bpf_py_proc e;
	struct pf_py_process p = fake_proc(11);
	p.off.iframe_code = 200; /* beyond the window read */
	assert_int_equal(pf_py_unwind_layout(&p, &e), -ENOTSUP);
	p = fake_proc(11);
	p.off.iframe_previous = 44; /* a pointer not 8-aligned */
	assert_int_equal(pf_py_unwind_layout(&p, &e), -ENOTSUP);
	p = fake_proc(11);
	p.off.iframe_is_entry = PF_PY_NONE; /* no way to end an activation */
	assert_int_equal(pf_py_unwind_layout(&p, &e), -ENOTSUP);
	p = fake_proc(12);
	p.off.iframe_owner = PF_PY_NONE;
	assert_int_equal(pf_py_unwind_layout(&p, &e), -ENOTSUP);
	p = fake_proc(10);
	p.off.pyframe_lasti = 98; /* an int not 4-aligned */
	assert_int_equal(pf_py_unwind_layout(&p, &e), -ENOTSUP);
	p = fake_proc(11);
	p.n_eval = 0;
	assert_int_equal(pf_py_unwind_layout(&p, &e), -ENOTSUP);
	p = fake_proc(11);
	p.off.frame_kind = 7;
	assert_int_equal(pf_py_unwind_layout(&p, &e), -ENOTSUP);
}

static void test_word(void **state)
{
	uint64_t code = 0x7f12345678a8ull;
	for (int instr = -2; instr < 300000; instr += 997) {
		int32_t field = instr + PF_PY_INSTR_BIAS;
		if (field > (int32_t)PF_PY_INSTR_MAX)
			field = PF_PY_INSTR_MAX;
		uint64_t w = PF_PY_FRAME(code, (uint64_t)field);
		assert_true(PF_PY_IS_FRAME(w));
		assert_int_equal(PF_PY_FRAME_CODE(w), code);
		assert_int_equal(PF_PY_FRAME_INSTR(w), field - PF_PY_INSTR_BIAS);
	}
	/* no user or kernel address is one */
	assert_false(PF_PY_IS_FRAME(0x00007fffffffe000ull));
	assert_false(PF_PY_IS_FRAME(0xffffffff81000000ull));
	assert_false(PF_PY_IS_FRAME(0xffff800000000000ull));
}

static void test_aggregate_kind(void **state)
{
	struct pf_agg *a = pf_agg_new(NULL);
	assert_non_null(a);
	uint64_t py = PF_PY_FRAME(0x7f0000001000ull, 10);
	uint64_t u[] = {0x401000, py, 0x402000};
	struct pf_agg_sample s = {.ts_unix_ns = 1100, .pid = 5, .tid = 5, .ustack = u, .n_ustack = 3};
	assert_int_equal(pf_agg_add(a, &s), 0);
	struct pf_prof_window *w;
	assert_int_equal(pf_agg_close(a, 1000, 2000, 99, NULL, &w), 0);
	assert_int_equal(w->n_processes, 1);
	const struct pf_prof_process *p = &w->processes[0];
	const struct pf_prof_stack *st = &p->stacks[p->samples[0].stack];
	assert_int_equal(st->n_frames, 3);
	assert_int_equal(p->frames[st->frames[0]].kind, PF_FRAME_NATIVE);
	assert_int_equal(p->frames[st->frames[1]].kind, PF_FRAME_PYTHON);
	assert_int_equal(p->frames[st->frames[1]].address, py);
	assert_int_equal(p->frames[st->frames[2]].kind, PF_FRAME_NATIVE);
	pf_prof_window_free(w);
	pf_agg_free(a);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static const char live_script[] = "import sys\n"
				  "def target():\n"
				  "    return 1\n"
				  "def other():\n"
				  "    return 2\n"
				  "print('code', id(target.__code__), id(other.__code__))\n"
				  "sys.stdin.readline()\n";

static void test_names_outlive_the_process(void **state)
{
	struct pychild c;
	if (pychild_start(&c, PYCHILD_DEBIAN_311, live_script) < 0) {
		print_message("%s missing: skipped\n", PYCHILD_DEBIAN_311);
		skip();
	}
	char line[256];
	assert_int_equal(pychild_line(&c, line, sizeof(line), 5000), 0);
	unsigned long long target = 0, other = 0;
	assert_int_equal(sscanf(line, "code %llu %llu", &target, &other), 2);

	struct pf_py_unwind *u = pf_py_unwind_new(0);
	assert_non_null(u);
	struct pf_bpf_py_proc e;
	uint64_t t = mono_ms();
	/* not before PF_PY_UNWIND_DETECT_AFTER_MS after its first sample */
	assert_int_equal(pf_py_unwind_seen(u, (uint32_t)c.pid, t, &e), 0);
	assert_int_equal(pf_py_unwind_seen(u, (uint32_t)c.pid, t + PF_PY_UNWIND_DETECT_AFTER_MS, &e),
			 1);
	assert_int_equal(e.frame_kind, PF_BPF_PY_INTERP);
	assert_int_equal(pf_py_unwind_seen(u, (uint32_t)c.pid, t + 1000, &e), 0); /* known */
	struct pf_py_unwind_stats st;
	pf_py_unwind_stats(u, &st);
	assert_int_equal(st.processes, 1);
	assert_int_equal(st.by_minor[2], 1);

	uint64_t w_target = PF_PY_FRAME((uint64_t)target, PF_PY_INSTR_BIAS);
	uint64_t w_other = PF_PY_FRAME((uint64_t)other, PF_PY_INSTR_BIAS);
	uint64_t words[] = {w_target, 0x401000};
	pf_py_unwind_note(u, (uint32_t)c.pid, words, 2);
	pf_py_walker.tick(u);
	uint32_t pid = (uint32_t)c.pid;
	pychild_stop(&c); /* gone: its memory cannot be read any more */

	struct pf_prof_window *w = pf_prof_window_new();
	assert_non_null(w);
	struct pf_prof_frame fr[3] = {{.address = w_target, .kind = PF_FRAME_PYTHON},
				      {.address = w_other, .kind = PF_FRAME_PYTHON},
				      {.address = 0x401000, .kind = PF_FRAME_NATIVE}};
	assert_int_equal(pf_py_walker.name(u, pid, w, fr, 3), 0);
	assert_non_null(fr[0].function);
	assert_string_equal(fr[0].function, "target");
	assert_string_equal(fr[0].file, "<string>");
	assert_int_equal(fr[0].line, 2);
	assert_null(fr[1].function); /* never named while it lived */
	assert_null(fr[2].function); /* not a Python frame: left alone */
	pf_py_unwind_stats(u, &st);
	assert_int_equal(st.named, 1);
	assert_int_equal(st.name_failed, 1);
	pf_prof_window_free(w);

	pf_py_walker.forget(u, pid);
	pf_py_unwind_stats(u, &st);
	assert_int_equal(st.processes, 0);
	pf_py_unwind_free(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_layout_every_table),
	    cmocka_unit_test(test_layout_refused),
	    cmocka_unit_test(test_word),
	    cmocka_unit_test(test_aggregate_kind),
	    cmocka_unit_test(test_names_outlive_the_process),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
