/* dataplane_exporters.h — the data plane's exporter set: the exporters of profiling.exporters
 * (kept while their settings stay, re-created when they change; a replaced one finishes its
 * export in flight on a thread of its own), their health components "exporter/<i>:<type>",
 * the check of a config's exporters, and the submits of encoded profiles and of windows to
 * every exporter. Worker thread, but for dp_exporters_check (loop thread). */
#ifndef AGENT_DATAPLANE_EXPORTERS_H
#define AGENT_DATAPLANE_EXPORTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"
#include "pf/profcfg.h"
#include "pf/profile.h"

struct agent_dataplane;
struct agent_exporter;

/* Builds every exporter of cfg that has no side effect at creation (not the file exporters:
 * they clean their directory, and config.c's own hook checks it). 0, or the error with the
 * key path "profiling.exporters[i]...". */
int dp_exporters_check(struct agent_dataplane *d, const struct pf_profcfg *cfg,
		       struct pf_error *err);
/* Keeps the exporters whose settings did not change from old to cfg, re-creates the others. */
void dp_exporters_apply(struct agent_dataplane *d, const struct pf_profcfg *old,
			const struct pf_profcfg *cfg);
/* Frees every exporter (wait: their exports in flight end first; else left to the exit). */
void dp_exporters_free(struct agent_dataplane *d, bool wait);
void dp_exporters_health(struct agent_dataplane *d);
/* Frees x on a thread of its own (its export in flight may take up to its timeout). */
void dp_retire_exporter(struct agent_dataplane *d, struct agent_exporter *x);
/* Exporters that take OTLP bytes (all but those that take windows). */
size_t dp_bytes_exporters(const struct agent_dataplane *d);
/* One OTLP request to every exporter that takes bytes. */
void dp_submit_all(struct agent_dataplane *d, const uint8_t *data, size_t len,
		   const uint8_t id[16]);
/* The window itself to every exporter that takes windows (pyroscope: pprof per process). */
void dp_submit_window_all(struct agent_dataplane *d, const struct pf_prof_window *w);

#endif
