/* ctl/args.h — profleetctl's command-line parsing: options from tables (long --name VALUE or
 * --name=VALUE, a one-letter alias, repeatable options, "--" ends the options, options and
 * positionals in any order), and the value syntaxes the commands share: durations ("30s",
 * "5m", "1h", "1h30m", "90" = seconds), capture process rules ("key=value" strict,
 * "key=~regexp"), trace ids (32 hex digits) and bounded integers. Errors name the option. */
#ifndef CTL_ARGS_H
#define CTL_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"
#include "pf/profcfg.h"

#define CTL_ARGS_MAX_OPTS 32 /* options of one command, global ones included */
#define CTL_ARGS_MAX_POS 4   /* positional arguments */
#define CTL_ARGS_MAX_LIST 16 /* values of a repeatable option */

enum ctl_opt_kind {
	CTL_OPT_FLAG, /* no value */
	CTL_OPT_STR,  /* one value; given twice, the last wins */
	CTL_OPT_LIST, /* repeatable, up to CTL_ARGS_MAX_LIST values */
};

struct ctl_opt {
	const char *name; /* without the dashes */
	char short_name;  /* 0 for none */
	enum ctl_opt_kind kind;
	const char *metavar; /* "S", "FILE"… for the help */
	const char *help;
};

struct ctl_optval {
	bool set;
	const char *str;
	const char *list[CTL_ARGS_MAX_LIST];
	size_t n_list;
};

struct ctl_args {
	const struct ctl_opt *opts[CTL_ARGS_MAX_OPTS];
	struct ctl_optval val[CTL_ARGS_MAX_OPTS];
	size_t n_opts;
	const char *pos[CTL_ARGS_MAX_POS];
	size_t n_pos;
};

/* Parses argv[0..argc) (argv[0] is the first argument, not the program) against the options of
 * the NULL-terminated list of tables (each ends with an entry whose name is NULL). Values point
 * into argv. -EINVAL with err for an unknown option, a missing value, too many positionals or
 * list values. */
int ctl_args_parse(struct ctl_args *a, const struct ctl_opt *const *tables, int argc,
		   char *const *argv, struct pf_error *err);
/* Value of an option by name: NULL when it was not given (or is not an option of a). */
const struct ctl_optval *ctl_args_get(const struct ctl_args *a, const char *name);
const char *ctl_args_str(const struct ctl_args *a, const char *name);
bool ctl_args_flag(const struct ctl_args *a, const char *name);

/* Durations: one or more <number><unit> with units s, m, h, d (or a bare number of seconds),
 * 1 second .. 10 years. */
int ctl_parse_duration(const char *what, const char *s, uint64_t *seconds, struct pf_error *err);
/* A decimal integer in [min, max]. */
int ctl_parse_int(const char *what, const char *s, int64_t min, int64_t max, int64_t *out,
		  struct pf_error *err);
/* "key=value" (strict) or "key=~regexp"; checked with the config's own filter rules
 * (pf_profcfg_filter_check). The strings of out are allocated: ctl_rule_release frees them. */
int ctl_parse_process_rule(const char *what, const char *s, struct pf_filter *out,
			   struct pf_error *err);
void ctl_rule_release(struct pf_filter *f);
/* 32 hex digits, not all zero. */
int ctl_check_trace_id(const char *what, const char *s, struct pf_error *err);

#endif
