#!/usr/bin/env python3
"""What was live at the end of a `bench/memory.py --heaptrack` run, by holder.

    bench/heaptrack_live.py FILE.zst [FILE.zst ...]

For each heaptrack file, `heaptrack_print --flamegraph-cost-type leaked` gives
the bytes still allocated at the end (the run ends with SIGKILL: live, not
leaked) by backtrace; they are summed into SQLite's page caches (`pcache1`),
split by the connection's caller (a sqlx pool's connection thread, or the
`taskgate_store` function of a rusqlite connection), SQLite's other memory, and
the rest. Needs heaptrack and binutils' c++filt (Rust's v0 names). Figures in kB.
"""

import re
import subprocess
import sys
from collections import Counter


def holder(frames):
    if any("pcache1" in f for f in frames):
        if any("sqlx_sqlite" in f for f in frames):
            return "SQLite page cache, sqlx pool connections"
        for f in reversed(frames):
            m = re.search(r"taskgate_store::[\w:]+", f)
            if m:
                return "SQLite page cache, rusqlite: " + re.sub(r"::h[0-9a-f]{16}$", "", m.group(0))
        return "SQLite page cache, other"
    if any("(sqlite3.c)" in f for f in frames):
        return "SQLite, other (schema, statements, connections)"
    return "the rest (Rust heap, libc)"


def live(path):
    stacks = subprocess.run(
        ["heaptrack_print", "-f", path, "-p", "0", "-a", "0", "-T", "0",
         "--flamegraph-cost-type", "leaked", "-F", "/dev/stdout"],
        capture_output=True, text=True, check=True).stdout
    stacks = subprocess.run(["c++filt"], input=stacks, capture_output=True, text=True, check=True).stdout
    out = Counter()
    for line in stacks.splitlines():
        frames, _, n = line.rpartition(" ")
        if n.isdigit() and frames:
            out[holder(frames.split(";"))] += int(n)
    return out


def main():
    for path in sys.argv[1:]:
        c = live(path)
        print(f"{path}\ttotal\t{sum(c.values()) / 1e3:.0f}")
        for k, v in sorted(c.items(), key=lambda kv: -kv[1]):
            print(f"{path}\t{k}\t{v / 1e3:.0f}")


if __name__ == "__main__":
    main()
