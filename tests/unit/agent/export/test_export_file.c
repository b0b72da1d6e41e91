/* Unit tests of agent/export/file.c and the exporter interface over it: file names, atomic
 * writes (no temp files left, stale temps removed), contents that pass the OTLP conformance
 * checker, the directory bound (oldest of our files deleted, foreign files kept, oversize
 * refused), health, and the asynchronous submit path. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "export/exporter.h"
#include "export/file.h"
#include "otlp_profiles.h"
#include "prof_fixture.h"
#include "profcheck.h"

static char dir[64];
static struct pf_buf bytes;
static uint8_t pid16[16];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/pf-export-file-XXXXXX");
	assert_non_null(mkdtemp(dir));
	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_TIMESTAMPS);
	pf_buf_init(&bytes, 1 << 20);
	assert_int_equal(pf_otlp_profiles_encode(w, &bytes, pid16, NULL), 0);
	pf_prof_window_free(w);
	return 0;
}

static int teardown(void **state)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.' && (!de->d_name[1] || !strcmp(de->d_name, "..")))
			continue;
		char p[512];
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
	pf_buf_release(&bytes);
	return 0;
}

static size_t count_entries(const char *prefix)
{
	size_t n = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	while ((de = readdir(d)))
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0 && strcmp(de->d_name, ".") &&
		    strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void read_file(const char *name, struct pf_buf *out)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "rb");
	assert_non_null(f);
	uint8_t tmp[4096];
	size_t n;
	while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
		assert_int_equal(pf_buf_append(out, tmp, n), 0);
	fclose(f);
}

static void test_write_name_and_contents(void **state)
{
	/* a stale temp file of ours and a foreign file */
	char p[512];
	snprintf(p, sizeof(p), "%s/.20200101T000000.000Z-00000000000000000000000000000000.otlp.pb.tmp",
		 dir);
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/notes.txt", dir);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	assert_int_equal(write(fd, "keep me", 7), 7);
	close(fd);

	struct pf_error err = {0};
	struct agent_export_file *f = agent_export_file_new(dir, 1 << 20, &err);
	assert_non_null(f);
	assert_int_equal(count_entries("."), 0); /* stale temp removed (and no . entries) */

	char name[AGENT_EXPORT_FILE_NAME_MAX];
	uint8_t id[16];
	for (int i = 0; i < 16; i++)
		id[i] = (uint8_t)(0xf0 + i);
	/* 2023-11-14T22:13:20.123Z */
	assert_int_equal(agent_export_file_write(f, bytes.data, bytes.len, id,
						 1700000000123456789ull, name, &err), 0);
	assert_string_equal(name, "20231114T221320.123Z-f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff.otlp.pb");
	assert_true(agent_export_file_is_ours(name));
	assert_false(agent_export_file_is_ours("notes.txt"));

	struct pf_buf back;
	pf_buf_init(&back, 1 << 20);
	read_file(name, &back);
	assert_int_equal(back.len, bytes.len);
	assert_memory_equal(back.data, bytes.data, bytes.len);
	struct profcheck_result res;
	assert_int_equal(profcheck_run(back.data, back.len, &res), 0);
	profcheck_release(&res);
	pf_buf_release(&back);
	assert_int_equal(count_entries("."), 0); /* no temp file left */
	assert_int_equal(count_entries("notes.txt"), 1);
	agent_export_file_free(f);
}

static void test_bounded_directory(void **state)
{
	struct pf_error err = {0};
	/* room for two and a half exports */
	uint64_t max = bytes.len * 5 / 2;
	struct agent_export_file *f = agent_export_file_new(dir, max, &err);
	assert_non_null(f);
	char names[5][AGENT_EXPORT_FILE_NAME_MAX];
	for (int i = 0; i < 5; i++) {
		uint8_t id[16] = {(uint8_t)i};
		assert_int_equal(agent_export_file_write(f, bytes.data, bytes.len, id,
							 1700000000000000000ull +
								 (uint64_t)i * 1000000000ull,
							 names[i], &err),
				 0);
	}
	size_t n;
	uint64_t total;
	assert_int_equal(agent_export_file_usage(f, &n, &total), 0);
	assert_int_equal(n, 2);
	assert_true(total <= max);
	/* the two newest remain */
	char p[512];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, names[4]);
	assert_int_equal(stat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/%s", dir, names[3]);
	assert_int_equal(stat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/%s", dir, names[0]);
	assert_int_equal(stat(p, &st), -1);
	assert_int_equal(count_entries("notes.txt"), 1); /* foreign file untouched */
	agent_export_file_free(f);

	/* an export larger than the bound alone */
	f = agent_export_file_new(dir, 16, &err);
	assert_non_null(f);
	pf_error_clear(&err);
	assert_int_equal(agent_export_file_write(f, bytes.data, bytes.len, pid16, 1, NULL, &err),
			 -EFBIG);
	assert_non_null(strstr(err.msg, "max_bytes"));
	agent_export_file_free(f);
}

static void test_exporter_interface(void **state)
{
	struct pf_exporter cfg = {.type = PF_EXPORTER_FILE, .path = dir, .max_bytes = 1 << 20};
	struct pf_error err = {0};
	struct agent_exporter *x = agent_exporter_new(&cfg, &err);
	assert_non_null(x);
	assert_string_equal(agent_exporter_type(x), "file");
	size_t before = count_entries("2");
	assert_int_equal(agent_exporter_export(x, bytes.data, bytes.len, pid16, &err), 0);
	assert_int_equal(agent_exporter_submit(x, bytes.data, bytes.len, pid16, NULL, NULL), 0);
	agent_exporter_drain(x);
	struct agent_exporter_status st;
	agent_exporter_status(x, &st);
	assert_true(st.healthy);
	assert_int_equal(st.exports_ok, 2);
	assert_string_equal(st.status, "ok: 2 confirmed, 0 queued");
	assert_true(count_entries("2") >= before + 1); /* same millisecond may reuse the name */
	agent_exporter_free(x);

	/* a directory that cannot be created */
	cfg.path = "/proc/pf-no-such/dir";
	pf_error_clear(&err);
	assert_null(agent_exporter_new(&cfg, &err));
	assert_non_null(strstr(err.msg, "cannot create directory"));
	assert_string_equal(err.path, "path");

	/* pyroscope needs its endpoint */
	cfg.type = PF_EXPORTER_PYROSCOPE;
	pf_error_clear(&err);
	assert_null(agent_exporter_new(&cfg, &err));
	assert_int_equal(errno, EINVAL);
	assert_string_equal(err.path, "endpoint");
}

static void test_failure_health(void **state)
{
	struct pf_exporter cfg = {.type = PF_EXPORTER_FILE, .path = dir, .max_bytes = 16};
	struct agent_exporter *x = agent_exporter_new(&cfg, NULL);
	assert_non_null(x);
	assert_int_equal(agent_exporter_export(x, bytes.data, bytes.len, pid16, NULL), -EFBIG);
	struct agent_exporter_status st;
	agent_exporter_status(x, &st);
	assert_false(st.healthy);
	assert_int_equal(st.exports_failed, 1);
	assert_non_null(strstr(st.last_error, "max_bytes"));
	assert_string_equal(st.status, "failing: 1 consecutive errors");
	agent_exporter_free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_name_and_contents),
		cmocka_unit_test(test_bounded_directory),
		cmocka_unit_test(test_exporter_interface),
		cmocka_unit_test(test_failure_health),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
