"""Fixtures for the tests against a real server: COMPUTER_BASE_URL and COMPUTER_API_KEY name it (the tap test
test/clients/python-sdk.test.ts starts one on the container substrate and sets both). One machine is shared
by the whole session: creating machines is the slow part."""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from computer import Computer, Machine


@pytest.fixture(scope="session")
def server() -> tuple[str, str]:
    url, key = os.environ.get("COMPUTER_BASE_URL"), os.environ.get("COMPUTER_API_KEY")
    if not url or not key:
        pytest.fail("set COMPUTER_BASE_URL and COMPUTER_API_KEY to a running server and an API key (see README)")
    return url, key


@pytest.fixture(scope="session")
def cx(server: tuple[str, str]) -> Iterator[Computer]:
    # Generous retries: a machine just created or forked answers 503 until its desktop is up.
    with Computer(base_url=server[0], api_key=server[1], retries=60) as c:
        yield c


@pytest.fixture(scope="session")
def machine(cx: Computer) -> Iterator[Machine]:
    m = cx.create_machine({"name": "py-sdk"})
    assert m.record is not None and m.record["state"] == "running"
    try:
        yield m
    finally:
        m.delete()

