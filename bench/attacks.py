#!/usr/bin/env python3
"""Issue 25's attacks against a release binary, with the server's memory.

Starts `taskgate serve` (SQLite in a fresh directory, behind a pretend proxy:
`trusted_proxies = ["127.0.0.1/32"]`), then, one after the other:

- 40 sign-ins at once for one email from one address;
- the same with a `Forwarded` header that differs on each request (what a
  client sends through nginx), for sign-ins and for bad API keys;
- a 10 MiB JSON array body on POST /api/v1/call, once and eight at once,
  declared (Content-Length) and chunked;
- bodies just under the call limit made of small values, eight at once.

For each: the answers by status and the server's RSS before and its peak
(VmHWM) after. Standard library only. Usage:
    bench/attacks.py target/release/taskgate
"""

import concurrent.futures
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak(pid):
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux 4.0+).
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def request(port, method, path, body=b"", headers=None, chunked=False):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        h = dict(headers or {})
        if chunked:
            conn.putrequest(method, path)
            for k, v in h.items():
                conn.putheader(k, v)
            conn.putheader("transfer-encoding", "chunked")
            conn.endheaders()
            try:
                for i in range(0, len(body), 65536):
                    piece = body[i : i + 65536]
                    conn.send(b"%x\r\n%s\r\n" % (len(piece), piece))
                conn.send(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
        else:
            try:
                conn.request(method, path, body=body, headers=h)
            except (BrokenPipeError, ConnectionResetError):
                pass
        r = conn.getresponse()
        r.read()
        return r.status
    except (ConnectionResetError, BrokenPipeError, http.client.HTTPException) as e:
        return f"reset ({type(e).__name__})"
    finally:
        conn.close()


def at_once(n, f):
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        return list(pool.map(lambda i: f(i), range(n)))


def tally(statuses):
    out = {}
    for s in statuses:
        out[str(s)] = out.get(str(s), 0) + 1
    return " ".join(f"{k}x{v}" for k, v in sorted(out.items()))


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/taskgate"
    work = tempfile.mkdtemp(prefix="taskgate-attacks-")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKGATE_")}
    config = os.path.join(work, "taskgate.toml")
    with open(config, "w") as f:
        f.write(
            f'listen = "127.0.0.1:{port}"\n'
            f'database_url = "sqlite://{work}/data/taskgate.db"\n'
            'trusted_proxies = ["127.0.0.1/32"]\n'
            'log_level = "warn"\n'
        )
    server = subprocess.Popen(
        [binary, "--config", config, "serve"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    printed = ""
    deadline = time.time() + 60
    while "password:" not in printed and time.time() < deadline:
        line = server.stdout.readline()
        if not line:
            break
        printed += line
    live = re.search(r"live key: (\S+)", printed).group(1)
    email = re.search(r"email: (\S+)", printed).group(1)
    for _ in range(100):
        try:
            if request(port, "GET", "/healthz") == 200:
                break
        except OSError:
            time.sleep(0.1)
    pid = server.pid
    results = []

    def measure(name, run):
        time.sleep(0.5)
        before = rss_kib(pid, "VmRSS")
        reset_peak(pid)
        statuses = run()
        peak = rss_kib(pid, "VmHWM")
        after = rss_kib(pid, "VmRSS")
        line = (
            f"{name:<58} {tally(statuses):<34} RSS before {before / 1024:6.1f} MB, "
            f"peak {peak / 1024:6.1f} MB (+{(peak - before) / 1024:.1f}), after {after / 1024:6.1f} MB"
        )
        print(line, flush=True)
        results.append(line)

    def sign_in(i, forwarded=None):
        form = urllib.parse.urlencode({"email": email, "password": f"wrong-{i}"}).encode()
        h = {
            "content-type": "application/x-www-form-urlencoded",
            "origin": f"http://127.0.0.1:{port}",
            "host": f"127.0.0.1:{port}",
        }
        if forwarded:
            h["forwarded"] = forwarded
        return request(port, "POST", "/dashboard/sign-in", form, h)

    measure("40 sign-ins at once, one email, one address", lambda: at_once(40, sign_in))
    time.sleep(61)  # the minute passes
    measure(
        "20 sign-ins, Forwarded: for=<a new address each>",
        lambda: [sign_in(i, f"for=198.51.100.{i}") for i in range(20)],
    )
    auth = {"authorization": f"Bearer {live}", "content-type": "application/json"}
    ten = b'{"api":"sentiment","input":{"text":"x","a":[' + b"0," * (5 * 1024 * 1024) + b"0]}}"
    measure("10 MiB array body, declared", lambda: [request(port, "POST", "/api/v1/call", ten, auth)])
    measure(
        "10 MiB array body, declared, 8 at once",
        lambda: at_once(8, lambda i: request(port, "POST", "/api/v1/call", ten, auth)),
    )
    measure(
        "10 MiB array body, chunked, 8 at once",
        lambda: at_once(8, lambda i: request(port, "POST", "/api/v1/call", ten, auth, chunked=True)),
    )
    for path in ["/openai/v1/chat/completions", "/openai/v1/embeddings"]:
        measure(
            f"10 MiB array body on {path}, 8 at once",
            lambda: at_once(8, lambda i: request(port, "POST", path, ten, auth)),
        )
    under = b'{"api":"sentiment","input":{"text":"x","a":[' + b"0," * (1_950_000) + b"0]}}"
    measure(
        f"{len(under) / 1048576:.1f} MiB of small values (under the limit), 8 at once",
        lambda: at_once(8, lambda i: request(port, "POST", "/api/v1/call", under, auth)),
    )
    nested = b'{"api":"sentiment","input":{"text":"x","a":[' + b"[]," * (1_300_000) + b"[]]}}"
    measure(
        f"{len(nested) / 1048576:.1f} MiB of empty arrays (under the limit), 8 at once",
        lambda: at_once(8, lambda i: request(port, "POST", "/api/v1/call", nested, auth)),
    )
    # Last: failed authentications block this address for the minute.
    measure(
        "40 bad keys, Forwarded: for=<a new address each>",
        lambda: [
            request(
                port,
                "GET",
                "/api/v1/tasks",
                headers={"authorization": "Bearer tg_bad", "forwarded": f"for=203.0.113.{i}"},
            )
            for i in range(40)
        ],
    )
    server.terminate()
    server.wait(timeout=60)
    print(json.dumps({"binary": binary, "results": len(results)}))


if __name__ == "__main__":
    main()
