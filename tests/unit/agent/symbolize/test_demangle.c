/* test_demangle.c — agent/symbolize/demangle.h: C++ (Itanium, with parameters, const, templates,
 * GCC clone suffixes), Rust legacy (hash dropped) and v0 through libiberty; names that are not
 * mangled; the cache (hits, negative entries, the byte bound starting it over). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "symbolize/demangle.h"

static void test_names(void **state)
{
	static const struct {
		const char *mangled, *readable;
	} cases[] = {
		{"_ZN8checkout5Order5priceEv", "checkout::Order::price()"},
		{"_ZNK8checkout5Order5priceEv", "checkout::Order::price() const"},
		{"_ZNSt6vectorIiSaIiEE9push_backEOi",
		 "std::vector<int, std::allocator<int> >::push_back(int&&)"},
		{"_Z3fooi.cold", "foo(int) [clone .cold]"},
		{"_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write"},
		{"_RNvNtCs9ltgdHTiPiY_4main4work4burn", "main::work::burn"},
	};
	struct pf_demangler *d = pf_demangler_new(0, 0);
	assert_non_null(d);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_true(pf_demangle_is_mangled(cases[i].mangled));
		const char *r = pf_demangle(d, cases[i].mangled);
		assert_non_null(r);
		assert_string_equal(r, cases[i].readable);
		char *dup = pf_demangle_dup(cases[i].mangled);
		assert_non_null(dup);
		assert_string_equal(dup, cases[i].readable);
		free(dup);
	}
	/* not mangled: answered without the library, not counted */
	assert_false(pf_demangle_is_mangled("main"));
	assert_false(pf_demangle_is_mangled("_Z"));
	assert_false(pf_demangle_is_mangled(NULL));
	assert_null(pf_demangle(d, "main"));
	assert_null(pf_demangle(d, "do_syscall_64"));
	/* looks mangled, is not: refused */
	assert_null(pf_demangle(d, "_Zgarbage"));
	struct pf_demangler_stats st;
	pf_demangler_stats(d, &st);
	assert_int_equal(st.lookups, 7);
	assert_int_equal(st.hits, 0);
	assert_int_equal(st.demangled, 6);
	assert_int_equal(st.failed, 1);
	pf_demangler_free(d);
}

static void test_cache(void **state)
{
	struct pf_demangler *d = pf_demangler_new(4096, 0);
	assert_non_null(d);
	for (int round = 0; round < 3; round++) {
		assert_string_equal(pf_demangle(d, "_ZNK8checkout5Order5priceEv"),
				    "checkout::Order::price() const");
		assert_null(pf_demangle(d, "_Zgarbage")); /* negative answers are cached too */
	}
	struct pf_demangler_stats st;
	pf_demangler_stats(d, &st);
	assert_int_equal(st.lookups, 6);
	assert_int_equal(st.hits, 4);
	assert_int_equal(st.demangled + st.failed, 2);
	assert_true(st.bytes > 0);
	pf_demangler_free(d);

	/* the byte bound: many distinct names never hold more than max_bytes */
	d = pf_demangler_new(4096, 2048);
	char name[64];
	for (int i = 0; i < 500; i++) {
		snprintf(name, sizeof(name), "_ZN10space%05d1fEv", i);
		const char *r = pf_demangle(d, name);
		assert_non_null(r);
		char want[64];
		snprintf(want, sizeof(want), "space%05d::f()", i);
		assert_string_equal(r, want);
		pf_demangler_stats(d, &st);
		assert_true(st.bytes <= 2048);
	}
	assert_true(st.resets > 0);
	assert_int_equal(st.hits, 0);
	pf_demangler_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_cache),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
