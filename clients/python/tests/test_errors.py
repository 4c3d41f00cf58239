"""Each error class, from the real server where it can make it, from a stub where
it cannot (5xx, other statuses, a dead port, a slow answer)."""

from __future__ import annotations

import socket
import uuid

import pytest

import taskgate
from taskgate import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    Taskgate,
    TaskgateError,
    UnprocessableEntityError,
)

from .conftest import env
from .stubs import StubServer, fail, ok


def assert_envelope_fields(err: taskgate.APIError, status: int, type_: str, code: str) -> None:
    assert isinstance(err, TaskgateError)
    assert isinstance(err, APIStatusError)
    assert err.status == status
    assert err.status_code == status
    assert err.type == type_
    assert err.code == code
    assert err.message
    assert err.request_id is not None and err.request_id.startswith("req_")
    assert err.request_id in str(err)


def test_401_bad_key(base_url: str) -> None:
    with Taskgate(api_key="tg_notarealkey", base_url=base_url) as tg:
        with pytest.raises(AuthenticationError) as caught:
            tg.tasks.list_page()
        assert_envelope_fields(caught.value, 401, "authentication_error", "invalid_api_key")
        # The last answer's request id is kept for errors too.
        assert tg.last_request_id == caught.value.request_id


def test_403_restricted_key_calling(restricted: Taskgate) -> None:
    with pytest.raises(PermissionDeniedError) as caught:
        restricted.call("sentiment", {"text": "hi"})
    assert_envelope_fields(caught.value, 403, "permission_error", "insufficient_permissions")


def test_404_unknown_task_and_api(live: Taskgate) -> None:
    with pytest.raises(NotFoundError) as caught:
        live.tasks.get("task_01JD2W3KX7ABCDEFGHJKMNPQRS")
    assert_envelope_fields(caught.value, 404, "not_found_error", "task_not_found")
    with pytest.raises(NotFoundError):
        live.tasks.cancel("task_01JD2W3KX7ABCDEFGHJKMNPQRS")
    with pytest.raises(NotFoundError):
        list(live.tasks.stream("task_01JD2W3KX7ABCDEFGHJKMNPQRS"))
    with pytest.raises(NotFoundError):
        live.tasks.wait("task_01JD2W3KX7ABCDEFGHJKMNPQRS", timeout=5)
    with pytest.raises(NotFoundError) as caught:
        live.apis.get("no-such-api")
    assert caught.value.code == "api_not_found"
    with pytest.raises(NotFoundError) as caught:
        live.call("no-such-api", {"text": "hi"})
    assert caught.value.code == "api_not_found"


def test_409_cancel_of_a_succeeded_task(live: Taskgate) -> None:
    task = live.call("sentiment", {"text": "done already"})
    assert task.status == "succeeded"
    with pytest.raises(ConflictError) as caught:
        live.tasks.cancel(task.id)
    assert_envelope_fields(caught.value, 409, "conflict_error", "task_not_cancellable")


def test_422_same_idempotency_key_other_body(live: Taskgate) -> None:
    key = f"reuse-{uuid.uuid4()}"
    first = live.call("sentiment", {"text": "one"}, idempotency_key=key)
    replay = live.call("sentiment", {"text": "one"}, idempotency_key=key)
    assert replay.id == first.id
    with pytest.raises(UnprocessableEntityError) as caught:
        live.call("sentiment", {"text": "two"}, idempotency_key=key)
    assert_envelope_fields(caught.value, 422, "invalid_request_error", "idempotency_key_reused")


def test_400_invalid_input(live: Taskgate) -> None:
    with pytest.raises(BadRequestError) as caught:
        live.call("sentiment", {"txt": "typo"})
    err = caught.value
    assert_envelope_fields(err, 400, "invalid_request_error", "invalid_input")
    assert err.param == "input"  # the first violation: an unknown property
    assert err.details is not None and len(err.details) == 2
    assert {d["path"] for d in err.details} == {"", "/text"}

    with pytest.raises(BadRequestError) as caught:
        live.call("sentiment", {})
    assert caught.value.param == "input.text"

    # A live key may not send sandbox controls.
    with pytest.raises(BadRequestError) as caught:
        live.call("sentiment", {"text": "x"}, sandbox={"delay_ms": 1})
    assert caught.value.code == "invalid_field"
    assert caught.value.param == "sandbox"

    with pytest.raises(BadRequestError) as caught:
        list(live.tasks.list(status="nope"))
    assert caught.value.code == "invalid_parameter"
    assert caught.value.param == "status"


def test_429_limited_key_without_retries(base_url: str) -> None:
    # The limited account's 5 requests a minute are shared by every test of this
    # server run: request until refused rather than counting.
    with Taskgate(api_key=env("TASKGATE_LIMITED_KEY"), base_url=base_url, max_retries=0) as tg:
        refused = None
        for _ in range(10):
            try:
                tg.apis.list_page(limit=1)
            except RateLimitError as err:
                refused = err
                break
            rl = tg.last_rate_limit
            assert rl.limit == 5
            assert rl.remaining is not None and 0 <= rl.remaining < 5
            assert rl.reset is not None and rl.reset > 1_700_000_000
            assert rl.policy is not None and "q=5" in rl.policy
            assert rl.window == "minute"
        assert refused is not None, "the 6th request within a minute is refused"
        assert_envelope_fields(refused, 429, "rate_limit_error", "rate_limit_exceeded")
        assert refused.retry_after is not None and 1 <= refused.retry_after <= 60
        assert refused.details and refused.details[0]["window"] == "minute"
        assert tg.last_rate_limit.remaining == 0
        assert tg.last_rate_limit.retry_after == refused.retry_after


def test_5xx_is_internal_server_error_after_retries(stub: StubServer) -> None:
    stub.script(fail(500, "api_error", "internal_error"))
    with Taskgate(api_key="tg_stub", base_url=stub.url, max_retries=1) as tg:
        with pytest.raises(InternalServerError) as caught:
            tg.tasks.get("task_01JD2W3KX7ABCDEFGHJKMNPQRS")
    assert_envelope_fields(caught.value, 500, "api_error", "internal_error")
    assert len(stub.seen) == 2, "one retry"

    stub.script(fail(503, "api_error", "service_unavailable"))
    with Taskgate(api_key="tg_stub", base_url=stub.url, max_retries=0) as tg:
        with pytest.raises(InternalServerError) as caught:
            tg.apis.get("sentiment")
    assert caught.value.status == 503
    assert len(stub.seen) == 1


def test_other_statuses_are_api_status_error(stub: StubServer) -> None:
    for status, code in ((405, "method_not_allowed"), (413, "payload_too_large"), (418, "teapot")):
        stub.script(fail(status, "invalid_request_error", code))
        with Taskgate(api_key="tg_stub", base_url=stub.url) as tg:
            with pytest.raises(APIStatusError) as caught:
                tg.tasks.get("task_01JD2W3KX7ABCDEFGHJKMNPQRS")
        err = caught.value
        assert type(err) is APIStatusError
        assert (err.status, err.code) == (status, code)
        assert len(stub.seen) == 1, "not retried"


def test_an_answer_that_is_not_the_envelope(stub: StubServer) -> None:
    from .stubs import Reply

    stub.script(Reply(502, None, {"Content-Type": "text/html", "X-Request-Id": "req_html"}, raw=b"<h1>Bad gateway</h1>"))
    with Taskgate(api_key="tg_stub", base_url=stub.url, max_retries=0) as tg:
        with pytest.raises(InternalServerError) as caught:
            tg.tasks.get("task_01JD2W3KX7ABCDEFGHJKMNPQRS")
    assert caught.value.status == 502
    assert caught.value.request_id == "req_html", "from the X-Request-Id header"
    assert "Bad gateway" in caught.value.message

    stub.script(Reply(200, None, {"Content-Type": "text/plain"}, raw=b"hello"))
    with Taskgate(api_key="tg_stub", base_url=stub.url, max_retries=0) as tg:
        with pytest.raises(taskgate.APIError):
            tg.tasks.get("task_01JD2W3KX7ABCDEFGHJKMNPQRS")


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_connection_error_on_a_closed_port() -> None:
    url = f"http://127.0.0.1:{closed_port()}/api/v1"
    with Taskgate(api_key="tg_nobody", base_url=url, max_retries=0) as tg:
        with pytest.raises(APIConnectionError) as caught:
            tg.call("sentiment", {"text": "hi"})
    err = caught.value
    assert isinstance(err, TaskgateError)
    assert not isinstance(err, APIStatusError)
    assert err.status is None and err.request_id is None


def test_timeout_is_api_timeout_error(stub: StubServer) -> None:
    stub.script(ok({"ok": True}))
    stub.replies[0].delay = 1.5
    with Taskgate(api_key="tg_stub", base_url=stub.url, timeout=0.2, max_retries=0) as tg:
        with pytest.raises(APITimeoutError) as caught:
            tg.apis.get("sentiment")
    assert isinstance(caught.value, APIConnectionError)
