/* log.c — see pf/log.h. */
#include "pf/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

int pf_log_level_current = PF_LOG_INFO;
static const char *log_ident = "profleet";

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void pf_log_set_level(enum pf_log_level level)
{
	pf_log_level_current = level;
}

int pf_log_parse_level(const char *s)
{
	for (size_t i = 0; i < PF_ARRAY_SIZE(level_names); i++)
		if (s && strcasecmp(s, level_names[i]) == 0)
			return (int)i;
	return -EINVAL;
}

void pf_log_set_ident(const char *ident)
{
	log_ident = ident;
}

static void log_write(enum pf_log_level level, const char *origin, const char *text, size_t n)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
		n--;
	int h = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s: ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, ts.tv_nsec / 1000000,
			 level_names[level < 0 || level > PF_LOG_DEBUG ? PF_LOG_ERROR : level],
			 origin ? origin : log_ident);
	if (h < 0)
		return;
	size_t hl = (size_t)h < sizeof(line) ? (size_t)h : sizeof(line) - 1;
	size_t room = sizeof(line) - hl - 1;
	if (n > room)
		n = room;
	memcpy(line + hl, text, n);
	line[hl + n] = '\n';
	/* One write per line keeps lines whole across threads. */
	ssize_t r = write(STDERR_FILENO, line, hl + n + 1);
	(void)r;
}

void pf_log_emitv(enum pf_log_level level, const char *fmt, va_list ap)
{
	char text[1536];
	int n = vsnprintf(text, sizeof(text), fmt, ap);
	if (n < 0)
		return;
	log_write(level, NULL, text, (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1);
}

void pf_log_emit(enum pf_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pf_log_emitv(level, fmt, ap);
	va_end(ap);
}

void pf_log_emit_raw(enum pf_log_level level, const char *origin, const char *line)
{
	if ((int)level > pf_log_level_current || !line)
		return;
	log_write(level, origin, line, strlen(line));
}
