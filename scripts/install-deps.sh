#!/usr/bin/env bash
# Installs everything profleet needs to build, run and test, from Debian 12 packages by name.
# Idempotent: packages already present are left alone. Runs apt-get through sudo when not root.
set -euo pipefail

PKGS=(
	build-essential cmake pkg-config git ca-certificates curl python3 openssl iproute2
	libwebsockets-dev libwebsockets-evlib-uv libuv1-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler libprotobuf-dev
	libssl-dev libyaml-dev libsqlite3-dev sqlite3 libcmocka-dev libjansson-dev zlib1g-dev
	libpq-dev postgresql
	libcurl4-openssl-dev
	libbpf-dev bpftool clang llvm libelf-dev libdw-dev libiberty-dev libxxhash-dev
	libcurl4-openssl-dev python3-yaml python3-jsonschema
	libgrpc-dev python3-grpcio python3-protobuf
	golang-go
	valgrind
	nodejs npm chromium
	openjdk-17-jdk-headless
)

missing=()
for p in "${PKGS[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
# nodejs may come from another apt source that bundles npm (its nodejs provides npm).
if command -v npm >/dev/null 2>&1; then
	for i in "${!missing[@]}"; do
		[ "${missing[$i]}" = npm ] && unset 'missing[i]'
	done
	missing=("${missing[@]}")
fi
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#PKGS[@]} packages present"
else
	SUDO=""
	if [ "$(id -u)" -ne 0 ]; then
		SUDO="sudo"
	fi
	echo "install-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# npm packages from the lock files: the console's build (ui/: esbuild, d3-flame-graph) and the
# browser tests' driver (tests/browser/: playwright-core; the browser is Debian's chromium).
# `npm ci` only when node_modules does not match the lock file.
root=$(cd "$(dirname "$0")/.." && pwd)
for d in ui tests/browser; do
	lock="$root/$d/package-lock.json"
	[ -f "$lock" ] || continue
	if ! cmp -s "$lock" "$root/$d/node_modules/.package-lock.json.installed" 2>/dev/null; then
		echo "install-deps: npm ci in $d"
		(cd "$root/$d" && npm ci --no-audit --no-fund --loglevel=error)
		cp "$lock" "$root/$d/node_modules/.package-lock.json.installed"
	fi
done
