#!/usr/bin/env bash
# check-banned.sh — our banned.h, enforced at test time (after git's banned.h).
# Fails, listing file:line: call, for any call of a banned C function in the given files or
# directories (*.c and *.h, recursively):
#   sprintf vsprintf strcpy strcat strncpy strtok atoi atol atoll gets
# Comments, string and character literals are skipped, so prose and messages may name them.
# A line that really must (say, a banned.h that #defines them away) carries the marker
# "pf-lint: allow-banned" in a comment.
# Skipped: generated code (*.pb-c.[ch], *.skel.h, vmlinux.h, *.gen.[ch]) and build/ dirs.
#
# Usage: scripts/check-banned.sh PATH...    (missing paths are ignored)
# Exit: 0 clean, 1 banned calls found, 2 usage error.
set -euo pipefail

if [ $# -eq 0 ]; then
	echo "usage: $0 PATH..." >&2
	exit 2
fi

files=()
for p in "$@"; do
	if [ -d "$p" ]; then
		while IFS= read -r -d '' f; do
			files+=("$f")
		done < <(find "$p" \( -type d \( -name build -o -name 'build-*' -o -name '.git' \) -prune \) \
			-o \( -type f \( -name '*.c' -o -name '*.h' \) \
			! -name '*.pb-c.c' ! -name '*.pb-c.h' ! -name '*.skel.h' ! -name 'vmlinux.h' \
			! -name '*.gen.c' ! -name '*.gen.h' -print0 \) | sort -z)
	elif [ -f "$p" ]; then
		files+=("$p")
	fi
done

if [ ${#files[@]} -eq 0 ]; then
	echo "check-banned: no C files under: $*"
	exit 0
fi

# The awk program blanks comments (kept across lines), string and char literals, then looks
# for a banned name used as a call: not preceded by an identifier char, '.' or '->' (a member),
# followed by optional space and '('. Portable awk (mawk and gawk).
awk '
BEGIN {
	nb = split("sprintf vsprintf strcpy strcat strncpy strtok atoi atol atoll gets", banned, " ")
	bad = 0
}
FNR == 1 { incomment = 0 }
{
	raw = $0
	out = ""
	n = length(raw)
	i = 1
	while (i <= n) {
		c = substr(raw, i, 1)
		two = substr(raw, i, 2)
		if (incomment) {
			if (two == "*/") { incomment = 0; out = out "  "; i += 2 }
			else { out = out " "; i++ }
			continue
		}
		if (two == "/*") { incomment = 1; out = out "  "; i += 2; continue }
		if (two == "//") break
		if (c == "\"" || c == "\047") {
			q = c
			out = out " "
			i++
			while (i <= n) {
				d = substr(raw, i, 1)
				if (d == "\\") { out = out "  "; i += 2; continue }
				out = out " "
				i++
				if (d == q) break
			}
			continue
		}
		out = out c
		i++
	}
	if (raw ~ /pf-lint: allow-banned/)
		next
	for (k = 1; k <= nb; k++) {
		name = banned[k]
		from = 1
		while ((p = index(substr(out, from), name)) > 0) {
			at = from + p - 1 # absolute column of the match
			before = at > 1 ? substr(out, at - 1, 1) : ""
			before2 = at > 2 ? substr(out, at - 2, 2) : ""
			after = substr(out, at + length(name))
			sub(/^[ \t]*/, "", after)
			if (before !~ /[A-Za-z0-9_.]/ && before2 != "->" && substr(after, 1, 1) == "(") {
				printf "%s:%d: %s() is banned (docs/internals/conventions.md)\n", FILENAME, FNR, name
				bad++
			}
			from = at + length(name)
		}
	}
}
END {
	if (bad) {
		printf "check-banned: %d banned call(s)\n", bad
		exit 1
	}
}
' "${files[@]}" || exit $?
echo "check-banned: ${#files[@]} files clean"
