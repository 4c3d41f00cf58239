"""Receiving Taskgate's webhooks: check a delivery's signature and read its event.

Taskgate signs every delivery as Standard Webhooks 1.0 does, so this module and the
official `standardwebhooks` package accept the same deliveries:

    from taskgate.webhooks import verify, WebhookVerificationError

    try:
        event = verify(raw_body, request.headers, "whsec_...")
    except WebhookVerificationError:
        ...  # answer 400: not from Taskgate, altered, or too old
    if event.type == "task.succeeded":
        print(event.data["id"], event.data.get("output"))

Verify the body exactly as it arrived (the raw bytes), never a re-serialized copy.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from typing import Any, Dict, Mapping, Optional, Union

from ._errors import TaskgateError
from ._models import Task

__all__ = [
    "DEFAULT_TOLERANCE",
    "WebhookEvent",
    "WebhookVerificationError",
    "verify",
]

#: How far, in seconds, a delivery's `webhook-timestamp` may be from this machine's
#: clock, either way (the specification's recommendation).
DEFAULT_TOLERANCE = 300

_SECRET_PREFIX = "whsec_"
_TIMESTAMP = re.compile(r"[0-9]{1,15}")


class WebhookVerificationError(TaskgateError):
    """A delivery that cannot be trusted: a required header missing, no signature
    matching the secret, a timestamp outside the tolerance, a body that is not an
    event, or a secret that is not one (`whsec_` and base64)."""


class WebhookEvent(Dict[str, Any]):
    """A verified event: the parsed JSON body (`{type, timestamp, data}`, a dict, as
    the `standardwebhooks` package returns it), with typed attributes.

    - `type`: `task.running`, `task.succeeded`, `task.failed`, `task.cancelled` or
      `webhook.test`;
    - `timestamp`: when the event happened (RFC 3339 text);
    - `data`: for a `task.*` event the task as `GET /api/v1/tasks/{id}` shows it,
      without `input`; `output` is left out when it was too large, and then
      `data["output_omitted"]` is `True` (fetch the task for it). For `webhook.test`,
      a small object describing the test;
    - `task`: `data` as a `taskgate.Task` for a `task.*` event, else None;
    - `message_id`: the `webhook-id` header (`msg_…`), the same on every retry and
      replay of this event: use it to process each event once.
    """

    message_id: str

    def __init__(self, body: Mapping[str, Any], message_id: str) -> None:
        super().__init__(body)
        self.message_id = message_id

    @property
    def type(self) -> str:
        value = self.get("type")
        return value if isinstance(value, str) else ""

    @property
    def timestamp(self) -> Optional[str]:
        return self.get("timestamp")

    @property
    def data(self) -> Dict[str, Any]:
        data = self.get("data")
        return data if isinstance(data, dict) else {}

    @property
    def output_omitted(self) -> bool:
        """Whether the task's `output` was left out of the event for its size."""
        return self.data.get("output_omitted") is True

    @property
    def task(self) -> Optional[Task]:
        if not self.type.startswith("task.") or not isinstance(self.get("data"), dict):
            return None
        return Task.from_dict(self.data)

    def __repr__(self) -> str:
        return f"WebhookEvent({dict.__repr__(self)}, message_id={self.message_id!r})"


def verify(
    payload: Union[bytes, bytearray, memoryview, str],
    headers: Mapping[str, Any],
    secret: str,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
) -> WebhookEvent:
    """Verify a delivery and return its event.

    `payload` is the request's body exactly as received (bytes, or text that will be
    encoded as UTF-8); `headers` any mapping of its headers (looked up without regard
    to case: Flask's, Django's, Starlette's and httpx's headers, or a dict); `secret`
    the endpoint's signing secret, `whsec_…` (the prefix may be left out).

    Accepted when one of the `v1` signatures of `webhook-signature` (several, separated
    by spaces, while a secret rotation overlaps) is the HMAC-SHA256 of
    `{webhook-id}.{webhook-timestamp}.{payload}` under the secret, compared in constant
    time, and `webhook-timestamp` is within `tolerance` seconds of now, either way.

    Raises `WebhookVerificationError` otherwise.
    """
    key = _key(secret)
    if tolerance < 0:
        raise ValueError("tolerance must not be negative")
    if isinstance(payload, str):
        body = payload.encode("utf-8")
    elif isinstance(payload, (bytes, bytearray, memoryview)):
        body = bytes(payload)
    else:
        raise TypeError(f"payload must be bytes or str, not {type(payload).__name__}")

    found = _headers(headers)
    msg_id = found.get("webhook-id")
    timestamp = found.get("webhook-timestamp")
    signatures = found.get("webhook-signature")
    missing = [
        name
        for name, value in (
            ("webhook-id", msg_id),
            ("webhook-timestamp", timestamp),
            ("webhook-signature", signatures),
        )
        if not value
    ]
    if missing or msg_id is None or timestamp is None or signatures is None:
        raise WebhookVerificationError(f"missing webhook header(s): {', '.join(missing)}")

    timestamp = timestamp.strip()
    if not _TIMESTAMP.fullmatch(timestamp):
        raise WebhookVerificationError("invalid webhook-timestamp header")
    now = _now()
    if int(timestamp) < now - tolerance:
        raise WebhookVerificationError("message timestamp too old")
    if int(timestamp) > now + tolerance:
        raise WebhookVerificationError("message timestamp too new")

    expected = hmac.new(
        key, msg_id.encode("utf-8") + b"." + timestamp.encode("ascii") + b"." + body, hashlib.sha256
    ).digest()
    if not any(hmac.compare_digest(expected, given) for given in _signatures(signatures)):
        raise WebhookVerificationError("no matching signature found")

    try:
        event = json.loads(body)
    except ValueError as err:
        raise WebhookVerificationError(f"the payload is not JSON: {err}") from None
    if not isinstance(event, dict):
        raise WebhookVerificationError("the payload is not a JSON object")
    return WebhookEvent(event, msg_id)


def _now() -> float:
    return time.time()


def _key(secret: str) -> bytes:
    if not isinstance(secret, str):
        raise WebhookVerificationError("the webhook secret must be a str (whsec_…)")
    text = secret.strip()
    if text.startswith(_SECRET_PREFIX):
        text = text[len(_SECRET_PREFIX) :]
    try:
        key = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise WebhookVerificationError("invalid webhook secret: not whsec_ and base64") from None
    if not key:
        raise WebhookVerificationError("invalid webhook secret: empty")
    return key


def _headers(headers: Mapping[str, Any]) -> Dict[str, Optional[str]]:
    wanted = ("webhook-id", "webhook-timestamp", "webhook-signature")
    found: Dict[str, Optional[str]] = {}
    for name, value in headers.items():
        lower = str(name).lower()
        if lower not in wanted:
            continue
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        elif isinstance(value, (list, tuple)):
            value = " ".join(v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in value)
        found[lower] = str(value)
    return found


def _signatures(header: str) -> list:
    out = []
    for item in header.split(" "):
        version, sep, b64 = item.partition(",")
        if not sep or version != "v1":
            continue
        try:
            out.append(base64.b64decode(b64, validate=True))
        except (binascii.Error, ValueError):
            continue
    return out
