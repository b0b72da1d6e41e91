/* capture_fake_agent.c — a scriptable OpAMP agent for the capture integration tests: real
 * OpAMP over a real WebSocket (proto/codec + bench/wsc.c framing), driven line by line from
 * stdin, reporting every ServerToAgent as one JSON line on stdout.
 *
 *   capture-fake-agent --port P --token-file F --uid UUID [--capture] [--label k=v]...
 *
 * First message: description (service.name=fake-agent, the labels), custom_capabilities
 * [io.profleet.capture.v1] with --capture. stdin commands:
 *   status <json>   sends a capture.status custom message with that payload
 *   heartbeat       sends an empty AgentToServer
 *   close           closes the socket without agent_disconnect and exits
 * EOF sends agent_disconnect and exits. stdout events:
 *   {"event":"message","flags":N,"custom_capabilities":[..],"custom":{"type":..,"data":{..}}}
 *   {"event":"closed"}
 * Exits 1 on a protocol error; every wait is bounded by poll timeouts (10 s without any
 * event ends the program). */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "opamp_codec.h"
#include "pf/buf.h"
#include "pf/capture_msg.h"
#include "pf/uuid.h"
#include "wsc.h"

#define MAX_MSG (1 << 20)
#define IDLE_MS 600000 /* the test kills us long before */

static int fd = -1;
static uint64_t seq;
static uint8_t uid[16];
static struct pf_buf rx;

static void out_json(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s) {
		printf("%s\n", s);
		fflush(stdout);
		free(s);
	}
}

static int send_all(const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int send_a2s(struct pf_a2s *m)
{
	struct pf_buf body, frame;
	uint32_t mask;
	int rc;

	memcpy(m->instance_uid, uid, 16);
	m->instance_uid_len = 16;
	m->sequence_num = ++seq;
	m->capabilities |= PF_AGENT_CAP_REPORTS_STATUS;
	pf_buf_init(&body, MAX_MSG);
	pf_buf_init(&frame, MAX_MSG + 16);
	if (getrandom(&mask, sizeof(mask), 0) != sizeof(mask))
		mask = 0x5a5a5a5a;
	rc = pf_opamp_ws_frame_header(&body);
	if (rc == 0)
		rc = pf_a2s_encode(m, &body);
	if (rc == 0)
		rc = wsc_frame_append(&frame, WSC_OP_BINARY, true, body.data, body.len, mask);
	if (rc == 0)
		rc = send_all(frame.data, frame.len);
	pf_buf_release(&body);
	pf_buf_release(&frame);
	return rc;
}

static void report(const uint8_t *msg, size_t len)
{
	const uint8_t *data;
	size_t n;
	struct pf_s2a *m = NULL;
	if (pf_opamp_ws_unframe(msg, len, &data, &n) < 0 ||
	    pf_s2a_decode(data, n, MAX_MSG, &m, NULL) < 0) {
		out_json(json_pack("{s:s}", "event", "undecodable"));
		return;
	}
	json_t *o = json_pack("{s:s,s:I}", "event", "message", "flags", (json_int_t)m->flags);
	json_t *caps = json_array();
	for (size_t i = 0; i < m->n_custom_capabilities; i++)
		json_array_append_new(caps, json_string(m->custom_capabilities[i]));
	json_object_set_new(o, "custom_capabilities", caps);
	if (m->has_error)
		json_object_set_new(o, "error",
				    json_string(m->error_message ? m->error_message : ""));
	if (m->has_custom_message) {
		json_t *d = json_loadb((const char *)m->custom_message.data,
				       m->custom_message.data_len, 0, NULL);
		json_object_set_new(o, "custom",
				    json_pack("{s:s?,s:s?,s:o}", "capability",
					      m->custom_message.capability, "type",
					      m->custom_message.type, "data", d ? d : json_null()));
	}
	pf_s2a_free(m);
	out_json(o);
}

/* Reads what the socket has and reports each complete message. -1 when closed. */
static int on_readable(void)
{
	uint8_t buf[65536];
	ssize_t r = recv(fd, buf, sizeof(buf), 0);
	if (r <= 0)
		return -1;
	if (pf_buf_append(&rx, buf, (size_t)r) < 0)
		return -1;
	size_t off = 0;
	for (;;) {
		struct wsc_frame f;
		ssize_t k = wsc_frame_parse(rx.data + off, rx.len - off, MAX_MSG, &f);
		if (k < 0)
			return -1;
		if (k == 0)
			break;
		if (f.opcode == WSC_OP_CLOSE)
			return -1;
		if (f.opcode == WSC_OP_BINARY && f.fin)
			report(f.payload, f.len);
		off += (size_t)k;
	}
	memmove(rx.data, rx.data + off, rx.len - off);
	rx.len -= off;
	return 0;
}

static int handshake(int port, const char *token)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	uint8_t rnd[16];
	char key[WSC_KEY_LEN + 1], host[64];
	struct pf_buf req;

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return -1;
	wsc_key_make(rnd, key);
	snprintf(host, sizeof(host), "127.0.0.1:%d", port);
	pf_buf_init(&req, 16384);
	int rc = wsc_request_append(&req, host, "/v1/opamp", key, token);
	if (rc == 0)
		rc = send_all(req.data, req.len);
	pf_buf_release(&req);
	if (rc < 0)
		return -1;
	for (int i = 0; i < 100; i++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		uint8_t buf[4096];
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		if (r <= 0 || pf_buf_append(&rx, buf, (size_t)r) < 0)
			return -1;
		int status = 0;
		ssize_t h = wsc_response_check(rx.data, rx.len, key, &status, NULL);
		if (h < 0) {
			fprintf(stderr, "handshake refused: HTTP %d\n", status);
			return -1;
		}
		if (h > 0) {
			memmove(rx.data, rx.data + h, rx.len - (size_t)h);
			rx.len -= (size_t)h;
			return 0;
		}
	}
	return -1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"port", required_argument, 0, 'p'},  {"token-file", required_argument, 0, 't'},
	    {"uid", required_argument, 0, 'u'},	  {"capture", no_argument, 0, 'c'},
	    {"label", required_argument, 0, 'l'}, {0, 0, 0, 0},
	};
	int port = 0, o;
	bool capture = false;
	char token[1024] = "";
	struct pf_kv labels[16];
	size_t n_labels = 0;

	pf_uuid_v7(uid);
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == 'p') {
			port = (int)strtol(optarg, NULL, 10);
		} else if (o == 't') {
			FILE *f = fopen(optarg, "r");
			if (!f || !fgets(token, sizeof(token), f))
				return 2;
			fclose(f);
			token[strcspn(token, "\r\n")] = 0;
		} else if (o == 'u') {
			if (pf_uuid_parse(optarg, uid) < 0)
				return 2;
		} else if (o == 'c') {
			capture = true;
		} else if (o == 'l' && n_labels < 16 && strchr(optarg, '=')) {
			char *eq = strchr(optarg, '=');
			*eq = 0;
			labels[n_labels++] = (struct pf_kv){optarg, eq + 1};
		} else {
			return 2;
		}
	}
	pf_buf_init(&rx, MAX_MSG + 64);
	if (!port || handshake(port, token) < 0) {
		fprintf(stderr, "cannot connect\n");
		return 1;
	}
	struct pf_kv ident[1] = {{"service.name", "fake-agent"}};
	char *caps[1] = {(char *)PF_CAPTURE_CAPABILITY};
	struct pf_a2s first = {
	    .has_description = true,
	    .n_identifying = 1,
	    .identifying = ident,
	    .n_non_identifying = n_labels,
	    .non_identifying = labels,
	    .has_custom_capabilities = capture,
	    .n_custom_capabilities = capture ? 1 : 0,
	    .custom_capabilities = caps,
	};
	if (send_a2s(&first) < 0)
		return 1;

	char line[70000];
	size_t line_len = 0;
	for (;;) {
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = 0, .events = POLLIN}};
		int n = poll(p, 2, IDLE_MS);
		if (n <= 0)
			return 1;
		if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && on_readable() < 0) {
			out_json(json_pack("{s:s}", "event", "closed"));
			return 0;
		}
		if (!(p[1].revents & (POLLIN | POLLHUP)))
			continue;
		ssize_t r = read(0, line + line_len, sizeof(line) - 1 - line_len);
		if (r <= 0) {
			struct pf_a2s bye = {.has_disconnect = true};
			send_a2s(&bye);
			close(fd);
			return 0;
		}
		line_len += (size_t)r;
		char *nl;
		while ((nl = memchr(line, '\n', line_len))) {
			*nl = 0;
			struct pf_a2s m = {0};
			if (strncmp(line, "status ", 7) == 0) {
				m.has_custom_message = true;
				m.custom_message.capability = (char *)PF_CAPTURE_CAPABILITY;
				m.custom_message.type = (char *)PF_CAPTURE_TYPE_STATUS;
				m.custom_message.data = (uint8_t *)line + 7;
				m.custom_message.data_len = strlen(line + 7);
			} else if (strcmp(line, "close") == 0) {
				close(fd);
				return 0;
			}
			if (send_a2s(&m) < 0)
				return 1;
			size_t used = (size_t)(nl - line) + 1;
			memmove(line, nl + 1, line_len - used);
			line_len -= used;
		}
		if (line_len == sizeof(line) - 1)
			return 1;
	}
}
