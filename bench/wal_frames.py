#!/usr/bin/env python3
"""What a sync call writes to SQLite: its WAL frames, by b-tree.

    bench/wal_frames.py --taskgate BIN [--calls 200] [--env NAME=VALUE ...]

Starts compare.py's set-up (nginx answering the chat request at once,
Taskgate on SQLite), makes 200 sync `POST /api/v1/call`s and then --calls
more, one after another on one connection, and reads the WAL while Taskgate
still runs: each frame's page, the b-tree it belongs to (by `dbstat` on a
copy of the database and its WAL) and the commits. Prints the frames a
commit, and each b-tree's share. A frame is one page written: two `pwrite`s
(its 24-byte header, then the page) and a checksum over the page.

Taskgate's checkpoint thread copies the WAL back every 100 ms and the next
commit after it starts the WAL over, so what is read is the commits since the
last restart (at least 10, or the run fails): figures are per commit. At c=1
a sync call is one commit; the rare batch of request counts is counted in.
Needs nginx (apt-get install -y nginx-light); Python's sqlite3 with `dbstat`.
"""

import argparse
import os
import shutil
import sqlite3
import struct
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402
import latency_c1  # noqa: E402


def frames(wal):
    """(page number, commit size) of every valid frame of the WAL's current generation."""
    data = Path(wal).read_bytes()
    if len(data) < 32:
        return []
    page_size = struct.unpack(">I", data[8:12])[0]
    salt = data[16:24]
    out = []
    at = 32
    while at + 24 + page_size <= len(data):
        page, commit = struct.unpack(">II", data[at:at + 8])
        if data[at + 8:at + 16] != salt:
            break
        out.append((page, commit))
        at += 24 + page_size
    return out


def names(db, wal, scratch):
    """Page number → the b-tree it belongs to, read from a copy."""
    copy = Path(scratch) / "copy.db"
    shutil.copy(db, copy)
    shutil.copy(wal, str(copy) + "-wal")
    conn = sqlite3.connect(copy)
    owner = {pageno: name for name, pageno in conn.execute("SELECT name, pageno FROM dbstat")}
    conn.close()
    return owner


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--taskgate", required=True)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--env", action="append", default=[])
    args = ap.parse_args()
    for kv in args.env:
        k, _, v = kv.partition("=")
        os.environ[k] = v
    with tempfile.TemporaryDirectory() as dir:
        nginx = compare.Nginx(dir)
        target = compare.Taskgate(dir, os.path.abspath(args.taskgate), "sqlite", nginx.url, nginx.url,
                                  2048, None)
        try:
            body = compare.json.dumps({"api": "chat", "input": {"messages": [{"role": "user", "content": "hi"}]}})
            conn = latency_c1.Connection(target.port, "/api/v1/call", body, target.key)
            for _ in range(200):
                conn.call()
            db = f"{target.dir}/taskgate.db"
            for _ in range(args.calls):
                conn.call()
            new = frames(db + "-wal")
            owner = names(db, db + "-wal", dir)
        finally:
            target.close()
            compare.stop(nginx.proc)
    commits = sum(1 for _, c in new if c)
    if commits < 10:
        sys.exit(f"only {commits} commits in the WAL: run again")
    by = Counter(owner.get(p, "?") for p, _ in new)
    print(f"{commits} commits in the WAL: {len(new)} frames, {len(new) / commits:.2f} a commit")
    for name, n in by.most_common():
        print(f"  {name:32} {n:6} frames  {n / commits:.2f} a commit")


if __name__ == "__main__":
    main()
