"""Local HTTP servers for what the real server will not do on demand: answer 429 or
5xx, be slow, or lose an answer on the way back (a proxy)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional
from urllib.parse import urlsplit

TASK: Dict[str, Any] = {
    "id": "task_01JD2W3KX7ABCDEFGHJKMNPQRS",
    "object": "task",
    "api": "sentiment",
    "mode": "live",
    "status": "succeeded",
    "output": {"label": "positive", "score": 0.83},
    "error": None,
    "usage": {"units": 1, "input_tokens": None, "output_tokens": None, "cost_usd": "0.000000"},
    "metadata": {},
    "created_at": "2026-11-21T13:45:12.345Z",
    "started_at": "2026-11-21T13:45:12.345Z",
    "completed_at": "2026-11-21T13:45:12.348Z",
    "duration_ms": 3,
}


def ok(data: Any, status: int = 200, headers: Optional[Dict[str, str]] = None) -> "Reply":
    body = {"success": True, "data": data, "meta": {"request_id": "req_stub_ok", "latency_ms": 0.1}}
    return Reply(status, body, {"X-Request-Id": "req_stub_ok", **(headers or {})})


def fail(
    status: int,
    type_: str,
    code: str,
    headers: Optional[Dict[str, str]] = None,
    request_id: str = "req_stub_error",
) -> "Reply":
    body = {
        "success": False,
        "data": None,
        "error": {"type": type_, "code": code, "message": f"stub {code}"},
        "meta": {"request_id": request_id, "latency_ms": 0.1},
    }
    return Reply(status, body, {"X-Request-Id": request_id, **(headers or {})})


@dataclass
class Reply:
    status: int
    body: Any
    headers: Dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw: Optional[bytes] = None


@dataclass
class Seen:
    method: str
    path: str
    headers: Dict[str, str]
    body: bytes
    at: float


class StubServer:
    """Answers requests with the scripted replies in order (the last one repeats)
    and records what it was sent."""

    def __init__(self) -> None:
        self.replies: List[Reply] = [ok(TASK)]
        self.seen: List[Seen] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with stub._lock:
                    stub.seen.append(
                        Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic())
                    )
                    index = min(len(stub.seen), len(stub.replies)) - 1
                    reply = stub.replies[index]
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    if reply.raw is None:
                        self.send_header("Content-Type", "application/json")
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/api/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self.replies = list(replies)
            self.seen = []

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class LosingProxy:
    """Forwards every request to the real server, but answers the first POST /call
    with a 503 instead of the real answer: the task is made, the client never
    hears of it, and must retry."""

    def __init__(self, upstream_base_url: str) -> None:
        self.upstream = urlsplit(upstream_base_url)
        self.calls: List[Dict[str, Any]] = []
        self._lost = False
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn = http.client.HTTPConnection(proxy.upstream.hostname or "127.0.0.1", proxy.upstream.port, timeout=30)
                try:
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    answer = conn.getresponse()
                    payload = answer.read()
                    answer_headers = [(k, v) for k, v in answer.getheaders()
                                      if k.lower() not in ("transfer-encoding", "connection", "content-length")]
                    status = answer.status
                finally:
                    conn.close()
                if self.command == "POST" and self.path.endswith("/call"):
                    proxy.calls.append(
                        {
                            "idempotency_key": self.headers.get("Idempotency-Key"),
                            "status": status,
                            "replayed": dict((k.lower(), v) for k, v in answer_headers).get("idempotent-replayed"),
                            "body": json.loads(payload),
                        }
                    )
                    if not proxy._lost:
                        proxy._lost = True
                        status = 503
                        payload = json.dumps(
                            {"success": False, "data": None,
                             "error": {"type": "api_error", "code": "service_unavailable", "message": "lost"},
                             "meta": {"request_id": "req_proxy", "latency_ms": 0}}
                        ).encode()
                        answer_headers = [("Content-Type", "application/json")]
                self.send_response(status)
                for name, value in answer_headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}{self.upstream.path}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
