/* profleet-podcache — runs the pod cache (agent/k8s/podcache.h) without the rest of the agent,
 * for tests and debugging on a node: lists and watches the node's pods and prints one JSON
 * line each time the cache or the connection state changes, with the attributes procinfo
 * gives the processes named by --pid (read from --proc-root).
 *
 *   profleet-podcache --node NAME [--api URL] [--token-file F] [--ca-file F]
 *                     [--proc-root DIR] [--pid N]... [--seconds N] [--watch-timeout N]
 *                     [--filter KEY=VALUE] [-v]
 *   profleet-podcache --list FILE --bench N      (no API server: load a PodList, time lookups)
 *
 * Output: {"generation": G, "pods": N, "containers": N, "reachable": bool, "synced": bool,
 *          "resource_version": "...", "lists": N, "watches": N, "relists": N,
 *          "last_error": "...", "processes": [{"pid": P, "allowed": bool,
 *          "attributes": {...}}]}
 * "allowed" is the verdict of an include filter KEY=VALUE (strict) given with --filter.
 * Exit: 0 after --seconds or SIGTERM/SIGINT, 1 error, 2 usage. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "k8s/podcache.h"
#include "pf/clock.h"
#include "pf/log.h"
#include "pf/profile.h"
#include "sampler/procinfo.h"

#define MAX_PIDS 64
#define BENCH_MAX_IDS 65536

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(FILE *to)
{
	fprintf(to, "usage: profleet-podcache --node NAME [--api URL] [--token-file F] "
		    "[--ca-file F]\n"
		    "                         [--proc-root DIR] [--pid N]... [--seconds N]\n"
		    "                         [--watch-timeout N] [--filter KEY=VALUE] [-v]\n"
		    "       profleet-podcache --list FILE [--bench N]\n");
}

static json_t *processes(struct pf_podcache *pc, const char *proc_root, const uint32_t *pids,
			 size_t n, const struct pf_filter *filter)
{
	struct pf_procinfo_source src;
	pf_podcache_source(pc, &src);
	struct pf_procinfo_options po = {
	    .proc_root = proc_root, .host_name = "node", .source = &src};
	struct pf_procinfo *pi = pf_procinfo_new(&po);
	struct pf_prof_window *w = pf_prof_window_new();
	json_t *arr = json_array();
	if (pi && filter)
		pf_procinfo_set_filters(pi, filter, 1, NULL, 0, NULL);
	for (size_t i = 0; pi && w && arr && i < n; i++) {
		const struct pf_proc *p = pf_procinfo_update(pi, pids[i]);
		struct pf_prof_process pp;
		memset(&pp, 0, sizeof(pp));
		if (!p || pf_procinfo_attrs(pi, pids[i], w, &pp) < 0)
			continue;
		json_t *attrs = json_object();
		for (size_t k = 0; k < pp.n_attrs; k++)
			json_object_set_new(attrs, pp.attrs[k].key, json_string(pp.attrs[k].value));
		json_array_append_new(arr, json_pack("{s:I,s:b,s:o}", "pid", (json_int_t)pids[i],
						     "allowed", p->allowed, "attributes", attrs));
	}
	pf_prof_window_free(w);
	pf_procinfo_free(pi);
	return arr;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int count_attr(void *ctx, const char *key, const char *value)
{
	(*(size_t *)ctx)++;
	return 0;
}

/* --list FILE --bench N: the cost of loading a PodList and of one lookup (hit and miss), the
 * work the sampler's thread does per process and window. */
static int bench(const char *list, long n)
{
	FILE *f = fopen(list, "rb");
	if (!f) {
		fprintf(stderr, "profleet-podcache: %s: %s\n", list, strerror(errno));
		return 1;
	}
	char *body = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&body, &len);
	char buf[65536];
	size_t r;
	while (mem && (r = fread(buf, 1, sizeof(buf), f)) > 0)
		fwrite(buf, 1, r, mem);
	fclose(f);
	if (!mem)
		return 1;
	fclose(mem);
	struct pf_podcache_options o = {.api_url = "http://127.0.0.1:1", .node_name = "bench"};
	struct pf_error err = {0};
	struct pf_podcache *pc = pf_podcache_new(&o, &err);
	uint64_t t0 = now_ns();
	if (!pc || pf_podcache_apply_list(pc, body, len, NULL, 0, &err) < 0) {
		fprintf(stderr, "profleet-podcache: %s\n", err.msg);
		free(body);
		pf_podcache_free(pc);
		return 1;
	}
	uint64_t t_list = now_ns() - t0;
	/* the container ids of the list, in order */
	static char ids[BENCH_MAX_IDS][PF_CONTAINER_ID_LEN];
	size_t n_ids = 0;
	for (const char *p = body; n_ids < BENCH_MAX_IDS && (p = strstr(p, "://"));) {
		p += 3;
		size_t h = strspn(p, "0123456789abcdef");
		if (h == PF_CONTAINER_ID_LEN - 1) {
			memcpy(ids[n_ids], p, h);
			ids[n_ids++][h] = 0;
		}
	}
	free(body);
	size_t attrs = 0;
	t0 = now_ns();
	for (long i = 0; n_ids && i < n; i++)
		pf_podcache_container_attrs(pc, ids[(size_t)i % n_ids], "", count_attr, &attrs);
	uint64_t t_hit = now_ns() - t0;
	static const char miss[] =
	    "0000000000000000000000000000000000000000000000000000000000000000";
	t0 = now_ns();
	for (long i = 0; i < n; i++)
		pf_podcache_container_attrs(pc, miss, "", count_attr, &attrs);
	uint64_t t_miss = now_ns() - t0;
	struct pf_podcache_stats st;
	pf_podcache_stats(pc, &st);
	printf("{\"pods\":%llu,\"containers\":%llu,\"list_ms\":%.2f,\"lookups\":%ld,"
	       "\"ns_per_hit\":%.0f,\"attributes_per_hit\":%.1f,\"ns_per_miss\":%.0f}\n",
	       (unsigned long long)st.pods, (unsigned long long)st.containers, t_list / 1e6, n,
	       n ? (double)t_hit / (double)n : 0, n && n_ids ? (double)attrs / (double)n : 0,
	       n ? (double)t_miss / (double)n : 0);
	pf_podcache_free(pc);
	return 0;
}

int main(int argc, char **argv)
{
	struct pf_podcache_options o = {0};
	const char *proc_root = "/proc";
	uint32_t pids[MAX_PIDS];
	size_t n_pids = 0;
	long seconds = 0;
	struct pf_filter filter, *fp = NULL;
	char fkey[128];
	const char *list = NULL;
	long bench_n = 0;
	enum {
		O_NODE = 256,
		O_API,
		O_TOKEN,
		O_CA,
		O_ROOT,
		O_PID,
		O_SECONDS,
		O_WT,
		O_FILTER,
		O_LIST,
		O_BENCH
	};
	static const struct option opts[] = {
	    {"node", required_argument, 0, O_NODE},
	    {"api", required_argument, 0, O_API},
	    {"token-file", required_argument, 0, O_TOKEN},
	    {"ca-file", required_argument, 0, O_CA},
	    {"proc-root", required_argument, 0, O_ROOT},
	    {"pid", required_argument, 0, O_PID},
	    {"seconds", required_argument, 0, O_SECONDS},
	    {"watch-timeout", required_argument, 0, O_WT},
	    {"filter", required_argument, 0, O_FILTER},
	    {"list", required_argument, 0, O_LIST},
	    {"bench", required_argument, 0, O_BENCH},
	    {0, 0, 0, 0},
	};
	pf_log_set_ident("podcache");
	int c;
	char *end;
	while ((c = getopt_long(argc, argv, "v", opts, NULL)) != -1) {
		switch (c) {
		case O_NODE:
			o.node_name = optarg;
			break;
		case O_API:
			o.api_url = optarg;
			break;
		case O_TOKEN:
			o.token_file = optarg;
			break;
		case O_CA:
			o.ca_file = optarg;
			break;
		case O_ROOT:
			proc_root = optarg;
			break;
		case O_PID: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || !v || v > UINT32_MAX || n_pids == MAX_PIDS) {
				usage(stderr);
				return 2;
			}
			pids[n_pids++] = (uint32_t)v;
			break;
		}
		case O_SECONDS:
			seconds = strtol(optarg, &end, 10);
			if (*end || seconds < 0) {
				usage(stderr);
				return 2;
			}
			break;
		case O_WT: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || !v || v > 3600) {
				usage(stderr);
				return 2;
			}
			o.watch_timeout_s = (uint32_t)v;
			break;
		}
		case O_FILTER: {
			const char *eq = strchr(optarg, '=');
			if (!eq || (size_t)(eq - optarg) >= sizeof(fkey)) {
				usage(stderr);
				return 2;
			}
			snprintf(fkey, sizeof(fkey), "%.*s", (int)(eq - optarg), optarg);
			memset(&filter, 0, sizeof(filter));
			filter.key = fkey;
			filter.match = PF_MATCH_STRICT;
			filter.value = (char *)eq + 1;
			fp = &filter;
			break;
		}
		case O_LIST:
			list = optarg;
			break;
		case O_BENCH:
			bench_n = strtol(optarg, &end, 10);
			if (*end || bench_n <= 0) {
				usage(stderr);
				return 2;
			}
			break;
		case 'v':
			pf_log_set_level(PF_LOG_DEBUG);
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (list)
		return bench(list, bench_n ? bench_n : 1000000);
	o.backoff_base_ms = 100;
	o.backoff_cap_ms = 2000;
	struct pf_error err = {0};
	struct pf_podcache *pc = pf_podcache_new(&o, &err);
	if (!pc || pf_podcache_start(pc, &err) < 0) {
		fprintf(stderr, "profleet-podcache: %s\n", err.msg);
		pf_podcache_free(pc);
		return 1;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	uint64_t deadline = seconds ? pf_mono_ms() + (uint64_t)seconds * 1000 : 0;
	struct pf_podcache_stats last;
	memset(&last, 0, sizeof(last));
	last.generation = UINT64_MAX;
	while (!stop && (!deadline || pf_mono_ms() < deadline)) {
		struct pf_podcache_stats st;
		pf_podcache_stats(pc, &st);
		if (st.generation != last.generation || st.reachable != last.reachable ||
		    strcmp(st.last_error, last.last_error)) {
			json_t *line = json_pack(
			    "{s:I,s:I,s:I,s:b,s:b,s:s,s:I,s:I,s:I,s:s,s:o}", "generation",
			    (json_int_t)st.generation, "pods", (json_int_t)st.pods, "containers",
			    (json_int_t)st.containers, "reachable", st.reachable, "synced",
			    st.synced, "resource_version", st.resource_version, "lists",
			    (json_int_t)st.lists, "watches", (json_int_t)st.watches, "relists",
			    (json_int_t)st.relists, "last_error", st.last_error, "processes",
			    processes(pc, proc_root, pids, n_pids, fp));
			char *s = line ? json_dumps(line, JSON_COMPACT) : NULL;
			if (s) {
				printf("%s\n", s);
				fflush(stdout);
			}
			free(s);
			json_decref(line);
			last = st;
		}
		usleep(20 * 1000);
	}
	pf_podcache_free(pc);
	return 0;
}
