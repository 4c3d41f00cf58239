#!/usr/bin/env python3
"""A soak: sync chat calls at c=32 for --minutes, one request in ten a page of
`GET /api/v1/tasks`, against a release build on SQLite (compare.py's
taskgate-sqlite set-up: nginx as the upstream); the server's memory sampled
from /proc every --every seconds (issue 30: RSS must stay under 64 MB).

    bench/soak.py BINARY [--minutes 10] [--conns 32] [--every 15] [--out PATH]

Prints, and writes to --out (TSV), a row per sample: seconds, tasks stored,
VmRSS, RssAnon, RssFile, RssShmem (MB), the database and WAL sizes (MB). At
the end: the peak of each, wrk's summary, and a check that the store holds
one task per successful call (wrk's runs end with some requests cut off).
Needs wrk, nginx and sqlite3 (apt-get install -y wrk nginx-light sqlite3).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (the same nginx and Taskgate set-up)


def status(pid):
    """VmRSS, RssAnon, RssFile, RssShmem of `pid`, in MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"):
            fields[k] = int(v.split()[0]) / 1024
    return fields


def size_mb(path):
    try:
        return os.path.getsize(path) / 1e6
    except OSError:
        return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument("--every", type=float, default=15)
    ap.add_argument("--out")
    args = ap.parse_args()
    dir = Path(tempfile.mkdtemp(prefix="taskgate-soak-"))
    nginx = compare.Nginx(dir)
    tg = None
    rows = []
    try:
        tg = compare.Taskgate(dir, os.path.abspath(args.binary), "sqlite", nginx.url, nginx.url, 2048, None)
        db = tg.dir / "taskgate.db"
        pid = tg.proc.pid
        body = json.dumps({"api": "chat", "input": {"messages": compare.MESSAGES}})
        env = dict(os.environ, TG_KEY=tg.key, TG_BODY=body)
        seconds = int(args.minutes * 60)
        wrk = subprocess.Popen(
            ["wrk", "-t2", f"-c{args.conns}", f"-d{seconds}s", "--timeout", "30s", "--latency",
             "-s", str(Path(__file__).resolve().parent / "soak.lua"), f"http://127.0.0.1:{tg.port}"],
            env=env, stdout=subprocess.PIPE, text=True)
        out = []
        reader = threading.Thread(target=lambda: out.append(wrk.stdout.read()))
        reader.start()
        start = time.time()
        header = "seconds\ttasks\tVmRSS\tRssAnon\tRssFile\tRssShmem\tdb_MB\twal_MB"
        print(header, flush=True)
        while wrk.poll() is None:
            time.sleep(args.every)
            m = status(pid)
            # The count reads the database file: a second reader beside the server.
            tasks = subprocess.run(["sqlite3", str(db), "SELECT MAX(rowid) FROM tasks"],
                                   capture_output=True, text=True).stdout.strip() or "0"
            row = (f"{time.time() - start:.0f}\t{tasks}\t{m['VmRSS']:.1f}\t{m['RssAnon']:.1f}\t"
                   f"{m['RssFile']:.1f}\t{m['RssShmem']:.1f}\t{size_mb(db):.0f}\t"
                   f"{size_mb(str(db) + '-wal'):.1f}")
            print(row, flush=True)
            rows.append(row)
        reader.join()
        summary = out[0] if out else ""
        m = status(pid)
        print(summary)
        print(f"peak RSS (VmHWM) over the soak: {m['VmHWM']:.1f} MB")
        peaks = [max(float(r.split("\t")[i]) for r in rows) for i in (2, 3, 4, 5)] if rows else []
        if peaks:
            print(f"largest samples: VmRSS {peaks[0]:.1f}, RssAnon {peaks[1]:.1f}, RssFile {peaks[2]:.1f}, "
                  f"RssShmem {peaks[3]:.1f} MB")
        tasks, succeeded = tg.stored()
        print(f"the store holds {tasks} tasks, {succeeded} succeeded")
        if args.out:
            with open(args.out, "w") as f:
                f.write(header + "\n" + "\n".join(rows) + "\n")
                for line in summary.strip().splitlines():
                    f.write(f"# {line}\n")
                f.write(f"# peak RSS (VmHWM) {m['VmHWM']:.1f} MB; tasks {tasks}, succeeded {succeeded}\n")
    finally:
        if tg is not None:
            compare.stop(tg.proc)
        compare.stop(nginx.proc)


if __name__ == "__main__":
    main()
