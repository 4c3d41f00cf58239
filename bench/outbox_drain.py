#!/usr/bin/env python3
"""How fast the outbox drains a backlog of deliveries to one endpoint.

    bench/outbox_drain.py BINARY [--calls 3000] [--seconds 120]

Starts BINARY as compare.py's `taskgate-sqlite-webhooks` target (SQLite, one
webhook endpoint at nginx's `/hook` answering 200 at once), makes --calls sync
calls one after another on one connection (each call's end is one delivery),
then samples the store every second until every delivery went out (or
--seconds passed): deliveries made, succeeded and pending, the process's CPU
seconds, and its log's "database is locked" warnings. The last line is the
drain's rate (deliveries a second after the calls ended) and its CPU a
delivery.

Needs nginx and sqlite3 (apt-get install -y nginx-light sqlite3).
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (the same nginx and Taskgate set-up)
import instructions  # noqa: E402  (its sequential calls)


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--seconds", type=int, default=120)
    args = ap.parse_args()
    dir = Path(tempfile.mkdtemp(prefix="taskgate-drain-"))
    nginx = compare.Nginx(dir)
    tg = None
    try:
        tg = compare.Taskgate(dir, args.binary, "sqlite", nginx.url, nginx.url, 2048, None,
                              hook=nginx.url + "/hook")
        started = time.time()
        instructions.calls(tg.port, tg.key, args.calls)
        took = time.time() - started
        print(f"{args.calls} calls in {took:.1f}s {tg.deliveries()}", flush=True)
        t0, cpu0 = time.time(), cpu_seconds(tg.proc.pid)
        sent0 = tg.deliveries()[1]
        while True:
            time.sleep(1)
            total, ok, pending = tg.deliveries()
            locked = Path(tg.proc.log).read_text(errors="replace").count("database is locked")
            cpu = cpu_seconds(tg.proc.pid)
            print(f"{time.time() - t0:.0f}s made {total} succeeded {ok} pending {pending} "
                  f"locked warnings {locked} cpu {cpu:.2f}", flush=True)
            if pending == 0 and total >= args.calls or time.time() - t0 > args.seconds:
                break
        drained = ok - sent0
        spent = time.time() - t0
        per = (cpu - cpu0) / drained * 1000 if drained else float("nan")
        print(f"# drained {drained} in {spent:.1f}s: {drained / spent:.0f} a second, "
              f"{per:.2f} ms of CPU a delivery; {pending} still pending")
    finally:
        if tg is not None:
            compare.stop(tg.proc)
        compare.stop(nginx.proc)


if __name__ == "__main__":
    main()
