"""The distributed ladder: one Locust master and one worker process on loopback, against the
session's real server over the WebSocket transport (curve instances serve /invocations only,
so this one stays on Kokoro; one rung of one user, which a 1 ms SLO fails)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.measure.samples import read_samples, samples_path

from .conftest import CORPORA, LOCUSTFILE, REPO

pytestmark = pytest.mark.slow

# The window (the hold less 6 s for the worker to connect and its user to start) is three lone
# requests long as the machine runs now, at least 4 s: a few finished requests however loaded.
WINDOW_PER_LONE_REQUEST, MIN_WINDOW_S, WARM_UP_S = 3.0, 4.0, 6.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_distributed_ladder_stops_after_the_first_failing_rung(server, child_env, tmp_path):
    """One master and one worker process on loopback, the WebSocket transport, a 1 ms SLO.

    The hold scales with a lone request as the machine runs now, so the c=1 window holds a few
    finished requests however loaded (a clone's fixed 8 s window once finished none)."""
    from tts_bench.measure.corpus import load_corpus
    from tts_bench.measure.ttotal.probe import speak

    lone = [speak(server.url, u) for u in load_corpus(CORPORA / "short.txt")[:2]]
    assert all(s.ok for s in lone), [s.detail for s in lone]
    window_s = max(MIN_WINDOW_S, WINDOW_PER_LONE_REQUEST * max(s.end - s.start for s in lone))
    hold_s = WARM_UP_S + window_s
    port = free_port()
    common = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]
    master = subprocess.Popen(
        [
            *common, "--master", "--headless", "--expect-workers", "1",
            "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
            "--host", server.url, "--transport", "local-ws", "--rungs", "1,2",
            "--hold-s", f"{hold_s:.0f}", "--measure-s", f"{window_s:.0f}", "--idle-s", "1",
            "--slo-ms", "1",
            "--corpus", str(CORPORA / "short.txt"), "--out", str(tmp_path),
        ],
        cwd=REPO, env=child_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    worker = subprocess.Popen(
        [*common, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
        cwd=REPO, env=child_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        out, _ = master.communicate(timeout=180)
        worker.wait(timeout=30)
    finally:
        for process in (master, worker):
            if process.poll() is None:
                process.kill()
                process.wait()
    assert master.returncode == 0, out[-3000:]
    (path,) = tmp_path.glob("qmax-kokoro-82m-local-ws-*.json")
    artifact = load_artifact(path, QmaxArtifact)
    # c=1 misses a 1 ms SLO: the ladder stops there, and that failure brackets Q_max (none).
    assert [r.concurrency for r in artifact.rungs] == [1]
    assert artifact.rungs[0].usable, artifact.rungs[0].unusable_reason
    assert not artifact.rungs[0].meets_slo
    assert (artifact.q_max, artifact.bracketed) == (None, True)
    workers = {s.worker for s in read_samples(samples_path(path))}
    assert workers == {f"{socket.gethostname()}:{worker.pid}"}  # the worker's, not the master's
    assert master.pid != worker.pid and os.getpid() not in (master.pid, worker.pid)
    assert "rung 1/2 c=1" in out  # progress was shown
