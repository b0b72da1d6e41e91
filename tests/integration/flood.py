"""Connection floods from one source address, for test_conn_flood and bench/conn_flood.py.

A Flood holds, from one loopback address (127.0.0.2 by default: Linux routes all of 127/8 to
the loopback interface), `half_open` connections that sent the start of an upgrade request
and never finish it, and `slowloris` connections that send one more header line every
`trickle_s` seconds. Connections the server closes are opened again (at most `reopen_per_s`
a second), as an attacker would. Everything runs on one thread with a selector; stop()
closes every socket. Probe helpers measure what a legitimate client from another address
gets meanwhile.
"""
import base64
import os
import resource
import selectors
import socket
import threading
import time

HALF_OPEN_HEAD = b"GET /v1/opamp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"


def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, need))
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want


class Flood:
    def __init__(self, port, half_open=5000, slowloris=300, source="127.0.0.2",
                 trickle_s=4.0, reopen_per_s=2000):
        self.port = port
        self.want = {"half": half_open, "slow": slowloris}
        self.source = source
        self.trickle_s = trickle_s
        self.reopen_per_s = reopen_per_s
        self.sel = selectors.DefaultSelector()
        self.socks = {}  # sock -> [kind, next_trickle]
        self.count = {"half": 0, "slow": 0}
        self.opened = 0
        self.closed_by_server = 0
        self.refused = 0
        self._stop = threading.Event()
        self._thread = None
        raise_nofile(half_open + slowloris + 1024)

    def _open(self, kind):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((self.source, 0))
            err = s.connect_ex(("127.0.0.1", self.port))
            if err not in (0, 115):  # EINPROGRESS
                raise OSError(err, os.strerror(err))
        except OSError:
            s.close()
            self.refused += 1
            return False
        self.sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
        self.socks[s] = [kind, False, time.monotonic() + self.trickle_s]
        self.count[kind] += 1
        self.opened += 1
        return True

    def _drop(self, s, by_server=True):
        kind = self.socks.pop(s)[0]
        self.count[kind] -= 1
        if by_server:
            self.closed_by_server += 1
        try:
            self.sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()

    def _run(self):
        budget = 0.0
        last = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            budget = min(self.reopen_per_s, budget + (now - last) * self.reopen_per_s)
            last = now
            for kind in ("slow", "half"):
                while self.count[kind] < self.want[kind] and budget >= 1:
                    budget -= 1
                    if not self._open(kind):
                        break
            for key, ev in self.sel.select(timeout=0.05):
                s = key.fileobj
                st = self.socks.get(s)
                if st is None:
                    continue
                if ev & selectors.EVENT_READ:
                    try:
                        data = s.recv(4096)
                    except OSError:
                        data = b""
                    if not data:
                        self._drop(s)
                        continue
                if ev & selectors.EVENT_WRITE and not st[1]:
                    try:
                        s.send(HALF_OPEN_HEAD)
                        st[1] = True
                        self.sel.modify(s, selectors.EVENT_READ)
                    except OSError:
                        self._drop(s)
            for s, st in list(self.socks.items()):
                if st[0] == "slow" and st[1] and now >= st[2]:
                    st[2] = now + self.trickle_s
                    try:
                        s.send(b"X-Slow: 1\r\n")
                    except OSError:
                        self._drop(s)

    def start(self, settle_s=3.0):
        for kind in ("slow", "half"):
            while self.count[kind] < self.want[kind]:
                if not self._open(kind):
                    break
        self._thread = threading.Thread(target=self._run, name="flood", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline:
            time.sleep(0.1)
        return self

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
        for s in list(self.socks):
            self._drop(s, by_server=False)
        self.sel.close()

    def held(self):
        return dict(self.count)


def _answer_ms(port, request, want, timeout):
    """Milliseconds from connect until the answer's head starts with want, or None."""
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(request)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        if not data.startswith(want):
            return None
    except OSError:
        return None
    return (time.monotonic() - t0) * 1000.0


def healthz_ms(port, timeout=5.0):
    """Milliseconds from connect to a complete /healthz answer, or None on failure."""
    return _answer_ms(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      b"Connection: close\r\n\r\n", b"HTTP/1.1 200", timeout)


def upgrade_ms(port, token, timeout=5.0):
    """Milliseconds from connect to the 101 of an OpAMP WebSocket upgrade, or None."""
    key = base64.b64encode(os.urandom(16)).decode()
    req = ("GET /v1/opamp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
           "Authorization: Bearer %s\r\n\r\n" % (key, token)).encode()
    return _answer_ms(port, req, b"HTTP/1.1 101", timeout)
