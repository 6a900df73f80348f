"""Fixtures for the server tests: real `python -m tts_server` processes on free loopback ports.

Each server is a fresh process with the real offline Kokoro weights (seconds to load and warm
up on a shared 2-core machine). The plain server is the session's (`tests/conftest.py`
`server`); these are the ones with settings of their own, stopped (SIGTERM, then SIGKILL) when
their module or test ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.servers import ServerProcess


@pytest.fixture(scope="module")
def bounded_server() -> Iterator[ServerProcess]:
    """A server with MAX_QUEUE_DEPTH=2, ready; one module uses it, so it ends with it
    (each server holds about 0.9 GB)."""
    process = ServerProcess({"MAX_QUEUE_DEPTH": "2"})
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.fixture
def start_server() -> Iterator[Any]:
    """Start a server with extra env for one test; stopped after it."""
    started: list[ServerProcess] = []

    def start(env: dict[str, str] | None = None) -> ServerProcess:
        process = ServerProcess(env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
