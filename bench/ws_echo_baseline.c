/* ws_echo_baseline.c — `ws-echo-baseline`, the floor for the control-plane rtt benchmark.
 *
 * A minimal single-threaded epoll WebSocket server that accepts the upgrade opamp-load sends
 * (any path, any Authorization) and answers every complete binary message with one fixed,
 * pre-encoded ServerToAgent frame: the ack the controller sends to a heartbeat (instance_uid
 * and capabilities). It does no decoding beyond RFC 6455 framing: the payload of a client
 * frame is not even unmasked. What it costs per round trip is therefore about one epoll
 * wake-up share + one recv() + one send() through the loopback TCP stack: the kernel's floor
 * on this machine, against which docs/benchmarks.md ("Control plane") compares the controller.
 *
 *   ws-echo-baseline --listen 127.0.0.1:4399 [--seconds S] [--max-conns N]
 *
 * Level-triggered epoll, one recv() per readiness event (as the controller's event loop does),
 * one send() per reply; a reply that does not fit the socket buffer is kept and flushed on
 * EPOLLOUT. Pings are answered with pongs, a close frame with a close frame. A client frame or
 * handshake over the per-connection buffer (16 KiB) closes the connection: the benchmark's
 * heartbeats are a few dozen bytes and its full status a few hundred. The process exits on
 * SIGTERM/SIGINT or after --seconds (default 900), so no run is unbounded; it prints its
 * counters on stderr at exit. Exit 0, 1 on a setup error, 2 on bad usage. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "opamp_codec.h"
#include "pf/buf.h"
#include "wsc.h"

#define CONN_BUF 16384
#define MAX_EVENTS 256

/* The controller's server capabilities (controller/opamp/session.c, SERVER_CAPS). */
#define ACK_CAPS                                                                                   \
	(PF_SERVER_CAP_ACCEPTS_STATUS | PF_SERVER_CAP_OFFERS_REMOTE_CONFIG |                       \
	 PF_SERVER_CAP_ACCEPTS_EFFECTIVE_CONFIG | PF_SERVER_CAP_OFFERS_CONNECTION_SETTINGS)

enum conn_state { CS_HANDSHAKE, CS_OPEN };

struct conn {
	int fd;
	enum conn_state state;
	bool want_out;   /* EPOLLOUT armed */
	uint32_t in_len;
	uint32_t out_len, out_off;
	uint8_t in[CONN_BUF];
	uint8_t out[CONN_BUF];
};

static volatile sig_atomic_t stop;
static int epfd;
static uint8_t ack[64]; /* the pre-encoded reply frame */
static size_t ack_len;
static struct {
	uint64_t accepted, closed, messages, replies, send_partial, protocol_errors;
} st;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void conn_close(struct conn *c)
{
	epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c);
	st.closed++;
}

static void set_out_interest(struct conn *c, bool on)
{
	if (c->want_out == on)
		return;
	struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c };
	epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
	c->want_out = on;
}

/* Sends what is queued; false when the connection died. */
static bool conn_flush(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n > 0) {
			c->out_off += (uint32_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			st.send_partial++;
			set_out_interest(c, true);
			return true;
		}
		return false;
	}
	c->out_off = c->out_len = 0;
	set_out_interest(c, false);
	return true;
}

/* Queues p[0..n) and sends at once when nothing is pending (the common case: exactly one
 * send() per reply). */
static bool conn_reply(struct conn *c, const uint8_t *p, size_t n)
{
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (n > sizeof(c->out) - c->out_len)
		return false; /* the peer does not read: give up on it */
	memcpy(c->out + c->out_len, p, n);
	c->out_len += (uint32_t)n;
	if (c->want_out)
		return true; /* EPOLLOUT will flush */
	return conn_flush(c);
}

/* The value of header `name` in an HTTP head, or NULL. Sets *vl. */
static const char *header_value(const char *head, size_t hl, const char *name, size_t *vl)
{
	size_t nl = strlen(name);
	const char *p = memchr(head, '\n', hl);
	const char *end = head + hl;
	while (p && p + 1 < end) {
		const char *ls = p + 1;
		const char *le = memchr(ls, '\n', (size_t)(end - ls));
		if (!le)
			return NULL;
		if ((size_t)(le - ls) > nl && strncasecmp(ls, name, nl) == 0 && ls[nl] == ':') {
			const char *v = ls + nl + 1;
			const char *ve = le;
			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			*vl = (size_t)(ve - v);
			return v;
		}
		p = le;
	}
	return NULL;
}

/* RFC 6455 §4.2.1/§4.2.2: answers the opening handshake. Returns the bytes consumed, 0 when
 * the head is incomplete, -1 on a bad request. */
static ssize_t do_handshake(struct conn *c)
{
	const char *s = (const char *)c->in;
	const char *e = NULL;
	for (uint32_t i = 3; i < c->in_len; i++)
		if (c->in[i] == '\n' && c->in[i - 1] == '\r' && c->in[i - 2] == '\n' &&
		    c->in[i - 3] == '\r') {
			e = s + i + 1;
			break;
		}
	if (!e)
		return 0;
	size_t hl = (size_t)(e - s), kl = 0;
	const char *key = header_value(s, hl, "Sec-WebSocket-Key", &kl);
	if (strncmp(s, "GET ", 4) != 0 || !key || kl != WSC_KEY_LEN)
		return -1;
	char k[WSC_KEY_LEN + 1], accept[WSC_ACCEPT_LEN + 1];
	memcpy(k, key, WSC_KEY_LEN);
	k[WSC_KEY_LEN] = 0;
	wsc_accept_for(k, accept);
	char resp[256];
	int n = snprintf(resp, sizeof(resp),
			 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			 "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			 accept);
	if (n < 0 || (size_t)n >= sizeof(resp) || !conn_reply(c, (const uint8_t *)resp, (size_t)n))
		return -1;
	c->state = CS_OPEN;
	return (ssize_t)hl;
}

/* Handles one client frame at p[0..n) (RFC 6455 §5.2). Returns its size, 0 when incomplete,
 * -1 to close the connection. */
static ssize_t do_frame(struct conn *c, const uint8_t *p, size_t n)
{
	if (n < 2)
		return 0;
	bool fin = p[0] & 0x80;
	uint8_t op = p[0] & 0x0f;
	if (!(p[1] & 0x80) || (p[0] & 0x70))
		return -1; /* client frames must be masked, no extensions negotiated */
	uint64_t len = p[1] & 0x7f;
	size_t h = 2;
	if (len == 126) {
		if (n < 4)
			return 0;
		len = (uint64_t)p[2] << 8 | p[3];
		h = 4;
	} else if (len == 127) {
		if (n < 10)
			return 0;
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | p[2 + i];
		h = 10;
	}
	if (len > CONN_BUF)
		return -1;
	if (n < h + 4 + len)
		return 0;
	const uint8_t *mask = p + h;
	const uint8_t *pl = p + h + 4;
	switch (op) {
	case WSC_OP_BINARY:
	case WSC_OP_CONT:
		/* One reply per complete message; the payload is not looked at. */
		if (fin) {
			st.messages++;
			if (!conn_reply(c, ack, ack_len))
				return -1;
			st.replies++;
		}
		break;
	case WSC_OP_PING:
	case WSC_OP_CLOSE: {
		if (len > 125)
			return -1;
		uint8_t f[2 + 125];
		f[0] = (uint8_t)(0x80 | (op == WSC_OP_PING ? WSC_OP_PONG : WSC_OP_CLOSE));
		f[1] = (uint8_t)len;
		for (uint64_t i = 0; i < len; i++)
			f[2 + i] = pl[i] ^ mask[i & 3];
		if (!conn_reply(c, f, 2 + len) || op == WSC_OP_CLOSE)
			return -1;
		break;
	}
	case WSC_OP_PONG:
		break;
	default:
		st.protocol_errors++;
		return -1; /* text frames and reserved opcodes: not OpAMP */
	}
	return (ssize_t)(h + 4 + len);
}

static void conn_readable(struct conn *c)
{
	/* One recv() per readiness event (level-triggered): what is left is reported again. */
	ssize_t r = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, 0);
	if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
		conn_close(c);
		return;
	}
	if (r < 0)
		return;
	c->in_len += (uint32_t)r;
	size_t off = 0;
	for (;;) {
		ssize_t used = c->state == CS_HANDSHAKE ? do_handshake(c)
							: do_frame(c, c->in + off, c->in_len - off);
		if (used < 0) {
			conn_close(c);
			return;
		}
		if (used == 0)
			break;
		off += (size_t)used;
		if (off == c->in_len)
			break;
	}
	if (off) {
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= (uint32_t)off;
	}
	if (c->in_len == sizeof(c->in)) {
		st.protocol_errors++;
		conn_close(c); /* a frame or head larger than the buffer */
	}
}

static int build_ack(void)
{
	/* instance_uid: any 16 bytes; opamp-load does not compare it. */
	struct pf_s2a m = { .instance_uid_len = PF_OPAMP_UID_LEN, .capabilities = ACK_CAPS };
	for (int i = 0; i < PF_OPAMP_UID_LEN; i++)
		m.instance_uid[i] = (uint8_t)(0xa0 + i);
	struct pf_buf b;
	pf_buf_init(&b, 1024);
	int r = pf_opamp_ws_frame_header(&b);
	if (r == 0)
		r = pf_s2a_encode(&m, &b);
	if (r == 0 && b.len + 2 <= sizeof(ack) && b.len < 126) {
		ack[0] = 0x80 | WSC_OP_BINARY;
		ack[1] = (uint8_t)b.len;
		memcpy(ack + 2, b.data, b.len);
		ack_len = b.len + 2;
	} else if (r == 0) {
		r = -E2BIG;
	}
	pf_buf_release(&b);
	return r;
}

static void usage(FILE *f)
{
	fputs("usage: ws-echo-baseline --listen ADDR:PORT [--seconds S] [--max-conns N]\n"
	      "  --listen ADDR:PORT  IPv4 address and port (default 127.0.0.1:4399)\n"
	      "  --seconds S         exit after S seconds (default 900)\n"
	      "  --max-conns N       refuse connections beyond N (default 20000)\n",
	      f);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "seconds", required_argument, NULL, 's' },
		{ "max-conns", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char host[64] = "127.0.0.1";
	long port = 4399, max_conns = 20000;
	double seconds = 900;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'l': {
			const char *colon = strrchr(optarg, ':');
			if (!colon || (size_t)(colon - optarg) >= sizeof(host)) {
				usage(stderr);
				return 2;
			}
			memcpy(host, optarg, (size_t)(colon - optarg));
			host[colon - optarg] = 0;
			errno = 0;
			port = strtol(colon + 1, &end, 10);
			if (errno || *end || port < 1 || port > 65535) {
				usage(stderr);
				return 2;
			}
			break;
		}
		case 's':
			errno = 0;
			seconds = strtod(optarg, &end);
			if (errno || *end || seconds <= 0 || seconds > 86400) {
				usage(stderr);
				return 2;
			}
			break;
		case 'm':
			errno = 0;
			max_conns = strtol(optarg, &end, 10);
			if (errno || *end || max_conns < 1) {
				usage(stderr);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}

	if (build_ack() < 0) {
		fprintf(stderr, "ws-echo-baseline: cannot encode the ack\n");
		return 1;
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
		fprintf(stderr, "ws-echo-baseline: --listen needs an IPv4 address: %s\n", host);
		return 2;
	}
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(lfd, 4096) < 0) {
		fprintf(stderr, "ws-echo-baseline: cannot listen on %s:%ld: %s\n", host, port,
			strerror(errno));
		return 1;
	}
	epfd = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event lev = { .events = EPOLLIN, .data.ptr = NULL };
	if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &lev) < 0) {
		fprintf(stderr, "ws-echo-baseline: epoll: %s\n", strerror(errno));
		return 1;
	}
	fprintf(stderr, "ws-echo-baseline: listening on %s:%ld, ack frame %zu bytes\n", host, port,
		ack_len);

	double deadline = now_s() + seconds;
	long open = 0;
	struct epoll_event evs[MAX_EVENTS];
	while (!stop) {
		double left = deadline - now_s();
		if (left <= 0)
			break;
		int n = epoll_wait(epfd, evs, MAX_EVENTS, left > 1 ? 1000 : (int)(left * 1000) + 1);
		if (n < 0 && errno != EINTR) {
			fprintf(stderr, "ws-echo-baseline: epoll_wait: %s\n", strerror(errno));
			return 1;
		}
		for (int i = 0; i < n; i++) {
			struct conn *cn = evs[i].data.ptr;
			if (!cn) {
				for (;;) {
					int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
					if (fd < 0)
						break;
					if (open - (long)st.closed >= max_conns) {
						close(fd);
						continue;
					}
					setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
					struct conn *nc = malloc(sizeof(*nc));
					if (!nc) {
						close(fd);
						continue;
					}
					nc->fd = fd;
					nc->state = CS_HANDSHAKE;
					nc->want_out = false;
					nc->in_len = nc->out_len = nc->out_off = 0;
					struct epoll_event ev = { .events = EPOLLIN, .data.ptr = nc };
					if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
						close(fd);
						free(nc);
						continue;
					}
					open++;
					st.accepted++;
				}
				continue;
			}
			if ((evs[i].events & EPOLLOUT) && !conn_flush(cn)) {
				conn_close(cn);
				continue;
			}
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				conn_readable(cn);
		}
	}
	fprintf(stderr,
		"ws-echo-baseline: accepted %" PRIu64 " closed %" PRIu64 " messages %" PRIu64
		" replies %" PRIu64 " send_eagain %" PRIu64 " protocol_errors %" PRIu64 "\n",
		st.accepted, st.closed, st.messages, st.replies, st.send_partial,
		st.protocol_errors);
	return 0;
}
