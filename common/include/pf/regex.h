/* pf/regex.h — the one door through which user text reaches glibc regcomp(). Owns the
 * complexity limits of a regex taken from outside (API label selectors `=~`/`!~`, the
 * profiling config's `match: regexp` filters, compiled again by the agent) and nothing else:
 * the compiled regex_t is the caller's, freed with regfree().
 *
 * Why: glibc's regcomp() builds a parse tree and copies the repeated part of every
 * repetition: `x+` is `xx*`, `x{m,n}` is n copies of x. A repetition of a repetition copies
 * the copies, so a 70-byte selector `...\\++++++++++++++++++++++++++++++...` made regcomp
 * allocate over 2 GB (fuzzer find, tests/fuzz/corpus/selector/regress-regcomp-blowup.txt),
 * and with fewer `+` it compiles but matches slowly: `a++++++++++++++++` (17 bytes) took
 * 50 ms to compile and 22 s for one regexec() over 4 KiB.
 * glibc then computes, for every node, the set of nodes reachable without consuming input,
 * which is quadratic in the node count for chains of optional parts such as `(a?){64}`.
 * pf_regex_check() therefore scans the pattern the way glibc's ERE parser reads it and bounds
 * what regcomp will build before regcomp sees the pattern:
 *
 *   PF_REGEX_MAX_LEN         256 bytes of pattern. Process-name, path and label filters are
 *                            short; the bound keeps every count below small.
 *   no stacked quantifiers   `*`, `+`, `?` or `{..}` directly after another quantifier (`a**`,
 *                            `a+?`, `a{2}{3}`) is refused: it is the exponential case above and
 *                            never needed (POSIX leaves it undefined; `(a+)?` says the same).
 *   PF_REGEX_MAX_REPEAT      64 for m and n of `{m}`, `{m,}`, `{m,n}` (each copy is built).
 *   PF_REGEX_MAX_PRODUCT     256 for the product of the copy counts of nested repetitions
 *                            (`((a{8}){8}){8}` is 512): nesting multiplies the copies.
 *                            A repetition counts as the copies glibc builds: `*` `?` 1, `+` 2,
 *                            `{m}` m, `{m,}` m+1, `{m,n}` n.
 *   PF_REGEX_MAX_NODES       1024 for an upper estimate of the nodes regcomp builds (each
 *                            literal, bracket, anchor, `|` and group counted, times the copies of
 *                            every repetition around it, times 1 + the anchor conditions). It
 *                            bounds breadth (`a{64}b{64}...`), which the product does not, and
 *                            with it the quadratic closures. A differential run of 600000 random
 *                            patterns never saw glibc build more than 921 nodes for one that
 *                            passed (UTF-8 locale; 717 in the C locale).
 *   PF_REGEX_MAX_QUANTIFIERS 32 quantifiers, PF_REGEX_MAX_GROUPS 32 groups and
 *   PF_REGEX_MAX_DEPTH       8 levels of nested groups: realistic filters use a handful; the
 *                            caps keep glibc's recursive parser shallow and the scan simple.
 *   no repeated empty match  a group that can match the empty string may not be copied (`+`,
 *                            `{m,}` with m >= 1, `{m,n}` with n > 1): `(a?){64,}` keeps the counts
 *                            above but is a chain of 260 optional nodes inside a loop, for
 *                            which glibc's closure computation takes 7 ms (80 ms for
 *                            `(a?b?c?d?e?){64,}`). `*`, `?`, `{0,1}` on such a group stay
 *                            allowed; `(a?){2,5}` is `a{0,5}`.
 *   PF_REGEX_MAX_ANCHORS     4 anchor conditions: `^ $ \< \> \` \'` count 1, `\b \B` 2 (word
 *                            start or end), times the copies of repetitions around them. glibc
 *                            copies the nodes an anchor reaches without consuming input once per
 *                            combination of conditions, and they compound: `\b` 40 times before
 *                            `(a){0,64}` built 29000 nodes and 400 MB, `(\b){64}` 12 GB. So an
 *                            anchor also multiplies the node estimate above (nodes times 1 +
 *                            conditions), and a group holding one may not be repeated or looped
 *                            (`(\ba)+`, `(x\b)*`; `?` is fine): `((a{0,64}\b)*b{0,64}\B)*` took
 *                            8 s. `^(a|b)$` and `\bword\b` are well within.
 *   no back-references       `\1`..`\9` are a glibc extension to ERE that switches regexec() to
 *                            backtracking (exponential time per match); refused.
 *
 * Measured (tests/unit/common/test_regex.c prints the figures; 2-core machine under load): the
 * worst patterns found within these limits, by hand and by random searches over nested
 * repetitions, alternations, classes and anchors, compile in under 2 ms with a peak under
 * 1.5 MB (C and UTF-8 locales); without the empty-match rule,
 * `((a{0,32}|b{0,32}|c{0,32}|d{0,32}){0,8})*` took 215 ms. regexec() time is another matter:
 * glibc retries the match from every start position, so one search over a 4 KiB value costs
 * tens of ms even for `[a-z]+-[0-9]+` against 4096 'a', up to a few hundred ms for the worst
 * allowed patterns; it grows with the square of the value's length, which the callers bound
 * (attribute values), more than with the pattern.
 * A pattern within the limits can still be a syntax error; regcomp reports those in its words.
 *
 * Syntax as glibc reads POSIX extended regexes (REG_EXTENDED): `\c` is the literal c except
 * the GNU escapes `\w \W \s \S` (classes), `\b \B \< \> \` \'` (anchors) and `\1`..`\9`;
 * `[...]` is one bracket expression in which `\` is literal, a `]` first (after an optional
 * `^`) is literal, and `[:class:]`, `[.coll.]`, `[=equiv=]` may contain `]`; a `)` without
 * its `(` is literal; every unescaped `{` outside brackets starts an interval, whose comma may
 * also be written `\,` and whose digits may include `\0`.
 *
 * Error messages name the problem and the 0-based byte offset in the pattern:
 *   "pattern longer than 256 bytes", "stacked quantifier at byte 12",
 *   "repetition count over 64 at byte 1", "nested repetitions make 512 copies at byte 11
 *   (limit 256)", "repeated group at byte 4 can match the empty string",
 *   "pattern expands to over 1024 nodes at byte 40", "more than 32 quantifiers at byte 70",
 *   "more than 32 groups at byte 90", "groups nested deeper than 8 at byte 8",
 *   "more than 4 anchors at byte 9", "pattern expands to over 1024 nodes with its anchors at
 *   byte 30", "repeated group at byte 5 contains an anchor", "back-reference at byte 4", or
 * regerror()'s text ("Unmatched ( or \\("). err->path is left empty: callers prefix their own key
 * path or context. */
#ifndef PF_REGEX_H
#define PF_REGEX_H

#include <regex.h>

#include "pf/error.h"

#define PF_REGEX_MAX_LEN 256
#define PF_REGEX_MAX_REPEAT 64
#define PF_REGEX_MAX_PRODUCT 256
#define PF_REGEX_MAX_NODES 1024
#define PF_REGEX_MAX_QUANTIFIERS 32
#define PF_REGEX_MAX_GROUPS 32
#define PF_REGEX_MAX_DEPTH 8
#define PF_REGEX_MAX_ANCHORS 4

/* Checks pattern (a POSIX extended regex) against the limits above without compiling it.
 * 0 when within them (it may still be a syntax error regcomp refuses), -EINVAL with err set
 * otherwise (also for a NULL pattern). */
int pf_regex_check(const char *pattern, struct pf_error *err);

/* pf_regex_check(), then regcomp(re, pattern, cflags). cflags must include REG_EXTENDED
 * (the check reads ERE syntax); REG_NOSUB, REG_ICASE, REG_NEWLINE may be added. 0 with *re
 * compiled (the caller regfree()s it), -EINVAL with err set to the limit's message or to
 * regerror()'s text, -ENOMEM when regcomp ran out of memory (err "out of memory"). *re needs
 * no regfree() after a failure. */
int pf_regex_compile(regex_t *re, const char *pattern, int cflags, struct pf_error *err);

#endif
