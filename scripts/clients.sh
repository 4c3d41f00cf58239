#!/usr/bin/env bash
# The client libraries (clients/typescript, clients/python, clients/go) and
# the OpenAI- and Anthropic-compatible endpoints under the official
# `openai` and `anthropic` packages and the agent frameworks built on them:
#
#   1. every library has the server's version;
#   2. the committed OpenAPI snapshot (clients/openapi.json) is the document
#      the server serves now, and each library's generated code is what its
#      generator makes of it (regenerated in place, then `git diff`);
#   3. each library's own tests, and the tests under e2e/ of the SDKs (openai
#      and anthropic, Python and Node) and of the frameworks (LangChain's
#      ChatOpenAI and ChatAnthropic, the OpenAI Agents SDK, the Vercel AI SDK),
#      each against a fresh real server (scripts/with-server.sh).
#
#   scripts/clients.sh
#
# What they need comes from the registries: npm packages into each folder's
# node_modules, PyPI packages into virtualenvs under target/, Go 1.23 from
# Debian's bookworm-backports (installed here when run as root on Debian).
# A missing toolchain skips its part, and says so; with CI=true it is an error.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac

skipped=()
missing() { # $1 = what is missing, $2 = what is skipped
    if [ "${CI:-}" = "true" ]; then
        echo "error: CI=true but $1" >&2
        exit 1
    fi
    echo "NOTE: $1: $2 SKIPPED."
    skipped+=("$2")
}

# --- Toolchains -------------------------------------------------------------
go_ok() { command -v go >/dev/null 2>&1 && [ "$(go env GOVERSION 2>/dev/null | sed -E 's/^go1\.([0-9]+).*/\1/')" -ge 23 ] 2>/dev/null; }
if ! go_ok && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
    && grep -qs bookworm /etc/os-release; then
    echo "Installing Go 1.23 from Debian's bookworm-backports"
    if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
        echo "deb http://deb.debian.org/debian bookworm-backports main" \
            >/etc/apt/sources.list.d/bookworm-backports.list
    fi
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports golang-go >/dev/null
fi
have_go=false
if go_ok; then have_go=true; else missing "Go 1.23+ is not installed (Debian: golang-go from bookworm-backports)" "the Go client"; fi
have_node=false
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 \
    && [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ]; then
    have_node=true
else
    missing "Node.js 20+ with npm is not installed" "the TypeScript client and the openai Node SDK test"
fi
have_python=false
if command -v python3 >/dev/null 2>&1 && python3 -c 'import venv, ensurepip' 2>/dev/null; then
    have_python=true
else
    missing "python3 with venv is not installed (Debian: python3-venv)" "the Python client and the openai Python SDK test"
fi
# with-server.sh and the snapshot need python3 itself.
command -v python3 >/dev/null 2>&1 || { missing "python3 is not installed" "every client test"; exit 0; }

export GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod
export GOCACHE="$target/go/cache" GOPATH="$target/go/path"

venv() { # $1 = directory, then pip arguments; installs when the arguments changed
    local dir="$1"
    shift
    local want="$*"
    if [ ! -x "$dir/bin/python" ] || [ "$(cat "$dir/.installed" 2>/dev/null)" != "$want" ]; then
        rm -rf "$dir"
        python3 -m venv "$dir"
        "$dir/bin/pip" install --quiet --disable-pip-version-check "$@"
        echo "$want" >"$dir/.installed"
    fi
}

# --- The binaries, built once -----------------------------------------------
if [ -z "${TASKGATE_BIN:-}" ] || [ -z "${FAKE_OPENAI_BIN:-}" ]; then
    cargo build --locked --quiet -p taskgate
    cargo build --locked --quiet -p taskgate-providers --example fake_openai
fi
export TASKGATE_BIN="${TASKGATE_BIN:-$target/debug/taskgate}"
export FAKE_OPENAI_BIN="${FAKE_OPENAI_BIN:-$target/debug/examples/fake_openai}"

# --- 1. Versions ------------------------------------------------------------
version="$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version = "\(.*\)"/\1/p' Cargo.toml)"
check_version() { # $1 = file, $2 = the line that must be there
    grep -qF -- "$2" "$1" || { echo "error: $1 does not say version $version (want: $2)" >&2; exit 1; }
}
check_version clients/typescript/package.json "\"version\": \"$version\","
check_version clients/typescript/src/version.ts "VERSION = \"$version\""
check_version clients/python/pyproject.toml "version = \"$version\""
check_version clients/python/src/taskgate/_version.py "__version__ = \"$version\""
check_version clients/go/client.go "const Version = \"$version\""
echo "client libraries: version $version"

# --- 2. Generated code ------------------------------------------------------
snapshot="$(mktemp)"
trap 'rm -f "$snapshot"' EXIT
scripts/openapi-snapshot.sh "$snapshot" >/dev/null
if ! cmp -s "$snapshot" clients/openapi.json; then
    echo "error: clients/openapi.json is not the document the server serves now." >&2
    echo "       Run scripts/openapi-snapshot.sh, regenerate the clients (see clients/*/README.md) and commit." >&2
    diff -u clients/openapi.json "$snapshot" | head -40 >&2 || true
    exit 1
fi
generated=()
if $have_node; then
    (cd clients/typescript && npm ci --silent --no-audit --no-fund && npm run --silent generate)
    generated+=(clients/typescript/src/generated)
fi
if $have_python; then
    python3 clients/python/scripts/generate.py
    generated+=(clients/python/src/taskgate/_models.py)
fi
if $have_go; then
    (cd clients/go && go generate ./...)
    generated+=(clients/go/types_gen.go)
fi
if [ "${#generated[@]}" -gt 0 ]; then
    if ! git diff --exit-code --stat -- "${generated[@]}" || [ -n "$(git status --porcelain -- "${generated[@]}")" ]; then
        echo "error: the generated client code above differs from what its generator makes of clients/openapi.json." >&2
        echo "       Regenerate (see clients/*/README.md) and commit." >&2
        exit 1
    fi
    echo "client libraries: generated code is up to date (${generated[*]})"
fi

# --- 3. Tests against a real server ------------------------------------------
with_server() { scripts/with-server.sh "$@"; }
if $have_node; then
    echo "== TypeScript client"
    (cd clients/typescript && npm run --silent build && "$root/scripts/with-server.sh" npm test --silent)
    (cd clients/typescript && npx --no-install tsc --noEmit)
fi
if $have_python; then
    echo "== Python client"
    venv "$target/clients-python-venv" -e "./clients/python[test]"
    # The library itself is installed editable, but its dependencies may have changed.
    "$target/clients-python-venv/bin/pip" install --quiet --disable-pip-version-check -e "./clients/python[test]"
    with_server "$target/clients-python-venv/bin/python" -m pytest -q clients/python/tests
fi
if $have_go; then
    echo "== Go client"
    (cd clients/go && test -z "$(gofmt -l .)" || { gofmt -l . >&2; echo "error: gofmt" >&2; exit 1; })
    (cd clients/go && go vet ./... && "$root/scripts/with-server.sh" go test -count=1 ./...)
fi
if $have_python; then
    echo "== the openai Python package against /openai/v1"
    venv "$target/openai-sdk-venv" "openai==3.54.0"
    with_server "$target/openai-sdk-venv/bin/python" -m unittest e2e/openai_sdk_test.py
    echo "== the anthropic Python package against /anthropic/v1"
    venv "$target/anthropic-sdk-venv" "anthropic==2.10.0"
    with_server "$target/anthropic-sdk-venv/bin/python" -m unittest e2e/anthropic_sdk_test.py
    echo "== LangChain's ChatOpenAI and ChatAnthropic and the OpenAI Agents SDK against the doors"
    venv "$target/frameworks-venv" "langchain-openai==1.7.4" "langchain-anthropic==1.7.10" "openai-agents==0.24.0"
    with_server "$target/frameworks-venv/bin/python" -m unittest e2e/frameworks_test.py
fi
if $have_node; then
    echo "== the openai and @anthropic-ai/sdk Node packages and the Vercel AI SDK against the doors"
    (cd e2e && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --silent --no-audit --no-fund)
    # One file at a time: the tests read what the fake upstream received last.
    (cd e2e && "$root/scripts/with-server.sh" node --test --test-concurrency=1 \
        openai-sdk.test.mjs anthropic-sdk.test.mjs ai-sdk.test.mjs)
fi

if [ "${#skipped[@]}" -gt 0 ]; then
    echo "client libraries: SKIPPED: ${skipped[*]}"
fi
