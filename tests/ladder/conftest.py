"""Fixtures for the ladder's tests: the repository, a child-process environment, and the
session's two real ladders against the session's plain server (`tests/conftest.py` `server`):
one unbracketed (`http_ladder`) and one bracketed and refined (`refined_ladder`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
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


# The unbracketed ladder's holds: tiny, but long enough for a contended 2-core machine to finish
# requests in each window; an unstable rung (a window third with no finished request, or p95s
# of its thirds more than 10 % apart) keeps its users one more window, up to MAX_HOLD_S.
HOLD_S, MEASURE_S, MAX_HOLD_S = 22.0, 14.0, 36.0


@pytest.fixture(scope="session")
def http_ladder(server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real ladder through `tts-bench qmax`: local-http, two-sentence texts, rungs 1 and 2,
    `--max-hold-s` and `--refine`. The SLO is huge, so both rungs pass and Q_max is the top
    rung, unbracketed (so `--refine` has nothing to bisect)."""
    from tts_bench.cli import main

    out = tmp_path_factory.mktemp("http-ladder")
    code = main(
        [
            "qmax", "--host", server.url, "--rungs", "1,2", "--hold-s", f"{HOLD_S:g}",
            "--measure-s", f"{MEASURE_S:g}", "--idle-s", "0", "--max-hold-s", f"{MAX_HOLD_S:g}",
            "--slo-ms", "60000", "--corpus", str(CORPORA / "two_sentences.txt"),
            "--out", str(out), "--refine",
        ]
    )  # fmt: skip
    assert code == 0
    (artifact,) = out.glob("qmax-*.json")
    return artifact


# c=1's p95 TTFAB is at most about this multiple of a lone request's; c=8 on two cores is well
# past it (eight requests share the engine: each waits for the others' segments).
SLO_MULTIPLE = 2.5
HOLD_PER_LONE_REQUEST = 6.0  # holds long enough for a few requests per window, however loaded


@dataclass(frozen=True)
class CalibratedLadder:
    path: Path
    lone_latency_s: float  # the slowest of a few lone requests, just before the ladder


@pytest.fixture(scope="session")
def refined_ladder(server, tmp_path_factory: pytest.TempPathFactory) -> CalibratedLadder:
    """`tts-bench qmax --refine` on two-sentence texts, rungs 1 and 8, with an SLO and holds
    scaled to this machine's lone-request speed as it is now, so c=1 passes and c=8 fails."""
    from tts_bench.cli import main
    from tts_bench.measure.corpus import load_corpus
    from tts_bench.measure.ttotal.probe import speak

    corpus = CORPORA / "two_sentences.txt"
    lone = [speak(server.url, u) for u in load_corpus(corpus)]
    assert all(s.ok and s.ttfab_s for s in lone), [s.detail for s in lone]
    slo_ms = SLO_MULTIPLE * 1000 * max(s.ttfab_s for s in lone)  # type: ignore[type-var]
    lone_s = max(s.end - s.start for s in lone)
    hold_s = max(20.0, HOLD_PER_LONE_REQUEST * lone_s)
    out = tmp_path_factory.mktemp("refined-ladder")
    code = main(
        [
            "qmax", "--host", server.url, "--rungs", "1,8", "--hold-s", f"{hold_s:.0f}",
            "--measure-s", f"{0.7 * hold_s:.0f}", "--idle-s", "1", "--slo-ms", f"{slo_ms:.0f}",
            "--corpus", str(corpus), "--out", str(out), "--refine",
        ]
    )  # fmt: skip
    assert code == 0
    (path,) = out.glob("qmax-*.json")
    return CalibratedLadder(path, lone_s)
