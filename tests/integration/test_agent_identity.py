"""Each agent its own identity, with the real controller and real agents on loopback.

- An agent that connects with the shared enrollment token is offered a credential of its own
  over OpAMP (ConnectionSettingsOffers.opamp.headers), verifies it by connecting with it,
  keeps it in its state directory and uses it after a restart; the API says "own".
- Revoking one agent's credential closes that agent's connection and refuses its uploads and
  reconnections; another agent is untouched.
- The OTLP receiver attributes an upload to its credential's agent and refuses (403) one that
  names another agent (profleet.agent.uid) or another agent's capture (profleet.capture.id),
  and a shared token naming an agent that has its own credential.
- The enrollment token can be replaced (a new agent token, the old one revoked) while the
  enrolled agents stay connected; a new agent enrolls with the new one.
- An agent that does not advertise AcceptsOpAMPConnectionSettings (as opamp-go's and the
  Collector's do not) is offered nothing and keeps working with the enrollment token.
- A rotation offers a new credential on the live connection; the old one works until the agent
  has connected with the new one, and is refused afterwards.
OpAMP messages of the hand-written clients are made with `protoc --encode` from the upstream
schema and replies read with `protoc --decode`, not by our codec. Every wait has a deadline.
"""
import json
import os
import shutil
import socket
import subprocess
import time
import unittest
import uuid

import pfharness
from pfharness import IntegrationCase, wait_until
from test_conn_limits import ws_frame
from test_tokens import ws_open

REF = os.path.join(pfharness.SHARED_DIR, "reference", "proto")
OPAMP_PROTO = "opamp/v1/opamp.proto"
PROFILES_PROTO = "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"
PROFILES_REQ = "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest"
ACCEPTS_OPAMP_SETTINGS = 0x100

PROFILE = """
resource_profiles {
  resource {
    attributes { key: "service.name" value { string_value: "spoof" } }
    attributes { key: "process.pid" value { int_value: 4242 } }
    %(attrs)s
  }
  scope_profiles {
    profiles {
      sample_type { type_strindex: 1 unit_strindex: 2 }
      period_type { type_strindex: 3 unit_strindex: 4 }
      period: 10101010
      time_unix_nano: 1700000000000000000
      duration_nano: 10000000000
      profile_id: "%(pid)s"
      samples { stack_index: 1 values: 7 }
    }
  }
}
dictionary {
  mapping_table {}
  location_table {}
  location_table { address: 4100 lines { function_index: 1 } }
  function_table {}
  function_table { name_strindex: 5 }
  string_table: ""
  string_table: "samples"
  string_table: "count"
  string_table: "cpu"
  string_table: "nanoseconds"
  string_table: "main"
  attribute_table {}
  stack_table {}
  stack_table { location_indices: [1] }
}
"""


def protoc(mode, message, proto, data):
    if not shutil.which("protoc"):
        raise unittest.SkipTest("protoc is not installed")
    r = subprocess.run(["protoc", "-I" + REF, "--%s=%s" % (mode, message), proto], input=data,
                       capture_output=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("protoc --%s failed: %s" % (mode, r.stderr.decode()))
    return r.stdout


def profile(agent=None, capture=None):
    """One OTLP profile naming agent / capture (resource attributes) when given."""
    attrs = []
    if agent:
        attrs.append('attributes { key: "profleet.agent.uid" value { string_value: "%s" } }'
                     % agent)
    if capture:
        attrs.append('attributes { key: "profleet.capture.id" value { string_value: "%s" } }'
                     % capture)
    text = PROFILE % {"attrs": "\n    ".join(attrs), "pid": os.urandom(8).hex()}
    return protoc("encode", PROFILES_REQ, PROFILES_PROTO, text.encode())


def a2s(uid, caps, seq=0, name="opamp-go-style"):
    """AgentToServer, as an opamp-go agent's first message: uid, description, capabilities."""
    text = ('instance_uid: "%s" sequence_num: %d capabilities: %d agent_description { '
            'identifying_attributes { key: "service.name" value { string_value: "%s" } } }'
            % ("".join("\\%03o" % b for b in uid), seq, caps, name))
    return protoc("encode", "opamp.proto.v1.AgentToServer", OPAMP_PROTO, text.encode())


def ws_read(s, timeout=10.0):
    """One unmasked binary message from the server, without its OpAMP varint-0 header."""
    s.settimeout(timeout)
    buf = b""

    def need(n):
        nonlocal buf
        while len(buf) < n:
            chunk = s.recv(65536)
            if not chunk:
                raise AssertionError("connection closed")
            buf += chunk
    while True:
        need(2)
        n, off = buf[1] & 0x7F, 2
        if n == 126:
            need(4)
            n, off = int.from_bytes(buf[2:4], "big"), 4
        elif n == 127:
            need(10)
            n, off = int.from_bytes(buf[2:10], "big"), 10
        need(off + n)
        op, payload, buf = buf[0] & 0x0F, buf[off:off + n], buf[off + n:]
        if op == 2:
            assert payload[:1] == b"\x00", payload[:8]
            return payload[1:]


def s2a_text(data):
    return protoc("decode", "opamp.proto.v1.ServerToAgent", OPAMP_PROTO, data).decode()


class IdentityCase(IntegrationCase):
    def start_agent(self, ctl, name, token_file=None):
        kw = {"labels": ["who=" + name], "extra": ["--no-sampler"]}
        if token_file:
            kw["token_file"] = token_file
        return self.agent(ctl, name, **kw)

    def wait_own(self, ctl, agent):
        uid = agent.uid()
        path = os.path.join(agent.state_dir, "credential")

        def own():
            j = self.agent_json(ctl, uid)
            return j and j["connected"] and j.get("credential") == "own" and \
                os.path.exists(path) and j
        wait_until(own, timeout=20, what="agent %s on its own credential" % agent.name)
        return uid, self.credential(agent)

    def credential(self, agent):
        lines = pfharness.read_text(os.path.join(agent.state_dir, "credential")).splitlines()
        self.assertTrue(lines[0].startswith("# profleet-credential hash="), lines[0])
        return lines[1]

    def upload(self, ctl, token, body):
        st, payload, _ = ctl.request("POST", "/v1development/profiles", body, token=token,
                                     headers={"Content-Type": "application/x-protobuf"},
                                     raw=True)
        return st, payload

    def profiles_of(self, ctl, uid):
        st, body, _ = ctl.request("GET", "/api/v1/profiles?agent=" + uid)
        self.assertEqual(st, 200, body)
        return body["profiles"]

    def connected(self, ctl, uid):
        j = self.agent_json(ctl, uid)
        return bool(j and j["connected"])


class EnrollmentTest(IdentityCase):
    def test_enrollment_own_credential_restart_reuses_it(self):
        ctl = self.controller()
        a = self.start_agent(ctl, "a")
        uid, token = self.wait_own(ctl, a)
        self.assertNotEqual(token, ctl.agent_token)
        mode = os.stat(os.path.join(a.state_dir, "credential")).st_mode & 0o777
        self.assertEqual(mode, 0o600)
        # the credential is an agent token of its own: uploads with it are this agent's
        st, payload = self.upload(ctl, token, profile())
        self.assertEqual(st, 200, payload)
        wait_until(lambda: self.profiles_of(ctl, uid), timeout=10,
                   what="the upload attributed to the credential's agent")
        # not listed with the API tokens, and not the enrollment token
        st, body, _ = ctl.request("GET", "/api/v1/tokens")
        self.assertEqual(st, 200)
        self.assertFalse([t for t in body["tokens"] if t["name"].startswith("agent:")], body)
        a.stop()
        wait_until(lambda: not self.connected(ctl, uid), timeout=10, what="agent gone")
        a.start()
        uid2, token2 = self.wait_own(ctl, a)
        self.assertEqual((uid2, token2), (uid, token))
        log = pfharness.read_text(os.path.join(self.workdir, "agent-a.log"))
        self.assertIn("using the agent's own credential from the state directory", log)
        self.assertEqual(log.count("verified and persisted"), 1, "offered again after restart")

    def test_agent_without_the_capability_keeps_the_enrollment_token(self):
        ctl = self.controller()
        uid = uuid.uuid4().bytes
        st, ws = ws_open(ctl.port, ctl.agent_token)
        self.assertEqual(st, 101)
        self.addCleanup(ws.close)
        # ReportsStatus | AcceptsRemoteConfig | ReportsEffectiveConfig | ReportsHealth
        ws.sendall(ws_frame(a2s(uid, 0x1 | 0x2 | 0x4 | 0x800)))
        reply = s2a_text(ws_read(ws))
        self.assertNotIn("connection_settings", reply)
        self.assertNotIn("Authorization", reply)
        name = str(uuid.UUID(bytes=uid))
        j = wait_until(lambda: self.agent_json(ctl, name), what="the agent listed")
        self.assertEqual(j["credential"], "enrollment", j)
        self.assertTrue(j["connected"], j)
        ws.sendall(ws_frame(a2s(uid, 0x1 | 0x2 | 0x4 | 0x800, seq=1)))
        self.assertNotIn("error_response", s2a_text(ws_read(ws)))
        # the same client with the capability is offered a credential, bound to its uid
        uid2 = uuid.uuid4().bytes
        st, ws2 = ws_open(ctl.port, ctl.agent_token)
        self.addCleanup(ws2.close)
        ws2.sendall(ws_frame(a2s(uid2, 0x1 | ACCEPTS_OPAMP_SETTINGS)))
        reply = s2a_text(ws_read(ws2))
        self.assertIn("connection_settings", reply)
        self.assertIn('key: "Authorization"', reply)
        secret = reply.split('value: "Bearer ', 1)[1].split('"', 1)[0]
        self.assertEqual(self.agent_json(ctl, str(uuid.UUID(bytes=uid2)))["credential"],
                         "offered")
        # the offered credential speaks for that uid only
        st, ws3 = ws_open(ctl.port, secret)
        self.assertEqual(st, 101)
        self.addCleanup(ws3.close)
        ws3.sendall(ws_frame(a2s(uid, 0x1)))
        reply = s2a_text(ws_read(ws3))
        self.assertIn("error_response", reply)
        self.assertIn("this credential belongs to agent %s" % uuid.UUID(bytes=uid2), reply)


class RevokeTest(IdentityCase):
    def test_revoked_agent_cannot_connect_or_upload_another_is_untouched(self):
        ctl = self.controller()
        a, b = self.start_agent(ctl, "a"), self.start_agent(ctl, "b")
        ua, ta = self.wait_own(ctl, a)
        ub, tb = self.wait_own(ctl, b)
        st, body, _ = ctl.request("DELETE", "/api/v1/agents/%s/credential" % ua)
        self.assertEqual(st, 200, body)
        self.assertEqual(len(body["revoked"]), 1, body)
        wait_until(lambda: not self.connected(ctl, ua), timeout=5, what="a disconnected")
        self.assertEqual(pfharness.ws_handshake_status(ctl.port, token=ta)[0], 401)
        self.assertEqual(self.upload(ctl, ta, profile())[0], 401)
        # it stays out (no fallback to the enrollment token) while b carries on
        time.sleep(2)
        self.assertFalse(self.connected(ctl, ua))
        self.assertTrue(self.connected(ctl, ub))
        self.assertEqual(self.agent_json(ctl, ub)["credential"], "own")
        self.assertEqual(self.upload(ctl, tb, profile())[0], 200)
        self.assertEqual(ctl.request("DELETE", "/api/v1/agents/%s/credential" % ua)[0], 404)
        log = pfharness.read_text(os.path.join(self.workdir, "agent-a.log"))
        self.assertIn("agent token rejected", log)
        st, body, _ = ctl.request("GET", "/api/v1/audit?action=agent.credential")
        self.assertEqual([(e["target"], e["status"]) for e in body["entries"]],
                         [(ua, 404), (ua, 200)], body)


class SpoofTest(IdentityCase):
    def test_upload_naming_another_agent_or_its_capture_is_refused(self):
        ctl = self.controller()
        a, b = self.start_agent(ctl, "a"), self.start_agent(ctl, "b")
        ua, ta = self.wait_own(ctl, a)
        ub, tb = self.wait_own(ctl, b)
        st, cap, _ = ctl.request("POST", "/api/v1/captures", json.dumps(
            {"agents": "who=a", "duration_seconds": 5}))
        self.assertEqual(st, 202, cap)
        cid = cap["id"]
        for who, token, body, what in (
                ("b", tb, profile(agent=ua), "belongs to agent " + ub),
                ("b", tb, profile(agent=ub, capture=cid), "not a capture of this agent"),
                ("b", tb, profile(capture=cid), "not a capture of this agent"),
                ("enrollment", ctl.agent_token, profile(agent=ua, capture=cid),
                 "has a credential of its own")):
            st, payload = self.upload(ctl, token, body)
            self.assertEqual(st, 403, (who, payload))
            self.assertIn(what.encode(), payload, who)
        self.assertEqual(self.profiles_of(ctl, ua), [])
        st, body, _ = ctl.request("GET", "/api/v1/profiles?capture_id=" + cid)
        self.assertEqual(body["profiles"], [], body)
        # the real owner may
        st, payload = self.upload(ctl, ta, profile(agent=ua, capture=cid))
        self.assertEqual(st, 200, payload)
        got = wait_until(lambda: self.profiles_of(ctl, ua), timeout=10, what="a's upload")
        self.assertEqual(len(got), 1, got)


class EnrollmentRotationTest(IdentityCase):
    def test_enrollment_token_replaced_without_reenrolling(self):
        ctl = self.controller()
        a = self.start_agent(ctl, "a")
        ua, ta = self.wait_own(ctl, a)
        st, new, _ = ctl.request("POST", "/api/v1/tokens", json.dumps(
            {"name": "enroll-2", "role": "agent"}))
        self.assertEqual(st, 201, new)
        st, body, _ = ctl.request("GET", "/api/v1/tokens")
        old = [t for t in body["tokens"] if t["role"] == "agent" and t["name"] != "enroll-2"]
        self.assertEqual(len(old), 1, body)
        st, body, _ = ctl.request("DELETE", "/api/v1/tokens/" + old[0]["id"])
        self.assertEqual(st, 200, body)
        self.assertEqual(pfharness.ws_handshake_status(ctl.port, token=ctl.agent_token)[0], 401)
        new_file = os.path.join(self.workdir, "enroll-2.token")
        with open(new_file, "w") as f:
            f.write(new["token"] + "\n")
        c = self.start_agent(ctl, "c", token_file=new_file)
        uc, tc = self.wait_own(ctl, c)
        self.assertNotEqual(uc, ua)
        # a was never disconnected: same connection, its credential unchanged
        self.assertTrue(self.connected(ctl, ua))
        self.assertEqual(self.credential(a), ta)
        log = pfharness.read_text(os.path.join(self.workdir, "agent-a.log"))
        self.assertEqual(log.count("opamp: connected to"), 2, "a reconnected")
        self.assertEqual(self.upload(ctl, ta, profile())[0], 200)


class RotateTest(IdentityCase):
    def test_rotation_on_the_live_connection(self):
        ctl = self.controller()
        a = self.start_agent(ctl, "a")
        ua, ta = self.wait_own(ctl, a)
        st, body, _ = ctl.request("POST", "/api/v1/agents/%s/credential/rotate" % ua)
        self.assertEqual(st, 202, body)
        wait_until(lambda: self.credential(a) != ta, timeout=15, what="a new credential")
        tn = self.credential(a)
        wait_until(lambda: self.agent_json(ctl, ua)["credential"] == "own" and
                   self.connected(ctl, ua), timeout=10, what="a back on its own credential")
        self.assertEqual(pfharness.ws_handshake_status(ctl.port, token=ta)[0], 401)
        self.assertEqual(self.upload(ctl, tn, profile(agent=ua))[0], 200)
        st, body, _ = ctl.request("POST", "/api/v1/agents/%s/credential/rotate"
                                  % uuid.uuid4())
        self.assertEqual(st, 409, body)


if __name__ == "__main__":
    unittest.main()
