# bench/sample_common.sh — sourced by the benchmarks that run profleet-sample alone
# (bpf_sample_cost.sh, python_sample_cost.sh, python_rss.sh). Expects $root set.

# sample_setup NAME: $sample (PF_SAMPLE, else build/bench-release's profleet-sample, built
# Release when missing: PF_BUILD_DIR), $tmp (a fresh /tmp/pf-NAME.* directory) and $pids
# (killed at exit, the directory removed, kernel.bpf_stats_enabled restored)
sample_setup() {
	local build=${PF_BUILD_DIR:-$root/build/bench-release}
	sample=${PF_SAMPLE:-}
	if [ -z "$sample" ]; then
		sample=$build/agent/profleet-sample
		if [ ! -x "$sample" ]; then
			cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
			cmake --build "$build" -j2 --target profleet-sample >/dev/null
		fi
	fi
	tmp=$(mktemp -d "/tmp/pf-$1.XXXXXX")
	pids=()
	old_stats=$(sysctl -n kernel.bpf_stats_enabled)
	trap sample_cleanup EXIT
}
sample_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	sysctl -q -w kernel.bpf_stats_enabled="$old_stats" || true
	rm -rf "$tmp"
}
