"""Integration-test harness: starts the real profleet binaries on loopback and talks to them.

Python standard library only. Every wait is bounded (wait_until); every process started is
stopped in tearDown, killed if it does not stop in time. Binaries come from the environment
(PF_CONTROLLER_BIN, PF_AGENT_BIN, PF_LOAD_BIN), set by ctest.
"""
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

CONTROLLER_BIN = os.environ.get("PF_CONTROLLER_BIN", "")
AGENT_BIN = os.environ.get("PF_AGENT_BIN", "")
LOAD_BIN = os.environ.get("PF_LOAD_BIN", "")
SHARED_DIR = os.environ.get("PF_SHARED_DIR", "")


def read_text(path):
    with open(path) as f:
        return f.read()


def read_varint(buf, i):
    """A protobuf varint at buf[i]: (value, the index after it)."""
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def pb_fields(buf):
    """{field number: [int or bytes, ...]} of one protobuf message (varint, 64/32-bit, bytes)."""
    out, i = {}, 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        out.setdefault(num, []).append(v)
    return out


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(fn, timeout=10.0, interval=0.05, what="condition"):
    """Polls fn() until it returns a truthy value; fails the test after timeout seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out after %.1fs waiting for %s (last: %r)" % (timeout, what, last))


def varint(n):
    """n as a protobuf base-128 varint (negative numbers as their 64-bit two's complement)."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def import_grpc():
    """Python's gRPC (Debian's python3-grpcio), also when the tests run on an interpreter
    other than Debian's python3; None when it is not installed."""
    try:
        import grpc
    except ImportError:
        sys.path.append("/usr/lib/python3/dist-packages")
        try:
            import grpc
        except ImportError:
            return None
    return grpc


class Proc:
    def __init__(self, args, log_path, env=None):
        self.args = args
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.p = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                  stdin=subprocess.DEVNULL)

    def alive(self):
        return self.p.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=5)
        self.log.close()
        return self.p.returncode

    def output(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")


class Controller:
    def __init__(self, workdir, port=None, extra=(), tls_ca=None):
        self.workdir = workdir
        self.tls_ca = tls_ca
        self.port = port or free_port()
        self.data_dir = os.path.join(workdir, "controller-data")
        self.extra = list(extra)
        self.proc = None
        self.starts = 0

    @property
    def base(self):
        return "%s://127.0.0.1:%d" % ("https" if self.tls_ca else "http", self.port)

    def _ctx(self):
        if not self.tls_ca:
            return None
        import ssl
        return ssl.create_default_context(cafile=self.tls_ca)

    def start(self):
        self.starts += 1
        args = [CONTROLLER_BIN, "--listen", "127.0.0.1:%d" % self.port, "--data-dir",
                self.data_dir] + self.extra
        self.proc = Proc(args, os.path.join(self.workdir, "controller.log"))
        wait_until(self._ready, timeout=15, what="controller /readyz")
        self.admin_token = read_text(os.path.join(self.data_dir, "admin.token")).strip()
        self.agent_token_file = os.path.join(self.data_dir, "agent.token")
        self.agent_token = read_text(self.agent_token_file).strip()
        return self

    def _ready(self):
        if not self.proc.alive():
            raise AssertionError("controller exited:\n" + self.proc.output())
        try:
            with urllib.request.urlopen(self.base + "/readyz", timeout=1,
                                        context=self._ctx()) as r:
                return r.status == 200
        except (urllib.error.URLError, ConnectionError, OSError):
            return False

    def stop(self, sig=signal.SIGTERM):
        if self.proc:
            rc = self.proc.stop(sig)
            self.proc = None
            return rc
        return None

    def request(self, method, path, body=None, token="admin", headers=None, raw=False):
        """Returns (status, parsed JSON or bytes, headers)."""
        if token == "admin":
            token = self.admin_token
        h = dict(headers or {})
        if token:
            h["Authorization"] = "Bearer " + token
        data = body.encode() if isinstance(body, str) else body
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=10, context=self._ctx()) as r:
                payload, status, rh = r.read(), r.status, dict(r.headers)
        except urllib.error.HTTPError as e:
            payload, status, rh = e.read(), e.code, dict(e.headers)
        if raw:
            return status, payload, rh
        try:
            return status, json.loads(payload) if payload else None, rh
        except ValueError:
            return status, payload, rh

    def agents(self, selector=None):
        path = "/api/v1/agents"
        if selector:
            path += "?selector=" + urllib.request.quote(selector)
        st, body, _ = self.request("GET", path)
        assert st == 200, (st, body)
        return body["agents"]

    def summary(self):
        st, body, _ = self.request("GET", "/api/v1/fleet/summary")
        assert st == 200, (st, body)
        return body

    def put_config(self, name, yaml_text):
        return self.request("PUT", "/api/v1/configs/" + name, yaml_text)

    def metric(self, name):
        """An unlabelled counter or gauge of GET /metrics; None when absent."""
        st, body, _ = self.request("GET", "/metrics", token=None, raw=True)
        text = body.decode() if isinstance(body, bytes) else body
        m = re.search(r"^%s (\d+)" % re.escape(name), text, re.M)
        return int(m.group(1)) if m else None


class Agent:
    # figures_s: --health-figures-seconds; tests read counters in health statuses through
    # the controller, so 1 s unless a test wants the agent's default (None)
    def __init__(self, workdir, name, server=None, token_file=None, labels=(), config=None,
                 extra=(), figures_s=1):
        self.workdir = workdir
        self.name = name
        self.state_dir = os.path.join(workdir, "agent-" + name)
        os.makedirs(self.state_dir, exist_ok=True)
        self.server = server
        self.token_file = token_file
        self.labels = list(labels)
        self.config = config
        self.extra = list(extra)
        self.figures_s = figures_s
        self.proc = None

    def start(self):
        args = [AGENT_BIN, "--state-dir", self.state_dir, "--log-level", "debug"]
        if self.server:
            args += ["--server", self.server]
        if self.token_file:
            args += ["--token-file", self.token_file]
        for l in self.labels:
            args += ["--label", l]
        if self.config:
            args += ["--config", self.config]
        if self.figures_s is not None:
            args += ["--health-figures-seconds", str(self.figures_s)]
        args += self.extra
        self.proc = Proc(args, os.path.join(self.workdir, "agent-%s.log" % self.name))
        return self

    def uid(self):
        path = os.path.join(self.state_dir, "instance_uid")
        return wait_until(lambda: os.path.exists(path) and read_text(path).strip(),
                          timeout=10, what="agent instance_uid file")

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        if self.proc:
            rc = self.proc.stop(sig, timeout)
            self.proc = None
            return rc
        return None


def ws_handshake_status(port, path="/v1/opamp", token=None, timeout=5.0):
    """Sends a WebSocket upgrade request; returns (HTTP status, headers text)."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = ["GET %s HTTP/1.1" % path, "Host: 127.0.0.1:%d" % port, "Upgrade: websocket",
             "Connection: Upgrade", "Sec-WebSocket-Key: " + key, "Sec-WebSocket-Version: 13"]
    if token:
        lines.append("Authorization: Bearer " + token)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode(errors="replace")
    status = int(head.split(" ")[1]) if head.startswith("HTTP/") else 0
    return status, head


def plain_http_reply(port, timeout=5.0):
    """Sends a plain-text HTTP request; returns the first bytes answered (b"" when the peer
    closed or said nothing in time), e.g. to show a TLS port gives no HTTP answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            return s.recv(64)
        except (socket.timeout, ConnectionError):
            return b""


# Messages of a refused pf_sampler_new (errno texts of EPERM, EACCES, ENOTSUP, ENOSYS): the
# kernel refuses BPF or perf events, and eBPF tests skip.
REFUSED = ("Operation not permitted", "Permission denied", "Operation not supported",
           "Function not implemented")


# A Python workload for the tests of Python frames: Debian's interpreter copied under the name
# a test's filter selects, running main -> outer -> middle -> py_hot (it prints "ready" first).
# PY_CHAIN is the stack's Python part, leaf first, as profcheck's "stacks" join it.
PYTHON = "/usr/bin/python3.11"
PY_CHAIN = "py_hot;py_middle;py_outer;py_main;<module>"
PY_CHAIN_SRC = """import sys, time
def py_hot(n):
    x = 0
    for i in range(n):
        x += i * i
    return x
def py_middle(end):
    while time.monotonic() < end:
        py_hot(20000)
def py_outer(end):
    py_middle(end)
def py_main():
    print('ready', flush=True)
    py_outer(time.monotonic() + float(sys.argv[1]))
py_main()
"""


def python_workload(exe, workdir):
    """Copies the interpreter to exe and writes the chain script; its argv (add the seconds to
    run), or None when the interpreter is missing."""
    if not os.access(PYTHON, os.X_OK):
        return None
    shutil.copy(PYTHON, exe)
    script = os.path.join(workdir, "chain.py")
    with open(script, "w") as f:
        f.write(PY_CHAIN_SRC)
    return [exe, script]


def py_chain_share(proc):
    """Samples of a profcheck process summary whose stack carries PY_CHAIN, and all of them."""
    named = sum(n for st, n in proc["stacks"].items() if PY_CHAIN in st)
    return named, proc["samples"]


class IntegrationCase(unittest.TestCase):
    """Gives each test a temp dir and stops everything it started."""

    def setUp(self):
        for b, n in ((CONTROLLER_BIN, "PF_CONTROLLER_BIN"), (AGENT_BIN, "PF_AGENT_BIN")):
            if not b or not os.access(b, os.X_OK):
                self.fail("%s is not set to an executable (run through ctest)" % n)
        self.workdir = tempfile.mkdtemp(prefix="pf-it-")
        self._procs = []

    def tearDown(self):
        for p in reversed(self._procs):
            try:
                p.stop()
            except Exception:  # keep stopping the others
                pass
        failed = any(e for _, e in getattr(self._outcome, "errors", []) if e) if hasattr(
            self, "_outcome") else False
        if failed or os.environ.get("PF_KEEP_TEST_DIRS"):
            print("kept test dir: " + self.workdir)
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def small_asan_quarantine(self):
        """For memory checks about what a process keeps: AddressSanitizer holds freed memory
        in a quarantine (256 MB by default) to catch uses after free, so in the sanitizer
        build every freed buffer stays in the RSS too. A 16 MB quarantine for the processes
        this test starts keeps such a check meaningful there; a build without the sanitizer
        ignores the variable. Restored when the test ends."""
        old = os.environ.get("ASAN_OPTIONS")
        os.environ["ASAN_OPTIONS"] = (old + ":" if old else "") + "quarantine_size_mb=16"

        def restore():
            if old is None:
                os.environ.pop("ASAN_OPTIONS", None)
            else:
                os.environ["ASAN_OPTIONS"] = old
        self.addCleanup(restore)

    def controller(self, **kw):
        c = Controller(self.workdir, **kw).start()
        self._procs.append(c)
        return c

    def agent(self, ctl, name, **kw):
        kw.setdefault("server", "ws://127.0.0.1:%d/v1/opamp" % ctl.port)
        kw.setdefault("token_file", ctl.agent_token_file)
        a = Agent(self.workdir, name, **kw).start()
        self._procs.append(a)
        return a

    def wait_sampler(self, agent, timeout=20):
        """Waits until the agent loaded its eBPF sampler; skips the test if the kernel
        refused (REFUSED), fails if the agent exited or said something else."""
        log = os.path.join(self.workdir, "agent-%s.log" % agent.name)

        def state():
            text = ""
            if os.path.exists(log):
                with open(log, errors="replace") as f:
                    text = f.read()
            if "eBPF sampler loaded" in text:
                return "loaded"
            for line in text.splitlines():
                if "eBPF sampler unavailable" in line:
                    return line
            if agent.proc and not agent.proc.alive():
                return "exited:\n" + text
            return None
        st = wait_until(state, timeout=timeout, what="sampler loaded or refused")
        if st == "loaded":
            return
        if any(r in st for r in REFUSED):
            self.skipTest("the kernel refuses BPF/perf events: " + st)
        self.fail("sampler did not start: " + st)

    def agent_json(self, ctl, uid):
        st, body, _ = ctl.request("GET", "/api/v1/agents/" + uid)
        return body if st == 200 else None
