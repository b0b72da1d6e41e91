/* profstore-bench — the embedded profile store on this machine (docs/benchmarks.md, "Profile
 * store"): receiver ingest rate and flame-graph query latency over a synthetic fleet.
 *
 *   profstore-bench [-a agents] [-w windows] [-k stacks] [-d dir] [-q queries] [-L secs] [-C]
 *     -a  agents (default 100), each one process of its own service ("svc-<n % 10>")
 *     -w  10-second windows per agent (default 360: one hour)
 *     -k  distinct stacks per window (default 200; 990 samples = 99 Hz x 10 s spread on them)
 *     -d  directory for the database (default: a new one under /tmp, removed at exit)
 *     -q  repetitions of each query (default 5)
 *     -L  then the event loop's latency: the real server (server.c) on loopback, for secs
 *         seconds per phase, /healthz probed every 10 ms by one client while 2 clients send
 *         merged flame-graph queries back to back, then post OTLP requests back to back —
 *         each on the loop (no pools: as before) and on the pools (query_pool.h)
 *     -C  ingest without the compact flame forms (the store before schema 3: merges then all
 *         go through the bodies)
 *     -N  ingest on a synchronous=NORMAL connection (WAL: a commit is not fsync'd; the
 *         receiver's writer is synchronous=FULL)
 *     -b  requests per pf_profstore_ingest_batch() call (default 1): the receiver's writer
 *         stores the requests it finds queued together in one transaction (group commit,
 *         up to PF_INGEST_BATCH); each request's latency is then its batch's
 *
 * Ingest: every window is encoded as the agent would send it (one OTLP request per agent and
 * window, time order), then handed to pf_profstore_ingest_batch() (decode, each profile's
 * detail and content, insert into SQLite on a synchronous=FULL connection as the receiver's
 * writer does, -b requests per transaction); only that call is timed (wall and CPU), and
 * the database file is measured after a checkpoint. Queries go through pf_api_handle() like
 * the server's. "merge:" lines time pf_profstore_merge() itself over one service's profiles,
 * through the compact flame forms and through each profile's detail (or body: stored before
 * schema 14), in the same run (pf_profstore_set_compact), and check that both trees give the
 * same JSON. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "api/api_profiles.h"
#include "fleet/fleet.h"
#include "metrics.h"
#include "otlp_profiles.h"
#include "pf/hash.h"
#include "pf/uuid.h"
#include "profstore/flame.h"
#include "profstore/profstore.h"
#include "profstore/query_pool.h"
#include "profstore/views.h"
#include "server.h"
#include "store.h"

#define FUNCS 600
#define DEPTH_MIN 8
#define DEPTH_MAX 32
#define HZ 99
#define WINDOW_S 10
#define PF_INGEST_BATCH_MAX 64 /* -b at most */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* This process's CPU time (user + system), seconds. */
static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* One agent's window: one process, `stacks` stacks over a shared function vocabulary, a
 * hot path per service so the merged graph has a shape. */
static struct pf_prof_window *make_window(int agent, int stacks, char names[FUNCS][32])
{
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_process *p = pf_prof_alloc(w, sizeof(*p));
	struct pf_prof_attr *attrs = pf_prof_alloc(w, 4 * sizeof(*attrs));
	struct pf_prof_mapping *m = pf_prof_alloc(w, sizeof(*m));
	struct pf_prof_frame *fr = pf_prof_alloc(w, FUNCS * sizeof(*fr));
	struct pf_prof_stack *st = pf_prof_alloc(w, (size_t)stacks * sizeof(*st));
	struct pf_prof_sample *sa = pf_prof_alloc(w, (size_t)stacks * sizeof(*sa));
	char buf[64];

	w->frequency_hz = HZ;
	w->host_name = pf_prof_strdup(w, "bench-host");
	m->start = 0x400000;
	m->limit = 0x800000;
	m->path = "/usr/bin/service";
	for (int i = 0; i < FUNCS; i++) {
		fr[i].address = 0x400000 + (uint64_t)i * 64;
		fr[i].mapping = 0;
		fr[i].function = names[i];
	}
	snprintf(buf, sizeof(buf), "svc-%d", agent % 10);
	attrs[0] = (struct pf_prof_attr){"service.name", pf_prof_strdup(w, buf)};
	snprintf(buf, sizeof(buf), "%d", 1000 + agent);
	attrs[1] = (struct pf_prof_attr){"process.pid", pf_prof_strdup(w, buf)};
	attrs[2] = (struct pf_prof_attr){"process.executable.name", "service"};
	snprintf(buf, sizeof(buf), "agent-%03d", agent);
	attrs[3] = (struct pf_prof_attr){"profleet.agent.uid", pf_prof_strdup(w, buf)};
	uint64_t left = (uint64_t)HZ * WINDOW_S;
	for (int s = 0; s < stacks; s++) {
		int depth = DEPTH_MIN + (int)(rnd() % (DEPTH_MAX - DEPTH_MIN));
		uint32_t *f = pf_prof_alloc(w, (size_t)depth * sizeof(uint32_t));
		/* root first: main, then a service-specific path, then random calls; stored leaf
		 * first */
		for (int d = 0; d < depth; d++) {
			uint32_t fn = d == 0 ? 0 : d < 4 ? (uint32_t)(agent % 10) * 10 + (uint32_t)d
						 : (uint32_t)(rnd() % FUNCS);
			f[depth - 1 - d] = fn;
		}
		st[s] = (struct pf_prof_stack){(uint32_t)depth, f};
		uint64_t r = 1 + rnd() % 9; /* once: pf_min evaluates its arguments twice */
		uint64_t c = s == stacks - 1 ? left : pf_min(left, r);
		left -= c;
		sa[s] = (struct pf_prof_sample){.stack = (uint32_t)s, .tid = 1000u + (uint32_t)agent,
						.count = c};
	}
	p->pid = 1000u + (uint32_t)agent;
	p->attrs = attrs;
	p->n_attrs = 4;
	p->mappings = m;
	p->n_mappings = 1;
	p->frames = fr;
	p->n_frames = FUNCS;
	p->stacks = st;
	p->n_stacks = (size_t)stacks;
	p->samples = sa;
	p->n_samples = (size_t)stacks;
	w->processes = p;
	w->n_processes = 1;
	return w;
}

static double query(struct pf_api *api, const char *auth, const char *path, const char **args,
		    size_t n_args, int reps, size_t *bytes, char *first, size_t first_len)
{
	double best = 1e9, sum = 0;
	for (int r = 0; r < reps; r++) {
		struct pf_api_request q = {.method = "GET", .path = path, .authorization = auth,
					   .now_ms = 0};
		for (size_t i = 0; i < n_args; i++)
			q.args[q.n_args++] = args[i];
		struct pf_api_response resp;
		pf_api_response_init(&resp);
		double t0 = now_s();
		pf_api_handle(api, &q, &resp);
		double dt = now_s() - t0;
		sum += dt;
		if (dt < best)
			best = dt;
		*bytes = resp.body.len;
		if (resp.status != 200)
			fprintf(stderr, "%s: status %d: %s\n", path, resp.status, pf_buf_str(&resp.body));
		snprintf(first, first_len, "%.*s", (int)pf_min(resp.body.len, first_len - 1),
			 pf_buf_str(&resp.body));
		pf_api_response_release(&resp);
	}
	(void)best;
	return sum / reps;
}

/* ---- -L: the loop's latency with the real server */

/* One HTTP/1.1 exchange on a new loopback connection ("Connection: close", read to EOF).
 * The status, or -1 on a transport error. */
static int http_once(int port, const char *method, const char *target, const char *auth,
		     const void *body, size_t len)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), status = -1, one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	char head[1024], buf[65536], first[16] = {0};
	size_t got = 0;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		goto out;
	int n = snprintf(head, sizeof(head),
			 "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
			 "Authorization: %s\r\nContent-Type: application/x-protobuf\r\n"
			 "Content-Length: %zu\r\n\r\n",
			 method, target, auth, len);
	if (n < 0 || (size_t)n >= sizeof(head) || write(fd, head, (size_t)n) != n)
		goto out;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, (const char *)body + off, len - off);
		if (w <= 0)
			goto out;
		off += (size_t)w;
	}
	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));
		if (r < 0)
			goto out;
		if (r == 0)
			break;
		if (got < sizeof(first) - 1) {
			size_t c = pf_min((size_t)r, sizeof(first) - 1 - got);
			memcpy(first + got, buf, c);
		}
		got += (size_t)r;
	}
	if (got >= 12 && strncmp(first, "HTTP/1.1 ", 9) == 0)
		status = (int)strtol(first + 9, NULL, 10);
out:
	close(fd);
	return status;
}

struct loop_bench {
	int port;
	const char *viewer, *agent;
	const char *query; /* GET target of the load clients, or NULL: post `bodies` */
	struct pf_buf *bodies;
	size_t n_bodies;
	atomic_bool stop;
	atomic_size_t next_body;
	atomic_size_t done, failed;
	double busy_s; /* summed client-side time of the load requests */
	pthread_mutex_t mu;
};

static void *load_client(void *arg)
{
	struct loop_bench *lb = arg;
	while (!atomic_load(&lb->stop)) {
		double t = now_s();
		int st;
		if (lb->query) {
			st = http_once(lb->port, "GET", lb->query, lb->viewer, NULL, 0);
		} else {
			size_t i = atomic_fetch_add(&lb->next_body, 1) % lb->n_bodies;
			st = http_once(lb->port, "POST", "/v1development/profiles", lb->agent,
				       lb->bodies[i].data, lb->bodies[i].len);
		}
		double dt = now_s() - t;
		atomic_fetch_add(st == 200 ? &lb->done : &lb->failed, 1);
		pthread_mutex_lock(&lb->mu);
		lb->busy_s += dt;
		pthread_mutex_unlock(&lb->mu);
	}
	return NULL;
}

static void *server_thread(void *arg)
{
	pf_server_run(arg);
	return NULL;
}

/* One phase: a server (with the pool or without), `clients` (0..2) load clients, /healthz
 * every 10 ms for secs seconds. */
static void loop_phase(const char *label, struct pf_store *st, const char *db,
		       const struct pf_profile_retention *ret, struct loop_bench *lb,
		       bool use_pool, double secs, int clients)
{
	struct pf_error err = {0};
	struct pf_metrics metrics;
	struct pf_fleet_options fo = {.heartbeat_interval_s = 30};
	struct pf_fleet *fleet = pf_fleet_new(&fo);
	struct pf_qpool *pool = NULL, *ingest = NULL;
	memset(&metrics, 0, sizeof(metrics));
	if (use_pool) {
		struct pf_qpool_options qo = {.db_path = db};
		struct pf_qpool_options io = {.db_path = db, .writer = true, .threads = 1,
					      .batch_max = PF_INGEST_BATCH, .retention = ret};
		pool = pf_qpool_start(&qo, &err);
		ingest = pool ? pf_qpool_start(&io, &err) : NULL;
		if (!ingest) {
			fprintf(stderr, "pools: %s\n", err.msg);
			exit(1);
		}
	}
	struct pf_api api = {.fleet = fleet, .store = st, .metrics = &metrics};
	struct pf_server_options so = {.port = 0, .max_message_bytes = 16 << 20,
				       .max_agents = 100, .query_pool = pool,
				       .ingest_pool = ingest};
	snprintf(so.listen_host, sizeof(so.listen_host), "127.0.0.1");
	struct pf_server *srv = pf_server_new(&so, fleet, st, NULL, &metrics, &api, &err);
	if (!srv) {
		fprintf(stderr, "server: %s\n", err.msg);
		exit(1);
	}
	lb->port = pf_server_port(srv);
	pthread_t sth, cl[2];
	pthread_create(&sth, NULL, server_thread, srv);
	atomic_store(&lb->stop, false);
	atomic_store(&lb->done, 0);
	atomic_store(&lb->failed, 0);
	lb->busy_s = 0;
	for (int i = 0; i < clients; i++)
		pthread_create(&cl[i], NULL, load_client, lb);

	size_t cap = (size_t)(secs * 100) + 16, n = 0, bad = 0;
	double *lat = malloc(cap * sizeof(double)), end = now_s() + secs;
	while (now_s() < end && n < cap) {
		double t = now_s();
		if (http_once(lb->port, "GET", "/healthz", "", NULL, 0) == 200)
			lat[n++] = now_s() - t;
		else
			bad++;
		struct timespec ts = {0, 10 * 1000000};
		nanosleep(&ts, NULL);
	}
	atomic_store(&lb->stop, true);
	for (int i = 0; i < clients; i++)
		pthread_join(cl[i], NULL);
	pf_server_stop(srv);
	pthread_join(sth, NULL);
	pf_server_free(srv);
	pf_qpool_stop(pool);
	pf_qpool_stop(ingest);
	pf_fleet_free(fleet);
	qsort(lat, n, sizeof(double), cmp_double);
	size_t done = atomic_load(&lb->done);
	printf("loop %-34s /healthz n=%zu p50 %6.1f ms p99 %6.1f ms max %6.1f ms | load: %zu ok "
	       "(%zu failed), %.0f ms each%s\n",
	       label, n, n ? lat[n / 2] * 1e3 : 0, n ? lat[(size_t)((double)n * 0.99)] * 1e3 : 0,
	       n ? lat[n - 1] * 1e3 : 0, done, atomic_load(&lb->failed),
	       done ? lb->busy_s / (double)done * 1e3 : 0, bad ? " (some probes failed)" : "");
	free(lat);
}

struct idlist {
	int64_t *v;
	size_t n, cap;
};

static int ids_cb(const struct pf_profile_row *r, void *ud)
{
	struct idlist *l = ud;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		int64_t *nv = realloc(l->v, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = r->id;
	return 0;
}

/* Merges every id with pf_profstore_merge() under `flags`; seconds, and the tree's JSON. */
static double merge_ids(struct pf_store *st, const struct idlist *l, unsigned flags,
			struct pf_buf *json, size_t *failed)
{
	struct pf_flame *f = pf_flame_new(PF_API_PROF_NODES_DEFAULT);
	unsigned was = pf_profstore_compact();
	*failed = 0;
	pf_profstore_set_compact(flags);
	double t = now_s();
	for (size_t i = 0; f && i < l->n; i++)
		if (pf_profstore_merge(st, l->v[i], f, 0) < 0)
			(*failed)++;
	t = now_s() - t;
	pf_profstore_set_compact(was);
	pf_buf_reset(json);
	if (!f || pf_flame_json(f, false, 0, json) < 0)
		(*failed)++;
	pf_flame_free(f);
	return t;
}

/* Both merge paths over the profiles of filter f, best of reps each. */
static void merge_bench(struct pf_store *st, const char *label, struct pf_profile_filter *f,
			int reps)
{
	struct idlist l = {0};
	struct pf_buf a, b;
	size_t fa = 0, fb = 0;
	double best_c = 1e9, best_b = 1e9;

	if (pf_store_profiles_foreach(st, f, ids_cb, &l) < 0 || !l.n) {
		free(l.v);
		return;
	}
	pf_buf_init(&a, (size_t)256 << 20);
	pf_buf_init(&b, (size_t)256 << 20);
	for (int r = 0; r < reps; r++) {
		best_c = pf_min(best_c, merge_ids(st, &l, PF_PROFSTORE_COMPACT_READ, &a, &fa));
		best_b = pf_min(best_b, merge_ids(st, &l, 0, &b, &fb));
	}
	printf("merge %-30s %5zu profiles: bodies %8.1f ms (%.3f ms/profile), compact %7.1f ms "
	       "(%.3f ms/profile), x%.1f; failed %zu/%zu; same JSON: %s\n",
	       label, l.n, best_b * 1e3, best_b * 1e3 / (double)l.n, best_c * 1e3,
	       best_c * 1e3 / (double)l.n, best_b / best_c, fb, fa,
	       a.len == b.len && memcmp(a.data, b.data, a.len) == 0 ? "yes" : "NO");
	pf_buf_release(&a);
	pf_buf_release(&b);
	free(l.v);
}

/* One merged view through views.h: new = stacks and rollups, else every profile's compact
 * form or body. Seconds; the JSON in *json. */
static double views_once(struct pf_store *st, const struct pf_profile_filter *f, bool new_path,
			 struct pf_buf *json, struct pf_merge_stats *ms)
{
	struct pf_flame *fl = pf_flame_new(PF_API_PROF_NODES_MAX);
	double t = now_s();
	int rc = new_path ? pf_views_merge(st, f, fl, 0, ms) : pf_views_merge_profiles(st, f, fl, 0, ms);
	t = now_s() - t;
	pf_buf_reset(json);
	if (rc < 0 || pf_flame_json(fl, false, 0, json) < 0)
		fprintf(stderr, "views: merge failed\n");
	pf_flame_free(fl);
	return t;
}

static void views_bench(struct pf_store *st, const char *label, const struct pf_profile_filter *f,
			int reps)
{
	struct pf_buf a, b;
	struct pf_merge_stats ma, mb;
	double ta[16], tb[16];
	reps = pf_min(reps, 16);
	pf_buf_init(&a, (size_t)256 << 20);
	pf_buf_init(&b, (size_t)256 << 20);
	for (int r = 0; r < reps; r++) { /* A, B, A, B ... */
		ta[r] = views_once(st, f, false, &a, &ma);
		tb[r] = views_once(st, f, true, &b, &mb);
	}
	qsort(ta, (size_t)reps, sizeof(double), cmp_double);
	qsort(tb, (size_t)reps, sizeof(double), cmp_double);
	printf("views %-28s %6zu profiles: per profile (old) median %8.1f ms [%.1f..%.1f], "
	       "stacks+rollups (new) median %7.1f ms [%.1f..%.1f] (%zu parts), x%.1f; "
	       "same JSON: %s\n",
	       label, mb.matched, ta[reps / 2] * 1e3, ta[0] * 1e3, ta[reps - 1] * 1e3,
	       tb[reps / 2] * 1e3, tb[0] * 1e3, tb[reps - 1] * 1e3, mb.parts,
	       ta[reps / 2] / tb[reps / 2],
	       a.len == b.len && memcmp(a.data, b.data, a.len) == 0 ? "yes" : "NO");
	pf_buf_release(&a);
	pf_buf_release(&b);
}

int main(int argc, char **argv)
{
	int agents = 100, windows = 360, stacks = 200, reps = 5, batch = 1, o;
	double loop_s = 0;
	const char *dir = NULL;
	enum pf_store_sync sync = PF_STORE_SYNC_FULL;
	while ((o = getopt(argc, argv, "a:w:k:d:q:L:CNb:")) != -1) {
		switch (o) {
		case 'a': agents = (int)strtol(optarg, NULL, 10); break;
		case 'w': windows = (int)strtol(optarg, NULL, 10); break;
		case 'k': stacks = (int)strtol(optarg, NULL, 10); break;
		case 'd': dir = optarg; break;
		case 'q': reps = (int)strtol(optarg, NULL, 10); break;
		case 'L': loop_s = strtod(optarg, NULL); break;
		case 'C': pf_profstore_set_compact(PF_PROFSTORE_COMPACT_READ); break;
		case 'N': sync = PF_STORE_SYNC_NORMAL; break;
		case 'b': batch = (int)strtol(optarg, NULL, 10); break;
		default:
			fprintf(stderr, "usage: profstore-bench [-a agents] [-w windows] [-k stacks] "
					"[-d dir] [-q reps] [-L secs] [-C] [-N] [-b batch]\n");
			return 2;
		}
	}
	if (agents < 1 || windows < 1 || stacks < 1 || stacks > 990 || reps < 1 || batch < 1 ||
	    batch > PF_INGEST_BATCH_MAX)
		return 2;
	char tmp[64] = "/tmp/pf-profstore-bench-XXXXXX", db[256];
	if (!dir) {
		if (!mkdtemp(tmp))
			return 1;
		dir = tmp;
	}
	snprintf(db, sizeof(db), "%s/bench.db", dir);
	struct pf_error err = {0};
	struct pf_store *st = pf_store_open(db, sync, &err);
	if (!st) {
		fprintf(stderr, "open %s: %s\n", db, err.msg);
		return 1;
	}
	struct pf_profile_retention ret = {.max_age_ms = 72ll * 3600 * 1000,
					   .max_bytes = (int64_t)1 << 30};
	pf_store_profiles_set_retention(st, &ret);

	static char names[FUNCS][32];
	for (int i = 0; i < FUNCS; i++)
		snprintf(names[i], sizeof(names[i]), i ? "pkg%d.function_%d" : "main", i % 17, i);
	struct pf_prof_window **win = calloc((size_t)agents, sizeof(*win));
	for (int a = 0; a < agents; a++)
		win[a] = make_window(a, stacks, names);

	const uint64_t t0_ns = 1700000000000000000ull;
	double *lat = malloc((size_t)agents * (size_t)windows * sizeof(double));
	double ingest = 0, cpu = 0;
	uint64_t samples = 0, req_bytes = 0;
	size_t n = 0, failed = 0;
	struct pf_buf req[PF_INGEST_BATCH_MAX], resp[PF_INGEST_BATCH_MAX];
	struct pf_profstore_request iq[PF_INGEST_BATCH_MAX];
	struct pf_profstore_result res[PF_INGEST_BATCH_MAX];
	for (int i = 0; i < batch; i++) {
		pf_buf_init(&req[i], (size_t)64 << 20);
		pf_buf_init(&resp[i], 1 << 20);
	}
	for (int k = 0, nb = 0; k < windows; k++) {
		for (int a = 0; a < agents; a++) {
			struct pf_prof_window *w = win[a];
			w->start_unix_ns = t0_ns + (uint64_t)k * WINDOW_S * 1000000000ull;
			w->end_unix_ns = w->start_unix_ns + WINDOW_S * 1000000000ull;
			pf_buf_reset(&req[nb]);
			pf_buf_reset(&resp[nb]);
			if (pf_otlp_profiles_encode(w, &req[nb], NULL, &err) < 0) {
				fprintf(stderr, "encode: %s\n", err.msg);
				return 1;
			}
			iq[nb] = (struct pf_profstore_request){
				.body = req[nb].data, .len = req[nb].len,
				.now_ms = (int64_t)(w->start_unix_ns / 1000000) + WINDOW_S * 1000};
			req_bytes += req[nb].len;
			if (++nb < batch && !(k == windows - 1 && a == agents - 1))
				continue;
			/* the CPU time of the encoding above is not the store's */
			double c = cpu_s();
			double t = now_s();
			pf_profstore_ingest_batch(st, iq, (size_t)nb, res, resp);
			double dt = now_s() - t;
			cpu += cpu_s() - c;
			ingest += dt;
			for (int i = 0; i < nb; i++) {
				if (res[i].status != 200 && !failed++)
					fprintf(stderr, "ingest: status %d: %s\n", res[i].status,
						res[i].message);
				lat[n++] = dt; /* each is answered after the batch's commit */
				samples += res[i].samples;
			}
			nb = 0;
		}
	}
	qsort(lat, n, sizeof(double), cmp_double);
	/* closed and opened again: the WAL checkpointed into the file, which is then measured */
	pf_store_close(st);
	st = pf_store_open(db, sync, &err);
	if (!st) {
		fprintf(stderr, "open %s again: %s\n", db, err.msg);
		return 1;
	}
	pf_store_profiles_set_retention(st, &ret);
	struct stat dbst;
	double db_file = stat(db, &dbst) == 0 ? (double)dbst.st_size : 0;
	int64_t count = 0, bytes = 0;
	pf_store_profiles_totals(st, &count, &bytes);
	printf("ingest: %zu requests (%d agents x %d windows, %d stacks, %" PRIu64
	       " samples), %zu failed\n",
	       n, agents, windows, stacks, samples, failed);
	printf("ingest: %.1f s, %.0f profiles/s, %.0f samples/s; per request p50 %.2f ms p99 %.2f "
	       "ms max %.2f ms\n",
	       ingest, (double)n / ingest, (double)samples / ingest, lat[n / 2] * 1e3,
	       lat[(size_t)((double)n * 0.99)] * 1e3, lat[n - 1] * 1e3);
	printf("ingest: CPU %.3f s, %.0f us per profile (%.0f profiles/s per core), %d per "
	       "transaction\n",
	       cpu, cpu * 1e6 / (double)n, (double)n / pf_max(cpu, 1e-9), batch);
	/* The compact flame forms (counted in the totals with the bodies). */
	uint64_t flame_bytes = 0;
	size_t with_flame = 0;
	{
		struct pf_profile_filter all = {0};
		struct idlist l = {0};
		struct pf_buf fb;
		pf_buf_init(&fb, PF_PROFSTORE_FLAME_MAX_BYTES);
		if (pf_store_profiles_foreach(st, &all, ids_cb, &l) == 0) {
			for (size_t i = 0; i < l.n; i++) {
				pf_buf_reset(&fb);
				if (pf_store_profile_flame(st, l.v[i], &fb) == 0) {
					flame_bytes += fb.len;
					with_flame++;
				}
			}
		}
		pf_buf_release(&fb);
		free(l.v);
	}
	bytes -= (int64_t)flame_bytes;
	printf("store: %" PRId64 " profiles, %.1f MiB stored (avg %.1f KiB: detail or body + "
	       "pairs; requests avg %.1f KiB)\n",
	       count, (double)bytes / 1048576.0, (double)bytes / (double)pf_max(count, 1) / 1024.0,
	       (double)req_bytes / (double)n / 1024.0);
	printf("store: database file after checkpoint %.2f MiB, %.2f KiB per profile\n",
	       db_file / 1048576.0, db_file / (double)pf_max(count, 1) / 1024.0);
	{
		struct stat sb;
		char wal[272];
		double file = stat(db, &sb) == 0 ? (double)sb.st_size : 0;
		snprintf(wal, sizeof(wal), "%s-wal", db);
		if (stat(wal, &sb) == 0)
			file += (double)sb.st_size;
		printf("store: compact flame forms on %zu of %" PRId64 " profiles, %.1f MiB (avg %.1f "
		       "KiB); database file %.1f MiB\n",
		       with_flame, count, (double)flame_bytes / 1048576.0,
		       (double)flame_bytes / (double)pf_max(with_flame, 1) / 1024.0, file / 1048576.0);
	}
	{
		/* the merged views' two paths on the same data, interleaved */
		struct pf_profile_filter fl = {.type = "cpu"}, one = {.type = "cpu", .service = "svc-3"};
		views_bench(st, "fleet, every profile", &fl, pf_min(reps, 3));
		views_bench(st, "one service, every profile", &one, pf_min(reps, 3));
	}
	{
		struct pf_profile_filter svc = {.service = "svc-3", .type = "cpu"};
		struct pf_profile_filter fleet = {.type = "cpu", .limit = PF_API_PROF_MERGE_DEFAULT};
		merge_bench(st, "one service (all)", &svc, pf_min(reps, 3));
		struct pf_profile_filter every = {.type = "cpu", .limit = PF_API_PROF_MERGE_MAX};
		merge_bench(st, "fleet, newest 200", &fleet, reps);
		merge_bench(st, "fleet, up to 5000", &every, 1);
	}

	/* Queries over the whole hour. */
	struct pf_metrics metrics;
	memset(&metrics, 0, sizeof(metrics));
	char tok[64], auth[80];
	uint8_t h[32];
	pf_token_generate(tok, sizeof(tok));
	pf_sha256(tok, strlen(tok), h);
	pf_store_token_add(st, h, "viewer", "bench", 1);
	snprintf(auth, sizeof(auth), "Bearer %s", tok);
	struct pf_api api = {.store = st, .metrics = &metrics, .ready = true};
	char from[64], to[64], mid[64], bfrom[64], bto[64], head[200];
	int64_t from_ms = (int64_t)(t0_ns / 1000000);
	int64_t to_ms = from_ms + (int64_t)windows * WINDOW_S * 1000;
	snprintf(from, sizeof(from), "from=%" PRId64, from_ms);
	snprintf(to, sizeof(to), "to=%" PRId64, to_ms);
	snprintf(mid, sizeof(mid), "from=%" PRId64, (from_ms + to_ms) / 2);
	char from_al[64];
	snprintf(from_al, sizeof(from_al), "from=%" PRId64, from_ms - from_ms % 60000);
	snprintf(bfrom, sizeof(bfrom), "base_from=%" PRId64, from_ms);
	snprintf(bto, sizeof(bto), "base_to=%" PRId64, (from_ms + to_ms) / 2);
	size_t out = 0;
	struct {
		const char *label, *path;
		const char *args[6];
		size_t n;
	} qs[] = {
		{"list 100 newest (fleet)", "/api/v1/profiles", {from, to}, 2},
		{"list service, limit 1000", "/api/v1/profiles", {from, to, "service=svc-3", "limit=1000"}, 4},
		{"flamegraph fleet, default cap", "/api/v1/flamegraph", {from, to}, 2},
		{"flamegraph fleet, max_profiles=5000", "/api/v1/flamegraph", {from, to, "max_profiles=5000"}, 3},
		{"flamegraph one service (3600 profiles)", "/api/v1/flamegraph", {from, to, "service=svc-3"}, 3},
		{"flamegraph one service, max_profiles=5000", "/api/v1/flamegraph", {from, to, "service=svc-3", "max_profiles=5000"}, 4},
		{"top fleet, default cap", "/api/v1/top", {from, to}, 2},
		{"diff service, halves, default cap", "/api/v1/flamegraph/diff", {mid, to, bfrom, bto, "service=svc-3"}, 5},
		{"timeline fleet, 1-minute steps", "/api/v1/timeline", {from_al, to, "step=60000"}, 3},
		{"labels (names)", "/api/v1/labels", {from, to}, 2},
		{"labels/service.name/values", "/api/v1/labels/service.name/values", {from, to}, 2},
		{"profile_types", "/api/v1/profile_types", {from, to}, 2},
		{"one profile flamegraph", "/api/v1/profiles/1/flamegraph", {NULL}, 0},
		{"one profile pprof", "/api/v1/profiles/1/pprof", {NULL}, 0},
	};
	for (size_t i = 0; i < PF_ARRAY_SIZE(qs); i++) {
		double avg = query(&api, auth, qs[i].path, qs[i].args, qs[i].n, reps, &out, head,
				   sizeof(head));
		char *cut = strstr(head, ",\"name\"");
		if (cut)
			*cut = 0;
		printf("query %-44s %9.1f ms  %8zu bytes  %s\n", qs[i].label, avg * 1e3, out,
		       qs[i].path[8] == 'f' && cut ? head : "");
	}
	if (loop_s > 0) {
		char agent_tok[64], agent_auth[80], q[160];
		pf_token_generate(agent_tok, sizeof(agent_tok));
		pf_sha256(agent_tok, strlen(agent_tok), h);
		pf_store_token_add(st, h, "agent", "bench-agent", 1);
		snprintf(agent_auth, sizeof(agent_auth), "Bearer %s", agent_tok);
		snprintf(q, sizeof(q), "/api/v1/flamegraph?%s&%s", from, to);
		/* OTLP requests for the ingest phase: later windows, retention keeps the rest */
		size_t nb = (size_t)pf_min(agents * 4, 400);
		struct pf_buf *bodies = calloc(nb, sizeof(*bodies));
		for (size_t i = 0; i < nb; i++) {
			struct pf_prof_window *w = win[i % (size_t)agents];
			w->start_unix_ns = t0_ns + (uint64_t)(windows + (int)(i / (size_t)agents)) *
						       WINDOW_S * 1000000000ull;
			w->end_unix_ns = w->start_unix_ns + WINDOW_S * 1000000000ull;
			pf_buf_init(&bodies[i], (size_t)64 << 20);
			if (pf_otlp_profiles_encode(w, &bodies[i], NULL, &err) < 0)
				return 1;
		}
		struct loop_bench lb = {.viewer = auth, .agent = agent_auth, .query = q,
					.bodies = bodies, .n_bodies = nb};
		pthread_mutex_init(&lb.mu, NULL);
		printf("loop: %.0f s per phase; load = 2 clients back to back: %s\n", loop_s, q);
		loop_phase("idle (no load)", st, db, &ret, &lb, true, pf_min(loop_s, 3.0), 0);
		loop_phase("merged queries, on the loop", st, db, &ret, &lb, false, loop_s, 2);
		loop_phase("merged queries, query pool", st, db, &ret, &lb, true, loop_s, 2);
		lb.query = NULL;
		loop_phase("OTLP ingest, on the loop", st, db, &ret, &lb, false, loop_s, 2);
		loop_phase("OTLP ingest, writer thread", st, db, &ret, &lb, true, loop_s, 2);
		for (size_t i = 0; i < nb; i++)
			pf_buf_release(&bodies[i]);
		free(bodies);
		pthread_mutex_destroy(&lb.mu);
	}
	for (int i = 0; i < batch; i++) {
		pf_buf_release(&req[i]);
		pf_buf_release(&resp[i]);
	}
	for (int a = 0; a < agents; a++)
		pf_prof_window_free(win[a]);
	free(win);
	free(lat);
	pf_store_close(st);
	if (dir == tmp) {
		char cmd[160];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
		if (system(cmd) != 0)
			return 1;
	}
	return 0;
}
