#!/usr/bin/env python3
"""bench/capture_latency.py — incident-capture latency on the controller side
(docs/benchmarks.md, "Incident captures").

From `POST /api/v1/captures` to the capture's merged flame graph
(`GET /api/v1/flamegraph?capture_id=`) holding every agent's profile and the capture being
`done`, with N simulated agents: capture-fake-agent processes speaking real OpAMP over real
WebSockets. Each simulated agent, on capture.request, "samples" for the duration (the driver
waits), then posts one real OTLP profile tagged with the capture id to the receiver with the
agent token and reports `done` with its profile id — what a real agent does after sampling.
What is measured is therefore the controller's part (OpAMP fan-out, ingest, status handling,
the merged view) plus the simulated export; the agent's own encoding is not in it.

    PF_BUILD_DIR=build/dev PF_SHARED_DIR=<dir with reference/proto> \\
        python3 bench/capture_latency.py [--agents 1,200] [--durations 4,30] [--reps 3]

Needs protoc and the reference protos (to make the OTLP bodies, as tests/integration does).
Everything started is stopped at the end; every wait is bounded.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
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

import pfharness  # noqa: E402
import test_captures_api  # noqa: E402
import test_profstore  # noqa: E402

PID_HOLE = b"P" * 16
CAP_HOLE = "X" * 36  # a UUIDv7 capture id has 36 characters
UID_HOLE = "U" * 36


def template():
    """One encoded OTLP request with holes of the right lengths for profile id, capture id
    and agent uid (same lengths, so patching the bytes keeps the protobuf valid)."""
    text = test_profstore.TEXT % {"service": "bench", "start": test_profstore.START_NS,
                                  "hot": 90, "cold": 10}
    text = text.replace('profile_id: "0123456789abcdef"', 'profile_id: "%s"' % PID_HOLE.decode())
    text = text.replace(
        '    attributes { key: "profleet.agent.uid" value { string_value: "agent-1" } }',
        '    attributes { key: "profleet.agent.uid" value { string_value: "%s" } }\n'
        '    attributes { key: "profleet.capture.id" value { string_value: "%s" } }\n'
        '    attributes { key: "profleet.trigger" value { string_value: "on_demand" } }'
        % (UID_HOLE, CAP_HOLE))
    body = test_profstore.encode_text(text)
    assert body.count(PID_HOLE) == 1 and body.count(CAP_HOLE.encode()) == 1
    return body


def one_capture(ctl, agents, uids, body, duration, pool):
    t0 = time.monotonic()
    st, resp, _ = ctl.request("POST", "/api/v1/captures",
                              json.dumps({"agents": "bench=1", "duration_seconds": duration}))
    assert st == 202, resp
    cid = resp["id"]
    for a in agents:
        assert a.next_custom("capture.request", timeout=30)["id"] == cid
    t_sent = time.monotonic()
    for a in agents:
        a.status(id=cid, state="running")
    time.sleep(max(0.0, t0 + duration - time.monotonic()))  # the agents sample

    def export(i):
        pid = os.urandom(16)
        b = body.replace(PID_HOLE, pid).replace(CAP_HOLE.encode(), cid.encode())
        b = b.replace(UID_HOLE.encode(), uids[i].encode())
        s, _, _ = ctl.request("POST", "/v1development/profiles", b, token=ctl.agent_token,
                              headers=test_profstore.PROTOBUF)
        assert s == 200, s
        agents[i].status(id=cid, state="done", samples=100, profile_ids=[pid.hex()])

    list(pool.map(export, range(len(agents))))
    want = 100 * len(agents)

    def ready():
        s, fg, _ = ctl.request("GET", "/api/v1/flamegraph?capture_id=" + cid)
        if s != 200 or fg.get("value") != want:
            return False
        return ctl.request("GET", "/api/v1/captures/" + cid)[1]["state"] == "done"
    pfharness.wait_until(ready, timeout=60, interval=0.01, what="capture %s queryable" % cid)
    t_end = time.monotonic()
    return {"sent_ms": (t_sent - t0) * 1e3, "total_s": t_end - t0,
            "over_ms": (t_end - t0 - duration) * 1e3}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", default="1,200")
    ap.add_argument("--durations", default="4,30")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    if not test_profstore.have_protoc():
        sys.exit("needs protoc and PF_SHARED_DIR/reference/proto")
    test_captures_api.FAKE_BIN = os.environ["PF_FAKE_AGENT_BIN"]
    pfharness.CONTROLLER_BIN = os.environ["PF_CONTROLLER_BIN"]
    body = template()
    rows = []
    for n in [int(x) for x in args.agents.split(",")]:
        wd = tempfile.mkdtemp(prefix="pf-capbench-")
        ctl = pfharness.Controller(wd).start()
        agents, uids = [], []
        try:
            for i in range(n):
                uids.append("0190b000-0000-7000-8000-%012d" % i)
                agents.append(test_captures_api.FakeAgent(ctl, uid=uids[-1],
                                                          labels=["bench=1"]))
            pfharness.wait_until(lambda: ctl.summary()["connected"] == n, timeout=60,
                                 what="%d agents connected" % n)
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                for d in [int(x) for x in args.durations.split(",")]:
                    rs = [one_capture(ctl, agents, uids, body, d, pool)
                          for _ in range(args.reps)]
                    rows.append((n, d, rs))
        finally:
            for a in agents:
                a.stop()
            ctl.stop()
            shutil.rmtree(wd, ignore_errors=True)
    print("| agents | duration | POST → request at every agent (median) | POST → flame graph "
          "complete (median, max) | over the duration (median, max) |")
    print("| --- | --- | --- | --- | --- |")
    for n, d, rs in rows:
        sent = statistics.median(r["sent_ms"] for r in rs)
        tot = [r["total_s"] for r in rs]
        over = [r["over_ms"] for r in rs]
        print("| %d | %d s | %.0f ms | %.2f s, %.2f s | %.0f ms, %.0f ms |"
              % (n, d, sent, statistics.median(tot), max(tot), statistics.median(over),
                 max(over)))


if __name__ == "__main__":
    main()
