"""The asynchronous client, `AsyncTaskgate`: the surface of `Taskgate`, awaited."""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Any, AsyncGenerator, AsyncIterator, List, Mapping, Optional, Sequence, Tuple, Type, Union

import httpx

from . import _base
from ._base import RateLimit, Timestamp, TimeoutTypes
from ._errors import APIConnectionError, WaitTimeoutError
from ._models import ApiDetails, ApiList, ApiSummary, Sandbox, Task, TaskDetails, TaskList
from ._sse import SSEDecoder
from ._streaming import StreamEvent, to_stream_event
from ._webhook_resources import AsyncWebhookDeliveries, AsyncWebhookEndpoints, AsyncWebhooks

__all__ = ["AsyncTaskgate", "AsyncTasks", "AsyncApis", "AsyncTaskStream"]


class AsyncTaskgate:
    """An asyncio client of the Taskgate REST API; the options are those of
    `Taskgate` (`http_client` is an `httpx.AsyncClient`)."""

    api_key: str
    base_url: str
    timeout: TimeoutTypes
    max_retries: int
    last_rate_limit: RateLimit
    last_request_id: Optional[str]
    tasks: "AsyncTasks"
    apis: "AsyncApis"
    webhook_endpoints: AsyncWebhookEndpoints
    webhook_deliveries: AsyncWebhookDeliveries
    webhooks: AsyncWebhooks

    def __init__(
        self,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        timeout: TimeoutTypes = _base.DEFAULT_TIMEOUT,
        max_retries: int = _base.DEFAULT_MAX_RETRIES,
        http_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        self.api_key = _base.resolve_api_key(api_key)
        self.base_url = _base.resolve_base_url(base_url)
        self.timeout = timeout
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        self.max_retries = max_retries
        self._owns_client = http_client is None
        self._client = http_client if http_client is not None else httpx.AsyncClient()
        self.last_rate_limit = RateLimit()
        self.last_request_id = None
        self.tasks = AsyncTasks(self)
        self.apis = AsyncApis(self)
        self.webhook_endpoints = AsyncWebhookEndpoints(self)
        self.webhook_deliveries = AsyncWebhookDeliveries(self)
        self.webhooks = AsyncWebhooks(self)

    async def call(
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
        """Creates and executes a task (POST /call); see `Taskgate.call`."""
        body = _base.call_body(
            api, input, mode=mode, metadata=metadata, timeout_ms=timeout_ms, sandbox=sandbox, webhook=webhook
        )
        key = idempotency_key
        if key is None and self.max_retries > 0:
            key = _base.new_idempotency_key()
        headers = {"Idempotency-Key": key} if key is not None else None
        data = await self._request("POST", "/call", json=body, headers=headers, retryable=key is not None)
        return Task.from_dict(data)

    async def close(self) -> None:
        """Closes the connections (not those of an `http_client` you passed)."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> "AsyncTaskgate":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncTaskgate(base_url={self.base_url!r})"

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Optional[Mapping[str, str]] = None,
        json: Optional[Any] = None,
        headers: Optional[Mapping[str, str]] = None,
        retryable: bool = True,
    ) -> Any:
        response = await self._send(
            method, path, params=params, json=json, headers=headers, retryable=retryable
        )
        return _base.envelope_data(response)

    async def _send(
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
                response = await self._client.send(request, stream=stream)
            except httpx.TransportError as exc:
                if retryable and attempt < self.max_retries:
                    await asyncio.sleep(_base.backoff_delay(attempt))
                    attempt += 1
                    continue
                raise _base.connection_error(exc) from exc
            self._record(response)
            if response.is_success:
                if not stream:
                    await response.aread()
                return response
            try:
                await response.aread()
            except httpx.TransportError:
                pass
            finally:
                await response.aclose()
            error = _base.status_error(response)
            if (
                retryable
                and attempt < self.max_retries
                and _base.is_retryable_status(response.status_code, error.code)
            ):
                delay = _base.retry_delay(attempt, error.retry_after)
                if delay is not None:
                    await asyncio.sleep(delay)
                    attempt += 1
                    continue
            raise error

    def _record(self, response: httpx.Response) -> None:
        self.last_rate_limit = RateLimit.from_headers(response.headers)
        self.last_request_id = response.headers.get("x-request-id")


class AsyncTasks:
    """`tg.tasks` of the async client."""

    def __init__(self, client: AsyncTaskgate) -> None:
        self._client = client

    async def get(self, task_id: str) -> TaskDetails:
        data = await self._client._request("GET", f"/tasks/{_base.path_segment(task_id)}")
        return TaskDetails.from_dict(data)

    async def cancel(self, task_id: str) -> Task:
        data = await self._client._request("POST", f"/tasks/{_base.path_segment(task_id)}/cancel")
        return Task.from_dict(data)

    async def wait(self, task_id: str, timeout: Optional[float] = 60.0) -> Task:
        path = f"/call/{_base.path_segment(task_id)}"
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = _base.WAIT_INITIAL_DELAY
        while True:
            task = Task.from_dict(await self._client._request("GET", path))
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
            await asyncio.sleep(pause)
            delay = min(delay * _base.WAIT_MULTIPLIER, _base.WAIT_MAX_DELAY)

    async def list(
        self,
        limit: Optional[int] = None,
        api: Optional[str] = None,
        status: Union[str, Sequence[str], None] = None,
        order: Optional[str] = None,
        created_after: Optional[Timestamp] = None,
        created_before: Optional[Timestamp] = None,
        cursor: Optional[str] = None,
    ) -> AsyncIterator[Task]:
        """Every task that matches, page after page, as an async iterator."""
        while True:
            page = await self.list_page(
                limit=limit,
                api=api,
                status=status,
                order=order,
                created_after=created_after,
                created_before=created_before,
                cursor=cursor,
            )
            for item in page.items:
                yield item
            if not page.has_more or not page.next_cursor:
                return
            cursor = page.next_cursor

    async def list_page(
        self,
        limit: Optional[int] = None,
        api: Optional[str] = None,
        status: Union[str, Sequence[str], None] = None,
        order: Optional[str] = None,
        created_after: Optional[Timestamp] = None,
        created_before: Optional[Timestamp] = None,
        cursor: Optional[str] = None,
    ) -> TaskList:
        params = _base.query(
            limit=limit,
            api=api,
            status=status,
            order=order,
            created_after=_base.timestamp(created_after),
            created_before=_base.timestamp(created_before),
            cursor=cursor,
        )
        return TaskList.from_dict(await self._client._request("GET", "/tasks", params=params))

    def stream(self, task_id: str) -> "AsyncTaskStream":
        """`async for event in tg.tasks.stream(id)`: the deltas (and a chat task's
        reasoning and tool-call fragments) in order, then "done"."""
        return AsyncTaskStream(self._client, task_id)

    async def stream_text(self, task_id: str) -> Tuple[str, Task]:
        async with self.stream(task_id) as stream:
            task = await stream.until_done()
            return stream.text, task


class AsyncTaskStream:
    """The async form of `TaskStream`."""

    task_id: str
    task: Optional[Task]

    def __init__(self, client: AsyncTaskgate, task_id: str) -> None:
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

    def __aiter__(self) -> "AsyncTaskStream":
        return self

    async def __anext__(self) -> StreamEvent:
        return await self._events.__anext__()

    async def until_done(self) -> Task:
        async for _ in self:
            pass
        if self.task is None:
            raise APIConnectionError("the task's stream has already been closed")
        return self.task

    async def close(self) -> None:
        await self._events.aclose()
        if self._response is not None:
            await self._response.aclose()

    async def __aenter__(self) -> "AsyncTaskStream":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()

    async def _read(self) -> AsyncGenerator[StreamEvent, None]:
        response = await self._client._send(
            "GET",
            f"/tasks/{_base.path_segment(self.task_id)}/stream",
            headers={"Accept": "text/event-stream"},
            stream=True,
        )
        self._response = response
        decoder = SSEDecoder()
        try:
            try:
                async for chunk in response.aiter_bytes():
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
            await response.aclose()

    def _take(self, event: StreamEvent) -> None:
        if event.type == "delta" and event.text:
            self._parts.append(event.text)
        elif event.type == "reasoning" and event.reasoning is not None and event.reasoning.text:
            self._reasoning.append(event.reasoning.text)
        elif event.type == "done":
            self.task = event.task


class AsyncApis:
    """`tg.apis` of the async client."""

    def __init__(self, client: AsyncTaskgate) -> None:
        self._client = client

    async def get(self, slug: str) -> ApiDetails:
        data = await self._client._request("GET", f"/apis/{_base.path_segment(slug)}")
        return ApiDetails.from_dict(data)

    async def list(
        self,
        limit: Optional[int] = None,
        kind: Optional[str] = None,
        provider: Optional[str] = None,
        q: Optional[str] = None,
        cursor: Optional[str] = None,
    ) -> AsyncIterator[ApiSummary]:
        while True:
            page = await self.list_page(limit=limit, kind=kind, provider=provider, q=q, cursor=cursor)
            for item in page.items:
                yield item
            if not page.has_more or not page.next_cursor:
                return
            cursor = page.next_cursor

    async def list_page(
        self,
        limit: Optional[int] = None,
        kind: Optional[str] = None,
        provider: Optional[str] = None,
        q: Optional[str] = None,
        cursor: Optional[str] = None,
    ) -> ApiList:
        params = _base.query(limit=limit, kind=kind, provider=provider, q=q, cursor=cursor)
        return ApiList.from_dict(await self._client._request("GET", "/apis", params=params))
