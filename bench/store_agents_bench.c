/* store_agents_bench.c — agent rows written to the PostgreSQL fleet store: one statement per
 * row (the baseline, pf_store_set_agent_batch(st, 1)) against many rows per statement (the
 * default), in the same run, interleaved (per row, batched, per row, batched ...).
 *
 *   store-agents-bench <postgres-url> [agents=2000] [rounds=3]
 *
 * Each round upserts every agent's full row (as when agents connect), then sets last_seen
 * of every row (the heartbeat-only batch), in both modes, and counts the round trips
 * (pf_store_round_trips: statements sent, begin and commit included) and the wall time of
 * each. Between modes the rows are read back and compared with what was written, so a
 * faster mode cannot be a wrong one. Prints one line per measurement and a JSON summary:
 *   {"agents":N,"per_row":{"upsert_rt":..,"upsert_ms":..,"seen_rt":..,"seen_ms":..},
 *    "batched":{...}}   (medians over the rounds)
 * Exits 1 on a store error or a mismatch. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pf/error.h"
#include "store.h"

#define MAX_AGENTS 100000
#define MAX_ROUNDS 20

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

struct fleet {
	struct pf_agent_row *rows;
	char (*attrs)[96];
	size_t n;
	int64_t stamp; /* changes every write, so every row really changes */
};

static void fill(struct fleet *f, int64_t stamp)
{
	f->stamp = stamp;
	for (size_t i = 0; i < f->n; i++) {
		struct pf_agent_row *r = &f->rows[i];
		snprintf(f->attrs[i], sizeof(f->attrs[i]),
			 "{\"service.name\":\"profleet-agent\",\"host.name\":\"h-%zu \\\"%lld\\\"\"}",
			 i, (long long)stamp);
		r->attributes_json = f->attrs[i];
		r->last_seen_ms = stamp;
		r->first_seen_ms = 1;
	}
}

struct check {
	const struct fleet *f;
	size_t seen, bad;
};

static int check_row(const struct pf_agent_row *row, void *ud)
{
	struct check *c = ud;
	size_t i;
	memcpy(&i, row->uid, sizeof(i));
	if (i >= c->f->n || memcmp(row->uid, c->f->rows[i].uid, 16) != 0)
		return 0; /* not one of ours */
	c->seen++;
	if (row->last_seen_ms != c->f->stamp || strcmp(row->attributes_json, c->f->attrs[i]) != 0 ||
	    row->capabilities != c->f->rows[i].capabilities)
		c->bad++;
	return 0;
}

static int verify(struct pf_store *st, const struct fleet *f, const char *what)
{
	struct check c = {.f = f};
	if (pf_store_agents_foreach(st, check_row, &c) < 0 || c.seen != f->n || c.bad) {
		fprintf(stderr, "%s: %zu of %zu rows read back, %zu differ: %s\n", what, c.seen,
			f->n, c.bad, pf_store_last_error(st));
		return -1;
	}
	return 0;
}

struct one {
	double upsert_rt, upsert_ms, seen_rt, seen_ms;
};

static int measure(struct pf_store *st, struct fleet *f, size_t batch, int64_t stamp,
		   struct one *out)
{
	pf_store_set_agent_batch(st, batch);
	fill(f, stamp);
	uint64_t rt = pf_store_round_trips(st);
	double t = now_ms();
	if (pf_store_agents_upsert(st, f->rows, f->n) < 0)
		return fprintf(stderr, "upsert: %s\n", pf_store_last_error(st)), -1;
	out->upsert_ms = now_ms() - t;
	out->upsert_rt = (double)(pf_store_round_trips(st) - rt);
	if (verify(st, f, "after upsert") < 0)
		return -1;
	for (size_t i = 0; i < f->n; i++)
		f->rows[i].last_seen_ms = stamp + 1;
	f->stamp = stamp + 1;
	rt = pf_store_round_trips(st);
	t = now_ms();
	if (pf_store_agents_set_seen(st, f->rows, f->n) < 0)
		return fprintf(stderr, "set_seen: %s\n", pf_store_last_error(st)), -1;
	out->seen_ms = now_ms() - t;
	out->seen_rt = (double)(pf_store_round_trips(st) - rt);
	return verify(st, f, "after set_seen");
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void summary(const char *name, const struct one *r, size_t n, const char *sep)
{
	double v[4][MAX_ROUNDS];
	for (size_t i = 0; i < n; i++) {
		v[0][i] = r[i].upsert_rt;
		v[1][i] = r[i].upsert_ms;
		v[2][i] = r[i].seen_rt;
		v[3][i] = r[i].seen_ms;
	}
	printf("\"%s\":{\"upsert_rt\":%.0f,\"upsert_ms\":%.1f,\"seen_rt\":%.0f,\"seen_ms\":%.1f}%s",
	       name, median(v[0], n), median(v[1], n), median(v[2], n), median(v[3], n), sep);
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: %s <postgres-url> [agents=2000] [rounds=3]\n", argv[0]);
		return 2;
	}
	long n = argc > 2 ? strtol(argv[2], NULL, 10) : 2000;
	long rounds = argc > 3 ? strtol(argv[3], NULL, 10) : 3;
	if (n < 1 || n > MAX_AGENTS || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "agents: 1..%d, rounds: 1..%d\n", MAX_AGENTS, MAX_ROUNDS);
		return 2;
	}
	char dir[] = "/tmp/pf-agents-bench-XXXXXX", db[64];
	if (!mkdtemp(dir))
		return perror("mkdtemp"), 1;
	snprintf(db, sizeof(db), "%s/db", dir);
	struct pf_error err = {0};
	struct pf_store *st = pf_store_open_url(db, argv[1], PF_STORE_SYNC_NORMAL, &err);
	int rc = 1;
	struct fleet f = {.n = (size_t)n};
	f.rows = calloc(f.n, sizeof(*f.rows));
	f.attrs = calloc(f.n, sizeof(*f.attrs));
	if (!st || !f.rows || !f.attrs) {
		fprintf(stderr, "open: %s\n", st ? "out of memory" : err.msg);
		goto out;
	}
	for (size_t i = 0; i < f.n; i++) {
		memcpy(f.rows[i].uid, &i, sizeof(i)); /* the index, then a fixed tail */
		memset(f.rows[i].uid + sizeof(i), 0xa5, 16 - sizeof(i));
		f.rows[i].capabilities = 0x1fff;
		f.rows[i].connected = true;
	}
	struct one per_row[MAX_ROUNDS], batched[MAX_ROUNDS];
	for (long r = 0; r < rounds; r++) {
		if (measure(st, &f, 1, 1000 + r * 10, &per_row[r]) < 0 ||
		    measure(st, &f, PF_STORE_AGENT_BATCH, 1005 + r * 10, &batched[r]) < 0)
			goto out;
		printf("round %ld: per row: upsert %.0f round trips %.1f ms, last_seen %.0f round "
		       "trips %.1f ms; batched: upsert %.0f round trips %.1f ms, last_seen %.0f "
		       "round trips %.1f ms\n",
		       r + 1, per_row[r].upsert_rt, per_row[r].upsert_ms, per_row[r].seen_rt,
		       per_row[r].seen_ms, batched[r].upsert_rt, batched[r].upsert_ms,
		       batched[r].seen_rt, batched[r].seen_ms);
	}
	printf("{\"agents\":%ld,", n);
	summary("per_row", per_row, (size_t)rounds, ",");
	summary("batched", batched, (size_t)rounds, "}\n");
	rc = 0;
out:
	free(f.rows);
	free(f.attrs);
	pf_store_close(st);
	static const char *const files[] = {"", "-wal", "-shm"}; /* SQLite's, next to the db */
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char path[96];
		snprintf(path, sizeof(path), "%s%s", db, files[i]);
		unlink(path);
	}
	rmdir(dir);
	return rc;
}
