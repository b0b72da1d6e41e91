/* pywalk.c — see pywalk.h */
#include "pywalk.h"

#include <errno.h>
#include <string.h>

static int rd64(int pid, uint64_t addr, uint64_t *v)
{
	return pf_py_read_mem(pid, addr, v, sizeof(*v));
}

int pywalk(const struct pf_py_process *p, struct pf_py_names *names, uint64_t ident,
	   struct pywalk_frame *out, unsigned *n)
{
	const struct pf_py_offsets *o = &p->off;
	uint64_t interp, ts, tid, frame;
	*n = 0;
	int r = rd64(p->pid, p->runtime_addr + o->runtime_interpreters_head, &interp);
	if (r < 0)
		return r;
	r = rd64(p->pid, interp + o->interp_threads_head, &ts);
	for (int i = 0; r == 0 && ts && i < 64; i++) {
		r = rd64(p->pid, ts + o->tstate_thread_id, &tid);
		if (r == 0 && tid == ident)
			break;
		if (r == 0)
			r = rd64(p->pid, ts + o->tstate_next, &ts);
	}
	if (r < 0)
		return r;
	if (!ts || tid != ident)
		return -ENOENT;
	r = rd64(p->pid, ts + o->tstate_frame, &frame);
	if (r == 0 && o->cframe_current_frame != PF_PY_NONE && frame)
		r = rd64(p->pid, frame + o->cframe_current_frame, &frame);
	while (r == 0 && frame && *n < PYWALK_MAX) {
		struct pywalk_frame *f = &out[*n];
		uint64_t next;
		if (o->frame_kind == PF_PY_FRAMES_OBJECT) {
			int32_t lasti;
			r = rd64(p->pid, frame + o->pyframe_code, &f->code);
			if (r == 0)
				r = pf_py_read_mem(p->pid, frame + o->pyframe_lasti, &lasti,
						   sizeof(lasti));
			if (r == 0)
				r = rd64(p->pid, frame + o->pyframe_back, &next);
			f->instr = lasti;
		} else {
			uint8_t owner = 0;
			uint64_t ip = 0;
			r = rd64(p->pid, frame + o->iframe_code, &f->code);
			if (r == 0)
				r = pf_py_read_mem(p->pid, frame + o->iframe_owner, &owner, 1);
			if (r == 0)
				r = rd64(p->pid, frame + o->iframe_instr, &ip);
			if (r == 0)
				r = rd64(p->pid, frame + o->iframe_previous, &next);
			if (r == 0 && o->owner_cstack != PF_PY_NONE && owner == o->owner_cstack) {
				frame = next; /* a shim of the C stack: no Python code */
				continue;
			}
			f->instr = (int32_t)(int64_t)(ip - (f->code + o->code_code_adaptive));
		}
		if (r < 0)
			return r;
		r = pf_py_names_resolve(names, p->pid, f->code, f->instr, &f->f);
		if (r < 0)
			return r;
		(*n)++;
		frame = next;
	}
	return r;
}
