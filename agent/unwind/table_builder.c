/* table_builder.c — see table_builder.h. */
#include "unwind/table_builder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pf/array.h"
#include "pf/clock.h"

struct job {
	char key[PF_TBUILDER_KEY_MAX];
	int fd;
	uint64_t cost; /* the file's size: what its build takes grows with it */
	bool urgent;   /* hurried: ahead of every file not hurried */
};

/* What the child writes per file: 8 bytes, atomic on a pipe. */
struct rec {
	uint32_t idx; /* into the batch */
	int32_t rc;
};

struct pf_tbuilder {
	char dir[PATH_MAX];
	bool own_dir;
	struct pf_tbuilder_kind kind;
	struct job queue[PF_TBUILDER_QUEUE];
	size_t qn;
	struct job batch[PF_TBUILDER_BATCH]; /* the running child's files */
	bool reported[PF_TBUILDER_BATCH];
	size_t bn;
	pid_t child;
	int rd;         /* the pipe's read end, -1 when no child */
	uint64_t started_ms;
	struct pf_tbuilder_stats st;
};

static bool key_ok(const char *key)
{
	size_t n = strlen(key);
	return n && n < PF_TBUILDER_KEY_MAX && n < 64 && strspn(key, PF_TBUILDER_KEY_CHARS) == n;
}

const char *pf_tbuilder_dir(const struct pf_tbuilder *b)
{
	return b->dir;
}

pid_t pf_tbuilder_child(const struct pf_tbuilder *b)
{
	return b->child;
}

bool pf_tbuilder_busy(const struct pf_tbuilder *b)
{
	return b->qn || b->child;
}

void pf_tbuilder_stats(const struct pf_tbuilder *b, struct pf_tbuilder_stats *out)
{
	*out = b->st;
}

bool pf_tbuilder_pending(const struct pf_tbuilder *b, const char *key)
{
	for (size_t i = 0; i < b->qn; i++)
		if (!strcmp(b->queue[i].key, key))
			return true;
	for (size_t i = 0; i < b->bn; i++)
		if (!b->reported[i] && !strcmp(b->batch[i].key, key))
			return true;
	return false;
}

void pf_tbuilder_key(const char *build_id, uint64_t dev, uint64_t ino, char *out, size_t cap)
{
	if (build_id && build_id[0])
		snprintf(out, cap, "%s", build_id);
	else
		snprintf(out, cap, "%llx-%llx", (unsigned long long)dev, (unsigned long long)ino);
}

bool pf_tbuilder_hurry(struct pf_tbuilder *b, const char *key)
{
	for (size_t i = 0; i < b->qn; i++) {
		if (strcmp(b->queue[i].key, key))
			continue;
		struct job j = b->queue[i];
		j.urgent = true;
		memmove(&b->queue[1], &b->queue[0], i * sizeof(*b->queue));
		b->queue[0] = j;
		return true;
	}
	return pf_tbuilder_pending(b, key);
}

int pf_tbuilder_submit(struct pf_tbuilder *b, const char *key, int fd)
{
	if (!key_ok(key) || fd < 0)
		return -EINVAL;
	if (pf_tbuilder_pending(b, key))
		return -EEXIST;
	if (b->qn == PF_TBUILDER_QUEUE)
		return -EAGAIN;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (d < 0)
		return -errno;
	/* smallest first (after hurried files; in order of arrival among equals): many small
	 * files' tables are not kept waiting behind one large file's */
	uint64_t cost = st.st_size > 0 ? (uint64_t)st.st_size : 0;
	size_t at = b->qn;
	while (at > 0 && !b->queue[at - 1].urgent && b->queue[at - 1].cost > cost)
		at--;
	memmove(&b->queue[at + 1], &b->queue[at], (b->qn - at) * sizeof(*b->queue));
	b->qn++;
	struct job *j = &b->queue[at];
	*j = (struct job){.fd = d, .cost = cost};
	snprintf(j->key, sizeof(j->key), "%s", key);
	return 0;
}

/* ---- the child ---------------------------------------------------------------------------- */

static int fd_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* Closes every descriptor from 3 up but the n in keep: the agent's sockets, perf events and
 * BPF objects stay with the agent alone. */
static void close_others(int *keep, size_t n)
{
	qsort(keep, n, sizeof(*keep), fd_cmp);
	unsigned lo = 3;
	for (size_t i = 0; i < n; i++) {
		if ((unsigned)keep[i] > lo)
			close_range(lo, (unsigned)keep[i] - 1, 0);
		if ((unsigned)keep[i] + 1 > lo)
			lo = (unsigned)keep[i] + 1;
	}
	close_range(lo, ~0u, 0);
}

/* Builds the batch and reports each file. Only what a forked child of a threaded process may
 * do: glibc's malloc and stdio are reset by fork; no locks of the agent's are taken (no
 * logging), and it ends with _exit (no atexit handlers, no stdio flushes of the parent's). */
static _Noreturn void child_main(struct pf_tbuilder *b, int wr)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() == 1)
		_exit(2);
	prctl(PR_SET_NAME, b->kind.name);
	int keep[PF_TBUILDER_BATCH + 1];
	for (size_t i = 0; i < b->bn; i++)
		keep[i] = b->batch[i].fd;
	keep[b->bn] = wr;
	close_others(keep, b->bn + 1);
	for (size_t i = 0; i < b->bn; i++) {
		int rc = b->kind.build(b->kind.arg, b->batch[i].fd, b->dir, b->batch[i].key);
		struct rec r = {.idx = (uint32_t)i, .rc = rc};
		if (write(wr, &r, sizeof(r)) != (ssize_t)sizeof(r))
			_exit(1);
	}
	_exit(0);
}

/* ---- the parent --------------------------------------------------------------------------- */

static void batch_done(struct pf_tbuilder *b, size_t i, int rc,
		       void (*done)(void *, const char *, int), void *ctx)
{
	if (b->reported[i])
		return;
	b->reported[i] = true;
	if (rc == 0)
		b->st.built++;
	else
		b->st.failed++;
	if (done)
		done(ctx, b->batch[i].key, rc);
}

static void read_records(struct pf_tbuilder *b, void (*done)(void *, const char *, int),
			 void *ctx)
{
	struct rec r[PF_TBUILDER_BATCH];
	for (;;) {
		ssize_t n = read(b->rd, r, sizeof(r));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		for (size_t k = 0; k < (size_t)n / sizeof(*r); k++)
			if (r[k].idx < b->bn)
				batch_done(b, r[k].idx, r[k].rc, done, ctx);
	}
}

/* The child has exited (or was killed): the files it did not report fail with rc. */
static void batch_end(struct pf_tbuilder *b, int rc, void (*done)(void *, const char *, int),
		      void *ctx)
{
	read_records(b, done, ctx);
	for (size_t i = 0; i < b->bn; i++) {
		batch_done(b, i, rc, done, ctx);
		close(b->batch[i].fd);
	}
	b->bn = 0;
	close(b->rd);
	b->rd = -1;
	b->child = 0;
}

static int child_start(struct pf_tbuilder *b)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	/* the queue's first files, up to PF_TBUILDER_BATCH_BYTES of them (at least one): a file
	 * queued while a child runs waits for that child's files only */
	size_t n = 1;
	uint64_t bytes = b->queue[0].cost;
	while (n < b->qn && n < PF_TBUILDER_BATCH &&
	       bytes + b->queue[n].cost <= PF_TBUILDER_BATCH_BYTES)
		bytes += b->queue[n++].cost;
	memcpy(b->batch, b->queue, n * sizeof(*b->batch));
	memset(b->reported, 0, sizeof(b->reported));
	b->bn = n;
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		b->bn = 0;
		return -e;
	}
	if (pid == 0) {
		close(p[0]);
		child_main(b, p[1]);
	}
	close(p[1]);
	fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
	memmove(b->queue, b->queue + n, (b->qn - n) * sizeof(*b->queue));
	b->qn -= n;
	b->rd = p[0];
	b->child = pid;
	b->started_ms = pf_mono_ms();
	b->st.children++;
	return 0;
}

int pf_tbuilder_poll(struct pf_tbuilder *b, bool start,
		     void (*done)(void *ctx, const char *key, int rc), void *ctx, uint64_t *cpu_ns)
{
	if (cpu_ns)
		*cpu_ns = 0;
	if (b->child) {
		read_records(b, done, ctx);
		int status;
		struct rusage ru;
		pid_t w = wait4(b->child, &status, WNOHANG, &ru);
		bool overdue = !w && pf_mono_ms() - b->started_ms > PF_TBUILDER_CHILD_MAX_MS;
		if (overdue) {
			kill(b->child, SIGKILL);
			w = wait4(b->child, &status, 0, &ru);
		}
		if (w == b->child || (w < 0 && errno == ECHILD)) {
			if (w == b->child) {
				uint64_t ns =
				    ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
					1000000000ull +
				    ((uint64_t)ru.ru_utime.tv_usec +
				     (uint64_t)ru.ru_stime.tv_usec) *
					1000ull;
				b->st.cpu_ns += ns;
				if ((uint64_t)ru.ru_maxrss > b->st.max_rss_kb)
					b->st.max_rss_kb = (uint64_t)ru.ru_maxrss;
				if (cpu_ns)
					*cpu_ns = ns;
			}
			bool clean = w == b->child && WIFEXITED(status) && !WEXITSTATUS(status);
			if (!clean)
				b->st.killed++;
			batch_end(b, overdue ? -ETIMEDOUT : -ECHILD, done, ctx);
		}
	}
	if (!b->child && start && b->qn)
		return child_start(b);
	return 0;
}

/* ---- the budget ------------------------------------------------------------------------------ */

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void pf_tbuilder_budget_init(struct pf_tbuilder_budget *b, int64_t rate_ns_per_s, int64_t burst_ns)
{
	*b = (struct pf_tbuilder_budget){burst_ns, rate_ns_per_s / 1000, burst_ns, mono_ns()};
}

bool pf_tbuilder_budget_ok(struct pf_tbuilder_budget *b)
{
	uint64_t ms = (mono_ns() - b->at_ns) / 1000000;
	b->ns += (int64_t)ms * b->rate_ns_per_ms;
	b->at_ns += ms * 1000000;
	if (b->ns > b->burst_ns)
		b->ns = b->burst_ns;
	return b->ns > 0;
}

void pf_tbuilder_tick(struct pf_tbuilder *b, struct pf_tbuilder_budget *budget,
		      void (*done)(void *ctx, const char *key, int rc), void *ctx,
		      uint64_t *cpu_ns_total, int *last_error)
{
	if (!pf_tbuilder_busy(b))
		return;
	uint64_t ns = 0;
	int rc = pf_tbuilder_poll(b, pf_tbuilder_budget_ok(budget), done, ctx, &ns);
	budget->ns -= (int64_t)ns;
	*cpu_ns_total += ns;
	if (rc < 0)
		*last_error = rc;
}

static int write_part(int fd, const struct iovec *v)
{
	const char *p = v->iov_base;
	size_t n = v->iov_len;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int pf_tbuilder_write_file(const char *dir, const char *path, const struct iovec *parts,
			   size_t n)
{
	char tmp[PATH_MAX + 32];
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int rc = 0;
	for (size_t i = 0; !rc && i < n; i++)
		rc = write_part(fd, &parts[i]);
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

/* ---- the directory's bound ------------------------------------------------------------------ */

struct table_file {
	char name[80];
	uint64_t size;
	struct timespec mtime;
};

static int table_file_cmp(const void *x, const void *y)
{
	const struct table_file *a = x, *b = y;
	if (a->mtime.tv_sec != b->mtime.tv_sec)
		return a->mtime.tv_sec < b->mtime.tv_sec ? -1 : 1;
	return (a->mtime.tv_nsec > b->mtime.tv_nsec) - (a->mtime.tv_nsec < b->mtime.tv_nsec);
}

int64_t pf_tbuilder_prune(const char *dir, const char *suffix, uint64_t max_bytes)
{
	size_t sfx = strlen(suffix);
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	struct table_file *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	int rc = 0;
	for (struct dirent *e; (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		struct stat st;
		if (len <= sfx || len >= sizeof(v->name) || strcmp(e->d_name + len - sfx, suffix) ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (PF_ARRAY_GROW(v, cap, n + 1, 64) < 0) {
			rc = -ENOMEM;
			break;
		}
		memcpy(v[n].name, e->d_name, len + 1);
		v[n].size = (uint64_t)st.st_size;
		v[n].mtime = st.st_mtim;
		total += v[n++].size;
	}
	if (!rc && total > max_bytes) {
		qsort(v, n, sizeof(*v), table_file_cmp);
		for (size_t i = 0; i < n && total > max_bytes / 4 * 3; i++)
			if (unlinkat(dirfd(d), v[i].name, 0) == 0)
				total -= v[i].size;
	}
	closedir(d);
	free(v);
	return rc ? rc : (int64_t)total;
}

void pf_tbuilder_account(const char *dir, const char *key, const char *suffix, uint64_t max_bytes,
			 uint64_t *dir_bytes)
{
	char path[PATH_MAX];
	struct stat st;
	if (snprintf(path, sizeof(path), "%s/%s%s", dir, key, suffix) >= (int)sizeof(path))
		return;
	if (strchr(key, '-'))
		unlink(path);
	else if (stat(path, &st) == 0)
		*dir_bytes += (uint64_t)st.st_size;
	if (*dir_bytes > max_bytes) {
		int64_t left = pf_tbuilder_prune(dir, suffix, max_bytes);
		if (left >= 0)
			*dir_bytes = (uint64_t)left;
	}
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

/* Removes the private directory and the tables in it. */
static void dir_remove(const char *dir)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				unlinkat(dirfd(d), e->d_name, 0);
		closedir(d);
	}
	rmdir(dir);
}

void pf_tbuilder_free(struct pf_tbuilder *b)
{
	if (!b)
		return;
	if (b->child) {
		kill(b->child, SIGKILL);
		waitpid(b->child, NULL, 0);
		b->child = 0;
		for (size_t i = 0; i < b->bn; i++)
			close(b->batch[i].fd);
		close(b->rd);
	}
	for (size_t i = 0; i < b->qn; i++)
		close(b->queue[i].fd);
	if (b->own_dir)
		dir_remove(b->dir);
	free(b);
}

struct pf_tbuilder *pf_tbuilder_new(const char *dir, const struct pf_tbuilder_kind *kind)
{
	if (!kind || !kind->build || !kind->name) {
		errno = EINVAL;
		return NULL;
	}
	struct pf_tbuilder *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->rd = -1;
	b->kind = *kind;
	if (dir) {
		if (snprintf(b->dir, sizeof(b->dir), "%s", dir) >= (int)sizeof(b->dir)) {
			free(b);
			errno = ENAMETOOLONG;
			return NULL;
		}
		return b;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(b->dir, sizeof(b->dir), "%s/profleet-tables.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(b->dir)) {
		int e = errno;
		free(b);
		errno = e;
		return NULL;
	}
	b->own_dir = true;
	return b;
}
