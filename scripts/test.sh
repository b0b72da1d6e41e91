#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds (warnings as errors), runs every ctest
# layer, then repeats the unit and integration layers under ASan+UBSan.
#   scripts/test.sh            everything
#   PF_SKIP_SANITIZE=1 ...     skip the sanitizer pass (local iteration only)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

jobs=$(nproc)
cmake -S . -B build/ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPF_WERROR=ON >/dev/null
cmake --build build/ci -j "$jobs"
ctest --test-dir build/ci --output-on-failure --timeout 300

if [ "${PF_SKIP_SANITIZE:-0}" != "1" ]; then
	cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DPF_WERROR=ON -DPF_SANITIZE=ON >/dev/null
	cmake --build build/asan -j "$jobs"
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --test-dir build/asan --output-on-failure --timeout 300 -L 'unit|integration|interop'
fi
