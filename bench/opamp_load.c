/* opamp_load.c — `opamp-load`, the control-plane load generator and OpAMP conformance probe.
 *
 * One process, one thread, one epoll set, non-blocking sockets. Every simulated agent is a
 * WebSocket connection to the controller's /v1/opamp (our own minimal RFC 6455 client, wsc.h,
 * not libwebsockets: the generator must stay cheap so the numbers are the controller's). An
 * agent sends a full status first (description with bench labels, health, capabilities),
 * increments sequence_num on every message, answers remote_config with APPLIED + the hash and
 * resends its full state on ReportFullState. REST calls (fleet summary, config PUT) go through
 * a tiny HTTP/1.1 client (http1.h) driven by the same loop.
 *
 * Modes (results as "key: value" lines, then one "summary:" line; exit 0 when the run did what
 * was expected, 1 otherwise, 2 on bad usage):
 *   idle      connect N agents, wait until the controller reports them, controller RSS per agent
 *   push      connect N, PUT a new default config, time until all received it / all APPLIED
 *   rtt       connect N, heartbeat ping-pong for S seconds, round trips/s and controller CPU
 *   steady    connect N, each sends one heartbeat per --heartbeat interval at a random phase;
 *             controller CPU (percent of one core) averaged over S seconds (default 60)
 *   storm     connect N (each gets its config), SIGKILL the controller (--pid) and let every
 *             agent reconnect (exponential backoff with full jitter, 503 Retry-After honoured)
 *             to the controller the caller restarts on the same port (new pid in --pid-file):
 *             time until all are back, configs resent that agents already had, controller CPU
 *   garbage   bad varint header, undecodable protobuf, then a valid message: expect two
 *             error_response BAD_REQUEST and an open connection
 *   oversize  send one message of --bytes bytes: expect close code 1009
 *   seqgap    seq 1 then seq 5: expect the ReportFullState flag
 * Every wait has a deadline; --timeout bounds the whole run.
 *
 * Rollout tests: --fail-hash H --fail-percent P makes agents whose index % 100 < P answer
 * FAILED to the config with SHA-256 H; --uid-seed N derives the instance uids from N and the
 * index, so a second run (after a controller restart) is the same fleet. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* glibc's <sys/socket.h> defines PF_MAX (the protocol-family count), which pf/compiler.h
 * reuses as a macro name; drop glibc's, we never use it. */
#undef PF_MAX

#include "http1.h"
#include "opamp_codec.h"
#include "pf/buf.h"
#include "pf/compiler.h"
#include "pf/error.h"
#include "wsc.h"

#define TAG_HTTP UINT64_MAX
#define RBUF_SIZE (64 * 1024)
#define MAX_EVENTS 512
#define TICK_S 0.1
#define AGENT_CAPS                                                                                 \
	(PF_AGENT_CAP_REPORTS_STATUS | PF_AGENT_CAP_ACCEPTS_REMOTE_CONFIG |                        \
	 PF_AGENT_CAP_REPORTS_EFFECTIVE_CONFIG | PF_AGENT_CAP_REPORTS_HEALTH |                     \
	 PF_AGENT_CAP_REPORTS_REMOTE_CONFIG | PF_AGENT_CAP_REPORTS_HEARTBEAT)
#define CONFIG_KEY "profiling.yaml"
/* storm: an agent's reconnect waits uniform [0, min(CAP, BASE * 2^attempt)) (full jitter). */
#define STORM_BACKOFF_BASE_S 1.0
#define STORM_BACKOFF_CAP_S 30.0

enum mode {
	MODE_IDLE,
	MODE_PUSH,
	MODE_RTT,
	MODE_STEADY,
	MODE_STORM,
	MODE_GARBAGE,
	MODE_OVERSIZE,
	MODE_SEQGAP
};
static const char *const mode_names[] = { "idle",    "push",	 "rtt",	   "steady",
					  "storm",   "garbage", "oversize", "seqgap" };

enum ag_state { AG_NONE, AG_CONNECTING, AG_HANDSHAKE, AG_OPEN, AG_CLOSED };
enum msg_kind { MSG_FULL, MSG_RCS, MSG_HEARTBEAT };

struct agent {
	int fd;
	uint32_t idx;
	uint8_t state;
	uint8_t frag_op;  /* opcode of the message being reassembled, 0 when none */
	bool replied;     /* got at least one ServerToAgent */
	bool close_seen;  /* got a close frame */
	bool in_flight;   /* rtt: a message awaits its reply */
	bool write_dead;  /* the peer reset the connection while we wrote */
	bool reconnected; /* storm: connected again after the kill */
	bool storm_back;  /* storm: answered on a connection made after the kill */
	uint8_t attempt;  /* storm: failed reconnects since the last good one */
	double retry_after_s; /* storm: Retry-After of a 503 to the last upgrade */
	double t_retry;       /* storm: when to reconnect; 0 when not scheduled */
	uint16_t close_code;
	uint8_t rc_hash_len;
	uint8_t uid[PF_OPAMP_UID_LEN];
	char key[WSC_KEY_LEN + 1];
	uint64_t seq;
	uint64_t replies;
	uint32_t bad_request, other_errors, full_state_requests;
	uint64_t last_flags;
	uint8_t rc_hash[32];
	double t_rc;      /* when the current remote config hash first arrived */
	double t_sent;    /* last message sent */
	double t_next_hb; /* next periodic heartbeat */
	struct pf_buf in, out, frag;
	size_t out_off;
};

struct http_conn {
	int fd;
	bool active, done;
	int status;
	int err;
	struct pf_error perr;
	struct pf_buf out, in, body;
	size_t off;
	double t_start, t_done;
};

static struct {
	/* options */
	enum mode mode;
	uint32_t n_agents;
	char host[64];
	uint16_t port;
	char path[128];
	char agent_token[256];
	char admin_token[256];
	uint32_t src_addrs;
	uint32_t batch;
	double timeout_s;
	double seconds;
	double settle_s;
	double heartbeat_s;
	size_t bytes;
	size_t max_msg;
	size_t out_cap; /* per-connection output backlog cap */
	long pid;
	bool verbose;

	/* runtime */
	int epfd;
	struct sockaddr_in dst;
	char hostport[96];
	struct agent *agents;
	struct http_conn http;
	struct pf_buf scratch, frame;
	uint8_t rbuf[RBUF_SIZE];
	uint64_t rng;
	double t_start, deadline, next_tick;
	uint64_t start_unix_ns;
	volatile sig_atomic_t stop;

	/* counters */
	uint32_t n_open, n_hs_failed, n_replied, n_closed, n_lost, n_errors_logged;
	uint64_t total_replies, decode_errors, bad_frames, server_errors, rc_msgs, stall_resends;
	uint64_t hb_sent; /* periodic heartbeats sent */

	/* steady: agents in the order of their next heartbeat (each keeps its phase, so the order
	 * is a ring), and the position of the next one due */
	uint32_t *steady_order;
	uint32_t steady_pos;

	/* storm */
	bool storm_running;
	char pid_file[256];
	uint32_t storm_back_n;
	uint64_t storm_connects, storm_refused, storm_503, storm_rc, storm_rc_redundant;
	double t_last_rx;

	/* rtt */
	bool rtt_running;
	uint64_t rt_count;
	double rt_lat_sum;

	/* the last remote config body seen, reported back as effective config */
	struct pf_buf cfg_body;
	uint8_t cfg_hash[32];
	uint8_t cfg_hash_len;

	/* rollout tests */
	uint8_t fail_hash[32];
	bool fail_set;
	uint32_t fail_percent;
	uint64_t uid_seed;
} L;

/* ---- small helpers ---- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: cheap per-frame mask keys and uid bits, seeded from getrandom(2). A load
 * generator talking to its own controller over loopback does not need the unpredictable mask
 * RFC 6455 §5.3 asks of browsers (it guards against cache poisoning through proxies). */
static uint64_t rng_next(void)
{
	uint64_t x = L.rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	L.rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

static void kv(const char *key, const char *fmt, ...) PF_PRINTF(2, 3);
static void kv(const char *key, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%s: ", key);
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
	fflush(stdout);
}

static void fail_msg(const char *fmt, ...) PF_PRINTF(1, 2);
static void fail_msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("opamp-load: FAIL: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void note(const char *fmt, ...) PF_PRINTF(1, 2);
static void note(const char *fmt, ...)
{
	if (!L.verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	fputs("opamp-load: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void uid_format(const uint8_t u[16], char out[37])
{
	static const char hx[] = "0123456789abcdef";
	size_t o = 0;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hx[u[i] >> 4];
		out[o++] = hx[u[i] & 15];
	}
	out[o] = 0;
}

/* UUIDv7 layout (RFC 9562 §5.7): 48-bit unix ms, version 7, variant 10, random rest. */
static void uid_make(uint8_t u[16])
{
	uint64_t ms = unix_ns() / 1000000;
	uint64_t r1 = rng_next(), r2 = rng_next();
	for (int i = 0; i < 6; i++)
		u[i] = (uint8_t)(ms >> (40 - 8 * i));
	memcpy(u + 6, &r1, 2);
	memcpy(u + 8, &r2, 8);
	u[6] = (uint8_t)(0x70 | (u[6] & 0x0f));
	u[8] = (uint8_t)(0x80 | (u[8] & 0x3f));
}

static int hex_to_bytes(const char *s, uint8_t *out, size_t max)
{
	size_t n = strlen(s);
	if (n % 2 || n / 2 > max)
		return -EINVAL;
	for (size_t i = 0; i < n / 2; i++) {
		int v = 0;
		for (int k = 0; k < 2; k++) {
			char c = s[2 * i + k];
			int d = c >= '0' && c <= '9'   ? c - '0'
				: c >= 'a' && c <= 'f' ? c - 'a' + 10
				: c >= 'A' && c <= 'F' ? c - 'A' + 10
						       : -1;
			if (d < 0)
				return -EINVAL;
			v = v * 16 + d;
		}
		out[i] = (uint8_t)v;
	}
	return (int)(n / 2);
}

/* ---- /proc readers ---- */

static long proc_vmrss_kb(long pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	long kb = -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "VmRSS:", 6) == 0) {
			kb = strtol(line + 6, NULL, 10);
			break;
		}
	}
	fclose(f);
	return kb;
}

/* utime, stime (whole process, all threads) and starttime of /proc/PID/stat, in clock ticks
 * (proc(5) fields 14, 15, 22). */
static int proc_stat_times(long pid, long long *utime, long long *stime, long long *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	/* comm may contain spaces and ')': fields resume after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	p++;
	long long ut = -1, st = -1, sta = -1;
	for (int field = 3; field <= 22 && *p; field++) {
		while (*p == ' ')
			p++;
		char *end;
		long long v = strtoll(p, &end, 10);
		if (field == 14)
			ut = v;
		else if (field == 15)
			st = v;
		else if (field == 22)
			sta = v;
		while (*end && *end != ' ')
			end++;
		p = end;
	}
	if (ut < 0 || st < 0 || sta < 0)
		return -EIO;
	*utime = ut;
	*stime = st;
	*start = sta;
	return 0;
}

/* utime + stime of the whole process in clock ticks; *utime gets the user part. */
static long long proc_cpu_ticks(long pid, long long *utime)
{
	long long st, start;
	int r = proc_stat_times(pid, utime, &st, &start);
	return r < 0 ? r : *utime + st;
}

static double self_cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* ---- agent connections ---- */

static void agent_log_error(struct agent *a, const char *what, int e)
{
	if (L.n_errors_logged++ < 5 || L.verbose)
		fprintf(stderr, "opamp-load: agent %u: %s%s%s\n", a->idx, what, e ? ": " : "",
			e ? strerror(e) : "");
}

/* Exponential backoff with full jitter (the agent's reconnect rule, docs/agent.md "Offline
 * and reconnects"); a 503's Retry-After is a floor under it. */
static void storm_schedule(struct agent *a)
{
	unsigned k = pf_min(a->attempt, 16);
	double ceil_s = pf_min(STORM_BACKOFF_CAP_S, STORM_BACKOFF_BASE_S * (double)(1u << k));
	double d = ceil_s * (double)(rng_next() % 1000000) / 1e6;
	a->t_retry = now_s() + a->retry_after_s + d;
	a->retry_after_s = 0;
	if (a->attempt < UINT8_MAX)
		a->attempt++;
}

static void agent_close(struct agent *a)
{
	if (a->state == AG_CLOSED || a->state == AG_NONE)
		return;
	if (a->state < AG_OPEN)
		L.n_hs_failed++;
	if (!a->replied)
		L.n_lost++;
	a->state = AG_CLOSED;
	L.n_closed++;
	if (a->fd >= 0) {
		epoll_ctl(L.epfd, EPOLL_CTL_DEL, a->fd, NULL);
		close(a->fd);
		a->fd = -1;
	}
	pf_buf_release(&a->in);
	pf_buf_release(&a->out);
	pf_buf_release(&a->frag);
	a->out_off = 0;
	if (L.storm_running)
		storm_schedule(a);
}

static void agent_fail(struct agent *a, const char *what, int e)
{
	if (a->state == AG_CLOSED)
		return;
	agent_log_error(a, what, e);
	agent_close(a);
}

static void agent_flush(struct agent *a)
{
	while (a->out_off < a->out.len) {
		ssize_t w = send(a->fd, a->out.data + a->out_off, a->out.len - a->out_off,
				 MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			/* Keep reading: the peer may have sent a close frame before resetting. */
			a->write_dead = true;
			break;
		}
		a->out_off += (size_t)w;
	}
	pf_buf_release(&a->out);
	a->out_off = 0;
}

static void agent_send(struct agent *a, const uint8_t *p, size_t n)
{
	if (a->write_dead || a->fd < 0)
		return;
	if (a->out_off < a->out.len) {
		if (pf_buf_append(&a->out, p, n) < 0)
			agent_fail(a, "output buffer full", 0);
		return;
	}
	size_t off = 0;
	while (off < n) {
		ssize_t w = send(a->fd, p + off, n - off, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			a->write_dead = true;
			return;
		}
		off += (size_t)w;
	}
	if (off < n) {
		pf_buf_init(&a->out, L.out_cap);
		a->out_off = 0;
		if (pf_buf_append(&a->out, p + off, n - off) < 0)
			agent_fail(a, "output buffer full", 0);
	}
}

static void agent_send_frame(struct agent *a, uint8_t op, const uint8_t *p, size_t n)
{
	pf_buf_reset(&L.frame);
	if (wsc_frame_append(&L.frame, op, true, p, n, (uint32_t)rng_next()) < 0) {
		agent_fail(a, "cannot build frame", ENOMEM);
		return;
	}
	agent_send(a, L.frame.data, L.frame.len);
	a->t_sent = now_s();
}

/* Builds an AgentToServer into L.scratch (varint header 0 + protobuf). seq is the sequence
 * number to put on the wire. */
static int build_a2s(struct agent *a, enum msg_kind kind, uint64_t seq)
{
	struct pf_a2s m = { 0 };
	memcpy(m.instance_uid, a->uid, PF_OPAMP_UID_LEN);
	m.instance_uid_len = PF_OPAMP_UID_LEN;
	m.sequence_num = seq;
	m.capabilities = AGENT_CAPS;

	char uidtxt[37], host[32], index[16], shard[16];
	struct pf_kv ident[2], nonident[7];
	struct pf_health_entry child;
	struct pf_config_file eff;
	bool have_cfg = a->rc_hash_len && a->rc_hash_len == L.cfg_hash_len &&
			memcmp(a->rc_hash, L.cfg_hash, a->rc_hash_len) == 0;
	bool refuse = L.fail_set && a->idx % 100 < L.fail_percent && a->rc_hash_len == 32 &&
		      memcmp(a->rc_hash, L.fail_hash, 32) == 0;

	if (kind == MSG_FULL) {
		uid_format(a->uid, uidtxt);
		snprintf(host, sizeof(host), "bench-%u", a->idx);
		snprintf(index, sizeof(index), "%u", a->idx);
		snprintf(shard, sizeof(shard), "%u", a->idx % 16);
		ident[0] = (struct pf_kv){ "service.name", "profleet-agent" };
		ident[1] = (struct pf_kv){ "service.instance.id", uidtxt };
		nonident[0] = (struct pf_kv){ "host.name", host };
		nonident[1] = (struct pf_kv){ "os.type", "linux" };
		nonident[2] = (struct pf_kv){ "host.arch", "amd64" };
		nonident[3] = (struct pf_kv){ "service.version", "opamp-load" };
		nonident[4] = (struct pf_kv){ "bench", "1" };
		nonident[5] = (struct pf_kv){ "bench.index", index };
		nonident[6] = (struct pf_kv){ "bench.shard", shard };
		m.has_description = true;
		m.identifying = ident;
		m.n_identifying = PF_ARRAY_SIZE(ident);
		m.non_identifying = nonident;
		m.n_non_identifying = PF_ARRAY_SIZE(nonident);

		uint64_t t = unix_ns();
		child = (struct pf_health_entry){
			.name = "sampler.cpu",
			.health = { .healthy = true, .start_time_unix_nano = L.start_unix_ns,
				    .status = "running", .status_time_unix_nano = t },
		};
		m.has_health = true;
		m.health = (struct pf_health){ .healthy = true,
					       .start_time_unix_nano = L.start_unix_ns,
					       .status = "running",
					       .status_time_unix_nano = t,
					       .n_children = 1,
					       .children = &child };
	}
	if ((kind == MSG_FULL || kind == MSG_RCS) && a->rc_hash_len) {
		m.has_remote_config_status = true;
		m.rcs_last_hash = a->rc_hash;
		m.rcs_last_hash_len = a->rc_hash_len;
		m.rcs_status = have_cfg && !refuse ? PF_RCS_APPLIED : PF_RCS_FAILED;
		m.rcs_error_message = refuse	  ? "opamp-load: --fail-hash refuses this config"
				      : have_cfg ? NULL
						 : "no " CONFIG_KEY " in the remote config";
	}
	if ((kind == MSG_FULL || kind == MSG_RCS) && have_cfg && !refuse) {
		eff = (struct pf_config_file){ .name = CONFIG_KEY,
					       .body = L.cfg_body.data,
					       .body_len = L.cfg_body.len,
					       .content_type = "text/yaml" };
		m.has_effective_config = true;
		m.effective_config = (struct pf_config_map){ .n_files = 1, .files = &eff };
	}

	pf_buf_reset(&L.scratch);
	int r = pf_opamp_ws_frame_header(&L.scratch);
	if (r == 0)
		r = pf_a2s_encode(&m, &L.scratch);
	return r;
}

static void agent_send_a2s(struct agent *a, enum msg_kind kind)
{
	if (a->state != AG_OPEN)
		return;
	if (build_a2s(a, kind, ++a->seq) < 0) {
		agent_fail(a, "cannot encode AgentToServer", ENOMEM);
		return;
	}
	agent_send_frame(a, WSC_OP_BINARY, L.scratch.data, L.scratch.len);
}

static void handle_s2a(struct agent *a, const struct pf_s2a *m)
{
	double t = now_s();
	L.t_last_rx = t;
	a->replies++;
	L.total_replies++;
	if (!a->replied) {
		a->replied = true;
		L.n_replied++;
	}
	a->last_flags = m->flags;
	if (m->has_error) {
		L.server_errors++;
		if (m->error_type == PF_SERR_BAD_REQUEST)
			a->bad_request++;
		else
			a->other_errors++;
		note("agent %u: error_response type %d: %s", a->idx, (int)m->error_type,
		     m->error_message ? m->error_message : "");
	}
	bool full = m->flags & PF_S2A_FLAG_REPORT_FULL_STATE;
	if (full)
		a->full_state_requests++;
	if (L.storm_running && a->reconnected && !a->storm_back) {
		a->storm_back = true;
		L.storm_back_n++;
	}

	bool rc = false;
	if (m->has_remote_config) {
		rc = true;
		L.rc_msgs++;
		size_t hl = pf_min(m->remote_config_hash_len, sizeof(a->rc_hash));
		if (hl != a->rc_hash_len || memcmp(hl ? m->remote_config_hash : a->rc_hash,
						   a->rc_hash, hl) != 0) {
			if (hl)
				memcpy(a->rc_hash, m->remote_config_hash, hl);
			a->rc_hash_len = (uint8_t)hl;
			a->t_rc = t;
		} else if (L.storm_running) {
			L.storm_rc_redundant++; /* a config this agent has already applied */
		}
		if (L.storm_running)
			L.storm_rc++;
		const struct pf_config_file *f = NULL;
		for (size_t i = 0; i < m->remote_config.n_files; i++)
			if (m->remote_config.files[i].name &&
			    strcmp(m->remote_config.files[i].name, CONFIG_KEY) == 0)
				f = &m->remote_config.files[i];
		if (f && (hl != L.cfg_hash_len || memcmp(L.cfg_hash, a->rc_hash, hl) != 0)) {
			pf_buf_reset(&L.cfg_body);
			if (pf_buf_append(&L.cfg_body, f->body, f->body_len) == 0) {
				memcpy(L.cfg_hash, a->rc_hash, hl);
				L.cfg_hash_len = (uint8_t)hl;
			}
		}
		if (!f)
			L.cfg_hash_len = 0; /* forces FAILED for this hash */
	}

	bool counted = false;
	if (L.rtt_running && a->in_flight) {
		L.rt_count++;
		L.rt_lat_sum += t - a->t_sent;
		counted = true;
	}
	a->in_flight = false;

	if (full)
		agent_send_a2s(a, MSG_FULL);
	else if (rc)
		agent_send_a2s(a, MSG_RCS);
	else if (L.rtt_running && counted)
		agent_send_a2s(a, MSG_HEARTBEAT);
	else
		return;
	if (L.rtt_running)
		a->in_flight = true;
}

static void on_message(struct agent *a, uint8_t op, const uint8_t *p, size_t n)
{
	if (op != WSC_OP_BINARY) {
		L.bad_frames++;
		agent_log_error(a, "server sent a text message (OpAMP uses binary)", 0);
		return;
	}
	const uint8_t *data;
	size_t len;
	if (pf_opamp_ws_unframe(p, n, &data, &len) < 0) {
		L.bad_frames++;
		agent_log_error(a, "server message with a bad OpAMP varint header", 0);
		return;
	}
	struct pf_s2a *m = NULL;
	struct pf_error err = { 0 };
	if (pf_s2a_decode(data, len, L.max_msg, &m, &err) < 0) {
		L.decode_errors++;
		agent_log_error(a, err.msg[0] ? err.msg : "undecodable ServerToAgent", 0);
		return;
	}
	handle_s2a(a, m);
	pf_s2a_free(m);
}

static void agent_on_open(struct agent *a)
{
	a->state = AG_OPEN;
	a->attempt = 0;
	L.n_open++;
	a->t_next_hb = now_s() + L.heartbeat_s * (0.5 + (double)(rng_next() % 1000) / 2000.0);
	agent_send_a2s(a, MSG_FULL);
}

/* Handles one frame; returns false when the agent was closed. RFC 6455 §5.4-§5.5. */
static bool agent_frame(struct agent *a, const struct wsc_frame *f)
{
	switch (f->opcode) {
	case WSC_OP_PING:
		agent_send_frame(a, WSC_OP_PONG, f->payload, f->len);
		return a->state == AG_OPEN;
	case WSC_OP_PONG:
		return true;
	case WSC_OP_CLOSE: {
		a->close_seen = true;
		a->close_code = (uint16_t)wsc_close_code(f->payload, f->len);
		/* §5.5.1: answer with a close frame echoing the code, then drop the connection
		 * (a benchmark need not wait for the server's TCP close). */
		uint8_t pl[2] = { (uint8_t)(a->close_code >> 8), (uint8_t)a->close_code };
		agent_send_frame(a, WSC_OP_CLOSE, pl, a->close_code == WSC_CLOSE_NO_STATUS ? 0 : 2);
		note("agent %u: close frame, code %u", a->idx, a->close_code);
		agent_close(a);
		return false;
	}
	case WSC_OP_TEXT:
	case WSC_OP_BINARY:
		if (a->frag_op) {
			agent_fail(a, "new data frame inside a fragmented message", 0);
			return false;
		}
		if (f->fin) {
			on_message(a, f->opcode, f->payload, (size_t)f->len);
			return a->state == AG_OPEN;
		}
		a->frag_op = f->opcode;
		pf_buf_init(&a->frag, L.max_msg);
		/* fallthrough */
	case WSC_OP_CONT:
		if (!a->frag_op) {
			agent_fail(a, "continuation frame without a message", 0);
			return false;
		}
		if (pf_buf_append(&a->frag, f->payload, (size_t)f->len) < 0) {
			agent_fail(a, "fragmented message over --max-msg", 0);
			return false;
		}
		if (f->fin && f->opcode == WSC_OP_CONT) {
			uint8_t op = a->frag_op;
			a->frag_op = 0;
			on_message(a, op, a->frag.data, a->frag.len);
			pf_buf_release(&a->frag);
		}
		return a->state == AG_OPEN;
	}
	return true;
}

/* The Retry-After seconds of an HTTP response head (0 when absent or not a number). */
static double retry_after_of(const uint8_t *p, size_t n)
{
	char head[4096];
	size_t len = pf_min(n, sizeof(head) - 1);
	memcpy(head, p, len);
	head[len] = 0;
	const char *h = strcasestr(head, "\r\nretry-after:");
	if (!h)
		return 0;
	char *end;
	double v = strtod(h + 14, &end);
	return end == h + 14 || v < 0 || v > 3600 ? 0 : v;
}

/* Consumes what it can of p[0..n); returns bytes consumed, or -1 when the agent closed. */
static ssize_t agent_process(struct agent *a, const uint8_t *p, size_t n)
{
	size_t off = 0;
	if (a->state == AG_HANDSHAKE) {
		int status;
		struct pf_error err = { 0 };
		ssize_t r = wsc_response_check(p, n, a->key, &status, &err);
		if (r == 0)
			return 0;
		if (r < 0 && L.storm_running && status == 503) {
			L.storm_503++;
			a->retry_after_s = retry_after_of(p, n);
			agent_close(a); /* expected under a storm: not logged */
			return -1;
		}
		if (r < 0) {
			agent_fail(a, err.msg, 0);
			return -1;
		}
		off = (size_t)r;
		agent_on_open(a);
		if (a->state != AG_OPEN)
			return -1;
	}
	while (off < n && a->state == AG_OPEN) {
		struct wsc_frame f;
		ssize_t r = wsc_frame_parse(p + off, n - off, L.max_msg, &f);
		if (r == 0)
			break;
		if (r < 0) {
			agent_fail(a, r == -EMSGSIZE ? "server frame over --max-msg"
						     : "protocol error in a server frame",
				   0);
			return -1;
		}
		off += (size_t)r;
		if (!agent_frame(a, &f))
			return -1;
	}
	return a->state == AG_OPEN || a->state == AG_HANDSHAKE ? (ssize_t)off : -1;
}

static bool agent_feed(struct agent *a, const uint8_t *p, size_t n)
{
	if (a->in.len == 0) {
		ssize_t c = agent_process(a, p, n);
		if (c < 0)
			return false;
		if ((size_t)c < n) {
			pf_buf_init(&a->in, L.max_msg + 65536);
			if (pf_buf_append(&a->in, p + c, n - (size_t)c) < 0) {
				agent_fail(a, "input buffer full", 0);
				return false;
			}
		}
		return true;
	}
	if (pf_buf_append(&a->in, p, n) < 0) {
		agent_fail(a, "input buffer full", 0);
		return false;
	}
	ssize_t c = agent_process(a, a->in.data, a->in.len);
	if (c < 0)
		return false;
	if ((size_t)c == a->in.len) {
		pf_buf_release(&a->in);
	} else if (c > 0) {
		memmove(a->in.data, a->in.data + c, a->in.len - (size_t)c);
		a->in.len -= (size_t)c;
	}
	return true;
}

static void agent_read(struct agent *a)
{
	while (a->state == AG_HANDSHAKE || a->state == AG_OPEN) {
		ssize_t r = recv(a->fd, L.rbuf, sizeof(L.rbuf), 0);
		if (r > 0) {
			if (!agent_feed(a, L.rbuf, (size_t)r))
				return;
			continue;
		}
		if (r == 0) {
			agent_fail(a, "connection closed by the controller without a close frame",
				   0);
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			agent_fail(a, "recv", errno);
		return;
	}
}

static void agent_event(struct agent *a, uint32_t ev)
{
	if (a->state == AG_CONNECTING) {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		if (getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
			soerr = errno;
		if (soerr && L.storm_running) {
			L.storm_refused++; /* the controller is not back yet */
			agent_close(a);
			return;
		}
		if (soerr) {
			agent_fail(a, "connect", soerr);
			return;
		}
		if (!(ev & (EPOLLOUT | EPOLLIN)))
			return;
		a->state = AG_HANDSHAKE;
		uint8_t rnd[16];
		uint64_t r1 = rng_next(), r2 = rng_next();
		memcpy(rnd, &r1, 8);
		memcpy(rnd + 8, &r2, 8);
		wsc_key_make(rnd, a->key);
		pf_buf_reset(&L.frame);
		if (wsc_request_append(&L.frame, L.hostport, L.path, a->key,
				       L.agent_token[0] ? L.agent_token : NULL) < 0) {
			agent_fail(a, "cannot build handshake", ENOMEM);
			return;
		}
		agent_send(a, L.frame.data, L.frame.len);
	}
	if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		agent_read(a);
	if (a->state == AG_CLOSED)
		return;
	if (ev & EPOLLOUT)
		agent_flush(a);
	if (a->write_dead && (ev & (EPOLLHUP | EPOLLERR)))
		agent_fail(a, "connection reset by the controller", 0);
}

static int agent_connect(struct agent *a)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (L.src_addrs) {
		/* Spread over 127.0.0.2.. so 4-tuples don't run out of ephemeral ports; let connect()
		 * pick the port (IP_BIND_ADDRESS_NO_PORT) instead of reserving one at bind(). */
		setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
		struct sockaddr_in src = { .sin_family = AF_INET };
		src.sin_addr.s_addr = htonl(0x7f000002u + a->idx % L.src_addrs);
		if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
	}
	if (connect(fd, (struct sockaddr *)&L.dst, sizeof(L.dst)) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		return -e;
	}
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
				  .data.u64 = a->idx };
	if (epoll_ctl(L.epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	a->fd = fd;
	a->state = AG_CONNECTING;
	return 0;
}

/* ---- the REST client ---- */

static void http_finish(int err)
{
	struct http_conn *h = &L.http;
	h->err = err;
	h->done = true;
	h->active = false;
	h->t_done = now_s();
	if (h->fd >= 0) {
		epoll_ctl(L.epfd, EPOLL_CTL_DEL, h->fd, NULL);
		close(h->fd);
		h->fd = -1;
	}
}

static void http_parse(bool eof)
{
	struct http_conn *h = &L.http;
	int r = http1_response_parse(h->in.data, h->in.len, eof, &h->status, &h->body, &h->perr);
	if (r == 1)
		http_finish(0);
	else if (r < 0)
		http_finish(r);
}

static void http_event(uint32_t ev)
{
	struct http_conn *h = &L.http;
	if (!h->active)
		return;
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	if ((ev & EPOLLERR) && getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr) {
		pf_error_set(&h->perr, -soerr, NULL, "REST connection: %s", strerror(soerr));
		http_finish(-soerr);
		return;
	}
	while ((ev & EPOLLOUT) && h->off < h->out.len) {
		ssize_t w = send(h->fd, h->out.data + h->off, h->out.len - h->off, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			pf_error_set(&h->perr, -errno, NULL, "REST send: %s", strerror(errno));
			http_finish(-errno);
			return;
		}
		h->off += (size_t)w;
	}
	if (!(ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)))
		return;
	for (;;) {
		ssize_t r = recv(h->fd, L.rbuf, sizeof(L.rbuf), 0);
		if (r > 0) {
			if (pf_buf_append(&h->in, L.rbuf, (size_t)r) < 0) {
				pf_error_set(&h->perr, -E2BIG, NULL, "REST response too large");
				http_finish(-E2BIG);
				return;
			}
			continue;
		}
		if (r == 0) {
			http_parse(true);
			if (h->active) {
				pf_error_set(&h->perr, -EPROTO, NULL, "REST response incomplete");
				http_finish(-EPROTO);
			}
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN) {
			pf_error_set(&h->perr, -errno, NULL, "REST recv: %s", strerror(errno));
			http_finish(-errno);
			return;
		}
		break;
	}
	http_parse(false);
}

static int http_start(const char *method, const char *path, const char *ctype, const void *body,
		      size_t len)
{
	struct http_conn *h = &L.http;
	if (h->active)
		return -EBUSY;
	pf_buf_release(&h->out);
	pf_buf_release(&h->in);
	pf_buf_release(&h->body);
	pf_buf_init(&h->out, 1 << 20);
	pf_buf_init(&h->in, 16 << 20);
	pf_buf_init(&h->body, 16 << 20);
	pf_error_clear(&h->perr);
	h->off = 0;
	h->status = 0;
	h->err = 0;
	h->done = false;
	h->t_start = now_s();
	int r = http1_request_append(&h->out, method, L.hostport, path,
				     L.admin_token[0] ? L.admin_token : NULL, ctype, body, len);
	if (r < 0)
		return r;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&L.dst, sizeof(L.dst)) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		return -e;
	}
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
				  .data.u64 = TAG_HTTP };
	if (epoll_ctl(L.epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	h->fd = fd;
	h->active = true;
	return 0;
}

/* ---- the loop ---- */

/* A new connection for an agent whose last one was lost (storm). */
static void storm_reconnect(struct agent *a)
{
	a->t_retry = 0;
	a->reconnected = true;
	a->write_dead = false;
	a->frag_op = 0;
	a->in_flight = false;
	a->close_seen = false;
	L.storm_connects++;
	int r = agent_connect(a);
	if (r < 0) {
		L.storm_refused++;
		storm_schedule(a);
	}
}

static void tick(double t)
{
	if (t < L.next_tick)
		return;
	L.next_tick = t + TICK_S;
	for (uint32_t i = 0; i < L.n_agents; i++) {
		struct agent *a = &L.agents[i];
		if (L.storm_running && a->state == AG_CLOSED && a->t_retry > 0 && t >= a->t_retry)
			storm_reconnect(a);
		if (a->state != AG_OPEN)
			continue;
		if (L.rtt_running) {
			/* A reply that never comes must not stall the ping-pong forever. */
			if (a->in_flight && t - a->t_sent > 1.0) {
				L.stall_resends++;
				agent_send_a2s(a, MSG_HEARTBEAT);
				a->in_flight = true;
			}
		} else if (L.heartbeat_s > 0 && !L.steady_order && t >= a->t_next_hb) {
			a->t_next_hb = t + L.heartbeat_s;
			agent_send_a2s(a, MSG_HEARTBEAT);
			L.hb_sent++;
		}
	}
}

/* steady: sends every heartbeat that is due, each at its own time (not batched per tick, so
 * the controller sees N / interval separate arrivals a second, as from real agents); returns
 * the time the next one is due. At most one round of the ring per call. */
static double steady_send_due(double t)
{
	for (uint32_t k = 0; k < L.n_agents; k++) {
		struct agent *a = &L.agents[L.steady_order[L.steady_pos]];
		if (a->t_next_hb > t)
			return a->t_next_hb;
		a->t_next_hb += L.heartbeat_s;
		L.steady_pos = (L.steady_pos + 1) % L.n_agents;
		if (a->state == AG_OPEN) {
			agent_send_a2s(a, MSG_HEARTBEAT);
			L.hb_sent++;
		}
	}
	return t;
}

static void loop_once(double max_wait_s)
{
	struct epoll_event evs[MAX_EVENTS];
	if (L.steady_order) {
		double t = now_s();
		max_wait_s = pf_min(max_wait_s, steady_send_due(t) - t);
	}
	/* Round up: a wait shorter than 1 ms must not become a busy poll. */
	int ms = max_wait_s > 0 ? (int)(max_wait_s * 1000.0 + 0.999) : 0;
	int n = epoll_wait(L.epfd, evs, MAX_EVENTS, ms);
	for (int i = 0; i < n; i++) {
		if (evs[i].data.u64 == TAG_HTTP)
			http_event(evs[i].events);
		else
			agent_event(&L.agents[evs[i].data.u64], evs[i].events);
	}
	tick(now_s());
}

typedef bool (*pred_fn)(void *ctx);

/* Runs the loop until pred() holds, the deadline (capped by the overall one) passes or a
 * signal arrives: 0, -ETIMEDOUT or -EINTR. */
static int run_until(pred_fn pred, void *ctx, double deadline)
{
	if (deadline > L.deadline)
		deadline = L.deadline;
	for (;;) {
		if (pred && pred(ctx))
			return 0;
		if (L.stop)
			return -EINTR;
		double t = now_s();
		if (t >= deadline)
			return -ETIMEDOUT;
		loop_once(pf_min(0.02, deadline - t));
	}
}

static bool http_done_pred(void *ctx)
{
	return L.http.done;
}

/* A whole REST exchange while the agents keep being served. 0 (status in L.http.status) or a
 * negative errno with the reason printed. */
static int http_do(const char *method, const char *path, const char *ctype, const void *body,
		   size_t len, double timeout_s)
{
	int r = http_start(method, path, ctype, body, len);
	if (r < 0) {
		fail_msg("%s %s: %s", method, path, strerror(-r));
		return r;
	}
	r = run_until(http_done_pred, NULL, now_s() + timeout_s);
	if (r < 0) {
		http_finish(r);
		fail_msg("%s %s: no response (%s)", method, path, strerror(-r));
		return r;
	}
	if (L.http.err < 0) {
		fail_msg("%s %s: %s", method, path,
			 L.http.perr.msg[0] ? L.http.perr.msg : strerror(-L.http.err));
		return L.http.err;
	}
	return 0;
}

struct summary {
	long long agents, connected, applied, applying, failed;
};

static int parse_summary(const struct pf_buf *b, struct summary *s)
{
	json_error_t jerr;
	json_t *root = json_loadb((const char *)b->data, b->len, 0, &jerr);
	if (!root || !json_is_object(root)) {
		json_decref(root);
		return -EBADMSG;
	}
	s->agents = json_integer_value(json_object_get(root, "agents"));
	s->connected = json_integer_value(json_object_get(root, "connected"));
	json_t *cs = json_object_get(root, "config_status");
	s->applied = json_integer_value(json_object_get(cs, "APPLIED"));
	s->applying = json_integer_value(json_object_get(cs, "APPLYING"));
	s->failed = json_integer_value(json_object_get(cs, "FAILED"));
	json_decref(root);
	return 0;
}

static int get_summary(struct summary *s)
{
	int r = http_do("GET", "/api/v1/fleet/summary", NULL, NULL, 0, 10.0);
	if (r < 0)
		return r;
	if (L.http.status != 200) {
		fail_msg("GET /api/v1/fleet/summary: HTTP %d: %.200s", L.http.status,
			 pf_buf_str(&L.http.body));
		return -EPROTO;
	}
	if (parse_summary(&L.http.body, s) < 0) {
		fail_msg("GET /api/v1/fleet/summary: not the expected JSON: %.200s",
			 pf_buf_str(&L.http.body));
		return -EBADMSG;
	}
	return 0;
}

/* ---- connecting ---- */

static bool settled_pred(void *ctx)
{
	return L.n_open + L.n_hs_failed >= *(uint32_t *)ctx;
}

static bool replied_pred(void *ctx)
{
	return L.n_replied + L.n_lost >= *(uint32_t *)ctx;
}

/* Connects n agents in batches, waiting for each batch's handshakes (so the controller's
 * listen backlog is never overrun), then for every agent's first reply. Returns the number
 * of agents that got a reply. */
static uint32_t connect_agents(uint32_t n)
{
	double t0 = now_s();
	int first_err = 0;
	uint32_t connect_failed = 0, attempted = 0;
	for (uint32_t start = 0; start < n && !L.stop; start += L.batch) {
		uint32_t end = pf_min(n, start + L.batch);
		for (uint32_t i = start; i < end; i++) {
			struct agent *a = &L.agents[i];
			int r = agent_connect(a);
			if (r < 0) {
				if (!first_err)
					first_err = r;
				connect_failed++;
				a->state = AG_CLOSED;
				L.n_hs_failed++;
				L.n_lost++;
				L.n_closed++;
			}
		}
		attempted = end;
		if (run_until(settled_pred, &end, now_s() + 30.0) < 0) {
			fail_msg("batch %u..%u: only %u of %u handshakes done", start, end - 1,
				 L.n_open + L.n_hs_failed, end);
			break;
		}
	}
	if (first_err)
		fail_msg("%u connect() calls failed, first: %s", connect_failed,
			 strerror(-first_err));
	run_until(replied_pred, &attempted, now_s() + 60.0);
	double t1 = now_s();
	kv("agents", "%u", n);
	kv("handshakes_ok", "%u", L.n_open);
	kv("agents_replied", "%u", L.n_replied);
	kv("agents_closed", "%u", L.n_closed);
	kv("connect_seconds", "%.3f", t1 - t0);
	return L.n_replied;
}

struct quiet_ctx {
	double quiet_s;
};

static bool quiet_pred(void *ctx)
{
	struct quiet_ctx *q = ctx;
	return now_s() - L.t_last_rx >= q->quiet_s;
}

/* Waits until no ServerToAgent has arrived for quiet_s (initial config pushes, full-state
 * requests), at most max_s. */
static void wait_quiet(double quiet_s, double max_s)
{
	struct quiet_ctx q = { quiet_s };
	run_until(quiet_pred, &q, now_s() + max_s);
}

static uint32_t count_open(void)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < L.n_agents; i++)
		n += L.agents[i].state == AG_OPEN;
	return n;
}

/* ---- modes ---- */

static bool summary_connected_pred(void *ctx)
{
	/* Poll the fleet summary between loop iterations (every 250 ms). */
	static double next;
	long long *connected = ctx;
	double t = now_s();
	if (L.http.active || t < next)
		return false;
	next = t + 0.25;
	struct summary s = { 0 };
	if (get_summary(&s) < 0)
		return false;
	*connected = s.connected;
	return s.connected >= L.n_agents;
}

static int mode_idle(void)
{
	long rss0 = 0;
	if (L.pid > 0) {
		rss0 = proc_vmrss_kb(L.pid);
		if (rss0 < 0) {
			fail_msg("cannot read /proc/%ld/status: %s", L.pid, strerror((int)-rss0));
			return 1;
		}
	}
	uint32_t ok = connect_agents(L.n_agents);
	bool all = ok == L.n_agents;
	long long connected = -1;
	if (L.admin_token[0]) {
		if (run_until(summary_connected_pred, &connected, now_s() + 30.0) < 0) {
			fail_msg("fleet summary says connected=%lld, expected >= %u", connected,
				 L.n_agents);
			all = false;
		}
		kv("controller_connected", "%lld", connected);
	}
	run_until(NULL, NULL, now_s() + L.settle_s);
	uint32_t open = count_open();
	kv("agents_open", "%u", open);
	if (open != L.n_agents)
		all = false;
	long rss1 = 0;
	double per = 0;
	if (L.pid > 0) {
		rss1 = proc_vmrss_kb(L.pid);
		if (rss1 < 0) {
			fail_msg("cannot read /proc/%ld/status (controller gone?)", L.pid);
			return 1;
		}
		per = (double)(rss1 - rss0) * 1024.0 / (double)L.n_agents;
		kv("rss_before_kb", "%ld", rss0);
		kv("rss_after_kb", "%ld", rss1);
		kv("rss_per_agent_bytes", "%.0f", per);
	}
	printf("summary: mode=idle agents=%u open=%u rss_before_kb=%ld rss_after_kb=%ld "
	       "rss_per_agent_bytes=%.0f result=%s\n",
	       L.n_agents, open, rss0, rss1, per, all ? "ok" : "FAIL");
	if (!all)
		fail_msg("only %u of %u agents connected and answered", open, L.n_agents);
	return all ? 0 : 1;
}

struct push_state {
	double t0, t_recv, t_applied;
	uint8_t hash[32];
	int hash_len; /* < 0: unknown, count configs that arrived after t0 */
	uint32_t n_recv;
	double next_poll;
	bool polling;
	unsigned polls;
	struct summary last;
	bool http_failed;
};

static void push_count(struct push_state *ps)
{
	uint32_t n = 0;
	double tmax = 0;
	for (uint32_t i = 0; i < L.n_agents; i++) {
		struct agent *a = &L.agents[i];
		bool got = ps->hash_len >= 0
				   ? a->rc_hash_len == ps->hash_len &&
					     memcmp(a->rc_hash, ps->hash, (size_t)ps->hash_len) == 0
				   : a->rc_hash_len && a->t_rc >= ps->t0;
		if (got) {
			n++;
			if (a->t_rc > tmax)
				tmax = a->t_rc;
		}
	}
	ps->n_recv = n;
	ps->t_recv = tmax;
}

static bool push_pred(void *ctx)
{
	struct push_state *ps = ctx;
	double t = now_s();
	if (ps->polling && L.http.done) {
		ps->polling = false;
		struct summary s = { 0 };
		if (L.http.err < 0 || L.http.status != 200 || parse_summary(&L.http.body, &s) < 0) {
			fail_msg("fleet summary poll failed (HTTP %d)", L.http.status);
			ps->http_failed = true;
			return true;
		}
		ps->last = s;
		push_count(ps);
		if (s.applied >= L.n_agents && ps->n_recv >= L.n_agents) {
			ps->t_applied = L.http.t_done;
			return true;
		}
	}
	if (!ps->polling && t >= ps->next_poll) {
		ps->next_poll = t + 0.02;
		if (http_start("GET", "/api/v1/fleet/summary", NULL, NULL, 0) == 0) {
			ps->polling = true;
			ps->polls++;
		}
	}
	return false;
}

/* Connects every agent and waits until the controller is quiet (first replies, initial
 * config pushes); false, with the FAIL summary printed, when some did not connect. */
static bool connect_all(const char *mode, double quiet_s, double quiet_max_s)
{
	uint32_t ok = connect_agents(L.n_agents);
	if (ok != L.n_agents) {
		fail_msg("only %u of %u agents connected", ok, L.n_agents);
		printf("summary: mode=%s agents=%u result=FAIL\n", mode, L.n_agents);
		return false;
	}
	wait_quiet(quiet_s, quiet_max_s);
	return true;
}

/* PUTs a new (timestamped) default config and runs until every agent has received it and the
 * fleet summary shows all APPLIED: 0, -ETIMEDOUT, or another negative errno with the reason
 * printed. ps->t0 is taken just before the PUT, *t_put when its answer came. */
static int push_config(struct push_state *ps, double *t_put)
{
	char body[256];
	uint64_t ns = unix_ns();
	int blen = snprintf(body, sizeof(body),
			    "# opamp-load push %" PRIu64 "\n"
			    "profiling:\n  sampling:\n    frequency_hz: %u\n",
			    ns, (unsigned)(1 + (ns / 1000000) % 1000));
	ps->hash_len = -1;
	ps->t0 = now_s();
	int r = http_do("PUT", "/api/v1/configs/default", "application/yaml", body, (size_t)blen,
			30.0);
	if (r < 0)
		return r;
	*t_put = L.http.t_done;
	if (L.http.status / 100 != 2) {
		fail_msg("PUT /api/v1/configs/default: HTTP %d: %.300s", L.http.status,
			 pf_buf_str(&L.http.body));
		return -EPROTO;
	}
	json_error_t jerr;
	json_t *root = json_loadb((const char *)L.http.body.data, L.http.body.len, 0, &jerr);
	const char *hx = json_string_value(json_object_get(root, "hash"));
	if (hx) {
		/* Accept "sha256:<hex>" as well as bare hex. */
		const char *c = strchr(hx, ':');
		int n = hex_to_bytes(c ? c + 1 : hx, ps->hash, sizeof(ps->hash));
		ps->hash_len = n > 0 ? n : -1;
	}
	if (ps->hash_len < 0)
		fprintf(stderr, "opamp-load: PUT response has no hex \"hash\"; counting configs "
				"received after the PUT instead\n");
	json_decref(root);
	r = run_until(push_pred, ps, ps->t0 + 60.0);
	push_count(ps);
	return r;
}

static int mode_push(void)
{
	if (!connect_all("push", 0.3, 15.0))
		return 1;
	struct push_state ps = { 0 };
	double t_put = 0;
	int r = push_config(&ps, &t_put);
	if (r < 0 && r != -ETIMEDOUT)
		return 1;
	bool all = r == 0 && !ps.http_failed && ps.t_applied > 0;
	kv("put_ms", "%.1f", (t_put - ps.t0) * 1e3);
	kv("received", "%u", ps.n_recv);
	kv("t_recv_ms", "%.1f", ps.n_recv ? (ps.t_recv - ps.t0) * 1e3 : -1.0);
	kv("summary_applied", "%lld", ps.last.applied);
	kv("summary_polls", "%u", ps.polls);
	kv("t_applied_ms", "%.1f", all ? (ps.t_applied - ps.t0) * 1e3 : -1.0);
	printf("summary: mode=push agents=%u received=%u applied=%lld put_ms=%.1f t_recv_ms=%.1f "
	       "t_applied_ms=%.1f result=%s\n",
	       L.n_agents, ps.n_recv, ps.last.applied, (t_put - ps.t0) * 1e3,
	       ps.n_recv ? (ps.t_recv - ps.t0) * 1e3 : -1.0,
	       all ? (ps.t_applied - ps.t0) * 1e3 : -1.0, all ? "ok" : "FAIL");
	if (!all)
		fail_msg("push not complete: %u of %u received, summary APPLIED=%lld (%s)",
			 ps.n_recv, L.n_agents, ps.last.applied,
			 r == -ETIMEDOUT ? "timed out" : "error");
	return all ? 0 : 1;
}

static int mode_rtt(void)
{
	if (!connect_all("rtt", 0.3, 15.0))
		return 1;
	long long u0 = 0, u1 = 0;
	long long c0 = L.pid > 0 ? proc_cpu_ticks(L.pid, &u0) : 0;
	if (c0 < 0) {
		fail_msg("cannot read /proc/%ld/stat", L.pid);
		return 1;
	}
	double self0 = self_cpu_s();
	double t0 = now_s();
	L.rtt_running = true;
	for (uint32_t i = 0; i < L.n_agents; i++) {
		struct agent *a = &L.agents[i];
		if (a->state != AG_OPEN)
			continue;
		agent_send_a2s(a, MSG_HEARTBEAT);
		a->in_flight = true;
	}
	run_until(NULL, NULL, t0 + L.seconds);
	double t1 = now_s();
	long long c1 = L.pid > 0 ? proc_cpu_ticks(L.pid, &u1) : 0;
	double self1 = self_cpu_s();
	L.rtt_running = false;

	double dt = t1 - t0;
	long hz = sysconf(_SC_CLK_TCK);
	double ctrl_cpu_s = (double)(c1 - c0) / (double)(hz > 0 ? hz : 100);
	double rps = (double)L.rt_count / dt;
	double us_per_rt = L.rt_count ? ctrl_cpu_s * 1e6 / (double)L.rt_count : -1.0;
	uint32_t open = count_open();
	kv("seconds", "%.3f", dt);
	kv("round_trips", "%" PRIu64, L.rt_count);
	kv("round_trips_per_s", "%.0f", rps);
	kv("mean_latency_us", "%.0f", L.rt_count ? L.rt_lat_sum * 1e6 / (double)L.rt_count : -1.0);
	kv("stall_resends", "%" PRIu64, L.stall_resends);
	if (L.pid > 0) {
		kv("controller_cpu_s", "%.2f", ctrl_cpu_s);
		kv("controller_cpu_us_per_rt", "%.2f", us_per_rt);
		/* The system part is mostly the loopback TCP stack under send/recv. */
		kv("controller_user_us_per_rt", "%.2f",
		   L.rt_count ? (double)(u1 - u0) / (double)(hz > 0 ? hz : 100) * 1e6 /
					(double)L.rt_count
			      : -1.0);
	}
	kv("loadgen_cpu_s", "%.2f", self1 - self0);
	kv("agents_open", "%u", open);
	bool all = L.rt_count > 0 && open == L.n_agents && L.decode_errors == 0;
	printf("summary: mode=rtt agents=%u round_trips_per_s=%.0f controller_cpu_us_per_rt=%.2f "
	       "loadgen_cpu_pct=%.0f result=%s\n",
	       L.n_agents, rps, us_per_rt, (self1 - self0) * 100.0 / dt, all ? "ok" : "FAIL");
	if (!all)
		fail_msg("rtt: %" PRIu64 " round trips, %u of %u agents still open, %" PRIu64
			 " undecodable replies",
			 L.rt_count, open, L.n_agents, L.decode_errors);
	return all ? 0 : 1;
}

static int cmp_next_hb(const void *x, const void *y)
{
	double a = L.agents[*(const uint32_t *)x].t_next_hb;
	double b = L.agents[*(const uint32_t *)y].t_next_hb;
	return a < b ? -1 : a > b;
}

/* A fleet at rest: every agent sends one heartbeat per interval, the phases spread uniformly
 * over the interval (N / interval messages per second in all), and nothing else happens. The
 * controller's CPU over the window, from /proc/PID/stat, is what an idle fleet costs it. */
static int mode_steady(void)
{
	if (!connect_all("steady", 1.0, 30.0))
		return 1;
	double t = now_s();
	L.steady_order = calloc(L.n_agents, sizeof(*L.steady_order));
	if (!L.steady_order) {
		fail_msg("out of memory");
		return 1;
	}
	for (uint32_t i = 0; i < L.n_agents; i++) {
		L.agents[i].t_next_hb = t + L.heartbeat_s * (double)(rng_next() % 1000000) / 1e6;
		L.steady_order[i] = i;
	}
	qsort(L.steady_order, L.n_agents, sizeof(*L.steady_order), cmp_next_hb);
	L.steady_pos = 0;
	/* The connects' after-effects (persistence of the new rows, full states) settle first. */
	run_until(NULL, NULL, now_s() + L.settle_s);
	long long u0 = 0, u1 = 0;
	long long c0 = L.pid > 0 ? proc_cpu_ticks(L.pid, &u0) : 0;
	if (c0 < 0) {
		fail_msg("cannot read /proc/%ld/stat", L.pid);
		return 1;
	}
	uint64_t sent0 = L.hb_sent, rep0 = L.total_replies;
	double self0 = self_cpu_s();
	double t0 = now_s();
	run_until(NULL, NULL, t0 + L.seconds);
	double t1 = now_s();
	long long c1 = L.pid > 0 ? proc_cpu_ticks(L.pid, &u1) : 0;
	double self1 = self_cpu_s();
	if (c1 < 0) {
		fail_msg("cannot read /proc/%ld/stat (controller gone?)", L.pid);
		return 1;
	}

	double dt = t1 - t0;
	long hz = sysconf(_SC_CLK_TCK);
	double tick_s = 1.0 / (double)(hz > 0 ? hz : 100);
	double ctrl_s = (double)(c1 - c0) * tick_s, user_s = (double)(u1 - u0) * tick_s;
	uint64_t sent = L.hb_sent - sent0, replies = L.total_replies - rep0;
	uint32_t open = count_open();
	kv("seconds", "%.3f", dt);
	kv("heartbeat_interval_s", "%.1f", L.heartbeat_s);
	kv("heartbeats_sent", "%" PRIu64, sent);
	kv("replies", "%" PRIu64, replies);
	kv("heartbeats_per_s", "%.1f", (double)sent / dt);
	if (L.pid > 0) {
		kv("controller_cpu_s", "%.2f", ctrl_s);
		kv("controller_cpu_pct", "%.2f", ctrl_s * 100.0 / dt);
		kv("controller_user_pct", "%.2f", user_s * 100.0 / dt);
		kv("controller_cpu_us_per_heartbeat", "%.1f", sent ? ctrl_s * 1e6 / (double)sent : -1.0);
		kv("clock_tick_s", "%.3f", tick_s);
	}
	kv("loadgen_cpu_pct", "%.2f", (self1 - self0) * 100.0 / dt);
	kv("agents_open", "%u", open);
	/* Every heartbeat is answered; only those in flight at the window's two edges differ. */
	uint64_t slack = pf_max((uint64_t)10, sent / 100);
	bool answered = replies + slack >= sent && sent + slack >= replies;
	bool all = sent > 0 && answered && open == L.n_agents && L.decode_errors == 0;
	printf("summary: mode=steady agents=%u heartbeats_per_s=%.1f controller_cpu_pct=%.2f "
	       "result=%s\n",
	       L.n_agents, (double)sent / dt, L.pid > 0 ? ctrl_s * 100.0 / dt : -1.0,
	       all ? "ok" : "FAIL");
	if (!all)
		fail_msg("steady: %" PRIu64 " heartbeats, %" PRIu64 " replies, %u of %u agents "
			 "still open, %" PRIu64 " undecodable replies",
			 sent, replies, open, L.n_agents, L.decode_errors);
	return all ? 0 : 1;
}

/* storm: the restarted controller's pid, once --pid-file names a process other than --pid. */
static long storm_new_pid(void)
{
	char buf[32] = { 0 };
	FILE *f = fopen(L.pid_file, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	long pid = strtol(buf, NULL, 10);
	return pid > 0 && pid != L.pid ? pid : 0;
}

/* CPU seconds a process has used since it started, and seconds since it started
 * (/proc/PID/stat, /proc/uptime). */
static int proc_lifetime(long pid, double *cpu_s, double *wall_s)
{
	long long ut, st, start;
	int r = proc_stat_times(pid, &ut, &st, &start);
	if (r < 0)
		return r;
	double up = 0;
	FILE *f = fopen("/proc/uptime", "re");
	if (!f)
		return -errno;
	r = fscanf(f, "%lf", &up) == 1 ? 0 : -EIO;
	fclose(f);
	if (r < 0)
		return r;
	long hz = sysconf(_SC_CLK_TCK);
	double tick = 1.0 / (double)(hz > 0 ? hz : 100);
	*cpu_s = (double)(ut + st) * tick;
	*wall_s = up - (double)start * tick;
	return 0;
}

static bool storm_done_pred(void *ctx)
{
	return L.storm_back_n >= L.n_agents;
}

/* A controller restart under a connected fleet: SIGKILL, the caller restarts it on the same
 * port and data dir and writes the new pid to --pid-file, every agent reconnects on its own
 * backoff. Every agent must be back (answered on a new connection), no agent may be sent a
 * config it has (it reports the hash as APPLIED in its first message), and the new controller's
 * CPU from its start until the last agent is back is the storm's cost. */
static int mode_storm(void)
{
	if (!connect_all("storm", 1.0, 30.0))
		return 1;
	struct push_state ps = { 0 };
	double t_put = 0;
	if (push_config(&ps, &t_put) < 0 || ps.http_failed) {
		fail_msg("storm: the config push before the kill did not complete");
		printf("summary: mode=storm agents=%u result=FAIL\n", L.n_agents);
		return 1;
	}
	uint32_t configured = 0;
	for (uint32_t i = 0; i < L.n_agents; i++) {
		struct agent *a = &L.agents[i];
		configured += a->state == AG_OPEN && L.cfg_hash_len && a->rc_hash_len == L.cfg_hash_len &&
			      !memcmp(a->rc_hash, L.cfg_hash, L.cfg_hash_len);
	}
	kv("agents_configured", "%u", configured);
	/* Let the controller's writer store the fleet (every 0.5 s), as a running one would have. */
	run_until(NULL, NULL, now_s() + L.settle_s);

	L.storm_running = true;
	double t0 = now_s();
	if (kill((pid_t)L.pid, SIGKILL) < 0) {
		fail_msg("cannot kill the controller (pid %ld): %s", L.pid, strerror(errno));
		return 1;
	}
	run_until(storm_done_pred, NULL, t0 + L.seconds);
	double t1 = now_s();
	long pid2 = storm_new_pid();
	double cpu_s = -1, wall_s = -1;
	if (pid2 > 0 && proc_lifetime(pid2, &cpu_s, &wall_s) < 0)
		cpu_s = wall_s = -1;
	bool back = L.storm_back_n >= L.n_agents;

	long long connected = -1;
	if (back && L.admin_token[0] &&
	    run_until(summary_connected_pred, &connected, now_s() + 10.0) < 0)
		fail_msg("fleet summary says connected=%lld after the storm, expected >= %u",
			 connected, L.n_agents);
	L.storm_running = false;

	kv("agents_back", "%u", L.storm_back_n);
	kv("storm_seconds", "%.2f", back ? t1 - t0 : -1.0);
	kv("reconnect_attempts", "%" PRIu64, L.storm_connects);
	kv("refused", "%" PRIu64, L.storm_refused);
	kv("rejected_503", "%" PRIu64, L.storm_503);
	kv("configs_received", "%" PRIu64, L.storm_rc);
	kv("configs_already_applied", "%" PRIu64, L.storm_rc_redundant);
	kv("controller_connected", "%lld", connected);
	if (pid2 > 0) {
		kv("new_pid", "%ld", pid2);
		kv("controller_up_s", "%.2f", wall_s);
		kv("controller_cpu_s", "%.2f", cpu_s);
		kv("controller_cpu_pct", "%.1f", wall_s > 0 ? cpu_s * 100.0 / wall_s : -1.0);
	}
	bool ok = back && configured == L.n_agents && L.storm_rc_redundant == 0 &&
		  connected >= (long long)L.n_agents && pid2 > 0;
	printf("summary: mode=storm agents=%u back=%u storm_seconds=%.2f configs_already_applied=%" PRIu64
	       " controller_cpu_pct=%.1f result=%s\n",
	       L.n_agents, L.storm_back_n, back ? t1 - t0 : -1.0, L.storm_rc_redundant,
	       wall_s > 0 ? cpu_s * 100.0 / wall_s : -1.0, ok ? "ok" : "FAIL");
	if (!ok)
		fail_msg("storm: %u of %u agents back in %.0f s, %u configured before, %" PRIu64
			 " configs resent that agents had, new controller pid %ld",
			 L.storm_back_n, L.n_agents, L.seconds, configured, L.storm_rc_redundant, pid2);
	return ok ? 0 : 1;
}

/* -- conformance probes: one agent -- */

struct reply_ctx {
	struct agent *a;
	uint64_t after;
};

static bool reply_pred(void *ctx)
{
	struct reply_ctx *rc = ctx;
	return rc->a->replies > rc->after || rc->a->state != AG_OPEN;
}

/* Waits for a reply newer than `after`; false (with the reason printed) when the connection
 * closed or nothing came in time. */
static bool wait_reply(struct agent *a, uint64_t after, double timeout_s, const char *what)
{
	struct reply_ctx rc = { a, after };
	run_until(reply_pred, &rc, now_s() + timeout_s);
	if (a->state != AG_OPEN) {
		if (a->close_seen)
			fail_msg("%s: controller closed the connection (close code %u)", what,
				 a->close_code);
		else
			fail_msg("%s: connection lost", what);
		return false;
	}
	if (a->replies <= after) {
		fail_msg("%s: no ServerToAgent within %.0f s", what, timeout_s);
		return false;
	}
	return true;
}

static struct agent *probe_connect(void)
{
	if (connect_agents(1) != 1) {
		fail_msg("could not connect one agent to %s%s", L.hostport, L.path);
		return NULL;
	}
	wait_quiet(0.3, 5.0);
	struct agent *a = &L.agents[0];
	return a->state == AG_OPEN ? a : NULL;
}

static int mode_garbage(void)
{
	struct agent *a = probe_connect();
	if (!a)
		return 1;

	/* 1. A well-formed AgentToServer behind a varint header of 1 instead of 0. */
	if (build_a2s(a, MSG_HEARTBEAT, a->seq + 1) < 0)
		return 1;
	L.scratch.data[0] = 0x01;
	uint32_t br = a->bad_request;
	uint64_t r0 = a->replies;
	agent_send_frame(a, WSC_OP_BINARY, L.scratch.data, L.scratch.len);
	if (!wait_reply(a, r0, 5.0, "non-zero header"))
		return 1;
	bool ok1 = a->bad_request > br;
	kv("nonzero_header_bad_request", "%s", ok1 ? "yes" : "no");

	/* 2. Header 0, then a length-delimited field 1 claiming 127 bytes with 1 present. */
	static const uint8_t junk[] = { 0x00, 0x0a, 0x7f, 0x01 };
	br = a->bad_request;
	r0 = a->replies;
	agent_send_frame(a, WSC_OP_BINARY, junk, sizeof(junk));
	if (!wait_reply(a, r0, 5.0, "undecodable protobuf"))
		return 1;
	bool ok2 = a->bad_request > br;
	kv("bad_protobuf_bad_request", "%s", ok2 ? "yes" : "no");

	/* 3. A valid heartbeat must still be served on the same connection. */
	uint32_t errs = a->bad_request + a->other_errors;
	r0 = a->replies;
	agent_send_a2s(a, MSG_HEARTBEAT);
	if (!wait_reply(a, r0, 5.0, "valid message after garbage"))
		return 1;
	bool ok3 = a->bad_request + a->other_errors == errs && a->state == AG_OPEN;
	kv("valid_after_garbage_ok", "%s", ok3 ? "yes" : "no");

	bool ok = ok1 && ok2 && ok3;
	printf("summary: mode=garbage result=%s\n", ok ? "ok" : "FAIL");
	if (!ok1)
		fail_msg("no error_response BAD_REQUEST for a message with varint header 1");
	if (!ok2)
		fail_msg("no error_response BAD_REQUEST for an undecodable AgentToServer");
	if (!ok3)
		fail_msg("the valid message after the garbage was answered with an error");
	return ok ? 0 : 1;
}

struct oversize_ctx {
	struct agent *a;
	uint64_t replies;
};

/* Done when the connection is gone or the controller answered the big message. */
static bool oversize_pred(void *ctx)
{
	struct oversize_ctx *o = ctx;
	return o->a->state != AG_OPEN || o->a->replies > o->replies;
}

static void put_varint(struct pf_buf *b, uint64_t v)
{
	while (v >= 0x80) {
		pf_buf_putc(b, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	pf_buf_putc(b, (uint8_t)v);
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static int mode_oversize(void)
{
	struct agent *a = probe_connect();
	if (!a)
		return 1;
	/* A valid heartbeat padded to exactly --bytes with an unknown length-delimited field
	 * (field 2047, which a decoder skips), so only the size can make the server refuse it. */
	if (build_a2s(a, MSG_HEARTBEAT, a->seq + 1) < 0)
		return 1;
	size_t base = L.scratch.len, tag = varint_len((2047u << 3) | 2);
	if (L.bytes < base + tag + 1 + 16) {
		fail_msg("--bytes must be at least %zu", base + tag + 1 + 16);
		return 2;
	}
	size_t room = L.bytes - base - tag, pad = room - 1;
	while (pad + varint_len(pad) > room)
		pad--;
	struct pf_buf msg;
	pf_buf_init(&msg, L.bytes + 16);
	if (pf_buf_append(&msg, L.scratch.data, base) < 0 || pf_buf_reserve(&msg, room) < 0) {
		fail_msg("cannot allocate %zu bytes", L.bytes);
		pf_buf_release(&msg);
		return 1;
	}
	put_varint(&msg, (2047u << 3) | 2);
	put_varint(&msg, pad);
	memset(msg.data + msg.len, 'x', pad);
	msg.len += pad;
	/* pad may be one short of room when the varint boundary falls badly; the frame is
	 * msg.len bytes either way. */
	kv("message_bytes", "%zu", msg.len);
	a->seq++;
	agent_send_frame(a, WSC_OP_BINARY, msg.data, msg.len);
	pf_buf_release(&msg);
	pf_buf_release(&L.frame);

	struct oversize_ctx oc = { a, a->replies };
	double t_wait = now_s();
	run_until(oversize_pred, &oc, t_wait + 30.0);
	t_wait = now_s() - t_wait;
	bool ok = a->close_seen && a->close_code == WSC_CLOSE_TOO_BIG;
	kv("close_seen", "%s", a->close_seen ? "yes" : "no");
	kv("close_code", "%u", a->close_seen ? a->close_code : 0);
	printf("summary: mode=oversize bytes=%zu close_code=%u result=%s\n", L.bytes,
	       a->close_seen ? a->close_code : 0, ok ? "ok" : "FAIL");
	if (!ok) {
		if (a->close_seen)
			fail_msg("closed with code %u, expected %u", a->close_code,
				 WSC_CLOSE_TOO_BIG);
		else if (a->state == AG_OPEN && a->replies > oc.replies)
			fail_msg("the controller accepted a %zu-byte message (it answered it)",
				 L.bytes);
		else if (a->state == AG_OPEN)
			fail_msg("connection still open %.1f s after the %zu-byte message", t_wait,
				 L.bytes);
		else
			fail_msg("connection dropped without a close frame");
	}
	return ok ? 0 : 1;
}

static int mode_seqgap(void)
{
	struct agent *a = probe_connect();
	if (!a)
		return 1;
	uint32_t fs = a->full_state_requests;
	uint64_t r0 = a->replies;
	/* Our full status went out as seq 1 (plus replies to any config push); jump by 4. */
	a->seq += 3;
	agent_send_a2s(a, MSG_HEARTBEAT);
	uint64_t gap_seq = a->seq;
	if (!wait_reply(a, r0, 5.0, "message after a sequence gap"))
		return 1;
	bool ok = a->full_state_requests > fs;
	kv("gap_seq", "%" PRIu64, gap_seq);
	kv("report_full_state", "%s", ok ? "yes" : "no");
	if (ok) {
		/* handle_s2a() already resent the full state; it must be accepted. */
		if (!wait_reply(a, r0 + 1, 5.0, "full state after ReportFullState"))
			ok = false;
	}
	printf("summary: mode=seqgap result=%s\n", ok ? "ok" : "FAIL");
	if (!ok)
		fail_msg("no ReportFullState flag after sequence_num jumped from %" PRIu64
			 " to %" PRIu64,
			 gap_seq - 4, gap_seq);
	return ok ? 0 : 1;
}

/* ---- setup ---- */

static void on_signal(int sig)
{
	L.stop = 1;
}

static int read_token(const char *dir, const char *name, char *dst, size_t cap)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	size_t n = fread(dst, 1, cap - 1, f);
	fclose(f);
	dst[n] = 0;
	while (n && (dst[n - 1] == '\n' || dst[n - 1] == '\r' || dst[n - 1] == ' '))
		dst[--n] = 0;
	return 0;
}

static void usage(FILE *f)
{
	fputs("usage: opamp-load --mode idle|push|rtt|steady|storm|garbage|oversize|seqgap [options]\n"
	      "  --agents N          simulated agents (default 1000; 1 for the probes)\n"
	      "  --host ADDR         controller IPv4 address (default 127.0.0.1)\n"
	      "  --port PORT         controller port (default 4320)\n"
	      "  --path PATH         OpAMP WebSocket path (default /v1/opamp)\n"
	      "  --data-dir DIR      read DIR/agent.token and DIR/admin.token\n"
	      "  --agent-token T     bearer token for the OpAMP upgrade\n"
	      "  --admin-token T     bearer token for the REST API\n"
	      "  --pid PID           controller pid (RSS in idle, CPU in rtt/steady, killed in storm)\n"
	      "  --pid-file F        storm: where the caller writes the restarted controller's pid\n"
	      "  --seconds S         rtt measurement length (default 10; steady: 60; storm: bound on\n"
	      "                      the reconnect, 120)\n"
	      "  --bytes N           oversize message size (default 64 MiB + 1)\n"
	      "  --src-addrs K       spread sources over 127.0.0.2..K+1 (default 8, 0 = off)\n"
	      "  --batch B           connects per batch (default 500)\n"
	      "  --settle S          idle: wait S after all connected before reading RSS; steady:\n"
	      "                      before the CPU window (default 2)\n"
	      "  --heartbeat S       periodic heartbeat interval, 0 = off (default 30)\n"
	      "  --max-msg N         largest server message accepted (default 64 MiB)\n"
	      "  --timeout S         bound on the whole run (default 300)\n"
	      "  --verbose           log every error_response and close\n"
	      "  --fail-hash H       agents in --fail-percent answer FAILED to config SHA-256 H\n"
	      "  --fail-percent P    share of agents (index mod 100 < P) that refuse H (default 0)\n"
	      "  --uid-seed N        instance uids derived from N and the index (same fleet again)\n",
	      f);
}

static int parse_num(const char *s, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "agents", required_argument, NULL, 'n' },
		{ "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' },
		{ "path", required_argument, NULL, 'P' },
		{ "data-dir", required_argument, NULL, 'd' },
		{ "agent-token", required_argument, NULL, 'a' },
		{ "admin-token", required_argument, NULL, 'A' },
		{ "pid", required_argument, NULL, 'i' },
		{ "seconds", required_argument, NULL, 's' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "src-addrs", required_argument, NULL, 'S' },
		{ "batch", required_argument, NULL, 'B' },
		{ "settle", required_argument, NULL, 'w' },
		{ "heartbeat", required_argument, NULL, 'h' },
		{ "max-msg", required_argument, NULL, 'M' },
		{ "timeout", required_argument, NULL, 't' },
		{ "pid-file", required_argument, NULL, 'W' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "fail-hash", required_argument, NULL, 'F' },
		{ "fail-percent", required_argument, NULL, 'f' },
		{ "uid-seed", required_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'x' },
		{ 0 },
	};
	const char *data_dir = NULL;
	bool agents_set = false, seconds_set = false, timeout_set = false;
	double v;
	int mode = -1;

	L.n_agents = 1000;
	snprintf(L.host, sizeof(L.host), "127.0.0.1");
	L.port = 4320;
	snprintf(L.path, sizeof(L.path), "/v1/opamp");
	L.src_addrs = 8;
	L.batch = 500;
	L.timeout_s = 300;
	L.seconds = 10;
	L.settle_s = 2;
	L.heartbeat_s = 30;
	L.bytes = ((size_t)64 << 20) + 1;
	L.max_msg = (size_t)64 << 20;

	int c, li = -1;
	while ((c = getopt_long(argc, argv, "", opts, &li)) != -1) {
		int bad = 0;
		switch (c) {
		case 'm':
			for (size_t i = 0; i < PF_ARRAY_SIZE(mode_names); i++)
				if (strcmp(optarg, mode_names[i]) == 0)
					mode = (int)i;
			bad = mode < 0;
			break;
		case 'n':
			bad = parse_num(optarg, 1, 1e6, &v);
			L.n_agents = (uint32_t)v;
			agents_set = true;
			break;
		case 'H':
			snprintf(L.host, sizeof(L.host), "%s", optarg);
			break;
		case 'p':
			bad = parse_num(optarg, 1, 65535, &v);
			L.port = (uint16_t)v;
			break;
		case 'P':
			snprintf(L.path, sizeof(L.path), "%s", optarg);
			break;
		case 'd':
			data_dir = optarg;
			break;
		case 'a':
			snprintf(L.agent_token, sizeof(L.agent_token), "%s", optarg);
			break;
		case 'A':
			snprintf(L.admin_token, sizeof(L.admin_token), "%s", optarg);
			break;
		case 'i':
			bad = parse_num(optarg, 1, 1e9, &v);
			L.pid = (long)v;
			break;
		case 's':
			bad = parse_num(optarg, 0.1, 86400, &L.seconds);
			seconds_set = true;
			break;
		case 'b':
			bad = parse_num(optarg, 1, 1e10, &v);
			L.bytes = (size_t)v;
			break;
		case 'S':
			bad = parse_num(optarg, 0, 250, &v);
			L.src_addrs = (uint32_t)v;
			break;
		case 'B':
			bad = parse_num(optarg, 1, 100000, &v);
			L.batch = (uint32_t)v;
			break;
		case 'w':
			bad = parse_num(optarg, 0, 3600, &L.settle_s);
			break;
		case 'h':
			bad = parse_num(optarg, 0, 86400, &L.heartbeat_s);
			break;
		case 'M':
			bad = parse_num(optarg, 1024, 1e10, &v);
			L.max_msg = (size_t)v;
			break;
		case 't':
			bad = parse_num(optarg, 1, 86400, &L.timeout_s);
			timeout_set = true;
			break;
		case 'W':
			snprintf(L.pid_file, sizeof(L.pid_file), "%s", optarg);
			break;
		case 'v':
			L.verbose = true;
			break;
		case 'F':
			bad = strlen(optarg) != 64 || hex_to_bytes(optarg, L.fail_hash, 32) < 0;
			L.fail_set = true;
			break;
		case 'f':
			bad = parse_num(optarg, 0, 100, &v);
			L.fail_percent = (uint32_t)v;
			break;
		case 'u':
			bad = parse_num(optarg, 1, 1e15, &v);
			L.uid_seed = (uint64_t)v;
			break;
		case 'x':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (bad) {
			fprintf(stderr, "opamp-load: bad value for --%s: %s\n",
				li >= 0 ? opts[li].name : "?", optarg);
			usage(stderr);
			return 2;
		}
	}
	if (mode < 0) {
		usage(stderr);
		return 2;
	}
	L.mode = (enum mode)mode;
	if (L.mode == MODE_STORM) {
		if (L.pid <= 0 || !L.pid_file[0]) {
			fprintf(stderr, "opamp-load: --mode storm needs --pid and --pid-file\n");
			return 2;
		}
		if (!seconds_set)
			L.seconds = 120;
		if (!timeout_set && L.timeout_s < L.seconds + L.settle_s + 120)
			L.timeout_s = L.seconds + L.settle_s + 120;
	}
	if (L.mode == MODE_STEADY) {
		if (!seconds_set)
			L.seconds = 60;
		if (L.heartbeat_s <= 0) {
			fprintf(stderr, "opamp-load: --mode steady needs --heartbeat > 0\n");
			return 2;
		}
		if (!timeout_set && L.timeout_s < L.seconds + L.settle_s + 120)
			L.timeout_s = L.seconds + L.settle_s + 120; /* room for the connects */
	}
	if (L.mode >= MODE_GARBAGE) {
		if (agents_set && L.n_agents != 1)
			fprintf(stderr, "opamp-load: --mode %s uses one agent\n", mode_names[mode]);
		L.n_agents = 1;
	}
	if (data_dir) {
		if (!L.agent_token[0] && read_token(data_dir, "agent.token", L.agent_token,
						    sizeof(L.agent_token)) < 0)
			fprintf(stderr, "opamp-load: no %s/agent.token\n", data_dir);
		if (!L.admin_token[0] && read_token(data_dir, "admin.token", L.admin_token,
						    sizeof(L.admin_token)) < 0)
			fprintf(stderr, "opamp-load: no %s/admin.token\n", data_dir);
	}
	if ((L.mode == MODE_PUSH || L.mode == MODE_STORM) && !L.admin_token[0]) {
		fprintf(stderr, "opamp-load: --mode %s needs the admin token (--data-dir)\n",
			mode_names[mode]);
		return 2;
	}

	L.dst.sin_family = AF_INET;
	L.dst.sin_port = htons(L.port);
	if (inet_pton(AF_INET, L.host, &L.dst.sin_addr) != 1) {
		fprintf(stderr, "opamp-load: --host must be an IPv4 address: %s\n", L.host);
		return 2;
	}
	if ((ntohl(L.dst.sin_addr.s_addr) >> 24) != 127)
		L.src_addrs = 0; /* extra source addresses only exist on loopback */
	snprintf(L.hostport, sizeof(L.hostport), "%s:%u", L.host, L.port);

	/* Each agent is one descriptor; keep a margin for epoll, REST, stdio. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (uint64_t)L.n_agents + 32 > rl.rlim_cur) {
		fprintf(stderr,
			"opamp-load: %u agents need %u descriptors; RLIMIT_NOFILE is %llu "
			"(hard limit); use fewer agents or several processes\n",
			L.n_agents, L.n_agents + 32, (unsigned long long)rl.rlim_cur);
		return 2;
	}

	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (getrandom(&L.rng, sizeof(L.rng), 0) != sizeof(L.rng) || L.rng == 0)
		L.rng = unix_ns() | 1;
	L.t_start = now_s();
	L.deadline = L.t_start + L.timeout_s;
	L.start_unix_ns = unix_ns();
	L.t_last_rx = L.t_start;
	L.http.fd = -1;
	pf_buf_init(&L.scratch, L.max_msg + 64);
	L.out_cap = pf_max(L.max_msg, L.bytes) + (1 << 20);
	pf_buf_init(&L.frame, L.out_cap);
	pf_buf_init(&L.cfg_body, 1 << 20);
	L.epfd = epoll_create1(EPOLL_CLOEXEC);
	L.agents = calloc(L.n_agents, sizeof(*L.agents));
	if (L.epfd < 0 || !L.agents) {
		fprintf(stderr, "opamp-load: setup failed: %s\n", strerror(errno));
		return 1;
	}
	for (uint32_t i = 0; i < L.n_agents; i++) {
		struct agent *a = &L.agents[i];
		a->fd = -1;
		a->idx = i;
		uid_make(a->uid);
		if (L.uid_seed) {
			/* splitmix64 of (seed, index): stable across runs, not in index order */
			uint64_t z = L.uid_seed * 0x9e3779b97f4a7c15ULL + i + 1;
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
			z ^= z >> 31;
			memcpy(a->uid, &L.uid_seed, 6);
			memcpy(a->uid + 8, &z, 8);
			a->uid[6] = 0x70;
			a->uid[7] = 0;
			a->uid[8] = (uint8_t)(0x80 | (a->uid[8] & 0x3f));
		}
		pf_buf_init(&a->in, 0);
		pf_buf_init(&a->out, 0);
		pf_buf_init(&a->frag, 0);
	}

	kv("mode", "%s", mode_names[mode]);
	kv("controller", "%s%s", L.hostport, L.path);
	int rc;
	switch (L.mode) {
	case MODE_IDLE:
		rc = mode_idle();
		break;
	case MODE_PUSH:
		rc = mode_push();
		break;
	case MODE_RTT:
		rc = mode_rtt();
		break;
	case MODE_STEADY:
		rc = mode_steady();
		break;
	case MODE_STORM:
		rc = mode_storm();
		break;
	case MODE_GARBAGE:
		rc = mode_garbage();
		break;
	case MODE_OVERSIZE:
		rc = mode_oversize();
		break;
	default:
		rc = mode_seqgap();
		break;
	}
	if (L.stop) {
		fail_msg("interrupted");
		rc = 1;
	}
	if (now_s() >= L.deadline) {
		fail_msg("--timeout of %.0f s reached", L.timeout_s);
		rc = 1;
	}

	for (uint32_t i = 0; i < L.n_agents; i++)
		agent_close(&L.agents[i]);
	if (L.http.active)
		http_finish(-ECANCELED);
	pf_buf_release(&L.http.out);
	pf_buf_release(&L.http.in);
	pf_buf_release(&L.http.body);
	pf_buf_release(&L.scratch);
	pf_buf_release(&L.frame);
	pf_buf_release(&L.cfg_body);
	free(L.agents);
	free(L.steady_order);
	close(L.epfd);
	return rc;
}
