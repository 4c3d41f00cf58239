#!/usr/bin/env python3
"""Side by side: the upstream called directly, Taskgate and LiteLLM proxy, one run.

Run through bench/compare.sh, which builds what this needs first. Everything
listens on loopback; wrk (the same tool, threads and duration for every target)
shares the machine's cores with the target and the upstream.

Targets:
  ceiling             the fake upstream called directly (nginx with a fixed body;
                      for the 50 ms runs the Rust fake, which can wait)
  taskgate-sqlite     Taskgate release, sync POST /api/v1/call, SQLite
  taskgate-postgres   the same on PostgreSQL (a fresh database, dropped after)
  taskgate-sqlite-webhooks (or -postgres-webhooks)
                      the same with one webhook endpoint registered (the default
                      events: each call's end is one delivery), its receiver
                      nginx's `/hook` answering 200 at once; after each run the
                      outbox is waited for, up to --drain-seconds (its CPU counts
                      in the run's: a lower bound if it did not finish), and
                      every delivery must have succeeded by the end
  taskgate-sqlite-traced (or -postgres-traced)
                      taskgate-sqlite with traces on at ratio 1.0, exported
                      (OTLP/HTTP) to nginx's `/v1/traces` answering 200, and
                      JSON logs at `info`; every span must have been exported
                      (`taskgate_trace_spans_dropped_total` 0 at the end)
  taskgate-sqlite-all (or -postgres-all)
                      webhooks and traced together: everything on (issue 30)
  litellm-1, -2       LiteLLM proxy, 1 and 2 workers, no database, no telemetry

Runs, each for every target: plain chat at each concurrency (default 1, 8, 32,
64); a streamed upstream (SSE) at 1 and 32; in flight, a fake that answers after
50 ms, with 1,000 clients. Per run: requests/s, p50/p90/p99, latency added over
the ceiling, CPU time of the target's process tree per request, peak resident
memory. After its runs, each Taskgate store must hold exactly one succeeded task
per request wrk sent (the answers cut off at the end of a run included).

Results: <out>.txt (tables), <out>.tsv (one row per run), <out>.svg (chart).
"""

import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
MESSAGES = [{"role": "user", "content": "Say hello"}]
PIECES = ["Hello", "!", " How", " can", " I", " help", " you", " today", "?"]
USAGE = {"prompt_tokens": 10, "completion_tokens": 9, "total_tokens": 19}


def completion():
    return {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion",
        "created": 1741569952,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": "".join(PIECES), "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }],
        "usage": USAGE,
        "system_fingerprint": "fp_06737a9306",
    }


def sse():
    """The same reply as OpenAI streams it, with the usage chunk and [DONE]."""
    def chunk(choices, usage=None):
        c = {"id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion.chunk",
             "created": 1741569952, "model": "gpt-4o-mini-2024-07-18",
             "system_fingerprint": "fp_06737a9306", "choices": choices}
        if usage is not None:
            c["usage"] = usage
        return "data: " + json.dumps(c, separators=(",", ":")) + "\n\n"
    def choice(delta, finish=None):
        return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    out = [chunk(choice({"role": "assistant", "content": ""}))]
    out += [chunk(choice({"content": p})) for p in PIECES]
    out.append(chunk(choice({}, "stop")))
    out.append(chunk([], USAGE))
    out.append("data: [DONE]\n\n")
    return "".join(out)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, proc, what, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{what} exited at start (code {proc.returncode}); its log is in {proc.log}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status < 500:
                    return
        except Exception:
            pass
        time.sleep(0.2)
    sys.exit(f"{what} did not answer {url} within {seconds} s; its log is in {proc.log}")


def spawn(argv, log, env=None, cwd=None):
    f = open(log, "wb")
    proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                            start_new_session=True)
    proc.log = log
    return proc


def stop(proc):
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def tree(pid):
    """pid and all its descendants."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def cpu_seconds(pid):
    """utime + stime of the process tree, in seconds."""
    total = 0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def reset_peak_rss(pid):
    """Starts each process's peak resident set (VmHWM) over from its current
    resident set, so that the next peak_rss_mb is the peak of the next run,
    not of the process's life (Linux: clear_refs 5). False if not allowed."""
    done = True
    for p in tree(pid):
        try:
            Path(f"/proc/{p}/clear_refs").write_text("5")
        except OSError:
            done = False
    return done


def peak_rss_mb(pid):
    """The sum of each process's peak resident set (VmHWM) over the tree."""
    total = 0
    for p in tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def ms(v):
    n = float(re.match(r"[\d.]+", v).group())
    if v.endswith("us"):
        return n / 1000
    if v.endswith("ms"):
        return n
    if v.endswith("s"):
        return n * 1000
    return n


def wrk(url, conns, duration, body, expect, key=""):
    """One wrk run, every answer checked; returns its figures."""
    threads = 1 if conns == 1 else 2
    env = dict(os.environ, TG_BODY=body, TG_EXPECT=expect, TG_KEY=key)
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{conns}", f"-d{duration}s", "--timeout", "30s", "--latency",
         "-s", str(ROOT / "bench/compare.lua"), url],
        env=env, capture_output=True, text=True, check=True).stdout
    fig = {}
    for line in out.splitlines():
        line = line.strip()
        m = re.match(r"(50|90|99)(?:\.000)?%\s+(\S+)", line)
        if m:
            fig["p" + m.group(1)] = ms(m.group(2))
        elif line.startswith("Requests/sec:"):
            fig["rps"] = float(line.split()[1])
        elif line.startswith("checked:"):
            # checked: <ok> ok, <bad> bad, <sent> sent
            n = [int(x) for x in re.findall(r"\d+", line)]
            fig["ok"], fig["bad"], fig["sent"] = n
        elif line.startswith("Socket errors"):
            fig["socket_errors"] = line
    if "rps" not in fig or "ok" not in fig:
        sys.exit(f"cannot read wrk's output:\n{out}")
    return fig


class Nginx:
    """The ceiling: nginx answering every chat request with a fixed body."""

    def __init__(self, dir):
        self.port = free_port()
        conf = Path(dir) / "nginx.conf"
        q = lambda s: "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
        conf.write_text(f"""
worker_processes auto;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log warn;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    client_body_temp_path {dir}/nginx-body;
    proxy_temp_path {dir}/nginx-proxy;
    fastcgi_temp_path {dir}/nginx-fastcgi;
    uwsgi_temp_path {dir}/nginx-uwsgi;
    scgi_temp_path {dir}/nginx-scgi;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    server {{
        listen 127.0.0.1:{self.port} backlog=4096;
        location = /v1/chat/completions {{
            default_type application/json;
            return 200 {q(json.dumps(completion(), separators=(",", ":")))};
        }}
        location = /stream/v1/chat/completions {{
            default_type text/event-stream;
            return 200 {q(sse())};
        }}
        # The webhook receiver: any method, 200 at once, the body discarded.
        location = /hook {{
            return 200;
        }}
        # The traces' collector (OTLP/HTTP): 200, the batch discarded.
        location = /v1/traces {{
            client_max_body_size 64m;
            return 200;
        }}
    }}
}}
""")
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = spawn([nginx, "-c", str(conf), "-e", f"{dir}/nginx-error.log"], f"{dir}/nginx.log")
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    sys.exit(f"nginx did not start: {Path(dir, 'nginx-error.log').read_text()}")
                time.sleep(0.1)
        self.url = f"http://127.0.0.1:{self.port}"


class Fake:
    """The Rust fake upstream, answering after `delay_ms`."""

    def __init__(self, dir, bin, delay_ms):
        env = dict(os.environ, FAKE_OPENAI_DELAY_MS=str(delay_ms))
        log = f"{dir}/fake.log"
        self.proc = spawn([bin, "0"], log, env=env)
        deadline = time.time() + 10
        while time.time() < deadline:
            text = Path(log).read_text() if Path(log).exists() else ""
            m = re.search(r"listening on (\S+)", text)
            if m:
                self.url = m.group(1)
                return
            time.sleep(0.1)
        sys.exit(f"the fake did not start: {Path(log).read_text()}")


class Taskgate:
    def __init__(self, dir, bin, store, upstream, slow, workers, pg_admin, hook=None, collector=None,
                 name=None):
        """`hook`: a URL to register as a webhook endpoint of the live key's
        account once started (with `[webhooks] allow_private_networks`, as it
        is on loopback), or None for none. `collector`: an OTLP/HTTP base URL
        to export every trace to (ratio 1.0), with JSON logs at `info`; or
        None for neither."""
        self.store = store
        self.name = name or f"taskgate-{store}" + ("-webhooks" if hook else "")
        self.dir = Path(dir) / self.name
        self.dir.mkdir()
        self.port = free_port()
        self.pg_admin = pg_admin
        if store == "sqlite":
            self.db = f"sqlite://{self.dir}/taskgate.db"
        else:
            psql(pg_admin, "DROP DATABASE IF EXISTS taskgate_compare WITH (FORCE)")
            psql(pg_admin, "CREATE DATABASE taskgate_compare")
            self.db = pg_admin.rsplit("/", 1)[0] + "/taskgate_compare"
        provider = lambda name, url, stream: f"""
[providers.{name}]
type = "openai"
base_url = "{url}/v1"
api_key = "sk-bench"
stream = {str(stream).lower()}
max_retries = 0
"""
        api = lambda name, provider: f"""
[catalog.apis.{name}]
kind = "chat"
provider = "{provider}"
model = "gpt-4o-mini"
input_price_per_1k_tokens_usd = "0.00015"
output_price_per_1k_tokens_usd = "0.0006"
"""
        config = self.dir / "taskgate.toml"
        config.write_text(f"""
listen = "127.0.0.1:{self.port}"
database_url = "{self.db}"
default_plan = "enterprise"
log_level = "warn"
workers = {workers}
""" + provider("upstream", upstream, False) + provider("streamed", upstream + "/stream", True)
            + provider("slow", slow, False)
            + api("chat", "upstream") + api("chat-streamed", "streamed") + api("chat-slow", "slow")
            + ("\n[webhooks]\nallow_private_networks = true\n" if hook else "")
            + (f"\n[telemetry]\notlp_endpoint = \"{collector}\"\nsample_ratio = 1.0\n" if collector else ""))
        if collector:
            text = config.read_text().replace('log_level = "warn"', 'log_level = "info"\nlog_format = "json"')
            config.write_text(text)
        self.collector = collector
        env = dict(os.environ, PGSSLMODE=os.environ.get("PGSSLMODE", "disable"))
        self.proc = spawn([bin, "serve", "--config", str(config)], f"{self.dir}/taskgate.log",
                          env=env, cwd=self.dir)
        wait_http(f"http://127.0.0.1:{self.port}/readyz", self.proc, f"Taskgate ({store})")
        deadline = time.time() + 10
        while not (m := re.search(r"live key\s*:?\s*(\S+)", Path(self.proc.log).read_text())):
            if time.time() > deadline:
                sys.exit(f"Taskgate printed no live key; its log is in {self.proc.log}")
            time.sleep(0.1)
        self.key = m.group(1)
        self.url = f"http://127.0.0.1:{self.port}/api/v1/call"
        self.sent = 0
        self.hook = hook
        if hook:
            self.endpoint = self.register(hook)

    def register(self, hook):
        """Registers `hook` as a webhook endpoint (the default events: the
        task's ends); returns its id."""
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/api/v1/webhook_endpoints",
            data=json.dumps({"url": hook, "description": "bench"}).encode(),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
            method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as e:
            sys.exit(f"registering the webhook endpoint {hook} answered {e.code}: {e.read()[:300]!r}")
        return body.get("data", body).get("id")

    def query(self, sql):
        """One row of `sql` on the store, its columns as ints."""
        if self.store == "sqlite":
            argv = ["sqlite3", f"{self.dir}/taskgate.db", sql]
        else:
            argv = ["psql", "-At", "-F", "|", self.db, "-c", sql]
        out = subprocess.run(argv, capture_output=True, text=True, check=True,
                             env=dict(os.environ, PGSSLMODE="disable")).stdout
        return tuple(int(x or 0) for x in out.strip().split("|"))

    def deliveries(self):
        """(deliveries, succeeded, pending) in the store."""
        return self.query("SELECT COUNT(*), SUM(CASE WHEN status = 'succeeded' THEN 1 ELSE 0 END), "
                          "SUM(CASE WHEN status = 'pending' THEN 1 ELSE 0 END) FROM webhook_deliveries")

    def drain(self, seconds=120):
        """Waits until every task's end has its delivery and none is pending
        (the outbox has sent them all, or given up on some); returns
        (deliveries, succeeded, pending, ended tasks, seconds waited)."""
        start = time.time()
        while True:
            (ended,) = self.query("SELECT COUNT(*) FROM tasks WHERE status IN ('succeeded', 'failed', 'cancelled')")
            total, ok, pending = self.deliveries()
            if (total >= ended and pending == 0) or time.time() - start >= seconds:
                return total, ok, pending, ended, time.time() - start
            time.sleep(0.05)

    def request(self, api):
        return self.url, json.dumps({"api": api, "input": {"messages": MESSAGES}}), '"status":"succeeded"', self.key

    def spans_dropped(self):
        """`taskgate_trace_spans_dropped_total` on /metrics (0 while absent)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
            text = r.read().decode()
        m = re.search(r"^taskgate_trace_spans_dropped_total(?:\{[^}]*\})? (\S+)$", text, re.M)
        return int(float(m.group(1))) if m else 0

    def stored(self):
        """(tasks, succeeded tasks) in the store."""
        return self.query("SELECT COUNT(*), SUM(CASE WHEN status = 'succeeded' THEN 1 ELSE 0 END) FROM tasks")

    def settle(self, at_least):
        """The store's counts once the tasks of answered requests are all there
        and none is unfinished."""
        deadline = time.time() + 60
        while True:
            tasks, succeeded = self.stored()
            if (succeeded >= at_least and tasks == succeeded) or time.time() > deadline:
                return tasks, succeeded
            time.sleep(0.5)

    def check(self, sent, answered_ok, cut_off):
        """The store against the answers. wrk's runs end with a request in flight
        on some connections, cut off: its task may or may not exist. So: every
        task succeeded, at least one per successful answer, at most one more per
        cut-off request. Then an exact count: EXACT requests from 32 clients that
        wait for every answer, which must add exactly EXACT succeeded tasks."""
        notes = []
        tasks, succeeded = self.settle(answered_ok)
        good = tasks == succeeded and answered_ok <= tasks <= answered_ok + cut_off
        notes.append(f"{self.name}: wrk runs: {answered_ok} successful answers, {cut_off} requests cut off at the "
                     f"runs' ends; the store holds {tasks} tasks, {succeeded} succeeded: "
                     f"{'consistent' if good else 'INCONSISTENT'} ({answered_ok} <= tasks <= {answered_ok + cut_off})")
        url, body, expect, key = self.request("chat")
        oks = drained_load(url, body, expect, key, EXACT, 32)
        after, after_ok = self.settle(tasks + oks)
        exact = oks == EXACT and after - tasks == EXACT and after_ok - succeeded == EXACT
        notes.append(f"{self.name}: exact pass: {EXACT} requests from 32 clients, {oks} successful answers, "
                     f"{after - tasks} tasks more ({after_ok - succeeded} succeeded): {'equal' if exact else 'NOT EQUAL'}")
        if self.collector:
            dropped = self.spans_dropped()
            notes.append(f"{self.name}: trace spans dropped (queue full or export failed): {dropped}"
                         + ("" if dropped == 0 else ": INCONSISTENT (every span must be exported)"))
        if self.hook:
            total, ok, pending, ended, _ = self.drain()
            complete = total == ended and ok == total
            notes.append(f"{self.name}: webhook deliveries: {total} for {ended} ended tasks (one each expected), "
                         f"{ok} succeeded, {pending} pending, {total - ok - pending} failed or exhausted: "
                         f"{'all delivered' if complete else 'INCONSISTENT (deliveries missing or not sent)'}")
        if not (good and exact):
            notes.append(f"{self.name}: INCONSISTENT, see {self.proc.log}")
        return notes

    def close(self):
        stop(self.proc)
        if self.store == "postgres":
            psql(self.pg_admin, "DROP DATABASE IF EXISTS taskgate_compare WITH (FORCE)")


class LiteLLM:
    """LiteLLM proxy with its master key (authentication on, as on Taskgate;
    without a database a key is checked against it alone)."""

    KEY = "sk-bench-0123456789abcdef0123456789abcdef"

    def __init__(self, dir, venv, workers, upstream, slow):
        self.dir = Path(dir) / f"litellm-{workers}"
        self.dir.mkdir()
        self.port = free_port()
        model = lambda name, base: f"""
  - model_name: {name}
    litellm_params:
      model: openai/gpt-4o-mini
      api_base: {base}/v1
      api_key: sk-bench
"""
        config = self.dir / "config.yaml"
        config.write_text("model_list:" + model("chat", upstream) + model("chat-streamed", upstream + "/stream")
                          + model("chat-slow", slow) + """
litellm_settings:
  telemetry: false
  drop_params: true
  set_verbose: false
  json_logs: false
general_settings:
  master_key: sk-bench-0123456789abcdef0123456789abcdef
  disable_spend_logs: true
""")
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_TELEMETRY="False",
                   LITELLM_LOG="ERROR", NO_DOCS="True", DISABLE_ADMIN_UI="True")
        env.pop("DATABASE_URL", None)
        self.proc = spawn([f"{venv}/bin/litellm", "--config", str(config), "--host", "127.0.0.1",
                           "--port", str(self.port), "--num_workers", str(workers)],
                          f"{self.dir}/litellm.log", env=env, cwd=self.dir)
        wait_http(f"http://127.0.0.1:{self.port}/health/liveliness", self.proc, f"LiteLLM ({workers} workers)", 300)
        self.url = f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def request(self, api):
        body = {"model": api, "messages": MESSAGES}
        if api == "chat-streamed":
            body["stream"] = True
            return self.url, json.dumps(body), "data: [DONE]", self.KEY
        return self.url, json.dumps(body), '"object":"chat.completion"', self.KEY

    def close(self):
        stop(self.proc)


class Direct:
    """The upstream itself, with the body the gateways send it."""

    def __init__(self, nginx, fake):
        self.nginx, self.fake = nginx, fake

    def request(self, api):
        body = {"model": "gpt-4o-mini", "messages": MESSAGES}
        if api == "chat-streamed":
            body.update(stream=True, stream_options={"include_usage": True})
            return self.nginx.url + "/stream/v1/chat/completions", json.dumps(body), "data: [DONE]", ""
        url = (self.fake.url if api == "chat-slow" else self.nginx.url) + "/v1/chat/completions"
        return url, json.dumps(body), '"object":"chat.completion"', ""

    def pid(self, api):
        return (self.fake if api == "chat-slow" else self.nginx).proc.pid


EXACT = 3200


def drained_load(url, body, expect, key, count, clients):
    """`count` POSTs from `clients` threads on kept-alive connections, every
    answer awaited; returns the successful ones."""
    import http.client
    import threading
    from urllib.parse import urlsplit
    u = urlsplit(url)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    oks = [0] * clients

    def client(i):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        for _ in range(count // clients + (i < count % clients)):
            conn.request("POST", u.path, body, headers)
            r = conn.getresponse()
            if r.status == 200 and expect in r.read().decode():
                oks[i] += 1
        conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(oks)


def psql(url, sql):
    subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", sql], check=True,
                   env=dict(os.environ, PGSSLMODE="disable"), stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--taskgate", required=True)
    ap.add_argument("--fake", required=True)
    ap.add_argument("--venv", default=str(ROOT / "bench/.venv"))
    ap.add_argument("--targets", default="ceiling,taskgate-sqlite,taskgate-postgres,litellm-1,litellm-2")
    ap.add_argument("--conns", default="1,8,32,64")
    ap.add_argument("--streamed-conns", default="1,32")
    ap.add_argument("--in-flight", type=int, default=1000)
    ap.add_argument("--delay-ms", type=int, default=50)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--drain-seconds", type=float, default=60,
                    help="how long to wait for a -webhooks target's outbox after each run")
    ap.add_argument("--workers", type=int, default=2048, help="Taskgate's workers (tasks run at once)")
    ap.add_argument("--pg", default=os.environ.get("TASKGATE_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    args.taskgate, args.fake = os.path.abspath(args.taskgate), os.path.abspath(args.fake)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    conns = [int(c) for c in args.conns.split(",") if c]
    streamed = [int(c) for c in args.streamed_conns.split(",") if c]
    runs = [("chat", c) for c in conns] + [("chat-streamed", c) for c in streamed]
    if args.in_flight:
        runs.append(("chat-slow", args.in_flight))
    targets = [t for t in args.targets.split(",") if t]

    dir = tempfile.mkdtemp(prefix="taskgate-compare-")
    nginx = fake = None
    rows, notes = [], []
    try:
        nginx = Nginx(dir)
        fake = Fake(dir, args.fake, args.delay_ms)
        direct = Direct(nginx, fake)
        for name in targets:
            target = None
            try:
                if name == "ceiling":
                    target = direct
                elif name.startswith("taskgate-"):
                    store, _, extra = name.split("-", 1)[1].partition("-")
                    if store not in ("sqlite", "postgres") or extra not in ("", "webhooks", "traced", "all"):
                        sys.exit(f"unknown target {name}")
                    target = Taskgate(dir, args.taskgate, store, nginx.url, fake.url, args.workers, args.pg,
                                      hook=nginx.url + "/hook" if extra in ("webhooks", "all") else None,
                                      collector=nginx.url if extra in ("traced", "all") else None,
                                      name=name)
                elif name.startswith("litellm-"):
                    target = LiteLLM(dir, args.venv, int(name.split("-", 1)[1]), nginx.url, fake.url)
                else:
                    sys.exit(f"unknown target {name}")
                print(f"== {name}", file=sys.stderr, flush=True)
                # Warm-up: connections, caches, pages; counted like any run.
                url, body, expect, key = target.request("chat")
                warm = wrk(url, 8, 2, body, expect, key)
                sent, answered_ok = warm["sent"], warm["ok"]
                cut_off = warm["sent"] - warm["ok"] - warm["bad"]
                for api, c in runs:
                    url, body, expect, key = target.request(api)
                    pid = target.pid(api) if name == "ceiling" else target.proc.pid
                    if not reset_peak_rss(pid):
                        notes.append(f"{name}: peak RSS could not be reset before {api} c={c}: "
                                     "its figure is the peak since the process started")
                    hooked = isinstance(target, Taskgate) and target.hook
                    if hooked:
                        # The warm-up's or the last run's deliveries are not this run's
                        # (if the outbox is behind, they are: see the notes).
                        total0, ok0, pending0, _, _ = target.drain(args.drain_seconds)
                        if pending0:
                            notes.append(f"{name}: {api} c={c}: started with {pending0} deliveries of earlier "
                                         f"runs still pending (the outbox is behind)")
                    cpu0 = cpu_seconds(pid)
                    fig = wrk(url, c, args.duration, body, expect, key)
                    if hooked:
                        # The outbox's work for this run's calls counts in its CPU;
                        # the drain alone (no calls) gives its own rate and CPU.
                        mid = cpu_seconds(pid)
                        ok_mid = target.deliveries()[1]
                        total, ok, pending, ended, waited = target.drain(args.drain_seconds)
                        fig["deliveries"] = f"{ok - ok0}/{total - total0}"
                        drain_cpu = cpu_seconds(pid) - mid
                        sent = ok - ok_mid
                        notes.append(
                            f"{name}: {api} c={c}: during wrk's {args.duration} s the outbox delivered "
                            f"{ok_mid - ok0} of {total - total0} new; then "
                            + (f"it finished in {waited:.1f} s" if not pending else
                               f"in {waited:.0f} s (the limit) it had not finished: {pending} pending")
                            + f"; after wrk: {sent} delivered"
                            + (f", {sent / waited:.0f}/s, {drain_cpu / sent * 1e6:.0f} µs CPU each (no calls running)"
                               if sent and waited > 0.5 else ""))
                    cpu = cpu_seconds(pid) - cpu0
                    answered = fig["ok"] + fig["bad"]
                    sent += fig["sent"]
                    answered_ok += fig["ok"]
                    cut_off += fig["sent"] - answered
                    fig.setdefault("deliveries", "")
                    row = dict(target=name, api=api, conns=c, **fig,
                               cpu_us=cpu / answered * 1e6 if answered else float("nan"), rss_mb=peak_rss_mb(pid))
                    rows.append(row)
                    print(f"   {api:14} c={c:<5} {fig['rps']:>9.0f} req/s  p50 {fig['p50']:.2f}  p99 {fig['p99']:.2f} ms  "
                          f"cpu {row['cpu_us']:.0f} µs/req  rss {row['rss_mb']:.0f} MB  ok {fig['ok']} bad {fig['bad']}"
                          + (f"  deliveries succeeded/made {fig['deliveries']}" if hooked else ""),
                          file=sys.stderr, flush=True)
                if isinstance(target, Taskgate):
                    notes += target.check(sent, answered_ok, cut_off)
            finally:
                if isinstance(target, (Taskgate, LiteLLM)):
                    target.close()
    finally:
        for p in (nginx, fake):
            if p is not None:
                stop(p.proc)
    write(args, rows, notes, runs, targets)
    bad = [r for r in rows if r["bad"]]
    if bad or any("NOT EQUAL" in n or "INCONSISTENT" in n for n in notes):
        sys.exit(f"some answers failed or the stores disagree (see the results; the stores and logs are "
                 f"kept in {dir})")
    shutil.rmtree(dir, ignore_errors=True)


def write(args, rows, notes, runs, targets):
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ceiling = {(r["api"], r["conns"]): r for r in rows if r["target"] == "ceiling"}
    cols = ["target", "api", "conns", "rps", "p50", "p90", "p99", "added_p50", "added_p99", "cpu_us", "rss_mb",
            "ok", "bad", "sent", "deliveries"]
    for r in rows:
        c = ceiling.get((r["api"], r["conns"]))
        r["added_p50"] = r["p50"] - c["p50"] if c else float("nan")
        r["added_p99"] = r["p99"] - c["p99"] if c else float("nan")
    with open(out.with_suffix(".tsv"), "w") as f:
        f.write("\t".join(cols) + "\n")
        for r in rows:
            f.write("\t".join(f"{r[k]:.3f}" if isinstance(r[k], float) else str(r[k]) for k in cols) + "\n")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT).returncode != 0
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), "?")
    mem = int(Path("/proc/meminfo").read_text().split()[1]) // (1024 * 1024)
    with open(out.with_suffix(".txt"), "w") as f:
        f.write(f"# Gateways side by side, {datetime.now(timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}\n")
        f.write(f"# machine: {os.cpu_count()} cores ({cpu}), {mem} GiB; {os.uname().sysname} {os.uname().release}\n")
        f.write(f"# commit {commit}{' (with uncommitted changes)' if dirty else ''}\n")
        f.write(f"# command: bench/compare.sh (wrk -t2 (-t1 at c=1) -d{args.duration}s --latency; "
                f"targets {','.join(targets)}; in flight: {args.in_flight} clients, upstream delay {args.delay_ms} ms)\n")
        f.write("# upstream: nginx with a fixed chat.completion (streamed: fixed SSE); in flight: the Rust fake\n")
        f.write("# latencies in ms; added = the target's minus the ceiling's at the same run; cpu = utime+stime of the\n"
                "# target's process tree / answers, in µs; rss = peak resident set during the run (VmHWM summed over the tree, reset before each run) in MB\n")
        for api, label in (("chat", "chat completion"), ("chat-streamed", "streamed chat (SSE upstream)"),
                           ("chat-slow", f"in flight: upstream answers after {args.delay_ms} ms")):
            sel = [r for r in rows if r["api"] == api]
            if not sel:
                continue
            f.write(f"\n## {label}\n\n")
            f.write("| target | c | req/s | p50 | p90 | p99 | added p50 | added p99 | CPU µs/req | peak RSS MB | ok / bad |\n")
            f.write("|---|---|---|---|---|---|---|---|---|---|---|\n")
            for r in sorted(sel, key=lambda r: (r["conns"], targets.index(r["target"]))):
                added = lambda v: "" if v != v else f"{v:+.2f}"
                if not r["ok"]:
                    f.write(f"| {r['target']} | {r['conns']} | 0 | no answer within the run | | | | | | "
                            f"{r['rss_mb']:.0f} | 0 / {r['bad']} |\n")
                    continue
                f.write(f"| {r['target']} | {r['conns']} | {r['rps']:,.0f} | {r['p50']:.2f} | {r['p90']:.2f} | "
                        f"{r['p99']:.2f} | {added(r['added_p50'])} | {added(r['added_p99'])} | {r['cpu_us']:,.0f} | "
                        f"{r['rss_mb']:.0f} | {r['ok']} / {r['bad']}"
                        + (f" (deliveries succeeded/made {r['deliveries']})" if r["deliveries"] else "") + " |\n")
        ratios = []
        for api, c in runs:
            by = {r["target"]: r for r in rows if r["api"] == api and r["conns"] == c}
            for tg in ("taskgate-sqlite", "taskgate-postgres"):
                for extra, what in (("webhooks", "one delivery a call"), ("traced", "traces and JSON logs"),
                                    ("all", "a delivery a call, traces and JSON logs")):
                    if f"{tg}-{extra}" in by and tg in by:
                        w, p = by[f"{tg}-{extra}"], by[tg]
                        ratios.append(f"{api} c={c}: {tg}-{extra} ({what}) uses {w['cpu_us'] - p['cpu_us']:+.0f} "
                                      f"µs CPU per request ({w['cpu_us'] / p['cpu_us']:.2f}x) and makes "
                                      f"{w['rps'] / p['rps']:.2f}x the requests/s of {tg}")
                for ll in ("litellm-1", "litellm-2"):
                    if tg in by and ll in by:
                        ratios.append(f"{api} c={c}: {ll} uses {by[ll]['cpu_us'] / by[tg]['cpu_us']:.1f}x the CPU "
                                      f"per request of {tg}")
            if "ceiling" in by:
                for tg in [t for t in targets if t.startswith("taskgate-")]:
                    if tg in by:
                        ratios.append(f"{api} c={c}: {tg} uses {by[tg]['cpu_us'] / by['ceiling']['cpu_us']:.1f}x "
                                      f"the upstream's own CPU per request")
        if ratios:
            f.write("\n## ratios\n\n" + "\n".join(ratios) + "\n")
        if notes:
            f.write("\n## stored tasks\n\n" + "\n".join(notes) + "\n")
    chart(rows, targets, runs, out.with_suffix(".svg"))
    print(out.with_suffix(".txt").read_text())


def chart(rows, targets, runs, path):
    """Two panels, requests/s and p99 per run, one bar per target, log scales."""
    import math
    colours = {"ceiling": "#888888", "taskgate-sqlite": "#1f77b4", "taskgate-postgres": "#17becf",
               "taskgate-sqlite-webhooks": "#2ca02c", "taskgate-postgres-webhooks": "#9467bd",
               "taskgate-sqlite-traced": "#bcbd22", "taskgate-postgres-traced": "#8c564b",
               "taskgate-sqlite-all": "#e377c2", "taskgate-postgres-all": "#7f7f7f",
               "litellm-1": "#d62728", "litellm-2": "#ff7f0e"}
    labels = {"chat": "c=", "chat-streamed": "stream c=", "chat-slow": "50 ms c="}
    groups = [(api, c) for api, c in runs]
    bar, gap, left, top, height = 11, 18, 70, 40, 220
    width = left + len(groups) * (len(targets) * bar + gap) + 20
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{2 * (height + 70) + 40}" '
           f'font-family="sans-serif" font-size="11">', '<rect width="100%" height="100%" fill="white"/>']
    for panel, (key, title, unit) in enumerate((("rps", "Requests per second (log scale, higher is better)", "req/s"),
                                                ("p99", "p99 latency (log scale, lower is better)", "ms"))):
        y0 = top + panel * (height + 70)
        values = [r[key] for r in rows if r[key] > 0 and r["ok"]]
        if not values:
            continue
        lo = 10 ** math.floor(math.log10(min(values)))
        hi = 10 ** math.ceil(math.log10(max(values)))
        scale = lambda v: y0 + height - (math.log10(max(v, lo)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * height
        svg.append(f'<text x="{left}" y="{y0 - 12}" font-size="13" font-weight="bold">{title}</text>')
        d = lo
        while d <= hi:
            y = scale(d)
            svg.append(f'<line x1="{left}" x2="{width - 20}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
            svg.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{d:g} {unit}</text>')
            d *= 10
        x = left + gap / 2
        for api, c in groups:
            for t in targets:
                r = next((r for r in rows if r["target"] == t and r["api"] == api and r["conns"] == c), None)
                if r and r[key] > 0 and r["ok"]:
                    y = scale(r[key])
                    svg.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar - 1}" height="{y0 + height - y:.1f}" '
                               f'fill="{colours.get(t, "#333")}"><title>{t} {api} c={c}: {r[key]:,.2f} {unit}</title></rect>')
                x += bar
            svg.append(f'<text x="{x - len(targets) * bar / 2:.1f}" y="{y0 + height + 14}" text-anchor="middle">'
                       f'{labels[api]}{c}</text>')
            x += gap
    lx = left
    for t in targets:
        svg.append(f'<rect x="{lx}" y="{2 * (height + 70) + 10}" width="10" height="10" fill="{colours.get(t, "#333")}"/>')
        svg.append(f'<text x="{lx + 14}" y="{2 * (height + 70) + 19}">{t}</text>')
        lx += 130
    svg.append("</svg>")
    Path(path).write_text("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
