"""Incident captures on the agent (io.profleet.capture.v1) against a minimal OpAMP server.

The server here is written for the test (standard library only): a WebSocket OpAMP endpoint at
/v1/opamp that decodes AgentToServer just enough (custom_capabilities, custom_message) and
sends ServerToAgent custom messages (capture.request, capture.cancel), plus an OTLP/HTTP
receiver at /v1development/profiles on the same port, so the agent's default receiver (derived
from its OpAMP URL) lands here. Received profiles are checked with the project's profcheck.

Covers: the capability is advertised; a capture with `exporters: []` reaches the receiver
with the agent's token, tagged (profleet.capture.id, profleet.trigger, profleet.agent.uid),
every sample linked to the request's trace, and `done` lists exactly the profile ids the
receiver got; the final status is sent again after a reconnect; process_not_found;
duration_exceeded and bad_request; a cancel mid-capture exports the partial samples and ends
`cancelled`; `mode: triggered` (nothing sampled between captures) captures too and a configured
file exporter gets the same profiles; four concurrent captures, then busy and rate_limited; over
wss:// the receiver (https:// on the same port) is trusted through the agent's --ca-file; a
receiver that refuses ends in export_failed.

Needs root (CAP_BPF + CAP_PERFMON) and kernel BTF: run directly it exits 77 when the kernel
refuses BPF or perf events. Every wait is bounded.
"""
import base64
import gzip
import hashlib
import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import unittest

from pfharness import pb_fields as fields
from pfharness import (PY_CHAIN, Agent, IntegrationCase, Proc, free_port, py_chain_share,
                       python_workload, varint, wait_until)

PROFCHECK_BIN = os.environ.get("PF_PROFCHECK_BIN", "")
SOURCE_DIR = os.environ.get(
    "PF_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
WORKLOAD_SRC = os.path.join(SOURCE_DIR, "tests", "ebpf", "workload.c")
ALLOC_WORKLOAD_SRC = os.path.join(SOURCE_DIR, "tests", "ebpf", "alloc_workload.c")
CAPABILITY = "io.profleet.capture.v1"
TOKEN = "agent-capture-test-token"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
# A JVM's workload (tests/ebpf/Hot.java, with no LIB argument: its one thread): hot, a short
# loop on a long (a safepoint poll in it), called by middle 200,000 times a round; C2 inlines
# it into middle after warm-up.
JAVA_HOT = os.path.join(SOURCE_DIR, "tests", "ebpf", "Hot.java")
REFUSED = ("Operation not permitted", "Permission denied", "Operation not supported",
           "Function not implemented")


# ---- protobuf, just enough ----------------------------------------------------------------

def ld(num, data):
    return varint(num << 3 | 2) + varint(len(data)) + data


def server_to_agent(uid, msg_type, payload):
    custom = ld(1, CAPABILITY.encode()) + ld(2, msg_type.encode()) + ld(3, payload)
    return ld(1, uid) + ld(11, custom)


def profile_ids(otlp):
    """Hex ids of every Profile in an ExportProfilesServiceRequest."""
    ids = []
    for rp in fields(otlp).get(1, []):
        for sp in fields(rp).get(2, []):
            for prof in fields(sp).get(2, []):
                ids += [p.hex() for p in fields(prof).get(7, [])]
    return ids


# ---- the test server: OpAMP over WebSocket + OTLP receiver --------------------------------

class Server:
    def __init__(self, workdir, tls=None):
        self.workdir = workdir
        self.tls = tls  # ssl.SSLContext: wss:// and https:// on the same port
        self.port = free_port()
        self.lock = threading.Lock()
        self.statuses = []       # decoded capture.status payloads, in arrival order
        self.capabilities = []   # custom_capabilities lists seen
        self.profiles = []       # {"auth", "body", "ids"} per receiver POST
        self.connections = 0
        self.refuse = False      # receiver answers 401
        self.conn = None
        self.uid = b""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def url(self):
        return "%s://127.0.0.1:%d/v1/opamp" % ("wss" if self.tls else "ws", self.port)

    def close(self):
        self.stopping = True
        self.drop()
        self.thread.join(5)
        self.sock.close()

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    @staticmethod
    def _read_head(c):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = c.recv(65536)
            if not chunk or len(data) > 65536:
                return None, b""
            data += chunk
        head, rest = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        hdrs = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        return (lines[0], hdrs), rest

    def _serve(self, c):
        c.settimeout(30)
        try:
            if self.tls:
                c = self.tls.wrap_socket(c, server_side=True)
            req, rest = self._read_head(c)
            if not req:
                return
            line, hdrs = req
            if line.startswith("GET /v1/opamp") and "sec-websocket-key" in hdrs:
                self._ws(c, hdrs, rest)
            elif line.startswith("POST /v1development/profiles"):
                self._receive(c, hdrs, rest)
            else:
                c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        except (OSError, ssl.SSLError):
            pass
        finally:
            c.close()

    def _receive(self, c, hdrs, body):
        n = int(hdrs.get("content-length", "0"))
        while len(body) < n:
            chunk = c.recv(65536)
            if not chunk:
                return
            body += chunk
        if hdrs.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        with self.lock:
            refuse = self.refuse
            if not refuse:
                self.profiles.append({"auth": hdrs.get("authorization", ""), "body": body,
                                      "ids": profile_ids(body)})
        if refuse:
            msg = b"no"
            c.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n%s" % (len(msg), msg))
        else:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
                      b"Content-Length: 0\r\nConnection: close\r\n\r\n")

    # WebSocket (RFC 6455): client frames are masked, ours are not.
    def _ws(self, c, hdrs, rest):
        accept = base64.b64encode(
            hashlib.sha1((hdrs["sec-websocket-key"] + WS_GUID).encode()).digest()).decode()
        c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n" % accept).encode())
        with self.lock:
            self.conn = c
            self.connections += 1
        buf = bytearray(rest)
        message = bytearray()

        def need(n):
            while len(buf) < n:
                chunk = c.recv(65536)
                if not chunk:
                    raise OSError("closed")
                buf.extend(chunk)

        while not self.stopping:
            need(2)
            fin, op = buf[0] & 0x80, buf[0] & 0x0F
            masked, n, off = buf[1] & 0x80, buf[1] & 0x7F, 2
            if n == 126:
                need(4)
                n, off = struct.unpack(">H", bytes(buf[2:4]))[0], 4
            elif n == 127:
                need(10)
                n, off = struct.unpack(">Q", bytes(buf[2:10]))[0], 10
            need(off + (4 if masked else 0) + n)
            key = bytes(buf[off:off + 4]) if masked else b"\0\0\0\0"
            off += 4 if masked else 0
            payload = bytes(b ^ key[i % 4] for i, b in enumerate(buf[off:off + n]))
            del buf[:off + n]
            if op == 8:
                self._send_frame(c, 8, payload[:2])
                return
            if op == 9:
                self._send_frame(c, 10, payload)
                continue
            if op in (0, 1, 2):
                message += payload
                if fin:
                    self._on_message(bytes(message))
                    message = bytearray()

    def _send_frame(self, c, op, payload):
        n = len(payload)
        head = bytes([0x80 | op])
        if n < 126:
            head += bytes([n])
        elif n < 65536:
            head += bytes([126]) + struct.pack(">H", n)
        else:
            head += bytes([127]) + struct.pack(">Q", n)
        with self.lock:
            c.sendall(head + payload)

    def _on_message(self, data):
        if not data or data[0] != 0:  # varint header 0
            return
        a2s = fields(data[1:])
        with self.lock:
            if a2s.get(1):
                self.uid = a2s[1][0]
            for cc in a2s.get(12, []):
                self.capabilities.append([x.decode() for x in fields(cc).get(1, [])])
        for cm in a2s.get(13, []):
            f = fields(cm)
            if f.get(1, [b""])[0].decode() == CAPABILITY and \
                    f.get(2, [b""])[0].decode() == "capture.status":
                st = json.loads(f.get(3, [b"{}"])[0])
                with self.lock:
                    self.statuses.append(st)
        # answer every message, as an OpAMP server does
        self._send(ld(1, self.uid))

    def _send(self, s2a):
        with self.lock:
            c = self.conn
        if c:
            try:
                self._send_frame(c, 2, b"\0" + s2a)
            except OSError:
                pass

    def send_custom(self, msg_type, payload):
        with self.lock:
            uid = self.uid
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self._send(server_to_agent(uid, msg_type, data))

    def drop(self):
        """Closes the agent's connection (it reconnects)."""
        with self.lock:
            c, self.conn = self.conn, None
        if c:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def status_of(self, cid, states=None):
        with self.lock:
            for st in reversed(self.statuses):
                if st.get("id") == cid and (states is None or st.get("state") in states):
                    return st
        return None

    def count_status(self, cid, state):
        with self.lock:
            return sum(1 for st in self.statuses if st.get("id") == cid
                       and st.get("state") == state)


class AgentCapture(IntegrationCase):

    def setUp(self):
        super().setUp()
        if not PROFCHECK_BIN or not os.access(PROFCHECK_BIN, os.X_OK):
            self.fail("PF_PROFCHECK_BIN is not set to an executable (run through ctest)")
        self.wl_name = "pfcap-%d-%d" % (os.getpid(), int(time.monotonic() * 1000) % 100000)
        self.wl_bin = os.path.join(self.workdir, self.wl_name)
        subprocess.run(["cc", "-O0", "-fno-omit-frame-pointer", "-g", "-o", self.wl_bin,
                        WORKLOAD_SRC], check=True, timeout=60)
        self.server = Server(self.workdir)
        self.token_file = os.path.join(self.workdir, "token")
        with open(self.token_file, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(self.token_file, 0o600)

    def tearDown(self):
        super().tearDown()
        self.server.close()

    def workload(self, seconds=60):
        p = Proc([self.wl_bin, str(seconds)], os.path.join(self.workdir, "workload.log"))
        self._procs.append(p)
        return p

    def start_agent(self, mode="continuous", max_duration=300, exporters="[]",
                    per_minute=60, extra=()):
        cfg = os.path.join(self.workdir, "agent.yaml")
        with open(cfg, "w") as f:
            f.write("profiling:\n  mode: %s\n  sampling: {frequency_hz: 49, "
                    "duration_seconds: 5}\n  triggers:\n    on_demand: {enabled: true, "
                    "max_duration_seconds: %d}\n  exporters: %s\n"
                    "  limits: {max_profiles_per_minute: %d}\n"
                    % (mode, max_duration, exporters, per_minute))
        a = Agent(self.workdir, "a", server=self.server.url(), token_file=self.token_file,
                  config=cfg, extra=extra).start()
        self._procs.append(a)
        self.agent = a
        wait_until(lambda: self.server.capabilities, timeout=15, what="first AgentToServer")
        # the sampler loads in the background; skip where the kernel refuses BPF
        def loaded():
            out = a.proc.output()
            if "eBPF sampler unavailable" in out:
                if any(r in out for r in REFUSED):
                    self.skipTest("the kernel refuses BPF or perf events")
                self.fail("sampler unavailable:\n" + out[-2000:])
            return "eBPF sampler loaded" in out
        wait_until(loaded, timeout=30, what="the eBPF sampler to load")
        return a

    def request(self, cid, duration=2, frequency=199, processes=None, **extra):
        req = {"id": cid, "profile_type": "cpu", "duration_seconds": duration,
               "frequency_hz": frequency,
               "processes": processes if processes is not None else [
                   {"key": "process.executable.name", "match": "strict",
                    "value": self.wl_name}]}
        req.update(extra)
        self.server.send_custom("capture.request", req)

    def final(self, cid, timeout=30):
        return wait_until(lambda: self.server.status_of(cid, ("done", "failed", "cancelled")),
                          timeout=timeout, what="final status of " + cid)

    def profcheck(self, body):
        path = os.path.join(self.workdir, "p-%d.otlp.pb" % time.monotonic_ns())
        with open(path, "wb") as f:
            f.write(body)
        r = subprocess.run([PROFCHECK_BIN, path], capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout.decode() + r.stderr.decode())
        return json.loads(r.stdout)

    # ---- tests ----

    def test_done_with_profile_ids_and_no_exporters(self):
        wl = self.workload()
        self.start_agent()
        self.assertIn([CAPABILITY], self.server.capabilities)
        self.request("cap-done", duration=2, frequency=199, trace_id=TRACE_ID)
        st = self.final("cap-done")
        self.assertEqual(st["state"], "done", st)
        # progress before the end (accepted and running may coalesce into the later one when
        # they change faster than messages go out)
        self.assertTrue(self.server.status_of("cap-done", ("accepted", "running")),
                        "no status before the final one")
        self.assertGreater(st["samples"], 50)
        self.assertGreater(st["bytes"], 0)
        self.assertTrue(st["profile_ids"])
        with self.server.lock:
            got = list(self.server.profiles)
        self.assertEqual(sorted(st["profile_ids"]), sorted(i for p in got for i in p["ids"]))
        uid = self.agent.uid()
        total = 0
        for p in got:
            self.assertEqual(p["auth"], "Bearer " + TOKEN)
            summary = self.profcheck(p["body"])
            self.assertEqual(summary["frequency_hz"], 199)
            for proc in summary["processes"]:
                a = proc["attributes"]
                self.assertEqual(a.get("profleet.capture.id"), "cap-done")
                self.assertEqual(a.get("profleet.trigger"), "on_demand")
                self.assertEqual(a.get("profleet.agent.uid"), uid)
                self.assertEqual(a.get("process.executable.name"), self.wl_name)
                self.assertEqual(proc["pid"], wl.p.pid)
                self.assertTrue({"hot_a", "hot_b"} & set(proc["leaf"]), proc["leaf"])
                # every sample linked to the trace, span id zero
                self.assertEqual(proc["links"], {TRACE_ID + "/" + "0" * 16: proc["samples"]})
                total += proc["samples"]
        self.assertEqual(total, st["samples"])
        # a reconnect: the final status is sent again
        before = self.server.count_status("cap-done", "done")
        connections = self.server.connections
        self.server.drop()
        wait_until(lambda: self.server.connections > connections, timeout=20,
                   what="the agent to reconnect")
        wait_until(lambda: self.server.count_status("cap-done", "done") > before, timeout=10,
                   what="the done status again after the reconnect")

    def test_python_capture(self):
        """A capture of a Python process (pfharness.python_workload, under the workload's
        name): its profile names the Python functions, in order."""
        argv = python_workload(self.wl_bin, self.workdir)
        if not argv:
            self.skipTest("no python3.11")
        wl = Proc(argv + ["60"], os.path.join(self.workdir, "workload.log"))
        self._procs.append(wl)
        self.start_agent()
        time.sleep(2)  # the continuous samples find the interpreter (50 ms after the first)
        self.request("cap-py", duration=2, frequency=199)
        st = self.final("cap-py")
        self.assertEqual(st["state"], "done", st)
        with self.server.lock:
            got = list(self.server.profiles)
        named = total = 0
        for p in got:
            for proc in self.profcheck(p["body"])["processes"]:
                self.assertEqual(proc["pid"], wl.p.pid)
                n, t = py_chain_share(proc)
                named += n
                total += t
        print("python capture: %d of %d samples carry %s" % (named, total, PY_CHAIN))
        self.assertGreaterEqual(total, 10)  # 2 s at 199 Hz of a CPU shared with the host
        self.assertGreaterEqual(named * 100, total * 90)

    def test_java_capture(self):
        """A capture of a JVM started before the agent (JAVA_HOT, compiled here): its profile
        names the compiled Java code from the JVM's tables, Hot.hot inlined into Hot.middle."""
        javac, java = shutil.which("javac"), shutil.which("java")
        if not javac or not java:
            self.skipTest("no JDK (scripts/install-deps.sh installs openjdk-17-jdk-headless)")
        subprocess.run([javac, "-d", self.workdir, JAVA_HOT], check=True, timeout=120)
        wl = Proc([java, "-Xmx64m", "-cp", self.workdir, "Hot", "60"],
                  os.path.join(self.workdir, "java.log"))
        self._procs.append(wl)
        self.start_agent()
        time.sleep(4)  # the JVM's tables read at its samples, hot compiled and inlined
        self.request("cap-java", duration=2, frequency=199, processes=[
            {"key": "process.pid", "match": "strict", "value": str(wl.p.pid)}])
        st = self.final("cap-java")
        self.assertEqual(st["state"], "done", st)
        with self.server.lock:
            got = list(self.server.profiles)
        inlined = total = 0
        for p in got:
            for proc in self.profcheck(p["body"])["processes"]:
                self.assertEqual(proc["pid"], wl.p.pid)
                inlined += sum(n for stk, n in proc["stacks"].items()
                               if "Hot.hot;Hot.middle" in stk)
                total += proc["samples"]
        print("java capture: %d of %d samples carry Hot.hot;Hot.middle" % (inlined, total))
        self.assertGreaterEqual(total, 10)
        self.assertGreaterEqual(inlined * 100, total * 50)  # the rest: JIT and GC threads

    def test_alloc_capture(self):
        """profile_type alloc: the allocator probes of the matched process for the capture's
        duration; its profile has pprof's heap sample types, the allocating functions at the
        leaves (tests/ebpf/alloc_workload.c allocates 16 MiB in alloc_hot, 1.6 in alloc_cold)."""
        name = self.wl_name + "a"
        exe = os.path.join(self.workdir, name)
        subprocess.run(["cc", "-O0", "-fno-omit-frame-pointer", "-g", "-o", exe,
                        ALLOC_WORKLOAD_SRC], check=True, timeout=60)
        wl = subprocess.Popen([exe, str(16 << 20)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
        try:
            self.assertEqual(wl.stdout.readline(), b"ready\n")
            self.start_agent(extra=())
            self.request("cap-alloc", duration=4, profile_type="alloc", processes=[
                {"key": "process.executable.name", "match": "strict", "value": name}])
            wait_until(lambda: self.server.status_of("cap-alloc", ("running",)), timeout=20,
                       what="the alloc capture to run")
            wl.stdin.write(b"go\n")
            wl.stdin.flush()
            self.assertTrue(wl.stdout.readline().startswith(b"total "))
            st = self.final("cap-alloc")
        finally:
            wl.stdin.close()
            wl.wait(timeout=10)
        self.assertEqual(st["state"], "done", st)
        self.assertGreater(st["samples"], 0, st)
        with self.server.lock:
            got = list(self.server.profiles)
        self.assertTrue(got)
        leaves = set()
        for p in got:
            summary = self.profcheck(p["body"])
            self.assertEqual(summary["sample_type"], "alloc_objects")
            for proc in summary["processes"]:
                self.assertEqual(proc["pid"], wl.pid)
                leaves |= set(proc["leaf"])
        self.assertIn("alloc_hot", leaves)

    def test_process_not_found(self):
        self.start_agent()
        t0 = time.monotonic()
        self.request("cap-none", duration=30, processes=[
            {"key": "process.executable.name", "match": "strict", "value": "no-such-proc-x"}])
        st = self.final("cap-none", timeout=10)
        self.assertEqual(st["state"], "failed")
        self.assertEqual(st["error_code"], "process_not_found")
        self.assertIn("no running process matches", st["error"])
        self.assertLess(time.monotonic() - t0, 10)  # at once, not after the duration
        self.assertEqual(self.server.profiles, [])

    def test_duration_exceeded(self):
        self.start_agent(max_duration=5)
        self.request("cap-long", duration=6)
        st = self.final("cap-long", timeout=10)
        self.assertEqual(st["state"], "failed")
        self.assertEqual(st["error_code"], "duration_exceeded")
        self.assertIn("max_duration_seconds (5)", st["error"])
        # a bad payload whose id can be read: bad_request
        self.server.send_custom("capture.request", {"id": "cap-bad", "duration_seconds": 0,
                                                     "frequency_hz": 99})
        st = self.final("cap-bad", timeout=10)
        self.assertEqual(st["error_code"], "bad_request")

    def test_cancel_mid_capture(self):
        self.workload()
        self.start_agent()
        t0 = time.monotonic()
        self.request("cap-cancel", duration=60, frequency=99)
        wait_until(lambda: (self.server.status_of("cap-cancel", ("running",)) or {}).get(
            "samples", 0) > 0, timeout=15, what="running status with samples")
        self.server.send_custom("capture.cancel", {"id": "cap-cancel"})
        st = self.final("cap-cancel", timeout=20)
        self.assertEqual(st["state"], "cancelled", st)
        self.assertLess(time.monotonic() - t0, 30)
        self.assertGreater(st["samples"], 0)  # the partial samples were exported
        self.assertTrue(st["profile_ids"])
        with self.server.lock:
            got = sorted(i for p in self.server.profiles for i in p["ids"])
        self.assertEqual(sorted(st["profile_ids"]), got)

    def test_triggered_mode_and_configured_exporter(self):
        self.workload()
        out = os.path.join(self.workdir, "out")
        self.start_agent(mode="triggered", exporters="[{type: file, path: %s}]" % out)
        self.request("cap-trig", duration=2, frequency=99)
        st = self.final("cap-trig")
        self.assertEqual(st["state"], "done", st)
        self.assertGreater(st["samples"], 20)
        with self.server.lock:
            bodies = [p["body"] for p in self.server.profiles]
        self.assertTrue(bodies)
        # the configured exporter gets the same profiles (nothing else is sampled in
        # mode triggered between captures)
        files = wait_until(lambda: [f for f in os.listdir(out) if f.endswith(".otlp.pb")]
                           if os.path.isdir(out) else None, timeout=10, what="file export")
        file_bodies = []
        for name in files:
            with open(os.path.join(out, name), "rb") as f:
                file_bodies.append(f.read())
        self.assertEqual(sorted(file_bodies), sorted(bodies))
        for b in bodies:
            for proc in self.profcheck(b)["processes"]:
                self.assertEqual(proc["attributes"].get("profleet.capture.id"), "cap-trig")

    def test_busy_then_rate_limited(self):
        self.workload()
        self.start_agent(per_minute=4)
        ids = ["cap-c%d" % i for i in range(4)]
        for cid in ids:  # four at once, all on the same process, at different frequencies
            self.request(cid, duration=60, frequency=49 + 100 * ids.index(cid))
        for cid in ids:
            wait_until(lambda: (self.server.status_of(cid, ("running",)) or {}).get(
                "samples", 0) > 0, timeout=15, what="%s running with samples" % cid)
        self.request("cap-c4", duration=5)
        st = self.final("cap-c4", timeout=10)
        self.assertEqual(st["error_code"], "busy", st)
        self.assertIn("4 captures", st["error"])
        for cid in ids:
            self.server.send_custom("capture.cancel", {"id": cid})
        finals = [self.final(cid, timeout=20) for cid in ids]
        self.assertEqual([f["state"] for f in finals], ["cancelled"] * 4, finals)
        # each capture's samples are its own: the 349 Hz one holds the most
        self.assertGreater(finals[3]["samples"], finals[0]["samples"])
        # four captures counted in the last minute: a fifth would exceed 4 per minute
        self.request("cap-c5", duration=5)
        st = self.final("cap-c5", timeout=10)
        self.assertEqual(st["error_code"], "rate_limited", st)
        self.assertIn("max_profiles_per_minute is 4", st["error"])

    def test_wss_receiver_uses_the_opamp_ca(self):
        if not shutil.which("openssl"):
            self.skipTest("no openssl command")
        from test_export_tls import make_ca, make_server_cert
        d = os.path.join(self.workdir, "tls")
        os.makedirs(d)
        make_ca(d, "ca")
        cert, key = make_server_cert(d, "ctl", os.path.join(d, "ca"), "IP:127.0.0.1")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.server.close()
        self.server = Server(self.workdir, tls=ctx)
        self.workload()
        # the test CA is in no system store: only --ca-file makes the receiver trusted
        self.start_agent(extra=["--ca-file", os.path.join(d, "ca.pem")])
        self.request("cap-tls", duration=1, frequency=99)
        st = self.final("cap-tls")
        self.assertEqual(st["state"], "done", st)
        with self.server.lock:
            got = sorted(i for p in self.server.profiles for i in p["ids"])
            auth = {p["auth"] for p in self.server.profiles}
        self.assertEqual(sorted(st["profile_ids"]), got)
        self.assertEqual(auth, {"Bearer " + TOKEN})

    def test_receiver_refuses(self):
        self.workload()
        self.start_agent()
        self.server.refuse = True
        self.request("cap-refused", duration=1, frequency=99)
        st = self.final("cap-refused")
        self.assertEqual(st["state"], "failed", st)
        self.assertEqual(st["error_code"], "export_failed")
        self.assertIn("401", st["error"])


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    if result.testsRun and len(result.skipped) == result.testsRun:
        sys.exit(77)
    sys.exit(0 if result.wasSuccessful() else 1)
