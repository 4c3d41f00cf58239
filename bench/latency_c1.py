#!/usr/bin/env python3
"""Every call's latency at one connection, not only wrk's percentiles: where
the tail of a sync call at c=1 comes from.

    bench/latency_c1.py --taskgate BIN --fake FAKE [--calls 20000] [--store sqlite|postgres]
                        [--out DIR] [--env NAME=VALUE ...]

Starts compare.py's set-up (nginx answering the chat request at once, the
fake upstream, Taskgate on SQLite or PostgreSQL), then times --calls requests
one after another on one kept-alive connection, first to nginx directly, then
as a sync `POST /api/v1/call` through Taskgate, after 200 untimed ones each.
Prints p50 … p99.9 and the max of both, and what Taskgate adds at each
(its percentile less nginx's). With --out, writes each call's start (ns from
the first) and latency (ns), one per line, to DIR/nginx.txt and
DIR/taskgate.txt: whether the slow calls come at a period (a timer: the
checkpoint every 100 ms) or at random (the scheduler of a shared machine) is
read from there. --env sets Taskgate's environment (repeatable).

The client is Python (a raw socket, `time.perf_counter_ns`): its own cost is
in both rows alike, so compare the added figures, not the absolute ones with
wrk's. Needs nginx (apt-get install -y nginx-light).
"""

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (the same nginx, fake and Taskgate set-up)

PERCENTILES = (0.5, 0.9, 0.99, 0.995, 0.999)


class Connection:
    """One kept-alive HTTP/1.1 connection sending the same request."""

    def __init__(self, port, path, body, key=""):
        data = body.encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n")
        if key:
            head += f"Authorization: Bearer {key}\r\n"
        self.request = (head + "\r\n").encode() + data
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def call(self):
        """Sends the request, reads the whole answer; its status line."""
        self.sock.sendall(self.request)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                sys.exit("the connection was closed")
            buf += chunk
        head, rest = buf.split(b"\r\n\r\n", 1)
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            rest += self.sock.recv(65536)
        return head.split(b"\r\n", 1)[0]

    def timed(self, calls, expect):
        """(start ns, latency ns) of each of `calls` calls, after 200 untimed."""
        for _ in range(200):
            self.call()
        rows, t0 = [], time.perf_counter_ns()
        for _ in range(calls):
            a = time.perf_counter_ns()
            status = self.call()
            z = time.perf_counter_ns()
            if expect not in status:
                sys.exit(f"answered {status!r}")
            rows.append((a - t0, z - a))
        return rows


def percentiles(rows):
    ds = sorted(d for _, d in rows)
    at = {p: ds[int(p * (len(ds) - 1))] / 1000 for p in PERCENTILES}
    at["max"] = ds[-1] / 1000
    return at


def target_args(ap, calls):
    """The options of a run at one connection (here and timeline.py): the
    binaries, how many calls, the store."""
    ap.add_argument("--taskgate", required=True)
    ap.add_argument("--fake", required=True)
    ap.add_argument("--calls", type=int, default=calls)
    ap.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--pg", default=os.environ.get("TASKGATE_TEST_POSTGRES_URL",
                                                   "postgres://postgres@127.0.0.1:5432/test"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target_args(ap, 20000)
    ap.add_argument("--out")
    ap.add_argument("--env", action="append", default=[])
    args = ap.parse_args()
    for pair in args.env:
        name, _, value = pair.partition("=")
        os.environ[name] = value

    dir = tempfile.mkdtemp(prefix="taskgate-latency-")
    nginx = fake = target = None
    try:
        nginx = compare.Nginx(dir)
        fake = compare.Fake(dir, os.path.abspath(args.fake), 50)
        target = compare.Taskgate(dir, os.path.abspath(args.taskgate), args.store, nginx.url, fake.url,
                                  2048, args.pg)
        port = int(nginx.url.rsplit(":", 1)[1])
        body = json.dumps({"model": "gpt-4o-mini", "messages": compare.MESSAGES})
        direct = Connection(port, "/v1/chat/completions", body).timed(args.calls, b" 200")
        _, call, _, key = target.request("chat")
        through = Connection(target.port, "/api/v1/call", call, key).timed(args.calls, b" 200")
    finally:
        if target:
            target.close()
        for p in (fake, nginx):
            if p:
                compare.stop(p.proc)
        shutil.rmtree(dir, ignore_errors=True)

    rows = {"nginx": percentiles(direct), f"taskgate-{args.store}": percentiles(through)}
    names = [f"p{p * 100:g}" for p in PERCENTILES] + ["max"]
    print(f"{args.calls} calls at c=1, µs")
    print("| | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for name, at in rows.items():
        print(f"| {name} | " + " | ".join(f"{v:,.0f}" for v in at.values()) + " |")
    a, b = rows.values()
    print("| added | " + " | ".join(f"+{b[k] - a[k]:,.0f}" for k in a) + " |")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for name, data in (("nginx", direct), ("taskgate", through)):
            (out / f"{name}.txt").write_text("".join(f"{s} {d}\n" for s, d in data))


if __name__ == "__main__":
    main()
