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
# cost, as a percentage of one CPU. `perf record -F 99 -g -a` runs over the same span for a
# ratio from the same run (the machine is shared: use the ratio). Also: the controller's CPU
# over the span (it ingests the agent's profiles), the agent's peak RSS and its RSS at the end
# (anonymous, file-backed: its libraries, the mapped unwind-row array; shared memory).
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

tmp=$(mktemp -d /tmp/pf-whole.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
mport=$(free_port)
url="http://127.0.0.1:$port"

if [ "${WORKLOAD:-workload}" = nofp ]; then
	cc -O2 -fomit-frame-pointer -g -o "$tmp/workload" "$root/tests/ebpf/nofp_workload.c" -ldl
else
	cc -O0 -fno-omit-frame-pointer -g -o "$tmp/workload" "$root/tests/ebpf/workload.c"
fi

"$ctl_bin" --listen "127.0.0.1:$port" --data-dir "$tmp/data" >"$tmp/ctl.log" 2>&1 &
ctl=$!
pids+=("$ctl")
for _ in $(seq 1 100); do
	curl -fs "$url/readyz" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -fs "$url/readyz" >/dev/null || { echo "agent_whole: controller not ready" >&2; tail "$tmp/ctl.log" >&2; exit 1; }
admin=$(cat "$tmp/data/admin.token")
# max_cpu_percent: the figure is the agent at 99 Hz; its overhead guard (default 1 %) would halve
# the frequency while the first windows open files and resolve first addresses (its own
# tests pin that behaviour). The guard's frequency changes, if any, are printed at the end.
printf 'profiling:\n  sampling: {frequency_hz: 99, duration_seconds: 10}\n  limits: {max_cpu_percent: 10}\n  exporters:\n    - {type: otlp_http, endpoint: "%s/v1development/profiles", auth: agent_token}\n' "$url" |
	curl -fs -X PUT -H "Authorization: Bearer $admin" --data-binary @- \
		"$url/api/v1/configs/default" >/dev/null

ncpu=$(nproc)
for _ in $(seq "$ncpu"); do
	"$tmp/workload" $((warm + secs + 30 + ${PF_KEEP_AGENT:-0})) >/dev/null &
	pids+=($!)
done
state=$tmp/agent-state
if [ -n "${PF_CACHE_DIR:-}" ]; then
	mkdir -p "$state"
	ln -s "$PF_CACHE_DIR" "$state/unwind"
fi
"$agent_bin" --server "ws://127.0.0.1:$port/v1/opamp" --token-file "$tmp/data/agent.token" \
	--state-dir "$state" --metrics-listen "127.0.0.1:$mport" >"$tmp/agent.log" 2>&1 &
agent=$!
pids+=("$agent")

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
sleep "$warm"
kill -0 "$agent" 2>/dev/null || { echo "agent_whole: the agent exited" >&2; tail "$tmp/agent.log" >&2; exit 1; }

hz=$(getconf CLK_TCK)
# user+sys ns of a pid; BPF + table-builder seconds from the agent's metrics
proc_ns() { awk -v hz="$hz" '{ sub(/.*\) /, ""); print ($12 + $13) * 1e9 / hz }' "/proc/$1/stat"; }
# sum of a metric family's samples, times $2 (1e9: seconds to ns)
metric_sum() {
	curl -fs "http://127.0.0.1:$mport/metrics" |
		awk -v m="$1" -v k="${2:-1e9}" '$1 ~ "^profleet_agent_"m"({|$)" { s += $2 } END { printf "%.0f\n", s * k }'
}
# "agent-ns controller-ns bpf-ns builder-ns bpf-runs mono-ns", now
snapshot() {
	echo "$(proc_ns "$agent") $(proc_ns "$ctl") $(metric_sum bpf_run_time_seconds_total)" \
		"$(metric_sum sampler_unwind_builder_cpu_seconds_total)" \
		"$(metric_sum bpf_run_count_total 1) $(date +%s%N)"
}
read -r a0 c0 b0 u0 n0 t0 <<<"$(snapshot)"
python3 "$root/bench/perf_cpu.py" "$secs" "$tmp/perf.data" >"$tmp/perf.ns" &
perf_job=$!
sleep "$secs"
read -r a1 c1 b1 u1 n1 t1 <<<"$(snapshot)"
wait "$perf_job" || true
perf_ns=$(cat "$tmp/perf.ns" 2>/dev/null || echo 0)
hwm=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$agent/status")
rss=$(awk '/^(VmRSS|RssAnon|RssFile|RssShmem):/ { printf "%s %s kB, ", $1, $2 }' "/proc/$agent/status")
windows=$(curl -fs "http://127.0.0.1:$mport/metrics" |
	awk '$1 ~ /^profleet_agent_profiles_collected_total/ { s += $2 } END { print s + 0 }')

python3 - "$a0" "$a1" "$b0" "$b1" "$u0" "$u1" "$n0" "$n1" "$c0" "$c1" "$t0" "$t1" "$perf_ns" <<'PY'
import sys
a0, a1, b0, b1, u0, u1, n0, n1, c0, c1, t0, t1, perf = map(float, sys.argv[1:])
span = t1 - t0
pct = lambda ns: ns / span * 100
agent, bpf, builder = a1 - a0, b1 - b0, u1 - u0
total = agent + bpf + builder
print(f"== whole agent, warm: {span / 1e9:.0f} s after the warm-up ==")
print(f"profleet-agent: user+sys {pct(agent):.3f}% + BPF {pct(bpf):.3f}% + table builder "
      f"{pct(builder):.3f}% = {pct(total):.3f}% of one CPU"
      f" ({bpf / max(n1 - n0, 1) / 1000:.2f} us per BPF program run)")
print(f"controller (ingesting the agent's profiles): {pct(c1 - c0):.3f}% of one CPU")
if perf:
    print(f"perf record -F 99 -g -a, same span: user+sys {perf / span * 100:.3f}%;"
          f" ratio agent/perf {total / perf:.2f}")
PY
[ -z "${PF_KEEP_AGENT:-}" ] || { echo "agent pid $agent (PF_KEEP_AGENT: sleeping $PF_KEEP_AGENT s)"; sleep "$PF_KEEP_AGENT"; }
echo "agent peak RSS: $((hwm / 1024)) MB ($hwm kB); at the end: ${rss%, }; profiles collected: $windows"
guard=$(grep -c 'overhead guard: sampling at' "$tmp/agent.log" || true)
[ "$guard" = 0 ] || { echo "the overhead guard changed the frequency $guard times:"; grep 'overhead guard: sampling at' "$tmp/agent.log" | tail -4; }
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
