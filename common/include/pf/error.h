/* pf/error.h — the human side of an error. Functions return negative errno; when the caller
 * wants the detail it passes a struct pf_error, which receives the key path of the offending
 * input and a message (git's strbuf *err habit). The API turns it into
 * {"error":{"code","message"}}, the agent into its OpAMP FAILED message.
 *
 *   struct pf_error err = {0};
 *   if (pf_profcfg_parse(yaml, len, &cfg, &err) < 0)
 *           puts(err.msg);   // "profiling.sampling.frequency_hz: must be 1..1000, got 5000"
 *
 * A NULL struct pf_error * is always allowed and means "don't care". */
#ifndef PF_ERROR_H
#define PF_ERROR_H

#include <stddef.h>
#include "pf/compiler.h"

struct pf_error {
	int code;       /* negative errno, 0 when unset */
	char path[256]; /* key path such as "profiling.exporters[1].endpoint", "" when none */
	char msg[768];  /* "path: detail", or just "detail" when there is no path */
};

/* Records the error (first one wins: an already-set error is kept) and returns `code`, so
 * `return pf_error_set(err, -EINVAL, "a.b", "must be 1..10, got %d", v);` reads naturally. */
int pf_error_set(struct pf_error *err, int code, const char *path, const char *fmt, ...)
	PF_PRINTF(4, 5);
/* A constructor's failed allocation: records "out of memory" (-ENOMEM, empty path), sets errno
 * to ENOMEM and returns NULL, so `return pf_error_oom(err);` ends the constructor. */
void *pf_error_oom(struct pf_error *err);
void pf_error_clear(struct pf_error *err);
/* Short machine name for an errno code: "invalid_argument", "not_found", ... */
const char *pf_error_code_name(int code);

#endif
