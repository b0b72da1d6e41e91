"""pprof sources end to end: a real Go program with net/http/pprof (tests/data/pprof/goprog,
built here with Debian's golang-go: standard library only, private GOPATH/GOCACHE, no
network) scraped through agent_pprof by profleet-pprof-scrape, converted to OTLP profiles and
checked by the conformance checker (profcheck) and by protoc against the upstream schema.

Skipped when go is not installed or profleet-pprof-scrape was not built (agent/pprof/pprof.cmake).
The protoc step is skipped when protoc or the reference schema is missing.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

SOURCE_DIR = os.environ.get("PF_SOURCE_DIR",
                            os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
SHARED_DIR = os.environ.get("PF_SHARED_DIR", "")
PROFCHECK_BIN = os.environ.get("PF_PROFCHECK_BIN", "")


def scrape_bin():
    b = os.environ.get("PF_PPROF_SCRAPE_BIN", "")
    if b:
        return b
    agent = os.environ.get("PF_AGENT_BIN", "")
    if agent:
        cand = os.path.join(os.path.dirname(agent), "profleet-pprof-scrape")
        if os.path.exists(cand):
            return cand
    return ""


def summary(out):
    """Parses the scrape tool's "key: value" lines; "top" lines into (total, self, name)."""
    s = {"top": []}
    for line in out.splitlines():
        k, _, v = line.partition(": ")
        if k == "top":
            total, self_, name = v.split(" ", 2)
            s["top"].append((float(total), float(self_), name))
        else:
            s[k] = v
    return s


class PprofGoTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not shutil.which("go"):
            raise unittest.SkipTest("go not installed")
        cls.bin = scrape_bin()
        if not cls.bin or not os.path.exists(cls.bin):
            raise unittest.SkipTest("profleet-pprof-scrape not built")
        cls.tmp = tempfile.mkdtemp(prefix="pf-pprof-go-")
        env = dict(os.environ, GOPATH=os.path.join(cls.tmp, "gopath"),
                   GOCACHE=os.path.join(cls.tmp, "cache"), GOPROXY="off", GOFLAGS="",
                   GO111MODULE="off")
        subprocess.run(["go", "build", "-o", os.path.join(cls.tmp, "goprog"),
                        os.path.join(SOURCE_DIR, "tests/data/pprof/goprog/main.go")],
                       cwd=cls.tmp, env=env, check=True, timeout=180)
        cls.proc = subprocess.Popen([os.path.join(cls.tmp, "goprog"), "-lifetime", "300s"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = cls.proc.stdout.readline()  # goprog prints PORT once listening
        if not line.startswith("PORT "):
            cls.tearDownClass()
            raise RuntimeError("goprog did not start: %r" % line)
        cls.port = int(line.split()[1])

    @classmethod
    def tearDownClass(cls):
        proc = getattr(cls, "proc", None)
        if proc:
            proc.stdin.close()  # goprog exits when stdin closes
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if getattr(cls, "tmp", None):
            subprocess.run(["chmod", "-R", "u+w", cls.tmp])
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def scrape(self, endpoint, *args, expect_ok=True):
        out = os.path.join(self.tmp, endpoint.split("?")[0].replace("/", "_") + ".otlp.pb")
        cmd = [self.bin, *args, "--out", out,
               "http://127.0.0.1:%d/debug/pprof/%s" % (self.port, endpoint)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if expect_ok:
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return summary(p.stdout), out, p.returncode

    def profcheck(self, path):
        if not PROFCHECK_BIN or not os.path.exists(PROFCHECK_BIN):
            return None
        p = subprocess.run([PROFCHECK_BIN, path], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rep = json.loads(p.stdout)
        self.assertEqual(rep["violations"], [])
        return rep

    def protoc_decode(self, path):
        ref = os.path.join(SHARED_DIR, "reference", "proto")
        if not shutil.which("protoc") or not os.path.isdir(ref):
            return None
        with open(path, "rb") as f:
            p = subprocess.run(
                ["protoc", "-I", ref,
                 "--decode=opentelemetry.proto.collector.profiles.v1development."
                 "ExportProfilesServiceRequest",
                 "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"],
                stdin=f, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_cpu(self):
        s, out, _ = self.scrape("profile?seconds=1", "--type", "cpu", "--attr",
                                "service.name=goprog", "--attr", "team=pay", "--keep-original")
        self.assertEqual(s["status"], "200")
        self.assertIn("cpu/nanoseconds", s["sample_types"])
        self.assertGreaterEqual(int(s["samples"]), 20)
        hot = [t for t in s["top"] if t[2] == "main.burnCPU"]
        self.assertTrue(hot, s["top"])
        self.assertGreaterEqual(hot[0][0], 0.5)
        rep = self.profcheck(out)
        if rep is not None:
            proc = rep["processes"][0]
            self.assertEqual(proc["attributes"].get("service.name"), "goprog")
            self.assertEqual(proc["attributes"].get("team"), "pay")
            leaf = proc["leaf"].get("main.burnCPU", 0)
            self.assertGreaterEqual(leaf / max(proc["samples"], 1), 0.5)
        text = self.protoc_decode(out)
        if text is not None:
            for want in ('"main.burnCPU"', '"cpu"', '"nanoseconds"', '"worker"', '"burner"',
                         'original_payload_format: "pprof"', '"service.name"'):
                self.assertIn(want, text)

    def test_heap_and_goroutine(self):
        s, out, _ = self.scrape("heap", "--type", "heap")
        self.assertIn("inuse_space/bytes", s["sample_types"])
        self.assertIn("alloc_objects/count", s["sample_types"])
        self.assertTrue(s["period"].endswith("space/bytes"), s["period"])
        self.profcheck(out)
        text = self.protoc_decode(out)
        if text is not None:
            self.assertIn('"inuse_space"', text)
            self.assertIn('"main.allocLive"', text)
            self.assertNotIn("original_payload", text)
        s, out, _ = self.scrape("goroutine", "--type", "goroutine")
        self.assertIn("goroutine/count", s["sample_types"])
        self.assertGreaterEqual(int(s["samples"]), 3)
        self.profcheck(out)

    def test_errors_are_clean(self):
        s, _, rc = self.scrape("nosuch", "--type", "heap", expect_ok=False)
        self.assertEqual(rc, 1)
        self.assertEqual(s["status"], "404")
        self.assertTrue(s["error"].startswith("HTTP 404"), s)
        # cmdline answers text, not a profile: rejected as malformed pprof
        s, _, rc = self.scrape("cmdline", "--type", "heap", expect_ok=False)
        self.assertEqual(rc, 1)
        self.assertIn("malformed pprof", s["error"])
        # a response over the size limit
        s, _, rc = self.scrape("heap", "--type", "heap", "--max-bytes", "100", expect_ok=False)
        self.assertEqual(rc, 1)
        self.assertIn("over", s["error"])
        self.assertIn("100 byte", s["error"].replace("bytes", "byte"))


if __name__ == "__main__":
    unittest.main()
