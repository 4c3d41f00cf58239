#!/usr/bin/env bash
# Gateways side by side in one run, loopback only: the upstream called directly
# (the ceiling), Taskgate (release) on SQLite and PostgreSQL, LiteLLM proxy with 1
# and 2 workers; plain, streamed and in-flight (50 ms upstream, 1,000 clients).
# See bench/README.md; the harness is bench/compare.py.
#
#   bench/compare.sh                  everything; results in bench/results/<date>-compare.{txt,tsv,svg}
#   bench/compare.sh --targets ceiling,taskgate-sqlite --conns 1,32 --duration 5
#                                     any of compare.py's options (--help lists them)
#   bench/compare.sh --targets ceiling,taskgate-sqlite,taskgate-sqlite-webhooks --conns 1,32
#                                     what a webhook endpoint costs a call (issue 28)
#   bench/compare.sh --targets ceiling,taskgate-sqlite,taskgate-sqlite-traced,taskgate-sqlite-all --conns 1,32
#                                     traces (ratio 1.0) and JSON logs, then everything on (issue 30)
#
# Needs wrk, nginx and sqlite3 (apt-get install -y wrk nginx-light sqlite3), psql and
# a PostgreSQL (TASKGATE_TEST_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/test)
# for taskgate-postgres. LiteLLM is installed on first use into bench/.venv (pip,
# ignored by git); set BENCH_LITELLM_VERSION to choose its version.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
for tool in wrk nginx sqlite3 psql python3; do
    command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || {
        echo "$tool is needed: apt-get install -y wrk nginx-light sqlite3 postgresql-client python3" >&2
        exit 1
    }
done
version="${BENCH_LITELLM_VERSION:-1.106.2}"
if [[ " $* " != *" --targets "* ]] || [[ "$*" == *litellm* ]]; then
    if ! bench/.venv/bin/litellm --version 2>/dev/null | grep -q "$version"; then
        echo "installing LiteLLM $version into bench/.venv" >&2
        python3 -m venv bench/.venv
        bench/.venv/bin/pip install -q "litellm[proxy]==$version"
    fi
fi
out="$(fresh_result "$(date -u +%Y-%m-%d)-compare" txt)"
# Two builds: one of both would unify their features and build everything again.
cargo build --release -p taskgate --bin taskgate >&2
cargo build --release -p taskgate-providers --example fake_openai >&2
target="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
exec python3 bench/compare.py --taskgate "$target/release/taskgate" \
    --fake "$target/release/examples/fake_openai" \
    --out "${out%.txt}" "$@"
