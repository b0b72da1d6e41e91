/* high-cpu-bench — the cost of the high_cpu trigger's evaluation on this host's real /proc.
 *
 *   high-cpu-bench [ROUNDS]   (default 30)
 *
 * Watches every process of /proc (up to the trigger's bound of AGENT_HIGH_CPU_MAX_PROCS) with
 * the default /proc reader and runs ROUNDS evaluations one simulated second apart, so that the
 * idle back-off (AGENT_HIGH_CPU_IDLE_INTERVAL_MS) works as in the agent. Prints the mean time
 * per evaluation, the /proc/PID/stat reads per evaluation and the cost in percent of one CPU at
 * one evaluation per second. The evaluations themselves run back to back (no sleeping). */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "triggers/high_cpu.h"

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 30;
	if (rounds < 2 || rounds > 100000) {
		fprintf(stderr, "usage: high-cpu-bench [ROUNDS 2..100000]\n");
		return 2;
	}
	static uint32_t pids[AGENT_HIGH_CPU_MAX_PROCS];
	size_t n = 0;
	DIR *d = opendir("/proc");
	if (!d) {
		perror("/proc");
		return 1;
	}
	struct dirent *e;
	while ((e = readdir(d)) && n < AGENT_HIGH_CPU_MAX_PROCS) {
		char *end;
		unsigned long pid = strtoul(e->d_name, &end, 10);
		if (*end == '\0' && pid > 0 && pid <= UINT32_MAX)
			pids[n++] = (uint32_t)pid;
	}
	closedir(d);
	struct agent_high_cpu_rule r = {.threshold_percent = 80,
					.sustain_seconds = 10,
					.duration_seconds = 30,
					.cooldown_seconds = 300};
	struct agent_high_cpu *h = agent_high_cpu_new(&r, NULL);
	if (!h) {
		perror("agent_high_cpu_new");
		return 1;
	}
	struct agent_high_cpu_fire fire[8];
	struct agent_high_cpu_stats st;
	uint64_t t = 1000000000ULL, total_ns = 0, reads0 = 0;
	for (long i = 0; i < rounds; i++) {
		t += 1000000000ULL;
		agent_high_cpu_update(h, t, pids, n, fire, 8);
		agent_high_cpu_stats(h, &st);
		if (i == 0) { /* the baseline round reads everything: not counted */
			reads0 = st.reads;
			continue;
		}
		total_ns += st.last_update_ns;
	}
	double mean_us = (double)total_ns / (double)(rounds - 1) / 1000.0;
	printf("processes %zu (watched %zu), rounds %ld: %.1f us per evaluation, %.1f "
	       "/proc/PID/stat reads per evaluation, %.3f%% of one CPU at 1/s\n",
	       n, st.tracked, rounds - 1, mean_us,
	       (double)(st.reads - reads0) / (double)(rounds - 1), mean_us / 1e4);
	agent_high_cpu_free(h);
	return 0;
}
