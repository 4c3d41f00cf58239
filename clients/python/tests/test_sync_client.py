"""The sync client against the real server: every method."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
from typing import Any, Dict, List

import pytest

import taskgate
from taskgate import (
    ApiDetails,
    ApiSummary,
    StreamEvent,
    Task,
    TaskDetails,
    Taskgate,
    TaskgateError,
    TaskList,
    WaitTimeoutError,
)

TASK_ID = re.compile(r"^task_[0-7][0-9A-HJKMNP-TV-Z]{25}$")


def test_version_and_exports() -> None:
    assert taskgate.__version__ == "0.1.0"
    for name in taskgate.__all__:
        assert hasattr(taskgate, name), name


def test_call_sync_returns_the_finished_task(live: Taskgate, marker: str) -> None:
    task = live.call("sentiment", {"text": "I love this"}, metadata={"marker": marker})
    assert isinstance(task, Task)
    assert TASK_ID.match(task.id)
    assert task.object == "task"
    assert task.api == "sentiment"
    assert task.mode == "live"
    assert task.status == "succeeded"
    assert task.output is not None and task.output["label"] == "positive"
    assert task.error is None
    assert task.usage.units == 1
    assert isinstance(task.usage.cost_usd, str)
    assert task.metadata == {"marker": marker}
    assert task.created_at.endswith("Z")
    assert task.to_dict()["id"] == task.id
    assert live.last_request_id is not None and live.last_request_id.startswith("req_")



GET_WEATHER: Dict[str, Any] = {
    "name": "get_weather",
    "description": "The current weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def test_chat_tool_call_round_trip(test_mode: Taskgate) -> None:
    # Test mode answers a forced tool with a call whose arguments follow its parameters;
    # the chat kind's input and output are the generated models.
    tool = taskgate.ChatTool(**GET_WEATHER)
    messages = [taskgate.ChatMessage(role="user", content="What is the weather in Paris?")]
    task = test_mode.call(
        "chat",
        taskgate.ChatInput(messages=messages, tools=[tool], tool_choice={"name": "get_weather"}),
    )
    assert task.status == "succeeded" and task.mode == "test"
    assert task.output is not None
    out = taskgate.ChatOutput.from_dict(task.output)
    assert out.finish_reason == "tool_calls"
    [call] = out.tool_calls
    assert isinstance(call, taskgate.ChatToolCall)
    assert call.name == "get_weather"
    assert isinstance(call.id, str) and call.id
    assert isinstance(call.arguments["city"], str) and call.arguments["city"]

    # The call and the tool's result go back; the answer is text.
    messages += [
        taskgate.ChatMessage(role="assistant", tool_calls=out.tool_calls),
        taskgate.ChatMessage(role="tool", tool_call_id=call.id, content='{"temp_c": 21}'),
    ]
    answer = test_mode.call("chat", taskgate.ChatInput(messages=messages, tools=[tool]))
    assert answer.status == "succeeded", answer.error
    assert answer.output is not None
    final = taskgate.ChatOutput.from_dict(answer.output)
    assert isinstance(final.text, str) and final.text
    assert final.tool_calls == []
    assert final.finish_reason == "stop"
    # What went up is what the wire has: the task's input, as the server stored it.
    sent = test_mode.tasks.get(answer.id).input
    assert sent["messages"][1] == {"role": "assistant", "tool_calls": [call.to_dict()]}
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": call.id, "content": '{"temp_c": 21}'}


def test_call_async_then_wait(test_mode: Taskgate) -> None:
    task = test_mode.call("sentiment", {"text": "hi"}, mode="async", sandbox={"delay_ms": 800})
    assert task.status in ("queued", "running")
    assert task.mode == "test"
    done = test_mode.tasks.wait(task.id, timeout=30)
    assert done.id == task.id
    assert done.status == "succeeded"
    assert done.output is not None


def test_call_with_every_option(test_mode: Taskgate, marker: str) -> None:
    task = test_mode.call(
        "token-count",
        {"text": "one two three"},
        mode="sync",
        metadata={"marker": marker},
        timeout_ms=10_000,
        idempotency_key=f"opts-{marker}",
        sandbox=taskgate.Sandbox(delay_ms=0),
    )
    assert task.status == "succeeded"
    details = test_mode.tasks.get(task.id)
    assert details.idempotency_key == f"opts-{marker}"
    again = test_mode.call(
        "token-count",
        {"text": "one two three"},
        mode="sync",
        metadata={"marker": marker},
        timeout_ms=10_000,
        idempotency_key=f"opts-{marker}",
        sandbox={"delay_ms": 0},
    )
    assert again.id == task.id


def test_sandbox_failure_is_a_failed_task_not_an_error(test_mode: Taskgate) -> None:
    task = test_mode.call(
        "sentiment", {"text": "x"}, sandbox={"outcome": "failed", "error_code": "upstream_timeout"}
    )
    assert task.status == "failed"
    assert task.error is not None and task.error.code == "upstream_timeout"


def test_get_returns_details(live: Taskgate, marker: str) -> None:
    task = live.call("language-detect", {"text": "Bonjour tout le monde"}, metadata={"marker": marker})
    details = live.tasks.get(task.id)
    assert isinstance(details, TaskDetails)
    assert details.id == task.id
    assert details.input == {"text": "Bonjour tout le monde"}
    assert details.key_id.startswith("key_")
    assert [e.status for e in details.events] == ["queued", "running", "succeeded"]
    assert details.events[0].at == details.created_at
    assert len(details.attempts) == 1
    assert details.attempts[0].provider == "builtin"
    assert details.attempts[0].outcome == "succeeded"
    assert details.metadata == {"marker": marker}
    # A replayed or generated Idempotency-Key is recorded on the task.
    assert details.idempotency_key is not None


def test_cancel_a_running_task(test_mode: Taskgate) -> None:
    task = test_mode.call("sentiment", {"text": "slow"}, mode="async", sandbox={"delay_ms": 5000})
    cancelled = test_mode.tasks.cancel(task.id)
    assert cancelled.id == task.id
    assert cancelled.status == "cancelled"
    # Cancelling a cancelled task is 200 and changes nothing.
    assert test_mode.tasks.cancel(task.id).status == "cancelled"
    assert test_mode.tasks.wait(task.id, timeout=10).status == "cancelled"
    events = [e.status for e in test_mode.tasks.get(task.id).events]
    assert events[-1] == "cancelled"


def test_wait_times_out(test_mode: Taskgate) -> None:
    task = test_mode.call("sentiment", {"text": "slow"}, mode="async", sandbox={"delay_ms": 5000})
    try:
        with pytest.raises(WaitTimeoutError) as caught:
            test_mode.tasks.wait(task.id, timeout=0.6)
        assert isinstance(caught.value, TaskgateError)
        assert caught.value.task_id == task.id
        assert caught.value.task is not None
        assert caught.value.task.status in ("queued", "running")
    finally:
        test_mode.tasks.cancel(task.id)


def test_list_paginates_tasks(live: Taskgate, marker: str) -> None:
    first = live.call("token-count", {"text": "start"}, metadata={"marker": marker})
    time.sleep(0.01)  # created_after is strict to the millisecond: all 25 come after
    made = [
        live.call("token-count", {"text": f"task {i}"}, metadata={"marker": marker, "i": str(i)}).id
        for i in range(25)
    ]
    filters: Dict[str, Any] = dict(api="token-count", created_after=first.created_at)

    listed = list(live.tasks.list(limit=10, **filters))
    assert [t.id for t in listed] == list(reversed(made)), "newest first by default"
    assert all(isinstance(t, Task) and t.output is None for t in listed)

    ascending = [t.id for t in live.tasks.list(limit=10, order="asc", **filters)]
    assert ascending == made

    pages = []
    cursor = None
    while True:
        page = live.tasks.list_page(limit=10, order="asc", cursor=cursor, status="succeeded", **filters)
        assert isinstance(page, TaskList)
        pages.append(page)
        if not page.has_more:
            break
        assert page.next_cursor is not None
        cursor = page.next_cursor
    assert [len(p.items) for p in pages] == [10, 10, 5]
    assert [t.id for p in pages for t in p.items] == made
    assert pages[-1].next_cursor is None

    # status takes one value or several.
    several = list(live.tasks.list(limit=100, status=["succeeded", "failed"], **filters))
    assert {t.id for t in several} >= set(made)
    assert list(live.tasks.list(status="cancelled", **filters)) == []


def test_list_filters_by_created_before(live: Taskgate) -> None:
    task = live.call("token-count", {"text": "bounds"})
    before = [t.id for t in live.tasks.list(limit=5, created_before=task.created_at, api="token-count")]
    assert task.id not in before
    after = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=5)
    assert list(live.tasks.list(created_after=after)) == []


def test_live_and_test_tasks_are_separate(live: Taskgate, test_mode: Taskgate) -> None:
    task = test_mode.call("sentiment", {"text": "test mode"})
    with pytest.raises(taskgate.NotFoundError):
        live.tasks.get(task.id)


def test_apis_list_paginates_and_get(live: Taskgate) -> None:
    slugs = [a.slug for a in live.apis.list(limit=2)]
    assert sorted(slugs) == ["chat", "embed", "language-detect", "sentiment", "token-count"]
    pages = []
    cursor = None
    while True:
        page = live.apis.list_page(limit=2, cursor=cursor)
        pages.append(page)
        if not page.has_more:
            break
        cursor = page.next_cursor
    assert [len(p.items) for p in pages] == [2, 2, 1]
    assert all(isinstance(a, ApiSummary) for p in pages for a in p.items)

    kinds = [a.slug for a in live.apis.list(kind="classification")]
    assert sorted(kinds) == ["language-detect", "sentiment"]
    assert [a.slug for a in live.apis.list(q="embed")] == ["embed"]
    assert {a.provider for a in live.apis.list(provider="fake")} == {"fake"}

    api = live.apis.get("sentiment")
    assert isinstance(api, ApiDetails)
    assert api.slug == "sentiment"
    assert api.kind == "classification"
    assert api.input_schema["type"] == "object"
    assert api.limits.timeout_ms > 0
    assert api.pricing.unit in ("call", "1k_tokens")
    assert isinstance(api.examples, list)


def test_restricted_key_reads_its_apis(restricted: Taskgate) -> None:
    assert [a.slug for a in restricted.apis.list()] == ["sentiment"]


def test_stream_yields_deltas_then_the_task(test_mode: Taskgate) -> None:
    task = test_mode.call(
        "chat",
        {"messages": [{"role": "user", "content": "hi"}]},
        mode="async",
        sandbox={"delay_ms": 1500},
    )
    events = list(test_mode.tasks.stream(task.id))
    assert all(isinstance(e, StreamEvent) for e in events)
    assert [e.type for e in events][-1] == "done"
    deltas = [e for e in events if e.type == "delta"]
    assert deltas, "a running chat task streams its text"
    assert all(e.text and e.task is None for e in deltas)
    final = events[-1].task
    assert final is not None and final.id == task.id and final.status == "succeeded"
    assert final.output is not None
    assert "".join(e.text or "" for e in deltas) == final.output["text"]


def test_stream_text_and_stream_object(test_mode: Taskgate) -> None:
    task = test_mode.call(
        "chat", {"messages": [{"role": "user", "content": "hello"}]}, mode="async", sandbox={"delay_ms": 1500}
    )
    text, final = test_mode.tasks.stream_text(task.id)
    assert final.status == "succeeded"
    assert final.output is not None and text == final.output["text"]

    # A finished task's stream is its `done` event at once.
    with test_mode.tasks.stream(task.id) as stream:
        assert stream.until_done().id == task.id
        assert stream.task is not None and stream.task.status == "succeeded"


def test_stream_yields_tool_call_fragments(test_mode: Taskgate) -> None:
    tool = {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
    task = test_mode.call(
        "chat",
        {"messages": [{"role": "user", "content": "weather?"}], "tools": [tool], "tool_choice": {"name": "get_weather"}},
        mode="async",
        sandbox={"delay_ms": 1500},
    )
    events = list(test_mode.tasks.stream(task.id))
    assert events[-1].type == "done"
    final = events[-1].task
    assert final is not None and final.output is not None
    fragments = [e.tool_call for e in events if e.type == "tool_call"]
    assert fragments and all(f is not None for f in fragments)
    calls: Dict[int, Dict[str, Any]] = {}
    for f in fragments:
        assert f is not None
        call = calls.setdefault(f.index, {"id": f.id, "name": f.name, "arguments": ""})
        call["arguments"] += f.arguments_delta
    assert [
        {"id": c["id"], "name": c["name"], "arguments": json.loads(c["arguments"])} for _, c in sorted(calls.items())
    ] == final.output["tool_calls"]


def test_stream_of_a_non_chat_task(live: Taskgate) -> None:
    task = live.call("sentiment", {"text": "fine"})
    events = list(live.tasks.stream(task.id))
    assert [e.type for e in events] == ["done"]


def test_default_environment(base_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The environment has TASKGATE_API_KEY and TASKGATE_BASE_URL (with-server.sh).
    with Taskgate() as tg:
        assert tg.base_url == os.environ["TASKGATE_BASE_URL"].rstrip("/")
        assert tg.timeout == 60.0 and tg.max_retries == 2
        assert tg.call("sentiment", {"text": "hi"}).status == "succeeded"

    # A trailing slash is tolerated.
    with Taskgate(base_url=base_url + "/") as tg:
        assert tg.apis.get("sentiment").slug == "sentiment"

    monkeypatch.delenv("TASKGATE_BASE_URL")
    with Taskgate() as tg:
        assert tg.base_url == "http://127.0.0.1:8080/api/v1"

    monkeypatch.delenv("TASKGATE_API_KEY")
    with pytest.raises(TaskgateError, match="TASKGATE_API_KEY"):
        Taskgate()
    Taskgate(api_key="tg_given").close()


def test_rate_limit_headers_absent_on_an_unlimited_plan(live: Taskgate) -> None:
    live.call("sentiment", {"text": "hi"})
    rl = live.last_rate_limit
    assert rl.limit is None and rl.remaining is None and rl.reset is None
