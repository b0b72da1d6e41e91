#!/usr/bin/env bash
# bench/agent_dwarf_peak.sh — the agent's peak RSS when a program with full DWARF appears on
# the host: the real profleet-agent (controller on loopback, 99 Hz, 10 s windows, one busy
# workload per CPU), warm for WARM seconds; then `python3 -c <busy loop>` runs for 30 s beside
# it (the interpreter on PATH: a pyenv build has a -g libpython, 23 MB with 9 MB of
# .debug_info), and 12 s after it the agent's peak RSS (VmHWM) and RSS are read. Prints the
# peak before and after, the RSS parts at the end and the symbolizer's line-table counters
# (tables built, the builder child's peak RSS: DWARF is decoded there). Not a test: figures
# for docs/benchmarks.md. Needs root (BPF, perf events).
#
#   sudo bench/agent_dwarf_peak.sh
# Environment: PF_BUILD_DIR (default build/ci), WARM (22), PF_CACHE_DIR (as agent_whole.sh).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${PF_BUILD_DIR:-$root/build/ci}
warm=${WARM:-22}
. "$root/bench/agent_common.sh"
bench_setup dwarf-peak

mport=$(free_port)
build_workload
start_controller "$build/controller/profleet-controller"
start_workloads $((warm + 60))
start_agent "$build/agent/profleet-agent" agent "$mport"
sleep "$warm"
kill -0 "$agent" 2>/dev/null || { echo "agent_dwarf_peak: the agent exited" >&2; tail "$tmp/agent.log" >&2; exit 1; }
read -r hwm0 _ <<<"$(agent_rss "$agent")"
python3 -c '
import time
t = time.time()
while time.time() - t < 30:
    sum(range(1000))
'
sleep 12
read -r hwm1 rss1 <<<"$(agent_rss "$agent")"
echo "agent peak RSS before the -g program: $((hwm0 / 1024)) MB ($hwm0 kB); after: $((hwm1 / 1024)) MB ($hwm1 kB)"
echo "at the end: $rss1"
curl -fs "http://127.0.0.1:$mport/metrics" |
	awk '$1 ~ /^profleet_agent_symbolizer_line_(table|deferred)/ { printf "%s %s  ", $1, $2 } END { print "" }'
