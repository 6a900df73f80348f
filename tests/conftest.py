"""Fixtures every test folder may use: where the repository and its reference artifacts are,
the real servers that tests share for the whole session (see docs/testing.md), and the session's
headless Chromium.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chromium import Browser, Page, why_no_browser
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


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """One headless Chromium for the session (skips, saying why, where none is installed)."""
    if (reason := why_no_browser()) is not None:
        pytest.skip(reason)
    with Browser(tmp_path_factory.mktemp("chromium-profile")) as browser:
        yield browser


@pytest.fixture
def browser_page(chromium: Browser) -> Iterator[Page]:
    """A fresh tab of the session's Chromium, closed after the test."""
    page = chromium.new_page()
    yield page
    page.close()
