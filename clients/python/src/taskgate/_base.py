"""What the sync and async clients share: options, headers, the retry rules, and
turning answers into data or errors. Nothing here does I/O."""

from __future__ import annotations

import datetime as _dt
import email.utils
import json
import os
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple, Union
from urllib.parse import quote

import httpx

from ._errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    TaskgateError,
    error_class_for,
)
from ._version import __version__

DEFAULT_BASE_URL = "http://127.0.0.1:8080/api/v1"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2
USER_AGENT = f"taskgate-python/{__version__}"

# Backoff between attempts: 0.5 s doubling, at most 8 s, up to a quarter less at
# random so that many clients refused together do not come back together.
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
# A Retry-After longer than this is not waited for: the error is raised at once.
MAX_RETRY_AFTER = 60.0

# tasks.wait polls with this backoff.
WAIT_INITIAL_DELAY = 0.25
WAIT_MULTIPLIER = 1.5
WAIT_MAX_DELAY = 2.0

TERMINAL_STATUSES = frozenset({"succeeded", "failed", "cancelled"})

TimeoutTypes = Union[float, int, httpx.Timeout, None]
Timestamp = Union[str, _dt.datetime]


@dataclass(frozen=True)
class RateLimit:
    """The rate-limit headers of the last answer. Each field is None when the answer
    had no such header (unlimited plans send none).

    - `limit`, `remaining`, `reset`: X-RateLimit-Limit, X-RateLimit-Remaining and
      X-RateLimit-Reset (Unix seconds) of the window closest to exhaustion;
    - `policy`: the RateLimit-Policy header as sent (`"minute";q=60;w=60, ...`);
    - `window`, `window_remaining`, `window_reset`: the RateLimit header
      (`"minute";r=17;t=42`): its window's name, `r` and `t` (seconds from now);
    - `retry_after`: the Retry-After header in seconds (on a 429).
    """

    limit: Optional[int] = None
    remaining: Optional[int] = None
    reset: Optional[int] = None
    policy: Optional[str] = None
    window: Optional[str] = None
    window_remaining: Optional[int] = None
    window_reset: Optional[int] = None
    retry_after: Optional[float] = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> "RateLimit":
        window, window_remaining, window_reset = _parse_ratelimit_field(headers.get("ratelimit"))
        return cls(
            limit=_int_header(headers.get("x-ratelimit-limit")),
            remaining=_int_header(headers.get("x-ratelimit-remaining")),
            reset=_int_header(headers.get("x-ratelimit-reset")),
            policy=headers.get("ratelimit-policy"),
            window=window,
            window_remaining=window_remaining,
            window_reset=window_reset,
            retry_after=parse_retry_after(headers),
        )


def _int_header(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def _parse_ratelimit_field(value: Optional[str]) -> Tuple[Optional[str], Optional[int], Optional[int]]:
    """`"minute";r=17;t=42` -> ("minute", 17, 42)."""
    if not value:
        return None, None, None
    first = value.split(",")[0]
    parts = [p.strip() for p in first.split(";")]
    name = parts[0].strip('"') or None
    params: Dict[str, Optional[int]] = {}
    for part in parts[1:]:
        key, _, raw = part.partition("=")
        params[key.strip()] = _int_header(raw)
    return name, params.get("r"), params.get("t")


def parse_retry_after(headers: Mapping[str, str]) -> Optional[float]:
    """Retry-After in seconds: a number of seconds, or an HTTP date."""
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.timezone.utc)
        seconds = when.timestamp() - time.time()
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return None
    return max(seconds, 0.0)


def resolve_api_key(api_key: Optional[str]) -> str:
    key = api_key if api_key is not None else os.environ.get("TASKGATE_API_KEY")
    if not key:
        raise TaskgateError(
            "The api_key client option must be set either by passing api_key to the "
            "client or by setting the TASKGATE_API_KEY environment variable"
        )
    return key


def resolve_base_url(base_url: Optional[str]) -> str:
    url = base_url or os.environ.get("TASKGATE_BASE_URL") or DEFAULT_BASE_URL
    return url.rstrip("/")


def make_timeout(timeout: TimeoutTypes) -> httpx.Timeout:
    if isinstance(timeout, httpx.Timeout):
        return timeout
    return httpx.Timeout(timeout)


def default_headers(api_key: str) -> Dict[str, str]:
    return {
        "Authorization": f"Bearer {api_key}",
        "User-Agent": USER_AGENT,
        "Accept": "application/json",
    }


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


def path_segment(value: str) -> str:
    if not isinstance(value, str) or not value:
        raise TaskgateError(f"expected a non-empty string id, got {value!r}")
    return quote(value, safe="")


def call_body(
    api: str,
    input: Any,
    *,
    mode: Optional[str],
    metadata: Optional[Mapping[str, str]],
    timeout_ms: Optional[int],
    sandbox: Optional[Any],
    webhook: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    body: Dict[str, Any] = {"api": api, "input": _plain(input)}
    if mode is not None:
        body["mode"] = mode
    if metadata is not None:
        body["metadata"] = dict(metadata)
    if timeout_ms is not None:
        body["timeout_ms"] = timeout_ms
    if sandbox is not None:
        body["sandbox"] = _plain(sandbox)
    if webhook is not None:
        body["webhook"] = dict(webhook)
    return body


def _plain(value: Any) -> Any:
    """A model (anything with to_dict) becomes its dict; the rest goes as it is."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return value


def timestamp(value: Optional[Timestamp]) -> Optional[str]:
    """A datetime as RFC 3339 (naive means UTC); a string goes as it is."""
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.timezone.utc)
    value = value.astimezone(_dt.timezone.utc)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def query(**params: Any) -> Dict[str, str]:
    """Query parameters without the unset ones; lists become comma-separated."""
    out: Dict[str, str] = {}
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, (list, tuple, set, frozenset)):
            out[name] = ",".join(str(v) for v in _ordered(value))
        elif isinstance(value, _dt.datetime):
            out[name] = timestamp(value) or ""
        else:
            out[name] = str(value)
    return out


def _ordered(values: Iterable[Any]) -> Iterable[Any]:
    if isinstance(values, (set, frozenset)):
        return sorted(values, key=str)
    return values


def is_retryable_status(status: int, code: Optional[str]) -> bool:
    if status == 408 or status == 429 or status >= 500:
        return True
    return status == 409 and code == "idempotency_in_progress"


def backoff_delay(attempt: int) -> float:
    """The pause before retry number `attempt + 1` when the answer named none."""
    delay: float = min(INITIAL_RETRY_DELAY * float(2**attempt), MAX_RETRY_DELAY)
    return delay * (1 - 0.25 * random.random())


def retry_delay(attempt: int, retry_after: Optional[float]) -> Optional[float]:
    """The pause before the next attempt, or None when the answer asks for a wait
    longer than this client takes (the error is raised at once)."""
    if retry_after is not None:
        if retry_after > MAX_RETRY_AFTER:
            return None
        return retry_after
    return backoff_delay(attempt)


def connection_error(exc: Exception) -> APIConnectionError:
    if isinstance(exc, httpx.TimeoutException):
        return APITimeoutError(f"Request timed out: {exc}" if str(exc) else "Request timed out.")
    return APIConnectionError(f"Connection error: {exc}" if str(exc) else "Connection error.")


def _content(response: httpx.Response) -> bytes:
    try:
        return response.content
    except httpx.ResponseNotRead:  # the connection broke while the body was read
        return b""


def _json_body(response: httpx.Response) -> Any:
    try:
        return json.loads(_content(response))
    except ValueError:
        return None


def status_error(response: httpx.Response) -> APIStatusError:
    """The error an answer with an error status stands for."""
    body = _json_body(response)
    error: Dict[str, Any] = {}
    meta: Dict[str, Any] = {}
    if isinstance(body, dict):
        if isinstance(body.get("error"), dict):
            error = body["error"]
        if isinstance(body.get("meta"), dict):
            meta = body["meta"]
    message = error.get("message")
    if not isinstance(message, str) or not message:
        text = _content(response).decode("utf-8", "replace").strip() if body is None else ""
        message = text[:500] if text else f"HTTP {response.status_code}"
    details = error.get("details")
    cls = error_class_for(response.status_code)
    return cls(
        message,
        status=response.status_code,
        code=_str_or_none(error.get("code")),
        type=_str_or_none(error.get("type")),
        param=_str_or_none(error.get("param")),
        request_id=_str_or_none(meta.get("request_id")) or response.headers.get("x-request-id"),
        details=details if isinstance(details, list) else None,
        retry_after=parse_retry_after(response.headers),
        body=body,
        headers=response.headers,
    )


def _str_or_none(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def envelope_data(response: httpx.Response) -> Any:
    """The `data` of a successful answer's envelope."""
    body = _json_body(response)
    if not isinstance(body, dict) or "data" not in body:
        raise APIError(
            "The service's answer is not the Taskgate envelope "
            f"(HTTP {response.status_code}, {response.headers.get('content-type', 'no content type')})",
            status=response.status_code,
            request_id=response.headers.get("x-request-id"),
            body=body,
            headers=response.headers,
        )
    return body["data"]


def wait_timeout_message(task_id: str, timeout: Optional[float], status: Optional[str]) -> str:
    return f"task {task_id} did not end within {timeout} s (status {status})"
