#!/usr/bin/env bash
# bench/agent_whole.sh — what the whole agent costs on a host, warm: the real profleet-agent
# (OpAMP client, sampler, symbolizer, OTLP encoding and export, health, metrics) connected to
# a real controller on loopback, at 99 Hz, 10 s windows, exporting every window to the
# controller's embedded store, beside one busy workload per CPU. Not a test: prints figures
# for docs/benchmarks.md. Needs root (BPF, perf events).
#
# After WARM seconds (the BPF load, the first windows' file opens, table loads and first
# addresses), it reads the agent's user+sys time (/proc/PID/stat), its BPF programs' run
# time and its table builder's CPU (its /metrics), then again SECONDS_RUN later: the warm
# cost, as a percentage of one CPU. Then `perf record -F 99 -g -a` runs for SECONDS_RUN more,
# for a ratio from the same run (the machine is shared: use the ratio); not over the agent's
# span, where the agent would profile perf too (new stacks to name, perf's libraries to
# build tables for): the agent's cost while perf runs is printed on its own line. Also: the
# controller's CPU over the agent's span (it ingests the agent's profiles), the agent's peak
# RSS and its RSS at the end (anonymous, file-backed: its libraries, the mapped unwind-row
# array; shared memory).
#
#   sudo bench/agent_whole.sh
# Environment: PF_BUILD_DIR (default build/ci), SECONDS_RUN (60), WARM (25), WORKLOAD
#   (workload: tests/ebpf/workload.c, -O0 with frame pointers; nofp: nofp_workload.c,
#   -O2 without), PF_CACHE_DIR (unwind tables: the agent keeps them in its state directory;
#   default a fresh one, so the first window builds them).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${PF_BUILD_DIR:-$root/build/ci}
secs=${SECONDS_RUN:-60}
warm=${WARM:-25}
ctl_bin=$build/controller/profleet-controller
agent_bin=$build/agent/profleet-agent
for b in "$ctl_bin" "$agent_bin"; do
	[ -x "$b" ] || { echo "agent_whole: $b not built (PF_BUILD_DIR)" >&2; exit 1; }
done

. "$root/bench/agent_common.sh"
bench_setup whole

mport=$(free_port)
build_workload
start_controller "$ctl_bin"
start_workloads $((warm + 2 * secs + 30 + ${PF_KEEP_AGENT:-0}))
start_agent "$agent_bin" agent "$mport"

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
sleep "$warm"
kill -0 "$agent" 2>/dev/null || { echo "agent_whole: the agent exited" >&2; tail "$tmp/agent.log" >&2; exit 1; }

# "agent-ns bpf-ns builder-ns bpf-runs controller-ns mono-ns", now
snapshot() { echo "$(agent_snapshot "$agent" "$mport") $(proc_ns "$ctl") $(date +%s%N)"; }
read -r a0 b0 u0 n0 c0 t0 <<<"$(snapshot)"
sleep "$secs"
read -r a1 b1 u1 n1 c1 t1 <<<"$(snapshot)"
read -r hwm rss <<<"$(agent_rss "$agent")"
windows=$(metric_sum "$mport" profiles_collected_total 1)
python3 "$root/bench/perf_cpu.py" "$secs" "$tmp/perf.data" >"$tmp/perf.ns" || true
read -r a2 b2 u2 n2 c2 t2 <<<"$(snapshot)"
perf_ns=$(cat "$tmp/perf.ns" 2>/dev/null || echo 0)

python3 - "$a0" "$a1" "$a2" "$b0" "$b1" "$b2" "$u0" "$u1" "$u2" "$n0" "$n1" "$n2" \
	"$c0" "$c1" "$t0" "$t1" "$t2" "$perf_ns" <<'PY'
import sys
(a0, a1, a2, b0, b1, b2, u0, u1, u2, n0, n1, n2, c0, c1, t0, t1, t2,
 perf) = map(float, sys.argv[1:])
span, span2 = t1 - t0, t2 - t1
pct = lambda ns, s=span: ns / s * 100
agent, bpf, builder = a1 - a0, b1 - b0, u1 - u0
total = agent + bpf + builder
print(f"== whole agent, warm: {span / 1e9:.0f} s after the warm-up ==")
print(f"profleet-agent: user+sys {pct(agent):.3f}% + BPF {pct(bpf):.3f}% + table builder "
      f"{pct(builder):.3f}% = {pct(total):.3f}% of one CPU"
      f" ({bpf / max(n1 - n0, 1) / 1000:.2f} us per BPF program run)")
print(f"controller (ingesting the agent's profiles): {pct(c1 - c0):.3f}% of one CPU")
if perf:
    total2 = (a2 - a1) + (b2 - b1) + (u2 - u1)
    print(f"perf record -F 99 -g -a, the next {span2 / 1e9:.0f} s: user+sys "
          f"{pct(perf, span2):.3f}%; ratio agent/perf {pct(total) / pct(perf, span2):.2f}")
    print(f"profleet-agent while perf runs (and is profiled): {pct(total2, span2):.3f}% "
          f"(BPF {pct(b2 - b1, span2):.3f}%, table builder {pct(u2 - u1, span2):.3f}%)")
PY
[ -z "${PF_KEEP_AGENT:-}" ] || { echo "agent pid $agent (PF_KEEP_AGENT: sleeping $PF_KEEP_AGENT s)"; sleep "$PF_KEEP_AGENT"; }
echo "agent peak RSS: $((hwm / 1024)) MB ($hwm kB); at the end of its span: $rss; profiles collected: $windows"
read -r hwm2 rss2 <<<"$(agent_rss "$agent")"
echo "after the perf span (the agent symbolized perf too): peak $((hwm2 / 1024)) MB; now $rss2"
guard_changes "$tmp/agent.log"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
