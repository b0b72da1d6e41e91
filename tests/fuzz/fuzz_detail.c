/* fuzz_detail.c — the stored-profile detail decoder (controller/profstore/detail.h,
 * pf_detail_build): what the store hands back for a profile stored without its body. The
 * input is self-contained: byte 0 the number of stacks (mod 17), byte 1 the number of
 * location keys (mod 17), then each key as one length byte and its bytes, then the samples
 * part; stack i is the keys i and i + 1 (mod the number of keys), none without keys.
 *
 * Invariants checked:
 *  - a rejection is -EBADMSG, -E2BIG or -ENOMEM with a message, and no window;
 *  - an accepted window has one process whose samples name existing stacks, whose stacks
 *    name existing frames and whose frames name existing mappings (or none);
 *  - it splits again, and the window built from that split splits to the same bytes (the
 *    format is a fixed point after one round). */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "profstore/detail.h"

#define MAX_KEYS 16

static void check_window(const struct pf_prof_window *w)
{
	FUZZ_CHECK(w->n_processes == 1, "%zu processes", w->n_processes);
	const struct pf_prof_process *p = &w->processes[0];
	for (size_t i = 0; i < p->n_samples; i++)
		FUZZ_CHECK(p->samples[i].stack < p->n_stacks, "sample %zu: stack %u of %zu", i,
			   p->samples[i].stack, p->n_stacks);
	for (size_t i = 0; i < p->n_stacks; i++)
		for (uint32_t j = 0; j < p->stacks[i].n_frames; j++)
			FUZZ_CHECK(p->stacks[i].frames[j] < p->n_frames, "stack %zu: frame", i);
	for (size_t i = 0; i < p->n_frames; i++)
		FUZZ_CHECK(p->frames[i].mapping < 0 || (size_t)p->frames[i].mapping < p->n_mappings,
			   "frame %zu: mapping %d", i, p->frames[i].mapping);
}

/* The split of w as stacks for pf_detail_build (pointers into sp). */
static void stacks_of(const struct pf_detail_split *sp, struct pf_profile_dstack *ds,
		      const uint8_t **key, size_t *len)
{
	size_t k = 0;
	for (size_t i = 0; i < sp->n_stacks; i++) {
		ds[i] = (struct pf_profile_dstack){sp->stack[i].len, key + k, len + k};
		for (uint32_t j = 0; j < sp->stack[i].len; j++, k++) {
			const struct pf_profile_span *l =
			    &sp->loc[sp->stack_locs[sp->stack[i].off + j]];
			key[k] = sp->locs.data + l->off;
			len[k] = l->len;
		}
	}
}

static void roundtrip(const struct pf_prof_window *w)
{
	struct pf_detail_split a, b;
	struct pf_prof_window *back = NULL;
	int rc = pf_detail_split(w, 0, &a, NULL);
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM, "split of an accepted window: %d", rc);
	if (rc < 0) {
		pf_detail_split_release(&a);
		return;
	}
	size_t total = 0;
	for (size_t i = 0; i < a.n_stacks; i++)
		total += a.stack[i].len;
	struct pf_profile_dstack *ds = calloc(a.n_stacks + 1, sizeof(*ds));
	const uint8_t **key = calloc(total + 1, sizeof(*key));
	size_t *len = calloc(total + 1, sizeof(*len));
	if (ds && key && len) {
		stacks_of(&a, ds, key, len);
		rc = pf_detail_build(a.samples.data, a.samples.len, ds, a.n_stacks, &back, NULL);
		FUZZ_CHECK(rc == 0 || rc == -ENOMEM, "rebuild of a split: %d", rc);
		if (rc == 0 && pf_detail_split(back, 0, &b, NULL) == 0) {
			FUZZ_CHECK(b.samples.len == a.samples.len &&
				       memcmp(b.samples.data, a.samples.data, a.samples.len) == 0,
				   "split, build, split: %zu != %zu bytes", b.samples.len,
				   a.samples.len);
			FUZZ_CHECK(b.locs.len == a.locs.len, "locations: %zu != %zu bytes",
				   b.locs.len, a.locs.len);
		}
		pf_detail_split_release(&b);
		pf_prof_window_free(back);
	}
	free(ds);
	free(key);
	free(len);
	pf_detail_split_release(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *keys[MAX_KEYS];
	size_t key_len[MAX_KEYS];
	if (size < 2)
		return 0;
	size_t n_stacks = data[0] % (MAX_KEYS + 1), n_keys = data[1] % (MAX_KEYS + 1), off = 2;
	for (size_t i = 0; i < n_keys; i++) {
		if (off >= size)
			return 0;
		size_t n = data[off++];
		if (n > size - off)
			return 0;
		keys[i] = data + off;
		key_len[i] = n;
		off += n;
	}
	const uint8_t *sk[MAX_KEYS][2];
	size_t sl[MAX_KEYS][2];
	struct pf_profile_dstack ds[MAX_KEYS];
	for (size_t i = 0; i < n_stacks; i++) {
		size_t m = n_keys ? 2 : 0;
		for (size_t j = 0; j < m; j++) {
			sk[i][j] = keys[(i + j) % n_keys];
			sl[i][j] = key_len[(i + j) % n_keys];
		}
		ds[i] = (struct pf_profile_dstack){m, sk[i], sl[i]};
	}
	struct pf_prof_window *w = NULL;
	struct pf_error err = {0};
	int rc = pf_detail_build(data + off, size - off, ds, n_stacks, &w, &err);
	if (rc < 0) {
		FUZZ_CHECK((rc == -EBADMSG || rc == -E2BIG || rc == -ENOMEM) && err.msg[0] && !w,
			   "rc %d, message '%s'", rc, err.msg);
		return 0;
	}
	check_window(w);
	roundtrip(w);
	pf_prof_window_free(w);
	return 0;
}
