#!/usr/bin/env bash
# The deployment of docs/deploy.md, for real: three instances on one
# PostgreSQL database and the machine's Redis, behind nginx with
# deploy/nginx.conf (its ports moved to free ones). Checks, through nginx:
# a free-plan account gets exactly 60 accepted requests in a rolling minute
# spread over the three; a sync call; a chat stream; readiness; and an
# instance stopped with SIGTERM while requests flow: every answer is 200.
#
#   scripts/deploy-smoke.sh      (TASKGATE_BIN and FAKE_OPENAI_BIN: prebuilt binaries)
#
# Needs nginx (installed with apt-get when run as root), PostgreSQL
# (TASKGATE_TEST_POSTGRES_URL) and Redis (TASKGATE_TEST_REDIS_URL); without
# one of them it is skipped, and says so; with CI=true that is an error.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac

skip() {
    if [ "${CI:-}" = "true" ]; then
        echo "error: CI=true but $1" >&2
        exit 1
    fi
    echo "NOTE: $1: the deployment smoke test is SKIPPED."
    exit 0
}

if ! command -v nginx >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "Installing nginx"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light >/dev/null; }
fi
nginx="$(command -v nginx || true)"
[ -n "$nginx" ] || [ ! -x /usr/sbin/nginx ] || nginx=/usr/sbin/nginx
[ -n "$nginx" ] || skip "nginx is not installed (Debian: apt-get install nginx-light)"
pg_admin="${TASKGATE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
redis="${TASKGATE_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
command -v psql >/dev/null 2>&1 || skip "psql is not installed"
psql "$pg_admin" -qAtc "SELECT 1" >/dev/null 2>&1 || skip "PostgreSQL is not reachable at ${pg_admin%%\?*}"
redis_hostport="${redis#redis://}"
redis_hostport="${redis_hostport%%/*}"
(exec 3<>"/dev/tcp/${redis_hostport%%:*}/${redis_hostport##*:}") 2>/dev/null || skip "Redis is not reachable at $redis"

bin="${TASKGATE_BIN:-}"
fake_bin="${FAKE_OPENAI_BIN:-}"
if [ -z "$bin" ] || [ -z "$fake_bin" ]; then
    cargo build --locked --quiet -p taskgate
    cargo build --locked --quiet -p taskgate-providers --example fake_openai
    bin="${bin:-$target/debug/taskgate}"
    fake_bin="${fake_bin:-$target/debug/examples/fake_openai}"
fi
case "$bin" in /*) ;; *) bin="$root/$bin" ;; esac
case "$fake_bin" in /*) ;; *) fake_bin="$root/$fake_bin" ;; esac

work="$(mktemp -d)"
db="tg_deploy_smoke_$$"
pids=()
cleanup() {
    [ -f "$work/nginx.pid" ] && { "$nginx" -c "$work/nginx.conf" -p "$work" -s stop 2>/dev/null || true; }
    for p in "${pids[@]}"; do { kill "$p" && wait "$p"; } 2>/dev/null || true; done
    psql "$pg_admin" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
psql "$pg_admin" -qc "CREATE DATABASE $db" >/dev/null
pg_url="${pg_admin%/*}/$db"

"$fake_bin" 0 >"$work/fake.out" 2>"$work/fake.err" &
pids+=($!)
for _ in $(seq 1 100); do grep -q "listening on" "$work/fake.out" 2>/dev/null && break; sleep 0.1; done
fake_url="$(awk '/listening on/ {print $NF}' "$work/fake.out")"

cat >"$work/taskgate.toml" <<TOML
database_url = "$pg_url"
redis_url = "$redis"
default_plan = "free"
log_level = "warn"
trusted_proxies = ["127.0.0.1/32"]
shutdown_grace_ms = 5000

[providers.fake]
type = "openai"
base_url = "$fake_url/v1"
api_key = "sk-fake"
stream = true

[catalog.apis.chat]
kind = "chat"
provider = "fake"
model = "gpt-4o-mini"
TOML

ports=("$(free_port)" "$(free_port)" "$(free_port)")
for i in 0 1 2; do
    (cd "$work" && TASKGATE_LISTEN="127.0.0.1:${ports[$i]}" exec "$bin" --config "$work/taskgate.toml" serve \
        >"$work/out$i.txt" 2>"$work/err$i.txt") &
    pids+=($!)
    # One at a time: the first creates the schema and the first account.
    for _ in $(seq 1 100); do curl -sf "127.0.0.1:${ports[$i]}/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
done
key="$(cat "$work"/out*.txt | awk '/live key:/ {print $3}' | head -n1)"
[ -n "$key" ] || { cat "$work"/err*.txt >&2; echo "error: no key printed" >&2; exit 1; }

front="$(free_port)"
sed -e "s/127.0.0.1:8081/127.0.0.1:${ports[0]}/" -e "s/127.0.0.1:8082/127.0.0.1:${ports[1]}/" \
    -e "s/127.0.0.1:8083/127.0.0.1:${ports[2]}/" -e "s/listen 80;/listen 127.0.0.1:$front;/" \
    deploy/nginx.conf >"$work/site.conf"
cat >"$work/nginx.conf" <<NGINX
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events {}
http {
    access_log off;
    client_body_temp_path $work/body;
    proxy_temp_path $work/proxy;
    include $work/site.conf;
}
NGINX
"$nginx" -c "$work/nginx.conf" -p "$work" -t -q
"$nginx" -c "$work/nginx.conf" -p "$work"
base="http://127.0.0.1:$front"
for _ in $(seq 1 50); do curl -sf "$base/readyz" >/dev/null 2>&1 && break; sleep 0.1; done

fail() { echo "error: $*" >&2; exit 1; }
status() { curl -s -o /dev/null -w "%{http_code}" "$@"; }

# Readiness through nginx names both stores.
curl -sf "$base/readyz" | grep -q '"redis":"up"' || fail "readyz does not report Redis up"

# A sync call and a chat stream, through nginx.
[ "$(status "$base/api/v1/call" -H "Authorization: Bearer $key" \
    -d '{"api":"sentiment","input":{"text":"I love it"}}')" = 200 ] || fail "a sync call failed"
stream="$(curl -sN "$base/openai/v1/chat/completions" -H "Authorization: Bearer $key" \
    -d '{"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":true}')"
echo "$stream" | grep -q 'data: \[DONE\]' || fail "the chat stream did not end with [DONE]: $stream"

# The free plan's 60 per rolling minute, spread over the three instances:
# 2 used above, so 58 more are accepted and the rest refused.
ok=0 limited=0 other=0
for _ in $(seq 1 70); do
    case "$(status "$base/api/v1/apis?limit=1" -H "Authorization: Bearer $key")" in
        200) ok=$((ok + 1)) ;;
        429) limited=$((limited + 1)) ;;
        *) other=$((other + 1)) ;;
    esac
done
[ "$ok" = 58 ] && [ "$limited" = 12 ] && [ "$other" = 0 ] \
    || fail "expected 58 accepted and 12 refused over the three instances, got $ok, $limited and $other others"
echo "deploy smoke: exactly 60 requests per rolling minute over three instances behind nginx"

# SIGTERM to one instance while a second account's requests flow: all 200.
account="$(cd "$work" && "$bin" --config "$work/taskgate.toml" --json accounts create --name drain --plan enterprise \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')"
key2="$(cd "$work" && "$bin" --config "$work/taskgate.toml" --json keys create --account "$account" --type live --name drain \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["secret"])')"
# Four clients at once, so some request is always on its way to the instance.
loads=()
for c in 1 2 3 4; do
    (for _ in $(seq 1 60); do status "$base/api/v1/call" -H "Authorization: Bearer $key2" \
        -d '{"api":"sentiment","input":{"text":"ok"}}'; echo; done) >"$work/answers$c.txt" &
    loads+=($!)
done
sleep 0.5
kill -TERM "${pids[1]}"
wait "${loads[@]}"
cat "$work"/answers[1-4].txt >"$work/answers.txt"
if grep -qv '^200$' "$work/answers.txt"; then
    fail "answers other than 200 while an instance drained: $(sort "$work/answers.txt" | uniq -c | tr '\n' ' ')"
fi
wait "${pids[1]}" || fail "the drained instance did not exit 0"
echo "deploy smoke: an instance drained under load: $(wc -l <"$work/answers.txt") answers, all 200"
