/* wsc.h — the client side of RFC 6455 for the benchmark tools: the opening handshake
 * (Sec-WebSocket-Key and -Accept, RFC 6455 §4.1/§4.2.2), masked client frames (§5.3) and the
 * parsing of server frames (§5.2) with 7-, 16- and 64-bit payload lengths.
 *
 * No I/O and no state: opamp-load owns the sockets, the buffers and the reassembly of
 * fragmented messages. This is deliberately not libwebsockets: the load generator must cost
 * little per connection so that what the benchmark measures is the controller.
 *
 *   struct wsc_frame f;
 *   ssize_t n = wsc_frame_parse(buf, len, max, &f);   // > 0: one frame of n bytes
 *   ...
 *   wsc_frame_append(&out, WSC_OP_BINARY, true, msg, msg_len, mask);
 */
#ifndef PF_BENCH_WSC_H
#define PF_BENCH_WSC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pf/buf.h"
#include "pf/error.h"

enum wsc_opcode {
	WSC_OP_CONT = 0x0,
	WSC_OP_TEXT = 0x1,
	WSC_OP_BINARY = 0x2,
	WSC_OP_CLOSE = 0x8,
	WSC_OP_PING = 0x9,
	WSC_OP_PONG = 0xa,
};

/* Close codes (RFC 6455 §7.4.1) the tools look at. */
enum {
	WSC_CLOSE_NORMAL = 1000,
	WSC_CLOSE_PROTOCOL = 1002,
	WSC_CLOSE_NO_STATUS = 1005, /* close frame without a code (never sent on the wire) */
	WSC_CLOSE_TOO_BIG = 1009,
};

#define WSC_KEY_LEN 24    /* base64 of 16 bytes */
#define WSC_ACCEPT_LEN 28 /* base64 of a SHA-1 */

/* One parsed server frame. payload points into the buffer given to wsc_frame_parse() (server
 * frames are never masked, §5.1, so no copy is needed). */
struct wsc_frame {
	bool fin;
	uint8_t opcode;
	const uint8_t *payload;
	uint64_t len;
};

/* Parses one server frame at p[0..n). Returns the frame's total size (> 0) and fills f; 0 when
 * more bytes are needed; -EPROTO on a protocol error (RSV bits set, masked server frame,
 * reserved opcode, control frame longer than 125 bytes or fragmented, 64-bit length with the
 * top bit set, non-minimal length encoding is accepted); -EMSGSIZE when the payload is longer
 * than max_payload (checked as soon as the length is known, before the payload arrives). */
ssize_t wsc_frame_parse(const uint8_t *p, size_t n, uint64_t max_payload, struct wsc_frame *f);

/* Appends one client frame (FIN as given, masked with `mask`, §5.3) carrying payload[0..len).
 * 0, -ENOMEM or -E2BIG (out's cap). */
int wsc_frame_append(struct pf_buf *out, uint8_t opcode, bool fin, const uint8_t *payload,
		     size_t len, uint32_t mask);

/* Sec-WebSocket-Key from 16 random bytes: key receives WSC_KEY_LEN chars + NUL. */
void wsc_key_make(const uint8_t rnd[16], char key[WSC_KEY_LEN + 1]);
/* The Sec-WebSocket-Accept a server must answer for key: base64(SHA-1(key + GUID)), §4.2.2. */
void wsc_accept_for(const char *key, char accept[WSC_ACCEPT_LEN + 1]);

/* Appends the opening handshake (GET path, Upgrade, Sec-WebSocket-Key/Version 13) with an
 * optional "Authorization: Bearer <bearer>" (NULL for none). host is "addr:port". */
int wsc_request_append(struct pf_buf *out, const char *host, const char *path, const char *key,
		       const char *bearer);

/* Checks the server's handshake response at p[0..n). Returns the length of the response head
 * (through the blank line; frames may follow it) when it is a valid 101 for `key`; 0 when the
 * head is not complete yet; -EPROTO otherwise (status in *status when one was read, reason in
 * err). A head over 16 KiB is an error. */
ssize_t wsc_response_check(const uint8_t *p, size_t n, const char *key, int *status,
			   struct pf_error *err);

/* The close code in a close frame's payload (§5.5.1): WSC_CLOSE_NO_STATUS when empty. */
unsigned wsc_close_code(const uint8_t *payload, uint64_t len);

#endif
