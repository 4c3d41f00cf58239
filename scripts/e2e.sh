#!/usr/bin/env bash
# The dashboard driven in Debian's Chromium (e2e/dashboard.test.mjs, with
# playwright-core from npm; no browser is ever downloaded), against a real
# server on a free port: on a fresh SQLite store, then on a fresh PostgreSQL
# database when one is reachable. Screenshots go to target/e2e-screenshots/.
#
# Needs Node.js 20+ and /usr/bin/chromium (installed here with apt-get when
# missing and run as root). Without them it is skipped, and says so; with
# CI=true that is an error.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

skip() {
    if [ "${CI:-}" = "true" ]; then
        echo "error: CI=true but $1" >&2
        exit 1
    fi
    echo "NOTE: $1: the dashboard's browser tests are SKIPPED."
    exit 0
}

chromium="${CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "Installing Debian's chromium"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
            || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }
    fi
    [ -x "$chromium" ] || skip "Chromium is not installed (Debian: apt-get install chromium)"
fi
command -v node >/dev/null 2>&1 || skip "Node.js is not installed"
(cd e2e && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)

bin="${TASKGATE_BIN:-}"
if [ -z "$bin" ]; then
    cargo build --locked -p taskgate
    bin="${CARGO_TARGET_DIR:-target}/debug/taskgate"
fi
case "$bin" in /*) ;; *) bin="$root/$bin" ;; esac

work="$(mktemp -d)"
server=""
cleanup() {
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# Runs the browser tests against a server on the store `$1` (named `$2`).
run_on() {
    local url="$1" backend="$2" port out
    port="$(free_port)"
    out="$work/$backend.out"
    (cd "$work" && TASKGATE_DATABASE_URL="$url" TASKGATE_LISTEN="127.0.0.1:$port" \
        exec "$bin" serve >"$out" 2>"$work/$backend.err") &
    server=$!
    local base="http://127.0.0.1:$port"
    for _ in $(seq 1 100); do
        node -e 'fetch(process.argv[1]).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))' \
            "$base/readyz" 2>/dev/null && break
        sleep 0.2
    done
    local email password test_key
    email="$(sed -n 's/^ *email: //p' "$out")"
    password="$(sed -n 's/^ *password: //p' "$out")"
    test_key="$(sed -n 's/^ *test key: //p' "$out")"
    if [ -z "$password" ] || [ -z "$test_key" ]; then
        echo "error: the first start did not print the admin and the keys" >&2
        cat "$out" "$work/$backend.err" >&2
        exit 1
    fi
    echo "Browser tests on $backend ($base)"
    (cd e2e && TASKGATE_URL="$base" ADMIN_EMAIL="$email" ADMIN_PASSWORD="$password" \
        TEST_KEY="$test_key" BACKEND="$backend" CHROMIUM="$chromium" \
        SCREENSHOTS="$root/target/e2e-screenshots" node --test dashboard.test.mjs)
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=""
}

run_on "sqlite://$work/taskgate.db" sqlite

pg_url="${TASKGATE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
if command -v psql >/dev/null 2>&1 && psql -q "$pg_url" -c "SELECT 1" >/dev/null 2>&1; then
    db="taskgate_e2e_$$"
    psql -q "$pg_url" -c "CREATE DATABASE $db" >/dev/null
    trap 'psql -q "$pg_url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1; cleanup' EXIT
    run_on "${pg_url%/*}/$db" postgres
elif [ "${CI:-}" = "true" ]; then
    echo "error: CI=true but PostgreSQL is not reachable at $pg_url (psql)" >&2
    exit 1
else
    echo "NOTE: PostgreSQL is not reachable: the browser tests on PostgreSQL are SKIPPED."
fi
