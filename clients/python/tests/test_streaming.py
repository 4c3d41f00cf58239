"""A chat task's stream with every kind of event (reasoning with its signature, an
encrypted block, two tool calls whose fragments interleave), from a stub: the test-mode
server streams text and whole tool calls only."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, List, Tuple

import pytest

from taskgate import (
    APIConnectionError,
    AsyncTaskgate,
    StreamEvent,
    StreamReasoning,
    StreamToolCall,
    Taskgate,
)

from .stubs import TASK, Reply, StubServer

CHAT_TASK: Dict[str, Any] = dict(
    TASK,
    api="chat",
    output={
        "text": "Checking both.",
        "reasoning": "The user wants two cities.",
        "tool_calls": [
            {"id": "call_a", "name": "weather", "arguments": {"city": "Paris"}},
            {"id": "call_b", "name": "time", "arguments": {"city": "Oslo", "tz": True}},
        ],
    },
)

WIRE: List[Tuple[str, Dict[str, Any]]] = [
    ("reasoning", {"text": "The user wants "}),
    ("reasoning", {"text": "two cities."}),
    ("reasoning", {"text": "", "signature": "sig_abc"}),
    ("reasoning", {"text": "", "redacted": "enc_xyz"}),
    ("delta", {"text": "Checking "}),
    ("tool_call", {"index": 0, "id": "call_a", "name": "weather", "arguments_delta": '{"city":'}),
    ("tool_call", {"index": 1, "id": "call_b", "name": "time", "arguments_delta": '{"city": "Oslo",'}),
    ("tool_call", {"index": 0, "arguments_delta": ' "Paris"}'}),
    ("delta", {"text": "both."}),
    ("tool_call", {"index": 1, "arguments_delta": ' "tz": true}'}),
    ("done", CHAT_TASK),
]


def sse_body() -> bytes:
    parts = [": keep-alive\n\n"]
    for name, data in WIRE:
        parts.append(f"event: {name}\ndata: {json.dumps(data)}\n\n")
        if name == "delta":
            # An event this version does not know is skipped.
            parts.append('event: something_new\ndata: {"x": 1}\n\n')
    return "".join(parts).encode()


def script(stub: StubServer) -> None:
    stub.script(Reply(200, None, {"Content-Type": "text/event-stream"}, raw=sse_body()))


def assemble(events: List[StreamEvent]) -> List[Dict[str, Any]]:
    """The tool calls put together by index, as the README shows."""
    calls: Dict[int, Dict[str, Any]] = {}
    for event in events:
        if event.type == "tool_call" and event.tool_call is not None:
            frag = event.tool_call
            call = calls.setdefault(frag.index, {"id": None, "name": None, "arguments": ""})
            if frag.id is not None:
                call["id"] = frag.id
            if frag.name is not None:
                call["name"] = frag.name
            call["arguments"] += frag.arguments_delta
    return [
        {"id": c["id"], "name": c["name"], "arguments": json.loads(c["arguments"])}
        for _, c in sorted(calls.items())
    ]


def check(events: List[StreamEvent]) -> None:
    assert [e.type for e in events] == [name for name, _ in WIRE]
    assert all(isinstance(e, StreamEvent) for e in events)

    reasoning = [e for e in events if e.type == "reasoning"]
    assert all(isinstance(e.reasoning, StreamReasoning) and e.text is None for e in reasoning)
    assert [e.reasoning.text for e in reasoning if e.reasoning] == ["The user wants ", "two cities.", "", ""]
    assert reasoning[2].reasoning == StreamReasoning(text="", signature="sig_abc")
    assert reasoning[3].reasoning == StreamReasoning(text="", redacted="enc_xyz")
    assert reasoning[0].reasoning is not None and reasoning[0].reasoning.signature is None

    fragments = [e.tool_call for e in events if e.type == "tool_call"]
    assert all(isinstance(f, StreamToolCall) for f in fragments)
    assert [(f.index, f.id, f.name) for f in fragments if f] == [
        (0, "call_a", "weather"),
        (1, "call_b", "time"),
        (0, None, None),
        (1, None, None),
    ]
    assert all(e.text is None and e.reasoning is None for e in events if e.type == "tool_call")

    final = events[-1].task
    assert final is not None and final.output is not None
    assert assemble(events) == final.output["tool_calls"]
    assert "".join(e.text or "" for e in events) == final.output["text"], "text is the deltas' only"
    assert all(e.tool_call is None and e.reasoning is None for e in events if e.type == "delta")


def test_stream_reasoning_and_tool_calls(stub: StubServer) -> None:
    script(stub)
    with Taskgate(api_key="tg_stub", base_url=stub.url, max_retries=0) as tg:
        with tg.tasks.stream(CHAT_TASK["id"]) as stream:
            events = list(stream)
            check(events)
            assert stream.text == "Checking both."
            assert stream.reasoning == "The user wants two cities."
            assert stream.task is not None and stream.task.id == CHAT_TASK["id"]

        text, task = tg.tasks.stream_text(CHAT_TASK["id"])
        assert text == "Checking both." and task.output == CHAT_TASK["output"]
    assert stub.seen[0].path == f"/api/v1/tasks/{CHAT_TASK['id']}/stream"
    assert stub.seen[0].headers["accept"] == "text/event-stream"


def test_async_stream_reasoning_and_tool_calls(stub: StubServer) -> None:
    script(stub)

    async def main() -> None:
        async with AsyncTaskgate(api_key="tg_stub", base_url=stub.url, max_retries=0) as tg:
            async with tg.tasks.stream(CHAT_TASK["id"]) as stream:
                events = [e async for e in stream]
                check(events)
                assert stream.text == "Checking both."
                assert stream.reasoning == "The user wants two cities."

            text, task = await tg.tasks.stream_text(CHAT_TASK["id"])
            assert text == "Checking both." and task.status == "succeeded"

    asyncio.run(main())


def test_malformed_tool_call_is_a_connection_error(stub: StubServer) -> None:
    stub.script(
        Reply(
            200,
            None,
            {"Content-Type": "text/event-stream"},
            raw=b'event: tool_call\ndata: {"arguments_delta": "{}"}\n\n',
        )
    )
    with Taskgate(api_key="tg_stub", base_url=stub.url, max_retries=0) as tg:
        with pytest.raises(APIConnectionError, match="unreadable `tool_call` event"):
            list(tg.tasks.stream(CHAT_TASK["id"]))
