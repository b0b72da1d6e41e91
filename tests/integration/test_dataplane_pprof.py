"""pprof targets through the agent's data plane, end to end.

The real controller and agent, and a real Go program serving net/http/pprof
(tests/data/pprof/goprog, built here with Debian's go: standard library only, private
GOPATH/GOCACHE, no network). A pushed config with a cpu target (interval 2 s,
service.name gosvc), a heap target, a target on a dead port and one answering 404, plus a file
exporter, must yield OTLP files whose resource says service.name=gosvc, where main.burnCPU
carries at least half of the cpu samples and the sample types are those of the pprof
(protoc --decode against the upstream schema); the dead and the 404 targets turn their own
health components unhealthy with the error while the good ones keep producing files. A second
config changes the targets without a restart. In triggered mode, targets with interval 0 are
scraped only when SIGUSR1 starts a capture, the cpu one for sampling.duration_seconds.

eBPF may run as well (the agent is root): the filter includes only a pid that cannot exist, so
every file here comes from the pprof targets. Skipped (with the reason) only when go is not
installed. Every wait is bounded.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from pfharness import SHARED_DIR, Agent, IntegrationCase, free_port, wait_until

PROFCHECK_BIN = os.environ.get("PF_PROFCHECK_BIN", "")
SOURCE_DIR = os.environ.get(
    "PF_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
GOPROG_SRC = os.path.join(SOURCE_DIR, "tests", "data", "pprof", "goprog", "main.go")
REQUEST_TYPE = "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest"
SERVICE_PROTO = "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"
NO_PID = "999999999"  # above any pid_max: the eBPF sampler exports nothing here


def config_yaml(out_dir, targets, mode="continuous", duration=10):
    lines = ["profiling:", "  mode: %s" % mode,
             "  sampling: {frequency_hz: 49, duration_seconds: %d}" % duration,
             "  filters:", "    include:",
             "      - {key: process.pid, match: strict, value: \"%s\"}" % NO_PID,
             "  pprof:", "    targets:"]
    for t in targets:
        lines.append("      - url: \"%s\"" % t["url"])
        lines.append("        type: %s" % t["type"])
        lines.append("        interval_seconds: %d" % t.get("interval", 2))
        if t.get("attributes"):
            lines.append("        attributes: {%s}" % ", ".join(
                "%s: %s" % kv for kv in sorted(t["attributes"].items())))
    lines += ["  exporters:", "    - {type: file, path: \"%s\"}" % out_dir]
    return "\n".join(lines) + "\n"


class DataplanePprof(IntegrationCase):

    @classmethod
    def setUpClass(cls):
        if not shutil.which("go"):
            raise unittest.SkipTest("go not installed (scripts/install-deps.sh installs "
                                    "golang-go): the pprof targets need a Go program")
        cls.gotmp = tempfile.mkdtemp(prefix="pf-dp-pprof-go-")
        env = dict(os.environ, GOPATH=os.path.join(cls.gotmp, "gopath"),
                   GOCACHE=os.path.join(cls.gotmp, "cache"), GOPROXY="off", GOFLAGS="",
                   GO111MODULE="off")
        cls.gobin = os.path.join(cls.gotmp, "goprog")
        subprocess.run(["go", "build", "-o", cls.gobin, GOPROG_SRC], cwd=cls.gotmp, env=env,
                       check=True, timeout=180)

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["chmod", "-R", "u+w", cls.gotmp])
        shutil.rmtree(cls.gotmp, ignore_errors=True)

    def setUp(self):
        super().setUp()
        if not PROFCHECK_BIN or not os.access(PROFCHECK_BIN, os.X_OK):
            self.fail("PF_PROFCHECK_BIN is not set to an executable (run through ctest)")
        self.out_dir = os.path.join(self.workdir, "out")
        self.go = subprocess.Popen([self.gobin, "-lifetime", "300s"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
        line = self.go.stdout.readline()  # "PORT <n>" once listening
        self.assertTrue(line.startswith("PORT "), "goprog did not start: %r" % line)
        self.port = int(line.split()[1])
        self.seen = {}  # file name -> (kind, summary, decoded text)

    def tearDown(self):
        self.go.stdin.close()  # goprog exits when stdin closes
        try:
            self.go.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.go.kill()
            self.go.wait(timeout=10)
        self.go.stdout.close()
        super().tearDown()

    # ---- helpers ----------------------------------------------------------------------------

    def url(self, path, port=None):
        return "http://127.0.0.1:%d/debug/pprof/%s" % (port or self.port, path)

    def decode(self, path):
        ref = os.path.join(SHARED_DIR, "reference", "proto") if SHARED_DIR else ""
        if not ref or not os.path.isdir(ref) or not shutil.which("protoc"):
            self.skipTest("protoc or the upstream schema (PF_SHARED_DIR) is missing")
        with open(path, "rb") as f:
            r = subprocess.run(["protoc", "--decode=" + REQUEST_TYPE, "-I", ref, SERVICE_PROTO],
                               stdin=f, capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        return r.stdout.decode(errors="replace")

    def summary(self, path):
        r = subprocess.run([PROFCHECK_BIN, path], capture_output=True, timeout=30)
        self.assertIn(r.returncode, (0, 1), r.stderr.decode(errors="replace"))
        s = json.loads(r.stdout)
        self.assertEqual(s["violations"], [], "%s does not conform" % path)
        self.assertEqual(r.returncode, 0)
        return s

    def scan(self):
        """Classifies new files: ("cpu" | "heap" | "goroutine" | "other", summary, text)."""
        if not os.path.isdir(self.out_dir):
            return
        for f in sorted(os.listdir(self.out_dir)):
            if not f.endswith(".otlp.pb") or f in self.seen:
                continue
            path = os.path.join(self.out_dir, f)
            s = self.summary(path)
            text = self.decode(path)
            if '"cpu"' in text and '"nanoseconds"' in text:
                kind = "cpu"
            elif '"inuse_space"' in text:
                kind = "heap"
            elif '"goroutine"' in text:
                kind = "goroutine"
            else:
                kind = "other"
            self.seen[f] = (kind, s, text)

    def wait_kind(self, kind, after=0, timeout=20, pred=None):
        """Waits until more than `after` files of kind (satisfying pred) exist; returns the
        newest (summary, text)."""
        def check():
            self.scan()
            got = [(s, t) for k, s, t in self.seen.values()
                   if k == kind and (pred is None or pred(s))]
            return got[-1] if len(got) > after else None
        return wait_until(check, timeout=timeout, interval=0.2, what="a %s file" % kind)

    def count(self, kind):
        self.scan()
        return sum(1 for k, _, _ in self.seen.values() if k == kind)

    @staticmethod
    def service(s):
        procs = s["processes"]
        return procs[0]["attributes"].get("service.name") if procs else None

    def wait_agent(self, ctl, uid, pred, timeout=10, what="agent state"):
        def check():
            a = self.agent_json(ctl, uid)
            return a if a and pred(a) else None
        return wait_until(check, timeout=timeout, what=what)

    def push(self, ctl, uid, text, timeout=10):
        st, body, _ = ctl.put_config("default", text)
        self.assertEqual(st, 201, body)
        return self.wait_agent(ctl, uid, lambda a: a["config"]["status"] == "APPLIED" and
                               a["config"]["hash"] == body["hash"], timeout=timeout,
                               what="config APPLIED")

    @staticmethod
    def comps(a):
        return a["health"].get("components", {})

    def check_cpu(self, s, text, service="gosvc"):
        self.assertEqual(len(s["processes"]), 1, s["processes"])
        p = s["processes"][0]
        self.assertEqual(p["attributes"].get("service.name"), service)
        hot = p["leaf"].get("main.burnCPU", 0)
        share = hot / float(max(p["samples"], 1))
        self.assertGreaterEqual(share, 0.5, "main.burnCPU share %.3f of %d samples" %
                                (share, p["samples"]))
        for want in ('"samples"', '"count"', '"cpu"', '"nanoseconds"', '"main.burnCPU"'):
            self.assertIn(want, text)
        return share

    # ---- tests ------------------------------------------------------------------------------

    def test_targets_to_files_health_and_update(self):
        ctl = self.controller()
        ag = self.agent(ctl, "pp")
        uid = ag.uid()
        self.wait_agent(ctl, uid, lambda a: a["connected"], what="agent connected")
        dead = free_port()
        targets = [
            {"url": self.url("profile?seconds=1"), "type": "cpu", "interval": 2,
             "attributes": {"service.name": "gosvc"}},
            {"url": self.url("heap"), "type": "heap", "interval": 2,
             "attributes": {"service.name": "gosvc", "team": "pay"}},
            {"url": self.url("heap", port=dead), "type": "heap", "interval": 1},
            {"url": self.url("nosuch"), "type": "heap", "interval": 1},
        ]
        t0 = time.monotonic()
        self.push(ctl, uid, config_yaml(self.out_dir, targets))
        s, text = self.wait_kind("cpu", timeout=20)
        print("first cpu file after %.1f s" % (time.monotonic() - t0))
        share = self.check_cpu(s, text)
        print("main.burnCPU share of the cpu samples: %.3f" % share)
        s, text = self.wait_kind("heap", timeout=20)
        self.assertEqual(self.service(s), "gosvc")
        self.assertEqual(s["processes"][0]["attributes"].get("team"), "pay")
        for want in ('"inuse_space"', '"inuse_objects"', '"alloc_space"', '"bytes"',
                     '"main.allocLive"'):
            self.assertIn(want, text)

        # the dead and the 404 targets: unhealthy with their error, the others healthy
        def scraped(a, name):
            return re.search(r"scrapes ok [1-9]", self.comps(a).get(name, {}).get("status", ""))
        a = self.wait_agent(ctl, uid, lambda a: not self.comps(a).get(
            "pprof/2", {"healthy": True})["healthy"] and not self.comps(a).get(
            "pprof/3", {"healthy": True})["healthy"] and scraped(a, "pprof/0") and
            scraped(a, "pprof/1"), timeout=15, what="pprof/2 and pprof/3 unhealthy")
        comps = self.comps(a)
        for name in ("pprof/0", "pprof/1", "pprof/2", "pprof/3"):
            print("%s: %r" % (name, comps[name]))
        self.assertTrue(comps["pprof/2"].get("last_error"), comps["pprof/2"])
        self.assertIn("%d" % dead, comps["pprof/2"]["status"])
        self.assertTrue(comps["pprof/3"].get("last_error", "").startswith("HTTP 404"),
                        comps["pprof/3"])
        for name in ("pprof/0", "pprof/1", "exporter/0:file"):
            self.assertTrue(comps[name]["healthy"], (name, comps[name]))
        self.assertTrue(comps["pprof/0"]["status"].startswith("cpu http://127.0.0.1:"),
                        comps["pprof/0"])
        self.assertIn("every 2 s", comps["pprof/0"]["status"])
        self.assertFalse(a["health"]["healthy"])
        self.assertIn("pprof/2", a["health"].get("status", ""))
        # ... while the good targets keep producing files
        n_cpu, n_heap = self.count("cpu"), self.count("heap")
        s, text = self.wait_kind("cpu", after=n_cpu, timeout=15)
        self.check_cpu(s, text)
        self.wait_kind("heap", after=n_heap, timeout=15)
        self.assertTrue(ag.proc.alive())

        # A new target list without a restart: the failing targets go, heap becomes goroutine
        # with another service.name; the cpu target (same url and type) keeps running.
        pid = ag.proc.p.pid
        targets = [targets[0], {"url": self.url("goroutine"), "type": "goroutine",
                                "interval": 2, "attributes": {"service.name": "gosvc2"}}]
        self.push(ctl, uid, config_yaml(self.out_dir, targets))
        s, text = self.wait_kind("goroutine", timeout=20,
                                 pred=lambda s: self.service(s) == "gosvc2")
        self.assertIn('"goroutine"', text)
        a = self.wait_agent(ctl, uid, lambda a: "pprof/2" not in self.comps(a) and
                            self.comps(a).get("pprof/1", {}).get("status", "").startswith(
                                "goroutine "),
                            timeout=10, what="pprof/2 gone, pprof/1 goroutine")
        self.assertNotIn("pprof/3", self.comps(a))
        self.assertTrue(self.comps(a)["pprof/0"]["healthy"])
        self.assertEqual(ag.proc.p.pid, pid)
        self.assertTrue(ag.proc.alive())
        n_cpu = self.count("cpu")
        self.wait_kind("cpu", after=n_cpu, timeout=15)
        self.assertEqual(ag.stop(signal.SIGTERM), 0)

    def test_interval_zero_scrapes_on_sigusr1_in_triggered_mode(self):
        cfg = os.path.join(self.workdir, "local.yaml")
        targets = [
            # seconds=30 in the URL: the trigger asks for the capture's duration (1 s) instead
            {"url": self.url("profile?seconds=30"), "type": "cpu", "interval": 0,
             "attributes": {"service.name": "gosvc"}},
            {"url": self.url("heap"), "type": "heap", "interval": 0,
             "attributes": {"service.name": "gosvc"}},
        ]
        with open(cfg, "w") as f:
            f.write(config_yaml(self.out_dir, targets, mode="triggered", duration=1))
        ag = Agent(self.workdir, "trig", config=cfg).start()
        self._procs.append(ag)
        log = os.path.join(self.workdir, "agent-trig.log")
        def applied():
            if not os.path.exists(log):
                return False
            with open(log, errors="replace") as f:
                return "2 pprof targets" in f.read()
        wait_until(applied, timeout=10, what="the agent applied its pprof targets")
        time.sleep(2.0)  # interval 0: nothing is scraped without a trigger (no event to wait on)
        self.assertEqual(self.count("cpu") + self.count("heap"), 0, list(self.seen))
        t0 = time.monotonic()
        ag.proc.p.send_signal(signal.SIGUSR1)
        s, text = self.wait_kind("cpu", timeout=15)
        elapsed = time.monotonic() - t0
        print("triggered cpu file after %.1f s" % elapsed)
        self.check_cpu(s, text)
        span = (s["end_unix_ns"] - s["start_unix_ns"]) / 1e9
        self.assertTrue(0.5 <= span <= 5.0, "cpu profile of %.2f s (seconds=1 asked)" % span)
        self.assertLess(elapsed, 15.0)
        self.wait_kind("heap", timeout=10)
        # one trigger, one scrape each
        time.sleep(2.0)
        self.assertEqual((self.count("cpu"), self.count("heap")), (1, 1), list(self.seen))
        self.assertEqual(ag.stop(signal.SIGTERM), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
