"""The fleet store on PostgreSQL (--store postgres://): a real server started by the test
(pgharness.py: initdb + pg_ctl in a temporary directory, skipped only where the server
binaries are missing), real controller replicas and real agents (--no-sampler).

- conformance: the same API calls against a SQLite controller and a PostgreSQL one give the
  same answers (configs and versions, assignments, tokens, audit, rollouts, captures);
- two replicas on one database: a config PUT through A is APPLIED by an agent connected to B
  within 1 s (LISTEN/NOTIFY), an assignment through B reaches it too, A's API shows the agent
  connected to B, a token revoked through A is refused by B at once;
- kill -9 of a replica: its agent reconnects to the other (same instance_uid) and gets back
  what was acknowledged before, nothing lost; an agent that reconnects nowhere is shown
  disconnected by the survivor once the dead replica's heartbeat is older than
  --replica-timeout-seconds (default: within 10 s of the kill); a replica stopped that long writes its agents' rows again
  when it runs again;
- agent rows: 120 agents connecting to one replica are written many rows per statement
  (round trips against rows written, from /metrics);
- a plain config PUT during a rollout of that config: the same 409 rollout_active answer
  through the driving replica and through the other one;
- rollout pause/resume/rollback/cancel and capture cancel through a replica that does not
  drive them: forwarded (a command row and NOTIFY), answered as the driver answers, audited
  once; with the driver stopped, 503 driver_unavailable after the 8 s bound and never run
  later; with the driver killed while a command waits, the adopter runs it;
- PostgreSQL stopped: writes answer 503 with a clear error and Retry-After, /healthz stays
  up; started again: writes succeed without restarting the controller, and changes made
  through the other replica meanwhile reach this one's agents;
- PostgreSQL hung (a proxy that stops forwarding, nothing closed): one write waits at most
  4 s and answers 503, the next ones at once, /healthz stays fast, writes recover by
  themselves.
"""
import json
import os
import random
import re
import socket
import subprocess
import threading
import shutil
import signal
import time
import unittest

import pgharness
from pfharness import Agent, Controller, IntegrationCase, Proc, wait_until
from test_captures_api import FAKE_BIN, FakeAgent

CONFIG_A = "profiling:\n  sampling:\n    frequency_hz: 49\n"
CONFIG_B = "profiling:\n  sampling:\n    frequency_hz: 19\n"
CONFIG_C = "profiling:\n  sampling:\n    frequency_hz: 29\n"

BINDIR = pgharness.find_bindir()


@unittest.skipIf(BINDIR is None, "PostgreSQL server binaries (initdb, pg_ctl under "
                 "/usr/lib/postgresql/<ver>/bin) are missing: install the 'postgresql' package "
                 "(scripts/install-deps.sh does)")
class PgStore(IntegrationCase):

    def setUp(self):
        super().setUp()
        self.pg = pgharness.PgServer(BINDIR)

    def tearDown(self):
        super().tearDown()  # controllers and agents first: they hold connections
        self.pg.destroy()

    # ---- helpers

    def replica(self, name, tokens_from=None, extra=()):
        """A controller on the shared database, in its own directory. A replica after the
        first gets the first one's token files (the tokens are in the database already)."""
        wd = os.path.join(self.workdir, name)
        os.makedirs(wd, exist_ok=True)
        c = Controller(wd, extra=["--store", self.pg.url] + list(extra))
        if tokens_from:
            os.makedirs(c.data_dir, mode=0o700, exist_ok=True)
            for f in ("admin.token", "agent.token"):
                shutil.copy(os.path.join(tokens_from.data_dir, f), os.path.join(c.data_dir, f))
        c.start()
        self._procs.append(c)
        return c

    def pgagent(self, ctl, name, token_file=None):
        a = Agent(self.workdir, name, server="ws://127.0.0.1:%d/v1/opamp" % ctl.port,
                  token_file=token_file or ctl.agent_token_file, extra=["--no-sampler"])
        a.start()
        self._procs.append(a)
        return a

    def wait_agent(self, ctl, uid, pred, timeout=10, interval=0.05, what="agent state"):
        def check():
            a = self.agent_json(ctl, uid)
            return a if a and pred(a) else None
        return wait_until(check, timeout=timeout, interval=interval, what=what)

    def start_rollout(self, ctl, version, pause_seconds):
        """A rollout of config 'default' to `version` through ctl over the whole fleet: one
        agent, then doubling batches pause_seconds apart."""
        strategy = {"initial": 1, "multiplier": 2, "max_batch_percent": 100,
                    "pause_seconds": pause_seconds, "max_failure_percent": 50,
                    "apply_timeout_seconds": 20, "on_failure": "halt"}
        st, r, _ = ctl.request("POST", "/api/v1/rollouts",
                               json.dumps({"config": "default", "version": version,
                                           "strategy": strategy}),
                               headers={"Content-Type": "application/json"})
        self.assertEqual(st, 202, r)
        return r

    def applied(self, body):
        return lambda a: (a["config"]["status"] == "APPLIED" and
                          a["config"]["hash"] == body["hash"])

    # ---- conformance

    def sequence(self, ctl):
        """API calls that exercise every fleet table; the answers, without what differs by
        nature (times, random ids, secrets)."""
        out = []

        def call(method, path, body=None):
            st, j, _ = ctl.request(method, path, body)
            out.append((method, scrub(path), st, scrub(j)))
            return j

        call("PUT", "/api/v1/configs/default", CONFIG_A)
        call("PUT", "/api/v1/configs/default", CONFIG_A)  # same hash: no new version
        call("PUT", "/api/v1/configs/default", CONFIG_B)
        call("PUT", "/api/v1/configs/zeta", CONFIG_C)
        call("PUT", "/api/v1/configs/Alpha", CONFIG_C)  # ordering: bytes, like SQLite
        call("GET", "/api/v1/configs")
        call("GET", "/api/v1/configs/default/versions")
        call("GET", "/api/v1/configs/default?version=1")
        call("GET", "/api/v1/configs/nope")
        call("PUT", "/api/v1/assignments/b-asg",
             '{"selector":"env=prod","config":"zeta","priority":5}')
        call("PUT", "/api/v1/assignments/a-asg",
             '{"selector":"env in (dev,qa)","config":"default","priority":7}')
        call("PUT", "/api/v1/assignments/a-asg",
             '{"selector":"env=dev","config":"default","priority":8}')
        call("GET", "/api/v1/assignments")
        call("DELETE", "/api/v1/assignments/b-asg")
        call("DELETE", "/api/v1/assignments/b-asg")
        call("GET", "/api/v1/assignments/a-asg")
        t = call("POST", "/api/v1/tokens", json.dumps({"name": "oncall", "role": "operator"}))
        call("POST", "/api/v1/tokens", json.dumps({"name": "ci", "role": "viewer",
                                                   "expires_in": 3600}))
        call("GET", "/api/v1/tokens")
        call("DELETE", "/api/v1/tokens/" + t["id"])
        call("DELETE", "/api/v1/tokens/" + t["id"])
        call("GET", "/api/v1/tokens")
        call("GET", "/api/v1/audit?limit=50")
        call("GET", "/api/v1/audit?action=token&limit=5")
        call("GET", "/api/v1/audit?action=config.put")
        call("GET", "/api/v1/captures")
        call("POST", "/api/v1/captures", json.dumps({"selector": "env=none",
                                                     "duration_seconds": 5}))
        call("GET", "/api/v1/captures?state=failed")
        call("GET", "/api/v1/rollouts")
        call("POST", "/api/v1/rollouts", json.dumps({"config": "default", "selector": ""}))
        call("GET", "/api/v1/fleet/summary")
        return out

    def test_conformance_sqlite_and_postgres(self):
        os.makedirs(os.path.join(self.workdir, "lite"))
        lite = Controller(os.path.join(self.workdir, "lite")).start()
        self._procs.append(lite)
        pg = self.replica("pg")
        a, b = self.sequence(lite), self.sequence(pg)
        self.assertEqual(len(a), len(b))
        for m, p, st, j in b:
            self.assertLess(st, 500, (m, p, j))
        print("conformance: %s" % " ".join("%s:%d" % (m[0], st) for m, _, st, _ in b))
        for x, y in zip(a, b):
            self.assertEqual(x, y, "SQLite and PostgreSQL answer %s %s differently" % x[:2])

    def test_store_calls_conformance(self):
        """The same sequence of every fleet store call (tests/unit/controller/
        test_store_conformance.c) against SQLite and PostgreSQL: identical transcripts."""
        binary = os.environ.get("PF_STORE_CONFORMANCE_BIN", "")
        if not binary or not os.access(binary, os.X_OK):
            self.fail("PF_STORE_CONFORMANCE_BIN is not set to an executable (run through ctest)")
        env = dict(os.environ, PF_TEST_PG_URL=self.pg.createdb("conformance"))
        r = subprocess.run([binary], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=120)
        out = r.stdout.decode(errors="replace")
        self.assertEqual(r.returncode, 0, out[-6000:])
        self.assertIn("identical", out)

    # ---- two replicas

    def test_two_replicas_push_and_whole_fleet(self):
        a = self.replica("a")
        b = self.replica("b", tokens_from=a)
        ag = self.pgagent(b, "on-b")
        uid = ag.uid()
        self.wait_agent(b, uid, lambda x: x["connected"], what="agent connected to B")
        # A config PUT through A: applied by B's agent within 1 s.
        t0 = time.monotonic()
        st, body, _ = a.put_config("default", CONFIG_A)
        self.assertEqual(st, 201, body)
        self.wait_agent(b, uid, self.applied(body), timeout=1.0, interval=0.01,
                        what="B's agent APPLIED A's config within 1 s")
        elapsed = time.monotonic() - t0
        print("config PUT on A -> APPLIED on B's agent: %.0f ms" % (elapsed * 1000))
        self.assertLess(elapsed, 1.0)
        # An assignment through B to a config made through A, and back through A.
        st, body2, _ = a.put_config("prod", CONFIG_B)
        self.assertEqual(st, 201, body2)
        st, j, _ = b.request("PUT", "/api/v1/assignments/prod",
                             '{"selector":"service.name=profleet-agent","config":"prod",'
                             '"priority":10}')
        self.assertEqual(st, 200, j)
        self.wait_agent(b, uid, self.applied(body2), timeout=1.0, interval=0.01,
                        what="assignment through B applied")
        st, j, _ = a.request("DELETE", "/api/v1/assignments/prod")
        self.assertEqual(st, 200, j)
        self.wait_agent(b, uid, self.applied(body), timeout=1.0, interval=0.01,
                        what="assignment removed through A: back to default")
        # A's API shows the agent connected to B, with its state, from the store.
        x = self.wait_agent(a, uid, lambda x: x["connected"] and
                            x["config"]["status"] == "APPLIED" and
                            x["config"]["hash"] == body["hash"],
                            what="A shows B's agent")
        self.assertEqual(x["config"]["name"], "default")
        self.assertIn(uid, [y["instance_uid"] for y in a.agents()])
        self.assertEqual(a.summary()["connected"], 1)
        st, text, _ = a.request("GET", "/metrics", raw=True)
        self.assertIn("\nprofleet_agents_connected_here 0\n", text.decode())
        st, text, _ = b.request("GET", "/metrics", raw=True)
        self.assertIn("\nprofleet_agents_connected_here 1\n", text.decode())
        # A token made and revoked through A: B refuses it at once.
        st, t, _ = a.request("POST", "/api/v1/tokens",
                             json.dumps({"name": "ci", "role": "viewer"}))
        self.assertEqual(st, 201, t)
        self.assertEqual(b.request("GET", "/api/v1/agents", token=t["token"])[0], 200)
        self.assertEqual(a.request("DELETE", "/api/v1/tokens/" + t["id"])[0], 200)
        self.assertEqual(b.request("GET", "/api/v1/agents", token=t["token"])[0], 401)
        # Audit: both replicas write to the one log.
        st, j, _ = b.request("GET", "/api/v1/audit?limit=100")
        acts = [e["action"] for e in j["entries"]]
        self.assertIn("assignment.put", acts)
        self.assertIn("assignment.delete", acts)
        self.assertIn("token.revoke", acts)

    def test_kill_replica_agent_moves(self):
        a = self.replica("a")
        b = self.replica("b", tokens_from=a)
        ag = self.pgagent(a, "mover")
        uid = ag.uid()
        self.wait_agent(a, uid, lambda x: x["connected"], what="agent connected to A")
        st, body, _ = b.put_config("default", CONFIG_A)  # through B, to A's agent
        self.assertEqual(st, 201, body)
        self.wait_agent(a, uid, self.applied(body), timeout=1.0, interval=0.01,
                        what="A's agent APPLIED B's config")
        st, body2, _ = a.put_config("default", CONFIG_B)  # acknowledged by A, then A dies
        self.assertEqual(st, 201, body2)
        self.wait_agent(a, uid, self.applied(body2), what="second version applied")
        a.proc.p.send_signal(signal.SIGKILL)
        a.proc.p.wait(timeout=10)
        # The agent takes the other replica's address (one --server per agent): same state
        # dir, same instance_uid.
        ag.stop()
        ag.server = "ws://127.0.0.1:%d/v1/opamp" % b.port
        ag.start()
        x = self.wait_agent(b, uid, lambda x: x["connected"] and self.applied(body2)(x),
                            what="agent on B with the last acknowledged config")
        self.assertEqual(x["config"]["version"], 2)
        st, j, _ = b.request("GET", "/api/v1/configs/default/versions")
        self.assertEqual([v["version"] for v in j["versions"]], [2, 1])

    def test_rollout_and_capture_across_replicas(self):
        a = self.replica("a")
        b = self.replica("b", tokens_from=a)
        agents = [(self.pgagent(b, "b1"), b), (self.pgagent(b, "b2"), b),
                  (self.pgagent(a, "a1"), a)]
        uids = [(ag.uid(), ctl) for ag, ctl in agents]
        st, v1, _ = a.put_config("default", CONFIG_A)
        self.assertEqual(st, 201, v1)
        for uid, ctl in uids:
            self.wait_agent(ctl, uid, self.applied(v1), what="v1 applied")
        st, v2, _ = a.request("PUT", "/api/v1/configs/default?stage=1", CONFIG_B)
        self.assertEqual((st, v2["version"], v2["pushed"]), (201, 2, 0), v2)
        # Staged through A: B's agents stay on v1 (the served version travelled too).
        time.sleep(0.3)
        for uid, ctl in uids:
            self.assertEqual(self.agent_json(ctl, uid)["config"]["version"], 1)
        # A sees B's agents once B's writer has written their rows (every 0.5 s).
        wait_until(lambda: len(a.agents()) == 3, timeout=5, what="A lists all three agents")
        # A rollout driven by A over the whole fleet: B's agents are pinned through the
        # store, report to B, and A sees their rows.
        r = self.start_rollout(a, 2, pause_seconds=0)
        self.assertEqual(r["agents"], 3)

        def done():
            st, j, _ = b.request("GET", "/api/v1/rollouts/" + r["id"])
            return j if st == 200 and j["state"] == "completed" else None
        wait_until(done, timeout=40, interval=0.25, what="rollout completed (seen on B)")
        for uid, ctl in uids:
            self.wait_agent(ctl, uid, self.applied(v2), what="v2 applied after the rollout")
        # A second replica does not drive the same rollout: B's log has no rollout batches.
        self.assertNotIn("batch", "\n".join(l for l in b.proc.output().splitlines()
                                             if "rollout" in l and r["id"] in l))
        # A capture through B: B serves its two agents, A (notified) serves its own; the
        # capture ends with every agent's result, the same through both replicas.
        st, c, _ = b.request("POST", "/api/v1/captures",
                             json.dumps({"agents": "service.name=profleet-agent",
                                         "duration_seconds": 1}),
                             headers={"Content-Type": "application/json"})
        self.assertEqual(st, 202, c)
        self.assertEqual(c["agents_matched"], 3, c)

        def final(ctl):
            st, j, _ = ctl.request("GET", "/api/v1/captures/" + c["id"])
            return j if st == 200 and j["state"] not in ("pending", "running") else None
        jb = wait_until(lambda: final(b), timeout=60, interval=0.25, what="capture ended (B)")
        ja = wait_until(lambda: final(a), timeout=10, interval=0.25, what="capture ended (A)")
        states = {x["instance_uid"]: x["state"] for x in jb["agents"]}
        print("capture across replicas: %s, agents %s" % (jb["state"], sorted(states.values())))
        self.assertEqual(ja["state"], jb["state"])
        self.assertEqual({x["instance_uid"]: x["state"] for x in ja["agents"]}, states)
        # Every agent answered: none unreachable, none timed out at the deadline.
        for x in jb["agents"]:
            self.assertNotIn(x["state"], ("unreachable", "pending"), x)
            self.assertNotEqual(x.get("error_code"), "timeout", x)

    def test_killed_replica_rows_disconnected(self):
        """A replica killed with -9 whose agent reconnects nowhere: the survivor marks that
        agent's row disconnected once the dead replica has been silent for
        --replica-timeout-seconds (its heartbeat row in the replicas table), within 10 s of
        the kill with the default timeout; the survivor's own agent stays connected."""
        a = self.replica("a")
        b = self.replica("b", tokens_from=a)
        on_a = self.pgagent(a, "on-a")
        on_b = self.pgagent(b, "on-b")
        ua, ub = on_a.uid(), on_b.uid()
        self.wait_agent(b, ua, lambda x: x["connected"], what="B shows A's agent connected")
        self.wait_agent(b, ub, lambda x: x["connected"], what="B's own agent connected")
        # the agent settled: on the credential A offered it (it reconnects once to verify it)
        self.wait_agent(a, ua, lambda x: x.get("credential") == "own" and x["connected"],
                        what="A's agent on its own credential")
        a.proc.p.send_signal(signal.SIGKILL)
        a.proc.p.wait(timeout=10)
        t0 = time.monotonic()
        on_a.stop()  # its replica is gone and it goes nowhere else
        self.wait_agent(b, ua, lambda x: not x["connected"], timeout=40, interval=0.1,
                        what="A's agent disconnected on B after A's timeout")
        elapsed = time.monotonic() - t0
        print("kill -9 of A -> its agent's row disconnected on B: %.1f s" % elapsed)
        # 6 s of silence, then B's next beat (every 2 s) and B's next read of the rows.
        self.assertLess(elapsed, 10.0)
        self.assertTrue(self.agent_json(b, ub)["connected"])
        self.assertEqual(b.summary()["connected"], 1)
        self.assertIn("marked disconnected", b.proc.output())

    def test_stalled_replica_rows_written_again(self):
        """A replica stopped (SIGSTOP) longer than the timeout is taken for dead: its agent's
        row is marked disconnected by the other; once it runs again it finds its heartbeat
        row gone and writes its connected agents' rows again."""
        extra = ["--replica-timeout-seconds", "3"]
        a = self.replica("a", extra=extra)
        b = self.replica("b", tokens_from=a, extra=extra)
        ag = self.pgagent(a, "on-a")
        uid = ag.uid()
        self.wait_agent(b, uid, lambda x: x["connected"], what="B shows A's agent connected")
        a.proc.p.send_signal(signal.SIGSTOP)
        try:
            self.wait_agent(b, uid, lambda x: not x["connected"], timeout=20, interval=0.1,
                            what="A's agent disconnected on B while A is stopped")
        finally:
            a.proc.p.send_signal(signal.SIGCONT)
        self.wait_agent(b, uid, lambda x: x["connected"], timeout=10, interval=0.1,
                        what="A's agent connected again on B once A runs")
        self.assertIn("taken for dead", a.proc.output())

    def test_config_put_refused_through_any_replica_during_rollout(self):
        """A plain config PUT during a rollout of that config is refused with the same 409
        through the replica that drives the rollout and through one that does not."""
        a = self.replica("a")
        b = self.replica("b", tokens_from=a)
        # One agent, then a long pause: the rollout stays active.
        _, r = self.staged_rollout(a, 2)
        answers = []
        for ctl in (a, b):
            st, j, h = ctl.put_config("default", CONFIG_C)
            self.assertEqual(st, 409, j)
            self.assertEqual(j["error"]["code"], "rollout_active", j)
            self.assertIn(r["id"], j["error"]["message"])
            answers.append((st, j, h.get("content-type")))
        self.assertEqual(answers[0], answers[1])  # the same answer, byte for byte
        st, j, _ = b.request("GET", "/api/v1/configs/default/versions")
        self.assertEqual([v["version"] for v in j["versions"]], [2, 1])
        # Cancelled through its driver: the plain PUT goes through B.
        st, j, _ = a.request("POST", "/api/v1/rollouts/%s/cancel" % r["id"], "{}",
                             headers={"Content-Type": "application/json"})
        self.assertEqual(st, 200, j)
        st, j, _ = b.put_config("default", CONFIG_C)
        self.assertEqual(st, 201, j)
        self.assertEqual(j["version"], 3)

    # ---- agent rows

    def test_agent_rows_batched(self):
        """120 agents connecting to A (under the 128 connections one address may hold): A's
        writer sends their rows to PostgreSQL many rows per statement
        (profleet_store_agent_round_trips_total, every statement one round trip, against the
        rows written), and B sees every one of them connected."""
        import pfharness
        if not pfharness.LOAD_BIN or not os.access(pfharness.LOAD_BIN, os.X_OK):
            self.fail("PF_LOAD_BIN is not set to the opamp-load binary (run through ctest)")
        a = self.replica("a")
        b = self.replica("b", tokens_from=a)
        n = 120
        p = Proc([pfharness.LOAD_BIN, "--mode", "idle", "--agents", str(n), "--port",
                  str(a.port), "--data-dir", a.data_dir, "--uid-seed", "7", "--settle", "600",
                  "--timeout", "700", "--src-addrs", "0"],
                 os.path.join(self.workdir, "load.log"))
        self._procs.append(p)
        wait_until(lambda: b.summary()["connected"] == n, timeout=60, interval=0.25,
                   what="B shows all %d agents of A connected" % n)
        # A's counters follow its writer on its next persist tick
        rows = wait_until(lambda: (lambda v: v if v and v >= n else None)(
            a.metric("profleet_store_agent_rows_written_total")), timeout=5,
            what="A's writer counted the rows")
        trips = a.metric("profleet_store_agent_round_trips_total")
        batches = a.metric("profleet_store_batches_total")
        print("A's writer: %d agent rows in %d batches, %d round trips to PostgreSQL"
              % (rows, batches, trips))
        self.assertGreaterEqual(rows, n)
        # Per batch (at most 120 rows here): begin, one statement, commit; a statement per
        # row would be rows + 2 * batches. A few more from opening the connection.
        self.assertLessEqual(trips, 3 * batches + 10)
        self.assertLess(trips, rows)

    # ---- commands through any replica

    def action(self, ctl, rid, what):
        return ctl.request("POST", "/api/v1/rollouts/%s/%s" % (rid, what), "{}",
                           headers={"Content-Type": "application/json"})

    def staged_rollout(self, a, n_agents):
        """Agents on A with v1 applied, v2 staged, and a rollout of v2 through A whose first
        batch (one agent) is followed by a long pause: it stays active, driven by A."""
        ags = [self.pgagent(a, "r%d" % i) for i in range(n_agents)]
        st, v1, _ = a.put_config("default", CONFIG_A)
        self.assertEqual(st, 201, v1)
        for ag in ags:
            self.wait_agent(a, ag.uid(), self.applied(v1), what="v1 applied")
        st, v2, _ = a.request("PUT", "/api/v1/configs/default?stage=1", CONFIG_B)
        self.assertEqual(st, 201, v2)
        return ags, self.start_rollout(a, 2, pause_seconds=600)

    def test_rollout_commands_through_any_replica(self):
        """Pause, resume, rollback and cancel through a replica that does not drive the
        rollout are forwarded to the one that does (a command row and NOTIFY) and answered
        as the driver answers them: the same status and body, one audit row each."""
        a = self.replica("a")
        b = self.replica("b", tokens_from=a)
        _, r = self.staged_rollout(a, 2)
        rid = r["id"]
        t0 = time.monotonic()
        st, j, _ = self.action(b, rid, "pause")
        print("pause through B, driven by A: %d in %.0f ms" % (st, (time.monotonic() - t0) * 1e3))
        self.assertEqual(st, 200, j)
        self.assertEqual((j["id"], j["state"]), (rid, "paused"), j)
        st, ja, _ = a.request("GET", "/api/v1/rollouts/" + rid)
        self.assertEqual(ja["state"], "paused")
        # The same refusal through either replica, byte for byte.
        sa, ea, _ = self.action(a, rid, "pause")
        sb, eb, _ = self.action(b, rid, "pause")
        self.assertEqual((sa, ea["error"]["code"]), (409, "invalid_state"), ea)
        self.assertEqual((sb, eb), (sa, ea))
        st, j, _ = self.action(b, rid, "resume")
        self.assertEqual((st, j["state"]), (200, "running"), j)
        st, j, _ = self.action(b, rid, "cancel")
        self.assertEqual((st, j["state"]), (200, "cancelled"), j)
        # Ended: every replica answers it alike.
        sa, ea, _ = self.action(a, rid, "rollback")
        sb, eb, _ = self.action(b, rid, "rollback")
        self.assertEqual((sb, eb), (sa, ea))
        self.assertEqual(sa, 409, ea)
        # Audited once per command, by the caller's token, with the status answered.
        st, au, _ = b.request("GET", "/api/v1/audit?action=rollout&limit=50")
        rows = [(e["action"], e["status"]) for e in au["entries"]
                if e["target"] == rid and e["action"] != "rollout.create"]
        self.assertEqual(sorted(rows), sorted([("rollout.pause", 200), ("rollout.pause", 409),
                                               ("rollout.pause", 409), ("rollout.resume", 200),
                                               ("rollout.cancel", 200),
                                               ("rollout.rollback", 409),
                                               ("rollout.rollback", 409)]), au)
        self.assertIn("for another replica", a.proc.output())

    def stop_outside_transaction(self, ctl, tries=40):
        """SIGSTOPs ctl at a moment none of its sessions is inside a transaction. A replica
        stopped inside one has its session ended by the server 3 s later
        (idle_in_transaction_session_timeout), its rollout locks with it, and is then
        rightly taken for dead: not the case a test of a stopped live driver means."""
        for n in range(tries):
            ctl.proc.p.send_signal(signal.SIGSTOP)
            time.sleep(0.2)  # what it had sent is answered meanwhile
            ports = self.pg.client_ports(ctl.proc.p.pid)
            states = [st for port, st in self.pg.query(
                "SELECT client_port, state FROM pg_stat_activity WHERE client_port IS NOT NULL")
                if int(port) in ports]
            if ports and all(st == "idle" for st in states):
                if n:
                    print("stopped outside a transaction at try %d" % (n + 1))
                return
            ctl.proc.p.send_signal(signal.SIGCONT)
            time.sleep(0.05 + 0.3 * random.random())
        self.fail("replica never stopped outside a transaction in %d tries" % tries)

    def test_rollout_command_waits_bounded_and_is_taken_over(self):
        """The driving replica stopped (SIGSTOP, its lock still held): a pause through the
        other waits the bound, answers 503 driver_unavailable and is withdrawn (the driver,
        running again, never runs it). Stopped again and then killed with -9 while a pause
        waits: the other replica adopts the rollout and runs the waiting command itself."""
        a = self.replica("a")
        b = self.replica("b", tokens_from=a)
        _, r = self.staged_rollout(a, 2)
        self.stop_outside_transaction(a)
        try:
            t0 = time.monotonic()
            st, j, h = self.action(b, r["id"], "pause")
            elapsed = time.monotonic() - t0
        finally:
            a.proc.p.send_signal(signal.SIGCONT)
        print("pause through B while the driver A is stopped: %d in %.1f s" % (st, elapsed))
        self.assertEqual((st, j["error"]["code"]), (503, "driver_unavailable"), j)
        self.assertEqual({k.lower(): v for k, v in h.items()}.get("retry-after"), "5", h)
        self.assertTrue(7.5 <= elapsed < 9.5, elapsed)
        time.sleep(1.0)  # A runs again: were the command not withdrawn, it would run it now
        st, j, _ = a.request("GET", "/api/v1/rollouts/" + r["id"])
        self.assertEqual(j["state"], "running", j)
        self.assertNotIn("for another replica", a.proc.output())

        a.proc.p.send_signal(signal.SIGSTOP)
        out = {}

        def pause():
            t = time.monotonic()
            out["r"] = self.action(b, r["id"], "pause")
            out["s"] = time.monotonic() - t
        th = threading.Thread(target=pause)
        th.start()
        time.sleep(0.5)  # the command is stored and waits: nobody can run it now
        t0 = time.monotonic()
        a.proc.p.send_signal(signal.SIGKILL)
        a.proc.p.wait(timeout=10)
        th.join(timeout=15)
        st, j, _ = out["r"]
        print("pause through B, driver A killed while it waited: %d, %.1f s after the kill"
              % (st, time.monotonic() - t0))
        self.assertEqual((st, j["state"]), (200, "paused"), j)
        self.assertLess(out["s"], 8.5)
        self.assertIn("ran rollout pause of %s for another replica" % r["id"], b.proc.output())
        st, j, _ = self.action(b, r["id"], "resume")  # B drives it now: no forwarding
        self.assertEqual((st, j["state"]), (200, "running"), j)

    def test_capture_cancel_through_any_replica(self):
        """A capture cancelled through a replica that did not create it: forwarded to its
        creator, which cancels it (and the other replicas follow)."""
        if not FAKE_BIN or not os.access(FAKE_BIN, os.X_OK):
            self.fail("PF_FAKE_AGENT_BIN is not set to an executable (run through ctest)")
        a = self.replica("a")
        b = self.replica("b", tokens_from=a)
        fake = FakeAgent(a)  # takes the request and never answers: the capture stays open
        self._procs.append(fake)
        wait_until(lambda: len(a.agents()) == 1, timeout=10, what="fake agent connected to A")
        st, c, _ = a.request("POST", "/api/v1/captures",
                             json.dumps({"agents": "service.name=fake-agent",
                                         "duration_seconds": 120}),
                             headers={"Content-Type": "application/json"})
        self.assertEqual(st, 202, c)
        fake.next_custom("capture.request")
        st, j, _ = b.request("DELETE", "/api/v1/captures/" + c["id"])
        self.assertEqual(st, 200, j)
        self.assertEqual((j["id"], j["state"]), (c["id"], "cancelled"), j)
        st, ja, _ = a.request("GET", "/api/v1/captures/" + c["id"])
        self.assertEqual(ja["state"], "cancelled", ja)
        sa, ea, _ = a.request("DELETE", "/api/v1/captures/" + c["id"])
        sb, eb, _ = b.request("DELETE", "/api/v1/captures/" + c["id"])
        self.assertEqual(sa, 409, ea)
        self.assertEqual((sb, eb), (sa, ea))
        fake.next_custom("capture.cancel")  # the creator told its agent

    # ---- outage

    def test_postgres_hang_bounded(self):
        """A database that stops answering without closing anything: one write waits at most
        the client-side bound (4 s) and answers 503, the next ones answer 503 at once, the
        loop keeps serving, and writes work again once the path is back."""
        proxy = StallingProxy(self.pg.port)
        self.addCleanup(proxy.close)
        wd = os.path.join(self.workdir, "h")
        os.makedirs(wd)
        c = Controller(wd, extra=["--store",
                                  "postgres://profleet@127.0.0.1:%d/postgres" % proxy.port])
        c.start()
        self._procs.append(c)
        self.assertEqual(c.put_config("default", CONFIG_A)[0], 201)
        proxy.stalled.set()
        t0 = time.monotonic()
        st, j, _ = c.request("PUT", "/api/v1/configs/default", CONFIG_B)
        first = time.monotonic() - t0
        self.assertEqual(st, 503, j)
        self.assertIn("store: postgres:", j["error"]["message"])
        self.assertLess(first, 6.0)
        for _ in range(3):
            t0 = time.monotonic()
            self.assertEqual(c.request("PUT", "/api/v1/configs/default", CONFIG_B)[0], 503)
            self.assertLess(time.monotonic() - t0, 1.0)
            t0 = time.monotonic()
            with __import__("urllib.request").request.urlopen(c.base + "/healthz",
                                                              timeout=2) as r:
                self.assertEqual(r.status, 200)
            self.assertLess(time.monotonic() - t0, 1.0)
            time.sleep(0.3)
        print("hung database: first write 503 after %.2f s, then at once" % first)
        proxy.stalled.clear()
        wait_until(lambda: c.put_config("default", CONFIG_B)[0] in (200, 201), timeout=20,
                   interval=0.25, what="writes succeed once the path is back")

    def test_postgres_outage_503_and_recovery(self):
        a = self.replica("a")
        b = self.replica("b", tokens_from=a)
        ag = self.pgagent(a, "out")
        uid = ag.uid()
        self.wait_agent(a, uid, lambda x: x["connected"], what="agent connected to A")
        self.assertEqual(a.put_config("default", CONFIG_A)[0], 201)
        self.pg.stop()
        t0 = time.monotonic()
        st, j, h = a.request("PUT", "/api/v1/configs/default", CONFIG_B)
        self.assertLess(time.monotonic() - t0, 5.0)
        self.assertEqual(st, 503, j)
        self.assertEqual(j["error"]["code"], "store_unavailable")
        self.assertIn("store: postgres:", j["error"]["message"])
        self.assertIn("Retry-After", {k.title(): v for k, v in h.items()})
        # The loop is not stuck: health answers, the agent stays connected.
        with __import__("urllib.request").request.urlopen(a.base + "/healthz", timeout=2) as r:
            self.assertEqual(r.status, 200)
        def metric(ctl, name):
            st, text, _ = ctl.request("GET", "/metrics", raw=True)
            for line in text.decode().splitlines():
                if line.startswith(name + " "):
                    return line.split()[1]
            return None
        wait_until(lambda: metric(a, "profleet_store_available") == "0", timeout=5,
                   what="/metrics shows the store unavailable")
        self.pg.start()
        body = wait_until(lambda: (lambda r: r[1] if r[0] == 201 else None)(
            a.put_config("default", CONFIG_B)), timeout=20, interval=0.25,
            what="writes succeed again after PostgreSQL is back")
        self.wait_agent(a, uid, self.applied(body), what="post-outage config applied")
        # B re-made its LISTEN connection: a change through B reaches A's agent.
        def put_b():
            st, j, _ = b.put_config("default", CONFIG_C)
            return j if st in (200, 201) else None
        body3 = wait_until(put_b, timeout=20, interval=0.25, what="B writes again")
        self.wait_agent(a, uid, self.applied(body3), timeout=10,
                        what="B's change reaches A's agent after the outage")
        wait_until(lambda: metric(a, "profleet_store_available") == "1", timeout=5,
                   what="/metrics shows the store available again")
        self.assertIsNotNone(metric(a, "profleet_store_notifications_applied_total"))
        self.assertTrue(a.proc.alive() and b.proc.alive())


class StallingProxy:
    """A TCP proxy to PostgreSQL that can stop forwarding while keeping every connection open
    (a hung server or a path that drops packets: no RST, no answer)."""

    def __init__(self, target_port):
        self.target = target_port
        self.stalled = threading.Event()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _pump(self, a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                while self.stalled.is_set():
                    time.sleep(0.05)
                b.sendall(d)
        except OSError:
            pass

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            if self.stalled.is_set():
                continue  # accepted, never answered
            u = socket.create_connection(("127.0.0.1", self.target))
            self.conns.append(u)
            threading.Thread(target=self._pump, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c), daemon=True).start()

    def close(self):
        self.stalled.clear()
        for c in [self.sock] + self.conns:
            try:
                c.close()
            except OSError:
                pass


def scrub(j):
    """Drops what differs between runs by nature: times, random ids, secrets, hashes of
    tokens; keeps everything that comes from the fleet tables."""
    drop = {"created", "updated", "created_ms", "updated_ms", "ts", "ts_ms", "time", "id",
            "token", "last_used", "expires", "expires_at", "first_seen", "last_seen",
            "created_at", "started", "finished", "deadline", "source", "actor_id",
            "next_cursor", "detail", "target"}
    if isinstance(j, dict):
        return {k: scrub(v) for k, v in j.items() if k not in drop}
    if isinstance(j, list):
        return [scrub(v) for v in j]
    if isinstance(j, str):
        # capture and rollout ids (26 characters), token ids (16 hex digits), also in paths
        return re.sub(r"\b([0-9a-f]{16}|[0-9A-Za-z]{26})\b", "<id>", j)
    return j


if __name__ == "__main__":
    unittest.main()
