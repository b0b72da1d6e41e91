#!/usr/bin/env bash
# scripts/fuzz.sh [seconds] — coverage-guided fuzzing of the decoders (docs/testing.md
# "Fuzzing"): builds the tests/fuzz/ targets as libFuzzer binaries (clang, -DPF_FUZZ=ON, ASan +
# UBSan) in build/fuzz and runs each one for `seconds` (default 60) on its seed corpus.
#   PF_FUZZ_TARGETS="pprof otlp"   only these targets (default: all)
#   PF_FUZZ_JOBS=N                 build jobs (default 2)
# New corpus entries go to build/fuzz/run/<target>/corpus (the seeds in tests/fuzz/corpus are
# only read); a crashing input is written to build/fuzz/run/<target>/crash-* — copy it into
# tests/fuzz/corpus/<target>/regress-<what> once the bug is fixed. Exit status 1 when any
# target found a crash, leak or broken invariant.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-60}
targets=${PF_FUZZ_TARGETS:-"pprof otlp opamp profcfg selector traces"}
jobs=${PF_FUZZ_JOBS:-2}
build=build/fuzz

if ! command -v clang >/dev/null; then
	echo "fuzz.sh: clang not found (scripts/install-deps.sh installs it)" >&2
	exit 2
fi
CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPF_FUZZ=ON >/dev/null
bins=()
for t in $targets; do bins+=("fuzz-$t"); done
cmake --build "$build" -j "$jobs" --target "${bins[@]}"

failed=0
summary=""
for t in $targets; do
	run="$build/run/$t"
	mkdir -p "$run/corpus"
	log="$run/fuzz.log"
	echo "== fuzz-$t: ${secs}s"
	rc=0
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$build/tests/fuzz/fuzz-$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-max_len=65536 -print_final_stats=1 -artifact_prefix="$run/" \
		"$run/corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
	corpus=$(find "$run/corpus" -type f | wc -l)
	line="fuzz-$t: ${execs:-?} runs, ${rate:-?} execs/s, ${cov:-cov: ?}, corpus +$corpus"
	if [ "$rc" -ne 0 ]; then
		failed=1
		line="$line  FAILED (exit $rc, see $log)"
		grep -m5 -E 'ERROR|invariant|SUMMARY|Test unit written' "$log" >&2 || true
	fi
	echo "$line"
	summary="$summary$line"$'\n'
done
echo "---"
printf '%s' "$summary"
exit "$failed"
