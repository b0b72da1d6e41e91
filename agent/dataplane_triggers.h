/* dataplane_triggers.h — the data plane's automatic triggers. high_cpu (high_cpu.h): on the
 * worker's tick, the CPU of the processes the sampler profiles and of the host; each firing
 * is a capture request to the capture engine; health "trigger/high_cpu". Span triggers
 * (slow_span, error_span; span_receiver.h): the receiver and the sampler's ring of
 * slow_span.lookback_seconds, the snapshot of sampled processes the receiver resolves spans
 * against (refreshed every 200 ms), the queue of span jobs and the profiles cut from the ring
 * once its samples are in; health "triggers/spans". Worker thread, but for
 * dp_spans_check_listen (loop thread). */
#ifndef AGENT_DATAPLANE_TRIGGERS_H
#define AGENT_DATAPLANE_TRIGGERS_H

#include <stdint.h>

#include "pf/error.h"
#include "pf/profcfg.h"

struct agent_dataplane;

/* Starts, reconfigures or stops the high_cpu trigger with the config. */
void dp_high_cpu_apply(struct agent_dataplane *d, const struct pf_profcfg *cfg);
void dp_high_cpu_tick(struct agent_dataplane *d, uint64_t now_ms);

/* The check hook's test of slow_span.listen: the address can be bound, or is the running
 * receiver's. 0 or the error. */
int dp_spans_check_listen(struct agent_dataplane *d, const char *listen, struct pf_error *err);
/* Starts, reconfigures or stops the receiver and the sampler's ring for cfg. */
void dp_spans_apply(struct agent_dataplane *d, const struct pf_profcfg *cfg);
/* Stops the receiver (joins its thread) and drops the jobs not cut yet. */
void dp_spans_stop(struct agent_dataplane *d);
void dp_spans_health(struct agent_dataplane *d);
/* Refreshes the process snapshot, cuts the profiles whose samples are in. Returns the poll
 * timeout it needs (ms), or -1 when nothing waits. */
int dp_spans_run(struct agent_dataplane *d);

#endif
