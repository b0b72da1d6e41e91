/* listen_addr.c — see listen_addr.h. */
#include "endpoints/listen_addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int agent_listen_addr_parse(const char *s, struct agent_listen_addr *out, struct pf_error *err)
{
	const char *colon, *host;
	size_t hlen;

	memset(out, 0, sizeof(*out));
	if (!s || !*s)
		return pf_error_set(err, -EINVAL, "--metrics-listen", "expected ADDR:PORT");
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb[1] != ':')
			return pf_error_set(err, -EINVAL, "--metrics-listen",
					    "expected [IPv6]:PORT, got '%s'", s);
		host = s + 1;
		hlen = (size_t)(rb - host);
		colon = rb + 1;
		out->v6 = true;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return pf_error_set(err, -EINVAL, "--metrics-listen",
					    "expected ADDR:PORT, got '%s'", s);
		host = s;
		hlen = (size_t)(colon - s);
		if (memchr(host, ':', hlen))
			return pf_error_set(err, -EINVAL, "--metrics-listen",
					    "IPv6 addresses go in brackets: [::1]:9464, got '%s'",
					    s);
	}
	const char *port = colon + 1;
	char *end;
	errno = 0;
	long v = strtol(port, &end, 10);
	if (!*port || *end || errno || v < 0 || v > 65535 || *port == '-' || *port == '+')
		return pf_error_set(err, -EINVAL, "--metrics-listen",
				    "port must be 0..65535, got '%s'", port);
	out->port = (int)v;
	if (hlen >= sizeof(out->host))
		return pf_error_set(err, -EINVAL, "--metrics-listen", "address too long in '%s'",
				    s);
	char h[sizeof(out->host)];
	memcpy(h, host, hlen);
	h[hlen] = '\0';
	if (!out->v6 && (!strcmp(h, "") || !strcmp(h, "*") || !strcmp(h, "0.0.0.0")))
		return 0; /* every interface */
	if (out->v6 && !strcmp(h, "::"))
		return 0;
	if (!out->v6 && !strcmp(h, "localhost")) {
		snprintf(out->host, sizeof(out->host), "127.0.0.1");
		return 0;
	}
	unsigned char addr[sizeof(struct in6_addr)];
	if (inet_pton(out->v6 ? AF_INET6 : AF_INET, h, addr) != 1)
		return pf_error_set(err, -EINVAL, "--metrics-listen",
				    "'%s' is not an IP%s address (use a literal, localhost, * or "
				    "[::])",
				    h, out->v6 ? "v6" : "v4");
	memcpy(out->host, h, hlen + 1);
	return 0;
}

int agent_listen_addr_probe(const struct agent_listen_addr *l)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fam;
	memset(&ss, 0, sizeof(ss));
	if (l->v6 || !l->host[0]) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		fam = AF_INET6;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)l->port);
		if (l->host[0] && inet_pton(AF_INET6, l->host, &a->sin6_addr) != 1)
			return -EINVAL;
		sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		fam = AF_INET;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)l->port);
		if (inet_pton(AF_INET, l->host, &a->sin_addr) != 1)
			return -EINVAL;
		sl = sizeof(*a);
	}
	int fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 && fam == AF_INET6 && !l->host[0]) { /* no IPv6: every IPv4 interface */
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		memset(&ss, 0, sizeof(ss));
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)l->port);
		a->sin_addr.s_addr = htonl(INADDR_ANY);
		sl = sizeof(*a);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	}
	if (fd < 0)
		return -errno;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	int rc = bind(fd, (struct sockaddr *)&ss, sl) < 0 ? -errno : 0;
	close(fd);
	return rc;
}
