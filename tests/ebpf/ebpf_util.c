/* ebpf_util.c — see ebpf_util.h. */
#include "ebpf_util.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

struct pf_sampler *ebpf_probe(int *code)
{
	struct pf_error err = {0};
	struct pf_sampler *probe = pf_sampler_new(NULL, &err);
	if (probe)
		return probe;
	int e = errno;
	if (e == EPERM || e == EACCES || e == ENOTSUP || e == ENOSYS || e == EOPNOTSUPP) {
		printf("SKIP: the kernel refuses BPF/perf events here: %s\n", err.msg);
		*code = 77;
	} else {
		fprintf(stderr, "pf_sampler_new: %s\n", err.msg);
		*code = 1;
	}
	return NULL;
}

struct pf_profcfg *ebpf_config(const char *fmt, ...)
{
	char yaml[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(yaml, sizeof(yaml), fmt, ap);
	va_end(ap);
	struct pf_profcfg *cfg = NULL;
	struct pf_error err = {0};
	int rc = pf_profcfg_parse(yaml, strlen(yaml), &cfg, &err);
	if (rc < 0)
		fail_msg("config: %s", err.msg);
	return cfg;
}
