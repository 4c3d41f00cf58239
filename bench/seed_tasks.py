#!/usr/bin/env python3
"""Seeds a Taskgate store with many finished tasks, fast, for bench/pages.sh.

    bench/seed_tasks.py sqlite:///path/taskgate.db 1000000
    bench/seed_tasks.py postgres://postgres@127.0.0.1:5432/taskgate_pages 1000000

The store must hold a few finished tasks made through the API first: they are the
templates. Each new task is a copy of one of them (round robin: its account, key,
API, status, input, output, usage), with its own id and times, spread evenly over
the 30 days before the oldest template, ids in creation order as Taskgate makes
them ("task_" and a ULID of the creation millisecond). Rows are written in bulk:
one transaction of prepared inserts on SQLite, COPY on PostgreSQL.
"""

import os
import secrets
import sqlite3
import subprocess
import sys
import time

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
DAY_MS = 86_400_000


def text(n):
    """A 128-bit ULID as its 26 characters."""
    return "".join(CROCKFORD[(n >> (5 * i)) & 31] for i in range(25, -1, -1))


def plan(templates, count, days=30):
    """(new id, created_at, template index) for each new task, oldest first."""
    oldest = min(t["created_at"] for t in templates)
    start = oldest - days * DAY_MS
    step = days * DAY_MS / count
    last_ms, n, ids = None, 0, []
    for i in range(count):
        ms = int(start + i * step)
        # Within one millisecond, ids still sort in creation order: the next
        # id is the last one plus one, as Taskgate's generator makes them.
        n = n + 1 if ms == last_ms else (ms << 80) | secrets.randbits(80)
        last_ms = ms
        ids.append(("task_" + text(n), ms, i % len(templates)))
    return ids


def seed_sqlite(path, count):
    db = sqlite3.connect(path, timeout=60)
    db.row_factory = sqlite3.Row
    templates = [dict(r) for r in db.execute(
        "SELECT * FROM tasks WHERE status IN ('succeeded', 'failed', 'cancelled') ORDER BY id LIMIT 100")]
    if not templates:
        sys.exit("no finished task to copy: make a few through the API first")
    cols = list(templates[0].keys())
    marks = ", ".join("?" for _ in cols)
    rows = []
    for id, ms, t in plan(templates, count):
        row = dict(templates[t])
        shift = ms - row["created_at"]
        row["id"] = id
        for k in ("created_at", "started_at", "completed_at"):
            if row[k] is not None:
                row[k] += shift
        row["idempotency_key"] = None
        rows.append(tuple(row[c] for c in cols))
    with db:
        db.executemany(f"INSERT INTO tasks ({', '.join(cols)}) VALUES ({marks})", rows)
    db.execute("ANALYZE")
    db.close()


def seed_postgres(url, count):
    env = dict(os.environ, PGSSLMODE=os.environ.get("PGSSLMODE", "disable"))
    out = subprocess.run(
        ["psql", "-At", url, "-c",
         "SELECT id, created_at FROM tasks WHERE status IN ('succeeded', 'failed', 'cancelled') ORDER BY id LIMIT 100"],
        capture_output=True, text=True, check=True, env=env).stdout
    templates = [dict(id=l.split("|")[0], created_at=int(l.split("|")[1])) for l in out.splitlines() if l]
    if not templates:
        sys.exit("no finished task to copy: make a few through the API first")
    copy = "".join(f"{id}\t{ms}\t{templates[t]['id']}\n" for id, ms, t in plan(templates, count))
    script = """
CREATE TEMP TABLE seed (id text, created_at bigint, template text);
\\copy seed FROM STDIN
INSERT INTO tasks (id, account_id, mode, api, status, input, output, error, units, input_tokens,
    output_tokens, cost_micros, metadata, key_id, idempotency_key, timeout_ms, sandbox, events, attempts,
    created_at, started_at, completed_at, runner, lease_until, reserved_micros)
SELECT s.id, t.account_id, t.mode, t.api, t.status, t.input, t.output, t.error, t.units, t.input_tokens,
    t.output_tokens, t.cost_micros, t.metadata, t.key_id, NULL, t.timeout_ms, t.sandbox, t.events, t.attempts,
    s.created_at, t.started_at + (s.created_at - t.created_at), t.completed_at + (s.created_at - t.created_at),
    t.runner, t.lease_until, t.reserved_micros
FROM seed s JOIN tasks t ON t.id = s.template;
ANALYZE tasks;
"""
    # psql reads the script, and \\copy's rows from the same input after it.
    head, tail = script.split("\\copy seed FROM STDIN\n")
    subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", url],
                   input=head + "\\copy seed FROM STDIN\n" + copy + "\\.\n" + tail,
                   text=True, check=True, env=env, stdout=subprocess.DEVNULL)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    url, count = sys.argv[1], int(sys.argv[2])
    started = time.time()
    if url.startswith("sqlite://"):
        seed_sqlite(url[len("sqlite://"):].split("?")[0], count)
    elif url.startswith(("postgres://", "postgresql://")):
        seed_postgres(url, count)
    else:
        sys.exit("the store is sqlite://PATH or postgres://…")
    print(f"seeded {count} tasks in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
