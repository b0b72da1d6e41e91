#!/usr/bin/env bash
# bench/python_sample_cost.sh — what a sample of a Python process costs in the kernel beside a
# native process of the same stack depth (docs/benchmarks.md, "Python frames"). Not a test:
# prints figures to copy into the docs. Needs root (BPF, perf events) and /usr/bin/python3.11.
#
# Rounds alternate (interleaved, so a change in the host's load hits both alike) between
#   python  one Python process per CPU running main -> outer -> middle -> leaf (pure Python:
#           Debian's interpreter has no frame pointers, so the tables walk its native frames,
#           then the Python walk replaces the eval loop's frame with the five Python ones)
#   native  one C process per CPU (-O2 -fomit-frame-pointer) whose stacks have as many frames
#           as the Python process's (measured first from its folded stacks)
# each sampled by profleet-sample at HZ with an in-kernel filter on its executable name and
# kernel.bpf_stats_enabled on, running the program with clock reads between its parts
# (PF_BENCH_TIMING, profleet-sample -B 16): the time of each part of the ticks the workload's
# samples were recorded from, summed in the kernel, so the other processes' ticks (filtered)
# are left out. Per round, µs per recorded sample: the whole tick and its user-stack part (the
# table walk, then the Python walk); the summary gives the medians and python / native.
#
#   sudo bench/python_sample_cost.sh
# Environment: PF_BUILD_DIR (default build/bench-release, built Release when missing) or
#   PF_SAMPLE (a profleet-sample binary), SECONDS_RUN (20), RUNS (3), HZ (99).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
secs=${SECONDS_RUN:-20}
runs=${RUNS:-3}
hz=${HZ:-99}
py=/usr/bin/python3.11
. "$root/bench/sample_common.sh"
sample_setup pycost

cat > "$tmp/chain.py" <<'EOF'
import sys, time
def leaf(n):
    x = 0
    for i in range(n):
        x += i
    return x
def middle(end):
    while time.monotonic() < end:
        leaf(5000)
def outer(end):
    middle(end)
def main():
    outer(time.monotonic() + float(sys.argv[1]))
main()
EOF
filter() { # executable name
	cat > "$tmp/$1.yaml" <<EOF
profiling:
  sampling: {frequency_hz: $hz, duration_seconds: 10}
  filters:
    include:
      - {key: process.executable.name, match: strict, value: $1}
EOF
}
filter python3.11
filter native
sysctl -q -w kernel.bpf_stats_enabled=1
ncpu=$(nproc)

# the Python process's stack depth: frames of its most frequent stack
"$py" "$tmp/chain.py" 8 & pypid=$!
sleep 1
"$sample" -c "$tmp/python3.11.yaml" -d 5 -F > "$tmp/folded" 2>/dev/null
kill "$pypid" 2>/dev/null || true
wait "$pypid" 2>/dev/null || true
depth=$(sort -t' ' -k2 -n -r "$tmp/folded" | awk 'NR == 1 { n = split($1, f, ";"); print n - 2 }')
top=$(sort -t' ' -k2 -n -r "$tmp/folded" | head -1 | cut -d' ' -f1 | cut -d';' -f3-)
echo "python stack ($depth frames, root first): $top"
native_chain "$depth" "$tmp/native"

total=$(((secs + 4) * runs * 2 + 10))
for _ in $(seq "$ncpu"); do
	"$py" "$tmp/chain.py" "$total" >/dev/null & pids+=($!)
	"$tmp/native" "$total" & pids+=($!)
done
sleep 1
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== do_sample, µs per recorded sample (${secs} s per run, ${hz} Hz, ${ncpu} of each running) =="
for r in $(seq "$runs"); do
	for v in python3.11 native; do
		"$sample" -c "$tmp/$v.yaml" -d "$secs" -s -t 1 -B 16 > "$tmp/$v.$r.out" 2>/dev/null
		grep '^stats bench_timed=' "$tmp/$v.$r.out" | cut -d' ' -f2- > "$tmp/$v.$r.timed"
		read -r tick ustack n < <(python3 - "$tmp/$v.$r.timed" <<'PY'
import re, sys
d = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", open(sys.argv[1]).read())}
n = max(d.get("bench_timed", 0), 1)
parts = ["filter_ns", "kstack_ns", "ustack_ns", "record_ns", "output_ns"]
print(f"{sum(d.get(k, 0) for k in parts) / n / 1000:.3f} {d.get('ustack_ns', 0) / n / 1000:.3f} {n}")
PY
		)
		echo "$v $tick $ustack" >> "$tmp/results"
		printf '%-10s run %d: %7s µs per recorded sample, user stack %7s µs (%s samples)\n' \
			"$v" "$r" "$tick" "$ustack" "$n"
	done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$root/bench/medians.py" "$tmp/results" "µs per sample,µs user stack" python3.11/native
