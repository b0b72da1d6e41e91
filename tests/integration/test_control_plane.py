"""Control plane end to end: the real profleet-controller and profleet-agent on loopback.

Covers: the agent appears healthy, a config push is APPLIED within
2 s, a config that fails at apply time is FAILED with its key path while the old config stays
effective, a controller restart is followed by a reconnect with full state, a wrong token gets
401, and oversized or garbage input is rejected while other agents keep working.
"""
import gzip
import os
import signal
import subprocess
import time
import unittest

from pfharness import (LOAD_BIN, SHARED_DIR, IntegrationCase, free_port, plain_http_reply,
                       wait_until, ws_handshake_status)

CONFIG_A = "profiling:\n  sampling:\n    frequency_hz: 49\n"
CONFIG_B = "profiling:\n  sampling:\n    frequency_hz: 19\n    duration_seconds: 5\n"


class ControlPlane(IntegrationCase):

    def wait_agent(self, ctl, uid, pred, timeout=10, what="agent state"):
        def check():
            a = self.agent_json(ctl, uid)
            return a if a and pred(a) else None
        return wait_until(check, timeout=timeout, what=what)

    def test_agent_appears_healthy_with_labels(self):
        ctl = self.controller()
        ag = self.agent(ctl, "a1", labels=["env=prod", "team=core"])
        uid = ag.uid()
        # settled: an enrolling agent reconnects once to take up the credential it was offered
        a = self.wait_agent(ctl, uid, lambda a: a["connected"] and a["healthy"] and
                            a.get("credential") == "own",
                            what="agent connected on its own credential and healthy")
        attrs = a["attributes"]
        self.assertEqual(attrs["service.name"], "profleet-agent")
        self.assertEqual(attrs["service.instance.id"], uid)
        self.assertEqual(attrs["env"], "prod")
        self.assertIn("host.name", attrs)
        self.assertIn("os.type", attrs)
        self.assertEqual(a["config"]["status"], "UNSET")
        self.assertTrue(a["health"]["healthy"])
        self.assertIn("components", a["health"])
        agents = ctl.agents("env=prod,team in (core,infra)")
        self.assertEqual([x["instance_uid"] for x in agents], [uid])
        self.assertEqual(ctl.agents("env!=prod"), [])
        s = ctl.summary()
        self.assertEqual((s["agents"], s["connected"], s["healthy"]), (1, 1, 1))

    def test_config_push_applied_within_2s(self):
        ctl = self.controller()
        ag = self.agent(ctl, "a1")
        uid = ag.uid()
        self.wait_agent(ctl, uid, lambda a: a["connected"], what="agent connected")
        t0 = time.monotonic()
        st, body, _ = ctl.put_config("default", CONFIG_A)
        self.assertEqual(st, 201, body)
        a = self.wait_agent(ctl, uid, lambda a: a["config"]["status"] == "APPLIED", timeout=2.0,
                            what="APPLIED within 2 s")
        elapsed = time.monotonic() - t0
        self.assertLess(elapsed, 2.0)
        self.assertEqual(a["config"]["name"], "default")
        self.assertEqual(a["config"]["hash"], body["hash"])
        self.assertIn("frequency_hz: 49", a["config"]["effective"])
        # A second version goes out the same way.
        st, body2, _ = ctl.put_config("default", CONFIG_B)
        self.assertEqual(st, 201)
        a = self.wait_agent(ctl, uid, lambda a: a["config"]["status"] == "APPLIED" and
                            a["config"]["hash"] == body2["hash"], timeout=2.0,
                            what="second version APPLIED")
        self.assertIn("frequency_hz: 19", a["config"]["effective"])
        # An assignment moves the agent to another config.
        st, _, _ = ctl.put_config("prod", CONFIG_A)
        self.assertEqual(st, 201)
        st, body, _ = ctl.request("PUT", "/api/v1/assignments/prod",
                                  '{"selector":"service.name=profleet-agent","config":"prod",'
                                  '"priority":10}')
        self.assertEqual(st, 200, body)
        self.assertEqual(body["pushed"], 1)
        self.wait_agent(ctl, uid, lambda a: a["config"]["name"] == "prod" and
                        a["config"]["status"] == "APPLIED", timeout=2.0,
                        what="assignment applied")

    def test_apply_time_failure_keeps_old_config(self):
        ctl = self.controller()
        ag = self.agent(ctl, "a1")
        uid = ag.uid()
        st, good, _ = ctl.put_config("default", CONFIG_A)
        self.assertEqual(st, 201)
        a = self.wait_agent(ctl, uid, lambda a: a["config"]["status"] == "APPLIED",
                            what="good config APPLIED")
        effective_before = a["config"]["effective_hash"]
        # Valid for the controller's schema, but the agent cannot create the directory.
        bad = ("profiling:\n  sampling:\n    frequency_hz: 7\n  exporters:\n"
               "    - type: file\n      path: /proc/profleet-cannot-exist/out\n")
        st, body, _ = ctl.put_config("default", bad)
        self.assertEqual(st, 201, body)
        a = self.wait_agent(ctl, uid, lambda a: a["config"]["status"] == "FAILED",
                            what="FAILED status")
        self.assertIn("profiling.exporters[0].path", a["config"]["error"])
        self.assertEqual(a["config"]["effective_hash"], effective_before)
        self.assertNotIn("frequency_hz: 7", a["config"]["effective"])
        self.assertIn("frequency_hz: 49", a["config"]["effective"])
        self.assertFalse(a["health"]["components"]["config"]["healthy"])
        s = ctl.summary()
        self.assertEqual(s["config_status"]["FAILED"], 1)
        # The agent persisted the last good config: restarting it offline keeps it.
        ctl.stop()
        ag.stop()
        with open(os.path.join(ag.state_dir, "remote_config")) as f:
            saved = f.read()
        self.assertIn("frequency_hz: 49", saved)

    def test_controller_validation_rejects_bad_config(self):
        ctl = self.controller()
        st, body, _ = ctl.put_config("default", "profiling:\n  sampling:\n    frequency_hz: 0\n")
        self.assertEqual(st, 400)
        self.assertEqual(body["error"]["code"], "invalid_config")
        self.assertEqual(body["error"]["path"], "profiling.sampling.frequency_hz")
        st, body, _ = ctl.request("GET", "/api/v1/configs/default")
        self.assertEqual(st, 404)

    def test_controller_restart_agent_reconnects_full_state(self):
        ctl = self.controller()
        ag = self.agent(ctl, "a1", labels=["env=restart"])
        uid = ag.uid()
        self.wait_agent(ctl, uid, lambda a: a["connected"], what="connected")
        st, _, _ = ctl.put_config("default", CONFIG_A)
        self.wait_agent(ctl, uid, lambda a: a["config"]["status"] == "APPLIED", what="APPLIED")
        ctl.stop()
        # Plain restart: the agent is known from the store at once and reconnects.
        ctl.start()
        a = self.agent_json(ctl, uid)
        self.assertIsNotNone(a)
        self.wait_agent(ctl, uid, lambda a: a["connected"] and a["healthy"], timeout=15,
                        what="reconnect after controller restart")
        # Restart with the agent rows gone: everything the API shows now must come from the
        # agent's own full report on the new connection.
        ctl.stop()
        db = os.path.join(ctl.data_dir, "profleet.db")
        subprocess.run(["sqlite3", db, "DELETE FROM agents;"], check=True, timeout=30)
        ctl.start()
        # (The agent may be back before the first query: either way, what the API shows now
        # can only come from its report on the new connection.)
        a = self.wait_agent(ctl, uid, lambda a: a["connected"] and a["healthy"], timeout=15,
                            what="reconnect with full state")
        self.assertEqual(a["attributes"]["env"], "restart")
        self.assertEqual(a["config"]["status"], "APPLIED")
        self.assertIsNotNone(a["config"]["effective_hash"])
        self.assertIn("config", a["health"]["components"])
        self.assertIn("opamp: connected", ag.proc.output())

    def test_wrong_token_401(self):
        ctl = self.controller()
        status, head = ws_handshake_status(ctl.port, token="wrong")
        self.assertEqual(status, 401, head)
        status, _ = ws_handshake_status(ctl.port, token=None)
        self.assertEqual(status, 401)
        status, _ = ws_handshake_status(ctl.port, token=ctl.admin_token)
        self.assertEqual(status, 401)  # an admin token is not an agent token
        status, _ = ws_handshake_status(ctl.port, path="/elsewhere", token=ctl.agent_token)
        self.assertEqual(status, 404)
        status, _ = ws_handshake_status(ctl.port, token=ctl.agent_token)
        self.assertEqual(status, 101)
        bad = os.path.join(self.workdir, "bad.token")
        with open(bad, "w") as f:
            f.write("pf_not_a_real_token\n")
        ag = self.agent(ctl, "bad", token_file=bad)
        wait_until(lambda: "token rejected" in ag.proc.output(),
                   timeout=10, what="agent logs the rejected token")
        self.assertEqual(ctl.summary()["agents"], 0)

    def test_plain_http_transport(self):
        if not SHARED_DIR or not os.path.isdir(os.path.join(SHARED_DIR, "reference", "proto")):
            self.skipTest("shared/reference/proto not found; needs protoc and the upstream schema")
        ctl = self.controller()
        ref = os.path.join(SHARED_DIR, "reference", "proto")
        uid = "0190f1f2a3b47c8d9e0f112233445566"
        text = ('instance_uid: "%s" sequence_num: 0 capabilities: 1 '
                'agent_description { identifying_attributes { key: "service.name" '
                'value { string_value: "http-agent" } } }' %
                "".join("\\x" + uid[i:i + 2] for i in range(0, 32, 2)))
        msg = subprocess.run(["protoc", "-I", ref, "--encode=opamp.proto.v1.AgentToServer",
                              "opamp/v1/opamp.proto"], input=text.encode(),
                             capture_output=True, check=True).stdout
        hdr = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip",
               "Accept-Encoding": "gzip"}
        st, body, rh = ctl.request("POST", "/v1/opamp", gzip.compress(msg),
                                   token=ctl.agent_token, headers=hdr, raw=True)
        self.assertEqual(st, 200)
        self.assertEqual(rh.get("content-encoding"), "gzip")
        out = subprocess.run(["protoc", "-I", ref, "--decode=opamp.proto.v1.ServerToAgent",
                              "opamp/v1/opamp.proto"], input=gzip.decompress(body),
                             capture_output=True, check=True).stdout.decode()
        self.assertIn("capabilities:", out)
        self.assertIn("instance_uid:", out)
        agents = ctl.agents("service.name=http-agent")
        self.assertEqual(len(agents), 1)
        self.assertEqual(agents[0]["transport"], "http")
        # Wrong token, oversize, undecodable.
        st, _, _ = ctl.request("POST", "/v1/opamp", msg, token="nope",
                               headers={"Content-Type": "application/x-protobuf"}, raw=True)
        self.assertEqual(st, 401)
        st, body, _ = ctl.request("POST", "/v1/opamp", b"\xff\xff\xff\xff\x0f",
                                  token=ctl.agent_token,
                                  headers={"Content-Type": "application/x-protobuf"}, raw=True)
        self.assertEqual(st, 200)
        out = subprocess.run(["protoc", "-I", ref, "--decode=opamp.proto.v1.ServerToAgent",
                              "opamp/v1/opamp.proto"], input=body, capture_output=True,
                             check=True).stdout.decode()
        self.assertIn("BadRequest", out)


class Tls(IntegrationCase):
    """TLS on the one listener: the agent connects over wss:// and trusts the test CA."""

    def make_cert(self):
        key = os.path.join(self.workdir, "server.key")
        crt = os.path.join(self.workdir, "server.crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", key, "-out", crt], check=True, capture_output=True,
                       timeout=60)
        return crt, key

    def test_wss_agent(self):
        crt, key = self.make_cert()
        ctl = self.controller(extra=["--tls-cert", crt, "--tls-key", key], tls_ca=crt)
        ag = self.agent(ctl, "tls", server="wss://127.0.0.1:%d/v1/opamp" % ctl.port,
                        extra=["--ca-file", crt])
        uid = ag.uid()
        wait_until(lambda: (self.agent_json(ctl, uid) or {}).get("connected"), timeout=10,
                   what="agent connected over wss")
        # Plain HTTP on the TLS port gets no HTTP answer.
        data = plain_http_reply(ctl.port)
        self.assertFalse(data.startswith(b"HTTP/"), data)

    def test_agent_rejects_untrusted_certificate(self):
        crt, key = self.make_cert()
        ctl = self.controller(extra=["--tls-cert", crt, "--tls-key", key], tls_ca=crt)
        ag = self.agent(ctl, "untrusted", server="wss://127.0.0.1:%d/v1/opamp" % ctl.port)
        wait_until(lambda: "cannot connect" in ag.proc.output(), timeout=10,
                   what="agent refuses the self-signed certificate")
        self.assertEqual(ctl.summary()["agents"], 0)


class Limits(IntegrationCase):
    """Oversized and garbage input are rejected while other agents keep working."""

    def setUp(self):
        super().setUp()
        if not LOAD_BIN or not os.access(LOAD_BIN, os.X_OK):
            self.fail("PF_LOAD_BIN is not set to the opamp-load binary")

    def load(self, ctl, *args):
        return subprocess.run([LOAD_BIN, "--port", str(ctl.port), "--data-dir",
                               ctl.data_dir] + list(args), capture_output=True,
                              timeout=60, text=True)

    def test_garbage_and_oversize_do_not_hurt_others(self):
        ctl = self.controller(extra=["--max-message-bytes", "65536"])
        ag = self.agent(ctl, "steady")
        uid = ag.uid()
        self.wait_agent_connected(ctl, uid)
        r = self.load(ctl, "--mode", "garbage")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = self.load(ctl, "--mode", "oversize", "--bytes", "200000")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # HTTP transport: 413 before reading the body.
        st, _, _ = ctl.request("POST", "/v1/opamp", b"\0" * 70000, token=ctl.agent_token,
                               headers={"Content-Type": "application/x-protobuf"}, raw=True)
        self.assertEqual(st, 413)
        # The steady agent still gets and applies configs.
        st, body, _ = ctl.put_config("default", CONFIG_A)
        self.assertEqual(st, 201)
        wait_until(lambda: (self.agent_json(ctl, uid) or {}).get("config", {}).get("status") ==
                   "APPLIED", timeout=2.0, what="steady agent APPLIED after abuse")
        self.assertTrue(self.agent_json(ctl, uid)["healthy"])
        st, metrics, _ = ctl.request("GET", "/metrics", raw=True, token=None)
        m = metrics.decode()
        self.assertIn("profleet_opamp_bad_messages_total", m)
        self.assertNotIn("profleet_opamp_oversize_rejected_total 0\n", m)

    def test_sequence_gap_asks_full_state(self):
        ctl = self.controller()
        r = self.load(ctl, "--mode", "seqgap")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def wait_agent_connected(self, ctl, uid):
        wait_until(lambda: (self.agent_json(ctl, uid) or {}).get("connected"), timeout=10,
                   what="agent connected")


if __name__ == "__main__":
    unittest.main(verbosity=2)
