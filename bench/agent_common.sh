# bench/agent_common.sh — sourced by the whole-agent benchmarks (agent_whole.sh, agent_ab.sh):
# a scratch directory whose processes go at exit, a controller on loopback with the
# benchmark's profiling config, the busy workload, and readers of a process's CPU time and of
# an agent's /metrics. Expects $root set.

# bench_setup NAME: tmp (a fresh /tmp/pf-NAME.* directory) and pids (killed at exit, with
# the directory removed)
bench_setup() {
	tmp=$(mktemp -d "/tmp/pf-$1.XXXXXX")
	pids=()
	cgroups=()
	declare -gA cgroup_of=()
	trap bench_cleanup EXIT
}
bench_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	local g
	for g in "${cgroups[@]}"; do rmdir "$g" 2>/dev/null || true; done
	rm -rf "$tmp"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# WORKLOAD: workload (tests/ebpf/workload.c, -O0 with frame pointers) or nofp
# (nofp_workload.c, -O2 without); into $tmp/workload
build_workload() {
	if [ "${WORKLOAD:-workload}" = nofp ]; then
		cc -O2 -fomit-frame-pointer -g -o "$tmp/workload" "$root/tests/ebpf/nofp_workload.c" -ldl
	else
		cc -O0 -fno-omit-frame-pointer -g -o "$tmp/workload" "$root/tests/ebpf/workload.c"
	fi
}

# start_controller BIN: sets ctl (pid), port, url, admin; data in $tmp/data
start_controller() {
	port=$(free_port)
	url="http://127.0.0.1:$port"
	"$1" --listen "127.0.0.1:$port" --data-dir "$tmp/data" >"$tmp/ctl.log" 2>&1 &
	ctl=$!
	pids+=("$ctl")
	cpu_cgroup "$ctl"
	for _ in $(seq 1 100); do
		curl -fs "$url/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -fs "$url/readyz" >/dev/null || { echo "controller not ready" >&2; tail "$tmp/ctl.log" >&2; exit 1; }
	admin=$(cat "$tmp/data/admin.token")
	# max_cpu_percent: the figure is the agent at 99 Hz; its overhead guard (default 1 %)
	# would halve the frequency while the first windows open files and resolve first
	# addresses (its own tests pin that behaviour). Its frequency changes are printed.
	printf 'profiling:\n  sampling: {frequency_hz: 99, duration_seconds: 10}\n  limits: {max_cpu_percent: 10}\n  exporters:\n    - {type: otlp_http, endpoint: "%s/v1development/profiles", auth: agent_token}\n' "$url" |
		curl -fs -X PUT -H "Authorization: Bearer $admin" --data-binary @- \
			"$url/api/v1/configs/default" >/dev/null
}

# start_workloads SECONDS: one busy workload per CPU
start_workloads() {
	for _ in $(seq "$(nproc)"); do
		"$tmp/workload" "$1" >/dev/null &
		pids+=($!)
	done
}

# start_agent BIN NAME METRICS-PORT: sets agent (pid); state in $tmp/NAME-state (its unwind
# tables: a symlink to PF_CACHE_DIR when set, else built in the first windows), log in
# $tmp/NAME.log
start_agent() {
	local state=$tmp/$2-state
	mkdir -p "$state"
	[ -z "${PF_CACHE_DIR:-}" ] || ln -s "$PF_CACHE_DIR" "$state/unwind"
	"$1" --server "ws://127.0.0.1:$port/v1/opamp" --token-file "$tmp/data/agent.token" \
		--state-dir "$state" --metrics-listen "127.0.0.1:$3" >"$tmp/$2.log" 2>&1 &
	agent=$!
	pids+=("$agent")
	cpu_cgroup "$agent"
}

# cpu_cgroup PID: moves PID into a CPU-accounting cgroup of its own (cgroup v2 cpu.stat, or
# v1 cpuacct), so proc_ns reads its CPU time in ns, with its exited threads and reaped
# children; /proc/PID/stat counts clock ticks (10 ms: a sixth of the agent's whole minute).
# Without a writable cgroup, proc_ns reads /proc/PID/stat.
cpu_cgroup() {
	local g
	if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
		g=/sys/fs/cgroup/pf-bench-$1
	elif [ -d /sys/fs/cgroup/cpuacct ]; then
		g=/sys/fs/cgroup/cpuacct/pf-bench-$1
	else
		return 0
	fi
	mkdir "$g" 2>/dev/null && echo "$1" >"$g/cgroup.procs" 2>/dev/null || { rmdir "$g" 2>/dev/null; return 0; }
	cgroups+=("$g")
	cgroup_of[$1]=$g
}
hz=$(getconf CLK_TCK)
# user+sys ns of a pid: its cgroup's (cpu_cgroup) or /proc/PID/stat's
proc_ns() {
	local g=${cgroup_of[$1]:-}
	if [ -n "$g" ] && [ -f "$g/cpu.stat" ]; then
		awk '$1 == "usage_usec" { print $2 * 1000 }' "$g/cpu.stat"
	elif [ -n "$g" ]; then
		cat "$g/cpuacct.usage"
	else
		awk -v hz="$hz" '{ sub(/.*\) /, ""); print ($12 + $13) * 1e9 / hz }' "/proc/$1/stat"
	fi
}
# metric_sum PORT FAMILY [FACTOR]: sum of an agent's metric family, times FACTOR (default
# 1e9: seconds to ns)
metric_sum() {
	curl -fs "http://127.0.0.1:$1/metrics" |
		awk -v m="$2" -v k="${3:-1e9}" '$1 ~ "^profleet_agent_"m"({|$)" { s += $2 } END { printf "%.0f\n", s * k }'
}
# agent_snapshot PID PORT: "user+sys-ns bpf-ns builder-ns bpf-runs"
# (the builder's child processes are counted apart: out of a cgroup's total)
agent_snapshot() {
	local all builder
	all=$(proc_ns "$1")
	builder=$(metric_sum "$2" sampler_unwind_builder_cpu_seconds_total)
	[ -z "${cgroup_of[$1]:-}" ] || all=$((all - builder))
	echo "$all $(metric_sum "$2" bpf_run_time_seconds_total) $builder $(metric_sum "$2" bpf_run_count_total 1)"
}
# agent_rss PID: "peak-kB end-text"
agent_rss() {
	echo "$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status")" \
		"$(awk '/^(VmRSS|RssAnon|RssFile|RssShmem):/ { printf "%s %s kB, ", $1, $2 }' "/proc/$1/status" | sed 's/, $//')"
}
# guard_changes LOG: the overhead guard's frequency changes, if any
guard_changes() {
	local n
	n=$(grep -c 'overhead guard: sampling at' "$1" || true)
	[ "$n" = 0 ] || { echo "the overhead guard changed the frequency $n times:"; grep 'overhead guard: sampling at' "$1" | tail -4; }
}
