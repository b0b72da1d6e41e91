#!/usr/bin/env python3
"""bench/capture_latency.py — incident capture latency (docs/benchmarks.md "Incident captures").

From the POST /api/v1/captures to the capture's flame graph being queryable
(GET /api/v1/flamegraph?capture_id=ID returns samples), for captures of 4 s and 30 s, on
  - one real profleet-agent (eBPF, as root) profiling a known workload, and
  - 200 simulated agents (bench/capture_sim.c: real OpAMP connections and real OTLP uploads
    to the controller's receiver, one profile each).
Target: latency <= duration + 1 s. Prints one row per capture and a Markdown summary; exits 1
when a capture does not end `done` or misses the target.

  sudo bench/capture_latency.py                  all scenarios
  SIM_AGENTS=500 REPEAT=5 bench/capture_latency.py
Environment: PF_BUILD_DIR (default build/bench-release, else build/ci), SIM_AGENTS (200),
REPEAT (3 captures of 4 s per scenario; one of 30 s), SKIP_30S=1, SKIP_REAL=1.
Every wait is bounded; everything started is stopped on exit.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchenv  # noqa: E402

ROOT = benchenv.ROOT
BUILD = benchenv.setup("capture_latency")
import pfharness  # noqa: E402  (after the environment it reads)
from pfharness import Agent, Controller, Proc, wait_until  # noqa: E402

SIM_BIN = os.path.join(BUILD, "bench", "capture-sim")
SIM_AGENTS = int(os.environ.get("SIM_AGENTS", "200"))
REPEAT = int(os.environ.get("REPEAT", "3"))


def post_capture(ctl, body):
    st, resp, _ = ctl.request("POST", "/api/v1/captures", body=json.dumps(body),
                              headers={"Content-Type": "application/json"})
    if st != 202:
        raise RuntimeError("POST /api/v1/captures: %d %r" % (st, resp))
    return resp["id"]


def flame_samples(ctl, cid):
    st, body, _ = ctl.request("GET", "/api/v1/flamegraph?capture_id=" + cid)
    return body.get("value", 0) if st == 200 and isinstance(body, dict) else 0


def cpu_s(pid):
    """User + system CPU seconds of a process so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(ctl, body, expect_agents):
    """(seconds to `done`, seconds to a queryable flame graph, final capture, controller CPU s)."""
    cpu0 = cpu_s(ctl.proc.p.pid)
    t0 = time.monotonic()
    cid = post_capture(ctl, body)
    t_done = None
    cap = None
    deadline = body["duration_seconds"] + 60
    while time.monotonic() - t0 < deadline:
        st, cap, _ = ctl.request("GET", "/api/v1/captures/" + cid)
        if st == 200 and cap["state"] in ("done", "partial", "failed", "cancelled"):
            t_done = time.monotonic() - t0
            break
        time.sleep(0.02)
    if t_done is None:
        raise RuntimeError("capture %s did not end in %d s" % (cid, deadline))
    t_flame = None
    while time.monotonic() - t0 < deadline:
        if flame_samples(ctl, cid) > 0:
            t_flame = time.monotonic() - t0
            break
        time.sleep(0.02)
    done = sum(1 for a in cap["agents"] if a["state"] == "done")
    return (t_done, t_flame, cap, done == expect_agents and cap["state"] == "done",
            cpu_s(ctl.proc.p.pid) - cpu0)


def run_scenario(name, ctl, body, expect_agents, rows):
    durations = [4] * REPEAT + ([] if os.environ.get("SKIP_30S") else [30])
    for d in durations:
        b = dict(body, duration_seconds=d)
        t_done, t_flame, cap, ok, cpu = measure(ctl, b, expect_agents)
        met = ok and t_flame is not None and t_flame <= d + 1.0
        rows.append((name, d, t_done, t_flame, cap["state"], met, cpu))
        print("%-22s %2d s capture: done after %.3f s, flame graph after %s (%s), controller "
              "CPU %.0f ms%s" % (
                  name, d, t_done, "%.3f s" % t_flame if t_flame else "never", cap["state"],
                  cpu * 1000, "" if met else "  <-- target missed"), flush=True)


def main():
    tmp = tempfile.mkdtemp(prefix="pf-capbench-")
    procs = []
    rows = []
    try:
        ctl = Controller(tmp, extra=["--log-level", "warn"]).start()
        procs.append(ctl)
        if not os.environ.get("SKIP_REAL"):
            if os.geteuid() != 0:
                print("real agent scenario skipped: needs root for eBPF")
            else:
                wl_bin = os.path.join(tmp, "capbench-workload")
                subprocess.run(["cc", "-O0", "-fno-omit-frame-pointer", "-g", "-o", wl_bin,
                                os.path.join(ROOT, "tests", "ebpf", "workload.c")],
                               check=True, timeout=60)
                wl = subprocess.Popen([wl_bin, "600"], stdout=subprocess.PIPE,
                                      stdin=subprocess.DEVNULL)
                wl.stdout.readline()
                agent = Agent(tmp, "real", server="ws://127.0.0.1:%d/v1/opamp" % ctl.port,
                              token_file=ctl.agent_token_file, labels=["bench=real"]).start()
                procs.append(agent)
                uid = agent.uid()
                wait_until(lambda: ctl.request("GET", "/api/v1/agents/" + uid)[0] == 200 and
                           "eBPF sampler loaded" in agent.proc.output(), timeout=30,
                           what="the real agent connected with its sampler")
                try:
                    run_scenario("1 real agent", ctl, {
                        "agents": "bench=real", "frequency_hz": 99,
                        "processes": [{"key": "process.pid", "match": "strict",
                                       "value": str(wl.pid)}]}, 1, rows)
                finally:
                    wl.kill()
                    wl.wait(timeout=5)
        sim = Proc([SIM_BIN, "--port", str(ctl.port), "--token-file", ctl.agent_token_file,
                    "--agents", str(SIM_AGENTS), "--label", "bench=sim"],
                   os.path.join(tmp, "capture-sim.log"))
        procs.append(sim)
        wait_until(lambda: ("ready %d" % SIM_AGENTS) in sim.output() or
                   (not sim.alive() and sys.exit("capture-sim exited:\n" + sim.output())),
                   timeout=60, what="capture-sim agents connected")
        run_scenario("%d simulated agents" % SIM_AGENTS, ctl,
                     {"agents": "bench=sim", "frequency_hz": 99}, SIM_AGENTS, rows)
        lags = sorted(float(l.split()[3]) for l in sim.output().splitlines()
                      if l.startswith("uploaded "))
        if lags:
            print("simulated uploads: %d, upload done after the capture's end: median %.0f ms, "
                  "p90 %.0f ms, max %.0f ms" % (len(lags), lags[len(lags) // 2],
                                               lags[int(len(lags) * 0.9)], lags[-1]))
    finally:
        for p in reversed(procs):
            try:
                p.stop()
            except Exception:
                pass
        shutil.rmtree(tmp, ignore_errors=True)

    print("\n| agents | capture | POST → done | POST → flame graph | over duration | "
          "controller CPU | target ≤ +1 s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, d, t_done, t_flame, state, met, cpu in rows:
        print("| %s | %d s | %.2f s | %s | %s | %.0f ms | %s |" % (
            name, d, t_done, "%.2f s" % t_flame if t_flame else "never",
            "+%.2f s" % (t_flame - d) if t_flame else "-", cpu * 1000,
            "met" if met else "MISSED"))
    missed = [r for r in rows if not r[5]]
    print("summary: %d captures, %d missed the target" % (len(rows), len(missed)))
    return 1 if missed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
