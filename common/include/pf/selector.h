/* pf/selector.h — label selectors on agent attributes, as the REST API and assignments take
 * them:  `env=prod,team in (a,b),region!=eu,host=~^web-[0-9]+$,arch!~arm`.
 *
 * Grammar (comma = AND; whitespace around tokens ignored; the empty selector matches all):
 *   selector := "" | term ("," term)*
 *   term     := key op value | key ("in" | "notin") "(" value ("," value)* ")"
 *   op       := "=" | "==" | "!=" | "=~" | "!~"
 *   key      := [A-Za-z0-9_.\-/]+        value := bare word, or "double quoted" with \" \\ escapes
 *   bare word := 1* printable non-space byte other than , ( ) "   (so `k=` alone is an error;
 *               write `k=""` for the empty value; a `{m,n}` regex must be quoted)
 * `k=v` needs the attribute present and equal; `k!=v` matches when absent or different;
 * `=~`/`!~` are POSIX extended regexes (regcomp REG_EXTENDED) matched against the whole value
 * (anchored: `host=~web` does not match "web-1"); `=~` needs the attribute present and
 * matching, `!~` matches when absent or not matching; a key with `in` must be present with
 * one of the values, `notin` absent or none of them. "in"/"notin" need a space after the key.
 *
 * Errors are "selector: expected <what> at offset <byte offset>, found <'c' | end of input>",
 * or name the limit, the unterminated quote's start, or regerror()'s text for a bad regex.
 *
 * A compiled selector is immutable and may be shared between threads for matching.
 * Limits: 64 terms, 64 values per `in`, 1024 bytes of source. */
#ifndef PF_SELECTOR_H
#define PF_SELECTOR_H

#include <stdbool.h>
#include <stddef.h>

#include "pf/error.h"

#define PF_SELECTOR_MAX_TERMS 64
#define PF_SELECTOR_MAX_VALUES 64
#define PF_SELECTOR_MAX_SOURCE 1024

struct pf_selector;

/* Compiles src. NULL with errno set (EINVAL, ENOMEM) and err->msg like
 * "selector: expected an operator (=, ==, !=, =~, !~, in, notin) after 'env' at offset 3,
 * found end of input" on failure (err->path stays ""). */
struct pf_selector *pf_selector_compile(const char *src, struct pf_error *err);
void pf_selector_free(struct pf_selector *sel);

/* Attribute lookup supplied by the caller: returns the value of key, or NULL when absent. */
typedef const char *(*pf_selector_lookup_fn)(const char *key, void *ud);
/* True when every term matches (the empty selector matches everything; a NULL sel nothing). */
bool pf_selector_match(const struct pf_selector *sel, pf_selector_lookup_fn lookup, void *ud);
/* Canonical text form (terms in source order, normalized spacing) for display, owned by sel:
 * `env=prod,team in (a,b),host=~"a{1,3}"` (`==` shows as `=`; values are quoted only when
 * they must be). Compiling it again gives an equivalent selector. */
const char *pf_selector_source(const struct pf_selector *sel);

#endif
