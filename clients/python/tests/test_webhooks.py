"""taskgate.webhooks.verify: Standard Webhooks 1.0 signatures, checked against the
specification's reference vector and the official `standardwebhooks` package (a test
dependency). Needs no server."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict

import httpx
import pytest
from standardwebhooks import Webhook

import taskgate
from taskgate import Task, TaskgateError
from taskgate import webhooks
from taskgate.webhooks import WebhookEvent, WebhookVerificationError, verify

# The example of the specification's reference libraries' tests (and of
# crates/taskgate-core/src/webhook.rs).
REF_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
REF_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
REF_TIMESTAMP = 1614265330
REF_BODY = '{"test": 2432232314}'
REF_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

GO_VECTORS = Path(__file__).resolve().parents[2] / "go" / "testdata"

EVENT = {
    "type": "task.succeeded",
    "timestamp": "2026-01-01T00:00:00.000Z",
    "data": {
        "id": "task_01JGQ4YZ0A8E6W3V9X2B5N7MKQ",
        "object": "task",
        "api": "sentiment",
        "mode": "live",
        "status": "succeeded",
        "output": {"label": "positive", "note": "très bien ✓"},
        "usage": {"units": 1, "cost_usd": "0.000100"},
        "metadata": {},
        "created_at": "2025-12-31T23:59:58.120Z",
    },
}


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def signed(secret: str, body: str, *, msg_id: str = "msg_test", at: float = 0) -> Dict[str, str]:
    """Headers for `body` as the official package signs it, at `at` (now by default)."""
    when = datetime.fromtimestamp(at or time.time(), tz=timezone.utc)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, when, body),
    }


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch):
    """Sets the receiver's clock: clock(unix_seconds)."""

    def set_now(now: float) -> None:
        monkeypatch.setattr(webhooks, "_now", lambda: float(now))

    return set_now


def test_exports() -> None:
    assert taskgate.webhooks.verify is verify
    assert taskgate.WebhookVerificationError is WebhookVerificationError
    assert taskgate.WebhookEvent is WebhookEvent
    assert issubclass(WebhookVerificationError, TaskgateError)


def test_reference_vector(clock) -> None:
    headers = {"webhook-id": REF_ID, "webhook-timestamp": str(REF_TIMESTAMP), "webhook-signature": REF_SIGNATURE}
    clock(REF_TIMESTAMP)
    event = verify(REF_BODY, headers, REF_SECRET)
    assert event == {"test": 2432232314}
    assert event.message_id == REF_ID
    # Bytes give the same; the key may be given without its prefix, as the official
    # libraries allow.
    assert verify(REF_BODY.encode(), headers, REF_SECRET) == event
    assert verify(REF_BODY, headers, REF_SECRET[len("whsec_") :]) == event
    # One byte of body, id or timestamp changed: refused.
    with pytest.raises(WebhookVerificationError, match="no matching signature"):
        verify('{"test": 2432232315}', headers, REF_SECRET)
    with pytest.raises(WebhookVerificationError):
        verify(REF_BODY, {**headers, "webhook-id": REF_ID + "x"}, REF_SECRET)
    with pytest.raises(WebhookVerificationError):
        verify(REF_BODY, {**headers, "webhook-timestamp": str(REF_TIMESTAMP + 1)}, REF_SECRET)


def test_round_trip_signed_by_the_official_package() -> None:
    secret = new_secret()
    body = json.dumps(EVENT, ensure_ascii=False)
    headers = signed(secret, body, msg_id="msg_01JGQ4Z4V6X8WB3N2Y7K5M9RTD")
    for payload in (body, body.encode("utf-8"), bytearray(body.encode("utf-8"))):
        event = verify(payload, headers, secret)
        assert isinstance(event, WebhookEvent)
        # The parsed body, as the official package returns it.
        assert event == Webhook(secret).verify(body, headers) == EVENT
        assert event.type == "task.succeeded"
        assert event.timestamp == "2026-01-01T00:00:00.000Z"
        assert event.message_id == "msg_01JGQ4Z4V6X8WB3N2Y7K5M9RTD"
        assert event.data["output"]["note"] == "très bien ✓"
        assert not event.output_omitted
        task = event.task
        assert isinstance(task, Task)
        assert task.id == "task_01JGQ4YZ0A8E6W3V9X2B5N7MKQ"
        assert task.status == "succeeded"
        assert task.usage.units == 1


def test_headers_any_case_and_mapping() -> None:
    secret = new_secret()
    body = json.dumps(EVENT)
    headers = signed(secret, body)
    upper = {k.upper(): v for k, v in headers.items()}
    title = {"-".join(p.title() for p in k.split("-")): v for k, v in headers.items()}
    for h in (upper, title, httpx.Headers(headers), {**headers, "content-type": "application/json"}):
        assert verify(body, h, secret).type == "task.succeeded"


def test_rotation_two_signatures_either_matching(clock) -> None:
    new, old, other = new_secret(), new_secret(), new_secret()
    body = json.dumps(EVENT)
    clock(1767225600)
    h_old, h_new = signed(old, body, at=1767225600), signed(new, body, at=1767225600)
    # Only the second signature is the receiver's: accepted.
    both = {**h_new, "webhook-signature": f"{h_old['webhook-signature']} {h_new['webhook-signature']}"}
    assert verify(body, both, new).type == "task.succeeded"
    # A receiver that still has the old secret accepts it too (the first one matches).
    assert verify(body, both, old).type == "task.succeeded"
    # A secret neither signed with: refused.
    with pytest.raises(WebhookVerificationError, match="no matching signature"):
        verify(body, both, other)
    # Unknown versions and junk are skipped, not fatal.
    junk = {**h_new, "webhook-signature": f"v2,abc v1,!!! nonsense {h_new['webhook-signature']}"}
    assert verify(body, junk, new).type == "task.succeeded"


def test_event_with_output_omitted_and_test_event() -> None:
    secret = new_secret()
    data = {k: v for k, v in EVENT["data"].items() if k != "output"}  # type: ignore[union-attr]
    omitted = json.dumps({**EVENT, "data": {**data, "output_omitted": True}})
    event = verify(omitted, signed(secret, omitted), secret)
    assert event.output_omitted
    assert event.task is not None and event.task.output is None
    assert event.task.to_dict()["output_omitted"] is True

    test = json.dumps({"type": "webhook.test", "timestamp": "2026-01-01T00:00:00Z", "data": {"mode": "test"}})
    event = verify(test, signed(secret, test), secret)
    assert event.type == "webhook.test"
    assert event.data == {"mode": "test"}
    assert event.task is None


def test_rejects_tampered_body_and_wrong_secret() -> None:
    secret = new_secret()
    body = json.dumps(EVENT)
    headers = signed(secret, body)
    with pytest.raises(WebhookVerificationError, match="no matching signature"):
        verify(body.replace("positive", "negative"), headers, secret)
    with pytest.raises(WebhookVerificationError, match="no matching signature"):
        verify(body + " ", headers, secret)
    with pytest.raises(WebhookVerificationError, match="no matching signature"):
        verify(body, headers, new_secret())


def test_rejects_stale_and_future_timestamps(clock) -> None:
    secret = new_secret()
    body = json.dumps(EVENT)
    t = 1767225600
    headers = signed(secret, body, at=t)
    for now in (t - 300, t, t + 300):
        clock(now)
        assert verify(body, headers, secret).type == "task.succeeded"
    clock(t + 301)
    with pytest.raises(WebhookVerificationError, match="too old"):
        verify(body, headers, secret)
    clock(t - 301)
    with pytest.raises(WebhookVerificationError, match="too new"):
        verify(body, headers, secret)
    # A wider tolerance, when asked for.
    clock(t + 3600)
    assert verify(body, headers, secret, tolerance=3600).type == "task.succeeded"
    with pytest.raises(ValueError):
        verify(body, headers, secret, tolerance=-1)


@pytest.mark.parametrize("timestamp", ["", "abc", "1767225600.5", "-1767225600", "+1767225600", "1_767_225_600"])
def test_rejects_malformed_timestamps(clock, timestamp: str) -> None:
    secret = new_secret()
    body = json.dumps(EVENT)
    clock(1767225600)
    headers = {**signed(secret, body, at=1767225600), "webhook-timestamp": timestamp}
    with pytest.raises(WebhookVerificationError):
        verify(body, headers, secret)


@pytest.mark.parametrize("name", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_rejects_missing_headers(name: str) -> None:
    secret = new_secret()
    body = json.dumps(EVENT)
    headers = signed(secret, body)
    without = {k: v for k, v in headers.items() if k != name}
    with pytest.raises(WebhookVerificationError, match=f"missing webhook header.*{name}"):
        verify(body, without, secret)
    with pytest.raises(WebhookVerificationError, match="missing"):
        verify(body, {**headers, name: ""}, secret)
    with pytest.raises(WebhookVerificationError, match="missing"):
        verify(body, {}, secret)


@pytest.mark.parametrize("bad", ["", "whsec_", "whsec_not base64!", "tg_live_abc-def", "whsec_%%%%"])
def test_rejects_bad_secrets(bad: str) -> None:
    body = json.dumps(EVENT)
    headers = signed(new_secret(), body)
    with pytest.raises(WebhookVerificationError, match="secret"):
        verify(body, headers, bad)


def test_rejects_a_signed_body_that_is_not_an_event() -> None:
    secret = new_secret()
    for body in ("not json", "[1, 2]"):
        with pytest.raises(WebhookVerificationError, match="JSON"):
            verify(body, signed(secret, body), secret)


def load_generator() -> Any:
    spec = importlib.util.spec_from_file_location("webhooks_gen", GO_VECTORS / "webhooks_gen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_go_fixture_is_what_the_official_package_signs() -> None:
    """clients/go/testdata/webhooks.json is what webhooks_gen.py makes with the
    official package now (regenerate it if this fails)."""
    assert (GO_VECTORS / "webhooks.json").read_text(encoding="utf-8") == load_generator().document()


def test_go_fixture_cases_agree(clock) -> None:
    doc = json.loads((GO_VECTORS / "webhooks.json").read_text(encoding="utf-8"))
    assert len(doc["cases"]) >= 15
    for case in doc["cases"]:
        clock(case["now"])
        if case["valid"]:
            event = verify(case["payload"], case["headers"], case["secret"])
            assert event.type == case["type"], case["name"]
            assert event.message_id == case["headers"]["webhook-id"]
        else:
            with pytest.raises(WebhookVerificationError):
                verify(case["payload"], case["headers"], case["secret"])
                pytest.fail(f"accepted: {case['name']}")
