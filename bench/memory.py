#!/usr/bin/env python3
"""Anonymous memory at one connection, binaries interleaved.

    bench/memory.py BINARY [BINARY ...] [--rounds 3] [--calls 6000] [--every 1500]
                    [--malloc-conf CONF] [--heaptrack DIR] [--out PATH]

For each binary (a release build; `bench/compare.sh`'s target `taskgate-sqlite`
set-up: SQLite, a chat API on the OpenAI adapter pointed at nginx answering at
once), starts it on a fresh data directory, then restarts it on that directory
(so the first start's work, the password pool, is not in the figures), sends
--calls sync `POST /api/v1/call` one after another on one kept-alive connection
(c=1), and reads the process's `RssAnon` (anonymous memory: the heap, the
stacks; not the binary's code nor SQLite's mapped files) before the first call
and after every --every calls, half a second after the last answer. Rounds
alternate the binaries (A B A B ...). A row per sample: `round, binary, calls,
RssAnon MB, VmHWM MB`.

`--malloc-conf` sets jemalloc's `MALLOC_CONF` for the run (e.g.
`dirty_decay_ms:0,muzzy_decay_ms:0`, which gives freed pages back at once): a
difference that goes away with it is memory the allocator keeps for reuse, not
memory the program holds.

`--heaptrack DIR` runs the restarted binary under heaptrack (apt-get install -y
heaptrack), one `DIR/heaptrack.<round>.<binary's index>.zst` (or .gz) a run,
and ends it with SIGKILL after the last sample, so that what heaptrack_print
calls "leaked" is what was live at the end of the calls (a clean stop would
free it first; the last few kilobytes of heaptrack's buffer are lost).
heaptrack sees only the C library's malloc: the binary must be built without
jemalloc (which is linked unprefixed, so it is the program's malloc). RssAnon
then counts heaptrack's own memory too: read heaptrack_print's figures, not
the rows.

Needs nginx (apt-get install -y nginx-light).
"""

import argparse
import json
import http.client
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (the same nginx and Taskgate set-up)


def status_mb(pid, field):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def send(conn, key, n):
    body = json.dumps({"api": "chat", "input": {"messages": compare.MESSAGES}})
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    for _ in range(n):
        conn.request("POST", "/api/v1/call", body, headers)
        r = conn.getresponse()
        text = r.read()
        if r.status != 200 or b'"status":"succeeded"' not in text:
            sys.exit(f"a call answered {r.status}: {text[:300]!r}")


def child_named(pid, name, wait=10):
    """The pid of `pid`'s descendant called `name` (the binary under heaptrack)."""
    deadline = time.time() + wait
    while time.time() < deadline:
        for p in compare.tree(pid):
            try:
                if Path(f"/proc/{p}/comm").read_text().strip() == name[:15]:
                    return p
            except OSError:
                pass
        time.sleep(0.1)
    sys.exit(f"no process {name} under {pid}")


def measure(dir, binary, calls, every, malloc_conf, heaptrack=None):
    run = Path(tempfile.mkdtemp(dir=dir))
    nginx = compare.Nginx(run)
    saved = os.environ.get("MALLOC_CONF")
    if malloc_conf:
        os.environ["MALLOC_CONF"] = malloc_conf
    tg = None
    try:
        tg = compare.Taskgate(run, binary, "sqlite", nginx.url, nginx.url, 2048, None)
        key = tg.key
        # The restart: the same data directory and configuration, no first start.
        compare.stop(tg.proc)
        log = f"{tg.dir}/taskgate-restart.log"
        argv = [binary, "serve", "--config", str(tg.dir / "taskgate.toml")]
        if heaptrack:
            argv = ["heaptrack", "-o", heaptrack] + argv
        tg.proc = compare.spawn(argv, log, cwd=tg.dir)
        compare.wait_http(f"http://127.0.0.1:{tg.port}/readyz", tg.proc, "Taskgate (restart)")
        pid = child_named(tg.proc.pid, Path(binary).name) if heaptrack else tg.proc.pid
        conn = http.client.HTTPConnection("127.0.0.1", tg.port, timeout=120)
        samples = []
        done = 0
        time.sleep(0.5)
        samples.append((0, status_mb(pid, "RssAnon"), status_mb(pid, "VmHWM")))
        while done < calls:
            n = min(every, calls - done)
            send(conn, key, n)
            done += n
            time.sleep(0.5)
            samples.append((done, status_mb(pid, "RssAnon"), status_mb(pid, "VmHWM")))
        conn.close()
        if heaptrack:
            # What is live now stays "leaked" in heaptrack's record; heaptrack
            # itself (the script and its interpreter) finishes the file.
            os.kill(pid, signal.SIGKILL)
            tg.proc.wait(300)
        return samples
    finally:
        if saved is None:
            os.environ.pop("MALLOC_CONF", None)
        else:
            os.environ["MALLOC_CONF"] = saved
        if tg is not None:
            compare.stop(tg.proc)
        compare.stop(nginx.proc)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--calls", type=int, default=6000)
    ap.add_argument("--every", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--malloc-conf", default="")
    ap.add_argument("--heaptrack", metavar="DIR", help="run the binaries under heaptrack, its files in DIR")
    ap.add_argument("--out", help="a file to append the rows to (TSV)")
    args = ap.parse_args()
    dir = tempfile.mkdtemp(prefix="taskgate-memory-")
    rows = []
    try:
        for r in range(args.rounds):
            for i, b in enumerate(args.binaries):
                ht = args.heaptrack and str(Path(args.heaptrack).resolve() / f"heaptrack.{r + 1}.{i}")
                for calls, anon, hwm in measure(dir, b, args.calls, args.every, args.malloc_conf, ht):
                    row = f"{r + 1}\t{b}\t{args.malloc_conf or '-'}\t{calls}\t{anon:.1f}\t{hwm:.1f}"
                    print(row, flush=True)
                    rows.append(row)
    finally:
        shutil.rmtree(dir, ignore_errors=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
