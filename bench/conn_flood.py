#!/usr/bin/env python3
"""Connection flood from one address: does the controller keep serving everyone else?

Starts a controller on 127.0.0.1, measures /healthz latency and the OpAMP upgrade time of a
client on 127.0.0.1 with nothing else going on, then holds HALF_OPEN (default 5000)
connections that never finish their upgrade headers plus SLOWLORIS (default 300) that trickle
one header line every 4 s, all from 127.0.0.2 and reopened when the controller closes them,
and measures the same for SECONDS (default 20). Targets: /healthz within 100 ms and an
agent's upgrade within 1 s during the flood.

Run as root (raises its descriptor limit): `PF_BUILD_DIR=build/ci bench/conn_flood.py`.
Not a test; prints figures for docs/benchmarks.md.
"""
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchenv  # noqa: E402

benchenv.setup("conn_flood")
from pfharness import Controller  # noqa: E402
from flood import Flood, healthz_ms, upgrade_ms  # noqa: E402

HALF = int(os.environ.get("HALF_OPEN", "5000"))
SLOW = int(os.environ.get("SLOWLORIS", "300"))
SECONDS = float(os.environ.get("SECONDS", "20"))
EXTRA = os.environ.get("CONTROLLER_ARGS", "").split()


def summary(name, xs, fails):
    if not xs:
        return "%-22s no answer at all (%d failed)" % (name, fails)
    xs = sorted(xs)
    p99 = xs[min(len(xs) - 1, int(len(xs) * 0.99))]
    return "%-22s n=%-4d p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms  failed %d" % (
        name, len(xs), statistics.median(xs), p99, xs[-1], fails)


def probe(ctl, seconds):
    hz, up = [], []
    hz_fail = up_fail = 0
    end = time.monotonic() + seconds
    next_up = 0.0
    while time.monotonic() < end:
        v = healthz_ms(ctl.port)
        if v is None:
            hz_fail += 1
        else:
            hz.append(v)
        if time.monotonic() >= next_up:
            next_up = time.monotonic() + 1.0
            v = upgrade_ms(ctl.port, ctl.agent_token)
            if v is None:
                up_fail += 1
            else:
                up.append(v)
        time.sleep(0.1)
    return hz, hz_fail, up, up_fail


def main():
    work = tempfile.mkdtemp(prefix="pf-flood-")
    ctl = Controller(work, extra=EXTRA).start()
    try:
        hz, hzf, up, upf = probe(ctl, 5)
        print("quiet:")
        print("  " + summary("/healthz", hz, hzf))
        print("  " + summary("OpAMP upgrade", up, upf))
        flood = Flood(ctl.port, half_open=HALF, slowloris=SLOW).start(settle_s=5)
        print("flood from 127.0.0.2: %d half-open + %d slowloris wanted, held %s after 5 s"
              % (HALF, SLOW, flood.held()))
        hz, hzf, up, upf = probe(ctl, SECONDS)
        held = flood.held()
        flood.stop()
        print("during the flood (%.0f s):" % SECONDS)
        print("  " + summary("/healthz", hz, hzf))
        print("  " + summary("OpAMP upgrade", up, upf))
        print("  attacker: opened %d, closed by the controller %d, held at the end %s"
              % (flood.opened, flood.closed_by_server, held))
        if not ctl.proc.alive():
            print("controller DIED:\n" + ctl.proc.output())
            return 1
        rss = 0
        with open("/proc/%d/status" % ctl.proc.p.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        print("controller RSS after: %.1f MB" % (rss / 1024.0))
    finally:
        ctl.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
