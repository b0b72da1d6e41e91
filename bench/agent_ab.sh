#!/usr/bin/env bash
# bench/agent_ab.sh — two builds of the whole agent side by side, for an A/B comparison that
# the host's noise does not decide: both agents run at once against one controller (as two
# hosts' agents would), sample the same busy workloads (one per CPU) at 99 Hz and export
# every 10 s window; after WARM seconds each one's user+sys time, BPF run time and table
# builder CPU are read over the same SECONDS_RUN span, with each one's RSS at the end and at
# its peak. On this shared VM the same build measured a minute apart moves by 2x; side by
# side, both see the same host. Each agent samples the other too (symmetric). Not a test:
# prints figures for docs/benchmarks.md. Needs root (BPF, perf events).
#
#   sudo PF_BUILD_B=/path/to/other/build bench/agent_ab.sh
# Environment: PF_BUILD_A (default build/ci), PF_BUILD_B (required), SECONDS_RUN (60), WARM
#   (25), WORKLOAD (workload or nofp, see agent_common.sh), PF_CACHE_DIR (unwind tables,
#   shared by both: they read it; default a fresh one each).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build_a=${PF_BUILD_A:-$root/build/ci}
build_b=${PF_BUILD_B:?PF_BUILD_B: the other build directory}
secs=${SECONDS_RUN:-60}
warm=${WARM:-25}
for b in "$build_a/controller/profleet-controller" "$build_a/agent/profleet-agent" \
	"$build_b/agent/profleet-agent"; do
	[ -x "$b" ] || { echo "agent_ab: $b not built" >&2; exit 1; }
done

. "$root/bench/agent_common.sh"
bench_setup ab

build_workload
start_controller "$build_a/controller/profleet-controller"
start_workloads $((warm + secs + 30))
port_a=$(free_port)
start_agent "$build_a/agent/profleet-agent" a "$port_a"
agent_a=$agent
port_b=$(free_port)
start_agent "$build_b/agent/profleet-agent" b "$port_b"
agent_b=$agent

echo "A: $build_a; B: $build_b; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
sleep "$warm"
for p in "$agent_a" "$agent_b"; do
	kill -0 "$p" 2>/dev/null || { echo "agent_ab: an agent exited" >&2; tail "$tmp"/[ab].log >&2; exit 1; }
done
t0=$(date +%s%N)
read -r a0 ab0 au0 an0 <<<"$(agent_snapshot "$agent_a" "$port_a")"
read -r b0 bb0 bu0 bn0 <<<"$(agent_snapshot "$agent_b" "$port_b")"
sleep "$secs"
read -r a1 ab1 au1 an1 <<<"$(agent_snapshot "$agent_a" "$port_a")"
read -r b1 bb1 bu1 bn1 <<<"$(agent_snapshot "$agent_b" "$port_b")"
t1=$(date +%s%N)
read -r hwm_a rss_a <<<"$(agent_rss "$agent_a")"
read -r hwm_b rss_b <<<"$(agent_rss "$agent_b")"

python3 - "$t0" "$t1" "$a0" "$a1" "$ab0" "$ab1" "$au0" "$au1" "$an0" "$an1" \
	"$b0" "$b1" "$bb0" "$bb1" "$bu0" "$bu1" "$bn0" "$bn1" <<'PY'
import sys
v = list(map(float, sys.argv[1:]))
span = v[1] - v[0]
pct = lambda ns: ns / span * 100
tot = {}
print(f"== two agents side by side, warm: {span / 1e9:.0f} s after the warm-up ==")
for name, (u0, u1, b0, b1, t0, t1, n0, n1) in (("A", v[2:10]), ("B", v[10:18])):
    user, bpf, builder = u1 - u0, b1 - b0, t1 - t0
    tot[name] = user + bpf + builder
    print(f"{name}: user+sys {pct(user):.3f}% + BPF {pct(bpf):.3f}% + table builder "
          f"{pct(builder):.3f}% = {pct(tot[name]):.3f}% of one CPU"
          f" ({bpf / max(n1 - n0, 1) / 1000:.2f} us per BPF program run)")
print(f"ratio B/A: {tot['B'] / max(tot['A'], 1):.2f}")
PY
echo "A: peak RSS $((hwm_a / 1024)) MB; at the end: $rss_a"
echo "B: peak RSS $((hwm_b / 1024)) MB; at the end: $rss_b"
guard_changes "$tmp/a.log"
guard_changes "$tmp/b.log"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
