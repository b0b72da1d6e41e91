#!/usr/bin/env bash
# check-banned-selftest.sh CHECKER — runs scripts/check-banned.sh on samples written to a
# temporary directory: a known-bad file must fail with exactly the expected file:line list;
# a clean file full of near misses must pass; generated files and build dirs are skipped.
set -uo pipefail
checker=${1:?usage: $0 path/to/check-banned.sh}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

expect() { # expect WHAT WANT_STATUS WANT_OUTPUT_FILE -- ARGS...
	local what=$1 want_status=$2 want_out=$3
	shift 4
	local out status
	out=$(bash "$checker" "$@" 2>&1)
	status=$?
	if [ "$status" -ne "$want_status" ]; then
		echo "FAIL $what: exit $status, want $want_status"
		printf '%s\n' "$out"
		fails=$((fails + 1))
		return
	fi
	if [ -n "$want_out" ]; then
		if ! diff -u "$want_out" <(printf '%s\n' "$out" | grep -F ' is banned' | LC_ALL=C sort); then
			echo "FAIL $what: output differs (above)"
			fails=$((fails + 1))
			return
		fi
	fi
	echo "ok   $what"
}

mkdir -p "$tmp/bad" "$tmp/good/sub" "$tmp/skip/build" "$tmp/skip/gen"
# The samples live only in the temp dir, so lint_banned never sees them in the tree.
cat > "$tmp/bad/bad.c" <<'SAMPLE'
#include <stdio.h>
static void f(char *d, const char *s, va_list ap)
{
	char b[8];
	sprintf(b, "%d", 1);
	vsprintf(d, s, ap);
	strcpy(d, s);
	strcat(d, s);
	strncpy(d, s, 3);
	strtok(d, ",");
	int n = atoi (s) + atol(s) +
		atoll(s);
	gets(d);
	if (n) { x = y; } strcpy  (d, "/* not a comment */");
}
SAMPLE
cat > "$tmp/bad/bad.h" <<'SAMPLE'
/* an unterminated comment at the end of another file must not hide this one */
#define COPY(d, s) strcpy((d), (s))
SAMPLE
cat > "$tmp/bad/a.h" <<'SAMPLE'
/* never closed: sorts first, and must not swallow the files after it
SAMPLE
cat > "$tmp/want_bad" <<'WANT'
BAD/bad.c:10: strtok() is banned (docs/internals/conventions.md)
BAD/bad.c:11: atoi() is banned (docs/internals/conventions.md)
BAD/bad.c:11: atol() is banned (docs/internals/conventions.md)
BAD/bad.c:12: atoll() is banned (docs/internals/conventions.md)
BAD/bad.c:13: gets() is banned (docs/internals/conventions.md)
BAD/bad.c:14: strcpy() is banned (docs/internals/conventions.md)
BAD/bad.c:5: sprintf() is banned (docs/internals/conventions.md)
BAD/bad.c:6: vsprintf() is banned (docs/internals/conventions.md)
BAD/bad.c:7: strcpy() is banned (docs/internals/conventions.md)
BAD/bad.c:8: strcat() is banned (docs/internals/conventions.md)
BAD/bad.c:9: strncpy() is banned (docs/internals/conventions.md)
BAD/bad.h:2: strcpy() is banned (docs/internals/conventions.md)
WANT
sed "s|^BAD|$tmp/bad|" "$tmp/want_bad" | LC_ALL=C sort > "$tmp/want_bad.sorted"

cat > "$tmp/good/sub/good.c" <<'SAMPLE'
/* Names in comments are fine: sprintf(buf, ...), strcpy(a, b)
 * even across lines: atoi(s) */
// strcat(d, s) in a line comment
static const char *m = "use snprintf, not sprintf(buf, fmt)";
static const char q = '(';
static const char *e = "escaped \" quote then strcpy(x) still in the string";
static void g(struct s *p, char *d, const char *s)
{
	snprintf(d, 8, "%s", s);
	vsnprintf(d, 8, s, ap);
	strncat(d, s, 1);
	my_strcpy(d, s);
	strcpy_s(d, 8, s);
	p->strcpy(d, s);
	p.atoi(s);
	int sprintf_count = 0;
	long v = strtol(s, NULL, 10) + atoi_like(s) + xatol(s);
	fgets(d, 8, stdin);
	strtok_r(d, ",", &save);
	gets_s(d, 8);
	strcpy(d, s); /* pf-lint: allow-banned (a banned.h would need this) */
}
SAMPLE
cat > "$tmp/good/good.h" <<'SAMPLE'
#define SPRINTF_BANNED "sprintf("
int atoiatoi(const char *s);
SAMPLE
: > "$tmp/want_none"

# Generated code and build directories are not ours to lint.
printf 'void h(char *d){ strcpy(d, "x"); }\n' > "$tmp/skip/build/x.c"
printf 'void h(char *d){ strcpy(d, "x"); }\n' > "$tmp/skip/gen/opamp.pb-c.c"
printf 'void h(char *d){ strcpy(d, "x"); }\n' > "$tmp/skip/gen/cpu.skel.h"
printf 'void h(char *d){ strcpy(d, "x"); }\n' > "$tmp/skip/gen/vmlinux.h"
printf 'void h(char *d){ strcpy(d, "x"); }\n' > "$tmp/skip/gen/notes.txt"

expect "known-bad sample fails with every call listed" 1 "$tmp/want_bad.sorted" -- "$tmp/bad"
expect "bad file given directly fails" 1 "" -- "$tmp/bad/bad.h"
expect "near misses pass" 0 "$tmp/want_none" -- "$tmp/good"
expect "generated code and build dirs skipped" 0 "$tmp/want_none" -- "$tmp/skip"
expect "missing paths ignored" 0 "" -- "$tmp/does-not-exist"
expect "no arguments is a usage error" 2 "" --

# A single bad file among clean ones still fails the whole run.
expect "one bad among good fails" 1 "" -- "$tmp/good" "$tmp/skip" "$tmp/bad/bad.h"

if [ "$fails" -ne 0 ]; then
	echo "check-banned selftest: $fails failure(s)"
	exit 1
fi
echo "check-banned selftest: all passed"
