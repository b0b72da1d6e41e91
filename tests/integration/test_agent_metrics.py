"""The agent's metrics endpoint (--metrics-listen, issues 3 and 4), end to end.

The real controller and agent (eBPF off: --no-sampler), a pprof target served by a small
stdlib HTTP server in this test (tests/data/pprof/go_heap.pb.gz), a file exporter and an
otlp_http exporter to the controller's embedded store (auth: agent_token). Every /metrics
answer is checked line by line by a strict parser of the Prometheus text format 0.0.4 (HELP
then TYPE once per family, families contiguous, counters end in _total, label syntax and
escapes, float values, histogram buckets cumulative with +Inf == _count). Then: counters never
go down between scrapes and move after exports (profiles collected, exporter submitted / sent /
confirmed / bytes, the upload duration histogram, pprof scrapes), /healthz, 404 and 405, IPv6
loopback, and a taken port or a bad address is a startup error with the reason (exit non-zero).
Every wait is bounded.
"""
import http.server
import math
import os
import re
import socket
import subprocess
import threading
import time
import unittest
import urllib.error
import urllib.request

from pfharness import AGENT_BIN, IntegrationCase, free_port, read_text, wait_until

SOURCE_DIR = os.environ.get(
    "PF_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
HEAP_PPROF = os.path.join(SOURCE_DIR, "tests", "data", "pprof", "go_heap.pb.gz")

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL_RE = re.compile(r'(%s)="((?:[^"\\\n]|\\["\\n])*)"' % r"[a-zA-Z_][a-zA-Z0-9_]*")
SAMPLE_RE = re.compile(r"^(%s)(\{.*\})? (\S+)$" % NAME)


def parse_exposition(text):
    """Strict 0.0.4 parser: returns ({family: type}, {(name, frozenset(labels)): value}).
    Raises AssertionError with the line on any violation."""
    if not text.endswith("\n"):
        raise AssertionError("exposition does not end with a newline")
    types, helps, samples, done = {}, set(), {}, set()
    current = None
    for ln, line in enumerate(text.split("\n")[:-1], 1):
        where = "line %d: %r" % (ln, line)
        if not line:
            raise AssertionError("empty line, " + where)
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, rest = line[2:6], line[7:]
            name, _, arg = rest.partition(" ")
            if not re.fullmatch(NAME, name) or not arg:
                raise AssertionError("bad %s, %s" % (kind, where))
            if kind == "HELP":
                if name in helps:
                    raise AssertionError("second HELP, " + where)
                helps.add(name)
                if current:
                    done.add(current)
                current = None
            else:
                if name not in helps or name in types:
                    raise AssertionError("TYPE without HELP or twice, " + where)
                if arg not in ("counter", "gauge", "histogram"):
                    raise AssertionError("unknown type, " + where)
                if (arg == "counter") != name.endswith("_total"):
                    raise AssertionError("_total iff counter, " + where)
                types[name] = arg
            continue
        if line.startswith("#"):
            raise AssertionError("stray comment, " + where)
        m = SAMPLE_RE.match(line)
        if not m:
            raise AssertionError("bad sample, " + where)
        name, labels_text, value = m.group(1), m.group(2), m.group(3)
        if not name.startswith("profleet_agent_"):
            raise AssertionError("missing prefix, " + where)
        fam = name
        if fam not in types:
            for suf in ("_bucket", "_sum", "_count"):
                if name.endswith(suf) and types.get(name[:-len(suf)]) == "histogram":
                    fam = name[:-len(suf)]
        if fam not in types:
            raise AssertionError("sample without TYPE, " + where)
        if fam in done:
            raise AssertionError("family not contiguous, " + where)
        if current and current != fam:
            done.add(current)
        current = fam
        labels = {}
        if labels_text:
            body = labels_text[1:-1]
            pos = 0
            while pos < len(body):
                lm = LABEL_RE.match(body, pos)
                if not lm:
                    raise AssertionError("bad labels, " + where)
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
                if pos < len(body):
                    if body[pos] != ",":
                        raise AssertionError("bad label separator, " + where)
                    pos += 1
        v = float(value)  # ValueError on garbage: the test errors
        if math.isnan(v) and value != "NaN":
            raise AssertionError("bad value, " + where)
        key = (name, frozenset(labels.items()))
        if key in samples:
            raise AssertionError("duplicate series, " + where)
        samples[key] = v
    for fam in helps:
        if fam not in types:
            raise AssertionError("family %s without TYPE" % fam)
    # histograms: cumulative buckets, +Inf == count
    for fam, t in types.items():
        if t != "histogram":
            continue
        series = {}
        for (name, labels), v in samples.items():
            if name == fam + "_bucket":
                d = dict(labels)
                le = d.pop("le")
                series.setdefault(frozenset(d.items()), []).append(
                    (float("inf") if le == "+Inf" else float(le), v))
        for labels, buckets in series.items():
            buckets.sort()
            counts = [c for _, c in buckets]
            if counts != sorted(counts):
                raise AssertionError("%s%s: buckets not cumulative" % (fam, dict(labels)))
            if buckets[-1][0] != float("inf"):
                raise AssertionError("%s: no +Inf bucket" % fam)
            if samples.get((fam + "_count", labels)) != counts[-1]:
                raise AssertionError("%s: +Inf != _count" % fam)
            if (fam + "_sum", labels) not in samples:
                raise AssertionError("%s: no _sum" % fam)
    return types, samples


def val(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


def heap_config(pprof_port, exporter_lines):
    """A profiling config scraping PprofServer's heap every second into the given exporter
    lines (YAML, indented under `exporters:`)."""
    return "\n".join([
        "profiling:",
        "  pprof:",
        "    targets:",
        "      - {url: \"http://127.0.0.1:%d/debug/pprof/heap\", type: heap, "
        "interval_seconds: 1}" % pprof_port,
        "  exporters:"] + list(exporter_lines) + [""])


class PprofServer:
    """Serves one pprof file at /debug/pprof/heap, counting the requests."""

    def __init__(self, path):
        with open(path, "rb") as f:
            payload = f.read()
        outer = self
        self.hits = 0

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path.split("?")[0] != "/debug/pprof/heap":
                    self.send_error(404)
                    return
                outer.hits += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def http_get(url, method="GET", data=None, timeout=5):
    """Returns (status, headers, body text) without raising on 4xx/5xx."""
    req = urllib.request.Request(url, method=method, data=data)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


class AgentMetrics(IntegrationCase):

    def setUp(self):
        super().setUp()
        self.pprof = PprofServer(HEAP_PPROF)

    def tearDown(self):
        self.pprof.close()
        super().tearDown()

    def start_agent(self, ctl, name, listen):
        ag = self.agent(ctl, name, extra=["--no-sampler", "--metrics-listen", listen])
        return ag

    def scrape(self, base):
        st, h, body = http_get(base + "/metrics")
        self.assertEqual(st, 200, body)
        self.assertEqual(h["Content-Type"], "text/plain; version=0.0.4; charset=utf-8")
        return parse_exposition(body)

    def wait_metrics(self, base, pred, timeout=20, what="metrics"):
        def check():
            try:
                types, s = self.scrape(base)
            except (urllib.error.URLError, ConnectionError, OSError):
                return None
            return (types, s) if pred(s) else None
        return wait_until(check, timeout=timeout, interval=0.2, what=what)

    def test_metrics_move_with_exports(self):
        ctl = self.controller()
        port = free_port()
        base = "http://127.0.0.1:%d" % port
        ag = self.start_agent(ctl, "m", "127.0.0.1:%d" % port)
        uid = ag.uid()

        # served from the start: process and health families, no exporter yet
        types, s = self.wait_metrics(
            base, lambda s: val(s, "profleet_agent_component_healthy", component="opamp") == 1,
            what="opamp healthy in /metrics")
        st, h, body = http_get(base + "/healthz")
        self.assertEqual((st, body), (200, "ok\n"))
        for fam, t in (("profleet_agent_info", "gauge"),
                       ("profleet_agent_cpu_seconds_total", "counter"),
                       ("profleet_agent_resident_memory_bytes", "gauge"),
                       ("profleet_agent_profiles_collected_total", "counter"),
                       ("profleet_agent_profile_bytes_total", "counter"),
                       ("profleet_agent_profiles_dropped_total", "counter"),
                       ("profleet_agent_sampler_running", "gauge"),
                       ("profleet_agent_component_healthy", "gauge")):
            self.assertEqual(types.get(fam), t, fam)
        self.assertEqual(val(s, "profleet_agent_sampler_running"), 0)
        self.assertNotIn("profleet_agent_bpf_run_time_seconds_total", types)  # no sampler
        self.assertNotIn("profleet_agent_exporter_sent_total", types)
        self.assertEqual(val(s, "profleet_agent_profiles_collected_total", source="pprof"), 0)

        out_dir = os.path.join(self.workdir, "out")
        cfg = heap_config(self.pprof.port, [
            "    - {type: file, path: \"%s\"}" % out_dir,
            "    - {type: otlp_http, endpoint: \"http://127.0.0.1:%d/v1development/profiles\", "
            "auth: agent_token, timeout_seconds: 5}" % ctl.port])
        st, body, _ = ctl.put_config("default", cfg)
        self.assertEqual(st, 201, body)
        wait_until(lambda: (self.agent_json(ctl, uid) or {}).get("config", {}).get("status")
                   == "APPLIED", timeout=15, what="config APPLIED")

        f = {"exporter": "0", "type": "file"}
        o = {"exporter": "1", "type": "otlp_http"}

        def confirmed(s, n):
            return ((val(s, "profleet_agent_exporter_confirmed_total", **f) or 0) >= n and
                    (val(s, "profleet_agent_exporter_confirmed_total", **o) or 0) >= n)

        types, s1 = self.wait_metrics(base, lambda s: confirmed(s, 1), timeout=20,
                                      what="both exporters confirmed an export")
        collected1 = val(s1, "profleet_agent_profiles_collected_total", source="pprof")
        self.assertGreaterEqual(collected1, 1)
        self.assertGreater(val(s1, "profleet_agent_profile_bytes_total"), 0)
        self.assertGreater(val(s1, "profleet_agent_profile_last_size_bytes"), 0)
        self.assertGreaterEqual(
            val(s1, "profleet_agent_pprof_scrapes_total", target="0", type="heap", result="ok"),
            1)
        self.assertEqual(
            val(s1, "profleet_agent_pprof_scrapes_total", target="0", type="heap",
                result="failed"), 0)
        for lab in (f, o):
            self.assertEqual(val(s1, "profleet_agent_exporter_up", **lab), 1)
            sent = val(s1, "profleet_agent_exporter_sent_total", **lab)
            self.assertGreaterEqual(sent, 1)
            self.assertGreaterEqual(val(s1, "profleet_agent_exporter_submitted_total", **lab), 1)
            self.assertGreater(val(s1, "profleet_agent_exporter_confirmed_bytes_total", **lab), 0)
            self.assertEqual(val(s1, "profleet_agent_exporter_failed_total", **lab), 0)
            self.assertEqual(val(s1, "profleet_agent_exporter_dropped_total", **lab), 0)
            self.assertEqual(val(s1, "profleet_agent_exporter_queue_limit_bytes", **lab),
                             64 << 20)
            self.assertGreater(
                val(s1, "profleet_agent_exporter_last_success_timestamp_seconds", **lab),
                time.time() - 120)
            # every attempt is in the histogram (the snapshot is taken at once for both)
            self.assertEqual(
                val(s1, "profleet_agent_exporter_export_duration_seconds_count", **lab), sent)
            self.assertEqual(types["profleet_agent_exporter_export_duration_seconds"],
                             "histogram")
        self.assertEqual(val(s1, "profleet_agent_exporter_last_http_status", **o), 200)
        self.assertEqual(val(s1, "profleet_agent_component_healthy",
                             component="exporter/1:otlp_http"), 1)
        self.assertEqual(val(s1, "profleet_agent_component_healthy", component="pprof/0"), 1)

        # a later scrape: more profiles and exports; no counter ever went down
        types2, s2 = self.wait_metrics(
            base, lambda s: (val(s, "profleet_agent_profiles_collected_total", source="pprof")
                             or 0) >= collected1 + 2 and confirmed(s, 3),
            timeout=20, what="more profiles exported")
        for (name, labels), v in s1.items():
            fam = name
            for suf in ("_bucket", "_sum", "_count"):
                if name.endswith(suf) and types.get(name[:-len(suf)]) == "histogram":
                    fam = name[:-len(suf)]
            if types.get(fam) in ("counter", "histogram"):
                self.assertIn((name, labels), s2, name)
                self.assertGreaterEqual(s2[(name, labels)], v, "%s%s went down" %
                                        (name, dict(labels)))
        self.assertGreater(val(s2, "profleet_agent_exporter_sent_total", **o),
                           val(s1, "profleet_agent_exporter_sent_total", **o))
        self.assertGreater(
            val(s2, "profleet_agent_exporter_export_duration_seconds_count", **f),
            val(s1, "profleet_agent_exporter_export_duration_seconds_count", **f))
        self.assertGreater(val(s2, "profleet_agent_cpu_seconds_total"), 0)

        # the controller's store got them
        st, lst, _ = ctl.request("GET", "/api/v1/profiles")
        self.assertEqual(st, 200, lst)
        self.assertGreaterEqual(lst["count"], 1)

        # other paths and methods
        self.assertEqual(http_get(base + "/")[0], 404)
        self.assertEqual(http_get(base + "/metrics/x")[0], 404)
        st, h, _ = http_get(base + "/metrics", method="POST", data=b"x=1")
        self.assertEqual(st, 405)
        self.assertEqual(h["Allow"], "GET")
        self.assertEqual(http_get(base + "/healthz", method="PUT", data=b"")[0], 405)
        self.assertEqual(ag.stop(), 0)
        self.assertIn("metrics: serving /metrics and /healthz on 127.0.0.1:%d" % port,
                      read_text(os.path.join(self.workdir, "agent-m.log")))

    @unittest.skipUnless(ipv6_loopback(), "no IPv6 loopback")
    def test_ipv6_loopback(self):
        ctl = self.controller()
        port = free_port()
        self.start_agent(ctl, "v6", "[::1]:%d" % port)
        types, s = self.wait_metrics(
            "http://[::1]:%d" % port,
            lambda s: any(n == "profleet_agent_info" for n, _ in s), what="/metrics over [::1]")
        self.assertIn("profleet_agent_cpu_seconds_total", types)

    def run_agent_expect_failure(self, name, args):
        state = os.path.join(self.workdir, "agent-" + name)
        r = subprocess.run([AGENT_BIN, "--state-dir", state, "--no-sampler"] + args,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
        return r.returncode, (r.stdout + r.stderr).decode(errors="replace")

    def test_taken_port_is_a_startup_error(self):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            port = s.getsockname()[1]
            t0 = time.monotonic()
            rc, out = self.run_agent_expect_failure(
                "taken", ["--metrics-listen", "127.0.0.1:%d" % port])
            self.assertNotEqual(rc, 0, out)
            self.assertIn("--metrics-listen: cannot listen on 127.0.0.1:%d: Address already in "
                          "use" % port, out)
            self.assertLess(time.monotonic() - t0, 10)
        # not an address of this host
        rc, out = self.run_agent_expect_failure("noaddr", ["--metrics-listen", "192.0.2.1:0"])
        self.assertNotEqual(rc, 0, out)
        self.assertIn("Cannot assign requested address", out)
        # bad syntax: a usage error
        rc, out = self.run_agent_expect_failure("syntax", ["--metrics-listen", "::1:9464"])
        self.assertEqual(rc, 2, out)
        self.assertIn("--metrics-listen: IPv6 addresses go in brackets", out)


if __name__ == "__main__":
    unittest.main()
