/* self_usage.h — the agent process's own CPU time and resident memory, read by the overhead
 * guard's glue and shown by the metrics endpoint. */
#ifndef AGENT_SELF_USAGE_H
#define AGENT_SELF_USAGE_H

#include <stdint.h>

/* The process's own resource use. */
struct agent_self_usage {
	double cpu_seconds; /* user + system, all threads (getrusage RUSAGE_SELF) */
	uint64_t rss_bytes; /* resident set (/proc/self/statm), 0 when unknown */
};
/* 0 or -errno (fields left 0). */
int agent_self_usage_read(struct agent_self_usage *out);

#endif
