#!/usr/bin/env bash
# bench/bpf_sample_cost.sh — what one sample costs in the kernel (docs/benchmarks.md, "BPF cost
# per sample"). Not a test: prints figures to copy into the docs. Needs root (BPF, perf events).
#
# Both CPUs are kept busy by tests/ebpf/workload.c (frame pointers, one per CPU) while
# profleet-sample samples at 99 Hz with an in-kernel filter active (include
# process.executable.name = workload, so every tick looks its process up in pid_filter), with
# kernel.bpf_stats_enabled on. The cost of a sample is do_sample's run_time_ns / run_cnt from
# the kernel's BPF statistics, in µs. The same run is repeated for variants of the program
# built with parts left out (rodata bench_omit, cpu_sampler.h PF_BENCH_*; the verifier prunes
# them, so what is left is exactly what runs):
#
#   full      the agent's program: filter, then stacks, record, ring buffer for the ticks of
#             the workload (the host's other processes are looked up and dropped)
#   all       the same with every tick recorded (verdict looked up, then ignored): the base
#             of the breakdown, since the machine is shared and other processes' ticks count
#   nofilter  `all` without the pid_filter lookup  -> filter cost      = all - nofilter
#   nooutput  `all` without the ring-buffer write  -> ring-buffer cost = all - nooutput
#   floor     only the stack walks (kernel when the tick hit kernel mode, then user)
#                                                  -> stack walk = floor; rest = the record
#   timed     `full` with bpf_ktime_get_ns between its parts (PF_BENCH_TIMING): ns per part
#             of the workload's recorded ticks, summed in the kernel (the clock reads and
#             their counter updates inflate it; compare parts, not totals)
#   base      `full` of another build (PF_SAMPLE_BASE, e.g. the tree before a change), in the
#             same rounds: before/after from one session
#   fponly    `full` with user stacks by frame pointers only (profleet-sample -U: no .eh_frame
#             tables), in the same rounds: the tables' cost
#   timedfp   `timed` with frame pointers only: the user-stack part of both walks side by side
#   offcpu    `full` with profiling.off_cpu on at its defaults (min_block_us 1000, probability
#             1): do_sample per tick against full's in the same rounds, and the off-CPU
#             programs' own cost (off_cpu_switch + off_cpu_sys_exit run time over the run, % of
#             one core; per switch and per system call), with
#             bench/switch_workload.c doing context switches (pipe ping-pong) beside the CPU
#             burners in every variant of such a session; its round trips per second are the
#             workload's throughput (offcpu against full)
#   empty     a program that returns at once: what running any program per tick costs on this
#             host (the statistics' clock reads, cold code and data). At 99 Hz a tick finds
#             the caches cold (run with HZ=999 to see every variant drop: the difference is
#             the host's eviction between ticks, not the program)
#
# WORKLOAD=nofp busies the CPUs with tests/ebpf/nofp_workload.c built -O2 -fomit-frame-pointer
# instead (stacks through libc's qsort and bsearch: the tables do the walking); the default is
# workload.c (-O0, frame pointers), whose stacks the tables walk too.
# `full` is also given per recorded sample: do_sample's run time over the ticks it recorded.
#
#   sudo bench/bpf_sample_cost.sh
# Environment: PF_BUILD_DIR (default build/bench-release, built Release when missing) or
#   PF_SAMPLE (a profleet-sample binary), SECONDS_RUN (60; QUICK=1: 15), RUNS (2),
#   VARIANTS ("full offcpu fponly all nofilter nooutput floor empty timed", plus "base" first when
#   PF_SAMPLE_BASE is set), PF_SAMPLE_BASE (a profleet-sample binary for "base"), WORKLOAD
#   (workload or nofp), HZ (99: the sampling frequency).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
secs=${SECONDS_RUN:-60}
[ "${QUICK:-0}" = 1 ] && secs=${SECONDS_RUN:-15}
runs=${RUNS:-2}
base=${PF_SAMPLE_BASE:-}
def_variants="full offcpu fponly all nofilter nooutput floor empty timed"
[ -n "$base" ] && def_variants="base $def_variants"
variants=${VARIANTS:-$def_variants}
. "$root/bench/sample_common.sh"
sample_setup bpfcost

if [ "${WORKLOAD:-workload}" = nofp ]; then
	cc -O2 -fomit-frame-pointer -g -o "$tmp/workload" "$root/tests/ebpf/nofp_workload.c"
else
	cc -O0 -fno-omit-frame-pointer -g -o "$tmp/workload" "$root/tests/ebpf/workload.c"
fi
for off in false true; do
	cat > "$tmp/filter-$off.yaml" <<EOF
profiling:
  sampling: {frequency_hz: ${HZ:-99}, duration_seconds: 10}
  off_cpu: {enabled: $off}
  filters:
    include:
      - {key: process.executable.name, match: strict, value: workload}
      - {key: process.executable.name, match: strict, value: switcher}
EOF
done
sysctl -q -w kernel.bpf_stats_enabled=1
ncpu=$(nproc)
# the burners outlive every run even when start-up under load takes long
total=$(((secs + 10) * runs * $(wc -w <<<"$variants") * 2 + 60))
for _ in $(seq "$ncpu"); do
	"$tmp/workload" "$total" >/dev/null & pids+=($!)
done
trips() { cat "$tmp/trips" 2>/dev/null || echo 0; }
if grep -qw offcpu <<<"$variants"; then
	cc -O2 -pthread -o "$tmp/switcher" "$root/bench/switch_workload.c"
	"$tmp/switcher" "$total" "$tmp/trips" & pids+=($!)
fi

omit_of() {
	case $1 in
	full | base | fponly | offcpu) echo 0 ;; all) echo 1 ;; nooutput) echo 3 ;; floor) echo 4 ;; nofilter) echo 9 ;;
	timed | timedfp) echo 16 ;; empty) echo 32 ;;
	*) echo "unknown variant $1" >&2; exit 2 ;;
	esac
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== do_sample, µs per sample (${secs} s per run, ${HZ:-99} Hz, ${ncpu} CPUs busy, filter on) =="
# interleaved: full, nofilter, ... then again, so a change in the host's load hits all alike
for r in $(seq "$runs"); do
	for v in $variants; do
		args=(-c "$tmp/filter-false.yaml" -d "$secs" -s -t 1)
		[ "$v" = offcpu ] && args=(-c "$tmp/filter-true.yaml" -d "$secs" -s -t 1)
		bin=$sample
		[ "$v" = base ] && bin=$base
		omit=$(omit_of "$v")
		[ "$omit" = 0 ] || args+=(-B "$omit")
		case $v in fponly | timedfp) args+=(-U) ;; esac
		t0=$(trips)
		"$bin" "${args[@]}" > "$tmp/$v.$r.out" 2> "$tmp/$v.$r.err"
		t1=$(trips)
		case $v in timed | timedfp)
			grep '^stats bench_timed=' "$tmp/$v.$r.out" | cut -d' ' -f2- >> "$tmp/$v"
		esac
		line=$(grep '^stats prog=do_sample ' "$tmp/$v.$r.out")
		ns=$(sed -n 's/.*run_time_ns=\([0-9]*\).*/\1/p' <<<"$line")
		cnt=$(sed -n 's/.*run_cnt=\([0-9]*\).*/\1/p' <<<"$line")
		lost=$(sed -n 's/.*lost_kernel=\([0-9]*\).*/\1/p' "$tmp/$v.$r.out")
		samples=$(sed -n 's/^stats samples=\([0-9]*\).*/\1/p' "$tmp/$v.$r.out")
		us=$(python3 -c "print(f'{$ns / max($cnt, 1) / 1000:.3f}')")
		echo "$v $us" >> "$tmp/results"
		if [ -x "$tmp/switcher" ]; then
			echo "$v/trips $(((t1 - t0) / secs))" >> "$tmp/results"
		fi
		if [ "$v" = offcpu ]; then
			oline=$(grep '^stats prog=off_cpu_switch ' "$tmp/$v.$r.out")
			ons=$(sed -n 's/.*run_time_ns=\([0-9]*\).*/\1/p' <<<"$oline")
			ocnt=$(sed -n 's/.*run_cnt=\([0-9]*\).*/\1/p' <<<"$oline")
			xline=$(grep '^stats prog=off_cpu_sys_exit ' "$tmp/$v.$r.out")
			xns=$(sed -n 's/.*run_time_ns=\([0-9]*\).*/\1/p' <<<"$xline")
			xcnt=$(sed -n 's/.*run_cnt=\([0-9]*\).*/\1/p' <<<"$xline")
			python3 -c "print(f'offcpu/core% {($ons + $xns) / ($secs * 1e9) * 100:.4f}')" >> "$tmp/results"
			python3 -c "print(f'offcpu/sys_exit_ns {$xns / max($xcnt, 1):.1f}')" >> "$tmp/results"
			python3 -c "print(f'offcpu/sys_exits_per_s {$xcnt / $secs:.0f}')" >> "$tmp/results"
			python3 -c "print(f'offcpu/switch_ns {$ons / max($ocnt, 1):.1f}')" >> "$tmp/results"
			python3 -c "print(f'offcpu/switches_per_s {$ocnt / $secs:.0f}')" >> "$tmp/results"
			grep '^stats off_cpu=' "$tmp/$v.$r.out" | sed 's/^stats /  /'
		fi
		case $v in full | base | fponly | offcpu)
			python3 -c "print(f'$v/rec {$ns / max($samples, 1) / 1000:.3f}')" >> "$tmp/results"
		esac
		printf '%-9s run %d: %6s µs/sample  (run_cnt=%s recorded=%s lost=%s)\n' \
			"$v" "$r" "$us" "$cnt" "$samples" "$lost"
	done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
touch "$tmp/timed" "$tmp/timedfp"
python3 "$root/bench/medians.py" "$tmp/results" "" # µs, but for the offcpu/* figures (their names say)
python3 - "$tmp/results" "$tmp/timed" "$tmp/timedfp" "$root/bench" <<'PY'
import re, sys
sys.path.insert(0, sys.argv[4])
sys.dont_write_bytecode = True
import medians
med = {v: m[0] for v, m in medians.medians(medians.load(sys.argv[1])).items()}
if {"all", "nofilter", "nooutput", "floor"} <= med.keys():
    f = med["all"]
    parts = [("stack walk (floor)", med["floor"]),
             ("filter (pid_filter lookup)", f - med["nofilter"]),
             ("ring-buffer write", f - med["nooutput"])]
    parts.append(("record (header, comm, counters)", f - sum(p for _, p in parts)))
    print("== breakdown of all (every tick recorded) ==")
    for name, p in parts:
        print(f"{name:32s} {p:6.3f} µs  {p / f * 100:5.1f} %")
    print(f"all / floor: {f / med['floor']:.2f}")
if "fponly" in med and "full" in med:
    print(f"full / fponly (tables vs frame pointers only): {med['full'] / med['fponly']:.2f} per "
          f"tick, {med['full/rec'] / med['fponly/rec']:.2f} per recorded sample")
if "empty" in med:
    for v in ("floor", "fponly", "full"):
        if v in med:
            print(f"{v} - empty (beyond running a program at all): "
                  f"{med[v] - med['empty']:.3f} µs")
if "offcpu" in med and "full" in med:
    print(f"offcpu / full (do_sample with off-CPU on): {med['offcpu'] / med['full']:.3f} per "
          f"tick, {med['offcpu/rec'] / med['full/rec']:.3f} per recorded sample")
    print(f"off-CPU programs: {med['offcpu/core%']:.3f} % of one core; off_cpu_switch "
          f"{med['offcpu/switch_ns']:.0f} ns per switch at {med['offcpu/switches_per_s']:.0f} "
          f"switches/s, off_cpu_sys_exit {med['offcpu/sys_exit_ns']:.0f} ns per system call "
          f"at {med['offcpu/sys_exits_per_s']:.0f}/s")
    if "full/trips" in med and med["full/trips"]:
        print(f"switch workload round trips/s: offcpu {med['offcpu/trips']:.0f} vs full "
              f"{med['full/trips']:.0f} ({(med['offcpu/trips'] / med['full/trips'] - 1) * 100:+.1f} %)")
if "base" in med and "full" in med:
    print(f"full / base: {med['full'] / med['base']:.2f} per tick, "
          f"{med['full/rec'] / med['base/rec']:.2f} per recorded sample")
for title, path in (("timed", sys.argv[2]), ("timedfp (frame pointers only)", sys.argv[3])):
    tot = {}
    for line in open(path):
        for k, v in re.findall(r"(\w+)=(\d+)", line):
            tot[k] = tot.get(k, 0) + int(v)
    if tot.get("bench_timed"):
        n = tot["bench_timed"]
        print(f"== {title}: µs per recorded tick by part ({n} ticks) ==")
        for k in ["filter_ns", "kstack_ns", "ustack_ns", "record_ns", "output_ns"]:
            print(f"{k[:-3]:8s} {tot[k] / n / 1000:6.3f} µs")
PY
