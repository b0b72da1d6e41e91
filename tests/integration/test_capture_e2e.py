"""Incident captures end to end: the real controller, real eBPF agents, a known workload.

controller → OpAMP → two agents → the controller's embedded store, with nothing faked:
- a capture of the workload on two connected agents and one that is disconnected ends
  `partial`: the connected ones deliver (`done`, profile ids that the profiles API serves),
  the disconnected one is `unreachable` at once; the capture's merged flame graph
  (`/api/v1/flamegraph?capture_id=`) holds the workload's hot functions in their 2:1 ratio,
  and the profiles carry the capture id and `profleet.trigger=on_demand`;
- it works with a config that lists no exporter (`exporters: []`);
- a capture whose process rule matches nothing ends `failed`, every agent with
  process_not_found;
- DELETE cancels a running capture;
- a controller restarted during a capture brings it back and records the agents' results;
- an off_cpu and a wall capture of a process that computes ~100 ms and blocks ~300 ms per
  loop, at once, with continuous off-CPU profiles off: each ends done with profiles of its
  type (`type` off_cpu / wall in the store, and in every agent's result); the wall capture's
  flame graph holds wait_lock at ~3 times compute, the off_cpu one wait_lock alone.

Needs root (CAP_BPF + CAP_PERFMON) and kernel BTF: run directly it exits 77 when every test
was skipped because the kernel refuses BPF or perf events. Every wait is bounded.
"""
import os
import subprocess
import sys
import time
import unittest
import urllib.parse

from pfharness import IntegrationCase, wait_until

SOURCE_DIR = os.environ.get(
    "PF_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
WORKLOAD_SRC = os.path.join(SOURCE_DIR, "tests", "ebpf", "workload.c")
OFFCPU_SRC = os.path.join(SOURCE_DIR, "tests", "ebpf", "offcpu_workload.c")
# Continuous sampling with no exporter: every profile in the store comes from a capture.
NO_EXPORT_CONFIG = """profiling:
  sampling: {frequency_hz: 19, duration_seconds: 5}
  exporters: []
"""


def flame_totals(node, names, acc=None):
    """Sum of each named function's total value over a d3-flame-graph tree."""
    acc = acc if acc is not None else {n: 0 for n in names}
    if node.get("name") in acc:
        acc[node["name"]] += node.get("value", 0)
    for c in node.get("children", []) or []:
        flame_totals(c, names, acc)
    return acc


def flame_summary(node, depth=6, width=4):
    """The heaviest paths of a flame graph, for a failure message: name=value down depth
    levels, width children a level."""
    kids = sorted(node.get("children") or [], key=lambda c: -c.get("value", 0))[:width]
    if depth == 0 or not kids:
        return "%s=%d" % (node.get("name"), node.get("value", 0))
    return "%s=%d(%s)" % (node.get("name"), node.get("value", 0),
                          ", ".join(flame_summary(c, depth - 1, width) for c in kids))


class CaptureEndToEnd(IntegrationCase):

    def setUp(self):
        super().setUp()
        self.wl_name = "pfcap-%d-%d" % (os.getpid(), int(time.monotonic() * 1000) % 100000)
        self.wl_bin = os.path.join(self.workdir, self.wl_name)
        subprocess.run(["cc", "-O0", "-fno-omit-frame-pointer", "-g", "-o", self.wl_bin,
                        WORKLOAD_SRC], check=True, timeout=60)
        self.workloads = []

    def tearDown(self):
        for p in self.workloads:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=5)
        super().tearDown()

    # ---- helpers ----------------------------------------------------------------------------

    def start_workload(self, seconds=60):
        p = subprocess.Popen([self.wl_bin, str(seconds)], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self.workloads.append(p)
        self.assertEqual(p.stdout.readline().strip(), b"ready")
        return p

    def fleet(self, ctl, n_labels):
        """Starts agents labelled role=<label>, waits until all report capture support."""
        agents = {}
        for name in n_labels:
            a = self.agent(ctl, name, labels=["role=" + name, "e2e=yes"])
            agents[name] = (a, a.uid())
        for a, _ in agents.values():
            self.wait_sampler(a)

        def ready():
            for _, uid in agents.values():
                j = self.agent_json(ctl, uid)
                if not j or not j.get("connected"):
                    return False
            return True
        wait_until(ready, timeout=20, what="agents connected")
        return agents

    def post_capture(self, ctl, body, status=202):
        st, resp, _ = ctl.request("POST", "/api/v1/captures", body=__import__("json").dumps(body),
                                  headers={"Content-Type": "application/json"})
        self.assertEqual(st, status, resp)
        return resp

    def get_capture(self, ctl, cid):
        st, body, _ = ctl.request("GET", "/api/v1/captures/" + cid)
        self.assertEqual(st, 200, body)
        return body

    def wait_final(self, ctl, cid, timeout):
        final = ("done", "partial", "failed", "cancelled")
        return wait_until(lambda: (lambda c: c if c["state"] in final else None)(
            self.get_capture(ctl, cid)), timeout=timeout, interval=0.2,
            what="capture %s to end" % cid)

    @staticmethod
    def by_uid(cap):
        return {a["instance_uid"]: a for a in cap["agents"]}

    # ---- tests ------------------------------------------------------------------------------

    def test_capture_partial_with_unreachable_agent_and_no_exporters(self):
        ctl = self.controller()
        st, body, _ = ctl.put_config("default", NO_EXPORT_CONFIG)
        self.assertIn(st, (200, 201), body)
        agents = self.fleet(ctl, ["a", "b", "gone"])
        gone, gone_uid = agents["gone"]
        gone.stop()
        wait_until(lambda: not self.agent_json(ctl, gone_uid)["connected"], timeout=10,
                   what="agent 'gone' disconnected")
        wl = self.start_workload(60)

        t0 = time.monotonic()
        resp = self.post_capture(ctl, {
            "agents": "e2e=yes", "duration_seconds": 3, "frequency_hz": 199,
            "processes": [{"key": "process.pid", "match": "strict", "value": str(wl.pid)}],
            "note": "e2e"})
        self.assertEqual(resp["agents_matched"], 3)
        cap = self.get_capture(ctl, resp["id"])
        self.assertEqual(self.by_uid(cap)[gone_uid]["state"], "unreachable")

        cap = self.wait_final(ctl, resp["id"], timeout=30)
        elapsed = time.monotonic() - t0
        self.assertEqual(cap["state"], "partial", cap)
        per = self.by_uid(cap)
        self.assertEqual(per[gone_uid]["state"], "unreachable")
        ids = []
        for name in ("a", "b"):
            st = per[agents[name][1]]
            self.assertEqual(st["state"], "done", st)
            self.assertGreater(st["samples"], 0, st)
            self.assertTrue(st["profile_ids"], st)
            ids += st["profile_ids"]
        print("capture of 3 s ended %.2f s after the POST" % elapsed)

        # Every reported profile is served by the profiles API, tagged with the capture.
        for pid in ids:
            st, meta, _ = ctl.request("GET", "/api/v1/profiles/%s" % pid)
            self.assertEqual(st, 200, meta)
        st, listing, _ = ctl.request("GET", "/api/v1/profiles?capture_id=" + resp["id"])
        self.assertEqual(st, 200, listing)
        self.assertEqual(sorted(p["id"] for p in listing["profiles"]), sorted(ids))
        st, listing, _ = ctl.request("GET", "/api/v1/profiles?trigger=on_demand")
        self.assertEqual(st, 200, listing)
        self.assertTrue(set(ids) <= {p["id"] for p in listing["profiles"]})

        # The capture's merged flame graph: the workload's functions, hot_a twice hot_b.
        st, flame, _ = ctl.request("GET", "/api/v1/flamegraph?capture_id=" + resp["id"])
        self.assertEqual(st, 200, flame)
        t = flame_totals(flame, ("hot_a", "hot_b", "caller_a", "caller_b"))
        self.assertGreater(t["hot_a"], 0, t)
        self.assertGreater(t["hot_b"], 0, t)
        ratio = t["hot_a"] / t["hot_b"]
        self.assertTrue(1.4 <= ratio <= 2.8, "hot_a/hot_b = %.2f (%r)" % (ratio, t))

        # No exporter configured: the store holds nothing but the capture's profiles.
        st, listing, _ = ctl.request("GET", "/api/v1/profiles?limit=100")
        self.assertEqual(sorted(p["id"] for p in listing["profiles"]), sorted(ids))

    def test_off_cpu_and_wall_captures(self):
        ctl = self.controller()
        agents = self.fleet(ctl, ["a"])
        wbin = os.path.join(self.workdir, "offcpu-" + self.wl_name)
        subprocess.run(["cc", "-O0", "-fno-omit-frame-pointer", "-g", "-pthread", "-o", wbin,
                        OFFCPU_SRC], check=True, timeout=60)
        wl = subprocess.Popen([wbin, "30"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self.workloads.append(wl)
        time.sleep(0.5)
        rule = [{"key": "process.pid", "match": "strict", "value": str(wl.pid)}]
        # a short CPU capture first: its ticks load the process's unwind tables, so that
        # the waits below (in libc, which keeps no frame pointers) are walked by them
        warm = self.post_capture(ctl, {"agents": "role=a", "duration_seconds": 1,
                                       "processes": rule})["id"]
        self.assertEqual(self.wait_final(ctl, warm, timeout=30)["state"], "done")
        ids = {}
        for t in ("off_cpu", "wall"):
            ids[t] = self.post_capture(ctl, {"agents": "role=a", "duration_seconds": 4,
                                             "frequency_hz": 199, "processes": rule,
                                             "profile_type": t})["id"]
        for t, cid in ids.items():
            cap = self.wait_final(ctl, cid, timeout=30)
            self.assertEqual(cap["state"], "done", cap)
            self.assertEqual(cap["request"]["profile_type"], t)
            a = cap["agents"][0]
            self.assertEqual((a["profile_type"], a["state"]), (t, "done"), a)
            self.assertTrue(a["profile_ids"], a)
            st, listing, _ = ctl.request("GET", "/api/v1/profiles?capture_id=" + cid)
            self.assertEqual(st, 200, listing)
            self.assertEqual({p["type"] for p in listing["profiles"]}, {t}, listing)
            st, flame, _ = ctl.request("GET", "/api/v1/flamegraph?capture_id=%s&type=%s" %
                                       (cid, t))
            self.assertEqual(st, 200, flame)
            self.assertEqual(flame.get("unit"), "nanoseconds", {k: flame.get(k)
                                                                for k in ("unit", "value")})
            f = flame_totals(flame, ("wait_lock", "compute"))
            print("%s capture: wait_lock %.0f ms, compute %.0f ms" %
                  (t, f["wait_lock"] / 1e6, f["compute"] / 1e6))
            self.assertGreater(f["wait_lock"], 0, (f, flame_summary(flame), a))
            if t == "wall":
                ratio = f["wait_lock"] / max(f["compute"], 1)
                self.assertTrue(2.0 <= ratio <= 4.5, "wait_lock/compute = %.2f" % ratio)
            # the merged cpu view of it has nothing: its profiles are of another type
            st, cpu, _ = ctl.request("GET", "/api/v1/flamegraph?capture_id=" + cid)
            self.assertEqual(st, 200, cpu)
            self.assertEqual(cpu.get("value", 0), 0, cpu.get("value"))

    def test_no_process_matches_then_cancel(self):
        ctl = self.controller()
        agents = self.fleet(ctl, ["a", "b"])
        resp = self.post_capture(ctl, {
            "agents": "e2e=yes", "duration_seconds": 2,
            "processes": [{"key": "process.executable.name", "match": "strict",
                           "value": "no-such-process-pf"}]})
        cap = self.wait_final(ctl, resp["id"], timeout=20)
        self.assertEqual(cap["state"], "failed", cap)
        for a in cap["agents"]:
            self.assertEqual(a["state"], "failed", a)
            self.assertIn("process", a["error"], a)

        wl = self.start_workload(60)
        resp = self.post_capture(ctl, {
            "agents": "role=a", "duration_seconds": 60,
            "processes": [{"key": "process.pid", "match": "strict", "value": str(wl.pid)}]})
        uid_a = agents["a"][1]
        wait_until(lambda: self.by_uid(self.get_capture(ctl, resp["id"]))[uid_a]["state"]
                   == "running", timeout=15, what="capture running on agent a")
        st, body, _ = ctl.request("DELETE", "/api/v1/captures/" + resp["id"])
        self.assertEqual(st, 200, body)
        cap = self.wait_final(ctl, resp["id"], timeout=15)
        self.assertEqual(cap["state"], "cancelled", cap)
        # The agent confirms the cancel (its partial samples are still exported).
        wait_until(lambda: self.by_uid(self.get_capture(ctl, resp["id"]))[uid_a]["state"]
                   == "cancelled", timeout=15, what="agent a confirms the cancel")

    def test_idle_process_ends_done_with_the_reason(self):
        ctl = self.controller()
        self.fleet(ctl, ["a"])
        sleeper = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL)
        self.addCleanup(sleeper.wait)
        self.addCleanup(sleeper.kill)
        resp = self.post_capture(ctl, {
            "agents": "role=a", "duration_seconds": 2,
            "processes": [{"key": "process.pid", "match": "strict",
                           "value": str(sleeper.pid)}]})
        cap = self.wait_final(ctl, resp["id"], timeout=20)
        self.assertEqual(cap["state"], "done", cap)
        a = cap["agents"][0]
        self.assertEqual(a["samples"], 0, a)
        self.assertIsNone(a.get("error_code"), a)
        self.assertIn("no samples: the 1 process sampled did not run on a CPU", a["error"], a)

    def test_include_filters_do_not_limit_captures_exclude_does(self):
        ctl = self.controller()
        agents = self.fleet(ctl, ["a"])
        uid = agents["a"][1]
        wl = self.start_workload(60)
        rule = [{"key": "process.pid", "match": "strict", "value": str(wl.pid)}]
        # Continuous sampling limited to another program: the capture still finds the workload.
        st, body, _ = ctl.put_config("default", """profiling:
  filters:
    include: [{key: process.executable.name, match: strict, value: no-such-process-pf}]
  exporters: []
""")
        self.assertIn(st, (200, 201), body)
        wait_until(lambda: self.agent_json(ctl, uid)["config"]["status"] == "APPLIED",
                   timeout=15, what="config with an include filter applied")
        cap = self.wait_final(ctl, self.post_capture(ctl, {
            "agents": "role=a", "duration_seconds": 1, "processes": rule})["id"], timeout=20)
        self.assertEqual(cap["state"], "done", cap)
        # Excluded by the config: never captured.
        st, body, _ = ctl.put_config("default", """profiling:
  filters:
    exclude: [{key: process.executable.name, match: strict, value: "%s"}]
  exporters: []
""" % self.wl_name)
        self.assertIn(st, (200, 201), body)
        wait_until(lambda: self.agent_json(ctl, uid)["config"]["version"] == 2 and
                   self.agent_json(ctl, uid)["config"]["status"] == "APPLIED",
                   timeout=15, what="config with an exclude filter applied")
        cap = self.wait_final(ctl, self.post_capture(ctl, {
            "agents": "role=a", "duration_seconds": 1, "processes": rule})["id"], timeout=20)
        self.assertEqual(cap["state"], "failed", cap)
        self.assertEqual(cap["agents"][0]["error_code"], "process_not_found", cap)

    def test_controller_restart_during_capture(self):
        ctl = self.controller()
        agents = self.fleet(ctl, ["a"])
        uid = agents["a"][1]
        wl = self.start_workload(60)
        resp = self.post_capture(ctl, {
            "agents": "role=a", "duration_seconds": 6,
            "processes": [{"key": "process.pid", "match": "strict", "value": str(wl.pid)}]})
        wait_until(lambda: self.by_uid(self.get_capture(ctl, resp["id"]))[uid]["state"]
                   == "running", timeout=15, what="capture running")
        ctl.stop()
        time.sleep(1.0)  # the agent loses its connection mid-capture
        ctl.start()
        cap = self.wait_final(ctl, resp["id"], timeout=40)
        self.assertEqual(cap["state"], "done", cap)
        st = self.by_uid(cap)[uid]
        self.assertTrue(st["profile_ids"], st)
        for pid in st["profile_ids"]:
            code, meta, _ = ctl.request("GET", "/api/v1/profiles/%s" % pid)
            self.assertEqual(code, 200, meta)


if __name__ == "__main__":
    r = unittest.main(exit=False, verbosity=2).result
    if r.wasSuccessful() and r.testsRun and len(r.skipped) == r.testsRun:
        sys.exit(77)
    sys.exit(0 if r.wasSuccessful() else 1)
