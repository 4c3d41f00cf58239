#!/usr/bin/env bash
# Scale-out on this machine, release build: sync POST /call through nginx
# (deploy/nginx.conf) to one, two and three instances sharing one PostgreSQL
# database and Redis; and what the Redis rate limiter adds per request (one
# instance, called directly at concurrency 1 and 32, the same plan's limits
# counted in memory and then in Redis).
#
#   bench/instances.sh        results go to bench/results/<date>-instances.txt
#
#   BENCH_BIN=path/to/taskgate    a binary built already (else: cargo build --release)
#   BENCH_LIMITER_ONLY=1          only the limiter's rows (old and new binaries
#                                 interleaved, say)
#   BENCH_DB=name                 the database made for the run (default
#                                 taskgate_bench_instances)
#
# The limiter's rows also give the instance's CPU time per request (user +
# system, from /proc): the figure that moves least when the machine is busy
# with other work.
#
# Needs wrk, nginx, PostgreSQL (TASKGATE_TEST_POSTGRES_URL) and Redis
# (TASKGATE_TEST_REDIS_URL). Every instance, nginx, PostgreSQL, Redis and wrk
# share the same cores: the figures are what this one machine does, not what
# each part would do on its own.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
for tool in wrk nginx psql; do
    command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || { echo "$tool is needed" >&2; exit 1; }
done
nginx="$(command -v nginx || echo /usr/sbin/nginx)"
if [ -n "${BENCH_BIN:-}" ]; then
    bin="$(realpath "$BENCH_BIN")"
else
    cargo build --release -p taskgate >/dev/null
    bin="$PWD/target/release/taskgate"
fi
duration="${BENCH_DURATION:-10s}"
pg_admin="${TASKGATE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
# Loopback: no TLS to PostgreSQL unless PGSSLMODE asks for it (docs/deploy.md
# has what TLS costs).
export PGSSLMODE="${PGSSLMODE:-disable}"
redis="${TASKGATE_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
db="${BENCH_DB:-taskgate_bench_instances}"
out="$(fresh_result "$(date -u +%Y-%m-%d)-instances" txt)"
work="$(mktemp -d)"
pids=()
stop_all() {
    [ -f "$work/nginx.pid" ] && { "$nginx" -c "$work/nginx.conf" -p "$work" -s stop 2>/dev/null || true; sleep 0.3; }
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

fresh_database() {
    psql -q "$pg_admin" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
}

# config <redis: yes|no>: one file for every instance.
config() {
    cat >"$work/taskgate.toml" <<TOML
database_url = "${pg_admin%/*}/$db"
default_plan = "bench"
log_level = "warn"
trusted_proxies = ["127.0.0.1/32"]
$([ "$1" = yes ] && echo "redis_url = \"$redis\"")

# Limits that every request checks but none reaches.
[plans.bench]
per_minute = 100000000
per_day = 1000000000
TOML
}

# start <n>: n instances, the first one alone (it makes the schema and key).
start() {
    ports=()
    for i in $(seq 1 "$1"); do
        local port
        port="$(free_port)"
        ports+=("$port")
        (cd "$work" && TASKGATE_LISTEN="127.0.0.1:$port" exec "$bin" --config "$work/taskgate.toml" serve \
            >"$work/out$i.txt" 2>"$work/err$i.txt") &
        pids+=($!)
        for _ in $(seq 1 100); do curl -sf "127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
    done
    TG_KEY="$(cat "$work"/out*.txt | awk '/live key:/ {print $3}' | head -n1)"
    export TG_KEY
}

# front: nginx with deploy/nginx.conf's settings over the running instances.
front() {
    front_port="$(free_port)"
    local servers=""
    for p in "${ports[@]}"; do servers+="    server 127.0.0.1:$p max_fails=2 fail_timeout=5s;\n"; done
    # deploy/nginx.conf with its three servers replaced by ours.
    awk -v servers="$servers" '
        /server 127\.0\.0\.1:808[1-3]/ { if (!done) { printf "%s", servers; done = 1 } next }
        { print }' deploy/nginx.conf | sed -e "s/listen 80;/listen 127.0.0.1:$front_port;/" >"$work/site.conf"
    cat >"$work/nginx.conf" <<NGINX
pid $work/nginx.pid;
error_log $work/nginx-error.log;
worker_processes 1;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/body;
    proxy_temp_path $work/proxy;
    include $work/site.conf;
}
NGINX
    "$nginx" -c "$work/nginx.conf" -p "$work"
    for _ in $(seq 1 50); do curl -sf "127.0.0.1:$front_port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
}

calls() {
    wrk -t"$(( $1 < 2 ? 1 : 2 ))" -c"$1" -d"$duration" --latency -s bench/call.lua "$2/api/v1/call" \
        | grep -E "Requests/sec|50%|99%|non-200|Socket errors" || true
}

# cpu_ticks <pid>: the process's user + system time so far, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# calls_cpu <concurrency> <base url> <pid>: calls, and the CPU time the
# process <pid> spent per answered request meanwhile.
calls_cpu() {
    local before after out n
    before="$(cpu_ticks "$3")"
    out="$(wrk -t"$(( $1 < 2 ? 1 : 2 ))" -c"$1" -d"$duration" --latency -s bench/call.lua "$2/api/v1/call")"
    after="$(cpu_ticks "$3")"
    echo "$out" | grep -E "Requests/sec|50%|99%|non-200|Socket errors" || true
    n="$(echo "$out" | awk '/requests in/ {print $1}')"
    echo "server CPU per request: $(( (after - before) * 1000000 / $(getconf CLK_TCK) / n )) us ($n requests)"
}

{
    echo "# Taskgate scale-out benchmark, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(uname -sr); commit $(git rev-parse --short HEAD)"
    echo "# command: bench/instances.sh (wrk -t2 -d$duration; everything on the same cores; PGSSLMODE=$PGSSLMODE)"
    echo "# binary: $bin; Redis: $redis"
    echo
    [ -z "${BENCH_LIMITER_ONLY:-}" ] && echo "## sync POST /call through nginx: 1, 2 and 3 instances, one PostgreSQL database, Redis limits"
    config yes
    for n in $([ -z "${BENCH_LIMITER_ONLY:-}" ] && echo 1 2 3); do
        fresh_database
        start "$n"
        front
        echo "### $n instance(s), concurrency 32"
        calls 32 "http://127.0.0.1:$front_port"
        stored=$(psql -At "${pg_admin%/*}/$db" -c "SELECT COUNT(*) FROM tasks WHERE status = 'succeeded'")
        echo "tasks stored succeeded: $stored"
        stop_all
    done
    echo
    echo "## the Redis limiter's cost: one instance called directly, limits in memory, then in Redis"
    for where in memory redis; do
        fresh_database
        config "$([ "$where" = redis ] && echo yes || echo no)"
        start 1
        for c in 1 32; do
            echo "### limits in $where, concurrency $c"
            calls_cpu "$c" "http://127.0.0.1:${ports[0]}" "${pids[0]}"
        done
        stop_all
    done
} | tee "$out"
psql -q "$pg_admin" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
