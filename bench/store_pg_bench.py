#!/usr/bin/env python3
"""bench/store_pg_bench.py — the fleet store on PostgreSQL against SQLite
(docs/benchmarks.md "Fleet store on PostgreSQL").

Starts a throwaway PostgreSQL (tests/integration/pgharness.py: initdb + pg_ctl in a temporary
directory, fsync on, default synchronous_commit, like a real server; the SQLite controller
commits with synchronous=FULL) and measures, one after the other:

  write   API write latency, N sequential requests each (config PUT with a new body,
          assignment PUT, token create + revoke), SQLite controller vs PostgreSQL controller:
          median and p95 in ms as the client sees them;
  notify  two replicas A and B on one PostgreSQL, one real agent (--no-sampler) on B: a config
          PUT through A until B's agent reports it APPLIED (B's API, polled every 2 ms), K
          rounds: median / p95 / max in ms;
  rows    M simulated agents (opamp-load) connect to A: seconds until B's fleet summary
          (read from the agents table) shows them all connected, i.e. A's writer has written
          every row to PostgreSQL.

  PF_BUILD_DIR=build/ci bench/store_pg_bench.py [N=200] [K=20] [M=2000]
Every wait is bounded; everything started is stopped on exit.
"""
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
BUILD = os.environ.get("PF_BUILD_DIR", os.path.join(ROOT, "build", "ci"))
os.environ.setdefault("PF_CONTROLLER_BIN", os.path.join(BUILD, "controller", "profleet-controller"))
os.environ.setdefault("PF_AGENT_BIN", os.path.join(BUILD, "agent", "profleet-agent"))

import pgharness  # noqa: E402
from pfharness import Agent, Controller, Proc, wait_until  # noqa: E402


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def timed(fn):
    t = time.monotonic()
    r = fn()
    return (time.monotonic() - t) * 1000, r


def writes(ctl, n):
    out = {"config PUT": [], "assignment PUT": [], "token create+revoke": []}
    for i in range(n):
        body = "profiling:\n  sampling:\n    frequency_hz: %d\n" % (1 + i % 999)
        ms, (st, j, _) = timed(lambda: ctl.request("PUT", "/api/v1/configs/bench-%d" % (i % 7),
                                                     body))
        assert st in (200, 201), (st, j)
        out["config PUT"].append(ms)
        a = json.dumps({"selector": "bench=%d" % i, "config": "bench-0", "priority": i})
        ms, (st, j, _) = timed(lambda: ctl.request("PUT", "/api/v1/assignments/a%d" % (i % 13), a))
        assert st == 200, (st, j)
        out["assignment PUT"].append(ms)
        t = json.dumps({"name": "b%d" % i, "role": "viewer"})
        ms1, (st, j, _) = timed(lambda: ctl.request("POST", "/api/v1/tokens", t))
        assert st == 201, (st, j)
        ms2, (st, _, _) = timed(lambda: ctl.request("DELETE", "/api/v1/tokens/" + j["id"]))
        out["token create+revoke"].append(ms1 + ms2)
    return out


def replica(wd, name, url, tokens_from=None):
    d = os.path.join(wd, name)
    os.makedirs(d)
    c = Controller(d, extra=["--store", url])
    if tokens_from:
        os.makedirs(c.data_dir, mode=0o700)
        for f in ("admin.token", "agent.token"):
            shutil.copy(os.path.join(tokens_from.data_dir, f), os.path.join(c.data_dir, f))
    return c.start()


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    m = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    bindir = pgharness.find_bindir()
    if not bindir:
        sys.exit("PostgreSQL server binaries missing (install the 'postgresql' package)")
    wd = tempfile.mkdtemp(prefix="pf-pg-bench-")
    pg = pgharness.PgServer(bindir, fsync=True)
    stop = []
    try:
        os.makedirs(os.path.join(wd, "lite"))
        lite = Controller(os.path.join(wd, "lite")).start()
        stop.append(lite)
        a = replica(wd, "a", pg.url)
        stop.append(a)
        res_l, res_p = writes(lite, n), writes(a, n)
        print("write latency, %d sequential requests each (ms, median / p95):" % n)
        for what in res_l:
            print("  %-22s sqlite %6.2f / %6.2f   postgres %6.2f / %6.2f" % (
                what, statistics.median(res_l[what]), pct(res_l[what], 95),
                statistics.median(res_p[what]), pct(res_p[what], 95)))
        lite.stop()

        b = replica(wd, "b", pg.url, tokens_from=a)
        stop.append(b)
        ag = Agent(wd, "on-b", server="ws://127.0.0.1:%d/v1/opamp" % b.port,
                   token_file=b.agent_token_file, extra=["--no-sampler"]).start()
        stop.append(ag)
        uid = ag.uid()
        wait_until(lambda: (lambda r: r[0] == 200 and r[1]["connected"])(
            b.request("GET", "/api/v1/agents/" + uid)), timeout=15, what="agent on B")
        lat = []
        for i in range(k):
            body = "profiling:\n  sampling:\n    frequency_hz: %d\n" % (100 + i)
            t0 = time.monotonic()
            st, j, _ = a.request("PUT", "/api/v1/configs/default", body)
            assert st == 201, (st, j)

            def applied():
                st, x, _ = b.request("GET", "/api/v1/agents/" + uid)
                return st == 200 and x["config"]["status"] == "APPLIED" and \
                    x["config"]["hash"] == j["hash"]
            wait_until(applied, timeout=10, interval=0.002, what="APPLIED on B")
            lat.append((time.monotonic() - t0) * 1000)
        print("config PUT through A -> APPLIED by B's agent, %d rounds (ms): median %.1f, "
              "p95 %.1f, max %.1f" % (k, statistics.median(lat), pct(lat, 95), max(lat)))

        load = Proc([os.path.join(BUILD, "bench", "opamp-load"), "--mode", "idle", "--agents",
                     str(m), "--port", str(a.port), "--data-dir", a.data_dir, "--settle", "600",
                     "--timeout", "700", "--uid-seed", "11"], os.path.join(wd, "load.log"))
        stop.append(load)
        t0 = time.monotonic()
        wait_until(lambda: b.summary()["connected"] >= m + 1, timeout=300, interval=0.1,
                   what="B sees every agent connected to A")
        print("%d simulated agents connect to A until B's summary shows them all: %.2f s" %
              (m, time.monotonic() - t0))
        t0 = time.monotonic()
        b.summary()
        print("B's fleet summary with %d agents read from PostgreSQL: %.1f ms" %
              (m + 1, (time.monotonic() - t0) * 1000))
    finally:
        for p in reversed(stop):
            try:
                p.stop()
            except Exception:
                pass
        pg.destroy()
        shutil.rmtree(wd, ignore_errors=True)


if __name__ == "__main__":
    main()
