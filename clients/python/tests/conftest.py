"""Fixtures: clients of the real server that scripts/with-server.sh started (its
address and keys are in the environment), and small local HTTP stubs."""

from __future__ import annotations

import os
import uuid
from typing import Iterator

import pytest

from taskgate import Taskgate

from .stubs import StubServer

REQUIRED = (
    "TASKGATE_BASE_URL",
    "TASKGATE_API_KEY",
    "TASKGATE_TEST_KEY",
    "TASKGATE_RESTRICTED_KEY",
    "TASKGATE_LIMITED_KEY",
)


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        # Not a skip: these tests exist to run against a real server.
        pytest.fail(
            f"{name} is not set: run the tests through scripts/with-server.sh "
            "(see clients/python/README.md, 'Running the tests')",
            pytrace=False,
        )
    return value


@pytest.fixture(scope="session")
def base_url() -> str:
    for name in REQUIRED:
        env(name)
    return env("TASKGATE_BASE_URL")


@pytest.fixture
def live(base_url: str) -> Iterator[Taskgate]:
    with Taskgate(api_key=env("TASKGATE_API_KEY"), base_url=base_url) as tg:
        yield tg


@pytest.fixture
def test_mode(base_url: str) -> Iterator[Taskgate]:
    """A client with the test key: sandbox outputs and `sandbox` controls."""
    with Taskgate(api_key=env("TASKGATE_TEST_KEY"), base_url=base_url) as tg:
        yield tg


@pytest.fixture
def restricted(base_url: str) -> Iterator[Taskgate]:
    with Taskgate(api_key=env("TASKGATE_RESTRICTED_KEY"), base_url=base_url) as tg:
        yield tg


@pytest.fixture
def stub() -> Iterator[StubServer]:
    server = StubServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def marker() -> str:
    """A value no other test uses, to find this test's tasks by their metadata."""
    return uuid.uuid4().hex
