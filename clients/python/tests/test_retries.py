"""Retries, backoff, Retry-After and idempotency keys."""

from __future__ import annotations

import re
import socket
import time
import uuid

import pytest

import taskgate
from taskgate import RateLimitError, Taskgate

from .conftest import env
from .stubs import TASK, LosingProxy, StubServer, fail, ok

# The Idempotency-Key pattern of the OpenAPI document.
KEY_PATTERN = re.compile(r"^[!-~]([ -~]*[!-~])?$")
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_429_with_retry_after_is_retried_after_waiting(stub: StubServer) -> None:
    stub.script(
        fail(429, "rate_limit_error", "rate_limit_exceeded", {"Retry-After": "1"}),
        ok(TASK, headers={"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "59", "X-RateLimit-Reset": "1800000000"}),
    )
    with Taskgate(api_key="tg_stub", base_url=stub.url) as tg:
        task = tg.call("sentiment", {"text": "hi"})
        assert task.id == TASK["id"]
        assert len(stub.seen) == 2
        waited = stub.seen[1].at - stub.seen[0].at
        assert waited >= 0.95, f"Retry-After: 1 honoured (waited {waited:.2f} s)"
        assert tg.last_rate_limit.limit == 60
        assert tg.last_rate_limit.remaining == 59
        assert tg.last_rate_limit.reset == 1800000000
        assert tg.last_request_id == "req_stub_ok"
    first, second = (s.headers.get("idempotency-key") for s in stub.seen)
    assert first is not None and first == second, "the same generated key on every attempt"
    assert UUID4.match(first) and KEY_PATTERN.match(first)


def test_a_long_retry_after_is_raised_at_once(stub: StubServer) -> None:
    stub.script(fail(429, "rate_limit_error", "rate_limit_exceeded", {"Retry-After": "120"}), ok(TASK))
    with Taskgate(api_key="tg_stub", base_url=stub.url, max_retries=3) as tg:
        started = time.monotonic()
        with pytest.raises(RateLimitError) as caught:
            tg.tasks.get(TASK["id"])
        assert time.monotonic() - started < 5
    assert caught.value.retry_after == 120
    assert len(stub.seen) == 1


def test_5xx_and_408_then_success(stub: StubServer) -> None:
    stub.script(
        fail(503, "api_error", "service_unavailable", {"Retry-After": "0"}),
        fail(408, "invalid_request_error", "request_timeout", {"Retry-After": "0"}),
        ok(TASK),
    )
    with Taskgate(api_key="tg_stub", base_url=stub.url) as tg:
        assert tg.tasks.get(TASK["id"]).id == TASK["id"]
    assert len(stub.seen) == 3
    assert all(s.method == "GET" for s in stub.seen)


def test_backoff_without_retry_after(stub: StubServer) -> None:
    stub.script(fail(500, "api_error", "internal_error"), ok(TASK))
    with Taskgate(api_key="tg_stub", base_url=stub.url) as tg:
        tg.tasks.get(TASK["id"])
    waited = stub.seen[1].at - stub.seen[0].at
    assert 0.3 <= waited, "0.5 s, less up to a quarter of jitter"


def test_409_in_progress_is_retried_other_409s_are_not(stub: StubServer) -> None:
    stub.script(fail(409, "conflict_error", "idempotency_in_progress", {"Retry-After": "0"}), ok(TASK))
    with Taskgate(api_key="tg_stub", base_url=stub.url) as tg:
        assert tg.call("sentiment", {"text": "x"}).id == TASK["id"]
    assert len(stub.seen) == 2

    stub.script(fail(409, "conflict_error", "task_not_cancellable"), ok(TASK))
    with Taskgate(api_key="tg_stub", base_url=stub.url) as tg:
        with pytest.raises(taskgate.ConflictError):
            tg.tasks.cancel(TASK["id"])
    assert len(stub.seen) == 1


def test_4xx_are_not_retried(stub: StubServer) -> None:
    stub.script(fail(400, "invalid_request_error", "invalid_input"), ok(TASK))
    with Taskgate(api_key="tg_stub", base_url=stub.url) as tg:
        with pytest.raises(taskgate.BadRequestError):
            tg.call("sentiment", {"text": "x"})
    assert len(stub.seen) == 1


def test_post_call_without_retries_sends_no_key_and_is_not_retried(stub: StubServer) -> None:
    stub.script(fail(503, "api_error", "service_unavailable", {"Retry-After": "0"}), ok(TASK))
    with Taskgate(api_key="tg_stub", base_url=stub.url, max_retries=0) as tg:
        with pytest.raises(taskgate.InternalServerError):
            tg.call("sentiment", {"text": "x"})
    assert len(stub.seen) == 1
    assert "idempotency-key" not in stub.seen[0].headers


def test_a_given_idempotency_key_is_sent_on_every_attempt(stub: StubServer) -> None:
    stub.script(fail(502, "api_error", "internal_error", {"Retry-After": "0"}), ok(TASK))
    with Taskgate(api_key="tg_stub", base_url=stub.url, max_retries=1) as tg:
        tg.call("sentiment", {"text": "x"}, idempotency_key="order-1234")
    assert [s.headers.get("idempotency-key") for s in stub.seen] == ["order-1234", "order-1234"]
    # Every call gets a key of its own.
    stub.script(ok(TASK))
    with Taskgate(api_key="tg_stub", base_url=stub.url) as tg:
        tg.call("sentiment", {"text": "x"})
        tg.call("sentiment", {"text": "x"})
    keys = [s.headers.get("idempotency-key") for s in stub.seen]
    assert keys[0] and keys[1] and keys[0] != keys[1]


def test_request_shape(stub: StubServer) -> None:
    stub.script(ok(TASK))
    with Taskgate(api_key="tg_shape", base_url=stub.url + "/") as tg:
        tg.call(
            "sentiment",
            {"text": "hi"},
            mode="async",
            metadata={"k": "v"},
            timeout_ms=1000,
            sandbox=taskgate.Sandbox(delay_ms=5, outcome="failed", error_code="timeout"),
        )
        tg.tasks.list_page(limit=3, status=["queued", "running"], api="chat", order="asc", cursor="asc_x")
    call, listing = stub.seen
    assert call.method == "POST" and call.path == "/api/v1/call"
    assert call.headers["authorization"] == "Bearer tg_shape"
    assert call.headers["user-agent"] == "taskgate-python/0.1.0"
    assert call.headers["content-type"] == "application/json"
    import json

    assert json.loads(call.body) == {
        "api": "sentiment",
        "input": {"text": "hi"},
        "mode": "async",
        "metadata": {"k": "v"},
        "timeout_ms": 1000,
        "sandbox": {"delay_ms": 5, "outcome": "failed", "error_code": "timeout"},
    }
    assert listing.path == "/api/v1/tasks?limit=3&api=chat&status=queued%2Crunning&order=asc&cursor=asc_x"


def test_connection_errors_are_retried() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with Taskgate(api_key="tg_x", base_url=f"http://127.0.0.1:{port}/api/v1", max_retries=1) as tg:
        started = time.monotonic()
        with pytest.raises(taskgate.APIConnectionError):
            tg.apis.get("sentiment")
        assert time.monotonic() - started >= 0.3, "one backoff before the retry"


def test_idempotent_retry_creates_one_task(base_url: str) -> None:
    marker = uuid.uuid4().hex
    proxy = LosingProxy(base_url)
    try:
        with Taskgate(api_key=env("TASKGATE_API_KEY"), base_url=proxy.url) as tg:
            task = tg.call("sentiment", {"text": "only once"}, metadata={"marker": marker})
    finally:
        proxy.close()
    assert len(proxy.calls) == 2, "the lost answer, then the retry"
    first, retry = proxy.calls
    assert first["idempotency_key"] and first["idempotency_key"] == retry["idempotency_key"]
    assert UUID4.match(first["idempotency_key"])
    assert retry["replayed"] == "true"
    assert first["body"]["data"]["id"] == retry["body"]["data"]["id"] == task.id

    with Taskgate(api_key=env("TASKGATE_API_KEY"), base_url=base_url) as tg:
        mine = [t for t in tg.tasks.list(limit=100, api="sentiment") if t.metadata.get("marker") == marker]
    assert [t.id for t in mine] == [task.id]
