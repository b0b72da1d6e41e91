#!/usr/bin/env python3
"""bench/ctl_wait_latency.py — what `profleetctl capture --wait` adds on top of the capture:
the time from the agent's final capture.status to profleetctl having printed the result and
exited (its poll interval is 0.5 s; the agent finishes at a random point of it), and the whole
command against the capture's duration (which includes that random wait of 0..0.5 s).

The controller is the real one; the agent is capture-fake-agent (real OpAMP over a real
WebSocket) which, on capture.request, waits the duration, posts one real OTLP profile tagged
with the capture id and reports `done` — as tests/integration/test_ctl.py does.

    PF_BUILD_DIR=build/dev PF_SHARED_DIR=<dir with reference/proto> \\
        python3 bench/ctl_wait_latency.py [--duration 2] [--reps 10]

Needs protoc and the reference protos. Everything started is stopped; every wait is bounded.
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
BUILD = os.environ.get("PF_BUILD_DIR", os.path.join(HERE, "..", "build", "dev"))
os.environ.setdefault("PF_CONTROLLER_BIN", os.path.join(BUILD, "controller",
                                                        "profleet-controller"))
os.environ.setdefault("PF_FAKE_AGENT_BIN", os.path.join(BUILD, "tests", "integration",
                                                        "capture-fake-agent"))
CTL = os.path.join(BUILD, "ctl", "profleetctl")

import pfharness  # noqa: E402
import test_captures_api  # noqa: E402
import test_profstore  # noqa: E402


def profile(uid, cid, n):
    text = test_profstore.TEXT % {"service": "bench", "start": time.time_ns() - 10**9,
                                  "hot": 90, "cold": 10}
    text = text.replace('profile_id: "0123456789abcdef"', 'profile_id: "bench-%010d"' % n)
    text = text.replace(
        '    attributes { key: "profleet.agent.uid" value { string_value: "agent-1" } }',
        '    attributes { key: "profleet.agent.uid" value { string_value: "%s" } }\n'
        '    attributes { key: "profleet.capture.id" value { string_value: "%s" } }'
        % (uid, cid))
    return test_profstore.encode_text(text), (b"bench-%010d" % n).hex()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="pf-bench-ctl-")
    c = agent = None
    try:
        c = pfharness.Controller(work).start()
        uid = "0190b000-0000-7000-8000-000000000001"
        agent = test_captures_api.FakeAgent(c, uid=uid, labels=["env=bench"])
        pfharness.wait_until(lambda: c.request("GET", "/api/v1/agents/" + uid)[0] == 200,
                             timeout=10, what="fake agent")
        after_final, over_duration = [], []
        rnd = random.Random(1)
        for n in range(args.reps):
            t0 = time.monotonic()
            p = subprocess.Popen([CTL, "--server", c.base, "--token", c.admin_token, "capture",
                                  "--agents", "env=bench", "--duration", "%ds" % args.duration,
                                  "--wait"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            cid = agent.next_custom("capture.request")["id"]
            body, pid = profile(uid, cid, n)
            # "sampling", ending at a random point of profleetctl's 0.5 s poll cycle
            time.sleep(max(0.0, args.duration + rnd.uniform(0, 0.5) - (time.monotonic() - t0)))
            st, _, _ = c.request("POST", "/v1development/profiles", body,
                                 token=c.agent_token, headers=test_profstore.PROTOBUF)
            assert st == 200, st
            agent.status(id=cid, state="done", samples=100, profile_ids=[pid])
            t_final = time.monotonic()
            out, err = p.communicate(timeout=60)
            t_exit = time.monotonic()
            assert p.returncode == 0, err
            after_final.append((t_exit - t_final) * 1000)
            over_duration.append((t_exit - t0 - args.duration) * 1000)
            print("  rep %d: %.0f ms after the final status" % (n, after_final[-1]))

        def fmt(xs):
            xs = sorted(xs)
            return "p50 %.0f ms, max %.0f ms" % (statistics.median(xs), xs[-1])
        print("capture --wait, %d s captures, %d reps:" % (args.duration, args.reps))
        print("  agent's final status -> profleetctl exited: " + fmt(after_final))
        print("  whole command minus the duration:           " + fmt(over_duration))
    finally:
        if agent:
            agent.stop()
        if c:
            c.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
