"""The errors the client raises: one class per failure, all under `TaskgateError`.

An answer with an error status becomes the class of its status (the table of the
contract's §6); a request that got no answer becomes `APIConnectionError`.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Type

__all__ = [
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
]


class TaskgateError(Exception):
    """The base of every error this library raises.

    Raised as itself for a client that cannot be built (no API key) and for a stream
    that cannot be read; every other failure is one of its subclasses.
    """

    message: str

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class APIError(TaskgateError):
    """A request that failed: with an answer (`APIStatusError`) or without one
    (`APIConnectionError`). Every field is present; those the failure has no value for
    are None."""

    status: Optional[int]
    code: Optional[str]
    type: Optional[str]
    param: Optional[str]
    request_id: Optional[str]
    details: Optional[List[Dict[str, Any]]]
    retry_after: Optional[float]
    body: Optional[Any]
    headers: Dict[str, str]

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        code: Optional[str] = None,
        type: Optional[str] = None,
        param: Optional[str] = None,
        request_id: Optional[str] = None,
        details: Optional[List[Dict[str, Any]]] = None,
        retry_after: Optional[float] = None,
        body: Optional[Any] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.type = type
        self.param = param
        self.request_id = request_id
        self.details = details
        self.retry_after = retry_after
        self.body = body
        self.headers = dict(headers or {})

    @property
    def status_code(self) -> Optional[int]:
        """The HTTP status, under the name the OpenAI SDKs use."""
        return self.status

    def __str__(self) -> str:
        parts = []
        if self.status is not None:
            parts.append(str(self.status))
        if self.code:
            parts.append(self.code)
        prefix = " ".join(parts)
        text = f"{prefix}: {self.message}" if prefix else self.message
        if self.request_id:
            text += f" (request_id {self.request_id})"
        return text

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(status={self.status!r}, code={self.code!r}, "
            f"message={self.message!r}, request_id={self.request_id!r})"
        )


class APIStatusError(APIError):
    """The service answered with an error status. Statuses without a class of their
    own (405, 408, 413, ...) are raised as this class."""

    status: int

    def __init__(self, message: str, *, status: int, **kwargs: Any) -> None:
        super().__init__(message, status=status, **kwargs)


class BadRequestError(APIStatusError):
    """400: invalid JSON, an unknown field, an input that breaks the API's schema, a
    bad query parameter."""


class AuthenticationError(APIStatusError):
    """401: no key, a malformed header, an unknown, revoked or expired key."""


class PermissionDeniedError(APIStatusError):
    """403: the key lacks the scope or the API, the account is suspended or at its
    spend limit."""


class NotFoundError(APIStatusError):
    """404: an unknown task, API or route."""


class ConflictError(APIStatusError):
    """409: a task that can no longer be cancelled, or an idempotent request still
    being answered."""


class UnprocessableEntityError(APIStatusError):
    """422: an Idempotency-Key used again with another body."""


class RateLimitError(APIStatusError):
    """429: a rate limit was reached. `retry_after` is the Retry-After header in
    seconds (None when the answer had none)."""


class InternalServerError(APIStatusError):
    """Any 5xx: the service failed or is unavailable."""


class APIConnectionError(APIError):
    """No answer: the connection failed or broke, or the request timed out."""

    def __init__(self, message: str = "Connection error.", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)


class APITimeoutError(APIConnectionError):
    """The request did not get its answer within the client's timeout."""

    def __init__(self, message: str = "Request timed out.", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)


class WaitTimeoutError(TaskgateError):
    """`tasks.wait` gave up: the task did not end within the timeout. `task` is the
    task as last seen (still queued or running)."""

    task_id: str
    task: Optional[Any]

    def __init__(self, message: str, *, task_id: str, task: Optional[Any] = None) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.task = task


_STATUS_CLASSES: Dict[int, Type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def error_class_for(status: int) -> Type[APIStatusError]:
    """The class an answer with this status is raised as."""
    if status >= 500:
        return InternalServerError
    return _STATUS_CLASSES.get(status, APIStatusError)
