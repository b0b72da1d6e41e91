/* pf/compiler.h — small compiler helpers used everywhere: cleanup attributes (systemd's
 * _cleanup_ idiom with TAKE_PTR), array size, branch hints, printf checking.
 * Owns no state. */
#ifndef PF_COMPILER_H
#define PF_COMPILER_H

#include <stdlib.h>

#define PF_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define pf_likely(x) __builtin_expect(!!(x), 1)
#define pf_unlikely(x) __builtin_expect(!!(x), 0)
#define PF_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define PF_UNUSED __attribute__((unused))

static inline void pf_freep(void *p)
{
	free(*(void **)p);
}

/* Function-local ownership: `_cleanup_free_ char *s = strdup(x);` frees on every return. */
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(pf_freep)

/* Hand ownership out of a cleanup variable: `return TAKE_PTR(s);`. */
#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) _pf_tmp_ = (p);                                                      \
		(p) = NULL;                                                                        \
		_pf_tmp_;                                                                          \
	})

#define pf_min(a, b) ((a) < (b) ? (a) : (b))
#define pf_max(a, b) ((a) > (b) ? (a) : (b))

#endif
