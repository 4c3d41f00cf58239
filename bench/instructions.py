#!/usr/bin/env python3
"""Instructions a call costs, counted by valgrind (callgrind): the one figure of
CPU a request that does not move with whatever else the machine is doing.

    bench/instructions.py BINARY [BINARY ...] [--calls 400] [--rounds 1] [--out PATH]
                          [--webhook [with|both]]

For each binary (a release build of Taskgate; `bench/compare.sh`'s target
`taskgate-sqlite` set-up: SQLite, a chat API on the OpenAI adapter pointed at
nginx answering at once), runs it under callgrind with instrumentation off, sends
--warmup calls, turns instrumentation on, sends --calls sync `POST /api/v1/call`
one after another on one kept-alive connection (c=1), dumps, and reports the
instructions (Ir) of the whole process, all threads, divided by the calls:
a row per run, `round, binary, calls, Ir a call, Ir a call without the WAL
checkpoints` (see `checkpoint_ir`: the second is the one to compare),
then `endpoint` (with a webhook endpoint or without) and `deliveries`
(succeeded / made, of the counted calls).
Rounds alternate the binaries (A B A B ...).

--webhook: with a webhook endpoint registered (`compare.sh`'s target
`taskgate-sqlite-webhooks`: nginx's `/hook` answers 200 at once), so each
call's end is one delivery, and the count includes the outbox's work for the
counted calls (the claim, the signed POST, the attempt written): the warm-up's
deliveries are all made before instrumentation is turned on, and the counted
calls' before the dump. Every delivery must have succeeded, or the run fails.
`--webhook both`: each binary without, then with, in every round.

--setups plain,webhook,traced,all: the set-ups to count, in this order, in every
round (wins over --webhook): `traced` is compare.py's taskgate-sqlite-traced
(traces at ratio 1.0 exported to nginx's `/v1/traces`, JSON logs at `info`;
the count waits out the exporter's last batch, and fails if a span was
dropped), `all` is webhook and traced together (issue 30's "everything on"). Timers that tick on their own
(the dispatcher's poll each second, the checkpoint thread) run under
valgrind's slowdown too, so a figure holds a few per cent of them; it is the
same share for every binary given the same --calls.

Needs valgrind and nginx (apt-get install -y valgrind nginx-light).
"""

import argparse
import glob
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (the same nginx and Taskgate set-up)


def wrapper(dir, binary, out):
    """A script that runs `binary` under callgrind, instrumentation off until asked."""
    path = Path(dir) / f"callgrind-{len(os.listdir(dir))}.sh"
    path.write_text(
        "#!/bin/sh\n"
        f"exec valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file={out} "
        f"'{binary}' \"$@\"\n"
    )
    path.chmod(0o755)
    return str(path)


def calls(port, key, n):
    body = json.dumps({"api": "chat", "input": {"messages": compare.MESSAGES}})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    for _ in range(n):
        conn.request("POST", "/api/v1/call", body, headers)
        r = conn.getresponse()
        text = r.read()
        if r.status != 200 or b'"status":"succeeded"' not in text:
            sys.exit(f"a call answered {r.status}: {text[:300]!r}")
    conn.close()


def total_ir(path):
    """The instructions of a dump asked for (`callgrind_control -d`): its
    `totals:` line. The dump written at exit is not one (0): what ran after
    the asked-for dump, and its `summary:` is not to be trusted once
    instrumentation was switched on and off."""
    text = Path(path).read_text(errors="replace")
    if "Trigger: dump" not in text:
        return 0
    m = re.search(r"^totals:\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def checkpoint_ir(path):
    """The instructions of SQLite's WAL checkpoints in a dump (inclusive cost
    of `walCheckpoint`). The checkpoint thread runs every 100 ms of wall
    time, whatever the calls, and each checkpoint merges the whole WAL
    index: under valgrind's slowdown its share moves with the machine's
    load, so the figure without it is the one to compare."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.rstrip().endswith(("walCheckpoint [", "]")) and ":walCheckpoint " in line:
            return int(line.split()[0].replace(",", ""))
    return 0


def drained(tg, expected):
    """Waits for the outbox to have made `expected` deliveries, none pending
    (valgrind's pace: up to 10 minutes); returns (succeeded, made)."""
    total, ok, pending, _, _ = tg.drain(600)
    if pending or total != expected:
        sys.exit(f"the outbox made {total} deliveries ({pending} pending) for {expected} calls; see {tg.proc.log}")
    return ok, total


def measure(dir, binary, warmup, n, setup="plain"):
    run = Path(tempfile.mkdtemp(dir=dir))
    out = run / "callgrind.out"
    nginx = compare.Nginx(run)
    tg = None
    webhook = setup in ("webhook", "all")
    traced = setup in ("traced", "all")
    try:
        tg = compare.Taskgate(run, wrapper(run, binary, out), "sqlite", nginx.url, nginx.url, 2048, None,
                              hook=nginx.url + "/hook" if webhook else None,
                              collector=nginx.url if traced else None)
        port = tg.port
        calls(port, tg.key, warmup)
        if webhook:
            ok0, total0 = drained(tg, warmup)
        pid = tg.proc.pid
        subprocess.run(["callgrind_control", "-i", "on", str(pid)], check=True, capture_output=True)
        calls(port, tg.key, n)
        deliveries = "-"
        if webhook:
            ok, total = drained(tg, warmup + n)
            deliveries = f"{ok - ok0}/{total - total0}"
            if ok != total:
                sys.exit(f"{total - ok} of {total} deliveries did not succeed; see {tg.proc.log}")
        if traced:
            # The exporter's last batch waits up to its interval (5 s).
            time.sleep(8)
            if tg.spans_dropped():
                sys.exit(f"{tg.spans_dropped()} trace spans were dropped; see {tg.proc.log}")
        subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
        subprocess.run(["callgrind_control", "-i", "off", str(pid)], check=True, capture_output=True)
        time.sleep(0.5)
        dumps = sorted(glob.glob(f"{out}*"), key=os.path.getmtime)
        dumps = [d for d in dumps if total_ir(d) > 0]
        if not dumps:
            sys.exit(f"no callgrind dump with instructions in {run}")
        total = sum(total_ir(d) for d in dumps)
        checkpoints = sum(checkpoint_ir(d) for d in dumps)
        return total / n, (total - checkpoints) / n, dumps, deliveries
    finally:
        if tg is not None:
            compare.stop(tg.proc)
        compare.stop(nginx.proc)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out", help="a file to append the rows to (TSV)")
    ap.add_argument("--webhook", nargs="?", const="with", default="without", choices=["without", "with", "both"],
                    help="with a webhook endpoint registered (see above); `both`: without, then with")
    ap.add_argument("--setups", help="comma-separated: plain, webhook, traced, all (see above)")
    ap.add_argument("--keep", help="keep the runs (callgrind dumps, logs) under this directory, for callgrind_annotate")
    args = ap.parse_args()
    for tool in ("valgrind", "callgrind_control"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is needed: apt-get install -y valgrind")
    dir = args.keep or tempfile.mkdtemp(prefix="taskgate-instructions-")
    os.makedirs(dir, exist_ok=True)
    rows = []
    modes = {"without": ["plain"], "with": ["webhook"], "both": ["plain", "webhook"]}[args.webhook]
    if args.setups:
        modes = args.setups.split(",")
        if not set(modes) <= {"plain", "webhook", "traced", "all"}:
            sys.exit(f"unknown set-up in {args.setups}")
    names = {"plain": "no endpoint", "webhook": "endpoint", "traced": "traced", "all": "endpoint traced"}
    for r in range(args.rounds):
        for b in args.binaries:
            for setup in modes:
                ir, hot, dumps, deliveries = measure(dir, b, args.warmup, args.calls, setup)
                row = (f"{r + 1}\t{b}\t{args.calls}\t{ir:.0f}\t{hot:.0f}\t"
                       f"{names[setup]}\t{deliveries}")
                if args.keep:
                    row += "\t" + " ".join(dumps)
                print(row, flush=True)
                rows.append(row)
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n".join(rows) + "\n")
    if not args.keep:
        shutil.rmtree(dir, ignore_errors=True)


if __name__ == "__main__":
    main()
