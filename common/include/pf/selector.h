/* pf/selector.h — label selectors on agent attributes, as the REST API and assignments take
 * them:  `env=prod,team in (a,b),region!=eu,host=~^web-[0-9]+$,arch!~arm`.
 *
 * Grammar (comma = AND; whitespace around tokens ignored; the empty selector matches all):
 *   selector := "" | term ("," term)*
 *   term     := key op value | key ("in" | "notin") "(" value ("," value)* ")"
 *   op       := "=" | "==" | "!=" | "=~" | "!~"
 *   key      := [A-Za-z0-9_.\-/]+        value := bare word, or "double quoted" with \" \\ escapes
 * `k=v` needs the attribute present and equal; `k!=v` matches when absent or different;
 * `=~`/`!~` are POSIX extended regexes matched against the whole value (anchored); a key
 * with `in` must be present with one of the values, `notin` absent or none of them.
 *
 * A compiled selector is immutable and may be shared between threads for matching.
 * Limits: 64 terms, 64 values per `in`, 1024 bytes of source. */
#ifndef PF_SELECTOR_H
#define PF_SELECTOR_H

#include <stdbool.h>
#include <stddef.h>

#include "pf/error.h"

struct pf_selector;

/* Compiles src. NULL with errno set (EINVAL, ENOMEM) and err->msg like
 * "selector: expected operator after 'env' at offset 3" on failure. */
struct pf_selector *pf_selector_compile(const char *src, struct pf_error *err);
void pf_selector_free(struct pf_selector *sel);

/* Attribute lookup supplied by the caller: returns the value of key, or NULL when absent. */
typedef const char *(*pf_selector_lookup_fn)(const char *key, void *ud);
bool pf_selector_match(const struct pf_selector *sel, pf_selector_lookup_fn lookup, void *ud);
/* Canonical text form (terms in source order, normalized spacing) for display. */
const char *pf_selector_source(const struct pf_selector *sel);

#endif
