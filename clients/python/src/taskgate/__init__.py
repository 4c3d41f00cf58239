"""Taskgate: one REST interface to many AI services. The official Python client.

    from taskgate import Taskgate

    tg = Taskgate()  # TASKGATE_API_KEY, TASKGATE_BASE_URL
    t = tg.call("sentiment", {"text": "hi"}, mode="async")
    t = tg.tasks.wait(t.id, timeout=60)
    for t in tg.tasks.list(limit=10):
        print(t.id, t.status)
"""

from ._async_client import AsyncApis, AsyncTaskgate, AsyncTasks, AsyncTaskStream
from ._base import DEFAULT_BASE_URL, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, RateLimit
from ._client import Apis, Taskgate, Tasks, TaskStream
from ._errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    TaskgateError,
    UnprocessableEntityError,
    WaitTimeoutError,
)
from ._models import (
    ApiDetails,
    ApiExample,
    ApiLimits,
    ApiList,
    ApiSummary,
    ErrorEnvelope,
    ErrorObject,
    Meta,
    Pricing,
    Sandbox,
    SandboxErrorCode,
    SandboxOutcome,
    StreamDelta,
    StreamEventType,
    Task,
    TaskAttempt,
    TaskDetails,
    TaskError,
    TaskEvent,
    TaskList,
    TaskStatus,
    Usage,
)
from ._streaming import StreamEvent
from ._version import __version__

__all__ = [
    "__version__",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    # clients
    "Taskgate",
    "AsyncTaskgate",
    "Tasks",
    "AsyncTasks",
    "Apis",
    "AsyncApis",
    "TaskStream",
    "AsyncTaskStream",
    "StreamEvent",
    "RateLimit",
    # errors
    "TaskgateError",
    "APIError",
    "APIStatusError",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ConflictError",
    "UnprocessableEntityError",
    "RateLimitError",
    "InternalServerError",
    "APIConnectionError",
    "APITimeoutError",
    "WaitTimeoutError",
    # models
    "ApiDetails",
    "ApiExample",
    "ApiLimits",
    "ApiList",
    "ApiSummary",
    "ErrorEnvelope",
    "ErrorObject",
    "Meta",
    "Pricing",
    "Sandbox",
    "SandboxErrorCode",
    "SandboxOutcome",
    "StreamDelta",
    "StreamEventType",
    "Task",
    "TaskAttempt",
    "TaskDetails",
    "TaskError",
    "TaskEvent",
    "TaskList",
    "TaskStatus",
    "Usage",
]
