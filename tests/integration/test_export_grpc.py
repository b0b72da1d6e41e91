"""The agent's otlp_grpc exporter (agent/export/otlp_grpc.c), end to end: the real agent
(eBPF off: --no-sampler; a pprof target served by this test makes the profiles).

- Round trip agent -> controller: the controller's OTLP/gRPC receiver (--otlp-grpc-listen)
  stores the agent's profiles under the agent's uid (auth: agent_token in the authorization
  metadata).
- Against a ProfilesService server written here with Python's gRPC from Debian (raw bytes,
  no generated code): the configured headers arrive as metadata; UNAVAILABLE with a
  google.rpc.RetryInfo of 3 s in grpc-status-details-bin is retried with the same request
  after that delay (not dropped); RESOURCE_EXHAUSTED without RetryInfo is not sent again
  (failed_total); a partial success is counted (rejected_profiles_total).
"""
import os
import threading
import time
import unittest
from concurrent import futures

from pfharness import IntegrationCase, free_port, import_grpc, varint, wait_until
from test_agent_metrics import HEAP_PPROF, PprofServer, heap_config, parse_exposition, val, \
    http_get

grpc = import_grpc()

SERVICE = "opentelemetry.proto.collector.profiles.v1development.ProfilesService"


def ld(num, b):
    return varint((num << 3) | 2) + varint(len(b)) + b


def status_with_retry_info(code, seconds):
    """google.rpc.Status {code, message, details: [Any(RetryInfo{retry_delay {seconds}})]}."""
    retry_info = ld(1, varint(1 << 3) + varint(seconds))
    any_ = ld(1, b"type.googleapis.com/google.rpc.RetryInfo") + ld(2, retry_info)
    return varint(1 << 3) + varint(code) + ld(2, b"slow down") + ld(3, any_)


class ScriptedServer:
    """ProfilesService/Export answering from a script: a list of 'unavailable_retry',
    'exhausted', 'partial' or 'ok', the last repeated."""

    def __init__(self, script):
        self.script = list(script)
        self.calls = []
        self.lock = threading.Lock()
        outer = self

        def export(request, context):
            with outer.lock:
                step = outer.script.pop(0) if len(outer.script) > 1 else outer.script[0]
                outer.calls.append((dict(context.invocation_metadata()), request, step,
                                    time.monotonic()))
            if step == "unavailable_retry":
                context.set_trailing_metadata(
                    [("grpc-status-details-bin", status_with_retry_info(14, 3))])
                context.abort(grpc.StatusCode.UNAVAILABLE, "slow down")
            if step == "exhausted":
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "no room")
            if step == "partial":
                return ld(1, varint(1 << 3) + varint(2) + ld(2, b"two were odd"))
            return b""

        handler = grpc.method_handlers_generic_handler(
            SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(export)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                                  handlers=[handler])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def steps(self):
        with self.lock:
            return [c[2] for c in self.calls]

    def close(self):
        self.server.stop(0)


@unittest.skipUnless(grpc is not None, "python3-grpcio is not installed")
class ExportGrpc(IntegrationCase):
    def setUp(self):
        super().setUp()
        self.pprof = PprofServer(HEAP_PPROF)
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.close()
        self.pprof.close()
        super().tearDown()

    def metrics(self, port):
        try:
            st, _, body = http_get("http://127.0.0.1:%d/metrics" % port)
        except OSError:
            return None
        return parse_exposition(body)[1] if st == 200 else None

    def start(self, ctl_extra=()):
        ctl = self.controller(extra=list(ctl_extra))
        self.mport = free_port()
        ag = self.agent(ctl, "grpc", extra=["--no-sampler",
                                            "--metrics-listen", "127.0.0.1:%d" % self.mport])
        return ctl, ag, ag.uid()

    def apply(self, ctl, uid, exporter_lines):
        st, body, _ = ctl.put_config("default", heap_config(self.pprof.port, exporter_lines))
        self.assertEqual(st, 201, body)
        wait_until(lambda: (self.agent_json(ctl, uid) or {}).get("config", {}).get("status")
                   == "APPLIED", timeout=15, what="config APPLIED")

    def test_round_trip_to_the_controller(self):
        gport = free_port()
        ctl, ag, uid = self.start(["--otlp-grpc-listen", "127.0.0.1:%d" % gport])
        self.apply(ctl, uid, ["    - {type: otlp_grpc, endpoint: \"http://127.0.0.1:%d\", "
                              "auth: agent_token, timeout_seconds: 5}" % gport])

        def stored():
            st, body, _ = ctl.request("GET", "/api/v1/profiles?limit=5")
            return st == 200 and body["count"] >= 2 and body

        body = wait_until(stored, timeout=30, what="profiles stored through OTLP/gRPC")
        p = body["profiles"][0]
        self.assertEqual(p["agent"], uid)  # the agent's own credential named it
        self.assertTrue(p["type"].startswith(("alloc", "inuse")), p)
        st, fg, _ = ctl.request("GET", "/api/v1/profiles/%d/flamegraph" % p["id"])
        self.assertEqual(st, 200)
        self.assertGreater(fg["value"], 0)
        lab = {"exporter": "0", "type": "otlp_grpc"}
        s = wait_until(lambda: (lambda m: m if m and (val(
            m, "profleet_agent_exporter_confirmed_total", **lab) or 0) >= 2 else None)(
            self.metrics(self.mport)), timeout=20, what="confirmed exports")
        self.assertEqual(val(s, "profleet_agent_exporter_failed_total", **lab), 0)

    def test_retry_info_and_refusals(self):
        # three deliveries first: the agent settles on its config (and credential) meanwhile
        srv = ScriptedServer(["ok"] * 3 + ["unavailable_retry", "partial", "exhausted", "ok"])
        self.servers.append(srv)
        ctl, ag, uid = self.start()
        self.apply(ctl, uid, ["    - {type: otlp_grpc, endpoint: \"http://127.0.0.1:%d\", "
                              "headers: {X-Tenant: grpc-test}, compression: gzip, "
                              "timeout_seconds: 5}" % srv.port])
        wait_until(lambda: len(srv.steps()) >= 8, timeout=60, what="eight export calls")
        md, request, _, _ = srv.calls[0]
        self.assertEqual(md.get("x-tenant"), "grpc-test")
        self.assertEqual(request[:1], b"\x0a")  # resource_profiles, the request intact
        steps = srv.steps()
        # UNAVAILABLE with RetryInfo(3 s): the same request again, after the delay (the
        # backoff alone would have retried within 1 s)
        i = steps.index("unavailable_retry")
        self.assertEqual(srv.calls[i + 1][1], srv.calls[i][1])
        self.assertGreaterEqual(srv.calls[i + 1][3] - srv.calls[i][3], 2.5)
        # RESOURCE_EXHAUSTED without RetryInfo: refused, not sent again
        k = steps.index("exhausted")
        self.assertTrue(all(c[1] != srv.calls[k][1] for c in srv.calls[k + 1:]))
        lab = {"exporter": "0", "type": "otlp_grpc"}

        def figures():
            m = self.metrics(self.mport)
            return m if m and (val(m, "profleet_agent_exporter_failed_total", **lab) or 0) >= 1 \
                and (val(m, "profleet_agent_exporter_partial_successes_total", **lab) or 0) >= 1 \
                else None

        s = wait_until(figures, timeout=30, what="a failed export and a partial success")
        self.assertGreaterEqual(val(s, "profleet_agent_exporter_rejected_profiles_total", **lab),
                                2)
        self.assertEqual(val(s, "profleet_agent_exporter_dropped_total", **lab), 0)

if __name__ == "__main__":
    unittest.main()
