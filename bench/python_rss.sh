#!/usr/bin/env bash
# bench/python_rss.sh — the sampler's memory with many Python processes (docs/benchmarks.md,
# "Python frames"). Not a test: prints figures to copy into the docs. Needs root and
# /usr/bin/python3.11.
#
# N Python processes (N=50) run a chain of five functions in bursts (about 2 % of a CPU each,
# so that all of them are sampled without starving the host), each with its own code objects
# (a module written per process). profleet-sample samples every process for SECONDS_RUN
# (30) at 99 Hz, closing a window every 10 s; at its exit it prints its peak RSS and the Python
# counters (processes walked, frames read and named, the name caches' bytes).
#
#   sudo bench/python_rss.sh
# Environment: PF_SAMPLE (a profleet-sample binary; default build/bench-release's, built
#   Release when missing), N (50), SECONDS_RUN (30); PF_AGENT (a profleet-agent binary): the
#   whole agent instead, standalone with a file exporter, its VmHWM/VmRSS after SECONDS_RUN.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
n=${N:-50}
secs=${SECONDS_RUN:-30}
. "$root/bench/sample_common.sh"
sample_setup pyrss

for i in $(seq "$n"); do
	cat > "$tmp/svc$i.py" <<EOF
import sys, time
def leaf_$i(n):
    x = 0
    for i in range(n):
        x += i * i
    return x
def middle_$i():
    leaf_$i(3000)
def outer_$i():
    middle_$i()
def main():
    end = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < end:
        t = time.monotonic() + 0.004
        while time.monotonic() < t:
            outer_$i()
        time.sleep(0.2)
main()
EOF
	/usr/bin/python3.11 "$tmp/svc$i.py" $((secs + 120)) & pids+=($!)
done
sleep 1
cat > "$tmp/all.yaml" <<EOF
profiling:
  sampling: {frequency_hz: 99, duration_seconds: 10}
  filters:
    include:
      - {key: process.executable.name, match: strict, value: python3.11}
EOF
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${PF_AGENT:-}" ]; then
	# the whole agent, standalone (no controller), windows to a file exporter: its peak RSS
	# (VmHWM) and its RSS at the end, read from /proc
	printf '  exporters:\n    - {type: file, path: "%s"}\n' "$tmp/out-dir" >> "$tmp/all.yaml"
	mkdir -p "$tmp/out-dir"
	"$PF_AGENT" --config "$tmp/all.yaml" --state-dir "$tmp/state" --log-level warn \
		> "$tmp/agent.log" 2>&1 &
	agent=$!
	pids+=("$agent")
	sleep "$secs"
	grep -E '^(VmHWM|VmRSS|RssAnon)' "/proc/$agent/status" | tr -s ' \t' ' '
	kill "$agent"
	echo "windows written: $(find "$tmp/out-dir" -type f | wc -l)"
else
	"$sample" -c "$tmp/all.yaml" -d "$secs" -s -t 1 > "$tmp/out" 2>/dev/null
	grep -o 'max_rss_kb=[0-9]*' "$tmp/out" | head -1
	grep '^stats python=' "$tmp/out"
	grep '^stats samples=' "$tmp/out" | cut -c1-120
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
