/* ebpf_util.c — see ebpf_util.h. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ebpf_util.h" /* after cmocka.h: ebpf_main */

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

int ebpf_main(const struct CMUnitTest *tests, size_t n, int (*build)(void), const char *dir)
{
	int code;
	struct pf_sampler *probe = ebpf_probe(&code);
	if (!probe)
		return code;
	pf_sampler_free(probe);
	if (build() < 0) {
		fprintf(stderr, "cannot build the workload with cc\n");
		return 1;
	}
	int rc = _cmocka_run_group_tests("tests", tests, n, NULL, NULL);
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		rc = rc ? rc : 1;
	return rc;
}

bool ebpf_stack_has(const struct pf_prof_process *p, const struct pf_prof_stack *st,
		    const char *fn)
{
	for (uint32_t i = 0; i < st->n_frames; i++) {
		const struct pf_prof_frame *f = &p->frames[st->frames[i]];
		if (f->function && !strcmp(f->function, fn))
			return true;
	}
	return false;
}

uint64_t ebpf_proc_cpu_ns(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	FILE *fp = fopen(path, "r");
	if (!fp)
		return 0;
	unsigned long long ns = 0;
	if (fscanf(fp, "%llu", &ns) != 1)
		ns = 0;
	fclose(fp);
	return ns;
}
