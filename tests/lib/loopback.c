/* loopback.c — see loopback.h. */
#include "loopback.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static int bound(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &l) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

int test_loopback_listen(int backlog, int *port)
{
	int fd = bound(port);
	if (fd >= 0 && listen(fd, backlog) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

int test_dead_port(void)
{
	int port;
	int fd = bound(&port);
	if (fd < 0)
		return fd;
	close(fd);
	return port;
}
