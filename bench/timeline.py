#!/usr/bin/env python3
"""Where a sync call's time goes at one connection, read off the wire: which
side holds the call between each packet and the next.

    bench/timeline.py --taskgate BIN --fake FAKE [--store sqlite|postgres] [--pg URL]
                      [--calls 3000] [--keep FILE]

Starts latency_c1.py's set-up (nginx answering the chat request at once,
Taskgate on SQLite or PostgreSQL), captures loopback with tcpdump (every
packet that carries data, with the kernel's timestamps), and makes --calls
sync `POST /api/v1/call` requests one after another on one connection. Then
each call is cut into steps: from the client's request to each next packet
of the call (to or from nginx, to or from PostgreSQL) and to the answer.
A step that ends with a packet Taskgate sent is Taskgate's time (parsing,
its work, its wake-ups); one that ends with a packet nginx or PostgreSQL
sent is theirs (with the wake-ups of the loopback). Prints each step's
median and p90 in µs. Nothing inside any process is touched or slowed, so
the figures are those of a normal run; tcpdump's own CPU shares the cores.

Needs tcpdump and nginx (apt-get install -y tcpdump nginx-light) and root
(or CAP_NET_RAW) for the capture.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402
from latency_c1 import Connection, target_args  # noqa: E402


def capture(path, ports):
    """tcpdump on loopback: the packets with data to or from `ports`."""
    expr = " or ".join(f"port {p}" for p in ports)
    proc = subprocess.Popen(
        ["tcpdump", "-i", "lo", "-n", "-tt", "-q", "-B", "65536", "-l",
         f"tcp and ({expr}) and (tcp[tcpflags] & tcp-push != 0)"],
        stdout=open(path, "w"), stderr=subprocess.PIPE, text=True)
    # tcpdump says "listening on lo" once it captures.
    for line in proc.stderr:
        if "listening" in line:
            return proc
    proc.kill()
    sys.exit(f"tcpdump did not start (exit {proc.wait()})")


def packets(path):
    """(time µs, source port, destination port) of each captured packet."""
    for line in open(path):
        parts = line.split()
        # 1700000000.123456 IP 127.0.0.1.5432 > 127.0.0.1.40000: tcp 120
        if len(parts) < 6 or parts[1] != "IP":
            continue
        src = int(parts[2].rsplit(".", 1)[1])
        dst = int(parts[4].rstrip(":").rsplit(".", 1)[1])
        yield float(parts[0]) * 1e6, src, dst


def steps(path, taskgate, nginx, pg):
    """Each call's steps: [(name, µs)], named by who sent the packet that
    ends the step and to whom."""
    def who(port):
        if port == taskgate:
            return "taskgate"
        if port == nginx:
            return "nginx"
        if port == pg:
            return "postgres"
        return None

    calls, call, asked = [], None, None
    for t, src, dst in packets(path):
        if dst == taskgate:  # the client's request: a new call
            call = [("request", t)]
            continue
        if call is None:
            continue
        a, b = who(src), who(dst)
        if src == taskgate:  # the answer
            call.append(("answer", t))
            calls.append(call)
            call = None
        elif a == "postgres" and dst != asked:  # to a session that asked nothing
            call.append(("postgres notifies", t))
        elif a:  # nginx or PostgreSQL answered Taskgate
            call.append((f"{a} answers", t))
        elif b:  # Taskgate wrote to nginx or PostgreSQL
            call.append((f"to {b}", t))
            asked = src
    out = []
    for call in calls:
        named, seen = [], defaultdict(int)
        for (_, t0), (name, t1) in zip(call, call[1:]):
            seen[name] += 1
            named.append((f"{name} #{seen[name]}", t1 - t0))
        out.append(named)
    return out


def report(calls):
    shapes = defaultdict(list)
    for call in calls:
        shapes[tuple(n for n, _ in call)].append(call)
    shape, same = max(shapes.items(), key=lambda kv: len(kv[1]))
    print(f"{len(calls)} calls; {len(same)} of them in the usual shape, read here:")
    print("| step (ends when …) | p50 µs | p90 µs |")
    print("|---|---|---|")
    totals = []
    for i, name in enumerate(shape):
        ds = sorted(c[i][1] for c in same)
        print(f"| {name} | {ds[len(ds) // 2]:,.0f} | {ds[int(len(ds) * 0.9)]:,.0f} |")
    for c in same:
        totals.append(sum(d for _, d in c))
    totals.sort()
    print(f"| whole call | {totals[len(totals) // 2]:,.0f} | {totals[int(len(totals) * 0.9)]:,.0f} |")
    taskgate = sorted(sum(d for n, d in c if n.startswith(("to ", "answer"))) for c in same)
    print(f"| of which Taskgate's steps | {taskgate[len(taskgate) // 2]:,.0f} | "
          f"{taskgate[int(len(taskgate) * 0.9)]:,.0f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target_args(ap, 3000)
    ap.add_argument("--keep", help="keep the capture's text here")
    args = ap.parse_args()

    dir = tempfile.mkdtemp(prefix="taskgate-timeline-")
    nginx = fake = target = dump = None
    path = args.keep or f"{dir}/capture.txt"
    try:
        nginx = compare.Nginx(dir)
        fake = compare.Fake(dir, os.path.abspath(args.fake), 50)
        target = compare.Taskgate(dir, os.path.abspath(args.taskgate), args.store, nginx.url, fake.url,
                                  2048, args.pg)
        nginx_port = int(nginx.url.rsplit(":", 1)[1])
        pg_port = int(args.pg.rsplit(":", 1)[1].split("/", 1)[0]) if args.store == "postgres" else -1
        _, call, _, key = target.request("chat")
        conn = Connection(target.port, "/api/v1/call", call, key)
        for _ in range(500):  # warm, uncaptured
            conn.call()
        dump = capture(path, [p for p in (target.port, nginx_port, pg_port) if p > 0])
        time.sleep(0.5)
        conn.timed(args.calls, b" 200")
        time.sleep(0.5)
    finally:
        if dump:
            dump.terminate()
            dump.wait()
        if target:
            target.close()
        for p in (fake, nginx):
            if p:
                compare.stop(p.proc)
    try:
        report(steps(path, target.port, nginx_port, pg_port))
    finally:
        shutil.rmtree(dir, ignore_errors=True)


if __name__ == "__main__":
    main()
