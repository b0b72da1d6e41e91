"""Staged rollouts through the real controller, with agents simulated by opamp-load (real
OpAMP over WebSocket): 100 agents of which 20 answer FAILED to the new version halt the
rollout at the first batch whose failure share is over the threshold, and on_failure rollback
brings every moved agent back to the old version; a paused rollout survives a controller
kill -9 (pins, batch, state) and completes after resume; two real agents (eBPF off) move one
batch at a time; request errors (400 with field paths, 409, 422), the plain PUT's 409 during a
rollout, staging, validation without storing and the assignments' match counts.
"""
import hashlib
import json
import os
import subprocess
import unittest

import pfharness
from pfharness import IntegrationCase, Proc, wait_until

V1 = "profiling:\n  sampling:\n    frequency_hz: 49\n"
V2 = "profiling:\n  sampling:\n    frequency_hz: 19\n"
N_AGENTS = 100
FAIL_PERCENT = 20


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def plan(n, initial, multiplier, max_batch_percent):
    """Batch sizes as docs/rollouts.md defines them."""
    cap = max(1, n * max_batch_percent // 100)
    size, out, done = min(initial, cap), [], 0
    while done < n:
        take = min(size, n - done)
        out.append(take)
        done += take
        size = min(size * multiplier, cap)
    return out


class Rollouts(IntegrationCase):

    def setUp(self):
        super().setUp()
        if not pfharness.LOAD_BIN or not os.access(pfharness.LOAD_BIN, os.X_OK):
            self.fail("PF_LOAD_BIN is not set to the opamp-load binary")

    def load(self, ctl, n, seed, *extra):
        """opamp-load agents that stay connected until the test stops them."""
        args = [pfharness.LOAD_BIN, "--mode", "idle", "--agents", str(n), "--port",
                str(ctl.port), "--data-dir", ctl.data_dir, "--uid-seed", str(seed),
                "--settle", "600", "--timeout", "700", "--src-addrs", "0"] + list(extra)
        p = Proc(args, os.path.join(self.workdir, "load-%d.log" % seed))
        self._procs.append(p)
        return p

    def all_agents(self, ctl):
        return ctl.agents()

    def wait_on_version(self, ctl, n, version, timeout=30):
        def check():
            ags = self.all_agents(ctl)
            ok = [a for a in ags if a["connected"] and a["config"]["version"] == version and
                  a["config"]["status"] == "APPLIED"]
            return len(ok) >= n and ags
        return wait_until(check, timeout=timeout,
                          what="%d agents APPLIED on version %d" % (n, version))

    def rollout(self, ctl, rid):
        st, body, _ = ctl.request("GET", "/api/v1/rollouts/" + rid)
        self.assertEqual(st, 200, body)
        return body

    def post(self, ctl, path, obj):
        return ctl.request("POST", path, json.dumps(obj),
                           headers={"Content-Type": "application/json"})

    def test_failures_halt_the_first_batch_over_threshold_and_roll_back(self):
        ctl = self.controller()
        st, body, _ = ctl.put_config("default", V1)
        self.assertEqual(st, 201, body)
        # Seed 12 puts no refusing agent in the first batch: it passes, a later one halts.
        self.load(ctl, N_AGENTS, 12, "--fail-hash", sha(V2), "--fail-percent",
                  str(FAIL_PERCENT))
        agents = self.wait_on_version(ctl, N_AGENTS, 1)

        # Validation stores nothing; staging stores v2 without pushing it.
        st, body, _ = ctl.request("POST", "/api/v1/configs/default:validate",
                                  "profiling:\n  sampling:\n    frequency_hz: 5000\n")
        self.assertEqual(st, 400, body)
        self.assertEqual(body["error"]["path"], "profiling.sampling.frequency_hz")
        st, body, _ = ctl.request("PUT", "/api/v1/configs/default?dry_run=1", V2)
        self.assertEqual((st, body["valid"], body["hash"]), (200, True, sha(V2)))
        st, body, _ = ctl.request("GET", "/api/v1/configs/default/versions")
        self.assertEqual(len(body["versions"]), 1)
        st, body, _ = ctl.request("PUT", "/api/v1/configs/default?stage=1", V2)
        self.assertEqual((st, body["version"], body["staged"], body["pushed"]),
                         (201, 2, True, 0), body)
        self.assertEqual(ctl.summary()["config_status"]["APPLIED"], N_AGENTS)
        self.assertTrue(all(a["config"]["version"] == 1 for a in self.all_agents(ctl)))

        # Request errors.
        bad = [({"config": "default", "version": 2, "strategy": {"multiplier": 0}}, 400,
                "strategy.multiplier"),
               ({"config": "default", "version": 2, "strategy": {"on_failure": "pray"}}, 400,
                "strategy.on_failure"),
               ({"config": "default", "version": 2, "colour": "red"}, 400, "colour"),
               ({"version": 2}, 400, "config"),
               ({"config": "default", "version": 9}, 400, "version"),
               ({"config": "default", "version": 2, "selector": "a in ("}, 400, "selector"),
               ({"config": "default", "version": 2, "selector": "bench.index=none"}, 422,
                "selector")]
        for obj, status, path in bad:
            st, body, _ = self.post(ctl, "/api/v1/rollouts", obj)
            self.assertEqual((st, body["error"]["path"]), (status, path), (obj, body))
        st, _, _ = ctl.request("POST", "/api/v1/rollouts", "{}", token=None)
        self.assertEqual(st, 401)

        strategy = {"initial": 3, "multiplier": 5, "max_batch_percent": 100,
                    "pause_seconds": 1, "max_failure_percent": 5,
                    "apply_timeout_seconds": 15, "on_failure": "rollback"}
        st, body, _ = self.post(ctl, "/api/v1/rollouts",
                                {"config": "default", "version": 2, "strategy": strategy})
        self.assertEqual(st, 202, body)
        rid = body["id"]
        self.assertEqual(body["agents"], N_AGENTS)
        st, body, _ = self.post(ctl, "/api/v1/rollouts", {"config": "default", "version": 2})
        self.assertEqual((st, body["error"]["code"]), (409, "rollout_active"), body)
        st, body, _ = ctl.put_config("default", V2)
        self.assertEqual((st, body["error"]["code"]), (409, "rollout_active"), body)

        r = wait_until(lambda: (lambda r: r if r["state"] == "rolled_back" else None)(
            self.rollout(ctl, rid)), timeout=90, what="rollout rolled_back")

        # The batches the controller made are the documented plan over the agents in uid
        # order (all are connected); the halt is at the first batch over 5 %.
        sizes = plan(N_AGENTS, 3, 5, 100)
        self.assertEqual([b["agents"] for b in r["batches"]], sizes)
        fails = {a["instance_uid"] for a in agents
                 if int(a["attributes"]["bench.index"]) % 100 < FAIL_PERCENT}
        order = sorted(a["instance_uid"] for a in agents)
        expect_halt, start = None, 0
        for i, n in enumerate(sizes):
            nf = sum(1 for u in order[start:start + n] if u in fails)
            if nf * 100 > 5 * n:
                expect_halt = i
                break
            start += n
        self.assertIsNotNone(expect_halt)
        self.assertGreater(expect_halt, 0, "the fleet of seed 12 changed")
        self.assertIn("batch %d:" % (expect_halt + 1), r["reason"])
        halted = r["batches"][expect_halt]
        self.assertGreater(halted["failed"], 0)
        self.assertTrue(any("--fail-hash" in e["error"] for e in halted["errors"]), halted)
        for b in r["batches"][:expect_halt]:
            self.assertEqual((b["state"], b["failed"], b["applied"]), ("done", 0, b["agents"]),
                             r)
        for b in r["batches"][expect_halt + 1:]:
            self.assertEqual((b["state"], b["reverted"], b["failed"]),
                             ("waiting", 0, 0), r)
        moved = sum(sizes[:expect_halt + 1])
        reverted = sum(b["reverted"] for b in r["batches"])
        self.assertEqual(reverted, moved, r)

        # Every agent is back on v1, applied, unpinned; a plain PUT works again.
        ags = self.wait_on_version(ctl, N_AGENTS, 1)
        self.assertFalse(any(a["config"]["pinned"] for a in ags))
        st, body, _ = ctl.request("GET", "/api/v1/rollouts?active=1")
        self.assertEqual((st, body["rollouts"]), (200, []))
        st, body, _ = ctl.request("GET", "/api/v1/rollouts")
        self.assertEqual([x["state"] for x in body["rollouts"]], ["rolled_back"])
        st, body, _ = self.post(ctl, "/api/v1/rollouts/%s/resume" % rid, {})
        self.assertEqual((st, body["error"]["code"]), (409, "rollout_ended"), body)

    def test_paused_rollout_survives_kill9_and_completes(self):
        ctl = self.controller()
        ctl.put_config("default", V1)
        n = 20
        load = self.load(ctl, n, 23)
        self.wait_on_version(ctl, n, 1)
        st, body, _ = ctl.request("PUT", "/api/v1/configs/default?stage=1", V2)
        self.assertEqual(st, 201, body)
        st, body, _ = self.post(ctl, "/api/v1/rollouts", {
            "config": "default", "version": 2,
            "strategy": {"initial": 4, "multiplier": 2, "pause_seconds": 120}})
        self.assertEqual(st, 202, body)
        rid = body["id"]
        r = wait_until(lambda: (lambda r: r if r["batches"][0]["applied"] == 4 else None)(
            self.rollout(ctl, rid)), timeout=30, what="batch 1 applied")
        self.assertEqual(r["state"], "running")
        st, body, _ = self.post(ctl, "/api/v1/rollouts/%s/pause" % rid, {})
        self.assertEqual((st, body["state"]), (200, "paused"), body)
        moved = {e for e in self.moved_uids(ctl)}
        self.assertEqual(len(moved), 4)

        ctl.stop(sig=9)
        load.stop()
        ctl.start()
        self.load(ctl, n, 23)  # the same fleet reconnects
        ags = wait_until(lambda: (lambda a: a if sum(x["connected"] and
                                                  x["config"]["status"] == "APPLIED"
                                                  for x in a) == n else None)(
            self.all_agents(ctl)), timeout=30, what="agents back after kill -9")
        r = self.rollout(ctl, rid)
        self.assertEqual((r["state"], r["batches"][0]["applied"], r["current_batch"]),
                         ("paused", 4, 2), r)
        on_v2 = {a["instance_uid"] for a in ags if a["config"]["version"] == 2}
        self.assertEqual(on_v2, moved)

        st, body, _ = self.post(ctl, "/api/v1/rollouts/%s/resume" % rid, {})
        self.assertEqual((st, body["state"]), (200, "running"), body)
        # Batches of 8 and 8, 120 s apart: resume starts the next one now, then pause.
        r = wait_until(lambda: (lambda r: r if r["batches"][1]["applied"] == 8 else None)(
            self.rollout(ctl, rid)), timeout=30, what="batch 2 applied after resume")
        st, body, _ = self.post(ctl, "/api/v1/rollouts/%s/pause" % rid, {})
        st, body, _ = self.post(ctl, "/api/v1/rollouts/%s/resume" % rid, {})
        r = wait_until(lambda: (lambda r: r if r["state"] == "completed" else None)(
            self.rollout(ctl, rid)), timeout=30, what="rollout completed")
        ags = self.wait_on_version(ctl, n, 2)
        self.assertFalse(any(a["config"]["pinned"] for a in ags))
        # v2 is now served: a controller restart keeps it.
        ctl.stop()
        ctl.start()
        st, body, _ = ctl.request("GET", "/api/v1/agents?limit=1")
        self.assertEqual(body["agents"][0]["config"]["version"], 2)

    def moved_uids(self, ctl):
        return [a["instance_uid"] for a in self.all_agents(ctl)
                if a["config"]["version"] == 2 and a["config"]["pinned"]]

    def test_real_agents_complete(self):
        """Two real profleet-agents (eBPF off), one per batch: each applies v2 in turn."""
        ctl = self.controller()
        ctl.put_config("default", V1)
        uids = [self.agent(ctl, n, extra=["--no-sampler"]).uid() for n in ("a", "b")]
        self.wait_on_version(ctl, 2, 1)
        ctl.request("PUT", "/api/v1/configs/default?stage=1", V2)
        st, body, _ = self.post(ctl, "/api/v1/rollouts", {
            "config": "default", "strategy": {"initial": 1, "multiplier": 1, "pause_seconds": 1,
                                              "max_failure_percent": 0}})
        self.assertEqual(st, 202, body)
        r = wait_until(lambda: (lambda r: r if r["state"] == "completed" else None)(
            self.rollout(ctl, body["id"])), timeout=30, what="rollout completed")
        self.assertEqual([(b["agents"], b["applied"]) for b in r["batches"]], [(1, 1), (1, 1)])
        for uid in uids:
            a = self.agent_json(ctl, uid)
            self.assertEqual((a["config"]["version"], a["config"]["status"]), (2, "APPLIED"))
            self.assertIn("frequency_hz: 19", a["config"]["effective"])

    def test_assignment_match_counts(self):
        ctl = self.controller()
        ctl.put_config("default", V1)
        ctl.put_config("other", V2)
        self.load(ctl, 10, 31)
        self.wait_on_version(ctl, 10, 1)
        st, body, _ = ctl.request("PUT", "/api/v1/assignments/shard3",
                                  json.dumps({"selector": "bench.shard=3", "config": "other",
                                              "priority": 10}))
        self.assertEqual(st, 200, body)
        st, body, _ = ctl.request("PUT", "/api/v1/assignments/all",
                                  json.dumps({"selector": "bench=1", "config": "default"}))
        self.assertEqual(st, 200, body)
        st, body, _ = ctl.request("GET", "/api/v1/assignments")
        counts = {a["name"]: (a["matched"], a["resolved"]) for a in body["assignments"]}
        # bench.shard = index % 16: one of the 10 agents has shard 3.
        self.assertEqual(counts, {"shard3": (1, 1), "all": (10, 9)})


if __name__ == "__main__":
    unittest.main()
