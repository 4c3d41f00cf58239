"""An incremental reader of `text/event-stream` (the WHATWG Server-Sent Events rules).

Bytes go in as they arrive, in pieces of any size; whole events come out. Lines end
with CRLF, LF or CR; `data` lines of one event are joined with LF; a line starting
with `:` is a comment (the service's `: keep-alive`); a blank line ends the event.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import List, Optional


@dataclass(frozen=True)
class ServerSentEvent:
    event: str
    data: str
    id: Optional[str] = None
    retry: Optional[int] = None


class SSEDecoder:
    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._first = True
        self._event = ""
        self._data: List[str] = []
        self._id: Optional[str] = None
        self._retry: Optional[int] = None
        self._has_fields = False

    def feed(self, chunk: bytes) -> List[ServerSentEvent]:
        """The events completed by this piece of the stream."""
        return self._lines(self._text.decode(chunk, final=False))

    def flush(self) -> List[ServerSentEvent]:
        """The end of the stream: an event not ended by a blank line is dropped, as
        the SSE rules say."""
        events = self._lines(self._text.decode(b"", final=True))
        if self._buffer:
            line, self._buffer = self._buffer.rstrip("\r"), ""
            self._line(line)
        return events

    def _lines(self, text: str) -> List[ServerSentEvent]:
        if self._first and text:
            self._first = False
            if text.startswith("\ufeff"):
                text = text[1:]
        self._buffer += text
        events: List[ServerSentEvent] = []
        start = 0
        buffer = self._buffer
        length = len(buffer)
        i = 0
        while i < length:
            ch = buffer[i]
            if ch == "\n" or ch == "\r":
                if ch == "\r" and i + 1 == length:
                    # A CR at the end of what we have: an LF may follow in the
                    # next piece, so the line waits for it.
                    break
                line = buffer[start:i]
                if ch == "\r" and buffer[i + 1] == "\n":
                    i += 1
                start = i + 1
                event = self._line(line)
                if event is not None:
                    events.append(event)
            i += 1
        self._buffer = buffer[start:]
        return events

    def _line(self, line: str) -> Optional[ServerSentEvent]:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isdigit():
                self._retry = int(value)
        else:
            return None
        self._has_fields = True
        return None

    def _dispatch(self) -> Optional[ServerSentEvent]:
        if not self._has_fields:
            return None
        event = ServerSentEvent(
            event=self._event or "message",
            data="\n".join(self._data),
            id=self._id,
            retry=self._retry,
        )
        self._event = ""
        self._data = []
        self._retry = None
        self._has_fields = False
        return event
