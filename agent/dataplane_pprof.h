/* dataplane_pprof.h — the data plane's pprof sources (profiling.pprof.targets): the sources
 * object, the target list of the applied config, the health components "pprof/<i>", the
 * scrapes a trigger starts, and the export of every scraped profile as a window. Worker
 * thread. */
#ifndef AGENT_DATAPLANE_PPROF_H
#define AGENT_DATAPLANE_PPROF_H

#include "pf/profcfg.h"

struct agent_dataplane;

/* Creates the sources (without targets: the first config brings them). */
void dp_pprof_start(struct agent_dataplane *d);
/* Swaps in cfg's targets (none while profiling is disabled) and their health components. */
void dp_pprof_apply(struct agent_dataplane *d, const struct pf_profcfg *cfg);
void dp_pprof_health(struct agent_dataplane *d);
/* Exports every window the scrapes produced. */
void dp_pprof_drain(struct agent_dataplane *d);
/* Scrapes every target with interval_seconds 0 now (a triggered capture starts). */
void dp_pprof_trigger(struct agent_dataplane *d);

#endif
