/* pyroscope.h — the `pyroscope` exporter's payloads: one closed window (pf/profile.h) becomes
 * one push per process, each a gzip'd pprof (proto/codec/pprof_codec.h) POSTed as
 * application/octet-stream to
 *
 *   <endpoint path>/ingest?format=pprof&name=<app>&from=<unix s>&until=<unix s>
 *
 * (Pyroscope's HTTP ingest API, pprof push).
 * <app> is "<service.name>{k=v,...}" percent-encoded: the process's service.name resource
 * attribute (else "unknown_service:<process.executable.name>", OpenTelemetry's fallback, else
 * "unknown_service"), and as labels the low-cardinality resource attributes host.name,
 * process.executable.name, container.id, service.namespace, service.version,
 * service.instance.id and k8s.{namespace.name,pod.name,pod.uid,container.name,node.name} that
 * the process has (host.name from the window when the process lacks it), with '.' in keys
 * written '_' (Pyroscope label names are [A-Za-z0-9_]) and the name syntax's own characters
 * ("{},=") in values written '_'. from is the window start rounded down, until its end
 * rounded up (whole seconds). The pprof keeps the window's sample types, from which Pyroscope
 * names the profile type: a CPU window (samples/count + cpu/nanoseconds) is process_cpu, a
 * wall-clock one (wall/nanoseconds) wall, an off-CPU one (off_cpu/nanoseconds) off_cpu,
 * allocation types memory. Not stateful; no I/O. */
#ifndef AGENT_EXPORT_PYROSCOPE_H
#define AGENT_EXPORT_PYROSCOPE_H

#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"
#include "pf/profile.h"

#define AGENT_PYROSCOPE_CONTENT_TYPE "application/octet-stream"

/* Appends the request target ("<base_path>/ingest?...") for process p of window w to out.
 * 0, -E2BIG/-ENOMEM from out. */
int agent_pyroscope_target(const char *base_path, const struct pf_prof_window *w,
			   const struct pf_prof_process *p, struct pf_buf *out);

/* The application name "<service>{k=v,...}" (not percent-encoded) for p, appended to out. */
int agent_pyroscope_app_name(const struct pf_prof_window *w, const struct pf_prof_process *p,
			     struct pf_buf *out);

#endif
