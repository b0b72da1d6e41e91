/* fuzz_capture.c — the payloads of the capture capability (common/include/pf/capture_msg.h):
 * what an agent decodes from the server (capture.request, capture.cancel) and what the
 * controller decodes from agents (capture.status). The whole input is fed to each decoder.
 *
 * Invariants checked:
 *  - a rejection is -EBADMSG, -E2BIG or -ENOMEM with a message; a request rejected with an id
 *    filled in carries a valid id (the agent answers bad_request under it);
 *  - an accepted request passes pf_capture_request_check and encodes; decoding that encoding
 *    gives the same request, which encodes to the same bytes;
 *  - an accepted cancel has a valid id; an accepted status encodes, decodes to the same
 *    status and encodes to the same bytes. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "pf/capture_msg.h"

static bool str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static void check_rejection(int rc, const struct pf_error *err)
{
	FUZZ_CHECK(rc == -EBADMSG || rc == -E2BIG || rc == -ENOMEM, "rc %d", rc);
	FUZZ_CHECK(rc == -ENOMEM || err->msg[0], "rejection without a message (rc %d)", rc);
}

static void requests_equal(const struct pf_capture_request *a, const struct pf_capture_request *b)
{
	FUZZ_CHECK(!strcmp(a->id, b->id), "id");
	FUZZ_CHECK(!strcmp(a->profile_type, b->profile_type), "profile_type");
	FUZZ_CHECK(a->duration_seconds == b->duration_seconds, "duration_seconds");
	FUZZ_CHECK(a->frequency_hz == b->frequency_hz, "frequency_hz");
	FUZZ_CHECK(a->n_processes == b->n_processes, "n_processes");
	for (size_t i = 0; i < a->n_processes; i++) {
		FUZZ_CHECK(str_eq(a->processes[i].key, b->processes[i].key), "processes[%zu].key", i);
		FUZZ_CHECK(str_eq(a->processes[i].value, b->processes[i].value),
			   "processes[%zu].value", i);
		FUZZ_CHECK(a->processes[i].match == b->processes[i].match, "processes[%zu].match",
			   i);
	}
	FUZZ_CHECK(a->has_trace_id == b->has_trace_id &&
		       (!a->has_trace_id || !memcmp(a->trace_id, b->trace_id, 16)),
		   "trace_id");
	FUZZ_CHECK(str_eq(a->note, b->note), "note");
	FUZZ_CHECK(str_eq(a->receiver, b->receiver), "receiver");
}

static void fuzz_request(const uint8_t *data, size_t size)
{
	struct pf_capture_request r, r2;
	struct pf_error err = {0};
	int rc = pf_capture_request_decode(data, size, &r, &err);
	if (rc < 0) {
		check_rejection(rc, &err);
		FUZZ_CHECK(!r.id[0] || pf_capture_id_valid(r.id), "invalid id '%s' kept", r.id);
		pf_capture_request_release(&r);
		return;
	}
	FUZZ_CHECK(rc == 0, "rc %d", rc);
	FUZZ_CHECK(pf_capture_request_check(&r, NULL) == 0, "accepted request fails the check");
	struct pf_buf b1, b2;
	pf_buf_init(&b1, PF_CAPTURE_MAX_MSG * 4);
	pf_buf_init(&b2, PF_CAPTURE_MAX_MSG * 4);
	rc = pf_capture_request_encode(&r, &b1);
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM, "encode: %d", rc);
	if (rc == 0) {
		struct pf_error err2 = {0};
		rc = pf_capture_request_decode(b1.data, b1.len, &r2, &err2);
		FUZZ_CHECK(rc == 0 || rc == -ENOMEM || rc == -E2BIG, "re-decode: %d %s", rc,
			   err2.msg);
		if (rc == 0) {
			requests_equal(&r, &r2);
			FUZZ_CHECK(pf_capture_request_encode(&r2, &b2) == 0, "re-encode");
			FUZZ_CHECK(b1.len == b2.len && !memcmp(b1.data, b2.data, b1.len),
				   "encoding is not a fixed point");
		}
		pf_capture_request_release(&r2);
	}
	pf_buf_release(&b1);
	pf_buf_release(&b2);
	pf_capture_request_release(&r);
}

static void fuzz_cancel(const uint8_t *data, size_t size)
{
	char id[PF_CAPTURE_ID_MAX + 1];
	struct pf_error err = {0};
	int rc = pf_capture_cancel_decode(data, size, id, &err);
	if (rc < 0)
		check_rejection(rc, &err);
	else
		FUZZ_CHECK(pf_capture_id_valid(id), "cancel id '%s'", id);
}

static void fuzz_status(const uint8_t *data, size_t size)
{
	struct pf_capture_status st, st2;
	struct pf_error err = {0};
	int rc = pf_capture_status_decode(data, size, &st, &err);
	if (rc < 0) {
		check_rejection(rc, &err);
		return;
	}
	struct pf_buf b1, b2;
	pf_buf_init(&b1, PF_CAPTURE_MAX_MSG * 4);
	pf_buf_init(&b2, PF_CAPTURE_MAX_MSG * 4);
	rc = pf_capture_status_encode(&st, &b1);
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM, "encode: %d", rc);
	if (rc == 0) {
		struct pf_error err2 = {0};
		rc = pf_capture_status_decode(b1.data, b1.len, &st2, &err2);
		FUZZ_CHECK(rc == 0 || rc == -ENOMEM, "re-decode: %d %s", rc, err2.msg);
		if (rc == 0) {
			FUZZ_CHECK(!strcmp(st.id, st2.id) && st.state == st2.state &&
				       st.samples == st2.samples && st.bytes == st2.bytes &&
				       st.n_profile_ids == st2.n_profile_ids &&
				       !memcmp(st.profile_ids, st2.profile_ids,
					       st.n_profile_ids * 16) &&
				       !strcmp(st.error_code, st2.error_code) &&
				       !strcmp(st.error, st2.error),
				   "status changed through encode/decode");
			FUZZ_CHECK(pf_capture_status_encode(&st2, &b2) == 0, "re-encode");
			FUZZ_CHECK(b1.len == b2.len && !memcmp(b1.data, b2.data, b1.len),
				   "encoding is not a fixed point");
		}
	}
	pf_buf_release(&b1);
	pf_buf_release(&b2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_request(data, size);
	fuzz_cancel(data, size);
	fuzz_status(data, size);
	return 0;
}
