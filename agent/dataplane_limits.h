/* dataplane_limits.h — the data plane's limits: the overhead guard (guard.h) fed on the
 * worker's tick with the agent's CPU, BPF run time and RSS, the frequency it lets the sampler
 * run at, the effective config's runtime note while it throttles, the budget and the profile
 * rate limit (ratelimit.h) a config sets, and the "guard" health component. Worker thread,
 * but for agent_dataplane_effective_note (dataplane.h; any thread). */
#ifndef AGENT_DATAPLANE_LIMITS_H
#define AGENT_DATAPLANE_LIMITS_H

#include <stdint.h>

#include "limits/guard.h"
#include "pf/profcfg.h"

struct agent_dataplane;

/* The guard's budget from cfg's limits. */
void dp_guard_budget(const struct agent_dataplane *d, const struct pf_profcfg *cfg,
		     struct agent_guard_budget *b);
/* Passes cfg's budget to the guard and limits.max_profiles_per_minute to the rate limit. */
void dp_limits_apply(struct agent_dataplane *d, const struct pf_profcfg *cfg);
/* cfg with the frequency the guard allows: what the sampler is given (a shallow copy). */
struct pf_profcfg dp_guarded(const struct agent_dataplane *d, const struct pf_profcfg *cfg);
/* Measures, updates the guard, gives the sampler the frequency it allows, refreshes health. */
void dp_guard_tick(struct agent_dataplane *d, uint64_t now_ms);
void dp_guard_health(struct agent_dataplane *d);
/* The effective config's note follows the guard's frequency; wakes the loop when it changes. */
void dp_guard_note(struct agent_dataplane *d);

#endif
