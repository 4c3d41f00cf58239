"""The events of GET /tasks/{id}/stream as the client hands them out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

from ._errors import APIConnectionError
from ._models import StreamDelta, StreamEventType, Task
from ._sse import ServerSentEvent

__all__ = ["StreamEvent"]


@dataclass(frozen=True)
class StreamEvent:
    """One event of a task's stream: `type` "delta" with the next piece of `text`, or
    "done" (the last event) with the final `task`."""

    type: StreamEventType
    text: Optional[str] = None
    task: Optional[Task] = None


def to_stream_event(sse: ServerSentEvent) -> Optional[StreamEvent]:
    """The client's event for a wire event; None for events this version does not
    know (they are skipped, so that the service may add some)."""
    if sse.event not in ("delta", "done"):
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
    return StreamEvent(type="done", task=Task.from_dict(data))
