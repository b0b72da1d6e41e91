/* wsc.c — see wsc.h. */
#include "wsc.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

/* RFC 6455 §1.3: the GUID appended to the key before hashing. */
static const char WSC_GUID[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

#define WSC_HEAD_MAX 16384

ssize_t wsc_frame_parse(const uint8_t *p, size_t n, uint64_t max_payload, struct wsc_frame *f)
{
	if (n < 2)
		return 0;
	uint8_t b0 = p[0], b1 = p[1];
	/* §5.2: RSV1-3 must be 0 unless an extension was negotiated (we offer none). */
	if (b0 & 0x70)
		return -EPROTO;
	uint8_t op = b0 & 0x0f;
	bool fin = b0 & 0x80;
	bool control = op & 0x08;
	if (op != WSC_OP_CONT && op != WSC_OP_TEXT && op != WSC_OP_BINARY && op != WSC_OP_CLOSE &&
	    op != WSC_OP_PING && op != WSC_OP_PONG)
		return -EPROTO;
	/* §5.1: a client must close on a masked server frame. */
	if (b1 & 0x80)
		return -EPROTO;
	uint64_t len = b1 & 0x7f;
	size_t hdr = 2;
	if (len == 126) {
		if (n < 4)
			return 0;
		len = ((uint64_t)p[2] << 8) | p[3];
		hdr = 4;
	} else if (len == 127) {
		if (n < 10)
			return 0;
		len = 0;
		for (int i = 0; i < 8; i++)
			len = (len << 8) | p[2 + i];
		/* §5.2: the most significant bit must be 0. */
		if (len >> 63)
			return -EPROTO;
		hdr = 10;
	}
	/* §5.5: control frames carry at most 125 bytes and are never fragmented. */
	if (control && (len > 125 || !fin))
		return -EPROTO;
	if (len > max_payload)
		return -EMSGSIZE;
	if (n - hdr < len)
		return 0;
	f->fin = fin;
	f->opcode = op;
	f->payload = p + hdr;
	f->len = len;
	return (ssize_t)(hdr + len);
}

int wsc_frame_append(struct pf_buf *out, uint8_t opcode, bool fin, const uint8_t *payload,
		     size_t len, uint32_t mask)
{
	uint8_t hdr[14];
	size_t h = 0;
	hdr[h++] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
	/* §5.2: the minimal length encoding, MASK bit set (client to server, §5.3). */
	if (len < 126) {
		hdr[h++] = (uint8_t)(0x80 | len);
	} else if (len <= 0xffff) {
		hdr[h++] = 0x80 | 126;
		hdr[h++] = (uint8_t)(len >> 8);
		hdr[h++] = (uint8_t)len;
	} else {
		hdr[h++] = 0x80 | 127;
		for (int i = 7; i >= 0; i--)
			hdr[h++] = (uint8_t)((uint64_t)len >> (8 * i));
	}
	uint8_t mk[4] = { (uint8_t)(mask >> 24), (uint8_t)(mask >> 16), (uint8_t)(mask >> 8),
			  (uint8_t)mask };
	memcpy(hdr + h, mk, 4);
	h += 4;

	int r = pf_buf_reserve(out, h + len);
	if (r < 0)
		return r;
	memcpy(out->data + out->len, hdr, h);
	uint8_t *dst = out->data + out->len + h;
	/* §5.3: octet i of the payload is XORed with octet i mod 4 of the key; 8 bytes at a
	 * time with a key repeated twice (the offset stays a multiple of 4). */
	uint64_t k8;
	uint8_t kk[8] = { mk[0], mk[1], mk[2], mk[3], mk[0], mk[1], mk[2], mk[3] };
	memcpy(&k8, kk, 8);
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, payload + i, 8);
		w ^= k8;
		memcpy(dst + i, &w, 8);
	}
	for (; i < len; i++)
		dst[i] = payload[i] ^ mk[i & 3];
	out->len += h + len;
	out->data[out->len] = 0;
	return 0;
}

void wsc_key_make(const uint8_t rnd[16], char key[WSC_KEY_LEN + 1])
{
	EVP_EncodeBlock((unsigned char *)key, rnd, 16);
	key[WSC_KEY_LEN] = 0;
}

void wsc_accept_for(const char *key, char accept[WSC_ACCEPT_LEN + 1])
{
	uint8_t in[128];
	size_t kl = strnlen(key, 64);
	memcpy(in, key, kl);
	memcpy(in + kl, WSC_GUID, sizeof(WSC_GUID) - 1);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (!EVP_Digest(in, kl + sizeof(WSC_GUID) - 1, md, &mdlen, EVP_sha1(), NULL) ||
	    mdlen != 20) {
		accept[0] = 0;
		return;
	}
	EVP_EncodeBlock((unsigned char *)accept, md, 20);
	accept[WSC_ACCEPT_LEN] = 0;
}

int wsc_request_append(struct pf_buf *out, const char *host, const char *path, const char *key,
		       const char *bearer)
{
	/* §4.1: the client's opening handshake. */
	int r = pf_buf_printf(out,
			      "GET %s HTTP/1.1\r\n"
			      "Host: %s\r\n"
			      "Upgrade: websocket\r\n"
			      "Connection: Upgrade\r\n"
			      "Sec-WebSocket-Key: %s\r\n"
			      "Sec-WebSocket-Version: 13\r\n",
			      path, host, key);
	if (r == 0 && bearer)
		r = pf_buf_printf(out, "Authorization: Bearer %s\r\n", bearer);
	if (r == 0)
		r = pf_buf_append_str(out, "\r\n");
	return r;
}

/* Finds "\r\n\r\n" in p[0..n); returns the offset past it or 0. */
static size_t head_end(const uint8_t *p, size_t n)
{
	for (size_t i = 3; i < n; i++)
		if (p[i] == '\n' && p[i - 1] == '\r' && p[i - 2] == '\n' && p[i - 3] == '\r')
			return i + 1;
	return 0;
}

/* True when the comma-separated header value v[0..vl) contains token tok (case-insensitive). */
static bool value_has_token(const char *v, size_t vl, const char *tok)
{
	size_t tl = strlen(tok);
	size_t i = 0;
	while (i < vl) {
		while (i < vl && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		size_t s = i;
		while (i < vl && v[i] != ',')
			i++;
		size_t e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - s == tl && strncasecmp(v + s, tok, tl) == 0)
			return true;
	}
	return false;
}

ssize_t wsc_response_check(const uint8_t *p, size_t n, const char *key, int *status,
			   struct pf_error *err)
{
	*status = 0;
	size_t hl = head_end(p, n);
	if (!hl) {
		if (n > WSC_HEAD_MAX)
			return pf_error_set(err, -EPROTO, NULL, "handshake response head over %d bytes",
					    WSC_HEAD_MAX);
		return 0;
	}
	const char *s = (const char *)p;
	/* Status line: "HTTP/1.1 101 ..." (a refusal may well come as HTTP/1.0). */
	if (hl < 12 || strncmp(s, "HTTP/1.", 7) != 0 || s[8] != ' ')
		return pf_error_set(err, -EPROTO, NULL, "handshake: not an HTTP/1.x response");
	int st = 0;
	for (int i = 9; i < 12; i++) {
		if (s[i] < '0' || s[i] > '9')
			return pf_error_set(err, -EPROTO, NULL, "handshake: bad status line");
		st = st * 10 + (s[i] - '0');
	}
	*status = st;
	if (st != 101) {
		/* Show the start of the body: the controller explains refusals there. */
		size_t bl = pf_min(n - hl, (size_t)160);
		int bi = (int)bl;
		while (bi > 0 && (s[hl + (size_t)bi - 1] == '\n' || s[hl + (size_t)bi - 1] == '\r'))
			bi--;
		return pf_error_set(err, -EPROTO, NULL, "handshake: HTTP status %d, expected 101%s%.*s",
				    st, bi ? ": " : "", bi, s + hl);
	}

	char want[WSC_ACCEPT_LEN + 1];
	wsc_accept_for(key, want);
	bool upgrade = false, connection = false, accept = false;
	size_t i = 0;
	while (i < hl && s[i] != '\n')
		i++;
	i++;
	while (i + 2 < hl) {
		size_t ls = i;
		while (i < hl && s[i] != '\n')
			i++;
		size_t le = i; /* at '\n' */
		i++;
		if (le > ls && s[le - 1] == '\r')
			le--;
		if (le == ls)
			break;
		const char *colon = memchr(s + ls, ':', le - ls);
		if (!colon)
			return pf_error_set(err, -EPROTO, NULL, "handshake: malformed header line");
		size_t nl = (size_t)(colon - (s + ls));
		const char *v = colon + 1;
		size_t vl = (size_t)(s + le - v);
		while (vl && (*v == ' ' || *v == '\t')) {
			v++;
			vl--;
		}
		while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
			vl--;
		if (nl == 7 && strncasecmp(s + ls, "Upgrade", 7) == 0)
			upgrade = value_has_token(v, vl, "websocket");
		else if (nl == 10 && strncasecmp(s + ls, "Connection", 10) == 0)
			connection = value_has_token(v, vl, "upgrade");
		else if (nl == 20 && strncasecmp(s + ls, "Sec-WebSocket-Accept", 20) == 0)
			accept = vl == WSC_ACCEPT_LEN && memcmp(v, want, WSC_ACCEPT_LEN) == 0;
	}
	/* §4.1, client requirements 2-4 on the server's response. */
	if (!upgrade)
		return pf_error_set(err, -EPROTO, NULL, "handshake: no 'Upgrade: websocket'");
	if (!connection)
		return pf_error_set(err, -EPROTO, NULL, "handshake: no 'Connection: Upgrade'");
	if (!accept)
		return pf_error_set(err, -EPROTO, NULL,
				    "handshake: missing or wrong Sec-WebSocket-Accept");
	return (ssize_t)hl;
}

unsigned wsc_close_code(const uint8_t *payload, uint64_t len)
{
	if (len < 2)
		return WSC_CLOSE_NO_STATUS;
	return ((unsigned)payload[0] << 8) | payload[1];
}
