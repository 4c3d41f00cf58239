"""`tg.webhook_endpoints`, `tg.webhook_deliveries` and `tg.webhooks`: what each sends
(against a stub), and one delivery end to end (the real server, a receiver of the
test's own on loopback, verified with `taskgate.webhooks.verify`)."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, Tuple

import pytest

from taskgate import AsyncTaskgate, Taskgate
from taskgate import webhooks as verifying

from .stubs import StubServer, ok

ENDPOINT: Dict[str, Any] = {
    "id": "whe_01JD2W3KX7ABCDEFGHJKMNPQRS",
    "object": "webhook_endpoint",
    "url": "https://example.com/hook",
    "events": ["task.succeeded"],
    "description": None,
    "enabled": True,
    "disabled_reason": None,
    "mode": "live",
    "created_at": "2026-11-21T13:45:12.345Z",
}
DELIVERY: Dict[str, Any] = {
    "id": "whd_01JD2W3KX7ABCDEFGHJKMNPQRS",
    "object": "webhook_delivery",
    "message_id": "msg_01JD2W3KX7ABCDEFGHJKMNPQRS_succeeded",
    "endpoint_id": ENDPOINT["id"],
    "event_type": "task.succeeded",
    "task_id": "task_01JD2W3KX7ABCDEFGHJKMNPQRS",
    "mode": "live",
    "status": "succeeded",
    "attempts": [
        {"at": "2026-11-21T13:45:13Z", "http_status": 200, "duration_ms": 4, "error": None, "response_excerpt": "ok"}
    ],
    "next_attempt_at": None,
    "created_at": "2026-11-21T13:45:12.345Z",
}


def page(item: Dict[str, Any], more: bool) -> Dict[str, Any]:
    return {"object": "list", "items": [item], "has_more": more, "next_cursor": item["id"] if more else None}


def test_endpoints_requests(stub: StubServer) -> None:
    secret = "whsec_" + "A" * 43 + "="
    stub.script(
        ok({**ENDPOINT, "secret": secret}, 201),
        ok(page(ENDPOINT, True)),
        ok(page({**ENDPOINT, "id": "whe_01JD2W3KX7ABCDEFGHJKMNPQRT"}, False)),
        ok({**ENDPOINT, "enabled": False, "disabled_reason": "owner"}),
        ok({"secret": secret}),
        ok({"secret": secret}),
        ok({**DELIVERY, "event_type": "webhook.test", "task_id": None}, 202),
        ok({"id": ENDPOINT["id"], "object": "webhook_endpoint", "deleted": True}),
    )
    with Taskgate(api_key="tg_stub", base_url=stub.url, max_retries=0) as tg:
        made = tg.webhook_endpoints.create("https://example.com/hook", events=["task.succeeded"])
        assert made.secret == secret and made.events == ["task.succeeded"]
        assert [e.id for e in tg.webhook_endpoints.list(limit=1)] == [ENDPOINT["id"], "whe_01JD2W3KX7ABCDEFGHJKMNPQRT"]
        changed = tg.webhook_endpoints.update(ENDPOINT["id"], enabled=False, description=None)
        assert changed.disabled_reason == "owner"
        assert tg.webhook_endpoints.secret(ENDPOINT["id"]) == secret
        assert tg.webhook_endpoints.rotate_secret(ENDPOINT["id"]) == secret
        assert tg.webhook_endpoints.test(ENDPOINT["id"]).event_type == "webhook.test"
        tg.webhook_endpoints.delete(ENDPOINT["id"])
    sent = [(s.method, s.path) for s in stub.seen]
    e = "/api/v1/webhook_endpoints/" + ENDPOINT["id"]
    assert sent == [
        ("POST", "/api/v1/webhook_endpoints"),
        ("GET", "/api/v1/webhook_endpoints?limit=1"),
        ("GET", f"/api/v1/webhook_endpoints?limit=1&cursor={ENDPOINT['id']}"),
        ("PATCH", e),
        ("GET", e + "/secret"),
        ("POST", e + "/rotate_secret"),
        ("POST", e + "/test"),
        ("DELETE", e),
    ]
    assert json.loads(stub.seen[0].body) == {"url": "https://example.com/hook", "events": ["task.succeeded"]}
    assert json.loads(stub.seen[3].body) == {"enabled": False, "description": None}


def test_deliveries_and_signing_secret_requests(stub: StubServer) -> None:
    stub.script(
        ok(page(DELIVERY, False)),
        ok(DELIVERY),
        ok({**DELIVERY, "status": "pending"}, 202),
        ok({"secret": "whsec_x"}),
        ok({"secret": "whsec_y"}),
    )
    with Taskgate(api_key="tg_stub", base_url=stub.url, max_retries=0) as tg:
        got = list(tg.webhook_deliveries.list(endpoint_id=ENDPOINT["id"], status="succeeded"))
        assert got[0].attempts[0].http_status == 200
        assert tg.webhook_deliveries.get(DELIVERY["id"]).message_id == DELIVERY["message_id"]
        assert tg.webhook_deliveries.retry(DELIVERY["id"]).status == "pending"
        assert tg.webhooks.signing_secret() == "whsec_x"
        assert tg.webhooks.rotate_signing_secret() == "whsec_y"
    d = "/api/v1/webhook_deliveries/" + DELIVERY["id"]
    assert [(s.method, s.path) for s in stub.seen] == [
        ("GET", f"/api/v1/webhook_deliveries?endpoint_id={ENDPOINT['id']}&status=succeeded"),
        ("GET", d),
        ("POST", d + "/retry"),
        ("GET", "/api/v1/webhooks/secret"),
        ("POST", "/api/v1/webhooks/secret/rotate"),
    ]


def test_call_sends_its_webhook(stub: StubServer) -> None:
    with Taskgate(api_key="tg_stub", base_url=stub.url, max_retries=0) as tg:
        tg.call("sentiment", {"text": "hi"}, webhook={"url": "https://example.com/hook", "events": ["task.failed"]})
    body = json.loads(stub.seen[0].body)
    assert body["webhook"] == {"url": "https://example.com/hook", "events": ["task.failed"]}


def test_async_resources(stub: StubServer) -> None:
    stub.script(ok({**ENDPOINT, "secret": "whsec_x"}, 201), ok(page(DELIVERY, False)), ok({"secret": "whsec_z"}))

    async def run() -> None:
        async with AsyncTaskgate(api_key="tg_stub", base_url=stub.url, max_retries=0) as tg:
            made = await tg.webhook_endpoints.create("https://example.com/hook")
            assert made.secret == "whsec_x"
            assert [d.id async for d in tg.webhook_deliveries.list(task_id=DELIVERY["task_id"])] == [DELIVERY["id"]]
            assert await tg.webhooks.signing_secret() == "whsec_z"

    asyncio.run(run())
    assert json.loads(stub.seen[0].body) == {"url": "https://example.com/hook"}


@pytest.fixture
def receiver() -> Iterator[Tuple[str, "queue.Queue[Tuple[bytes, Dict[str, str]]]"]]:
    """A webhook receiver on loopback: what it got, in order."""
    got: "queue.Queue[Tuple[bytes, Dict[str, str]]]" = queue.Queue()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.put((body, dict(self.headers.items())))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", got
    finally:
        server.shutdown()
        server.server_close()


def test_live_a_delivery_verifies(live: Taskgate, receiver, marker: str) -> None:
    url, got = receiver
    endpoint = live.webhook_endpoints.create(url, events=["task.succeeded"], description=marker)
    try:
        assert endpoint.secret and endpoint.secret.startswith("whsec_")
        assert live.webhook_endpoints.get(endpoint.id).secret is None
        assert endpoint.id in [e.id for e in live.webhook_endpoints.list()]
        task = live.call("sentiment", {"text": "webhooks are nice"}, metadata={"marker": marker})
        while True:
            body, headers = got.get(timeout=15)
            event = verifying.verify(body, headers, endpoint.secret)
            if event.data.get("id") == task.id:
                break
        assert event.type == "task.succeeded"
        assert event.data["metadata"] == {"marker": marker}
        deliveries = list(live.webhook_deliveries.list(task_id=task.id))
        assert [d.endpoint_id for d in deliveries] == [endpoint.id]
    finally:
        live.webhook_endpoints.delete(endpoint.id)
