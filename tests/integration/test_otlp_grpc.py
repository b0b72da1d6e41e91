"""The controller's OTLP/gRPC profiles receiver (--otlp-grpc-listen) driven by Python's gRPC
from Debian (python3-grpcio) as an independent client: the unary method
opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export called with raw
bytes that `protoc --encode` made from the upstream schema (not our encoder), answers read
with `protoc --decode`. Stored profiles are read back through the REST API. Bad input:
missing and wrong tokens, garbage, an unknown method, an oversize message and a gzip bomb
(grpc-encoding gzip), partial success for a profile without samples, idempotent retries.
"""
import gzip
import os
import sqlite3
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request

import pfharness
from pfharness import Controller, free_port, import_grpc, pb_fields
from test_export_tls import OPENSSL, make_ca, make_server_cert
from test_profstore import EMPTY_PROFILE, REF, SERVICE_PROTO, START_MS, START_NS, encode, \
    have_protoc

grpc = import_grpc()

METHOD = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
RESPONSE = "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceResponse"


def decode_response(raw):
    r = subprocess.run(["protoc", "-I" + REF, "--decode=" + RESPONSE, SERVICE_PROTO],
                       input=raw, capture_output=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("protoc --decode failed: " + r.stderr.decode())
    return r.stdout.decode()


@unittest.skipUnless(grpc is not None, "python3-grpcio is not installed")
@unittest.skipUnless(have_protoc(), "protoc or the reference schemas are missing")
class OtlpGrpc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pf-grpc-")
        cls.gport = free_port()
        cls.c = Controller(cls.tmp, extra=["--otlp-grpc-listen", "127.0.0.1:%d" % cls.gport,
                                           "--max-message-bytes", "1048576"]).start()
        cls.channel = grpc.insecure_channel(
            "127.0.0.1:%d" % cls.gport,
            options=[("grpc.max_send_message_length", 128 << 20)])
        cls.export = cls.channel.unary_unary(METHOD)  # bytes in, bytes out

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.c.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def call(self, body, token=None, **kw):
        md = [] if token == "" else [("authorization", "Bearer " + (token or self.c.agent_token))]
        return self.export(body, metadata=md, timeout=20, **kw)

    def code_of(self, body, **kw):
        with self.assertRaises(grpc.RpcError) as cm:
            self.call(body, **kw)
        return cm.exception.code(), cm.exception.details()

    def get(self, path):
        st, body, _ = self.c.request("GET", path)
        self.assertEqual(st, 200, (path, body))
        return body

    def count(self, service):
        return self.get("/api/v1/profiles?service=%s&from=%d" % (service, START_MS - 1000))[
            "count"]

    def test_export_and_query(self):
        body = encode(service="grpc-svc", profile_id="grpc-prof-000001")
        self.assertEqual(self.call(body), b"")  # an empty response: everything stored
        self.assertEqual(self.call(body), b"")  # a retry: stored once
        self.assertEqual(self.count("grpc-svc"), 1)
        fg = self.get("/api/v1/flamegraph?service=grpc-svc&from=%d&to=%d"
                      % (START_MS - 1000, START_MS + 20000))
        self.assertEqual(fg["value"], 100)
        # gRPC's own compression is undone before the store sees the message
        body = encode(service="grpc-svc", start=START_NS + 10 * 10**9)
        self.assertEqual(self.call(body, compression=grpc.Compression.Gzip), b"")
        self.assertEqual(self.count("grpc-svc"), 2)

    def test_partial_success(self):
        resp = self.call(encode(service="grpc-partial") + EMPTY_PROFILE)
        text = decode_response(resp)
        self.assertIn("rejected_profiles: 1", text)
        self.assertIn("no samples", text)
        # (one window of both: its range starts at the empty profile's time, 0)
        self.assertEqual(self.get("/api/v1/profiles?service=grpc-partial&from=0")["count"], 1)

    def test_tokens(self):
        body = encode(service="grpc-tok")
        for tok in ("", "pf_nope", self.c.admin_token):
            code, details = self.code_of(body, token=tok)
            self.assertEqual(code, grpc.StatusCode.UNAUTHENTICATED, (tok, details))
        self.assertEqual(self.count("grpc-tok"), 0)

    def test_bad_input(self):
        code, details = self.code_of(b"\xff\xff\xff garbage")
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("undecodable", details)
        # over --max-message-bytes: refused by gRPC itself
        code, _ = self.code_of(b"\x0a" + b"\x00" * (2 << 20))
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        # a gzip bomb: 64 MiB of zeros sent as ~64 KiB with grpc-encoding gzip
        code, _ = self.code_of(b"\x00" * (64 << 20), compression=grpc.Compression.Gzip)
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        # another method of the listener
        other = self.channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        with self.assertRaises(grpc.RpcError) as cm:
            other(b"", metadata=[("authorization", "Bearer " + self.c.agent_token)],
                  timeout=10)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)

    def test_store_busy_says_when_to_retry(self):
        """Another process holds the store's write lock past the busy timeout: UNAVAILABLE with
        a google.rpc.RetryInfo (1 s) in grpc-status-details-bin, read field by field as the rich
        error model's schema lays it out; once the lock goes the same export is stored."""
        db = sqlite3.connect(os.path.join(self.c.data_dir, "profleet.db"), timeout=30,
                             isolation_level=None)
        body = encode(service="grpc-busy", profile_id="grpc-busy-00001")
        try:
            db.execute("BEGIN IMMEDIATE")
            with self.assertRaises(grpc.RpcError) as cm:
                self.call(body)
        finally:
            db.execute("ROLLBACK")
            db.close()
        err = cm.exception
        self.assertEqual(err.code(), grpc.StatusCode.UNAVAILABLE, err.details())
        rich = dict(err.trailing_metadata() or ()).get("grpc-status-details-bin")
        self.assertIsNotNone(rich, err.trailing_metadata())
        status = pb_fields(rich)
        self.assertEqual(status[1], [14])  # the same code as grpc-status
        self.assertEqual(status[2][0].decode(), err.details())
        anys = [pb_fields(a) for a in status[3]]
        retry = [a for a in anys if a[1] == [b"type.googleapis.com/google.rpc.RetryInfo"]]
        self.assertEqual(len(retry), 1, anys)
        delay = pb_fields(pb_fields(retry[0][2][0])[1][0])
        self.assertEqual((delay.get(1, [0])[0], delay.get(2, [0])[0]), (1, 0))
        self.assertEqual(self.call(body), b"")
        self.assertEqual(self.count("grpc-busy"), 1)

    def test_loop_not_blocked(self):
        """Exports on the gRPC threads while the HTTP loop answers /healthz."""
        stop = time.monotonic() + 3
        errors = []

        def send():
            i = 0
            while time.monotonic() < stop:
                try:
                    self.call(encode(service="grpc-load", start=START_NS + i * 10**9))
                except grpc.RpcError as e:
                    errors.append(e)
                i += 1

        ts = [threading.Thread(target=send) for _ in range(4)]
        for t in ts:
            t.start()
        worst = 0.0
        while time.monotonic() < stop:
            t0 = time.monotonic()
            with urllib.request.urlopen(self.c.base + "/healthz", timeout=5) as r:
                self.assertEqual(r.status, 200)
            worst = max(worst, time.monotonic() - t0)
            time.sleep(0.05)
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        self.assertLess(worst, 1.0)
        self.assertGreater(self.count("grpc-load"), 4)



@unittest.skipUnless(grpc is not None, "python3-grpcio is not installed")
@unittest.skipUnless(have_protoc() and OPENSSL, "needs protoc, the schemas and openssl")
class OtlpGrpcTls(unittest.TestCase):
    """With --tls-cert/--tls-key the gRPC listener speaks TLS with the same certificate."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pf-grpc-tls-")
        make_ca(self.tmp, "ca")
        crt, key = make_server_cert(self.tmp, "server", "ca", "IP:127.0.0.1")
        self.ca = os.path.join(self.tmp, "ca.pem")
        self.gport = free_port()
        self.c = Controller(self.tmp, tls_ca=self.ca,
                            extra=["--tls-cert", crt, "--tls-key", key, "--otlp-grpc-listen",
                                   "127.0.0.1:%d" % self.gport]).start()

    def tearDown(self):
        self.c.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_tls(self):
        with open(self.ca, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        md = [("authorization", "Bearer " + self.c.agent_token)]
        with grpc.secure_channel("127.0.0.1:%d" % self.gport, creds) as ch:
            export = ch.unary_unary(METHOD)
            self.assertEqual(export(encode(service="grpc-tls"), metadata=md, timeout=20), b"")
        st, body, _ = self.c.request("GET", "/api/v1/profiles?service=grpc-tls&from=0")
        self.assertEqual((st, body["count"]), (200, 1))
        # plain text to the TLS listener does not get through
        with grpc.insecure_channel("127.0.0.1:%d" % self.gport) as ch:
            with self.assertRaises(grpc.RpcError) as cm:
                ch.unary_unary(METHOD)(encode(service="grpc-tls"), metadata=md, timeout=5)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)


if __name__ == "__main__":
    unittest.main()
