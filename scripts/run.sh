#!/usr/bin/env bash
# Installs what profleet needs, builds it, and runs a controller plus a local agent with the
# embedded defaults. Ctrl-C stops both.
#   PF_LISTEN=127.0.0.1:4320   controller address
#   PF_DATA_DIR=./profleet-data  controller data (SQLite, tokens); the agent's state lives inside
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

listen=${PF_LISTEN:-127.0.0.1:4320}
data=${PF_DATA_DIR:-./profleet-data}
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
targets=(profleet-controller profleet-agent profleetctl)
# The fleet console (ui/, built next to the controller, which serves it at /ui/).
[ -d ui/node_modules/esbuild ] && targets+=(ui)
cmake --build build/release -j "$(nproc)" --target "${targets[@]}"

mkdir -p "$data"
ctl_log="$data/controller.log"
agent_log="$data/agent.log"
build/release/controller/profleet-controller --listen "$listen" --data-dir "$data" \
	>>"$ctl_log" 2>&1 &
ctl=$!
agent=""
# Runs once: a signal's trap exits, and that exit must not run it again.
cleanup() {
	trap - EXIT INT TERM
	[ -n "$agent" ] && kill -TERM "$agent" 2>/dev/null && wait "$agent" 2>/dev/null
	kill -TERM "$ctl" 2>/dev/null && wait "$ctl" 2>/dev/null
	echo "profleet stopped"
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

host=${listen%:*}
port=${listen##*:}
[ "$host" = "0.0.0.0" ] && host=127.0.0.1
url="http://$host:$port"
for _ in $(seq 1 100); do
	if curl -fs "$url/readyz" >/dev/null 2>&1; then break; fi
	if ! kill -0 "$ctl" 2>/dev/null; then
		echo "the controller exited; see $ctl_log" >&2
		tail -n 20 "$ctl_log" >&2
		exit 1
	fi
	sleep 0.1
done
curl -fs "$url/readyz" >/dev/null || { echo "controller not ready; see $ctl_log" >&2; exit 1; }

admin=$(cat "$data/admin.token")
# The embedded store is the default destination: unless a `default` config exists already,
# every agent samples CPU at 99 Hz in 10 s windows and sends them to this controller,
# authenticating with its own agent token (auth: agent_token; the config holds no secret).
if ! curl -fs -H "Authorization: Bearer $admin" "$url/api/v1/configs/default" >/dev/null; then
	printf 'profiling:\n  sampling: {frequency_hz: 99, duration_seconds: 10}\n  exporters:\n    - {type: otlp_http, endpoint: "%s/v1development/profiles", auth: agent_token}\n' "$url" |
		curl -fs -X PUT -H "Authorization: Bearer $admin" --data-binary @- \
			"$url/api/v1/configs/default" >/dev/null
fi

# eBPF sampling needs root (or CAP_BPF + CAP_PERFMON); without it the agent still runs and
# reports its sampler unhealthy.
agent_cmd=(build/release/agent/profleet-agent --server "ws://$host:$port/v1/opamp"
	--token-file "$data/agent.token" --state-dir "$data/agent-state" --label env=local)
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then
	agent_cmd=(sudo "${agent_cmd[@]}")
fi
"${agent_cmd[@]}" >>"$agent_log" 2>&1 &
agent=$!

token_file="$(cd "$data" && pwd)/admin.token"
cat <<MSG

profleet is running.
  controller   $url   (log: $ctl_log)
  console      $url/ui/   (sign in with the admin token)
  local agent  pid $agent   (log: $agent_log)
  admin token  $token_file

Try:
  TOKEN=\$(cat $token_file)
  curl -s -H "Authorization: Bearer \$TOKEN" $url/api/v1/agents
  curl -s -H "Authorization: Bearer \$TOKEN" $url/api/v1/fleet/summary
  curl -s -H "Authorization: Bearer \$TOKEN" "$url/api/v1/profiles?limit=5"
  curl -s -H "Authorization: Bearer \$TOKEN" "$url/api/v1/top?limit=10"
  curl -s -H "Authorization: Bearer \$TOKEN" "$url/api/v1/flamegraph" > flame.json

The first profiles arrive about 10 s after start (one window).

Ctrl-C stops both.
MSG
wait "$ctl"
