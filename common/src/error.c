/* error.c — see pf/error.h. */
#include "pf/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int pf_error_set(struct pf_error *err, int code, const char *path, const char *fmt, ...)
{
	if (!err || err->code != 0)
		return code;
	err->code = code;
	snprintf(err->path, sizeof(err->path), "%s", path ? path : "");
	size_t off = 0;
	if (path && *path) {
		int n = snprintf(err->msg, sizeof(err->msg), "%s: ", path);
		off = n > 0 ? pf_min((size_t)n, sizeof(err->msg) - 1) : 0;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg + off, sizeof(err->msg) - off, fmt, ap);
	va_end(ap);
	return code;
}

void *pf_error_oom(struct pf_error *err)
{
	pf_error_set(err, -ENOMEM, "", "out of memory");
	errno = ENOMEM;
	return NULL;
}

void pf_error_clear(struct pf_error *err)
{
	if (err)
		memset(err, 0, sizeof(*err));
}

const char *pf_error_code_name(int code)
{
	switch (code) {
	case 0:
		return "ok";
	case -EINVAL:
		return "invalid_argument";
	case -ENOENT:
		return "not_found";
	case -EEXIST:
		return "already_exists";
	case -ENOMEM:
		return "out_of_memory";
	case -E2BIG:
	case -EMSGSIZE:
		return "too_large";
	case -EACCES:
	case -EPERM:
		return "permission_denied";
	case -EBADMSG:
	case -EPROTO:
		return "malformed";
	case -EBUSY:
	case -EAGAIN:
		return "unavailable";
	case -ETIMEDOUT:
		return "timeout";
	default:
		return "internal";
	}
}
