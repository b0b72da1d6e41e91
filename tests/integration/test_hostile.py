"""Hostile clients against the real controller on loopback, with raw sockets.

- A request body is authenticated at the end of its headers: no token, 401 before a body byte
  is read (OTLP receiver, plain-HTTP OpAMP, the API), so unauthenticated bodies cost nothing.
- The body bytes buffered for requests in flight are bounded per source address (429) and in
  all (503), reserved at the end of the headers from Content-Length.
- A body that stalls (no byte for 10 s) or trickles (slower than 64 KiB/s after its first
  10 s) is answered 408 and closed.
- An agent description's attribute keys and values are bounded (BAD_REQUEST error reply, the
  description not recorded), so GET /api/v1/agents stays small.
- Plain-HTTP OpAMP cannot take over an instance_uid that a live WebSocket agent holds: it is
  offered a new uid, as a second WebSocket would be.
- Requests lws parses but HTTP refuses: HTTP/0.9 (no version) is answered 505; an
  Authorization header past the 1023 bytes kept is 401 "too long", not "missing".
- An OTLP request's decoded form, string table included, is bounded: a 1M-entry string table
  is refused without the controller's peak memory following it.
- An unfinished (fragmented) WebSocket message is bounded per connection (the message limit,
  1009) and in all (4 x the message limit, 1008), and closed 1008 when it stalls for 10 s; an
  agent beside them is answered.
- Header lines lws 4.1.6 misreads (a name that is a prefix of one it knows, a line without a
  colon) and a %00 in the path behave as docs/limits.md says.
Memory is the controller's RSS (and its peak, VmHWM) from /proc. Every wait has a deadline.
"""
import os
import socket
import time
import unittest
import uuid

from pfharness import IntegrationCase, wait_until
from test_conn_limits import rss_kb, ws_frame
from test_tokens import raw_http, ws_open


def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, payload):
    """A length-delimited protobuf field."""
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def kv(key, value):
    """KeyValue{key, AnyValue{string_value}}."""
    return field(1, key.encode()) + field(2, field(1, value.encode()))


def status_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def connect(port, src="127.0.0.1", timeout=5.0):
    return socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                    source_address=(src, 0))


def send_quiet(s, data):
    """Sends what the peer takes; a peer that answered and closed is not an error here."""
    try:
        s.sendall(data)
        return True
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        return False


def read_until(s, timeout, enough):
    """Reads from s until enough(data) holds: (data, "ok"), or (data, "eof") when the peer
    closed (or reset) first, or (data, "timeout") when timeout seconds passed first."""
    deadline = time.monotonic() + timeout
    data = b""
    while not enough(data):
        left = deadline - time.monotonic()
        if left <= 0:
            return data, "timeout"
        s.settimeout(left)
        try:
            chunk = s.recv(4096)
        except socket.timeout:
            return data, "timeout"
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        if not chunk:
            return data, "eof"
        data += chunk
    return data, "ok"


def answer_status(s, timeout):
    """The status of the answer on s: an int, 0 when the peer closed without an answer, None
    when nothing came within timeout seconds."""
    data, how = read_until(s, timeout, lambda d: b"\r\n" in d)
    if how == "timeout":
        return None
    return int(data.split(b" ")[1]) if data.startswith(b"HTTP/") else 0


def head(method, path, length, auth=None):
    h = "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n" % (method, path)
    if auth:
        h += "Authorization: Bearer %s\r\n" % auth
    return (h + "Content-Length: %d\r\n\r\n" % length).encode()


BODY_ROUTES = (("POST", "/v1development/profiles"), ("POST", "/v1/opamp"),
               ("PUT", "/api/v1/configs/x"))


class BodyTest(IntegrationCase):
    def test_unauthenticated_body_answered_at_headers(self):
        ctl = self.controller()
        for method, path in BODY_ROUTES:
            length = 16 << 20 if path != "/api/v1/configs/x" else 1 << 20
            with connect(ctl.port) as s:
                s.sendall(head(method, path, length) + b"\x00" * 1024)
                # the body stalls: the answer must not wait for it
                self.assertEqual(answer_status(s, 3), 401, path)
            with connect(ctl.port) as s:
                s.sendall(head(method, path, length, auth="not-a-token"))
                self.assertEqual(answer_status(s, 3), 401, path)

    def test_unauthenticated_bodies_hold_no_memory(self):
        ctl = self.controller()
        rss0 = rss_kb(ctl.proc.p.pid)
        socks = []
        self.addCleanup(lambda: [s.close() for s in socks])
        chunk = b"\x00" * (1 << 20)
        for _ in range(25):
            s = connect(ctl.port)
            socks.append(s)
            if send_quiet(s, head("POST", "/v1development/profiles", 16 << 20)):
                for _ in range(12):
                    if not send_quiet(s, chunk):
                        break
        grown_mb = (rss_kb(ctl.proc.p.pid) - rss0) / 1024.0
        # before: ~12 MB held per connection (about 300 MB); now they are refused at once
        self.assertLess(grown_mb, 40, "controller grew %.1f MB" % grown_mb)

    def test_body_budget_per_source_and_total(self):
        # --max-message-bytes 1 MiB: 4 MiB per source address, 16 MiB in all
        mib = 1 << 20
        ctl = self.controller(extra=["--max-message-bytes", str(mib)])
        held = []
        self.addCleanup(lambda: [s.close() for s in held])

        def hold(src):
            s = connect(ctl.port, src)
            s.sendall(head("POST", "/v1development/profiles", mib, ctl.agent_token) +
                      b"\x00" * 1000)
            held.append(s)
            return s

        for _ in range(4):
            hold("127.0.0.1")
        # the fifth 1 MiB body from the same address: 429 before its body is read
        self.assertEqual(answer_status(hold("127.0.0.1"), 3), 429)
        # other addresses still have room, up to 16 MiB in all
        for i in range(12):
            s = hold("127.0.0.%d" % (2 + i // 4))
            self.assertIsNone(answer_status(s, 0.05), i)
        self.assertEqual(answer_status(hold("127.0.0.9"), 3), 503)
        # a finished (here malformed) body frees its reservation
        s = held[0]
        s.sendall(b"\x00" * (mib - 1000))
        self.assertEqual(answer_status(s, 5), 400)
        s = hold("127.0.0.1")
        self.assertIsNone(answer_status(s, 0.3))
        self.assertTrue(ctl.proc.alive())

    def test_stalled_and_trickling_bodies_time_out(self):
        ctl = self.controller()
        stalled = connect(ctl.port)
        self.addCleanup(stalled.close)
        stalled.sendall(head("POST", "/v1development/profiles", 1000, ctl.agent_token) + b"x")
        trickle = connect(ctl.port)
        self.addCleanup(trickle.close)
        trickle.sendall(head("PUT", "/api/v1/configs/x", 1000, ctl.admin_token))
        t0 = time.monotonic()
        got = {}
        while len(got) < 2 and time.monotonic() - t0 < 15:
            # one byte a second keeps lws' own 20 s timer re-armed for ever
            send_quiet(trickle, b"#")
            for name, s in (("stalled", stalled), ("trickle", trickle)):
                if name not in got:
                    st = answer_status(s, 0.5)
                    if st is not None:
                        got[name] = (st, time.monotonic() - t0)
            time.sleep(0.5)
        self.assertEqual(got.get("stalled", (None,))[0], 408, got)
        self.assertEqual(got.get("trickle", (None,))[0], 408, got)
        for name, (_, t) in got.items():
            self.assertGreater(t, 8, (name, t))
            self.assertLess(t, 13, (name, t))
        self.assertTrue(ctl.proc.alive())


class DecodedBoundsTest(IntegrationCase):
    def opamp_post(self, ctl, body):
        with connect(ctl.port, timeout=30) as s:
            s.sendall(head("POST", "/v1/opamp", len(body), ctl.agent_token) + body)
            data = b""
            s.settimeout(30)
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            return int(data.split(b" ")[1]) if data.startswith(b"HTTP/") else 0

    def describe(self, uid, value):
        desc = field(1, kv("service.name", "big")) + field(2, kv("note", value))
        # AgentToServer: instance_uid, sequence_num 0, agent_description, ReportsStatus
        return field(1, uid) + b"\x10\x00" + field(3, desc) + b"\x20\x01"

    def test_description_attribute_value_bound(self):
        ctl = self.controller()
        ok_uid, big_uid = uuid.uuid4().bytes, uuid.uuid4().bytes
        self.assertEqual(self.opamp_post(ctl, self.describe(ok_uid, "v" * 4096)), 200)
        self.assertEqual(self.opamp_post(ctl, self.describe(big_uid, "v" * (15 << 20))), 200)
        st, body, _ = ctl.request("GET", "/api/v1/agents", raw=True)
        self.assertEqual(st, 200)
        # before: the 15 MiB value was kept and listed (15.7 MB); now it is refused
        self.assertLess(len(body), 64 << 10, "GET /api/v1/agents: %d bytes" % len(body))
        self.assertIn(str(uuid.UUID(bytes=ok_uid)), body.decode())
        self.assertIn("v" * 4096, body.decode())
        self.assertNotIn(str(uuid.UUID(bytes=big_uid)), body.decode())

    def test_string_table_bound(self):
        ctl = self.controller()
        pid = ctl.proc.p.pid
        # ExportProfilesServiceRequest.dictionary.string_table: 1M short entries (~10 MB)
        table = b"".join(field(5, b"%07d" % i) for i in range(1 << 20))
        body = field(2, table)
        hwm0 = status_kb(pid, "VmHWM")
        with connect(ctl.port, timeout=60) as s:
            s.sendall(head("POST", "/v1development/profiles", len(body), ctl.agent_token) +
                      body)
            st = answer_status(s, 60)
        grown_mb = (status_kb(pid, "VmHWM") - hwm0) / 1024.0
        self.assertEqual(st, 413)
        # the body itself is 10 MB; before, decoding it peaked 41 MB higher
        self.assertLess(grown_mb, 25, "peak grew %.1f MB" % grown_mb)
        self.assertTrue(ctl.proc.alive())


def a2s_described(uid, service_name):
    """AgentToServer: instance_uid, sequence_num 0, a description, ReportsStatus."""
    desc = field(1, kv("service.name", service_name))
    return field(1, uid) + b"\x10\x00" + field(3, desc) + b"\x20\x01"


class UidTest(IntegrationCase):
    def test_plain_http_cannot_take_a_websocket_agents_uid(self):
        ctl = self.controller()
        uid = uuid.uuid4().bytes
        name = str(uuid.UUID(bytes=uid))
        st, ws = ws_open(ctl.port, ctl.agent_token)
        self.assertEqual(st, 101)
        self.addCleanup(ws.close)
        ws.sendall(ws_frame(a2s_described(uid, "REAL")))

        def described():
            st, body, _ = ctl.request("GET", "/api/v1/agents/" + name)
            return st == 200 and body["attributes"].get("service.name") == "REAL"
        wait_until(described, timeout=10, what="the WebSocket agent's description")
        body = a2s_described(uid, "HIJACK")
        with connect(ctl.port) as s:
            s.sendall(head("POST", "/v1/opamp", len(body), ctl.agent_token) + body)
            data = b""
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                hdr, sep, rest = data.partition(b"\r\n\r\n")
                cl = [l for l in hdr.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                if sep and cl and len(rest) >= int(cl[0].split(b":")[1]):
                    break
        self.assertTrue(data.startswith(b"HTTP/1.1 200"), data[:200])
        reply = data.partition(b"\r\n\r\n")[2]
        # ServerToAgent.agent_identification (8) { new_instance_uid (1): 16 bytes }
        at = reply.find(b"\x42\x12\x0a\x10")
        self.assertGreaterEqual(at, 0, "no new instance_uid offered: %r" % reply)
        fresh = reply[at + 4:at + 20]
        self.assertNotEqual(fresh, uid)
        st, body, _ = ctl.request("GET", "/api/v1/agents/" + name)
        self.assertEqual(st, 200)
        self.assertEqual(body["attributes"].get("service.name"), "REAL", body)
        self.assertEqual(body["transport"], "websocket", body)
        st, body, _ = ctl.request("GET", "/api/v1/agents/" + str(uuid.UUID(bytes=fresh)))
        self.assertEqual(st, 200)
        self.assertEqual(body["attributes"].get("service.name"), "HIJACK", body)


def ws_raw_frame(opcode, fin, payload):
    """A client frame with a zero mask key (the payload goes as it is)."""
    n = len(payload)
    if n < 126:
        ln = bytes([0x80 | n])
    elif n < 65536:
        ln = bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        ln = bytes([0x80 | 127]) + n.to_bytes(8, "big")
    return bytes([(0x80 if fin else 0) | opcode]) + ln + b"\0\0\0\0" + payload


def ws_close_code(s, timeout):
    """The status code of the close frame the server sends on s: an int, 0 when the connection
    ended without one, None when it is still open after timeout seconds."""
    def enough(d):  # a whole first frame (the server sends this test nothing but a close)
        return len(d) >= 2 and len(d) >= 2 + (d[1] & 0x7F)
    data, how = read_until(s, timeout, enough)
    if how == "timeout":
        return None
    if how == "eof" or data[0] & 0x0F != 8 or (data[1] & 0x7F) < 2:
        return 0
    return int.from_bytes(data[2:4], "big")


class WsReassemblyTest(IntegrationCase):
    def test_unfinished_messages_bounded_and_timed_out(self):
        self.small_asan_quarantine()  # the RSS check is about the messages the controller keeps
        ctl = self.controller()
        pid = ctl.proc.p.pid
        rss0 = rss_kb(pid)
        mib = b"\x00" * (1 << 20)
        held = []
        socks = held[:]
        self.addCleanup(lambda: [s.close() for s in socks])
        for _ in range(12):
            st, s = ws_open(ctl.port, ctl.agent_token)
            self.assertEqual(st, 101)
            s.settimeout(30)
            # FIN=0 binary, then 14 continuations with FIN=0: 15 MiB, never finished
            held.append(s)
            socks.append(s)
            ok = send_quiet(s, ws_raw_frame(2, False, mib))
            for _ in range(14):
                if not ok:
                    break
                ok = send_quiet(s, ws_raw_frame(0, False, mib))
        t_sent = time.monotonic()
        grown_mb = (rss_kb(pid) - rss0) / 1024.0
        # before: every message was kept (12 x 16 MiB, RSS +190 MB); now at most 4 x 16 MiB
        # are held in all, the rest closed 1008 as they pass it
        self.assertLess(grown_mb, 100, "controller grew %.1f MB" % grown_mb)
        codes = [ws_close_code(s, 0.3) for s in held]
        closed = [s for s, c in zip(held, codes) if c is not None]
        held = [s for s, c in zip(held, codes) if c is None]
        self.assertGreaterEqual(len(closed), 7, codes)
        self.assertGreaterEqual(len(held), 2, codes)
        self.assertGreaterEqual(codes.count(1008), 1, codes)
        # an agent beside them is answered
        uid = uuid.uuid4().bytes
        st, ws = ws_open(ctl.port, ctl.agent_token)
        self.assertEqual(st, 101)
        self.addCleanup(ws.close)
        ws.sendall(ws_frame(a2s_described(uid, "BESIDE")))
        ws.settimeout(5)
        self.assertEqual(ws.recv(2)[:1], b"\x82")
        # the unfinished ones are closed 1008 once they have stalled for 10 s
        for s in held:
            code = ws_close_code(s, max(1.0, 14 - (time.monotonic() - t_sent)))
            self.assertEqual(code, 1008)
        self.assertGreater(time.monotonic() - t_sent, 8)
        st, body, _ = ctl.request("GET", "/metrics", raw=True)
        self.assertIn("profleet_opamp_message_timeouts_total %d" % len(held), body.decode())
        self.assertTrue(ctl.proc.alive())

    def test_message_over_the_limit_closed_1009(self):
        ctl = self.controller(extra=["--max-message-bytes", str(1 << 20)])
        st, s = ws_open(ctl.port, ctl.agent_token)
        self.assertEqual(st, 101)
        self.addCleanup(s.close)
        s.settimeout(10)
        piece = b"\x00" * (256 << 10)
        ok = send_quiet(s, ws_raw_frame(2, False, piece))
        for _ in range(8):
            if ok:
                ok = send_quiet(s, ws_raw_frame(0, False, piece))
        self.assertIn(ws_close_code(s, 5), (1009, 0))


class RequestLineTest(IntegrationCase):
    def test_http09_and_long_authorization(self):
        ctl = self.controller()
        st, text = raw_http(ctl.port, b"GET /healthz\r\n\r\n")
        self.assertEqual(st, 505, text)
        for path in ("/api/v1/agents", "/v1/opamp"):
            req = ("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
                   % (path, "a" * 2000)).encode()
            st, text = raw_http(ctl.port, req)
            self.assertEqual(st, 401, text)
            self.assertIn("longer than 1023 bytes", text)
        # the WebSocket upgrade says the same
        st, s = ws_open(ctl.port, "a" * 2000)
        self.assertEqual(st, 401)
        # at the bound it is an ordinary (unknown) token
        st, text = raw_http(ctl.port, ("GET /api/v1/agents HTTP/1.1\r\nHost: x\r\nAuthorization: "
                                       "Bearer %s\r\n\r\n" % ("a" * 1016)).encode())
        self.assertEqual(st, 401, text)
        self.assertNotIn("longer than", text)


class HeaderLexerTest(IntegrationCase):
    """What lws 4.1.6's header lexer does with odd header lines, as docs/limits.md says:
    pinned, so that a library that behaves otherwise is noticed."""

    def test_prefix_names_and_lines_without_a_colon(self):
        ctl = self.controller(extra=["--header-timeout-seconds", "2"])
        auth = "Authorization: Bearer %s\r\n" % ctl.admin_token

        def get(extra_before, extra_after=""):
            return raw_http(ctl.port, ("GET /api/v1/agents HTTP/1.1\r\nHost: x\r\n%s%s%s\r\n"
                                       % (extra_before, auth, extra_after)).encode())
        st, text = get("")
        self.assertEqual(st, 200, text)
        for odd in ("X-A: abc\r\n", "Con: x\r\n", "Authoriz: abc\r\n", "NoColonHere\r\n"):
            # after the Authorization header: the request is whole and answered
            if odd != "NoColonHere\r\n":
                st, text = get("", odd + "Accept: */*\r\n")
                self.assertEqual(st, 200, (odd, text))
            # before it: the next line is merged into the odd name, the token lost
            st, text = get(odd)
            self.assertEqual(st, 401, (odd, text))
            self.assertIn("missing", text)
        # an odd line last: the headers never end; closed at the header deadline, unanswered
        t0 = time.monotonic()
        st, text = get("", "Con: x\r\n")
        self.assertEqual(st, 0, text)
        self.assertLess(time.monotonic() - t0, 5)

    def test_nul_in_the_path(self):
        ctl = self.controller()
        st, text = raw_http(ctl.port, b"GET /ui/%00x HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(st, 400, text)
        self.assertIn("invalid_path", text)


if __name__ == "__main__":
    unittest.main()
