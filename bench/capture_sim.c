/* capture_sim.c — `capture-sim`, many simulated capture-capable agents in one process, for the
 * capture latency benchmark (bench/capture_latency.py, docs/benchmarks.md "Incident captures").
 *
 * Each simulated agent is a real OpAMP WebSocket connection (bench/wsc.h framing, the
 * project's codec) that advertises io.profleet.capture.v1 and behaves like profleet-agent
 * does for a capture: on capture.request it answers `accepted` and `running`, and when the
 * duration has elapsed it POSTs a small CPU profile (OTLP, gzip; one process tagged
 * profleet.capture.id / profleet.trigger=on_demand / profleet.agent.uid, duration x frequency
 * samples over three stacks, encoded when the request arrives: a real agent encodes on its own
 * host, in parallel with the others, so the simulator's serial encoding must not delay the
 * uploads) to the controller's /v1development/profiles with the agent token, and reports `done`
 * with the profile id once the receiver answered 2xx (503/429 are retried after 200 ms, like the
 * agent's exporter backs off). Uploads run concurrently, at most --uploads (default 256) at a
 * time. capture.cancel ends a capture `cancelled` without an upload.
 *
 *   capture-sim --port P --token-file F [--agents N] [--label k=v]... [--uploads K]
 *               [--timeout S]
 *
 * Prints "ready N" once every agent has its first reply, then one line per finished upload
 * ("uploaded <capture id> <agent index> <ms after the due time>"). Runs until --timeout
 * (default 600 s) or SIGTERM. One thread, one poll() set; every wait is bounded. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#undef PF_MAX

#include "http1.h"
#include "opamp_codec.h"
#include "otlp_profiles.h"
#include "pf/buf.h"
#include "pf/capture_msg.h"
#include "pf/gzip.h"
#include "pf/profile.h"
#include "pf/uuid.h"
#include "wsc.h"

#define MAX_AGENTS 2000
#define MAX_JOBS 8192
#define MAX_MSG (1 << 20)
#define RETRY_MS 200

struct sim_agent {
	int fd;
	uint8_t uid[16];
	uint64_t seq;
	bool replied;
	struct pf_buf rx;
};

enum job_state { JOB_WAIT, JOB_UPLOAD, JOB_FREE };

struct job {
	enum job_state state;
	struct pf_buf body; /* the gzip'd OTLP request, made when the request arrives */
	uint32_t agent;
	char id[PF_CAPTURE_ID_MAX + 1];
	uint32_t duration_s, frequency_hz;
	double due;	/* when the capture's duration has elapsed */
	double retry_at; /* 0, or when to retry a refused upload */
	int fd;		/* upload socket, -1 when none */
	struct pf_buf out, in;
	size_t sent;
	uint8_t profile_id[16];
	uint64_t samples, bytes;
};

static struct {
	int port;
	char token[1024];
	uint32_t n_agents;
	uint32_t max_uploads;
	double timeout_s;
	struct pf_kv labels[16];
	size_t n_labels;
	struct sim_agent agents[MAX_AGENTS];
	struct job jobs[MAX_JOBS];
	uint32_t uploads;
	volatile sig_atomic_t stop;
} S = {.n_agents = 200, .max_uploads = 256, .timeout_s = 600};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int send_all(int fd, const uint8_t *p, size_t n)
{
	double deadline = now_s() + 5;
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && (errno == EINTR || errno == EAGAIN)) {
			struct pollfd pf = {.fd = fd, .events = POLLOUT};
			if (now_s() > deadline)
				return -ETIMEDOUT;
			poll(&pf, 1, 50);
			continue;
		}
		if (w <= 0)
			return -EPIPE;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int tcp_connect(bool nonblock)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)S.port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static int send_a2s(struct sim_agent *a, struct pf_a2s *m)
{
	struct pf_buf body, frame;
	uint32_t mask = 0x5a5a5a5a;
	memcpy(m->instance_uid, a->uid, 16);
	m->instance_uid_len = 16;
	m->sequence_num = ++a->seq;
	m->capabilities |= PF_AGENT_CAP_REPORTS_STATUS | PF_AGENT_CAP_REPORTS_HEARTBEAT;
	pf_buf_init(&body, MAX_MSG);
	pf_buf_init(&frame, MAX_MSG + 16);
	if (getrandom(&mask, sizeof(mask), 0) != sizeof(mask))
		mask = 0x5a5a5a5a;
	int rc = pf_opamp_ws_frame_header(&body);
	if (rc == 0)
		rc = pf_a2s_encode(m, &body);
	if (rc == 0)
		rc = wsc_frame_append(&frame, WSC_OP_BINARY, true, body.data, body.len, mask);
	if (rc == 0)
		rc = send_all(a->fd, frame.data, frame.len);
	pf_buf_release(&body);
	pf_buf_release(&frame);
	return rc;
}

static void send_status(struct job *j, enum pf_capture_state st, const char *code)
{
	struct pf_capture_status s = {.state = st, .samples = j->samples, .bytes = j->bytes};
	struct pf_buf payload;
	struct pf_a2s m = {0};
	snprintf(s.id, sizeof(s.id), "%s", j->id);
	if (st == PF_CAPTURE_DONE) {
		s.n_profile_ids = 1;
		memcpy(s.profile_ids[0], j->profile_id, 16);
	}
	if (code)
		snprintf(s.error_code, sizeof(s.error_code), "%s", code);
	pf_buf_init(&payload, PF_CAPTURE_MAX_MSG);
	if (pf_capture_status_encode(&s, &payload) == 0) {
		m.has_custom_message = true;
		m.custom_message.capability = (char *)PF_CAPTURE_CAPABILITY;
		m.custom_message.type = (char *)PF_CAPTURE_TYPE_STATUS;
		m.custom_message.data = payload.data;
		m.custom_message.data_len = payload.len;
		send_a2s(&S.agents[j->agent], &m);
	}
	pf_buf_release(&payload);
}

static int handshake(struct sim_agent *a)
{
	uint8_t rnd[16];
	char key[WSC_KEY_LEN + 1], host[64];
	struct pf_buf req;
	a->fd = tcp_connect(false);
	if (a->fd < 0)
		return a->fd;
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return -EIO;
	wsc_key_make(rnd, key);
	snprintf(host, sizeof(host), "127.0.0.1:%d", S.port);
	pf_buf_init(&req, 16384);
	int rc = wsc_request_append(&req, host, "/v1/opamp", key, S.token);
	if (rc == 0)
		rc = send_all(a->fd, req.data, req.len);
	pf_buf_release(&req);
	for (int i = 0; rc == 0 && i < 100; i++) {
		struct pollfd p = {.fd = a->fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		uint8_t buf[4096];
		ssize_t r = recv(a->fd, buf, sizeof(buf), 0);
		if (r <= 0 || pf_buf_append(&a->rx, buf, (size_t)r) < 0)
			return -EPIPE;
		int status = 0;
		ssize_t h = wsc_response_check(a->rx.data, a->rx.len, key, &status, NULL);
		if (h < 0) {
			fprintf(stderr, "capture-sim: handshake refused: HTTP %d\n", status);
			return -EPROTO;
		}
		if (h > 0) {
			memmove(a->rx.data, a->rx.data + h, a->rx.len - (size_t)h);
			a->rx.len -= (size_t)h;
			fcntl(a->fd, F_SETFL, fcntl(a->fd, F_GETFL) | O_NONBLOCK);
			return 0;
		}
	}
	return rc ? rc : -ETIMEDOUT;
}

static int agent_hello(uint32_t i)
{
	struct sim_agent *a = &S.agents[i];
	char name[32], uidstr[PF_UUID_STR_LEN + 1];
	struct pf_kv ident[2], non[18];
	char *caps[1] = {(char *)PF_CAPTURE_CAPABILITY};
	struct pf_a2s m = {0};

	pf_uuid_format(a->uid, uidstr);
	snprintf(name, sizeof(name), "sim-%u", i);
	ident[0] = (struct pf_kv){"service.name", "capture-sim"};
	ident[1] = (struct pf_kv){"service.instance.id", uidstr};
	non[0] = (struct pf_kv){"host.name", name};
	for (size_t k = 0; k < S.n_labels; k++)
		non[1 + k] = S.labels[k];
	m.has_description = true;
	m.n_identifying = 2;
	m.identifying = ident;
	m.n_non_identifying = 1 + S.n_labels;
	m.non_identifying = non;
	m.has_custom_capabilities = true;
	m.n_custom_capabilities = 1;
	m.custom_capabilities = caps;
	m.has_health = true;
	m.health.healthy = true;
	m.health.status = (char *)"simulated";
	return send_a2s(a, &m);
}

static int build_profile(struct job *j, struct pf_buf *otlp);

static struct job *job_find(uint32_t agent, const char *id)
{
	for (size_t k = 0; k < MAX_JOBS; k++)
		if (S.jobs[k].state != JOB_FREE && S.jobs[k].agent == agent &&
		    strcmp(S.jobs[k].id, id) == 0)
			return &S.jobs[k];
	return NULL;
}

static void job_free(struct job *j)
{
	if (j->fd >= 0) {
		close(j->fd);
		S.uploads--;
	}
	j->fd = -1;
	pf_buf_release(&j->out);
	pf_buf_release(&j->in);
	pf_buf_release(&j->body);
	j->state = JOB_FREE;
}

static void on_custom(uint32_t agent, const struct pf_custom_message *cm)
{
	if (strcmp(cm->capability, PF_CAPTURE_CAPABILITY) != 0)
		return;
	if (strcmp(cm->type, PF_CAPTURE_TYPE_CANCEL) == 0) {
		char id[PF_CAPTURE_ID_MAX + 1];
		struct job *j;
		if (pf_capture_cancel_decode(cm->data, cm->data_len, id, NULL) == 0 &&
		    (j = job_find(agent, id)) && j->state == JOB_WAIT) {
			send_status(j, PF_CAPTURE_CANCELLED, "cancelled");
			job_free(j);
		}
		return;
	}
	if (strcmp(cm->type, PF_CAPTURE_TYPE_REQUEST) != 0)
		return;
	struct pf_capture_request r;
	int rc = pf_capture_request_decode(cm->data, cm->data_len, &r, NULL);
	struct job *j = NULL;
	for (size_t k = 0; rc == 0 && k < MAX_JOBS && !j; k++)
		if (S.jobs[k].state == JOB_FREE)
			j = &S.jobs[k];
	if (j && !job_find(agent, r.id)) {
		memset(j, 0, sizeof(*j));
		j->state = JOB_WAIT;
		j->agent = agent;
		j->fd = -1;
		snprintf(j->id, sizeof(j->id), "%s", r.id);
		j->duration_s = r.duration_seconds;
		j->frequency_hz = r.frequency_hz;
		j->due = now_s() + r.duration_seconds;
		pf_buf_init(&j->body, 64 << 20);
		send_status(j, PF_CAPTURE_ACCEPTED, NULL);
		send_status(j, PF_CAPTURE_RUNNING, NULL);
		if (build_profile(j, &j->body) < 0) {
			send_status(j, PF_CAPTURE_FAILED, "internal");
			job_free(j);
		}
	}
	pf_capture_request_release(&r);
}

static int agent_readable(uint32_t i)
{
	struct sim_agent *a = &S.agents[i];
	uint8_t buf[65536];
	ssize_t r = recv(a->fd, buf, sizeof(buf), 0);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (r <= 0 || pf_buf_append(&a->rx, buf, (size_t)r) < 0)
		return -EPIPE;
	size_t off = 0;
	for (;;) {
		struct wsc_frame f;
		ssize_t k = wsc_frame_parse(a->rx.data + off, a->rx.len - off, MAX_MSG, &f);
		if (k < 0)
			return -EPROTO;
		if (k == 0)
			break;
		off += (size_t)k;
		if (f.opcode == WSC_OP_CLOSE)
			return -EPIPE;
		const uint8_t *data;
		size_t n;
		struct pf_s2a *m = NULL;
		if (f.opcode != WSC_OP_BINARY || !f.fin ||
		    pf_opamp_ws_unframe(f.payload, f.len, &data, &n) < 0 ||
		    pf_s2a_decode(data, n, MAX_MSG, &m, NULL) < 0)
			continue;
		a->replied = true;
		if (m->has_custom_message)
			on_custom(i, &m->custom_message);
		pf_s2a_free(m);
	}
	memmove(a->rx.data, a->rx.data + off, a->rx.len - off);
	a->rx.len -= off;
	return 0;
}

/* The capture's profile: one process, three stacks in the ratio 3:2:1, every sample at its
 * own time within the capture. */
static int build_profile(struct job *j, struct pf_buf *otlp)
{
	static const char *const fn[] = {"main", "handle_request", "compute_price", "db_query",
					 "render"};
	char uidstr[PF_UUID_STR_LEN + 1];
	struct pf_error err = {0};
	struct pf_prof_window *w = pf_prof_window_new();
	if (!w)
		return -ENOMEM;
	uint64_t span = (uint64_t)j->duration_s * 1000000000ull;
	w->start_unix_ns = unix_ns();
	w->end_unix_ns = w->start_unix_ns + span;
	w->frequency_hz = j->frequency_hz;
	w->host_name = pf_prof_strdup(w, "sim");
	struct pf_prof_process *p = pf_prof_alloc(w, sizeof(*p));
	struct pf_prof_attr *at = pf_prof_alloc(w, 4 * sizeof(*at));
	struct pf_prof_frame *fr = pf_prof_alloc(w, 5 * sizeof(*fr));
	struct pf_prof_stack *st = pf_prof_alloc(w, 3 * sizeof(*st));
	struct pf_prof_sample *sa = pf_prof_alloc(w, 3 * sizeof(*sa));
	uint32_t *idx = pf_prof_alloc(w, 9 * sizeof(uint32_t));
	uint64_t total = (uint64_t)j->duration_s * j->frequency_hz;
	uint64_t *ts = pf_prof_alloc(w, (total + 6) * sizeof(uint64_t));
	if (!p || !at || !fr || !st || !sa || !idx || !ts) {
		pf_prof_window_free(w);
		return -ENOMEM;
	}
	pf_uuid_format(S.agents[j->agent].uid, uidstr);
	at[0] = (struct pf_prof_attr){"service.name", "capture-sim"};
	at[1] = (struct pf_prof_attr){"profleet.capture.id", pf_prof_strdup(w, j->id)};
	at[2] = (struct pf_prof_attr){"profleet.trigger", "on_demand"};
	at[3] = (struct pf_prof_attr){"profleet.agent.uid", pf_prof_strdup(w, uidstr)};
	for (int k = 0; k < 5; k++)
		fr[k] = (struct pf_prof_frame){.address = 0x1000u + 0x10u * (unsigned)k,
					       .mapping = -1,
					       .function = fn[k]};
	/* leaf first: compute_price<-handle_request<-main, db_query<-..., render<-main */
	uint32_t shapes[3][3] = {{2, 1, 0}, {3, 1, 0}, {4, 0, 0}};
	uint32_t lens[3] = {3, 3, 2};
	uint64_t counts[3] = {total / 2, total / 3, total - total / 2 - total / 3};
	size_t t = 0;
	for (int k = 0; k < 3; k++) {
		memcpy(idx + 3 * k, shapes[k], sizeof(shapes[k]));
		st[k] = (struct pf_prof_stack){.n_frames = lens[k], .frames = idx + 3 * k};
		sa[k] = (struct pf_prof_sample){.stack = (uint32_t)k, .tid = 1000 + j->agent,
						.count = counts[k], .n_timestamps =
									(uint32_t)counts[k],
						.timestamps = ts + t};
		for (uint64_t c = 0; c < counts[k]; c++, t++)
			ts[t] = w->start_unix_ns + (span / (total + 1)) * (t + 1);
	}
	*p = (struct pf_prof_process){.pid = 1000 + j->agent, .n_attrs = 4, .attrs = at,
				      .n_frames = 5, .frames = fr, .n_stacks = 3, .stacks = st,
				      .n_samples = 3, .samples = sa};
	w->n_processes = 1;
	w->processes = p;
	struct pf_buf raw;
	pf_buf_init(&raw, 64 << 20);
	int rc = pf_otlp_profiles_encode(w, &raw, j->profile_id, &err);
	if (rc == 0)
		rc = pf_gzip_compress(raw.data, raw.len, 1, otlp);
	j->samples = total;
	j->bytes = otlp->len;
	pf_buf_release(&raw);
	pf_prof_window_free(w);
	return rc;
}

static void upload_start(struct job *j, double t)
{
	pf_buf_init(&j->out, 64 << 20);
	pf_buf_init(&j->in, 16 << 20);
	/* http1_request_append sends no Content-Encoding: the request is written here. */
	int rc = pf_buf_printf(&j->out,
			       "POST /v1development/profiles HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
			       "Authorization: Bearer %s\r\n"
			       "Content-Type: application/x-protobuf\r\n"
			       "Content-Encoding: gzip\r\nContent-Length: %zu\r\n"
			       "Connection: close\r\n\r\n",
			       S.port, S.token, j->body.len);
	if (rc == 0)
		rc = pf_buf_append(&j->out, j->body.data, j->body.len);
	if (rc == 0)
		j->fd = tcp_connect(true);
	if (rc < 0 || j->fd < 0) {
		fprintf(stderr, "capture-sim: upload for %s: %s\n", j->id,
			strerror(rc < 0 ? -rc : -j->fd));
		j->fd = -1;
		send_status(j, PF_CAPTURE_FAILED, "export_failed");
		job_free(j);
		return;
	}
	S.uploads++;
	j->sent = 0;
	j->state = JOB_UPLOAD;
	(void)t;
}

static void upload_event(struct job *j, short rev, double t)
{
	if (rev & POLLOUT && j->sent < j->out.len) {
		ssize_t w = send(j->fd, j->out.data + j->sent, j->out.len - j->sent, MSG_NOSIGNAL);
		if (w > 0)
			j->sent += (size_t)w;
		else if (errno != EAGAIN && errno != EINTR)
			rev |= POLLERR;
	}
	bool eof = false;
	if (rev & (POLLIN | POLLHUP | POLLERR)) {
		uint8_t buf[16384];
		ssize_t r = recv(j->fd, buf, sizeof(buf), 0);
		if (r > 0)
			pf_buf_append(&j->in, buf, (size_t)r);
		else if (r == 0 || (errno != EAGAIN && errno != EINTR))
			eof = true;
	}
	int status = 0;
	struct pf_buf body;
	pf_buf_init(&body, 1 << 20);
	int rc = http1_response_parse(j->in.data, j->in.len, eof, &status, &body, NULL);
	pf_buf_release(&body);
	if (rc == 0 && !eof)
		return;
	close(j->fd);
	j->fd = -1;
	S.uploads--;
	if (rc == 1 && status >= 200 && status < 300) {
		send_status(j, PF_CAPTURE_DONE, NULL);
		printf("uploaded %s %u %.0f\n", j->id, j->agent, (t - j->due) * 1000);
		fflush(stdout);
		job_free(j);
	} else if (rc == 1 && (status == 503 || status == 429)) {
		pf_buf_reset(&j->in);
		pf_buf_release(&j->out);
		j->state = JOB_WAIT;
		j->retry_at = t + RETRY_MS / 1000.0;
	} else {
		fprintf(stderr, "capture-sim: upload for %s: HTTP %d\n", j->id, status);
		send_status(j, PF_CAPTURE_FAILED, "export_failed");
		job_free(j);
	}
}

static void on_signal(int sig)
{
	(void)sig;
	S.stop = 1;
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{"port", required_argument, 0, 'p'},	{"token-file", required_argument, 0, 't'},
		{"agents", required_argument, 0, 'n'},	{"label", required_argument, 0, 'l'},
		{"uploads", required_argument, 0, 'u'}, {"timeout", required_argument, 0, 'T'},
		{0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *end = NULL;
		if (o == 'p') {
			S.port = (int)strtol(optarg, &end, 10);
		} else if (o == 't') {
			FILE *f = fopen(optarg, "r");
			if (!f || !fgets(S.token, sizeof(S.token), f)) {
				fprintf(stderr, "capture-sim: cannot read %s\n", optarg);
				if (f)
					fclose(f);
				return -1;
			}
			fclose(f);
			S.token[strcspn(S.token, "\r\n")] = 0;
			end = (char *)"";
		} else if (o == 'n') {
			S.n_agents = (uint32_t)strtoul(optarg, &end, 10);
		} else if (o == 'u') {
			S.max_uploads = (uint32_t)strtoul(optarg, &end, 10);
		} else if (o == 'T') {
			S.timeout_s = strtod(optarg, &end);
		} else if (o == 'l' && S.n_labels < 16 && strchr(optarg, '=')) {
			char *eq = strchr(optarg, '=');
			*eq = 0;
			S.labels[S.n_labels++] = (struct pf_kv){optarg, eq + 1};
			end = (char *)"";
		}
		if (!end || *end)
			return -1;
	}
	if (S.port <= 0 || S.port > 65535 || !S.token[0] || S.n_agents < 1 ||
	    S.n_agents > MAX_AGENTS || S.max_uploads < 1 || S.timeout_s <= 0)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	static struct pollfd pfd[MAX_AGENTS + MAX_JOBS];
	static struct job *pjob[MAX_AGENTS + MAX_JOBS];
	if (parse_args(argc, argv) < 0) {
		fputs("usage: capture-sim --port P --token-file F [--agents N<=2000] [--label k=v]... "
		      "[--uploads K] [--timeout S]\n",
		      stderr);
		return 2;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	for (size_t k = 0; k < MAX_JOBS; k++)
		S.jobs[k] = (struct job){.state = JOB_FREE, .fd = -1};
	for (uint32_t i = 0; i < S.n_agents; i++) {
		struct sim_agent *a = &S.agents[i];
		pf_buf_init(&a->rx, MAX_MSG + 64);
		pf_uuid_v7(a->uid);
		int rc = handshake(a);
		if (rc == 0)
			rc = agent_hello(i);
		if (rc < 0) {
			fprintf(stderr, "capture-sim: agent %u: %s\n", i, strerror(-rc));
			return 1;
		}
	}
	double start = now_s(), end = start + S.timeout_s;
	bool ready = false;
	while (!S.stop && now_s() < end) {
		double t = now_s();
		nfds_t n = 0;
		for (uint32_t i = 0; i < S.n_agents; i++) {
			pfd[n] = (struct pollfd){.fd = S.agents[i].fd, .events = POLLIN};
			pjob[n++] = NULL;
		}
		int wait_ms = 100;
		for (size_t k = 0; k < MAX_JOBS; k++) {
			struct job *j = &S.jobs[k];
			if (j->state == JOB_WAIT && t >= j->due && t >= j->retry_at &&
			    S.uploads < S.max_uploads)
				upload_start(j, t);
			if (j->state == JOB_UPLOAD) {
				short ev = POLLIN | (j->sent < j->out.len ? POLLOUT : 0);
				pfd[n] = (struct pollfd){.fd = j->fd, .events = ev};
				pjob[n++] = j;
			} else if (j->state == JOB_WAIT) {
				double at = j->due > j->retry_at ? j->due : j->retry_at;
				int ms = (int)((at - t) * 1000) + 1;
				if (ms < wait_ms)
					wait_ms = ms < 1 ? 1 : ms;
			}
		}
		if (poll(pfd, n, wait_ms) < 0 && errno != EINTR)
			break;
		t = now_s();
		for (nfds_t k = 0; k < n; k++) {
			if (!pfd[k].revents)
				continue;
			if (pjob[k]) {
				upload_event(pjob[k], pfd[k].revents, t);
			} else if (agent_readable((uint32_t)k) < 0) {
				fprintf(stderr, "capture-sim: agent %u lost its connection\n",
					(unsigned)k);
				return 1;
			}
		}
		if (!ready) {
			uint32_t got = 0;
			for (uint32_t i = 0; i < S.n_agents; i++)
				got += S.agents[i].replied;
			if (got == S.n_agents) {
				printf("ready %u\n", got);
				fflush(stdout);
				ready = true;
			}
		}
	}
	return 0;
}
