/* test_regex.c — pf/regex.h: realistic filters compile and match, every limit refuses with its
 * message and byte offset (and just below it is accepted), the ERE reading of escapes and
 * bracket expressions, regcomp's own errors passed through, the fuzzer's regcomp blow-up
 * refused, and the cost of the worst patterns found within the limits printed (compile time,
 * peak memory, one regexec on a 4 KiB value) — printed, never asserted. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pf/compiler.h"
#include "pf/regex.h"

static bool full_match(const regex_t *re, const char *v)
{
	regmatch_t m[1];

	if (regexec(re, v, 1, m, 0) != 0)
		return false;
	return m[0].rm_so == 0 && (size_t)m[0].rm_eo == strlen(v);
}

/* Compiles pat (must succeed), checks it fully matches yes and not no (either may be NULL). */
static void accept(const char *pat, const char *yes, const char *no)
{
	struct pf_error err = {0};
	regex_t re;

	if (pf_regex_check(pat, &err) != 0)
		fail_msg("check refused '%s': %s", pat, err.msg);
	int r = pf_regex_compile(&re, pat, REG_EXTENDED, &err);
	if (r != 0)
		fail_msg("'%s' refused (%d): %s", pat, r, err.msg);
	assert_int_equal(err.code, 0);
	if (yes && !full_match(&re, yes))
		fail_msg("'%s' does not match '%s'", pat, yes);
	if (no && full_match(&re, no))
		fail_msg("'%s' matches '%s'", pat, no);
	regfree(&re);
}

static void refuse(const char *pat, const char *want)
{
	struct pf_error err = {0};
	regex_t re;

	int r = pf_regex_compile(&re, pat, REG_EXTENDED | REG_NOSUB, &err);
	if (r == 0) {
		regfree(&re);
		fail_msg("'%s' compiled; want '%s'", pat, want);
	}
	assert_int_equal(r, -EINVAL);
	assert_int_equal(err.code, -EINVAL);
	assert_string_equal(err.path, "");
	if (strcmp(err.msg, want) != 0)
		fail_msg("'%s':\n  got  '%s'\n  want '%s'", pat, err.msg, want);
	/* A NULL error struct is fine too. */
	assert_int_equal(pf_regex_compile(&re, pat, REG_EXTENDED, NULL), -EINVAL);
}

/* A limit refusal comes from the check alone, before any regcomp. */
static void refuse_check(const char *pat, const char *want)
{
	struct pf_error err = {0};

	assert_int_equal(pf_regex_check(pat, &err), -EINVAL);
	if (strcmp(err.msg, want) != 0)
		fail_msg("check '%s':\n  got  '%s'\n  want '%s'", pat, err.msg, want);
	refuse(pat, want);
}

static void test_realistic_filters(void **state)
{
	accept("^java$", "java", "javac");
	accept("^(nginx|envoy)-[0-9]+$", "envoy-12", "envoy-");
	accept("[[:alpha:]_]+", "snake_case", "snake-case");
	accept("a{2,5}", "aaaaa", "a");
	accept("\\+\\+", "++", "+");
	accept(".*-test", "checkout-test", "checkout");
	accept("^(shop|payments)$", "payments", "shop2");
	accept("^[a-f0-9]{64}$", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	       "0123");
	accept("/usr/(local/)?bin/[^/]+", "/usr/local/bin/redis-server", "/opt/x");
	accept("web-[0-9]{1,3}\\.example\\.com", "web-12.example.com", "web-1234.example.com");
	accept("(a|b)+c*", "abbacc", "c");
	accept("(a?)*", "aaa", "b");  /* a group matching empty may be starred... */
	accept("(a*)?b", "aab", "c"); /* ...or made optional */
	accept("(ab){1,64}", "abab", "aba");
	accept("", "", "x");
	accept("a{,3}", "aa", "aaaa"); /* glibc: {,n} is {0,n} */
	accept("a{2,}", "aaaa", "a");
	accept("a{0}b", "b", "ab");
	accept("\\w+\\s\\S", "ab c", NULL);
	accept("\\bword\\b", "word", NULL);
}

static void test_escapes_and_brackets(void **state)
{
	/* Escaped quantifiers are literals: one real quantifier after them is not stacked. */
	accept("\\++", "+++", "a");
	accept("\\**", "**", NULL);
	accept("\\?\\{2\\}", "?{2}", NULL);
	accept("\\\\+", "\\\\", NULL); /* an escaped backslash, then + */
	/* Brackets are literal sets: quantifier characters inside them are not quantifiers. */
	accept("[+*?]+", "+*?", "a");
	accept("[{]a", "{a", NULL);
	accept("[]a]+", "]a]", "b"); /* ']' first is literal */
	accept("[^]a]+", "bc", "]"); /* also after '^' */
	accept("[]+]+", "+]", NULL);
	accept("[[:alpha:]]+", "abc", "1");
	accept("[[:alpha:][:digit:]]+", "a1", "-");
	accept("[[:alpha:]]]+", "a]]", NULL); /* the class ends at ":]", the set at the next ']' */
	accept("[\\]+", "\\", NULL);	      /* '\' is literal in a set, which ']' closes */
	accept("[a\\]]", "a]", NULL);
	accept("[[.-.]a]+", "-a", NULL);
	accept("[[=a=]]+", "aa", NULL);
	accept("a)+", "a)", NULL); /* a ')' without '(' is literal (glibc ERE) */
	/* and stacking is still seen right after them */
	refuse_check("[+]++", "stacked quantifier at byte 4");
	refuse_check("[]+]**", "stacked quantifier at byte 5");
	refuse_check("[^]a]+?", "stacked quantifier at byte 6");
	refuse_check("[[:alpha:]]++", "stacked quantifier at byte 12");
	refuse_check("\\\\++", "stacked quantifier at byte 3");
	refuse_check("a)++", "stacked quantifier at byte 3");
}

static void test_limits(void **state)
{
	char pat[600];

	/* length */
	memset(pat, 'a', 256);
	pat[256] = 0;
	accept(pat, pat, NULL);
	pat[256] = 'a';
	pat[257] = 0;
	refuse_check(pat, "pattern longer than 256 bytes");

	/* stacked quantifiers */
	refuse_check("a**", "stacked quantifier at byte 2");
	refuse_check("a+?", "stacked quantifier at byte 2");
	refuse_check("ab?*", "stacked quantifier at byte 3");
	refuse_check("a{2}{3}", "stacked quantifier at byte 4");
	refuse_check("a*{2}", "stacked quantifier at byte 2");
	refuse_check("(ab)*+", "stacked quantifier at byte 5");
	refuse_check("x{1,2}?", "stacked quantifier at byte 6");
	refuse_check("a*{", "stacked quantifier at byte 2"); /* even a malformed interval */

	/* {m,n} bounds */
	accept("a{64}", NULL, NULL);
	accept("a{0,64}", NULL, NULL);
	accept("a{64,}", NULL, NULL);
	refuse_check("a{65}", "repetition count over 64 at byte 1");
	refuse_check("ab{1,65}", "repetition count over 64 at byte 2");
	refuse_check("a{65,}", "repetition count over 64 at byte 1");
	refuse_check("a{99999999999999999999}", "repetition count over 64 at byte 1");

	/* product of nested repetitions */
	accept("((a{8}){8}){4}", NULL, NULL);
	accept("(a{16}){16}", NULL, NULL); /* 256 copies */
	accept("((((a+)+b)+c)+d)+", NULL, NULL);
	refuse_check("((a{8}){8}){8}", "nested repetitions make 512 copies at byte 11 (limit 256)");
	refuse_check("(a{64}){64}", "nested repetitions make 4096 copies at byte 7 (limit 256)");
	/* 2^9 copies of a: the node estimate stops it first */
	refuse_check("((((((((a+)+)+)+)+)+)+)+)+", "pattern expands to over 1024 nodes at byte 23");

	/* groups that match the empty string are not copied */
	refuse_check("(a?){2}", "repeated group at byte 4 can match the empty string");
	refuse_check("(a*b*)+", "repeated group at byte 6 can match the empty string");
	refuse_check("(a|)+", "repeated group at byte 4 can match the empty string");
	refuse_check("()+", "repeated group at byte 2 can match the empty string");
	refuse_check("(^)+", "repeated group at byte 3 can match the empty string");
	refuse_check("((a?b?c?d?e?){64,})", "repeated group at byte 13 can match the empty string");
	accept("(a|b?c)+", NULL, NULL); /* no branch matches empty */
	accept("(a?b)+", NULL, NULL);

	/* nodes: breadth the product does not see */
	size_t o = 0;
	for (int i = 0; i < 9; i++)
		o += (size_t)snprintf(pat + o, sizeof(pat) - o, "[a-z]{64}");
	refuse_check(pat, "pattern expands to over 1024 nodes at byte 36");
	accept("(a{0,64}|b{0,64}|c{0,64}|d{0,64}|e{0,64}|f{0,64})*", NULL, NULL);

	/* quantifier count */
	o = 0;
	for (int i = 0; i < 32; i++)
		o += (size_t)snprintf(pat + o, sizeof(pat) - o, "a*");
	accept(pat, "aaa", "b");
	snprintf(pat + o, sizeof(pat) - o, "b*");
	refuse_check(pat, "more than 32 quantifiers at byte 65");

	/* groups and depth */
	o = 0;
	for (int i = 0; i < 32; i++)
		o += (size_t)snprintf(pat + o, sizeof(pat) - o, "(a)");
	accept(pat, NULL, NULL);
	snprintf(pat + o, sizeof(pat) - o, "(b)");
	refuse_check(pat, "more than 32 groups at byte 96");
	accept("((((((((a))))))))", "a", NULL);
	refuse_check("(((((((((a)))))))))", "groups nested deeper than 8 at byte 8");

	/* anchors: at most 4 conditions (\b and \B are 2), never in a repeated group, and
	 * they multiply the node estimate */
	accept("^(a|b)$", "b", "ab");
	accept("\\bword\\b", "word", NULL);
	accept("^a$|^b$", "b", NULL);
	accept("(^a)?b", "ab", NULL);
	accept("^[a-f0-9]{64}$", NULL, NULL);
	refuse_check("^a$|^b$|^c$", "more than 4 anchors at byte 8");
	refuse_check("\\b\\B\\b", "more than 4 anchors at byte 4");
	refuse_check("(\\ba)+", "repeated group at byte 5 contains an anchor");
	refuse_check("(x\\b)*", "repeated group at byte 5 contains an anchor");
	refuse_check("(\\b){64}", "repeated group at byte 4 can match the empty string");
	refuse_check("((a{0,64}\\b)*b{0,64}\\B)*", "repeated group at byte 12 contains an anchor");
	refuse_check("\\b\\B(a){0,64}",
		     "pattern expands to over 1024 nodes with its anchors at byte 7");

	/* an interval's comma may be "\\," to glibc: still an interval */
	accept("a{1\\,3}", "aaa", "aaaa");
	refuse_check("a{1\\,64}{1\\,64}", "stacked quantifier at byte 8");
	refuse_check("a{65\\,}", "repetition count over 64 at byte 1");

	/* back-references */
	refuse_check("(a)\\1", "back-reference at byte 3");
	refuse_check("(a*)*\\9", "back-reference at byte 5");
}

static void test_regcomp_errors(void **state)
{
	/* Within the limits but not a regex: regcomp's own words. */
	refuse("(ab", "Unmatched ( or \\(");
	refuse("[ab", "Unmatched [, [^, [:, [., or [=");
	refuse("a{1", "Unmatched \\{");
	refuse("[z-a]", "Invalid range end");
	refuse("*a", "Invalid preceding regular expression");
	refuse("^*", "Invalid preceding regular expression");
	refuse("a\\", "Trailing backslash");
	refuse("[[:nope:]]", "Invalid character class name");

	struct pf_error err = {0};
	regex_t re;
	assert_int_equal(pf_regex_compile(&re, NULL, REG_EXTENDED, &err), -EINVAL);
	assert_string_equal(err.msg, "pattern missing");
	pf_error_clear(&err);
	assert_int_equal(pf_regex_check(NULL, &err), -EINVAL);
	pf_error_clear(&err);
	assert_int_equal(pf_regex_compile(&re, "a", REG_NOSUB, &err), -EINVAL);
	assert_string_equal(err.msg, "only POSIX extended regexes (REG_EXTENDED) are supported");
	/* REG_NOSUB / REG_ICASE pass through */
	assert_int_equal(
	    pf_regex_compile(&re, "^JaVa$", REG_EXTENDED | REG_ICASE | REG_NOSUB, NULL), 0);
	assert_int_equal(regexec(&re, "java", 0, NULL, 0), 0);
	regfree(&re);
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The fuzzer's input: a selector whose `!~` value stacks 30 '+' after an escaped backslash.
 * Before pf_regex, glibc regcomp allocated over 2 GB for it. */
static void test_fuzz_blowup(void **state)
{
	const char *src = getenv("PF_SOURCE_DIR");
	char path[4096];
	char data[512];

	assert_non_null(src);
	snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/selector/regress-regcomp-blowup.txt",
		 src);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	ssize_t n = read(fd, data, sizeof(data) - 1);
	close(fd);
	assert_true(n > 0);
	data[n] = 0; /* the selector ends at its first NUL, as in the fuzz target */
	const char *op = strstr(data, "!~");
	assert_non_null(op);
	const char *pat = op + 2;

	struct pf_error err = {0};
	regex_t re;
	double t0 = now_ms();
	int r = pf_regex_compile(&re, pat, REG_EXTENDED, &err);
	double dt = now_ms() - t0;
	assert_int_equal(r, -EINVAL);
	assert_non_null(strstr(err.msg, "stacked quantifier at byte "));
	print_message("fuzz input (%zu-byte regex) refused in %.3f ms: %s\n", strlen(pat), dt,
		      err.msg);

	/* and the plain form of it */
	char plus[64];
	memset(plus, '+', sizeof(plus) - 1);
	plus[0] = 'a';
	plus[sizeof(plus) - 1] = 0;
	refuse_check(plus, "stacked quantifier at byte 2");
}

/* Peak resident memory in kB (VmHWM) after clear_refs reset it, or -1. */
static long hwm_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "VmHWM:", 6) == 0)
			v = strtol(line + 6, NULL, 10);
	fclose(f);
	return v;
}

static bool hwm_reset(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY);
	if (fd < 0)
		return false;
	bool ok = write(fd, "5", 1) == 1;
	close(fd);
	return ok;
}

/* Measures one pattern in a child process (a clean heap and peak): compile time (best of 3),
 * peak RSS growth during the first compile, and one regexec over 4 KiB of 'a'. Prints; the
 * child's exit status says whether the pattern compiled. */
static void measure(const char *pat)
{
	fflush(stdout);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		regex_t re;
		malloc_trim(0); /* so that reused heap pages count */
		bool peak = hwm_reset();
		long h0 = hwm_kb();
		double best = 1e9;
		for (int i = 0; i < 3; i++) {
			double t0 = now_ms();
			if (pf_regex_compile(&re, pat, REG_EXTENDED, NULL) != 0)
				_exit(1);
			best = pf_min(best, now_ms() - t0);
			if (i == 0 && peak)
				h0 = hwm_kb() - h0;
			if (i < 2)
				regfree(&re);
		}
		static char value[4097];
		memset(value, 'a', 4096);
		regmatch_t m[1];
		double t0 = now_ms();
		(void)regexec(&re, value, 1, m, 0);
		double ex = now_ms() - t0;
		regfree(&re);
		if (peak)
			print_message(
			    "  compile %6.3f ms  peak +%5ld kB  regexec(4 KiB) %7.3f ms  %s\n",
			    best, h0, ex, pat);
		else
			print_message("  compile %6.3f ms  peak n/a  regexec(4 KiB) %7.3f ms  %s\n",
				      best, ex, pat);
		fflush(stdout);
		_exit(0);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("'%s' did not compile", pat);
}

static void test_worst_within_limits(void **state)
{
	/* The costliest patterns found within the limits (hand-built and by a random search
	 * over nested repetitions, alternations and classes), each accepted. */
	static const char *const worst[] = {
	    "((a|b|c|d|e){0,64})*",
	    "(a{0,64}|b{0,64}|c{0,64}|d{0,64}|e{0,64}|f{0,64})*",
	    "((a|b?c){0,64})*",
	    "((a*b){1,64})+",
	    "(((a|b){0,16}c){0,8}d)*",
	    "([ab]{64}a?|a{64})*.[ab]+",
	    "(\\w{60}\\w\\w{60,63})+\\w{2,}",
	    "(a?b?c?d?e?f?g?h?i?j?k?l?m?n?o?p?q?r?s?t?u?v?w?x?y?z?a?b?c?d?e?)*",
	    "[a-z]{64}[a-z]{64}[a-z]{64}[a-z]{64}",
	    "\\`((a){0,64}b{0,64})*",
	    "\\b((a){0,40}b{0,20})*",
	    "^(nginx|envoy)-[0-9]+$",
	    "[a-z]+-[0-9]+", /* regexec: glibc's search is quadratic in the value whatever the
			      * pattern */
	};
	print_message("worst patterns within the limits:\n");
	for (size_t i = 0; i < sizeof(worst) / sizeof(worst[0]); i++)
		measure(worst[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_realistic_filters),
	    cmocka_unit_test(test_escapes_and_brackets),
	    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_regcomp_errors),
	    cmocka_unit_test(test_fuzz_blowup),
	    cmocka_unit_test(test_worst_within_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
