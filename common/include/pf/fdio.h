/* pf/fdio.h — whole-buffer writes on a file descriptor, for the modules that write files
 * (the agent's state, spill and file exporter, ctl's downloads). */
#ifndef PF_FDIO_H
#define PF_FDIO_H

#include <stddef.h>

/* Writes all len bytes of data to fd, continuing after short writes and EINTR. 0, or -errno
 * of the write(2) that failed (what was written before it stays written). */
int pf_write_all(int fd, const void *data, size_t len);

#endif
