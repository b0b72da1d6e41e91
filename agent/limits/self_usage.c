/* self_usage.c — see self_usage.h. */
#include "limits/self_usage.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "pf/heap.h"

int agent_self_usage_read(struct agent_self_usage *out)
{
	struct rusage ru;
	memset(out, 0, sizeof(*out));
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return -errno;
	out->cpu_seconds = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			   (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
	uint64_t shared;
	return pf_heap_statm(&out->rss_bytes, &shared); /* rss_bytes stays 0 on failure */
}
