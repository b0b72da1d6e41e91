#!/usr/bin/env python3
"""slow_span_latency.py — slow-span profile latency (a benchmark, not a test).

    sudo bench/slow_span_latency.py --agent build/dev/agent/profleet-agent [--spans 30]

Runs a standalone agent (mode triggered, slow_span on at 99 Hz, a file exporter, a filter on the
workload tests/ebpf/workload.c, compiled here) and POSTs --spans slow spans of the workload's
pid, each 300 ms long and ending at the moment it is sent (the worst case: the agent has to
wait for the span's last samples to leave the kernel), one every 250 ms. For each span it
measures the time from the HTTP 200 to the profile file appearing in the exporter's directory
(polled every 2 ms), and prints p50/p95/max, plus the agent's own figure (span arrival to the
profile handed to the exporters, /metrics) and the sample ring's memory. Target: <= 1 s.
Needs root (eBPF). Every wait is bounded."""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "..", "tests", "ebpf", "workload.c")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(fn, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.01)
    sys.exit("timed out waiting for " + what)


def metrics(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        out = {}
        for line in r.read().decode().splitlines():
            if line.startswith("profleet_agent_"):
                k, v = line.rsplit(" ", 1)
                out[k[len("profleet_agent_"):]] = float(v)
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--spans", type=int, default=30)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="pf-ssbench-")
    procs = []
    try:
        name = "pfssb-%d" % os.getpid()
        wl_bin = os.path.join(work, name)
        subprocess.run(["cc", "-O0", "-fno-omit-frame-pointer", "-o", wl_bin, WORKLOAD],
                       check=True)
        port, mport, out = free_port(), free_port(), os.path.join(work, "out")
        cfg = os.path.join(work, "cfg.yaml")
        with open(cfg, "w") as f:
            f.write("profiling:\n  mode: triggered\n  sampling: {frequency_hz: 99}\n"
                    "  filters: {include: [{key: process.executable.name, value: %s}]}\n"
                    "  triggers:\n    slow_span: {enabled: true, threshold_ms: 100, "
                    "max_per_minute: 600, listen: \"127.0.0.1:%d\"}\n"
                    "  exporters: [{type: file, path: \"%s\"}]\n" % (name, port, out))
        log = open(os.path.join(work, "agent.log"), "w")
        ag = subprocess.Popen([a.agent, "--state-dir", os.path.join(work, "state"), "--config",
                               cfg, "--metrics-listen", "127.0.0.1:%d" % mport],
                              stdout=log, stderr=subprocess.STDOUT)
        procs.append(ag)
        wl = subprocess.Popen([wl_bin, "600"], stdout=subprocess.PIPE)
        procs.append(wl)
        wl.stdout.readline()

        def ready():
            try:
                return metrics(mport).get("sample_ring_samples", 0) >= 150
            except OSError:
                return False
        wait(ready, 30, "the agent's ring to hold 1.5 s of the workload")
        lat = []
        seen = set(os.listdir(out)) if os.path.isdir(out) else set()
        for i in range(a.spans):
            end = time.time_ns()
            body = {"resourceSpans": [{"resource": {"attributes": [
                {"key": "process.pid", "value": {"intValue": str(wl.pid)}}]},
                "scopeSpans": [{"spans": [{
                    "traceId": os.urandom(16).hex(), "spanId": os.urandom(8).hex(),
                    "startTimeUnixNano": str(end - 300_000_000), "endTimeUnixNano": str(end),
                    "name": "bench"}]}]}]}
            req = urllib.request.Request("http://127.0.0.1:%d/v1/traces" % port,
                                         data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=5) as r:
                resp = json.loads(r.read() or b"{}")
            t0 = time.monotonic()
            if resp.get("partialSuccess", {}).get("rejectedSpans", "0") not in ("0", 0):
                sys.exit("span rejected: %r" % resp)

            def new_file():
                if not os.path.isdir(out):
                    return None
                n = [f for f in os.listdir(out) if f.endswith(".otlp.pb") and f not in seen]
                return n[0] if n else None
            f = wait(new_file, 5, "the profile file of span %d" % i)
            lat.append(time.monotonic() - t0)
            seen.add(f)
            time.sleep(0.25)
        m = metrics(mport)
        lat.sort()
        pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
        print("spans: %d (300 ms each, ending when sent; 99 Hz)" % len(lat))
        print("file_latency_ms: p50 %.1f p95 %.1f max %.1f" % (pct(0.5), pct(0.95),
                                                                lat[-1] * 1000))
        print("agent_latency_ms: last %.1f max %.1f" % (
            m['span_profile_latency_seconds{stat="last"}'] * 1000,
            m['span_profile_latency_seconds{stat="max"}'] * 1000))
        print("ring: %d samples, %d bytes (bound %d)" % (
            m["sample_ring_samples"], m["sample_ring_bytes"], m["sample_ring_max_bytes"]))
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
