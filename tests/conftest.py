"""Fixtures every test folder may use (where the repository and its reference artifacts are),
and how the suite is split between pytest-xdist's workers."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MEASUREMENTS = REPO / "measurements"
REFERENCE_QMAX = MEASUREMENTS / "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json"
REFERENCE_TTOTAL = MEASUREMENTS / "ttotal-kokoro-82m-force-desired-g5xlarge-8b1b96bc.json"
REFERENCE_PLAN = MEASUREMENTS / "plan-kokoro-82m-g5xlarge-8b1b96bc.json"


# Modules that share a session fixture too costly to build once per worker (a live server and
# the ladders measured on it) run in one worker; every other module is a group of its own, so
# module fixtures (a local cloud, a server) are built once and tests keep their file order.
SHARED_WORKER = {
    name: "ladder-live"
    for name in (
        "test_live_ladder.py", "test_live_refine.py", "test_live_surge.py", "test_live_hold.py",
        "test_ttotal_report.py", "test_plan_refined.py",
    )
}  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups in its own hook
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.path.relative_to(REPO)
        group = SHARED_WORKER.get(path.name, str(path)) if path.parent.name == "ladder" else path
        item.add_marker(pytest.mark.xdist_group(str(group)))


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
