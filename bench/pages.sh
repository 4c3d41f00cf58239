#!/usr/bin/env bash
# GET /tasks pages over 1,000,000 stored tasks, release build, SQLite and PostgreSQL.
#
#   bench/pages.sh [sqlite|postgres|both] [tasks]   results go to bench/results/<date>-pages.txt
#
# The store is seeded by bench/seed_tasks.py (copies of a few tasks made through the
# API, each with its own id and time, spread over 30 days: bulk inserts, a minute or
# two per million). The pages: first pages both ways, a cursor page, pages ending at
# ten points spread over the history (created_before), pages filtered by status and
# by api; wrk -t2 (-t1 at c=1) at concurrency 1, 8 and 32 on the same machine.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
which="${1:-both}"
count="${2:-1000000}"
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install -y wrk" >&2; exit 1; }
cargo build --release -p taskgate --bin taskgate >&2
bin="$PWD/target/release/taskgate"
duration="${BENCH_DURATION:-10s}"
pg_admin="${TASKGATE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
export PGSSLMODE="${PGSSLMODE:-disable}"
out="$(fresh_result "$(date -u +%Y-%m-%d)-pages" txt)"
mkdir -p bench/results
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

run_backend() {
    local backend="$1" dir url pid key port
    dir="$(mktemp -d)"
    port="$(free_port)"
    if [ "$backend" = sqlite ]; then
        url="sqlite://$dir/taskgate.db"
    else
        psql -q "$pg_admin" -c "DROP DATABASE IF EXISTS taskgate_pages WITH (FORCE)" -c "CREATE DATABASE taskgate_pages"
        url="${pg_admin%/*}/taskgate_pages"
    fi
    (cd "$dir" && TASKGATE_DATABASE_URL="$url" TASKGATE_LISTEN="127.0.0.1:$port" \
        TASKGATE_DEFAULT_PLAN=enterprise TASKGATE_LOG_LEVEL=warn exec "$bin" serve >"$dir/stdout" 2>"$dir/stderr") &
    pid=$!
    for _ in $(seq 1 100); do grep -q "live key" "$dir/stdout" 2>/dev/null && curl -sf "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
    key="$(awk '/live key/ {print $3}' "$dir/stdout")"
    [ -n "$key" ] || { echo "taskgate did not start:" >&2; cat "$dir/stderr" >&2; exit 1; }
    # The templates: finished tasks of two built-in APIs, made through the API.
    for text in "I love this" "This is awful" "Bonjour tout le monde" "Hello there, general"; do
        for api in sentiment token-count; do
            curl -sf "127.0.0.1:$port/api/v1/call" -H "Authorization: Bearer $key" \
                -d "{\"api\":\"$api\",\"input\":{\"text\":\"$text\"}}" >/dev/null
        done
    done
    echo "== $backend: seeding $count tasks" >&2
    local seeded
    seeded="$(python3 bench/seed_tasks.py "$url" "$count")"
    export TG_KEY="$key" TG_PATHS
    TG_PATHS="$(python3 bench/page_paths.py "$port" "$key" "status=succeeded" "api=sentiment")"
    local stored
    if [ "$backend" = sqlite ]; then stored=$(sqlite3 "$dir/taskgate.db" "SELECT COUNT(*) FROM tasks"); else stored=$(psql -At "$url" -c "SELECT COUNT(*) FROM tasks"); fi
    {
        echo
        echo "## $backend: $stored stored tasks ($seeded)"
        printf "%-5s | %9s | %8s | %8s | %8s | %s\n" conns "pages/s" "p50 ms" "p90 ms" "p99 ms" "non-2xx"
        for c in 1 8 32; do
            local t=2; [ "$c" = 1 ] && t=1
            wrk -t$t -c"$c" -d"$duration" --latency -s bench/pages.lua "http://127.0.0.1:$port" >"$dir/wrk.txt"
            python3 - "$c" "$dir/wrk.txt" <<'PY'
import re, sys
c, text = sys.argv[1], open(sys.argv[2]).read()
def ms(v):
    n = float(re.match(r"[\d.]+", v).group())
    return n / 1000 if v.endswith("us") else n if v.endswith("ms") else n * 1000
lat = {m.group(1): ms(m.group(2)) for m in re.finditer(r"^\s+(50|90|99)%\s+(\S+)", text, re.M)}
rps = re.search(r"Requests/sec:\s+(\S+)", text).group(1)
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
print(f"{c:<5} | {float(rps):9.0f} | {lat['50']:8.2f} | {lat['90']:8.2f} | {lat['99']:8.2f} | {bad.group(1) if bad else 0}")
PY
        done
        echo "server peak memory: $(awk '/VmHWM/ {print $2, $3}' /proc/$pid/status)"
    } | tee -a "$out"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    [ "$backend" = postgres ] && psql -q "$pg_admin" -c "DROP DATABASE IF EXISTS taskgate_pages WITH (FORCE)"
    rm -rf "$dir"
}

{
    echo "# GET /tasks pages at $count stored tasks, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(uname -sr); commit $(git rev-parse --short HEAD)"
    echo "# command: bench/pages.sh $which $count (wrk -d$duration --latency, same machine; PGSSLMODE=$PGSSLMODE)"
} > "$out"
case "$which" in
    sqlite|postgres) run_backend "$which" ;;
    both) run_backend sqlite; run_backend postgres ;;
    *) echo "usage: bench/pages.sh [sqlite|postgres|both] [tasks]" >&2; exit 2 ;;
esac
