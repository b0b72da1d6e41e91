/* encode_submit.h — a window's way to the exporters, shared by the data plane's windows and the
 * capture runner: the relabel rules (relabel/relabel.h, applied to the window first), OTLP
 * encoding (the whole window as one request, or one request per process,
 * busiest first, so that every profile id is known) and the hand-off of every request, then of
 * the window itself, to a sink. Owns the encoded requests until agent_encoded_release(). */
#ifndef AGENT_EXPORT_ENCODE_SUBMIT_H
#define AGENT_EXPORT_ENCODE_SUBMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"
#include "pf/profile.h"

/* The OTLP requests of one window. */
struct agent_encoded {
	size_t n;	/* requests (0: the window had no samples, or nothing was encoded) */
	size_t cap;	/* room for this many */
	uint64_t bytes; /* their total size */
	struct pf_buf *b;
	uint8_t (*ids)[16];
};

struct agent_submit_sink {
	/* after encoding, before any hand-off; < 0 hands nothing. NULL: go on */
	int (*ready)(void *ctx, const struct agent_encoded *e);
	/* every request; NULL: nothing is encoded */
	void (*bytes)(void *ctx, const uint8_t *data, size_t len, const uint8_t id[16]);
	/* the window itself when it has samples (exporters that take windows); NULL: none */
	void (*window)(void *ctx, const struct pf_prof_window *w);
	void *ctx;
};

/* Relabels w (the current rules: its attributes rewritten in place, processes dropped), encodes
 * it (per_process: at most max requests; else one) into e, then hands it to sink. 0, the
 * relabel or encoder's error with err (nothing handed), or ready's return. e is the caller's
 * (zeroed before the first call); release it with agent_encoded_release(). */
int agent_encode_submit(struct pf_prof_window *w, bool per_process, size_t max,
			const struct agent_submit_sink *sink, struct agent_encoded *e,
			struct pf_error *err);
void agent_encoded_release(struct agent_encoded *e);

#endif
