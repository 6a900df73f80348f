"""Fixtures every test folder may use: where the repository and its reference artifacts are."""

from __future__ import annotations

from pathlib import Path

import pytest

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
