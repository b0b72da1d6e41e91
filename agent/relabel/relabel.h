/* relabel.h — the agent's relabel rules (profiling.relabel, profiling.redact_secrets) and
 * their application to a profile window before it leaves the agent.
 *
 * Owns: a compiled rule set (the built-in secret redaction first when redact_secrets, then
 * the config's rules in order), the process-wide current set that agent_encode_submit (the one
 * way of every export and capture upload) applies, and the counters of what the rules did.
 *
 * What a rule does to one process's resource attributes (keys named profleet.* are the
 * agent's own, for the controller's routing, and are never read or changed):
 *   redaction  every value: each part that looks like a secret (token=, password=, passwd=,
 *              secret=, api_key=, access_key= with its value; "Bearer <credential>"; an
 *              e-mail address) becomes [REDACTED]; sample labels' string values too;
 *   replace    source's value matches regex (whole value): target = replacement with $0..$9
 *              expanded; an empty result removes target;
 *   drop/keep  the process's profile is left out when source matches (drop) / does not (keep;
 *              a missing source is "", as in Prometheus);
 *   labeldrop  every attribute whose key matches regex is removed.
 * The changed window's strings and arrays come from its arena: nothing is freed in it.
 *
 * Thread-safe: the current set is swapped under a lock and reference-counted, so the data
 * plane and the capture runner may apply it while a config commit replaces it. */
#ifndef AGENT_RELABEL_H
#define AGENT_RELABEL_H

#include <stdint.h>

#include "pf/error.h"
#include "pf/profcfg.h"
#include "pf/profile.h"

struct agent_relabel;
struct agent_config_hook;

struct agent_relabel_stats {
	uint64_t redacted;	   /* values the built-in redaction changed */
	uint64_t replaced;	   /* attributes a replace rule wrote */
	uint64_t attrs_dropped;    /* attributes labeldrop (or an empty replace) removed */
	uint64_t profiles_dropped; /* processes' profiles drop/keep left out */
};

/* Compiles cfg's rules: NULL with err (key path of the rule) on a regex that does not compile
 * or out of memory. A config without rules and without redaction gives an empty set. */
struct agent_relabel *agent_relabel_new(const struct pf_profcfg *cfg, struct pf_error *err);
void agent_relabel_free(struct agent_relabel *r);

/* Applies r to every process of w (attributes rewritten, processes dropped). 0 or -ENOMEM
 * (w then unchanged or partly relabeled: the caller does not export it). */
int agent_relabel_window(struct agent_relabel *r, struct pf_prof_window *w);

/* The process-wide set: agent_relabel_apply() relabels w with it (0 when none is set). */
int agent_relabel_apply(struct pf_prof_window *w);
/* The config hook that compiles (check) and installs (commit) the set of each config. */
void agent_relabel_hook(struct agent_config_hook *out);
/* Drops the current set (at exit). */
void agent_relabel_reset(void);

/* What every set has done since the start (cumulative). */
void agent_relabel_stats(struct agent_relabel_stats *out);

#endif
