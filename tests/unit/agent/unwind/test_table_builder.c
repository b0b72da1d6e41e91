/* test_table_builder.c — unit tests of agent/unwind/table_builder.h: a child builds libc's
 * table into the directory, identical to one built in this process; failures (not ELF, a
 * killed child) are reported per file; keys and the queue are bounded; descriptors of the
 * parent do not leak into the child; a private directory goes away with the builder. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "unwind/table_builder.h"
#include "unwind/unwind_table.h"

static const struct pf_tbuilder_kind unwind_kind = {"pf-unwind-build",
						    pf_unwind_table_build_store, 0};

struct result {
	char key[PF_TBUILDER_KEY_MAX];
	int rc;
};

struct results {
	struct result r[PF_TBUILDER_QUEUE];
	size_t n;
};

static void on_done(void *ctx, const char *key, int rc)
{
	struct results *rs = ctx;
	assert_true(rs->n < PF_TBUILDER_QUEUE);
	snprintf(rs->r[rs->n].key, sizeof(rs->r[rs->n].key), "%s", key);
	rs->r[rs->n++].rc = rc;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Polls until want results arrived or 20 s passed; the children's CPU time in *cpu. */
static void poll_until(struct pf_tbuilder *b, struct results *rs, size_t want, uint64_t *cpu)
{
	uint64_t end = now_ms() + 20000;
	while (rs->n < want && now_ms() < end) {
		uint64_t ns = 0;
		assert_int_equal(pf_tbuilder_poll(b, true, on_done, rs, &ns), 0);
		if (cpu)
			*cpu += ns;
		usleep(2000);
	}
	for (int i = 0; i < 1000 && pf_tbuilder_busy(b); i++) {
		uint64_t ns = 0;
		pf_tbuilder_poll(b, true, on_done, rs, &ns);
		if (cpu)
			*cpu += ns;
		usleep(2000);
	}
	assert_int_equal(rs->n, want);
	assert_false(pf_tbuilder_busy(b));
}

/* libc's path, from the address of one of its functions. */
static const char *libc_path(void)
{
	Dl_info info;
	assert_true(dladdr((void *)qsort, &info) != 0);
	return info.dli_fname;
}

static void test_builds_libc_like_in_process(void **state)
{
	(void)state;
	char dir[] = "/tmp/pf-tbuild-test.XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct pf_tbuilder *b = pf_tbuilder_new(dir, &unwind_kind);
	assert_non_null(b);
	assert_string_equal(pf_tbuilder_dir(b), dir);
	int fd = open(libc_path(), O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pf_tbuilder_submit(b, "00c0ffee", fd), 0);
	assert_true(pf_tbuilder_pending(b, "00c0ffee"));
	assert_int_equal(pf_tbuilder_submit(b, "00c0ffee", fd), -EEXIST);
	struct results rs = {0};
	uint64_t cpu = 0;
	poll_until(b, &rs, 1, &cpu);
	assert_string_equal(rs.r[0].key, "00c0ffee");
	assert_int_equal(rs.r[0].rc, 0);
	assert_false(pf_tbuilder_pending(b, "00c0ffee"));
	assert_true(cpu > 0); /* libc's CFI takes milliseconds */

	struct pf_unwind_table *from_child = NULL, *here = NULL;
	assert_int_equal(pf_unwind_cache_load(dir, "00c0ffee", &from_child), 0);
	assert_int_equal(pf_unwind_table_build(fd, 0, &here), 0);
	assert_int_equal(from_child->n_rows, here->n_rows);
	assert_memory_equal(from_child->rows, here->rows, here->n_rows * sizeof(*here->rows));
	struct pf_tbuilder_stats st;
	pf_tbuilder_stats(b, &st);
	assert_int_equal(st.children, 1);
	assert_int_equal(st.built, 1);
	assert_int_equal(st.failed + st.killed, 0);
	assert_int_equal(st.cpu_ns, cpu);
	pf_unwind_table_free(from_child);
	pf_unwind_table_free(here);
	pf_tbuilder_free(b);
	close(fd);
	/* the caller's directory and its table stay */
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/00c0ffee.unw", dir);
	assert_int_equal(access(path, F_OK), 0);
	unlink(path);
	rmdir(dir);
}

static void test_failures_are_per_file(void **state)
{
	(void)state;
	struct pf_tbuilder *b = pf_tbuilder_new(NULL, &unwind_kind);
	assert_non_null(b);
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", pf_tbuilder_dir(b));
	struct stat sb;
	assert_int_equal(stat(dir, &sb), 0);
	char txt[] = "/tmp/pf-tbuild-txt.XXXXXX";
	int tfd = mkstemp(txt);
	assert_true(tfd >= 0);
	assert_int_equal(write(tfd, "not an ELF file\n", 16), 16);
	int lfd = open(libc_path(), O_RDONLY | O_CLOEXEC);
	assert_true(lfd >= 0);
	/* the text file first: its failure must not stop the next file of the batch */
	assert_int_equal(pf_tbuilder_submit(b, "fd01-2a", tfd), 0);
	assert_int_equal(pf_tbuilder_submit(b, "abcdef", lfd), 0);
	struct results rs = {0};
	poll_until(b, &rs, 2, NULL);
	assert_string_equal(rs.r[0].key, "fd01-2a");
	assert_true(rs.r[0].rc < 0);
	assert_string_equal(rs.r[1].key, "abcdef");
	assert_int_equal(rs.r[1].rc, 0);
	struct pf_tbuilder_stats st;
	pf_tbuilder_stats(b, &st);
	assert_int_equal(st.built, 1);
	assert_int_equal(st.failed, 1);
	pf_tbuilder_free(b);
	/* the private directory went with it, tables included */
	assert_int_not_equal(stat(dir, &sb), 0);
	close(tfd);
	close(lfd);
	unlink(txt);
}

static void test_killed_child_fails_its_files(void **state)
{
	(void)state;
	struct pf_tbuilder *b = pf_tbuilder_new(NULL, &unwind_kind);
	assert_non_null(b);
	int fd = open(libc_path(), O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	/* several copies of libc: the child is still building when it is killed */
	char key[16];
	for (int i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "%x", 0xa0 + i);
		assert_int_equal(pf_tbuilder_submit(b, key, fd), 0);
	}
	assert_int_equal(pf_tbuilder_poll(b, true, on_done, NULL, NULL), 0);
	pid_t child = pf_tbuilder_child(b);
	assert_true(child > 0);
	assert_int_equal(kill(child, SIGKILL), 0);
	struct results rs = {0};
	poll_until(b, &rs, 8, NULL);
	size_t lost = 0;
	for (size_t i = 0; i < rs.n; i++) {
		assert_true(rs.r[i].rc == 0 || rs.r[i].rc == -ECHILD);
		lost += rs.r[i].rc == -ECHILD;
	}
	assert_true(lost >= 1);
	struct pf_tbuilder_stats st;
	pf_tbuilder_stats(b, &st);
	assert_int_equal(st.killed, 1);
	assert_int_equal(st.built + st.failed, 8);
	assert_int_equal(pf_tbuilder_child(b), 0);
	pf_tbuilder_free(b);
	close(fd);
}

static void test_bounds(void **state)
{
	(void)state;
	struct pf_tbuilder *b = pf_tbuilder_new(NULL, &unwind_kind);
	assert_non_null(b);
	int fd = open(libc_path(), O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pf_tbuilder_submit(b, "", fd), -EINVAL);
	assert_int_equal(pf_tbuilder_submit(b, "../etc", fd), -EINVAL);
	assert_int_equal(pf_tbuilder_submit(b, "ABC", fd), -EINVAL);
	char longkey[80];
	memset(longkey, 'a', sizeof(longkey) - 1);
	longkey[sizeof(longkey) - 1] = '\0';
	assert_int_equal(pf_tbuilder_submit(b, longkey, fd), -EINVAL);
	assert_int_equal(pf_tbuilder_submit(b, "abc", -1), -EINVAL);
	char key[16];
	for (int i = 0; i < PF_TBUILDER_QUEUE; i++) {
		snprintf(key, sizeof(key), "%x", 0x100 + i);
		assert_int_equal(pf_tbuilder_submit(b, key, fd), 0);
	}
	assert_int_equal(pf_tbuilder_submit(b, "fff", fd), -EAGAIN);
	/* nothing starts while the caller says no (its budget is spent) */
	assert_int_equal(pf_tbuilder_poll(b, false, on_done, NULL, NULL), 0);
	assert_int_equal(pf_tbuilder_child(b), 0);
	/* freeing with files queued closes their descriptors */
	pf_tbuilder_free(b);
	close(fd);
}

/* A file someone waits for goes first: the last of more files than a batch holds, hurried,
 * is the first the child reports. A kind without a build function is refused. */
static void test_hurry(void **state)
{
	(void)state;
	const struct pf_tbuilder_kind none = {"pf-none", NULL, 0};
	assert_null(pf_tbuilder_new(NULL, &none));
	assert_int_equal(errno, EINVAL);
	struct pf_tbuilder *b = pf_tbuilder_new(NULL, &unwind_kind);
	assert_non_null(b);
	int fd = open(libc_path(), O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	char key[16];
	for (int i = 0; i < PF_TBUILDER_BATCH + 4; i++) {
		snprintf(key, sizeof(key), "%x", 0x100 + i);
		assert_int_equal(pf_tbuilder_submit(b, key, fd), 0);
	}
	assert_false(pf_tbuilder_hurry(b, "abcdef"));
	assert_true(pf_tbuilder_hurry(b, key));
	struct results rs = {0};
	poll_until(b, &rs, PF_TBUILDER_BATCH + 4, NULL);
	assert_string_equal(rs.r[0].key, key);
	for (size_t i = 0; i < rs.n; i++)
		assert_int_equal(rs.r[i].rc, 0);
	pf_tbuilder_free(b);
	close(fd);
}

/* Smallest first: a small file queued after large ones is built before them; a hurried file
 * stays ahead of a smaller one queued later. A child takes PF_TBUILDER_BATCH_BYTES of files at
 * most (at least one), so a file queued while it runs waits for no more than that. */
static void test_smallest_first(void **state)
{
	(void)state;
	struct pf_tbuilder *b = pf_tbuilder_new(NULL, &unwind_kind);
	assert_non_null(b);
	/* sizes are all that orders the queue: files of zeros (their builds fail at once, and
	 * failures are reported in the same order) */
	char big_path[] = "/tmp/pf-tbuild-big.XXXXXX", small_path[] = "/tmp/pf-tbuild-small.XXXXXX";
	int big = mkstemp(big_path), small = mkstemp(small_path);
	assert_true(big >= 0 && small >= 0);
	unlink(big_path);
	unlink(small_path);
	const uint64_t big_size = PF_TBUILDER_BATCH_BYTES / 2 - 4096;
	assert_int_equal(ftruncate(big, (off_t)big_size), 0);
	assert_int_equal(ftruncate(small, 4096), 0);
	/* three large files take more than one batch's bytes; then two small ones */
	assert_int_equal(pf_tbuilder_submit(b, "b0", big), 0);
	assert_int_equal(pf_tbuilder_submit(b, "b1", big), 0);
	assert_int_equal(pf_tbuilder_submit(b, "b2", big), 0);
	assert_true(pf_tbuilder_hurry(b, "b1"));
	assert_int_equal(pf_tbuilder_submit(b, "5a", small), 0);
	assert_int_equal(pf_tbuilder_submit(b, "5b", small), 0);
	struct results rs = {0};
	poll_until(b, &rs, 5, NULL);
	assert_int_equal(rs.n, 5);
	assert_string_equal(rs.r[0].key, "b1"); /* hurried */
	assert_string_equal(rs.r[1].key, "5a"); /* then the small ones, in their order */
	assert_string_equal(rs.r[2].key, "5b");
	assert_string_equal(rs.r[3].key, "b0");
	assert_string_equal(rs.r[4].key, "b2");
	struct pf_tbuilder_stats st;
	pf_tbuilder_stats(b, &st);
	assert_int_equal(st.children, 2); /* b1, 5a, 5b, b0 fit one child's bytes; b2 did not */
	pf_tbuilder_free(b);
	close(big);
	close(small);
}

static void write_bytes(const char *dir, const char *name, size_t n, time_t mtime)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	for (size_t i = 0; i < n; i++)
		fputc('x', f);
	fclose(f);
	struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static bool exists_in(const char *dir, const char *name)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

/* After a build: a (device, inode) key's file goes, a build id's is counted, and past the
 * bound the oldest files of that suffix go first, down to 3/4 of it; others stay. */
static void test_account_and_prune(void **state)
{
	(void)state;
	char dir[] = "/tmp/pf-tbuild-acct.XXXXXX";
	assert_non_null(mkdtemp(dir));
	write_bytes(dir, "1-2.unw", 100, 1000);
	write_bytes(dir, "aa01.unw", 100, 1000);
	write_bytes(dir, "aa02.unw", 100, 2000);
	write_bytes(dir, "aa03.unw", 100, 3000);
	write_bytes(dir, "aa04.lin", 500, 500);
	uint64_t bytes = 0;
	pf_tbuilder_account(dir, "1-2", ".unw", 1000, &bytes);
	assert_false(exists_in(dir, "1-2.unw"));
	assert_int_equal(bytes, 0);
	pf_tbuilder_account(dir, "aa01", ".unw", 1000, &bytes);
	assert_int_equal(bytes, 100);
	bytes = 260; /* as if counted before: over the bound of 250 at the next build */
	pf_tbuilder_account(dir, "aa03", ".unw", 250, &bytes);
	assert_int_equal(bytes, 100); /* 300 > 250: aa01, then aa02 (oldest first) go */
	assert_false(exists_in(dir, "aa01.unw"));
	assert_false(exists_in(dir, "aa02.unw"));
	assert_true(exists_in(dir, "aa03.unw"));
	assert_true(exists_in(dir, "aa04.lin")); /* another suffix: not counted, kept */
	assert_int_equal(pf_tbuilder_prune(dir, ".lin", 1000), 500);
	assert_int_equal(pf_tbuilder_prune("/nonexistent/dir", ".lin", 1), 0);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/aa03.unw", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/aa04.lin", dir);
	unlink(path);
	assert_int_equal(rmdir(dir), 0);
}

/* The budget: full at start, no work once overspent, refilled with time up to its burst. */
static void test_budget(void **state)
{
	(void)state;
	struct pf_tbuilder_budget b;
	pf_tbuilder_budget_init(&b, 1000000000ll, 5000000ll); /* a core; bursts of 5 ms */
	assert_true(pf_tbuilder_budget_ok(&b));
	assert_true(b.ns <= 5000000ll);
	b.ns -= 12000000ll; /* a 12 ms build */
	assert_false(pf_tbuilder_budget_ok(&b));
	usleep(40000); /* 40 ms at a core per second refill it, to the 5 ms burst */
	assert_true(pf_tbuilder_budget_ok(&b));
	assert_int_equal(b.ns, 5000000ll);
}

/* The child holds only the files of its batch and its pipe: count its descriptors while it
 * builds (several copies of libc keep it busy long enough to look). */
static void test_child_holds_no_other_descriptors(void **state)
{
	(void)state;
	int extra[4];
	for (int i = 0; i < 4; i++)
		assert_true((extra[i] = open("/dev/null", O_RDONLY)) >= 0); /* not CLOEXEC */
	struct pf_tbuilder *b = pf_tbuilder_new(NULL, &unwind_kind);
	assert_non_null(b);
	int fd = open(libc_path(), O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	char key[16];
	for (int i = 0; i < PF_TBUILDER_BATCH; i++) {
		snprintf(key, sizeof(key), "%x", 0x200 + i);
		assert_int_equal(pf_tbuilder_submit(b, key, fd), 0);
	}
	assert_int_equal(pf_tbuilder_poll(b, true, on_done, NULL, NULL), 0);
	pid_t child = pf_tbuilder_child(b);
	assert_true(child > 0);
	int fds = -1;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)child);
	/* closing happens right after fork: give it up to 2 s to get there */
	for (int tries = 0; tries < 200; tries++) {
		DIR *d = opendir(path);
		if (!d)
			break; /* done before it could be seen: fails below */
		int n = 0;
		struct dirent *e;
		while ((e = readdir(d)))
			n += e->d_name[0] != '.';
		closedir(d);
		if (n <= 3 + PF_TBUILDER_BATCH + 1) {
			fds = n;
			break;
		}
		usleep(10000);
	}
	/* 0-2, the batch's PF_TBUILDER_BATCH descriptors, the pipe; not the /dev/null ones */
	assert_true(fds >= 0);
	assert_true(fds <= 3 + PF_TBUILDER_BATCH + 1);
	struct results rs = {0};
	poll_until(b, &rs, PF_TBUILDER_BATCH, NULL);
	pf_tbuilder_free(b);
	close(fd);
	for (int i = 0; i < 4; i++)
		close(extra[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_builds_libc_like_in_process),
		cmocka_unit_test(test_failures_are_per_file),
		cmocka_unit_test(test_killed_child_fails_its_files),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_hurry),
		cmocka_unit_test(test_smallest_first),
		cmocka_unit_test(test_account_and_prune),
		cmocka_unit_test(test_budget),
		cmocka_unit_test(test_child_holds_no_other_descriptors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
