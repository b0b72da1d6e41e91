/* fuzz_capture.c — the three io.profleet.capture.v1 payload decoders (pf/capture_msg.h): the
 * controller decodes capture.status from agents, agents decode capture.request and
 * capture.cancel from the controller. Each input goes through all three.
 *
 * Invariants checked:
 *  - a rejection is -EBADMSG, -E2BIG or -ENOMEM with a message;
 *  - what a decoder accepts passes pf_capture_request_check (requests), has a valid id and
 *    at most PF_CAPTURE_MAX_PROFILE_IDS ids (statuses), and encodes (an -E2BIG from escaping
 *    is allowed) to bytes that decode to the same values. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "pf/capture_msg.h"

static bool rejection_ok(int rc, const struct pf_error *err)
{
	return (rc == -EBADMSG || rc == -E2BIG || rc == -ENOMEM) && (rc == -ENOMEM || err->msg[0]);
}

static bool str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void request(const uint8_t *data, size_t size)
{
	struct pf_capture_request r, back;
	struct pf_error err = {0};
	struct pf_buf b;
	int rc = pf_capture_request_decode(data, size, &r, &err);
	if (rc < 0) {
		FUZZ_CHECK(rejection_ok(rc, &err), "request: rc %d, message '%s'", rc, err.msg);
		pf_capture_request_release(&r);
		return;
	}
	FUZZ_CHECK(pf_capture_request_check(&r, NULL) == 0, "accepted request fails the check");
	pf_buf_init(&b, (size_t)PF_CAPTURE_MAX_MSG + 1);
	rc = pf_capture_request_encode(&r, &b);
	FUZZ_CHECK(rc == 0 || rc == -E2BIG, "request encode: %d", rc);
	if (rc == 0) {
		rc = pf_capture_request_decode(b.data, b.len, &back, &err);
		FUZZ_CHECK(rc == 0, "request: own encoding rejected: %s", err.msg);
		FUZZ_CHECK(
		    strcmp(r.id, back.id) == 0 && r.duration_seconds == back.duration_seconds &&
			r.frequency_hz == back.frequency_hz && r.n_processes == back.n_processes &&
			r.has_trace_id == back.has_trace_id &&
			memcmp(r.trace_id, back.trace_id, 16) == 0 && str_eq(r.note, back.note) &&
			str_eq(r.receiver, back.receiver) &&
			strcmp(r.profile_type, back.profile_type) == 0,
		    "request round trip changed a field");
		for (size_t i = 0; i < r.n_processes; i++)
			FUZZ_CHECK(str_eq(r.processes[i].key, back.processes[i].key) &&
				       str_eq(r.processes[i].value, back.processes[i].value) &&
				       r.processes[i].match == back.processes[i].match,
				   "request round trip changed processes[%zu]", i);
		pf_capture_request_release(&back);
	}
	pf_buf_release(&b);
	pf_capture_request_release(&r);
}

static void cancel(const uint8_t *data, size_t size)
{
	char id[PF_CAPTURE_ID_MAX + 1], back[PF_CAPTURE_ID_MAX + 1];
	struct pf_error err = {0};
	struct pf_buf b;
	int rc = pf_capture_cancel_decode(data, size, id, &err);
	if (rc < 0) {
		FUZZ_CHECK(rejection_ok(rc, &err), "cancel: rc %d, message '%s'", rc, err.msg);
		return;
	}
	FUZZ_CHECK(pf_capture_id_valid(id), "cancel: invalid id accepted");
	pf_buf_init(&b, 1024);
	FUZZ_CHECK(pf_capture_cancel_encode(id, &b) == 0, "cancel encode");
	FUZZ_CHECK(pf_capture_cancel_decode(b.data, b.len, back, &err) == 0 &&
		       strcmp(id, back) == 0,
		   "cancel round trip");
	pf_buf_release(&b);
}

static void status(const uint8_t *data, size_t size)
{
	struct pf_capture_status s, back;
	struct pf_error err = {0};
	struct pf_buf b;
	int rc = pf_capture_status_decode(data, size, &s, &err);
	if (rc < 0) {
		FUZZ_CHECK(rejection_ok(rc, &err), "status: rc %d, message '%s'", rc, err.msg);
		return;
	}
	FUZZ_CHECK(pf_capture_id_valid(s.id), "status: invalid id accepted");
	FUZZ_CHECK(s.n_profile_ids <= PF_CAPTURE_MAX_PROFILE_IDS, "status: %zu ids",
		   s.n_profile_ids);
	pf_buf_init(&b, (size_t)PF_CAPTURE_MAX_MSG + 1);
	rc = pf_capture_status_encode(&s, &b);
	FUZZ_CHECK(rc == 0 || rc == -E2BIG, "status encode: %d", rc);
	if (rc == 0) {
		FUZZ_CHECK(pf_capture_status_decode(b.data, b.len, &back, &err) == 0,
			   "status: own encoding rejected: %s", err.msg);
		FUZZ_CHECK(strcmp(s.id, back.id) == 0 && s.state == back.state &&
			       s.samples == back.samples && s.bytes == back.bytes &&
			       s.n_profile_ids == back.n_profile_ids &&
			       memcmp(s.profile_ids, back.profile_ids, 16 * s.n_profile_ids) == 0 &&
			       strcmp(s.error_code, back.error_code) == 0 &&
			       strcmp(s.error, back.error) == 0,
			   "status round trip changed a field");
	}
	pf_buf_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	request(data, size);
	cancel(data, size);
	status(data, size);
	return 0;
}
