/* test_wsc.c — the benchmark's RFC 6455 client pieces: server frame parsing (length forms,
 * partial input, every protocol error), masked client frames, the handshake key/accept and
 * response checks. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wsc.h"

/* Builds an unmasked server frame in out; returns its length. */
static size_t server_frame(uint8_t *out, uint8_t b0, const uint8_t *payload, uint64_t len)
{
	size_t h = 0;
	out[h++] = b0;
	if (len < 126) {
		out[h++] = (uint8_t)len;
	} else if (len <= 0xffff) {
		out[h++] = 126;
		out[h++] = (uint8_t)(len >> 8);
		out[h++] = (uint8_t)len;
	} else {
		out[h++] = 127;
		for (int i = 7; i >= 0; i--)
			out[h++] = (uint8_t)(len >> (8 * i));
	}
	if (payload)
		memcpy(out + h, payload, (size_t)len);
	return h + (size_t)len;
}

static void check_lengths(size_t len, size_t want_hdr)
{
	static uint8_t buf[70000 + 16], payload[70000];
	for (size_t i = 0; i < len; i++)
		payload[i] = (uint8_t)(i * 7);
	size_t n = server_frame(buf, 0x82, payload, len);
	assert_int_equal(n, want_hdr + len);
	struct wsc_frame f;
	/* Every strict prefix needs more bytes. */
	for (size_t cut = 0; cut < n; cut += (cut < 16 ? 1 : 997))
		assert_int_equal(wsc_frame_parse(buf, cut, UINT64_MAX, &f), 0);
	assert_int_equal(wsc_frame_parse(buf, n, UINT64_MAX, &f), (ssize_t)n);
	assert_true(f.fin);
	assert_int_equal(f.opcode, WSC_OP_BINARY);
	assert_int_equal(f.len, len);
	assert_memory_equal(f.payload, payload, len);
}

static void test_parse_lengths(void **state)
{
	check_lengths(0, 2);
	check_lengths(125, 2);
	check_lengths(126, 4);
	check_lengths(65535, 4);
	check_lengths(65536, 10);
	check_lengths(70000, 10);
}

static void test_parse_two_frames_in_one_buffer(void **state)
{
	uint8_t buf[64];
	size_t n = server_frame(buf, 0x02, (const uint8_t *)"ab", 2); /* FIN=0 binary */
	n += server_frame(buf + n, 0x80, (const uint8_t *)"cd", 2);  /* FIN=1 continuation */
	struct wsc_frame f;
	ssize_t r = wsc_frame_parse(buf, n, 100, &f);
	assert_int_equal(r, 4);
	assert_false(f.fin);
	assert_int_equal(f.opcode, WSC_OP_BINARY);
	r = wsc_frame_parse(buf + 4, n - 4, 100, &f);
	assert_int_equal(r, 4);
	assert_true(f.fin);
	assert_int_equal(f.opcode, WSC_OP_CONT);
	assert_memory_equal(f.payload, "cd", 2);
}

static void test_parse_errors(void **state)
{
	uint8_t buf[256] = { 0 };
	struct wsc_frame f;
	/* RSV1 set. */
	size_t n = server_frame(buf, 0xc2, NULL, 0);
	assert_int_equal(wsc_frame_parse(buf, n, 100, &f), -EPROTO);
	/* Reserved opcode 3 and 0xb. */
	n = server_frame(buf, 0x83, NULL, 0);
	assert_int_equal(wsc_frame_parse(buf, n, 100, &f), -EPROTO);
	n = server_frame(buf, 0x8b, NULL, 0);
	assert_int_equal(wsc_frame_parse(buf, n, 100, &f), -EPROTO);
	/* Masked server frame. */
	uint8_t masked[] = { 0x82, 0x81, 1, 2, 3, 4, 5 };
	assert_int_equal(wsc_frame_parse(masked, sizeof(masked), 100, &f), -EPROTO);
	/* Control frame over 125 bytes; fragmented control frame. */
	n = server_frame(buf, 0x89, NULL, 126);
	assert_int_equal(wsc_frame_parse(buf, n, 1000, &f), -EPROTO);
	n = server_frame(buf, 0x09, NULL, 0);
	assert_int_equal(wsc_frame_parse(buf, n, 1000, &f), -EPROTO);
	/* 64-bit length with the top bit set. */
	uint8_t big[10] = { 0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 1 };
	assert_int_equal(wsc_frame_parse(big, sizeof(big), UINT64_MAX, &f), -EPROTO);
	/* Over the caller's cap: refused from the header alone. */
	uint8_t huge[10] = { 0x82, 127, 0, 0, 0, 1, 0, 0, 0, 0 };
	assert_int_equal(wsc_frame_parse(huge, sizeof(huge), 1 << 20, &f), -EMSGSIZE);
	uint8_t mid[4] = { 0x82, 126, 0x01, 0x00 };
	assert_int_equal(wsc_frame_parse(mid, sizeof(mid), 255, &f), -EMSGSIZE);
}

static void test_control_frames(void **state)
{
	uint8_t buf[32];
	struct wsc_frame f;
	uint8_t code[] = { 0x03, 0xf1, 'b', 'i', 'g' }; /* 1009 + reason */
	size_t n = server_frame(buf, 0x88, code, sizeof(code));
	assert_int_equal(wsc_frame_parse(buf, n, 0, &f), -EMSGSIZE);
	assert_int_equal(wsc_frame_parse(buf, n, 125, &f), (ssize_t)n);
	assert_int_equal(f.opcode, WSC_OP_CLOSE);
	assert_int_equal(wsc_close_code(f.payload, f.len), WSC_CLOSE_TOO_BIG);
	assert_int_equal(wsc_close_code(f.payload, 0), WSC_CLOSE_NO_STATUS);
	n = server_frame(buf, 0x89, (const uint8_t *)"hi", 2);
	assert_int_equal(wsc_frame_parse(buf, n, 125, &f), (ssize_t)n);
	assert_int_equal(f.opcode, WSC_OP_PING);
}

static void check_append(size_t len, size_t want_hdr)
{
	static uint8_t payload[70000];
	for (size_t i = 0; i < len; i++)
		payload[i] = (uint8_t)(i * 13 + 1);
	struct pf_buf b;
	pf_buf_init(&b, 0);
	uint32_t mask = 0xa1b2c3d4;
	assert_int_equal(wsc_frame_append(&b, WSC_OP_BINARY, true, payload, len, mask), 0);
	assert_int_equal(b.len, want_hdr + 4 + len);
	assert_int_equal(b.data[0], 0x82);
	assert_true(b.data[1] & 0x80); /* MASK bit */
	const uint8_t *mk = b.data + want_hdr;
	assert_int_equal(mk[0], 0xa1);
	assert_int_equal(mk[3], 0xd4);
	for (size_t i = 0; i < len; i++)
		assert_int_equal(b.data[want_hdr + 4 + i] ^ mk[i & 3], payload[i]);
	/* Unmasked and masked lengths agree: clear MASK bit and parse as a server frame. */
	if (len < 126)
		assert_int_equal(b.data[1] & 0x7f, len);
	pf_buf_release(&b);
}

static void test_append_masked(void **state)
{
	check_append(0, 2);
	check_append(1, 2);
	check_append(7, 2);
	check_append(125, 2);
	check_append(126, 4);
	check_append(65535, 4);
	check_append(65536, 10);
	/* Non-final, other opcode. */
	struct pf_buf b;
	pf_buf_init(&b, 0);
	assert_int_equal(wsc_frame_append(&b, WSC_OP_CLOSE, false, (const uint8_t *)"", 0, 0), 0);
	assert_int_equal(b.data[0], 0x08);
	pf_buf_release(&b);
	/* The cap is honoured. */
	pf_buf_init(&b, 10);
	assert_int_equal(wsc_frame_append(&b, WSC_OP_BINARY, true, (const uint8_t *)"0123456789",
					  10, 1),
			 -E2BIG);
	pf_buf_release(&b);
}

static void test_accept_rfc_example(void **state)
{
	/* RFC 6455 §1.3's worked example. */
	char acc[WSC_ACCEPT_LEN + 1];
	wsc_accept_for("dGhlIHNhbXBsZSBub25jZQ==", acc);
	assert_string_equal(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	const uint8_t nonce[16] = "the sample nonce";
	char key[WSC_KEY_LEN + 1];
	wsc_key_make(nonce, key);
	assert_string_equal(key, "dGhlIHNhbXBsZSBub25jZQ==");
}

static void test_request(void **state)
{
	struct pf_buf b;
	pf_buf_init(&b, 0);
	assert_int_equal(wsc_request_append(&b, "127.0.0.1:4320", "/v1/opamp", "KEY", "tok"), 0);
	const char *s = pf_buf_str(&b);
	assert_non_null(strstr(s, "GET /v1/opamp HTTP/1.1\r\n"));
	assert_non_null(strstr(s, "\r\nSec-WebSocket-Key: KEY\r\n"));
	assert_non_null(strstr(s, "\r\nSec-WebSocket-Version: 13\r\n"));
	assert_non_null(strstr(s, "\r\nAuthorization: Bearer tok\r\n"));
	assert_int_equal(strcmp(s + b.len - 4, "\r\n\r\n"), 0);
	pf_buf_release(&b);
}

static const char *KEY = "dGhlIHNhbXBsZSBub25jZQ==";

static ssize_t check(const char *resp, int *status)
{
	struct pf_error err = { 0 };
	return wsc_response_check((const uint8_t *)resp, strlen(resp), KEY, status, &err);
}

static void test_response(void **state)
{
	int st;
	const char *ok = "HTTP/1.1 101 Switching Protocols\r\n"
			 "upgrade: WebSocket\r\n"
			 "Connection: keep-alive, Upgrade\r\n"
			 "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
			 "\r\n"
			 "\x82\x01";
	ssize_t r = check(ok, &st);
	assert_int_equal(r, (ssize_t)strlen(ok) - 2);
	assert_int_equal(st, 101);
	/* Incomplete heads need more. */
	struct pf_error err = { 0 };
	for (size_t cut = 0; cut < strlen(ok) - 2; cut++)
		assert_int_equal(wsc_response_check((const uint8_t *)ok, cut, KEY, &st, &err), 0);

	assert_int_equal(check("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n", &st),
			 -EPROTO);
	assert_int_equal(st, 401);
	assert_int_equal(check("HTTP/1.0 403 Forbidden\r\n\r\n{\"error\":1}", &st), -EPROTO);
	assert_int_equal(st, 403);
	assert_int_equal(check("HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
			       "Sec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n",
			       &st),
			 -EPROTO);
	assert_int_equal(check("HTTP/1.1 101 OK\r\nConnection: Upgrade\r\n"
			       "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
			       &st),
			 -EPROTO);
	assert_int_equal(check("HTTP/1.1 101 OK\r\nUpgrade: websocket\r\n"
			       "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
			       &st),
			 -EPROTO);
	assert_int_equal(check("SSH-2.0-x\r\n\r\n", &st), -EPROTO);
	assert_int_equal(check("HTTP/1.1 101 OK\r\nno colon here\r\n\r\n", &st), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_lengths),
		cmocka_unit_test(test_parse_two_frames_in_one_buffer),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_control_frames),
		cmocka_unit_test(test_append_masked),
		cmocka_unit_test(test_accept_rfc_example),
		cmocka_unit_test(test_request),
		cmocka_unit_test(test_response),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
