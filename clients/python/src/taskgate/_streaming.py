"""The events of GET /tasks/{id}/stream as the client hands them out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

from ._errors import APIConnectionError
from ._models import StreamDelta, StreamEventType, StreamReasoning, StreamToolCall, Task
from ._sse import ServerSentEvent

__all__ = ["StreamEvent"]


@dataclass(frozen=True)
class StreamEvent:
    """One event of a task's stream, in the order the provider generated it:

    - `type` "delta": the next piece of the answer's `text`;
    - `type` "reasoning": the next piece of the model's reasoning, `reasoning`
      (its `text`; or, with `text` "", the provider's `signature` over the reasoning
      so far, or an encrypted block, `redacted`);
    - `type` "tool_call": a fragment of a tool call, `tool_call` (its `index`; `id`
      and `name` on an index's first fragment only; an index's `arguments_delta`s
      joined are the call's arguments as JSON text);
    - `type` "done" (the last event): the final `task`.

    `text` is set on "delta" events only, so that the text joined is the answer's."""

    type: StreamEventType
    text: Optional[str] = None
    task: Optional[Task] = None
    reasoning: Optional[StreamReasoning] = None
    tool_call: Optional[StreamToolCall] = None


_KNOWN = ("delta", "reasoning", "tool_call", "done")


def to_stream_event(sse: ServerSentEvent) -> Optional[StreamEvent]:
    """The client's event for a wire event; None for events this version does not
    know (they are skipped, so that the service may add some)."""
    if sse.event not in _KNOWN:
        return None
    try:
        data = json.loads(sse.data)
    except ValueError as exc:
        raise APIConnectionError(f"unreadable `{sse.event}` event in the task's stream: {exc}") from exc
    if not isinstance(data, dict):
        raise APIConnectionError(f"unreadable `{sse.event}` event in the task's stream: not an object")
    if sse.event == "delta":
        text = StreamDelta.from_dict(data).text
        return StreamEvent(type="delta", text=text if isinstance(text, str) else "")
    if sse.event == "reasoning":
        if not isinstance(data.get("text"), str):
            data = dict(data, text="")
        return StreamEvent(type="reasoning", reasoning=StreamReasoning.from_dict(data))
    if sse.event == "tool_call":
        index = data.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise APIConnectionError("unreadable `tool_call` event in the task's stream: no `index`")
        if not isinstance(data.get("arguments_delta"), str):
            data = dict(data, arguments_delta="")
        return StreamEvent(type="tool_call", tool_call=StreamToolCall.from_dict(data))
    return StreamEvent(type="done", task=Task.from_dict(data))
