#!/usr/bin/env bash
# bench/control_plane.sh — the control-plane benchmark (docs/benchmarks.md, "Control plane").
#
# Builds opamp-load, ws-echo-baseline and profleet-controller when they are missing, then for
# every run starts a fresh controller on a free loopback port with a temporary data dir, drives
# it with opamp-load, stops it, and finally prints a Markdown table of the results against the
# targets. Everything it starts is killed on exit (trap), and the whole run is bounded.
#
# The rtt step runs twice in a row with the same parameters: first against ws-echo-baseline
# (bench/ws_echo_baseline.c, a bare epoll WebSocket server answering every message with a
# pre-encoded ack: the kernel's recv + send floor), then against the controller. The machine
# is shared and noisy, so the controller's CPU per round trip is reported next to the
# baseline's from the same invocation, as a ratio and as a difference (our own cost above the
# floor). The steady step is paired the same way: a fleet at rest (every agent one heartbeat
# per interval, random phase) against the baseline, then against the controller, each one's CPU
# in percent of one core over the same window.
#
#   bench/control_plane.sh                 idle 1000/5000/15000, push 15000, rtt 1000 x 10 s,
#                                          steady 15000 x 60 s
#   STEPS=rtt bench/control_plane.sh       only the rtt pair (baseline, controller)
#   STEPS=steady bench/control_plane.sh    only the steady pair
#   STEPS=storm bench/control_plane.sh     only the reconnect storm (not in the default steps):
#                                          opamp-load SIGKILLs the controller under 15,000
#                                          configured agents, this script restarts it on the same
#                                          port and data dir, the agents come back on their own
#                                          backoff
#
# Environment (all optional):
#   PF_BUILD_DIR        build dir to use/create (default build/bench-release, Release build)
#   OPAMP_LOAD          path of opamp-load (default $PF_BUILD_DIR/bench/opamp-load)
#   CONTROLLER          path of profleet-controller (default $PF_BUILD_DIR/controller/...)
#   BASELINE            path of ws-echo-baseline (default $PF_BUILD_DIR/bench/ws-echo-baseline)
#   STEPS               which steps to run, any of "idle push rtt steady" (default all four)
#   IDLE_STEPS          agent counts for the idle runs (default "1000 5000 15000")
#   PUSH_AGENTS         agents for the push run (default 15000)
#   RTT_AGENTS          agents for the rtt run (default 1000)
#   RTT_SECONDS         length of the rtt measurement (default 10)
#   STEADY_AGENTS       agents for the steady run (default 15000)
#   STEADY_SECONDS      length of the steady CPU window (default 60)
#   STEADY_HEARTBEAT    heartbeat interval of the steady fleet in seconds (default 30)
#   STORM_AGENTS        agents for the storm run (default 15000)
#   TOTAL_TIMEOUT       bound on the whole script in seconds (default 1200)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${PF_BUILD_DIR:-$root/build/bench-release}
load=${OPAMP_LOAD:-$build/bench/opamp-load}
ctrl=${CONTROLLER:-$build/controller/profleet-controller}
baseline=${BASELINE:-$build/bench/ws-echo-baseline}
steps=${STEPS:-"idle push rtt steady"}
idle_steps=${IDLE_STEPS:-"1000 5000 15000"}
push_agents=${PUSH_AGENTS:-15000}
rtt_agents=${RTT_AGENTS:-1000}
rtt_seconds=${RTT_SECONDS:-10}
steady_agents=${STEADY_AGENTS:-15000}
steady_seconds=${STEADY_SECONDS:-60}
steady_heartbeat=${STEADY_HEARTBEAT:-30}
storm_agents=${STORM_AGENTS:-15000}
total_timeout=${TOTAL_TIMEOUT:-1200}

tmp=$(mktemp -d /tmp/pf-bench.XXXXXX)
ctrl_pid=""
failures=0
has_step() {
	case " $steps " in *" $1 "*) return 0 ;; esac
	return 1
}
has_step idle || idle_steps=""

stop_controller() {
	if [ -n "$ctrl_pid" ] && kill -0 "$ctrl_pid" 2>/dev/null; then
		kill -TERM "$ctrl_pid" 2>/dev/null || true
		for _ in $(seq 50); do
			kill -0 "$ctrl_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$ctrl_pid" 2>/dev/null || true
		wait "$ctrl_pid" 2>/dev/null || true
	fi
	ctrl_pid=""
}
cleanup() {
	stop_controller
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "control_plane.sh: interrupted" >&2; exit 130' INT TERM

remaining() {
	echo $((total_timeout - SECONDS))
}

# Build what is missing (Release: the numbers are for an optimised controller).
if [ ! -x "$load" ] || [ ! -x "$ctrl" ] || [ ! -x "$baseline" ]; then
	if [ ! -f "$build/CMakeCache.txt" ]; then
		cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
	fi
	cmake --build "$build" -j2 --target opamp-load profleet-controller ws-echo-baseline
fi
for b in "$load" "$ctrl" "$baseline"; do
	if [ ! -x "$b" ]; then
		echo "control_plane.sh: $b is missing after the build" >&2
		exit 1
	fi
done

# Both processes need one descriptor per agent: take the hard limit (20,000 here).
ulimit -n "$(ulimit -Hn)"

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_controller NAME: fresh data dir and port; sets port, data, ctrl_pid.
start_controller() {
	local name=$1
	data=$tmp/$name
	mkdir -p "$data"
	port=$(free_port)
	"$ctrl" --listen "127.0.0.1:$port" --data-dir "$data" >"$tmp/$name.controller.log" 2>&1 &
	ctrl_pid=$!
	local deadline=$((SECONDS + 30))
	while [ $SECONDS -lt $deadline ]; do
		if ! kill -0 "$ctrl_pid" 2>/dev/null; then
			echo "control_plane.sh: controller exited; log:" >&2
			tail -20 "$tmp/$name.controller.log" >&2
			return 1
		fi
		if [ -s "$data/agent.token" ] && [ -s "$data/admin.token" ] &&
			(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	echo "control_plane.sh: controller not ready on port $port within 30 s" >&2
	return 1
}

# start_baseline NAME: ws-echo-baseline on a free port, bounded by the time left; sets port,
# data (dummy tokens: the baseline accepts any) and ctrl_pid, so run() and stop_controller()
# treat it like a controller.
start_baseline() {
	local name=$1
	data=$tmp/$name
	mkdir -p "$data"
	echo baseline >"$data/agent.token" # any token is accepted
	echo baseline >"$data/admin.token"
	port=$(free_port)
	"$baseline" --listen "127.0.0.1:$port" --seconds "$(remaining)" \
		>"$tmp/$name.controller.log" 2>&1 &
	ctrl_pid=$!
	local deadline=$((SECONDS + 10))
	while [ $SECONDS -lt $deadline ]; do
		if ! kill -0 "$ctrl_pid" 2>/dev/null; then
			echo "control_plane.sh: ws-echo-baseline exited; log:" >&2
			tail -5 "$tmp/$name.controller.log" >&2
			return 1
		fi
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	echo "control_plane.sh: ws-echo-baseline not ready on port $port within 10 s" >&2
	return 1
}

# not_run NAME: a run that could not start counts as failed; its output stays empty.
not_run() {
	failures=$((failures + 1))
	: >"$tmp/$1.out"
}

# finish_run NAME RC: shows the run's summary line and reports a failure with the log tail.
finish_run() {
	grep '^summary:' "$tmp/$1.out" >&2 || true
	if [ "$2" -ne 0 ]; then
		echo "control_plane.sh: $1 failed (exit $2); controller log tail:" >&2
		tail -5 "$tmp/$1.controller.log" >&2 || true
		failures=$((failures + 1))
	fi
}

# begin_run NAME MIN STARTER WHAT: starts the server (STARTER NAME) unless fewer than MIN
# seconds are left; non-zero, the run counted as failed, when it cannot.
begin_run() {
	if [ "$(remaining)" -lt "$2" ]; then
		echo "control_plane.sh: TOTAL_TIMEOUT reached, skipping $1" >&2
		not_run "$1"
		return 1
	fi
	echo "== $1: $4" >&2
	if ! $3 "$1"; then
		not_run "$1"
		return 1
	fi
}

# run NAME ARGS...: one opamp-load run against a fresh controller (or, with SERVER=baseline in
# the environment, against ws-echo-baseline); output in $tmp/NAME.out.
run() {
	local name=$1
	shift
	local starter=start_controller
	[ "${SERVER:-}" = baseline ] && starter=start_baseline
	local left
	left=$(remaining)
	begin_run "$name" 30 $starter "opamp-load $*" || return 0
	local rc=0
	timeout --kill-after=10 "$left" "$load" --port "$port" --data-dir "$data" \
		--pid "$ctrl_pid" --timeout "$((left - 5))" "$@" >"$tmp/$name.out" || rc=$?
	finish_run "$name" $rc
	stop_controller
}

# alive PID: the process exists and is not a zombie (a killed child stays one until reaped).
alive() {
	local st
	st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ]
}

# storm NAME N: a controller restart under N connected agents. opamp-load SIGKILLs the
# controller once every agent holds its config; this restarts it on the same port and data
# dir as soon as it is gone and writes the new pid where opamp-load reads it.
storm() {
	local name=$1 n=$2 left rc=0
	left=$(remaining)
	begin_run "$name" 60 start_controller "opamp-load --mode storm --agents $n" || return 0
	local pidfile=$tmp/$name.pid
	echo "$ctrl_pid" >"$pidfile"
	timeout --kill-after=10 "$left" "$load" --mode storm --agents "$n" --port "$port" \
		--data-dir "$data" --pid "$ctrl_pid" --pid-file "$pidfile" --timeout "$((left - 5))" \
		>"$tmp/$name.out" &
	local load_pid=$!
	while alive "$ctrl_pid" && alive "$load_pid" && [ "$(remaining)" -gt 5 ]; do
		sleep 0.05
	done
	if ! alive "$ctrl_pid" && alive "$load_pid"; then
		wait "$ctrl_pid" 2>/dev/null || true
		echo "== $name: controller killed; restarting it on port $port" >&2
		"$ctrl" --listen "127.0.0.1:$port" --data-dir "$data" \
			>>"$tmp/$name.controller.log" 2>&1 &
		ctrl_pid=$!
		echo "$ctrl_pid" >"$pidfile.new" && mv "$pidfile.new" "$pidfile"
	fi
	wait "$load_pid" || rc=$?
	finish_run "$name" $rc
	stop_controller
}

# val NAME KEY: the value of "KEY: value" in run NAME's output, or "n/a".
val() {
	local v
	v=$(sed -n "s/^$2: //p" "$tmp/$1.out" 2>/dev/null | tail -1)
	echo "${v:-n/a}"
}

for n in $idle_steps; do
	run "idle-$n" --mode idle --agents "$n"
done
if has_step push; then
	run "push-$push_agents" --mode push --agents "$push_agents"
fi
if has_step rtt; then
	# Same parameters, back to back: the floor first, then the controller.
	SERVER=baseline run "rtt-base-$rtt_agents" --mode rtt --agents "$rtt_agents" \
		--seconds "$rtt_seconds"
	run "rtt-$rtt_agents" --mode rtt --agents "$rtt_agents" --seconds "$rtt_seconds"
fi
if has_step storm; then
	storm "storm-$storm_agents" "$storm_agents"
fi
if has_step steady; then
	SERVER=baseline run "steady-base-$steady_agents" --mode steady --agents "$steady_agents" \
		--seconds "$steady_seconds" --heartbeat "$steady_heartbeat"
	run "steady-$steady_agents" --mode steady --agents "$steady_agents" \
		--seconds "$steady_seconds" --heartbeat "$steady_heartbeat"
fi

# Verdict against a target: ok when value <= limit.
verdict() {
	awk -v v="$1" -v l="$2" 'BEGIN { if (v == "n/a" || v < 0) print "—"; else if (v + 0 <= l + 0) print "ok"; else print "MISSED" }'
}

rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo
echo "Control plane, commit $rev, $(nproc) CPUs, $(uname -r), $(date -u +%Y-%m-%d)"
echo
echo "| Measurement | Agents | Result | Target | |"
echo "|---|---:|---:|---:|---|"
for n in $idle_steps; do
	v=$(val "idle-$n" rss_per_agent_bytes)
	echo "| Controller RSS per idle agent | $n | $v B | ≤ 4096 B | $(verdict "$v" 4096) |"
done
# The marginal cost between the smallest and largest idle run, free of fixed allocations.
first=$(echo $idle_steps | awk '{print $1}')
last=$(echo $idle_steps | awk '{print $NF}')
if [ "$first" != "$last" ]; then
	a=$(val "idle-$first" rss_after_kb)
	b=$(val "idle-$last" rss_after_kb)
	v=$(awk -v a="$a" -v b="$b" -v n1="$first" -v n2="$last" \
		'BEGIN { if (a == "n/a" || b == "n/a") print "n/a"; else printf "%.0f", (b - a) * 1024 / (n2 - n1) }')
	echo "| Controller RSS per idle agent, marginal $first→$last | $last | $v B | ≤ 4096 B | $(verdict "$v" 4096) |"
fi
if has_step push; then
	p="push-$push_agents"
	echo "| Push: last agent received the config | $push_agents | $(val "$p" t_recv_ms) ms | | |"
	v=$(val "$p" t_applied_ms)
	echo "| Push: fleet summary shows all APPLIED | $push_agents | $v ms | ≤ 1000 ms | $(verdict "$v" 1000) |"
fi
# ratio A B / diff A B, "n/a" when either is missing.
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b <= 0) print "n/a"; else printf "%.2f", a / b }'
}
diff_us() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || a < 0 || b < 0) print "n/a"; else printf "%.2f", a - b }'
}
if has_step rtt; then
	r="rtt-$rtt_agents"
	rb="rtt-base-$rtt_agents"
	echo "| Heartbeat round trips (controller / baseline) | $rtt_agents | $(val "$r" round_trips_per_s) / $(val "$rb" round_trips_per_s) /s | | |"
	echo "| Heartbeat mean latency (controller / baseline) | $rtt_agents | $(val "$r" mean_latency_us) / $(val "$rb" mean_latency_us) µs | | |"
	v=$(val "$r" controller_cpu_us_per_rt)
	vb=$(val "$rb" controller_cpu_us_per_rt)
	echo "| Controller CPU per round trip (user + system) | $rtt_agents | $v µs | ≤ 3 µs | $(verdict "$v" 3) |"
	echo "| Baseline CPU per round trip (ws-echo-baseline: recv + send floor) | $rtt_agents | $vb µs | | |"
	v2=$(ratio "$v" "$vb")
	echo "| Controller / baseline CPU per round trip | $rtt_agents | $v2 × | ≤ 1.2 × | $(verdict "$v2" 1.2) |"
	echo "| Controller − baseline CPU per round trip (our cost above the floor) | $rtt_agents | $(diff_us "$v" "$vb") µs | | |"
	u=$(val "$r" controller_user_us_per_rt)
	ub=$(val "$rb" controller_user_us_per_rt)
	echo "| … user time, controller / baseline | $rtt_agents | $u / $ub µs | | |"
	echo "| … system time, controller / baseline | $rtt_agents | $(diff_us "$v" "$u") / $(diff_us "$vb" "$ub") µs | | |"
	echo "| Load generator CPU during rtt (controller / baseline run) | $rtt_agents | $(val "$r" loadgen_cpu_s) / $(val "$rb" loadgen_cpu_s) s per ${rtt_seconds} s | | |"
fi
if has_step steady; then
	r="steady-$steady_agents"
	rb="steady-base-$steady_agents"
	echo "| Steady fleet: heartbeats per second (controller / baseline run) | $steady_agents | $(val "$r" heartbeats_per_s) / $(val "$rb" heartbeats_per_s) /s | | |"
	v=$(val "$r" controller_cpu_pct)
	vb=$(val "$rb" controller_cpu_pct)
	echo "| Steady fleet: controller CPU, ${steady_seconds} s average | $steady_agents | $v % | ≤ 1.4 % | $(verdict "$v" 1.4) |"
	echo "| Steady fleet: baseline CPU (ws-echo-baseline, same load) | $steady_agents | $vb % | | |"
	echo "| Steady fleet: controller / baseline | $steady_agents | $(ratio "$v" "$vb") × | | |"
	echo "| Steady fleet: controller user time / baseline user time | $steady_agents | $(val "$r" controller_user_pct) / $(val "$rb" controller_user_pct) % | | |"
fi
if has_step storm; then
	r="storm-$storm_agents"
	v=$(val "$r" storm_seconds)
	echo "| Reconnect storm: kill to every agent back | $storm_agents | $v s | ≤ 60 s | $(verdict "$v" 60) |"
	v=$(val "$r" configs_already_applied)
	echo "| Reconnect storm: configs sent that agents already had | $storm_agents | $v | 0 | $(verdict "$v" 0) |"
	v=$(val "$r" controller_cpu_pct)
	echo "| Reconnect storm: new controller CPU, start to all back | $storm_agents | $v % | ≤ 100 % | $(verdict "$v" 100) |"
	echo "| Reconnect storm: attempts / refused / 503 | $storm_agents | $(val "$r" reconnect_attempts) / $(val "$r" refused) / $(val "$r" rejected_503) | | |"
fi
echo
if [ $failures -ne 0 ]; then
	echo "control_plane.sh: $failures run(s) failed (see messages above)" >&2
	exit 1
fi
