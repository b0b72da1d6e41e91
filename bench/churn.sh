#!/usr/bin/env bash
# bench/churn.sh — processes that come and go beside a benchmark, like a build or a CI job on
# the same host: for SECONDS, one round after another of a C compile (gcc's driver, cc1, as:
# three short-lived executables and their libraries), a Python start-up with a little work,
# and a shell pipeline, then CHURN_PAUSE seconds (0.1) of rest. Every one of them lives from
# a few to a few hundred milliseconds, so a profiler on the host sees new processes, new
# executables and new mappings all the time. Not a test: bench/agent_overhead.sh (CHURN=1)
# runs it; it can also be run by hand beside an agent.
#
#   bench/churn.sh SECONDS        prints "rounds N" at the end
set -euo pipefail
secs=${1:?usage: churn.sh SECONDS}
root=$(cd "$(dirname "$0")/.." && pwd)
pause=${CHURN_PAUSE:-0.1}
tmp=$(mktemp -d /tmp/pf-churn.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
end=$((SECONDS + secs))
rounds=0
while [ "$SECONDS" -lt "$end" ]; do
	cc -O2 -c "$root/tests/ebpf/workload.c" -o "$tmp/w.o"
	python3 -c 'sum(i * i for i in range(200000))'
	sort -n "$root/tests/ebpf/workload.c" | gzip -c | wc -c >/dev/null
	rounds=$((rounds + 1))
	sleep "$pause"
done
echo "rounds $rounds"
