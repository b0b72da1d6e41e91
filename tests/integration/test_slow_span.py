"""Slow-span and error-span triggers end to end: the real agent, real eBPF sampling of a known
workload, spans POSTed to the agent's OTLP/HTTP traces receiver.

The agent is connected to a real controller, which pushes a config in mode triggered with
slow_span and error_span on (so the agent samples into its ring only and writes no continuous
windows), exporting to the controller's embedded store and to a directory. A span of the workload's pid over
the threshold yields one profile of exactly that span: only the workload's samples, every one
inside [start, end), every one linked to the span, tagged profleet.trigger=slow_span, with the
workload's hot functions; a span with thread.id is cut to that thread; an ERROR span sent as
gzip'd protobuf yields an error_span profile; a process that exited before its span arrived
is still profiled with its attributes and symbols. Spans of a pid the agent does not sample get a
200 with partial_success; malformed bodies (bad hex ids, end before start, bad gzip) get 400
with the reason; a body over the cap gets 413. The receiver is bound to exactly 127.0.0.1:PORT
(ss -ltn). /metrics counts it all; the store finds the profile by trace_id
(GET /api/v1/profiles?trace_id=) with its trace link, and by trigger; the agent's health has
triggers/spans.

Needs root (CAP_BPF + CAP_PERFMON) and kernel BTF; exits 77 when the kernel refuses BPF or perf
events. Every wait is bounded.
"""
import gzip
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

from pfharness import (PY_CHAIN, Agent, IntegrationCase, free_port, pb_fields, py_chain_share,
                       python_workload, wait_until)

PROFCHECK_BIN = os.environ.get("PF_PROFCHECK_BIN", "")
SOURCE_DIR = os.environ.get(
    "PF_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
WORKLOAD_SRC = os.path.join(SOURCE_DIR, "tests", "ebpf", "workload.c")
OFFCPU_SRC = os.path.join(SOURCE_DIR, "tests", "ebpf", "offcpu_workload.c")


def now_ns():
    return time.time_ns()


def span_json(trace, span, start, end, pid=None, service=None, tid=None, status=0):
    rattrs = []
    if pid is not None:
        rattrs.append({"key": "process.pid", "value": {"intValue": str(pid)}})
    if service is not None:
        rattrs.append({"key": "service.name", "value": {"stringValue": service}})
    sattrs = []
    if tid is not None:
        sattrs.append({"key": "thread.id", "value": {"intValue": tid}})
    return {"resourceSpans": [{"resource": {"attributes": rattrs}, "scopeSpans": [{
        "scope": {"name": "test"}, "spans": [{
            "traceId": trace, "spanId": span, "name": "GET /slow", "kind": 2,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(end),
            "attributes": sattrs, "status": {"code": status}}]}]}]}


# ---- a minimal protobuf writer for ExportTraceServiceRequest ----------------------------------

def _varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _field(num, wire, payload):
    key = _varint(num << 3 | wire)
    if wire == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def _kv_int(key, v):
    return _field(1, 2, key.encode()) + _field(2, 2, _field(3, 0, _varint(v)))


def pprof_sample_types(gz):
    """["type/unit", ...] of a gzip'd pprof Profile (sample_type = 1, string_table = 6)."""
    f = pb_fields(gzip.decompress(gz))
    strings = [v.decode() for v in f.get(6, [])]
    types = []
    for v in f.get(1, []):
        vt = pb_fields(v)
        types.append("%s/%s" % (strings[vt.get(1, [0])[0]], strings[vt.get(2, [0])[0]]))
    return types


def span_protobuf(trace, span, start, end, pid, status):
    sp = (_field(1, 2, bytes.fromhex(trace)) + _field(2, 2, bytes.fromhex(span)) +
          _field(5, 2, b"rpc") + _field(7, 1, struct.pack("<Q", start)) +
          _field(8, 1, struct.pack("<Q", end)) + _field(15, 2, _field(3, 0, _varint(status))))
    resource = _field(1, 2, _kv_int("process.pid", pid))
    scope_spans = _field(2, 2, sp)
    rs = _field(1, 2, resource) + _field(2, 2, scope_spans)
    return _field(1, 2, rs)


class SlowSpan(IntegrationCase):

    def setUp(self):
        super().setUp()
        if not PROFCHECK_BIN or not os.access(PROFCHECK_BIN, os.X_OK):
            self.fail("PF_PROFCHECK_BIN is not set to an executable (run through ctest)")
        self.wl_name = "pfss-%d-%d" % (os.getpid(), int(time.monotonic() * 1000) % 100000)
        self.wl_bin = os.path.join(self.workdir, self.wl_name)
        subprocess.run(["cc", "-O0", "-fno-omit-frame-pointer", "-g", "-o", self.wl_bin,
                        WORKLOAD_SRC], check=True, timeout=60)
        self.out_dir = os.path.join(self.workdir, "out")
        self.workloads = []
        self.port = free_port()
        self.mport = free_port()

    def tearDown(self):
        for p in self.workloads:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=5)
        super().tearDown()

    # ---- helpers ----------------------------------------------------------------------------

    def config_text(self, port, threshold_ms=1000, profile_type="cpu"):
        """The CPU profile type unless told (these tests count CPU samples); None: the
        default (wall)."""
        ptype = ", profile_type: %s" % profile_type if profile_type else ""
        return "\n".join([
            "profiling:",
            "  mode: triggered",
            "  sampling: {frequency_hz: 199, duration_seconds: 2}",
            "  filters:",
            "    include: [{key: process.executable.name, value: \"%s\"}]" % self.wl_name,
            "  triggers:",
            "    slow_span: {enabled: true, threshold_ms: %d, max_per_minute: 20," % threshold_ms,
            "                listen: \"127.0.0.1:%d\", lookback_seconds: 30%s}" % (port, ptype),
            "    error_span: {enabled: true, max_per_minute: 5}",
            "  exporters:",
            "    - {type: otlp_http, endpoint: \"http://127.0.0.1:%d/v1development/profiles\","
            % self.ctl.port,
            "       auth: agent_token}",
            "    - {type: file, path: \"%s\"}" % self.out_dir, ""])

    def push_and_wait(self, uid, text, status):
        st, body, _ = self.ctl.put_config("default", text)
        self.assertEqual(st, 201, body)

        def done():
            st, a, _ = self.ctl.request("GET", "/api/v1/agents/" + uid)
            return st == 200 and a["config"]["status"] == status and \
                a["config"].get("hash") == body["hash"] and a
        return wait_until(done, timeout=10, what="config " + status)

    def start_agent(self, threshold_ms=1000, profile_type="cpu"):
        """A controller, and an agent connected to it with the config pushed: exporters to
        the controller's embedded store and to a directory."""
        self.ctl = ctl = self.controller()
        ag = self.agent(ctl, "spans", extra=["--metrics-listen", "127.0.0.1:%d" % self.mport])
        uid = ag.uid()
        self.wait_sampler(ag)
        text = self.config_text(self.port, threshold_ms, profile_type)
        st, body, _ = ctl.put_config("default", text)
        self.assertEqual(st, 201, body)

        def applied():
            st, a, _ = ctl.request("GET", "/api/v1/agents/" + uid)
            return st == 200 and a["config"]["status"] == "APPLIED" and \
                a["config"]["hash"] == body["hash"] and a
        a = wait_until(applied, timeout=10, what="config APPLIED")
        wait_until(lambda: self.metrics().get("sample_ring_max_bytes", 0) > 0, timeout=10,
                   what="span receiver and sample ring reported in /metrics")
        return ag, uid

    def start_workload(self, seconds=60):
        p = subprocess.Popen([self.wl_bin, str(seconds)], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self.workloads.append(p)
        self.assertEqual(p.stdout.readline().strip(), b"ready")
        return p

    def post(self, body, ctype="application/json", encoding=None, raw=False):
        data = body if raw else json.dumps(body).encode()
        headers = {"Content-Type": ctype}
        if encoding:
            headers["Content-Encoding"] = encoding
        req = urllib.request.Request("http://127.0.0.1:%d/v1/traces" % self.port, data=data,
                                     headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.mport, timeout=5) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line.startswith("profleet_agent_"):
                k, v = line.rsplit(" ", 1)
                out[k[len("profleet_agent_"):]] = float(v)
        return out

    def files(self):
        if not os.path.isdir(self.out_dir):
            return []
        return sorted(f for f in os.listdir(self.out_dir) if f.endswith(".otlp.pb"))

    def summary(self, name):
        r = subprocess.run([PROFCHECK_BIN, os.path.join(self.out_dir, name)],
                           capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout.decode() + r.stderr.decode())
        s = json.loads(r.stdout)
        self.assertEqual(s["violations"], [])
        return s

    def wait_new_file(self, seen, timeout=10):
        def check():
            new = [f for f in self.files() if f not in seen]
            return new[0] if new else None
        try:
            f = wait_until(check, timeout=timeout, interval=0.02, what="a span profile file")
        except AssertionError as e:  # say whether the agent cut an empty profile instead
            m = {k: v for k, v in self.metrics().items() if "span" in k}
            raise AssertionError("%s; agent metrics: %r" % (e, m)) from None
        seen.add(f)
        return f

    def send_until_accepted(self, make, timeout=15):
        """POSTs fresh spans from make(i) until one is not rejected (the agent's snapshot of
        sampled processes has the workload); returns (span body, accept time)."""
        i = [0]

        def attempt():
            i[0] += 1
            body = make(i[0])
            st, resp = self.post(body)
            self.assertEqual(st, 200, resp)
            r = json.loads(resp)
            if r.get("partialSuccess", {}).get("rejectedSpans") in (None, "0", 0):
                return body, time.monotonic()
            return None
        return wait_until(attempt, timeout=timeout, interval=0.2,
                          what="a span of the workload accepted")

    def check_span_profile(self, s, pid, start, end, trace, span, trigger, tid=None):
        procs = s["processes"]
        self.assertEqual(len(procs), 1, [p["pid"] for p in procs])
        p = procs[0]
        self.assertEqual(p["pid"], pid)
        self.assertEqual(p["attributes"]["profleet.trigger"], trigger)
        self.assertEqual(p["attributes"]["process.executable.name"], self.wl_name)
        self.assertGreater(p["samples"], 0)
        self.assertEqual((s["start_unix_ns"], s["end_unix_ns"]), (start, end))
        if s["sample_type"] == "samples":  # a CPU profile's timestamps come back decoded;
            # a weighted one's are checked by profcheck (timestamp_range: all in the range)
            self.assertGreaterEqual(p["first_ts"], start)
            self.assertLess(p["last_ts"], end)
        self.assertEqual(p["unlinked"], 0)
        self.assertEqual(p["links"], {"%s/%s" % (trace, span): p["samples"]})
        if tid is not None:
            self.assertEqual(list(p["tids"].keys()), [str(tid)])
        return p

    # ---- the test ---------------------------------------------------------------------------

    def test_python_span_profile(self):
        """A slow span of a Python process (pfharness.python_workload, under the workload's
        name so the filter lets it in): its profile names the Python functions, in order."""
        argv = python_workload(self.wl_bin, self.workdir)
        if not argv:
            self.skipTest("no python3.11")
        self.start_agent()
        p = subprocess.Popen(argv + ["60"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL)
        self.workloads.append(p)
        self.assertEqual(p.stdout.readline().strip(), b"ready")
        wait_until(lambda: self.metrics().get("python_samples_total", 0) >= 100, timeout=20,
                   interval=0.1, what="100 samples of the Python process with Python frames")
        trace = os.urandom(16).hex()

        def slow(i):
            end = now_ns()
            return span_json(trace, "%016x" % (0xe000 + i), end - 1_200_000_000, end,
                             pid=p.pid)
        body, _ = self.send_until_accepted(slow)
        sp = body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        s = self.summary(self.wait_new_file(set()))
        pr = self.check_span_profile(s, p.pid, int(sp["startTimeUnixNano"]),
                                     int(sp["endTimeUnixNano"]), trace, sp["spanId"],
                                     "slow_span")
        named, total = py_chain_share(pr)
        print("python span profile: %d of %d samples carry %s" % (named, total, PY_CHAIN))
        self.assertGreaterEqual(named * 100, total * 90, pr["stacks"])

    def test_wall_span_profile(self):
        """The slow-span profile is wall-clock by default (slow_span.profile_type: wall): a
        request handler written in C for it (tests/ebpf/offcpu_workload.c: per request ~100
        ms in compute(), then ~300 ms blocked in wait_lock(), pthread_cond_timedwait; the
        request's span is from the end of one wait to the end of the next, as it reports
        them); each span's profile holds wait_lock at ~75 % and compute at ~25 % of its total
        (+- 10 points), and the total is the span's duration (+- 15 %). The store files it as
        type wall, the pprof download has the sample type wall/nanoseconds."""
        wdir = os.path.join(self.workdir, "wall")
        os.makedirs(wdir)
        wbin = os.path.join(wdir, self.wl_name)  # the name the config's filter lets in
        subprocess.run(["cc", "-O0", "-fno-omit-frame-pointer", "-g", "-pthread", "-o", wbin,
                        OFFCPU_SRC], check=True, timeout=60)
        self.start_agent(threshold_ms=300, profile_type=None)
        wl = subprocess.Popen([wbin, "60"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL)
        self.workloads.append(wl)

        def wait_end():  # "wait <end unix ns> <duration ns>"
            line = wl.stdout.readline().split()
            self.assertEqual(line[0], b"wait", line)
            return int(line[1])
        wait_end()
        # its tables loaded and a few requests in the ring before the spans that count
        wait_until(lambda: self.metrics().get("sample_ring_samples", 0) >= 60, timeout=20,
                   interval=0.1, what="the handler's samples in the sample ring")
        time.sleep(1.0)
        seen, results = set(), []
        t_from, tid = now_ns(), wl.pid  # one thread: the main one
        end = wait_end()
        for k in range(3):
            while True:  # the next request that started after t_from
                start, end = end, wait_end()
                if start >= t_from:
                    break
            trace, span = os.urandom(16).hex(), "%016x" % (0xf000 + k)
            st, resp = self.post(span_json(trace, span, start, end, pid=wl.pid, tid=tid))
            self.assertEqual(st, 200, resp)
            self.assertIn(json.loads(resp).get("partialSuccess", {}).get("rejectedSpans"),
                          (None, "0", 0), resp)
            s = self.summary(self.wait_new_file(seen))
            t_from = end
            self.assertEqual((s["sample_type"], s["sample_unit"]), ("wall", "nanoseconds"))
            p = self.check_span_profile(s, wl.pid, start, end, trace, span, "slow_span",
                                        tid=tid)
            dur, total = end - start, p["value"]

            def share(fn):
                return 100.0 * sum(v for st_, v in p["stack_values"].items()
                                   if fn in st_.split(";")) / max(total, 1)
            wait, comp = share("wait_lock"), share("compute")
            print("wall span %d: %.1f ms of a %.1f ms span, wait_lock %.1f %%, compute "
                  "%.1f %%" % (k, total / 1e6, dur / 1e6, wait, comp))
            results.append((trace, p))
            why = (p["stack_values"], {k: v for k, v in self.metrics().items()
                                       if "off_cpu" in k or "lost" in k or "ring" in k})
            self.assertLessEqual(abs(total - dur), 0.15 * dur, why)
            self.assertLessEqual(abs(wait - 75), 10, why)
            self.assertLessEqual(abs(comp - 25), 10, why)

        # the store files it as wall; its pprof has that sample type
        trace, p = results[-1]

        def stored():
            st, r, _ = self.ctl.request("GET", "/api/v1/profiles?trace_id=" + trace)
            self.assertEqual(st, 200, r)
            return r["profiles"] if r["count"] else None
        prof = wait_until(stored, timeout=10, what="the wall span profile in the store")[0]
        self.assertEqual(prof["type"], "wall")
        st, gz, _ = self.ctl.request("GET", "/api/v1/profiles/%d/pprof" % prof["id"], raw=True)
        self.assertEqual(st, 200, gz)
        self.assertEqual(pprof_sample_types(gz), ["wall/nanoseconds"])

    def test_slow_span_profiles(self):
        ag, uid = self.start_agent()
        # bound exactly to 127.0.0.1:PORT, no [::] or 0.0.0.0 socket
        if shutil.which("ss"):
            ss = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True, timeout=10)
            mine = [l.split()[3] for l in ss.stdout.splitlines()
                    if l.split()[3].endswith(":%d" % self.port)]
            self.assertEqual(mine, ["127.0.0.1:%d" % self.port], ss.stdout)
        wl = self.start_workload()
        pid = wl.pid
        seen = set()
        # the filter lets only the workload in: wait until the ring holds over a second of it
        wait_until(lambda: self.metrics().get("sample_ring_samples", 0) >= 250, timeout=15,
                   interval=0.1, what="1.25 s of the workload in the sample ring")

        # 1. a slow span of the workload's pid (JSON), main thread: thread.id = pid; it ends
        # now, so the agent has to wait for the samples up to its end
        trace = os.urandom(16).hex()

        def slow(i):
            end = now_ns()
            start = end - 1_200_000_000
            return span_json(trace, "%016x" % (0xa000 + i), start, end, pid=pid, tid=pid)
        body, t_accept = self.send_until_accepted(slow)
        sp = body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        start, end = int(sp["startTimeUnixNano"]), int(sp["endTimeUnixNano"])
        f = self.wait_new_file(seen)
        print("slow-span profile file %.3f s after the span was accepted" %
              (time.monotonic() - t_accept))
        s = self.summary(f)
        p = self.check_span_profile(s, pid, start, end, trace, sp["spanId"], "slow_span",
                                    tid=pid)
        # 1.2 s at 199 Hz of one busy thread: at most about 239 samples (fewer when the
        # machine's other work takes CPU from the workload); more would mean samples from
        # outside the span
        self.assertGreaterEqual(p["samples"], 10, p)
        self.assertLessEqual(p["samples"], int(1.2 * 199 * 1.1), p)
        self.assertIn("hot_a", p["leaf"])
        self.assertIn("hot_b", p["leaf"])
        print("profile: %d samples, %s" % (p["samples"], p["leaf"]))

        # 2. an ERROR span (under the slow threshold), protobuf + gzip, by pid; long enough
        # to hold samples of the workload even on a loaded machine
        trace2 = os.urandom(16).hex()
        end2 = now_ns() - 30_000_000
        start2 = end2 - 900_000_000
        pb = span_protobuf(trace2, "00000000000000b1", start2, end2, pid, 2)
        st, resp = self.post(gzip.compress(pb), ctype="application/x-protobuf",
                             encoding="gzip", raw=True)
        self.assertEqual(st, 200, resp)
        self.assertEqual(resp, b"")  # empty ExportTraceServiceResponse: nothing rejected
        s = self.summary(self.wait_new_file(seen))
        self.check_span_profile(s, pid, start2, end2, trace2, "00000000000000b1", "error_span")

        # 3. a fast, OK span triggers nothing; a slow one of a pid that is not sampled is
        # rejected with a reason; both in one request
        end3 = now_ns()
        body = span_json(os.urandom(16).hex(), "00000000000000c1", end3 - 10_000_000, end3,
                         pid=pid)
        other = span_json(os.urandom(16).hex(), "00000000000000c2", end3 - 1_900_000_000,
                          end3, pid=999999)
        body["resourceSpans"] += other["resourceSpans"]
        st, resp = self.post(body)
        self.assertEqual(st, 200, resp)
        r = json.loads(resp)["partialSuccess"]
        self.assertEqual(r["rejectedSpans"], "1")
        self.assertIn("process.pid 999999 has no samples", r["errorMessage"])
        # too old for the 30 s lookback
        old = now_ns() - 40 * 10**9
        st, resp = self.post(span_json(trace, "00000000000000d1", old, old + 2 * 10**9,
                                       pid=pid))
        r = json.loads(resp)["partialSuccess"]
        self.assertEqual(r["rejectedSpans"], "1")
        self.assertIn("lookback", r["errorMessage"])

        # 4. malformed bodies: 400 with the reason (a google.rpc.Status), over the cap: 413
        bad = span_json("zz" + trace[2:], "00000000000000e1", start, end, pid=pid)
        st, resp = self.post(bad)
        self.assertEqual(st, 400)
        self.assertIn("traceId: must be 32 hex digits", json.loads(resp)["message"])
        st, resp = self.post(span_json(trace, "00000000000000e2", end, start, pid=pid))
        self.assertEqual(st, 400)
        self.assertIn("endTimeUnixNano: before startTimeUnixNano", json.loads(resp)["message"])
        st, resp = self.post(b"\x1f\x8b\x08\x00garbage", encoding="gzip", raw=True)
        self.assertEqual(st, 400)
        self.assertIn("not valid gzip", json.loads(resp)["message"])
        # over the cap by Content-Length: answered before the body is read, then closed
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as c:
            c.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
                      b"application/json\r\nContent-Length: %d\r\n\r\n{" % (5 << 20))
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = c.recv(4096)
                if not chunk:
                    break
                head += chunk
        self.assertTrue(head.startswith(b"HTTP/1.1 413"), head)
        st, resp = self.post(b"x", ctype="text/plain", raw=True)
        self.assertEqual(st, 415)

        # 5. a process that exited since: its samples, attributes and symbols are still there
        wl2 = self.start_workload(seconds=1.5)
        t0 = now_ns()
        wl2.wait(timeout=10)
        trace5 = os.urandom(16).hex()
        st, resp = self.post(span_json(trace5, "00000000000000f1", t0, now_ns(), pid=wl2.pid))
        self.assertEqual(st, 200, resp)
        self.assertNotIn("partialSuccess", json.loads(resp))
        s = self.summary(self.wait_new_file(seen))
        p5 = s["processes"][0]
        self.assertEqual(p5["pid"], wl2.pid)
        self.assertEqual(p5["attributes"]["process.executable.name"], self.wl_name)
        self.assertIn("hot_a", p5["leaf"])

        # triggered mode: only the span profiles were written, no continuous windows
        time.sleep(0.5)  # a window would need 2 s; give a late writer a moment to show
        self.assertEqual(len(self.files()), 3, self.files())

        # the metrics snapshot is refreshed once a second: wait for it to show step 5
        m = wait_until(lambda: (lambda m: m if m.get(
            'span_profiles_total{trigger="error_span"}') == 1 and m.get(
            'span_profiles_total{trigger="slow_span"}', 0) >= 2 else None)(self.metrics()),
            timeout=5, what="metrics refreshed")
        print({k: v for k, v in m.items() if "span" in k or "ring" in k})
        self.assertEqual(m['span_profiles_total{trigger="slow_span"}'], 2)
        self.assertGreaterEqual(m['spans_rejected_total{reason="unknown_process"}'], 1)
        self.assertGreaterEqual(m['spans_rejected_total{reason="too_old"}'], 1)
        self.assertEqual(m['span_requests_total{code="400"}'], 3)
        self.assertEqual(m['span_requests_total{code="413"}'], 1)
        self.assertGreater(m["sample_ring_samples"], 0)
        self.assertLessEqual(m["sample_ring_bytes"], m["sample_ring_max_bytes"])
        self.assertLess(m['span_profile_latency_seconds{stat="max"}'], 1.0)

        # the embedded store has the slow-span profile, found by its trace id
        def stored():
            st, r, _ = self.ctl.request("GET", "/api/v1/profiles?trace_id=" + trace)
            self.assertEqual(st, 200, r)
            return r["profiles"] if r["count"] else None
        profs = wait_until(stored, timeout=10, what="the span profile in the store")
        self.assertEqual(len(profs), 1, profs)
        self.assertEqual(profs[0]["pid"], pid)
        self.assertEqual(profs[0]["samples"], p["samples"])
        self.assertEqual(profs[0]["links"], 1)
        self.assertEqual(profs[0]["trigger"], "slow_span")
        st, one, _ = self.ctl.request("GET", "/api/v1/profiles/%d" % profs[0]["id"])
        self.assertEqual(st, 200, one)
        self.assertEqual(one["trace_links"], [{"trace_id": trace, "span_id": sp["spanId"]}])
        # and by trigger
        def by_trigger():
            st, r, _ = self.ctl.request("GET", "/api/v1/profiles?trigger=error_span")
            self.assertEqual(st, 200, r)
            return r["profiles"] or None
        errs = wait_until(by_trigger, timeout=10, what="the error_span profile in the store")
        self.assertEqual([p["trigger"] for p in errs], ["error_span"], errs)
        self.assertEqual(errs[0]["pid"], pid)
        # the agent reports the trigger's health to the controller
        def health():
            st, a, _ = self.ctl.request("GET", "/api/v1/agents/" + uid)
            comp = a["health"].get("components", {}).get("triggers/spans", {})
            return comp if "profiles 2 slow + 1 error" in comp.get("status", "") else None
        comp = wait_until(health, timeout=10, what="triggers/spans health with the counts")
        self.assertTrue(comp["healthy"], comp)
        self.assertIn("127.0.0.1:%d/v1/traces" % self.port, comp["status"])

        # 6. a receiver address that is taken fails the config with the reason (the old one
        # keeps running); a free one moves the receiver
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen(1)
            bport = busy.getsockname()[1]
            a = self.push_and_wait(uid, self.config_text(bport), "FAILED")
            self.assertIn("profiling.triggers.slow_span.listen: cannot listen on 127.0.0.1:%d: "
                          "Address already in use" % bport, a["config"]["error"])
        st, _ = self.post({})
        self.assertEqual(st, 200)
        old_port, self.port = self.port, free_port()
        self.push_and_wait(uid, self.config_text(self.port), "APPLIED")

        def answers(port):  # the data plane applies the config just after APPLIED
            try:
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                return True
            except ConnectionRefusedError:
                return False
        wait_until(lambda: answers(self.port), timeout=5, what="the receiver on the new port")
        wait_until(lambda: not answers(old_port), timeout=5, what="the old port closed")
        st, resp = self.post({})
        self.assertEqual((st, resp), (200, b"{}"))
        self.assertEqual(ag.stop(), 0)


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    sys.exit(77 if result.testsRun and len(result.skipped) == result.testsRun else 0)
