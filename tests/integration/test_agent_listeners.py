"""The agent's local listeners against half-open connections, end to end.

A client that opens connections and sends only the request line (`GET /metrics HTTP/1.1\\r\\n`,
then nothing) must not keep a liveness probe out: the real agent (no controller: a local
--config) with --metrics-listen and the slow-span OTLP traces receiver; FLOOD such connections
from 127.0.0.1 to one listener, each reopened as soon as the agent closes it, for the whole
test; meanwhile a probe from the same address and one from 127.0.0.2 must get an answer
(/healthz 200 on the metrics endpoint, 405 for GET on the traces receiver) within PROBE_S
seconds, again and again past the header deadline. The flood's connections must be closed by
the agent (the per-address cap and the header deadline), not left to pile up.

The metrics endpoint runs without eBPF (--no-sampler); the traces receiver needs the sampler's
ring, so that case is skipped where the kernel refuses BPF. Every wait is bounded.
"""
import os
import socket
import sys
import threading
import time
import unittest

from pfharness import Agent, IntegrationCase, free_port, wait_until

FLOOD = 20  # half-open connections held at once, more than the agent's 16 header slots
PROBE_S = 2.0  # a liveness probe's timeout
PROBE_ROUNDS = 8  # probes from each address, PROBE_S apart: past the header deadline
HALF_OPEN = b"GET /metrics HTTP/1.1\r\n"


def http_status(port, path, source, timeout):
    """The status of one GET from source (an address to bind), or the error as text."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                      source_address=(source, 0)) as s:
            s.settimeout(timeout)
            s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path)
                      .encode())
            deadline = time.monotonic() + timeout
            data = b""
            while b"\r\n" not in data and time.monotonic() < deadline:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            if not data.startswith(b"HTTP/1.1 "):
                return "no status line: %r" % data[:64]
            return int(data[9:12])
    except OSError as e:
        return "%s: %s" % (type(e).__name__, e)


class Flood:
    """FLOOD half-open connections from 127.0.0.1 to port, each reopened when the agent
    closes it, until stop(). Counts the connections the agent closed."""

    def __init__(self, port):
        self.port = port
        self.stopping = threading.Event()
        self.closed_by_agent = 0
        self.opened = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.hold, daemon=True) for _ in range(FLOOD)]
        for t in self.threads:
            t.start()

    def hold(self):
        while not self.stopping.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=2)
            except OSError:
                self.stopping.wait(0.05)
                continue
            with s:
                with self.lock:
                    self.opened += 1
                try:
                    s.sendall(HALF_OPEN)
                    s.settimeout(0.2)
                    while not self.stopping.is_set():
                        try:
                            if not s.recv(4096):
                                break  # closed by the agent: reconnect
                        except socket.timeout:
                            continue
                except OSError:
                    pass
                if not self.stopping.is_set():
                    with self.lock:
                        self.closed_by_agent += 1

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=5)


class AgentListeners(IntegrationCase):

    def start_agent(self, name, config_lines, extra):
        path = os.path.join(self.workdir, name + ".yaml")
        with open(path, "w") as f:
            f.write("\n".join(config_lines + [""]))
        ag = Agent(self.workdir, name, config=path, extra=extra).start()
        self._procs.append(ag)
        return ag

    def check_under_flood(self, port, path, want):
        wait_until(lambda: http_status(port, path, "127.0.0.1", PROBE_S) == want, timeout=20,
                   what="%s answering %d before the flood" % (path, want))
        flood = Flood(port)
        started = time.monotonic()
        try:
            wait_until(lambda: flood.opened >= FLOOD, timeout=10, what="the flood's connections")
            time.sleep(0.5)  # let them settle as half-open connections inside the agent
            for i in range(PROBE_ROUNDS):
                for source in ("127.0.0.1", "127.0.0.2"):
                    t0 = time.monotonic()
                    got = http_status(port, path, source, PROBE_S)
                    took = time.monotonic() - t0
                    self.assertEqual(got, want, "probe %d from %s after %.1f s of flood "
                                     "(%d connections opened): %s" %
                                     (i, source, time.monotonic() - started, flood.opened, got))
                    self.assertLess(took, PROBE_S)
                time.sleep(PROBE_S / 2)
            self.assertGreater(flood.closed_by_agent, FLOOD,
                               "the agent closes half-open connections")
        finally:
            flood.stop()

    def test_metrics_listener(self):
        mport = free_port()
        self.start_agent("metrics", ["profiling:", "  mode: continuous"],
                         ["--no-sampler", "--metrics-listen", "127.0.0.1:%d" % mport])
        self.check_under_flood(mport, "/healthz", 200)

    def test_span_receiver(self):
        sport, mport = free_port(), free_port()
        ag = self.start_agent("spans", [
            "profiling:",
            "  mode: triggered",
            "  triggers:",
            "    slow_span: {enabled: true, threshold_ms: 1000, listen: \"127.0.0.1:%d\"}" % sport,
        ], ["--metrics-listen", "127.0.0.1:%d" % mport])
        self.wait_sampler(ag)
        self.check_under_flood(sport, "/v1/traces", 405)


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    sys.exit(77 if result.testsRun and len(result.skipped) == result.testsRun else 0)
