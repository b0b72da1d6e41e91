"""Hostile clients against the real controller on loopback, with raw sockets.

- A request body is authenticated at the end of its headers: no token, 401 before a body byte
  is read (OTLP receiver, plain-HTTP OpAMP, the API), so unauthenticated bodies cost nothing.
- The body bytes buffered for requests in flight are bounded per source address (429) and in
  all (503), reserved at the end of the headers from Content-Length.
- A body that stalls (no byte for 10 s) or trickles (slower than 64 KiB/s after its first
  10 s) is answered 408 and closed.
Memory is the controller's RSS from /proc. Every wait has a deadline.
"""
import os
import socket
import time
import unittest

from pfharness import IntegrationCase, wait_until
from test_conn_limits import rss_kb


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


def answer_status(s, timeout):
    """The status of the answer on s: an int, 0 when the peer closed without an answer, None
    when nothing came within timeout seconds."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\r\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        s.settimeout(left)
        try:
            chunk = s.recv(4096)
        except socket.timeout:
            return None
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return int(data.split(b" ")[1]) if data.startswith(b"HTTP/") else 0
        data += chunk
    return int(data.split(b" ")[1])


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


if __name__ == "__main__":
    unittest.main()
