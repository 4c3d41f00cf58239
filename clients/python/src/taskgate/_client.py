"""The synchronous client, `Taskgate`."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, Generator, Iterator, List, Mapping, Optional, Sequence, Tuple, Type, Union

import httpx

from . import _base
from ._base import RateLimit, Timestamp, TimeoutTypes
from ._errors import APIConnectionError, WaitTimeoutError
from ._models import ApiDetails, ApiList, ApiSummary, Sandbox, Task, TaskDetails, TaskList
from ._sse import SSEDecoder
from ._streaming import StreamEvent, to_stream_event
from ._webhook_resources import WebhookDeliveries, WebhookEndpoints, Webhooks

__all__ = ["Taskgate", "Tasks", "Apis", "TaskStream"]


class Taskgate:
    """A client of the Taskgate REST API.

    `api_key` defaults to the environment variable TASKGATE_API_KEY (without either,
    `TaskgateError` is raised here), `base_url` to TASKGATE_BASE_URL, else
    http://127.0.0.1:8080/api/v1. `timeout` is per request in seconds (or an
    `httpx.Timeout`); `max_retries` is how many times a failed request is retried.
    `http_client` is an `httpx.Client` of your own (its life is yours: `close()`
    leaves it open).
    """

    api_key: str
    base_url: str
    timeout: TimeoutTypes
    max_retries: int
    last_rate_limit: RateLimit
    last_request_id: Optional[str]
    tasks: "Tasks"
    apis: "Apis"
    webhook_endpoints: WebhookEndpoints
    webhook_deliveries: WebhookDeliveries
    webhooks: Webhooks

    def __init__(
        self,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        timeout: TimeoutTypes = _base.DEFAULT_TIMEOUT,
        max_retries: int = _base.DEFAULT_MAX_RETRIES,
        http_client: Optional[httpx.Client] = None,
    ) -> None:
        self.api_key = _base.resolve_api_key(api_key)
        self.base_url = _base.resolve_base_url(base_url)
        self.timeout = timeout
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        self.max_retries = max_retries
        self._owns_client = http_client is None
        self._client = http_client if http_client is not None else httpx.Client()
        self.last_rate_limit = RateLimit()
        self.last_request_id = None
        self.tasks = Tasks(self)
        self.apis = Apis(self)
        self.webhook_endpoints = WebhookEndpoints(self)
        self.webhook_deliveries = WebhookDeliveries(self)
        self.webhooks = Webhooks(self)

    # -- the API -----------------------------------------------------------------

    def call(
        self,
        api: str,
        input: Any,
        *,
        mode: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
        timeout_ms: Optional[int] = None,
        idempotency_key: Optional[str] = None,
        sandbox: Union[Sandbox, Mapping[str, Any], None] = None,
        webhook: Optional[Mapping[str, Any]] = None,
    ) -> Task:
        """Creates and executes a task (POST /call) and returns it: finished (`mode`
        "sync", the default, unless the service's sync wait ran out) or as it stands
        ("async"). Retried only under an Idempotency-Key: `idempotency_key`, or one
        made for this call when retries are on."""
        body = _base.call_body(
            api, input, mode=mode, metadata=metadata, timeout_ms=timeout_ms, sandbox=sandbox, webhook=webhook
        )
        key = idempotency_key
        if key is None and self.max_retries > 0:
            key = _base.new_idempotency_key()
        headers = {"Idempotency-Key": key} if key is not None else None
        data = self._request("POST", "/call", json=body, headers=headers, retryable=key is not None)
        return Task.from_dict(data)

    # -- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        """Closes the connections (not those of an `http_client` you passed)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> "Taskgate":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Taskgate(base_url={self.base_url!r})"

    # -- transport ---------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Optional[Mapping[str, str]] = None,
        json: Optional[Any] = None,
        headers: Optional[Mapping[str, str]] = None,
        retryable: bool = True,
    ) -> Any:
        response = self._send(method, path, params=params, json=json, headers=headers, retryable=retryable)
        return _base.envelope_data(response)

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Optional[Mapping[str, str]] = None,
        json: Optional[Any] = None,
        headers: Optional[Mapping[str, str]] = None,
        retryable: bool = True,
        stream: bool = False,
    ) -> httpx.Response:
        """Sends a request, retrying what may be retried; returns a successful answer
        (for `stream`, still open) or raises."""
        all_headers = _base.default_headers(self.api_key)
        if headers:
            all_headers.update(headers)
        attempt = 0
        while True:
            request = self._client.build_request(
                method,
                self.base_url + path,
                params=params,
                json=json,
                headers=all_headers,
                timeout=_base.make_timeout(self.timeout),
            )
            try:
                response = self._client.send(request, stream=stream)
            except httpx.TransportError as exc:
                if retryable and attempt < self.max_retries:
                    time.sleep(_base.backoff_delay(attempt))
                    attempt += 1
                    continue
                raise _base.connection_error(exc) from exc
            self._record(response)
            if response.is_success:
                if not stream:
                    response.read()
                return response
            try:
                response.read()
            except httpx.TransportError:
                pass
            finally:
                response.close()
            error = _base.status_error(response)
            if (
                retryable
                and attempt < self.max_retries
                and _base.is_retryable_status(response.status_code, error.code)
            ):
                delay = _base.retry_delay(attempt, error.retry_after)
                if delay is not None:
                    time.sleep(delay)
                    attempt += 1
                    continue
            raise error

    def _record(self, response: httpx.Response) -> None:
        self.last_rate_limit = RateLimit.from_headers(response.headers)
        self.last_request_id = response.headers.get("x-request-id")


class Tasks:
    """`tg.tasks`: read, list, cancel, wait for and stream tasks."""

    def __init__(self, client: Taskgate) -> None:
        self._client = client

    def get(self, task_id: str) -> TaskDetails:
        """The task with its input, events and attempts (GET /tasks/{id})."""
        data = self._client._request("GET", f"/tasks/{_base.path_segment(task_id)}")
        return TaskDetails.from_dict(data)

    def cancel(self, task_id: str) -> Task:
        """Cancels a queued or running task (a cancelled one is returned unchanged; a
        finished one is `ConflictError`)."""
        data = self._client._request("POST", f"/tasks/{_base.path_segment(task_id)}/cancel")
        return Task.from_dict(data)

    def wait(self, task_id: str, timeout: Optional[float] = 60.0) -> Task:
        """Polls the task (GET /call/{id}: 0.25 s, then 1.5 times longer each time, at
        most 2 s apart) until it has ended, and returns it. `WaitTimeoutError` when it
        has not ended after `timeout` seconds (None: no limit)."""
        path = f"/call/{_base.path_segment(task_id)}"
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = _base.WAIT_INITIAL_DELAY
        while True:
            task = Task.from_dict(self._client._request("GET", path))
            if task.status in _base.TERMINAL_STATUSES:
                return task
            pause = delay
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimeoutError(
                        _base.wait_timeout_message(task_id, timeout, task.status),
                        task_id=task_id,
                        task=task,
                    )
                pause = min(pause, remaining)
            time.sleep(pause)
            delay = min(delay * _base.WAIT_MULTIPLIER, _base.WAIT_MAX_DELAY)

    def list(
        self,
        limit: Optional[int] = None,
        api: Optional[str] = None,
        status: Union[str, Sequence[str], None] = None,
        order: Optional[str] = None,
        created_after: Optional[Timestamp] = None,
        created_before: Optional[Timestamp] = None,
        cursor: Optional[str] = None,
    ) -> Iterator[Task]:
        """Every task that matches, page after page (`limit` is the page size), as a
        generator. `status` is one status or several; `order` "desc" (newest first,
        the default) or "asc"; `created_after`/`created_before` are RFC 3339 strings
        or datetimes (strict bounds). List items carry no `output`."""
        while True:
            page = self.list_page(
                limit=limit,
                api=api,
                status=status,
                order=order,
                created_after=created_after,
                created_before=created_before,
                cursor=cursor,
            )
            yield from page.items
            if not page.has_more or not page.next_cursor:
                return
            cursor = page.next_cursor

    def list_page(
        self,
        limit: Optional[int] = None,
        api: Optional[str] = None,
        status: Union[str, Sequence[str], None] = None,
        order: Optional[str] = None,
        created_after: Optional[Timestamp] = None,
        created_before: Optional[Timestamp] = None,
        cursor: Optional[str] = None,
    ) -> TaskList:
        """One page of GET /tasks: `items`, `has_more`, `next_cursor`."""
        params = _base.query(
            limit=limit,
            api=api,
            status=status,
            order=order,
            created_after=_base.timestamp(created_after),
            created_before=_base.timestamp(created_before),
            cursor=cursor,
        )
        return TaskList.from_dict(self._client._request("GET", "/tasks", params=params))

    def stream(self, task_id: str) -> "TaskStream":
        """Follows the task's output (GET /tasks/{id}/stream): iterate it for
        `StreamEvent`s, the deltas (and a chat task's reasoning and tool-call
        fragments) in order and then "done" with the final task."""
        return TaskStream(self._client, task_id)

    def stream_text(self, task_id: str) -> Tuple[str, Task]:
        """Reads the task's stream to its end: the whole text and the final task."""
        with self.stream(task_id) as stream:
            task = stream.until_done()
            return stream.text, task


class TaskStream:
    """The events of one task's stream, read as they come. Iterate it (once) for
    `StreamEvent`s; `text` is the text received so far, `reasoning` the reasoning
    text received so far, `task` the final task once "done" has arrived. The request
    is sent when the iteration starts; close the stream (or use it in a `with`) to
    stop early."""

    task_id: str
    task: Optional[Task]

    def __init__(self, client: Taskgate, task_id: str) -> None:
        self.task_id = task_id
        self.task = None
        self._client = client
        self._parts: List[str] = []
        self._reasoning: List[str] = []
        self._response: Optional[httpx.Response] = None
        self._events = self._read()

    @property
    def text(self) -> str:
        return "".join(self._parts)

    @property
    def reasoning(self) -> str:
        """The reasoning text received so far (the `reasoning` events' texts joined)."""
        return "".join(self._reasoning)

    def __iter__(self) -> "TaskStream":
        return self

    def __next__(self) -> StreamEvent:
        return next(self._events)

    def until_done(self) -> Task:
        """Reads the rest of the stream and returns the final task."""
        for _ in self:
            pass
        if self.task is None:
            raise APIConnectionError("the task's stream has already been closed")
        return self.task

    def close(self) -> None:
        self._events.close()
        if self._response is not None:
            self._response.close()

    def __enter__(self) -> "TaskStream":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def _read(self) -> Generator[StreamEvent, None, None]:
        response = self._client._send(
            "GET",
            f"/tasks/{_base.path_segment(self.task_id)}/stream",
            headers={"Accept": "text/event-stream"},
            stream=True,
        )
        self._response = response
        decoder = SSEDecoder()
        try:
            try:
                for chunk in response.iter_bytes():
                    for sse in decoder.feed(chunk):
                        event = to_stream_event(sse)
                        if event is None:
                            continue
                        self._take(event)
                        yield event
                        if event.type == "done":
                            return
                for sse in decoder.flush():
                    event = to_stream_event(sse)
                    if event is not None:
                        self._take(event)
                        yield event
                        if event.type == "done":
                            return
            except httpx.TransportError as exc:
                raise _base.connection_error(exc) from exc
            raise APIConnectionError(f"the stream of task {self.task_id} ended before its `done` event")
        finally:
            response.close()

    def _take(self, event: StreamEvent) -> None:
        if event.type == "delta" and event.text:
            self._parts.append(event.text)
        elif event.type == "reasoning" and event.reasoning is not None and event.reasoning.text:
            self._reasoning.append(event.reasoning.text)
        elif event.type == "done":
            self.task = event.task


class Apis:
    """`tg.apis`: the catalog of APIs this key may call."""

    def __init__(self, client: Taskgate) -> None:
        self._client = client

    def get(self, slug: str) -> ApiDetails:
        """One API with its input and output schemas, examples and limits."""
        data = self._client._request("GET", f"/apis/{_base.path_segment(slug)}")
        return ApiDetails.from_dict(data)

    def list(
        self,
        limit: Optional[int] = None,
        kind: Optional[str] = None,
        provider: Optional[str] = None,
        q: Optional[str] = None,
        cursor: Optional[str] = None,
    ) -> Iterator[ApiSummary]:
        """Every API that matches, page after page (`limit` is the page size)."""
        while True:
            page = self.list_page(limit=limit, kind=kind, provider=provider, q=q, cursor=cursor)
            yield from page.items
            if not page.has_more or not page.next_cursor:
                return
            cursor = page.next_cursor

    def list_page(
        self,
        limit: Optional[int] = None,
        kind: Optional[str] = None,
        provider: Optional[str] = None,
        q: Optional[str] = None,
        cursor: Optional[str] = None,
    ) -> ApiList:
        """One page of GET /apis: `items`, `has_more`, `next_cursor`."""
        params = _base.query(limit=limit, kind=kind, provider=provider, q=q, cursor=cursor)
        return ApiList.from_dict(self._client._request("GET", "/apis", params=params))

