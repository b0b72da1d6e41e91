/* pf/log.h — the one log facade. Every part logs through it; the level is checked before any
 * formatting happens (the macros below), so a disabled debug line costs one compare.
 * Library layers return errors rather than log; binaries route lws and libbpf logs in here
 * with pf_log_emit_raw().
 *
 * Output: one line per record on stderr, "2026-11-21T10:00:00.123Z level component: message".
 * Owns: the global level and the output stream (thread-safe: one write(2) per line). */
#ifndef PF_LOG_H
#define PF_LOG_H

#include <stdarg.h>
#include "pf/compiler.h"

enum pf_log_level {
	PF_LOG_ERROR = 0,
	PF_LOG_WARN = 1,
	PF_LOG_INFO = 2,
	PF_LOG_DEBUG = 3,
};

extern int pf_log_level_current;

/* Sets the level; "error", "warn", "info", "debug" parse with pf_log_parse_level()
 * (returns -EINVAL on anything else). */
void pf_log_set_level(enum pf_log_level level);
int pf_log_parse_level(const char *s);
/* Name used as the component prefix of every line ("controller", "agent"). */
void pf_log_set_ident(const char *ident);

void pf_log_emit(enum pf_log_level level, const char *fmt, ...) PF_PRINTF(2, 3);
void pf_log_emitv(enum pf_log_level level, const char *fmt, va_list ap);
/* Emits a line that already has its text (a library's own log line); strips a trailing newline. */
void pf_log_emit_raw(enum pf_log_level level, const char *origin, const char *line);

#define pf_log(lvl, ...)                                                                           \
	do {                                                                                       \
		if ((int)(lvl) <= pf_log_level_current)                                            \
			pf_log_emit((lvl), __VA_ARGS__);                                           \
	} while (0)
#define pf_log_error(...) pf_log(PF_LOG_ERROR, __VA_ARGS__)
#define pf_log_warn(...) pf_log(PF_LOG_WARN, __VA_ARGS__)
#define pf_log_info(...) pf_log(PF_LOG_INFO, __VA_ARGS__)
#define pf_log_debug(...) pf_log(PF_LOG_DEBUG, __VA_ARGS__)

#endif
