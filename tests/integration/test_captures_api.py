"""Incident captures through the real controller: /api/v1/captures driven over HTTP, agents
played by capture-fake-agent (real OpAMP over a real WebSocket, scripted from here): one that
advertises io.profleet.capture.v1, one that does not, one disconnected. Checks the capture and
per-agent states, that capture.request / capture.cancel reach the agent with the request's
fields, 400 with field paths, 422, 409 over the per-agent limit, cancel, profile ids that
/api/v1/profiles/{id} accepts and the capture_id / trigger filters, and a controller restart
during a capture (a pending agent gets the request again when it reconnects, with the receiver
--public-url names; a silent one fails at the deadline).
"""
import json
import os
import queue
import subprocess
import threading
import time
import unittest

import pfharness
import test_profstore
from pfharness import wait_until

FAKE_BIN = os.environ.get("PF_FAKE_AGENT_BIN", "")
CAP = "io.profleet.capture.v1"


class FakeAgent:
    """capture-fake-agent with its stdout read into a queue of events."""

    def __init__(self, ctl, uid=None, capture=True, labels=()):
        args = [FAKE_BIN, "--port", str(ctl.port), "--token-file", ctl.agent_token_file]
        if uid:
            args += ["--uid", uid]
        if capture:
            args.append("--capture")
        for l in labels:
            args += ["--label", l]
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        self.events = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            try:
                self.events.put(json.loads(line))
            except ValueError:
                pass

    def next_custom(self, type_, timeout=10.0):
        """The next custom message of that type the controller sent us."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                ev = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.seen.append(ev)
            c = ev.get("custom")
            if c and c.get("type") == type_:
                self.assert_cap(c)
                return c["data"]
        raise AssertionError("no %s within %.1fs (saw %r)" % (type_, timeout, self.seen[-5:]))

    @staticmethod
    def assert_cap(c):
        assert c.get("capability") == CAP, c

    def drain(self):
        while True:
            try:
                self.seen.append(self.events.get_nowait())
            except queue.Empty:
                return [e for e in self.seen if e.get("custom")]

    def status(self, **fields):
        self.p.stdin.write(("status " + json.dumps(fields) + "\n").encode())
        self.p.stdin.flush()

    def close(self):
        """Drops the connection without agent_disconnect (a crash or network loss)."""
        if self.p.poll() is None:
            self.p.stdin.write(b"close\n")
            self.p.stdin.flush()
            self.p.wait(timeout=10)

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(timeout=10)
        self.p.stdin.close()
        self.p.stdout.close()


class CapturesApi(pfharness.IntegrationCase):
    def setUp(self):
        super().setUp()
        if not FAKE_BIN or not os.access(FAKE_BIN, os.X_OK):
            self.fail("PF_FAKE_AGENT_BIN is not set to an executable (run through ctest)")

    def fake(self, ctl, **kw):
        a = FakeAgent(ctl, **kw)
        self._procs.append(a)
        return a

    def wait_agent(self, ctl, uid, connected=True, capture=None):
        def ok():
            j = self.agent_json(ctl, uid)
            if not j or j["connected"] != connected:
                return None
            if capture is not None and (CAP in j.get("custom_capabilities", [])) != capture:
                return None
            return j
        return wait_until(ok, timeout=10, what="agent %s connected=%s" % (uid, connected))

    def post(self, ctl, body, token="admin"):
        data = body if isinstance(body, (str, bytes)) else json.dumps(body)
        return ctl.request("POST", "/api/v1/captures", data, token=token,
                           headers={"Content-Type": "application/json"})

    def capture(self, ctl, cid):
        st, body, _ = ctl.request("GET", "/api/v1/captures/" + cid)
        self.assertEqual(st, 200, body)
        return body

    def wait_state(self, ctl, cid, state, timeout=10):
        return wait_until(lambda: (lambda c: c if c["state"] == state else None)(
            self.capture(ctl, cid)), timeout=timeout, what="capture %s %s" % (cid, state))

    @staticmethod
    def by_uid(cap):
        return {a["instance_uid"]: a for a in cap["agents"]}

    def test_states_errors_cancel_and_profiles(self):
        ctl = self.controller(extra=["--capture-grace-seconds", "3"])
        uid_a, uid_b, uid_c = ("0190a000-0000-7000-8000-00000000000%d" % i for i in (1, 2, 3))
        a = self.fake(ctl, uid=uid_a, labels=["env=prod", "role=a"])
        b = self.fake(ctl, uid=uid_b, capture=False, labels=["env=prod"])
        c = self.fake(ctl, uid=uid_c, labels=["env=prod"])
        self.wait_agent(ctl, uid_a, capture=True)
        self.wait_agent(ctl, uid_b, capture=False)
        self.wait_agent(ctl, uid_c, capture=True)
        c.close()
        self.wait_agent(ctl, uid_c, connected=False)

        # Bad input: 400 naming the field.
        bad = [
            ({"agents": "env=prod", "bogus": 1}, "bogus"),
            ({"agents": "env=prod", "duration_seconds": 0}, "duration_seconds"),
            ({"agents": "env=prod", "duration_seconds": 99999}, "duration_seconds"),
            ({"agents": "env=prod", "frequency_hz": 5000}, "frequency_hz"),
            ({"agents": "env in (", "duration_seconds": 5}, "agents"),
            ({"duration_seconds": 5}, "agents"),
            ({"agents": "env=prod", "processes": [{"key": "service.name", "match": "regexp",
                                                   "value": "(unclosed"}]},
             "processes[0].value"),
            ({"agents": "env=prod", "processes": [{"key": "service.name", "value": "x",
                                                   "extra": 1}]}, "processes[0].extra"),
            ({"agents": "env=prod", "trace_id": "xyz"}, "trace_id"),
            ({"agents": "env=prod", "note": "n" * 70000}, "body"),
        ]
        for body, path in bad:
            st, resp, _ = self.post(ctl, body)
            self.assertEqual(st, 400, (body if len(json.dumps(body)) < 200 else path, resp))
            self.assertEqual(resp["error"]["path"], path, resp)
        st, resp, _ = self.post(ctl, "{not json")
        self.assertEqual((st, resp["error"]["path"]), (400, "body"), resp)
        st, resp, _ = self.post(ctl, {"agents": "env=nowhere"})
        self.assertEqual(st, 422, resp)
        self.assertIn("no agent matches", resp["error"]["message"])
        st, resp, _ = self.post(ctl, {"agents": "env=prod"}, token=None)
        self.assertEqual(st, 401, resp)

        # A capture over the three: A gets the request, B unsupported, C unreachable.
        req = {"agents": "env=prod", "duration_seconds": 2, "frequency_hz": 199,
               "processes": [{"key": "service.name", "match": "strict", "value": "checkout"}],
               "trace_id": "0af7651916cd43dd8448eb211c80319c", "note": "incident 42"}
        st, resp, _ = self.post(ctl, req)
        self.assertEqual(st, 202, resp)
        cid = resp["id"]
        self.assertEqual(resp["agents_matched"], 3)
        self.assertEqual(resp["state"], "pending")
        got = a.next_custom("capture.request")
        self.assertEqual(got["id"], cid)
        self.assertEqual((got["duration_seconds"], got["frequency_hz"]), (2, 199))
        self.assertEqual(got["processes"], req["processes"])
        self.assertEqual(got["trace_id"], req["trace_id"])
        self.assertEqual(got["note"], "incident 42")
        self.assertNotIn("receiver", got)  # no --public-url: agents derive it
        self.assertEqual(b.drain(), [], "an agent without the capability got a message")

        cap = self.capture(ctl, cid)
        self.assertEqual(cap["state"], "pending")
        self.assertEqual(cap["created_by"], "bootstrap admin")  # the token's stored name
        self.assertEqual(cap["request"]["agents"], "env=prod")
        self.assertEqual(cap["request"]["processes"], req["processes"])
        states = {u: x["state"] for u, x in self.by_uid(cap).items()}
        self.assertEqual(states, {uid_a: "pending", uid_b: "unsupported",
                                  uid_c: "unreachable"})

        a.status(id=cid, state="accepted")
        self.wait_state(ctl, cid, "running")
        a.status(id=cid, state="running", samples=10)
        # The agent's profile reaches the store, then it reports done with its id.
        text = test_profstore.TEXT % {"service": "checkout", "start": test_profstore.START_NS,
                                      "hot": 90, "cold": 10}
        text = text.replace('profile_id: "0123456789abcdef"', 'profile_id: "capture-prof-001"')
        text = text.replace(
            '    attributes { key: "profleet.agent.uid" value { string_value: "agent-1" } }',
            '    attributes { key: "profleet.agent.uid" value { string_value: "%s" } }\n'
            '    attributes { key: "profleet.capture.id" value { string_value: "%s" } }\n'
            '    attributes { key: "profleet.trigger" value { string_value: "on_demand" } }'
            % (uid_a, cid))
        if not test_profstore.have_protoc():
            self.skipTest("protoc and the reference protos are needed to make OTLP bodies")
        st, _, _ = ctl.request("POST", "/v1development/profiles",
                               test_profstore.encode_text(text), token=ctl.agent_token,
                               headers=test_profstore.PROTOBUF)
        self.assertEqual(st, 200)
        a.status(id=cid, state="done", samples=100, bytes=2048,
                 profile_ids=[b"capture-prof-001".hex()])
        cap = self.wait_state(ctl, cid, "partial")
        self.assertIsNotNone(cap["finished_at"])
        ag = self.by_uid(cap)[uid_a]
        self.assertEqual((ag["state"], ag["samples"], ag["bytes"]), ("done", 100, 2048))
        self.assertEqual(ag["otlp_profile_ids"], [b"capture-prof-001".hex()])
        self.assertEqual(len(ag["profile_ids"]), 1)
        st, prof, _ = ctl.request("GET", "/api/v1/profiles/%d" % ag["profile_ids"][0])
        self.assertEqual(st, 200, prof)
        self.assertEqual((prof["capture_id"], prof["trigger"]), (cid, "on_demand"))
        self.assertIn("not connected", self.by_uid(cap)[uid_c]["error"])

        # Found by capture and trigger; the capture's flame graph is one URL.
        for q in ("capture_id=" + cid, "trigger=on_demand"):
            st, lst, _ = ctl.request("GET", "/api/v1/profiles?" + q)
            self.assertEqual((st, [p["id"] for p in lst["profiles"]]),
                             (200, ag["profile_ids"]), q)
        st, lst, _ = ctl.request("GET", "/api/v1/profiles?trigger=high_cpu")
        self.assertEqual((st, lst["count"]), (200, 0))
        st, fg, _ = ctl.request("GET", "/api/v1/flamegraph?capture_id=" + cid)
        self.assertEqual(st, 200, fg)
        self.assertEqual(fg["value"], 100)
        st, _, _ = ctl.request("GET", "/api/v1/flamegraph?capture_id=bad%20id")
        self.assertEqual(st, 400)

        # A status after the end changes nothing.
        a.status(id=cid, state="failed", error_code="busy")
        time.sleep(0.3)  # nothing to wait for: the controller must ignore it
        self.assertEqual(self.by_uid(self.capture(ctl, cid))[uid_a]["state"], "done")

        # At most 4 unfinished captures per agent; the 5th is 409.
        ids = []
        for i in range(4):
            st, resp, _ = self.post(ctl, {"agents": "role=a", "duration_seconds": 60})
            self.assertEqual(st, 202, resp)
            ids.append(resp["id"])
            self.assertEqual(a.next_custom("capture.request")["id"], resp["id"])
        st, resp, _ = self.post(ctl, {"agents": "role=a", "duration_seconds": 60})
        self.assertEqual(st, 409, resp)
        self.assertIn(uid_a, resp["error"]["message"])

        # Cancel: the agent is told, the capture is cancelled, its slot is free again.
        a.status(id=ids[0], state="running")
        st, cap, _ = ctl.request("DELETE", "/api/v1/captures/" + ids[0])
        self.assertEqual((st, cap["state"]), (200, "cancelled"), cap)
        self.assertEqual(self.by_uid(cap)[uid_a]["state"], "cancelled")
        self.assertEqual(a.next_custom("capture.cancel"), {"id": ids[0]})
        st, resp, _ = ctl.request("DELETE", "/api/v1/captures/" + ids[0])
        self.assertEqual(st, 409, resp)
        st, resp, _ = ctl.request("DELETE", "/api/v1/captures/0190a000-dead-7000-8000-000000000000")
        self.assertEqual(st, 404, resp)
        st, resp, _ = self.post(ctl, {"agents": "role=a", "duration_seconds": 60})
        self.assertEqual(st, 202, resp)

        # The list: newest first, by state, paged with the cursor.
        st, lst, _ = ctl.request("GET", "/api/v1/captures?state=partial")
        self.assertEqual((st, [x["id"] for x in lst["captures"]]), (200, [cid]), lst)
        st, lst, _ = ctl.request("GET", "/api/v1/captures?limit=2")
        self.assertEqual(st, 200, lst)
        self.assertEqual(len(lst["captures"]), 2)
        self.assertEqual(lst["captures"][0]["id"], resp["id"])
        st, rest, _ = ctl.request("GET", "/api/v1/captures?limit=100&cursor=" +
                                  lst["next_cursor"])
        self.assertEqual(len(rest["captures"]), 4)  # 6 in all
        self.assertEqual(rest["captures"][-1]["id"], cid)
        st, _, _ = ctl.request("GET", "/api/v1/captures?state=bogus")
        self.assertEqual(st, 400)

        st, metrics, _ = ctl.request("GET", "/metrics", token=None, raw=True)
        metrics = metrics.decode()
        self.assertIn("profleet_captures_created_total 6\n", metrics)
        self.assertIn('profleet_capture_messages_total{type="cancel"} 1\n', metrics)
        self.assertIn("profleet_captures_open 4\n", metrics)

    def test_restart_during_capture(self):
        port = pfharness.free_port()
        public = "http://127.0.0.1:%d/" % port
        receiver = "http://127.0.0.1:%d/v1development/profiles" % port
        ctl = self.controller(port=port,
                              extra=["--capture-grace-seconds", "8", "--public-url", public])
        uid_a = "0190a000-0000-7000-8000-0000000000a1"
        uid_p = "0190a000-0000-7000-8000-0000000000a2"
        a = self.fake(ctl, uid=uid_a, labels=["team=x"])
        p = self.fake(ctl, uid=uid_p, labels=["team=x"])
        self.wait_agent(ctl, uid_a, capture=True)
        self.wait_agent(ctl, uid_p, capture=True)
        st, resp, _ = self.post(ctl, {"agents": "team=x", "duration_seconds": 2})
        self.assertEqual(st, 202, resp)
        cid = resp["id"]
        a.next_custom("capture.request")
        self.assertEqual(p.next_custom("capture.request")["receiver"], receiver)
        a.status(id=cid, state="accepted")
        self.wait_state(ctl, cid, "running")

        ctl.stop()
        ctl.start()
        self.assertEqual(self.capture(ctl, cid)["state"], "running")
        # Both come back on new connections: the pending one is sent the request again, the
        # one that had accepted reports its result.
        a2 = self.fake(ctl, uid=uid_a, labels=["team=x"])
        p2 = self.fake(ctl, uid=uid_p, labels=["team=x"])
        again = p2.next_custom("capture.request")
        self.assertEqual((again["id"], again["receiver"]), (cid, receiver))
        self.wait_agent(ctl, uid_a, capture=True)
        self.assertEqual(a2.drain(), [], "the agent that accepted got the request again")
        a2.status(id=cid, state="done", samples=5)
        wait_until(lambda: self.by_uid(self.capture(ctl, cid))[uid_a]["state"] == "done",
                   timeout=10, what="agent a done after the restart")
        # p2 stays silent: it fails at the deadline (duration 2 s + grace 8 s).
        cap = self.wait_state(ctl, cid, "partial", timeout=20)
        pa = self.by_uid(cap)[uid_p]
        self.assertEqual((pa["state"], pa["error_code"]), ("failed", "timeout"))
        self.assertIn("deadline", pa["error"])


if __name__ == "__main__":
    unittest.main()
