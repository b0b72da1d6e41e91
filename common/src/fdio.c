/* fdio.c — see pf/fdio.h. */
#include "pf/fdio.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

int pf_write_all(int fd, const void *data, size_t len)
{
	const uint8_t *p = data;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}
