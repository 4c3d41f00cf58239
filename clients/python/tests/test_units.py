"""Pieces that need no server: the SSE reader, the models, the generator, the
rate-limit headers, the retry rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

import taskgate
from taskgate import RateLimit, Task, TaskDetails
from taskgate._base import backoff_delay, is_retryable_status, parse_retry_after, retry_delay
from taskgate._sse import SSEDecoder

from .stubs import TASK

PACKAGE = Path(__file__).resolve().parent.parent


def decode(chunks: list) -> list:
    decoder = SSEDecoder()
    events = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events + decoder.flush()


def test_sse_fields_comments_and_multiline_data() -> None:
    stream = (
        b": keep-alive\n\n"
        b"event: delta\ndata: {\"text\": \"a\"}\n\n"
        b"event:delta\r\ndata:line one\r\ndata: line two\r\n\r\n"
        b"id: 7\nretry: 1000\ndata: x\n\n"
        b"event: done\rdata: {}\r\r"
        b"data: not ended"
    )
    events = decode([stream])
    assert [(e.event, e.data) for e in events] == [
        ("delta", '{"text": "a"}'),
        ("delta", "line one\nline two"),
        ("message", "x"),
        ("done", "{}"),
    ]
    assert events[2].id == "7" and events[2].retry == 1000
    # The same bytes one at a time (a CR LF split across two pieces, UTF-8 too).
    assert decode([bytes([b]) for b in stream]) == events
    utf8 = 'event: delta\ndata: {"text": "é✓"}\n\n'.encode()
    assert decode([utf8[i : i + 1] for i in range(len(utf8))])[0].data == '{"text": "é✓"}'


def test_models_tolerate_unknown_and_missing_fields() -> None:
    raw = dict(TASK, new_field={"x": 1}, usage=dict(TASK["usage"], surprise=True))
    task = Task.from_dict(raw)
    assert task.id == TASK["id"]
    assert task.usage.units == 1
    assert task.to_dict()["new_field"] == {"x": 1}
    assert task.usage.to_dict()["surprise"] is True
    # to_dict is a copy.
    task.to_dict()["id"] = "changed"
    assert task.to_dict()["id"] == TASK["id"]
    sparse = TaskDetails.from_dict({"id": "task_x", "status": "running"})
    assert sparse.events is None and sparse.input is None
    built = taskgate.Sandbox(delay_ms=10)
    assert built.to_dict() == {"delay_ms": 10}


def test_generated_models_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(PACKAGE / "scripts" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_rate_limit_from_headers() -> None:
    headers = httpx.Headers(
        {
            "RateLimit-Policy": '"minute";q=60;w=60, "day";q=1000;w=86400',
            "RateLimit": '"minute";r=17;t=42',
            "X-RateLimit-Limit": "60",
            "X-RateLimit-Remaining": "17",
            "X-RateLimit-Reset": "1800000000",
            "Retry-After": "3",
        }
    )
    rl = RateLimit.from_headers(headers)
    assert (rl.limit, rl.remaining, rl.reset) == (60, 17, 1800000000)
    assert (rl.window, rl.window_remaining, rl.window_reset) == ("minute", 17, 42)
    assert rl.policy is not None and rl.policy.startswith('"minute"')
    assert rl.retry_after == 3
    assert RateLimit.from_headers(httpx.Headers({})) == RateLimit()


def test_retry_rules() -> None:
    assert all(is_retryable_status(s, None) for s in (408, 429, 500, 502, 503, 504))
    assert is_retryable_status(409, "idempotency_in_progress")
    assert not any(is_retryable_status(s, None) for s in (400, 401, 403, 404, 409, 413, 422))
    for attempt in range(8):
        delay = backoff_delay(attempt)
        cap = min(0.5 * 2**attempt, 8.0)
        assert 0.75 * cap <= delay <= cap
    assert retry_delay(0, 60) == 60
    assert retry_delay(0, 61) is None
    assert parse_retry_after(httpx.Headers({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None
