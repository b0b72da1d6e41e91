#!/usr/bin/env bash
# bench/agent_overhead.sh — the data-plane benchmark (docs/benchmarks.md, "Data plane").
# Not a test: prints figures to copy into the docs. Needs root (BPF, perf events).
#
#  1. CPU: both CPUs kept busy by tests/ebpf/workload.c (frame pointers, one per CPU) for
#     SECONDS; during the same run, profleet-sample (the agent's sampler: 99 Hz, no filters,
#     a window closed and symbolized every 10 s) and `perf record -F 99 -g -a` sample the
#     same machine side by side. Cost = the process's user+sys CPU time, plus for profleet
#     the BPF program run time (BPF_ENABLE_STATS), as a percentage of one CPU over the run.
#     perf record's in-kernel callchain collection is not attributed to any task, so its
#     figure is a lower bound of its real cost.
#     Reported apart: the one-time costs (startup: BPF load, attach; the /proc/kallsyms load
#     at the first kernel frame; the unwind tables built by the agent's helper process, once
#     per file and version, kept on disk with -C), and the load average, since the machine
#     may be shared.
#  2. Memory: peak RSS of profleet-sample with PROCS (300) busy processes running, each of
#     them sampled and symbolized.
#  3. Throughput (THROUGHPUT=1, default): what each profiler costs the workload, kernel side
#     included (perf's callchain work is charged to no task): ROUNDS x {no profiler, perf
#     record, profleet-sample} phases of PHASE_SECONDS each, interleaved, both CPUs busy;
#     workload iterations/s per phase, median per mode, loss relative to no profiler.
#
#   sudo bench/agent_overhead.sh
# Environment: PF_BUILD_DIR (default build/bench-release, built Release when missing),
#   SECONDS_RUN (60), PROCS (300), RSS_SECONDS (20), THROUGHPUT (1), ROUNDS (3),
#   PHASE_SECONDS (10), SAMPLE_ARGS (more profleet-sample options, e.g. "-U" for frame
#   pointers only, "-C DIR" for an unwind-table cache; default none: tables built at start),
#   WORKLOAD (workload: tests/ebpf/workload.c, -O0 with frame pointers; nofp:
#   tests/ebpf/nofp_workload.c, -O2 without frame pointers), CHURN (1: bench/churn.sh runs
#   beside parts 1 and 2 — compiles, Python, pipelines: processes that live a few to a few
#   hundred ms, as on a build or CI host; 0, the default: only the workload).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${PF_BUILD_DIR:-$root/build/bench-release}
secs=${SECONDS_RUN:-60}
procs=${PROCS:-300}
rss_secs=${RSS_SECONDS:-20}
do_tput=${THROUGHPUT:-1}
rounds=${ROUNDS:-3}
phase=${PHASE_SECONDS:-10}
sample=$build/profleet-sample
[ -x "$sample" ] || sample=$build/agent/profleet-sample
if [ ! -x "$sample" ]; then
	cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build "$build" -j2 --target profleet-sample >/dev/null
	sample=$(find "$build" -name profleet-sample -type f -perm -u+x | head -1)
fi

read -r -a extra <<<"${SAMPLE_ARGS:-}"
tmp=$(mktemp -d /tmp/pf-overhead.XXXXXX)
pids=()
churn_pid=
cleanup() {
	for p in "${pids[@]}" $churn_pid; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

if [ "${WORKLOAD:-workload}" = nofp ]; then
	# what the unwind tables are for: -O2 without frame pointers, call chains through libc
	cc -O2 -fomit-frame-pointer -g -o "$tmp/workload" "$root/tests/ebpf/nofp_workload.c" -ldl
else
	cc -O0 -fno-omit-frame-pointer -g -o "$tmp/workload" "$root/tests/ebpf/workload.c"
fi
ncpu=$(nproc)

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# ---- 1. CPU, side by side with perf record --------------------------------------------------
for _ in $(seq "$ncpu"); do
	"$tmp/workload" $((secs + 15)) >/dev/null & pids+=($!)
done
churn=${CHURN:-0}
if [ "$churn" = 1 ]; then
	"$root/bench/churn.sh" $((secs + 2)) > "$tmp/churn.out" &
	churn_pid=$!
fi
sleep 1
have_perf=0
if command -v perf >/dev/null; then
	have_perf=1
	# perf record for the same seconds, at the same time; its user+sys via getrusage.
	python3 "$root/bench/perf_cpu.py" "$secs" "$tmp/perf.data" > "$tmp/perf.ns" &
	perf_job=$!
fi
"$sample" "${extra[@]}" -d "$secs" -s -t 1 > "$tmp/sample.out" 2>"$tmp/sample.err"
perf_ns=0
if [ "$have_perf" = 1 ]; then
	wait "$perf_job" || true
	perf_ns=$(cat "$tmp/perf.ns")
fi
st_line() { grep "^stats $1" "$tmp/sample.out" | head -1; }
field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p"; }
self_ns=$(st_line startup_cpu_ns= | field self_cpu_ns)
start_ns=$(sed -n 's/^stats startup_cpu_ns=\([0-9]*\).*/\1/p' "$tmp/sample.out")
ksym_ns=$(st_line startup_cpu_ns= | field kallsyms_cpu_ns)
ksym_ns=${ksym_ns:-0}
child_ns=$(st_line startup_cpu_ns= | field children_cpu_ns)
child_ns=${child_ns:-0}
bpf_ns=$(st_line bpf_stats_enabled= | field bpf_run_time_ns)
samples=$(sed -n 's/^stats samples=\([0-9]*\).*/\1/p' "$tmp/sample.out")
lost=$(sed -n 's/.*lost_kernel=\([0-9]*\).*/\1/p' "$tmp/sample.out")
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
pids=()

pct() { python3 -c "print(f'{$1 / ($secs * 1e9) * 100:.3f}')"; }
[ "$churn" = 1 ] && { wait "$churn_pid" 2>/dev/null || true; }
churn_note=""
[ "$churn" = 1 ] && churn_note=", churn: $(sed -n 's/^rounds //p' "$tmp/churn.out") rounds of bench/churn.sh"
echo "== CPU (${secs} s, ${ncpu} CPUs busy, 99 Hz${churn_note}) =="
echo "profleet-sample: user+sys $(pct "$self_ns")% + table builder $(pct "$child_ns")% + BPF $(pct "$bpf_ns")% = $(pct "($self_ns + $child_ns + $bpf_ns)")% of one CPU; samples=$samples lost=$lost"
# warm: from the first window's close to the last one's, what an agent that has met its
# processes costs (none of the first window's ELF opens, first lookups and table loads)
warm=$({ grep '^stats window=' "$tmp/sample.out" || true; } | python3 -c '
import sys
rows = [dict(kv.split("=") for kv in l.split()[1:]) for l in sys.stdin]
if len(rows) >= 2:
    a, b = rows[0], rows[-1]
    d = lambda k: int(b[k]) - int(a[k])
    ms = d("elapsed_ms")
    cpu = d("self_cpu_ns") + d("children_cpu_ns")
    bpf = d("bpf_run_time_ns")
    per = bpf / max(d("samples"), 1) / 1000
    print(f"{(cpu + bpf) / (ms * 1e4):.3f}% ({cpu / (ms * 1e4):.3f}% user+sys + {bpf / (ms * 1e4):.3f}% BPF,"
          f" {ms / 1000:.0f} s after the first window; {per:.2f} us BPF per sample)")
')
echo "  one-time: startup (BPF load, attach) $(pct "$start_ns")% + kallsyms load $(pct "$ksym_ns")% + unwind tables built (per file, cached on disk) $(pct "$child_ns")%; steady state: $(pct "($self_ns - $start_ns - $ksym_ns + $bpf_ns)")%"
[ -z "$warm" ] || echo "  warm: $warm"
unw=$(sed -n 's/^stats dwarf_unwind=1 //p' "$tmp/sample.out")
[ -z "$unw" ] || echo "  unwind tables: $unw"
symst=$(sed -n 's/^stats elf_opened=/elf_opened=/p' "$tmp/sample.out")
[ -z "$symst" ] || echo "  symbolizer: $symst"
if [ "$have_perf" = 1 ]; then
	echo "perf record -F 99 -g -a: user+sys $(pct "$perf_ns")% of one CPU"
	python3 -c "print(f'ratio profleet/perf: total {($self_ns + $child_ns + $bpf_ns) / $perf_ns:.2f}, steady {($self_ns - $start_ns - $ksym_ns + $bpf_ns) / $perf_ns:.2f}')"
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- 2. RSS with N processes --------------------------------------------------------------
for _ in $(seq "$procs"); do
	"$tmp/workload" $((rss_secs + 15)) >/dev/null & pids+=($!)
done
[ "$churn" = 1 ] && { "$root/bench/churn.sh" $((rss_secs + 2)) >/dev/null & pids+=($!); }
sleep 2
"$sample" "${extra[@]}" -d "$rss_secs" -s -t 1 > "$tmp/rss.out" 2>"$tmp/rss.err"
rss=$(sed -n 's/.* max_rss_kb=\([0-9]*\).*/\1/p' "$tmp/rss.out")
nproc_seen=$(grep -c '^process ' "$tmp/rss.out" || true)
echo "== RSS with $procs busy processes (${rss_secs} s${churn_note}) =="
crss=$(sed -n 's/.*children_max_rss_kb=\([0-9]*\).*/\1/p' "$tmp/rss.out")
echo "profleet-sample peak RSS: $((rss / 1024)) MB ($rss kB); its table builder's peak: $((${crss:-0} / 1024)) MB; process entries in windows: $nproc_seen"

# ---- 3. throughput of the workload under each profiler ------------------------------------
[ "$do_tput" = 1 ] || exit 0
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
pids=()
wait 2>/dev/null || true
# one phase: $1 = none | perf | profleet; prints iterations/s of the workloads together
phase_run() {
	local prof=() ppid=
	case $1 in
	perf) prof=(perf record -F 99 -g -a -q -o "$tmp/tput.data" -- sleep $((phase + 2))) ;;
	profleet) prof=("$sample" "${extra[@]}" -d $((phase + 2)) -t 1) ;;
	esac
	if [ ${#prof[@]} -gt 0 ]; then
		"${prof[@]}" >/dev/null 2>&1 &
		ppid=$!
		sleep 1
	fi
	local wl=()
	for i in $(seq "$ncpu"); do
		"$tmp/workload" "$phase" > "$tmp/tput.$i" &
		wl+=($!)
	done
	wait "${wl[@]}"
	[ -z "$ppid" ] || wait "$ppid" 2>/dev/null || true
	cat "$tmp"/tput.* | sed -n 's/^iterations //p' | python3 -c "import sys; print(sum(int(l) for l in sys.stdin) / $phase)"
}
declare -A res
for r in $(seq "$rounds"); do
	for m in none perf profleet; do
		[ "$m" = perf ] && [ "$have_perf" = 0 ] && continue
		res[$m]+="$(phase_run "$m") "
	done
done
echo "== Workload throughput (${rounds} x ${phase} s per mode, interleaved, ${ncpu} CPUs busy) =="
python3 - "${res[none]}" "${res[perf]:-}" "${res[profleet]}" <<'PY'
import statistics, sys
modes = ["none", "perf record -F 99 -g -a", "profleet-sample"]
vals = [[float(x) for x in a.split()] for a in sys.argv[1:]]
base = statistics.median(vals[0])
for m, v in zip(modes, vals):
    if not v:
        continue
    med = statistics.median(v)
    print(f"{m:24s} median {med:10.1f} it/s  (runs: {', '.join(f'{x:.1f}' for x in v)})"
          f"  loss vs none: {(1 - med / base) * 100:+.2f}%")
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
