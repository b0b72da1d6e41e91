"""Embedded profile store, end to end with the real controller: OTLP/HTTP profiles requests
(made with `protoc --encode` against the upstream schema, so not by our own encoder) posted to
/v1development/profiles, then the query API: list, metadata, flame graphs, top, diff, pprof
download read by `go tool pprof` (skipped when Go is missing); 400, 413, 401, partial success,
and the byte cap of the retention. LoopNotBlocked: heavy merged queries run on the query pool,
so /healthz and other API calls answer while they run; a full pool answers 503 + Retry-After;
a client that disconnects mid-query harms nothing.
"""
import gzip
import itertools
import http.client
import json
import os
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import time
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


_ENCODED = itertools.count(1)


def encode(service="checkout", start=START_NS, hot=90, cold=10, profile_id=None):
    """One profile; each call gets its own 16-byte profile_id unless one is given (the store
    keeps one profile per agent and profile_id: the same id again is a retry)."""
    text = TEXT % {"service": service, "start": start, "hot": hot, "cold": cold}
    pid = profile_id or "enc-%012d" % next(_ENCODED)
    text = text.replace('profile_id: "0123456789abcdef"', 'profile_id: "%s"' % pid)
    r = subprocess.run(["protoc", "-I" + REF, "--encode=" + REQUEST, SERVICE_PROTO],
                       input=text.encode(), capture_output=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("protoc --encode failed: " + r.stderr.decode())
    return r.stdout


TAG = b"@0000"


def big_text(stacks=200, funcs=600, seed=7):
    """A profile shaped like the benchmark's (bench/profstore_bench.c): `stacks` stacks 8-32
    frames deep over `funcs` functions, so merging it costs what a real agent window does.
    Every function name ends in TAG: retag() makes the encoded body's frames (and so its
    stacks) new ones, as a fleet of different programs sends."""
    rnd = random.Random(seed)
    out = ["resource_profiles { resource {",
           ' attributes { key: "service.name" value { string_value: "big" } }',
           ' attributes { key: "process.pid" value { int_value: 7 } }',
           "} scope_profiles { scope { name: \"test\" } profiles {",
           " sample_type { type_strindex: 1 unit_strindex: 2 }",
           " period_type { type_strindex: 3 unit_strindex: 4 }",
           " period: 10101010 time_unix_nano: %d duration_nano: 10000000000" % START_NS]
    for i in range(stacks):
        out.append(" samples { stack_index: %d values: %d }" % (i + 1, 1 + rnd.randrange(9)))
    out.append("} } }")
    out.append("dictionary { mapping_table {}")
    out.append(" mapping_table { memory_start: 4096 memory_limit: 16777216 filename_strindex: 5 }")
    out.append(" location_table {}")
    for f in range(funcs):
        out.append(" location_table { mapping_index: 1 address: %d lines { function_index: %d } }"
                   % (4096 + 64 * f, f + 1))
    out.append(" function_table {}")
    for f in range(funcs):
        out.append(" function_table { name_strindex: %d }" % (6 + f))
    for t in ["", "samples", "count", "cpu", "nanoseconds", "/usr/bin/big"]:
        out.append(' string_table: "%s"' % t)
    for f in range(funcs):
        out.append(' string_table: "pkg%d.function_%d%s"' % (f % 17, f, TAG.decode()))
    out.append(" attribute_table {} stack_table {}")
    for i in range(stacks):
        depth = rnd.randrange(8, 33)
        locs = [1 + (0 if d == 0 else rnd.randrange(funcs)) for d in range(depth)]
        locs.reverse()  # leaf first
        out.append(" stack_table { location_indices: [%s] }" % ", ".join(map(str, locs)))
    out.append("}")
    return "\n".join(out)


def retag(body, n):
    """The encoded body with its function names tagged n (same length: the encoding holds)."""
    return body.replace(TAG, b"@%04d" % (n % 10000))


def encode_text(text):
    r = subprocess.run(["protoc", "-I" + REF, "--encode=" + REQUEST, SERVICE_PROTO],
                       input=text.encode(), capture_output=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("protoc --encode failed: " + r.stderr.decode())
    return r.stdout

# An allocation profile as OTLP v1.11 carries one: one Profile per sample type in the
# process's ScopeProfiles, alloc_objects/count then alloc_space/bytes, over TEXT's stacks
# (main;hot_function and main;cold_function) and dictionary, with four more strings and the
# attribute profleet.default_sample_type = alloc_objects.
ALLOC_TEXT = """
resource_profiles {
  resource {
    attributes { key: "service.name" value { string_value: "%(service)s" } }
    attributes { key: "profleet.agent.uid" value { string_value: "agent-1" } }
  }
  scope_profiles { scope { name: "test" } %(profiles)s }
}
""" + TEXT[TEXT.index("dictionary {"):].replace("  attribute_table {}\n", """\
  string_table: "alloc_objects"
  string_table: "bytes"
  string_table: "space"
  string_table: "alloc_space"
  string_table: "profleet.default_sample_type"
  attribute_table {}
  attribute_table { key_strindex: 13 value { string_value: "alloc_objects" } }
""")


ALLOC_PROFILE = """
    profiles {
      sample_type { type_strindex: %(type)d unit_strindex: %(unit)d }
      period_type { type_strindex: 11 unit_strindex: 10 }
      period: 524288 time_unix_nano: %(start)d duration_nano: 10000000000
      profile_id: "%(id)s" %(attr)s
      samples { stack_index: 1 values: %(small)d }
      samples { stack_index: 2 values: %(large)d }
    }"""


def encode_alloc(service, start, n, default_attr=False):
    """alloc_objects: hot_function 30, cold_function 5; alloc_space: 1000 and 9000 bytes."""
    attr = "attribute_indices: 1" if default_attr else ""
    profiles = "".join(ALLOC_PROFILE % {"type": t, "unit": u, "start": start, "attr": attr,
                                        "id": "%s-%02d" % (name, n), "small": a, "large": b}
                       for t, u, name, a, b in ((9, 2, "alloc-objects", 30, 5),
                                                (12, 10, "alloc-space--", 1000, 9000)))
    return encode_text(ALLOC_TEXT % {"service": service, "profiles": profiles})


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def have_protoc():
    return shutil.which("protoc") and os.path.isdir(REF)


class StoreCase(unittest.TestCase):
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



@unittest.skipUnless(have_protoc(), "protoc or the reference schemas are missing")
class ProfileStore(StoreCase):
    def test_ingest_idempotent(self):
        """The same request twice (a retry after a lost answer, or a capture's profile sent by
        the capture upload and by the agent's own exporter): one stored profile, both 200."""
        self.start()
        body = encode(start=START_NS, profile_id="retry-prof-00001")
        for i in range(2):
            st, answer, _ = self.post(body if i == 0 else gzip.compress(body),
                                      headers={} if i == 0 else {"Content-Encoding": "gzip"})
            self.assertEqual((st, answer), (200, b""))
        lst = self.get("/api/v1/profiles?service=checkout")
        self.assertEqual(lst["count"], 1)
        self.assertEqual(lst["profiles"][0]["samples"], 100)
        # the same profile_id from another agent is another profile
        other = encode(start=START_NS, profile_id="retry-prof-00001").replace(
            b"agent-1", b"agent-2")
        self.assertEqual(self.post(other)[0], 200)
        self.assertEqual(self.get("/api/v1/profiles?service=checkout")["count"], 2)

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

    def test_several_sample_types(self):
        """An allocation profile with two sample types, posted as OTLP: each type is
        queryable through every view with its own unit and values, the default view is bytes
        (or the type the profile names as its default), and the pprof download keeps both."""
        self.start()
        for i in range(2):
            st, body, _ = self.post(encode_alloc("heap", START_NS + i * 10**10, i))
            self.assertEqual((st, body), (200, b""))
        st, body, _ = self.post(encode_alloc("heap-obj", START_NS, 5, default_attr=True))
        self.assertEqual((st, body), (200, b""))
        rng = "from=%d&to=%d" % (START_MS, START_MS + 20000)
        lst = self.get("/api/v1/profiles?service=heap&" + rng)
        self.assertEqual([(p["type"], p["samples"]) for p in lst["profiles"]],
                         [("alloc_space", 10000)] * 2)
        for t in ("alloc_space", "alloc_objects"):
            self.assertEqual(self.get("/api/v1/profiles?service=heap&profile_type=%s&%s"
                                      % (t, rng))["count"], 2)
        self.assertEqual(self.get("/api/v1/profiles?service=heap-obj&" + rng)
                         ["profiles"][0]["type"], "alloc_objects")
        types = self.get("/api/v1/profile_types?" + rng)["types"]
        self.assertIn({"type": "alloc_space", "unit": "bytes"}, types)
        self.assertIn({"type": "alloc_objects", "unit": "count"}, types)

        want = {"alloc_space": ("bytes", 1000, 9000), "alloc_objects": ("count", 30, 5)}
        for t, (unit, small, large) in want.items():
            q = "service=heap&profile_type=%s&%s" % (t, rng)
            fg = self.get("/api/v1/flamegraph?" + q)
            self.assertEqual((fg["unit"], fg["type"], fg["profiles_merged"]), (unit, t, 2))
            self.assertEqual(fg["value"], 2 * (small + large))
            kids = {c["name"]: c["value"] for c in fg["children"][0]["children"]}
            self.assertEqual(kids, {"hot_function": 2 * small, "cold_function": 2 * large})
            top = self.get("/api/v1/top?" + q)
            self.assertEqual(top["unit"], unit)
            self.assertEqual({f["name"]: f["self"] for f in top["functions"] if f["self"]},
                             {"hot_function": 2 * small, "cold_function": 2 * large})
            self.assertEqual(top["total"], 2 * (small + large))
            tl = self.get("/api/v1/timeline?%s&step=10000" % q)
            self.assertEqual((tl["unit"], [v for _, v in tl["points"]]),
                             (unit, [small + large] * 2))
            diff = self.get("/api/v1/flamegraph/diff?service=heap&profile_type=%s&from=%d&to=%d"
                            "&base_from=%d&base_to=%d" % (t, START_MS + 10000, START_MS + 20000,
                                                          START_MS, START_MS + 10000))
            self.assertEqual((diff["value"], diff["base_total"]), (small + large,) * 2)
            one = self.get("/api/v1/profiles/%d/flamegraph?profile_type=%s"
                           % (lst["profiles"][0]["id"], t))
            self.assertEqual((one["unit"], one["type"], one["value"]), (unit, t, small + large))
        one = self.get("/api/v1/profiles/%d/flamegraph" % lst["profiles"][0]["id"])
        self.assertEqual((one["type"], one["unit"], one["value"]), ("alloc_space", "bytes", 10000))
        st, _, _ = self.c.request("GET", "/api/v1/profiles/%d/flamegraph?profile_type=wall"
                                  % lst["profiles"][0]["id"])
        self.assertEqual(st, 404)
        st, pprof, _ = self.c.request("GET", "/api/v1/profiles/%d/pprof"
                                      % lst["profiles"][0]["id"], raw=True)
        self.assertEqual(st, 200)
        raw = gzip.decompress(pprof)
        for name in (b"alloc_objects", b"alloc_space", b"hot_function", b"cold_function"):
            self.assertIn(name, raw)
        self.check_go_pprof(pprof, "cold_function", "90.00%")  # its default: alloc_space

    def check_go_pprof(self, pprof, fn="hot_function", share="90.00%"):
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
        self.assertIn(fn, out)
        line = [l for l in out.splitlines() if fn in l][0]
        self.assertIn(share, line)

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
        # the query API wants a viewer token: an agent token is known but below every API role
        st, body, _ = self.c.request("GET", "/api/v1/profiles", token=self.c.agent_token)
        self.assertEqual(st, 403)
        self.assertEqual(body["error"]["code"], "permission_denied")

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



@unittest.skipUnless(have_protoc(), "protoc or the reference schemas are missing")
class GroupCommit(StoreCase):
    def test_concurrent_posts_share_commits(self):
        """Posts from many clients at once: the receiver's writers take the queued requests
        together and store each lot in one transaction. Every request is answered 200 (after
        its commit), every profile is stored once — six contents, each new in the first lot
        that holds it — and reads back whole, alone and merged."""
        self.start()
        body = encode_text(big_text())
        n, results = 48, {}

        def one(i):
            c = http.client.HTTPConnection("127.0.0.1", self.c.port, timeout=60)
            try:
                h = dict(PROTOBUF)
                h["Authorization"] = "Bearer " + self.c.agent_token
                c.request("POST", "/v1development/profiles", retag(body, i % 6), headers=h)
                r = c.getresponse()
                results[i] = (r.status, r.read())
            except OSError as e:
                results[i] = (None, str(e).encode())
            finally:
                c.close()

        ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        self.assertEqual(sorted(results), list(range(n)))
        for i in range(n):
            self.assertEqual(results[i], (200, b""), i)
        lst = self.get("/api/v1/profiles?service=big&limit=1000")
        self.assertEqual(lst["count"], n)
        merged = self.get("/api/v1/flamegraph?from=%d&to=%d&service=big"
                          % (START_MS, START_MS + 10000))
        self.assertEqual(merged["profiles_merged"], n)
        for p in lst["profiles"][:6]:
            fg = self.get("/api/v1/profiles/%d/flamegraph" % p["id"])
            self.assertEqual(fg["value"] * n, merged["value"])
            self.assertEqual(fg["value"], p["samples"])


@unittest.skipUnless(have_protoc(), "protoc or the reference schemas are missing")
@unittest.skipUnless(have_protoc(), "protoc or the reference schemas are missing")
class PoolAnswersGzip(StoreCase):
    """The merged views are answered by the query pool, and compressed there as the loop
    compresses its own JSON answers: gzip for a client that accepts it, plain for one that
    does not (or sends identity), and an answer of 1 KiB or less always plain."""

    def fetch(self, path, accept=None):
        h = {"Authorization": "Bearer " + self.c.admin_token}
        if accept is not None:
            h["Accept-Encoding"] = accept
        conn = http.client.HTTPConnection("127.0.0.1", self.c.port, timeout=30)
        try:
            conn.request("GET", path, headers=h)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def test_pool_answers_are_gzipped_for_clients_that_accept_it(self):
        self.start()
        body = encode_text(big_text())
        for n in range(6):
            st, b, _ = self.post(retag(body, n))
            self.assertEqual(st, 200, b)
        rng = "from=%d&to=%d" % (START_MS, START_MS + 10000)
        for path in ("/api/v1/flamegraph?" + rng, "/api/v1/top?limit=200&" + rng,
                     "/api/v1/profiles?" + rng):
            st, h, plain = self.fetch(path)
            self.assertEqual(st, 200, (path, plain[:200]))
            self.assertNotIn("content-encoding", h, path)
            self.assertGreater(len(plain), 1024, path)
            json.loads(plain)
            st, h, z = self.fetch(path, "gzip, deflate")
            self.assertEqual(st, 200, path)
            self.assertEqual(h.get("content-encoding"), "gzip", path)
            self.assertEqual(h.get("vary"), "Accept-Encoding", path)
            self.assertEqual(z[:2], b"\x1f\x8b", path)
            self.assertLess(len(z), len(plain), path)
            self.assertEqual(gzip.decompress(z), plain, path)
            st, h, ident = self.fetch(path, "identity")
            self.assertNotIn("content-encoding", h, path)
            self.assertEqual(ident, plain, path)
        # a small answer of the pool goes as it is
        st, h, small = self.fetch("/api/v1/profile_types?" + rng, "gzip")
        self.assertEqual(st, 200)
        self.assertLessEqual(len(small), 1024)
        self.assertNotIn("content-encoding", h)
        self.assertEqual(json.loads(small)["types"], [{"type": "cpu", "unit": "samples"}])
        # errors of the pool too, whatever their size
        st, h, err = self.fetch("/api/v1/flamegraph?from=x", "gzip")
        self.assertEqual(st, 400)
        self.assertNotIn("content-encoding", h)
        self.assertEqual(json.loads(err)["error"]["code"], "invalid_argument")


class LoopNotBlocked(StoreCase):
    MIN_QUERY_S = 0.1

    def get_timed(self, conn, path, token):
        t = time.monotonic()
        conn.request("GET", path, headers={"Authorization": "Bearer " + token})
        r = conn.getresponse()
        r.read()
        return r.status, time.monotonic() - t

    def load(self, *extra):
        """Posts big profiles until one merged flame graph over them takes MIN_QUERY_S."""
        self.start(*extra)
        body = encode_text(big_text())
        self.query = ("/api/v1/flamegraph?from=%d&to=%d&max_profiles=5000"
                      % (START_MS, START_MS + 10000))
        posted = 0
        for _ in range(24):
            for _ in range(150):
                st, b, _ = self.post(retag(body, posted))
                self.assertEqual(st, 200, b)
                posted += 1
            # the faster of two: the second finds the worker's stack cache warm
            self.alone = 1e9
            for _ in range(2):
                t = time.monotonic()
                merged = self.get(self.query)
                self.alone = min(self.alone, time.monotonic() - t)
                self.assertEqual(merged["profiles_merged"], posted)
            if self.alone >= self.MIN_QUERY_S * 1.5:
                break
        print("\n%d profiles; one merged flame graph alone: %.0f ms" % (posted, self.alone * 1e3))
        self.assertGreaterEqual(self.alone, self.MIN_QUERY_S,
                                "could not make a merged query slow enough to measure")

    def run_queries(self, n, results):
        def one(i):
            c = http.client.HTTPConnection("127.0.0.1", self.c.port, timeout=60)
            try:
                c.request("GET", self.query,
                          headers={"Authorization": "Bearer " + self.c.admin_token})
                r = c.getresponse()
                results[i] = (r.status, r.getheader("Retry-After"), r.read())
            except OSError as e:  # the controller stopping under it
                results[i] = (None, None, str(e).encode())
            finally:
                c.close()
        ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        return ts

    def test_loop_answers_while_merged_queries_run(self):
        self.load()
        results = [None] * 2
        probe = http.client.HTTPConnection("127.0.0.1", self.c.port, timeout=30)
        self.get_timed(probe, "/healthz", self.c.admin_token)  # connect outside the timing
        t0 = time.monotonic()
        ts = self.run_queries(2, results)  # both workers busy
        time.sleep(0.01)  # let the requests reach the controller
        health, summary = [], []
        while any(t.is_alive() for t in ts) and time.monotonic() - t0 < 60:
            st, dt = self.get_timed(probe, "/healthz", self.c.admin_token)
            self.assertEqual(st, 200)
            health.append(dt)
            st, dt = self.get_timed(probe, "/api/v1/fleet/summary", self.c.admin_token)
            self.assertEqual(st, 200)
            summary.append(dt)
        for t in ts:
            t.join(60)
        wall = time.monotonic() - t0
        probe.close()
        for st, _, b in results:
            self.assertEqual(st, 200, b[:200])
        print("2 merged queries in %.0f ms (alone %.0f ms); during them %d /healthz: p50 %.1f ms "
              "max %.1f ms; %d /fleet/summary: p50 %.1f ms max %.1f ms"
              % (wall * 1e3, self.alone * 1e3, len(health), pct(health, .5) * 1e3,
                 max(health) * 1e3, len(summary), pct(summary, .5) * 1e3, max(summary) * 1e3))
        # A blocked loop would hold a probe for about a query's duration (>= 100 ms): the
        # first probe alone would wait most of it, and there would be a handful of probes.
        self.assertGreaterEqual(len(health), 5)
        bound = max(0.05, self.alone / 2)
        self.assertLess(pct(health, .5), 0.05)
        self.assertLess(pct(summary, .5), 0.05)
        self.assertLess(max(health), bound)
        self.assertLess(max(summary), bound)

    def test_full_pool_answers_503_and_disconnects_are_harmless(self):
        self.load()
        # 2 running + 16 waiting fit; more at once get 503 with Retry-After.
        results = [None] * 30
        for t in self.run_queries(30, results):
            t.join(120)
        codes = [r[0] for r in results]
        self.assertEqual(set(codes) - {200, 503}, set(), codes)
        busy = [r for r in results if r[0] == 503]
        print("30 merged queries at once: %d answered 200, %d answered 503"
              % (codes.count(200), len(busy)))
        self.assertGreaterEqual(codes.count(200), 12)
        self.assertGreater(len(busy), 0)
        self.assertEqual(busy[0][1], "1")
        self.assertEqual(json.loads(busy[0][2])["error"]["code"], "unavailable")
        # Clients that go away while their query waits or runs (lws notices when it writes
        # the answer to the dead socket, or sooner).
        for _ in range(6):
            s = socket.create_connection(("127.0.0.1", self.c.port), timeout=5)
            s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
                       % (self.query, self.c.admin_token)).encode())
            s.close()
        # Still healthy and serving: two more queries queue behind the abandoned ones.
        self.get("/api/v1/fleet/summary")
        results = [None] * 2
        for t in self.run_queries(2, results):
            t.join(120)
        self.assertEqual([r[0] for r in results], [200, 200])
        self.assertIn("profiles_merged", self.get(self.query))
        self.assertTrue(self.c.proc.alive())

    def test_shutdown_while_queries_run(self):
        """Connections closed under running and waiting queries (here by the controller's
        own shutdown): their answers are dropped, never delivered to a freed connection, and
        the controller exits cleanly (under ASan too)."""
        self.load("--log-level", "debug")
        log = os.path.join(self.tmp, "controller.log")
        before = pfharness.read_text(log).count("answered 200")  # load()'s own queries
        results = [None] * 6
        ts = self.run_queries(6, results)
        # One of the 6 answered: 2 workers, so at least 3 are still waiting or running.
        pfharness.wait_until(lambda: pfharness.read_text(log).count("answered 200") > before,
                             timeout=60, what="a first query answered from the pool")
        rc = self.c.stop()
        self.c = None
        for t in ts:
            t.join(60)
        text = pfharness.read_text(log)
        self.assertEqual(rc, 0, text[-2000:])
        self.assertIn("connection closed before its answer; dropping it", text)
        self.assertNotIn("Sanitizer", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
