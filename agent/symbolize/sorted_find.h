/* sorted_find.h — the one binary search of agent/symbolize's sorted tables (ELF symbols,
 * kernel symbols, JIT maps, line-table rows). Header only. */
#ifndef PF_AGENT_SORTED_FIND_H
#define PF_AGENT_SORTED_FIND_H

#include <stddef.h>

/* How many entries of a[0, n), sorted by a[i] member (".addr"; empty for an array of
 * numbers), are at most x: when it is k > 0, a[k - 1] is the last entry starting at or
 * below x (the one that may cover it). */
#define PF_COUNT_AT_OR_BELOW(a, n, member, x)                                                      \
	({                                                                                         \
		size_t lo_ = 0, hi_ = (n);                                                         \
		while (lo_ < hi_) {                                                                \
			size_t mid_ = lo_ + (hi_ - lo_) / 2;                                       \
			if ((a)[mid_] member <= (x))                                               \
				lo_ = mid_ + 1;                                                    \
			else                                                                       \
				hi_ = mid_;                                                        \
		}                                                                                  \
		lo_;                                                                               \
	})

#endif
