"""Embedded profile store, end to end with the real controller: OTLP/HTTP profiles requests
(made with `protoc --encode` against the upstream schema, so not by our own encoder) posted to
/v1development/profiles, then the query API: list, metadata, flame graphs, top, diff, pprof
download read by `go tool pprof` (skipped when Go is missing); 400, 413, 401, partial success,
and the byte cap of the retention.
"""
import gzip
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import pfharness
from pfharness import Controller

REF = os.path.join(pfharness.SHARED_DIR, "reference", "proto")
SERVICE_PROTO = "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"
REQUEST = "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest"
START_NS = 1700000000000000000
START_MS = START_NS // 1000000
PROTOBUF = {"Content-Type": "application/x-protobuf"}

TEXT = """
resource_profiles {
  resource {
    attributes { key: "service.name" value { string_value: "%(service)s" } }
    attributes { key: "process.pid" value { int_value: 4242 } }
    attributes { key: "process.executable.name" value { string_value: "app" } }
    attributes { key: "host.name" value { string_value: "host-a" } }
    attributes { key: "profleet.agent.uid" value { string_value: "agent-1" } }
  }
  scope_profiles {
    scope { name: "test" }
    profiles {
      sample_type { type_strindex: 1 unit_strindex: 2 }
      period_type { type_strindex: 3 unit_strindex: 4 }
      period: 10101010
      time_unix_nano: %(start)d
      duration_nano: 10000000000
      profile_id: "0123456789abcdef"
      samples { stack_index: 1 values: %(hot)d }
      samples { stack_index: 2 values: %(cold)d link_index: 1 }
    }
  }
}
dictionary {
  mapping_table {}
  mapping_table { memory_start: 4096 memory_limit: 65536 filename_strindex: 8 }
  location_table {}
  location_table { mapping_index: 1 address: 4100 lines { function_index: 1 } }
  location_table { mapping_index: 1 address: 4200 lines { function_index: 2 } }
  location_table { mapping_index: 1 address: 4300 lines { function_index: 3 } }
  function_table {}
  function_table { name_strindex: 5 }
  function_table { name_strindex: 6 }
  function_table { name_strindex: 7 }
  link_table {}
  link_table { trace_id: "AAAAAAAAAAAAAAAA" span_id: "BBBBBBBB" }
  string_table: ""
  string_table: "samples"
  string_table: "count"
  string_table: "cpu"
  string_table: "nanoseconds"
  string_table: "main"
  string_table: "hot_function"
  string_table: "cold_function"
  string_table: "/usr/bin/app"
  attribute_table {}
  stack_table {}
  stack_table { location_indices: [2, 1] }
  stack_table { location_indices: [3, 1] }
}
"""
# One more ResourceProfiles { ScopeProfiles { Profile {} } }: an empty profile.
EMPTY_PROFILE = bytes([0x0A, 0x06, 0x12, 0x04, 0x12, 0x02, 0x12, 0x00])


def encode(service="checkout", start=START_NS, hot=90, cold=10):
    text = TEXT % {"service": service, "start": start, "hot": hot, "cold": cold}
    r = subprocess.run(["protoc", "-I" + REF, "--encode=" + REQUEST, SERVICE_PROTO],
                       input=text.encode(), capture_output=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("protoc --encode failed: " + r.stderr.decode())
    return r.stdout


def have_protoc():
    return shutil.which("protoc") and os.path.isdir(REF)


@unittest.skipUnless(have_protoc(), "protoc or the reference schemas are missing")
class ProfileStore(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pf-it-profstore-")
        self.c = None

    def tearDown(self):
        if self.c:
            self.c.stop()
        if self._outcome_ok():
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            print("kept", self.tmp)

    def _outcome_ok(self):
        res = getattr(self, "_outcome", None)
        errs = getattr(res, "errors", None) if res else None
        if errs is None:
            return True
        return not any(e for _, e in errs)

    def start(self, *extra):
        self.c = Controller(self.tmp, extra=list(extra)).start()
        return self.c

    def post(self, body, token=None, headers=None):
        h = dict(PROTOBUF)
        h.update(headers or {})
        return self.c.request("POST", "/v1development/profiles", body,
                              token=token if token is not None else self.c.agent_token,
                              headers=h, raw=True)

    def get(self, path):
        st, body, h = self.c.request("GET", path)
        self.assertEqual(st, 200, (path, body))
        return body

    def test_ingest_and_query(self):
        self.start()
        st, body, h = self.post(encode(start=START_NS))
        self.assertEqual(st, 200, body)
        self.assertEqual(body, b"")  # empty ExportProfilesServiceResponse: full success
        self.assertIn("protobuf", h.get("content-type", h.get("Content-Type", "")))
        st, body, _ = self.post(gzip.compress(encode(start=START_NS + 10 * 10**9)),
                                headers={"Content-Encoding": "gzip"})
        self.assertEqual(st, 200, body)
        # a later range where cold_function got much slower
        st, body, _ = self.post(encode(start=START_NS + 20 * 10**9, hot=90, cold=110))
        self.assertEqual(st, 200, body)

        lst = self.get("/api/v1/profiles?service=checkout&from=%d" % START_MS)
        self.assertEqual(lst["count"], 3)
        p = lst["profiles"][-1]
        self.assertEqual(p["start_ms"], START_MS)
        self.assertEqual((p["service"], p["pid"], p["executable"], p["host"], p["agent"],
                          p["type"], p["samples"], p["links"]),
                         ("checkout", 4242, "app", "host-a", "agent-1", "cpu", 100, 1))
        trace = "41" * 16
        self.assertEqual(self.get("/api/v1/profiles?trace_id=" + trace)["count"], 3)
        meta = self.get("/api/v1/profiles/%d" % p["id"])
        self.assertEqual(meta["trace_links"], [{"trace_id": trace, "span_id": "42" * 8}])

        fg = self.get("/api/v1/profiles/%d/flamegraph" % p["id"])
        self.assertEqual((fg["name"], fg["value"]), ("all", 100))
        main = fg["children"][0]
        self.assertEqual(main["name"], "main")
        hot = [c for c in main["children"] if c["name"] == "hot_function"][0]
        self.assertEqual(hot["value"], 90)

        merged = self.get("/api/v1/flamegraph?service=checkout&from=%d&to=%d"
                          % (START_MS, START_MS + 20000))
        self.assertEqual((merged["profiles_matched"], merged["profiles_merged"]), (2, 2))
        self.assertFalse(merged["capped"])
        self.assertEqual(merged["value"], 200)

        top = self.get("/api/v1/top?service=checkout&from=%d&to=%d&limit=5"
                       % (START_MS, START_MS + 20000))
        self.assertEqual(top["functions"][0]["name"], "hot_function")
        self.assertEqual(top["functions"][0]["self"], 180)
        self.assertAlmostEqual(top["functions"][0]["self_pct"], 90.0)

        diff = self.get("/api/v1/flamegraph/diff?service=checkout&from=%d&to=%d"
                        "&base_from=%d&base_to=%d"
                        % (START_MS + 20000, START_MS + 30000, START_MS, START_MS + 20000))
        cold = [c for c in diff["children"][0]["children"] if c["name"] == "cold_function"][0]
        self.assertEqual((cold["value"], cold["base"]), (110, 20))
        self.assertGreater(cold["delta"], 0)  # what got slower

        st, pprof, h = self.c.request("GET", "/api/v1/profiles/%d/pprof" % p["id"], raw=True)
        self.assertEqual(st, 200)
        self.assertEqual(pprof[:2], b"\x1f\x8b")
        self.check_go_pprof(pprof)

    def check_go_pprof(self, pprof):
        go = shutil.which("go")
        if not go:
            print("go missing: go tool pprof check skipped")
            return
        path = os.path.join(self.tmp, "p.pb.gz")
        with open(path, "wb") as f:
            f.write(pprof)
        env = dict(os.environ, HOME=self.tmp, GOCACHE=os.path.join(self.tmp, "gocache"),
                   GOFLAGS="", GOTOOLCHAIN="local")
        r = subprocess.run([go, "tool", "pprof", "-top", path], capture_output=True,
                           timeout=120, env=env)
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        self.assertIn("hot_function", out)
        line = [l for l in out.splitlines() if "hot_function" in l][0]
        self.assertIn("90.00%", line)

    def test_rejections(self):
        self.start("--max-message-bytes", "65536")
        good = encode()
        st, body, _ = self.post(b"\x0a\xff\xff\x01garbage")
        self.assertEqual(st, 400)
        self.assertIn(b"undecodable", body)  # google.rpc.Status message
        st, body, _ = self.post(good, headers={"Content-Encoding": "gzip"})
        self.assertEqual(st, 400)
        self.assertIn(b"gzip", body)
        st, _, _ = self.post(b"\x00" * 70000)
        self.assertEqual(st, 413)
        st, body, _ = self.post(gzip.compress(b"\x00" * 200000),
                                headers={"Content-Encoding": "gzip"})
        self.assertEqual(st, 413)
        self.assertIn(b"decompression", body)
        st, _, _ = self.post(good, headers={"Content-Type": "application/json"})
        self.assertEqual(st, 415)
        st, _, h = self.post(good, token="wrong")
        self.assertEqual(st, 401)
        st, _, _ = self.post(good, token=self.c.admin_token)  # not an agent token
        self.assertEqual(st, 401)
        st, _, _ = self.post(good, token="")
        self.assertEqual(st, 401)
        self.assertEqual(self.get("/api/v1/profiles")["count"], 0)
        # partial success: the empty profile is rejected, the other one stored
        st, body, _ = self.post(good + EMPTY_PROFILE)
        self.assertEqual(st, 200)
        self.assertEqual(body[0], 0x0A)  # partial_success
        self.assertIn(b"no samples", body)
        self.assertEqual(self.get("/api/v1/profiles")["count"], 1)
        # the query API wants a viewer token
        st, body, _ = self.c.request("GET", "/api/v1/profiles", token=self.c.agent_token)
        self.assertEqual(st, 401)
        self.assertEqual(body["error"]["code"], "unauthenticated")

    def test_retention_byte_cap(self):
        self.start("--profile-max-bytes", "4096", "--profile-retention-hours", "1")
        for i in range(40):
            st, body, _ = self.post(encode(start=START_NS + i * 10**10, hot=i + 1))
            self.assertEqual(st, 200, body)
        lst = self.get("/api/v1/profiles?limit=1000")
        total = sum(p["size_bytes"] for p in lst["profiles"])
        self.assertLessEqual(total, 4096)
        self.assertLess(lst["count"], 40)
        # oldest went first: the newest is still there
        self.assertEqual(lst["profiles"][0]["samples"], 40 + 10)


if __name__ == "__main__":
    unittest.main(verbosity=2)
