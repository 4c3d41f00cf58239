"""Makes webhooks.json, the Go client's webhook vectors, with the official
`standardwebhooks` Python package (the Go client may use nothing outside the
standard library, and no Go package of Standard Webhooks is at hand here).

    python3 clients/go/testdata/webhooks_gen.py > clients/go/testdata/webhooks.json

Deterministic: the secrets, ids, bodies and times are fixed, so running it again
gives the same file (clients/python/tests/test_webhooks.py checks that it does, and
that the Python client agrees with every case).

Each case: `payload` (the body as text), `headers`, `secret`, `now` (the receiver's
clock, Unix seconds), and `valid`; a valid one also has `type`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime, timezone

from standardwebhooks import Webhook


def secret(label: str) -> str:
    return "whsec_" + base64.b64encode(hashlib.sha256(label.encode()).digest()).decode()


SECRET = secret("taskgate webhook vectors: the endpoint's secret")
OLD_SECRET = secret("taskgate webhook vectors: the secret before a rotation")
OTHER_SECRET = secret("taskgate webhook vectors: another endpoint's secret")
T = 1767225600  # 2026-01-01T00:00:00Z
MSG = "msg_01JGQ4Z4V6X8WB3N2Y7K5M9RTD"


def body(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


TASK = {
    "id": "task_01JGQ4YZ0A8E6W3V9X2B5N7MKQ",
    "object": "task",
    "api": "sentiment",
    "mode": "live",
    "status": "succeeded",
    "output": {"label": "positive", "score": 0.98, "note": "très bien ✓"},
    "usage": {"units": 1, "cost_usd": "0.000100"},
    "metadata": {"order": "42"},
    "created_at": "2025-12-31T23:59:58.120Z",
    "started_at": "2025-12-31T23:59:58.200Z",
    "completed_at": "2025-12-31T23:59:59.480Z",
    "duration_ms": 1280,
}
SUCCEEDED = body({"type": "task.succeeded", "timestamp": "2025-12-31T23:59:59.480Z", "data": TASK})
OMITTED = body(
    {
        "type": "task.succeeded",
        "timestamp": "2025-12-31T23:59:59.480Z",
        "data": {k: v for k, v in TASK.items() if k != "output"} | {"output_omitted": True},
    }
)
FAILED = body(
    {
        "type": "task.failed",
        "timestamp": "2025-12-31T23:59:59.480Z",
        "data": {k: v for k, v in TASK.items() if k != "output"}
        | {
            "status": "failed",
            "mode": "test",
            "error": {"code": "upstream_error", "message": "the upstream answered 500", "upstream_status": 500},
        },
    }
)
TEST = body({"type": "webhook.test", "timestamp": "2026-01-01T00:00:00Z", "data": {"endpoint_id": "whe_01JGQ4Z0", "mode": "live"}})


def sign(secret: str, payload: str, msg_id: str = MSG, at: int = T) -> str:
    return Webhook(secret).sign(msg_id, datetime.fromtimestamp(at, tz=timezone.utc), payload)


def headers(signature: str, msg_id: str = MSG, at: int = T) -> dict:
    return {"webhook-id": msg_id, "webhook-timestamp": str(at), "webhook-signature": signature}


def case(name: str, payload: str, hdrs: dict, *, valid: bool, now: int = T, secret: str = SECRET) -> dict:
    out = {"name": name, "payload": payload, "headers": hdrs, "secret": secret, "now": now, "valid": valid}
    if valid:
        out["type"] = json.loads(payload)["type"]
    return out


def cases() -> list:
    good = headers(sign(SECRET, SUCCEEDED))
    without = lambda name: {k: v for k, v in good.items() if k != name}  # noqa: E731
    return [
        case("task.succeeded", SUCCEEDED, good, valid=True),
        case("task.failed in test mode", FAILED, headers(sign(SECRET, FAILED)), valid=True),
        case("output omitted", OMITTED, headers(sign(SECRET, OMITTED)), valid=True),
        case("webhook.test", TEST, headers(sign(SECRET, TEST)), valid=True),
        case(
            "rotation: the first signature is another secret's, the second matches",
            SUCCEEDED,
            headers(sign(OLD_SECRET, SUCCEEDED) + " " + sign(SECRET, SUCCEEDED)),
            valid=True,
        ),
        case(
            "rotation: verified with the old secret",
            SUCCEEDED,
            headers(sign(SECRET, SUCCEEDED) + " " + sign(OLD_SECRET, SUCCEEDED)),
            valid=True,
            secret=OLD_SECRET,
        ),
        case("timestamp 5 minutes old", SUCCEEDED, good, valid=True, now=T + 300),
        case("timestamp 5 minutes ahead", SUCCEEDED, good, valid=True, now=T - 300),
        case("tampered body", SUCCEEDED.replace("positive", "negative"), good, valid=False),
        case("wrong secret", SUCCEEDED, good, valid=False, secret=OTHER_SECRET),
        case("stale timestamp", SUCCEEDED, good, valid=False, now=T + 301),
        case("future timestamp", SUCCEEDED, good, valid=False, now=T - 301),
        case("other timestamp than signed", SUCCEEDED, headers(good["webhook-signature"], at=T + 1), valid=False),
        case("other id than signed", SUCCEEDED, headers(good["webhook-signature"], msg_id=MSG + "X"), valid=False),
        case("no webhook-id", SUCCEEDED, without("webhook-id"), valid=False),
        case("no webhook-timestamp", SUCCEEDED, without("webhook-timestamp"), valid=False),
        case("no webhook-signature", SUCCEEDED, without("webhook-signature"), valid=False),
        case(
            "only an unknown signature version",
            SUCCEEDED,
            headers(good["webhook-signature"].replace("v1,", "v2,")),
            valid=False,
        ),
        case(
            "every rotation signature wrong",
            SUCCEEDED,
            headers(sign(OLD_SECRET, SUCCEEDED) + " " + sign(OTHER_SECRET, SUCCEEDED)),
            valid=False,
        ),
    ]


def document() -> str:
    return json.dumps({"generator": "webhooks_gen.py (standardwebhooks, Python)", "cases": cases()}, indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(document(), end="")
