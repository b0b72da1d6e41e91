/* fuzz_gopclntab.c — Go function tables (agent/symbolize/gopclntab.h): bytes of a
 * .gopclntab section in a binary a profiled process runs, which the agent reads to name a
 * Go program built without a symbol table. The input is the section's content.
 *
 * Invariants checked:
 *  - parsing returns 0, -EINVAL, -ENOTSUP, -E2BIG or -ENOMEM, and a refused table gives no
 *    functions;
 *  - at most PF_GO_MAX_FUNCS functions, each with a non-empty name that starts and ends
 *    (its NUL) inside the input, and an end past its entry that does not wrap;
 *  - a function's stack-pointer program gives ranges inside the function, in address order,
 *    with values from 0 to 2^24, or a refusal (-EINVAL, -ENOTSUP). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "symbolize/gopclntab.h"

struct sp_check {
	const struct pf_go_func *f;
	uint64_t last;
	size_t n;
};

static int on_sp(void *ctx, uint64_t pc, int32_t sp)
{
	struct sp_check *c = ctx;
	FUZZ_CHECK(pc >= c->f->entry && pc < c->f->entry + c->f->size, "range outside its function");
	FUZZ_CHECK(c->n == 0 || pc > c->last, "ranges out of order");
	FUZZ_CHECK(sp >= 0 && sp <= (1 << 24), "sp %d", sp);
	c->last = pc;
	c->n++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pf_go_func *f = NULL;
	size_t n = 0;
	int rc = pf_gopclntab_parse(data, size, 0x401000, &f, &n);
	if (rc < 0) {
		FUZZ_CHECK(rc == -EINVAL || rc == -ENOTSUP || rc == -E2BIG || rc == -ENOMEM, "rc %d",
			   rc);
		FUZZ_CHECK(f == NULL && n == 0, "a refused table gave functions");
		return 0;
	}
	FUZZ_CHECK(n <= PF_GO_MAX_FUNCS, "%zu functions", n);
	for (size_t i = 0; i < n; i++) {
		const uint8_t *p = (const uint8_t *)f[i].name;
		FUZZ_CHECK(p >= data && p < data + size, "name %zu outside the input", i);
		FUZZ_CHECK(*p && memchr(p, 0, (size_t)(data + size - p)), "name %zu not ended", i);
		FUZZ_CHECK(f[i].entry + f[i].size >= f[i].entry, "function %zu wraps", i);
		struct sp_check c = {.f = &f[i]};
		int r = pf_gopclntab_sp(data, size, &f[i], on_sp, &c);
		FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOTSUP, "sp rc %d", r);
	}
	free(f);
	return 0;
}
