#!/usr/bin/env bash
# Gateway overhead: a chat call through Taskgate's OpenAI-compatible adapter to a
# fast local fake (crates/taskgate-providers/examples/fake_openai.rs), versus the
# same request made to the fake directly, at several concurrency levels; release
# build, wrk on the same machine (it shares the cores with the gateway and the fake).
#
#   bench/overhead.sh        results go to bench/results/<date>-overhead.txt
#
# Gateway calls are sync POST /call: authenticated, rate-limit checked (enterprise
# plan: unlimited), stored in SQLite, executed through the route loop and recorded
# with their attempt and usage. Two row sets: the provider with stream = false (one
# JSON answer), then stream = true (SSE chunks, usage chunk, [DONE]). Every answer
# is checked: 200 and "status":"succeeded" from the gateway, the completion from the fake.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install -y wrk" >&2; exit 1; }
# TASKGATE_BIN and FAKE_OPENAI_BIN run prebuilt binaries instead of building
# them (to compare two builds run back to back); BENCH_OUT names the result file.
if [ -z "${TASKGATE_BIN:-}" ]; then cargo build --release -p taskgate --bin taskgate >/dev/null; fi
if [ -z "${FAKE_OPENAI_BIN:-}" ]; then cargo build --release -p taskgate-providers --example fake_openai >/dev/null; fi
bin="${TASKGATE_BIN:-$PWD/target/release/taskgate}"
fake="${FAKE_OPENAI_BIN:-$PWD/target/release/examples/fake_openai}"
duration="${BENCH_DURATION:-10s}"
dir="$(mktemp -d)"
out="${BENCH_OUT:-$(fresh_result "$(date -u +%Y-%m-%d)-overhead" txt)}"
mkdir -p bench/results
fake_pid="" tg_pid=""
cleanup() {
    for p in $tg_pid $fake_pid; do kill "$p" 2>/dev/null || true; done
    for p in $tg_pid $fake_pid; do wait "$p" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The fake picks a free port itself and prints its address.
"$fake" 0 >"$dir/fake.out" 2>"$dir/fake.err" &
fake_pid=$!
for _ in $(seq 1 100); do grep -q "listening on" "$dir/fake.out" 2>/dev/null && break; sleep 0.1; done
fake_url="$(awk '/listening on/ {print $NF}' "$dir/fake.out")"
[ -n "$fake_url" ] || { echo "the fake did not start:" >&2; cat "$dir/fake.err" >&2; exit 1; }
port="$(free_port)"

serve() { # $1 = stream (true|false); sets tg_pid and key
    cat >"$dir/taskgate-$1.toml" <<TOML
listen = "127.0.0.1:$port"
database_url = "sqlite://$dir/taskgate-$1.db"
default_plan = "enterprise"
log_level = "warn"
workers = 512

[providers.fake]
type = "openai"
base_url = "$fake_url/v1"
api_key = "sk-bench"
stream = $1
max_retries = 0

[catalog.apis.chat]
kind = "chat"
provider = "fake"
model = "gpt-4o-mini"
input_price_per_1k_tokens_usd = "0.00015"
output_price_per_1k_tokens_usd = "0.0006"
TOML
    (cd "$dir" && exec "$bin" serve --config "$dir/taskgate-$1.toml" >"$dir/stdout-$1" 2>"$dir/stderr-$1") &
    tg_pid=$!
    for _ in $(seq 1 100); do
        grep -q "live key" "$dir/stdout-$1" 2>/dev/null && curl -sf "127.0.0.1:$port/readyz" >/dev/null && break
        sleep 0.2
    done
    key="$(awk '/live key/ {print $3}' "$dir/stdout-$1")"
    [ -n "$key" ] || { echo "taskgate did not start:" >&2; cat "$dir/stderr-$1" >&2; exit 1; }
}

# One wrk run; prints "req/s p50 p99 ok bad" (latencies as wrk prints them).
measure() { # $1 = url, $2 = concurrency; TG_BODY, TG_KEY, TG_EXPECT in the environment
    wrk -t2 -c"$2" -d"$duration" --latency -s bench/compare.lua "$1" >"$dir/wrk.txt"
    grep -E "Non-2xx|Socket errors" "$dir/wrk.txt" >&2 || true
    awk '/Requests\/sec/ {rps=$2} / 50%/ {p50=$2} / 99%/ {p99=$2} /^checked:/ {ok=$2; bad=$4}
         END {print rps, p50, p99, ok, bad}' "$dir/wrk.txt"
}

ms() { # a wrk latency (812.00us, 1.23ms, 1.02s) in milliseconds
    awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n = n; else if (v ~ /s$/) n *= 1000; printf "%.2f", n }'
}

gateway_body='{"api":"chat","input":{"messages":[{"role":"user","content":"Say hello"}]}}'

{
    echo "# Taskgate gateway overhead, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# machine: $(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(free -g | awk '/Mem:/ {print $2}') GiB; $(uname -sr)"
    if [ -n "${TASKGATE_BIN:-}" ]; then
        echo "# binary: $bin (prebuilt; see the commit it was built from in the result's name or notes); load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
    else
        echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)'); load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
    fi
    echo "# command: bench/overhead.sh (wrk -t2 -d$duration --latency; wrk, gateway and fake share the $(nproc) cores)"
    echo "# gateway: sync POST /api/v1/call $gateway_body"
    echo "#   SQLite store, enterprise plan, workers = 512, provider max_retries = 0"
    echo "# direct: POST $fake_url/v1/chat/completions with the body the gateway sends"
    for stream in false true; do
        if [ "$stream" = true ]; then
            direct_body='{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello"}],"stream":true,"stream_options":{"include_usage":true}}'
            direct_expect='data: [DONE]'
        else
            direct_body='{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello"}],"stream":false}'
            direct_expect='"object":"chat.completion"'
        fi
        serve "$stream"
        # What the gateway really sends: one request, as the fake would see it, is
        # the body above (checked by the adapter's tests); one answer is shown here.
        sample="$(curl -s "127.0.0.1:$port/api/v1/call" -H "Authorization: Bearer $key" -d "$gateway_body")"
        echo
        echo "## provider stream = $stream"
        echo "one gateway answer: $(echo "$sample" | python3 -c 'import json,sys; d=json.load(sys.stdin)["data"]; print(json.dumps({k: d[k] for k in ("status","output","usage")}))')"
        # Warm-up: connections, SQLite pages, the fake.
        TG_BODY="$direct_body" TG_EXPECT="$direct_expect" TG_KEY="" \
            wrk -t2 -c8 -d2s -s bench/compare.lua "$fake_url/v1/chat/completions" >/dev/null
        TG_BODY="$gateway_body" TG_EXPECT='"status":"succeeded"' TG_KEY="$key" \
            wrk -t2 -c8 -d3s -s bench/compare.lua "http://127.0.0.1:$port/api/v1/call" >/dev/null
        echo
        printf "%-5s | %-26s | %-26s | %-17s | %s\n" conns "direct req/s  p50   p99" "gateway req/s  p50   p99" "added p50   p99" "answers checked"
        for c in 8 32 128; do
            read -r d_rps d50 d99 d_ok d_bad < <(TG_BODY="$direct_body" TG_EXPECT="$direct_expect" TG_KEY="" \
                measure "$fake_url/v1/chat/completions" "$c")
            read -r g_rps g50 g99 g_ok g_bad < <(TG_BODY="$gateway_body" TG_EXPECT='"status":"succeeded"' TG_KEY="$key" \
                measure "http://127.0.0.1:$port/api/v1/call" "$c")
            d50=$(ms "$d50"); d99=$(ms "$d99"); g50=$(ms "$g50"); g99=$(ms "$g99")
            printf "%-5s | %8.0f %7s %8s | %9.0f %7s %8s | %7s %8s | direct %s ok %s bad, gateway %s ok %s bad\n" \
                "$c" "$d_rps" "$d50" "$d99" "$g_rps" "$g50" "$g99" \
                "$(awk -v a="$g50" -v b="$d50" 'BEGIN {printf "%+.2f", a-b}')" \
                "$(awk -v a="$g99" -v b="$d99" 'BEGIN {printf "%+.2f", a-b}')" \
                "$d_ok" "$d_bad" "$g_ok" "$g_bad"
            [ "$d_bad" = 0 ] && [ "$g_bad" = 0 ] && [ "$g_ok" -gt 0 ] || touch "$dir/failed"
        done
        echo "(latencies in ms; added = gateway minus direct)"
        # The store agrees: no task failed, and the newest one is complete.
        python3 - "$port" "$key" <<'PY'
import json, sys, urllib.request
port, key = sys.argv[1], sys.argv[2]
def get(path):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/{path}", headers={"Authorization": f"Bearer {key}"})
    return json.load(urllib.request.urlopen(req))["data"]
failed = get("tasks?status=failed&limit=1")["items"]
task = get("tasks/" + get("tasks?limit=1")["items"][0]["id"])
print(f"stored: no failed task: {not failed}; newest task: status {task['status']}, "
      f"attempts {[(a.get('provider'), a.get('outcome')) for a in task.get('attempts', [])]}, usage {json.dumps(task['usage'])}")
PY
        echo "gateway memory: $(grep -E 'VmHWM' /proc/$tg_pid/status | tr -s ' \t' ' ')"
        kill "$tg_pid"; wait "$tg_pid" 2>/dev/null || true; tg_pid=""
    done
} | tee "$out"
[ ! -e "$dir/failed" ] || { echo "some answers were not successful (see above)" >&2; exit 1; }
