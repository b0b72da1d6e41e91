/* pf/capture_msg.h — the payloads of the OpAMP custom capability io.profleet.capture.v1
 * (docs/capture-protocol.md is the spec): what the controller sends an agent to start or cancel
 * an incident capture, and what the agent reports back while it runs and when it ends.
 *
 * Each payload is one UTF-8 JSON object in CustomMessage.data:
 *   capture.request  server → agent   {"id","profile_type","duration_seconds","frequency_hz",
 *                                      "processes":[{key,match,value}],"trace_id"?,"note"?,
 *                                      "receiver"?}
 *   capture.cancel   server → agent   {"id"}
 *   capture.status   agent → server   {"id","state","samples","bytes","profile_ids":[hex],
 *                                      "error_code"?,"error"?}
 *
 * Decoders check everything (sizes, ranges, id syntax, process rules with the config's own
 * filter validation) and fill a pf_error naming the field; unknown keys are ignored so either
 * side can add optional fields later. Values here are plain and self-contained: requests own
 * their strings (pf_capture_request_release frees them); statuses are fixed-size. */
#ifndef PF_CAPTURE_MSG_H
#define PF_CAPTURE_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"
#include "pf/profcfg.h"

#define PF_CAPTURE_CAPABILITY "io.profleet.capture.v1"
#define PF_CAPTURE_TYPE_REQUEST "capture.request"
#define PF_CAPTURE_TYPE_CANCEL "capture.cancel"
#define PF_CAPTURE_TYPE_STATUS "capture.status"

#define PF_CAPTURE_MAX_MSG 65536     /* bytes of one payload, either direction */
#define PF_CAPTURE_ID_MAX 64         /* id: 1..64 of [A-Za-z0-9._-] */
#define PF_CAPTURE_MAX_PROCESSES 16  /* process rules in one request */
#define PF_CAPTURE_MAX_PROFILE_IDS 64 /* profile ids in one status */
#define PF_CAPTURE_MAX_DURATION 3600 /* seconds; agents also apply on_demand.max_duration */
#define PF_CAPTURE_MAX_NOTE 1024
#define PF_CAPTURE_MAX_URL 2048

/* Agent-side states of one capture. */
enum pf_capture_state {
	PF_CAPTURE_ACCEPTED,  /* request taken, not sampling yet */
	PF_CAPTURE_RUNNING,   /* sampling */
	PF_CAPTURE_DONE,      /* profiles encoded and handed to the exports */
	PF_CAPTURE_FAILED,    /* error_code/error say why */
	PF_CAPTURE_CANCELLED, /* a capture.cancel ended it (partial samples are still exported) */
};

struct pf_capture_request {
	char id[PF_CAPTURE_ID_MAX + 1];
	char profile_type[16];     /* "cpu", "off_cpu", "wall", "alloc" (pf_capture_type_supported) */
	uint32_t duration_seconds; /* 1..PF_CAPTURE_MAX_DURATION */
	uint32_t frequency_hz;     /* 1..1000 */
	size_t n_processes;        /* 0 = every process the agent may profile */
	struct pf_filter processes[PF_CAPTURE_MAX_PROCESSES]; /* include rules, OR-ed */
	bool has_trace_id;
	uint8_t trace_id[16]; /* link every sample to this trace (span id zero) */
	char *note;           /* free text, NULL when none */
	char *receiver;       /* OTLP/HTTP profiles URL of the controller's store; NULL: the agent
			       * derives it from its OpAMP server URL */
};

struct pf_capture_status {
	char id[PF_CAPTURE_ID_MAX + 1];
	enum pf_capture_state state;
	uint64_t samples; /* samples in the capture's profiles so far */
	uint64_t bytes;   /* encoded OTLP bytes */
	size_t n_profile_ids;
	uint8_t profile_ids[PF_CAPTURE_MAX_PROFILE_IDS][16];
	char error_code[32]; /* "" or one of the codes in docs/capture-protocol.md */
	char error[512];     /* human detail, "" when none */
};

const char *pf_capture_state_name(enum pf_capture_state s);
/* -EINVAL for an unknown name. */
int pf_capture_state_parse(const char *name, enum pf_capture_state *out);
/* true when s ends the capture on that agent (done, failed, cancelled). */
bool pf_capture_state_final(enum pf_capture_state s);
/* An id of 1..PF_CAPTURE_ID_MAX characters of [A-Za-z0-9._-]. */
bool pf_capture_id_valid(const char *id);

/* Whether captures of type t can run: the one place that says which types this version
 * captures (cpu, off_cpu, wall and alloc: all the known types). A request of
 * another known type fails the check with "unsupported profile_type". */
bool pf_capture_type_supported(enum pf_prof_type t);

/* Checks a request's fields (the decoder calls it; the API calls it on what it built), naming
 * the field: duration_seconds, frequency_hz, processes[i].key, trace_id, ... */
int pf_capture_request_check(const struct pf_capture_request *r, struct pf_error *err);
/* Appends the JSON payload. -EINVAL (r fails the check), -ENOMEM, -E2BIG. */
int pf_capture_request_encode(const struct pf_capture_request *r, struct pf_buf *out);
/* Parses and checks a payload into *out (zeroed first; release it even on failure). */
int pf_capture_request_decode(const uint8_t *data, size_t len, struct pf_capture_request *out,
			      struct pf_error *err);
void pf_capture_request_release(struct pf_capture_request *r);

int pf_capture_cancel_encode(const char *id, struct pf_buf *out);
int pf_capture_cancel_decode(const uint8_t *data, size_t len, char id[PF_CAPTURE_ID_MAX + 1],
			     struct pf_error *err);

int pf_capture_status_encode(const struct pf_capture_status *st, struct pf_buf *out);
int pf_capture_status_decode(const uint8_t *data, size_t len, struct pf_capture_status *out,
			     struct pf_error *err);

/* Lowercase hex of 16 bytes into out (33 bytes); parse: exactly 32 hex digits. */
void pf_capture_hex16(const uint8_t in[16], char out[33]);
int pf_capture_parse_hex16(const char *s, uint8_t out[16]);

#endif
