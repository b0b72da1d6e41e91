#!/usr/bin/env bash
# bench/java_sample_cost.sh — what a sample of a JVM costs in the kernel, with and without the
# walk of its Java frames, beside a native process of the same stack depth
# (docs/benchmarks.md, "Java frames walked in the kernel"). Not a test: prints figures to copy
# into the docs. Needs root (BPF, perf events) and a JDK ($PF_JAVA_HOME, else Debian's
# OpenJDK 17).
#
# One JVM per CPU runs main -> outer -> middle -> hot (C2 inlines hot into middle; main stays
# interpreted), one C process per CPU (-O2 -fomit-frame-pointer) a chain of calls as deep as
# the JVM's stacks (measured first from its folded stacks). Rounds alternate (interleaved, so
# a change in the host's load hits all alike) between
#   java      the JVMs sampled with profiling.interpreters.java on: the table walk, then
#             jit_walk steps the code cache's frames and goes on by the tables below them
#   javaoff   the same JVMs with it off: the walk ends at the first frame of the code cache
#   native    the C processes
# each by profleet-sample at HZ with an in-kernel filter on the executable name and
# kernel.bpf_stats_enabled on. Per round, do_sample's run time (jit_walk's, tail-called,
# included) over the samples recorded, in µs, and the user frames per sample; the summary
# gives the medians and the ratios.
#
#   sudo bench/java_sample_cost.sh
# Environment: PF_BUILD_DIR (default build/bench-release, built Release when missing) or
#   PF_SAMPLE (a profleet-sample binary), SECONDS_RUN (20), RUNS (3), HZ (99).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
secs=${SECONDS_RUN:-20}
runs=${RUNS:-3}
hz=${HZ:-99}
. "$root/bench/sample_common.sh"
jdk_setup
sample_setup javacost

"$jdk/bin/javac" -d "$tmp" "$root/tests/ebpf/Hot.java" # its one thread: no LIB argument
config() { # name, executable name, java on
	cat > "$tmp/$1.yaml" <<EOF
profiling:
  sampling: {frequency_hz: $hz, duration_seconds: 10}
  interpreters: {java: $3}
  filters:
    include:
      - {key: process.executable.name, match: strict, value: $2}
EOF
}
config java java true
config javaoff java false
config native native true
sysctl -q -w kernel.bpf_stats_enabled=1
ncpu=$(nproc)

# the JVM's stack depth (warm: C2 has compiled middle): frames of its most frequent stack
"$jdk/bin/java" -Xmx64m -cp "$tmp" Hot 14 >/dev/null & jpid=$!
sleep 4
"$sample" -c "$tmp/java.yaml" -d 5 -F > "$tmp/folded" 2>/dev/null
kill "$jpid" 2>/dev/null || true
wait "$jpid" 2>/dev/null || true
# folded lines: "comm;pid;frame;...;frame count", names may hold spaces
folded() { # file: frames per sample over every line; with "top": the most frequent stack
	python3 - "$@" <<'PY'
import sys
rows = []
for line in open(sys.argv[1]):
    if line.startswith("stats") or " " not in line:
        continue
    stack, count = line.rstrip("\n").rsplit(" ", 1)
    rows.append((stack.split(";")[2:], int(count)))
if len(sys.argv) > 2:
    rows = [r for r in rows if any("Hot.main" in f for f in r[0])]
    best = max(rows, key=lambda r: r[1]) if rows else ([], 0)
    print(len(best[0]), ";".join(best[0]))
else:
    n = sum(c for _, c in rows)
    print(f"{sum(len(f) * c for f, c in rows) / n if n else 0:.1f}")
PY
}
read -r depth top < <(folded "$tmp/folded" top)
[ "${depth:-0}" -gt 0 ] || { echo "no stack of the JVM reached Hot.main" >&2; exit 1; }
echo "java stack ($depth frames, root first): $top"
native_chain "$depth" "$tmp/native"

total=$(((secs + 4) * runs * 3 + 20))
for _ in $(seq "$ncpu"); do
	"$jdk/bin/java" -Xmx64m -cp "$tmp" Hot "$total" >/dev/null & pids+=($!)
	"$tmp/native" "$total" & pids+=($!)
done
sleep 5 # C2 compiles middle
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== do_sample, µs per recorded sample (${secs} s per run, ${hz} Hz, ${ncpu} of each running) =="
for r in $(seq "$runs"); do
	for v in java javaoff native; do
		"$sample" -c "$tmp/$v.yaml" -d "$secs" -s -F > "$tmp/$v.$r.out" 2>/dev/null
		line=$(grep '^stats prog=do_sample ' "$tmp/$v.$r.out")
		ns=$(sed -n 's/.*run_time_ns=\([0-9]*\).*/\1/p' <<<"$line")
		samples=$(sed -n 's/^stats samples=\([0-9]*\).*/\1/p' "$tmp/$v.$r.out")
		frames=$(folded "$tmp/$v.$r.out")
		us=$(python3 -c "print(f'{$ns / max($samples, 1) / 1000:.3f}')")
		echo "$v $us $frames" >> "$tmp/results"
		printf '%-8s run %d: %7s µs per recorded sample (%s samples, %s frames each)\n' \
			"$v" "$r" "$us" "$samples" "$frames"
	done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$root/bench/medians.py" "$tmp/results" "µs per sample,frames" java/javaoff java/native
