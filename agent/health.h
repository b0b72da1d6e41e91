/* health.h — the component registry behind the agent's OpAMP ComponentHealth.
 *
 * Owns a list of named components ("config", "opamp", later "sampler", "exporter/0"...), each
 * with healthy / status / last_error / start time / status time. agent_health_build() turns it
 * into the tree reported in AgentToServer.health: the agent is the root (healthy when every
 * component is; status "running" or "degraded: a, b"; last_error from the first unhealthy
 * component) and each component is a child in component_health_map.
 *
 * Change detection: agent_health_generation() grows on every real change (setting the same
 * values again changes nothing); agent_health_state_generation() on every change but one of
 * a status's figures alone ("samples 10" -> "samples 12": agent_health_same_words). The
 * OpAMP session reports a state change at once (the notify hook, called on state changes
 * only, tells its loop from the thread that made the change) and figures on a slower beat,
 * so that counters in status lines do not make a message a second.
 *
 * Thread-safe (a mutex): components living on worker threads may report from there. */
#ifndef AGENT_HEALTH_H
#define AGENT_HEALTH_H

#include <stdbool.h>
#include <stdint.h>

#include "opamp_codec.h"

#define AGENT_HEALTH_MAX_COMPONENTS 96 /* config, opamp, sampler, symbolizer, 16 exporters, 64 pprof targets */

struct agent_health;

/* start_unix_nano: the agent's start time (root start_time_unix_nano). */
struct agent_health *agent_health_new(uint64_t start_unix_nano);
void agent_health_free(struct agent_health *h);

/* Registers a component (healthy, status "starting"); registering an existing name is a
 * no-op. 0, -ENOSPC past AGENT_HEALTH_MAX_COMPONENTS, -ENOMEM. */
int agent_health_register(struct agent_health *h, const char *name);
/* Updates a component; last_error NULL or "" = none. -ENOENT when not registered. */
int agent_health_set(struct agent_health *h, const char *name, bool healthy, const char *status,
		     const char *last_error);
int agent_health_unregister(struct agent_health *h, const char *name);

/* fn(ctx) is called after every state change (not one of figures alone), outside the lock,
 * on the changing thread (NULL: none). Set it before other threads report. */
void agent_health_set_notify(struct agent_health *h, void (*fn)(void *ctx), void *ctx);

/* Builds the tree into *out (heap strings and children; release with
 * agent_health_tree_release()). 0 or -ENOMEM. */
int agent_health_build(struct agent_health *h, struct pf_health *out);
void agent_health_tree_release(struct pf_health *t);
uint64_t agent_health_generation(struct agent_health *h);
uint64_t agent_health_state_generation(struct agent_health *h);
/* Whether two statuses differ in their figures only (digits, "0.25"): NULL is "". */
bool agent_health_same_words(const char *a, const char *b);

/* Current time in Unix nanoseconds (CLOCK_REALTIME). */
uint64_t agent_now_unix_nano(void);

#endif
