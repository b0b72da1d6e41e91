/* tests/lib/http_stub.c — see http_stub.h. */
#include "http_stub.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void read_request(int fd, char *buf, size_t cap)
{
	size_t len = 0, want = 0;
	/* every round adds at least one byte or ends; the buffer bounds the total */
	while (len < cap - 1) {
		ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		char *end = strstr(buf, "\r\n\r\n");
		if (end && !want) {
			char *cl = strcasestr(buf, "Content-Length:");
			want = (size_t)(end + 4 - buf) +
			       (cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0);
		}
		if (want && len >= want)
			break;
	}
	buf[len] = '\0';
}

static void *serve(void *arg)
{
	struct http_stub *s = arg;
	while (!s->stop && s->n_requests < HTTP_STUB_MAX_REQUESTS) {
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0 || s->stop) {
			if (fd >= 0)
				close(fd);
			break;
		}
		size_t n = s->n_requests;
		if (n >= s->n_answers && !s->repeat_last) {
			close(fd);
			break;
		}
		read_request(fd, s->requests[n], HTTP_STUB_MAX_REQUEST);
		s->n_requests = n + 1;
		if (s->on_request)
			s->on_request(s, n);
		const char *a = s->answers[n < s->n_answers ? n : s->n_answers - 1];
		if (a) {
			size_t off = 0, len = strlen(a);
			while (off < len) {
				ssize_t w = send(fd, a + off, len - off, MSG_NOSIGNAL);
				if (w <= 0)
					break;
				off += (size_t)w;
			}
		} else {
			char c;
			while (recv(fd, &c, 1, 0) > 0)
				;
		}
		close(fd);
	}
	return NULL;
}

int http_stub_start(struct http_stub *s, const char *const *answers, size_t n, bool repeat_last)
{
	s->answers = answers;
	s->n_answers = n;
	s->repeat_last = repeat_last;
	s->n_requests = 0;
	s->stop = false;
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->lfd < 0)
		return -errno;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	if (bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s->lfd, 8) < 0 ||
	    getsockname(s->lfd, (struct sockaddr *)&a, &al) < 0) {
		int e = -errno;
		close(s->lfd);
		return e;
	}
	s->port = ntohs(a.sin_port);
	int rc = pthread_create(&s->thr, NULL, serve, s);
	if (rc) {
		close(s->lfd);
		return -rc;
	}
	return 0;
}

void http_stub_stop(struct http_stub *s)
{
	s->stop = true;
	/* wake a thread blocked in accept() */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)s->port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (fd >= 0) {
		connect(fd, (struct sockaddr *)&a, sizeof(a));
		close(fd);
	}
	pthread_join(s->thr, NULL);
	close(s->lfd);
}

char *http_stub_json(const char *status, const char *body)
{
	char *out;
	if (asprintf(&out,
		     "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\n%s",
		     status, strlen(body), body) < 0)
		return NULL;
	return out;
}
