#!/usr/bin/env bash
# Runs a command against a real Taskgate server made for it: a fresh SQLite
# store on a free loopback port, a local fake of OpenAI (the upstream of the
# `chat` and `embed` APIs), and keys of every kind, all handed to the command
# in its environment. The server and the fake stop when the command ends; the
# command's exit status is this script's.
#
#   scripts/with-server.sh COMMAND [ARGS...]
#
# The command gets:
#   TASKGATE_BASE_URL         http://127.0.0.1:PORT/api/v1
#   TASKGATE_SERVER_URL       http://127.0.0.1:PORT
#   TASKGATE_API_KEY          live key, account `clients` (enterprise: no limits)
#   TASKGATE_TEST_KEY         test key of the same account (sandbox outputs)
#   TASKGATE_RESTRICTED_KEY   restricted key of that account: apis:read and
#                             tasks:read only, on the API `sentiment`
#   TASKGATE_LIMITED_KEY      live key of account `limited`, plan `tiny`:
#                             5 requests per rolling minute
#   TASKGATE_SERVER_LOG       the server's log file
#   TASKGATE_FAKE_OPENAI_URL  the fake OpenAI (its GET /_fake/last_chat_request
#                             shows what the upstream last received)
# The catalog has the built-in APIs (sentiment, language-detect, token-count)
# and `chat` (kind chat) and `embed` (kind embedding) on the fake. The fake
# plays an agent's model: offered tools, it calls one; given a tool's result,
# it answers with it (crates/taskgate-providers/examples/fake_openai.rs).
#
# Webhooks may go to loopback and private addresses
# (`webhooks.allow_private_networks`), for the tests' own receivers.
#
# TASKGATE_BIN and FAKE_OPENAI_BIN name prebuilt binaries; otherwise both are
# built (debug) first.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac

bin="${TASKGATE_BIN:-}"
fake_bin="${FAKE_OPENAI_BIN:-}"
if [ -z "$bin" ] || [ -z "$fake_bin" ]; then
    (cd "$root" && cargo build --locked --quiet -p taskgate &&
        cargo build --locked --quiet -p taskgate-providers --example fake_openai)
    bin="${bin:-$target/debug/taskgate}"
    fake_bin="${fake_bin:-$target/debug/examples/fake_openai}"
fi
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
case "$fake_bin" in /*) ;; *) fake_bin="$PWD/$fake_bin" ;; esac

work="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do { kill "$p" && wait "$p"; } 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_for() { # $1 = what, then a test command
    local what="$1"
    shift
    for _ in $(seq 1 150); do
        "$@" && return 0
        sleep 0.1
    done
    echo "error: $what did not start" >&2
    return 1
}

"$fake_bin" 0 >"$work/fake.out" 2>"$work/fake.err" &
pids+=($!)
wait_for "the fake OpenAI" grep -qs "listening on" "$work/fake.out" || { cat "$work/fake.err" >&2; exit 1; }
fake_url="$(awk '/listening on/ {print $NF}' "$work/fake.out")"

port="$(free_port)"
cat >"$work/taskgate.toml" <<TOML
listen = "127.0.0.1:$port"
database_url = "sqlite://$work/taskgate.db"
default_plan = "enterprise"
log_level = "warn"

[plans.tiny]
per_minute = 5

# The client libraries' live tests receive webhooks on loopback (for local
# development only: a real server refuses private addresses).
[webhooks]
allow_private_networks = true

[providers.fake]
type = "openai"
base_url = "$fake_url/v1"
api_key = "sk-fake"
max_retries = 0

[catalog.apis.chat]
kind = "chat"
provider = "fake"
model = "gpt-4o-mini"
input_price_per_1k_tokens_usd = "0.00015"
output_price_per_1k_tokens_usd = "0.0006"

[catalog.apis.embed]
kind = "embedding"
provider = "fake"
model = "text-embedding-3-small"
input_price_per_1k_tokens_usd = "0.00002"
TOML

tg() { (cd "$work" && "$bin" --config "$work/taskgate.toml" --json "$@"); }
field() { python3 -c "import json, sys; print(json.load(sys.stdin)[sys.argv[1]])" "$1"; }

tg migrate >/dev/null
account="$(tg accounts create --name clients --plan enterprise | field id)"
limited="$(tg accounts create --name limited --plan tiny | field id)"
TASKGATE_API_KEY="$(tg keys create --account "$account" --type live --name live | field secret)"
TASKGATE_TEST_KEY="$(tg keys create --account "$account" --type test --name test | field secret)"
TASKGATE_RESTRICTED_KEY="$(tg keys create --account "$account" --type restricted --name restricted \
    --scopes apis:read,tasks:read --apis sentiment | field secret)"
TASKGATE_LIMITED_KEY="$(tg keys create --account "$limited" --type live --name limited | field secret)"

(cd "$work" && exec "$bin" --config "$work/taskgate.toml" serve >"$work/server.out" 2>"$work/server.log") &
pids+=($!)
server="http://127.0.0.1:$port"
wait_for "taskgate" python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
    "$server/readyz" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }

export TASKGATE_BASE_URL="$server/api/v1" TASKGATE_SERVER_URL="$server" TASKGATE_SERVER_LOG="$work/server.log"
export TASKGATE_FAKE_OPENAI_URL="$fake_url"
export TASKGATE_API_KEY TASKGATE_TEST_KEY TASKGATE_RESTRICTED_KEY TASKGATE_LIMITED_KEY
status=0
"$@" || status=$?
if grep -q "panicked" "$work/server.log"; then
    echo "error: the server panicked:" >&2
    grep -A5 "panicked" "$work/server.log" >&2
    status=1
fi
exit "$status"
