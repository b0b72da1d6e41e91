/* test_selector.c — pf/selector.h: every operator with present/absent keys, quoting and
 * escapes, whitespace, canonical form round trip, regex anchoring, limits, and every error
 * path with its message. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pf/selector.h"

/* Attributes as "k=v" strings, NULL-terminated. */
static const char *lookup(const char *key, void *ud)
{
	const char *const *kv = ud;
	size_t kl = strlen(key);

	for (; *kv; kv++)
		if (strncmp(*kv, key, kl) == 0 && (*kv)[kl] == '=')
			return *kv + kl + 1;
	return NULL;
}

static const char *const web1[] = {
    "env=prod", "team=infra",	   "region=us-east", "host=web-12", "arch=amd64",
    "empty=",	"path/x.y_z-w=ok", "q=a \"b\" \\c",  NULL};

static bool m(const char *src, const char *const *attrs)
{
	struct pf_error err = {0};
	struct pf_selector *s = pf_selector_compile(src, &err);

	if (!s)
		fail_msg("'%s' did not compile: %s", src, err.msg);
	assert_int_equal(err.code, 0);
	bool r = pf_selector_match(s, lookup, (void *)attrs);
	pf_selector_free(s);
	return r;
}

static void test_equality(void **state)
{
	assert_true(m("env=prod", web1));
	assert_true(m("env==prod", web1));
	assert_false(m("env=dev", web1));
	assert_false(m("missing=prod", web1)); /* = needs the key present */
	assert_false(m("env=pro", web1));      /* exact, not prefix */
	assert_false(m("env=Prod", web1));     /* case-sensitive */
	assert_true(m("empty=\"\"", web1));
	assert_false(m("missing=\"\"", web1));
	assert_true(m("path/x.y_z-w=ok", web1));
}

static void test_inequality(void **state)
{
	assert_true(m("env!=dev", web1));
	assert_false(m("env!=prod", web1));
	assert_true(m("missing!=prod", web1)); /* absent matches != */
	assert_true(m("empty!=x", web1));
	assert_false(m("empty!=\"\"", web1));
}

static void test_set_ops(void **state)
{
	assert_true(m("team in (infra)", web1));
	assert_true(m("team in (a,b,infra)", web1));
	assert_true(m("team in ( a , infra )", web1));
	assert_false(m("team in (a,b)", web1));
	assert_false(m("missing in (a,b)", web1)); /* in needs the key present */
	assert_true(m("team notin (a,b)", web1));
	assert_false(m("team notin (a,infra)", web1));
	assert_true(m("missing notin (a,b)", web1)); /* notin: absent is fine */
	assert_true(m("team in(infra)", web1));
	assert_true(m("team   notin(x)", web1));
	assert_true(m("empty in (\"\",x)", web1));
	assert_true(m("env in (\"prod\")", web1));
	assert_true(m("q in (\"a \\\"b\\\" \\\\c\")", web1));
	/* Keys named like the keywords. */
	const char *const kw[] = {"in=1", "notin=2", NULL};
	assert_true(m("in=1,notin=2", kw));
	assert_true(m("in in (1),notin notin (1)", kw));
}

static void test_regex_ops_anchored(void **state)
{
	assert_true(m("host=~^web-[0-9]+$", web1));
	assert_true(m("host=~web-[0-9]+", web1));
	assert_false(m("host=~web", web1)); /* anchored: must match the whole value */
	assert_false(m("host=~eb-12", web1));
	assert_false(m("host=~web-1", web1));
	assert_true(m("host=~.*-12", web1));
	assert_true(m("host=~\"web-[0-9]{1,3}\"", web1)); /* braces with a comma need quotes */
	assert_true(m("host=~api|web-12", web1));	  /* alternation stays inside the anchors */
	assert_false(m("host=~web|xyz", web1));
	assert_false(m("missing=~.*", web1)); /* =~ needs the key present */
	assert_true(m("arch!~arm.*", web1));
	assert_false(m("arch!~amd64", web1));
	assert_true(m("arch!~amd", web1));   /* anchored for !~ too */
	assert_true(m("missing!~.*", web1)); /* !~: absent matches */
	assert_true(m("empty=~\"\"", web1));
	assert_true(m("empty=~x*", web1));
	/* glibc reads an unmatched ')' as a literal; that must not open up the anchoring
	 * (a ^(...)$ wrapper would turn "a)|b" into "^(a)|b)$", which matches "axyz"). */
	const char *const paren[] = {"v=a)", "w=axyz", NULL};
	assert_true(m("v=~\"a)\"", paren));
	assert_false(m("w=~\"a)|b\"", paren));
	assert_true(m("w=~\"a)|b\"", (const char *const[]){"w=a)", NULL}));
	assert_true(m("w=~\"a)|b\"", (const char *const[]){"w=b", NULL}));
	/* Whole-value matching relies on POSIX leftmost-longest: both need the longer branch. */
	const char *const ab[] = {"v=ab", "w=abcd", NULL};
	assert_true(m("v=~\"a|ab\"", ab));
	assert_true(m("w=~\"(a|ab)(c|bcd)\"", ab));
	assert_false(m("w=~\"(a|ab)(c|bc)\"", ab));
	assert_true(m("empty=~^$", web1));
	/* Backslash is literal in bare words, so regex escapes work unquoted. */
	const char *const dots[] = {"h=a.b", "i=axb", NULL};
	assert_true(m("h=~a\\.b", dots));
	assert_false(m("i=~a\\.b", dots));
	assert_true(m("i=~a.b", dots));
}

static void test_conjunction_and_empty(void **state)
{
	assert_true(m("", web1));
	assert_true(m("   ", web1));
	assert_true(m("", (const char *const[]){NULL}));
	assert_true(m("env=prod,team in (infra,x),region!=eu,host=~^web-[0-9]+$,arch!~arm", web1));
	assert_false(m("env=prod,team in (infra,x),region!=us-east", web1));
	assert_true(m("  env = prod ,\tteam\tin\t(\tinfra\t)  ", web1));
	assert_true(m("env=prod,env!=dev,env=~p.*", web1));
	/* NULL lookup: every key is absent. */
	struct pf_selector *s = pf_selector_compile("x!=1,y notin (2)", NULL);
	assert_non_null(s);
	assert_true(pf_selector_match(s, NULL, NULL));
	pf_selector_free(s);
	assert_false(pf_selector_match(NULL, lookup, (void *)web1));
	pf_selector_free(NULL);
}

static void test_quoting(void **state)
{
	const char *const a[] = {"k=a b,c", "p=(x)", "e=\"", "b=\\", "s=x=y", "t=~x", NULL};
	assert_true(m("k=\"a b,c\"", a));
	assert_true(m("p=\"(x)\"", a));
	assert_true(m("e=\"\\\"\"", a));
	assert_true(m("b=\"\\\\\"", a));
	assert_true(m("b=\\", a)); /* a bare backslash is just a byte */
	assert_true(m("s=x=y", a));
	assert_true(m("t=\"~x\"", a));
	assert_true(m("t= ~x", a)); /* '=' then the value "~x" */
	assert_true(m("k in (\"a b,c\", z)", a));
}

static void expect_canonical(const char *src, const char *want)
{
	struct pf_error err = {0};
	struct pf_selector *s = pf_selector_compile(src, &err);
	if (!s)
		fail_msg("'%s': %s", src, err.msg);
	assert_string_equal(pf_selector_source(s), want);
	/* The canonical form compiles to itself. */
	struct pf_selector *again = pf_selector_compile(pf_selector_source(s), &err);
	if (!again)
		fail_msg("canonical '%s' of '%s' did not compile: %s", pf_selector_source(s), src,
			 err.msg);
	assert_string_equal(pf_selector_source(again), want);
	pf_selector_free(again);
	pf_selector_free(s);
}

static void test_canonical_source(void **state)
{
	expect_canonical("", "");
	expect_canonical("  env == prod ,team in( a , b ),x!~ y", "env=prod,team in (a,b),x!~y");
	expect_canonical("a notin(\"q r\",\"\")", "a notin (\"q r\",\"\")");
	expect_canonical("h=~\"x{1,2}\"", "h=~\"x{1,2}\"");
	expect_canonical("e=\"\\\"\\\\\"", "e=\"\\\"\\\\\"");
	expect_canonical("t= ~x", "t=\"~x\"");
	expect_canonical("t= =x", "t=\"=x\"");
	expect_canonical("t!=\"!x\"", "t!=\"!x\"");
	expect_canonical("k=\"plain\"", "k=plain");
	assert_string_equal(pf_selector_source(NULL), "");
}

static void expect_error(const char *src, const char *want_msg)
{
	struct pf_error err = {0};

	errno = 0;
	struct pf_selector *s = pf_selector_compile(src, &err);
	if (s) {
		pf_selector_free(s);
		fail_msg("'%s' compiled; want error '%s'", src, want_msg);
	}
	assert_int_equal(errno, EINVAL);
	assert_int_equal(err.code, -EINVAL);
	assert_string_equal(err.path, "");
	if (strcmp(err.msg, want_msg) != 0)
		fail_msg("'%s':\n  got  '%s'\n  want '%s'", src, err.msg, want_msg);
	/* NULL err is fine too. */
	assert_null(pf_selector_compile(src, NULL));
	assert_int_equal(errno, EINVAL);
}

static void test_errors(void **state)
{
	expect_error("env", "selector: expected an operator (=, ==, !=, =~, !~, in, notin) after "
			    "'env' at offset 3, found end of input");
	expect_error("env prod", "selector: expected an operator (=, ==, !=, =~, !~, in, notin) "
				 "after 'env' at offset 4, found 'p'");
	expect_error("env~x", "selector: expected an operator (=, ==, !=, =~, !~, in, notin) "
			      "after 'env' at offset 3, found '~'");
	expect_error("team inx (a)", "selector: expected an operator (=, ==, !=, =~, !~, in, "
				     "notin) after 'team' at offset 5, found 'i'");
	expect_error("=x", "selector: expected a key ([A-Za-z0-9_.-/]) at offset 0, found '='");
	expect_error("env=prod,", "selector: expected a key ([A-Za-z0-9_.-/]) at offset 9, found "
				  "end of input");
	expect_error("a=1,,b=2", "selector: expected a key ([A-Za-z0-9_.-/]) at offset 4, found "
				 "','");
	expect_error("k\x01=v", "selector: expected an operator (=, ==, !=, =~, !~, in, notin) "
				"after 'k' at offset 1, found byte 0x01");
	expect_error("env=", "selector: expected a value after '=' at offset 4, found end of "
			     "input");
	expect_error("env= ,x=y", "selector: expected a value after '=' at offset 5, found ','");
	expect_error("env!=(", "selector: expected a value after '!=' at offset 5, found '('");
	expect_error("env==", "selector: expected a value after '==' at offset 5, found end of "
			      "input");
	expect_error("env=prod x=y", "selector: expected ',' or end of input after a term at "
				     "offset 9, found 'x'");
	expect_error("env=a\"b\"", "selector: expected ',' or end of input after a term at "
				   "offset 5, found '\"'");
	expect_error("env=\"prod", "selector: unterminated quoted value starting at offset 4");
	expect_error("env=\"pr\\od\"", "selector: expected '\"' or '\\\\' after '\\' in a quoted "
				       "value at offset 8, found 'o'");
	expect_error("env=\"x\\", "selector: expected '\"' or '\\\\' after '\\' in a quoted value "
				  "at offset 7, found end of input");
	expect_error("team in a,b", "selector: expected '(' after 'in' at offset 8, found 'a'");
	expect_error("team notin", "selector: expected '(' after 'notin' at offset 10, found end "
				   "of input");
	expect_error("team in ()", "selector: expected a value after '(' at offset 9, found ')'");
	expect_error("team in (a,)", "selector: expected a value after ',' at offset 11, found "
				     "')'");
	expect_error("team in (a b)", "selector: expected ',' or ')' in the value list at offset "
				      "11, found 'b'");
	expect_error("team in (a", "selector: expected ',' or ')' in the value list at offset 10, "
				   "found end of input");
	expect_error("team in (a,\"b)", "selector: unterminated quoted value starting at offset "
					"11");
	expect_error("h=~\"(ab\"", "selector: expected a POSIX extended regex at offset 3: "
				   "Unmatched ( or \\(");
	expect_error("h!~\"[ab\"", "selector: expected a POSIX extended regex at offset 3: "
				   "Unmatched [, [^, [:, [., or [=");
	expect_error("h=~a{1", "selector: expected a POSIX extended regex at offset 3: "
			       "Unmatched \\{");
	/* pf/regex.h limits: stacked quantifiers made glibc regcomp allocate gigabytes */
	expect_error("h=~\"x\\\\+++\"", "selector: expected a POSIX extended regex at offset 3: "
					"stacked quantifier at byte 4");
	expect_error("env = \"\xff\" , x", "selector: expected an operator (=, ==, !=, =~, !~, in, "
					   "notin) after 'x' at offset 13, found end of input");
	/* Missing source. */
	struct pf_error err = {0};
	assert_null(pf_selector_compile(NULL, &err));
	assert_int_equal(errno, EINVAL);
	assert_string_equal(err.msg, "selector: missing");
}

static void test_limits(void **state)
{
	char src[4096];
	size_t o = 0;
	struct pf_error err = {0};

	/* Exactly 64 terms is fine; 65 is not. */
	for (int i = 0; i < 64; i++)
		o += (size_t)snprintf(src + o, sizeof(src) - o, "%sk%d=v", i ? "," : "", i);
	assert_true(o <= 1024);
	struct pf_selector *s = pf_selector_compile(src, &err);
	assert_non_null(s);
	const char *const attrs[] = {"k0=v", "k63=v", NULL};
	assert_false(pf_selector_match(s, lookup, (void *)attrs)); /* k1 is absent */
	pf_selector_free(s);
	snprintf(src + o, sizeof(src) - o, ",k64=v");
	expect_error(src, "selector: more than 64 terms at offset 374");

	/* Exactly 64 values is fine; 65 is not. */
	o = (size_t)snprintf(src, sizeof(src), "k in (");
	for (int i = 0; i < 64; i++)
		o += (size_t)snprintf(src + o, sizeof(src) - o, "%sv%d", i ? "," : "", i);
	snprintf(src + o, sizeof(src) - o, ")");
	s = pf_selector_compile(src, &err);
	assert_non_null(s);
	assert_true(pf_selector_match(s, lookup, (void *)(const char *const[]){"k=v63", NULL}));
	pf_selector_free(s);
	snprintf(src + o, sizeof(src) - o, ",v64)");
	expect_error(src, "selector: more than 64 values for 'k' at offset 252");

	/* 1024 bytes of source is fine; 1025 is not. */
	memset(src, 0, sizeof(src));
	memcpy(src, "k=", 2);
	memset(src + 2, 'v', 1022);
	s = pf_selector_compile(src, &err);
	assert_non_null(s);
	pf_selector_free(s);
	src[1024] = 'v';
	expect_error(src, "selector: longer than 1024 bytes");
	/* Whitespace counts too. */
	memset(src, ' ', 2000);
	src[2000] = 0;
	expect_error(src, "selector: longer than 1024 bytes");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_equality),
	    cmocka_unit_test(test_inequality),
	    cmocka_unit_test(test_set_ops),
	    cmocka_unit_test(test_regex_ops_anchored),
	    cmocka_unit_test(test_conjunction_and_empty),
	    cmocka_unit_test(test_quoting),
	    cmocka_unit_test(test_canonical_source),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
