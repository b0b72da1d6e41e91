/* seedgen.c — writes the binary seeds of tests/fuzz/corpus/ from our own encoders, so the seeds
 * follow the codecs when they change:
 *
 *   fuzz-seedgen <corpus dir> <tests/data/pprof dir>
 *
 * pprof/    the Go fixtures gzip'd as scraped and decompressed (plain pprof), and our encoder's
 *           output for the fixture windows (tests/lib/prof_fixture.h), plain
 *   otlp/     ExportProfilesServiceRequests of the fixture windows (CPU with timestamps and a
 *           trace link, typed), of the Go heap profile as the agent converts it, and one
 *           gzip'd (the receiver's Content-Encoding: gzip path)
 *   traces/   OTLP trace export requests (one mode byte first, see fuzz_traces.c): protobuf and
 *           OTLP/JSON, plain and gzip'd, spans with pid, thread id, service name, ERROR
 *   detail/   stored-profile details (fuzz_detail.c's layout) of the fixture windows: CPU with
 *           timestamps, a trace link and inlined names, and typed
 *   opamp/    a full AgentToServer and ServerToAgent, a minimal heartbeat of each, and a
 *           WebSocket-framed one (header byte 0)
 * The YAML and selector seeds are written by hand (corpus/profcfg, corpus/selector). Seeds
 * named gen-* are overwritten; regression inputs (crash-*, regress-*) are kept. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opamp_codec.h"
#include "otlp_profiles.h"
#include "otlp_traces.h"
#include "pf/gzip.h"
#include "pprof/sampler_pprof.h"
#include "pprof_codec.h"
#include "profstore/detail.h"
#include "prof_fixture.h"

static const char *corpus;

static int write_seed(const char *target, const char *name, const void *p, size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s/gen-%s", corpus, target, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
		fprintf(stderr, "seedgen: cannot write %s: %s\n", path, strerror(errno));
		exit(1);
	}
	printf("%s (%zu bytes)\n", path, n);
	return 0;
}

static void write_buf(const char *target, const char *name, struct pf_buf *b)
{
	write_seed(target, name, b->data, b->len);
	pf_buf_reset(b);
}

static void must(int rc, const char *what)
{
	if (rc < 0) {
		fprintf(stderr, "seedgen: %s: %d\n", what, rc);
		exit(1);
	}
}

static void read_all(const char *path, struct pf_buf *out)
{
	FILE *f = fopen(path, "rb");
	uint8_t tmp[4096];
	size_t n;
	if (!f) {
		fprintf(stderr, "seedgen: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
		must(pf_buf_append(out, tmp, n), path);
	fclose(f);
}

static void pprof_seeds(const char *data_dir)
{
	static const char *const go[] = {"go_cpu", "go_heap", "go_goroutine"};
	struct pf_buf gz, plain, b;
	char path[4096], name[64];

	pf_buf_init(&gz, 0);
	pf_buf_init(&plain, 0);
	pf_buf_init(&b, 0);
	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s.pb.gz", data_dir, go[i]);
		read_all(path, &gz);
		snprintf(name, sizeof(name), "%s.pb.gz", go[i]);
		write_seed("pprof", name, gz.data, gz.len);
		must(pf_gzip_decompress(gz.data, gz.len, 1 << 20, &plain), "gunzip");
		snprintf(name, sizeof(name), "%s.pb", go[i]);
		write_buf("pprof", name, &plain);
		if (i == 1) {
			/* The heap profile as the agent converts and exports it. */
			struct pf_pprof_target t = {.url = "http://127.0.0.1:1/debug/pprof/heap",
						    .type = PF_PPROF_HEAP};
			struct pf_prof_window *w = NULL;
			must(pf_pprof_convert(gz.data, gz.len, &t, NULL, 1, &w, NULL), "convert");
			must(pf_otlp_profiles_encode(w, &b, NULL, NULL), "otlp encode");
			write_buf("otlp", "go_heap.otlp", &b);
			pf_prof_window_free(w);
		}
		pf_buf_reset(&gz);
	}
	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_LINK);
	must(pf_pprof_encode(w, PF_PPROF_ALL_PROCESSES, &gz, NULL), "pprof encode");
	must(pf_gzip_decompress(gz.data, gz.len, 1 << 20, &plain), "gunzip");
	write_buf("pprof", "fixture_cpu.pb", &plain);
	pf_buf_reset(&gz);
	pf_prof_window_free(w);
	w = prof_fixture_typed_window();
	must(pf_pprof_encode(w, PF_PPROF_ALL_PROCESSES, &gz, NULL), "pprof encode");
	must(pf_gzip_decompress(gz.data, gz.len, 1 << 20, &plain), "gunzip");
	write_buf("pprof", "fixture_typed.pb", &plain);
	pf_prof_window_free(w);
	pf_buf_release(&gz);
	pf_buf_release(&plain);
	pf_buf_release(&b);
}

static void otlp_seeds(void)
{
	struct pf_buf b, gz;
	struct pf_prof_window *w;

	pf_buf_init(&b, 0);
	pf_buf_init(&gz, 0);
	w = prof_fixture_window(0);
	must(pf_otlp_profiles_encode(w, &b, NULL, NULL), "otlp encode");
	must(pf_gzip_compress(b.data, b.len, 6, &gz), "gzip");
	write_buf("otlp", "fixture_cpu.otlp", &b);
	write_buf("otlp", "fixture_cpu.otlp.gz", &gz);
	pf_prof_window_free(w);
	w = prof_fixture_window(PROF_FIX_TIMESTAMPS | PROF_FIX_LINK);
	must(pf_otlp_profiles_encode(w, &b, NULL, NULL), "otlp encode");
	write_buf("otlp", "fixture_ts_link.otlp", &b);
	pf_prof_window_free(w);
	w = prof_fixture_window(PROF_FIX_MIXED);
	must(pf_otlp_profiles_encode(w, &b, NULL, NULL), "otlp encode");
	write_buf("otlp", "fixture_mixed.otlp", &b);
	pf_prof_window_free(w);
	w = prof_fixture_typed_window();
	must(pf_otlp_profiles_encode(w, &b, NULL, NULL), "otlp encode");
	write_buf("otlp", "fixture_typed.otlp", &b);
	pf_prof_window_free(w);
	pf_buf_release(&b);
	pf_buf_release(&gz);
}

/* fuzz_detail.c's input for process 0 of w: stacks, location keys, samples part. */
static void detail_seed(const char *name, const struct pf_prof_window *w)
{
	struct pf_detail_split sp;
	struct pf_buf b;
	must(pf_detail_split(w, 0, &sp, NULL), "detail split");
	pf_buf_init(&b, 1 << 20);
	size_t nk = sp.n_locs < 16 ? sp.n_locs : 16;
	must(pf_buf_putc(&b, (uint8_t)(sp.n_stacks < 16 ? sp.n_stacks : 16)), "seed");
	must(pf_buf_putc(&b, (uint8_t)nk), "seed");
	for (size_t i = 0; i < nk; i++) {
		size_t n = sp.loc[i].len < 255 ? sp.loc[i].len : 255;
		must(pf_buf_putc(&b, (uint8_t)n), "seed");
		must(pf_buf_append(&b, sp.locs.data + sp.loc[i].off, n), "seed");
	}
	must(pf_buf_append(&b, sp.samples.data, sp.samples.len), "seed");
	write_buf("detail", name, &b);
	pf_buf_release(&b);
	pf_detail_split_release(&sp);
}

static void detail_seeds(void)
{
	struct pf_prof_window *w =
	    prof_fixture_window(PROF_FIX_TIMESTAMPS | PROF_FIX_LINK | PROF_FIX_NAMES);
	detail_seed("fixture_cpu", w);
	pf_prof_window_free(w);
	w = prof_fixture_typed_window();
	detail_seed("fixture_typed", w);
	pf_prof_window_free(w);
}

static void opamp_seeds(void)
{
	static struct pf_kv ident[] = {{"service.name", "profleet-agent"},
				       {"service.instance.id", "0193a5d2-7c1e-7000-8000-000000000001"}};
	static struct pf_kv nonident[] = {{"host.name", "host-a"}, {"os.type", "linux"}};
	static struct pf_health_entry grand[] = {{"cpu", {.healthy = false, .status = "degraded",
							  .last_error = "perf_event_open: EACCES"}}};
	static struct pf_health_entry children[] = {
	    {"sampler", {.healthy = true, .status = "running", .n_children = 1, .children = grand}},
	    {"exporter", {.healthy = true, .status = "ok"}}};
	static const char yaml[] = "profiling:\n  sampling:\n    frequency_hz: 49\n";
	static struct pf_config_file eff[] = {
	    {"profiling.yaml", (uint8_t *)yaml, sizeof(yaml) - 1, "text/yaml"}};
	static char *caps[] = {"io.profleet.capture"};
	static uint8_t hash[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	struct pf_a2s a = {
	    .instance_uid = {0x01, 0x93, 0xa5, 0xd2, 0x7c, 0x1e, 0x70, 0x00, 0x80},
	    .instance_uid_len = 16,
	    .sequence_num = 7,
	    .capabilities = PF_AGENT_CAP_REPORTS_STATUS | PF_AGENT_CAP_ACCEPTS_REMOTE_CONFIG |
			    PF_AGENT_CAP_REPORTS_HEALTH | PF_AGENT_CAP_REPORTS_HEARTBEAT,
	    .flags = PF_A2S_FLAG_REQUEST_INSTANCE_UID,
	    .has_description = true,
	    .n_identifying = 2,
	    .identifying = ident,
	    .n_non_identifying = 2,
	    .non_identifying = nonident,
	    .has_health = true,
	    .health = {.healthy = true, .start_time_unix_nano = 1700000000000000000ull,
		       .status = "running", .n_children = 2, .children = children},
	    .has_effective_config = true,
	    .effective_config = {1, eff},
	    .has_remote_config_status = true,
	    .rcs_last_hash = hash,
	    .rcs_last_hash_len = sizeof(hash),
	    .rcs_status = PF_RCS_FAILED,
	    .rcs_error_message = "profiling.sampling.frequency_hz: must be 1..1000, got 5000",
	    .has_custom_capabilities = true,
	    .n_custom_capabilities = 1,
	    .custom_capabilities = caps,
	    .has_custom_message = true,
	    .custom_message = {"io.profleet.capture", "done", (uint8_t *)"{\"id\":1}", 8},
	};
	struct pf_s2a s = {
	    .instance_uid = {0x01, 0x93, 0xa5, 0xd2, 0x7c, 0x1e, 0x70, 0x00, 0x80},
	    .instance_uid_len = 16,
	    .flags = PF_S2A_FLAG_REPORT_FULL_STATE,
	    .capabilities = PF_SERVER_CAP_ACCEPTS_STATUS | PF_SERVER_CAP_OFFERS_REMOTE_CONFIG |
			    PF_SERVER_CAP_ACCEPTS_EFFECTIVE_CONFIG,
	    .has_error = true,
	    .error_type = PF_SERR_UNAVAILABLE,
	    .error_message = "try later",
	    .has_retry_after = true,
	    .retry_after_nanoseconds = 5000000000ull,
	    .has_remote_config = true,
	    .remote_config = {1, eff},
	    .remote_config_hash = hash,
	    .remote_config_hash_len = sizeof(hash),
	    .has_heartbeat_interval = true,
	    .heartbeat_interval_seconds = 30,
	    .has_new_instance_uid = true,
	    .new_instance_uid = {0x01, 0x93, 0xa5, 0xd2, 0x7c, 0x1e, 0x70, 0x00, 0x80, 2},
	    .has_custom_capabilities = true,
	    .n_custom_capabilities = 1,
	    .custom_capabilities = caps,
	    .has_custom_message = true,
	    .custom_message = {"io.profleet.capture", "start", (uint8_t *)"{\"seconds\":5}", 13},
	};
	struct pf_buf b;

	pf_buf_init(&b, 0);
	must(pf_a2s_encode(&a, &b), "a2s");
	write_buf("opamp", "a2s_full.bin", &b);
	must(pf_s2a_encode(&s, &b), "s2a");
	write_buf("opamp", "s2a_full.bin", &b);
	struct pf_a2s hb = {.instance_uid_len = 16, .sequence_num = 8,
			    .capabilities = a.capabilities};
	memcpy(hb.instance_uid, a.instance_uid, 16);
	must(pf_opamp_ws_frame_header(&b), "frame");
	must(pf_a2s_encode(&hb, &b), "a2s hb");
	write_buf("opamp", "a2s_heartbeat_framed.bin", &b);
	struct pf_s2a ack = {.instance_uid_len = 16, .capabilities = s.capabilities};
	memcpy(ack.instance_uid, s.instance_uid, 16);
	must(pf_s2a_encode(&ack, &b), "s2a ack");
	write_buf("opamp", "s2a_ack.bin", &b);
	pf_buf_release(&b);
}

static void traces_seeds(void)
{
	struct pf_span sp[3];
	memset(sp, 0, sizeof(sp));
	for (int i = 0; i < 3; i++) {
		for (int k = 0; k < 16; k++)
			sp[i].trace_id[k] = (uint8_t)(k * 7 + i + 1);
		for (int k = 0; k < 8; k++)
			sp[i].span_id[k] = (uint8_t)(k * 3 + i + 1);
		sp[i].start_unix_ns = 1764000000000000000ull + (uint64_t)i * 1000000ull;
		sp[i].end_unix_ns = sp[i].start_unix_ns + 750000000ull;
		snprintf(sp[i].name, sizeof(sp[i].name), "GET /slow/%d", i);
	}
	sp[0].pid = 4242;
	sp[0].tid = 4243;
	snprintf(sp[1].service_name, sizeof(sp[1].service_name), "checkout");
	sp[1].status = 2;
	static const char *const names[4] = {"request.pb", "request.json", "request.pb.gz",
					     "request.json.gz"};
	for (int mode = 0; mode < 4; mode++) {
		struct pf_buf b, out;
		pf_buf_init(&b, 1 << 20);
		pf_buf_init(&out, 1 << 20);
		must(pf_otlp_traces_encode(sp, 3, mode & 1, &b), "traces encode");
		must(pf_buf_putc(&out, (uint8_t)mode), "mode byte");
		if (mode & 2)
			must(pf_gzip_compress(b.data, b.len, -1, &out), "gzip");
		else
			must(pf_buf_append(&out, b.data, b.len), "append");
		write_buf("traces", names[mode], &out);
		pf_buf_release(&b);
		pf_buf_release(&out);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s <corpus dir> <tests/data/pprof dir>\n", argv[0]);
		return 2;
	}
	corpus = argv[1];
	pprof_seeds(argv[2]);
	otlp_seeds();
	detail_seeds();
	traces_seeds();
	opamp_seeds();
	return 0;
}
