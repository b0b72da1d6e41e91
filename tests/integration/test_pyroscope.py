"""Pyroscope's push API (POST /ingest) on the real controller, driven by a client written here
from Pyroscope's documented wire format (not by our own encoders): the folded and lines text
formats, pprof as a raw body and as multipart/form-data with a `profile` part (the pprof bytes
are made by a protobuf writer below, from perftools' profile.proto field numbers), the
optional sample_type_config; the stored profiles and flame graphs match what was sent; bad
input (truncated pprof, gzip bombs, out-of-range ids, huge and bad names, bad counts) is
answered 400/413 with a message, tokens are the receivers' (agent) tokens.
"""
import base64
import gzip
import http.client
import json
import os
import shutil
import socket
import tempfile
import unittest
import urllib.parse

import pfharness
from pfharness import Controller, varint

T0 = 1700000000  # unix seconds
T0_MS = T0 * 1000


# ---- A protobuf writer (wire format: varint, length-delimited) for perftools.profiles.Profile.

def field_varint(num, v):
    return varint(num << 3) + varint(v)


def field_bytes(num, b):
    return varint((num << 3) | 2) + varint(len(b)) + b


def packed(num, values):
    return field_bytes(num, b"".join(varint(v) for v in values))


def pprof(sample_types, samples, period_type=None, period=0, time_nanos=0, bad_function=False):
    """sample_types: [(type, unit)]; samples: [(stack root first, [values])] with frame names.
    Returns the serialized Profile (fields: 1 sample_type, 2 sample, 4 location, 5 function,
    6 string_table, 9 time_nanos, 11 period_type, 12 period)."""
    strings = [""]

    def s(x):
        if x not in strings:
            strings.append(x)
        return strings.index(x)

    body = b""
    for t, u in sample_types:
        body += field_bytes(1, field_varint(1, s(t)) + field_varint(2, s(u)))
    funcs = {}
    for stack, values in samples:
        for name in stack:
            funcs.setdefault(name, len(funcs) + 1)
        locs = [funcs[n] for n in reversed(stack)]  # leaf first; location id == function id
        body += field_bytes(2, packed(1, locs) + packed(2, values))
    for name, fid in funcs.items():
        line = field_varint(1, fid + (1000 if bad_function else 0))
        body += field_bytes(4, field_varint(1, fid) + field_bytes(4, line))
        body += field_bytes(5, field_varint(1, fid) + field_varint(2, s(name)))
    if period_type:
        pt = field_varint(1, s(period_type[0])) + field_varint(2, s(period_type[1]))
    for x in strings:
        body += field_bytes(6, x.encode())
    if time_nanos:
        body += field_varint(9, time_nanos)
    if period_type:
        body += field_bytes(11, pt) + field_varint(12, period)
    return body


def multipart(parts, boundary="pfBoundary7MA4YWxk"):
    """parts: [(field name, filename, bytes)] as RFC 7578 form-data."""
    out = b""
    for name, filename, data in parts:
        out += b"--" + boundary.encode() + b"\r\n"
        out += ('Content-Disposition: form-data; name="%s"; filename="%s"\r\n'
                % (name, filename)).encode()
        out += b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n"
    out += b"--" + boundary.encode() + b"--\r\n"
    return out, "multipart/form-data; boundary=" + boundary


def children(node):
    return {c["name"]: c for c in node.get("children", [])}


class Pyroscope(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pf-pyro-")
        cls.c = Controller(cls.tmp, extra=["--max-message-bytes", "1048576"]).start()

    @classmethod
    def tearDownClass(cls):
        cls.c.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def ingest(self, query, body, token=None, headers=None, method="POST"):
        """Returns (status, parsed JSON or bytes)."""
        h = {"Authorization": "Bearer " + (token if token is not None else self.c.agent_token)}
        if token == "":
            h = {}
        h.update(headers or {})
        conn = http.client.HTTPConnection("127.0.0.1", self.c.port, timeout=20)
        try:
            conn.request(method, "/ingest?" + urllib.parse.urlencode(query), body=body,
                         headers=h)
            r = conn.getresponse()
            data = r.read()
        finally:
            conn.close()
        try:
            return r.status, json.loads(data) if data else None
        except ValueError:
            return r.status, data

    def get(self, path):
        st, body, _ = self.c.request("GET", path)
        self.assertEqual(st, 200, (path, body))
        return body

    def profiles(self, service):
        return self.get("/api/v1/profiles?service=%s&from=%d&to=%d"
                        % (service, T0_MS - 1000, T0_MS + 100000))["profiles"]

    def flame(self, service, extra=""):
        return self.get("/api/v1/flamegraph?service=%s&from=%d&to=%d%s"
                        % (service, T0_MS - 1000, T0_MS + 100000, extra))

    def expect_error(self, status, query, body, **kw):
        st, answer = self.ingest(query, body, **kw)
        self.assertEqual(st, status, answer)
        self.assertTrue(answer["error"]["message"], answer)
        return answer["error"]["message"]

    def test_folded(self):
        body = b"main;foo;bar 100\nmain;foo;baz 200\r\nmain;qux 50\n\nmain;foo;bar 1\n"
        st, answer = self.ingest({"name": "shop.cpu{env=staging, region = eu-1}",
                                  "from": T0, "until": T0 + 10, "sampleRate": 100,
                                  "spyName": "gospy", "units": "samples",
                                  "aggregationType": "sum"}, body)
        self.assertEqual(st, 200, answer)
        self.assertEqual((answer["stored"], answer["samples"]), (1, 351))
        [p] = self.profiles("shop")
        self.assertEqual((p["type"], p["samples"], p["start_ms"]), ("cpu", 351, T0_MS))
        fg = self.flame("shop")
        self.assertEqual(fg["value"], 351)
        main = children(fg)["main"]
        foo = children(main)["foo"]
        self.assertEqual((main["value"], foo["value"]), (351, 301))
        self.assertEqual({k: v["value"] for k, v in children(foo).items()},
                         {"bar": 101, "baz": 200})
        self.assertEqual(children(main)["qux"]["value"], 50)
        # the labels are resource attributes, the spy too
        vals = self.get("/api/v1/labels/region/values?from=%d&to=%d"
                        % (T0_MS - 1000, T0_MS + 100000))
        self.assertIn("eu-1", json.dumps(vals))
        vals = self.get("/api/v1/labels/pyroscope.spy/values?from=%d&to=%d"
                        % (T0_MS - 1000, T0_MS + 100000))
        self.assertIn("gospy", json.dumps(vals))

    def test_lines_default_cpu_and_gzip(self):
        body = b"a;b\n" * 7 + b"a;c\n" * 3 + b"a\n"
        st, answer = self.ingest({"name": "lineapp", "from": T0, "until": T0 + 10,
                                  "format": "lines"}, gzip.compress(body),
                                 headers={"Content-Encoding": "gzip"})
        self.assertEqual(st, 200, answer)
        [p] = self.profiles("lineapp")
        self.assertEqual((p["type"], p["samples"]), ("cpu", 11))
        a = children(self.flame("lineapp"))["a"]
        self.assertEqual((a["value"], children(a)["b"]["value"], children(a)["c"]["value"]),
                         (11, 7, 3))

    def test_wall_and_alloc_types(self):
        st, answer = self.ingest({"name": "walls.wall", "from": T0, "until": T0 + 10,
                                  "sampleRate": 50}, b"x;y 4\n")
        self.assertEqual(st, 200, answer)
        [p] = self.profiles("walls")
        self.assertEqual(p["type"], "wall")
        self.assertEqual(self.flame("walls", "&type=wall")["value"], 4 * 20000000)
        st, answer = self.ingest({"name": "allocs.alloc_space{}", "from": T0,
                                  "until": T0 + 10}, b"m;alloc 4096\n")
        self.assertEqual(st, 200, answer)
        [p] = self.profiles("allocs")
        self.assertEqual(p["type"], "alloc_space")

    def test_pprof_raw(self):
        prof = pprof([("alloc_objects", "count"), ("alloc_space", "bytes")],
                     [(["main", "work", "alloc"], [3, 300]), (["main", "other"], [1, 64])],
                     period_type=("space", "bytes"), period=524288,
                     time_nanos=(T0 + 1) * 10**9)
        st, answer = self.ingest({"name": "gosvc{pod=p-1}", "from": T0, "until": T0 + 10,
                                  "format": "pprof", "spyName": "gospy"}, gzip.compress(prof),
                                 headers={"Content-Type": "application/octet-stream"})
        self.assertEqual(st, 200, answer)
        [p] = self.profiles("gosvc")
        # no default_sample_type: shown as its last type in bytes, the other one beside it
        self.assertEqual(p["type"], "alloc_space")
        self.assertEqual(p["start_ms"], T0_MS + 1000)
        fg = self.flame("gosvc", "&type=alloc_objects")
        self.assertEqual((fg["value"], fg["unit"]), (4, "count"))
        work = children(children(fg)["main"])["work"]
        self.assertEqual(children(work)["alloc"]["value"], 3)
        fg = self.flame("gosvc", "&type=alloc_space")
        self.assertEqual((fg["value"], fg["unit"]), (364, "bytes"))
        work = children(children(fg)["main"])["work"]
        self.assertEqual(children(work)["alloc"]["value"], 300)
        # the downloaded pprof has both sample types and the same totals
        st, raw, _ = self.c.request("GET", "/api/v1/profiles/%d/pprof" % p["id"], raw=True)
        self.assertEqual(st, 200)
        self.assertIn(b"alloc_space", gzip.decompress(raw))

    def test_pprof_multipart_with_sample_type_config(self):
        prof = pprof([("cpu", "nanoseconds")], [(["main", "spin"], [5000000])],
                     period_type=("cpu", "nanoseconds"), period=10000000)
        config = json.dumps({"cpu": {"units": "samples", "aggregation": "sum",
                                     "display-name": "cpu_time", "sampled": True}}).encode()
        body, ctype = multipart([("profile", "profile.pprof", gzip.compress(prof)),
                                 ("sample_type_config", "sample_type_config.json", config)])
        # multipart without format=pprof is pprof (as Pyroscope reads it)
        st, answer = self.ingest({"name": "multi{team=core}", "from": T0, "until": T0 + 10},
                                 body, headers={"Content-Type": ctype})
        self.assertEqual(st, 200, answer)
        [p] = self.profiles("multi")
        self.assertEqual(p["type"], "cpu")  # a cpu period type stays cpu
        spin = children(children(self.flame("multi"))["main"])["spin"]
        self.assertEqual(spin["value"], 5000000)
        st, raw, _ = self.c.request("GET", "/api/v1/profiles/%d/pprof" % p["id"], raw=True)
        self.assertIn(b"cpu_time", gzip.decompress(raw))

    def test_empty_profile_is_a_success(self):
        st, answer = self.ingest({"name": "empty.cpu", "from": T0, "until": T0 + 1}, b"")
        self.assertEqual((st, answer["stored"]), (200, 0))
        st, answer = self.ingest({"name": "empty.cpu", "from": T0, "until": T0 + 1},
                                 b"a;b 0\n")
        self.assertEqual((st, answer["stored"]), (200, 0))

    def test_tokens(self):
        q = {"name": "tok.cpu", "from": T0, "until": T0 + 1}
        self.assertEqual(self.ingest(q, b"a 1\n", token="")[0], 401)
        self.assertEqual(self.ingest(q, b"a 1\n", token="pf_nope")[0], 401)
        self.assertEqual(self.ingest(q, b"a 1\n", token=self.c.admin_token)[0], 401)
        self.assertEqual(self.ingest(q, None, method="GET")[0], 405)
        # basic auth (the SDKs' basicAuthUser/basicAuthPassword): the password is the token
        basic = "Basic " + base64.b64encode(b"12345:" + self.c.agent_token.encode()).decode()
        self.assertEqual(self.ingest(q, b"a 1\n", headers={"Authorization": basic})[0], 200)
        basic = "Basic " + base64.b64encode(b"12345:pf_wrong").decode()
        self.assertEqual(self.ingest(q, b"a 1\n", headers={"Authorization": basic})[0], 401)

    def test_bad_queries(self):
        ok = {"from": T0, "until": T0 + 1}
        cases = [
            ({}, "name"),
            ({"name": ""}, "name"),
            ({"name": "a" * 1100}, "longer than 1024"),
            ({"name": "app.cpu{env}"}, "no '='"),
            ({"name": "app.cpu{bad key=1}"}, "label key"),
            ({"name": "app.cpu{env=1"}, "not closed"),
            ({"name": "app.cpu{env=1}x"}, "after"),
            ({"name": "app.cpu{" + ",".join("k%d=v" % i for i in range(70)) + "}"},
             "more than 64"),
            ({"name": "ap p.cpu"}, "character"),
            ({"name": "app.nosuchtype"}, "unknown profile type"),
            ({"name": "app.cpu", "sampleRate": "fast"}, "sampleRate"),
            ({"name": "app.cpu", "sampleRate": "0"}, "sampleRate"),
            ({"name": "app.cpu", "format": "jfr"}, "not supported"),
            ({"name": "app.cpu", "from": "yesterday"}, "unix time"),
            ({"name": "app.cpu", "from": T0 + 5, "until": T0}, "before"),
            ({"name": "app.cpu{env=\x01}"}, "UTF-8"),
        ]
        for q, want in cases:
            full = dict(ok)
            full.update(q)
            msg = self.expect_error(400, full, b"a;b 1\n")
            self.assertIn(want, msg, q)

    def test_query_too_long(self):
        # past what a request keeps of its query: 414, never a name cut short
        st, answer = self.ingest({"name": "a" * 2100}, b"a 1\n")
        self.assertEqual(st, 414, answer)
        self.assertIn("query", answer["error"]["message"])

    def test_bad_text_bodies(self):
        q = {"name": "badtext.cpu", "from": T0, "until": T0 + 1}
        for body, want in [(b"a;b\n", "no count"), (b"a;b x1\n", "not a number"),
                           (b"a;b 99999999999999999999\n", "not a number"),
                           (b"a 9223372036854775807\nb 9223372036854775807\n", "2^63"),
                           (b"\xff\xfe;x 1\n", "UTF-8"),
                           (b";".join(b"f%d" % i for i in range(5000)) + b" 1\n",
                            "frames")]:
            self.assertIn(want, self.expect_error(400 if want != "frames" else 413, q, body))
        self.assertEqual(self.profiles("badtext"), [])

    def test_bad_pprof(self):
        q = {"name": "badpprof", "from": T0, "until": T0 + 1, "format": "pprof"}
        good = pprof([("samples", "count")], [(["a", "b"], [1])])
        # truncated, gzip'd and not, and an out-of-range function id
        self.expect_error(400, q, good[:-3])
        self.expect_error(400, q, gzip.compress(good)[:-8])
        self.assertIn("pprof", self.expect_error(
            400, q, pprof([("samples", "count")], [(["a"], [1])], bad_function=True)))
        # a sample with more values than sample types
        self.expect_error(400, q, pprof([("samples", "count")], [(["a"], [1, 2])]))
        # a gzip bomb as the pprof itself (64 MiB of zeros, 64 KiB sent)
        bomb = gzip.compress(b"\0" * (64 << 20), 9)
        self.assertLess(len(bomb), 1 << 20)
        self.expect_error(413, q, bomb)
        # ... and as the Content-Encoding of the request
        self.expect_error(413, {"name": "bomb.cpu", "from": T0, "until": T0 + 1}, bomb,
                          headers={"Content-Encoding": "gzip"})
        # multipart: no profile part, the old cumulative prev_profile, a broken body
        body, ctype = multipart([("other", "x", good)])
        self.assertIn("'profile'", self.expect_error(400, q, body,
                                                     headers={"Content-Type": ctype}))
        body, ctype = multipart([("profile", "p", good), ("prev_profile", "p", good)])
        self.assertIn("prev_profile", self.expect_error(400, q, body,
                                                        headers={"Content-Type": ctype}))
        self.expect_error(400, q, body[:40], headers={"Content-Type": ctype})
        self.expect_error(400, q, body, headers={"Content-Type": "multipart/form-data"})
        body, ctype = multipart([("profile", "p", good), ("sample_type_config", "c", b"[1]")])
        self.assertIn("sample_type_config",
                      self.expect_error(400, q, body, headers={"Content-Type": ctype}))
        self.assertEqual(self.profiles("badpprof"), [])

    def test_body_over_limit(self):
        """The controller runs with --max-message-bytes 1 MiB: a larger Content-Length is
        answered 413 before a byte of the body is read."""
        with socket.create_connection(("127.0.0.1", self.c.port), timeout=10) as s:
            s.sendall(("POST /ingest?name=big.cpu HTTP/1.1\r\nHost: x\r\n"
                       "Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
                       % (self.c.agent_token, 2 << 20)).encode())
            head = s.recv(4096).decode("latin-1")
        self.assertTrue(head.startswith("HTTP/1.1 413"), head)


if __name__ == "__main__":
    unittest.main()


class AgentPyroscopeExporter(pfharness.IntegrationCase):
    """The agent's own pyroscope exporter (a pprof push per process) into this receiver:
    stored under the agent's uid, with the exporter's labels as attributes."""

    def test_agent_to_controller(self):
        from test_agent_metrics import HEAP_PPROF, PprofServer, heap_config
        pprof_srv = PprofServer(HEAP_PPROF)
        try:
            ctl = self.controller()
            ag = self.agent(ctl, "pyro", extra=["--no-sampler"])
            uid = ag.uid()
            cfg = heap_config(pprof_srv.port, [
                "    - {type: pyroscope, endpoint: \"http://127.0.0.1:%d\", auth: agent_token, "
                "timeout_seconds: 5}" % ctl.port])
            st, body, _ = ctl.put_config("default", cfg)
            self.assertEqual(st, 201, body)

            def stored():
                st, body, _ = ctl.request("GET", "/api/v1/profiles?limit=5")
                return st == 200 and body["count"] >= 1 and body

            body = pfharness.wait_until(stored, timeout=30, what="pyroscope pushes stored")
            p = body["profiles"][0]
            self.assertEqual((p["agent"], p["service"]), (uid, "unknown_service"))
            self.assertTrue(p["type"].startswith(("alloc", "inuse")), p)
            st, fg, _ = ctl.request("GET", "/api/v1/profiles/%d/flamegraph" % p["id"])
            self.assertGreater(fg["value"], 0)
        finally:
            pprof_srv.close()
