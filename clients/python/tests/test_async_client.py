"""The async client against the real server (each test runs its own event loop)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Callable, Coroutine, List

import pytest

import taskgate
from taskgate import AsyncTaskgate, StreamEvent, Task

from .conftest import env
from .stubs import TASK, StubServer, fail, ok


def run(fn: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(fn())


def test_call_wait_get_cancel(base_url: str) -> None:
    async def main() -> None:
        async with AsyncTaskgate(api_key=env("TASKGATE_TEST_KEY"), base_url=base_url) as tg:
            task = await tg.call("sentiment", {"text": "async"}, mode="async", sandbox={"delay_ms": 500})
            assert isinstance(task, Task) and task.status in ("queued", "running")
            done = await tg.tasks.wait(task.id, timeout=30)
            assert done.status == "succeeded"
            details = await tg.tasks.get(task.id)
            assert details.input == {"text": "async"}
            assert [e.status for e in details.events][-1] == "succeeded"

            slow = await tg.call("sentiment", {"text": "slow"}, mode="async", sandbox={"delay_ms": 5000})
            with pytest.raises(taskgate.WaitTimeoutError):
                await tg.tasks.wait(slow.id, timeout=0.3)
            cancelled = await tg.tasks.cancel(slow.id)
            assert cancelled.status == "cancelled"
            assert (await tg.tasks.cancel(slow.id)).status == "cancelled"
            with pytest.raises(taskgate.ConflictError):
                await tg.tasks.cancel(task.id)

    run(main)


def test_list_and_list_page(base_url: str) -> None:
    marker = uuid.uuid4().hex

    async def main() -> None:
        async with AsyncTaskgate(api_key=env("TASKGATE_API_KEY"), base_url=base_url) as tg:
            first = await tg.call("token-count", {"text": "start"})
            await asyncio.sleep(0.01)
            made = [
                (await tg.call("token-count", {"text": str(i)}, metadata={"marker": marker})).id
                for i in range(12)
            ]
            seen: List[str] = []
            async for t in tg.tasks.list(limit=5, order="asc", api="token-count", created_after=first.created_at):
                seen.append(t.id)
            assert seen == made
            page = await tg.tasks.list_page(limit=5, api="token-count", created_after=first.created_at)
            assert len(page.items) == 5 and page.has_more and page.next_cursor
            assert [t.id for t in page.items] == list(reversed(made))[:5]

            slugs = [a.slug async for a in tg.apis.list(limit=2)]
            assert len(slugs) == 5
            api_page = await tg.apis.list_page(limit=2)
            assert len(api_page.items) == 2 and api_page.has_more
            api = await tg.apis.get("chat")
            assert api.kind == "chat"

    run(main)


def test_stream(base_url: str) -> None:
    async def main() -> None:
        async with AsyncTaskgate(api_key=env("TASKGATE_TEST_KEY"), base_url=base_url) as tg:
            task = await tg.call(
                "chat", {"messages": [{"role": "user", "content": "hi"}]}, mode="async", sandbox={"delay_ms": 1500}
            )
            events: List[StreamEvent] = []
            async for ev in tg.tasks.stream(task.id):
                events.append(ev)
            assert events[-1].type == "done"
            final = events[-1].task
            assert final is not None and final.status == "succeeded" and final.output is not None
            deltas = [e.text or "" for e in events if e.type == "delta"]
            assert deltas and "".join(deltas) == final.output["text"]

            text, again = await tg.tasks.stream_text(task.id)
            assert again.id == task.id
            assert text == "", "a finished task's stream is its done event only"

    run(main)


def test_errors_and_rate_limit_headers(base_url: str) -> None:
    async def main() -> None:
        async with AsyncTaskgate(api_key=env("TASKGATE_API_KEY"), base_url=base_url) as tg:
            with pytest.raises(taskgate.NotFoundError) as caught:
                await tg.tasks.get("task_01JD2W3KX7ABCDEFGHJKMNPQRS")
            assert caught.value.code == "task_not_found"
            assert tg.last_request_id == caught.value.request_id
            with pytest.raises(taskgate.BadRequestError):
                await tg.call("sentiment", {})
            assert tg.last_rate_limit.limit is None
        async with AsyncTaskgate(api_key="tg_wrong", base_url=base_url) as tg:
            with pytest.raises(taskgate.AuthenticationError):
                await tg.apis.get("sentiment")

    run(main)


def test_retry_after_and_generated_key(stub: StubServer) -> None:
    stub.script(fail(429, "rate_limit_error", "rate_limit_exceeded", {"Retry-After": "1"}), ok(TASK))

    async def main() -> None:
        async with AsyncTaskgate(api_key="tg_stub", base_url=stub.url) as tg:
            started = time.monotonic()
            task = await tg.call("sentiment", {"text": "x"})
            assert task.id == TASK["id"]
            assert time.monotonic() - started >= 0.95

    run(main)
    keys = [s.headers.get("idempotency-key") for s in stub.seen]
    assert len(keys) == 2 and keys[0] and keys[0] == keys[1]


def test_connection_error(stub: StubServer) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()

    async def main() -> None:
        async with AsyncTaskgate(api_key="tg_x", base_url=f"http://127.0.0.1:{port}/api/v1", max_retries=0) as tg:
            with pytest.raises(taskgate.APIConnectionError):
                await tg.call("sentiment", {"text": "x"})

    run(main)


def test_defaults_and_close(monkeypatch: pytest.MonkeyPatch, base_url: str) -> None:
    async def main() -> None:
        tg = AsyncTaskgate()
        try:
            assert tg.base_url == base_url.rstrip("/")
            assert (await tg.call("sentiment", {"text": "env"})).status == "succeeded"
        finally:
            await tg.close()

    run(main)
    monkeypatch.delenv("TASKGATE_API_KEY")
    with pytest.raises(taskgate.TaskgateError):
        AsyncTaskgate()
