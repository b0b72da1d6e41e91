#!/bin/sh
# interop_prof.sh otlp|pprof DUMP_BINARY — our profile bytes read by the reference tools.
#   otlp:  protoc --decode=...ExportProfilesServiceRequest against the upstream schema in
#          $PF_SHARED_DIR/reference/proto must accept them and show our names and link ids.
#   pprof: `go tool pprof -top` must read the gzip'd pprof and list the function names.
# Exit 77 (skipped) when the schema, protoc or go is missing.
set -eu
mode=$1
dump=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "$mode" = otlp ]; then
	ref="${PF_SHARED_DIR:-}/reference/proto"
	[ -d "$ref/opentelemetry" ] || { echo "no reference schema at $ref"; exit 77; }
	command -v protoc >/dev/null 2>&1 || { echo "no protoc"; exit 77; }
	"$dump" otlp "$tmp/req.pb"
	protoc -I "$ref" \
		--decode=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest \
		opentelemetry/proto/collector/profiles/v1development/profiles_service.proto \
		<"$tmp/req.pb" >"$tmp/req.txt"
	for want in '"work_a"' '"work_b"' '"do_syscall_64"' '"thread.name"' '"profile.frame.type"' \
		'"process.executable.build_id.gnu"' 'timestamps_unix_nano:' 'trace_id: "' \
		'string_value: "app"' 'period: 10101010'; do
		grep -qF "$want" "$tmp/req.txt" || { echo "missing $want in protoc output"; cat "$tmp/req.txt"; exit 1; }
	done
	echo "protoc decoded $(wc -c <"$tmp/req.pb") bytes"
	exit 0
fi

command -v go >/dev/null 2>&1 || { echo "no go (apt-get install golang-go)"; exit 77; }
"$dump" pprof "$tmp/cpu.pb.gz"
# No network, no module downloads: pprof is part of the Go distribution.
export HOME="$tmp" GOCACHE="$tmp/gocache" GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local
go tool pprof -top -symbolize=none "$tmp/cpu.pb.gz" >"$tmp/top.txt" 2>"$tmp/err.txt" || {
	cat "$tmp/err.txt"; exit 1; }
cat "$tmp/top.txt"
for fn in work_a work_b main do_syscall_64; do
	grep -q " $fn\$" "$tmp/top.txt" || { echo "missing $fn in pprof -top"; exit 1; }
done
# work_a is 8 of 11 samples flat: its line shows 72.7%
grep -E '72\.7[0-9]*%.* work_a$' "$tmp/top.txt" >/dev/null || { echo "wrong work_a share"; exit 1; }
