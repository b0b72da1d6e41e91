#!/usr/bin/env python3
"""bench/rollout_bench.py — a staged rollout over N simulated agents (docs/benchmarks.md
"Staged rollouts").

Starts a controller and opamp-load (N real OpAMP agents), serves v1, stages v2, rolls it out
with pause_seconds 0 and measures: seconds from POST /api/v1/rollouts to `completed`, the
controller's RSS and CPU over the rollout, and the GET of the finished rollout.

  PF_BUILD_DIR=build/dev bench/rollout_bench.py 5000
Every wait is bounded; everything started is stopped on exit.
"""
import json
import os
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
BUILD = os.environ.get("PF_BUILD_DIR", os.path.join(ROOT, "build", "dev"))
os.environ.setdefault("PF_CONTROLLER_BIN", os.path.join(BUILD, "controller", "profleet-controller"))

from pfharness import Controller, Proc, wait_until  # noqa: E402

V1 = "profiling:\n  sampling:\n    frequency_hz: 49\n"
V2 = "profiling:\n  sampling:\n    frequency_hz: 19\n"


def proc_stat(pid):
    rss = next(int(l.split()[1]) for l in open("/proc/%d/status" % pid) if l.startswith("VmRSS"))
    f = open("/proc/%d/stat" % pid).read().split(")")[1].split()
    return rss, (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    wd = tempfile.mkdtemp(prefix="pf-rollout-bench-")
    ctl = Controller(wd).start()
    load = None
    try:
        ctl.put_config("default", V1)
        load = Proc([os.path.join(BUILD, "bench", "opamp-load"), "--mode", "idle", "--agents",
                     str(n), "--port", str(ctl.port), "--data-dir", ctl.data_dir, "--settle",
                     "600", "--timeout", "700", "--uid-seed", "5"], os.path.join(wd, "load.log"))
        wait_until(lambda: ctl.summary()["config_status"]["APPLIED"] >= n, timeout=120,
                   what="all agents APPLIED v1")
        pid = ctl.proc.p.pid
        rss0, cpu0 = proc_stat(pid)
        ctl.request("PUT", "/api/v1/configs/default?stage=1", V2)
        t0 = time.monotonic()
        st, body, _ = ctl.request("POST", "/api/v1/rollouts", json.dumps(
            {"config": "default", "strategy": {"initial": 100, "multiplier": 4,
                                               "pause_seconds": 0}}))
        assert st == 202, body
        rid = body["id"]
        r = wait_until(lambda: (lambda r: r if r["state"] == "completed" else None)(
            ctl.request("GET", "/api/v1/rollouts/" + rid)[1]), timeout=300, interval=0.05,
            what="rollout completed")
        secs = time.monotonic() - t0
        rss1, cpu1 = proc_stat(pid)
        t = time.monotonic()
        ctl.request("GET", "/api/v1/rollouts/" + rid)
        get_ms = (time.monotonic() - t) * 1000
        print("agents=%d batches=%s seconds=%.2f rss_kb=%d->%d cpu_s=%.2f get_ms=%.1f" %
              (n, [b["agents"] for b in r["batches"]], secs, rss0, rss1, cpu1 - cpu0, get_ms))
    finally:
        if load:
            load.stop()
        ctl.stop()


if __name__ == "__main__":
    main()
