"""Fixtures for the ladder's tests: the repository, a child-process environment, a real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "loadtest" / "qmax.py"
SHAPE_PROBE = Path(__file__).resolve().parent / "shape_probe.py"


@pytest.fixture(scope="session")
def child_env() -> dict[str, str]:
    """This checkout first on the import path of every child process (Locust, the server)."""
    env = dict(os.environ)
    paths = [str(REPO), str(REPO / "container")]
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    return env


@pytest.fixture(scope="session")
def tick_answers(child_env: dict[str, str]) -> Callable[[dict, list[float]], list]:
    """tick() of the ladder shape at given run times, in a child process (Locust patches gevent)."""

    def ask(settings: dict, times: list[float]) -> list:
        out = subprocess.run(
            [sys.executable, str(SHAPE_PROBE), str(LOCUSTFILE), json.dumps(settings), *map(str, times)],
            capture_output=True, text=True, env=child_env, timeout=60, check=True,
        )  # fmt: skip
        return json.loads(out.stdout.strip().splitlines()[-1])

    return ask


@pytest.fixture
def unused_port() -> int:
    """A loopback port nothing listens on (bound, read, released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
