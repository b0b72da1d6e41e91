#!/usr/bin/env bash
# Installs everything profleet needs to build, run and test, from Debian 12 packages by name.
# Idempotent: packages already present are left alone. Runs apt-get through sudo when not root.
set -euo pipefail

PKGS=(
	build-essential cmake pkg-config git ca-certificates curl python3 openssl iproute2
	libwebsockets-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler libprotobuf-dev
	libssl-dev libyaml-dev libsqlite3-dev sqlite3 libcmocka-dev libjansson-dev zlib1g-dev
	libcurl4-openssl-dev
	libbpf-dev bpftool clang llvm libelf-dev libdw-dev
	libcurl4-openssl-dev python3-yaml python3-jsonschema
	golang-go
)

missing=()
for p in "${PKGS[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#PKGS[@]} packages present"
	exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
