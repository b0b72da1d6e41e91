/* export_dir.c — see export_dir.h. */
#include "export/export_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pf/fdio.h"

static int mkdir_one(const char *p, mode_t mode)
{
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int agent_export_dir_open(struct agent_export_dir *d, const char *path, mode_t mode,
			  bool make_parent, const char *key, struct pf_error *err)
{
	d->path = NULL;
	d->fd = -1;
	char parent[PATH_MAX];
	size_t len = strlen(path);
	if (make_parent && len < sizeof(parent)) {
		memcpy(parent, path, len + 1);
		char *slash = strrchr(parent, '/');
		if (slash && slash != parent) {
			*slash = 0;
			mkdir_one(parent, mode);
		}
	}
	int r = mkdir_one(path, mode);
	if (r < 0)
		return pf_error_set(err, r, key, "cannot create directory '%s': %s", path,
				    strerror(-r));
	d->path = strdup(path);
	d->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!d->path || d->fd < 0) {
		int e = d->path ? errno : ENOMEM;
		agent_export_dir_close(d);
		return pf_error_set(err, -e, key, "cannot open directory '%s': %s", path,
				    strerror(e));
	}
	return 0;
}

void agent_export_dir_close(struct agent_export_dir *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
	free(d->path);
	d->path = NULL;
}

DIR *agent_export_dir_entries(const struct agent_export_dir *d)
{
	int fd = dup(d->fd);
	if (fd < 0)
		return NULL;
	DIR *dir = fdopendir(fd);
	if (!dir) {
		int e = errno;
		close(fd);
		errno = e;
		return NULL;
	}
	rewinddir(dir); /* a duplicate shares the position of the last listing */
	return dir;
}

bool agent_export_dir_temp_of(const char *n, char *inner, size_t cap)
{
	size_t len = strlen(n);
	if (len < 6 || n[0] != '.' || strcmp(n + len - 4, ".tmp") != 0 || len - 5 >= cap)
		return false;
	memcpy(inner, n + 1, len - 5);
	inner[len - 5] = 0;
	return true;
}

int agent_export_dir_write(const struct agent_export_dir *d, const char *name, mode_t mode,
			   bool sync, const struct iovec *parts, size_t n)
{
	char tmp[NAME_MAX + 1];
	if ((size_t)snprintf(tmp, sizeof(tmp), ".%s.tmp", name) >= sizeof(tmp))
		return -ENAMETOOLONG;
	int fd = openat(d->fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	int r = 0;
	for (size_t i = 0; r == 0 && i < n; i++)
		if (parts[i].iov_len)
			r = pf_write_all(fd, parts[i].iov_base, parts[i].iov_len);
	if (r == 0 && sync && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(d->fd, tmp, d->fd, name) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(d->fd, tmp, 0);
		return r;
	}
	if (sync)
		fsync(d->fd);
	return 0;
}
