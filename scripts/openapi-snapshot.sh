#!/usr/bin/env bash
# Writes the OpenAPI document the client libraries are generated from: the
# document a server with the default catalog (built-in APIs only, no provider
# credentials in its environment) serves to a reader without a key.
#
#   scripts/openapi-snapshot.sh [FILE]      (default clients/openapi.json)
#
# TASKGATE_BIN names a prebuilt binary; otherwise it is built (debug).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/clients/openapi.json}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
bin="${TASKGATE_BIN:-}"
if [ -z "$bin" ]; then
    (cd "$root" && cargo build --locked --quiet -p taskgate)
    bin="$target/debug/taskgate"
fi
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac

work="$(mktemp -d)"
server=""
cleanup() {
    if [ -n "$server" ]; then { kill "$server" && wait "$server"; } 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
printf 'listen = "127.0.0.1:%s"\ndatabase_url = "sqlite://%s/taskgate.db"\nlog_level = "warn"\n' \
    "$port" "$work" >"$work/taskgate.toml"
# Only what a fresh machine has: no provider credentials, no TASKGATE_* settings.
(cd "$work" && exec env -i PATH="$PATH" HOME="$work" "$bin" --config "$work/taskgate.toml" serve \
    >"$work/server.out" 2>"$work/server.log") &
server=$!
python3 - "http://127.0.0.1:$port/api/v1/openapi.json" "$out" <<'PY' || { cat "$work/server.log" >&2; exit 1; }
import json, sys, time, urllib.request
url, out = sys.argv[1], sys.argv[2]
for _ in range(150):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            doc = json.load(r)
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("error: the server did not answer " + url)
with open(out, "w") as f:
    json.dump(doc, f, indent=2, ensure_ascii=False)
    f.write("\n")
print("wrote", out)
PY
