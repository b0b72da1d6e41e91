/* high_cpu.c — see high_cpu.h. */
#include "triggers/high_cpu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S 1000000000ULL
#define INTERVAL_NS ((uint64_t)AGENT_HIGH_CPU_INTERVAL_MS * 1000000ULL)
#define EARLY_NS (50ULL * 1000000ULL) /* a timer a little early still counts */
#define IDLE_NS ((uint64_t)AGENT_HIGH_CPU_IDLE_INTERVAL_MS * 1000000ULL)

/* One machine: a process, or the host. */
struct hc_state {
	uint64_t t, cpu; /* last reading (cpu: ns for a process, host busy units) */
	uint64_t total;	 /* host: total units of the last reading */
	uint64_t above_t, above_cpu, above_total; /* when it went over (0 = not over) */
	uint64_t quiet_until;
	double pct; /* last reading's percent, < 0 before the second reading */
};

struct hc_proc {
	uint32_t pid;
	struct hc_state s;
};

struct agent_high_cpu {
	struct agent_high_cpu_rule rule;
	struct agent_high_cpu_reader rd;
	long clk_tck;		      /* /proc reader */
	struct hc_proc *procs, *next; /* sorted by pid */
	size_t n_procs;
	uint32_t *sorted; /* scratch: the caller's pids, sorted */
	struct hc_state host;
	bool host_read;
	uint64_t last_ns;
	struct agent_high_cpu_stats st;
};

/* ---- /proc reader -------------------------------------------------------------------------- */

static int read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, cap - 1);
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	buf[n] = '\0';
	return 0;
}

int agent_high_cpu_parse_stat(const char *text, uint64_t *utime, uint64_t *stime)
{
	const char *p = strrchr(text, ')');
	if (!p)
		return -EINVAL;
	p++;
	/* after the comm: state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	 * cmajflt utime(14) stime(15) */
	for (int field = 3; field <= 13; field++) {
		while (*p == ' ')
			p++;
		if (!*p)
			return -EINVAL;
		while (*p && *p != ' ')
			p++;
	}
	char *end;
	errno = 0;
	unsigned long long u = strtoull(p, &end, 10);
	if (end == p || errno)
		return -EINVAL;
	p = end;
	unsigned long long s = strtoull(p, &end, 10);
	if (end == p || errno || (*end != ' ' && *end != '\n' && *end))
		return -EINVAL;
	*utime = u;
	*stime = s;
	return 0;
}

int agent_high_cpu_parse_host(const char *text, uint64_t *busy, uint64_t *total)
{
	if (strncmp(text, "cpu ", 4) != 0)
		return -EINVAL;
	const char *p = text + 4;
	uint64_t v[8] = {0}; /* user nice system idle iowait irq softirq steal */
	int n = 0;
	for (; n < 8; n++) {
		char *end;
		errno = 0;
		unsigned long long x = strtoull(p, &end, 10);
		if (end == p || errno)
			break;
		v[n] = x;
		p = end;
		if (*p == '\n' || !*p) {
			n++;
			break;
		}
	}
	if (n < 4) /* user nice system idle at least (guest time is inside user) */
		return -EINVAL;
	uint64_t t = 0;
	for (int i = 0; i < 8; i++)
		t += v[i];
	*total = t;
	*busy = t - v[3] - v[4];
	return 0;
}

static int proc_cpu(void *ctx, uint32_t pid, uint64_t *cpu_ns)
{
	struct agent_high_cpu *h = ctx;
	char path[64], buf[1024];
	uint64_t u, s;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	int rc = read_small(path, buf, sizeof(buf));
	if (rc < 0)
		return rc;
	if (agent_high_cpu_parse_stat(buf, &u, &s) < 0)
		return -EINVAL;
	*cpu_ns = (u + s) * (NS_PER_S / (uint64_t)h->clk_tck);
	return 0;
}

static int host_cpu(void *ctx, uint64_t *busy, uint64_t *total)
{
	(void)ctx;
	char buf[512]; /* the first line is well under this */
	int rc = read_small("/proc/stat", buf, sizeof(buf));
	if (rc < 0)
		return rc;
	return agent_high_cpu_parse_host(buf, busy, total);
}

/* ---- state machines ------------------------------------------------------------------------ */

struct agent_high_cpu *agent_high_cpu_new(const struct agent_high_cpu_rule *rule,
					  const struct agent_high_cpu_reader *reader)
{
	struct agent_high_cpu *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->procs = calloc(AGENT_HIGH_CPU_MAX_PROCS, sizeof(*h->procs));
	h->next = calloc(AGENT_HIGH_CPU_MAX_PROCS, sizeof(*h->next));
	h->sorted = calloc(AGENT_HIGH_CPU_MAX_PROCS, sizeof(*h->sorted));
	if (!h->procs || !h->next || !h->sorted) {
		agent_high_cpu_free(h);
		errno = ENOMEM;
		return NULL;
	}
	h->rule = *rule;
	if (reader) {
		h->rd = *reader;
	} else {
		h->rd = (struct agent_high_cpu_reader){
		    .proc_cpu = proc_cpu, .host_cpu = host_cpu, .ctx = h};
		h->clk_tck = sysconf(_SC_CLK_TCK);
		if (h->clk_tck <= 0 || h->clk_tck > 1000000)
			h->clk_tck = 100;
	}
	h->host.pct = -1;
	h->st.host_percent = -1;
	return h;
}

void agent_high_cpu_free(struct agent_high_cpu *h)
{
	if (!h)
		return;
	free(h->procs);
	free(h->next);
	free(h->sorted);
	free(h);
}

void agent_high_cpu_set_rule(struct agent_high_cpu *h, const struct agent_high_cpu_rule *rule)
{
	const struct agent_high_cpu_rule *o = &h->rule;
	if (o->threshold_percent == rule->threshold_percent &&
	    o->sustain_seconds == rule->sustain_seconds &&
	    o->duration_seconds == rule->duration_seconds &&
	    o->cooldown_seconds == rule->cooldown_seconds)
		return;
	h->rule = *rule;
	for (size_t i = 0; i < h->n_procs; i++)
		h->procs[i].s.above_t = 0;
	h->host.above_t = 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static struct hc_proc *find(struct agent_high_cpu *h, uint32_t pid)
{
	size_t lo = 0, hi = h->n_procs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (h->procs[mid].pid == pid)
			return &h->procs[mid];
		if (h->procs[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Steps one machine with a new reading of pct (taken at now, cpu/total the cumulative
 * values). True when it fires; *mean is then the mean percent since it went over. With room
 * false (the caller's output is full) it does not fire: it stays armed for the next reading. */
static bool step(struct agent_high_cpu *h, struct hc_state *s, uint64_t now, uint64_t cpu,
		 uint64_t total, bool host, bool room, double *mean)
{
	bool over = s->pct >= (double)h->rule.threshold_percent;
	if (!over) {
		s->above_t = 0;
		return false;
	}
	if (!s->above_t && now - s->t > INTERVAL_NS * 3 / 2) {
		/* over on average across a long interval (an idle process read again): count
		 * from this reading only */
		s->above_t = now;
		s->above_cpu = cpu;
		s->above_total = total;
	} else if (!s->above_t) { /* over during the interval that ends now */
		s->above_t = s->t;
		s->above_cpu = s->cpu;
		s->above_total = s->total;
	}
	if (now - s->above_t < (uint64_t)h->rule.sustain_seconds * NS_PER_S || !room)
		return false;
	if (now < s->quiet_until) { /* it would fire: its quiet time holds it back */
		if (host)
			h->st.host_held++;
		else
			h->st.held++;
		return false;
	}
	if (host)
		*mean = total > s->above_total ? 100.0 * (double)(cpu - s->above_cpu) /
						     (double)(total - s->above_total)
					       : s->pct;
	else
		*mean = 100.0 * (double)(cpu - s->above_cpu) / (double)(now - s->above_t);
	s->above_t = 0;
	s->quiet_until =
	    now + ((uint64_t)h->rule.duration_seconds + h->rule.cooldown_seconds) * NS_PER_S;
	return true;
}

/* CPU time of the calling thread: the cost of an evaluation, whatever else the host runs. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* The host rule fired: the busiest watched processes of the last reading that are out of their
 * cooldown (and use some CPU) are captured and start their own cooldown. */
static size_t host_fire(struct agent_high_cpu *h, uint64_t now, double host_pct,
			struct agent_high_cpu_fire *out, size_t cap)
{
	struct hc_proc *top[AGENT_HIGH_CPU_HOST_TOP];
	size_t nt = 0;
	h->st.host_fired++;
	for (size_t i = 0; i < h->n_procs; i++) {
		struct hc_proc *p = &h->procs[i];
		if (p->s.pct < 1.0 || now < p->s.quiet_until)
			continue;
		size_t j = nt < AGENT_HIGH_CPU_HOST_TOP ? nt++ : AGENT_HIGH_CPU_HOST_TOP;
		/* insertion into the top list, busiest first */
		while (j > 0 && top[j - 1]->s.pct < p->s.pct) {
			if (j < AGENT_HIGH_CPU_HOST_TOP)
				top[j] = top[j - 1];
			j--;
		}
		if (j < AGENT_HIGH_CPU_HOST_TOP)
			top[j] = p;
	}
	if (!nt)
		h->st.host_fired_idle++;
	size_t n = 0;
	for (size_t i = 0; i < nt && n < cap; i++) { /* cap >= 1: the caller checked */
		struct hc_proc *p = top[i];
		p->s.above_t = 0;
		p->s.quiet_until =
		    now +
		    ((uint64_t)h->rule.duration_seconds + h->rule.cooldown_seconds) * NS_PER_S;
		h->st.host_fired_procs++;
		h->st.last_pid = p->pid;
		h->st.last_percent = p->s.pct;
		out[n++] = (struct agent_high_cpu_fire){
		    .pid = p->pid, .cpu_percent = p->s.pct, .host = true, .host_percent = host_pct};
	}
	return n;
}

size_t agent_high_cpu_update(struct agent_high_cpu *h, uint64_t now_ns, const uint32_t *pids,
			     size_t n, struct agent_high_cpu_fire *out, size_t cap)
{
	if (h->last_ns && now_ns + EARLY_NS < h->last_ns + INTERVAL_NS)
		return 0;
	uint64_t t0 = thread_cpu_ns();
	h->last_ns = now_ns;
	h->st.updates++;
	size_t nfire = 0;

	size_t m = n < AGENT_HIGH_CPU_MAX_PROCS ? n : AGENT_HIGH_CPU_MAX_PROCS;
	h->st.untracked = n - m;
	if (m)
		memcpy(h->sorted, pids, m * sizeof(*pids));
	qsort(h->sorted, m, sizeof(*h->sorted), cmp_u32);

	size_t nn = 0, over = 0;
	double idle_pct = h->rule.threshold_percent / 2.0;
	for (size_t i = 0; i < m; i++) {
		uint32_t pid = h->sorted[i];
		uint64_t cpu;
		if (i && pid == h->sorted[i - 1])
			continue; /* duplicate */
		struct hc_proc *old = find(h, pid);
		if (old && old->s.pct >= 0 && old->s.pct < idle_pct &&
		    now_ns + EARLY_NS < old->s.t + IDLE_NS) {
			h->next[nn++] = *old; /* idle at its last reading: read it later */
			continue;
		}
		if (h->rd.proc_cpu(h->rd.ctx, pid, &cpu) < 0)
			continue; /* gone */
		h->st.reads++;
		struct hc_proc *p = &h->next[nn++];
		if (!old || cpu < old->s.cpu || now_ns <= old->s.t) {
			/* first sight (or a new process under a reused pid): the baseline */
			*p =
			    (struct hc_proc){.pid = pid, .s = {.t = now_ns, .cpu = cpu, .pct = -1}};
			if (old)
				p->s.quiet_until = old->s.quiet_until;
			continue;
		}
		*p = *old;
		p->s.pct = 100.0 * (double)(cpu - old->s.cpu) / (double)(now_ns - old->s.t);
		over += p->s.pct >= (double)h->rule.threshold_percent;
		double mean;
		if (step(h, &p->s, now_ns, cpu, 0, false, nfire < cap, &mean)) {
			h->st.fired++;
			h->st.last_pid = pid;
			h->st.last_percent = mean;
			out[nfire++] =
			    (struct agent_high_cpu_fire){.pid = pid, .cpu_percent = mean};
		}
		p->s.t = now_ns;
		p->s.cpu = cpu;
	}
	struct hc_proc *tmp = h->procs;
	h->procs = h->next;
	h->next = tmp;
	h->n_procs = nn;
	h->st.tracked = nn;
	h->st.over = over;

	uint64_t busy, total;
	if (h->rd.host_cpu && h->rd.host_cpu(h->rd.ctx, &busy, &total) == 0) {
		struct hc_state *s = &h->host;
		if (!h->host_read || total <= s->total || busy < s->cpu) {
			*s = (struct hc_state){.t = now_ns,
					       .cpu = busy,
					       .total = total,
					       .pct = -1,
					       .quiet_until = s->quiet_until};
			h->host_read = true;
		} else {
			s->pct = 100.0 * (double)(busy - s->cpu) / (double)(total - s->total);
			h->st.host_percent = s->pct;
			double mean;
			if (step(h, s, now_ns, busy, total, true, nfire < cap, &mean))
				nfire += host_fire(h, now_ns, mean, out + nfire, cap - nfire);
			s->t = now_ns;
			s->cpu = busy;
			s->total = total;
		}
	}
	h->st.last_update_ns = thread_cpu_ns() - t0;
	return nfire;
}

void agent_high_cpu_stats(const struct agent_high_cpu *h, struct agent_high_cpu_stats *out)
{
	*out = h->st;
}
