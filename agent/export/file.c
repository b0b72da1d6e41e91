/* file.c — see file.h. */
#include "export/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "export/export_dir.h"
#include "pf/array.h"
#include "pf/compiler.h"
#include "pf/fdio.h"
#include "pf/uuid.h"

struct agent_export_file {
	struct agent_export_dir dir;
	uint64_t max_bytes;
};

/* "YYYYMMDDTHHMMSS.mmmZ-" + 32 hex + ".otlp.pb" */
#define TIME_LEN 20
#define HEX_LEN 32
#define SUFFIX ".otlp.pb"

int agent_export_file_is_ours(const char *n)
{
	size_t len = strlen(n);
	if (len != TIME_LEN + 1 + HEX_LEN + strlen(SUFFIX))
		return 0;
	for (int i = 0; i < TIME_LEN; i++) {
		char c = n[i];
		bool ok = i == 8 ? c == 'T' : i == 15 ? c == '.' : i == 19 ? c == 'Z'
								 : (c >= '0' && c <= '9');
		if (!ok)
			return 0;
	}
	if (n[TIME_LEN] != '-')
		return 0;
	for (int i = 0; i < HEX_LEN; i++) {
		char c = n[TIME_LEN + 1 + i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
	}
	return strcmp(n + TIME_LEN + 1 + HEX_LEN, SUFFIX) == 0;
}

static bool is_our_temp(const char *n)
{
	char inner[128];
	return agent_export_dir_temp_of(n, inner, sizeof(inner)) &&
	       agent_export_file_is_ours(inner);
}

struct agent_export_file *agent_export_file_new(const char *dir, uint64_t max_bytes,
						struct pf_error *err)
{
	if (!dir || !*dir || !max_bytes) {
		pf_error_set(err, -EINVAL, "path", "file exporter needs a directory and max_bytes");
		errno = EINVAL;
		return NULL;
	}
	struct agent_export_file *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->max_bytes = max_bytes;
	int r = agent_export_dir_open(&f->dir, dir, 0755, false, "path", err);
	if (r < 0) {
		free(f);
		errno = -r;
		return NULL;
	}
	/* Remove temp files a crash left behind. */
	DIR *d = agent_export_dir_entries(&f->dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d)))
			if (is_our_temp(de->d_name))
				unlinkat(f->dir.fd, de->d_name, 0);
		closedir(d);
	}
	return f;
}

void agent_export_file_free(struct agent_export_file *f)
{
	if (!f)
		return;
	agent_export_dir_close(&f->dir);
	free(f);
}

struct entry {
	char name[AGENT_EXPORT_FILE_NAME_MAX];
	uint64_t size;
};

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

/* Our files sorted by name (= by time), oldest first. */
static int list_ours(struct agent_export_file *f, struct entry **out, size_t *n_out)
{
	DIR *d = agent_export_dir_entries(&f->dir);
	if (!d)
		return -errno;
	struct entry *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int r = 0;
	while ((de = readdir(d))) {
		if (!agent_export_file_is_ours(de->d_name))
			continue;
		struct stat st;
		if (fstatat(f->dir.fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (PF_ARRAY_GROW(v, cap, n + 1, 32) < 0) {
			r = -ENOMEM;
			break;
		}
		size_t nl = strlen(de->d_name); /* ours: always 61 bytes */
		memcpy(v[n].name, de->d_name, pf_min(nl + 1, sizeof(v[n].name)));
		v[n].name[sizeof(v[n].name) - 1] = 0;
		v[n].size = (uint64_t)st.st_size;
		n++;
	}
	closedir(d);
	if (r < 0) {
		free(v);
		return r;
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_entry);
	*out = v;
	*n_out = n;
	return 0;
}

/* Our files, oldest first, and their total size. */
static int list_sized(struct agent_export_file *f, struct entry **out, size_t *n_out,
		      uint64_t *total)
{
	int r = list_ours(f, out, n_out);
	if (r < 0)
		return r;
	*total = 0;
	for (size_t i = 0; i < *n_out; i++)
		*total += (*out)[i].size;
	return 0;
}

int agent_export_file_usage(struct agent_export_file *f, size_t *n_files, uint64_t *bytes)
{
	struct entry *v = NULL;
	int r = list_sized(f, &v, n_files, bytes);
	free(v);
	return r;
}

/* Deletes the oldest of our files until the total fits; `keep` is never deleted. */
static int enforce_bound(struct agent_export_file *f, const char *keep)
{
	struct entry *v = NULL;
	size_t n = 0;
	uint64_t total;
	int r = list_sized(f, &v, &n, &total);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n && total > f->max_bytes; i++) {
		if (strcmp(v[i].name, keep) == 0)
			continue;
		if (unlinkat(f->dir.fd, v[i].name, 0) == 0 || errno == ENOENT)
			total -= v[i].size;
	}
	free(v);
	return 0;
}

int agent_export_file_write(struct agent_export_file *f, const uint8_t *data, size_t len,
			    const uint8_t profile_id[16], uint64_t now_unix_ns, char *name_out,
			    struct pf_error *err)
{
	if (len > f->max_bytes)
		return pf_error_set(err, -EFBIG, "", "export of %zu bytes is larger than max_bytes "
				    "%" PRIu64, len, f->max_bytes);
	time_t secs = (time_t)(now_unix_ns / 1000000000u);
	struct tm tm;
	if (!gmtime_r(&secs, &tm))
		return pf_error_set(err, -EINVAL, "", "bad time");
	char hex[HEX_LEN + 1];
	pf_hex_encode(profile_id, 16, hex);
	char name[160];
	snprintf(name, sizeof(name), "%04d%02d%02dT%02d%02d%02d.%03uZ-%s" SUFFIX, tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (unsigned)(now_unix_ns / 1000000u % 1000u), hex);

	struct iovec part = {(void *)data, len};
	int r = agent_export_dir_write(&f->dir, name, 0644, true, &part, 1);
	if (r < 0)
		return pf_error_set(err, r, "", "%s/%s: %s", f->dir.path, name, strerror(-r));
	if (name_out) {
		size_t nl = pf_min(strlen(name), (size_t)AGENT_EXPORT_FILE_NAME_MAX - 1);
		memcpy(name_out, name, nl);
		name_out[nl] = 0;
	}
	r = enforce_bound(f, name);
	if (r < 0)
		return pf_error_set(err, r, "", "%s: cannot enforce max_bytes: %s", f->dir.path,
				    strerror(-r));
	return 0;
}
