/* fuzz_window.c — see fuzz_window.h. */
#include "fuzz_window.h"

#include <string.h>

#include "fuzz.h"

static volatile int64_t fuzz_sink;

void fuzz_window_check(const struct pf_prof_window *w)
{
	FUZZ_CHECK(w != NULL, "no window");
	FUZZ_CHECK(!w->n_processes || w->processes, "%zu processes, NULL array", w->n_processes);
	FUZZ_CHECK(!w->n_sample_types || w->sample_types, "NULL sample_types");
	for (size_t k = 0; k < w->n_sample_types; k++)
		FUZZ_CHECK(w->sample_types[k].type && *w->sample_types[k].type,
			   "sample type %zu has no name (the encoders need one)", k);
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		FUZZ_CHECK(!p->n_attrs || p->attrs, "process %zu: NULL attrs", i);
		for (size_t a = 0; a < p->n_attrs; a++)
			FUZZ_CHECK(p->attrs[a].key && p->attrs[a].value, "process %zu attr %zu NULL",
				   i, a);
		FUZZ_CHECK(!p->n_mappings || p->mappings, "process %zu: NULL mappings", i);
		for (size_t m = 0; m < p->n_mappings; m++)
			(void)strlen(p->mappings[m].path ? p->mappings[m].path : "");
		FUZZ_CHECK(!p->n_frames || p->frames, "process %zu: NULL frames", i);
		for (size_t f = 0; f < p->n_frames; f++) {
			const struct pf_prof_frame *fr = &p->frames[f];
			FUZZ_CHECK(fr->mapping >= -1 && (fr->mapping < 0 ||
							 (size_t)fr->mapping < p->n_mappings),
				   "process %zu frame %zu: mapping %d of %zu", i, f, fr->mapping,
				   p->n_mappings);
			if (fr->function)
				(void)strlen(fr->function);
			if (fr->file)
				(void)strlen(fr->file);
		}
		FUZZ_CHECK(!p->n_stacks || p->stacks, "process %zu: NULL stacks", i);
		for (size_t s = 0; s < p->n_stacks; s++) {
			const struct pf_prof_stack *st = &p->stacks[s];
			FUZZ_CHECK(!st->n_frames || st->frames, "stack %zu: NULL frames", s);
			for (uint32_t f = 0; f < st->n_frames; f++)
				FUZZ_CHECK(st->frames[f] < p->n_frames,
					   "process %zu stack %zu: frame %u of %zu", i, s,
					   st->frames[f], p->n_frames);
		}
		FUZZ_CHECK(!p->n_samples || p->samples, "process %zu: NULL samples", i);
		for (size_t s = 0; s < p->n_samples; s++) {
			const struct pf_prof_sample *sm = &p->samples[s];
			FUZZ_CHECK(sm->stack < p->n_stacks || (!p->n_stacks && sm->stack == 0),
				   "process %zu sample %zu: stack %u of %zu", i, s, sm->stack,
				   p->n_stacks);
			FUZZ_CHECK(!sm->n_timestamps || sm->timestamps, "sample %zu: NULL timestamps",
				   s);
			FUZZ_CHECK(!sm->n_labels || sm->labels, "sample %zu: NULL labels", s);
			for (uint32_t l = 0; l < sm->n_labels; l++) {
				FUZZ_CHECK(sm->labels[l].key, "sample %zu label %u: NULL key", s, l);
				for (uint32_t m = 0; m < l; m++)
					FUZZ_CHECK(strcmp(sm->labels[l].key, sm->labels[m].key) != 0,
						   "sample %zu: label key '%s' twice", s,
						   sm->labels[l].key);
			}
			if (sm->thread_name)
				(void)strlen(sm->thread_name);
			if (w->n_sample_types && sm->values)
				for (size_t k = 0; k < w->n_sample_types; k++)
					fuzz_sink = sm->values[k]; /* every value is readable */
		}
		FUZZ_CHECK(!p->original_payload_len || p->original_payload,
			   "process %zu: NULL original_payload", i);
	}
}

size_t fuzz_window_sums(const struct pf_prof_window *w, uint64_t sums[FUZZ_MAX_TYPES])
{
	size_t nt = pf_prof_window_types(w);
	memset(sums, 0, FUZZ_MAX_TYPES * sizeof(sums[0]));
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		for (size_t s = 0; s < p->n_samples; s++)
			for (size_t k = 0; k < nt && k < FUZZ_MAX_TYPES; k++)
				sums[k] += (uint64_t)pf_prof_sample_value(w, &p->samples[s], k);
	}
	return nt;
}
