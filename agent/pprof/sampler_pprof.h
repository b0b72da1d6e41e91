/* sampler_pprof.h — pprof sources: scrape Go `net/http/pprof` endpoints (profiling.pprof.targets)
 * and turn each scraped profile into a window (pf/profile.h) with explicit sample types, ready
 * for the same encoders and exporters as the eBPF sampler's windows.
 *
 * Owns the scrape schedule, one worker thread per scrape in flight (at most
 * PF_PPROF_MAX_INFLIGHT at once, one per target, each target with its own HTTP client and
 * connection pool: http_client.h, libcurl — system CA store, proxies from the environment,
 * redirects followed, HTTP/2 where offered), the conversion, the queue of produced windows and
 * the health of every target.
 *
 * Scraping. A target is due `interval_seconds` after its last scrape started (right away the
 * first time); interval 0 scrapes only on pf_pprof_sources_trigger(). The URL is fetched as
 * configured; for type cpu a trigger may ask for another duration (the `seconds=` query
 * parameter is set). The whole request — DNS, connect, TLS, send, response — is bounded by
 * the timeout (options; for cpu plus the `seconds=` of the URL). The response must be 200,
 * at most max_response_bytes (Content-Encoding gzip is undone), and decode as pprof, gzip'd or raw (pf_pprof_decode, bounded by max_decoded_bytes).
 * Any failure becomes the target's last_error ("HTTP 500: <start of body>", "timed out after
 * 10000 ms", "response over 16777216 bytes", "malformed pprof: ...") and never affects the other
 * targets; nothing is retried before the next due time.
 *
 * Conversion. The decoded window keeps every sample type, the period, labels and inlined
 * frames (pprof_codec.h). Every process of it gets the target's attributes as resource
 * attributes, service.name "unknown_service" when the target has none, and host.name from the
 * options; with keep_original the received bytes (as received, usually gzip'd pprof) ride
 * along as original_payload, format "pprof". The window's host_name is set from the options;
 * start/end come from the profile's time_nanos/duration_nanos, or the scrape's wall-clock
 * time when the profile has none.
 *
 * Hand-off to the agent's loop (worker threads hand results back through a queue and a
 * wake-up, never by calling into the loop): finished windows are queued; the queue's wake fd
 * (an eventfd) becomes readable and options.on_ready (may be NULL; e.g. a wrapper of
 * lws_cancel_service()) is called from the worker thread. The loop calls
 * pf_pprof_sources_poll() from a timer (it reaps finished workers and starts due scrapes,
 * and says when it wants to be called next) and pf_pprof_sources_pop() until it returns NULL.
 * Every function is safe to call from one thread (the loop) while workers run; none of them
 * blocks on a scrape except pf_pprof_sources_free(), which cancels the scrapes in flight
 * (they notice within 100 ms, DNS lookups excepted) and joins them. */
#ifndef AGENT_SAMPLER_PPROF_H
#define AGENT_SAMPLER_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"
#include "pf/profcfg.h"
#include "pf/profile.h"

#define PF_PPROF_MAX_INFLIGHT 8
#define PF_PPROF_DEFAULT_TIMEOUT_MS 30000u
#define PF_PPROF_DEFAULT_MAX_RESPONSE ((size_t)16 << 20)
#define PF_PPROF_DEFAULT_MAX_DECODED ((size_t)256 << 20)
#define PF_PPROF_ALL_TARGETS (-1)

struct pf_pprof_sources;

struct pf_pprof_options {
	uint32_t timeout_ms;	   /* per request (cpu: plus its seconds=); 0 = default 30 s */
	size_t max_response_bytes; /* 0 = default 16 MiB */
	size_t max_decoded_bytes;  /* decoder cap; 0 = default 256 MiB */
	const char *host_name;	   /* host.name for windows and resources; may be NULL */
	/* Called from a worker thread after a window was queued (may be NULL). */
	void (*on_ready)(void *arg);
	void *on_ready_arg;
};

/* A produced window. target is the index of the target in the configuration current when
 * the scrape finished; url and type identify it across updates. */
struct pf_pprof_result {
	size_t target;
	char *url;
	enum pf_pprof_type type;
	size_t bytes;		       /* response body size */
	struct pf_prof_window *window; /* owned by the result until taken (set it NULL) */
};

struct pf_pprof_health {
	bool healthy; /* the last scrape succeeded (true before the first one) */
	bool running; /* a scrape is in flight */
	uint64_t scrapes_ok, scrapes_failed;
	uint64_t last_attempt_unix_ns, last_ok_unix_ns;
	uint32_t last_duration_ms;
	int last_http_status;  /* 0 when no response */
	int last_errno;	       /* negative errno of the last failure, 0 after a success */
	size_t last_bytes;     /* response body size of the last success */
	uint64_t last_samples; /* sample count (sum of counts) of the last success */
	char last_error[768];  /* "" after a success */
};

/* Copies the targets (n may be 0; NULL options = defaults). Starts no thread. NULL + errno
 * (EINVAL with err naming the target, e.g. "profiling.pprof.targets[1].url: ...", ENOMEM). */
struct pf_pprof_sources *pf_pprof_sources_new(const struct pf_pprof_target *targets, size_t n,
					      const struct pf_pprof_options *opts,
					      struct pf_error *err);

/* Swaps in a new target list (all checked first; on error nothing changes). A target with
 * the same url and type as an old one keeps its health and schedule; scrapes of removed
 * targets are cancelled and their windows dropped. 0, -EINVAL, -ENOMEM. */
int pf_pprof_sources_update(struct pf_pprof_sources *s, const struct pf_pprof_target *targets,
			    size_t n, struct pf_error *err);

/* Reaps finished workers and starts every due scrape (now_ms: CLOCK_MONOTONIC milliseconds,
 * see pf_pprof_now_ms()). Returns the number of scrapes started (>= 0) or -errno (a thread
 * could not be created; that target's health says so). *next_ms (may be NULL) receives the
 * time until the next scrape is due in ms, -1 when none is scheduled. */
int pf_pprof_sources_poll(struct pf_pprof_sources *s, uint64_t now_ms, int64_t *next_ms);

/* Starts a scrape of target `index` now (PF_PPROF_ALL_TARGETS: every target not already
 * running). seconds > 0 sets the cpu profile duration of this scrape (ignored for other
 * types). 0 or the number started (all), -ENOENT bad index, -EBUSY already running, -errno. */
int pf_pprof_sources_trigger(struct pf_pprof_sources *s, long index, uint32_t seconds);

/* Next produced window (oldest first), NULL when the queue is empty; free with
 * pf_pprof_result_free(). Also clears the wake fd once the queue is empty. */
struct pf_pprof_result *pf_pprof_sources_pop(struct pf_pprof_sources *s);
void pf_pprof_result_free(struct pf_pprof_result *r);

/* Readable (eventfd) while results are queued; for poll(2) or lws_adopt/foreign loops. */
int pf_pprof_sources_wake_fd(const struct pf_pprof_sources *s);

size_t pf_pprof_sources_count(const struct pf_pprof_sources *s);
/* Snapshot of target index's health. 0, -ENOENT. */
int pf_pprof_sources_health(struct pf_pprof_sources *s, size_t index, struct pf_pprof_health *out);
/* Whether any scrape is in flight (tests, shutdown). */
bool pf_pprof_sources_busy(struct pf_pprof_sources *s);

/* Cancels scrapes in flight, joins them, frees queued results. NULL is allowed. */
void pf_pprof_sources_free(struct pf_pprof_sources *s);

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t pf_pprof_now_ms(void);

/* One scrape, synchronously, on the calling thread (the CLI, tests): fetches t->url with the
 * options' limits and converts it. 0 and *out (free with pf_prof_window_free), or -errno with
 * err describing it (http_status, may be NULL, receives the HTTP status or 0). */
int pf_pprof_scrape_once(const struct pf_pprof_target *t, const struct pf_pprof_options *opts,
			 uint32_t cpu_seconds, struct pf_prof_window **out, int *http_status,
			 struct pf_error *err);

/* Converts pprof bytes (gzip'd or raw) as a scrape of t would (attributes, service.name,
 * host.name, original_payload with keep_original; now_unix_ns when the profile has no time).
 * 0, -EBADMSG, -E2BIG, -ENOMEM with err. */
int pf_pprof_convert(const uint8_t *data, size_t len, const struct pf_pprof_target *t,
		     const struct pf_pprof_options *opts, uint64_t now_unix_ns,
		     struct pf_prof_window **out, struct pf_error *err);

#endif
