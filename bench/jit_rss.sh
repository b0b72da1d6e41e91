#!/usr/bin/env bash
# bench/jit_rss.sh — the agent's memory while it walks and names JVMs and node processes
# (docs/benchmarks.md, "Java frames walked in the kernel"). Not a test: prints figures to copy
# into the docs. Needs root, a JDK ($PF_JAVA_HOME, else Debian's OpenJDK 17) and node.
#
# JVMS (5) JVMs and NODES (10) node processes run chains of functions in bursts (about 10 %
# of a CPU each, so that all of them are sampled without starving the host); each JVM's
# classes and each node process's functions are its own (a source written per process), so
# no two share names. The whole agent runs standalone (no controller) with a file exporter,
# sampling every java and node process at 99 Hz in 10 s windows; after SECONDS_RUN (60) its
# peak RSS (VmHWM) and RSS are read from /proc, with its Java and Node.js counters from
# /metrics.
#
#   sudo PF_AGENT=build/ci/agent/profleet-agent bench/jit_rss.sh
# Environment: PF_AGENT (a profleet-agent binary; default build/bench-release's, built Release
#   when missing), JVMS (5), NODES (10), SECONDS_RUN (60).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
jvms=${JVMS:-5}
nodes=${NODES:-10}
secs=${SECONDS_RUN:-60}
. "$root/bench/sample_common.sh"
jdk_setup
node=$(command -v node) || { echo "no node on PATH" >&2; exit 2; }
agent=${PF_AGENT:-}
if [ -z "$agent" ]; then
	build=${PF_BUILD_DIR:-$root/build/bench-release}
	agent=$build/agent/profleet-agent
	if [ ! -x "$agent" ]; then
		cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
		cmake --build "$build" -j2 --target profleet-agent >/dev/null
	fi
fi
tmp=$(mktemp -d /tmp/pf-jitrss.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

life=$((secs + 60))
for i in $(seq "$jvms"); do
	mkdir -p "$tmp/j$i"
	cat > "$tmp/j$i/Svc$i.java" <<EOF
public class Svc$i {
  static long leaf$i(long i) { long x = i; for (long k = 0; k < 50; k++) x = x * 31 + (x >>> 7); return x; }
  static long middle$i(long n) { long x = 0; for (long i = 0; i < n; i++) x += leaf$i(i ^ x) & 7; return x; }
  static long outer$i(long end) throws Exception {
    long t = 0;
    while (System.currentTimeMillis() < end) {
      long burst = System.currentTimeMillis() + 10;
      while (System.currentTimeMillis() < burst) t += middle$i(2000);
      Thread.sleep(100);
    }
    return t;
  }
  public static void main(String[] a) throws Exception {
    System.out.println(outer$i(System.currentTimeMillis() + 1000L * Long.parseLong(a[0])));
  }
}
EOF
	"$jdk/bin/javac" -d "$tmp/j$i" "$tmp/j$i/Svc$i.java"
done
for i in $(seq "$nodes"); do
	cat > "$tmp/svc$i.js" <<EOF
function leaf$i(n) { let x = 0; for (let k = 0; k < n; k++) x = (x * 31 + k) | 0; return x; }
function middle$i() { return leaf$i(20000); }
function outer$i() { let t = 0; const end = Date.now() + 10; while (Date.now() < end) t += middle$i(); return t; }
const stop = Date.now() + 1000 * Number(process.argv[2]);
const timer = setInterval(() => { outer$i(); if (Date.now() > stop) clearInterval(timer); }, 100);
EOF
done

cat > "$tmp/agent.yaml" <<EOF
profiling:
  sampling: {frequency_hz: 99, duration_seconds: 10}
  filters:
    include:
      - {key: process.executable.name, match: strict, value: java}
      - {key: process.executable.name, match: strict, value: node}
  exporters:
    - {type: file, path: "$tmp/out-dir"}
EOF
mkdir -p "$tmp/out-dir"
port=$((20000 + RANDOM % 20000))
"$agent" --config "$tmp/agent.yaml" --state-dir "$tmp/state" --log-level warn \
	--metrics-listen "127.0.0.1:$port" > "$tmp/agent.log" 2>&1 &
apid=$!
pids+=("$apid")
sleep 2 # the agent is sampling before the runtimes start
for i in $(seq "$jvms"); do
	"$jdk/bin/java" -Xmx64m -cp "$tmp/j$i" "Svc$i" "$life" >/dev/null & pids+=($!)
done
for i in $(seq "$nodes"); do
	"$node" "$tmp/svc$i.js" "$life" & pids+=($!)
done
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
sleep "$secs"
grep -E '^(VmHWM|VmRSS|RssAnon)' "/proc/$apid/status" | tr -s ' \t' ' '
curl -s "http://127.0.0.1:$port/metrics" |
	grep -E '^profleet_agent_(java|nodejs)_(processes|processes_walked|frames_total|kernel_frames_total|names_total|names_bytes) ' || true
echo "windows written: $(find "$tmp/out-dir" -type f | wc -l)"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
