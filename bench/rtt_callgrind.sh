#!/usr/bin/env bash
# bench/rtt_callgrind.sh — user-space instructions per OpAMP round trip in the controller
# (docs/benchmarks.md, "Control plane"), an exact count that the machine's load does not move.
#
# Starts the controller under callgrind with instrumentation off, connects AGENTS looping
# agents with opamp-load --mode rtt, switches instrumentation on once they are all connected
# (CONNECT_WAIT seconds in) and off when the run ends, then divides the instructions of that
# window by the OpAMP messages handled in it (calls of pf_opamp_session_handle). Every message
# in the window is a heartbeat answered with an ack, so that is the cost of one round trip:
# lws' service and parsing, the session, the codec, the write, up to the send() and recv()
# calls (what the kernel does in them is not counted).
#
#   bench/rtt_callgrind.sh                    the controller of $PF_BUILD_DIR
#   CONTROLLER=/path/profleet-controller bench/rtt_callgrind.sh
#
# Environment (all optional):
#   PF_BUILD_DIR   build dir (default build/bench-release, built as control_plane.sh does)
#   CONTROLLER     controller binary (default $PF_BUILD_DIR/controller/profleet-controller)
#   OPAMP_LOAD     opamp-load binary (default $PF_BUILD_DIR/bench/opamp-load)
#   AGENTS         looping agents (default 1000)
#   SECONDS_RUN    length of the opamp-load rtt window (default 25)
#   CONNECT_WAIT   seconds from the start of opamp-load to switching instrumentation on
#                  (default 8: the agents connect and send their first status under valgrind)
#   OUT            callgrind output file (default: a temporary file, removed)
# Prints "instructions_per_round_trip: N" and the counts it came from; exit 1 when a step
# fails. Everything it starts is stopped on exit; opamp-load bounds the run (--timeout).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${PF_BUILD_DIR:-$root/build/bench-release}
ctrl=${CONTROLLER:-$build/controller/profleet-controller}
load=${OPAMP_LOAD:-$build/bench/opamp-load}
agents=${AGENTS:-1000}
secs=${SECONDS_RUN:-25}
wait_s=${CONNECT_WAIT:-8}

for tool in valgrind callgrind_control callgrind_annotate; do
	command -v "$tool" >/dev/null || { echo "rtt_callgrind.sh: $tool not found" >&2; exit 1; }
done
if [ ! -x "$load" ] || [ ! -x "$ctrl" ]; then
	[ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build "$build" -j2 --target opamp-load profleet-controller
fi

tmp=$(mktemp -d /tmp/pf-rtt-cg.XXXXXX)
out=${OUT:-$tmp/callgrind.out}
vg_pid="" load_pid=""
cleanup() {
	for p in $load_pid $vg_pid; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in $load_pid $vg_pid; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --instr-atstart=no \
	--callgrind-out-file="$out" "$ctrl" --listen "127.0.0.1:$port" --data-dir "$tmp" \
	>"$tmp/controller.log" 2>&1 &
vg_pid=$!
for _ in $(seq 600); do
	[ -s "$tmp/agent.token" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	kill -0 "$vg_pid" 2>/dev/null || { echo "rtt_callgrind.sh: controller exited" >&2; tail -5 "$tmp/controller.log" >&2; exit 1; }
	sleep 0.1
done
"$load" --mode rtt --agents "$agents" --seconds "$secs" --port "$port" --data-dir "$tmp" \
	--pid "$vg_pid" --timeout $((secs + wait_s + 60)) >"$tmp/load.out" 2>&1 &
load_pid=$!
sleep "$wait_s"
callgrind_control -i on "$vg_pid" >/dev/null
rc=0
wait "$load_pid" || rc=$?
load_pid=""
callgrind_control -i off "$vg_pid" >/dev/null
# The controller writes the profile as it exits: give it 30 s, then stop it.
kill -TERM "$vg_pid"
timeout 30 tail --pid="$vg_pid" -f /dev/null || kill -KILL "$vg_pid" 2>/dev/null || true
wait "$vg_pid" 2>/dev/null || true
vg_pid=""
if [ $rc -ne 0 ]; then
	echo "rtt_callgrind.sh: opamp-load failed:" >&2
	tail -5 "$tmp/load.out" >&2
	exit 1
fi

total=$(callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
msgs=$(callgrind_annotate --tree=calling "$out" |
	awk '/> .*pf_opamp_session_handle \(/ { s = $0; sub(/.*\(/, "", s); sub(/x\).*/, "", s);
	     gsub(",", "", s); n += s } END { print n + 0 }')
if [ -z "$total" ] || [ "$msgs" -eq 0 ]; then
	echo "rtt_callgrind.sh: no instrumented round trips (raise CONNECT_WAIT or SECONDS_RUN)" >&2
	exit 1
fi
echo "instructions: $total"
echo "round_trips: $msgs"
echo "instructions_per_round_trip: $((total / msgs))"
