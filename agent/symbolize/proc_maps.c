/* proc_maps.c — see proc_maps.h. */
#include "symbolize/proc_maps.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "symbolize/vdso.h"

static int hexdigit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* A hex number ending at `stop`; advances past it. */
bool pmap_hex_field(const char **c, uint64_t *v, char stop)
{
	const char *p = *c;
	uint64_t x = 0;
	int d;
	for (; (d = hexdigit(*p)) >= 0; p++)
		x = x << 4 | (uint64_t)d;
	if (p == *c || *p != stop)
		return false;
	*v = x;
	*c = p + 1;
	return true;
}

static bool dec_field(const char **c, uint64_t *v)
{
	const char *p = *c;
	uint64_t x = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		x = x * 10 + (uint64_t)(*p - '0');
	if (p == *c)
		return false;
	*v = x;
	*c = p;
	return true;
}

/* PROCMAP_QUERY (Linux 6.11, include/uapi/linux/fs.h): one ioctl per executable mapping on a
 * /proc/PID/maps fd, instead of the kernel formatting every mapping as text and us parsing it
 * (about half the cost for a typical process). Declared here: Debian 12's headers predate it. */
struct pf_procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset;
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	uint32_t vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define PF_PROCMAP_QUERY _IOWR('f', 17, struct pf_procmap_query)
#define PF_PROCMAP_QUERY_VMA_WRITABLE 0x02
#define PF_PROCMAP_QUERY_VMA_EXECUTABLE 0x04
#define PF_PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10

static int procmap_query_state; /* 0 unknown, 1 works, -1 not on this kernel */

void pmap_free_all(struct pmap *maps, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(maps[i].path);
	free(maps);
}

static int pmap_cmp(const void *a, const void *b)
{
	const struct pmap *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

static int pmap_push(struct pmap **maps, size_t *n, size_t *cap, uint64_t start, uint64_t end,
		     uint64_t off, uint64_t dev, uint64_t ino, const char *path)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct pmap *nm = realloc(*maps, nc * sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		*maps = nm;
		*cap = nc;
	}
	struct pmap *m = &(*maps)[*n];
	memset(m, 0, sizeof(*m));
	m->start = start;
	m->end = end;
	m->offset = off;
	m->dev = dev;
	m->ino = ino;
	m->special = path[0] != '/';
	m->path = strdup(path[0] ? path : "[anon]");
	if (!m->path)
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* The executable mappings through PROCMAP_QUERY. -ENOTTY when the kernel lacks it. */
static int query_maps(int fd, struct pmap **maps, size_t *n, size_t *cap)
{
	char name[PATH_MAX];
	uint64_t addr = 0;
	for (unsigned guard = 0; guard < 65536; guard++) {
		struct pf_procmap_query q = {
			.size = sizeof(q),
			.query_flags = PF_PROCMAP_QUERY_VMA_EXECUTABLE |
				       PF_PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
			.query_addr = addr,
			.vma_name_size = sizeof(name),
			.vma_name_addr = (uint64_t)(uintptr_t)name,
		};
		name[0] = 0;
		if (ioctl(fd, PF_PROCMAP_QUERY, &q) < 0) {
			if (errno == ENOENT) /* no more */
				return 0;
			return errno == ENOTTY || errno == EINVAL ? -ENOTTY
				: errno == ESRCH ? -ENOENT : -errno;
		}
		if (q.vma_end <= addr)
			return -EIO;
		addr = q.vma_end;
		int rc = pmap_push(maps, n, cap, q.vma_start, q.vma_end, q.vma_offset,
				   makedev(q.dev_major, q.dev_minor), q.inode,
				   q.vma_name_size ? name : "");
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The executable mappings from the text of /proc/PID/maps. */
static int text_maps(int fd, struct pmap **maps, size_t *n, size_t *cap)
{
	FILE *fp = fdopen(fd, "re");
	if (!fp)
		return -errno;
	char *line = NULL;
	size_t linecap = 0;
	int rc = 0;
	while (rc == 0 && getline(&line, &linecap, fp) > 0) {
		/* "start-end perms offset maj:min inode   path"; sscanf was the hot spot */
		uint64_t start, end, off, ino, maj, min;
		const char *c = line;
		if (!pmap_hex_field(&c, &start, '-') || !pmap_hex_field(&c, &end, ' '))
			continue;
		if (strnlen(c, 5) < 5 || c[2] != 'x' || c[4] != ' ')
			continue; /* not executable */
		c += 5;
		if (!pmap_hex_field(&c, &off, ' ') || !pmap_hex_field(&c, &maj, ':') ||
		    !pmap_hex_field(&c, &min, ' ') || !dec_field(&c, &ino))
			continue;
		while (*c == ' ')
			c++;
		char *path = line + (c - line);
		path[strcspn(path, "\n")] = 0;
		rc = pmap_push(maps, n, cap, start, end, off,
			       makedev((unsigned int)maj, (unsigned int)min), ino, path);
	}
	free(line);
	fclose(fp); /* closes fd */
	return rc;
}

int pmap_read_all(uint32_t pid, struct pmap **out, size_t *n_out)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%u/maps", pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? -ENOENT : -errno;
	struct pmap *maps = NULL;
	size_t n = 0, cap = 0;
	int rc = -ENOTTY;
	if (procmap_query_state >= 0) {
		rc = query_maps(fd, &maps, &n, &cap);
		if (rc == -ENOTTY && procmap_query_state == 0)
			procmap_query_state = -1;
		else if (rc == 0)
			procmap_query_state = 1;
	}
	if (rc == -ENOTTY) {
		rc = text_maps(fd, &maps, &n, &cap);
		fd = -1;
	}
	if (fd >= 0)
		close(fd);
	if (rc < 0) {
		pmap_free_all(maps, n);
		return rc;
	}
	for (size_t i = 1; i < n; i++) {
		if (maps[i].start < maps[i - 1].start) { /* both sources list in address order */
			qsort(maps, n, sizeof(*maps), pmap_cmp);
			break;
		}
	}
	/* checked now, while the process lives: its frames may be named after it exited */
	for (size_t i = 0; i < n; i++)
		if (maps[i].special && !strcmp(maps[i].path, "[vdso]"))
			maps[i].vdso = pf_vdso_same(pid, maps[i].start, maps[i].end) ? 1 : -1;
	*out = maps;
	*n_out = n;
	return 0;
}

int pf_exec_maps_render(uint32_t pid, bool text, char *buf, size_t cap)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%u/maps", pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct pmap *maps = NULL;
	size_t n = 0, mcap = 0;
	int rc = text ? text_maps(fd, &maps, &n, &mcap) : query_maps(fd, &maps, &n, &mcap);
	if (!text)
		close(fd);
	size_t used = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		int k = snprintf(buf + used, cap - used, "%" PRIx64 "-%" PRIx64 " %" PRIx64
				 " %" PRIu64 " %" PRIu64 " %s\n",
				 maps[i].start, maps[i].end, maps[i].offset, maps[i].dev,
				 maps[i].ino, maps[i].path);
		if (k < 0 || (size_t)k >= cap - used)
			rc = -ENOSPC;
		else
			used += (size_t)k;
	}
	pmap_free_all(maps, n);
	return rc < 0 ? rc : (int)used;
}

/* True when [a, a + len) lies in one read-only mapping of the file (dev, ino) in this
 * process: libelf's mmap of it (ELF_C_READ_MMAP), not the heap copy it falls back to when
 * mmap fails. Such pages can only be clean copies of the file. */
bool pmap_self_mapped_ro(uint64_t a, size_t len, uint64_t dev, uint64_t ino)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct pf_procmap_query q = {.size = sizeof(q), .query_addr = a};
	if (procmap_query_state >= 0 && ioctl(fd, PF_PROCMAP_QUERY, &q) == 0) {
		close(fd);
		return q.vma_start <= a && a + len <= q.vma_end && q.inode == ino &&
		       makedev(q.dev_major, q.dev_minor) == dev &&
		       !(q.vma_flags & PF_PROCMAP_QUERY_VMA_WRITABLE);
	}
	FILE *mf = fdopen(fd, "r"); /* before Linux 6.11: the text */
	if (!mf) {
		close(fd);
		return false;
	}
	char line[512];
	bool ok = false;
	while (fgets(line, sizeof(line), mf)) {
		uint64_t lo, hi, i;
		unsigned maj, min;
		char perm[8];
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %*x %x:%x %" SCNu64, &lo, &hi,
			   perm, &maj, &min, &i) != 6 || a < lo || a >= hi)
			continue;
		ok = a + len <= hi && i == ino && makedev(maj, min) == dev && perm[1] == '-';
		break;
	}
	fclose(mf);
	return ok;
}
