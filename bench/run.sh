#!/usr/bin/env bash
# Benchmarks, release build: sync POST /call of a built-in API, and GET /tasks pages
# over 100,000 stored tasks, at several concurrency levels, on SQLite and PostgreSQL.
# Load comes from wrk on the same machine (it shares the cores with the server).
#
#   bench/run.sh [sqlite|postgres|both]     results go to bench/results/<date>-<backend>.txt
#   BENCH_ONLY=calls bench/run.sh postgres  the sync calls only (no seeding, no pages):
#                                           results go to <date>-<backend>-calls.txt
#   BENCH_PG_SYNC_COMMIT=off bench/run.sh postgres
#                                           PostgreSQL commits without waiting for the
#                                           WAL flush, SQLite's durability here
#                                           (synchronous = NORMAL): results go to
#                                           <date>-postgres[-calls]-async-commit.txt
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
which="${1:-both}"
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install -y wrk" >&2; exit 1; }
cargo build --release -p taskgate >/dev/null
bin="$PWD/target/release/taskgate"
port="${BENCH_PORT:-18181}"
duration="${BENCH_DURATION:-10s}"
pg_admin="${TASKGATE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
# Loopback: no TLS to PostgreSQL unless PGSSLMODE asks for it (docs/deploy.md
# has what TLS costs).
export PGSSLMODE="${PGSSLMODE:-disable}"
mkdir -p bench/results

run_backend() {
    local backend="$1" dir url out pid key cursors
    dir="$(mktemp -d)"
    if [ "$backend" = sqlite ]; then
        url="sqlite://$dir/taskgate.db"
    else
        psql -q "$pg_admin" -c "DROP DATABASE IF EXISTS taskgate_bench WITH (FORCE)" -c "CREATE DATABASE taskgate_bench"
        url="${pg_admin%/*}/taskgate_bench"
        if [ -n "${BENCH_PG_SYNC_COMMIT:-}" ]; then
            psql -q "$pg_admin" -c "ALTER DATABASE taskgate_bench SET synchronous_commit = $BENCH_PG_SYNC_COMMIT"
        fi
    fi
    local variant=""
    [ "$backend" = postgres ] && [ "${BENCH_PG_SYNC_COMMIT:-on}" = off ] && variant="-async-commit"
    out="$(fresh_result "$(date -u +%Y-%m-%d)-$backend${BENCH_ONLY:+-$BENCH_ONLY}$variant" txt)"
    (cd "$dir" && TASKGATE_DATABASE_URL="$url" TASKGATE_LISTEN="127.0.0.1:$port" \
        TASKGATE_DEFAULT_PLAN=enterprise TASKGATE_LOG_LEVEL=warn exec "$bin" serve >"$dir/stdout" 2>"$dir/stderr") &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' RETURN
    for _ in $(seq 1 100); do grep -q "live key" "$dir/stdout" 2>/dev/null && curl -sf "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
    key="$(awk '/live key/ {print $3}' "$dir/stdout")"
    export TG_KEY="$key"
    {
        echo "# Taskgate benchmark, $backend, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "# machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(uname -sr); commit $(git rev-parse --short HEAD)"
        echo "# command: ${BENCH_ONLY:+BENCH_ONLY=$BENCH_ONLY }${variant:+BENCH_PG_SYNC_COMMIT=off }bench/run.sh $backend (wrk -t2 -d$duration on the same machine; PGSSLMODE=$PGSSLMODE)"
        echo
        echo "## sync POST /call {api: sentiment} (every task stored: queued, running, succeeded)"
        for c in 8 32 128; do
            echo "### concurrency $c"
            wrk -t2 -c"$c" -d"$duration" --latency -s bench/call.lua "http://127.0.0.1:$port/api/v1/call" \
                | grep -E "Requests/sec|50%|90%|99%|non-200|Socket errors" || true
        done
        if [ "${BENCH_ONLY:-}" = calls ]; then
            echo
            echo "## server memory after the run"
            grep -E "VmHWM|VmRSS" /proc/$pid/status || true
            exit 0  # the pipeline's subshell only
        fi
        echo
        echo "## seeding to at least 100,000 stored tasks (async POST /call)"
        # wrk keeps running to -d after its threads stop, so watch the store and stop it.
        local count_sql="SELECT COUNT(*) FROM tasks" started=$SECONDS n=0
        TG_SEED_PER_THREAD=60000 wrk -t2 -c64 -d600s -s bench/seed.lua "http://127.0.0.1:$port/api/v1/call" >/dev/null &
        local seeder=$!
        while [ "$n" -lt 100000 ]; do
            sleep 2
            if [ "$backend" = sqlite ]; then n=$(sqlite3 "$dir/taskgate.db" "$count_sql"); else n=$(psql -At "$url" -c "$count_sql"); fi
        done
        kill -INT "$seeder" 2>/dev/null || true
        wait "$seeder" 2>/dev/null || true
        echo "stored tasks: $n after $((SECONDS - started)) s of seeding"
        # Fresh statistics, as autovacuum would give a long-running PostgreSQL.
        [ "$backend" = postgres ] && psql -q "$url" -c "ANALYZE tasks"
        sleep 3
        # Paths across the whole history: first pages both ways, a cursor page,
        # pages ending at ten points spread over the creation times, a filter.
        export TG_PATHS
        TG_PATHS="$(python3 bench/page_paths.py "$port" "$key" "status=succeeded&api=token-count")"
        echo
        echo "## GET /tasks?limit=20 over the stored tasks (first pages, cursor pages, deep pages by created_before, filtered)"
        for c in 8 32 128; do
            echo "### concurrency $c"
            wrk -t2 -c"$c" -d"$duration" --latency -s bench/pages.lua "http://127.0.0.1:$port" \
                | grep -E "Requests/sec|50%|90%|99%|Non-2xx|Socket errors" || true
        done
        echo
        echo "## server memory after the run"
        grep -E "VmHWM|VmRSS" /proc/$pid/status || true
    } | tee "$out"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
}

case "$which" in
    sqlite|postgres) run_backend "$which" ;;
    both) run_backend sqlite; run_backend postgres ;;
    *) echo "usage: bench/run.sh [sqlite|postgres|both]" >&2; exit 2 ;;
esac
