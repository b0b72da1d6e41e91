/* high_cpu.h — the high_cpu trigger (profiling.triggers.high_cpu): when a profiled process, or
 * the host as a whole, stays over threshold_percent for sustain_seconds, it fires, and the
 * caller captures that process (for the host rule: the busiest profiled processes) for
 * duration_seconds at frequency_hz.
 *
 * Owns the CPU readings and one small state machine per watched process and one for the host:
 *
 *   process CPU  = utime + stime of /proc/PID/stat, delta over wall time, in percent of one
 *                  CPU (top's %CPU: a process busy on one CPU is at 100 %, one busy on two
 *                  CPUs at 200 %, so threshold_percent 1..100 compares to the CPUs it keeps
 *                  busy, whatever the host's size)
 *   host CPU     = busy / total jiffies of the "cpu" line of /proc/stat, percent of all CPUs
 *                  (busy = everything but idle and iowait)
 *
 *   quiet --(a reading over the threshold)--> above since T --(below)--> quiet
 *   above since T, now - T >= sustain, now >= quiet_until --> FIRE; the measured CPU is the
 *       mean since T; quiet_until = now + duration_seconds + cooldown_seconds (the cooldown
 *       counts from the end of the capture); the state goes back to quiet.
 *   The host rule fires the same way and names the AGENT_HIGH_CPU_HOST_TOP busiest watched
 *   processes of the last reading that are out of their own cooldown (each then starts its
 *   cooldown); when none is busy, the firing only counts (stats.host_fired_idle).
 *
 * Bounds and cost: at most AGENT_HIGH_CPU_MAX_PROCS processes are watched (the first ones of
 * the caller's list; the others are counted in stats.untracked, the host rule
 * still sees their load); at most one update per AGENT_HIGH_CPU_INTERVAL_MS (earlier calls
 * return at once), each reading /proc/stat and /proc/PID/stat of the watched processes — but a
 * process under half the threshold at its last reading is read again only after
 * AGENT_HIGH_CPU_IDLE_INTERVAL_MS (most processes are idle; a /proc/PID/stat read costs 7-20
 * us). When such a process is over the threshold across that longer interval, its sustain
 * time counts from that reading. The CPU time an update takes is in stats (last_update_ns).
 * Readings come through a reader (injectable for tests); the default reads /proc. Not
 * thread-safe. */
#ifndef AGENT_HIGH_CPU_H
#define AGENT_HIGH_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_HIGH_CPU_MAX_PROCS 256
#define AGENT_HIGH_CPU_INTERVAL_MS 1000
#define AGENT_HIGH_CPU_IDLE_INTERVAL_MS 5000
#define AGENT_HIGH_CPU_HOST_TOP 3

struct agent_high_cpu;

struct agent_high_cpu_rule {
	uint32_t threshold_percent; /* 1..100 */
	uint32_t sustain_seconds;
	uint32_t duration_seconds; /* of the capture a firing starts */
	uint32_t cooldown_seconds;
};

struct agent_high_cpu_reader {
	/* Cumulative CPU time (user + system) of pid in ns: 0, -ESRCH/-ENOENT when gone. */
	int (*proc_cpu)(void *ctx, uint32_t pid, uint64_t *cpu_ns);
	/* Cumulative host busy and total time (any one unit): 0 or -errno. */
	int (*host_cpu)(void *ctx, uint64_t *busy, uint64_t *total);
	void *ctx;
};

struct agent_high_cpu_fire {
	uint32_t pid;
	double cpu_percent;  /* the process: mean since it went over (host firing: last reading) */
	bool host;	     /* fired by the host rule */
	double host_percent; /* host rule: the host's mean since it went over */
};

struct agent_high_cpu_stats {
	size_t tracked, untracked; /* watched processes; processes over the bound */
	size_t over;		   /* watched processes over the threshold at the last reading */
	double host_percent;	   /* last reading, < 0 before the second */
	uint64_t updates;
	uint64_t reads;		   /* /proc/PID/stat readings (process CPU) */
	uint64_t fired;		   /* firings of the process rule */
	uint64_t host_fired;	   /* firings of the host rule */
	uint64_t host_fired_procs; /* processes they named */
	uint64_t host_fired_idle;  /* host firings with no busy watched process */
	uint64_t held, host_held;  /* evaluations where a rule was met during its quiet time */
	uint64_t last_update_ns;   /* CPU time (thread) the last update took */
	uint32_t last_pid;	   /* last firing, 0 = none */
	double last_percent;
};

/* reader NULL: /proc. NULL + errno (ENOMEM). */
struct agent_high_cpu *agent_high_cpu_new(const struct agent_high_cpu_rule *rule,
					  const struct agent_high_cpu_reader *reader);
void agent_high_cpu_free(struct agent_high_cpu *h);
/* A changed rule keeps the readings and cooldowns; a process over the threshold starts over.
 * The same rule again changes nothing. */
void agent_high_cpu_set_rule(struct agent_high_cpu *h, const struct agent_high_cpu_rule *rule);
/* One evaluation at now_ns (CLOCK_MONOTONIC) over the profiled processes pids[0..n): reads
 * them and the host, steps the state machines, writes the firings (at most cap) to out and
 * returns their number. A rule met once out is full does not fire and stays armed for the
 * next evaluation (no firing is lost). Processes missing from pids are forgotten (their
 * cooldown too). */
size_t agent_high_cpu_update(struct agent_high_cpu *h, uint64_t now_ns, const uint32_t *pids,
			     size_t n, struct agent_high_cpu_fire *out, size_t cap);
void agent_high_cpu_stats(const struct agent_high_cpu *h, struct agent_high_cpu_stats *out);

/* Parsers of the /proc reader, exported for tests. utime and stime (clock ticks) of a
 * /proc/PID/stat line (the comm field may hold spaces and parentheses): 0 or -EINVAL. */
int agent_high_cpu_parse_stat(const char *text, uint64_t *utime, uint64_t *stime);
/* busy and total jiffies of the first ("cpu ") line of /proc/stat: 0 or -EINVAL. */
int agent_high_cpu_parse_host(const char *text, uint64_t *busy, uint64_t *total);

#endif
