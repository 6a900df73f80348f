"""Fixtures every test folder may use: where the repository and its reference artifacts are,
and the real servers that tests share for the whole session (see docs/testing.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import ServerProcess

REPO = Path(__file__).resolve().parent.parent
MEASUREMENTS = REPO / "measurements"
REFERENCE_QMAX = MEASUREMENTS / "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json"
REFERENCE_TTOTAL = MEASUREMENTS / "ttotal-kokoro-82m-force-desired-g5xlarge-8b1b96bc.json"
REFERENCE_PLAN = MEASUREMENTS / "plan-kokoro-82m-g5xlarge-8b1b96bc.json"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def reference_qmax_path() -> Path:
    return REFERENCE_QMAX


@pytest.fixture(scope="session")
def reference_ttotal_path() -> Path:
    return REFERENCE_TTOTAL


@pytest.fixture(scope="session")
def reference_plan_path() -> Path:
    return REFERENCE_PLAN


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    """One unbounded server with default settings (onnx, the offline weights), ready, for the
    whole session: the server tests' requests, the real ladders, the fuzzing. Use it only to
    send requests; a test that needs other settings, a drain or a kill starts its own. A test
    that reads the log for what it caused reads from `server.mark()` taken before."""
    process = ServerProcess()
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()
