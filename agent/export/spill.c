/* spill.c — see spill.h. */
#include "export/spill.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "export/export_dir.h"
#include "pf/array.h"
#include "pf/compiler.h"
#include "pf/fdio.h"

#define MAGIC "PFQ1"
#define HEAD_LEN (4 + 4 + 8 + 16 + 8 + 4)
#define NAME_LEN (16 + 4) /* "<16 hex>.pfq" */
#define MAX_TARGET (64u << 10)

struct agent_spill {
	struct agent_export_dir dir;
};

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* "<16 lowercase hex>.pfq" -> seq; false when the name is not ours. */
static bool parse_name(const char *n, uint64_t *seq)
{
	if (strlen(n) != NAME_LEN || strcmp(n + 16, ".pfq") != 0)
		return false;
	uint64_t v = 0;
	for (int i = 0; i < 16; i++) {
		char c = n[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	*seq = v;
	return true;
}

static bool is_temp(const char *n)
{
	char inner[64];
	uint64_t seq;
	return agent_export_dir_temp_of(n, inner, sizeof(inner)) && parse_name(inner, &seq);
}

struct agent_spill *agent_spill_open(const char *dir, struct pf_error *err)
{
	if (!dir || !*dir) {
		pf_error_set(err, -EINVAL, "spill_dir", "empty spill directory");
		errno = EINVAL;
		return NULL;
	}
	struct agent_spill *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	/* the parent (the state dir's "spill" folder) may not exist yet */
	int r = agent_export_dir_open(&s->dir, dir, 0700, true, "spill_dir", err);
	if (r < 0) {
		free(s);
		errno = -r;
		return NULL;
	}
	return s;
}

void agent_spill_close(struct agent_spill *s)
{
	if (!s)
		return;
	agent_export_dir_close(&s->dir);
	free(s);
}

const char *agent_spill_dir(const struct agent_spill *s)
{
	return s->dir.path;
}

int agent_spill_write(struct agent_spill *s, uint64_t seq, const uint8_t id[16],
		      uint64_t enq_unix_ns, const char *target, const uint8_t *data, size_t len)
{
	size_t tl = target ? strlen(target) : 0;
	if (tl > MAX_TARGET)
		return -E2BIG;
	char name[NAME_LEN + 1];
	snprintf(name, sizeof(name), "%016" PRIx64 ".pfq", seq);
	uint8_t head[HEAD_LEN];
	memcpy(head, MAGIC, 4);
	put32(head + 4, (uint32_t)tl);
	put64(head + 8, len);
	memcpy(head + 16, id, 16);
	put64(head + 32, enq_unix_ns);
	uLong crc = crc32(0L, Z_NULL, 0);
	crc = crc32_z(crc, (const Bytef *)(target ? target : ""), tl);
	crc = crc32_z(crc, data, len);
	put32(head + 40, (uint32_t)crc);

	const struct iovec parts[] = {
	    {head, sizeof(head)}, {(void *)target, tl}, {(void *)data, len}};
	return agent_export_dir_write(&s->dir, name, 0600, false, parts, PF_ARRAY_SIZE(parts));
}

int agent_spill_remove(struct agent_spill *s, uint64_t seq)
{
	char name[NAME_LEN + 1];
	snprintf(name, sizeof(name), "%016" PRIx64 ".pfq", seq);
	if (unlinkat(s->dir.fd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Reads exactly n bytes. */
static int read_all(int fd, void *p, size_t n)
{
	uint8_t *b = p;
	while (n) {
		ssize_t rd = read(fd, b, n);
		if (rd < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (rd == 0)
			return -EBADMSG;
		b += rd;
		n -= (size_t)rd;
	}
	return 0;
}

/* Reads the record of seq; -EBADMSG when it is corrupt or too large. */
static int read_record(struct agent_spill *s, uint64_t seq, size_t max_len,
		       struct agent_spill_record *rec)
{
	char name[NAME_LEN + 1];
	snprintf(name, sizeof(name), "%016" PRIx64 ".pfq", seq);
	int fd = openat(s->dir.fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	struct stat st;
	uint8_t head[HEAD_LEN];
	int r = fstat(fd, &st) < 0 ? -errno : read_all(fd, head, sizeof(head));
	uint32_t tl = 0;
	uint64_t dl = 0;
	if (r == 0) {
		tl = get32(head + 4);
		dl = get64(head + 8);
		/* never trust a size from the file: check it against the limit and the file */
		if (memcmp(head, MAGIC, 4) != 0 || tl > MAX_TARGET || dl > max_len ||
		    (uint64_t)st.st_size != HEAD_LEN + tl + dl)
			r = -EBADMSG;
	}
	memset(rec, 0, sizeof(*rec));
	if (r == 0) {
		rec->target = tl ? malloc(tl + 1) : NULL;
		rec->data = malloc(dl ? dl : 1);
		if ((tl && !rec->target) || !rec->data)
			r = -ENOMEM;
	}
	if (r == 0 && tl)
		r = read_all(fd, rec->target, tl);
	if (r == 0)
		r = read_all(fd, rec->data, dl);
	close(fd);
	if (r == 0) {
		uLong crc = crc32(0L, Z_NULL, 0);
		if (tl)
			crc = crc32_z(crc, (const Bytef *)rec->target, tl);
		crc = crc32_z(crc, rec->data, dl);
		if ((uint32_t)crc != get32(head + 40))
			r = -EBADMSG;
	}
	if (r < 0) {
		free(rec->target);
		free(rec->data);
		memset(rec, 0, sizeof(*rec));
		return r;
	}
	if (tl)
		rec->target[tl] = 0;
	rec->seq = seq;
	memcpy(rec->id, head + 16, 16);
	rec->enq_unix_ns = get64(head + 32);
	rec->len = dl;
	return 0;
}

int agent_spill_load(struct agent_spill *s, size_t max_len, agent_spill_load_fn cb, void *user,
		     size_t *n_bad)
{
	*n_bad = 0;
	DIR *d = agent_export_dir_entries(&s->dir);
	if (!d)
		return -errno;
	uint64_t *seqs = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		uint64_t seq;
		if (is_temp(de->d_name)) {
			unlinkat(s->dir.fd, de->d_name, 0);
			continue;
		}
		if (!parse_name(de->d_name, &seq))
			continue;
		if (PF_ARRAY_GROW(seqs, cap, n + 1, 64) < 0) {
			r = -ENOMEM;
			break;
		}
		seqs[n++] = seq;
	}
	closedir(d);
	if (r == 0 && n)
		qsort(seqs, n, sizeof(*seqs), cmp_u64);
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct agent_spill_record rec;
		int rr = read_record(s, seqs[i], max_len, &rec);
		if (rr == -ENOMEM) {
			r = rr;
		} else if (rr < 0) {
			if (rr != -ENOENT) {
				(*n_bad)++;
				agent_spill_remove(s, seqs[i]);
			}
		} else {
			r = cb(user, &rec);
		}
	}
	free(seqs);
	return r;
}

int agent_spill_discard_dir(const char *dir, uint64_t *n_items, uint64_t *n_bytes)
{
	*n_items = 0;
	*n_bytes = 0;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -errno;
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		close(dfd);
		return -e;
	}
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		uint64_t seq;
		bool rec = parse_name(de->d_name, &seq);
		if (!rec && !is_temp(de->d_name))
			continue;
		struct stat st;
		bool sized = rec && fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0;
		if (unlinkat(dfd, de->d_name, 0) < 0) {
			if (errno != ENOENT && !r)
				r = -errno;
			continue;
		}
		if (rec) {
			(*n_items)++;
			if (sized && st.st_size > HEAD_LEN)
				*n_bytes += (uint64_t)st.st_size - HEAD_LEN;
		}
	}
	closedir(d);
	close(dfd);
	if (rmdir(dir) < 0 && errno != ENOENT && !r)
		r = -errno; /* ENOTEMPTY: files that are not ours stay */
	return r;
}
