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


CORPORA = Path(__file__).resolve().parent / "corpora"


@pytest.fixture(scope="session")
def live_server(child_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory):
    """One real `python -m tts_server` (real offline weights) on a free loopback port."""
    from tts_bench.measure.local_server import LocalServer

    log = tmp_path_factory.mktemp("server") / "server.log"
    with LocalServer(env=child_env, log_path=log) as server:
        server.wait_ready(timeout_s=600)
        yield server


@pytest.fixture(scope="session")
def http_ladder(live_server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real ladder through `tts-bench qmax`: local-http, two-sentence texts, rungs 1 and 2.

    Holds are tiny but long enough for a contended 2-core machine to finish requests in each
    window; the SLO is huge, so both rungs pass and Q_max is the top rung, unbracketed.
    """
    from tts_bench.cli import main

    out = tmp_path_factory.mktemp("http-ladder")
    code = main(
        [
            "qmax", "--host", live_server.url, "--rungs", "1,2", "--hold-s", "24",
            "--measure-s", "16", "--idle-s", "0", "--slo-ms", "600000",
            "--corpus", str(CORPORA / "two_sentences.txt"), "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    (artifact,) = out.glob("qmax-*.json")
    return artifact
