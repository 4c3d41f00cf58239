#!/usr/bin/env bash
# The whole test suite: formatting, lints, every test on SQLite and PostgreSQL,
# a schemathesis run against the served OpenAPI document, and the dashboard
# driven in a real browser.
#
# PostgreSQL suites use TASKGATE_TEST_POSTGRES_URL (default
# postgres://postgres@127.0.0.1:5432/test). Without a server there they are
# skipped, and this script says so; with CI=true nothing may be skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

pg_url="${TASKGATE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
export TASKGATE_TEST_POSTGRES_URL="$pg_url"

pg_up() {
    command -v pg_isready >/dev/null 2>&1 && pg_isready -q -d "$pg_url" && return 0
    # Without pg_isready, try a TCP connection to the URL's host and port.
    local hostport="${pg_url#*@}"; hostport="${hostport%%/*}"
    local host="${hostport%%:*}" port="${hostport##*:}"
    [ "$port" = "$hostport" ] && port=5432
    (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

if ! pg_up; then
    # A local cluster that is installed but stopped can be started.
    if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
        echo "PostgreSQL is not answering; starting the local cluster"
        pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
        for _ in $(seq 1 20); do pg_up && break; sleep 0.5; done
    fi
fi
if pg_up; then
    echo "PostgreSQL at ${pg_url%%\?*}: PostgreSQL suites will run"
elif [ "${CI:-}" = "true" ]; then
    echo "error: CI=true but PostgreSQL is not reachable at $pg_url" >&2
    exit 1
else
    echo "NOTE: PostgreSQL is not reachable at $pg_url:"
    echo "      the PostgreSQL suites (store conformance and black-box on PostgreSQL) are SKIPPED."
    echo "      Set TASKGATE_TEST_POSTGRES_URL to run them."
fi

# The Redis suites (rate limits across instances; Redis lost and back).
redis_url="${TASKGATE_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
redis_hostport="${redis_url#redis://}"
redis_hostport="${redis_hostport%%/*}"
if (exec 3<>"/dev/tcp/${redis_hostport%%:*}/${redis_hostport##*:}") 2>/dev/null; then
    echo "Redis at $redis_url: the Redis suites will run"
elif [ "${CI:-}" = "true" ]; then
    echo "error: CI=true but Redis is not reachable at $redis_url" >&2
    exit 1
else
    echo "NOTE: Redis is not reachable at $redis_url: the Redis suites are SKIPPED."
    echo "      Set TASKGATE_TEST_REDIS_URL, or start redis-server, to run them."
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
# The served OpenAPI document against the server, every schemathesis check.
./scripts/schemathesis.sh "${TASKGATE_SCHEMATHESIS_SECONDS:-60}"
# The dashboard in Debian's Chromium, on SQLite and PostgreSQL.
./scripts/e2e.sh
# The client libraries (TypeScript, Python, Go): versions, generated code,
# their tests, and the official openai packages against /openai/v1.
./scripts/clients.sh
# docs/deploy.md for real: three instances behind nginx (deploy/nginx.conf).
./scripts/deploy-smoke.sh
